//! What a store is told when it opens.

use std::path::PathBuf;
use std::time::Duration;

use crate::driver::StorageDriver;
use crate::platform::Platform;

/// Caps on one layer, against decompression bombs. A layer past either cap is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The most bytes a layer may decompress to (tar headers and padding included).
    pub max_layer_bytes: u64,
    /// The most entries a layer's tar may hold.
    pub max_layer_entries: u64,
}

impl Default for Limits {
    /// 16 GiB and a million entries: far above real images, far below a full disk.
    fn default() -> Self {
        Limits {
            max_layer_bytes: 16 << 30,
            max_layer_entries: 1_000_000,
        }
    }
}

/// How a [`Store`](crate::Store) stores and pulls.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// The directory holding `images.json`, `blobs/`, `layers/` and `containers/`; created if
    /// missing.
    pub root: PathBuf,
    /// Registries (`host` or `host:port`, as in references) spoken to over plain HTTP; every
    /// other registry is HTTPS only.
    pub insecure_registries: Vec<String>,
    /// The platform picked from image indexes; this node's by default.
    pub platform: Platform,
    /// Caps on each layer.
    pub limits: Limits,
    /// How many layers one pull downloads and unpacks at once.
    pub parallel_layers: usize,
    /// The longest a registry may take to answer a request, or to send the next bytes of a blob.
    pub request_timeout: Duration,
    /// The longest a connection to a registry may take to open.
    pub connect_timeout: Duration,
    /// How containers' root file systems are made; `None` probes: overlay when a test mount
    /// works, vfs (logging why) when not.
    pub storage_driver: Option<StorageDriver>,
}

impl StoreConfig {
    /// The defaults for a store at `root`: HTTPS only, this node's platform, [`Limits::default`],
    /// three layers at a time, 30 s per request, 10 s per connection, the storage driver probed.
    pub fn new(root: impl Into<PathBuf>) -> StoreConfig {
        StoreConfig {
            root: root.into(),
            insecure_registries: Vec::new(),
            platform: Platform::this_node(),
            limits: Limits::default(),
            parallel_layers: 3,
            request_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
            storage_driver: None,
        }
    }
}

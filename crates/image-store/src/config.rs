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
    /// A pull's progress window (CRI-O's `pull_progress_timeout`): a pull that waits on its
    /// registry for a whole window and receives less than [`min_pull_rate`](Self::min_pull_rate)
    /// in it is cancelled ([`Error::NoProgress`](crate::Error::NoProgress)). `None` (or zero):
    /// never, as CRI-O's default; then only `request_timeout` bounds a pull, chunk by chunk.
    pub progress_timeout: Option<Duration>,
    /// The fewest bytes per second, over a progress window, that count as progress; 0: any
    /// byte does (CRI-O's meaning). A registry that trickles (a few bytes per chunk, each in
    /// time) is only cut by a rate.
    pub min_pull_rate: u64,
    /// How containers' root file systems are made; `None` probes: overlay when a test mount
    /// works, vfs (logging why) when not.
    pub storage_driver: Option<StorageDriver>,
}

impl StoreConfig {
    /// The defaults for a store at `root`: HTTPS only, this node's platform, [`Limits::default`],
    /// three layers at a time, 30 s per request, 10 s per connection, no progress timeout, the
    /// storage driver probed.
    pub fn new(root: impl Into<PathBuf>) -> StoreConfig {
        StoreConfig {
            root: root.into(),
            insecure_registries: Vec::new(),
            platform: Platform::this_node(),
            limits: Limits::default(),
            parallel_layers: 3,
            request_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
            progress_timeout: None,
            min_pull_rate: 0,
            storage_driver: None,
        }
    }
}

//! What the tests share: a store speaking plain HTTP to the local registry, and the check that
//! nothing of a failed pull is left.

use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use image_store::{Store, StoreConfig};
use test_support::fs::file_names;

/// The config of a store at `root` that may speak plain HTTP to `registry`.
pub(crate) fn config(root: &Path, registry: &str) -> StoreConfig {
    let mut config = StoreConfig::new(root);
    config.insecure_registries = vec![registry.to_owned()];
    config.request_timeout = Duration::from_secs(20);
    config
}

pub(crate) fn open(root: &Path, registry: &str) -> Store {
    Store::open(config(root, registry)).expect("open the store")
}

/// The store shows no image, and neither it nor the store at its root reopened has a layer
/// directory, blob or temporary file.
pub(crate) fn assert_empty_after_reopen(store: Store, registry: &str) {
    let root = store.root().to_owned();
    let empty = |store: &Store, when: &str| {
        assert!(
            store.list().is_empty(),
            "{when}: no image listed: {:?}",
            store.list()
        );
        assert_eq!(
            file_names(&root.join("layers")),
            Vec::<String>::new(),
            "{when}: no layer left"
        );
        assert_eq!(
            file_names(&root.join("blobs/sha256")),
            Vec::<String>::new(),
            "{when}: no blob left"
        );
    };
    empty(&store, "before re-opening");
    drop(store);
    empty(&open(&root, registry), "after re-opening");
}

/// `<registry>/<repo>:<tag>`.
pub(crate) fn reference(registry: &str, repo: &str, tag: &str) -> String {
    format!("{registry}/{repo}:{tag}")
}

/// Bytes that do not compress: a layer that takes a while through a slow link.
pub(crate) fn noise(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// Whether `blobs` holds a blob being written: a temporary file with something in it.
pub(crate) fn has_partial_blob(blobs: &Path) -> bool {
    file_names(blobs)
        .iter()
        .any(|n| n.starts_with('.') && std::fs::metadata(blobs.join(n)).is_ok_and(|m| m.size() > 0))
}

const NS_VAR: &str = "IMAGE_STORE_PRIVATE_MOUNT_NS";

/// In the parent: runs the test `name` again in a private mount namespace, asserts it passed and
/// returns false. In that child: returns true, and the test goes on.
pub(crate) fn in_private_mount_ns(name: &str) -> bool {
    if std::env::var_os(NS_VAR).is_some() {
        return true;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let status = Command::new("unshare")
        .args(["--mount", "--propagation", "private"])
        .arg(exe)
        .args([
            name,
            "--exact",
            "--include-ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(NS_VAR, "1")
        .status()
        .expect("run unshare");
    assert!(
        status.success(),
        "{name} in a private mount namespace: {status}"
    );
    false
}

/// Unmounts (lazily) every mount at or below a directory when dropped, on failure too.
pub(crate) struct Unmount(pub(crate) PathBuf);

impl Drop for Unmount {
    fn drop(&mut self) {
        for m in test_support::fs::mounts_at_or_below(&self.0).iter().rev() {
            let _ = Command::new("umount").arg("-l").arg(&m.point).status();
        }
    }
}

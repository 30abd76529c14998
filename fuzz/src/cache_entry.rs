//! `cache_entry`: a file in the result cache, which anything that can write to the cache
//! directory may have put there.
//!
//! The decoder is private to `cni-exec`, so the input goes where the entry of `net`/`c1`/`eth0`
//! lives and is read through the public `ResultCache`, as teardown and GC read it.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use cni_exec::{CachedAttachment, ResultCache};

/// One cache directory per process (under this crate's `target/`, so a killed run leaves nothing
/// outside it); every input overwrites the same entry.
fn cache_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let parent = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/tmp");
        std::fs::create_dir_all(&parent).expect("create fuzz/target/tmp");
        tempfile::Builder::new()
            .prefix("cache-entry-")
            .tempdir_in(&parent)
            .expect("create a cache directory")
            .keep()
    })
}

/// Reads `data` as the cache entry of `net`/`c1`/`eth0` in a cache directory of this process.
pub fn check(data: &[u8]) {
    check_in(cache_dir(), data);
}

/// Reads `data` as the cache entry of `net`/`c1`/`eth0` in the cache rooted at `dir`: the entry
/// is absent or it is that attachment's, and its contents can be asked for without panicking.
pub fn check_in(dir: &Path, data: &[u8]) {
    let results = dir.join("results");
    std::fs::create_dir_all(&results).expect("create the results directory");
    std::fs::write(results.join("net-c1-eth0"), data).expect("write the entry");
    let cache = ResultCache::new(dir);

    let got = cache
        .get("net", "c1", "eth0")
        .expect("valid names never fail a read");
    if let Some(entry) = &got {
        is_ours(entry);
    }
    let listed = cache
        .list(None)
        .expect("the results directory can be listed");
    assert!(listed.len() <= 1, "one file, {} entries", listed.len());
    for entry in &listed {
        is_ours(entry);
    }
    let by_container = cache.list(Some("c1")).expect("listed");
    assert_eq!(by_container, listed, "the only entry is c1's");
}

fn is_ours(entry: &CachedAttachment) {
    assert_eq!(
        (
            entry.network.as_str(),
            entry.container_id.as_str(),
            entry.if_name.as_str()
        ),
        ("net", "c1", "eth0"),
        "the entry read is another attachment's"
    );
    // What teardown asks of an entry; each may fail, none may panic.
    let _ = entry.runtime_conf();
    let _ = entry.network_list();
    let _ = entry.cni_result();
}

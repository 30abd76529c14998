//! Remembers each plugin binary's VERSION answer, so validating many networks on every
//! configuration reload does not run every plugin again.
//!
//! The key is the binary itself: its path plus its [`Fingerprint`] (device, inode, size, mode and
//! both times; symlinks followed). Replacing, rewriting or chmodding the binary changes the key,
//! and the next lookup runs VERSION again. One entry is kept per path, so the cache is bounded by
//! the number of plugin files.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use cni_types::VersionInfo;
pub(crate) use node_primitives::Fingerprint;

/// VERSION answers by binary.
#[derive(Debug, Default)]
pub(crate) struct VersionCache {
    entries: Mutex<HashMap<PathBuf, (Fingerprint, VersionInfo)>>,
}

impl VersionCache {
    /// The cached answer for `path`, if the binary is still the one that gave it.
    pub(crate) fn get(&self, path: &Path, fingerprint: Fingerprint) -> Option<VersionInfo> {
        let entries = self
            .entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        entries
            .get(path)
            .filter(|(fp, _)| *fp == fingerprint)
            .map(|(_, info)| info.clone())
    }

    /// Remembers `info` for this version of the binary at `path`, replacing any older answer.
    pub(crate) fn insert(&self, path: &Path, fingerprint: Fingerprint, info: VersionInfo) {
        let mut entries = self
            .entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        entries.insert(path.to_owned(), (fingerprint, info));
    }

    /// Forgets every answer.
    pub(crate) fn clear(&self) {
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_binary_misses() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plugin");
        std::fs::write(&path, b"one").unwrap();
        let cache = VersionCache::default();
        let first = Fingerprint::of(&path).unwrap();
        cache.insert(&path, first, VersionInfo::legacy());
        assert_eq!(cache.get(&path, first), Some(VersionInfo::legacy()));
        // A replacement is a new inode (and here a new size).
        let tmp = dir.path().join("new");
        std::fs::write(&tmp, b"second").unwrap();
        std::fs::rename(&tmp, &path).unwrap();
        let second = Fingerprint::of(&path).unwrap();
        assert_ne!(first, second);
        assert_eq!(cache.get(&path, second), None);
        cache.clear();
        assert_eq!(cache.get(&path, first), None);
        assert_eq!(Fingerprint::of(&dir.path().join("missing")), None);
    }
}

//! What identifies one version of a file on disk, without reading it.

use std::fs::Metadata;
use std::os::unix::fs::MetadataExt as _;
use std::path::Path;

/// A file's identity: its device and inode. A file recreated under the same path usually gets
/// a new one (though a file system may reuse a freed inode number at once).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FileId {
    /// The device.
    pub dev: u64,
    /// The inode.
    pub ino: u64,
}

impl FileId {
    /// The identity `meta` describes.
    pub fn of(meta: &Metadata) -> FileId {
        FileId {
            dev: meta.dev(),
            ino: meta.ino(),
        }
    }
}

/// A file's identity, size, type and permissions, and both its times to the nanosecond:
/// replacing the file (a new inode), rewriting it (size, mtime), or changing its mode or
/// links (ctime) changes it. Contents are not read, so a rewrite that keeps the size and both
/// times (coarse clocks) goes unnoticed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Fingerprint {
    /// Device and inode.
    pub id: FileId,
    /// Size in bytes.
    pub size: u64,
    /// Type and permission bits (`st_mode`).
    pub mode: u32,
    /// Modification time: seconds and nanoseconds since the epoch.
    pub mtime: (i64, i64),
    /// Status change time: seconds and nanoseconds since the epoch.
    pub ctime: (i64, i64),
}

impl Fingerprint {
    /// The fingerprint of the file `path` names, symbolic links followed; `None` when it
    /// cannot be inspected.
    pub fn of(path: &Path) -> Option<Fingerprint> {
        std::fs::metadata(path)
            .ok()
            .map(|m| Fingerprint::from_metadata(&m))
    }

    /// The fingerprint `meta` describes.
    pub fn from_metadata(meta: &Metadata) -> Fingerprint {
        Fingerprint {
            id: FileId::of(meta),
            size: meta.size(),
            mode: meta.mode(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    #[test]
    fn replacing_rewriting_or_chmodding_changes_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plugin");
        std::fs::write(&path, b"one").unwrap();
        let first = Fingerprint::of(&path).unwrap();
        assert_eq!(
            Fingerprint::of(&path),
            Some(first),
            "unchanged file, same print"
        );

        // a replacement is a new inode (and here a new size)
        let tmp = dir.path().join("new");
        std::fs::write(&tmp, b"second").unwrap();
        std::fs::rename(&tmp, &path).unwrap();
        let second = Fingerprint::of(&path).unwrap();
        assert_ne!(first.id, second.id);
        assert_eq!(second.size, 6);

        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700)).unwrap();
        let third = Fingerprint::of(&path).unwrap();
        assert_eq!(third.id, second.id);
        assert_ne!(third.mode, second.mode);

        assert_eq!(Fingerprint::of(&dir.path().join("missing")), None);
    }
}

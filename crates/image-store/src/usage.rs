//! Disk usage as `du` counts it: allocated bytes and inodes, each inode once.

use std::collections::HashSet;
use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt as _;
use std::path::Path;

/// Bytes and inodes used on disk.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Usage {
    /// Allocated bytes (512-byte blocks), each inode counted once.
    pub bytes: u64,
    /// Inodes (files, directories, links, whiteouts), each counted once.
    pub inodes: u64,
}

impl std::ops::Add for Usage {
    type Output = Usage;

    fn add(self, other: Usage) -> Usage {
        Usage {
            bytes: self.bytes + other.bytes,
            inodes: self.inodes + other.inodes,
        }
    }
}

/// The usage of the tree at `path` (itself included), never following symbolic links nor
/// entering another file system (a mount in a container's copy, say), as `du -x` counts.
pub(crate) fn usage(path: &Path) -> io::Result<Usage> {
    let mut seen = HashSet::new();
    let mut total = Usage::default();
    let dev = match fs::symlink_metadata(path) {
        Ok(m) => m.dev(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(total),
        Err(e) => return Err(e),
    };
    walk(path, dev, &mut seen, &mut total)?;
    Ok(total)
}

/// The usage of the directory `root` and its entries but those named in `except`.
pub(crate) fn usage_except(root: &Path, except: &[&str]) -> io::Result<Usage> {
    let mut seen = HashSet::new();
    let mut total = Usage::default();
    let meta = fs::symlink_metadata(root)?;
    seen.insert((meta.dev(), meta.ino()));
    total.bytes += meta.blocks() * 512;
    total.inodes += 1;
    for entry in fs::read_dir(root)? {
        let entry = entry?;
        if except.iter().any(|e| entry.file_name() == *e) {
            continue;
        }
        walk(&entry.path(), meta.dev(), &mut seen, &mut total)?;
    }
    Ok(total)
}

fn walk(
    path: &Path,
    dev: u64,
    seen: &mut HashSet<(u64, u64)>,
    total: &mut Usage,
) -> io::Result<()> {
    let meta = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    if seen.insert((meta.dev(), meta.ino())) {
        total.bytes += meta.blocks() * 512;
        total.inodes += 1;
    }
    if meta.is_dir() && meta.dev() == dev {
        for entry in fs::read_dir(path)? {
            walk(&entry?.path(), dev, seen, total)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hard_links_count_once() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("a"), vec![1u8; 10_000]).unwrap();
        fs::hard_link(dir.path().join("a"), dir.path().join("b")).unwrap();
        std::os::unix::fs::symlink("a", dir.path().join("c")).unwrap();
        let u = usage(dir.path()).unwrap();
        assert_eq!(u.inodes, 3, "dir, a (= b), c");
        assert!(u.bytes >= 10_000, "{u:?}");
        assert_eq!(
            usage(&dir.path().join("missing")).unwrap(),
            Usage::default()
        );
    }
}

//! The vfs driver's copy: an image's layer directories (overlayfs form) applied bottom first
//! onto one directory, giving what an overlay mount of them would show.
//!
//! - a whiteout (character device 0/0) removes what lower layers put at its name;
//! - a directory marked `trusted.overlay.opaque=y` hides lower layers' entries in it; any other
//!   directory over a directory merges with it, over anything else replaces it;
//! - a non-directory replaces whatever was there;
//! - modes, owners (as root), times, extended attributes (but overlayfs' own `trusted.overlay.*`),
//!   symbolic links as they are, hard links within a layer, FIFOs and device nodes are kept.
//!
//! Nothing is followed: entries are looked at with `lstat`, files opened `O_NOFOLLOW`, and every
//! parent in the destination is a directory this copy made or checked, so a symbolic link a
//! lower layer left (`bin -> usr/bin`) is replaced by an upper layer's `bin/`, never written
//! through, as overlayfs shows it. The destination is private to the copy while it runs.

use std::collections::{BTreeMap, HashMap};
use std::fs::{self, DirBuilder, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt as _, FileTypeExt as _, MetadataExt as _};
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use nix::sys::stat::{Mode, SFlag};
use nix::sys::time::TimeVal;

use crate::unpack::{remove_existing, sys};

/// Copies `layers` (bottom first) onto the existing directory `dest`.
pub(crate) fn copy_layers(layers: &[PathBuf], dest: &Path) -> io::Result<()> {
    let mut copier = Copier {
        as_root: nix::unistd::geteuid().is_root(),
        dir_times: BTreeMap::new(),
    };
    for layer in layers {
        let mut links = HashMap::new();
        let meta = fs::symlink_metadata(layer)?;
        copier.attributes(layer, dest, &meta)?;
        copier.dir_times.insert(dest.to_owned(), times(&meta));
        copier.dir(layer, dest, &mut links)?;
    }
    // Deepest first (a child sorts after its parent), once nothing is created in them any more.
    for (dir, (atime, mtime)) in copier.dir_times.iter().rev() {
        match nix::sys::stat::lutimes(dir, atime, mtime) {
            Err(nix::errno::Errno::ENOENT) | Ok(()) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

struct Copier {
    as_root: bool,
    /// Directories' times, set at the end: the topmost layer's, as overlayfs shows them.
    dir_times: BTreeMap<PathBuf, (TimeVal, TimeVal)>,
}

impl Copier {
    /// Applies the entries of the layer directory `src` onto the directory `dst`; `links` maps
    /// this layer's multiply-linked inodes to their first copy.
    fn dir(
        &mut self,
        src: &Path,
        dst: &Path,
        links: &mut HashMap<(u64, u64), PathBuf>,
    ) -> io::Result<()> {
        for entry in fs::read_dir(src)? {
            let entry = entry?;
            let from = entry.path();
            let to = dst.join(entry.file_name());
            let meta = fs::symlink_metadata(&from)?;
            let kind = meta.file_type();
            if kind.is_char_device() && meta.rdev() == 0 {
                remove_existing(&to)?;
                continue;
            }
            if kind.is_dir() {
                match fs::symlink_metadata(&to) {
                    Ok(m) if m.is_dir() => {
                        if sys::get_xattr(&from, sys::OPAQUE_XATTR)?.as_deref() == Some(b"y") {
                            clear_dir(&to)?;
                        }
                    }
                    _ => {
                        remove_existing(&to)?;
                        DirBuilder::new().mode(0o700).create(&to)?;
                    }
                }
                self.dir(&from, &to, links)?;
                self.attributes(&from, &to, &meta)?;
                self.dir_times.insert(to, times(&meta));
                continue;
            }
            remove_existing(&to)?;
            let inode = (meta.dev(), meta.ino());
            if meta.nlink() > 1
                && let Some(first) = links.get(&inode)
            {
                fs::hard_link(first, &to)?;
                continue;
            }
            if kind.is_file() {
                let mut reader = OpenOptions::new()
                    .read(true)
                    .custom_flags(libc::O_NOFOLLOW)
                    .open(&from)?;
                let mut writer = OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .custom_flags(libc::O_NOFOLLOW)
                    .open(&to)?;
                io::copy(&mut reader, &mut writer)?;
            } else if kind.is_symlink() {
                std::os::unix::fs::symlink(fs::read_link(&from)?, &to)?;
            } else {
                let sflag = if kind.is_fifo() {
                    SFlag::S_IFIFO
                } else if kind.is_socket() {
                    SFlag::S_IFSOCK
                } else if kind.is_block_device() {
                    SFlag::S_IFBLK
                } else {
                    SFlag::S_IFCHR
                };
                nix::sys::stat::mknod(&to, sflag, Mode::empty(), meta.rdev())?;
            }
            self.attributes(&from, &to, &meta)?;
            let (atime, mtime) = times(&meta);
            nix::sys::stat::lutimes(&to, &atime, &mtime)?;
            if meta.nlink() > 1 {
                links.insert(inode, to);
            }
        }
        Ok(())
    }

    /// Owner, then mode (chown clears setuid bits), then extended attributes (chown clears file
    /// capabilities) of `from` onto `to`.
    fn attributes(&self, from: &Path, to: &Path, meta: &fs::Metadata) -> io::Result<()> {
        if self.as_root {
            std::os::unix::fs::lchown(to, Some(meta.uid()), Some(meta.gid()))?;
        }
        if meta.file_type().is_symlink() {
            return Ok(());
        }
        fs::set_permissions(to, fs::Permissions::from_mode(meta.mode() & 0o7777))?;
        for name in sys::list_xattrs(from)? {
            if name.starts_with("trusted.overlay.") {
                continue;
            }
            if let Some(value) = sys::get_xattr(from, &name)? {
                sys::set_xattr(to, &name, &value)?;
            }
        }
        Ok(())
    }
}

fn times(meta: &fs::Metadata) -> (TimeVal, TimeVal) {
    let tv = |secs: i64, nsecs: i64| TimeVal::new(secs, nsecs / 1000);
    (
        tv(meta.atime(), meta.atime_nsec()),
        tv(meta.mtime(), meta.mtime_nsec()),
    )
}

/// Removes the entries of `dir`, not `dir` itself (never following links).
fn clear_dir(dir: &Path) -> io::Result<()> {
    for entry in fs::read_dir(dir)? {
        remove_existing(&entry?.path())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    /// Layers made by hand without whiteouts or opaque marks (those need root; the integration
    /// tests cover them on both drivers).
    #[test]
    fn upper_layers_replace_and_merge_without_following_links() {
        let dir = tempfile::tempdir().unwrap();
        let (l1, l2, dest) = (
            dir.path().join("l1"),
            dir.path().join("l2"),
            dir.path().join("dest"),
        );
        let outside = dir.path().join("outside");
        fs::create_dir_all(&outside).unwrap();
        write(&l1.join("usr/bin/sh"), "sh");
        write(&l1.join("etc/a"), "a1");
        write(&l1.join("file-then-dir"), "f");
        std::os::unix::fs::symlink("usr/bin", l1.join("bin")).unwrap();
        std::os::unix::fs::symlink(&outside, l1.join("out")).unwrap();
        fs::hard_link(l1.join("etc/a"), l1.join("etc/a-link")).unwrap();
        write(&l2.join("bin/foo"), "foo");
        write(&l2.join("out/planted"), "x");
        write(&l2.join("etc/b"), "b2");
        write(&l2.join("file-then-dir/inner"), "i");
        fs::set_permissions(l2.join("etc/b"), fs::Permissions::from_mode(0o4755)).unwrap();
        fs::create_dir(&dest).unwrap();

        copy_layers(&[l1.clone(), l2.clone()], &dest).unwrap();

        assert!(fs::symlink_metadata(dest.join("bin")).unwrap().is_dir());
        assert_eq!(fs::read_to_string(dest.join("bin/foo")).unwrap(), "foo");
        assert!(!dest.join("usr/bin/foo").exists(), "not written through");
        assert!(!outside.join("planted").exists(), "not written through");
        assert_eq!(fs::read_to_string(dest.join("usr/bin/sh")).unwrap(), "sh");
        assert_eq!(fs::read_to_string(dest.join("etc/a")).unwrap(), "a1");
        assert_eq!(fs::read_to_string(dest.join("etc/b")).unwrap(), "b2");
        let a = fs::metadata(dest.join("etc/a")).unwrap();
        let link = fs::metadata(dest.join("etc/a-link")).unwrap();
        assert_eq!(a.ino(), link.ino(), "hard links stay links");
        assert_eq!(
            fs::metadata(dest.join("etc/b")).unwrap().mode() & 0o7777,
            0o4755
        );
        assert_eq!(
            fs::read_to_string(dest.join("file-then-dir/inner")).unwrap(),
            "i"
        );
        // The layers are untouched.
        assert!(fs::symlink_metadata(l1.join("bin")).unwrap().is_symlink());
        assert!(!l1.join("usr/bin/foo").exists());
    }
}

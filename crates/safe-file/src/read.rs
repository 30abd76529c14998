//! Reading a file that someone else controls: regular files only, never blocking on open, never
//! more than a cap.

use std::fs::{File, Metadata, OpenOptions};
use std::io::{self, Read as _};
use std::os::unix::fs::{FileTypeExt as _, OpenOptionsExt as _};
use std::path::Path;

use crate::error::{Error, FileKind, Result};

/// Whether the last component of a path may be a symbolic link.
///
/// Links in the directories leading to the file are followed either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Symlinks {
    /// Open what the link points to, if that is a regular file. Right for configuration
    /// directories, where links are normal (Kubernetes mounts ConfigMaps as links).
    Follow,
    /// Refuse a link (`O_NOFOLLOW`) with [`Error::NotRegular`] of kind [`FileKind::Symlink`].
    /// Right for files a program writes itself, where a link can only have been planted.
    Refuse,
}

/// Opens `path` for reading if, once open, it is a regular file.
///
/// A FIFO, socket or device in a directory that the caller only meant to scan would otherwise
/// hang the open (a FIFO with no writer) or never reach end of file (`/dev/zero`). So the file is
/// opened with `O_NONBLOCK` (a FIFO without a writer opens at once; on a regular file the flag
/// changes nothing) and `O_NOCTTY` (a terminal never becomes ours), and the descriptor, not the
/// path, which may change in between, is checked to be a regular file.
///
/// # Errors
///
/// [`Error::NotRegular`] naming what the path is instead; [`Error::Io`] when the open or the
/// `fstat` fails ([`Error::is_not_found`] when nothing is there).
pub fn open_regular(path: &Path, symlinks: Symlinks) -> Result<File> {
    let mut flags = libc::O_NONBLOCK | libc::O_NOCTTY;
    if symlinks == Symlinks::Refuse {
        flags |= libc::O_NOFOLLOW;
    }
    let file = match OpenOptions::new().read(true).custom_flags(flags).open(path) {
        Ok(file) => file,
        Err(e) => return Err(explain_open_error(path, symlinks, e)),
    };
    let meta = file.metadata().map_err(|e| Error::io("inspect", path, e))?;
    match not_regular(&meta) {
        Some(kind) => Err(Error::NotRegular {
            path: path.to_owned(),
            kind,
        }),
        None => Ok(file),
    }
}

/// Reads the whole regular file at `path`, refusing anything else (see [`open_regular`]) and
/// anything longer than `limit` bytes. At most `limit + 1` bytes are read, so memory stays
/// bounded whatever the file holds.
///
/// # Errors
///
/// As [`open_regular`]; [`Error::TooLarge`] for a longer file; [`Error::Io`] when the read fails.
pub fn read_regular(path: &Path, limit: u64, symlinks: Symlinks) -> Result<Vec<u8>> {
    let file = open_regular(path, symlinks)?;
    let mut bytes = Vec::new();
    // One byte over the limit is enough to know it was exceeded.
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| Error::io("read", path, e))?;
    if bytes.len() as u64 > limit {
        return Err(Error::TooLarge {
            path: path.to_owned(),
            limit,
        });
    }
    Ok(bytes)
}

/// Says what the path is when the open's error comes from its type rather than from a failure.
fn explain_open_error(path: &Path, symlinks: Symlinks, e: io::Error) -> Error {
    let kind = match e.raw_os_error() {
        // A socket cannot be opened at all: say what it is rather than "no such device".
        Some(libc::ENXIO) => std::fs::metadata(path).ok().and_then(|m| not_regular(&m)),
        // O_NOFOLLOW on a link; with links followed, ELOOP is a real loop.
        Some(libc::ELOOP) if symlinks == Symlinks::Refuse => std::fs::symlink_metadata(path)
            .ok()
            .filter(|m| m.file_type().is_symlink())
            .map(|_| FileKind::Symlink),
        _ => None,
    };
    match kind {
        Some(kind) => Error::NotRegular {
            path: path.to_owned(),
            kind,
        },
        None => Error::io("open", path, e),
    }
}

/// What the file is when it is not a regular file; `None` for a regular file.
fn not_regular(meta: &Metadata) -> Option<FileKind> {
    let t = meta.file_type();
    Some(if t.is_file() {
        return None;
    } else if t.is_dir() {
        FileKind::Directory
    } else if t.is_fifo() {
        FileKind::Fifo
    } else if t.is_socket() {
        FileKind::Socket
    } else if t.is_char_device() {
        FileKind::CharDevice
    } else if t.is_block_device() {
        FileKind::BlockDevice
    } else if t.is_symlink() {
        FileKind::Symlink
    } else {
        FileKind::Other
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_at_the_limit_is_read_and_one_byte_more_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"12345").unwrap();
        for symlinks in [Symlinks::Follow, Symlinks::Refuse] {
            assert_eq!(read_regular(&path, 5, symlinks).unwrap(), b"12345");
            let err = read_regular(&path, 4, symlinks).unwrap_err();
            assert!(matches!(err, Error::TooLarge { limit: 4, .. }), "{err}");
            assert_eq!(err.kind(), io::ErrorKind::FileTooLarge);
            assert_eq!(read_regular(&path, u64::MAX, symlinks).unwrap(), b"12345");
        }
        assert_eq!(
            read_regular(&path, 0, Symlinks::Follow)
                .unwrap_err()
                .to_string(),
            format!("{}: larger than 0 bytes", path.display())
        );
    }

    #[test]
    fn devices_and_directories_are_refused_by_kind() {
        let err = read_regular(Path::new("/dev/zero"), 10, Symlinks::Follow).unwrap_err();
        assert_eq!(
            err.to_string(),
            "/dev/zero: not a regular file (character device)"
        );
        let err = read_regular(Path::new("/"), 10, Symlinks::Refuse).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::IsADirectory);
        let err = read_regular(Path::new("/nonexistent/x"), 10, Symlinks::Follow).unwrap_err();
        assert!(err.is_not_found(), "{err}");
        assert_eq!(err.path(), Path::new("/nonexistent/x"));
    }
}

//! Reading a file that someone else controls: regular files only, never blocking on open, never
//! more than a cap.

use std::fs::{File, Metadata, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// The most bytes [`crate::load_file`] reads from one configuration file: 1 MiB. Real
/// configurations are a few KiB.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// Reads the whole regular file at `path` (symlinks followed), refusing anything else and
/// anything longer than `limit` bytes.
///
/// A FIFO, socket or device in a directory that the caller only meant to scan would otherwise
/// hang the open (a FIFO with no writer) or never reach end of file (`/dev/zero`). So the file
/// is opened with `O_NONBLOCK` and `O_NOCTTY`, the descriptor (not the path, which may change in
/// between) is checked to be a regular file, and at most `limit + 1` bytes are read.
///
/// # Errors
///
/// The open's or the read's error; for something that is not a regular file, an error whose
/// message is `not a regular file (<kind>)` (kind `IsADirectory` for a directory, `InvalidInput`
/// otherwise); for a longer file, `larger than <limit>` (kind `FileTooLarge`). The messages do
/// not repeat the path: callers name it.
pub fn read_regular_file(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    let file = open_regular_file(path)?;
    let mut bytes = Vec::new();
    // One byte over the limit is enough to know it was exceeded; memory stays bounded.
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(io::Error::new(
            io::ErrorKind::FileTooLarge,
            format!("larger than {}", size_text(limit)),
        ));
    }
    Ok(bytes)
}

/// Opens `path` for reading if, once open, it is a regular file: the open half of
/// [`read_regular_file`], for callers that read only part of a file.
///
/// # Errors
///
/// As [`read_regular_file`], without the size limit.
pub fn open_regular_file(path: &Path) -> io::Result<File> {
    // O_NONBLOCK: opening a FIFO without a writer returns at once instead of waiting for one.
    // On a regular file it changes nothing. O_NOCTTY: a terminal never becomes ours.
    let opened = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path);
    let file = match opened {
        Ok(file) => file,
        // A socket cannot be opened at all (ENXIO): say what it is rather than "no such device".
        Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
            return Err(std::fs::metadata(path)
                .ok()
                .and_then(|meta| not_regular(&meta))
                .unwrap_or(e));
        }
        Err(e) => return Err(e),
    };
    match not_regular(&file.metadata()?) {
        Some(err) => Err(err),
        None => Ok(file),
    }
}

/// The error for anything that is not a regular file; `None` for a regular file.
fn not_regular(meta: &Metadata) -> Option<io::Error> {
    let kind = meta.file_type();
    let (what, error_kind) = if kind.is_file() {
        return None;
    } else if kind.is_dir() {
        ("directory", io::ErrorKind::IsADirectory)
    } else if kind.is_fifo() {
        ("fifo", io::ErrorKind::InvalidInput)
    } else if kind.is_socket() {
        ("socket", io::ErrorKind::InvalidInput)
    } else if kind.is_char_device() {
        ("character device", io::ErrorKind::InvalidInput)
    } else if kind.is_block_device() {
        ("block device", io::ErrorKind::InvalidInput)
    } else {
        ("unknown file type", io::ErrorKind::InvalidInput)
    };
    Some(io::Error::new(
        error_kind,
        format!("not a regular file ({what})"),
    ))
}

/// `1 MiB`, `4 KiB` or `1000 bytes`.
fn size_text(bytes: u64) -> String {
    const KIB: u64 = 1 << 10;
    const MIB: u64 = 1 << 20;
    if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else if bytes >= KIB && bytes.is_multiple_of(KIB) {
        format!("{} KiB", bytes / KIB)
    } else {
        format!("{bytes} bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(size_text(MAX_CONFIG_BYTES), "1 MiB");
        assert_eq!(size_text(4096), "4 KiB");
        assert_eq!(size_text(1000), "1000 bytes");
        assert_eq!(size_text(0), "0 bytes");
    }

    #[test]
    fn a_file_at_the_limit_is_read_and_one_byte_more_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"12345").unwrap();
        assert_eq!(read_regular_file(&path, 5).unwrap(), b"12345");
        let err = read_regular_file(&path, 4).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::FileTooLarge);
        assert_eq!(err.to_string(), "larger than 4 bytes");
        assert_eq!(read_regular_file(&path, u64::MAX).unwrap(), b"12345");
    }

    #[test]
    fn devices_and_directories_are_refused_by_kind() {
        let err = read_regular_file(Path::new("/dev/zero"), 10).unwrap_err();
        assert_eq!(err.to_string(), "not a regular file (character device)");
        let err = read_regular_file(Path::new("/"), 10).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::IsADirectory);
        let err = read_regular_file(Path::new("/nonexistent/x"), 10).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
    }
}

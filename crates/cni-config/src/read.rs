//! Reading a file that someone else controls, in this crate's terms: the `safe-file` rules with
//! symbolic links followed (a configuration directory is often a ConfigMap of links) and errors
//! as [`io::Error`]s whose callers name the file.

use std::fs::File;
use std::io;
use std::path::Path;

use safe_file::Symlinks;

/// The most bytes [`crate::load_file`] reads from one configuration file: 1 MiB. Real
/// configurations are a few KiB.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// Reads the whole regular file at `path` (symlinks followed), refusing anything else and
/// anything longer than `limit` bytes.
///
/// A FIFO, socket or device in a directory that the caller only meant to scan would otherwise
/// hang the open or never reach end of file; see [`safe_file::read_regular`], which does the work.
///
/// # Errors
///
/// The open's or the read's error; for something that is not a regular file, an error whose
/// message is `not a regular file (<kind>)` (kind `IsADirectory` for a directory, `InvalidInput`
/// otherwise); for a longer file, `larger than <limit>` (kind `FileTooLarge`). The messages do
/// not repeat the path: callers name it.
pub fn read_regular_file(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    safe_file::read_regular(path, limit, Symlinks::Follow).map_err(safe_file::Error::into_io)
}

/// Opens `path` for reading if, once open, it is a regular file: the open half of
/// [`read_regular_file`], for callers that read only part of a file.
///
/// # Errors
///
/// As [`read_regular_file`], without the size limit.
pub fn open_regular_file(path: &Path) -> io::Result<File> {
    safe_file::open_regular(path, Symlinks::Follow).map_err(safe_file::Error::into_io)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Callers wrap these errors in their own, which name the file: the messages must not.
    #[test]
    fn errors_leave_the_path_to_the_caller() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"12345").unwrap();
        assert_eq!(read_regular_file(&path, 5).unwrap(), b"12345");
        let err = read_regular_file(&path, 4).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::FileTooLarge);
        assert_eq!(err.to_string(), "larger than 4 bytes");
        let err = read_regular_file(Path::new("/dev/zero"), 10).unwrap_err();
        assert_eq!(err.to_string(), "not a regular file (character device)");
        let err = open_regular_file(Path::new("/")).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::IsADirectory);
        let err = read_regular_file(Path::new("/nonexistent/x"), 10).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn symlinks_are_followed() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("real"), b"{}").unwrap();
        std::os::unix::fs::symlink("real", dir.path().join("link")).unwrap();
        assert_eq!(
            read_regular_file(&dir.path().join("link"), MAX_CONFIG_BYTES).unwrap(),
            b"{}"
        );
    }
}

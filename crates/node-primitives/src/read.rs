//! Reading a kernel file: a regular file, opened without blocking, never more than a cap.
//!
//! `/proc` files are regular files of size 0 that the kernel fills as they are read; a cap
//! still bounds what a caller holds, and the checks keep a FIFO or a device bind-mounted over
//! one from hanging or flooding the reader.

use std::fs::{File, OpenOptions};
use std::io::Read as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;

use crate::error::{Error, Result};

/// The bytes of the regular file at `path`, at most `limit` of them.
pub(crate) fn read_capped(path: &Path, limit: u64) -> Result<Vec<u8>> {
    let read_err = |source| Error::Read {
        path: path.to_owned(),
        source,
    };
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)
        .map_err(read_err)?;
    if !file.metadata().map_err(read_err)?.is_file() {
        return Err(Error::NotRegular {
            path: path.to_owned(),
        });
    }
    let mut bytes = Vec::new();
    // One byte over the cap tells a file that is too large from one that just fits.
    File::take(file, limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(read_err)?;
    if bytes.len() as u64 > limit {
        return Err(Error::TooLarge {
            path: path.to_owned(),
            limit,
        });
    }
    Ok(bytes)
}

/// [`read_capped`] as text, invalid UTF-8 replaced.
pub(crate) fn read_text(path: &Path, limit: u64) -> Result<String> {
    read_capped(path, limit).map(|bytes| match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_files_are_read_and_others_refused_or_capped() {
        let stat = read_text(Path::new("/proc/self/stat"), 4096).unwrap();
        assert!(stat.contains(')'), "{stat}");
        let err = read_capped(Path::new("/proc/self/mountinfo"), 4).unwrap_err();
        assert!(matches!(err, Error::TooLarge { limit: 4, .. }), "{err}");
        let err = read_capped(Path::new("/dev/null"), 4).unwrap_err();
        assert_eq!(err.to_string(), "/dev/null: not a regular file");
        let err = read_capped(Path::new("/nonexistent/x"), 4).unwrap_err();
        assert!(err.is_not_found(), "{err}");
    }
}

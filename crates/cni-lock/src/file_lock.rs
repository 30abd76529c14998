//! An exclusive lock on one file, without keys, queues or file removal: for a daemon that must be
//! the only one using a directory or a socket.

use std::fs::{File, TryLockError};
use std::path::{Path, PathBuf};

use crate::{Error, Result, flock::open_lock_file};

/// An exclusive `flock(2)` on one file, held until the value is dropped.
///
/// The kernel drops the lock when its holder dies, even by `SIGKILL`, so a crashed daemon never
/// keeps the next one out. The lock belongs to the open file, not to the process: a second
/// `FileLock` on the same path conflicts with the first even within one process.
///
/// Unlike [`Locks`](crate::Locks), which removes its files under a protocol that keeps mutual
/// exclusion, the file stays after release: removing it while another process has opened it but
/// not yet locked it would let two holders lock two different files.
#[derive(Debug)]
#[must_use = "the lock is released as soon as it is dropped"]
pub struct FileLock {
    // Closing the descriptor releases the lock.
    _file: File,
    path: PathBuf,
}

impl FileLock {
    /// Opens the regular file at `path`, creating it (mode 0600) if needed, and locks it
    /// exclusively without waiting. The directory must exist.
    ///
    /// The open does not follow a symbolic link and cannot block: a link, FIFO or device planted
    /// at the path is refused instead of being locked, written to or waited on.
    ///
    /// # Errors
    ///
    /// [`Error::Held`] when someone else holds the lock; [`Error::Io`] naming the file when it
    /// cannot be opened or locked, or is not a regular file.
    pub fn try_exclusive(path: impl Into<PathBuf>) -> Result<FileLock> {
        let path = path.into();
        let file = open_lock_file(&path).map_err(|e| Error::io(&path, e))?;
        match file.try_lock() {
            Ok(()) => Ok(FileLock { _file: file, path }),
            Err(TryLockError::WouldBlock) => Err(Error::Held { path }),
            Err(TryLockError::Error(e)) => Err(Error::io(&path, e)),
        }
    }

    /// The locked file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_told_it_is_held_until_the_first_drops() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("daemon.lock");
        let first = FileLock::try_exclusive(&path).unwrap();
        assert_eq!(first.path(), path);
        match FileLock::try_exclusive(&path) {
            Err(Error::Held { path: held }) => assert_eq!(held, path),
            other => panic!("expected Held, got {other:?}"),
        }
        drop(first);
        let again = FileLock::try_exclusive(&path).unwrap();
        drop(again);
        assert!(path.exists(), "the file stays");
    }

    #[test]
    fn a_missing_directory_is_an_io_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing/daemon.lock");
        let err = FileLock::try_exclusive(&path).unwrap_err();
        assert!(
            matches!(&err, Error::Io { path: p, .. } if *p == path),
            "{err}"
        );
    }
}

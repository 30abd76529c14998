//! The crate's error type.

use std::{io, path::PathBuf, time::Duration};

/// Everything that can go wrong while taking or releasing a lock.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The lock stayed busy until the timeout ran out.
    #[error(
        "timed out after {} ms waiting for lock file {}",
        waited.as_millis(),
        path.display()
    )]
    Timeout {
        /// The lock file that stayed busy.
        path: PathBuf,
        /// How long the caller waited before giving up.
        waited: Duration,
    },
    /// The lock is held by another process (or by another open of the same file in this
    /// process), and the caller asked not to wait. See [`FileLock`](crate::FileLock).
    #[error("lock file {} is held by another process", path.display())]
    Held {
        /// The lock file.
        path: PathBuf,
    },
    /// A file-system call on the lock file or its directory failed.
    #[error("lock file {}: {source}", path.display())]
    Io {
        /// The lock file (or lock directory) at fault.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: io::Error,
    },
}

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>, source: io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

//! The error type of the netns module.

use std::io;
use std::path::{Path, PathBuf};

/// Result alias for the netns module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong while pinning, entering or inspecting a network namespace.
///
/// Every variant names the namespace path (or the directory) and the operation. Teardown code treats a
/// namespace that is gone as already cleaned up: ask [`Error::is_not_found`] instead of matching.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A new namespace could not be created or bind-mounted at `path`.
    #[error("cannot create network namespace {}: {source}", path.display())]
    Create {
        /// Where the namespace was to be pinned.
        path: PathBuf,
        /// The error from the operating system.
        #[source]
        source: io::Error,
    },

    /// The directory meant to hold pinned namespaces could not be created or made a shared mount point.
    #[error("cannot prepare {} for network namespaces: {source}", dir.display())]
    PrepareDir {
        /// The directory.
        dir: PathBuf,
        /// The error from the operating system.
        #[source]
        source: io::Error,
    },

    /// The directory's own mount could not be detached.
    #[error("cannot release network namespace directory {}: {source}", dir.display())]
    ReleaseDir {
        /// The directory.
        dir: PathBuf,
        /// The error from the operating system.
        #[source]
        source: io::Error,
    },

    /// A pinned namespace could not be unmounted or its file removed.
    #[error("cannot remove network namespace {}: {source}", path.display())]
    Remove {
        /// The pinned namespace.
        path: PathBuf,
        /// The error from the operating system.
        #[source]
        source: io::Error,
    },

    /// The namespace file could not be opened or joined.
    #[error("cannot enter network namespace {}: {source}", path.display())]
    Enter {
        /// The namespace path.
        path: PathBuf,
        /// The error from the operating system; `NotFound` when nothing is at `path`.
        #[source]
        source: io::Error,
    },

    /// The file exists but is not a network namespace (an unmounted pin left behind, a mount namespace, ...).
    #[error("cannot enter network namespace {}: not a network namespace", path.display())]
    NotNetns {
        /// The path.
        path: PathBuf,
    },

    /// The file could not be examined.
    #[error("cannot inspect network namespace {}: {source}", path.display())]
    Inspect {
        /// The path.
        path: PathBuf,
        /// The error from the operating system.
        #[source]
        source: io::Error,
    },

    /// The loopback interface could not be brought up inside the namespace.
    #[error("cannot bring up lo in network namespace {}: {source}", path.display())]
    Loopback {
        /// The namespace path.
        path: PathBuf,
        /// The error from the operating system.
        #[source]
        source: io::Error,
    },

    /// The interfaces or addresses inside the namespace could not be read.
    #[error("cannot list interfaces in network namespace {}: {source}", path.display())]
    Interfaces {
        /// The namespace path.
        path: PathBuf,
        /// The error from the operating system.
        #[source]
        source: io::Error,
    },

    /// The short-lived thread that does the namespace work could not be started or did not report back.
    #[error("cannot start a thread for network namespace {}: {source}", path.display())]
    Thread {
        /// The namespace path.
        path: PathBuf,
        /// The error from the operating system.
        #[source]
        source: io::Error,
    },
}

impl Error {
    /// True when the namespace (or the path leading to it) does not exist: the state a teardown wants.
    pub fn is_not_found(&self) -> bool {
        match self {
            Self::Create { source, .. }
            | Self::PrepareDir { source, .. }
            | Self::ReleaseDir { source, .. }
            | Self::Remove { source, .. }
            | Self::Enter { source, .. }
            | Self::Inspect { source, .. }
            | Self::Loopback { source, .. }
            | Self::Interfaces { source, .. }
            | Self::Thread { source, .. } => source.kind() == io::ErrorKind::NotFound,
            Self::NotNetns { .. } => false,
        }
    }

    /// The namespace path or directory the error is about.
    pub fn path(&self) -> &Path {
        match self {
            Self::Create { path, .. }
            | Self::Remove { path, .. }
            | Self::Enter { path, .. }
            | Self::NotNetns { path }
            | Self::Inspect { path, .. }
            | Self::Loopback { path, .. }
            | Self::Interfaces { path, .. }
            | Self::Thread { path, .. } => path,
            Self::PrepareDir { dir, .. } | Self::ReleaseDir { dir, .. } => dir,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enoent() -> io::Error {
        io::Error::from_raw_os_error(libc::ENOENT)
    }

    #[test]
    fn messages_name_the_operation_and_the_path() {
        let path = PathBuf::from("/run/netns/x");
        let cases = [
            (
                Error::Enter {
                    path: path.clone(),
                    source: enoent(),
                },
                "cannot enter network namespace /run/netns/x: No such file or directory (os error 2)",
            ),
            (
                Error::NotNetns { path: path.clone() },
                "cannot enter network namespace /run/netns/x: not a network namespace",
            ),
            (
                Error::Create {
                    path: path.clone(),
                    source: io::Error::from_raw_os_error(libc::EEXIST),
                },
                "cannot create network namespace /run/netns/x: File exists (os error 17)",
            ),
            (
                Error::Loopback {
                    path: path.clone(),
                    source: io::Error::from_raw_os_error(libc::EPERM),
                },
                "cannot bring up lo in network namespace /run/netns/x: Operation not permitted (os error 1)",
            ),
            (
                Error::PrepareDir {
                    dir: PathBuf::from("/run/netns"),
                    source: io::Error::from_raw_os_error(libc::EPERM),
                },
                "cannot prepare /run/netns for network namespaces: Operation not permitted (os error 1)",
            ),
        ];
        for (err, want) in cases {
            assert_eq!(err.to_string(), want);
        }
    }

    #[test]
    fn not_found_is_recognised_whatever_the_operation() {
        let path = PathBuf::from("/run/netns/gone");
        assert!(
            Error::Enter {
                path: path.clone(),
                source: enoent()
            }
            .is_not_found()
        );
        assert!(
            Error::Interfaces {
                path: path.clone(),
                source: enoent()
            }
            .is_not_found()
        );
        assert!(
            Error::Remove {
                path: path.clone(),
                source: enoent()
            }
            .is_not_found()
        );
        assert!(
            !Error::Enter {
                path: path.clone(),
                source: io::Error::from_raw_os_error(libc::EPERM)
            }
            .is_not_found()
        );
        assert!(!Error::NotNetns { path: path.clone() }.is_not_found());
        assert_eq!(Error::NotNetns { path: path.clone() }.path(), path);
    }
}

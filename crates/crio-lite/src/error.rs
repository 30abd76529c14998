//! The crate's error type.

use std::io;
use std::path::PathBuf;

use crate::config::ConfigIssue;

/// Everything that can stop the daemon from starting, a configuration from loading, or the status
/// client from getting an answer. Errors of single CRI requests are gRPC statuses instead.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The configuration holds mistakes: files that cannot be read, invalid TOML, unknown keys,
    /// values of the wrong type or unusable, in files, environment variables or flags. Every one
    /// found is listed, each naming where it is and the key.
    #[error("{}", issues.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Config {
        /// The mistakes, in the order the sources were read.
        issues: Vec<ConfigIssue>,
    },
    /// A configuration value parses but cannot be used.
    #[error("config key {key}: {reason}")]
    InvalidConfig {
        /// The key, as `section.key`.
        key: String,
        /// What is wrong with its value.
        reason: String,
    },
    /// A file or directory the daemon needs could not be used.
    #[error("{what} {}: {source}", path.display())]
    Io {
        /// What the daemon was doing, such as `cannot bind socket`.
        what: &'static str,
        /// The path at fault.
        path: PathBuf,
        /// The error from the operating system.
        #[source]
        source: io::Error,
    },
    /// Another crio-lite holds the root directory or the socket.
    #[error(
        "another crio-lite is running with this root directory or socket (it holds {}); \
         stop it first or give this one its own --root and --listen",
        lock.display()
    )]
    AlreadyRunning {
        /// The lock file held by the other daemon.
        lock: PathBuf,
    },
    /// A sandbox state file cannot be decoded.
    #[error("sandbox state file {}: {reason}", path.display())]
    State {
        /// The file.
        path: PathBuf,
        /// Why it cannot be used.
        reason: String,
    },
    /// The image store cannot be opened.
    #[error("image store: {0}")]
    Images(#[source] Box<image_store::Error>),
    /// The status API over the socket did not answer as expected.
    #[error("status API on {}: {reason}", socket.display())]
    StatusApi {
        /// The socket asked.
        socket: PathBuf,
        /// What went wrong.
        reason: String,
    },
}

impl Error {
    pub(crate) fn io(what: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        Error::Io {
            what,
            path: path.into(),
            source,
        }
    }
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

//! The crate's error type.

use std::io;
use std::path::PathBuf;

/// Everything that can stop the daemon from starting, a configuration from loading, or the status
/// client from getting an answer. Errors of single CRI requests are gRPC statuses instead.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A configuration file could not be read.
    #[error("cannot read config file {}: {source}", path.display())]
    ReadConfig {
        /// The file.
        path: PathBuf,
        /// The error from the operating system.
        #[source]
        source: io::Error,
    },
    /// A configuration file is not valid TOML or holds a key or value crio-lite does not accept.
    #[error("config file {origin}: {source}")]
    ParseConfig {
        /// The file, or `<string>` for text given directly.
        origin: String,
        /// The parser's error: it names the key and shows the line.
        #[source]
        source: Box<toml::de::Error>,
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
    /// Another crio-lite holds the state directory or the socket.
    #[error(
        "another crio-lite is running with this state directory or socket (it holds {}); \
         stop it first or give this one its own --state-dir and --socket",
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

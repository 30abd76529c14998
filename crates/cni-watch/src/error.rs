//! The crate's error type. Only starting a watcher can fail; problems while running (notify
//! errors, vanished directories, a panicking loader) are logged with `tracing` and recovered from.

/// Why a [`Watcher`](crate::Watcher) could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// `Watcher::start` was polled outside a tokio runtime.
    #[error("no tokio runtime: the watcher must be started inside a tokio runtime")]
    NoRuntime,
    /// [`WatchOptions::dirs`](crate::WatchOptions::dirs) was empty.
    #[error("no directories to watch")]
    NoDirs,
    /// An option has a value the watcher cannot run with.
    #[error("invalid watch option {option}: {reason}")]
    InvalidOption {
        /// The option at fault.
        option: &'static str,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The loader panicked during the initial load, so there is no first snapshot to publish.
    #[error("the initial configuration load panicked")]
    InitialLoadPanicked,
}

/// Result with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

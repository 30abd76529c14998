//! The crate's one error type.

use std::fmt;
use std::io;
use std::path::PathBuf;
use std::time::Duration;

/// What can go wrong; each variant names the file, the id or the step at fault.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A file (`/proc/self/mountinfo`, a `/proc/<pid>` file) could not be opened or read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The file is not a regular file (a FIFO or a device planted where a file was expected).
    #[error("{}: not a regular file", path.display())]
    NotRegular {
        /// The file.
        path: PathBuf,
    },
    /// The file holds more than its cap.
    #[error("{}: larger than {limit} bytes", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The cap, in bytes.
        limit: u64,
    },
    /// A container id breaks [the rule](crate::id).
    #[error("invalid container id {id:?}: {problem}")]
    InvalidId {
        /// The id as given.
        id: String,
        /// What is wrong with it.
        problem: IdProblem,
    },
    /// A step of pinning or unpinning a namespace failed.
    #[error("cannot {step} {}: {source}", path.display())]
    Pin {
        /// The step.
        step: PinStep,
        /// The pin (or the pin directory, for [`PinStep::PrepareDir`] and [`PinStep::ReleaseDir`]).
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// A [bounded child](crate::child) ran past its time.
    #[error("timed out after {timeout:?}")]
    Timeout {
        /// The time it had.
        timeout: Duration,
    },
    /// A [bounded child](crate::child) wrote more than its cap to a stream that fails past it.
    #[error("{stream} larger than {limit} bytes")]
    OutputTooLarge {
        /// The stream.
        stream: Stream,
        /// The cap, in bytes.
        limit: usize,
    },
    /// A connection from inside a network namespace could not be opened
    /// ([`ns::connect_loopback`](crate::ns::connect_loopback)).
    #[error("network namespace {}, port {port}: {what}: {source}", netns.display())]
    Connect {
        /// The namespace's pin (or `/proc/<pid>/ns/net`).
        netns: PathBuf,
        /// The port asked for.
        port: u16,
        /// What failed: opening or entering the namespace, or connecting (both addresses).
        what: String,
        /// Why (for a connection, the IPv4 attempt's error).
        #[source]
        source: io::Error,
    },
    /// Feeding, reading or reaping a [bounded child](crate::child) failed.
    #[error("{op} the child failed: {source}")]
    Child {
        /// What was being done.
        op: ChildOp,
        /// Why.
        #[source]
        source: io::Error,
    },
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The bare `io::Error` (its kind kept where there is one), for callers whose own error
    /// already names the file.
    pub fn into_io(self) -> io::Error {
        match self {
            Error::Read { source, .. }
            | Error::Pin { source, .. }
            | Error::Connect { source, .. }
            | Error::Child { source, .. } => source,
            Error::Timeout { .. } => io::Error::new(io::ErrorKind::TimedOut, self.to_string()),
            Error::NotRegular { .. }
            | Error::TooLarge { .. }
            | Error::InvalidId { .. }
            | Error::OutputTooLarge { .. } => {
                io::Error::new(io::ErrorKind::InvalidData, self.to_string())
            }
        }
    }

    /// Whether a file that was asked for does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::Read { source, .. } | Error::Pin { source, .. }
            | Error::Connect { source, .. } if source.kind() == io::ErrorKind::NotFound)
    }
}

/// What is wrong with a container id (see [`crate::id`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum IdProblem {
    /// It is empty.
    Empty,
    /// It is longer than [`MAX_ID_LEN`](crate::id::MAX_ID_LEN) bytes.
    TooLong,
    /// It does not start with an ASCII letter or digit.
    BadStart,
    /// It holds a character outside `[A-Za-z0-9_.-]`.
    BadCharacter,
}

impl IdProblem {
    /// The reason, as an error message says it.
    pub fn reason(self) -> &'static str {
        match self {
            IdProblem::Empty => "empty",
            IdProblem::TooLong => "longer than 128 bytes",
            IdProblem::BadStart => "must start with a letter or a digit",
            IdProblem::BadCharacter => "only letters, digits, '_', '.' and '-' are allowed",
        }
    }
}

impl fmt::Display for IdProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.reason())
    }
}

/// A step of pinning a namespace (see [`crate::ns`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PinStep {
    /// Creating the pin directory or making it a shared mount point.
    PrepareDir,
    /// Detaching the pin directory's self-bind.
    ReleaseDir,
    /// Creating the empty file the namespace is bound onto.
    CreateFile,
    /// Starting the thread that makes the namespaces.
    Thread,
    /// `unshare(2)` of the new namespaces.
    Unshare,
    /// The caller's set-up inside the new namespaces (a hostname, say).
    Setup,
    /// The bind mount onto the pin.
    Bind,
    /// Detaching the mounts at a pin.
    Unmount,
    /// Removing the pin's file.
    Remove,
}

impl fmt::Display for PinStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PinStep::PrepareDir => "prepare the pin directory",
            PinStep::ReleaseDir => "release the pin directory",
            PinStep::CreateFile => "create the pin",
            PinStep::Thread => "start a thread to pin",
            PinStep::Unshare => "unshare a namespace for",
            PinStep::Setup => "set up the namespace of",
            PinStep::Bind => "bind the namespace onto",
            PinStep::Unmount => "unmount",
            PinStep::Remove => "remove",
        })
    }
}

/// A child's output stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

impl fmt::Display for Stream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        })
    }
}

/// What was being done with a bounded child when an I/O error came.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChildOp {
    /// Writing its stdin.
    WriteStdin,
    /// Reading its stdout.
    ReadStdout,
    /// Reading its stderr.
    ReadStderr,
    /// Waiting for its exit status.
    Wait,
}

impl ChildOp {
    /// The words before the child's name in a message: `writing stdin of`.
    pub fn as_str(self) -> &'static str {
        match self {
            ChildOp::WriteStdin => "writing stdin of",
            ChildOp::ReadStdout => "reading stdout of",
            ChildOp::ReadStderr => "reading stderr of",
            ChildOp::Wait => "waiting for",
        }
    }
}

impl fmt::Display for ChildOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

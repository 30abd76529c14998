//! The crate's error type.

use std::path::PathBuf;
use std::time::Duration;

/// What can go wrong making a spec or running a container; variants name the container, and the
/// file or runtime at fault.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The container id breaks the rule (see [`validate_id`]).
    #[error("invalid container id {id:?}: {reason}")]
    InvalidId {
        /// The id as given.
        id: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The configuration asks for something the spec cannot say.
    #[error("container {container}: {reason}")]
    InvalidConfig {
        /// The container.
        container: String,
        /// What is wrong, naming the field.
        reason: String,
    },
    /// Neither the configuration nor the image says what to run.
    #[error(
        "container {container}: no command: the image has no Entrypoint or Cmd and none was given"
    )]
    NoCommand {
        /// The container.
        container: String,
    },
    /// A user or group name is not in the root file system's `/etc/passwd` or `/etc/group`.
    #[error("container {container}: {what} {name:?} not found in {}", file.display())]
    UnknownUser {
        /// The container.
        container: String,
        /// `user` or `group`.
        what: &'static str,
        /// The name looked up.
        name: String,
        /// The file looked in.
        file: PathBuf,
    },
    /// A file of the container (its root file system, bundle or state) could not be read or
    /// written.
    #[error("container {container}: {source}")]
    File {
        /// The container.
        container: String,
        /// The error, naming the file.
        #[source]
        source: safe_file::Error,
    },
    /// A directory could not be created, listed or removed.
    #[error("container {container}: {}: cannot {op}: {source}", path.display())]
    Io {
        /// The container, or `-` when none is concerned.
        container: String,
        /// What was being done.
        op: &'static str,
        /// The path.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// A file of the container's (its record, the runtime's state) is not what it should be.
    #[error("container {container}: {}: {reason}", path.display())]
    Corrupt {
        /// The container.
        container: String,
        /// The file, or the runtime for its output.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The runtime or conmon could not be started.
    #[error("container {container}: cannot run {}: {source}", program.display())]
    Spawn {
        /// The container.
        container: String,
        /// The runtime or conmon.
        program: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// The runtime (or conmon) failed; `stderr` is what it said, trimmed and capped.
    #[error("container {container}: {} {command} failed ({status}): {stderr}", runtime.display())]
    Runtime {
        /// The container.
        container: String,
        /// The runtime or conmon.
        runtime: PathBuf,
        /// `create`, `start`, `kill`, `delete`, `state`, `list`, `pause`, `resume`, `update`.
        command: &'static str,
        /// The exit status, as the shell says it.
        status: String,
        /// The runtime's stderr (or conmon's message), trimmed and capped.
        stderr: String,
    },
    /// The runtime or conmon did not finish in time: a runtime command was killed; conmon,
    /// which outlives its caller, was not when it only failed to act on a request (`reopen log`).
    #[error("container {container}: {} {command} timed out after {timeout:?}", runtime.display())]
    Timeout {
        /// The container.
        container: String,
        /// The runtime or conmon.
        runtime: PathBuf,
        /// What it was running.
        command: &'static str,
        /// The time it was given.
        timeout: Duration,
    },
    /// The runtime does not know the container.
    #[error("container {container}: not known to {}", runtime.display())]
    NotFound {
        /// The container.
        container: String,
        /// The runtime asked.
        runtime: PathBuf,
    },
    /// The container has not exited, so it has no exit code yet.
    #[error("container {container}: has not exited")]
    NotExited {
        /// The container.
        container: String,
    },
    /// The container is not running, so it cannot do what was asked of a running one (exec,
    /// stats, reopening its log).
    #[error("container {container}: not running ({state})")]
    NotRunning {
        /// The container.
        container: String,
        /// What it is instead: the runtime's status, or why the runtime or conmon refused.
        state: String,
    },
    /// Resume was asked of a container that is not paused (runc refuses it, crun does nothing:
    /// refused here for both).
    #[error("container {container}: not paused ({state})")]
    NotPaused {
        /// The container.
        container: String,
        /// The runtime's status.
        state: String,
    },
    /// A seccomp profile file (a [`Seccomp::Localhost`](crate::Seccomp::Localhost) profile) is not
    /// a profile this crate can use; reading it fails with [`Error::File`] instead.
    #[error("container {container}: seccomp profile {}: {reason}", path.display())]
    SeccompProfile {
        /// The container.
        container: String,
        /// The profile file.
        path: PathBuf,
        /// What is wrong, naming the field (`syscalls[3].action: unknown action ...`).
        reason: String,
    },
    /// The kernel refused a pod's IPC sysctl (an unknown key, a value out of range), or the
    /// namespace to try it in could not be made.
    #[error("sysctl {key}={value:?}: {reason}: {source}")]
    Sysctl {
        /// The key, as the request gave it.
        key: String,
        /// The value.
        value: String,
        /// What was being done (`the kernel refuses it`).
        reason: &'static str,
        /// What the kernel said.
        #[source]
        source: std::io::Error,
    },
    /// A stop signal (an image's `StopSignal`) names no signal.
    #[error("stop signal {signal:?} is not a signal")]
    InvalidSignal {
        /// The signal as written.
        signal: String,
    },
    /// A bind mount cannot be made as asked (see [`ContainerConfig::join_pod`]).
    ///
    /// [`ContainerConfig::join_pod`]: crate::ContainerConfig::join_pod
    #[error("container {container}: mount {index}: {which:?}: {reason}")]
    InvalidMount {
        /// The container.
        container: String,
        /// The mount's index in [`ContainerConfig::mounts`](crate::ContainerConfig::mounts).
        index: usize,
        /// Which of its paths is at fault.
        which: MountPath,
        /// What is wrong with it.
        reason: String,
    },
    /// A stream of an interactive exec or an attach failed: the caller's side (a stdout that
    /// cannot be written), the runtime's or conmon's (a socket, a terminal).
    #[error("container {container}: cannot {what}: {source}")]
    Stream {
        /// The container.
        container: String,
        /// What was being done (`write the attached output`).
        what: &'static str,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// A hook configuration file (oci-hooks(5)) was refused; the other files still load.
    #[error("hook {}: {reason}", path.display())]
    Hook {
        /// The hook configuration file.
        path: PathBuf,
        /// What is wrong, naming the field (`hook.path: ...`), or why the file cannot be read.
        reason: String,
    },
}

/// Which path of a bind mount an [`Error::InvalidMount`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MountPath {
    /// The path on the host ([`BindMount::source`](crate::BindMount::source)).
    Source,
    /// The path in the container ([`BindMount::destination`](crate::BindMount::destination)).
    Destination,
}

/// The crate's result type.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub(crate) fn file(container: &str, source: safe_file::Error) -> Error {
        Error::File {
            container: container.to_owned(),
            source,
        }
    }

    pub(crate) fn io(
        container: &str,
        op: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Error {
        Error::Io {
            container: container.to_owned(),
            op,
            path: path.into(),
            source,
        }
    }

    pub(crate) fn stream(container: &str, what: &'static str, source: std::io::Error) -> Error {
        Error::Stream {
            container: container.to_owned(),
            what,
            source,
        }
    }

    pub(crate) fn config(container: &str, reason: impl Into<String>) -> Error {
        Error::InvalidConfig {
            container: container.to_owned(),
            reason: reason.into(),
        }
    }

    /// The container this error is about, `-` when none is (a hook configuration file, a pod's
    /// sysctl).
    pub fn container(&self) -> &str {
        match self {
            Error::InvalidId { id, .. } => id,
            Error::InvalidConfig { container, .. }
            | Error::NoCommand { container }
            | Error::UnknownUser { container, .. }
            | Error::File { container, .. }
            | Error::Io { container, .. }
            | Error::Corrupt { container, .. }
            | Error::Spawn { container, .. }
            | Error::Runtime { container, .. }
            | Error::Timeout { container, .. }
            | Error::NotFound { container, .. }
            | Error::NotExited { container }
            | Error::NotRunning { container, .. }
            | Error::NotPaused { container, .. }
            | Error::SeccompProfile { container, .. }
            | Error::InvalidMount { container, .. }
            | Error::Stream { container, .. } => container,
            Error::Hook { .. } | Error::Sysctl { .. } | Error::InvalidSignal { .. } => "-",
        }
    }
}

/// Checks a container id is safe as a file name and a runtime argument: the workspace's one rule
/// ([`node_primitives::id`]: libcni's, at most 128 bytes).
///
/// # Errors
///
/// [`Error::InvalidId`] when it is empty, longer than 128 bytes, does not start with a letter or
/// a digit, or has a character outside `[A-Za-z0-9_.-]`.
pub fn validate_id(id: &str) -> Result<()> {
    match node_primitives::id::check_container_id(id) {
        None => Ok(()),
        Some(problem) => Err(Error::InvalidId {
            id: id.to_owned(),
            reason: problem.reason(),
        }),
    }
}

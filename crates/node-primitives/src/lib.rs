//! The node's primitives, each rule once, for every crate of the workspace that touches the
//! node (as rust-analyzer's `stdx` is for its crates):
//!
//! - [`mounts`]: the mount table (`/proc/<pid>/mountinfo`) as typed [`MountEntry`]s, every
//!   `\ooo` escape decoded, read capped from a regular file; [`mounts::is_mount_point`];
//!   [`mounts::detach_all`].
//! - [`ns`]: namespaces pinned to files ([`Pins`], a manager per pin directory, keyed by
//!   [`NsKind`]), unpinned, and told apart from bare files.
//! - [`proc`]: `/proc/<pid>/stat` ([`ProcStat`], the command name's spaces and `)` survived),
//!   processes named by pid and start time ([`ProcessIdentity`]), `NSpid`.
//! - [`pidfd`]: a process pinned by a descriptor, signalled and waited for through it
//!   ([`Pidfd`]).
//! - [`child`] (feature `tokio`): a child process in its own process group, stdin fed, stdout
//!   and stderr each capped, time-bounded, its group killed and the child reaped at the
//!   timeout; and [`text::cut`], text cut on a character boundary.
//! - [`fingerprint`]: what identifies one version of a file ([`Fingerprint`]).
//! - [`id`]: the container id rule ([`validate_container_id`]).
//!
//! It depends on no crate of the workspace, and knows nothing of CNI, OCI or CRI: the crates
//! above it map its [`Error`] to their own, which name the pod, the container or the plugin.
//! It logs nothing. Linux only.
//!
//! Features: `serde` (a [`ProcessIdentity`] as `{"pid":…,"start_time":…}`), `tokio` (the
//! bounded child, [`Pidfd::exited_within`], [`ProcessIdentity::wait_exit`]).
//!
//! # Example
//!
//! ```
//! use std::path::Path;
//! use node_primitives::{ProcStat, ProcessIdentity, mounts};
//!
//! # fn main() -> node_primitives::Result<()> {
//! let proc_mount = mounts::read_own()?
//!     .into_iter()
//!     .find(|m| m.mount_point == Path::new("/proc"))
//!     .expect("/proc is mounted");
//! assert_eq!(proc_mount.fs_type, "proc");
//! assert!(mounts::is_mount_point(Path::new("/proc"))?);
//!
//! let me = ProcessIdentity::of(std::process::id() as i32).expect("running");
//! assert!(me.is_alive());
//! assert_eq!(ProcStat::of(me.pid).map(|s| s.start_time), Some(me.start_time));
//!
//! assert!(node_primitives::validate_container_id("pod-1").is_ok());
//! assert!(node_primitives::validate_container_id("_x").is_err());
//! # Ok(())
//! # }
//! ```

#[cfg(feature = "tokio")]
pub mod child;
mod error;
pub mod fingerprint;
pub mod id;
pub mod mounts;
pub mod ns;
pub mod pidfd;
pub mod proc;
mod read;
pub mod text;

pub use error::{ChildOp, Error, IdProblem, PinStep, Result, Stream};
pub use fingerprint::{FileId, Fingerprint};
pub use id::validate_container_id;
pub use mounts::MountEntry;
pub use ns::{NsKind, Pins};
pub use pidfd::Pidfd;
pub use proc::{ProcStat, ProcessIdentity};

//! The workspace's rules for files: read only regular files, never more than a cap, and replace
//! files atomically and durably.
//!
//! Programs that read files from directories others can write to (a CNI configuration
//! directory, a result cache, a state directory) must not hang on a FIFO planted there, read
//! `/dev/zero` forever or load a gigabyte into memory. Programs that keep state in files must not
//! leave half a file behind when they crash. This crate holds both rules once, so every crate
//! that reads or writes such files behaves the same:
//!
//! - [`open_regular`] and [`read_regular`]: open without blocking (`O_NONBLOCK`), check the open
//!   descriptor is a regular file, read at most a cap the caller gives; symbolic links followed
//!   or refused (`O_NOFOLLOW`) as the caller says ([`Symlinks`]).
//! - [`write_atomic`] and [`AtomicFile`]: a temporary file with a unique name in the same
//!   directory, created with the given mode, written, synced, renamed over the file, then the
//!   directory synced; the temporary file is removed on any failure. [`Durability::Unsynced`]
//!   skips the syncs for files that only have to survive their process dying.
//! - [`TempName`]: reads back a temporary file's name, for cleanups of dead writers' files.
//! - One [`Error`] that always names the file.
//!
//! It does not create directories, take locks (that is `cni-lock`) or know any file format.
//!
//! # Example
//!
//! ```
//! use safe_file::{Durability, Error, Symlinks};
//!
//! # fn main() -> safe_file::Result<()> {
//! # let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("state.json");
//! safe_file::write_atomic(&path, br#"{"ready":true}"#, 0o600, Durability::Synced)?;
//! assert_eq!(
//!     safe_file::read_regular(&path, 4096, Symlinks::Refuse)?,
//!     br#"{"ready":true}"#
//! );
//!
//! // Too long for the cap, or not a regular file: refused, naming the file.
//! let err = safe_file::read_regular(&path, 4, Symlinks::Refuse).unwrap_err();
//! assert!(matches!(err, Error::TooLarge { limit: 4, .. }));
//! let err = safe_file::read_regular(dir.path(), 4096, Symlinks::Follow).unwrap_err();
//! assert!(err.to_string().ends_with("not a regular file (directory)"));
//! # Ok(())
//! # }
//! ```

mod error;
mod read;
mod write;

pub use error::{Error, FileKind, Result};
pub use read::{Symlinks, open_regular, read_regular};
pub use write::{AtomicFile, Durability, TempName, sync_dir, write_atomic};

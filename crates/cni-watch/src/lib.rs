//! Watch CNI configuration and plugin directories and publish "the configuration changed".
//!
//! A [`Watcher`] is given directories and a loader closure. It runs the loader once at start,
//! then again (on a blocking thread) whenever the directories change, and publishes each result
//! as a [`Snapshot`] — a generation number and the value — through a `tokio::sync::watch`
//! channel that any number of subscribers can follow. It knows nothing about CNI files itself:
//! the `ocicni` facade passes a loader that calls `cni_config::load_dir`.
//!
//! What it does, and why (Go ocicni's watcher stops after its directory is recreated or after
//! any watcher error):
//!
//! - **Any change counts**: create, write, rename into place, deletion, permission changes.
//!   Opens and reads do not, or every plugin exec would cause a reload.
//! - **Bursts are coalesced**: after an event it waits for a quiet window
//!   ([`WatchOptions::quiet`]), extended by further events up to [`WatchOptions::max_delay`],
//!   then loads once.
//! - **Directories come and go**: a missing directory is watched through its nearest existing
//!   ancestor (non-recursively); when it appears, or is deleted and recreated, the watch moves
//!   back onto it and the watcher reloads.
//! - **Errors re-arm, never end watching**: a notify error re-creates the watches and reloads. A
//!   periodic rescan ([`WatchOptions::rescan`]) re-creates the watches and compares a fingerprint
//!   of the directories (names, sizes, modes, inodes, mtimes, ctimes) with the one taken at the
//!   last load, reloading only when it differs.
//! - **inotify is optional**: [`WatchMode::Poll`] fingerprints the directories every interval,
//!   [`WatchMode::Manual`] reloads only on [`Watcher::reload_now`]; if inotify cannot be set up
//!   in [`WatchMode::Inotify`], the watcher polls with a warning instead of failing.
//! - **Clean shutdown**: [`Watcher::shutdown`] (idempotent) or dropping the watcher stops the
//!   task and the file watches.
//!
//! Runtime problems are logged with `tracing`; [`Error`] covers only failures to start.
//! [`Watcher::stats`] counts loads and events, and each snapshot says when it was published and
//! why, for tests and benchmarks.
//!
//! You probably want the `ocicni` crate, which builds on this one.
//!
//! # Example
//!
//! ```
//! use cni_watch::{WatchOptions, Watcher};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let net_d = dir.path().join("net.d");
//! let list = {
//!     let net_d = net_d.clone();
//!     move || -> Vec<String> {
//!         let mut names: Vec<String> = std::fs::read_dir(&net_d)
//!             .map(|rd| rd.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
//!             .unwrap_or_default();
//!         names.sort();
//!         names
//!     }
//! };
//!
//! // the directory does not exist yet: that is fine
//! let watcher = Watcher::start(WatchOptions::new([&net_d]), list).await?;
//! assert_eq!(watcher.current().generation, 1);
//! assert!(watcher.current().value.is_empty());
//!
//! let mut rx = watcher.subscribe();
//! std::fs::create_dir(&net_d)?;
//! std::fs::write(net_d.join("10-bridge.conflist"), "{}")?;
//! let snap = rx.wait_for(|s| s.value.len() == 1).await?.clone();
//! assert!(snap.generation > 1);
//!
//! watcher.shutdown().await;
//! # Ok(())
//! # }
//! ```

mod dir_scan;
mod error;
mod notify_bridge;
mod options;
mod snapshot;
mod watcher;

pub use error::{Error, Result};
pub use options::{WatchMode, WatchOptions};
pub use snapshot::{ReloadReason, Snapshot, Stats};
pub use watcher::Watcher;

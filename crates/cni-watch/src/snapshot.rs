//! What subscribers receive, and counters for tests and benchmarks.

use std::fmt;
use std::sync::Arc;
use std::time::Instant;

/// One published load result.
///
/// Generations start at 1 (the load done by [`Watcher::start`](crate::Watcher::start)) and grow by
/// one per load, so a subscriber can tell whether it has seen a snapshot already.
pub struct Snapshot<T> {
    /// Load counter: 1 for the initial load, then one more per reload.
    pub generation: u64,
    /// What the loader returned.
    pub value: Arc<T>,
    /// What caused this load.
    pub reason: ReloadReason,
    /// When the load finished and the snapshot was published.
    pub loaded_at: Instant,
}

impl<T> Clone for Snapshot<T> {
    fn clone(&self) -> Self {
        Self {
            generation: self.generation,
            value: Arc::clone(&self.value),
            reason: self.reason,
            loaded_at: self.loaded_at,
        }
    }
}

impl<T: fmt::Debug> fmt::Debug for Snapshot<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Snapshot")
            .field("generation", &self.generation)
            .field("value", &self.value)
            .field("reason", &self.reason)
            .field("loaded_at", &self.loaded_at)
            .finish()
    }
}

/// What caused a load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ReloadReason {
    /// The load done by [`Watcher::start`](crate::Watcher::start).
    Initial,
    /// File-system events (after coalescing) or a notify error that forced re-arming.
    Event,
    /// A poll found a changed fingerprint ([`WatchMode::Poll`](crate::WatchMode::Poll) or the
    /// inotify fallback).
    Poll,
    /// The periodic rescan found a changed fingerprint that no event had reported.
    Rescan,
    /// [`Watcher::reload_now`](crate::Watcher::reload_now).
    Manual,
}

/// Counters of what a watcher has done since it started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Stats {
    /// Loads published after the initial one.
    pub reloads: u64,
    /// File-system events that counted as a change.
    pub events: u64,
    /// File-system events ignored: opens, reads, and activity next to (not on the way to) a
    /// watched directory.
    pub ignored_events: u64,
    /// Errors reported by `notify`; each one re-arms the watches.
    pub watch_errors: u64,
    /// Loads whose loader panicked; the previous snapshot stayed published.
    pub failed_loads: u64,
    /// Whether changes are currently detected by polling fingerprints rather than inotify.
    pub polling: bool,
}

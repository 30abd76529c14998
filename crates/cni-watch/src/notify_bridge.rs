//! The bridge from notify's event thread to the watcher task: flags plus a wake-up, so a burst
//! of thousands of events costs a few atomic stores, not a queue of thousands of messages.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use notify::event::{AccessKind, AccessMode};
use notify::{Event, EventKind};
use tokio::sync::Notify;

use crate::Stats;

/// State shared by the notify callback, the watcher task and the `Watcher` handle.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    /// A change-counting event arrived since the task last looked.
    pub(crate) dirty: AtomicBool,
    /// notify reported an error: the watches must be re-created.
    pub(crate) rearm: AtomicBool,
    /// Wakes the watcher task; holds a permit if the task is busy, so no wake-up is lost.
    pub(crate) wake: Notify,
    pub(crate) reloads: AtomicU64,
    pub(crate) events: AtomicU64,
    pub(crate) ignored_events: AtomicU64,
    pub(crate) watch_errors: AtomicU64,
    pub(crate) failed_loads: AtomicU64,
    pub(crate) polling: AtomicBool,
}

impl Shared {
    pub(crate) fn stats(&self) -> Stats {
        Stats {
            reloads: self.reloads.load(Ordering::Relaxed),
            events: self.events.load(Ordering::Relaxed),
            ignored_events: self.ignored_events.load(Ordering::Relaxed),
            watch_errors: self.watch_errors.load(Ordering::Relaxed),
            failed_loads: self.failed_loads.load(Ordering::Relaxed),
            polling: self.polling.load(Ordering::Relaxed),
        }
    }
}

/// The callback handed to notify.
pub(crate) fn handler(
    shared: Arc<Shared>,
    dirs: Arc<[PathBuf]>,
) -> impl FnMut(notify::Result<Event>) + Send + 'static {
    move |res| match res {
        Ok(event) if counts(&event, &dirs) => {
            shared.events.fetch_add(1, Ordering::Relaxed);
            shared.dirty.store(true, Ordering::Release);
            shared.wake.notify_one();
        }
        Ok(_) => {
            shared.ignored_events.fetch_add(1, Ordering::Relaxed);
        }
        Err(e) => {
            tracing::warn!(error = %e, paths = ?e.paths, "file watch error; re-arming the watches");
            shared.watch_errors.fetch_add(1, Ordering::Relaxed);
            shared.rearm.store(true, Ordering::Release);
            shared.wake.notify_one();
        }
    }
}

/// Whether an event means "the configuration may have changed".
///
/// Opens and read-only closes do not count (every plugin exec opens its binary); a close after
/// writing does. Events on paths that are neither inside a watched directory nor on the way to
/// one (siblings seen while an ancestor is watched) do not count either. Events without a path
/// (queue overflow) always count.
pub(crate) fn counts(event: &Event, dirs: &[PathBuf]) -> bool {
    let kind_counts = match event.kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        _ => true,
    };
    kind_counts && (event.paths.is_empty() || event.paths.iter().any(|p| relevant(p, dirs)))
}

fn relevant(path: &Path, dirs: &[PathBuf]) -> bool {
    dirs.iter()
        .any(|d| path.starts_with(d) || d.starts_with(path))
}

#[cfg(test)]
mod tests {
    use notify::event::{CreateKind, DataChange, MetadataKind, ModifyKind, RemoveKind, RenameMode};

    use super::*;

    #[test]
    fn which_events_count() {
        let dirs = [
            PathBuf::from("/etc/cni/net.d"),
            PathBuf::from("/opt/cni/bin"),
        ];
        let ev = |kind, path: &str| Event::new(kind).add_path(PathBuf::from(path));
        let cases = [
            (
                ev(
                    EventKind::Create(CreateKind::File),
                    "/etc/cni/net.d/10-a.conflist",
                ),
                true,
            ),
            (
                ev(
                    EventKind::Modify(ModifyKind::Name(RenameMode::To)),
                    "/etc/cni/net.d/a.conf",
                ),
                true,
            ),
            (
                ev(
                    EventKind::Modify(ModifyKind::Data(DataChange::Any)),
                    "/etc/cni/net.d/a.conf",
                ),
                true,
            ),
            (
                ev(
                    EventKind::Modify(ModifyKind::Metadata(MetadataKind::Any)),
                    "/opt/cni/bin/x",
                ),
                true,
            ),
            (
                ev(EventKind::Remove(RemoveKind::File), "/etc/cni/net.d/a.conf"),
                true,
            ),
            (
                ev(EventKind::Remove(RemoveKind::Folder), "/etc/cni/net.d"),
                true,
            ),
            (
                ev(
                    EventKind::Access(AccessKind::Close(AccessMode::Write)),
                    "/opt/cni/bin/bridge",
                ),
                true,
            ),
            (
                ev(
                    EventKind::Access(AccessKind::Open(AccessMode::Any)),
                    "/opt/cni/bin/bridge",
                ),
                false,
            ),
            (
                ev(
                    EventKind::Access(AccessKind::Close(AccessMode::Read)),
                    "/opt/cni/bin/bridge",
                ),
                false,
            ),
            // watching /etc while net.d is missing: creating /etc/cni is on the way, /etc/hosts is not
            (ev(EventKind::Create(CreateKind::Folder), "/etc/cni"), true),
            (ev(EventKind::Modify(ModifyKind::Any), "/etc/hosts"), false),
            (Event::new(EventKind::Other), true),
        ];
        for (event, want) in cases {
            assert_eq!(counts(&event, &dirs), want, "{event:?}");
        }
    }
}

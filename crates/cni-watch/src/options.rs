//! How a [`Watcher`](crate::Watcher) notices changes and how it paces reloads.

use std::path::PathBuf;
use std::time::Duration;

use crate::error::{Error, Result};

/// How changes in the watched directories are detected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum WatchMode {
    /// File-system notifications (inotify on Linux) through `notify`. If they cannot be set up
    /// (for example too many inotify instances or watches), the watcher logs a warning and polls
    /// every [`WatchOptions::poll_fallback`] instead, trying inotify again at each rescan.
    Inotify,
    /// No inotify: fingerprint the directories every interval and reload when the fingerprint
    /// changed. For hosts that limit inotify instances (rootless Podman users asked for it).
    Poll(Duration),
    /// No detection at all: reload only when [`Watcher::reload_now`](crate::Watcher::reload_now)
    /// is called.
    Manual,
}

/// Options for [`Watcher::start`](crate::Watcher::start).
///
/// Build one with [`WatchOptions::new`] or struct update syntax over [`Default`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchOptions {
    /// Directories to watch, non-recursively: typically the configuration directory and the
    /// plugin directories. They need not exist; relative paths are made absolute at start.
    pub dirs: Vec<PathBuf>,
    /// How changes are detected.
    pub mode: WatchMode,
    /// Quiet window: after an event, wait until no further event arrived for this long before
    /// reloading, so a burst of writes causes one reload.
    pub quiet: Duration,
    /// Cap on how long a continuous stream of events may postpone a reload, counted from the
    /// first event of the burst.
    pub max_delay: Duration,
    /// Safety net in [`WatchMode::Inotify`]: every interval, re-create the watches and compare a
    /// fingerprint of the directories with the one taken at the last load; reload only if it
    /// differs. `None` disables it.
    pub rescan: Option<Duration>,
    /// Polling interval used when [`WatchMode::Inotify`] cannot be set up.
    pub poll_fallback: Duration,
}

impl Default for WatchOptions {
    fn default() -> Self {
        Self {
            dirs: Vec::new(),
            mode: WatchMode::Inotify,
            quiet: Duration::from_millis(15),
            max_delay: Duration::from_millis(200),
            rescan: Some(Duration::from_secs(30)),
            poll_fallback: Duration::from_secs(1),
        }
    }
}

impl WatchOptions {
    /// Default options watching `dirs`.
    pub fn new<I, P>(dirs: I) -> Self
    where
        I: IntoIterator<Item = P>,
        P: Into<PathBuf>,
    {
        Self {
            dirs: dirs.into_iter().map(Into::into).collect(),
            ..Self::default()
        }
    }

    /// Checks the options a watcher cannot run with.
    pub(crate) fn validate(&self) -> Result<()> {
        if self.dirs.is_empty() {
            return Err(Error::NoDirs);
        }
        let invalid = |option| Error::InvalidOption {
            option,
            reason: "must be greater than zero",
        };
        if let WatchMode::Poll(d) = self.mode
            && d.is_zero()
        {
            return Err(invalid("mode: Poll interval"));
        }
        if self.rescan.is_some_and(|d| d.is_zero()) {
            return Err(invalid("rescan"));
        }
        if self.poll_fallback.is_zero() {
            return Err(invalid("poll_fallback"));
        }
        if self.max_delay < self.quiet {
            return Err(Error::InvalidOption {
                option: "max_delay",
                reason: "must not be shorter than quiet",
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_table() {
        let ok = WatchOptions::new(["/x"]);
        let cases: Vec<(WatchOptions, Option<&str>)> = vec![
            (ok.clone(), None),
            (WatchOptions::default(), Some("no directories to watch")),
            (
                WatchOptions {
                    mode: WatchMode::Poll(Duration::ZERO),
                    ..ok.clone()
                },
                Some("mode: Poll interval"),
            ),
            (
                WatchOptions {
                    rescan: Some(Duration::ZERO),
                    ..ok.clone()
                },
                Some("rescan"),
            ),
            (
                WatchOptions {
                    rescan: None,
                    ..ok.clone()
                },
                None,
            ),
            (
                WatchOptions {
                    poll_fallback: Duration::ZERO,
                    ..ok.clone()
                },
                Some("poll_fallback"),
            ),
            (
                WatchOptions {
                    quiet: Duration::from_secs(1),
                    max_delay: Duration::from_millis(1),
                    ..ok.clone()
                },
                Some("max_delay"),
            ),
            (
                WatchOptions {
                    mode: WatchMode::Manual,
                    rescan: None,
                    ..ok
                },
                None,
            ),
        ];
        for (opts, want) in cases {
            match (opts.validate(), want) {
                (Ok(()), None) => {}
                (Err(e), Some(w)) => assert!(e.to_string().contains(w), "{e} lacks {w}"),
                (got, want) => panic!("{opts:?}: got {got:?}, want error {want:?}"),
            }
        }
    }
}

//! A pull's progress timeout (CRI-O's `pull_progress_timeout`): a pull that, while it waits on
//! its registry, receives too little within a window is cancelled. The per-request timeout
//! cannot catch a registry that trickles: each chunk comes in time, and a layer sent at 200 B/s
//! would keep its pull alive for days.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::watch;

/// Why a watchdog fired: what one window brought, against what it had to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stalled {
    /// The window.
    pub(crate) window: Duration,
    /// Bytes received from the registry in it.
    pub(crate) received: u64,
    /// The fewest bytes it had to bring.
    pub(crate) wanted: u64,
}

/// Watches one pull from one source. Dropping it stops the watching.
pub(crate) struct Watchdog {
    counters: Arc<Counters>,
    fired: watch::Receiver<Option<Stalled>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

#[derive(Default)]
struct Counters {
    /// Bytes received from the registry so far.
    received: AtomicU64,
    /// Requests to the registry in flight.
    waiting: AtomicUsize,
}

impl Watchdog {
    /// Starts watching: every `window` (none: never), a window in which the pull waited on the
    /// registry from start to end and received fewer than `min_rate` bytes per second (and at
    /// least one byte) fires it. Windows the pull spent on local work (unpacking a stored
    /// blob, syncing) are not judged. Must be called within a Tokio runtime.
    pub(crate) fn start(window: Option<Duration>, min_rate: u64) -> Watchdog {
        let counters = Arc::new(Counters::default());
        let (tx, fired) = watch::channel(None);
        let task = window.filter(|w| !w.is_zero()).map(|window| {
            let counters = Arc::clone(&counters);
            let wanted = wanted(window, min_rate);
            tokio::spawn(async move {
                let mut ticks =
                    tokio::time::interval_at(tokio::time::Instant::now() + window, window);
                let mut last = 0;
                let mut was_waiting = false;
                loop {
                    ticks.tick().await;
                    let now = counters.received.load(Ordering::Relaxed);
                    let waiting = counters.waiting.load(Ordering::Relaxed) > 0;
                    let received = now - last;
                    if waiting && was_waiting && received < wanted {
                        let _ = tx.send(Some(Stalled {
                            window,
                            received,
                            wanted,
                        }));
                        return;
                    }
                    (last, was_waiting) = (now, waiting);
                }
            })
        });
        Watchdog {
            counters,
            fired,
            task,
        }
    }

    /// Counts bytes received from the registry.
    pub(crate) fn received(&self, bytes: usize) {
        self.counters
            .received
            .fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// Runs `fut`, a request to the registry, until it ends or the watchdog fires (then `fut` is
    /// dropped, which cancels the request).
    pub(crate) async fn guard<T>(
        &self,
        fut: impl Future<Output = T>,
    ) -> std::result::Result<T, Stalled> {
        let _waiting = Waiting::new(&self.counters);
        let mut fired = self.fired.clone();
        tokio::select! {
            out = fut => Ok(out),
            Ok(stalled) = fired.wait_for(Option::is_some) => Err(stalled.unwrap_or(Stalled {
                window: Duration::ZERO,
                received: 0,
                wanted: 0,
            })),
        }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

/// The fewest bytes a window must bring: `min_rate` bytes a second, and at least one.
fn wanted(window: Duration, min_rate: u64) -> u64 {
    let bytes = u128::from(min_rate).saturating_mul(window.as_millis()) / 1000;
    u64::try_from(bytes).unwrap_or(u64::MAX).max(1)
}

/// One request in flight, for as long as it lives.
struct Waiting<'a>(&'a Counters);

impl<'a> Waiting<'a> {
    fn new(counters: &'a Counters) -> Waiting<'a> {
        counters.waiting.fetch_add(1, Ordering::Relaxed);
        Waiting(counters)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_wants_the_rate_and_at_least_a_byte() {
        assert_eq!(wanted(Duration::from_secs(60), 0), 1);
        assert_eq!(wanted(Duration::from_secs(2), 1024), 2048);
        assert_eq!(wanted(Duration::from_millis(500), 1000), 500);
        assert_eq!(wanted(Duration::from_secs(u64::MAX), u64::MAX), u64::MAX);
    }

    #[tokio::test(start_paused = true)]
    async fn a_trickle_below_the_rate_fires_and_local_work_does_not() {
        let dog = Watchdog::start(Some(Duration::from_secs(1)), 100);
        // Local work for five windows: nothing waits on the registry, nothing fires.
        tokio::time::sleep(Duration::from_secs(5)).await;
        // A request that brings 10 bytes a second.
        let trickle = async {
            loop {
                dog.received(1);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        };
        let stalled = dog.guard(trickle).await.unwrap_err();
        assert_eq!(stalled.window, Duration::from_secs(1));
        assert_eq!(stalled.wanted, 100);
        assert!(stalled.received <= 11, "{stalled:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn enough_bytes_or_no_window_never_fire() {
        for (window, rate) in [(Some(Duration::from_secs(1)), 5), (None, 1_000_000)] {
            let dog = Watchdog::start(window, rate);
            let steady = async {
                for _ in 0..100 {
                    dog.received(1);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            };
            assert!(dog.guard(steady).await.is_ok(), "{window:?} {rate}");
        }
    }
}

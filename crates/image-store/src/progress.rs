//! A pull's progress: the [`Progress`] observer a caller hands in with
//! [`PullOptions::with_progress`](crate::PullOptions::with_progress), and the log lines a pull
//! writes itself (at most one every [`LOG_EVERY`], and a summary at the end).

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::digest::Digest;

/// The most often a pull logs its progress.
pub(crate) const LOG_EVERY: Duration = Duration::from_secs(5);

/// Told how a pull goes: for metrics, logs or a progress bar. Every method has an empty
/// default, so an observer implements only what it wants.
///
/// `image` is the reference as errors name it (`docker.io/library/busybox:latest`), `layer` a
/// layer's blob digest. The calls come from the pull's tasks, several layers at once: keep them
/// short and never block.
///
/// Only the pull that does the work reports its layers: a pull that joins one in progress for
/// the same reference hears only its own [`Progress::pull_done`]. A layer whose download fails
/// from one source (a mirror) may start again from the next.
pub trait Progress: Send + Sync {
    /// A layer's blob starts downloading; its descriptor says `size` bytes.
    fn layer_started(&self, image: &str, layer: &Digest, size: u64) {
        let _ = (image, layer, size);
    }

    /// `n` more bytes of a layer's blob arrived (counted before they are verified: the digest
    /// is known only at the end).
    fn bytes(&self, image: &str, layer: &Digest, n: u64) {
        let _ = (image, layer, n);
    }

    /// A layer is stored and unpacked. `reused`: its blob was in the store already, so nothing
    /// was downloaded for it (and [`Progress::layer_started`] was not called).
    fn layer_done(&self, image: &str, layer: &Digest, reused: bool) {
        let _ = (image, layer, reused);
    }

    /// A call to [`Store::pull_with`](crate::Store::pull_with) returned: `ok` or not, the layer
    /// bytes its own pull downloaded (0 when it joined a pull in progress or was refused before
    /// fetching anything) and how long it took. Once per call.
    fn pull_done(&self, image: &str, ok: bool, bytes: u64, took: Duration) {
        let _ = (image, ok, bytes, took);
    }
}

/// An observer in [`PullOptions`](crate::PullOptions), shown in its `Debug` by name only.
#[derive(Clone)]
pub(crate) struct Observer(pub(crate) Arc<dyn Progress>);

impl fmt::Debug for Observer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Progress")
    }
}

/// One pull's counters: fed by its layers, passed on to the observer, logged now and then.
pub(crate) struct Tracker {
    image: String,
    observer: Option<Arc<dyn Progress>>,
    started: Instant,
    /// Layer bytes downloaded by this pull, from every source it tried.
    downloaded: AtomicU64,
    /// The same, added to the caller's count (see [`Progress::pull_done`]).
    caller: Arc<AtomicU64>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    layers: usize,
    layers_done: usize,
    reused: usize,
    /// Bytes to download from the current source, and downloaded from it so far.
    to_fetch: u64,
    fetched: u64,
    last_log: Option<Instant>,
}

/// What a pull's summary says.
pub(crate) struct Summary {
    pub(crate) downloaded: u64,
    pub(crate) reused: usize,
    pub(crate) seconds: f64,
    pub(crate) mb_per_s: f64,
}

impl Tracker {
    pub(crate) fn new(
        image: &str,
        observer: Option<Arc<dyn Progress>>,
        caller: Arc<AtomicU64>,
    ) -> Tracker {
        Tracker {
            image: image.to_owned(),
            observer,
            started: Instant::now(),
            downloaded: AtomicU64::new(0),
            caller,
            state: Mutex::new(State::default()),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The layers of the image from one source: `layers` in all, `to_fetch` bytes of blobs
    /// not stored yet.
    pub(crate) fn plan(&self, layers: usize, to_fetch: u64) {
        let mut state = self.state();
        state.layers = layers;
        state.layers_done = 0;
        state.reused = 0;
        state.to_fetch = to_fetch;
        state.fetched = 0;
    }

    pub(crate) fn layer_started(&self, layer: &Digest, size: u64) {
        if let Some(o) = &self.observer {
            o.layer_started(&self.image, layer, size);
        }
    }

    pub(crate) fn bytes(&self, layer: &Digest, n: u64) {
        self.downloaded.fetch_add(n, Ordering::Relaxed);
        self.caller.fetch_add(n, Ordering::Relaxed);
        if let Some(o) = &self.observer {
            o.bytes(&self.image, layer, n);
        }
        let now = Instant::now();
        let mut state = self.state();
        state.fetched += n;
        let due = state
            .last_log
            .is_none_or(|last| now.duration_since(last) >= LOG_EVERY);
        // The first chunks of a pull are not news; the first line comes after LOG_EVERY.
        if state.last_log.is_none() {
            state.last_log = Some(now);
        } else if due {
            state.last_log = Some(now);
            let seconds = now.duration_since(self.started).as_secs_f64();
            tracing::info!(
                image = %self.image,
                bytes = state.fetched,
                total = state.to_fetch,
                mb_per_s = rate(self.downloaded.load(Ordering::Relaxed), seconds),
                layers_done = state.layers_done,
                layers = state.layers,
                "pulling"
            );
        }
    }

    pub(crate) fn layer_done(&self, layer: &Digest, reused: bool) {
        {
            let mut state = self.state();
            state.layers_done += 1;
            state.reused += usize::from(reused);
        }
        if let Some(o) = &self.observer {
            o.layer_done(&self.image, layer, reused);
        }
    }

    /// The numbers of the pull's summary line.
    pub(crate) fn summary(&self) -> Summary {
        let seconds = self.started.elapsed().as_secs_f64();
        let downloaded = self.downloaded.load(Ordering::Relaxed);
        Summary {
            downloaded,
            reused: self.state().reused,
            seconds,
            mb_per_s: rate(downloaded, seconds),
        }
    }
}

/// Megabytes (10^6 bytes) a second, to one decimal.
fn rate(bytes: u64, seconds: f64) -> f64 {
    if seconds <= 0.0 {
        return 0.0;
    }
    (bytes as f64 / 1e6 / seconds * 10.0).round() / 10.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Seen(Mutex<Vec<String>>);

    impl Progress for Seen {
        fn bytes(&self, image: &str, layer: &Digest, n: u64) {
            self.0.lock().unwrap().push(format!("{image} {layer} {n}"));
        }
    }

    #[test]
    fn the_tracker_counts_for_the_pull_and_its_caller_and_tells_the_observer() {
        let seen = Arc::new(Seen::default());
        let caller = Arc::new(AtomicU64::new(5));
        let tracker = Tracker::new(
            "img",
            Some(Arc::clone(&seen) as Arc<dyn Progress>),
            Arc::clone(&caller),
        );
        let layer = Digest::of(b"layer");
        tracker.plan(2, 30);
        tracker.layer_started(&layer, 30);
        tracker.bytes(&layer, 10);
        tracker.bytes(&layer, 20);
        tracker.layer_done(&layer, false);
        tracker.layer_done(&Digest::of(b"other"), true);
        let summary = tracker.summary();
        assert_eq!(summary.downloaded, 30);
        assert_eq!(summary.reused, 1);
        assert_eq!(caller.load(Ordering::Relaxed), 35);
        assert_eq!(
            *seen.0.lock().unwrap(),
            [format!("img {layer} 10"), format!("img {layer} 20")]
        );
    }

    #[test]
    fn rates_are_megabytes_a_second() {
        assert!((rate(50_000_000, 2.0) - 25.0).abs() < 1e-9);
        assert!((rate(123_456, 1.0) - 0.1).abs() < 1e-9, "to one decimal");
        assert!(rate(1, 0.0).abs() < 1e-9);
    }
}

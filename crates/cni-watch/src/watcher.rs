//! The public handle and the task behind it.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use notify::{RecommendedWatcher, RecursiveMode, Watcher as _};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep_until};

use crate::dir_scan::{anchors, fingerprint};
use crate::error::{Error, Result};
use crate::notify_bridge::{Shared, handler};
use crate::{ReloadReason, Snapshot, Stats, WatchMode, WatchOptions};

type Loader<T> = Arc<dyn Fn() -> T + Send + Sync + 'static>;

enum Command<T> {
    Reload(oneshot::Sender<Snapshot<T>>),
    Shutdown,
}

/// Watches directories and publishes a fresh load result whenever they change.
///
/// Cheap to share behind an `Arc`; every method takes `&self`. Dropping it stops the background
/// task and the file watches (without waiting); [`Watcher::shutdown`] stops and waits.
pub struct Watcher<T> {
    tx: Arc<watch::Sender<Snapshot<T>>>,
    cmds: mpsc::UnboundedSender<Command<T>>,
    task: Mutex<Option<JoinHandle<()>>>,
    shared: Arc<Shared>,
}

impl<T> std::fmt::Debug for Watcher<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watcher")
            .field("generation", &self.tx.borrow().generation)
            .field("stats", &self.shared.stats())
            .finish_non_exhaustive()
    }
}

impl<T: Send + Sync + 'static> Watcher<T> {
    /// Sets up the watches, runs `loader` once (on a blocking thread) and publishes its result as
    /// generation 1, then keeps watching in a background task.
    ///
    /// The watches are placed before the initial load, so nothing that happens during it is
    /// missed. Missing directories are not an error: their nearest existing ancestor is watched.
    /// If inotify cannot be set up in [`WatchMode::Inotify`], the watcher polls instead.
    ///
    /// # Errors
    ///
    /// [`Error::NoRuntime`] outside a tokio runtime, [`Error::NoDirs`] or
    /// [`Error::InvalidOption`] for unusable options, [`Error::InitialLoadPanicked`] if the loader
    /// panicked.
    pub async fn start<F>(opts: WatchOptions, loader: F) -> Result<Self>
    where
        F: Fn() -> T + Send + Sync + 'static,
    {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| Error::NoRuntime)?;
        opts.validate()?;
        let dirs: Arc<[PathBuf]> = opts
            .dirs
            .iter()
            .map(|d| std::path::absolute(d).unwrap_or_else(|_| d.clone()))
            .collect();
        let shared = Arc::new(Shared::default());
        let loader: Loader<T> = Arc::new(loader);

        let mut engine = Engine {
            dirs: Arc::clone(&dirs),
            opts,
            loader: Arc::clone(&loader),
            shared: Arc::clone(&shared),
            notify: None,
            armed: BTreeSet::new(),
            polling: None,
            last_fp: None,
            generation: 0,
            burst: None,
            rearm_due: false,
            next_poll: None,
            next_rescan: None,
        };
        match engine.opts.mode {
            WatchMode::Inotify => {
                engine.arm();
                engine.next_rescan = engine.opts.rescan.map(|r| Instant::now() + r);
            }
            WatchMode::Poll(every) => engine.set_polling(Some(every)),
            WatchMode::Manual => {}
        }

        let (fp, value) = runtime
            .spawn_blocking(move || (fingerprint(&dirs), loader()))
            .await
            .map_err(|_| Error::InitialLoadPanicked)?;
        engine.last_fp = Some(fp);
        engine.generation = 1;
        let tx = Arc::new(watch::Sender::new(Snapshot {
            generation: 1,
            value: Arc::new(value),
            reason: ReloadReason::Initial,
            loaded_at: std::time::Instant::now(),
        }));

        let (cmds, rx) = mpsc::unbounded_channel();
        let task = runtime.spawn(engine.run(Arc::clone(&tx), rx));
        Ok(Self {
            tx,
            cmds,
            task: Mutex::new(Some(task)),
            shared,
        })
    }

    /// A receiver that sees every snapshot published from now on (and the current one).
    pub fn subscribe(&self) -> watch::Receiver<Snapshot<T>> {
        self.tx.subscribe()
    }

    /// The latest published snapshot.
    pub fn current(&self) -> Snapshot<T> {
        self.tx.borrow().clone()
    }

    /// Loads now, publishes and returns the new snapshot; the load starts after this call, so it
    /// sees every change made before it. Pending coalesced events are folded into this load.
    ///
    /// After [`Watcher::shutdown`], or if the loader panics, returns the current snapshot.
    pub async fn reload_now(&self) -> Snapshot<T> {
        let (reply, rx) = oneshot::channel();
        if self.cmds.send(Command::Reload(reply)).is_err() {
            return self.current();
        }
        rx.await.unwrap_or_else(|_| self.current())
    }

    /// Counters of what the watcher has done so far.
    pub fn stats(&self) -> Stats {
        self.shared.stats()
    }

    /// Stops the file watches and the background task and waits for the task to end (a load in
    /// progress finishes first). Calling it again, or calling it from several places, is fine.
    pub async fn shutdown(&self) {
        let _ = self.cmds.send(Command::Shutdown);
        let task = self
            .task
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(task) = task
            && let Err(e) = task.await
            && e.is_panic()
        {
            tracing::error!("the configuration watcher task panicked");
        }
    }
}

impl<T> Drop for Watcher<T> {
    fn drop(&mut self) {
        // the task also ends when the command channel closes; this just makes it prompt
        let _ = self.cmds.send(Command::Shutdown);
    }
}

/// Events seen but not yet loaded.
#[derive(Debug, Clone, Copy)]
struct Burst {
    first: Instant,
    last: Instant,
}

/// The background task's state.
struct Engine<T> {
    dirs: Arc<[PathBuf]>,
    opts: WatchOptions,
    loader: Loader<T>,
    shared: Arc<Shared>,
    notify: Option<RecommendedWatcher>,
    /// Paths we placed a watch on.
    armed: BTreeSet<PathBuf>,
    /// Poll interval while fingerprint polling is how changes are detected.
    polling: Option<Duration>,
    /// Fingerprint taken just before the last load.
    last_fp: Option<u64>,
    generation: u64,
    burst: Option<Burst>,
    rearm_due: bool,
    next_poll: Option<Instant>,
    next_rescan: Option<Instant>,
}

impl<T: Send + Sync + 'static> Engine<T> {
    async fn run(
        mut self,
        tx: Arc<watch::Sender<Snapshot<T>>>,
        mut cmds: mpsc::UnboundedReceiver<Command<T>>,
    ) {
        let shared = Arc::clone(&self.shared);
        loop {
            let burst_due = self
                .burst
                .map(|b| (b.last + self.opts.quiet).min(b.first + self.opts.max_delay));
            let (poll_due, rescan_due) = (self.next_poll, self.next_rescan);
            tokio::select! {
                biased;
                cmd = cmds.recv() => match cmd {
                    Some(Command::Reload(reply)) => {
                        self.burst = None;
                        self.refresh_watches();
                        let snap = self.reload(&tx, ReloadReason::Manual).await;
                        let _ = reply.send(snap);
                    }
                    Some(Command::Shutdown) | None => break,
                },
                () = shared.wake.notified() => self.take_signals(),
                () = sleep_opt(burst_due) => {
                    self.burst = None;
                    if std::mem::take(&mut self.rearm_due) {
                        self.arm();
                    } else {
                        self.refresh_watches();
                    }
                    self.reload(&tx, ReloadReason::Event).await;
                }
                () = sleep_opt(poll_due) => {
                    self.next_poll = self.polling.map(|every| Instant::now() + every);
                    if self.changed_since_load().await {
                        self.reload(&tx, ReloadReason::Poll).await;
                    }
                }
                () = sleep_opt(rescan_due) => {
                    self.next_rescan = self.opts.rescan.map(|every| Instant::now() + every);
                    if self.notify.is_some() {
                        self.refresh_watches();
                    } else {
                        self.arm();
                    }
                    if self.changed_since_load().await {
                        tracing::info!("rescan found a change no event reported");
                        self.reload(&tx, ReloadReason::Rescan).await;
                    }
                }
            }
        }
        // dropping the notify watcher stops its thread
        self.notify = None;
        tracing::debug!("configuration watcher stopped");
    }

    fn take_signals(&mut self) {
        let rearm = self.shared.rearm.swap(false, Ordering::Acquire);
        let dirty = self.shared.dirty.swap(false, Ordering::Acquire);
        if rearm {
            self.rearm_due = true;
        }
        if (rearm || dirty) && self.notify.is_some() {
            let now = Instant::now();
            let first = self.burst.map_or(now, |b| b.first);
            self.burst = Some(Burst { first, last: now });
        }
    }

    /// (Re)creates the notify watcher and its watches; falls back to polling if that fails.
    fn arm(&mut self) {
        self.notify = None;
        self.armed.clear();
        let created = RecommendedWatcher::new(
            handler(Arc::clone(&self.shared), Arc::clone(&self.dirs)),
            notify::Config::default(),
        );
        let result = created.and_then(|w| {
            self.notify = Some(w);
            self.reconcile()
        });
        match result {
            Ok(()) => {
                if self.polling.is_some() {
                    tracing::info!("file watches are back; polling stopped");
                }
                self.set_polling(None);
            }
            Err(e) => {
                self.notify = None;
                self.armed.clear();
                if self.polling.is_none() {
                    tracing::warn!(
                        error = %e,
                        every = ?self.opts.poll_fallback,
                        "cannot watch the configuration directories; polling instead"
                    );
                }
                self.set_polling(Some(self.opts.poll_fallback));
            }
        }
    }

    fn refresh_watches(&mut self) {
        if self.notify.is_some()
            && let Err(e) = self.reconcile()
        {
            tracing::warn!(error = %e, "cannot re-create the file watches; re-arming");
            self.arm();
        }
    }

    /// Re-creates the watches from what is on disk now: each wanted directory, or its nearest
    /// existing ancestor while it is missing. Always from scratch: a directory deleted and
    /// recreated under the same path may get the same inode number back while notify has
    /// already dropped the old watch, so no cheap check tells a live watch from a dead one.
    /// Events lost while re-creating are harmless because a load always follows.
    ///
    /// notify's `watch` waits briefly for its own event thread; it never waits on this runtime.
    fn reconcile(&mut self) -> notify::Result<()> {
        let Some(w) = self.notify.as_mut() else {
            return Ok(());
        };
        for p in std::mem::take(&mut self.armed) {
            // notify may have dropped it already when the directory went away
            let _ = w.unwatch(&p);
        }
        // a directory can vanish between looking and watching: look again a few times
        for _ in 0..4 {
            let mut vanished = false;
            for p in anchors(&self.dirs) {
                if self.armed.contains(&p) {
                    continue;
                }
                match w.watch(&p, RecursiveMode::NonRecursive) {
                    Ok(()) => {
                        tracing::trace!(dir = %p.display(), "watching");
                        self.armed.insert(p);
                    }
                    Err(e) if is_not_found(&e) => vanished = true,
                    Err(e) => return Err(e),
                }
            }
            if !vanished {
                break;
            }
        }
        Ok(())
    }

    fn set_polling(&mut self, every: Option<Duration>) {
        self.polling = every;
        self.next_poll = every.map(|d| Instant::now() + d);
        self.shared
            .polling
            .store(every.is_some(), Ordering::Relaxed);
    }

    async fn changed_since_load(&self) -> bool {
        let dirs = Arc::clone(&self.dirs);
        match tokio::task::spawn_blocking(move || fingerprint(&dirs)).await {
            Ok(fp) => self.last_fp != Some(fp),
            Err(_) => true,
        }
    }

    /// Runs the loader on a blocking thread and publishes the result; keeps the previous
    /// snapshot if the loader panics.
    async fn reload(
        &mut self,
        tx: &watch::Sender<Snapshot<T>>,
        reason: ReloadReason,
    ) -> Snapshot<T> {
        let (loader, dirs) = (Arc::clone(&self.loader), Arc::clone(&self.dirs));
        let loaded = tokio::task::spawn_blocking(move || (fingerprint(&dirs), loader())).await;
        let Ok((fp, value)) = loaded else {
            self.shared.failed_loads.fetch_add(1, Ordering::Relaxed);
            let current = tx.borrow().clone();
            tracing::error!(
                generation = current.generation,
                "the configuration loader panicked; keeping the previous snapshot"
            );
            return current;
        };
        self.last_fp = Some(fp);
        self.generation += 1;
        let snap = Snapshot {
            generation: self.generation,
            value: Arc::new(value),
            reason,
            loaded_at: std::time::Instant::now(),
        };
        // count first, so whoever sees the snapshot sees it counted
        self.shared.reloads.fetch_add(1, Ordering::Relaxed);
        tx.send_replace(snap.clone());
        tracing::debug!(
            generation = self.generation,
            ?reason,
            "configuration reloaded"
        );
        snap
    }
}

fn is_not_found(e: &notify::Error) -> bool {
    match &e.kind {
        notify::ErrorKind::PathNotFound => true,
        notify::ErrorKind::Io(io) => io.kind() == std::io::ErrorKind::NotFound,
        _ => false,
    }
}

async fn sleep_opt(at: Option<Instant>) {
    match at {
        Some(at) => sleep_until(at).await,
        None => std::future::pending().await,
    }
}

//! Locks keyed by container ID, held across processes with flock and queued within a process.
//!
//! The CNI spec forbids running two operations (say two `DEL`s from two `podman stop` calls)
//! for the same container at once. This crate gives each container, or each container on one
//! network, an exclusive lock:
//!
//! - **Across processes** it is an `flock(2)` (through std's [`File::lock`](std::fs::File::lock)
//!   family) on a file in a lock directory, typically `<run dir>/locks` (ocicni: `/run/ocicni/locks`,
//!   on the tmpfs `/run` is, since locks mean nothing after a reboot). The kernel drops it if
//!   the holder dies, so a crashed or killed process never wedges the container.
//! - **Within a process** callers for the same key queue in FIFO order, so only the head of the
//!   queue contends for the file lock.
//! - **Lock files do not pile up**: the holder removes the file on release, with a protocol that
//!   keeps mutual exclusion (documented in the `flock` module source, summarised in the README).
//!   A holder that knows the key will be locked again soon (a pod just set up will be torn down)
//!   can [keep the file](LockGuard::keep_file) instead, which saves creating it again; files
//!   nobody needs any more are removed by the next holder or by [`Locks::sweep`]. The
//!   [GC lock](LockKey::gc)'s file is always kept.
//! - **File names are safe** whatever the key contains; see [`LockKey::file_name`].
//! - Every wait has a **timeout**; [`Error::Timeout`] names the lock file and how long it waited.
//!
//! [`LockKey::gc`] adds a reader/writer lock for garbage collection: set-up and teardown take it
//! [shared](Locks::lock_shared) before their container lock, GC takes it
//! [exclusive](Locks::lock), so GC never runs during a set-up or teardown.
//!
//! The async API ([`Locks::lock`]) never blocks runtime threads: file-lock polling runs on
//! Tokio's blocking pool and stops at the deadline or when the future is dropped. The blocking
//! API ([`Locks::lock_blocking`]) suits synchronous callers and needs no runtime.
//!
//! [`FileLock`] is the plain case: one exclusive lock on one file, tried once without waiting,
//! [`Error::Held`] when someone else has it. A daemon takes it to be the only one using its state
//! directory or socket.
//!
//! This crate does not know about CNI, plugins or configurations. You probably want the `ocicni`
//! crate, which builds on this one.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use cni_lock::{LockKey, Locks};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> cni_lock::Result<()> {
//! # let run = tempfile::tempdir().unwrap();
//! let locks = Locks::under(run.path());
//! let timeout = Duration::from_secs(5);
//! {
//!     let _gc = locks.lock_shared(&LockKey::gc(), timeout).await?;
//!     let guard = locks.lock(&LockKey::container("3f1c0ffee"), timeout).await?;
//!     assert!(guard.path().starts_with(run.path().join("locks")));
//!     // ... run DEL for the container ...
//! } // both locks released here, their files removed
//!
//! // A second holder of the same key waits, here in vain:
//! let held = locks.lock(&LockKey::container("3f1c0ffee"), timeout).await?;
//! let err = locks
//!     .lock(&LockKey::container("3f1c0ffee"), Duration::from_millis(20))
//!     .await
//!     .unwrap_err();
//! assert!(matches!(err, cni_lock::Error::Timeout { .. }));
//! held.unlock()?;
//! # Ok(())
//! # }
//! ```

mod error;
mod file_lock;
mod flock;
mod key;
mod queue;

use std::{
    path::{Path, PathBuf},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

pub use error::{Error, Result};
pub use file_lock::FileLock;
pub use key::LockKey;

use flock::{Failure, Held};
use queue::{Queues, Turn, block_on_until};

/// Name of the lock directory inside a runtime's run directory (see [`Locks::under`]).
pub const LOCKS_SUBDIR: &str = "locks";

/// Whether a lock is held alone or together with other shared holders.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LockMode {
    /// Any number of shared holders at once, but no exclusive holder (`LOCK_SH`).
    Shared,
    /// One holder and nobody else (`LOCK_EX`).
    Exclusive,
}

/// A set of locks living in one directory.
///
/// Cheap to clone; clones share the in-process queues. Two `Locks` values created separately
/// for the same directory still exclude each other, through the file locks only (as two
/// processes would).
#[derive(Debug, Clone)]
pub struct Locks {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    dir: PathBuf,
    queues: Arc<Queues>,
}

/// A held lock. Dropping it releases the lock and removes its file if nobody else uses it.
///
/// Release does a couple of quick file-system calls (stat, unlink, close) on the dropping
/// thread. Use [`LockGuard::unlock`] to see errors from removing the file; `Drop` can only log
/// them.
#[derive(Debug)]
#[must_use = "the lock is released as soon as the guard is dropped"]
pub struct LockGuard {
    // Fields drop in order: the file lock goes before the in-process turn, so the next
    // in-process waiter does not start polling a file that is still locked.
    held: Held,
    _turn: Turn,
    key: LockKey,
    path: PathBuf,
    mode: LockMode,
}

impl Locks {
    /// Locks kept in `dir`, which is created (mode 0700) on first use.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            inner: Arc::new(Inner {
                dir: dir.into(),
                queues: Arc::default(),
            }),
        }
    }

    /// Locks kept in `<dir>/locks` (see [`LOCKS_SUBDIR`]), `dir` being the runtime's run
    /// directory: ocicni passes its run dir (`/run/ocicni` by default).
    pub fn under(dir: impl AsRef<Path>) -> Self {
        Self::new(dir.as_ref().join(LOCKS_SUBDIR))
    }

    /// The lock directory.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// Where the lock file for `key` lives.
    pub fn path_for(&self, key: &LockKey) -> PathBuf {
        self.inner.dir.join(key.file_name())
    }

    /// Takes `key` exclusively, waiting at most `timeout` (queue plus file lock).
    ///
    /// A zero timeout tries once. Dropping the returned future stops the wait. Locks are not
    /// reentrant: asking again for a key you hold waits for yourself until the timeout.
    ///
    /// # Errors
    ///
    /// [`Error::Timeout`] if the lock stayed busy; [`Error::Io`] if the lock directory or file
    /// cannot be created, opened or locked.
    ///
    /// # Panics
    ///
    /// Outside a Tokio runtime, or in one without the time driver (like every Tokio timer).
    pub async fn lock(&self, key: &LockKey, timeout: Duration) -> Result<LockGuard> {
        self.acquire(key, LockMode::Exclusive, timeout).await
    }

    /// Takes `key` shared: other shared holders may hold it too, exclusive ones wait.
    ///
    /// Meant for [`LockKey::gc`]: set-up and teardown hold it shared, GC exclusive.
    ///
    /// # Errors
    ///
    /// As for [`Locks::lock`].
    ///
    /// # Panics
    ///
    /// As for [`Locks::lock`].
    pub async fn lock_shared(&self, key: &LockKey, timeout: Duration) -> Result<LockGuard> {
        self.acquire(key, LockMode::Shared, timeout).await
    }

    /// Takes `key` in `mode`, waiting at most `timeout`.
    ///
    /// # Errors
    ///
    /// As for [`Locks::lock`].
    ///
    /// # Panics
    ///
    /// As for [`Locks::lock`].
    pub async fn acquire(
        &self,
        key: &LockKey,
        mode: LockMode,
        timeout: Duration,
    ) -> Result<LockGuard> {
        let start = Instant::now();
        let deadline = start.checked_add(timeout);
        let path = self.path_for(key);
        let timed_out = || Error::Timeout {
            path: path.clone(),
            waited: start.elapsed(),
        };

        let waiting = self.inner.queues.wait(key.file_name(), mode);
        let turn = match deadline {
            Some(deadline) => tokio::time::timeout_at(deadline.into(), waiting)
                .await
                .map_err(|_| timed_out())?,
            None => waiting.await,
        };

        // Uncontended, the lock is a few syscalls away: take it here, and poll on the blocking
        // pool only when someone else holds it.
        if let Some(held) = flock::try_acquire(&self.inner.dir, &path, mode)? {
            return Ok(Self::guard(held, turn, key, path, mode));
        }
        let cancel = Arc::new(AtomicBool::new(false));
        let _cancel_on_drop = CancelOnDrop(Arc::clone(&cancel));
        let task = tokio::task::spawn_blocking({
            let (dir, path) = (self.inner.dir.clone(), path.clone());
            move || flock::acquire(&dir, &path, mode, deadline, Some(&cancel))
        });
        let held = match task.await {
            Ok(Ok(held)) => held,
            Ok(Err(Failure::Timeout)) => return Err(timed_out()),
            Ok(Err(Failure::Io(e))) => return Err(e),
            Ok(Err(Failure::Cancelled)) => return Err(cancelled(&path)),
            Err(join) => return Err(Error::io(&path, std::io::Error::other(join))),
        };
        Ok(Self::guard(held, turn, key, path, mode))
    }

    /// Takes `key` exclusively from synchronous code, waiting at most `timeout`.
    ///
    /// Blocks the calling thread; needs no runtime. Do not call it on an async runtime thread.
    ///
    /// # Errors
    ///
    /// As for [`Locks::lock`].
    pub fn lock_blocking(&self, key: &LockKey, timeout: Duration) -> Result<LockGuard> {
        self.acquire_blocking(key, LockMode::Exclusive, timeout)
    }

    /// Takes `key` shared from synchronous code; see [`Locks::lock_shared`].
    ///
    /// # Errors
    ///
    /// As for [`Locks::lock`].
    pub fn lock_shared_blocking(&self, key: &LockKey, timeout: Duration) -> Result<LockGuard> {
        self.acquire_blocking(key, LockMode::Shared, timeout)
    }

    /// Takes `key` in `mode` from synchronous code, waiting at most `timeout`.
    ///
    /// # Errors
    ///
    /// As for [`Locks::lock`].
    pub fn acquire_blocking(
        &self,
        key: &LockKey,
        mode: LockMode,
        timeout: Duration,
    ) -> Result<LockGuard> {
        let start = Instant::now();
        let deadline = start.checked_add(timeout);
        let path = self.path_for(key);
        let timed_out = || Error::Timeout {
            path: path.clone(),
            waited: start.elapsed(),
        };

        let turn = block_on_until(self.inner.queues.wait(key.file_name(), mode), deadline)
            .ok_or_else(timed_out)?;
        let held = match flock::acquire(&self.inner.dir, &path, mode, deadline, None) {
            Ok(held) => held,
            Err(Failure::Timeout) => return Err(timed_out()),
            Err(Failure::Io(e)) => return Err(e),
            Err(Failure::Cancelled) => return Err(cancelled(&path)),
        };
        Ok(Self::guard(held, turn, key, path, mode))
    }

    /// Removes the lock files in the lock directory that nobody holds, except the GC lock's and
    /// those whose file name `keep` accepts (compare with [`LockKey::file_name`]); returns how
    /// many it removed.
    ///
    /// For garbage collection: files kept by [`LockGuard::keep_file`] for keys that are gone,
    /// and files left by processes that died holding them. A file that is locked, or gets locked
    /// while the sweep looks at it, is left alone, so sweeping is safe at any time. Blocking: a
    /// few syscalls per file.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] naming the directory or file that could not be read, opened or removed.
    pub fn sweep(&self, keep: impl Fn(&str) -> bool) -> Result<usize> {
        let gc = LockKey::gc();
        flock::sweep(&self.inner.dir, &|name| {
            name == gc.file_name() || keep(name)
        })
    }

    fn guard(
        mut held: Held,
        turn: Turn,
        key: &LockKey,
        path: PathBuf,
        mode: LockMode,
    ) -> LockGuard {
        held.keep = key.is_gc();
        tracing::debug!(%key, path = %path.display(), ?mode, "lock acquired");
        LockGuard {
            held,
            _turn: turn,
            key: key.clone(),
            path,
            mode,
        }
    }
}

/// Only reachable if a cancel flag is set while its caller still waits, which `acquire` never does.
fn cancelled(path: &Path) -> Error {
    Error::io(
        path,
        std::io::Error::new(std::io::ErrorKind::Interrupted, "lock wait cancelled"),
    )
}

/// Tells the blocking poller to stop when the async caller goes away.
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

impl LockGuard {
    /// The key this guard holds.
    pub fn key(&self) -> &LockKey {
        &self.key
    }

    /// The lock file this guard holds.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the lock is held shared or exclusive.
    pub fn mode(&self) -> LockMode {
        self.mode
    }

    /// Leaves the lock file in place when this guard is released, for a key that will be locked
    /// again soon: the next holder then opens the file instead of creating it. A later holder
    /// that does not keep it, or [`Locks::sweep`], removes it. Mutual exclusion does not depend
    /// on files being removed, only on who may remove them.
    pub fn keep_file(&mut self) {
        self.held.keep = true;
    }

    /// Releases the lock now, reporting a failure to remove its file.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] if the lock file could not be removed. The lock is released regardless.
    pub fn unlock(self) -> Result<()> {
        let Self {
            held, _turn: turn, ..
        } = self;
        let result = held.release();
        drop(turn);
        tracing::debug!(key = %self.key, "lock released");
        result
    }
}

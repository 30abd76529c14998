//! The in-process half: one fair reader/writer queue per lock file name.
//!
//! Within one process, callers for the same key wait here in FIFO order, so that only the head
//! of the queue (or a group of shared holders) polls the file lock. `tokio::sync::RwLock` is fair
//! (a queued writer holds back later readers) and needs no runtime to be polled, so the blocking
//! API drives the same futures with [`block_on_until`].

use std::{
    collections::HashMap,
    future::Future,
    pin::pin,
    sync::{Arc, Mutex, PoisonError},
    task::{Context, Poll, Wake, Waker},
    thread::{self, Thread},
    time::Instant,
};

use tokio::sync::{OwnedRwLockReadGuard, OwnedRwLockWriteGuard, RwLock};

use crate::LockMode;

/// Per-key queues, created on demand and dropped once nobody holds or waits for them.
#[derive(Debug, Default)]
pub(crate) struct Queues {
    slots: Mutex<HashMap<String, Arc<RwLock<()>>>>,
}

/// A place in one key's queue. Holding it keeps the queue's map entry alive.
#[derive(Debug)]
struct Slot {
    queues: Arc<Queues>,
    name: String,
    lock: Arc<RwLock<()>>,
}

/// Proof that this caller is at the head of its key's queue (or among its shared holders).
#[derive(Debug)]
pub(crate) struct Turn {
    // Fields drop in order: the guard goes before `_slot`, so the entry is pruned once free.
    _shared: Option<OwnedRwLockReadGuard<()>>,
    _exclusive: Option<OwnedRwLockWriteGuard<()>>,
    _slot: Slot,
}

impl Queues {
    fn slot(self: &Arc<Self>, name: &str) -> Slot {
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        let lock = Arc::clone(slots.entry(name.to_owned()).or_default());
        Slot {
            queues: Arc::clone(self),
            name: name.to_owned(),
            lock,
        }
    }

    /// Waits for this caller's turn on `name`. Cancel-safe: dropping the future leaves the queue.
    pub(crate) async fn wait(self: &Arc<Self>, name: &str, mode: LockMode) -> Turn {
        let slot = self.slot(name);
        let lock = Arc::clone(&slot.lock);
        let (shared, exclusive) = match mode {
            LockMode::Shared => (Some(lock.read_owned().await), None),
            LockMode::Exclusive => (None, Some(lock.write_owned().await)),
        };
        Turn {
            _shared: shared,
            _exclusive: exclusive,
            _slot: slot,
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut slots = self
            .queues
            .slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // Every clone is made under this mutex, so a count of two (the map's and ours) means
        // nobody else holds or waits for the entry, and nobody can start to without the mutex.
        if slots
            .get(&self.name)
            .is_some_and(|lock| Arc::ptr_eq(lock, &self.lock) && Arc::strong_count(lock) == 2)
        {
            slots.remove(&self.name);
        }
    }
}

struct ThreadWaker(Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Polls `fut` on the current thread until it finishes or `deadline` passes (`None`: never).
/// The future is polled at least once, so a deadline in the past means "try once".
pub(crate) fn block_on_until<F: Future>(fut: F, deadline: Option<Instant>) -> Option<F::Output> {
    let mut fut = pin!(fut);
    let waker = Waker::from(Arc::new(ThreadWaker(thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
            return Some(out);
        }
        match deadline {
            None => thread::park(),
            Some(deadline) => {
                let now = Instant::now();
                if now >= deadline {
                    return None;
                }
                thread::park_timeout(deadline - now);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn queues() -> Arc<Queues> {
        Arc::new(Queues::default())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn exclusive_waiters_are_served_in_arrival_order() {
        let q = queues();
        let first = q.wait("k", LockMode::Exclusive).await;
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for i in 0..8 {
            let (q, order) = (Arc::clone(&q), Arc::clone(&order));
            tasks.push(tokio::spawn(async move {
                let _turn = q.wait("k", LockMode::Exclusive).await;
                order.lock().unwrap_or_else(PoisonError::into_inner).push(i);
                tokio::time::sleep(Duration::from_millis(2)).await;
            }));
            // Let task `i` reach the queue before task `i + 1` is spawned.
            tokio::time::sleep(Duration::from_millis(40)).await;
        }
        drop(first);
        for task in tasks {
            task.await.expect("task panicked");
        }
        assert_eq!(*order.lock().unwrap(), (0..8).collect::<Vec<_>>());
        assert_eq!(q.len(), 0, "the queue entry is pruned once free");
    }

    #[tokio::test]
    async fn a_queued_writer_holds_back_later_readers() {
        let q = queues();
        let reader = q.wait("k", LockMode::Shared).await;
        // A second reader joins while nobody waits to write.
        let second = q.wait("k", LockMode::Shared).await;
        let writer = tokio::spawn({
            let q = Arc::clone(&q);
            async move { q.wait("k", LockMode::Exclusive).await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        let late = tokio::time::timeout(Duration::from_millis(50), q.wait("k", LockMode::Shared));
        assert!(late.await.is_err(), "a reader overtook the queued writer");
        drop((reader, second));
        let turn = writer.await.expect("task panicked");
        drop(turn);
        assert_eq!(q.len(), 0);
    }

    #[test]
    fn blocking_waits_time_out_and_leave_the_queue() {
        let q = queues();
        let held = block_on_until(q.wait("k", LockMode::Exclusive), None);
        assert!(held.is_some());
        let start = Instant::now();
        let deadline = start + Duration::from_millis(50);
        assert!(block_on_until(q.wait("k", LockMode::Exclusive), Some(deadline)).is_none());
        assert!(start.elapsed() >= Duration::from_millis(50));
        drop(held);
        assert_eq!(q.len(), 0, "the timed-out waiter left no entry behind");
        let past = Some(Instant::now());
        assert!(
            block_on_until(q.wait("k", LockMode::Exclusive), past).is_some(),
            "a free lock is taken even with a deadline in the past"
        );
    }

    #[test]
    fn blocking_waiters_are_woken_from_other_threads() {
        let q = queues();
        let held = block_on_until(q.wait("k", LockMode::Exclusive), None);
        let waiter = thread::spawn({
            let q = Arc::clone(&q);
            move || {
                let deadline = Instant::now() + Duration::from_secs(10);
                block_on_until(q.wait("k", LockMode::Exclusive), Some(deadline)).is_some()
            }
        });
        thread::sleep(Duration::from_millis(30));
        drop(held);
        assert!(waiter.join().expect("waiter panicked"));
    }
}

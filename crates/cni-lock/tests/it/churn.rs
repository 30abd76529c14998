//! Many threads hammering one key while its lock file is removed and recreated under them.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    thread,
    time::Duration,
};

use cni_lock::{LockKey, LockMode, Locks};

use crate::support::Workspace;

const THREADS: u64 = 8;
const ITERATIONS: u64 = 300;

/// Each iteration checks nobody else is inside and does a read-yield-write increment.
fn critical_section(inside: &AtomicBool, counter: &AtomicU64) {
    assert!(!inside.swap(true, Ordering::SeqCst), "two holders at once");
    let n = counter.load(Ordering::SeqCst);
    thread::yield_now();
    counter.store(n + 1, Ordering::SeqCst);
    inside.store(false, Ordering::SeqCst);
}

#[test]
fn threads_with_separate_lock_sets_keep_exclusion() {
    let ws = Workspace::new();
    let inside = Arc::new(AtomicBool::new(false));
    let counter = Arc::new(AtomicU64::new(0));
    let key = LockKey::container("churn");
    // Half the threads share one `Locks` (queue, then flock), half have their own (flock only).
    let shared = ws.locks();
    let handles: Vec<_> = (0..THREADS)
        .map(|i| {
            let locks = if i % 2 == 0 {
                shared.clone()
            } else {
                ws.locks()
            };
            let (inside, counter, key) = (Arc::clone(&inside), Arc::clone(&counter), key.clone());
            thread::spawn(move || {
                for _ in 0..ITERATIONS {
                    let guard = locks
                        .lock_blocking(&key, Duration::from_secs(30))
                        .expect("lock");
                    critical_section(&inside, &counter);
                    guard.unlock().expect("unlock");
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("thread panicked");
    }
    assert_eq!(counter.load(Ordering::SeqCst), THREADS * ITERATIONS);
    assert_eq!(ws.lock_files(), Vec::<String>::new());
}

#[test]
fn shared_and_exclusive_churn_keeps_writers_alone() {
    let ws = Workspace::new();
    let writers_inside = Arc::new(AtomicU64::new(0));
    let readers_inside = Arc::new(AtomicU64::new(0));
    // Not the GC key, whose file is always kept: this one exercises removal by shared holders.
    let key = LockKey::container("shared-churn");
    let handles: Vec<_> = (0..THREADS)
        .map(|i| {
            let locks: Locks = ws.locks();
            let (w, r, key) = (
                Arc::clone(&writers_inside),
                Arc::clone(&readers_inside),
                key.clone(),
            );
            thread::spawn(move || {
                let mode = if i % 4 == 0 {
                    LockMode::Exclusive
                } else {
                    LockMode::Shared
                };
                for _ in 0..ITERATIONS / 3 {
                    let guard = locks
                        .acquire_blocking(&key, mode, Duration::from_secs(30))
                        .expect("lock");
                    let (mine, other) = match mode {
                        LockMode::Exclusive => (&w, &r),
                        LockMode::Shared => (&r, &w),
                    };
                    let before = mine.fetch_add(1, Ordering::SeqCst);
                    assert_eq!(
                        other.load(Ordering::SeqCst),
                        0,
                        "readers and a writer overlap"
                    );
                    if mode == LockMode::Exclusive {
                        assert_eq!(before, 0, "two writers at once");
                    }
                    thread::yield_now();
                    assert_eq!(
                        other.load(Ordering::SeqCst),
                        0,
                        "readers and a writer overlap"
                    );
                    mine.fetch_sub(1, Ordering::SeqCst);
                    guard.unlock().expect("unlock");
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("thread panicked");
    }
    assert_eq!(
        ws.lock_files(),
        Vec::<String>::new(),
        "the last shared holder cleans up"
    );
}

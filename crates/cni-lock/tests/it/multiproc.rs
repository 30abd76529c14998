//! Several processes contending for one lock.

use std::{
    path::Path,
    time::{Duration, Instant},
};

use cni_lock::Error;

use crate::support::{Role, Workspace, act_as_worker_if_asked, contended_key, join_worker};

fn run_incrementers(test_name: &str, processes: u32, iterations: u32, sleep_ms: u64) {
    let ws = Workspace::new();
    let workers: Vec<_> = (0..processes)
        .map(|i| {
            let role = if i % 2 == 0 {
                Role::IncrementAsync
            } else {
                Role::IncrementBlocking
            };
            ws.spawn_worker(test_name, role, iterations, sleep_ms)
        })
        .collect();
    for worker in workers {
        join_worker(worker);
    }
    assert_eq!(
        ws.counter(),
        u64::from(processes * iterations),
        "an increment was lost"
    );
    assert_eq!(
        ws.lock_files(),
        Vec::<String>::new(),
        "lock files left behind"
    );
}

#[test]
fn no_increment_is_lost_across_processes() {
    act_as_worker_if_asked();
    run_incrementers("multiproc::no_increment_is_lost_across_processes", 6, 30, 1);
}

#[test]
fn lock_file_churn_across_processes_keeps_exclusion() {
    act_as_worker_if_asked();
    // No pause: files are unlinked and recreated as fast as the processes can go.
    run_incrementers(
        "multiproc::lock_file_churn_across_processes_keeps_exclusion",
        4,
        150,
        0,
    );
}

fn wait_for_file(path: &Path, within: Duration) {
    let start = Instant::now();
    while !path.exists() {
        assert!(
            start.elapsed() < within,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn killing_the_holder_releases_the_lock() {
    act_as_worker_if_asked();
    let ws = Workspace::new();
    let mut holder = ws.spawn_worker(
        "multiproc::killing_the_holder_releases_the_lock",
        Role::Hold,
        0,
        0,
    );
    wait_for_file(&ws.root.join("ready"), Duration::from_secs(20));
    let locks = ws.locks();
    let key = contended_key();

    let busy = locks.lock_blocking(&key, Duration::from_millis(100));
    assert!(
        matches!(busy, Err(Error::Timeout { .. })),
        "the holder's lock was not held: {busy:?}"
    );

    holder.kill().expect("SIGKILL the holder");
    holder.wait().expect("reap the holder");
    let start = Instant::now();
    let guard = locks
        .lock_blocking(&key, Duration::from_secs(5))
        .expect("lock after the holder died");
    assert!(
        start.elapsed() < Duration::from_millis(500),
        "took {:?} to notice the dead holder",
        start.elapsed()
    );
    guard.unlock().expect("unlock");
    assert_eq!(
        ws.lock_files(),
        Vec::<String>::new(),
        "the dead holder's file is removed by the next holder"
    );
}

#[test]
fn a_file_lock_held_by_another_process_is_reported_held_until_it_dies() {
    act_as_worker_if_asked();
    let ws = Workspace::new();
    let mut holder = ws.spawn_worker(
        "multiproc::a_file_lock_held_by_another_process_is_reported_held_until_it_dies",
        Role::HoldFile,
        0,
        0,
    );
    wait_for_file(&ws.root.join("ready"), Duration::from_secs(20));
    let path = ws.root.join("daemon.lock");
    match cni_lock::FileLock::try_exclusive(&path) {
        Err(err @ Error::Held { .. }) => assert_eq!(
            err.to_string(),
            format!("lock file {} is held by another process", path.display())
        ),
        other => panic!("expected Held, got {other:?}"),
    }
    holder.kill().expect("SIGKILL the holder");
    holder.wait().expect("reap the holder");
    let lock = cni_lock::FileLock::try_exclusive(&path).expect("free once the holder died");
    assert_eq!(lock.path(), path);
}

//! The public API within one process: timeouts, cleanup, shared mode, queuing, cancellation.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use cni_lock::{Error, LockKey, LockMode, Locks};

use crate::support::{Workspace, open_fds_under};

const LONG: Duration = Duration::from_secs(10);

fn assert_timeout_names_file_and_wait(
    err: &Error,
    locks: &Locks,
    key: &LockKey,
    at_least: Duration,
) {
    let Error::Timeout { path, waited } = err else {
        panic!("expected a timeout, got {err:?}");
    };
    assert_eq!(path, &locks.path_for(key));
    assert!(*waited >= at_least, "waited only {waited:?}");
    assert!(
        *waited < at_least + Duration::from_secs(2),
        "waited {waited:?}"
    );
    let text = err.to_string();
    assert!(text.contains(&*path.to_string_lossy()), "{text}");
    assert!(
        text.contains(&format!("{} ms", waited.as_millis())),
        "{text}"
    );
}

#[tokio::test]
async fn timeout_in_the_in_process_queue_names_file_and_wait() {
    let ws = Workspace::new();
    let locks = ws.locks();
    let key = LockKey::container("c1");
    let _held = locks.lock(&key, LONG).await.expect("free");
    let err = locks
        .lock(&key, Duration::from_millis(150))
        .await
        .expect_err("busy");
    assert_timeout_names_file_and_wait(&err, &locks, &key, Duration::from_millis(150));
    let err = locks
        .lock_blocking(&key, Duration::from_millis(150))
        .expect_err("busy");
    assert_timeout_names_file_and_wait(&err, &locks, &key, Duration::from_millis(150));
}

#[tokio::test]
async fn timeout_on_the_file_lock_names_file_and_wait() {
    let ws = Workspace::new();
    // Separate `Locks` values share no queue: they meet only at the flock, like two processes.
    let (a, b) = (ws.locks(), ws.locks());
    let key = LockKey::attachment("net/1", "c1");
    let _held = a.lock(&key, LONG).await.expect("free");
    let err = b
        .lock(&key, Duration::from_millis(150))
        .await
        .expect_err("busy");
    assert_timeout_names_file_and_wait(&err, &b, &key, Duration::from_millis(150));
    let err = b
        .lock_blocking(&key, Duration::from_millis(150))
        .expect_err("busy");
    assert_timeout_names_file_and_wait(&err, &b, &key, Duration::from_millis(150));
    assert_eq!(
        open_fds_under(&ws.locks_dir),
        1,
        "a timed-out waiter still has the lock file open"
    );
}

#[tokio::test]
async fn dropping_the_future_stops_the_file_lock_wait() {
    let ws = Workspace::new();
    let (a, b) = (ws.locks(), ws.locks());
    let key = LockKey::container("c1");
    let held = a.lock(&key, LONG).await.expect("free");
    let abandoned = tokio::time::timeout(Duration::from_millis(50), b.lock(&key, LONG)).await;
    assert!(abandoned.is_err(), "b got a lock that a holds");
    // The blocking poller notices the cancel within one backoff step.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        open_fds_under(&ws.locks_dir),
        1,
        "the poller is still waiting"
    );
    held.unlock().expect("unlock");
    assert_eq!(ws.lock_files(), Vec::<String>::new());
}

#[tokio::test]
async fn zero_timeout_tries_once() {
    let ws = Workspace::new();
    let locks = ws.locks();
    let key = LockKey::container("c1");
    let held = locks.lock(&key, Duration::ZERO).await.expect("free lock");
    assert!(matches!(
        ws.locks().lock(&key, Duration::ZERO).await,
        Err(Error::Timeout { .. })
    ));
    drop(held);
    let again = locks
        .lock_blocking(&key, Duration::ZERO)
        .expect("free lock, blocking");
    assert_eq!(again.path(), locks.path_for(&key));
}

#[tokio::test]
async fn lock_files_are_removed_when_free() {
    let ws = Workspace::new();
    let locks = Locks::under(&ws.root);
    assert_eq!(locks.dir(), ws.locks_dir);
    let keys = [
        LockKey::container("c1"),
        LockKey::container("../../escape"),
        LockKey::attachment("net", "c1"),
        LockKey::gc(),
    ];
    let mut guards = Vec::new();
    for key in &keys {
        let guard = locks.lock(key, LONG).await.expect("free");
        assert_eq!(guard.path(), locks.path_for(key));
        assert_eq!(guard.path().parent(), Some(ws.locks_dir.as_path()));
        assert!(guard.path().exists());
        assert_eq!(guard.key(), key);
        assert_eq!(guard.mode(), LockMode::Exclusive);
        guards.push(guard);
    }
    assert_eq!(ws.lock_files().len(), keys.len());
    for guard in guards {
        guard.unlock().expect("unlock");
    }
    // The GC lock's file stays: every set-up and teardown takes it.
    assert_eq!(ws.lock_files(), vec!["gc.lock".to_owned()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kept_files_stay_until_a_holder_or_a_sweep_removes_them() {
    let ws = Workspace::new();
    let locks = ws.locks();
    for id in ["set-up", "gone", "busy"] {
        let mut guard = locks
            .lock(&LockKey::container(id), LONG)
            .await
            .expect("free");
        guard.keep_file();
        guard.unlock().expect("unlock");
    }
    let set_up = LockKey::container("set-up");
    assert_eq!(ws.lock_files().len(), 3);
    // A kept file still excludes: the next holder opens it instead of creating it.
    let again = locks.lock(&set_up, LONG).await.expect("free");
    assert!(matches!(
        ws.locks().lock(&set_up, Duration::from_millis(30)).await,
        Err(Error::Timeout { .. })
    ));
    again.unlock().expect("unlock");
    assert!(
        !locks.path_for(&set_up).exists(),
        "a holder that does not keep removes"
    );

    let _gc = locks.lock(&LockKey::gc(), LONG).await.expect("free");
    let _busy = ws
        .locks()
        .lock(&LockKey::container("busy"), LONG)
        .await
        .expect("free");
    let removed = locks.sweep(|name| name == "nothing-kept").expect("sweep");
    assert_eq!(removed, 1, "only the free file of the gone container");
    assert_eq!(
        ws.lock_files(),
        vec!["ctr@busy.lock".to_owned(), "gc.lock".to_owned()]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gc_waits_for_set_up_and_teardown_and_holds_them_off() {
    let ws = Workspace::new();
    let (setup, teardown, gc) = (ws.locks(), ws.locks(), ws.locks());
    let key = LockKey::gc();
    let s = setup.lock_shared(&key, LONG).await.expect("shared");
    let t = teardown
        .lock_shared(&key, Duration::ZERO)
        .await
        .expect("two shared holders at once");
    assert_eq!(t.mode(), LockMode::Shared);
    assert!(matches!(
        gc.lock(&key, Duration::from_millis(50)).await,
        Err(Error::Timeout { .. })
    ));
    let gc_task = tokio::spawn({
        let gc = gc.clone();
        let key = key.clone();
        async move { gc.lock(&key, LONG).await }
    });
    s.unlock().expect("unlock");
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        !gc_task.is_finished(),
        "gc ran while a teardown holds the lock"
    );
    t.unlock().expect("unlock");
    let gc_guard = gc_task.await.expect("task").expect("gc gets the lock");
    assert!(matches!(
        setup.lock_shared(&key, Duration::from_millis(50)).await,
        Err(Error::Timeout { .. })
    ));
    gc_guard.unlock().expect("unlock");
    assert_eq!(ws.lock_files(), vec!["gc.lock".to_owned()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_in_one_process_are_served_in_arrival_order() {
    let ws = Workspace::new();
    let locks = ws.locks();
    let key = LockKey::container("c1");
    let first = locks.lock(&key, LONG).await.expect("free");
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..6 {
        let (locks, key, order) = (locks.clone(), key.clone(), Arc::clone(&order));
        tasks.push(tokio::spawn(async move {
            let guard = locks.lock(&key, LONG).await.expect("lock");
            order.lock().expect("order").push(i);
            guard.unlock().expect("unlock");
        }));
        // Let task `i` reach the queue before task `i + 1` is spawned.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    first.unlock().expect("unlock");
    for task in tasks {
        task.await.expect("task");
    }
    assert_eq!(*order.lock().expect("order"), (0..6).collect::<Vec<_>>());
    assert_eq!(ws.lock_files(), Vec::<String>::new());
}

#[tokio::test]
async fn different_keys_do_not_block_each_other() {
    let ws = Workspace::new();
    let locks = ws.locks();
    let _a = locks.lock(&LockKey::container("a"), LONG).await.expect("a");
    let _b = locks
        .lock(&LockKey::container("b"), Duration::ZERO)
        .await
        .expect("b is independent of a");
    let _a_on_net = locks
        .lock(&LockKey::attachment("net", "a"), Duration::ZERO)
        .await
        .expect("attachment keys are independent of container keys");
}

#[test]
fn an_unusable_lock_directory_is_an_io_error_naming_it() {
    let ws = Workspace::new();
    let not_a_dir = ws.root.join("plain-file");
    std::fs::write(&not_a_dir, b"").expect("write");
    let err = Locks::new(&not_a_dir)
        .lock_blocking(&LockKey::container("c1"), LONG)
        .expect_err("cannot create locks inside a file");
    assert!(matches!(err, Error::Io { .. }), "{err:?}");
    assert!(
        err.to_string().contains(&*not_a_dir.to_string_lossy()),
        "{err}"
    );
}

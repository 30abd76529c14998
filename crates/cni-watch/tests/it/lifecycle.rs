//! Starting and stopping.

use std::fs;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use cni_watch::{Error, WatchOptions, Watcher};

use crate::common::{PATIENCE, events_only, lister, wait_until};

#[test]
fn start_outside_a_runtime_is_an_error() {
    let fut = Watcher::start(WatchOptions::new(["/nonexistent"]), || ());
    let mut fut = std::pin::pin!(fut);
    match fut.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(Err(Error::NoRuntime)) => {}
        other => panic!("expected NoRuntime, got {:?}", other.map(|r| r.map(|_| ()))),
    }
}

#[tokio::test]
async fn start_rejects_unusable_options() {
    let err = Watcher::start(WatchOptions::default(), || ())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NoDirs), "{err}");
    let opts = WatchOptions {
        rescan: Some(Duration::ZERO),
        ..WatchOptions::new(["/x"])
    };
    let err = Watcher::start(opts, || ()).await.unwrap_err();
    assert!(err.to_string().contains("rescan"), "{err}");
}

#[tokio::test]
async fn initial_load_panic_is_an_error() {
    let err = Watcher::<()>::start(WatchOptions::new(["/x"]), || panic!("on purpose"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InitialLoadPanicked), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_twice_then_no_more_reloads() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("net.d");
    fs::create_dir(&dir).unwrap();
    let w = Watcher::start(events_only(&[&dir]), lister(vec![dir.clone()]))
        .await
        .unwrap();
    let mut rx = w.subscribe();
    fs::write(dir.join("a.conf"), "{}").unwrap();
    wait_until(&mut rx, "a change before shutdown", |s| {
        s.value[0] == ["a.conf"]
    })
    .await;

    w.shutdown().await;
    w.shutdown().await;
    let stopped = w.current().generation;
    let reloads = w.stats().reloads;

    fs::write(dir.join("b.conf"), "{}").unwrap();
    // absence can only be checked by waiting
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(w.current().generation, stopped);
    assert_eq!(w.stats().reloads, reloads);
    // reload_now after shutdown returns the current snapshot instead of loading
    assert_eq!(w.reload_now().await.generation, stopped);
    // subscribing still works and sees the last snapshot
    assert_eq!(w.subscribe().borrow().value[0], ["a.conf"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_watcher_stops_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("net.d");
    fs::create_dir(&dir).unwrap();
    let loads = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&loads);
    let w = Watcher::start(events_only(&[&dir]), move || {
        counted.fetch_add(1, Ordering::SeqCst);
    })
    .await
    .unwrap();
    let mut rx = w.subscribe();
    drop(w);

    // the channel closes once the task has ended and released its sender
    let closed = tokio::time::timeout(PATIENCE, async {
        loop {
            if rx.changed().await.is_err() {
                break;
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "the watcher task kept running after drop");

    let before = loads.load(Ordering::SeqCst);
    fs::write(dir.join("a.conf"), "{}").unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(loads.load(Ordering::SeqCst), before);
}

#[tokio::test(flavor = "current_thread")]
async fn works_on_a_current_thread_runtime() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("net.d");
    let w = Watcher::start(events_only(&[&dir]), lister(vec![dir.clone()]))
        .await
        .unwrap();
    let mut rx = w.subscribe();
    fs::create_dir(&dir).unwrap();
    fs::write(dir.join("a.conf"), "{}").unwrap();
    wait_until(&mut rx, "change on current_thread", |s| {
        s.value[0] == ["a.conf"]
    })
    .await;
    w.shutdown().await;
}

//! Running without inotify.

use std::fs;
use std::time::Duration;

use cni_watch::{ReloadReason, WatchMode, WatchOptions, Watcher};

use crate::common::{lister, wait_until};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poll_mode_sees_changes() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("net.d");
    let opts = WatchOptions {
        mode: WatchMode::Poll(Duration::from_millis(20)),
        ..WatchOptions::new([&dir])
    };
    let w = Watcher::start(opts, lister(vec![dir.clone()]))
        .await
        .unwrap();
    assert!(w.stats().polling);
    let mut rx = w.subscribe();

    fs::create_dir(&dir).unwrap();
    fs::write(dir.join("a.conf"), "{}").unwrap();
    let snap = wait_until(&mut rx, "polled file", |s| s.value[0] == ["a.conf"]).await;
    assert_eq!(snap.reason, ReloadReason::Poll);

    fs::remove_file(dir.join("a.conf")).unwrap();
    wait_until(&mut rx, "polled delete", |s| s.value[0].is_empty()).await;
    let stats = w.stats();
    assert_eq!(stats.events, 0, "no inotify events in poll mode: {stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poll_mode_does_not_reload_an_unchanged_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("net.d");
    fs::create_dir(&dir).unwrap();
    fs::write(dir.join("a.conf"), "{}").unwrap();
    let opts = WatchOptions {
        mode: WatchMode::Poll(Duration::from_millis(5)),
        ..WatchOptions::new([&dir])
    };
    let w = Watcher::start(opts, lister(vec![dir.clone()]))
        .await
        .unwrap();
    // many poll intervals pass; absence can only be checked by waiting
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(w.stats().reloads, 0, "{:?}", w.stats());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manual_mode_reloads_only_on_request() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("net.d");
    fs::create_dir(&dir).unwrap();
    let opts = WatchOptions {
        mode: WatchMode::Manual,
        ..WatchOptions::new([&dir])
    };
    let w = Watcher::start(opts, lister(vec![dir.clone()]))
        .await
        .unwrap();

    fs::write(dir.join("a.conf"), "{}").unwrap();
    // absence can only be checked by waiting
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(w.current().generation, 1);
    assert!(w.current().value[0].is_empty());
    let stats = w.stats();
    assert_eq!(
        (stats.reloads, stats.events, stats.polling),
        (0, 0, false),
        "{stats:?}"
    );

    let snap = w.reload_now().await;
    assert_eq!(snap.generation, 2);
    assert_eq!(snap.reason, ReloadReason::Manual);
    assert_eq!(snap.value[0], ["a.conf"]);
    assert_eq!(w.current().generation, 2);
}

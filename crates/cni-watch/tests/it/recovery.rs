//! The directory may be missing, deleted and recreated: the watcher follows.

use std::fs;

use cni_watch::{ReloadReason, Watcher};

use crate::common::{events_only, install, list, lister, wait_until};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_and_recreate_repeatedly() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("net.d");
    fs::create_dir(&dir).unwrap();
    install(tmp.path(), &dir, "00-first.conflist");

    let w = Watcher::start(events_only(&[&dir]), lister(vec![dir.clone()]))
        .await
        .unwrap();
    assert_eq!(w.current().value[0], list(&["00-first.conflist"]));
    let mut rx = w.subscribe();

    for i in 0..5 {
        fs::remove_dir_all(&dir).unwrap();
        wait_until(&mut rx, &format!("round {i}: directory gone"), |s| {
            s.value[0].is_empty()
        })
        .await;

        fs::create_dir(&dir).unwrap();
        let name = format!("{i:02}-net.conflist");
        install(tmp.path(), &dir, &name);
        let snap = wait_until(&mut rx, &format!("round {i}: {name} renamed in"), |s| {
            s.value[0] == [name.as_str()]
        })
        .await;
        assert_eq!(snap.reason, ReloadReason::Event);

        // a second file in the recreated directory proves the watch is on the new directory
        let second = format!("{i:02}-second.conf");
        fs::write(dir.join(&second), "{}").unwrap();
        wait_until(&mut rx, &format!("round {i}: {second} written"), |s| {
            s.value[0] == [name.as_str(), second.as_str()]
        })
        .await;
    }
    w.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recreate_without_pause_ends_in_the_final_state() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("net.d");
    fs::create_dir(&dir).unwrap();
    let w = Watcher::start(events_only(&[&dir]), lister(vec![dir.clone()]))
        .await
        .unwrap();
    let mut rx = w.subscribe();

    // nobody waits between rounds: the watcher sees whichever intermediate states it sees, but
    // must end on the last one, watching the last directory
    for i in 0..5 {
        fs::remove_dir_all(&dir).unwrap();
        fs::create_dir(&dir).unwrap();
        install(tmp.path(), &dir, &format!("{i}.conflist"));
    }
    wait_until(&mut rx, "last round", |s| s.value[0] == ["4.conflist"]).await;
    install(tmp.path(), &dir, "5.conflist");
    wait_until(&mut rx, "a file after the churn", |s| {
        s.value[0] == ["4.conflist", "5.conflist"]
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_directory_and_parent_at_start() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("etc/cni/net.d");
    let w = Watcher::start(events_only(&[&dir]), lister(vec![dir.clone()]))
        .await
        .unwrap();
    let first = w.current();
    assert_eq!(first.generation, 1);
    assert_eq!(first.reason, ReloadReason::Initial);
    assert!(first.value[0].is_empty());
    let mut rx = w.subscribe();

    // noise next to the missing directory's ancestors is not a change
    for n in 0..50 {
        fs::write(tmp.path().join(format!("noise-{n}")), "x").unwrap();
    }

    // one level at a time, then the file
    fs::create_dir(tmp.path().join("etc")).unwrap();
    fs::create_dir(tmp.path().join("etc/cni")).unwrap();
    fs::create_dir(&dir).unwrap();
    install(tmp.path(), &dir, "10-late.conflist");
    wait_until(&mut rx, "late directory and file", |s| {
        s.value[0] == ["10-late.conflist"]
    })
    .await;

    let stats = w.stats();
    assert!(
        stats.ignored_events >= 50,
        "sibling noise should be ignored: {stats:?}"
    );
    assert!(!stats.polling);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn directory_created_with_parents_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("a/b/c/net.d");
    let w = Watcher::start(events_only(&[&dir]), lister(vec![dir.clone()]))
        .await
        .unwrap();
    let mut rx = w.subscribe();
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("99-x.conf"), "{}").unwrap();
    wait_until(&mut rx, "mkdir -p then a file", |s| {
        s.value[0] == ["99-x.conf"]
    })
    .await;

    // and after that, the watch sits on the directory itself
    fs::write(dir.join("98-y.conf"), "{}").unwrap();
    wait_until(&mut rx, "second file", |s| {
        s.value[0] == ["98-y.conf", "99-x.conf"]
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn directory_renamed_away_and_back() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("net.d");
    let aside = tmp.path().join("net.d.old");
    fs::create_dir(&dir).unwrap();
    fs::write(dir.join("a.conf"), "{}").unwrap();
    let w = Watcher::start(events_only(&[&dir]), lister(vec![dir.clone()]))
        .await
        .unwrap();
    let mut rx = w.subscribe();

    fs::rename(&dir, &aside).unwrap();
    wait_until(&mut rx, "directory moved away", |s| s.value[0].is_empty()).await;
    // a change in the moved-away directory is not ours any more
    fs::write(aside.join("b.conf"), "{}").unwrap();
    fs::rename(&aside, &dir).unwrap();
    wait_until(&mut rx, "directory moved back", |s| {
        s.value[0] == ["a.conf", "b.conf"]
    })
    .await;
    fs::remove_file(dir.join("a.conf")).unwrap();
    wait_until(&mut rx, "file removed after move back", |s| {
        s.value[0] == ["b.conf"]
    })
    .await;
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rescan_catches_what_no_event_reports() {
    use std::time::Duration;

    use cni_watch::WatchOptions;

    // net.d is a symlink; re-pointing it happens in the parent, which is not watched, and leaves
    // the old target untouched: no event, only the rescan's fingerprint can tell
    let tmp = tempfile::tempdir().unwrap();
    let (v1, v2) = (tmp.path().join("v1"), tmp.path().join("v2"));
    fs::create_dir(&v1).unwrap();
    fs::create_dir(&v2).unwrap();
    fs::write(v1.join("a.conf"), "{}").unwrap();
    fs::write(v2.join("b.conf"), "{}").unwrap();
    let dir = tmp.path().join("net.d");
    std::os::unix::fs::symlink(&v1, &dir).unwrap();

    let opts = WatchOptions {
        rescan: Some(Duration::from_millis(50)),
        ..WatchOptions::new([&dir])
    };
    let w = Watcher::start(opts, lister(vec![dir.clone()]))
        .await
        .unwrap();
    assert_eq!(w.current().value[0], ["a.conf"]);
    let mut rx = w.subscribe();

    let staged = tmp.path().join(".net.d.new");
    std::os::unix::fs::symlink(&v2, &staged).unwrap();
    fs::rename(&staged, &dir).unwrap();
    let snap = wait_until(&mut rx, "symlink swap", |s| s.value[0] == ["b.conf"]).await;
    assert_eq!(snap.reason, ReloadReason::Rescan);

    // the rescan moved the watch onto the new target
    fs::write(v2.join("c.conf"), "{}").unwrap();
    wait_until(&mut rx, "file in the new target", |s| {
        s.value[0] == ["b.conf", "c.conf"]
    })
    .await;
}

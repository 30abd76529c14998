//! What counts as a change, in the config directory and in a plugin directory.

use std::fs;

use cni_watch::Watcher;

use crate::common::{events_only, list, lister, wait_until};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_file_is_seen() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("net.d");
    fs::create_dir(&dir).unwrap();
    fs::write(dir.join("10-default.conflist"), "{}").unwrap();
    fs::write(dir.join("20-other.conflist"), "{}").unwrap();
    let w = Watcher::start(events_only(&[&dir]), lister(vec![dir.clone()]))
        .await
        .unwrap();
    let mut rx = w.subscribe();

    fs::remove_file(dir.join("10-default.conflist")).unwrap();
    wait_until(&mut rx, "default network file removed", |s| {
        s.value[0] == ["20-other.conflist"]
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugin_directory_changes_are_seen() {
    let tmp = tempfile::tempdir().unwrap();
    let net_d = tmp.path().join("net.d");
    let bin = tmp.path().join("bin");
    fs::create_dir(&net_d).unwrap();
    fs::create_dir(&bin).unwrap();
    fs::write(net_d.join("10-x.conflist"), "{}").unwrap();
    let opts = events_only(&[&net_d, &bin]);
    let w = Watcher::start(opts, lister(vec![net_d.clone(), bin.clone()]))
        .await
        .unwrap();
    assert_eq!(*w.current().value, vec![list(&["10-x.conflist"]), vec![]]);
    let mut rx = w.subscribe();

    // the plugin binary arrives after its config
    let staged = tmp.path().join(".bridge.tmp");
    fs::write(&staged, "#!/bin/sh\n").unwrap();
    fs::rename(&staged, bin.join("bridge")).unwrap();
    wait_until(&mut rx, "plugin installed", |s| s.value[1] == ["bridge"]).await;

    // making it executable is a change too (the loader would look at the mode)
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let before = w.current().generation;
        fs::set_permissions(bin.join("bridge"), fs::Permissions::from_mode(0o755)).unwrap();
        wait_until(&mut rx, "chmod +x", |s| s.generation > before).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reading_files_is_not_a_change() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = tmp.path().join("bin");
    fs::create_dir(&bin).unwrap();
    let plugins: Vec<String> = (0..100).map(|i| format!("plugin-{i:03}")).collect();
    for p in &plugins {
        fs::write(bin.join(p), "#!/bin/sh\n").unwrap();
    }
    let w = Watcher::start(events_only(&[&bin]), lister(vec![bin.clone()]))
        .await
        .unwrap();
    let mut rx = w.subscribe();

    // what plugin execs do: open and read the binaries (distinct files, because the kernel
    // merges identical consecutive events)
    for p in &plugins {
        let _ = fs::read(bin.join(p)).unwrap();
    }
    // inotify delivers in order: once the marker is seen, the reads have been handled
    fs::write(bin.join("zz-marker"), "x").unwrap();
    wait_until(&mut rx, "marker", |s| s.value[0].len() == 101).await;

    let stats = w.stats();
    assert!(
        stats.ignored_events >= 100,
        "opens are seen and ignored: {stats:?}"
    );
    assert!(stats.events < 20, "only the marker counts: {stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_now_sees_changes_made_before_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("net.d");
    fs::create_dir(&dir).unwrap();
    let w = Watcher::start(events_only(&[&dir]), lister(vec![dir.clone()]))
        .await
        .unwrap();
    fs::write(dir.join("10-new.conflist"), "{}").unwrap();
    let snap = w.reload_now().await;
    assert_eq!(snap.value[0], ["10-new.conflist"]);
    assert!(snap.generation >= 2);
    assert_eq!(
        w.current().generation,
        snap.generation.max(w.current().generation)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_loader_keeps_the_previous_snapshot() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("net.d");
    fs::create_dir(&dir).unwrap();
    let list_dir = lister(vec![dir.clone()]);
    let boom = dir.join("boom");
    let loader = move || {
        assert!(!boom.exists(), "loader fails on purpose");
        list_dir()
    };
    let w = Watcher::start(events_only(&[&dir]), loader).await.unwrap();
    let mut rx = w.subscribe();

    fs::write(dir.join("boom"), "").unwrap();
    let failed = tokio::time::timeout(crate::common::PATIENCE, async {
        while w.stats().failed_loads == 0 {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(
        failed.is_ok(),
        "the loader never ran after the change: {:?}",
        w.stats()
    );
    assert_eq!(
        w.current().generation,
        1,
        "nothing new is published when the loader fails"
    );

    fs::remove_file(dir.join("boom")).unwrap();
    fs::write(dir.join("ok.conf"), "{}").unwrap();
    wait_until(&mut rx, "recovery after a failed load", |s| {
        s.value[0] == ["ok.conf"]
    })
    .await;
}

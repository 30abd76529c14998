//! Bursts are coalesced.

use std::fs;

use cni_watch::Watcher;

use crate::common::{events_only, lister, wait_until};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_files_cause_a_handful_of_reloads() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("net.d");
    fs::create_dir(&dir).unwrap();
    let w = Watcher::start(events_only(&[&dir]), lister(vec![dir.clone()]))
        .await
        .unwrap();
    let mut rx = w.subscribe();

    let names: Vec<String> = (0..1000).map(|i| format!("{i:04}-net.conflist")).collect();
    for name in &names {
        fs::write(dir.join(name), "{}").unwrap();
    }
    wait_until(&mut rx, "all 1000 files", |s| s.value[0] == names).await;

    let stats = w.stats();
    assert!(
        stats.events >= 1000,
        "every file produced at least one event: {stats:?}"
    );
    assert!(
        stats.reloads >= 1 && stats.reloads <= 20,
        "bursts must be coalesced: {stats:?}"
    );
    assert_eq!(w.current().generation, stats.reloads + 1);
}

//! Helpers: a loader that lists directories, and waiting for a published condition.

use std::fmt::Debug;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use cni_watch::{Snapshot, WatchOptions};
use test_support::fs::file_names;
use tokio::sync::watch;

/// Long enough for a loaded 2-core machine; only reached when a test fails.
pub(crate) const PATIENCE: Duration = Duration::from_secs(30);

/// A loader listing each of `dirs`, the way a config loader would read them.
pub(crate) fn lister(dirs: Vec<PathBuf>) -> impl Fn() -> Vec<Vec<String>> + Send + Sync + 'static {
    move || dirs.iter().map(|d| file_names(d)).collect()
}

/// `want` as owned strings.
pub(crate) fn list(want: &[&str]) -> Vec<String> {
    want.iter().map(ToString::to_string).collect()
}

/// Waits until a published snapshot satisfies `pred`; panics with the last snapshot on timeout.
pub(crate) async fn wait_until<T: Debug>(
    rx: &mut watch::Receiver<Snapshot<T>>,
    what: &str,
    mut pred: impl FnMut(&Snapshot<T>) -> bool,
) -> Snapshot<T> {
    let outcome = tokio::time::timeout(PATIENCE, rx.wait_for(|s| pred(s)))
        .await
        .map(|r| r.map(|snap| snap.clone()));
    match outcome {
        Ok(Ok(snap)) => snap,
        Ok(Err(closed)) => panic!("watcher stopped while waiting for {what}: {closed}"),
        Err(elapsed) => panic!(
            "waiting for {what}: {elapsed}; last published: {:?}",
            *rx.borrow()
        ),
    }
}

/// Writes `name` in `staging` and renames it into `dir`, as operators install configs.
pub(crate) fn install(staging: &Path, dir: &Path, name: &str) {
    let tmp = staging.join(format!(".{name}.tmp"));
    fs::write(&tmp, format!("{{\"name\":\"{name}\"}}")).unwrap();
    fs::rename(&tmp, dir.join(name)).unwrap();
}

/// Inotify options without the periodic rescan, so a test cannot pass thanks to the safety net.
pub(crate) fn events_only<P: AsRef<Path>>(dirs: &[P]) -> WatchOptions {
    WatchOptions {
        rescan: None,
        ..WatchOptions::new(dirs.iter().map(|d| d.as_ref().to_path_buf()))
    }
}

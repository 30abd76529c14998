//! When inotify cannot be set up, the watcher polls instead of failing, and goes back to inotify
//! once it can.
//!
//! inotify is made unavailable by lowering RLIMIT_NOFILE, which would break every other test
//! running in the same process, so the test re-runs itself in a child process.

use std::fs;
use std::process::Command;
use std::time::Duration;

use cni_watch::{ReloadReason, WatchOptions, Watcher};

use crate::common::{PATIENCE, lister, wait_until};

const CHILD: &str = "CNI_WATCH_FALLBACK_CHILD";

#[test]
fn inotify_failure_falls_back_to_polling() {
    if std::env::var_os(CHILD).is_some() {
        child();
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let out = Command::new(exe)
        .args([
            "--exact",
            "fallback::inotify_failure_falls_back_to_polling",
            "--nocapture",
        ])
        .env(CHILD, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed:\n{stdout}\n{stderr}");
    // a filter that matched nothing would also succeed
    assert!(
        stdout.contains("1 passed"),
        "child did not run the test:\n{stdout}"
    );
}

fn child() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("net.d");
        fs::create_dir(&dir).unwrap();
        let opts = WatchOptions {
            rescan: Some(Duration::from_millis(50)),
            poll_fallback: Duration::from_millis(20),
            ..WatchOptions::new([&dir])
        };

        let saved = no_more_fds();
        let started = Watcher::start(opts, lister(vec![dir.clone()])).await;
        restore_fds(saved);
        let w = started.expect("inotify failure must not fail start");
        assert!(w.stats().polling, "{:?}", w.stats());
        let mut rx = w.subscribe();

        // polling (or inotify, once the rescan re-armed it) sees a new file
        fs::write(dir.join("a.conf"), "{}").unwrap();
        wait_until(&mut rx, "change while falling back", |s| {
            s.value[0] == ["a.conf"]
        })
        .await;

        // with descriptors available again, a rescan brings inotify back
        let back = tokio::time::timeout(PATIENCE, async {
            while w.stats().polling {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await;
        assert!(back.is_ok(), "inotify never came back: {:?}", w.stats());
        fs::write(dir.join("b.conf"), "{}").unwrap();
        let snap = wait_until(&mut rx, "change after inotify came back", |s| {
            s.value[0] == ["a.conf", "b.conf"]
        })
        .await;
        assert_ne!(
            snap.reason,
            ReloadReason::Poll,
            "polling should have stopped"
        );
        w.shutdown().await;
    });
}

/// Lowers the soft RLIMIT_NOFILE to the lowest free descriptor, so opening anything fails.
fn no_more_fds() -> libc::rlimit {
    let mut saved = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we pass and nothing else
    assert_eq!(
        unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut saved) },
        0
    );
    let lowest_free = {
        use std::os::fd::AsRawFd;
        let probe = fs::File::open("/dev/null").unwrap();
        probe.as_raw_fd()
    };
    let lowered = libc::rlimit {
        rlim_cur: lowest_free as libc::rlim_t,
        rlim_max: saved.rlim_max,
    };
    // SAFETY: setrlimit only reads the struct we pass
    assert_eq!(
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raw const lowered) },
        0
    );
    saved
}

fn restore_fds(saved: libc::rlimit) {
    // SAFETY: setrlimit only reads the struct we pass
    assert_eq!(
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raw const saved) },
        0
    );
}

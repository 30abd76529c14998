//! What conmon tells of a container, against each runtime: its log reopened after a rotation,
//! and an OOM kill.

use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use nix::sys::signal::Signal;
use oci_container::{CgroupManager, CgroupVersion, ConmonCgroup, Error, Resources};

use crate::support::{Fixture, config, cri_lines, line_in, runtimes, started};

const LONG: Duration = Duration::from_secs(30);

fn number(line: &str) -> u64 {
    line.trim_start_matches("line-").parse().unwrap()
}

#[tokio::test]
#[ignore = "needs root: cargo xtask test"]
async fn a_rotated_log_is_reopened_at_its_path() {
    for (name, path) in runtimes() {
        let fx = Fixture::new(&path);
        let id = test_support::unique_name(&format!("reopen-{name}"));
        let cfg = config(
            &id,
            &[
                "/bin/busybox",
                "sh",
                "-c",
                "i=0; while true; do echo line-$i; i=$((i+1)); /bin/busybox sleep 0.05; done",
            ],
        );
        started(&fx, &cfg).await;
        let log = fx.log_path(&id);
        line_in(&log, |l| l.starts_with("line-")).await;

        // what the kubelet does: rename the log, then ask for a new one
        let rotated: PathBuf = log.with_extension("log.1");
        std::fs::rename(&log, &rotated).unwrap();
        fx.runtime.reopen_log(&id).await.unwrap();
        assert!(log.exists(), "{name}: a new log at the original path");
        let first_new = number(&line_in(&log, |l| l.starts_with("line-")).await);
        let rotated_lines = cri_lines(&rotated);
        let last_old = rotated_lines
            .iter()
            .filter_map(|(_, l)| l.strip_prefix("line-")?.parse::<u64>().ok())
            .max()
            .expect("the rotated log kept the old lines");
        assert!(
            first_new > last_old,
            "{name}: new output goes to the new file only ({first_new} after {last_old})"
        );

        // once the container and its conmon are gone, nothing reads the control fifo
        let conmon = fx.runtime.record(&id).unwrap().conmon.unwrap();
        fx.runtime.kill(&id, Signal::SIGKILL).await.unwrap();
        fx.runtime.wait(&id, LONG).await.unwrap();
        let deadline = Instant::now() + LONG;
        while conmon.is_alive() {
            assert!(
                Instant::now() < deadline,
                "{name}: conmon outlived its container"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let started = Instant::now();
        let err = fx.runtime.reopen_log(&id).await.unwrap_err();
        assert!(matches!(err, Error::NotRunning { .. }), "{name}: {err}");
        assert!(err.to_string().contains(&id), "{err}");
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{name}: no hang"
        );
        fx.runtime.remove(&id).await.unwrap();
    }
}

/// A container the OOM killer ends: dd's 64 MiB buffer, filled by its reads, is far past an
/// 8 MiB limit.
fn memory_hog(id: &str) -> oci_container::ContainerConfig {
    let mut cfg = config(
        id,
        &[
            "/bin/busybox",
            "dd",
            "if=/dev/zero",
            "of=/dev/null",
            "bs=64M",
            "count=1",
        ],
    );
    cfg.resources = Resources {
        memory_limit: Some(8 << 20),
        ..Resources::default()
    };
    cfg
}

#[tokio::test]
#[ignore = "needs root: cargo xtask test"]
async fn an_oom_kill_is_reported_with_exit_code_137() {
    for (name, path) in runtimes() {
        let fx = Fixture::new(&path);

        let id = test_support::unique_name(&format!("oom-{name}"));
        let cfg = memory_hog(&id);
        let before = SystemTime::now() - Duration::from_secs(1);
        started(&fx, &cfg).await;
        let code = fx.runtime.wait(&id, LONG).await.unwrap();
        let exit = fx.runtime.exit_details(&id).unwrap();
        assert_eq!((code, exit.code), (137, 137), "{name}: {exit:?}");
        assert!(exit.oom_killed, "{name}: {exit:?}");
        assert!(
            exit.exited_at >= before && exit.exited_at <= SystemTime::now(),
            "{name}: {exit:?}"
        );
        fx.runtime.delete(&id).await.unwrap();

        // 137 alone is not an OOM kill
        let id = test_support::unique_name(&format!("killed-{name}"));
        started(&fx, &config(&id, &["/bin/busybox", "sleep", "300"])).await;
        assert!(matches!(
            fx.runtime.exit_details(&id),
            Err(Error::NotExited { .. })
        ));
        fx.runtime.kill(&id, Signal::SIGKILL).await.unwrap();
        fx.runtime.wait(&id, LONG).await.unwrap();
        let exit = fx.runtime.exit_details(&id).unwrap();
        assert_eq!((exit.code, exit.oom_killed), (137, false), "{name}");
        fx.runtime.delete(&id).await.unwrap();
    }
}

/// On cgroup v2 a container's OOM kill is known from its parent cgroup's count when conmon left
/// no `oom` file: under systemd, the scope may be gone before conmon reads it. The parent is
/// `system.slice` under systemd (the VM) and a cgroup of the test's own with cgroupfs.
#[tokio::test]
#[ignore = "needs root: cargo xtask test"]
async fn an_oom_kill_conmon_missed_is_read_from_the_parent_cgroup() {
    if CgroupVersion::of_node() != Some(CgroupVersion::V2) {
        // v1 (and hybrid): conmon's eventfd sees every kill, and nothing counts in a parent
        // conmon could miss; `an_oom_kill_is_reported_with_exit_code_137` covers it
        return;
    }
    let manager = if oci_container::systemd_is_init() {
        CgroupManager::Systemd
    } else {
        CgroupManager::Cgroupfs
    };
    for (name, path) in runtimes() {
        let mut fx = Fixture::new(&path);
        fx.runtime = fx.runtime.clone().with_cgroups(manager, ConmonCgroup::Pod);
        let parent = match manager {
            CgroupManager::Systemd => "system.slice".to_owned(),
            _ => format!("/{}", test_support::unique_name("oomparent")),
        };
        let id = test_support::unique_name(&format!("oomp-{name}"));
        let mut cfg = memory_hog(&id);
        cfg.cgroups_path = Some(manager.cgroups_path(&parent, "crio", &id));
        started(&fx, &cfg).await;
        assert_eq!(fx.runtime.wait(&id, LONG).await.unwrap(), 137, "{name}");
        // what a conmon that lost the race leaves: no oom file
        let persist = fx.dir.path().join("state/containers").join(&id).join("oom");
        let _ = std::fs::remove_file(&persist);
        let exit = fx.runtime.exit_details(&id).unwrap();
        let recorded = std::fs::read_to_string(persist.with_file_name("oom-parent"));
        assert_eq!(
            (exit.code, exit.oom_killed),
            (137, true),
            "{name}: {exit:?}, the parent's count at create: {recorded:?}"
        );
        fx.runtime.delete(&id).await.unwrap();
        fx.runtime.remove(&id).await.unwrap();
        if manager == CgroupManager::Cgroupfs {
            let _ = std::fs::remove_dir(format!("/sys/fs/cgroup{parent}"));
        }
    }
}

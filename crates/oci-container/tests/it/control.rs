//! pause, resume and update of a running container, against each runtime.

use std::time::Duration;

use oci_container::{CgroupVersion, Error, Resources, Status};

use crate::support::{Fixture, cgroup_file, config, runtimes, started};

const LONG: Duration = Duration::from_secs(30);

#[tokio::test]
#[ignore = "needs root: cargo xtask test"]
async fn pause_freezes_and_resume_thaws() {
    for (name, path) in runtimes() {
        let fx = Fixture::new(&path);
        let id = test_support::unique_name(&format!("pause-{name}"));
        started(&fx, &config(&id, &["/bin/busybox", "sleep", "300"])).await;
        let true_ = vec!["/bin/busybox".to_owned(), "true".to_owned()];

        fx.runtime.pause(&id).await.unwrap();
        let state = fx.runtime.state(&id).await.unwrap();
        assert_eq!(state.status, Status::Paused, "{name}");
        let pid = state.pid.expect("a paused container keeps its process");
        assert_eq!(
            freezer_state(pid).as_deref(),
            Some("FROZEN"),
            "{name}: its cgroup is frozen"
        );
        let err = fx
            .runtime
            .exec_sync(&id, &true_, LONG, 1024)
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("container {id}: not running (paused)"),
            "{name}"
        );

        fx.runtime.resume(&id).await.unwrap();
        assert_eq!(
            fx.runtime.state(&id).await.unwrap().status,
            Status::Running,
            "{name}"
        );
        let out = fx.runtime.exec_sync(&id, &true_, LONG, 1024).await.unwrap();
        assert_eq!(out.exit_code, 0, "{name}: runs again after resume");

        // resuming what is not paused is refused, the same on both runtimes (runc refuses,
        // crun 1.8 says nothing)
        let err = fx.runtime.resume(&id).await.unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("container {id}: not paused (running)"),
            "{name}"
        );
        fx.runtime.remove(&id).await.unwrap();
    }
}

/// The freezer's word for the process's cgroup: v1 `freezer.state`, v2 `cgroup.freeze`.
fn freezer_state(pid: i32) -> Option<String> {
    if let Some(state) = cgroup_file(pid, "freezer", "freezer.state") {
        return Some(state.trim().to_owned());
    }
    let frozen = cgroup_file(pid, "", "cgroup.freeze")?;
    Some(
        if frozen.trim() == "1" {
            "FROZEN"
        } else {
            "THAWED"
        }
        .to_owned(),
    )
}

#[tokio::test]
#[ignore = "needs root: cargo xtask test"]
async fn update_changes_the_limits_in_the_containers_cgroup() {
    for (name, path) in runtimes() {
        let fx = Fixture::new(&path);
        let id = test_support::unique_name(&format!("update-{name}"));
        started(&fx, &config(&id, &["/bin/busybox", "sleep", "300"])).await;
        let pid = fx.runtime.state(&id).await.unwrap().pid.unwrap();

        let limits = Resources {
            memory_limit: Some(96 << 20),
            pids_limit: Some(50),
            cpu_shares: Some(512),
            ..Resources::default()
        };
        fx.runtime.update(&id, &limits).await.unwrap();

        let memory = cgroup_file(pid, "memory", "memory.limit_in_bytes")
            .or_else(|| cgroup_file(pid, "", "memory.max"))
            .expect("a memory limit file");
        assert_eq!(memory.trim(), (96u64 << 20).to_string(), "{name}");
        let pids = cgroup_file(pid, "pids", "pids.max")
            .or_else(|| cgroup_file(pid, "", "pids.max"))
            .expect("a pids limit file");
        assert_eq!(pids.trim(), "50", "{name}");
        if let Some(shares) = cgroup_file(pid, "cpu", "cpu.shares") {
            assert_eq!(shares.trim(), "512", "{name}");
        } else if let Some(weight) = cgroup_file(pid, "", "cpu.weight") {
            // v2: the runtime converts shares as runc does, 1 + (shares - 2) * 9999 / 262142
            assert_eq!(weight.trim(), "20", "{name}");
        }
        let stats = fx.runtime.stats(&id).await.unwrap();
        assert_eq!(stats.memory_limit_bytes, Some(96 << 20), "{name}");

        // a limit left out keeps its value
        let more = Resources {
            pids_limit: Some(60),
            ..Resources::default()
        };
        fx.runtime.update(&id, &more).await.unwrap();
        let memory = cgroup_file(pid, "memory", "memory.limit_in_bytes")
            .or_else(|| cgroup_file(pid, "", "memory.max"))
            .unwrap();
        assert_eq!(memory.trim(), (96u64 << 20).to_string(), "{name}");

        let err = fx
            .runtime
            .update(
                "no-such-container",
                &Resources {
                    pids_limit: Some(5),
                    ..Resources::default()
                },
            )
            .await
            .unwrap_err();
        assert!(matches!(err, Error::NotFound { .. }), "{name}: {err}");
        fx.runtime.remove(&id).await.unwrap();
    }
}

/// kubelet's unified map reaches the container's cgroup v2 files at create; on cgroup v1 the
/// runtime refuses it, and the container is not made.
#[tokio::test]
#[ignore = "needs root: cargo xtask test"]
async fn a_unified_map_reaches_the_cgroup_on_v2_and_is_refused_on_v1() {
    let v2 = CgroupVersion::of_node() == Some(CgroupVersion::V2);
    for (name, path) in runtimes() {
        let fx = Fixture::new(&path);
        let id = test_support::unique_name(&format!("unified-{name}"));
        let mut cfg = config(&id, &["/bin/busybox", "sleep", "300"]);
        cfg.resources = Resources {
            memory_limit: Some(96 << 20),
            unified: [("memory.high".to_owned(), (48u64 << 20).to_string())].into(),
            ..Resources::default()
        };
        let bundle = fx.bundle(&cfg, &fx.rootfs);
        let created = fx.runtime.create(&id, &bundle, &fx.log_path(&id)).await;
        if !v2 {
            let err = created.expect_err("unified on cgroup v1").to_string();
            assert!(
                err.contains(&id) && err.contains("unified"),
                "{name}: {err}"
            );
            continue;
        }
        let pid = created.unwrap_or_else(|e| panic!("{name}: {e}"));
        let high = cgroup_file(pid, "", "memory.high").expect("memory.high");
        assert_eq!(high.trim(), (48u64 << 20).to_string(), "{name}");
        fx.runtime.remove(&id).await.unwrap();
    }
}

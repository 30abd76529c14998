//! create → start → state → kill → exit code → delete, against each runtime.

use std::time::Duration;

use nix::sys::signal::Signal;
use oci_container::{Error, NamespacePaths, ProcessIdentity, Status};
use test_support::netns::NetNs;

use crate::support::{Fixture, config, cri_lines, crun_cannot_run_here, runtimes};

const EXIT: Duration = Duration::from_secs(20);

#[tokio::test]
#[ignore = "needs root: cargo xtask test"]
async fn a_container_that_prints_and_exits_3_leaves_a_cri_log_and_its_exit_code() {
    for (name, path) in runtimes() {
        let fx = Fixture::new(&path);
        let id = test_support::unique_name(&format!("exit3-{name}"));
        let cfg = config(
            &id,
            &[
                "/bin/busybox",
                "sh",
                "-c",
                "echo hello; echo oops >&2; exit 3",
            ],
        );
        let bundle = fx.bundle(&cfg, &fx.rootfs);
        let log = fx.log_path(&id);
        let pid = fx.runtime.create(&id, &bundle, &log).await.unwrap();
        assert!(pid > 0, "{name}");

        // the record was written, and names the live conmon by pid and start time
        let rec = fx.runtime.record(&id).unwrap();
        assert_eq!(
            (rec.bundle.as_path(), rec.runtime.as_path()),
            (bundle.as_path(), path.as_path())
        );
        let conmon = rec.conmon.expect("conmon identity recorded");
        assert!(conmon.is_alive(), "{name}: conmon runs");
        assert_eq!(
            fx.runtime.state(&id).await.unwrap().status,
            Status::Created,
            "{name}"
        );

        fx.runtime.start(&id).await.unwrap();
        assert_eq!(fx.runtime.wait(&id, EXIT).await.unwrap(), 3, "{name}");
        assert_eq!(fx.runtime.exit_code(&id).unwrap(), 3);
        assert_eq!(
            fx.runtime.state(&id).await.unwrap().status,
            Status::Stopped,
            "{name}"
        );

        let lines = cri_lines(&log);
        assert!(
            lines.contains(&("stdout".into(), "hello".into())),
            "{name}: {lines:?}"
        );
        assert!(
            lines.contains(&("stderr".into(), "oops".into())),
            "{name}: {lines:?}"
        );

        fx.runtime.delete(&id).await.unwrap();
        let err = fx.runtime.state(&id).await.unwrap_err();
        assert!(matches!(err, Error::NotFound { .. }), "{name}: {err}");
        assert!(fx.runtime.records().unwrap().records.is_empty());
        assert!(!fx.runtime.exit_file(&id).exists());
        assert!(!conmon.is_alive(), "{name}: conmon gone after delete");
        assert!(log.exists(), "the log is the caller's and stays");
    }
}

#[tokio::test]
#[ignore = "needs root: cargo xtask test"]
async fn a_running_container_is_killed_and_deleted_and_its_conmon_outlives_its_caller() {
    for (name, path) in runtimes() {
        let fx = Fixture::new(&path);
        let id = test_support::unique_name(&format!("sleep-{name}"));
        // pid 1 ignores signals it has no handler for: the shell traps TERM
        let cfg = config(
            &id,
            &[
                "/bin/busybox",
                "sh",
                "-c",
                "trap 'exit 143' TERM; /bin/busybox sleep 300 & wait",
            ],
        );
        let bundle = fx.bundle(&cfg, &fx.rootfs);
        fx.runtime
            .create(&id, &bundle, &fx.log_path(&id))
            .await
            .unwrap();
        fx.runtime.start(&id).await.unwrap();

        let state = fx.runtime.state(&id).await.unwrap();
        assert_eq!(state.status, Status::Running, "{name}");
        let pid = state.pid.expect("a running container has a pid");
        assert!(
            ProcessIdentity::of(pid).is_some(),
            "{name}: its pid is a live process"
        );
        let listed = fx.runtime.list().await.unwrap();
        assert!(
            listed
                .iter()
                .any(|s| s.id == id && s.status == Status::Running),
            "{listed:?}"
        );

        // conmon is a daemon: not our child, leader of its own session
        let conmon = fx.runtime.record(&id).unwrap().conmon.unwrap();
        let stat = node_primitives::ProcStat::of(conmon.pid).unwrap();
        let (ppid, sid) = (stat.ppid, stat.session);
        assert_ne!(
            ppid,
            std::process::id() as i32,
            "{name}: conmon is not our child"
        );
        assert_eq!(sid, conmon.pid, "{name}: conmon leads its own session");

        // a running container cannot be deleted without force
        let err = fx.runtime.delete(&id).await.unwrap_err();
        assert!(err.to_string().contains(&id), "{err}");

        fx.runtime.kill(&id, Signal::SIGTERM).await.unwrap();
        assert_eq!(fx.runtime.wait(&id, EXIT).await.unwrap(), 143, "{name}");
        fx.runtime.delete(&id).await.unwrap();
        assert!(matches!(
            fx.runtime.state(&id).await,
            Err(Error::NotFound { .. })
        ));
        assert!(!fx.runtime.list().await.unwrap().iter().any(|s| s.id == id));
    }
}

#[tokio::test]
#[ignore = "needs root: cargo xtask test"]
async fn a_container_joins_a_network_namespace() {
    let ns = NetNs::new("oci-ctr");
    ns.must(&[
        "ip", "link", "add", "probe0", "type", "veth", "peer", "name", "probe1",
    ]);
    for (name, path) in runtimes() {
        let fx = Fixture::new(&path);
        let id = test_support::unique_name(&format!("netns-{name}"));
        let mut cfg = config(&id, &["/bin/busybox", "cat", "/proc/net/dev"]);
        cfg.namespaces = NamespacePaths {
            network: Some(ns.path()),
            ..NamespacePaths::default()
        };
        let bundle = fx.bundle(&cfg, &fx.rootfs);
        let log = fx.log_path(&id);
        fx.runtime.create(&id, &bundle, &log).await.unwrap();
        fx.runtime.start(&id).await.unwrap();
        assert_eq!(fx.runtime.wait(&id, EXIT).await.unwrap(), 0, "{name}");
        let lines = cri_lines(&log);
        assert!(
            lines
                .iter()
                .any(|(_, l)| l.trim_start().starts_with("probe0:")),
            "{name}: the namespace's veth is visible: {lines:?}"
        );
        fx.runtime.delete(&id).await.unwrap();
    }
}

#[tokio::test]
#[ignore = "needs root: cargo xtask test"]
async fn a_missing_rootfs_or_command_is_an_error_naming_the_container_and_leaves_nothing() {
    for (name, path) in runtimes() {
        let fx = Fixture::new(&path);

        let id = test_support::unique_name(&format!("norootfs-{name}"));
        let cfg = config(&id, &["/bin/busybox", "true"]);
        let gone = fx.dir.path().join("no-such-rootfs");
        let bundle = fx.bundle(&cfg, &gone);
        let err = fx
            .runtime
            .create(&id, &bundle, &fx.log_path(&id))
            .await
            .unwrap_err();
        let text = err.to_string();
        assert_eq!(err.container(), id, "{name}: {text}");
        assert!(
            text.contains(&format!("container {id}: ")),
            "{name}: {text}"
        );
        assert!(
            text.contains("no-such-rootfs") || text.contains("No such file"),
            "{name}: the runtime's reason: {text}"
        );
        assert_left_nothing(&fx, &id).await;

        let id = test_support::unique_name(&format!("nocmd-{name}"));
        let cfg = config(&id, &["/no/such/command"]);
        let bundle = fx.bundle(&cfg, &fx.rootfs);
        let failed = match fx.runtime.create(&id, &bundle, &fx.log_path(&id)).await {
            Err(e) => e,
            // a runtime may only find out when it execs: then start fails or the process does
            Ok(_) => {
                if let Err(e) = fx.runtime.start(&id).await {
                    fx.runtime.remove(&id).await.unwrap();
                    e
                } else {
                    let code = fx.runtime.wait(&id, EXIT).await.unwrap();
                    assert_eq!(code, 127, "{name}: exec failure");
                    fx.runtime.remove(&id).await.unwrap();
                    assert_left_nothing(&fx, &id).await;
                    continue;
                }
            }
        };
        let text = failed.to_string();
        assert!(
            text.contains(&format!("container {id}: ")),
            "{name}: {text}"
        );
        assert!(
            text.contains("/no/such/command"),
            "{name}: names the command: {text}"
        );
        assert_left_nothing(&fx, &id).await;
    }
}

async fn assert_left_nothing(fx: &Fixture, id: &str) {
    assert!(
        fx.runtime.records().unwrap().records.is_empty(),
        "no record left for {id}"
    );
    assert!(
        !fx.runtime.list().await.unwrap().iter().any(|s| s.id == id),
        "{id} still in the runtime"
    );
    assert!(!fx.runtime.exit_file(id).exists());
}

#[tokio::test]
#[ignore = "needs root: cargo xtask test"]
async fn a_restarted_caller_finds_its_containers_in_the_records_and_removes_them() {
    for (name, path) in runtimes() {
        let fx = Fixture::new(&path);
        let id = test_support::unique_name(&format!("orphan-{name}"));
        let cfg = config(&id, &["/bin/busybox", "sleep", "300"]);
        let bundle = fx.bundle(&cfg, &fx.rootfs);
        fx.runtime
            .create(&id, &bundle, &fx.log_path(&id))
            .await
            .unwrap();
        fx.runtime.start(&id).await.unwrap();

        // a new Runtime over the same directories, as after a crash of the caller
        let again = fx.runtime.clone();
        let records = again.records().unwrap();
        assert!(records.errors.is_empty(), "{:?}", records.errors);
        let rec = records.records.iter().find(|r| r.id == id).expect("record");
        let conmon = rec.conmon.expect("conmon identity");
        assert!(conmon.is_alive(), "{name}: conmon still runs");
        assert!(again.list().await.unwrap().iter().any(|s| s.id == id));

        again.remove(&id).await.unwrap();
        assert!(!conmon.is_alive(), "{name}: conmon gone");
        assert_left_nothing(&fx, &id).await;
        // removing what is gone is not an error
        again.remove(&id).await.unwrap();
    }
}

/// On a host crun 1.8 refuses (hybrid cgroups with v2 controllers), the driver reports the
/// refusal naming the container and quoting crun, and leaves nothing; on any other host crun is
/// in `runtimes()` and every test above runs on it. Either way crun is tested, never skipped.
#[tokio::test]
#[ignore = "needs root: cargo xtask test"]
async fn crun_refuses_hybrid_cgroups_naming_the_reason() {
    let Some(why) = crun_cannot_run_here() else {
        assert!(
            runtimes().iter().any(|(name, _)| *name == "crun"),
            "crun accepts this host, so the tests above run on it"
        );
        return;
    };
    let fx = Fixture::new(std::path::Path::new("/usr/bin/crun"));
    let id = test_support::unique_name("crun-hybrid");
    let cfg = config(&id, &["/bin/busybox", "true"]);
    let bundle = fx.bundle(&cfg, &fx.rootfs);
    let err = fx
        .runtime
        .create(&id, &bundle, &fx.log_path(&id))
        .await
        .expect_err(&format!("crun refuses this host: {why}"));
    let text = err.to_string();
    assert!(text.contains(&id), "{text}");
    assert!(text.contains("hybrid"), "crun says why: {text}");
    assert!(
        fx.runtime.records().unwrap().records.is_empty(),
        "nothing left"
    );
}

#[test]
#[ignore = "needs root: cargo xtask test"]
fn a_pods_ipc_and_uts_namespaces_and_shm_are_pinned_and_unpinned() {
    let dir = test_support::temp_dir("oci-container-pod");
    let pod_dir = dir.path().join("pod");
    let pins = oci_container::pin_pod("pod-1", &pod_dir, "web-pod").expect("pin the pod");
    let inode = |p: &std::path::Path| {
        use std::os::unix::fs::MetadataExt as _;
        std::fs::metadata(p).map(|m| m.ino()).unwrap()
    };
    // A pin holds a namespace of its own, not the test's.
    assert_ne!(
        inode(&pins.ipc),
        inode(std::path::Path::new("/proc/self/ns/ipc"))
    );
    assert_ne!(
        inode(&pins.uts),
        inode(std::path::Path::new("/proc/self/ns/uts"))
    );
    let hostname = std::process::Command::new("nsenter")
        .arg(format!("--uts={}", pins.uts.display()))
        .arg("hostname")
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&hostname.stdout), "web-pod\n");
    let mounts = test_support::fs::mounts_at_or_below(&pod_dir);
    assert_eq!(mounts.len(), 3, "ipc, uts and shm: {mounts:?}");
    // Pinning again keeps the same namespaces.
    let again = oci_container::pin_pod("pod-1", &pod_dir, "web-pod").unwrap();
    assert_eq!(inode(&again.ipc), inode(&pins.ipc));

    oci_container::unpin_pod("pod-1", &pod_dir).expect("unpin");
    assert!(test_support::fs::mounts_at_or_below(&pod_dir).is_empty());
    assert!(!pins.ipc.exists() && !pins.uts.exists() && !pins.shm.exists());
    oci_container::unpin_pod("pod-1", &pod_dir).expect("unpinning twice is fine");
}

/// A privileged container gets every capability the caller can still grant: on a node whose
/// runtime runs without some (this machine's has no CAP_SYS_RESOURCE), asking for all of them
/// made runc refuse the container.
#[tokio::test]
#[ignore = "needs root: cargo xtask test"]
async fn a_privileged_container_runs_with_the_capabilities_the_node_has() {
    for (name, runtime) in runtimes() {
        let fx = Fixture::new(&runtime);
        let id = format!("priv-{name}");
        let config = oci_container::ContainerConfig {
            privileged: true,
            ..config(&id, &["sh", "-c", "grep CapEff /proc/self/status"])
        };
        let bundle = fx.bundle(&config, &fx.rootfs);
        let (code, lines) = fx.run_to_end(&id, &bundle).await;
        assert_eq!(code, 0, "{name}: {lines:?}");
        assert!(
            lines.iter().any(|l| l.contains("CapEff")),
            "{name}: {lines:?}"
        );
    }
}

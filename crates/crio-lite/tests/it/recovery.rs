//! Restarts and crashes: sandboxes come back as they were, half-made ones are rolled back.

use std::collections::BTreeMap;
use std::path::Path;

use cri_api::v1 as cri;
use crio_lite::domain::{DnsSettings, NamespaceModes, Sandbox, SandboxName, SandboxState};
use test_support::fs::file_names;

use crate::support::{self, FakeCni, Harness, ips, list, run, status};

const CREATING_ID: &str = "c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00";
const STRAY_ID: &str = "5555555555555555555555555555555555555555555555555555555555555555";
const GARBLED_ID: &str = "baadf00dbaadf00dbaadf00dbaadf00dbaadf00dbaadf00dbaadf00dbaadf00d";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_brings_sandboxes_back_with_their_ips() {
    let Harness {
        dir,
        cni: _,
        daemon,
        mut client,
    } = support::harness().await;
    let socket = daemon.socket_path().to_owned();
    let mut before = BTreeMap::new();
    let mut by_name = BTreeMap::new();
    for name in ["a", "b", "c"] {
        let id = run(&mut client, name).await;
        before.insert(id.clone(), ips(&status(&mut client, &id).await));
        by_name.insert(name, id);
    }
    let stopped = by_name["a"].clone();
    client
        .stop_pod_sandbox(support::stop_request(&stopped))
        .await
        .unwrap();
    drop(client);
    daemon.shutdown().await.unwrap();
    assert!(!socket.exists(), "the socket file is removed at shutdown");
    assert_eq!(
        file_names(&dir.path().join("run/netns")).len(),
        3,
        "sandboxes outlive the daemon"
    );

    let second = FakeCni::new();
    let (daemon, mut client) = support::start_with_client(dir.path(), &second).await;
    let items = list(&mut client, None).await;
    assert_eq!(items.len(), 3);
    for item in items {
        let st = status(&mut client, &item.id).await;
        assert_eq!(
            ips(&st),
            before[&item.id],
            "sandbox {} keeps its IPs",
            item.id
        );
        let expected = if item.id == stopped {
            cri::PodSandboxState::SandboxNotready
        } else {
            cri::PodSandboxState::SandboxReady
        };
        assert_eq!(st.state, expected as i32);
    }
    // Nothing was torn down; ocicni collected with the two ready sandboxes as the valid ones.
    let mut ready: Vec<&String> = before.keys().filter(|id| **id != stopped).collect();
    ready.sort();
    let ready: Vec<&str> = ready.into_iter().map(String::as_str).collect();
    assert_eq!(second.summary(), vec![format!("gc [{}]", ready.join(","))]);
    // The name index came back too: the same pod is the same sandbox.
    assert_eq!(run(&mut client, "b").await, by_name["b"]);
    daemon.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ready_sandbox_whose_namespace_vanished_is_stopped() {
    let Harness {
        dir,
        cni: _,
        daemon,
        mut client,
    } = support::harness().await;
    let id = run(&mut client, "web").await;
    drop(client);
    daemon.shutdown().await.unwrap();
    // As after a reboot: the pin is gone.
    std::fs::remove_file(dir.path().join("run/netns").join(&id)).unwrap();

    let second = FakeCni::new();
    let (daemon, mut client) = support::start_with_client(dir.path(), &second).await;
    assert_eq!(
        status(&mut client, &id).await.state,
        cri::PodSandboxState::SandboxNotready as i32
    );
    assert_eq!(
        second.summary(),
        vec![format!("teardown {id}"), "gc []".to_owned()]
    );
    client
        .remove_pod_sandbox(support::remove_request(&id))
        .await
        .unwrap();
    assert_eq!(
        file_names(&dir.path().join("state/sandboxes")),
        Vec::<String>::new()
    );
    daemon.shutdown().await.unwrap();
}

fn creating(id: &str, netns: &Path) -> Sandbox {
    Sandbox {
        id: id.to_owned(),
        name: SandboxName {
            name: "half".into(),
            namespace: "default".into(),
            uid: "u".into(),
            attempt: 0,
        },
        state: SandboxState::Creating,
        created_at: 1,
        host_network: false,
        netns_path: Some(netns.to_owned()),
        hostname: "half".into(),
        dns: DnsSettings::default(),
        labels: BTreeMap::new(),
        annotations: BTreeMap::new(),
        port_mappings: Vec::new(),
        cgroup_parent: String::new(),
        namespace_options: NamespaceModes::default(),
        runtime_handler: String::new(),
        log_directory: String::new(),
        attachments: Vec::new(),
        sysctls: BTreeMap::new(),
        privileged: false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandbox_caught_half_way_is_rolled_back() {
    let dir = tempfile::tempdir().unwrap();
    let sandboxes = dir.path().join("state/sandboxes");
    let netns_dir = dir.path().join("run/netns");
    std::fs::create_dir_all(&sandboxes).unwrap();
    std::fs::create_dir_all(&netns_dir).unwrap();
    // Killed after pinning the namespace, before the network was up.
    let netns = netns_dir.join(CREATING_ID);
    std::fs::write(&netns, b"").unwrap();
    let state = serde_json::to_vec(&creating(CREATING_ID, &netns)).unwrap();
    std::fs::write(sandboxes.join(format!("{CREATING_ID}.json")), state).unwrap();
    // Killed mid-write of a state file: the temporary file is all there is.
    std::fs::write(sandboxes.join(format!(".{STRAY_ID}.json.tmp")), b"{\"id\":").unwrap();
    // A pin that no state file owns.
    std::fs::write(netns_dir.join(STRAY_ID), b"").unwrap();
    // A state file that cannot be read: rolled back by its ID.
    std::fs::write(sandboxes.join(format!("{GARBLED_ID}.json")), b"\0\0\0").unwrap();
    std::fs::write(netns_dir.join(GARBLED_ID), b"").unwrap();

    let cni = FakeCni::new();
    let (daemon, mut client) = support::start_with_client(dir.path(), &cni).await;
    assert!(list(&mut client, None).await.is_empty());
    let mut summary = cni.summary();
    let gc = summary.pop();
    summary.sort();
    assert_eq!(
        summary,
        vec![
            format!("teardown {GARBLED_ID}"),
            format!("teardown {CREATING_ID}")
        ]
    );
    assert_eq!(
        gc.as_deref(),
        Some("gc []"),
        "gc runs last, with no valid pod"
    );
    assert_eq!(
        file_names(&sandboxes),
        Vec::<String>::new(),
        "state files gone"
    );
    assert_eq!(file_names(&netns_dir), Vec::<String>::new(), "pins gone");

    // The rolled-back pod can be run again.
    let id = run(&mut client, "half").await;
    assert_ne!(id, CREATING_ID);
    daemon.shutdown().await.unwrap();
}

/// A daemon killed while a plugin runs: the runtime (and with it every task) vanishes at once, as
/// with SIGKILL. The next daemon finds the `Creating` state, tears down and unpins.
#[test]
fn killed_during_setup_then_restarted() {
    let dir = tempfile::tempdir().unwrap();
    let first = FakeCni::new();
    first.hang_setups();
    let killed = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    killed.block_on(async {
        let (daemon, mut client) = support::start_with_client(dir.path(), &first).await;
        tokio::spawn(async move { client.run_pod_sandbox(support::pod("doomed")).await });
        while first.leases().is_empty() {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        daemon.abandon();
    });
    killed.shutdown_background();
    let Some(support::Call::Setup(pod)) = first
        .calls()
        .into_iter()
        .find(|c| matches!(c, support::Call::Setup(_)))
    else {
        panic!("no setup: {:?}", first.summary());
    };
    assert!(
        first.leases().contains_key(&pod.id),
        "the kill left an attachment behind"
    );
    assert!(
        Path::new(&pod.netns).exists(),
        "the kill left a pinned namespace behind"
    );

    let second = FakeCni::new();
    let restarted = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    restarted.block_on(async {
        let (daemon, mut client) = support::start_with_client(dir.path(), &second).await;
        assert!(list(&mut client, None).await.is_empty());
        assert_eq!(
            second.summary(),
            vec![format!("teardown {}", pod.id), "gc []".to_owned()]
        );
        let Some(support::Call::Teardown(teardown)) = second.calls().into_iter().next() else {
            panic!("no teardown");
        };
        assert_eq!(
            teardown.netns, pod.netns,
            "the teardown names the namespace"
        );
        assert!(!Path::new(&pod.netns).exists(), "the namespace is unpinned");
        assert_eq!(
            file_names(&dir.path().join("state/sandboxes")),
            Vec::<String>::new()
        );
        daemon.shutdown().await.unwrap();
    });
}

/// A second daemon on the same state directory used to run recovery first and roll back the
/// first daemon's sandbox while it was being created. It must stop before touching anything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_daemon_on_the_same_state_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let first = FakeCni::new();
    first.hang_setups();
    let (daemon, mut client) = support::start_with_client(dir.path(), &first).await;
    let creating = tokio::spawn(async move { client.run_pod_sandbox(support::pod("busy")).await });
    while first.leases().is_empty() {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let state_before = file_names(&dir.path().join("state/sandboxes"));
    let pins_before = file_names(&dir.path().join("run/netns"));
    assert_eq!(state_before.len(), 1, "{state_before:?}");

    let second = FakeCni::new();
    let cni: std::sync::Arc<dyn ocicni::CniPlugin> = second.clone();
    let err = crio_lite::Daemon::start(
        support::config(dir.path()),
        cni,
        std::sync::Arc::new(support::FakeNetns),
    )
    .await
    .expect_err("a second daemon on the same state dir is refused");
    assert!(
        err.to_string().contains("another crio-lite is running"),
        "{err}"
    );
    assert!(
        second.calls().is_empty(),
        "the second daemon acted: {:?}",
        second.summary()
    );
    assert_eq!(
        file_names(&dir.path().join("state/sandboxes")),
        state_before
    );
    assert_eq!(file_names(&dir.path().join("run/netns")), pins_before);
    assert!(
        first
            .calls()
            .iter()
            .all(|c| matches!(c, support::Call::Setup(_) | support::Call::Gc(_))),
        "{:?}",
        first.summary()
    );
    creating.abort();
    daemon.abandon();
}

/// Killed in the middle of StopPodSandbox (network torn down, state not yet saved), the daemon used
/// to come back reporting the sandbox READY with no network. The intent is saved first now, and the
/// next start finishes the stop.
#[test]
fn killed_during_stop_comes_back_not_ready_and_finishes_the_stop() {
    let dir = tempfile::tempdir().unwrap();
    let first = FakeCni::new();
    let killed = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let id = killed.block_on(async {
        let (daemon, mut client) = support::start_with_client(dir.path(), &first).await;
        let id = run(&mut client, "stopping").await;
        first.hang_teardowns();
        let stopping = id.clone();
        tokio::spawn(async move {
            client
                .stop_pod_sandbox(support::stop_request(&stopping))
                .await
        });
        while !first.summary().iter().any(|c| c.starts_with("teardown")) {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        daemon.abandon();
        id
    });
    killed.shutdown_background();

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let second = FakeCni::new();
        let (daemon, mut client) = support::start_with_client(dir.path(), &second).await;
        let pods = list(&mut client, None).await;
        assert_eq!(pods.len(), 1);
        assert_eq!(
            pods[0].state,
            cri::PodSandboxState::SandboxNotready as i32,
            "a sandbox caught stopping must never come back ready"
        );
        assert!(
            second.summary().contains(&format!("teardown {id}")),
            "the restart finishes the teardown: {:?}",
            second.summary()
        );
        client
            .remove_pod_sandbox(support::remove_request(&id))
            .await
            .unwrap();
        assert!(list(&mut client, None).await.is_empty());
        assert!(file_names(&dir.path().join("state/sandboxes")).is_empty());
        daemon.shutdown().await.unwrap();
    });
}

/// After a reboot every pin is gone and every ready sandbox needs a teardown; with slow plugins
/// that kept the socket down for the sum of them (37 s was seen). The socket serves at once now,
/// nothing is reported ready meanwhile, and RunPodSandbox waits for recovery to finish.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_socket_serves_while_recovery_runs() {
    let dir = tempfile::tempdir().unwrap();
    let first = FakeCni::new();
    let (daemon, mut client) = support::start_with_client(dir.path(), &first).await;
    let mut ids = Vec::new();
    for name in ["r1", "r2", "r3"] {
        ids.push(run(&mut client, name).await);
    }
    drop(client);
    daemon.shutdown().await.unwrap();
    // A reboot: the pins are gone.
    for id in &ids {
        std::fs::remove_file(dir.path().join("run/netns").join(id)).unwrap();
    }

    let second = FakeCni::new();
    second.slow_teardowns(std::time::Duration::from_secs(2));
    let cni: std::sync::Arc<dyn ocicni::CniPlugin> = second.clone();
    let started = std::time::Instant::now();
    let daemon = crio_lite::Daemon::start(
        support::config(dir.path()),
        cni,
        std::sync::Arc::new(support::FakeNetns),
    )
    .await
    .unwrap();
    let mut client = support::runtime_client(daemon.socket_path()).await;
    client
        .version(cri::VersionRequest::default())
        .await
        .expect("the socket answers during recovery");
    let serving_after = started.elapsed();
    assert!(
        serving_after < std::time::Duration::from_millis(1500),
        "serving took {serving_after:?}; the teardowns alone take 6 s"
    );
    for pod in list(&mut client, None).await {
        assert_eq!(
            pod.state,
            cri::PodSandboxState::SandboxNotready as i32,
            "{} reported ready without a namespace",
            pod.id
        );
    }
    // Creation waits for recovery (and its GC) to finish, then works.
    let new = run(&mut client, "after-reboot").await;
    assert!(started.elapsed() >= std::time::Duration::from_secs(6));
    for id in &ids {
        assert!(
            second.summary().contains(&format!("teardown {id}")),
            "{:?}",
            second.summary()
        );
    }
    assert!(second.summary().iter().any(|c| c.starts_with("gc")));
    assert_eq!(
        status(&mut client, &new).await.state,
        cri::PodSandboxState::SandboxReady as i32
    );
    daemon.shutdown().await.unwrap();
}

/// A FIFO planted as a state file used to hang the start; it reads as an unreadable state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifo_among_the_state_files_does_not_hang_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let states = dir.path().join("state/sandboxes");
    std::fs::create_dir_all(&states).unwrap();
    nix::unistd::mkfifo(
        &states.join(format!("{GARBLED_ID}.json")),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .unwrap();
    let cni = FakeCni::new();
    let started = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        support::start_with_client(dir.path(), &cni),
    )
    .await
    .expect("the start must not wait on a FIFO");
    let (daemon, mut client) = started;
    assert!(list(&mut client, None).await.is_empty());
    daemon.shutdown().await.unwrap();
}

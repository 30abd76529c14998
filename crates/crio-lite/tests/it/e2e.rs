//! End to end: the `crio-lite` binary with the real CNI plugins, driven over its socket, each test in
//! a node network namespace of its own (see `e2e_support`). Every test ends by checking that
//! nothing leaked: veths, leases, cache entries, pins, mounts, state files, iptables rules.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};

use cri_api::v1 as cri;
use test_support::fs::file_names;
use tokio::task::JoinSet;

use crate::e2e_support::{self, GATEWAY, NETWORK, Node, ready_ip, remove, run, stop};
use crate::support::{self, list};

fn ready() -> i32 {
    cri::PodSandboxState::SandboxReady as i32
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root + netns: cargo xtask test"]
async fn sandbox_lifecycle_with_real_plugins() {
    let mut node = Node::new("life");
    node.start().await;
    let mut client = node.client().await;

    let web = run(&mut client, "web", Some(8080)).await;
    let web_ip = ready_ip(&mut client, &web).await;
    assert!(
        ocicni::netns::is_netns(&node.pin(&web)).expect("inspect the pin"),
        "the pod's namespace is pinned under the run dir"
    );
    let db = run(&mut client, "db", None).await;
    let db_ip = ready_ip(&mut client, &db).await;
    assert_ne!(web_ip, db_ip);
    assert_eq!(node.veths().len(), 2, "one veth per pod on the node");
    assert_eq!(node.leases().len(), 2, "one lease per pod");
    // What the final leak check looks for is visible while the pods run.
    assert_eq!(node.pin_mounts().len(), 2, "one mount per pin");
    for id in [&web, &db] {
        assert!(
            node.cache_entries().iter().any(|e| e.contains(id.as_str())),
            "a cache entry for {id}: {:?}",
            node.cache_entries()
        );
    }

    node.ping(&web, db_ip).unwrap();
    node.ping(&db, web_ip).unwrap();

    // The host port on the node reaches the pod's listener (portmap's DNAT).
    node.serve_in_pod(&web, 80, "hello from web");
    let answer = node
        .fetch_from_node(SocketAddr::from((GATEWAY, 8080)))
        .expect("connect to the mapped port from the node");
    assert_eq!(answer, "hello from web");
    assert!(
        !node.pod_rules(std::slice::from_ref(&web)).is_empty(),
        "the pod has rules of its own while it runs:\n{}",
        node.iptables()
    );

    stop(&mut client, &web).await;
    let status = support::status(&mut client, &web).await;
    assert_eq!(status.state, cri::PodSandboxState::SandboxNotready as i32);
    assert_eq!(node.veths().len(), 1, "the stopped pod's veth is gone");
    assert_eq!(
        node.leases().len(),
        1,
        "the stopped pod's lease is released"
    );
    let links = node.in_pod(&web, "ip", &["-o", "link"]);
    let links = String::from_utf8_lossy(&links.stdout);
    assert!(!links.contains("eth0"), "no eth0 left in the pod: {links}");
    assert!(node.pin(&web).exists(), "the namespace stays until removal");

    remove(&mut client, &web).await;
    assert!(!node.pin(&web).exists(), "the pin is gone after removal");
    let gone = client
        .pod_sandbox_status(cri::PodSandboxStatusRequest {
            pod_sandbox_id: web.clone(),
            verbose: false,
        })
        .await
        .expect_err("a removed sandbox has no status");
    assert_eq!(gone.code(), tonic::Code::NotFound);

    stop(&mut client, &db).await;
    remove(&mut client, &db).await;
    drop(client);
    assert!(node.sigterm().await, "the daemon exits cleanly on SIGTERM");
    node.assert_nothing_leaked(&[web, db]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root + netns: cargo xtask test"]
async fn twenty_sandboxes_at_once() {
    let mut node = Node::new("burst");
    node.start().await;
    let client = node.client().await;

    let mut runs = JoinSet::new();
    for i in 0..20 {
        let mut client = client.clone();
        runs.spawn(async move { run(&mut client, &format!("burst-{i}"), None).await });
    }
    let ids: Vec<String> = runs.join_all().await;
    assert_eq!(ids.iter().collect::<BTreeSet<_>>().len(), 20, "20 IDs");

    let mut client = client.clone();
    let mut ips = BTreeSet::new();
    for id in &ids {
        ips.insert(ready_ip(&mut client, id).await);
    }
    assert_eq!(ips.len(), 20, "20 distinct IPs: {ips:?}");
    assert_eq!(node.veths().len(), 20);
    assert_eq!(node.leases().len(), 20);

    let mut removals = JoinSet::new();
    for id in ids.clone() {
        let mut client = client.clone();
        removals.spawn(async move {
            stop(&mut client, &id).await;
            remove(&mut client, &id).await;
        });
    }
    removals.join_all().await;
    assert!(list(&mut client, None).await.is_empty());
    drop(client);
    assert!(node.sigterm().await);
    node.assert_nothing_leaked(&ids);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root + netns: cargo xtask test"]
async fn restart_keeps_ready_sandboxes_and_their_ips() {
    let mut node = Node::new("restart");
    node.start().await;
    let mut client = node.client().await;
    let mut before = BTreeMap::new();
    for name in ["r0", "r1", "r2"] {
        let id = run(&mut client, name, None).await;
        before.insert(id.clone(), ready_ip(&mut client, &id).await);
    }
    drop(client);
    assert!(node.sigterm().await, "the daemon exits cleanly on SIGTERM");
    assert_eq!(
        node.veths().len(),
        3,
        "pods keep their network while it is down"
    );

    node.start().await;
    node.wait_recovered().await;
    let mut client = node.client().await;
    let listed = list(&mut client, None).await;
    assert_eq!(listed.len(), 3, "{listed:?}");
    assert!(listed.iter().all(|p| p.state == ready()), "{listed:?}");
    let mut after = BTreeMap::new();
    for id in before.keys() {
        after.insert(id.clone(), ready_ip(&mut client, id).await);
    }
    assert_eq!(before, after, "the same sandboxes with the same IPs");
    let ids: Vec<String> = before.keys().cloned().collect();
    node.ping(&ids[0], before[&ids[1]]).unwrap();

    for id in &ids {
        stop(&mut client, id).await;
        remove(&mut client, id).await;
    }
    drop(client);
    assert!(node.sigterm().await);
    node.assert_nothing_leaked(&ids);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root + netns: cargo xtask test"]
async fn sigkill_during_runs_leaves_each_sandbox_ready_or_gone() {
    const PODS: usize = 10;
    const KILL_AFTER: usize = 3;
    let mut node = Node::new("kill");
    node.start().await;
    let client = node.client().await;

    let mut runs = JoinSet::new();
    for i in 0..PODS {
        let mut client = client.clone();
        runs.spawn(async move {
            client
                .run_pod_sandbox(e2e_support::pod(&format!("k{i}"), Some(9000 + i as u16)))
                .await
                .map(|r| r.into_inner().pod_sandbox_id)
        });
    }
    let mut succeeded = Vec::new();
    let mut failed = 0;
    while let Some(joined) = runs.join_next().await {
        match joined.expect("the task ran") {
            Ok(id) => succeeded.push(id),
            Err(_) => failed += 1,
        }
        if succeeded.len() == KILL_AFTER && node.is_running() {
            // The daemon and the plugins it runs, as systemd kills a unit's cgroup.
            node.sigkill();
        }
    }
    drop(client);
    assert!(
        failed > 0,
        "{} runs succeeded before the kill took effect: none was in flight",
        succeeded.len()
    );
    // Plugin runs the dead daemon started finish first (its namespace is the node's): the new
    // daemon's recovery then sees all they did.
    node.wait_for_orphans().await;

    node.start().await;
    // The socket serves before recovery has rolled back the runs the kill cut off.
    node.wait_recovered().await;
    let mut client = node.client().await;
    let listed: Vec<String> = list(&mut client, None)
        .await
        .into_iter()
        .map(|p| {
            assert_eq!(
                p.state,
                ready(),
                "after recovery a sandbox is ready or gone: {p:?}"
            );
            p.id
        })
        .collect();
    eprintln!(
        "{} runs succeeded before the kill, {failed} were cut off; {} sandboxes survived",
        succeeded.len(),
        listed.len()
    );
    for id in &succeeded {
        assert!(listed.contains(id), "{id} was created before the kill");
    }
    for id in &listed {
        ready_ip(&mut client, id).await;
        node.ping(id, IpAddr::V4(GATEWAY)).unwrap();
    }
    // Only the survivors own anything.
    assert_eq!(node.veths().len(), listed.len(), "veths of survivors only");
    assert_eq!(
        node.leases().len(),
        listed.len(),
        "leases of survivors only"
    );
    let mut pins = file_names(&node.netns_dir());
    pins.sort();
    let mut expected = listed.clone();
    expected.sort();
    assert_eq!(pins, expected, "pins of survivors only");
    for entry in node.cache_entries() {
        assert!(
            listed.iter().any(|id| entry.contains(id.as_str())),
            "cache entry {entry} belongs to a survivor"
        );
    }

    for id in &listed {
        stop(&mut client, id).await;
        remove(&mut client, id).await;
    }
    drop(client);
    assert!(node.sigterm().await);
    node.assert_nothing_leaked(&listed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root + netns: cargo xtask test"]
async fn invalid_requests_get_the_right_codes() {
    let mut node = Node::new("invalid");
    node.start().await;
    let mut client = node.client().await;

    let mut no_metadata = e2e_support::pod("nometa", None);
    if let Some(config) = no_metadata.config.as_mut() {
        config.metadata = None;
    }
    let err = client.run_pod_sandbox(no_metadata).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument, "{err:?}");

    let mut bad_port = e2e_support::pod("badport", Some(8080));
    if let Some(config) = bad_port.config.as_mut() {
        config.port_mappings[0].host_port = 70_000;
    }
    let err = client.run_pod_sandbox(bad_port).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument, "{err:?}");
    assert!(
        err.message().contains("port_mappings[0].host_port"),
        "the message names the field: {}",
        err.message()
    );

    let err = client
        .pod_sandbox_status(cri::PodSandboxStatusRequest {
            pod_sandbox_id: "0123456789abcdef".to_owned(),
            verbose: false,
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::NotFound, "{err:?}");

    // Rejected requests made nothing; a retried valid one gets the same sandbox.
    assert!(list(&mut client, None).await.is_empty());
    assert!(node.veths().is_empty());
    let id = run(&mut client, "retried", None).await;
    assert_eq!(run(&mut client, "retried", None).await, id);
    assert_eq!(node.veths().len(), 1);

    remove(&mut client, &id).await;
    drop(client);
    assert!(node.sigterm().await);
    node.assert_nothing_leaked(&[id]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root + netns: cargo xtask test"]
async fn status_api_and_subcommand_against_the_real_daemon() {
    let mut node = Node::new("http");
    node.start().await;
    let mut client = node.client().await;
    let id = run(&mut client, "web", Some(8080)).await;
    let ip = ready_ip(&mut client, &id).await;
    let socket = node.socket();

    let (code, body) = crio_lite::status_cmd::get(&socket, "/info").await.unwrap();
    assert_eq!(code, 200, "{body}");
    let info: crio_lite::http_api::Info = serde_json::from_str(&body).expect("/info is JSON");
    assert_eq!(info.default_network.as_deref(), Some(NETWORK));
    assert_eq!(info.network_dir, node.network_dir());
    assert_eq!(info.netns_dir, node.netns_dir());
    // The node has Debian's plugins: prefer-binary runs them, and /info says so.
    assert_eq!(info.builtin_plugins, "prefer-binary");
    assert!(
        info.cni_plugins
            .get("bridge")
            .is_some_and(|p| p.is_absolute() && p.ends_with("bridge")),
        "{:?}",
        info.cni_plugins
    );

    let (code, body) = crio_lite::status_cmd::get(&socket, "/config")
        .await
        .unwrap();
    assert_eq!(code, 200);
    assert!(
        body.contains(&node.state_dir().display().to_string()),
        "{body}"
    );

    let (code, body) = crio_lite::status_cmd::get(&socket, &format!("/containers/{id}"))
        .await
        .unwrap();
    assert_eq!(code, 200, "{body}");
    let pod: crio_lite::http_api::ContainerInfo = serde_json::from_str(&body).unwrap();
    assert_eq!(pod.state, "ready");
    assert_eq!(pod.ips, vec![ip]);
    assert_eq!(pod.netns_path, Some(node.pin(&id)));
    assert_eq!(pod.networks[0].network, NETWORK);
    let (code, _) = crio_lite::status_cmd::get(&socket, "/containers/0123456789abcdef")
        .await
        .unwrap();
    assert_eq!(code, 404);

    let (code, metrics) = crio_lite::status_cmd::get(&socket, "/metrics")
        .await
        .unwrap();
    assert_eq!(code, 200);
    for plugin in ["bridge", "portmap"] {
        let sample = format!(
            "crio_lite_cni_plugin_duration_seconds_count{{network=\"{NETWORK}\",plugin=\"{plugin}\",implementation=\"binary\",command=\"ADD\"}} "
        );
        let count: u64 = metrics
            .lines()
            .find_map(|l| l.strip_prefix(&sample))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {plugin} ADD sample in\n{metrics}"));
        assert!(count >= 1, "{plugin} ADD ran: {count}");
    }

    // The subcommand, as a person would run it.
    let cli = |args: &[&str]| {
        let socket = socket.display().to_string();
        let mut all = vec!["status", "--socket", socket.as_str()];
        all.extend_from_slice(args);
        test_support::process::output(env!("CARGO_BIN_EXE_crio-lite"), &all)
    };
    let out = cli(&["info", "-o", "json"]);
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"runtime_name\": \"crio-lite\""));
    let out = cli(&["config"]);
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("[crio.network]"));
    let out = cli(&["containers", &id[..12], "-o", "json"]);
    assert!(out.status.success(), "{out:?}");
    let shown: crio_lite::http_api::ContainerInfo =
        serde_json::from_slice(&out.stdout).expect("status containers prints JSON");
    assert_eq!(shown.id, id);
    let out = cli(&["containers", "0123456789abcdef"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not found"),
        "{out:?}"
    );

    remove(&mut client, &id).await;
    drop(client);
    assert!(node.sigterm().await);
    node.assert_nothing_leaked(&[id]);
}

/// SIGHUP reads crio-lite.conf and its drop-ins again: a new log level applies at once, other
/// changed keys wait for a restart, and a drop-in with a mistake is reported, naming file, line
/// and key, while the daemon keeps its running configuration and serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root + netns: cargo xtask test"]
async fn sighup_rereads_the_configuration() {
    let mut node = Node::new("hup");
    node.start().await;
    let drop_in = node.path("crio-lite.conf.d/50-hup.conf");
    std::fs::write(
        &drop_in,
        "[crio.runtime]\nlog_level = \"debug\"\n\n[crio.metrics]\nmetrics_port = 9191\n",
    )
    .unwrap();
    node.sighup();
    node.wait_log("crio.runtime.log_level applied", 1).await;
    node.wait_log("take effect at the next start", 1).await;
    let logs = node.logs();
    let pending = logs
        .lines()
        .find(|l| l.contains("take effect at the next start"))
        .unwrap_or_default();
    assert!(
        pending.contains("crio.metrics.metrics_port") && !pending.contains("log_level"),
        "{pending}"
    );
    // ocicni logs each pin at debug: seen only once the new level applies.
    let mut client = node.client().await;
    let id = run(&mut client, "hup", None).await;
    node.wait_log("created network namespace", 1).await;

    std::fs::write(&drop_in, "[crio.runtime]\nlog_levle = \"info\"\n").unwrap();
    node.sighup();
    node.wait_log("keeping the running one", 1).await;
    let logs = node.logs();
    assert!(
        logs.contains(
            "50-hup.conf:2: unknown key crio.runtime.log_levle; did you mean \
             crio.runtime.log_level?"
        ),
        "{logs}"
    );
    // Still serving, still at debug.
    stop(&mut client, &id).await;
    remove(&mut client, &id).await;
    let pins = node.logs().matches("created network namespace").count();
    let again = run(&mut client, "hup-again", None).await;
    node.wait_log("created network namespace", pins + 1).await;
    stop(&mut client, &again).await;
    remove(&mut client, &again).await;
    drop(client);
    assert!(node.sigterm().await, "clean exit:\n{}", node.logs());
    node.assert_nothing_leaked(&[id, again]);
}

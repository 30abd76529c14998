//! The facade with the real plugins (bridge, host-local, portmap) inside a "node" namespace of the
//! test's own: addresses, reachability, port mappings, status, teardown and GC, and what is left.

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use ipnet::{IpNet, Ipv4Net};
use ocicni::{BuiltinNetwork, CniPlugin, Ocicni, PodNetwork, netns};

use crate::real_support::{
    CONTAINER_PORT, Lab, WORKER_K_VAR, WORKER_NODE_VAR, WORKER_ROOT_VAR, ipv4_of,
    processes_with_env,
};

const NET: &str = "podnet";

/// Sets every pod up, `at_once` at a time, and returns each pod's address in pod order.
///
/// The first pod goes alone: on a node's first port-mapped pod, portmap (containernetworking-
/// plugins 1.1, iptables-nft) creates the node-wide CNI-HOSTPORT-* chains with a check-then-create
/// that tolerates only iptables-legacy's "exists" code, so two first ADDs racing each other fail
/// with "CHAIN_USER_ADD failed (File exists)" (a known upstream race).
/// A kubelet retries such a sandbox; this test is about the facade under concurrency, so it
/// creates the shared chains the way a node's first pod does and then runs the rest at once.
async fn set_up_all(cni: &Ocicni, pods: &[PodNetwork], at_once: usize) -> Vec<Ipv4Addr> {
    let Some((first, rest)) = pods.split_first() else {
        return Vec::new();
    };
    let first_outcome = (0, cni.setup_pod(first).await);
    let mut outcomes: Vec<(usize, Result<Vec<ocicni::AttachmentResult>, ocicni::Error>)> =
        futures_util::stream::iter(rest.iter().enumerate().map(|(i, pod)| (i + 1, pod)))
            .map(|(i, pod)| async move { (i, cni.setup_pod(pod).await) })
            .buffer_unordered(at_once)
            .collect()
            .await;
    outcomes.push(first_outcome);
    outcomes.sort_by_key(|(i, _)| *i);
    outcomes
        .into_iter()
        .map(|(i, outcome)| {
            let atts = outcome.unwrap_or_else(|e| panic!("set-up of pod {i}: {e}"));
            assert_eq!(atts.len(), 1, "one attachment for pod {i}");
            assert_eq!(atts[0].network, NET);
            assert_eq!(atts[0].ifname, "eth0");
            ipv4_of(&atts[0])
        })
        .collect()
}

async fn tear_down_all(cni: &Ocicni, pods: &[PodNetwork], at_once: usize) {
    let errors: Vec<String> = futures_util::stream::iter(pods.iter())
        .map(|pod| async move { cni.teardown_pod(pod).await.err().map(|e| e.to_string()) })
        .buffer_unordered(at_once)
        .filter_map(|e| async move { e })
        .collect()
        .await;
    assert!(errors.is_empty(), "teardown errors: {errors:#?}");
}

fn ids(pods: &[PodNetwork]) -> BTreeSet<String> {
    pods.iter().map(|p| p.id.clone()).collect()
}

/// Starts a server inside the namespace at `path`: it answers one connection with `greeting`.
fn serve_once_in(path: &Path, port: u16, greeting: &'static str) -> std::thread::JoinHandle<()> {
    let listener = netns::with_netns(path, move || TcpListener::bind(("0.0.0.0", port)))
        .expect("enter the pod")
        .expect("listen inside the pod");
    std::thread::spawn(move || {
        if let Ok((mut conn, _)) = listener.accept() {
            let _ = conn.write_all(greeting.as_bytes());
        }
    })
}

/// Connects from inside the namespace at `path` and returns what the server said.
fn fetch_from(path: &Path, to: SocketAddr) -> String {
    let mut conn = netns::with_netns(path, move || {
        TcpStream::connect_timeout(&to, Duration::from_secs(5))
    })
    .expect("enter the namespace")
    .unwrap_or_else(|e| panic!("connect to {to}: {e}"));
    conn.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("read timeout");
    let mut text = String::new();
    conn.read_to_string(&mut text)
        .unwrap_or_else(|e| panic!("read from {to}: {e}"));
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root + netns: cargo xtask test"]
async fn fifty_pods_get_unique_addresses_reach_each_other_and_leave_nothing() {
    let lab = Lab::new();
    lab.write_conflist(NET, true);
    let cni = lab.ocicni().await;
    let pods: Vec<PodNetwork> = (0..50).map(|i| lab.pod(i, Some(NET))).collect();

    let addrs = set_up_all(&cni, &pods, 8).await;
    let unique: BTreeSet<Ipv4Addr> = addrs.iter().copied().collect();
    assert_eq!(unique.len(), 50, "addresses are unique: {addrs:?}");
    for addr in &addrs {
        assert!(lab.subnet.contains(addr), "{addr} in {}", lab.subnet);
        assert_ne!(*addr, lab.gateway(), "the gateway is the bridge's");
    }
    for (pod, addr) in pods.iter().zip(&addrs) {
        let ifaces = netns::interfaces(Path::new(&pod.netns)).expect("read the pod's interfaces");
        let lo = ifaces.iter().find(|i| i.name == "lo").expect("lo");
        assert!(lo.up, "lo is up in {}", pod.id);
        let eth0 = ifaces.iter().find(|i| i.name == "eth0").expect("eth0");
        assert!(
            eth0.addresses
                .contains(&IpNet::V4(Ipv4Net::new(*addr, 16).expect("net"))),
            "{} has {addr}: {eth0:?}",
            pod.id
        );
    }
    assert_eq!(lab.node.veths().len(), 50, "one veth per pod in the node");
    assert_eq!(lab.leases(NET).len(), 50, "one lease per pod");
    assert_eq!(lab.cache_entries().len(), 50, "one cache entry per pod");
    let rules = lab.node.iptables();
    for pod in &pods {
        assert!(rules.contains(&pod.id), "iptables has rules for {}", pod.id);
    }

    // Pod to pod, across the bridge.
    let ping = test_support::netns::run_in(
        Path::new(&pods[0].netns),
        &["ping", "-c1", "-W1", &addrs[1].to_string()],
    );
    assert!(
        ping.status.success(),
        "pod 0 pings pod 1 ({}): {}",
        addrs[1],
        String::from_utf8_lossy(&ping.stdout)
    );

    // The node reaches pod 7's server through its host port on the gateway address.
    let server = serve_once_in(
        Path::new(&pods[7].netns),
        CONTAINER_PORT,
        "hello from pod 7",
    );
    let to = SocketAddr::from((lab.gateway(), 20007));
    assert_eq!(fetch_from(&lab.node.path(), to), "hello from pod 7");
    server.join().expect("server thread");

    tear_down_all(&cni, &pods, 8).await;
    lab.assert_nothing_left(NET, &ids(&pods));
    cni.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root + netns: cargo xtask test"]
async fn status_comes_from_the_cache_and_else_from_the_namespace() {
    let lab = Lab::new();
    lab.write_conflist(NET, true);
    let cni = lab.ocicni().await;
    let pod = lab.pod(0, Some(NET));
    let added = cni.setup_pod(&pod).await.expect("set-up");
    let want = ipv4_of(&added[0]);
    let eth0_mac = added[0]
        .result
        .interfaces
        .iter()
        .find(|i| i.name == "eth0" && !i.sandbox.is_empty())
        .map(|i| i.mac.clone())
        .expect("eth0 in the result");

    let cached = cni.pod_network_status(&pod).await.expect("status");
    assert_eq!(cached.len(), 1);
    assert_eq!(
        cached[0].result, added[0].result,
        "status is the cached result"
    );

    assert!(
        cni.cni()
            .cache()
            .remove(NET, &pod.id, "eth0")
            .expect("remove cache entry"),
        "the entry existed"
    );
    let read = cni
        .pod_network_status(&pod)
        .await
        .expect("status from the namespace");
    assert_eq!(read.len(), 1);
    assert_eq!(ipv4_of(&read[0]), want, "the address read in the namespace");
    assert_eq!(read[0].result.ips[0].address.prefix_len(), 16);
    assert_eq!(read[0].result.interfaces[0].name, "eth0");
    assert_eq!(read[0].result.interfaces[0].mac, eth0_mac);

    cni.teardown_pod(&pod)
        .await
        .expect("teardown without cache");
    lab.assert_nothing_left(NET, &ids(std::slice::from_ref(&pod)));
}

/// Waits until the node has no veth left: a destroyed namespace takes its veth pair with it, a
/// moment later.
fn wait_for_no_veths(lab: &Lab, within: Duration) {
    let deadline = Instant::now() + within;
    while !lab.node.veths().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root + netns: cargo xtask test"]
async fn teardown_after_the_namespace_is_gone_releases_everything() {
    let lab = Lab::new();
    // No masquerade here: bridge (1.1.1 and later alike) finds the addresses whose masquerade rules
    // it removes on the pod's interface, so with the namespace gone those rules stay whatever the
    // runtime does; only a CNI 1.1 GC removes them. Portmap's rules, the lease and the cache entry
    // are what the runtime's teardown is answerable for.
    lab.write_conflist(NET, false);
    let cni = lab.ocicni().await;
    let pods: Vec<PodNetwork> = (0..2).map(|i| lab.pod(i, Some(NET))).collect();
    set_up_all(&cni, &pods, 2).await;
    assert_eq!(lab.leases(NET).len(), 2);
    assert!(
        !lab.node.rules_naming(ids(&pods)).is_empty(),
        "portmap made rules"
    );

    for pod in &pods {
        netns::remove_pinned(Path::new(&pod.netns)).expect("remove the pod's namespace");
    }
    for pod in &pods {
        cni.teardown_pod(pod)
            .await
            .unwrap_or_else(|e| panic!("teardown of {} after its netns is gone: {e}", pod.id));
    }
    wait_for_no_veths(&lab, Duration::from_secs(5));
    lab.assert_nothing_left(NET, &ids(&pods));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root + netns: cargo xtask test"]
async fn builtin_default_network_works_with_the_real_plugins() {
    let lab = Lab::new();
    let name = format!("{}-builtin", lab.tag);
    let builtin = BuiltinNetwork {
        name: name.clone(),
        bridge: lab.bridge.clone(),
        subnet: IpNet::V4(lab.subnet),
        ipam_data_dir: Some(lab.ipam_dir()),
        hairpin: true,
        mtu: None,
    };
    let cni = lab
        .builder()
        .builtin_default(Some(builtin))
        .build()
        .await
        .expect("build");
    assert_eq!(cni.default_network_name().as_deref(), Some(name.as_str()));
    assert!(cni.status().await.ready, "ready with the built-in network");

    let pod = lab.pod(0, None);
    let added = cni
        .setup_pod(&pod)
        .await
        .expect("set-up on the built-in network");
    assert_eq!(added.len(), 1);
    assert_eq!(added[0].network, name);
    let addr = ipv4_of(&added[0]);
    assert!(lab.subnet.contains(&addr), "{addr} in {}", lab.subnet);
    assert_eq!(lab.leases(&name).len(), 1);

    cni.teardown_pod(&pod).await.expect("teardown");
    lab.assert_nothing_left(&name, &ids(std::slice::from_ref(&pod)));
}

// ---- a runtime killed in the middle of a set-up ----

/// The progress file a worker appends `start <id>` and `added <id>` lines to.
fn progress_file(root: &Path) -> PathBuf {
    root.join("progress")
}

/// Worker mode: set pods up one after the other until killed. Never returns.
async fn run_worker(root: PathBuf, node: String, k: u32) -> ! {
    let lab = Lab::adopt(root, node, k);
    let cni = lab.ocicni().await;
    let mut progress = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(progress_file(&lab.root))
        .expect("progress file");
    for i in 0..40 {
        let pod = lab.pod(i, Some(NET));
        writeln!(progress, "start {}", pod.id).expect("progress");
        cni.setup_pod(&pod).await.expect("worker set-up");
        writeln!(progress, "added {}", pod.id).expect("progress");
    }
    std::process::exit(0)
}

fn worker_params() -> Option<(PathBuf, String, u32)> {
    let root = std::env::var_os(WORKER_ROOT_VAR)?;
    let node = std::env::var(WORKER_NODE_VAR).ok()?;
    let k = std::env::var(WORKER_K_VAR).ok()?.parse().ok()?;
    Some((PathBuf::from(root), node, k))
}

fn progress(lab: &Lab) -> (Vec<String>, Vec<String>) {
    let text = std::fs::read_to_string(progress_file(&lab.root)).unwrap_or_default();
    let pick = |word: &str| {
        text.lines()
            .filter_map(|l| l.strip_prefix(word))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    (pick("start "), pick("added "))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root + netns: cargo xtask test"]
async fn a_runtime_killed_mid_set_up_leaves_nothing_after_gc() {
    if let Some((root, node, k)) = worker_params() {
        run_worker(root, node, k).await;
    }
    let lab = Lab::new();
    lab.write_conflist(NET, true);
    let log = std::fs::File::create(lab.root.join("worker.log")).expect("worker log");
    let mut worker = test_support::process::rerun_test(
        "real_plugins::a_runtime_killed_mid_set_up_leaves_nothing_after_gc",
    )
    .envs(lab.worker_env())
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(log)
    .spawn()
    .expect("start the worker");

    // Kill it once three pods are up and the fourth or a later one has its veth but has not
    // finished: partial state with no result cached.
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let (started, added) = progress(&lab);
        if added.len() >= 3 && started.len() > added.len() && lab.node.veths().len() > added.len() {
            break;
        }
        let exited = worker.try_wait().expect("worker status");
        assert!(
            exited.is_none() && Instant::now() < deadline,
            "worker never got caught mid-set-up (exit {exited:?}): {}",
            std::fs::read_to_string(lab.root.join("worker.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    worker.kill().expect("SIGKILL the worker");
    worker.wait().expect("reap the worker");
    lab.wait_for_stray_plugins(Duration::from_secs(30));

    let (started, added) = progress(&lab);
    assert!(started.len() > added.len(), "one set-up was in flight");
    let worker_pods: BTreeSet<String> = started.into_iter().collect();
    assert!(
        lab.cache_entries().len() >= added.len(),
        "the finished pods are cached"
    );
    assert!(
        !lab.node.rules_naming(&worker_pods).is_empty(),
        "the worker's pods have rules before GC"
    );

    let cni = lab.ocicni().await;
    cni.gc(&[]).await.expect("gc");
    lab.assert_nothing_left(NET, &worker_pods);
    assert!(
        processes_with_env(&format!("CNI_NETNS={}", lab.pins_dir().display())).is_empty(),
        "no plugin still running"
    );
}

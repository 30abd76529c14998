//! Pod status (cache, CHECK), garbage collection and the runtime's network status, with the fake
//! executor.

use ocicni::{CheckPolicy, CniPlugin, Error, NOT_READY_REASON, Ocicni};
use serde_json::{Value, json};

use crate::fake_exec::{Node, conflist, simple};
use crate::netns::NamedNetns;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_status_comes_from_the_cache_without_running_plugins() {
    let node = Node::with_fake_networks("1.0.0", &["net"]);
    let cni = node.start().await;
    let pod = node.pod("p1");
    let added = cni.setup_pod(&pod).await.unwrap();
    let before = node.fake.pod_calls().len();

    let status = cni.pod_network_status(&pod).await.unwrap();
    assert_eq!(status, added, "the cached result, as ADD returned it");
    assert_eq!(node.fake.pod_calls().len(), before, "no plugin ran");
    cni.shutdown().await;
}

async fn checked_status(version: &str) -> (Node, Vec<String>) {
    let node = Node::with_fake_networks(version, &["net"]);
    let cni = node.start_with(|b| b.check(CheckPolicy::Always)).await;
    let pod = node.pod("p1");
    let added = cni.setup_pod(&pod).await.unwrap();
    let status = cni.pod_network_status(&pod).await.unwrap();
    assert_eq!(status, added);
    cni.shutdown().await;
    let commands = node.fake.pod_commands();
    (node, commands)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_policy_runs_check_where_the_version_has_it() {
    for version in ["0.4.0", "1.0.0", "1.1.0"] {
        let (node, commands) = checked_status(version).await;
        assert_eq!(commands, ["ADD", "CHECK"], "{version}");
        let check = &node.fake.calls_of("CHECK")[0];
        assert_eq!(check.var("CNI_CONTAINERID"), "p1");
        assert_eq!(check.var("CNI_IFNAME"), "eth0");
        assert!(
            check.stdin.get("prevResult").is_some(),
            "{version}: {}",
            check.stdin
        );
    }
    let (_, commands) = checked_status("0.3.1").await;
    assert_eq!(commands, ["ADD"], "0.3.1 has no CHECK");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_check_is_an_error() {
    let node = Node::with_fake_networks("1.0.0", &["net"]);
    let cni = node.start_with(|b| b.check(CheckPolicy::Always)).await;
    let pod = node.pod("p1");
    cni.setup_pod(&pod).await.unwrap();
    node.fake.fail("fake", "CHECK", 102, "veth is gone");
    let err = cni.pod_network_status(&pod).await.unwrap_err();
    let Error::Network {
        network, source, ..
    } = &err
    else {
        panic!("want a Network error, got {err}");
    };
    assert_eq!(network, "net");
    let ocicni::cni_exec::Error::Plugin { error, .. } = &**source else {
        panic!("want the plugin's error object, got {source}");
    };
    assert_eq!((error.code, error.msg.as_str()), (102, "veth is gone"));
    cni.shutdown().await;
}

/// A GC call's list of valid attachments under `key`, sorted.
fn listed(call: &crate::fake_exec::Call, key: &str) -> Value {
    call.stdin.get(key).cloned().unwrap_or(Value::Null)
}

/// Starts the facade on `node`, sets up `podA` and `podB`, then collects garbage keeping `podA`.
async fn gc_keeping_pod_a(node: &Node) -> Ocicni {
    let cni = node.start().await;
    let (a, b) = (node.pod("podA"), node.pod("podB"));
    cni.setup_pod(&a).await.unwrap();
    cni.setup_pod(&b).await.unwrap();
    cni.gc(std::slice::from_ref(&a)).await.unwrap();
    cni
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gc_removes_stale_attachments_and_tells_plugins_what_is_valid() {
    let node = Node::with_fake_networks("1.1.0", &["net"]);
    let cni = gc_keeping_pod_a(&node).await;
    let dels = node.fake.calls_of("DEL");
    assert_eq!(dels.len(), 1, "{dels:?}");
    assert_eq!(dels[0].var("CNI_CONTAINERID"), "podB");
    assert_eq!(node.cache_entries(), ["net-podA-eth0"]);

    let gcs = node.fake.calls_of("GC");
    assert_eq!(gcs.len(), 1);
    let want = json!([{"containerID": "podA", "ifname": "eth0"}]);
    assert_eq!(listed(&gcs[0], "cni.dev/valid-attachments"), want);
    assert_eq!(listed(&gcs[0], "cni.dev/attachments"), want);
    assert_eq!(gcs[0].stdin["name"], "net");
    assert!(gcs[0].env.contains_key("CNI_PATH"));
    cni.shutdown().await;
}

/// A teardown whose DEL fails once (a plugin that errs on what is already gone) tries it again
/// and succeeds; its cache entry goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn teardown_tries_a_failed_del_once_more() {
    let node = Node::with_fake_networks("1.0.0", &["net"]);
    let cni = node.start().await;
    let pod = node.pod("podA");
    cni.setup_pod(&pod).await.unwrap();
    node.fake
        .fail_once("fake", "DEL", 999, "chain does not exist");
    cni.teardown_pod(&pod)
        .await
        .expect("the second DEL succeeds");
    assert_eq!(node.fake.calls_of("DEL").len(), 2);
    assert!(
        node.cache_entries().is_empty(),
        "{:?}",
        node.cache_entries()
    );
    cni.shutdown().await;
}

/// A stale attachment whose first DEL fails (a plugin that errs on what is already gone) is
/// retried once in the same GC; one whose DEL keeps failing is reported and stays cached. A 1.0.0
/// network, as Debian 12's plugins speak: no GC verb, whose libcni-style DELs would add calls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gc_tries_a_failed_stale_del_once_more() {
    let node = Node::with_fake_networks("1.0.0", &["net"]);
    let cni = node.start().await;
    let (a, b) = (node.pod("podA"), node.pod("podB"));
    cni.setup_pod(&a).await.unwrap();
    cni.setup_pod(&b).await.unwrap();

    node.fake
        .fail_once("fake", "DEL", 999, "chain does not exist");
    cni.gc(std::slice::from_ref(&a))
        .await
        .expect("the second DEL succeeds");
    assert_eq!(node.fake.calls_of("DEL").len(), 2);
    assert_eq!(node.cache_entries(), ["net-podA-eth0"]);

    node.fake.fail("fake", "DEL", 999, "still broken");
    let err = cni
        .gc(&[])
        .await
        .expect_err("a DEL that keeps failing is reported");
    assert!(err.to_string().contains("still broken"), "{err}");
    let ids: Vec<String> = node
        .fake
        .calls_of("DEL")
        .iter()
        .map(|c| c.var("CNI_CONTAINERID").to_owned())
        .collect();
    assert_eq!(
        ids,
        ["podB", "podB", "podA", "podA"],
        "tried twice, not more"
    );
    assert_eq!(
        node.cache_entries(),
        ["net-podA-eth0"],
        "kept for the next GC"
    );
    cni.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gc_of_a_1_0_0_network_runs_no_gc_verb() {
    let node = Node::with_fake_networks("1.0.0", &["net"]);
    let cni = gc_keeping_pod_a(&node).await;
    assert!(node.fake.calls_of("GC").is_empty());
    assert_eq!(
        node.cache_entries(),
        ["net-podA-eth0"],
        "stale ones still go"
    );
    cni.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gc_leaves_a_network_with_disable_gc_alone() {
    let node = Node::with_plugins(&["fake"]);
    let mut list = simple("net", "1.1.0");
    list["disableGC"] = json!(true);
    node.write_conf("10-net.conflist", &list);
    let cni = node.start().await;
    cni.setup_pod(&node.pod("podA")).await.unwrap();
    cni.setup_pod(&node.pod("podB")).await.unwrap();
    cni.gc(&[node.pod("podA")]).await.unwrap();
    assert!(node.fake.calls_of("GC").is_empty());
    assert!(
        node.fake.calls_of("DEL").is_empty(),
        "{:?}",
        node.fake.calls_of("DEL")
    );
    assert_eq!(node.cache_entries(), ["net-podA-eth0", "net-podB-eth0"]);
    cni.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gc_keeps_every_attachment_of_a_valid_pod() {
    let node = Node::with_fake_networks("1.1.0", &["a", "b"]);
    let cni = node.start().await;
    let pod = node.pod_on("p1", &["a", "b"]);
    cni.setup_pod(&pod).await.unwrap();
    cni.gc(std::slice::from_ref(&pod)).await.unwrap();
    assert!(node.fake.calls_of("DEL").is_empty());
    let mut seen: Vec<(String, Value)> = node
        .fake
        .calls_of("GC")
        .into_iter()
        .map(|c| {
            (
                c.network().to_owned(),
                listed(&c, "cni.dev/valid-attachments"),
            )
        })
        .collect();
    seen.sort_by(|x, y| x.0.cmp(&y.0));
    assert_eq!(
        seen,
        [
            (
                "a".to_owned(),
                json!([{"containerID": "p1", "ifname": "eth0"}])
            ),
            (
                "b".to_owned(),
                json!([{"containerID": "p1", "ifname": "eth1"}])
            ),
        ]
    );
    cni.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_status_verb_makes_the_node_not_ready() {
    let node = Node::with_fake_networks("1.1.0", &["net"]);
    let cni = node.start().await;
    let status = cni.status().await;
    assert!(status.ready, "{status:?}");
    assert_eq!(node.fake.calls_of("STATUS").len(), 1);

    node.fake.fail("fake", "STATUS", 50, "ipam pool not ready");
    let status = cni.status().await;
    assert!(!status.ready);
    assert_eq!(status.reason, NOT_READY_REASON);
    assert!(
        status.message.contains("ipam pool not ready"),
        "{}",
        status.message
    );
    assert!(status.message.contains("net"), "{}", status.message);
    cni.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_1_0_0_network_runs_no_status_verb() {
    let node = Node::with_fake_networks("1.0.0", &["net"]);
    node.fake.fail("fake", "STATUS", 50, "would fail");
    let cni = node.start().await;
    assert!(cni.status().await.ready);
    assert!(node.fake.calls_of("STATUS").is_empty());
    cni.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gc_tears_down_stale_attachments_of_networks_gone_from_disk() {
    let node = Node::with_plugins(&["fake"]);
    node.write_conf(
        "10-x.conflist",
        &conflist("x", "1.0.0", &[json!({"type": "fake", "marker": "from-x"})]),
    );
    let cni = node.start_with(|b| b.watch(ocicni::WatchPolicy::Off)).await;
    cni.setup_pod(&node.pod("podA")).await.unwrap();
    node.remove_conf("10-x.conflist");
    cni.reload().await.unwrap();
    assert_eq!(cni.default_network_name(), None);

    cni.gc(&[]).await.unwrap();
    let dels = node.fake.calls_of("DEL");
    assert_eq!(dels.len(), 1, "{dels:?}");
    assert_eq!(
        dels[0].stdin["marker"], "from-x",
        "the cached configuration ran"
    );
    assert_eq!(dels[0].var("CNI_NETNS"), "", "the namespace is gone");
    assert!(node.cache_entries().is_empty());
    cni.shutdown().await;
}

/// GC used to pass a stale attachment's cached namespace path to DEL whenever a namespace was
/// there. Paths get reused: a new pod pinned at the same path had its interface removed by the
/// DEL of the pod that used the path before. The DEL of a stale attachment whose path a live pod
/// now uses runs without entering it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root + netns: cargo xtask test"]
async fn gc_never_enters_a_recycled_namespace_path() {
    gc_of_a_pod_whose_path_was_recycled(false).await;
}

/// Also when the stale pod's DEL fails: no later step of the same GC runs it in the live pod's
/// namespace either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root + netns: cargo xtask test"]
async fn gc_never_enters_a_recycled_namespace_path_when_the_del_fails() {
    gc_of_a_pod_whose_path_was_recycled(true).await;
}

/// A pod "old" whose runtime lost it without a teardown; its namespace went and a new pod got
/// its path. GC keeping only "new" (by id) must DEL "old" outside that namespace.
async fn gc_of_a_pod_whose_path_was_recycled(fail_del: bool) {
    struct Release(std::path::PathBuf);
    impl Drop for Release {
        fn drop(&mut self) {
            let _ = ocicni::netns::remove_pinned(&self.0.join("pin"));
            let _ = ocicni::netns::release_dir(&self.0);
        }
    }
    let node = Node::with_fake_networks("1.0.0", &["net"]);
    let pins = tempfile::tempdir().unwrap();
    let _release = Release(pins.path().to_owned());
    let path = pins.path().join("pin");
    let cni = node.start().await;

    ocicni::netns::create_pinned(&path).unwrap();
    let mut old = node.pod("old");
    old.netns = path.display().to_string();
    cni.setup_pod(&old).await.unwrap();
    ocicni::netns::remove_pinned(&path).unwrap();
    ocicni::netns::create_pinned(&path).unwrap();
    let mut new = node.pod("new");
    new.netns = path.display().to_string();
    cni.setup_pod(&new).await.unwrap();

    if fail_del {
        node.fake.fail("fake", "DEL", 999, "cannot");
    }
    // As ocicnitool gc --valid new: ids only, the path comes from the new pod's cache entry.
    let mut by_id = node.pod("new");
    by_id.netns.clear();
    let outcome = cni.gc(std::slice::from_ref(&by_id)).await;
    assert_eq!(outcome.is_err(), fail_del, "{outcome:?}");
    let dels = node.fake.calls_of("DEL");
    assert_eq!(dels.len(), if fail_del { 2 } else { 1 }, "{dels:?}");
    for del in &dels {
        assert_eq!(del.var("CNI_CONTAINERID"), "old");
        assert_eq!(
            del.var("CNI_NETNS"),
            "",
            "the DEL of the stale pod must not run in the new pod's namespace"
        );
    }
    let mut want = vec!["net-new-eth0"];
    if fail_del {
        want.push("net-old-eth0");
    }
    assert_eq!(node.cache_entries(), want);
    cni.shutdown().await;
}

/// Without a cached result (another runtime set the pod up, or the cache was wiped), status reads
/// the interface inside the pod's namespace: its MAC and every address, the local one of a
/// point-to-point pair. Set-up brings the namespace's lo up. Both go through netlink.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root + netns: cargo xtask test"]
async fn without_a_cached_result_status_reads_the_namespace_and_set_up_brings_lo_up() {
    let ns = NamedNetns::new("status");
    ns.add_eth0("02:00:00:00:00:43");
    let node = Node::with_fake_networks("1.0.0", &["net"]);
    let cni = node.start_with(|b| b.loopback(true)).await;
    let mut pod = node.pod("p1");
    pod.netns = ns.path().display().to_string();

    let status = cni
        .pod_network_status(&pod)
        .await
        .expect("status from the namespace");
    assert_eq!(status.len(), 1);
    let result = &status[0].result;
    assert!(node.fake.calls_of("CHECK").is_empty() && node.fake.calls_of("ADD").is_empty());
    assert_eq!(result.interfaces.len(), 1);
    assert_eq!(result.interfaces[0].name, "eth0");
    assert_eq!(result.interfaces[0].mac, "02:00:00:00:00:43");
    assert_eq!(result.interfaces[0].sandbox, pod.netns);
    let mut ips: Vec<String> = result.ips.iter().map(|ip| ip.address.to_string()).collect();
    ips.sort();
    assert_eq!(
        ips,
        NamedNetns::ETH0_ADDRESSES,
        "the peer 10.78.0.9 is not ours"
    );
    assert!(result.ips.iter().all(|ip| ip.interface == Some(0)));

    assert!(!ns.ip(&["-o", "link", "show", "lo"]).contains(",UP"));
    cni.setup_pod(&pod).await.expect("set-up");
    let lo = ns.ip(&["-o", "link", "show", "lo"]);
    assert!(lo.contains(",UP"), "lo still down: {lo}");
    cni.teardown_pod(&pod).await.expect("teardown");
    cni.shutdown().await;
}

//! Setting pods up and tearing them down through the facade, with the fake executor: which
//! networks and interfaces, plugin order, rollback, concurrency, and what is left in the result
//! cache.

use std::collections::BTreeSet;

use ocicni::{CniPlugin, Error, NetworkSelection};
use serde_json::json;

use crate::fake_exec::{Node, conflist, plugin, wait_until};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_network_setup_and_teardown_run_plugins_forward_then_backward() {
    let node = Node::with_plugins(&["first", "second", "third"]);
    node.write_conf(
        "10-net.conflist",
        &conflist(
            "net",
            "1.0.0",
            &[plugin("first"), plugin("second"), plugin("third")],
        ),
    );
    let cni = node.start().await;
    let pod = node.pod("p1");
    let results = cni.setup_pod(&pod).await.unwrap();
    assert_eq!(results.len(), 1);
    assert_eq!(
        (results[0].network.as_str(), results[0].ifname.as_str()),
        ("net", "eth0")
    );
    let ip = results[0].result.ips[0].address;
    assert!(
        "10.88.0.0/16"
            .parse::<ipnet::IpNet>()
            .unwrap()
            .contains(&ip),
        "{ip}"
    );
    assert_eq!(node.fake.plugins_of("ADD"), ["first", "second", "third"]);
    // Chained plugins see the first result as prevResult.
    let second = &node.fake.calls_of("ADD")[1];
    assert_eq!(
        second.stdin["prevResult"]["ips"][0]["address"],
        ip.to_string()
    );
    assert_eq!(node.cache_entries(), ["net-p1-eth0"]);

    cni.teardown_pod(&pod).await.unwrap();
    assert_eq!(node.fake.plugins_of("DEL"), ["third", "second", "first"]);
    assert!(node.cache_entries().is_empty());
    cni.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explicit_networks_get_interfaces_in_order_and_keep_given_names() {
    let node = Node::with_fake_networks("1.0.0", &["a", "b", "c"]);
    let cni = node.start().await;

    let pod = node.pod_on("p1", &["a", "b"]);
    let results = cni.setup_pod(&pod).await.unwrap();
    let got: Vec<(&str, &str)> = results
        .iter()
        .map(|r| (r.network.as_str(), r.ifname.as_str()))
        .collect();
    assert_eq!(got, [("a", "eth0"), ("b", "eth1")]);
    let ips: BTreeSet<_> = results.iter().map(|r| r.result.ips[0].address).collect();
    assert_eq!(ips.len(), 2, "distinct addresses");

    let mut pod2 = node.pod("p2");
    pod2.networks = vec![
        NetworkSelection::new("a"),
        NetworkSelection {
            name: "b".into(),
            ifname: Some("eth0".into()),
        },
        NetworkSelection::new("c"),
    ];
    let results = cni.setup_pod(&pod2).await.unwrap();
    let got: Vec<(&str, &str)> = results
        .iter()
        .map(|r| (r.network.as_str(), r.ifname.as_str()))
        .collect();
    assert_eq!(got, [("a", "eth1"), ("b", "eth0"), ("c", "eth2")]);
    let ifnames: Vec<String> = node
        .fake
        .calls_of("ADD")
        .iter()
        .filter(|c| c.var("CNI_CONTAINERID") == "p2")
        .map(|c| format!("{}:{}", c.network(), c.var("CNI_IFNAME")))
        .collect();
    assert_eq!(ifnames, ["a:eth1", "b:eth0", "c:eth2"]);

    // Teardown naming the networks undoes them newest first.
    cni.teardown_pod(&pod2).await.unwrap();
    assert_eq!(
        node.fake.attachments_of("DEL"),
        ["c:eth2", "b:eth0", "a:eth1"]
    );
    assert_eq!(node.cache_entries(), ["a-p1-eth0", "b-p1-eth1"]);
    cni.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn teardown_without_networks_undoes_every_cached_attachment() {
    let node = Node::with_fake_networks("1.0.0", &["a", "b"]);
    let cni = node.start().await;
    let pod = node.pod_on("p1", &["a", "b"]);
    cni.setup_pod(&pod).await.unwrap();
    cni.setup_pod(&node.pod("other")).await.unwrap();
    assert_eq!(
        node.cache_entries(),
        ["a-other-eth0", "a-p1-eth0", "b-p1-eth1"]
    );

    // The runtime lost track of the networks: the cache knows.
    let bare = node.pod("p1");
    cni.teardown_pod(&bare).await.unwrap();
    let mut dels: Vec<String> = node
        .fake
        .calls_of("DEL")
        .iter()
        .map(|c| {
            format!(
                "{}:{}:{}",
                c.var("CNI_CONTAINERID"),
                c.network(),
                c.var("CNI_IFNAME")
            )
        })
        .collect();
    dels.sort();
    assert_eq!(dels, ["p1:a:eth0", "p1:b:eth1"]);
    assert_eq!(node.cache_entries(), ["a-other-eth0"]);

    // A second teardown has nothing left to undo and is fine.
    cni.teardown_pod(&bare).await.unwrap();
    cni.teardown_pod(&pod).await.unwrap();
    assert_eq!(node.cache_entries(), ["a-other-eth0"]);
    cni.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn teardown_of_a_vanished_namespace_passes_an_empty_netns() {
    let node = Node::with_fake_networks("1.0.0", &["net"]);
    let cni = node.start().await;
    let pod = node.pod("p1");
    assert!(!std::path::Path::new(&pod.netns).exists());
    cni.setup_pod(&pod).await.unwrap();
    assert_eq!(node.fake.calls_of("ADD")[0].var("CNI_NETNS"), pod.netns);

    cni.teardown_pod(&pod).await.unwrap();
    let del = &node.fake.calls_of("DEL")[0];
    assert!(del.env.contains_key("CNI_NETNS"), "the variable is passed");
    assert_eq!(
        del.var("CNI_NETNS"),
        "",
        "a namespace that is gone is not named"
    );
    assert!(node.cache_entries().is_empty());

    // Never set up at all: still fine, still no namespace.
    cni.teardown_pod(&node.pod("never")).await.unwrap();
    assert!(
        node.fake
            .calls_of("DEL")
            .iter()
            .all(|c| c.var("CNI_NETNS").is_empty())
    );
    cni.shutdown().await;
}

async fn rollback_case(parallel: bool) {
    let node = Node::with_plugins(&["good", "bad"]);
    node.write_conf("10-a.conflist", &conflist("a", "1.0.0", &[plugin("good")]));
    node.write_conf("20-b.conflist", &conflist("b", "1.0.0", &[plugin("bad")]));
    node.fake.fail("bad", "ADD", 11, "no addresses left");
    let cni = node.start_with(|b| b.parallel_attach(parallel)).await;
    let pod = node.pod_on("p1", &["a", "b"]);
    let err = cni.setup_pod(&pod).await.unwrap_err();
    let Error::Network {
        network,
        ifname,
        source,
        ..
    } = &err
    else {
        panic!("want one Network error, got {err}");
    };
    assert_eq!((network.as_str(), ifname.as_str()), ("b", "eth1"));
    match &**source {
        ocicni::cni_exec::Error::Plugin { error, plugin, .. } => {
            assert_eq!(plugin, "bad");
            assert_eq!(error.code, 11);
            assert_eq!(error.msg, "no addresses left");
        }
        other => panic!("want the plugin's error object, got {other}"),
    }
    let text = err.to_string();
    assert!(
        text.contains("no addresses left") && text.contains("network b (eth1)"),
        "{text}"
    );

    let dels: Vec<(String, String)> = node
        .fake
        .calls_of("DEL")
        .into_iter()
        .map(|c| (c.plugin.clone(), c.network().to_owned()))
        .collect();
    assert!(
        dels.contains(&("good".to_owned(), "a".to_owned())),
        "{dels:?}"
    );
    assert!(
        node.cache_entries().is_empty(),
        "{:?}",
        node.cache_entries()
    );
    cni.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_attachment_rolls_back_the_ones_made() {
    rollback_case(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_parallel_attachment_rolls_back_the_ones_made() {
    rollback_case(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn twenty_pods_at_once() {
    let node = Node::with_fake_networks("1.0.0", &["net"]);
    let cni = node.start().await;
    let pods: Vec<_> = (0..20).map(|i| node.pod(&format!("pod{i:02}"))).collect();
    let tasks: Vec<_> = pods
        .iter()
        .cloned()
        .map(|pod| {
            let cni = cni.clone();
            tokio::spawn(async move { cni.setup_pod(&pod).await })
        })
        .collect();
    let mut ips = BTreeSet::new();
    for task in tasks {
        let results = task.await.unwrap().unwrap();
        ips.insert(results[0].result.ips[0].address);
    }
    assert_eq!(ips.len(), 20, "distinct results");
    let want: Vec<String> = pods.iter().map(|p| format!("net-{}-eth0", p.id)).collect();
    assert_eq!(node.cache_entries(), want);

    let tasks: Vec<_> = pods
        .into_iter()
        .map(|pod| {
            let cni = cni.clone();
            tokio::spawn(async move { cni.teardown_pod(&pod).await })
        })
        .collect();
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    assert!(
        node.cache_entries().is_empty(),
        "{:?}",
        node.cache_entries()
    );
    assert_eq!(node.fake.calls_of("DEL").len(), 20);
    cni.shutdown().await;
}

/// Issue #21: the lock directory held one file per pod ever created. After its teardown, a pod
/// has no lock file: only the GC lock's stays, however many pods came and went, at once or not.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pods_torn_down_leave_no_lock_file() {
    let node = Node::with_fake_networks("1.0.0", &["net"]);
    let cni = node.start().await;
    let locks = || test_support::fs::file_names(&node.run_dir().join("locks"));
    for round in 0..3 {
        let pods: Vec<_> = (0..10)
            .map(|i| node.pod(&format!("r{round}-pod{i}")))
            .collect();
        let cycles: Vec<_> = pods
            .into_iter()
            .map(|pod| {
                let cni = cni.clone();
                tokio::spawn(async move {
                    cni.setup_pod(&pod).await?;
                    cni.teardown_pod(&pod).await
                })
            })
            .collect();
        for cycle in cycles {
            cycle.await.unwrap().unwrap();
        }
        assert_eq!(locks(), ["gc.lock"], "after round {round}");
    }
    // A teardown of a pod that was never set up (a kubelet's retry) leaves nothing either.
    cni.teardown_pod(&node.pod("never")).await.unwrap();
    assert_eq!(locks(), ["gc.lock"]);
    assert!(node.cache_entries().is_empty());
    cni.shutdown().await;
}

/// Two runtimes sharing a run directory (crio-lite and ocicnitool) exclude each other through
/// the lock files alone, however often those files come and go: a teardown asked for by one
/// while the other sets the pod up waits for the set-up, and nothing is left after the last.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_runtimes_on_one_pod_take_turns_and_leave_no_lock_file() {
    let node = Node::with_fake_networks("1.0.0", &["net"]);
    node.fake
        .hang("fake", "ADD", std::time::Duration::from_millis(50));
    let (a, b) = (node.start().await, node.start().await);
    let pod = node.pod("p1");
    for round in 1..=5 {
        let setup = {
            let (a, pod) = (a.clone(), pod.clone());
            tokio::spawn(async move { a.setup_pod(&pod).await })
        };
        let give_up = tokio::time::Instant::now() + crate::fake_exec::DEADLINE;
        while node.fake.calls_of("ADD").len() < round {
            assert!(tokio::time::Instant::now() < give_up, "ADD never started");
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        b.teardown_pod(&pod).await.unwrap();
        setup.await.unwrap().unwrap();
        let commands = node.fake.pod_commands();
        assert_eq!(
            commands[commands.len() - 2..],
            ["ADD", "DEL"],
            "{commands:?}"
        );
        assert!(
            node.cache_entries().is_empty(),
            "the DEL saw the ADD's entry"
        );
        assert_eq!(
            test_support::fs::file_names(&node.run_dir().join("locks")),
            ["gc.lock"]
        );
    }
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn teardown_uses_the_cached_config_of_a_network_no_longer_on_disk() {
    let node = Node::with_plugins(&["fake", "keep"]);
    node.write_conf(
        "10-x.conflist",
        &conflist("x", "1.0.0", &[json!({"type": "fake", "marker": "from-x"})]),
    );
    node.write_conf("20-y.conflist", &conflist("y", "1.0.0", &[plugin("keep")]));
    let cni = node.start().await;
    let pod = node.pod_on("p1", &["x"]);
    cni.setup_pod(&pod).await.unwrap();

    node.remove_conf("10-x.conflist");
    wait_until(&cni, "x to disappear", |c| {
        c.networks()
            .iter()
            .all(|r| r.network.as_deref() != Some("x"))
    })
    .await;

    cni.teardown_pod(&node.pod("p1")).await.unwrap();
    let dels = node.fake.calls_of("DEL");
    assert_eq!(dels.len(), 1, "{dels:?}");
    assert_eq!(dels[0].plugin, "fake");
    assert_eq!(dels[0].stdin["name"], "x");
    assert_eq!(dels[0].stdin["marker"], "from-x");
    assert_eq!(dels[0].var("CNI_IFNAME"), "eth0");
    assert!(node.cache_entries().is_empty());
    cni.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn teardown_waits_for_a_setup_of_the_same_pod() {
    let node = Node::with_fake_networks("1.0.0", &["net"]);
    node.fake
        .hang("fake", "ADD", std::time::Duration::from_millis(300));
    let cni = node.start().await;
    let pod = node.pod("p1");
    let setup = {
        let (cni, pod) = (cni.clone(), pod.clone());
        tokio::spawn(async move { cni.setup_pod(&pod).await })
    };
    // Teardown is called while ADD is still running; the pod lock orders it after.
    wait_until_add_started(&node).await;
    cni.teardown_pod(&pod).await.unwrap();
    setup.await.unwrap().unwrap();
    assert_eq!(node.fake.pod_commands(), ["ADD", "DEL"]);
    assert!(
        node.cache_entries().is_empty(),
        "the DEL saw the ADD's cache entry"
    );
    cni.shutdown().await;
}

async fn wait_until_add_started(node: &Node) {
    let give_up = tokio::time::Instant::now() + crate::fake_exec::DEADLINE;
    while node.fake.calls_of("ADD").is_empty() {
        assert!(tokio::time::Instant::now() < give_up, "ADD never started");
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_dir_holds_the_pending_entry_and_the_pod_lock_until_teardown() {
    let node = Node::with_fake_networks("1.0.0", &["net"]);
    node.fake
        .hang("fake", "ADD", std::time::Duration::from_millis(300));
    let cni = node.start().await;
    assert_eq!(cni.run_dir(), node.run_dir());
    let files = |sub: &str| test_support::fs::file_names(&node.run_dir().join(sub));
    let setup = {
        let (cni, pod) = (cni.clone(), node.pod("p1"));
        tokio::spawn(async move { cni.setup_pod(&pod).await })
    };
    // While ADD runs, its entry is pending in the run dir; the results dir holds at most the
    // final entry's temporary file, made while the plugins run, which readers skip.
    wait_until_add_started(&node).await;
    let during = node.cache_entries();
    assert!(
        during.contains(&"pending/net-p1-eth0".to_owned()),
        "{during:?}"
    );
    assert!(
        during
            .iter()
            .filter(|n| !n.starts_with("pending/"))
            .all(|n| n.starts_with(".net-p1-eth0.tmp-")),
        "{during:?}"
    );
    assert_eq!(
        cni.cni().cache().list(None).unwrap().len(),
        1,
        "only the pending entry is listed"
    );
    setup.await.unwrap().unwrap();
    assert_eq!(node.cache_entries(), ["net-p1-eth0"]);
    // The pod's lock file stays for its teardown, which removes it; the GC lock file stays.
    assert_eq!(files("locks"), ["ctr@p1.lock", "gc.lock"]);
    cni.setup_pod(&node.pod("p2")).await.unwrap();
    cni.teardown_pod(&node.pod("p1")).await.unwrap();
    assert_eq!(files("locks"), ["ctr@p2.lock", "gc.lock"]);
    // GC sweeps the lock files of pods that are gone along with their attachments.
    cni.setup_pod(&node.pod("p3")).await.unwrap();
    cni.gc(&[node.pod("p3")]).await.unwrap();
    assert_eq!(files("locks"), ["ctr@p3.lock", "gc.lock"]);
    assert_eq!(node.cache_entries(), ["net-p3-eth0"]);
    cni.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loopback_failure_rolls_back_the_networks_attached_beside_it() {
    let node = Node::with_fake_networks("1.0.0", &["net"]);
    let cni = node.start_with(|b| b.loopback(true)).await;
    // The fake plugin never enters the namespace, so only loopback notices it does not exist.
    let err = cni.setup_pod(&node.pod("p1")).await.unwrap_err();
    assert!(
        matches!(&err, Error::Netns { pod, .. } if pod == "p1"),
        "{err:?}"
    );
    assert_eq!(node.fake.pod_commands(), ["ADD", "DEL"], "rolled back");
    assert!(node.cache_entries().is_empty());
    cni.shutdown().await;
}

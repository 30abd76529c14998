//! The facade's view of the configuration: which network is the default, what is usable, and how
//! it follows files and plugins that come and go (fake executor, inotify watcher).

use ocicni::{
    BuiltinNetwork, CniPlugin, Error, InitSettings, NOT_READY_REASON, Ocicni, WatchPolicy,
};

use crate::fake_exec::{Node, conflist, plugin, plugin_with_caps, simple, wait_for_default};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_is_the_first_usable_network_in_byte_order() {
    let node = Node::with_plugins(&["fake"]);
    node.write_conf("5-b.conflist", &simple("b", "1.0.0"));
    node.write_conf("10-a.conflist", &simple("a", "1.0.0"));
    let cni = node.start().await;
    assert_eq!(cni.default_network_name().as_deref(), Some("a"));
    let reports = cni.networks();
    let defaults: Vec<_> = reports.iter().filter(|r| r.default).collect();
    assert_eq!(defaults.len(), 1, "{reports:?}");
    assert_eq!(defaults[0].network.as_deref(), Some("a"));
    assert!(reports.iter().all(|r| r.verdict == "loaded"), "{reports:?}");
    cni.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_default_wins_even_when_it_sorts_later() {
    let node = Node::with_fake_networks("1.0.0", &["a"]);
    node.write_conf("5-b.conflist", &simple("b", "1.0.0"));
    let cni = node.start_with(|b| b.default_network("b")).await;
    assert_eq!(cni.default_network_name().as_deref(), Some("b"));
    let results = cni.setup_pod(&node.pod("p1")).await.unwrap();
    assert_eq!(results[0].network, "b");
    assert!(cni.status().await.ready);
    cni.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_default_that_is_absent_means_no_default_and_not_ready() {
    let node = Node::with_fake_networks("1.0.0", &["a"]);
    let cni = node.start_with(|b| b.default_network("nope")).await;
    assert_eq!(cni.default_network_name(), None);
    let status = cni.status().await;
    assert!(!status.ready);
    assert_eq!(status.reason, NOT_READY_REASON);
    let err = cni.setup_pod(&node.pod("p1")).await.unwrap_err();
    assert!(matches!(err, Error::NoNetwork { .. }), "{err}");
    // Other networks can still be asked for by name.
    let pod = node.pod_on("p2", &["a"]);
    assert_eq!(cni.setup_pod(&pod).await.unwrap()[0].network, "a");
    cni.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_changes_when_an_earlier_sorting_file_appears() {
    let node = Node::with_plugins(&["fake"]);
    node.write_conf("20-late.conflist", &simple("late", "1.0.0"));
    let cni = node.start().await;
    assert_eq!(cni.default_network_name().as_deref(), Some("late"));
    node.write_conf("10-early.conflist", &simple("early", "1.0.0"));
    wait_for_default(&cni, Some("early")).await;
    let results = cni.setup_pod(&node.pod("p1")).await.unwrap();
    assert_eq!(results[0].network, "early");
    cni.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configuration_written_after_start_makes_the_node_ready() {
    let node = Node::with_plugins(&["fake"]);
    let cni = node.start().await;
    let status = cni.status().await;
    assert!(!status.ready);
    assert_eq!(status.reason, "NetworkPluginNotReady");
    let dir = node.conf_dir().display().to_string();
    assert!(status.message.contains(&dir), "{}", status.message);
    assert!(
        status
            .message
            .contains("network provider may not have started"),
        "{}",
        status.message
    );

    let err = cni.setup_pod(&node.pod("p1")).await.unwrap_err();
    match &err {
        Error::NoNetwork { dir } => assert_eq!(dir, node.conf_dir()),
        other => panic!("want NoNetwork, got {other}"),
    }
    assert!(err.to_string().contains(&dir), "{err}");
    assert!(node.fake.pod_calls().is_empty(), "nothing ran");

    node.write_conf("10-net.conflist", &simple("net", "1.0.0"));
    wait_for_default(&cni, Some("net")).await;
    assert!(cni.status().await.ready);
    let results = cni.setup_pod(&node.pod("p1")).await.unwrap();
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].ifname, "eth0");
    cni.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_network_becomes_usable_when_its_plugin_is_installed() {
    let node = Node::new();
    node.write_conf("10-net.conflist", &simple("net", "1.0.0"));
    let cni = node.start().await;
    assert_eq!(cni.default_network_name(), None);
    let reports = cni.networks();
    assert_eq!(reports.len(), 1);
    assert_eq!(reports[0].verdict, "unusable");
    let reason = reports[0].reason.clone().unwrap_or_default();
    assert!(reason.contains("fake"), "reason names the plugin: {reason}");
    assert!(!cni.status().await.ready);

    node.install("fake");
    wait_for_default(&cni, Some("net")).await;
    let reports = cni.networks();
    assert_eq!(reports[0].verdict, "loaded");
    assert!(reports[0].default);
    assert!(cni.status().await.ready);
    cni.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_and_rewriting_the_default_file() {
    let node = Node::with_fake_networks("1.0.0", &["net"]);
    let cni = node.start().await;
    assert_eq!(cni.default_network_name().as_deref(), Some("net"));
    node.remove_conf("10-net.conflist");
    wait_for_default(&cni, None).await;
    assert!(!cni.status().await.ready);
    node.write_conf("10-net.conflist", &simple("net", "1.0.0"));
    wait_for_default(&cni, Some("net")).await;
    assert!(cni.status().await.ready);
    cni.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_duplicate_names_the_first_file_wins() {
    let node = Node::with_plugins(&["fake", "other"]);
    node.write_conf("10-dup.conflist", &simple("dup", "1.0.0"));
    node.write_conf(
        "20-dup.conflist",
        &conflist("dup", "1.0.0", &[plugin("other")]),
    );
    let cni = node.start().await;
    let reports = cni.networks();
    assert_eq!(reports.len(), 2, "{reports:?}");
    assert!(
        reports[0]
            .file
            .as_ref()
            .unwrap()
            .ends_with("10-dup.conflist")
    );
    assert_eq!(reports[0].verdict, "loaded");
    assert!(reports[0].default);
    assert_eq!(reports[1].verdict, "shadowed");
    assert!(!reports[1].default);
    let reason = reports[1].reason.clone().unwrap_or_default();
    assert!(reason.contains("10-dup.conflist"), "{reason}");

    cni.setup_pod(&node.pod("p1")).await.unwrap();
    let adds = node.fake.calls_of("ADD");
    assert_eq!(adds.len(), 1);
    assert_eq!(adds[0].plugin, "fake", "the first file's plugin ran");
    cni.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_named_network_not_yet_loaded_triggers_one_reload() {
    let node = Node::with_fake_networks("1.0.0", &["a"]);
    let cni = node.start_with(|b| b.watch(WatchPolicy::Off)).await;
    node.write_conf("20-b.conflist", &simple("b", "1.0.0"));
    let before = cni.generation();
    let pod = node.pod_on("p1", &["b"]);
    let results = cni.setup_pod(&pod).await.unwrap();
    assert_eq!(results[0].network, "b");
    assert_eq!(cni.generation(), before + 1, "exactly one reload");

    let pod = node.pod_on("p2", &["ghost"]);
    let err = cni.setup_pod(&pod).await.unwrap_err();
    match &err {
        Error::NetworkNotFound { name, dir } => {
            assert_eq!(name, "ghost");
            assert_eq!(dir, node.conf_dir());
        }
        other => panic!("want NetworkNotFound, got {other}"),
    }
    let text = err.to_string();
    assert!(
        text.contains("ghost") && text.contains(&node.conf_dir().display().to_string()),
        "{text}"
    );
    assert!(
        node.fake
            .calls_of("ADD")
            .iter()
            .all(|c| c.var("CNI_CONTAINERID") != "p2")
    );
    cni.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capabilities_are_the_union_of_what_plugins_declare() {
    let node = Node::with_plugins(&["fake", "portmap", "bandwidth"]);
    node.write_conf(
        "10-a.conflist",
        &conflist(
            "a",
            "1.0.0",
            &[
                plugin("fake"),
                plugin_with_caps("portmap", &["portMappings"]),
            ],
        ),
    );
    node.write_conf(
        "20-b.conflist",
        &conflist(
            "b",
            "1.0.0",
            &[
                plugin_with_caps("fake", &["ips", "portMappings"]),
                plugin_with_caps("bandwidth", &["bandwidth"]),
            ],
        ),
    );
    let cni = node.start().await;
    let mut caps = cni.capabilities();
    caps.sort();
    assert_eq!(caps, ["bandwidth", "ips", "portMappings"]);
    cni.shutdown().await;
}

/// A node with the plugins of the built-in network and none configured, and the facade on it with
/// that network as its built-in default.
async fn start_builtin() -> (Node, Ocicni) {
    let node = Node::with_plugins(&["bridge", "host-local", "portmap"]);
    let builtin = BuiltinNetwork {
        name: "builtin-net".into(),
        bridge: "cni-test0".into(),
        subnet: "10.123.0.0/16".parse().unwrap(),
        ..BuiltinNetwork::default()
    };
    let cni = node.start_with(|b| b.builtin_default(Some(builtin))).await;
    (node, cni)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_builtin_network_is_the_default_of_an_empty_directory() {
    let (node, cni) = start_builtin().await;
    assert_eq!(cni.default_network_name().as_deref(), Some("builtin-net"));
    let reports = cni.networks();
    assert_eq!(reports.len(), 1, "{reports:?}");
    assert_eq!(reports[0].verdict, "builtin");
    assert!(reports[0].default);
    assert!(reports[0].file.is_none());
    assert!(cni.status().await.ready);

    let results = cni.setup_pod(&node.pod("p1")).await.unwrap();
    assert_eq!(results[0].network, "builtin-net");
    let adds = node.fake.calls_of("ADD");
    let bridge = adds
        .iter()
        .find(|c| c.plugin == "bridge")
        .expect("bridge ran");
    assert_eq!(bridge.stdin["type"], "bridge");
    assert_eq!(bridge.stdin["bridge"], "cni-test0");
    assert_eq!(bridge.stdin["ipam"]["type"], "host-local");
    assert_eq!(
        bridge.stdin["ipam"]["ranges"][0][0]["subnet"],
        "10.123.0.0/16"
    );
    assert!(adds.iter().any(|c| c.plugin == "portmap"));

    // A real configuration takes over from the built-in network.
    node.install("fake");
    node.write_conf("10-net.conflist", &simple("net", "1.0.0"));
    wait_for_default(&cni, Some("net")).await;
    assert!(cni.networks().iter().all(|r| r.verdict != "builtin"));
    cni.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_settings_shape_the_builtin_bridge() {
    let (node, cni) = start_builtin().await;
    cni.init(InitSettings {
        mtu: Some(1400),
        hairpin_mode: Some(false),
        ..InitSettings::default()
    })
    .await;
    assert_eq!(cni.init_settings().mtu, Some(1400));
    cni.setup_pod(&node.pod("p1")).await.unwrap();
    let bridge = node.fake.call_to("bridge", "ADD").expect("bridge ran");
    assert_eq!(bridge.stdin["mtu"], 1400);
    assert_eq!(bridge.stdin["hairpinMode"], false);
    cni.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_shutdown_the_last_configuration_still_serves() {
    let node = Node::with_fake_networks("1.0.0", &["net"]);
    let cni = node.start().await;
    cni.shutdown().await;
    cni.shutdown().await;
    cni.reload().await.unwrap();
    assert_eq!(cni.default_network_name().as_deref(), Some("net"));
    let results = cni.setup_pod(&node.pod("p1")).await.unwrap();
    assert_eq!(results[0].network, "net");
    cni.teardown_pod(&node.pod("p1")).await.unwrap();
    assert!(node.cache_entries().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_picks_up_changes_without_a_watcher() {
    let node = Node::with_plugins(&["fake"]);
    let cni = node.start_with(|b| b.watch(WatchPolicy::Off)).await;
    assert_eq!(cni.default_network_name(), None);
    node.write_conf("10-net.conflist", &simple("net", "1.0.0"));
    cni.reload().await.unwrap();
    assert_eq!(cni.default_network_name().as_deref(), Some("net"));
    cni.shutdown().await;
}

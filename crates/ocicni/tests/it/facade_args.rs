//! What plugins are told about a pod through the facade (fake executor): CNI_ARGS by policy,
//! capability arguments in `runtimeConfig`, and the node's pod CIDR.

use std::collections::BTreeMap;

use ocicni::cni_types::capabilities::{Bandwidth, IpRange, PortMapping};
use ocicni::{CniArgsPolicy, CniPlugin, Error, Ocicni, RuntimeConfig};
use serde_json::json;

use crate::fake_exec::{Node, conflist, plugin, plugin_with_caps};

/// A node with the network `net` and the facade on it passing Kubernetes CNI_ARGS.
async fn start_kubernetes() -> (Node, Ocicni) {
    let node = Node::with_fake_networks("1.0.0", &["net"]);
    let cni = node
        .start_with(|b| b.cni_args(CniArgsPolicy::Kubernetes))
        .await;
    (node, cni)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubernetes_cni_args_are_exact() {
    let (node, cni) = start_kubernetes().await;
    let mut pod = node.pod("id");
    pod.name = "name".into();
    pod.uid = "uid".into();
    pod.extra_args = vec![("FOO".into(), "bar".into())];
    pod.runtime_config.insert(
        "net".into(),
        RuntimeConfig {
            ip: Some("10.88.5.5".parse().unwrap()),
            mac: Some("c2:11:22:33:44:55".into()),
            ..RuntimeConfig::default()
        },
    );
    cni.setup_pod(&pod).await.unwrap();
    let add = &node.fake.calls_of("ADD")[0];
    assert_eq!(
        add.var("CNI_ARGS"),
        "IgnoreUnknown=1;K8S_POD_NAMESPACE=ns;K8S_POD_NAME=name;K8S_POD_INFRA_CONTAINER_ID=id;\
         K8S_POD_UID=uid;FOO=bar;IP=10.88.5.5;MAC=c2:11:22:33:44:55"
    );
    assert_eq!(add.var("CNI_CONTAINERID"), "id");
    assert_eq!(add.var("CNI_IFNAME"), "eth0");
    assert_eq!(add.var("CNI_NETNS"), pod.netns);
    assert_eq!(
        add.var("CNI_PATH"),
        node.plugins.path().display().to_string()
    );
    cni.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_cni_args_carry_no_kubernetes_keys() {
    let node = Node::with_fake_networks("1.0.0", &["net"]);
    let cni = node.start().await;
    let mut pod = node.pod("id");
    pod.extra_args = vec![("FOO".into(), "bar".into())];
    cni.setup_pod(&pod).await.unwrap();
    assert_eq!(node.fake.calls_of("ADD")[0].var("CNI_ARGS"), "FOO=bar");

    cni.setup_pod(&node.pod("bare")).await.unwrap();
    assert_eq!(node.fake.calls_of("ADD")[1].var("CNI_ARGS"), "");
    cni.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn separators_in_cni_args_are_rejected_before_any_plugin_runs() {
    let (node, cni) = start_kubernetes().await;
    let cases: [(&str, &str, &str); 4] = [
        ("A;B", "1", "key"),
        ("A=B", "1", "key"),
        ("A", "x;y", "value"),
        ("A", "x=y", "value"),
    ];
    for (key, value, what) in cases {
        let mut pod = node.pod("p1");
        pod.extra_args = vec![(key.into(), value.into())];
        let err = cni.setup_pod(&pod).await.unwrap_err();
        assert!(matches!(err, Error::InvalidPod { .. }), "{err}");
        let text = err.to_string();
        assert!(text.contains("p1") && text.contains(what), "{text}");
    }
    let mut pod = node.pod("p2");
    pod.name = "we;b".into();
    assert!(matches!(
        cni.setup_pod(&pod).await,
        Err(Error::InvalidPod { .. })
    ));
    assert!(
        node.fake.pod_calls().is_empty(),
        "{:?}",
        node.fake.pod_calls()
    );
    assert!(node.cache_entries().is_empty());
    cni.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runtime_config_holds_only_declared_capabilities() {
    let node = Node::with_plugins(&["fake", "portmap", "everything"]);
    let all = [
        "portMappings",
        "bandwidth",
        "ipRanges",
        "cgroupPath",
        "io.kubernetes.cri.pod-annotations",
        "aliases",
        "mac",
        "ips",
    ];
    node.write_conf(
        "10-net.conflist",
        &conflist(
            "net",
            "1.0.0",
            &[
                plugin("fake"),
                plugin_with_caps("portmap", &["portMappings"]),
                plugin_with_caps("everything", &all),
            ],
        ),
    );
    let cni = node.start().await;
    let mut pod = node.pod("p1");
    pod.aliases.insert("net".into(), vec!["web".into()]);
    pod.aliases.insert("elsewhere".into(), vec!["nope".into()]);
    pod.runtime_config.insert(
        "net".into(),
        RuntimeConfig {
            ip: Some("10.88.7.7".parse().unwrap()),
            mac: Some("c2:00:00:00:00:07".into()),
            port_mappings: vec![PortMapping {
                host_port: 8080,
                container_port: 80,
                protocol: "tcp".into(),
                host_ip: None,
            }],
            bandwidth: Some(Bandwidth {
                ingress_rate: 1000,
                ingress_burst: 2000,
                egress_rate: 3000,
                egress_burst: 4000,
            }),
            ip_ranges: vec![vec![IpRange {
                subnet: "10.9.0.0/16".parse().unwrap(),
                range_start: None,
                range_end: None,
                gateway: None,
            }]],
            cgroup_path: Some("/kubepods/p1".into()),
            pod_annotations: BTreeMap::from([("a".to_owned(), "b".to_owned())]),
        },
    );
    cni.setup_pod(&pod).await.unwrap();
    let by = |p: &str| node.fake.call_to(p, "ADD").unwrap().stdin;

    assert!(by("fake").get("runtimeConfig").is_none(), "{}", by("fake"));
    assert_eq!(
        by("portmap")["runtimeConfig"],
        json!({"portMappings": [{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}]})
    );
    let rc = by("everything")["runtimeConfig"].clone();
    let mut keys: Vec<&str> = rc.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    let mut want = all.to_vec();
    want.sort_unstable();
    assert_eq!(keys, want, "{rc}");
    assert_eq!(rc["aliases"], json!({"net": ["web"]}));
    assert_eq!(rc["mac"], "c2:00:00:00:00:07");
    assert_eq!(rc["ips"], json!(["10.88.7.7/32"]));
    assert_eq!(rc["ipRanges"], json!([[{"subnet": "10.9.0.0/16"}]]));
    assert_eq!(rc["cgroupPath"], "/kubepods/p1");
    assert_eq!(rc["io.kubernetes.cri.pod-annotations"], json!({"a": "b"}));
    assert_eq!(
        rc["bandwidth"],
        json!({"ingressRate": 1000, "ingressBurst": 2000, "egressRate": 3000, "egressBurst": 4000})
    );
    cni.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pod_cidr_reaches_plugins_declaring_ip_ranges() {
    let node = Node::with_plugins(&["fake", "ipam"]);
    node.write_conf(
        "10-net.conflist",
        &conflist(
            "net",
            "1.0.0",
            &[plugin("fake"), plugin_with_caps("ipam", &["ipRanges"])],
        ),
    );
    let cni = node.start().await;
    let ranges_of = |call: &crate::fake_exec::Call| call.stdin["runtimeConfig"]["ipRanges"].clone();
    let ipam_adds = || -> Vec<_> {
        node.fake
            .calls_of("ADD")
            .into_iter()
            .filter(|c| c.plugin == "ipam")
            .collect()
    };

    cni.set_pod_cidr(Some("10.244.1.0/24".parse().unwrap()))
        .await;
    cni.setup_pod(&node.pod("p1")).await.unwrap();
    assert_eq!(
        ranges_of(&ipam_adds()[0]),
        json!([[{"subnet": "10.244.1.0/24"}]])
    );
    let fake_add = node.fake.call_to("fake", "ADD").unwrap();
    assert!(fake_add.stdin.get("runtimeConfig").is_none());

    // The pod's own ranges win.
    let mut pod = node.pod("p2");
    pod.runtime_config.insert(
        "net".into(),
        RuntimeConfig {
            ip_ranges: vec![vec![IpRange {
                subnet: "10.9.0.0/16".parse().unwrap(),
                range_start: None,
                range_end: None,
                gateway: None,
            }]],
            ..RuntimeConfig::default()
        },
    );
    cni.setup_pod(&pod).await.unwrap();
    assert_eq!(
        ranges_of(&ipam_adds()[1]),
        json!([[{"subnet": "10.9.0.0/16"}]])
    );

    // kubelet's event does the same as set_pod_cidr.
    let details = BTreeMap::from([("pod-cidr".to_owned(), "10.244.2.0/24".to_owned())]);
    cni.event("pod-cidr-change", &details).await.unwrap();
    assert_eq!(cni.pod_cidr(), Some("10.244.2.0/24".parse().unwrap()));
    cni.setup_pod(&node.pod("p3")).await.unwrap();
    assert_eq!(
        ranges_of(&ipam_adds()[2]),
        json!([[{"subnet": "10.244.2.0/24"}]])
    );

    let bad = BTreeMap::from([("pod-cidr".to_owned(), "10.244.2.0/33".to_owned())]);
    let err = cni.event("pod-cidr-change", &bad).await.unwrap_err();
    assert!(matches!(err, Error::InvalidEvent { .. }), "{err}");
    assert!(err.to_string().contains("10.244.2.0/33"), "{err}");
    assert_eq!(
        cni.pod_cidr(),
        Some("10.244.2.0/24".parse().unwrap()),
        "unchanged"
    );
    cni.event("some-other-event", &BTreeMap::new())
        .await
        .unwrap();

    cni.set_pod_cidr(None).await;
    cni.setup_pod(&node.pod("p4")).await.unwrap();
    assert!(ipam_adds()[3].stdin.get("runtimeConfig").is_none());
    cni.shutdown().await;
}

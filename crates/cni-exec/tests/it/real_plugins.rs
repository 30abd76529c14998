//! Debian's real plugins (bridge, host-local, portmap, tuning, bandwidth) through the public API,
//! inside namespaces the test creates: the truth the fakes stand in for.

use cni_exec::{Error, RuntimeConf};
use cni_types::CapabilityArgs;
use ipnet::Ipv4Net;
use serde_json::{Value, json};
use test_support::netns::NetNs;
use test_support::unique;

use crate::realnet::Node;
use crate::support::network;

fn plugins(node: &Node, bridge: &str, subnet: &str, with_portmap: bool) -> Vec<Value> {
    let mut list = vec![json!({
        "type": "bridge",
        "bridge": bridge,
        "isGateway": true,
        "ipMasq": true,
        "hairpinMode": true,
        "ipam": {
            "type": "host-local",
            "dataDir": node.ipam_dir(),
            "ranges": [[{"subnet": subnet}]],
            "routes": [{"dst": "0.0.0.0/0"}]
        }
    })];
    if with_portmap {
        list.push(json!({"type": "portmap", "capabilities": {"portMappings": true}}));
    }
    list.push(json!({"type": "tuning", "sysctl": {"net.ipv4.conf.eth0.accept_redirects": "0"}}));
    list.push(json!({"type": "bandwidth", "capabilities": {"bandwidth": true}}));
    list
}

fn runtime(container: &str, pod: &NetNs, host_port: u16) -> RuntimeConf {
    let caps: CapabilityArgs = serde_json::from_value(json!({
        "portMappings": [{"hostPort": host_port, "containerPort": 80, "protocol": "tcp"}],
        "bandwidth": {"ingressRate": 100_000_000, "ingressBurst": 1_000_000,
                      "egressRate": 100_000_000, "egressBurst": 1_000_000}
    }))
    .expect("capability args");
    RuntimeConf::new(container, pod.path().display().to_string(), "eth0")
        .with_arg("IgnoreUnknown", "1")
        .with_arg("K8S_POD_NAME", container)
        .with_capability_args(caps)
}

/// No veth, lease, iptables rule or cache entry of the pods is left in the node.
async fn assert_nothing_left(node: &Node, name: &str, ids: &[String]) {
    let veths: Vec<String> = node
        .ns
        .links()
        .into_iter()
        .filter(|l| l.starts_with("veth"))
        .collect();
    assert!(veths.is_empty(), "veths left in the node: {veths:?}");
    assert!(
        node.leases(name).is_empty(),
        "leases left: {:?}",
        node.leases(name)
    );
    let rules = node.ns.iptables();
    for id in ids {
        assert!(
            !rules.contains(id.as_str()),
            "iptables rules mention {id}:\n{rules}"
        );
    }
    assert!(node.cni.cached_attachments(None).await.unwrap().is_empty());
}

#[tokio::test]
#[ignore = "needs root + netns: cargo xtask test"]
async fn bridge_chain_add_check_del() {
    let node = Node::new();
    let n = unique();
    let pid = std::process::id();
    let bridge = format!("cxb{}{n}", pid % 100_000);
    let subnet: Ipv4Net = format!("10.{}.{}.0/24", 100 + n % 100, pid % 250)
        .parse()
        .unwrap();
    let name = format!("realnet-{pid}-{n}");
    let full = network(
        &name,
        "1.0.0",
        plugins(&node, &bridge, &subnet.to_string(), true),
    );
    let without_portmap = network(
        &name,
        "1.0.0",
        plugins(&node, &bridge, &subnet.to_string(), false),
    );
    let caps = node.cni.validate_network_list(&full).await.expect("valid");
    assert_eq!(caps, ["portMappings", "bandwidth"]);

    let pods = [NetNs::new("cxpod"), NetNs::new("cxpod")];
    let ids = [format!("rp{pid}x{n}a"), format!("rp{pid}x{n}b")];
    let rts = [
        runtime(&ids[0], &pods[0], 18080),
        runtime(&ids[1], &pods[1], 18081),
    ];
    let mut ips = Vec::new();
    for (pod, rt) in pods.iter().zip(&rts) {
        let result = node
            .cni
            .add_network_list(&full, rt)
            .await
            .expect("ADD succeeds");
        let ip = result
            .ips_on_sandbox_interface("eth0")
            .next()
            .expect("an address on eth0");
        let std::net::IpAddr::V4(v4) = ip.ip() else {
            panic!("want IPv4, got {}", ip.address);
        };
        assert!(subnet.contains(&v4), "{v4} in {subnet}");
        assert_eq!(pod.addresses("eth0"), [ip.address.to_string()]);
        assert_eq!(
            pod.must(&["sysctl", "-n", "net.ipv4.conf.eth0.accept_redirects"])
                .trim(),
            "0",
            "tuning applied"
        );
        ips.push(v4);
    }

    // The two pods reach each other over the bridge.
    for (from, to) in [(&pods[0], ips[1]), (&pods[1], ips[0])] {
        let out = from.exec(&["ping", "-c", "1", "-W", "2", &to.to_string()]);
        assert!(
            out.status.success(),
            "ping {to} from {}: {}",
            from.name(),
            String::from_utf8_lossy(&out.stdout)
        );
    }

    // portmap 1.1.1 CHECK fails for IPv4-only pods (containernetworking/plugins#819); that is
    // the truth of this plugin version, reported as portmap's typed error.
    let err = node
        .cni
        .check_network_list(&full, &rts[0])
        .await
        .expect_err("portmap CHECK fails on IPv4-only pods");
    assert!(
        matches!(&err, Error::Plugin { plugin, command, .. } if plugin == "portmap" && *command == "CHECK"),
        "{err}"
    );
    for rt in &rts {
        node.cni
            .check_network_list(&without_portmap, rt)
            .await
            .expect("CHECK without portmap");
    }

    for rt in &rts {
        node.cni.del_network_list(&full, rt).await.expect("DEL");
    }
    assert_nothing_left(&node, &name, &ids).await;

    // A second DEL, with the pod namespaces gone, still succeeds.
    drop(pods);
    let gone = RuntimeConf::new(ids[0].clone(), "", "eth0");
    node.cni
        .del_network_list(&full, &gone)
        .await
        .expect("DEL is idempotent");
}

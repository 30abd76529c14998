//! Capability args: exact JSON keys and runtimeConfig filtering.

use std::collections::BTreeMap;

use cni_types::CapabilityArgs;
use cni_types::capabilities::{Bandwidth, DnsCapability, IpRange, PortMapping, keys};
use serde_json::{Value, json};

fn everything() -> CapabilityArgs {
    CapabilityArgs {
        port_mappings: vec![
            PortMapping {
                host_port: 8080,
                container_port: 80,
                protocol: "tcp".into(),
                host_ip: Some("127.0.0.1".parse().unwrap()),
            },
            PortMapping {
                host_port: 5353,
                container_port: 53,
                protocol: "udp".into(),
                host_ip: None,
            },
        ],
        ip_ranges: vec![vec![IpRange {
            subnet: "10.88.0.0/16".parse().unwrap(),
            range_start: Some("10.88.1.1".parse().unwrap()),
            range_end: Some("10.88.1.254".parse().unwrap()),
            gateway: Some("10.88.0.1".parse().unwrap()),
        }]],
        bandwidth: Some(Bandwidth {
            ingress_rate: 1_000_000,
            ingress_burst: 2_000_000,
            egress_rate: 3_000_000,
            egress_burst: 4_000_000,
        }),
        dns: Some(DnsCapability {
            servers: vec!["10.96.0.10".into()],
            searches: vec!["svc.cluster.local".into()],
            options: vec!["ndots:5".into()],
        }),
        ips: vec!["10.88.0.42/16".into()],
        mac: Some("c2:11:22:33:44:55".into()),
        infiniband_guid: Some("c2:11:22:33:44:55:66:77".into()),
        device_id: Some("0000:03:00.1".into()),
        aliases: BTreeMap::from([("mynet".into(), vec!["web".into(), "frontend".into()])]),
        cgroup_path: Some("/kubepods/burstable/pod1234".into()),
        pod_annotations: BTreeMap::from([("k8s.v1.cni.cncf.io/networks".into(), "macvlan".into())]),
        other: BTreeMap::from([("io.example/flavour".into(), json!({"spicy": true}))]),
    }
}

#[test]
fn every_capability_has_its_conventions_key_and_shape() {
    let cases = [
        (
            keys::PORT_MAPPINGS,
            json!([
                {"hostPort": 8080, "containerPort": 80, "protocol": "tcp", "hostIP": "127.0.0.1"},
                {"hostPort": 5353, "containerPort": 53, "protocol": "udp"}
            ]),
        ),
        (
            keys::IP_RANGES,
            json!([[{"subnet": "10.88.0.0/16", "rangeStart": "10.88.1.1", "rangeEnd": "10.88.1.254", "gateway": "10.88.0.1"}]]),
        ),
        (
            keys::BANDWIDTH,
            json!({"ingressRate": 1_000_000, "ingressBurst": 2_000_000, "egressRate": 3_000_000, "egressBurst": 4_000_000}),
        ),
        (
            keys::DNS,
            json!({"servers": ["10.96.0.10"], "searches": ["svc.cluster.local"], "options": ["ndots:5"]}),
        ),
        (keys::IPS, json!(["10.88.0.42/16"])),
        (keys::MAC, json!("c2:11:22:33:44:55")),
        (keys::INFINIBAND_GUID, json!("c2:11:22:33:44:55:66:77")),
        (keys::DEVICE_ID, json!("0000:03:00.1")),
        (keys::ALIASES, json!({"mynet": ["web", "frontend"]})),
        (keys::CGROUP_PATH, json!("/kubepods/burstable/pod1234")),
        (
            keys::POD_ANNOTATIONS,
            json!({"k8s.v1.cni.cncf.io/networks": "macvlan"}),
        ),
        ("io.example/flavour", json!({"spicy": true})),
    ];
    let args = everything();
    let all = serde_json::to_value(&args).unwrap();
    assert_eq!(all.as_object().unwrap().len(), cases.len());
    for (key, want) in cases {
        assert_eq!(args.get(key).as_ref(), Some(&want), "{key}");
        assert_eq!(all[key], want, "{key} in the serialized args");
    }
    assert_eq!(
        [
            keys::PORT_MAPPINGS,
            keys::IP_RANGES,
            keys::BANDWIDTH,
            keys::DNS,
            keys::IPS,
            keys::MAC,
            keys::INFINIBAND_GUID,
            keys::DEVICE_ID,
            keys::ALIASES,
            keys::CGROUP_PATH,
            keys::POD_ANNOTATIONS,
        ],
        [
            "portMappings",
            "ipRanges",
            "bandwidth",
            "dns",
            "ips",
            "mac",
            "infinibandGUID",
            "deviceID",
            "aliases",
            "cgroupPath",
            "io.kubernetes.cri.pod-annotations",
        ]
    );
}

#[test]
fn runtime_config_holds_only_declared_and_set_capabilities() {
    let args = CapabilityArgs {
        mac: None,
        aliases: BTreeMap::new(),
        ..everything()
    };
    let cases: &[(&[&str], Value)] = &[
        (&[], json!({})),
        (
            &["portMappings"],
            json!({"portMappings": [
                {"hostPort": 8080, "containerPort": 80, "protocol": "tcp", "hostIP": "127.0.0.1"},
                {"hostPort": 5353, "containerPort": 53, "protocol": "udp"}
            ]}),
        ),
        // declared but unset: left out
        (&["mac", "aliases"], json!({})),
        // unknown to this crate and to the runtime: left out
        (&["io.example/unknown"], json!({})),
        (
            &["bandwidth", "io.example/flavour", "bandwidth"],
            json!({
                "bandwidth": {"ingressRate": 1_000_000, "ingressBurst": 2_000_000, "egressRate": 3_000_000, "egressBurst": 4_000_000},
                "io.example/flavour": {"spicy": true}
            }),
        ),
        (
            &["cgroupPath", "deviceID"],
            json!({"cgroupPath": "/kubepods/burstable/pod1234", "deviceID": "0000:03:00.1"}),
        ),
    ];
    for (declared, want) in cases {
        let got = Value::Object(args.runtime_config(declared.iter()));
        assert_eq!(&got, want, "{declared:?}");
    }
    // order follows the declaration
    let keys: Vec<String> = args
        .runtime_config(["dns", "ips", "portMappings"])
        .keys()
        .cloned()
        .collect();
    assert_eq!(keys, ["dns", "ips", "portMappings"]);
}

#[test]
fn empty_args_pass_nothing() {
    let args = CapabilityArgs::default();
    let all = [
        "portMappings",
        "ipRanges",
        "bandwidth",
        "dns",
        "ips",
        "mac",
        "infinibandGUID",
        "deviceID",
        "aliases",
        "cgroupPath",
        "io.kubernetes.cri.pod-annotations",
    ];
    assert!(args.runtime_config(all).is_empty());
    assert_eq!(serde_json::to_value(&args).unwrap(), json!({}));
}

#[test]
fn reads_a_runtime_config_back() {
    let text = r#"{
        "portMappings": [{"hostPort": 8080, "containerPort": 80, "protocol": "tcp", "hostIP": ""}],
        "bandwidth": {"ingressRate": 10, "egressRate": 20},
        "ipRanges": [[{"subnet": "fd00::/64"}], [{"subnet": "10.1.0.0/16", "gateway": "10.1.0.1"}]],
        "custom": [1, 2]
    }"#;
    let args = CapabilityArgs::from_slice(text.as_bytes()).unwrap();
    assert_eq!(
        args.port_mappings[0].host_ip, None,
        "empty hostIP means all addresses"
    );
    assert_eq!(
        args.bandwidth,
        Some(Bandwidth {
            ingress_rate: 10,
            egress_rate: 20,
            ..Bandwidth::default()
        })
    );
    assert_eq!(args.ip_ranges.len(), 2);
    assert_eq!(args.other["custom"], json!([1, 2]));

    let again = serde_json::to_vec(&everything()).unwrap();
    assert_eq!(CapabilityArgs::from_slice(&again).unwrap(), everything());
}

#[test]
fn parse_errors_say_what_was_decoded() {
    let cases = [
        (
            r#"{"portMappings": [{"hostPort": 70000, "containerPort": 80, "protocol": "tcp"}]}"#,
            "invalid capability arguments: invalid value: integer `70000`, expected u16 at line 1 column 36",
        ),
        (
            r#"{"mac": 5}"#,
            "invalid capability arguments: invalid type: integer `5`, expected a string at line 1 column 9",
        ),
    ];
    for (text, want) in cases {
        assert_eq!(
            CapabilityArgs::from_slice(text.as_bytes())
                .unwrap_err()
                .to_string(),
            want
        );
    }
}

proptest::proptest! {
    #[test]
    fn parser_takes_arbitrary_bytes(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..128)) {
        let _ = CapabilityArgs::from_slice(&bytes);
    }
}

//! No configuration and no environment makes host-local panic or run unbounded: whatever comes
//! in, out comes a result or the spec's error object.

use std::sync::Arc;
use std::time::{Duration, Instant};

use cni_builtin::{Builtin, BuiltinExec, Preference};
use cni_exec::{Exec, ProcessExec};
use proptest::prelude::*;
use serde_json::{Map, Value};

const KEYS: &[&str] = &[
    "name",
    "cniVersion",
    "ipam",
    "IPAM",
    "type",
    "subnet",
    "ranges",
    "rangeStart",
    "rangeEnd",
    "gateway",
    "routes",
    "dst",
    "gw",
    "args",
    "cni",
    "ips",
    "runtimeConfig",
    "ipRanges",
    "Name",
    "cni.dev/valid-attachments",
    "containerID",
    "ifname",
    "prevResult",
    "dns",
];

fn address() -> impl Strategy<Value = String> {
    prop_oneof![
        (any::<[u8; 4]>(), 0u8..40).prop_map(|(a, p)| format!(
            "{}.{}.{}.{}/{p}",
            a[0],
            a[1] % 4,
            a[2],
            a[3]
        )),
        (0u8..4, any::<u8>()).prop_map(|(c, d)| format!("10.0.{c}.{d}")),
        (any::<u16>(), 100u8..130).prop_map(|(h, p)| format!("fd00::{h:x}/{p}")),
        (0u8..3, 20u8..33).prop_map(|(c, p)| format!("10.0.{c}.0/{p}")),
        Just("::ffff:10.0.0.0/120".to_owned()),
        Just("0.0.0.0/30".to_owned()),
        "[0-9a-f:./]{0,20}",
    ]
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        address().prop_map(Value::String),
        prop::sample::select(vec![
            "",
            "0.1.0",
            "0.2.0",
            "0.3.1",
            "0.4.0",
            "1.0.0",
            "1.1.0",
            "x.y",
            "net1",
            "host-local"
        ])
        .prop_map(Value::from),
        ".{0,10}".prop_map(Value::String),
    ]
}

fn json() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(KEYS), inner), 0..7).prop_map(|pairs| {
                Value::Object(pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
            }),
        ]
    })
}

fn range() -> impl Strategy<Value = Value> {
    let bound = || prop::option::weighted(0.4, address());
    (address(), bound(), bound(), bound()).prop_map(|(subnet, start, end, gateway)| {
        let mut range = Map::new();
        range.insert("subnet".into(), Value::from(subnet));
        for (key, value) in [
            ("rangeStart", start),
            ("rangeEnd", end),
            ("gateway", gateway),
        ] {
            if let Some(value) = value {
                range.insert(key.into(), Value::from(value));
            }
        }
        Value::Object(range)
    })
}

/// An `ipam` object like host-local's: a legacy range, range sets, routes, and some noise.
fn ipam() -> impl Strategy<Value = Value> {
    let sets = prop::collection::vec(prop::collection::vec(range(), 0..3), 0..3);
    let shaped = (
        prop::option::weighted(0.5, range()),
        sets,
        prop::option::weighted(0.3, json()),
    )
        .prop_map(|(legacy, sets, noise)| {
            let mut ipam = match legacy {
                Some(Value::Object(map)) => map,
                _ => Map::new(),
            };
            ipam.insert("type".into(), Value::from("host-local"));
            if !sets.is_empty() {
                let sets = sets.into_iter().map(Value::Array).collect();
                ipam.insert("ranges".into(), Value::Array(sets));
            }
            if let Some(Value::Object(more)) = noise {
                ipam.extend(more);
            }
            Value::Object(ipam)
        });
    prop_oneof![4 => shaped, 1 => json()]
}

/// Mostly configurations shaped like host-local's, sometimes anything at all.
fn config() -> impl Strategy<Value = Value> {
    let version =
        prop::sample::select(vec!["", "0.2.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0", "2.0"]);
    let shaped = (version, ipam(), prop::option::weighted(0.2, json())).prop_map(
        |(version, ipam, extra)| {
            let mut top = Map::new();
            top.insert("cniVersion".into(), Value::from(version));
            top.insert("name".into(), Value::from("net1"));
            top.insert("ipam".into(), ipam);
            if let Some(Value::Object(more)) = extra {
                top.extend(more);
            }
            Value::Object(top)
        },
    );
    prop_oneof![4 => shaped, 1 => json()]
}

/// Keeps every run inside `data`: no `dataDir` or `resolvConf` of the generator's.
fn confine(config: &mut Value, data: &str) {
    fn strip(v: &mut Value) {
        match v {
            Value::Object(map) => {
                map.retain(|k, _| {
                    !k.eq_ignore_ascii_case("dataDir") && !k.eq_ignore_ascii_case("resolvConf")
                });
                map.values_mut().for_each(strip);
            }
            Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    strip(config);
    if let Value::Object(top) = config {
        for (key, value) in top.iter_mut() {
            if key.eq_ignore_ascii_case("ipam")
                && let Value::Object(ipam) = value
            {
                ipam.insert("dataDir".into(), Value::from(data));
            }
        }
    }
}

fn env() -> impl Strategy<Value = Vec<(String, String)>> {
    let command = prop::sample::select(vec![
        "ADD", "ADD", "ADD", "DEL", "CHECK", "GC", "STATUS", "VERSION", "", "add",
    ]);
    let id = prop_oneof![4 => Just("c1".to_owned()), 4 => Just("c2".to_owned()), 1 => ".{0,8}"];
    let ifname = prop_oneof![4 => Just("eth0".to_owned()), 1 => ".{0,18}"];
    let args = prop_oneof![
        4 => Just(String::new()),
        1 => Just("IgnoreUnknown=1;IP=10.0.0.5".to_owned()),
        1 => address().prop_map(|a| format!("IP={a}")),
        1 => "[A-Za-z=;0-9.]{0,16}",
    ];
    (command, id, ifname, args, prop::bool::weighted(0.9)).prop_map(
        |(command, id, ifname, args, path)| {
            let mut env = vec![
                ("CNI_COMMAND".to_owned(), command.to_owned()),
                ("CNI_CONTAINERID".to_owned(), id),
                ("CNI_NETNS".to_owned(), "/run/netns/none".to_owned()),
                ("CNI_IFNAME".to_owned(), ifname),
                ("CNI_ARGS".to_owned(), args),
            ];
            if path {
                env.push(("CNI_PATH".to_owned(), "/usr/lib/cni".to_owned()));
            }
            env
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn host_local_never_panics(mut config in config(), env in env(), raw in prop::option::weighted(0.1, prop::collection::vec(any::<u8>(), 0..64))) {
        let data = tempfile::tempdir().unwrap();
        confine(&mut config, data.path().to_str().unwrap());
        let stdin = raw.unwrap_or_else(|| serde_json::to_vec(&config).unwrap());
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let exec = BuiltinExec::new(Arc::new(ProcessExec::new()), Preference::PreferBuiltin)
            .with_timeout(Duration::from_secs(10));
        let started = Instant::now();
        let result = runtime.block_on(exec.exec_plugin(&Builtin::HostLocal.pseudo_path(), &env, &stdin));
        prop_assert!(started.elapsed() < Duration::from_secs(10));
        match result {
            Ok(out) => {
                if !out.stdout.is_empty() {
                    prop_assert!(serde_json::from_slice::<Value>(&out.stdout).is_ok());
                }
            }
            Err(cni_exec::Error::Failed { stdout, .. }) => {
                let error: Value = serde_json::from_slice(&stdout).unwrap();
                prop_assert!(error["code"].is_u64(), "{error}");
                prop_assert!(error["msg"].is_string(), "{error}");
                prop_assert_ne!(&error["msg"], "the built-in plugin panicked");
            }
            Err(other) => prop_assert!(false, "unexpected error: {other}"),
        }
        // Nothing escaped the data directory: the default one was not created by us.
        prop_assert!(!std::path::Path::new("/var/lib/cni/networks/net1").exists());
    }
}

fn go_address() -> impl Strategy<Value = String> {
    prop_oneof![
        (1u8..3, 0u8..3, any::<u8>(), 0u8..40)
            .prop_map(|(a, b, c, p)| format!("10.{a}.{b}.{c}/{p}")),
        (0u8..3, any::<u8>()).prop_map(|(c, d)| format!("10.1.{c}.{d}")),
        (1u8..3, 0u8..3, 20u8..33).prop_map(|(a, c, p)| format!("10.{a}.{c}.0/{p}")),
        (any::<u8>(), 100u8..130).prop_map(|(h, p)| format!("fd00::{h:x}/{p}")),
        (1u8..3, 110u8..127).prop_map(|(a, p)| format!("fd0{a}::/{p}")),
        (any::<u8>()).prop_map(|h| format!("fd01::{h:x}")),
    ]
}

fn go_subnet() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => (1u8..3, 0u8..2, 24u8..31).prop_map(|(a, b, p)| format!("10.{a}.{b}.0/{p}")),
        2 => (1u8..3, 118u8..127).prop_map(|(a, p)| format!("fd0{a}::/{p}")),
        1 => go_address(),
    ]
}

fn go_bound() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => (1u8..3, 0u8..2, 0u8..20).prop_map(|(a, b, d)| format!("10.{a}.{b}.{d}")),
        2 => (1u8..3, 0u8..20).prop_map(|(a, d)| format!("fd0{a}::{d:x}")),
        1 => go_address().prop_map(|a| a.split('/').next().unwrap().to_owned()),
    ]
}

fn go_range() -> impl Strategy<Value = Value> {
    let bound = || prop::option::weighted(0.3, go_bound());
    (go_subnet(), bound(), bound(), bound()).prop_map(|(subnet, start, end, gateway)| {
        let mut range = Map::new();
        range.insert("subnet".into(), Value::from(subnet));
        for (key, value) in [
            ("rangeStart", start),
            ("rangeEnd", end),
            ("gateway", gateway),
        ] {
            if let Some(value) = value {
                range.insert(key.into(), Value::from(value));
            }
        }
        Value::Object(range)
    })
}

fn go_config() -> impl Strategy<Value = Value> {
    let version = prop::sample::select(vec!["", "0.2.0", "0.3.1", "0.4.0", "1.0.0"]);
    let sets = prop::collection::vec(prop::collection::vec(go_range(), 1..3), 0..3);
    (version, prop::option::weighted(0.5, go_range()), sets).prop_map(|(version, legacy, sets)| {
        let mut ipam = match legacy {
            Some(Value::Object(map)) => map,
            _ => Map::new(),
        };
        ipam.insert("type".into(), Value::from("host-local"));
        if !sets.is_empty() {
            ipam.insert(
                "ranges".into(),
                Value::Array(sets.into_iter().map(Value::Array).collect()),
            );
        }
        serde_json::json!({"cniVersion": version, "name": "net1", "ipam": ipam})
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// Generated configurations give the same bytes from both, and the same files.
    #[test]
    fn host_local_matches_go(config in go_config(), asked in prop::option::weighted(0.3, go_bound())) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let go_dir = tempfile::tempdir().unwrap();
        let rs_dir = tempfile::tempdir().unwrap();
        let args = asked.map(|a| format!("IP={a}")).unwrap_or_default();
        for (command, id) in [("ADD", "c1"), ("ADD", "c2"), ("ADD", "c1"), ("DEL", "c1"), ("ADD", "c3")] {
            let env = crate::support::env(command, id, "eth0", "/run/netns/none", &args);
            let want = runtime.block_on(crate::support::go("host-local", &env, &crate::support::with_data_dir(&config, go_dir.path())));
            let got = runtime.block_on(crate::support::builtin("host-local", &env, &crate::support::with_data_dir(&config, rs_dir.path())));
            prop_assert_eq!(got.text(), want.text(), "{} {} {}", command, id, config);
            prop_assert_eq!(
                crate::support::snapshot(&rs_dir.path().join("net1")),
                crate::support::snapshot(&go_dir.path().join("net1"))
            );
        }
    }
}

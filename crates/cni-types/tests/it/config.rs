//! Network configuration types: lossless decode/encode and the public accessors.

use cni_types::config::{Dns, Ipam, NetworkConfigList, PluginConfig};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

/// Keys a plugin might use that the types do not model, with awkward spellings.
fn unknown_key() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-zA-Z][a-zA-Z0-9_-]{0,8}",
        Just("NOTE1".to_owned()),
        Just("log-file".to_owned()),
        Just("runtimeConfig".to_owned()),
        Just("args".to_owned()),
        Just("é/ü".to_owned()),
    ]
    .prop_filter("modelled key", |k| {
        ![
            "type",
            "name",
            "cniVersion",
            "capabilities",
            "ipam",
            "dns",
            "cniVersions",
            "disableCheck",
            "disableGC",
            "loadOnlyInlinedPlugins",
            "plugins",
        ]
        .contains(&k.as_str())
    })
}

fn json_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        // Two decimals: serde_json parses those exactly even without its `float_roundtrip`
        // feature, which cni-config turns on for real files.
        (-100_000_000i64..100_000_000).prop_map(|n| Value::from(n as f64 / 100.0)),
        ".{0,12}".prop_map(Value::String),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    json_leaf().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((unknown_key(), inner), 0..4)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

fn flag_value() -> impl Strategy<Value = Option<Value>> {
    prop::option::of(prop_oneof![
        any::<bool>().prop_map(Value::Bool),
        Just(json!("true")),
        Just(json!("False")),
    ])
}

/// Shuffles `entries` by a generated permutation so modelled keys land anywhere.
fn shuffled(entries: Vec<(String, Value)>, seed: Vec<usize>) -> Map<String, Value> {
    let mut entries = entries;
    for (i, s) in seed.into_iter().enumerate() {
        if !entries.is_empty() {
            let j = s % entries.len();
            let k = i % entries.len();
            entries.swap(j, k);
        }
    }
    entries.into_iter().collect()
}

fn plugin_object() -> impl Strategy<Value = Value> {
    (
        "[a-z][a-z0-9-]{0,8}",
        prop::option::of(prop_oneof![
            Just(Value::Null),
            "[a-z]{1,5}".prop_map(Value::String)
        ]),
        prop::option::of(prop::collection::vec(
            ("[a-zA-Z.]{1,10}", any::<bool>()),
            0..3,
        )),
        prop::option::of(prop::collection::vec((unknown_key(), json_value()), 0..3)),
        prop::option::of(prop::collection::vec("[0-9.]{1,7}", 0..3)),
        prop::collection::vec((unknown_key(), json_value()), 0..5),
        prop::collection::vec(any::<usize>(), 0..8),
    )
        .prop_map(|(ty, name, caps, ipam, ns, extra, seed)| {
            let mut entries = vec![("type".to_owned(), json!(ty))];
            if let Some(name) = name {
                entries.push(("name".to_owned(), name));
            }
            if let Some(caps) = caps {
                let caps: Map<String, Value> =
                    caps.into_iter().map(|(k, v)| (k, Value::Bool(v))).collect();
                entries.push(("capabilities".to_owned(), Value::Object(caps)));
            }
            if let Some(ipam) = ipam {
                let mut ipam: Map<String, Value> = ipam.into_iter().collect();
                ipam.insert("type".to_owned(), json!("host-local"));
                entries.push(("ipam".to_owned(), Value::Object(ipam)));
            }
            if let Some(ns) = ns {
                entries.push(("dns".to_owned(), json!({ "nameservers": ns })));
            }
            entries.extend(extra);
            Value::Object(shuffled(entries, seed))
        })
}

fn list_object() -> impl Strategy<Value = Value> {
    (
        "[a-z][a-z0-9.-]{0,8}",
        prop::option::of(prop_oneof!["[0-9]\\.[0-9]\\.[0-9]", Just(String::new())]),
        prop::option::of(prop::collection::vec("[0-9]\\.[0-9]\\.[0-9]", 0..3)),
        (flag_value(), flag_value(), flag_value()),
        prop::option::of(prop::collection::vec(plugin_object(), 0..3)),
        prop::collection::vec((unknown_key(), json_value()), 0..4),
        prop::collection::vec(any::<usize>(), 0..8),
    )
        .prop_map(|(name, version, versions, flags, plugins, extra, seed)| {
            let mut entries = vec![("name".to_owned(), json!(name))];
            if let Some(v) = version {
                entries.push(("cniVersion".to_owned(), json!(v)));
            }
            if let Some(v) = versions {
                entries.push(("cniVersions".to_owned(), json!(v)));
            }
            for (key, value) in ["disableCheck", "disableGC", "loadOnlyInlinedPlugins"]
                .into_iter()
                .zip([flags.0, flags.1, flags.2])
            {
                if let Some(value) = value {
                    entries.push((key.to_owned(), value));
                }
            }
            if let Some(p) = plugins {
                entries.push(("plugins".to_owned(), Value::Array(p)));
            }
            entries.extend(extra);
            Value::Object(shuffled(entries, seed))
        })
}

proptest! {
    #[test]
    fn lists_with_unknown_keys_survive_parse_and_serialize(value in list_object()) {
        let text = serde_json::to_string(&value).unwrap();
        let list: NetworkConfigList = serde_json::from_str(&text).unwrap();
        let again = serde_json::to_string(&list).unwrap();
        // Byte-equal text means equal values and equal key order at every level.
        prop_assert_eq!(&again, &text);
        let reparsed: NetworkConfigList = serde_json::from_str(&again).unwrap();
        prop_assert_eq!(reparsed, list);
    }

    #[test]
    fn plugin_maps_keep_every_original_key(value in plugin_object()) {
        let plugin = PluginConfig::from_value(&value).unwrap();
        prop_assert_eq!(Value::Object(plugin.to_map()), value);
    }

    #[test]
    fn decoding_any_json_never_panics(value in json_value()) {
        let _ = NetworkConfigList::from_value(&value);
        let _ = PluginConfig::from_value(&value);
    }
}

#[test]
fn plugin_fields_are_read_from_a_real_entry() {
    let plugin = PluginConfig::from_value(&json!({
        "type": "bridge",
        "bridge": "cni0",
        "capabilities": {"portMappings": true, "bandwidth": false},
        "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.85.0.0/16"}]]},
        "dns": {"nameservers": ["10.96.0.10"], "search": ["svc.cluster.local"]}
    }))
    .unwrap();
    assert_eq!(plugin.plugin_type, "bridge");
    assert!(plugin.capabilities.enabled("portMappings"));
    assert!(!plugin.capabilities.enabled("bandwidth"));
    let ipam = plugin.ipam.as_ref().unwrap();
    assert_eq!(ipam.ipam_type.as_deref(), Some("host-local"));
    assert_eq!(ipam.extra["ranges"][0][0]["subnet"], "10.85.0.0/16");
    let dns = plugin.dns.as_ref().unwrap();
    assert_eq!(dns.nameservers, ["10.96.0.10"]);
    assert_eq!(dns.search, ["svc.cluster.local"]);
    assert_eq!(plugin.extra.keys().collect::<Vec<_>>(), ["bridge"]);
}

#[test]
fn built_configs_serialize_in_canonical_order() {
    let mut plugin = PluginConfig::new("ptp");
    plugin.extra.insert("mtu".into(), json!(1500));
    plugin.ipam = Some(Ipam::new("host-local"));
    let mut dns = Dns::default();
    dns.nameservers.push("1.1.1.1".into());
    plugin.dns = Some(dns);
    let mut list = NetworkConfigList::new("net");
    list.cni_version = Some("1.1.0".into());
    list.disable_gc = true;
    list.plugins.push(plugin);
    assert_eq!(
        serde_json::to_string(&list).unwrap(),
        r#"{"cniVersion":"1.1.0","name":"net","disableGC":true,"plugins":[{"type":"ptp","ipam":{"type":"host-local"},"dns":{"nameservers":["1.1.1.1"]},"mtu":1500}]}"#
    );
    assert_eq!(list.plugin_types().collect::<Vec<_>>(), ["ptp"]);
}

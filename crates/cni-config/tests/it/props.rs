//! Property tests: parsers never panic; generated configurations survive parse and serialize.

use cni_config::{parse_conf, parse_conflist};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        ".{0,10}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 20, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec(("[a-zA-Z_-]{1,8}", inner), 0..4)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

/// Objects shaped like configurations, with junk in the modelled keys now and then.
fn config_like() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        Just("name"),
        Just("type"),
        Just("cniVersion"),
        Just("cniVersions"),
        Just("plugins"),
        Just("disableCheck"),
        Just("disableGC"),
        Just("loadOnlyInlinedPlugins"),
        Just("ipam"),
        Just("dns"),
        Just("capabilities"),
        Just("x"),
    ];
    prop::collection::vec((key, json_value()), 0..8)
        .prop_map(|kv| Value::Object(kv.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()))
}

fn unknown_entries() -> impl Strategy<Value = Vec<(String, Value)>> {
    prop::collection::vec(("x[a-zA-Z0-9_-]{0,6}", json_value()), 0..4)
}

fn valid_list() -> impl Strategy<Value = Value> {
    let plugin =
        ("[a-z][a-z0-9-]{0,6}", unknown_entries(), any::<bool>()).prop_map(|(ty, extra, first)| {
            let mut m = Map::new();
            if first {
                m.insert("type".into(), json!(ty));
            }
            m.extend(extra);
            m.insert("type".into(), json!(ty));
            Value::Object(m)
        });
    (
        "[a-zA-Z0-9][a-zA-Z0-9_.-]{0,10}",
        prop::sample::select(vec!["0.3.1", "0.4.0", "1.0.0", "1.1.0"]),
        prop::collection::vec(plugin, 1..4),
        unknown_entries(),
        unknown_entries(),
    )
        .prop_map(|(name, version, plugins, before, after)| {
            let mut m: Map<String, Value> = before.into_iter().collect();
            m.insert("name".into(), json!(name));
            m.insert("cniVersion".into(), json!(version));
            m.insert("plugins".into(), Value::Array(plugins));
            m.extend(after);
            Value::Object(m)
        })
}

proptest! {
    #[test]
    fn any_bytes_give_ok_or_an_error(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = parse_conflist(&bytes);
        let _ = parse_conf(&bytes);
    }

    #[test]
    fn any_config_like_json_gives_ok_or_an_error(value in config_like()) {
        let bytes = serde_json::to_vec(&value).unwrap();
        let _ = parse_conflist(&bytes);
        let _ = parse_conf(&bytes);
    }

    #[test]
    fn generated_lists_survive_parse_serialize_parse(value in valid_list()) {
        let text = serde_json::to_string(&value).unwrap();
        let first = parse_conflist(text.as_bytes()).unwrap();
        let serialized = serde_json::to_string(&first.list).unwrap();
        prop_assert_eq!(&serialized, &text);
        let second = parse_conflist(serialized.as_bytes()).unwrap();
        prop_assert_eq!(second.list, first.list);
        prop_assert_eq!(second.version, first.version);
    }
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    let deep = format!(
        "{{\"name\":\"n\",\"x\":{}{}}}",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let err = parse_conflist(deep.as_bytes()).unwrap_err();
    assert!(err.to_string().contains("recursion limit"), "{err}");
}

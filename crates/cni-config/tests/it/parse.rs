//! Parsing bytes: every validation rule, version selection, promotion, key preservation.

use cni_config::{Format, Version, load_file, parse_conf, parse_conflist};
use serde_json::Value;

use crate::testdata;

#[test]
fn each_rule_rejects_with_the_exact_message() {
    let cases: &[(&str, &str)] = &[
        (
            "",
            "invalid JSON: EOF while parsing a value at line 1 column 0",
        ),
        ("[]", "expected a JSON object, got array"),
        (r#"{"plugins":[{"type":"a"}]}"#, "name: missing"),
        (
            r#"{"name":"","plugins":[{"type":"a"}]}"#,
            "name: must not be empty",
        ),
        (
            r#"{"name":"-x","plugins":[{"type":"a"}]}"#,
            "name: must start with a letter or digit and contain only letters, digits, '_', '.' and '-', got \"-x\"",
        ),
        (
            r#"{"name":"a/b","plugins":[{"type":"a"}]}"#,
            "name: must start with a letter or digit and contain only letters, digits, '_', '.' and '-', got \"a/b\"",
        ),
        (r#"{"name":"n"}"#, "plugins: missing"),
        (r#"{"name":"n","plugins":[]}"#, "plugins: must not be empty"),
        (
            r#"{"name":"n","plugins":[{"type":"a"},{}]}"#,
            "plugins[1].type: missing",
        ),
        (
            r#"{"name":"n","plugins":[{"type":"a"},{"type":"../evil"}]}"#,
            "plugins[1].type: must be a plain file name, got \"../evil\"",
        ),
        (
            r#"{"name":"n","plugins":[{"type":""}]}"#,
            "plugins[0].type: must be a plain file name, got \"\"",
        ),
        (
            r#"{"name":"n","plugins":[{"type":".."}]}"#,
            "plugins[0].type: must be a plain file name, got \"..\"",
        ),
        (
            r#"{"name":"n","plugins":[{"type":"/bin/sh"}]}"#,
            "plugins[0].type: must be a plain file name, got \"/bin/sh\"",
        ),
        (
            r#"{"name":"n","plugins":[{"type":"b","ipam":{"type":"x/y"}}]}"#,
            "plugins[0].ipam.type: must be a plain file name, got \"x/y\"",
        ),
        (
            r#"{"name":"n","cniVersion":"1.0","plugins":[{"type":"a"}],"disableCheck":"maybe"}"#,
            "disableCheck: expected true or false, got \"maybe\"",
        ),
        (
            r#"{"name":"n","disableGC":1,"plugins":[{"type":"a"}]}"#,
            "disableGC: expected a boolean, got number",
        ),
        (
            r#"{"name":"n","cniVersion":"v1","plugins":[{"type":"a"}]}"#,
            "cniVersion: invalid CNI version \"v1\": each part must be a decimal number",
        ),
        (
            r#"{"name":"n","cniVersion":"2.0.0","plugins":[{"type":"a"}]}"#,
            "cniVersion: unsupported CNI version 2.0.0 (supported: 0.1.0, 0.2.0, 0.3.0, 0.3.1, 0.4.0, 1.0.0, 1.1.0)",
        ),
        (
            r#"{"name":"n","cniVersions":["9.0.0"],"plugins":[{"type":"a"}]}"#,
            "cniVersions: no supported CNI version in [\"9.0.0\"] (supported: 0.1.0, 0.2.0, 0.3.0, 0.3.1, 0.4.0, 1.0.0, 1.1.0)",
        ),
        (
            r#"{"name":"n","cniVersions":["1.0.0","7"],"plugins":[{"type":"a"}]}"#,
            "cniVersions[1]: invalid CNI version \"7\": expected MAJOR.MINOR.PATCH",
        ),
    ];
    for (text, want) in cases {
        let err = parse_conflist(text.as_bytes()).expect_err(text);
        assert_eq!(err.to_string(), *want, "{text}");
    }
}

#[test]
fn single_plugin_rules_use_top_level_fields() {
    let cases: &[(&str, &str)] = &[
        (r#"{"name":"n"}"#, "type: missing"),
        (
            r#"{"name":"n","plugins":[{"type":"a"}]}"#,
            "type: missing (this looks like a configuration list: name the file .conflist)",
        ),
        (r#"{"type":"a"}"#, "name: missing"),
        (
            r#"{"type":"a/b","name":"n"}"#,
            "type: must be a plain file name, got \"a/b\"",
        ),
        (
            r#"{"type":"a","name":"n","ipam":{"type":""}}"#,
            "ipam.type: must be a plain file name, got \"\"",
        ),
        (
            r#"{"type":"a","name":"n","cniVersion":"0.5.0"}"#,
            "cniVersion: unsupported CNI version 0.5.0 (supported: 0.1.0, 0.2.0, 0.3.0, 0.3.1, 0.4.0, 1.0.0, 1.1.0)",
        ),
        (
            r#"{"type":"a","name":"n","capabilities":{"ips":"yes"}}"#,
            "capabilities.ips: expected a boolean, got string",
        ),
    ];
    for (text, want) in cases {
        let err = parse_conf(text.as_bytes()).expect_err(text);
        assert_eq!(err.to_string(), *want, "{text}");
    }
}

#[test]
fn errors_from_files_start_with_the_path() {
    let path = testdata("plugin-subdir-bad/x/10-bad.conf");
    let err = load_file(&path).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("{}: name: missing", path.display())
    );
    assert_eq!(err.path(), Some(path.as_path()));
    assert_eq!(err.field(), Some("name"));
}

#[test]
fn version_selection() {
    let cases: &[(&str, Version)] = &[
        (r#""cniVersion":"1.0.0""#, Version::V1_0_0),
        (r#""cniVersion":"0.3""#, Version::V0_3_0),
        (r#""cniVersion":"""#, Version::V0_1_0),
        ("", Version::V0_1_0),
        (r#""cniVersions":[]"#, Version::V0_1_0),
        (
            r#""cniVersions":["0.4.0","1.1.0","1.0.0"]"#,
            Version::V1_1_0,
        ),
        (r#""cniVersions":["0.4.0","2.0.0"]"#, Version::V0_4_0),
        (
            r#""cniVersion":"1.1.0","cniVersions":["0.4.0"]"#,
            Version::V1_1_0,
        ),
        (
            r#""cniVersion":"0.3.1","cniVersions":["1.0.0"]"#,
            Version::V1_0_0,
        ),
        // A newer cniVersion than we implement falls back on cniVersions, as in libcni.
        (
            r#""cniVersion":"2.0.0","cniVersions":["1.0.0"]"#,
            Version::V1_0_0,
        ),
    ];
    for (keys, want) in cases {
        let sep = if keys.is_empty() { "" } else { "," };
        let text = format!(r#"{{"name":"n"{sep}{keys},"plugins":[{{"type":"a"}}]}}"#);
        let network = parse_conflist(text.as_bytes()).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(network.version, *want, "{text}");
    }
}

#[test]
fn flags_accept_booleans_and_strings() {
    let network = parse_conflist(
        br#"{"name":"n","disableCheck":"TRUE","disableGC":true,"loadOnlyInlinedPlugins":"false","plugins":[{"type":"a"}]}"#,
    )
    .unwrap();
    assert!(network.list.disable_check);
    assert!(network.list.disable_gc);
    assert!(!network.list.load_only_inlined_plugins);
}

#[test]
fn a_conf_is_promoted_keeping_name_and_version() {
    let bytes = br#"{"cniVersion":"0.4.0","name":"mynet","type":"bridge","zz":1,"bridge":"cni0"}"#;
    let network = parse_conf(bytes).unwrap();
    assert_eq!(network.format, Format::Conf);
    assert_eq!(network.name(), "mynet");
    assert_eq!(network.version, Version::V0_4_0);
    assert_eq!(network.list.cni_version.as_deref(), Some("0.4.0"));
    assert_eq!(network.plugin_types(), ["bridge"]);
    assert_eq!(&*network.bytes, bytes);
    assert_eq!(
        std::str::from_utf8(&network.cache_config).unwrap(),
        r#"{"cniVersion":"0.4.0","name":"mynet","plugins":[{"bridge":"cni0","cniVersion":"0.4.0","name":"mynet","type":"bridge","zz":1}]}"#
    );
    // Without cniVersion libcni writes an empty one, and it still means 0.1.0.
    let bare = parse_conf(br#"{"name":"m","type":"ptp"}"#).unwrap();
    assert_eq!(bare.version, Version::V0_1_0);
    assert!(
        std::str::from_utf8(&bare.cache_config)
            .unwrap()
            .starts_with(r#"{"cniVersion":"","name":"m","#)
    );
}

#[test]
fn unknown_plugin_keys_survive_untouched() {
    let path = testdata("unknown-keys.conflist");
    let network = load_file(&path).unwrap();
    let original: Value = serde_json::from_slice(&network.bytes).unwrap();
    // Byte-compare the serialized JSON: same values, same key order at every level.
    assert_eq!(
        serde_json::to_string(&network.list).unwrap(),
        serde_json::to_string(&original).unwrap()
    );
    let plugin = &network.list.plugins[0];
    assert_eq!(
        serde_json::to_string(&plugin.to_map()).unwrap(),
        serde_json::to_string(&original["plugins"][0]).unwrap()
    );
    assert_eq!(
        plugin.extra.keys().collect::<Vec<_>>(),
        ["mtu", "NOTE1", "log-file", "big", "float"]
    );
    assert_eq!(
        plugin.extra["big"],
        serde_json::json!(18_446_744_073_709_551_615_u64)
    );
    assert_eq!(
        plugin.extra["float"].as_f64(),
        Some(0.300_000_000_000_000_04)
    );
    assert!(plugin.capabilities.enabled("portMappings"));
    assert_eq!(
        network.list.extra.keys().collect::<Vec<_>>(),
        ["zeta", "args"]
    );
}

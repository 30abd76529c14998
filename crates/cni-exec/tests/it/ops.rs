//! The CNI operations through the public API, with the fake plugin linked under several names.

use std::collections::BTreeMap;

use cni_exec::{Error, GcAttachment, PluginStatus, RuntimeConf};
use cni_types::{CapabilityArgs, Version};
use serde_json::{Value, json};

use crate::support::{Fixture, network};

fn caps() -> CapabilityArgs {
    serde_json::from_value(json!({
        "portMappings": [{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}],
        "bandwidth": {"ingressRate": 1000, "ingressBurst": 10, "egressRate": 2000, "egressBurst": 20},
        "mac": "0a:00:00:00:00:01"
    }))
    .unwrap()
}

fn rt(container: &str) -> RuntimeConf {
    RuntimeConf::new(container, "/run/netns/pod-x", "eth0")
        .with_arg("K8S_POD_NAME", "web")
        .with_arg("IgnoreUnknown", "1")
        .with_capability_args(caps())
}

/// A chain of three fakes: `first` declares portMappings (and an undeclared-false bandwidth),
/// `second` passes prevResult through and declares bandwidth, `third` declares nothing.
fn chain(fx: &Fixture, version: &str) -> cni_config::NetworkList {
    let mut first = fx.plugin("first", json!({}));
    first["zeta"] = json!(1);
    first["capabilities"] = json!({"portMappings": true, "bandwidth": false});
    first["alpha"] = json!({"nested": true});
    let mut second = fx.plugin("second", json!({"passPrevResult": true}));
    second["capabilities"] = json!({"bandwidth": true});
    let third = fx.plugin("third", json!({"passPrevResult": true}));
    network("testnet", version, vec![first, second, third])
}

fn env_of(record: &Value) -> BTreeMap<String, String> {
    record["env"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
        .collect()
}

fn keys(v: &Value) -> Vec<&str> {
    v.as_object().unwrap().keys().map(String::as_str).collect()
}

#[tokio::test]
async fn add_runs_in_order_with_spec_env_and_stdin() {
    let fx = Fixture::new(&["first", "second", "third"]);
    let net = chain(&fx, "1.0.0");
    let result = fx
        .cni
        .add_network_list(&net, &rt("c1"))
        .await
        .expect("ADD succeeds");
    assert_eq!(result.cni_version(), Version::V1_0_0);

    let adds = fx.records_of("ADD");
    let order: Vec<&str> = adds.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(order, ["first", "second", "third"]);

    let want_env: BTreeMap<String, String> = [
        ("CNI_COMMAND", "ADD"),
        ("CNI_CONTAINERID", "c1"),
        ("CNI_NETNS", "/run/netns/pod-x"),
        ("CNI_IFNAME", "eth0"),
        ("CNI_ARGS", "K8S_POD_NAME=web;IgnoreUnknown=1"),
        ("CNI_PATH", &fx.plugins.path().display().to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    for (plugin, record) in &adds {
        let mut env = env_of(record);
        assert!(env.remove("PATH").is_some(), "{plugin}: PATH passed");
        assert_eq!(env, want_env, "{plugin}");
    }

    let first = &adds[0].1["stdin"];
    assert_eq!(
        keys(first),
        [
            "cniVersion",
            "name",
            "type",
            "fake",
            "zeta",
            "capabilities",
            "alpha",
            "runtimeConfig"
        ]
    );
    assert_eq!(first["name"], "testnet");
    assert_eq!(first["cniVersion"], "1.0.0");
    assert_eq!(
        first["capabilities"],
        json!({"portMappings": true, "bandwidth": false})
    );
    assert_eq!(
        first["runtimeConfig"],
        json!({"portMappings": [{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}]})
    );
    assert!(first.get("prevResult").is_none());

    let second = &adds[1].1["stdin"];
    assert_eq!(
        second["runtimeConfig"],
        json!({"bandwidth": {"ingressRate": 1000, "ingressBurst": 10, "egressRate": 2000, "egressBurst": 20}})
    );
    let first_result = second["prevResult"].clone();
    assert_eq!(first_result["cniVersion"], "1.0.0");
    assert_eq!(first_result["interfaces"][0]["name"], "eth0");

    let third = &adds[2].1["stdin"];
    assert!(third.get("runtimeConfig").is_none());
    assert_eq!(third["prevResult"], first_result);
    assert_eq!(result.to_json_value().unwrap(), first_result);
}

#[tokio::test]
async fn del_runs_in_reverse_with_the_cached_config_and_arguments() {
    let fx = Fixture::new(&["first", "second", "third", "other"]);
    let added = chain(&fx, "1.0.0");
    let result = fx.cni.add_network_list(&added, &rt("c1")).await.unwrap();

    // The file on disk changed since ADD: one different plugin, different version.
    let changed = network("testnet", "0.4.0", vec![fx.plugin("other", json!({}))]);
    let bare = RuntimeConf::new("c1", "", "eth0");
    fx.cni.del_network_list(&changed, &bare).await.expect("DEL");
    let dels = fx.records_of("DEL");
    let order: Vec<&str> = dels.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(order, ["third", "second", "first"]);
    for (plugin, record) in &dels {
        let stdin = &record["stdin"];
        assert_eq!(
            stdin["prevResult"],
            result.to_json_value().unwrap(),
            "{plugin}"
        );
        assert_eq!(stdin["cniVersion"], "1.0.0");
        let env = env_of(record);
        assert_eq!(env["CNI_ARGS"], "K8S_POD_NAME=web;IgnoreUnknown=1");
        assert_eq!(
            env["CNI_NETNS"], "",
            "the caller's (empty) netns, never the stale cached path"
        );
    }
    assert!(dels[2].1["stdin"]["runtimeConfig"]["portMappings"].is_array());
    assert!(
        fx.cni.cached_result(&added, &bare).await.unwrap().is_none(),
        "entry removed"
    );

    // Nothing cached any more: the current config runs, without prevResult, and succeeds.
    fx.cni
        .del_network_list(&changed, &bare)
        .await
        .expect("second DEL");
    let dels = fx.records_of("DEL");
    assert_eq!(dels.len(), 4);
    assert_eq!(dels[3].0, "other");
    assert!(dels[3].1["stdin"].get("prevResult").is_none());
    assert_eq!(env_of(&dels[3].1)["CNI_NETNS"], "");
}

#[tokio::test]
async fn del_passes_prev_result_only_from_0_4_0() {
    let fx = Fixture::new(&["first", "second", "third"]);
    for (version, has_prev) in [("0.3.1", false), ("0.4.0", true)] {
        let net = chain(&fx, version);
        let rt = rt(&format!("c-{}", version.replace('.', "")));
        fx.cni.add_network_list(&net, &rt).await.unwrap();
        fx.cni.del_network_list(&net, &rt).await.unwrap();
        let dels = fx.records_of("DEL");
        let last = &dels.last().unwrap().1["stdin"];
        assert_eq!(last.get("prevResult").is_some(), has_prev, "{version}");
        assert_eq!(last["cniVersion"], version);
    }
}

#[tokio::test]
async fn check_needs_0_4_0_a_cached_result_and_honours_disable_check() {
    let fx = Fixture::new(&["first", "second", "third"]);
    let old = chain(&fx, "0.3.1");
    let err = fx
        .cni
        .check_network_list(&old, &rt("c1"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::CheckNotSupported { version, .. } if *version == Version::V0_3_1),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        r#"network "testnet" has version 0.3.1, which does not support the CHECK command (0.4.0 or later needed)"#
    );

    let net = chain(&fx, "1.0.0");
    let err = fx
        .cni
        .check_network_list(&net, &rt("c1"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NoCachedResult { .. }), "{err}");
    assert!(err.to_string().contains("container c1"), "{err}");
    assert!(fx.plugins.records().is_empty(), "nothing ran");

    let mut disabled = net.clone();
    disabled.list.disable_check = true;
    fx.cni
        .check_network_list(&disabled, &rt("c1"))
        .await
        .unwrap();
    assert!(fx.plugins.records().is_empty(), "disableCheck: nothing ran");

    let result = fx.cni.add_network_list(&net, &rt("c1")).await.unwrap();
    fx.cni
        .check_network_list(&net, &rt("c1"))
        .await
        .expect("CHECK");
    let checks = fx.records_of("CHECK");
    let order: Vec<&str> = checks.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(order, ["first", "second", "third"]);
    for (_, record) in &checks {
        assert_eq!(
            record["stdin"]["prevResult"],
            result.to_json_value().unwrap()
        );
        assert_eq!(env_of(record)["CNI_COMMAND"], "CHECK");
    }
}

#[tokio::test]
async fn status_and_gc_only_from_1_1_0_and_gc_honours_disable_gc() {
    let fx = Fixture::new(&["first", "second"]);
    let plugins = vec![
        fx.plugin("first", json!({})),
        fx.plugin("second", json!({"passPrevResult": true})),
    ];
    let old = network("gcnet", "1.0.0", plugins.clone());
    fx.cni
        .status_network_list(&old)
        .await
        .expect("STATUS on 1.0.0");
    fx.cni
        .gc_network_list(&old, &[])
        .await
        .expect("GC on 1.0.0");
    assert!(fx.plugins.records().is_empty(), "nothing ran for 1.0.0");

    let net = network("gcnet", "1.1.0", plugins);
    fx.cni.status_network_list(&net).await.expect("STATUS");
    let status = fx.records_of("STATUS");
    assert_eq!(status.len(), 2);
    let mut env = env_of(&status[0].1);
    env.remove("PATH");
    assert_eq!(
        env,
        BTreeMap::from([
            ("CNI_COMMAND".to_owned(), "STATUS".to_owned()),
            (
                "CNI_PATH".to_owned(),
                fx.plugins.path().display().to_string()
            ),
        ])
    );

    let keep = RuntimeConf::new("keep", "/run/netns/a", "eth0");
    let stale = RuntimeConf::new("stale", "/run/netns/b", "eth0");
    fx.cni.add_network_list(&net, &keep).await.unwrap();
    fx.cni.add_network_list(&net, &stale).await.unwrap();

    let mut disabled = net.clone();
    disabled.list.disable_gc = true;
    fx.cni.gc_network_list(&disabled, &[]).await.unwrap();
    assert!(fx.records_of("GC").is_empty() && fx.records_of("DEL").is_empty());
    assert_eq!(fx.cni.cached_attachments(None).await.unwrap().len(), 2);

    let valid = [GcAttachment::new("keep", "eth0")];
    fx.cni.gc_network_list(&net, &valid).await.expect("GC");
    let dels = fx.records_of("DEL");
    assert_eq!(dels.len(), 2, "stale attachment deleted by both plugins");
    assert!(
        dels.iter()
            .all(|(_, r)| env_of(r)["CNI_CONTAINERID"] == "stale")
    );
    let left = fx.cni.cached_attachments(None).await.unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].container_id, "keep");

    let gcs = fx.records_of("GC");
    assert_eq!(gcs.len(), 2);
    let want = json!([{"containerID": "keep", "ifname": "eth0"}]);
    for (_, record) in &gcs {
        assert_eq!(record["stdin"]["cni.dev/valid-attachments"], want);
        assert_eq!(record["stdin"]["cni.dev/attachments"], want);
        assert_eq!(record["stdin"]["name"], "gcnet");
        let mut env = env_of(record);
        env.remove("PATH");
        assert_eq!(env.keys().collect::<Vec<_>>(), ["CNI_COMMAND", "CNI_PATH"]);
    }
}

#[tokio::test]
async fn plugin_error_is_typed() {
    let fx = Fixture::new(&["first", "second"]);
    let net = network(
        "errnet",
        "1.0.0",
        vec![
            fx.plugin("first", json!({})),
            fx.plugin(
                "second",
                json!({"fail": {"code": 117, "msg": "no luck", "details": "try tomorrow"},
                       "stderr": "second says hi", "failOn": ["ADD"]}),
            ),
        ],
    );
    let err = fx.cni.add_network_list(&net, &rt("c9")).await.unwrap_err();
    let Error::Plugin {
        plugin,
        command,
        network,
        container_id,
        error,
        stderr_tail,
    } = &err
    else {
        panic!("want Error::Plugin, got {err}");
    };
    assert_eq!(
        (
            plugin.as_str(),
            *command,
            network.as_str(),
            container_id.as_str()
        ),
        ("second", "ADD", "errnet", "c9")
    );
    assert_eq!(
        (error.code, error.msg.as_str(), error.details.as_str()),
        (117, "no luck", "try tomorrow")
    );
    assert_eq!(stderr_tail, "second says hi");
    assert_eq!(
        err.to_string(),
        r#"plugin "second" failed (ADD) on network "errnet", container c9: code 117 (plugin-specific error): no luck; try tomorrow; stderr: second says hi"#
    );
    assert!(
        fx.cni.cached_attachments(None).await.unwrap().is_empty(),
        "failed ADD caches nothing"
    );
}

#[tokio::test]
async fn garbage_and_crashes_name_the_plugin_and_its_stderr() {
    let fx = Fixture::new(&["bad"]);
    let cases = [
        (
            json!({"garbage": true, "stderr": "diag: half a result"}),
            "diag: half a result",
        ),
        (
            json!({"crash": "abort", "stderr": "about to abort"}),
            "about to abort",
        ),
        (
            json!({"crash": "exit3-no-json"}),
            "fake plugin crashed on purpose",
        ),
        (
            json!({"result": {"cniVersion": "1.0.0", "ips": [{"address": "not-an-ip"}]}, "stderr": "bad ip"}),
            "bad ip",
        ),
    ];
    for (i, (fake, stderr)) in cases.into_iter().enumerate() {
        let net = network("badnet", "1.0.0", vec![fx.plugin("bad", fake.clone())]);
        let err = fx
            .cni
            .add_network_list(&net, &rt(&format!("c{i}")))
            .await
            .unwrap_err();
        let text = err.to_string();
        assert!(text.starts_with(r#"plugin "bad" "#), "{fake}: {text}");
        assert!(text.contains(stderr), "{fake}: {text}");
        match (&fake["crash"], &err) {
            (Value::String(c), Error::PluginExec { source, .. }) if c == "abort" => {
                assert!(
                    matches!(
                        **source,
                        Error::Failed {
                            status: PluginStatus::Signal(6),
                            ..
                        }
                    ),
                    "{text}"
                );
            }
            (Value::String(_), Error::PluginExec { .. })
            | (Value::Null, Error::InvalidResult { .. }) => {}
            _ => panic!("{fake}: unexpected {err:?}"),
        }
    }
}

#[tokio::test]
async fn results_are_converted_to_the_list_version() {
    let fx = Fixture::new(&["old"]);
    let net = network(
        "convnet",
        "1.0.0",
        vec![fx.plugin("old", json!({"resultVersion": "0.4.0"}))],
    );
    let result = fx.cni.add_network_list(&net, &rt("c1")).await.unwrap();
    assert_eq!(result.cni_version(), Version::V1_0_0);
    let as_031 = result.to_version(Version::V0_3_1).unwrap();
    assert_eq!(as_031.to_json_value().unwrap()["ips"][0]["version"], "4");
    let cached = fx.cni.cached_result(&net, &rt("c1")).await.unwrap();
    assert_eq!(cached, Some(result));
}

#[tokio::test]
async fn runtime_conf_is_validated_before_anything_runs() {
    let fx = Fixture::new(&["first"]);
    let net = network("vnet", "1.0.0", vec![fx.plugin("first", json!({}))]);
    let cases = [
        (RuntimeConf::new("../evil", "/n", "eth0"), "container_id"),
        (RuntimeConf::new("", "/n", "eth0"), "container_id"),
        (RuntimeConf::new("c1", "/n", "eth0/x"), "if_name"),
        (
            RuntimeConf::new("c1", "/n", "waytoolonginterface"),
            "if_name",
        ),
        (RuntimeConf::new("c1", "", "eth0"), "netns"),
        (
            RuntimeConf::new("c1", "/n", "eth0").with_arg("a;b", "c"),
            "args",
        ),
    ];
    for (rt, want) in cases {
        let err = fx.cni.add_network_list(&net, &rt).await.unwrap_err();
        assert!(
            matches!(&err, Error::InvalidRuntimeConf { field, .. } if *field == want),
            "{rt:?}: {err}"
        );
        assert!(err.to_string().contains(want), "{err}");
    }
    assert!(fx.plugins.records().is_empty());
}

#[tokio::test]
async fn teardown_from_the_cache_alone() {
    let fx = Fixture::new(&["first", "second", "third"]);
    let net = chain(&fx, "1.0.0");
    fx.cni.add_network_list(&net, &rt("pod-a")).await.unwrap();
    fx.cni.add_network_list(&net, &rt("pod-b")).await.unwrap();
    let mine = fx.cni.cached_attachments(Some("pod-a")).await.unwrap();
    assert_eq!(mine.len(), 1);
    assert_eq!(
        (mine[0].network.as_str(), mine[0].if_name.as_str()),
        ("testnet", "eth0")
    );
    fx.cni.del_cached_attachment(&mine[0]).await.expect("DEL");
    let dels = fx.records_of("DEL");
    assert_eq!(dels.len(), 3);
    assert!(
        dels.iter()
            .all(|(_, r)| env_of(r)["CNI_CONTAINERID"] == "pod-a")
    );
    let left = fx.cni.cached_attachments(None).await.unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].container_id, "pod-b");
}

fn copy_binary(fx: &Fixture, name: &str) -> std::path::PathBuf {
    let dest = fx.plugins.path().join(name);
    let tmp = fx.plugins.path().join(format!(".{name}.new"));
    std::fs::copy(test_support::fake_plugin::binary(), &tmp).unwrap();
    std::fs::rename(&tmp, &dest).unwrap();
    dest
}

#[tokio::test]
async fn version_answers_are_cached_per_binary() {
    let fx = Fixture::new(&[]);
    let plugin = copy_binary(&fx, "vplug");
    let sidecar = json!({"record": fx.plugins.record_path()});
    std::fs::write(
        format!("{}.fake.json", plugin.display()),
        sidecar.to_string(),
    )
    .unwrap();
    let mut with_caps = fx.plugin("vplug", json!({}));
    with_caps["capabilities"] = json!({"portMappings": true, "bandwidth": false});
    let mut second = fx.plugin("vplug", json!({}));
    second["capabilities"] = json!({"bandwidth": true, "portMappings": true});
    let net = network("vnet", "1.0.0", vec![with_caps, second]);

    let caps = fx.cni.validate_network_list(&net).await.expect("valid");
    assert_eq!(caps, ["portMappings", "bandwidth"]);
    fx.cni
        .validate_network_list(&net)
        .await
        .expect("valid again");
    let versions = fx.records_of("VERSION");
    assert_eq!(versions.len(), 1, "one VERSION exec for two validations");
    let mut env = env_of(&versions[0].1);
    env.remove("PATH");
    assert_eq!(
        env,
        BTreeMap::from([("CNI_COMMAND".to_owned(), "VERSION".to_owned())])
    );
    assert_eq!(versions[0].1["stdin"], json!({"cniVersion": "1.1.0"}));

    // A new binary (new inode) under the same name is asked again.
    copy_binary(&fx, "vplug");
    fx.cni.validate_network_list(&net).await.expect("valid");
    assert_eq!(fx.records_of("VERSION").len(), 2);
    let info = fx.cni.plugin_version("vplug").await.unwrap();
    assert!(info.supported_versions.contains(&"1.1.0".to_owned()));
    assert_eq!(fx.records_of("VERSION").len(), 2);
}

#[tokio::test]
async fn validation_lists_every_problem() {
    let fx = Fixture::new(&["old", "good"]);
    std::fs::write(
        fx.plugins.path().join("old.fake.json"),
        json!({"supportedVersions": ["0.3.1", "0.4.0"]}).to_string(),
    )
    .unwrap();
    let mut good = fx.plugin("good", json!({}));
    good["ipam"] = json!({"type": "no-such-ipam"});
    let net = network(
        "vnet",
        "1.0.0",
        vec![
            fx.plugin("old", json!({})),
            good,
            fx.plugin("missing", json!({})),
        ],
    );
    let err = fx.cni.validate_network_list(&net).await.unwrap_err();
    let Error::Validation { network, errors } = &err else {
        panic!("want Validation, got {err}");
    };
    assert_eq!(network, "vnet");
    assert_eq!(errors.len(), 3, "{err}");
    assert!(
        matches!(&errors[0], Error::UnsupportedVersion { plugin, supported, .. }
            if plugin == "old" && supported == &["0.3.1", "0.4.0"]),
        "{err}"
    );
    assert!(matches!(&errors[1], Error::PluginNotFound { name, .. } if name == "no-such-ipam"));
    assert!(matches!(&errors[2], Error::PluginNotFound { name, .. } if name == "missing"));
    let text = err.to_string();
    assert!(
        text.starts_with(r#"network "vnet" is not usable: plugin "old" does not support the network's version 1.0.0 (it supports: 0.3.1, 0.4.0); plugin "no-such-ipam" not found in "#),
        "{text}"
    );
}

/// A failed ADD used to be left as it was: no DEL, and its pending entry removed, so the veth,
/// lease and rules of the plugins before the failing one stayed with no owner. The list is now
/// DELed with the same configuration and arguments; when that DEL fails too, the pending entry
/// stays for GC.
#[tokio::test]
async fn a_failed_add_is_undone_by_a_del_or_left_to_gc() {
    let fx = Fixture::new(&["first", "second"]);
    let failing = |fail_del: bool| {
        let fail_on = if fail_del {
            json!(["ADD", "DEL"])
        } else {
            json!(["ADD"])
        };
        network(
            "undo",
            "1.0.0",
            vec![
                fx.plugin("first", json!({})),
                fx.plugin(
                    "second",
                    json!({"fail": {"code": 11, "msg": "no addresses left"}, "failOn": fail_on}),
                ),
            ],
        )
    };
    fx.cni
        .add_network_list(&failing(false), &rt("c1"))
        .await
        .unwrap_err();
    let dels: Vec<String> = fx.records_of("DEL").into_iter().map(|(p, _)| p).collect();
    assert_eq!(
        dels,
        ["second", "first"],
        "the whole list is DELed, newest first"
    );
    for (_, record) in fx.records_of("DEL") {
        assert_eq!(
            env_of(&record)["CNI_ARGS"],
            "K8S_POD_NAME=web;IgnoreUnknown=1"
        );
        assert_eq!(env_of(&record)["CNI_CONTAINERID"], "c1");
    }
    assert!(fx.cni.cached_attachments(None).await.unwrap().is_empty());

    fx.cni
        .add_network_list(&failing(true), &rt("c2"))
        .await
        .unwrap_err();
    let left = fx.cni.cached_attachments(None).await.unwrap();
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(left[0].container_id, "c2");
    assert!(
        left[0].result.is_none(),
        "the pending entry, for GC to finish"
    );
}

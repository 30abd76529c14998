//! The fake plugin's own contract: what runtime authors rely on when they use it as a test double.

use cni_exec::{Error, Exec, ProcessExec};
use serde_json::{Value, json};

use crate::support::{PluginDir, cni_env};

async fn run(dir: &PluginDir, command: &str, stdin: &[u8]) -> Result<Value, Error> {
    let plugin = dir.path().join("fake");
    if !plugin.exists() {
        dir.install_fake("fake");
    }
    let stdout = ProcessExec::new()
        .exec_plugin(&plugin, &cni_env(command, "container-1"), stdin)
        .await?
        .stdout;
    if stdout.is_empty() {
        return Ok(Value::Null);
    }
    Ok(serde_json::from_slice(&stdout).expect("fake prints JSON"))
}

fn spec_error(err: Error) -> Value {
    match err {
        Error::Failed { stdout, .. } => serde_json::from_slice(&stdout).expect("spec error JSON"),
        other => panic!("want Failed, got {other}"),
    }
}

#[tokio::test]
async fn canned_results_have_the_shape_of_their_version() {
    let dir = PluginDir::new();
    for version in ["0.2.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"] {
        let stdin = dir.config(json!({"resultVersion": version}));
        let result = run(&dir, "ADD", &stdin).await.expect("ADD succeeds");
        assert_eq!(result["cniVersion"], version);
        let address = if version == "0.2.0" {
            assert!(result.get("ips").is_none());
            result["ip4"]["ip"].as_str().expect("ip4.ip").to_owned()
        } else {
            let ip = &result["ips"][0];
            assert_eq!(
                ip.get("version").is_some(),
                version.starts_with("0."),
                "{version}"
            );
            assert_eq!(result["interfaces"][0]["name"], "eth0");
            ip["address"].as_str().expect("address").to_owned()
        };
        assert!(
            address.starts_with("10.88.") && address.ends_with("/16"),
            "{address}"
        );
    }
}

#[tokio::test]
async fn address_is_stable_per_container() {
    let dir = PluginDir::new();
    let plugin = dir.install_fake("fake");
    let stdin = dir.config(json!({}));
    let mut addresses = Vec::new();
    for id in ["a", "a", "b"] {
        let out = ProcessExec::new()
            .exec_plugin(&plugin, &cni_env("ADD", id), &stdin)
            .await
            .expect("ADD succeeds")
            .stdout;
        let v: Value = serde_json::from_slice(&out).expect("JSON");
        addresses.push(v["ips"][0]["address"].as_str().expect("address").to_owned());
    }
    assert_eq!(addresses[0], addresses[1]);
    assert_ne!(addresses[0], addresses[2]);
}

#[tokio::test]
async fn pass_prev_result_echoes_it() {
    let dir = PluginDir::new();
    let prev = json!({"cniVersion": "1.0.0", "ips": [{"address": "192.0.2.7/24"}]});
    let mut config: Value =
        serde_json::from_slice(&dir.config(json!({"passPrevResult": true}))).expect("config");
    config["prevResult"] = prev.clone();
    let stdin = serde_json::to_vec(&config).expect("serialize");
    assert_eq!(run(&dir, "ADD", &stdin).await.expect("ADD"), prev);
}

#[tokio::test]
async fn fail_on_limits_failure_to_the_listed_commands() {
    let dir = PluginDir::new();
    let stdin = dir.config(json!({"fail": {"code": 11, "msg": "try again"}, "failOn": ["DEL"]}));
    assert!(run(&dir, "ADD", &stdin).await.is_ok());
    let err = spec_error(run(&dir, "DEL", &stdin).await.expect_err("DEL fails"));
    assert_eq!(err["code"], 11);
    assert_eq!(err["msg"], "try again");
}

#[tokio::test]
async fn version_reports_what_it_is_told() {
    let dir = PluginDir::new();
    let all = run(&dir, "VERSION", br#"{"cniVersion":"1.1.0"}"#)
        .await
        .expect("VERSION");
    assert_eq!(all["cniVersion"], "1.1.0");
    assert!(all["supportedVersions"].as_array().expect("list").len() >= 7);

    let stdin = dir.config(json!({"supportedVersions": ["0.4.0"]}));
    let some = run(&dir, "VERSION", &stdin).await.expect("VERSION");
    assert_eq!(some["supportedVersions"], json!(["0.4.0"]));
}

#[tokio::test]
async fn bad_input_gets_spec_errors_not_panics() {
    let dir = PluginDir::new();
    let err = spec_error(run(&dir, "ADD", b"{not json").await.expect_err("bad stdin"));
    assert_eq!(err["code"], 6);
    let err = spec_error(run(&dir, "FROB", b"{}").await.expect_err("bad command"));
    assert_eq!(err["code"], 4);
}

#[tokio::test]
async fn env_override_beats_the_config() {
    let dir = PluginDir::new();
    let plugin = dir.install_fake("fake");
    let mut env = cni_env("ADD", "c1");
    env.push((
        "CNI_FAKE".into(),
        r#"{"fail":{"code":5,"msg":"from env"}}"#.into(),
    ));
    let err = ProcessExec::new()
        .exec_plugin(&plugin, &env, &dir.config(json!({"garbage": true})))
        .await
        .expect_err("override makes it fail");
    assert_eq!(spec_error(err)["msg"], "from env");
}

#[tokio::test]
async fn concurrent_invocations_record_whole_lines() {
    let dir = PluginDir::new();
    let plugin = dir.install_fake("fake");
    // A long stdin makes each record line several KiB.
    let stdin = dir.config(json!({"padding": "p".repeat(8000)}));
    let exec = ProcessExec::new();
    let runs: Vec<_> = (0..16)
        .map(|i| {
            let (exec, plugin, stdin) = (exec.clone(), plugin.clone(), stdin.clone());
            tokio::spawn(async move {
                exec.exec_plugin(&plugin, &cni_env("CHECK", &format!("c{i}")), &stdin)
                    .await
            })
        })
        .collect();
    for run in runs {
        run.await.expect("task").expect("CHECK succeeds");
    }
    // `records` parses every line: an interleaved write would fail here.
    let records = dir.records();
    assert_eq!(records.len(), 16);
    assert!(records.iter().all(|r| r["command"] == "CHECK"));
}

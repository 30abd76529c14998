//! The launcher running plugins inside a "node" network namespace, as tests and benchmarks do.

use std::os::unix::fs::MetadataExt;
use std::time::Duration;

use cni_exec::{Error, Exec, ProcessExec};
use serde_json::json;
use test_support::netns::NetNs;
use test_support::process::wait_dead;

use crate::support::{PluginDir, cni_env, wait_child_record};

#[tokio::test]
#[ignore = "needs root + netns: cargo xtask test"]
async fn launcher_runs_the_plugin_in_the_namespace() {
    let ns = NetNs::new("cniexec");
    let dir = PluginDir::new();
    let plugin = dir.script("whereami", "stat -L -c %i /proc/self/ns/net");
    let stdout = ProcessExec::new()
        .with_launcher(ns.launcher())
        .exec_plugin(&plugin, &cni_env("ADD", "n1"), b"{}")
        .await
        .expect("plugin runs through ip netns exec")
        .stdout;
    let want = std::fs::metadata(ns.path()).expect("namespace file").ino();
    assert_eq!(String::from_utf8_lossy(&stdout).trim(), want.to_string());
}

#[tokio::test]
#[ignore = "needs root + netns: cargo xtask test"]
async fn timeout_through_the_launcher_kills_the_group() {
    let ns = NetNs::new("cniexec");
    let dir = PluginDir::new();
    let plugin = dir.install_fake("hanger");
    let err = ProcessExec::new()
        .with_launcher(ns.launcher())
        .with_timeout(Duration::from_millis(700))
        .exec_plugin(
            &plugin,
            &cni_env("ADD", "n2"),
            &dir.config(json!({"spawnChild": true})),
        )
        .await
        .expect_err("plugin hangs");
    assert!(matches!(err, Error::Timeout { .. }), "{err}");
    let (pid, child) = wait_child_record(&dir).await;
    assert!(wait_dead(pid).await, "plugin {pid} survived");
    assert!(wait_dead(child).await, "grandchild {child} survived");
}

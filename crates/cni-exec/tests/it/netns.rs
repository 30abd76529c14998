//! The launcher running plugins inside a "node" network namespace, as tests and benchmarks do.

use std::os::unix::fs::MetadataExt;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use cni_exec::{Error, Exec, ProcessExec};
use serde_json::json;
use test_support::process::wait_dead;

use crate::support::{PluginDir, cni_env, wait_child_record};

/// A network namespace of our own, deleted on drop.
struct NetNs {
    name: String,
}

impl NetNs {
    fn new() -> Self {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "cniexec-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let status = Command::new("ip")
            .args(["netns", "add", &name])
            .status()
            .expect("run ip netns add");
        assert!(status.success(), "cannot create network namespace {name}");
        Self { name }
    }

    fn launcher(&self) -> [&str; 4] {
        ["ip", "netns", "exec", &self.name]
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "delete", &self.name])
            .status();
    }
}

#[tokio::test]
#[ignore = "needs root + netns: cargo xtask test"]
async fn launcher_runs_the_plugin_in_the_namespace() {
    let ns = NetNs::new();
    let dir = PluginDir::new();
    let plugin = dir.script("whereami", "stat -L -c %i /proc/self/ns/net");
    let stdout = ProcessExec::new()
        .with_launcher(ns.launcher())
        .exec_plugin(&plugin, &cni_env("ADD", "n1"), b"{}")
        .await
        .expect("plugin runs through ip netns exec");
    let want = std::fs::metadata(format!("/run/netns/{}", ns.name))
        .expect("namespace file")
        .ino();
    assert_eq!(String::from_utf8_lossy(&stdout).trim(), want.to_string());
}

#[tokio::test]
#[ignore = "needs root + netns: cargo xtask test"]
async fn timeout_through_the_launcher_kills_the_group() {
    let ns = NetNs::new();
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

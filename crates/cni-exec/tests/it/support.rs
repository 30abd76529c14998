//! Helpers shared by the integration tests.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tempfile::TempDir;
use test_support::{fake_plugin, fs::write_executable};

/// A temporary plugin directory with a record file next to it.
pub(crate) struct PluginDir {
    pub(crate) dir: TempDir,
}

impl PluginDir {
    pub(crate) fn new() -> Self {
        Self {
            dir: tempfile::tempdir().expect("create temp dir"),
        }
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Links the fake plugin into the directory as `name` and returns its path.
    pub(crate) fn install_fake(&self, name: &str) -> PathBuf {
        fake_plugin::install(self.dir.path(), name)
    }

    /// Writes an executable shell script called `name`.
    pub(crate) fn script(&self, name: &str, body: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        write_executable(&path, &format!("#!/bin/sh\n{body}\n"));
        path
    }

    /// Where the fake plugin records its invocations in these tests.
    pub(crate) fn record_path(&self) -> PathBuf {
        self.dir.path().join("record.jsonl")
    }

    /// A network configuration whose `fake` object is `fake` plus `"record"`.
    pub(crate) fn config(&self, mut fake: Value) -> Vec<u8> {
        fake["record"] = json!(self.record_path());
        serde_json::to_vec(&json!({
            "cniVersion": "1.0.0",
            "name": "testnet",
            "type": "fake",
            "fake": fake,
        }))
        .expect("serialize config")
    }

    /// Every invocation recorded so far.
    pub(crate) fn records(&self) -> Vec<Value> {
        let Ok(text) = std::fs::read_to_string(self.record_path()) else {
            return Vec::new();
        };
        text.lines()
            .map(|l| serde_json::from_str(l).expect("record line is JSON"))
            .collect()
    }
}

/// The `CNI_*` variables of an invocation.
pub(crate) fn cni_env(command: &str, container: &str) -> Vec<(String, String)> {
    [
        ("CNI_COMMAND", command),
        ("CNI_CONTAINERID", container),
        ("CNI_NETNS", "/var/run/netns/test"),
        ("CNI_IFNAME", "eth0"),
        ("CNI_PATH", "/opt/cni/bin"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

/// Waits up to five seconds for a record with a `childPid`, returning (pid, childPid).
pub(crate) async fn wait_child_record(dir: &PluginDir) -> (u64, u64) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        // Read the raw file: a half-written line must not fail the parse in `records`.
        let text = std::fs::read_to_string(dir.record_path()).unwrap_or_default();
        if let Some(rec) = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|r| r.get("childPid").is_some())
        {
            let pid = rec["pid"].as_u64().expect("pid");
            let child = rec["childPid"].as_u64().expect("childPid");
            return (pid, child);
        }
        assert!(
            Instant::now() < deadline,
            "fake plugin never recorded its child"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A `Cni` over a temporary plugin directory of fake plugins and a temporary cache directory.
pub(crate) struct Fixture {
    pub(crate) plugins: PluginDir,
    pub(crate) cache_dir: TempDir,
    pub(crate) cni: cni_exec::Cni,
}

impl Fixture {
    /// Links the fake plugin under each of `names`.
    pub(crate) fn new(names: &[&str]) -> Self {
        let plugins = PluginDir::new();
        for name in names {
            plugins.install_fake(name);
        }
        let cache_dir = tempfile::tempdir().expect("create cache dir");
        let cni = cni_exec::Cni::new(
            std::sync::Arc::new(cni_exec::ProcessExec::new()),
            vec![plugins.path().to_owned()],
            cache_dir.path().to_owned(),
        );
        Self {
            plugins,
            cache_dir,
            cni,
        }
    }

    /// A plugin object of `type` whose `fake` object is `fake` plus the record file.
    pub(crate) fn plugin(&self, plugin_type: &str, mut fake: Value) -> Value {
        fake["record"] = json!(self.plugins.record_path());
        json!({"type": plugin_type, "fake": fake})
    }

    /// The records of one command, as (plugin type, record).
    pub(crate) fn records_of(&self, command: &str) -> Vec<(String, Value)> {
        self.plugins
            .records()
            .into_iter()
            .filter(|r| r["command"] == command)
            .map(|r| (r["stdin"]["type"].as_str().unwrap_or("").to_owned(), r))
            .collect()
    }
}

/// A validated network list of `version` named `name` with these plugin objects.
pub(crate) fn network(name: &str, version: &str, plugins: Vec<Value>) -> cni_config::NetworkList {
    let bytes = serde_json::to_vec(&json!({
        "cniVersion": version,
        "name": name,
        "plugins": plugins,
    }))
    .expect("serialize list");
    cni_config::parse_conflist(&bytes).expect("valid list")
}

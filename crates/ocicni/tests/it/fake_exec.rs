//! An in-process [`Exec`] that answers like CNI plugins and records every call, and the temporary
//! "node" (configuration, plugin and cache directories) the facade tests run against.
//!
//! A plugin is "installed" when a file of its name exists in the temporary plugin directory, so
//! installing one is also a change the configuration watcher sees.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use ocicni::cni_exec::{self, Exec, PluginOutput, PluginStatus};
use ocicni::{NetworkSelection, Ocicni, OcicniBuilder, PodNetwork, WatchPolicy};
use serde_json::{Value, json};
use tempfile::TempDir;

/// Every version the fake plugins claim to support.
pub(crate) const SUPPORTED: [&str; 7] = [
    "0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0",
];

/// How long a test waits for the watcher before it fails.
pub(crate) const DEADLINE: Duration = Duration::from_secs(10);

/// One plugin invocation, as the plugin saw it.
#[derive(Debug, Clone)]
pub(crate) struct Call {
    /// The plugin's file name.
    pub(crate) plugin: String,
    /// `CNI_COMMAND`.
    pub(crate) command: String,
    /// The whole environment the caller passed.
    pub(crate) env: BTreeMap<String, String>,
    /// Stdin parsed as JSON (`Null` when it is not JSON).
    pub(crate) stdin: Value,
}

impl Call {
    /// A variable of the environment; empty when unset.
    pub(crate) fn var(&self, name: &str) -> &str {
        self.env.get(name).map_or("", String::as_str)
    }

    /// The network name on stdin.
    pub(crate) fn network(&self) -> &str {
        self.stdin["name"].as_str().unwrap_or_default()
    }
}

#[derive(Default)]
struct State {
    calls: Mutex<Vec<Call>>,
    failures: Mutex<HashMap<(String, String), (u32, String)>>,
    /// Failures for the next call only.
    failures_once: Mutex<HashMap<(String, String), (u32, String)>>,
    hangs: Mutex<HashMap<(String, String), Duration>>,
    addresses: AtomicU32,
}

/// The fake executor; clones share their record and their programmed behaviour.
#[derive(Clone, Default)]
pub(crate) struct FakeExec {
    state: Arc<State>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl FakeExec {
    /// Every call so far, in order.
    pub(crate) fn calls(&self) -> Vec<Call> {
        lock(&self.state.calls).clone()
    }

    /// The calls of one command (`ADD`, `DEL`, ...), in order.
    pub(crate) fn calls_of(&self, command: &str) -> Vec<Call> {
        self.calls()
            .into_iter()
            .filter(|c| c.command == command)
            .collect()
    }

    /// The calls that are not VERSION probes (those come and go with configuration reloads).
    pub(crate) fn pod_calls(&self) -> Vec<Call> {
        self.calls()
            .into_iter()
            .filter(|c| c.command != "VERSION")
            .collect()
    }

    /// The plugins that ran `command`, in order.
    pub(crate) fn plugins_of(&self, command: &str) -> Vec<String> {
        self.calls_of(command)
            .into_iter()
            .map(|c| c.plugin)
            .collect()
    }

    /// The commands of [`FakeExec::pod_calls`], in order.
    pub(crate) fn pod_commands(&self) -> Vec<String> {
        self.pod_calls().into_iter().map(|c| c.command).collect()
    }

    /// `network:ifname` of every call of `command`, in order.
    pub(crate) fn attachments_of(&self, command: &str) -> Vec<String> {
        self.calls_of(command)
            .iter()
            .map(|c| format!("{}:{}", c.network(), c.var("CNI_IFNAME")))
            .collect()
    }

    /// The first call of `command` that `plugin` got.
    pub(crate) fn call_to(&self, plugin: &str, command: &str) -> Option<Call> {
        self.calls_of(command)
            .into_iter()
            .find(|c| c.plugin == plugin)
    }

    /// Makes `plugin` fail `command` with the spec's error object `{code, msg}`.
    pub(crate) fn fail(&self, plugin: &str, command: &str, code: u32, msg: &str) {
        lock(&self.state.failures).insert(
            (plugin.to_owned(), command.to_owned()),
            (code, msg.to_owned()),
        );
    }

    /// Makes `plugin` fail its next `command` only, with `{code, msg}`.
    pub(crate) fn fail_once(&self, plugin: &str, command: &str, code: u32, msg: &str) {
        lock(&self.state.failures_once).insert(
            (plugin.to_owned(), command.to_owned()),
            (code, msg.to_owned()),
        );
    }

    /// Makes `plugin` wait `how_long` before answering `command`.
    pub(crate) fn hang(&self, plugin: &str, command: &str, how_long: Duration) {
        lock(&self.state.hangs).insert((plugin.to_owned(), command.to_owned()), how_long);
    }

    fn add_result(&self, stdin: &Value, env: &BTreeMap<String, String>) -> Value {
        if let Some(prev) = stdin.get("prevResult") {
            return prev.clone();
        }
        let version = stdin["cniVersion"].as_str().unwrap_or("1.0.0").to_owned();
        let n = self.state.addresses.fetch_add(1, Ordering::Relaxed);
        let address = format!("10.88.{}.{}/16", n / 250, n % 250 + 2);
        let get = |k: &str| env.get(k).cloned().unwrap_or_default();
        if version == "0.1.0" || version == "0.2.0" {
            return json!({"cniVersion": version, "ip4": {"ip": address, "gateway": "10.88.0.1"}});
        }
        let mut ip = json!({"address": address, "gateway": "10.88.0.1", "interface": 0});
        if version.starts_with("0.") {
            ip["version"] = json!("4");
        }
        json!({
            "cniVersion": version,
            "interfaces": [{
                "name": get("CNI_IFNAME"),
                "mac": format!("0a:58:0a:58:{:02x}:{:02x}", n / 250, n % 250 + 2),
                "sandbox": get("CNI_NETNS"),
            }],
            "ips": [ip],
        })
    }
}

#[async_trait]
impl Exec for FakeExec {
    async fn find_plugin(&self, name: &str, dirs: &[PathBuf]) -> cni_exec::Result<PathBuf> {
        if let Some(found) = dirs.iter().map(|d| d.join(name)).find(|p| p.is_file()) {
            return Ok(found);
        }
        cni_exec::find_plugin_in(name, dirs)
    }

    async fn exec_plugin(
        &self,
        plugin: &Path,
        env: &[(String, String)],
        stdin: &[u8],
    ) -> cni_exec::Result<PluginOutput> {
        let name = plugin
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let env: BTreeMap<String, String> = env.iter().cloned().collect();
        let command = env.get("CNI_COMMAND").cloned().unwrap_or_default();
        let stdin: Value = serde_json::from_slice(stdin).unwrap_or(Value::Null);
        lock(&self.state.calls).push(Call {
            plugin: name.clone(),
            command: command.clone(),
            env: env.clone(),
            stdin: stdin.clone(),
        });
        let key = (name, command.clone());
        let hang = lock(&self.state.hangs).get(&key).copied();
        if let Some(how_long) = hang {
            tokio::time::sleep(how_long).await;
        }
        let once = lock(&self.state.failures_once).remove(&key);
        let failure = once.or_else(|| lock(&self.state.failures).get(&key).cloned());
        if let Some((code, msg)) = failure {
            let error = json!({"cniVersion": "1.1.0", "code": code, "msg": msg});
            return Err(cni_exec::Error::Failed {
                plugin: plugin.to_owned(),
                status: PluginStatus::Code(1),
                stdout: error.to_string().into_bytes(),
                stderr_tail: String::new(),
            });
        }
        let out = match command.as_str() {
            "VERSION" => json!({"cniVersion": "1.1.0", "supportedVersions": SUPPORTED}),
            "ADD" => self.add_result(&stdin, &env),
            _ => return Ok(PluginOutput::default()),
        };
        Ok(PluginOutput {
            stdout: out.to_string().into_bytes(),
            stderr_tail: String::new(),
        })
    }
}

/// A node of one's own: configuration, plugin and cache directories, and the fake executor.
pub(crate) struct Node {
    pub(crate) conf: TempDir,
    pub(crate) plugins: TempDir,
    pub(crate) cache: TempDir,
    pub(crate) fake: FakeExec,
}

impl Node {
    /// Empty directories and no plugin installed.
    pub(crate) fn new() -> Self {
        let dir = || tempfile::tempdir().expect("create temp dir");
        Node {
            conf: dir(),
            plugins: dir(),
            cache: dir(),
            fake: FakeExec::default(),
        }
    }

    /// A node with these plugins installed.
    pub(crate) fn with_plugins(plugins: &[&str]) -> Self {
        let node = Node::new();
        for p in plugins {
            node.install(p);
        }
        node
    }

    /// A node with the plugin `fake` installed and, for each name, a file `10-{name}.conflist`
    /// holding [`simple`] network of that name and version.
    pub(crate) fn with_fake_networks(version: &str, names: &[&str]) -> Self {
        let node = Node::with_plugins(&["fake"]);
        for name in names {
            node.write_conf(&format!("10-{name}.conflist"), &simple(name, version));
        }
        node
    }

    pub(crate) fn conf_dir(&self) -> &Path {
        self.conf.path()
    }

    /// Creates the plugin file `name` (an executable the fake never runs).
    pub(crate) fn install(&self, name: &str) {
        test_support::fs::write_executable(&self.plugins.path().join(name), "#!/bin/sh\nexit 1\n");
    }

    /// Writes a configuration file atomically (a hidden temporary name the loader ignores, then a
    /// rename), so the watcher never sees half a file.
    pub(crate) fn write_conf(&self, file: &str, config: &Value) {
        let tmp = self.conf.path().join(format!(".{file}.tmp"));
        std::fs::write(&tmp, serde_json::to_vec_pretty(config).expect("json")).expect("write");
        std::fs::rename(&tmp, self.conf.path().join(file)).expect("rename");
    }

    pub(crate) fn remove_conf(&self, file: &str) {
        std::fs::remove_file(self.conf.path().join(file)).expect("remove conf");
    }

    /// A builder on this node's directories and fake, with inotify and no loopback.
    pub(crate) fn builder(&self) -> OcicniBuilder {
        Ocicni::builder()
            .conf_dir(self.conf.path())
            .plugin_dirs([self.plugins.path()])
            .cache_dir(self.cache.path())
            .run_dir(self.run_dir())
            .exec(Arc::new(self.fake.clone()))
            .loopback(false)
            .watch(WatchPolicy::Inotify)
    }

    pub(crate) async fn start(&self) -> Ocicni {
        self.builder().build().await.expect("build ocicni")
    }

    /// Builds on [`Node::builder`] as `configure` changes it.
    pub(crate) async fn start_with(
        &self,
        configure: impl FnOnce(OcicniBuilder) -> OcicniBuilder,
    ) -> Ocicni {
        configure(self.builder())
            .build()
            .await
            .expect("build ocicni")
    }

    /// The run directory (locks, pending cache entries), inside the cache's temporary dir.
    pub(crate) fn run_dir(&self) -> std::path::PathBuf {
        self.cache.path().join("run")
    }

    /// The files of the result cache, then the pending entries (as `pending/<name>`).
    pub(crate) fn cache_entries(&self) -> Vec<String> {
        test_support::fs::cache_entries(
            &self.cache.path().join("results"),
            &self.run_dir().join("pending"),
        )
    }

    /// A pod whose namespace path does not exist (nothing here enters it).
    pub(crate) fn pod(&self, id: &str) -> PodNetwork {
        PodNetwork {
            name: format!("{id}-name"),
            namespace: "ns".into(),
            id: id.into(),
            uid: format!("{id}-uid"),
            netns: self
                .cache
                .path()
                .join("no-such-netns")
                .join(id)
                .display()
                .to_string(),
            ..PodNetwork::default()
        }
    }

    /// [`Node::pod`] asking for these networks by name.
    pub(crate) fn pod_on(&self, id: &str, networks: &[&str]) -> PodNetwork {
        PodNetwork {
            networks: networks.iter().map(|n| NetworkSelection::new(*n)).collect(),
            ..self.pod(id)
        }
    }
}

/// A network configuration list.
pub(crate) fn conflist(name: &str, version: &str, plugins: &[Value]) -> Value {
    json!({"cniVersion": version, "name": name, "plugins": plugins})
}

/// A network configuration list whose only plugin is `fake`.
pub(crate) fn simple(name: &str, version: &str) -> Value {
    conflist(name, version, &[plugin("fake")])
}

/// One plugin entry of a list.
pub(crate) fn plugin(plugin_type: &str) -> Value {
    json!({"type": plugin_type})
}

/// One plugin entry declaring capabilities.
pub(crate) fn plugin_with_caps(plugin_type: &str, caps: &[&str]) -> Value {
    let caps: serde_json::Map<String, Value> = caps
        .iter()
        .map(|c| ((*c).to_owned(), json!(true)))
        .collect();
    json!({"type": plugin_type, "capabilities": caps})
}

/// Waits until `done` holds, re-checking after every configuration load; fails the test after
/// [`DEADLINE`].
pub(crate) async fn wait_until(ocicni: &Ocicni, what: &str, done: impl Fn(&Ocicni) -> bool) {
    let give_up = tokio::time::Instant::now() + DEADLINE;
    loop {
        let generation = ocicni.generation();
        if done(ocicni) {
            return;
        }
        let waited =
            tokio::time::timeout_at(give_up, ocicni.wait_for_generation_after(generation)).await;
        assert!(
            waited.is_ok(),
            "gave up after {DEADLINE:?} waiting for {what}"
        );
    }
}

/// Waits until the default network is `want`.
pub(crate) async fn wait_for_default(ocicni: &Ocicni, want: Option<&str>) {
    use ocicni::CniPlugin as _;
    wait_until(ocicni, &format!("default network {want:?}"), |o| {
        o.default_network_name().as_deref() == want
    })
    .await;
}

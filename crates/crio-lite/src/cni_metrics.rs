//! Feeds the plugin-latency histogram: an `Exec` that times every plugin run it passes on.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use ocicni::cni_exec::{self, Exec, PluginOutput};
use serde::Deserialize;

use crate::metrics::Metrics;

/// Wraps the executor ocicni runs plugins with, and observes each run in
/// `crio_lite_cni_plugin_duration_seconds` by network, plugin and command.
pub struct MeteredExec {
    inner: Arc<dyn Exec>,
    metrics: Metrics,
}

impl MeteredExec {
    /// Times every plugin run of `inner` into `metrics`.
    pub fn new(inner: Arc<dyn Exec>, metrics: Metrics) -> Self {
        MeteredExec { inner, metrics }
    }

    fn observe(&self, plugin: &Path, env: &[(String, String)], stdin: &[u8], started: Instant) {
        // The network's name is in the plugin's stdin; VERSION has none.
        #[derive(Deserialize)]
        struct Named {
            #[serde(default)]
            name: String,
        }
        let network = serde_json::from_slice::<Named>(stdin)
            .map(|n| n.name)
            .unwrap_or_default();
        let command = env
            .iter()
            .find(|(k, _)| k == "CNI_COMMAND")
            .map_or("", |(_, v)| v.as_str());
        let plugin = plugin
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default();
        self.metrics
            .observe_cni_plugin(&network, &plugin, command, started.elapsed());
    }
}

#[async_trait]
impl Exec for MeteredExec {
    async fn find_plugin(&self, name: &str, dirs: &[PathBuf]) -> cni_exec::Result<PathBuf> {
        self.inner.find_plugin(name, dirs).await
    }

    async fn exec_plugin(
        &self,
        plugin: &Path,
        env: &[(String, String)],
        stdin: &[u8],
    ) -> cni_exec::Result<Vec<u8>> {
        let started = Instant::now();
        let out = self.inner.exec_plugin(plugin, env, stdin).await;
        self.observe(plugin, env, stdin, started);
        out
    }

    async fn exec_plugin_output(
        &self,
        plugin: &Path,
        env: &[(String, String)],
        stdin: &[u8],
    ) -> cni_exec::Result<PluginOutput> {
        let started = Instant::now();
        let out = self.inner.exec_plugin_output(plugin, env, stdin).await;
        self.observe(plugin, env, stdin, started);
        out
    }
}

//! Prometheus metrics served at `GET /metrics`.
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `crio_lite_sandbox_operations_total` | counter | `operation` (run, stop, remove), `outcome` (success, error) |
//! | `crio_lite_sandboxes_ready` | gauge | |
//! | `crio_lite_cni_plugin_duration_seconds` | histogram | `network`, `plugin`, `command` (ADD, DEL, CHECK, GC, STATUS) |
//!
//! The plugin histogram is fed by the executor ocicni runs plugins with (see `cni_metrics`); an
//! empty family prints nothing, so its `# TYPE` line appears with the first plugin run.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The labels of one plugin execution: the network, the plugin's type (binary name), the command.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PluginLabels {
    network: String,
    plugin: String,
    command: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OperationLabels {
    operation: String,
    outcome: String,
}

type CniPluginLatency = Family<PluginLabels, Histogram, fn() -> Histogram>;

fn plugin_histogram() -> Histogram {
    // 5 ms to about 41 s: plugins range from a veth pair to a slow IPAM server.
    Histogram::new(exponential_buckets(0.005, 2.0, 14))
}

/// The daemon's metrics and their registry. Cheap to clone; clones share everything.
#[derive(Debug, Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    registry: Mutex<Registry>,
    operations: Family<OperationLabels, Counter>,
    plugin_latency: CniPluginLatency,
    sandboxes_ready: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// A registry with the daemon's metrics in it.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("crio_lite");
        let operations = Family::<OperationLabels, Counter>::default();
        registry.register(
            "sandbox_operations",
            "Sandbox operations by kind and outcome",
            operations.clone(),
        );
        let plugin_latency: CniPluginLatency = Family::new_with_constructor(plugin_histogram);
        registry.register(
            "cni_plugin_duration_seconds",
            "CNI plugin execution latency by network, plugin and command",
            plugin_latency.clone(),
        );
        let sandboxes_ready = Gauge::default();
        registry.register(
            "sandboxes_ready",
            "Sandboxes in the ready state",
            sandboxes_ready.clone(),
        );
        Metrics {
            inner: Arc::new(Inner {
                registry: Mutex::new(registry),
                operations,
                plugin_latency,
                sandboxes_ready,
            }),
        }
    }

    /// Records one plugin execution.
    pub fn observe_cni_plugin(&self, network: &str, plugin: &str, command: &str, took: Duration) {
        let labels = PluginLabels {
            network: network.to_owned(),
            plugin: plugin.to_owned(),
            command: command.to_owned(),
        };
        self.inner
            .plugin_latency
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
    }

    pub(crate) fn sandbox_operation(&self, operation: &str, ok: bool) {
        let labels = OperationLabels {
            operation: operation.to_owned(),
            outcome: if ok { "success" } else { "error" }.to_owned(),
        };
        self.inner.operations.get_or_create(&labels).inc();
    }

    pub(crate) fn set_sandboxes_ready(&self, count: usize) {
        self.inner
            .sandboxes_ready
            .set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// Everything in the Prometheus text format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        let registry = self
            .inner
            .registry
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &registry) {
            tracing::error!(error = %e, "cannot encode metrics");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_and_plugin_latency_show_up() {
        let metrics = Metrics::new();
        metrics.sandbox_operation("run", true);
        metrics.sandbox_operation("run", false);
        metrics.set_sandboxes_ready(3);
        metrics.observe_cni_plugin("podnet", "bridge", "ADD", Duration::from_millis(12));
        let text = metrics.encode();
        assert!(
            text.contains(
                r#"crio_lite_sandbox_operations_total{operation="run",outcome="success"} 1"#
            ),
            "{text}"
        );
        assert!(
            text.contains(
                r#"crio_lite_sandbox_operations_total{operation="run",outcome="error"} 1"#
            ),
            "{text}"
        );
        assert!(text.contains("crio_lite_sandboxes_ready 3"), "{text}");
        assert!(text.contains(r#"crio_lite_cni_plugin_duration_seconds_count{network="podnet",plugin="bridge",command="ADD"} 1"#), "{text}");
    }
}

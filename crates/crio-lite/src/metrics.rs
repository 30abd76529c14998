//! Prometheus metrics served at `GET /metrics`.
//!
//! Named as CRI-O's where the meaning is the same (`crio_operations*`, by CRI method), with
//! `crio_lite_` for what only crio-lite has:
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `crio_operations_total` | counter | `operation_type` (the CRI method: `RunPodSandbox`, ...) |
//! | `crio_operations_errors_total` | counter | `operation_type` |
//! | `crio_operations_latency_seconds` | histogram | `operation_type` |
//! | `crio_lite_sandbox_operations_total` | counter | `operation` (run, stop, remove), `outcome` (success, error) |
//! | `crio_lite_sandboxes_ready` | gauge | |
//! | `crio_lite_cni_plugin_duration_seconds` | histogram | `network`, `plugin` (its type), `implementation` (`builtin` or `binary`), `command` (ADD, DEL, CHECK, GC, STATUS) |
//! | `crio_image_pulls_bytes_total` | counter | |
//! | `crio_image_pulls_success_total` | counter | |
//! | `crio_image_pulls_failure_total` | counter | |
//! | `crio_image_layer_reuse_total` | counter | |
//! | `crio_lite_image_pull_duration_seconds` | histogram | |
//!
//! The image metrics are fed by the [`image_store::Progress`] observer of every pull
//! ([`Metrics::image_progress`]): bytes of layer blobs as they download, layers whose blob was
//! already stored, and each `PullImage` (joined or refused ones too) with its outcome and
//! duration. CRI-O labels pulls by image name (and bytes by media type and size); that is a
//! label per image a node ever pulled, so here they carry no label: which image failed is in
//! the log.
//!
//! The plugin histogram is fed by the executor ocicni runs plugins with (see `cni_metrics`); an
//! empty family prints nothing, so its `# TYPE` line appears with the first plugin run.
//!
//! The text is OpenMetrics 1.0 for a scraper that asks for it (`Accept:
//! application/openmetrics-text`), else Prometheus' text format 0.0.4, which differs in that a
//! counter's `# TYPE` names its `_total` sample and there is no `# EOF`.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The labels of one plugin execution: the network, the plugin's type, whether it ran built in
/// or as a binary, the command.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PluginLabels {
    network: String,
    plugin: String,
    implementation: String,
    command: String,
}

/// The kind of an open stream: `exec`, `attach` or `port_forward`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StreamLabels {
    kind: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OperationLabels {
    operation: String,
    outcome: String,
}

/// CRI-O's label for a CRI method.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RpcLabels {
    operation_type: String,
}

type RpcLatency = Family<RpcLabels, Histogram, fn() -> Histogram>;

fn rpc_histogram() -> Histogram {
    // 100 us to about 13 s: from a status read to a set-up waiting on a slow plugin.
    Histogram::new(exponential_buckets(0.0001, 2.0, 18))
}

/// The text formats `/metrics` can answer in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    /// OpenMetrics 1.0 text.
    OpenMetrics,
    /// Prometheus' text exposition format 0.0.4.
    Prometheus,
}

impl Format {
    /// What a scraper's `Accept` header asks for: OpenMetrics only when it names it.
    pub(crate) fn from_accept(accept: Option<&str>) -> Format {
        match accept {
            Some(accept) if accept.contains("application/openmetrics-text") => Format::OpenMetrics,
            _ => Format::Prometheus,
        }
    }

    /// The `Content-Type` of a body in this format.
    pub(crate) fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Format::Prometheus => "text/plain; version=0.0.4; charset=utf-8",
        }
    }
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
    rpcs: Family<RpcLabels, Counter>,
    rpc_errors: Family<RpcLabels, Counter>,
    rpc_latency: RpcLatency,
    operations: Family<OperationLabels, Counter>,
    plugin_latency: CniPluginLatency,
    sandboxes_ready: Gauge,
    pulls: ImagePulls,
    streams_open: Family<StreamLabels, Gauge>,
    /// The streaming server, read at each scrape; weak, so metrics that outlive a daemon (a
    /// test's, or across an in-process restart) do not keep its server, and through it the
    /// domain and the image store's lock, alive.
    streams: std::sync::OnceLock<std::sync::Weak<cri_streaming::server::ServerHandle>>,
}

/// The image pull metrics, fed by a pull's progress.
#[derive(Debug, Clone)]
struct ImagePulls {
    bytes: Counter,
    success: Counter,
    failure: Counter,
    layer_reuse: Counter,
    duration: Histogram,
}

impl image_store::Progress for ImagePulls {
    fn bytes(&self, _image: &str, _layer: &image_store::Digest, n: u64) {
        self.bytes.inc_by(n);
    }

    fn layer_done(&self, _image: &str, _layer: &image_store::Digest, reused: bool) {
        if reused {
            self.layer_reuse.inc();
        }
    }

    fn pull_done(&self, _image: &str, ok: bool, _bytes: u64, took: Duration) {
        if ok { &self.success } else { &self.failure }.inc();
        self.duration.observe(took.as_secs_f64());
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// A registry with the daemon's metrics in it.
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let rpcs = Family::<RpcLabels, Counter>::default();
        registry.register("crio_operations", "CRI operations by method", rpcs.clone());
        let rpc_errors = Family::<RpcLabels, Counter>::default();
        registry.register(
            "crio_operations_errors",
            "CRI operations that failed, by method",
            rpc_errors.clone(),
        );
        let rpc_latency: RpcLatency = Family::new_with_constructor(rpc_histogram);
        registry.register(
            "crio_operations_latency_seconds",
            "CRI operation latency by method",
            rpc_latency.clone(),
        );
        let operations = Family::<OperationLabels, Counter>::default();
        registry.register(
            "crio_lite_sandbox_operations",
            "Sandbox operations by kind and outcome",
            operations.clone(),
        );
        let plugin_latency: CniPluginLatency = Family::new_with_constructor(plugin_histogram);
        registry.register(
            "crio_lite_cni_plugin_duration_seconds",
            "CNI plugin execution latency by network, plugin, implementation and command",
            plugin_latency.clone(),
        );
        let sandboxes_ready = Gauge::default();
        registry.register(
            "crio_lite_sandboxes_ready",
            "Sandboxes in the ready state",
            sandboxes_ready.clone(),
        );
        let streams_open = Family::<StreamLabels, Gauge>::default();
        registry.register(
            "crio_lite_streams_open",
            "Exec, attach and port forward streams open, by kind",
            streams_open.clone(),
        );
        let pulls = ImagePulls {
            bytes: Counter::default(),
            success: Counter::default(),
            failure: Counter::default(),
            layer_reuse: Counter::default(),
            // 100 ms to about 27 min: from a warm pull to a big image on a slow link.
            duration: Histogram::new(exponential_buckets(0.1, 2.0, 15)),
        };
        registry.register(
            "crio_image_pulls_bytes",
            "Bytes of image layers downloaded",
            pulls.bytes.clone(),
        );
        registry.register(
            "crio_image_pulls_success",
            "Image pulls that succeeded",
            pulls.success.clone(),
        );
        registry.register(
            "crio_image_pulls_failure",
            "Image pulls that failed",
            pulls.failure.clone(),
        );
        registry.register(
            "crio_image_layer_reuse",
            "Image layers already in the store, not downloaded",
            pulls.layer_reuse.clone(),
        );
        registry.register(
            "crio_lite_image_pull_duration_seconds",
            "How long image pulls took, failed ones too",
            pulls.duration.clone(),
        );
        Metrics {
            inner: Arc::new(Inner {
                registry: Mutex::new(registry),
                rpcs,
                rpc_errors,
                rpc_latency,
                operations,
                plugin_latency,
                sandboxes_ready,
                pulls,
                streams_open,
                streams: std::sync::OnceLock::new(),
            }),
        }
    }

    /// Records one plugin execution: `plugin` is its type, `implementation` says whether it ran
    /// built in or as a binary.
    pub fn observe_cni_plugin(
        &self,
        network: &str,
        plugin: &str,
        implementation: ocicni::Implementation,
        command: &str,
        took: Duration,
    ) {
        let labels = PluginLabels {
            network: network.to_owned(),
            plugin: plugin.to_owned(),
            implementation: implementation.as_str().to_owned(),
            command: command.to_owned(),
        };
        self.inner
            .plugin_latency
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
    }

    /// The observer to give every image pull (see
    /// [`PullOptions::with_progress`](image_store::PullOptions::with_progress)): it feeds the
    /// `crio_image_*` metrics.
    pub fn image_progress(&self) -> Arc<dyn image_store::Progress> {
        Arc::new(self.inner.pulls.clone())
    }

    /// Records one CRI call: `method` as the CRI names it (`RunPodSandbox`).
    pub(crate) fn observe_rpc(&self, method: &str, ok: bool, took: Duration) {
        let labels = RpcLabels {
            operation_type: method.to_owned(),
        };
        self.inner.rpcs.get_or_create(&labels).inc();
        if !ok {
            self.inner.rpc_errors.get_or_create(&labels).inc();
        }
        self.inner
            .rpc_latency
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

    /// Everything, in Prometheus' text format 0.0.4.
    pub fn encode(&self) -> String {
        self.encode_as(Format::Prometheus)
    }

    /// Reads the streams `server` has open at each scrape.
    pub(crate) fn watch_streams(&self, server: &Arc<cri_streaming::server::ServerHandle>) {
        let _ = self.inner.streams.set(Arc::downgrade(server));
    }

    /// Everything, in `format`.
    pub(crate) fn encode_as(&self, format: Format) -> String {
        if let Some(server) = self.inner.streams.get().and_then(std::sync::Weak::upgrade) {
            let open = server.open_streams();
            for (kind, n) in [
                ("exec", open.exec),
                ("attach", open.attach),
                ("port_forward", open.port_forward),
            ] {
                self.inner
                    .streams_open
                    .get_or_create(&StreamLabels {
                        kind: kind.to_owned(),
                    })
                    .set(i64::try_from(n).unwrap_or(i64::MAX));
            }
        }
        let mut out = String::new();
        let registry = self
            .inner
            .registry
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &registry) {
            tracing::error!(error = %e, "cannot encode metrics");
        }
        drop(registry);
        match format {
            Format::OpenMetrics => out,
            Format::Prometheus => openmetrics_to_prometheus(&out),
        }
    }
}

/// OpenMetrics text as Prometheus' 0.0.4 text: a counter family's `# HELP`/`# TYPE` name its
/// `_total` samples, `unknown` is `untyped`, and `# UNIT` and `# EOF` go (0.0.4 has neither).
fn openmetrics_to_prometheus(text: &str) -> String {
    let counters: std::collections::HashSet<&str> = text
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .filter_map(|rest| rest.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let rewritten = ["# HELP ", "# TYPE "].iter().find_map(|prefix| {
            let rest = line.strip_prefix(prefix)?;
            let (name, tail) = rest.split_once(' ')?;
            let tail = if *prefix == "# TYPE " && tail == "unknown" {
                "untyped"
            } else {
                tail
            };
            let name = if counters.contains(name) {
                format!("{name}_total")
            } else {
                name.to_owned()
            };
            Some(format!("{prefix}{name} {tail}"))
        });
        out.push_str(rewritten.as_deref().unwrap_or(line));
        out.push('\n');
    }
    out
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
        metrics.observe_cni_plugin(
            "podnet",
            "bridge",
            ocicni::Implementation::Builtin,
            "ADD",
            Duration::from_millis(12),
        );
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
        assert!(text.contains(r#"crio_lite_cni_plugin_duration_seconds_count{network="podnet",plugin="bridge",implementation="builtin",command="ADD"} 1"#), "{text}");
    }

    #[test]
    fn image_pulls_count_bytes_outcomes_reuse_and_duration() {
        let metrics = Metrics::new();
        let progress = metrics.image_progress();
        let layer = image_store::Digest::of(b"layer");
        progress.layer_started("img", &layer, 30);
        progress.bytes("img", &layer, 10);
        progress.bytes("img", &layer, 20);
        progress.layer_done("img", &layer, false);
        progress.layer_done("img", &layer, true);
        progress.pull_done("img", true, 30, Duration::from_millis(300));
        progress.pull_done("img", false, 0, Duration::from_secs(2));
        let text = metrics.encode();
        for line in [
            "# TYPE crio_image_pulls_bytes_total counter",
            "crio_image_pulls_bytes_total 30",
            "crio_image_pulls_success_total 1",
            "crio_image_pulls_failure_total 1",
            "crio_image_layer_reuse_total 1",
            "# TYPE crio_lite_image_pull_duration_seconds histogram",
            "crio_lite_image_pull_duration_seconds_count 2",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
        }
    }
}

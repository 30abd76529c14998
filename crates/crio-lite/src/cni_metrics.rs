//! Feeds the plugin-latency histogram from every plugin run ocicni makes.

use std::sync::Arc;

use ocicni::cni_exec::{Exec, ObservedExec, PluginRun};

use crate::metrics::Metrics;

/// Wraps the executor ocicni runs plugins with, so that each run is observed in
/// `crio_lite_cni_plugin_duration_seconds` by network, plugin and command.
pub(crate) fn metered(inner: Arc<dyn Exec>, metrics: Metrics) -> Arc<dyn Exec> {
    Arc::new(ObservedExec::new(inner, move |run: &PluginRun<'_>| {
        metrics.observe_cni_plugin(
            &run.network(),
            &run.plugin_name(),
            run.command(),
            run.elapsed,
        );
    }))
}

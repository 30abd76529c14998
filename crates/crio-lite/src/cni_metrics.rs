//! Feeds the plugin-latency histogram from every plugin run ocicni makes, built in or binary.

use std::sync::Arc;

use ocicni::cni_exec::PluginRun;
use ocicni::{PluginImplementation, PluginObserver};

use crate::metrics::Metrics;

/// The observer ocicni tells of each plugin run, so that it is counted in
/// `crio_lite_cni_plugin_duration_seconds` by network, plugin type, implementation and command.
pub(crate) fn metered(metrics: Metrics) -> PluginObserver {
    Arc::new(move |run: &PluginRun<'_>| {
        let which = PluginImplementation::from_path(run.plugin);
        metrics.observe_cni_plugin(
            &run.network(),
            &which.plugin,
            which.implementation,
            run.command(),
            run.elapsed,
        );
    })
}

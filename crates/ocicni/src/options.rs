//! How an [`Ocicni`](crate::Ocicni) is configured.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use cni_builtin::Preference;
use cni_exec::{Exec, PluginRun};

use crate::args::CniArgsPolicy;
use crate::builtin::BuiltinNetwork;

/// The configuration directory Go ocicni and CRI-O read.
pub const DEFAULT_CONF_DIR: &str = "/etc/cni/net.d";

/// Where pod locks and the cache entries of set-ups in progress live unless told otherwise.
pub const DEFAULT_RUN_DIR: &str = "/run/ocicni";

/// How the configuration and plugin directories are followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum WatchPolicy {
    /// inotify, with a periodic rescan as a safety net (falls back to polling if inotify is
    /// unavailable).
    #[default]
    Inotify,
    /// Compare the directories every interval, for hosts that limit inotify instances.
    Poll(Duration),
    /// Reload only when asked ([`crate::CniPlugin::reload`]) or when a pod names a network that
    /// is not loaded.
    Off,
}

/// When pod status runs the CHECK verb.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum CheckPolicy {
    /// Status comes from the cached result alone. CHECK raced with veth MAC changes and failed
    /// healthy pods for CRI-O users, so it is opt-in.
    #[default]
    Never,
    /// Status runs CHECK on networks whose version supports it (0.4.0 and later).
    Always,
}

/// A callback told of every plugin run, built-in or binary (see [`crate::OcicniBuilder::observer`]).
pub type PluginObserver = Arc<dyn Fn(&PluginRun<'_>) + Send + Sync>;

/// Everything [`crate::OcicniBuilder`] collects.
#[derive(Clone)]
pub(crate) struct Options {
    pub(crate) conf_dir: PathBuf,
    pub(crate) plugin_dirs: Vec<PathBuf>,
    pub(crate) cache_dir: PathBuf,
    pub(crate) run_dir: PathBuf,
    pub(crate) default_network: Option<String>,
    pub(crate) watch: WatchPolicy,
    pub(crate) plugin_timeout: Duration,
    pub(crate) lock_timeout: Duration,
    pub(crate) cni_args: CniArgsPolicy,
    pub(crate) check: CheckPolicy,
    pub(crate) parallel_attach: bool,
    pub(crate) loopback: bool,
    pub(crate) builtin: Option<BuiltinNetwork>,
    pub(crate) exec: Option<Arc<dyn Exec>>,
    pub(crate) builtin_plugins: Preference,
    pub(crate) observer: Option<PluginObserver>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            conf_dir: PathBuf::from(DEFAULT_CONF_DIR),
            plugin_dirs: cni_exec::default_plugin_dirs(),
            cache_dir: PathBuf::from(cni_exec::DEFAULT_CACHE_DIR),
            run_dir: PathBuf::from(DEFAULT_RUN_DIR),
            default_network: None,
            watch: WatchPolicy::default(),
            plugin_timeout: cni_exec::DEFAULT_TIMEOUT,
            lock_timeout: Duration::from_secs(300),
            cni_args: CniArgsPolicy::default(),
            check: CheckPolicy::default(),
            parallel_attach: false,
            loopback: true,
            builtin: None,
            exec: None,
            builtin_plugins: Preference::default(),
            observer: None,
        }
    }
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("conf_dir", &self.conf_dir)
            .field("plugin_dirs", &self.plugin_dirs)
            .field("cache_dir", &self.cache_dir)
            .field("run_dir", &self.run_dir)
            .field("default_network", &self.default_network)
            .field("watch", &self.watch)
            .field("plugin_timeout", &self.plugin_timeout)
            .field("cni_args", &self.cni_args)
            .field("check", &self.check)
            .field("parallel_attach", &self.parallel_attach)
            .field("loopback", &self.loopback)
            .field("builtin", &self.builtin)
            .field("custom_exec", &self.exec.is_some())
            .field("builtin_plugins", &self.builtin_plugins)
            .field("observer", &self.observer.is_some())
            .finish_non_exhaustive()
    }
}

//! Building an [`Ocicni`]: every setting with Go ocicni's default.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use cni_builtin::Preference;
use cni_exec::Exec;
use ipnet::IpNet;

use super::Ocicni;
use crate::args::CniArgsPolicy;
use crate::builtin::BuiltinNetwork;
use crate::error::Result;
use crate::options::{CheckPolicy, Options, PluginObserver, WatchPolicy};

/// kubelet-style settings a runtime may pass at start-up; they shape the built-in default network.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InitSettings {
    /// Whether pods may reach themselves through a service IP (bridge `hairpinMode`).
    pub hairpin_mode: Option<bool>,
    /// Traffic to this range is not masqueraded (informational; reported in status).
    pub non_masquerade_cidr: Option<IpNet>,
    /// The MTU of pod interfaces on the built-in bridge.
    pub mtu: Option<u32>,
}

/// Builds an [`Ocicni`]; every setting has the Go ocicni default.
#[derive(Debug, Default)]
pub struct OcicniBuilder {
    opts: Options,
}

impl OcicniBuilder {
    /// The configuration directory (default `/etc/cni/net.d`).
    #[must_use]
    pub fn conf_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.opts.conf_dir = dir.into();
        self
    }

    /// The plugin directories, searched in order (default `/opt/cni/bin`, `/usr/lib/cni`).
    #[must_use]
    pub fn plugin_dirs<I, P>(mut self, dirs: I) -> Self
    where
        I: IntoIterator<Item = P>,
        P: Into<PathBuf>,
    {
        self.opts.plugin_dirs = dirs.into_iter().map(Into::into).collect();
        self
    }

    /// The cache directory shared with libcni (default `/var/lib/cni`): complete results only.
    #[must_use]
    pub fn cache_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.opts.cache_dir = dir.into();
        self
    }

    /// The run directory (default [`DEFAULT_RUN_DIR`](crate::DEFAULT_RUN_DIR), `/run/ocicni`):
    /// pod locks in `locks/` and the cache entries of set-ups in progress in `pending/`. Both
    /// only matter while processes run, so they belong on the tmpfs `/run` is on any systemd
    /// host, where they cost no disk I/O. Processes that share a cache directory must share
    /// this one too, or their locks do not exclude each other.
    #[must_use]
    pub fn run_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.opts.run_dir = dir.into();
        self
    }

    /// A fixed default network; without one, the first usable network in file order is the
    /// default and is chosen again on every reload.
    #[must_use]
    pub fn default_network(mut self, name: impl Into<String>) -> Self {
        self.opts.default_network = Some(name.into());
        self
    }

    /// How configuration changes are noticed (default inotify).
    #[must_use]
    pub fn watch(mut self, policy: WatchPolicy) -> Self {
        self.opts.watch = policy;
        self
    }

    /// How long one plugin invocation may run before it and its children are killed.
    #[must_use]
    pub fn plugin_timeout(mut self, timeout: Duration) -> Self {
        self.opts.plugin_timeout = timeout;
        self
    }

    /// How long set-up, teardown and GC wait for a pod's lock.
    #[must_use]
    pub fn lock_timeout(mut self, timeout: Duration) -> Self {
        self.opts.lock_timeout = timeout;
        self
    }

    /// Which CNI_ARGS are added (default [`CniArgsPolicy::Plain`]).
    #[must_use]
    pub fn cni_args(mut self, policy: CniArgsPolicy) -> Self {
        self.opts.cni_args = policy;
        self
    }

    /// When pod status runs CHECK (default never).
    #[must_use]
    pub fn check(mut self, policy: CheckPolicy) -> Self {
        self.opts.check = policy;
        self
    }

    /// Attach a pod's networks all at once instead of in order.
    #[must_use]
    pub fn parallel_attach(mut self, on: bool) -> Self {
        self.opts.parallel_attach = on;
        self
    }

    /// Bring `lo` up inside the pod's namespace before attaching (default on). Turn it off when
    /// the runtime attaches a loopback network itself, as containerd's go-cni does.
    #[must_use]
    pub fn loopback(mut self, on: bool) -> Self {
        self.opts.loopback = on;
        self
    }

    /// Use this network when the configuration directory holds none (off by default).
    #[must_use]
    pub fn builtin_default(mut self, network: Option<BuiltinNetwork>) -> Self {
        self.opts.builtin = network;
        self
    }

    /// Run plugin binaries through this executor instead of a
    /// [`ProcessExec`](cni_exec::ProcessExec) with the plugin timeout. The built-in plugins
    /// (see [`builtin_plugins`](Self::builtin_plugins)) sit in front of it.
    #[must_use]
    pub fn exec(mut self, exec: Arc<dyn Exec>) -> Self {
        self.opts.exec = Some(exec);
        self
    }

    /// When a plugin runs in-process ([`cni_builtin`]) instead of as a binary (default
    /// [`Preference::PreferBinary`]: the binary when a plugin directory has it, the built-in
    /// when none does, so a node without CNI plugins still gets `bridge`, `host-local` and
    /// `loopback`). Decided per plugin, so a chain may mix both. A built-in's path is
    /// `builtin:<type>` wherever a binary's path would appear.
    #[must_use]
    pub fn builtin_plugins(mut self, preference: Preference) -> Self {
        self.opts.builtin_plugins = preference;
        self
    }

    /// Tells `observer` of every plugin run, built-in or binary, after it ends: a runtime's
    /// metrics. [`PluginRun::plugin`](cni_exec::PluginRun) is `builtin:<type>` for a built-in.
    #[must_use]
    pub fn observer(mut self, observer: PluginObserver) -> Self {
        self.opts.observer = Some(observer);
        self
    }

    /// Loads the configuration and starts watching it.
    ///
    /// # Errors
    ///
    /// [`Error::Watch`](crate::Error::Watch) when the watcher cannot start (no tokio runtime with timers).
    pub async fn build(self) -> Result<Ocicni> {
        Ocicni::start(self.opts).await
    }
}

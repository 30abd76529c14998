//! [`Ocicni`]: the real [`CniPlugin`], composing config loading, plugin execution, watching and
//! locking. One file per concern: `builder.rs` (the settings), `setup.rs`, `teardown.rs`, `gc.rs`;
//! status lives in the crate's `status.rs`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use async_trait::async_trait;
use cni_builtin::BuiltinExec;
use cni_config::NetworkList;
use cni_exec::{Cni, Exec, ObservedExec, PluginRun, ProcessExec};
use cni_lock::{LockGuard, LockKey, Locks};
use cni_watch::{WatchMode, WatchOptions, Watcher};
use ipnet::IpNet;

use crate::builtin::BuiltinNetwork;
use crate::error::{Error, Result};
use crate::networks::{self, NetworkReport, Networks};
use crate::options::{CheckPolicy, Options, WatchPolicy};
use crate::plugin::CniPlugin;
use crate::pod::{AttachmentResult, NetworkStatus, PodNetwork};
use crate::status;

mod builder;
mod gc;
mod setup;
mod teardown;

pub use builder::{InitSettings, OcicniBuilder};

/// Where, inside the run directory, the cache entries of set-ups in progress live.
const PENDING_SUBDIR: &str = "pending";

/// Reason reported while no network can be used, as CRI-O reports it.
pub const NOT_READY_REASON: &str = "NetworkPluginNotReady";

/// kubelet's network plugin event for a changed pod CIDR, and the key of its detail.
pub const EVENT_POD_CIDR_CHANGE: &str = "pod-cidr-change";
/// The detail key of [`EVENT_POD_CIDR_CHANGE`].
pub const EVENT_POD_CIDR_KEY: &str = "pod-cidr";

/// The network side of a container runtime: attaches pods to CNI networks.
///
/// Cheap to clone; clones share everything.
#[derive(Clone)]
pub struct Ocicni {
    inner: Arc<Inner>,
}

struct Inner {
    opts: Options,
    cni: Arc<Cni>,
    locks: Locks,
    watcher: Watcher<Networks>,
    pod_cidr: RwLock<Option<IpNet>>,
    settings: Arc<RwLock<InitSettings>>,
}

/// One attachment to make or undo: a network and the interface name inside the pod.
struct Target {
    network: Option<Arc<NetworkList>>,
    name: String,
    ifname: String,
}

/// One line per plugin run, saying which implementation ran it.
fn log_run(run: &PluginRun<'_>) {
    let which = crate::PluginImplementation::from_path(run.plugin);
    tracing::debug!(
        plugin = which.plugin,
        implementation = which.implementation.as_str(),
        path = %which.path.display(),
        command = run.command(),
        container = run.container_id(),
        network = run.network(),
        elapsed_ms = run.elapsed.as_millis(),
        ok = run.ok,
        "plugin ran"
    );
}

impl Ocicni {
    /// A builder with Go ocicni's defaults.
    pub fn builder() -> OcicniBuilder {
        OcicniBuilder::default()
    }

    async fn start(opts: Options) -> Result<Self> {
        let binaries = opts
            .exec
            .clone()
            .unwrap_or_else(|| Arc::new(ProcessExec::new().with_timeout(opts.plugin_timeout)));
        let builtin =
            BuiltinExec::new(binaries, opts.builtin_plugins).with_timeout(opts.plugin_timeout);
        let observer = opts.observer.clone();
        let exec: Arc<dyn Exec> = Arc::new(ObservedExec::new(
            Arc::new(builtin),
            move |run: &PluginRun<'_>| {
                log_run(run);
                if let Some(observer) = &observer {
                    observer(run);
                }
            },
        ));
        let cni = Arc::new(
            Cni::new(exec, opts.plugin_dirs.clone(), opts.cache_dir.clone())
                .with_pending_dir(opts.run_dir.join(PENDING_SUBDIR)),
        );
        let settings = Arc::new(RwLock::new(InitSettings::default()));
        let mut dirs = vec![opts.conf_dir.clone()];
        dirs.extend(opts.plugin_dirs.iter().cloned());
        let mut watch = WatchOptions::new(dirs);
        watch.mode = match opts.watch {
            WatchPolicy::Inotify => WatchMode::Inotify,
            WatchPolicy::Poll(every) => WatchMode::Poll(every),
            WatchPolicy::Off => WatchMode::Manual,
        };
        let loader = {
            let handle = tokio::runtime::Handle::current();
            let cni = Arc::clone(&cni);
            let settings = Arc::clone(&settings);
            let conf_dir = opts.conf_dir.clone();
            let default = opts.default_network.clone();
            let builtin = opts.builtin.clone();
            move || {
                let builtin = builtin.as_ref().map(|b| shaped_builtin(b, &settings));
                handle.block_on(networks::load(
                    &conf_dir,
                    &cni,
                    default.as_deref(),
                    builtin.as_ref(),
                ))
            }
        };
        let watcher = Watcher::start(watch, loader)
            .await
            .map_err(|source| Error::Watch { source })?;
        Ok(Ocicni {
            inner: Arc::new(Inner {
                locks: Locks::under(&opts.run_dir),
                opts,
                cni,
                watcher,
                pod_cidr: RwLock::new(None),
                settings,
            }),
        })
    }

    /// The configuration directory.
    pub fn conf_dir(&self) -> &Path {
        &self.inner.opts.conf_dir
    }

    /// The plugin directories, in search order.
    pub fn plugin_dirs(&self) -> &[PathBuf] {
        &self.inner.opts.plugin_dirs
    }

    /// The cache directory.
    pub fn cache_dir(&self) -> &Path {
        &self.inner.opts.cache_dir
    }

    /// The run directory (locks and pending cache entries).
    pub fn run_dir(&self) -> &Path {
        &self.inner.opts.run_dir
    }

    /// When built-in plugins run instead of binaries.
    pub fn builtin_plugins(&self) -> cni_builtin::Preference {
        self.inner.opts.builtin_plugins
    }

    /// The plugin executor layer, for callers that need a verb this facade does not wrap.
    pub fn cni(&self) -> &Cni {
        &self.inner.cni
    }

    /// The verdict on every configuration file at the last load (and on the built-in network).
    pub fn networks(&self) -> Vec<NetworkReport> {
        self.inner.watcher.current().value.reports.clone()
    }

    /// How many times the configuration has been loaded; grows with every reload.
    pub fn generation(&self) -> u64 {
        self.inner.watcher.current().generation
    }

    /// Waits until a load newer than `generation` is published, and returns its generation.
    pub async fn wait_for_generation_after(&self, generation: u64) -> u64 {
        let mut rx = self.inner.watcher.subscribe();
        let seen = rx
            .wait_for(|s| s.generation > generation)
            .await
            .map(|s| s.generation);
        seen.unwrap_or_else(|_| self.generation())
    }

    /// The capability names the usable networks' plugins declare.
    pub fn capabilities(&self) -> Vec<String> {
        self.inner
            .watcher
            .current()
            .value
            .capabilities
            .iter()
            .cloned()
            .collect()
    }

    /// Applies kubelet-style start-up settings; they shape the built-in default network.
    pub async fn init(&self, settings: InitSettings) {
        if let Ok(mut current) = self.inner.settings.write() {
            *current = settings;
        }
        self.inner.watcher.reload_now().await;
    }

    /// The start-up settings in force.
    pub fn init_settings(&self) -> InitSettings {
        self.inner
            .settings
            .read()
            .map(|s| s.clone())
            .unwrap_or_default()
    }

    /// Handles a kubelet network event; [`EVENT_POD_CIDR_CHANGE`] sets the pod CIDR. Unknown events
    /// are ignored, as kubelet's plugins do.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidEvent`] when the pod CIDR in the details does not parse.
    pub async fn event(&self, name: &str, details: &BTreeMap<String, String>) -> Result<()> {
        if name != EVENT_POD_CIDR_CHANGE {
            tracing::debug!(event = name, "ignoring network event");
            return Ok(());
        }
        let Some(text) = details.get(EVENT_POD_CIDR_KEY) else {
            return Err(Error::InvalidEvent {
                event: name.to_owned(),
                reason: format!("no {EVENT_POD_CIDR_KEY:?} detail"),
            });
        };
        let cidr = text.parse::<IpNet>().map_err(|err| Error::InvalidEvent {
            event: name.to_owned(),
            reason: format!("{EVENT_POD_CIDR_KEY} {text:?}: {err}"),
        })?;
        self.set_pod_cidr(Some(cidr)).await;
        Ok(())
    }

    /// The pod CIDR handed to plugins that declare `ipRanges`.
    pub fn pod_cidr(&self) -> Option<IpNet> {
        self.inner.pod_cidr.read().ok().and_then(|c| *c)
    }

    fn snapshot(&self) -> Arc<Networks> {
        self.inner.watcher.current().value
    }

    pub(crate) fn check_policy(&self) -> CheckPolicy {
        self.inner.opts.check
    }

    /// Takes the GC lock shared, then the pod's lock: the one order every path uses.
    async fn lock_pod(&self, id: &str) -> Result<(LockGuard, LockGuard)> {
        let timeout = self.inner.opts.lock_timeout;
        let gc = self
            .inner
            .locks
            .lock_shared(&LockKey::gc(), timeout)
            .await?;
        let pod = self
            .inner
            .locks
            .lock(&LockKey::container(id), timeout)
            .await?;
        Ok((gc, pod))
    }
}

/// The built-in network with the runtime's init settings applied.
fn shaped_builtin(base: &BuiltinNetwork, settings: &RwLock<InitSettings>) -> BuiltinNetwork {
    let mut net = base.clone();
    if let Ok(s) = settings.read() {
        net.hairpin = s.hairpin_mode.unwrap_or(net.hairpin);
        net.mtu = s.mtu.or(net.mtu);
    }
    net
}

#[async_trait]
impl CniPlugin for Ocicni {
    fn name(&self) -> &'static str {
        "cni"
    }

    fn default_network_name(&self) -> Option<String> {
        self.snapshot()
            .default
            .as_ref()
            .map(|n| n.name().to_owned())
    }

    fn plugin_implementations(&self) -> Vec<crate::PluginImplementation> {
        let mut out: Vec<crate::PluginImplementation> = Vec::new();
        for found in self.networks().into_iter().flat_map(|r| r.implementations) {
            if !out.iter().any(|p| p.plugin == found.plugin) {
                out.push(found);
            }
        }
        out.sort_by(|a, b| a.plugin.cmp(&b.plugin));
        out
    }

    async fn setup_pod(&self, pod: &PodNetwork) -> Result<Vec<AttachmentResult>> {
        self.setup(pod).await
    }

    async fn teardown_pod(&self, pod: &PodNetwork) -> Result<()> {
        self.teardown(pod).await
    }

    async fn pod_network_status(&self, pod: &PodNetwork) -> Result<Vec<AttachmentResult>> {
        let targets = self.existing_targets(pod).await?;
        let mut out = Vec::with_capacity(targets.len());
        for target in &targets {
            out.push(
                status::attachment_status(
                    self,
                    pod,
                    target.network.as_deref(),
                    &target.name,
                    &target.ifname,
                )
                .await?,
            );
        }
        Ok(out)
    }

    async fn gc(&self, valid_pods: &[PodNetwork]) -> Result<()> {
        self.collect_garbage(valid_pods).await
    }

    async fn status(&self) -> NetworkStatus {
        let nets = self.snapshot();
        let Some(default) = nets.default.clone() else {
            return NetworkStatus::not_ready(NOT_READY_REASON, self.no_network(&nets).to_string());
        };
        match self.inner.cni.status_network_list(&default).await {
            Ok(()) => NetworkStatus::ready(),
            Err(err) => NetworkStatus::not_ready(
                NOT_READY_REASON,
                format!("network {}: {err}", default.name()),
            ),
        }
    }

    async fn set_pod_cidr(&self, cidr: Option<IpNet>) {
        if let Ok(mut current) = self.inner.pod_cidr.write() {
            *current = cidr;
        }
    }

    async fn reload(&self) -> Result<()> {
        let nets = self.inner.watcher.reload_now().await.value;
        match &nets.dir_error {
            Some(reason) => Err(Error::ConfDir {
                dir: self.inner.opts.conf_dir.clone(),
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }

    async fn shutdown(&self) {
        self.inner.watcher.shutdown().await;
    }
}

impl std::fmt::Debug for Ocicni {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ocicni")
            .field("opts", &self.inner.opts)
            .finish_non_exhaustive()
    }
}

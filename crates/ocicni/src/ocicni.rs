//! [`Ocicni`]: the real [`CniPlugin`], composing config loading, plugin execution, watching and
//! locking.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use async_trait::async_trait;
use cni_config::NetworkList;
use cni_exec::{Cni, Exec, GcAttachment, ProcessExec, RuntimeConf};
use cni_lock::{LockGuard, LockKey, Locks};
use cni_watch::{WatchMode, WatchOptions, Watcher};
use ipnet::IpNet;

use crate::args::{self, CniArgsPolicy};
use crate::builtin::BuiltinNetwork;
use crate::error::{Error, Result};
use crate::networks::{self, NetworkReport, Networks};
use crate::options::{CheckPolicy, Options, WatchPolicy};
use crate::plugin::CniPlugin;
use crate::pod::{AttachmentResult, NetworkSelection, NetworkStatus, PodNetwork};
use crate::{netns, status};

/// Where, inside the run directory, the cache entries of set-ups in progress live.
const PENDING_SUBDIR: &str = "pending";

/// Reason reported while no network can be used, as CRI-O reports it.
pub const NOT_READY_REASON: &str = "NetworkPluginNotReady";

/// kubelet's network plugin event for a changed pod CIDR, and the key of its detail.
pub const EVENT_POD_CIDR_CHANGE: &str = "pod-cidr-change";
/// The detail key of [`EVENT_POD_CIDR_CHANGE`].
pub const EVENT_POD_CIDR_KEY: &str = "pod-cidr";

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

    /// Run plugins through this executor instead of a [`ProcessExec`] with the plugin timeout.
    #[must_use]
    pub fn exec(mut self, exec: Arc<dyn Exec>) -> Self {
        self.opts.exec = Some(exec);
        self
    }

    /// Loads the configuration and starts watching it.
    ///
    /// # Errors
    ///
    /// [`Error::Watch`] when the watcher cannot start (no tokio runtime with timers).
    pub async fn build(self) -> Result<Ocicni> {
        Ocicni::start(self.opts).await
    }
}

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

impl Ocicni {
    /// A builder with Go ocicni's defaults.
    pub fn builder() -> OcicniBuilder {
        OcicniBuilder::default()
    }

    async fn start(opts: Options) -> Result<Self> {
        let exec = opts
            .exec
            .clone()
            .unwrap_or_else(|| Arc::new(ProcessExec::new().with_timeout(opts.plugin_timeout)));
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

    /// Resolves which networks a pod means, reloading once when one is missing.
    async fn targets(&self, pod: &PodNetwork) -> Result<Vec<Target>> {
        let mut nets = self.snapshot();
        let wanted: Vec<&str> = pod.networks.iter().map(|n| n.name.as_str()).collect();
        let missing = |nets: &Networks| {
            if wanted.is_empty() {
                nets.default.is_none()
            } else {
                wanted.iter().any(|w| nets.get(w).is_none())
            }
        };
        if missing(&nets) {
            nets = self.inner.watcher.reload_now().await.value;
        }
        if pod.networks.is_empty() {
            let default = nets.default.clone().ok_or_else(|| self.no_network(&nets))?;
            return Ok(vec![Target {
                name: default.name().to_owned(),
                network: Some(default),
                ifname: "eth0".to_owned(),
            }]);
        }
        let mut targets = Vec::with_capacity(pod.networks.len());
        for (sel, ifname) in pod.networks.iter().zip(assign_ifnames(&pod.networks)) {
            let net = nets.get(&sel.name).cloned().ok_or_else(|| {
                match nets.unusable_reason(&sel.name) {
                    Some(reason) => Error::NetworkUnusable {
                        name: sel.name.clone(),
                        reason: reason.to_owned(),
                    },
                    None => Error::NetworkNotFound {
                        name: sel.name.clone(),
                        dir: self.inner.opts.conf_dir.clone(),
                    },
                }
            })?;
            targets.push(Target {
                name: sel.name.clone(),
                network: Some(net),
                ifname,
            });
        }
        Ok(targets)
    }

    fn no_network(&self, nets: &Networks) -> Error {
        match &nets.dir_error {
            Some(reason) => Error::ConfDir {
                dir: self.inner.opts.conf_dir.clone(),
                reason: reason.clone(),
            },
            None => Error::NoNetwork {
                dir: self.inner.opts.conf_dir.clone(),
            },
        }
    }

    /// The runtime configuration of `pod`'s attachment to `network` on `ifname`.
    pub(crate) fn runtime_conf(
        &self,
        pod: &PodNetwork,
        network: &str,
        ifname: &str,
        netns: &str,
    ) -> Result<RuntimeConf> {
        let runtime = pod.runtime_config.get(network);
        let mut rt = RuntimeConf::new(pod.id.clone(), netns.to_owned(), ifname.to_owned());
        rt.args = args::cni_args(pod, runtime, self.inner.opts.cni_args)?;
        rt.capability_args = args::capability_args(pod, network, runtime, self.pod_cidr());
        Ok(rt)
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

    async fn add_one(&self, pod: &PodNetwork, target: &Target) -> Result<AttachmentResult> {
        let net = target
            .network
            .as_ref()
            .ok_or_else(|| Error::NetworkNotFound {
                name: target.name.clone(),
                dir: self.inner.opts.conf_dir.clone(),
            })?;
        let rt = self.runtime_conf(pod, &target.name, &target.ifname, &pod.netns)?;
        let wrap = |source| Error::Network {
            pod: pod.id.clone(),
            network: target.name.clone(),
            ifname: target.ifname.clone(),
            source: Box::new(source),
        };
        // cni-exec caches a result-less entry before the plugins run, so GC finds this attachment
        // even if the process dies mid-ADD.
        let result = self
            .inner
            .cni
            .add_network_list(net, &rt)
            .await
            .map_err(wrap)?;
        Ok(AttachmentResult {
            network: target.name.clone(),
            ifname: target.ifname.clone(),
            result,
        })
    }

    async fn del_one(&self, pod: &PodNetwork, target: &Target, netns: &str) -> Result<()> {
        let wrap = |source| Error::Network {
            pod: pod.id.clone(),
            network: target.name.clone(),
            ifname: target.ifname.clone(),
            source: Box::new(source),
        };
        // With its network loaded, DEL uses the cached configuration and arguments when there are
        // some; a network whose file is gone can only be torn down from the cache.
        if let Some(net) = &target.network {
            let rt = self.runtime_conf(pod, &target.name, &target.ifname, netns)?;
            return self
                .inner
                .cni
                .del_network_list(net, &rt)
                .await
                .map_err(wrap);
        }
        let cached = self
            .inner
            .cni
            .cache()
            .get(&target.name, &pod.id, &target.ifname)
            .map_err(wrap)?;
        match cached {
            Some(mut att) => {
                att.netns = netns.to_owned();
                self.inner
                    .cni
                    .del_cached_attachment(&att)
                    .await
                    .map_err(wrap)
            }
            None => Ok(()),
        }
    }

    /// The attachments a teardown or status means: the pod's list, or else every cached
    /// attachment of the pod, or else the default network.
    async fn existing_targets(&self, pod: &PodNetwork) -> Result<Vec<Target>> {
        if !pod.networks.is_empty() {
            let nets = self.snapshot();
            return Ok(pod
                .networks
                .iter()
                .zip(assign_ifnames(&pod.networks))
                .map(|(sel, ifname)| Target {
                    network: nets.get(&sel.name).cloned(),
                    name: sel.name.clone(),
                    ifname,
                })
                .collect());
        }
        let cached = self
            .inner
            .cni
            .cached_attachments(Some(&pod.id))
            .await
            .map_err(|source| Error::Cache {
                source: Box::new(source),
            })?;
        let nets = self.snapshot();
        if cached.is_empty() {
            return Ok(nets
                .default
                .iter()
                .map(|d| Target {
                    network: Some(Arc::clone(d)),
                    name: d.name().to_owned(),
                    ifname: "eth0".to_owned(),
                })
                .collect());
        }
        Ok(cached
            .into_iter()
            .map(|att| Target {
                network: nets.get(&att.network).cloned(),
                name: att.network,
                ifname: att.if_name,
            })
            .collect())
    }
}

/// Interface names for a pod's selections: the ones given, and the first free `ethN` for the rest.
fn assign_ifnames(selections: &[NetworkSelection]) -> Vec<String> {
    let taken: HashSet<&str> = selections
        .iter()
        .filter_map(|n| n.ifname.as_deref())
        .collect();
    let mut free = (0_usize..)
        .map(|i| format!("eth{i}"))
        .filter(|name| !taken.contains(name.as_str()));
    selections
        .iter()
        .map(|sel| {
            sel.ifname
                .clone()
                .unwrap_or_else(|| free.next().unwrap_or_default())
        })
        .collect()
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

/// The path to hand plugins at teardown: empty when the namespace is already gone, which the
/// spec allows for DEL and plugins handle.
fn teardown_netns(path: &str) -> String {
    if path.is_empty() {
        return String::new();
    }
    // A few syscalls on the path, no namespace switch: fine on the executor.
    if netns::is_netns(Path::new(path)).unwrap_or(false) {
        path.to_owned()
    } else {
        String::new()
    }
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

    async fn setup_pod(&self, pod: &PodNetwork) -> Result<Vec<AttachmentResult>> {
        if pod.netns.is_empty() {
            return Err(Error::InvalidPod {
                pod: pod.id.clone(),
                field: "netns".into(),
                reason: "empty".into(),
            });
        }
        let targets = self.targets(pod).await?;
        let (_gc, mut pod_lock) = self.lock_pod(&pod.id).await?;
        // Loopback comes up while the networks attach (as go-cni runs its loopback network):
        // the two do not depend on each other, and a failure of either rolls both back.
        let loopback = async {
            if !self.inner.opts.loopback {
                return Ok(());
            }
            netns::bring_up_loopback_async(&pod.netns)
                .await
                .map_err(|source| Error::Netns {
                    pod: pod.id.clone(),
                    source,
                })
        };
        let attach = async {
            if self.inner.opts.parallel_attach {
                return futures_util::future::join_all(
                    targets.iter().map(|t| self.add_one(pod, t)),
                )
                .await;
            }
            let mut outcomes = Vec::with_capacity(targets.len());
            for target in &targets {
                let outcome = self.add_one(pod, target).await;
                let failed = outcome.is_err();
                outcomes.push(outcome);
                if failed {
                    break;
                }
            }
            outcomes
        };
        let (loopback, outcomes): (Result<()>, Vec<Result<AttachmentResult>>) =
            tokio::join!(loopback, attach);
        let mut done = Vec::new();
        let mut errors: Vec<Error> = loopback.err().into_iter().collect();
        for (target, outcome) in targets.iter().zip(outcomes) {
            match outcome {
                Ok(result) => done.push((target, result)),
                Err(err) => errors.push(err),
            }
        }
        if errors.is_empty() {
            // The pod will be torn down: its lock file stays for that, and goes then (or at GC).
            pod_lock.keep_file();
            return Ok(done.into_iter().map(|(_, r)| r).collect());
        }
        // Undo what was attached, newest first, so a failed set-up leaves nothing behind.
        for (target, _) in done.iter().rev() {
            if let Err(err) = self.del_one(pod, target, &pod.netns).await {
                tracing::warn!(pod = pod.id, network = target.name, error = %err, "rollback after failed set-up failed");
                errors.push(err);
            }
        }
        Err(Error::from_many(errors).unwrap_or(Error::NoNetwork {
            dir: self.inner.opts.conf_dir.clone(),
        }))
    }

    async fn teardown_pod(&self, pod: &PodNetwork) -> Result<()> {
        let _locks = self.lock_pod(&pod.id).await?;
        let netns = teardown_netns(&pod.netns);
        let targets = self.existing_targets(pod).await?;
        let mut errors = Vec::new();
        for target in targets.iter().rev() {
            if let Err(err) = self.del_one(pod, target, &netns).await {
                errors.push(err);
            }
        }
        Error::from_many(errors).map_or(Ok(()), Err)
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
        let _gc = self
            .inner
            .locks
            .lock(&LockKey::gc(), self.inner.opts.lock_timeout)
            .await?;
        match self.inner.cni.cache().remove_stale_temp_files() {
            Ok(0) => {}
            Ok(n) => tracing::info!(
                files = n,
                "gc: removed cache files of writers that died mid-write"
            ),
            Err(err) => tracing::warn!(error = %err, "gc: cannot sweep the result cache"),
        }
        let valid: BTreeSet<&str> = valid_pods.iter().map(|p| p.id.as_str()).collect();
        // Lock files of pods that are gone: kept after a set-up whose teardown never came, or
        // left by a process that died. Nobody holds a pod lock while we hold the GC lock.
        let valid_lock_files: BTreeSet<String> = valid
            .iter()
            .map(|id| LockKey::container(id).file_name().to_owned())
            .collect();
        match self
            .inner
            .locks
            .sweep(|name| valid_lock_files.contains(name))
        {
            Ok(0) => {}
            Ok(n) => tracing::info!(files = n, "gc: removed lock files of pods that are gone"),
            Err(err) => tracing::warn!(error = %err, "gc: cannot sweep the lock directory"),
        }
        let cached = self
            .inner
            .cni
            .cached_attachments(None)
            .await
            .map_err(|source| Error::Cache {
                source: Box::new(source),
            })?;
        let nets = self.snapshot();
        let mut errors = Vec::new();
        let mut still_valid: BTreeMap<String, Vec<GcAttachment>> = BTreeMap::new();
        // Namespace paths that live pods use now, by their own cache entries or as the caller
        // gives them: a stale entry naming one of them names a recycled path, not its own
        // namespace, and its DEL must not run in there (it would remove the live pod's eth0).
        let live_paths: BTreeSet<&str> = cached
            .iter()
            .filter(|att| valid.contains(att.container_id.as_str()))
            .map(|att| att.netns.as_str())
            .chain(valid_pods.iter().map(|p| p.netns.as_str()))
            .filter(|path| !path.is_empty())
            .collect();
        let mut stale_dels = Vec::new();
        for att in &cached {
            if valid.contains(att.container_id.as_str()) {
                still_valid
                    .entry(att.network.clone())
                    .or_default()
                    .push(GcAttachment::new(&att.container_id, &att.if_name));
                continue;
            }
            // A network that sets disableGC opts out of GC altogether, stale DELs included (as
            // libcni's GCNetworkList); the cached configuration decides for networks gone from disk.
            let gc_disabled = match nets.get(&att.network) {
                Some(net) => net.list.disable_gc,
                None => att.network_list().is_ok_and(|n| n.list.disable_gc),
            };
            if gc_disabled {
                continue;
            }
            let mut att = att.clone();
            att.netns = if live_paths.contains(att.netns.as_str()) {
                tracing::info!(
                    container = att.container_id,
                    network = att.network,
                    netns = att.netns,
                    "gc: the stale attachment's namespace path now belongs to a live pod; \
                     tearing down without entering it"
                );
                String::new()
            } else {
                teardown_netns(&att.netns)
            };
            stale_dels.push(att);
        }
        for att in stale_dels {
            tracing::info!(
                container = att.container_id,
                network = att.network,
                "gc: tearing down stale attachment"
            );
            if let Err(source) = self.inner.cni.del_cached_attachment(&att).await {
                errors.push(Error::Network {
                    pod: att.container_id.clone(),
                    network: att.network.clone(),
                    ifname: att.if_name.clone(),
                    source: Box::new(source),
                });
            }
        }
        let builtin = nets
            .default
            .iter()
            .filter(|d| !nets.usable.iter().any(|u| u.name() == d.name()));
        for net in nets.usable.iter().chain(builtin) {
            let valid = still_valid.get(net.name()).map_or(&[][..], Vec::as_slice);
            if let Err(source) = self.inner.cni.gc_network_list(net, valid).await {
                errors.push(Error::Gc {
                    network: net.name().to_owned(),
                    source: Box::new(source),
                });
            }
        }
        Error::from_many(errors).map_or(Ok(()), Err)
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

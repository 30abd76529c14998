//! The sandbox manager: the state machine of [`super::sandbox`], run against a `CniPlugin`, a
//! `NetnsOps` and the state store.
//!
//! Operations on one sandbox are serialized by a per-sandbox async mutex; different sandboxes run in
//! parallel. Readers (list, status) see a snapshot that is replaced at each state change and never
//! wait for a running operation.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use ocicni::{CniPlugin, NetworkSelection, PodNetwork, RuntimeConfig};
use tracing::Instrument as _;

use super::containers::{ContainerRequest, Containers};
use super::error::{DomainError, DomainResult};
use super::now_nanos;
use super::sandbox::{Attachment, Sandbox, SandboxName, SandboxState};
use crate::error::Result;
use crate::metrics::Metrics;
use crate::netns::NetnsOps;
use crate::store::{Loaded, Store, is_sandbox_id, new_sandbox_id};
use ocicni::netns::PinDir;

type Entry = super::entry::Entry<Sandbox>;

#[derive(Debug, Default)]
struct Index {
    by_id: HashMap<String, Arc<Entry>>,
    by_name: HashMap<SandboxName, String>,
}

/// Runs, stops, removes and recovers sandboxes.
pub(crate) struct Manager {
    cni: Arc<dyn CniPlugin>,
    netns: Arc<dyn NetnsOps>,
    store: Store,
    pins: PinDir,
    metrics: Metrics,
    args_policy: ocicni::CniArgsPolicy,
    containers: Arc<Containers>,
    index: Mutex<Index>,
    /// False until recovery has finished (see [`Manager::recover`]).
    recovered: tokio::sync::watch::Sender<bool>,
}

/// How long a request waits for recovery to finish before it is told to retry.
const RECOVERY_WAIT: Duration = Duration::from_secs(120);

/// A sandbox found at start-up that needs work before it is what its state file says; its
/// operation lock is held until the work is done, so requests for it wait instead of racing it.
struct Pending {
    sandbox: Sandbox,
    entry: Option<Arc<Entry>>,
    _op: Option<tokio::sync::OwnedMutexGuard<()>>,
}

impl Manager {
    pub(crate) fn new(
        cni: Arc<dyn CniPlugin>,
        netns: Arc<dyn NetnsOps>,
        store: Store,
        netns_dir: PathBuf,
        metrics: Metrics,
        args_policy: ocicni::CniArgsPolicy,
        containers: Arc<Containers>,
    ) -> Manager {
        Manager {
            cni,
            netns,
            store,
            pins: PinDir::new(netns_dir),
            metrics,
            args_policy,
            containers,
            index: Mutex::default(),
            recovered: tokio::sync::watch::channel(false).0,
        }
    }

    pub(crate) fn cni(&self) -> &Arc<dyn CniPlugin> {
        &self.cni
    }

    /// The containers, once recovery has finished.
    pub(crate) async fn containers(&self) -> DomainResult<&Arc<Containers>> {
        self.wait_recovered().await?;
        Ok(&self.containers)
    }

    /// Creates a container in a ready sandbox, under the sandbox's lock: a sandbox being
    /// stopped or removed gets no new container.
    pub(crate) async fn create_container(
        self: Arc<Self>,
        sandbox_id: String,
        request: ContainerRequest,
    ) -> DomainResult<String> {
        self.wait_recovered().await?;
        let entry = self
            .resolve(&sandbox_id)?
            .ok_or_else(|| DomainError::NotFound {
                id: sandbox_id.clone(),
            })?;
        let _op = self.lock_op(&entry, &sandbox_id).await?;
        let sandbox = entry.get().ok_or_else(|| DomainError::NotFound {
            id: sandbox_id.clone(),
        })?;
        if sandbox.state != SandboxState::Ready {
            return Err(DomainError::SandboxNotReady {
                id: sandbox.id,
                state: sandbox.state.as_str(),
            });
        }
        self.containers.create(&sandbox, request).await
    }

    fn index(&self) -> MutexGuard<'_, Index> {
        self.index.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn update_ready_gauge(&self) {
        // Counted and set under the index lock: two operations finishing together would otherwise
        // each count, and the older count could be set last.
        let index = self.index();
        let ready = index
            .by_id
            .values()
            .filter(|e| e.get().is_some_and(|s| s.state == SandboxState::Ready))
            .count();
        self.metrics.set_sandboxes_ready(ready);
        drop(index);
    }

    /// Creates a sandbox from a validated request and returns its ID.
    ///
    /// A sandbox with the same metadata that is ready already is returned as it is (a retried
    /// request); one being created or stopped gives `AlreadyExists`.
    pub(crate) async fn run(self: Arc<Self>, mut sandbox: Sandbox) -> DomainResult<String> {
        // Startup GC decides from the sandboxes it knows; one made before it ran could be
        // collected, so creation waits for recovery to finish.
        self.wait_recovered().await?;
        let id = new_sandbox_id().map_err(|e| {
            DomainError::Internal(format!("cannot read /dev/urandom for a sandbox ID: {e}"))
        })?;
        // What the network setup, the containers or the kernel would refuse, refused before a
        // state file or a pin exists.
        sandbox.id.clone_from(&id);
        sandbox.runtime_handler = self
            .containers
            .handler_name(&sandbox.runtime_handler)?
            .to_owned();
        self.containers
            .check_cgroup_parent(&sandbox.cgroup_parent)?;
        self.containers
            .filter_annotations(&sandbox.runtime_handler, &mut sandbox.annotations);
        ocicni::validate_pod_args(&self.pod_network(&sandbox), self.args_policy)
            .map_err(|e| DomainError::invalid("RunPodSandbox", e.to_string()))?;
        let ipc_sysctls: Vec<(String, String)> = sandbox
            .sysctls
            .iter()
            .filter(|(k, _)| oci_container::is_ipc_sysctl(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if !ipc_sysctls.is_empty() {
            self.netns
                .try_ipc_sysctls(ipc_sysctls)
                .await
                .map_err(|e| DomainError::invalid("config.linux.sysctls", e.to_string()))?;
        }
        let (entry, _op) = {
            let mut index = self.index();
            if let Some(existing) = index.by_name.get(&sandbox.name) {
                let state = index
                    .by_id
                    .get(existing)
                    .and_then(|e| e.get())
                    .map(|s| s.state);
                if state == Some(SandboxState::Ready) {
                    tracing::info!(sandbox = %existing, "RunPodSandbox repeated: returning the ready sandbox");
                    return Ok(existing.clone());
                }
                let n = &sandbox.name;
                return Err(DomainError::AlreadyExists {
                    pod: format!(
                        "{}/{} (uid {:?}, attempt {})",
                        n.namespace, n.name, n.uid, n.attempt
                    ),
                    existing: existing.clone(),
                    creating: state == Some(SandboxState::Creating),
                });
            }
            // Checked under the index lock, so two requests racing for one port cannot both pass.
            for (holder, entry) in &index.by_id {
                let Some(other) = entry.get() else { continue };
                if matches!(other.state, SandboxState::NotReady | SandboxState::Removing) {
                    continue;
                }
                if let Some(port) = sandbox.host_port_clash(&other) {
                    return Err(DomainError::HostPortInUse {
                        port: port.clone(),
                        holder: holder.clone(),
                        holder_pod: format!("{}/{}", other.name.namespace, other.name.name),
                    });
                }
            }
            if index.by_id.contains_key(&id) {
                return Err(DomainError::Internal(format!(
                    "sandbox ID {id} drawn twice; retry"
                )));
            }
            sandbox.state = SandboxState::Creating;
            sandbox.created_at = now_nanos();
            sandbox.netns_path = (!sandbox.host_network).then(|| self.pins.path(&id));
            let entry = Entry::new(sandbox.clone());
            let Ok(op) = Arc::clone(&entry.op).try_lock_owned() else {
                return Err(DomainError::Internal(
                    "a new sandbox's lock is taken".to_owned(),
                ));
            };
            index.by_id.insert(id.clone(), Arc::clone(&entry));
            index.by_name.insert(sandbox.name.clone(), id.clone());
            (entry, op)
        };
        // Every record of the operation, ocicni's and the plugins' included, carries the request.
        let span = request_span(&sandbox);
        self.run_created(sandbox, entry).instrument(span).await
    }

    /// The rest of [`Manager::run`], once the sandbox is indexed and its lock held.
    async fn run_created(&self, mut sandbox: Sandbox, entry: Arc<Entry>) -> DomainResult<String> {
        let id = sandbox.id.clone();
        tracing::info!("creating sandbox");
        match self.create(&mut sandbox).await {
            Ok(()) => {
                entry.set(Some(sandbox));
                self.metrics.sandbox_operation("run", true);
                self.update_ready_gauge();
                tracing::info!("sandbox ready");
                Ok(id)
            }
            Err(error) => {
                tracing::warn!(%error, "RunPodSandbox failed; rolling back");
                self.roll_back(&sandbox).await;
                self.forget(&sandbox);
                entry.set(None);
                self.metrics.sandbox_operation("run", false);
                Err(error)
            }
        }
    }

    async fn create(&self, sandbox: &mut Sandbox) -> DomainResult<()> {
        self.save_creating(sandbox).await?;
        if let Some(path) = &sandbox.netns_path {
            self.netns
                .create_pinned(path)
                .await
                .map_err(|source| DomainError::Namespace {
                    sandbox: sandbox.id.clone(),
                    action: "create",
                    path: path.clone(),
                    source,
                })?;
            // IPC sysctls are the containers' to set, in the pod's IPC namespace.
            let sysctls: Vec<(String, String)> = sandbox
                .sysctls
                .iter()
                .filter(|(k, _)| !oci_container::is_ipc_sysctl(k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            if !sysctls.is_empty() {
                self.netns.set_sysctls(path, sysctls).await.map_err(|e| {
                    DomainError::invalid(
                        "config.linux.sysctls",
                        format!("sandbox {}: {e}", sandbox.id),
                    )
                })?;
            }
        }
        if !sandbox.host_network {
            let pod = self.pod_network(sandbox);
            let results =
                self.cni
                    .setup_pod(&pod)
                    .await
                    .map_err(|source| DomainError::Network {
                        sandbox: sandbox.id.clone(),
                        operation: "network setup",
                        source,
                    })?;
            sandbox.attachments = results
                .into_iter()
                .map(|r| {
                    let mut ips: Vec<_> = r
                        .result
                        .ips_on_sandbox_interface(&r.ifname)
                        .map(ocicni::cni_types::IpConfig::ip)
                        .collect();
                    if ips.is_empty() {
                        ips = r
                            .result
                            .ips
                            .iter()
                            .map(ocicni::cni_types::IpConfig::ip)
                            .collect();
                    }
                    let result = r
                        .result
                        .to_json_value()
                        .unwrap_or_else(|e| serde_json::json!({ "error": e.to_string() }));
                    Attachment {
                        network: r.network,
                        ifname: r.ifname,
                        ips,
                        result,
                    }
                })
                .collect();
        }
        sandbox.state = SandboxState::Ready;
        self.save(sandbox).await
    }

    /// Undoes whatever a half-made sandbox may own. The state file goes only when everything else
    /// went, so a failure here is retried at the next start.
    async fn roll_back(&self, sandbox: &Sandbox) {
        let mut clean = true;
        if !sandbox.host_network
            && let Err(e) = self.cni.teardown_pod(&self.pod_network(sandbox)).await
        {
            tracing::warn!(sandbox = %sandbox.id, error = %e, "rollback: network teardown failed");
            clean = false;
        }
        if let Some(path) = &sandbox.netns_path
            && let Err(e) = self.netns.remove_pinned(path).await
        {
            tracing::warn!(sandbox = %sandbox.id, path = %path.display(), error = %e, "rollback: cannot remove network namespace");
            clean = false;
        }
        if clean {
            if let Err(e) = self.delete_state(&sandbox.id).await {
                tracing::warn!(sandbox = %sandbox.id, error = %e, "rollback: cannot delete state file");
            }
        } else {
            tracing::warn!(sandbox = %sandbox.id, "rollback incomplete: the state file stays, the next start retries");
        }
    }

    fn forget(&self, sandbox: &Sandbox) {
        let mut index = self.index();
        index.by_id.remove(&sandbox.id);
        if index.by_name.get(&sandbox.name) == Some(&sandbox.id) {
            index.by_name.remove(&sandbox.name);
        }
    }

    /// The sandbox `id` names, its entry and its operation lock held; `None` for an ID nobody
    /// has (or a sandbox removed meanwhile): the CRI makes stop and remove of those succeed.
    async fn locked(
        &self,
        id: &str,
        rpc: &str,
    ) -> DomainResult<Option<(Arc<Entry>, tokio::sync::OwnedMutexGuard<()>, Sandbox)>> {
        let Some(entry) = self.resolve(id)? else {
            tracing::info!(sandbox = %id, "{rpc}: no such sandbox, nothing to do");
            return Ok(None);
        };
        let op = self.lock_op(&entry, id).await?;
        Ok(entry.get().map(|sandbox| (entry, op, sandbox)))
    }

    /// Stops a sandbox: tears its network down. Unknown IDs and stopped sandboxes succeed, as the
    /// CRI asks ("idempotent").
    pub(crate) async fn stop(self: Arc<Self>, id: String) -> DomainResult<()> {
        let Some((entry, _op, mut sandbox)) = self.locked(&id, "StopPodSandbox").await? else {
            return Ok(());
        };
        let span = request_span(&sandbox);
        let outcome = self.stop_locked(&mut sandbox).instrument(span).await;
        entry.set(Some(sandbox));
        self.metrics.sandbox_operation("stop", outcome.is_ok());
        self.update_ready_gauge();
        outcome
    }

    async fn stop_locked(&self, sandbox: &mut Sandbox) -> DomainResult<()> {
        if matches!(
            sandbox.state,
            SandboxState::NotReady | SandboxState::Removing
        ) {
            return Ok(());
        }
        // The intent first: killed during the teardown, the next start finishes it instead
        // of finding a ready sandbox whose network is half gone.
        if sandbox.state != SandboxState::Stopping {
            sandbox.state = SandboxState::Stopping;
            self.save(sandbox).await?;
        }
        self.containers.stop_all(&sandbox.id).await?;
        if !sandbox.host_network {
            self.cni
                .teardown_pod(&self.pod_network(sandbox))
                .await
                .map_err(|source| DomainError::Network {
                    sandbox: sandbox.id.clone(),
                    operation: "network teardown",
                    source,
                })?;
        }
        sandbox.state = SandboxState::NotReady;
        self.save(sandbox).await?;
        tracing::info!(sandbox = %sandbox.id, "sandbox stopped");
        Ok(())
    }

    /// Removes a sandbox: stops it if needed, unpins its namespace and deletes its state. Unknown
    /// IDs succeed.
    pub(crate) async fn remove(self: Arc<Self>, id: String) -> DomainResult<()> {
        let Some((entry, _op, mut sandbox)) = self.locked(&id, "RemovePodSandbox").await? else {
            return Ok(());
        };
        let span = request_span(&sandbox);
        let outcome = self.remove_locked(&mut sandbox).instrument(span).await;
        if outcome.is_ok() {
            self.forget(&sandbox);
            entry.set(None);
        } else {
            entry.set(Some(sandbox));
        }
        self.metrics.sandbox_operation("remove", outcome.is_ok());
        self.update_ready_gauge();
        outcome
    }

    async fn remove_locked(&self, sandbox: &mut Sandbox) -> DomainResult<()> {
        self.stop_locked(sandbox).await?;
        if sandbox.state != SandboxState::Removing {
            sandbox.state = SandboxState::Removing;
            self.save(sandbox).await?;
        }
        self.containers.remove_all(&sandbox.id).await?;
        if let Some(path) = &sandbox.netns_path {
            self.netns
                .remove_pinned(path)
                .await
                .map_err(|source| DomainError::Namespace {
                    sandbox: sandbox.id.clone(),
                    action: "remove",
                    path: path.clone(),
                    source,
                })?;
        }
        self.delete_state(&sandbox.id)
            .await
            .map_err(|source| DomainError::State {
                sandbox: sandbox.id.clone(),
                source,
            })?;
        tracing::info!(sandbox = %sandbox.id, "sandbox removed");
        Ok(())
    }

    /// The sandbox with this ID (or unique ID prefix).
    pub(crate) fn get(&self, id: &str) -> DomainResult<Sandbox> {
        self.resolve(id)?
            .and_then(|entry| entry.get())
            .ok_or_else(|| DomainError::NotFound { id: id.to_owned() })
    }

    /// Every sandbox past creation, oldest first.
    pub(crate) fn list(&self) -> Vec<Sandbox> {
        let mut all: Vec<Sandbox> = self
            .index()
            .by_id
            .values()
            .filter_map(|e| e.get())
            .filter(|s| s.state != SandboxState::Creating)
            .collect();
        all.sort_by(|a, b| {
            a.created_at
                .cmp(&b.created_at)
                .then_with(|| a.id.cmp(&b.id))
        });
        all
    }

    fn resolve(&self, id: &str) -> DomainResult<Option<Arc<Entry>>> {
        if id.is_empty() {
            return Err(DomainError::invalid(
                "pod_sandbox_id",
                "empty: name the sandbox",
            ));
        }
        let index = self.index();
        if let Some(entry) = index.by_id.get(id) {
            return Ok(Some(Arc::clone(entry)));
        }
        let mut matches = index.by_id.iter().filter(|(k, _)| k.starts_with(id));
        match (matches.next(), matches.next()) {
            (Some((_, entry)), None) => Ok(Some(Arc::clone(entry))),
            (Some(_), Some(_)) => Err(DomainError::invalid(
                "pod_sandbox_id",
                format!("{id:?} is the prefix of several sandboxes; give more of the ID"),
            )),
            (None, _) => Ok(None),
        }
    }

    /// What ocicni is told about the sandbox: the networks it is attached to (the default network
    /// before setup) and its port mappings, cgroup and annotations for each.
    fn pod_network(&self, sandbox: &Sandbox) -> PodNetwork {
        let networks: Vec<NetworkSelection> = sandbox
            .attachments
            .iter()
            .map(|a| NetworkSelection {
                name: a.network.clone(),
                ifname: Some(a.ifname.clone()),
            })
            .collect();
        let names: Vec<String> = if networks.is_empty() {
            self.cni.default_network_name().into_iter().collect()
        } else {
            networks.iter().map(|n| n.name.clone()).collect()
        };
        let per_network = RuntimeConfig {
            port_mappings: sandbox.port_mappings.clone(),
            cgroup_path: Some(sandbox.cgroup_parent.clone()).filter(|c| !c.is_empty()),
            pod_annotations: sandbox.annotations.clone(),
            ..RuntimeConfig::default()
        };
        let runtime_config: BTreeMap<String, RuntimeConfig> = names
            .into_iter()
            .map(|n| (n, per_network.clone()))
            .collect();
        PodNetwork {
            name: sandbox.name.name.clone(),
            namespace: sandbox.name.namespace.clone(),
            id: sandbox.id.clone(),
            uid: sandbox.name.uid.clone(),
            netns: sandbox
                .netns_path
                .as_ref()
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default(),
            networks,
            runtime_config,
            ..PodNetwork::default()
        }
    }

    async fn save(&self, sandbox: &Sandbox) -> DomainResult<()> {
        self.write_state(sandbox, Store::save).await
    }

    /// The `Creating` marker: written before anything is touched, unsynced (see
    /// [`Store::save_unsynced`]).
    async fn save_creating(&self, sandbox: &Sandbox) -> DomainResult<()> {
        self.write_state(sandbox, Store::save_unsynced).await
    }

    async fn write_state(
        &self,
        sandbox: &Sandbox,
        write: fn(&Store, &Sandbox) -> crate::error::Result<()>,
    ) -> DomainResult<()> {
        let store = self.store.clone();
        let copy = sandbox.clone();
        tokio::task::spawn_blocking(move || write(&store, &copy))
            .await
            .map_err(|e| {
                DomainError::Internal(format!("sandbox {}: state writer failed: {e}", sandbox.id))
            })?
            .map_err(|source| DomainError::State {
                sandbox: sandbox.id.clone(),
                source,
            })
    }

    async fn delete_state(&self, id: &str) -> Result<()> {
        let store = self.store.clone();
        let id = id.to_owned();
        match tokio::task::spawn_blocking(move || store.delete(&id)).await {
            Ok(outcome) => outcome,
            Err(e) => Err(crate::error::Error::io(
                "cannot delete sandbox state",
                self.store.path_of("?"),
                std::io::Error::other(e),
            )),
        }
    }

    /// Becomes true when recovery has finished.
    pub(crate) fn recovered(&self) -> tokio::sync::watch::Receiver<bool> {
        self.recovered.subscribe()
    }

    /// Waits until recovery has finished, for up to [`RECOVERY_WAIT`].
    async fn wait_recovered(&self) -> DomainResult<()> {
        let mut done = self.recovered.subscribe();
        match tokio::time::timeout(RECOVERY_WAIT, done.wait_for(|done| *done)).await {
            Ok(Ok(_)) => Ok(()),
            _ => Err(DomainError::Recovering { sandbox: None }),
        }
    }

    /// Takes a sandbox's operation lock; while recovery runs, for up to [`RECOVERY_WAIT`].
    async fn lock_op(
        &self,
        entry: &Arc<Entry>,
        id: &str,
    ) -> DomainResult<tokio::sync::OwnedMutexGuard<()>> {
        let lock = Arc::clone(&entry.op).lock_owned();
        if *self.recovered.borrow() {
            return Ok(lock.await);
        }
        tokio::time::timeout(RECOVERY_WAIT, lock)
            .await
            .map_err(|_| DomainError::Recovering {
                sandbox: Some(id.to_owned()),
            })
    }

    /// Brings the daemon back to a consistent state after a restart or a crash, in two parts.
    ///
    /// This part reads every state file and indexes every sandbox, taking the operation lock of
    /// each one that needs work; it is quick, so the socket serves within moments of a start even
    /// with many sandboxes. The work (rolling back half-made sandboxes, finishing interrupted
    /// stops and removals, stopping ready ones whose namespace is gone, removing stray pins, CNI
    /// garbage collection) is the returned future, run in the background: requests for a sandbox
    /// still being recovered wait for it, RunPodSandbox waits for all of it.
    ///
    /// Only an unreadable state directory is an error; everything else is logged and kept going.
    pub(crate) async fn recover(self: &Arc<Self>) -> Result<impl Future<Output = ()> + use<>> {
        let loaded = {
            let store = self.store.clone();
            tokio::task::spawn_blocking(move || store.load_all())
                .await
                .map_err(|e| {
                    crate::error::Error::io(
                        "cannot read state directory",
                        self.store.path_of("*"),
                        std::io::Error::other(e),
                    )
                })??
        };
        // Before this run pins anything: is the pin directory's bind this daemon's?
        let known = |name: &str| {
            loaded.iter().any(|item| match item {
                Loaded::Item(sandbox) => sandbox.id == name,
                Loaded::Unreadable { id, .. } => id == name,
            })
        };
        self.pins.adopt(&*self.netns, known).await;
        let mut pending = Vec::new();
        for item in loaded {
            let (sandbox, unreadable) = match item {
                Loaded::Unreadable { id, error } => {
                    tracing::warn!(sandbox = %id, error = %error, "unreadable sandbox state: rolling the sandbox back");
                    (self.orphan(&id), true)
                }
                Loaded::Item(sandbox) => (*sandbox, false),
            };
            let needs_work = unreadable
                || match sandbox.state {
                    SandboxState::Creating | SandboxState::Stopping | SandboxState::Removing => {
                        true
                    }
                    SandboxState::Ready => !self.netns_alive(&sandbox).await,
                    SandboxState::NotReady => false,
                };
            let mut index = self.index();
            if unreadable {
                // Known by its ID only: not listed, not findable by name.
                pending.push(Pending {
                    sandbox,
                    entry: None,
                    _op: None,
                });
                continue;
            }
            let mut shown = sandbox.clone();
            if needs_work && shown.state == SandboxState::Ready {
                // Never reported ready once its network may be gone.
                shown.state = SandboxState::Stopping;
            }
            let entry = Entry::new(shown);
            index
                .by_name
                .insert(sandbox.name.clone(), sandbox.id.clone());
            index.by_id.insert(sandbox.id.clone(), Arc::clone(&entry));
            if needs_work {
                let op = Arc::clone(&entry.op).try_lock_owned().ok();
                pending.push(Pending {
                    sandbox,
                    entry: Some(entry),
                    _op: op,
                });
            }
        }
        let lost = pending
            .iter()
            .filter(|p| p.sandbox.state == SandboxState::Ready)
            .filter(|p| {
                p.sandbox
                    .netns_path
                    .as_ref()
                    .is_some_and(|path| path.exists())
            })
            .count();
        if lost > 0 {
            tracing::warn!(
                sandboxes = lost,
                dir = %self.pins.dir().display(),
                "pins of ready sandboxes are no longer network namespaces: the node rebooted, or \
                 they were made in another mount namespace (crio-lite run with systemd's \
                 PrivateMounts= or in a container) and went with it; these sandboxes are stopped"
            );
        }
        tracing::info!(
            sandboxes = self.index().by_id.len(),
            to_recover = pending.len(),
            "sandbox states loaded; recovering in the background"
        );
        let manager = Arc::clone(self);
        Ok(async move { manager.finish_recovery(pending).await })
    }

    async fn finish_recovery(&self, pending: Vec<Pending>) {
        // Containers first: stopping and removing the sandboxes below stops and removes theirs.
        let known: std::collections::HashSet<String> = self
            .index()
            .by_id
            .keys()
            .cloned()
            .chain(
                pending
                    .iter()
                    .filter(|p| p.sandbox.state != SandboxState::Creating)
                    .map(|p| p.sandbox.id.clone()),
            )
            .collect();
        self.containers.recover(&known).await;
        for Pending {
            mut sandbox,
            entry,
            _op,
        } in pending
        {
            match sandbox.state {
                SandboxState::Creating => {
                    tracing::info!(sandbox = %sandbox.id, "sandbox caught half-way through creation: rolling back");
                    self.roll_back(&sandbox).await;
                    self.forget(&sandbox);
                    if let Some(entry) = &entry {
                        entry.set(None);
                    }
                    continue;
                }
                SandboxState::Stopping => {
                    tracing::info!(sandbox = %sandbox.id, "sandbox caught half-way through stopping: finishing the stop");
                    if let Err(error) = self.stop_locked(&mut sandbox).await {
                        tracing::warn!(sandbox = %sandbox.id, %error, "cannot finish stopping the sandbox; StopPodSandbox retries");
                    }
                }
                SandboxState::Removing => {
                    tracing::info!(sandbox = %sandbox.id, "sandbox caught half-way through removal: finishing it");
                    match self.remove_locked(&mut sandbox).await {
                        Ok(()) => {
                            self.forget(&sandbox);
                            if let Some(entry) = &entry {
                                entry.set(None);
                            }
                            continue;
                        }
                        Err(error) => {
                            tracing::warn!(sandbox = %sandbox.id, %error, "cannot finish removing the sandbox; RemovePodSandbox retries");
                        }
                    }
                }
                SandboxState::Ready => {
                    tracing::warn!(sandbox = %sandbox.id, "network namespace of a ready sandbox is gone: stopping it");
                    if let Err(error) = self.stop_locked(&mut sandbox).await {
                        tracing::warn!(sandbox = %sandbox.id, %error, "cannot stop sandbox");
                    }
                }
                SandboxState::NotReady => {}
            }
            if let Some(entry) = &entry {
                entry.set(Some(sandbox));
            }
        }
        self.remove_stray_pins().await;
        let valid: Vec<PodNetwork> = self
            .list()
            .iter()
            .filter(|s| s.state == SandboxState::Ready && !s.host_network)
            .map(|s| self.pod_network(s))
            .collect();
        if let Err(e) = self.cni.gc(&valid).await {
            tracing::warn!(error = %e, "CNI garbage collection failed");
        }
        self.update_ready_gauge();
        self.recovered.send_replace(true);
        tracing::info!(sandboxes = self.index().by_id.len(), "sandboxes recovered");
    }

    async fn netns_alive(&self, sandbox: &Sandbox) -> bool {
        match &sandbox.netns_path {
            Some(path) => self.netns.is_live(path).await,
            None => true,
        }
    }

    /// A sandbox known by its ID only: enough to tear down and unpin by convention.
    fn orphan(&self, id: &str) -> Sandbox {
        Sandbox {
            id: id.to_owned(),
            name: SandboxName {
                name: String::new(),
                namespace: String::new(),
                uid: String::new(),
                attempt: 0,
            },
            state: SandboxState::Creating,
            created_at: 0,
            host_network: false,
            netns_path: Some(self.pins.path(id)),
            hostname: String::new(),
            dns: super::sandbox::DnsSettings::default(),
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
            port_mappings: Vec::new(),
            cgroup_parent: String::new(),
            namespace_options: super::sandbox::NamespaceModes::default(),
            runtime_handler: String::new(),
            log_directory: String::new(),
            attachments: Vec::new(),
            sysctls: BTreeMap::new(),
            privileged: false,
        }
    }

    /// Removes pins under the netns directory that no sandbox owns.
    async fn remove_stray_pins(&self) {
        let known: std::collections::HashSet<String> = self.index().by_id.keys().cloned().collect();
        self.pins
            .remove_strays(&*self.netns, is_sandbox_id, |id| known.contains(id))
            .await;
    }

    /// The directory namespaces are pinned in.
    pub(crate) fn netns_dir(&self) -> &Path {
        self.pins.dir()
    }

    /// At shutdown: the pin directory's bind goes once no pin is left in it, when this daemon
    /// made it (see [`PinDir`]).
    pub(crate) async fn release_pin_dir(&self) {
        self.pins.release(&*self.netns).await;
    }
}

/// The span a sandbox operation runs in: its sandbox, pod and namespace become fields of every
/// record logged inside (JSON lines and journald carry them as fields).
fn request_span(sandbox: &Sandbox) -> tracing::Span {
    tracing::info_span!(
        "sandbox",
        sandbox = %sandbox.id,
        pod = %sandbox.name.name,
        namespace = %sandbox.name.namespace,
    )
}

//! The container manager: the state machine of [`super::container`], run against the image
//! store (root file systems), `oci-container` (bundle, runtime, conmon and the stop protocol)
//! and the state store.
//!
//! Container records are written atomically but not fsynced (and deleted without syncing the
//! directory): a killed daemon finds them in the page cache, and a power loss takes what they
//! describe with it (conmon, the runtime's state and the bundles live in the run directory), so a
//! record older than the last step only leads recovery to undo or mark exited what is gone
//! anyway.
//!
//! Operations on one container are serialized by a per-container async mutex; readers see a
//! snapshot and never wait for a running operation. Creation is serialized with the sandbox's
//! own operations by the sandbox manager, which calls [`Containers::create`] under the
//! sandbox's lock, and stops and removes a sandbox's containers under it.
//!
//! `create.rs` makes a container, `lifecycle.rs` starts, stops and removes one, `running.rs`
//! does what is asked of a running one (exec, stats, update, pause, log reopening),
//! `recovery.rs` brings them back after a restart, `checks.rs` holds the rules a request
//! meets, `request.rs` what CreateContainer asks for.

mod checks;
mod create;
mod lifecycle;
mod recovery;
mod request;
mod running;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use oci_container::Runtime;

pub use request::{ContainerRequest, PidMode};
pub use running::EXEC_OUTPUT_CAP;

use super::container::Container;
use super::entry::Entry;
use super::error::{DomainError, DomainResult};
use super::images::Images;
use super::settings::ContainerSettings;
use crate::store::Store;

/// A runtime handler's runtime.
#[derive(Debug, Clone)]
struct Handler {
    runtime: Runtime,
    /// The runtime-interpreted annotations requests may pass (`allowed_annotations`).
    allowed_annotations: Vec<String>,
}

/// What a container's seccomp profile is when its request says RuntimeDefault or nothing.
struct SeccompDefaults {
    /// The RuntimeDefault profile when set.
    profile: Option<PathBuf>,
    /// No profile asked is RuntimeDefault (else unconfined, the CRI's meaning).
    when_empty: bool,
}

impl SeccompDefaults {
    fn of(&self, asked: Option<&oci_container::Seccomp>) -> oci_container::Seccomp {
        let asked = asked.map_or_else(
            || oci_container::Seccomp::for_empty_profile(self.when_empty),
            Clone::clone,
        );
        match (asked, &self.profile) {
            (oci_container::Seccomp::RuntimeDefault, Some(path)) => {
                oci_container::Seccomp::Localhost(path.clone())
            }
            (asked, _) => asked,
        }
    }
}

/// Runs, stops, removes and recovers containers.
pub(crate) struct Containers {
    handlers: BTreeMap<String, Handler>,
    /// Read at each creation, so a new hook applies at once.
    hooks_dirs: Vec<PathBuf>,
    seccomp: SeccompDefaults,
    pids_limit: Option<i64>,
    default_handler: String,
    images: Images,
    store: Store<Container>,
    /// `<runroot>/containers/<id>`: bundles; `<runroot>/pods/<sandbox>`: hosts, resolv.conf.
    run_dir: PathBuf,
    /// The program that becomes the init of a pod that shares its PID namespace.
    pod_init: oci_container::PodInitProgram,
    /// Who makes the containers' cgroups, so which pod cgroup parents can be honoured.
    cgroups: oci_container::CgroupManager,
    index: Mutex<HashMap<String, Arc<Entry<Container>>>>,
}

impl Containers {
    pub(crate) fn new(
        settings: ContainerSettings,
        images: Images,
        store: Store<Container>,
    ) -> Containers {
        let run_dir = settings.run_dir;
        let handlers = settings
            .handlers
            .into_iter()
            .map(|(name, h)| {
                let state = run_dir.join("oci").join(&name);
                let runtime = Runtime::new(h.runtime_path, h.monitor_path, state)
                    .with_root(h.runtime_root)
                    .with_cgroups(settings.cgroup_manager, settings.conmon_cgroup.clone());
                let handler = Handler {
                    runtime,
                    allowed_annotations: h.allowed_annotations,
                };
                (name, handler)
            })
            .collect();
        Containers {
            handlers,
            hooks_dirs: settings.hooks_dirs,
            seccomp: SeccompDefaults {
                profile: settings.seccomp_profile,
                when_empty: settings.seccomp_use_default_when_empty,
            },
            pids_limit: settings.pids_limit,
            default_handler: settings.default_handler,
            images,
            store,
            run_dir,
            pod_init: settings.pod_init,
            cgroups: settings.cgroup_manager,
            index: Mutex::default(),
        }
    }

    /// Refuses a pod's cgroup parent this node's cgroup manager cannot honour, before anything
    /// is made for the pod (else every one of its containers would fail).
    pub(crate) fn check_cgroup_parent(&self, parent: &str) -> DomainResult<()> {
        self.cgroups
            .check_parent(parent)
            .map_err(|why| DomainError::invalid("config.linux.cgroup_parent", why))
    }

    /// Drops from `annotations` the runtime-interpreted ones `handler` (a name
    /// [`Containers::handler_name`] gave) does not allow, as CRI-O does, so they reach neither
    /// the runtime, the hooks' conditions nor the network plugins; logs what it dropped.
    pub(crate) fn filter_annotations(
        &self,
        handler: &str,
        annotations: &mut BTreeMap<String, String>,
    ) {
        let allowed = self
            .handlers
            .get(handler)
            .map_or(&[][..], |h| h.allowed_annotations.as_slice());
        let removed = super::annotations::filter(annotations, allowed);
        if !removed.is_empty() {
            tracing::info!(
                handler,
                annotations = ?removed,
                "runtime annotations the handler does not allow (allowed_annotations) dropped"
            );
        }
    }

    fn index(&self) -> MutexGuard<'_, HashMap<String, Arc<Entry<Container>>>> {
        self.index.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The handler a sandbox's containers run on: its own, or the default for `""`.
    pub(crate) fn handler_name<'a>(&'a self, requested: &'a str) -> DomainResult<&'a str> {
        let name = if requested.is_empty() {
            self.default_handler.as_str()
        } else {
            requested
        };
        if self.handlers.contains_key(name) {
            Ok(name)
        } else {
            Err(DomainError::invalid(
                "runtime_handler",
                format!(
                    "unknown runtime handler {requested:?}: this node has {}",
                    self.handlers.keys().cloned().collect::<Vec<_>>().join(", ")
                ),
            ))
        }
    }

    fn runtime(&self, handler: &str) -> DomainResult<&Runtime> {
        self.handlers
            .get(handler)
            .map(|h| &h.runtime)
            .ok_or_else(|| {
                DomainError::Internal(format!(
                    "runtime handler {handler:?} is no longer configured"
                ))
            })
    }

    fn bundle(&self, id: &str) -> PathBuf {
        self.run_dir.join("containers").join(id)
    }

    fn pod_dir(&self, sandbox_id: &str) -> PathBuf {
        self.run_dir.join("pods").join(sandbox_id)
    }

    async fn save(
        &self,
        container: &Container,
        write: fn(&Store<Container>, &Container) -> crate::error::Result<()>,
    ) -> DomainResult<()> {
        let store = self.store.clone();
        let copy = container.clone();
        blocking(move || write(&store, &copy))
            .await?
            .map_err(|source| DomainError::State {
                sandbox: container.id.clone(),
                source,
            })
    }

    /// The container `id` (or unique prefix) names, locked.
    async fn locked(
        &self,
        id: &str,
    ) -> DomainResult<(
        Arc<Entry<Container>>,
        tokio::sync::OwnedMutexGuard<()>,
        Container,
    )> {
        let entry = self.resolve(id)?;
        let op = Arc::clone(&entry.op).lock_owned().await;
        let container = entry
            .get()
            .ok_or_else(|| DomainError::ContainerNotFound { id: id.to_owned() })?;
        Ok((entry, op, container))
    }

    fn resolve(&self, id: &str) -> DomainResult<Arc<Entry<Container>>> {
        if id.is_empty() {
            return Err(DomainError::invalid(
                "container_id",
                "empty: name the container",
            ));
        }
        let index = self.index();
        if let Some(entry) = index.get(id) {
            return Ok(Arc::clone(entry));
        }
        let mut matches = index.iter().filter(|(k, _)| k.starts_with(id));
        match (matches.next(), matches.next()) {
            (Some((_, entry)), None) => Ok(Arc::clone(entry)),
            (Some(_), Some(_)) => Err(DomainError::invalid(
                "container_id",
                format!("{id:?} is the prefix of several containers; give more of the ID"),
            )),
            (None, _) => Err(DomainError::ContainerNotFound { id: id.to_owned() }),
        }
    }

    /// The container `id`, which must be running (what Exec and Attach are for).
    pub(crate) fn running(&self, id: &str) -> DomainResult<Container> {
        let container = self.get(id)?;
        checks::require_running(&container)?;
        Ok(container)
    }

    /// The container with this ID (or unique prefix), its exit read afresh.
    pub(crate) fn get(&self, id: &str) -> DomainResult<Container> {
        let mut container = self
            .resolve(id)?
            .get()
            .ok_or_else(|| DomainError::ContainerNotFound { id: id.to_owned() })?;
        self.observe(&mut container);
        Ok(container)
    }

    /// Every container past creation, oldest first, exits read afresh.
    pub(crate) fn list(&self) -> Vec<Container> {
        let mut all: Vec<Container> = self
            .index()
            .values()
            .filter_map(|e| e.get())
            .filter(|c| c.state != super::ContainerState::Creating)
            .collect();
        for c in &mut all {
            self.observe(c);
        }
        all.sort_by(|a, b| {
            a.created_at
                .cmp(&b.created_at)
                .then_with(|| a.id.cmp(&b.id))
        });
        all
    }

    fn in_sandbox(&self, sandbox_id: &str) -> Vec<String> {
        self.index()
            .values()
            .filter_map(|e| e.get())
            .filter(|c| c.sandbox_id == sandbox_id)
            .map(|c| c.id)
            .collect()
    }
}

/// A pod's directory: its init killed, its namespace pins and `/dev/shm` unmounted, then its
/// files.
fn remove_pod_dir(sandbox_id: &str, dir: &Path) -> DomainResult<()> {
    oci_container::unpin_pod(sandbox_id, dir).map_err(DomainError::runtime)?;
    remove_dir(dir).map_err(|source| DomainError::Io {
        what: format!("sandbox {sandbox_id}: cannot remove the pod's directory"),
        path: dir.to_owned(),
        source,
    })
}

fn remove_dir(path: &Path) -> std::io::Result<()> {
    match std::fs::remove_dir_all(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> DomainResult<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| DomainError::Internal(format!("a worker task failed: {e}")))
}

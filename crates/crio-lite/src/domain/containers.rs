//! The container manager: the state machine of [`super::container`], run against the image
//! store (root file systems), `oci-container` (spec, runtime and conmon) and the state store.
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

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, UNIX_EPOCH};

use nix::sys::signal::Signal;
use oci_container::{ContainerConfig, NamespacePaths, Runtime};

use super::container::{Container, ContainerState, Exit, Limits, MountSpec};
use super::entry::Entry;
use super::error::{DomainError, DomainResult};
use super::images::Images;
use super::now_nanos;
use super::sandbox::Sandbox;
use crate::store::{Loaded, Store, is_sandbox_id, new_sandbox_id};

/// How long a SIGKILLed container may take to be reported gone.
const KILL_WAIT: Duration = Duration::from_secs(30);
/// The most output ExecSync keeps of each stream (CRI-O keeps 16 MiB).
pub const EXEC_OUTPUT_CAP: usize = 16 << 20;
/// An ExecSync without a timeout still ends: after this long.
const EXEC_MAX: Duration = Duration::from_secs(24 * 3600);

/// What CreateContainer asks for, checked by the CRI adapter.
#[derive(Debug, Clone, Default)]
pub struct ContainerRequest {
    /// The metadata name: unique with the attempt within the sandbox.
    pub name: String,
    /// The metadata attempt.
    pub attempt: u32,
    /// The image: a reference, an id or an id prefix, as the store finds it.
    pub image: String,
    /// Replaces the image's entrypoint.
    pub command: Vec<String>,
    /// Replaces the image's cmd.
    pub args: Vec<String>,
    /// The working directory.
    pub working_dir: Option<String>,
    /// Added to the image's environment.
    pub env: Vec<(String, String)>,
    /// Bind mounts.
    pub mounts: Vec<MountSpec>,
    /// Host devices.
    pub devices: Vec<oci_container::DeviceMapping>,
    /// CRI labels.
    pub labels: BTreeMap<String, String>,
    /// CRI annotations.
    pub annotations: BTreeMap<String, String>,
    /// The log file, relative to the sandbox's log directory; empty for one of crio-lite's.
    pub log_path: String,
    /// All capabilities and devices.
    pub privileged: bool,
    /// A read-only root.
    pub readonly_rootfs: bool,
    /// Capabilities added.
    pub add_capabilities: Vec<String>,
    /// Capabilities dropped.
    pub drop_capabilities: Vec<String>,
    /// `uid`, `uid:gid` or a user name; the image's user when `None`.
    pub user: Option<String>,
    /// Supplementary groups, added to the primary group and (unless `strict_groups`) those the
    /// image's `/etc/group` gives the user.
    pub supplemental_groups: Vec<u32>,
    /// The CRI's `Strict` supplemental groups policy: no groups from the image's `/etc/group`.
    pub strict_groups: bool,
    /// no_new_privs.
    pub no_new_privs: bool,
    /// Extra masked paths.
    pub masked_paths: Vec<String>,
    /// Extra read-only paths.
    pub readonly_paths: Vec<String>,
    /// cgroup limits.
    pub limits: Limits,
    /// The PID namespace: the pod's, the container's own or the node's.
    pub pid: PidMode,
    /// The IPC namespace is the node's.
    pub host_ipc: bool,
    /// The seccomp profile; `None` when the request names none (the node's default then, as
    /// CRI-O's `seccomp_use_default_when_empty`).
    pub seccomp: Option<oci_container::Seccomp>,
}

/// Whose PID namespace a container runs in (CRI's `NamespaceMode` for pid, TARGET aside).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PidMode {
    /// The pod's: only in a pod that shares one ([`Sandbox::shares_pid`]); the pod's init is
    /// pid 1 and the pod's containers see each other's processes.
    Pod,
    /// One of its own, the container's process pid 1 in it.
    #[default]
    Container,
    /// The node's.
    Node,
}

/// A runtime handler's runtime.
#[derive(Debug, Clone)]
struct Handler {
    runtime: Runtime,
    /// The runtime-interpreted annotations requests may pass (`allowed_annotations`).
    allowed_annotations: Vec<String>,
}

/// The cgroup parent of pods whose request names none.
const DEFAULT_CGROUP_PARENT: &str = "/crio-lite";

/// What a container's seccomp profile is when its request says RuntimeDefault or nothing.
struct SeccompDefaults {
    /// `crio.runtime.seccomp_profile`: the RuntimeDefault profile when set.
    profile: Option<PathBuf>,
    /// `crio.runtime.seccomp_use_default_when_empty`: no profile asked is RuntimeDefault (else
    /// unconfined, the CRI's meaning).
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
    /// `crio.runtime.hooks_dir`: read at each creation, so a new hook applies at once.
    hooks_dirs: Vec<PathBuf>,
    seccomp: SeccompDefaults,
    /// `crio.runtime.pids_limit`, when positive.
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
        config: &crate::config::Config,
        images: Images,
        store: Store<Container>,
    ) -> Containers {
        let runtimes = config.runtime_handlers();
        let run_dir = config.crio.runroot.clone();
        let default_handler = config.crio.runtime.default_runtime.as_str();
        let seccomp = &config.crio.runtime.seccomp_profile;
        let handlers = runtimes
            .iter()
            .map(|(name, r)| {
                let state = run_dir.join("oci").join(name);
                let runtime = Runtime::new(&r.runtime_path, &r.monitor_path, state)
                    .with_root(&r.runtime_root);
                let allowed_annotations = r.allowed_annotations.clone();
                (
                    name.clone(),
                    Handler {
                        runtime,
                        allowed_annotations,
                    },
                )
            })
            .collect();
        Containers {
            handlers,
            hooks_dirs: config.crio.runtime.hooks_dir.clone(),
            seccomp: SeccompDefaults {
                profile: (!seccomp.as_os_str().is_empty()).then(|| seccomp.clone()),
                when_empty: config.crio.runtime.seccomp_use_default_when_empty,
            },
            pids_limit: Some(config.crio.runtime.pids_limit).filter(|&n| n > 0),
            default_handler: default_handler.to_owned(),
            images,
            store,
            run_dir,
            pod_init: pod_init_program(),
            cgroups: oci_container::CgroupManager::default(),
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

    /// Creates a container in `sandbox` (which the caller holds locked and found ready).
    pub(crate) async fn create(
        &self,
        sandbox: &Sandbox,
        mut request: ContainerRequest,
    ) -> DomainResult<String> {
        check_pid_mode(sandbox, request.pid)?;
        check_privileged(sandbox, &request)?;
        let handler = self.handler_name(&sandbox.runtime_handler)?.to_owned();
        let runtime = self.runtime(&handler)?.clone();
        self.filter_annotations(&handler, &mut request.annotations);
        {
            let index = self.index();
            if let Some(existing) = index.values().filter_map(|e| e.get()).find(|c| {
                c.sandbox_id == sandbox.id && c.name == request.name && c.attempt == request.attempt
            }) {
                return Err(DomainError::ContainerExists {
                    name: request.name,
                    attempt: request.attempt,
                    sandbox: sandbox.id.clone(),
                    existing: existing.id,
                });
            }
        }
        let (image, image_config, stop_signal) = self.image_of(&request.image)?;
        let id = new_sandbox_id().map_err(|e| {
            DomainError::Internal(format!("cannot read /dev/urandom for a container ID: {e}"))
        })?;
        let log_path = self.log_path(sandbox, &request, &id)?;
        let mut container = Container {
            id: id.clone(),
            sandbox_id: sandbox.id.clone(),
            name: request.name.clone(),
            attempt: request.attempt,
            state: ContainerState::Creating,
            image: request.image.clone(),
            image_id: format!("sha256:{}", image.id),
            image_ref: image
                .repo_digests
                .first()
                .or(image.names.first())
                .cloned()
                .unwrap_or_else(|| format!("sha256:{}", image.id)),
            runtime_handler: handler,
            created_at: now_nanos(),
            started_at: 0,
            exit: None,
            pid: None,
            labels: request.labels.clone(),
            annotations: request.annotations.clone(),
            log_path,
            mounts: request.mounts.clone(),
            stop_signal,
            limits: request.limits.clone(),
            user: (0, 0, Vec::new()),
            command: Vec::new(),
        };
        let entry = Entry::new(container.clone());
        let Ok(_op) = Arc::clone(&entry.op).try_lock_owned() else {
            return Err(DomainError::Internal(
                "a new container's lock is taken".to_owned(),
            ));
        };
        self.index().insert(id.clone(), Arc::clone(&entry));
        let span = tracing::info_span!("container", container = %id, name = %request.name, sandbox = %sandbox.id);
        let made = tracing::Instrument::instrument(
            self.make(
                &mut container,
                sandbox,
                &request,
                &image.id,
                image_config,
                &runtime,
            ),
            span,
        )
        .await;
        match made {
            Ok(()) => {
                entry.set(Some(container));
                Ok(id)
            }
            Err(error) => {
                tracing::warn!(container = %id, %error, "CreateContainer failed; rolling back");
                match self.take_down(&container, &runtime).await {
                    Ok(()) => {
                        self.index().remove(&id);
                        entry.set(None);
                    }
                    Err(e) => {
                        tracing::warn!(container = %id, error = %e, "rollback incomplete: the next start retries");
                        entry.set(Some(container));
                    }
                }
                Err(error)
            }
        }
    }

    /// The image the request names, its configuration and its stop signal.
    fn image_of(
        &self,
        query: &str,
    ) -> DomainResult<(image_store::Image, image_store::ImageConfiguration, i32)> {
        let image = self.images.get(query).map_err(|e| match e {
            image_store::Error::NotFound { .. } | image_store::Error::InvalidReference { .. } => {
                DomainError::ImageNotFound {
                    image: query.to_owned(),
                    reason: e.to_string(),
                }
            }
            other => DomainError::image(query, other),
        })?;
        let config = self
            .images
            .config(&image)
            .map_err(|e| DomainError::image(query, e))?;
        let stop_signal = config
            .config()
            .as_ref()
            .and_then(|c| c.stop_signal().clone())
            .map_or(Ok(Signal::SIGTERM as i32), |s| parse_signal(&s))
            .map_err(|why| DomainError::Image {
                image: query.to_owned(),
                reason: format!("its configuration's StopSignal: {why}"),
                source: None,
            })?;
        Ok((image, config, stop_signal))
    }

    /// The steps of a creation, each after the intent is on disk.
    async fn make(
        &self,
        container: &mut Container,
        sandbox: &Sandbox,
        request: &ContainerRequest,
        image_id: &str,
        image_config: image_store::ImageConfiguration,
        runtime: &Runtime,
    ) -> DomainResult<()> {
        let id = container.id.clone();
        self.save(container, Store::save_unsynced).await?;
        let rootfs = {
            let images = self.images.clone();
            let (id, image_id) = (id.clone(), image_id.to_owned());
            blocking(move || images.create_rootfs(&id, &image_id))
                .await?
                .map_err(|e| DomainError::image(&request.image, e))?
        };
        let pod_files = self.pod_files(sandbox).await?;
        let mut config = Self::oci_config(
            &self.seccomp,
            self.cgroups,
            container,
            sandbox,
            request,
            image_config,
            &pod_files,
        )?;
        config.resources.pids_limit = self.pids_limit;
        let bundle = self.bundle(&id);
        std::fs::create_dir_all(&bundle).map_err(|source| DomainError::Io {
            what: format!("container {id}: cannot create its bundle"),
            path: bundle.clone(),
            source,
        })?;
        let spec = {
            let (bundle, rootfs_path, cid) = (bundle.clone(), rootfs.path.clone(), id.clone());
            let hooks_dirs = self.hooks_dirs.clone();
            let annotations = request.annotations.clone();
            let has_bind_mounts = !request.mounts.is_empty();
            blocking(move || -> oci_container::Result<oci_spec::runtime::Spec> {
                let mut spec = oci_container::generate(&config, &rootfs_path)?;
                let (hooks, problems) = oci_container::Hooks::load(&hooks_dirs);
                for problem in problems {
                    tracing::warn!(error = %problem, "OCI hook file refused");
                }
                for file in hooks.apply(&mut spec, &annotations, has_bind_mounts) {
                    tracing::info!(container = %cid, hook = %file.display(), "OCI hook injected");
                }
                oci_container::write_bundle(&cid, &bundle, &spec)?;
                Ok(spec)
            })
            .await?
            .map_err(DomainError::runtime)?
        };
        if let Some(process) = spec.process() {
            let user = process.user();
            container.user = (
                user.uid(),
                user.gid(),
                user.additional_gids().clone().unwrap_or_default(),
            );
            container.command = process.args().clone().unwrap_or_default();
        }
        if let Some(parent) = container.log_path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| DomainError::Io {
                what: format!("container {id}: cannot create log directory"),
                path: parent.to_owned(),
                source: e,
            })?;
        }
        let pid = runtime
            .create(&id, &bundle, &container.log_path)
            .await
            .map_err(DomainError::runtime)?;
        container.pid = Some(pid);
        container.state = ContainerState::Created;
        self.save(container, Store::save_unsynced).await?;
        tracing::info!(pid, "container created");
        Ok(())
    }

    fn log_path(
        &self,
        sandbox: &Sandbox,
        request: &ContainerRequest,
        id: &str,
    ) -> DomainResult<PathBuf> {
        if request.log_path.is_empty() || sandbox.log_directory.is_empty() {
            return Ok(self.bundle(id).join("ctr.log"));
        }
        let relative = Path::new(&request.log_path);
        let clean = relative
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)));
        if !clean {
            return Err(DomainError::invalid(
                "config.log_path",
                format!(
                    "{:?} must be a relative path without '..' below the pod's log directory",
                    request.log_path
                ),
            ));
        }
        Ok(Path::new(&sandbox.log_directory).join(relative))
    }

    /// `/etc/hosts`, `/etc/resolv.conf` and `/etc/hostname` of the sandbox's containers,
    /// written once per sandbox.
    async fn pod_files(&self, sandbox: &Sandbox) -> DomainResult<PodFiles> {
        let dir = self.pod_dir(&sandbox.id);
        let files = PodFiles::new(&dir);
        let writes = files.contents(sandbox);
        let dir2 = dir.clone();
        blocking(move || -> std::io::Result<()> {
            std::fs::create_dir_all(&dir2)?;
            for (path, text) in writes {
                if std::fs::symlink_metadata(&path).is_err() {
                    safe_file::write_atomic(
                        &path,
                        text.as_bytes(),
                        0o644,
                        safe_file::Durability::Unsynced,
                    )
                    .map_err(safe_file::Error::into_io)?;
                }
            }
            Ok(())
        })
        .await?
        .map_err(|source| DomainError::Io {
            what: format!("sandbox {}: cannot write the pod's /etc files", sandbox.id),
            path: dir.clone(),
            source,
        })?;
        let (pod, hostname) = (sandbox.id.clone(), pod_hostname(sandbox));
        let program = sandbox.shares_pid().then(|| self.pod_init.clone());
        // The init's cgroup is named as CRI-O names the infra container's, beside the pod's
        // containers.
        let cgroup_parent = PathBuf::from(cgroup_parent(self.cgroups, sandbox)?);
        let (network, cgroup_name) = (sandbox.netns_path.clone(), format!("crio-{pod}"));
        let (pins, pid) = blocking(move || -> oci_container::Result<_> {
            let pins = oci_container::pin_pod(&pod, &dir, &hostname)?;
            let pid = match program {
                Some(program) => {
                    let confinement = oci_container::PodInitConfinement {
                        network,
                        ipc: pins.ipc.clone(),
                        uts: pins.uts.clone(),
                        cgroup_parent,
                        cgroup_name,
                    };
                    Some(oci_container::pin_pod_pid(
                        &pod,
                        &dir,
                        &program,
                        &confinement,
                    )?)
                }
                None => None,
            };
            Ok((pins, pid))
        })
        .await?
        .map_err(DomainError::runtime)?;
        Ok(PodFiles { pins, pid, ..files })
    }

    fn oci_config(
        seccomp: &SeccompDefaults,
        cgroups: oci_container::CgroupManager,
        container: &Container,
        sandbox: &Sandbox,
        request: &ContainerRequest,
        image_config: image_store::ImageConfiguration,
        pod_files: &PodFiles,
    ) -> DomainResult<ContainerConfig> {
        let mut mounts = Vec::new();
        for (i, m) in request.mounts.iter().enumerate() {
            mounts.push(bind_mount(i, m)?);
        }
        for (destination, source) in pod_files.mounts(sandbox, request.host_ipc) {
            if !mounts
                .iter()
                .any(|m: &oci_container::BindMount| m.destination == destination)
            {
                mounts.push(oci_container::BindMount {
                    source,
                    destination: destination.to_owned(),
                    readonly: false,
                    propagation: oci_container::Propagation::Private,
                });
            }
        }
        let cgroup_parent = cgroup_parent(cgroups, sandbox)?;
        let mut annotations = request.annotations.clone();
        annotations.insert(
            "io.kubernetes.cri-o.SandboxID".to_owned(),
            sandbox.id.clone(),
        );
        annotations.insert(
            "io.kubernetes.cri-o.ContainerName".to_owned(),
            request.name.clone(),
        );
        Ok(ContainerConfig {
            id: container.id.clone(),
            image: Some(image_config),
            command: request.command.clone(),
            args: request.args.clone(),
            env: request.env.clone(),
            working_dir: request.working_dir.clone(),
            user: request.user.clone(),
            supplemental_groups: request.supplemental_groups.clone(),
            strict_groups: request.strict_groups,
            hostname: Some(pod_hostname(sandbox)),
            mounts,
            namespaces: NamespacePaths {
                network: sandbox.netns_path.clone(),
                ipc: Some(pod_files.pins.ipc.clone()),
                uts: Some(pod_files.pins.uts.clone()),
                host_network: sandbox.host_network,
                host_pid: request.pid == PidMode::Node,
                pid: match request.pid {
                    PidMode::Pod => pod_files.pid.clone(),
                    PidMode::Container | PidMode::Node => None,
                },
                host_ipc: request.host_ipc,
                // A pod on the node's network has the node's hostname, as in Kubernetes.
                host_uts: sandbox.host_network,
            },
            capabilities: oci_container::CapabilityChanges {
                add: request.add_capabilities.clone(),
                drop: request.drop_capabilities.clone(),
            },
            privileged: request.privileged,
            no_new_privileges: request.no_new_privs,
            readonly_rootfs: request.readonly_rootfs,
            masked_paths: request.masked_paths.clone(),
            readonly_paths: request.readonly_paths.clone(),
            // The pod's IPC sysctls, written by the runtime in the IPC namespace the pod's
            // containers share.
            sysctls: if request.host_ipc {
                BTreeMap::new()
            } else {
                sandbox
                    .sysctls
                    .iter()
                    .filter(|(k, _)| oci_container::is_ipc_sysctl(k))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            },
            resources: oci_resources(&request.limits),
            devices: request.devices.clone(),
            cgroups_path: Some(cgroups.cgroups_path(&cgroup_parent, "crio-lite", &container.id)),
            annotations,
            seccomp: seccomp.of(request.seccomp.as_ref()),
        })
    }

    /// Undoes whatever a container may own: the runtime's container and its conmon, the root
    /// file system, the bundle, then the record. Keeps going past failures; the record stays
    /// when anything else did, so the next start retries.
    async fn take_down(&self, container: &Container, runtime: &Runtime) -> DomainResult<()> {
        let id = &container.id;
        let mut first = None;
        if let Err(e) = runtime.remove(id).await {
            first = first.or(Some(DomainError::runtime(e)));
        }
        let images = self.images.clone();
        let cid = id.clone();
        match blocking(move || images.remove_rootfs(&cid)).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => first = first.or(Some(DomainError::image(&container.image, e))),
            Err(e) => first = first.or(Some(e)),
        }
        let bundle = self.bundle(id);
        if let Err(e) = remove_dir(&bundle) {
            first = first.or(Some(DomainError::Io {
                what: format!("container {id}: cannot remove its bundle"),
                path: bundle,
                source: e,
            }));
        }
        if let Some(e) = first {
            return Err(e);
        }
        let store = self.store.clone();
        let cid = id.clone();
        blocking(move || store.delete_unsynced(&cid))
            .await?
            .map_err(|source| DomainError::State {
                sandbox: id.clone(),
                source,
            })
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

    /// Starts a created container.
    pub(crate) async fn start(&self, id: &str) -> DomainResult<()> {
        let (entry, _op, mut container) = self.locked(id).await?;
        let container = &mut container;
        self.observe(container);
        if container.state != ContainerState::Created || container.exited() {
            return Err(DomainError::ContainerState {
                id: container.id.clone(),
                state: container.visible_state().as_str(),
                wanted: "created",
            });
        }
        let runtime = self.runtime(&container.runtime_handler)?;
        runtime
            .start(&container.id)
            .await
            .map_err(DomainError::runtime)?;
        container.state = ContainerState::Running;
        container.started_at = now_nanos();
        self.save(container, Store::save_unsynced).await?;
        entry.set(Some(container.clone()));
        tracing::info!(container = %container.id, "container started");
        Ok(())
    }

    /// Stops a container: its stop signal, then SIGKILL after `timeout` (at once for zero).
    /// A container that is not running is stopped already; one that is not there too (the CRI's
    /// idempotence, which critest checks), as with [`remove`].
    ///
    /// [`remove`]: Containers::remove
    pub(crate) async fn stop(&self, id: &str, timeout: Duration) -> DomainResult<()> {
        let (entry, _op, mut container) = match self.locked(id).await {
            Err(DomainError::ContainerNotFound { .. }) => {
                tracing::debug!(container = %id, "StopContainer: no such container, nothing to stop");
                return Ok(());
            }
            other => other?,
        };
        let outcome = self.stop_locked(&mut container, timeout).await;
        entry.set(Some(container));
        outcome
    }

    async fn stop_locked(&self, container: &mut Container, timeout: Duration) -> DomainResult<()> {
        self.observe(container);
        if container.exited() || container.state == ContainerState::Removing {
            return self.record_exit(container).await;
        }
        let runtime = self.runtime(&container.runtime_handler)?.clone();
        let id = container.id.clone();
        if container.state == ContainerState::Created {
            // Never started: its process waits in the runtime; killing it ends it.
            signal(&runtime, &id, Signal::SIGKILL).await?;
        } else if !timeout.is_zero() {
            let first = Signal::try_from(container.stop_signal).unwrap_or(Signal::SIGTERM);
            if wait_after_signal(&runtime, &id, container.pid, first, timeout).await? {
                self.observe(container);
                return self.record_exit(container).await;
            }
            tracing::info!(container = %id, "did not stop in {timeout:?}: killing it");
        }
        signal(&runtime, &id, Signal::SIGKILL).await?;
        runtime
            .wait(&id, KILL_WAIT)
            .await
            .map_err(DomainError::runtime)?;
        self.observe(container);
        self.record_exit(container).await
    }

    /// Persists an exit seen in conmon's file, so it survives the runtime's state.
    async fn record_exit(&self, container: &mut Container) -> DomainResult<()> {
        if container.exited()
            && container.state != ContainerState::Exited
            && container.state != ContainerState::Removing
        {
            container.state = ContainerState::Exited;
            self.save(container, Store::save_unsynced).await?;
            tracing::info!(container = %container.id, exit = ?container.exit, "container stopped");
        }
        Ok(())
    }

    /// Learns from conmon's exit file whether a created or running container has exited.
    fn observe(&self, container: &mut Container) {
        if container.exit.is_some()
            || !matches!(
                container.state,
                ContainerState::Created | ContainerState::Running
            )
        {
            return;
        }
        let Ok(runtime) = self.runtime(&container.runtime_handler) else {
            return;
        };
        if let Ok(exit) = runtime.exit_details(&container.id) {
            container.exit = Some(Exit {
                code: exit.code,
                at: exit
                    .exited_at
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)),
                oom_killed: exit.oom_killed,
                message: String::new(),
            });
        }
    }

    /// Removes a container, killing it first if it runs. Unknown IDs succeed.
    pub(crate) async fn remove(&self, id: &str) -> DomainResult<()> {
        let (entry, _op, mut container) = match self.locked(id).await {
            Err(DomainError::ContainerNotFound { .. }) => return Ok(()),
            other => other?,
        };
        let outcome = self.remove_locked(&mut container).await;
        if outcome.is_ok() {
            self.index().remove(&container.id);
            entry.set(None);
        } else {
            entry.set(Some(container));
        }
        outcome
    }

    async fn remove_locked(&self, container: &mut Container) -> DomainResult<()> {
        if container.state != ContainerState::Removing {
            self.observe(container);
            container.state = ContainerState::Removing;
            self.save(container, Store::save_unsynced).await?;
        }
        let runtime = self.runtime(&container.runtime_handler)?.clone();
        self.take_down(container, &runtime).await?;
        tracing::info!(container = %container.id, "container removed");
        Ok(())
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
            .filter(|c| c.state != ContainerState::Creating)
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

    /// Kills every container of the sandbox (StopPodSandbox): all are tried, the first
    /// failure returned; once all are stopped, the pod's init, if it has one (which ends its PID
    /// namespace and whatever still ran there).
    pub(crate) async fn stop_all(&self, sandbox_id: &str) -> DomainResult<()> {
        let mut first = None;
        for id in self.in_sandbox(sandbox_id) {
            match self.stop(&id, Duration::ZERO).await {
                Ok(()) | Err(DomainError::ContainerNotFound { .. }) => {}
                Err(e) => first = first.or(Some(e)),
            }
        }
        if let Some(e) = first {
            return Err(e);
        }
        let (pod, dir) = (sandbox_id.to_owned(), self.pod_dir(sandbox_id));
        blocking(move || oci_container::unpin_pod_pid(&pod, &dir))
            .await?
            .map_err(DomainError::runtime)
    }

    /// Removes every container of the sandbox and its `/etc` files (RemovePodSandbox).
    pub(crate) async fn remove_all(&self, sandbox_id: &str) -> DomainResult<()> {
        let mut first = None;
        for id in self.in_sandbox(sandbox_id) {
            if let Err(e) = self.remove(&id).await {
                first = first.or(Some(e));
            }
        }
        if let Some(e) = first {
            return Err(e);
        }
        remove_pod_dir(sandbox_id, &self.pod_dir(sandbox_id))
    }

    /// Runs a command in a running container and returns its output and exit code.
    pub(crate) async fn exec_sync(
        &self,
        id: &str,
        command: &[String],
        timeout: Duration,
    ) -> DomainResult<oci_container::ExecOutput> {
        if command.is_empty() {
            return Err(DomainError::invalid(
                "cmd",
                "empty: name the command to run",
            ));
        }
        let container = self.get(id)?;
        require_running(&container)?;
        let timeout = if timeout.is_zero() { EXEC_MAX } else { timeout };
        let runtime = self.runtime(&container.runtime_handler)?;
        runtime
            .exec_sync(&container.id, command, timeout, EXEC_OUTPUT_CAP)
            .await
            .map_err(DomainError::runtime)
    }

    /// CPU, memory and writable-layer use of a running container; `None` for the cgroup part
    /// of one that is not running.
    pub(crate) async fn stats(
        &self,
        id: &str,
    ) -> DomainResult<(
        Container,
        Option<oci_container::ContainerStats>,
        image_store::Usage,
    )> {
        let container = self.get(id)?;
        let runtime = self.runtime(&container.runtime_handler)?;
        let cgroup = if container.visible_state() == ContainerState::Running {
            runtime.stats(&container.id).await.ok()
        } else {
            None
        };
        let images = self.images.clone();
        let cid = container.id.clone();
        let usage = blocking(move || images.rootfs_disk_usage(&cid))
            .await?
            .unwrap_or_default();
        Ok((container, cgroup, usage))
    }

    /// Changes a running container's cgroup limits.
    pub(crate) async fn update(&self, id: &str, limits: Limits) -> DomainResult<()> {
        let (entry, _op, mut container) = self.locked(id).await?;
        self.observe(&mut container);
        require_running(&container)?;
        let runtime = self.runtime(&container.runtime_handler)?;
        // The OOM score is set at creation and cannot change.
        let resources = oci_container::Resources {
            oom_score_adj: None,
            ..oci_resources(&limits)
        };
        runtime
            .update(&container.id, &resources)
            .await
            .map_err(DomainError::runtime)?;
        container.limits = Limits {
            oom_score_adj: container.limits.oom_score_adj,
            ..limits
        };
        self.save(&container, Store::save_unsynced).await?;
        entry.set(Some(container));
        Ok(())
    }

    /// Pauses (freezes) or resumes a running container.
    pub(crate) async fn pause(&self, id: &str, pause: bool) -> DomainResult<()> {
        let (_entry, _op, mut container) = self.locked(id).await?;
        self.observe(&mut container);
        require_running(&container)?;
        let runtime = self.runtime(&container.runtime_handler)?;
        let done = if pause {
            runtime.pause(&container.id).await
        } else {
            runtime.resume(&container.id).await
        };
        done.map_err(DomainError::runtime)
    }

    /// Asks the container's conmon to reopen its log file (after kubelet rotated it).
    pub(crate) async fn reopen_log(&self, id: &str) -> DomainResult<()> {
        let container = self.get(id)?;
        require_running(&container)?;
        let runtime = self.runtime(&container.runtime_handler)?;
        runtime
            .reopen_log(&container.id)
            .await
            .map_err(DomainError::runtime)
    }

    /// Brings containers back after a restart: those caught being created are undone, those
    /// caught being removed removed, those of sandboxes that are gone removed, and what the
    /// runtimes, the image store and the run directory hold without a record removed.
    pub(crate) async fn recover(&self, sandboxes: &HashSet<String>) {
        let loaded = {
            let store = self.store.clone();
            match blocking(move || store.load_all()).await {
                Ok(Ok(loaded)) => loaded,
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "cannot read container states");
                    return;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read container states");
                    return;
                }
            }
        };
        let mut work = Vec::new();
        for item in loaded {
            match item {
                Loaded::Unreadable { id, error } => {
                    tracing::warn!(container = %id, %error, "unreadable container state: removing the container");
                    work.push(self.orphan(&id));
                }
                Loaded::Item(container) => {
                    let container = *container;
                    let gone = !sandboxes.contains(&container.sandbox_id);
                    if gone {
                        tracing::warn!(container = %container.id, sandbox = %container.sandbox_id, "the container's sandbox is gone: removing it");
                    }
                    if gone
                        || matches!(
                            container.state,
                            ContainerState::Creating | ContainerState::Removing
                        )
                    {
                        work.push(container);
                    } else {
                        self.index()
                            .insert(container.id.clone(), Entry::new(container));
                    }
                }
            }
        }
        for mut container in work {
            let Some(runtime) = self
                .handlers
                .get(&container.runtime_handler)
                .map(|h| h.runtime.clone())
                .or_else(|| {
                    self.handlers
                        .get(&self.default_handler)
                        .map(|h| h.runtime.clone())
                })
            else {
                continue;
            };
            tracing::info!(container = %container.id, state = container.state.as_str(), "finishing the container's removal");
            container.state = ContainerState::Removing;
            if let Err(e) = self.take_down(&container, &runtime).await {
                tracing::warn!(container = %container.id, error = %e, "cannot remove the container; the next start retries");
                self.index()
                    .insert(container.id.clone(), Entry::new(container));
            }
        }
        self.mark_lost().await;
        self.remove_strays(sandboxes).await;
        tracing::info!(containers = self.index().len(), "containers recovered");
    }

    /// Running containers the runtime no longer knows and conmon left no exit for (the node
    /// rebooted): recorded as exited with an unknown code, as CRI-O does.
    async fn mark_lost(&self) {
        let entries: Vec<Arc<Entry<Container>>> = self.index().values().cloned().collect();
        for entry in entries {
            let Some(mut container) = entry.get() else {
                continue;
            };
            self.observe(&mut container);
            if container.exited()
                || !matches!(
                    container.state,
                    ContainerState::Created | ContainerState::Running
                )
            {
                if container.exited() && container.state != ContainerState::Exited {
                    let _ = self.record_exit(&mut container).await;
                    entry.set(Some(container));
                }
                continue;
            }
            let Ok(runtime) = self.runtime(&container.runtime_handler) else {
                continue;
            };
            match runtime.state(&container.id).await {
                Err(oci_container::Error::NotFound { .. }) => {
                    tracing::warn!(container = %container.id, "the runtime lost the container: recording it exited");
                    container.exit = Some(Exit {
                        code: 255,
                        at: now_nanos(),
                        oom_killed: false,
                        message: "the runtime no longer knows this container (the node rebooted?)"
                            .to_owned(),
                    });
                    let _ = self.record_exit(&mut container).await;
                    entry.set(Some(container));
                }
                // Killed between the runtime's start and saving it: the runtime says what is.
                Ok(state)
                    if container.state == ContainerState::Created
                        && matches!(
                            state.status,
                            oci_container::Status::Running | oci_container::Status::Paused
                        ) =>
                {
                    tracing::info!(container = %container.id, "started before the daemon was killed: recording it running");
                    container.state = ContainerState::Running;
                    container.started_at = now_nanos();
                    if let Err(e) = self.save(&container, Store::save_unsynced).await {
                        tracing::warn!(container = %container.id, error = %e, "cannot save it");
                    }
                    entry.set(Some(container));
                }
                _ => {}
            }
        }
    }

    async fn remove_strays(&self, sandboxes: &HashSet<String>) {
        let known: HashSet<String> = self.index().keys().cloned().collect();
        for handler in self.handlers.values() {
            let Ok(records) = handler.runtime.records() else {
                continue;
            };
            for record in records.records {
                if !known.contains(&record.id) {
                    tracing::info!(container = %record.id, "runtime container without a record: removing it");
                    if let Err(e) = handler.runtime.remove(&record.id).await {
                        tracing::warn!(container = %record.id, error = %e, "cannot remove it");
                    }
                }
            }
            // What the runtime itself holds (a `create` that finished after its caller was
            // killed leaves no record of ours): a container is ours when its bundle is in our
            // bundle directory, so others' containers in a shared runtime root are left alone.
            let ours = self.run_dir.join("containers");
            let Ok(listed) = handler.runtime.list().await else {
                continue;
            };
            for state in listed {
                if state.bundle.starts_with(&ours) && !known.contains(&state.id) {
                    tracing::info!(container = %state.id, "runtime container of ours without a record: removing it");
                    if let Err(e) = handler.runtime.remove(&state.id).await {
                        tracing::warn!(container = %state.id, error = %e, "cannot remove it");
                    }
                }
            }
        }
        if let Ok(owners) = self.images.rootfs_owners() {
            for id in owners.into_iter().filter(|id| !known.contains(id)) {
                tracing::info!(container = %id, "root file system without a container: removing it");
                let images = self.images.clone();
                let cid = id.clone();
                if let Ok(Err(e)) = blocking(move || images.remove_rootfs(&cid)).await {
                    tracing::warn!(container = %id, error = %e, "cannot remove it");
                }
            }
        }
        for (dir, owned) in [("containers", &known), ("pods", sandboxes)] {
            let Ok(entries) = std::fs::read_dir(self.run_dir.join(dir)) else {
                continue;
            };
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if !is_sandbox_id(&name)
                    || owned.contains(&name)
                    || !entry.file_type().is_ok_and(|t| t.is_dir())
                {
                    continue;
                }
                tracing::info!(path = %entry.path().display(), "removing a directory nothing owns");
                let removed = if dir == "pods" {
                    remove_pod_dir(&name, &entry.path())
                } else {
                    remove_dir(&entry.path()).map_err(|source| DomainError::Io {
                        what: format!("container {name}: cannot remove its bundle"),
                        path: entry.path(),
                        source,
                    })
                };
                if let Err(e) = removed {
                    tracing::warn!(error = %e, "cannot remove a stray directory");
                }
            }
        }
    }

    fn orphan(&self, id: &str) -> Container {
        Container {
            id: id.to_owned(),
            sandbox_id: String::new(),
            name: String::new(),
            attempt: 0,
            state: ContainerState::Removing,
            image: String::new(),
            image_id: String::new(),
            image_ref: String::new(),
            runtime_handler: self.default_handler.clone(),
            created_at: 0,
            started_at: 0,
            exit: None,
            pid: None,
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
            log_path: PathBuf::new(),
            mounts: Vec::new(),
            stop_signal: Signal::SIGTERM as i32,
            limits: Limits::default(),
            user: (0, 0, Vec::new()),
            command: Vec::new(),
        }
    }
}

/// CRI limits (0 for unset) as oci-container's resources.
fn oci_resources(limits: &Limits) -> oci_container::Resources {
    let positive = |v: i64| (v > 0).then_some(v);
    oci_container::Resources {
        cpu_shares: positive(limits.cpu_shares).and_then(|v| u64::try_from(v).ok()),
        cpu_quota: positive(limits.cpu_quota),
        cpu_period: positive(limits.cpu_period).and_then(|v| u64::try_from(v).ok()),
        cpuset_cpus: Some(limits.cpuset_cpus.clone()).filter(|s| !s.is_empty()),
        cpuset_mems: Some(limits.cpuset_mems.clone()).filter(|s| !s.is_empty()),
        memory_limit: positive(limits.memory_limit_in_bytes),
        oom_score_adj: (limits.oom_score_adj != 0)
            .then(|| i32::try_from(limits.oom_score_adj).unwrap_or(1000)),
        pids_limit: None,
        hugepage_limits: limits.hugepage_limits.clone(),
    }
}

fn require_running(container: &Container) -> DomainResult<()> {
    if container.visible_state() == ContainerState::Running {
        Ok(())
    } else {
        Err(DomainError::ContainerState {
            id: container.id.clone(),
            state: container.visible_state().as_str(),
            wanted: "running",
        })
    }
}

/// Sends `signal`; a container that has exited meanwhile is not an error.
async fn signal(runtime: &Runtime, id: &str, signal: Signal) -> DomainResult<()> {
    let Err(e) = runtime.kill(id, signal).await else {
        return Ok(());
    };
    if matches!(e, oci_container::Error::NotFound { .. }) || runtime.exit_code(id).is_ok() {
        return Ok(());
    }
    // runc refuses to signal a container whose process is gone but not yet reaped.
    match runtime.state(id).await {
        Ok(s) if s.status == oci_container::Status::Stopped => Ok(()),
        _ => Err(DomainError::runtime(e)),
    }
}

/// Sends the stop signal and waits up to `timeout` for the container to exit; whether it did.
///
/// The container's process is the init of its PID namespace, so the kernel drops a signal it
/// has no handler for. One stopped right after it started may not have installed its handler
/// yet (`top` sets its own a moment after exec): the signal, lost, is sent again once the handler
/// is there, rather than the container sitting out its whole grace period until SIGKILL.
/// critest's "stopping container" starts `top` and stops it at once.
async fn wait_after_signal(
    runtime: &Runtime,
    id: &str,
    pid: Option<i32>,
    first: Signal,
    timeout: Duration,
) -> DomainResult<bool> {
    let disposition = || pid.and_then(|p| oci_container::SignalDisposition::of(p, first as i32));
    // Dropped if no handler was there before the signal nor after it (a handler that came in
    // between may have taken it: no second signal then).
    let dropped_before = disposition().is_some_and(|d| d.dropped());
    signal(runtime, id, first).await?;
    let mut lost = dropped_before && disposition().is_some_and(|d| d.dropped());
    let deadline = std::time::Instant::now() + timeout;
    let left = || deadline.saturating_duration_since(std::time::Instant::now());
    // While the signal is lost, the wait is cut in slices to look for the handler between them.
    const HANDLER_LOOK: Duration = Duration::from_millis(5);
    while lost {
        if runtime.wait(id, left().min(HANDLER_LOOK)).await.is_ok() {
            return Ok(true);
        }
        if left().is_zero() {
            return Ok(false);
        }
        if disposition().is_some_and(|d| d.caught) {
            tracing::debug!(container = %id, signal = ?first, "the handler is there now: signalling again");
            lost = false;
            signal(runtime, id, first).await?;
        }
    }
    Ok(runtime.wait(id, left()).await.is_ok())
}

/// `/etc/hosts`, `/etc/resolv.conf`, `/etc/hostname` of a pod.
struct PodFiles {
    hosts: PathBuf,
    resolv: PathBuf,
    hostname: PathBuf,
    /// The IPC and UTS namespaces and `/dev/shm` the pod's containers share.
    pins: oci_container::PodNamespaces,
    /// The pod's PID namespace, when it shares one.
    pid: Option<PathBuf>,
}

impl PodFiles {
    fn new(dir: &Path) -> PodFiles {
        PodFiles {
            hosts: dir.join("hosts"),
            resolv: dir.join("resolv.conf"),
            hostname: dir.join("hostname"),
            pins: oci_container::PodNamespaces::under(dir),
            pid: None,
        }
    }

    fn contents(&self, sandbox: &Sandbox) -> Vec<(PathBuf, String)> {
        let hostname = pod_hostname(sandbox);
        let mut hosts =
            String::from("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n");
        for ip in sandbox.ips() {
            let _ = writeln!(hosts, "{ip}\t{hostname}");
        }
        if sandbox.ips().is_empty() {
            let _ = writeln!(hosts, "127.0.1.1\t{hostname}");
        }
        let mut out = vec![
            (self.hosts.clone(), hosts),
            (self.hostname.clone(), format!("{hostname}\n")),
        ];
        if let Some(resolv) = resolv_conf(sandbox) {
            out.push((self.resolv.clone(), resolv));
        }
        out
    }

    /// `(destination, source)` of each file the pod has, and its `/dev/shm`.
    fn mounts(&self, sandbox: &Sandbox, host_ipc: bool) -> Vec<(&'static str, PathBuf)> {
        let mut out = vec![
            ("/etc/hosts", self.hosts.clone()),
            ("/etc/hostname", self.hostname.clone()),
        ];
        if !host_ipc {
            out.push(("/dev/shm", self.pins.shm.clone()));
        }
        if resolv_conf(sandbox).is_some() {
            out.push(("/etc/resolv.conf", self.resolv.clone()));
        }
        out
    }
}

/// The pod's resolv.conf from its DNS config; `None` when it has none (the image's stays).
fn resolv_conf(sandbox: &Sandbox) -> Option<String> {
    let dns = &sandbox.dns;
    if dns.servers.is_empty() && dns.searches.is_empty() && dns.options.is_empty() {
        return None;
    }
    let mut out = String::new();
    if !dns.searches.is_empty() {
        let _ = writeln!(out, "search {}", dns.searches.join(" "));
    }
    for server in &dns.servers {
        let _ = writeln!(out, "nameserver {server}");
    }
    if !dns.options.is_empty() {
        let _ = writeln!(out, "options {}", dns.options.join(" "));
    }
    Some(out)
}

fn pod_hostname(sandbox: &Sandbox) -> String {
    if sandbox.hostname.is_empty() {
        let mut name = sandbox.name.name.clone();
        name.truncate(63);
        name
    } else {
        sandbox.hostname.clone()
    }
}

fn bind_mount(i: usize, m: &MountSpec) -> DomainResult<oci_container::BindMount> {
    let field = |f: &str| format!("config.mounts[{i}].{f}");
    if !m.host_path.is_absolute() {
        return Err(DomainError::invalid(
            field("host_path"),
            format!("{} is not an absolute path", m.host_path.display()),
        ));
    }
    let dest = Path::new(&m.container_path);
    if !dest.is_absolute()
        || dest == Path::new("/")
        || dest
            .components()
            .any(|c| c == std::path::Component::ParentDir)
    {
        return Err(DomainError::invalid(
            field("container_path"),
            format!(
                "{:?} must be an absolute path below / without '..'",
                m.container_path
            ),
        ));
    }
    if std::fs::symlink_metadata(&m.host_path).is_err() {
        // As CRI-O: a missing host directory is made (kubelet's hostPath DirectoryOrCreate).
        std::fs::create_dir_all(&m.host_path).map_err(|e| {
            DomainError::invalid(
                field("host_path"),
                format!(
                    "{} does not exist and cannot be made: {e}",
                    m.host_path.display()
                ),
            )
        })?;
    }
    let propagation = match m.propagation {
        0 => oci_container::Propagation::Private,
        1 => oci_container::Propagation::HostToContainer,
        2 => oci_container::Propagation::Bidirectional,
        other => {
            return Err(DomainError::invalid(
                field("propagation"),
                format!("unknown propagation {other}"),
            ));
        }
    };
    Ok(oci_container::BindMount {
        source: m.host_path.clone(),
        destination: m.container_path.clone(),
        readonly: m.readonly,
        propagation,
    })
}

/// A stop signal as images name it: `SIGTERM`, `TERM`, `15`, `SIGRTMIN+3` is refused.
fn parse_signal(text: &str) -> Result<i32, String> {
    let text = text.trim();
    if let Ok(n) = text.parse::<i32>() {
        return Signal::try_from(n)
            .map(|s| s as i32)
            .map_err(|_| format!("stop signal {n} is not a signal"));
    }
    let upper = text.to_ascii_uppercase();
    let name = if upper.starts_with("SIG") {
        upper
    } else {
        format!("SIG{upper}")
    };
    name.parse::<Signal>()
        .map(|s| s as i32)
        .map_err(|_| format!("stop signal {text:?} is not a signal name"))
}

/// A container may ask POD for pid only in a pod that shares one.
fn check_pid_mode(sandbox: &Sandbox, pid: PidMode) -> DomainResult<()> {
    if pid == PidMode::Pod && !sandbox.shares_pid() {
        // kubelet sets one mode on a pod and its containers; a container cannot share what
        // the pod does not have, and quietly giving it a namespace of its own would hide
        // its siblings from it.
        return Err(DomainError::invalid(
            "config.linux.security_context.namespace_options.pid",
            format!(
                "POD, but sandbox {} was not run with POD for pid: it has no PID namespace to \
                 share (ask CONTAINER or NODE, or run the pod with POD)",
                sandbox.id
            ),
        ));
    }
    Ok(())
}

/// A privileged container only in a privileged pod, as CRI-O and containerd: the pod's spec
/// is where a cluster's admission decides whether privilege is allowed, and a privileged
/// container of an unprivileged pod would start with every capability and device anyway.
fn check_privileged(sandbox: &Sandbox, request: &ContainerRequest) -> DomainResult<()> {
    if request.privileged && !sandbox.privileged {
        return Err(DomainError::invalid(
            "config.linux.security_context.privileged",
            format!(
                "a privileged container, but sandbox {} was not run privileged \
                 (config.linux.security_context.privileged of RunPodSandbox): only a privileged \
                 pod may hold privileged containers",
                sandbox.id
            ),
        ));
    }
    Ok(())
}

/// The cgroup parent of the sandbox's containers (and of its init): its `cgroup_parent`, or
/// `/crio-lite`. Checked at RunPodSandbox; checked again here for records of pods made before
/// that check.
fn cgroup_parent(
    cgroups: oci_container::CgroupManager,
    sandbox: &Sandbox,
) -> DomainResult<String> {
    cgroups
        .check_parent(&sandbox.cgroup_parent)
        .map_err(|why| DomainError::invalid("sandbox cgroup_parent", why))?;
    Ok(if sandbox.cgroup_parent.is_empty() {
        DEFAULT_CGROUP_PARENT.to_owned()
    } else {
        sandbox.cgroup_parent.clone()
    })
}

/// The daemon's own executable, resolved once (an upgrade that replaces the file later does not
/// change which binary pod inits run), with the hidden subcommand that makes it a pod init.
fn pod_init_program() -> oci_container::PodInitProgram {
    oci_container::PodInitProgram {
        path: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("/proc/self/exe")),
        args: vec![crate::cli::POD_INIT_COMMAND.into()],
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_container_shares_a_pid_namespace_only_with_a_pod_that_has_one() {
        let mut sandbox = Sandbox::example("s1");
        assert!(sandbox.shares_pid(), "CRI's zero value is POD");
        for mode in [PidMode::Pod, PidMode::Container, PidMode::Node] {
            check_pid_mode(&sandbox, mode).expect("a POD pod takes every mode");
        }
        for pod_mode in [1, 2] {
            sandbox.namespace_options.pid = pod_mode;
            assert!(!sandbox.shares_pid());
            let err = check_pid_mode(&sandbox, PidMode::Pod).expect_err("nothing to share");
            let text = err.to_string();
            assert!(
                text.contains("namespace_options.pid") && text.contains("s1"),
                "{text}"
            );
            check_pid_mode(&sandbox, PidMode::Container).expect("its own");
            check_pid_mode(&sandbox, PidMode::Node).expect("the node's");
        }
    }

    /// Issue #21: a privileged container in an unprivileged pod started with every capability.
    #[test]
    fn a_privileged_container_needs_a_privileged_pod() {
        let mut sandbox = Sandbox::example("s1");
        let privileged = ContainerRequest {
            privileged: true,
            ..ContainerRequest::default()
        };
        let err = check_privileged(&sandbox, &privileged)
            .expect_err("an unprivileged pod")
            .to_string();
        assert!(
            err.starts_with("config.linux.security_context.privileged:") && err.contains("s1"),
            "{err}"
        );
        check_privileged(&sandbox, &ContainerRequest::default()).expect("unprivileged is fine");
        sandbox.privileged = true;
        check_privileged(&sandbox, &privileged).expect("a privileged pod");
        check_privileged(&sandbox, &ContainerRequest::default()).expect("either kind");
    }

    #[test]
    fn stop_signals_parse_as_images_write_them() {
        for (text, want) in [
            ("SIGTERM", Ok(15)),
            ("TERM", Ok(15)),
            ("sigquit", Ok(3)),
            ("9", Ok(9)),
            ("SIGWHAT", Err(())),
            ("999", Err(())),
        ] {
            assert_eq!(parse_signal(text).map_err(drop), want, "{text}");
        }
    }

    #[test]
    fn mounts_outside_what_is_allowed_are_refused_naming_the_field() {
        let ok = MountSpec {
            container_path: "/data".into(),
            host_path: std::env::temp_dir(),
            readonly: true,
            propagation: 1,
        };
        assert!(bind_mount(0, &ok).is_ok());
        for (m, field) in [
            (
                MountSpec {
                    host_path: "rel".into(),
                    ..ok.clone()
                },
                "config.mounts[3].host_path",
            ),
            (
                MountSpec {
                    container_path: "data".into(),
                    ..ok.clone()
                },
                "config.mounts[3].container_path",
            ),
            (
                MountSpec {
                    container_path: "/a/../..".into(),
                    ..ok.clone()
                },
                "config.mounts[3].container_path",
            ),
            (
                MountSpec {
                    container_path: "/".into(),
                    ..ok.clone()
                },
                "config.mounts[3].container_path",
            ),
            (
                MountSpec {
                    propagation: 7,
                    ..ok.clone()
                },
                "config.mounts[3].propagation",
            ),
        ] {
            let err = bind_mount(3, &m).unwrap_err().to_string();
            assert!(err.starts_with(field), "{err}");
        }
    }

    #[test]
    fn resolv_conf_is_the_pods_dns_or_none() {
        let mut sandbox = Sandbox::example("s");
        assert_eq!(resolv_conf(&sandbox), None);
        sandbox.dns.servers = vec!["10.0.0.10".into()];
        sandbox.dns.searches = vec!["ns.svc.cluster.local".into(), "svc.cluster.local".into()];
        sandbox.dns.options = vec!["ndots:5".into()];
        assert_eq!(
            resolv_conf(&sandbox).unwrap(),
            "search ns.svc.cluster.local svc.cluster.local\nnameserver 10.0.0.10\noptions ndots:5\n"
        );
    }
}

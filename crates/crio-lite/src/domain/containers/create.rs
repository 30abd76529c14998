//! CreateContainer: the record first, then the root file system, the pod's shared parts, the
//! bundle and the runtime's container, each after the intent is on disk; a failure undoes
//! whatever was made ([`Containers::take_down`]).

use std::sync::Arc;

use oci_container::{ContainerConfig, Runtime};

use super::super::container::{Container, ContainerState, MountSpec};
use super::super::entry::Entry;
use super::super::error::{DomainError, DomainResult};
use super::super::now_nanos;
use super::super::sandbox::Sandbox;
use super::checks::{cgroup_parent, check_pid_mode, check_privileged, log_path, mount_error};
use super::request::ContainerRequest;
use super::{Containers, blocking, remove_dir};
use crate::store::{Store, new_sandbox_id};

impl Containers {
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
        let log_path = log_path(sandbox, &request, self.bundle(&id).join("ctr.log"))?;
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
            stop_signal: stop_signal.number(),
            limits: request.limits.clone(),
            user: (0, 0, Vec::new()),
            command: Vec::new(),
            stdio: request.stdio,
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
    ) -> DomainResult<(
        image_store::Image,
        image_store::ImageConfiguration,
        oci_container::StopSignal,
    )> {
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
            .map_or(Ok(oci_container::StopSignal::default()), |s| {
                oci_container::StopSignal::parse(&s)
            })
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
        let pod = pod_of(sandbox);
        let pod_files = self.pod_files(sandbox, &pod, runtime).await?;
        let config =
            self.oci_config(container, sandbox, request, image_config, &pod, &pod_files)?;
        let spec = {
            let (bundle, rootfs) = (self.bundle(&id), rootfs.path.clone());
            let hooks_dirs = self.hooks_dirs.clone();
            let has_bind_mounts = !request.mounts.is_empty();
            blocking(move || {
                oci_container::make_bundle(&config, &rootfs, &bundle, &hooks_dirs, has_bind_mounts)
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
            .create_with_stdio(&id, &self.bundle(&id), &container.log_path, container.stdio)
            .await
            .map_err(DomainError::runtime)?;
        container.pid = Some(pid);
        container.state = ContainerState::Created;
        self.save(container, Store::save_unsynced).await?;
        tracing::info!(pid, "container created");
        Ok(())
    }

    /// What the sandbox's containers share (`/etc` files, namespaces, `/dev/shm`, the init of
    /// a pod that shares its PID namespace), made at its first container's creation.
    async fn pod_files(
        &self,
        sandbox: &Sandbox,
        pod: &oci_container::Pod,
        runtime: &Runtime,
    ) -> DomainResult<oci_container::PodFiles> {
        let dir = self.pod_dir(&sandbox.id);
        let cgroup_parent = cgroup_parent(self.cgroups, sandbox)?;
        let systemd = self.cgroups == oci_container::CgroupManager::Systemd;
        // The init's cgroup is named as CRI-O names the infra container's, beside the pod's
        // containers: made by the init itself with cgroupfs, a scope started around it with
        // systemd.
        let init = sandbox.shares_pid().then(|| oci_container::PodInit {
            program: self.pod_init.clone(),
            cgroup_parent: (!systemd).then(|| cgroup_parent.clone().into()),
            cgroup_name: format!("crio-{}", sandbox.id),
        });
        let files = {
            let (dir, pod) = (dir.clone(), pod.clone());
            blocking(move || oci_container::PodFiles::make(&dir, &pod, init.as_ref()))
                .await?
                .map_err(DomainError::runtime)?
        };
        if systemd
            && files.pid.is_some()
            && let Some(pid) =
                oci_container::pod_init_pid(&sandbox.id, &dir).map_err(DomainError::runtime)?
        {
            runtime
                .place_pod_init(&sandbox.id, pid, &cgroup_parent)
                .await
                .map_err(DomainError::runtime)?;
        }
        Ok(files)
    }

    /// The container's configuration as oci-container takes it: the request's, in the pod.
    fn oci_config(
        &self,
        container: &Container,
        sandbox: &Sandbox,
        request: &ContainerRequest,
        image_config: image_store::ImageConfiguration,
        pod: &oci_container::Pod,
        pod_files: &oci_container::PodFiles,
    ) -> DomainResult<ContainerConfig> {
        let cgroup_parent = cgroup_parent(self.cgroups, sandbox)?;
        let mut annotations = request.annotations.clone();
        annotations.insert(
            "io.kubernetes.cri-o.SandboxID".to_owned(),
            sandbox.id.clone(),
        );
        annotations.insert(
            "io.kubernetes.cri-o.ContainerName".to_owned(),
            request.name.clone(),
        );
        let mut config = ContainerConfig {
            id: container.id.clone(),
            image: Some(image_config),
            command: request.command.clone(),
            args: request.args.clone(),
            env: request.env.clone(),
            working_dir: request.working_dir.clone(),
            user: request.user.clone(),
            supplemental_groups: request.supplemental_groups.clone(),
            strict_groups: request.strict_groups,
            mounts: request.mounts.iter().map(MountSpec::bind_mount).collect(),
            capabilities: oci_container::CapabilityChanges {
                add: request.add_capabilities.clone(),
                drop: request.drop_capabilities.clone(),
            },
            privileged: request.privileged,
            no_new_privileges: request.no_new_privs,
            readonly_rootfs: request.readonly_rootfs,
            masked_paths: request.masked_paths.clone(),
            readonly_paths: request.readonly_paths.clone(),
            resources: oci_container::Resources {
                pids_limit: self.pids_limit,
                ..request.limits.resources()
            },
            devices: request.devices.clone(),
            // With systemd the scope is `crio-<id>.scope`, as CRI-O names it.
            cgroups_path: Some(self.cgroups.cgroups_path(
                &cgroup_parent,
                match self.cgroups {
                    oci_container::CgroupManager::Systemd => "crio",
                    _ => "crio-lite",
                },
                &container.id,
            )),
            annotations,
            seccomp: self.seccomp.of(request.seccomp.as_ref()),
            stdio: request.stdio,
            ..ContainerConfig::default()
        };
        config
            .join_pod(pod, pod_files, request.pid.namespace(), request.host_ipc)
            .map_err(mount_error)?;
        Ok(config)
    }

    /// Undoes whatever a container may own: the runtime's container and its conmon, the root
    /// file system, the bundle, then the record. Keeps going past failures; the record stays
    /// when anything else did, so the next start retries.
    pub(super) async fn take_down(
        &self,
        container: &Container,
        runtime: &Runtime,
    ) -> DomainResult<()> {
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
}

/// The sandbox as its containers see it.
fn pod_of(sandbox: &Sandbox) -> oci_container::Pod {
    oci_container::Pod {
        id: sandbox.id.clone(),
        hostname: oci_container::pod_hostname(&sandbox.hostname, &sandbox.name.name),
        ips: sandbox.ips(),
        dns: oci_container::PodDns {
            servers: sandbox.dns.servers.clone(),
            searches: sandbox.dns.searches.clone(),
            options: sandbox.dns.options.clone(),
        },
        network: sandbox.netns_path.clone(),
        host_network: sandbox.host_network,
        sysctls: sandbox.sysctls.clone(),
    }
}

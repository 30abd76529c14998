//! Recovery at start-up: containers caught being created are undone, those caught being
//! removed removed, those whose sandbox is gone removed, those the runtime lost recorded as
//! exited, and what the runtimes, the image store and the run directory hold without a record
//! removed.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

use super::super::container::{Container, ContainerState, Exit, Limits};
use super::super::entry::Entry;
use super::super::error::DomainError;
use super::super::now_nanos;
use super::{Containers, blocking, remove_dir, remove_pod_dir};
use crate::store::{Loaded, Store, is_sandbox_id};

impl Containers {
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
        // With systemd: scopes of ours (conmon's, a pod init's) that outlived their records.
        let known_or_pod = |id: &str| known.contains(id) || sandboxes.contains(id);
        for handler in self.handlers.values() {
            match handler.runtime.stop_stray_scopes(&known_or_pod).await {
                Ok(stopped) if !stopped.is_empty() => {
                    tracing::info!(units = ?stopped, "stopped scopes no container or pod records");
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "cannot look for stray scopes"),
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
            stop_signal: oci_container::StopSignal::default().number(),
            limits: Limits::default(),
            user: (0, 0, Vec::new()),
            command: Vec::new(),
            stdio: oci_container::ContainerStdio::default(),
        }
    }
}

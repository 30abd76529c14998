//! Start, stop and remove: the records kept as oci-container's runtime starts, stops (its stop
//! protocol) and deletes a container; an exit is learnt from conmon's exit file.

use std::time::{Duration, UNIX_EPOCH};

use super::super::container::{Container, ContainerState, Exit};
use super::super::error::{DomainError, DomainResult};
use super::super::now_nanos;
use super::{Containers, blocking, remove_pod_dir};
use crate::store::Store;

impl Containers {
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
        let runtime = self.runtime(&container.runtime_handler)?;
        // Never started: its process waits in the runtime; killing it ends it.
        let timeout = if container.state == ContainerState::Created {
            Duration::ZERO
        } else {
            timeout
        };
        let signal =
            oci_container::StopSignal::from_number(container.stop_signal).unwrap_or_default();
        runtime
            .stop(&container.id, container.pid, signal, timeout)
            .await
            .map_err(DomainError::runtime)?;
        self.observe(container);
        self.record_exit(container).await
    }

    /// Persists an exit seen in conmon's file, so it survives the runtime's state.
    pub(super) async fn record_exit(&self, container: &mut Container) -> DomainResult<()> {
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
    pub(super) fn observe(&self, container: &mut Container) {
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
}

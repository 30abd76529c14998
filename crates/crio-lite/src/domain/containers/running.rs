//! What is asked of a running container: ExecSync, its stats, new limits, pause and resume,
//! and reopening its log.

use std::collections::BTreeMap;
use std::time::Duration;

use super::super::container::{Container, ContainerState, Limits};
use super::super::error::{DomainError, DomainResult};
use super::checks::require_running;
use super::{Containers, blocking};
use crate::store::Store;

/// The most output ExecSync keeps of each stream (CRI-O keeps 16 MiB).
pub const EXEC_OUTPUT_CAP: usize = 16 << 20;
/// An ExecSync without a timeout still ends: after this long.
const EXEC_MAX: Duration = Duration::from_secs(24 * 3600);

impl Containers {
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

    /// Runs a command in a running container with live streams (CRI's Exec), until it exits;
    /// its exit code. Dropping the future kills the command.
    pub(crate) async fn exec(
        &self,
        id: &str,
        command: &[String],
        tty: bool,
        streams: oci_container::Streams,
    ) -> DomainResult<i32> {
        if command.is_empty() {
            return Err(DomainError::invalid(
                "cmd",
                "empty: name the command to run",
            ));
        }
        let container = self.get(id)?;
        require_running(&container)?;
        let runtime = self.runtime(&container.runtime_handler)?;
        runtime
            .exec(&container.id, command, tty, streams)
            .await
            .map_err(DomainError::runtime)
    }

    /// Attaches streams to a running container's process (CRI's Attach) until it exits or
    /// the caller detaches; the container's record says whether it has a terminal and a
    /// stdin.
    pub(crate) async fn attach(
        &self,
        id: &str,
        streams: oci_container::Streams,
    ) -> DomainResult<()> {
        let container = self.get(id)?;
        require_running(&container)?;
        let runtime = self.runtime(&container.runtime_handler)?;
        runtime
            .attach(&container.id, streams)
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
        // The OOM score and the unified map are set at creation and do not change.
        let resources = oci_container::Resources {
            oom_score_adj: None,
            unified: BTreeMap::new(),
            ..limits.resources()
        };
        runtime
            .update(&container.id, &resources)
            .await
            .map_err(DomainError::runtime)?;
        container.limits = Limits {
            oom_score_adj: container.limits.oom_score_adj,
            unified: std::mem::take(&mut container.limits.unified),
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
}

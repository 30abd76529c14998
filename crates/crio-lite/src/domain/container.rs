//! What crio-lite records about a container, and its life cycle.
//!
//! # States
//!
//! ```text
//!  CreateContainer              StartContainer          exit, or StopContainer   RemoveContainer
//! ─────────► Creating ───────► Created ───────► Running ─────────► Exited ─────────► Removing ──► (gone)
//!               │ root fs, bundle,                                                  runtime delete,
//!               │ conmon + runtime create                                           root fs, bundle,
//!               └── failure, or found at start-up: all of it undone                 record
//! ```
//!
//! `Creating` is written before the root file system, the bundle or conmon exist, `Removing`
//! before any of them goes: a daemon killed at any line finds on its next start what it was
//! doing and undoes or finishes it. `Running` and `Created` are what crio-lite last did; the
//! truth of whether the process still runs is conmon's exit file, read at each look
//! ([`Container::exited`]), so a container that exits while crio-lite is down is reported
//! exited, with its code, after the restart.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The life-cycle state of a container (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ContainerState {
    /// Written before anything is made; never listed.
    Creating,
    /// Created by the runtime, its process waiting for StartContainer.
    Created,
    /// Started (it may have exited since: see [`Container::exited`]).
    Running,
    /// Exited, its exit code recorded.
    Exited,
    /// Being removed. Listed as exited.
    Removing,
}

impl ContainerState {
    /// The name used in state files and the status API.
    pub fn as_str(self) -> &'static str {
        match self {
            ContainerState::Creating => "creating",
            ContainerState::Created => "created",
            ContainerState::Running => "running",
            ContainerState::Exited => "exited",
            ContainerState::Removing => "removing",
        }
    }
}

/// A bind mount as the request asked for it (reported back by ContainerStatus).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MountSpec {
    /// The absolute path in the container.
    pub container_path: String,
    /// The path on the host.
    pub host_path: PathBuf,
    /// Mounted read-only.
    pub readonly: bool,
    /// The CRI propagation: 0 private, 1 host to container, 2 bidirectional.
    pub propagation: i32,
}

/// cgroup limits as the CRI gives them (0 for unset), kept to report them back.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// CFS period, microseconds.
    pub cpu_period: i64,
    /// CFS quota, microseconds.
    pub cpu_quota: i64,
    /// CPU shares.
    pub cpu_shares: i64,
    /// Memory limit, bytes.
    pub memory_limit_in_bytes: i64,
    /// The processes' `oom_score_adj`.
    pub oom_score_adj: i64,
    /// CPUs allowed.
    pub cpuset_cpus: String,
    /// Memory nodes allowed.
    pub cpuset_mems: String,
    /// hugetlb limits: page size (`2MB`) and bytes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hugepage_limits: Vec<(String, u64)>,
}

/// How the container's process ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exit {
    /// Its exit code (128 + the signal for a killed process).
    pub code: i32,
    /// When it exited, nanoseconds since the epoch.
    pub at: i64,
    /// The kernel's OOM killer ended it.
    pub oom_killed: bool,
    /// Why crio-lite could not learn more (the runtime lost it), or empty.
    pub message: String,
}

impl Exit {
    /// The CRI reason: `OOMKilled`, `Completed` or `Error`.
    pub fn reason(&self) -> &'static str {
        if self.oom_killed {
            "OOMKilled"
        } else if self.code == 0 {
            "Completed"
        } else {
            "Error"
        }
    }
}

/// Everything crio-lite keeps about one container; this is its state file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Container {
    /// 64 hex characters.
    pub id: String,
    /// The sandbox it runs in.
    pub sandbox_id: String,
    /// The CRI metadata name.
    pub name: String,
    /// The CRI metadata attempt.
    pub attempt: u32,
    /// Where it is in its life cycle.
    pub state: ContainerState,
    /// The image as the request named it.
    pub image: String,
    /// The image's id (`sha256:...`).
    pub image_id: String,
    /// The image's reference in the store (a repo digest, or the name it was pulled by).
    pub image_ref: String,
    /// The runtime handler it runs on.
    pub runtime_handler: String,
    /// Creation time, nanoseconds since the epoch.
    pub created_at: i64,
    /// Start time, or 0.
    pub started_at: i64,
    /// Its exit, once crio-lite has seen it.
    pub exit: Option<Exit>,
    /// The container's process id (in the host's pid namespace) once created.
    pub pid: Option<i32>,
    /// CRI labels.
    pub labels: BTreeMap<String, String>,
    /// CRI annotations.
    pub annotations: BTreeMap<String, String>,
    /// The log file conmon writes, in the CRI format.
    pub log_path: PathBuf,
    /// The bind mounts asked for.
    pub mounts: Vec<MountSpec>,
    /// The signal StopContainer sends first (the image's StopSignal), as a number.
    pub stop_signal: i32,
    /// The limits it was created or last updated with.
    pub limits: Limits,
    /// The user it runs as: uid, gid, supplementary gids.
    pub user: (u32, u32, Vec<u32>),
    /// The process it runs (entrypoint and arguments).
    pub command: Vec<String>,
}

impl Container {
    /// Whether its process has ended as far as crio-lite knows.
    pub fn exited(&self) -> bool {
        self.exit.is_some()
    }

    /// The state a client sees: `Exited` once the exit is known.
    pub fn visible_state(&self) -> ContainerState {
        match self.state {
            ContainerState::Created | ContainerState::Running if self.exited() => {
                ContainerState::Exited
            }
            state => state,
        }
    }
}

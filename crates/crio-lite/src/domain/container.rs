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

use oci_container::Propagation;
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
    /// How mount events propagate; records keep it as a number (0 private, 1 host to
    /// container, 2 bidirectional).
    #[serde(with = "propagation_code")]
    pub propagation: Propagation,
}

impl MountSpec {
    /// The bind mount oci-container makes.
    pub fn bind_mount(&self) -> oci_container::BindMount {
        oci_container::BindMount {
            source: self.host_path.clone(),
            destination: self.container_path.clone(),
            readonly: self.readonly,
            propagation: self.propagation,
        }
    }
}

/// A mount's propagation as records have always kept it: 0 private, 1 host to container,
/// 2 bidirectional (an unknown number, which no record should hold, reads as private).
mod propagation_code {
    use oci_container::Propagation;
    use serde::{Deserialize as _, Deserializer, Serializer};

    #[expect(
        clippy::trivially_copy_pass_by_ref,
        reason = "serde's `with` passes the field by reference"
    )]
    pub(super) fn serialize<S: Serializer>(p: &Propagation, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_i32(match p {
            Propagation::Private => 0,
            Propagation::HostToContainer => 1,
            Propagation::Bidirectional => 2,
        })
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Propagation, D::Error> {
        Ok(match i32::deserialize(d)? {
            1 => Propagation::HostToContainer,
            2 => Propagation::Bidirectional,
            _ => Propagation::Private,
        })
    }
}

/// cgroup limits, `None` for those not set, kept to report them back.
///
/// Records keep them as they always have, a number each with 0 for unset (see
/// `RawLimits`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "RawLimits", into = "RawLimits")]
pub struct Limits {
    /// CFS period, microseconds.
    pub cpu_period: Option<u64>,
    /// CFS quota, microseconds.
    pub cpu_quota: Option<i64>,
    /// CPU shares.
    pub cpu_shares: Option<u64>,
    /// Memory limit, bytes.
    pub memory_limit_in_bytes: Option<i64>,
    /// The processes' `oom_score_adj`, -1000 to 1000.
    pub oom_score_adj: Option<i32>,
    /// CPUs allowed.
    pub cpuset_cpus: Option<String>,
    /// Memory nodes allowed.
    pub cpuset_mems: Option<String>,
    /// hugetlb limits: page size (`2MB`) and bytes.
    pub hugepage_limits: Vec<(String, u64)>,
    /// cgroup v2 files and their values, set at create (kubelet's `unified` map).
    pub unified: BTreeMap<String, String>,
}

impl Limits {
    /// The limits as oci-container sets them.
    pub fn resources(&self) -> oci_container::Resources {
        oci_container::Resources {
            cpu_shares: self.cpu_shares,
            cpu_quota: self.cpu_quota,
            cpu_period: self.cpu_period,
            cpuset_cpus: self.cpuset_cpus.clone(),
            cpuset_mems: self.cpuset_mems.clone(),
            memory_limit: self.memory_limit_in_bytes,
            oom_score_adj: self.oom_score_adj,
            pids_limit: None,
            hugepage_limits: self.hugepage_limits.clone(),
            unified: self.unified.clone(),
        }
    }
}

/// [`Limits`] as records and the CRI hold them: a number each, 0 (or an empty string) for
/// unset. The one place that rule is read: records and CRI requests both become [`Limits`]
/// through it.
#[derive(Clone, Default, Serialize, Deserialize)]
pub(crate) struct RawLimits {
    pub(crate) cpu_period: i64,
    pub(crate) cpu_quota: i64,
    pub(crate) cpu_shares: i64,
    pub(crate) memory_limit_in_bytes: i64,
    pub(crate) oom_score_adj: i64,
    pub(crate) cpuset_cpus: String,
    pub(crate) cpuset_mems: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) hugepage_limits: Vec<(String, u64)>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) unified: BTreeMap<String, String>,
}

impl From<RawLimits> for Limits {
    fn from(r: RawLimits) -> Limits {
        let positive = |v: i64| (v > 0).then_some(v);
        Limits {
            cpu_period: positive(r.cpu_period).and_then(|v| u64::try_from(v).ok()),
            cpu_quota: positive(r.cpu_quota),
            cpu_shares: positive(r.cpu_shares).and_then(|v| u64::try_from(v).ok()),
            memory_limit_in_bytes: positive(r.memory_limit_in_bytes),
            oom_score_adj: (r.oom_score_adj != 0)
                .then(|| i32::try_from(r.oom_score_adj.clamp(-1000, 1000)).unwrap_or(0)),
            cpuset_cpus: Some(r.cpuset_cpus).filter(|s| !s.is_empty()),
            cpuset_mems: Some(r.cpuset_mems).filter(|s| !s.is_empty()),
            hugepage_limits: r.hugepage_limits,
            unified: r.unified,
        }
    }
}

impl From<Limits> for RawLimits {
    fn from(l: Limits) -> RawLimits {
        let number = |v: Option<u64>| v.map_or(0, |v| i64::try_from(v).unwrap_or(i64::MAX));
        RawLimits {
            cpu_period: number(l.cpu_period),
            cpu_quota: l.cpu_quota.unwrap_or(0),
            cpu_shares: number(l.cpu_shares),
            memory_limit_in_bytes: l.memory_limit_in_bytes.unwrap_or(0),
            oom_score_adj: l.oom_score_adj.map_or(0, i64::from),
            cpuset_cpus: l.cpuset_cpus.unwrap_or_default(),
            cpuset_mems: l.cpuset_mems.unwrap_or_default(),
            hugepage_limits: l.hugepage_limits,
            unified: l.unified,
        }
    }
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
    /// Its terminal and stdin, as created (records from before there was one say none).
    #[serde(default)]
    pub stdio: oci_container::ContainerStdio,
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Records written before the domain kept `Option`s and enums read the same, and are
    /// written as they were, so an upgrade (or a downgrade) reads every container's file.
    #[test]
    fn limits_and_mounts_keep_their_record_format() {
        let record = json!({
            "cpu_period": 100_000, "cpu_quota": 0, "cpu_shares": 512,
            "memory_limit_in_bytes": 0, "oom_score_adj": -997,
            "cpuset_cpus": "0-1", "cpuset_mems": "",
        });
        let limits: Limits = serde_json::from_value(record.clone()).unwrap();
        assert_eq!(
            limits,
            Limits {
                cpu_period: Some(100_000),
                cpu_shares: Some(512),
                oom_score_adj: Some(-997),
                cpuset_cpus: Some("0-1".into()),
                ..Limits::default()
            }
        );
        assert_eq!(serde_json::to_value(&limits).unwrap(), record);
        let negative: Limits =
            serde_json::from_value(json!({"cpu_period": -1, "cpu_quota": -1, "cpu_shares": 0,
                "memory_limit_in_bytes": -5, "oom_score_adj": 0, "cpuset_cpus": "",
                "cpuset_mems": ""}))
            .unwrap();
        assert_eq!(
            negative,
            Limits::default(),
            "what never limited anything is unset"
        );

        for (code, propagation) in [
            (0, Propagation::Private),
            (1, Propagation::HostToContainer),
            (2, Propagation::Bidirectional),
        ] {
            let record = json!({"container_path": "/data", "host_path": "/srv",
                "readonly": true, "propagation": code});
            let mount: MountSpec = serde_json::from_value(record.clone()).unwrap();
            assert_eq!(mount.propagation, propagation);
            assert_eq!(serde_json::to_value(&mount).unwrap(), record);
        }
    }
}

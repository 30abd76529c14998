//! What a caller asks of a container: the input of [`crate::generate`].
//!
//! These are the runtime spec's ideas in the words a runtime daemon uses, not CRI's messages: the
//! CRI adapter maps its requests onto them.

use std::collections::BTreeMap;
use std::path::PathBuf;

use oci_spec::image::ImageConfiguration;
use serde::{Deserialize, Serialize};

use crate::seccomp::Seccomp;

/// Everything [`crate::generate`] needs to make a container's runtime spec, besides its root file
/// system.
///
/// `Default` is a container that runs the image's own command as the image's user, with CRI-O's
/// default capabilities, masked paths and mounts, in namespaces of its own, without seccomp.
#[derive(Debug, Clone, Default)]
pub struct ContainerConfig {
    /// The container's id: named in every error, set as the spec's hostname when
    /// [`ContainerConfig::hostname`] is `None`.
    pub id: String,
    /// The image's configuration: its Entrypoint, Cmd, Env, WorkingDir and User are the defaults.
    pub image: Option<ImageConfiguration>,
    /// Replaces the image's Entrypoint when not empty (Kubernetes' `command`); the image's Cmd is
    /// then dropped too, unless [`ContainerConfig::args`] is given.
    pub command: Vec<String>,
    /// Replaces the image's Cmd when not empty (Kubernetes' `args`).
    pub args: Vec<String>,
    /// Added to the image's Env; a name already there takes the new value in place.
    pub env: Vec<(String, String)>,
    /// The working directory (absolute); the image's WorkingDir, then `/`, when `None`.
    pub working_dir: Option<String>,
    /// `uid[:gid]` or `name[:group]`, names resolved from the root file system's `/etc/passwd` and
    /// `/etc/group`; the image's User, then root, when `None`.
    pub user: Option<String>,
    /// Group ids added to the process's supplementary groups, which always hold its primary
    /// group and, unless [`ContainerConfig::strict_groups`], those `/etc/group` lists the user in.
    pub supplemental_groups: Vec<u32>,
    /// The CRI's `Strict` supplemental groups policy: the image's `/etc/group` adds no group to
    /// the process (its primary group and [`ContainerConfig::supplemental_groups`] only).
    /// `false` is `Merge`, the CRI's default.
    pub strict_groups: bool,
    /// The container's hostname (set only when it has a UTS namespace of its own).
    pub hostname: Option<String>,
    /// Bind mounts from the host.
    pub mounts: Vec<BindMount>,
    /// Host devices made in the container (and allowed in its device cgroup).
    pub devices: Vec<DeviceMapping>,
    /// Namespaces to join instead of creating.
    pub namespaces: NamespacePaths,
    /// Capabilities added to and dropped from CRI-O's default set.
    pub capabilities: CapabilityChanges,
    /// All capabilities, every host device, no masked or read-only paths, `/sys` writable.
    pub privileged: bool,
    /// The seccomp filter, made for the container's final capabilities; none when privileged.
    /// CRI's "no profile given" maps to [`Seccomp::for_empty_profile`].
    pub seccomp: Seccomp,
    /// Sets `no_new_privileges`: setuid binaries and file capabilities grant nothing.
    pub no_new_privileges: bool,
    /// Mounts the root file system read-only.
    pub readonly_rootfs: bool,
    /// Paths masked in addition to [`DEFAULT_MASKED_PATHS`](crate::DEFAULT_MASKED_PATHS).
    pub masked_paths: Vec<String>,
    /// Paths made read-only in addition to
    /// [`DEFAULT_READONLY_PATHS`](crate::DEFAULT_READONLY_PATHS).
    pub readonly_paths: Vec<String>,
    /// Namespaced kernel parameters (`net.ipv4.ip_forward`, ...).
    pub sysctls: BTreeMap<String, String>,
    /// CPU and memory limits.
    pub resources: Resources,
    /// The cgroup the runtime puts the container in; the runtime's default when `None`.
    pub cgroups_path: Option<PathBuf>,
    /// Written into the spec as they are.
    pub annotations: BTreeMap<String, String>,
    /// A terminal and an open stdin for the container's process (CRI's `tty`, `stdin`,
    /// `stdin_once`); [`Runtime::create_with_stdio`](crate::Runtime::create_with_stdio) is
    /// given the same value.
    pub stdio: ContainerStdio,
}

/// How the container's process is connected, kept in its record so an attach knows: a
/// terminal (`process.terminal`, conmon's `--terminal`) or pipes, and whether conmon keeps a
/// stdin for attachers to write to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerStdio {
    /// The process runs on a pseudo-terminal conmon holds the master of (stdout and stderr
    /// are one stream then).
    pub terminal: bool,
    /// conmon opens a stdin for the process and passes attachers' input to it (`--stdin`);
    /// without it, what attachers write is dropped.
    pub stdin: bool,
    /// The process's stdin is closed when the first attacher that held it detaches; without
    /// it conmon is told `--leave-stdin-open`.
    pub stdin_once: bool,
}

/// A bind mount of a host path into the container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindMount {
    /// The path on the host.
    pub source: PathBuf,
    /// The absolute path in the container.
    pub destination: String,
    /// Mounted read-only.
    pub readonly: bool,
    /// How mount events propagate between host and container.
    pub propagation: Propagation,
}

/// A host device the container gets, as CRI's `Device`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceMapping {
    /// The device node on the host (a link to one is followed, as `/dev/disk/by-id/...`).
    pub host_path: PathBuf,
    /// Where it appears in the container.
    pub container_path: String,
    /// What the container may do with it: `r`, `w` and `m` (mknod), as cgroups write them.
    pub permissions: String,
}

/// Mount propagation of a [`BindMount`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Propagation {
    /// Nothing propagates (`rprivate`).
    #[default]
    Private,
    /// Host mounts appear in the container (`rslave`).
    HostToContainer,
    /// Both ways (`rshared`); needs a privileged container to be useful.
    Bidirectional,
}

/// Paths of namespaces (`/proc/<pid>/ns/net`, `/run/netns/<name>`) the container joins; a
/// namespace left `None` is created for the container alone, unless the `host_*` flag says the
/// container stays in the caller's (the node's).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NamespacePaths {
    /// The container uses the node's network namespace (`network` is then ignored).
    pub host_network: bool,
    /// The container uses the node's PID namespace (`pid` is then ignored).
    pub host_pid: bool,
    /// The container uses the node's IPC namespace (`ipc` is then ignored).
    pub host_ipc: bool,
    /// The container uses the node's UTS namespace and hostname (`uts` is then ignored).
    pub host_uts: bool,
    /// The pod's network namespace.
    pub network: Option<PathBuf>,
    /// The pod's IPC namespace.
    pub ipc: Option<PathBuf>,
    /// The pod's UTS namespace (the hostname is then the pod's).
    pub uts: Option<PathBuf>,
    /// A PID namespace to share (the pod's, or a target container's).
    pub pid: Option<PathBuf>,
}

/// Changes to the default capability set, by name: `NET_ADMIN` or `CAP_NET_ADMIN`, any case; `ALL`
/// adds or drops every capability.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CapabilityChanges {
    /// Capabilities added.
    pub add: Vec<String>,
    /// Capabilities dropped (applied after `add`, as CRI-O does).
    pub drop: Vec<String>,
}

/// cgroup limits and the OOM score; `None` leaves the runtime's default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resources {
    /// Relative CPU weight (cgroup v1 shares, 2-262144).
    pub cpu_shares: Option<u64>,
    /// CPU time in microseconds per [`Resources::cpu_period`].
    pub cpu_quota: Option<i64>,
    /// The period of [`Resources::cpu_quota`], in microseconds.
    pub cpu_period: Option<u64>,
    /// CPUs the container may run on (`0-1,3`).
    pub cpuset_cpus: Option<String>,
    /// Memory nodes the container may use.
    pub cpuset_mems: Option<String>,
    /// Memory limit in bytes.
    pub memory_limit: Option<i64>,
    /// The container processes' `oom_score_adj` (-1000 to 1000).
    pub oom_score_adj: Option<i32>,
    /// hugetlb limits: `(page size such as "2MB", bytes)`.
    pub hugepage_limits: Vec<(String, u64)>,
    /// Maximum number of processes.
    pub pids_limit: Option<i64>,
    /// cgroup v2 files and values written as they are (the OCI spec's `linux.resources.unified`,
    /// kubelet's `unified` map: `memory.high`, `memory.oom.group`, ...); set at create. Each key
    /// must name one interface file of the container's cgroup; runtimes refuse it on cgroup v1.
    pub unified: std::collections::BTreeMap<String, String>,
}

//! What CreateContainer asks for, in the domain's terms: the CRI adapter checks the request and
//! fills this in.

use std::collections::BTreeMap;

use super::super::container::{Limits, MountSpec};

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
    /// The log file, relative to the sandbox's log directory; `None` for one of crio-lite's.
    pub log_path: Option<String>,
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
    /// A terminal and an open stdin for the process (CRI's `tty`, `stdin`, `stdin_once`).
    pub stdio: oci_container::ContainerStdio,
    /// The seccomp profile; `None` when the request names none (the node's default then, as
    /// CRI-O's `seccomp_use_default_when_empty`).
    pub seccomp: Option<oci_container::Seccomp>,
}

/// Whose PID namespace a container runs in (CRI's `NamespaceMode` for pid, TARGET aside).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PidMode {
    /// The pod's: only in a pod that shares one ([`Sandbox::shares_pid`](crate::domain::Sandbox::shares_pid)); the pod's init is
    /// pid 1 and the pod's containers see each other's processes.
    Pod,
    /// One of its own, the container's process pid 1 in it.
    #[default]
    Container,
    /// The node's.
    Node,
}

impl PidMode {
    /// The PID namespace oci-container puts the container in.
    pub(super) fn namespace(self) -> oci_container::PidNamespace {
        match self {
            PidMode::Pod => oci_container::PidNamespace::Pod,
            PidMode::Container => oci_container::PidNamespace::Container,
            PidMode::Node => oci_container::PidNamespace::Node,
        }
    }
}

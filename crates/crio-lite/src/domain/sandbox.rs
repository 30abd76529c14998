//! What crio-lite records about a pod sandbox, and its life cycle.
//!
//! # States
//!
//! ```text
//!   RunPodSandbox                  StopPodSandbox                   RemovePodSandbox
//! ──────────► Creating ──────► Ready ──────► Stopping ──────► NotReady ──────► Removing ──────► (gone)
//!                │  setup ok                    teardown ok                      unpin netns,
//!                │                                                               delete file
//!                └── failure, or found at start-up: teardown, unpin netns, delete file
//! ```
//!
//! Every state is written before the step that leaves it is taken: `Creating` before the
//! namespace or the network is touched, `Stopping` before the teardown, `Removing` before the
//! unpin. A daemon killed at any moment finds on its next start what it was doing and finishes
//! it (a `Stopping` sandbox is torn down again, a `Removing` one removed), so a sandbox is never
//! reported ready once its network may be gone.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;

use ocicni::cni_types::capabilities::PortMapping;
use serde::{Deserialize, Serialize};

/// The life-cycle state of a sandbox (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SandboxState {
    /// Written before anything is created; never seen by CRI clients as such.
    Creating,
    /// The namespace and the network are up.
    Ready,
    /// Being stopped: the network may be partly torn down. CRI clients see it as not ready.
    Stopping,
    /// Stopped: the network is torn down; the namespace stays pinned until removal.
    NotReady,
    /// Being removed: stopped, the namespace may be unpinned already. Seen as not ready.
    Removing,
}

impl SandboxState {
    /// The name used in state files and the status API.
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxState::Creating => "creating",
            SandboxState::Ready => "ready",
            SandboxState::Stopping => "stopping",
            SandboxState::NotReady => "not_ready",
            SandboxState::Removing => "removing",
        }
    }
}

/// The CRI metadata that identifies a sandbox: two requests with the same one are the same pod.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SandboxName {
    /// The pod's name.
    pub name: String,
    /// The pod's Kubernetes namespace.
    pub namespace: String,
    /// The pod's UID.
    pub uid: String,
    /// The attempt number.
    pub attempt: u32,
}

/// Whose namespace a pod's (network, PID or IPC) namespace is.
///
/// Records keep it as the number they always held (CRI's: 0 to 3).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "i32", into = "i32")]
pub enum NamespaceMode {
    /// The pod's own, shared by its containers.
    #[default]
    Pod,
    /// Each container's own.
    Container,
    /// The node's.
    Node,
    /// Another container's (see [`NamespaceModes::target_id`]).
    Target,
}

impl From<i32> for NamespaceMode {
    /// A record's number; one no record should hold reads as the pod's.
    fn from(code: i32) -> NamespaceMode {
        match code {
            1 => NamespaceMode::Container,
            2 => NamespaceMode::Node,
            3 => NamespaceMode::Target,
            _ => NamespaceMode::Pod,
        }
    }
}

impl From<NamespaceMode> for i32 {
    fn from(mode: NamespaceMode) -> i32 {
        match mode {
            NamespaceMode::Pod => 0,
            NamespaceMode::Container => 1,
            NamespaceMode::Node => 2,
            NamespaceMode::Target => 3,
        }
    }
}

/// The Linux namespace modes the sandbox was asked for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamespaceModes {
    /// The network namespace; [`NamespaceMode::Node`] is host networking.
    pub network: NamespaceMode,
    /// The PID namespace.
    pub pid: NamespaceMode,
    /// The IPC namespace.
    pub ipc: NamespaceMode,
    /// The target container for [`NamespaceMode::Target`].
    pub target_id: String,
}

/// DNS settings recorded for the pod.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DnsSettings {
    /// Name servers.
    pub servers: Vec<String>,
    /// Search domains.
    pub searches: Vec<String>,
    /// resolv.conf options.
    pub options: Vec<String>,
}

/// One network attachment as ocicni returned it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attachment {
    /// The network's name.
    pub network: String,
    /// The interface inside the pod.
    pub ifname: String,
    /// The pod's addresses on that interface.
    pub ips: Vec<IpAddr>,
    /// The plugin chain's result, in its wire form.
    pub result: serde_json::Value,
}

/// Everything crio-lite keeps about one sandbox; this is the state file's content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sandbox {
    /// 64 hex characters.
    pub id: String,
    /// The CRI metadata.
    pub name: SandboxName,
    /// Where the sandbox is in its life cycle.
    pub state: SandboxState,
    /// Creation time, nanoseconds since the epoch.
    pub created_at: i64,
    /// True for `hostNetwork` pods: no namespace, no CNI.
    pub host_network: bool,
    /// The pinned network namespace, for pods with their own network.
    pub netns_path: Option<PathBuf>,
    /// The pod's hostname.
    pub hostname: String,
    /// The pod's DNS settings.
    pub dns: DnsSettings,
    /// CRI labels.
    pub labels: BTreeMap<String, String>,
    /// CRI annotations, returned unchanged.
    pub annotations: BTreeMap<String, String>,
    /// Host port mappings handed to CNI (those with a host port).
    pub port_mappings: Vec<PortMapping>,
    /// The pod's cgroup parent.
    pub cgroup_parent: String,
    /// The namespace modes asked for.
    pub namespace_options: NamespaceModes,
    /// The runtime handler asked for (always the default one).
    pub runtime_handler: String,
    /// The pod's log directory.
    pub log_directory: String,
    /// The network attachments, once set up.
    pub attachments: Vec<Attachment>,
    /// Network sysctls set in the sandbox's namespace before its network is set up.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sysctls: BTreeMap<String, String>,
    /// Whether RunPodSandbox asked for a privileged pod: only such a pod may hold privileged
    /// containers. Records written before crio-lite kept it have none: not privileged.
    #[serde(default)]
    pub privileged: bool,
}

impl Sandbox {
    /// Whether the pod's containers may share a PID namespace of the pod's (RunPodSandbox asked
    /// POD for pid): its init then runs from the first container's creation to the pod's stop.
    pub fn shares_pid(&self) -> bool {
        self.namespace_options.pid == NamespaceMode::Pod
    }

    /// Every address of the pod, primary first.
    pub fn ips(&self) -> Vec<IpAddr> {
        let mut ips: Vec<IpAddr> = Vec::new();
        for ip in self.attachments.iter().flat_map(|a| a.ips.iter()) {
            if !ips.contains(ip) {
                ips.push(*ip);
            }
        }
        ips
    }

    /// The first of this sandbox's host ports that `other` maps too: same port and protocol, on
    /// host addresses that overlap (either unset, either the wildcard of the same family, or equal).
    pub fn host_port_clash(&self, other: &Sandbox) -> Option<&PortMapping> {
        let overlap = |a: Option<IpAddr>, b: Option<IpAddr>| match (a, b) {
            (Some(a), Some(b)) => {
                a == b || ((a.is_unspecified() || b.is_unspecified()) && a.is_ipv4() == b.is_ipv4())
            }
            _ => true,
        };
        self.port_mappings
            .iter()
            .filter(|mine| mine.host_port != 0)
            .find(|mine| {
                other.port_mappings.iter().any(|theirs| {
                    theirs.host_port == mine.host_port
                        && theirs.protocol == mine.protocol
                        && overlap(mine.host_ip, theirs.host_ip)
                })
            })
    }
}

#[cfg(test)]
impl Sandbox {
    /// A ready sandbox with nothing set, for tests.
    pub(crate) fn example(id: &str) -> Sandbox {
        Sandbox {
            id: id.to_owned(),
            name: SandboxName {
                name: "pod".to_owned(),
                namespace: "ns".to_owned(),
                uid: "uid".to_owned(),
                attempt: 0,
            },
            state: SandboxState::Ready,
            created_at: 1,
            host_network: false,
            netns_path: None,
            hostname: String::new(),
            dns: DnsSettings::default(),
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
            port_mappings: Vec::new(),
            cgroup_parent: String::new(),
            namespace_options: NamespaceModes::default(),
            runtime_handler: String::new(),
            log_directory: String::new(),
            attachments: Vec::new(),
            sysctls: BTreeMap::new(),
            privileged: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue #21: a record written before `privileged` was kept reads as not privileged, so an
    /// upgrade lets no old pod hold privileged containers.
    #[test]
    fn a_record_without_privileged_is_not_privileged() {
        let mut record = serde_json::to_value(Sandbox {
            privileged: true,
            ..Sandbox::example("a")
        })
        .unwrap();
        assert_eq!(record["privileged"], true);
        record.as_object_mut().unwrap().remove("privileged");
        let read: Sandbox = serde_json::from_value(record).unwrap();
        assert!(!read.privileged);
    }

    /// Namespace modes are kept as the numbers records have always held.
    #[test]
    fn namespace_modes_keep_their_record_format() {
        let modes = NamespaceModes {
            network: NamespaceMode::Node,
            pid: NamespaceMode::Container,
            ipc: NamespaceMode::Pod,
            target_id: String::new(),
        };
        let record = serde_json::json!({"network": 2, "pid": 1, "ipc": 0, "target_id": ""});
        assert_eq!(serde_json::to_value(&modes).unwrap(), record);
        assert_eq!(
            serde_json::from_value::<NamespaceModes>(record).unwrap(),
            modes
        );
        let target: NamespaceModes = serde_json::from_value(
            serde_json::json!({"network": 0, "pid": 3, "ipc": 0, "target_id": "c1"}),
        )
        .unwrap();
        assert_eq!(target.pid, NamespaceMode::Target);
    }
}

//! What a runtime says about a pod, and what comes back.

use std::collections::BTreeMap;
use std::net::IpAddr;

use cni_types::CniResult;
use cni_types::capabilities::{Bandwidth, IpRange, PortMapping};

/// A pod whose network is set up, torn down or inspected: the Go ocicni `PodNetwork`.
///
/// The library never mutates it; the attachments it resolved (networks and interface names) come
/// back in [`AttachmentResult`]s.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodNetwork {
    /// The pod's name (`K8S_POD_NAME`).
    pub name: String,
    /// The pod's Kubernetes namespace (`K8S_POD_NAMESPACE`).
    pub namespace: String,
    /// The sandbox (infra container) ID: the CNI container ID.
    pub id: String,
    /// The pod's UID (`K8S_POD_UID`).
    pub uid: String,
    /// Path of the pod's network namespace; may be empty or gone at teardown.
    pub netns: String,
    /// The networks to attach, in order; empty means the default network.
    pub networks: Vec<NetworkSelection>,
    /// Per-network runtime configuration, keyed by network name.
    pub runtime_config: BTreeMap<String, RuntimeConfig>,
    /// DNS aliases per network name (the `aliases` capability).
    pub aliases: BTreeMap<String, Vec<String>>,
    /// Extra CNI_ARGS passed through to every plugin, in order.
    pub extra_args: Vec<(String, String)>,
}

/// One network a pod asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetworkSelection {
    /// The network's name, as in its configuration file.
    pub name: String,
    /// The interface name inside the pod; `None` picks the first free `ethN`.
    pub ifname: Option<String>,
}

impl NetworkSelection {
    /// Selects a network by name, with an automatic interface name.
    pub fn new(name: impl Into<String>) -> Self {
        NetworkSelection {
            name: name.into(),
            ifname: None,
        }
    }
}

/// The runtime's wishes for one attachment, handed to plugins as capability arguments and CNI_ARGS.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuntimeConfig {
    /// A static IP (`IP=` in CNI_ARGS and the `ips` capability).
    pub ip: Option<IpAddr>,
    /// A static MAC (`MAC=` in CNI_ARGS and the `mac` capability).
    pub mac: Option<String>,
    /// Host ports forwarded into the pod (`portMappings`).
    pub port_mappings: Vec<PortMapping>,
    /// Traffic shaping (`bandwidth`).
    pub bandwidth: Option<Bandwidth>,
    /// Address ranges to allocate from (`ipRanges`); empty means the runtime's pod CIDR, if any.
    pub ip_ranges: Vec<Vec<IpRange>>,
    /// The pod's cgroup (`cgroupPath`).
    pub cgroup_path: Option<String>,
    /// The pod's annotations (`io.kubernetes.cri.pod-annotations`).
    pub pod_annotations: BTreeMap<String, String>,
}

/// The outcome of one attachment: which network, which interface, and the plugin chain's result.
#[derive(Debug, Clone, PartialEq)]
pub struct AttachmentResult {
    /// The network's name.
    pub network: String,
    /// The interface name inside the pod.
    pub ifname: String,
    /// The result, in the network's configured CNI version.
    pub result: CniResult,
}

/// Whether the runtime's network side is ready, as the CRI `NetworkReady` condition wants it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetworkStatus {
    /// True when pods can be attached to the default network.
    pub ready: bool,
    /// A CamelCase reason when not ready (for example `NetworkPluginNotReady`).
    pub reason: String,
    /// A sentence a person can act on when not ready.
    pub message: String,
}

impl NetworkStatus {
    /// The ready status.
    pub fn ready() -> Self {
        NetworkStatus {
            ready: true,
            ..NetworkStatus::default()
        }
    }

    /// A not-ready status with its reason and message.
    pub fn not_ready(reason: impl Into<String>, message: impl Into<String>) -> Self {
        NetworkStatus {
            ready: false,
            reason: reason.into(),
            message: message.into(),
        }
    }
}

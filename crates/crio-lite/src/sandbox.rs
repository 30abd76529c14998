//! What crio-lite records about a pod sandbox, how a CRI request becomes one, and how one becomes a
//! CRI answer.
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

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::path::PathBuf;

use cri_api::v1 as cri;
use ocicni::cni_types::capabilities::PortMapping;
use serde::{Deserialize, Serialize};
use tonic::Status;

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

    fn to_cri(self) -> cri::PodSandboxState {
        match self {
            SandboxState::Ready => cri::PodSandboxState::SandboxReady,
            SandboxState::Creating
            | SandboxState::Stopping
            | SandboxState::NotReady
            | SandboxState::Removing => cri::PodSandboxState::SandboxNotready,
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

/// The Linux namespace modes the sandbox was asked for (CRI `NamespaceMode` values).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamespaceModes {
    /// Network namespace mode; `NODE` (2) means host networking.
    pub network: i32,
    /// PID namespace mode.
    pub pid: i32,
    /// IPC namespace mode.
    pub ipc: i32,
    /// The target container for `TARGET` mode.
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
}

impl Sandbox {
    /// Validates a RunPodSandbox request and records what it asks for, with no ID yet.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` naming the field at fault.
    pub fn from_request(request: cri::RunPodSandboxRequest) -> Result<Sandbox, Status> {
        let config = request
            .config
            .ok_or_else(|| invalid("config", "missing: RunPodSandbox needs a PodSandboxConfig"))?;
        if !request.runtime_handler.is_empty() {
            return Err(invalid(
                "runtime_handler",
                &format!(
                    "unknown handler {:?}: crio-lite has only the default handler (\"\")",
                    request.runtime_handler
                ),
            ));
        }
        let metadata = config.metadata.ok_or_else(|| {
            invalid(
                "config.metadata",
                "missing: the sandbox needs a name, namespace and uid",
            )
        })?;
        if metadata.name.is_empty() {
            return Err(invalid(
                "config.metadata.name",
                "empty: the pod needs a name",
            ));
        }
        if metadata.namespace.is_empty() {
            return Err(invalid(
                "config.metadata.namespace",
                "empty: the pod needs a namespace",
            ));
        }
        check_metadata_size(&config.labels, &config.annotations)?;
        let linux = config.linux.unwrap_or_default();
        let options = linux
            .security_context
            .and_then(|sc| sc.namespace_options)
            .unwrap_or_default();
        for (field, mode) in [
            ("network", options.network),
            ("pid", options.pid),
            ("ipc", options.ipc),
        ] {
            if cri::NamespaceMode::try_from(mode).is_err() {
                return Err(invalid(
                    &format!("config.linux.security_context.namespace_options.{field}"),
                    &format!(
                        "unknown namespace mode {mode} (expected POD, CONTAINER, NODE or TARGET)"
                    ),
                ));
            }
        }
        let host_network = options.network == cri::NamespaceMode::Node as i32;
        for (key, value) in &linux.sysctls {
            let field = format!("config.linux.sysctls[{key:?}]");
            if host_network {
                return Err(invalid(
                    &field,
                    "a pod on the host network cannot set network sysctls (they would change the node)",
                ));
            }
            ocicni::netns::check_sysctl(key, value).map_err(|e| invalid(&field, &e.to_string()))?;
        }
        let dns = config.dns_config.unwrap_or_default();
        for (i, server) in dns.servers.iter().enumerate() {
            if server.parse::<IpAddr>().is_err() {
                return Err(invalid(
                    &format!("config.dns_config.servers[{i}]"),
                    &format!("{server:?} is not an IP address"),
                ));
            }
        }
        let mut port_mappings = Vec::new();
        for (i, mapping) in config.port_mappings.iter().enumerate() {
            if let Some(mapping) = port_mapping(i, mapping)? {
                port_mappings.push(mapping);
            }
        }
        Ok(Sandbox {
            id: String::new(),
            name: SandboxName {
                name: metadata.name,
                namespace: metadata.namespace,
                uid: metadata.uid,
                attempt: metadata.attempt,
            },
            state: SandboxState::Creating,
            created_at: 0,
            host_network,
            netns_path: None,
            hostname: config.hostname,
            dns: DnsSettings {
                servers: dns.servers,
                searches: dns.searches,
                options: dns.options,
            },
            labels: config.labels.into_iter().collect(),
            annotations: config.annotations.into_iter().collect(),
            port_mappings,
            cgroup_parent: linux.cgroup_parent,
            namespace_options: NamespaceModes {
                network: options.network,
                pid: options.pid,
                ipc: options.ipc,
                target_id: options.target_id,
            },
            runtime_handler: request.runtime_handler,
            log_directory: config.log_directory,
            attachments: Vec::new(),
            sysctls: linux.sysctls.into_iter().collect(),
        })
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

    /// The CRI metadata.
    pub fn metadata(&self) -> cri::PodSandboxMetadata {
        cri::PodSandboxMetadata {
            name: self.name.name.clone(),
            uid: self.name.uid.clone(),
            namespace: self.name.namespace.clone(),
            attempt: self.name.attempt,
        }
    }

    /// The CRI state value.
    pub fn cri_state(&self) -> i32 {
        self.state.to_cri() as i32
    }

    /// The entry ListPodSandbox returns.
    pub fn to_cri_list_entry(&self) -> cri::PodSandbox {
        cri::PodSandbox {
            id: self.id.clone(),
            metadata: Some(self.metadata()),
            state: self.cri_state(),
            created_at: self.created_at,
            labels: to_hash_map(&self.labels),
            annotations: to_hash_map(&self.annotations),
            runtime_handler: self.runtime_handler.clone(),
        }
    }

    /// The status PodSandboxStatus returns.
    pub fn to_cri_status(&self) -> cri::PodSandboxStatus {
        let ips = self.ips();
        let network = cri::PodSandboxNetworkStatus {
            ip: ips.first().map(ToString::to_string).unwrap_or_default(),
            additional_ips: ips
                .iter()
                .skip(1)
                .map(|ip| cri::PodIp { ip: ip.to_string() })
                .collect(),
        };
        let options = &self.namespace_options;
        cri::PodSandboxStatus {
            id: self.id.clone(),
            metadata: Some(self.metadata()),
            state: self.cri_state(),
            created_at: self.created_at,
            network: Some(network),
            linux: Some(cri::LinuxPodSandboxStatus {
                namespaces: Some(cri::Namespace {
                    options: Some(cri::NamespaceOption {
                        network: options.network,
                        pid: options.pid,
                        ipc: options.ipc,
                        target_id: options.target_id.clone(),
                        userns_options: None,
                    }),
                }),
            }),
            labels: to_hash_map(&self.labels),
            annotations: to_hash_map(&self.annotations),
            runtime_handler: self.runtime_handler.clone(),
        }
    }

    /// Whether the sandbox passes a ListPodSandbox filter (ID prefix, state, labels all equal).
    pub fn matches(&self, filter: &cri::PodSandboxFilter) -> bool {
        if !filter.id.is_empty() && !self.id.starts_with(&filter.id) {
            return false;
        }
        if let Some(state) = &filter.state
            && state.state != self.cri_state()
        {
            return false;
        }
        filter
            .label_selector
            .iter()
            .all(|(k, v)| self.labels.get(k) == Some(v))
    }
}

fn port_mapping(i: usize, mapping: &cri::PortMapping) -> Result<Option<PortMapping>, Status> {
    let field = |name: &str| format!("config.port_mappings[{i}].{name}");
    let protocol = match cri::Protocol::try_from(mapping.protocol) {
        Ok(cri::Protocol::Tcp) => "tcp",
        Ok(cri::Protocol::Udp) => "udp",
        Ok(cri::Protocol::Sctp) => "sctp",
        Err(_) => {
            return Err(invalid(
                &field("protocol"),
                &format!(
                    "unknown protocol {} (expected TCP, UDP or SCTP)",
                    mapping.protocol
                ),
            ));
        }
    };
    let container_port = u16::try_from(mapping.container_port)
        .ok()
        .filter(|port| *port != 0)
        .ok_or_else(|| {
            invalid(
                &field("container_port"),
                &format!(
                    "{} is not a port (expected 1 to 65535)",
                    mapping.container_port
                ),
            )
        })?;
    let host_port = u16::try_from(mapping.host_port).map_err(|_| {
        invalid(
            &field("host_port"),
            &format!(
                "{} is not a port (expected 0 to 65535, 0 for none)",
                mapping.host_port
            ),
        )
    })?;
    let host_ip = if mapping.host_ip.is_empty() {
        None
    } else {
        Some(mapping.host_ip.parse::<IpAddr>().map_err(|_| {
            invalid(
                &field("host_ip"),
                &format!("{:?} is not an IP address", mapping.host_ip),
            )
        })?)
    };
    // As CRI-O does: a mapping without a host port only documents the container port.
    if host_port == 0 {
        return Ok(None);
    }
    Ok(Some(PortMapping {
        host_port,
        container_port,
        protocol: protocol.to_owned(),
        host_ip,
    }))
}

/// What Kubernetes allows for a pod's annotations (and crio-lite for its labels and annotations
/// together): a sandbox is listed whole in every ListPodSandbox answer, and clients refuse answers
/// over 4 MiB, so a few oversized sandboxes would break listing for everyone.
pub const MAX_METADATA_BYTES: usize = 256 * 1024;

fn check_metadata_size(
    labels: &HashMap<String, String>,
    annotations: &HashMap<String, String>,
) -> Result<(), Status> {
    let size = |map: &HashMap<String, String>| -> usize {
        map.iter().map(|(k, v)| k.len() + v.len()).sum()
    };
    let (labels, annotations) = (size(labels), size(annotations));
    if labels + annotations > MAX_METADATA_BYTES {
        let field = if labels > annotations {
            "config.labels"
        } else {
            "config.annotations"
        };
        return Err(invalid(
            field,
            &format!(
                "labels and annotations take {} bytes, more than the {MAX_METADATA_BYTES} allowed \
                 (labels {labels}, annotations {annotations})",
                labels + annotations
            ),
        ));
    }
    Ok(())
}

impl Sandbox {
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

fn invalid(field: &str, reason: &str) -> Status {
    Status::invalid_argument(format!("{field}: {reason}"))
}

fn to_hash_map(map: &BTreeMap<String, String>) -> HashMap<String, String> {
    map.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(mapping: cri::PortMapping) -> cri::RunPodSandboxRequest {
        cri::RunPodSandboxRequest {
            config: Some(cri::PodSandboxConfig {
                metadata: Some(cri::PodSandboxMetadata {
                    name: "web".into(),
                    uid: "u1".into(),
                    namespace: "default".into(),
                    attempt: 0,
                }),
                port_mappings: vec![mapping],
                ..Default::default()
            }),
            runtime_handler: String::new(),
        }
    }

    #[test]
    fn port_mappings_are_checked_field_by_field() {
        let ok = cri::PortMapping {
            protocol: 1,
            container_port: 53,
            host_port: 5353,
            host_ip: "127.0.0.1".into(),
        };
        let sandbox = Sandbox::from_request(request(ok.clone())).unwrap();
        assert_eq!(sandbox.port_mappings[0].protocol, "udp");
        assert_eq!(sandbox.port_mappings[0].host_port, 5353);

        let no_host_port = cri::PortMapping {
            host_port: 0,
            ..ok.clone()
        };
        assert!(
            Sandbox::from_request(request(no_host_port))
                .unwrap()
                .port_mappings
                .is_empty()
        );

        let cases = [
            (
                cri::PortMapping {
                    container_port: 0,
                    ..ok.clone()
                },
                "config.port_mappings[0].container_port",
            ),
            (
                cri::PortMapping {
                    container_port: 70000,
                    ..ok.clone()
                },
                "config.port_mappings[0].container_port",
            ),
            (
                cri::PortMapping {
                    host_port: -1,
                    ..ok.clone()
                },
                "config.port_mappings[0].host_port",
            ),
            (
                cri::PortMapping {
                    protocol: 9,
                    ..ok.clone()
                },
                "config.port_mappings[0].protocol",
            ),
            (
                cri::PortMapping {
                    host_ip: "nope".into(),
                    ..ok
                },
                "config.port_mappings[0].host_ip",
            ),
        ];
        for (mapping, field) in cases {
            let status = Sandbox::from_request(request(mapping)).unwrap_err();
            assert_eq!(status.code(), tonic::Code::InvalidArgument);
            assert!(status.message().starts_with(field), "{}", status.message());
        }
    }

    #[test]
    fn ips_are_unique_and_in_order() {
        let mut sandbox = Sandbox::from_request(request(cri::PortMapping {
            container_port: 80,
            ..Default::default()
        }))
        .unwrap();
        let a: IpAddr = "10.0.0.2".parse().unwrap();
        let b: IpAddr = "fd00::2".parse().unwrap();
        sandbox.attachments = vec![
            Attachment {
                network: "n1".into(),
                ifname: "eth0".into(),
                ips: vec![a, b],
                result: serde_json::Value::Null,
            },
            Attachment {
                network: "n2".into(),
                ifname: "eth1".into(),
                ips: vec![a],
                result: serde_json::Value::Null,
            },
        ];
        assert_eq!(sandbox.ips(), vec![a, b]);
        let status = sandbox.to_cri_status();
        let network = status.network.unwrap();
        assert_eq!(network.ip, "10.0.0.2");
        assert_eq!(
            network.additional_ips,
            vec![cri::PodIp {
                ip: "fd00::2".into()
            }]
        );
    }
}

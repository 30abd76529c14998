//! CRI messages to and from the domain's sandboxes: a RunPodSandbox request checked field by field
//! and turned into a [`Sandbox`](crate::domain::Sandbox), a sandbox turned into the CRI's views of it.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;

use cri_api::v1 as cri;
use ocicni::cni_types::capabilities::PortMapping;

use crate::domain::{
    DnsSettings, DomainError, DomainResult, NamespaceMode, NamespaceModes, Sandbox, SandboxName,
    SandboxState,
};

/// Validates a RunPodSandbox request and records what it asks for, with no ID yet.
///
/// # Errors
///
/// [`DomainError::InvalidField`] naming the field at fault.
pub fn sandbox_from_request(request: cri::RunPodSandboxRequest) -> DomainResult<Sandbox> {
    let config = request
        .config
        .ok_or_else(|| invalid("config", "missing: RunPodSandbox needs a PodSandboxConfig"))?;
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
    let security = linux.security_context.unwrap_or_default();
    let options = security.namespace_options.unwrap_or_default();
    let namespace_options = namespace_modes(options)?;
    let host_network = namespace_options.network == NamespaceMode::Node;
    check_sysctls(
        &linux.sysctls,
        host_network,
        namespace_options.ipc == NamespaceMode::Node,
    )?;
    let dns = config.dns_config.unwrap_or_default();
    check_dns(&dns)?;
    check_hostname(&config.hostname)?;
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
        namespace_options,
        runtime_handler: request.runtime_handler,
        log_directory: config.log_directory,
        attachments: Vec::new(),
        sysctls: linux.sysctls.into_iter().collect(),
        privileged: security.privileged,
    })
}

/// The namespace modes, each one the CRI knows.
fn namespace_modes(options: cri::NamespaceOption) -> DomainResult<NamespaceModes> {
    let mode = |field: &str, mode: i32| match cri::NamespaceMode::try_from(mode) {
        Ok(cri::NamespaceMode::Pod) => Ok(NamespaceMode::Pod),
        Ok(cri::NamespaceMode::Container) => Ok(NamespaceMode::Container),
        Ok(cri::NamespaceMode::Node) => Ok(NamespaceMode::Node),
        Ok(cri::NamespaceMode::Target) => Ok(NamespaceMode::Target),
        Err(_) => Err(invalid(
            &format!("config.linux.security_context.namespace_options.{field}"),
            &format!("unknown namespace mode {mode} (expected POD, CONTAINER, NODE or TARGET)"),
        )),
    };
    Ok(NamespaceModes {
        network: mode("network", options.network)?,
        pid: mode("pid", options.pid)?,
        ipc: mode("ipc", options.ipc)?,
        target_id: options.target_id,
    })
}

/// The CRI's value of a namespace mode.
fn cri_namespace_mode(mode: NamespaceMode) -> i32 {
    let mode = match mode {
        NamespaceMode::Pod => cri::NamespaceMode::Pod,
        NamespaceMode::Container => cri::NamespaceMode::Container,
        NamespaceMode::Node => cri::NamespaceMode::Node,
        NamespaceMode::Target => cri::NamespaceMode::Target,
    };
    mode as i32
}

/// Network sysctls (set in the pod's network namespace) and IPC ones (set in its containers,
/// which share the pod's IPC namespace); neither for a pod that uses the node's namespace.
fn check_sysctls(
    sysctls: &HashMap<String, String>,
    host_network: bool,
    host_ipc: bool,
) -> DomainResult<()> {
    for (key, value) in sysctls {
        let field = format!("config.linux.sysctls[{key:?}]");
        if oci_container::is_ipc_sysctl(key) {
            if host_ipc {
                return Err(invalid(
                    &field,
                    "a pod in the node's IPC namespace cannot set IPC sysctls (they would change \
                     the node)",
                ));
            }
            oci_container::check_ipc_sysctl(key, value).map_err(|e| invalid(&field, &e))?;
            continue;
        }
        if host_network {
            return Err(invalid(
                &field,
                "a pod on the host network cannot set network sysctls (they would change the node)",
            ));
        }
        ocicni::netns::check_sysctl(key, value).map_err(|e| invalid(&field, &e.to_string()))?;
    }
    Ok(())
}

/// The most search domains resolv.conf is given (Kubernetes' `MaxDNSSearchPaths`).
pub const MAX_DNS_SEARCHES: usize = 32;
/// The most resolv.conf options.
pub const MAX_DNS_OPTIONS: usize = 32;
/// The longest search domain: a DNS name.
const MAX_DNS_NAME: usize = 253;
/// The longest resolv.conf option (`ndots:5`, `timeout:2`, ...).
const MAX_DNS_OPTION: usize = 256;
/// The longest hostname the kernel sets (`HOST_NAME_MAX`).
pub const MAX_HOSTNAME: usize = 64;

/// DNS settings go into the pod's resolv.conf, one per line and separated by spaces: a newline
/// or a space in one would add lines or words of the requester's choosing.
fn check_dns(dns: &cri::DnsConfig) -> DomainResult<()> {
    for (i, server) in dns.servers.iter().enumerate() {
        if server.parse::<IpAddr>().is_err() {
            return Err(invalid(
                &format!("config.dns_config.servers[{i}]"),
                &format!("{server:?} is not an IP address"),
            ));
        }
    }
    for (list, name, max_items, max_len) in [
        (&dns.searches, "searches", MAX_DNS_SEARCHES, MAX_DNS_NAME),
        (&dns.options, "options", MAX_DNS_OPTIONS, MAX_DNS_OPTION),
    ] {
        if list.len() > max_items {
            return Err(invalid(
                &format!("config.dns_config.{name}"),
                &format!("{} entries, more than the {max_items} allowed", list.len()),
            ));
        }
        for (i, word) in list.iter().enumerate() {
            check_word(word, max_len)
                .map_err(|why| invalid(&format!("config.dns_config.{name}[{i}]"), &why))?;
        }
    }
    Ok(())
}

/// The hostname goes into the pod's /etc/hostname and /etc/hosts and its UTS namespace.
fn check_hostname(hostname: &str) -> DomainResult<()> {
    if hostname.is_empty() {
        return Ok(());
    }
    check_word(hostname, MAX_HOSTNAME).map_err(|why| invalid("config.hostname", &why))
}

/// One word of a line of a file: not empty, at most `max` bytes, no white space and no other
/// control character.
fn check_word(word: &str, max: usize) -> Result<(), String> {
    if word.is_empty() {
        return Err("empty".to_owned());
    }
    if word.len() > max {
        return Err(format!(
            "{} bytes long, more than the {max} allowed",
            word.len()
        ));
    }
    if word.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "{word:?} has white space or a control character (a newline would add a line to the \
             file it is written to)"
        ));
    }
    Ok(())
}

/// The CRI metadata.
pub fn metadata(sandbox: &Sandbox) -> cri::PodSandboxMetadata {
    cri::PodSandboxMetadata {
        name: sandbox.name.name.clone(),
        uid: sandbox.name.uid.clone(),
        namespace: sandbox.name.namespace.clone(),
        attempt: sandbox.name.attempt,
    }
}

/// The CRI state value.
pub fn cri_state(sandbox: &Sandbox) -> i32 {
    state_to_cri(sandbox.state) as i32
}

/// The entry ListPodSandbox returns.
pub fn list_entry(sandbox: &Sandbox) -> cri::PodSandbox {
    cri::PodSandbox {
        id: sandbox.id.clone(),
        metadata: Some(metadata(sandbox)),
        state: cri_state(sandbox),
        created_at: sandbox.created_at,
        labels: to_hash_map(&sandbox.labels),
        annotations: to_hash_map(&sandbox.annotations),
        runtime_handler: sandbox.runtime_handler.clone(),
    }
}

/// The status PodSandboxStatus returns.
pub fn status(sandbox: &Sandbox) -> cri::PodSandboxStatus {
    let ips = sandbox.ips();
    let network = cri::PodSandboxNetworkStatus {
        ip: ips.first().map(ToString::to_string).unwrap_or_default(),
        additional_ips: ips
            .iter()
            .skip(1)
            .map(|ip| cri::PodIp { ip: ip.to_string() })
            .collect(),
    };
    let options = &sandbox.namespace_options;
    cri::PodSandboxStatus {
        id: sandbox.id.clone(),
        metadata: Some(metadata(sandbox)),
        state: cri_state(sandbox),
        created_at: sandbox.created_at,
        network: Some(network),
        linux: Some(cri::LinuxPodSandboxStatus {
            namespaces: Some(cri::Namespace {
                options: Some(cri::NamespaceOption {
                    network: cri_namespace_mode(options.network),
                    pid: cri_namespace_mode(options.pid),
                    ipc: cri_namespace_mode(options.ipc),
                    target_id: options.target_id.clone(),
                    userns_options: None,
                }),
            }),
        }),
        labels: to_hash_map(&sandbox.labels),
        annotations: to_hash_map(&sandbox.annotations),
        runtime_handler: sandbox.runtime_handler.clone(),
    }
}

/// Whether the sandbox passes a ListPodSandbox filter (ID prefix, state, labels all equal).
pub fn matches(sandbox: &Sandbox, filter: &cri::PodSandboxFilter) -> bool {
    if !filter.id.is_empty() && !sandbox.id.starts_with(&filter.id) {
        return false;
    }
    if let Some(state) = &filter.state
        && state.state != cri_state(sandbox)
    {
        return false;
    }
    filter
        .label_selector
        .iter()
        .all(|(k, v)| sandbox.labels.get(k) == Some(v))
}

fn state_to_cri(state: SandboxState) -> cri::PodSandboxState {
    match state {
        SandboxState::Ready => cri::PodSandboxState::SandboxReady,
        SandboxState::Creating
        | SandboxState::Stopping
        | SandboxState::NotReady
        | SandboxState::Removing => cri::PodSandboxState::SandboxNotready,
    }
}

fn port_mapping(i: usize, mapping: &cri::PortMapping) -> DomainResult<Option<PortMapping>> {
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

pub(crate) fn check_metadata_size(
    labels: &HashMap<String, String>,
    annotations: &HashMap<String, String>,
) -> DomainResult<()> {
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

fn invalid(field: &str, reason: &str) -> DomainError {
    DomainError::invalid(field, reason)
}

pub(crate) fn to_hash_map(map: &BTreeMap<String, String>) -> HashMap<String, String> {
    map.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;

    use tonic::Status;

    use super::*;
    use crate::domain::Attachment;

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
        let sandbox = sandbox_from_request(request(ok.clone())).unwrap();
        assert_eq!(sandbox.port_mappings[0].protocol, "udp");
        assert_eq!(sandbox.port_mappings[0].host_port, 5353);

        let no_host_port = cri::PortMapping {
            host_port: 0,
            ..ok.clone()
        };
        assert!(
            sandbox_from_request(request(no_host_port))
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
            let status = Status::from(sandbox_from_request(request(mapping)).unwrap_err());
            assert_eq!(status.code(), tonic::Code::InvalidArgument);
            assert!(status.message().starts_with(field), "{}", status.message());
        }
    }

    /// Issue #21: DNS settings and the hostname are written into resolv.conf, /etc/hosts and
    /// /etc/hostname; a newline in one added lines of the requester's choosing.
    #[test]
    fn dns_settings_and_the_hostname_are_words_of_sane_length() {
        let with = |dns: cri::DnsConfig, hostname: &str| {
            let mut request = request(cri::PortMapping {
                container_port: 80,
                ..Default::default()
            });
            let config = request.config.as_mut().unwrap();
            config.dns_config = Some(dns);
            config.hostname = hostname.to_owned();
            sandbox_from_request(request)
        };
        let ok = cri::DnsConfig {
            servers: vec!["10.96.0.10".into()],
            searches: vec!["default.svc.cluster.local".into(), "cluster.local".into()],
            options: vec!["ndots:5".into(), "edns0".into()],
        };
        let sandbox = with(ok.clone(), "web-0").unwrap();
        assert_eq!(sandbox.dns.searches.len(), 2);
        assert_eq!(sandbox.hostname, "web-0");
        let words = |n: usize| (0..n).map(|i| format!("d{i}.local")).collect::<Vec<_>>();
        let cases = [
            (
                cri::DnsConfig {
                    searches: vec!["a.local\nnameserver 6.6.6.6".into()],
                    ..ok.clone()
                },
                "web",
                "config.dns_config.searches[0]",
            ),
            (
                cri::DnsConfig {
                    searches: vec!["a.local".into(), "b local".into()],
                    ..ok.clone()
                },
                "web",
                "config.dns_config.searches[1]",
            ),
            (
                cri::DnsConfig {
                    searches: vec![String::new()],
                    ..ok.clone()
                },
                "web",
                "config.dns_config.searches[0]",
            ),
            (
                cri::DnsConfig {
                    searches: vec!["a".repeat(254)],
                    ..ok.clone()
                },
                "web",
                "config.dns_config.searches[0]",
            ),
            (
                cri::DnsConfig {
                    searches: words(MAX_DNS_SEARCHES + 1),
                    ..ok.clone()
                },
                "web",
                "config.dns_config.searches",
            ),
            (
                cri::DnsConfig {
                    options: vec!["ndots:5\tx".into()],
                    ..ok.clone()
                },
                "web",
                "config.dns_config.options[0]",
            ),
            (
                cri::DnsConfig {
                    options: vec!["rotate\r".into()],
                    ..ok.clone()
                },
                "web",
                "config.dns_config.options[0]",
            ),
            (
                cri::DnsConfig {
                    servers: vec!["10.0.0.1\nnameserver 6.6.6.6".into()],
                    ..ok.clone()
                },
                "web",
                "config.dns_config.servers[0]",
            ),
            (ok.clone(), "web\n6.6.6.6 registry", "config.hostname"),
            (ok.clone(), "web 1", "config.hostname"),
            (ok.clone(), "web\0", "config.hostname"),
            (ok.clone(), &"h".repeat(MAX_HOSTNAME + 1), "config.hostname"),
        ];
        for (dns, hostname, field) in cases {
            let status = Status::from(with(dns, hostname).unwrap_err());
            assert_eq!(status.code(), tonic::Code::InvalidArgument);
            assert!(
                status.message().starts_with(&format!("{field}:")),
                "{field}: {}",
                status.message()
            );
        }
    }

    #[test]
    fn a_pod_records_whether_it_is_privileged() {
        let mut request = request(cri::PortMapping {
            container_port: 80,
            ..Default::default()
        });
        assert!(!sandbox_from_request(request.clone()).unwrap().privileged);
        request
            .config
            .as_mut()
            .unwrap()
            .linux
            .get_or_insert_default()
            .security_context
            .get_or_insert_default()
            .privileged = true;
        assert!(sandbox_from_request(request).unwrap().privileged);
    }

    #[test]
    fn ips_are_unique_and_in_order() {
        let mut sandbox = sandbox_from_request(request(cri::PortMapping {
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
        let status = status(&sandbox);
        let network = status.network.unwrap();
        assert_eq!(network.ip, "10.0.0.2");
        assert_eq!(
            network.additional_ips,
            vec![cri::PodIp {
                ip: "fd00::2".into()
            }]
        );
    }

    #[test]
    fn namespace_modes_become_the_domains_and_go_back_as_the_cris() {
        let with_modes = |network: i32, pid: i32| cri::RunPodSandboxRequest {
            config: Some(cri::PodSandboxConfig {
                metadata: Some(cri::PodSandboxMetadata {
                    name: "web".into(),
                    uid: "u1".into(),
                    namespace: "default".into(),
                    attempt: 0,
                }),
                linux: Some(cri::LinuxPodSandboxConfig {
                    security_context: Some(cri::LinuxSandboxSecurityContext {
                        namespace_options: Some(cri::NamespaceOption {
                            network,
                            pid,
                            ..cri::NamespaceOption::default()
                        }),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let sandbox = sandbox_from_request(with_modes(
            cri::NamespaceMode::Node as i32,
            cri::NamespaceMode::Container as i32,
        ))
        .unwrap();
        assert!(sandbox.host_network);
        assert_eq!(
            (
                sandbox.namespace_options.network,
                sandbox.namespace_options.pid,
                sandbox.namespace_options.ipc
            ),
            (
                NamespaceMode::Node,
                NamespaceMode::Container,
                NamespaceMode::Pod
            )
        );
        let options = status(&sandbox)
            .linux
            .and_then(|l| l.namespaces)
            .and_then(|n| n.options)
            .unwrap();
        assert_eq!((options.network, options.pid, options.ipc), (2, 1, 0));
        for (network, pid, field) in [(9, 0, "network"), (0, -1, "pid")] {
            let err = sandbox_from_request(with_modes(network, pid)).unwrap_err();
            assert!(
                err.to_string().starts_with(&format!(
                    "config.linux.security_context.namespace_options.{field}:"
                )),
                "{err}"
            );
        }
    }
}

//! What a pod's attachment tells its plugins: CNI_ARGS and capability arguments.

use cni_types::capabilities::{CapabilityArgs, IpRange};
use ipnet::IpNet;

use crate::error::{Error, Result};
use crate::pod::{PodNetwork, RuntimeConfig};

/// Which CNI_ARGS the runtime adds on its own.
///
/// In configuration files and on command lines it is written `plain` or `kubernetes` (serde and
/// [`FromStr`](std::str::FromStr) both use [`CniArgsPolicy::as_str`]'s names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum CniArgsPolicy {
    /// Only the caller's extra arguments and the runtime config's `IP`/`MAC`. Calico and other
    /// plugins change behaviour when they see Kubernetes arguments, so this is the default for a
    /// library that does not know it serves Kubernetes.
    #[default]
    Plain,
    /// Also `IgnoreUnknown=1` and the `K8S_POD_*` arguments a kubelet-driven runtime passes.
    Kubernetes,
}

impl CniArgsPolicy {
    /// The policy's name in files and on command lines.
    pub fn as_str(self) -> &'static str {
        match self {
            CniArgsPolicy::Plain => "plain",
            CniArgsPolicy::Kubernetes => "kubernetes",
        }
    }
}

impl std::fmt::Display for CniArgsPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for CniArgsPolicy {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        match s {
            "plain" => Ok(CniArgsPolicy::Plain),
            "kubernetes" => Ok(CniArgsPolicy::Kubernetes),
            other => Err(format!(
                "unknown CNI_ARGS policy {other:?} (expected plain or kubernetes)"
            )),
        }
    }
}

/// Builds the CNI_ARGS of one attachment, in the order plugins have always seen them.
///
/// # Errors
///
/// [`Error::InvalidPod`] when a key or value could not survive the `k=v;k=v` encoding.
pub(crate) fn cni_args(
    pod: &PodNetwork,
    runtime: Option<&RuntimeConfig>,
    policy: CniArgsPolicy,
) -> Result<Vec<(String, String)>> {
    let mut args = Vec::new();
    if policy == CniArgsPolicy::Kubernetes {
        args.extend([
            ("IgnoreUnknown".to_owned(), "1".to_owned()),
            ("K8S_POD_NAMESPACE".to_owned(), pod.namespace.clone()),
            ("K8S_POD_NAME".to_owned(), pod.name.clone()),
            ("K8S_POD_INFRA_CONTAINER_ID".to_owned(), pod.id.clone()),
            ("K8S_POD_UID".to_owned(), pod.uid.clone()),
        ]);
    }
    args.extend(pod.extra_args.iter().cloned());
    if let Some(rt) = runtime {
        if let Some(ip) = rt.ip {
            args.push(("IP".to_owned(), ip.to_string()));
        }
        if let Some(mac) = &rt.mac {
            args.push(("MAC".to_owned(), mac.clone()));
        }
    }
    for (i, (key, value)) in args.iter().enumerate() {
        let bad = |what: &str, text: &str| Error::InvalidPod {
            pod: pod.id.clone(),
            field: format!("CNI_ARGS[{i}]"),
            reason: format!("{what} {text:?} contains ';' or '=', which CNI_ARGS cannot carry"),
        };
        if key.is_empty() {
            return Err(Error::InvalidPod {
                pod: pod.id.clone(),
                field: format!("CNI_ARGS[{i}]"),
                reason: "empty key".to_owned(),
            });
        }
        if key.contains([';', '=']) {
            return Err(bad("key", key));
        }
        if value.contains([';', '=']) {
            return Err(bad("value", value));
        }
    }
    Ok(args)
}

/// Checks, before anything is created for the pod, that its CNI_ARGS can be encoded for each of
/// its networks under `policy`: what [`crate::CniPlugin::setup_pod`] would refuse later, refused
/// while there is still nothing to roll back.
///
/// # Errors
///
/// [`Error::InvalidPod`] naming the argument, as setup would.
pub fn validate_pod_args(pod: &PodNetwork, policy: CniArgsPolicy) -> Result<()> {
    cni_args(pod, None, policy)?;
    for runtime in pod.runtime_config.values() {
        cni_args(pod, Some(runtime), policy)?;
    }
    Ok(())
}

/// Builds the capability arguments of one attachment to `network`.
///
/// The pod's own IP ranges win over the node's pod CIDR, which reaches plugins declaring
/// `ipRanges` otherwise.
pub(crate) fn capability_args(
    pod: &PodNetwork,
    network: &str,
    runtime: Option<&RuntimeConfig>,
    pod_cidr: Option<IpNet>,
) -> CapabilityArgs {
    let mut caps = CapabilityArgs::default();
    if let Some(rt) = runtime {
        caps.port_mappings.clone_from(&rt.port_mappings);
        caps.bandwidth.clone_from(&rt.bandwidth);
        caps.ip_ranges.clone_from(&rt.ip_ranges);
        caps.cgroup_path.clone_from(&rt.cgroup_path);
        caps.pod_annotations.clone_from(&rt.pod_annotations);
        caps.mac.clone_from(&rt.mac);
        if let Some(ip) = rt.ip {
            caps.ips.push(IpNet::from(ip).to_string());
        }
    }
    if caps.ip_ranges.is_empty()
        && let Some(cidr) = pod_cidr
    {
        caps.ip_ranges = vec![vec![IpRange {
            subnet: cidr,
            range_start: None,
            range_end: None,
            gateway: None,
        }]];
    }
    if let Some(names) = pod.aliases.get(network).filter(|n| !n.is_empty()) {
        caps.aliases.insert(network.to_owned(), names.clone());
    }
    caps
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod() -> PodNetwork {
        PodNetwork {
            name: "web".into(),
            namespace: "prod".into(),
            id: "abc123".into(),
            uid: "u-1".into(),
            netns: "/run/netns/x".into(),
            ..PodNetwork::default()
        }
    }

    fn pairs(args: &[(String, String)]) -> Vec<String> {
        args.iter().map(|(k, v)| format!("{k}={v}")).collect()
    }

    #[test]
    fn kubernetes_args_only_by_policy() {
        let mut p = pod();
        p.extra_args.push(("FOO".into(), "bar".into()));
        let rt = RuntimeConfig {
            ip: Some("10.88.0.9".parse().unwrap()),
            mac: Some("c2:00:00:00:00:01".into()),
            ..RuntimeConfig::default()
        };
        assert_eq!(
            pairs(&cni_args(&p, Some(&rt), CniArgsPolicy::Plain).unwrap()),
            ["FOO=bar", "IP=10.88.0.9", "MAC=c2:00:00:00:00:01"]
        );
        assert_eq!(
            pairs(&cni_args(&p, None, CniArgsPolicy::Kubernetes).unwrap()),
            [
                "IgnoreUnknown=1",
                "K8S_POD_NAMESPACE=prod",
                "K8S_POD_NAME=web",
                "K8S_POD_INFRA_CONTAINER_ID=abc123",
                "K8S_POD_UID=u-1",
                "FOO=bar"
            ]
        );
    }

    #[test]
    fn separators_in_args_are_rejected_with_the_position() {
        let cases = [
            (
                ("A;B", "1"),
                "pod abc123: CNI_ARGS[0]: key \"A;B\" contains ';' or '=', which CNI_ARGS cannot carry",
            ),
            (
                ("A", "x=y"),
                "pod abc123: CNI_ARGS[0]: value \"x=y\" contains ';' or '=', which CNI_ARGS cannot carry",
            ),
            (("", "1"), "pod abc123: CNI_ARGS[0]: empty key"),
        ];
        for ((k, v), want) in cases {
            let mut p = pod();
            p.extra_args.push((k.into(), v.into()));
            assert_eq!(
                cni_args(&p, None, CniArgsPolicy::Plain)
                    .unwrap_err()
                    .to_string(),
                want
            );
        }
        let mut p = pod();
        p.name = "we;b".into();
        let err = cni_args(&p, None, CniArgsPolicy::Kubernetes)
            .unwrap_err()
            .to_string();
        assert!(err.contains("CNI_ARGS[2]"), "{err}");
        assert!(
            cni_args(&p, None, CniArgsPolicy::Plain).is_ok(),
            "the name is not sent without the policy"
        );
    }

    #[test]
    fn pod_cidr_reaches_ip_ranges_unless_the_pod_has_its_own() {
        let cidr: IpNet = "10.244.1.0/24".parse().unwrap();
        let caps = capability_args(&pod(), "net", None, Some(cidr));
        assert_eq!(caps.ip_ranges[0][0].subnet, cidr);

        let own: IpNet = "10.9.0.0/16".parse().unwrap();
        let rt = RuntimeConfig {
            ip_ranges: vec![vec![IpRange {
                subnet: own,
                range_start: None,
                range_end: None,
                gateway: None,
            }]],
            ..RuntimeConfig::default()
        };
        let caps = capability_args(&pod(), "net", Some(&rt), Some(cidr));
        assert_eq!(caps.ip_ranges.len(), 1);
        assert_eq!(caps.ip_ranges[0][0].subnet, own);
    }

    #[test]
    fn aliases_are_keyed_by_network_and_only_for_that_network() {
        let mut p = pod();
        p.aliases.insert("net".into(), vec!["web".into()]);
        p.aliases.insert("other".into(), vec!["x".into()]);
        let caps = capability_args(&p, "net", None, None);
        assert_eq!(
            serde_json::to_value(&caps.aliases).unwrap(),
            serde_json::json!({"net": ["web"]})
        );
    }
}

//! Capability arguments (CNI CONVENTIONS.md), handed to plugins in `runtimeConfig`.
//!
//! A plugin declares what it wants in its configuration, e.g. `"capabilities": {"portMappings": true}`;
//! the runtime then adds `"runtimeConfig": {"portMappings": [...]}` holding only the declared keys.
//! [`CapabilityArgs`] holds everything a runtime knows for one attachment, and
//! [`CapabilityArgs::runtime_config`] picks what one plugin asked for.

use std::collections::BTreeMap;
use std::net::IpAddr;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::result::empty_ip_as_none;

/// The capability names of CNI CONVENTIONS.md, as they appear in `capabilities` and `runtimeConfig`.
pub mod keys {
    /// Host ports forwarded to the container ([`PortMapping`](super::PortMapping)).
    pub const PORT_MAPPINGS: &str = "portMappings";
    /// Address ranges to allocate from ([`IpRange`](super::IpRange)).
    pub const IP_RANGES: &str = "ipRanges";
    /// Traffic shaping ([`Bandwidth`](super::Bandwidth)).
    pub const BANDWIDTH: &str = "bandwidth";
    /// Resolver settings ([`DnsCapability`](super::DnsCapability)).
    pub const DNS: &str = "dns";
    /// Static addresses to assign, as CIDRs.
    pub const IPS: &str = "ips";
    /// Hardware address to set.
    pub const MAC: &str = "mac";
    /// InfiniBand GUID to set.
    pub const INFINIBAND_GUID: &str = "infinibandGUID";
    /// Device (e.g. PCI address) to hand to the container.
    pub const DEVICE_ID: &str = "deviceID";
    /// Names the container is known by on the network.
    pub const ALIASES: &str = "aliases";
    /// The pod's cgroup path.
    pub const CGROUP_PATH: &str = "cgroupPath";
    /// Kubernetes pod annotations.
    pub const POD_ANNOTATIONS: &str = "io.kubernetes.cri.pod-annotations";
}

/// A port forwarded from the host to the container (`portMappings`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PortMapping {
    /// Port on the host.
    pub host_port: u16,
    /// Port in the container.
    pub container_port: u16,
    /// `tcp`, `udp` or `sctp`.
    pub protocol: String,
    /// Host address to bind; all addresses when absent.
    #[serde(
        rename = "hostIP",
        default,
        deserialize_with = "empty_ip_as_none",
        skip_serializing_if = "Option::is_none"
    )]
    pub host_ip: Option<IpAddr>,
}

/// One range of an IPAM range set (`ipRanges` is a list of range sets).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IpRange {
    /// The subnet to allocate from.
    pub subnet: IpNet,
    /// First address to hand out.
    #[serde(
        default,
        deserialize_with = "empty_ip_as_none",
        skip_serializing_if = "Option::is_none"
    )]
    pub range_start: Option<IpAddr>,
    /// Last address to hand out.
    #[serde(
        default,
        deserialize_with = "empty_ip_as_none",
        skip_serializing_if = "Option::is_none"
    )]
    pub range_end: Option<IpAddr>,
    /// Gateway of the subnet.
    #[serde(
        default,
        deserialize_with = "empty_ip_as_none",
        skip_serializing_if = "Option::is_none"
    )]
    pub gateway: Option<IpAddr>,
}

/// Traffic shaping for the container (`bandwidth`); rates in bits per second, bursts in bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Bandwidth {
    /// Ingress rate.
    #[serde(default)]
    pub ingress_rate: u64,
    /// Ingress burst.
    #[serde(default)]
    pub ingress_burst: u64,
    /// Egress rate.
    #[serde(default)]
    pub egress_rate: u64,
    /// Egress burst.
    #[serde(default)]
    pub egress_burst: u64,
}

/// Resolver settings for the container (`dns`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct DnsCapability {
    /// Name servers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub servers: Vec<String>,
    /// Search domains.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub searches: Vec<String>,
    /// Resolver options.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
}

impl DnsCapability {
    /// Whether nothing is set.
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty() && self.searches.is_empty() && self.options.is_empty()
    }
}

/// Everything a runtime can pass in `runtimeConfig` for one attachment.
///
/// Unset values (`None`, empty lists, maps and strings) are never passed. Capabilities this crate
/// does not know are kept as raw JSON in [`other`](CapabilityArgs::other); a typed field wins over
/// an entry of `other` with the same key.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CapabilityArgs {
    /// `portMappings`.
    #[serde(
        rename = "portMappings",
        default,
        skip_serializing_if = "Vec::is_empty"
    )]
    pub port_mappings: Vec<PortMapping>,
    /// `ipRanges`: a list of range sets.
    #[serde(rename = "ipRanges", default, skip_serializing_if = "Vec::is_empty")]
    pub ip_ranges: Vec<Vec<IpRange>>,
    /// `bandwidth`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bandwidth: Option<Bandwidth>,
    /// `dns`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns: Option<DnsCapability>,
    /// `ips`: static addresses as CIDR strings (kept as text; plugins decide what they accept).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ips: Vec<String>,
    /// `mac`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
    /// `infinibandGUID`.
    #[serde(
        rename = "infinibandGUID",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub infiniband_guid: Option<String>,
    /// `deviceID`.
    #[serde(rename = "deviceID", default, skip_serializing_if = "Option::is_none")]
    pub device_id: Option<String>,
    /// `aliases`: names per network, keyed by network name, as Go ocicni and Podman pass them
    /// (`{"mynet": ["web", "frontend"]}`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub aliases: BTreeMap<String, Vec<String>>,
    /// `cgroupPath`.
    #[serde(
        rename = "cgroupPath",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub cgroup_path: Option<String>,
    /// `io.kubernetes.cri.pod-annotations`.
    #[serde(
        rename = "io.kubernetes.cri.pod-annotations",
        default,
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub pod_annotations: BTreeMap<String, String>,
    /// Any other capability, by its name.
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

impl CapabilityArgs {
    /// Reads capability arguments from a JSON object, e.g. a `runtimeConfig`.
    ///
    /// # Errors
    ///
    /// [`Error::Json`] when a known key has the wrong shape or the bytes are not an object.
    pub fn from_slice(bytes: &[u8]) -> Result<Self> {
        serde_json::from_slice(bytes).map_err(|source| Error::Json {
            what: "capability arguments",
            source,
        })
    }

    /// The value for one capability name, if it is set and not empty.
    pub fn get(&self, name: &str) -> Option<Value> {
        fn json<T: Serialize>(value: &T) -> Option<Value> {
            // Plain data with string keys: serialization cannot fail.
            serde_json::to_value(value).ok()
        }
        fn non_empty<T: Serialize>(value: &[T]) -> Option<Value> {
            if value.is_empty() { None } else { json(&value) }
        }
        fn text(value: Option<&String>) -> Option<Value> {
            value
                .filter(|s| !s.is_empty())
                .map(|s| Value::String(s.clone()))
        }
        match name {
            keys::PORT_MAPPINGS => non_empty(&self.port_mappings),
            keys::IP_RANGES => non_empty(&self.ip_ranges),
            keys::BANDWIDTH => self.bandwidth.as_ref().and_then(json),
            keys::DNS => self
                .dns
                .as_ref()
                .filter(|dns| !dns.is_empty())
                .and_then(json),
            keys::IPS => non_empty(&self.ips),
            keys::MAC => text(self.mac.as_ref()),
            keys::INFINIBAND_GUID => text(self.infiniband_guid.as_ref()),
            keys::DEVICE_ID => text(self.device_id.as_ref()),
            keys::ALIASES => Some(&self.aliases).filter(|a| !a.is_empty()).and_then(json),
            keys::CGROUP_PATH => text(self.cgroup_path.as_ref()),
            keys::POD_ANNOTATIONS => Some(&self.pod_annotations)
                .filter(|a| !a.is_empty())
                .and_then(json),
            other => self.other.get(other).filter(|v| !v.is_null()).cloned(),
        }
    }

    /// The `runtimeConfig` object for a plugin that declared `capabilities`: only the declared names,
    /// in the order given, and only those with a value.
    ///
    /// Pass the names whose value is `true` in the plugin's `capabilities` map.
    pub fn runtime_config<I, S>(&self, capabilities: I) -> Map<String, Value>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut out = Map::new();
        for name in capabilities {
            let name = name.as_ref();
            if out.contains_key(name) {
                continue;
            }
            if let Some(value) = self.get(name) {
                out.insert(name.to_owned(), value);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_values_are_not_passed() {
        let args = CapabilityArgs {
            mac: Some(String::new()),
            dns: Some(DnsCapability::default()),
            other: BTreeMap::from([("custom".to_owned(), Value::Null)]),
            ..CapabilityArgs::default()
        };
        for name in [
            keys::PORT_MAPPINGS,
            keys::IP_RANGES,
            keys::BANDWIDTH,
            keys::DNS,
            keys::IPS,
            keys::MAC,
            keys::INFINIBAND_GUID,
            keys::DEVICE_ID,
            keys::ALIASES,
            keys::CGROUP_PATH,
            keys::POD_ANNOTATIONS,
            "custom",
            "unknown",
        ] {
            assert_eq!(args.get(name), None, "{name}");
        }
    }
}

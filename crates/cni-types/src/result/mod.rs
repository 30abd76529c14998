//! Plugin results of every version (0.1.0 to 1.1.0) and conversions between them.
//!
//! [`CniResult`] is one version-independent representation (the 1.1.0 shape) that remembers the
//! version it is in. Reading and writing go through per-version wire shapes:
//!
//! | versions            | shape                                                               |
//! |---------------------|---------------------------------------------------------------------|
//! | 0.1.0, 0.2.0        | `ip4`/`ip6` objects, each with one address, a gateway and routes    |
//! | 0.3.0, 0.3.1, 0.4.0 | `interfaces`, `ips` (with `version: "4"\|"6"`), `routes`            |
//! | 1.0.0               | as 0.4.0 without `ips[].version`                                    |
//! | 1.1.0               | as 1.0.0 plus interface `mtu`/`socketPath`/`pciID` and route `mtu`/`advmss`/`priority`/`table`/`scope` |
//!
//! Reading is lenient the way libcni is: unknown keys are ignored, `null` lists count as empty, an
//! empty gateway string counts as no gateway, and `ips[].version` is not trusted (the family comes
//! from the address). Writing and converting are strict: whatever the target version cannot express
//! is an error naming the field, except for the losses the spec itself prescribes when going down to
//! 0.2.0 (see [`CniResult::to_version`]).

mod convert;
mod wire;

use std::net::IpAddr;

use ipnet::IpNet;
use serde::{Deserialize, Deserializer, Serialize};

use crate::error::{Error, Result};
use crate::version::Version;

/// The outcome of a successful ADD, in any supported version.
///
/// Fields are public; the version is not, so a `CniResult` is always in a version this library
/// implements. Build one with [`CniResult::new`] or read one with [`CniResult::from_slice`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CniResult {
    cni_version: Version,
    /// Interfaces the plugin created or touched; `ips[].interface` indexes into this list.
    pub interfaces: Vec<Interface>,
    /// Addresses assigned.
    pub ips: Vec<IpConfig>,
    /// Routes installed.
    pub routes: Vec<Route>,
    /// DNS information for the container.
    pub dns: Dns,
}

/// An interface in a result (1.1.0 shape).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename = "interface", rename_all = "camelCase")]
pub struct Interface {
    /// Interface name, e.g. `eth0`.
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
    /// Hardware address; empty when unknown.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub mac: String,
    /// MTU (1.1.0 and later).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
    /// The network namespace path for container interfaces; empty for host interfaces.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub sandbox: String,
    /// Path of a socket for userspace networking (1.1.0 and later).
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub socket_path: String,
    /// PCI address of the device, e.g. `0000:00:1f.6` (1.1.0 and later).
    #[serde(
        rename = "pciID",
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub pci_id: String,
}

impl Interface {
    /// An interface with just a name.
    pub fn new(name: impl Into<String>) -> Self {
        Interface {
            name: name.into(),
            ..Interface::default()
        }
    }

    /// Whether the interface lives in a container's namespace (its `sandbox` is set).
    pub fn is_in_sandbox(&self) -> bool {
        !self.sandbox.is_empty()
    }

    /// The names of the fields that only 1.1.0 and later can carry, if set.
    pub(crate) fn fields_since_1_1(&self) -> impl Iterator<Item = &'static str> {
        [
            ("mtu", self.mtu.is_some()),
            ("socketPath", !self.socket_path.is_empty()),
            ("pciID", !self.pci_id.is_empty()),
        ]
        .into_iter()
        .filter_map(|(name, set)| set.then_some(name))
    }
}

/// An address assigned by the plugin (1.x shape: no `version` key).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename = "ip config")]
pub struct IpConfig {
    /// The address with its prefix length; host bits are kept (`10.88.0.5/16`).
    pub address: IpNet,
    /// The default gateway for this subnet, if any.
    #[serde(
        default,
        deserialize_with = "empty_ip_as_none",
        skip_serializing_if = "Option::is_none"
    )]
    pub gateway: Option<IpAddr>,
    /// Index into the result's `interfaces`; IPAM plugins leave it out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface: Option<usize>,
}

impl IpConfig {
    /// An address without gateway or interface.
    pub fn new(address: IpNet) -> Self {
        IpConfig {
            address,
            gateway: None,
            interface: None,
        }
    }

    /// The address without its prefix length.
    pub fn ip(&self) -> IpAddr {
        self.address.addr()
    }

    /// Whether this is an IPv4 address.
    pub fn is_ipv4(&self) -> bool {
        matches!(self.address, IpNet::V4(_))
    }
}

/// A route (1.1.0 shape).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename = "route")]
pub struct Route {
    /// Destination network.
    pub dst: IpNet,
    /// Next hop; the plugin's default gateway when absent.
    #[serde(
        default,
        deserialize_with = "empty_ip_as_none",
        skip_serializing_if = "Option::is_none"
    )]
    pub gw: Option<IpAddr>,
    /// Route MTU (1.1.0 and later).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
    /// Advertised MSS (1.1.0 and later).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub advmss: Option<u32>,
    /// Route priority/metric (1.1.0 and later).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<u32>,
    /// Routing table id (1.1.0 and later).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table: Option<u32>,
    /// Route scope: 0 global, 253 link, 254 host (1.1.0 and later).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<u32>,
}

impl Route {
    /// A route to `dst` without gateway or 1.1.0 attributes.
    pub fn new(dst: IpNet) -> Self {
        Route {
            dst,
            gw: None,
            mtu: None,
            advmss: None,
            priority: None,
            table: None,
            scope: None,
        }
    }

    /// Whether the destination is an IPv4 network.
    pub fn is_ipv4(&self) -> bool {
        matches!(self.dst, IpNet::V4(_))
    }

    /// The names of the fields that only 1.1.0 and later can carry, if set.
    pub(crate) fn fields_since_1_1(&self) -> impl Iterator<Item = &'static str> {
        [
            ("mtu", self.mtu.is_some()),
            ("advmss", self.advmss.is_some()),
            ("priority", self.priority.is_some()),
            ("table", self.table.is_some()),
            ("scope", self.scope.is_some()),
        ]
        .into_iter()
        .filter_map(|(name, set)| set.then_some(name))
    }
}

/// DNS information, the same in every version.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename = "dns")]
pub struct Dns {
    /// Name servers, in priority order (kept as text: plugins are not checked here).
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub nameservers: Vec<String>,
    /// Local domain for short names.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub domain: String,
    /// Search domains, in priority order.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub search: Vec<String>,
    /// Resolver options.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub options: Vec<String>,
}

impl Dns {
    /// Whether nothing is set (an empty `dns` is left out when writing).
    pub fn is_empty(&self) -> bool {
        self.nameservers.is_empty()
            && self.domain.is_empty()
            && self.search.is_empty()
            && self.options.is_empty()
    }
}

impl CniResult {
    /// An empty result in `version`.
    ///
    /// # Errors
    ///
    /// [`Error::UnsupportedVersion`] when `version` is not in
    /// [`SUPPORTED_VERSIONS`](crate::version::SUPPORTED_VERSIONS).
    pub fn new(version: Version) -> Result<Self> {
        wire::Shape::of(version)?;
        Ok(CniResult {
            cni_version: version,
            interfaces: Vec::new(),
            ips: Vec::new(),
            routes: Vec::new(),
            dns: Dns::default(),
        })
    }

    /// Reads a result in the wire shape of `version`.
    ///
    /// A `cniVersion` key may be absent (libcni then assumes the configuration's version, which is
    /// what the caller passes here); when present it must name `version`.
    ///
    /// # Errors
    ///
    /// [`Error::UnsupportedVersion`] for a version this library does not implement,
    /// [`Error::Json`] when the bytes are not a result of that version, and
    /// [`Error::InvalidResult`] when their `cniVersion` names another version.
    pub fn from_slice(bytes: &[u8], version: Version) -> Result<Self> {
        wire::parse(bytes, version)
    }

    /// Reads a result in the version named by its own `cniVersion` key, as libcni does for plugin
    /// output and cached results.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidResult`] when there is no `cniVersion`, [`Error::InvalidVersion`] or
    /// [`Error::UnsupportedVersion`] when it names no version this library implements, and the
    /// errors of [`CniResult::from_slice`].
    pub fn from_slice_own_version(bytes: &[u8]) -> Result<Self> {
        match declared_version(bytes)? {
            Some(version) => Self::from_slice(bytes, version),
            None => Err(Error::InvalidResult {
                reason: "no cniVersion".to_owned(),
            }),
        }
    }

    /// The version this result is in.
    pub fn cni_version(&self) -> Version {
        self.cni_version
    }

    /// The same result in `version`.
    ///
    /// The rules follow libcni's converters:
    /// - 0.3.x/0.4.0 and 1.x differ in `ips[].version` only, which is derived from the address.
    /// - Down to 0.1.0/0.2.0 keeps the first address of each family with its gateway, puts each
    ///   route under the family of its destination, and drops interfaces and interface indexes
    ///   (the old shape has neither).
    /// - Up from 0.1.0/0.2.0 yields no interfaces and addresses without an interface index, as
    ///   libcni's `convertFrom02x` does: the old shape does not say which interface an address is on.
    ///
    /// # Errors
    ///
    /// [`Error::UnsupportedVersion`] for a target this library does not implement, and
    /// [`Error::Convert`] naming the field when the target cannot express something the result
    /// holds: a 1.1.0-only field below 1.1.0; going to 0.2.0, a result without any address or a
    /// route whose family has no address.
    pub fn to_version(&self, version: Version) -> Result<CniResult> {
        convert::to_version(self, version)
    }

    /// The result as JSON in its own version's wire shape.
    ///
    /// # Errors
    ///
    /// [`Error::Encode`] naming the field when the result holds something its version cannot
    /// express (a 1.1.0-only field in a 1.0.0 result, two IPv4 addresses in a 0.2.0 result, ...).
    pub fn to_json_value(&self) -> Result<serde_json::Value> {
        wire::to_value(self)
    }

    /// The result as JSON bytes in its own version's wire shape.
    ///
    /// # Errors
    ///
    /// As [`CniResult::to_json_value`].
    pub fn to_vec(&self) -> Result<Vec<u8>> {
        Ok(self.to_json_value()?.to_string().into_bytes())
    }

    /// The first IPv4 address, if any.
    pub fn first_ipv4(&self) -> Option<&IpConfig> {
        self.ips.iter().find(|ip| ip.is_ipv4())
    }

    /// The first IPv6 address, if any.
    pub fn first_ipv6(&self) -> Option<&IpConfig> {
        self.ips.iter().find(|ip| !ip.is_ipv4())
    }

    /// The interface an address is on, when its index is set and in range.
    pub fn interface_of(&self, ip: &IpConfig) -> Option<&Interface> {
        ip.interface.and_then(|i| self.interfaces.get(i))
    }

    /// The interfaces inside a container namespace, with their indexes.
    pub fn sandbox_interfaces(&self) -> impl Iterator<Item = (usize, &Interface)> {
        self.interfaces
            .iter()
            .enumerate()
            .filter(|(_, iface)| iface.is_in_sandbox())
    }

    /// The addresses on the sandbox interface called `ifname` (what a runtime reports for a pod).
    pub fn ips_on_sandbox_interface<'a>(
        &'a self,
        ifname: &'a str,
    ) -> impl Iterator<Item = &'a IpConfig> + 'a {
        self.ips.iter().filter(move |ip| {
            self.interface_of(ip)
                .is_some_and(|iface| iface.is_in_sandbox() && iface.name == ifname)
        })
    }
}

/// The version a result's `cniVersion` key names, or `None` when the key is absent.
///
/// # Errors
///
/// [`Error::Json`] when the bytes are not a JSON object, [`Error::InvalidVersion`] when
/// `cniVersion` is not a version string.
pub fn declared_version(bytes: &[u8]) -> Result<Option<Version>> {
    let object: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(bytes)
        .map_err(|source| Error::Json {
            what: "result",
            source,
        })?;
    match object.get("cniVersion") {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::String(v)) if v.is_empty() => Ok(None),
        Some(serde_json::Value::String(v)) => v.parse().map(Some),
        Some(other) => Err(Error::InvalidResult {
            reason: format!("cniVersion {other} is not a string"),
        }),
    }
}

/// Deserializes `null` as the default value, as Go's decoder does for slices, strings and structs.
pub(crate) fn nullable<'de, D, T>(deserializer: D) -> std::result::Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// Deserializes an absent, `null` or empty address as `None`, as Go's `net.IP` does.
pub(crate) fn empty_ip_as_none<'de, D>(
    deserializer: D,
) -> std::result::Result<Option<IpAddr>, D::Error>
where
    D: Deserializer<'de>,
{
    match Option::<String>::deserialize(deserializer)? {
        None => Ok(None),
        Some(s) if s.is_empty() => Ok(None),
        Some(s) => s.parse().map(Some).map_err(serde::de::Error::custom),
    }
}

//! The JSON shapes results take in each version, and the checks that a result fits one.

use std::net::IpAddr;

use ipnet::IpNet;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::{CniResult, Dns, Interface, IpConfig, Route, empty_ip_as_none, nullable};
use crate::error::{Error, Result};
use crate::version::Version;

/// The four result layouts; each supported version uses exactly one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Shape {
    /// 0.1.0 and 0.2.0: `ip4`/`ip6`.
    V02,
    /// 0.3.0, 0.3.1 and 0.4.0: `interfaces`/`ips` with `ips[].version`.
    V04,
    /// 1.0.0: as `V04` without `ips[].version`.
    V10,
    /// 1.1.0: as `V10` plus interface and route attributes.
    V11,
}

impl Shape {
    pub(super) fn of(version: Version) -> Result<Shape> {
        match version {
            Version::V0_1_0 | Version::V0_2_0 => Ok(Shape::V02),
            Version::V0_3_0 | Version::V0_3_1 | Version::V0_4_0 => Ok(Shape::V04),
            Version::V1_0_0 => Ok(Shape::V10),
            Version::V1_1_0 => Ok(Shape::V11),
            other => Err(Error::UnsupportedVersion {
                version: other.to_string(),
            }),
        }
    }
}

/// A 0.1.0/0.2.0 result.
#[derive(Serialize, Deserialize)]
#[serde(rename = "result")]
struct Result02 {
    #[serde(
        rename = "cniVersion",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    cni_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ip4: Option<Ip02>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ip6: Option<Ip02>,
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Dns::is_empty"
    )]
    dns: Dns,
}

/// One family's address in a 0.1.0/0.2.0 result.
#[derive(Serialize, Deserialize)]
#[serde(rename = "ip config")]
struct Ip02 {
    ip: IpNet,
    #[serde(
        default,
        deserialize_with = "empty_ip_as_none",
        skip_serializing_if = "Option::is_none"
    )]
    gateway: Option<IpAddr>,
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    routes: Vec<Route02>,
}

/// A route before 1.1.0: destination and gateway only.
#[derive(Serialize, Deserialize)]
#[serde(rename = "route")]
struct Route02 {
    dst: IpNet,
    #[serde(
        default,
        deserialize_with = "empty_ip_as_none",
        skip_serializing_if = "Option::is_none"
    )]
    gw: Option<IpAddr>,
}

/// An interface before 1.1.0.
#[derive(Serialize, Deserialize)]
#[serde(rename = "interface")]
struct Interface04 {
    #[serde(default, deserialize_with = "nullable")]
    name: String,
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    mac: String,
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    sandbox: String,
}

/// An address in 0.3.x/0.4.0, with the `version` key 1.0.0 dropped.
#[derive(Serialize, Deserialize)]
#[serde(rename = "ip config")]
struct Ip04 {
    /// Written as "4" or "6"; read but not trusted (the address says the family).
    #[serde(default, deserialize_with = "nullable")]
    version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    interface: Option<usize>,
    address: IpNet,
    #[serde(
        default,
        deserialize_with = "empty_ip_as_none",
        skip_serializing_if = "Option::is_none"
    )]
    gateway: Option<IpAddr>,
}

/// The list-shaped results (0.3.0 to 1.1.0), generic over the element shapes.
#[derive(Serialize, Deserialize)]
#[serde(rename = "result")]
#[serde(bound(
    serialize = "I: Serialize, P: Serialize, R: Serialize",
    deserialize = "I: Deserialize<'de>, P: Deserialize<'de>, R: Deserialize<'de>"
))]
struct ListResult<I, P, R> {
    #[serde(
        rename = "cniVersion",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    cni_version: Option<String>,
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    interfaces: Vec<I>,
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    ips: Vec<P>,
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    routes: Vec<R>,
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Dns::is_empty"
    )]
    dns: Dns,
}

type Result04 = ListResult<Interface04, Ip04, Route02>;
type Result10 = ListResult<Interface04, IpConfig, Route02>;
type Result11 = ListResult<Interface, IpConfig, Route>;

impl From<Route02> for Route {
    fn from(r: Route02) -> Route {
        Route {
            gw: r.gw,
            ..Route::new(r.dst)
        }
    }
}

/// Writing a current item in an older shape.
trait FromCurrent<T> {
    fn from_current(item: &T) -> Self;
}

impl<T: Clone> FromCurrent<T> for T {
    fn from_current(item: &T) -> T {
        item.clone()
    }
}

impl FromCurrent<Route> for Route02 {
    fn from_current(r: &Route) -> Route02 {
        Route02 {
            dst: r.dst,
            gw: r.gw,
        }
    }
}

impl From<Interface04> for Interface {
    fn from(i: Interface04) -> Interface {
        Interface {
            mac: i.mac,
            sandbox: i.sandbox,
            ..Interface::new(i.name)
        }
    }
}

impl FromCurrent<Interface> for Interface04 {
    fn from_current(i: &Interface) -> Interface04 {
        Interface04 {
            name: i.name.clone(),
            mac: i.mac.clone(),
            sandbox: i.sandbox.clone(),
        }
    }
}

impl From<Ip04> for IpConfig {
    fn from(ip: Ip04) -> IpConfig {
        IpConfig {
            address: ip.address,
            gateway: ip.gateway,
            interface: ip.interface,
        }
    }
}

impl FromCurrent<IpConfig> for Ip04 {
    fn from_current(ip: &IpConfig) -> Ip04 {
        Ip04 {
            version: if ip.is_ipv4() { "4" } else { "6" }.to_owned(),
            interface: ip.interface,
            address: ip.address,
            gateway: ip.gateway,
        }
    }
}

/// What a JSON error says was being decoded.
fn what(version: Version) -> &'static str {
    match version {
        Version::V0_1_0 => "0.1.0 result",
        Version::V0_2_0 => "0.2.0 result",
        Version::V0_3_0 => "0.3.0 result",
        Version::V0_3_1 => "0.3.1 result",
        Version::V0_4_0 => "0.4.0 result",
        Version::V1_0_0 => "1.0.0 result",
        Version::V1_1_0 => "1.1.0 result",
        _ => "result",
    }
}

fn decode<T: DeserializeOwned>(bytes: &[u8], version: Version) -> Result<T> {
    serde_json::from_slice(bytes).map_err(|source| Error::Json {
        what: what(version),
        source,
    })
}

/// In a 0.1.0/0.2.0 result the block says the family: an IPv6 address or route destination under
/// `ip4` (or the reverse) is malformed, and no 0.1.0/0.2.0 result could be written back from it.
fn check_families(block: Option<&Ip02>, name: &str, v4: bool) -> Result<()> {
    let Some(block) = block else {
        return Ok(());
    };
    let family = if v4 { "IPv4" } else { "IPv6" };
    let wrong = |field: String, value: String| {
        Err(Error::InvalidResult {
            reason: format!("{name}.{field}: {value} is not an {family} address"),
        })
    };
    if block.ip.addr().is_ipv4() != v4 {
        return wrong("ip".to_owned(), block.ip.to_string());
    }
    // Gateways are left to the plugin, as the writer leaves them: the address and the route
    // destinations are what decide which block a writer puts them in.
    for (i, route) in block.routes.iter().enumerate() {
        if route.dst.addr().is_ipv4() != v4 {
            return wrong(format!("routes[{i}].dst"), route.dst.to_string());
        }
    }
    Ok(())
}

/// A `cniVersion` key, when present, must name the version being read.
fn check_declared(declared: Option<&str>, version: Version) -> Result<()> {
    let Some(text) = declared.filter(|t| !t.is_empty()) else {
        return Ok(());
    };
    if text.parse::<Version>().ok() == Some(version) {
        Ok(())
    } else {
        Err(Error::InvalidResult {
            reason: format!("cniVersion {text:?} does not match the expected {version}"),
        })
    }
}

fn from_list<I, P, R>(r: ListResult<I, P, R>, version: Version) -> Result<CniResult>
where
    I: Into<Interface>,
    P: Into<IpConfig>,
    R: Into<Route>,
{
    check_declared(r.cni_version.as_deref(), version)?;
    Ok(CniResult {
        cni_version: version,
        interfaces: r.interfaces.into_iter().map(Into::into).collect(),
        ips: r.ips.into_iter().map(Into::into).collect(),
        routes: r.routes.into_iter().map(Into::into).collect(),
        dns: r.dns,
    })
}

pub(super) fn parse(bytes: &[u8], version: Version) -> Result<CniResult> {
    match Shape::of(version)? {
        Shape::V02 => {
            let r: Result02 = decode(bytes, version)?;
            check_declared(r.cni_version.as_deref(), version)?;
            // The same flattening as libcni's convertFrom02x: ip4 then ip6, each family's routes
            // after the previous family's, no interfaces and no interface indexes.
            let mut result = CniResult::new(version)?;
            check_families(r.ip4.as_ref(), "ip4", true)?;
            check_families(r.ip6.as_ref(), "ip6", false)?;
            for ip in [r.ip4, r.ip6].into_iter().flatten() {
                result.ips.push(IpConfig {
                    gateway: ip.gateway,
                    ..IpConfig::new(ip.ip)
                });
                result.routes.extend(ip.routes.into_iter().map(Route::from));
            }
            result.dns = r.dns;
            Ok(result)
        }
        Shape::V04 => from_list(decode::<Result04>(bytes, version)?, version),
        Shape::V10 => from_list(decode::<Result10>(bytes, version)?, version),
        Shape::V11 => from_list(decode::<Result11>(bytes, version)?, version),
    }
}

/// Why `result` does not fit `shape`, naming the first field at fault.
pub(super) fn misfit(result: &CniResult, shape: Shape) -> Option<String> {
    if shape < Shape::V11 {
        for (i, iface) in result.interfaces.iter().enumerate() {
            if let Some(field) = iface.fields_since_1_1().next() {
                return Some(format!("interfaces[{i}].{field} needs CNI 1.1.0 or later"));
            }
        }
        for (i, route) in result.routes.iter().enumerate() {
            if let Some(field) = route.fields_since_1_1().next() {
                return Some(format!("routes[{i}].{field} needs CNI 1.1.0 or later"));
            }
        }
    }
    if shape == Shape::V02 {
        return misfit_02(result);
    }
    None
}

fn misfit_02(result: &CniResult) -> Option<String> {
    if !result.interfaces.is_empty() {
        return Some("interfaces: 0.1.0/0.2.0 results have no interface list".to_owned());
    }
    let (mut v4, mut v6) = (false, false);
    for (i, ip) in result.ips.iter().enumerate() {
        let (seen, family) = if ip.is_ipv4() {
            (&mut v4, "IPv4")
        } else {
            (&mut v6, "IPv6")
        };
        if *seen {
            return Some(format!(
                "ips[{i}]: 0.1.0/0.2.0 results hold one {family} address"
            ));
        }
        *seen = true;
        if ip.interface.is_some() {
            return Some(format!(
                "ips[{i}].interface: 0.1.0/0.2.0 results have no interface indexes"
            ));
        }
    }
    for (i, route) in result.routes.iter().enumerate() {
        let (has, family) = if route.is_ipv4() {
            (v4, "IPv4")
        } else {
            (v6, "IPv6")
        };
        if !has {
            return Some(format!(
                "routes[{i}]: no {family} address to hold route {} in a 0.1.0/0.2.0 result",
                route.dst
            ));
        }
    }
    None
}

fn list<I, P, R>(result: &CniResult) -> ListResult<I, P, R>
where
    I: FromCurrent<Interface>,
    P: FromCurrent<IpConfig>,
    R: FromCurrent<Route>,
{
    ListResult {
        cni_version: Some(result.cni_version.to_string()),
        interfaces: result.interfaces.iter().map(I::from_current).collect(),
        ips: result.ips.iter().map(P::from_current).collect(),
        routes: result.routes.iter().map(R::from_current).collect(),
        dns: result.dns.clone(),
    }
}

fn ip02(result: &CniResult, ipv4: bool) -> Option<Ip02> {
    let ip = result.ips.iter().find(|ip| ip.is_ipv4() == ipv4)?;
    Some(Ip02 {
        ip: ip.address,
        gateway: ip.gateway,
        routes: result
            .routes
            .iter()
            .filter(|r| r.is_ipv4() == ipv4)
            .map(Route02::from_current)
            .collect(),
    })
}

pub(super) fn to_value(result: &CniResult) -> Result<serde_json::Value> {
    let version = result.cni_version;
    let shape = Shape::of(version)?;
    if let Some(reason) = misfit(result, shape) {
        return Err(Error::Encode {
            version: version.to_string(),
            reason,
        });
    }
    let value = match shape {
        Shape::V02 => serde_json::to_value(Result02 {
            cni_version: Some(version.to_string()),
            ip4: ip02(result, true),
            ip6: ip02(result, false),
            dns: result.dns.clone(),
        }),
        Shape::V04 => serde_json::to_value(list::<Interface04, Ip04, Route02>(result)),
        Shape::V10 => serde_json::to_value(list::<Interface04, IpConfig, Route02>(result)),
        Shape::V11 => serde_json::to_value(list::<Interface, IpConfig, Route>(result)),
    };
    // These types hold only strings, numbers and lists, which always serialize.
    value.map_err(|source| Error::Json {
        what: what(version),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_supported_version_has_a_shape() {
        for v in crate::version::SUPPORTED_VERSIONS {
            assert!(Shape::of(*v).is_ok(), "{v}");
        }
        assert_eq!(
            Shape::of(Version::new(0, 5, 0)).unwrap_err().to_string(),
            "unsupported CNI version 0.5.0"
        );
    }

    #[test]
    fn declared_version_must_match() {
        assert!(check_declared(None, Version::V0_4_0).is_ok());
        assert!(check_declared(Some(""), Version::V0_4_0).is_ok());
        assert!(check_declared(Some("0.4"), Version::V0_4_0).is_ok());
        assert_eq!(
            check_declared(Some("0.3.1"), Version::V0_4_0)
                .unwrap_err()
                .to_string(),
            "invalid result: cniVersion \"0.3.1\" does not match the expected 0.4.0"
        );
    }

    #[test]
    fn ip04_writes_the_family_of_the_address() {
        let v6 = IpConfig::new("fd00::5/64".parse().unwrap());
        let v4 = IpConfig::new("10.0.0.5/24".parse().unwrap());
        assert_eq!(Ip04::from_current(&v6).version, "6");
        assert_eq!(Ip04::from_current(&v4).version, "4");
    }
}

//! The results the built-ins print, laid out as libcni's Go types marshal them in each version.
//!
//! Go's `types.PrintResult(result, version)` converts only when the result's own version differs
//! from the one asked for: a result that already claims the asked version is printed in the
//! layout of its Go type (1.0.0's), whatever the version string says. The loopback plugin relies
//! on that (its 0.4.0 result has no `ips[].version`), so [`Output::print`] does the same.

use serde_json::{Map, Value, json};

use crate::gojson;
use crate::host_local::Cidr;
use crate::skel::Failure;

/// An interface of a result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Interface {
    pub(crate) name: String,
    pub(crate) mac: String,
    pub(crate) sandbox: String,
}

/// An address of a result, already written as Go's `net.IPNet.String()` writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IpConfig {
    pub(crate) interface: Option<i64>,
    pub(crate) address: String,
    pub(crate) v4: bool,
    pub(crate) gateway: Option<String>,
}

/// A route; `dst` as Go writes a `net.IPNet`, `v4` its family.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Route {
    pub(crate) dst: String,
    pub(crate) v4: bool,
    pub(crate) gw: Option<String>,
}

/// `types.DNS`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Dns {
    pub(crate) nameservers: Vec<String>,
    pub(crate) domain: String,
    pub(crate) search: Vec<String>,
    pub(crate) options: Vec<String>,
}

/// A result in the 1.0.0 model, with the version string its Go value carries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Output {
    pub(crate) version: String,
    pub(crate) interfaces: Vec<Interface>,
    pub(crate) ips: Vec<IpConfig>,
    pub(crate) routes: Vec<Route>,
    pub(crate) dns: Dns,
    /// The layout of the Go type the result is held in (types100 unless parsed from an older
    /// `prevResult`), used when it is printed in its own version.
    pub(crate) native: Layout,
}

/// The layouts libcni's result types have.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Layout {
    /// 1.0.0 (and 1.1.0): no `ips[].version`.
    #[default]
    V1,
    /// 0.3.0, 0.3.1, 0.4.0: `ips[].version`.
    V04,
    /// 0.1.0, 0.2.0: one `ip4` and one `ip6`.
    V02,
}

pub(crate) fn layout(version: &str) -> Option<Layout> {
    match version {
        "1.0.0" | "1.1.0" => Some(Layout::V1),
        "0.3.0" | "0.3.1" | "0.4.0" => Some(Layout::V04),
        "0.1.0" | "0.2.0" => Some(Layout::V02),
        _ => None,
    }
}

impl Output {
    /// The bytes `types.PrintResult(result, version)` writes.
    ///
    /// # Errors
    ///
    /// libcni's conversion errors, as code 999 like any error a plugin returns.
    pub(crate) fn print(&self, version: &str) -> Result<Vec<u8>, Failure> {
        let own = if self.version.is_empty() {
            "1.0.0"
        } else {
            self.version.as_str()
        };
        let target = if version.is_empty() { "0.1.0" } else { version };
        let layout = if own == target {
            self.native
        } else {
            layout(target).ok_or_else(|| {
                Failure::internal(format!(
                    "no converter for CNI result version {own} to {target}"
                ))
            })?
        };
        let value = match layout {
            Layout::V1 | Layout::V04 => self.current(target, layout == Layout::V04),
            Layout::V02 => self.legacy(target)?,
        };
        Ok(crate::gojson::marshal_indent(&value))
    }

    fn current(&self, version: &str, with_family: bool) -> Value {
        let mut out = Map::new();
        out.insert("cniVersion".into(), json!(version));
        if !self.interfaces.is_empty() {
            let list = self.interfaces.iter().map(|i| {
                let mut o = Map::new();
                o.insert("name".into(), json!(i.name));
                if !i.mac.is_empty() {
                    o.insert("mac".into(), json!(i.mac));
                }
                if !i.sandbox.is_empty() {
                    o.insert("sandbox".into(), json!(i.sandbox));
                }
                Value::Object(o)
            });
            out.insert("interfaces".into(), Value::Array(list.collect()));
        }
        if !self.ips.is_empty() {
            let list = self.ips.iter().map(|ip| {
                let mut o = Map::new();
                if with_family {
                    o.insert("version".into(), json!(if ip.v4 { "4" } else { "6" }));
                }
                if let Some(index) = ip.interface {
                    o.insert("interface".into(), json!(index));
                }
                o.insert("address".into(), json!(ip.address));
                if let Some(gw) = &ip.gateway {
                    o.insert("gateway".into(), json!(gw));
                }
                Value::Object(o)
            });
            out.insert("ips".into(), Value::Array(list.collect()));
        }
        if !self.routes.is_empty() {
            out.insert("routes".into(), routes(self.routes.iter()));
        }
        out.insert("dns".into(), self.dns.to_json());
        Value::Object(out)
    }

    fn legacy(&self, version: &str) -> Result<Value, Failure> {
        let first = |v4: bool| self.ips.iter().find(|ip| ip.v4 == v4);
        let family = |ip: Option<&IpConfig>, v4: bool| {
            ip.map(|ip| {
                let mut o = Map::new();
                o.insert("ip".into(), json!(ip.address));
                if let Some(gw) = &ip.gateway {
                    o.insert("gateway".into(), json!(gw));
                }
                let mine: Vec<&Route> = self.routes.iter().filter(|r| r.v4 == v4).collect();
                if !mine.is_empty() {
                    o.insert("routes".into(), routes(mine.into_iter()));
                }
                Value::Object(o)
            })
        };
        let (ip4, ip6) = (family(first(true), true), family(first(false), false));
        if ip4.is_none() && ip6.is_none() {
            return Err(Failure::internal(
                "cannot convert: no valid IP addresses".to_owned(),
            ));
        }
        let mut out = Map::new();
        out.insert("cniVersion".into(), json!(version));
        if let Some(ip4) = ip4 {
            out.insert("ip4".into(), ip4);
        }
        if let Some(ip6) = ip6 {
            out.insert("ip6".into(), ip6);
        }
        out.insert("dns".into(), self.dns.to_json());
        Ok(Value::Object(out))
    }
}

impl Output {
    /// A `prevResult` as libcni's result type for `version` reads it (unknown keys dropped,
    /// addresses normalised), to be printed again.
    pub(crate) fn parse(value: &Value, version: &str) -> Result<Output, String> {
        let version = if version.is_empty() { "0.1.0" } else { version };
        let native =
            layout(version).ok_or_else(|| format!("unsupported CNI result version {version:?}"))?;
        let Value::Object(map) = value else {
            return Err(format!(
                "cannot unmarshal {} into a result",
                gojson::kind(value)
            ));
        };
        let mut out = Output {
            version: version.to_owned(),
            native,
            ..Output::default()
        };
        if let Some(dns) = gojson::field(map, "dns") {
            out.dns = parse_dns(dns)?;
        }
        if native == Layout::V02 {
            for key in ["ip4", "ip6"] {
                let Some(ip) = gojson::field(map, key) else {
                    continue;
                };
                let ip = as_object(ip)?;
                let (address, is_v4) = cidr_text(gojson::field(ip, "ip"))?;
                out.ips.push(IpConfig {
                    interface: None,
                    address,
                    v4: is_v4,
                    gateway: ip_text(gojson::field(ip, "gateway"))?,
                });
                for route in as_array(gojson::field(ip, "routes"))? {
                    out.routes.push(parse_route(route)?);
                }
            }
            return Ok(out);
        }
        for item in as_array(gojson::field(map, "interfaces"))? {
            let item = as_object(item)?;
            out.interfaces.push(Interface {
                name: text(gojson::field(item, "name"))?,
                mac: text(gojson::field(item, "mac"))?,
                sandbox: text(gojson::field(item, "sandbox"))?,
            });
        }
        for item in as_array(gojson::field(map, "ips"))? {
            let item = as_object(item)?;
            let interface = match gojson::field(item, "interface") {
                None => None,
                Some(v) => Some(v.as_i64().ok_or("cannot unmarshal interface into int")?),
            };
            let (address, v4) = cidr_text(gojson::field(item, "address"))?;
            out.ips.push(IpConfig {
                interface,
                address,
                v4,
                gateway: ip_text(gojson::field(item, "gateway"))?,
            });
        }
        for route in as_array(gojson::field(map, "routes"))? {
            out.routes.push(parse_route(route)?);
        }
        Ok(out)
    }
}

fn as_object(value: &Value) -> Result<&Map<String, Value>, String> {
    value
        .as_object()
        .ok_or_else(|| format!("cannot unmarshal {} into an object", gojson::kind(value)))
}

fn as_array(value: Option<&Value>) -> Result<&[Value], String> {
    match value {
        None => Ok(&[]),
        Some(Value::Array(items)) => Ok(items),
        Some(other) => Err(format!(
            "cannot unmarshal {} into an array",
            gojson::kind(other)
        )),
    }
}

fn text(value: Option<&Value>) -> Result<String, String> {
    match value {
        None => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(other) => Err(format!(
            "cannot unmarshal {} into a string",
            gojson::kind(other)
        )),
    }
}

fn texts(value: Option<&Value>) -> Result<Vec<String>, String> {
    as_array(value)?.iter().map(|v| text(Some(v))).collect()
}

fn cidr_text(value: Option<&Value>) -> Result<(String, bool), String> {
    let s = text(value)?;
    let cidr = Cidr::parse(&s).ok_or_else(|| format!("invalid CIDR address: {s}"))?;
    Ok((cidr.to_go_string(), cidr.ip.is_ipv4()))
}

fn ip_text(value: Option<&Value>) -> Result<Option<String>, String> {
    let s = text(value)?;
    if s.is_empty() {
        return Ok(None);
    }
    let ip: std::net::IpAddr = s.parse().map_err(|_| format!("invalid IP address: {s}"))?;
    Ok(Some(ip.to_canonical().to_string()))
}

fn parse_route(value: &Value) -> Result<Route, String> {
    let map = as_object(value)?;
    let (dst, v4) = cidr_text(gojson::field(map, "dst"))?;
    Ok(Route {
        dst,
        v4,
        gw: ip_text(gojson::field(map, "gw"))?,
    })
}

pub(crate) fn parse_dns(value: &Value) -> Result<Dns, String> {
    let map = as_object(value)?;
    Ok(Dns {
        nameservers: texts(gojson::field(map, "nameservers"))?,
        domain: text(gojson::field(map, "domain"))?,
        search: texts(gojson::field(map, "search"))?,
        options: texts(gojson::field(map, "options"))?,
    })
}

fn routes<'a>(list: impl Iterator<Item = &'a Route>) -> Value {
    Value::Array(
        list.map(|r| {
            let mut o = Map::new();
            o.insert("dst".into(), json!(r.dst));
            if let Some(gw) = &r.gw {
                o.insert("gw".into(), json!(gw));
            }
            Value::Object(o)
        })
        .collect(),
    )
}

impl Dns {
    fn to_json(&self) -> Value {
        let mut o = Map::new();
        if !self.nameservers.is_empty() {
            o.insert("nameservers".into(), json!(self.nameservers));
        }
        if !self.domain.is_empty() {
            o.insert("domain".into(), json!(self.domain));
        }
        if !self.search.is_empty() {
            o.insert("search".into(), json!(self.search));
        }
        if !self.options.is_empty() {
            o.insert("options".into(), json!(self.options));
        }
        Value::Object(o)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(version: &str) -> Output {
        Output {
            version: version.into(),
            ips: vec![IpConfig {
                interface: None,
                address: "10.1.0.2/24".into(),
                v4: true,
                gateway: Some("10.1.0.1".into()),
            }],
            routes: vec![Route {
                dst: "0.0.0.0/0".into(),
                v4: true,
                gw: None,
            }],
            ..Output::default()
        }
    }

    #[test]
    fn each_layout() {
        let text = |o: &Output, v: &str| String::from_utf8(o.print(v).unwrap()).unwrap();
        let v1 = text(&sample("1.0.0"), "1.0.0");
        assert!(v1.contains("\"cniVersion\": \"1.0.0\"") && !v1.contains("\"version\""));
        let v04 = text(&sample("1.0.0"), "0.4.0");
        assert!(v04.contains("\"version\": \"4\""), "{v04}");
        let v02 = text(&sample("1.0.0"), "0.2.0");
        assert!(
            v02.contains("\"ip4\"") && v02.contains("\"routes\""),
            "{v02}"
        );
        // A result that claims the asked version keeps its own layout, as in Go.
        let same = text(&sample("0.4.0"), "0.4.0");
        assert!(!same.contains("\"version\""), "{same}");
        // An empty version means 0.1.0.
        assert!(text(&sample("1.0.0"), "").contains("\"cniVersion\": \"0.1.0\""));
    }

    #[test]
    fn legacy_needs_an_address() {
        let empty = Output {
            version: "1.0.0".into(),
            ..Output::default()
        };
        let err = empty.print("0.2.0").unwrap_err();
        assert_eq!(err.code, 999);
    }

    proptest::proptest! {
        /// Whatever a previous plugin printed, reading and printing it again never panics.
        #[test]
        fn any_prev_result_is_read_without_panicking(
            text in "[\\[\\]{}:,\"a-z0-9./ ]{0,80}",
            version in proptest::sample::select(vec!["", "0.2.0", "0.4.0", "1.0.0", "9"]),
        ) {
            if let Ok(value) = serde_json::from_str::<Value>(&text)
                && let Ok(out) = Output::parse(&value, version)
            {
                let _ = out.print(version);
            }
            let shaped = serde_json::json!({"ips": [{"address": text.clone()}], "routes": [{"dst": text.clone()}],
                "ip4": {"ip": text.clone()}, "interfaces": [{"name": text}]});
            if let Ok(out) = Output::parse(&shaped, version) {
                let _ = out.print(version);
            }
        }
    }
}

//! host-local's configuration, read as the Go plugin's `LoadIPAMConfig` reads it.

use std::net::IpAddr;

use serde_json::{Map, Value};

use super::range::{Cidr, RangeSet, RangeSpec, canonical, canonicalize_set};
use crate::gojson::{self, field, kind};
use crate::result::Route;
use crate::skel::at_least;

/// Where leases live when `dataDir` is not set.
pub(crate) const DEFAULT_DATA_DIR: &str = "/var/lib/cni/networks";

/// The IPAM configuration after validation.
#[derive(Debug, Clone)]
pub(crate) struct IpamConfig {
    /// The network's name: the lease directory under `data_dir`.
    pub(crate) name: String,
    pub(crate) routes: Vec<Route>,
    pub(crate) data_dir: String,
    pub(crate) resolv_conf: String,
    pub(crate) ranges: Vec<RangeSet>,
    /// Addresses asked for (`CNI_ARGS` `IP`, `args.cni.ips`, `runtimeConfig.ips`), canonical.
    pub(crate) requested: Vec<IpAddr>,
}

type Fail = String;

fn type_error(value: &Value, place: &str, go_type: &str) -> Fail {
    format!(
        "json: cannot unmarshal {} into Go struct field {place} of type {go_type}",
        kind(value)
    )
}

fn object<'a>(
    value: Option<&'a Value>,
    place: &str,
    go_type: &str,
) -> Result<Option<&'a Map<String, Value>>, Fail> {
    match value {
        None => Ok(None),
        Some(Value::Object(map)) => Ok(Some(map)),
        Some(other) => Err(type_error(other, place, go_type)),
    }
}

fn array<'a>(value: Option<&'a Value>, place: &str, go_type: &str) -> Result<&'a [Value], Fail> {
    match value {
        None => Ok(&[]),
        Some(Value::Array(items)) => Ok(items),
        Some(other) => Err(type_error(other, place, go_type)),
    }
}

fn string<'a>(value: Option<&'a Value>, place: &str) -> Result<&'a str, Fail> {
    match value {
        None => Ok(""),
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(type_error(other, place, "string")),
    }
}

/// A `net.IP` field: `""` is no address.
fn ip(value: Option<&Value>, place: &str) -> Result<Option<IpAddr>, Fail> {
    let s = string(value, place)
        .map_err(|_| type_error(value.unwrap_or(&Value::Null), place, "net.IP"))?;
    if s.is_empty() {
        return Ok(None);
    }
    s.parse::<IpAddr>()
        .map(|ip| Some(canonical(ip)))
        .map_err(|_| format!("invalid IP address: {s}"))
}

/// A `types.IPNet` field.
fn cidr(value: Option<&Value>) -> Result<Option<Cidr>, Fail> {
    match value {
        None => Ok(None),
        Some(Value::String(s)) => Cidr::parse(s)
            .map(Some)
            .ok_or_else(|| format!("invalid CIDR address: {s}")),
        Some(other) => Err(format!(
            "json: cannot unmarshal {} into Go value of type string",
            kind(other)
        )),
    }
}

fn range_spec(value: &Value, place: &str) -> Result<RangeSpec, Fail> {
    let Some(map) = object(Some(value), place, "allocator.Range")? else {
        return Ok(RangeSpec::default());
    };
    range_fields(map, place)
}

fn range_fields(map: &Map<String, Value>, place: &str) -> Result<RangeSpec, Fail> {
    Ok(RangeSpec {
        range_start: ip(field(map, "rangeStart"), &format!("{place}.rangeStart"))?,
        range_end: ip(field(map, "rangeEnd"), &format!("{place}.rangeEnd"))?,
        subnet: cidr(field(map, "subnet"))?,
        gateway: ip(field(map, "gateway"), &format!("{place}.gateway"))?,
    })
}

fn range_sets(value: Option<&Value>, place: &str) -> Result<Vec<Vec<RangeSpec>>, Fail> {
    let mut sets = Vec::new();
    for set in array(value, place, "[]allocator.RangeSet")? {
        if set.is_null() {
            sets.push(Vec::new());
            continue;
        }
        let mut specs = Vec::new();
        for range in array(Some(set), place, "allocator.RangeSet")? {
            if range.is_null() {
                specs.push(RangeSpec::default());
            } else {
                specs.push(range_spec(range, place)?);
            }
        }
        sets.push(specs);
    }
    Ok(sets)
}

/// `ip.IP` values (`"a.b.c.d"` or `"a.b.c.d/n"`); `None` for Go's nil address.
fn ip_list(value: Option<&Value>, place: &str) -> Result<Vec<Option<IpAddr>>, Fail> {
    let mut out = Vec::new();
    for item in array(value, place, "[]*ip.IP")? {
        match item {
            Value::Null => out.push(None),
            Value::String(s) => out.push(parse_ip_arg(s)?),
            other => return Err(type_error(other, place, "ip.IP")),
        }
    }
    Ok(out)
}

/// `ip.IP.UnmarshalText`: an address, or an address with a prefix; `""` is nil.
fn parse_ip_arg(s: &str) -> Result<Option<IpAddr>, Fail> {
    if s.is_empty() {
        return Ok(None);
    }
    let parsed = if s.contains('/') {
        Cidr::parse(s).map(|c| c.ip)
    } else {
        s.parse().ok()
    };
    parsed
        .map(|ip| Some(canonical(ip)))
        .ok_or_else(|| format!("invalid IP address {s}"))
}

fn route(value: &Value) -> Result<Route, Fail> {
    let Some(map) = object(Some(value), "IPAMConfig.ipam.routes", "types.Route")? else {
        return Ok(Route {
            dst: "<nil>".into(),
            v4: false,
            gw: None,
        });
    };
    let dst = cidr(field(map, "dst"))?;
    let gw = ip(field(map, "gw"), "route.gw")?;
    Ok(Route {
        dst: dst.map_or_else(|| "<nil>".to_owned(), Cidr::to_go_string),
        v4: dst.is_some_and(|d| d.ip.is_ipv4()),
        gw: gw.map(|g| g.to_string()),
    })
}

/// `CNI_ARGS` as `types.LoadArgs` reads them into host-local's `IPAMEnvArgs`: the `IP` asked
/// for, if any.
fn env_ip(args: &str) -> Result<Option<IpAddr>, Fail> {
    if args.is_empty() {
        return Ok(None);
    }
    let mut ip = None;
    let mut ignore_unknown = false;
    let mut unknown = Vec::new();
    for pair in args.split(';') {
        let kv: Vec<&str> = pair.split('=').collect();
        let [key, value] = kv[..] else {
            return Err(format!("ARGS: invalid pair {}", gojson::quote(pair)));
        };
        let bad_value = |e: String| {
            format!(
                "ARGS: error parsing value of pair {}: {e}",
                gojson::quote(pair)
            )
        };
        match key {
            "IP" => ip = parse_ip_arg(value).map_err(bad_value)?,
            "IgnoreUnknown" => {
                ignore_unknown = match value.to_lowercase().as_str() {
                    "1" | "true" => true,
                    "0" | "false" => false,
                    other => {
                        return Err(bad_value(format!(
                            "boolean unmarshal error: invalid input {other}"
                        )));
                    }
                };
            }
            "CommonArgs" => {
                return Err("ARGS: cannot unmarshal into field 'CommonArgs' - type '*types.CommonArgs' does not implement encoding.TextUnmarshaler".to_owned());
            }
            _ => unknown.push(pair),
        }
    }
    if !unknown.is_empty() && !ignore_unknown {
        return Err(format!(
            "ARGS: unknown args {}",
            gojson::quote_list(&unknown)
        ));
    }
    Ok(ip)
}

/// `LoadIPAMConfig`: the configuration and the version results are printed in.
pub(crate) fn load(
    config: &Map<String, Value>,
    env_args: &str,
) -> Result<(IpamConfig, String), Fail> {
    let name = string(field(config, "name"), "Net.name")?.to_owned();
    let version = string(field(config, "cniVersion"), "Net.cniVersion")?.to_owned();
    let ipam = object(field(config, "ipam"), "Net.ipam", "allocator.IPAMConfig")?;
    let runtime = object(
        field(config, "runtimeConfig"),
        "Net.runtimeConfig",
        "struct",
    )?;
    let args = object(field(config, "args"), "Net.args", "struct")?;
    let cni_args = match args {
        Some(args) => object(field(args, "cni"), "Net.args.cni", "allocator.IPAMArgs")?,
        None => None,
    };
    let runtime_ranges = match runtime {
        Some(rt) => range_sets(field(rt, "ipRanges"), "Net.runtimeConfig.ipRanges")?,
        None => Vec::new(),
    };
    let runtime_ips = match runtime {
        Some(rt) => ip_list(field(rt, "ips"), "Net.runtimeConfig.ips")?,
        None => Vec::new(),
    };
    let arg_ips = match cni_args {
        Some(a) => ip_list(field(a, "ips"), "Net.args.cni.ips")?,
        None => Vec::new(),
    };
    let Some(ipam) = ipam else {
        return Err("IPAM config missing 'ipam' key".to_owned());
    };
    string(field(ipam, "Name"), "IPAMConfig.ipam.Name")?;
    string(field(ipam, "type"), "IPAMConfig.ipam.type")?;
    let legacy = range_fields(ipam, "IPAMConfig.ipam")?;
    let mut routes = Vec::new();
    for r in array(
        field(ipam, "routes"),
        "IPAMConfig.ipam.routes",
        "[]*types.Route",
    )? {
        routes.push(route(r)?);
    }
    let data_dir = string(field(ipam, "dataDir"), "IPAMConfig.ipam.dataDir")?.to_owned();
    let resolv_conf = string(field(ipam, "resolvConf"), "IPAMConfig.ipam.resolvConf")?.to_owned();
    let ranges = range_sets(field(ipam, "ranges"), "IPAMConfig.ipam.ranges")?;

    let mut requested = Vec::new();
    if let Some(ip) = env_ip(env_args)? {
        requested.push(Some(ip));
    }
    requested.extend(arg_ips);
    requested.extend(runtime_ips);
    let requested = requested
        .into_iter()
        .map(|ip| ip.ok_or_else(|| "cannot understand ip: IP <nil> not v4 nor v6".to_owned()))
        .collect::<Result<Vec<_>, _>>()?;

    // The runtime's ranges first, then the legacy range, then `ranges`.
    let mut specs: Vec<Vec<RangeSpec>> = runtime_ranges;
    if legacy.subnet.is_some() {
        specs.push(vec![legacy]);
    }
    specs.extend(ranges);
    if specs.is_empty() {
        return Err("no IP ranges specified".to_owned());
    }
    let mut sets = Vec::with_capacity(specs.len());
    let (mut v4, mut v6) = (0, 0);
    for (i, spec) in specs.iter().enumerate() {
        let set = canonicalize_set(spec).map_err(|e| format!("invalid range set {i}: {e}"))?;
        if set.is_v4() {
            v4 += 1;
        } else {
            v6 += 1;
        }
        sets.push(set);
    }
    if (v4 > 1 || v6 > 1) && !at_least(&version, "0.3.0").unwrap_or(false) {
        return Err(format!(
            "CNI version {version} does not support more than 1 address per family"
        ));
    }
    for (i, a) in sets.iter().enumerate() {
        for (j, b) in sets.iter().enumerate().skip(i + 1) {
            if a.overlaps(b) {
                return Err(format!("range set {i} overlaps with {j}"));
            }
        }
    }
    Ok((
        IpamConfig {
            name,
            routes,
            data_dir,
            resolv_conf,
            ranges: sets,
            requested,
        },
        version,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn load_json(v: Value, args: &str) -> Result<IpamConfig, String> {
        let Value::Object(map) = v else {
            unreachable!()
        };
        load(&map, args).map(|(c, _)| c)
    }

    #[test]
    fn legacy_runtime_and_ranges_in_go_order() {
        let c = load_json(
            json!({"name": "n", "cniVersion": "0.4.0",
                "runtimeConfig": {"ipRanges": [[{"subnet": "10.2.0.0/24"}]]},
                "ipam": {"subnet": "10.1.0.0/24", "ranges": [[{"subnet": "10.3.0.0/24"}]]}}),
            "",
        )
        .unwrap();
        let firsts: Vec<String> = c.ranges.iter().map(|s| s.0[0].start.to_string()).collect();
        assert_eq!(firsts, ["10.2.0.1", "10.1.0.1", "10.3.0.1"]);
    }

    #[test]
    fn cni_args_like_load_args() {
        assert_eq!(
            env_ip("IgnoreUnknown=1;K8S_POD_NAME=x;IP=10.0.0.5").unwrap(),
            Some("10.0.0.5".parse().unwrap())
        );
        assert_eq!(
            env_ip("K8S_POD_NAME=x").unwrap_err(),
            "ARGS: unknown args [\"K8S_POD_NAME=x\"]"
        );
        assert_eq!(env_ip("a").unwrap_err(), "ARGS: invalid pair \"a\"");
    }

    #[test]
    fn errors_like_go() {
        let err = |v| load_json(v, "").unwrap_err();
        assert_eq!(err(json!({"name": "n"})), "IPAM config missing 'ipam' key");
        assert_eq!(
            err(json!({"name": "n", "ipam": {}})),
            "no IP ranges specified"
        );
        assert_eq!(
            err(
                json!({"name": "n", "cniVersion": "0.4.0", "ipam": {"ranges": [[{"subnet": "10.0.0.0/24"}], [{"subnet": "10.0.0.0/25"}]]}})
            ),
            "range set 0 overlaps with 1"
        );
        assert_eq!(
            err(
                json!({"name": "n", "cniVersion": "0.2.0", "ipam": {"ranges": [[{"subnet": "10.0.0.0/24"}], [{"subnet": "10.1.0.0/25"}]]}})
            ),
            "CNI version 0.2.0 does not support more than 1 address per family"
        );
        assert_eq!(
            err(json!({"name": "n", "ipam": {"subnet": "nope"}})),
            "invalid CIDR address: nope"
        );
    }
}

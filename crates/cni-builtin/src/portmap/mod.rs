//! portmap, a chained plugin: ADD, DEL and CHECK as Debian's plugins 1.1.1 do them, the same
//! chains and rules in the nat table, but one `iptables-save -t nat` and one
//! `iptables-restore --noflush` per operation and family instead of one process per rule.
//!
//! The rules go into the namespace of the calling thread (the host's), as the Go plugin puts
//! them into its own; after an ADD, conntrack entries of UDP flows to the host ports are
//! deleted there too, as Go does (over ctnetlink, a failure ignored).

mod chain;
mod conntrack;
mod rules;

use std::net::IpAddr;
use std::path::Path;
use std::time::Instant;

use netlink_packet_route::link::{LinkAttribute, LinkMessage};
use netlink_packet_route::route::{RouteAddress, RouteAttribute, RouteMessage};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use serde_json::{Map, Value};

use self::chain::Chain;
use self::rules::{Mapping, Settings};
use crate::gojson::{field, kind};
use crate::host_local::{Cidr, go_error};
use crate::ipmasq::{NatTable, read_table, run_tool};
use crate::netlink::Netlink;
use crate::result::Output;
use crate::skel::{Command, Failure, Invocation};

/// The mark bit when `markMasqBit` is not given (Kubernetes uses 14 and 15, Calico 20 to 31).
const DEFAULT_MARK_BIT: i64 = 13;

/// The configuration as `parseConfig` leaves it.
#[derive(Debug, Default)]
struct NetConf {
    network: String,
    snat: bool,
    conditions_v4: Vec<String>,
    conditions_v6: Vec<String>,
    mark_bit: u32,
    external_mark_chain: Option<String>,
    mappings: Vec<Mapping>,
    prev: Option<Output>,
    /// The container's first IPv4 and first IPv6 address in `prevResult`, as Go picks them.
    container_v4: Option<Cidr>,
    container_v6: Option<Cidr>,
}

/// An IP family's tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    V4,
    V6,
}

impl Family {
    fn save(self) -> &'static str {
        match self {
            Family::V4 => "iptables-save",
            Family::V6 => "ip6tables-save",
        }
    }

    fn restore(self) -> &'static str {
        match self {
            Family::V4 => "iptables-restore",
            Family::V6 => "ip6tables-restore",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Family::V4 => "ipv4",
            Family::V6 => "ipv6",
        }
    }
}

fn decode_error(kind_text: &str, path: &str, go_type: &str) -> String {
    format!(
        "failed to parse network configuration: json: cannot unmarshal {kind_text} into Go struct field {path} of type {go_type}"
    )
}

/// Go's name for a value that does not fit an int: `number 1.5`, `string`.
fn int_kind(value: &Value) -> String {
    match value {
        Value::Number(n) => format!("number {n}"),
        other => kind(other).to_owned(),
    }
}

fn int_of(value: &Value, path: &str) -> Result<i64, String> {
    value
        .as_i64()
        .ok_or_else(|| decode_error(&int_kind(value), path, "int"))
}

fn string_of(value: &Value, path: &str) -> Result<String, String> {
    value
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| decode_error(kind(value), path, "string"))
}

fn strings_of(value: &Value, path: &str) -> Result<Vec<String>, String> {
    let Value::Array(items) = value else {
        return Err(decode_error(kind(value), path, "[]string"));
    };
    items.iter().map(|v| string_of(v, path)).collect()
}

fn mappings_of(config: &Map<String, Value>) -> Result<Vec<Mapping>, String> {
    let Some(runtime) = field(config, "runtimeConfig") else {
        return Ok(Vec::new());
    };
    let Value::Object(runtime) = runtime else {
        return Err(decode_error(
            kind(runtime),
            "PortMapConf.runtimeConfig",
            "struct { PortMaps []main.PortMapEntry \"json:\\\"portMappings,omitempty\\\"\" }",
        ));
    };
    let Some(list) = field(runtime, "portMappings") else {
        return Ok(Vec::new());
    };
    let Value::Array(list) = list else {
        return Err(decode_error(
            kind(list),
            ".runtimeConfig.portMappings",
            "[]main.PortMapEntry",
        ));
    };
    let mut out = Vec::new();
    for item in list {
        let Value::Object(item) = item else {
            return Err(decode_error(
                kind(item),
                ".runtimeConfig.portMappings",
                "main.PortMapEntry",
            ));
        };
        let path = |name: &str| format!("PortMapEntry.runtimeConfig.portMappings.{name}");
        let mut m = Mapping::default();
        if let Some(v) = field(item, "hostPort") {
            m.host_port = int_of(v, &path("hostPort"))?;
        }
        if let Some(v) = field(item, "containerPort") {
            m.container_port = int_of(v, &path("containerPort"))?;
        }
        if let Some(v) = field(item, "protocol") {
            m.protocol = string_of(v, &path("protocol"))?;
        }
        if let Some(v) = field(item, "hostIP") {
            m.host_ip = string_of(v, &path("hostIP"))?;
        }
        out.push(m);
    }
    Ok(out)
}

/// `parseConfig`: the configuration, `prevResult`, and the container's addresses in it.
fn load(args: &Invocation) -> Result<NetConf, String> {
    let config = &args.config;
    let mut conf = NetConf {
        network: field(config, "name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        snat: true,
        ..NetConf::default()
    };
    if let Some(v) = field(config, "snat") {
        conf.snat = v
            .as_bool()
            .ok_or_else(|| decode_error(kind(v), "PortMapConf.snat", "bool"))?;
    }
    if let Some(v) = field(config, "conditionsV4") {
        conf.conditions_v4 = strings_of(v, "PortMapConf.conditionsV4")?;
    }
    if let Some(v) = field(config, "conditionsV6") {
        conf.conditions_v6 = strings_of(v, "PortMapConf.conditionsV6")?;
    }
    let bit = field(config, "markMasqBit")
        .map(|v| int_of(v, "PortMapConf.markMasqBit"))
        .transpose()?;
    if let Some(v) = field(config, "externalSetMarkChain") {
        conf.external_mark_chain = Some(string_of(v, "PortMapConf.externalSetMarkChain")?);
    }
    conf.mappings = mappings_of(config)?;
    if let Some(prev) = field(config, "prevResult") {
        let parsed = Output::parse(prev, &args.version)
            .map_err(|e| format!("could not parse prevResult: {e}"))?;
        conf.prev = Some(parsed);
    }
    if bit.is_some() && conf.external_mark_chain.is_some() {
        return Err("Cannot specify externalSetMarkChain and markMasqBit".to_owned());
    }
    let bit = bit.unwrap_or(DEFAULT_MARK_BIT);
    conf.mark_bit = u32::try_from(bit)
        .ok()
        .filter(|b| *b <= 31)
        .ok_or("MasqMarkBit must be between 0 and 31")?;
    for m in &conf.mappings {
        if m.container_port <= 0 {
            return Err(format!(
                "Invalid container port number: {}",
                m.container_port
            ));
        }
        if m.host_port <= 0 {
            return Err(format!("Invalid host port number: {}", m.host_port));
        }
    }
    if let Some(prev) = &conf.prev {
        for ip in &prev.ips {
            let is_v4 = ip.v4;
            if (is_v4 && conf.container_v4.is_some()) || (!is_v4 && conf.container_v6.is_some()) {
                continue;
            }
            // Skip addresses of interfaces known not to be the container's.
            if let Some(index) = ip.interface
                && let Some(iface) = usize::try_from(index)
                    .ok()
                    .and_then(|i| prev.interfaces.get(i))
                && (iface.name != args.ifname || iface.sandbox.is_empty())
            {
                continue;
            }
            let Some(cidr) = Cidr::parse(&ip.address) else {
                continue;
            };
            if is_v4 {
                conf.container_v4 = Some(cidr);
            } else {
                conf.container_v6 = Some(cidr);
            }
        }
    }
    Ok(conf)
}

/// Runs one command; what to print on success.
pub(crate) fn run(args: &Invocation, deadline: Instant) -> Result<Vec<u8>, Failure> {
    match args.command {
        Command::Add => {
            let conf = load(args)
                .map_err(|e| Failure::internal(format!("failed to parse config: {e}")))?;
            add(args, &conf, deadline).map_err(Failure::internal)
        }
        Command::Del => {
            let conf = load(args)
                .map_err(|e| Failure::internal(format!("failed to parse config: {e}")))?;
            del(args, &conf, deadline).map_err(Failure::internal)
        }
        Command::Check => {
            let conf = load(args).map_err(Failure::internal)?;
            check(args, &conf, deadline).map_err(Failure::internal)
        }
        Command::Gc | Command::Status => Ok(Vec::new()),
    }
}

fn settings(args: &Invocation, conf: &NetConf, family: Family) -> Settings {
    Settings {
        network: conf.network.clone(),
        container_id: args.container_id.clone(),
        snat: conf.snat,
        external_mark_chain: conf.external_mark_chain.clone(),
        conditions: match family {
            Family::V4 => conf.conditions_v4.clone(),
            Family::V6 => conf.conditions_v6.clone(),
        },
        mappings: conf.mappings.clone(),
    }
}

fn add(args: &Invocation, conf: &NetConf, deadline: Instant) -> Result<Vec<u8>, String> {
    let prev = conf
        .prev
        .as_ref()
        .ok_or("must be called as chained plugin")?;
    if !conf.mappings.is_empty() {
        if let Some(v4) = conf.container_v4 {
            forward_ports(args, conf, Family::V4, v4, deadline)?;
            delete_stale_udp(conf, false);
        }
        if let Some(v6) = conf.container_v6 {
            forward_ports(args, conf, Family::V6, v6, deadline)?;
            delete_stale_udp(conf, true);
        }
    }
    prev.print(&args.version).map_err(|f| f.msg)
}

/// `deletePortmapStaleConnections`: once the DNAT is there, UDP flows to a host port that
/// conntrack already knows would bypass it. Go only logs a failure, and so stops here.
fn delete_stale_udp(conf: &NetConf, v6: bool) {
    for m in &conf.mappings {
        if !m.protocol.eq_ignore_ascii_case("udp") {
            continue;
        }
        // Go's uint16 conversion.
        let port = (m.host_port & 0xffff) as u16;
        if conntrack::delete_udp_to_port(port, v6).is_err() {
            return;
        }
    }
}

/// `forwardPorts` for one of the container's addresses, in one restore.
fn forward_ports(
    args: &Invocation,
    conf: &NetConf,
    family: Family,
    container: Cidr,
    deadline: Instant,
) -> Result<(), String> {
    let table =
        read_table(family.save(), deadline).map_err(|e| format!("failed to open iptables: {e}"))?;
    if conf.snat
        && let IpAddr::V4(ip) = container.ip
        && let Some(host_if) = routable_host_if(ip)
    {
        // 127/8 may then cross to the container: the localhost rules need it.
        enable_localnet_routing(&host_if)
            .map_err(|e| format!("unable to enable route_localnet: {e}"))?;
    }
    let chain = rules::dnat_chain(
        &settings(args, conf, family),
        container.ip,
        container.prefix,
    );
    apply(family, table, deadline, |table, script| {
        if conf.snat && conf.external_mark_chain.is_none() {
            rules::set_mark_chain(conf.mark_bit).setup(table, script);
            rules::mark_masq_chain(conf.mark_bit).setup(table, script);
        }
        rules::top_dnat_chain().setup(table, script);
        chain.setup(table, script);
    })
    .map_err(|e| format!("unable to setup DNAT: {e}"))
}

/// How often a script is made again from a fresh table when its restore fails, which it does
/// when another plugin changed the table since it was read (a chain made, a rule gone).
const ATTEMPTS: usize = 3;

/// Writes what `build` makes of `table` in one `--noflush` restore (nothing when it makes
/// nothing); when that fails, reads the table again and retries, up to [`ATTEMPTS`] in all.
fn apply(
    family: Family,
    mut table: NatTable,
    deadline: Instant,
    build: impl Fn(&mut NatTable, &mut String),
) -> Result<(), String> {
    let mut attempt = 1;
    loop {
        let mut script = String::new();
        build(&mut table, &mut script);
        if script.is_empty() {
            return Ok(());
        }
        let input = format!("*nat\n{script}COMMIT\n");
        let Err(failed) = run_tool(
            family.restore(),
            &["-w", "--noflush"],
            input.as_bytes(),
            deadline,
        ) else {
            return Ok(());
        };
        if attempt >= ATTEMPTS || Instant::now() >= deadline {
            return Err(failed);
        }
        attempt += 1;
        table = read_table(family.save(), deadline)?;
    }
}

/// The nat table of each family whose tools work (`maybeGetIptables`); an error when neither.
fn usable_tables(deadline: Instant) -> Result<Vec<(Family, NatTable)>, String> {
    let tables: Vec<(Family, NatTable)> = [Family::V4, Family::V6]
        .into_iter()
        .filter_map(|f| read_table(f.save(), deadline).ok().map(|t| (f, t)))
        .collect();
    if tables.is_empty() {
        return Err("neither iptables nor ip6tables usable".to_owned());
    }
    Ok(tables)
}

/// `unforwardPorts`: the container's chain and the chain old plugins made, in both families.
fn del(args: &Invocation, conf: &NetConf, deadline: Instant) -> Result<Vec<u8>, String> {
    if conf.mappings.is_empty() {
        return Ok(Vec::new());
    }
    let dnat = Chain {
        name: rules::dnat_chain_name(&conf.network, &args.container_id),
        entry_chains: vec![rules::TOP_DNAT.to_owned()],
        entry_rules: Vec::new(),
        rules: Vec::new(),
        prepend_entry: false,
    };
    let old = rules::old_snat_chain(&conf.network, &args.container_id);
    for (family, table) in usable_tables(deadline)? {
        apply(family, table, deadline, |table, script| {
            dnat.teardown(table, script);
            old.teardown(table, script);
        })
        .map_err(|e| format!("could not teardown {} dnat: {e}", family.name()))?;
    }
    Ok(Vec::new())
}

/// `cmdCheck`: the container's chain, for each of its addresses, in every usable family (as
/// 1.1.1 does it, an IPv4 container's chain is looked for in ip6tables too).
fn check(args: &Invocation, conf: &NetConf, deadline: Instant) -> Result<Vec<u8>, String> {
    if conf.prev.is_none() {
        return Err("Required prevResult missing".to_owned());
    }
    if conf.mappings.is_empty() {
        return Ok(Vec::new());
    }
    let containers = [
        (Family::V4, conf.container_v4),
        (Family::V6, conf.container_v6),
    ];
    let mut tables: Option<Vec<(Family, NatTable)>> = None;
    for (family, container) in containers {
        let Some(container) = container else {
            continue;
        };
        let chain = rules::dnat_chain(
            &settings(args, conf, family),
            container.ip,
            container.prefix,
        );
        if tables.is_none() {
            tables = Some(usable_tables(deadline)?);
        }
        for (table_family, table) in tables.iter().flatten() {
            chain
                .check(table)
                .map_err(|e| format!("could not check {} dnat: {e}", table_family.name()))?;
        }
    }
    Ok(Vec::new())
}

/// `getRoutableHostIF`: the interface the route to the container goes out of.
fn routable_host_if(ip: std::net::Ipv4Addr) -> Option<String> {
    let mut nl = Netlink::open().ok()?;
    let mut request = RouteMessage::default();
    request.header.address_family = AddressFamily::Inet;
    request.header.destination_prefix_length = 32;
    request
        .attributes
        .push(RouteAttribute::Destination(RouteAddress::Inet(ip)));
    let replies = nl.request(RouteNetlinkMessage::GetRoute(request)).ok()?;
    let index = replies.iter().find_map(|r| match r {
        RouteNetlinkMessage::NewRoute(route) => route.attributes.iter().find_map(|a| match a {
            RouteAttribute::Oif(index) => Some(*index),
            _ => None,
        }),
        _ => None,
    })?;
    let mut request = LinkMessage::default();
    request.header.index = index;
    let replies = nl.request(RouteNetlinkMessage::GetLink(request)).ok()?;
    replies.into_iter().find_map(|r| match r {
        RouteNetlinkMessage::NewLink(link) => link.attributes.into_iter().find_map(|a| match a {
            LinkAttribute::IfName(name) => Some(name),
            _ => None,
        }),
        _ => None,
    })
}

/// `enableLocalnetRouting`: route_localnet on, in the calling thread's namespace.
fn enable_localnet_routing(ifname: &str) -> Result<(), String> {
    let path = Path::new("/proc/sys/net/ipv4/conf")
        .join(ifname)
        .join("route_localnet");
    std::fs::write(&path, "1").map_err(|e| go_error("open", &path, &e))
}

//! bridge, IPv4: ADD and DEL as Debian's plugins 1.1.1 do them, for the options built in so far
//! (`bridge`, `isGateway`, `isDefaultGateway`, `forceAddress`, `mtu`, `hairpinMode`,
//! `promiscMode`, `enabledad`, `ipam`, `dns`, `ipMasq`). Others (`vlan`, `macspoofchk`, a
//! requested MAC, IPv6 addresses) are refused with an error saying so.
//!
//! The host side (the bridge, the host end of the veth, the gateway address, forwarding) is done
//! in the namespace of the calling thread, as the Go plugin does it in its own; the pod side on
//! a thread that enters the pod's namespace and then ends. Unlike the Go plugin, the veth is
//! created from the host with its peer directly in the pod's namespace.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher as _, Hasher as _};
use std::io::{self, Read as _, Write as _};
use std::net::IpAddr;
use std::os::fd::AsFd as _;
use std::path::Path;
use std::time::{Duration, Instant};

use netlink_packet_route::link::LinkFlags;
use serde_json::{Map, Value};

use crate::gojson::{field, kind, quote};
use crate::host_local::{Cidr, go_reason};
use crate::link;
use crate::netlink::Netlink;
use crate::netns::{NsError, with_netns};
use crate::result::{Interface, Output, Route, parse_dns};
use crate::skel::{Command, Failure, Invocation};

/// Runs the IPAM plugin of the configuration: its `type`, then the command; its stdout.
pub(crate) type Delegate<'a> = &'a dyn Fn(&str, &str) -> Result<Vec<u8>, Failure>;

const DEFAULT_BRIDGE: &str = "cni0";

#[derive(Debug, Default)]
struct NetConf {
    bridge: String,
    is_gw: bool,
    is_default_gw: bool,
    force_address: bool,
    mtu: u32,
    hairpin: bool,
    promisc: bool,
    enable_dad: bool,
    ipam_type: String,
    dns: Value,
    ip_masq: bool,
}

fn load(config: &Map<String, Value>) -> Result<NetConf, String> {
    let bad = |key: &str, v: &Value, go: &str| {
        format!(
            "failed to load netconf: json: cannot unmarshal {} into Go struct field NetConf.{key} of type {go}",
            kind(v)
        )
    };
    let flag = |key: &str| match field(config, key) {
        None => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(v) => Err(bad(key, v, "bool")),
    };
    let int = |key: &str| match field(config, key) {
        None => Ok(0),
        Some(v) => v.as_i64().ok_or_else(|| bad(key, v, "int")),
    };
    let text = |v: Option<&Value>, key: &str| match v {
        None => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(v) => Err(bad(key, v, "string")),
    };
    let vlan = int("vlan")?;
    let mtu = int("mtu")?;
    let mut conf = NetConf {
        bridge: text(field(config, "bridge"), "bridge")?,
        is_gw: flag("isGateway")?,
        is_default_gw: flag("isDefaultGateway")?,
        force_address: flag("forceAddress")?,
        mtu: u32::try_from(mtu).unwrap_or(0),
        hairpin: flag("hairpinMode")?,
        promisc: flag("promiscMode")?,
        enable_dad: flag("enabledad")?,
        ..NetConf::default()
    };
    if conf.bridge.is_empty() {
        DEFAULT_BRIDGE.clone_into(&mut conf.bridge);
    }
    if let Some(ipam) = field(config, "ipam") {
        let Value::Object(ipam) = ipam else {
            return Err(bad("ipam", ipam, "types.IPAM"));
        };
        conf.ipam_type = text(field(ipam, "type"), "ipam.type")?;
    }
    conf.dns = field(config, "dns").cloned().unwrap_or(Value::Null);
    if !(0..=4094).contains(&vlan) {
        return Err(format!(
            "invalid VLAN ID {vlan} (must be between 0 and 4094)"
        ));
    }
    let unsupported = |what: &str| Err(format!("the built-in bridge does not support {what} yet"));
    if vlan != 0 {
        return unsupported("vlan");
    }
    conf.ip_masq = flag("ipMasq")?;
    if flag("macspoofchk")? {
        return unsupported("macspoofchk");
    }
    if mtu < 0 {
        return unsupported("a negative mtu");
    }
    let mac_in = |v: Option<&Value>| {
        v.and_then(Value::as_object)
            .and_then(|o| field(o, "mac"))
            .is_some()
    };
    if mac_in(field(config, "runtimeConfig"))
        || field(config, "args")
            .and_then(Value::as_object)
            .is_some_and(|a| mac_in(field(a, "cni")))
    {
        return unsupported("a requested MAC address");
    }
    Ok(conf)
}

/// Runs one command; what to print on success.
pub(crate) fn run(
    args: &Invocation,
    ipam: Delegate<'_>,
    deadline: Instant,
) -> Result<Vec<u8>, Failure> {
    if args
        .cni_args
        .split(';')
        .any(|pair| pair.starts_with("MAC="))
    {
        return Err(Failure::internal(
            "the built-in bridge does not support a requested MAC address yet",
        ));
    }
    let conf = load(&args.config).map_err(Failure::internal)?;
    match args.command {
        Command::Add => add(args, &conf, ipam, deadline),
        Command::Del => del(args, &conf, ipam, deadline),
        Command::Check => Err(Failure::internal(
            "the built-in bridge does not support CHECK yet",
        )),
        Command::Gc | Command::Status => Ok(Vec::new()),
    }
}

/// The network's name and the container's ID: the masquerade chain's name and comment.
fn masq_names(args: &Invocation) -> (String, String) {
    let network = field(&args.config, "name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    (
        crate::ipmasq::chain_name(network, &args.container_id),
        crate::ipmasq::comment(network, &args.container_id),
    )
}

fn del(
    args: &Invocation,
    conf: &NetConf,
    ipam: Delegate<'_>,
    deadline: Instant,
) -> Result<Vec<u8>, Failure> {
    let ipam_del = || {
        if conf.ipam_type.is_empty() {
            Ok(Vec::new())
        } else {
            ipam(&conf.ipam_type, "DEL").map(|_| Vec::new())
        }
    };
    if args.netns.is_empty() {
        return ipam_del();
    }
    let ifname = args.ifname.clone();
    // ip.DelLinkByNameAddr: the interface's global addresses, then the interface.
    let deleted = with_netns(&args.netns, move || {
        let mut nl = Netlink::open().map_err(|e| go_reason(&e))?;
        match link::by_name(&mut nl, &ifname) {
            Ok(None) => Ok(Vec::new()),
            Ok(Some(l)) => {
                let addrs = link::addresses(&mut nl, l.header.index, false)
                    .map_err(|e| {
                        format!(
                            "failed to get IP addresses for {}: {}",
                            quote(&ifname),
                            go_reason(&e)
                        )
                    })?
                    .into_iter()
                    .filter(|c| is_global_unicast(c.ip))
                    .map(|c| (c.ip, c.prefix))
                    .collect::<Vec<_>>();
                link::delete(&mut nl, l.header.index).map_err(|e| {
                    format!("failed to delete {}: {}", quote(&ifname), go_reason(&e))
                })?;
                Ok(addrs)
            }
            Err(e) => Err(format!(
                "failed to lookup {}: {}",
                quote(&ifname),
                go_reason(&e)
            )),
        }
    });
    let addrs = match deleted {
        Ok(addrs) => addrs,
        Err(NsError::Missing(_)) => return ipam_del(),
        Err(e) => return Err(Failure::internal(e.message())),
    };
    ipam_del()?;
    if !conf.ipam_type.is_empty() && conf.ip_masq {
        let (chain, comment) = masq_names(args);
        crate::ipmasq::teardown(&crate::ipmasq::v4_only(&addrs), &chain, &comment, deadline)
            .map_err(Failure::internal)?;
    }
    Ok(Vec::new())
}

/// Go's `IP.IsGlobalUnicast`, which picks the addresses bridge's DEL unmasquerades.
fn is_global_unicast(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            !(v4.is_unspecified()
                || v4.is_loopback()
                || v4.is_multicast()
                || v4.is_link_local()
                || v4.is_broadcast())
        }
        IpAddr::V6(v6) => {
            let first = v6.segments()[0];
            !(v6.is_unspecified()
                || v6.is_loopback()
                || v6.is_multicast()
                || (first & 0xffc0) == 0xfe80)
        }
    }
}

fn random_veth_name() -> String {
    // RandomState's keys are random, and differ from one instance to the next.
    format!(
        "veth{:08x}",
        RandomState::new().build_hasher().finish() as u32
    )
}

fn internal(what: &str, e: &io::Error) -> String {
    format!("{what}: {}", go_reason(e))
}

/// `ensureBridge`: the bridge, made when missing, promiscuous when asked, up.
fn ensure_bridge(
    nl: &mut Netlink,
    conf: &NetConf,
) -> Result<netlink_packet_route::link::LinkMessage, String> {
    let name = quote(&conf.bridge);
    link::add_bridge(nl, &conf.bridge, conf.mtu)
        .map_err(|e| internal(&format!("could not add {name}"), &e))?;
    let lookup = |nl: &mut Netlink| match link::by_name(nl, &conf.bridge) {
        Ok(Some(l)) if link::is_bridge(&l) => Ok(l),
        Ok(Some(_)) => Err(format!("{name} already exists but is not a bridge")),
        Ok(None) => Err(format!("could not lookup {name}: Link not found")),
        Err(e) => Err(internal(&format!("could not lookup {name}"), &e)),
    };
    let br = lookup(nl)?;
    if conf.promisc {
        link::set_flag(nl, br.header.index, LinkFlags::Promisc, true)
            .map_err(|e| internal(&format!("could not set promiscuous mode on {name}"), &e))?;
    }
    let _ = sysctl(&format!("net/ipv6/conf/{}/accept_ra", conf.bridge), "0");
    link::set_flag(nl, br.header.index, LinkFlags::Up, true).map_err(|e| go_reason(&e))?;
    lookup(nl)
}

/// Writes a sysctl under /proc/sys in the calling thread's network namespace.
fn sysctl(name: &str, value: &str) -> io::Result<()> {
    std::fs::write(Path::new("/proc/sys").join(name), value)
}

/// `ip.EnableIP4Forward`.
fn enable_ip4_forward() -> Result<(), String> {
    let path = Path::new("/proc/sys/net/ipv4/ip_forward");
    let mut current = String::new();
    std::fs::File::open(path)
        .and_then(|mut f| f.read_to_string(&mut current))
        .map_err(|e| crate::host_local::go_error("open", path, &e))?;
    if current == "1\n" {
        return Ok(());
    }
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .and_then(|mut f| f.write_all(b"1"))
        .map_err(|e| crate::host_local::go_error("open", path, &e))
}

#[expect(
    clippy::too_many_lines,
    reason = "one pass through cmdAdd, in the Go plugin's order"
)]
fn add(
    args: &Invocation,
    conf: &NetConf,
    ipam: Delegate<'_>,
    deadline: Instant,
) -> Result<Vec<u8>, Failure> {
    let is_gw = conf.is_gw || conf.is_default_gw;
    if conf.hairpin && conf.promisc {
        return Err(fail(
            "cannot set hairpin mode and promiscuous mode at the same time.",
        ));
    }
    let mut nl = Netlink::open().map_err(|e| fail(go_reason(&e)))?;
    let br = ensure_bridge(&mut nl, conf).map_err(|e| {
        fail(format!(
            "failed to create bridge {}: {e}",
            quote(&conf.bridge)
        ))
    })?;
    let pod_ns = node_primitives::ns::open_namespace(Path::new(&args.netns))
        .map_err(|e| go_reason(&e))
        .and_then(|f| f.ok_or_else(|| "not a namespace".to_owned()))
        .map_err(|e| fail(format!("failed to open netns {}: {e}", quote(&args.netns))))?;

    // setupVeth, from the host side.
    let mut host_name = random_veth_name();
    let mut made = Err(io::Error::other("no attempt"));
    for _ in 0..10 {
        made = link::add_veth(&mut nl, &host_name, &args.ifname, conf.mtu, pod_ns.as_fd());
        match &made {
            Err(e)
                if e.raw_os_error() == Some(link::EEXIST)
                    && matches!(link::by_name(&mut nl, &host_name), Ok(Some(_))) =>
            {
                host_name = random_veth_name();
            }
            _ => break,
        }
    }
    made.map_err(|e| {
        if e.raw_os_error() == Some(link::EEXIST) {
            fail(format!(
                "container veth name provided ({}) already exists",
                args.ifname
            ))
        } else {
            fail(format!("failed to make veth pair: {}", go_reason(&e)))
        }
    })?;
    let host = link::by_name(&mut nl, &host_name)
        .ok()
        .flatten()
        .ok_or_else(|| {
            fail(format!(
                "failed to lookup {}: Link not found",
                quote(&host_name)
            ))
        })?;
    link::set_flag(&mut nl, host.header.index, LinkFlags::Up, true).map_err(|e| {
        fail(format!(
            "failed to set {} up: {}",
            quote(&host_name),
            go_reason(&e)
        ))
    })?;
    let _ = sysctl(&format!("net/ipv6/conf/{host_name}/accept_ra"), "0");
    link::set_master(&mut nl, host.header.index, br.header.index).map_err(|e| {
        fail(format!(
            "failed to connect {} to bridge {}: {}",
            quote(&host_name),
            conf.bridge,
            go_reason(&e)
        ))
    })?;
    if conf.hairpin {
        link::set_hairpin(&mut nl, host.header.index).map_err(|e| {
            fail(format!(
                "failed to setup hairpin mode for {host_name}: {}",
                go_reason(&e)
            ))
        })?;
    }
    let ifname = args.ifname.clone();
    let container_mac = with_netns(&args.netns, || {
        let mut nl = Netlink::open().map_err(|e| go_reason(&e))?;
        link::by_name(&mut nl, &ifname)
            .map_err(|e| go_reason(&e))?
            .map(|l| link::mac(&l))
            .ok_or_else(|| format!("failed to lookup {}: Link not found", quote(&ifname)))
    })
    .map_err(|e| fail(e.message()))?;

    let mut result = Output {
        version: "1.0.0".into(),
        interfaces: vec![
            Interface {
                name: conf.bridge.clone(),
                mac: link::mac(&br),
                sandbox: String::new(),
            },
            Interface {
                name: host_name.clone(),
                mac: link::mac(&host),
                sandbox: String::new(),
            },
            Interface {
                name: args.ifname.clone(),
                mac: container_mac,
                sandbox: args.netns.clone(),
            },
        ],
        ..Output::default()
    };

    if conf.ipam_type.is_empty() {
        let ifname = args.ifname.clone();
        with_netns(&args.netns, move || {
            let mut nl = Netlink::open().map_err(|e| go_reason(&e))?;
            let l = link::by_name(&mut nl, &ifname)
                .map_err(|e| format!("failed to retrieve link: {}", go_reason(&e)))?
                .ok_or("failed to retrieve link: Link not found")?;
            link::set_flag(&mut nl, l.header.index, LinkFlags::Up, true)
                .map_err(|e| format!("failed to set {} up: {}", quote(&ifname), go_reason(&e)))
        })
        .map_err(|e| fail(e.message()))?;
    } else {
        let stdout = ipam(&conf.ipam_type, "ADD")?;
        let configured = layer3(
            args,
            conf,
            is_gw,
            &mut nl,
            &br,
            &host_name,
            &stdout,
            &mut result,
        );
        let masqueraded = configured.and_then(|()| {
            if !conf.ip_masq {
                return Ok(());
            }
            let addrs: Vec<_> = result
                .ips
                .iter()
                .filter_map(|ip| crate::ipmasq::parse_v4(&ip.address))
                .collect();
            let (chain, comment) = masq_names(args);
            crate::ipmasq::setup(&addrs, &chain, &comment, deadline).map_err(fail)
        });
        if let Err(e) = masqueraded {
            let _ = ipam(&conf.ipam_type, "DEL");
            return Err(e);
        }
    }
    let br = link::by_name(&mut nl, &conf.bridge)
        .ok()
        .flatten()
        .ok_or_else(|| {
            fail(format!(
                "could not lookup {}: Link not found",
                quote(&conf.bridge)
            ))
        })?;
    result.interfaces[0].mac = link::mac(&br);
    if !conf.dns.is_null() {
        result.dns = parse_dns(&conf.dns).map_err(fail)?;
    }
    result.print(&args.version)
}

/// The IPAM result applied: addresses and routes in the pod, gateways on the bridge.
#[expect(
    clippy::too_many_arguments,
    reason = "the state of cmdAdd at this point"
)]
fn layer3(
    args: &Invocation,
    conf: &NetConf,
    is_gw: bool,
    nl: &mut Netlink,
    br: &netlink_packet_route::link::LinkMessage,
    host_name: &str,
    ipam_stdout: &[u8],
    result: &mut Output,
) -> Result<(), Failure> {
    let value: Value = serde_json::from_slice(ipam_stdout)
        .map_err(|e| fail(format!("failed to parse the IPAM result: {e}")))?;
    let ipam_result = Output::parse(&value, &args.version).map_err(fail)?;
    result.ips = ipam_result.ips;
    result.routes = ipam_result.routes;
    if result.ips.is_empty() {
        return Err(fail("IPAM plugin returned missing IP config"));
    }
    // calcGateways.
    let mut gateways: Vec<Cidr> = Vec::new();
    let mut default_route = false;
    for ip in &mut result.ips {
        if !ip.v4 {
            return Err(fail(
                "the built-in bridge does not support IPv6 addresses yet",
            ));
        }
        ip.interface = Some(2);
        let address = Cidr::parse(&ip.address)
            .ok_or_else(|| fail(format!("invalid address {}", ip.address)))?;
        let IpAddr::V4(v4) = address.ip else {
            return Err(fail(
                "the built-in bridge does not support IPv6 addresses yet",
            ));
        };
        if ip.gateway.is_none() && is_gw {
            let network =
                u32::from(v4) & !(u32::MAX.checked_shr(u32::from(address.prefix)).unwrap_or(0));
            ip.gateway = Some(std::net::Ipv4Addr::from(network.wrapping_add(1)).to_string());
        }
        if conf.is_default_gw && !default_route {
            default_route = result
                .routes
                .iter()
                .any(|r| r.gw.is_some() && r.dst == "0.0.0.0/0");
            if !default_route {
                result.routes.push(Route {
                    dst: "0.0.0.0/0".into(),
                    v4: true,
                    gw: ip.gateway.clone(),
                });
                default_route = true;
            }
        }
        if is_gw && let Some(gw) = &ip.gateway {
            let gw: IpAddr = gw
                .parse()
                .map_err(|_| fail(format!("invalid gateway {gw}")))?;
            gateways.push(Cidr { ip: gw, ..address });
        }
    }

    // In the pod: sysctls, addresses, up, routes (ipam.ConfigureIface).
    configure_pod(args, conf.enable_dad, result).map_err(|e| fail(e.message()))?;

    // The bridge port must come up.
    for (i, pause) in [0u64, 50, 500, 1000, 1000].into_iter().enumerate() {
        std::thread::sleep(Duration::from_millis(pause));
        let host = link::by_name(nl, host_name)
            .map_err(|e| fail(go_reason(&e)))?
            .ok_or_else(|| fail("Link not found"))?;
        if link::oper_up(&host) {
            break;
        }
        if i == 4 {
            return Err(fail(format!(
                "bridge port in error state: {}",
                link::oper_state(&host)
            )));
        }
    }

    if is_gw && !gateways.is_empty() {
        for gw in &gateways {
            ensure_addr(nl, br, conf, *gw)
                .map_err(|e| fail(format!("failed to set bridge addr: {e}")))?;
        }
        enable_ip4_forward().map_err(|e| fail(format!("failed to enable forwarding: {e}")))?;
    }
    Ok(())
}

/// `ipam.ConfigureIface` in the pod, after the sysctls the Go plugin sets there.
fn configure_pod(args: &Invocation, enable_dad: bool, result: &Output) -> Result<(), NsError> {
    let ifname = args.ifname.clone();
    let ips = result.ips.clone();
    let routes = result.routes.clone();
    with_netns(&args.netns, move || {
        if enable_dad {
            let _ = sysctl(&format!("net/ipv6/conf/{ifname}/enhanced_dad"), "1");
            let _ = sysctl(&format!("net/ipv6/conf/{ifname}/accept_dad"), "1");
        } else {
            let _ = sysctl(&format!("net/ipv6/conf/{ifname}/accept_dad"), "0");
        }
        let _ = sysctl(&format!("net/ipv4/conf/{ifname}/arp_notify"), "1");
        let mut nl = Netlink::open().map_err(|e| go_reason(&e))?;
        let l = link::by_name(&mut nl, &ifname)
            .map_err(|e| format!("failed to lookup {}: {}", quote(&ifname), go_reason(&e)))?
            .ok_or_else(|| format!("failed to lookup {}: Link not found", quote(&ifname)))?;
        let mut v4gw: Option<IpAddr> = None;
        for ip in &ips {
            let cidr = Cidr::parse(&ip.address)
                .ok_or_else(|| format!("invalid address {}", ip.address))?;
            link::add_address(&mut nl, l.header.index, cidr).map_err(|e| {
                format!(
                    "failed to add IP addr {} to {}: {}",
                    ip.address,
                    quote(&ifname),
                    go_reason(&e)
                )
            })?;
            if v4gw.is_none() {
                v4gw = ip.gateway.as_deref().and_then(|g| g.parse().ok());
            }
        }
        link::set_flag(&mut nl, l.header.index, LinkFlags::Up, true)
            .map_err(|e| format!("failed to set {} UP: {}", quote(&ifname), go_reason(&e)))?;
        for route in &routes {
            let dst =
                Cidr::parse(&route.dst).ok_or_else(|| format!("invalid route {}", route.dst))?;
            let gw = route
                .gw
                .as_deref()
                .and_then(|g| g.parse().ok())
                .or(if dst.ip.is_ipv4() { v4gw } else { None });
            link::add_route(&mut nl, l.header.index, dst, gw).map_err(|e| {
                let via = gw.map_or_else(|| "<nil>".to_owned(), |g| g.to_string());
                format!(
                    "failed to add route '{} via {via} dev {ifname}': {}",
                    route.dst,
                    go_reason(&e)
                )
            })?;
        }
        Ok(())
    })
}

/// `ensureAddr` for IPv4: the gateway on the bridge, any other IPv4 address refused (or
/// removed with `forceAddress`), and the bridge's MAC pinned.
fn ensure_addr(
    nl: &mut Netlink,
    br: &netlink_packet_route::link::LinkMessage,
    conf: &NetConf,
    gw: Cidr,
) -> Result<(), String> {
    let wanted = gw.to_go_string();
    let existing = link::addresses(nl, br.header.index, true)
        .map_err(|e| format!("could not get list of IP addresses: {}", go_reason(&e)))?;
    for a in existing {
        if a.to_go_string() == wanted {
            return Ok(());
        }
        if conf.force_address {
            link::del_address(nl, br.header.index, a).map_err(|e| {
                format!(
                    "could not remove IP address from {}: {}",
                    quote(&conf.bridge),
                    go_reason(&e)
                )
            })?;
        } else {
            return Err(format!(
                "{} already has an IP address different from {wanted}",
                quote(&conf.bridge)
            ));
        }
    }
    match link::add_address(nl, br.header.index, gw) {
        Err(e) if e.raw_os_error() != Some(link::EEXIST) => {
            return Err(format!(
                "could not add IP address to {}: {}",
                quote(&conf.bridge),
                go_reason(&e)
            ));
        }
        _ => {}
    }
    link::pin_mac(nl, br).map_err(|e| format!("could not set bridge's mac: {}", go_reason(&e)))
}

fn fail(msg: impl Into<String>) -> Failure {
    Failure::internal(msg)
}

//! loopback: `lo` up on ADD, down on DEL, checked on CHECK, as Debian's plugins 1.1.1 do it.

use std::io;

use netlink_packet_route::RouteNetlinkMessage;
use netlink_packet_route::address::AddressMessage;
use netlink_packet_route::link::{LinkAttribute, LinkFlags, LinkMessage};

use crate::gojson::field;
use crate::host_local::{Cidr, go_reason};
use crate::netlink::Netlink;
use crate::netns::{NsError, with_netns};
use crate::result::{Interface, IpConfig, Output};
use crate::skel::{Command, Failure, Invocation};

const LO: &str = "lo";

/// Runs one command; what to print on success.
pub(crate) fn run(args: &Invocation) -> Result<Vec<u8>, Failure> {
    match args.command {
        Command::Add => add(args),
        Command::Del => {
            if args.netns.is_empty() {
                return Ok(Vec::new());
            }
            match with_netns(&args.netns, || set_up(false).map(drop)) {
                Ok(()) | Err(NsError::Missing(_)) => Ok(Vec::new()),
                Err(e) => Err(Failure::internal(e.message())),
            }
        }
        Command::Check => {
            let up = with_netns(&args.netns, || {
                let mut netlink = Netlink::open().map_err(|e| go_reason(&e))?;
                link(&mut netlink).map(|l| l.header.flags.contains(LinkFlags::Up))
            })
            .map_err(|e| Failure::internal(e.message()))?;
            if up {
                Ok(Vec::new())
            } else {
                Err(Failure::internal("loopback interface is down"))
            }
        }
        Command::Gc | Command::Status => Ok(Vec::new()),
    }
}

fn add(args: &Invocation) -> Result<Vec<u8>, Failure> {
    // parseNetConf: a prevResult is read in the configuration's version, and passed on as is.
    let prev = field(&args.config, "prevResult")
        .map(|prev| {
            if !prev.is_object() {
                return Err(Failure::internal(format!(
                    "failed to parse network config: json: cannot unmarshal {} into Go struct field NetConf.prevResult of type map[string]interface {{}}",
                    crate::gojson::kind(prev)
                )));
            }
            Output::parse(prev, &args.version).map_err(|e| {
                Failure::internal(format!("failed to parse prevResult: could not parse prevResult: {e}"))
            })
        })
        .transpose()?;
    let (v4, v6) =
        with_netns(&args.netns, || set_up(true)).map_err(|e| Failure::internal(e.message()))?;
    let result = if let Some(prev) = prev {
        prev
    } else {
        let address = |a: Option<Cidr>| {
            a.map(|c| IpConfig {
                interface: Some(0),
                address: c.to_go_string(),
                v4: c.ip.is_ipv4(),
                gateway: None,
            })
        };
        Output {
            version: args.version.clone(),
            interfaces: vec![Interface {
                name: LO.into(),
                mac: "00:00:00:00:00:00".into(),
                sandbox: args.netns.clone(),
            }],
            ips: address(v4).into_iter().chain(address(v6)).collect(),
            ..Output::default()
        }
    };
    result.print(&args.version)
}

/// Sets `lo` up or down; up, returns its first IPv4 and IPv6 addresses, refusing any that is
/// not a loopback address, as the Go plugin does.
fn set_up(up: bool) -> Result<(Option<Cidr>, Option<Cidr>), String> {
    let mut netlink = Netlink::open().map_err(|e| go_reason(&e))?;
    let lo = link(&mut netlink)?;
    let mut change = LinkMessage::default();
    change.header.index = lo.header.index;
    change.header.flags = if up {
        LinkFlags::Up
    } else {
        LinkFlags::empty()
    };
    change.header.change_mask = LinkFlags::Up;
    netlink
        .request(RouteNetlinkMessage::SetLink(change))
        .map_err(|e| go_reason(&e))?;
    if !up {
        return Ok((None, None));
    }
    let addresses = netlink
        .dump(RouteNetlinkMessage::GetAddress(AddressMessage::default()))
        .map_err(|e| go_reason(&e))?;
    let mut mine: Vec<Cidr> = addresses
        .iter()
        .filter_map(|reply| match reply {
            RouteNetlinkMessage::NewAddress(a) if a.header.index == lo.header.index => {
                crate::link::cidr_of(a)
            }
            _ => None,
        })
        .collect();
    // The Go plugin lists IPv4 before IPv6.
    mine.sort_by_key(|c| c.ip.is_ipv6());
    for c in &mine {
        if !c.ip.is_loopback() {
            return Err(format!(
                "loopback interface found with non-loopback address {}",
                crate::gojson::quote(&c.ip.to_string())
            ));
        }
    }
    let first = |v4: bool| mine.iter().copied().find(|c| c.ip.is_ipv4() == v4);
    Ok((first(true), first(false)))
}

/// The link `lo`, asked for by name.
fn link(netlink: &mut Netlink) -> Result<LinkMessage, String> {
    let mut request = LinkMessage::default();
    request
        .attributes
        .push(LinkAttribute::IfName(LO.to_owned()));
    let replies = netlink
        .request(RouteNetlinkMessage::GetLink(request))
        .map_err(|e| {
            if e.raw_os_error() == Some(19) {
                "Link not found".to_owned()
            } else {
                go_reason(&e)
            }
        })?;
    replies
        .into_iter()
        .find_map(|reply| match reply {
            RouteNetlinkMessage::NewLink(link) => Some(link),
            _ => None,
        })
        .ok_or_else(|| go_reason(&io::Error::other("the kernel sent no link")))
}

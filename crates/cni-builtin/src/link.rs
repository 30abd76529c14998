//! The rtnetlink operations the bridge plugin needs, on a [`Netlink`] socket of the namespace
//! they act in.

use std::io;
use std::net::IpAddr;
use std::os::fd::{AsRawFd as _, BorrowedFd};

use netlink_packet_route::address::{AddressAttribute, AddressMessage};
use netlink_packet_route::link::{
    InfoBridgePort, InfoData, InfoKind, InfoPortData, InfoPortKind, InfoVeth, LinkAttribute,
    LinkFlags, LinkInfo, LinkMessage, State,
};
use netlink_packet_route::route::{
    RouteAddress, RouteAttribute, RouteMessage, RouteProtocol, RouteScope, RouteType,
};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};

use crate::host_local::Cidr;
use crate::netlink::Netlink;

/// `ENODEV`: what the kernel answers for a link name it does not know.
const ENODEV: i32 = 19;
/// `EEXIST`.
pub(crate) const EEXIST: i32 = 17;

/// The link called `name`, `None` when there is none.
pub(crate) fn by_name(nl: &mut Netlink, name: &str) -> io::Result<Option<LinkMessage>> {
    let mut request = LinkMessage::default();
    request
        .attributes
        .push(LinkAttribute::IfName(name.to_owned()));
    match nl.request(RouteNetlinkMessage::GetLink(request)) {
        Ok(replies) => Ok(replies.into_iter().find_map(|r| match r {
            RouteNetlinkMessage::NewLink(link) => Some(link),
            _ => None,
        })),
        Err(e) if e.raw_os_error() == Some(ENODEV) => Ok(None),
        Err(e) => Err(e),
    }
}

/// A link's MAC address as Go's `net.HardwareAddr.String()` writes it.
pub(crate) fn mac(link: &LinkMessage) -> String {
    link.attributes
        .iter()
        .find_map(|a| match a {
            LinkAttribute::Address(bytes) => Some(
                bytes
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect::<Vec<_>>()
                    .join(":"),
            ),
            _ => None,
        })
        .unwrap_or_default()
}

fn mac_bytes(link: &LinkMessage) -> Option<Vec<u8>> {
    link.attributes.iter().find_map(|a| match a {
        LinkAttribute::Address(bytes) => Some(bytes.clone()),
        _ => None,
    })
}

/// Whether the link is a bridge.
pub(crate) fn is_bridge(link: &LinkMessage) -> bool {
    link.attributes.iter().any(|a| match a {
        LinkAttribute::LinkInfo(infos) => infos
            .iter()
            .any(|i| matches!(i, LinkInfo::Kind(InfoKind::Bridge))),
        _ => false,
    })
}

/// Whether the link's operational state is up.
pub(crate) fn oper_up(link: &LinkMessage) -> bool {
    link.attributes
        .iter()
        .any(|a| matches!(a, LinkAttribute::OperState(State::Up)))
}

/// The operational state as Go's netlink library names it.
pub(crate) fn oper_state(link: &LinkMessage) -> String {
    link.attributes
        .iter()
        .find_map(|a| match a {
            LinkAttribute::OperState(state) => Some(format!("{state:?}").to_lowercase()),
            _ => None,
        })
        .unwrap_or_else(|| "unknown".to_owned())
}

/// Creates bridge `name` (with `mtu` when not 0); an existing link of that name is fine.
pub(crate) fn add_bridge(nl: &mut Netlink, name: &str, mtu: u32) -> io::Result<()> {
    let mut message = LinkMessage::default();
    message
        .attributes
        .push(LinkAttribute::IfName(name.to_owned()));
    if mtu > 0 {
        message.attributes.push(LinkAttribute::Mtu(mtu));
    }
    message
        .attributes
        .push(LinkAttribute::LinkInfo(vec![LinkInfo::Kind(
            InfoKind::Bridge,
        )]));
    match nl.create(RouteNetlinkMessage::NewLink(message), true) {
        Err(e) if e.raw_os_error() == Some(EEXIST) => Ok(()),
        other => other,
    }
}

/// Creates veth `host` here with its peer `peer` directly in the namespace `peer_ns`.
pub(crate) fn add_veth(
    nl: &mut Netlink,
    host: &str,
    peer: &str,
    mtu: u32,
    peer_ns: BorrowedFd<'_>,
) -> io::Result<()> {
    let mut peer_message = LinkMessage::default();
    peer_message
        .attributes
        .push(LinkAttribute::IfName(peer.to_owned()));
    if mtu > 0 {
        peer_message.attributes.push(LinkAttribute::Mtu(mtu));
    }
    peer_message
        .attributes
        .push(LinkAttribute::NetNsFd(peer_ns.as_raw_fd()));
    // Go's netlink library gives both ends a queue length of 0 (the kernel's default is 1000).
    peer_message.attributes.push(LinkAttribute::TxQueueLen(0));
    let mut message = LinkMessage::default();
    message
        .attributes
        .push(LinkAttribute::IfName(host.to_owned()));
    if mtu > 0 {
        message.attributes.push(LinkAttribute::Mtu(mtu));
    }
    message.attributes.push(LinkAttribute::TxQueueLen(0));
    message.attributes.push(LinkAttribute::LinkInfo(vec![
        LinkInfo::Kind(InfoKind::Veth),
        LinkInfo::Data(InfoData::Veth(InfoVeth::Peer(peer_message))),
    ]));
    nl.create(RouteNetlinkMessage::NewLink(message), true)
}

fn set_link(nl: &mut Netlink, index: u32, change: impl FnOnce(&mut LinkMessage)) -> io::Result<()> {
    let mut message = LinkMessage::default();
    message.header.index = index;
    change(&mut message);
    nl.request(RouteNetlinkMessage::SetLink(message)).map(drop)
}

/// Sets `flag` on or off.
pub(crate) fn set_flag(nl: &mut Netlink, index: u32, flag: LinkFlags, on: bool) -> io::Result<()> {
    set_link(nl, index, |m| {
        m.header.flags = if on { flag } else { LinkFlags::empty() };
        m.header.change_mask = flag;
    })
}

/// Enslaves the link to `master`.
pub(crate) fn set_master(nl: &mut Netlink, index: u32, master: u32) -> io::Result<()> {
    set_link(nl, index, |m| {
        m.attributes.push(LinkAttribute::Controller(master));
    })
}

/// Turns hairpin mode on for a bridge port.
pub(crate) fn set_hairpin(nl: &mut Netlink, index: u32) -> io::Result<()> {
    let mut message = LinkMessage::default();
    message.header.index = index;
    message.attributes.push(LinkAttribute::LinkInfo(vec![
        LinkInfo::PortKind(InfoPortKind::Bridge),
        LinkInfo::PortData(InfoPortData::BridgePort(vec![InfoBridgePort::HairpinMode(
            true,
        )])),
    ]));
    nl.request(RouteNetlinkMessage::NewLink(message)).map(drop)
}

/// Sets the link's MAC address to the one it has, which pins a bridge's address (it would
/// otherwise follow its ports').
pub(crate) fn pin_mac(nl: &mut Netlink, link: &LinkMessage) -> io::Result<()> {
    let Some(bytes) = mac_bytes(link) else {
        return Ok(());
    };
    set_link(nl, link.header.index, |m| {
        m.attributes.push(LinkAttribute::Address(bytes));
    })
}

/// Deletes the link.
pub(crate) fn delete(nl: &mut Netlink, index: u32) -> io::Result<()> {
    let mut message = LinkMessage::default();
    message.header.index = index;
    nl.request(RouteNetlinkMessage::DelLink(message)).map(drop)
}

/// The addresses on link `index` (`v4`: IPv4 only, else all), in the kernel's order.
pub(crate) fn addresses(nl: &mut Netlink, index: u32, v4_only: bool) -> io::Result<Vec<Cidr>> {
    let mut request = AddressMessage::default();
    if v4_only {
        request.header.family = AddressFamily::Inet;
    }
    let replies = nl.dump(RouteNetlinkMessage::GetAddress(request))?;
    Ok(replies
        .iter()
        .filter_map(|r| match r {
            RouteNetlinkMessage::NewAddress(a) if a.header.index == index => cidr_of(a),
            _ => None,
        })
        .filter(|c| !v4_only || c.ip.is_ipv4())
        .collect())
}

/// An address message as the address and prefix Go's netlink library reads (`IFA_LOCAL`,
/// else `IFA_ADDRESS`).
pub(crate) fn cidr_of(message: &AddressMessage) -> Option<Cidr> {
    let pick = |want_local: bool| {
        message.attributes.iter().find_map(|a| match a {
            AddressAttribute::Local(ip) if want_local => Some(*ip),
            AddressAttribute::Address(ip) if !want_local => Some(*ip),
            _ => None,
        })
    };
    let ip: IpAddr = pick(true).or_else(|| pick(false))?;
    Some(Cidr {
        ip,
        prefix: message.header.prefix_len,
        v6_mask: ip.is_ipv6(),
    })
}

fn address_message(index: u32, cidr: Cidr) -> AddressMessage {
    let mut message = AddressMessage::default();
    message.header.index = index;
    message.header.prefix_len = cidr.prefix;
    message.header.family = if cidr.ip.is_ipv4() {
        AddressFamily::Inet
    } else {
        AddressFamily::Inet6
    };
    message.attributes.push(AddressAttribute::Local(cidr.ip));
    message.attributes.push(AddressAttribute::Address(cidr.ip));
    if let IpAddr::V4(v4) = cidr.ip
        && cidr.prefix < 31
    {
        let host = u32::MAX >> cidr.prefix;
        message
            .attributes
            .push(AddressAttribute::Broadcast((u32::from(v4) | host).into()));
    }
    message
}

/// Adds an address (with its broadcast address for IPv4, as Go's netlink library does).
pub(crate) fn add_address(nl: &mut Netlink, index: u32, cidr: Cidr) -> io::Result<()> {
    nl.create(
        RouteNetlinkMessage::NewAddress(address_message(index, cidr)),
        true,
    )
}

/// Removes an address.
pub(crate) fn del_address(nl: &mut Netlink, index: u32, cidr: Cidr) -> io::Result<()> {
    nl.request(RouteNetlinkMessage::DelAddress(address_message(
        index, cidr,
    )))
    .map(drop)
}

/// Adds a route to `dst` through link `index`, via `gw` when given.
pub(crate) fn add_route(
    nl: &mut Netlink,
    index: u32,
    dst: Cidr,
    gw: Option<IpAddr>,
) -> io::Result<()> {
    let mut message = RouteMessage::default();
    message.header.address_family = if dst.ip.is_ipv4() {
        AddressFamily::Inet
    } else {
        AddressFamily::Inet6
    };
    message.header.destination_prefix_length = dst.prefix;
    message.header.table = 254;
    message.header.protocol = RouteProtocol::Boot;
    // Go's netlink library leaves the scope at universe, gateway or not.
    message.header.scope = RouteScope::Universe;
    message.header.kind = RouteType::Unicast;
    let address = |ip: IpAddr| match ip {
        IpAddr::V4(v4) => RouteAddress::Inet(v4),
        IpAddr::V6(v6) => RouteAddress::Inet6(v6),
    };
    if dst.prefix > 0 {
        message
            .attributes
            .push(RouteAttribute::Destination(address(dst.ip)));
    }
    if let Some(gw) = gw {
        message
            .attributes
            .push(RouteAttribute::Gateway(address(gw)));
    }
    message.attributes.push(RouteAttribute::Oif(index));
    nl.create(RouteNetlinkMessage::NewRoute(message), false)
}

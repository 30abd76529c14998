//! Interfaces inside a namespace: bring loopback up, list interfaces and addresses, over rtnetlink
//! as `ip link` and `ip addr` do.
//!
//! Everything here runs on a thread that already joined the namespace: the netlink socket opened
//! there talks to that namespace's kernel tables.

use std::io;
use std::net::IpAddr;

use ipnet::IpNet;
use netlink_packet_route::RouteNetlinkMessage;
use netlink_packet_route::address::{AddressAttribute, AddressMessage};
use netlink_packet_route::link::{LinkAttribute, LinkFlags, LinkMessage};

use super::netlink::Netlink;

/// One network interface as seen from inside a namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct InterfaceInfo {
    /// The interface name, such as `eth0`.
    pub name: String,
    /// The interface index inside its namespace.
    pub index: u32,
    /// The hardware address in lower-case `aa:bb:cc:dd:ee:ff` form, when the link has a 6-byte one
    /// (loopback reports all zeros; tun and wireguard links have none).
    pub mac: Option<String>,
    /// The MTU, when the kernel reports one.
    pub mtu: Option<u32>,
    /// Whether the interface is administratively up (`IFF_UP`).
    pub up: bool,
    /// Whether this is a loopback interface (`IFF_LOOPBACK`).
    pub loopback: bool,
    /// Every IPv4 and IPv6 address with its prefix length, in the order the kernel lists them.
    pub addresses: Vec<IpNet>,
}

impl InterfaceInfo {
    fn new(name: String) -> Self {
        Self {
            name,
            index: 0,
            mac: None,
            mtu: None,
            up: false,
            loopback: false,
            addresses: Vec::new(),
        }
    }
}

/// The loopback interface every network namespace is born with.
const LOOPBACK: &str = "lo";

/// Sets `lo` up (`IFF_UP`, through `RTM_NEWLINK`) unless it is already up.
pub(super) fn bring_up_loopback() -> io::Result<()> {
    let mut netlink = Netlink::open()?;
    let lo = link_by_name(&mut netlink, LOOPBACK)?;
    if lo.header.flags.contains(LinkFlags::Up) {
        return Ok(());
    }
    let mut change = LinkMessage::default();
    change.header.index = lo.header.index;
    change.header.flags = LinkFlags::Up;
    change.header.change_mask = LinkFlags::Up;
    netlink
        .request(RouteNetlinkMessage::SetLink(change))
        .map(drop)
        .map_err(|e| about_interface(LOOPBACK, "set it up", e))
}

/// Every interface of the calling thread's namespace, ordered by index.
pub(super) fn read_interfaces() -> io::Result<Vec<InterfaceInfo>> {
    let mut netlink = Netlink::open()?;
    let mut list: Vec<InterfaceInfo> = netlink
        .dump(RouteNetlinkMessage::GetLink(LinkMessage::default()))?
        .iter()
        .filter_map(|reply| match reply {
            RouteNetlinkMessage::NewLink(link) => interface_of(link),
            _ => None,
        })
        .collect();
    for reply in netlink.dump(RouteNetlinkMessage::GetAddress(AddressMessage::default()))? {
        let RouteNetlinkMessage::NewAddress(address) = reply else {
            continue;
        };
        let index = address.header.index;
        if let (Some(info), Some(net)) = (
            list.iter_mut().find(|i| i.index == index),
            network_of(&address),
        ) {
            info.addresses.push(net);
        }
    }
    list.sort_by_key(|i| i.index);
    Ok(list)
}

/// The link named `name`, asked for by name (`RTM_GETLINK` with `IFLA_IFNAME`).
fn link_by_name(netlink: &mut Netlink, name: &str) -> io::Result<LinkMessage> {
    check_if_name(name)?;
    let mut request = LinkMessage::default();
    request
        .attributes
        .push(LinkAttribute::IfName(name.to_owned()));
    let replies = netlink
        .request(RouteNetlinkMessage::GetLink(request))
        .map_err(|e| about_interface(name, "find it", e))?;
    replies
        .into_iter()
        .find_map(|reply| match reply {
            RouteNetlinkMessage::NewLink(link) => Some(link),
            _ => None,
        })
        .ok_or_else(|| {
            about_interface(
                name,
                "find it",
                io::Error::new(io::ErrorKind::InvalidData, "the kernel sent no link"),
            )
        })
}

/// What a link message says about its interface; `None` for a link without a name.
fn interface_of(link: &LinkMessage) -> Option<InterfaceInfo> {
    let name = link
        .attributes
        .iter()
        .find_map(|attribute| match attribute {
            LinkAttribute::IfName(name) => Some(name.clone()),
            _ => None,
        })?;
    let mut info = InterfaceInfo::new(name);
    info.index = link.header.index;
    info.up = link.header.flags.contains(LinkFlags::Up);
    info.loopback = link.header.flags.contains(LinkFlags::Loopback);
    for attribute in &link.attributes {
        match attribute {
            LinkAttribute::Address(mac) if mac.len() == 6 => info.mac = Some(format_mac(mac)),
            LinkAttribute::Mtu(mtu) => info.mtu = Some(*mtu),
            _ => {}
        }
    }
    Some(info)
}

/// An address message as a network. The local address comes first: on a point-to-point link
/// `IFA_ADDRESS` is the peer's (getifaddrs reads it the same way). A prefix too long for the
/// family, which the kernel never sends, gives a host network.
fn network_of(address: &AddressMessage) -> Option<IpNet> {
    let find = |want_local: bool| {
        address
            .attributes
            .iter()
            .find_map(|attribute| match attribute {
                AddressAttribute::Local(ip) if want_local => Some(*ip),
                AddressAttribute::Address(ip) if !want_local => Some(*ip),
                _ => None,
            })
    };
    let ip: IpAddr = find(true).or_else(|| find(false))?;
    Some(IpNet::new(ip, address.header.prefix_len).unwrap_or_else(|_| IpNet::from(ip)))
}

fn format_mac(mac: &[u8]) -> String {
    mac.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// Refuses a name the kernel could not hold before asking it: empty, longer than
/// `IFNAMSIZ - 1` bytes or with a NUL byte.
fn check_if_name(name: &str) -> io::Result<()> {
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes.len() >= libc::IFNAMSIZ || bytes.contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("invalid interface name {name:?}"),
        ));
    }
    Ok(())
}

/// A netlink error about one interface, with its name and what was tried, keeping the kind and
/// the OS code's text.
fn about_interface(name: &str, what: &str, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("interface {name}: cannot {what}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use netlink_packet_route::AddressFamily;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn address(prefix_len: u8, attributes: Vec<AddressAttribute>) -> AddressMessage {
        let mut message = AddressMessage::default();
        message.header.family = AddressFamily::Inet;
        message.header.prefix_len = prefix_len;
        message.attributes = attributes;
        message
    }

    #[test]
    fn address_messages_become_networks() {
        let v4 = |a, b, c, d| IpAddr::V4(Ipv4Addr::new(a, b, c, d));
        let cases = [
            (
                24,
                vec![AddressAttribute::Address(v4(10, 1, 2, 3))],
                Some("10.1.2.3/24"),
            ),
            (
                8,
                vec![AddressAttribute::Local(v4(127, 0, 0, 1))],
                Some("127.0.0.1/8"),
            ),
            // point-to-point: IFA_ADDRESS is the peer, IFA_LOCAL ours, whatever the order
            (
                32,
                vec![
                    AddressAttribute::Address(v4(10, 0, 0, 9)),
                    AddressAttribute::Local(v4(10, 0, 0, 1)),
                ],
                Some("10.0.0.1/32"),
            ),
            (
                128,
                vec![AddressAttribute::Address(IpAddr::V6(Ipv6Addr::LOCALHOST))],
                Some("::1/128"),
            ),
            (
                64,
                vec![AddressAttribute::Address("fe80::1".parse().expect("ipv6"))],
                Some("fe80::1/64"),
            ),
            // a prefix the family cannot have: the address as a host
            (
                40,
                vec![AddressAttribute::Address(v4(10, 1, 2, 3))],
                Some("10.1.2.3/32"),
            ),
            (24, vec![AddressAttribute::Label("eth0".into())], None),
        ];
        for (prefix, attributes, want) in cases {
            let message = address(prefix, attributes);
            let got = network_of(&message).map(|n| n.to_string());
            assert_eq!(got.as_deref(), want, "{message:?}");
        }
    }

    #[test]
    fn link_messages_give_name_index_state_mac_and_mtu() {
        let mut link = LinkMessage::default();
        link.header.index = 3;
        link.header.flags = LinkFlags::Up | LinkFlags::Broadcast;
        link.attributes = vec![
            LinkAttribute::IfName("eth0".into()),
            LinkAttribute::Address(vec![0x02, 0xAB, 0, 0x10, 0xff, 1]),
            LinkAttribute::Mtu(1400),
        ];
        let info = interface_of(&link).expect("named");
        assert_eq!(info.name, "eth0");
        assert_eq!(info.index, 3);
        assert_eq!(info.mac.as_deref(), Some("02:ab:00:10:ff:01"));
        assert_eq!(info.mtu, Some(1400));
        assert!(info.up && !info.loopback);
        assert!(info.addresses.is_empty());

        // a tun link has no hardware address; a link without a name is skipped
        link.header.flags = LinkFlags::Loopback;
        link.attributes = vec![LinkAttribute::IfName("tun0".into())];
        let info = interface_of(&link).expect("named");
        assert!(info.mac.is_none() && info.mtu.is_none() && !info.up && info.loopback);
        link.attributes.clear();
        assert!(interface_of(&link).is_none());
    }

    #[test]
    fn interface_names_are_checked_before_asking_the_kernel() {
        for bad in ["", "name-that-is-far-too-long", "a\0b"] {
            let err = check_if_name(bad).expect_err(bad);
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{bad:?}");
        }
        check_if_name(LOOPBACK).expect("lo");
        check_if_name("fifteen-chars-x").expect("IFNAMSIZ - 1 bytes");
    }

    #[test]
    fn errors_about_an_interface_name_it_and_keep_the_os_error() {
        let e = about_interface("lo", "find it", io::Error::from_raw_os_error(libc::ENODEV));
        assert_eq!(
            e.to_string(),
            "interface lo: cannot find it: No such device (os error 19)"
        );
    }

    #[test]
    fn our_own_namespace_lists_loopback() {
        // Reading (not changing) the test process's own namespace needs no privileges.
        let list = read_interfaces().expect("interfaces");
        let lo = list
            .iter()
            .find(|i| i.loopback)
            .expect("a loopback interface");
        assert!(lo.index > 0);
        assert!(lo.mtu.is_some_and(|mtu| mtu > 0));
        let indexes: Vec<u32> = list.iter().map(|i| i.index).collect();
        assert!(indexes.is_sorted(), "{indexes:?}");
    }
}

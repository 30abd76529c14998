//! Interfaces inside a namespace: bring loopback up, list interfaces and addresses.
//!
//! Everything here runs on a thread that already joined the namespace: sockets, netlink and ioctls
//! made there act on that namespace.

use std::io;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, OwnedFd};

use ipnet::IpNet;
use nix::errno::Errno;
use nix::ifaddrs::getifaddrs;
use nix::net::if_::{InterfaceFlags, if_nametoindex};
use nix::sys::socket::{AddressFamily, SockFlag, SockType, SockaddrStorage, socket};

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

/// Sets `IFF_UP` on `lo` unless it is already up.
pub(super) fn bring_up_loopback() -> io::Result<()> {
    let sock = ioctl_socket()?;
    let mut req = ifreq_for("lo")?;
    ioctl_ifreq(&sock, libc::SIOCGIFFLAGS, &mut req)?;
    // SAFETY: SIOCGIFFLAGS succeeded, so the kernel stored the flags in this union member.
    let flags = unsafe { req.ifr_ifru.ifru_flags };
    let up = libc::IFF_UP as libc::c_short;
    if flags & up != 0 {
        return Ok(());
    }
    req.ifr_ifru.ifru_flags = flags | up;
    ioctl_ifreq(&sock, libc::SIOCSIFFLAGS, &mut req)
}

/// Every interface of the calling thread's namespace, ordered by index.
pub(super) fn read_interfaces() -> io::Result<Vec<InterfaceInfo>> {
    let mut list: Vec<InterfaceInfo> = Vec::new();
    for entry in getifaddrs()? {
        let pos = if let Some(pos) = list.iter().position(|i| i.name == entry.interface_name) {
            pos
        } else {
            list.push(InterfaceInfo::new(entry.interface_name.clone()));
            list.len() - 1
        };
        let info = &mut list[pos];
        info.up = entry.flags.contains(InterfaceFlags::IFF_UP);
        info.loopback = entry.flags.contains(InterfaceFlags::IFF_LOOPBACK);
        let Some(addr) = entry.address else { continue };
        if let Some(link) = addr.as_link_addr() {
            info.index = u32::try_from(link.ifindex()).unwrap_or(0);
            if link.halen() == 6 {
                info.mac = link.addr().map(|mac| format_mac(&mac));
            }
        } else if let Some(net) = ip_net(&addr, entry.netmask.as_ref()) {
            info.addresses.push(net);
        }
    }
    let sock = ioctl_socket()?;
    for info in &mut list {
        if info.index == 0 {
            info.index = if_nametoindex(info.name.as_str())?;
        }
        info.mtu = mtu(&sock, &info.name).ok();
    }
    list.sort_by_key(|i| i.index);
    Ok(list)
}

/// An address and its netmask as a network; a missing or non-contiguous mask means a host route.
fn ip_net(addr: &SockaddrStorage, mask: Option<&SockaddrStorage>) -> Option<IpNet> {
    let (ip, prefix) = if let Some(v4) = addr.as_sockaddr_in() {
        let prefix = mask
            .and_then(SockaddrStorage::as_sockaddr_in)
            .and_then(|m| ipnet::ipv4_mask_to_prefix(m.ip()).ok())
            .unwrap_or(32);
        (IpAddr::V4(v4.ip()), prefix)
    } else if let Some(v6) = addr.as_sockaddr_in6() {
        let prefix = mask
            .and_then(SockaddrStorage::as_sockaddr_in6)
            .and_then(|m| ipnet::ipv6_mask_to_prefix(m.ip()).ok())
            .unwrap_or(128);
        (IpAddr::V6(v6.ip()), prefix)
    } else {
        return None;
    };
    IpNet::new(ip, prefix).ok()
}

fn format_mac(mac: &[u8]) -> String {
    mac.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

fn mtu(sock: &OwnedFd, name: &str) -> io::Result<u32> {
    let mut req = ifreq_for(name)?;
    ioctl_ifreq(sock, libc::SIOCGIFMTU, &mut req)?;
    // SAFETY: SIOCGIFMTU succeeded, so the kernel stored the MTU in this union member.
    let mtu = unsafe { req.ifr_ifru.ifru_mtu };
    u32::try_from(mtu).map_err(|_| io::Error::other("negative MTU"))
}

/// A datagram socket in the calling thread's namespace: the handle interface ioctls go through.
fn ioctl_socket() -> io::Result<OwnedFd> {
    Ok(socket(
        AddressFamily::Inet,
        SockType::Datagram,
        SockFlag::SOCK_CLOEXEC,
        None,
    )?)
}

fn ifreq_for(name: &str) -> io::Result<libc::ifreq> {
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes.len() >= libc::IFNAMSIZ || bytes.contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("invalid interface name {name:?}"),
        ));
    }
    // SAFETY: ifreq is plain data (a byte array and a union of integers, addresses and a pointer);
    // all zeros is a valid value for each.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(bytes) {
        *dst = *src as libc::c_char;
    }
    Ok(req)
}

/// Issues one of the `SIOC[GS]IF*` requests that read or write a single `ifreq`.
fn ioctl_ifreq(sock: &OwnedFd, request: libc::Ioctl, req: &mut libc::ifreq) -> io::Result<()> {
    // SAFETY: the requests used here (flags, MTU) access only the ifreq we own for the whole call,
    // and `sock` stays open.
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), request, std::ptr::from_mut(req)) };
    Errno::result(rc).map(drop).map_err(io::Error::from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr, SocketAddrV4, SocketAddrV6};

    fn v4(a: [u8; 4]) -> SockaddrStorage {
        SockaddrStorage::from(SocketAddrV4::new(Ipv4Addr::from(a), 0))
    }

    fn v6(a: Ipv6Addr) -> SockaddrStorage {
        SockaddrStorage::from(SocketAddrV6::new(a, 0, 0, 0))
    }

    #[test]
    fn addresses_and_masks_become_networks() {
        let cases = [
            (
                v4([10, 1, 2, 3]),
                Some(v4([255, 255, 255, 0])),
                Some("10.1.2.3/24"),
            ),
            (
                v4([127, 0, 0, 1]),
                Some(v4([255, 0, 0, 0])),
                Some("127.0.0.1/8"),
            ),
            (v4([10, 1, 2, 3]), None, Some("10.1.2.3/32")),
            // a non-contiguous mask cannot be a prefix: keep the address as a host
            (
                v4([10, 1, 2, 3]),
                Some(v4([255, 0, 255, 0])),
                Some("10.1.2.3/32"),
            ),
            (
                v6(Ipv6Addr::LOCALHOST),
                Some(v6(Ipv6Addr::from(u128::MAX))),
                Some("::1/128"),
            ),
            (
                v6("fe80::1".parse().expect("ipv6")),
                Some(v6("ffff:ffff:ffff:ffff::".parse().expect("ipv6"))),
                Some("fe80::1/64"),
            ),
        ];
        for (addr, mask, want) in cases {
            let got = ip_net(&addr, mask.as_ref()).map(|n| n.to_string());
            assert_eq!(got.as_deref(), want, "{addr:?} {mask:?}");
        }
    }

    #[test]
    fn mac_addresses_are_lower_case_hex_pairs() {
        assert_eq!(
            format_mac(&[0x02, 0xAB, 0, 0x10, 0xff, 1]),
            "02:ab:00:10:ff:01"
        );
    }

    #[test]
    fn interface_names_are_checked_before_any_ioctl() {
        for bad in ["", "name-that-is-far-too-long", "a\0b"] {
            let err = ifreq_for(bad).expect_err(bad);
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{bad:?}");
        }
        let req = ifreq_for("lo").expect("lo");
        assert_eq!(
            req.ifr_name[..3],
            [b'l' as libc::c_char, b'o' as libc::c_char, 0]
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
    }
}

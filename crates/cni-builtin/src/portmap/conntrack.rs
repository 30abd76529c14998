//! Go's `utils.DeleteConntrackEntriesForDstPort` for UDP: after an ADD, conntrack entries of
//! flows to a host port that were set up before the DNAT existed would keep sending that
//! traffic where it went before, so they are deleted. Over ctnetlink (`NETLINK_NETFILTER`): one
//! dump of the table of the family, one delete per entry whose original tuple is UDP to the
//! port, in the calling thread's namespace.

use std::io;
use std::time::Duration;

use netlink_sys::{Socket, SocketAddr, protocols::NETLINK_NETFILTER};

const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_ACK: u16 = 4;
const NLM_F_DUMP: u16 = 0x300;
/// `NFNL_SUBSYS_CTNETLINK << 8` and its messages.
const CT_NEW: u16 = 0x100;
const CT_GET: u16 = 0x101;
const CT_DELETE: u16 = 0x102;
const CTA_TUPLE_ORIG: u16 = 1;
const CTA_ZONE: u16 = 18;
const CTA_TUPLE_PROTO: u16 = 2;
const CTA_PROTO_NUM: u16 = 1;
const CTA_PROTO_DST_PORT: u16 = 3;
const NLA_TYPE_MASK: u16 = 0x3fff;
const IPPROTO_UDP: u8 = 17;
const AF_INET: u8 = 2;
const AF_INET6: u8 = 10;
const ENOENT: i32 = 2;
const RECEIVE_TIMEOUT: Duration = Duration::from_secs(5);

/// Deletes the UDP entries to `port` of one family; how many it deleted.
pub(crate) fn delete_udp_to_port(port: u16, v6: bool) -> io::Result<usize> {
    let family = if v6 { AF_INET6 } else { AF_INET };
    let mut socket = Socket::new(NETLINK_NETFILTER)?;
    socket.bind_auto()?;
    socket.connect(&SocketAddr::new(0, 0))?;
    {
        use std::os::fd::AsFd as _;
        rustix::net::sockopt::set_socket_timeout(
            socket.as_fd(),
            rustix::net::sockopt::Timeout::Recv,
            Some(RECEIVE_TIMEOUT),
        )
        .map_err(io::Error::from)?;
    }
    send(&socket, CT_GET, NLM_F_REQUEST | NLM_F_DUMP, 1, family, &[])?;
    let mut stale = Vec::new();
    exchange(&mut socket, 1, |kind, body| {
        if kind == CT_NEW
            && let Some(attrs) = body.get(4..)
            && let Some(doomed) = matching(attrs, port)
        {
            stale.push(doomed);
        }
    })?;
    let mut deleted = 0;
    for (seq, attrs) in (2u32..).zip(&stale) {
        send(
            &socket,
            CT_DELETE,
            NLM_F_REQUEST | NLM_F_ACK,
            seq,
            family,
            attrs,
        )?;
        match exchange(&mut socket, seq, |_, _| {}) {
            Ok(()) => deleted += 1,
            // Gone meanwhile (it timed out, or another run deleted it).
            Err(e) if e.raw_os_error() == Some(ENOENT) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(deleted)
}

/// The attributes that name an entry for deletion (its original tuple and zone) when its
/// original tuple is UDP to `port`.
fn matching(attrs: &[u8], port: u16) -> Option<Vec<u8>> {
    let mut tuple = None;
    let mut zone = None;
    for (kind, whole, payload) in attributes(attrs) {
        match kind {
            CTA_TUPLE_ORIG => tuple = Some((whole, payload)),
            CTA_ZONE => zone = Some(whole),
            _ => {}
        }
    }
    let (whole, payload) = tuple?;
    let (_, _, proto) = attributes(payload).find(|(k, _, _)| *k == CTA_TUPLE_PROTO)?;
    let mut number = None;
    let mut dst_port = None;
    for (kind, _, value) in attributes(proto) {
        match kind {
            CTA_PROTO_NUM => number = value.first().copied(),
            CTA_PROTO_DST_PORT => {
                dst_port = value.get(..2).map(|b| u16::from_be_bytes([b[0], b[1]]));
            }
            _ => {}
        }
    }
    if number != Some(IPPROTO_UDP) || dst_port != Some(port) {
        return None;
    }
    let mut out = pad(whole);
    if let Some(zone) = zone {
        out.extend(pad(zone));
    }
    Some(out)
}

fn pad(bytes: &[u8]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    out.resize(bytes.len().next_multiple_of(4), 0);
    out
}

/// The netlink attributes in `bytes`: type (flags masked off), the whole attribute, its
/// payload. Stops at the first malformed one.
fn attributes(bytes: &[u8]) -> impl Iterator<Item = (u16, &[u8], &[u8])> {
    let mut rest = bytes;
    std::iter::from_fn(move || {
        let length = usize::from(u16::from_ne_bytes([*rest.first()?, *rest.get(1)?]));
        let kind = u16::from_ne_bytes([*rest.get(2)?, *rest.get(3)?]) & NLA_TYPE_MASK;
        if length < 4 {
            return None;
        }
        let whole = rest.get(..length)?;
        rest = rest.get(length.next_multiple_of(4)..).unwrap_or_default();
        Some((kind, whole, &whole[4..]))
    })
}

fn send(
    socket: &Socket,
    kind: u16,
    flags: u16,
    seq: u32,
    family: u8,
    attrs: &[u8],
) -> io::Result<()> {
    let length = 16 + 4 + attrs.len();
    let mut message = Vec::with_capacity(length);
    message.extend(
        u32::try_from(length)
            .map_err(io::Error::other)?
            .to_ne_bytes(),
    );
    message.extend(kind.to_ne_bytes());
    message.extend(flags.to_ne_bytes());
    message.extend(seq.to_ne_bytes());
    message.extend(0u32.to_ne_bytes());
    // nfgenmsg: family, NFNETLINK_V0, resource id 0.
    message.extend([family, 0, 0, 0]);
    message.extend(attrs);
    socket.send(&message, 0).map(drop)
}

/// Reads the answers to request `seq` until it is done (or acknowledged), giving each message
/// of the answer to `each`.
fn exchange(socket: &mut Socket, seq: u32, mut each: impl FnMut(u16, &[u8])) -> io::Result<()> {
    loop {
        let (datagram, _) = socket.recv_from_full()?;
        let mut rest = datagram.as_slice();
        while rest.len() >= 16 {
            let length = u32::from_ne_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
            let kind = u16::from_ne_bytes([rest[4], rest[5]]);
            let message_seq = u32::from_ne_bytes([rest[8], rest[9], rest[10], rest[11]]);
            if length < 16 || length > rest.len() {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "malformed netlink message",
                ));
            }
            let body = &rest[16..length];
            rest = rest.get(length.next_multiple_of(4)..).unwrap_or_default();
            if message_seq != seq {
                continue;
            }
            match kind {
                NLMSG_DONE => return Ok(()),
                NLMSG_ERROR => {
                    let code = body
                        .get(..4)
                        .map_or(0, |b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
                    return if code == 0 {
                        Ok(())
                    } else {
                        Err(io::Error::from_raw_os_error(-code))
                    };
                }
                _ => each(kind, body),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr(kind: u16, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend(u16::try_from(4 + payload.len()).unwrap().to_ne_bytes());
        out.extend(kind.to_ne_bytes());
        out.extend(payload);
        pad(&out)
    }

    #[test]
    fn udp_entries_to_the_port_match() {
        let proto = |number: u8, port: u16| {
            let mut inner = attr(CTA_PROTO_NUM, &[number]);
            inner.extend(attr(CTA_PROTO_DST_PORT, &port.to_be_bytes()));
            attr(
                CTA_TUPLE_ORIG | 0x8000,
                &attr(CTA_TUPLE_PROTO | 0x8000, &inner),
            )
        };
        let udp = proto(IPPROTO_UDP, 5353);
        assert_eq!(matching(&udp, 5353), Some(udp.clone()));
        assert_eq!(matching(&udp, 53), None);
        assert_eq!(matching(&proto(6, 5353), 5353), None);
        let mut zoned = udp.clone();
        zoned.extend(attr(CTA_ZONE, &7u16.to_be_bytes()));
        assert_eq!(matching(&zoned, 5353), Some(zoned.clone()));
        // Garbage never panics.
        assert_eq!(matching(&[1, 0, 1], 5353), None);
        assert_eq!(matching(&[200, 0, 1, 0, 0], 5353), None);
    }
}

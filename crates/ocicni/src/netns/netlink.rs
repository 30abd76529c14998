//! A synchronous rtnetlink socket: one request, its whole answer.
//!
//! The socket belongs to the network namespace of the thread that opens it, so it is opened on the
//! namespace thread, after `setns`, and used there. No async runtime runs on that thread: a plain
//! blocking socket is all it needs.

use std::io;

use netlink_packet_core::{
    NLM_F_ACK, NLM_F_DUMP, NLM_F_REQUEST, NetlinkHeader, NetlinkMessage, NetlinkPayload,
};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_sys::{Socket, SocketAddr, protocols::NETLINK_ROUTE};

/// An rtnetlink socket connected to the kernel.
pub(super) struct Netlink {
    socket: Socket,
    sequence: u32,
}

impl Netlink {
    /// Opens a socket in the calling thread's network namespace.
    pub(super) fn open() -> io::Result<Netlink> {
        let mut socket = Socket::new(NETLINK_ROUTE)?;
        socket.bind_auto()?;
        socket.connect(&SocketAddr::new(0, 0))?;
        Ok(Netlink {
            socket,
            sequence: 0,
        })
    }

    /// Every message of a dump (`RTM_GETLINK`, `RTM_GETADDR`, ...), in the kernel's order.
    pub(super) fn dump(
        &mut self,
        request: RouteNetlinkMessage,
    ) -> io::Result<Vec<RouteNetlinkMessage>> {
        self.exchange(request, NLM_F_DUMP)
    }

    /// Sends a request that is not a dump and waits for the kernel's acknowledgement; returns
    /// the replies that came before it (one for a `GET`, none for a change).
    pub(super) fn request(
        &mut self,
        request: RouteNetlinkMessage,
    ) -> io::Result<Vec<RouteNetlinkMessage>> {
        self.exchange(request, NLM_F_ACK)
    }

    fn exchange(
        &mut self,
        request: RouteNetlinkMessage,
        flags: u16,
    ) -> io::Result<Vec<RouteNetlinkMessage>> {
        self.sequence = self.sequence.wrapping_add(1);
        let mut packet = NetlinkMessage::new(NetlinkHeader::default(), request.into());
        packet.header.flags = NLM_F_REQUEST | flags;
        packet.header.sequence_number = self.sequence;
        packet.finalize();
        let mut bytes = vec![0; packet.buffer_len()];
        packet.serialize(&mut bytes);
        self.socket.send(&bytes, 0)?;

        let mut replies = Vec::new();
        loop {
            let (datagram, _) = self.socket.recv_from_full()?;
            for message in split(&datagram)? {
                if message.header.sequence_number != self.sequence {
                    continue;
                }
                match message.payload {
                    NetlinkPayload::InnerMessage(reply) => replies.push(reply),
                    // The end of a dump; a negative code is the error that cut it short.
                    NetlinkPayload::Done(done) if done.code < 0 => {
                        return Err(io::Error::from_raw_os_error(-done.code));
                    }
                    NetlinkPayload::Done(_) => return Ok(replies),
                    // An acknowledgement (no code) or the request's error.
                    NetlinkPayload::Error(error) => {
                        return match error.code {
                            None => Ok(replies),
                            Some(_) => Err(error.to_io()),
                        };
                    }
                    NetlinkPayload::Overrun(_) => {
                        return Err(io::Error::other("netlink answer overran the socket buffer"));
                    }
                    _ => {}
                }
            }
        }
    }
}

/// The netlink messages of one datagram.
fn split(datagram: &[u8]) -> io::Result<Vec<NetlinkMessage<RouteNetlinkMessage>>> {
    let mut messages = Vec::new();
    let mut rest = datagram;
    while !rest.is_empty() {
        let message = NetlinkMessage::<RouteNetlinkMessage>::deserialize(rest).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("cannot decode the kernel's netlink answer: {e}"),
            )
        })?;
        let length = message.header.length as usize;
        if length == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "netlink message of length 0",
            ));
        }
        // Messages start on 4-byte boundaries (NLMSG_ALIGN).
        rest = rest.get(length.next_multiple_of(4)..).unwrap_or_default();
        messages.push(message);
    }
    Ok(messages)
}

#[cfg(test)]
mod tests {
    use super::*;
    use netlink_packet_core::DoneMessage;
    use netlink_packet_route::link::LinkMessage;

    fn encoded(payload: NetlinkPayload<RouteNetlinkMessage>, sequence: u32) -> Vec<u8> {
        let mut message = NetlinkMessage::new(NetlinkHeader::default(), payload);
        message.header.sequence_number = sequence;
        message.finalize();
        let mut bytes = vec![0; message.buffer_len()];
        message.serialize(&mut bytes);
        bytes
    }

    #[test]
    fn a_datagram_splits_into_its_messages() {
        let mut link = LinkMessage::default();
        link.header.index = 7;
        let mut datagram = encoded(RouteNetlinkMessage::NewLink(link).into(), 1);
        datagram.extend(encoded(NetlinkPayload::Done(DoneMessage::default()), 1));
        let messages = split(&datagram).expect("decodes");
        assert_eq!(messages.len(), 2);
        assert!(matches!(
            &messages[0].payload,
            NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewLink(l)) if l.header.index == 7
        ));
        assert!(matches!(messages[1].payload, NetlinkPayload::Done(_)));
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for garbage in [&[1u8, 2, 3][..], &[0; 16][..], &[0xff; 40][..]] {
            let err = split(garbage).expect_err("garbage");
            assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{garbage:?}");
        }
    }
}

//! A synchronous rtnetlink socket, opened on the namespace thread and used there: one request,
//! its whole answer, with a receive timeout so a silent kernel cannot hang a plugin run.

use std::io;
use std::time::Duration;

use netlink_packet_core::{
    NLM_F_ACK, NLM_F_APPEND, NLM_F_CREATE, NLM_F_DUMP, NLM_F_EXCL, NLM_F_REQUEST, NetlinkHeader,
    NetlinkMessage, NetlinkPayload,
};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_sys::{Socket, SocketAddr, protocols::NETLINK_ROUTE};

/// How long one answer may take.
const RECEIVE_TIMEOUT: Duration = Duration::from_secs(10);

/// An rtnetlink socket in the calling thread's network namespace.
pub(crate) struct Netlink {
    socket: Socket,
    sequence: u32,
}

impl Netlink {
    pub(crate) fn open() -> io::Result<Netlink> {
        let mut socket = Socket::new(NETLINK_ROUTE)?;
        socket.bind_auto()?;
        socket.connect(&SocketAddr::new(0, 0))?;
        receive_timeout(&socket)?;
        Ok(Netlink {
            socket,
            sequence: 0,
        })
    }

    /// Every message of a dump.
    pub(crate) fn dump(
        &mut self,
        request: RouteNetlinkMessage,
    ) -> io::Result<Vec<RouteNetlinkMessage>> {
        self.exchange(request, NLM_F_DUMP)
    }

    /// A request acknowledged by the kernel; the replies before the acknowledgement.
    pub(crate) fn request(
        &mut self,
        request: RouteNetlinkMessage,
    ) -> io::Result<Vec<RouteNetlinkMessage>> {
        self.exchange(request, NLM_F_ACK)
    }

    /// A request that creates something: `NLM_F_CREATE`, and `NLM_F_EXCL` or `NLM_F_APPEND`.
    pub(crate) fn create(
        &mut self,
        request: RouteNetlinkMessage,
        exclusive: bool,
    ) -> io::Result<()> {
        let extra = if exclusive { NLM_F_EXCL } else { NLM_F_APPEND };
        self.exchange(request, NLM_F_ACK | NLM_F_CREATE | extra)
            .map(drop)
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
            let mut rest = datagram.as_slice();
            while !rest.is_empty() {
                let message = NetlinkMessage::<RouteNetlinkMessage>::deserialize(rest)
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
                let length = message.header.length as usize;
                if length == 0 {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "netlink message of length 0",
                    ));
                }
                rest = rest.get(length.next_multiple_of(4)..).unwrap_or_default();
                if message.header.sequence_number != self.sequence {
                    continue;
                }
                match message.payload {
                    NetlinkPayload::InnerMessage(reply) => replies.push(reply),
                    NetlinkPayload::Done(done) if done.code < 0 => {
                        return Err(io::Error::from_raw_os_error(-done.code));
                    }
                    NetlinkPayload::Done(_) => return Ok(replies),
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

/// `SO_RCVTIMEO` on the socket.
fn receive_timeout(socket: &Socket) -> io::Result<()> {
    use std::os::fd::AsFd as _;
    rustix::net::sockopt::set_socket_timeout(
        socket.as_fd(),
        rustix::net::sockopt::Timeout::Recv,
        Some(RECEIVE_TIMEOUT),
    )
    .map_err(io::Error::from)
}

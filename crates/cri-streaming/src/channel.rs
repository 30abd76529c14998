//! The Kubernetes channel protocols, apart from any transport.
//!
//! Remote command (exec, attach) numbers its streams 0 stdin, 1 stdout, 2 stderr, 3 error, 4
//! resize. Over SPDY each is a stream the client opens with a `streamtype` header; over
//! WebSocket each message starts with its channel: a byte (`channel.k8s.io` and its `v4.`/`v5.`
//! versions) or an ASCII digit before base64 text (`base64.channel.k8s.io`, `v4.base64...`).
//! v5 adds a close signal, the two bytes `255, channel`, that half-closes one channel.
//!
//! Port forward over SPDY opens a data and an error stream per connection, headers
//! `streamtype`, `port` and `requestid`; over WebSocket, ports come in the `port` query and
//! port `i` gets channels `2i` (data) and `2i + 1` (error), on each of which the server first
//! writes the port as two little-endian bytes.

use std::borrow::Cow;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use crate::{Error, Result};

/// The header naming what a SPDY stream carries.
pub const HEADER_STREAM_TYPE: &str = "streamtype";
/// Port forward: the container port a stream pair goes to.
pub const HEADER_PORT: &str = "port";
/// Port forward: ties a data stream to its error stream.
pub const HEADER_REQUEST_ID: &str = "requestid";
/// The HTTP header a SPDY client lists its subprotocols in, and the server answers with one.
pub const HEADER_PROTOCOL_VERSION: &str = "X-Stream-Protocol-Version";
/// The HTTP header a refusing server lists its subprotocols in.
pub const HEADER_ACCEPTED_PROTOCOL_VERSIONS: &str = "X-Accepted-Stream-Protocol-Versions";

/// Remote command channels, numbered as the WebSocket protocols number them.
pub mod channels {
    /// The command's standard input.
    pub const STDIN: u8 = 0;
    /// Its standard output.
    pub const STDOUT: u8 = 1;
    /// Its standard error.
    pub const STDERR: u8 = 2;
    /// How it ended ([`crate::status`]).
    pub const ERROR: u8 = 3;
    /// Terminal sizes ([`crate::resize`]).
    pub const RESIZE: u8 = 4;
    /// v5: the close signal's marker.
    pub const CLOSE: u8 = 255;
}

/// What a SPDY stream carries, by its `streamtype` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamType {
    /// `stdin`.
    Stdin,
    /// `stdout`.
    Stdout,
    /// `stderr`.
    Stderr,
    /// `error`: the exit status, or port forward's error text.
    Error,
    /// `resize`.
    Resize,
    /// `data`: port forward's bytes.
    Data,
}

impl StreamType {
    /// The type a `streamtype` value names (exact, lower-case, as kubelet compares).
    pub fn parse(value: &str) -> Option<StreamType> {
        Some(match value {
            "stdin" => StreamType::Stdin,
            "stdout" => StreamType::Stdout,
            "stderr" => StreamType::Stderr,
            "error" => StreamType::Error,
            "resize" => StreamType::Resize,
            "data" => StreamType::Data,
            _ => return None,
        })
    }

    /// The header value.
    pub fn as_str(self) -> &'static str {
        match self {
            StreamType::Stdin => "stdin",
            StreamType::Stdout => "stdout",
            StreamType::Stderr => "stderr",
            StreamType::Error => "error",
            StreamType::Resize => "resize",
            StreamType::Data => "data",
        }
    }

    /// The WebSocket channel of a remote command stream; `None` for `data`.
    pub fn channel(self) -> Option<u8> {
        Some(match self {
            StreamType::Stdin => channels::STDIN,
            StreamType::Stdout => channels::STDOUT,
            StreamType::Stderr => channels::STDERR,
            StreamType::Error => channels::ERROR,
            StreamType::Resize => channels::RESIZE,
            StreamType::Data => return None,
        })
    }
}

/// How the error stream reports the end of a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusFormat {
    /// v1 to v3: the failure's message as text, nothing on success.
    Text,
    /// v4 and v5: a `metav1.Status` as JSON.
    Json,
}

/// A remote command subprotocol over SPDY, as the client asks for it in
/// `X-Stream-Protocol-Version`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpdyProtocol {
    /// Its name.
    pub name: &'static str,
    /// Whether a resize stream exists (v3 and later).
    pub resize: bool,
    /// What the error stream carries.
    pub status: StatusFormat,
}

/// Remote command over SPDY, in kubelet's order of preference. (`v5.channel.k8s.io` is a
/// WebSocket protocol: over SPDY kubelet speaks up to v4.)
pub const SPDY_REMOTE_COMMAND: &[SpdyProtocol] = &[
    SpdyProtocol {
        name: "v4.channel.k8s.io",
        resize: true,
        status: StatusFormat::Json,
    },
    SpdyProtocol {
        name: "v3.channel.k8s.io",
        resize: true,
        status: StatusFormat::Text,
    },
    SpdyProtocol {
        name: "v2.channel.k8s.io",
        resize: false,
        status: StatusFormat::Text,
    },
    SpdyProtocol {
        name: "channel.k8s.io",
        resize: false,
        status: StatusFormat::Text,
    },
];

/// Port forward over SPDY.
pub const SPDY_PORT_FORWARD: &str = "portforward.k8s.io";

/// How a WebSocket subprotocol frames channels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WsProtocol {
    /// Its name; `""` when the client named none.
    pub name: &'static str,
    /// Base64 text messages with an ASCII digit channel, or binary ones with a channel byte.
    pub base64: bool,
    /// Whether `255, channel` half-closes a channel (v5).
    pub close_signal: bool,
    /// What the error channel carries.
    pub status: StatusFormat,
}

const fn ws(
    name: &'static str,
    base64: bool,
    close_signal: bool,
    status: StatusFormat,
) -> WsProtocol {
    WsProtocol {
        name,
        base64,
        close_signal,
        status,
    }
}

/// Remote command over WebSocket. Kubelet's server stops at v4: v5 (v4 and the close signal) is
/// what kubectl speaks to the API server, whose translator talks SPDY onwards; served here too,
/// as the issue asks, for clients that reach the runtime directly.
pub const WS_REMOTE_COMMAND: &[WsProtocol] = &[
    ws("v5.channel.k8s.io", false, true, StatusFormat::Json),
    ws("v4.channel.k8s.io", false, false, StatusFormat::Json),
    ws("v4.base64.channel.k8s.io", true, false, StatusFormat::Json),
    ws("channel.k8s.io", false, false, StatusFormat::Text),
    ws("base64.channel.k8s.io", true, false, StatusFormat::Text),
    ws("", false, false, StatusFormat::Text),
];

/// Port forward over WebSocket.
pub const WS_PORT_FORWARD: &[WsProtocol] = &[
    ws("v4.channel.k8s.io", false, false, StatusFormat::Text),
    ws("v4.base64.channel.k8s.io", true, false, StatusFormat::Text),
    ws("", false, false, StatusFormat::Text),
];

/// The first of the client's protocols, in the client's order, that the server speaks, as
/// apimachinery's `httpstream.Handshake` and `wsstream`'s handshake choose. A client value may
/// list several separated by commas. No client protocol at all means `""`.
pub fn negotiate<'a, P>(
    client: &[&str],
    server: &'a [P],
    name: impl Fn(&P) -> &str,
) -> Option<&'a P> {
    let mut offered = client
        .iter()
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .peekable();
    if offered.peek().is_none() {
        return server.iter().find(|p| name(p).is_empty());
    }
    offered.find_map(|want| server.iter().find(|p| name(p) == want))
}

/// A message a client sent on a channel WebSocket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inbound<'a> {
    /// Bytes for a channel (base64 decoded already).
    Data {
        /// The channel.
        channel: u8,
        /// The bytes.
        data: Cow<'a, [u8]>,
    },
    /// v5: the client will send nothing more on `channel`.
    Close {
        /// The channel.
        channel: u8,
    },
    /// An empty message, which kubelet skips.
    Empty,
}

impl WsProtocol {
    /// Reads one message. Which channels exist is the caller's business (kubelet drops
    /// messages for channels it has not opened).
    ///
    /// # Errors
    ///
    /// A base64 message that does not decode or whose channel is not a digit, a v5 close signal
    /// that is not two bytes.
    pub fn decode<'a>(&self, message: &'a [u8]) -> Result<Inbound<'a>> {
        let Some((&first, rest)) = message.split_first() else {
            return Ok(Inbound::Empty);
        };
        let bad = |what: String| Error::InvalidMessage {
            protocol: self.name,
            what,
        };
        if self.close_signal && first == channels::CLOSE {
            return match rest {
                [channel] => Ok(Inbound::Close { channel: *channel }),
                _ => Err(bad(format!(
                    "a close signal of {} bytes, not 2",
                    message.len()
                ))),
            };
        }
        if !self.base64 {
            return Ok(Inbound::Data {
                channel: first,
                data: Cow::Borrowed(rest),
            });
        }
        let channel = first
            .checked_sub(b'0')
            .filter(|c| *c <= 9)
            .ok_or_else(|| bad(format!("channel {first:#04x} is not an ascii digit")))?;
        // Go's decoder skips line breaks inside base64.
        let text: Cow<'_, [u8]> = if rest.iter().any(|c| matches!(c, b'\r' | b'\n')) {
            Cow::Owned(
                rest.iter()
                    .copied()
                    .filter(|c| !matches!(c, b'\r' | b'\n'))
                    .collect(),
            )
        } else {
            Cow::Borrowed(rest)
        };
        let data = STANDARD
            .decode(&text)
            .map_err(|e| bad(format!("channel {channel}: {e}")))?;
        Ok(Inbound::Data {
            channel,
            data: Cow::Owned(data),
        })
    }

    /// The message that carries `data` on `channel`: binary, or text for the base64 variants.
    pub fn encode(&self, channel: u8, data: &[u8]) -> Vec<u8> {
        if self.base64 {
            // Kubelet writes '0' + channel as one byte; channels past 9 stay unreadable there too.
            let mut out = Vec::with_capacity(1 + data.len().div_ceil(3) * 4);
            out.push(b'0'.wrapping_add(channel));
            out.extend_from_slice(STANDARD.encode(data).as_bytes());
            out
        } else {
            let mut out = Vec::with_capacity(1 + data.len());
            out.push(channel);
            out.extend_from_slice(data);
            out
        }
    }

    /// v5's close signal for `channel`; `None` where the protocol has none.
    pub fn close(&self, channel: u8) -> Option<[u8; 2]> {
        self.close_signal.then_some([channels::CLOSE, channel])
    }
}

/// Port forward over WebSocket: the two bytes the server writes first on each of a port's
/// channels.
pub fn port_prefix(port: u16) -> [u8; 2] {
    port.to_le_bytes()
}

/// Port forward over WebSocket: port `index`'s data and error channels.
pub fn port_channels(index: u8) -> Option<(u8, u8)> {
    let data = index.checked_mul(2)?;
    Some((data, data.checked_add(1)?))
}

//! SPDY/3.1 framing: the frames kubelet's clients (moby/spdystream under client-go) send and
//! expect, and a codec that turns bytes into them and back.
//!
//! [`FrameDecoder`] and [`FrameEncoder`] do no I/O: the decoder reads a frame from the front of a
//! buffer the caller fills, the encoder appends a frame to one the caller drains. Each owns one
//! direction's zlib context for header blocks, which the spec shares by every header block of the
//! connection in that direction (section 2.6.10.1), so a connection has exactly one of each.
//!
//! Every length on the wire is checked against [`Limits`] before anything is allocated for it,
//! and header blocks are inflated into a buffer that stops at the limit, so a zlib bomb costs at
//! most the limit.

mod codec;
mod dictionary;
mod header_block;
mod session;

use std::fmt;

pub use codec::{FrameDecoder, FrameEncoder};
pub use dictionary::DICTIONARY;
pub use session::{Session, SessionConfig, Stream, StreamReader, StreamSink, StreamWriter};

/// The SPDY version this crate speaks.
pub const VERSION: u16 = 3;
/// The length of every frame header (control or data).
pub const FRAME_HEADER_LEN: usize = 8;
/// The largest length the 24-bit field can carry.
pub const MAX_WIRE_LEN: u32 = (1 << 24) - 1;
/// A stream's and the session's flow-control window before any WINDOW_UPDATE or SETTINGS
/// (section 2.6.8).
pub const DEFAULT_INITIAL_WINDOW: u32 = 64 * 1024;

/// Flag on SYN_STREAM, SYN_REPLY, HEADERS and data frames: the sender's last frame on the
/// stream.
pub const FLAG_FIN: u8 = 0x01;
/// Flag on SYN_STREAM: the recipient may not send on the stream.
pub const FLAG_UNIDIRECTIONAL: u8 = 0x02;
/// Flag on SETTINGS: forget persisted settings.
pub const FLAG_SETTINGS_CLEAR: u8 = 0x01;

/// What each length on the wire may be at most. Checked before anything is allocated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// A frame's payload (after the 8-byte header), control or data. The wire allows up to
    /// 16 MiB - 1; client-go writes what `io.Copy` hands it, 32 KiB at a time.
    pub max_frame_len: u32,
    /// A header block once inflated.
    pub max_header_block: usize,
    /// Name/value pairs in one header block.
    pub max_headers: usize,
    /// One header name.
    pub max_name_len: usize,
    /// One header value (NUL-separated values count together).
    pub max_value_len: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_frame_len: 1024 * 1024,
            max_header_block: 64 * 1024,
            max_headers: 64,
            max_name_len: 256,
            max_value_len: 16 * 1024,
        }
    }
}

/// The kind of a frame, for errors and logs. Displays as the spec names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FrameKind {
    /// SYN_STREAM (type 1).
    SynStream,
    /// SYN_REPLY (type 2).
    SynReply,
    /// RST_STREAM (type 3).
    RstStream,
    /// SETTINGS (type 4).
    Settings,
    /// PING (type 6).
    Ping,
    /// GOAWAY (type 7).
    GoAway,
    /// HEADERS (type 8).
    Headers,
    /// WINDOW_UPDATE (type 9).
    WindowUpdate,
    /// A data frame.
    Data,
    /// A control frame of a type this crate does not know (ignored, as the spec asks).
    Unknown(u16),
}

impl FrameKind {
    /// The kind of a control frame of type `frame_type`.
    pub fn control(frame_type: u16) -> FrameKind {
        match frame_type {
            1 => FrameKind::SynStream,
            2 => FrameKind::SynReply,
            3 => FrameKind::RstStream,
            4 => FrameKind::Settings,
            6 => FrameKind::Ping,
            7 => FrameKind::GoAway,
            8 => FrameKind::Headers,
            9 => FrameKind::WindowUpdate,
            other => FrameKind::Unknown(other),
        }
    }

    /// The control frame type on the wire; `None` for data frames.
    pub fn control_type(self) -> Option<u16> {
        Some(match self {
            FrameKind::SynStream => 1,
            FrameKind::SynReply => 2,
            FrameKind::RstStream => 3,
            FrameKind::Settings => 4,
            FrameKind::Ping => 6,
            FrameKind::GoAway => 7,
            FrameKind::Headers => 8,
            FrameKind::WindowUpdate => 9,
            FrameKind::Unknown(t) => t,
            FrameKind::Data => return None,
        })
    }
}

impl fmt::Display for FrameKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameKind::SynStream => f.write_str("SYN_STREAM"),
            FrameKind::SynReply => f.write_str("SYN_REPLY"),
            FrameKind::RstStream => f.write_str("RST_STREAM"),
            FrameKind::Settings => f.write_str("SETTINGS"),
            FrameKind::Ping => f.write_str("PING"),
            FrameKind::GoAway => f.write_str("GOAWAY"),
            FrameKind::Headers => f.write_str("HEADERS"),
            FrameKind::WindowUpdate => f.write_str("WINDOW_UPDATE"),
            FrameKind::Data => f.write_str("data"),
            FrameKind::Unknown(t) => write!(f, "unknown control (type {t})"),
        }
    }
}

/// A header block: name/value pairs in the order they came. Names are lower-case ASCII and
/// unique; a value may hold several values separated by NUL, as the spec and spdystream encode a
/// repeated header.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Headers(pub Vec<(String, String)>);

impl Headers {
    /// No headers.
    pub fn new() -> Headers {
        Headers(Vec::new())
    }

    /// Adds a pair (checked when the frame is encoded).
    #[must_use]
    pub fn with(mut self, name: &str, value: &str) -> Headers {
        self.0.push((name.to_owned(), value.to_owned()));
        self
    }

    /// The value of `name` (names are lower-case on the wire; `name` is matched ignoring ASCII
    /// case, as Go's `http.Header.Get` does). For a repeated header, the first of its values.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.split('\0').next().unwrap_or(""))
    }

    /// The number of pairs.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// SYN_STREAM: the client opens a stream (section 2.6.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SynStream {
    /// The new stream's id (odd from a client).
    pub stream_id: u32,
    /// The stream this one is associated with, 0 for none.
    pub associated_to: u32,
    /// 0 (highest) to 7.
    pub priority: u8,
    /// The credential slot (SPDY/3; always 0 from spdystream).
    pub slot: u8,
    /// FLAG_FIN: the sender will send nothing more on the stream.
    pub fin: bool,
    /// FLAG_UNIDIRECTIONAL: the recipient may not send on it.
    pub unidirectional: bool,
    /// Its headers (kubelet reads `streamtype`, and `port`, `requestid` for port forward).
    pub headers: Headers,
}

/// A SETTINGS entry (section 2.6.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setting {
    /// FLAG_SETTINGS_PERSIST_VALUE (1), FLAG_SETTINGS_PERSISTED (2).
    pub flags: u8,
    /// The setting's id (24 bits): 4 is MAX_CONCURRENT_STREAMS, 7 INITIAL_WINDOW_SIZE.
    pub id: u32,
    /// Its value.
    pub value: u32,
}

/// Setting id: the window each new stream starts with.
pub const SETTINGS_INITIAL_WINDOW_SIZE: u32 = 7;
/// Setting id: how many streams the sender allows open at once.
pub const SETTINGS_MAX_CONCURRENT_STREAMS: u32 = 4;

/// RST_STREAM status codes (section 2.4.2).
pub mod rst {
    /// A generic error.
    pub const PROTOCOL_ERROR: u32 = 1;
    /// A frame for a stream that is not active.
    pub const INVALID_STREAM: u32 = 2;
    /// The stream was refused before any processing.
    pub const REFUSED_STREAM: u32 = 3;
    /// The SPDY version is not supported.
    pub const UNSUPPORTED_VERSION: u32 = 4;
    /// The stream is no longer needed.
    pub const CANCEL: u32 = 5;
    /// An error not related to the protocol.
    pub const INTERNAL_ERROR: u32 = 6;
    /// The peer broke flow control.
    pub const FLOW_CONTROL_ERROR: u32 = 7;
    /// SYN_REPLY for a stream already open.
    pub const STREAM_IN_USE: u32 = 8;
    /// Data or SYN_REPLY on a half-closed stream.
    pub const STREAM_ALREADY_CLOSED: u32 = 9;
    /// A frame larger than the recipient accepts.
    pub const FRAME_TOO_LARGE: u32 = 11;
}

/// GOAWAY status codes (section 2.6.6).
pub mod goaway {
    /// A normal session teardown.
    pub const OK: u32 = 0;
    /// The peer broke the protocol.
    pub const PROTOCOL_ERROR: u32 = 1;
    /// An error in this side.
    pub const INTERNAL_ERROR: u32 = 2;
}

/// One SPDY/3.1 frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// Opens a stream.
    SynStream(SynStream),
    /// Accepts a stream (section 2.6.2).
    SynReply {
        /// The stream.
        stream_id: u32,
        /// FLAG_FIN.
        fin: bool,
        /// Its headers (spdystream's server sends none).
        headers: Headers,
    },
    /// Aborts a stream (section 2.6.3).
    RstStream {
        /// The stream.
        stream_id: u32,
        /// Why (see [`rst`]); never 0.
        status: u32,
    },
    /// Session settings (section 2.6.4).
    Settings {
        /// FLAG_SETTINGS_CLEAR_SETTINGS.
        clear: bool,
        /// The entries.
        entries: Vec<Setting>,
    },
    /// A liveness check, answered with the same id (section 2.6.5). Clients send odd ids.
    Ping {
        /// The id.
        id: u32,
    },
    /// The sender will open no more streams (section 2.6.6).
    GoAway {
        /// The last stream the sender accepted.
        last_good_stream_id: u32,
        /// Why (see [`goaway`]).
        status: u32,
    },
    /// More headers for a stream (section 2.6.7).
    Headers {
        /// The stream.
        stream_id: u32,
        /// FLAG_FIN.
        fin: bool,
        /// The headers.
        headers: Headers,
    },
    /// Opens the sender's flow-control window (section 2.6.8). Stream 0 is the session's
    /// window (SPDY/3.1).
    WindowUpdate {
        /// The stream, or 0 for the session.
        stream_id: u32,
        /// Bytes added, 1 to 2^31 - 1.
        delta: u32,
    },
    /// Payload for a stream (section 2.2.2).
    Data {
        /// The stream.
        stream_id: u32,
        /// FLAG_FIN.
        fin: bool,
        /// The payload.
        data: Vec<u8>,
    },
    /// A control frame of a type this crate does not know; the spec says to ignore it.
    Unknown {
        /// Its type.
        frame_type: u16,
        /// Its flags.
        flags: u8,
    },
}

impl Frame {
    /// The frame's kind.
    pub fn kind(&self) -> FrameKind {
        match self {
            Frame::SynStream(_) => FrameKind::SynStream,
            Frame::SynReply { .. } => FrameKind::SynReply,
            Frame::RstStream { .. } => FrameKind::RstStream,
            Frame::Settings { .. } => FrameKind::Settings,
            Frame::Ping { .. } => FrameKind::Ping,
            Frame::GoAway { .. } => FrameKind::GoAway,
            Frame::Headers { .. } => FrameKind::Headers,
            Frame::WindowUpdate { .. } => FrameKind::WindowUpdate,
            Frame::Data { .. } => FrameKind::Data,
            Frame::Unknown { frame_type, .. } => FrameKind::Unknown(*frame_type),
        }
    }
}

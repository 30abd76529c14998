//! The crate's one error type.

use crate::spdy::FrameKind;

/// What went wrong: a frame or message that breaks the protocol or a limit, a full token cache.
///
/// A SPDY error from [`crate::spdy::FrameDecoder`] is fatal to its connection: the header
/// compression context is shared by every frame, so after a bad frame the two ends no longer
/// agree on it. The session answers with GOAWAY (PROTOCOL_ERROR) and closes.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A frame's 24-bit length is over [`crate::spdy::Limits::max_frame_len`]; refused before
    /// anything is buffered for it.
    #[error("spdy {frame} frame of {len} bytes is over the limit of {limit} bytes")]
    FrameTooLarge {
        /// The frame.
        frame: FrameKind,
        /// The length the frame header claims.
        len: u32,
        /// The configured limit.
        limit: u32,
    },
    /// A control frame of another SPDY version.
    #[error("spdy {frame} frame of version {version}: only version 3 is spoken")]
    UnsupportedVersion {
        /// The frame.
        frame: FrameKind,
        /// The version it carries.
        version: u16,
    },
    /// A frame whose layout breaks the spec: a wrong length, a zero stream id, a zero status.
    #[error("spdy {frame} frame: {what}")]
    InvalidFrame {
        /// The frame.
        frame: FrameKind,
        /// What is wrong with it.
        what: String,
    },
    /// A header block that inflates to more than [`crate::spdy::Limits::max_header_block`].
    #[error("spdy {frame} header block inflates past the limit of {limit} bytes")]
    HeaderBlockTooLarge {
        /// The frame.
        frame: FrameKind,
        /// The configured limit.
        limit: usize,
    },
    /// A header block with more name/value pairs than [`crate::spdy::Limits::max_headers`].
    #[error("spdy {frame} header block has {count} headers, over the limit of {limit}")]
    TooManyHeaders {
        /// The frame.
        frame: FrameKind,
        /// The count the block claims.
        count: u32,
        /// The configured limit.
        limit: usize,
    },
    /// A header name or value longer than its limit in [`crate::spdy::Limits`].
    #[error("spdy {frame} header {part} of {len} bytes is over the limit of {limit} bytes")]
    HeaderTooLong {
        /// The frame.
        frame: FrameKind,
        /// `name` or `value`.
        part: &'static str,
        /// The length the block claims.
        len: u32,
        /// The configured limit.
        limit: usize,
    },
    /// A header block that inflates but breaks the spec: truncated, trailing bytes, an empty,
    /// upper-case or repeated name, a value that is not UTF-8.
    #[error("spdy {frame} header block: {what}")]
    InvalidHeaderBlock {
        /// The frame.
        frame: FrameKind,
        /// What is wrong with it.
        what: String,
    },
    /// The zlib stream of header blocks is corrupt, or names another dictionary.
    #[error("spdy {frame} header block does not inflate: {what}")]
    Inflate {
        /// The frame.
        frame: FrameKind,
        /// zlib's complaint.
        what: String,
    },
    /// A frame this side was asked to send cannot be encoded (a zero stream id, a header name
    /// that is not lower case, a payload over the 24-bit length).
    #[error("cannot encode spdy {frame} frame: {what}")]
    Encode {
        /// The frame.
        frame: FrameKind,
        /// Why not.
        what: String,
    },
    /// The SPDY session is over (the client left, broke the protocol, went idle, or the session
    /// was closed): nothing more can be written.
    #[error("the spdy session is closed")]
    SessionClosed,
    /// The stream was reset (by the client, or by this side).
    #[error("spdy stream {stream_id} was reset")]
    StreamReset {
        /// The stream.
        stream_id: u32,
    },
    /// The client sent nothing for the idle timeout.
    #[error("the spdy client sent nothing for {0:?}")]
    IdleTimeout(std::time::Duration),
    /// Reading from or writing to the connection failed or timed out.
    #[error("spdy connection: {what}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The failure.
        #[source]
        source: std::io::Error,
    },
    /// The token cache holds its maximum of requests; kubelet answers ResourceExhausted.
    #[error("too many streaming requests in flight: all {limit} slots are taken")]
    TooManyInFlight {
        /// The configured maximum.
        limit: usize,
    },
    /// The kernel gave no random bytes for a token.
    #[error("no random bytes for a streaming token: {0}")]
    Random(String),
    /// A WebSocket message that breaks the channel protocol.
    #[error("websocket message of {protocol:?}: {what}")]
    InvalidMessage {
        /// The negotiated subprotocol.
        protocol: &'static str,
        /// What is wrong with it.
        what: String,
    },
    /// A resize message that is not a terminal size, or is longer than its cap.
    #[error("resize message: {0}")]
    InvalidResize(String),
    /// An exec, attach or port forward request the server refuses to hand a URL out for, as
    /// kubelet refuses it (CRI's InvalidArgument): `missing required container_id`,
    /// `tty and stderr cannot both be true`, `one of stdin, stdout, or stderr must be set`,
    /// `missing required pod_sandbox_id`.
    #[error("invalid streaming request: {0}")]
    InvalidRequest(&'static str),
    /// The server could not listen on its address.
    #[error("cannot listen for streaming on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: std::net::SocketAddr,
        /// The failure.
        #[source]
        source: std::io::Error,
    },
    /// The TLS configuration is unusable: names what (file, certificate, key) and why.
    #[error("streaming tls: {0}")]
    Tls(String),
}

/// This crate's results.
pub type Result<T, E = Error> = std::result::Result<T, E>;

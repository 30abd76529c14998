//! A minimal raw HTTP/2 client for tests: it sends exactly the header bytes
//! it is told to (including an `:authority` no HTTP library would produce)
//! and reports what the server answered, frame by frame. Response headers
//! are decoded with loona-hpack, independently of the server's HPACK code.
//! Only one request is in flight per connection.

use std::io;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The HTTP/2 client connection preface.
pub const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// Largest frame payload we accept: our (default) `SETTINGS_MAX_FRAME_SIZE`.
pub const MAX_FRAME: usize = 16_384;

/// Frame types.
pub const DATA: u8 = 0x0;
/// HEADERS frame type.
pub const HEADERS: u8 = 0x1;
/// `RST_STREAM` frame type.
pub const RST_STREAM: u8 = 0x3;
/// SETTINGS frame type.
pub const SETTINGS: u8 = 0x4;
/// PING frame type.
pub const PING: u8 = 0x6;
/// GOAWAY frame type.
pub const GOAWAY: u8 = 0x7;
/// `WINDOW_UPDATE` frame type.
pub const WINDOW_UPDATE: u8 = 0x8;
/// CONTINUATION frame type.
pub const CONTINUATION: u8 = 0x9;
/// `END_STREAM` flag (DATA, HEADERS); also ACK on SETTINGS and PING.
pub const END_STREAM: u8 = 0x1;
/// `END_HEADERS` flag.
pub const END_HEADERS: u8 = 0x4;

/// One received frame.
#[derive(Debug, Clone)]
pub struct Frame {
    /// Frame type.
    pub kind: u8,
    /// Flags.
    pub flags: u8,
    /// Stream identifier (reserved bit cleared).
    pub stream_id: u32,
    /// Payload.
    pub payload: Vec<u8>,
}

/// How the response ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    /// `END_STREAM` received.
    Stream,
    /// `RST_STREAM` on our stream with this error code.
    Reset(u32),
    /// GOAWAY with this error code and debug data.
    GoAway(u32, Vec<u8>),
    /// The server closed the connection.
    Eof,
}

/// What the server answered.
#[derive(Debug, Clone)]
pub struct RawResponse {
    /// The first header block (`:status` and the rest), decoded.
    pub headers: Vec<(Vec<u8>, Vec<u8>)>,
    /// Any later header block (gRPC trailers), decoded.
    pub trailers: Vec<(Vec<u8>, Vec<u8>)>,
    /// DATA payloads concatenated.
    pub body: Vec<u8>,
    /// How the exchange ended.
    pub end: End,
}

impl RawResponse {
    /// The `:status` value, when a header block arrived.
    pub fn status(&self) -> Option<&[u8]> {
        self.header(b":status")
    }

    /// First value of `name` in the headers or trailers.
    pub fn header(&self, name: &[u8]) -> Option<&[u8]> {
        self.headers
            .iter()
            .chain(&self.trailers)
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_slice())
    }
}

/// Appends an HPACK field as "literal without indexing, new name", plain
/// strings: the server's table is never touched and bytes go out verbatim.
pub fn encode_field(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.push(0x00);
    for s in [name, value] {
        encode_int(out, s.len());
        out.extend_from_slice(s);
    }
}

/// HPACK integer with a 7-bit prefix (RFC 7541 §5.1), H bit clear.
fn encode_int(out: &mut Vec<u8>, value: usize) {
    let low7 = |v: usize| v.to_le_bytes()[0] & 0x7f;
    if value < 0x7f {
        out.push(low7(value));
        return;
    }
    out.push(0x7f);
    let mut rest = value - 0x7f;
    while rest >= 0x80 {
        out.push(low7(rest) | 0x80);
        rest >>= 7;
    }
    out.push(low7(rest));
}

/// The gRPC-style request header block: POST, http, `path`, the optional
/// `:authority` byte for byte, content-type, te, then `extra`.
pub fn request_block(authority: Option<&[u8]>, path: &str, extra: &[(&[u8], &[u8])]) -> Vec<u8> {
    let mut block = Vec::new();
    encode_field(&mut block, b":method", b"POST");
    encode_field(&mut block, b":scheme", b"http");
    encode_field(&mut block, b":path", path.as_bytes());
    if let Some(a) = authority {
        encode_field(&mut block, b":authority", a);
    }
    encode_field(&mut block, b"content-type", b"application/grpc");
    encode_field(&mut block, b"te", b"trailers");
    for (n, v) in extra {
        encode_field(&mut block, n, v);
    }
    block
}

/// One client connection.
pub struct RawConn<IO> {
    /// The transport.
    pub io: IO,
    decoder: loona_hpack::Decoder<'static>,
    next_stream: u32,
}

impl<IO: AsyncRead + AsyncWrite + Unpin> RawConn<IO> {
    /// Sends the preface and an empty SETTINGS frame.
    ///
    /// # Errors
    ///
    /// When writing to `io` fails.
    pub async fn handshake(mut io: IO) -> io::Result<Self> {
        io.write_all(PREFACE).await?;
        write_frame(&mut io, SETTINGS, 0, 0, &[]).await?;
        Ok(Self {
            io,
            decoder: loona_hpack::Decoder::new(),
            next_stream: 1,
        })
    }

    /// Sends one frame.
    ///
    /// # Errors
    ///
    /// When writing fails.
    pub async fn send_frame(
        &mut self,
        kind: u8,
        flags: u8,
        stream_id: u32,
        payload: &[u8],
    ) -> io::Result<()> {
        write_frame(&mut self.io, kind, flags, stream_id, payload).await
    }

    /// Stream id the next `request` will use; also consumed by
    /// `send_raw_headers` so hand-made streams do not collide.
    pub fn take_stream_id(&mut self) -> u32 {
        let id = self.next_stream;
        self.next_stream += 2;
        id
    }

    /// Sends an already encoded header block as HEADERS (+ CONTINUATION
    /// frames when larger than a frame) and returns the stream id used.
    ///
    /// # Errors
    ///
    /// When writing fails.
    pub async fn send_raw_headers(&mut self, block: &[u8], end_stream: bool) -> io::Result<u32> {
        let stream_id = self.take_stream_id();
        let chunks: Vec<&[u8]> = if block.is_empty() {
            vec![&[]]
        } else {
            block.chunks(MAX_FRAME).collect()
        };
        for (i, chunk) in chunks.iter().enumerate() {
            let kind = if i == 0 { HEADERS } else { CONTINUATION };
            let mut flags = if i == 0 && end_stream { END_STREAM } else { 0 };
            if i + 1 == chunks.len() {
                flags |= END_HEADERS;
            }
            self.send_frame(kind, flags, stream_id, chunk).await?;
        }
        Ok(stream_id)
    }

    /// Sends a request (see `request_block`) with `body` as one DATA frame
    /// (`END_STREAM`; gRPC callers frame the message themselves) and reads
    /// the response.
    ///
    /// # Errors
    ///
    /// When writing or reading fails, or a response header block does not decode.
    pub async fn request(
        &mut self,
        authority: Option<&[u8]>,
        path: &str,
        extra: &[(&[u8], &[u8])],
        body: &[u8],
    ) -> io::Result<RawResponse> {
        let block = request_block(authority, path, extra);
        let stream_id = self.send_raw_headers(&block, false).await?;
        for (i, chunk) in body.chunks(MAX_FRAME).enumerate() {
            let last = (i + 1) * MAX_FRAME >= body.len();
            self.send_frame(DATA, if last { END_STREAM } else { 0 }, stream_id, chunk)
                .await?;
        }
        if body.is_empty() {
            self.send_frame(DATA, END_STREAM, stream_id, &[]).await?;
        }
        self.read_response(stream_id).await
    }

    /// Closes our sending side and reads until the server closes too, so
    /// neither side is left with unread bytes (on Linux, closing a unix
    /// socket with unread data makes the peer see ECONNRESET).
    ///
    /// # Errors
    ///
    /// When the shutdown or a read fails, or the server sends a partial or oversized frame.
    pub async fn close(mut self) -> io::Result<()> {
        self.io.shutdown().await?;
        while read_frame(&mut self.io).await?.is_some() {}
        Ok(())
    }

    /// Reads frames until `stream_id` ends, is reset, or the connection
    /// goes away; answers SETTINGS and PING and returns flow-control credit
    /// so large responses are not stalled.
    ///
    /// # Errors
    ///
    /// When reading fails, a frame is partial or oversized, or a header block does not decode.
    pub async fn read_response(&mut self, stream_id: u32) -> io::Result<RawResponse> {
        let mut resp = RawResponse {
            headers: Vec::new(),
            trailers: Vec::new(),
            body: Vec::new(),
            end: End::Eof,
        };
        let mut block = Vec::new();
        loop {
            let Some(f) = read_frame(&mut self.io).await? else {
                resp.end = End::Eof;
                return Ok(resp);
            };
            match f.kind {
                // Housekeeping replies are best-effort: a server that is
                // closing may already have stopped reading, and what it
                // sent before closing is what the caller wants to see.
                SETTINGS if f.flags & 0x1 == 0 => {
                    drop(self.send_frame(SETTINGS, 0x1, 0, &[]).await);
                }
                PING if f.flags & 0x1 == 0 => drop(self.send_frame(PING, 0x1, 0, &f.payload).await),
                GOAWAY if f.payload.len() >= 8 => {
                    let last = be32(&f.payload[..4]) & 0x7fff_ffff;
                    let code = be32(&f.payload[4..8]);
                    // A graceful GOAWAY that still covers our stream lets it finish.
                    if code != 0 || last < stream_id {
                        resp.end = End::GoAway(code, f.payload[8..].to_vec());
                        return Ok(resp);
                    }
                }
                RST_STREAM if f.stream_id == stream_id && f.payload.len() == 4 => {
                    resp.end = End::Reset(be32(&f.payload));
                    return Ok(resp);
                }
                DATA if f.stream_id == stream_id => {
                    resp.body.extend_from_slice(unpadded(&f));
                    if !f.payload.is_empty() {
                        let credit = u32::try_from(f.payload.len()).unwrap_or(0).to_be_bytes();
                        drop(self.send_frame(WINDOW_UPDATE, 0, 0, &credit).await);
                        if f.flags & END_STREAM == 0 {
                            drop(self.send_frame(WINDOW_UPDATE, 0, stream_id, &credit).await);
                        }
                    }
                    if f.flags & END_STREAM != 0 {
                        resp.end = End::Stream;
                        return Ok(resp);
                    }
                }
                HEADERS | CONTINUATION if f.stream_id == stream_id => {
                    let mut payload = &f.payload[..];
                    if f.kind == HEADERS {
                        payload = unpadded(&f);
                        if f.flags & 0x20 != 0 {
                            payload = payload.get(5..).unwrap_or_default();
                        }
                        block.clear();
                        if f.flags & END_STREAM != 0 {
                            resp.end = End::Stream;
                        }
                    }
                    block.extend_from_slice(payload);
                    if f.flags & END_HEADERS != 0 {
                        let fields = self.decoder.decode(&block).map_err(|e| {
                            io::Error::new(io::ErrorKind::InvalidData, format!("hpack: {e}"))
                        })?;
                        if resp.headers.is_empty() {
                            resp.headers = fields;
                        } else {
                            resp.trailers = fields;
                        }
                        if resp.end == End::Stream {
                            return Ok(resp);
                        }
                    }
                }
                _ => {}
            }
        }
    }
}

/// A big-endian u32 from the first four bytes of `b` (callers check length).
fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// The payload of a DATA or HEADERS frame without its padding.
fn unpadded(f: &Frame) -> &[u8] {
    if f.flags & 0x8 == 0 {
        return &f.payload;
    }
    let pad = usize::from(f.payload.first().copied().unwrap_or(0));
    f.payload
        .get(1..f.payload.len().saturating_sub(pad))
        .unwrap_or_default()
}

/// Writes one frame.
///
/// # Errors
///
/// When `payload` is too long for a frame header, or writing fails.
pub async fn write_frame<W: AsyncWrite + Unpin>(
    w: &mut W,
    kind: u8,
    flags: u8,
    stream_id: u32,
    payload: &[u8],
) -> io::Result<()> {
    let len = u32::try_from(payload.len())
        .map_err(|_| io::Error::other("frame too large"))?
        .to_be_bytes();
    let mut head = [0u8; 9];
    head[..3].copy_from_slice(&len[1..]);
    head[3] = kind;
    head[4] = flags;
    head[5..].copy_from_slice(&(stream_id & 0x7fff_ffff).to_be_bytes());
    w.write_all(&head).await?;
    w.write_all(payload).await?;
    w.flush().await
}

/// Reads one frame; `None` on a clean end of stream between frames.
///
/// # Errors
///
/// When reading fails, the stream ends inside a frame, or a frame is over [`MAX_FRAME`].
pub async fn read_frame<R: AsyncRead + Unpin>(r: &mut R) -> io::Result<Option<Frame>> {
    let mut head = [0u8; 9];
    let mut got = 0;
    while got < head.len() {
        let n = r.read(&mut head[got..]).await?;
        if n == 0 {
            return if got == 0 {
                Ok(None)
            } else {
                Err(io::ErrorKind::UnexpectedEof.into())
            };
        }
        got += n;
    }
    let len = usize::from(head[0]) << 16 | usize::from(head[1]) << 8 | usize::from(head[2]);
    if len > MAX_FRAME {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("frame of {len} bytes"),
        ));
    }
    let mut payload = vec![0; len];
    r.read_exact(&mut payload).await?;
    Ok(Some(Frame {
        kind: head[3],
        flags: head[4],
        stream_id: u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff,
        payload,
    }))
}

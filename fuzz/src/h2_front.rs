//! `h2_front`: what a client sends on a connection served by h2-front.
//!
//! Input: three control bytes, then the client's bytes. The first control byte's bit 0 puts the
//! HTTP/2 preface in front of the client's bytes (so mutations rarely lose it), bit 1 turns the
//! `:authority` rewrite off; all three seed the sizes the bytes arrive in and are read with.
//!
//! The bytes go through [`NormalizedStream`] over an in-memory socket, once whole and once in
//! pieces of random size with random read buffers and spurious `Pending`s:
//!
//! - both reads give the same bytes, and every read makes progress;
//! - without the preface, or with the rewrite off, what h2 reads is what the client sent;
//! - with it, what h2 reads is the preface and frames: every other frame as sent, in order, every
//!   header block re-framed (no padding, frames of at most 16384 bytes, none interleaved), decoding
//!   with loona-hpack to fields whose `:authority` h2 accepts, until the block that h2 must refuse
//!   (`0x80`), after which the rest passes unchanged;
//! - the client's header blocks, gathered from its frames, decode with the front's decoder exactly
//!   as with loona-hpack (but for what h2 refuses and loona-hpack accepts), with the table within
//!   its size; the rewriter accepts the blocks the decoder accepts (up to its output cap), and its
//!   output is the same fields with each invalid `:authority` replaced by `localhost`;
//! - what the server writes back passes unchanged through the stream's write side, whatever the
//!   split.

use std::cell::RefCell;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use h2_front::NormalizedStream;
use h2_front::fuzzing::{
    Decoder, Fields, HEADER_TABLE_SIZE, Refused, Rewriter, authority_is_valid,
};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The HTTP/2 client connection preface.
pub const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// Control bytes before the client's bytes.
pub const CONTROL: usize = 3;
/// Bit 0 of the first control byte: put [`PREFACE`] in front of the client's bytes.
pub const ADD_PREFACE: u8 = 0x1;
/// Bit 1 of the first control byte: the front leaves `:authority` alone.
pub const NO_REWRITE: u8 = 0x2;

const HEADERS: u8 = 0x1;
const CONTINUATION: u8 = 0x9;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;
const MAX_FRAME: usize = 16_384;

/// Reads `data` as control bytes and a client's bytes (see the module docs) and checks them all.
pub fn check(data: &[u8]) {
    let Some((&control, client)) = data.split_first_chunk::<CONTROL>() else {
        return;
    };
    let mut input = Vec::with_capacity(PREFACE.len() + client.len());
    if control[0] & ADD_PREFACE != 0 {
        input.extend_from_slice(PREFACE);
    }
    input.extend_from_slice(client);
    let rewrite = control[0] & NO_REWRITE == 0;

    let whole = read_all(&input, rewrite, &mut Sizes::Whole);
    let mut sizes = Sizes::Random(u64::from_le_bytes([
        control[0], control[1], control[2], 0x9e, 0x37, 0x79, 0xb9, 0x7f,
    ]));
    let (split, stream) = read_all(&input, rewrite, &mut sizes);
    assert_eq!(
        whole.0, split,
        "what h2 reads depends on how the client's bytes arrived"
    );
    let out = split;

    let Some(frames) = input.strip_prefix(PREFACE) else {
        assert_eq!(out, input, "bytes without the HTTP/2 preface are changed");
        return;
    };
    if rewrite {
        reframed(frames, &out);
    } else {
        assert_eq!(out, input, "with the rewrite off the bytes are changed");
    }
    blocks_decode_alike(&header_blocks(frames));
    writes_pass(stream, client, &mut sizes);
}

/// Sizes of the pieces the socket hands over and of the reader's buffers.
enum Sizes {
    /// Everything at once.
    Whole,
    /// A xorshift generator's choices.
    Random(u64),
}

impl Sizes {
    fn next(&mut self) -> u64 {
        match self {
            Sizes::Whole => u64::MAX,
            Sizes::Random(state) => {
                let mut x = (*state).max(1);
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *state = x;
                x
            }
        }
    }

    /// Mostly small pieces, now and then one of up to 20 000 bytes.
    fn piece(&mut self) -> usize {
        match self {
            Sizes::Whole => usize::MAX,
            Sizes::Random(_) => {
                let r = self.next();
                let largest = if r.is_multiple_of(8) { 20_000 } else { 64 };
                1 + usize::try_from((r >> 8) % largest).unwrap_or(0)
            }
        }
    }

    /// Whether the socket has nothing this time.
    fn stall(&mut self) -> bool {
        matches!(self, Sizes::Random(_)) && self.next().is_multiple_of(5)
    }
}

/// An in-memory socket: reads give the client's bytes in pieces, writes keep what they get.
struct Socket<'a> {
    input: &'a [u8],
    pos: usize,
    sizes: Sizes,
    /// Shared with the test: the stream owns the socket and does not give it back.
    written: Rc<RefCell<Vec<u8>>>,
}

/// A stream over a socket, and what the socket was written.
type Connection<'a> = (NormalizedStream<Socket<'a>>, Rc<RefCell<Vec<u8>>>);

impl AsyncRead for Socket<'_> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.sizes.stall() {
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        let rest = &this.input[this.pos..];
        let n = rest.len().min(buf.remaining()).min(this.sizes.piece());
        buf.put_slice(&rest[..n]);
        this.pos += n;
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Socket<'_> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.sizes.stall() {
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        let n = buf.len().min(this.sizes.piece());
        this.written.borrow_mut().extend_from_slice(&buf[..n]);
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// Everything h2 would read from the client's `input`, read with buffers of `sizes`; and the
/// connection, for the write side.
fn read_all<'a>(input: &'a [u8], rewrite: bool, sizes: &mut Sizes) -> (Vec<u8>, Connection<'a>) {
    let written = Rc::default();
    let socket = Socket {
        input,
        pos: 0,
        sizes: match sizes {
            Sizes::Whole => Sizes::Whole,
            Sizes::Random(_) => Sizes::Random(sizes.next()),
        },
        written: Rc::clone(&written),
    };
    let mut stream = NormalizedStream::new(socket, "fuzz".to_owned(), rewrite);
    let mut cx = Context::from_waker(Waker::noop());
    let mut out = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    // Each poll consumes input, produces output or stalls once in a row; far more is a spin.
    let mut polls_left = 64 + 16 * input.len();
    loop {
        assert!(polls_left > 0, "the front stopped making progress");
        polls_left -= 1;
        let len = sizes.piece().min(buf.len());
        let mut read = ReadBuf::new(&mut buf[..len]);
        match Pin::new(&mut stream).poll_read(&mut cx, &mut read) {
            Poll::Pending => {}
            Poll::Ready(Ok(())) if read.filled().is_empty() => break,
            Poll::Ready(Ok(())) => {
                polls_left += 1;
                out.extend_from_slice(read.filled());
            }
            Poll::Ready(Err(e)) => panic!("the front failed a read: {e}"),
        }
    }
    // A byte can at most refer to a whole dynamic table entry; a fault adds one 10-byte frame.
    assert!(
        out.len() <= 34 + input.len() * (HEADER_TABLE_SIZE + 4),
        "{} bytes out of {}",
        out.len(),
        input.len()
    );
    (out, (stream, written))
}

/// One frame as it was on the wire.
struct Frame<'a> {
    kind: u8,
    flags: u8,
    stream_id: u32,
    payload: &'a [u8],
    /// Header and payload.
    raw: &'a [u8],
}

/// The whole frames at the start of `bytes` (a partial one at the end is left out).
fn frames(mut bytes: &[u8]) -> Vec<Frame<'_>> {
    let mut out = Vec::new();
    while bytes.len() >= 9 {
        let len = usize::from(bytes[0]) << 16 | usize::from(bytes[1]) << 8 | usize::from(bytes[2]);
        if bytes.len() < 9 + len {
            break;
        }
        let (raw, rest) = bytes.split_at(9 + len);
        out.push(Frame {
            kind: raw[3],
            flags: raw[4],
            stream_id: u32::from_be_bytes([raw[5], raw[6], raw[7], raw[8]]) & 0x7fff_ffff,
            payload: &raw[9..],
            raw,
        });
        bytes = rest;
    }
    out
}

/// What h2 reads (`out`) is the client's `frames` with its header blocks rewritten, up to a fault.
fn reframed(frames_in: &[u8], out: &[u8]) {
    let rest = out.strip_prefix(PREFACE).expect("the preface is passed on");
    let others: Vec<&[u8]> = frames(frames_in)
        .iter()
        .filter(|f| f.kind != HEADERS && f.kind != CONTINUATION)
        .map(|f| f.raw)
        .collect();
    let mut others = others.into_iter();
    // h2's table stays empty: the front never indexes.
    let mut h2 = loona_hpack::Decoder::new();
    let mut block: Option<(u32, Vec<u8>)> = None;
    for frame in frames(rest) {
        match frame.kind {
            HEADERS if frame.payload == [0x80] && frame.flags == END_HEADERS => {
                assert!(block.is_none(), "a fault inside a re-framed block");
                // What follows passes unchanged, frames or not.
                return;
            }
            HEADERS | CONTINUATION => {
                assert!(
                    frame.payload.len() <= MAX_FRAME,
                    "a header frame over 16384 bytes"
                );
                assert_eq!(frame.flags & PADDED, 0, "a re-framed block kept padding");
                let fragment = if frame.kind == HEADERS {
                    assert!(block.is_none(), "HEADERS inside a re-framed block");
                    if frame.flags & PRIORITY != 0 {
                        &frame.payload[5..]
                    } else {
                        frame.payload
                    }
                } else {
                    let (stream_id, _) = block.as_ref().expect("CONTINUATION without HEADERS");
                    assert_eq!(*stream_id, frame.stream_id, "a block split across streams");
                    frame.payload
                };
                let (_, bytes) = block.get_or_insert_with(|| (frame.stream_id, Vec::new()));
                bytes.extend_from_slice(fragment);
                if frame.flags & END_HEADERS != 0 {
                    let (_, bytes) = block.take().expect("a block");
                    let fields = h2
                        .decode(&bytes)
                        .unwrap_or_else(|e| panic!("h2 reads a block that does not decode: {e:?}"));
                    for (name, value) in fields {
                        assert!(
                            name != b":authority" || authority_is_valid(&value),
                            "h2 reads :authority {}",
                            value.escape_ascii()
                        );
                    }
                }
            }
            _ => {
                assert!(block.is_none(), "a frame inside a re-framed block");
                assert_eq!(
                    Some(frame.raw),
                    others.next(),
                    "a frame that is not a header block changed or moved"
                );
            }
        }
    }
}

/// The client's complete header blocks, as HEADERS and CONTINUATION frames carry them, up to the
/// first frame that breaks a block.
fn header_blocks(frames_in: &[u8]) -> Vec<Vec<u8>> {
    let mut blocks = Vec::new();
    let mut open: Option<(u32, Vec<u8>)> = None;
    for frame in frames(frames_in) {
        let fragment = match (frame.kind, &open) {
            (HEADERS, None) => {
                let mut p = frame.payload;
                if frame.flags & PADDED != 0 {
                    let Some((&pad, rest)) = p.split_first() else {
                        break;
                    };
                    let Some(keep) = rest.len().checked_sub(usize::from(pad)) else {
                        break;
                    };
                    p = &rest[..keep];
                }
                if frame.flags & PRIORITY != 0 {
                    let Some(rest) = p.get(5..) else {
                        break;
                    };
                    p = rest;
                }
                p
            }
            (CONTINUATION, Some((stream_id, _))) if *stream_id == frame.stream_id => frame.payload,
            (HEADERS | CONTINUATION, _) | (_, Some(_)) => break,
            _ => continue,
        };
        let (_, bytes) = open.get_or_insert_with(|| (frame.stream_id, Vec::new()));
        bytes.extend_from_slice(fragment);
        if frame.flags & END_HEADERS != 0 {
            blocks.extend(open.take().map(|(_, b)| b));
        }
    }
    blocks
}

/// The front's decoder and rewriter against loona-hpack, block after block of one connection.
fn blocks_decode_alike(blocks: &[Vec<u8>]) {
    let mut ours = Decoder::new();
    let mut loona = loona_hpack::Decoder::new();
    loona.set_max_allowed_table_size(HEADER_TABLE_SIZE);
    let mut rewriter = Rewriter::default();
    for block in blocks {
        let got = ours.decode(block);
        assert!(ours.table_size() <= HEADER_TABLE_SIZE);
        if matches!(got, Err(Refused::SizeUpdateAfterField | Refused::TooLarge)) {
            return;
        }
        let want: Result<Fields, ()> = loona.decode(block).map_err(|_| ());
        assert_eq!(
            got.clone().map_err(|_| ()),
            want,
            "the front's decoder and loona-hpack differ on {block:x?} (ours: {got:?})"
        );
        let mut out = Vec::new();
        match (&got, rewriter.rewrite(block, &mut out)) {
            (Ok(fields), Ok(replaced)) => {
                let expected: Fields = fields
                    .iter()
                    .map(|(n, v)| {
                        if n == b":authority" && !authority_is_valid(v) {
                            (n.clone(), b"localhost".to_vec())
                        } else {
                            (n.clone(), v.clone())
                        }
                    })
                    .collect();
                let invalid = fields
                    .iter()
                    .filter(|(n, v)| n == b":authority" && !authority_is_valid(v))
                    .count();
                assert_eq!(replaced, invalid, "replaced count");
                let rewritten = loona_hpack::Decoder::new()
                    .decode(&out)
                    .expect("a rewritten block decodes");
                assert_eq!(
                    rewritten, expected,
                    "the rewrite changed more than :authority"
                );
            }
            (Ok(_), Err(reason)) => assert_eq!(
                reason, "decoded header block larger than 1 MiB",
                "the rewriter refused a block the decoder accepts"
            ),
            (Err(e), Ok(_)) => panic!("the rewriter accepted a block the decoder refuses: {e:?}"),
            (Err(_), Err(_)) => {}
        }
        if got.is_err() {
            return;
        }
    }
}

/// What the server writes (here the client's own bytes, which hold frames) reaches the socket
/// unchanged, in pieces and with stalls, through `poll_write` and `poll_write_vectored`.
fn writes_pass(stream: Connection<'_>, bytes: &[u8], sizes: &mut Sizes) {
    let (mut stream, written) = stream;
    let mut cx = Context::from_waker(Waker::noop());
    let mut sent = 0;
    let mut polls_left = 64 + 16 * bytes.len();
    while sent < bytes.len() {
        assert!(polls_left > 0, "the front stopped taking writes");
        polls_left -= 1;
        let end = bytes.len().min(sent.saturating_add(sizes.piece()));
        let piece = &bytes[sent..end];
        let polled = if sizes.next().is_multiple_of(2) {
            Pin::new(&mut stream).poll_write(&mut cx, piece)
        } else {
            let (a, b) = piece.split_at(piece.len() / 2);
            let slices = [io::IoSlice::new(a), io::IoSlice::new(b)];
            Pin::new(&mut stream).poll_write_vectored(&mut cx, &slices)
        };
        match polled {
            Poll::Pending => {}
            Poll::Ready(Ok(n)) => {
                assert!(n <= piece.len());
                sent += n;
            }
            Poll::Ready(Err(e)) => panic!("the front failed a write: {e}"),
        }
    }
    assert_eq!(
        *written.borrow(),
        bytes,
        "the write side changed what the server wrote"
    );
}

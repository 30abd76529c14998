//! Client-to-server half of the front: a sans-IO state machine that passes
//! bytes through, except complete header blocks, which it rewrites.

use super::{BlockRewriter, hpack_out};
use tokio::io::ReadBuf;

/// The HTTP/2 client connection preface (RFC 9113 §3.4).
pub(super) const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// Frame header length.
pub(super) const HEAD_LEN: usize = 9;
/// The smallest `SETTINGS_MAX_FRAME_SIZE`: valid whatever h2 advertises.
pub(super) const MAX_FRAME: usize = 16_384;
/// Cap on one client header block as received (all fragments).
pub(super) const MAX_BLOCK: usize = 256 * 1024;
/// Frames per header block: 16 full frames make 256 KiB, the rest is slack
/// for badly packed clients; beyond it only a CONTINUATION flood remains.
const MAX_FRAMES_PER_BLOCK: usize = 32;
/// Buffers grown above this are released after use so one large block does
/// not pin memory for the connection's lifetime.
const KEEP_CAPACITY: usize = 64 * 1024;

pub(super) const TYPE_HEADERS: u8 = 0x1;
pub(super) const TYPE_RST_STREAM: u8 = 0x3;
pub(super) const TYPE_GOAWAY: u8 = 0x7;
pub(super) const TYPE_CONTINUATION: u8 = 0x9;
pub(super) const FLAG_END_STREAM: u8 = 0x1;
pub(super) const FLAG_END_HEADERS: u8 = 0x4;
pub(super) const FLAG_PADDED: u8 = 0x8;
pub(super) const FLAG_PRIORITY: u8 = 0x20;

/// Something the read side did that the owner should log.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum InboundEvent {
    /// `:authority` was replaced on a request header block.
    Rewrote {
        /// Stream of the header block.
        stream_id: u32,
        /// First replaced value (at most 256 bytes).
        original: Vec<u8>,
        /// How many `:authority` fields the block had replaced.
        replaced: usize,
    },
    /// The connection was handed a poisoned header block and switched to
    /// pass-through; h2 will close it.
    Fault {
        /// Stream the poisoned block was sent on.
        stream_id: u32,
        /// Why.
        reason: &'static str,
    },
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Comparing the first bytes with the preface while passing them on.
    Preface(usize),
    Frames,
    /// Bytes flow unchanged; `http2` records whether the preface was seen.
    Passthrough {
        http2: bool,
    },
}

#[derive(Clone, Copy)]
enum State {
    Head,
    /// Payload of a frame we do not rewrite.
    Forward(usize),
    /// Payload of a HEADERS/CONTINUATION frame, gathered into `frame`.
    Collect(usize),
}

/// A header block being gathered from HEADERS + CONTINUATION frames.
struct Pending {
    stream_id: u32,
    end_stream: bool,
    priority: Option<[u8; 5]>,
    frames: usize,
    /// Flags of the frame currently being collected.
    flags: u8,
}

/// Client-to-server state machine of one connection.
pub(crate) struct Inbound {
    mode: Mode,
    /// When false, HTTP/2 is only recognised (for the write-side observer)
    /// and every byte passes unchanged.
    rewrite: bool,
    state: State,
    head: [u8; HEAD_LEN],
    head_got: usize,
    frame: Vec<u8>,
    block: Vec<u8>,
    pending: Option<Pending>,
    rewriter: BlockRewriter,
    encoded: Vec<u8>,
    /// Bytes we produced (frame headers, rewritten blocks) not yet handed on.
    out: Vec<u8>,
    out_pos: usize,
}

impl Default for Inbound {
    fn default() -> Self {
        Self::new(true)
    }
}

impl Inbound {
    /// State of a freshly accepted connection; `rewrite` false leaves header
    /// blocks alone.
    #[must_use]
    pub(crate) fn new(rewrite: bool) -> Self {
        Self {
            mode: Mode::Preface(0),
            rewrite,
            state: State::Head,
            head: [0; HEAD_LEN],
            head_got: 0,
            frame: Vec::new(),
            block: Vec::new(),
            pending: None,
            rewriter: BlockRewriter::new(),
            encoded: Vec::new(),
            out: Vec::new(),
            out_pos: 0,
        }
    }

    /// Whether the client sent the HTTP/2 preface (stays true after a fault).
    #[must_use]
    pub(crate) fn is_http2(&self) -> bool {
        matches!(self.mode, Mode::Frames | Mode::Passthrough { http2: true })
    }

    /// Whether the first bytes ruled HTTP/2 out.
    #[must_use]
    pub(crate) fn is_not_http2(&self) -> bool {
        self.mode == Mode::Passthrough { http2: false }
    }

    /// Whether every further byte passes unchanged and nothing is queued, so
    /// the caller may read straight into its destination.
    #[must_use]
    pub(crate) fn is_transparent(&self) -> bool {
        matches!(self.mode, Mode::Passthrough { .. }) && self.out_pos == self.out.len()
    }

    /// Consumes a prefix of `input`, writing what h2 should read into `dst`,
    /// and returns its length. Stops only when `input` is used up or `dst`
    /// is full, so a call given room in `dst` that wrote nothing consumed
    /// all of `input`.
    pub(crate) fn process(
        &mut self,
        input: &[u8],
        dst: &mut ReadBuf<'_>,
        events: &mut Vec<InboundEvent>,
    ) -> usize {
        let mut pos = 0;
        while self.drain_out(dst) && pos < input.len() {
            let rest = &input[pos..];
            let used = match self.mode {
                Mode::Preface(matched) => self.preface(matched, rest, dst),
                Mode::Passthrough { .. } => copy(rest, rest.len(), dst),
                Mode::Frames => match self.state {
                    State::Head => {
                        let n = (HEAD_LEN - self.head_got).min(rest.len());
                        self.head[self.head_got..self.head_got + n].copy_from_slice(&rest[..n]);
                        self.head_got += n;
                        if self.head_got == HEAD_LEN {
                            self.head_got = 0;
                            self.on_head(events);
                        }
                        n
                    }
                    State::Forward(left) => {
                        let n = copy(rest, left, dst);
                        self.state = if n == left {
                            State::Head
                        } else {
                            State::Forward(left - n)
                        };
                        n
                    }
                    State::Collect(left) => {
                        let n = left.min(rest.len());
                        self.frame.extend_from_slice(&rest[..n]);
                        if n == left {
                            self.on_frame_end(events);
                        } else {
                            self.state = State::Collect(left - n);
                        }
                        n
                    }
                },
            };
            if used == 0 {
                break;
            }
            pos += used;
        }
        pos
    }

    /// Hands queued output to `dst`; true once nothing is left queued.
    fn drain_out(&mut self, dst: &mut ReadBuf<'_>) -> bool {
        if self.out_pos < self.out.len() {
            self.out_pos += copy(&self.out[self.out_pos..], usize::MAX, dst);
            if self.out_pos < self.out.len() {
                return false;
            }
        }
        self.out.clear();
        self.out_pos = 0;
        release_if_large(&mut self.out);
        true
    }

    fn preface(&mut self, matched: usize, rest: &[u8], dst: &mut ReadBuf<'_>) -> usize {
        let want = &PREFACE[matched..];
        let n = want.len().min(rest.len());
        if rest[..n] != want[..n] {
            // Not HTTP/2 (an HTTP/1.1 client of the status API): what was
            // already passed on was passed unchanged, so just keep going.
            self.mode = Mode::Passthrough { http2: false };
            return copy(rest, rest.len(), dst);
        }
        let n = copy(rest, n, dst);
        self.mode = if matched + n < PREFACE.len() {
            Mode::Preface(matched + n)
        } else if self.rewrite {
            Mode::Frames
        } else {
            Mode::Passthrough { http2: true }
        };
        n
    }

    fn on_head(&mut self, events: &mut Vec<InboundEvent>) {
        let h = self.head;
        let len = usize::from(h[0]) << 16 | usize::from(h[1]) << 8 | usize::from(h[2]);
        let (kind, flags) = (h[3], h[4]);
        let stream_id = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff;
        if let Some(pending) = &mut self.pending {
            let expected = pending.stream_id;
            if kind != TYPE_CONTINUATION {
                return self.fault(
                    expected,
                    "header block interrupted by another frame",
                    events,
                );
            }
            if stream_id != expected {
                return self.fault(expected, "CONTINUATION on a different stream", events);
            }
            if len > MAX_FRAME {
                return self.fault(
                    expected,
                    "CONTINUATION frame larger than 16384 bytes",
                    events,
                );
            }
            pending.flags = flags;
            return self.start_collect(len, events);
        }
        match kind {
            TYPE_HEADERS if len > MAX_FRAME => {
                self.fault(stream_id, "HEADERS frame larger than 16384 bytes", events);
            }
            TYPE_HEADERS => {
                self.pending = Some(Pending {
                    stream_id,
                    end_stream: flags & FLAG_END_STREAM != 0,
                    priority: None,
                    frames: 0,
                    flags,
                });
                self.start_collect(len, events);
            }
            TYPE_CONTINUATION => self.fault(stream_id, "CONTINUATION without HEADERS", events),
            _ => {
                self.out.extend_from_slice(&h);
                self.state = if len == 0 {
                    State::Head
                } else {
                    State::Forward(len)
                };
            }
        }
    }

    fn start_collect(&mut self, len: usize, events: &mut Vec<InboundEvent>) {
        self.frame.clear();
        if len == 0 {
            self.on_frame_end(events);
        } else {
            self.state = State::Collect(len);
        }
    }

    fn on_frame_end(&mut self, events: &mut Vec<InboundEvent>) {
        self.state = State::Head;
        let Some(pending) = &mut self.pending else {
            return;
        };
        let stream_id = pending.stream_id;
        let mut fragment = &self.frame[..];
        if pending.frames == 0 {
            if pending.flags & FLAG_PADDED != 0 {
                let Some((&pad, rest)) = fragment.split_first() else {
                    return self.fault(
                        stream_id,
                        "PADDED HEADERS frame without pad length",
                        events,
                    );
                };
                let Some(unpadded) = rest.len().checked_sub(usize::from(pad)) else {
                    return self.fault(stream_id, "HEADERS padding longer than payload", events);
                };
                fragment = &rest[..unpadded];
            }
            if pending.flags & FLAG_PRIORITY != 0 {
                // Kept and re-sent, so h2 still applies its own checks
                // (e.g. a stream depending on itself).
                let Some((fields, rest)) = fragment.split_first_chunk::<5>() else {
                    return self.fault(stream_id, "HEADERS priority fields truncated", events);
                };
                pending.priority = Some(*fields);
                fragment = rest;
            }
        }
        pending.frames += 1;
        if pending.frames > MAX_FRAMES_PER_BLOCK {
            return self.fault(stream_id, "too many CONTINUATION frames", events);
        }
        if self.block.len() + fragment.len() > MAX_BLOCK {
            return self.fault(stream_id, "header block larger than 256 KiB", events);
        }
        self.block.extend_from_slice(fragment);
        if pending.flags & FLAG_END_HEADERS != 0 {
            self.finish_block(events);
        }
    }

    fn finish_block(&mut self, events: &mut Vec<InboundEvent>) {
        let Some(pending) = self.pending.take() else {
            return;
        };
        self.encoded.clear();
        match self.rewriter.rewrite(&self.block, &mut self.encoded) {
            Ok(outcome) => {
                hpack_out::emit_block(
                    &mut self.out,
                    pending.stream_id,
                    pending.end_stream,
                    pending.priority,
                    &self.encoded,
                );
                if outcome.replaced > 0 {
                    events.push(InboundEvent::Rewrote {
                        stream_id: pending.stream_id,
                        original: outcome.original,
                        replaced: outcome.replaced,
                    });
                }
            }
            Err(reason) => self.fault(pending.stream_id, reason, events),
        }
        self.block.clear();
        release_if_large(&mut self.block);
        release_if_large(&mut self.encoded);
        release_if_large(&mut self.frame);
    }

    /// Gives h2 a block it must reject as an HPACK decoding error (indexed
    /// field 0, RFC 7541 §6.1), a connection error; h2 then sends GOAWAY.
    /// We stop interpreting the connection: h2 decides what happens.
    fn fault(&mut self, stream_id: u32, reason: &'static str, events: &mut Vec<InboundEvent>) {
        hpack_out::push_head(&mut self.out, 1, TYPE_HEADERS, FLAG_END_HEADERS, stream_id);
        self.out.push(0x80);
        self.mode = Mode::Passthrough { http2: true };
        self.pending = None;
        self.frame = Vec::new();
        self.block = Vec::new();
        self.encoded = Vec::new();
        events.push(InboundEvent::Fault { stream_id, reason });
    }
}

/// Copies up to `limit` bytes of `src` into `dst`; returns how many.
fn copy(src: &[u8], limit: usize, dst: &mut ReadBuf<'_>) -> usize {
    let n = src.len().min(limit).min(dst.remaining());
    dst.put_slice(&src[..n]);
    n
}

fn release_if_large(v: &mut Vec<u8>) {
    if v.capacity() > KEEP_CAPACITY && v.is_empty() {
        *v = Vec::new();
    }
}

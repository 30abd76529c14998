//! The `AsyncRead + AsyncWrite` wrapper, and the observer of what h2 writes.

use super::error_code_name;
use super::frame::{HEAD_LEN, Inbound, InboundEvent, TYPE_GOAWAY, TYPE_RST_STREAM};
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Read buffer size: one full frame of the minimum maximum size plus header.
const READ_BUF: usize = 16 * 1024 + HEAD_LEN;
/// GOAWAY debug data kept for the log.
const DEBUG_DATA_MAX: usize = 256;

/// An accepted connection whose client header blocks are normalised for h2
/// (see the crate docs); otherwise it behaves exactly like `S`.
///
/// Reading gives h2 the client's bytes with every HTTP/2 header block
/// re-encoded and an `:authority` h2 would refuse replaced with `localhost`;
/// an HTTP/1 connection (no HTTP/2 preface) passes unchanged. Writing passes
/// unchanged too, watched for the `RST_STREAM` and `GOAWAY` errors h2 sends,
/// which are logged at warn with `peer`.
pub struct NormalizedStream<S> {
    inner: S,
    peer: String,
    inbound: Inbound,
    rbuf: Box<[u8]>,
    rstart: usize,
    rend: usize,
    events: Vec<InboundEvent>,
    observer: WriteObserver,
}

impl<S> NormalizedStream<S> {
    /// Wraps `inner`; `peer` identifies the client in log lines. With
    /// `normalize_authority` false header blocks pass unchanged (old Go
    /// clients then get `PROTOCOL_ERROR`), but h2's errors are still logged.
    pub fn new(inner: S, peer: String, normalize_authority: bool) -> Self {
        Self {
            inner,
            peer,
            inbound: Inbound::new(normalize_authority),
            rbuf: vec![0; READ_BUF].into_boxed_slice(),
            rstart: 0,
            rend: 0,
            events: Vec::new(),
            observer: WriteObserver::default(),
        }
    }

    fn log_inbound(&mut self) {
        for event in self.events.drain(..) {
            match event {
                InboundEvent::Rewrote {
                    stream_id,
                    original,
                    replaced,
                } => tracing::debug!(
                    peer = %self.peer,
                    stream_id,
                    original = %original.escape_ascii(),
                    replaced,
                    "replaced an invalid HTTP/2 :authority with localhost"
                ),
                InboundEvent::Fault { stream_id, reason } => tracing::warn!(
                    peer = %self.peer,
                    stream_id,
                    reason,
                    "rejected an HTTP/2 header block; the server will close the connection"
                ),
            }
        }
    }

    /// Runs the observer on bytes the inner stream accepted. Observed from
    /// the first byte whatever the protocol (h2 may write SETTINGS before
    /// the preface has been read), but only reported for HTTP/2.
    fn observe_written(&mut self, written: &[u8]) {
        if self.observer.disabled {
            return;
        }
        if self.inbound.is_not_http2() {
            self.observer.disabled = true;
            return;
        }
        let http2 = self.inbound.is_http2();
        let peer = &self.peer;
        self.observer.observe(written, |e| {
            if !http2 {
                return;
            }
            if e.frame_type == TYPE_GOAWAY {
                tracing::warn!(
                    peer = %peer,
                    last_stream_id = e.stream_id,
                    error_code = error_code_name(e.code),
                    code = e.code,
                    debug_data = %e.debug_data.escape_ascii(),
                    "HTTP/2 connection closed with GOAWAY sent to the client"
                );
            } else {
                tracing::warn!(
                    peer = %peer,
                    stream_id = e.stream_id,
                    error_code = error_code_name(e.code),
                    code = e.code,
                    "HTTP/2 stream reset sent to the client"
                );
            }
        });
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for NormalizedStream<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        dst: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if dst.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        loop {
            let before = dst.filled().len();
            let input = &this.rbuf[this.rstart..this.rend];
            let consumed = this.inbound.process(input, dst, &mut this.events);
            this.rstart += consumed;
            if !this.events.is_empty() {
                this.log_inbound();
            }
            if dst.filled().len() > before {
                return Poll::Ready(Ok(()));
            }
            if this.rstart != this.rend {
                // `process` promises this cannot happen; fail rather than spin.
                return Poll::Ready(Err(io::Error::other("h2 front made no progress")));
            }
            this.rstart = 0;
            this.rend = 0;
            if this.inbound.is_transparent() {
                // For good: HTTP/1 connections and faulted ones stop paying
                // for the buffer.
                this.rbuf = Box::default();
                return Pin::new(&mut this.inner).poll_read(cx, dst);
            }
            let mut rb = ReadBuf::new(&mut this.rbuf);
            ready!(Pin::new(&mut this.inner).poll_read(cx, &mut rb))?;
            let n = rb.filled().len();
            if n == 0 {
                return Poll::Ready(Ok(()));
            }
            this.rend = n;
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for NormalizedStream<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let n = ready!(Pin::new(&mut this.inner).poll_write(cx, buf))?;
        this.observe_written(&buf[..n.min(buf.len())]);
        Poll::Ready(Ok(n))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let n = ready!(Pin::new(&mut this.inner).poll_write_vectored(cx, bufs))?;
        let mut left = n;
        for buf in bufs {
            if left == 0 {
                break;
            }
            let take = left.min(buf.len());
            this.observe_written(&buf[..take]);
            left -= take;
        }
        Poll::Ready(Ok(n))
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// An error h2 reported to the client, seen on the write side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ObservedError {
    /// `TYPE_RST_STREAM` or `TYPE_GOAWAY`.
    pub(crate) frame_type: u8,
    /// The reset stream, or for GOAWAY the last stream id it names.
    pub(crate) stream_id: u32,
    /// HTTP/2 error code.
    pub(crate) code: u32,
    /// GOAWAY debug data, at most 256 bytes.
    pub(crate) debug_data: Vec<u8>,
}

/// Follows server-to-client frames through arbitrarily split writes, looking
/// only at frame headers and the first bytes of `RST_STREAM`/`GOAWAY` payloads.
#[derive(Debug, Default)]
pub(crate) struct WriteObserver {
    head: [u8; HEAD_LEN],
    head_got: usize,
    /// Payload bytes of the current frame not yet seen.
    left: usize,
    /// For `RST_STREAM`/`GOAWAY`: the fixed payload fields gathered so far.
    fixed: [u8; 8],
    fixed_got: usize,
    fixed_len: usize,
    /// Current frame type when it is `RST_STREAM` or `GOAWAY`.
    tracking: Option<u8>,
    stream_id: u32,
    debug_data: Vec<u8>,
    disabled: bool,
}

impl WriteObserver {
    /// Feeds written bytes; `report` is called for each completed
    /// `RST_STREAM`/`GOAWAY` whose code is neither `NO_ERROR` nor `CANCEL`.
    pub(crate) fn observe(&mut self, mut data: &[u8], mut report: impl FnMut(ObservedError)) {
        while !data.is_empty() {
            if self.head_got < HEAD_LEN {
                let n = (HEAD_LEN - self.head_got).min(data.len());
                self.head[self.head_got..self.head_got + n].copy_from_slice(&data[..n]);
                self.head_got += n;
                data = &data[n..];
                if self.head_got == HEAD_LEN {
                    self.start_frame(&mut report);
                }
                continue;
            }
            let n = self.left.min(data.len());
            let (payload, rest) = data.split_at(n);
            data = rest;
            self.left -= n;
            if self.tracking.is_some() {
                self.gather(payload);
            }
            if self.left == 0 {
                self.end_frame(&mut report);
            }
        }
    }

    fn start_frame(&mut self, report: &mut impl FnMut(ObservedError)) {
        let h = self.head;
        self.left = usize::from(h[0]) << 16 | usize::from(h[1]) << 8 | usize::from(h[2]);
        self.stream_id = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff;
        self.fixed_got = 0;
        self.debug_data.clear();
        (self.tracking, self.fixed_len) = match h[3] {
            TYPE_RST_STREAM => (Some(TYPE_RST_STREAM), 4),
            TYPE_GOAWAY => (Some(TYPE_GOAWAY), 8),
            _ => (None, 0),
        };
        if self.left == 0 {
            self.end_frame(report);
        }
    }

    fn gather(&mut self, mut payload: &[u8]) {
        if self.fixed_got < self.fixed_len {
            let n = (self.fixed_len - self.fixed_got).min(payload.len());
            self.fixed[self.fixed_got..self.fixed_got + n].copy_from_slice(&payload[..n]);
            self.fixed_got += n;
            payload = &payload[n..];
        }
        if self.tracking == Some(TYPE_GOAWAY) {
            let room = DEBUG_DATA_MAX - self.debug_data.len();
            self.debug_data
                .extend_from_slice(&payload[..room.min(payload.len())]);
        }
    }

    fn end_frame(&mut self, report: &mut impl FnMut(ObservedError)) {
        self.head_got = 0;
        let Some(frame_type) = self.tracking.take() else {
            return;
        };
        // A frame too short to carry its error code is not ours to judge.
        if self.fixed_got < self.fixed_len {
            return;
        }
        let f = self.fixed;
        let (stream_id, code) = if frame_type == TYPE_GOAWAY {
            (
                u32::from_be_bytes([f[0], f[1], f[2], f[3]]) & 0x7fff_ffff,
                u32::from_be_bytes([f[4], f[5], f[6], f[7]]),
            )
        } else {
            (self.stream_id, u32::from_be_bytes([f[0], f[1], f[2], f[3]]))
        };
        if code == 0x0 || code == 0x8 {
            return;
        }
        report(ObservedError {
            frame_type,
            stream_id,
            code,
            debug_data: std::mem::take(&mut self.debug_data),
        });
    }
}

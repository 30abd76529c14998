//! A server's side of a SPDY/3.1 connection over any `AsyncRead + AsyncWrite`: it accepts the
//! streams the client opens (replying SYN_REPLY before anything else is written on them),
//! carries their data both ways, answers PINGs, and ends with GOAWAY.
//!
//! Two tasks per connection: a reader that decodes frames and hands each stream's data to a
//! bounded channel, and a writer that encodes what the streams and the reader queue. When a
//! stream's channel is full the reader waits, so the client's bytes stay in the socket (TCP's
//! backpressure, the way spdystream's unbuffered stream channels stall its frame loop); memory
//! per connection stays within one frame plus the channels.
//!
//! Flow control: client-go's SPDY transport, moby/spdystream, neither sends nor reads
//! WINDOW_UPDATE (it speaks SPDY/3 without it). Waiting on its windows would stall every exec
//! after 64 KiB, so this side does not hold its sends to the client's window; it does send
//! WINDOW_UPDATEs (stream and session) as it takes data off the socket, so a client that does
//! count windows keeps sending. Bounded buffering, not the window, is what limits memory.

use std::collections::HashMap;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::{CancellationToken, PollSender};

use super::{
    DEFAULT_INITIAL_WINDOW, Frame, FrameDecoder, FrameEncoder, Headers, Limits, SynStream, goaway,
    rst,
};
use crate::{Error, Result};

/// What a session allows and how long it waits.
#[derive(Debug, Clone, Copy)]
pub struct SessionConfig {
    /// The frame decoder's limits.
    pub limits: Limits,
    /// Streams the client may have open (sending) at once; more are refused (REFUSED_STREAM).
    pub max_streams: usize,
    /// Data frames buffered per stream before the reader waits for the stream's reader.
    pub stream_buffer: usize,
    /// The largest data frame this side sends; longer writes are split.
    pub max_write_frame: usize,
    /// A client that sends nothing for this long is sent GOAWAY and dropped (kubelet's
    /// `StreamIdleTimeout` is 4 hours).
    pub idle_timeout: Duration,
    /// One write to the socket may take this long.
    pub write_timeout: Duration,
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            limits: Limits::default(),
            max_streams: 64,
            stream_buffer: 16,
            max_write_frame: 32 * 1024,
            idle_timeout: Duration::from_secs(4 * 60 * 60),
            write_timeout: Duration::from_secs(30),
        }
    }
}

/// A stream the client opened.
#[derive(Debug)]
pub struct Stream {
    id: u32,
    headers: Headers,
    inbound: mpsc::Receiver<Vec<u8>>,
    writer: StreamWriter,
}

impl Stream {
    /// The stream's id.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The headers of its SYN_STREAM.
    pub fn headers(&self) -> &Headers {
        &self.headers
    }

    /// The next data the client sent; `None` once it sent FIN, reset the stream, or the session
    /// ended.
    pub async fn read(&mut self) -> Option<Vec<u8>> {
        self.inbound.recv().await
    }

    /// A handle to write to the stream, usable apart from reading.
    pub fn writer(&self) -> StreamWriter {
        self.writer.clone()
    }

    /// Splits the stream into its headers, a byte reader of what the client sends, and its
    /// writer.
    pub fn into_parts(self) -> (Headers, StreamReader, StreamWriter) {
        (
            self.headers,
            StreamReader::from_channel(self.inbound),
            self.writer,
        )
    }
}

/// The client's data on one stream as an [`AsyncRead`]; EOF once the client sent FIN, reset
/// the stream, or the session ended. Holds at most one data frame beyond the stream's channel.
#[derive(Debug)]
pub struct StreamReader {
    inbound: mpsc::Receiver<Vec<u8>>,
    chunk: Vec<u8>,
    at: usize,
}

impl StreamReader {
    /// A reader of the chunks `inbound` delivers (the WebSocket transport feeds its channels
    /// through one too).
    pub(crate) fn from_channel(inbound: mpsc::Receiver<Vec<u8>>) -> StreamReader {
        StreamReader {
            inbound,
            chunk: Vec::new(),
            at: 0,
        }
    }

    /// The next chunk as it came, after whatever part of the last one `read` left; `None` at
    /// EOF.
    pub async fn next_chunk(&mut self) -> Option<Vec<u8>> {
        if self.at < self.chunk.len() {
            let rest = self.chunk.split_off(self.at);
            self.chunk.clear();
            self.at = 0;
            return Some(rest);
        }
        self.inbound.recv().await
    }
}

impl AsyncRead for StreamReader {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        while this.at >= this.chunk.len() {
            match ready!(this.inbound.poll_recv(cx)) {
                Some(chunk) => {
                    this.chunk = chunk;
                    this.at = 0;
                }
                None => return Poll::Ready(Ok(())),
            }
        }
        let n = buf.remaining().min(this.chunk.len() - this.at);
        buf.put_slice(&this.chunk[this.at..this.at + n]);
        this.at += n;
        Poll::Ready(Ok(()))
    }
}

/// Writes to one stream. Clones write to the same stream, in the order their writes complete.
#[derive(Debug, Clone)]
pub struct StreamWriter {
    id: u32,
    out: mpsc::Sender<Frame>,
    max_frame: usize,
    /// Whether FIN went out, shared by clones and sinks so it goes out once.
    fin: Arc<AtomicBool>,
}

impl StreamWriter {
    /// Sends `data` as one or more data frames; waits while the connection's write queue is
    /// full.
    ///
    /// # Errors
    ///
    /// [`Error::SessionClosed`] when the session is over.
    pub async fn write(&self, data: &[u8]) -> Result<()> {
        for chunk in data.chunks(self.max_frame.max(1)) {
            self.send(Frame::Data {
                stream_id: self.id,
                fin: false,
                data: chunk.to_vec(),
            })
            .await?;
        }
        Ok(())
    }

    /// Ends this side of the stream (an empty data frame with FIN); once, whichever clone or
    /// sink does it first.
    ///
    /// # Errors
    ///
    /// [`Error::SessionClosed`] when the session is over.
    pub async fn close(&self) -> Result<()> {
        if self.fin.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        self.send(Frame::Data {
            stream_id: self.id,
            fin: true,
            data: Vec::new(),
        })
        .await
    }

    /// Aborts the stream (RST_STREAM with `status`, see [`rst`]).
    ///
    /// # Errors
    ///
    /// [`Error::SessionClosed`] when the session is over.
    pub async fn reset(&self, status: u32) -> Result<()> {
        self.send(Frame::RstStream {
            stream_id: self.id,
            status,
        })
        .await
    }

    /// The stream as an [`AsyncWrite`]: each write queues one data frame (at most
    /// `max_write_frame` bytes of it) and waits while the connection's write queue is full;
    /// shutdown sends FIN.
    pub fn into_sink(self) -> StreamSink {
        StreamSink {
            id: self.id,
            out: PollSender::new(self.out),
            max_frame: self.max_frame.max(1),
            fin: self.fin,
        }
    }

    async fn send(&self, frame: Frame) -> Result<()> {
        self.out.send(frame).await.map_err(|_| Error::SessionClosed)
    }
}

/// Writes to one stream as an [`AsyncWrite`] (see [`StreamWriter::into_sink`]).
#[derive(Debug)]
pub struct StreamSink {
    id: u32,
    out: PollSender<Frame>,
    max_frame: usize,
    fin: Arc<AtomicBool>,
}

impl StreamSink {
    fn poll_send(&mut self, cx: &mut Context<'_>, frame: Frame) -> Poll<io::Result<()>> {
        let closed = || io::Error::new(io::ErrorKind::BrokenPipe, Error::SessionClosed);
        ready!(self.out.poll_reserve(cx)).map_err(|_| closed())?;
        self.out.send_item(frame).map_err(|_| closed())?;
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for StreamSink {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        if self.fin.load(Ordering::Acquire) {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                format!("spdy stream {} is closed for writing", self.id),
            )));
        }
        let n = buf.len().min(self.max_frame);
        let frame = Frame::Data {
            stream_id: self.id,
            fin: false,
            data: buf[..n].to_vec(),
        };
        ready!(self.poll_send(cx, frame))?;
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Queued frames go out in order; the session's writer flushes each batch.
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.fin.load(Ordering::Acquire) {
            return Poll::Ready(Ok(()));
        }
        let closed = || io::Error::new(io::ErrorKind::BrokenPipe, Error::SessionClosed);
        ready!(self.out.poll_reserve(cx)).map_err(|_| closed())?;
        if self.fin.swap(true, Ordering::AcqRel) {
            // Another clone sent it meanwhile: give the slot back.
            self.out.abort_send();
            return Poll::Ready(Ok(()));
        }
        let fin = Frame::Data {
            stream_id: self.id,
            fin: true,
            data: Vec::new(),
        };
        self.out.send_item(fin).map_err(|_| closed())?;
        Poll::Ready(Ok(()))
    }
}

/// A server's side of one SPDY connection. Dropping it leaves the connection running until the
/// client leaves or goes idle; [`Session::close`] ends it.
#[derive(Debug)]
pub struct Session {
    incoming: mpsc::Receiver<Stream>,
    /// Asks the reader to end the session.
    close: CancellationToken,
    /// Cancelled once the session is ending (the reader stopped or writing failed).
    ending: CancellationToken,
    reader: JoinHandle<Result<()>>,
    writer: JoinHandle<Result<()>>,
}

impl Session {
    /// Starts serving `io` on the current tokio runtime.
    pub fn spawn<IO>(io: IO, config: SessionConfig) -> Session
    where
        IO: AsyncRead + AsyncWrite + Send + 'static,
    {
        let (read, write) = tokio::io::split(io);
        // Room for every stream's SYN_REPLY and a burst of writes; writers wait beyond it.
        let (out_tx, out_rx) = mpsc::channel(64);
        let (incoming_tx, incoming) = mpsc::channel(config.max_streams.max(1));
        let close = CancellationToken::new();
        // Cancelled by the reader once GOAWAY is queued, or by the writer when writing fails.
        let shutdown = CancellationToken::new();
        let ending = shutdown.clone();
        let writer = tokio::spawn(write_loop(
            write,
            out_rx,
            shutdown.clone(),
            config.write_timeout,
        ));
        let reader = Reader {
            close: close.clone(),
            shutdown,
            config,
            decoder: FrameDecoder::new(config.limits),
            streams: HashMap::new(),
            last_stream_id: 0,
            incoming: Some(incoming_tx),
            out: out_tx,
            unacked_session: 0,
        };
        let reader = tokio::spawn(reader.run(read));
        Session {
            incoming,
            close,
            ending,
            reader,
            writer,
        }
    }

    /// The next stream the client opens; `None` once the session is over.
    pub async fn accept(&mut self) -> Option<Stream> {
        self.incoming.recv().await
    }

    /// Ends the session: GOAWAY (OK) to the client, then the connection closes; streams' reads
    /// end and their writes fail.
    pub fn close(&self) {
        self.close.cancel();
    }

    /// Resolves once the session is ending: the client left or went idle, broke the protocol,
    /// writing to it failed, or [`Session::close`] was called. Streams' reads end then.
    pub fn closed(&self) -> impl Future<Output = ()> + Send + 'static {
        self.ending.clone().cancelled_owned()
    }

    /// Waits until the connection is over; why it ended.
    ///
    /// # Errors
    ///
    /// What ended it, but for the client leaving or [`Session::close`]: a frame that broke the
    /// protocol or a limit, the idle timeout, an I/O error or write timeout.
    pub async fn finished(self) -> Result<()> {
        let read = self.reader.await.unwrap_or(Err(Error::SessionClosed));
        let write = self.writer.await.unwrap_or(Err(Error::SessionClosed));
        match (read, write) {
            (Err(e), _) => Err(e),
            // The client left: GOAWAY or late data finding the socket shut is no failure.
            (Ok(()), Err(Error::Io { source, .. }))
                if matches!(
                    source.kind(),
                    std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset
                ) =>
            {
                Ok(())
            }
            (Ok(()), write) => write,
        }
    }
}

/// The inbound side of an open stream.
struct Open {
    data: mpsc::Sender<Vec<u8>>,
    /// Bytes taken off the socket not yet acknowledged with WINDOW_UPDATE.
    unacked: u32,
}

struct Reader {
    close: CancellationToken,
    shutdown: CancellationToken,
    config: SessionConfig,
    decoder: FrameDecoder,
    /// Streams the client may still send on.
    streams: HashMap<u32, Open>,
    last_stream_id: u32,
    incoming: Option<mpsc::Sender<Stream>>,
    out: mpsc::Sender<Frame>,
    unacked_session: u32,
}

/// Acknowledge received data once half a window has arrived.
const ACK_EVERY: u32 = DEFAULT_INITIAL_WINDOW / 2;
/// Bytes read from the socket at once.
const READ_CHUNK: usize = 16 * 1024;

impl Reader {
    async fn run<R: AsyncRead + Unpin>(mut self, mut io: R) -> Result<()> {
        let result = self.read_frames(&mut io).await;
        let status = match &result {
            Ok(()) | Err(Error::IdleTimeout(_)) => goaway::OK,
            Err(Error::Io { .. }) => goaway::INTERNAL_ERROR,
            Err(_) => goaway::PROTOCOL_ERROR,
        };
        if let Err(e) = &result {
            tracing::debug!("spdy session ends: {e}");
        }
        // Streams' reads end, accept() ends; the writer sends GOAWAY and what is queued, then
        // closes.
        self.streams.clear();
        self.incoming = None;
        let _ = self
            .out
            .send(Frame::GoAway {
                last_good_stream_id: self.last_stream_id,
                status,
            })
            .await;
        self.shutdown.cancel();
        result
    }

    /// Resolves when the session is asked to close or the writer has stopped.
    async fn stopped(close: &CancellationToken, shutdown: &CancellationToken) {
        tokio::select! {
            () = close.cancelled() => {}
            () = shutdown.cancelled() => {}
        }
    }

    async fn read_frames<R: AsyncRead + Unpin>(&mut self, io: &mut R) -> Result<()> {
        // At most one unfinished frame (the decoder refuses longer ones from their header)
        // plus one read.
        let mut buf: Vec<u8> = Vec::new();
        let mut chunk = vec![0u8; READ_CHUNK];
        loop {
            while let Some((frame, used)) = self.decoder.decode(&buf)? {
                buf.drain(..used);
                let (close, shutdown) = (self.close.clone(), self.shutdown.clone());
                // Handling may wait on a full stream or queue: the session's end cuts it short,
                // and so does the idle timeout (nothing is read from the client meanwhile, so a
                // client whose bytes nobody takes is as idle as a silent one).
                let idle = self.config.idle_timeout;
                tokio::select! {
                    handled = tokio::time::timeout(idle, self.handle(frame)) => {
                        handled.map_err(|_| Error::IdleTimeout(idle))??;
                    }
                    () = Reader::stopped(&close, &shutdown) => return Ok(()),
                }
            }
            let n = tokio::select! {
                () = Reader::stopped(&self.close, &self.shutdown) => return Ok(()),
                read = tokio::time::timeout(self.config.idle_timeout, io.read(&mut chunk)) => match read {
                    Err(_) => return Err(Error::IdleTimeout(self.config.idle_timeout)),
                    Ok(Err(source)) => return Err(Error::Io { what: "read", source }),
                    Ok(Ok(n)) => n,
                },
            };
            if n == 0 {
                return Ok(());
            }
            buf.extend_from_slice(&chunk[..n]);
        }
    }

    async fn handle(&mut self, frame: Frame) -> Result<()> {
        match frame {
            Frame::SynStream(syn) => self.open(syn).await?,
            Frame::Data {
                stream_id,
                fin,
                data,
            } => self.data(stream_id, fin, data).await?,
            Frame::RstStream { stream_id, .. } => {
                self.streams.remove(&stream_id);
            }
            // Odd ids are the client's; answer them. Even ones would answer ours (none sent).
            Frame::Ping { id } if id % 2 == 1 => self.send(Frame::Ping { id }).await?,
            Frame::GoAway { .. } => {
                // The client opens no more streams; those open carry on until it leaves.
                self.incoming = None;
            }
            // Flow control is not enforced on sends (see the module docs); no headers after
            // the SYN_STREAM matter to kubelet's protocols; this side opens no streams.
            Frame::Ping { .. }
            | Frame::Settings { .. }
            | Frame::WindowUpdate { .. }
            | Frame::Headers { .. }
            | Frame::SynReply { .. }
            | Frame::Unknown { .. } => {}
        }
        Ok(())
    }

    /// A SYN_STREAM: the stream is replied to and handed to `accept`, or refused.
    async fn open(&mut self, syn: SynStream) -> Result<()> {
        let id = syn.stream_id;
        // Client streams are odd and increase (section 2.3.2).
        if id.is_multiple_of(2) || id <= self.last_stream_id {
            return Err(Error::InvalidFrame {
                frame: super::FrameKind::SynStream,
                what: format!("stream id {id} after {}", self.last_stream_id),
            });
        }
        self.last_stream_id = id;
        // Refused past the cap, and after the client's GOAWAY or the server's last accept.
        let room = self.streams.len() < self.config.max_streams;
        let Some(incoming) = self.incoming.clone().filter(|_| room) else {
            return self
                .send(Frame::RstStream {
                    stream_id: id,
                    status: rst::REFUSED_STREAM,
                })
                .await;
        };
        let (tx, rx) = mpsc::channel(self.config.stream_buffer.max(1));
        if !syn.fin {
            self.streams.insert(
                id,
                Open {
                    data: tx,
                    unacked: 0,
                },
            );
        }
        // The reply is queued before the stream is handed out, so it precedes every
        // write on it (spdystream drops data on a stream it has no reply for).
        self.send(Frame::SynReply {
            stream_id: id,
            fin: false,
            headers: Headers::new(),
        })
        .await?;
        let stream = Stream {
            id,
            headers: syn.headers,
            inbound: rx,
            writer: StreamWriter {
                id,
                out: self.out.clone(),
                max_frame: self.config.max_write_frame,
                fin: Arc::new(AtomicBool::new(false)),
            },
        };
        // Waits while the server has not taken earlier streams: backpressure again.
        if incoming.send(stream).await.is_err() {
            self.incoming = None;
        }
        Ok(())
    }

    /// Data from the client: to the stream's reader, acknowledged once half a window is in.
    async fn data(&mut self, stream_id: u32, fin: bool, data: Vec<u8>) -> Result<()> {
        let len = u32::try_from(data.len()).unwrap_or(u32::MAX);
        if let Some(open) = self.streams.get_mut(&stream_id) {
            if !data.is_empty() && open.data.send(data).await.is_err() {
                // The server stopped reading it; the client's bytes go nowhere.
                tracing::trace!(stream_id, "data for a stream nobody reads");
            }
            open.unacked = open.unacked.saturating_add(len);
            let ack = (open.unacked >= ACK_EVERY && !fin).then_some(open.unacked);
            if let Some(delta) = ack {
                open.unacked = 0;
                self.send(Frame::WindowUpdate { stream_id, delta }).await?;
            }
        }
        if fin {
            self.streams.remove(&stream_id);
        }
        self.unacked_session = self.unacked_session.saturating_add(len);
        if self.unacked_session >= ACK_EVERY {
            let delta = std::mem::take(&mut self.unacked_session);
            self.send(Frame::WindowUpdate {
                stream_id: 0,
                delta,
            })
            .await?;
        }
        Ok(())
    }

    async fn send(&self, frame: Frame) -> Result<()> {
        self.out.send(frame).await.map_err(|_| Error::SessionClosed)
    }
}

/// Bytes encoded before one write to the socket.
const WRITE_BATCH: usize = 256 * 1024;

async fn write_loop<W: AsyncWrite + Unpin>(
    mut io: W,
    mut frames: mpsc::Receiver<Frame>,
    stop: CancellationToken,
    write_timeout: Duration,
) -> Result<()> {
    let mut encoder = FrameEncoder::new();
    let mut buf = Vec::new();
    let result = loop {
        let stopping = tokio::select! {
            frame = frames.recv() => match frame {
                Some(frame) => {
                    encode(&mut encoder, &frame, &mut buf);
                    false
                }
                None => true,
            },
            () = stop.cancelled() => true,
        };
        if stopping {
            // No new frames; what is queued (GOAWAY last) still goes out.
            frames.close();
        }
        // Whatever else is queued goes in the same write.
        while buf.len() < WRITE_BATCH || stopping {
            match frames.try_recv() {
                Ok(frame) => encode(&mut encoder, &frame, &mut buf),
                Err(_) => break,
            }
        }
        if !buf.is_empty() {
            let write = async {
                io.write_all(&buf).await?;
                io.flush().await
            };
            match tokio::time::timeout(write_timeout, write).await {
                Ok(Ok(())) => buf.clear(),
                Ok(Err(source)) => {
                    break Err(Error::Io {
                        what: "write",
                        source,
                    });
                }
                Err(_) => {
                    break Err(Error::Io {
                        what: "write",
                        source: std::io::ErrorKind::TimedOut.into(),
                    });
                }
            }
        }
        if stopping {
            break Ok(());
        }
    };
    stop.cancel();
    frames.close();
    let _ = tokio::time::timeout(write_timeout, io.shutdown()).await;
    result
}

fn encode(encoder: &mut FrameEncoder, frame: &Frame, buf: &mut Vec<u8>) {
    // Frames queued here are built by this module and valid by construction; should one not
    // encode, dropping it is all that can be done.
    if let Err(e) = encoder.encode(frame, buf) {
        tracing::warn!("spdy frame not sent: {e}");
    }
}

//! Exec, attach and port forward over an upgraded WebSocket, as kubelet's `wsstream` channel
//! connection serves them: every message starts with its channel (a byte, or an ASCII digit
//! before base64 text), v5 adds the client's close signal.
//!
//! The socket is split in two futures that run side by side: a reader that hands each
//! channel's bytes to a bounded queue (waiting when it is full, so the client's bytes stay in
//! the socket) and ends the connection after `stream_idle_timeout` without a message, and a
//! writer that sends what the runtime's writers queue (a bounded queue too: a client that does
//! not read holds the runtime's writes back, and a write that takes longer than
//! `write_timeout` ends the connection).

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt as _, StreamExt as _};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt as _};
use tokio::sync::mpsc;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};
use tokio_util::sync::PollSender;

use super::io::{RESIZE_QUEUE, RemoteCommand, feed_resizes};
use super::{Pending, Shared};
use crate::channel::{Inbound, StatusFormat, WsProtocol, channels, port_channels, port_prefix};
use crate::runtime::{PortForwardRequest, Reader, StreamRuntime, Streams, Writer};
use crate::spdy::StreamReader;

/// Messages queued for the socket.
const OUT_QUEUE: usize = 16;
/// Messages queued per inbound channel.
const IN_QUEUE: usize = 16;
/// The largest message the runtime's writes are cut into.
const MAX_OUT_CHUNK: usize = 32 * 1024;

/// Serves one upgraded connection to its end.
pub(super) async fn serve<IO>(shared: Arc<Shared>, io: IO, protocol: WsProtocol, pending: Pending)
where
    IO: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    let max = shared.config.max_ws_message.max(16);
    let config = WebSocketConfig::default()
        .max_message_size(Some(max))
        .max_frame_size(Some(max))
        .write_buffer_size(64 * 1024)
        .max_write_buffer_size(2 * MAX_OUT_CHUNK.max(max) + 64 * 1024);
    let ws = WebSocketStream::from_raw_socket(io, Role::Server, Some(config)).await;
    let (sink, stream) = ws.split();
    let (out, queued) = mpsc::channel(OUT_QUEUE);
    let conn = Conn {
        protocol,
        reader: stream,
        out,
        idle: shared.config.stream_idle_timeout,
    };
    let writer = write_loop(sink, queued, shared.config.write_timeout);
    match pending {
        Pending::PortForward(req) => port_forward(&shared, conn, writer, req).await,
        other => {
            if let Some(cmd) = RemoteCommand::from_pending(other) {
                remote_command(&shared, conn, writer, cmd).await;
            }
        }
    }
}

struct Conn<IO> {
    protocol: WsProtocol,
    reader: SplitStream<WebSocketStream<IO>>,
    out: mpsc::Sender<Message>,
    idle: Duration,
}

fn message(protocol: WsProtocol, channel: u8, data: &[u8]) -> Message {
    let bytes = protocol.encode(channel, data);
    if protocol.base64 {
        // A digit and base64: ASCII, so this never falls back.
        match String::from_utf8(bytes) {
            Ok(text) => Message::text(text),
            Err(e) => Message::binary(e.into_bytes()),
        }
    } else {
        Message::binary(bytes)
    }
}

/// Sends what is queued until every sender is gone, then closes the WebSocket.
async fn write_loop<IO>(
    mut sink: SplitSink<WebSocketStream<IO>, Message>,
    mut queued: mpsc::Receiver<Message>,
    within: Duration,
) where
    IO: AsyncRead + AsyncWrite + Unpin,
{
    while let Some(msg) = queued.recv().await {
        let write = async {
            sink.feed(msg).await?;
            if queued.is_empty() {
                sink.flush().await?;
            }
            Ok::<_, tokio_tungstenite::tungstenite::Error>(())
        };
        match tokio::time::timeout(within, write).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::debug!("websocket write: {e}");
                return;
            }
            Err(_) => {
                tracing::debug!("websocket write not done in {within:?}");
                return;
            }
        }
    }
    let bye = Message::Close(Some(CloseFrame {
        code: CloseCode::Normal,
        reason: "".into(),
    }));
    let _ = tokio::time::timeout(within, async {
        let _ = sink.send(bye).await;
        let _ = sink.close().await;
    })
    .await;
}

/// Hands each message's bytes to its channel's queue until the client closes, goes idle or
/// breaks the framing. Messages for channels without a queue are dropped, as kubelet drops
/// them; v5's close signal drops the channel's queue (its reader sees EOF).
async fn read_loop<IO>(
    reader: &mut SplitStream<WebSocketStream<IO>>,
    protocol: WsProtocol,
    idle: Duration,
    mut inbound: Vec<Option<mpsc::Sender<Vec<u8>>>>,
) where
    IO: AsyncRead + AsyncWrite + Unpin,
{
    loop {
        let msg = match tokio::time::timeout(idle, reader.next()).await {
            Err(_) => {
                tracing::debug!("websocket client sent nothing for {idle:?}");
                return;
            }
            Ok(None) => return,
            Ok(Some(Err(e))) => {
                tracing::debug!("websocket read: {e}");
                return;
            }
            Ok(Some(Ok(msg))) => msg,
        };
        let bytes: &[u8] = match &msg {
            Message::Binary(b) => b,
            Message::Text(t) => t.as_bytes(),
            Message::Close(_) => return,
            Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => continue,
        };
        match protocol.decode(bytes) {
            Ok(Inbound::Data { channel, data }) => {
                if let Some(slot @ Some(_)) = inbound.get_mut(usize::from(channel)) {
                    let Some(tx) = slot.as_ref() else { continue };
                    // A queue nobody empties holds the socket unread: as idle as silence.
                    let Ok(sent) = tokio::time::timeout(idle, tx.send(data.into_owned())).await
                    else {
                        tracing::debug!("websocket channel {channel} not read for {idle:?}");
                        return;
                    };
                    if sent.is_err() {
                        *slot = None;
                    }
                }
            }
            Ok(Inbound::Close { channel }) => {
                if let Some(slot) = inbound.get_mut(usize::from(channel)) {
                    *slot = None;
                }
            }
            Ok(Inbound::Empty) => {}
            Err(e) => tracing::debug!("websocket message skipped: {e}"),
        }
    }
}

async fn remote_command<IO>(
    shared: &Shared,
    conn: Conn<IO>,
    writer: impl Future<Output = ()>,
    cmd: RemoteCommand,
) where
    IO: AsyncRead + AsyncWrite + Unpin,
{
    let Conn {
        protocol,
        mut reader,
        out,
        idle,
    } = conn;
    let wanted = cmd.wanted();
    let mut inbound = vec![None; usize::from(channels::RESIZE) + 1];
    let stdin = wanted.stdin.then(|| {
        let (tx, rx) = mpsc::channel(IN_QUEUE);
        inbound[usize::from(channels::STDIN)] = Some(tx);
        Box::pin(StreamReader::from_channel(rx)) as Reader
    });
    let (resize, feeder) = if wanted.tty {
        let (raw_tx, raw_rx) = mpsc::channel(IN_QUEUE);
        inbound[usize::from(channels::RESIZE)] = Some(raw_tx);
        let (tx, rx) = mpsc::channel(RESIZE_QUEUE);
        (
            Some(rx),
            Some(feed_resizes(StreamReader::from_channel(raw_rx), tx)),
        )
    } else {
        (None, None)
    };
    let writer_for =
        |channel: u8| Box::pin(ChannelWriter::new(protocol, channel, out.clone())) as Writer;
    let streams = Streams {
        stdin,
        stdout: wanted.stdout.then(|| writer_for(channels::STDOUT)),
        stderr: wanted.stderr.then(|| writer_for(channels::STDERR)),
        resize,
    };
    // Kubelet's hello: an empty message on the lowest channel the server writes.
    let hello = if wanted.stdout {
        channels::STDOUT
    } else if wanted.stderr {
        channels::STDERR
    } else {
        channels::ERROR
    };
    // The queue is empty yet: this cannot wait.
    if out.try_send(message(protocol, hello, &[])).is_err() {
        return;
    }
    let run = cmd.run(Arc::clone(&shared.runtime), streams);
    let resizes = async move {
        if let Some(feeder) = feeder {
            feeder.await;
        }
        std::future::pending::<()>().await;
    };
    let reading = read_loop(&mut reader, protocol, idle, inbound);
    tokio::pin!(run, resizes, reading, writer);
    let status = loop {
        tokio::select! {
            status = &mut run => break status,
            () = &mut resizes => {}
            () = &mut reading => {
                tracing::debug!("client gone: the runtime's operation is dropped");
                return;
            }
            () = &mut writer => {
                tracing::debug!("websocket writer ended: the runtime's operation is dropped");
                return;
            }
        }
    };
    let text = match protocol.status {
        StatusFormat::Json => Some(status.v4_json()),
        StatusFormat::Text => status.v1_text(),
    };
    let ending = async {
        if let Some(text) = text {
            let _ = out
                .send(message(protocol, channels::ERROR, text.as_bytes()))
                .await;
        }
        drop(out);
        // The writer sends what is queued, then the close frame.
        writer.await;
    };
    let within = shared.config.write_timeout.saturating_mul(2);
    if tokio::time::timeout(within, ending).await.is_err() {
        tracing::debug!("websocket close not done in {within:?}");
    }
}

async fn port_forward<IO>(
    shared: &Shared,
    conn: Conn<IO>,
    writer: impl Future<Output = ()>,
    req: PortForwardRequest,
) where
    IO: AsyncRead + AsyncWrite + Unpin,
{
    let Conn {
        protocol,
        mut reader,
        out,
        idle,
    } = conn;
    let mut inbound = Vec::with_capacity(req.ports.len() * 2);
    let mut forwards = Vec::with_capacity(req.ports.len());
    for (index, &port) in req.ports.iter().enumerate() {
        let Some((data, error)) = u8::try_from(index).ok().and_then(port_channels) else {
            break;
        };
        let (tx, rx) = mpsc::channel(IN_QUEUE);
        inbound.push(Some(tx));
        // The error channel carries nothing from the client.
        inbound.push(None);
        forwards.push(forward(
            Arc::clone(&shared.runtime),
            req.pod_sandbox_id.clone(),
            protocol,
            port,
            (data, error),
            StreamReader::from_channel(rx),
            out.clone(),
        ));
    }
    drop(out);
    let all = futures_util::future::join_all(forwards);
    let reading = read_loop(&mut reader, protocol, idle, inbound);
    tokio::pin!(all, reading, writer);
    tokio::select! {
        _ = &mut all => {}
        () = &mut reading => {
            tracing::debug!("client gone: port forwards dropped");
            return;
        }
        () = &mut writer => return,
    }
    let within = shared.config.write_timeout.saturating_mul(2);
    let _ = tokio::time::timeout(within, writer).await;
}

/// One port: the port prefix on both channels, the runtime connects, bytes both ways until the
/// pod's side ends; a failure is written on the error channel as kubelet words it.
async fn forward(
    runtime: Arc<dyn StreamRuntime>,
    pod: String,
    protocol: WsProtocol,
    port: u16,
    (data, error): (u8, u8),
    mut from_client: StreamReader,
    out: mpsc::Sender<Message>,
) {
    let prefix = port_prefix(port);
    for channel in [data, error] {
        if out.send(message(protocol, channel, &prefix)).await.is_err() {
            return;
        }
    }
    match runtime.port_forward(&pod, port).await {
        Err(e) => {
            let text = format!("error forwarding port {port} to pod {pod}, uid : {e}");
            let _ = out.send(message(protocol, error, text.as_bytes())).await;
        }
        Ok(conn) => {
            let (mut from_pod, mut to_pod) = tokio::io::split(conn);
            let mut to_client = ChannelWriter::new(protocol, data, out);
            let up = async {
                let _ = tokio::io::copy(&mut from_client, &mut to_pod).await;
                let _ = to_pod.shutdown().await;
            };
            let down = tokio::io::copy(&mut from_pod, &mut to_client);
            tokio::pin!(up, down);
            // The pod's side decides: a WebSocket channel has no end of its own but the
            // connection's.
            let copied = tokio::select! {
                copied = &mut down => copied,
                () = &mut up => down.await,
            };
            if let Err(e) = copied {
                tracing::debug!(port, "port forward copy: {e}");
            }
        }
    }
}

/// One outbound channel as an [`AsyncWrite`]: each write queues one message (at most
/// [`MAX_OUT_CHUNK`] bytes of it) and waits while the socket's queue is full.
struct ChannelWriter {
    protocol: WsProtocol,
    channel: u8,
    out: PollSender<Message>,
}

impl ChannelWriter {
    fn new(protocol: WsProtocol, channel: u8, out: mpsc::Sender<Message>) -> ChannelWriter {
        ChannelWriter {
            protocol,
            channel,
            out: PollSender::new(out),
        }
    }
}

impl AsyncWrite for ChannelWriter {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        let gone = || io::Error::new(io::ErrorKind::BrokenPipe, "the websocket is closed");
        ready!(self.out.poll_reserve(cx)).map_err(|_| gone())?;
        let n = buf.len().min(MAX_OUT_CHUNK);
        let msg = message(self.protocol, self.channel, &buf[..n]);
        self.out.send_item(msg).map_err(|_| gone())?;
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // A channel ends with the connection (kubelet's server sends no close signal).
        Poll::Ready(Ok(()))
    }
}

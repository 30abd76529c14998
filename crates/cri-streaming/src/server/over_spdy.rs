//! Exec, attach and port forward over an upgraded SPDY/3.1 connection, as kubelet's
//! `remotecommand` (`createHTTPStreamStreams`, `waitForStreams`) and `portforward`
//! (`httpStreamHandler`) serve them.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt as _;
use futures_util::stream::FuturesUnordered;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt as _};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::io::{RESIZE_QUEUE, RemoteCommand, feed_resizes};
use super::{Pending, Shared};
use crate::channel::{
    HEADER_PORT, HEADER_REQUEST_ID, HEADER_STREAM_TYPE, SPDY_REMOTE_COMMAND, SpdyProtocol,
    StatusFormat, StreamType,
};
use crate::runtime::{PortForwardRequest, Reader, StreamRuntime, Streams, Writer};
use crate::spdy::{Session, SessionConfig, Stream, StreamWriter, rst};

/// Port forward requests whose two streams have not both come, at most, per connection.
const MAX_PENDING_PAIRS: usize = 64;
/// Forwarded connections (and stream resets or error writes) under way at once, at most, per
/// connection; streams past it are reset.
const MAX_RUNNING: usize = 256;

/// Serves one upgraded connection to its end.
pub(super) async fn serve<IO>(shared: Arc<Shared>, io: IO, protocol: &'static str, pending: Pending)
where
    IO: AsyncRead + AsyncWrite + Send + 'static,
{
    let config = SessionConfig {
        limits: shared.config.spdy_limits,
        idle_timeout: shared.config.stream_idle_timeout,
        write_timeout: shared.config.write_timeout,
        ..SessionConfig::default()
    };
    let mut session = Closing(Some(Session::spawn(io, config)));
    let Some(live) = session.0.as_mut() else {
        return;
    };
    match pending {
        Pending::PortForward(req) => port_forward(&shared, live, req).await,
        other => {
            let proto = SPDY_REMOTE_COMMAND.iter().find(|p| p.name == protocol);
            if let (Some(proto), Some(cmd)) = (proto, RemoteCommand::from_pending(other)) {
                remote_command(&shared, live, proto, cmd).await;
            }
        }
    }
    session.finish(shared.config.write_timeout).await;
}

/// Closes the session when dropped (a shutdown or a client gone drops the serving future), so
/// its reader and writer tasks end too.
struct Closing(Option<Session>);

impl Closing {
    /// Closes and waits (bounded) for the GOAWAY and what is queued to go out.
    async fn finish(&mut self, within: Duration) {
        if let Some(session) = self.0.take() {
            session.close();
            match tokio::time::timeout(within, session.finished()).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::debug!("spdy streaming session: {e}"),
                Err(_) => tracing::debug!("spdy streaming session not done after {within:?}"),
            }
        }
    }
}

impl Drop for Closing {
    fn drop(&mut self) {
        if let Some(session) = &self.0 {
            session.close();
        }
    }
}

/// The streams of one remote command as they come.
#[derive(Default)]
struct Arrived {
    error: Option<Stream>,
    stdin: Option<Stream>,
    stdout: Option<Stream>,
    stderr: Option<Stream>,
    resize: Option<Stream>,
}

impl Arrived {
    fn count(&self) -> usize {
        [
            self.error.is_some(),
            self.stdin.is_some(),
            self.stdout.is_some(),
            self.stderr.is_some(),
            self.resize.is_some(),
        ]
        .into_iter()
        .filter(|x| *x)
        .count()
    }
}

async fn remote_command(
    shared: &Shared,
    session: &mut Session,
    proto: &SpdyProtocol,
    cmd: RemoteCommand,
) {
    let wanted = cmd.wanted();
    let want_resize = wanted.tty && proto.resize;
    let expected = 1
        + usize::from(wanted.stdin)
        + usize::from(wanted.stdout)
        + usize::from(wanted.stderr)
        + usize::from(want_resize);
    let mut arrived = Arrived::default();
    let deadline = tokio::time::sleep(shared.config.stream_creation_timeout);
    tokio::pin!(deadline);
    while arrived.count() < expected {
        let stream = tokio::select! {
            stream = session.accept() => stream,
            () = &mut deadline => {
                tracing::debug!("timed out waiting for client to create streams");
                return;
            }
        };
        let Some(stream) = stream else {
            tracing::debug!("client left before creating its streams");
            return;
        };
        let kind = stream
            .headers()
            .get(HEADER_STREAM_TYPE)
            .and_then(StreamType::parse);
        let slot = match kind {
            Some(StreamType::Error) => &mut arrived.error,
            Some(StreamType::Stdin) if wanted.stdin => &mut arrived.stdin,
            Some(StreamType::Stdout) if wanted.stdout => &mut arrived.stdout,
            Some(StreamType::Stderr) if wanted.stderr => &mut arrived.stderr,
            Some(StreamType::Resize) if want_resize => &mut arrived.resize,
            _ => {
                tracing::debug!(?kind, "unexpected stream ignored");
                continue;
            }
        };
        if slot.is_none() {
            *slot = Some(stream);
        }
    }
    let Some(error) = arrived.error else { return };
    let error = error.writer();
    let stdin = arrived.stdin.map(|s| Box::pin(s.into_parts().1) as Reader);
    let (stdout, stdout_end) = sink(arrived.stdout);
    let (stderr, stderr_end) = sink(arrived.stderr);
    let (resize, feeder) = match arrived.resize {
        Some(stream) => {
            let (tx, rx) = mpsc::channel(RESIZE_QUEUE);
            (Some(rx), Some(feed_resizes(stream.into_parts().1, tx)))
        }
        None => (None, None),
    };
    let streams = Streams {
        stdin,
        stdout,
        stderr,
        resize,
    };
    let run = cmd.run(Arc::clone(&shared.runtime), streams);
    let resizes = async move {
        if let Some(feeder) = feeder {
            feeder.await;
        }
        std::future::pending::<()>().await;
    };
    let closed = session.closed();
    tokio::pin!(run, resizes, closed);
    let status = loop {
        tokio::select! {
            status = &mut run => break status,
            () = &mut resizes => {}
            () = &mut closed => {
                tracing::debug!("client gone: the runtime's operation is dropped");
                return;
            }
            // Streams opened now are not wanted; taking them keeps the session reading.
            Some(extra) = session.accept() => drop(extra),
        }
    };
    tracing::debug!(?status, "remote command over spdy done");
    let ends = [stdout_end, stderr_end].into_iter().flatten();
    let epilogue = epilogue(ends, error, proto.status, &status);
    if tokio::time::timeout(shared.config.write_timeout, epilogue)
        .await
        .is_err()
    {
        tracing::debug!("exit status not written in time");
    }
}

/// The output streams ended (FIN), then the status on the error stream, which ends too.
async fn epilogue(
    ends: impl Iterator<Item = StreamWriter>,
    error: StreamWriter,
    format: StatusFormat,
    status: &crate::status::ExitStatus,
) {
    for end in ends {
        let _ = end.close().await;
    }
    let message = match format {
        StatusFormat::Json => Some(status.v4_json()),
        StatusFormat::Text => status.v1_text(),
    };
    if let Some(message) = message {
        let _ = error.write(message.as_bytes()).await;
    }
    let _ = error.close().await;
}

/// A client stream as the runtime's writer, and a handle to FIN it once the runtime is done.
fn sink(stream: Option<Stream>) -> (Option<Writer>, Option<StreamWriter>) {
    match stream {
        Some(stream) => {
            let writer = stream.writer();
            (Some(Box::pin(writer.clone().into_sink())), Some(writer))
        }
        None => (None, None),
    }
}

type Task = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A port forward request's streams as they come.
struct Pair {
    data: Option<Stream>,
    error: Option<Stream>,
    deadline: Instant,
}

async fn port_forward(shared: &Shared, session: &mut Session, req: PortForwardRequest) {
    let mut pairs: HashMap<String, Pair> = HashMap::new();
    let mut running: FuturesUnordered<Task> = FuturesUnordered::new();
    loop {
        let next_deadline = pairs.values().map(|p| p.deadline).min();
        tokio::select! {
            stream = session.accept() => {
                let Some(stream) = stream else { break };
                if running.len() >= MAX_RUNNING {
                    tracing::debug!(stream = stream.id(), "port forward stream refused: {MAX_RUNNING} connections under way");
                    drop(stream);
                    continue;
                }
                let (kind, port) = match check_stream(&stream) {
                    Ok(found) => found,
                    Err(why) => {
                        tracing::debug!(stream = stream.id(), "port forward stream refused: {why}");
                        running.push(Box::pin(reset(stream)));
                        continue;
                    }
                };
                let id = request_id(&stream, kind);
                let room = pairs.len() < MAX_PENDING_PAIRS;
                let pair = match pairs.entry(id.clone()) {
                    Entry::Occupied(e) => e.into_mut(),
                    Entry::Vacant(e) if room => e.insert(Pair {
                        data: None,
                        error: None,
                        deadline: Instant::now() + shared.config.stream_creation_timeout,
                    }),
                    Entry::Vacant(_) => {
                        running.push(Box::pin(reset(stream)));
                        continue;
                    }
                };
                let slot = if kind == StreamType::Data { &mut pair.data } else { &mut pair.error };
                if slot.is_some() {
                    let message = format!(
                        "error processing stream for request {id}: {} stream already assigned",
                        kind.as_str()
                    );
                    if let Some(error) = &pair.error {
                        running.push(Box::pin(write_error(error.writer(), message, false)));
                    }
                    continue;
                }
                *slot = Some(stream);
                if pair.data.is_none() || pair.error.is_none() {
                    continue;
                }
                if let Some(Pair { data: Some(data), error: Some(error), .. }) = pairs.remove(&id) {
                    // Kubelet takes the port from the data stream's header.
                    let port = check_stream(&data).map_or(port, |(_, p)| p);
                    running.push(Box::pin(forward(
                        Arc::clone(&shared.runtime),
                        req.pod_sandbox_id.clone(),
                        req.ports.clone(),
                        port,
                        data,
                        error,
                    )));
                }
            }
            Some(()) = running.next() => {}
            () = sleep_until(next_deadline), if next_deadline.is_some() => {
                let now = Instant::now();
                pairs.retain(|id, pair| {
                    if pair.deadline > now {
                        return true;
                    }
                    if let Some(error) = pair.error.take() {
                        let message = format!("request {id}: timed out waiting for streams");
                        running.push(Box::pin(write_error(error.writer(), message, true)));
                    }
                    false
                });
            }
        }
    }
    // The session is over: dropping `running` drops every connection into the pod.
}

async fn sleep_until(deadline: Option<Instant>) {
    if let Some(deadline) = deadline {
        tokio::time::sleep_until(deadline).await;
    }
}

/// A stream's type and port, as kubelet's `httpStreamReceived` checks them.
fn check_stream(stream: &Stream) -> Result<(StreamType, u16), String> {
    let headers = stream.headers();
    let port = headers
        .get(HEADER_PORT)
        .filter(|p| !p.is_empty())
        .ok_or_else(|| format!("{HEADER_PORT:?} header is required"))?;
    let port: u16 = port
        .parse()
        .map_err(|e| format!("unable to parse {port:?} as a port: {e}"))?;
    if port < 1 {
        return Err(format!("port {port:?} must be > 0"));
    }
    let kind = headers
        .get(HEADER_STREAM_TYPE)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| format!("{HEADER_STREAM_TYPE:?} header is required"))?;
    match StreamType::parse(kind) {
        Some(kind @ (StreamType::Data | StreamType::Error)) => Ok((kind, port)),
        _ => Err(format!("invalid stream type {kind:?}")),
    }
}

/// The stream's `requestid`; for old clients without one, kubelet's guess from the stream id
/// (the error stream's id names the pair, its data stream comes two ids later).
fn request_id(stream: &Stream, kind: StreamType) -> String {
    match stream.headers().get(HEADER_REQUEST_ID) {
        Some(id) if !id.is_empty() => id.to_owned(),
        _ if kind == StreamType::Data => stream.id().saturating_sub(2).to_string(),
        _ => stream.id().to_string(),
    }
}

async fn reset(stream: Stream) {
    let _ = stream.writer().reset(rst::CANCEL).await;
}

async fn write_error(error: StreamWriter, message: String, close: bool) {
    let _ = error.write(message.as_bytes()).await;
    if close {
        let _ = error.close().await;
    }
}

/// One forwarded connection: the runtime connects, bytes are copied both ways until both
/// sides are done; a failure is written on the error stream as kubelet words it.
async fn forward(
    runtime: Arc<dyn StreamRuntime>,
    pod: String,
    allowed: Vec<u16>,
    port: u16,
    data: Stream,
    error: Stream,
) {
    let (_, mut from_client, data_writer) = data.into_parts();
    let error = error.writer();
    let failure = if !allowed.is_empty() && !allowed.contains(&port) {
        Some(format!(
            "port {port} is not among the ports the request named"
        ))
    } else {
        match runtime.port_forward(&pod, port).await {
            Err(e) => Some(e.to_string()),
            Ok(conn) => {
                let (mut from_pod, mut to_pod) = tokio::io::split(conn);
                let mut to_client = data_writer.clone().into_sink();
                let up = async {
                    let copied = tokio::io::copy(&mut from_client, &mut to_pod).await;
                    let _ = to_pod.shutdown().await;
                    copied
                };
                let down = async {
                    let copied = tokio::io::copy(&mut from_pod, &mut to_client).await;
                    let _ = to_client.shutdown().await;
                    copied
                };
                let (up, down) = tokio::join!(up, down);
                if let Err(e) = up.and(down) {
                    tracing::debug!(port, "port forward copy: {e}");
                }
                None
            }
        }
    };
    if let Some(why) = failure {
        let message = format!("error forwarding port {port} to pod {pod}, uid : {why}");
        let _ = error.write(message.as_bytes()).await;
    }
    let _ = error.close().await;
    let _ = data_writer.close().await;
}

//! What the server tests share: a fake runtime that counts its futures, a plain HTTP/1.1
//! client for the upgrade, and a SPDY client made of the crate's own codec.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use cri_streaming::resize::TerminalSize;
use cri_streaming::runtime::{
    AttachRequest, Duplex, ExecRequest, PortForwardRequest, RuntimeError, StreamRuntime, Streams,
};
use cri_streaming::server::{Config, OpenStreams, Server, ServerHandle};
use cri_streaming::spdy::{Frame, FrameDecoder, FrameEncoder, Headers, Limits, SynStream};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;

pub(crate) const WAIT: Duration = Duration::from_secs(10);

/// What the fake runtime saw.
#[derive(Default)]
pub(crate) struct Counts {
    /// Operations (and port forward connections) begun.
    pub(crate) started: AtomicUsize,
    /// Their futures (or connections) dropped.
    pub(crate) dropped: AtomicUsize,
    /// Bytes `flood` managed to write.
    pub(crate) flooded: AtomicUsize,
    /// Sizes `resize` received.
    pub(crate) resizes: Mutex<Vec<TerminalSize>>,
}

impl Counts {
    pub(crate) fn started(&self) -> usize {
        self.started.load(Ordering::SeqCst)
    }

    pub(crate) fn dropped(&self) -> usize {
        self.dropped.load(Ordering::SeqCst)
    }

    /// Waits until `flood` stops getting its writes through (the same count 300 ms apart) while
    /// it is still running, and returns how many bytes it got rid of.
    pub(crate) async fn flood_stalls(&self) -> usize {
        let stalled = async {
            let mut last = usize::MAX;
            loop {
                let now = self.flooded.load(Ordering::SeqCst);
                if now == last && self.started() == 1 {
                    return now;
                }
                last = now;
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        };
        let bytes = tokio::time::timeout(WAIT, stalled)
            .await
            .expect("the runtime's writes wait on a client that does not read");
        assert_eq!(
            self.dropped(),
            0,
            "stalled by backpressure, not by the stream's end"
        );
        bytes
    }

    /// Waits until every future begun is dropped (and at least `begun` began).
    pub(crate) async fn all_dropped(&self, begun: usize) {
        let done = async {
            while self.started() < begun || self.dropped() != self.started() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        tokio::time::timeout(WAIT, done).await.unwrap_or_else(|_| {
            panic!(
                "runtime futures left behind: {} started, {} dropped",
                self.started(),
                self.dropped()
            )
        });
    }
}

/// Counts a future (or connection) as begun now and dropped when it drops.
struct Live(Arc<Counts>);

impl Live {
    fn new(counts: &Arc<Counts>) -> Live {
        counts.started.fetch_add(1, Ordering::SeqCst);
        Live(Arc::clone(counts))
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        self.0.dropped.fetch_add(1, Ordering::SeqCst);
    }
}

/// A runtime whose commands are test behaviours: `cat [code]` copies stdin to stdout (and
/// writes `err` on stderr) and exits with `code`; `sleep` never ends; `flood` writes stdout
/// until stopped; `resize` waits for stdin's end, then reports the sizes it is handed as
/// `WxH` lines; `fail` cannot start. Attach echoes stdin. Port forward connects to
/// 127.0.0.1:port.
#[derive(Default)]
pub(crate) struct Fake {
    pub(crate) counts: Arc<Counts>,
}

fn io_err(context: &str) -> impl FnOnce(std::io::Error) -> RuntimeError + '_ {
    move |source| RuntimeError::Io {
        context: context.to_owned(),
        source,
    }
}

async fn echo(streams: &mut Streams) -> Result<(), RuntimeError> {
    if let Some(err) = streams.stderr.as_mut() {
        err.write_all(b"err").await.map_err(io_err("stderr"))?;
    }
    match (streams.stdin.as_mut(), streams.stdout.as_mut()) {
        (Some(input), Some(output)) => {
            tokio::io::copy(input, output)
                .await
                .map_err(io_err("copy"))?;
            output.shutdown().await.map_err(io_err("stdout"))?;
        }
        (Some(input), None) => {
            tokio::io::copy(input, &mut tokio::io::sink())
                .await
                .map_err(io_err("stdin"))?;
        }
        _ => {}
    }
    Ok(())
}

#[async_trait::async_trait]
impl StreamRuntime for Fake {
    async fn exec(&self, req: ExecRequest, mut streams: Streams) -> Result<i32, RuntimeError> {
        let _live = Live::new(&self.counts);
        match req.cmd.first().map(String::as_str) {
            Some("cat") => {
                echo(&mut streams).await?;
                Ok(req.cmd.get(1).and_then(|c| c.parse().ok()).unwrap_or(0))
            }
            Some("sleep") => std::future::pending().await,
            Some("flood") => {
                let out = streams.stdout.as_mut().expect("flood wants stdout");
                let chunk = [b'x'; 16 * 1024];
                loop {
                    out.write_all(&chunk).await.map_err(io_err("flood"))?;
                    self.counts.flooded.fetch_add(chunk.len(), Ordering::SeqCst);
                }
            }
            Some("resize") => {
                if let Some(input) = streams.stdin.as_mut() {
                    tokio::io::copy(input, &mut tokio::io::sink())
                        .await
                        .map_err(io_err("stdin"))?;
                }
                let mut sizes = streams.resize.take().expect("a tty has resizes");
                let mut report = String::new();
                while let Some(size) = sizes.recv().await {
                    self.counts.resizes.lock().unwrap().push(size);
                    writeln!(report, "{}x{}", size.width, size.height).unwrap();
                }
                let out = streams.stdout.as_mut().expect("resize wants stdout");
                out.write_all(report.as_bytes())
                    .await
                    .map_err(io_err("stdout"))?;
                Ok(0)
            }
            _ => Err(RuntimeError::Failed(format!(
                "no such command: {:?}",
                req.cmd
            ))),
        }
    }

    async fn attach(&self, _req: AttachRequest, mut streams: Streams) -> Result<(), RuntimeError> {
        let _live = Live::new(&self.counts);
        echo(&mut streams).await
    }

    async fn port_forward(
        &self,
        _pod_sandbox_id: &str,
        port: u16,
    ) -> Result<Box<dyn Duplex>, RuntimeError> {
        let conn = TcpStream::connect(("127.0.0.1", port))
            .await
            .map_err(|e| RuntimeError::Failed(format!("dial tcp 127.0.0.1:{port}: {e}")))?;
        Ok(Box::new(Tracked {
            inner: conn,
            _live: Live::new(&self.counts),
        }))
    }
}

/// A connection into the "pod" that counts as live until the server drops it.
struct Tracked {
    inner: TcpStream,
    _live: Live,
}

impl AsyncRead for Tracked {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Tracked {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// A started server over a fresh fake runtime.
pub(crate) struct Running {
    pub(crate) handle: ServerHandle,
    pub(crate) counts: Arc<Counts>,
}

pub(crate) async fn start(config: Config) -> Running {
    let fake = Fake::default();
    let counts = Arc::clone(&fake.counts);
    let handle = Server::start(config, Arc::new(fake)).await.expect("start");
    Running { handle, counts }
}

impl Running {
    pub(crate) fn exec(
        &self,
        cmd: &[&str],
        [stdin, stdout, stderr]: [bool; 3],
        tty: bool,
    ) -> String {
        self.handle
            .get_exec(ExecRequest {
                container_id: "c1".into(),
                cmd: cmd.iter().map(|s| (*s).to_owned()).collect(),
                tty,
                stdin,
                stdout,
                stderr,
            })
            .expect("exec url")
    }

    pub(crate) fn attach(&self) -> String {
        self.handle
            .get_attach(AttachRequest {
                container_id: "c1".into(),
                tty: false,
                stdin: true,
                stdout: true,
                stderr: false,
            })
            .expect("attach url")
    }

    pub(crate) fn port_forward(&self, ports: &[u16]) -> String {
        self.handle
            .get_port_forward(PortForwardRequest {
                pod_sandbox_id: "pod1".into(),
                ports: ports.to_vec(),
            })
            .expect("port forward url")
    }

    /// Waits until no stream is counted open.
    pub(crate) async fn none_open(&self) {
        let done = async {
            while self.handle.open_streams() != OpenStreams::default() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        tokio::time::timeout(WAIT, done)
            .await
            .unwrap_or_else(|_| panic!("streams left open: {:?}", self.handle.open_streams()));
    }
}

/// A quick config for tests: short timeouts where a test waits on them.
pub(crate) fn config() -> Config {
    let mut config = Config::default();
    config.stream_creation_timeout = Duration::from_secs(5);
    config.write_timeout = Duration::from_secs(5);
    config
}

/// An HTTP/1.1 response head and, unless it is 101, its body; the connection stays usable.
pub(crate) struct Reply<S> {
    pub(crate) status: u16,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: String,
    pub(crate) io: S,
    /// Bytes read past the head (the upgraded protocol's first bytes).
    pub(crate) rest: Vec<u8>,
}

impl<S> Reply<S> {
    pub(crate) fn header(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect()
    }
}

/// `host:port` and the path of an `http://` or `https://` URL.
pub(crate) fn split_url(url: &str) -> (&str, &str) {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .expect("an http url");
    let slash = rest.find('/').expect("a path");
    (&rest[..slash], &rest[slash..])
}

/// Sends `method path` with `headers` over `io` and reads the reply.
pub(crate) async fn request_on<S: AsyncRead + AsyncWrite + Unpin>(
    mut io: S,
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
) -> Reply<S> {
    let (host, path) = split_url(url);
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\n");
    for (name, value) in headers {
        write!(head, "{name}: {value}\r\n").unwrap();
    }
    head.push_str("\r\n");
    io.write_all(head.as_bytes()).await.expect("send request");
    let mut buf = Vec::new();
    let end = loop {
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let mut chunk = [0u8; 4096];
        let n = tokio::time::timeout(WAIT, io.read(&mut chunk))
            .await
            .expect("a reply in time")
            .expect("read reply");
        assert!(n > 0, "connection closed before the reply's head: {buf:?}");
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    let mut lines = head.split("\r\n");
    let status: u16 = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .expect("a status line");
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let mut rest = buf[end..].to_vec();
    let mut body = String::new();
    if status != 101 {
        let len: usize = headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0);
        while rest.len() < len {
            let mut chunk = [0u8; 4096];
            let n = io.read(&mut chunk).await.expect("read body");
            assert!(n > 0, "body cut short");
            rest.extend_from_slice(&chunk[..n]);
        }
        body = String::from_utf8_lossy(&rest[..len]).into_owned();
        rest.drain(..len);
    }
    Reply {
        status,
        headers,
        body,
        io,
        rest,
    }
}

/// Connects to the URL's host and sends the request.
pub(crate) async fn request(method: &str, url: &str, headers: &[(&str, &str)]) -> Reply<TcpStream> {
    let (host, _) = split_url(url);
    let io = TcpStream::connect(host).await.expect("connect");
    request_on(io, method, url, headers).await
}

/// The headers of a SPDY upgrade offering `protocols`.
pub(crate) fn spdy_headers(protocols: &str) -> Vec<(&'static str, String)> {
    vec![
        ("Connection", "Upgrade".to_owned()),
        ("Upgrade", "SPDY/3.1".to_owned()),
        ("X-Stream-Protocol-Version", protocols.to_owned()),
    ]
}

/// Upgrades to SPDY with `protocols` and returns the client, asserting 101.
pub(crate) async fn spdy_upgrade(url: &str, protocols: &str) -> SpdyClient<TcpStream> {
    let headers = spdy_headers(protocols);
    let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
    let reply = request("GET", url, &headers).await;
    assert_eq!(reply.status, 101, "{}", reply.body);
    assert_eq!(reply.header("Upgrade"), ["SPDY/3.1"]);
    SpdyClient::new(reply.io, reply.rest)
}

/// A SPDY client made of the crate's codec: opens streams, sends data, collects what comes.
pub(crate) struct SpdyClient<S> {
    pub(crate) io: S,
    encoder: FrameEncoder,
    decoder: FrameDecoder,
    buf: Vec<u8>,
}

/// What the server sent, by stream, until it went away.
#[derive(Debug, Default)]
pub(crate) struct Received {
    pub(crate) data: HashMap<u32, Vec<u8>>,
    pub(crate) fin: Vec<u32>,
    pub(crate) resets: Vec<u32>,
    pub(crate) goaway: Option<u32>,
}

impl<S: AsyncRead + AsyncWrite + Unpin> SpdyClient<S> {
    pub(crate) fn new(io: S, rest: Vec<u8>) -> SpdyClient<S> {
        SpdyClient {
            io,
            encoder: FrameEncoder::new(),
            decoder: FrameDecoder::new(Limits::default()),
            buf: rest,
        }
    }

    pub(crate) async fn send(&mut self, frame: Frame) {
        let mut wire = Vec::new();
        self.encoder.encode(&frame, &mut wire).expect("encode");
        self.io.write_all(&wire).await.expect("send frame");
    }

    pub(crate) async fn open(&mut self, stream_id: u32, headers: Headers) {
        self.send(Frame::SynStream(SynStream {
            stream_id,
            associated_to: 0,
            priority: 0,
            slot: 0,
            fin: false,
            unidirectional: false,
            headers,
        }))
        .await;
    }

    pub(crate) async fn open_typed(&mut self, stream_id: u32, stream_type: &str) {
        self.open(stream_id, Headers::new().with("streamtype", stream_type))
            .await;
    }

    pub(crate) async fn data(&mut self, stream_id: u32, fin: bool, data: &[u8]) {
        self.send(Frame::Data {
            stream_id,
            fin,
            data: data.to_vec(),
        })
        .await;
    }

    /// The next frame; `None` at EOF (or a connection reset).
    pub(crate) async fn recv(&mut self) -> Option<Frame> {
        tokio::time::timeout(WAIT, async {
            loop {
                if let Some((frame, used)) = self.decoder.decode(&self.buf).expect("decode") {
                    self.buf.drain(..used);
                    return Some(frame);
                }
                let mut chunk = vec![0u8; 16 * 1024];
                match self.io.read(&mut chunk).await {
                    Ok(0) | Err(_) => return None,
                    Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                }
            }
        })
        .await
        .expect("the server answers in time")
    }

    /// Reads until the connection ends.
    pub(crate) async fn collect(&mut self) -> Received {
        let mut got = Received::default();
        while let Some(frame) = self.recv().await {
            match frame {
                Frame::Data {
                    stream_id,
                    fin,
                    data,
                } => {
                    got.data.entry(stream_id).or_default().extend(data);
                    if fin {
                        got.fin.push(stream_id);
                    }
                }
                Frame::RstStream { stream_id, .. } => got.resets.push(stream_id),
                Frame::GoAway { status, .. } => got.goaway = Some(status),
                _ => {}
            }
        }
        got
    }
}

impl Received {
    pub(crate) fn text(&self, stream_id: u32) -> String {
        String::from_utf8_lossy(self.data.get(&stream_id).map_or(&[][..], Vec::as_slice))
            .into_owned()
    }
}

/// A TCP echo server on loopback: what the "pod" listens on for port forwards.
pub(crate) async fn echo_server() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            tokio::spawn(async move {
                let (mut r, mut w) = conn.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
                let _ = w.shutdown().await;
            });
        }
    });
    port
}

/// A loopback port nothing listens on.
pub(crate) async fn closed_port() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap().port()
}

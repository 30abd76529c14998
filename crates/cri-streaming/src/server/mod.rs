//! The HTTP streaming server, as kubelet's `cri/streaming` server serves CRI-O and containerd:
//! it hands out single-use URLs for exec, attach and port forward, upgrades the client's
//! connection (SPDY/3.1 or WebSocket) and drives the runtime's operation over it.
//!
//! One task accepts connections; each connection is served by hyper (HTTP/1.1, optionally over
//! rustls) in its own task, and an upgraded one by a task of its own that owns everything the
//! stream needs: the SPDY session or the WebSocket, and the runtime's future. Every task selects
//! on the server's shutdown, so [`ServerHandle::shutdown`] drops them all, runtime futures
//! included; a client that leaves or idles out ends its task the same way.

mod io;
mod over_spdy;
mod over_ws;
mod routes;
mod tls;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use tls::TlsConfig;

use crate::runtime::{AttachRequest, ExecRequest, PortForwardRequest, StreamRuntime};
use crate::spdy::Limits;
use crate::token::{DEFAULT_MAX_IN_FLIGHT, DEFAULT_TTL, TokenCache};
use crate::{Error, Result};

/// How the server listens and how long it waits.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Config {
    /// Where to listen; port 0 picks one. Default `127.0.0.1:0` (CRI-O's `stream_address`
    /// and a free `stream_port`).
    pub addr: SocketAddr,
    /// The scheme, host and port URLs start with, e.g. `https://10.0.0.5:10010`; by default
    /// the listening address (loopback in place of an unspecified one).
    pub base_url: Option<String>,
    /// Serve HTTPS; with a client CA, clients must present a certificate it signed.
    pub tls: Option<TlsConfig>,
    /// A stream whose client sends nothing for this long is closed (kubelet's and CRI-O's
    /// `stream_idle_timeout`, 4 hours by default).
    pub stream_idle_timeout: Duration,
    /// How long a client has to open the streams it announced after the upgrade (kubelet's
    /// 30 seconds).
    pub stream_creation_timeout: Duration,
    /// How long a URL's token stays good (kubelet's 1 minute).
    pub token_ttl: Duration,
    /// Requests handed out and not yet used, at most (kubelet's 1000); past it, `get_*`
    /// refuse with [`Error::TooManyInFlight`].
    pub max_in_flight: usize,
    /// How long a client has to send its request headers (and finish the TLS handshake).
    pub header_read_timeout: Duration,
    /// How long one write to a client may take before its connection is dropped.
    pub write_timeout: Duration,
    /// The SPDY frame decoder's limits.
    pub spdy_limits: Limits,
    /// The largest WebSocket message (and frame) a client may send.
    pub max_ws_message: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            addr: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            base_url: None,
            tls: None,
            stream_idle_timeout: Duration::from_secs(4 * 60 * 60),
            stream_creation_timeout: Duration::from_secs(30),
            token_ttl: DEFAULT_TTL,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            header_read_timeout: Duration::from_secs(30),
            write_timeout: Duration::from_secs(30),
            spdy_limits: Limits::default(),
            max_ws_message: 1024 * 1024,
        }
    }
}

/// What a token stands for.
#[derive(Debug)]
pub(crate) enum Pending {
    Exec(ExecRequest),
    Attach(AttachRequest),
    PortForward(PortForwardRequest),
}

/// The three kinds of stream, for URLs and counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamKind {
    /// `/exec/<token>`.
    Exec,
    /// `/attach/<token>`.
    Attach,
    /// `/portforward/<token>`.
    PortForward,
}

impl StreamKind {
    /// The URL path's first segment.
    pub fn path(self) -> &'static str {
        match self {
            StreamKind::Exec => "exec",
            StreamKind::Attach => "attach",
            StreamKind::PortForward => "portforward",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Streams being served, by kind (upgraded connections whose operation is running).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpenStreams {
    /// Exec streams.
    pub exec: usize,
    /// Attach streams.
    pub attach: usize,
    /// Port forward connections (each may carry several ports and connections).
    pub port_forward: usize,
}

/// What every connection task shares.
pub(crate) struct Shared {
    pub(crate) runtime: Arc<dyn StreamRuntime>,
    pub(crate) tokens: TokenCache<Pending>,
    pub(crate) config: Config,
    open: [AtomicUsize; 3],
    pub(crate) shutdown: CancellationToken,
    pub(crate) tracker: TaskTracker,
}

impl Shared {
    /// Counts a stream of `kind` as open until the guard drops.
    pub(crate) fn open_guard(self: &Arc<Self>, kind: StreamKind) -> OpenGuard {
        self.open[kind.index()].fetch_add(1, Ordering::Relaxed);
        OpenGuard {
            shared: Arc::clone(self),
            kind,
        }
    }
}

/// Decrements its kind's count of open streams when dropped.
pub(crate) struct OpenGuard {
    shared: Arc<Shared>,
    kind: StreamKind,
}

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.shared.open[self.kind.index()].fetch_sub(1, Ordering::Relaxed);
    }
}

/// The streaming server. See [`Server::start`].
#[derive(Debug)]
pub struct Server;

impl Server {
    /// Listens on `config.addr` and serves streams for `runtime` until the handle is shut down
    /// or dropped. Must be called within a tokio runtime.
    ///
    /// # Errors
    ///
    /// [`Error::Bind`] when the address cannot be listened on; [`Error::Tls`] when the TLS
    /// configuration is unusable.
    pub async fn start(config: Config, runtime: Arc<dyn StreamRuntime>) -> Result<ServerHandle> {
        let acceptor = config.tls.as_ref().map(TlsConfig::acceptor).transpose()?;
        let listener = TcpListener::bind(config.addr)
            .await
            .map_err(|source| Error::Bind {
                addr: config.addr,
                source,
            })?;
        let local_addr = listener.local_addr().map_err(|source| Error::Bind {
            addr: config.addr,
            source,
        })?;
        let base_url = match &config.base_url {
            Some(url) => url.trim_end_matches('/').to_owned(),
            None => default_base_url(local_addr, acceptor.is_some()),
        };
        let shared = Arc::new(Shared {
            runtime,
            tokens: TokenCache::new(config.token_ttl, config.max_in_flight),
            config,
            open: Default::default(),
            shutdown: CancellationToken::new(),
            tracker: TaskTracker::new(),
        });
        shared
            .tracker
            .spawn(accept_loop(listener, acceptor, Arc::clone(&shared)));
        Ok(ServerHandle {
            shared,
            local_addr,
            base_url,
        })
    }
}

fn default_base_url(addr: SocketAddr, tls: bool) -> String {
    let ip = match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    let scheme = if tls { "https" } else { "http" };
    format!("{scheme}://{}", SocketAddr::new(ip, addr.port()))
}

/// A running server: hands out URLs, counts open streams, shuts down. Dropping it shuts the
/// server down without waiting.
pub struct ServerHandle {
    shared: Arc<Shared>,
    local_addr: SocketAddr,
    base_url: String,
}

impl std::fmt::Debug for ServerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerHandle")
            .field("local_addr", &self.local_addr)
            .field("base_url", &self.base_url)
            .finish_non_exhaustive()
    }
}

impl ServerHandle {
    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// What URLs start with: `http(s)://host:port`.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The URL a client execs through (CRI's `ExecResponse.url`): `<base>/exec/<token>`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRequest`] as kubelet refuses the request (no container id, a TTY with
    /// stderr, no stream at all); [`Error::TooManyInFlight`] when `max_in_flight` URLs wait
    /// to be used; [`Error::Random`] when the kernel gives no random bytes.
    pub fn get_exec(&self, req: ExecRequest) -> Result<String> {
        check_streams(
            &req.container_id,
            req.tty,
            [req.stdin, req.stdout, req.stderr],
        )?;
        self.url(StreamKind::Exec, Pending::Exec(req))
    }

    /// The URL a client attaches through: `<base>/attach/<token>`.
    ///
    /// # Errors
    ///
    /// As [`ServerHandle::get_exec`].
    pub fn get_attach(&self, req: AttachRequest) -> Result<String> {
        check_streams(
            &req.container_id,
            req.tty,
            [req.stdin, req.stdout, req.stderr],
        )?;
        self.url(StreamKind::Attach, Pending::Attach(req))
    }

    /// The URL a client forwards ports through: `<base>/portforward/<token>`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRequest`] without a pod sandbox id; otherwise as
    /// [`ServerHandle::get_exec`].
    pub fn get_port_forward(&self, req: PortForwardRequest) -> Result<String> {
        if req.pod_sandbox_id.is_empty() {
            return Err(Error::InvalidRequest("missing required pod_sandbox_id"));
        }
        self.url(StreamKind::PortForward, Pending::PortForward(req))
    }

    fn url(&self, kind: StreamKind, pending: Pending) -> Result<String> {
        let token = self.shared.tokens.insert(pending)?;
        Ok(format!("{}/{}/{token}", self.base_url, kind.path()))
    }

    /// Streams being served now, by kind: the daemon's gauge.
    pub fn open_streams(&self) -> OpenStreams {
        let get = |kind: StreamKind| self.shared.open[kind.index()].load(Ordering::Relaxed);
        OpenStreams {
            exec: get(StreamKind::Exec),
            attach: get(StreamKind::Attach),
            port_forward: get(StreamKind::PortForward),
        }
    }

    /// Stops listening and ends every connection and stream: each task's future, the
    /// runtime's futures with them, is dropped. Waits (at most `write_timeout`) for the tasks
    /// to be gone. SPDY sessions still send their GOAWAY on the way out, from tasks of their
    /// own that end within `write_timeout`; tokens handed out and not used are not served.
    pub async fn shutdown(&self) {
        self.shared.shutdown.cancel();
        self.shared.tracker.close();
        if tokio::time::timeout(self.shared.config.write_timeout, self.shared.tracker.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                tasks = self.shared.tracker.len(),
                "streaming server tasks still running after shutdown"
            );
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        self.shared.shutdown.cancel();
    }
}

/// Kubelet's `validateExecRequest` (and attach's, the same).
fn check_streams(container_id: &str, tty: bool, [stdin, stdout, stderr]: [bool; 3]) -> Result<()> {
    if container_id.is_empty() {
        return Err(Error::InvalidRequest("missing required container_id"));
    }
    if tty && stderr {
        return Err(Error::InvalidRequest("tty and stderr cannot both be true"));
    }
    if !stdin && !stdout && !stderr {
        return Err(Error::InvalidRequest(
            "one of stdin, stdout, or stderr must be set",
        ));
    }
    Ok(())
}

async fn accept_loop(
    listener: TcpListener,
    acceptor: Option<tokio_rustls::TlsAcceptor>,
    shared: Arc<Shared>,
) {
    loop {
        let accepted = tokio::select! {
            () = shared.shutdown.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((tcp, peer)) => {
                let _ = tcp.set_nodelay(true);
                let conn = serve_connection(tcp, acceptor.clone(), Arc::clone(&shared));
                let shutdown = shared.shutdown.clone();
                shared.tracker.spawn(async move {
                    tokio::select! {
                        () = shutdown.cancelled() => {}
                        () = conn => {}
                    }
                    tracing::trace!(%peer, "streaming connection done");
                });
            }
            Err(e) => {
                // Out of descriptors and the like: wait rather than spin.
                tracing::warn!("streaming server accept: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

async fn serve_connection(
    tcp: tokio::net::TcpStream,
    acceptor: Option<tokio_rustls::TlsAcceptor>,
    shared: Arc<Shared>,
) {
    let timeout = shared.config.header_read_timeout;
    match acceptor {
        None => serve_http(tcp, shared).await,
        Some(acceptor) => match tokio::time::timeout(timeout, acceptor.accept(tcp)).await {
            Ok(Ok(tls)) => serve_http(tls, shared).await,
            Ok(Err(e)) => tracing::debug!("streaming tls handshake: {e}"),
            Err(_) => tracing::debug!("streaming tls handshake: not done in {timeout:?}"),
        },
    }
}

/// Room for a request's headers; past it the answer is 431 (hyper's own buffer limit, set to
/// the same, is approximate).
const MAX_REQUEST_HEAD: usize = 64 * 1024;
/// Headers in one request, at most (past it hyper answers 431).
const MAX_REQUEST_HEADERS: usize = 64;

async fn serve_http<IO>(io: IO, shared: Arc<Shared>)
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    let service = {
        let shared = Arc::clone(&shared);
        hyper::service::service_fn(move |req| {
            let shared = Arc::clone(&shared);
            async move { Ok::<_, std::convert::Infallible>(routes::route(&shared, req)) }
        })
    };
    let result = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(shared.config.header_read_timeout)
        .max_buf_size(MAX_REQUEST_HEAD)
        .max_headers(MAX_REQUEST_HEADERS)
        .serve_connection(TokioIo::new(io), service)
        .with_upgrades()
        .await;
    if let Err(e) = result {
        tracing::debug!("streaming http connection: {e}");
    }
}

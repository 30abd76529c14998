//! Accepting connections on a unix socket and serving each with hyper.
//!
//! Our own accept loop rather than `axum::serve`, because each connection needs what that one
//! cannot give it: the peer's identity (pid, uid) for log lines, the HTTP/2 front that repairs
//! `:authority` (see [`crate::front`]), a bound on how long a client may connect and say
//! nothing, a bound on open connections overall and per client (`clients.rs`), an idle timeout for
//! connections with no request in flight (`idle.rs`), and the HTTP/1 header timeout. HTTP/1.1 (the
//! status API) and HTTP/2 with prior knowledge (gRPC) are told apart per connection by hyper's auto
//! builder.

mod clients;
mod idle;

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::front::NormalizedStream;
use clients::{ClientSlots, Peer, RefusalLog};
use idle::{Activity, Tracked};

/// Limits and switches for served connections. The defaults (10 s, 10 s, 60 s, 20 s, 1024, 64,
/// 5 min, on) suit a node daemon whose clients are kubelet and command-line tools.
#[derive(Debug, Clone)]
pub struct Limits {
    /// A connection that sends nothing for this long after connecting is closed.
    pub first_byte: Duration,
    /// An HTTP/1 request whose headers take longer than this is answered 408 and closed.
    pub http1_headers: Duration,
    /// HTTP/2 connections are pinged this often when idle, and closed when a ping goes
    /// unanswered for [`Limits::keep_alive_timeout`] (a peer that vanished).
    pub keep_alive_interval: Duration,
    /// See [`Limits::keep_alive_interval`].
    pub keep_alive_timeout: Duration,
    /// Connections open at once; one more is closed at accept, with a warning.
    pub max_connections: usize,
    /// Connections one client may hold at once (a root peer is one client per process, any
    /// other peer one per uid, as `SO_PEERCRED` tells); one more is closed at accept, with a
    /// warning at most once a minute per client.
    pub max_per_client: usize,
    /// A connection with no request in flight for this long is closed: HTTP/2 with GOAWAY, so
    /// a client reconnects when it next needs to (gRPC clients do so transparently), HTTP/1
    /// between requests. Keep-alive pings do not count as activity.
    pub idle_timeout: Duration,
    /// Whether the HTTP/2 front rewrites invalid `:authority` values (see
    /// [`NormalizedStream`]); off, h2's errors are still logged.
    pub normalize_authority: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            first_byte: Duration::from_secs(10),
            http1_headers: Duration::from_secs(10),
            keep_alive_interval: Duration::from_secs(60),
            keep_alive_timeout: Duration::from_secs(20),
            max_connections: 1024,
            // Kubelet holds one or two, crictl one per command: 64 leaves any client room and
            // sixteen of them could still not fill the global cap.
            max_per_client: 64,
            // As gRPC servers' MaxConnectionIdle is typically set; kubelet calls every second,
            // so its connection is never idle this long.
            idle_timeout: Duration::from_secs(300),
            normalize_authority: true,
        }
    }
}

/// Serves `router` on `listener` until `stop` is cancelled, then lets open connections finish
/// their requests for up to `grace` and closes the rest.
///
/// Every connection goes through a [`NormalizedStream`] to hyper's auto builder (HTTP/1.1 or
/// HTTP/2 with prior knowledge). Errors of single connections, accept errors included, are
/// logged and never end the loop.
pub async fn serve(
    listener: UnixListener,
    router: Router,
    limits: Limits,
    stop: CancellationToken,
    grace: Duration,
) {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.http1_headers);
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(limits.keep_alive_interval)
        .keep_alive_timeout(limits.keep_alive_timeout);
    let builder = Arc::new(builder);
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let client_slots = ClientSlots::new(limits.max_per_client);
    let mut refusals = RefusalLog::default();
    let mut tasks = tokio::task::JoinSet::new();
    loop {
        while tasks.try_join_next().is_some() {}
        let stream = tokio::select! {
            () = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // EMFILE and friends: back off instead of spinning, keep serving.
                    tracing::warn!(error = %e, "cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let peer = Peer::of(&stream);
        let (activity, evict) = (Activity::new(), CancellationToken::new());
        // The client's own cap first: a client over it must not take a global slot meanwhile.
        let Some(client_slot) =
            client_slots.try_take(peer.client, Arc::clone(&activity), evict.clone())
        else {
            if let Some(refused) = refusals.refused(peer.client, Instant::now()) {
                tracing::warn!(%peer, limit = limits.max_per_client, refused, "connection refused: the client holds too many connections, each with a request in flight");
            }
            continue;
        };
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            if let Some(refused) = refusals.refused(peer.client, Instant::now()) {
                tracing::warn!(%peer, limit = limits.max_connections, refused, "connection refused: too many open connections");
            }
            continue;
        };
        let builder = Arc::clone(&builder);
        let (router, limits, stop) = (router.clone(), limits.clone(), stop.clone());
        tasks.spawn(async move {
            let _slots = (slot, client_slot);
            let conn = Conn {
                activity,
                evict,
                stop,
            };
            serve_one(stream, &peer, &builder, router, &limits, &conn).await;
        });
    }
    drop(listener);
    let drained = async { while tasks.join_next().await.is_some() {} };
    if tokio::time::timeout(grace, drained).await.is_err() {
        tracing::warn!(
            ?grace,
            "connections still open after the grace period: closing them"
        );
    }
    tasks.abort_all();
}

/// What one connection is served with besides its stream.
struct Conn {
    /// Its requests in flight.
    activity: Arc<Activity>,
    /// Cancelled when its client, at its cap, connected again and this one was idle longest.
    evict: CancellationToken,
    /// The daemon stops.
    stop: CancellationToken,
}

/// Serves one accepted connection until it ends, is idle for too long, is evicted, or `stop` is
/// cancelled.
async fn serve_one(
    stream: UnixStream,
    peer: &Peer,
    builder: &auto::Builder<TokioExecutor>,
    router: Router,
    limits: &Limits,
    conn: &Conn,
) {
    let Conn {
        activity,
        evict,
        stop,
    } = conn;
    // Wait (without reading) for the client's first bytes; hyper itself would wait forever.
    let first = tokio::time::timeout(limits.first_byte, first_byte(&stream));
    let first = tokio::select! {
        first = first => first,
        () = stop.cancelled() => return,
        () = evict.cancelled() => return,
    };
    match first {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            tracing::debug!(%peer, error = %e, "connection failed before its first byte");
            return;
        }
        Err(_) => {
            tracing::warn!(%peer, timeout = ?limits.first_byte, "connection closed: the client sent nothing");
            return;
        }
    }
    let service = Tracked::new(TowerToHyperService::new(router), Arc::clone(activity));
    let io = TokioIo::new(NormalizedStream::new(
        stream,
        peer.name.clone(),
        limits.normalize_authority,
    ));
    let connection = builder.serve_connection_with_upgrades(io, service);
    let mut connection = std::pin::pin!(connection);
    // Shutting down (the daemon stops, or the connection was idle) lets requests in flight
    // finish; HTTP/2 clients get GOAWAY and open a new connection when they need one.
    let mut closing = false;
    let result = loop {
        tokio::select! {
            result = connection.as_mut() => break result,
            () = stop.cancelled(), if !closing => {
                connection.as_mut().graceful_shutdown();
                closing = true;
            }
            () = activity.idle_for(limits.idle_timeout), if !closing => {
                tracing::debug!(%peer, timeout = ?limits.idle_timeout, "closing an idle connection");
                connection.as_mut().graceful_shutdown();
                closing = true;
            }
            () = evict.cancelled(), if !closing => {
                tracing::debug!(%peer, "closing the client's longest-idle connection: it connected again at its cap");
                connection.as_mut().graceful_shutdown();
                closing = true;
            }
        }
    };
    if let Err(e) = result {
        tracing::debug!(%peer, error = %e, "connection ended with an error");
    }
}

/// Waits until the client has sent something (or closed), without reading it. `readable()` alone
/// is not enough: a new socket may be reported readable before anything arrived.
async fn first_byte(stream: &UnixStream) -> std::io::Result<()> {
    use nix::sys::socket::{MsgFlags, recv};
    use std::os::fd::AsRawFd as _;
    loop {
        stream.readable().await?;
        let peeked = stream.try_io(tokio::io::Interest::READABLE, || {
            let mut byte = [0u8; 1];
            recv(
                stream.as_raw_fd(),
                &mut byte,
                MsgFlags::MSG_PEEK | MsgFlags::MSG_DONTWAIT,
            )
            .map_err(std::io::Error::from)
        });
        match peeked {
            // A byte, or end of file: either way hyper takes it from here.
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};
    use std::time::{Duration, Instant};

    use tokio::task::JoinHandle;

    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    use super::*;

    /// A client that connects and says nothing used to hold its connection forever.
    #[tokio::test]
    async fn a_silent_client_is_disconnected_and_others_are_served() {
        let (_dir, socket, stop, server, _) = server(Limits {
            first_byte: Duration::from_millis(300),
            ..Limits::default()
        });

        let started = Instant::now();
        let mut silent = UnixStream::connect(&socket).await.unwrap();
        let mut byte = [0u8; 1];
        let read = tokio::time::timeout(Duration::from_secs(5), silent.read(&mut byte))
            .await
            .expect("the server closes a silent connection");
        assert_eq!(read.unwrap(), 0, "closed, nothing sent");
        assert!(started.elapsed() >= Duration::from_millis(300));

        let mut client = UnixStream::connect(&socket).await.unwrap();
        client
            .write_all(b"GET /ping HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut answer = String::new();
        client.read_to_string(&mut answer).await.unwrap();
        assert!(answer.ends_with("pong"), "{answer}");

        stop.cancel();
        server.await.unwrap();
    }

    /// A server on a fresh socket with a `/ping` and a `/slow` route (1.5 s), which signals the
    /// returned `Notify` as it starts.
    fn server(
        limits: Limits,
    ) -> (
        tempfile::TempDir,
        PathBuf,
        CancellationToken,
        JoinHandle<()>,
        Arc<tokio::sync::Notify>,
    ) {
        let slow_started = Arc::new(tokio::sync::Notify::new());
        let started = Arc::clone(&slow_started);
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("s.sock");
        let listener = UnixListener::bind(&socket).unwrap();
        let router = Router::new()
            .route("/ping", axum::routing::get(|| async { "pong" }))
            .route(
                "/slow",
                axum::routing::get(|| async move {
                    started.notify_one();
                    tokio::time::sleep(Duration::from_millis(1500)).await;
                    "done"
                }),
            );
        let stop = CancellationToken::new();
        let server = tokio::spawn(serve(
            listener,
            router,
            limits,
            stop.clone(),
            Duration::from_secs(5),
        ));
        (dir, socket, stop, server, slow_started)
    }

    /// An HTTP/1.1 `GET /ping` on `stream`; the answer's body.
    async fn ping(stream: &mut UnixStream) -> String {
        stream
            .write_all(b"GET /ping HTTP/1.1\r\nhost: localhost\r\n\r\n")
            .await
            .unwrap();
        let mut answer = vec![0; 1024];
        let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut answer))
            .await
            .expect("an answer")
            .unwrap();
        String::from_utf8_lossy(&answer[..n]).into_owned()
    }

    /// Whether the server closed `stream` (end of file) within `wait`.
    async fn closed_within(stream: &mut UnixStream, wait: Duration) -> bool {
        let mut byte = [0u8; 1];
        matches!(
            tokio::time::timeout(wait, stream.read(&mut byte)).await,
            Ok(Ok(0) | Err(_))
        )
    }

    /// Stopping lets a request in flight finish (within the grace period), then ends: each
    /// connection follows the stop itself now that its idle timer may also close it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stop_lets_the_request_in_flight_finish() {
        let (_dir, socket, stop, server, slow_started) = server(Limits::default());
        let (mut client, _driver) = h2_client(&socket).await;
        let call = tokio::spawn(async move { h2_get(&mut client, "/slow").await });
        let mut silent = UnixStream::connect(&socket).await.unwrap();
        slow_started.notified().await;
        stop.cancel();
        assert_eq!(call.await.unwrap(), 200, "answered after the stop");
        tokio::time::timeout(Duration::from_secs(5), server)
            .await
            .expect("the server ends once its connections did")
            .unwrap();
        assert!(closed_within(&mut silent, Duration::from_secs(1)).await);
    }

    const OTHER_CLIENT: &str = "CRIO_LITE_TEST_OTHER_CLIENT";

    /// Issue #21: one client holding connections used to lock every other client out once the
    /// global cap was reached. Past its own cap its connections are refused, and another process
    /// (this test run again as a worker) is still served.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_client_over_its_cap_loses_its_idle_connection_while_another_is_served() {
        if let Ok(socket) = std::env::var(OTHER_CLIENT) {
            let mut stream = UnixStream::connect(&socket).await.unwrap();
            let answer = ping(&mut stream).await;
            assert!(answer.ends_with("pong"), "{answer}");
            return;
        }
        let (_dir, socket, stop, server, _) = server(Limits {
            max_per_client: 3,
            ..Limits::default()
        });
        let mut held = Vec::new();
        for _ in 0..3 {
            held.push(UnixStream::connect(&socket).await.unwrap());
        }
        // The three say nothing: a fourth of the same client takes the place of the first.
        let mut extra = UnixStream::connect(&socket).await.unwrap();
        let answer = ping(&mut extra).await;
        assert!(answer.ends_with("pong"), "{answer}");
        assert!(
            closed_within(&mut held[0], Duration::from_secs(5)).await,
            "the client's longest-idle connection is closed for it"
        );
        held.remove(0);
        let other = tokio::task::spawn_blocking({
            let socket = socket.clone();
            move || {
                test_support::process::rerun_test(
                    "connections::tests::a_client_over_its_cap_loses_its_idle_connection_while_another_is_served",
                )
                .env(OTHER_CLIENT, socket)
                .stdout(std::process::Stdio::null())
                .status()
                .unwrap()
            }
        });
        assert!(other.await.unwrap().success(), "another client is served");
        // The client's own connections are still served.
        let answer = ping(&mut held[0]).await;
        assert!(answer.ends_with("pong"), "{answer}");
        stop.cancel();
        server.await.unwrap();
    }

    /// An HTTP/2 connection to `socket`, its driver running: the driver's task ends when the
    /// server closes the connection.
    async fn h2_client(socket: &Path) -> (h2::client::SendRequest<bytes::Bytes>, JoinHandle<()>) {
        let io = UnixStream::connect(socket).await.unwrap();
        let (client, connection) = h2::client::handshake(io).await.unwrap();
        (client, tokio::spawn(async move { drop(connection.await) }))
    }

    /// A `GET path` on `client`; the response's status.
    async fn h2_get(client: &mut h2::client::SendRequest<bytes::Bytes>, path: &str) -> u16 {
        let request = http::Request::get(format!("http://localhost{path}"))
            .body(())
            .unwrap();
        let ready = client
            .clone()
            .ready()
            .await
            .expect("the connection takes a request");
        *client = ready;
        let (response, _) = client.send_request(request, true).expect("request sent");
        response.await.expect("a response").status().as_u16()
    }

    /// Issue #21: an HTTP/2 connection that opened no stream held its slot for as long as it
    /// answered pings. It is now closed after the idle timeout; one with a stream open longer
    /// than that, or with requests more often, is not.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_idle_http2_connection_is_closed_and_a_busy_one_is_not() {
        let idle_timeout = Duration::from_millis(500);
        let (_dir, socket, stop, server, _) = server(Limits {
            idle_timeout,
            ..Limits::default()
        });
        let (_idle, idle_driver) = h2_client(&socket).await;
        let (mut slow, slow_driver) = h2_client(&socket).await;
        let (mut chatty, chatty_driver) = h2_client(&socket).await;
        let started = Instant::now();
        // One stream open for three idle timeouts.
        let slow_call = tokio::spawn(async move {
            let status = h2_get(&mut slow, "/slow").await;
            (status, slow)
        });
        // A request every 100 ms for as long.
        while started.elapsed() < Duration::from_millis(1500) {
            assert_eq!(h2_get(&mut chatty, "/ping").await, 200);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let (status, mut slow) = slow_call.await.unwrap();
        assert_eq!(status, 200, "the slow stream was answered");
        assert!(
            tokio::time::timeout(Duration::from_secs(5), idle_driver)
                .await
                .is_ok(),
            "the connection with no stream is closed"
        );
        // Both busy connections still take requests.
        assert_eq!(h2_get(&mut slow, "/ping").await, 200);
        assert_eq!(h2_get(&mut chatty, "/ping").await, 200);
        assert!(!slow_driver.is_finished() && !chatty_driver.is_finished());
        stop.cancel();
        server.await.unwrap();
    }
}

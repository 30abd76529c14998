//! Accepting connections on the daemon's socket and serving each with hyper.
//!
//! Our own accept loop rather than `axum::serve`, because each connection needs what that one
//! cannot give it: the peer's identity (pid, uid) for log lines, the HTTP/2 front that repairs
//! `:authority` (see [`crate::h2_front`]), a bound on how long a client may connect and say
//! nothing, a bound on open connections, and the HTTP/1 header timeout. HTTP/1.1 (the status API)
//! and HTTP/2 with prior knowledge (gRPC) are told apart per connection by hyper's auto builder.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::h2_front::NormalizedStream;

/// Limits and switches for served connections.
#[derive(Debug, Clone)]
pub(crate) struct Limits {
    /// A connection that sends nothing for this long after connecting is closed.
    pub(crate) first_byte: Duration,
    /// An HTTP/1 request whose headers take longer than this is answered 408 and closed.
    pub(crate) http1_headers: Duration,
    /// HTTP/2 connections are pinged this often when idle, and closed when a ping goes
    /// unanswered for [`Limits::keep_alive_timeout`] (a peer that vanished).
    pub(crate) keep_alive_interval: Duration,
    /// See [`Limits::keep_alive_interval`].
    pub(crate) keep_alive_timeout: Duration,
    /// Connections open at once; one more is closed at accept, with a warning.
    pub(crate) max_connections: usize,
    /// Whether the HTTP/2 front rewrites invalid `:authority` values.
    pub(crate) normalize_authority: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            first_byte: Duration::from_secs(10),
            http1_headers: Duration::from_secs(10),
            keep_alive_interval: Duration::from_secs(60),
            keep_alive_timeout: Duration::from_secs(20),
            max_connections: 1024,
            normalize_authority: true,
        }
    }
}

/// Serves `router` on `listener` until `stop` is cancelled, then lets open connections finish
/// their requests for up to `grace` and closes the rest.
pub(crate) async fn serve(
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
    let graceful = GracefulShutdown::new();
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
        let peer = peer_of(&stream);
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            tracing::warn!(%peer, limit = limits.max_connections, "connection refused: too many open connections");
            continue;
        };
        let service = TowerToHyperService::new(router.clone());
        let builder = Arc::clone(&builder);
        let watcher = graceful.watcher();
        let limits = limits.clone();
        tasks.spawn(async move {
            let _slot = slot;
            // Wait (without reading) for the client's first bytes; hyper itself would wait forever.
            match tokio::time::timeout(limits.first_byte, first_byte(&stream)).await {
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
            let io = TokioIo::new(NormalizedStream::new(
                stream,
                peer.clone(),
                limits.normalize_authority,
            ));
            let connection = builder.serve_connection_with_upgrades(io, service);
            if let Err(e) = watcher.watch(connection.into_owned()).await {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
        });
    }
    drop(listener);
    if tokio::time::timeout(grace, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(
            ?grace,
            "connections still open after the grace period: closing them"
        );
    }
    tasks.abort_all();
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

/// Who is at the other end, for log lines: `pid 1234 uid 0`, or `unknown peer`.
fn peer_of(stream: &UnixStream) -> String {
    match stream.peer_cred() {
        Ok(cred) => match cred.pid() {
            Some(pid) => format!("pid {pid} uid {}", cred.uid()),
            None => format!("uid {}", cred.uid()),
        },
        Err(_) => "unknown peer".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    use super::*;

    /// A client that connects and says nothing used to hold its connection forever.
    #[tokio::test]
    async fn a_silent_client_is_disconnected_and_others_are_served() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("s.sock");
        let listener = UnixListener::bind(&socket).unwrap();
        let router = Router::new().route("/ping", axum::routing::get(|| async { "pong" }));
        let limits = Limits {
            first_byte: Duration::from_millis(300),
            ..Limits::default()
        };
        let stop = CancellationToken::new();
        let server = tokio::spawn(serve(
            listener,
            router,
            limits,
            stop.clone(),
            Duration::from_secs(1),
        ));

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
}

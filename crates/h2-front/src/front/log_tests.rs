//! What the front logs, end to end: an h2 server behind the front on a socket pair, a raw HTTP/2
//! client, and a minimal subscriber that records the front's events.

use super::NormalizedStream;
use bytes::Bytes;
use std::fmt::{Debug, Write as _};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use test_support::raw_h2::{End, RawConn};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::UnixStream;
use tracing::field::{Field, Visit};
use tracing::{Event, Metadata, span};

/// Records `LEVEL field=value ...` for every event of this crate.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<String>>>);

impl Capture {
    fn lines(&self) -> Vec<String> {
        self.0.lock().expect("lock").clone()
    }
}

struct Line<'a>(&'a mut String);

impl Visit for Line<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        let _ = write!(self.0, " {}={:?}", field.name(), value);
    }
}

impl tracing::Subscriber for Capture {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.target().starts_with("h2_front::front")
    }
    fn new_span(&self, _: &span::Attributes<'_>) -> span::Id {
        span::Id::from_u64(1)
    }
    fn record(&self, _: &span::Id, _: &span::Record<'_>) {}
    fn record_follows_from(&self, _: &span::Id, _: &span::Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut line = event.metadata().level().to_string();
        event.record(&mut Line(&mut line));
        self.0.lock().expect("lock").push(line);
    }
    fn enter(&self, _: &span::Id) {}
    fn exit(&self, _: &span::Id) {}
}

async fn serve<IO: AsyncRead + AsyncWrite + Unpin>(io: IO) -> Result<(), h2::Error> {
    let mut conn = h2::server::handshake(io).await?;
    while let Some(accepted) = conn.accept().await {
        let (_req, mut respond) = accepted?;
        let mut send = respond.send_response(http::Response::new(()), false)?;
        send.send_data(Bytes::from_static(b"ok"), true)?;
    }
    Ok(())
}

async fn timed<T>(f: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(10), f)
        .await
        .expect("test step timed out")
}

/// Runs `client` against a served, wrapped connection and returns the log.
async fn logged<F, Fut>(normalize: bool, client: F) -> Vec<String>
where
    F: FnOnce(RawConn<UnixStream>) -> Fut,
    Fut: Future<Output = ()>,
{
    let capture = Capture::default();
    // current_thread runtime: every task polls on this thread.
    let _guard = tracing::subscriber::set_default(capture.clone());
    let (client_io, server_io) = UnixStream::pair().expect("pair");
    let task = tokio::spawn(serve(NormalizedStream::new(
        server_io,
        "pid 42 uid 0".into(),
        normalize,
    )));
    let conn = timed(RawConn::handshake(client_io))
        .await
        .expect("handshake");
    client(conn).await;
    drop(timed(task).await.expect("no panic"));
    capture.lines()
}

fn one<'a>(lines: &'a [String], needle: &str) -> &'a str {
    let found: Vec<&String> = lines.iter().filter(|l| l.contains(needle)).collect();
    assert_eq!(found.len(), 1, "{needle:?} in {lines:#?}");
    found[0]
}

#[tokio::test]
async fn rewrite_is_logged_at_debug_with_the_escaped_original() {
    let lines = logged(true, |mut conn| async move {
        let evil: &[u8] = b"/run/x.sock\nINFO forged line\x1b[31m";
        let resp = timed(conn.request(Some(evil), "/a", &[], b""))
            .await
            .expect("req");
        assert_eq!(resp.end, End::Stream);
        timed(conn.close()).await.expect("close");
    })
    .await;
    let line = one(&lines, "replaced an invalid HTTP/2 :authority");
    assert!(line.starts_with("DEBUG"), "{line}");
    assert!(line.contains("peer=pid 42 uid 0"), "{line}");
    assert!(
        line.contains(r"original=/run/x.sock\nINFO forged line\x1b[31m"),
        "{line}"
    );
    assert!(!line.contains('\n') && !line.contains('\x1b'), "{line}");
    assert!(lines.iter().all(|l| !l.starts_with("WARN")), "{lines:#?}");
}

#[tokio::test]
async fn fault_and_goaway_are_logged_at_warn() {
    let lines = logged(true, |mut conn| async move {
        let id = timed(conn.send_raw_headers(&[0x80], true))
            .await
            .expect("send");
        let resp = timed(conn.read_response(id)).await.expect("read");
        assert!(matches!(resp.end, End::GoAway(..)), "{resp:?}");
    })
    .await;
    let fault = one(&lines, "rejected an HTTP/2 header block");
    assert!(fault.starts_with("WARN") && fault.contains("reason=\"hpack decoding failed\""));
    assert!(fault.contains("stream_id=1"), "{fault}");
    let goaway = one(&lines, "GOAWAY sent to the client");
    assert!(goaway.starts_with("WARN"), "{goaway}");
    assert!(goaway.contains("last_stream_id=0"), "{goaway}");
    assert!(goaway.contains("error_code=\"PROTOCOL_ERROR\""), "{goaway}");
}

#[tokio::test]
async fn reset_is_logged_when_the_front_is_off() {
    let lines = logged(false, |mut conn| async move {
        let resp = timed(conn.request(Some(b"/var/run/crio-lite/crio-lite.sock"), "/a", &[], b""))
            .await
            .expect("req");
        assert_eq!(resp.end, End::Reset(1));
        timed(conn.close()).await.expect("close");
    })
    .await;
    let reset = one(&lines, "stream reset sent to the client");
    assert!(reset.starts_with("WARN"), "{reset}");
    assert!(reset.contains("stream_id=1"), "{reset}");
    assert!(reset.contains("error_code=\"PROTOCOL_ERROR\""), "{reset}");
    assert!(lines.iter().all(|l| !l.contains("replaced")), "{lines:#?}");
}

#[tokio::test]
async fn http1_passes_both_ways_and_is_never_taken_for_frames() {
    let capture = Capture::default();
    let _guard = tracing::subscriber::set_default(capture.clone());
    let (mut client, server) = tokio::io::duplex(1024);
    let mut front = NormalizedStream::new(server, "p".into(), true);
    let req = b"GET /info HTTP/1.1\r\nHost: /var/run/crio-lite/crio-lite.sock\r\n\r\n";
    client.write_all(req).await.expect("write");
    let mut got = vec![0u8; req.len()];
    timed(front.read_exact(&mut got)).await.expect("read");
    assert_eq!(&got, req);
    // A body that would be RST_STREAM(stream 1, PROTOCOL_ERROR) in HTTP/2.
    let resp = b"HTTP/1.1 200 OK\r\n\r\n\0\0\x04\x03\0\0\0\0\x01\0\0\0\x01";
    front.write_all(resp).await.expect("write");
    let mut got = vec![0u8; resp.len()];
    timed(client.read_exact(&mut got)).await.expect("read");
    assert_eq!(&got, resp);
    assert!(capture.lines().is_empty(), "{:#?}", capture.lines());
}

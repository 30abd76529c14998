//! The streaming server over WebSocket, with tokio-tungstenite as the client: v5's close
//! signal, v4 binary and base64, the unversioned protocol, port forward, and the limits.

use std::time::Duration;

use futures_util::{SinkExt as _, StreamExt as _};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::{WebSocketStream, client_async};

use crate::server_support::{WAIT, closed_port, config, echo_server, request, start};

type Ws = WebSocketStream<TcpStream>;

async fn connect(url: &str, protocol: Option<&str>) -> Ws {
    let ws_url = url.replacen("http://", "ws://", 1);
    let mut req = ws_url.into_client_request().unwrap();
    if let Some(protocol) = protocol {
        req.headers_mut().insert(
            "Sec-WebSocket-Protocol",
            HeaderValue::from_str(protocol).unwrap(),
        );
    }
    let (host, _) = crate::server_support::split_url(url);
    let tcp = TcpStream::connect(host).await.unwrap();
    let (ws, reply) = client_async(req, tcp).await.expect("websocket upgrade");
    if let Some(protocol) = protocol {
        let chosen = reply.headers().get("Sec-WebSocket-Protocol");
        assert_eq!(
            chosen.and_then(|v| v.to_str().ok()),
            protocol.split(',').next().map(str::trim)
        );
    }
    ws
}

/// Every message until the server closes, as (channel, bytes), base64 decoded where the
/// protocol is.
async fn drain(ws: &mut Ws, base64: bool) -> Vec<(u8, Vec<u8>)> {
    use base64::Engine as _;
    let mut got = Vec::new();
    loop {
        let msg = tokio::time::timeout(WAIT, ws.next())
            .await
            .expect("in time");
        let bytes = match msg {
            None | Some(Err(_) | Ok(Message::Close(_))) => return got,
            Some(Ok(Message::Binary(b))) => b.to_vec(),
            Some(Ok(Message::Text(t))) => t.as_bytes().to_vec(),
            Some(Ok(_)) => continue,
        };
        let (&first, rest) = bytes.split_first().expect("a channel");
        if base64 {
            let data = base64::engine::general_purpose::STANDARD
                .decode(rest)
                .unwrap();
            got.push((first - b'0', data));
        } else {
            got.push((first, rest.to_vec()));
        }
    }
}

fn channel(got: &[(u8, Vec<u8>)], ch: u8) -> Vec<u8> {
    got.iter()
        .filter(|(c, _)| *c == ch)
        .flat_map(|(_, d)| d.clone())
        .collect()
}

const V4_EXIT_7: &str = r#"{"metadata":{},"status":"Failure","message":"command terminated with non-zero exit code: command terminated with exit code 7","reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode","message":"7"}]}}"#;

#[tokio::test]
async fn v5_closes_stdin_with_the_close_signal() {
    let server = start(config()).await;
    let url = server.exec(&["cat", "7"], [true, true, true], false);
    let mut ws = connect(&url, Some("v5.channel.k8s.io")).await;
    ws.send(Message::binary(b"\x00hello ".to_vec()))
        .await
        .unwrap();
    ws.send(Message::binary(b"\x00world".to_vec()))
        .await
        .unwrap();
    ws.send(Message::binary(vec![255, 0])).await.unwrap();
    let got = drain(&mut ws, false).await;
    assert_eq!(
        got.first(),
        Some(&(1, Vec::new())),
        "kubelet's hello on stdout"
    );
    assert_eq!(channel(&got, 1), b"hello world");
    assert_eq!(channel(&got, 2), b"err");
    assert_eq!(String::from_utf8(channel(&got, 3)).unwrap(), V4_EXIT_7);
    server.counts.all_dropped(1).await;
    server.none_open().await;
}

#[tokio::test]
async fn v4_binary_and_base64_and_the_unversioned_protocol() {
    for (protocol, base64, status) in [
        (Some("v4.channel.k8s.io"), false, V4_EXIT_7),
        (Some("v4.base64.channel.k8s.io"), true, V4_EXIT_7),
        (
            Some("base64.channel.k8s.io"),
            true,
            "command terminated with non-zero exit code: command terminated with exit code 7",
        ),
        (
            None,
            false,
            "command terminated with non-zero exit code: command terminated with exit code 7",
        ),
    ] {
        let server = start(config()).await;
        // Without stdin, cat has nothing to copy: it writes stderr and exits.
        let url = server.exec(&["cat", "7"], [false, false, true], false);
        let mut ws = connect(&url, protocol).await;
        let got = drain(&mut ws, base64).await;
        assert_eq!(
            got.first(),
            Some(&(2, Vec::new())),
            "{protocol:?}: hello on stderr"
        );
        assert_eq!(channel(&got, 2), b"err", "{protocol:?}");
        assert_eq!(
            String::from_utf8(channel(&got, 3)).unwrap(),
            status,
            "{protocol:?}"
        );
        server.counts.all_dropped(1).await;
    }
}

#[tokio::test]
async fn base64_stdin_is_decoded() {
    let server = start(config()).await;
    let url = server.exec(&["sleep"], [true, true, false], false);
    let mut ws = connect(&url, Some("v4.base64.channel.k8s.io")).await;
    // A message that is not base64 is skipped, not fatal.
    ws.send(Message::text("0!!!")).await.unwrap();
    let got = tokio::time::timeout(WAIT, ws.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(
        got,
        Message::text("1"),
        "hello on stdout, base64 of nothing"
    );
    drop(ws);
    server.counts.all_dropped(1).await;
}

#[tokio::test]
async fn an_unknown_subprotocol_is_forbidden() {
    let server = start(config()).await;
    let url = server.exec(&["cat"], [false, true, false], false);
    let reply = request(
        "GET",
        &url,
        &[
            ("Connection", "Upgrade"),
            ("Upgrade", "websocket"),
            ("Sec-WebSocket-Version", "13"),
            ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
            ("Sec-WebSocket-Protocol", "v9.channel.k8s.io"),
        ],
    )
    .await;
    assert_eq!(reply.status, 403);
    assert!(
        reply
            .body
            .starts_with("requested protocol(s) are not supported: [v9.channel.k8s.io]"),
        "{}",
        reply.body
    );
    assert_eq!(server.counts.started(), 0);
}

#[tokio::test]
async fn port_forward_over_websocket_prefixes_ports_and_reports_refusals() {
    let server = start(config()).await;
    let open = echo_server().await;
    let refused = closed_port().await;
    let url = server.port_forward(&[]);
    let url = format!("{url}?port={open}&port={refused}");
    let mut ws = connect(&url, Some("v4.channel.k8s.io")).await;
    ws.send(Message::binary(b"\x00ping".to_vec()))
        .await
        .unwrap();
    let mut got: Vec<(u8, Vec<u8>)> = Vec::new();
    let done = |got: &[(u8, Vec<u8>)]| channel(got, 0).len() >= 2 + 4 && channel(got, 3).len() > 2;
    while !done(&got) {
        let msg = tokio::time::timeout(WAIT, ws.next())
            .await
            .expect("in time")
            .expect("open")
            .unwrap();
        if let Message::Binary(b) = msg {
            got.push((b[0], b[1..].to_vec()));
        }
    }
    let mut want = open.to_le_bytes().to_vec();
    want.extend_from_slice(b"ping");
    assert_eq!(channel(&got, 0), want);
    assert_eq!(channel(&got, 1), open.to_le_bytes());
    assert_eq!(channel(&got, 2), refused.to_le_bytes());
    let error = channel(&got, 3);
    let text = String::from_utf8_lossy(&error[2..]);
    assert!(
        text.starts_with(&format!(
            "error forwarding port {refused} to pod pod1, uid : dial tcp"
        )),
        "{text}"
    );
    drop(ws);
    server.counts.all_dropped(1).await;
    server.none_open().await;
}

#[tokio::test]
async fn port_forward_over_websocket_needs_ports() {
    let server = start(config()).await;
    let url = server.port_forward(&[]);
    let reply = request(
        "GET",
        &url,
        &[
            ("Connection", "Upgrade"),
            ("Upgrade", "websocket"),
            ("Sec-WebSocket-Version", "13"),
            ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
        ],
    )
    .await;
    assert_eq!(reply.status, 400);
    assert_eq!(reply.body, r#"query parameter "port" is required"#);
}

#[tokio::test]
async fn an_oversize_message_and_an_idle_client_end_the_stream() {
    let mut cfg = config();
    cfg.max_ws_message = 64 * 1024;
    cfg.stream_idle_timeout = Duration::from_millis(400);
    let server = start(cfg).await;

    let url = server.exec(&["sleep"], [true, true, false], false);
    let mut ws = connect(&url, Some("v4.channel.k8s.io")).await;
    let mut big = vec![0u8; 200 * 1024];
    big[0] = 0;
    let _ = ws.send(Message::binary(big)).await;
    server.counts.all_dropped(1).await;

    let url = server.exec(&["sleep"], [true, true, false], false);
    let mut idle = connect(&url, Some("v4.channel.k8s.io")).await;
    let got = drain(&mut idle, false).await;
    assert_eq!(got, vec![(1, Vec::new())], "only the hello, then the close");
    server.counts.all_dropped(2).await;
    server.none_open().await;
    drop(ws);
}

#[tokio::test]
async fn shutdown_ends_websocket_streams() {
    let server = start(config()).await;
    let url = server.exec(&["sleep"], [true, true, false], false);
    let mut ws = connect(&url, Some("v5.channel.k8s.io")).await;
    let _hello = ws.next().await;
    assert_eq!(server.handle.open_streams().exec, 1);
    server.handle.shutdown().await;
    assert_eq!(server.counts.dropped(), 1);
    let end = tokio::time::timeout(WAIT, async {
        loop {
            match ws.next().await {
                None | Some(Err(_) | Ok(Message::Close(_))) => break,
                Some(Ok(_)) => {}
            }
        }
    })
    .await;
    assert!(end.is_ok(), "the client sees the end");
}

#[tokio::test]
async fn a_websocket_client_that_never_reads_holds_the_runtime_back() {
    let server = start(config()).await;
    let url = server.exec(&["flood"], [false, true, false], false);
    let ws = connect(&url, Some("v4.channel.k8s.io")).await;
    // The client reads nothing from here on.
    let started = async {
        while server.counts.started() == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(WAIT, started).await.unwrap();
    let second = server.counts.flood_stalls().await;
    assert!(
        second < 32 * 1024 * 1024,
        "{second} bytes accepted from the runtime"
    );
    drop(ws);
    server.counts.all_dropped(1).await;
    server.none_open().await;
}

#[tokio::test]
async fn a_websocket_client_whose_stdin_nobody_reads_idles_out() {
    let mut cfg = config();
    cfg.stream_idle_timeout = Duration::from_millis(300);
    let server = start(cfg).await;
    let url = server.exec(&["sleep"], [true, true, false], false);
    let mut ws = connect(&url, Some("v4.channel.k8s.io")).await;
    for _ in 0..64 {
        let mut msg = vec![b'x'; 1024];
        msg[0] = 0;
        ws.send(Message::binary(msg)).await.unwrap();
    }
    let got = drain(&mut ws, false).await;
    assert_eq!(got, vec![(1, Vec::new())]);
    server.counts.all_dropped(1).await;
    server.none_open().await;
}

#[tokio::test]
async fn port_forward_over_base64_websocket_uses_the_cri_requests_ports() {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD;

    let server = start(config()).await;
    let open = echo_server().await;
    // No `port` query: the ports the CRI request named, as newer kubelets take them.
    let url = server.port_forward(&[open]);
    let mut ws = connect(&url, Some("v4.base64.channel.k8s.io")).await;
    ws.send(Message::text(format!("0{}", b64.encode(b"base64 ping"))))
        .await
        .unwrap();
    let mut got: Vec<(u8, Vec<u8>)> = Vec::new();
    while channel(&got, 0).len() < 2 + 11 {
        let msg = tokio::time::timeout(WAIT, ws.next())
            .await
            .expect("in time")
            .expect("open")
            .unwrap();
        let Message::Text(text) = msg else {
            panic!("base64 protocols send text: {msg:?}")
        };
        let (first, rest) = text.as_bytes().split_first().unwrap();
        got.push((first - b'0', b64.decode(rest).unwrap()));
    }
    let mut want = open.to_le_bytes().to_vec();
    want.extend_from_slice(b"base64 ping");
    assert_eq!(channel(&got, 0), want);
    assert_eq!(channel(&got, 1), open.to_le_bytes());
}

//! Exec, Attach and PortForward through crio-lite's streaming server, end to end: the URL the
//! CRI call hands out, a WebSocket client (kubectl 1.30+'s transport) on it from inside the
//! node's network namespace where the daemon serves, a real container behind it.

use std::time::Duration;

use cri_api::v1 as cri;
use futures_util::{SinkExt as _, StreamExt as _};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
use tokio_tungstenite::tungstenite::http::HeaderValue;

use crate::containers::{Setup, container_config, run, setup, wait_log};
use crate::e2e_support::Node;

type Ws = tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>;

/// Opens a WebSocket on `url` (a URL the daemon handed out) speaking `protocol`, from inside
/// the node's network namespace, where the daemon's streaming server listens on loopback.
async fn websocket(node: &Node, url: &str, protocol: &str) -> Ws {
    try_websocket(node, url, protocol)
        .await
        .unwrap_or_else(|e| panic!("WebSocket upgrade on {url}: {e}"))
}

/// [`websocket`], the upgrade's failure returned.
async fn try_websocket(
    node: &Node,
    url: &str,
    protocol: &str,
) -> Result<Ws, tokio_tungstenite::tungstenite::Error> {
    let port: u16 = url
        .split("://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .and_then(|host| host.rsplit(':').next())
        .and_then(|port| port.parse().ok())
        .unwrap_or_else(|| panic!("a port in {url}"));
    let netns = node.netns_path();
    let stream = tokio::task::spawn_blocking(move || {
        node_primitives::ns::connect_loopback(&netns, port, Duration::from_secs(10))
    })
    .await
    .expect("the connecting thread")
    .expect("connect to the streaming server in the node namespace");
    stream.set_nonblocking(true).expect("non-blocking");
    let stream = tokio::net::TcpStream::from_std(stream).expect("a tokio stream");
    let mut request = url
        .replace("http://", "ws://")
        .into_client_request()
        .expect("a WebSocket request");
    request.headers_mut().insert(
        "Sec-WebSocket-Protocol",
        HeaderValue::from_str(protocol).expect("a header value"),
    );
    let (ws, response) = tokio_tungstenite::client_async(request, stream).await?;
    assert_eq!(
        response
            .headers()
            .get("Sec-WebSocket-Protocol")
            .and_then(|v| v.to_str().ok()),
        Some(protocol)
    );
    Ok(ws)
}

/// An Exec of `sh -c script` in `container` with stdin, stdout and stderr apart, no terminal.
fn shell(container: &str, script: &str) -> cri::ExecRequest {
    cri::ExecRequest {
        container_id: container.to_owned(),
        cmd: vec!["sh".into(), "-c".into(), script.into()],
        tty: false,
        stdin: true,
        stdout: true,
        stderr: true,
    }
}

/// The URL the daemon hands out for `request`.
async fn exec_url(setup: &mut Setup, request: cri::ExecRequest) -> String {
    setup
        .client
        .exec(request)
        .await
        .expect("Exec")
        .into_inner()
        .url
}

/// Every binary message's payload by channel until the server closes.
async fn read_channels(ws: &mut Ws) -> Vec<Vec<u8>> {
    let mut channels = vec![Vec::new(); 5];
    let read = async {
        while let Some(message) = ws.next().await {
            match message {
                Ok(Message::Binary(data)) if !data.is_empty() => {
                    if let Some(slot) = channels.get_mut(usize::from(data[0])) {
                        slot.extend_from_slice(&data[1..]);
                    }
                }
                Ok(Message::Close(_)) | Err(_) => break,
                Ok(_) => {}
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(60), read)
        .await
        .expect("the stream ends within a minute");
    channels
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root + netns + runc: cargo xtask test"]
async fn exec_and_port_forward_over_websocket_reach_the_container() {
    let mut setup = setup("strm", "streams").await;
    let (image, sandbox) = (setup.image.clone(), setup.sandbox.clone());
    let server = run(
        &mut setup.client,
        &sandbox,
        container_config(
            &image,
            "server",
            "mkdir -p /tmp/www && echo hello through the tunnel > /tmp/www/index.html && \
             exec httpd -f -p 8080 -h /tmp/www",
        ),
    )
    .await;

    check_exec(&mut setup, &server).await;
    check_port_forward(&mut setup, &sandbox).await;
    setup.finish().await;
}

/// Exec: stdin in, stdout and stderr apart, the exit code; a used URL and a missing container
/// refused.
async fn check_exec(setup: &mut Setup, server: &str) {
    // Exec: stdin in, stdout and stderr apart, the exit code in v5's status on channel 3.
    let url = exec_url(
        setup,
        shell(
            server,
            "read line; echo \"got $line\"; echo oops >&2; exit 3",
        ),
    )
    .await;
    let mut ws = websocket(&setup.node, &url, "v5.channel.k8s.io").await;
    ws.send(Message::Binary(b"\x00hello\n".to_vec().into()))
        .await
        .expect("send stdin");
    // v5: close stdin (channel 0) with the close signal.
    ws.send(Message::Binary(vec![255, 0].into()))
        .await
        .expect("close stdin");
    let channels = read_channels(&mut ws).await;
    assert_eq!(String::from_utf8_lossy(&channels[1]), "got hello\n");
    assert_eq!(String::from_utf8_lossy(&channels[2]), "oops\n");
    let status = String::from_utf8_lossy(&channels[3]);
    assert!(
        status.contains("NonZeroExitCode") && status.contains("\"message\":\"3\""),
        "{status}"
    );

    // A used URL is refused: its token was single-use.
    let reused = try_websocket(&setup.node, &url, "v5.channel.k8s.io").await;
    assert!(
        matches!(
            &reused,
            Err(tokio_tungstenite::tungstenite::Error::Http(response))
                if response.status() == 404
        ),
        "{:?}",
        reused.err()
    );

    // Exec of a container that does not exist is refused at the CRI call.
    let err = setup
        .client
        .exec(cri::ExecRequest {
            container_id: "0".repeat(64),
            cmd: vec!["true".into()],
            tty: false,
            stdin: false,
            stdout: true,
            stderr: false,
        })
        .await
        .expect_err("no such container");
    assert_eq!(err.code(), tonic::Code::NotFound, "{err}");
}

/// PortForward to the container's web server.
async fn check_port_forward(setup: &mut Setup, sandbox: &str) {
    // PortForward: bytes to localhost:8080 in the pod, made by the daemon itself.
    let url = setup
        .client
        .port_forward(cri::PortForwardRequest {
            pod_sandbox_id: sandbox.to_owned(),
            port: vec![8080],
        })
        .await
        .expect("PortForward")
        .into_inner()
        .url;
    let mut ws = websocket(
        &setup.node,
        &format!("{url}?port=8080"),
        "v4.channel.k8s.io",
    )
    .await;
    ws.send(Message::Binary(
        b"\x00GET /index.html HTTP/1.0\r\nHost: pod\r\n\r\n"
            .to_vec()
            .into(),
    ))
    .await
    .expect("send the request");
    let mut data = Vec::new();
    let read = async {
        while let Some(Ok(message)) = ws.next().await {
            if let Message::Binary(bytes) = message
                && bytes.first() == Some(&0)
            {
                data.extend_from_slice(&bytes[1..]);
                if String::from_utf8_lossy(&data).contains("hello through the tunnel") {
                    break;
                }
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(60), read)
        .await
        .expect("the page within a minute");
    // The first two bytes on the data channel are the port, little-endian.
    assert_eq!(&data[..2], &8080u16.to_le_bytes());
    assert!(
        String::from_utf8_lossy(&data).contains("hello through the tunnel"),
        "{}",
        String::from_utf8_lossy(&data)
    );
}

/// Reads binary messages until channel `channel` has received text containing `want`; what it
/// received on that channel.
async fn read_until(ws: &mut Ws, channel: u8, want: &str) -> String {
    let got = try_read_until(ws, channel, want, Duration::from_secs(60)).await;
    assert!(got.1, "{want:?} on channel {channel}, got {:?}", got.0);
    got.0
}

/// [`read_until`] for at most `wait`: what came on the channel, and whether `want` was in it.
async fn try_read_until(ws: &mut Ws, channel: u8, want: &str, wait: Duration) -> (String, bool) {
    let mut got = Vec::new();
    let read = async {
        while let Some(message) = ws.next().await {
            match message {
                Ok(Message::Binary(data)) if data.first() == Some(&channel) => {
                    got.extend_from_slice(&data[1..]);
                    if String::from_utf8_lossy(&got).contains(want) {
                        return true;
                    }
                }
                Ok(Message::Close(_)) | Err(_) => return false,
                Ok(_) => {}
            }
        }
        false
    };
    let found = tokio::time::timeout(wait, read).await;
    (
        String::from_utf8_lossy(&got).into_owned(),
        found == Ok(true),
    )
}

/// A message on `channel` with `bytes`.
fn on(channel: u8, bytes: &[u8]) -> Message {
    let mut data = vec![channel];
    data.extend_from_slice(bytes);
    Message::Binary(data.into())
}

/// A terminal size on the resize channel, as kubectl sends it.
fn resize(width: u16, height: u16) -> Message {
    on(
        4,
        format!("{{\"Width\":{width},\"Height\":{height}}}").as_bytes(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root + netns + runc: cargo xtask test"]
async fn attach_and_a_terminal_exec_reach_the_container_and_its_log() {
    let mut setup = setup("strmtty", "tty").await;
    let (image, sandbox) = (setup.image.clone(), setup.sandbox.clone());
    // A shell on a terminal, as `kubectl run -it` makes it.
    let mut shell = container_config(&image, "shell", "exec sh");
    shell.tty = true;
    shell.stdin = true;
    let shell = run(&mut setup.client, &sandbox, shell).await;
    // A process reading stdin, without a terminal, that two clients attach to.
    let mut cat = container_config(&image, "cat", "exec cat");
    cat.stdin = true;
    let cat = run(&mut setup.client, &sandbox, cat).await;

    check_terminal_attach(&mut setup, &shell).await;
    check_two_attachers(&mut setup, &cat).await;
    check_terminal_exec(&mut setup, &shell).await;
    setup.finish().await;
}

/// The Attach URL of `container`.
async fn attach_url(setup: &mut Setup, container: &str, tty: bool) -> String {
    setup
        .client
        .attach(cri::AttachRequest {
            container_id: container.to_owned(),
            stdin: true,
            tty,
            stdout: true,
            stderr: !tty,
        })
        .await
        .expect("Attach")
        .into_inner()
        .url
}

/// Attach to the shell on its terminal: typed input runs, a resize reaches the terminal, and
/// what the shell writes also goes to the container's CRI log.
async fn check_terminal_attach(setup: &mut Setup, shell: &str) {
    let url = attach_url(setup, shell, true).await;
    let mut ws = websocket(&setup.node, &url, "v5.channel.k8s.io").await;
    ws.send(resize(101, 31)).await.expect("resize");
    // The typed line is echoed as typed; only the shell's own output has the sum.
    ws.send(on(0, b"echo attached-$((40+2))\n"))
        .await
        .expect("type");
    read_until(&mut ws, 1, "attached-42").await;
    ws.send(on(0, b"stty size\n")).await.expect("type");
    read_until(&mut ws, 1, "31 101").await;
    wait_log(&setup.node.path("logs/tty/shell/0.log"), "attached-42").await;
    // Detaching leaves the shell running: a second attach still reaches it.
    ws.close(None).await.expect("detach");
    let url = attach_url(setup, shell, true).await;
    let mut again = websocket(&setup.node, &url, "v5.channel.k8s.io").await;
    again
        .send(on(0, b"echo again-$((1+1))\n"))
        .await
        .expect("type");
    read_until(&mut again, 1, "again-2").await;
    again.close(None).await.expect("detach");
}

/// Two clients attached at once to a process without a terminal: what one writes to its
/// stdin, both read from its stdout.
async fn check_two_attachers(setup: &mut Setup, cat: &str) {
    let first_url = attach_url(setup, cat, false).await;
    let second_url = attach_url(setup, cat, false).await;
    let mut first = websocket(&setup.node, &first_url, "v4.channel.k8s.io").await;
    let mut second = websocket(&setup.node, &second_url, "v4.channel.k8s.io").await;
    // The second is attached once a line the first writes comes to it too: until then, the
    // first keeps writing.
    let mut reached = false;
    for _ in 0..120 {
        first.send(on(0, b"to-both\n")).await.expect("stdin");
        read_until(&mut first, 1, "to-both").await;
        if try_read_until(&mut second, 1, "to-both", Duration::from_millis(500))
            .await
            .1
        {
            reached = true;
            break;
        }
    }
    assert!(
        reached,
        "a line written by one attached client reaches the other"
    );
    wait_log(&setup.node.path("logs/tty/cat/0.log"), "to-both").await;
}

/// Exec with a terminal: the size sent before the command reads it, the exit code comes back.
async fn check_terminal_exec(setup: &mut Setup, container: &str) {
    let url = exec_url(
        setup,
        cri::ExecRequest {
            tty: true,
            stderr: false,
            ..shell(container, "read go; stty size; tty; exit 4")
        },
    )
    .await;
    let mut ws = websocket(&setup.node, &url, "v5.channel.k8s.io").await;
    ws.send(resize(91, 17)).await.expect("resize");
    ws.send(on(0, b"go\n")).await.expect("type");
    let channels = read_channels(&mut ws).await;
    let out = String::from_utf8_lossy(&channels[1]);
    assert!(out.contains("17 91"), "{out:?}");
    assert!(out.contains("/dev/pts/"), "a terminal: {out:?}");
    let status = String::from_utf8_lossy(&channels[3]);
    assert!(
        status.contains("NonZeroExitCode") && status.contains("\"message\":\"4\""),
        "{status}"
    );
}

/// Exec over SPDY/3.1 through the daemon, with moby/spdystream's client as client-go's SPDY
/// executor drives it (what kubelet's proxy and crictl 1.26 speak): the HTTP upgrade offering
/// v4 then v3, 300 KB through `cat` in the container and back, the exit code in v4's status.
/// The client is cri-streaming's Go peer, built offline from Debian's packages (no Go in the
/// VM: the host runs this one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root + netns + runc + Go: cargo xtask test"]
async fn exec_over_spdy_with_spdystreams_client() {
    const BYTES: usize = 300_000;
    let mut setup = setup("strmspdy", "spdy").await;
    let idle = idle_container(&mut setup).await;
    let url = exec_url(
        &mut setup,
        cri::ExecRequest {
            stderr: false,
            ..shell(&idle, "cat; exit 5")
        },
    )
    .await;
    let got = spdy_peer(&setup, ["upgrade", &url, &BYTES.to_string()]).await;
    let sum: usize = (0..BYTES).map(|i| i % 251).sum();
    assert_eq!(got["stdout_len"], BYTES, "{got}");
    assert_eq!(got["stdout_sum"], sum, "{got}");
    let status = got["error"].as_str().unwrap_or_default();
    assert!(
        status.contains("NonZeroExitCode") && status.contains("\"message\":\"5\""),
        "{status}"
    );
    setup.finish().await;
}

/// Exec with a terminal over SPDY/3.1 as `kubectl exec -it` (client-go's v4 executor) runs it:
/// no stderr stream, a resize stream, stdin never closed. The command's exit ends the session:
/// stdout and the error stream end (crictl 1.26 hung here in `cargo xtask crictl`), the size
/// sent with the first keystrokes is the terminal's, the exit code is in the status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root + netns + runc + Go: cargo xtask test"]
async fn exec_with_a_terminal_over_spdy_ends_with_the_command() {
    let mut setup = setup("strmspdyt", "spdyt").await;
    let idle = idle_container(&mut setup).await;
    let (image, sandbox) = (setup.image.clone(), setup.sandbox.clone());
    let url = exec_url(
        &mut setup,
        cri::ExecRequest {
            tty: true,
            stderr: false,
            cmd: vec!["sh".into()],
            ..shell(&idle, "")
        },
    )
    .await;
    let typed = "stty size; exit 3\n".to_owned();
    let got = spdy_peer(&setup, ["upgrade-tty", &url, &typed]).await;
    let stdout = got["stdout"].as_str().unwrap_or_default();
    assert!(stdout.contains("17 91"), "{got}");
    let status = got["error"].as_str().unwrap_or_default();
    assert!(
        status.contains("NonZeroExitCode") && status.contains("\"message\":\"3\""),
        "{status}"
    );

    // crictl attach -it, then ctrl-p ctrl-q: the client closes its stdin. That detaches it:
    // the session ends with success and the shell runs on.
    let mut shell = container_config(&image, "shell", "exec sh");
    shell.tty = true;
    shell.stdin = true;
    let shell = run(&mut setup.client, &sandbox, shell).await;
    let url = attach_url(&mut setup, &shell, true).await;
    let typed = "echo attached-$((40+2))\n";
    let got = spdy_peer(&setup, ["upgrade-tty", &url, typed, "detach"]).await;
    assert!(
        got["stdout"]
            .as_str()
            .unwrap_or_default()
            .contains("attached-42"),
        "{got}"
    );
    let status = got["error"].as_str().unwrap_or_default();
    assert!(status.is_empty() || status.contains("Success"), "{status}");
    let state = setup
        .client
        .container_status(cri::ContainerStatusRequest {
            container_id: shell.clone(),
            verbose: false,
        })
        .await
        .expect("ContainerStatus")
        .into_inner()
        .status
        .expect("a status")
        .state;
    assert_eq!(state, cri::ContainerState::ContainerRunning as i32);
    setup.finish().await;
}

/// A container that sleeps, to exec in.
async fn idle_container(setup: &mut Setup) -> String {
    let (image, sandbox) = (setup.image.clone(), setup.sandbox.clone());
    run(
        &mut setup.client,
        &sandbox,
        container_config(&image, "idle", "exec sleep 3600"),
    )
    .await
}

/// Runs cri-streaming's Go peer (moby/spdystream's client, built offline from Debian's
/// packages) with `args` in the node namespace, where the streaming server listens; its JSON,
/// once it succeeded having negotiated v4.
async fn spdy_peer(setup: &Setup, args: impl IntoIterator<Item = &str>) -> serde_json::Value {
    let args: Vec<String> = args.into_iter().map(str::to_owned).collect();
    let peer = test_support::go::build(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../cri-streaming/tests/spdystream-peer"),
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")),
        "needs Debian's golang-go and golang-github-docker-spdystream-dev",
    );
    let netns = format!("--net={}", setup.node.netns_path().display());
    let client = tokio::task::spawn_blocking(move || {
        std::process::Command::new("nsenter")
            .arg(netns)
            .arg("--")
            .arg(peer)
            .args(args)
            .output()
            .expect("run spdystream-peer")
    });
    let out = tokio::time::timeout(Duration::from_secs(120), client)
        .await
        .expect("the client ends in time")
        .expect("the client's thread");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("protocol v4.channel.k8s.io"), "{stderr}");
    serde_json::from_slice(&out.stdout).expect("the client's JSON")
}

//! The streaming server over SPDY/3.1, driven by a client made of the crate's codec: the
//! HTTP answers (tokens, methods, negotiation), exec and attach with each protocol version's
//! exit status, resizes, port forward.

use std::fmt::Write as _;
use std::time::Duration;

use cri_streaming::spdy::{Headers, goaway};

use crate::server_support::{
    closed_port, config, echo_server, request, spdy_headers, spdy_upgrade, start,
};

const V4_EXIT_3: &str = r#"{"metadata":{},"status":"Failure","message":"command terminated with non-zero exit code: command terminated with exit code 3","reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode","message":"3"}]}}"#;
const V4_SUCCESS: &str = r#"{"metadata":{},"status":"Success"}"#;

#[tokio::test]
async fn exec_v4_echoes_stdin_and_reports_the_exit_code() {
    for (code, status) in [("3", V4_EXIT_3), ("0", V4_SUCCESS)] {
        let server = start(config()).await;
        let url = server.exec(&["cat", code], [true, true, true], false);
        let mut client = spdy_upgrade(&url, "v4.channel.k8s.io").await;
        client.open_typed(1, "error").await;
        client.open_typed(3, "stdin").await;
        client.open_typed(5, "stdout").await;
        client.open_typed(7, "stderr").await;
        let payload: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        client.data(3, false, &payload[..100_000]).await;
        client.data(3, true, &payload[100_000..]).await;
        let got = client.collect().await;
        assert_eq!(got.data.get(&5), Some(&payload), "stdout echoes stdin");
        assert_eq!(got.text(7), "err");
        assert_eq!(got.text(1), status);
        assert!(
            got.fin.contains(&5) && got.fin.contains(&1),
            "{:?}",
            got.fin
        );
        assert_eq!(got.goaway, Some(goaway::OK));
        server.counts.all_dropped(1).await;
        server.none_open().await;
    }
}

#[tokio::test]
async fn older_protocols_write_text_and_nothing_on_success() {
    for (protocol, code, want) in [
        (
            "v3.channel.k8s.io",
            "3",
            "command terminated with non-zero exit code: command terminated with exit code 3",
        ),
        ("v2.channel.k8s.io", "0", ""),
        ("channel.k8s.io", "0", ""),
    ] {
        let server = start(config()).await;
        let url = server.exec(&["cat", code], [true, true, false], false);
        let mut client = spdy_upgrade(&url, protocol).await;
        client.open_typed(1, "error").await;
        client.open_typed(3, "stdin").await;
        client.open_typed(5, "stdout").await;
        client.data(3, true, b"hi").await;
        let got = client.collect().await;
        assert_eq!(got.text(5), "hi", "{protocol}");
        assert_eq!(got.text(1), want, "{protocol}");
    }
}

#[tokio::test]
async fn a_failing_exec_is_an_internal_error_and_attach_echoes() {
    let server = start(config()).await;
    let url = server.exec(&["fail"], [false, true, false], false);
    let mut client = spdy_upgrade(&url, "v4.channel.k8s.io").await;
    client.open_typed(1, "error").await;
    client.open_typed(3, "stdout").await;
    let got = client.collect().await;
    let status = got.text(1);
    assert!(
        status.contains(r#""reason":"InternalError""#)
            && status.contains("error executing command in container: no such command"),
        "{status}"
    );

    let url = server.attach();
    let mut client = spdy_upgrade(&url, "v4.channel.k8s.io").await;
    client.open_typed(1, "error").await;
    client.open_typed(3, "stdin").await;
    client.open_typed(5, "stdout").await;
    client.data(3, true, b"attached").await;
    let got = client.collect().await;
    assert_eq!(got.text(5), "attached");
    assert_eq!(got.text(1), V4_SUCCESS);
    server.counts.all_dropped(2).await;
}

#[tokio::test]
async fn the_protocol_is_the_clients_first_the_server_speaks() {
    let server = start(config()).await;
    let url = server.exec(&["cat"], [false, true, false], false);
    let headers = spdy_headers("v5.channel.k8s.io, v3.channel.k8s.io,v4.channel.k8s.io");
    let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
    let reply = request("POST", &url, &headers).await;
    assert_eq!(reply.status, 101);
    assert_eq!(
        reply.header("X-Stream-Protocol-Version"),
        ["v3.channel.k8s.io"]
    );
}

#[tokio::test]
async fn tokens_are_single_use_and_bound_to_their_kind() {
    let server = start(config()).await;
    let url = server.exec(&["cat"], [false, true, false], false);
    let first = spdy_upgrade(&url, "v4.channel.k8s.io").await;
    drop(first);
    let again = request("GET", &url, &[]).await;
    assert_eq!(again.status, 404, "a used token");

    let (base, token) = url.rsplit_once('/').unwrap();
    let base = base.trim_end_matches("/exec");
    for wrong in [
        format!("{base}/attach/{token}"),
        format!("{base}/exec/AAAAAAAAAAAAAAAAAAAAAA"),
        format!("{base}/exec/short"),
        format!("{base}/logs/{token}"),
        format!("{base}/"),
    ] {
        assert_eq!(request("GET", &wrong, &[]).await.status, 404, "{wrong}");
    }

    // A token for exec used at /attach is gone too, as kubelet consumes before it checks.
    let url = server.exec(&["cat"], [false, true, false], false);
    let token = url.rsplit('/').next().unwrap();
    assert_eq!(
        request("GET", &format!("{base}/attach/{token}"), &[])
            .await
            .status,
        404
    );
    assert_eq!(request("GET", &url, &[]).await.status, 404);
}

#[tokio::test]
async fn an_expired_token_is_not_found() {
    let mut cfg = config();
    cfg.token_ttl = Duration::from_millis(50);
    let server = start(cfg).await;
    let url = server.exec(&["cat"], [false, true, false], false);
    tokio::time::sleep(Duration::from_millis(120)).await;
    assert_eq!(request("GET", &url, &[]).await.status, 404);
}

#[tokio::test]
async fn other_methods_are_not_allowed() {
    let server = start(config()).await;
    let url = server.exec(&["cat"], [false, true, false], false);
    let reply = request("PUT", &url, &[]).await;
    assert_eq!(reply.status, 405);
    assert_eq!(reply.header("Allow"), ["GET, POST"]);
    // The token survives a wrong method.
    spdy_upgrade(&url, "v4.channel.k8s.io").await;
}

#[tokio::test]
async fn upgrades_that_cannot_be_negotiated_are_refused_as_kubelet_refuses_them() {
    let server = start(config()).await;

    let url = server.exec(&["cat"], [false, true, false], false);
    let reply = request(
        "GET",
        &url,
        &[("Connection", "Upgrade"), ("Upgrade", "SPDY/3.1")],
    )
    .await;
    assert_eq!(reply.status, 400);
    assert_eq!(
        reply.body,
        "unable to upgrade: X-Stream-Protocol-Version is required"
    );

    let url = server.exec(&["cat"], [false, true, false], false);
    let headers = spdy_headers("v9.channel.k8s.io");
    let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
    let reply = request("GET", &url, &headers).await;
    assert_eq!(reply.status, 403);
    assert_eq!(
        reply.header("X-Accepted-Stream-Protocol-Versions"),
        [
            "v4.channel.k8s.io",
            "v3.channel.k8s.io",
            "v2.channel.k8s.io",
            "channel.k8s.io"
        ]
    );
    assert!(
        reply.body.starts_with(
            "unable to upgrade: unable to negotiate protocol: client supports [v9.channel.k8s.io]"
        ),
        "{}",
        reply.body
    );

    let url = server.port_forward(&[]);
    let headers = spdy_headers("v4.channel.k8s.io");
    let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
    let reply = request("GET", &url, &headers).await;
    assert_eq!(reply.status, 403);
    assert_eq!(
        reply.header("X-Accepted-Stream-Protocol-Versions"),
        ["portforward.k8s.io"]
    );

    let url = server.exec(&["cat"], [false, true, false], false);
    let reply = request(
        "GET",
        &url,
        &[("X-Stream-Protocol-Version", "v4.channel.k8s.io")],
    )
    .await;
    assert_eq!(reply.status, 400);
    assert!(
        reply.body.contains("missing upgrade headers"),
        "{}",
        reply.body
    );
    assert_eq!(server.counts.started(), 0);
}

#[tokio::test]
async fn terminal_sizes_reach_the_runtime_and_a_storm_is_coalesced() {
    let server = start(config()).await;
    let url = server.exec(&["resize"], [true, true, false], true);
    let mut client = spdy_upgrade(&url, "v4.channel.k8s.io").await;
    client.open_typed(1, "error").await;
    client.open_typed(3, "stdin").await;
    client.open_typed(5, "stdout").await;
    client.open_typed(7, "resize").await;
    // 20000 sizes, in frames of 100, while the runtime takes none (it waits for stdin's end).
    for batch in 0..200u32 {
        let mut frame = String::new();
        for i in 0..100u32 {
            let n = batch * 100 + i;
            write!(frame, r#"{{"Width":{},"Height":{}}}"#, n % 60000, 24).unwrap();
        }
        client.data(7, false, frame.as_bytes()).await;
    }
    client.data(7, true, br#"{"width":132,"HEIGHT":43}"#).await;
    client.data(3, true, b"").await;
    let got = client.collect().await;
    assert_eq!(got.text(1), V4_SUCCESS);
    let sizes = server.counts.resizes.lock().unwrap().clone();
    let last = sizes.last().copied().expect("sizes");
    assert_eq!((last.width, last.height), (132, 43), "the latest size wins");
    let first: Vec<u16> = sizes.iter().take(4).map(|s| s.width).collect();
    assert_eq!(
        first,
        [0, 1, 2, 3],
        "sizes go in order while the queue has room"
    );
    assert!(
        sizes.len() < 100,
        "{} of 20001 sizes queued: they must be coalesced",
        sizes.len()
    );
}

#[tokio::test]
async fn port_forward_carries_several_connections_and_reports_refusals() {
    let server = start(config()).await;
    let open = echo_server().await;
    let refused = closed_port().await;
    let url = server.port_forward(&[]);
    let mut client = spdy_upgrade(&url, "portforward.k8s.io").await;
    let pair = |kind: &str, port: u16, id: &str| {
        Headers::new()
            .with("streamtype", kind)
            .with("port", &port.to_string())
            .with("requestid", id)
    };
    client.open(1, pair("error", open, "0")).await;
    client.open(3, pair("data", open, "0")).await;
    client.open(5, pair("error", open, "1")).await;
    client.open(7, pair("data", open, "1")).await;
    client.open(9, pair("error", refused, "2")).await;
    client.open(11, pair("data", refused, "2")).await;
    // No port: refused as kubelet's stream handler refuses it.
    client
        .open(13, Headers::new().with("streamtype", "data"))
        .await;
    client.data(3, true, b"first").await;
    client.data(7, true, b"second").await;

    let mut received = crate::server_support::Received::default();
    let deadline = tokio::time::Instant::now() + crate::server_support::WAIT;
    while !(received.fin.contains(&3)
        && received.fin.contains(&7)
        && received.fin.contains(&9)
        && received.resets.contains(&13))
    {
        assert!(tokio::time::Instant::now() < deadline, "{received:?}");
        match client.recv().await.expect("the connection stays") {
            cri_streaming::spdy::Frame::Data {
                stream_id,
                fin,
                data,
            } => {
                received.data.entry(stream_id).or_default().extend(data);
                if fin {
                    received.fin.push(stream_id);
                }
            }
            cri_streaming::spdy::Frame::RstStream { stream_id, .. } => {
                received.resets.push(stream_id);
            }
            _ => {}
        }
    }
    assert_eq!(received.text(3), "first");
    assert_eq!(received.text(7), "second");
    assert_eq!(received.text(1), "");
    let refusal = received.text(9);
    assert!(
        refusal.starts_with(&format!(
            "error forwarding port {refused} to pod pod1, uid : dial tcp"
        )),
        "{refusal}"
    );
    drop(client);
    server.counts.all_dropped(2).await;
    server.none_open().await;
}

#[tokio::test]
async fn port_forward_refuses_ports_the_request_did_not_name() {
    let server = start(config()).await;
    let open = echo_server().await;
    let url = server.port_forward(&[1]);
    let mut client = spdy_upgrade(&url, "portforward.k8s.io").await;
    let headers = |kind: &str| {
        Headers::new()
            .with("streamtype", kind)
            .with("port", &open.to_string())
            .with("requestid", "0")
    };
    client.open(1, headers("error")).await;
    client.open(3, headers("data")).await;
    loop {
        if let cri_streaming::spdy::Frame::Data {
            stream_id: 1, data, ..
        } = client.recv().await.expect("an answer")
        {
            let text = String::from_utf8_lossy(&data);
            assert!(
                text.contains("is not among the ports the request named"),
                "{text}"
            );
            break;
        }
    }
    assert_eq!(server.counts.started(), 0);
}

#[tokio::test]
async fn port_forward_pairs_old_clients_streams_by_id_and_times_out_lone_ones() {
    let mut cfg = config();
    cfg.stream_creation_timeout = Duration::from_millis(200);
    let server = start(cfg).await;
    let open = echo_server().await;
    let url = server.port_forward(&[open]);
    let mut client = spdy_upgrade(&url, "portforward.k8s.io").await;
    let headers = |kind: &str| {
        Headers::new()
            .with("streamtype", kind)
            .with("port", &open.to_string())
    };
    // No requestid: kubelet pairs error stream n with data stream n + 2.
    client.open(1, headers("error")).await;
    client.open(3, headers("data")).await;
    client.data(3, true, b"old client").await;
    // A lone error stream of another request: told it timed out.
    client
        .open(5, headers("error").with("requestid", "lonely"))
        .await;
    let mut echoed = Vec::new();
    let mut timed_out = String::new();
    while echoed != b"old client" || timed_out.is_empty() {
        match client.recv().await.expect("the connection stays") {
            cri_streaming::spdy::Frame::Data {
                stream_id: 3, data, ..
            } => echoed.extend(data),
            cri_streaming::spdy::Frame::Data {
                stream_id: 5, data, ..
            } => timed_out.push_str(&String::from_utf8_lossy(&data)),
            _ => {}
        }
    }
    assert_eq!(timed_out, "request lonely: timed out waiting for streams");
}

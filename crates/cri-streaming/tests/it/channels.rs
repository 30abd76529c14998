//! The channel protocols: negotiation, WebSocket framing, stream types, port forward.

use std::borrow::Cow;

use cri_streaming::channel::{
    Inbound, SPDY_REMOTE_COMMAND, StatusFormat, StreamType, WS_PORT_FORWARD, WS_REMOTE_COMMAND,
    WsProtocol, channels, negotiate, port_channels, port_prefix,
};

fn ws(name: &str) -> &'static WsProtocol {
    WS_REMOTE_COMMAND.iter().find(|p| p.name == name).unwrap()
}

#[test]
fn negotiation_takes_the_clients_first_supported_protocol() {
    let spdy = |client: &[&str]| negotiate(client, SPDY_REMOTE_COMMAND, |p| p.name).map(|p| p.name);
    // client-go's SPDY executor offers v4 to v1 in one header each.
    assert_eq!(
        spdy(&[
            "v4.channel.k8s.io",
            "v3.channel.k8s.io",
            "v2.channel.k8s.io",
            "channel.k8s.io"
        ]),
        Some("v4.channel.k8s.io")
    );
    assert_eq!(
        spdy(&["v9.channel.k8s.io, v2.channel.k8s.io"]),
        Some("v2.channel.k8s.io")
    );
    assert_eq!(spdy(&["v5.channel.k8s.io"]), None, "v5 is WebSocket only");
    assert_eq!(spdy(&[]), None, "SPDY needs a protocol");

    let wsn = |client: &[&str]| negotiate(client, WS_REMOTE_COMMAND, |p| p.name).map(|p| p.name);
    assert_eq!(
        wsn(&["v5.channel.k8s.io", "v4.channel.k8s.io"]),
        Some("v5.channel.k8s.io")
    );
    assert_eq!(
        wsn(&[]),
        Some(""),
        "no protocol: the binary channel protocol"
    );
    assert_eq!(
        negotiate(&["v4.base64.channel.k8s.io"], WS_PORT_FORWARD, |p| p.name).map(|p| p.base64),
        Some(true)
    );
}

#[test]
fn protocols_know_their_status_format_and_resize() {
    let v3 = SPDY_REMOTE_COMMAND
        .iter()
        .find(|p| p.name == "v3.channel.k8s.io")
        .unwrap();
    assert!(v3.resize);
    assert_eq!(v3.status, StatusFormat::Text);
    assert_eq!(SPDY_REMOTE_COMMAND[0].status, StatusFormat::Json);
    assert_eq!(ws("v4.base64.channel.k8s.io").status, StatusFormat::Json);
    assert_eq!(ws("channel.k8s.io").status, StatusFormat::Text);
}

#[test]
fn binary_messages_lead_with_the_channel_byte() {
    // wsstream's example: "foo\n" on stdin, "\n" on stdout.
    let p = ws("channel.k8s.io");
    assert_eq!(
        p.decode(&[0, 102, 111, 111, 10]).unwrap(),
        Inbound::Data {
            channel: channels::STDIN,
            data: Cow::Borrowed(b"foo\n".as_slice())
        }
    );
    assert_eq!(p.encode(channels::STDOUT, b"\n"), [1, 10]);
    assert_eq!(p.decode(&[]).unwrap(), Inbound::Empty);
    assert_eq!(p.close(0), None, "no close signal before v5");
    assert!(matches!(
        p.decode(&[255, 0]).unwrap(),
        Inbound::Data { channel: 255, .. }
    ));
}

#[test]
fn base64_messages_lead_with_an_ascii_digit() {
    // wsstream's example: WRITE "0Zm9vCg==" (its comment's "Zm9vCgo=" is "foo\n\n"), READ "1Cg==".
    let p = ws("base64.channel.k8s.io");
    assert_eq!(
        p.decode(b"0Zm9vCg==").unwrap(),
        Inbound::Data {
            channel: 0,
            data: Cow::Owned(b"foo\n".to_vec())
        }
    );
    assert_eq!(p.encode(1, b"\n"), b"1Cg==");
    assert_eq!(
        p.decode(b"4eyJ3\r\naWR0aCI6MX0=").unwrap(),
        Inbound::Data {
            channel: 4,
            data: Cow::Owned(br#"{"width":1}"#.to_vec())
        },
        "line breaks inside base64 are skipped, as Go's decoder skips them"
    );
    for bad in [&b"xZm9v"[..], b"0Zm9v!", b"0Zm9vCg"] {
        let err = p.decode(bad).unwrap_err().to_string();
        assert!(
            err.starts_with("websocket message of \"base64.channel.k8s.io\": "),
            "{err}"
        );
    }
}

#[test]
fn v5_closes_a_channel_with_255() {
    let p = ws("v5.channel.k8s.io");
    assert_eq!(p.decode(&[255, 0]).unwrap(), Inbound::Close { channel: 0 });
    assert_eq!(p.close(channels::STDOUT), Some([255, 1]));
    assert!(p.decode(&[255]).is_err());
    assert!(p.decode(&[255, 0, 0]).is_err());
}

#[test]
fn stream_types_and_channels_agree() {
    for (name, channel) in [
        ("stdin", 0),
        ("stdout", 1),
        ("stderr", 2),
        ("error", 3),
        ("resize", 4),
    ] {
        let t = StreamType::parse(name).unwrap();
        assert_eq!((t.as_str(), t.channel()), (name, Some(channel)));
    }
    assert_eq!(StreamType::parse("data").unwrap().channel(), None);
    assert_eq!(StreamType::parse("STDIN"), None, "kubelet compares exactly");
}

#[test]
fn port_forward_numbers_two_channels_per_port_and_prefixes_the_port() {
    assert_eq!(port_channels(0), Some((0, 1)));
    assert_eq!(port_channels(3), Some((6, 7)));
    assert_eq!(port_channels(128), None);
    assert_eq!(port_prefix(8080), [0x90, 0x1f]);
}

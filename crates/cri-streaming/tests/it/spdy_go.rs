//! The codec against moby/spdystream's framer, which client-go's SPDY executor and kubelet's
//! server both use: frames Go writes decode here, frames written here decode in Go, across
//! enough header blocks that both zlib contexts carry state from frame to frame.
//!
//! `spdystream-peer` (tests/spdystream-peer) is built offline from Debian's packages.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use cri_streaming::spdy::{
    FLAG_FIN, Frame, FrameDecoder, FrameEncoder, Headers, Limits, Setting, SynStream, goaway, rst,
};
use serde_json::{Map, Value, json};

const NEEDS: &str = "needs Debian's golang-go and golang-github-docker-spdystream-dev \
                     (moby/spdystream under /usr/share/gocode)";

fn peer() -> std::path::PathBuf {
    test_support::go::build(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/spdystream-peer"),
        Path::new(env!("CARGO_TARGET_TMPDIR")),
        NEEDS,
    )
}

fn syn(stream_id: u32, headers: Headers) -> Frame {
    Frame::SynStream(SynStream {
        stream_id,
        associated_to: 0,
        priority: 0,
        slot: 0,
        fin: false,
        unidirectional: false,
        headers,
    })
}

/// Headers in name order: Go's header map has none, so both sides are compared sorted.
fn sorted(frame: Frame) -> Frame {
    let sort = |mut h: Headers| {
        h.0.sort();
        h
    };
    match frame {
        Frame::SynStream(s) => Frame::SynStream(SynStream {
            headers: sort(s.headers),
            ..s
        }),
        Frame::SynReply {
            stream_id,
            fin,
            headers,
        } => Frame::SynReply {
            stream_id,
            fin,
            headers: sort(headers),
        },
        Frame::Headers {
            stream_id,
            fin,
            headers,
        } => Frame::Headers {
            stream_id,
            fin,
            headers: sort(headers),
        },
        other => other,
    }
}

#[test]
fn frames_spdystream_writes_decode_here() {
    let out = Command::new(peer())
        .arg("encode")
        .output()
        .expect("run spdystream-peer");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let mut decoder = FrameDecoder::new(Limits::default());
    let mut got = Vec::new();
    let mut at = 0;
    while at < out.stdout.len() {
        let (frame, used) = decoder
            .decode(&out.stdout[at..])
            .unwrap_or_else(|e| panic!("frame {}: {e}", got.len()))
            .expect("whole frames");
        got.push(sorted(frame));
        at += used;
    }

    let mut want = vec![
        Frame::Settings {
            clear: false,
            entries: vec![Setting {
                flags: 0,
                id: 7,
                value: 65536,
            }],
        },
        syn(1, Headers::new().with("streamtype", "error")),
        syn(3, Headers::new().with("streamtype", "stdout")),
        syn(
            5,
            Headers::new()
                .with("port", "8080")
                .with("requestid", "0")
                .with("streamtype", "data"),
        ),
        Frame::SynReply {
            stream_id: 2,
            fin: false,
            headers: Headers::new(),
        },
        Frame::Headers {
            stream_id: 3,
            fin: false,
            headers: Headers::new().with("x-multi", "a\0b"),
        },
        Frame::Data {
            stream_id: 1,
            fin: true,
            data: b"hello".to_vec(),
        },
        Frame::Ping { id: 7 },
        Frame::WindowUpdate {
            stream_id: 1,
            delta: 1024,
        },
        Frame::RstStream {
            stream_id: 3,
            status: rst::CANCEL,
        },
        Frame::GoAway {
            last_good_stream_id: 5,
            status: goaway::OK,
        },
    ];
    for i in (7..200).step_by(2) {
        want.push(syn(
            i,
            Headers::new()
                .with("n", &"v".repeat(i as usize))
                .with("streamtype", "stdin"),
        ));
    }
    assert_eq!(got, want);
}

/// Go's `http.Header` key for a SPDY name (`textproto.CanonicalMIMEHeaderKey`).
fn canonical(name: &str) -> String {
    let mut upper = true;
    name.chars()
        .map(|c| {
            let c = if upper { c.to_ascii_uppercase() } else { c };
            upper = c == '-';
            c
        })
        .collect()
}

/// What spdystream-peer prints for `frame` (its fields are `omitempty`).
fn go_view(frame: &Frame) -> Value {
    let mut v = Map::new();
    let mut put = |k: &str, x: Value| {
        let empty = x == json!(0) || x == json!("") || x == json!({}) || x == json!([]);
        if !empty {
            v.insert(k.into(), x);
        }
    };
    let headers = |h: &Headers| -> Value {
        h.0.iter()
            .map(|(n, v)| (canonical(n), json!(v.split('\0').collect::<Vec<_>>())))
            .collect::<Map<_, _>>()
            .into()
    };
    match frame {
        Frame::SynStream(s) => {
            put("type", json!("syn_stream"));
            put("stream", json!(s.stream_id));
            put("assoc", json!(s.associated_to));
            put("pri", json!(s.priority));
            put(
                "flags",
                json!(u8::from(s.fin) | (u8::from(s.unidirectional) << 1)),
            );
            put("headers", headers(&s.headers));
        }
        Frame::SynReply {
            stream_id,
            fin,
            headers: h,
        }
        | Frame::Headers {
            stream_id,
            fin,
            headers: h,
        } => {
            let t = if matches!(frame, Frame::SynReply { .. }) {
                "syn_reply"
            } else {
                "headers"
            };
            put("type", json!(t));
            put("stream", json!(stream_id));
            put("flags", json!(u8::from(*fin)));
            put("headers", headers(h));
        }
        Frame::Data {
            stream_id,
            fin,
            data,
        } => {
            put("type", json!("data"));
            put("stream", json!(stream_id));
            put("flags", json!(u8::from(*fin) * FLAG_FIN));
            put("data", json!(String::from_utf8_lossy(data)));
        }
        Frame::Ping { id } => {
            put("type", json!("ping"));
            put("value", json!(id));
        }
        Frame::WindowUpdate { stream_id, delta } => {
            put("type", json!("window_update"));
            put("stream", json!(stream_id));
            put("value", json!(delta));
        }
        Frame::RstStream { stream_id, status } => {
            put("type", json!("rst_stream"));
            put("stream", json!(stream_id));
            put("status", json!(status));
        }
        Frame::GoAway {
            last_good_stream_id,
            status,
        } => {
            put("type", json!("goaway"));
            put("stream", json!(last_good_stream_id));
            put("status", json!(status));
        }
        Frame::Settings { clear, entries } => {
            put("type", json!("settings"));
            put("flags", json!(u8::from(*clear)));
            put(
                "entries",
                json!(
                    entries
                        .iter()
                        .map(|e| [u32::from(e.flags), e.id, e.value])
                        .collect::<Vec<_>>()
                ),
            );
        }
        other @ Frame::Unknown { .. } => panic!("not sent: {other:?}"),
    }
    Value::Object(v)
}

#[test]
fn frames_written_here_decode_in_spdystream() {
    let mut frames = vec![
        Frame::Settings {
            clear: false,
            entries: vec![Setting {
                flags: 1,
                id: 4,
                value: 100,
            }],
        },
        Frame::SynReply {
            stream_id: 1,
            fin: false,
            headers: Headers::new(),
        },
        syn(
            2,
            Headers::new()
                .with("streamtype", "error")
                .with("x-multi", "a\0b"),
        ),
        Frame::Headers {
            stream_id: 1,
            fin: true,
            headers: Headers::new().with("x-long", &"0123456789".repeat(4000)),
        },
        Frame::Data {
            stream_id: 1,
            fin: false,
            data: b"command output\n".to_vec(),
        },
        Frame::Ping { id: 2 },
        Frame::WindowUpdate {
            stream_id: 0,
            delta: 65536,
        },
        Frame::RstStream {
            stream_id: 3,
            status: rst::REFUSED_STREAM,
        },
    ];
    for i in (1..400).step_by(2) {
        frames.push(Frame::SynReply {
            stream_id: i,
            fin: i % 3 == 0,
            headers: Headers::new().with("n", &i.to_string().repeat(i as usize % 50 + 1)),
        });
    }
    frames.push(Frame::GoAway {
        last_good_stream_id: 399,
        status: goaway::OK,
    });

    let mut wire = Vec::new();
    let mut encoder = FrameEncoder::new();
    for f in &frames {
        encoder.encode(f, &mut wire).unwrap();
    }
    let mut child = Command::new(peer())
        .arg("decode")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run spdystream-peer");
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(&wire));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let got: Vec<Value> = out
        .stdout
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect();
    let want: Vec<Value> = frames.iter().map(go_view).collect();
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g, w, "frame {i}");
    }
}

/// kubectl exec's SPDY side, as client-go runs it on spdystream, against [`Session`]: error,
/// stdin and stdout streams, a ping, 300 KB on stdin (past any 64 KiB window spdystream would
/// never open) echoed on stdout, then the v4 status on the error stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exec_session_with_spdystreams_client() {
    use cri_streaming::spdy::{Session, SessionConfig};
    use cri_streaming::status::ExitStatus;

    const BYTES: usize = 300_000;
    let socket = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("spdy-exec-{}.sock", std::process::id()));
    let _ = std::fs::remove_file(&socket);
    let listener = tokio::net::UnixListener::bind(&socket).expect("bind the test socket");
    let program = peer();
    let path = socket.clone();
    let client = tokio::task::spawn_blocking(move || {
        Command::new(program)
            .arg("client")
            .arg(&path)
            .arg(BYTES.to_string())
            .output()
            .expect("run spdystream-peer client")
    });

    let served = async {
        let (conn, _) = listener.accept().await.expect("the client connects");
        let mut session = Session::spawn(conn, SessionConfig::default());
        let mut streams = std::collections::HashMap::new();
        for _ in 0..3 {
            let stream = session.accept().await.expect("three streams");
            let kind = stream.headers().get("streamtype").unwrap_or("").to_owned();
            streams.insert(kind, stream);
        }
        let mut stdin = streams.remove("stdin").expect("a stdin stream");
        let stdout = streams.remove("stdout").expect("a stdout stream").writer();
        let error = streams.remove("error").expect("an error stream").writer();
        let mut echoed = 0;
        while let Some(chunk) = stdin.read().await {
            echoed += chunk.len();
            stdout.write(&chunk).await.unwrap();
        }
        stdout.close().await.unwrap();
        error
            .write(ExitStatus::Success.v4_json().as_bytes())
            .await
            .unwrap();
        error.close().await.unwrap();
        (echoed, session)
    };
    let (echoed, session) = tokio::time::timeout(Duration::from_secs(30), served)
        .await
        .expect("the exec session ends in time");
    assert_eq!(echoed, BYTES);

    let out = tokio::time::timeout(Duration::from_secs(30), client)
        .await
        .expect("the client ends in time")
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got: Value = serde_json::from_slice(&out.stdout).unwrap();
    let sum: usize = (0..BYTES).map(|i| i % 251).sum();
    assert_eq!(
        got,
        json!({
            "stdout_len": BYTES,
            "stdout_sum": sum,
            "error": r#"{"metadata":{},"status":"Success"}"#,
        })
    );
    // The client said GOAWAY and left.
    tokio::time::timeout(Duration::from_secs(10), session.finished())
        .await
        .expect("the session ends once the client is gone")
        .unwrap();
    let _ = std::fs::remove_file(&socket);
}

/// The whole server against spdystream's client as client-go drives it: the HTTP upgrade
/// (offering v4 then v3), the streams, 300 KB echoed by the fake runtime's `cat`, and the v4
/// status carrying exit code 5.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_streaming_server_serves_spdystreams_client_through_an_http_upgrade() {
    const BYTES: usize = 300_000;
    let server = crate::server_support::start(crate::server_support::config()).await;
    let url = server.exec(&["cat", "5"], [true, true, false], false);
    let program = peer();
    let client = tokio::task::spawn_blocking(move || {
        Command::new(program)
            .arg("upgrade")
            .arg(&url)
            .arg(BYTES.to_string())
            .output()
            .expect("run spdystream-peer upgrade")
    });
    let out = tokio::time::timeout(Duration::from_secs(30), client)
        .await
        .expect("the client ends in time")
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("protocol v4.channel.k8s.io"), "{stderr}");
    let got: Value = serde_json::from_slice(&out.stdout).unwrap();
    let sum: usize = (0..BYTES).map(|i| i % 251).sum();
    assert_eq!(
        got,
        json!({
            "stdout_len": BYTES,
            "stdout_sum": sum,
            "error": cri_streaming::status::ExitStatus::exit_code(5).v4_json(),
        })
    );
    server.counts.all_dropped(1).await;
    server.none_open().await;
}

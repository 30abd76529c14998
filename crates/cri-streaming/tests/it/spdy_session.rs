//! The server side of a SPDY connection, driven by a client made of the codec over an in-memory
//! pipe.

use std::time::Duration;

use cri_streaming::Error;
use cri_streaming::spdy::{
    Frame, FrameDecoder, FrameEncoder, Headers, Limits, Session, SessionConfig, SynStream, goaway,
    rst,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

const WAIT: Duration = Duration::from_secs(5);

struct Client {
    io: DuplexStream,
    encoder: FrameEncoder,
    decoder: FrameDecoder,
    buf: Vec<u8>,
}

impl Client {
    fn new(config: SessionConfig) -> (Client, Session) {
        let (client, server) = tokio::io::duplex(64 * 1024);
        let client = Client {
            io: client,
            encoder: FrameEncoder::new(),
            decoder: FrameDecoder::new(Limits::default()),
            buf: Vec::new(),
        };
        (client, Session::spawn(server, config))
    }

    async fn send(&mut self, frame: Frame) {
        let mut wire = Vec::new();
        self.encoder.encode(&frame, &mut wire).unwrap();
        self.io.write_all(&wire).await.unwrap();
    }

    async fn open(&mut self, stream_id: u32, stream_type: &str) {
        self.send(Frame::SynStream(SynStream {
            stream_id,
            associated_to: 0,
            priority: 0,
            slot: 0,
            fin: false,
            unidirectional: false,
            headers: Headers::new().with("streamtype", stream_type),
        }))
        .await;
    }

    /// The next frame, `None` at EOF.
    async fn recv(&mut self) -> Option<Frame> {
        tokio::time::timeout(WAIT, async {
            loop {
                if let Some((frame, used)) = self.decoder.decode(&self.buf).unwrap() {
                    self.buf.drain(..used);
                    return Some(frame);
                }
                let mut chunk = [0u8; 4096];
                let n = self.io.read(&mut chunk).await.unwrap();
                if n == 0 {
                    assert!(self.buf.is_empty(), "EOF inside a frame");
                    return None;
                }
                self.buf.extend_from_slice(&chunk[..n]);
            }
        })
        .await
        .expect("the server answers in time")
    }

    async fn expect(&mut self, want: Frame) {
        assert_eq!(self.recv().await, Some(want));
    }
}

fn data(stream_id: u32, fin: bool, bytes: &[u8]) -> Frame {
    Frame::Data {
        stream_id,
        fin,
        data: bytes.to_vec(),
    }
}

fn reply(stream_id: u32) -> Frame {
    Frame::SynReply {
        stream_id,
        fin: false,
        headers: Headers::new(),
    }
}

async fn accept(session: &mut Session) -> cri_streaming::spdy::Stream {
    tokio::time::timeout(WAIT, session.accept())
        .await
        .expect("a stream in time")
        .expect("a stream")
}

#[tokio::test]
async fn a_stream_is_replied_to_then_carries_data_both_ways() {
    let (mut client, mut session) = Client::new(SessionConfig::default());
    client.open(1, "stdin").await;
    let mut stream = accept(&mut session).await;
    assert_eq!(
        (stream.id(), stream.headers().get("streamtype")),
        (1, Some("stdin"))
    );
    client.expect(reply(1)).await;

    client.send(data(1, false, b"hello")).await;
    client.send(data(1, true, b"")).await;
    assert_eq!(stream.read().await.as_deref(), Some(&b"hello"[..]));
    assert_eq!(stream.read().await, None, "FIN ends the reads");

    let out = stream.writer();
    out.write(b"out").await.unwrap();
    out.close().await.unwrap();
    client.expect(data(1, false, b"out")).await;
    client.expect(data(1, true, b"")).await;
}

#[tokio::test]
async fn long_writes_are_split_into_frames() {
    let config = SessionConfig {
        max_write_frame: 4,
        ..SessionConfig::default()
    };
    let (mut client, mut session) = Client::new(config);
    client.open(1, "stdout").await;
    let stream = accept(&mut session).await;
    client.expect(reply(1)).await;
    stream.writer().write(b"0123456789").await.unwrap();
    for part in [&b"0123"[..], b"4567", b"89"] {
        client.expect(data(1, false, part)).await;
    }
}

#[tokio::test]
async fn client_pings_are_answered() {
    let (mut client, _session) = Client::new(SessionConfig::default());
    client.send(Frame::Ping { id: 2 }).await; // an answer to a ping we never sent: ignored
    client.send(Frame::Ping { id: 1 }).await;
    client.expect(Frame::Ping { id: 1 }).await;
}

#[tokio::test]
async fn a_broken_frame_ends_the_session_with_goaway() {
    let (mut client, session) = Client::new(SessionConfig::default());
    client.open(1, "error").await;
    client.expect(reply(1)).await;
    client
        .io
        .write_all(&[0x80, 2, 0, 6, 0, 0, 0, 4, 0, 0, 0, 1])
        .await
        .unwrap();
    client
        .expect(Frame::GoAway {
            last_good_stream_id: 1,
            status: goaway::PROTOCOL_ERROR,
        })
        .await;
    assert_eq!(client.recv().await, None, "then the connection closes");
    let err = session.finished().await.unwrap_err();
    assert!(
        matches!(err, Error::UnsupportedVersion { version: 2, .. }),
        "{err}"
    );
}

#[tokio::test]
async fn client_stream_ids_are_odd_and_increase() {
    for (first, second) in [(3, 1), (1, 1), (1, 4)] {
        let (mut client, session) = Client::new(SessionConfig::default());
        client.open(first, "stdout").await;
        client.expect(reply(first)).await;
        client.open(second, "stderr").await;
        client
            .expect(Frame::GoAway {
                last_good_stream_id: first,
                status: goaway::PROTOCOL_ERROR,
            })
            .await;
        let err = session.finished().await.unwrap_err().to_string();
        assert!(err.starts_with("spdy SYN_STREAM frame: stream id"), "{err}");
    }
}

#[tokio::test]
async fn streams_past_the_cap_are_refused() {
    let config = SessionConfig {
        max_streams: 2,
        ..SessionConfig::default()
    };
    let (mut client, _session) = Client::new(config);
    for id in [1, 3, 5] {
        client.open(id, "data").await;
    }
    client.expect(reply(1)).await;
    client.expect(reply(3)).await;
    client
        .expect(Frame::RstStream {
            stream_id: 5,
            status: rst::REFUSED_STREAM,
        })
        .await;
    // A stream the client finished frees its place.
    client.send(data(1, true, b"")).await;
    client.open(7, "data").await;
    client.expect(reply(7)).await;
}

#[tokio::test]
async fn a_stream_nobody_reads_holds_the_clients_bytes_back() {
    let config = SessionConfig {
        stream_buffer: 1,
        ..SessionConfig::default()
    };
    let (mut client, mut session) = Client::new(config);
    client.open(1, "stdin").await;
    let mut stream = accept(&mut session).await;
    client.expect(reply(1)).await;
    for chunk in [b"a", b"b", b"c"] {
        client.send(data(1, false, chunk)).await;
    }
    client.send(Frame::Ping { id: 1 }).await;
    // The reader waits on the full stream: the PING behind the data is not read yet.
    let early = tokio::time::timeout(Duration::from_millis(300), client.recv()).await;
    assert!(
        early.is_err(),
        "answered while the stream was full: {early:?}"
    );
    for want in [b"a", b"b", b"c"] {
        assert_eq!(stream.read().await.as_deref(), Some(&want[..]));
    }
    client.expect(Frame::Ping { id: 1 }).await;
}

#[tokio::test]
async fn received_data_is_acknowledged_with_window_updates() {
    let (mut client, mut session) = Client::new(SessionConfig::default());
    client.open(1, "stdin").await;
    let mut stream = accept(&mut session).await;
    client.expect(reply(1)).await;
    let reading = tokio::spawn(async move {
        let mut n = 0;
        while let Some(d) = stream.read().await {
            n += d.len();
        }
        n
    });
    for _ in 0..5 {
        client.send(data(1, false, &[7; 8 * 1024])).await;
    }
    client
        .expect(Frame::WindowUpdate {
            stream_id: 1,
            delta: 32 * 1024,
        })
        .await;
    client
        .expect(Frame::WindowUpdate {
            stream_id: 0,
            delta: 32 * 1024,
        })
        .await;
    client.send(data(1, true, b"")).await;
    assert_eq!(reading.await.unwrap(), 40 * 1024);
}

#[tokio::test]
async fn close_says_goaway_and_ends_reads_and_writes() {
    let (mut client, mut session) = Client::new(SessionConfig::default());
    client.open(1, "stdout").await;
    let mut stream = accept(&mut session).await;
    client.expect(reply(1)).await;
    session.close();
    client
        .expect(Frame::GoAway {
            last_good_stream_id: 1,
            status: goaway::OK,
        })
        .await;
    assert_eq!(client.recv().await, None);
    assert_eq!(stream.read().await, None);
    let err = stream.writer().write(b"late").await.unwrap_err();
    assert!(matches!(err, Error::SessionClosed), "{err}");
    session.finished().await.unwrap();
}

#[tokio::test]
async fn an_idle_client_is_dropped() {
    let config = SessionConfig {
        idle_timeout: Duration::from_millis(100),
        ..SessionConfig::default()
    };
    let (mut client, session) = Client::new(config);
    client
        .expect(Frame::GoAway {
            last_good_stream_id: 0,
            status: goaway::OK,
        })
        .await;
    let err = session.finished().await.unwrap_err();
    assert!(matches!(err, Error::IdleTimeout(_)), "{err}");
}

#[tokio::test]
async fn a_client_that_leaves_ends_the_session() {
    let (mut client, mut session) = Client::new(SessionConfig::default());
    client.open(1, "stdin").await;
    let mut stream = accept(&mut session).await;
    drop(client);
    assert_eq!(stream.read().await, None);
    assert!(session.accept().await.is_none());
    // Leaving is no failure, even when the GOAWAY finds the pipe gone.
    session.finished().await.unwrap();
}

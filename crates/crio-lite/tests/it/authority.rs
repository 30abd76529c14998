//! Every `:authority` real CRI clients send, byte for byte, over the daemon's socket.
//!
//! Go gRPC as in crictl < 1.31 and older kubelets sends the socket path, grpc-java the raw path,
//! Python grpcio 1.57 and later and grpc-swift the percent-encoded path, some clients none. h2
//! rejects all but the last and `localhost`; crio-lite's front replaces an invalid authority
//! before h2 sees it.

use tokio::net::UnixStream;

use crate::support::{self, Harness};
use cri_api::v1 as cri;
use test_support::raw_h2::{End, RawConn, RawResponse};

const SERVICE: &str = "/runtime.v1.RuntimeService/";

/// A gRPC message frame: no compression, big-endian length, the message.
fn grpc_body(message: &impl prost::Message) -> Vec<u8> {
    let bytes = message.encode_to_vec();
    let mut body = vec![0];
    body.extend_from_slice(&u32::try_from(bytes.len()).unwrap().to_be_bytes());
    body.extend_from_slice(&bytes);
    body
}

/// The response message of a successful unary call; fails the test on anything else.
fn grpc_reply<M: prost::Message + Default>(response: &RawResponse, what: &str) -> M {
    assert!(
        matches!(response.end, End::Stream),
        "{what}: the stream ended with {:?}",
        response.end
    );
    assert_eq!(response.status(), Some(&b"200"[..]), "{what}: {response:?}");
    let status = response
        .trailers
        .iter()
        .chain(&response.headers)
        .find(|(name, _)| name == b"grpc-status")
        .map(|(_, value)| value.clone());
    assert_eq!(status.as_deref(), Some(&b"0"[..]), "{what}: {response:?}");
    let body = &response.body;
    assert!(body.len() >= 5, "{what}: no message in {body:?}");
    M::decode(&body[5..]).unwrap_or_else(|e| panic!("{what}: {e}"))
}

async fn call(
    conn: &mut RawConn<UnixStream>,
    authority: Option<&[u8]>,
    method: &str,
    message: &impl prost::Message,
) -> RawResponse {
    tokio::time::timeout(
        std::time::Duration::from_secs(10),
        conn.request(
            authority,
            &format!("{SERVICE}{method}"),
            &[],
            &grpc_body(message),
        ),
    )
    .await
    .expect("an answer within 10 s")
    .expect("the connection works")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_authority_clients_send_is_served() {
    let Harness { dir, daemon, .. } = support::harness().await;
    let socket = daemon.socket_path().to_owned();
    let path = socket.to_string_lossy().into_owned();
    let encoded = path.replace('/', "%2F");
    let authorities: [(&str, Option<&[u8]>); 5] = [
        ("absent", None),
        ("localhost", Some(b"localhost")),
        (
            "socket path (crictl < 1.31, older kubelets, grpc-java)",
            Some(path.as_bytes()),
        ),
        (
            "percent-encoded path (grpcio >= 1.57)",
            Some(encoded.as_bytes()),
        ),
        (
            "unix:// URI",
            Some(b"unix:///var/run/crio-lite/crio-lite.sock"),
        ),
    ];
    for (i, (what, authority)) in authorities.into_iter().enumerate() {
        let mut conn = RawConn::handshake(UnixStream::connect(&socket).await.unwrap())
            .await
            .unwrap();
        let version: cri::VersionResponse = grpc_reply(
            &call(
                &mut conn,
                authority,
                "Version",
                &cri::VersionRequest::default(),
            )
            .await,
            what,
        );
        assert_eq!(version.runtime_name, "crio-lite", "{what}");
        let name = format!("authority-{i}");
        let run: cri::RunPodSandboxResponse = grpc_reply(
            &call(&mut conn, authority, "RunPodSandbox", &support::pod(&name)).await,
            what,
        );
        let listed: cri::ListPodSandboxResponse = grpc_reply(
            &call(
                &mut conn,
                authority,
                "ListPodSandbox",
                &cri::ListPodSandboxRequest::default(),
            )
            .await,
            what,
        );
        assert!(
            listed.items.iter().any(|p| p.id == run.pod_sandbox_id),
            "{what}: the new sandbox is listed"
        );
        conn.close().await.unwrap();
    }
    daemon.shutdown().await.unwrap();
    drop(dir);
}

/// A header block that does not decode gets a clean HTTP/2 connection error, and the daemon
/// keeps serving other connections.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_header_block_is_a_clean_error_and_the_daemon_keeps_serving() {
    let Harness { dir, daemon, .. } = support::harness().await;
    let socket = daemon.socket_path().to_owned();
    let mut bad = RawConn::handshake(UnixStream::connect(&socket).await.unwrap())
        .await
        .unwrap();
    // An HPACK integer with more continuation bytes than any decoder takes.
    let id = bad
        .send_raw_headers(&[0x82, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff], true)
        .await
        .unwrap();
    let answer = tokio::time::timeout(std::time::Duration::from_secs(10), bad.read_response(id))
        .await
        .expect("an answer within 10 s")
        .unwrap();
    // h2 maps every HPACK decoding error to PROTOCOL_ERROR (RFC 9113 would say
    // COMPRESSION_ERROR); either is a connection error.
    assert!(
        matches!(answer.end, End::GoAway(0x1 | 0x9, _)),
        "{answer:?}"
    );
    let mut good = RawConn::handshake(UnixStream::connect(&socket).await.unwrap())
        .await
        .unwrap();
    let version: cri::VersionResponse = grpc_reply(
        &call(
            &mut good,
            Some(socket.to_string_lossy().as_bytes()),
            "Version",
            &cri::VersionRequest::default(),
        )
        .await,
        "after a bad connection",
    );
    assert_eq!(version.runtime_name, "crio-lite");
    good.close().await.unwrap();
    drop(bad);
    daemon.shutdown().await.unwrap();
    drop(dir);
}

//! How streams end: the client leaves, goes idle or half-open, never reads, breaks a limit, or
//! the server shuts down. Each time the runtime's future must be dropped (the fake counts
//! them) and the stream's count go back to zero.

use std::sync::Arc;
use std::time::Duration;

use cri_streaming::Error;
use cri_streaming::runtime::{AttachRequest, ExecRequest, PortForwardRequest};
use cri_streaming::server::{Config, OpenStreams, Server, TlsConfig};
use cri_streaming::spdy::goaway;
use tokio::io::AsyncWriteExt;

use crate::server_support::{Fake, config, request, request_on, spdy_upgrade, start};

async fn exec_sleep(
    server: &crate::server_support::Running,
) -> crate::server_support::SpdyClient<tokio::net::TcpStream> {
    let url = server.exec(&["sleep"], [true, true, false], false);
    let mut client = spdy_upgrade(&url, "v4.channel.k8s.io").await;
    client.open_typed(1, "error").await;
    client.open_typed(3, "stdin").await;
    client.open_typed(5, "stdout").await;
    client
}

async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let wait = async {
        while !done() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(crate::server_support::WAIT, wait)
        .await
        .unwrap_or_else(|_| panic!("{what} did not happen"));
}

#[tokio::test]
async fn a_client_that_disconnects_drops_the_runtimes_future() {
    let server = start(config()).await;
    let client = exec_sleep(&server).await;
    until("exec started", || server.counts.started() == 1).await;
    assert_eq!(server.handle.open_streams().exec, 1);
    drop(client);
    server.counts.all_dropped(1).await;
    server.none_open().await;
}

#[tokio::test]
async fn an_idle_client_is_cut_off() {
    let mut cfg = config();
    cfg.stream_idle_timeout = Duration::from_millis(300);
    let server = start(cfg).await;
    // Half-open as far as the server can tell: the client is connected and sends nothing.
    let mut client = exec_sleep(&server).await;
    until("exec started", || server.counts.started() == 1).await;
    let got = client.collect().await;
    assert_eq!(got.goaway, Some(goaway::OK), "idle timeout says goodbye");
    server.counts.all_dropped(1).await;
    server.none_open().await;
}

#[tokio::test]
async fn a_client_whose_stdin_nobody_reads_idles_out_too() {
    let mut cfg = config();
    cfg.stream_idle_timeout = Duration::from_millis(300);
    let server = start(cfg).await;
    // `sleep` never reads stdin: after the stream's queue fills, the session's reader waits.
    let mut client = exec_sleep(&server).await;
    until("exec started", || server.counts.started() == 1).await;
    for _ in 0..64 {
        client.data(3, false, &[b'x'; 1024]).await;
    }
    let got = client.collect().await;
    assert_eq!(got.goaway, Some(goaway::OK));
    server.counts.all_dropped(1).await;
    server.none_open().await;
}

#[tokio::test]
async fn a_client_that_does_not_create_its_streams_in_time_is_dropped() {
    let mut cfg = config();
    cfg.stream_creation_timeout = Duration::from_millis(200);
    let server = start(cfg).await;
    let url = server.exec(&["cat"], [true, true, false], false);
    let mut client = spdy_upgrade(&url, "v4.channel.k8s.io").await;
    client.open_typed(1, "error").await;
    let got = client.collect().await;
    assert_eq!(got.goaway, Some(goaway::OK));
    assert_eq!(server.counts.started(), 0, "the runtime was never asked");
    server.none_open().await;
}

#[tokio::test]
async fn shutdown_ends_every_stream_and_stops_listening() {
    let server = start(config()).await;
    let a = exec_sleep(&server).await;
    let b = exec_sleep(&server).await;
    until("both execs started", || server.counts.started() == 2).await;
    assert_eq!(
        server.handle.open_streams(),
        OpenStreams {
            exec: 2,
            attach: 0,
            port_forward: 0
        }
    );
    tokio::time::timeout(Duration::from_secs(5), server.handle.shutdown())
        .await
        .expect("shutdown is prompt");
    assert_eq!(server.counts.dropped(), 2, "shutdown dropped the futures");
    assert_eq!(server.handle.open_streams(), OpenStreams::default());
    assert!(
        tokio::net::TcpStream::connect(server.handle.local_addr())
            .await
            .is_err(),
        "no longer listening"
    );
    for mut client in [a, b] {
        assert_eq!(
            client.collect().await.goaway,
            Some(goaway::OK),
            "told goodbye"
        );
    }
}

#[tokio::test]
async fn a_client_that_never_reads_holds_the_runtime_back() {
    let server = start(config()).await;
    let url = server.exec(&["flood"], [false, true, false], false);
    let mut client = spdy_upgrade(&url, "v4.channel.k8s.io").await;
    client.open_typed(1, "error").await;
    client.open_typed(3, "stdout").await;
    // The client reads nothing from here on.
    until("flood started", || server.counts.started() == 1).await;
    let second = server.counts.flood_stalls().await;
    // The session's queue (64 frames), its batch, and the socket buffers: megabytes, not more.
    assert!(
        second < 32 * 1024 * 1024,
        "{second} bytes accepted from the runtime"
    );
    drop(client);
    server.counts.all_dropped(1).await;
}

#[tokio::test]
async fn an_oversize_frame_ends_the_connection() {
    let server = start(config()).await;
    let mut client = exec_sleep(&server).await;
    until("exec started", || server.counts.started() == 1).await;
    // A data frame header claiming 2 MiB on stdin: over the 1 MiB limit.
    let len: u32 = 2 * 1024 * 1024;
    let mut header = vec![0, 0, 0, 3, 0];
    header.extend_from_slice(&len.to_be_bytes()[1..]);
    client.io.write_all(&header).await.unwrap();
    let got = client.collect().await;
    assert_eq!(got.goaway, Some(goaway::PROTOCOL_ERROR));
    server.counts.all_dropped(1).await;
    server.none_open().await;
}

#[tokio::test]
async fn oversize_request_headers_are_refused() {
    let server = start(config()).await;
    let url = server.exec(&["cat"], [false, true, false], false);
    let big = "x".repeat(100 * 1024);
    let reply = request("GET", &url, &[("X-Big", &big)]).await;
    assert_eq!(reply.status, 431);
    assert_eq!(
        reply.body,
        "request headers of 102432 bytes are over the limit of 65536 bytes"
    );
    let many: Vec<(String, String)> = (0..200)
        .map(|i| (format!("X-H{i}"), "v".to_owned()))
        .collect();
    let many: Vec<(&str, &str)> = many.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    let reply = request("GET", &url, &many).await;
    assert_eq!(reply.status, 431);
    // Neither consumed the token.
    crate::server_support::spdy_upgrade(&url, "v4.channel.k8s.io").await;
}

#[tokio::test]
async fn a_client_slow_to_send_its_request_is_cut_off() {
    let mut cfg = config();
    cfg.header_read_timeout = Duration::from_millis(300);
    let server = start(cfg).await;
    let mut conn = tokio::net::TcpStream::connect(server.handle.local_addr())
        .await
        .unwrap();
    // A whole request, answered, then silence on the kept-alive connection.
    conn.write_all(b"GET /nothing/here HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut buf = Vec::new();
    let read = tokio::time::timeout(
        crate::server_support::WAIT,
        tokio::io::AsyncReadExt::read_to_end(&mut conn, &mut buf),
    )
    .await;
    assert!(read.is_ok(), "the connection is closed");
    assert!(
        buf.starts_with(b"HTTP/1.1 404"),
        "{}",
        String::from_utf8_lossy(&buf)
    );

    let mut conn = tokio::net::TcpStream::connect(server.handle.local_addr())
        .await
        .unwrap();
    conn.write_all(b"GET /exec/").await.unwrap();
    let mut buf = Vec::new();
    let read = tokio::time::timeout(
        crate::server_support::WAIT,
        tokio::io::AsyncReadExt::read_to_end(&mut conn, &mut buf),
    )
    .await;
    assert!(read.is_ok(), "a half-sent head is cut off");
}

#[tokio::test]
async fn requests_are_checked_and_bounded_when_urls_are_handed_out() {
    let mut cfg = Config::default();
    cfg.max_in_flight = 2;
    let handle = Server::start(cfg, Arc::new(Fake::default())).await.unwrap();
    let exec = |tty, stderr, stdout| ExecRequest {
        container_id: "c".into(),
        cmd: vec!["true".into()],
        tty,
        stdin: false,
        stdout,
        stderr,
    };
    for (req, want) in [
        (exec(true, true, true), "tty and stderr cannot both be true"),
        (
            exec(false, false, false),
            "one of stdin, stdout, or stderr must be set",
        ),
        (
            ExecRequest {
                container_id: String::new(),
                ..exec(false, false, true)
            },
            "missing required container_id",
        ),
    ] {
        match handle.get_exec(req) {
            Err(Error::InvalidRequest(why)) => assert_eq!(why, want),
            other => panic!("{other:?}"),
        }
    }
    let attach = AttachRequest {
        container_id: String::new(),
        tty: false,
        stdin: true,
        stdout: false,
        stderr: false,
    };
    assert!(matches!(
        handle.get_attach(attach),
        Err(Error::InvalidRequest(_))
    ));
    let pf = |id: &str| PortForwardRequest {
        pod_sandbox_id: id.into(),
        ports: vec![],
    };
    assert!(matches!(
        handle.get_port_forward(pf("")),
        Err(Error::InvalidRequest(_))
    ));

    let url = handle.get_exec(exec(false, false, true)).unwrap();
    assert!(
        url.starts_with(&format!("http://{}/exec/", handle.local_addr())),
        "{url}"
    );
    assert_eq!(url.rsplit('/').next().unwrap().len(), 22, "128-bit tokens");
    handle.get_port_forward(pf("p")).unwrap();
    let full = handle.get_port_forward(pf("p")).unwrap_err();
    assert_eq!(
        full.to_string(),
        "too many streaming requests in flight: all 2 slots are taken"
    );
}

#[tokio::test]
async fn a_base_url_and_a_bad_address_are_reported() {
    let mut cfg = Config::default();
    cfg.base_url = Some("https://node.example:10010/".into());
    let handle = Server::start(cfg, Arc::new(Fake::default())).await.unwrap();
    let url = handle
        .get_port_forward(PortForwardRequest {
            pod_sandbox_id: "p".into(),
            ports: vec![80],
        })
        .unwrap();
    assert!(
        url.starts_with("https://node.example:10010/portforward/"),
        "{url}"
    );

    let mut cfg = Config::default();
    cfg.addr = handle.local_addr();
    let taken = Server::start(cfg, Arc::new(Fake::default()))
        .await
        .unwrap_err();
    assert!(
        taken.to_string().starts_with(&format!(
            "cannot listen for streaming on {}",
            handle.local_addr()
        )),
        "{taken}"
    );
}

fn testdata(name: &str) -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata/tls")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn tls_client(with_cert: bool) -> tokio_rustls::TlsConnector {
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
    use tokio_rustls::rustls::{ClientConfig, RootCertStore, crypto};

    let mut roots = RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(&testdata("ca.pem")).unwrap())
        .unwrap();
    let builder =
        ClientConfig::builder_with_provider(Arc::new(crypto::aws_lc_rs::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots);
    let config = if with_cert {
        builder
            .with_client_auth_cert(
                vec![CertificateDer::from_pem_slice(&testdata("client.pem")).unwrap()],
                PrivateKeyDer::from_pem_slice(&testdata("client.key")).unwrap(),
            )
            .unwrap()
    } else {
        builder.with_no_client_auth()
    };
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

#[tokio::test]
async fn tls_with_a_client_ca_serves_clients_it_signed_and_only_those() {
    let mut cfg = config();
    cfg.tls = Some(
        TlsConfig::from_pem(
            &testdata("server.pem"),
            &testdata("server.key"),
            Some(&testdata("ca.pem")),
        )
        .unwrap(),
    );
    let server = start(cfg).await;
    let url = server.exec(&["cat", "0"], [true, true, false], false);
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");
    let name = tokio_rustls::rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();

    let tcp = tokio::net::TcpStream::connect(server.handle.local_addr())
        .await
        .unwrap();
    let tls = tls_client(true).connect(name.clone(), tcp).await.unwrap();
    let headers = crate::server_support::spdy_headers("v4.channel.k8s.io");
    let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
    let reply = request_on(tls, "GET", &url, &headers).await;
    assert_eq!(reply.status, 101);
    let mut client = crate::server_support::SpdyClient::new(reply.io, reply.rest);
    client.open_typed(1, "error").await;
    client.open_typed(3, "stdin").await;
    client.open_typed(5, "stdout").await;
    client.data(3, true, b"over tls").await;
    let got = client.collect().await;
    assert_eq!(got.text(5), "over tls");

    // Without a client certificate the handshake (or the first read after it) fails.
    let tcp = tokio::net::TcpStream::connect(server.handle.local_addr())
        .await
        .unwrap();
    let refused = match tls_client(false).connect(name, tcp).await {
        Err(_) => true,
        Ok(mut tls) => {
            let _ = tls.write_all(b"GET / HTTP/1.1\r\n\r\n").await;
            let mut buf = [0u8; 64];
            matches!(
                tokio::io::AsyncReadExt::read(&mut tls, &mut buf).await,
                Err(_) | Ok(0)
            )
        }
    };
    assert!(refused, "a client without a certificate is served");
}

#[tokio::test]
async fn tls_configuration_errors_name_the_part() {
    let err = TlsConfig::from_pem(b"not pem", &testdata("server.key"), None).unwrap_err();
    assert_eq!(
        err.to_string(),
        "streaming tls: certificate chain: no certificate in it"
    );
    let err = TlsConfig::from_files(
        std::path::Path::new("/nonexistent/cert.pem"),
        std::path::Path::new("/nonexistent/key.pem"),
        None,
    )
    .unwrap_err();
    assert!(err.to_string().contains("/nonexistent/cert.pem"), "{err}");
}

#[tokio::test]
async fn dropping_the_handle_ends_the_server_too() {
    fn shareable<T: Send + Sync + 'static>(_: &T) {}

    let server = start(config()).await;
    shareable(&server.handle);
    let client = exec_sleep(&server).await;
    until("exec started", || server.counts.started() == 1).await;
    let crate::server_support::Running { handle, counts } = server;
    let addr = handle.local_addr();
    drop(handle);
    counts.all_dropped(1).await;
    let refused = async {
        while tokio::net::TcpStream::connect(addr).await.is_ok() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(crate::server_support::WAIT, refused)
        .await
        .expect("no longer listening");
    drop(client);
}

//! The systemd notify protocol, heard on a datagram socket of the test's own as systemd would
//! hear it from a `Type=notify` unit with `WatchdogSec`.

use std::os::unix::net::UnixDatagram;
use std::time::{Duration, Instant};

use crate::e2e_support::Node;

/// Reads datagrams until one contains `want` (each may hold several `KEY=VALUE` lines).
fn wait_for(socket: &UnixDatagram, want: &str, heard: &mut Vec<String>) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut buf = [0u8; 4096];
    while Instant::now() < deadline {
        if let Ok(n) = socket.recv(&mut buf) {
            let message = String::from_utf8_lossy(&buf[..n]).into_owned();
            heard.push(message.clone());
            if message.lines().any(|line| line == want) {
                return;
            }
        }
    }
    panic!("no {want:?} within 20 s; heard {heard:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root + netns: cargo xtask test"]
async fn systemd_hears_ready_recovered_watchdog_and_stopping() {
    let mut node = Node::new("notify");
    let path = node.path("notify.sock");
    let socket = UnixDatagram::bind(&path).expect("bind the notify socket");
    socket
        .set_read_timeout(Some(Duration::from_millis(200)))
        .expect("read timeout");
    node.add_env("NOTIFY_SOCKET", &path.display().to_string());
    node.add_env("WATCHDOG_USEC", "400000");
    node.start().await;

    let mut heard = Vec::new();
    wait_for(&socket, "READY=1", &mut heard);
    // READY comes once the socket serves: a client gets answers now.
    let mut client = node.client().await;
    crate::support::list(&mut client, None).await;
    wait_for(
        &socket,
        "STATUS=serving; sandboxes of the last run recovered",
        &mut heard,
    );
    wait_for(&socket, "WATCHDOG=1", &mut heard);
    drop(client);
    assert!(node.sigterm().await, "the daemon exits cleanly on SIGTERM");
    wait_for(&socket, "STOPPING=1", &mut heard);
    let ready = heard.iter().position(|m| m.contains("READY=1"));
    let stopping = heard.iter().position(|m| m.contains("STOPPING=1"));
    assert!(ready < stopping, "READY before STOPPING: {heard:?}");
}

//! Real CRI clients as they are in the field, over the daemon's socket.
//!
//! Go gRPC of the crictl < 1.31 era sends the socket path as the HTTP/2 `:authority`, which the
//! h2 server rejects unless crio-lite's front repairs it. `go-cri-client` (tests/go-cri-client) is
//! built from Debian's grpc-go 1.33 and dials exactly as crictl 1.26 does.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

use crate::support::{self, FakeCni, FakeNetns};

const NEEDS_GO: &str = "needs Debian's golang-google-grpc-dev: cargo xtask test";

fn go(socket: &Path, authority: Option<&str>, args: &[&str]) -> Output {
    // Built once per test binary, offline, against Debian's packages.
    let client = test_support::go::build(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/go-cri-client"),
        Path::new(env!("CARGO_TARGET_TMPDIR")),
        NEEDS_GO,
    );
    let mut cmd = Command::new(client);
    cmd.arg("-socket").arg(socket).args(["-timeout", "10s"]);
    if let Some(authority) = authority {
        cmd.args(["-authority", authority]);
    }
    cmd.args(args).output().expect("go-cri-client runs")
}

/// Runs the client and parses its JSON line, failing with its stderr.
fn go_ok(socket: &Path, authority: Option<&str>, args: &[&str]) -> Value {
    let out = go(socket, authority, args);
    assert!(
        out.status.success(),
        "go-cri-client {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("go-cri-client prints JSON")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Debian's golang-google-grpc-dev: cargo xtask test"]
async fn crictl_era_go_grpc_client_is_served() {
    let support::Harness { dir, daemon, .. } = support::harness().await;
    let socket = daemon.socket_path().to_owned();
    let calls = tokio::task::spawn_blocking(move || {
        // crictl's way: the socket path is the dial target, so it is the :authority.
        let version = go_ok(&socket, None, &["version"]);
        assert_eq!(version["runtime_name"], "crio-lite");
        assert_eq!(version["runtime_api_version"], "v1");
        let run = go_ok(&socket, None, &["runp", "go-pod", "default", "uid-go"]);
        let id = run["pod_sandbox_id"].as_str().expect("an id").to_owned();
        let pods = go_ok(&socket, None, &["pods"]);
        assert_eq!(pods["items"][0]["id"], id.as_str());
        assert_eq!(pods["items"][0]["name"], "go-pod");
        assert_eq!(go_ok(&socket, None, &["ps"])["containers"], 0);
        go_ok(&socket, None, &["stopp", &id]);
        go_ok(&socket, None, &["rmp", &id]);
        // A client that names a valid authority is served as before.
        let version = go_ok(&socket, Some("localhost"), &["version"]);
        assert_eq!(version["runtime_name"], "crio-lite");
        go_ok(&socket, Some("localhost"), &["pods"])
    })
    .await
    .unwrap();
    assert_eq!(calls["items"].as_array().map(Vec::len), Some(0));
    daemon.shutdown().await.unwrap();
    drop(dir);
}

/// The check that fails without the front: with it switched off, h2 refuses every call of the
/// same client. If this ever passes with the front off, h2 changed and the front can go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Debian's golang-google-grpc-dev: cargo xtask test"]
async fn without_the_front_h2_refuses_the_socket_path_authority() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = support::config(dir.path());
    config.crio_lite.api.normalize_authority = false;
    let cni: std::sync::Arc<dyn ocicni::CniPlugin> = FakeCni::new();
    let daemon = crio_lite::Daemon::start(config, cni, std::sync::Arc::new(FakeNetns))
        .await
        .expect("daemon starts");
    let socket = daemon.socket_path().to_owned();
    let out = tokio::task::spawn_blocking(move || go(&socket, None, &["version"]))
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "served without the front: {stderr}");
    assert!(stderr.contains("PROTOCOL_ERROR"), "{stderr}");
    daemon.shutdown().await.unwrap();
}

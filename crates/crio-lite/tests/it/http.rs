//! CRI-O's status API on the CRI socket, read with the status client and the binary.

use std::process::Command;

use crio_lite::Config;
use crio_lite::http_api::{ContainerInfo, Info};
use crio_lite::status_cmd::{self, OutputFormat, StatusQuery};
use hyper::StatusCode;

use crate::support::{self, Harness, NET, run};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn info_config_containers_and_metrics() {
    let Harness {
        dir,
        cni: _,
        daemon,
        mut client,
    } = support::harness().await;
    let socket = daemon.socket_path().to_owned();
    let id = run(&mut client, "web").await;

    let (code, body) = status_cmd::get(&socket, "/info").await.unwrap();
    assert_eq!(code, StatusCode::OK);
    let info: Info = serde_json::from_str(&body).unwrap();
    assert_eq!(info.runtime_name, "crio-lite");
    assert_eq!(info.network_dir, dir.path().join("net.d"));
    assert_eq!(info.plugin_dirs, Config::default().crio.network.plugin_dirs);
    assert_eq!(info.default_network.as_deref(), Some(NET));
    assert_eq!(info.state_dir, dir.path().join("state"));
    assert_eq!(info.netns_dir, dir.path().join("run/netns"));
    assert_eq!(info.storage_root, dir.path().join("state/storage"));
    assert!(
        matches!(info.storage_driver.as_deref(), Some("overlay" | "vfs")),
        "{:?}",
        info.storage_driver
    );
    assert_eq!(info.signature_policy, Some(dir.path().join("policy.json")));
    assert_eq!(info.builtin_plugins, "prefer-binary");

    let (code, body) = status_cmd::get(&socket, "/config").await.unwrap();
    assert_eq!(code, StatusCode::OK);
    assert_eq!(
        Config::from_toml(&body, "/config").unwrap(),
        support::config(dir.path())
    );

    let (code, body) = status_cmd::get(&socket, &format!("/containers/{id}"))
        .await
        .unwrap();
    assert_eq!(code, StatusCode::OK, "{body}");
    let sandbox: ContainerInfo = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (sandbox.name.as_str(), sandbox.namespace.as_str()),
        ("web", "default")
    );
    assert_eq!(sandbox.state, "ready");
    assert_eq!(
        sandbox.ips,
        vec![
            "10.88.0.2".parse::<std::net::IpAddr>().unwrap(),
            "fd00::2".parse().unwrap()
        ]
    );
    assert_eq!(
        sandbox.netns_path,
        Some(dir.path().join("run/netns").join(&id))
    );
    assert_eq!(sandbox.networks[0].network, NET);

    let (code, body) = status_cmd::get(&socket, &format!("/containers/{}", "f".repeat(64)))
        .await
        .unwrap();
    assert_eq!(code, StatusCode::NOT_FOUND);
    assert!(body.contains("not found"), "{body}");
    let (code, body) = status_cmd::get(&socket, "/nothing-here").await.unwrap();
    assert_eq!(code, StatusCode::NOT_FOUND);
    assert!(body.contains("/info"), "{body}");

    // The plugin-latency family shows up once whatever runs plugins feeds it.
    daemon.metrics().observe_cni_plugin(
        NET,
        "bridge",
        ocicni::Implementation::Binary,
        "ADD",
        std::time::Duration::from_millis(30),
    );
    let (code, metrics) = status_cmd::get(&socket, "/metrics").await.unwrap();
    assert_eq!(code, StatusCode::OK);
    for line in [
        r#"crio_lite_sandbox_operations_total{operation="run",outcome="success"} 1"#,
        "crio_lite_sandboxes_ready 1",
        "# TYPE crio_lite_cni_plugin_duration_seconds histogram",
        r#"crio_lite_cni_plugin_duration_seconds_count{network="fakenet",plugin="bridge",implementation="binary",command="ADD"} 1"#,
    ] {
        assert!(
            metrics.lines().any(|l| l == line),
            "{line:?} missing in\n{metrics}"
        );
    }
    daemon.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_subcommand_reads_the_socket() {
    let Harness {
        dir,
        cni: _,
        daemon,
        mut client,
    } = support::harness().await;
    let socket = daemon.socket_path().to_owned();
    let id = run(&mut client, "web").await;

    let out = status_cmd::run(
        &socket,
        &StatusQuery::Containers {
            id: id[..12].to_owned(),
        },
        OutputFormat::Json,
    )
    .await
    .unwrap();
    let sandbox: ContainerInfo = serde_json::from_str(&out).unwrap();
    assert_eq!(sandbox.id, id, "a unique prefix finds the sandbox");
    let err = status_cmd::run(
        &socket,
        &StatusQuery::Containers { id: "0".repeat(64) },
        OutputFormat::Table,
    )
    .await
    .unwrap_err();
    assert!(
        err.to_string().contains("404") && err.to_string().contains("not found"),
        "{err}"
    );
    let err = status_cmd::run(
        &socket,
        &StatusQuery::Containers {
            id: "../info".into(),
        },
        OutputFormat::Table,
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("not a sandbox ID"), "{err}");

    // The binary, as an operator runs it; blocking, so off the runtime's workers.
    let socket_arg = socket.clone();
    let output = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_crio-lite"))
            .args(["status", "info", "--output", "json", "--socket"])
            .arg(&socket_arg)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let info: Info = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(info.socket, socket);

    let socket_arg = socket.clone();
    let output = tokio::task::spawn_blocking(move || {
        // No --socket: the socket is the configuration's crio.api.listen.
        Command::new(env!("CARGO_BIN_EXE_crio-lite"))
            .args(["--config", "", "--config-dir", "", "--listen"])
            .arg(&socket_arg)
            .args(["status", "config"])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8(output.stdout).unwrap();
    assert_eq!(
        Config::from_toml(&text, "stdout").unwrap(),
        support::config(dir.path())
    );
    daemon.shutdown().await.unwrap();

    let missing = dir.path().join("gone.sock");
    let err = status_cmd::run(&missing, &StatusQuery::Info, OutputFormat::Table)
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("gone.sock") && err.to_string().contains("is crio-lite running"),
        "{err}"
    );
}

/// `GET /metrics` with this `Accept` header, over the socket: (content type, body).
async fn scrape(socket: &std::path::Path, accept: &str) -> (String, String) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut stream = tokio::net::UnixStream::connect(socket).await.unwrap();
    let request = format!(
        "GET /metrics HTTP/1.1\r\nHost: localhost\r\nAccept: {accept}\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).await.unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").expect("an HTTP response");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let content_type = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-type: ")
                .map(str::to_owned)
        })
        .expect("a content type");
    (content_type, body.to_owned())
}

/// CRI calls are counted by method under CRI-O's names; the text is Prometheus 0.0.4 unless the
/// scraper asks for OpenMetrics.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_cri_calls_in_the_format_asked_for() {
    let Harness {
        dir: _dir,
        cni: _,
        daemon,
        mut client,
    } = support::harness().await;
    let socket = daemon.socket_path().to_owned();
    run(&mut client, "web").await;
    let missing = client
        .pod_sandbox_status(support::status_request(&"0".repeat(64), false))
        .await;
    assert!(missing.is_err());

    let (content_type, text) = scrape(&socket, "text/plain").await;
    assert_eq!(content_type, "text/plain; version=0.0.4; charset=utf-8");
    for line in [
        "# TYPE crio_operations_total counter",
        r#"crio_operations_total{operation_type="RunPodSandbox"} 1"#,
        r#"crio_operations_total{operation_type="PodSandboxStatus"} 1"#,
        r#"crio_operations_errors_total{operation_type="PodSandboxStatus"} 1"#,
        r#"crio_operations_latency_seconds_count{operation_type="RunPodSandbox"} 1"#,
        "# TYPE crio_operations_latency_seconds histogram",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "{line:?} missing in\n{text}"
        );
    }
    assert!(
        !text.contains(r#"crio_operations_errors_total{operation_type="RunPodSandbox"}"#),
        "a successful call is no error:\n{text}"
    );
    assert!(!text.contains("# EOF"), "{text}");

    let (content_type, text) = scrape(
        &socket,
        "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5",
    )
    .await;
    assert_eq!(
        content_type,
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    assert!(
        text.lines().any(|l| l == "# TYPE crio_operations counter"),
        "{text}"
    );
    assert!(text.trim_end().ends_with("# EOF"), "{text}");
    daemon.shutdown().await.unwrap();
}

/// A real scraper's linter reads what `/metrics` serves: promtool (Debian's prometheus) finds no
/// problem in it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs promtool (Debian's prometheus package): cargo xtask test"]
async fn promtool_accepts_the_metrics() {
    use std::io::Write as _;
    let Harness {
        dir: _dir,
        cni: _,
        daemon,
        mut client,
    } = support::harness().await;
    run(&mut client, "web").await;
    daemon.metrics().observe_cni_plugin(
        NET,
        "bridge",
        ocicni::Implementation::Binary,
        "ADD",
        std::time::Duration::from_millis(30),
    );
    let (_, text) = scrape(daemon.socket_path(), "text/plain").await;
    let mut promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run promtool (apt-get install prometheus; cargo xtask test does)");
    promtool
        .stdin
        .take()
        .expect("promtool's stdin")
        .write_all(text.as_bytes())
        .expect("feed promtool");
    let out = promtool.wait_with_output().expect("promtool's verdict");
    assert!(
        out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
        "promtool check metrics: {}\n{}\n{text}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    daemon.shutdown().await.unwrap();
}

/// `GET path` over TCP with `Connection: close`: (status line, body).
async fn tcp_get(address: std::net::SocketAddr, path: &str) -> (String, String) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).await.unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").expect("an HTTP response");
    (
        head.lines().next().unwrap_or_default().to_owned(),
        body.to_owned(),
    )
}

/// With `enable_metrics`, a Prometheus server scrapes `metrics_host:metrics_port` (port 0: the
/// system picks one); nothing else of the daemon is reachable there. A port already taken fails
/// the start, naming it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_served_over_tcp_when_enabled() {
    let dir = tempfile::tempdir().unwrap();
    let cni = support::FakeCni::new();
    let mut config = support::config(dir.path());
    config.crio.metrics.enable_metrics = true;
    config.crio.metrics.metrics_host = "127.0.0.1".to_owned();
    config.crio.metrics.metrics_port = 0;
    let metrics_socket = dir.path().join("run/metrics.sock");
    config.crio.metrics.metrics_socket = metrics_socket.clone();
    let daemon = crio_lite::Daemon::start(
        config,
        std::sync::Arc::clone(&cni) as std::sync::Arc<dyn ocicni::CniPlugin>,
        std::sync::Arc::new(support::FakeNetns),
    )
    .await
    .expect("daemon starts");
    let address = daemon.metrics_address().expect("a TCP metrics address");
    assert!(
        address.ip().is_loopback() && address.port() != 0,
        "{address}"
    );
    let (status, body) = tcp_get(address, "/metrics").await;
    assert!(status.contains("200"), "{status}");
    assert!(
        body.contains("# TYPE crio_lite_sandboxes_ready gauge"),
        "{body}"
    );
    let (status, _) = tcp_get(address, "/info").await;
    assert!(status.contains("404"), "only /metrics over TCP: {status}");
    // And on metrics_socket, a unix socket of its own.
    let (content_type, body) = scrape(&metrics_socket, "text/plain").await;
    assert_eq!(content_type, "text/plain; version=0.0.4; charset=utf-8");
    assert!(
        body.contains("# TYPE crio_lite_sandboxes_ready gauge"),
        "{body}"
    );

    // A second daemon asking for the same port cannot have it.
    let other = tempfile::tempdir().unwrap();
    let mut taken = support::config(other.path());
    taken.crio.metrics.enable_metrics = true;
    taken.crio.metrics.metrics_host = "127.0.0.1".to_owned();
    taken.crio.metrics.metrics_port = address.port();
    let err = crio_lite::Daemon::start(
        taken,
        std::sync::Arc::clone(&cni) as std::sync::Arc<dyn ocicni::CniPlugin>,
        std::sync::Arc::new(support::FakeNetns),
    )
    .await
    .expect_err("the port is taken");
    assert!(err.to_string().contains(&address.to_string()), "{err}");
    daemon.shutdown().await.unwrap();
    assert!(
        tokio::net::TcpStream::connect(address).await.is_err(),
        "the listener closes with the daemon"
    );
    assert!(
        !metrics_socket.exists(),
        "the metrics socket goes with the daemon"
    );
}

/// `crio-lite status` as a person reads it (a table by default) and as a program does (JSON,
/// YAML), the sandbox listing included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_prints_tables_json_and_yaml() {
    let Harness {
        dir: _dir,
        cni: _,
        daemon,
        mut client,
    } = support::harness().await;
    let socket = daemon.socket_path().to_owned();
    let web = run(&mut client, "web").await;
    let db = run(&mut client, "db").await;
    let status = |args: &'static [&'static str]| {
        let socket = socket.clone();
        tokio::task::spawn_blocking(move || {
            let out = Command::new(env!("CARGO_BIN_EXE_crio-lite"))
                .arg("status")
                .arg("--socket")
                .arg(&socket)
                .args(args)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8(out.stdout).unwrap()
        })
    };

    let table = status(&["sandboxes"]).await.unwrap();
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 3, "a header and a row a sandbox:\n{table}");
    assert!(
        lines[0].starts_with("ID") && lines[0].contains("NAMESPACE"),
        "{table}"
    );
    assert!(
        lines[1].starts_with(&web) && lines[1].contains("web"),
        "{table}"
    );
    assert!(
        lines[2].starts_with(&db) && lines[2].contains("ready"),
        "{table}"
    );

    let json = status(&["sandboxes", "-o", "json"]).await.unwrap();
    let listed: Vec<crio_lite::http_api::SandboxSummary> = serde_json::from_str(&json).unwrap();
    assert_eq!(
        listed.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(),
        [web.as_str(), db.as_str()],
        "oldest first"
    );

    let yaml = status(&["info", "-o", "yaml"]).await.unwrap();
    assert!(
        yaml.lines().any(|l| l == "runtime_name: \"crio-lite\""),
        "{yaml}"
    );
    let info_table = status(&["info"]).await.unwrap();
    assert!(
        info_table
            .lines()
            .any(|l| l.starts_with("runtime_name") && l.ends_with("crio-lite")),
        "{info_table}"
    );
    let config_json = status(&["config", "-o", "json"]).await.unwrap();
    let config: serde_json::Value = serde_json::from_str(&config_json).unwrap();
    assert_eq!(
        config["crio"]["api"]["listen"],
        socket.display().to_string()
    );
    daemon.shutdown().await.unwrap();
}

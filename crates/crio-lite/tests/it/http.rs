//! CRI-O's status API on the CRI socket, read with the status client and the binary.

use std::process::Command;

use crio_lite::Config;
use crio_lite::http_api::{ContainerInfo, Info};
use crio_lite::status_cmd::{self, StatusQuery};
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
    daemon
        .metrics()
        .observe_cni_plugin(NET, "bridge", "ADD", std::time::Duration::from_millis(30));
    let (code, metrics) = status_cmd::get(&socket, "/metrics").await.unwrap();
    assert_eq!(code, StatusCode::OK);
    for line in [
        r#"crio_lite_sandbox_operations_total{operation="run",outcome="success"} 1"#,
        "crio_lite_sandboxes_ready 1",
        "# TYPE crio_lite_cni_plugin_duration_seconds histogram",
        r#"crio_lite_cni_plugin_duration_seconds_count{network="fakenet",plugin="bridge",command="ADD"} 1"#,
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
    )
    .await
    .unwrap();
    let sandbox: ContainerInfo = serde_json::from_str(&out).unwrap();
    assert_eq!(sandbox.id, id, "a unique prefix finds the sandbox");
    let err = status_cmd::run(&socket, &StatusQuery::Containers { id: "0".repeat(64) })
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
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("not a sandbox ID"), "{err}");

    // The binary, as an operator runs it; blocking, so off the runtime's workers.
    let socket_arg = socket.clone();
    let output = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_crio-lite"))
            .args(["status", "info", "--socket"])
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
    let err = status_cmd::run(&missing, &StatusQuery::Info)
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("gone.sock") && err.to_string().contains("is crio-lite running"),
        "{err}"
    );
}

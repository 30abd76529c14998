//! Invalid requests, refused RPCs, runtime status and runtime config through the socket.

use cri_api::v1 as cri;
use ocicni::NetworkStatus;
use test_support::fs::file_names;
use tonic::Code;

use crate::support::{self, Call, Harness, pod};

fn with_mapping(mapping: cri::PortMapping) -> cri::RunPodSandboxRequest {
    let mut request = pod("web");
    request.config.as_mut().unwrap().port_mappings = vec![mapping];
    request
}

/// RunPodSandbox requests that are wrong in one field each, with the start of the message that
/// must name it.
fn invalid_requests() -> Vec<(cri::RunPodSandboxRequest, &'static str)> {
    let tcp = |container_port, host_port| cri::PortMapping {
        protocol: cri::Protocol::Tcp as i32,
        container_port,
        host_port,
        host_ip: String::new(),
    };
    let mut no_metadata = pod("web");
    no_metadata.config.as_mut().unwrap().metadata = None;
    let mut no_name = pod("web");
    no_name
        .config
        .as_mut()
        .unwrap()
        .metadata
        .as_mut()
        .unwrap()
        .name
        .clear();
    let mut no_namespace = pod("web");
    no_namespace
        .config
        .as_mut()
        .unwrap()
        .metadata
        .as_mut()
        .unwrap()
        .namespace
        .clear();
    let mut bad_dns = pod("web");
    bad_dns
        .config
        .as_mut()
        .unwrap()
        .dns_config
        .as_mut()
        .unwrap()
        .servers = vec!["dns.example".into()];
    let mut handler = pod("web");
    handler.runtime_handler = "kata".into();

    vec![
        (
            cri::RunPodSandboxRequest {
                config: None,
                runtime_handler: String::new(),
            },
            "config: missing",
        ),
        (no_metadata, "config.metadata: missing"),
        (no_name, "config.metadata.name: empty"),
        (no_namespace, "config.metadata.namespace: empty"),
        (
            with_mapping(tcp(0, 8080)),
            "config.port_mappings[0].container_port: 0 is not a port",
        ),
        (
            with_mapping(tcp(65_536, 8080)),
            "config.port_mappings[0].container_port: 65536 is not a port",
        ),
        (
            with_mapping(tcp(80, 70_000)),
            "config.port_mappings[0].host_port: 70000 is not a port",
        ),
        (
            with_mapping(tcp(80, -1)),
            "config.port_mappings[0].host_port: -1 is not a port",
        ),
        (
            with_mapping(cri::PortMapping {
                protocol: 7,
                ..tcp(80, 8080)
            }),
            "config.port_mappings[0].protocol: unknown protocol 7",
        ),
        (
            with_mapping(cri::PortMapping {
                host_ip: "localhost".into(),
                ..tcp(80, 8080)
            }),
            "config.port_mappings[0].host_ip",
        ),
        (bad_dns, "config.dns_config.servers[0]"),
        (
            handler,
            "runtime_handler: unknown runtime handler \"kata\": this node has crun, runc",
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_requests_name_the_field() {
    let Harness {
        dir,
        cni,
        daemon,
        mut client,
    } = support::harness().await;

    for (request, expected) in invalid_requests() {
        let err = client.run_pod_sandbox(request).await.unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{expected}: {err:?}");
        assert!(
            err.message().starts_with(expected),
            "expected {expected:?}, got {:?}",
            err.message()
        );
    }
    assert!(
        cni.summary().iter().all(|c| !c.starts_with("setup")),
        "{:?}",
        cni.summary()
    );
    assert_eq!(
        file_names(&dir.path().join("state/sandboxes")),
        Vec::<String>::new()
    );

    let unknown = "0".repeat(64);
    let err = client
        .pod_sandbox_status(support::status_request(&unknown, false))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    assert!(err.message().contains(&unknown), "{}", err.message());

    let err = client
        .pod_sandbox_status(support::status_request("", false))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message().starts_with("pod_sandbox_id"),
        "{}",
        err.message()
    );
    let err = client
        .stop_pod_sandbox(support::stop_request(""))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);

    // Stop and remove of unknown IDs succeed: the CRI makes them idempotent.
    client
        .stop_pod_sandbox(support::stop_request(&unknown))
        .await
        .unwrap();
    client
        .remove_pod_sandbox(support::remove_request(&unknown))
        .await
        .unwrap();

    let err = client
        .update_runtime_config(cri::UpdateRuntimeConfigRequest {
            runtime_config: Some(cri::RuntimeConfig {
                network_config: Some(cri::NetworkConfig {
                    pod_cidr: "10.0.0.0/33".into(),
                }),
            }),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message()
            .starts_with("runtime_config.network_config.pod_cidr"),
        "{}",
        err.message()
    );

    // kubelet takes its cgroup driver from RuntimeConfig: the node's default manager here.
    let config = client
        .runtime_config(cri::RuntimeConfigRequest {})
        .await
        .unwrap()
        .into_inner();
    let expected = if oci_container::systemd_is_init() {
        cri::CgroupDriver::Systemd
    } else {
        cri::CgroupDriver::Cgroupfs
    };
    assert_eq!(
        config.linux.map(|linux| linux.cgroup_driver),
        Some(expected as i32)
    );
    daemon.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn container_rpcs_and_streaming_requests_are_checked() {
    let Harness {
        dir: _dir,
        cni: _,
        daemon,
        mut client,
    } = support::harness().await;
    let mut images = support::image_client(daemon.socket_path()).await;

    check_empty_container_requests(&mut client).await;
    check_streaming_requests(&mut client).await;
    let refusals = [client
        .get_container_events(cri::GetEventsRequest::default())
        .await
        .unwrap_err()];
    for err in refusals {
        assert_eq!(err.code(), Code::Unimplemented, "{err:?}");
        assert!(
            err.message().contains("not served yet"),
            "{}",
            err.message()
        );
    }
    // What kubelet and crictl ps/stats/statsp poll: empty lists, not errors.
    let containers = client
        .list_containers(cri::ListContainersRequest::default())
        .await
        .expect("ListContainers answers")
        .into_inner();
    assert!(containers.containers.is_empty());
    let stats = client
        .list_container_stats(cri::ListContainerStatsRequest::default())
        .await
        .expect("ListContainerStats answers")
        .into_inner();
    assert!(stats.stats.is_empty());
    let pod_stats = client
        .list_pod_sandbox_stats(cri::ListPodSandboxStatsRequest::default())
        .await
        .expect("ListPodSandboxStats answers")
        .into_inner();
    assert!(pod_stats.stats.is_empty());
    let err = images
        .pull_image(cri::PullImageRequest::default())
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message().contains("image is required"),
        "{}",
        err.message()
    );

    assert!(
        images
            .list_images(cri::ListImagesRequest::default())
            .await
            .unwrap()
            .into_inner()
            .images
            .is_empty()
    );
    images
        .image_fs_info(cri::ImageFsInfoRequest::default())
        .await
        .unwrap();

    let version = client
        .version(cri::VersionRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(version.runtime_name, "crio-lite");
    assert_eq!(version.runtime_api_version, "v1");
    daemon.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_reports_network_readiness_from_ocicni() {
    let Harness {
        dir: _dir,
        cni,
        daemon,
        mut client,
    } = support::harness().await;

    let condition = |status: &cri::StatusResponse, kind: &str| {
        status
            .status
            .as_ref()
            .unwrap()
            .conditions
            .iter()
            .find(|c| c.r#type == kind)
            .cloned()
            .unwrap()
    };
    let ready = client
        .status(cri::StatusRequest { verbose: false })
        .await
        .unwrap()
        .into_inner();
    assert!(condition(&ready, "RuntimeReady").status);
    assert!(condition(&ready, "NetworkReady").status);
    assert!(ready.info.is_empty(), "info only when verbose");

    cni.set_not_ready(NetworkStatus::not_ready(
        "NetworkPluginNotReady",
        "no CNI configuration file in /etc/cni/net.d",
    ));
    let not_ready = client
        .status(cri::StatusRequest { verbose: true })
        .await
        .unwrap()
        .into_inner();
    assert!(condition(&not_ready, "RuntimeReady").status);
    let network = condition(&not_ready, "NetworkReady");
    assert!(!network.status);
    assert_eq!(network.reason, "NetworkPluginNotReady");
    assert_eq!(
        network.message,
        "no CNI configuration file in /etc/cni/net.d"
    );
    let info: serde_json::Value = serde_json::from_str(&not_ready.info["network"]).unwrap();
    assert_eq!(info["ready"], false);
    assert_eq!(info["defaultNetwork"], support::NET);
    let config: serde_json::Value = serde_json::from_str(&not_ready.info["config"]).unwrap();
    assert_eq!(
        config["crio_lite"]["network"]["cni_args_policy"],
        "kubernetes"
    );
    daemon.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_cidr_and_reload_reach_ocicni() {
    let Harness {
        dir: _dir,
        cni,
        daemon,
        mut client,
    } = support::harness().await;
    let update = |cidr: &str| cri::UpdateRuntimeConfigRequest {
        runtime_config: Some(cri::RuntimeConfig {
            network_config: Some(cri::NetworkConfig {
                pod_cidr: cidr.to_owned(),
            }),
        }),
    };
    client
        .update_runtime_config(update("10.244.1.0/24,fd00:1::/64"))
        .await
        .unwrap();
    client.update_runtime_config(update("")).await.unwrap();
    daemon.reload().await.unwrap();
    daemon.shutdown().await.unwrap();
    let calls: Vec<Call> = cni
        .calls()
        .into_iter()
        .filter(|c| !matches!(c, Call::Gc(_)))
        .collect();
    assert_eq!(
        calls,
        vec![
            Call::SetPodCidr(Some("10.244.1.0/24".parse().unwrap())),
            Call::SetPodCidr(None),
            Call::Reload,
            Call::Shutdown,
        ]
    );
}

/// Two sandboxes claiming one host port used to both succeed, the second one's mapping shadowed
/// until the first went. The second claim is refused, naming the port and the holder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_port_is_held_by_one_sandbox_at_a_time() {
    let Harness {
        dir: _dir,
        cni: _,
        daemon,
        mut client,
    } = support::harness().await;
    let mapping = |protocol: cri::Protocol, host_ip: &str| cri::PortMapping {
        protocol: protocol as i32,
        container_port: 80,
        host_port: 8080,
        host_ip: host_ip.to_owned(),
    };
    let named = |name: &str, m: cri::PortMapping| {
        let mut request = with_mapping(m);
        request
            .config
            .as_mut()
            .unwrap()
            .metadata
            .as_mut()
            .unwrap()
            .name = name.to_owned();
        request
    };
    let holder = client
        .run_pod_sandbox(named("holder", mapping(cri::Protocol::Tcp, "")))
        .await
        .unwrap()
        .into_inner()
        .pod_sandbox_id;
    for (name, m) in [
        ("same", mapping(cri::Protocol::Tcp, "")),
        ("one-ip", mapping(cri::Protocol::Tcp, "127.0.0.1")),
    ] {
        let err = client.run_pod_sandbox(named(name, m)).await.unwrap_err();
        assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
        assert!(
            err.message().contains("host port 8080/tcp"),
            "{}",
            err.message()
        );
        assert!(err.message().contains(&holder), "{}", err.message());
    }
    // Another protocol is another port.
    client
        .run_pod_sandbox(named("udp", mapping(cri::Protocol::Udp, "")))
        .await
        .expect("udp/8080 is free");
    // Once the holder is gone the port is free again.
    client
        .stop_pod_sandbox(support::stop_request(&holder))
        .await
        .unwrap();
    client
        .remove_pod_sandbox(support::remove_request(&holder))
        .await
        .unwrap();
    client
        .run_pod_sandbox(named("next", mapping(cri::Protocol::Tcp, "")))
        .await
        .expect("tcp/8080 is free once its holder is removed");
    daemon.shutdown().await.unwrap();
}

/// A few sandboxes with megabyte annotations made ListPodSandbox larger than clients accept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_metadata_is_refused_at_creation() {
    let Harness {
        dir,
        cni: _,
        daemon,
        mut client,
    } = support::harness().await;
    let mut request = pod("big");
    request
        .config
        .as_mut()
        .unwrap()
        .annotations
        .insert("blob".into(), "x".repeat(300 * 1024));
    let err = client.run_pod_sandbox(request).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    assert!(
        err.message().contains("config.annotations"),
        "{}",
        err.message()
    );
    assert!(file_names(&dir.path().join("state/sandboxes")).is_empty());
    let mut request = pod("fits");
    request
        .config
        .as_mut()
        .unwrap()
        .annotations
        .insert("blob".into(), "x".repeat(200 * 1024));
    client.run_pod_sandbox(request).await.expect("200 KiB fits");
    daemon.shutdown().await.unwrap();
}

/// Pod sysctls used to be ignored silently. Network ones are set in the pod's namespace before its
/// network; anything else is refused naming the key, before anything is created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn network_sysctls_are_applied_ipc_ones_kept_for_containers_and_others_refused() {
    let Harness {
        dir,
        cni,
        daemon,
        mut client,
    } = support::harness().await;
    let with_sysctls = |name: &str, pairs: &[(&str, &str)]| {
        let mut request = pod(name);
        let config = request.config.as_mut().unwrap();
        config.linux.get_or_insert_default().sysctls = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        request
    };
    for (key, why) in [
        ("kernel.hostname", "only network sysctls"),
        ("net/../../etc/passwd", "'..'"),
    ] {
        let err = client
            .run_pod_sandbox(with_sysctls("bad", &[(key, "1")]))
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
        assert!(err.message().contains(key), "{}", err.message());
        assert!(err.message().contains(why), "{}", err.message());
    }
    assert!(file_names(&dir.path().join("state/sandboxes")).is_empty());
    assert!(cni.summary().iter().all(|c| !c.starts_with("setup")));

    let id = client
        .run_pod_sandbox(with_sysctls(
            "tuned",
            &[
                ("net.ipv4.ip_unprivileged_port_start", "0"),
                ("kernel.shm_rmid_forced", "1"),
            ],
        ))
        .await
        .unwrap()
        .into_inner()
        .pod_sandbox_id;
    // The network one is written in the pod's network namespace; the IPC one is its
    // containers' (the containers tests read it in one).
    let pin = std::fs::read_to_string(dir.path().join("run/netns").join(&id)).unwrap();
    assert_eq!(pin, "net.ipv4.ip_unprivileged_port_start=0\n");
    let mut host_ipc = with_sysctls("hostipc", &[("kernel.shm_rmid_forced", "1")]);
    host_ipc
        .config
        .as_mut()
        .unwrap()
        .linux
        .get_or_insert_default()
        .security_context
        .get_or_insert_default()
        .namespace_options
        .get_or_insert_default()
        .ipc = cri::NamespaceMode::Node as i32;
    let err = client.run_pod_sandbox(host_ipc).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    assert!(
        err.message().contains("node's IPC namespace"),
        "{}",
        err.message()
    );
    daemon.shutdown().await.unwrap();
}

/// Container calls with nothing in them name what is missing; an unknown container is NotFound.
async fn check_empty_container_requests(
    client: &mut cri_api::v1::runtime_service_client::RuntimeServiceClient<
        tonic::transport::Channel,
    >,
) {
    let empty = [
        (
            client
                .create_container(cri::CreateContainerRequest::default())
                .await
                .unwrap_err(),
            "pod_sandbox_id: empty",
        ),
        (
            client
                .start_container(cri::StartContainerRequest::default())
                .await
                .unwrap_err(),
            "container_id: empty",
        ),
        (
            client
                .exec_sync(cri::ExecSyncRequest::default())
                .await
                .unwrap_err(),
            "cmd: empty",
        ),
    ];
    for (err, wanted) in empty {
        assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
        assert!(err.message().starts_with(wanted), "{}", err.message());
    }
    let missing = client
        .container_status(cri::ContainerStatusRequest {
            container_id: "f00d".into(),
            verbose: false,
        })
        .await
        .unwrap_err();
    assert_eq!(missing.code(), Code::NotFound);
    assert!(
        missing.message().contains("\"f00d\""),
        "{}",
        missing.message()
    );
}

/// Streaming requests are checked before a URL is handed out.
async fn check_streaming_requests(
    client: &mut cri_api::v1::runtime_service_client::RuntimeServiceClient<
        tonic::transport::Channel,
    >,
) {
    let err = client.exec(cri::ExecRequest::default()).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    assert!(
        err.message().contains("one of stdin, stdout and stderr"),
        "{}",
        err.message()
    );
    let err = client
        .exec(cri::ExecRequest {
            container_id: "0".repeat(64),
            cmd: vec!["sh".into()],
            tty: true,
            stdin: true,
            stdout: true,
            stderr: true,
        })
        .await
        .unwrap_err();
    assert!(
        err.message().contains("tty and stderr"),
        "{}",
        err.message()
    );
    let err = client
        .attach(cri::AttachRequest {
            container_id: "0".repeat(64),
            stdout: true,
            ..cri::AttachRequest::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound, "{err:?}");
    let err = client
        .port_forward(cri::PortForwardRequest {
            pod_sandbox_id: "0".repeat(64),
            port: vec![70000],
        })
        .await
        .unwrap_err();
    assert!(
        err.message().contains("70000 is not a port"),
        "{}",
        err.message()
    );
}

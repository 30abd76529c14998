//! The whole sandbox lifecycle through the socket, and concurrent creation.

use std::collections::HashSet;
use std::os::unix::fs::PermissionsExt as _;

use cri_api::v1 as cri;
use cri_api::v1::runtime_service_client::RuntimeServiceClient;
use test_support::fs::file_names;
use tonic::Code;
use tonic::transport::Channel;

use crate::support::{self, Call, FakeCni, Harness, NET, ips, labels, list, pod, run, status};

/// What ocicni was asked for: this pod, its namespace, its port mapping, cgroup and annotations.
fn assert_setup_asked_for(cni: &FakeCni, id: &str, netns: &std::path::Path) {
    let Some(Call::Setup(setup)) = cni
        .calls()
        .into_iter()
        .find(|c| matches!(c, Call::Setup(_)))
    else {
        panic!("no setup: {:?}", cni.summary());
    };
    assert_eq!(
        (
            setup.name.as_str(),
            setup.namespace.as_str(),
            setup.uid.as_str()
        ),
        ("web", "default", "uid-web")
    );
    assert_eq!(setup.id, id);
    assert_eq!(setup.netns, netns.to_string_lossy());
    let rc = support::runtime_config_of(&setup);
    assert_eq!(rc.port_mappings.len(), 1);
    assert_eq!(
        (
            rc.port_mappings[0].host_port,
            rc.port_mappings[0].container_port
        ),
        (u16::try_from(support::host_port_of("web")).unwrap(), 80)
    );
    assert_eq!(rc.port_mappings[0].protocol, "tcp");
    assert_eq!(rc.cgroup_path.as_deref(), Some("/kubepods/pod-web"));
    assert_eq!(
        rc.pod_annotations.get("team").map(String::as_str),
        Some("net")
    );
}

/// The ready pod's status, plain and verbose (the CNI results as JSON).
async fn assert_ready_status(client: &mut RuntimeServiceClient<Channel>, id: &str) {
    let st = status(client, id).await;
    assert_eq!(st.state, cri::PodSandboxState::SandboxReady as i32);
    assert!(st.created_at > 0);
    assert_eq!(ips(&st), vec!["10.88.0.2".to_owned(), "fd00::2".to_owned()]);
    assert_eq!(st.metadata.as_ref().map(|m| m.name.as_str()), Some("web"));
    assert_eq!(st.labels, labels(&[("app", "web")]));
    assert_eq!(st.annotations, labels(&[("team", "net")]));
    let options = st.linux.unwrap().namespaces.unwrap().options.unwrap();
    assert_eq!(options.network, cri::NamespaceMode::Pod as i32);

    // Verbose status carries the CNI results as JSON.
    let verbose = client
        .pod_sandbox_status(support::status_request(id, true))
        .await
        .unwrap()
        .into_inner();
    let info: serde_json::Value = serde_json::from_str(&verbose.info["info"]).unwrap();
    assert_eq!(info["attachments"][0]["network"], NET);
    assert_eq!(
        info["attachments"][0]["result"]["ips"][0]["address"],
        "10.88.0.2/16"
    );
}

fn filter(
    id: &str,
    state: Option<cri::PodSandboxState>,
    sel: &[(&str, &str)],
) -> cri::PodSandboxFilter {
    cri::PodSandboxFilter {
        id: id.to_owned(),
        state: state.map(|s| cri::PodSandboxStateValue { state: s as i32 }),
        label_selector: labels(sel),
    }
}

fn ids(items: Vec<cri::PodSandbox>) -> Vec<String> {
    items.into_iter().map(|p| p.id).collect()
}

/// With two ready pods, `web` (`id`) and `db` (`other`), each filter picks what it should.
async fn assert_filters_pick(client: &mut RuntimeServiceClient<Channel>, id: &str, other: &str) {
    assert_eq!(
        ids(list(&mut *client, None).await),
        vec![id.to_owned(), other.to_owned()]
    );
    assert_eq!(
        ids(list(&mut *client, Some(filter(&id[..8], None, &[]))).await),
        vec![id.to_owned()]
    );
    assert_eq!(
        ids(list(&mut *client, Some(filter("", None, &[("app", "db")]))).await),
        vec![other.to_owned()]
    );
    assert_eq!(
        ids(list(&mut *client, Some(filter("", None, &[("app", "nope")]))).await),
        Vec::<String>::new()
    );
    let ready = Some(cri::PodSandboxState::SandboxReady);
    let not_ready = Some(cri::PodSandboxState::SandboxNotready);
    assert_eq!(
        list(&mut *client, Some(filter("", ready, &[]))).await.len(),
        2
    );
    assert!(
        list(&mut *client, Some(filter("", not_ready, &[])))
            .await
            .is_empty()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_status_list_stop_remove() {
    let Harness {
        dir,
        cni,
        daemon,
        mut client,
    } = support::harness().await;
    let mode = std::fs::metadata(daemon.socket_path())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o660, "socket mode {mode:o}");

    let id = run(&mut client, "web").await;
    assert_eq!(id.len(), 64);
    assert!(id.bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
    let netns = dir.path().join("run/netns").join(&id);
    assert!(
        netns.exists(),
        "the namespace is pinned at {}",
        netns.display()
    );
    assert!(
        dir.path()
            .join("state/sandboxes")
            .join(format!("{id}.json"))
            .exists()
    );

    assert_setup_asked_for(&cni, &id, &netns);
    assert_ready_status(&mut client, &id).await;

    // A second pod, to see the filters pick one.
    let other = run(&mut client, "db").await;
    assert_filters_pick(&mut client, &id, &other).await;
    let not_ready = Some(cri::PodSandboxState::SandboxNotready);

    // Stop: network gone, namespace kept, state NotReady; stopping again changes nothing.
    client
        .stop_pod_sandbox(support::stop_request(&id))
        .await
        .unwrap();
    assert!(
        !cni.leases().contains_key(&id),
        "the lease is released at stop"
    );
    assert!(netns.exists(), "the namespace stays until removal");
    assert_eq!(
        status(&mut client, &id).await.state,
        cri::PodSandboxState::SandboxNotready as i32
    );
    assert_eq!(
        ids(list(&mut client, Some(filter("", not_ready, &[]))).await),
        vec![id.clone()]
    );
    let teardowns = || {
        cni.summary()
            .iter()
            .filter(|c| c.starts_with("teardown"))
            .count()
    };
    assert_eq!(teardowns(), 1);
    client
        .stop_pod_sandbox(support::stop_request(&id))
        .await
        .unwrap();
    assert_eq!(teardowns(), 1, "a second stop does not tear down again");

    // Remove: namespace and state file gone; removing again is fine; then NotFound.
    client
        .remove_pod_sandbox(support::remove_request(&id))
        .await
        .unwrap();
    assert!(!netns.exists());
    assert!(
        !dir.path()
            .join("state/sandboxes")
            .join(format!("{id}.json"))
            .exists()
    );
    client
        .remove_pod_sandbox(support::remove_request(&id))
        .await
        .unwrap();
    let err = client
        .pod_sandbox_status(support::status_request(&id, false))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound, "{err:?}");
    assert!(err.message().contains(&id), "{}", err.message());
    assert_eq!(ids(list(&mut client, None).await), vec![other.clone()]);

    // Removing a ready sandbox stops it first.
    client
        .remove_pod_sandbox(support::remove_request(&other))
        .await
        .unwrap();
    assert!(
        cni.leases().is_empty(),
        "no lease outlives its sandbox: {:?}",
        cni.leases()
    );
    assert_eq!(
        file_names(&dir.path().join("run/netns")),
        Vec::<String>::new()
    );
    assert_eq!(
        file_names(&dir.path().join("state/sandboxes")),
        Vec::<String>::new()
    );
    daemon.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_sandboxes_at_once() {
    let Harness {
        dir,
        cni: _,
        daemon,
        client,
    } = support::harness().await;

    let mut set = tokio::task::JoinSet::new();
    for i in 0..20 {
        let mut client = client.clone();
        set.spawn(async move { client.run_pod_sandbox(pod(&format!("pod-{i}"))).await });
    }
    let mut ids = HashSet::new();
    while let Some(joined) = set.join_next().await {
        let response = joined.unwrap().expect("every RunPodSandbox succeeds");
        ids.insert(response.into_inner().pod_sandbox_id);
    }
    assert_eq!(ids.len(), 20, "distinct IDs");

    let mut client = client;
    let items = list(&mut client, None).await;
    assert_eq!(items.len(), 20);
    let mut addresses = HashSet::new();
    for item in &items {
        let st = status(&mut client, &item.id).await;
        assert_eq!(st.state, cri::PodSandboxState::SandboxReady as i32);
        addresses.insert(ips(&st)[0].clone());
    }
    assert_eq!(addresses.len(), 20, "distinct IPs: {addresses:?}");
    assert_eq!(file_names(&dir.path().join("run/netns")).len(), 20);
    assert_eq!(
        daemon
            .metrics()
            .encode()
            .lines()
            .find(|l| l.starts_with("crio_lite_sandboxes_ready ")),
        Some("crio_lite_sandboxes_ready 20")
    );
    daemon.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_pod_twice_returns_the_ready_sandbox_and_refuses_a_stopped_one() {
    let Harness {
        dir: _dir,
        cni,
        daemon,
        mut client,
    } = support::harness().await;

    let id = run(&mut client, "web").await;
    assert_eq!(
        run(&mut client, "web").await,
        id,
        "a retried request gets the same sandbox"
    );
    assert_eq!(
        cni.summary()
            .iter()
            .filter(|c| c.starts_with("setup"))
            .count(),
        1
    );

    client
        .stop_pod_sandbox(support::stop_request(&id))
        .await
        .unwrap();
    let err = client.run_pod_sandbox(pod("web")).await.unwrap_err();
    assert_eq!(err.code(), Code::AlreadyExists);
    assert!(
        err.message().contains(&id) && err.message().contains("stopped"),
        "{}",
        err.message()
    );

    // A new attempt is a new sandbox.
    let mut retry = pod("web");
    retry
        .config
        .as_mut()
        .unwrap()
        .metadata
        .as_mut()
        .unwrap()
        .attempt = 1;
    let second = client
        .run_pod_sandbox(retry)
        .await
        .unwrap()
        .into_inner()
        .pod_sandbox_id;
    assert_ne!(second, id);
    daemon.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_setup_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let cni = FakeCni::new();
    cni.fail_setups(true);
    let (daemon, mut client) = support::start_with_client(dir.path(), &cni).await;

    let err = client.run_pod_sandbox(pod("web")).await.unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    assert!(
        err.message().contains("no CNI network configured"),
        "{}",
        err.message()
    );
    assert!(list(&mut client, None).await.is_empty());
    assert_eq!(
        file_names(&dir.path().join("run/netns")),
        Vec::<String>::new()
    );
    assert_eq!(
        file_names(&dir.path().join("state/sandboxes")),
        Vec::<String>::new()
    );
    assert!(
        cni.summary().iter().any(|c| c.starts_with("teardown")),
        "{:?}",
        cni.summary()
    );

    // The name is free again once the network is there.
    cni.fail_setups(false);
    run(&mut client, "web").await;
    let metrics = daemon.metrics().encode();
    assert!(
        metrics
            .contains(r#"crio_lite_sandbox_operations_total{operation="run",outcome="error"} 1"#),
        "{metrics}"
    );
    assert!(
        metrics
            .contains(r#"crio_lite_sandbox_operations_total{operation="run",outcome="success"} 1"#),
        "{metrics}"
    );
    daemon.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_network_pods_get_no_namespace_and_no_cni() {
    let Harness {
        dir,
        cni,
        daemon,
        mut client,
    } = support::harness().await;

    let mut request = pod("node-agent");
    let linux = request.config.as_mut().unwrap().linux.as_mut().unwrap();
    linux.security_context = Some(cri::LinuxSandboxSecurityContext {
        namespace_options: Some(cri::NamespaceOption {
            network: cri::NamespaceMode::Node as i32,
            ..Default::default()
        }),
        ..Default::default()
    });
    let id = client
        .run_pod_sandbox(request)
        .await
        .unwrap()
        .into_inner()
        .pod_sandbox_id;
    let st = status(&mut client, &id).await;
    assert_eq!(st.state, cri::PodSandboxState::SandboxReady as i32);
    let options = st.linux.unwrap().namespaces.unwrap().options.unwrap();
    assert_eq!(options.network, cri::NamespaceMode::Node as i32);
    assert_eq!(
        file_names(&dir.path().join("run/netns")),
        Vec::<String>::new()
    );
    assert!(
        cni.summary().iter().all(|c| !c.starts_with("setup")),
        "{:?}",
        cni.summary()
    );
    client
        .remove_pod_sandbox(support::remove_request(&id))
        .await
        .unwrap();
    assert!(
        cni.summary().iter().all(|c| !c.starts_with("teardown")),
        "{:?}",
        cni.summary()
    );
    daemon.shutdown().await.unwrap();
}

/// A pod the network setup would refuse (';' cannot travel in CNI_ARGS) used to leave its
/// `creating` state file behind; it is refused before anything is made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_refused_leaves_no_state_file_and_state_files_are_private() {
    let Harness {
        dir,
        cni,
        daemon,
        mut client,
    } = support::harness().await;
    for name in ["a;b", "x=y"] {
        let err = client.run_pod_sandbox(pod(name)).await.unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
        assert!(err.message().contains("CNI_ARGS"), "{}", err.message());
        assert!(err.message().contains(name), "{}", err.message());
    }
    assert_eq!(
        file_names(&dir.path().join("state/sandboxes")),
        Vec::<String>::new()
    );
    assert_eq!(
        file_names(&dir.path().join("run/netns")),
        Vec::<String>::new()
    );
    assert!(
        cni.calls().iter().all(|c| matches!(c, Call::Gc(_))),
        "{:?}",
        cni.summary()
    );

    run(&mut client, "private").await;
    for name in file_names(&dir.path().join("state/sandboxes")) {
        let path = dir.path().join("state/sandboxes").join(&name);
        let mode = std::fs::metadata(path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{name}: {mode:o}");
    }
    daemon.shutdown().await.unwrap();
}

//! CHECK runs with what ADD used, as Go ocicni's status does: the cached configuration, CNI_ARGS
//! and capability arguments, whatever the caller passes now.

use ocicni::cni_types::capabilities::PortMapping;
use ocicni::{CheckPolicy, CniArgsPolicy, CniPlugin, NetworkSelection, PodNetwork, RuntimeConfig};
use serde_json::{Value, json};

use crate::fake_exec::{Call, Node, conflist, plugin, plugin_with_caps, wait_until};

const NET: &str = "net";

/// A node with `net` (one `fake` plugin declaring `portMappings`), CHECK on, Kubernetes CNI_ARGS.
async fn checking_node() -> (Node, ocicni::Ocicni) {
    let node = Node::with_plugins(&["fake", "other"]);
    node.write_conf(
        "10-net.conflist",
        &conflist(NET, "1.0.0", &[plugin_with_caps("fake", &["portMappings"])]),
    );
    let cni = node
        .start_with(|b| {
            b.check(CheckPolicy::Always)
                .cni_args(CniArgsPolicy::Kubernetes)
        })
        .await;
    (node, cni)
}

/// The pod as the runtime sets it up: Kubernetes identity, an extra argument, a port mapping.
fn full_pod(node: &Node) -> PodNetwork {
    let mut pod = node.pod_on("p1", &[NET]);
    pod.extra_args = vec![("FOO".into(), "bar".into())];
    let mapping: PortMapping =
        serde_json::from_value(json!({"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}))
            .expect("port mapping");
    pod.runtime_config.insert(
        NET.to_owned(),
        RuntimeConfig {
            port_mappings: vec![mapping],
            ..RuntimeConfig::default()
        },
    );
    pod
}

/// The same pod as a caller that knows only its ID and namespace describes it.
fn bare_pod(full: &PodNetwork) -> PodNetwork {
    PodNetwork {
        id: full.id.clone(),
        netns: full.netns.clone(),
        networks: vec![NetworkSelection::new(NET)],
        ..PodNetwork::default()
    }
}

fn runtime_config(call: &Call) -> Value {
    call.stdin
        .get("runtimeConfig")
        .cloned()
        .unwrap_or(Value::Null)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_sends_the_cni_args_and_capability_args_add_sent() {
    let (node, cni) = checking_node().await;
    let pod = full_pod(&node);
    cni.setup_pod(&pod).await.unwrap();

    let status = cni.pod_network_status(&bare_pod(&pod)).await.unwrap();
    assert_eq!(status.len(), 1);
    let add = node.fake.call_to("fake", "ADD").expect("ADD ran");
    let check = node.fake.call_to("fake", "CHECK").expect("CHECK ran");
    assert!(
        add.var("CNI_ARGS").contains("K8S_POD_NAME=p1-name"),
        "{}",
        add.var("CNI_ARGS")
    );
    assert_eq!(check.var("CNI_ARGS"), add.var("CNI_ARGS"));
    assert_eq!(check.var("CNI_IFNAME"), "eth0");
    assert_eq!(check.var("CNI_NETNS"), pod.netns);
    assert_eq!(runtime_config(&check), runtime_config(&add));
    assert_eq!(
        runtime_config(&check)["portMappings"][0]["hostPort"],
        8080,
        "{}",
        check.stdin
    );
    cni.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_runs_the_cached_configuration_not_the_changed_file() {
    let (node, cni) = checking_node().await;
    let pod = full_pod(&node);
    cni.setup_pod(&pod).await.unwrap();
    // The file now names a plugin ADD never ran: CHECK must not ask it about this attachment.
    node.write_conf(
        "10-net.conflist",
        &conflist(NET, "1.0.0", &[plugin("fake"), plugin("other")]),
    );
    wait_until(&cni, "the changed file", |c| {
        c.networks()
            .iter()
            .any(|r| r.verdict == "loaded" && r.plugins == ["fake", "other"])
    })
    .await;

    cni.pod_network_status(&bare_pod(&pod)).await.unwrap();
    assert_eq!(node.fake.plugins_of("CHECK"), ["fake"]);
    let check = node.fake.call_to("fake", "CHECK").expect("CHECK ran");
    assert_eq!(
        runtime_config(&check)["portMappings"][0]["hostPort"],
        8080,
        "the cached list declares portMappings: {}",
        check.stdin
    );
    cni.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_runs_from_the_cache_when_the_file_is_gone() {
    let (node, cni) = checking_node().await;
    let pod = full_pod(&node);
    cni.setup_pod(&pod).await.unwrap();
    node.remove_conf("10-net.conflist");
    cni.reload().await.unwrap();

    cni.pod_network_status(&bare_pod(&pod)).await.unwrap();
    let add = node.fake.call_to("fake", "ADD").expect("ADD ran");
    let check = node.fake.call_to("fake", "CHECK").expect("CHECK ran");
    assert_eq!(check.var("CNI_ARGS"), add.var("CNI_ARGS"));
    cni.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entry_without_usable_configuration_is_checked_with_the_file_and_caller() {
    let (node, cni) = checking_node().await;
    let pod = full_pod(&node);
    cni.setup_pod(&pod).await.unwrap();
    // What an old runtime might have left: no configuration bytes, no CNI_ARGS.
    let cache = cni.cni().cache();
    let mut entry = cache.get(NET, &pod.id, "eth0").unwrap().expect("cached");
    entry.config = b"not json".to_vec();
    entry.cni_args.clear();
    cache.put(&entry).unwrap();

    cni.pod_network_status(&pod).await.unwrap();
    let add = node.fake.call_to("fake", "ADD").expect("ADD ran");
    let check = node.fake.call_to("fake", "CHECK").expect("CHECK ran");
    assert_eq!(
        node.fake.plugins_of("CHECK"),
        ["fake"],
        "the file's plugins"
    );
    assert_eq!(
        check.var("CNI_ARGS"),
        add.var("CNI_ARGS"),
        "the caller's arguments, rebuilt"
    );
    cni.shutdown().await;
}

//! What the facade does with inputs that are there but wrong: a namespace path that is a FIFO, a
//! network that exists but cannot be used.

use std::path::Path;
use std::time::Duration;

use ocicni::{CniPlugin, Error};
use serde_json::json;

use crate::fake_exec::{Node, conflist, plugin, simple};

/// Fails the test, instead of hanging it, when `fut` takes longer than ten seconds.
async fn soon<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(10), fut)
        .await
        .unwrap_or_else(|_| panic!("{what} did not return within 10 s"))
}

fn mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("run mkfifo");
    assert!(status.success(), "mkfifo {}", path.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifo_as_the_pod_namespace_fails_at_once_naming_it_and_frees_the_locks() {
    let node = Node::with_fake_networks("1.0.0", &["net"]);
    let cni = node.start_with(|b| b.loopback(true)).await;
    let mut pod = node.pod("p1");
    let fifo = node.cache.path().join("fifo-netns");
    mkfifo(&fifo);
    pod.netns = fifo.display().to_string();

    let err = soon("set-up", cni.setup_pod(&pod)).await.unwrap_err();
    assert!(
        matches!(&err, Error::Netns { pod, .. } if pod == "p1"),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        format!(
            "pod p1: cannot enter network namespace {}: not a network namespace",
            fifo.display()
        )
    );
    assert_eq!(node.fake.pod_commands(), ["ADD", "DEL"], "rolled back");
    // The pod and GC locks were released: the next call on the pod does not wait for them.
    soon("a second set-up", cni.setup_pod(&pod))
        .await
        .unwrap_err();
    soon("teardown", cni.teardown_pod(&pod)).await.unwrap();
    soon("gc", cni.gc(&[])).await.unwrap();
    cni.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_network_that_exists_but_is_unusable_is_not_reported_as_missing() {
    let node = Node::with_plugins(&["fake"]);
    node.write_conf("10-good.conflist", &simple("good", "1.0.0"));
    node.write_conf(
        "20-noplugin.conflist",
        &conflist("noplugin", "1.0.0", &[plugin("missing-plugin")]),
    );
    node.write_conf(
        "30-badfile.conflist",
        &json!({"cniVersion": "1.0.0", "name": "badfile", "plugins": [{"type": "../evil"}]}),
    );
    let cni = node.start().await;

    let err = cni
        .setup_pod(&node.pod_on("p1", &["noplugin"]))
        .await
        .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.starts_with(
            "network \"noplugin\" is not usable: plugin \"missing-plugin\" not found in "
        ),
        "{msg}"
    );
    assert_eq!(msg.matches("noplugin").count(), 1, "named once: {msg}");

    let err = cni
        .setup_pod(&node.pod_on("p2", &["badfile"]))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "network \"badfile\" is not usable: {}: plugins[0].type: must be a plain file name, \
             got \"../evil\"",
            node.conf_dir().join("30-badfile.conflist").display()
        )
    );

    let err = cni
        .setup_pod(&node.pod_on("p3", &["nowhere"]))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::NetworkNotFound { name, .. } if name == "nowhere"),
        "{err:?}"
    );
    assert!(node.fake.pod_commands().is_empty(), "nothing ran");
    cni.shutdown().await;
}

//! Plugins that misbehave on ADD, second in a chain after the real bridge: RunPodSandbox fails
//! with an error naming the plugin, the bridge's attachment is rolled back, no process is left,
//! and the daemon keeps serving.

use super::{
    Row, assert_only, assert_serving, finish_clean, install_plugins, plugin_processes, run_table,
    within,
};
use crate::e2e_support::{self, Node};

/// The plugin timeout these rows run with.
const TIMEOUT: &str = "2s";

/// The misbehaving plugins: name, what it does, its ADD as a bash script.
pub(super) const MISBEHAVING: [(&str, &str, &str); 6] = [
    ("fault-hang", "hangs", "exec sleep 600"),
    (
        "fault-fork",
        "prints a result and exits 0, leaving a child that keeps running with its stdout",
        "sleep 600 &\necho '{\"cniVersion\":\"1.0.0\"}'\nexit 0",
    ),
    (
        "fault-detach",
        "starts a child that keeps running with its stdio closed, then fails",
        "sleep 600 </dev/null >/dev/null 2>&1 &\n\
         echo '{\"cniVersion\":\"1.0.0\",\"code\":11,\"msg\":\"injected failure\"}'\nexit 1",
    ),
    ("fault-segv", "crashes", "kill -SEGV $$"),
    (
        "fault-junk",
        "prints junk and exits 0",
        "echo 'this is not JSON'\nexit 0",
    ),
    (
        "fault-big",
        "prints more than 1 MiB",
        "head -c 1200000 /dev/zero | tr '\\0' x\nexit 0",
    ),
];

/// The plugin, and what the error must say besides its name.
struct Misbehaving {
    plugin: &'static str,
    says: &'static str,
}

fn rows() -> Vec<Row<Misbehaving>> {
    let asserted = "RunPodSandbox fails naming the plugin; no state file, veth, lease, cache \
                    entry, pin, rule or plugin process is left; Version answers";
    vec![
        Row {
            name: "a plugin that hangs",
            fast: true,
            injected: "ADD never returns (--plugin-timeout 2s)",
            asserted,
            known: None,
            case: Misbehaving {
                plugin: "fault-hang",
                says: "timed out",
            },
        },
        Row {
            name: "a plugin that forks a child that keeps running",
            fast: false,
            injected: "ADD prints a result and exits, its child holds stdout open (timeout 2s)",
            asserted,
            known: None,
            case: Misbehaving {
                plugin: "fault-fork",
                says: "timed out",
            },
        },
        Row {
            name: "a plugin that fails leaving a detached child",
            fast: false,
            injected: "ADD starts a child with its stdio closed, then exits 1",
            asserted,
            known: None,
            case: Misbehaving {
                plugin: "fault-detach",
                says: "injected failure",
            },
        },
        Row {
            name: "a plugin that crashes",
            fast: false,
            injected: "ADD kills itself with SIGSEGV",
            asserted,
            known: None,
            case: Misbehaving {
                plugin: "fault-segv",
                says: "SIGSEGV",
            },
        },
        Row {
            name: "a plugin that prints junk",
            fast: false,
            injected: "ADD prints a line that is not JSON and exits 0",
            asserted,
            known: None,
            case: Misbehaving {
                plugin: "fault-junk",
                says: "invalid result",
            },
        },
        Row {
            name: "a plugin that prints more than 1 MiB",
            fast: false,
            injected: "ADD prints 1.2 MB and exits 0",
            asserted,
            known: None,
            case: Misbehaving {
                plugin: "fault-big",
                says: "more than",
            },
        },
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root + netns: cargo xtask test"]
async fn misbehaving_plugins() {
    run_table("plugins", rows(), plugin_case).await;
}

/// A network of the real bridge (with host-local) followed by `plugin`.
fn conflist(node: &Node, plugin: &str) -> String {
    serde_json::json!({
        "cniVersion": "1.0.0",
        "name": "faults",
        "plugins": [
            {
                "type": "bridge",
                "bridge": "cni0",
                "isGateway": true,
                "ipMasq": true,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": "10.85.0.0/16"}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": node.cache_dir().join("networks"),
                },
            },
            {"type": plugin},
        ],
    })
    .to_string()
}

async fn plugin_case(tag: String, case: Misbehaving) {
    let mut node = Node::new(&tag);
    let _reaper = install_plugins(&mut node, Some(TIMEOUT));
    std::fs::write(
        node.network_dir().join("10-faults.conflist"),
        conflist(&node, case.plugin),
    )
    .expect("write the network");
    node.start().await;
    let mut client = node.client().await;

    let err = within(
        60,
        "RunPodSandbox",
        client.run_pod_sandbox(e2e_support::pod("victim", None)),
    )
    .await
    .expect_err("RunPodSandbox fails");
    let message = err.message();
    assert!(
        message.contains(case.plugin) && message.contains(case.says),
        "the error names the plugin {} and says {:?}: {message}",
        case.plugin,
        case.says
    );
    // "sandbox <id>: network setup failed: ..."
    let victim = message
        .strip_prefix("sandbox ")
        .and_then(|rest| rest.split(':').next())
        .unwrap_or_default()
        .to_owned();
    assert_eq!(victim.len(), 64, "the error names the sandbox: {message}");
    assert_serving(&mut client).await;
    let procs = plugin_processes(&node, std::slice::from_ref(&victim));
    assert!(
        procs.is_empty(),
        "processes of the failed plugin still run after RunPodSandbox failed (a failed plugin's \
         process group must be killed with it): {procs:?}"
    );
    assert_only(&node, &[], &[], std::slice::from_ref(&victim));
    drop(client);
    finish_clean(&mut node, &[victim]).await;
}

//! `kill -9` of crio-lite at each step of RunPodSandbox, StopPodSandbox and RemovePodSandbox.
//!
//! Each row holds one plugin call of the operation (a wrapper waits before or after the real
//! plugin), checks the state file says what the daemon was doing, kills the daemon, lets the
//! plugins it left finish (as after a crash), restarts it and waits for recovery. A sandbox that
//! was ready before stays ready with its IP; the one cut off is gone (run) or not ready (stop,
//! remove) with its network torn down; nothing leaks once everything is stopped and removed.

use std::net::IpAddr;

use cri_api::v1 as cri;
use cri_api::v1::runtime_service_client::RuntimeServiceClient;
use tonic::transport::Channel;

use super::{
    Row, arm, assert_only, assert_serving, delete_rules, finish_clean, install_plugins, release,
    run_table, state_of, stop_and_remove_all, wait_hit, within,
};
use crate::e2e_support::{self, GATEWAY, Node, ready_ip, run};
use crate::support;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Run,
    Stop,
    Remove,
}

/// Which call is held when the daemon is killed, and what its state file says then.
struct KillPoint {
    op: Op,
    plugin: &'static str,
    command: &'static str,
    when: &'static str,
    state: &'static str,
    /// Whether the bridge plugin's known leak ([`BRIDGE_MASQ`]) shows at this point.
    bridge_masq: bool,
}

/// The bridge plugin (containernetworking-plugins 1.1.1, the same up to 1.8.0) deletes the pod's
/// link before its IPAM DEL and takes the addresses to unmasquerade from that link: killed in
/// between, the DEL that recovery repeats finds no link and leaves the ipMasq rules.
const BRIDGE_MASQ: &str = "bridge plugin leaves the ipMasq rules of a DEL killed after it deleted \
                           the link";

const fn point(
    op: Op,
    plugin: &'static str,
    command: &'static str,
    when: &'static str,
) -> KillPoint {
    KillPoint {
        op,
        plugin,
        command,
        when,
        state: match op {
            Op::Run => "creating",
            Op::Stop | Op::Remove => "stopping",
        },
        bridge_masq: false,
    }
}

const RUN_ASSERTED: &str = "after restart + recovery the new sandbox is gone (state file, pin, veth, \
                            lease, cache entries, rules), the ready one is ready with its IP";
const STOP_ASSERTED: &str = "after restart + recovery the sandbox is NOT READY with its network torn \
                             down (never READY), the ready one is ready with its IP";
const REMOVE_ASSERTED: &str = "after restart + recovery the sandbox is NOT READY or gone (never \
                               READY), its network torn down, the ready one keeps its IP";

#[expect(
    clippy::too_many_lines,
    reason = "a table: one row per fault, read top to bottom"
)]
fn rows() -> Vec<Row<KillPoint>> {
    use Op::{Remove, Run, Stop};
    vec![
        Row {
            name: "run: after Creating was saved, before the first plugin",
            fast: true,
            injected: "kill -9 while bridge ADD is held before it runs (state file: creating)",
            asserted: RUN_ASSERTED,
            known: None,
            case: point(Run, "bridge", "ADD", "before"),
        },
        Row {
            name: "run: bridge ADD running, before its IPAM",
            fast: false,
            injected: "kill -9 while host-local ADD (called by bridge) is held before it runs",
            asserted: RUN_ASSERTED,
            known: None,
            case: point(Run, "host-local", "ADD", "before"),
        },
        Row {
            name: "run: bridge ADD running, address leased",
            fast: false,
            injected: "kill -9 while host-local ADD is held after it leased an address",
            asserted: RUN_ASSERTED,
            known: None,
            case: point(Run, "host-local", "ADD", "after"),
        },
        Row {
            name: "run: bridge ADD done, before portmap",
            fast: false,
            injected: "kill -9 while bridge ADD is held after it finished",
            asserted: RUN_ASSERTED,
            known: None,
            case: point(Run, "bridge", "ADD", "after"),
        },
        Row {
            name: "run: portmap ADD started, before it changes anything",
            fast: false,
            injected: "kill -9 while portmap ADD is held before it runs",
            asserted: RUN_ASSERTED,
            known: None,
            case: point(Run, "portmap", "ADD", "before"),
        },
        Row {
            name: "run: after the last plugin, before Ready was saved",
            fast: true,
            injected: "kill -9 while portmap ADD is held after it finished (state file: creating)",
            asserted: RUN_ASSERTED,
            known: None,
            case: point(Run, "portmap", "ADD", "after"),
        },
        Row {
            name: "stop: after Stopping was saved, before the first plugin",
            fast: true,
            injected: "kill -9 while portmap DEL is held before it runs (state file: stopping)",
            asserted: STOP_ASSERTED,
            known: None,
            case: point(Stop, "portmap", "DEL", "before"),
        },
        Row {
            name: "stop: portmap DEL done, before bridge",
            fast: false,
            injected: "kill -9 while portmap DEL is held after it finished",
            asserted: STOP_ASSERTED,
            known: None,
            case: point(Stop, "portmap", "DEL", "after"),
        },
        Row {
            name: "stop: bridge DEL running, before its IPAM",
            fast: false,
            injected: "kill -9 while host-local DEL (called by bridge) is held before it runs",
            asserted: STOP_ASSERTED,
            known: Some(BRIDGE_MASQ),
            case: KillPoint {
                bridge_masq: true,
                ..point(Stop, "host-local", "DEL", "before")
            },
        },
        Row {
            name: "stop: bridge DEL running, address released",
            fast: false,
            injected: "kill -9 while host-local DEL is held after it released the address",
            asserted: STOP_ASSERTED,
            known: Some(BRIDGE_MASQ),
            case: KillPoint {
                bridge_masq: true,
                ..point(Stop, "host-local", "DEL", "after")
            },
        },
        Row {
            name: "stop: after the last plugin, before NotReady was saved",
            fast: false,
            injected: "kill -9 while bridge DEL is held after it finished (state file: stopping)",
            asserted: STOP_ASSERTED,
            known: None,
            case: point(Stop, "bridge", "DEL", "after"),
        },
        Row {
            name: "remove (of a ready sandbox): before the first plugin",
            fast: false,
            injected: "RemovePodSandbox on a ready sandbox; kill -9 while portmap DEL is held \
                       before it runs",
            asserted: REMOVE_ASSERTED,
            known: None,
            case: point(Remove, "portmap", "DEL", "before"),
        },
        Row {
            name: "remove (of a ready sandbox): after the last plugin",
            fast: true,
            injected: "RemovePodSandbox on a ready sandbox; kill -9 while bridge DEL is held after \
                       it finished",
            asserted: REMOVE_ASSERTED,
            known: None,
            case: point(Remove, "bridge", "DEL", "after"),
        },
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root + netns: cargo xtask test"]
async fn kill_9_at_each_step() {
    run_table("kill", rows(), kill_case).await;
}

const KEEP_PORT: u16 = 8081;
const VICTIM_PORT: u16 = 8082;

/// Runs the pod that must survive the kill and, unless the kill cuts off its creation, the
/// victim: (keep's ID, keep's IP, the victim's ID).
async fn run_pods(
    client: &mut RuntimeServiceClient<Channel>,
    op: Op,
) -> (String, IpAddr, Option<String>) {
    let keep = within(
        30,
        "RunPodSandbox keep",
        run(client, "keep", Some(KEEP_PORT)),
    )
    .await;
    let keep_ip = ready_ip(client, &keep).await;
    let target = if op == Op::Run {
        None
    } else {
        let id = within(
            30,
            "RunPodSandbox victim",
            run(client, "victim", Some(VICTIM_PORT)),
        )
        .await;
        ready_ip(client, &id).await;
        Some(id)
    };
    (keep, keep_ip, target)
}

/// Sends the operation the kill will cut off, in a task of its own.
fn cut_off_call(
    mut client: RuntimeServiceClient<Channel>,
    op: Op,
    target: String,
) -> tokio::task::JoinHandle<Result<(), tonic::Status>> {
    tokio::spawn(async move {
        match op {
            Op::Run => client
                .run_pod_sandbox(e2e_support::pod("victim", Some(VICTIM_PORT)))
                .await
                .map(|_| ()),
            Op::Stop => client
                .stop_pod_sandbox(cri::StopPodSandboxRequest {
                    pod_sandbox_id: target,
                })
                .await
                .map(|_| ()),
            Op::Remove => client
                .remove_pod_sandbox(cri::RemovePodSandboxRequest {
                    pod_sandbox_id: target,
                })
                .await
                .map(|_| ()),
        }
    })
}

async fn kill_case(tag: String, point: KillPoint) {
    let mut node = Node::new(&tag);
    let _reaper = install_plugins(&mut node, None);
    node.start().await;
    let mut client = node.client().await;
    let (keep, keep_ip, target) = Box::pin(run_pods(&mut client, point.op)).await;

    arm(&node, point.plugin, point.command, point.when);
    let call = cut_off_call(client.clone(), point.op, target.clone().unwrap_or_default());
    let hit = wait_hit(&node).await;
    assert_eq!(
        (hit.plugin.as_str(), hit.command.as_str(), hit.when.as_str()),
        (point.plugin, point.command, point.when),
        "the armed call was held"
    );
    let victim = target.unwrap_or_else(|| hit.container.clone());
    assert_eq!(hit.container, victim, "the held call is the victim's");
    assert_ne!(victim, keep);
    assert_eq!(
        state_of(&node, &victim).as_deref(),
        Some(point.state),
        "the state file at the kill point"
    );

    node.sigkill();
    // Plugins the dead daemon started carry on (as after a crash); the new daemon's recovery then
    // sees all they did.
    release(&node);
    let outcome = within(30, "the cut-off call", call)
        .await
        .expect("the call's task");
    assert!(
        outcome.is_err(),
        "the call cannot have succeeded: its daemon was killed mid-way"
    );
    node.wait_for_orphans().await;
    drop(client);

    node.start().await;
    node.wait_recovered().await;
    let mut client = node.client().await;
    assert_serving(&mut client).await;
    assert_eq!(
        ready_ip(&mut client, &keep).await,
        keep_ip,
        "the sandbox ready before the kill is ready with the same IP"
    );
    node.ping(&keep, IpAddr::V4(GATEWAY))
        .expect("the ready sandbox's network works");
    let victim_status = client
        .pod_sandbox_status(support::status_request(&victim, false))
        .await;
    // Taken out of the way (and reported at the end) so the row checks everything else.
    let masq_left = if point.bridge_masq {
        masq_rules(&node, &victim)
    } else {
        Vec::new()
    };
    if !masq_left.is_empty() {
        delete_rules(&node, &masq_left);
    }
    let keep_ready = [(keep.clone(), keep_ip)];
    match (point.op, victim_status) {
        (Op::Run, Err(status)) if status.code() == tonic::Code::NotFound => {
            assert_only(&node, &keep_ready, &[], std::slice::from_ref(&victim));
        }
        (Op::Remove, Err(status)) if status.code() == tonic::Code::NotFound => {
            assert_only(&node, &keep_ready, &[], std::slice::from_ref(&victim));
        }
        (Op::Stop | Op::Remove, Ok(status)) => {
            let state = status.into_inner().status.map(|s| s.state);
            assert_eq!(
                state,
                Some(cri::PodSandboxState::SandboxNotready as i32),
                "a sandbox killed mid-stop is NOT READY after recovery, never READY"
            );
            assert_only(&node, &keep_ready, std::slice::from_ref(&victim), &[]);
        }
        (op, other) => panic!(
            "after recovery the victim of a kill during {op:?} is {other:?}:\n{}",
            node.logs()
        ),
    }

    let mut ids = stop_and_remove_all(&mut client).await;
    ids.push(victim);
    drop(client);
    finish_clean(&mut node, &ids).await;
    assert!(
        masq_left.is_empty(),
        "{BRIDGE_MASQ}: its DEL deletes the pod's link before the IPAM DEL and finds the \
         addresses to unmasquerade on that link, so the DEL recovery repeats finds none \
         (containernetworking-plugins' bridge, not crio-lite); left: {masq_left:?}"
    );
}

/// The bridge plugin's ipMasq rules of sandbox `id`: the POSTROUTING jump to its chain, and the
/// chain's rules.
fn masq_rules(node: &Node, id: &str) -> Vec<String> {
    let rules = node.ns().rules_naming([id]);
    let chains: Vec<String> = rules
        .iter()
        .filter(|l| l.starts_with("-A POSTROUTING "))
        .filter_map(|l| l.split(" -j ").nth(1))
        .map(|chain| format!("-A {chain} "))
        .collect();
    rules
        .into_iter()
        .filter(|l| {
            (l.starts_with("-A POSTROUTING ") && l.contains(" -j CNI-"))
                || chains.iter().any(|c| l.starts_with(c.as_str()))
        })
        .collect()
}

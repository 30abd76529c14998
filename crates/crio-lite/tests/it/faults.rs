//! The fault-injection suite: tables of faults the daemon has been fixed to survive, each row
//! ending with the check that nothing was lost or leaked.
//!
//! | table      | what is injected                                                          |
//! |------------|---------------------------------------------------------------------------|
//! | `kill`     | `kill -9` of crio-lite at each step of Run-, Stop- and RemovePodSandbox    |
//! | `second`   | a second crio-lite on the same state dir or socket while a pod is created |
//! | `inputs`   | FIFOs, devices and stray files in every path the daemon reads             |
//! | `plugins`  | plugins that hang, fork, crash, print junk or print too much              |
//!
//! Steps are hit with wrapper plugins (see [`rig::install_plugins`]): for bridge, host-local and
//! portmap a script that runs the real plugin from `/usr/lib/cni`, except for the one call a test
//! arms, which it holds before or after the real plugin until the test releases it.
//!
//! Every row runs in a node namespace of its own (see `e2e_support`). Without
//! `CRIO_LITE_FAULTS=full` only the rows marked fast run, inside the privileged step of
//! `cargo xtask test`; `cargo xtask faults` runs them all and prints each table.

mod inputs;
mod kill;
mod plugins;
mod rig;
mod second;

pub(crate) use rig::{
    arm, exits_within, flags_with, install_plugins, mkfifo, plugin_dir, release, spawn_in_node,
    wait_hit,
};

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::future::Future;
use std::net::IpAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cri_api::v1 as cri;
use cri_api::v1::runtime_service_client::RuntimeServiceClient;
use test_support::fs::file_names;
use tonic::transport::Channel;

use crate::e2e_support::Node;
use crate::support::list;

/// How long one row may take before it counts as hung.
const ROW_LIMIT: Duration = Duration::from_secs(180);

/// Whether the whole table runs (`CRIO_LITE_FAULTS=full`), not only the fast rows.
fn full() -> bool {
    std::env::var("CRIO_LITE_FAULTS").is_ok_and(|v| v == "full")
}

/// One row of a table: what it injects, what it asserts, and its case.
pub(crate) struct Row<K> {
    pub(crate) name: &'static str,
    pub(crate) fast: bool,
    pub(crate) injected: &'static str,
    pub(crate) asserted: &'static str,
    /// A bug outside this workspace (a plugin's) the row runs into: its failure must contain this
    /// text, and then counts as expected; a pass means the bug is gone and the mark must go.
    pub(crate) known: Option<&'static str>,
    pub(crate) case: K,
}

/// Runs the rows (the fast ones unless the run is full) one after another, each as a task of its
/// own bounded by [`ROW_LIMIT`], prints the table with each outcome and time, and fails when a row
/// did.
pub(crate) async fn run_table<K, F, Fut>(table: &str, rows: Vec<Row<K>>, case: F)
where
    K: Send + 'static,
    F: Fn(String, K) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let full = full();
    let started = Instant::now();
    let mut lines = Vec::new();
    let mut failed = Vec::new();
    for (i, row) in rows.into_iter().enumerate() {
        if !full && !row.fast {
            continue;
        }
        let t0 = Instant::now();
        let mut task = tokio::spawn(case(format!("{table}{i}"), row.case));
        let outcome = match tokio::time::timeout(ROW_LIMIT, &mut task).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) if e.is_panic() => Err(panic_text(e.into_panic())),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => {
                // Dropping the case's future drops its node: the daemon is killed, namespaces go.
                task.abort();
                let _ = task.await;
                Err(format!("did not finish within {} s", ROW_LIMIT.as_secs()))
            }
        };
        let secs = t0.elapsed().as_secs_f64();
        let verdict = match (outcome, row.known) {
            (Ok(()), None) => "pass",
            (Err(why), Some(known)) if why.contains(known) => "xfail",
            (Ok(()), Some(known)) => {
                failed.push(format!(
                    "{}: passed, but it is marked with a known bug ({known}): the bug is gone, \
                     remove the mark",
                    row.name
                ));
                "XPASS"
            }
            (Err(why), _) => {
                failed.push(format!("{}: {why}", row.name));
                "FAIL"
            }
        };
        let mut line = format!(
            "{verdict:5} {secs:5.1}s  {}\n              injected: {}\n              asserted: {}",
            row.name, row.injected, row.asserted
        );
        if let Some(known) = row.known {
            let _ = write!(line, "\n              known: {known}");
        }
        lines.push(line);
    }
    eprintln!(
        "\nfault table {table} ({} rows, {}, {:.1}s):\n{}\n",
        lines.len(),
        if full { "full" } else { "fast" },
        started.elapsed().as_secs_f64(),
        lines.join("\n")
    );
    assert!(
        failed.is_empty(),
        "{} row(s) of fault table {table} failed:\n\n{}",
        failed.len(),
        failed.join("\n\n")
    );
}

fn panic_text(payload: Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_else(|| "panicked".to_owned())
}

/// Awaits `fut`, failing the test (instead of hanging it) after `secs` seconds.
pub(crate) async fn within<T>(secs: u64, what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(secs), fut)
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish within {secs} s"))
}

/// Asserts that the daemon answers a Version call.
pub(crate) async fn assert_serving(client: &mut RuntimeServiceClient<Channel>) {
    let version = within(
        10,
        "Version",
        client.version(cri::VersionRequest {
            version: "v1".to_owned(),
        }),
    )
    .await
    .expect("the daemon keeps serving: Version answers")
    .into_inner();
    assert_eq!(version.runtime_name, "crio-lite");
}

/// The `state` field of a sandbox's state file, `None` when there is no such file.
pub(crate) fn state_of(node: &Node, id: &str) -> Option<String> {
    let path = node
        .state_dir()
        .join("sandboxes")
        .join(format!("{id}.json"));
    let bytes = std::fs::read(&path).ok()?;
    let value: serde_json::Value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|e| panic!("state file {} is not JSON: {e}", path.display()));
    value["state"].as_str().map(str::to_owned)
}

/// Processes of the node's plugin runs: their `CNI_PATH` names the node's plugin directory, or
/// their `CNI_CONTAINERID` is one of `ids`. As `pid command line`.
pub(crate) fn plugin_processes(node: &Node, ids: &[String]) -> Vec<String> {
    processes_of(&plugin_dir(node).display().to_string(), ids)
        .into_iter()
        .map(|(pid, cmdline)| format!("{pid} {cmdline}"))
        .collect()
}

/// Processes whose `CNI_PATH` names `dir` or whose `CNI_CONTAINERID` is one of `ids`, as pid and
/// command line.
fn processes_of(dir: &str, ids: &[String]) -> Vec<(String, String)> {
    let wanted: Vec<String> = ids
        .iter()
        .map(|id| format!("CNI_CONTAINERID={id}"))
        .collect();
    test_support::process::with_env(|var| {
        (var.starts_with("CNI_PATH=") && var.contains(dir)) || wanted.iter().any(|w| w == var)
    })
    .into_iter()
    .map(|found| (found.pid.to_string(), found.cmdline))
    .collect()
}

/// Kills, when dropped, whatever the node's plugin runs left running (their `CNI_PATH` names the
/// node's own plugin directory), so a failing row leaves no process on the machine.
#[must_use = "the processes are killed when it is dropped"]
pub(crate) struct Reaper {
    dir: String,
}

impl Reaper {
    pub(crate) fn new(plugin_dir: &Path) -> Reaper {
        Reaper {
            dir: plugin_dir.display().to_string(),
        }
    }
}

impl Drop for Reaper {
    fn drop(&mut self) {
        for (pid, cmdline) in processes_of(&self.dir, &[]) {
            let killed = Command::new("kill").args(["-KILL", &pid]).status();
            if !killed.is_ok_and(|s| s.success()) {
                eprintln!("cannot kill plugin process {pid} {cmdline}");
            }
        }
    }
}

/// host-local's leases in every network of the node, as `network/address`.
pub(crate) fn all_leases(node: &Node) -> Vec<String> {
    let root = node.cache_dir().join("networks");
    file_names(&root)
        .into_iter()
        .flat_map(|net| {
            file_names(&root.join(&net))
                .into_iter()
                .filter(|f| f.parse::<IpAddr>().is_ok())
                .map(move |ip| format!("{net}/{ip}"))
        })
        .collect()
}

/// Deletes the node's iptables rules `lines` (as iptables-save prints them) and the CNI chains
/// they jump to, so a row can go on checking everything else after a known leak.
pub(crate) fn delete_rules(node: &Node, lines: &[String]) {
    let chains: Vec<String> = lines
        .iter()
        .filter_map(|l| l.split(" -j ").nth(1))
        .filter_map(|target| target.split_whitespace().next())
        .filter(|target| target.starts_with("CNI-"))
        .map(|chain| format!(":{chain} "))
        .collect();
    let mut kept = node
        .iptables()
        .lines()
        .filter(|l| !lines.iter().any(|gone| gone == l))
        .filter(|l| !chains.iter().any(|c| l.starts_with(c.as_str())))
        .collect::<Vec<_>>()
        .join("\n");
    kept.push('\n');
    let mut restore = Command::new("ip")
        .args(["netns", "exec", node.name(), "iptables-restore"])
        .stdin(Stdio::piped())
        .spawn()
        .expect("start iptables-restore in the node");
    std::io::Write::write_all(
        &mut restore.stdin.take().expect("its stdin"),
        kept.as_bytes(),
    )
    .expect("feed iptables-restore");
    let status = restore.wait().expect("wait for iptables-restore");
    assert!(
        status.success(),
        "iptables-restore in {} failed",
        node.name()
    );
}

/// Asserts what exists while the daemon runs: `ready` sandboxes own a veth, a lease, a pin, a state
/// file and cache entries each; `stopped` ones only a pin and a state file; `gone` ones nothing;
/// no plugin process of any of them runs.
pub(crate) fn assert_only(
    node: &Node,
    ready: &[(String, IpAddr)],
    stopped: &[String],
    gone: &[String],
) {
    let ready_ids: Vec<String> = ready.iter().map(|(id, _)| id.clone()).collect();
    let without_network: Vec<String> = stopped.iter().chain(gone).cloned().collect();
    let all: Vec<String> = ready_ids.iter().chain(&without_network).cloned().collect();
    let mut problems = Vec::new();
    let veths = node.veths();
    if veths.len() != ready.len() {
        problems.push(format!(
            "{} veths for {} ready sandboxes: {veths:?}",
            veths.len(),
            ready.len()
        ));
    }
    let leases: BTreeSet<String> = all_leases(node)
        .into_iter()
        .filter_map(|l| l.rsplit('/').next().map(str::to_owned))
        .collect();
    let ips: BTreeSet<String> = ready.iter().map(|(_, ip)| ip.to_string()).collect();
    if leases != ips {
        problems.push(format!(
            "leases {leases:?}, but the ready sandboxes have {ips:?}"
        ));
    }
    for entry in node.cache_entries() {
        if !ready_ids.iter().any(|id| entry.contains(id.as_str())) {
            problems.push(format!("cache entry {entry} of no ready sandbox"));
        }
    }
    let pins: BTreeSet<String> = file_names(&node.netns_dir()).into_iter().collect();
    let pinned: BTreeSet<String> = ready_ids.iter().chain(stopped).cloned().collect();
    if pins != pinned {
        problems.push(format!("pins {pins:?}, expected {pinned:?}"));
    }
    let states: BTreeSet<String> = file_names(&node.state_dir().join("sandboxes"))
        .into_iter()
        .collect();
    let kept: BTreeSet<String> = pinned.iter().map(|id| format!("{id}.json")).collect();
    if states != kept {
        problems.push(format!("state files {states:?}, expected {kept:?}"));
    }
    let rules = node.ns().rules_naming(&without_network);
    if !rules.is_empty() {
        problems.push(format!(
            "iptables rules of sandboxes without a network: {rules:?}"
        ));
    }
    let procs = plugin_processes(node, &all);
    if !procs.is_empty() {
        problems.push(format!("plugin processes still running: {procs:?}"));
    }
    assert!(
        problems.is_empty(),
        "after recovery (ready {ready:?}, stopped {stopped:?}, gone {gone:?}):\n{}",
        problems.join("\n")
    );
}

/// Stops and removes every sandbox the daemon lists; returns their IDs.
pub(crate) async fn stop_and_remove_all(client: &mut RuntimeServiceClient<Channel>) -> Vec<String> {
    let ids: Vec<String> = within(10, "ListPodSandbox", list(client, None))
        .await
        .into_iter()
        .map(|p| p.id)
        .collect();
    for id in &ids {
        within(60, "StopPodSandbox", crate::e2e_support::stop(client, id)).await;
        within(
            60,
            "RemovePodSandbox",
            crate::e2e_support::remove(client, id),
        )
        .await;
    }
    ids
}

/// The end of every row: stops the daemon and asserts that nothing is left of `ids` (nor of any
/// sandbox): veths, leases of any network, cache entries, lock files, pins, mounts, state files,
/// iptables rules, plugin processes.
pub(crate) async fn finish_clean(node: &mut Node, ids: &[String]) {
    if node.is_running() {
        assert!(node.sigterm().await, "the daemon exits cleanly on SIGTERM");
    }
    node.assert_nothing_leaked(ids);
    let leases = all_leases(node);
    assert!(leases.is_empty(), "leaked leases: {leases:?}");
    let procs = plugin_processes(node, ids);
    assert!(procs.is_empty(), "plugin processes left running: {procs:?}");
}

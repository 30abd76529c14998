//! `cargo xtask bench --only containers`: crio-lite's containers beside the bare runtime under
//! them, and its pods beside containerd 1.6's, in one run on one node.
//!
//! `container-bench` runs in a node network namespace made here and a private mount namespace
//! (`unshare --mount --propagation slave nsenter --net=...`): root file systems, snapshots,
//! pinned namespaces and its tmpfs over `/run/containerd` and `/var/lib/cni` exist only there.
//! Its daemons and containers live in cgroups under `/xtask-ctrbench-<pid>` in every hierarchy.
//! Whatever happens, afterwards every process in the node namespace and in those cgroups is
//! killed (which ends the mount namespace and its mounts), the cgroups, the namespace and the
//! work directory are removed, and `/run/containerd` and `/var/lib/cni` too when this run made
//! them.
//!
//! The bench runs below `tini -s`, a child subreaper. conmon and containerd's shims daemonize,
//! so when they exit their parent is the nearest subreaper, else PID 1. This machine's PID 1 (a
//! VM's init, not systemd) reaps orphans only every 1.6 s or so, and crio-lite waits at
//! RemoveContainer until its conmon is gone (a zombie still counts as running): without a
//! prompt reaper every removal took 1.75 s here, which measures the VM's init, not the daemon.
//! tini reaps at once, as systemd does on a node.
//!
//! Targets: at concurrency 1, crio-lite's create + start + stop + remove within 20% of the floor
//! (the same bundle under `runc run -d`, kill, delete) plus the monitor's start (conmon +
//! `runc create`, then `runc start`, beyond `runc run -d`); and per pod, crio-lite faster up,
//! faster down, with less CPU time and less resident memory than containerd. Concurrency 8 on
//! two cores adds queueing for a CPU to every latency: shown, not judged.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};
use serde_json::Value;

use super::{Verdict, ip, num};

const ADDED_TARGET_PCT: f64 = 20.0;
/// A run that takes longer than this is stuck; it is killed and counts as failed.
const TIMEOUT_S: &str = "1800";
/// Directories the bench mounts a tmpfs over (in its own mount namespace): made when missing.
const MOUNTED_OVER: [&str; 2] = ["/run/containerd", "/var/lib/cni"];

/// The node namespace, the work directory and the cgroup root of one run; all removed on drop
/// with everything running in them.
struct Node {
    name: String,
    work: PathBuf,
    cgroup_root: String,
    made: Vec<&'static str>,
}

impl Node {
    fn new() -> Result<Node> {
        let name = format!("ctr-bench-{}", std::process::id());
        let work = std::env::temp_dir().join(format!("{name}.work"));
        let made = MOUNTED_OVER
            .into_iter()
            .filter(|d| !Path::new(d).exists())
            .collect();
        ip(&["netns", "add", &name])?;
        // From here on, drop cleans up.
        let node = Node {
            name,
            work,
            cgroup_root: format!("xtask-ctrbench-{}", std::process::id()),
            made,
        };
        ip(&["-n", &node.name, "link", "set", "lo", "up"])?;
        std::fs::create_dir_all(node.work.join("tmp"))
            .with_context(|| format!("cannot create {}", node.work.display()))?;
        Ok(node)
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        // Daemons, monitors, shims and the registry run in the node namespace; containers and
        // pause processes in the pods' namespaces, but in the run's cgroups.
        for _ in 0..50 {
            let mut pids = Vec::new();
            if let Ok(out) = Command::new("ip")
                .args(["netns", "pids", &self.name])
                .output()
            {
                pids.extend(
                    String::from_utf8_lossy(&out.stdout)
                        .split_whitespace()
                        .map(str::to_owned),
                );
            }
            for dir in cgroup_dirs(&self.cgroup_root) {
                if let Ok(text) = std::fs::read_to_string(dir.join("cgroup.procs")) {
                    pids.extend(text.split_whitespace().map(str::to_owned));
                }
            }
            if pids.is_empty() {
                break;
            }
            for pid in &pids {
                let _ = Command::new("kill").args(["-KILL", pid]).status();
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let mut dirs = cgroup_dirs(&self.cgroup_root);
        dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
        for dir in dirs {
            let _ = std::fs::remove_dir(dir);
        }
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
        let _ = std::fs::remove_dir_all(&self.work);
        for dir in &self.made {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// Every cgroup at or below `/<root>` in every mounted hierarchy.
fn cgroup_dirs(root: &str) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        if dir.is_dir() {
            out.push(dir.to_owned());
            for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    walk(&e.path(), out);
                }
            }
        }
    }
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut out = Vec::new();
    for line in info.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let Some(dash) = fields.iter().position(|f| *f == "-") else {
            continue;
        };
        if matches!(fields.get(dash + 1), Some(&"cgroup" | &"cgroup2")) {
            walk(&Path::new(fields[4]).join(root), &mut out);
        }
    }
    out
}

/// Runs `container-bench`, writes `containers.jsonl`, prints the tables and the target lines.
pub(super) fn run(bin: &Path, out_dir: &Path, quick: bool) -> Result<Vec<Verdict>> {
    let (cycles, pods) = if quick { ("20", "8") } else { ("200", "50") };
    println!(
        "\n==> containers: crio-lite beside runc and conmon + runc ({cycles} containers), and \
         beside containerd 1.6 ({pods} pods), concurrency 1 and 8"
    );
    let v = run_in_node(
        bin,
        out_dir,
        &["run", "--cycles", cycles, "--pods", pods, "--warmup", "2"],
        "containers.jsonl",
        print_tables,
    )?;
    Ok(verdicts(&v))
}

/// `container-bench SUBCOMMAND [ARGS]` (`args`) in a node made for it and removed after; its
/// output written to `out_dir/file`, its result (the last JSON line) shown with `print`, and
/// returned when the bench succeeded and said `ok`.
pub(super) fn run_in_node(
    bin: &Path,
    out_dir: &Path,
    args: &[&str],
    file: &str,
    print: fn(&Value),
) -> Result<Value> {
    let (subcommand, rest) = args
        .split_first()
        .context("no container-bench subcommand")?;
    let node = Node::new()?;
    let out = container_bench(bin, &node, subcommand)
        .args(rest)
        .output()
        .with_context(|| format!("cannot run container-bench {subcommand}"));
    drop(node);
    let out = out?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    std::fs::write(out_dir.join(file), &text)?;
    let v: Value = text
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .with_context(|| {
            format!(
                "container-bench {subcommand} printed no result ({}): {text:?}",
                out.status
            )
        })?;
    print(&v);
    if !out.status.success() || v["ok"] != true {
        bail!(
            "container-bench {subcommand} failed ({}): {}; left: {}",
            out.status,
            v["first_error"],
            v["leftover"]
        );
    }
    Ok(v)
}

/// `container-bench SUBCOMMAND` in `node`, as the module docs say, with the flags every
/// subcommand takes; the caller adds its own.
fn container_bench(bin: &Path, node: &Node, subcommand: &str) -> Command {
    let mut cmd = Command::new("timeout");
    cmd.args(["--kill-after=10", TIMEOUT_S])
        // A child subreaper above the bench: see the module docs.
        .args(["tini", "-s", "--"])
        .args(["unshare", "--mount", "--propagation", "slave", "nsenter"])
        .arg(format!("--net=/run/netns/{}", node.name))
        .arg("--")
        .arg(bin.join("container-bench"))
        .arg(subcommand)
        .arg("--work-dir")
        .arg(&node.work)
        .arg("--crio-lite")
        .arg(bin.join("crio-lite"))
        .args(["--cgroup-root", &node.cgroup_root])
        .env("TMPDIR", node.work.join("tmp"))
        .stderr(Stdio::inherit());
    cmd
}

/// `mean/p50/p95` of a step, or `-`.
fn cell(step: &Value) -> String {
    if step.is_null() {
        return "-".to_owned();
    }
    format!(
        "{:.1}/{:.1}/{:.1}",
        num(step, &["mean_ms"]),
        num(step, &["p50_ms"]),
        num(step, &["p95_ms"])
    )
}

fn print_tables(v: &Value) {
    println!(
        "{} | {} | {} | kernel {}; load average {} at the start, {} at the end",
        v["versions"]["runc"].as_str().unwrap_or("?"),
        v["versions"]["conmon"].as_str().unwrap_or("?"),
        v["versions"]["containerd"].as_str().unwrap_or("?"),
        v["kernel"].as_str().unwrap_or("?"),
        v["loadavg_start"].as_str().unwrap_or("?"),
        v["loadavg_end"].as_str().unwrap_or("?"),
    );
    print_start(v);
    print_containers(v);
    print_pods(v);
}

/// Start to ready: spawn to CRI `Status` ready on a fresh state directory, both daemons.
fn print_start(v: &Value) {
    let start = &v["start"];
    if start.is_null() {
        return;
    }
    println!(
        "\nstart to ready (spawn to CRI Status ready, {} fresh starts each, taking turns), ms:",
        start["rounds"]
    );
    for daemon in ["crio-lite", "containerd"] {
        let d = &start[daemon];
        println!(
            "  {daemon:<10} p50 {:.1}  min {:.1}  max {:.1}  runs {}",
            num(d, &["p50_ms"]),
            num(d, &["min_ms"]),
            num(d, &["max_ms"]),
            d["runs_ms"]
        );
    }
    println!(
        "  crio-lite's phases, median start: {}",
        start["crio-lite_phases_of_median"].as_str().unwrap_or("?")
    );
}

fn print_containers(v: &Value) {
    let rows = v["containers"].as_array().cloned().unwrap_or_default();
    if !rows.is_empty() {
        println!(
            "\ncontainers in ready sandboxes, ms as mean/p50/p95 ({} per series)",
            v["cycles"]
        );
        println!(
            "{:>2} {:<12} {:>17} {:>17} {:>17} {:>17} {:>17} {:>8}",
            "c",
            "series",
            "create | run",
            "start",
            "stop | kill",
            "remove | delete",
            "total",
            "per s"
        );
    }
    for r in &rows {
        let c = r["concurrency"].as_i64().unwrap_or(0);
        let s = &r["crio-lite"];
        let line = |name: &str, s: &Value, steps: [&str; 4]| {
            println!(
                "{c:>2} {name:<12} {:>17} {:>17} {:>17} {:>17} {:>17} {:>8.1}",
                cell(&s[steps[0]]),
                cell(&s[steps[1]]),
                cell(&s[steps[2]]),
                cell(&s[steps[3]]),
                cell(&s["total"]),
                num(s, &["per_s"])
            );
        };
        line("crio-lite", s, ["create", "start", "stop", "remove"]);
        line(
            "conmon+runc",
            &r["conmon"],
            ["create", "start", "kill", "delete"],
        );
        line("runc", &r["runc"], ["run", "-", "kill", "delete"]);
        println!(
            "   monitor start {:.2} ms; floor + monitor start {:.2} ms; crio-lite adds {:.2} ms \
             ({:.1}%); crio-lite's cgroup CPU {:.2} ms per container",
            num(r, &["monitor_start_ms"]),
            num(r, &["reference_ms"]),
            num(r, &["added_ms"]),
            num(r, &["added_pct"]),
            num(r, &["crio_cpu_ms_per_container"]),
        );
    }
}

fn print_pods(v: &Value) {
    let rows = v["pods"].as_array().cloned().unwrap_or_default();
    if !rows.is_empty() {
        println!(
            "\npods of one container ({} per daemon), ms as mean/p50/p95; CPU: the daemon's \
             cgroup (daemon, monitors, runc, CNI plugins) per pod; memory with every pod up",
            v["pod_count"]
        );
        println!(
            "{:>2} {:<11} {:>17} {:>17} {:>7} {:>9} {:>9} {:>8} {:>12} {:>11} {:>9} {:>9}",
            "c",
            "daemon",
            "up",
            "down",
            "up/s",
            "CPU up",
            "CPU down",
            "daemon",
            "monitors",
            "pause",
            "RSS/pod",
            "PSS/pod"
        );
    }
    for r in &rows {
        for side in ["crio-lite", "containerd"] {
            let s = &r[side];
            let m = &s["memory"];
            println!(
                "{:>2} {side:<11} {:>17} {:>17} {:>7.1} {:>9.2} {:>9.2} {:>8.1} {:>12} {:>11} {:>9.2} {:>9.2}",
                r["concurrency"].as_i64().unwrap_or(0),
                cell(&s["up"]["total"]),
                cell(&s["down"]["total"]),
                num(s, &["up", "per_s"]),
                num(s, &["cpu_ms_per_pod", "up"]),
                num(s, &["cpu_ms_per_pod", "down"]),
                num(m, &["daemon_rss_mib"]),
                format!("{:.1} ({})", num(m, &["monitors_rss_mib"]), m["monitors"]),
                format!(
                    "{:.1} ({})",
                    num(m, &["pause_rss_mib"]),
                    m["pause_processes"]
                ),
                num(m, &["per_pod_rss_mib"]),
                num(m, &["per_pod_pss_mib"]),
            );
        }
    }
    if !rows.is_empty() {
        println!(
            "RSS/pod = (daemon + monitors) / pods, MiB; PSS/pod the same in proportional set size \
             (shared pages split); pause processes shown, not in RSS/pod. Idle: crio-lite {} MiB, \
             {} ms CPU/s; containerd {} MiB, {} ms CPU/s",
            v["idle"]["crio-lite"]["rss_mib"],
            v["idle"]["crio-lite"]["cpu_ms_per_s"],
            v["idle"]["containerd"]["rss_mib"],
            v["idle"]["containerd"]["cpu_ms_per_s"],
        );
    }
}

fn verdicts(v: &Value) -> Vec<Verdict> {
    let mut out = Vec::new();
    if !v["start"].is_null() {
        let (a, b) = (
            num(&v["start"]["crio-lite"], &["p50_ms"]),
            num(&v["start"]["containerd"], &["p50_ms"]),
        );
        out.push(Verdict::judged(
            "start to ready: crio-lite sooner than containerd (p50, fresh state)".to_owned(),
            a < b,
            format!("{a:.1} ms vs {b:.1} ms ({:.2}x)", b / a),
        ));
    }
    for r in v["containers"].as_array().into_iter().flatten() {
        let c = r["concurrency"].as_i64().unwrap_or(0);
        let pct = num(r, &["added_pct"]);
        let target = format!(
            "containers c={c}: crio-lite's create+start+stop+remove within {ADDED_TARGET_PCT}% of \
             runc floor + monitor start"
        );
        let detail = format!(
            "{:+.1}% ({:.2} ms vs {:.2} ms: runc run -d/kill/delete {:.2} + monitor start {:.2}; \
             {:.1} containers/s vs runc {:.1}/s)",
            pct,
            num(r, &["crio-lite", "total", "mean_ms"]),
            num(r, &["reference_ms"]),
            num(r, &["runc", "total", "mean_ms"]),
            num(r, &["monitor_start_ms"]),
            num(r, &["crio-lite", "per_s"]),
            num(r, &["runc", "per_s"]),
        );
        let ok = pct <= ADDED_TARGET_PCT;
        out.push(if c == 1 {
            Verdict::judged(target, ok, detail)
        } else {
            Verdict::shown(target, ok, detail)
        });
    }
    for r in v["pods"].as_array().into_iter().flatten() {
        let c = r["concurrency"].as_i64().unwrap_or(0);
        let (ours, theirs) = (&r["crio-lite"], &r["containerd"]);
        let lines: [(&str, &[&str], &str); 4] = [
            (
                "faster up (RunPodSandbox+Create+Start, mean)",
                &["up", "total", "mean_ms"],
                "ms",
            ),
            (
                "faster down (Stop+Remove, container and sandbox, mean)",
                &["down", "total", "mean_ms"],
                "ms",
            ),
            (
                "less CPU per pod (up + down)",
                &["cpu_ms_per_pod", "total"],
                "ms",
            ),
            (
                "less RSS per pod (daemon + monitors)",
                &["memory", "per_pod_rss_mib"],
                "MiB",
            ),
        ];
        for (what, path, unit) in lines {
            let (a, b) = (num(ours, path), num(theirs, path));
            let target = format!("pods c={c}: crio-lite {what} than containerd");
            let detail = format!("{a:.2} {unit} vs {b:.2} {unit} ({:.2}x)", b / a);
            out.push(if c == 1 {
                Verdict::judged(target, a < b, detail)
            } else {
                Verdict::shown(target, a < b, detail)
            });
        }
    }
    out
}

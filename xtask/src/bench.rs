//! `cargo xtask bench`: the benchmarks, each beside its peer in the same run where one exists.
//!
//! - `watch`: rename-into-place to visible network, at 1, 50 and 200 networks (target < 50 ms).
//! - `peer`: our library through the scenarios of `shared/bench/gocni-peer` beside containerd's
//!   go-cni, in the same `run.sh` invocation (targets: noop >= 1.5x go-cni pods/s, real no slower,
//!   own overhead < 10% of plugin time).
//! - `crio`: crio-lite's RunPodSandbox and StopPodSandbox+RemovePodSandbox over its socket beside
//!   ocicni set-up alone, in the same node namespace (target: < 5 ms added per sandbox), and its
//!   resident memory idle and with 100 sandboxes (targets: < 20 MiB and < 40 MiB).
//! - `images`: image-store's pull + unpack of a ~200 MB multi-layer image from a local registry
//!   beside skopeo + umoci and containerd 1.6, cold, warm and unpack-only, and the disk's write
//!   rate (targets: >= 1.5x the faster peer cold and warm, RSS < 50 MiB during the pull).
//! - `containers`: crio-lite's container create + start + stop + remove at 1 and 8 in flight
//!   beside the same bundle under bare runc and under conmon + runc (target: within 20% of the
//!   floor + the monitor's start), and its pods beside containerd 1.6's, up and down, CPU time
//!   and memory per pod (target: faster and cheaper per pod).
//! - `streams`: CRI Exec of `true` through crio-lite's streaming server beside its ExecSync and
//!   beside containerd 1.6's streaming Exec, port-forward throughput beside a direct TCP
//!   connection into the pod and beside containerd's, and crio-lite's VmRSS over 100 streams
//!   (targets: exec within 1.5x of ExecSync, port forward >= 50% of direct and ahead of
//!   containerd, RSS flat within 5 MiB).
//!
//! Results go to `target/bench/` as JSON lines, and a table is printed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use crate::cmd::{cargo, is_root, run_step, target_dir, workspace_root};
use crate::packages;

mod containers;
mod crio;
mod images;
mod streams;

struct Opts {
    only: Option<String>,
    quick: bool,
}

/// The benchmarks `--only` takes.
const NAMES: [&str; 7] = [
    "watch",
    "peer",
    "crio",
    "front",
    "images",
    "containers",
    "streams",
];

pub(crate) const USAGE: &str =
    "usage: cargo xtask bench [--quick] [--only watch|peer|crio|front|images|containers|streams]

The benchmarks, as root, each beside its peer in the same run; a table and a MET/MISSED line per
target, JSON lines in target/bench/. Builds (release) only what the chosen benchmarks need.

  watch   rename a .conflist into place -> network visible, at 1, 50 and 200 networks
  peer    ocicni beside containerd's go-cni (shared/bench/gocni-peer), real and noop plugins
  crio    crio-lite's RunPodSandbox and teardown over CRI beside ocicni alone, its memory
  front   Version round trips through crio-lite with and without its HTTP/2 front
  images  image-store's pull + unpack beside skopeo + umoci and containerd, cold and warm
  containers  crio-lite's containers beside runc and conmon, its pods beside containerd 1.6
  streams     Exec and PortForward through crio-lite's streaming server beside ExecSync, a
              direct connection and containerd 1.6's; its memory over 100 streams

options:
  --quick         fewer pods, containers, repeats and rounds, a smaller image
  --only NAME     one benchmark";

pub(crate) fn run(args: &[String]) -> Result<()> {
    let mut opts = Opts {
        only: None,
        quick: false,
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--quick" => opts.quick = true,
            "--only" => opts.only = it.next().cloned(),
            other => bail!("bench: unknown option {other:?}\n\n{USAGE}"),
        }
    }
    if !is_root() {
        bail!("bench: needs root (it creates network namespaces)");
    }
    if let Some(only) = opts.only.as_deref()
        && !NAMES.contains(&only)
    {
        bail!("bench: --only {only:?}: one of {}", NAMES.join(", "));
    }
    let wants = |name: &str| opts.only.as_deref().is_none_or(|o| o == name);
    ensure_packages(&wants)?;
    // Only what the chosen benchmarks run: `--only watch` builds no gRPC stack and no daemon.
    let mut build = cargo();
    build.args(["build", "--release", "-p", "benches"]);
    if wants("watch") {
        build.args(["--bin", "watch-bench"]);
    }
    if wants("peer") {
        build.args(["--bin", "ocicni-bench"]);
    }
    if wants("crio") {
        build.args(["--bin", "crio-bench"]);
    }
    if wants("front") {
        build.args(["--bin", "front-bench"]);
    }
    if wants("images") {
        build.args(["--bin", "image-bench", "--features", "images"]);
    }
    if wants("containers") || wants("streams") {
        build.args(["--bin", "container-bench", "--features", "containers"]);
    }
    if wants("crio") || wants("front") || wants("containers") || wants("streams") {
        build.args([
            "--features",
            "crio",
            "-p",
            "crio-lite",
            "--bin",
            "crio-lite",
        ]);
    }
    run_step("build the benchmarks (release)", &mut build)?;
    let out_dir = workspace_root().join("target/bench");
    std::fs::create_dir_all(&out_dir)?;
    let bin = target_dir().join("release");
    let mut verdicts = Vec::new();
    if wants("watch") {
        verdicts.extend(watch(&bin, &out_dir, &opts)?);
    }
    if wants("peer") {
        verdicts.extend(peer(&bin, &out_dir, &opts)?);
    }
    if wants("crio") {
        verdicts.extend(crio::run(&bin, &out_dir, opts.quick)?);
    }
    if wants("front") {
        verdicts.extend(front(&bin, &out_dir, &opts)?);
    }
    if wants("images") {
        verdicts.extend(images::run(&bin, &out_dir, opts.quick)?);
    }
    if wants("containers") {
        verdicts.extend(containers::run(&bin, &out_dir, opts.quick)?);
    }
    if wants("streams") {
        verdicts.extend(streams::run(&bin, &out_dir, opts.quick)?);
    }
    println!("\n== targets");
    let mut missed = 0;
    for v in &verdicts {
        println!(
            "{} {}: {}{}",
            if v.ok { "MET   " } else { "MISSED" },
            v.target,
            v.detail,
            if v.judged { "" } else { " [shown, not judged]" }
        );
        missed += usize::from(v.judged && !v.ok);
    }
    println!("\nresults in {}", out_dir.display());
    if missed > 0 {
        println!("{missed} target(s) missed");
    }
    Ok(())
}

/// The Debian packages of the chosen benchmarks, installed when missing.
fn ensure_packages(wants: &dyn Fn(&str) -> bool) -> Result<()> {
    packages::ensure(&packages::network_and_plugin_packages())?;
    if wants("peer") {
        packages::ensure(packages::PEER_PACKAGES)?;
    }
    if wants("images") {
        packages::ensure(packages::IMAGE_PACKAGES)?;
        packages::ensure(packages::IMAGE_PEER_PACKAGES)?;
    }
    if wants("containers") || wants("streams") {
        packages::ensure(packages::IMAGE_PACKAGES)?;
        packages::ensure(packages::CONTAINER_PACKAGES)?;
        packages::ensure(packages::CONTAINER_BENCH_PACKAGES)?;
    }
    Ok(())
}

/// One target line: whether it was met, with the numbers behind it.
pub(crate) struct Verdict {
    pub(crate) target: String,
    pub(crate) ok: bool,
    pub(crate) detail: String,
    /// False for lines shown for context that do not count as met or missed.
    pub(crate) judged: bool,
}

impl Verdict {
    pub(crate) fn judged(target: impl Into<String>, ok: bool, detail: impl Into<String>) -> Self {
        Verdict {
            target: target.into(),
            ok,
            detail: detail.into(),
            judged: true,
        }
    }

    pub(crate) fn shown(target: impl Into<String>, ok: bool, detail: impl Into<String>) -> Self {
        Verdict {
            judged: false,
            ..Verdict::judged(target, ok, detail)
        }
    }
}

fn watch(bin: &Path, out_dir: &Path, opts: &Opts) -> Result<Vec<Verdict>> {
    println!("\n==> watch: rename into place -> network visible");
    let rounds = if opts.quick { "10" } else { "30" };
    let out = Command::new(bin.join("watch-bench"))
        .args(["--sizes", "1,50,200", "--rounds", rounds])
        .stderr(Stdio::inherit())
        .output()
        .context("cannot run watch-bench")?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    std::fs::write(out_dir.join("watch.jsonl"), &text)?;
    println!(
        "{:>9} {:>9} {:>9} {:>9} {:>16}",
        "networks", "p50 ms", "p90 ms", "max ms", "reloads/rename"
    );
    let mut verdicts = Vec::new();
    for line in text.lines() {
        let v: Value =
            serde_json::from_str(line).with_context(|| format!("watch-bench printed {line:?}"))?;
        if let Some(err) = v.get("error") {
            bail!("watch-bench at {} networks: {err}", v["networks"]);
        }
        println!(
            "{:>9} {:>9} {:>9} {:>9} {:>16}",
            v["networks"], v["p50_ms"], v["p90_ms"], v["max_ms"], v["reloads_per_rename"]
        );
        if v["networks"] == 200 {
            let p50 = v["p50_ms"].as_f64().unwrap_or(f64::MAX);
            verdicts.push(Verdict::judged(
                "watch: rename to visible at 200 networks < 50 ms (p50)",
                p50 < 50.0,
                format!("{p50} ms"),
            ));
        }
    }
    if !out.status.success() {
        bail!("watch-bench failed ({})", out.status);
    }
    Ok(verdicts)
}

/// The HTTP/2 front's cost per RPC: `Version` through two daemons, front on and off, same run.
fn front(bin: &Path, out_dir: &Path, opts: &Opts) -> Result<Vec<Verdict>> {
    println!("\n==> front: Version round trips with and without the HTTP/2 front, same run");
    let work = std::env::temp_dir().join(format!("xtask-front-bench-{}", std::process::id()));
    let rounds = if opts.quick { "5" } else { "20" };
    let out = Command::new(bin.join("front-bench"))
        .arg(bin.join("crio-lite"))
        .arg(&work)
        .arg(rounds)
        .stderr(Stdio::inherit())
        .output()
        .context("cannot run front-bench");
    let _ = std::fs::remove_dir_all(&work);
    let out = out?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    std::fs::write(out_dir.join("front.jsonl"), &text)?;
    let v: Value = serde_json::from_str(text.trim())
        .with_context(|| format!("front-bench printed {text:?}"))?;
    if !out.status.success() {
        bail!("front-bench failed: {}", v["error"]);
    }
    println!(
        "{:<16} {:>12} {:>12} {:>12} {:>12} {:>10}",
        "connection", "with p50 ms", "with p99 ms", "w/o p50 ms", "w/o p99 ms", "added us"
    );
    for shape in ["kept_alive", "new_connection"] {
        let s = &v[shape];
        println!(
            "{shape:<16} {:>12} {:>12} {:>12} {:>12} {:>10}",
            s["with_front"]["p50_ms"],
            s["with_front"]["p99_ms"],
            s["without_front"]["p50_ms"],
            s["without_front"]["p99_ms"],
            s["added_p50_us"]
        );
    }
    Ok(vec![Verdict::shown(
        "front: added p50 per Version round trip (kept-alive / new connection)",
        true,
        format!(
            "{} us / {} us",
            v["kept_alive"]["added_p50_us"], v["new_connection"]["added_p50_us"]
        ),
    )])
}

fn peer(bin: &Path, out_dir: &Path, opts: &Opts) -> Result<Vec<Verdict>> {
    let run_sh = workspace_root().join("../shared/bench/gocni-peer/run.sh");
    if !run_sh.exists() {
        bail!(
            "{} is missing: the peer benchmark lives in shared/",
            run_sh.display()
        );
    }
    let (pods, repeat) = if opts.quick {
        ("30", "1")
    } else {
        ("100", "3")
    };
    println!(
        "\n==> peer: ocicni beside go-cni, {pods} pods, {repeat} repeat(s), modes real and noop, concurrency 1 and 8; ocicni with the built-in plugins beside both in real mode"
    );
    // The built-in variant is the same binary under another name (the runner resolves links).
    let builtin = out_dir.join("ocicni-builtin-bench");
    std::fs::copy(bin.join("ocicni-bench"), &builtin)
        .with_context(|| format!("cannot copy ocicni-bench to {}", builtin.display()))?;
    let benches = format!(
        "{} {}",
        bin.join("ocicni-bench").display(),
        builtin.display()
    );
    let out = Command::new("bash")
        .arg(&run_sh)
        .env("PODS", pods)
        .env("REPEAT", repeat)
        .env("CONCURRENCY", "1 8")
        .env("MODES", "real noop")
        .env("WARMUP", "2")
        .env("EXTRA_BENCHES", benches)
        .stderr(Stdio::inherit())
        .output()
        .context("cannot run the peer benchmark")?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    std::fs::write(out_dir.join("peer.jsonl"), &text)?;
    let rows: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    if !out.status.success() {
        for row in rows.iter().filter(|r| r["ok"] != true) {
            println!(
                "failed scenario: {} {} c={}: {}",
                row["bench"], row["mode"], row["concurrency"], row["first_error"]
            );
        }
        bail!("the peer benchmark failed ({})", out.status);
    }
    let (verdicts, summary) = summarize_peer(&rows);
    save_peer_summary(&summary);
    Ok(verdicts)
}

/// Median of a numeric field over repeats.
fn median(rows: &[&Value], path: &[&str]) -> f64 {
    let mut xs: Vec<f64> = rows
        .iter()
        .filter_map(|r| {
            path.iter()
                .try_fold(*r, |v, k| v.get(*k))
                .and_then(Value::as_f64)
        })
        .collect();
    xs.sort_by(f64::total_cmp);
    if xs.is_empty() {
        f64::NAN
    } else {
        xs[xs.len() / 2]
    }
}

/// The per-repeat ratios of our set-up rate to go-cni's, repeat `i` of one against repeat `i` of
/// the other (run.sh runs both, in rotated order, within each repeat), and their median. One
/// repeat disturbed by load elsewhere moves the ratio of medians less than it moves a single
/// ratio, but it shows here.
struct Paired {
    median: String,
    each: String,
}

fn paired_ratios(groups: &BTreeMap<PeerKey, Vec<&Value>>, mode: &str, c: i64) -> Paired {
    let rates = |bench: &str| -> Vec<f64> {
        groups
            .get(&(mode.to_owned(), c, bench.to_owned()))
            .map(|g| {
                g.iter()
                    .map(|r| r["setup"]["pods_per_s"].as_f64().unwrap_or(f64::NAN))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut ratios: Vec<f64> = rates("ocicni-rs-bench")
        .iter()
        .zip(rates("gocni-bench"))
        .map(|(ours, go)| ours / go)
        .collect();
    let each = ratios
        .iter()
        .map(|r| format!("{r:.2}x"))
        .collect::<Vec<_>>()
        .join(", ");
    ratios.sort_by(f64::total_cmp);
    let median = ratios
        .get(ratios.len() / 2)
        .map_or_else(|| "-".to_owned(), |m| format!("{m:.2}x"));
    Paired { median, each }
}

/// One peer-bench configuration: (mode, concurrency, bench program).
type PeerKey = (String, i64, String);
/// Per configuration: set-up pods/s, full-cycle pods/s, own share of plugin time (%).
type PeerSummary = BTreeMap<PeerKey, (f64, f64, f64)>;

/// The peer table printed, the verdicts, and the summary to save.
fn summarize_peer(rows: &[Value]) -> (Vec<Verdict>, PeerSummary) {
    let mut groups: BTreeMap<PeerKey, Vec<&Value>> = BTreeMap::new();
    for row in rows.iter().filter(|r| r.get("skipped").is_none()) {
        let key = (
            row["mode"].as_str().unwrap_or("?").to_owned(),
            row["concurrency"].as_i64().unwrap_or(0),
            row["bench"].as_str().unwrap_or("?").to_owned(),
        );
        groups.entry(key).or_default().push(row);
    }
    let summary = print_peer_table(&groups);
    print_peer_ceiling(&groups);
    let verdicts = peer_verdicts(&groups, &summary);
    (verdicts, summary)
}

/// Prints the medians of each configuration and returns what the verdicts need.
fn print_peer_table(groups: &BTreeMap<PeerKey, Vec<&Value>>) -> PeerSummary {
    println!(
        "\n{:<5} {:>2} {:<16} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8} {:>8} {:>9}",
        "mode",
        "c",
        "bench",
        "setup/s",
        "p50 ms",
        "p99 ms",
        "remove/s",
        "p50 ms",
        "p99 ms",
        "own %",
        "own ms",
        "sync ms",
        "cpu ms"
    );
    let mut summary = BTreeMap::new();
    for ((mode, c, bench), group) in groups {
        let own = median(group, &["overhead", "setup", "own_pct_of_plugin_time"]);
        let shown = |x: f64, digits: usize| {
            if x.is_nan() {
                "-".to_owned()
            } else {
                format!("{x:.digits$}")
            }
        };
        let cpu = median(group, &["setup", "cpu", "self_ms_per_op"])
            + median(group, &["setup", "cpu", "children_ms_per_op"]);
        println!(
            "{mode:<5} {c:>2} {bench:<16} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>8} {:>8} {:>8} {:>9}",
            median(group, &["setup", "pods_per_s"]),
            median(group, &["setup", "p50_ms"]),
            median(group, &["setup", "p99_ms"]),
            median(group, &["remove", "pods_per_s"]),
            median(group, &["remove", "p50_ms"]),
            median(group, &["remove", "p99_ms"]),
            shown(own, 1),
            shown(median(group, &["overhead", "setup", "own_ms_mean"]), 2),
            shown(median(group, &["cache_write_floor", "mean_ms"]), 2),
            if cpu.is_nan() {
                "-".to_owned()
            } else {
                format!(
                    "{cpu:.2} ({:.2})",
                    median(group, &["setup", "cpu", "self_ms_per_op"])
                )
            },
        );
        summary.insert(
            (mode.clone(), *c, bench.clone()),
            (
                median(group, &["setup", "pods_per_s"]),
                median(group, &["cycle_pods_per_s"]),
                own,
            ),
        );
    }
    println!(
        "own %/ms: set-up time per pod spent outside plugin processes (ocicni only); sync ms: one \
         durable result-cache write (temp file, fsync, rename, directory fsync), paid once per \
         set-up; go-cni's libcni writes its cache without syncing; cpu ms: CPU time per set-up of \
         the bench process and its plugins (in brackets: the process alone; ocicni only)"
    );
    summary
}

/// Prints the best set-up ratio any library running the same plugins could reach in this run.
fn print_peer_ceiling(groups: &BTreeMap<PeerKey, Vec<&Value>>) {
    // At concurrency 1 a set-up cannot take less than its plugin processes, which run one after
    // the other (each gets the previous result), plus the durable cache write.
    let ours_c1 = groups
        .get(&("noop".to_owned(), 1, "ocicni-rs-bench".to_owned()))
        .map(|g| {
            median(g, &["overhead", "setup", "plugin_ms_mean"])
                + median(g, &["cache_write_floor", "mean_ms"])
        });
    let go_c1 = groups
        .get(&("noop".to_owned(), 1, "gocni-bench".to_owned()))
        .map(|g| median(g, &["setup", "mean_ms"]));
    if let (Some(floor), Some(go)) = (ours_c1, go_c1) {
        println!(
            "noop c=1 ceiling: go-cni set-up mean {go:.2} ms / (our plugin time + one durable \
             cache write = {floor:.2} ms) = {:.2}x at best, with no other work at all",
            go / floor
        );
    }
}

fn peer_verdicts(groups: &BTreeMap<PeerKey, Vec<&Value>>, summary: &PeerSummary) -> Vec<Verdict> {
    let mut verdicts = Vec::new();
    for mode in ["noop", "real"] {
        for c in [1, 8] {
            let (Some(ours), Some(go)) = (
                summary.get(&(mode.to_owned(), c, "ocicni-rs-bench".to_owned())),
                summary.get(&(mode.to_owned(), c, "gocni-bench".to_owned())),
            ) else {
                continue;
            };
            let ratio = ours.0 / go.0;
            let paired = paired_ratios(groups, mode, c);
            let (want, label) = if mode == "noop" {
                (1.5, ">= 1.5x")
            } else {
                (1.0, "no slower than")
            };
            verdicts.push(Verdict::judged(
                format!("peer {mode} c={c}: set-up pods/s {label} go-cni"),
                ratio >= want,
                format!(
                    "{:.1} vs {:.1} pods/s ({ratio:.2}x, ratio of medians); median of the \
                     per-repeat paired ratios {} ({}); full cycle {:.2}x",
                    ours.0,
                    go.0,
                    paired.median,
                    paired.each,
                    ours.1 / go.1
                ),
            ));
            if mode == "real" {
                verdicts.push(Verdict::judged(
                    format!("peer real c={c}: own overhead < 10% of plugin time"),
                    ours.2 < 10.0,
                    format!("{:.1}%", ours.2),
                ));
                verdicts.extend(builtin_verdicts(groups, summary, c, go.0));
            }
        }
    }
    verdicts
}

/// The built-in plugins' targets (#25) at concurrency `c`, beside go-cni's set-up rate `go`.
fn builtin_verdicts(
    groups: &BTreeMap<PeerKey, Vec<&Value>>,
    summary: &PeerSummary,
    c: i64,
    go: f64,
) -> Vec<Verdict> {
    let key = ("real".to_owned(), c, "ocicni-rs-builtin".to_owned());
    let (Some(builtin), Some(rows)) = (summary.get(&key), groups.get(&key)) else {
        return Vec::new();
    };
    let remove = median(rows, &["remove", "pods_per_s"]);
    let p50 = median(rows, &["setup", "p50_ms"]);
    let mut out = vec![
        Verdict::judged(
            format!("peer real c={c}: built-in set-up pods/s >= 20x go-cni's"),
            builtin.0 >= 20.0 * go,
            format!(
                "{:.1} vs {go:.1} pods/s ({:.1}x)",
                builtin.0,
                builtin.0 / go
            ),
        ),
        Verdict::judged(
            format!("peer real c={c}: built-in teardown within 2x of its set-up"),
            remove * 2.0 >= builtin.0,
            format!("remove {remove:.1} pods/s, set-up {:.1} pods/s", builtin.0),
        ),
    ];
    if c == 1 {
        out.push(Verdict::judged(
            "peer real c=1: built-in set-up p50 under 5 ms",
            p50 < 5.0,
            format!("{p50:.2} ms"),
        ));
    }
    out
}

fn save_peer_summary(summary: &PeerSummary) {
    let json_summary: Vec<Value> = summary
        .iter()
        .map(|((mode, c, bench), (setup, cycle, own))| {
            json!({"mode": mode, "concurrency": c, "bench": bench, "setup_pods_per_s": setup, "cycle_pods_per_s": cycle, "own_pct": own})
        })
        .collect();
    let path: PathBuf = workspace_root().join("target/bench/peer-summary.json");
    let _ = std::fs::write(
        path,
        serde_json::to_vec_pretty(&json_summary).unwrap_or_default(),
    );
}

/// Runs `ip` (iproute2) with `args`, failing with its status.
fn ip(args: &[&str]) -> Result<()> {
    let status = Command::new("ip")
        .args(args)
        .status()
        .context("cannot run ip (iproute2)")?;
    if !status.success() {
        bail!("ip {} failed ({status})", args.join(" "));
    }
    Ok(())
}

/// The number at `path` in a result row, NaN when it is missing.
fn num(row: &Value, path: &[&str]) -> f64 {
    path.iter()
        .try_fold(row, |v, k| v.get(*k))
        .and_then(Value::as_f64)
        .unwrap_or(f64::NAN)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(mode: &str, c: i64, bench: &str, setup: f64, own: f64) -> Value {
        json!({
            "mode": mode, "concurrency": c, "bench": bench,
            "setup": {"pods_per_s": setup, "p50_ms": 1.0, "p99_ms": 2.0},
            "remove": {"pods_per_s": setup, "p50_ms": 1.0, "p99_ms": 2.0},
            "cycle_pods_per_s": setup / 2.0,
            "overhead": {"setup": {"own_pct_of_plugin_time": own}},
        })
    }

    #[test]
    fn peer_verdicts_judge_the_median_of_repeats_against_the_targets() {
        let rows = vec![
            row("noop", 1, "ocicni-rs-bench", 300.0, 1.0),
            row("noop", 1, "ocicni-rs-bench", 100.0, 1.0),
            row("noop", 1, "ocicni-rs-bench", 320.0, 1.0),
            row("noop", 1, "gocni-bench", 190.0, 0.0),
            row("real", 8, "ocicni-rs-bench", 9.0, 12.0),
            row("real", 8, "gocni-bench", 10.0, 0.0),
        ];
        let (verdicts, _) = summarize_peer(&rows);
        let found = |target: &str| {
            verdicts
                .iter()
                .find(|v| v.target == target)
                .unwrap_or_else(|| panic!("no verdict {target:?}"))
                .ok
        };
        // Median 300 vs 190: 1.58x.
        assert!(found("peer noop c=1: set-up pods/s >= 1.5x go-cni"));
        assert!(!found("peer real c=8: set-up pods/s no slower than go-cni"));
        assert!(!found("peer real c=8: own overhead < 10% of plugin time"));
        assert_eq!(verdicts.len(), 3);
    }
}

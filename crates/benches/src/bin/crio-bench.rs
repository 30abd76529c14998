//! The crio-lite benchmark: what the daemon adds to a sandbox beyond ocicni's own set-up, and how
//! much memory it holds.
//!
//! Run inside the "node" network namespace it is started in (`ip netns exec NODE crio-bench ...`),
//! one scenario (mode x concurrency) per run, printing one JSON line. Two series are measured on
//! the same network (same bridge, same host-local data directory, which host-local locks, so
//! addresses stay unique; distinct container IDs and host ports; separate result caches):
//!
//! - **ocicni alone**: an in-process `Ocicni` (the daemon's settings: loopback in-process,
//!   Kubernetes CNI_ARGS, one port mapping per pod) sets up `--sandboxes` pods whose namespaces
//!   were pinned beforehand (untimed), then tears them down.
//! - **crio-lite**: the release daemon on a socket of its own, with the same network and plugin
//!   directories: `RunPodSandbox` per sandbox (timed, over gRPC on one connection as kubelet
//!   does), then `StopPodSandbox` + `RemovePodSandbox` per sandbox (timed as one operation).
//!   Resident memory idle (after one `Version`, before any sandbox or pod exists), with the
//!   sandboxes up and with `--memory-sandboxes` up (the extra ones brought up untimed after the
//!   measured ones); at the end SIGTERM and a count of what is left: veths, iptables rules naming
//!   the sandboxes, host-local leases, cache entries, pins, state files.
//!
//! **Concurrency 1 (judged) interleaves the two series** (`"interleaved": true`): the daemon is
//! started first, then for each `i` one ocicni set-up (pod `i`) and one `RunPodSandbox`
//! (sandbox `i`) run back to back, ocicni first on even `i` and the daemon first on odd ones,
//! and the teardowns are interleaved the same way. Run one series after the other, minutes
//! apart, the real plugins' own run time drifted by 10-20 ms between the two phases, so the
//! difference of means swung from -12 to +49 ms between runs while the daemon's share is a few
//! ms; interleaved, both series see the same system state over time and the drift cancels. Each
//! series' `wall_s` is then the sum of its latencies. With both series up at once, the unique-IP
//! check covers all of them (`unique_ips_both_series`) and `veths_after_setup` /
//! `veths_after_run` count both. Concurrency 8 (shown, not judged) runs the series one after the
//! other as before: all ocicni set-ups, all teardowns, then the daemon.
//!
//! `added_per_sandbox_ms.mean` (RunPodSandbox mean - ocicni set-up mean) is what the target is
//! judged on; the daemon's share includes pinning the namespace, which the ocicni series does
//! untimed, and its two state saves (each fsyncs a file and the directory:
//! `crio.state_save_floor` times one on the same file system). `added_per_sandbox_ms.own` is the
//! same difference with each side's time in plugin processes (ocicni's from its executor, the
//! daemon's from its `/metrics`) taken out.
//! Everything made under `--work-dir` is removed by the caller; pins and the daemon go here.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cri_api::v1 as cri;
use cri_api::v1::runtime_service_client::RuntimeServiceClient;
use ocicni::cni_exec::{ObservedExec, PluginRun, ProcessExec};
use ocicni::cni_types::capabilities::PortMapping;
use ocicni::{CniArgsPolicy, CniPlugin, Ocicni, PodNetwork, RuntimeConfig, netns};
use serde_json::{Value, json};
use tokio::net::UnixStream;
use tonic::transport::Channel;

use benches::{Phase, count_files, count_leases, count_veths, loadavg, ms, text};

const SUBNET: &str = "10.77.0.0/16";
const NETWORK: &str = "criobench";
const USAGE: &str = "usage: crio-bench --work-dir DIR --crio-lite BIN [--mode real|noop] \
     [--cni-bin-dir DIR] [--noop-plugin FILE] [--sandboxes N] [--concurrency C] \
     [--memory-sandboxes M] [--warmup W]";

struct Opts {
    work_dir: PathBuf,
    crio_lite: PathBuf,
    mode: String,
    cni_bin_dir: PathBuf,
    noop_plugin: PathBuf,
    sandboxes: usize,
    concurrency: usize,
    memory_sandboxes: usize,
    warmup: usize,
}

fn parse_args() -> Result<Opts, String> {
    let mut o = Opts {
        work_dir: PathBuf::new(),
        crio_lite: PathBuf::new(),
        mode: "real".into(),
        cni_bin_dir: PathBuf::from("/usr/lib/cni"),
        noop_plugin: PathBuf::new(),
        sandboxes: 50,
        concurrency: 1,
        memory_sandboxes: 100,
        warmup: 2,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let flag = arg.trim_start_matches('-').to_owned();
        let mut value = || args.next().ok_or(format!("--{flag} needs a value"));
        let number = |v: String| {
            v.parse::<usize>()
                .map_err(|e| format!("--{flag} {v:?}: {e}"))
        };
        match flag.as_str() {
            "work-dir" => o.work_dir = value()?.into(),
            "crio-lite" => o.crio_lite = value()?.into(),
            "mode" => o.mode = value()?,
            "cni-bin-dir" => o.cni_bin_dir = value()?.into(),
            "noop-plugin" => o.noop_plugin = value()?.into(),
            "sandboxes" => o.sandboxes = number(value()?)?,
            "concurrency" => o.concurrency = number(value()?)?,
            "memory-sandboxes" => o.memory_sandboxes = number(value()?)?,
            "warmup" => o.warmup = number(value()?)?,
            other => return Err(format!("unknown flag --{other}\n{USAGE}")),
        }
    }
    let missing = o.work_dir.as_os_str().is_empty() || o.crio_lite.as_os_str().is_empty();
    if missing || o.sandboxes == 0 || o.concurrency == 0 {
        return Err(USAGE.into());
    }
    if o.mode != "real" && o.mode != "noop" {
        return Err(format!("--mode {:?}: real or noop", o.mode));
    }
    if o.mode == "noop" && !o.noop_plugin.is_file() {
        return Err(format!(
            "--mode noop needs --noop-plugin FILE ({} is not a file)",
            o.noop_plugin.display()
        ));
    }
    Ok(o)
}

/// The time spent in plugin processes per CNI command, added up from cni-exec's `ObservedExec`
/// reports (the executor crio-lite's own metrics come from too).
#[derive(Default)]
struct PluginTime {
    per_command: Mutex<HashMap<String, Duration>>,
}

impl PluginTime {
    fn add(&self, run: &PluginRun<'_>) {
        if let Ok(mut map) = self.per_command.lock() {
            *map.entry(run.command().to_owned()).or_default() += run.elapsed;
        }
    }

    /// Seconds spent in plugins for `command` so far.
    fn seconds(&self, command: &str) -> f64 {
        self.per_command
            .lock()
            .ok()
            .and_then(|m| m.get(command).copied())
            .unwrap_or_default()
            .as_secs_f64()
    }
}

/// Seconds crio-lite spent in plugins for `command` so far, from its `/metrics`.
async fn daemon_plugin_seconds(socket: &Path, command: &str) -> Result<f64, String> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut stream = UnixStream::connect(socket)
        .await
        .map_err(|e| format!("{}: {e}", socket.display()))?;
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: crio-lite\r\nConnection: close\r\n\r\n")
        .await
        .map_err(|e| format!("GET /metrics: {e}"))?;
    let mut body = Vec::new();
    stream
        .read_to_end(&mut body)
        .await
        .map_err(|e| format!("GET /metrics: {e}"))?;
    let label = format!("command=\"{command}\"");
    Ok(String::from_utf8_lossy(&body)
        .lines()
        .filter(|l| {
            l.starts_with("crio_lite_cni_plugin_duration_seconds_sum{") && l.contains(&label)
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum())
}

/// Mean plugin time per operation and the mean latency without it, in ms.
fn plugin_share(phase_stats: &Value, plugin_seconds: f64) -> Value {
    let ops =
        phase_stats["ops"].as_f64().unwrap_or(0.0) - phase_stats["errors"].as_f64().unwrap_or(0.0);
    if ops <= 0.0 {
        return Value::Null;
    }
    let plugin_ms = plugin_seconds * 1e3 / ops;
    let own_ms = phase_stats["mean_ms"].as_f64().unwrap_or(0.0) - plugin_ms;
    json!({"plugin_ms_mean": (plugin_ms * 1e3).round() / 1e3, "own_ms_mean": (own_ms * 1e3).round() / 1e3})
}

/// Where everything of one scenario lives, all under the work dir.
struct Dirs {
    conf: PathBuf,
    plugins: PathBuf,
    ipam: PathBuf,
    ocicni_cache: PathBuf,
    /// Run directories (locks, pending entries) of both sides, on a tmpfs as on a real node.
    run: PathBuf,
    ocicni_netns: PathBuf,
    crio: PathBuf,
}

impl Dirs {
    fn new(o: &Opts) -> Dirs {
        let w = &o.work_dir;
        Dirs {
            conf: w.join("net.d"),
            plugins: if o.mode == "noop" {
                w.join("noop-bin")
            } else {
                o.cni_bin_dir.clone()
            },
            ipam: w.join("ipam"),
            ocicni_cache: w.join("ocicni-cache"),
            run: benches::tmpfs_run_dir("crio-bench"),
            ocicni_netns: w.join("ocicni-netns"),
            crio: w.join("crio"),
        }
    }
    fn socket(&self) -> PathBuf {
        self.crio.join("run/crio-lite.sock")
    }
    fn crio_netns(&self) -> PathBuf {
        self.crio.join("run/netns")
    }
    fn crio_cache(&self) -> PathBuf {
        self.crio.join("cache")
    }
    fn log(&self) -> PathBuf {
        self.crio.join("crio-lite.log")
    }

    /// The network (bridge + host-local with its leases here, then portmap) and, for noop, the
    /// plugin dir where every plugin name is the no-op script.
    fn write(&self, o: &Opts) -> Result<(), String> {
        let io = |what: &Path, e: std::io::Error| format!("{}: {e}", what.display());
        for dir in [&self.conf, &self.ipam, &self.crio] {
            std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
        }
        let conf = json!({
            "cniVersion": "1.0.0", "name": NETWORK,
            "plugins": [
                {"type": "bridge", "bridge": "criobench0", "isGateway": true, "ipMasq": true,
                 "hairpinMode": true,
                 "ipam": {"type": "host-local", "dataDir": self.ipam, "routes": [{"dst": "0.0.0.0/0"}],
                          "ranges": [[{"subnet": SUBNET}]]}},
                {"type": "portmap", "capabilities": {"portMappings": true}},
            ],
        });
        let file = self.conf.join("10-criobench.conflist");
        std::fs::write(&file, conf.to_string()).map_err(|e| io(&file, e))?;
        if o.mode == "noop" {
            std::fs::create_dir_all(&self.plugins).map_err(|e| io(&self.plugins, e))?;
            for name in ["bridge", "portmap", "host-local", "loopback"] {
                let link = self.plugins.join(name);
                std::os::unix::fs::symlink(&o.noop_plugin, &link).map_err(|e| io(&link, e))?;
            }
        }
        Ok(())
    }
}

/// A phase's statistics; its rate is `per_s`.
fn stats(phase: &Phase) -> Value {
    benches::stats(phase, "per_s")
}

/// Runs `f(0..n)` with `concurrency` workers, timing each call; the first error is kept.
async fn run_phase<F, Fut>(
    n: usize,
    concurrency: usize,
    f: F,
    first_error: &Mutex<Option<String>>,
) -> Phase
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<(), String>> + Send + 'static,
{
    benches::run_phase(n, concurrency, f, &|_| None, first_error).await
}

fn take_error(first_error: &Mutex<Option<String>>) -> Option<String> {
    first_error
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take()
}

// ---- leftovers ---------------------------------------------------------------------------------

/// iptables rules (in this netns) whose text names one of `ids` (portmap puts the container ID
/// in its comments).
fn count_rules(ids: &BTreeSet<String>) -> i64 {
    benches::count_rules(|l| ids.iter().any(|id| l.contains(id.as_str())))
}

/// Mounts in this mount namespace below `dir` (pins; the directory's own self-bind not counted).
fn count_mounts_below(dir: &Path) -> i64 {
    node_primitives::mounts::read_own().map_or(-1, |mounts| {
        mounts
            .iter()
            .filter(|m| m.mount_point.starts_with(dir) && m.mount_point != dir)
            .count() as i64
    })
}

/// VmRSS and VmHWM of a process, in KiB.
fn rss_kib(pid: u32) -> (i64, i64) {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<i64>().ok())
            .unwrap_or(-1)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// What one state save of crio-lite costs on this file system, measured the same way its store
/// saves (temp file, fsync, rename, fsync of the directory). RunPodSandbox saves twice.
fn state_save_floor(dir: &Path, runs: usize) -> Value {
    let save = |i: usize| -> std::io::Result<()> {
        use std::io::Write as _;
        let tmp = dir.join(".probe.json.tmp");
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(format!("{{\"probe\":{i},\"pad\":\"{:0>600}\"}}", 0).as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&tmp, dir.join("probe.json"))?;
        std::fs::File::open(dir)?.sync_all()
    };
    if let Err(e) = std::fs::create_dir_all(dir) {
        return json!({"error": format!("{}: {e}", dir.display())});
    }
    let mut lat = Vec::with_capacity(runs);
    for i in 0..runs {
        let t0 = Instant::now();
        if let Err(e) = save(i) {
            return json!({"error": format!("{}: {e}", dir.display())});
        }
        lat.push(t0.elapsed());
    }
    let _ = std::fs::remove_dir_all(dir);
    let s = stats(&Phase::of_latencies(lat));
    json!({"runs": runs, "p50_ms": s["p50_ms"], "mean_ms": s["mean_ms"], "max_ms": s["max_ms"]})
}

// ---- main --------------------------------------------------------------------------------------

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let opts = match parse_args() {
        Ok(o) => o,
        Err(msg) => {
            eprintln!("crio-bench: {msg}");
            std::process::exit(2);
        }
    };
    let interleave = opts.concurrency == 1;
    let mut rep = json!({
        "bench": "crio-bench", "mode": opts.mode, "sandboxes": opts.sandboxes,
        "concurrency": opts.concurrency, "warmup": opts.warmup,
        "memory_sandboxes": opts.memory_sandboxes, "network": NETWORK, "subnet": SUBNET,
        "added_is": "RunPodSandbox mean - ocicni set-up mean (ms)", "interleaved": interleave,
        "num_cpu": std::thread::available_parallelism().map_or(1, std::num::NonZero::get),
        "kernel": text("/proc/sys/kernel/osrelease").trim(), "loadavg_start": loadavg(),
    });
    let dirs = Dirs::new(&opts);
    let mut outcome = dirs.write(&opts);
    if outcome.is_ok() && interleave {
        outcome = interleaved(&opts, &dirs, &mut rep).await;
    } else if outcome.is_ok() {
        outcome = ocicni_alone(&opts, &dirs, &mut rep).await;
        if outcome.is_ok() {
            outcome = crio_part(&opts, &dirs, &mut rep, None).await;
        }
    }
    summarize(&mut rep);
    let _ = std::fs::remove_dir_all(&dirs.run);
    rep["loadavg_end"] = json!(loadavg());
    let ok = match outcome {
        Ok(()) => rep.get("first_error").is_none() && leftovers_clean(&rep),
        Err(err) => {
            rep["first_error"] = json!(err);
            false
        }
    };
    rep["ok"] = json!(ok);
    println!("{rep}");
    if !ok {
        std::process::exit(1);
    }
}

fn summarize(rep: &mut Value) {
    let get = |part: &str, phase: &str, key: &str| rep[part][phase][key].as_f64();
    let diff = |key: &str| match (get("crio", "run", key), get("ocicni", "setup", key)) {
        (Some(a), Some(b)) => json!(((a - b) * 1e3).round() / 1e3),
        _ => Value::Null,
    };
    let teardown = match (
        get("crio", "stop_remove", "mean_ms"),
        get("ocicni", "teardown", "mean_ms"),
    ) {
        (Some(a), Some(b)) => json!(((a - b) * 1e3).round() / 1e3),
        _ => Value::Null,
    };
    let own = match (
        rep["crio"]["run_split"]["own_ms_mean"].as_f64(),
        rep["ocicni"]["setup_split"]["own_ms_mean"].as_f64(),
    ) {
        (Some(a), Some(b)) => json!(((a - b) * 1e3).round() / 1e3),
        _ => Value::Null,
    };
    // `own`: the same difference with each side's plugin time taken out, which removes most of
    // the noise other load puts into plugin runs.
    // `wall`: the same from throughput (phase wall time per sandbox), the cost that matters
    // when several are in flight and latency holds time spent waiting for a CPU.
    let wall = match (get("crio", "run", "per_s"), get("ocicni", "setup", "per_s")) {
        (Some(a), Some(b)) if a > 0.0 && b > 0.0 => {
            json!(((1e3 / a - 1e3 / b) * 1e3).round() / 1e3)
        }
        _ => Value::Null,
    };
    rep["added_per_sandbox_ms"] =
        json!({"mean": diff("mean_ms"), "p50": diff("p50_ms"), "own": own, "wall": wall});
    rep["added_per_teardown_ms"] = json!({"mean": teardown});
}

fn leftovers_clean(rep: &Value) -> bool {
    let all_zero = |v: &Value| {
        v.as_object()
            .is_some_and(|m| m.values().all(|x| x.as_i64() == Some(0) || x == false))
    };
    all_zero(&rep["ocicni"]["leftover"]) && all_zero(&rep["crio"]["leftover"])
}

// ---- part 1: ocicni alone ----------------------------------------------------------------------

fn pod_network(id: &str, netns: &Path, host_port: u16) -> PodNetwork {
    let mut pod = PodNetwork {
        name: id.to_owned(),
        namespace: "bench".into(),
        id: id.to_owned(),
        uid: format!("00000000-0000-0000-0000-{host_port:012}"),
        netns: netns.display().to_string(),
        ..PodNetwork::default()
    };
    let rt = RuntimeConfig {
        port_mappings: vec![PortMapping {
            host_port,
            container_port: 80,
            protocol: "tcp".into(),
            host_ip: None,
        }],
        ..RuntimeConfig::default()
    };
    pod.runtime_config.insert(NETWORK.to_owned(), rt);
    pod
}

/// The daemon's own settings (see crio-lite's wiring::build_cni), without its metrics, on an
/// executor that adds up the time spent in plugins.
async fn ocicni_plugin(dirs: &Dirs) -> Result<(Ocicni, Arc<PluginTime>), String> {
    let timing = Arc::new(PluginTime::default());
    let observed = Arc::clone(&timing);
    let exec = ObservedExec::new(Arc::new(ProcessExec::new()), move |run: &PluginRun<'_>| {
        observed.add(run);
    });
    let plugin = Ocicni::builder()
        .exec(Arc::new(exec))
        .conf_dir(&dirs.conf)
        .plugin_dirs([dirs.plugins.clone()])
        .cache_dir(&dirs.ocicni_cache)
        .run_dir(dirs.run.join("ocicni"))
        .cni_args(CniArgsPolicy::Kubernetes)
        .loopback(true)
        .default_network(NETWORK)
        .build()
        .await
        .map_err(|e| format!("ocicni: {e}"))?;
    Ok((plugin, timing))
}

/// The warm-up pods, then the measured ones.
fn ocicni_pods(o: &Opts, dirs: &Dirs) -> Vec<PodNetwork> {
    (0..o.warmup + o.sandboxes)
        .map(|i| {
            // Same width, so no ID is a prefix of another (rules are counted by substring); no
            // leading zero, which the no-op plugin's shell arithmetic would read as octal.
            let id = format!("ocb-{}", 1000 + i);
            let netns = dirs.ocicni_netns.join(&id);
            pod_network(&id, &netns, 20000 + i as u16)
        })
        .collect()
}

/// Whatever happened, nothing of ours stays attached (after a failure) or pinned; then the count
/// of what ocicni left.
async fn ocicni_release(
    dirs: &Dirs,
    rep: &mut Value,
    plugin: &Ocicni,
    pods: &[PodNetwork],
    failed: bool,
) {
    for pod in pods {
        if failed {
            let _ = plugin.teardown_pod(pod).await;
        }
        let _ = netns::remove_pinned_async(&pod.netns).await;
    }
    plugin.shutdown().await;
    let _ = netns::release_dir(&dirs.ocicni_netns);
    rep["ocicni"]["leftover"] = json!({
        "veths": count_veths(),
        "iptables_rules": count_rules(&pods.iter().map(|p| p.id.clone()).collect()),
        "ipam_leases": count_leases(&dirs.ipam),
        "cache_entries": count_files(&dirs.ocicni_cache.join("results"), &|_| true),
        "pins": count_mounts_below(&dirs.ocicni_netns),
    });
}

/// Sequential scenarios (concurrency > 1): all ocicni set-ups, then all teardowns, before the
/// daemon starts.
async fn ocicni_alone(o: &Opts, dirs: &Dirs, rep: &mut Value) -> Result<(), String> {
    eprintln!(
        "[crio-bench] {} c={}: ocicni alone, {} pods",
        o.mode, o.concurrency, o.sandboxes
    );
    let (plugin, timing) = ocicni_plugin(dirs).await?;
    let pods = ocicni_pods(o, dirs);
    let outcome = ocicni_phases(o, rep, &plugin, &timing, &pods).await;
    ocicni_release(dirs, rep, &plugin, &pods, outcome.is_err()).await;
    outcome
}

/// Interleaved scenarios (concurrency 1): the daemon runs the whole time and each ocicni set-up
/// or teardown sits next to the daemon's operation on the same index (see the module docs).
async fn interleaved(o: &Opts, dirs: &Dirs, rep: &mut Value) -> Result<(), String> {
    let (plugin, timing) = ocicni_plugin(dirs).await?;
    let pods = ocicni_pods(o, dirs);
    let alongside = Alongside {
        plugin: &plugin,
        timing: &timing,
        all: &pods,
    };
    let outcome = crio_part(o, dirs, rep, Some(&alongside)).await;
    ocicni_release(dirs, rep, &plugin, &pods, outcome.is_err()).await;
    outcome
}

/// The ocicni series measured alongside the daemon's, in interleaved scenarios.
struct Alongside<'a> {
    plugin: &'a Ocicni,
    timing: &'a PluginTime,
    /// Warm-up pods first, then the measured ones.
    all: &'a [PodNetwork],
}

/// Untimed: one set-up and teardown per warm-up pod, then a pinned namespace for each measured
/// pod. Returns the measured pods.
async fn ocicni_prepare<'a>(
    o: &Opts,
    rep: &mut Value,
    plugin: &Ocicni,
    all: &'a [PodNetwork],
) -> Result<&'a [PodNetwork], String> {
    let (warm, pods) = all.split_at(o.warmup.min(all.len()));
    for pod in warm {
        netns::create_pinned_async(&pod.netns)
            .await
            .map_err(|e| format!("warm-up netns: {e}"))?;
        plugin
            .setup_pod(pod)
            .await
            .map_err(|e| format!("warm-up setup {}: {e}", pod.id))?;
        plugin
            .teardown_pod(pod)
            .await
            .map_err(|e| format!("warm-up teardown {}: {e}", pod.id))?;
    }
    let t0 = Instant::now();
    for pod in pods {
        netns::create_pinned_async(&pod.netns)
            .await
            .map_err(|e| format!("netns for {}: {e}", pod.id))?;
    }
    rep["ocicni"]["netns_create_mean_ms"] = json!(ms(t0.elapsed() / pods.len().max(1) as u32));
    Ok(pods)
}

/// One ocicni set-up; the pod's IPv4 addresses go to `ips`.
async fn ocicni_setup(
    plugin: &Ocicni,
    pod: &PodNetwork,
    ips: &Mutex<Vec<String>>,
) -> Result<(), String> {
    let results = plugin
        .setup_pod(pod)
        .await
        .map_err(|e| format!("setup {}: {e}", pod.id))?;
    let got: Vec<String> = results
        .iter()
        .filter_map(|r| r.result.first_ipv4())
        .map(|ip| ip.address.addr().to_string())
        .collect();
    if got.is_empty() {
        return Err(format!("setup {}: no IPv4 address in the result", pod.id));
    }
    ips.lock().map_err(|_| "poisoned")?.extend(got);
    Ok(())
}

async fn ocicni_teardown(plugin: &Ocicni, pod: &PodNetwork) -> Result<(), String> {
    plugin
        .teardown_pod(pod)
        .await
        .map_err(|e| format!("teardown {}: {e}", pod.id))
}

async fn ocicni_phases(
    o: &Opts,
    rep: &mut Value,
    plugin: &Ocicni,
    timing: &PluginTime,
    all: &[PodNetwork],
) -> Result<(), String> {
    let pods = ocicni_prepare(o, rep, plugin, all).await?;
    let first_error = Mutex::new(None);
    let ips = Arc::new(Mutex::new(Vec::new()));
    let pods: Arc<Vec<PodNetwork>> = Arc::new(pods.to_vec());
    let add_before = timing.seconds("ADD");
    let setup = run_phase(
        pods.len(),
        o.concurrency,
        {
            let (plugin, pods, ips) = (plugin.clone(), Arc::clone(&pods), Arc::clone(&ips));
            move |i| {
                let (plugin, pods, ips) = (plugin.clone(), Arc::clone(&pods), Arc::clone(&ips));
                async move { ocicni_setup(&plugin, &pods[i], &ips).await }
            }
        },
        &first_error,
    )
    .await;
    rep["ocicni"]["setup"] = stats(&setup);
    rep["ocicni"]["setup_split"] =
        plugin_share(&rep["ocicni"]["setup"], timing.seconds("ADD") - add_before);
    rep["ocicni"]["veths_after_setup"] = json!(count_veths());
    let del_before = timing.seconds("DEL");
    let teardown = run_phase(
        pods.len(),
        o.concurrency,
        {
            let (plugin, pods) = (plugin.clone(), Arc::clone(&pods));
            move |i| {
                let (plugin, pods) = (plugin.clone(), Arc::clone(&pods));
                async move { ocicni_teardown(&plugin, &pods[i]).await }
            }
        },
        &first_error,
    )
    .await;
    rep["ocicni"]["teardown"] = stats(&teardown);
    rep["ocicni"]["teardown_split"] = plugin_share(
        &rep["ocicni"]["teardown"],
        timing.seconds("DEL") - del_before,
    );
    take_error(&first_error).map_or(Ok(()), |e| Err(format!("ocicni alone: {e}")))
}

/// Times `op` into `phase`; a failure counts as an error and the first one is kept.
async fn timed(
    phase: &mut Phase,
    op: impl std::future::Future<Output = Result<(), String>>,
    first_error: &Mutex<Option<String>>,
) {
    let t0 = Instant::now();
    match op.await {
        Ok(()) => phase.latencies.push(t0.elapsed()),
        Err(err) => {
            phase.errors += 1;
            first_error
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .get_or_insert(err);
        }
    }
}

/// One at a time, `a(i)` and `b(i)` for each `i`, `a` first on even `i` and `b` first on odd
/// ones, so both series see the same system over time and neither always follows the other.
/// Each phase's wall time is the sum of its latencies (the phases overlap in time, so that is
/// what one series alone would have taken).
async fn alternate<A, FutA, B, FutB>(
    n: usize,
    a: A,
    b: B,
    first_error: &Mutex<Option<String>>,
) -> (Phase, Phase)
where
    A: Fn(usize) -> FutA,
    FutA: std::future::Future<Output = Result<(), String>>,
    B: Fn(usize) -> FutB,
    FutB: std::future::Future<Output = Result<(), String>>,
{
    let (mut pa, mut pb) = (Phase::default(), Phase::default());
    for i in 0..n {
        if i % 2 == 0 {
            timed(&mut pa, Box::pin(a(i)), first_error).await;
            timed(&mut pb, Box::pin(b(i)), first_error).await;
        } else {
            timed(&mut pb, Box::pin(b(i)), first_error).await;
            timed(&mut pa, Box::pin(a(i)), first_error).await;
        }
    }
    pa.wall = pa.latencies.iter().sum();
    pb.wall = pb.latencies.iter().sum();
    (pa, pb)
}

// ---- part 2: crio-lite over its socket ---------------------------------------------------------

/// The daemon process; killed on drop if it is still running.
struct Daemon {
    child: Child,
}

impl Daemon {
    fn start(o: &Opts, dirs: &Dirs) -> Result<Daemon, String> {
        let log = std::fs::File::create(dirs.log())
            .map_err(|e| format!("{}: {e}", dirs.log().display()))?;
        let child = Command::new(&o.crio_lite)
            // Nothing from the machine's /etc/crio-lite: only these flags.
            .args(["--config", "", "--config-dir", ""])
            .arg("--listen")
            .arg(dirs.socket())
            .arg("--root")
            .arg(dirs.crio.join("state"))
            .arg("--runroot")
            .arg(dirs.crio.join("run"))
            // Pins in crio/run/netns (crio_netns), not the machine's /var/run/netns.
            .arg("--namespaces-dir")
            .arg(dirs.crio.join("run"))
            .arg("--cni-config-dir")
            .arg(&dirs.conf)
            .arg("--cni-plugin-dir")
            .arg(&dirs.plugins)
            .arg("--cache-dir")
            .arg(dirs.crio_cache())
            .arg("--cni-run-dir")
            .arg(dirs.run.join("crio-lite"))
            .args(["--cni-default-network", NETWORK])
            .arg("--builtin-default-network=false")
            .args(["--log-level", "info", "run"])
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", o.crio_lite.display()))?;
        Ok(Daemon { child })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGTERM, then up to 15 s for a clean exit; SIGKILL after that.
    fn terminate(&mut self) -> Result<(), String> {
        if let Ok(Some(status)) = self.child.try_wait() {
            return Err(format!("crio-lite exited early ({status})"));
        }
        let _ = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            match self.child.try_wait() {
                Ok(Some(status)) if status.success() => return Ok(()),
                Ok(Some(status)) => return Err(format!("crio-lite exited with {status}")),
                _ => std::thread::sleep(Duration::from_millis(20)),
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        Err("crio-lite did not stop within 15 s of SIGTERM".into())
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

async fn connect(socket: &Path) -> Result<RuntimeServiceClient<Channel>, String> {
    benches::cri_client(socket).await
}

/// Connects once the daemon answers `Version`; fails early when it exits.
async fn wait_ready(
    daemon: &mut Daemon,
    dirs: &Dirs,
) -> Result<RuntimeServiceClient<Channel>, String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut last = String::new();
    while Instant::now() < deadline {
        if let Ok(Some(status)) = daemon.child.try_wait() {
            return Err(format!(
                "crio-lite exited at start-up ({status}); log:\n{}",
                log_tail(dirs)
            ));
        }
        if dirs.socket().exists() {
            match connect(&dirs.socket()).await {
                Ok(mut client) => match client.version(cri::VersionRequest::default()).await {
                    Ok(_) => return Ok(client),
                    Err(e) => last = e.to_string(),
                },
                Err(e) => last = e,
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Err(format!(
        "crio-lite not ready within 30 s ({last}); log:\n{}",
        log_tail(dirs)
    ))
}

fn log_tail(dirs: &Dirs) -> String {
    let log = text(&dirs.log().display().to_string());
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

fn sandbox_request(name: &str, host_port: u16) -> cri::RunPodSandboxRequest {
    cri::RunPodSandboxRequest {
        config: Some(cri::PodSandboxConfig {
            metadata: Some(cri::PodSandboxMetadata {
                name: name.to_owned(),
                uid: format!("00000000-0000-0000-0000-{host_port:012}"),
                namespace: "bench".to_owned(),
                attempt: 0,
            }),
            hostname: name.to_owned(),
            log_directory: format!("/var/log/pods/bench_{name}"),
            dns_config: Some(cri::DnsConfig {
                servers: vec!["10.96.0.10".to_owned()],
                searches: vec!["bench.svc.cluster.local".to_owned()],
                options: vec!["ndots:5".to_owned()],
            }),
            port_mappings: vec![cri::PortMapping {
                protocol: cri::Protocol::Tcp as i32,
                container_port: 80,
                host_port: i32::from(host_port),
                host_ip: String::new(),
            }],
            labels: [("app".to_owned(), "crio-bench".to_owned())].into(),
            annotations: [("bench/pod".to_owned(), name.to_owned())].into(),
            linux: Some(cri::LinuxPodSandboxConfig {
                cgroup_parent: format!("/kubepods/besteffort/pod{name}"),
                ..Default::default()
            }),
            ..Default::default()
        }),
        runtime_handler: String::new(),
    }
}

async fn run_sandbox(
    client: &RuntimeServiceClient<Channel>,
    name: &str,
    host_port: u16,
) -> Result<String, String> {
    client
        .clone()
        .run_pod_sandbox(sandbox_request(name, host_port))
        .await
        .map(|r| r.into_inner().pod_sandbox_id)
        .map_err(|e| format!("RunPodSandbox {name}: {}", e.message()))
}

async fn stop_remove(client: &RuntimeServiceClient<Channel>, id: &str) -> Result<(), String> {
    let mut client = client.clone();
    let pod_sandbox_id = id.to_owned();
    client
        .stop_pod_sandbox(cri::StopPodSandboxRequest {
            pod_sandbox_id: pod_sandbox_id.clone(),
        })
        .await
        .map_err(|e| format!("StopPodSandbox {id}: {}", e.message()))?;
    client
        .remove_pod_sandbox(cri::RemovePodSandboxRequest { pod_sandbox_id })
        .await
        .map_err(|e| format!("RemovePodSandbox {id}: {}", e.message()))?;
    Ok(())
}

/// Runs `names` at `concurrency`; the IDs of those that came up, in order (empty on failure).
async fn run_all(
    client: &RuntimeServiceClient<Channel>,
    names: &[(String, u16)],
    concurrency: usize,
    ids: &Mutex<Vec<String>>,
    first_error: &Mutex<Option<String>>,
) -> Phase {
    let names: Arc<Vec<(String, u16)>> = Arc::new(names.to_vec());
    let up = Arc::new(Mutex::new(Vec::new()));
    let (client, out) = (client.clone(), Arc::clone(&up));
    let phase = run_phase(
        names.len(),
        concurrency,
        move |i| {
            let (client, names, out) = (client.clone(), Arc::clone(&names), Arc::clone(&out));
            async move {
                let id = run_sandbox(&client, &names[i].0, names[i].1).await?;
                out.lock().map_err(|_| "poisoned")?.push(id);
                Ok(())
            }
        },
        first_error,
    )
    .await;
    let up = std::mem::take(&mut *up.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
    ids.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .extend(up);
    phase
}

async fn stop_remove_all(
    client: &RuntimeServiceClient<Channel>,
    ids: &[String],
    concurrency: usize,
    first_error: &Mutex<Option<String>>,
) -> Phase {
    let ids: Arc<Vec<String>> = Arc::new(ids.to_vec());
    let client = client.clone();
    run_phase(
        ids.len(),
        concurrency,
        move |i| {
            let (client, ids) = (client.clone(), Arc::clone(&ids));
            async move { stop_remove(&client, &ids[i]).await }
        },
        first_error,
    )
    .await
}

async fn crio_part(
    o: &Opts,
    dirs: &Dirs,
    rep: &mut Value,
    alongside: Option<&Alongside<'_>>,
) -> Result<(), String> {
    if alongside.is_some() {
        eprintln!(
            "[crio-bench] {} c={}: crio-lite and ocicni alone interleaved, {} sandboxes and {} pods ({} for memory)",
            o.mode, o.concurrency, o.sandboxes, o.sandboxes, o.memory_sandboxes
        );
    } else {
        eprintln!(
            "[crio-bench] {} c={}: crio-lite, {} sandboxes ({} for memory)",
            o.mode, o.concurrency, o.sandboxes, o.memory_sandboxes
        );
    }
    let started = Instant::now();
    let mut daemon = Daemon::start(o, dirs)?;
    let pid = daemon.pid();
    let ids = Mutex::new(Vec::new());
    let outcome = match wait_ready(&mut daemon, dirs).await {
        Ok(client) => {
            rep["crio"]["ready_ms"] = json!(ms(started.elapsed()));
            let outcome = crio_phases(o, dirs, rep, &client, pid, &ids, alongside).await;
            // After a failure, whatever the daemon still holds goes (the daemon knows best).
            if outcome.is_err() {
                let listed = client
                    .clone()
                    .list_pod_sandbox(cri::ListPodSandboxRequest { filter: None })
                    .await
                    .map(|r| r.into_inner().items)
                    .unwrap_or_default();
                for sandbox in listed {
                    let _ = stop_remove(&client, &sandbox.id).await;
                }
            }
            outcome
        }
        Err(e) => Err(e),
    };
    let stopped = daemon.terminate();
    let ids: BTreeSet<String> = ids
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .into_iter()
        .collect();
    rep["crio"]["leftover"] = json!({
        "veths": count_veths(),
        "iptables_rules": count_rules(&ids),
        "ipam_leases": count_leases(&dirs.ipam),
        "cache_entries": count_files(&dirs.crio_cache().join("results"), &|_| true),
        "pins": count_mounts_below(&dirs.crio_netns()),
        // The sandboxes' state files; the instance lock beside them stays by design.
        "state_files": count_files(&dirs.crio.join("state/sandboxes"), &|_| true),
        "socket_left": dirs.socket().exists(),
    });
    // The daemon prepared its pin directory in this mount namespace; let it go.
    let _ = netns::release_dir(&dirs.crio_netns());
    outcome?;
    stopped
}

fn poisoned<T>(_: T) -> String {
    "poisoned".into()
}

/// StopPodSandbox + RemovePodSandbox of every sandbox (interleaved with ocicni's teardowns
/// when `side` is given): the phase and the daemon's plugin seconds spent in DEL meanwhile.
async fn teardown_phase(
    o: &Opts,
    dirs: &Dirs,
    rep: &mut Value,
    client: &RuntimeServiceClient<Channel>,
    side: Option<(&Alongside<'_>, &[PodNetwork])>,
    ids: &[String],
    first_error: &Mutex<Option<String>>,
) -> Result<(Phase, f64), String> {
    let del_before = daemon_plugin_seconds(&dirs.socket(), "DEL").await?;
    let teardown = if let Some((a, pods)) = side {
        let ocicni_before = a.timing.seconds("DEL");
        let (ocicni_teardowns, teardown) = alternate(
            pods.len().max(ids.len()),
            |i| async move {
                let pod = pods.get(i).ok_or(format!("no ocicni pod {i}"))?;
                ocicni_teardown(a.plugin, pod).await
            },
            |i| async move {
                let id = ids.get(i).ok_or(format!("no sandbox {i}"))?;
                stop_remove(client, id).await
            },
            first_error,
        )
        .await;
        rep["ocicni"]["teardown"] = stats(&ocicni_teardowns);
        rep["ocicni"]["teardown_split"] = plugin_share(
            &rep["ocicni"]["teardown"],
            a.timing.seconds("DEL") - ocicni_before,
        );
        teardown
    } else {
        stop_remove_all(client, ids, o.concurrency, first_error).await
    };
    let del_after = daemon_plugin_seconds(&dirs.socket(), "DEL").await?;
    Ok((teardown, del_after - del_before))
}

/// Memory with `memory_sandboxes` up: tops up untimed, measures, takes the extra ones down.
async fn memory_phase(
    o: &Opts,
    client: &RuntimeServiceClient<Channel>,
    pid: u32,
    all_ids: &Mutex<Vec<String>>,
    first_error: &Mutex<Option<String>>,
    rep: &mut Value,
) -> Result<(), String> {
    let mib = |kib: i64| (kib as f64 / 1024.0 * 100.0).round() / 100.0;
    let fail = |first_error: &Mutex<Option<String>>| take_error(first_error).map_or(Ok(()), Err);
    let mut extra_ids = Vec::new();
    if o.memory_sandboxes > o.sandboxes {
        let extra: Vec<(String, u16)> = (o.sandboxes..o.memory_sandboxes)
            .map(|i| (format!("crio-bench-{i}"), 30000 + i as u16))
            .collect();
        let extra_out = Mutex::new(Vec::new());
        run_all(client, &extra, o.concurrency, &extra_out, first_error).await;
        extra_ids = extra_out.into_inner().map_err(poisoned)?;
        all_ids
            .lock()
            .map_err(poisoned)?
            .extend(extra_ids.iter().cloned());
        fail(first_error)?;
    }
    if o.memory_sandboxes >= o.sandboxes {
        rep["crio"]["rss_mib"]["with_memory_sandboxes"] = json!(mib(rss_kib(pid).0));
    }
    stop_remove_all(client, &extra_ids, o.concurrency, first_error).await;
    fail(first_error)?;
    Ok(())
}

/// The daemon's phases; with `alongside`, ocicni's set-ups and teardowns are interleaved with
/// the timed `RunPodSandbox` and `StopPodSandbox` + `RemovePodSandbox` calls.
async fn crio_phases(
    o: &Opts,
    dirs: &Dirs,
    rep: &mut Value,
    client: &RuntimeServiceClient<Channel>,
    pid: u32,
    all_ids: &Mutex<Vec<String>>,
    alongside: Option<&Alongside<'_>>,
) -> Result<(), String> {
    let mib = |kib: i64| (kib as f64 / 1024.0 * 100.0).round() / 100.0;
    // Before any sandbox or pod exists.
    let (idle, _) = rss_kib(pid);
    rep["crio"]["rss_mib"]["idle"] = json!(mib(idle));
    let first_error = Mutex::new(None);
    let fail = |first_error: &Mutex<Option<String>>| take_error(first_error).map_or(Ok(()), Err);

    for i in 0..o.warmup {
        let id = run_sandbox(client, &format!("warm-{i}"), 29000 + i as u16).await?;
        all_ids.lock().map_err(poisoned)?.push(id.clone());
        stop_remove(client, &id).await?;
    }
    let side = match alongside {
        Some(a) => Some((a, ocicni_prepare(o, rep, a.plugin, a.all).await?)),
        None => None,
    };

    rep["crio"]["state_save_floor"] = state_save_floor(&o.work_dir.join("save-probe"), 20);

    let names: Vec<(String, u16)> = (0..o.sandboxes)
        .map(|i| (format!("crio-bench-{i}"), 30000 + i as u16))
        .collect();
    let ids = Mutex::new(Vec::new());
    let ocicni_ips = Mutex::new(Vec::new());
    let add_before = daemon_plugin_seconds(&dirs.socket(), "ADD").await?;
    let run = if let Some((a, pods)) = side {
        let ocicni_before = a.timing.seconds("ADD");
        let (ips, ids, names) = (&ocicni_ips, &ids, &names);
        let (setup, run) = alternate(
            o.sandboxes.min(pods.len()),
            |i| ocicni_setup(a.plugin, &pods[i], ips),
            |i| async move {
                let id = run_sandbox(client, &names[i].0, names[i].1).await?;
                ids.lock().map_err(poisoned)?.push(id);
                Ok(())
            },
            &first_error,
        )
        .await;
        rep["ocicni"]["setup"] = stats(&setup);
        rep["ocicni"]["setup_split"] = plugin_share(
            &rep["ocicni"]["setup"],
            a.timing.seconds("ADD") - ocicni_before,
        );
        // Both series are up here.
        rep["ocicni"]["veths_after_setup"] = json!(count_veths());
        run
    } else {
        run_all(client, &names, o.concurrency, &ids, &first_error).await
    };
    let add_after = daemon_plugin_seconds(&dirs.socket(), "ADD").await?;
    let ids = ids.into_inner().map_err(poisoned)?;
    all_ids
        .lock()
        .map_err(poisoned)?
        .extend(ids.iter().cloned());
    rep["crio"]["run"] = stats(&run);
    rep["crio"]["run_split"] = plugin_share(&rep["crio"]["run"], add_after - add_before);
    rep["crio"]["rss_mib"]["with_sandboxes"] = json!(mib(rss_kib(pid).0));
    rep["crio"]["veths_after_run"] = json!(count_veths());
    fail(&first_error)?;
    let sandbox_ips = sandbox_ips(client, &ids).await?;
    rep["crio"]["unique_sandbox_ips"] = json!(sandbox_ips.len());
    // The no-op plugin derives addresses from numeric IDs; sandbox IDs are hex, so only real
    // mode hands out one address per sandbox.
    if o.mode == "real" && sandbox_ips.len() != ids.len() {
        return Err(format!(
            "{} sandboxes but {} distinct IPs",
            ids.len(),
            sandbox_ips.len()
        ));
    }
    if side.is_some() {
        // Both series draw from the same host-local range at the same time.
        let ocicni_ips = ocicni_ips.into_inner().map_err(poisoned)?;
        let distinct = ocicni_ips
            .iter()
            .chain(&sandbox_ips)
            .collect::<BTreeSet<_>>();
        let total = ocicni_ips.len() + sandbox_ips.len();
        rep["unique_ips_both_series"] = json!(distinct.len());
        if o.mode == "real" && distinct.len() != total {
            return Err(format!(
                "{} ocicni pods and {} sandboxes but {} distinct IPs",
                ocicni_ips.len(),
                ids.len(),
                distinct.len()
            ));
        }
    }

    memory_phase(o, client, pid, all_ids, &first_error, rep).await?;

    let (teardown, del_seconds) =
        teardown_phase(o, dirs, rep, client, side, &ids, &first_error).await?;
    rep["crio"]["stop_remove"] = stats(&teardown);
    rep["crio"]["stop_remove_split"] = plugin_share(&rep["crio"]["stop_remove"], del_seconds);
    let (after, peak) = rss_kib(pid);
    rep["crio"]["rss_mib"]["after_remove"] = json!(mib(after));
    rep["crio"]["rss_mib"]["peak"] = json!(mib(peak));
    fail(&first_error)
}

/// The distinct IPs the daemon reports for `ids` (untimed); every sandbox must report one.
async fn sandbox_ips(
    client: &RuntimeServiceClient<Channel>,
    ids: &[String],
) -> Result<BTreeSet<String>, String> {
    let mut ips = BTreeSet::new();
    for id in ids {
        let status = client
            .clone()
            .pod_sandbox_status(cri::PodSandboxStatusRequest {
                pod_sandbox_id: id.clone(),
                verbose: false,
            })
            .await
            .map_err(|e| format!("PodSandboxStatus {id}: {}", e.message()))?
            .into_inner();
        let ip = status
            .status
            .and_then(|s| s.network)
            .map(|n| n.ip)
            .unwrap_or_default();
        if ip.is_empty() {
            return Err(format!("sandbox {id} reports no IP"));
        }
        ips.insert(ip);
    }
    Ok(ips)
}

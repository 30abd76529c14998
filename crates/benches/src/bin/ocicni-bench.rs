//! The ocicni peer of `shared/bench/gocni-peer`: same flags, same scenario, same JSON line.
//!
//! Run inside the "node" network namespace it is started in (`ip netns exec NODE ocicni-bench ...`).
//! It loads the first configuration file of `--conf-dir` as the default network, brings `lo` up
//! in-process (where go-cni runs its loopback plugin as a second network), sets up `--pods` pods
//! with `--concurrency` in flight, tears them down, checks what is left, and prints one JSON line.
//! Extra keys beyond the peer's: `overhead` (time per pod not spent in plugin processes).
//!
//! Started under a file name containing `builtin` (xtask copies the binary so: the shared runner
//! passes every bench the same flags and resolves symbolic links), it runs the plugins built in
//! (`prefer-builtin`) and names itself `ocicni-rs-builtin`; in `noop` mode, which has no built-in
//! meaning, that variant prints a row marked `skipped`.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use benches::{Phase, count_veths, loadavg, run_phase, text};

use ocicni::cni_exec::{self, ObservedExec, PluginRun, ProcessExec};
use ocicni::cni_types::capabilities::PortMapping;
use ocicni::{
    CniArgsPolicy, CniPlugin, Ocicni, PodNetwork, Preference, RuntimeConfig, WatchPolicy, netns,
};
use serde_json::{Value, json};

struct Opts {
    conf_dir: PathBuf,
    plugin_dirs: Vec<PathBuf>,
    netns_dir: PathBuf,
    ipam_dir: Option<PathBuf>,
    mode: String,
    pods: usize,
    concurrency: usize,
    warmup: usize,
    portmap: bool,
    host_port_base: u16,
    id_prefix: String,
    exec_floor_runs: usize,
    /// The built-in variant (see the module docs).
    builtin: bool,
}

fn parse_args() -> Result<Opts, String> {
    let mut o = Opts {
        conf_dir: PathBuf::new(),
        plugin_dirs: vec![PathBuf::from("/usr/lib/cni")],
        netns_dir: PathBuf::from("/run/cnibench/netns"),
        ipam_dir: None,
        mode: "real".into(),
        pods: 50,
        concurrency: 1,
        warmup: 2,
        portmap: true,
        host_port_base: 20000,
        id_prefix: "cnibench".into(),
        exec_floor_runs: 30,
        builtin: builtin_variant(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let flag = arg.trim_start_matches('-');
        let (name, inline) = match flag.split_once('=') {
            Some((n, v)) => (n.to_owned(), Some(v.to_owned())),
            None => (flag.to_owned(), None),
        };
        let mut value = || {
            inline
                .clone()
                .or_else(|| args.next())
                .ok_or(format!("--{name} needs a value"))
        };
        let number = |v: String| {
            v.parse::<usize>()
                .map_err(|e| format!("--{name} {v:?}: {e}"))
        };
        match name.as_str() {
            "conf-dir" => o.conf_dir = value()?.into(),
            "plugin-dir" => o.plugin_dirs = value()?.split(',').map(PathBuf::from).collect(),
            "netns-dir" => o.netns_dir = value()?.into(),
            "ipam-dir" => {
                o.ipam_dir = Some(value()?.into()).filter(|p: &PathBuf| !p.as_os_str().is_empty());
            }
            "mode" => o.mode = value()?,
            "pods" => o.pods = number(value()?)?,
            "concurrency" => o.concurrency = number(value()?)?,
            "warmup" => o.warmup = number(value()?)?,
            "portmap" => o.portmap = inline.as_deref().unwrap_or("true") == "true",
            "host-port-base" => {
                o.host_port_base = value()?
                    .parse()
                    .map_err(|e| format!("--host-port-base: {e}"))?;
            }
            "id-prefix" => o.id_prefix = value()?,
            "exec-floor-runs" => o.exec_floor_runs = number(value()?)?,
            other => return Err(format!("unknown flag --{other}")),
        }
    }
    if o.conf_dir.as_os_str().is_empty() || o.pods == 0 || o.concurrency == 0 {
        return Err("usage: ocicni-bench --conf-dir DIR [--plugin-dir D1,D2] [--netns-dir DIR] [--ipam-dir DIR] \
                    [--mode real|noop] [--pods N] [--concurrency C] [--warmup W] [--portmap=true|false]"
            .into());
    }
    Ok(o)
}

/// Adds up, per container, the time spent in plugin processes (fed by an `ObservedExec`).
#[derive(Default)]
struct PluginTime {
    per_container: Mutex<HashMap<String, Duration>>,
}

impl PluginTime {
    fn add(&self, run: &PluginRun<'_>) {
        if let Ok(mut map) = self.per_container.lock() {
            *map.entry(run.container_id().to_owned()).or_default() += run.elapsed;
        }
    }

    fn take(&self, id: &str) -> Duration {
        self.per_container
            .lock()
            .ok()
            .and_then(|mut m| m.remove(id))
            .unwrap_or_default()
    }
}

struct Pod {
    id: String,
    netns: PathBuf,
    host_port: u16,
}

impl Pod {
    fn network(&self, portmap: bool) -> PodNetwork {
        let mut pod = PodNetwork {
            name: self.id.clone(),
            namespace: "bench".into(),
            id: self.id.clone(),
            uid: format!("00000000-0000-0000-0000-{:012}", self.host_port),
            netns: self.netns.display().to_string(),
            ..PodNetwork::default()
        };
        if portmap {
            let rt = RuntimeConfig {
                port_mappings: vec![PortMapping {
                    host_port: self.host_port,
                    container_port: 80,
                    protocol: "tcp".into(),
                    host_ip: None,
                }],
                ..RuntimeConfig::default()
            };
            // The default network is the only one; its name is filled in by the caller.
            pod.runtime_config.insert(String::new(), rt);
        }
        pod
    }
}

/// A phase's statistics under the peer bench's keys.
fn stats(phase: &Phase) -> Value {
    benches::stats(phase, "pods_per_s")
}

/// iptables rules whose comment names a container ID starting with `prefix` (portmap's).
fn count_rules(prefix: &str) -> i64 {
    let needle = format!("id: \\\"{prefix}");
    benches::count_rules(|l| l.contains(&needle))
}

fn overhead(phase: &Phase) -> Value {
    let total: Duration = phase.latencies.iter().sum();
    let plugins: Duration = phase.plugin_time.iter().sum();
    let n = phase.latencies.len().max(1) as f64;
    let own = total.saturating_sub(plugins);
    json!({
        "plugin_ms_mean": (plugins.as_secs_f64() * 1e3 / n * 1e3).round() / 1e3,
        "own_ms_mean": (own.as_secs_f64() * 1e3 / n * 1e3).round() / 1e3,
        "own_pct_of_plugin_time": if plugins.is_zero() { 0.0 } else { (own.as_secs_f64() / plugins.as_secs_f64() * 1e4).round() / 1e2 },
    })
}

fn exec_floor(bin: &Path, runs: usize) -> Value {
    let mut lat = Vec::with_capacity(runs);
    for _ in 0..runs {
        let t0 = Instant::now();
        let child = std::process::Command::new(bin)
            .env_clear()
            .env("CNI_COMMAND", "VERSION")
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .spawn();
        let Ok(mut child) = child else {
            return json!({"binary": format!("{} (cannot run)", bin.display())});
        };
        if let Some(mut stdin) = child.stdin.take() {
            use std::io::Write as _;
            let _ = stdin.write_all(br#"{"cniVersion":"1.0.0"}"#);
        }
        let _ = child.wait();
        lat.push(t0.elapsed());
    }
    let s = stats(&Phase::of_latencies(lat));
    json!({"binary": bin.display().to_string(), "runs": runs, "p50_ms": s["p50_ms"], "mean_ms": s["mean_ms"]})
}

/// What one durable result-cache write costs on this disk (temp file, fsync, rename, directory
/// fsync), since every set-up pays it and go-cni's libcni, which does not sync, does not.
fn cache_write_floor(plugin: &Ocicni, runs: usize) -> Value {
    let cache = plugin.cni().cache();
    let entry = cni_exec::CachedAttachment {
        container_id: "cache-floor".into(),
        network: "cache-floor".into(),
        if_name: "eth0".into(),
        netns: String::new(),
        config: br#"{"cniVersion":"1.0.0","name":"cache-floor","plugins":[{"type":"bridge"}]}"#
            .to_vec(),
        cni_args: vec![("K8S_POD_NAME".into(), "cache-floor".into())],
        capability_args: serde_json::Map::new(),
        result: Some(json!({"cniVersion": "1.0.0", "ips": [{"address": "10.88.0.2/16"}]})),
    };
    let mut lat = Vec::with_capacity(runs);
    for _ in 0..runs {
        let t0 = Instant::now();
        if let Err(err) = cache.put(&entry) {
            return json!({"error": err.to_string()});
        }
        lat.push(t0.elapsed());
    }
    let _ = cache.remove("cache-floor", "cache-floor", "eth0");
    let s = stats(&Phase::of_latencies(lat));
    json!({"runs": runs, "p50_ms": s["p50_ms"], "mean_ms": s["mean_ms"]})
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let opts = match parse_args() {
        Ok(o) => o,
        Err(msg) => {
            eprintln!("ocicni-bench: {msg}");
            std::process::exit(2);
        }
    };
    let (report, ok) = run(&opts).await;
    println!("{report}");
    if !ok {
        std::process::exit(1);
    }
}

/// Whether this is the built-in variant (see the module docs).
fn builtin_variant() -> bool {
    std::env::args_os()
        .next()
        .map(PathBuf::from)
        .and_then(|p| {
            p.file_name()
                .map(|n| n.to_string_lossy().contains("builtin"))
        })
        .unwrap_or(false)
}

async fn run(o: &Opts) -> (Value, bool) {
    let builtin = o.builtin;
    let name = if builtin {
        "ocicni-rs-builtin"
    } else {
        "ocicni-rs-bench"
    };
    if builtin && o.mode == "noop" {
        let rep = json!({
            "bench": name, "mode": o.mode, "pods": o.pods, "concurrency": o.concurrency,
            "skipped": "noop mode runs no-op binaries; the built-in plugins have no such mode",
            "ok": true,
        });
        return (rep, true);
    }
    let mut rep = json!({
        "bench": name, "library": "ocicni (Rust)",
        "plugins": if builtin { "built in (prefer-builtin)" } else { "binaries" },
        "deps": {"ocicni": env!("CARGO_PKG_VERSION")}, "rust": option_env!("RUSTC_VERSION").unwrap_or("stable"),
        "mode": o.mode, "pods": o.pods, "concurrency": o.concurrency, "warmup": o.warmup,
        "loopback_network": true, "loopback": "in-process (no plugin exec)", "port_mappings": o.portmap,
        "conf_dir": o.conf_dir, "plugin_dirs": o.plugin_dirs,
        "num_cpu": std::thread::available_parallelism().map_or(1, std::num::NonZero::get),
        "kernel": text("/proc/sys/kernel/osrelease").trim(), "loadavg_start": loadavg(),
    });
    let outcome = bench(o, &mut rep).await;
    rep["loadavg_end"] = json!(loadavg());
    let ok = match outcome {
        Ok(()) => {
            rep["setup"]["errors"] == 0
                && rep["remove"]["errors"] == 0
                && rep.get("first_error").is_none()
        }
        Err(err) => {
            rep["first_error"] = json!(err);
            false
        }
    };
    rep["ok"] = json!(ok);
    (rep, ok)
}

async fn bench(o: &Opts, rep: &mut Value) -> Result<(), String> {
    // The cache where libcni's is (go-cni's bench writes /var/lib/cni), the run dir on a tmpfs.
    let cache = PathBuf::from(format!("/var/lib/ocicni-bench.{}", std::process::id()));
    let run_dir = benches::tmpfs_run_dir("ocicni-bench");
    rep["run_dir"] = json!(run_dir);
    let timing = Arc::new(PluginTime::default());
    let exec = {
        let timing = Arc::clone(&timing);
        ObservedExec::new(Arc::new(ProcessExec::new()), move |run: &PluginRun<'_>| {
            timing.add(run);
        })
    };
    let plugin = Ocicni::builder()
        .conf_dir(&o.conf_dir)
        .plugin_dirs(o.plugin_dirs.clone())
        .cache_dir(&cache)
        .run_dir(&run_dir)
        .cni_args(CniArgsPolicy::Kubernetes)
        .watch(WatchPolicy::Inotify)
        .exec(Arc::new(exec))
        .builtin_plugins(if o.builtin {
            Preference::PreferBuiltin
        } else {
            Preference::default()
        })
        .build()
        .await
        .map_err(|e| format!("ocicni: {e}"))?;
    let result = pods_run(o, rep, &plugin, &timing).await;
    plugin.shutdown().await;
    let _ = std::fs::remove_dir_all(&cache);
    let _ = std::fs::remove_dir_all(&run_dir);
    result
}

async fn pods_run(
    o: &Opts,
    rep: &mut Value,
    plugin: &Ocicni,
    timing: &PluginTime,
) -> Result<(), String> {
    let network = plugin
        .default_network_name()
        .ok_or("no default network loaded")?;
    rep["networks"] = json!(["lo (in-process)", format!("{network}(eth0)")]);
    if o.exec_floor_runs > 0
        && let Some(first) = plugin
            .networks()
            .iter()
            .find(|n| n.default)
            .and_then(|n| n.plugins.first().cloned())
        && let Ok(bin) = cni_exec::find_plugin_in(&first, &o.plugin_dirs)
    {
        rep["plugin_exec_floor"] = exec_floor(&bin, o.exec_floor_runs);
    }
    rep["cache_write_floor"] = cache_write_floor(plugin, 30);
    std::fs::create_dir_all(&o.netns_dir).map_err(|e| format!("{}: {e}", o.netns_dir.display()))?;
    let make = |id: String, port: u16| Pod {
        netns: o.netns_dir.join(&id),
        id,
        host_port: port,
    };
    let with_net = |p: &Pod| {
        let mut pod = p.network(o.portmap);
        if let Some(rt) = pod.runtime_config.remove("") {
            pod.runtime_config.insert(network.clone(), rt);
        }
        pod
    };

    for i in 0..o.warmup {
        let p = make(
            format!("{}-warm-{i}", o.id_prefix),
            o.host_port_base + (o.pods + i) as u16,
        );
        netns::create_pinned_async(&p.netns)
            .await
            .map_err(|e| format!("warm-up netns: {e}"))?;
        let pod = with_net(&p);
        let outcome = match plugin.setup_pod(&pod).await {
            Ok(_) => plugin.teardown_pod(&pod).await,
            Err(e) => Err(e),
        };
        let _ = netns::remove_pinned_async(&p.netns).await;
        timing.take(&p.id);
        outcome.map_err(|e| format!("warm-up pod {i}: {e}"))?;
    }

    let pods: Vec<Pod> = (0..o.pods)
        .map(|i| make(format!("{}-{i}", o.id_prefix), o.host_port_base + i as u16))
        .collect();
    let t0 = Instant::now();
    let mut made: u32 = 0;
    let mut create_err = None;
    for p in &pods {
        match netns::create_pinned_async(&p.netns).await {
            Ok(()) => made += 1,
            Err(e) => {
                create_err = Some(format!("netns for {}: {e}", p.id));
                break;
            }
        }
    }
    rep["netns_create_mean_ms"] =
        json!((t0.elapsed().as_secs_f64() * 1e3 / f64::from(made.max(1)) * 1e3).round() / 1e3);
    let result = match create_err {
        Some(err) => Err(err),
        None => timed_phases(o, rep, plugin, timing, &pods, &with_net).await,
    };
    for p in &pods {
        let _ = netns::remove_pinned_async(&p.netns).await;
    }
    result
}

async fn timed_phases(
    o: &Opts,
    rep: &mut Value,
    plugin: &Ocicni,
    timing: &PluginTime,
    pods: &[Pod],
    with_net: &(dyn Fn(&Pod) -> PodNetwork + Sync),
) -> Result<(), String> {
    let first_error = Mutex::new(None);
    let ips = Arc::new(Mutex::new(BTreeSet::new()));
    let plugin_time = |i: usize| Some(timing.take(&pods[i].id));
    // The workers run as tasks of their own, so they get owned copies.
    let networks: Arc<Vec<PodNetwork>> = Arc::new(pods.iter().map(with_net).collect());
    let setup = run_phase(
        pods.len(),
        o.concurrency,
        {
            let (plugin, networks, ips) = (plugin.clone(), Arc::clone(&networks), Arc::clone(&ips));
            move |i| {
                let (plugin, networks, ips) =
                    (plugin.clone(), Arc::clone(&networks), Arc::clone(&ips));
                async move {
                    let pod = &networks[i];
                    let results = plugin
                        .setup_pod(pod)
                        .await
                        .map_err(|e| format!("setup {}: {e}", pod.id))?;
                    let ip = results
                        .first()
                        .and_then(|r| r.result.first_ipv4().map(|ip| ip.address.addr()));
                    let ip =
                        ip.ok_or(format!("setup {}: no IPv4 address in the result", pod.id))?;
                    ips.lock().map_err(|_| "poisoned")?.insert(ip);
                    Ok(())
                }
            }
        },
        &plugin_time,
        &first_error,
    )
    .await;
    rep["setup"] = stats(&setup);
    rep["unique_pod_ips"] = json!(ips.lock().map_or(0, |s| s.len()));
    rep["node_veths_after_setup"] = json!(count_veths());
    rep["node_iptables_rules_after_setup"] = json!(count_rules(&format!("{}-", o.id_prefix)));

    let remove = run_phase(
        pods.len(),
        o.concurrency,
        {
            let plugin = plugin.clone();
            move |i| {
                let (plugin, networks) = (plugin.clone(), Arc::clone(&networks));
                async move {
                    let pod = &networks[i];
                    plugin
                        .teardown_pod(pod)
                        .await
                        .map_err(|e| format!("teardown {}: {e}", pod.id))
                }
            }
        },
        &plugin_time,
        &first_error,
    )
    .await;
    rep["remove"] = stats(&remove);
    let total = setup.wall + remove.wall;
    rep["cycle_pods_per_s"] = json!(if total.is_zero() {
        0.0
    } else {
        (pods.len() as f64 / total.as_secs_f64() * 1e3).round() / 1e3
    });
    rep["overhead"] = json!({"setup": overhead(&setup), "remove": overhead(&remove)});
    rep["leftover_after_remove"] = json!({
        "veths": count_veths(),
        "iptables_rules_with_pod_ids": count_rules(&format!("{}-", o.id_prefix)),
        "ipam_leases": o.ipam_dir.as_deref().map_or(0, benches::count_leases),
    });
    if let Some(err) = first_error.into_inner().ok().flatten() {
        rep["first_error"] = json!(err);
    }
    Ok(())
}

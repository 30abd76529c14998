//! What the pod benchmarks (`ocicni-bench`, `crio-bench`) share: timing a phase of operations at
//! a given concurrency, its latency statistics as the peer bench computes them, and counting what
//! a run left behind on the node.
//!
//! The binaries (`ocicni-bench`, `watch-bench`, `crio-bench` and `front-bench` with the `crio`
//! feature, `image-bench` with the `images` feature, `container-bench` with the `containers`
//! feature) are built by `cargo xtask bench`, which builds only what the chosen benchmarks need:
//! xtask itself depends on no workspace crate, so it starts on a machine where nothing is
//! installed yet.

use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// Latencies of one timed phase.
#[derive(Default)]
pub struct Phase {
    /// Time of each successful operation.
    pub latencies: Vec<Duration>,
    /// Time spent in plugin processes by each successful operation, where the caller measures it.
    pub plugin_time: Vec<Duration>,
    /// Wall time of the whole phase.
    pub wall: Duration,
    /// Operations that failed.
    pub errors: usize,
    /// CPU time (user + system) of this process and of its reaped children during the phase.
    pub cpu: Option<(Duration, Duration)>,
    /// Share of the machine's CPU time that was idle (or waiting for I/O) during the phase.
    pub idle_pct: Option<f64>,
}

impl Phase {
    /// A phase of successful operations only, for the probes that time one thing `n` times.
    pub fn of_latencies(latencies: Vec<Duration>) -> Phase {
        Phase {
            latencies,
            ..Phase::default()
        }
    }
}

/// Milliseconds, rounded to the microsecond.
pub fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

/// Nearest-rank percentiles over the successful operations, as the peer bench computes them.
/// `rate_key` names the successful-operations-per-second figure (the benches call it differently).
pub fn stats(phase: &Phase, rate_key: &str) -> Value {
    let mut lat = phase.latencies.clone();
    lat.sort();
    let pct = |p: f64| -> f64 {
        if lat.is_empty() {
            return 0.0;
        }
        let rank = ((p / 100.0) * lat.len() as f64).ceil().max(1.0) as usize;
        ms(lat[rank.min(lat.len()) - 1])
    };
    let mean = if lat.is_empty() {
        0.0
    } else {
        ms(lat.iter().sum::<Duration>() / lat.len() as u32)
    };
    let ok = lat.len();
    let per_op = |d: Duration| if ok == 0 { 0.0 } else { ms(d / ok as u32) };
    let cpu = phase.cpu.map(|(own, children)| {
        json!({"self_ms_per_op": per_op(own), "children_ms_per_op": per_op(children),
               "machine_idle_pct": phase.idle_pct.map(|p| (p * 10.0).round() / 10.0)})
    });
    json!({
        "ops": ok + phase.errors, "errors": phase.errors, "wall_s": (phase.wall.as_secs_f64() * 1e3).round() / 1e3,
        rate_key: if phase.wall.is_zero() { 0.0 } else { (ok as f64 / phase.wall.as_secs_f64() * 1e3).round() / 1e3 },
        "mean_ms": mean, "min_ms": lat.first().map_or(0.0, |d| ms(*d)),
        "p50_ms": pct(50.0), "p90_ms": pct(90.0), "p95_ms": pct(95.0), "p99_ms": pct(99.0), "max_ms": lat.last().map_or(0.0, |d| ms(*d)),
        "cpu": cpu,
    })
}

/// Runs `f(0..n)` with `concurrency` workers, timing each call; the first error is kept.
///
/// Each worker is a task of its own on the multi-threaded runtime, as a runtime serves concurrent
/// requests (crio-lite: a task per RPC; go-cni's bench: a goroutine per worker). Polling them all
/// from one task would let only one make progress at a time, and none while that task's thread is
/// held up, such as in `posix_spawn`. After the phase, `plugin_time(i)` is asked for the time each
/// successful call spent in plugins (recorded when it says one).
pub async fn run_phase<F, Fut>(
    n: usize,
    concurrency: usize,
    f: F,
    plugin_time: &(dyn Fn(usize) -> Option<Duration> + Sync),
    first_error: &Mutex<Option<String>>,
) -> Phase
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<(), String>> + Send + 'static,
{
    let f = std::sync::Arc::new(f);
    let next = std::sync::Arc::new(AtomicUsize::new(0));
    let cpu_before = cpu_times();
    let idle_before = idle_ticks();
    let started = Instant::now();
    let workers: Vec<_> = (0..concurrency)
        .map(|_| {
            let (f, next) = (std::sync::Arc::clone(&f), std::sync::Arc::clone(&next));
            tokio::spawn(async move {
                let mut done = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        break;
                    }
                    let t0 = Instant::now();
                    let outcome = f(i).await;
                    done.push((i, t0.elapsed(), outcome));
                }
                done
            })
        })
        .collect();
    let mut phase = Phase::default();
    for worker in workers {
        let done = worker
            .await
            .unwrap_or_else(|e| vec![(usize::MAX, Duration::ZERO, Err(format!("worker: {e}")))]);
        for (i, took, outcome) in done {
            match outcome {
                Ok(()) => {
                    phase.latencies.push(took);
                    phase.plugin_time.extend(plugin_time(i));
                }
                Err(err) => {
                    phase.errors += 1;
                    first_error
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .get_or_insert(err);
                }
            }
        }
    }
    phase.wall = started.elapsed();
    phase.cpu = cpu_before
        .zip(cpu_times())
        .map(|(a, b)| (b.0.saturating_sub(a.0), b.1.saturating_sub(a.1)));
    phase.idle_pct = idle_before.zip(idle_ticks()).and_then(|(a, b)| {
        let (idle, total) = (b.0.saturating_sub(a.0), b.1.saturating_sub(a.1));
        (total > 0).then(|| idle as f64 * 100.0 / total as f64)
    });
    phase
}

/// Idle (and I/O wait) ticks and all ticks of the machine, from the first line of `/proc/stat`.
fn idle_ticks() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let ticks: Vec<u64> = stat
        .lines()
        .next()?
        .split_whitespace()
        .skip(1)
        .filter_map(|t| t.parse().ok())
        .collect();
    let idle = ticks.get(3)? + ticks.get(4)?;
    Some((idle, ticks.iter().sum()))
}

/// CPU time (user + system) used so far by this process and by its children that have been
/// waited for. On 2 cores at high concurrency the sum per operation is what bounds throughput.
fn cpu_times() -> Option<(Duration, Duration)> {
    use nix::sys::resource::{UsageWho, getrusage};
    let total = |who| {
        getrusage(who).ok().map(|u| {
            let t = |tv: nix::sys::time::TimeVal| {
                Duration::from_secs(tv.tv_sec().unsigned_abs())
                    + Duration::from_micros(tv.tv_usec().unsigned_abs())
            };
            t(u.user_time()) + t(u.system_time())
        })
    };
    total(UsageWho::RUSAGE_SELF).zip(total(UsageWho::RUSAGE_CHILDREN))
}

// ---- leftovers ---------------------------------------------------------------------------------

/// veth devices in this network namespace (-1 when `/sys/class/net` cannot be read).
pub fn count_veths() -> i64 {
    std::fs::read_dir("/sys/class/net").map_or(-1, |rd| {
        rd.flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("veth"))
            .count() as i64
    })
}

/// iptables rules (`-A` lines of `iptables-save` in this netns) for which `matches` holds; -1
/// when `iptables-save` cannot run.
pub fn count_rules(matches: impl Fn(&str) -> bool) -> i64 {
    let Ok(out) = std::process::Command::new("iptables-save").output() else {
        return -1;
    };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with("-A ") && matches(l))
        .count() as i64
}

/// Files under `dir` (recursively) whose name passes `keep`; a missing `dir` holds none.
pub fn count_files(dir: &Path, keep: &dyn Fn(&str) -> bool) -> i64 {
    fn walk(dir: &Path, keep: &dyn Fn(&str) -> bool, n: &mut i64) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, keep, n);
            } else if keep(&entry.file_name().to_string_lossy()) {
                *n += 1;
            }
        }
    }
    let mut n = 0;
    walk(dir, keep, &mut n);
    n
}

/// host-local leases under `dir`: files named by an IP address.
pub fn count_leases(dir: &Path) -> i64 {
    count_files(dir, &|name| name.parse::<std::net::IpAddr>().is_ok())
}

// ---- the node ----------------------------------------------------------------------------------

/// A fresh run directory (ocicni's locks and pending cache entries) for one bench process, on a
/// tmpfs as `/run` is on any systemd host: `/run` itself when it is one, else `/dev/shm`. (On the
/// benchmark machine `/run` is a plain directory of the root file system.) Falls back to the temp
/// dir when neither is a tmpfs.
pub fn tmpfs_run_dir(name: &str) -> std::path::PathBuf {
    let is_tmpfs = |dir: &str| {
        nix::sys::statfs::statfs(dir)
            .is_ok_and(|s| s.filesystem_type() == nix::sys::statfs::TMPFS_MAGIC)
    };
    let base = ["/run", "/dev/shm"]
        .into_iter()
        .find(|d| is_tmpfs(d))
        .map_or_else(std::env::temp_dir, std::path::PathBuf::from);
    base.join(format!("{name}.{}", std::process::id()))
}

/// The contents of `path`, empty when it cannot be read.
pub fn text(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// The three load averages of `/proc/loadavg`.
pub fn loadavg() -> String {
    text("/proc/loadavg")
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// A CRI runtime client over a unix socket (for the benchmarks that drive crio-lite).
///
/// # Errors
///
/// When the socket does not answer.
#[cfg(feature = "crio")]
pub async fn cri_client(
    socket: &Path,
) -> Result<
    cri_api::v1::runtime_service_client::RuntimeServiceClient<tonic::transport::Channel>,
    String,
> {
    Ok(cri_api::v1::runtime_service_client::RuntimeServiceClient::new(cri_channel(socket).await?))
}

/// A gRPC channel to a CRI socket, for a runtime and an image client on one connection, as
/// kubelet holds them.
///
/// # Errors
///
/// When the socket does not answer.
#[cfg(feature = "crio")]
pub async fn cri_channel(socket: &Path) -> Result<tonic::transport::Channel, String> {
    use hyper_util::rt::TokioIo;
    use tonic::transport::{Endpoint, Uri};
    let socket = socket.to_owned();
    Endpoint::try_from("http://[::]:50051")
        .map_err(|e| e.to_string())?
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let socket = socket.clone();
            async move {
                Ok::<_, std::io::Error>(TokioIo::new(
                    tokio::net::UnixStream::connect(socket).await?,
                ))
            }
        }))
        .await
        .map_err(|e| format!("connect: {e}"))
}

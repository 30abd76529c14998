//! Start to ready: how long each daemon takes from being spawned to answering CRI `Status` with
//! its runtime and network ready (what `crictl info` and kubelet wait for), on a fresh state
//! directory, the two daemons taking turns. crio-lite's own account of the phases of its median
//! start (its `ready:` log line) is reported beside it, so a slow start names its cause.

use std::path::Path;
use std::time::Instant;

use serde_json::{Value, json};

use crate::daemon::{Containerd, CrioLite, Daemon};
use crate::node::Cgroups;

/// Fresh starts per daemon.
const ROUNDS: usize = 5;

/// Runs the rounds; `rep["start"]` gets each daemon's times and crio-lite's phases.
pub(crate) async fn run(
    work: &Path,
    cgroups: &Cgroups,
    crio_binary: &Path,
    registry: &str,
    pause: &str,
    rep: &mut Value,
) -> Result<(), String> {
    eprintln!(
        "[container-bench] start to ready: {ROUNDS} fresh starts of each daemon, alternating"
    );
    let mut crio_ms = Vec::new();
    let mut crio_phases = Vec::new();
    let mut containerd_ms = Vec::new();
    for round in 0..ROUNDS {
        let dir = work.join(format!("start-{round}"));
        let crio = CrioLite {
            dir: dir.join("crio-lite"),
        };
        let started = Instant::now();
        let mut daemon =
            crio.start(crio_binary, registry, cgroups.cpu_group("start-crio-lite")?)?;
        daemon.wait_ready().await?;
        crio_ms.push(started.elapsed().as_secs_f64() * 1e3);
        crio_phases.push(ready_phases(&daemon));
        daemon.terminate()?;
        drop(daemon);
        release(&crio.dir);

        let containerd = Containerd {
            dir: dir.join("containerd"),
        };
        let started = Instant::now();
        let mut daemon =
            containerd.start(registry, pause, cgroups.cpu_group("start-containerd")?)?;
        daemon.wait_ready().await?;
        containerd_ms.push(started.elapsed().as_secs_f64() * 1e3);
        daemon.terminate()?;
        drop(daemon);
        release(&containerd.dir);
    }
    let median_at = median_index(&crio_ms);
    rep["start"] = json!({
        "rounds": ROUNDS,
        "crio-lite": summary(&crio_ms),
        "containerd": summary(&containerd_ms),
        "crio-lite_phases_of_median": crio_phases[median_at],
    });
    Ok(())
}

/// What a daemon's start left mounted under `dir` (crio-lite's pin directory is a mount point
/// by design) goes, then the directory.
fn release(dir: &Path) {
    crate::node::unmount_below(dir);
    let _ = std::fs::remove_dir_all(dir);
}

/// crio-lite's `phases=` from its `ready:` log line.
fn ready_phases(daemon: &Daemon) -> String {
    let log = std::fs::read_to_string(daemon.log_path()).unwrap_or_default();
    log.lines()
        .find(|l| l.contains("ready: serving CRI"))
        .and_then(|l| l.split_once("phases=").map(|(_, p)| p.trim().to_owned()))
        .unwrap_or_else(|| "(no ready line in its log)".to_owned())
}

fn median_index(values: &[f64]) -> usize {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&a, &b| values[a].total_cmp(&values[b]));
    order[order.len() / 2]
}

fn summary(ms: &[f64]) -> Value {
    let mut sorted = ms.to_vec();
    sorted.sort_by(f64::total_cmp);
    json!({
        "runs_ms": ms.iter().map(|v| (v * 10.0).round() / 10.0).collect::<Vec<_>>(),
        "p50_ms": (sorted[sorted.len() / 2] * 10.0).round() / 10.0,
        "min_ms": (sorted[0] * 10.0).round() / 10.0,
        "max_ms": (sorted[sorted.len() - 1] * 10.0).round() / 10.0,
    })
}

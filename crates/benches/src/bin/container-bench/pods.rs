//! Pods of one container, crio-lite beside containerd 1.6, both running in the same node at the
//! same time: per pod, RunPodSandbox + CreateContainer + StartContainer ("up") and
//! StopContainer + RemoveContainer + StopPodSandbox + RemovePodSandbox ("down"), the CPU time
//! of each daemon's cgroup over each phase, and with every pod up the resident memory of the
//! daemon and of its monitors (conmon per container; a shim per pod for containerd, whose pause
//! process is counted beside them).
//!
//! At concurrency 1 the two daemons take turns pod by pod (the first one alternating), so both
//! see the same machine over time; at higher concurrency one daemon's phases run after the
//! other's. After each "down" phase both wait a second before their CPU time is read, so that
//! monitors exiting after the last call are counted.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use crate::Ctx;
use crate::cri::{Cri, container_config, sandbox_config};
use crate::daemon::Daemon;
use crate::node::{Cgroups, comm, memory_kib};
use crate::series::{Series, run_concurrent};

const UP_STEPS: &[&str] = &["run_sandbox", "create", "start"];
const DOWN_STEPS: &[&str] = &["stop", "remove", "stop_remove_sandbox"];
/// How long monitors get to exit after the last call before CPU time is read.
const SETTLE: Duration = Duration::from_secs(1);

/// One daemon under test.
pub(crate) struct Side<'a> {
    pub(crate) name: &'static str,
    pub(crate) cri: &'a Cri,
    pub(crate) daemon: &'a Daemon,
    /// Whether its pods have an infra (pause) container, in cgroup `<parent>/<sandbox id>`.
    pub(crate) has_pause: bool,
}

/// A pod that is up: (sandbox id, container id, its cgroup parent).
type Up = (String, String, String);

/// The pods of one daemon at one concurrency, and what they cost.
struct Tally {
    up: Series,
    down: Series,
    pods: Vec<Up>,
    cpu_up: Duration,
    cpu_down: Duration,
    memory: Value,
}

impl Tally {
    fn new() -> Tally {
        Tally {
            up: Series::new(UP_STEPS),
            down: Series::new(DOWN_STEPS),
            pods: Vec::new(),
            cpu_up: Duration::ZERO,
            cpu_down: Duration::ZERO,
            memory: Value::Null,
        }
    }

    fn json(&self) -> Value {
        let n = self.up.len().max(1) as f64;
        let per = |d: Duration| (benches::ms(d) / n * 1e3).round() / 1e3;
        json!({
            "up": self.up.json(),
            "down": self.down.json(),
            "cpu_ms_per_pod": {"up": per(self.cpu_up), "down": per(self.cpu_down),
                               "total": per(self.cpu_up + self.cpu_down)},
            "memory": self.memory,
        })
    }
}

/// The warm-up pods, each daemon's idle memory and CPU rate, then the pods at every
/// concurrency.
pub(crate) async fn run(
    ctx: &Ctx<'_>,
    sides: &[Side<'_>; 2],
    rep: &mut Value,
) -> Result<(), String> {
    for (k, s) in sides.iter().enumerate() {
        for i in 0..ctx.warmup {
            let pod = pod_config(ctx, s.name, &format!("warm{k}-{i}"))?;
            let (sandbox, container, _) = s
                .cri
                .pod_up(&pod, container_config("work", ctx.workload))
                .await?;
            s.cri.pod_down(&sandbox, &container).await?;
        }
    }
    // Idle: after the warm-up's monitors have gone, for 3 s.
    tokio::time::sleep(SETTLE).await;
    let before: Vec<Duration> = sides.iter().map(|s| s.daemon.cpu.usage()).collect();
    tokio::time::sleep(Duration::from_secs(3)).await;
    for (s, b) in sides.iter().zip(&before) {
        let (rss, pss) = memory_kib(s.daemon.pid());
        let cpu = s.daemon.cpu.usage().saturating_sub(*b);
        rep["idle"][s.name] = json!({
            "rss_mib": mib(rss), "pss_mib": mib(pss),
            "cpu_ms_per_s": (benches::ms(cpu) / 3.0 * 1e3).round() / 1e3,
        });
    }
    let mut rows = Vec::new();
    for &c in ctx.concurrency {
        eprintln!(
            "[container-bench] pods c={c}: crio-lite and containerd, {} pods each",
            ctx.pods
        );
        let mut tallies = [Tally::new(), Tally::new()];
        let outcome = if c == 1 {
            interleaved(ctx, sides, &mut tallies).await
        } else {
            let mut outcome = Ok(());
            for (s, t) in sides.iter().zip(tallies.iter_mut()) {
                outcome = concurrent(ctx, s, t, c).await;
                if outcome.is_err() {
                    break;
                }
            }
            outcome
        };
        if outcome.is_err() {
            for s in sides {
                s.cri.remove_everything().await;
            }
        }
        outcome?;
        let mut row = json!({"concurrency": c, "interleaved": c == 1, "pods": ctx.pods});
        for (s, t) in sides.iter().zip(&tallies) {
            row[s.name] = t.json();
        }
        rows.push(row);
        rep["pods"] = json!(rows);
    }
    Ok(())
}

/// Pod `name` of `side`, under the cgroup parent `/<root>/pods-<side>/<name>`: outside the
/// daemon's own cgroup, whose CPU time would otherwise hold the containers' (v1 `cpuacct`
/// counts descendants).
fn pod_config(
    ctx: &Ctx<'_>,
    side: &str,
    name: &str,
) -> Result<cri_api::v1::PodSandboxConfig, String> {
    sandbox_config(
        name,
        &ctx.cgroups.parent(&format!("pods-{side}/{name}")),
        &ctx.work.join("logs").join(side),
    )
}

async fn interleaved(
    ctx: &Ctx<'_>,
    sides: &[Side<'_>; 2],
    tallies: &mut [Tally; 2],
) -> Result<(), String> {
    let cpu0: Vec<Duration> = sides.iter().map(|s| s.daemon.cpu.usage()).collect();
    for i in 0..ctx.pods {
        for k in 0..2 {
            let side = (i + k) % 2;
            let (s, t) = (&sides[side], &mut tallies[side]);
            let name = format!("c1-{i}");
            let pod = pod_config(ctx, s.name, &name)?;
            let parent = pod
                .linux
                .as_ref()
                .map(|l| l.cgroup_parent.clone())
                .unwrap_or_default();
            let (sandbox, container, took) = s
                .cri
                .pod_up(&pod, container_config("work", ctx.workload))
                .await?;
            t.up.push(&took);
            t.pods.push((sandbox, container, parent));
        }
    }
    let cpu1: Vec<Duration> = sides.iter().map(|s| s.daemon.cpu.usage()).collect();
    for (s, t) in sides.iter().zip(tallies.iter_mut()) {
        t.memory = memory(ctx.cgroups, s, &t.pods);
    }
    for i in 0..ctx.pods {
        for k in 0..2 {
            let side = (i + k) % 2;
            let (s, t) = (&sides[side], &mut tallies[side]);
            let (sandbox, container, _) = t.pods[i].clone();
            t.down.push(&s.cri.pod_down(&sandbox, &container).await?);
        }
    }
    tokio::time::sleep(SETTLE).await;
    for (k, t) in tallies.iter_mut().enumerate() {
        let now = sides[k].daemon.cpu.usage();
        t.cpu_up = cpu1[k].saturating_sub(cpu0[k]);
        t.cpu_down = now.saturating_sub(cpu1[k]);
        t.up.close_sequential();
        t.down.close_sequential();
    }
    Ok(())
}

async fn concurrent(ctx: &Ctx<'_>, s: &Side<'_>, t: &mut Tally, c: usize) -> Result<(), String> {
    let cpu0 = s.daemon.cpu.usage();
    let up: Arc<Mutex<Vec<(usize, Up)>>> = Arc::new(Mutex::new(Vec::new()));
    let configs: Arc<Vec<_>> = Arc::new(
        (0..ctx.pods)
            .map(|i| pod_config(ctx, s.name, &format!("c{c}-{i}")))
            .collect::<Result<Vec<_>, _>>()?,
    );
    let (cri, image, out) = (s.cri.clone(), ctx.workload.to_owned(), Arc::clone(&up));
    let outcome = run_concurrent(&mut t.up, ctx.pods, c, move |i| {
        let (cri, image, out, configs) = (
            cri.clone(),
            image.clone(),
            Arc::clone(&out),
            Arc::clone(&configs),
        );
        async move {
            let pod = &configs[i];
            let parent = pod
                .linux
                .as_ref()
                .map(|l| l.cgroup_parent.clone())
                .unwrap_or_default();
            let (sandbox, container, took) =
                cri.pod_up(pod, container_config("work", &image)).await?;
            out.lock()
                .map_err(|_| "poisoned")?
                .push((i, (sandbox, container, parent)));
            Ok(took)
        }
    })
    .await;
    let mut pods = std::mem::take(&mut *up.lock().map_err(|_| "poisoned")?);
    pods.sort_by_key(|(i, _)| *i);
    t.pods = pods.into_iter().map(|(_, p)| p).collect();
    outcome?;
    let cpu1 = s.daemon.cpu.usage();
    t.memory = memory(ctx.cgroups, s, &t.pods);
    let pods: Arc<Vec<Up>> = Arc::new(t.pods.clone());
    let cri = s.cri.clone();
    run_concurrent(&mut t.down, ctx.pods, c, move |i| {
        let (cri, pods) = (cri.clone(), Arc::clone(&pods));
        async move {
            let (sandbox, container, _) = &pods[i];
            cri.pod_down(sandbox, container).await
        }
    })
    .await?;
    tokio::time::sleep(SETTLE).await;
    t.cpu_up = cpu1.saturating_sub(cpu0);
    t.cpu_down = s.daemon.cpu.usage().saturating_sub(cpu1);
    Ok(())
}

fn mib(kib: u64) -> f64 {
    (kib as f64 / 1024.0 * 100.0).round() / 100.0
}

/// With every pod up: the daemon's memory, its monitors' (every other process in its cgroup),
/// and for containerd the pause processes'.
fn memory(cgroups: &Cgroups, s: &Side<'_>, pods: &[Up]) -> Value {
    let daemon = s.daemon.pid();
    let (d_rss, d_pss) = memory_kib(daemon);
    let (mut m_rss, mut m_pss, mut monitors) = (0, 0, 0);
    let mut names = std::collections::BTreeSet::new();
    for pid in s.daemon.cpu.procs().into_iter().filter(|p| *p != daemon) {
        let (rss, pss) = memory_kib(pid);
        m_rss += rss;
        m_pss += pss;
        monitors += 1;
        names.insert(comm(pid));
    }
    let (mut p_rss, mut p_pss, mut pauses) = (0, 0, 0);
    if s.has_pause {
        for (sandbox, _, parent) in pods {
            for pid in cgroups.procs_of(&format!("{parent}/{sandbox}")) {
                let (rss, pss) = memory_kib(pid);
                p_rss += rss;
                p_pss += pss;
                pauses += 1;
            }
        }
    }
    let n = pods.len().max(1) as u64;
    json!({
        "pods_up": pods.len(),
        "daemon_rss_mib": mib(d_rss), "daemon_pss_mib": mib(d_pss),
        "monitors": monitors, "monitor_names": names,
        "monitors_rss_mib": mib(m_rss), "monitors_pss_mib": mib(m_pss),
        "pause_processes": pauses, "pause_rss_mib": mib(p_rss), "pause_pss_mib": mib(p_pss),
        "per_pod_rss_mib": mib((d_rss + m_rss) / n),
        "per_pod_pss_mib": mib((d_pss + m_pss) / n),
        "per_pod_rss_with_pause_mib": mib((d_rss + m_rss + p_rss) / n),
    })
}

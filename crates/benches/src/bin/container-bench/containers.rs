//! Containers in ready sandboxes: crio-lite's CreateContainer, StartContainer, StopContainer
//! (timeout 0) and RemoveContainer over its socket, beside the same bundle under bare runc and
//! under conmon + runc (`floor.rs`), at each concurrency, one sandbox per worker.
//!
//! At concurrency 1 the three series are interleaved (one cycle of each in turn, the order
//! rotated every cycle), as `crio-bench` interleaves its two series: minutes apart, runc's own
//! times drift more than the few ms being compared. At higher concurrency the series run one
//! after the other.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cri_api::v1 as cri;
use serde_json::{Value, json};

use crate::Ctx;
use crate::cri::{Cri, container_config, sandbox_config};
use crate::daemon::{CrioLite, Daemon};
use crate::floor::Floor;
use crate::series::{Series, run_concurrent};

const CRIO_STEPS: &[&str] = &["create", "start", "stop", "remove"];
const RUNC_STEPS: &[&str] = &["run", "kill", "delete"];
const CONMON_STEPS: &[&str] = &["create", "start", "kill", "delete"];

/// Runs the part at every concurrency; one JSON object per concurrency in `rep["containers"]`.
pub(crate) async fn run(
    ctx: &Ctx<'_>,
    crio: &Cri,
    daemon: &Daemon,
    dirs: &CrioLite,
    rep: &mut Value,
) -> Result<(), String> {
    let logs = ctx.work.join("logs/containers");
    // The floor's bundle comes from a container of this pod, which stays up for the whole part:
    // the bundle joins its network namespace and mounts its /etc files.
    let pod = sandbox_config(
        "floor-pod",
        &ctx.cgroups.parent("crio-ctr/floor-pod"),
        &logs,
    )?;
    let pod_id = crio.run_sandbox(&pod).await?;
    let outcome = async {
        let template = crio
            .create(&pod_id, &pod, container_config("template", ctx.workload))
            .await?;
        crio.start(&template).await?;
        let floor = Floor::from_bundle(
            &dirs.bundle(&template),
            &ctx.work.join("floor"),
            ctx.cgroups.parent("floor"),
        );
        crio.stop(&template).await?;
        crio.remove(&template).await?;
        let floor = Arc::new(floor?);
        rep["floor_bundle"] = floor.describe();
        let mut rows = Vec::new();
        for &c in ctx.concurrency {
            rows.push(at_concurrency(ctx, crio, daemon, &floor, c, &logs).await?);
            rep["containers"] = json!(rows);
        }
        Ok::<(), String>(())
    }
    .await;
    let removed = crio.stop_remove_sandbox(&pod_id).await;
    outcome.and(removed)
}

async fn at_concurrency(
    ctx: &Ctx<'_>,
    crio: &Cri,
    daemon: &Daemon,
    floor: &Arc<Floor>,
    c: usize,
    logs: &Path,
) -> Result<Value, String> {
    eprintln!(
        "[container-bench] containers c={c}: crio-lite, runc and conmon + runc, {} cycles each",
        ctx.cycles
    );
    let configs = (0..c)
        .map(|k| {
            let name = format!("ctr-c{c}-w{k}");
            sandbox_config(
                &name,
                &ctx.cgroups.parent(&format!("crio-ctr/{name}")),
                logs,
            )
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut pods = Vec::new();
    let mut outcome = Ok(Value::Null);
    for config in &configs {
        match crio.run_sandbox(config).await {
            Ok(id) => pods.push((id, config.clone())),
            Err(e) => {
                outcome = Err(e);
                break;
            }
        }
    }
    if outcome.is_ok() {
        outcome = measure(ctx, crio, daemon, floor, c, &pods).await;
    }
    for (id, _) in &pods {
        let removed = crio.stop_remove_sandbox(id).await;
        if outcome.is_ok() {
            removed?;
        }
    }
    outcome
}

async fn measure(
    ctx: &Ctx<'_>,
    crio: &Cri,
    daemon: &Daemon,
    floor: &Arc<Floor>,
    c: usize,
    pods: &[(String, cri::PodSandboxConfig)],
) -> Result<Value, String> {
    let workload = ctx.workload.to_owned();
    let (first, first_config) = &pods[0];
    for i in 0..ctx.warmup {
        let config = container_config(&format!("warm-{i}"), &workload);
        crio.container_cycle(first, first_config, config).await?;
        floor.runc_cycle().await?;
        floor.conmon_cycle().await?;
    }
    let mut ours = Series::new(CRIO_STEPS);
    let mut runc = Series::new(RUNC_STEPS);
    let mut conmon = Series::new(CONMON_STEPS);
    let cpu_before = daemon.cpu.usage();
    let cpu_crio: Duration;
    if c == 1 {
        for i in 0..ctx.cycles {
            for k in 0..3 {
                match (i + k) % 3 {
                    0 => {
                        let config = container_config(&format!("c{i}"), &workload);
                        ours.push(&crio.container_cycle(first, first_config, config).await?);
                    }
                    1 => runc.push(&floor.runc_cycle().await?),
                    _ => conmon.push(&floor.conmon_cycle().await?),
                }
            }
        }
        cpu_crio = daemon.cpu.usage().saturating_sub(cpu_before);
        for s in [&mut ours, &mut runc, &mut conmon] {
            s.close_sequential();
        }
    } else {
        let free: Arc<Mutex<Vec<(String, cri::PodSandboxConfig)>>> =
            Arc::new(Mutex::new(pods.to_vec()));
        let (client, image) = (crio.clone(), workload.clone());
        run_concurrent(&mut ours, ctx.cycles, c, move |i| {
            let (client, image, free) = (client.clone(), image.clone(), Arc::clone(&free));
            async move {
                let (id, config) = free
                    .lock()
                    .map_err(|_| "poisoned")?
                    .pop()
                    .ok_or("no free sandbox")?;
                let took = client
                    .container_cycle(&id, &config, container_config(&format!("c{i}"), &image))
                    .await;
                free.lock().map_err(|_| "poisoned")?.push((id, config));
                took
            }
        })
        .await?;
        cpu_crio = daemon.cpu.usage().saturating_sub(cpu_before);
        let f = Arc::clone(floor);
        run_concurrent(&mut runc, ctx.cycles, c, move |_| {
            let f = Arc::clone(&f);
            async move { f.runc_cycle().await }
        })
        .await?;
        let f = Arc::clone(floor);
        run_concurrent(&mut conmon, ctx.cycles, c, move |_| {
            let f = Arc::clone(&f);
            async move { f.conmon_cycle().await }
        })
        .await?;
    }
    let monitor_start = conmon.mean_ms("create") + conmon.mean_ms("start") - runc.mean_ms("run");
    let reference = runc.mean_ms("total") + monitor_start;
    let added = ours.mean_ms("total") - reference;
    let round = |x: f64| (x * 1e3).round() / 1e3;
    Ok(json!({
        "concurrency": c,
        "interleaved": c == 1,
        "crio-lite": ours.json(),
        "runc": runc.json(),
        "conmon": conmon.json(),
        "crio_cpu_ms_per_container": round(benches::ms(cpu_crio) / ours.len().max(1) as f64),
        "monitor_start_ms": round(monitor_start),
        "reference_ms": round(reference),
        "added_ms": round(added),
        "added_pct": round(added * 100.0 / reference),
    }))
}

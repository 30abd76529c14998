//! The container benchmark: what crio-lite costs per container and per pod, beside the bare
//! runtime under it and beside containerd 1.6, in one run on one node.
//!
//! `container-bench run --work-dir DIR --crio-lite BIN --cgroup-root NAME [--cycles N]
//! [--pods P] [--warmup W] [--concurrency 1,8]` runs inside the node network namespace and a
//! private mount namespace xtask makes (`unshare --mount --propagation slave nsenter
//! --net=/run/netns/NODE`, checked at start). It starts a docker-registry on 127.0.0.1 in the
//! node, pushes a busybox image (`sleep 3600`) and a pause look-alike built offline
//! (`images.rs`), starts crio-lite (`daemon.rs`) and pulls the image through it, untimed, then:
//!
//! 0. **start to ready** (`start.rs`): fresh starts of crio-lite and containerd, taking turns,
//!    from spawn to CRI `Status` ready, with crio-lite's own account of its start's phases.
//! 1. **containers** (`containers.rs`, `floor.rs`): create + start + stop + remove per container
//!    in ready sandboxes, at each concurrency, beside the same bundle under bare runc
//!    (`runc run -d`, kill, delete) and under conmon + runc as crio-lite starts it.
//! 2. **pods** (`pods.rs`): with containerd 1.6 started privately beside crio-lite (CRI plugin,
//!    the same CNI plugins, the pause look-alike as its sandbox image), pods of one container
//!    up and down on both over CRI, the CPU time of each daemon's cgroup and the memory of each
//!    daemon and its monitors with every pod up.
//!
//!
//! `container-bench streams` (same flags, with `--rounds N`, `--forward-rounds N` and
//! `--forward-mib M` instead of cycles, pods and concurrency) sets up the same node, starts
//! both daemons side by side and runs only the streams part (`streams.rs`): Exec and
//! PortForward through each daemon's streaming server, with one WebSocket client (`ws.rs`).
//!
//! Then both daemons get SIGTERM and what is left is counted (runc containers, processes in the
//! bench's cgroups, mounts under the work directory, veths); everything is then removed whatever
//! happened. Prints one JSON line; xtask turns it into tables and target lines.

mod containers;
mod cri;
mod daemon;
mod floor;
mod images;
mod node;
mod pods;
mod series;
mod start;
mod streams;
mod ws;

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use benches::{count_veths, loadavg, text};
use cri::Cri;
use daemon::{Containerd, CrioLite, Daemon};
use node::{Cgroups, Tmpfs};

const USAGE: &str = "usage: container-bench run --work-dir DIR --crio-lite BIN --cgroup-root NAME \
     [--cycles N] [--pods P] [--warmup W] [--concurrency 1,8]
       container-bench streams --work-dir DIR --crio-lite BIN --cgroup-root NAME \
     [--rounds N] [--forward-rounds N] [--forward-mib M]";

struct Opts {
    /// `streams`: only the streams part, else containers and pods.
    streams: bool,
    work_dir: PathBuf,
    crio_lite: PathBuf,
    cgroup_root: String,
    cycles: usize,
    pods: usize,
    warmup: usize,
    concurrency: Vec<usize>,
    sizes: streams::Sizes,
}

fn parse_args() -> Result<Opts, String> {
    let mut args = std::env::args().skip(1);
    let streams = match args.next().as_deref() {
        Some("run") => false,
        Some("streams") => true,
        _ => return Err(USAGE.into()),
    };
    let mut o = Opts {
        streams,
        work_dir: PathBuf::new(),
        crio_lite: PathBuf::new(),
        cgroup_root: String::new(),
        cycles: 200,
        pods: 50,
        warmup: 2,
        concurrency: vec![1, 8],
        sizes: streams::Sizes {
            rounds: 50,
            forward_rounds: 5,
            forward_bytes: 128 << 20,
        },
    };
    while let Some(arg) = args.next() {
        let flag = arg.trim_start_matches('-').to_owned();
        let value = args
            .next()
            .ok_or(format!("--{flag} needs a value\n{USAGE}"))?;
        let number = |v: &str| {
            v.parse::<usize>()
                .map_err(|e| format!("--{flag} {v:?}: {e}"))
        };
        match flag.as_str() {
            "work-dir" => o.work_dir = value.into(),
            "crio-lite" => o.crio_lite = value.into(),
            "cgroup-root" => o.cgroup_root = value,
            "cycles" => o.cycles = number(&value)?,
            "pods" => o.pods = number(&value)?,
            "warmup" => o.warmup = number(&value)?,
            "rounds" => o.sizes.rounds = number(&value)?,
            "forward-rounds" => o.sizes.forward_rounds = number(&value)?,
            "forward-mib" => o.sizes.forward_bytes = number(&value)? << 20,
            "concurrency" => {
                o.concurrency = value
                    .split(',')
                    .map(number)
                    .collect::<Result<Vec<_>, _>>()?;
            }
            other => return Err(format!("unknown flag --{other}\n{USAGE}")),
        }
    }
    let bad_root = o.cgroup_root.is_empty() || o.cgroup_root.contains('/');
    if o.work_dir.as_os_str().is_empty() || o.crio_lite.as_os_str().is_empty() || bad_root {
        return Err(USAGE.into());
    }
    let sizes = &o.sizes;
    if sizes.rounds == 0 || sizes.forward_rounds == 0 || sizes.forward_bytes == 0 {
        return Err(format!(
            "rounds, forward-rounds and forward-mib must be positive\n{USAGE}"
        ));
    }
    if o.cycles == 0 || o.pods == 0 || o.concurrency.is_empty() || o.concurrency.contains(&0) {
        return Err(format!(
            "cycles, pods and concurrency must be positive\n{USAGE}"
        ));
    }
    Ok(o)
}

/// What every part reads.
pub(crate) struct Ctx<'a> {
    pub(crate) work: &'a Path,
    pub(crate) cgroups: &'a Cgroups,
    pub(crate) cycles: usize,
    pub(crate) pods: usize,
    pub(crate) warmup: usize,
    pub(crate) concurrency: &'a [usize],
    pub(crate) workload: &'a str,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let opts = match parse_args() {
        Ok(o) => o,
        Err(msg) => {
            eprintln!("container-bench: {msg}");
            std::process::exit(2);
        }
    };
    let mut rep = json!({
        "bench": if opts.streams { "container-bench streams" } else { "container-bench" }, "cycles": opts.cycles, "pod_count": opts.pods,
        "warmup": opts.warmup, "concurrency": opts.concurrency,
        "num_cpu": std::thread::available_parallelism().map_or(1, std::num::NonZero::get),
        "kernel": text("/proc/sys/kernel/osrelease").trim(),
        "versions": versions(), "loadavg_start": loadavg(),
    });
    let outcome = match node::check_private_namespaces() {
        Ok(()) => run(&opts, &mut rep).await,
        Err(e) => Err(e),
    };
    rep["loadavg_end"] = json!(loadavg());
    let clean = rep["leftover"].as_object().is_some_and(|m| {
        m.values()
            .all(|v| v.as_array().is_some_and(Vec::is_empty) || v == 0)
    });
    let ok = match outcome {
        Ok(()) if clean => true,
        Ok(()) => {
            rep["first_error"] = json!("the run left things behind (see leftover)");
            false
        }
        Err(e) => {
            rep["first_error"] = json!(e);
            false
        }
    };
    rep["ok"] = json!(ok);
    println!("{rep}");
    if !ok {
        std::process::exit(1);
    }
}

/// The first line of `<program> --version` of each program the run drives.
fn versions() -> Value {
    let first_line = |program: &str| {
        std::process::Command::new(program)
            .arg("--version")
            .output()
            .map_or_else(
                |e| format!("{program}: {e}"),
                |o| {
                    String::from_utf8_lossy(&o.stdout)
                        .lines()
                        .next()
                        .unwrap_or("")
                        .to_owned()
                },
            )
    };
    json!({
        "runc": first_line("/usr/sbin/runc"),
        "conmon": first_line("/usr/bin/conmon"),
        "containerd": first_line("/usr/bin/containerd"),
    })
}

/// Sets up, runs both parts, and whatever happened stops the daemons, counts and removes what is
/// left.
async fn run(o: &Opts, rep: &mut Value) -> Result<(), String> {
    std::fs::create_dir_all(&o.work_dir).map_err(|e| format!("{}: {e}", o.work_dir.display()))?;
    // containerd keeps shim sockets in /run/containerd/s and go-cni its cache in /var/lib/cni
    // whatever it is told: both only in this mount namespace.
    let _run_containerd = Tmpfs::mount(Path::new("/run/containerd"))?;
    let _var_lib_cni = Tmpfs::mount(Path::new("/var/lib/cni"))?;
    let cgroups = Cgroups::new(&o.cgroup_root)?;
    let registry = test_support::registry::Registry::start();
    let pushed = images::push(&registry);
    let crio = CrioLite {
        dir: o.work_dir.join("crio-lite"),
    };
    let containerd = Containerd {
        dir: o.work_dir.join("containerd"),
    };
    let mut daemons: Vec<(Daemon, Option<Cri>)> = Vec::new();
    let outcome = parts(o, rep, &cgroups, &pushed, &crio, &containerd, &mut daemons).await;
    let mut stopped = Ok(());
    for (daemon, cri) in daemons.iter_mut().rev() {
        if outcome.is_err()
            && let Some(cri) = cri
        {
            cri.remove_everything().await;
        }
        let s = daemon.terminate();
        stopped = stopped.and(s);
    }
    drop(daemons);
    leftovers(o, rep, &cgroups, &crio, &containerd);
    // Whatever is left goes: runc's containers, processes and cgroups, mounts.
    for root in [
        crio.runc_root(),
        containerd.runc_root().join("k8s.io"),
        o.work_dir.join("floor/runc"),
    ] {
        floor::runc_delete_all(&root);
    }
    let removed = cgroups.remove_all();
    node::unmount_below(&o.work_dir);
    drop(registry);
    outcome.and(stopped).and(removed)
}

async fn parts(
    o: &Opts,
    rep: &mut Value,
    cgroups: &Cgroups,
    pushed: &images::Pushed,
    crio: &CrioLite,
    containerd: &Containerd,
    daemons: &mut Vec<(Daemon, Option<Cri>)>,
) -> Result<(), String> {
    let host = pushed
        .workload
        .split('/')
        .next()
        .unwrap_or_default()
        .to_owned();
    let ctx = Ctx {
        work: &o.work_dir,
        cgroups,
        cycles: o.cycles,
        pods: o.pods,
        warmup: o.warmup,
        concurrency: &o.concurrency,
        workload: &pushed.workload,
    };
    if !o.streams {
        start::run(
            &o.work_dir,
            cgroups,
            &o.crio_lite,
            &host,
            &pushed.pause,
            rep,
        )
        .await?;
    }
    daemons.push((
        crio.start(&o.crio_lite, &host, cgroups.cpu_group("daemon-crio-lite")?)?,
        None,
    ));
    let crio_cri = daemons[0].0.wait_ready().await?;
    daemons[0].1 = Some(crio_cri.clone());
    crio_cri.pull(&pushed.workload).await?;
    if !o.streams {
        containers::run(&ctx, &crio_cri, &daemons[0].0, crio, rep).await?;
    }

    eprintln!("[container-bench] starting containerd 1.6 beside crio-lite");
    daemons.push((
        containerd.start(
            &host,
            &pushed.pause,
            cgroups.cpu_group("daemon-containerd")?,
        )?,
        None,
    ));
    let containerd_cri = daemons[1].0.wait_ready().await?;
    daemons[1].1 = Some(containerd_cri.clone());
    containerd_cri.pull(&pushed.workload).await?;
    containerd_cri.pull(&pushed.pause).await?;
    if o.streams {
        let sides = [
            streams::Side {
                name: "crio-lite",
                cri: &crio_cri,
                daemon: &daemons[0].0,
            },
            streams::Side {
                name: "containerd",
                cri: &containerd_cri,
                daemon: &daemons[1].0,
            },
        ];
        return streams::run(&ctx, &sides, &o.sizes, rep).await;
    }
    let sides = [
        pods::Side {
            name: "crio-lite",
            cri: &crio_cri,
            daemon: &daemons[0].0,
            has_pause: false,
        },
        pods::Side {
            name: "containerd",
            cri: &containerd_cri,
            daemon: &daemons[1].0,
            has_pause: true,
        },
    ];
    pods::run(&ctx, &sides, rep).await
}

/// What the run left once both daemons stopped: lists, empty when clean.
fn leftovers(
    o: &Opts,
    rep: &mut Value,
    cgroups: &Cgroups,
    crio: &CrioLite,
    containerd: &Containerd,
) {
    // crio-lite keeps its pin directory bind-mounted on itself by design; pins below it count.
    let pin_dir = crio.dir.join("run/netns");
    let mounts: Vec<String> = node::mounts_below(&o.work_dir)
        .into_iter()
        .filter(|p| *p != pin_dir)
        .map(|p| p.display().to_string())
        .collect();
    let procs: Vec<String> = cgroups
        .leftover_procs()
        .into_iter()
        .map(|pid| format!("{pid} {}", node::comm(pid)))
        .collect();
    rep["leftover"] = json!({
        "runc_crio_lite": floor::runc_list(&crio.runc_root()),
        "runc_containerd": floor::runc_list(&containerd.runc_root().join("k8s.io")),
        "runc_floor": floor::runc_list(&o.work_dir.join("floor/runc")),
        "processes": procs,
        "mounts": mounts,
        "veths": count_veths(),
    });
}

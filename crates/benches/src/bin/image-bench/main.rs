//! Image pull benchmark: pull + unpack of a multi-layer image from a local registry, by
//! image-store beside skopeo + umoci and beside containerd 1.6, in the same run, cold and warm.
//!
//! `image-bench run --work-dir DIR [--rounds N] [--layers K] [--layer-mib M]` builds the image
//! offline (see `image.rs`), pushes it to a fresh docker-registry on 127.0.0.1, starts a private
//! containerd, then runs `N` rounds; each round measures the disk's write rate (the floor) and
//! then each tool, in an order rotated every round, through three scenarios:
//!
//! - **cold**: nothing of the image on the node. image-store: a new store directory;
//!   skopeo + umoci: a new OCI layout, then `umoci unpack` into a new bundle; containerd: the
//!   image removed and its content and snapshots collected (`ctr images rm --sync`, checked empty).
//! - **warm**: the image is already there and is pulled again: image-store and containerd check
//!   the registry and find every blob and layer; skopeo copies into its layout again (it finds
//!   every blob). umoci keeps no unpacked layers to reuse (a bundle is one container's root), so
//!   warm is skopeo's part alone.
//! - **unpack**: blobs present, layers not: image-store's `layers/` emptied; containerd's
//!   snapshots removed (content kept); skopeo + umoci: skopeo again, then `umoci unpack` into a new
//!   bundle.
//!
//! Every tool runs as its own process(es) and is timed from spawn to exit; peak resident memory
//! is `ru_maxrss` from `wait4` (for image-store, the child's own `VmHWM` too), and for containerd
//! the daemon's `VmHWM` reset before each pull (`clear_refs`) plus ctr's, since both work during a
//! pull. After every measured step the file system is synced, untimed, so no step pays for
//! another's writeback; tools that do not sync their writes (umoci; containerd's snapshots) are
//! therefore timed without their writeback, which the table says.
//!
//! Prints one JSON line; xtask turns it into tables and target lines. The subcommands `push`,
//! `pull` and `floor` are the child processes the run spawns.

mod containerd;
mod image;
mod measure;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use benches::{loadavg, ms};
use containerd::Containerd;
use measure::Run;

const USAGE: &str =
    "usage: image-bench run --work-dir DIR [--rounds N] [--layers K] [--layer-mib M]
       image-bench push --registry HOST --layers K --layer-mib M
       image-bench pull --root DIR --registry HOST REFERENCE
       image-bench floor --dir DIR --bytes N";

const TOOLS: [&str; 3] = ["image-store", "skopeo+umoci", "containerd"];
const SCENARIOS: [&str; 3] = ["cold", "warm", "unpack"];

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let outcome = match args.first().map(String::as_str) {
        Some("run") => flags(&args[1..]).and_then(|f| run(&f)),
        Some("push") => flags(&args[1..]).and_then(|f| {
            image::build_and_push(
                &f.text("registry")?,
                f.number("layers", 5)?,
                f.number("layer-mib", 40)? as u64,
            )
        }),
        Some("pull") => flags(&args[1..]).and_then(|f| pull(&f)),
        Some("floor") => flags(&args[1..]).and_then(|f| {
            let took =
                measure::disk_floor(Path::new(&f.text("dir")?), f.number("bytes", 0)? as u64, 7)?;
            Ok(json!({"ms": ms(took)}))
        }),
        _ => Err(USAGE.to_owned()),
    };
    match outcome {
        Ok(v) => println!("{v}"),
        Err(e) => {
            println!("{}", json!({"ok": false, "error": e}));
            std::process::exit(1);
        }
    }
}

/// `--name value` pairs and at most one bare argument.
struct Flags {
    named: BTreeMap<String, String>,
    bare: Option<String>,
}

fn flags(args: &[String]) -> Result<Flags, String> {
    let mut f = Flags {
        named: BTreeMap::new(),
        bare: None,
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        if let Some(name) = arg.strip_prefix("--") {
            let value = it
                .next()
                .ok_or(format!("--{name} needs a value\n{USAGE}"))?;
            f.named.insert(name.to_owned(), value.clone());
        } else if f.bare.replace(arg.clone()).is_some() {
            return Err(format!("unexpected argument {arg:?}\n{USAGE}"));
        }
    }
    Ok(f)
}

impl Flags {
    fn text(&self, name: &str) -> Result<String, String> {
        self.named
            .get(name)
            .cloned()
            .ok_or(format!("--{name} is missing\n{USAGE}"))
    }

    fn number(&self, name: &str, default: usize) -> Result<usize, String> {
        self.named.get(name).map_or(Ok(default), |v| {
            v.parse().map_err(|e| format!("--{name} {v:?}: {e}"))
        })
    }
}

/// The child that measures image-store: opens the store at `--root` and pulls, as crio-lite
/// would (default store configuration, the local registry insecure).
fn pull(f: &Flags) -> Result<Value, String> {
    let reference = f.bare.clone().ok_or(USAGE)?;
    let mut config = image_store::StoreConfig::new(f.text("root")?);
    config.insecure_registries = vec![f.text("registry")?];
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let started = std::time::Instant::now();
    let image = runtime.block_on(async {
        let store = image_store::Store::open(config).map_err(|e| e.to_string())?;
        store
            .pull(&reference, &image_store::Auth::Anonymous)
            .await
            .map_err(|e| e.to_string())
    })?;
    Ok(json!({
        "pull_ms": ms(started.elapsed()),
        "layers": image.layers.len(),
        "size": image.size,
        "vm_hwm_kib": measure::status_kib("self", "VmHWM"),
    }))
}

/// One measured step of one tool.
#[derive(Default, Clone)]
struct Sample {
    wall: Duration,
    /// Peak resident memory of everything that worked during the step, KiB.
    rss_kib: u64,
    detail: Value,
}

struct Bench {
    exe: PathBuf,
    work: PathBuf,
    host: String,
    reference: String,
    layers: usize,
    unpacked_bytes: u64,
    containerd: Containerd,
    log: PathBuf,
}

fn run(f: &Flags) -> Result<Value, String> {
    let load_start = loadavg();
    let work = PathBuf::from(f.text("work-dir")?);
    let rounds = f.number("rounds", 5)?.max(1);
    let layers = f.number("layers", 5)?.max(1);
    let layer_mib = f.number("layer-mib", 40)?;
    std::fs::create_dir_all(&work).map_err(|e| format!("{}: {e}", work.display()))?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let log = work.join("tools.log");
    let registry = test_support::registry::Registry::start();
    let host = registry.host().to_owned();
    // Built and pushed by a child: ru_maxrss carries this process's peak into every child, so it
    // stays small (rss_floor_kib says how small).
    let mut push = Command::new(&exe);
    push.args(["push", "--registry", &host])
        .args(["--layers", &layers.to_string()])
        .args(["--layer-mib", &layer_mib.to_string()]);
    let pushed = measure::run(&mut push, &log, true)?;
    let facts: Value = serde_json::from_str(pushed.stdout.trim())
        .map_err(|e| format!("push printed {:?}: {e}", pushed.stdout))?;
    let containerd = Containerd::start(&work.join("containerd"), &work.join("containerd.pid"))?;
    let bench = Bench {
        exe,
        work: work.clone(),
        host,
        reference: facts["reference"].as_str().unwrap_or_default().to_owned(),
        layers: facts["layers"].as_u64().unwrap_or(0) as usize,
        unpacked_bytes: facts["unpacked_file_bytes"].as_u64().unwrap_or(0),
        containerd,
        log,
    };
    let mut samples: BTreeMap<(&str, &str), Vec<Sample>> = BTreeMap::new();
    let mut floor = Vec::new();
    let mut syncfs_probe = Vec::new();
    let mut orders = Vec::new();
    for round in 0..rounds {
        floor.push(bench.disk_floor()?);
        syncfs_probe.push(syncfs_after_idle(&work)?);
        let mut order = TOOLS;
        order.rotate_left(round % TOOLS.len());
        orders.push(order.join(","));
        for tool in order {
            let got = match tool {
                "image-store" => bench.ours()?,
                "skopeo+umoci" => bench.skopeo_umoci(round)?,
                _ => bench.containerd()?,
            };
            for (scenario, sample) in SCENARIOS.iter().zip(got) {
                samples.entry((tool, scenario)).or_default().push(sample);
            }
        }
    }
    let compressed = facts["compressed_bytes"].as_u64().unwrap_or(0);
    let tools = summarize(&samples, compressed, bench.unpacked_bytes);
    let floor_ms = median_ms(&floor);
    Ok(json!({
        "ok": true,
        "load_start": load_start,
        "load_end": loadavg(),
        "rounds": rounds,
        "orders": orders,
        "image": facts,
        "work_dir": work,
        "disk_floor": {
            "bytes": bench.unpacked_bytes,
            "median_ms": floor_ms,
            "min_ms": floor.iter().map(|d| ms(*d)).fold(f64::INFINITY, f64::min),
            "mb_per_s": rate(bench.unpacked_bytes, floor_ms),
        },
        "work_fs": work_fs(&work),
        "syncfs_after_1s_idle_ms": syncfs_probe.iter().map(|d| ms(*d)).collect::<Vec<_>>(),
        "rss_floor_kib": measure::status_kib("self", "VmHWM"),
        "tools": tools,
        "speedup": speedups(&tools),
    }))
}

impl Bench {
    /// Runs and times one step, then syncs the file system, untimed.
    fn step(&self, cmd: &mut Command, keep_stdout: bool) -> Result<Run, String> {
        let run = measure::run(cmd, &self.log, keep_stdout)?;
        measure::syncfs(&self.work)?;
        Ok(run)
    }

    fn disk_floor(&self) -> Result<Duration, String> {
        let mut cmd = Command::new(&self.exe);
        cmd.arg("floor")
            .arg("--dir")
            .arg(&self.work)
            .args(["--bytes", &self.unpacked_bytes.to_string()]);
        let run = measure::run(&mut cmd, &self.log, true)?;
        let v: Value = serde_json::from_str(run.stdout.trim()).map_err(|e| e.to_string())?;
        Ok(Duration::from_secs_f64(
            v["ms"].as_f64().unwrap_or(0.0) / 1e3,
        ))
    }

    /// image-store, in a child process per pull: cold, warm, unpack.
    fn ours(&self) -> Result<[Sample; 3], String> {
        let root = self.work.join("image-store");
        remove(&root)?;
        let pull = |what: &str| -> Result<Sample, String> {
            let mut cmd = Command::new(&self.exe);
            cmd.arg("pull").arg("--root").arg(&root).args([
                "--registry",
                &self.host,
                &self.reference,
            ]);
            let run = self.step(&mut cmd, true)?;
            let v: Value = serde_json::from_str(run.stdout.trim())
                .map_err(|e| format!("image-store {what}: printed {:?}: {e}", run.stdout))?;
            if v["layers"].as_u64() != Some(self.layers as u64) {
                return Err(format!("image-store {what}: pulled {v}"));
            }
            let hwm = v["vm_hwm_kib"].as_u64().unwrap_or(0);
            Ok(Sample {
                wall: run.wall,
                // The child's own peak; ru_maxrss is kept beside it as a cross-check.
                rss_kib: hwm,
                detail: json!({"ru_maxrss_kib": run.maxrss_kib, "pull_ms": v["pull_ms"]}),
            })
        };
        let cold = pull("cold")?;
        let warm = pull("warm")?;
        for entry in std::fs::read_dir(root.join("layers")).map_err(|e| e.to_string())? {
            remove(&entry.map_err(|e| e.to_string())?.path())?;
        }
        measure::syncfs(&self.work)?;
        let unpack = pull("unpack")?;
        remove(&root)?;
        measure::syncfs(&self.work)?;
        Ok([cold, warm, unpack])
    }

    /// skopeo copy into an OCI layout, then umoci unpack into a bundle.
    fn skopeo_umoci(&self, round: usize) -> Result<[Sample; 3], String> {
        let dir = self.work.join("skopeo-umoci");
        remove(&dir)?;
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let layout = format!("oci:{}:{}", dir.join("layout").display(), image::TAG);
        let copy = || -> Result<Run, String> {
            let mut cmd = Command::new("skopeo");
            cmd.args(["copy", "--quiet", "--src-tls-verify=false"])
                .arg(format!("docker://{}", self.reference))
                .arg(&layout);
            self.step(&mut cmd, false)
        };
        let unpack = |bundle: &str| -> Result<Run, String> {
            let bundle = dir.join(bundle);
            let mut cmd = Command::new("umoci");
            cmd.args(["unpack", "--image"])
                .arg(format!("{}:{}", dir.join("layout").display(), image::TAG))
                .arg(&bundle);
            let run = self.step(&mut cmd, false)?;
            if !bundle.join("rootfs/bin/busybox").is_file() {
                return Err(format!(
                    "umoci unpacked no busybox into {}",
                    bundle.display()
                ));
            }
            Ok(run)
        };
        let both = |a: Run, b: Run| Sample {
            wall: a.wall + b.wall,
            // One after the other: the peak is the larger one's.
            rss_kib: a.maxrss_kib.max(b.maxrss_kib),
            detail: json!({"skopeo_ms": ms(a.wall), "umoci_ms": ms(b.wall),
                "skopeo_maxrss_kib": a.maxrss_kib, "umoci_maxrss_kib": b.maxrss_kib}),
        };
        let cold = both(copy()?, unpack(&format!("bundle-{round}-cold"))?);
        let again = copy()?;
        let warm = Sample {
            wall: again.wall,
            rss_kib: again.maxrss_kib,
            detail: json!({"skopeo_ms": ms(again.wall), "skopeo_maxrss_kib": again.maxrss_kib}),
        };
        let unpacked = both(copy()?, unpack(&format!("bundle-{round}-unpack"))?);
        remove(&dir)?;
        measure::syncfs(&self.work)?;
        Ok([cold, warm, unpacked])
    }

    /// `ctr images pull` on the private containerd.
    fn containerd(&self) -> Result<[Sample; 3], String> {
        let d = &self.containerd;
        d.remove_all(&self.reference)?;
        measure::syncfs(&self.work)?;
        let pull = |what: &str| -> Result<Sample, String> {
            let pid = d.pid().to_string();
            let before = measure::status_kib(&pid, "VmRSS").unwrap_or(0);
            measure::reset_hwm(d.pid())?;
            let run = d.pull(&self.reference, &self.log)?;
            let daemon_peak = measure::status_kib(&pid, "VmHWM").unwrap_or(0);
            measure::syncfs(&self.work)?;
            let snapshots = d.snapshots()?.len();
            if snapshots != self.layers {
                return Err(format!(
                    "containerd {what}: {snapshots} snapshots for {} layers",
                    self.layers
                ));
            }
            Ok(Sample {
                wall: run.wall,
                // ctr and the daemon work at the same time: their peaks add up.
                rss_kib: run.maxrss_kib + daemon_peak,
                detail: json!({"ctr_maxrss_kib": run.maxrss_kib, "daemon_peak_kib": daemon_peak,
                    "daemon_before_kib": before}),
            })
        };
        let cold = pull("cold")?;
        let warm = pull("warm")?;
        d.remove_snapshots()?;
        measure::syncfs(&self.work)?;
        let unpack = pull("unpack")?;
        d.remove_all(&self.reference)?;
        measure::syncfs(&self.work)?;
        Ok([cold, warm, unpack])
    }
}

/// What one `syncfs` of the bench's file system costs after a second of other work on the
/// machine: image-store pays one per layer.
fn syncfs_after_idle(work: &Path) -> Result<Duration, String> {
    measure::syncfs(work)?;
    std::thread::sleep(Duration::from_secs(1));
    measure::syncfs(work)
}

/// The file system every tool writes to: its type, device, options and, for ext4, whether it
/// has a journal. Without one, ext4 skips inodes freed in the last minute when it allocates,
/// reading their inode table blocks, and file creation after a large removal costs CPU time
/// (seen here as `recently_deleted` in a profile), for every tool alike.
fn work_fs(work: &Path) -> Value {
    let mounts = node_primitives::mounts::read_own().unwrap_or_default();
    let best = mounts
        .iter()
        .filter(|m| work.starts_with(&m.mount_point))
        .max_by_key(|m| m.mount_point.components().count());
    match best {
        Some(m) => {
            let (kind, source, options) = (&m.fs_type, &m.source, m.super_options.join(","));
            let dev = source.rsplit('/').next().unwrap_or("");
            let journal = (kind == "ext4").then(|| {
                std::fs::read_dir("/proc/fs/jbd2").is_ok_and(|d| {
                    d.flatten()
                        .any(|e| e.file_name().to_string_lossy().starts_with(dev))
                })
            });
            json!({"type": kind, "source": source, "options": options, "ext4_journal": journal})
        }
        None => Value::Null,
    }
}

fn remove(path: &Path) -> Result<(), String> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
        Err(_) => Ok(()),
    }
    .map_err(|e| format!("remove {}: {e}", path.display()))
}

/// The median (the mean of the middle two for an even count), in ms.
fn median_ms(xs: &[Duration]) -> f64 {
    let mut v: Vec<f64> = xs.iter().map(|d| ms(*d)).collect();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (f64::midpoint(v[n / 2 - 1], v[n / 2]) * 1e3).round() / 1e3,
    }
}

/// MB (10^6 bytes) per second.
fn rate(bytes: u64, ms: f64) -> f64 {
    (bytes as f64 / 1e3 / ms * 10.0).round() / 10.0
}

fn summarize(
    samples: &BTreeMap<(&str, &str), Vec<Sample>>,
    compressed: u64,
    unpacked: u64,
) -> Value {
    let mut tools = serde_json::Map::new();
    for tool in TOOLS {
        let mut per = serde_json::Map::new();
        for scenario in SCENARIOS {
            let Some(s) = samples.get(&(tool, scenario)) else {
                continue;
            };
            let walls: Vec<Duration> = s.iter().map(|x| x.wall).collect();
            let median = median_ms(&walls);
            let peak = s.iter().map(|x| x.rss_kib).max().unwrap_or(0);
            per.insert(
                scenario.to_owned(),
                json!({
                    "median_ms": median,
                    "min_ms": walls.iter().map(|d| ms(*d)).fold(f64::INFINITY, f64::min),
                    "each_ms": walls.iter().map(|d| ms(*d)).collect::<Vec<_>>(),
                    "compressed_mb_per_s": rate(compressed, median),
                    "unpacked_mb_per_s": rate(unpacked, median),
                    "peak_rss_mib": (peak as f64 / 1024.0 * 10.0).round() / 10.0,
                    "detail": s.iter().map(|x| x.detail.clone()).collect::<Vec<_>>(),
                }),
            );
        }
        tools.insert(tool.to_owned(), Value::Object(per));
    }
    Value::Object(tools)
}

/// Per scenario: the faster peer's median over ours.
fn speedups(tools: &Value) -> Value {
    let mut out = serde_json::Map::new();
    for scenario in SCENARIOS {
        let median = |tool: &str| tools[tool][scenario]["median_ms"].as_f64();
        let peers = ["skopeo+umoci", "containerd"]
            .into_iter()
            .filter_map(|p| Some((p, median(p)?)))
            .min_by(|a, b| a.1.total_cmp(&b.1));
        if let (Some(ours), Some((peer, theirs))) = (median("image-store"), peers) {
            out.insert(
                scenario.to_owned(),
                json!({"faster_peer": peer, "x": (theirs / ours * 100.0).round() / 100.0}),
            );
        }
    }
    Value::Object(out)
}

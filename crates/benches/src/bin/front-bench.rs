//! What the HTTP/2 front costs per RPC: `Version` round trips through two crio-lite daemons
//! started side by side, one with `crio_lite.api.normalize_authority` on (the default) and one
//! with it off, in the same run.
//!
//! Two shapes of use: many calls on one kept-alive connection (kubelet), and one call per new
//! connection (crictl, which dials for every command). The calls alternate between the two
//! daemons in blocks, so drift on the machine lands on both. Prints one JSON line.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use benches::Phase;
use cri_api::v1 as cri;
use serde_json::json;

struct Daemon {
    child: Child,
    socket: PathBuf,
}

impl Daemon {
    fn start(binary: &Path, dir: &Path, normalize: bool) -> Result<Daemon, String> {
        std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        let config = dir.join("crio-lite.conf");
        std::fs::write(
            &config,
            format!("[crio_lite.api]\nnormalize_authority = {normalize}\n"),
        )
        .map_err(|e| e.to_string())?;
        let socket = dir.join("crio-lite.sock");
        let child = Command::new(binary)
            .arg("--config")
            .arg(&config)
            .args(["--config-dir", ""])
            .arg("--listen")
            .arg(&socket)
            .arg("--root")
            .arg(dir.join("state"))
            .arg("--runroot")
            .arg(dir.join("run"))
            .arg("--namespaces-dir")
            .arg(dir.join("run"))
            .arg("--cni-config-dir")
            .arg(dir.join("net.d"))
            .arg("--cache-dir")
            .arg(dir.join("cache"))
            .arg("--cni-run-dir")
            .arg(dir.join("cni-run"))
            .args([
                "--builtin-default-network=false",
                "--log-level",
                "warn",
                "run",
            ])
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", binary.display()))?;
        Ok(Daemon { child, socket })
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn ready(socket: &Path) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(mut client) = benches::cri_client(socket).await
            && client.version(cri::VersionRequest::default()).await.is_ok()
        {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("{} never answered", socket.display()));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `n` calls on one connection, timed one by one.
async fn kept_alive(socket: &Path, n: usize, out: &mut Vec<Duration>) -> Result<(), String> {
    let mut client = benches::cri_client(socket).await?;
    for _ in 0..n {
        let start = Instant::now();
        client
            .version(cri::VersionRequest::default())
            .await
            .map_err(|e| e.to_string())?;
        out.push(start.elapsed());
    }
    Ok(())
}

/// `n` calls, each on a connection of its own (connect included, as crictl pays it).
async fn fresh(socket: &Path, n: usize, out: &mut Vec<Duration>) -> Result<(), String> {
    for _ in 0..n {
        let start = Instant::now();
        let mut client = benches::cri_client(socket).await?;
        client
            .version(cri::VersionRequest::default())
            .await
            .map_err(|e| e.to_string())?;
        out.push(start.elapsed());
    }
    Ok(())
}

fn summary(latencies: Vec<Duration>) -> serde_json::Value {
    let phase = Phase::of_latencies(latencies);
    let stats = benches::stats(&phase, "per_s");
    json!({"p50_ms": stats["p50_ms"], "p99_ms": stats["p99_ms"], "mean_ms": stats["mean_ms"], "n": phase.latencies.len()})
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(binary), Some(work)) = (args.next(), args.next()) else {
        eprintln!("usage: front-bench CRIO_LITE_BINARY WORK_DIR [ROUNDS]");
        std::process::exit(2);
    };
    let rounds: usize = args.next().and_then(|r| r.parse().ok()).unwrap_or(20);
    let outcome = run(Path::new(&binary), Path::new(&work), rounds).await;
    match outcome {
        Ok(line) => println!("{line}"),
        Err(e) => {
            println!("{}", json!({"error": e}));
            std::process::exit(1);
        }
    }
}

async fn run(binary: &Path, work: &Path, rounds: usize) -> Result<serde_json::Value, String> {
    let with = Daemon::start(binary, &work.join("with-front"), true)?;
    let without = Daemon::start(binary, &work.join("without-front"), false)?;
    ready(&with.socket).await?;
    ready(&without.socket).await?;
    let mut kept = [Vec::new(), Vec::new()];
    let mut dialled = [Vec::new(), Vec::new()];
    // Warm-up, untimed.
    for daemon in [&with, &without] {
        kept_alive(&daemon.socket, 200, &mut Vec::new()).await?;
        fresh(&daemon.socket, 20, &mut Vec::new()).await?;
    }
    for round in 0..rounds {
        // Alternate which daemon goes first, so neither always follows the other.
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for i in order {
            let socket = if i == 0 {
                &with.socket
            } else {
                &without.socket
            };
            kept_alive(socket, 100, &mut kept[i]).await?;
            fresh(socket, 10, &mut dialled[i]).await?;
        }
    }
    let [kept_with, kept_without] = kept;
    let [dialled_with, dialled_without] = dialled;
    let p50 = |v: &serde_json::Value| v["p50_ms"].as_f64().unwrap_or(f64::NAN);
    let (kw, ko) = (summary(kept_with), summary(kept_without));
    let (dw, dout) = (summary(dialled_with), summary(dialled_without));
    Ok(json!({
        "bench": "front",
        "kept_alive": {"with_front": kw, "without_front": ko,
            "added_p50_us": ms_to_us(p50(&kw) - p50(&ko))},
        "new_connection": {"with_front": dw, "without_front": dout,
            "added_p50_us": ms_to_us(p50(&dw) - p50(&dout))},
    }))
}

fn ms_to_us(ms: f64) -> f64 {
    (ms * 1000.0 * 10.0).round() / 10.0
}

//! The streams part (`container-bench streams`): CRI Exec and PortForward through each daemon's
//! streaming server, crio-lite beside containerd 1.6, both up at once on the same node, with
//! one WebSocket client (`ws.rs`) for both.
//!
//! Each daemon runs one pod of one busybox container that serves, with `nc -ll -e`, a fixed
//! number of zero bytes per connection on port 5000 (the throughput payload) and 64 KiB on
//! port 5001 (the streams of the memory check). Then, the operations of a round taking turns
//! (the first one rotating each round):
//!
//! 1. **exec**: `true` through the streaming URL, end to end (Exec request, connect, upgrade,
//!    exit status received), beside ExecSync of `true`, on both daemons.
//! 2. **echo**: in one open `cat` stream per daemon, a line on stdin to its copy back on stdout:
//!    the interactive round trip once a stream is up.
//! 3. **forward**: the payload through PortForward (from the WebSocket upgrade to the last
//!    byte) beside a direct TCP connection to the pod's IP and port (the floor), on both.
//! 4. **memory**: each daemon's VmRSS before and after 100 streams opened and closed (exec of
//!    `true` and port forwards of 64 KiB, alternating), a second after the last.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::AsyncReadExt as _;
use tokio::net::TcpStream;

use crate::Ctx;
use crate::cri::{Cri, container_config, sandbox_config};
use crate::daemon::Daemon;
use crate::node::memory_kib;
use crate::ws::Ws;

const PAYLOAD_PORT: u16 = 5000;
const SMALL_PORT: u16 = 5001;
const SMALL_BYTES: usize = 64 * 1024;
/// Streams opened and closed between the two memory readings.
const MEMORY_STREAMS: usize = 100;
const SETTLE: Duration = Duration::from_secs(1);

/// One daemon under test.
pub(crate) struct Side<'a> {
    pub(crate) name: &'static str,
    pub(crate) cri: &'a Cri,
    pub(crate) daemon: &'a Daemon,
}

/// The sizes of a run.
pub(crate) struct Sizes {
    /// Rounds of exec (each: stream and ExecSync on both daemons) and of echo.
    pub(crate) rounds: usize,
    /// Rounds of forward (each: port forward and direct on both daemons).
    pub(crate) forward_rounds: usize,
    /// Bytes per forward.
    pub(crate) forward_bytes: usize,
}

/// A pod that is up on one daemon.
struct Pod {
    sandbox: String,
    container: String,
    ip: String,
}

/// Brings a pod up on each daemon, measures, and takes the pods down whatever happened.
pub(crate) async fn run(
    ctx: &Ctx<'_>,
    sides: &[Side<'_>; 2],
    sizes: &Sizes,
    rep: &mut Value,
) -> Result<(), String> {
    let mut pods = Vec::new();
    let mut outcome = Ok(());
    for s in sides {
        match pod_up(ctx, s, sizes.forward_bytes).await {
            Ok(p) => pods.push(p),
            Err(e) => {
                outcome = Err(e);
                break;
            }
        }
    }
    if outcome.is_ok() {
        outcome = measure(sides, &pods, sizes, rep).await;
    }
    for (s, p) in sides.iter().zip(&pods) {
        let down = s.cri.pod_down(&p.sandbox, &p.container).await.map(drop);
        outcome = outcome.and(down);
    }
    outcome
}

async fn pod_up(ctx: &Ctx<'_>, s: &Side<'_>, forward_bytes: usize) -> Result<Pod, String> {
    let name = format!("streams-{}", s.name);
    let pod = sandbox_config(
        &name,
        &ctx.cgroups.parent(&format!("pods-{}/{name}", s.name)),
        &ctx.work.join("logs").join(s.name),
    )?;
    let mut config = container_config("serve", ctx.workload);
    let serve = |port: u16, bytes: usize| {
        format!("/bin/busybox nc -ll -p {port} -e /bin/busybox head -c {bytes} /dev/zero")
    };
    config.command = vec![
        "/bin/busybox".to_owned(),
        "sh".to_owned(),
        "-c".to_owned(),
        format!(
            "{} & exec {}",
            serve(SMALL_PORT, SMALL_BYTES),
            serve(PAYLOAD_PORT, forward_bytes)
        ),
    ];
    let (sandbox, container, _) = s.cri.pod_up(&pod, config).await?;
    let ip = s.cri.sandbox_ip(&sandbox).await?;
    let p = Pod {
        sandbox,
        container,
        ip,
    };
    // Both listeners up: each connection gets its bytes and is closed.
    for port in [PAYLOAD_PORT, SMALL_PORT] {
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect((p.ip.as_str(), port)).await.is_err() {
            if Instant::now() > deadline {
                return Err(format!("{}: nothing listens on {}:{port}", s.name, p.ip));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    Ok(p)
}

/// One operation of a round: which daemon, what.
#[derive(Clone, Copy)]
enum Op {
    Stream,
    Sync,
    Forward,
    Direct,
}

async fn once(s: &Side<'_>, p: &Pod, op: Op, bytes: usize) -> Result<Duration, String> {
    let t0 = Instant::now();
    match op {
        Op::Stream => {
            let url = s.cri.exec_url(&p.container, &["/bin/true"], false).await?;
            let mut ws = Ws::connect(&url).await?;
            ws.exit_status().await?;
            let took = t0.elapsed();
            ws.close().await;
            return Ok(took);
        }
        Op::Sync => s.cri.exec_sync(&p.container, &["/bin/true"]).await?,
        Op::Forward => {
            let port = if bytes == SMALL_BYTES {
                SMALL_PORT
            } else {
                PAYLOAD_PORT
            };
            let url = s.cri.port_forward_url(&p.sandbox, port).await?;
            // Throughput: from the upgrade on, not the CRI request.
            let t0 = Instant::now();
            let mut ws = Ws::connect(&format!("{url}?port={port}")).await?;
            ws.forwarded(bytes).await?;
            let took = t0.elapsed();
            ws.close().await;
            return Ok(took);
        }
        Op::Direct => {
            let mut tcp = TcpStream::connect((p.ip.as_str(), PAYLOAD_PORT))
                .await
                .map_err(|e| format!("connect {}:{PAYLOAD_PORT}: {e}", p.ip))?;
            let mut buf = vec![0u8; 256 * 1024];
            let mut got = 0;
            while got < bytes {
                match tcp.read(&mut buf).await {
                    Ok(0) => return Err(format!("direct: closed after {got} of {bytes} bytes")),
                    Ok(n) => got += n,
                    Err(e) => return Err(format!("direct read: {e}")),
                }
            }
        }
    }
    Ok(t0.elapsed())
}

/// Runs `ops` (daemon index, operation) `rounds` times, the first one rotating, after one
/// untimed warm-up round; the times per (daemon, operation).
async fn rounds(
    sides: &[Side<'_>; 2],
    pods: &[Pod],
    ops: &[(usize, Op)],
    rounds: usize,
    bytes: usize,
) -> Result<Vec<Vec<Duration>>, String> {
    let mut times = vec![Vec::new(); ops.len()];
    for r in 0..=rounds {
        for k in 0..ops.len() {
            let i = (r + k) % ops.len();
            let (side, op) = ops[i];
            let took = once(&sides[side], &pods[side], op, bytes).await?;
            if r > 0 {
                times[i].push(took);
            }
        }
    }
    Ok(times)
}

/// p50, mean, min and max, ms.
fn latency(times: &[Duration]) -> Value {
    let mut t = times.to_vec();
    t.sort();
    if t.is_empty() {
        return Value::Null;
    }
    json!({
        "p50_ms": benches::ms(t[t.len() / 2]),
        "mean_ms": benches::ms(t.iter().sum::<Duration>() / t.len() as u32),
        "min_ms": benches::ms(t[0]), "max_ms": benches::ms(t[t.len() - 1]),
        "n": t.len(),
    })
}

/// MiB/s of the median and of the best transfer.
fn throughput(times: &[Duration], bytes: usize) -> Value {
    let mut t = times.to_vec();
    t.sort();
    if t.is_empty() {
        return Value::Null;
    }
    let rate = |d: Duration| (bytes as f64 / 1_048_576.0 / d.as_secs_f64() * 10.0).round() / 10.0;
    json!({"median_mib_s": rate(t[t.len() / 2]), "best_mib_s": rate(t[0]), "n": t.len()})
}

async fn measure(
    sides: &[Side<'_>; 2],
    pods: &[Pod],
    sizes: &Sizes,
    rep: &mut Value,
) -> Result<(), String> {
    let names = [sides[0].name, sides[1].name];
    eprintln!("[container-bench] streams: exec, {} rounds", sizes.rounds);
    let ops = [
        (0, Op::Stream),
        (0, Op::Sync),
        (1, Op::Stream),
        (1, Op::Sync),
    ];
    let t = rounds(sides, pods, &ops, sizes.rounds, 0).await?;
    let mut exec = json!({});
    for (k, (side, _)) in ops.iter().enumerate() {
        let what = if k % 2 == 0 { "stream" } else { "exec_sync" };
        exec[names[*side]][what] = latency(&t[k]);
    }
    rep["streams"]["exec"] = exec;

    eprintln!(
        "[container-bench] streams: echo through stdin, {} rounds",
        sizes.rounds
    );
    rep["streams"]["echo"] = echo(sides, pods, sizes.rounds).await?;

    eprintln!(
        "[container-bench] streams: forward, {} rounds of {} MiB",
        sizes.forward_rounds,
        sizes.forward_bytes >> 20
    );
    let ops = [
        (0, Op::Forward),
        (0, Op::Direct),
        (1, Op::Forward),
        (1, Op::Direct),
    ];
    let t = rounds(sides, pods, &ops, sizes.forward_rounds, sizes.forward_bytes).await?;
    let mut forward = json!({"bytes": sizes.forward_bytes});
    for (k, (side, _)) in ops.iter().enumerate() {
        let what = if k % 2 == 0 { "port_forward" } else { "direct" };
        forward[names[*side]][what] = throughput(&t[k], sizes.forward_bytes);
    }
    rep["streams"]["forward"] = forward;

    eprintln!("[container-bench] streams: memory over {MEMORY_STREAMS} streams");
    let mut memory = json!({"streams": MEMORY_STREAMS});
    for (s, p) in sides.iter().zip(pods) {
        tokio::time::sleep(SETTLE).await;
        let before = memory_kib(s.daemon.pid()).0;
        for i in 0..MEMORY_STREAMS {
            let op = if i % 2 == 0 { Op::Stream } else { Op::Forward };
            once(s, p, op, SMALL_BYTES).await?;
        }
        tokio::time::sleep(SETTLE).await;
        let after = memory_kib(s.daemon.pid()).0;
        memory[s.name] = json!({
            "before_kib": before, "after_kib": after,
            "growth_mib": ((after as f64 - before as f64) / 1024.0 * 100.0).round() / 100.0,
        });
    }
    rep["streams"]["memory"] = memory;
    Ok(())
}

/// One `cat` stream open on each daemon; per round, a line to each (taking turns) and its copy
/// back, timed.
async fn echo(sides: &[Side<'_>; 2], pods: &[Pod], rounds: usize) -> Result<Value, String> {
    const LINE: &[u8] = b"ping\n";
    let mut streams = Vec::new();
    for (s, p) in sides.iter().zip(pods) {
        let url = s
            .cri
            .exec_url(&p.container, &["/bin/busybox", "cat"], true)
            .await?;
        streams.push(Ws::connect(&url).await?);
    }
    let mut times = [Vec::new(), Vec::new()];
    for r in 0..=rounds {
        for k in 0..2 {
            let i = (r + k) % 2;
            let t0 = Instant::now();
            streams[i].send(0, LINE).await?;
            streams[i]
                .read_stdout(LINE.len())
                .await
                .map_err(|e| format!("{} echo: {e}", sides[i].name))?;
            if r > 0 {
                times[i].push(t0.elapsed());
            }
        }
    }
    for ws in streams {
        ws.close().await;
    }
    let mut out = json!({});
    for (s, t) in sides.iter().zip(&times) {
        out[s.name] = latency(t);
    }
    Ok(out)
}

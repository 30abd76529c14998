//! `cargo xtask bench --only streams`: CRI Exec and PortForward through crio-lite's streaming
//! server beside containerd 1.6's (kubelet's streaming library), both up at once in the node
//! `containers` makes (`container-bench streams`; see `containers.rs` for the node, its
//! namespaces, cgroups and clean-up). One WebSocket `v4.channel.k8s.io` client for both.
//!
//! Targets: the exec round trip of `true` through crio-lite's stream within 1.5x of its
//! ExecSync of `true` (p50); port-forward throughput at least 50% of a direct TCP connection
//! into the same pod (median) and ahead of containerd's port forward; crio-lite's VmRSS within
//! 5 MiB after 100 streams opened and closed. containerd's exec and echo figures are shown
//! beside crio-lite's, not judged.

use std::path::Path;

use anyhow::Result;
use serde_json::Value;

use super::containers::run_in_node;
use super::{Verdict, num};

const EXEC_RATIO_TARGET: f64 = 1.5;
const FORWARD_SHARE_TARGET: f64 = 0.5;
const RSS_GROWTH_TARGET_MIB: f64 = 5.0;

/// Runs `container-bench streams`, writes `streams.jsonl`, prints the tables and target lines.
pub(super) fn run(bin: &Path, out_dir: &Path, quick: bool) -> Result<Vec<Verdict>> {
    let (rounds, forward_rounds, mib) = if quick {
        ("20", "3", "64")
    } else {
        ("100", "7", "256")
    };
    println!(
        "\n==> streams: exec, echo and port forward through crio-lite's streaming server beside \
         containerd 1.6's ({rounds} exec rounds, {forward_rounds} forwards of {mib} MiB), \
         memory over 100 streams"
    );
    let v = run_in_node(
        bin,
        out_dir,
        &[
            "streams",
            "--rounds",
            rounds,
            "--forward-rounds",
            forward_rounds,
            "--forward-mib",
            mib,
        ],
        "streams.jsonl",
        print_tables,
    )?;
    Ok(verdicts(&v["streams"]))
}

fn print_tables(v: &Value) {
    println!(
        "{} | {} | kernel {}; load average {} at the start, {} at the end",
        v["versions"]["runc"].as_str().unwrap_or("?"),
        v["versions"]["containerd"].as_str().unwrap_or("?"),
        v["kernel"].as_str().unwrap_or("?"),
        v["loadavg_start"].as_str().unwrap_or("?"),
        v["loadavg_end"].as_str().unwrap_or("?"),
    );
    let s = &v["streams"];
    if s.is_null() {
        return;
    }
    println!(
        "\nexec of `true`, taking turns, ms as p50/mean/min/max; echo: a line through an open \
         `cat` stream's stdin back on its stdout"
    );
    println!(
        "{:<11} {:>30} {:>30} {:>30}",
        "daemon", "stream (Exec+upgrade+status)", "ExecSync", "echo"
    );
    let cell = |x: &Value| {
        if x.is_null() {
            "-".to_owned()
        } else {
            format!(
                "{:.2}/{:.2}/{:.2}/{:.2}",
                num(x, &["p50_ms"]),
                num(x, &["mean_ms"]),
                num(x, &["min_ms"]),
                num(x, &["max_ms"])
            )
        }
    };
    for d in ["crio-lite", "containerd"] {
        println!(
            "{d:<11} {:>30} {:>30} {:>30}",
            cell(&s["exec"][d]["stream"]),
            cell(&s["exec"][d]["exec_sync"]),
            cell(&s["echo"][d]),
        );
    }
    let f = &s["forward"];
    println!(
        "\nforward of {} MiB from a pod's listener, MiB/s as median (best); port forward from \
         the WebSocket upgrade on, direct: TCP to the pod's IP from the node",
        num(f, &["bytes"]) / 1_048_576.0
    );
    println!("{:<11} {:>20} {:>20}", "daemon", "port forward", "direct");
    for d in ["crio-lite", "containerd"] {
        let rate = |x: &Value| {
            format!(
                "{:.1} ({:.1})",
                num(x, &["median_mib_s"]),
                num(x, &["best_mib_s"])
            )
        };
        println!(
            "{d:<11} {:>20} {:>20}",
            rate(&f[d]["port_forward"]),
            rate(&f[d]["direct"])
        );
    }
    let m = &s["memory"];
    println!(
        "\nVmRSS before and after {} streams (exec of `true` and 64 KiB port forwards, \
         alternating), MiB:",
        m["streams"]
    );
    for d in ["crio-lite", "containerd"] {
        println!(
            "{d:<11} {:.1} -> {:.1} ({:+.2})",
            num(&m[d], &["before_kib"]) / 1024.0,
            num(&m[d], &["after_kib"]) / 1024.0,
            num(&m[d], &["growth_mib"]),
        );
    }
}

fn verdicts(s: &Value) -> Vec<Verdict> {
    let mut out = Vec::new();
    let ours = |path: &[&str]| num(&s["exec"]["crio-lite"], path);
    let theirs = |path: &[&str]| num(&s["exec"]["containerd"], path);
    let (stream, sync) = (ours(&["stream", "p50_ms"]), ours(&["exec_sync", "p50_ms"]));
    out.push(Verdict::judged(
        format!("streams: crio-lite's exec round trip within {EXEC_RATIO_TARGET}x of its ExecSync (p50)"),
        stream <= EXEC_RATIO_TARGET * sync,
        format!(
            "{stream:.2} ms vs {sync:.2} ms ({:.2}x); containerd {:.2} ms stream, {:.2} ms ExecSync",
            stream / sync,
            theirs(&["stream", "p50_ms"]),
            theirs(&["exec_sync", "p50_ms"]),
        ),
    ));
    let ctrd_stream = theirs(&["stream", "p50_ms"]);
    out.push(Verdict::shown(
        "streams: crio-lite's exec round trip beside containerd's (p50)",
        stream < ctrd_stream,
        format!(
            "{stream:.2} ms vs {ctrd_stream:.2} ms ({:.2}x)",
            ctrd_stream / stream
        ),
    ));
    let f = &s["forward"];
    let rate = |d: &str, what: &str| num(&f[d][what], &["median_mib_s"]);
    let (pf, direct) = (
        rate("crio-lite", "port_forward"),
        rate("crio-lite", "direct"),
    );
    out.push(Verdict::judged(
        format!(
            "streams: crio-lite's port forward at least {:.0}% of a direct connection (median)",
            FORWARD_SHARE_TARGET * 100.0
        ),
        pf >= FORWARD_SHARE_TARGET * direct,
        format!(
            "{pf:.1} MiB/s vs {direct:.1} MiB/s ({:.0}%)",
            pf / direct * 100.0
        ),
    ));
    let ctrd = rate("containerd", "port_forward");
    out.push(Verdict::judged(
        "streams: crio-lite's port forward ahead of containerd's (median)",
        pf > ctrd,
        format!(
            "{pf:.1} MiB/s vs {ctrd:.1} MiB/s ({:.2}x); containerd's pod direct {:.1} MiB/s",
            pf / ctrd,
            rate("containerd", "direct")
        ),
    ));
    let m = &s["memory"];
    let growth = num(&m["crio-lite"], &["growth_mib"]);
    out.push(Verdict::judged(
        format!(
            "streams: crio-lite's VmRSS within {RSS_GROWTH_TARGET_MIB} MiB over {} streams",
            m["streams"]
        ),
        growth.abs() <= RSS_GROWTH_TARGET_MIB,
        format!(
            "{growth:+.2} MiB; containerd {:+.2} MiB",
            num(&m["containerd"], &["growth_mib"])
        ),
    ));
    out
}

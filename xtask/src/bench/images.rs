//! `cargo xtask bench --only images`: pull + unpack of a multi-layer image from a local registry,
//! image-store beside skopeo copy + umoci unpack and beside containerd 1.6's `ctr images pull`, in
//! the same run, cold, warm and with the blobs present but the layers not; and the disk's own
//! write rate, the floor under any unpack that keeps its data.
//!
//! Targets: image-store >= 1.5x faster than the faster peer, cold and warm; its resident memory
//! during a ~200 MB pull < 50 MiB (judged only for an image that size: not with `--quick`).
//! `image-bench` says how each tool is run and measured (crates/benches/src/bin/image-bench/).

use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};
use serde_json::Value;

use super::Verdict;

const SPEEDUP_TARGET: f64 = 1.5;
const RSS_TARGET_MIB: f64 = 50.0;
/// The RSS target is about a ~200 MB pull; smaller images are not judged on it.
const RSS_JUDGED_FROM_BYTES: f64 = 150e6;
/// A run that takes longer than this is stuck; it is killed and counts as failed.
const TIMEOUT_S: &str = "3600";

/// Runs `image-bench`, writes `images.jsonl`, prints the tables and returns the target lines.
pub(super) fn run(bin: &Path, out_dir: &Path, quick: bool) -> Result<Vec<Verdict>> {
    let (rounds, layers, layer_mib) = if quick {
        ("3", "3", "8")
    } else {
        ("5", "5", "40")
    };
    println!(
        "\n==> images: image-store beside skopeo + umoci and containerd 1.6, {layers} data layers \
         of {layer_mib} MiB + busybox (gzip), {rounds} rounds, cold / warm / unpack"
    );
    let work = std::env::temp_dir().join(format!("xtask-images-bench-{}", std::process::id()));
    let out = Command::new("timeout")
        .args(["--kill-after=10", TIMEOUT_S])
        .arg(bin.join("image-bench"))
        .arg("run")
        .arg("--work-dir")
        .arg(&work)
        .args([
            "--rounds",
            rounds,
            "--layers",
            layers,
            "--layer-mib",
            layer_mib,
        ])
        .stderr(Stdio::inherit())
        .output()
        .context("cannot run image-bench");
    clean_up(&work);
    let out = out?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    std::fs::write(out_dir.join("images.jsonl"), &text)?;
    let v: Value = text
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .with_context(|| format!("image-bench printed no result ({}): {text:?}", out.status))?;
    if !out.status.success() || v["ok"] != true {
        bail!("image-bench failed ({}): {}", out.status, v["error"]);
    }
    print_tables(&v);
    Ok(verdicts(&v))
}

/// What a killed image-bench leaves: its containerd (by the pid it wrote), mounts under its work
/// directory, the directory.
fn clean_up(work: &Path) {
    if let Ok(pid) = std::fs::read_to_string(work.join("containerd.pid")) {
        let pid = pid.trim();
        if Path::new(&format!("/proc/{pid}")).exists() {
            let _ = Command::new("kill").args(["-KILL", pid]).status();
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    }
    if let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") {
        let mut points: Vec<&str> = info
            .lines()
            .filter_map(|l| l.split(' ').nth(4))
            .filter(|p| Path::new(p).starts_with(work))
            .collect();
        points.sort_by_key(|p| std::cmp::Reverse(p.len()));
        for p in points {
            let _ = Command::new("umount").args(["-l", p]).status();
        }
    }
    let _ = std::fs::remove_dir_all(work);
}

fn print_tables(v: &Value) {
    let img = &v["image"];
    let mb = |b: &Value| b.as_f64().unwrap_or(0.0) / 1e6;
    let fs = &v["work_fs"];
    println!(
        "file system: {} on {}{}",
        fs["type"].as_str().unwrap_or("?"),
        fs["source"].as_str().unwrap_or("?"),
        match fs["ext4_journal"].as_bool() {
            Some(false) =>
                " (ext4 without a journal: creating files right after a large removal \
                            costs CPU time, for every tool)",
            _ => "",
        }
    );
    println!(
        "image: {} layers, {:.1} MB compressed, {:.1} MB in {} files unpacked; rounds {}; load \
         average {} at the start, {} at the end",
        img["layers"],
        mb(&img["compressed_bytes"]),
        mb(&img["unpacked_file_bytes"]),
        img["files"],
        v["rounds"],
        v["load_start"].as_str().unwrap_or("?"),
        v["load_end"].as_str().unwrap_or("?"),
    );
    println!(
        "\n{:<8} {:<13} {:>10} {:>10} {:>9} {:>9} {:>9}",
        "scenario", "tool", "median ms", "min ms", "MB/s gz", "MB/s out", "RSS MiB"
    );
    for scenario in ["cold", "warm", "unpack"] {
        for tool in ["image-store", "skopeo+umoci", "containerd"] {
            let s = &v["tools"][tool][scenario];
            println!(
                "{scenario:<8} {tool:<13} {:>10} {:>10} {:>9} {:>9} {:>9}",
                num(&s["median_ms"], 1),
                num(&s["min_ms"], 1),
                num(&s["compressed_mb_per_s"], 1),
                num(&s["unpacked_mb_per_s"], 1),
                num(&s["peak_rss_mib"], 1),
            );
        }
    }
    let floor = &v["disk_floor"];
    println!(
        "{:<8} {:<13} {:>10} {:>10} {:>9} {:>9}",
        "floor",
        "disk write",
        num(&floor["median_ms"], 1),
        num(&floor["min_ms"], 1),
        "-",
        num(&floor["mb_per_s"], 1)
    );
    println!(
        "MB/s gz: compressed image bytes per second; MB/s out: unpacked file bytes per second; \
         floor: the unpacked bytes written to one file and fsynced on the same file system. \
         Peak RSS: image-store's own VmHWM; skopeo+umoci the larger of the two; containerd the \
         daemon's peak during the pull plus ctr's. warm: the image is there, pulled again \
         (skopeo: copy again; umoci has no unpacked layers to reuse); unpack: blobs present, \
         layers not (skopeo+umoci: copy again + unpack into a new bundle). The file system is \
         synced, untimed, after every step: image-store syncs its blobs and layers, containerd \
         its blobs only, umoci nothing, so their writeback is not in their times. One syncfs \
         after 1 s idle took {} ms (image-store syncs once per layer).",
        v["syncfs_after_1s_idle_ms"]
    );
}

/// A JSON number with `digits` decimals, `-` when there is none.
fn num(v: &Value, digits: usize) -> String {
    v.as_f64()
        .map_or_else(|| "-".to_owned(), |x| format!("{x:.digits$}"))
}

fn verdicts(v: &Value) -> Vec<Verdict> {
    let mut out = Vec::new();
    for scenario in ["cold", "warm", "unpack"] {
        let s = &v["speedup"][scenario];
        let (Some(x), Some(peer)) = (s["x"].as_f64(), s["faster_peer"].as_str()) else {
            continue;
        };
        let target = format!("images {scenario}: image-store >= {SPEEDUP_TARGET}x the faster peer");
        let detail = format!(
            "{x:.2}x {peer} ({} ms vs {} ms, medians)",
            num(&v["tools"]["image-store"][scenario]["median_ms"], 1),
            num(&v["tools"][peer][scenario]["median_ms"], 1)
        );
        out.push(if scenario == "unpack" {
            Verdict::shown(target, x >= SPEEDUP_TARGET, detail)
        } else {
            Verdict::judged(target, x >= SPEEDUP_TARGET, detail)
        });
    }
    let rss = v["tools"]["image-store"]["cold"]["peak_rss_mib"]
        .as_f64()
        .unwrap_or(f64::MAX);
    let bytes = v["image"]["compressed_bytes"].as_f64().unwrap_or(0.0);
    let target = format!("images: image-store RSS during a cold pull < {RSS_TARGET_MIB} MiB");
    let detail = format!("{rss} MiB for {:.0} MB", bytes / 1e6);
    out.push(if bytes >= RSS_JUDGED_FROM_BYTES {
        Verdict::judged(target, rss < RSS_TARGET_MIB, detail)
    } else {
        Verdict::shown(
            target,
            rss < RSS_TARGET_MIB,
            detail + " (judged at ~200 MB only)",
        )
    });
    out
}

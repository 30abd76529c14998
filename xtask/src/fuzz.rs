//! `cargo xtask fuzz`: the libFuzzer targets in `fuzz/`, one after the other, for a fixed time.
//!
//! cargo-fuzz runs as a subprocess on the nightly toolchain (xtask stays on stable and light).
//! Each target starts from its corpus in `fuzz/corpus/<target>/` (grown by earlier runs, not
//! committed), its checked-in seeds in `fuzz/seeds/<target>/` and the fixtures it shares with the
//! crates' tests, read in place. libFuzzer's output goes to `target/fuzz/<target>.log`; what is
//! parsed from it and any new file in `fuzz/artifacts/<target>/` make the table.
//!
//! `--seeds` is the fast part: every seed replayed through the same checks on stable Rust
//! (the fuzz crate's `tests/seeds.rs`, which `cargo test --workspace` also runs: the crate is a
//! workspace member), in seconds once built.

use std::collections::BTreeSet;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail};

use crate::cmd::{cargo, run_step, workspace_root};
use crate::packages;

pub(crate) const USAGE: &str = "usage: cargo xtask fuzz [--secs N] [--target NAME] | --seeds

Runs each fuzz target in fuzz/ with cargo-fuzz (libFuzzer, nightly toolchain) for N seconds, one
after the other, and prints executions, coverage and new crashes per target. Exits non-zero when a
target crashes: the input is in fuzz/artifacts/<target>/; keep it in fuzz/regressions/<target>/
while the bug is open, in fuzz/seeds/<target>/ once fixed. Installs cargo-fuzz, the nightly
toolchain and a C++ compiler when missing.

targets: conf result cache_entry cni_args cri_request sysctl unpack_layer registry h2_front
         spdy_frames

options:
  --secs N        seconds per target (default 60)
  --target NAME   one target only
  --seeds         only replay the checked-in seeds through every target's checks, on stable
                  (what `cargo xtask test` runs)";

/// The targets, as `fuzz/Cargo.toml` names them.
const TARGETS: &[&str] = &[
    "conf",
    "result",
    "cache_entry",
    "cni_args",
    "cri_request",
    "sysctl",
    "unpack_layer",
    "registry",
    "h2_front",
    "spdy_frames",
];

/// Seeds read in place beside `fuzz/seeds/<target>/`, relative to the workspace root; missing
/// ones are skipped. Keep in step with `EXTRA_SEED_DIRS` in `fuzz/src/lib.rs` (xtask depends on
/// no workspace crate, so it cannot share the list).
const EXTRA_SEED_DIRS: &[(&str, &[&str])] = &[
    (
        "conf",
        &["crates/cni-config/testdata", "../shared/testdata/conflists"],
    ),
    ("result", &["crates/cni-types/testdata/results"]),
    ("cache_entry", &["crates/cni-exec/testdata/cache"]),
];

/// libFuzzer builds its C++ runtime through the `cc` crate.
const FUZZ_PACKAGES: &[(&str, &str)] = &[("g++", "libFuzzer's C++ runtime, for cargo fuzz")];

/// One input running longer than this is reported as a hang (libFuzzer's default is 20 minutes).
const INPUT_TIMEOUT_SECS: u64 = 10;

/// What one target's run came to.
struct Outcome {
    target: &'static str,
    /// libFuzzer's own figure when it printed one; else the wall time, which includes a rebuild
    /// when a crate changed since the build step.
    seconds: f64,
    executions: Option<u64>,
    coverage: Option<u64>,
    corpus: usize,
    findings: Vec<PathBuf>,
    /// The process failed without leaving an artifact (a build error, libFuzzer refusing a flag).
    failure: Option<String>,
    log: PathBuf,
}

pub(crate) fn run(args: &[String]) -> Result<()> {
    let mut secs: u64 = 60;
    let mut only: Option<&'static str> = None;
    let mut seeds = false;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--secs" => {
                let value = it
                    .next()
                    .context("fuzz: --secs needs a number of seconds")?;
                secs = value
                    .parse()
                    .ok()
                    .filter(|s| *s > 0)
                    .with_context(|| format!("fuzz: --secs {value:?}: a positive number"))?;
            }
            "--target" => {
                let value = it.next().context("fuzz: --target needs a name")?;
                only = Some(
                    TARGETS
                        .iter()
                        .copied()
                        .find(|t| t == value)
                        .with_context(|| {
                            format!("fuzz: unknown target {value:?} ({})", TARGETS.join(", "))
                        })?,
                );
            }
            "--seeds" => seeds = true,
            other => bail!("fuzz: unknown option {other:?}\n\n{USAGE}"),
        }
    }
    if seeds {
        return replay_seeds();
    }
    let targets: Vec<&'static str> = only.map_or_else(|| TARGETS.to_vec(), |t| vec![t]);

    packages::ensure(FUZZ_PACKAGES)?;
    ensure_nightly()?;
    ensure_cargo_fuzz()?;
    let mut build = nightly();
    build.args(["fuzz", "build", "--features", "libfuzzer"]);
    if let Some(target) = only {
        build.arg(target);
    }
    run_step("build the fuzz targets (nightly, sanitizers)", &mut build)?;

    let log_dir = workspace_root().join("target/fuzz");
    std::fs::create_dir_all(&log_dir)
        .with_context(|| format!("cannot create {}", log_dir.display()))?;
    let mut outcomes = Vec::new();
    for target in targets {
        outcomes.push(fuzz_one(target, secs, &log_dir)?);
    }
    report(&outcomes)
}

/// The stable replay of every seed (`tests/seeds.rs` of the fuzz crate, without libFuzzer).
///
/// # Errors
///
/// When a seed breaks a target's property, or the fuzz crate does not build.
pub(crate) fn replay_seeds() -> Result<()> {
    // `--workspace` so features unify as in `cargo test --workspace`, which runs the same test:
    // a `-p` build would compile part of the dependency tree again with other features.
    run_step(
        "fuzz seeds (every checked-in input through every target's checks)",
        cargo().args(["test", "--workspace", "--test", "seeds"]),
    )
}

/// Every feature of every workspace member as `package/feature`, but the fuzz crate's
/// `libfuzzer` (its targets build on nightly with sanitizers, in `cargo xtask fuzz`): what clippy
/// lints, in place of `--all-features`.
///
/// # Errors
///
/// When `cargo metadata` fails.
pub(crate) fn lintable_features() -> Result<Vec<String>> {
    let meta = crate::cmd::workspace_metadata()?;
    let mut features = Vec::new();
    for package in meta["packages"].as_array().into_iter().flatten() {
        let name = package["name"].as_str().unwrap_or_default();
        for feature in package["features"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(f, _)| f)
        {
            if feature != "default" && !(name == FUZZ_PACKAGE && feature == "libfuzzer") {
                features.push(format!("{name}/{feature}"));
            }
        }
    }
    Ok(features)
}

/// The fuzz crate's package name.
const FUZZ_PACKAGE: &str = "ocicni-fuzz";

/// `cargo +nightly` through rustup's proxy (`$CARGO` is the stable cargo that runs xtask).
fn nightly() -> Command {
    let mut cmd = Command::new("cargo");
    cmd.arg("+nightly").current_dir(workspace_root());
    // Set by the stable cargo running xtask; the nightly one must pick its own.
    for var in ["CARGO", "RUSTC", "RUSTDOC", "RUSTUP_TOOLCHAIN"] {
        cmd.env_remove(var);
    }
    cmd
}

fn succeeds(cmd: &mut Command) -> bool {
    cmd.stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn ensure_nightly() -> Result<()> {
    if succeeds(nightly().arg("--version")) {
        return Ok(());
    }
    println!("xtask: the nightly toolchain is missing (cargo fuzz needs it); installing it");
    run_step(
        "install the nightly toolchain",
        Command::new("rustup").args(["toolchain", "install", "nightly", "--profile", "minimal"]),
    )
}

fn ensure_cargo_fuzz() -> Result<()> {
    if succeeds(nightly().args(["fuzz", "--version"])) {
        return Ok(());
    }
    println!("xtask: cargo-fuzz is missing; installing it with cargo install cargo-fuzz --locked");
    run_step(
        "install cargo-fuzz",
        cargo().args(["install", "cargo-fuzz", "--locked"]),
    )
}

fn fuzz_one(target: &'static str, secs: u64, log_dir: &Path) -> Result<Outcome> {
    let root = workspace_root();
    let fuzz = root.join("fuzz");
    let corpus = fuzz.join("corpus").join(target);
    let artifacts = fuzz.join("artifacts").join(target);
    for dir in [&corpus, &artifacts] {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    // libFuzzer writes what it finds to the first corpus directory and only reads the others.
    let mut corpora = vec![corpus.clone(), fuzz.join("seeds").join(target)];
    for (_, dirs) in EXTRA_SEED_DIRS.iter().filter(|(t, _)| *t == target) {
        corpora.extend(dirs.iter().map(|d| root.join(d)).filter(|d| d.is_dir()));
    }
    let before = files_in(&artifacts);
    let log = log_dir.join(format!("{target}.log"));
    let out = File::create(&log).with_context(|| format!("cannot create {}", log.display()))?;
    let err = out.try_clone()?;

    let mut cmd = nightly();
    cmd.args(["fuzz", "run", "--features", "libfuzzer", target])
        .args(&corpora)
        .args([
            "--".to_owned(),
            format!("-max_total_time={secs}"),
            format!("-timeout={INPUT_TIMEOUT_SECS}"),
            "-print_final_stats=1".to_owned(),
        ]);
    println!(
        "\n==> fuzz {target} for {secs} s (libFuzzer's output: {})",
        log.display()
    );
    let started = Instant::now();
    let status = cmd
        .stdout(out)
        .stderr(err)
        .status()
        .with_context(|| format!("cannot start cargo +nightly fuzz run {target}"))?;
    let wall = started.elapsed().as_secs_f64();

    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let findings: Vec<PathBuf> = files_in(&artifacts)
        .into_iter()
        .filter(|f| !before.contains(f))
        .collect();
    let failure = (!status.success() && findings.is_empty())
        .then(|| format!("{status} without an artifact; see the log"));
    if !findings.is_empty() {
        println!("{target}: FOUND {} new input(s) that fail:", findings.len());
        for f in &findings {
            println!("  {}", f.display());
        }
        println!("{}", crash_excerpt(&text));
        let first = findings[0].display();
        println!(
            "  reproduce: cargo +nightly fuzz run {target} {first}\n  \
             keep it: cp {first} fuzz/regressions/{target}/ while open, fuzz/seeds/{target}/ once fixed"
        );
    }
    Ok(Outcome {
        target,
        seconds: fuzzing_seconds(&text).unwrap_or(wall),
        executions: executions(&text),
        coverage: coverage(&text),
        corpus: files_in(&corpus).len(),
        findings,
        failure,
        log,
    })
}

fn files_in(dir: &Path) -> BTreeSet<PathBuf> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.is_file())
                .collect()
        })
        .unwrap_or_default()
}

/// libFuzzer's count of inputs run: `stat::number_of_executed_units` (from
/// `-print_final_stats=1`), else `Done N runs`, else the last `#N` status line.
fn executions(log: &str) -> Option<u64> {
    let stat = log.lines().rev().find_map(|l| {
        l.strip_prefix("stat::number_of_executed_units:")
            .and_then(|n| n.trim().parse().ok())
    });
    let done = || {
        log.lines().rev().find_map(|l| {
            l.strip_prefix("Done ")
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|n| n.parse().ok())
        })
    };
    let status_line = || {
        log.lines().rev().find_map(|l| {
            l.strip_prefix('#')
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|n| n.parse().ok())
        })
    };
    stat.or_else(done).or_else(status_line)
}

/// How long libFuzzer ran: its `Done N runs in S second(s)`.
fn fuzzing_seconds(log: &str) -> Option<f64> {
    log.lines().rev().find_map(|l| {
        let rest = l.strip_prefix("Done ")?;
        let (_, secs) = rest.split_once(" runs in ")?;
        secs.split_whitespace().next()?.parse().ok()
    })
}

/// The `cov:` figure (covered edges) of libFuzzer's last status line.
fn coverage(log: &str) -> Option<u64> {
    log.lines()
        .rev()
        .filter(|l| l.starts_with('#'))
        .find_map(|l| {
            let mut words = l.split_whitespace();
            words.find(|w| *w == "cov:")?;
            words.next()?.parse().ok()
        })
}

/// The part of the log that says what failed: the panic (or sanitizer report) and what follows.
fn crash_excerpt(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    let start = lines
        .iter()
        .position(|l| l.contains("panicked at") || (l.starts_with("==") && l.contains("ERROR")))
        .or_else(|| lines.iter().position(|l| l.contains("deadly signal")))
        .unwrap_or_else(|| lines.len().saturating_sub(20));
    lines[start..]
        .iter()
        .take_while(|l| !l.starts_with("stack backtrace"))
        .take(12)
        .map(|l| format!("  | {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn report(outcomes: &[Outcome]) -> Result<()> {
    println!("\n== fuzz results");
    println!(
        "{:<12} {:>7} {:>12} {:>9} {:>7} {:>7}  result",
        "target", "secs", "executions", "exec/s", "cov", "corpus"
    );
    let mut failed = Vec::new();
    for o in outcomes {
        let per_sec = o.executions.map_or_else(
            || "-".to_owned(),
            |n| format!("{:.0}", n as f64 / o.seconds.max(1.0)),
        );
        let result = if !o.findings.is_empty() {
            failed.push(o.target);
            format!("{} new crash(es)", o.findings.len())
        } else if let Some(why) = &o.failure {
            failed.push(o.target);
            format!("run failed: {why} ({})", o.log.display())
        } else {
            "ok".to_owned()
        };
        println!(
            "{:<12} {:>7.0} {:>12} {:>9} {:>7} {:>7}  {}",
            o.target,
            o.seconds,
            o.executions
                .map_or_else(|| "-".to_owned(), |n| n.to_string()),
            per_sec,
            o.coverage.map_or_else(|| "-".to_owned(), |n| n.to_string()),
            o.corpus,
            result
        );
    }
    if !failed.is_empty() {
        bail!("fuzz: {} failed: {}", failed.len(), failed.join(", "));
    }
    println!("\nxtask: no target crashed");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "\
INFO: Seed: 123
#2\tINITED cov: 10 ft: 11 corp: 1/1b exec/s: 0 rss: 30Mb
#4096\tpulse  cov: 120 ft: 300 corp: 40/2Kb lim: 43 exec/s: 2048 rss: 60Mb
#8000\tDONE   cov: 130 ft: 320 corp: 45/2Kb lim: 43 exec/s: 4000 rss: 61Mb
Done 8000 runs in 2 second(s)
stat::number_of_executed_units: 8001
stat::average_exec_per_sec:     4000
";

    #[test]
    fn executions_prefer_the_final_stats() {
        assert_eq!(executions(LOG), Some(8001));
        let no_stats: Vec<&str> = LOG.lines().filter(|l| !l.starts_with("stat::")).collect();
        assert_eq!(executions(&no_stats.join("\n")), Some(8000));
        assert_eq!(executions("#77\tNEW    cov: 3 ft: 3\n"), Some(77));
        assert_eq!(executions("error: no such command: `fuzz`\n"), None);
    }

    #[test]
    fn seconds_are_libfuzzers_own() {
        assert_eq!(fuzzing_seconds(LOG), Some(2.0));
        assert_eq!(fuzzing_seconds("#3\tDONE cov: 1\n"), None);
    }

    #[test]
    fn coverage_is_the_last_status_line() {
        assert_eq!(coverage(LOG), Some(130));
        assert_eq!(coverage("Done 3 runs\n"), None);
    }

    #[test]
    fn seed_dirs_name_known_targets() {
        for (target, _) in EXTRA_SEED_DIRS {
            assert!(TARGETS.contains(target), "{target}");
        }
    }
}

//! Processes: run a program to its end, find processes by their environment, wait for one to die.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Runs `program` with `args` (stdin empty) to its end and returns its output, failed or not.
///
/// # Panics
///
/// When the program cannot be started, failing the test.
pub fn output(program: &str, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program} {args:?}: {e}"))
}

/// Runs `program` with `args` and returns its stdout.
///
/// # Panics
///
/// When it cannot be started or fails, with its exit status and stderr.
pub fn must(program: &str, args: &[&str]) -> String {
    let out = output(program, args);
    assert!(
        out.status.success(),
        "{program} {args:?} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout(&out)
}

/// The stdout of `out`, decoded lossily.
pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// This test binary again, running only the test `name` (ignored or not) on one thread with its
/// output shown: a worker process that a test starts (telling it its job through environment
/// variables the test checks first) and waits for or kills.
///
/// # Panics
///
/// When the running executable cannot be found.
pub fn rerun_test(name: &str) -> Command {
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut cmd = Command::new(exe);
    cmd.args([
        name,
        "--exact",
        "--include-ignored",
        "--nocapture",
        "--test-threads=1",
    ]);
    cmd
}

/// A process found by [`with_env`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// Its pid.
    pub pid: u32,
    /// Its command line, arguments separated by spaces.
    pub cmdline: String,
}

/// The processes with a variable `KEY=value` in their environment for which `wanted` holds: the
/// plugins a killed runtime left running, say (cni-exec runs each in a process group of its own).
pub fn with_env(wanted: impl Fn(&str) -> bool) -> Vec<Found> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            // A process may exit between listing and reading: then it is not one of them.
            std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|environ| {
                environ
                    .split(|b| *b == 0)
                    .any(|var| wanted(&String::from_utf8_lossy(var)))
            })
        })
        .map(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            Found {
                pid,
                cmdline: String::from_utf8_lossy(&cmdline)
                    .replace('\0', " ")
                    .trim_end()
                    .to_owned(),
            }
        })
        .collect()
}

/// Whether `pid` is gone: no `/proc` entry, or a zombie that nobody reaped yet (in a container the
/// init process may not reap orphans; a zombie runs no code and holds no resources but its pid).
pub fn is_dead(pid: u64) -> bool {
    i32::try_from(pid)
        .ok()
        .and_then(node_primitives::ProcStat::of)
        .is_none_or(|s| s.has_exited())
}

/// Waits up to five seconds for `pid` to die; returns whether it did. Sleeps on Tokio's timer, so
/// the runtime's other tasks (the one killing the process among them) go on meanwhile.
pub async fn wait_dead(pid: u64) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if is_dead(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    is_dead(pid)
}

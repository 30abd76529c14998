//! Timing a program and taking its peak resident memory, the disk's own write rate, and what a
//! whole-file-system sync costs on this machine.

use std::fs::File;
use std::io::{Read as _, Write as _};
use std::os::unix::process::ExitStatusExt as _;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// One program run to its end.
pub(crate) struct Run {
    pub(crate) wall: Duration,
    /// `ru_maxrss` from `wait4`, KiB. Linux carries the spawning process's peak across `exec`,
    /// so this is at least the bench's own peak (recorded as `rss_floor_kib`).
    pub(crate) maxrss_kib: u64,
    pub(crate) stdout: String,
}

/// Runs `cmd` to its end with its stderr (and, unless `keep_stdout`, its stdout) appended to
/// `log`; fails with the log's tail when it exits non-zero.
pub(crate) fn run(cmd: &mut Command, log: &Path, keep_stdout: bool) -> Result<Run, String> {
    let what = cmd.get_program().display().to_string();
    let log_file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| format!("{}: {e}", log.display()))?;
    let err_file = log_file.try_clone().map_err(|e| e.to_string())?;
    cmd.stdin(Stdio::null()).stderr(err_file);
    if keep_stdout {
        cmd.stdout(Stdio::piped());
    } else {
        cmd.stdout(log_file);
    }
    let started = Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {what}: {e}"))?;
    let mut stdout = String::new();
    if let Some(mut out) = child.stdout.take() {
        let _ = out.read_to_string(&mut stdout);
    }
    let (status, maxrss_kib) =
        wait_rusage(child.id()).map_err(|e| format!("wait for {what}: {e}"))?;
    let wall = started.elapsed();
    if !status.success() {
        return Err(format!(
            "{what} failed ({status}); its log ends:\n{}",
            tail(log)
        ));
    }
    Ok(Run {
        wall,
        maxrss_kib,
        stdout,
    })
}

/// Reaps `pid` and returns its status with its `ru_maxrss` (KiB): std's `Child::wait` drops the
/// resource usage.
fn wait_rusage(pid: u32) -> std::io::Result<(ExitStatus, u64)> {
    let pid = libc::pid_t::try_from(pid).map_err(std::io::Error::other)?;
    let mut status: libc::c_int = 0;
    // SAFETY: rusage is plain integers, for which all zeros is a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: both pointers are to live locals that wait4 only writes through.
        let r = unsafe { libc::wait4(pid, &raw mut status, 0, &raw mut usage) };
        if r == pid {
            return Ok((
                ExitStatus::from_raw(status),
                u64::try_from(usage.ru_maxrss).unwrap_or(0),
            ));
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// The last lines of a log file.
pub(crate) fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

/// A `/proc/<pid>/status` field in KiB (`VmHWM`, `VmRSS`); `pid` "self" for this process.
pub(crate) fn status_kib(pid: &str, field: &str) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

/// Resets a process's `VmHWM` to its current resident set (Linux >= 4.0), so the next reading
/// is the peak of what happens from now on.
pub(crate) fn reset_hwm(pid: u32) -> Result<(), String> {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5")
        .map_err(|e| format!("reset the peak RSS of {pid}: {e}"))
}

/// `syncfs` on the file system holding `dir`: flushes everyone's dirty data there, not ours only.
pub(crate) fn syncfs(dir: &Path) -> Result<Duration, String> {
    let f = File::open(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let t = Instant::now();
    nix::unistd::syncfs(&f).map_err(|e| format!("syncfs {}: {e}", dir.display()))?;
    Ok(t.elapsed())
}

/// The disk's write rate, the floor under any unpack that keeps its data: `bytes` of
/// incompressible data written to a new file in `dir` in 1 MiB writes, then `fsync`ed; the file
/// is removed afterwards. The data (16 MiB, cycled) is made and everyone's dirty data flushed
/// before the clock starts.
pub(crate) fn disk_floor(dir: &Path, bytes: u64, seed: u64) -> Result<Duration, String> {
    const CHUNK: usize = 1 << 20;
    let path = dir.join("disk-floor.bin");
    let io = |e: std::io::Error| format!("{}: {e}", path.display());
    let mut data = vec![0u8; 16 * CHUNK];
    crate::image::Rng::new(seed).fill(&mut data);
    syncfs(dir)?;
    let started = Instant::now();
    let mut file = File::create(&path).map_err(io)?;
    let mut left = bytes;
    for chunk in data.chunks(CHUNK).cycle() {
        if left == 0 {
            break;
        }
        let n = left.min(CHUNK as u64) as usize;
        file.write_all(&chunk[..n]).map_err(io)?;
        left -= n as u64;
    }
    file.sync_all().map_err(io)?;
    let took = started.elapsed();
    drop(file);
    std::fs::remove_file(&path).map_err(io)?;
    Ok(took)
}

//! The pod init: the program side of [`pin_pod_pid`](crate::pin_pod_pid).
//!
//! A binary that wants to be a [`PodInitProgram`](crate::PodInitProgram) calls [`main`] with the
//! two arguments [`pin_pod_pid`](crate::pin_pod_pid) appends to its command line, before it
//! starts any thread (crio-lite does it from a hidden `pod-init` subcommand). Then:
//!
//! 1. it reads on stdin where to confine the init (the pod's namespace pins and cgroup leaf, as
//!    [`pin_pod_pid`](crate::pin_pod_pid) resolved them), unshares a new PID namespace and forks:
//!    the child is pid 1 there;
//! 2. the child starts a session of its own, blocks SIGCHLD, SIGTERM and SIGINT, closes every
//!    descriptor but its two pipes, and confines itself: it joins the pod's network, IPC and UTS
//!    namespaces and its cgroup leaf, pivots into an empty read-only tmpfs in a mount namespace
//!    of its own, becomes uid and gid 65534 without groups or capabilities, sets no_new_privs,
//!    turns not dumpable and installs a seccomp filter (see `confine.rs`); then it tells its
//!    parent so and waits for a go-ahead;
//! 3. the parent writes the child's identity (pid and start time) to the pid file, atomically,
//!    gives the go-ahead, prints the pid and exits: the child is nobody's child but init's;
//! 4. the child reaps every process that ends in its namespace (orphans are reparented to it)
//!    and exits on SIGTERM or SIGINT. It does nothing else.
//!
//! A child that fails a confinement step tells its parent which and exits: the program fails
//! naming the step, and no init runs unconfined. A child that never gets the go-ahead (its
//! parent was killed before the pid file named it) exits at once: no init runs that its pid
//! file does not name.

use std::io::{Read as _, Write as _};
use std::os::fd::{AsRawFd as _, OwnedFd};
use std::path::Path;

use nix::errno::Errno;
use nix::sched::{CloneFlags, unshare};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{ForkResult, Pid};
use safe_file::Durability;

use crate::record::ProcessIdentity;

mod confine;
pub(crate) use confine::Plan;

/// What the child says once it is confined; anything else is the step that failed.
const CONFINED: &[u8] = b"confined";
/// The most read of the plan on stdin and of the child's report.
const MAX_MESSAGE: u64 = 64 * 1024;

/// Becomes the init of a new PID namespace for `pod`, confined as its stdin says, recording it in
/// `pid_file`; never returns. The process exits 0 once the init runs (its host pid printed on
/// stdout) and 1 when it could not start one (the reason on stderr, naming the pod and, when the
/// init could not be confined, the step).
///
/// It must be called while the process has one thread: it forks, and the child keeps running
/// Rust code.
pub fn main(pod: &str, pid_file: &Path) -> ! {
    match read_plan().and_then(|plan| start(pid_file, &plan)) {
        Ok(pid) => {
            // The caller may be gone (a daemon killed meanwhile): the pid file is what counts.
            let _ = writeln!(std::io::stdout(), "{pid}");
            std::process::exit(0)
        }
        Err(reason) => {
            let _ = writeln!(std::io::stderr(), "pod {pod}: pod init: {reason}");
            std::process::exit(1)
        }
    }
}

/// The confinement [`pin_pod_pid`](crate::pin_pod_pid) wrote on stdin.
fn read_plan() -> Result<Plan, String> {
    let mut text = Vec::new();
    std::io::stdin()
        .take(MAX_MESSAGE)
        .read_to_end(&mut text)
        .map_err(|e| format!("cannot read the confinement on stdin: {e}"))?;
    serde_json::from_slice(&text).map_err(|e| format!("no confinement on stdin: {e}"))
}

/// Steps 1 and 3 (see the module docs): the init's host pid once it is recorded.
fn start(pid_file: &Path, plan: &Plan) -> Result<i32, String> {
    if threads() != Some(1) {
        return Err("must be started with one thread (it forks)".to_owned());
    }
    // The new root is mounted over the pid file's directory, in the init's mount namespace only.
    let staging = pid_file
        .parent()
        .filter(|d| d.is_absolute())
        .ok_or_else(|| format!("{} is not an absolute path", pid_file.display()))?;
    let pipe = || {
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
            .map_err(|e| format!("cannot make a pipe: {e}"))
    };
    let (go_read, go_write) = pipe()?;
    let (report_read, report_write) = pipe()?;
    unshare(CloneFlags::CLONE_NEWPID)
        .map_err(|e| format!("cannot unshare a PID namespace: {e}"))?;
    // SAFETY: the process has one thread (checked above), so the child inherits no lock another
    // thread held and may allocate.
    match unsafe { nix::unistd::fork() }.map_err(|e| format!("cannot fork: {e}"))? {
        ForkResult::Child => {
            drop((go_write, report_read));
            init(plan, staging, go_read, report_write)
        }
        ForkResult::Parent { child } => {
            drop((go_read, report_write));
            let recorded = confined(child, report_read)
                .and_then(|()| record(child, pid_file))
                .and_then(|()| {
                    let mut go = std::fs::File::from(go_write);
                    go.write_all(b"1")
                        .map_err(|e| format!("cannot start the init {child}: {e}"))
                });
            if let Err(reason) = recorded {
                // Our child, not reaped yet: its pid cannot name another process.
                let _ = nix::sys::signal::kill(child, Signal::SIGKILL);
                let _ = waitpid(child, None);
                return Err(reason);
            }
            Ok(child.as_raw())
        }
    }
}

/// Waits for the child's report: confined, or the step that failed.
fn confined(child: Pid, report: OwnedFd) -> Result<(), String> {
    let mut said = Vec::new();
    std::fs::File::from(report)
        .take(MAX_MESSAGE)
        .read_to_end(&mut said)
        .map_err(|e| format!("cannot read the init {child}'s report: {e}"))?;
    match said.as_slice() {
        CONFINED => Ok(()),
        [] => Err(format!("the init {child} ended before it was confined")),
        step => Err(format!(
            "the init {child} could not be confined: cannot {}",
            String::from_utf8_lossy(step)
        )),
    }
}

fn record(child: Pid, pid_file: &Path) -> Result<(), String> {
    let who = ProcessIdentity::of(child.as_raw())
        .ok_or_else(|| format!("the init {child} is gone before it was recorded"))?;
    let bytes = serde_json::to_vec(&who).map_err(|e| format!("cannot serialize: {e}"))?;
    // A marker that only has to outlive this process: a reboot ends the init too.
    safe_file::write_atomic(pid_file, &bytes, 0o600, Durability::Unsynced)
        .map_err(|e| format!("cannot record the init {child}: {e}"))
}

/// Steps 2 and 4: the init itself.
fn init(plan: &Plan, staging: &Path, go: OwnedFd, report: OwnedFd) -> ! {
    let _ = nix::unistd::setsid();
    // Its executable is the read-only bind `pid.exe`; `ps` should say what it is, as CRI-O's
    // `pause` does.
    let _ = nix::sys::prctl::set_name(c"pod-init");
    let mut signals = SigSet::empty();
    for signal in [Signal::SIGCHLD, Signal::SIGTERM, Signal::SIGINT] {
        signals.add(signal);
    }
    // Blocked, they wait for `wait` below; pid 1 would otherwise ignore SIGTERM and SIGINT from
    // its own namespace, having no handler.
    if signals.thread_block().is_err() {
        exit_now(1);
    }
    confine::close_others(&[go.as_raw_fd(), report.as_raw_fd()]);
    let mut report = std::fs::File::from(report);
    if let Err(step) = confine::confine(plan, staging) {
        let _ = report.write_all(step.as_bytes());
        exit_now(1);
    }
    // From here on only what the seccomp filter allows: reads, writes and closes of the pipes,
    // the signal wait, wait4 and exit. No allocation.
    if report.write_all(CONFINED).is_err() {
        exit_now(1);
    }
    // EOF for the parent's read.
    drop(report);
    let mut byte = [0u8; 1];
    let mut go = std::fs::File::from(go);
    if !matches!(go.read(&mut byte), Ok(1)) || byte != *b"1" {
        // The parent could not record this init: it must not run.
        exit_now(1);
    }
    drop(go);
    loop {
        match signals.wait() {
            Ok(Signal::SIGTERM | Signal::SIGINT) => exit_now(0),
            Ok(_) => reap(),
            Err(_) => {}
        }
    }
}

/// `_exit(2)`: no atexit handler or stdio flush, whose syscalls the filter would refuse.
fn exit_now(code: i32) -> ! {
    // SAFETY: _exit ends the process at once; no Rust value needs dropping (nothing is written
    // that a destructor would flush).
    unsafe { libc::_exit(code) }
}

/// Waits for every child that has ended, without blocking.
fn reap() {
    loop {
        match waitpid(None::<Pid>, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) | Err(Errno::ECHILD) => return,
            Ok(_) | Err(Errno::EINTR) => {}
            Err(_) => return,
        }
    }
}

/// The number of threads of this process (`Threads:` in `/proc/self/status`).
fn threads() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))?
        .trim()
        .parse()
        .ok()
}

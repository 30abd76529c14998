//! The pod init: the program side of [`pin_pod_pid`](crate::pin_pod_pid).
//!
//! A binary that wants to be a [`PodInitProgram`](crate::PodInitProgram) calls [`main`] with the
//! two arguments [`pin_pod_pid`](crate::pin_pod_pid) appends to its command line, before it
//! starts any thread (crio-lite does it from a hidden `pod-init` subcommand). Then:
//!
//! 1. it unshares a new PID namespace and forks: the child is pid 1 there;
//! 2. the child starts a session of its own, moves to `/`, puts `/dev/null` on its stdio, blocks
//!    SIGCHLD, SIGTERM and SIGINT, and waits for a go-ahead on a pipe;
//! 3. the parent writes the child's identity (pid and start time) to the pid file, atomically,
//!    gives the go-ahead, prints the pid and exits: the child is nobody's child but init's;
//! 4. the child reaps every process that ends in its namespace (orphans are reparented to it)
//!    and exits on SIGTERM or SIGINT. It does nothing else.
//!
//! A child that never gets the go-ahead (its parent was killed before the pid file named it)
//! exits at once: no init runs that its pid file does not name.

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

/// Becomes the init of a new PID namespace for `pod`, recording it in `pid_file`; never returns.
/// The process exits 0 once the init runs (its host pid printed on stdout) and 1 when it could
/// not start one (the reason on stderr, naming the pod).
///
/// It must be called while the process has one thread: it forks, and the child keeps running
/// Rust code.
pub fn main(pod: &str, pid_file: &Path) -> ! {
    match start(pid_file) {
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

/// Steps 1 and 3 (see the module docs): the init's host pid once it is recorded.
fn start(pid_file: &Path) -> Result<i32, String> {
    if threads() != Some(1) {
        return Err("must be started with one thread (it forks)".to_owned());
    }
    let (go_read, go_write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
        .map_err(|e| format!("cannot make a pipe: {e}"))?;
    unshare(CloneFlags::CLONE_NEWPID)
        .map_err(|e| format!("cannot unshare a PID namespace: {e}"))?;
    // SAFETY: the process has one thread (checked above), so the child inherits no lock another
    // thread held and may allocate.
    match unsafe { nix::unistd::fork() }.map_err(|e| format!("cannot fork: {e}"))? {
        ForkResult::Child => {
            drop(go_write);
            init(go_read)
        }
        ForkResult::Parent { child } => {
            drop(go_read);
            let recorded = record(child, pid_file).and_then(|()| {
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

fn record(child: Pid, pid_file: &Path) -> Result<(), String> {
    let who = ProcessIdentity::of(child.as_raw())
        .ok_or_else(|| format!("the init {child} is gone before it was recorded"))?;
    let bytes = serde_json::to_vec(&who).map_err(|e| format!("cannot serialize: {e}"))?;
    // A marker that only has to outlive this process: a reboot ends the init too.
    safe_file::write_atomic(pid_file, &bytes, 0o600, Durability::Unsynced)
        .map_err(|e| format!("cannot record the init {child}: {e}"))
}

/// Steps 2 and 4: the init itself.
fn init(go: OwnedFd) -> ! {
    let _ = nix::unistd::setsid();
    let _ = nix::unistd::chdir("/");
    if let Ok(null) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    {
        for fd in 0..=2 {
            // SAFETY: dup2 on descriptor numbers touches no memory; the standard streams are
            // replaced, never closed, so no Rust handle dangles.
            unsafe { libc::dup2(null.as_raw_fd(), fd) };
        }
    }
    let mut signals = SigSet::empty();
    for signal in [Signal::SIGCHLD, Signal::SIGTERM, Signal::SIGINT] {
        signals.add(signal);
    }
    // Blocked, they wait for `wait` below; pid 1 would otherwise ignore SIGTERM and SIGINT from
    // its own namespace, having no handler.
    if signals.thread_block().is_err() {
        std::process::exit(1);
    }
    let mut byte = [0u8; 1];
    let mut go = std::fs::File::from(go);
    if !matches!(go.read(&mut byte), Ok(1)) || byte != *b"1" {
        // The parent could not record this init: it must not run.
        std::process::exit(1);
    }
    drop(go);
    // SAFETY: close_range(2) with integer arguments touches no memory; nothing in this process
    // uses a descriptor above 2 from here on (whatever the caller let through is dropped).
    unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32) };
    loop {
        match signals.wait() {
            Ok(Signal::SIGTERM | Signal::SIGINT) => std::process::exit(0),
            Ok(_) => reap(),
            Err(_) => {}
        }
    }
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

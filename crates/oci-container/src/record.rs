//! The per-container record, written before conmon starts so a caller that crashed can find and
//! clean up what it started; and processes identified by pid *and* start time.

use std::path::{Path, PathBuf};

use safe_file::{Durability, Symlinks};
use serde::{Deserialize, Serialize};

use std::os::fd::{AsFd as _, AsRawFd as _, FromRawFd as _, OwnedFd};
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::Signal;
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

use crate::error::{Error, Result};

/// The most read of a record or a pid file.
const MAX_RECORD: u64 = 64 << 10;

/// What the state directory remembers of a container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerRecord {
    /// The container id.
    pub id: String,
    /// Its bundle directory.
    pub bundle: PathBuf,
    /// The runtime that created it.
    pub runtime: PathBuf,
    /// The runtime's state directory (`--root`).
    pub runtime_root: PathBuf,
    /// Where conmon writes its log.
    pub log_path: PathBuf,
    /// The conmon monitoring it; `None` until conmon has daemonized (or when it never did).
    pub conmon: Option<ProcessIdentity>,
}

/// A process as the kernel knows it at one moment: a pid alone may have been reused since.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessIdentity {
    /// The process id.
    pub pid: i32,
    /// Its start time, in clock ticks since boot (`/proc/<pid>/stat`, field 22).
    pub start_time: u64,
}

impl ProcessIdentity {
    /// The identity of the running process `pid`, or `None` when there is none.
    pub fn of(pid: i32) -> Option<ProcessIdentity> {
        Some(ProcessIdentity {
            pid,
            start_time: start_time(pid)?,
        })
    }

    /// Whether this very process still runs (not a later one with the same pid). A zombie (it
    /// has exited, its parent has not reaped it yet) does not: where init reaps orphans late, a
    /// conmon that is done would otherwise be waited for until its parent gets to it.
    pub fn is_alive(&self) -> bool {
        ProcStat::of(self.pid)
            .is_some_and(|s| s.start_time == self.start_time && !matches!(s.state, 'Z' | 'X'))
    }

    /// Waits up to `timeout` for this process to exit, woken by its pidfd the moment it does
    /// (not by polling); whether it has exited (true also when it was gone already).
    pub(crate) async fn wait_exit(self, timeout: Duration) -> bool {
        let Some(pidfd) = pidfd_open(self.pid) else {
            return !self.is_alive();
        };
        // Checked after the pidfd pinned the pid: the descriptor is this process's.
        if !self.is_alive() {
            return true;
        }
        let Some(pidfd) = readable_pidfd(pidfd) else {
            return !self.is_alive();
        };
        // A pidfd turns readable when its process exits.
        tokio::time::timeout(timeout, pidfd.readable())
            .await
            .is_ok()
            || !self.is_alive()
    }
}

/// Field 22 of `/proc/<pid>/stat`: after the command name, which may hold spaces and `)`.
fn start_time(pid: i32) -> Option<u64> {
    ProcStat::of(pid).map(|s| s.start_time)
}

/// The fields of `/proc/<pid>/stat` this crate uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProcStat {
    /// The state letter: `R`, `S`, `D`, `Z` (zombie), `T` (stopped)...
    pub(crate) state: char,
    /// The parent's pid.
    pub(crate) ppid: i32,
    /// The process group.
    pub(crate) pgrp: i32,
    /// The start time, in clock ticks since boot.
    pub(crate) start_time: u64,
}

/// A pidfd for `pid`: the process it names now, pinned (a reused pid cannot take its place).
pub(crate) fn pidfd_open(pid: i32) -> Option<OwnedFd> {
    if pid <= 0 {
        return None;
    }
    // SAFETY: pidfd_open takes a pid and flags and touches no memory of ours.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    // SAFETY: a descriptor pidfd_open just returned, which nothing else owns.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Sends `signal` (none: only checks the process exists) through the pidfd.
pub(crate) fn pidfd_send(
    pidfd: &OwnedFd,
    signal: Option<Signal>,
) -> std::result::Result<(), Errno> {
    // SAFETY: pidfd_send_signal with a null siginfo (as kill(2) would fill it) and no flags.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_fd().as_raw_fd(),
            signal.map_or(0, |s| s as i32),
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    if rc == 0 { Ok(()) } else { Err(Errno::last()) }
}

/// Blocks up to `timeout` until the process behind `pidfd` exits (the descriptor turns
/// readable); whether it did. For callers off the async runtime; [`ProcessIdentity::wait_exit`]
/// is the async one.
pub(crate) fn wait_pidfd(pidfd: &OwnedFd, timeout: Duration) -> bool {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let Ok(left) = nix::poll::PollTimeout::try_from(left) else {
            return false;
        };
        let mut fds = [nix::poll::PollFd::new(
            pidfd.as_fd(),
            nix::poll::PollFlags::POLLIN,
        )];
        match nix::poll::poll(&mut fds, left) {
            Ok(0) => return false,
            Ok(_) => return true,
            Err(Errno::EINTR) => {}
            Err(_) => return false,
        }
    }
}

/// `pidfd` registered with the runtime's reactor, to wait for its process's exit.
fn readable_pidfd(pidfd: OwnedFd) -> Option<AsyncFd<OwnedFd>> {
    // SAFETY: the AsyncFd owns the OwnedFd, which stays open and the same descriptor until the
    // AsyncFd is dropped.
    unsafe { AsyncFd::register_with_interest(pidfd, Interest::READABLE) }.ok()
}

/// What a process does with one signal now, as `/proc/<pid>/status` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignalDisposition {
    /// It is the init (pid 1) of its PID namespace: the kernel drops a signal other than
    /// SIGKILL and SIGSTOP sent to it unless it has a handler for it.
    pub namespace_init: bool,
    /// It has a handler for the signal.
    pub caught: bool,
    /// It ignores the signal.
    pub ignored: bool,
}

impl SignalDisposition {
    /// What `pid` does with `signal` (a number from 1 to 64), or `None` when there is no such
    /// process or `/proc` does not say.
    pub fn of(pid: i32, signal: i32) -> Option<SignalDisposition> {
        if pid <= 0 || !(1..=64).contains(&signal) {
            return None;
        }
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        SignalDisposition::parse(&status, signal)
    }

    fn parse(status: &str, signal: i32) -> Option<SignalDisposition> {
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .map(str::trim)
        };
        let mask = |name: &str| u64::from_str_radix(field(name)?, 16).ok();
        let bit = 1u64 << (signal - 1);
        Some(SignalDisposition {
            namespace_init: innermost_pid(status)? == 1,
            caught: mask("SigCgt:")? & bit != 0,
            ignored: mask("SigIgn:")? & bit != 0,
        })
    }

    /// Whether a signal sent now from outside the process's namespace is dropped unseen: it is
    /// a namespace's init without a handler for it (and does not ignore it on purpose).
    pub fn dropped(&self) -> bool {
        self.namespace_init && !self.caught && !self.ignored
    }
}

/// The last `NSpid:` field of `/proc/<pid>/status`: the pid in the process's own namespace
/// (the fields go from the outermost namespace in).
pub(crate) fn innermost_pid(status: &str) -> Option<i32> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("NSpid:"))?
        .split_whitespace()
        .last()?
        .parse()
        .ok()
}

impl ProcStat {
    /// The process `pid` as `/proc` shows it now, or `None` when there is none.
    pub(crate) fn of(pid: i32) -> Option<ProcStat> {
        if pid <= 0 {
            return None;
        }
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        ProcStat::parse(&stat)
    }

    fn parse(stat: &str) -> Option<ProcStat> {
        // the command name may hold spaces and ')': the fields start after its last ')'
        let after_comm = &stat[stat.rfind(')')? + 1..];
        // fields from 3 (state) on: 4 (ppid) is the 2nd, 5 (pgrp) the 3rd, 22 the 20th
        let fields: Vec<&str> = after_comm.split_whitespace().take(20).collect();
        if fields.len() < 20 {
            return None;
        }
        Some(ProcStat {
            state: fields[0].chars().next()?,
            ppid: fields[1].parse().ok()?,
            pgrp: fields[2].parse().ok()?,
            start_time: fields[19].parse().ok()?,
        })
    }

    /// The processes whose parent is `ppid` now, with their identities.
    pub(crate) fn children_of(ppid: i32) -> Vec<(ProcessIdentity, ProcStat)> {
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        entries
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
            .filter_map(|pid| {
                let stat = ProcStat::of(pid)?;
                let who = ProcessIdentity {
                    pid,
                    start_time: stat.start_time,
                };
                (stat.ppid == ppid).then_some((who, stat))
            })
            .collect()
    }
}

#[cfg(test)]
fn parse_start_time(stat: &str) -> Option<u64> {
    ProcStat::parse(stat).map(|s| s.start_time)
}

/// `<state_dir>/<id>/record.json`.
pub(crate) fn path(dir: &Path) -> PathBuf {
    dir.join("record.json")
}

pub(crate) fn write(dir: &Path, record: &ContainerRecord) -> Result<()> {
    let bytes = serde_json::to_vec_pretty(record).map_err(|e| Error::Corrupt {
        container: record.id.clone(),
        path: path(dir),
        reason: format!("cannot serialize: {e}"),
    })?;
    // Atomic, not synced: the record serves a daemon killed at any line (the page cache
    // outlives it), not a machine that lost power (no container outlives that, and a torn
    // record is reported among `Records::errors` for the caller to clean up).
    safe_file::write_atomic(&path(dir), &bytes, 0o600, Durability::Unsynced)
        .map_err(|e| Error::file(&record.id, e))
}

pub(crate) fn read(id: &str, dir: &Path) -> Result<ContainerRecord> {
    let p = path(dir);
    let bytes = safe_file::read_regular(&p, MAX_RECORD, Symlinks::Refuse)
        .map_err(|e| Error::file(id, e))?;
    let record: ContainerRecord = serde_json::from_slice(&bytes).map_err(|e| Error::Corrupt {
        container: id.to_owned(),
        path: p.clone(),
        reason: e.to_string(),
    })?;
    if record.id != id {
        return Err(Error::Corrupt {
            container: id.to_owned(),
            path: p,
            reason: format!("record is for container {:?}", record.id),
        });
    }
    Ok(record)
}

/// A small file holding a number (a pid file, an exit file); `None` when it does not exist.
pub(crate) fn read_number(id: &str, path: &Path) -> Result<Option<i32>> {
    match safe_file::read_regular(path, 64, Symlinks::Refuse) {
        Ok(bytes) => String::from_utf8_lossy(&bytes)
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| Error::Corrupt {
                container: id.to_owned(),
                path: path.to_owned(),
                reason: format!("not a number: {:?}", String::from_utf8_lossy(&bytes)),
            }),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(Error::file(id, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_namespace_init_without_a_handler_drops_the_signal() {
        let status = |nspid: &str, caught: &str, ignored: &str| {
            format!("Name:\ttop\nNSpid:\t{nspid}\nSigIgn:\t{ignored}\nSigCgt:\t{caught}\n")
        };
        let term = 15;
        // SIGTERM is bit 14: 0x4000.
        let cases = [
            (
                status("4242\t1", "0000000000000000", "0000000000000000"),
                true,
            ),
            (
                status("4242\t1", "0000000000004000", "0000000000000000"),
                false,
            ),
            (
                status("4242\t1", "0000000000000000", "0000000000004000"),
                false,
            ),
            // Not an init: the default action (death) applies.
            (
                status("4242\t7", "0000000000000000", "0000000000000000"),
                false,
            ),
            (
                status("4242", "0000000000000000", "0000000000000000"),
                false,
            ),
        ];
        for (text, dropped) in cases {
            let d = SignalDisposition::parse(&text, term).unwrap();
            assert_eq!(d.dropped(), dropped, "{text}");
        }
        assert_eq!(SignalDisposition::parse("Name:\tx\n", term), None);
        // This test process: not an init, SIGTERM not caught.
        let me = SignalDisposition::of(i32::try_from(std::process::id()).unwrap(), term).unwrap();
        assert!(!me.dropped());
        assert_eq!(SignalDisposition::of(1, 0), None);
    }

    #[tokio::test]
    async fn waiting_for_an_exit_wakes_when_it_happens_and_gives_up_at_the_timeout() {
        let spawn = |secs: &str| {
            std::process::Command::new("sleep")
                .arg(secs)
                .spawn()
                .unwrap()
        };
        let (mut quick, mut slow) = (spawn("0.1"), spawn("30"));
        let id = |c: &std::process::Child| ProcessIdentity::of(i32::try_from(c.id()).unwrap());
        let (quick_id, slow_id) = (id(&quick).unwrap(), id(&slow).unwrap());
        let started = std::time::Instant::now();
        assert!(quick_id.wait_exit(Duration::from_secs(20)).await);
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "woken at the exit, not the timeout: {:?}",
            started.elapsed()
        );
        assert!(!slow_id.wait_exit(Duration::from_millis(50)).await);
        // The blocking twin, on the slow one's pidfd: gives up at the timeout, then wakes at
        // the kill.
        let pidfd = pidfd_open(slow_id.pid).unwrap();
        assert!(!wait_pidfd(&pidfd, Duration::from_millis(50)));
        assert!(slow_id.is_alive());
        let _ = slow.kill();
        let started = std::time::Instant::now();
        assert!(wait_pidfd(&pidfd, Duration::from_secs(20)));
        assert!(started.elapsed() < Duration::from_secs(5));
        let _ = slow.kill();
        let _ = slow.wait();
        let _ = quick.wait();
        // Gone (reaped): at once.
        assert!(quick_id.wait_exit(Duration::from_secs(20)).await);
    }

    #[test]
    fn a_zombie_is_not_alive() {
        let mut child = std::process::Command::new("sleep")
            .arg("0.05")
            .spawn()
            .unwrap();
        let who = ProcessIdentity::of(i32::try_from(child.id()).unwrap()).unwrap();
        assert!(who.is_alive());
        // Exited, not reaped: a zombie until `wait`.
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert_eq!(ProcStat::of(who.pid).map(|s| s.state), Some('Z'));
        assert!(!who.is_alive());
        child.wait().unwrap();
        assert!(!who.is_alive());
    }

    #[test]
    fn start_time_survives_odd_command_names() {
        let tail = "S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 424242 20 21";
        for comm in ["(sleep)", "(a b)", "(x) (y))", "())"] {
            assert_eq!(
                parse_start_time(&format!("77 {comm} {tail}")),
                Some(424_242),
                "{comm}"
            );
        }
        assert_eq!(parse_start_time("77 (short) S 1 2"), None);
        assert_eq!(parse_start_time(""), None);
        assert_eq!(
            ProcStat::parse(&format!("77 (a) b) T 5 6 {}", &tail[6..])),
            Some(ProcStat {
                state: 'T',
                ppid: 5,
                pgrp: 6,
                start_time: 424_242
            })
        );
    }

    #[test]
    fn children_of_this_process_are_found() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let me = std::process::id() as i32;
        let kids = ProcStat::children_of(me);
        let found = kids.iter().find(|(who, _)| who.pid == child.id() as i32);
        let (who, stat) = found.expect("the child is listed");
        assert!(who.is_alive());
        assert_eq!(stat.ppid, me);
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn identity_of_this_process_and_of_none() {
        let me = ProcessIdentity::of(std::process::id() as i32).unwrap();
        assert!(me.is_alive());
        let reused = ProcessIdentity {
            start_time: me.start_time + 1,
            ..me
        };
        assert!(
            !reused.is_alive(),
            "same pid, other start time: another process"
        );
        assert_eq!(ProcessIdentity::of(0), None);
        assert_eq!(ProcessIdentity::of(-1), None);
    }

    #[test]
    fn records_round_trip_and_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let record = ContainerRecord {
            id: "c1".into(),
            bundle: "/b".into(),
            runtime: "/usr/bin/crun".into(),
            runtime_root: "/run/crun".into(),
            log_path: "/l".into(),
            conmon: Some(ProcessIdentity {
                pid: 5,
                start_time: 6,
            }),
        };
        write(dir.path(), &record).unwrap();
        assert_eq!(read("c1", dir.path()).unwrap(), record);
        let err = read("c2", dir.path()).unwrap_err().to_string();
        assert!(err.ends_with("record is for container \"c1\""), "{err}");
        std::fs::write(path(dir.path()), b"{").unwrap();
        assert!(matches!(read("c1", dir.path()), Err(Error::Corrupt { .. })));

        let n = dir.path().join("n");
        assert_eq!(read_number("c1", &n).unwrap(), None);
        std::fs::write(&n, b"137\n").unwrap();
        assert_eq!(read_number("c1", &n).unwrap(), Some(137));
        std::fs::write(&n, b"x").unwrap();
        assert!(read_number("c1", &n).is_err());
    }
}

//! Processes as `/proc` shows them: `/proc/<pid>/stat` parsed, a process named by pid *and*
//! start time so a reused pid is never taken for it, and the `NSpid` of `/proc/<pid>/status`.

use std::path::Path;

use crate::read::{read_capped, read_text};

/// The most read of a `stat` file: its comm is at most 16 bytes and its 52 numbers fit easily.
const MAX_STAT: u64 = 4096;
/// The most read of a `status` file.
const MAX_STATUS: u64 = 64 << 10;

/// The fields of `/proc/<pid>/stat` (proc_pid_stat(5)) the workspace uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStat {
    /// (3) The state letter: `R`, `S`, `D`, `Z` (zombie), `T` (stopped), `t` (traced), `X`...
    pub state: char,
    /// (4) The parent's pid.
    pub ppid: i32,
    /// (5) The process group.
    pub pgrp: i32,
    /// (6) The session.
    pub session: i32,
    /// (22) The start time, in clock ticks since boot.
    pub start_time: u64,
}

impl ProcStat {
    /// The process `pid` as `/proc` shows it now, or `None` when there is none.
    pub fn of(pid: i32) -> Option<ProcStat> {
        if pid <= 0 {
            return None;
        }
        ProcStat::read(Path::new(&format!("/proc/{pid}/stat")))
    }

    /// The `stat` file at `path` (a thread's: `/proc/<pid>/task/<tid>/stat`), or `None` when it
    /// cannot be read or parsed.
    pub fn read(path: &Path) -> Option<ProcStat> {
        ProcStat::parse(&read_text(path, MAX_STAT).ok()?)
    }

    /// Parses a `stat` line. The command name (field 2) may hold spaces and `)`: the fields
    /// after it start after its *last* `)`.
    pub fn parse(stat: &str) -> Option<ProcStat> {
        let after_comm = &stat[stat.rfind(')')? + 1..];
        // From field 3 (state) on: 4 (ppid) is the 2nd, 22 (starttime) the 20th.
        let fields: Vec<&str> = after_comm.split_whitespace().take(20).collect();
        if fields.len() < 20 {
            return None;
        }
        Some(ProcStat {
            state: fields[0].chars().next()?,
            ppid: fields[1].parse().ok()?,
            pgrp: fields[2].parse().ok()?,
            session: fields[3].parse().ok()?,
            start_time: fields[19].parse().ok()?,
        })
    }

    /// Whether it has ended: a zombie (exited, not reaped yet) or dead.
    pub fn has_exited(&self) -> bool {
        matches!(self.state, 'Z' | 'X')
    }

    /// Whether it is stopped: by a signal (`T`) or a tracer (`t`).
    pub fn is_stopped(&self) -> bool {
        matches!(self.state, 'T' | 't')
    }

    /// The processes whose parent is `ppid` now, with their identities.
    pub fn children_of(ppid: i32) -> Vec<(ProcessIdentity, ProcStat)> {
        ProcStat::every(|stat| stat.ppid == ppid)
    }

    /// The processes in process group `pgrp` now, with their identities.
    pub fn in_group(pgrp: i32) -> Vec<(ProcessIdentity, ProcStat)> {
        ProcStat::every(|stat| stat.pgrp == pgrp)
    }

    fn every(wanted: impl Fn(&ProcStat) -> bool) -> Vec<(ProcessIdentity, ProcStat)> {
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
                wanted(&stat).then_some((who, stat))
            })
            .collect()
    }
}

/// A process as the kernel knows it at one moment: a pid alone may have been reused since.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
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
            start_time: ProcStat::of(pid)?.start_time,
        })
    }

    /// Whether this very process still runs (not a later one with the same pid). A zombie (it
    /// has exited, its parent has not reaped it yet) does not: where init reaps orphans late, a
    /// process that is done would otherwise be waited for until its parent gets to it.
    pub fn is_alive(&self) -> bool {
        ProcStat::of(self.pid).is_some_and(|s| s.start_time == self.start_time && !s.has_exited())
    }

    /// Waits up to `timeout` for this process to exit, woken by its pidfd the moment it does
    /// (not by polling); whether it has exited (true also when it was gone already).
    #[cfg(feature = "tokio")]
    pub async fn wait_exit(self, timeout: std::time::Duration) -> bool {
        let Ok(pidfd) = crate::pidfd::Pidfd::open(self.pid) else {
            return !self.is_alive();
        };
        // Checked after the pidfd pinned the pid: the descriptor is this process's.
        if !self.is_alive() {
            return true;
        }
        pidfd.exited_within(timeout).await || !self.is_alive()
    }
}

/// The last `NSpid:` field of a `/proc/<pid>/status`: the pid in the process's own PID
/// namespace (the fields go from the outermost namespace in).
pub fn innermost_pid(status: &str) -> Option<i32> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("NSpid:"))?
        .split_whitespace()
        .last()?
        .parse()
        .ok()
}

/// `/proc/<pid>/status`, or `None` when there is no such process.
pub fn status(pid: i32) -> Option<String> {
    if pid <= 0 {
        return None;
    }
    read_text(Path::new(&format!("/proc/{pid}/status")), MAX_STATUS).ok()
}

/// `/proc/<pid>/cmdline`, at most `limit` bytes (the arguments NUL-terminated), or `None` when
/// there is no such process or it is longer.
pub fn cmdline(pid: i32, limit: u64) -> Option<Vec<u8>> {
    if pid <= 0 {
        return None;
    }
    read_capped(Path::new(&format!("/proc/{pid}/cmdline")), limit).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start_time(stat: &str) -> Option<u64> {
        ProcStat::parse(stat).map(|s| s.start_time)
    }

    #[test]
    fn start_time_survives_odd_command_names() {
        let tail = "S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 424242 20 21";
        for comm in ["(sleep)", "(a b)", "(x) (y))", "())"] {
            assert_eq!(
                start_time(&format!("77 {comm} {tail}")),
                Some(424_242),
                "{comm}"
            );
        }
        assert_eq!(start_time("77 (short) S 1 2"), None);
        assert_eq!(start_time(""), None);
        assert_eq!(
            ProcStat::parse(&format!("77 (a) b) T 5 6 {}", &tail[6..])),
            Some(ProcStat {
                state: 'T',
                ppid: 5,
                pgrp: 6,
                session: 3,
                start_time: 424_242
            })
        );
    }

    #[test]
    fn the_innermost_pid_is_the_last_nspid_field() {
        for (status, want) in [
            ("Name:\tx\nNSpid:\t4242\t1\nNSpgid:\t1\n", Some(1)),
            ("NSpid:\t4242\n", Some(4242)),
            ("NSpid:\t4242\t17\t1\n", Some(1)),
            ("NSpid:\n", None),
            ("Name:\tx\n", None),
            ("NSpid:\tabc\n", None),
        ] {
            assert_eq!(innermost_pid(status), want, "{status:?}");
        }
        let me = i32::try_from(std::process::id()).unwrap();
        assert!(innermost_pid(&status(me).unwrap()).is_some());
        assert!(status(0).is_none());
        assert!(cmdline(me, 1 << 20).is_some_and(|c| !c.is_empty()));
    }

    #[test]
    fn identity_of_this_process_and_of_none() {
        let me = ProcessIdentity::of(i32::try_from(std::process::id()).unwrap()).unwrap();
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
    fn a_zombie_is_not_alive_and_children_are_found() {
        let mut child = std::process::Command::new("sleep")
            .arg("0.05")
            .spawn()
            .unwrap();
        let pid = i32::try_from(child.id()).unwrap();
        let who = ProcessIdentity::of(pid).unwrap();
        assert!(who.is_alive());
        let me = i32::try_from(std::process::id()).unwrap();
        let kids = ProcStat::children_of(me);
        let (found, stat) = kids
            .iter()
            .find(|(w, _)| w.pid == pid)
            .expect("the child is listed");
        assert_eq!((found, stat.ppid), (&who, me));
        // Exited, not reaped: a zombie until `wait`.
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert_eq!(ProcStat::of(pid).map(|s| s.state), Some('Z'));
        assert!(ProcStat::of(pid).unwrap().has_exited());
        assert!(!who.is_alive());
        child.wait().unwrap();
        assert!(!who.is_alive());
        assert_eq!(ProcStat::of(pid), None);
    }

    #[cfg(feature = "tokio")]
    #[tokio::test]
    async fn waiting_for_an_exit_wakes_when_it_happens_and_gives_up_at_the_timeout() {
        use std::time::{Duration, Instant};
        let spawn = |secs: &str| {
            std::process::Command::new("sleep")
                .arg(secs)
                .spawn()
                .unwrap()
        };
        let (mut quick, mut slow) = (spawn("0.1"), spawn("30"));
        let id = |c: &std::process::Child| ProcessIdentity::of(i32::try_from(c.id()).unwrap());
        let (quick_id, slow_id) = (id(&quick).unwrap(), id(&slow).unwrap());
        let started = Instant::now();
        assert!(quick_id.wait_exit(Duration::from_secs(20)).await);
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "woken at the exit, not the timeout: {:?}",
            started.elapsed()
        );
        assert!(!slow_id.wait_exit(Duration::from_millis(50)).await);
        let _ = slow.kill();
        let _ = slow.wait();
        let _ = quick.wait();
        // Gone (reaped): at once.
        assert!(quick_id.wait_exit(Duration::from_secs(20)).await);
        assert!(slow_id.wait_exit(Duration::from_secs(20)).await);
    }

    #[cfg(feature = "serde")]
    #[test]
    fn an_identity_is_the_json_records_hold() {
        let who = ProcessIdentity {
            pid: 5,
            start_time: 6,
        };
        let json = serde_json::to_string(&who).unwrap();
        assert_eq!(json, r#"{"pid":5,"start_time":6}"#);
        assert_eq!(serde_json::from_str::<ProcessIdentity>(&json).unwrap(), who);
    }
}

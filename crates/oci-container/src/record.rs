//! The per-container record, written before conmon starts so a caller that crashed can find and
//! clean up what it started; and processes identified by pid *and* start time.

use std::path::{Path, PathBuf};

use safe_file::{Durability, Symlinks};
use serde::{Deserialize, Serialize};

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

    /// Whether this very process still runs (not a later one with the same pid).
    pub fn is_alive(&self) -> bool {
        start_time(self.pid) == Some(self.start_time)
    }
}

/// Field 22 of `/proc/<pid>/stat`: after the command name, which may hold spaces and `)`.
fn start_time(pid: i32) -> Option<u64> {
    if pid <= 0 {
        return None;
    }
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_start_time(&stat)
}

fn parse_start_time(stat: &str) -> Option<u64> {
    let after_comm = &stat[stat.rfind(')')? + 1..];
    // fields from 3 (state) on; 22 is the 20th of them
    after_comm.split_whitespace().nth(19)?.parse().ok()
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
    safe_file::write_atomic(&path(dir), &bytes, 0o600, Durability::Synced)
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

//! The per-container record, written before conmon starts so a caller that crashed can find and
//! clean up what it started (conmon named by pid *and* start time, node-primitives'
//! [`ProcessIdentity`]); and what a process does with a signal.

use std::path::{Path, PathBuf};

use safe_file::{Durability, Symlinks};
use serde::{Deserialize, Serialize};

pub use node_primitives::ProcessIdentity;

use crate::config::ContainerStdio;
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
    /// Its terminal and stdin, as conmon was told (records written before there was one say
    /// none).
    #[serde(default)]
    pub stdio: ContainerStdio,
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
        SignalDisposition::parse(&node_primitives::proc::status(pid)?, signal)
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
            namespace_init: node_primitives::proc::innermost_pid(status)? == 1,
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
            stdio: ContainerStdio {
                terminal: true,
                stdin: true,
                stdin_once: false,
            },
        };
        write(dir.path(), &record).unwrap();
        assert_eq!(read("c1", dir.path()).unwrap(), record);
        // a record from before stdio was kept
        let old = br#"{"id":"c1","bundle":"/b","runtime":"/r","runtime_root":"/rr","log_path":"/l","conmon":null}"#;
        std::fs::write(path(dir.path()), old).unwrap();
        assert_eq!(
            read("c1", dir.path()).unwrap().stdio,
            ContainerStdio::default()
        );
        write(dir.path(), &record).unwrap();
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

//! What conmon keeps for a container besides its log: the control FIFO it takes commands on, and
//! the files it leaves when the container exits or the kernel OOM-kills it.
//!
//! These are conmon 2.1's (src/ctrl.c, src/cgroup.c, src/conmon.c), and CRI-O's use of them
//! (internal/oci/runtime_oci.go):
//!
//! - `<bundle>/ctl` is a FIFO conmon reads lines of `<type> <height> <width>\n` from; type 2
//!   (`REOPEN_LOGS_EVENT`) reopens the log, and CRI-O's ReopenContainerLog writes `2 0 0\n`.
//!   conmon reopens by creating `<log>.tmp` and renaming it over the log path, so the log path
//!   always names a new file afterwards.
//! - `<persist dir>/oom` (and `oom` in conmon's working directory, the bundle, which CRI-O
//!   reads) is created, empty, when the container's memory cgroup reports an OOM kill
//!   (v1: an eventfd on `memory.oom_control`; v2: `oom_kill` in `memory.events`).
//! - `<exit dir>/<id>` holds the exit code; its modification time is when conmon saw the exit.
//!
//! When conmon left no `oom` file on cgroup v2, an exit by SIGKILL is checked against the
//! parent cgroup's OOM count too (see `cgroup/oom.rs`: systemd may remove the container's
//! cgroup before conmon reads it).

use std::fs::OpenOptions;
use std::io::Write as _;
use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _, OpenOptionsExt as _};
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use crate::error::{Error, Result, validate_id};
use crate::record;
use crate::runtime::Runtime;

/// conmon's control message that reopens the log.
const REOPEN_LOGS: &[u8] = b"2 0 0\n";
/// How often [`Runtime::reopen_log`] looks for the new log file.
const POLL: Duration = Duration::from_millis(10);

/// How a container ended, from conmon's files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exit {
    /// The exit code (128 + the signal for a killed process: 137 for an OOM kill).
    pub code: i32,
    /// When conmon recorded the exit (the exit file's modification time).
    pub exited_at: SystemTime,
    /// The kernel's OOM killer killed a process of the container's (conmon left its `oom`
    /// file): the kill that ended it, as a rule, when the code is 137.
    pub oom_killed: bool,
}

impl Runtime {
    /// Asks the container's conmon to reopen its log file, as CRI-O's ReopenContainerLog does
    /// (the kubelet's log rotation renames the log, then asks), and waits until conmon has
    /// made the new file at the log path.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidId`]; [`Error::File`] or [`Error::Corrupt`] when the container's record
    /// cannot be read; [`Error::NotRunning`] when its conmon has exited (nothing reads the
    /// control FIFO); [`Error::Io`] naming the FIFO when it cannot be opened or written;
    /// [`Error::Corrupt`] when it is not a FIFO; [`Error::Timeout`] when conmon did not make the
    /// new file within the command timeout.
    pub async fn reopen_log(&self, id: &str) -> Result<()> {
        validate_id(id)?;
        let rec = self.record(id)?;
        let before = file_id(&rec.log_path);
        write_control(id, &rec.bundle.join("ctl"), REOPEN_LOGS)?;
        let timeout = self.command_timeout();
        let deadline = Instant::now() + timeout;
        loop {
            let now = file_id(&rec.log_path);
            if now.is_some() && now != before {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(Error::Timeout {
                    container: id.to_owned(),
                    runtime: self.conmon_path().to_owned(),
                    command: "reopen log",
                    timeout,
                });
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// How the container ended: its exit code, when, and whether it was OOM-killed.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidId`]; [`Error::NotExited`] before it exits; [`Error::File`] or
    /// [`Error::Corrupt`] when the exit file cannot be read.
    pub fn exit_details(&self, id: &str) -> Result<Exit> {
        validate_id(id)?;
        let path = self.exit_file(id);
        let not_exited = || Error::NotExited {
            container: id.to_owned(),
        };
        let code = record::read_number(id, &path)?.ok_or_else(not_exited)?;
        let exited_at = match std::fs::symlink_metadata(&path).and_then(|m| m.modified()) {
            Ok(at) => at,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(not_exited()),
            Err(e) => return Err(Error::io(id, "inspect", path, e)),
        };
        // Only the persist directory's: it is made anew for each container, while a bundle
        // may keep the `oom` of an earlier run.
        let oom = self.container_dir(id).join("oom");
        let oom_killed = match std::fs::symlink_metadata(&oom) {
            Ok(_) => true,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                crate::cgroup::oom::killed_under_parent(id, &self.container_dir(id), code)
            }
            Err(e) => return Err(Error::io(id, "inspect", oom, e)),
        };
        Ok(Exit {
            code,
            exited_at,
            oom_killed,
        })
    }
}

/// The file at `path` (device and inode), if there is one.
fn file_id(path: &Path) -> Option<(u64, u64)> {
    std::fs::symlink_metadata(path)
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

/// Writes one message to a control FIFO without ever blocking: opening a FIFO that nothing
/// reads would wait for a reader, so it is opened non-blocking, which fails at once instead.
pub(crate) fn write_control(id: &str, fifo: &Path, message: &[u8]) -> Result<()> {
    let mut file = match OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_NOCTTY)
        .open(fifo)
    {
        Ok(file) => file,
        Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
            return Err(Error::NotRunning {
                container: id.to_owned(),
                state: "its conmon has exited".to_owned(),
            });
        }
        Err(e) => return Err(Error::io(id, "open the control fifo", fifo, e)),
    };
    let meta = file
        .metadata()
        .map_err(|e| Error::io(id, "inspect", fifo, e))?;
    if !meta.file_type().is_fifo() {
        return Err(Error::Corrupt {
            container: id.to_owned(),
            path: fifo.to_owned(),
            reason: "not a fifo".to_owned(),
        });
    }
    // Shorter than PIPE_BUF: written whole or not at all (EAGAIN when the FIFO is full).
    file.write_all(message)
        .map_err(|e| Error::io(id, "write to the control fifo", fifo, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_control_fifo_nobody_reads_fails_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("ctl");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let started = Instant::now();
        let err = write_control("c1", &fifo, REOPEN_LOGS).unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(1));
        assert_eq!(
            err.to_string(),
            "container c1: not running (its conmon has exited)"
        );

        // with a reader (conmon), the message arrives whole
        let reader = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifo)
            .unwrap();
        write_control("c1", &fifo, REOPEN_LOGS).unwrap();
        let mut got = [0u8; 16];
        let n = std::io::Read::read(&mut &reader, &mut got).unwrap();
        assert_eq!(&got[..n], b"2 0 0\n");
    }

    #[test]
    fn a_control_path_that_is_not_a_fifo_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("ctl");
        std::fs::write(&file, b"").unwrap();
        let err = write_control("c1", &file, REOPEN_LOGS)
            .unwrap_err()
            .to_string();
        assert!(err.ends_with("ctl: not a fifo"), "{err}");
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        let err = write_control("c1", &link, REOPEN_LOGS)
            .unwrap_err()
            .to_string();
        assert!(err.contains("cannot open the control fifo"), "{err}");
        let err = write_control("c1", &dir.path().join("none"), REOPEN_LOGS)
            .unwrap_err()
            .to_string();
        assert!(err.contains("cannot open the control fifo"), "{err}");
    }

    #[tokio::test]
    async fn exit_details_before_and_after_an_exit() {
        let dir = tempfile::tempdir().unwrap();
        let rt = Runtime::new("/r", "/c", dir.path());
        let err = rt.exit_details("c1").unwrap_err();
        assert!(matches!(err, Error::NotExited { .. }), "{err}");

        std::fs::create_dir_all(dir.path().join("exits")).unwrap();
        std::fs::create_dir_all(dir.path().join("containers/c1")).unwrap();
        let before = SystemTime::now() - Duration::from_secs(1);
        std::fs::write(rt.exit_file("c1"), b"137").unwrap();
        let exit = rt.exit_details("c1").unwrap();
        assert_eq!((exit.code, exit.oom_killed), (137, false));
        assert!(exit.exited_at >= before && exit.exited_at <= SystemTime::now());

        std::fs::write(dir.path().join("containers/c1/oom"), b"").unwrap();
        assert!(rt.exit_details("c1").unwrap().oom_killed);
    }
}

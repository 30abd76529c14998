//! A child process kept within bounds: in a process group of its own, its stdin fed while its
//! stdout and stderr are read (so no pipe fills up and deadlocks), each stream capped, the whole
//! run time-bounded, and at the timeout (or when the run is dropped, or fails) the whole group
//! killed and the child reaped.
//!
//! The caller builds and spawns the [`Command`] (its program, arguments, environment, a
//! `pre_exec` of its own, retries), after [`prepare`] set what the bounds need; [`run`] takes
//! the [`Child`] from there.
//!
//! ```no_run
//! # async fn f() -> node_primitives::Result<()> {
//! use std::time::Duration;
//! use node_primitives::child::{self, Bounds, Cap};
//!
//! let mut cmd = tokio::process::Command::new("/bin/cat");
//! child::prepare(&mut cmd, true);
//! let child = cmd.spawn().expect("spawn");
//! let bounds = Bounds {
//!     stdout: Cap::fail_past(1 << 20),
//!     stderr: Cap::keep_first(16 << 10),
//!     timeout: Duration::from_secs(10),
//! };
//! let done = child::run(child, b"hello", &bounds).await?;
//! assert_eq!(done.stdout.bytes, b"hello");
//! # Ok(())
//! # }
//! ```

use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use rustix::process::{Pid, Signal, kill_process_group};
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWriteExt as _};
use tokio::process::{Child, Command};

use crate::error::{ChildOp, Error, Result, Stream};

/// How long a child killed at its timeout is waited for before it is left to tokio's reaper.
const REAP_WAIT: Duration = Duration::from_secs(2);

/// What happens past a stream's cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overflow {
    /// The run fails at once with [`Error::OutputTooLarge`] (the group killed): for output that
    /// must be whole to mean anything, a plugin's result say.
    Fail,
    /// The first `limit` bytes are kept, the rest read and dropped so the child never blocks,
    /// and [`Captured::truncated`] says so; a read error ends the stream as its end would.
    Truncate,
}

/// A stream's cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cap {
    /// The most bytes kept.
    pub limit: usize,
    /// What happens past it.
    pub overflow: Overflow,
}

impl Cap {
    /// At most `limit` bytes, more failing the run.
    pub fn fail_past(limit: usize) -> Cap {
        Cap {
            limit,
            overflow: Overflow::Fail,
        }
    }

    /// The first `limit` bytes kept, the rest dropped.
    pub fn keep_first(limit: usize) -> Cap {
        Cap {
            limit,
            overflow: Overflow::Truncate,
        }
    }
}

/// The bounds of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// Standard output's cap.
    pub stdout: Cap,
    /// Standard error's cap.
    pub stderr: Cap,
    /// The most the run may take, from [`run`] until the child has exited and closed both
    /// streams (a grandchild holding them open keeps it running). `Duration::MAX`: no bound.
    pub timeout: Duration,
}

/// What was kept of a stream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Captured {
    /// The bytes kept.
    pub bytes: Vec<u8>,
    /// Whether more came than the cap kept.
    pub truncated: bool,
}

/// A child that exited within its bounds.
#[derive(Debug)]
pub struct Finished {
    /// How it exited.
    pub status: ExitStatus,
    /// Its standard output.
    pub stdout: Captured,
    /// Its standard error.
    pub stderr: Captured,
    /// The process group it led.
    pgid: Option<u32>,
}

impl Finished {
    /// SIGKILL to what is left of the child's process group (what it started and left
    /// running). A group's id cannot be reused while any member lives, and with none left the
    /// signal finds nobody.
    pub fn kill_group(&self) {
        if let Some(pgid) = self.pgid {
            let _ = kill_group(pgid);
        }
    }
}

/// Sets on `cmd` what [`run`] needs: a process group of its own (so the timeout can kill
/// whatever it started), stdout and stderr piped, stdin piped (`stdin`) or `/dev/null`, and
/// killed if its handle is dropped.
pub fn prepare(cmd: &mut Command, stdin: bool) -> &mut Command {
    cmd.stdin(if stdin { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .process_group(0)
}

/// Runs `child` (spawned from a command [`prepare`]d) within `bounds`: writes `stdin` (a child
/// that exits or closes its stdin without reading it all is no error) while reading stdout and
/// stderr, then reaps it.
///
/// The child's process group is killed at the timeout, when a stream passes a
/// [`Overflow::Fail`] cap, at an I/O error, and when the returned future is dropped; not when
/// it exits within bounds ([`Finished::kill_group`] does it then).
///
/// # Errors
///
/// [`Error::Timeout`] (the child killed and reaped); [`Error::OutputTooLarge`] naming the
/// stream; [`Error::Child`] when writing, reading or waiting fails.
pub async fn run(mut child: Child, stdin: &[u8], bounds: &Bounds) -> Result<Finished> {
    // Declared after `child`, so dropped before it: the group is killed while its leader is
    // not yet reaped and its pid (the group's id) cannot have been reused.
    let mut group = ProcessGroup::led_by(child.id());
    let io = communicate(&mut child, stdin, bounds);
    match tokio::time::timeout(bounds.timeout, io).await {
        Ok(Ok((stdout, stderr, status))) => Ok(Finished {
            status,
            stdout,
            stderr,
            pgid: group.disarm(),
        }),
        Ok(Err(e)) => Err(e),
        Err(_elapsed) => {
            group.kill();
            let _ = tokio::time::timeout(REAP_WAIT, child.wait()).await;
            Err(Error::Timeout {
                timeout: bounds.timeout,
            })
        }
    }
}

/// Writes stdin while reading stdout and stderr, then waits for the child.
async fn communicate(
    child: &mut Child,
    stdin: &[u8],
    bounds: &Bounds,
) -> Result<(Captured, Captured, ExitStatus)> {
    let stdin_pipe = child.stdin.take();
    let write = async {
        if let Some(mut pipe) = stdin_pipe {
            match pipe.write_all(stdin).await {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
                Err(source) => {
                    return Err(Error::Child {
                        op: ChildOp::WriteStdin,
                        source,
                    });
                }
            }
            // Dropping the pipe closes it: the child sees the end of its input.
        }
        Ok(())
    };
    let out = read_stream(child.stdout.take(), bounds.stdout, Stream::Stdout);
    let err = read_stream(child.stderr.take(), bounds.stderr, Stream::Stderr);
    let ((), stdout, stderr) = tokio::try_join!(write, out, err)?;
    // Reaped only after both streams closed: the leader's pid stays reserved until here.
    let status = child.wait().await.map_err(|source| Error::Child {
        op: ChildOp::Wait,
        source,
    })?;
    Ok((stdout, stderr, status))
}

async fn read_stream<R: AsyncRead + Unpin>(
    pipe: Option<R>,
    cap: Cap,
    stream: Stream,
) -> Result<Captured> {
    let mut out = Captured::default();
    match cap.overflow {
        Overflow::Truncate => read_into(pipe, cap.limit, &mut out).await,
        Overflow::Fail => {
            let Some(pipe) = pipe else {
                return Ok(out);
            };
            // One byte over the cap tells that it was passed; memory stays bounded.
            pipe.take(cap.limit as u64 + 1)
                .read_to_end(&mut out.bytes)
                .await
                .map_err(|source| Error::Child {
                    op: match stream {
                        Stream::Stdout => ChildOp::ReadStdout,
                        Stream::Stderr => ChildOp::ReadStderr,
                    },
                    source,
                })?;
            if out.bytes.len() > cap.limit {
                return Err(Error::OutputTooLarge {
                    stream,
                    limit: cap.limit,
                });
            }
        }
    }
    Ok(out)
}

/// Reads `reader` to its end (or a read error), keeping at most `cap` bytes in `out` and
/// setting [`Captured::truncated`] when more came. What was read stays in `out` even if this
/// future is dropped halfway (a caller that gives up on a stream an orphan holds open).
pub async fn read_into(reader: Option<impl AsyncRead + Unpin>, cap: usize, out: &mut Captured) {
    let Some(mut reader) = reader else {
        return;
    };
    // On the heap: a buffer in the future would make every caller's future large.
    let mut buf = vec![0u8; 8192];
    loop {
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                let room = cap.saturating_sub(out.bytes.len());
                out.bytes.extend_from_slice(&buf[..n.min(room)]);
                out.truncated |= n > room;
            }
        }
    }
}

/// SIGKILL to the process group `pgid`.
///
/// # Errors
///
/// `ESRCH` when nobody is left in it; `InvalidInput` for an id that is no process group's.
pub fn kill_group(pgid: u32) -> std::io::Result<()> {
    let pid = i32::try_from(pgid)
        .ok()
        .and_then(Pid::from_raw)
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a group id"))?;
    Ok(kill_process_group(pid, Signal::KILL)?)
}

/// Kills a child's process group with SIGKILL when dropped, unless disarmed.
#[derive(Debug)]
pub struct ProcessGroup {
    pgid: Option<u32>,
}

impl ProcessGroup {
    /// The group a child started in a group of its own leads (its pid, from
    /// [`Child::id`]; `None` once it was reaped).
    pub fn led_by(pid: Option<u32>) -> ProcessGroup {
        ProcessGroup {
            pgid: pid.filter(|&p| p > 0 && i32::try_from(p).is_ok()),
        }
    }

    /// SIGKILL to the group now (once: a second call does nothing).
    pub fn kill(&mut self) {
        if let Some(pgid) = self.pgid.take() {
            // ESRCH (everyone gone already) is fine, and nothing else can be done.
            let _ = kill_group(pgid);
        }
    }

    /// Leaves the group alone when dropped; returns its id.
    pub fn disarm(&mut self) -> Option<u32> {
        self.pgid.take()
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        self.kill();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn sh(script: &str, stdin: bool) -> Child {
        let mut cmd = Command::new("/bin/sh");
        cmd.args(["-c", script]);
        prepare(&mut cmd, stdin).spawn().unwrap()
    }

    fn bounds(stdout: Cap, stderr: Cap, timeout: Duration) -> Bounds {
        Bounds {
            stdout,
            stderr,
            timeout,
        }
    }

    #[tokio::test]
    async fn feeds_reads_and_caps_each_stream() {
        let wide = bounds(
            Cap::fail_past(1 << 20),
            Cap::keep_first(1 << 20),
            Duration::from_secs(10),
        );
        let done = run(sh("cat; echo err >&2", true), b"in", &wide)
            .await
            .unwrap();
        assert!(done.status.success());
        assert_eq!(done.stdout.bytes, b"in");
        assert_eq!(
            done.stderr,
            Captured {
                bytes: b"err\n".to_vec(),
                truncated: false
            }
        );

        // far more than the cap: kept to it, the child never blocked
        let kept = bounds(
            Cap::keep_first(1000),
            Cap::keep_first(10),
            Duration::from_secs(10),
        );
        let done = run(
            sh("head -c 1000000 /dev/zero; echo hello >&2", false),
            b"",
            &kept,
        )
        .await
        .unwrap();
        assert_eq!(
            (done.stdout.bytes.len(), done.stdout.truncated),
            (1000, true)
        );
        assert_eq!(
            (&done.stderr.bytes[..], done.stderr.truncated),
            (&b"hello\n"[..], false)
        );

        let strict = bounds(
            Cap::fail_past(1 << 20),
            Cap::fail_past(10),
            Duration::from_secs(10),
        );
        let err = run(sh("head -c 11 /dev/zero >&2", false), b"", &strict)
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                Error::OutputTooLarge {
                    stream: Stream::Stderr,
                    limit: 10
                }
            ),
            "{err}"
        );
        assert_eq!(err.to_string(), "stderr larger than 10 bytes");
        // exactly the cap is fine
        run(sh("head -c 10 /dev/zero >&2", false), b"", &strict)
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn a_child_that_does_not_read_its_stdin_is_no_error() {
        let b = bounds(
            Cap::fail_past(100),
            Cap::fail_past(100),
            Duration::from_secs(10),
        );
        let done = run(sh("exit 3", true), &vec![b'x'; 1 << 20], &b)
            .await
            .unwrap();
        assert_eq!(done.status.code(), Some(3));
    }

    #[tokio::test]
    async fn times_out_kills_the_group_and_reaps() {
        let started = Instant::now();
        // the grandchild holds the pipes open; killing only the child would hang the reads
        let child = sh("sleep 30 & echo $!; sleep 30", false);
        let b = bounds(
            Cap::keep_first(100),
            Cap::keep_first(100),
            Duration::from_millis(300),
        );
        let leader = child.id().unwrap();
        let err = run(child, b"", &b).await.unwrap_err();
        assert!(matches!(err, Error::Timeout { .. }), "{err}");
        assert_eq!(err.to_string(), "timed out after 300ms");
        assert!(started.elapsed() < Duration::from_secs(5));
        // reaped: no zombie left behind
        let leader = i32::try_from(leader).unwrap();
        assert_eq!(crate::proc::ProcStat::of(leader), None);
    }

    #[tokio::test]
    async fn what_a_finished_child_left_is_killed_on_request() {
        let b = bounds(
            Cap::keep_first(100),
            Cap::keep_first(100),
            Duration::from_secs(10),
        );
        // the orphan closes its streams so the run ends with it still alive
        let done = run(sh("sleep 30 >/dev/null 2>&1 & echo $!", false), b"", &b)
            .await
            .unwrap();
        let orphan: i32 = String::from_utf8_lossy(&done.stdout.bytes)
            .trim()
            .parse()
            .unwrap();
        let who = crate::proc::ProcessIdentity::of(orphan).unwrap();
        assert!(who.is_alive());
        done.kill_group();
        assert!(who.wait_exit(Duration::from_secs(10)).await);
    }

    #[test]
    fn a_group_id_must_be_one() {
        assert_eq!(
            kill_group(0).unwrap_err().kind(),
            std::io::ErrorKind::InvalidInput
        );
        assert_eq!(
            kill_group(u32::MAX).unwrap_err().kind(),
            std::io::ErrorKind::InvalidInput
        );
        assert!(ProcessGroup::led_by(None).disarm().is_none());
        assert!(ProcessGroup::led_by(Some(0)).disarm().is_none());
    }
}

//! `exec`: a command in a running container with live streams, as CRI's Exec (kubectl exec)
//! wants it. The process is built as [`Runtime::exec_sync`]'s is (the one builder,
//! `write_process`), so it runs as the container's own.
//!
//! Without a terminal the runtime's stdin, stdout and stderr are pipes of ours (runc copies
//! them to the process's and closes its stdin at our EOF; crun hands them on).
//!
//! With a terminal, the two runtimes differ (runc 1.1's `checkTerminal`, crun 1.8's
//! `libcrun_container_exec_with_options`):
//!
//! - crun runs `exec --console-socket` in the foreground: it sends the container's terminal
//!   master over the socket, then waits for the command and exits with its code. We resize
//!   that master directly.
//! - runc refuses `--console-socket` unless it detaches (and a detached command's exit code
//!   goes to whoever reaps it, not us). In the foreground it makes the container's terminal
//!   itself and copies it to and from its own stdio, which must be a terminal: so runc runs
//!   with a pseudo-terminal of ours as its controlling terminal (as CRI-O runs it), and a
//!   resize of our master reaches runc as SIGWINCH, which resizes the container's. Ours is raw
//!   from the start (runc makes it raw only once it has the container's, and input typed before
//!   then was echoed twice). runc copies input into the container's terminal before it gives
//!   it its first size (after it wrote the pid file), so kubectl's first size and keystrokes,
//!   sent together, raced: the command could read the input and find a 0x0 terminal. Input
//!   therefore waits until the sizes come so far are set on the container's terminal itself,
//!   taken from the command with `pidfd_getfd` (CRI-O's runc path has the race).
//!
//! Dropping the future kills the command, its process group and the runtime, as an exec past
//! its timeout is killed (`kill_exec`).

use std::ffi::{OsStr, OsString};
use std::os::fd::{AsRawFd as _, BorrowedFd, OwnedFd};
use std::os::unix::process::ExitStatusExt as _;
use std::path::Path;
use std::pin::Pin;
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use rustix::fs::{Mode, OFlags};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt as _};
use tokio::process::{Child, Command};

use node_primitives::ProcStat;
use tokio::sync::oneshot;

use super::{ExecFiles, FOREVER, GRACE, kill_exec};
use crate::command::{self, message};
use crate::error::{Error, Result};
use crate::record;
use crate::runtime::Runtime;
use crate::streams::{Streams, copy_out, next_size};
use crate::terminal::{Master, TerminalSize, open_pty, receive_console, set_size};

/// How long input waits for runc's command to start before it goes in unsized.
const TERMINAL_WAIT: Duration = Duration::from_secs(10);
/// How long an exec with a terminal waits for the client's first size before it starts
/// (kubectl and crictl send it right after the upgrade): the runtime then makes the terminal
/// with that size.
const FIRST_SIZE_WAIT: Duration = Duration::from_millis(250);

/// How the command's stdio is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StdioMode {
    /// Pipes: no terminal.
    Pipes,
    /// A terminal of ours as the runtime's controlling terminal (runc).
    OwnTerminal,
    /// The container's terminal, received over a console socket (crun).
    ConsoleSocket,
}

/// runc (and runtimes named after it) cannot hand over a terminal in the foreground.
fn terminal_mode(runtime: &Path) -> StdioMode {
    let name = runtime
        .file_name()
        .map(OsStr::to_string_lossy)
        .unwrap_or_default();
    if name.contains("runc") {
        StdioMode::OwnTerminal
    } else {
        StdioMode::ConsoleSocket
    }
}

type Source = Pin<Box<dyn AsyncRead + Send>>;
type Sink = Pin<Box<dyn AsyncWrite + Send>>;

/// What a started exec gives to copy from and to.
struct Started {
    running: Running,
    out: Source,
    err: Option<Source>,
    input: Option<Sink>,
    master: Option<Master>,
    /// Input waits until the container's terminal (not the master we hold) is sized (runc).
    size_first: bool,
}

impl Runtime {
    /// Runs `command` in the running container `id` (its spec's process, with these arguments,
    /// on a terminal when `tty`) with `streams` attached, until it exits; returns its exit
    /// code (128 + the signal when one killed it; the runtime's own, 255 for runc, when it
    /// could not start the command, whose complaint is then on stderr, or on the terminal).
    ///
    /// Without a terminal, the caller's stdin EOF closes the command's stdin. With one, its
    /// output and errors come on `stdout`, and `streams.resize` sizes the terminal. Once the
    /// command has exited, output still buffered is passed on for at most 2 seconds (a process
    /// it left in the background may hold the streams open).
    ///
    /// Dropping the future kills the command, what it started in its process group, and the
    /// runtime (in a task of the current tokio runtime, as [`Runtime::exec_sync`]'s timeout
    /// does).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidId`]; [`Error::InvalidConfig`] for an empty command;
    /// [`Error::NotRunning`]; [`Error::NotFound`]; [`Error::File`] or [`Error::Corrupt`] when the
    /// bundle's `config.json` cannot be read; [`Error::Spawn`]; [`Error::Io`] for the terminal
    /// or the console socket; [`Error::Runtime`] when crun exits without sending a terminal;
    /// [`Error::Timeout`] when it sends none within the command timeout; and those of
    /// [`Runtime::state`].
    pub async fn exec(
        &self,
        id: &str,
        command: &[String],
        tty: bool,
        mut streams: Streams,
    ) -> Result<i32> {
        let first = if tty {
            first_size(&mut streams.resize).await
        } else {
            None
        };
        let files = self.prepare_exec(id, command, tty, first).await?;
        let mode = if tty {
            terminal_mode(self.runtime_path())
        } else {
            StdioMode::Pipes
        };
        let started = match mode {
            StdioMode::Pipes => self.start_piped(id, files, streams.stdin.is_some())?,
            StdioMode::OwnTerminal => self.start_on_own_terminal(id, files)?,
            StdioMode::ConsoleSocket => self.start_with_console_socket(id, files).await?,
        };
        pump(id, self.runtime_path(), started, streams, first).await
    }

    /// `<runtime> --root <root> exec --pid-file <pid> --process <process> [extra] <id>`, with
    /// nothing of our environment but `PATH`, killed if dropped.
    fn exec_command(&self, id: &str, files: &ExecFiles, extra: &[&OsStr]) -> Command {
        let mut args: Vec<&OsStr> = vec![
            OsStr::new("--root"),
            self.runtime_root().as_os_str(),
            OsStr::new("exec"),
            OsStr::new("--pid-file"),
            files.pid.as_os_str(),
            OsStr::new("--process"),
            files.process.as_os_str(),
        ];
        args.extend_from_slice(extra);
        args.push(OsStr::new(id));
        let mut cmd = Command::new(self.runtime_path());
        cmd.args(args)
            .env_clear()
            .env(
                "PATH",
                std::env::var_os("PATH").unwrap_or_else(|| "/usr/sbin:/usr/bin:/sbin:/bin".into()),
            )
            .kill_on_drop(true);
        cmd
    }

    fn spawn(&self, id: &str, cmd: &mut Command) -> Result<Child> {
        cmd.spawn().map_err(|source| Error::Spawn {
            container: id.to_owned(),
            program: self.runtime_path().to_owned(),
            source,
        })
    }

    fn start_piped(&self, id: &str, files: ExecFiles, stdin: bool) -> Result<Started> {
        let mut cmd = self.exec_command(id, &files, &[]);
        cmd.stdin(if stdin { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let mut child = self.spawn(id, &mut cmd)?;
        let broken = |what| Error::stream(id, what, std::io::Error::other("not piped"));
        let out: Source = Box::pin(child.stdout.take().ok_or_else(|| broken("read stdout"))?);
        let err: Source = Box::pin(child.stderr.take().ok_or_else(|| broken("read stderr"))?);
        let input = child.stdin.take().map(|s| Box::pin(s) as Sink);
        Ok(Started {
            running: Running::new(id, child, files),
            out,
            err: Some(err),
            input,
            master: None,
            size_first: false,
        })
    }

    fn start_on_own_terminal(&self, id: &str, files: ExecFiles) -> Result<Started> {
        let pty_err = |e: std::io::Error| Error::io(id, "open a terminal for", "/dev/ptmx", e);
        let (master, slave) = open_pty().map_err(pty_err)?;
        // a conduit only: the container's terminal echoes and translates
        let mut raw = rustix::termios::tcgetattr(&slave).map_err(|e| pty_err(e.into()))?;
        raw.make_raw();
        rustix::termios::tcsetattr(&slave, rustix::termios::OptionalActions::Now, &raw)
            .map_err(|e| pty_err(e.into()))?;
        let master = Master::new(master).map_err(pty_err)?;
        let mut cmd = self.exec_command(id, &files, &[]);
        let dup = |fd: &OwnedFd| fd.try_clone().map_err(pty_err);
        cmd.stdin(Stdio::from(dup(&slave)?))
            .stdout(Stdio::from(dup(&slave)?))
            .stderr(Stdio::from(slave));
        // SAFETY: runs in the child between fork and exec, where only async-signal-safe calls
        // are allowed: setsid(2) and ioctl(2) are, and nothing here allocates or locks. The
        // runtime leads a session of its own (so its process group is its pid, for the kill
        // on drop) whose controlling terminal is our slave, its stdin: runc needs its stdio to
        // be a terminal, and a resize of our master reaches it as SIGWINCH.
        unsafe {
            cmd.pre_exec(|| {
                rustix::process::setsid()?;
                // SAFETY: descriptor 0 is the slave the command was just given, open here.
                let stdin = BorrowedFd::borrow_raw(0);
                rustix::process::ioctl_tiocsctty(stdin)?;
                Ok(())
            });
        }
        let child = self.spawn(id, &mut cmd)?;
        // Our copies of the slave went with `cmd`: the master reads EOF once the runtime and
        // the command have closed theirs.
        drop(cmd);
        Ok(Started {
            running: Running::new(id, child, files),
            out: Box::pin(master.clone()),
            err: None,
            input: Some(Box::pin(master.clone())),
            master: Some(master),
            size_first: true,
        })
    }

    async fn start_with_console_socket(&self, id: &str, files: ExecFiles) -> Result<Started> {
        let console = files.console.clone();
        let socket_err = |op, e: std::io::Error| Error::io(id, op, &console, e);
        // Bound and named through a descriptor of its directory: a container's state directory
        // may be longer than a socket address may be.
        let dir = files.console.parent().unwrap_or(Path::new("/"));
        let dir = rustix::fs::open(
            dir,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| socket_err("open the directory of", e.into()))?;
        let name = files
            .console
            .file_name()
            .map(OsStr::to_os_string)
            .unwrap_or_default();
        let via = |whose: String| {
            let mut path = OsString::from(format!("/proc/{whose}/fd/{}/", dir.as_raw_fd()));
            path.push(&name);
            path
        };
        let listener = std::os::unix::net::UnixListener::bind(via("self".to_owned()))
            .and_then(|l| {
                l.set_nonblocking(true)?;
                tokio::net::UnixListener::from_std(l)
            })
            .map_err(|e| socket_err("bind", e))?;
        // the runtime reaches it through our descriptor, whatever its own are
        let for_runtime = via(std::process::id().to_string());
        let mut cmd = self.exec_command(
            id,
            &files,
            &[OsStr::new("--console-socket"), for_runtime.as_os_str()],
        );
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .process_group(0);
        let mut child = self.spawn(id, &mut cmd)?;
        let stderr = child.stderr.take();
        let mut running = Running::new(id, child, files);
        let timeout = self.command_timeout();
        let receive = async {
            let (stream, _) = listener.accept().await?;
            receive_console(&stream).await
        };
        let master = tokio::select! {
            got = tokio::time::timeout(timeout, receive) => match got {
                Ok(Ok(fd)) => fd,
                Ok(Err(e)) => return Err(socket_err("receive a terminal on", e)),
                Err(_) => return Err(Error::Timeout {
                    container: id.to_owned(),
                    runtime: self.runtime_path().to_owned(),
                    command: "exec",
                    timeout,
                }),
            },
            status = running.wait() => {
                let said = command::read_capped(stderr, command::STDERR_CAP).await;
                running.reaped();
                return Err(Error::Runtime {
                    container: id.to_owned(),
                    runtime: self.runtime_path().to_owned(),
                    command: "exec",
                    status: status.map_or_else(|e| e.to_string(), |s| s.to_string()),
                    stderr: message(&said),
                });
            }
        };
        let master = Master::new(master).map_err(|e| socket_err("watch the terminal from", e))?;
        Ok(Started {
            running,
            out: Box::pin(master.clone()),
            // crun's own complaints, after the terminal was sent
            err: stderr.map(|s| Box::pin(s) as Source),
            input: Some(Box::pin(master.clone())),
            master: Some(master),
            size_first: false,
        })
    }
}

/// Copies between the streams and the command until it exited and its output ended (or the
/// grace after its exit passed), applying sizes on the way.
async fn pump(
    id: &str,
    runtime: &Path,
    started: Started,
    streams: Streams,
    first: Option<TerminalSize>,
) -> Result<i32> {
    let Started {
        mut running,
        out,
        err,
        input,
        master,
        size_first,
    } = started;
    let Streams {
        stdin,
        mut stdout,
        mut stderr,
        mut resize,
    } = streams;
    let terminal = master.is_some();
    let output = async {
        let errors = async {
            if let Some(err) = err {
                // with a terminal, the runtime's complaints go where the client looks
                let to = if terminal { None } else { stderr.as_mut() };
                copy_out(err, to).await;
            }
        };
        tokio::join!(copy_out(out, stdout.as_mut()), errors);
    };
    // runc's command: the pid file names it once started (runc reaps it, so it is runc's child)
    let gate = size_first && stdin.is_some();
    let command_of = running.runtime_pid().zip(running.pid_file());
    let (release, released) = oneshot::channel::<()>();
    let mut release = Some(release);
    let sized = async {
        match command_of {
            Some((runtime, pid_file)) if gate => containers_terminal(id, runtime, &pid_file).await,
            _ => None,
        }
    };
    let input = async {
        if let (Some(mut from), Some(mut to)) = (stdin, input) {
            if gate {
                let _ = released.await;
            }
            let _ = tokio::io::copy(&mut from, &mut to).await;
            // without a terminal, dropping the pipe is the command's EOF
            let _ = to.shutdown().await;
        }
    };
    tokio::pin!(output, input, sized);
    let (mut out_done, mut in_done, mut gate_done) = (false, false, !gate);
    let mut last_size: Option<TerminalSize> = first;
    let resize_master = |size: TerminalSize| {
        if let Some(master) = &master
            && let Err(e) = master.resize(size)
        {
            tracing::debug!(container = id, error = %e, "terminal not resized");
        }
    };
    // ours (runc's copies it into the container's) or the container's (where it is set already)
    if let Some(size) = first {
        resize_master(size);
    }
    let mut status: Option<std::io::Result<ExitStatus>> = None;
    let mut until = Instant::now() + FOREVER;
    while !(out_done && status.is_some()) {
        tokio::select! {
            () = &mut output, if !out_done => out_done = true,
            () = &mut input, if !in_done => in_done = true,
            size = next_size(&mut resize) => {
                resize_master(size);
                last_size = Some(size);
            }
            terminal = &mut sized, if !gate_done => {
                gate_done = true;
                // sizes already sent go first, as the client sent them before its input
                while let Some(rx) = resize.as_mut()
                    && let Ok(size) = rx.try_recv()
                {
                    resize_master(size);
                    last_size = Some(size);
                }
                size_containers_terminal(id, terminal, last_size);
                if let Some(release) = release.take() {
                    let _ = release.send(());
                }
            }
            s = running.wait(), if status.is_none() => {
                status = Some(s);
                until = Instant::now() + GRACE;
            }
            () = tokio::time::sleep_until(until.into()) => break,
        }
    }
    running.reaped();
    // The loop ends only once the status is in (the grace starts with it).
    let status = status
        .unwrap_or_else(|| Err(std::io::Error::other("no exit status")))
        .map_err(|source| Error::Spawn {
            container: id.to_owned(),
            program: runtime.to_owned(),
            source,
        })?;
    Ok(status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)))
}

/// The runtime of a started exec; killed, with the command, when dropped before it was reaped.
struct Running {
    id: String,
    child: Option<Child>,
    files: Option<ExecFiles>,
}

impl Running {
    fn new(id: &str, child: Child, files: ExecFiles) -> Running {
        Running {
            id: id.to_owned(),
            child: Some(child),
            files: Some(files),
        }
    }

    fn runtime_pid(&self) -> Option<u32> {
        self.child.as_ref().and_then(Child::id)
    }

    fn pid_file(&self) -> Option<std::path::PathBuf> {
        self.files.as_ref().map(|f| f.pid.clone())
    }

    async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        match self.child.as_mut() {
            Some(child) => child.wait().await,
            None => std::future::pending().await,
        }
    }

    /// The runtime was reaped (or never needs killing): nothing left to do on drop.
    fn reaped(&mut self) {
        if self.child.as_ref().is_some_and(|c| c.id().is_none()) {
            self.child = None;
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let files = self.files.take();
        let Some(pid) = child.id() else { return };
        let id = std::mem::take(&mut self.id);
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            // No runtime to wait in: the group goes now, the runtime with `kill_on_drop`.
            command::kill_group(pid);
            return;
        };
        handle.spawn(async move {
            let resumed = match &files {
                Some(files) => kill_exec(&id, pid, &files.pid).await,
                None => false,
            };
            let reaped = resumed
                && tokio::time::timeout(GRACE, child.wait())
                    .await
                    .is_ok_and(|s| s.is_ok());
            if !reaped {
                command::kill_group(pid);
                let _ = tokio::time::timeout(GRACE, child.wait()).await;
            }
            tracing::debug!(container = id, pid, "an abandoned exec was killed");
            drop(files);
        });
    }
}

/// Sets `size` on the container's terminal taken from runc's command, if both are there.
fn size_containers_terminal(id: &str, terminal: Option<OwnedFd>, size: Option<TerminalSize>) {
    if let (Some(terminal), Some(size)) = (terminal, size)
        && let Err(e) = set_size(&terminal, size)
    {
        tracing::debug!(container = id, error = %e, "container's terminal not sized");
    }
}

/// The client's first terminal size, if it comes within [`FIRST_SIZE_WAIT`]; `resize` is
/// emptied when the client's resize stream ended.
async fn first_size(
    resize: &mut Option<tokio::sync::mpsc::Receiver<TerminalSize>>,
) -> Option<TerminalSize> {
    let rx = resize.as_mut()?;
    match tokio::time::timeout(FIRST_SIZE_WAIT, rx.recv()).await {
        Ok(Some(size)) => Some(size),
        Ok(None) => {
            *resize = None;
            None
        }
        Err(_) => None,
    }
}

/// The terminal runc made for its command: descriptor 0 of the process its pid file names,
/// duplicated with `pidfd_getfd` (nothing is opened through the container's descriptors), if
/// that is still runc's child (the pidfd pins it: no reused pid) and the descriptor is a
/// pseudo-terminal (the command's own binary may have replaced it; then it is not ours to
/// size). `None` when any of that fails or the command does not start within
/// [`TERMINAL_WAIT`]: input then goes in without waiting further.
async fn containers_terminal(id: &str, runtime: u32, pid_file: &Path) -> Option<OwnedFd> {
    let deadline = Instant::now() + TERMINAL_WAIT;
    let pid = loop {
        if let Ok(Some(pid)) = record::read_number(id, pid_file) {
            break pid;
        }
        if Instant::now() >= deadline {
            tracing::debug!(container = id, "exec: no pid file; input goes in unsized");
            return None;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    };
    let taken = (|| {
        let pidfd = rustix::process::pidfd_open(
            rustix::process::Pid::from_raw(pid)?,
            rustix::process::PidfdFlags::empty(),
        )
        .ok()?;
        let runtime = i32::try_from(runtime).ok()?;
        ProcStat::of(pid).filter(|s| s.ppid == runtime)?;
        let fd = rustix::process::pidfd_getfd(&pidfd, 0, rustix::process::PidfdGetfdFlags::empty())
            .ok()?;
        let stat = rustix::fs::fstat(&fd).ok()?;
        let is_pty = rustix::fs::FileType::from_raw_mode(stat.st_mode)
            == rustix::fs::FileType::CharacterDevice
            && UNIX98_PTY_SLAVES.contains(&rustix::fs::major(stat.st_rdev));
        is_pty.then_some(fd)
    })();
    if taken.is_none() {
        tracing::debug!(
            container = id,
            pid,
            "exec: the command's terminal was not reached"
        );
    }
    taken
}

/// Device majors of Unix 98 pseudo-terminal slaves (Linux's devices.txt).
const UNIX98_PTY_SLAVES: std::ops::RangeInclusive<u32> = 136..=143;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runc_gets_our_terminal_and_crun_sends_its_own() {
        assert_eq!(
            terminal_mode(Path::new("/usr/sbin/runc")),
            StdioMode::OwnTerminal
        );
        assert_eq!(
            terminal_mode(Path::new("/usr/bin/crun")),
            StdioMode::ConsoleSocket
        );
    }
}

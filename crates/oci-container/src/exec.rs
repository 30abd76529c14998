//! `exec_sync`: a command run to completion in a running container, as CRI's ExecSync (and so
//! the kubelet's exec probes) wants it: output captured and capped, the command's own failure an
//! exit code rather than an error, and a timeout that kills the command inside the container and
//! is reported, not raised.

use std::ffi::OsStr;
use std::os::unix::process::ExitStatusExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use safe_file::{Durability, Symlinks};

use crate::command;
use crate::error::{Error, Result, validate_id};
use crate::record::{self, ProcessIdentity};
use crate::runtime::{Runtime, Status, kill_identity};
use crate::terminal::TerminalSize;
use node_primitives::ProcStat;
use node_primitives::child::{Captured, read_into};

mod interactive;

/// The exit code of a command that timed out, as CRI-O reports it.
pub const EXEC_TIMEOUT_EXIT_CODE: i32 = -1;
/// How long the runtime and the streams get to finish once the command was killed, or once the
/// runtime exited (a process the command left in the background may hold the pipes open).
const GRACE: Duration = Duration::from_secs(2);
/// What a timeout past the clock's range becomes: longer than any exec.
const FOREVER: Duration = Duration::from_secs(100 * 365 * 24 * 3600);
/// How long a stopped runtime gets to show it has stopped.
const STOP_WAIT: Duration = Duration::from_millis(500);
/// The most read of a bundle's `config.json`.
const MAX_CONFIG: u64 = 4 << 20;

/// What [`Runtime::exec_sync`] saw of the command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecOutput {
    /// Its standard output, at most the cap given.
    pub stdout: Vec<u8>,
    /// Its standard error, at most the cap given; the runtime's own complaints (a command not
    /// found in the container) are here too.
    pub stderr: Vec<u8>,
    /// Its exit code (128 + the signal when one killed it); the runtime's when the runtime could
    /// not start it (runc says 255); [`EXEC_TIMEOUT_EXIT_CODE`] when it timed out.
    pub exit_code: i32,
    /// It ran past the timeout and was killed.
    pub timed_out: bool,
    /// It wrote more than the cap to stdout or stderr; the rest was read and dropped.
    pub truncated: bool,
}

impl Runtime {
    /// Runs `command` in the running container `id` with the container's own environment, user
    /// and working directory (its spec's process, with these arguments and no terminal), and
    /// waits at most `timeout` for it. Keeps at most `output_cap` bytes of each of stdout and
    /// stderr, reading and dropping the rest so the command never blocks on a full pipe.
    ///
    /// A command that fails, or that the container does not have, is an [`ExecOutput`] with its
    /// (or the runtime's) non-zero exit code, as CRI-O reports it. On timeout the command is
    /// killed inside the container, with the process group it leads, and the runtime's process
    /// group too; the output says [`ExecOutput::timed_out`].
    ///
    /// Neither the runtime nor the command sees this process's environment: the runtime gets
    /// `PATH` alone, the command the environment of the container's spec.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidId`]; [`Error::InvalidConfig`] for an empty command;
    /// [`Error::NotRunning`] when the container is not running (also when it stopped and the
    /// runtime refused the exec); [`Error::NotFound`]; [`Error::File`] or [`Error::Corrupt`]
    /// when the bundle's `config.json` cannot be read; [`Error::Spawn`]; and those of
    /// [`Runtime::state`].
    pub async fn exec_sync(
        &self,
        id: &str,
        command: &[String],
        timeout: Duration,
        output_cap: usize,
    ) -> Result<ExecOutput> {
        let files = self.prepare_exec(id, command, false, None).await?;

        let root = self.runtime_root().as_os_str();
        let args: [&OsStr; 8] = [
            OsStr::new("--root"),
            root,
            OsStr::new("exec"),
            OsStr::new("--pid-file"),
            files.pid.as_os_str(),
            OsStr::new("--process"),
            files.process.as_os_str(),
            OsStr::new(id),
        ];
        let mut child = command::spawn(id, self.runtime_path(), &args)?;
        let runtime_pid = child.id();
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let (mut out, mut err) = (Captured::default(), Captured::default());
        let mut status = None;
        let mut escalation = Escalation::default();
        {
            let reading = async {
                tokio::join!(
                    read_into(stdout, output_cap, &mut out),
                    read_into(stderr, output_cap, &mut err)
                )
            };
            tokio::pin!(reading);
            let mut read_done = false;
            // a timeout too long for the clock (Duration::MAX) is no timeout
            let mut until = Instant::now()
                .checked_add(timeout)
                .unwrap_or_else(|| Instant::now() + FOREVER);
            while !(read_done && status.is_some()) {
                tokio::select! {
                    _ = &mut reading, if !read_done => read_done = true,
                    s = child.wait(), if status.is_none() => {
                        status = Some(s);
                        until = until.min(Instant::now() + GRACE);
                    }
                    () = tokio::time::sleep_until(until.into()) => {
                        // With the status in, the streams are held open by something else:
                        // keep what we have.
                        if status.is_some()
                            || !escalation.step(id, runtime_pid, &files.pid).await
                        {
                            break;
                        }
                        until = Instant::now() + GRACE;
                    }
                }
            }
        }
        let truncated = out.truncated || err.truncated;
        // Without a timeout the loop above only ends once the runtime's status is known.
        let (false, Some(status)) = (escalation.timed_out, status) else {
            return Ok(ExecOutput {
                stdout: out.bytes,
                stderr: err.bytes,
                exit_code: EXEC_TIMEOUT_EXIT_CODE,
                timed_out: true,
                truncated,
            });
        };
        let status = status.map_err(|source| Error::Spawn {
            container: id.to_owned(),
            program: self.runtime_path().to_owned(),
            source,
        })?;
        let exit_code = status
            .code()
            .unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
        if exit_code != 0 {
            // The runtime refuses a container that stopped since the check above with the same
            // non-zero code as a missing command: ask it which this was.
            match self.state(id).await {
                Ok(s) if s.status != Status::Running => return Err(not_running(id, &s.status)),
                Err(e @ Error::NotFound { .. }) => return Err(e),
                _ => {}
            }
        }
        Ok(ExecOutput {
            stdout: out.bytes,
            stderr: err.bytes,
            exit_code,
            timed_out: false,
            truncated,
        })
    }
}

fn not_running(id: &str, status: &Status) -> Error {
    let state = match status {
        Status::Creating => "creating",
        Status::Created => "created",
        Status::Running => "running",
        Status::Paused => "paused",
        Status::Stopped => "stopped",
        Status::Other(s) => s.as_str(),
    };
    Error::NotRunning {
        container: id.to_owned(),
        state: state.to_owned(),
    }
}

/// The process file and pid file of one exec, in the container's state directory; removed on
/// drop.
pub(crate) struct ExecFiles {
    process: PathBuf,
    pid: PathBuf,
    /// The console socket of an exec with a terminal, where the runtime sends its master.
    console: PathBuf,
}

impl ExecFiles {
    fn new(dir: &Path) -> ExecFiles {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        // unique among concurrent execs of this process; the pid for those of another
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let stem = format!("exec-{}-{n}", std::process::id());
        ExecFiles {
            process: dir.join(format!("{stem}.json")),
            pid: dir.join(format!("{stem}.pid")),
            console: dir.join(format!("{stem}.sock")),
        }
    }
}

impl Drop for ExecFiles {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.process);
        let _ = std::fs::remove_file(&self.pid);
        let _ = std::fs::remove_file(&self.console);
    }
}

impl Runtime {
    /// What both execs do first: the id and command checked, the container running, the
    /// process spec (with a terminal or none) written to a file removed when the result drops.
    pub(crate) async fn prepare_exec(
        &self,
        id: &str,
        command: &[String],
        terminal: bool,
        console_size: Option<TerminalSize>,
    ) -> Result<ExecFiles> {
        validate_id(id)?;
        if command.is_empty() {
            return Err(Error::config(id, "exec: no command given"));
        }
        let state = self.state(id).await?;
        if state.status != Status::Running {
            return Err(not_running(id, &state.status));
        }
        let files = ExecFiles::new(&self.container_dir(id));
        write_process(
            id,
            &state.bundle,
            command,
            (terminal, console_size),
            &files.process,
        )?;
        Ok(files)
    }
}

/// The `linux.cgroupsPath` of the bundle's `config.json`, if it sets one.
pub(crate) fn cgroups_path(id: &str, bundle: &Path) -> Result<Option<String>> {
    let config = bundle.join("config.json");
    let bytes = safe_file::read_regular(&config, MAX_CONFIG, Symlinks::Refuse)
        .map_err(|e| Error::file(id, e))?;
    let spec: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| Error::Corrupt {
        container: id.to_owned(),
        path: config,
        reason: e.to_string(),
    })?;
    Ok(spec
        .pointer("/linux/cgroupsPath")
        .and_then(serde_json::Value::as_str)
        .filter(|path| !path.is_empty())
        .map(str::to_owned))
}

/// Writes the spec's process with `command` as its arguments and a terminal or none, as CRI-O
/// does, so every runtime runs it as the container's own (env, user, cwd, capabilities,
/// no_new_privileges, AppArmor and SELinux labels; the runtime adds the container's namespaces,
/// cgroup and seccomp filter): the one process builder of [`Runtime::exec_sync`] and
/// [`Runtime::exec`].
fn write_process(
    id: &str,
    bundle: &Path,
    command: &[String],
    terminal: (bool, Option<TerminalSize>),
    to: &Path,
) -> Result<()> {
    let config = bundle.join("config.json");
    let bytes = safe_file::read_regular(&config, MAX_CONFIG, Symlinks::Refuse)
        .map_err(|e| Error::file(id, e))?;
    let process = process_for(&bytes, command, terminal).map_err(|reason| Error::Corrupt {
        container: id.to_owned(),
        path: config,
        reason,
    })?;
    safe_file::write_atomic(to, &process, 0o600, Durability::Unsynced)
        .map_err(|e| Error::file(id, e))
}

/// The `process` of the spec `config`, with `command` as its arguments and `terminal`; kept as
/// JSON so fields this crate does not know pass through.
fn process_for(
    config: &[u8],
    command: &[String],
    (terminal, console_size): (bool, Option<TerminalSize>),
) -> std::result::Result<Vec<u8>, String> {
    let mut spec: serde_json::Value =
        serde_json::from_slice(config).map_err(|e| format!("not a runtime spec: {e}"))?;
    let process = spec
        .get_mut("process")
        .and_then(serde_json::Value::as_object_mut)
        .ok_or("the spec has no process")?;
    process.insert("args".into(), command.into());
    process.insert("terminal".into(), terminal.into());
    // The client's first size, when it came before the start: the runtime makes the terminal
    // with it (crun otherwise sizes it 0x0 itself, which may undo a size we set meanwhile).
    match console_size.filter(|_| terminal) {
        Some(size) => {
            process.insert(
                "consoleSize".into(),
                serde_json::json!({"height": size.height, "width": size.width}),
            );
        }
        None => {
            process.remove("consoleSize");
        }
    }
    serde_json::to_vec(process).map_err(|e| format!("cannot serialize the process: {e}"))
}

/// What an exec past its deadline has been through: the command killed (the runtime resumed to
/// reap it), then, if the runtime still did not end, the runtime with what is left.
#[derive(Default)]
struct Escalation {
    timed_out: bool,
    runtime_killed: bool,
}

impl Escalation {
    /// The next step at a deadline passed with the runtime still running; false when none is
    /// left and the caller stops waiting.
    async fn step(&mut self, id: &str, runtime_pid: Option<u32>, pid_file: &Path) -> bool {
        if !self.timed_out {
            self.timed_out = true;
            if let Some(pid) = runtime_pid {
                self.runtime_killed = !kill_exec(id, pid, pid_file).await;
            }
            return true;
        }
        if self.runtime_killed {
            return false;
        }
        self.runtime_killed = true;
        if let Some(pid) = runtime_pid {
            command::kill_group(pid);
        }
        true
    }
}

/// Kills an exec that timed out: the command (named by the pid file) and any other child of the
/// runtime, with the process groups they are in (runc makes the command a session leader; crun
/// runs it in a session its intermediate process made), or the runtime's own group but the
/// runtime, should a runtime leave it there. Returns whether the runtime was resumed to
/// reap them and exit on its own; when it could not be stopped, its process group is killed
/// at once instead (false).
///
/// The runtime is stopped first. It is the command's parent and, stopped, cannot reap it, so
/// the command's pid, and the group it leads, stay the command's until it is killed: no reused
/// pid is signalled. The runtime itself is our unreaped child. Resumed, it reaps the command
/// before it exits, so once its status is in the command is gone: a check right after the
/// timeout (critest's "timeout exec process should be gone") finds nothing, not even a zombie
/// left to the node's init.
async fn kill_exec(id: &str, runtime_pid: u32, pid_file: &Path) -> bool {
    let Ok(runtime) = i32::try_from(runtime_pid) else {
        return false;
    };
    let stopped =
        kill(Pid::from_raw(runtime), Signal::SIGSTOP).is_ok() && wait_stopped(runtime).await;
    let mut targets: Vec<(ProcessIdentity, ProcStat)> = ProcStat::children_of(runtime);
    if let Ok(Some(pid)) = record::read_number(id, pid_file)
        && !targets.iter().any(|(who, _)| who.pid == pid)
        && let Some(stat) = ProcStat::of(pid).filter(|s| s.ppid == runtime)
    {
        let who = ProcessIdentity {
            pid,
            start_time: stat.start_time,
        };
        targets.push((who, stat));
    }
    for (who, stat) in targets {
        tracing::debug!(
            container = id,
            pid = who.pid,
            "killing an exec that timed out"
        );
        // The process group the child is in (runc: the one it leads; crun: the session an
        // intermediate process made and left) is pinned while the runtime is stopped: the
        // child cannot be reaped, and even as a zombie it keeps its group's id taken.
        if stopped && stat.pgrp != runtime {
            let _ = killpg(Pid::from_raw(stat.pgrp), Signal::SIGKILL);
        }
        kill_identity(who, Signal::SIGKILL);
    }
    // crun leaves the command in the runtime's own process group (runc makes it a session
    // leader): then the command's children are there too, and the group is pinned by its
    // leader, the stopped runtime. Every member but the runtime goes.
    if stopped {
        for (who, _) in ProcStat::in_group(runtime) {
            if who.pid != runtime {
                kill_identity(who, Signal::SIGKILL);
            }
        }
    }
    if stopped && kill(Pid::from_raw(runtime), Signal::SIGCONT).is_ok() {
        return true;
    }
    // SIGKILL ends a stopped process too.
    command::kill_group(runtime_pid);
    false
}

/// Waits until every thread of `pid` has stopped, so no reap it had under way is still to come.
async fn wait_stopped(pid: i32) -> bool {
    let deadline = Instant::now() + STOP_WAIT;
    loop {
        if all_threads_stopped(pid) {
            return true;
        }
        if Instant::now() >= deadline {
            tracing::warn!(
                pid,
                "the runtime did not stop; its exec is killed by identity only"
            );
            return false;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

fn all_threads_stopped(pid: i32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    let mut any = false;
    for task in tasks {
        let Ok(task) = task else { return false };
        // `t` is a tracing stop, `T` a job-control stop
        if !ProcStat::read(&task.path().join("stat")).is_some_and(|s| s.is_stopped()) {
            return false;
        }
        any = true;
    }
    any
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_process_is_the_specs_with_new_args_and_no_terminal() {
        let config = br#"{"ociVersion":"1.0.2","process":{"terminal":true,
            "consoleSize":{"height":1,"width":2},"args":["/bin/sh"],"env":["PATH=/bin","A=b"],"cwd":"/w","user":{"uid":5,"gid":6},
            "x-unknown":7},"root":{"path":"/r"}}"#;
        let out = process_for(config, &["ls".into(), "-l".into()], (false, None)).unwrap();
        let p: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(p["args"], serde_json::json!(["ls", "-l"]));
        assert_eq!(p["terminal"], false);
        assert!(p.get("consoleSize").is_none());
        assert_eq!(p["env"], serde_json::json!(["PATH=/bin", "A=b"]));
        assert_eq!((&p["cwd"], &p["user"]["uid"]), (&"/w".into(), &5.into()));
        assert_eq!(
            p["x-unknown"], 7,
            "fields this crate does not know pass through"
        );
        let tty = process_for(config, &["sh".into()], (true, None)).unwrap();
        let tty: serde_json::Value = serde_json::from_slice(&tty).unwrap();
        assert_eq!((&tty["terminal"], &tty["env"]), (&true.into(), &p["env"]));
        assert!(
            tty.get("consoleSize").is_none(),
            "the spec's own size is not the client's"
        );
        let size = TerminalSize {
            width: 91,
            height: 17,
        };
        let sized = process_for(config, &["sh".into()], (true, Some(size))).unwrap();
        let sized: serde_json::Value = serde_json::from_slice(&sized).unwrap();
        assert_eq!(
            sized["consoleSize"],
            serde_json::json!({"height": 17, "width": 91})
        );
        let no_tty = process_for(config, &["sh".into()], (false, Some(size))).unwrap();
        let no_tty: serde_json::Value = serde_json::from_slice(&no_tty).unwrap();
        assert!(no_tty.get("consoleSize").is_none(), "no terminal, no size");

        for (bad, reason) in [
            (&b"{"[..], "not a runtime spec"),
            (&br#"{"process":3}"#[..], "the spec has no process"),
            (&b"{}"[..], "the spec has no process"),
        ] {
            let err = process_for(bad, &["x".into()], (false, None)).unwrap_err();
            assert!(err.starts_with(reason), "{err}");
        }
    }

    #[test]
    fn exec_files_are_unique_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (ExecFiles::new(dir.path()), ExecFiles::new(dir.path()));
        assert_ne!(a.process, b.process);
        assert_ne!(a.pid, b.pid);
        std::fs::write(&a.process, b"{}").unwrap();
        std::fs::write(&a.pid, b"1").unwrap();
        let (process, pid) = (a.process.clone(), a.pid.clone());
        drop(a);
        assert!(!process.exists() && !pid.exists());
    }

    #[tokio::test]
    async fn a_timed_out_exec_kills_the_command_and_the_group_it_leads() {
        // A stand-in for the runtime: its child leads a session (as runc makes the command)
        // with a grandchild in its group, and the pid file names that child.
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("exec.pid");
        let script = format!(
            "setsid sh -c 'sleep 300 & echo $$ > {}; wait' & wait",
            pid_file.display()
        );
        let mut runtime = tokio::process::Command::new("sh")
            .args(["-c", &script])
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let runtime_pid = runtime.id().unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let leader = loop {
            if let Ok(Some(pid)) = record::read_number("c1", &pid_file) {
                break pid;
            }
            assert!(Instant::now() < deadline, "the pid file was never written");
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        let sleeper = loop {
            if let Some((who, _)) = ProcStat::children_of(leader).first() {
                break *who;
            }
            assert!(Instant::now() < deadline, "the grandchild never started");
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        let leader = ProcessIdentity::of(leader).unwrap();

        assert!(
            kill_exec("c1", runtime_pid, &pid_file).await,
            "the runtime was stopped, then resumed"
        );
        let status = tokio::time::timeout(Duration::from_secs(10), runtime.wait())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            status.signal(),
            None,
            "the resumed runtime saw its command end and exited on its own"
        );
        // The runtime reaped its command before it exited: not even a zombie is left of it.
        assert!(
            ProcStat::of(leader.pid).is_none_or(|s| s.start_time != leader.start_time),
            "the command is still there after the runtime exited: {:?}",
            ProcStat::of(leader.pid)
        );
        let deadline = Instant::now() + Duration::from_secs(10);
        // the sleeper, whose parent died, is reaped by init
        while leader.is_alive() || sleeper.is_alive() {
            let zombie = |who: &ProcessIdentity| {
                ProcStat::of(who.pid)
                    .is_none_or(|s| s.state == 'Z' || s.start_time != who.start_time)
            };
            if zombie(&leader) && zombie(&sleeper) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the command or its child survived"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

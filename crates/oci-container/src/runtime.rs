//! Driving an OCI runtime (crun, runc) through conmon, as CRI-O does.
//!
//! `create` starts conmon, which daemonizes, runs `<runtime> create`, owns the container's stdio,
//! writes its log in the CRI (k8s-file) format and, when the container exits, its exit code into
//! `<state>/exits/<id>`. Everything else is a short runtime command: `start`, `state`, `kill`,
//! `delete`, `list` here, `pause`, `resume`, `update` and `exec` in their own modules. Each is
//! time-bounded and killed on timeout.
//!
//! The state directory holds, per container, a record written *before* conmon starts (so a
//! caller that crashed finds what it started), conmon's pid file and the container's pid file.

use std::ffi::OsStr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use serde::Deserialize;
use tokio::io::AsyncReadExt;

use crate::cgroup::place::Cgroups;
use crate::cgroup_manager::{CgroupManager, ConmonCgroup};
use crate::command::{self, message, run_ok};
use crate::config::ContainerStdio;
use crate::error::{Error, Result, validate_id};
use crate::record::{self, ContainerRecord, ProcessIdentity};

/// How long a runtime command (`start`, `state`, `kill`, `delete`, `list`) may take.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long conmon and `<runtime> create` may take together.
pub const DEFAULT_CREATE_TIMEOUT: Duration = Duration::from_secs(120);
/// The most read of conmon's report on its sync pipe.
const SYNC_CAP: usize = 64 << 10;
/// The longest pause between two looks for an exit file or a process's end; the first pauses
/// are shorter (see [`Backoff`]).
const POLL: Duration = Duration::from_millis(20);

/// Pauses of 1 ms doubling up to [`POLL`]: a container killed a moment ago is seen gone within
/// a millisecond or two, one that runs on costs a look every 20 ms.
struct Backoff(Duration);

impl Backoff {
    fn new() -> Backoff {
        Backoff(Duration::from_millis(1))
    }

    async fn pause(&mut self) {
        tokio::time::sleep(self.0).await;
        self.0 = (self.0 * 2).min(POLL);
    }
}

/// An OCI runtime driven through conmon, with its own state directory.
#[derive(Debug, Clone)]
pub struct Runtime {
    binary: PathBuf,
    root: PathBuf,
    conmon: PathBuf,
    state_dir: PathBuf,
    timeout: Duration,
    create_timeout: Duration,
    /// The node's cgroup manager and conmon's place, shared by clones (and so is the bus
    /// connection made on first use).
    cgroups: Arc<Cgroups>,
}

/// A container's status, as the runtime reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Being created.
    Creating,
    /// Created, its process waiting for `start`.
    Created,
    /// Its process runs.
    Running,
    /// Paused (runc's freezer).
    Paused,
    /// Its process has exited.
    Stopped,
    /// A status this crate does not know, as the runtime wrote it.
    Other(String),
}

/// `<runtime> state`: what the runtime knows of a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerState {
    /// The container id.
    pub id: String,
    /// Its status.
    pub status: Status,
    /// Its process id while it has one (runc reports 0 once stopped: `None` here).
    pub pid: Option<i32>,
    /// Its bundle.
    pub bundle: PathBuf,
}

#[derive(Deserialize)]
struct RawState {
    id: String,
    status: String,
    #[serde(default)]
    pid: Option<i32>,
    #[serde(default)]
    bundle: PathBuf,
}

impl From<RawState> for ContainerState {
    fn from(raw: RawState) -> ContainerState {
        let status = match raw.status.as_str() {
            "creating" => Status::Creating,
            "created" => Status::Created,
            "running" => Status::Running,
            "paused" => Status::Paused,
            "stopped" => Status::Stopped,
            other => Status::Other(other.to_owned()),
        };
        ContainerState {
            id: raw.id,
            status,
            pid: raw.pid.filter(|&p| p > 0),
            bundle: raw.bundle,
        }
    }
}

/// The records of a state directory: those that could be read, and why the others could not.
#[derive(Debug, Default)]
pub struct Records {
    /// One per container this runtime created and has not deleted.
    pub records: Vec<ContainerRecord>,
    /// A record that could not be read, naming its container and file.
    pub errors: Vec<Error>,
}

/// conmon's report on the sync pipe: the container's pid, or -1 and why.
#[derive(Deserialize)]
struct SyncMessage {
    #[serde(alias = "data")]
    pid: i32,
    #[serde(default)]
    message: Option<String>,
}

impl Runtime {
    /// The runtime at `runtime_path`, monitored by the conmon at `conmon_path`, keeping its
    /// records, pid files and exit files under `state_dir`. The runtime's own state (`--root`)
    /// is `/run/<runtime file name>` (CRI-O's default) until [`Runtime::with_root`].
    pub fn new(
        runtime_path: impl Into<PathBuf>,
        conmon_path: impl Into<PathBuf>,
        state_dir: impl Into<PathBuf>,
    ) -> Runtime {
        let runtime_path = runtime_path.into();
        let name = runtime_path
            .file_name()
            .map_or_else(|| "oci-runtime".into(), OsStr::to_os_string);
        Runtime {
            root: Path::new("/run").join(name),
            binary: runtime_path,
            conmon: conmon_path.into(),
            state_dir: state_dir.into(),
            timeout: DEFAULT_TIMEOUT,
            create_timeout: DEFAULT_CREATE_TIMEOUT,
            cgroups: Arc::default(),
        }
    }

    /// Sets the cgroup manager the containers' `linux.cgroupsPath` is written for (the runtime
    /// and conmon are told `--systemd-cgroup` with systemd) and where conmon runs. The default
    /// is cgroupfs with conmon in its pod's cgroup.
    pub fn with_cgroups(mut self, manager: CgroupManager, conmon: ConmonCgroup) -> Runtime {
        self.cgroups = Arc::new(Cgroups::new(manager, conmon));
        self
    }

    /// With the systemd manager, moves the running init `pid` of pod `pod` into the scope
    /// `crio-<pod>.scope` in the pod's slice `parent` (CRI-O's name for its infra container's
    /// scope); systemd removes the scope when the init is gone. Nothing to do with cgroupfs,
    /// where the init made its own leaf.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] with systemd's reason.
    pub async fn place_pod_init(&self, pod: &str, pid: i32, parent: &str) -> Result<()> {
        let owner = self.state_dir.display().to_string();
        self.cgroups.place_pod_init(pod, pid, parent, &owner).await
    }

    /// The cgroup manager containers are created for.
    pub fn cgroup_manager(&self) -> CgroupManager {
        self.cgroups.manager
    }

    /// With the systemd manager, stops the conmon and pod init scopes this runtime started
    /// (their description names its state directory) whose id `known` does not hold, and the
    /// container scope beside each such conmon: what lost records leave running. Others'
    /// scopes are left alone. Returns the units stopped; none with cgroupfs.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] with systemd's reason when it cannot be asked.
    pub async fn stop_stray_scopes(
        &self,
        known: &(dyn Fn(&str) -> bool + Sync),
    ) -> Result<Vec<String>> {
        self.cgroups
            .stop_strays(&self.state_dir.display().to_string(), known)
            .await
    }

    /// Sets the runtime's state directory (`--root`).
    pub fn with_root(mut self, root: impl Into<PathBuf>) -> Runtime {
        self.root = root.into();
        self
    }

    /// Sets how long each runtime command, and `create` as a whole, may take.
    pub fn with_timeouts(mut self, command: Duration, create: Duration) -> Runtime {
        self.timeout = command;
        self.create_timeout = create;
        self
    }

    /// The runtime binary.
    pub fn runtime_path(&self) -> &Path {
        &self.binary
    }

    /// The runtime's state directory (`--root`).
    pub fn runtime_root(&self) -> &Path {
        &self.root
    }

    /// The conmon binary.
    pub fn conmon_path(&self) -> &Path {
        &self.conmon
    }

    /// This crate's state directory.
    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    /// How long each runtime command may take.
    pub(crate) fn command_timeout(&self) -> Duration {
        self.timeout
    }

    /// `<state>/containers/<id>`: the record, pid files, and conmon's persist directory.
    pub(crate) fn container_dir(&self, id: &str) -> PathBuf {
        self.state_dir.join("containers").join(id)
    }

    /// conmon's `--socket-dir-path`: `<dir>/<id>` links to the bundle, where conmon binds
    /// `attach`.
    pub(crate) fn attach_dir(&self) -> PathBuf {
        self.state_dir.join("attach")
    }

    fn exits_dir(&self) -> PathBuf {
        self.state_dir.join("exits")
    }

    /// `<state>/exits/<id>`: where conmon writes the container's exit code.
    pub fn exit_file(&self, id: &str) -> PathBuf {
        self.exits_dir().join(id)
    }

    /// Creates the container `id` from `bundle` (its `config.json` is read by the runtime) under
    /// a new conmon that writes the container's output to `log_path` in the CRI log format.
    /// Returns the container's pid; its process waits for [`Runtime::start`].
    ///
    /// conmon outlives the caller: it daemonizes, and the record in the state directory names
    /// it by pid and start time.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidId`]; [`Error::Io`] when the container already has a state directory or
    /// it cannot be made; [`Error::Runtime`] with the runtime's own message when `create`
    /// fails (a missing root file system, a bad command); [`Error::Timeout`]. On error nothing
    /// is left behind: conmon killed, the runtime's container deleted, the state removed.
    pub async fn create(&self, id: &str, bundle: &Path, log_path: &Path) -> Result<i32> {
        self.create_with_stdio(id, bundle, log_path, ContainerStdio::default())
            .await
    }

    /// [`Runtime::create`] for a container whose process has a terminal or an open stdin, as
    /// `stdio` says (the bundle's `process.terminal` must say the same: [`crate::generate`]
    /// writes it from [`ContainerConfig::stdio`](crate::ContainerConfig::stdio)). conmon is
    /// told `--terminal`, `--stdin`, and `--leave-stdin-open` unless `stdin_once`; the record
    /// keeps `stdio` for [`Runtime::attach`].
    ///
    /// # Errors
    ///
    /// Those of [`Runtime::create`].
    pub async fn create_with_stdio(
        &self,
        id: &str,
        bundle: &Path,
        log_path: &Path,
        stdio: ContainerStdio,
    ) -> Result<i32> {
        validate_id(id)?;
        let dir = self.container_dir(id);
        for d in [
            self.state_dir.join("containers"),
            self.exits_dir(),
            self.attach_dir(),
        ] {
            std::fs::create_dir_all(&d).map_err(|e| Error::io(id, "create directory", d, e))?;
        }
        std::fs::create_dir(&dir).map_err(|e| Error::io(id, "create directory", &dir, e))?;
        let mut rec = ContainerRecord {
            id: id.to_owned(),
            bundle: bundle.to_owned(),
            runtime: self.binary.clone(),
            runtime_root: self.root.clone(),
            log_path: log_path.to_owned(),
            conmon: None,
            stdio,
        };
        let created = async {
            // Intent first: a crash from here on leaves a record to clean up from.
            record::write(&dir, &rec)?;
            remove_file(id, &self.exit_file(id))?;
            let pid = self
                .start_conmon(id, bundle, log_path, &dir, &mut rec)
                .await?;
            Ok(pid)
        }
        .await;
        match created {
            Ok(pid) => {
                crate::cgroup::oom::note_parent(id, &dir, pid);
                Ok(pid)
            }
            Err(e) => {
                tracing::debug!(container = id, error = %e, "create failed, cleaning up");
                if let Err(cleanup) = self.remove(id).await {
                    tracing::warn!(container = id, error = %cleanup, "cleanup after a failed create");
                }
                Err(e)
            }
        }
    }

    async fn start_conmon(
        &self,
        id: &str,
        bundle: &Path,
        log_path: &Path,
        dir: &Path,
        rec: &mut ContainerRecord,
    ) -> Result<i32> {
        let (sync_read, sync_write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
            .map_err(|e| Error::io(id, "create a pipe for", &self.conmon, e.into()))?;
        let conmon_pidfile = dir.join("conmon.pid");
        let mut cmd = tokio::process::Command::new(&self.conmon);
        let root_arg = format!("--root={}", self.root.display());
        cmd.args(["--cid", id, "--cuuid", id, "--name", id])
            .arg("--bundle")
            .arg(bundle)
            .arg("--runtime")
            .arg(&self.binary)
            .args(["--runtime-arg", &root_arg])
            .arg("--log-path")
            .arg(log_path)
            .arg("--exit-dir")
            .arg(self.exits_dir())
            .arg("--conmon-pidfile")
            .arg(&conmon_pidfile)
            .arg("--container-pidfile")
            .arg(dir.join("pidfile"))
            .arg("--persist-dir")
            .arg(dir)
            .arg("--socket-dir-path")
            .arg(self.attach_dir())
            .args(stdio_args(rec.stdio))
            .args(self.cgroups.manager.runtime_flag())
            .current_dir(bundle)
            .env_clear()
            .env(
                "PATH",
                std::env::var_os("PATH").unwrap_or_else(|| "/usr/sbin:/usr/bin:/sbin:/bin".into()),
            )
            .env("_OCI_SYNCPIPE", sync_write.as_raw_fd().to_string())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .process_group(0);
        let fd = sync_write.as_raw_fd();
        // SAFETY: runs in the child between fork and exec, where only async-signal-safe calls
        // are allowed; fcntl(2) is one, and nothing here allocates or locks. Clearing
        // FD_CLOEXEC on this one descriptor in this one child hands conmon its sync pipe
        // without leaking it into any other process this one spawns.
        unsafe {
            cmd.pre_exec(move || inherit_fd(fd));
        }
        let mut child = cmd.spawn().map_err(|source| Error::Spawn {
            container: id.to_owned(),
            program: self.conmon.clone(),
            source,
        })?;
        // Only conmon may hold the write end, or the read below never sees EOF.
        drop(sync_write);
        let deadline = Instant::now() + self.create_timeout;
        let stderr = child.stderr.take();
        let parent = async {
            let (err, status) = tokio::join!(
                command::read_capped(stderr, command::STDERR_CAP),
                child.wait()
            );
            (err, status)
        };
        let (stderr, status) = tokio::time::timeout_at(deadline.into(), parent)
            .await
            .map_err(|_| self.timed_out(id, &self.conmon, "create"))?;
        let status = status.map_err(|source| Error::Spawn {
            container: id.to_owned(),
            program: self.conmon.clone(),
            source,
        })?;
        if !status.success() {
            return Err(Error::Runtime {
                container: id.to_owned(),
                runtime: self.conmon.clone(),
                command: "create",
                status: status.to_string(),
                stderr: message(&stderr),
            });
        }
        // conmon wrote its daemon's pid before its first process exited.
        if let Some(pid) = record::read_number(id, &conmon_pidfile)? {
            rec.conmon = ProcessIdentity::of(pid);
            record::write(dir, rec)?;
            if let Some(path) = crate::exec::cgroups_path(id, bundle)? {
                let owner = self.state_dir.display().to_string();
                self.cgroups
                    .place_conmon(id, pid, &path, dir, &owner)
                    .await?;
            }
        }
        let report = tokio::time::timeout_at(deadline.into(), read_sync(sync_read))
            .await
            .map_err(|_| self.timed_out(id, &self.binary, "create"))?;
        self.container_pid(id, report)
    }

    /// The container's pid from conmon's report, or the runtime's reason it has none.
    fn container_pid(&self, id: &str, report: std::io::Result<Vec<u8>>) -> Result<i32> {
        let report = report.map_err(|e| Error::Corrupt {
            container: id.to_owned(),
            path: self.conmon.clone(),
            reason: format!("sync pipe: {e}"),
        })?;
        let sync: SyncMessage = serde_json::from_slice(&report).map_err(|e| Error::Runtime {
            container: id.to_owned(),
            runtime: self.conmon.clone(),
            command: "create",
            status: "no report".to_owned(),
            stderr: if report.is_empty() {
                "conmon exited without reporting the container's pid".to_owned()
            } else {
                format!("unreadable report {:?}: {e}", message(&report))
            },
        })?;
        if sync.pid <= 0 {
            return Err(Error::Runtime {
                container: id.to_owned(),
                runtime: self.binary.clone(),
                command: "create",
                status: "failed".to_owned(),
                stderr: message(sync.message.as_deref().unwrap_or_default().as_bytes()),
            });
        }
        Ok(sync.pid)
    }

    fn timed_out(&self, id: &str, program: &Path, command: &'static str) -> Error {
        Error::Timeout {
            container: id.to_owned(),
            runtime: program.to_owned(),
            command,
            timeout: self.create_timeout,
        }
    }

    pub(crate) async fn runtime_ok(
        &self,
        id: &str,
        command: &'static str,
        rest: &[&str],
    ) -> Result<command::Output> {
        let rest: Vec<&OsStr> = rest.iter().map(OsStr::new).collect();
        self.runtime_os_ok(id, command, &rest).await
    }

    /// `<runtime> --root <root> rest...`, time-bounded; a failure is [`Error::Runtime`], or
    /// [`Error::NotFound`] when the runtime does not know the container.
    pub(crate) async fn runtime_os_ok(
        &self,
        id: &str,
        command: &'static str,
        rest: &[&OsStr],
    ) -> Result<command::Output> {
        let mut args: Vec<&OsStr> = vec![OsStr::new("--root"), self.root.as_os_str()];
        args.extend_from_slice(rest);
        run_ok(id, &self.binary, &args, command, self.timeout)
            .await
            .map_err(|e| not_found(e, &self.binary))
    }

    /// Starts the created container's process (`<runtime> start`).
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`], [`Error::Runtime`] with its message, [`Error::Timeout`].
    pub async fn start(&self, id: &str) -> Result<()> {
        validate_id(id)?;
        self.runtime_ok(id, "start", &["start", id]).await.map(drop)
    }

    /// What the runtime knows of the container (`<runtime> state`).
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] when the runtime does not know it, [`Error::Runtime`],
    /// [`Error::Timeout`], [`Error::Corrupt`] when its output is not the state JSON.
    pub async fn state(&self, id: &str) -> Result<ContainerState> {
        validate_id(id)?;
        let out = self.runtime_ok(id, "state", &["state", id]).await?;
        let raw: RawState = serde_json::from_slice(&out.stdout).map_err(|e| Error::Corrupt {
            container: id.to_owned(),
            path: self.binary.clone(),
            reason: format!("state output: {e}"),
        })?;
        Ok(raw.into())
    }

    /// Every container the runtime knows under its root (`<runtime> list --format json`).
    ///
    /// # Errors
    ///
    /// [`Error::Runtime`], [`Error::Timeout`], [`Error::Corrupt`].
    pub async fn list(&self) -> Result<Vec<ContainerState>> {
        let out = self
            .runtime_ok("-", "list", &["list", "--format", "json"])
            .await?;
        // runc prints `null` for none
        let raw: Option<Vec<RawState>> =
            serde_json::from_slice(&out.stdout).map_err(|e| Error::Corrupt {
                container: "-".to_owned(),
                path: self.binary.clone(),
                reason: format!("list output: {e}"),
            })?;
        Ok(raw
            .unwrap_or_default()
            .into_iter()
            .map(Into::into)
            .collect())
    }

    /// Sends `signal` to the container's process (`<runtime> kill`).
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`], [`Error::Runtime`] (also when the container is not running),
    /// [`Error::Timeout`].
    pub async fn kill(&self, id: &str, signal: Signal) -> Result<()> {
        self.kill_number(id, signal as i32).await
    }

    /// [`Runtime::kill`] with a signal by number, real-time signals included.
    pub(crate) async fn kill_number(&self, id: &str, signal: i32) -> Result<()> {
        validate_id(id)?;
        let number = signal.to_string();
        self.runtime_ok(id, "kill", &["kill", id, &number])
            .await
            .map(drop)
    }

    /// The exit code conmon recorded (128 + the signal for a killed process), or
    /// [`Error::NotExited`].
    ///
    /// # Errors
    ///
    /// [`Error::NotExited`] before the container exits; [`Error::File`] or [`Error::Corrupt`]
    /// when the exit file cannot be read.
    pub fn exit_code(&self, id: &str) -> Result<i32> {
        validate_id(id)?;
        record::read_number(id, &self.exit_file(id))?.ok_or_else(|| Error::NotExited {
            container: id.to_owned(),
        })
    }

    /// Waits at most `timeout` for the container to exit, and returns its exit code.
    ///
    /// # Errors
    ///
    /// [`Error::NotExited`] when it still runs after `timeout`, and those of
    /// [`Runtime::exit_code`].
    pub async fn wait(&self, id: &str, timeout: Duration) -> Result<i32> {
        let deadline = Instant::now() + timeout;
        let mut backoff = Backoff::new();
        loop {
            match self.exit_code(id) {
                Err(Error::NotExited { .. }) if Instant::now() < deadline => {
                    backoff.pause().await;
                }
                other => return other,
            }
        }
    }

    /// Deletes the stopped container from the runtime (`<runtime> delete`), lets its conmon
    /// finish, and removes its state and exit file (the log stays: it is the caller's).
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`], [`Error::Runtime`] (a running container is refused: kill it first or
    /// use [`Runtime::remove`]), [`Error::Timeout`], [`Error::Io`].
    pub async fn delete(&self, id: &str) -> Result<()> {
        validate_id(id)?;
        self.runtime_ok(id, "delete", &["delete", id]).await?;
        self.finish_conmon(id).await;
        self.remove_state(id)
    }

    /// Removes the container whatever its state: `delete --force` (killing its processes),
    /// conmon killed if it still runs, state and exit file removed. Keeps going past failures
    /// and returns the first; a container the runtime does not know is not one.
    ///
    /// This is the cleanup for a failed create and for records a crashed caller left.
    ///
    /// # Errors
    ///
    /// The first of the runtime's and the file system's errors.
    pub async fn remove(&self, id: &str) -> Result<()> {
        validate_id(id)?;
        let mut first: Option<Error> = None;
        match self
            .runtime_ok(id, "delete", &["delete", "--force", id])
            .await
        {
            Ok(_) | Err(Error::NotFound { .. }) => {}
            Err(e) => first = first.or(Some(e)),
        }
        self.finish_conmon(id).await;
        if let Err(e) = self.remove_state(id) {
            first = first.or(Some(e));
        }
        first.map_or(Ok(()), Err)
    }

    /// Waits (at most the command timeout) for the container's conmon to exit after its
    /// container did, then kills it; a pid that another process has since taken is left alone.
    async fn finish_conmon(&self, id: &str) {
        let dir = self.container_dir(id);
        let conmon = match record::read(id, &dir) {
            Ok(rec) => rec.conmon,
            Err(_) => None,
        };
        if let Some(conmon) = conmon
            && !conmon
                .wait_exit(self.timeout.min(Duration::from_secs(5)))
                .await
        {
            tracing::warn!(
                container = id,
                pid = conmon.pid,
                "conmon still runs, killing it"
            );
            kill_identity(conmon, Signal::SIGKILL);
        }
        if let Err(e) = self.cgroups.release_conmon(id, &dir).await {
            tracing::warn!(container = id, error = %e, "conmon's cgroup stays");
        }
    }

    fn remove_state(&self, id: &str) -> Result<()> {
        let dir = self.container_dir(id);
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(id, "remove", dir, e)),
        }
        remove_file(id, &self.exit_file(id))
    }

    /// The record of the container `id`.
    ///
    /// # Errors
    ///
    /// [`Error::File`] (not found when there is none), [`Error::Corrupt`].
    pub fn record(&self, id: &str) -> Result<ContainerRecord> {
        validate_id(id)?;
        record::read(id, &self.container_dir(id))
    }

    /// Every record in the state directory: what a caller that restarted reconciles with
    /// [`Runtime::list`] and [`ProcessIdentity::is_alive`], and cleans up with
    /// [`Runtime::remove`].
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when the directory cannot be listed; a record that cannot be read is in
    /// [`Records::errors`] instead.
    pub fn records(&self) -> Result<Records> {
        let dir = self.state_dir.join("containers");
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Records::default()),
            Err(e) => return Err(Error::io("-", "list", dir, e)),
        };
        let mut out = Records::default();
        for entry in entries {
            let entry = entry.map_err(|e| Error::io("-", "list", &dir, e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if validate_id(&name).is_err() {
                continue;
            }
            match record::read(&name, &entry.path()) {
                Ok(rec) => out.records.push(rec),
                Err(e) => out.errors.push(e),
            }
        }
        out.records.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }
}

/// conmon's stdio flags for `stdio` (conmon 2.1's src/cli.c): `--terminal`, `--stdin`, and
/// `--leave-stdin-open` for a stdin that outlives its first attacher.
fn stdio_args(stdio: ContainerStdio) -> Vec<&'static str> {
    let mut args = Vec::new();
    if stdio.terminal {
        args.push("--terminal");
    }
    if stdio.stdin {
        args.push("--stdin");
        if !stdio.stdin_once {
            args.push("--leave-stdin-open");
        }
    }
    args
}

/// Runtimes say "does not exist" (runc) or cannot open the state file (crun).
fn not_found(e: Error, runtime: &Path) -> Error {
    match e {
        Error::Runtime {
            container, stderr, ..
        } if stderr.contains("does not exist")
            || stderr.contains("No such file or directory")
            || stderr.contains("not found") =>
        {
            Error::NotFound {
                container,
                runtime: runtime.to_owned(),
            }
        }
        other => other,
    }
}

fn remove_file(id: &str, path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io(id, "remove", path, e)),
    }
}

/// One line (or everything until EOF) from conmon's sync pipe, capped.
async fn read_sync(fd: OwnedFd) -> std::io::Result<Vec<u8>> {
    let mut pipe = tokio::net::unix::pipe::Receiver::from_owned_fd(fd)?;
    let mut out = Vec::new();
    let mut buf = vec![0u8; 4096];
    loop {
        let n = pipe.read(&mut buf).await?;
        if n == 0 {
            return Ok(out);
        }
        out.extend_from_slice(&buf[..n]);
        if let Some(end) = out.iter().position(|&b| b == b'\n') {
            out.truncate(end);
            return Ok(out);
        }
        if out.len() > SYNC_CAP {
            return Err(std::io::Error::other("report longer than 64 KiB"));
        }
    }
}

fn inherit_fd(fd: i32) -> std::io::Result<()> {
    // SAFETY: fcntl on a descriptor number with integer arguments touches no memory.
    let rc = unsafe { libc::fcntl(fd, libc::F_SETFD, 0) };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Signals the process `who` names, only if it is still that process: a pidfd pins the process
/// first, then its start time is checked, so a reused pid is never signalled.
pub(crate) fn kill_identity(who: ProcessIdentity, signal: Signal) -> bool {
    let Ok(pidfd) = node_primitives::Pidfd::open(who.pid) else {
        return false;
    };
    who.is_alive() && pidfd.send_signal(signal as i32).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_states_parse_from_both_runtimes() {
        // (output, status, pid)
        let cases = [
            (
                r#"{"ociVersion":"1.0.2","id":"c1","pid":42,"status":"running","bundle":"/b","rootfs":"/r","created":"x","owner":""}"#,
                Status::Running,
                Some(42),
            ),
            (
                r#"{"id":"c1","pid":0,"status":"stopped","bundle":"/b"}"#,
                Status::Stopped,
                None,
            ),
            (
                r#"{"id":"c1","status":"paused","bundle":"/b"}"#,
                Status::Paused,
                None,
            ),
            (
                r#"{"id":"c1","pid":7,"status":"weird","bundle":"/b"}"#,
                Status::Other("weird".into()),
                Some(7),
            ),
        ];
        for (json, status, pid) in cases {
            let state: ContainerState = serde_json::from_str::<RawState>(json).unwrap().into();
            assert_eq!((state.status, state.pid), (status, pid), "{json}");
        }
        let none: Option<Vec<RawState>> = serde_json::from_str("null").unwrap();
        assert!(none.is_none());
    }

    #[test]
    fn sync_reports_from_old_and_new_conmon() {
        for (json, pid, msg) in [
            (r#"{"pid": 42}"#, 42, None),
            (r#"{"data": 42}"#, 42, None),
            (
                r#"{"pid": -1, "message": "no rootfs"}"#,
                -1,
                Some("no rootfs"),
            ),
        ] {
            let m: SyncMessage = serde_json::from_str(json).unwrap();
            assert_eq!((m.pid, m.message.as_deref()), (pid, msg));
        }
    }

    #[test]
    fn conmon_is_told_the_containers_stdio() {
        let stdio = |terminal, stdin, stdin_once| ContainerStdio {
            terminal,
            stdin,
            stdin_once,
        };
        let cases: [(ContainerStdio, &[&str]); 5] = [
            (ContainerStdio::default(), &[]),
            (stdio(true, false, false), &["--terminal"]),
            (
                stdio(false, true, false),
                &["--stdin", "--leave-stdin-open"],
            ),
            (stdio(false, true, true), &["--stdin"]),
            (stdio(true, true, true), &["--terminal", "--stdin"]),
        ];
        for (stdio, args) in cases {
            assert_eq!(stdio_args(stdio), args, "{stdio:?}");
        }
    }

    #[test]
    fn not_found_is_recognised_in_both_runtimes_words() {
        for stderr in [
            "container does not exist",
            "error opening file `/run/crun/c1/status`: No such file or directory",
        ] {
            let e = Error::Runtime {
                container: "c1".into(),
                runtime: "/r".into(),
                command: "state",
                status: "exit status: 1".into(),
                stderr: stderr.into(),
            };
            assert!(matches!(
                not_found(e, Path::new("/r")),
                Error::NotFound { .. }
            ));
        }
    }

    #[test]
    fn kill_identity_spares_a_reused_pid() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let who = ProcessIdentity::of(child.id() as i32).unwrap();
        let other = ProcessIdentity {
            start_time: who.start_time + 1,
            ..who
        };
        assert!(!kill_identity(other, Signal::SIGKILL));
        assert!(who.is_alive());
        assert!(kill_identity(who, Signal::SIGKILL));
        child.wait().unwrap();
    }

    #[tokio::test]
    async fn records_of_an_empty_or_missing_state_dir() {
        let dir = tempfile::tempdir().unwrap();
        let rt = Runtime::new("/usr/bin/crun", "/usr/bin/conmon", dir.path().join("none"));
        assert!(rt.records().unwrap().records.is_empty());
        assert_eq!(rt.runtime_root(), Path::new("/run/crun"));
        let err = rt.exit_code("c1").unwrap_err();
        assert!(matches!(err, Error::NotExited { .. }));
        let err = rt.wait("c1", Duration::from_millis(50)).await.unwrap_err();
        assert_eq!(err.to_string(), "container c1: has not exited");
    }
}

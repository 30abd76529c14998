//! The [`Exec`] trait and [`ProcessExec`], which runs plugins as child processes.

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use nix::sys::signal::Signal;
use node_primitives::Stream;
use node_primitives::child::{self, Bounds, Cap};
use tokio::process::{Child, Command};
use tracing::Instrument;

use crate::cgroup::{self, PluginCgroup};
use crate::discovery::find_plugin_in;
use crate::error::{Error, OutputStream, PluginStatus, Result, one_line, stderr_tail};

/// Finds and runs plugin binaries.
///
/// Everything above this crate's process layer talks to plugins through this trait (as
/// `Arc<dyn Exec>`), so it can be tested with a fake that records invocations and returns canned output.
/// [`ProcessExec`] is the real implementation.
#[async_trait]
pub trait Exec: Send + Sync {
    /// Returns the path of the plugin called `name`, searching `dirs` in order.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidPluginName`] when `name` is not a plain file name, [`Error::PluginNotFound`]
    /// when no directory holds an executable file of that name.
    async fn find_plugin(&self, name: &str, dirs: &[PathBuf]) -> Result<PathBuf>;

    /// Runs `plugin` with exactly the variables in `env` (plus what the implementation documents it
    /// passes through) and `stdin` as its standard input. When it exits with 0, returns its stdout
    /// and the tail of its stderr, so an unusable result can be reported with the plugin's own
    /// diagnostics.
    ///
    /// One method on purpose: a wrapper (metrics, tracing) cannot pass stdout on and drop stderr
    /// by overriding the wrong one of two.
    ///
    /// # Errors
    ///
    /// [`Error::Failed`] when the plugin exits non-zero or is killed by a signal: `stdout` holds what it
    /// printed, normally the spec's error object. [`Error::Timeout`], [`Error::OutputTooLarge`],
    /// [`Error::Spawn`], [`Error::TextFileBusy`], [`Error::InvalidEnv`] and [`Error::Io`] for the ways
    /// running it can go wrong before it gets to say anything.
    async fn exec_plugin(
        &self,
        plugin: &Path,
        env: &[(String, String)],
        stdin: &[u8],
    ) -> Result<PluginOutput>;
}

/// What a plugin that exited with 0 wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PluginOutput {
    /// Everything it wrote to stdout.
    pub stdout: Vec<u8>,
    /// The last [`STDERR_TAIL_BYTES`](crate::STDERR_TAIL_BYTES) of its stderr, lossily decoded and
    /// trimmed (empty when the implementation does not capture stderr).
    pub stderr_tail: String,
}

/// How long one plugin invocation may take by default.
///
/// libcni sets no limit, so one stuck plugin blocks its pod forever. A minute is far beyond what a
/// healthy plugin needs (milliseconds; a DHCP lease takes a few seconds) yet shorter than the two
/// minutes a kubelet waits for a whole sandbox, which may run several plugins.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// How many bytes a plugin may write to stdout, and separately to stderr, by default: 1 MiB.
/// Real results are a few KiB.
pub const DEFAULT_OUTPUT_LIMIT: usize = 1 << 20;

/// The `PATH` plugins get when the runtime itself has none.
pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Runs plugins as child processes with tokio.
///
/// # Environment
///
/// A plugin starts from an **empty** environment and gets:
///
/// 1. `PATH` from the runtime's environment, or [`DEFAULT_PATH`] when it is unset or empty: plugins
///    run `iptables`, `ip`, `nft` and friends;
/// 2. the variables named with [`with_passed_env`](Self::with_passed_env), when the runtime has them
///    (none by default; an operator may want `XTABLES_LOCKFILE` or proxy settings);
/// 3. the variables the caller passes (normally `CNI_COMMAND`, `CNI_CONTAINERID`, `CNI_NETNS`,
///    `CNI_IFNAME`, `CNI_ARGS`, `CNI_PATH`); they win over the first two.
///
/// libcni passes the runtime's whole environment plus the `CNI_*` variables. We are stricter because a
/// runtime's environment is not the plugin's business: it may hold credentials, `LD_PRELOAD`, proxy
/// settings or stray `CNI_*` variables of its own, and what a plugin sees should not depend on how the
/// runtime happened to be started. The spec gives plugins their input through `CNI_*` and stdin only.
///
/// # Processes
///
/// Each plugin runs in a process group of its own. When an invocation times out, writes too much, or
/// its future is dropped (the caller was cancelled), the whole group gets `SIGKILL`, so IPAM plugins and
/// `iptables` it started die with it.
///
/// Where the node has a cgroup2 hierarchy the runtime may write to (root; pure v2 or "hybrid"), each
/// plugin also runs in a cgroup of its own, made under the runtime's cgroup for the run and joined
/// before the plugin executes. Whatever is in it when the run ends is killed (`cgroup.kill`) and the
/// group removed: a child that left the process group with `setsid` dies too, and so does anything a
/// plugin that exited with 0 left behind (plugins are one-shot; that is logged as a warning). Without
/// such a hierarchy this is said once in the log, and the process group is all there is. Stdin is written while stdout and stderr are read, so no pipe can
/// fill up and deadlock; a plugin that exits without reading its stdin is not an error. An invocation
/// ends when the plugin has exited *and* its stdout and stderr are closed, so a child it leaves behind
/// holding them open makes the invocation run into the timeout.
///
/// Spawning that fails with "text file busy" (the binary is being written, e.g. during an upgrade) is
/// retried a few times with a growing pause; see [`with_busy_retries`](Self::with_busy_retries).
///
/// # Launcher
///
/// [`with_launcher`](Self::with_launcher) runs plugins through a wrapper command: with
/// `["ip", "netns", "exec", "node-ns"]` the command spawned is `ip netns exec node-ns /path/to/plugin`.
/// Tests and benchmarks use it to run plugins inside a stand-in "node" network namespace. The wrapper
/// must `exec` the plugin (so the plugin stays in the group) and pass its stdio and environment on.
/// "Text file busy" is only retried when the wrapper itself cannot start.
#[derive(Debug, Clone)]
pub struct ProcessExec {
    timeout: Duration,
    stdout_limit: usize,
    stderr_limit: usize,
    launcher: Vec<OsString>,
    passed_env: Vec<String>,
    busy_attempts: u32,
    busy_backoff: Duration,
}

/// The longest single pause between "text file busy" retries.
const MAX_BUSY_BACKOFF: Duration = Duration::from_millis(500);

impl Default for ProcessExec {
    fn default() -> Self {
        Self {
            timeout: DEFAULT_TIMEOUT,
            stdout_limit: DEFAULT_OUTPUT_LIMIT,
            stderr_limit: DEFAULT_OUTPUT_LIMIT,
            launcher: Vec::new(),
            passed_env: Vec::new(),
            busy_attempts: 8,
            busy_backoff: Duration::from_millis(10),
        }
    }
}

impl ProcessExec {
    /// A runner with the defaults: [`DEFAULT_TIMEOUT`], [`DEFAULT_OUTPUT_LIMIT`] per stream, no
    /// launcher, only `PATH` passed through, 8 spawn attempts on "text file busy" (about 1 s in all).
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the time limit for each invocation.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets how many bytes a plugin may write to stdout.
    pub fn with_stdout_limit(mut self, bytes: usize) -> Self {
        self.stdout_limit = bytes;
        self
    }

    /// Sets how many bytes a plugin may write to stderr.
    pub fn with_stderr_limit(mut self, bytes: usize) -> Self {
        self.stderr_limit = bytes;
        self
    }

    /// Runs plugins through a wrapper command: the command spawned is `launcher... plugin`.
    /// An empty launcher runs plugins directly.
    pub fn with_launcher<I, S>(mut self, launcher: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.launcher = launcher.into_iter().map(Into::into).collect();
        self
    }

    /// Passes the runtime's own variable `name` (when set) through to plugins, besides `PATH`.
    pub fn with_passed_env(mut self, name: impl Into<String>) -> Self {
        self.passed_env.push(name.into());
        self
    }

    /// Sets how often spawning is attempted while the binary is "text file busy" (at least once) and
    /// the first pause, which doubles on each retry up to half a second.
    pub fn with_busy_retries(mut self, attempts: u32, first_backoff: Duration) -> Self {
        self.busy_attempts = attempts.max(1);
        self.busy_backoff = first_backoff;
        self
    }

    /// The time limit for each invocation.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// This crate's error for a run that broke its bounds.
    fn bounds_error(
        &self,
        error: node_primitives::Error,
        plugin: &Path,
        command: Option<&str>,
    ) -> Error {
        let plugin = plugin.to_owned();
        match error {
            node_primitives::Error::Timeout { .. } => Error::Timeout {
                plugin,
                command: command.map(str::to_owned),
                timeout: self.timeout,
            },
            node_primitives::Error::OutputTooLarge { stream, limit } => Error::OutputTooLarge {
                plugin,
                stream: match stream {
                    Stream::Stdout => OutputStream::Stdout,
                    Stream::Stderr => OutputStream::Stderr,
                },
                limit,
            },
            node_primitives::Error::Child { op, source } => Error::Io {
                plugin,
                op: op.as_str(),
                source,
            },
            other => Error::Io {
                plugin,
                op: "running",
                source: other.into_io(),
            },
        }
    }

    fn command(
        &self,
        plugin: &Path,
        env: &[(String, String)],
        cgroup: Option<&PluginCgroup>,
    ) -> Result<Command> {
        for (name, value) in env {
            let reason = if name.is_empty() {
                Some("empty name")
            } else if name.contains('=') {
                Some("name contains '='")
            } else if name.contains('\0') || value.contains('\0') {
                Some("contains NUL")
            } else {
                None
            };
            if let Some(reason) = reason {
                return Err(Error::InvalidEnv {
                    plugin: plugin.to_owned(),
                    name: name.clone(),
                    reason,
                });
            }
        }
        let mut cmd = match self.launcher.split_first() {
            Some((program, args)) => {
                let mut cmd = Command::new(program);
                cmd.args(args).arg(plugin);
                cmd
            }
            None => Command::new(plugin),
        };
        cmd.env_clear();
        let path = std::env::var_os("PATH")
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| DEFAULT_PATH.into());
        cmd.env("PATH", path);
        for name in &self.passed_env {
            if let Some(value) = std::env::var_os(name) {
                cmd.env(name, value);
            }
        }
        cmd.envs(env.iter().map(|(k, v)| (k, v)));
        child::prepare(&mut cmd, true);
        let parent = std::process::id();
        let procs = cgroup.map(PluginCgroup::procs_fd);
        // SAFETY: the closure runs in the child between fork and exec, where only
        // async-signal-safe calls are allowed: prctl(2), getppid(2) and write(2) are plain system
        // calls, and nothing here allocates or takes a lock. The descriptor stays open in the
        // parent (held by `cgroup`) until the spawn has returned.
        unsafe {
            cmd.pre_exec(move || {
                // Into the group first: whatever the plugin starts, even in a session of its
                // own, is then in it too.
                if let Some(procs) = procs {
                    cgroup::join(procs)?;
                }
                die_with_parent(parent)
            });
        }
        Ok(cmd)
    }

    async fn spawn(&self, cmd: &mut Command, plugin: &Path) -> Result<Child> {
        let mut waited = Duration::ZERO;
        let mut backoff = self.busy_backoff;
        let mut attempt = 1;
        loop {
            match cmd.spawn() {
                Ok(child) => return Ok(child),
                Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) => {
                    if attempt >= self.busy_attempts {
                        return Err(Error::TextFileBusy {
                            plugin: plugin.to_owned(),
                            attempts: attempt,
                            waited,
                        });
                    }
                    tracing::debug!(attempt, ?backoff, "plugin binary busy, retrying");
                    tokio::time::sleep(backoff).await;
                    waited += backoff;
                    backoff = (backoff * 2).min(MAX_BUSY_BACKOFF);
                    attempt += 1;
                }
                Err(source) => {
                    let source = if self.launcher.is_empty() {
                        explain_missing(plugin, source)
                    } else {
                        source
                    };
                    return Err(Error::Spawn {
                        plugin: plugin.to_owned(),
                        source,
                    });
                }
            }
        }
    }

    /// Runs the plugin in a cgroup of its own where there is one, and empties and removes the
    /// group however the run ended. If this future is dropped, the group's `Drop` does it.
    async fn run(
        &self,
        plugin: &Path,
        env: &[(String, String)],
        stdin: &[u8],
        command: Option<&str>,
    ) -> Result<PluginOutput> {
        let cgroup = PluginCgroup::create();
        let result = self
            .run_in(plugin, env, stdin, command, cgroup.as_ref())
            .await;
        if let Some(cgroup) = cgroup {
            finish(cgroup, plugin, result.is_ok()).await;
        }
        result
    }

    async fn run_in(
        &self,
        plugin: &Path,
        env: &[(String, String)],
        stdin: &[u8],
        command: Option<&str>,
        cgroup: Option<&PluginCgroup>,
    ) -> Result<PluginOutput> {
        let mut cmd = self.command(plugin, env, cgroup)?;
        let spawned = self.spawn(&mut cmd, plugin).await?;
        let bounds = Bounds {
            stdout: Cap::fail_past(self.stdout_limit),
            stderr: Cap::fail_past(self.stderr_limit),
            timeout: self.timeout,
        };
        let done = child::run(spawned, stdin, &bounds)
            .await
            .map_err(|e| self.bounds_error(e, plugin, command))?;
        let status = done.status;
        if status.success() {
            let stderr_tail = stderr_tail(&done.stderr.bytes);
            if !stderr_tail.is_empty() {
                tracing::debug!(stderr = %one_line(&stderr_tail), "plugin wrote to stderr");
            }
            return Ok(PluginOutput {
                stdout: done.stdout.bytes,
                stderr_tail,
            });
        }
        // A plugin that failed has no business leaving processes behind: what it started in its
        // group (a child still holding a lease or a lock) is killed with it.
        done.kill_group();
        let status = match (status.code(), status.signal()) {
            (Some(code), _) => PluginStatus::Code(code),
            (None, Some(sig)) => PluginStatus::Signal(sig),
            // Neither code nor signal cannot happen on Unix for a reaped child; report it as -1.
            (None, None) => PluginStatus::Code(-1),
        };
        Err(Error::Failed {
            plugin: plugin.to_owned(),
            status,
            stdout: done.stdout.bytes,
            stderr_tail: stderr_tail(&done.stderr.bytes),
        })
    }
}

#[async_trait]
impl Exec for ProcessExec {
    async fn find_plugin(&self, name: &str, dirs: &[PathBuf]) -> Result<PathBuf> {
        // A handful of stat calls: not worth a trip to the blocking pool.
        find_plugin_in(name, dirs)
    }

    async fn exec_plugin(
        &self,
        plugin: &Path,
        env: &[(String, String)],
        stdin: &[u8],
    ) -> Result<PluginOutput> {
        let command = env
            .iter()
            .find(|(k, _)| k == "CNI_COMMAND")
            .map(|(_, v)| v.as_str());
        let span = tracing::debug_span!(
            "cni_plugin",
            plugin = %plugin.display(),
            command = command.unwrap_or(""),
        );
        async move {
            let started = Instant::now();
            let result = self.run(plugin, env, stdin, command).await;
            let elapsed_ms = started.elapsed().as_millis() as u64;
            match &result {
                Ok(out) => {
                    tracing::debug!(
                        elapsed_ms,
                        stdout_len = out.stdout.len(),
                        "plugin succeeded"
                    );
                }
                Err(error) => tracing::debug!(elapsed_ms, %error, "plugin failed"),
            }
            result
        }
        .instrument(span)
        .await
    }
}

/// Kills what is left in a plugin's cgroup and removes the group.
///
/// After a normal exit too: the spec's plugins are one-shot (a DHCP client daemon is started by
/// the node, not by the plugin), so a process a successful plugin left behind answers to nobody,
/// outlives the pod, and would keep its group from being removed. Debian's plugins leave none;
/// one that does is named in a warning.
async fn finish(cgroup: PluginCgroup, plugin: &Path, succeeded: bool) {
    let left = cgroup.finish().await;
    if succeeded && left > 0 {
        tracing::warn!(
            plugin = %plugin.display(),
            processes = left,
            "the plugin exited leaving processes behind: killed them"
        );
    }
}

/// How much of a plugin's first line is read to find its `#!` interpreter (Linux reads 256 bytes).
const SHEBANG_BYTES: u64 = 256;

/// Says what is missing when exec answers "no such file" for a plugin that exists: the
/// interpreter on its `#!` line, or (for a binary) its dynamic loader.
fn explain_missing(plugin: &Path, source: std::io::Error) -> std::io::Error {
    if source.kind() != std::io::ErrorKind::NotFound || !plugin.is_file() {
        return source;
    }
    let message = match shebang_interpreter(plugin) {
        Some(interpreter) if !Path::new(&interpreter).exists() => format!(
            "its interpreter {} (from its #! line) does not exist",
            one_line(&interpreter)
        ),
        _ => "it exists, but the interpreter or dynamic loader it needs does not".to_owned(),
    };
    std::io::Error::new(std::io::ErrorKind::NotFound, message)
}

/// The program named on the `#!` line of the script at `path`, if it is one.
fn shebang_interpreter(path: &Path) -> Option<String> {
    use std::io::Read as _;
    let mut head = Vec::new();
    cni_config::open_regular_file(path)
        .ok()?
        .take(SHEBANG_BYTES)
        .read_to_end(&mut head)
        .ok()?;
    let line = head.strip_prefix(b"#!")?.split(|b| *b == b'\n').next()?;
    let line = String::from_utf8_lossy(line);
    line.split_ascii_whitespace().next().map(str::to_owned)
}

/// In the child before exec: asks for SIGKILL when the runtime dies (a runtime killed with
/// SIGKILL runs no destructor, and its plugin would go on changing the pod's network with nobody
/// to answer to), then checks the runtime did not die before that took effect.
///
/// The signal follows the thread that spawned the plugin; the plugin is spawned from an async
/// task, whose worker thread lives as long as the runtime does. What it cannot reach: a process
/// the plugin starts with `setsid` (outside its process group), which also escapes the group kill;
/// the plugin's cgroup catches it when the run ends or, if the runtime itself was killed, at the
/// next runtime's first plugin run.
fn die_with_parent(parent: u32) -> std::io::Result<()> {
    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)?;
    if u32::try_from(nix::unistd::getppid().as_raw()).ok() != Some(parent) {
        return Err(std::io::Error::other(
            "the runtime died before the plugin started",
        ));
    }
    Ok(())
}

//! [`BuiltinExec`]: the `Exec` seam with the built-in plugins behind it.

use std::fmt;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use cni_exec::{Error as ExecError, Exec, PluginOutput, PluginStatus};

use crate::error::{Error, Result};
use crate::skel::{self, Failure, Outcome};

/// What the pseudo path of a built-in plugin starts with: `builtin:host-local`.
///
/// A relative, single-component path that no plugin directory search produces (those join an
/// absolute directory and the name), so [`BuiltinExec`] can tell its own plugins from binaries.
pub const PSEUDO_PATH_PREFIX: &str = "builtin:";

/// A plugin this crate runs in-process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Builtin {
    /// `host-local` IPAM.
    HostLocal,
    /// `loopback`.
    Loopback,
    /// `bridge` (IPv4; see the crate docs for the options built in so far).
    Bridge,
    /// `portmap`, chained after the plugin that gives the container its addresses.
    Portmap,
}

impl Builtin {
    /// Every built-in plugin.
    pub const ALL: [Builtin; 4] = [
        Builtin::HostLocal,
        Builtin::Loopback,
        Builtin::Bridge,
        Builtin::Portmap,
    ];

    /// Its plugin `type`.
    pub fn name(self) -> &'static str {
        match self {
            Builtin::HostLocal => "host-local",
            Builtin::Loopback => "loopback",
            Builtin::Bridge => "bridge",
            Builtin::Portmap => "portmap",
        }
    }

    /// The built-in plugin of that `type`, if there is one.
    pub fn from_name(name: &str) -> Option<Builtin> {
        Builtin::ALL.into_iter().find(|b| b.name() == name)
    }

    /// Its pseudo path, [`PSEUDO_PATH_PREFIX`] and its name.
    pub fn pseudo_path(self) -> PathBuf {
        PathBuf::from(format!("{PSEUDO_PATH_PREFIX}{}", self.name()))
    }

    /// The built-in plugin `path` is the pseudo path of.
    pub fn from_pseudo_path(path: &Path) -> Option<Builtin> {
        let name = path.to_str()?.strip_prefix(PSEUDO_PATH_PREFIX)?;
        Builtin::from_name(name)
    }
}

/// When a built-in plugin is used instead of a binary of the same name.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Preference {
    /// The binary when a plugin directory has it, else the built-in (`prefer-binary`).
    #[default]
    PreferBinary,
    /// The built-in, whatever the plugin directories hold (`prefer-builtin`).
    PreferBuiltin,
    /// Binaries only, as if there were no built-ins (`never`).
    Never,
}

impl Preference {
    /// The configuration spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Preference::PreferBinary => "prefer-binary",
            Preference::PreferBuiltin => "prefer-builtin",
            Preference::Never => "never",
        }
    }
}

impl fmt::Display for Preference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Preference {
    type Err = Error;

    fn from_str(s: &str) -> Result<Preference> {
        match s {
            "prefer-binary" => Ok(Preference::PreferBinary),
            "prefer-builtin" => Ok(Preference::PreferBuiltin),
            "never" => Ok(Preference::Never),
            _ => Err(Error::InvalidPreference {
                value: s.to_owned(),
            }),
        }
    }
}

/// An [`Exec`] that runs the built-in plugins in-process and everything else through `inner`.
///
/// `find_plugin` answers a built-in plugin's name with its pseudo path
/// ([`Builtin::pseudo_path`], `builtin:<type>`) unless [`Preference::PreferBinary`] finds a
/// binary first or [`Preference::Never`] turns built-ins off. `exec_plugin` on a pseudo path
/// runs the plugin: the same stdout a Go plugin prints, and on failure
/// [`cni_exec::Error::Failed`] with exit code 1 and the spec's error object in `stdout`, as a
/// failing plugin process gives. Any other path goes to `inner`.
///
/// A built-in run is bounded by the timeout ([`cni_exec::DEFAULT_TIMEOUT`] unless set): locks
/// and address searches give up at the deadline, and past it the caller gets
/// [`cni_exec::Error::Timeout`].
#[derive(Clone)]
pub struct BuiltinExec {
    inner: Arc<dyn Exec>,
    preference: Preference,
    timeout: Duration,
}

impl fmt::Debug for BuiltinExec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BuiltinExec")
            .field("preference", &self.preference)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl BuiltinExec {
    /// Built-ins as `preference` says, everything else through `inner`.
    pub fn new(inner: Arc<dyn Exec>, preference: Preference) -> BuiltinExec {
        BuiltinExec {
            inner,
            preference,
            timeout: cni_exec::DEFAULT_TIMEOUT,
        }
    }

    /// Sets how long one built-in run may take.
    pub fn with_timeout(mut self, timeout: Duration) -> BuiltinExec {
        self.timeout = timeout;
        self
    }

    /// The preference it was made with.
    pub fn preference(&self) -> Preference {
        self.preference
    }
}

#[async_trait]
impl Exec for BuiltinExec {
    async fn find_plugin(&self, name: &str, dirs: &[PathBuf]) -> cni_exec::Result<PathBuf> {
        let builtin = match self.preference {
            Preference::Never => None,
            Preference::PreferBinary | Preference::PreferBuiltin => Builtin::from_name(name),
        };
        let Some(builtin) = builtin else {
            return self.inner.find_plugin(name, dirs).await;
        };
        if self.preference == Preference::PreferBinary
            && let Ok(path) = self.inner.find_plugin(name, dirs).await
        {
            return Ok(path);
        }
        Ok(builtin.pseudo_path())
    }

    async fn exec_plugin(
        &self,
        plugin: &Path,
        env: &[(String, String)],
        stdin: &[u8],
    ) -> cni_exec::Result<PluginOutput> {
        let Some(builtin) = Builtin::from_pseudo_path(plugin) else {
            return self.inner.exec_plugin(plugin, env, stdin).await;
        };
        let command = env
            .iter()
            .rev()
            .find(|(k, _)| k == "CNI_COMMAND")
            .map(|(_, v)| v.clone());
        let (env, stdin) = (env.to_vec(), stdin.to_vec());
        let deadline = Instant::now() + self.timeout;
        let (this, handle) = (self.clone(), tokio::runtime::Handle::current());
        // The host side of a plugin (bridge) works in this thread's network namespace; a
        // thread of the blocking pool is made by, and so in the namespace of, the caller's.
        let task = tokio::task::spawn_blocking(move || {
            let delegate = |plugin: &str, command: &str| {
                handle.block_on(this.delegate(plugin, command, &env, &stdin))
            };
            std::panic::catch_unwind(AssertUnwindSafe(|| {
                run(builtin, &env, &stdin, deadline, &delegate)
            }))
        });
        let outcome = match tokio::time::timeout(self.timeout, task).await {
            Err(_) => {
                return Err(ExecError::Timeout {
                    plugin: plugin.to_owned(),
                    command,
                    timeout: self.timeout,
                });
            }
            Ok(Err(join)) => Err(join.to_string()),
            Ok(Ok(Err(_panic))) => Err("the built-in plugin panicked".to_owned()),
            Ok(Ok(Ok(outcome))) => Ok(outcome),
        };
        match outcome {
            Ok(Ok(out)) => Ok(PluginOutput {
                stdout: out.stdout,
                stderr_tail: out.stderr,
            }),
            Ok(Err(failure)) => Err(failed(plugin, &failure)),
            Err(reason) => Err(failed(plugin, &Failure::internal(reason))),
        }
    }
}

impl BuiltinExec {
    /// Runs a delegated plugin (a bridge's IPAM) as libcni's `invoke.DelegateAdd` does: found in
    /// `CNI_PATH`, the same variables with `CNI_COMMAND` set, the same stdin; its error object
    /// passed on as it is.
    async fn delegate(
        &self,
        plugin: &str,
        command: &str,
        env: &[(String, String)],
        stdin: &[u8],
    ) -> std::result::Result<Vec<u8>, Failure> {
        let path = env
            .iter()
            .rev()
            .find(|(k, _)| k == "CNI_PATH")
            .map_or("", |(_, v)| v.as_str());
        let dirs: Vec<PathBuf> = path
            .split(':')
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .collect();
        // A built-in bridge as its own IPAM plugin would recurse until the deadline.
        if Builtin::from_name(plugin) == Some(Builtin::Bridge)
            && self.preference != Preference::Never
        {
            return Err(Failure::internal(
                "the built-in bridge cannot be an IPAM plugin",
            ));
        }
        let found = self.find_plugin(plugin, &dirs).await.map_err(|_| {
            let listed: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
            Failure::internal(format!(
                "failed to find plugin {} in path [{}]",
                crate::gojson::quote(plugin),
                listed.join(" ")
            ))
        })?;
        let mut env = env.to_vec();
        env.retain(|(k, _)| k != "CNI_COMMAND");
        env.push(("CNI_COMMAND".to_owned(), command.to_owned()));
        match self.exec_plugin(&found, &env, stdin).await {
            Ok(out) => Ok(out.stdout),
            Err(ExecError::Failed { stdout, .. }) => Err(Failure::from_stdout(&stdout)),
            Err(other) => Err(Failure::internal(other.to_string())),
        }
    }
}

fn failed(plugin: &Path, failure: &Failure) -> ExecError {
    ExecError::Failed {
        plugin: plugin.to_owned(),
        status: PluginStatus::Code(1),
        stdout: failure.to_stdout(),
        stderr_tail: String::new(),
    }
}

/// One run of a built-in: the skeleton, then the plugin's command.
fn run(
    builtin: Builtin,
    env: &[(String, String)],
    stdin: &[u8],
    deadline: Instant,
    delegate: crate::bridge::Delegate<'_>,
) -> std::result::Result<Outcome, Failure> {
    let about = format!(
        "CNI {} plugin (built in)\nCNI protocol versions supported: {}",
        builtin.name(),
        skel::VERSIONS.join(", ")
    );
    let args = match skel::prepare(env, stdin, &about)? {
        Ok(args) => args,
        Err(done) => return Ok(done),
    };
    let stdout = match builtin {
        Builtin::HostLocal => crate::host_local::run(&args, deadline)?,
        Builtin::Loopback => crate::loopback::run(&args)?,
        Builtin::Bridge => crate::bridge::run(&args, delegate, deadline)?,
        Builtin::Portmap => crate::portmap::run(&args, deadline)?,
    };
    Ok(Outcome {
        stdout,
        stderr: String::new(),
    })
}

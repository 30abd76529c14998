//! The crate's error type.

use std::fmt::{self, Write as _};
use std::io;
use std::path::PathBuf;
use std::time::Duration;

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// How much of a plugin's stderr an error keeps: the last 4 KiB, enough for a Go panic's first frames.
pub const STDERR_TAIL_BYTES: usize = 4096;

/// How much of a failed plugin's stdout goes into the error *message* (the full bytes stay in the variant).
const STDOUT_IN_MESSAGE_BYTES: usize = 1024;

/// Everything that can go wrong while finding or running a plugin.
///
/// Messages name the plugin and say what happened. The enum is `#[non_exhaustive]`: the CNI operations
/// built on top of the process layer add their own variants.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A plugin name that cannot be a plain file name (empty, `.`, `..`, containing `/` or NUL).
    #[error("invalid plugin name {name:?}: {reason}")]
    InvalidPluginName {
        /// The name as given.
        name: String,
        /// Why it was rejected.
        reason: &'static str,
    },

    /// No plugin directory holds an executable regular file of that name.
    #[error("{}", not_found_message(name, dirs, skipped))]
    PluginNotFound {
        /// The plugin name looked for.
        name: String,
        /// Every directory searched, in order.
        dirs: Vec<PathBuf>,
        /// Candidates that exist but were passed over, with the reason (a directory, not executable, ...).
        skipped: Vec<(PathBuf, String)>,
    },

    /// An environment variable the caller passed cannot be put in a process environment.
    #[error("invalid environment variable {name:?} for plugin {}: {reason}", plugin.display())]
    InvalidEnv {
        /// The plugin that was about to run.
        plugin: PathBuf,
        /// The variable name.
        name: String,
        /// Why it was rejected.
        reason: &'static str,
    },

    /// The plugin (or the launcher in front of it) could not be started.
    #[error("cannot start plugin {}: {source}", plugin.display())]
    Spawn {
        /// The plugin that was to run.
        plugin: PathBuf,
        /// The error from the operating system.
        #[source]
        source: io::Error,
    },

    /// Starting the plugin kept failing with "text file busy": its binary is being written.
    #[error(
        "cannot start plugin {}: text file busy on {attempts} attempts over {waited:?} \
         (is the binary being replaced?)",
        plugin.display()
    )]
    TextFileBusy {
        /// The plugin that was to run.
        plugin: PathBuf,
        /// How many times spawning was tried.
        attempts: u32,
        /// How long the retries waited in total.
        waited: Duration,
    },

    /// The plugin did not finish in time; its whole process group was killed.
    #[error("plugin {}{} timed out after {timeout:?}; its process group was killed",
        plugin.display(), command_suffix(command.as_deref()))]
    Timeout {
        /// The plugin that ran.
        plugin: PathBuf,
        /// Its `CNI_COMMAND`, when the caller set one.
        command: Option<String>,
        /// The limit that was reached.
        timeout: Duration,
    },

    /// The plugin wrote more than allowed to stdout or stderr; its whole process group was killed.
    #[error("plugin {} wrote more than {limit} bytes to {stream}; its process group was killed",
        plugin.display())]
    OutputTooLarge {
        /// The plugin that ran.
        plugin: PathBuf,
        /// Which stream overflowed.
        stream: OutputStream,
        /// The limit in bytes.
        limit: usize,
    },

    /// Talking to the plugin's pipes or waiting for it failed.
    #[error("i/o error while {op} plugin {}: {source}", plugin.display())]
    Io {
        /// The plugin that ran.
        plugin: PathBuf,
        /// What was being done, e.g. "writing stdin of".
        op: &'static str,
        /// The underlying error.
        #[source]
        source: io::Error,
    },

    /// The plugin exited with a non-zero code or was killed by a signal.
    ///
    /// A plugin that follows the spec prints its error object on stdout: the layer above parses
    /// `stdout` into a typed CNI error.
    #[error("{}", failed_message(plugin, *status, stdout, stderr_tail))]
    Failed {
        /// The plugin that ran.
        plugin: PathBuf,
        /// How it ended.
        status: PluginStatus,
        /// Everything it wrote to stdout (bounded by the output limit).
        stdout: Vec<u8>,
        /// The last [`STDERR_TAIL_BYTES`] of its stderr, lossily decoded and trimmed.
        stderr_tail: String,
    },
}

/// Which output stream of a plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputStream {
    /// Standard output: the result or the spec error object.
    Stdout,
    /// Standard error: free-form diagnostics.
    Stderr,
}

impl fmt::Display for OutputStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Stdout => "stdout",
            Self::Stderr => "stderr",
        })
    }
}

/// How a plugin that did not succeed ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PluginStatus {
    /// It exited with this non-zero code.
    Code(i32),
    /// It was killed by this signal number.
    Signal(i32),
}

impl fmt::Display for PluginStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Code(code) => write!(f, "exit code {code}"),
            Self::Signal(sig) => match nix::sys::signal::Signal::try_from(sig) {
                Ok(name) => write!(f, "signal {sig} ({name})"),
                Err(_) => write!(f, "signal {sig}"),
            },
        }
    }
}

/// The last `STDERR_TAIL_BYTES` of `stderr`, decoded lossily and trimmed.
pub(crate) fn stderr_tail(stderr: &[u8]) -> String {
    let start = stderr.len().saturating_sub(STDERR_TAIL_BYTES);
    String::from_utf8_lossy(&stderr[start..]).trim().to_owned()
}

fn command_suffix(command: Option<&str>) -> String {
    command.map_or_else(String::new, |c| format!(" ({c})"))
}

fn not_found_message(name: &str, dirs: &[PathBuf], skipped: &[(PathBuf, String)]) -> String {
    let mut msg = if dirs.is_empty() {
        format!("plugin {name:?} not found: no plugin directories configured")
    } else {
        let list: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
        format!("plugin {name:?} not found in {}", list.join(", "))
    };
    for (path, why) in skipped {
        let _ = write!(msg, "; skipped {}: {why}", path.display());
    }
    msg
}

fn failed_message(
    plugin: &std::path::Path,
    status: PluginStatus,
    stdout: &[u8],
    stderr_tail: &str,
) -> String {
    let mut msg = format!("plugin {} failed with {status}", plugin.display());
    let end = stdout.len().min(STDOUT_IN_MESSAGE_BYTES);
    let out = String::from_utf8_lossy(&stdout[..end]);
    let out = out.trim();
    if !out.is_empty() {
        msg.push_str("; stdout: ");
        msg.push_str(out);
        if stdout.len() > end {
            msg.push_str("...");
        }
    }
    if !stderr_tail.is_empty() {
        msg.push_str("; stderr: ");
        msg.push_str(stderr_tail);
    }
    msg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stderr_tail_keeps_the_end_and_trims() {
        let mut long = vec![b'a'; STDERR_TAIL_BYTES * 2];
        long.extend_from_slice(b"the end\n\n");
        let tail = stderr_tail(&long);
        assert!(tail.ends_with("the end"));
        assert!(tail.len() <= STDERR_TAIL_BYTES);
        assert_eq!(stderr_tail(b"  \n"), "");
    }

    #[test]
    fn status_names_the_signal() {
        assert_eq!(PluginStatus::Signal(9).to_string(), "signal 9 (SIGKILL)");
        assert_eq!(PluginStatus::Code(3).to_string(), "exit code 3");
    }

    #[test]
    fn failed_message_has_stdout_and_stderr() {
        let e = Error::Failed {
            plugin: "/opt/cni/bin/bridge".into(),
            status: PluginStatus::Code(1),
            stdout: br#"{"code":7}"#.to_vec(),
            stderr_tail: "boom".into(),
        };
        assert_eq!(
            e.to_string(),
            r#"plugin /opt/cni/bin/bridge failed with exit code 1; stdout: {"code":7}; stderr: boom"#
        );
    }

    #[test]
    fn not_found_lists_every_dir() {
        let e = Error::PluginNotFound {
            name: "bridge".into(),
            dirs: vec!["/a".into(), "/b".into()],
            skipped: vec![("/a/bridge".into(), "not executable".into())],
        };
        assert_eq!(
            e.to_string(),
            r#"plugin "bridge" not found in /a, /b; skipped /a/bridge: not executable"#
        );
    }
}

//! The crate's error type.

use std::borrow::Cow;
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

    /// A plugin failed and said why with the spec's error object (`code`, `msg`, `details`).
    #[error(
        "plugin {plugin:?} failed ({command}){}{}: {}{}",
        network_suffix(network),
        container_suffix(container_id),
        one_line(&error.to_string()),
        stderr_suffix(stderr_tail)
    )]
    Plugin {
        /// The plugin's `type`.
        plugin: String,
        /// The CNI command: `ADD`, `DEL`, `CHECK`, `STATUS`, `GC` or `VERSION`.
        command: &'static str,
        /// The network (configuration list name); empty for VERSION, which asks a plugin binary
        /// and not a network (the message then names none).
        network: String,
        /// The container; empty for commands without one.
        container_id: String,
        /// The error object the plugin printed.
        error: Box<cni_types::CniError>,
        /// The last [`STDERR_TAIL_BYTES`] of its stderr.
        stderr_tail: String,
    },

    /// A plugin could not be run to completion or failed without the spec's error object: it was
    /// not found, did not start, timed out, died by a signal or exited non-zero printing something
    /// else. `source` (usually [`Error::Failed`]) holds the status and the tail of its stderr.
    #[error(
        "plugin {plugin:?} ({command}){}{}: {source}",
        network_suffix(network),
        container_suffix(container_id)
    )]
    PluginExec {
        /// The plugin's `type`.
        plugin: String,
        /// The CNI command.
        command: &'static str,
        /// The network; empty for VERSION (the message then names none).
        network: String,
        /// The container; empty for commands without one.
        container_id: String,
        /// What went wrong at the process level.
        #[source]
        source: Box<Error>,
    },

    /// A plugin exited with 0 but printed something that is not a valid result for the network's
    /// version (or, for VERSION, not a VERSION answer).
    #[error(
        "plugin {plugin:?} ({command}){} printed an invalid result: {}{}",
        network_suffix(network),
        one_line(reason),
        stderr_suffix(stderr_tail)
    )]
    InvalidResult {
        /// The plugin's `type`.
        plugin: String,
        /// The CNI command.
        command: &'static str,
        /// The network; empty for VERSION (the message then names none).
        network: String,
        /// Why the output was rejected.
        reason: String,
        /// The last [`STDERR_TAIL_BYTES`] of its stderr.
        stderr_tail: String,
    },

    /// CHECK was asked for a network whose version predates it (CHECK exists since 0.4.0).
    #[error(
        "network {network:?} has version {version}, which does not support the CHECK command (0.4.0 or later needed)"
    )]
    CheckNotSupported {
        /// The network.
        network: String,
        /// Its version.
        version: cni_types::Version,
    },

    /// CHECK needs the result of the earlier ADD, and the cache has none.
    #[error(
        "no cached result for network {network:?}, container {container_id}, interface {if_name} (was it added?)"
    )]
    NoCachedResult {
        /// The network.
        network: String,
        /// The container.
        container_id: String,
        /// The interface.
        if_name: String,
    },

    /// A plugin does not accept the network's version, according to its VERSION answer.
    ///
    /// Only found inside [`Error::Validation`], which names the network: the message does not.
    #[error("plugin {plugin:?} does not support the network's version {version} (it supports: {})",
        supported.join(", "))]
    UnsupportedVersion {
        /// The plugin's `type`.
        plugin: String,
        /// The network.
        network: String,
        /// The network's version.
        version: cni_types::Version,
        /// What the plugin said it supports.
        supported: Vec<String>,
    },

    /// Validating a network found problems; every one is listed.
    #[error("network {network:?} is not usable: {}", join_errors(errors))]
    Validation {
        /// The network.
        network: String,
        /// Every problem found, in plugin order.
        errors: Vec<Error>,
    },

    /// Garbage collection ran to the end but some steps failed; every failure is listed.
    #[error(
        "garbage collection of network {network:?} failed: {}",
        join_errors(errors)
    )]
    Gc {
        /// The network.
        network: String,
        /// Every failed step (stale attachment DELs, then plugin GCs).
        errors: Vec<Error>,
    },

    /// A runtime configuration field breaks libcni's rules; nothing was run.
    #[error("invalid runtime config: {field} {value:?}: {reason}")]
    InvalidRuntimeConf {
        /// The field: `container_id`, `if_name`, `netns`, `args` or `network`.
        field: &'static str,
        /// The value as given.
        value: String,
        /// What is wrong with it.
        reason: String,
    },

    /// Reading, writing or removing the result cache failed.
    #[error("result cache {}: cannot {op}: {source}", path.display())]
    Cache {
        /// The file or directory.
        path: PathBuf,
        /// What was being done, e.g. "write".
        op: &'static str,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },

    /// A network configuration (for example one read back from the cache) does not parse.
    #[error("network {network:?}: {source}")]
    Config {
        /// The network.
        network: String,
        /// The parser's error.
        #[source]
        source: cni_config::Error,
    },

    /// A result or argument cannot be encoded, decoded or converted as the network's version needs.
    #[error("network {network:?}: {what}: {source}")]
    Types {
        /// The network.
        network: String,
        /// What was being done, e.g. "cached result".
        what: &'static str,
        /// The error from cni-types.
        #[source]
        source: cni_types::Error,
    },
}

fn network_suffix(network: &str) -> String {
    if network.is_empty() {
        String::new()
    } else {
        format!(" on network {network:?}")
    }
}

fn container_suffix(container_id: &str) -> String {
    if container_id.is_empty() {
        String::new()
    } else {
        format!(", container {container_id}")
    }
}

fn stderr_suffix(tail: &str) -> String {
    if tail.is_empty() {
        String::new()
    } else {
        format!("; stderr: {}", one_line(tail))
    }
}

fn join_errors(errors: &[Error]) -> String {
    let parts: Vec<String> = errors.iter().map(ToString::to_string).collect();
    parts.join("; ")
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

/// Plugin output made safe for one line of a message or a log: control characters other than tab
/// (line breaks above all, and terminal escapes) and the Unicode line and paragraph separators
/// become Rust escapes (`\n`, `\r`, `\u{1b}`), so a plugin cannot start a log line of its own.
pub(crate) fn one_line(text: &str) -> Cow<'_, str> {
    fn unsafe_char(c: char) -> bool {
        (c.is_control() && c != '\t') || matches!(c, '\u{2028}' | '\u{2029}')
    }
    if !text.chars().any(unsafe_char) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if unsafe_char(c) {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
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
        msg.push_str(&one_line(out));
        if stdout.len() > end {
            msg.push_str("...");
        }
    }
    if !stderr_tail.is_empty() {
        msg.push_str("; stderr: ");
        msg.push_str(&one_line(stderr_tail));
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
    fn plugin_output_stays_on_one_line() {
        assert!(matches!(
            one_line("plain\ttext"),
            Cow::Borrowed("plain\ttext")
        ));
        assert_eq!(
            one_line("a\nb\r\u{1b}[0m\u{0}\u{85}\u{2028}é"),
            r"a\nb\r\u{1b}[0m\0\u{85}\u{2028}é"
        );
        let e = Error::Failed {
            plugin: "/p".into(),
            status: PluginStatus::Code(1),
            stdout: b"x\ny".to_vec(),
            stderr_tail: "1\n2".into(),
        };
        assert_eq!(
            e.to_string(),
            r"plugin /p failed with exit code 1; stdout: x\ny; stderr: 1\n2"
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

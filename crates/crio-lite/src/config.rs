//! The daemon's configuration: a TOML file, command-line flags over it, and the commented printout.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use ocicni::CniArgsPolicy;

use crate::error::{Error, Result};

/// Where `crio-lite` looks for its configuration when `--config` is not given.
pub const DEFAULT_CONFIG_PATH: &str = "/etc/crio-lite/crio-lite.conf";

/// Everything the daemon can be told. Every key is optional in the file; missing keys keep their
/// defaults, unknown keys are errors.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// The `[daemon]` table: sockets, directories, logging.
    pub daemon: DaemonConfig,
    /// The `[network]` table: what the CNI side is built from.
    pub network: NetworkConfig,
}

/// The `[daemon]` table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DaemonConfig {
    /// The unix socket serving CRI (gRPC) and the HTTP status API.
    pub socket: PathBuf,
    /// Where sandbox state files live (one JSON file per sandbox).
    pub state_dir: PathBuf,
    /// Runtime files; network namespaces are pinned under `<run_dir>/netns`.
    pub run_dir: PathBuf,
    /// A tracing filter: a level (`info`) or directives (`crio_lite=debug,ocicni=trace`).
    pub log_level: String,
    /// Whether an HTTP/2 `:authority` that is not a valid authority (the socket path older Go gRPC
    /// clients such as crictl < 1.31 send) is replaced by `localhost` before the HTTP/2 server
    /// sees it. Off, such clients get PROTOCOL_ERROR on every call; off only to measure its cost.
    pub normalize_authority: bool,
}

impl Default for DaemonConfig {
    fn default() -> Self {
        DaemonConfig {
            socket: PathBuf::from("/var/run/crio-lite/crio-lite.sock"),
            state_dir: PathBuf::from("/var/lib/crio-lite"),
            run_dir: PathBuf::from("/var/run/crio-lite"),
            log_level: "info".to_owned(),
            normalize_authority: true,
        }
    }
}

/// The `[network]` table: handed to ocicni as it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NetworkConfig {
    /// The directory of CNI network configuration files.
    pub network_dir: PathBuf,
    /// Directories searched for plugin binaries, in order.
    pub plugin_dirs: Vec<PathBuf>,
    /// Where CNI results are cached (shared with other libcni users on the node).
    pub cache_dir: PathBuf,
    /// Pod locks and set-ups in progress (shared with other ocicni users, such as ocicnitool).
    pub cni_run_dir: PathBuf,
    /// The network pods get; `None` picks the first configuration in `network_dir` by name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_network: Option<String>,
    /// How long one plugin may run before it is killed.
    #[serde(
        serialize_with = "serialize_duration",
        deserialize_with = "deserialize_duration"
    )]
    pub plugin_timeout: Duration,
    /// Which CNI_ARGS plugins get.
    pub cni_args_policy: CniArgsPolicy,
    /// Whether ocicni provides a built-in default network when `network_dir` has none.
    pub builtin_default_network: bool,
}

impl Default for NetworkConfig {
    fn default() -> Self {
        NetworkConfig {
            network_dir: PathBuf::from("/etc/cni/net.d"),
            plugin_dirs: vec![PathBuf::from("/opt/cni/bin"), PathBuf::from("/usr/lib/cni")],
            cache_dir: PathBuf::from("/var/lib/cni"),
            cni_run_dir: PathBuf::from(ocicni::DEFAULT_RUN_DIR),
            default_network: None,
            plugin_timeout: Duration::from_secs(60),
            cni_args_policy: CniArgsPolicy::Kubernetes,
            builtin_default_network: true,
        }
    }
}

/// ocicni's policy names as clap's possible values, so help and completions list them.
fn cni_args_policy_parser() -> impl clap::builder::TypedValueParser<Value = CniArgsPolicy> {
    use clap::builder::TypedValueParser as _;
    clap::builder::PossibleValuesParser::new(["kubernetes", "plain"])
        .try_map(|name| name.parse::<CniArgsPolicy>())
}

/// Command-line flags that override the file, one per key.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Overrides {
    /// The unix socket to serve on (daemon.socket).
    #[arg(long, value_name = "PATH", global = true)]
    pub socket: Option<PathBuf>,
    /// The state directory (daemon.state_dir).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// The run directory (daemon.run_dir).
    #[arg(long, value_name = "DIR")]
    pub run_dir: Option<PathBuf>,
    /// The log filter (daemon.log_level); RUST_LOG wins over both.
    #[arg(long, value_name = "FILTER")]
    pub log_level: Option<String>,
    /// The CNI configuration directory (network.network_dir).
    #[arg(long, value_name = "DIR")]
    pub network_dir: Option<PathBuf>,
    /// A plugin directory (network.plugin_dirs); repeat for several, replaces the file's list.
    #[arg(long = "plugin-dir", value_name = "DIR")]
    pub plugin_dirs: Vec<PathBuf>,
    /// The CNI cache directory (network.cache_dir).
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// The directory of pod locks and set-ups in progress (network.cni_run_dir).
    #[arg(long, value_name = "DIR")]
    pub cni_run_dir: Option<PathBuf>,
    /// The default network (network.default_network).
    #[arg(long, value_name = "NAME")]
    pub default_network: Option<String>,
    /// The plugin timeout, such as `30s` or `500ms` (network.plugin_timeout).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub plugin_timeout: Option<Duration>,
    /// The CNI_ARGS policy (network.cni_args_policy).
    #[arg(long, value_name = "POLICY", value_parser = cni_args_policy_parser())]
    pub cni_args_policy: Option<CniArgsPolicy>,
    /// Whether the built-in default network is on (network.builtin_default_network).
    #[arg(long, value_name = "BOOL")]
    pub builtin_default_network: Option<bool>,
}

impl Overrides {
    /// Writes every flag that was given over `config`.
    pub fn apply(&self, config: &mut Config) {
        let d = &mut config.daemon;
        let n = &mut config.network;
        set(&mut d.socket, self.socket.as_ref());
        set(&mut d.state_dir, self.state_dir.as_ref());
        set(&mut d.run_dir, self.run_dir.as_ref());
        set(&mut d.log_level, self.log_level.as_ref());
        set(&mut n.network_dir, self.network_dir.as_ref());
        if !self.plugin_dirs.is_empty() {
            n.plugin_dirs.clone_from(&self.plugin_dirs);
        }
        set(&mut n.cache_dir, self.cache_dir.as_ref());
        set(&mut n.cni_run_dir, self.cni_run_dir.as_ref());
        if let Some(name) = &self.default_network {
            n.default_network = Some(name.clone()).filter(|name| !name.is_empty());
        }
        set(&mut n.plugin_timeout, self.plugin_timeout.as_ref());
        set(&mut n.cni_args_policy, self.cni_args_policy.as_ref());
        set(
            &mut n.builtin_default_network,
            self.builtin_default_network.as_ref(),
        );
    }
}

fn set<T: Clone>(slot: &mut T, value: Option<&T>) {
    if let Some(value) = value {
        slot.clone_from(value);
    }
}

impl Config {
    /// Parses a configuration; `origin` names it in errors (a path, or `<string>`).
    ///
    /// ```
    /// use crio_lite::Config;
    ///
    /// let config = Config::from_toml("[network]\nplugin_timeout = \"5s\"\n", "<string>")?;
    /// assert_eq!(config.network.plugin_timeout.as_secs(), 5);
    ///
    /// let err = Config::from_toml("[network]\nplugin_dir = []\n", "<string>").unwrap_err();
    /// assert!(err.to_string().contains("unknown field `plugin_dir`"));
    /// # Ok::<(), crio_lite::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::ParseConfig`] for bad TOML, unknown keys and values of the wrong type (the message
    /// names the key and shows the line); [`Error::InvalidConfig`] for values that parse but cannot
    /// be used.
    pub fn from_toml(text: &str, origin: &str) -> Result<Config> {
        let config: Config = toml::from_str(text).map_err(|source| Error::ParseConfig {
            origin: origin.to_owned(),
            source: Box::new(source),
        })?;
        config.validate()?;
        Ok(config)
    }

    /// Reads and parses a configuration file.
    ///
    /// # Errors
    ///
    /// [`Error::ReadConfig`] when the file cannot be read, and the errors of [`Config::from_toml`].
    pub fn from_file(path: &Path) -> Result<Config> {
        let bytes =
            ocicni::cni_config::read_regular_file(path, ocicni::cni_config::MAX_CONFIG_BYTES)
                .map_err(|source| Error::ReadConfig {
                    path: path.to_owned(),
                    source,
                })?;
        let text = String::from_utf8(bytes).map_err(|e| Error::ReadConfig {
            path: path.to_owned(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
        })?;
        Config::from_toml(&text, &path.display().to_string())
    }

    /// The configuration a daemon runs with: `path` if given (it must exist), otherwise
    /// [`DEFAULT_CONFIG_PATH`] if it exists, otherwise the defaults; then the flags over it.
    ///
    /// # Errors
    ///
    /// The errors of [`Config::from_file`], and [`Error::InvalidConfig`] when the flags make the
    /// configuration unusable.
    pub fn load(path: Option<&Path>, overrides: &Overrides) -> Result<Config> {
        let mut config = match path {
            Some(path) => Config::from_file(path)?,
            None if Path::new(DEFAULT_CONFIG_PATH).exists() => {
                Config::from_file(Path::new(DEFAULT_CONFIG_PATH))?
            }
            None => Config::default(),
        };
        overrides.apply(&mut config);
        config.validate()?;
        Ok(config)
    }

    /// Checks what serde cannot.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] naming the first key at fault.
    pub fn validate(&self) -> Result<()> {
        let invalid = |key: &str, reason: &str| {
            Err(Error::InvalidConfig {
                key: key.to_owned(),
                reason: reason.to_owned(),
            })
        };
        let paths = [
            ("daemon.socket", &self.daemon.socket),
            ("daemon.state_dir", &self.daemon.state_dir),
            ("daemon.run_dir", &self.daemon.run_dir),
            ("network.network_dir", &self.network.network_dir),
            ("network.cache_dir", &self.network.cache_dir),
            ("network.cni_run_dir", &self.network.cni_run_dir),
        ];
        for (key, path) in paths {
            if path.as_os_str().is_empty() {
                return invalid(key, "must not be empty");
            }
        }
        if self.network.plugin_dirs.is_empty() {
            return invalid("network.plugin_dirs", "must name at least one directory");
        }
        if self.network.plugin_timeout.is_zero() {
            return invalid("network.plugin_timeout", "must be longer than zero");
        }
        if self.network.default_network.as_deref() == Some("") {
            return invalid(
                "network.default_network",
                "must not be empty; leave it out instead",
            );
        }
        if self.daemon.log_level.trim().is_empty() {
            return invalid("daemon.log_level", "must not be empty");
        }
        Ok(())
    }

    /// Where sandbox network namespaces are pinned.
    pub fn netns_dir(&self) -> PathBuf {
        self.daemon.run_dir.join("netns")
    }

    /// The configuration as TOML with a comment over every key, as `crio-lite config` prints it.
    /// It parses back to the same configuration.
    pub fn to_commented_toml(&self) -> String {
        let d = &self.daemon;
        let n = &self.network;
        let mut out = String::new();
        out.push_str(
            "# crio-lite configuration. Every key is optional: a missing key keeps its default.\n\
             # Command-line flags override this file; RUST_LOG overrides log_level.\n\n",
        );
        out.push_str("[daemon]\n");
        key(
            &mut out,
            "The unix socket serving CRI (gRPC) and the HTTP status API (mode 0660).",
            "socket",
            &path_value(&d.socket),
        );
        key(
            &mut out,
            "Sandbox state files, one JSON file per sandbox.",
            "state_dir",
            &path_value(&d.state_dir),
        );
        key(
            &mut out,
            "Runtime files; network namespaces are pinned under <run_dir>/netns.",
            "run_dir",
            &path_value(&d.run_dir),
        );
        key(
            &mut out,
            "A tracing filter: a level or directives such as \"crio_lite=debug\".",
            "log_level",
            &string_value(&d.log_level),
        );
        key(
            &mut out,
            "Replace an invalid HTTP/2 :authority (the socket path crictl < 1.31 sends) by localhost.",
            "normalize_authority",
            &d.normalize_authority.to_string(),
        );
        out.push_str("\n[network]\n");
        key(
            &mut out,
            "The directory of CNI network configuration files.",
            "network_dir",
            &path_value(&n.network_dir),
        );
        let dirs: Vec<String> = n.plugin_dirs.iter().map(|p| path_value(p)).collect();
        key(
            &mut out,
            "Directories searched for CNI plugin binaries, in order.",
            "plugin_dirs",
            &format!("[{}]", dirs.join(", ")),
        );
        key(
            &mut out,
            "Where CNI results are cached.",
            "cache_dir",
            &path_value(&n.cache_dir),
        );
        key(
            &mut out,
            "Pod locks and set-ups in progress; every ocicni user on the node must share it.",
            "cni_run_dir",
            &path_value(&n.cni_run_dir),
        );
        let _ = writeln!(
            out,
            "# The network pods are attached to. When absent, the first configuration in\n\
             # network_dir (by file name) is used."
        );
        match &n.default_network {
            Some(name) => {
                let _ = writeln!(out, "default_network = {}\n", string_value(name));
            }
            None => out.push_str("# default_network = \"\"\n\n"),
        }
        key(
            &mut out,
            "How long one plugin may run before it is killed (\"500ms\", \"60s\", \"2m\").",
            "plugin_timeout",
            &string_value(&format_duration(n.plugin_timeout)),
        );
        key(
            &mut out,
            "CNI_ARGS given to plugins: \"kubernetes\" (K8S_POD_* as CRI-O passes them) or \"plain\".",
            "cni_args_policy",
            &string_value(n.cni_args_policy.as_str()),
        );
        key(
            &mut out,
            "Whether a built-in default network is used when network_dir has none.",
            "builtin_default_network",
            &n.builtin_default_network.to_string(),
        );
        out.truncate(out.trim_end().len());
        out.push('\n');
        out
    }
}

fn key(out: &mut String, comment: &str, name: &str, value: &str) {
    let _ = writeln!(out, "# {comment}\n{name} = {value}\n");
}

fn string_value(s: &str) -> String {
    toml::Value::String(s.to_owned()).to_string()
}

fn path_value(p: &Path) -> String {
    string_value(&p.to_string_lossy())
}

/// Parses a duration such as `500ms`, `60s`, `2m` or `1h`; a bare number is seconds.
///
/// # Errors
///
/// A message naming the accepted units when the text is not such a duration.
pub fn parse_duration(text: &str) -> std::result::Result<Duration, String> {
    ocicni::duration::parse(text).map_err(|why| format!("invalid duration {text:?}: {why}"))
}

/// Formats a duration the way [`parse_duration`] reads it.
pub fn format_duration(duration: Duration) -> String {
    ocicni::duration::format(duration)
}

fn serialize_duration<S: Serializer>(d: &Duration, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(&format_duration(*d))
}

fn deserialize_duration<'de, D: Deserializer<'de>>(
    d: D,
) -> std::result::Result<Duration, D::Error> {
    let text = String::deserialize(d)?;
    parse_duration(&text).map_err(serde::de::Error::custom)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_round_trip() {
        for (text, millis) in [
            ("500ms", 500),
            ("60s", 60_000),
            ("2m", 120_000),
            ("1h", 3_600_000),
            ("7", 7000),
            // One syntax with ocicnitool's --timeout (ocicni::duration): decimals are fine.
            ("1.5s", 1500),
        ] {
            assert_eq!(
                parse_duration(text),
                Ok(Duration::from_millis(millis)),
                "{text}"
            );
        }
        assert_eq!(format_duration(Duration::from_millis(1500)), "1500ms");
        assert_eq!(format_duration(Duration::from_secs(60)), "60s");
        for bad in ["", "s", "1d", "-1s", "1.5.1s", "99999999999999999999h"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn empty_file_is_the_defaults() {
        assert_eq!(
            Config::from_toml("", "<string>").ok(),
            Some(Config::default())
        );
    }

    #[test]
    fn set_default_network_prints_and_parses_back() {
        let mut config = Config::default();
        config.network.default_network = Some("pod \"net\"".to_owned());
        config.network.plugin_timeout = Duration::from_millis(250);
        let text = config.to_commented_toml();
        assert_eq!(
            Config::from_toml(&text, "<string>").ok(),
            Some(config),
            "{text}"
        );
    }

    #[test]
    fn zero_timeout_is_rejected_with_its_key() {
        let err =
            Config::from_toml("[network]\nplugin_timeout = \"0s\"\n", "<string>").unwrap_err();
        assert!(err.to_string().contains("network.plugin_timeout"), "{err}");
    }
}

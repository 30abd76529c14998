//! The daemon's configuration, laid out as CRI-O's.
//!
//! A main file ([`DEFAULT_CONFIG_PATH`]) and a drop-in directory ([`DEFAULT_CONFIG_DIR`]) whose
//! `*.conf` files are read in lexical order, each key of a later file replacing the same key of an
//! earlier one (per key, not per table, as `crio.conf.d` works). `CONTAINER_*` environment
//! variables override the files and flags override both; [`Loader`] does the layering and
//! [`Config::to_commented_toml`] prints the result.
//!
//! Tables and keys are CRI-O's where CRI-O has the option (`[crio] root`, `[crio.api] listen`,
//! `[crio.network] network_dir`, ...); options of crio-lite's own live under `[crio_lite.*]`, in
//! the table named like the CRI-O table they sit next to. [`KEYS`] lists every key with its flag
//! and environment variable.

mod flags;
mod issue;
mod keys;
mod load;
mod print;
mod suggest;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use ocicni::{CniArgsPolicy, Preference};

use crate::error::{Error, Result};

pub use flags::{Overrides, parse_bool, path_or_empty};
pub use issue::{ConfigIssue, IssueKind, Origin};
pub use keys::{KEYS, Key};
pub use load::{Loaded, Loader};

/// The main configuration file read when `--config` is not given (and it exists).
pub const DEFAULT_CONFIG_PATH: &str = "/etc/crio-lite/crio-lite.conf";

/// The drop-in directory read when `--config-dir` is not given (and it exists).
pub const DEFAULT_CONFIG_DIR: &str = "/etc/crio-lite/crio-lite.conf.d";

/// Everything the daemon can be told. Every key is optional in a file; missing keys keep their
/// defaults, unknown keys are errors.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// `[crio]` and its tables: the options CRI-O has, under CRI-O's names.
    pub crio: CrioTable,
    /// `[crio_lite]` and its tables: the options of crio-lite's own.
    pub crio_lite: CrioLiteTable,
}

/// `[crio]`: directories, and the tables below it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CrioTable {
    /// `root`: persistent state; sandbox state files live in `<root>/sandboxes`.
    pub root: PathBuf,
    /// `runroot`: state that only matters while the node is up (the instance locks of the socket
    /// sit next to it).
    pub runroot: PathBuf,
    /// `storage_driver`: how containers' root file systems are made: `overlay`, `vfs` (copies),
    /// or empty to use overlay where it can be mounted and vfs elsewhere.
    pub storage_driver: String,
    /// `[crio.api]`.
    pub api: ApiTable,
    /// `[crio.runtime]`.
    pub runtime: RuntimeTable,
    /// `[crio.image]`.
    pub image: ImageTable,
    /// `[crio.network]`.
    pub network: NetworkTable,
    /// `[crio.metrics]`.
    pub metrics: MetricsTable,
}

impl Default for CrioTable {
    fn default() -> Self {
        CrioTable {
            root: PathBuf::from("/var/lib/crio-lite"),
            runroot: PathBuf::from("/var/run/crio-lite"),
            storage_driver: String::new(),
            api: ApiTable::default(),
            runtime: RuntimeTable::default(),
            image: ImageTable::default(),
            network: NetworkTable::default(),
            metrics: MetricsTable::default(),
        }
    }
}

/// `[crio.api]`: the CRI socket and the streaming server (Exec, Attach, PortForward).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ApiTable {
    /// `listen`: the unix socket serving CRI (gRPC) and the HTTP status API.
    pub listen: PathBuf,
    /// `stream_address`: the address the streaming server binds.
    pub stream_address: String,
    /// `stream_port`: its port, a string as in CRI-O; `"0"` for a free one.
    pub stream_port: String,
    /// `stream_enable_tls`: serve streams over HTTPS with `stream_tls_cert` and `stream_tls_key`.
    pub stream_enable_tls: bool,
    /// `stream_tls_cert`: the certificate chain (PEM).
    pub stream_tls_cert: PathBuf,
    /// `stream_tls_key`: its private key (PEM).
    pub stream_tls_key: PathBuf,
    /// `stream_tls_ca`: CA certificates clients must present a certificate of; empty for none.
    pub stream_tls_ca: PathBuf,
    /// `stream_idle_timeout`: a stream with no traffic this long is closed.
    #[serde(
        serialize_with = "serialize_duration",
        deserialize_with = "deserialize_duration"
    )]
    pub stream_idle_timeout: Duration,
}

impl Default for ApiTable {
    fn default() -> Self {
        ApiTable {
            listen: PathBuf::from("/var/run/crio-lite/crio-lite.sock"),
            stream_address: "127.0.0.1".to_owned(),
            stream_port: "0".to_owned(),
            stream_enable_tls: false,
            stream_tls_cert: PathBuf::new(),
            stream_tls_key: PathBuf::new(),
            stream_tls_ca: PathBuf::new(),
            stream_idle_timeout: DEFAULT_STREAM_IDLE_TIMEOUT,
        }
    }
}

/// `[crio.runtime]`: logging, namespaces, and the OCI runtimes containers run on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RuntimeTable {
    /// `log_level`: a tracing filter, a level (`info`) or directives
    /// (`crio_lite=debug,ocicni=trace`). `RUST_LOG` wins over it.
    pub log_level: String,
    /// `namespaces_dir`: network namespaces are pinned in its `netns` subdirectory, where
    /// `ip netns` and `lsns` find them, as CRI-O pins them.
    pub namespaces_dir: PathBuf,
    /// `default_runtime`: the runtime handler of sandboxes whose request names none.
    pub default_runtime: String,
    /// `conmon`: the container monitor.
    pub conmon: PathBuf,
    /// `hooks_dir`: directories of OCI hook files (oci-hooks(5)), later ones overriding files
    /// of the same name in earlier ones; a directory that does not exist holds none.
    pub hooks_dir: Vec<PathBuf>,
    /// `seccomp_profile`: the seccomp profile of `RuntimeDefault` containers, a JSON file;
    /// empty for crio-lite's built-in profile.
    pub seccomp_profile: PathBuf,
    /// `seccomp_use_default_when_empty`: whether a container whose request names no seccomp
    /// profile gets the RuntimeDefault one (CRI-O's key and default) rather than none, which is
    /// what the CRI says an empty profile means. kubelet always names one.
    pub seccomp_use_default_when_empty: bool,
    /// `pids_limit`: the most processes a container may have (its cgroup's `pids.max`); 0 or
    /// -1 for no limit.
    pub pids_limit: i64,
    /// `cgroup_manager`: `systemd` or `cgroupfs`; the default is systemd where systemd is
    /// init, as CRI-O's.
    pub cgroup_manager: String,
    /// `conmon_cgroup`: `pod`, or with systemd a slice.
    pub conmon_cgroup: String,
    /// `[crio.runtime.runtimes.NAME]`: runtime handlers beside the built-in `crun` and `runc`
    /// (a table named like a built-in one replaces it).
    pub runtimes: BTreeMap<String, RuntimeHandler>,
}

impl Default for RuntimeTable {
    fn default() -> Self {
        RuntimeTable {
            log_level: "info".to_owned(),
            namespaces_dir: PathBuf::from("/var/run"),
            default_runtime: "crun".to_owned(),
            conmon: PathBuf::from("/usr/bin/conmon"),
            hooks_dir: vec![PathBuf::from("/usr/share/containers/oci/hooks.d")],
            seccomp_profile: PathBuf::new(),
            seccomp_use_default_when_empty: oci_container::seccomp::USE_DEFAULT_WHEN_EMPTY,
            pids_limit: 1024,
            cgroup_manager: oci_container::CgroupManager::for_node().name().to_owned(),
            conmon_cgroup: "pod".to_owned(),
            runtimes: BTreeMap::new(),
        }
    }
}

/// What is wrong with the streaming server's keys.
fn stream_problems(api: &ApiTable) -> Vec<(&'static str, String)> {
    let mut problems = Vec::new();
    if api.stream_address.parse::<std::net::IpAddr>().is_err() {
        problems.push((
            "crio.api.stream_address",
            format!("{:?} is not an IP address", api.stream_address),
        ));
    }
    if api.stream_port.parse::<u16>().is_err() {
        problems.push((
            "crio.api.stream_port",
            format!(
                "{:?} is not a port (0 to 65535; \"0\" for a free one)",
                api.stream_port
            ),
        ));
    }
    if api.stream_idle_timeout.is_zero() {
        problems.push((
            "crio.api.stream_idle_timeout",
            "must be more than 0s".to_owned(),
        ));
    }
    if api.stream_enable_tls {
        for (key, path) in [
            ("crio.api.stream_tls_cert", &api.stream_tls_cert),
            ("crio.api.stream_tls_key", &api.stream_tls_key),
        ] {
            if path.as_os_str().is_empty() {
                problems.push((key, "must be set when stream_enable_tls is true".to_owned()));
            }
        }
    }
    problems
}

/// The streaming server's bind address, from checked keys.
impl ApiTable {
    /// `stream_address:stream_port`; `None` when validation would refuse either.
    pub fn stream_socket_addr(&self) -> Option<std::net::SocketAddr> {
        Some(std::net::SocketAddr::new(
            self.stream_address.parse().ok()?,
            self.stream_port.parse().ok()?,
        ))
    }
}

/// What is wrong with `cgroup_manager` and `conmon_cgroup`.
fn cgroup_problems(runtime: &RuntimeTable) -> Option<(&'static str, String)> {
    let Some(manager) = oci_container::CgroupManager::parse(&runtime.cgroup_manager) else {
        return Some((
            "crio.runtime.cgroup_manager",
            format!(
                "{:?} is neither \"systemd\" nor \"cgroupfs\"",
                runtime.cgroup_manager
            ),
        ));
    };
    oci_container::ConmonCgroup::parse(&runtime.conmon_cgroup, manager)
        .err()
        .map(|why| ("crio.runtime.conmon_cgroup", why))
}

/// `[crio.runtime.runtimes.NAME]`: an OCI runtime that sandboxes pick by name (the CRI's
/// `runtime_handler`), as CRI-O's table of the same name.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RuntimeHandler {
    /// `runtime_path`: the runtime binary; empty for NAME looked up in `PATH`.
    pub runtime_path: PathBuf,
    /// `runtime_type`: only `oci` (or empty) is known.
    pub runtime_type: String,
    /// `runtime_root`: the runtime's state directory (`--root`); empty for `/run/NAME`.
    pub runtime_root: PathBuf,
    /// `monitor_path`: the conmon for this runtime; empty for `crio.runtime.conmon`.
    pub monitor_path: PathBuf,
    /// `allowed_annotations`: the runtime-interpreted annotations
    /// ([`RUNTIME_ANNOTATIONS`](crate::domain::annotations::RUNTIME_ANNOTATIONS)) that requests
    /// for this handler's sandboxes may pass to the runtime; every other one of those is dropped
    /// from the request. Empty (the default): none.
    pub allowed_annotations: Vec<String>,
}

/// The runtime handlers crio-lite knows without configuration: `(name, binary, root)`.
pub const BUILTIN_RUNTIMES: [(&str, &str, &str); 2] = [
    ("crun", "/usr/bin/crun", "/run/crun"),
    ("runc", "/usr/sbin/runc", "/run/runc"),
];

/// A runtime handler with its paths decided: what containers of its sandboxes run on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResolvedRuntime {
    /// The handler's name.
    pub name: String,
    /// The runtime binary.
    pub runtime_path: PathBuf,
    /// The runtime's `--root`.
    pub runtime_root: PathBuf,
    /// The conmon that monitors its containers.
    pub monitor_path: PathBuf,
    /// The runtime-interpreted annotations its requests may pass (`allowed_annotations`).
    pub allowed_annotations: Vec<String>,
}

/// `[crio.image]`: pulling images. Images are stored in `<crio.root>/storage`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ImageTable {
    /// `pull_progress_timeout`: a pull that waits on its registry this long and receives less
    /// than `crio_lite.image.pull_min_rate` in that time is cancelled; `0s`: never. The default
    /// is 5 minutes, where CRI-O's is `0s`: with that, a registry that trickles a layer holds
    /// the pull for ever.
    #[serde(
        serialize_with = "serialize_duration",
        deserialize_with = "deserialize_duration"
    )]
    pub pull_progress_timeout: Duration,
    /// `global_auth_file`: a containers-auth.json file whose credentials are used for pulls that
    /// bring none; empty for none.
    pub global_auth_file: PathBuf,
    /// `insecure_registries`: registries (`host` or `host:port`) pulled from over plain HTTP.
    pub insecure_registries: Vec<String>,
    /// `signature_policy`: a containers-policy.json file deciding which images may be pulled;
    /// empty for `/etc/crio-lite/policy.json`, else `/etc/containers/policy.json`. With no
    /// policy file every pull is refused, as CRI-O refuses them (said at start and by
    /// `check-config`).
    pub signature_policy: PathBuf,
}

/// How long a stream may see no traffic: kubelet's streaming default (CRI-O's when its key is
/// empty), four hours.
pub const DEFAULT_STREAM_IDLE_TIMEOUT: Duration = Duration::from_secs(4 * 60 * 60);

/// What a pull that waits on its registry may take to bring [`DEFAULT_PULL_MIN_RATE`] a
/// second: five minutes, far past any registry that works.
pub const DEFAULT_PULL_PROGRESS_TIMEOUT: Duration = Duration::from_secs(300);

/// The fewest bytes a second that count as a pull's progress by default: 1 KiB, so a layer of
/// 200 B/s is cut and no registry a node can use is.
pub const DEFAULT_PULL_MIN_RATE: u64 = 1024;

impl Default for ImageTable {
    fn default() -> Self {
        ImageTable {
            pull_progress_timeout: DEFAULT_PULL_PROGRESS_TIMEOUT,
            global_auth_file: PathBuf::new(),
            insecure_registries: Vec::new(),
            signature_policy: PathBuf::new(),
        }
    }
}

/// `[crio.network]`: where CNI configurations and plugins are.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NetworkTable {
    /// `network_dir`: the directory of CNI network configuration files.
    pub network_dir: PathBuf,
    /// `plugin_dirs`: directories searched for plugin binaries, in order.
    pub plugin_dirs: Vec<PathBuf>,
    /// `cni_default_network`: the network pods get; empty picks the first configuration in
    /// `network_dir` by file name.
    pub cni_default_network: String,
}

impl Default for NetworkTable {
    fn default() -> Self {
        NetworkTable {
            network_dir: PathBuf::from("/etc/cni/net.d"),
            plugin_dirs: vec![PathBuf::from("/opt/cni/bin"), PathBuf::from("/usr/lib/cni")],
            cni_default_network: String::new(),
        }
    }
}

/// `[crio.metrics]`: a Prometheus endpoint of its own, as CRI-O's.
///
/// Carried and printed with CRI-O's defaults; the daemon does not serve it yet. `GET /metrics` on
/// the CRI socket answers whatever these say.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsTable {
    /// `enable_metrics`: whether the endpoint is served.
    pub enable_metrics: bool,
    /// `metrics_host`: the address the endpoint listens on.
    pub metrics_host: String,
    /// `metrics_port`: the TCP port the endpoint listens on.
    pub metrics_port: u16,
    /// `metrics_socket`: a unix socket to serve the endpoint on instead; empty for none.
    pub metrics_socket: PathBuf,
}

impl Default for MetricsTable {
    fn default() -> Self {
        MetricsTable {
            enable_metrics: false,
            metrics_host: "127.0.0.1".to_owned(),
            metrics_port: 9090,
            metrics_socket: PathBuf::new(),
        }
    }
}

/// `[crio_lite]`: the options CRI-O does not have.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CrioLiteTable {
    /// `[crio_lite.runtime]`.
    pub runtime: LiteRuntimeTable,
    /// `[crio_lite.api]`.
    pub api: LiteApiTable,
    /// `[crio_lite.network]`.
    pub network: LiteNetworkTable,
    /// `[crio_lite.image]`.
    pub image: LiteImageTable,
}

/// `[crio_lite.image]`: where pulls find registries.conf (CRI-O takes it from
/// containers/image's defaults).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LiteImageTable {
    /// `registries_conf`: a containers-registries.conf file (short-name aliases, unqualified-search
    /// registries, mirrors, blocked and insecure registries), with drop-ins in `<file>.d/`;
    /// a file that does not exist means none.
    pub registries_conf: PathBuf,
    /// `pull_min_rate`: the fewest bytes per second, over a `crio.image.pull_progress_timeout`
    /// window, that count as a pull's progress (1 KiB by default); 0: any byte does (CRI-O's
    /// meaning), and a registry that trickles is never cut.
    pub pull_min_rate: u64,
}

impl Default for LiteImageTable {
    fn default() -> Self {
        LiteImageTable {
            registries_conf: PathBuf::from("/etc/containers/registries.conf"),
            pull_min_rate: DEFAULT_PULL_MIN_RATE,
        }
    }
}

/// `[crio_lite.runtime]`: how the daemon logs (CRI-O has these as flags only).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LiteRuntimeTable {
    /// `log_format`: text or JSON lines on stderr.
    pub log_format: LogFormat,
    /// `log_journald`: log to journald natively.
    pub log_journald: bool,
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// One line of text a record, `key=value` fields.
    #[default]
    Text,
    /// One JSON object a record, fields and the request's span fields included.
    Json,
}

/// `[crio_lite.api]`: how the socket is served.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LiteApiTable {
    /// `normalize_authority`: whether an HTTP/2 `:authority` that is not a valid authority (the
    /// socket path older Go gRPC clients such as crictl < 1.31 send) is replaced by `localhost`
    /// before the HTTP/2 server sees it. Off, such clients get PROTOCOL_ERROR on every call; off
    /// only to measure its cost.
    pub normalize_authority: bool,
}

impl Default for LiteApiTable {
    fn default() -> Self {
        LiteApiTable {
            normalize_authority: true,
        }
    }
}

/// `[crio_lite.network]`: what ocicni is built with beyond CRI-O's keys.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LiteNetworkTable {
    /// `cache_dir`: where CNI results are cached (shared with other libcni users on the node).
    pub cache_dir: PathBuf,
    /// `cni_run_dir`: pod locks and set-ups in progress (shared with other ocicni users, such as
    /// ocicnitool).
    pub cni_run_dir: PathBuf,
    /// `plugin_timeout`: how long one plugin may run before it is killed.
    #[serde(
        serialize_with = "serialize_duration",
        deserialize_with = "deserialize_duration"
    )]
    pub plugin_timeout: Duration,
    /// `cni_args_policy`: which CNI_ARGS plugins get.
    pub cni_args_policy: CniArgsPolicy,
    /// `builtin_default_network`: whether ocicni provides a built-in default network when
    /// `network_dir` has none.
    pub builtin_default_network: bool,
    /// `builtin_plugins`: when a plugin runs built in (`bridge`, `host-local`, `loopback`)
    /// instead of as a binary: `prefer-binary` (the binary when a plugin directory has it),
    /// `prefer-builtin` or `never`.
    #[serde(
        serialize_with = "serialize_preference",
        deserialize_with = "deserialize_preference"
    )]
    pub builtin_plugins: Preference,
}

impl Default for LiteNetworkTable {
    fn default() -> Self {
        LiteNetworkTable {
            cache_dir: PathBuf::from("/var/lib/cni"),
            cni_run_dir: PathBuf::from(ocicni::DEFAULT_RUN_DIR),
            plugin_timeout: Duration::from_secs(60),
            cni_args_policy: CniArgsPolicy::Kubernetes,
            builtin_default_network: true,
            builtin_plugins: Preference::PreferBinary,
        }
    }
}

impl Config {
    /// Parses one configuration text on its own (no drop-ins, no environment, no flags); `origin`
    /// names it in errors (a path, or `<string>`).
    ///
    /// ```
    /// use crio_lite::Config;
    ///
    /// let text = "[crio_lite.network]\nplugin_timeout = \"5s\"\n";
    /// let config = Config::from_toml(text, "<string>")?;
    /// assert_eq!(config.crio_lite.network.plugin_timeout.as_secs(), 5);
    ///
    /// let err = Config::from_toml("[crio.network]\nplugin_dir = []\n", "<string>").unwrap_err();
    /// assert!(err.to_string().contains("<string>:2: unknown key crio.network.plugin_dir"));
    /// assert!(err.to_string().contains("did you mean crio.network.plugin_dirs?"));
    /// # Ok::<(), crio_lite::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::Config`] listing every bad line, unknown key and value of the wrong type (each
    /// names the origin, the line and the key), and values that parse but cannot be used.
    pub fn from_toml(text: &str, origin: &str) -> Result<Config> {
        let mut layers = load::Layers::default();
        layers.add_text(text, &Origin::file(origin));
        layers.finish(&Overrides::default())
    }

    /// Reads and parses one configuration file on its own.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] when the file cannot be read, and the errors of [`Config::from_toml`].
    pub fn from_file(path: &Path) -> Result<Config> {
        let mut layers = load::Layers::default();
        layers.add_file(path);
        layers.finish(&Overrides::default())
    }

    /// Checks what the types cannot.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] naming the first key at fault.
    pub fn validate(&self) -> Result<()> {
        match self.problems().into_iter().next() {
            Some((key, reason)) => Err(Error::InvalidConfig {
                key: key.to_owned(),
                reason,
            }),
            None => Ok(()),
        }
    }

    /// Every key whose value cannot be used, with the reason.
    fn problems(&self) -> Vec<(&'static str, String)> {
        let crio = &self.crio;
        let lite = &self.crio_lite;
        let mut problems = Vec::new();
        let paths = [
            ("crio.root", &crio.root),
            ("crio.runroot", &crio.runroot),
            ("crio.api.listen", &crio.api.listen),
            ("crio.runtime.namespaces_dir", &crio.runtime.namespaces_dir),
            ("crio.network.network_dir", &crio.network.network_dir),
            ("crio_lite.network.cache_dir", &lite.network.cache_dir),
            ("crio_lite.network.cni_run_dir", &lite.network.cni_run_dir),
        ];
        for (key, path) in paths {
            if path.as_os_str().is_empty() {
                problems.push((key, "must not be empty".to_owned()));
            }
        }
        // The configuration must print as TOML and read back the same.
        let all_paths = paths
            .iter()
            .map(|(key, path)| (*key, path.as_path()))
            .chain(
                crio.network
                    .plugin_dirs
                    .iter()
                    .map(|p| ("crio.network.plugin_dirs", p.as_path())),
            )
            .chain([(
                "crio.metrics.metrics_socket",
                crio.metrics.metrics_socket.as_path(),
            )]);
        for (key, path) in all_paths {
            if path.to_str().is_none() {
                problems.push((key, format!("{} is not UTF-8", path.display())));
            }
        }
        for (key, path) in [
            ("crio.image.global_auth_file", &crio.image.global_auth_file),
            ("crio.image.signature_policy", &crio.image.signature_policy),
            (
                "crio_lite.image.registries_conf",
                &lite.image.registries_conf,
            ),
        ] {
            if path.to_str().is_none() {
                problems.push((key, format!("{} is not UTF-8", path.display())));
            }
        }
        if !crio.storage_driver.is_empty()
            && crio
                .storage_driver
                .parse::<image_store::StorageDriver>()
                .is_err()
        {
            problems.push((
                "crio.storage_driver",
                format!(
                    "{:?} is not a storage driver: use \"overlay\", \"vfs\" or \"\"",
                    crio.storage_driver
                ),
            ));
        }
        for registry in &crio.image.insecure_registries {
            if let Err(why) = check_registry_host(registry) {
                problems.push(("crio.image.insecure_registries", why));
            }
        }
        if crio.network.plugin_dirs.is_empty() {
            problems.push((
                "crio.network.plugin_dirs",
                "must name at least one directory".to_owned(),
            ));
        }
        if crio
            .network
            .plugin_dirs
            .iter()
            .any(|p| p.as_os_str().is_empty())
        {
            problems.push((
                "crio.network.plugin_dirs",
                "must not hold an empty path".to_owned(),
            ));
        }
        if lite.network.plugin_timeout.is_zero() {
            problems.push((
                "crio_lite.network.plugin_timeout",
                "must be longer than zero".to_owned(),
            ));
        }
        if crio.runtime.log_level.trim().is_empty() {
            problems.push(("crio.runtime.log_level", "must not be empty".to_owned()));
        }
        problems.extend(self.runtime_problems());
        if crio.metrics.metrics_host.trim().is_empty() {
            problems.push(("crio.metrics.metrics_host", "must not be empty".to_owned()));
        }
        problems
    }

    /// What is wrong with `[crio.runtime]`'s container keys and runtime handlers.
    fn runtime_problems(&self) -> Vec<(&'static str, String)> {
        let crio = &self.crio;
        let mut problems = Vec::new();
        for (name, handler) in &crio.runtime.runtimes {
            if let Err(why) = check_handler_name(name) {
                problems.push(("crio.runtime.runtimes", why));
            }
            if !matches!(handler.runtime_type.as_str(), "" | "oci") {
                problems.push((
                    "crio.runtime.runtimes",
                    format!(
                        "{name}: runtime_type {:?} is not supported: only \"oci\"",
                        handler.runtime_type
                    ),
                ));
            }
            for entry in &handler.allowed_annotations {
                if let Err(why) = crate::domain::annotations::check_allowed(entry) {
                    problems.push((
                        "crio.runtime.runtimes",
                        format!("{name}: allowed_annotations: {why}"),
                    ));
                }
            }
            for path in [
                &handler.runtime_path,
                &handler.runtime_root,
                &handler.monitor_path,
            ] {
                if path.to_str().is_none() {
                    problems.push((
                        "crio.runtime.runtimes",
                        format!("{name}: {} is not UTF-8", path.display()),
                    ));
                } else if !path.as_os_str().is_empty() && !path.is_absolute() {
                    problems.push((
                        "crio.runtime.runtimes",
                        format!("{name}: {} is not an absolute path", path.display()),
                    ));
                }
            }
        }
        if !self
            .runtime_handlers()
            .contains_key(&crio.runtime.default_runtime)
        {
            problems.push((
                "crio.runtime.default_runtime",
                format!(
                    "{:?} is neither a built-in runtime (crun, runc) nor a \
                     [crio.runtime.runtimes.NAME] table",
                    crio.runtime.default_runtime
                ),
            ));
        }
        if crio.runtime.pids_limit < -1 {
            problems.push((
                "crio.runtime.pids_limit",
                format!(
                    "{} is not a limit: a positive number, or 0 or -1 for none",
                    crio.runtime.pids_limit
                ),
            ));
        }
        problems.extend(cgroup_problems(&crio.runtime));
        problems.extend(stream_problems(&crio.api));
        if crio.runtime.conmon.as_os_str().is_empty() {
            problems.push(("crio.runtime.conmon", "must not be empty".to_owned()));
        }
        for (key, path) in [
            ("crio.runtime.conmon", &crio.runtime.conmon),
            (
                "crio.runtime.seccomp_profile",
                &crio.runtime.seccomp_profile,
            ),
        ]
        .into_iter()
        .chain(
            crio.runtime
                .hooks_dir
                .iter()
                .map(|p| ("crio.runtime.hooks_dir", p)),
        ) {
            if path.to_str().is_none() {
                problems.push((key, format!("{} is not UTF-8", path.display())));
            }
        }
        problems
    }

    /// What does not fit this node, though the configuration is valid: a cgroup manager that
    /// does not match its init, crun as the default runtime on a hybrid cgroup layout (which
    /// crun refuses). Said by `check-config` and at start.
    pub fn node_warnings(&self) -> Vec<String> {
        self.node_warnings_for(
            oci_container::systemd_is_init(),
            oci_container::CgroupVersion::of_node(),
        )
    }

    pub(crate) fn node_warnings_for(
        &self,
        systemd_init: bool,
        version: Option<oci_container::CgroupVersion>,
    ) -> Vec<String> {
        let mut warnings = Vec::new();
        let (manager, _) = self.cgroups();
        match manager {
            oci_container::CgroupManager::Systemd if !systemd_init => warnings.push(
                "crio.runtime.cgroup_manager is \"systemd\" but systemd is not this node's init \
                 (no /run/systemd/system): every container will fail; use \"cgroupfs\""
                    .to_owned(),
            ),
            oci_container::CgroupManager::Cgroupfs if systemd_init => warnings.push(
                "crio.runtime.cgroup_manager is \"cgroupfs\" on a node whose init is systemd: \
                 two managers write one cgroup tree; \"systemd\" is the default here, as in \
                 CRI-O (kubelet's cgroupDriver must match)"
                    .to_owned(),
            ),
            _ => {}
        }
        if version == Some(oci_container::CgroupVersion::Hybrid) {
            let handlers = self.runtime_handlers();
            let default = &self.crio.runtime.default_runtime;
            if let Some(handler) = handlers.get(default)
                && handler
                    .runtime_path
                    .file_name()
                    .is_some_and(|name| name == "crun")
            {
                warnings.push(format!(
                    "crio.runtime.default_runtime is {default:?} (crun), which refuses this \
                     node's hybrid cgroup layout (v1 with the unified hierarchy beside it): \
                     pods that name no handler will fail; runc runs here"
                ));
            }
        }
        warnings
    }

    /// The cgroup manager and conmon's place (`cgroup_manager`, `conmon_cgroup`); a value
    /// validation refuses falls back to the node's default.
    pub fn cgroups(&self) -> (oci_container::CgroupManager, oci_container::ConmonCgroup) {
        let runtime = &self.crio.runtime;
        let manager = oci_container::CgroupManager::parse(&runtime.cgroup_manager)
            .unwrap_or_else(oci_container::CgroupManager::for_node);
        let conmon =
            oci_container::ConmonCgroup::parse(&runtime.conmon_cgroup, manager).unwrap_or_default();
        (manager, conmon)
    }

    /// Every runtime handler: the built-in `crun` and `runc`, then those of
    /// `[crio.runtime.runtimes]` (replacing a built-in of the same name), by name.
    pub fn runtime_handlers(&self) -> BTreeMap<String, ResolvedRuntime> {
        let runtime = &self.crio.runtime;
        let mut out = BTreeMap::new();
        for (name, path, root) in BUILTIN_RUNTIMES {
            out.insert(
                name.to_owned(),
                ResolvedRuntime {
                    name: name.to_owned(),
                    runtime_path: PathBuf::from(path),
                    runtime_root: PathBuf::from(root),
                    monitor_path: runtime.conmon.clone(),
                    allowed_annotations: Vec::new(),
                },
            );
        }
        for (name, handler) in &runtime.runtimes {
            // A table named like a built-in keeps the built-in's paths where it sets none.
            let builtin = out.get(name).cloned();
            let runtime_path = if !handler.runtime_path.as_os_str().is_empty() {
                handler.runtime_path.clone()
            } else if let Some(b) = &builtin {
                b.runtime_path.clone()
            } else {
                find_in_path(name).unwrap_or_else(|| PathBuf::from(name))
            };
            let or = |p: &Path, default: PathBuf| {
                if p.as_os_str().is_empty() {
                    default
                } else {
                    p.to_owned()
                }
            };
            out.insert(
                name.clone(),
                ResolvedRuntime {
                    name: name.clone(),
                    runtime_path,
                    runtime_root: or(
                        &handler.runtime_root,
                        builtin.map_or_else(|| Path::new("/run").join(name), |b| b.runtime_root),
                    ),
                    monitor_path: or(&handler.monitor_path, runtime.conmon.clone()),
                    allowed_annotations: handler.allowed_annotations.clone(),
                },
            );
        }
        out
    }

    /// Where sandbox network namespaces are pinned: `<namespaces_dir>/netns`.
    pub fn netns_dir(&self) -> PathBuf {
        self.crio.runtime.namespaces_dir.join("netns")
    }

    /// The keys whose values differ between `self` and `other`, in [`KEYS`] order.
    pub fn changed_keys(&self, other: &Config) -> Vec<&'static str> {
        let (a, b) = (
            toml::Table::try_from(self.lossy()).unwrap_or_default(),
            toml::Table::try_from(other.lossy()).unwrap_or_default(),
        );
        KEYS.iter()
            .map(|key| key.path)
            .filter(|path| load::lookup(&a, path) != load::lookup(&b, path))
            .collect()
    }

    /// The default network's name, `None` when the first configuration is to be used.
    pub fn default_network(&self) -> Option<&str> {
        Some(self.crio.network.cni_default_network.as_str()).filter(|name| !name.is_empty())
    }
}

/// The first executable named `name` in `PATH`.
fn find_in_path(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt as _;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// A runtime handler's name: what a table name and a CRI request can carry.
fn check_handler_name(name: &str) -> std::result::Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{name:?} is not a runtime handler name: 1 to 64 letters, digits, '-', '_' or '.'"
        ))
    }
}

/// A registry as references name it: `host` or `host:port`, no scheme, no path.
fn check_registry_host(registry: &str) -> std::result::Result<(), String> {
    if registry.is_empty() {
        return Err("holds an empty registry".to_owned());
    }
    if registry.contains("://") || registry.contains('/') {
        return Err(format!(
            "{registry:?} is not a registry: use host or host:port, without scheme or path"
        ));
    }
    if registry
        .chars()
        .any(|c| c.is_whitespace() || c.is_control())
    {
        return Err(format!("{registry:?} has white space in it"));
    }
    Ok(())
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

#[expect(
    clippy::trivially_copy_pass_by_ref,
    reason = "serde's serialize_with passes the field by reference"
)]
fn serialize_preference<S: Serializer>(
    p: &Preference,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(p.as_str())
}

fn deserialize_preference<'de, D: Deserializer<'de>>(
    d: D,
) -> std::result::Result<Preference, D::Error> {
    let text = String::deserialize(d)?;
    text.parse().map_err(serde::de::Error::custom)
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

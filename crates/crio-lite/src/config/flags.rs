//! The flags that override the files and the environment, one per key.

use std::path::PathBuf;
use std::time::Duration;

use ocicni::{CniArgsPolicy, Preference};

use super::{Config, parse_duration};

/// Command-line flags that override the files and the environment, one per key. Named as CRI-O's
/// where CRI-O has the option; [`KEYS`](super::KEYS) maps each to its key and environment variable.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Overrides {
    /// The root directory: sandbox state files [crio.root; env CONTAINER_ROOT].
    #[arg(long, short = 'r', value_name = "DIR", value_hint = clap::ValueHint::DirPath)]
    pub root: Option<PathBuf>,
    /// The run directory [crio.runroot; env CONTAINER_RUNROOT].
    #[arg(long, value_name = "DIR", value_hint = clap::ValueHint::DirPath)]
    pub runroot: Option<PathBuf>,
    /// overlay, vfs, or "" to probe [crio.storage_driver; env CONTAINER_STORAGE_DRIVER].
    #[arg(long, value_name = "DRIVER")]
    pub storage_driver: Option<String>,
    /// The CRI socket [crio.api.listen; env CONTAINER_LISTEN].
    #[arg(long, value_name = "PATH", value_hint = clap::ValueHint::FilePath)]
    pub listen: Option<PathBuf>,
    /// The streaming server's address [crio.api.stream_address; env CONTAINER_STREAM_ADDRESS].
    #[arg(long, value_name = "IP")]
    pub stream_address: Option<String>,
    /// The streaming server's port; 0 for a free one [crio.api.stream_port; env
    /// CONTAINER_STREAM_PORT].
    #[arg(long, value_name = "PORT")]
    pub stream_port: Option<String>,
    /// Serve streams over HTTPS [crio.api.stream_enable_tls; env CONTAINER_STREAM_ENABLE_TLS].
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = parse_bool)]
    pub stream_enable_tls: Option<bool>,
    /// The streaming server's certificate chain [crio.api.stream_tls_cert; env
    /// CONTAINER_STREAM_TLS_CERT].
    #[arg(long, value_name = "PATH", value_parser = path_or_empty(),
          value_hint = clap::ValueHint::FilePath)]
    pub stream_tls_cert: Option<PathBuf>,
    /// The streaming server's private key [crio.api.stream_tls_key; env
    /// CONTAINER_STREAM_TLS_KEY].
    #[arg(long, value_name = "PATH", value_parser = path_or_empty(),
          value_hint = clap::ValueHint::FilePath)]
    pub stream_tls_key: Option<PathBuf>,
    /// CA certificates clients must present a certificate of [crio.api.stream_tls_ca; env
    /// CONTAINER_STREAM_TLS_CA].
    #[arg(long, value_name = "PATH", value_parser = path_or_empty(),
          value_hint = clap::ValueHint::FilePath)]
    pub stream_tls_ca: Option<PathBuf>,
    /// Close a stream with no traffic for this long, such as 4h [crio.api.stream_idle_timeout;
    /// env CONTAINER_STREAM_IDLE_TIMEOUT].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub stream_idle_timeout: Option<Duration>,
    /// The log filter; RUST_LOG wins over it [crio.runtime.log_level; env CONTAINER_LOG_LEVEL].
    #[arg(long, short = 'l', value_name = "FILTER")]
    pub log_level: Option<String>,
    /// Namespaces are pinned in DIR/netns [crio.runtime.namespaces_dir; env
    /// CONTAINER_NAMESPACES_DIR].
    #[arg(long, value_name = "DIR", value_hint = clap::ValueHint::DirPath)]
    pub namespaces_dir: Option<PathBuf>,
    /// The runtime handler of sandboxes that name none [crio.runtime.default_runtime; env
    /// CONTAINER_DEFAULT_RUNTIME].
    #[arg(long, value_name = "NAME")]
    pub default_runtime: Option<String>,
    /// The container monitor [crio.runtime.conmon; env CONTAINER_CONMON].
    #[arg(long, value_name = "PATH", value_hint = clap::ValueHint::FilePath)]
    pub conmon: Option<PathBuf>,
    /// A directory of OCI hook files; repeat or separate with commas for several, replaces the
    /// files' list [crio.runtime.hooks_dir; env CONTAINER_HOOKS_DIR].
    #[arg(long = "hooks-dir", value_name = "DIR", value_delimiter = ',',
          value_hint = clap::ValueHint::DirPath)]
    pub hooks_dir: Vec<PathBuf>,
    /// The seccomp profile of RuntimeDefault containers; "" for the built-in one
    /// [crio.runtime.seccomp_profile; env CONTAINER_SECCOMP_PROFILE].
    #[arg(long, value_name = "PATH", value_parser = path_or_empty(),
          value_hint = clap::ValueHint::FilePath)]
    pub seccomp_profile: Option<PathBuf>,
    /// Give containers whose request names no seccomp profile the RuntimeDefault one, not none
    /// [crio.runtime.seccomp_use_default_when_empty; env
    /// CONTAINER_SECCOMP_USE_DEFAULT_WHEN_EMPTY].
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = parse_bool)]
    pub seccomp_use_default_when_empty: Option<bool>,
    /// The most processes a container may have; 0 or -1 for none [crio.runtime.pids_limit; env
    /// CONTAINER_PIDS_LIMIT].
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    pub pids_limit: Option<i64>,
    /// Who makes the containers' cgroups: systemd or cgroupfs [crio.runtime.cgroup_manager; env
    /// CONTAINER_CGROUP_MANAGER].
    #[arg(long, value_name = "MANAGER")]
    pub cgroup_manager: Option<String>,
    /// Where each container's conmon runs: pod, or with systemd a slice
    /// [crio.runtime.conmon_cgroup; env CONTAINER_CONMON_CGROUP].
    #[arg(long, value_name = "CGROUP")]
    pub conmon_cgroup: Option<String>,
    /// Credentials for pulls that bring none, in containers-auth.json format
    /// [crio.image.global_auth_file; env CONTAINER_GLOBAL_AUTH_FILE].
    #[arg(long, value_name = "PATH", value_parser = path_or_empty(),
          value_hint = clap::ValueHint::FilePath)]
    pub global_auth_file: Option<PathBuf>,
    /// A registry (host or host:port) pulled from over plain HTTP; repeat or separate with commas
    /// for several, replaces the files' list [crio.image.insecure_registries; env
    /// CONTAINER_INSECURE_REGISTRY].
    #[arg(long = "insecure-registry", value_name = "HOST", value_delimiter = ',')]
    pub insecure_registries: Vec<String>,
    /// Cancel a pull that receives too little for this long, such as 60s; 0s: never
    /// [crio.image.pull_progress_timeout; env CONTAINER_PULL_PROGRESS_TIMEOUT].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub pull_progress_timeout: Option<Duration>,
    /// Which images may be pulled, a containers-policy.json file [crio.image.signature_policy;
    /// env CONTAINER_SIGNATURE_POLICY].
    #[arg(long, value_name = "PATH", value_parser = path_or_empty(),
          value_hint = clap::ValueHint::FilePath)]
    pub signature_policy: Option<PathBuf>,
    /// The CNI configuration directory [crio.network.network_dir; env CONTAINER_CNI_CONFIG_DIR].
    #[arg(long, value_name = "DIR", value_hint = clap::ValueHint::DirPath)]
    pub cni_config_dir: Option<PathBuf>,
    /// A CNI plugin directory; repeat or separate with commas for several, replaces the files'
    /// list [crio.network.plugin_dirs; env CONTAINER_CNI_PLUGIN_DIR].
    #[arg(
        long = "cni-plugin-dir",
        value_name = "DIR",
        value_delimiter = ',',
        value_hint = clap::ValueHint::DirPath
    )]
    pub cni_plugin_dirs: Vec<PathBuf>,
    /// The network pods get; "" for the first in the configuration directory
    /// [crio.network.cni_default_network; env CONTAINER_CNI_DEFAULT_NETWORK].
    #[arg(long, value_name = "NAME")]
    pub cni_default_network: Option<String>,
    /// Serve /metrics over TCP on metrics_host:metrics_port [crio.metrics.enable_metrics; env
    /// CONTAINER_ENABLE_METRICS].
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = parse_bool)]
    pub enable_metrics: Option<bool>,
    /// The metrics endpoint's address [crio.metrics.metrics_host; env CONTAINER_METRICS_HOST].
    #[arg(long, value_name = "HOST")]
    pub metrics_host: Option<String>,
    /// The metrics endpoint's port [crio.metrics.metrics_port; env CONTAINER_METRICS_PORT].
    #[arg(long, value_name = "PORT")]
    pub metrics_port: Option<u16>,
    /// A unix socket for the metrics endpoint [crio.metrics.metrics_socket; env
    /// CONTAINER_METRICS_SOCKET].
    #[arg(long, value_name = "PATH", value_parser = path_or_empty(),
          value_hint = clap::ValueHint::FilePath)]
    pub metrics_socket: Option<PathBuf>,
    /// Log lines as text or JSON [crio_lite.runtime.log_format; env CONTAINER_LOG_FORMAT].
    #[arg(long, value_name = "FORMAT")]
    pub log_format: Option<super::LogFormat>,
    /// Log to journald natively [crio_lite.runtime.log_journald; env CONTAINER_LOG_JOURNALD].
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = parse_bool)]
    pub log_journald: Option<bool>,
    /// Replace an invalid HTTP/2 :authority by localhost [crio_lite.api.normalize_authority; env
    /// CRIO_LITE_NORMALIZE_AUTHORITY].
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = parse_bool)]
    pub normalize_authority: Option<bool>,
    /// The CNI cache directory [crio_lite.network.cache_dir; env CRIO_LITE_CACHE_DIR].
    #[arg(long, value_name = "DIR", value_hint = clap::ValueHint::DirPath)]
    pub cache_dir: Option<PathBuf>,
    /// Pod locks and set-ups in progress [crio_lite.network.cni_run_dir; env
    /// CRIO_LITE_CNI_RUN_DIR].
    #[arg(long, value_name = "DIR", value_hint = clap::ValueHint::DirPath)]
    pub cni_run_dir: Option<PathBuf>,
    /// How long one plugin may run, such as 30s or 500ms [crio_lite.network.plugin_timeout; env
    /// CRIO_LITE_PLUGIN_TIMEOUT].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub plugin_timeout: Option<Duration>,
    /// The CNI_ARGS policy [crio_lite.network.cni_args_policy; env CRIO_LITE_CNI_ARGS_POLICY].
    #[arg(long, value_name = "POLICY", value_parser = policy_parser())]
    pub cni_args_policy: Option<CniArgsPolicy>,
    /// A containers-registries.conf file [crio_lite.image.registries_conf; env
    /// CRIO_LITE_REGISTRIES_CONF].
    #[arg(long, value_name = "PATH", value_hint = clap::ValueHint::FilePath)]
    pub registries_conf: Option<PathBuf>,
    /// The fewest bytes per second a pull must receive over a progress window; 0: any byte
    /// [crio_lite.image.pull_min_rate; env CRIO_LITE_PULL_MIN_RATE].
    #[arg(long, value_name = "BYTES")]
    pub pull_min_rate: Option<u64>,
    /// Use a built-in default network when the configuration directory has none
    /// [crio_lite.network.builtin_default_network; env CRIO_LITE_BUILTIN_DEFAULT_NETWORK].
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = parse_bool)]
    pub builtin_default_network: Option<bool>,
    /// When plugins run built in instead of as binaries [crio_lite.network.builtin_plugins; env
    /// CRIO_LITE_BUILTIN_PLUGINS].
    #[arg(long, value_name = "PREFERENCE", value_parser = preference_parser())]
    pub builtin_plugins: Option<Preference>,
}

impl Overrides {
    /// Writes every flag that was given over `config` and returns the keys it set.
    pub fn apply(&self, config: &mut Config) -> Vec<&'static str> {
        let mut set = Setter(Vec::new());
        let crio = &mut config.crio;
        set.one("crio.root", &mut crio.root, self.root.as_ref());
        set.one("crio.runroot", &mut crio.runroot, self.runroot.as_ref());
        set.one(
            "crio.storage_driver",
            &mut crio.storage_driver,
            self.storage_driver.as_ref(),
        );
        set.one(
            "crio.api.listen",
            &mut crio.api.listen,
            self.listen.as_ref(),
        );
        self.apply_api(&mut crio.api, &mut set);
        self.apply_runtime(&mut crio.runtime, &mut set);
        let image = &mut crio.image;
        set.one(
            "crio.image.global_auth_file",
            &mut image.global_auth_file,
            self.global_auth_file.as_ref(),
        );
        set.one(
            "crio.image.signature_policy",
            &mut image.signature_policy,
            self.signature_policy.as_ref(),
        );
        set.one(
            "crio.image.pull_progress_timeout",
            &mut image.pull_progress_timeout,
            self.pull_progress_timeout.as_ref(),
        );
        if !self.insecure_registries.is_empty() {
            image
                .insecure_registries
                .clone_from(&self.insecure_registries);
            set.0.push("crio.image.insecure_registries");
        }
        let network = &mut crio.network;
        set.one(
            "crio.network.network_dir",
            &mut network.network_dir,
            self.cni_config_dir.as_ref(),
        );
        if !self.cni_plugin_dirs.is_empty() {
            network.plugin_dirs.clone_from(&self.cni_plugin_dirs);
            set.0.push("crio.network.plugin_dirs");
        }
        set.one(
            "crio.network.cni_default_network",
            &mut network.cni_default_network,
            self.cni_default_network.as_ref(),
        );
        let metrics = &mut crio.metrics;
        set.one(
            "crio.metrics.enable_metrics",
            &mut metrics.enable_metrics,
            self.enable_metrics.as_ref(),
        );
        set.one(
            "crio.metrics.metrics_host",
            &mut metrics.metrics_host,
            self.metrics_host.as_ref(),
        );
        set.one(
            "crio.metrics.metrics_port",
            &mut metrics.metrics_port,
            self.metrics_port.as_ref(),
        );
        set.one(
            "crio.metrics.metrics_socket",
            &mut metrics.metrics_socket,
            self.metrics_socket.as_ref(),
        );
        self.apply_lite(config, &mut set);
        set.0
    }

    /// The streaming server's keys of `[crio.api]`.
    fn apply_api(&self, api: &mut super::ApiTable, set: &mut Setter) {
        set.one(
            "crio.api.stream_address",
            &mut api.stream_address,
            self.stream_address.as_ref(),
        );
        set.one(
            "crio.api.stream_port",
            &mut api.stream_port,
            self.stream_port.as_ref(),
        );
        set.one(
            "crio.api.stream_enable_tls",
            &mut api.stream_enable_tls,
            self.stream_enable_tls.as_ref(),
        );
        set.one(
            "crio.api.stream_tls_cert",
            &mut api.stream_tls_cert,
            self.stream_tls_cert.as_ref(),
        );
        set.one(
            "crio.api.stream_tls_key",
            &mut api.stream_tls_key,
            self.stream_tls_key.as_ref(),
        );
        set.one(
            "crio.api.stream_tls_ca",
            &mut api.stream_tls_ca,
            self.stream_tls_ca.as_ref(),
        );
        set.one(
            "crio.api.stream_idle_timeout",
            &mut api.stream_idle_timeout,
            self.stream_idle_timeout.as_ref(),
        );
    }

    /// The `[crio_lite]` half of [`Overrides::apply`].
    fn apply_runtime(&self, runtime: &mut super::RuntimeTable, set: &mut Setter) {
        set.one(
            "crio.runtime.log_level",
            &mut runtime.log_level,
            self.log_level.as_ref(),
        );
        set.one(
            "crio.runtime.namespaces_dir",
            &mut runtime.namespaces_dir,
            self.namespaces_dir.as_ref(),
        );
        set.one(
            "crio.runtime.default_runtime",
            &mut runtime.default_runtime,
            self.default_runtime.as_ref(),
        );
        set.one(
            "crio.runtime.conmon",
            &mut runtime.conmon,
            self.conmon.as_ref(),
        );
        if !self.hooks_dir.is_empty() {
            runtime.hooks_dir.clone_from(&self.hooks_dir);
            set.0.push("crio.runtime.hooks_dir");
        }
        set.one(
            "crio.runtime.seccomp_profile",
            &mut runtime.seccomp_profile,
            self.seccomp_profile.as_ref(),
        );
        set.one(
            "crio.runtime.seccomp_use_default_when_empty",
            &mut runtime.seccomp_use_default_when_empty,
            self.seccomp_use_default_when_empty.as_ref(),
        );
        set.one(
            "crio.runtime.pids_limit",
            &mut runtime.pids_limit,
            self.pids_limit.as_ref(),
        );
        set.one(
            "crio.runtime.cgroup_manager",
            &mut runtime.cgroup_manager,
            self.cgroup_manager.as_ref(),
        );
        set.one(
            "crio.runtime.conmon_cgroup",
            &mut runtime.conmon_cgroup,
            self.conmon_cgroup.as_ref(),
        );
    }

    fn apply_lite(&self, config: &mut Config, set: &mut Setter) {
        let lite = &mut config.crio_lite;
        set.one(
            "crio_lite.runtime.log_format",
            &mut lite.runtime.log_format,
            self.log_format.as_ref(),
        );
        set.one(
            "crio_lite.runtime.log_journald",
            &mut lite.runtime.log_journald,
            self.log_journald.as_ref(),
        );
        set.one(
            "crio_lite.api.normalize_authority",
            &mut lite.api.normalize_authority,
            self.normalize_authority.as_ref(),
        );
        let network = &mut lite.network;
        set.one(
            "crio_lite.network.cache_dir",
            &mut network.cache_dir,
            self.cache_dir.as_ref(),
        );
        set.one(
            "crio_lite.network.cni_run_dir",
            &mut network.cni_run_dir,
            self.cni_run_dir.as_ref(),
        );
        set.one(
            "crio_lite.network.plugin_timeout",
            &mut network.plugin_timeout,
            self.plugin_timeout.as_ref(),
        );
        set.one(
            "crio_lite.network.cni_args_policy",
            &mut network.cni_args_policy,
            self.cni_args_policy.as_ref(),
        );
        set.one(
            "crio_lite.network.builtin_default_network",
            &mut network.builtin_default_network,
            self.builtin_default_network.as_ref(),
        );
        set.one(
            "crio_lite.network.builtin_plugins",
            &mut network.builtin_plugins,
            self.builtin_plugins.as_ref(),
        );
        set.one(
            "crio_lite.image.registries_conf",
            &mut lite.image.registries_conf,
            self.registries_conf.as_ref(),
        );
        set.one(
            "crio_lite.image.pull_min_rate",
            &mut lite.image.pull_min_rate,
            self.pull_min_rate.as_ref(),
        );
    }
}

/// Collects the keys [`Overrides::apply`] sets.
struct Setter(Vec<&'static str>);

impl Setter {
    fn one<T: Clone>(&mut self, key: &'static str, slot: &mut T, value: Option<&T>) {
        if let Some(value) = value {
            slot.clone_from(value);
            self.0.push(key);
        }
    }
}

/// Parses a boolean as CRI-O's flags and environment variables take them: `true`, `false`, `1`,
/// `0`, `t`, `f` (any case).
///
/// # Errors
///
/// A message naming the accepted words.
pub fn parse_bool(text: &str) -> std::result::Result<bool, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "true" | "t" | "1" => Ok(true),
        "false" | "f" | "0" => Ok(false),
        _ => Err(format!("invalid boolean {text:?}: use true or false")),
    }
}

/// A path where "" is a value too (clap's path parser refuses it): "no file", "no socket".
pub fn path_or_empty() -> impl clap::builder::TypedValueParser<Value = PathBuf> {
    use clap::builder::TypedValueParser as _;
    clap::builder::OsStringValueParser::new().map(PathBuf::from)
}

/// The policy's names as completions and `--help` show them.
fn policy_parser() -> impl clap::builder::TypedValueParser<Value = CniArgsPolicy> {
    use clap::builder::TypedValueParser as _;
    clap::builder::PossibleValuesParser::new(["kubernetes", "plain"])
        .try_map(|name| name.parse::<CniArgsPolicy>())
}

/// The preferences' names as completions and `--help` show them.
fn preference_parser() -> impl clap::builder::TypedValueParser<Value = Preference> {
    use clap::builder::TypedValueParser as _;
    clap::builder::PossibleValuesParser::new(["prefer-binary", "prefer-builtin", "never"])
        .try_map(|name| name.parse::<Preference>())
}

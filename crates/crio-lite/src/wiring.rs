//! Putting the daemon together: the CNI side, logging, signals, and the subcommands.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use ocicni::cni_exec::ProcessExec;
use ocicni::{BuiltinNetwork, CniPlugin, Ocicni};
use tokio::signal::unix::{SignalKind, signal};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Registry, reload};

use crate::cli::{Cli, Command};
use crate::cni_metrics::metered;
use crate::config::{Config, Loader, LogFormat};
use crate::domain::{ContainerSettings, HandlerSettings, ImageSettings, STORAGE_DIR};
use crate::metrics::Metrics;
use crate::netns::{HostNetns, NetnsOps};
use crate::server::Daemon;
use crate::startup::Timeline;

/// Builds the CNI side the daemon runs with, from `[crio.network]` and `[crio_lite.network]`: an
/// [`Ocicni`] whose plugin runs, built-in or binary, are timed into `metrics`.
///
/// The built-in default network (when enabled) keeps its host-local leases under
/// `<cache dir>/networks`, which is host-local's own default for the default cache dir.
///
/// # Errors
///
/// When the configuration watcher cannot start.
pub async fn build_cni(config: &Config, metrics: &Metrics) -> anyhow::Result<Arc<dyn CniPlugin>> {
    let net = &config.crio.network;
    let lite = &config.crio_lite.network;
    let exec = ProcessExec::new().with_timeout(lite.plugin_timeout);
    let mut builder = Ocicni::builder()
        .conf_dir(&net.network_dir)
        .plugin_dirs(net.plugin_dirs.clone())
        .cache_dir(&lite.cache_dir)
        .run_dir(&lite.cni_run_dir)
        .plugin_timeout(lite.plugin_timeout)
        .cni_args(lite.cni_args_policy)
        .loopback(true)
        .exec(Arc::new(exec))
        .builtin_plugins(lite.builtin_plugins)
        .observer(metered(metrics.clone()));
    if let Some(name) = config.default_network() {
        builder = builder.default_network(name);
    }
    if lite.builtin_default_network {
        builder = builder.builtin_default(Some(BuiltinNetwork {
            ipam_data_dir: Some(lite.cache_dir.join("networks")),
            ..BuiltinNetwork::default()
        }));
    }
    let cni = builder.build().await.with_context(|| {
        format!(
            "cannot load CNI networks from {}",
            net.network_dir.display()
        )
    })?;
    if let Some(name) = cni.default_network_name() {
        let plugins: Vec<String> = cni
            .plugin_implementations()
            .iter()
            .map(|p| format!("{}={}", p.plugin, p.implementation))
            .collect();
        tracing::info!(
            network_dir = %net.network_dir.display(),
            default_network = name,
            builtin_plugins = %lite.builtin_plugins,
            plugins = plugins.join(","),
            "CNI configuration loaded"
        );
    } else {
        tracing::warn!(
            network_dir = %net.network_dir.display(),
            "CNI configuration loaded, but no network is usable: RunPodSandbox fails and the \
             runtime status says why until one is (the directory is watched)"
        );
    }
    Ok(Arc::new(cni))
}

/// The namespace operations the daemon runs with.
pub fn build_netns() -> Arc<dyn NetnsOps> {
    Arc::new(HostNetns)
}

/// The container manager's settings, from `[crio]` and `[crio.runtime]`.
pub(crate) fn container_settings(config: &Config) -> ContainerSettings {
    let runtime = &config.crio.runtime;
    let handlers = config
        .runtime_handlers()
        .into_iter()
        .map(|(name, r)| {
            let handler = HandlerSettings {
                runtime_path: r.runtime_path,
                runtime_root: r.runtime_root,
                monitor_path: r.monitor_path,
                allowed_annotations: r.allowed_annotations,
            };
            (name, handler)
        })
        .collect();
    let non_empty = |path: &PathBuf| Some(path.clone()).filter(|p| !p.as_os_str().is_empty());
    let (cgroup_manager, conmon_cgroup) = config.cgroups();
    ContainerSettings {
        handlers,
        default_handler: runtime.default_runtime.clone(),
        hooks_dirs: runtime.hooks_dir.clone(),
        seccomp_profile: non_empty(&runtime.seccomp_profile),
        seccomp_use_default_when_empty: runtime.seccomp_use_default_when_empty,
        pids_limit: Some(runtime.pids_limit).filter(|&n| n > 0),
        run_dir: config.crio.runroot.clone(),
        pod_init: pod_init_program(),
        cgroup_manager,
        conmon_cgroup,
    }
}

/// The daemon's own executable, resolved once (an upgrade that replaces the file later does not
/// change which binary pod inits run), with the hidden subcommand that makes it a pod init.
fn pod_init_program() -> oci_container::PodInitProgram {
    oci_container::PodInitProgram {
        path: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("/proc/self/exe")),
        args: vec![crate::cli::POD_INIT_COMMAND.into()],
    }
}

/// The image store's settings, from `[crio]`, `[crio.image]` and `[crio_lite.image]`: the store
/// in `<crio.root>/storage`.
///
/// # Errors
///
/// [`Error::Images`](crate::Error::Images) for a storage driver the store does not know.
pub(crate) fn image_settings(config: &Config) -> crate::Result<ImageSettings> {
    let image = &config.crio.image;
    let mut store = image_store::StoreConfig::new(config.crio.root.join(STORAGE_DIR));
    store
        .insecure_registries
        .clone_from(&image.insecure_registries);
    store.progress_timeout = Some(image.pull_progress_timeout).filter(|t| !t.is_zero());
    store.min_pull_rate = config.crio_lite.image.pull_min_rate;
    if !config.crio.storage_driver.is_empty() {
        let driver = config
            .crio
            .storage_driver
            .parse()
            .map_err(|e| crate::Error::Images(Box::new(e)))?;
        store.storage_driver = Some(driver);
    }
    let non_empty = |path: &PathBuf| Some(path.clone()).filter(|p| !p.as_os_str().is_empty());
    Ok(ImageSettings {
        store,
        signature_policy: non_empty(&image.signature_policy),
        registries_conf: non_empty(&config.crio_lite.image.registries_conf),
        auth_file: non_empty(&image.global_auth_file),
    })
}

/// Runs the command line; the binary's `main` is this and an exit code.
///
/// # Errors
///
/// Whatever stopped the command, with context a person can act on.
pub fn main(cli: Cli) -> anyhow::Result<()> {
    let command = cli.command.clone().unwrap_or(Command::Run);
    match command {
        // Before any thread starts: it forks.
        Command::PodInit { pod, pid_file } => oci_container::pod_init::main(&pod, &pid_file),
        Command::Version => {
            print!("{}", crate::VersionInfo::current().to_text());
            Ok(())
        }
        Command::Config { default: true } => {
            print!("{}", Config::default().to_commented_toml());
            Ok(())
        }
        Command::Config { default: false } => {
            print!("{}", cli.loader().load()?.config.to_commented_toml());
            Ok(())
        }
        Command::CheckConfig => check_config(&cli.loader()),
        Command::Status {
            socket,
            output,
            query,
        } => {
            let socket = match socket {
                Some(socket) => socket,
                None => cli.loader().load()?.config.crio.api.listen,
            };
            let out = runtime()?.block_on(crate::status_cmd::run(&socket, &query, output))?;
            println!("{}", out.trim_end());
            Ok(())
        }
        Command::Run => {
            let euid = nix::unistd::geteuid();
            if !euid.is_root() {
                anyhow::bail!(
                    "crio-lite must run as root: it pins network namespaces and runs CNI plugins \
                     (running as uid {euid})"
                );
            }
            let mut timeline = Timeline::new();
            let loader = cli.loader();
            let loaded = loader.load()?;
            let logging = init_logging(&loaded.config)?;
            for file in &loaded.files {
                tracing::info!(file = %file.display(), "configuration read");
            }
            for warning in loaded.config.node_warnings() {
                tracing::warn!("{warning}");
            }
            let runtime = runtime()?;
            timeline.mark("configuration");
            runtime.block_on(run_daemon_reloading(
                loaded.config,
                loader,
                logging,
                timeline,
            ))
        }
    }
}

/// `crio-lite check-config`: every mistake on a line of its own on stderr, or the files read on
/// stdout.
fn check_config(loader: &Loader) -> anyhow::Result<()> {
    match loader.load() {
        Ok(loaded) => {
            let files: Vec<String> = loaded
                .files
                .iter()
                .map(|f| f.display().to_string())
                .collect();
            // Not a mistake in the configuration, but every pull would be refused.
            if let Err(e) =
                crate::domain::signature_policy_file(&loaded.config.crio.image.signature_policy)
            {
                eprintln!("warning: {e}");
            }
            for warning in loaded.config.node_warnings() {
                eprintln!("warning: {warning}");
            }
            if files.is_empty() {
                println!("configuration ok (no file read: defaults, environment and flags)");
            } else {
                println!("configuration ok (read {})", files.join(", "));
            }
            Ok(())
        }
        Err(crate::Error::Config { issues }) => {
            for issue in &issues {
                eprintln!("{issue}");
            }
            anyhow::bail!(
                "{} mistake{} in the configuration",
                issues.len(),
                if issues.len() == 1 { "" } else { "s" }
            )
        }
        Err(e) => Err(e.into()),
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// Changes the log filter of a running daemon; `None` when `RUST_LOG` set it (it wins over
/// `crio.runtime.log_level`, at start and at reload).
#[derive(Debug)]
pub struct Logging {
    handle: Option<reload::Handle<EnvFilter, Registry>>,
}

impl Logging {
    /// Applies `log_level` as the new filter; false when `RUST_LOG` wins over it.
    ///
    /// # Errors
    ///
    /// When the filter does not parse or logging is gone.
    pub fn set_level(&self, log_level: &str) -> anyhow::Result<bool> {
        let Some(handle) = &self.handle else {
            return Ok(false);
        };
        let filter = level_filter(log_level)?;
        handle
            .reload(filter)
            .map_err(|e| anyhow::anyhow!("cannot change the log filter: {e}"))?;
        Ok(true)
    }
}

fn level_filter(log_level: &str) -> anyhow::Result<EnvFilter> {
    EnvFilter::try_new(log_level).with_context(|| {
        format!("config key crio.runtime.log_level: {log_level:?} is not a log filter")
    })
}

/// Where log records go, chosen once at start.
enum Sink {
    Text,
    Json,
    Journald(tracing_journald::Layer),
}

impl Sink {
    /// JSON when asked for; journald when asked for, or when stderr is the journal already
    /// (systemd sets JOURNAL_STREAM to stderr's device:inode) and text was asked for; else text.
    fn choose(config: &Config) -> Sink {
        let runtime = &config.crio_lite.runtime;
        if runtime.log_format == LogFormat::Json {
            return Sink::Json;
        }
        if runtime.log_journald || stderr_is_journal() {
            match tracing_journald::layer() {
                Ok(layer) => {
                    return Sink::Journald(layer.with_syslog_identifier("crio-lite".to_owned()));
                }
                Err(e) => eprintln!("crio-lite: cannot log to journald ({e}); logging to stderr"),
            }
        }
        Sink::Text
    }
}

/// Whether stderr is the stream systemd connected to the journal (sd_journal_stream_fd's
/// JOURNAL_STREAM=<device>:<inode>).
fn stderr_is_journal() -> bool {
    use std::os::fd::AsFd as _;
    let Some(stream) = std::env::var_os("JOURNAL_STREAM") else {
        return false;
    };
    nix::sys::stat::fstat(std::io::stderr().as_fd())
        .is_ok_and(|stat| names_stream(&stream, stat.st_dev, stat.st_ino))
}

/// Whether a JOURNAL_STREAM value names the file with this device and inode.
fn names_stream(value: &std::ffi::OsStr, dev: u64, ino: u64) -> bool {
    let Some((d, i)) = value.to_str().and_then(|s| s.split_once(':')) else {
        return false;
    };
    d.parse::<u64>().ok() == Some(dev) && i.parse::<u64>().ok() == Some(ino)
}

/// Logs to stderr as text or JSON lines, or to journald; RUST_LOG wins over
/// `crio.runtime.log_level`.
///
/// # Errors
///
/// When the filter does not parse or logging was set up already.
pub fn init_logging(config: &Config) -> anyhow::Result<Logging> {
    let (filter, from_log_level) = match std::env::var("RUST_LOG") {
        Ok(directives) if !directives.is_empty() => (
            EnvFilter::try_new(&directives)
                .with_context(|| format!("RUST_LOG {directives:?} is not a log filter"))?,
            false,
        ),
        _ => (level_filter(&config.crio.runtime.log_level)?, true),
    };
    let (filter, handle) = reload::Layer::new(filter);
    let registry = tracing_subscriber::registry().with(filter);
    let installed = match Sink::choose(config) {
        Sink::Json => registry
            .with(
                tracing_subscriber::fmt::layer()
                    .json()
                    .with_current_span(true)
                    .with_span_list(true)
                    .with_writer(std::io::stderr),
            )
            .try_init(),
        Sink::Journald(layer) => registry.with(layer).try_init(),
        Sink::Text => registry
            .with(
                tracing_subscriber::fmt::layer()
                    .with_writer(std::io::stderr)
                    // Colour codes only for a person at a terminal, not in a log file.
                    .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr())),
            )
            .try_init(),
    };
    installed.map_err(|e| anyhow::anyhow!("cannot set up logging: {e}"))?;
    Ok(Logging {
        handle: from_log_level.then_some(handle),
    })
}

/// Runs the daemon until SIGTERM or SIGINT; SIGHUP reloads the network configuration.
///
/// # Errors
///
/// When the CNI side cannot be built, the daemon cannot start, or it fails while running.
pub async fn run_daemon(config: Config) -> anyhow::Result<()> {
    serve_until_signal(config, None, Timeline::new()).await
}

/// As [`run_daemon`], and SIGHUP also reads the configuration again with `loader`: a new
/// `crio.runtime.log_level` is applied, other changed keys are logged as waiting for a restart,
/// and a configuration with mistakes is logged and ignored.
///
/// # Errors
///
/// As [`run_daemon`].
pub(crate) async fn run_daemon_reloading(
    config: Config,
    loader: Loader,
    logging: Logging,
    timeline: Timeline,
) -> anyhow::Result<()> {
    serve_until_signal(config, Some((loader, logging)), timeline).await
}

async fn serve_until_signal(
    config: Config,
    reloading: Option<(Loader, Logging)>,
    mut timeline: Timeline,
) -> anyhow::Result<()> {
    // Made first: the CNI side times every plugin run into it.
    let metrics = Metrics::new();
    let cni = build_cni(&config, &metrics).await?;
    timeline.mark("CNI configuration and plugins");
    let mut term = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
    let mut hup = signal(SignalKind::hangup()).context("cannot handle SIGHUP")?;
    let mut current = config.clone();
    let daemon = Daemon::start_timed(config, cni, build_netns(), metrics, &mut timeline).await?;
    tracing::info!(
        ready_ms = timeline.total().as_secs_f64() * 1e3,
        phases = %timeline.summary(),
        "ready: serving CRI {:.1} ms after start",
        timeline.total().as_secs_f64() * 1e3
    );
    crate::systemd::ready("serving; recovering the sandboxes of the last run");
    let watchdog = crate::systemd::spawn_watchdog();
    let recovered = daemon.recovered();
    let announce = tokio::spawn(async move {
        recovered.await;
        crate::systemd::status("serving; sandboxes of the last run recovered");
    });
    loop {
        tokio::select! {
            _ = term.recv() => { tracing::info!("SIGTERM: shutting down"); break; }
            _ = int.recv() => { tracing::info!("SIGINT: shutting down"); break; }
            _ = hup.recv() => {
                if let Some((loader, logging)) = &reloading {
                    tracing::info!("SIGHUP: reading the configuration again");
                    reload_config(loader, logging, &mut current);
                }
                tracing::info!("SIGHUP: reloading the network configuration");
                if let Err(e) = daemon.reload().await {
                    tracing::error!(error = %e, "reload failed; keeping the previous configuration");
                }
            }
        }
    }
    crate::systemd::stopping();
    announce.abort();
    let shut = daemon.shutdown().await;
    if let Some(watchdog) = watchdog {
        watchdog.abort();
    }
    shut?;
    Ok(())
}

/// What SIGHUP does with the files: the log level changes live, the rest waits for a restart.
fn reload_config(loader: &Loader, logging: &Logging, current: &mut Config) {
    let loaded = match loader.load() {
        Ok(loaded) => loaded,
        Err(e) => {
            tracing::error!(error = %e, "the configuration has mistakes; keeping the running one");
            return;
        }
    };
    let changed = current.changed_keys(&loaded.config);
    let mut pending = Vec::new();
    for key in &changed {
        if *key == "crio.runtime.log_level" {
            let level = &loaded.config.crio.runtime.log_level;
            match logging.set_level(level) {
                Ok(true) => {
                    tracing::info!(log_level = %level, "crio.runtime.log_level applied");
                    current.crio.runtime.log_level.clone_from(level);
                }
                Ok(false) => {
                    tracing::info!("crio.runtime.log_level changed; RUST_LOG is set and wins");
                    current.crio.runtime.log_level.clone_from(level);
                }
                Err(e) => tracing::error!(error = %e, "log level kept"),
            }
        } else {
            pending.push(*key);
        }
    }
    if !pending.is_empty() {
        tracing::warn!(
            keys = %pending.join(", "),
            "configuration changed; these keys take effect at the next start"
        );
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;
    use std::os::unix::fs::MetadataExt as _;

    use super::*;

    #[test]
    fn journal_stream_must_name_stderr_exactly() {
        let file = tempfile::tempfile().unwrap();
        let meta = file.metadata().unwrap();
        let (dev, ino) = (meta.dev(), meta.ino());
        assert!(names_stream(OsStr::new(&format!("{dev}:{ino}")), dev, ino));
        assert!(!names_stream(
            OsStr::new(&format!("{dev}:{}", ino + 1)),
            dev,
            ino
        ));
        assert!(!names_stream(
            OsStr::new(&format!("{}:{ino}", dev + 1)),
            dev,
            ino
        ));
        for junk in ["", ":", "x:y", "12", "1:2:3"] {
            assert!(!names_stream(OsStr::new(junk), 1, 2), "{junk:?}");
        }
    }
}

//! Putting the daemon together: the CNI side, logging, signals, and the subcommands.

use std::sync::Arc;

use anyhow::Context as _;
use ocicni::cni_exec::ProcessExec;
use ocicni::{BuiltinNetwork, CniPlugin, Ocicni};
use tokio::signal::unix::{SignalKind, signal};

use crate::cli::{Cli, Command};
use crate::cni_metrics::metered;
use crate::config::Config;
use crate::metrics::Metrics;
use crate::netns::{HostNetns, NetnsOps};
use crate::server::Daemon;

/// Builds the CNI side the daemon runs with, from the `[network]` table: an [`Ocicni`] whose
/// plugin runs are timed into `metrics`.
///
/// The built-in default network (when enabled) keeps its host-local leases under
/// `<cache dir>/networks`, which is host-local's own default for the default cache dir.
///
/// # Errors
///
/// When the configuration watcher cannot start.
pub async fn build_cni(config: &Config, metrics: &Metrics) -> anyhow::Result<Arc<dyn CniPlugin>> {
    let net = &config.network;
    let exec = ProcessExec::new().with_timeout(net.plugin_timeout);
    let exec = metered(Arc::new(exec), metrics.clone());
    let mut builder = Ocicni::builder()
        .conf_dir(&net.network_dir)
        .plugin_dirs(net.plugin_dirs.clone())
        .cache_dir(&net.cache_dir)
        .run_dir(&net.cni_run_dir)
        .plugin_timeout(net.plugin_timeout)
        .cni_args(net.cni_args_policy)
        .loopback(true)
        .exec(exec);
    if let Some(name) = &net.default_network {
        builder = builder.default_network(name);
    }
    if net.builtin_default_network {
        builder = builder.builtin_default(Some(BuiltinNetwork {
            ipam_data_dir: Some(net.cache_dir.join("networks")),
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
        tracing::info!(
            network_dir = %net.network_dir.display(),
            default_network = name,
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

/// Runs the command line; the binary's `main` is this and an exit code.
///
/// # Errors
///
/// Whatever stopped the command, with context a person can act on.
pub fn main(cli: Cli) -> anyhow::Result<()> {
    let command = cli.command.clone().unwrap_or(Command::Run);
    match command {
        Command::Version => {
            print!("{}", crate::VersionInfo::current().to_text());
            Ok(())
        }
        Command::Config => {
            let config = Config::load(cli.config.as_deref(), &cli.overrides)?;
            print!("{}", config.to_commented_toml());
            Ok(())
        }
        Command::Status { query } => {
            let socket = match &cli.overrides.socket {
                Some(socket) => socket.clone(),
                None => {
                    Config::load(cli.config.as_deref(), &cli.overrides)?
                        .daemon
                        .socket
                }
            };
            let out = runtime()?.block_on(crate::status_cmd::run(&socket, &query))?;
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
            let config = Config::load(cli.config.as_deref(), &cli.overrides)?;
            init_logging(&config)?;
            runtime()?.block_on(run_daemon(config))
        }
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// Logs to stderr; RUST_LOG wins over `daemon.log_level`.
///
/// # Errors
///
/// When the filter does not parse.
pub fn init_logging(config: &Config) -> anyhow::Result<()> {
    let filter = match std::env::var("RUST_LOG") {
        Ok(directives) if !directives.is_empty() => {
            tracing_subscriber::EnvFilter::try_new(&directives)
                .with_context(|| format!("RUST_LOG {directives:?} is not a log filter"))?
        }
        _ => {
            tracing_subscriber::EnvFilter::try_new(&config.daemon.log_level).with_context(|| {
                format!(
                    "config key daemon.log_level: {:?} is not a log filter",
                    config.daemon.log_level
                )
            })?
        }
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colour codes only for a person at a terminal, not in journald or a log file.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init()
        .map_err(|e| anyhow::anyhow!("cannot set up logging: {e}"))
}

/// Runs the daemon until SIGTERM or SIGINT; SIGHUP reloads the network configuration.
///
/// # Errors
///
/// When the CNI side cannot be built, the daemon cannot start, or it fails while running.
pub async fn run_daemon(config: Config) -> anyhow::Result<()> {
    // Made first: the CNI side times every plugin run into it.
    let metrics = Metrics::new();
    let cni = build_cni(&config, &metrics).await?;
    let mut term = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
    let mut hup = signal(SignalKind::hangup()).context("cannot handle SIGHUP")?;
    let daemon = Daemon::start_with_metrics(config, cni, build_netns(), metrics).await?;
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

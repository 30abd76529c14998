//! Putting the daemon together: the CNI side, logging, signals, and the subcommands.

use std::sync::Arc;

use anyhow::Context as _;
use ocicni::CniPlugin;
use tokio::signal::unix::{SignalKind, signal};

use crate::cli::{Cli, Command};
use crate::config::Config;
use crate::cri_runtime::CRI_API_VERSION;
use crate::metrics::Metrics;
use crate::netns::{HostNetns, NetnsOps};
use crate::server::Daemon;

/// Builds the CNI side the daemon runs with, from the `[network]` table.
///
/// # Errors
///
/// When the CNI side cannot be built from the configuration.
pub fn build_cni(config: &Config) -> anyhow::Result<Arc<dyn CniPlugin>> {
    anyhow::bail!(
        "ocicni facade not available in this build: cannot load networks from {}",
        config.network.network_dir.display()
    )
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
            println!(
                "crio-lite {}\nCRI API {CRI_API_VERSION}",
                env!("CARGO_PKG_VERSION")
            );
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
        .try_init()
        .map_err(|e| anyhow::anyhow!("cannot set up logging: {e}"))
}

/// Runs the daemon until SIGTERM or SIGINT; SIGHUP reloads the network configuration.
///
/// # Errors
///
/// When the CNI side cannot be built, the daemon cannot start, or it fails while running.
pub async fn run_daemon(config: Config) -> anyhow::Result<()> {
    // Made first so the CNI side can be handed `metrics.cni_plugin_latency()` once it takes one.
    let metrics = Metrics::new();
    let cni = build_cni(&config)?;
    let mut term = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
    let mut hup = signal(SignalKind::hangup()).context("cannot handle SIGHUP")?;
    let daemon = Daemon::start_with_metrics(config, cni, build_netns(), metrics).await?;
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
    daemon.shutdown().await?;
    Ok(())
}

//! The daemon: recovery, the unix socket, and gRPC plus HTTP served on it.
//!
//! gRPC (HTTP/2 with prior knowledge, as CRI clients speak it) and the HTTP/1.1 status API share
//! one socket: the tonic services become an axum router, merged with the HTTP routes, and
//! `h2_front::serve` serves it, telling the protocol apart per connection.

use std::os::unix::fs::{FileTypeExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use cri_api::v1::image_service_server::ImageServiceServer;
use cri_api::v1::runtime_service_server::RuntimeServiceServer;
use ocicni::CniPlugin;
use tokio::net::UnixListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::Config;
use crate::cri::{ImageApi, RuntimeApi};
use crate::domain::{Containers, Images, Manager};
use crate::error::{Error, Result};
use crate::http_api;
use crate::instance::InstanceLocks;
use crate::metrics::Metrics;
use crate::netns::NetnsOps;
use crate::startup::Timeline;
use crate::store::Store;

/// How long shutdown waits for open connections, then for running sandbox operations.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

/// A running daemon. Dropping it leaves the server running until the runtime stops; call
/// [`Daemon::shutdown`] to stop it cleanly.
pub struct Daemon {
    socket: PathBuf,
    metrics_address: Option<std::net::SocketAddr>,
    cni: Arc<dyn CniPlugin>,
    metrics: Metrics,
    cancel: CancellationToken,
    server: JoinHandle<()>,
    tasks: TaskTracker,
    manager: Arc<Manager>,
    images: Images,
    instance: InstanceLocks,
    /// The streaming server of Exec, Attach and PortForward.
    streams: Arc<cri_streaming::server::ServerHandle>,
}

impl std::fmt::Debug for Daemon {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Daemon")
            .field("socket", &self.socket)
            .finish_non_exhaustive()
    }
}

impl Daemon {
    /// Recovers the sandboxes of `config.crio.root`, then serves CRI and the status API on
    /// `config.crio.api.listen`; namespaces are pinned in [`Config::netns_dir`].
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] for an unusable configuration, [`Error::Io`] when a directory cannot
    /// be created or read, or the socket cannot be bound (another daemon answering on it included).
    pub async fn start(
        config: Config,
        cni: Arc<dyn CniPlugin>,
        netns: Arc<dyn NetnsOps>,
    ) -> Result<Daemon> {
        Daemon::start_with_metrics(config, cni, netns, Metrics::new()).await
    }

    /// As [`Daemon::start`], with a metrics registry made beforehand (so the CNI side could be
    /// given its plugin-latency handle when it was built).
    ///
    /// # Errors
    ///
    /// As [`Daemon::start`].
    pub async fn start_with_metrics(
        config: Config,
        cni: Arc<dyn CniPlugin>,
        netns: Arc<dyn NetnsOps>,
        metrics: Metrics,
    ) -> Result<Daemon> {
        Daemon::start_timed(config, cni, netns, metrics, &mut Timeline::new()).await
    }

    /// As [`Daemon::start_with_metrics`], each phase marked on `timeline`.
    pub(crate) async fn start_timed(
        config: Config,
        cni: Arc<dyn CniPlugin>,
        netns: Arc<dyn NetnsOps>,
        metrics: Metrics,
        timeline: &mut Timeline,
    ) -> Result<Daemon> {
        config.validate()?;
        warn_if_private_mounts();
        // Before anything is read or changed: a second daemon must change nothing.
        let instance = InstanceLocks::acquire(&config.crio.root, &config.crio.api.listen)?;
        let config = Arc::new(config);
        let netns_dir = config.netns_dir();
        for dir in [&config.crio.root, &config.crio.runroot, &netns_dir] {
            std::fs::create_dir_all(dir)
                .map_err(|e| Error::io("cannot create directory", dir, e))?;
        }
        timeline.mark("instance locks and directories");
        let store = Store::open(&config.crio.root)?;
        timeline.mark("sandbox store");
        let images = Images::open(crate::wiring::image_settings(&config)?)?
            .with_progress(metrics.image_progress());
        timeline.mark("image store");
        let containers = Arc::new(Containers::new(
            crate::wiring::container_settings(&config),
            images.clone(),
            Store::open(&config.crio.root)?,
        ));
        let manager = Arc::new(Manager::new(
            Arc::clone(&cni),
            netns,
            store,
            netns_dir,
            metrics.clone(),
            config.crio_lite.network.cni_args_policy,
            containers,
        ));
        timeline.mark("container store and runtimes");
        let recovery = manager.recover().await?;
        timeline.mark("recovery (synchronous part)");

        let socket = config.crio.api.listen.clone();
        let limits = h2_front::Limits {
            normalize_authority: config.crio_lite.api.normalize_authority,
            ..h2_front::Limits::default()
        };
        let listener = bind(&socket).await?;
        // Bound before anything runs, so a taken port fails the start naming it.
        let metrics_listeners = MetricsListeners::bind(&config).await?;
        let tasks = TaskTracker::new();
        // Shutdown waits for it like for any sandbox operation; killed, the next start redoes it.
        tasks.spawn(recovery);
        let streams = Arc::new(start_streaming(&config, &manager).await?);
        metrics.watch_streams(&streams);
        let runtime = RuntimeApi::new(
            Arc::clone(&manager),
            Arc::clone(&config),
            Arc::clone(&streams),
            tasks.clone(),
        );
        let grpc = tonic::service::Routes::new(RuntimeServiceServer::new(runtime))
            .add_service(ImageServiceServer::new(ImageApi::new(images.clone())))
            .into_axum_router()
            .layer(axum::middleware::from_fn_with_state(
                metrics.clone(),
                count_rpc,
            ));
        let router = grpc
            .merge(http_api::router(
                Arc::clone(&manager),
                images.clone(),
                config,
                metrics.clone(),
            ))
            .fallback(http_api::fallback);
        let cancel = CancellationToken::new();
        let metrics_address = metrics_listeners
            .tcp
            .as_ref()
            .and_then(|l| l.local_addr().ok());
        metrics_listeners.serve(&metrics, &tasks, &cancel);
        let server = tokio::spawn(h2_front::serve(
            listener,
            router,
            limits,
            cancel.clone(),
            SHUTDOWN_GRACE,
        ));
        timeline.mark("sockets and services");
        tracing::info!(socket = %socket.display(), "serving CRI and the status API");
        Ok(Daemon {
            socket,
            metrics_address,
            cni,
            metrics,
            cancel,
            server,
            tasks,
            manager,
            images,
            instance,
            streams,
        })
    }

    /// Leaves the daemon as a SIGKILL would: no shutdown, no cleanup, state as it is on disk; only
    /// the instance locks are released, as the kernel releases them for a dead process. For tests
    /// of crash recovery that run the daemon in-process.
    #[doc(hidden)]
    pub fn abandon(self) {
        drop(self.instance);
        self.images.close();
        std::mem::forget(self.cancel);
        std::mem::forget(self.tasks);
    }

    /// Waits until the sandboxes of the last run are recovered (half-made ones rolled back,
    /// interrupted stops and removals finished, CNI garbage collected). The socket serves before
    /// that; RunPodSandbox waits for it.
    pub async fn wait_recovered(&self) {
        self.recovered().await;
    }

    /// A future that completes when recovery has finished, independent of `self`.
    pub(crate) fn recovered(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut recovered = self.manager.recovered();
        async move {
            let _ = recovered.wait_for(|done| *done).await;
        }
    }

    /// The socket served.
    pub fn socket_path(&self) -> &Path {
        &self.socket
    }

    /// Where `/metrics` is served over TCP (`enable_metrics`), with the port the system chose
    /// when the configuration asked for port 0.
    pub fn metrics_address(&self) -> Option<std::net::SocketAddr> {
        self.metrics_address
    }

    /// The metrics registry.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Reloads the network configuration now (what SIGHUP does).
    ///
    /// # Errors
    ///
    /// When the CNI side cannot read its configuration directory.
    pub async fn reload(&self) -> Result<(), ocicni::Error> {
        self.cni.reload().await
    }

    /// Stops serving: no new connections, open ones and running sandbox operations get
    /// 30 seconds each to finish. Sandboxes keep running and their state stays on disk;
    /// the socket file is removed.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when the server failed or the socket file cannot be removed.
    pub async fn shutdown(self) -> Result<()> {
        self.cancel.cancel();
        // Streams end at once: their clients see the connection close, processes exec'd for
        // them are killed, attached containers run on.
        self.streams.shutdown().await;
        // serve() bounds its own wait for open connections by SHUTDOWN_GRACE.
        let served = self.server.await;
        self.tasks.close();
        if tokio::time::timeout(SHUTDOWN_GRACE, self.tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                "sandbox operations still running at shutdown: the next start rolls them back"
            );
        }
        self.cni.shutdown().await;
        self.manager.release_pin_dir().await;
        let removed = match std::fs::remove_file(&self.socket) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(Error::io("cannot remove socket", &self.socket, e))
            }
            _ => Ok(()),
        };
        tracing::info!("shut down");
        served
            .map_err(|e| Error::io("server failed on", &self.socket, std::io::Error::other(e)))?;
        removed
    }
}

/// Binds the socket: parent directory created, a stale socket file replaced (a live one refused),
/// mode 0660.
async fn bind(socket: &Path) -> Result<UnixListener> {
    if let Some(parent) = socket.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .map_err(|e| Error::io("cannot create socket directory", parent, e))?;
    }
    if let Ok(meta) = std::fs::symlink_metadata(socket) {
        if !meta.file_type().is_socket() {
            return Err(Error::io(
                "refusing to replace non-socket",
                socket,
                std::io::Error::from(std::io::ErrorKind::AlreadyExists),
            ));
        }
        if tokio::net::UnixStream::connect(socket).await.is_ok() {
            return Err(Error::io(
                "another daemon is serving on",
                socket,
                std::io::Error::from(std::io::ErrorKind::AddrInUse),
            ));
        }
        std::fs::remove_file(socket)
            .map_err(|e| Error::io("cannot remove stale socket", socket, e))?;
    }
    let listener =
        UnixListener::bind(socket).map_err(|e| Error::io("cannot bind socket", socket, e))?;
    std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o660))
        .map_err(|e| Error::io("cannot set mode 0660 on socket", socket, e))?;
    Ok(listener)
}

/// Pins are bind mounts: made in a mount namespace of the daemon's own (systemd's PrivateMounts=,
/// a container without a shared /run), they vanish with it and every pod comes back broken after
/// a restart. Say so at start, when it can still be fixed.
fn warn_if_private_mounts() {
    let ns = |pid: &str| std::fs::read_link(format!("/proc/{pid}/ns/mnt")).ok();
    if let (Some(own), Some(init)) = (ns("self"), ns("1"))
        && own != init
    {
        tracing::warn!(
            own = %own.display(), init = %init.display(),
            "crio-lite runs in a mount namespace of its own: namespace pins made here are lost \
             when it exits, and pods come back without a network after a restart"
        );
    }
}

/// Counts and times every CRI call by method (`crio_operations*`). A call failed when its
/// response carries a non-zero `grpc-status` header: tonic answers an error with headers only.
async fn count_rpc(
    axum::extract::State(metrics): axum::extract::State<Metrics>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let method = request
        .uri()
        .path()
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .to_owned();
    let started = std::time::Instant::now();
    let response = next.run(request).await;
    let ok = response
        .headers()
        .get("grpc-status")
        .is_none_or(|status| status.as_bytes() == b"0");
    metrics.observe_rpc(&method, ok, started.elapsed());
    response
}

/// Where `/metrics` is served besides the CRI socket, when `enable_metrics` is on: TCP for a
/// Prometheus server (`metrics_host:metrics_port`, as CRI-O) and, when `metrics_socket` is set,
/// a unix socket of its own. Nothing but `/metrics` is reachable there.
struct MetricsListeners {
    tcp: Option<tokio::net::TcpListener>,
    unix: Option<(UnixListener, PathBuf)>,
}

impl MetricsListeners {
    async fn bind(config: &Config) -> Result<MetricsListeners> {
        let table = &config.crio.metrics;
        if !table.enable_metrics {
            return Ok(MetricsListeners {
                tcp: None,
                unix: None,
            });
        }
        let address = format!("{}:{}", table.metrics_host, table.metrics_port);
        let fail = |e: std::io::Error| Error::io("cannot listen for metrics on", &address, e);
        let resolved = tokio::net::lookup_host((table.metrics_host.as_str(), table.metrics_port))
            .await
            .map_err(fail)?
            .next()
            .ok_or_else(|| fail(std::io::Error::from(std::io::ErrorKind::AddrNotAvailable)))?;
        let tcp = tokio::net::TcpListener::bind(resolved)
            .await
            .map_err(fail)?;
        let unix = if table.metrics_socket.as_os_str().is_empty() {
            None
        } else {
            let path = table.metrics_socket.clone();
            Some((bind(&path).await?, path))
        };
        Ok(MetricsListeners {
            tcp: Some(tcp),
            unix,
        })
    }

    /// Serves `/metrics` on each listener until `cancel`.
    fn serve(self, metrics: &Metrics, tasks: &TaskTracker, cancel: &CancellationToken) {
        let router = http_api::metrics_router(metrics.clone());
        if let Some(listener) = self.tcp {
            if let Ok(address) = listener.local_addr() {
                tracing::info!(%address, "serving metrics over TCP");
            }
            let served = axum::serve(listener, router.clone())
                .with_graceful_shutdown(cancel.clone().cancelled_owned());
            tasks.spawn(async move {
                if let Err(e) = served.await {
                    tracing::error!(error = %e, "the metrics listener failed");
                }
            });
        }
        if let Some((listener, path)) = self.unix {
            tracing::info!(socket = %path.display(), "serving metrics on a unix socket");
            let served = axum::serve(listener, router)
                .with_graceful_shutdown(cancel.clone().cancelled_owned());
            tasks.spawn(async move {
                if let Err(e) = served.await {
                    tracing::error!(error = %e, "the metrics socket failed");
                }
                let _ = std::fs::remove_file(&path);
            });
        }
    }
}

/// Starts the streaming server on `[crio.api] stream_*`, its runtime the domain's.
async fn start_streaming(
    config: &Config,
    manager: &Arc<Manager>,
) -> Result<cri_streaming::server::ServerHandle> {
    let api = &config.crio.api;
    let invalid = |key: &str, reason: String| Error::InvalidConfig {
        key: key.to_owned(),
        reason,
    };
    let mut streaming = cri_streaming::server::Config::default();
    streaming.addr = api.stream_socket_addr().ok_or_else(|| {
        invalid(
            "crio.api.stream_address",
            format!(
                "{}:{} is not an address",
                api.stream_address, api.stream_port
            ),
        )
    })?;
    streaming.stream_idle_timeout = api.stream_idle_timeout;
    if api.stream_enable_tls {
        let ca = Some(api.stream_tls_ca.as_path()).filter(|p| !p.as_os_str().is_empty());
        streaming.tls = Some(
            cri_streaming::server::TlsConfig::from_files(
                &api.stream_tls_cert,
                &api.stream_tls_key,
                ca,
            )
            .map_err(|e| invalid("crio.api.stream_tls_cert", e.to_string()))?,
        );
    }
    let runtime = Arc::new(crate::streams::DomainStreams::new(Arc::clone(manager)));
    let handle = cri_streaming::server::Server::start(streaming, runtime)
        .await
        .map_err(|e| invalid("crio.api.stream_address", e.to_string()))?;
    tracing::info!(
        url = handle.base_url(),
        "serving Exec, Attach and PortForward streams"
    );
    Ok(handle)
}

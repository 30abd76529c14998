//! CRI-O's HTTP status API, served on the CRI socket next to gRPC.
//!
//! | request | answer |
//! |---|---|
//! | `GET /info` | [`Info`] as JSON |
//! | `GET /config` | the effective configuration as commented TOML |
//! | `GET /containers/{id}` | [`ContainerInfo`] as JSON (a sandbox or a container; ID or unique prefix), 404 if unknown |
//! | `GET` or `POST /pause/{id}`, `/unpause/{id}` | pauses or resumes a running container (the runtime's freezer) |
//! | `GET /metrics` | Prometheus text format |

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::{Deserialize, Serialize};

use crate::config::Config;
use crate::cri::{CRI_API_VERSION, RUNTIME_NAME};
use crate::domain::{DomainError, Images, Manager};
use crate::metrics::{Format, Metrics};

/// The answer to `GET /info`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Info {
    /// `crio-lite`.
    pub runtime_name: String,
    /// The daemon's version.
    pub version: String,
    /// The CRI version served.
    pub cri_api_version: String,
    /// The CNI side's name (`cni` for ocicni).
    pub cni_plugin: String,
    /// The CNI configuration directory.
    pub network_dir: PathBuf,
    /// The plugin directories.
    pub plugin_dirs: Vec<PathBuf>,
    /// The CNI cache directory.
    pub cache_dir: PathBuf,
    /// The default network in use, if one is loaded.
    pub default_network: Option<String>,
    /// The root directory (`crio.root`), where sandbox state files are.
    pub state_dir: PathBuf,
    /// The run directory (`crio.runroot`).
    pub run_dir: PathBuf,
    /// Where network namespaces are pinned: `<crio.runtime.namespaces_dir>/netns`.
    pub netns_dir: PathBuf,
    /// The socket this answer came through.
    pub socket: PathBuf,
    /// Where images are stored: `<crio.root>/storage` (CRI-O's `storage_root`).
    pub storage_root: PathBuf,
    /// How containers' root file systems are made: `overlay` or `vfs` (CRI-O's
    /// `storage_driver`).
    pub storage_driver: Option<String>,
    /// The signature policy pulls follow; `None` when every image is accepted.
    pub signature_policy: Option<PathBuf>,
    /// How containers' cgroups are managed: `systemd` or `cgroupfs` (CRI-O's
    /// `cgroup_driver`).
    #[serde(default)]
    pub cgroup_driver: String,
    /// The node's cgroup hierarchy: `v1`, `hybrid` (v1 with the unified one beside) or `v2`;
    /// empty when none is mounted.
    #[serde(default)]
    pub cgroup_version: String,
    /// The runtime handler of sandboxes that name none.
    #[serde(default)]
    pub default_runtime: String,
    /// When CNI plugins run built in (`crio_lite.network.builtin_plugins`): `prefer-binary`,
    /// `prefer-builtin` or `never`.
    #[serde(default)]
    pub builtin_plugins: String,
    /// What runs each plugin type of the usable networks: `builtin:<type>` for a built-in,
    /// else the binary's path.
    #[serde(default)]
    pub cni_plugins: BTreeMap<String, PathBuf>,
}

/// One network attachment in [`ContainerInfo`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetworkInfo {
    /// The network.
    pub network: String,
    /// The interface inside the pod.
    pub ifname: String,
    /// The pod's addresses on it.
    pub ips: Vec<IpAddr>,
}

/// The answer to `GET /containers/{id}`: a sandbox, or a container (then `sandbox`, `pid`,
/// `image` and `log_path` are set, and `name`, `namespace`, `uid` are its pod's).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerInfo {
    /// The sandbox ID.
    pub id: String,
    /// The pod's name.
    pub name: String,
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's UID.
    pub uid: String,
    /// The attempt number.
    pub attempt: u32,
    /// `creating`, `ready` or `not_ready`.
    pub state: String,
    /// Creation time, nanoseconds since the epoch.
    pub created_at: i64,
    /// Every address, primary first.
    pub ips: Vec<IpAddr>,
    /// The pinned network namespace; `None` for host-network pods.
    pub netns_path: Option<PathBuf>,
    /// Whether the pod uses the node's network.
    pub host_network: bool,
    /// The attachments.
    pub networks: Vec<NetworkInfo>,
    /// CRI labels.
    pub labels: BTreeMap<String, String>,
    /// CRI annotations.
    pub annotations: BTreeMap<String, String>,
    /// For a container: the container's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_name: Option<String>,
    /// For a container: its sandbox's ID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<String>,
    /// For a container: its process id on the node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<i32>,
    /// For a container: the image it runs, as the request named it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// For a container: its CRI log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_path: Option<PathBuf>,
}

/// One entry of `GET /sandboxes` (crio-lite's own: CRI-O's status API has no listing).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxSummary {
    /// The sandbox ID.
    pub id: String,
    /// The pod's name.
    pub name: String,
    /// The pod's namespace.
    pub namespace: String,
    /// `ready`, `stopping`, `not_ready` or `removing`.
    pub state: String,
    /// Every address, primary first.
    pub ips: Vec<IpAddr>,
    /// Creation time, nanoseconds since the epoch.
    pub created_at: i64,
}

#[derive(Clone)]
struct ApiState {
    manager: Arc<Manager>,
    images: Images,
    config: Arc<Config>,
    metrics: Metrics,
}

/// The HTTP routes, plus a fallback that answers gRPC requests for unknown services the gRPC way.
pub(crate) fn router(
    manager: Arc<Manager>,
    images: Images,
    config: Arc<Config>,
    metrics: Metrics,
) -> axum::Router {
    axum::Router::new()
        .route("/info", get(info))
        .route("/config", get(config_toml))
        .route("/containers/{id}", get(container))
        .route("/pause/{id}", get(pause).post(pause))
        .route("/unpause/{id}", get(unpause).post(unpause))
        .route("/sandboxes", get(sandboxes))
        .route("/metrics", get(metrics_text))
        .with_state(ApiState {
            manager,
            images,
            config,
            metrics,
        })
}

/// Unknown paths: gRPC `Unimplemented` for gRPC clients, 404 for everyone else.
pub(crate) async fn fallback(request: Request) -> Response {
    let is_grpc = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/grpc"));
    if is_grpc {
        let mut response = StatusCode::OK.into_response();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/grpc"),
        );
        headers.insert("grpc-status", HeaderValue::from_static("12"));
        headers.insert(
            "grpc-message",
            HeaderValue::from_static(
                "crio-lite serves runtime.v1 RuntimeService and ImageService only",
            ),
        );
        return response;
    }
    (
        StatusCode::NOT_FOUND,
        format!(
            "no such endpoint {}: try /info, /config, /containers/ID or /metrics\n",
            request.uri().path()
        ),
    )
        .into_response()
}

async fn info(State(state): State<ApiState>) -> Json<Info> {
    let cni = state.manager.cni();
    let config = &state.config;
    let network = &config.crio.network;
    Json(Info {
        runtime_name: RUNTIME_NAME.to_owned(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        cri_api_version: CRI_API_VERSION.to_owned(),
        cni_plugin: cni.name().to_owned(),
        network_dir: network.network_dir.clone(),
        plugin_dirs: network.plugin_dirs.clone(),
        cache_dir: config.crio_lite.network.cache_dir.clone(),
        default_network: cni.default_network_name(),
        state_dir: config.crio.root.clone(),
        run_dir: config.crio.runroot.clone(),
        netns_dir: state.manager.netns_dir().to_owned(),
        socket: config.crio.api.listen.clone(),
        storage_root: state.images.root().to_owned(),
        storage_driver: state.images.storage_driver().map(str::to_owned),
        signature_policy: state.images.signature_policy(),
        cgroup_driver: config.cgroups().0.name().to_owned(),
        cgroup_version: oci_container::CgroupVersion::of_node()
            .map_or("", oci_container::CgroupVersion::name)
            .to_owned(),
        default_runtime: config.crio.runtime.default_runtime.clone(),
        builtin_plugins: config.crio_lite.network.builtin_plugins.to_string(),
        cni_plugins: cni
            .plugin_implementations()
            .into_iter()
            .map(|p| (p.plugin, p.path))
            .collect(),
    })
}

async fn config_toml(State(state): State<ApiState>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "application/toml; charset=utf-8")],
        state.config.to_commented_toml(),
    )
}

async fn sandboxes(State(state): State<ApiState>) -> Json<Vec<SandboxSummary>> {
    Json(
        state
            .manager
            .list()
            .into_iter()
            .map(|sandbox| SandboxSummary {
                ips: sandbox.ips(),
                state: sandbox.state.as_str().to_owned(),
                id: sandbox.id,
                name: sandbox.name.name,
                namespace: sandbox.name.namespace,
                created_at: sandbox.created_at,
            })
            .collect(),
    )
}

async fn container(State(state): State<ApiState>, Path(id): Path<String>) -> Response {
    let found = match state.manager.containers().await {
        Ok(containers) => containers.get(&id).ok(),
        Err(_) => None,
    };
    if let Some(c) = found {
        let state_name = c.visible_state().as_str().to_owned();
        let pod = state.manager.get(&c.sandbox_id).ok();
        return Json(ContainerInfo {
            ips: pod
                .as_ref()
                .map(crate::domain::Sandbox::ips)
                .unwrap_or_default(),
            id: c.id,
            name: pod
                .as_ref()
                .map(|p| p.name.name.clone())
                .unwrap_or_default(),
            namespace: pod
                .as_ref()
                .map(|p| p.name.namespace.clone())
                .unwrap_or_default(),
            uid: pod.as_ref().map(|p| p.name.uid.clone()).unwrap_or_default(),
            attempt: c.attempt,
            state: state_name,
            created_at: c.created_at,
            netns_path: pod.as_ref().and_then(|p| p.netns_path.clone()),
            host_network: pod.as_ref().is_some_and(|p| p.host_network),
            networks: Vec::new(),
            labels: c.labels,
            annotations: c.annotations,
            container_name: Some(c.name),
            sandbox: Some(c.sandbox_id),
            pid: c.pid,
            image: Some(c.image),
            log_path: Some(c.log_path),
        })
        .into_response();
    }
    match state.manager.get(&id) {
        Ok(sandbox) => Json(ContainerInfo {
            ips: sandbox.ips(),
            id: sandbox.id,
            name: sandbox.name.name,
            namespace: sandbox.name.namespace,
            uid: sandbox.name.uid,
            attempt: sandbox.name.attempt,
            state: sandbox.state.as_str().to_owned(),
            created_at: sandbox.created_at,
            netns_path: sandbox.netns_path,
            host_network: sandbox.host_network,
            networks: sandbox
                .attachments
                .into_iter()
                .map(|a| NetworkInfo {
                    network: a.network,
                    ifname: a.ifname,
                    ips: a.ips,
                })
                .collect(),
            labels: sandbox.labels,
            annotations: sandbox.annotations,
            container_name: None,
            sandbox: None,
            pid: None,
            image: None,
            log_path: None,
        })
        .into_response(),
        Err(error) => {
            let code = match error {
                DomainError::NotFound { .. } => StatusCode::NOT_FOUND,
                _ => StatusCode::BAD_REQUEST,
            };
            (code, format!("{error}\n")).into_response()
        }
    }
}

async fn pause(State(state): State<ApiState>, Path(id): Path<String>) -> Response {
    freeze(&state, &id, true).await
}

async fn unpause(State(state): State<ApiState>, Path(id): Path<String>) -> Response {
    freeze(&state, &id, false).await
}

async fn freeze(state: &ApiState, id: &str, pause: bool) -> Response {
    let outcome = match state.manager.containers().await {
        Ok(containers) => containers.pause(id, pause).await,
        Err(e) => Err(e),
    };
    match outcome {
        Ok(()) => (
            StatusCode::OK,
            format!("{}\n", if pause { "paused" } else { "unpaused" }),
        )
            .into_response(),
        Err(error) => {
            let code = match error {
                DomainError::ContainerNotFound { .. } => StatusCode::NOT_FOUND,
                DomainError::ContainerState { .. } => StatusCode::CONFLICT,
                DomainError::InvalidField { .. } => StatusCode::BAD_REQUEST,
                _ => StatusCode::INTERNAL_SERVER_ERROR,
            };
            (code, format!("{error}\n")).into_response()
        }
    }
}

async fn metrics_text(State(state): State<ApiState>, headers: HeaderMap) -> Response {
    metrics_response(&state.metrics, &headers)
}

/// The metrics in the format the scraper's `Accept` header asks for.
fn metrics_response(metrics: &Metrics, headers: &HeaderMap) -> Response {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    let format = Format::from_accept(accept);
    (
        [(header::CONTENT_TYPE, format.content_type())],
        metrics.encode_as(format),
    )
        .into_response()
}

/// `/metrics` alone, for the TCP listener a Prometheus server scrapes (`metrics_host`,
/// `metrics_port`) and the metrics socket: nothing else of the daemon is reachable there.
pub(crate) fn metrics_router(metrics: Metrics) -> axum::Router {
    axum::Router::new().route(
        "/metrics",
        get(
            |State(metrics): State<Metrics>, headers: HeaderMap| async move {
                metrics_response(&metrics, &headers)
            },
        )
        .with_state(metrics),
    )
}

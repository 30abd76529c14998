//! The CRI `RuntimeService`: sandbox and container RPCs translated to the domain's
//! [`Manager`]; streaming RPCs refused until they are served.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use cri_api::v1 as cri;
use cri_api::v1::runtime_service_server::RuntimeService;
use tokio_util::task::TaskTracker;
use tonic::{Request, Response, Status};

use super::{container, convert};
use crate::config::Config;
use crate::domain::{DomainResult, Manager};

/// The runtime name reported by `Version`.
pub const RUNTIME_NAME: &str = "crio-lite";
/// The CRI version crio-lite speaks.
pub const CRI_API_VERSION: &str = "v1";

/// Serves RuntimeService on top of a manager.
pub(crate) struct RuntimeApi {
    manager: Arc<Manager>,
    config: Arc<Config>,
    /// The streaming server Exec, Attach and PortForward hand out URLs on.
    streams: Arc<cri_streaming::server::ServerHandle>,
    /// Sandbox operations run as tasks so a client that hangs up does not cut one in half; the
    /// daemon waits for them at shutdown.
    tasks: TaskTracker,
}

impl RuntimeApi {
    /// A pod's stats: each container's, and the pod's CPU, memory and processes as the sums of
    /// its running containers' cgroups.
    async fn pod_stats(
        &self,
        sandbox: &crate::domain::Sandbox,
    ) -> Result<cri::PodSandboxStats, Status> {
        let containers = self.manager.containers().await?;
        let mut each = Vec::new();
        for c in containers.list() {
            if c.sandbox_id != sandbox.id {
                continue;
            }
            // A container removed meanwhile is left out.
            if let Ok(found) = containers.stats(&c.id).await {
                each.push(found);
            }
        }
        Ok(container::pod_stats(sandbox, &each, &self.storage_root()))
    }

    pub(crate) fn new(
        manager: Arc<Manager>,
        config: Arc<Config>,
        streams: Arc<cri_streaming::server::ServerHandle>,
        tasks: TaskTracker,
    ) -> Self {
        RuntimeApi {
            manager,
            config,
            streams,
            tasks,
        }
    }

    fn storage_root(&self) -> String {
        self.config
            .crio
            .root
            .join(crate::domain::STORAGE_DIR)
            .to_string_lossy()
            .into_owned()
    }

    async fn in_task<T: Send + 'static>(
        &self,
        op: impl Future<Output = DomainResult<T>> + Send + 'static,
    ) -> Result<T, Status> {
        self.tasks
            .spawn(op)
            .await
            .map_err(|e| Status::internal(format!("sandbox operation aborted: {e}")))?
            .map_err(Status::from)
    }
}

fn later(rpc: &str) -> Status {
    Status::unimplemented(format!(
        "{rpc}: not served yet; the streaming calls (Exec, Attach, PortForward), sandbox stats, \
         checkpoints and events come in a later release"
    ))
}

fn json(value: &impl serde::Serialize) -> String {
    serde_json::to_string(value).unwrap_or_else(|e| format!("{{\"error\":{:?}}}", e.to_string()))
}

#[tonic::async_trait]
impl RuntimeService for RuntimeApi {
    async fn version(
        &self,
        _request: Request<cri::VersionRequest>,
    ) -> Result<Response<cri::VersionResponse>, Status> {
        Ok(Response::new(cri::VersionResponse {
            version: "0.1.0".to_owned(),
            runtime_name: RUNTIME_NAME.to_owned(),
            runtime_version: env!("CARGO_PKG_VERSION").to_owned(),
            runtime_api_version: CRI_API_VERSION.to_owned(),
        }))
    }

    async fn run_pod_sandbox(
        &self,
        request: Request<cri::RunPodSandboxRequest>,
    ) -> Result<Response<cri::RunPodSandboxResponse>, Status> {
        let sandbox = convert::sandbox_from_request(request.into_inner())?;
        let id = self.in_task(Arc::clone(&self.manager).run(sandbox)).await?;
        Ok(Response::new(cri::RunPodSandboxResponse {
            pod_sandbox_id: id,
        }))
    }

    async fn stop_pod_sandbox(
        &self,
        request: Request<cri::StopPodSandboxRequest>,
    ) -> Result<Response<cri::StopPodSandboxResponse>, Status> {
        let id = request.into_inner().pod_sandbox_id;
        self.in_task(Arc::clone(&self.manager).stop(id)).await?;
        Ok(Response::new(cri::StopPodSandboxResponse {}))
    }

    async fn remove_pod_sandbox(
        &self,
        request: Request<cri::RemovePodSandboxRequest>,
    ) -> Result<Response<cri::RemovePodSandboxResponse>, Status> {
        let id = request.into_inner().pod_sandbox_id;
        self.in_task(Arc::clone(&self.manager).remove(id)).await?;
        Ok(Response::new(cri::RemovePodSandboxResponse {}))
    }

    async fn pod_sandbox_status(
        &self,
        request: Request<cri::PodSandboxStatusRequest>,
    ) -> Result<Response<cri::PodSandboxStatusResponse>, Status> {
        let request = request.into_inner();
        let sandbox = self.manager.get(&request.pod_sandbox_id)?;
        let mut info = HashMap::new();
        if request.verbose {
            info.insert("info".to_owned(), json(&sandbox));
        }
        Ok(Response::new(cri::PodSandboxStatusResponse {
            status: Some(convert::status(&sandbox)),
            info,
            containers_statuses: Vec::new(),
            timestamp: 0,
        }))
    }

    async fn list_pod_sandbox(
        &self,
        request: Request<cri::ListPodSandboxRequest>,
    ) -> Result<Response<cri::ListPodSandboxResponse>, Status> {
        let filter = request.into_inner().filter.unwrap_or_default();
        let items = self
            .manager
            .list()
            .iter()
            .filter(|s| convert::matches(s, &filter))
            .map(convert::list_entry)
            .collect();
        Ok(Response::new(cri::ListPodSandboxResponse { items }))
    }

    async fn update_runtime_config(
        &self,
        request: Request<cri::UpdateRuntimeConfigRequest>,
    ) -> Result<Response<cri::UpdateRuntimeConfigResponse>, Status> {
        let cidr = request
            .into_inner()
            .runtime_config
            .and_then(|c| c.network_config)
            .map(|n| n.pod_cidr)
            .unwrap_or_default();
        // kubelet sends "v4cidr,v6cidr" on dual-stack nodes; ocicni takes one range.
        let first = cidr.split(',').map(str::trim).find(|c| !c.is_empty());
        let parsed = match first {
            None => None,
            Some(text) => Some(text.parse::<ipnet::IpNet>().map_err(|e| {
                Status::invalid_argument(format!(
                    "runtime_config.network_config.pod_cidr: {text:?} is not a CIDR: {e}"
                ))
            })?),
        };
        tracing::info!(pod_cidr = ?parsed, "UpdateRuntimeConfig");
        self.manager.cni().set_pod_cidr(parsed).await;
        Ok(Response::new(cri::UpdateRuntimeConfigResponse {}))
    }

    async fn status(
        &self,
        request: Request<cri::StatusRequest>,
    ) -> Result<Response<cri::StatusResponse>, Status> {
        let network = self.manager.cni().status().await;
        let conditions = vec![
            cri::RuntimeCondition {
                r#type: "RuntimeReady".to_owned(),
                status: true,
                reason: String::new(),
                message: String::new(),
            },
            cri::RuntimeCondition {
                r#type: "NetworkReady".to_owned(),
                status: network.ready,
                reason: network.reason.clone(),
                message: network.message.clone(),
            },
        ];
        let mut info = HashMap::new();
        if request.into_inner().verbose {
            info.insert("config".to_owned(), json(&*self.config));
            info.insert(
                "network".to_owned(),
                json(&serde_json::json!({
                    "plugin": self.manager.cni().name(),
                    "defaultNetwork": self.manager.cni().default_network_name(),
                    "ready": network.ready,
                    "reason": network.reason,
                    "message": network.message,
                })),
            );
        }
        Ok(Response::new(cri::StatusResponse {
            status: Some(cri::RuntimeStatus { conditions }),
            info,
            runtime_handlers: std::iter::once(String::new())
                .chain(self.config.runtime_handlers().into_keys())
                .map(|name| cri::RuntimeHandler {
                    name,
                    features: None,
                })
                .collect(),
            // Supplemental groups follow the request's Merge or Strict policy, and
            // ContainerStatus reports the process's user.
            features: Some(cri::RuntimeFeatures {
                supplemental_groups_policy: true,
            }),
        }))
    }

    async fn create_container(
        &self,
        request: Request<cri::CreateContainerRequest>,
    ) -> Result<Response<cri::CreateContainerResponse>, Status> {
        let (sandbox, request) = container::request(request.into_inner())?;
        let manager = Arc::clone(&self.manager);
        let id = self
            .in_task(async move { manager.create_container(sandbox, request).await })
            .await?;
        Ok(Response::new(cri::CreateContainerResponse {
            container_id: id,
        }))
    }

    async fn start_container(
        &self,
        request: Request<cri::StartContainerRequest>,
    ) -> Result<Response<cri::StartContainerResponse>, Status> {
        let id = request.into_inner().container_id;
        let manager = Arc::clone(&self.manager);
        self.in_task(async move { manager.containers().await?.start(&id).await })
            .await?;
        Ok(Response::new(cri::StartContainerResponse {}))
    }

    async fn stop_container(
        &self,
        request: Request<cri::StopContainerRequest>,
    ) -> Result<Response<cri::StopContainerResponse>, Status> {
        let request = request.into_inner();
        let timeout = Duration::from_secs(u64::try_from(request.timeout).unwrap_or(0));
        let manager = Arc::clone(&self.manager);
        self.in_task(async move {
            manager
                .containers()
                .await?
                .stop(&request.container_id, timeout)
                .await
        })
        .await?;
        Ok(Response::new(cri::StopContainerResponse {}))
    }

    async fn remove_container(
        &self,
        request: Request<cri::RemoveContainerRequest>,
    ) -> Result<Response<cri::RemoveContainerResponse>, Status> {
        let id = request.into_inner().container_id;
        let manager = Arc::clone(&self.manager);
        self.in_task(async move { manager.containers().await?.remove(&id).await })
            .await?;
        Ok(Response::new(cri::RemoveContainerResponse {}))
    }

    async fn list_containers(
        &self,
        request: Request<cri::ListContainersRequest>,
    ) -> Result<Response<cri::ListContainersResponse>, Status> {
        let filter = request.into_inner().filter.unwrap_or_default();
        let containers = self
            .manager
            .containers()
            .await?
            .list()
            .iter()
            .filter(|c| container::matches(c, &filter))
            .map(container::list_entry)
            .collect();
        Ok(Response::new(cri::ListContainersResponse { containers }))
    }

    async fn container_status(
        &self,
        request: Request<cri::ContainerStatusRequest>,
    ) -> Result<Response<cri::ContainerStatusResponse>, Status> {
        let request = request.into_inner();
        let found = self
            .manager
            .containers()
            .await?
            .get(&request.container_id)?;
        Ok(Response::new(cri::ContainerStatusResponse {
            status: Some(container::status(&found)),
            info: if request.verbose {
                container::info(&found)
            } else {
                HashMap::new()
            },
        }))
    }

    async fn update_container_resources(
        &self,
        request: Request<cri::UpdateContainerResourcesRequest>,
    ) -> Result<Response<cri::UpdateContainerResourcesResponse>, Status> {
        let request = request.into_inner();
        let limits = container::limits(&request.linux.unwrap_or_default());
        let manager = Arc::clone(&self.manager);
        self.in_task(async move {
            manager
                .containers()
                .await?
                .update(&request.container_id, limits)
                .await
        })
        .await?;
        Ok(Response::new(cri::UpdateContainerResourcesResponse {}))
    }

    async fn reopen_container_log(
        &self,
        request: Request<cri::ReopenContainerLogRequest>,
    ) -> Result<Response<cri::ReopenContainerLogResponse>, Status> {
        let id = request.into_inner().container_id;
        self.manager.containers().await?.reopen_log(&id).await?;
        Ok(Response::new(cri::ReopenContainerLogResponse {}))
    }

    async fn exec_sync(
        &self,
        request: Request<cri::ExecSyncRequest>,
    ) -> Result<Response<cri::ExecSyncResponse>, Status> {
        let request = request.into_inner();
        let timeout = Duration::from_secs(u64::try_from(request.timeout).unwrap_or(0));
        let out = self
            .manager
            .containers()
            .await?
            .exec_sync(&request.container_id, &request.cmd, timeout)
            .await?;
        if out.timed_out {
            return Err(Status::deadline_exceeded(format!(
                "ExecSync in container {}: {:?} did not finish in {timeout:?} and was killed",
                request.container_id, request.cmd
            )));
        }
        Ok(Response::new(cri::ExecSyncResponse {
            stdout: out.stdout,
            stderr: out.stderr,
            exit_code: out.exit_code,
        }))
    }

    async fn exec(
        &self,
        request: Request<cri::ExecRequest>,
    ) -> Result<Response<cri::ExecResponse>, Status> {
        let req = request.into_inner();
        check_streams("ExecRequest", req.tty, [req.stdin, req.stdout, req.stderr])?;
        if req.cmd.is_empty() {
            return Err(Status::invalid_argument("ExecRequest.cmd: empty"));
        }
        let container = self
            .manager
            .containers()
            .await?
            .running(&req.container_id)?;
        let url = self
            .streams
            .get_exec(cri_streaming::runtime::ExecRequest {
                container_id: container.id,
                cmd: req.cmd,
                tty: req.tty,
                stdin: req.stdin,
                stdout: req.stdout,
                stderr: req.stderr,
            })
            .map_err(stream_error)?;
        Ok(Response::new(cri::ExecResponse { url }))
    }

    async fn attach(
        &self,
        request: Request<cri::AttachRequest>,
    ) -> Result<Response<cri::AttachResponse>, Status> {
        let req = request.into_inner();
        check_streams(
            "AttachRequest",
            req.tty,
            [req.stdin, req.stdout, req.stderr],
        )?;
        let container = self
            .manager
            .containers()
            .await?
            .running(&req.container_id)?;
        let url = self
            .streams
            .get_attach(cri_streaming::runtime::AttachRequest {
                container_id: container.id,
                tty: req.tty,
                stdin: req.stdin,
                stdout: req.stdout,
                stderr: req.stderr,
            })
            .map_err(stream_error)?;
        Ok(Response::new(cri::AttachResponse { url }))
    }

    async fn port_forward(
        &self,
        request: Request<cri::PortForwardRequest>,
    ) -> Result<Response<cri::PortForwardResponse>, Status> {
        let req = request.into_inner();
        let ports = req
            .port
            .iter()
            .map(|&port| {
                u16::try_from(port).ok().filter(|&p| p > 0).ok_or_else(|| {
                    Status::invalid_argument(format!(
                        "PortForwardRequest.port: {port} is not a port (1 to 65535)"
                    ))
                })
            })
            .collect::<Result<Vec<u16>, Status>>()?;
        let sandbox = self.manager.get(&req.pod_sandbox_id)?;
        if sandbox.state != crate::domain::SandboxState::Ready {
            return Err(Status::failed_precondition(format!(
                "sandbox {} is not ready",
                sandbox.id
            )));
        }
        let url = self
            .streams
            .get_port_forward(cri_streaming::runtime::PortForwardRequest {
                pod_sandbox_id: sandbox.id,
                ports,
            })
            .map_err(stream_error)?;
        Ok(Response::new(cri::PortForwardResponse { url }))
    }

    async fn container_stats(
        &self,
        request: Request<cri::ContainerStatsRequest>,
    ) -> Result<Response<cri::ContainerStatsResponse>, Status> {
        let id = request.into_inner().container_id;
        let (found, cgroup, usage) = self.manager.containers().await?.stats(&id).await?;
        Ok(Response::new(cri::ContainerStatsResponse {
            stats: Some(container::stats(
                &found,
                cgroup.as_ref(),
                usage,
                &self.storage_root(),
            )),
        }))
    }

    async fn list_container_stats(
        &self,
        request: Request<cri::ListContainerStatsRequest>,
    ) -> Result<Response<cri::ListContainerStatsResponse>, Status> {
        let filter = request.into_inner().filter.unwrap_or_default();
        let containers = self.manager.containers().await?;
        let mut stats = Vec::new();
        for c in containers.list() {
            if !container::matches_stats(&c, &filter) {
                continue;
            }
            // A container removed meanwhile is left out.
            if let Ok((found, cgroup, usage)) = containers.stats(&c.id).await {
                stats.push(container::stats(
                    &found,
                    cgroup.as_ref(),
                    usage,
                    &self.storage_root(),
                ));
            }
        }
        Ok(Response::new(cri::ListContainerStatsResponse { stats }))
    }

    async fn pod_sandbox_stats(
        &self,
        request: Request<cri::PodSandboxStatsRequest>,
    ) -> Result<Response<cri::PodSandboxStatsResponse>, Status> {
        let id = request.into_inner().pod_sandbox_id;
        let sandbox = self.manager.get(&id)?;
        Ok(Response::new(cri::PodSandboxStatsResponse {
            stats: Some(self.pod_stats(&sandbox).await?),
        }))
    }

    async fn list_pod_sandbox_stats(
        &self,
        request: Request<cri::ListPodSandboxStatsRequest>,
    ) -> Result<Response<cri::ListPodSandboxStatsResponse>, Status> {
        let filter = request.into_inner().filter.unwrap_or_default();
        let mut stats = Vec::new();
        for sandbox in self.manager.list() {
            let wanted = (filter.id.is_empty() || sandbox.id.starts_with(&filter.id))
                && filter
                    .label_selector
                    .iter()
                    .all(|(k, v)| sandbox.labels.get(k) == Some(v));
            if wanted {
                stats.push(self.pod_stats(&sandbox).await?);
            }
        }
        Ok(Response::new(cri::ListPodSandboxStatsResponse { stats }))
    }

    async fn checkpoint_container(
        &self,
        _request: Request<cri::CheckpointContainerRequest>,
    ) -> Result<Response<cri::CheckpointContainerResponse>, Status> {
        Err(later("CheckpointContainer"))
    }

    type GetContainerEventsStream = tonic::codegen::BoxStream<cri::ContainerEventResponse>;

    async fn get_container_events(
        &self,
        _request: Request<cri::GetEventsRequest>,
    ) -> Result<Response<Self::GetContainerEventsStream>, Status> {
        Err(later("GetContainerEvents"))
    }

    async fn list_metric_descriptors(
        &self,
        _request: Request<cri::ListMetricDescriptorsRequest>,
    ) -> Result<Response<cri::ListMetricDescriptorsResponse>, Status> {
        Err(later("ListMetricDescriptors"))
    }

    async fn list_pod_sandbox_metrics(
        &self,
        _request: Request<cri::ListPodSandboxMetricsRequest>,
    ) -> Result<Response<cri::ListPodSandboxMetricsResponse>, Status> {
        Err(later("ListPodSandboxMetrics"))
    }

    async fn runtime_config(
        &self,
        _request: Request<cri::RuntimeConfigRequest>,
    ) -> Result<Response<cri::RuntimeConfigResponse>, Status> {
        // kubelet (1.28+, KubeletCgroupDriverFromCRI) takes its cgroup driver from here.
        let cgroup_driver = match self.config.cgroups().0 {
            oci_container::CgroupManager::Systemd => cri::CgroupDriver::Systemd,
            _ => cri::CgroupDriver::Cgroupfs,
        };
        Ok(Response::new(cri::RuntimeConfigResponse {
            linux: Some(cri::LinuxRuntimeConfiguration {
                cgroup_driver: cgroup_driver.into(),
            }),
        }))
    }
}

/// What kubelet's streaming server refuses of an Exec or Attach request: no stream at all, and
/// stderr beside a terminal (which carries both).
fn check_streams(what: &str, tty: bool, [stdin, stdout, stderr]: [bool; 3]) -> Result<(), Status> {
    if !(stdin || stdout || stderr) {
        return Err(Status::invalid_argument(format!(
            "{what}: one of stdin, stdout and stderr must be set"
        )));
    }
    if tty && stderr {
        return Err(Status::invalid_argument(format!(
            "{what}: tty and stderr cannot both be set (the terminal carries both)"
        )));
    }
    Ok(())
}

/// A streaming request the server refuses.
fn stream_error(e: cri_streaming::Error) -> Status {
    match e {
        cri_streaming::Error::TooManyInFlight { .. } => Status::resource_exhausted(e.to_string()),
        cri_streaming::Error::InvalidRequest(_) => Status::invalid_argument(e.to_string()),
        other => Status::internal(other.to_string()),
    }
}

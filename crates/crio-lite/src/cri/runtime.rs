//! The CRI `RuntimeService`: sandbox RPCs translated to the domain's [`Manager`];
//! container, exec and streaming RPCs refused.

use std::collections::HashMap;
use std::sync::Arc;

use cri_api::v1 as cri;
use cri_api::v1::runtime_service_server::RuntimeService;
use tokio_util::task::TaskTracker;
use tonic::{Request, Response, Status};

use super::convert;
use crate::config::Config;
use crate::domain::{Manager, SandboxResult};

/// The runtime name reported by `Version`.
pub const RUNTIME_NAME: &str = "crio-lite";
/// The CRI version crio-lite speaks.
pub const CRI_API_VERSION: &str = "v1";

/// Serves RuntimeService on top of a manager.
pub(crate) struct RuntimeApi {
    manager: Arc<Manager>,
    config: Arc<Config>,
    /// Sandbox operations run as tasks so a client that hangs up does not cut one in half; the
    /// daemon waits for them at shutdown.
    tasks: TaskTracker,
}

impl RuntimeApi {
    pub(crate) fn new(manager: Arc<Manager>, config: Arc<Config>, tasks: TaskTracker) -> Self {
        RuntimeApi {
            manager,
            config,
            tasks,
        }
    }

    async fn in_task<T: Send + 'static>(
        &self,
        op: impl Future<Output = SandboxResult<T>> + Send + 'static,
    ) -> Result<T, Status> {
        self.tasks
            .spawn(op)
            .await
            .map_err(|e| Status::internal(format!("sandbox operation aborted: {e}")))?
            .map_err(Status::from)
    }
}

fn no_containers(rpc: &str) -> Status {
    Status::unimplemented(format!(
        "{rpc}: crio-lite runs no containers; it manages pod sandboxes and their networks only"
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
            runtime_handlers: vec![cri::RuntimeHandler {
                name: String::new(),
                features: None,
            }],
            features: None,
        }))
    }

    async fn create_container(
        &self,
        _request: Request<cri::CreateContainerRequest>,
    ) -> Result<Response<cri::CreateContainerResponse>, Status> {
        Err(no_containers("CreateContainer"))
    }

    async fn start_container(
        &self,
        _request: Request<cri::StartContainerRequest>,
    ) -> Result<Response<cri::StartContainerResponse>, Status> {
        Err(no_containers("StartContainer"))
    }

    async fn stop_container(
        &self,
        _request: Request<cri::StopContainerRequest>,
    ) -> Result<Response<cri::StopContainerResponse>, Status> {
        Err(no_containers("StopContainer"))
    }

    async fn remove_container(
        &self,
        _request: Request<cri::RemoveContainerRequest>,
    ) -> Result<Response<cri::RemoveContainerResponse>, Status> {
        Err(no_containers("RemoveContainer"))
    }

    async fn list_containers(
        &self,
        _request: Request<cri::ListContainersRequest>,
    ) -> Result<Response<cri::ListContainersResponse>, Status> {
        // Polled by kubelet and `crictl ps`/`stats`/`statsp`: no containers means an empty
        // list, as CRI-O answers with none, not an error on every poll.
        Ok(Response::new(cri::ListContainersResponse {
            containers: Vec::new(),
        }))
    }

    async fn container_status(
        &self,
        _request: Request<cri::ContainerStatusRequest>,
    ) -> Result<Response<cri::ContainerStatusResponse>, Status> {
        Err(no_containers("ContainerStatus"))
    }

    async fn update_container_resources(
        &self,
        _request: Request<cri::UpdateContainerResourcesRequest>,
    ) -> Result<Response<cri::UpdateContainerResourcesResponse>, Status> {
        Err(no_containers("UpdateContainerResources"))
    }

    async fn reopen_container_log(
        &self,
        _request: Request<cri::ReopenContainerLogRequest>,
    ) -> Result<Response<cri::ReopenContainerLogResponse>, Status> {
        Err(no_containers("ReopenContainerLog"))
    }

    async fn exec_sync(
        &self,
        _request: Request<cri::ExecSyncRequest>,
    ) -> Result<Response<cri::ExecSyncResponse>, Status> {
        Err(no_containers("ExecSync"))
    }

    async fn exec(
        &self,
        _request: Request<cri::ExecRequest>,
    ) -> Result<Response<cri::ExecResponse>, Status> {
        Err(no_containers("Exec"))
    }

    async fn attach(
        &self,
        _request: Request<cri::AttachRequest>,
    ) -> Result<Response<cri::AttachResponse>, Status> {
        Err(no_containers("Attach"))
    }

    async fn port_forward(
        &self,
        _request: Request<cri::PortForwardRequest>,
    ) -> Result<Response<cri::PortForwardResponse>, Status> {
        Err(no_containers("PortForward"))
    }

    async fn container_stats(
        &self,
        _request: Request<cri::ContainerStatsRequest>,
    ) -> Result<Response<cri::ContainerStatsResponse>, Status> {
        Err(no_containers("ContainerStats"))
    }

    async fn list_container_stats(
        &self,
        _request: Request<cri::ListContainerStatsRequest>,
    ) -> Result<Response<cri::ListContainerStatsResponse>, Status> {
        // Polled by kubelet and `crictl ps`/`stats`/`statsp`: no containers means an empty
        // list, as CRI-O answers with none, not an error on every poll.
        Ok(Response::new(cri::ListContainerStatsResponse {
            stats: Vec::new(),
        }))
    }

    async fn pod_sandbox_stats(
        &self,
        _request: Request<cri::PodSandboxStatsRequest>,
    ) -> Result<Response<cri::PodSandboxStatsResponse>, Status> {
        Err(no_containers("PodSandboxStats"))
    }

    async fn list_pod_sandbox_stats(
        &self,
        _request: Request<cri::ListPodSandboxStatsRequest>,
    ) -> Result<Response<cri::ListPodSandboxStatsResponse>, Status> {
        // Polled by kubelet and `crictl ps`/`stats`/`statsp`: no containers means an empty
        // list, as CRI-O answers with none, not an error on every poll.
        Ok(Response::new(cri::ListPodSandboxStatsResponse {
            stats: Vec::new(),
        }))
    }

    async fn checkpoint_container(
        &self,
        _request: Request<cri::CheckpointContainerRequest>,
    ) -> Result<Response<cri::CheckpointContainerResponse>, Status> {
        Err(no_containers("CheckpointContainer"))
    }

    type GetContainerEventsStream = tonic::codegen::BoxStream<cri::ContainerEventResponse>;

    async fn get_container_events(
        &self,
        _request: Request<cri::GetEventsRequest>,
    ) -> Result<Response<Self::GetContainerEventsStream>, Status> {
        Err(no_containers("GetContainerEvents"))
    }

    async fn list_metric_descriptors(
        &self,
        _request: Request<cri::ListMetricDescriptorsRequest>,
    ) -> Result<Response<cri::ListMetricDescriptorsResponse>, Status> {
        Err(no_containers("ListMetricDescriptors"))
    }

    async fn list_pod_sandbox_metrics(
        &self,
        _request: Request<cri::ListPodSandboxMetricsRequest>,
    ) -> Result<Response<cri::ListPodSandboxMetricsResponse>, Status> {
        Err(no_containers("ListPodSandboxMetrics"))
    }

    async fn runtime_config(
        &self,
        _request: Request<cri::RuntimeConfigRequest>,
    ) -> Result<Response<cri::RuntimeConfigResponse>, Status> {
        Err(Status::unimplemented(
            "RuntimeConfig: crio-lite manages no cgroups and reports no cgroup driver",
        ))
    }
}

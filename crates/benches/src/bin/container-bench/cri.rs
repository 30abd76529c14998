//! The CRI calls, the same for crio-lite and containerd: kubelet's requests for a pod of one
//! container, over one connection per daemon.

use std::path::Path;
use std::time::{Duration, Instant};

use cri_api::v1 as cri;
use cri_api::v1::image_service_client::ImageServiceClient;
use cri_api::v1::runtime_service_client::RuntimeServiceClient;
use tonic::transport::Channel;

/// A daemon's runtime and image services on one connection.
#[derive(Clone)]
pub(crate) struct Cri {
    pub(crate) runtime: RuntimeServiceClient<Channel>,
    pub(crate) images: ImageServiceClient<Channel>,
}

impl Cri {
    pub(crate) async fn connect(socket: &Path) -> Result<Cri, String> {
        let channel = benches::cri_channel(socket).await?;
        Ok(Cri {
            runtime: RuntimeServiceClient::new(channel.clone()),
            images: ImageServiceClient::new(channel),
        })
    }

    /// Whether the runtime reports itself and its network ready.
    pub(crate) async fn ready(&self) -> Result<(), String> {
        let status = self
            .runtime
            .clone()
            .status(cri::StatusRequest { verbose: false })
            .await
            .map_err(|e| format!("Status: {}", e.message()))?
            .into_inner()
            .status
            .unwrap_or_default();
        let not_ready: Vec<String> = status
            .conditions
            .iter()
            .filter(|c| !c.status)
            .map(|c| format!("{} ({}: {})", c.r#type, c.reason, c.message))
            .collect();
        if status.conditions.is_empty() || !not_ready.is_empty() {
            return Err(format!("not ready: {}", not_ready.join(", ")));
        }
        Ok(())
    }

    pub(crate) async fn pull(&self, reference: &str) -> Result<(), String> {
        self.images
            .clone()
            .pull_image(cri::PullImageRequest {
                image: Some(cri::ImageSpec {
                    image: reference.to_owned(),
                    ..cri::ImageSpec::default()
                }),
                auth: None,
                sandbox_config: None,
            })
            .await
            .map(drop)
            .map_err(|e| format!("PullImage {reference}: {}", e.message()))
    }

    pub(crate) async fn run_sandbox(
        &self,
        config: &cri::PodSandboxConfig,
    ) -> Result<String, String> {
        let name = config.metadata.as_ref().map_or("", |m| m.name.as_str());
        self.runtime
            .clone()
            .run_pod_sandbox(cri::RunPodSandboxRequest {
                config: Some(config.clone()),
                runtime_handler: String::new(),
            })
            .await
            .map(|r| r.into_inner().pod_sandbox_id)
            .map_err(|e| format!("RunPodSandbox {name}: {}", e.message()))
    }

    pub(crate) async fn create(
        &self,
        sandbox: &str,
        sandbox_config: &cri::PodSandboxConfig,
        config: cri::ContainerConfig,
    ) -> Result<String, String> {
        // Boxed: the request's future is large.
        Box::pin(
            self.runtime
                .clone()
                .create_container(cri::CreateContainerRequest {
                    pod_sandbox_id: sandbox.to_owned(),
                    config: Some(config),
                    sandbox_config: Some(sandbox_config.clone()),
                }),
        )
        .await
        .map(|r| r.into_inner().container_id)
        .map_err(|e| format!("CreateContainer in {sandbox}: {}", e.message()))
    }

    pub(crate) async fn start(&self, id: &str) -> Result<(), String> {
        self.runtime
            .clone()
            .start_container(cri::StartContainerRequest {
                container_id: id.to_owned(),
            })
            .await
            .map(drop)
            .map_err(|e| format!("StartContainer {id}: {}", e.message()))
    }

    /// StopContainer with timeout 0: SIGKILL at once, as both runtimes do for 0.
    pub(crate) async fn stop(&self, id: &str) -> Result<(), String> {
        self.runtime
            .clone()
            .stop_container(cri::StopContainerRequest {
                container_id: id.to_owned(),
                timeout: 0,
            })
            .await
            .map(drop)
            .map_err(|e| format!("StopContainer {id}: {}", e.message()))
    }

    pub(crate) async fn remove(&self, id: &str) -> Result<(), String> {
        self.runtime
            .clone()
            .remove_container(cri::RemoveContainerRequest {
                container_id: id.to_owned(),
            })
            .await
            .map(drop)
            .map_err(|e| format!("RemoveContainer {id}: {}", e.message()))
    }

    pub(crate) async fn stop_remove_sandbox(&self, id: &str) -> Result<(), String> {
        let mut client = self.runtime.clone();
        client
            .stop_pod_sandbox(cri::StopPodSandboxRequest {
                pod_sandbox_id: id.to_owned(),
            })
            .await
            .map_err(|e| format!("StopPodSandbox {id}: {}", e.message()))?;
        client
            .remove_pod_sandbox(cri::RemovePodSandboxRequest {
                pod_sandbox_id: id.to_owned(),
            })
            .await
            .map(drop)
            .map_err(|e| format!("RemovePodSandbox {id}: {}", e.message()))
    }

    /// After a failure: every sandbox the daemon still has is stopped and removed, with its
    /// containers.
    pub(crate) async fn remove_everything(&self) {
        let listed = self
            .runtime
            .clone()
            .list_pod_sandbox(cri::ListPodSandboxRequest { filter: None })
            .await
            .map(|r| r.into_inner().items)
            .unwrap_or_default();
        for sandbox in listed {
            let _ = self.stop_remove_sandbox(&sandbox.id).await;
        }
    }

    /// One container's life in a ready sandbox: CreateContainer, StartContainer,
    /// StopContainer (timeout 0), RemoveContainer, each timed.
    pub(crate) async fn container_cycle(
        &self,
        sandbox: &str,
        sandbox_config: &cri::PodSandboxConfig,
        config: cri::ContainerConfig,
    ) -> Result<[Duration; 4], String> {
        let t0 = Instant::now();
        let id = self.create(sandbox, sandbox_config, config).await?;
        let t1 = Instant::now();
        self.start(&id).await?;
        let t2 = Instant::now();
        self.stop(&id).await?;
        let t3 = Instant::now();
        self.remove(&id).await?;
        let t4 = Instant::now();
        Ok([t1 - t0, t2 - t1, t3 - t2, t4 - t3])
    }

    /// A pod up: RunPodSandbox, CreateContainer, StartContainer. Returns the sandbox's and the
    /// container's IDs with the time of each call.
    pub(crate) async fn pod_up(
        &self,
        sandbox_config: &cri::PodSandboxConfig,
        config: cri::ContainerConfig,
    ) -> Result<(String, String, [Duration; 3]), String> {
        let t0 = Instant::now();
        let sandbox = self.run_sandbox(sandbox_config).await?;
        let t1 = Instant::now();
        let id = self.create(&sandbox, sandbox_config, config).await?;
        let t2 = Instant::now();
        self.start(&id).await?;
        let t3 = Instant::now();
        Ok((sandbox, id, [t1 - t0, t2 - t1, t3 - t2]))
    }

    /// A pod down: StopContainer (timeout 0), RemoveContainer, StopPodSandbox,
    /// RemovePodSandbox, the last two timed as one.
    pub(crate) async fn pod_down(
        &self,
        sandbox: &str,
        container: &str,
    ) -> Result<[Duration; 3], String> {
        let t0 = Instant::now();
        self.stop(container).await?;
        let t1 = Instant::now();
        self.remove(container).await?;
        let t2 = Instant::now();
        self.stop_remove_sandbox(sandbox).await?;
        let t3 = Instant::now();
        Ok([t1 - t0, t2 - t1, t3 - t2])
    }
}

/// A pod as kubelet describes it: its own cgroup parent (cgroupfs), a log directory (made here,
/// as kubelet makes it), DNS.
pub(crate) fn sandbox_config(
    name: &str,
    cgroup_parent: &str,
    log_dir: &Path,
) -> Result<cri::PodSandboxConfig, String> {
    let logs = log_dir.join(name);
    std::fs::create_dir_all(&logs).map_err(|e| format!("{}: {e}", logs.display()))?;
    Ok(cri::PodSandboxConfig {
        metadata: Some(cri::PodSandboxMetadata {
            name: name.to_owned(),
            uid: format!("uid-{name}"),
            namespace: "bench".to_owned(),
            attempt: 0,
        }),
        hostname: name.to_owned(),
        log_directory: logs.display().to_string(),
        dns_config: Some(cri::DnsConfig {
            servers: vec!["10.96.0.10".to_owned()],
            searches: vec!["bench.svc.cluster.local".to_owned()],
            options: vec!["ndots:5".to_owned()],
        }),
        labels: [("app".to_owned(), "container-bench".to_owned())].into(),
        linux: Some(cri::LinuxPodSandboxConfig {
            cgroup_parent: cgroup_parent.to_owned(),
            // kubelet's pods without shareProcessNamespace: no pod init, as containerd's
            // pause shares no PID namespace then either.
            security_context: Some(cri::LinuxSandboxSecurityContext {
                namespace_options: Some(pid_namespace()),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    })
}

/// The workload: busybox `sleep 3600` (PID 1 of its own PID namespace, which ignores SIGTERM:
/// StopContainer is asked with timeout 0, so both runtimes SIGKILL it at once), under the
/// runtime's default seccomp profile, as kubelet asks for it.
pub(crate) fn container_config(name: &str, image: &str) -> cri::ContainerConfig {
    cri::ContainerConfig {
        metadata: Some(cri::ContainerMetadata {
            name: name.to_owned(),
            attempt: 0,
        }),
        image: Some(cri::ImageSpec {
            image: image.to_owned(),
            ..cri::ImageSpec::default()
        }),
        command: vec!["/bin/sleep".to_owned(), "3600".to_owned()],
        log_path: format!("{name}.log"),
        labels: [("container".to_owned(), name.to_owned())].into(),
        linux: Some(cri::LinuxContainerConfig {
            security_context: Some(cri::LinuxContainerSecurityContext {
                seccomp: Some(cri::SecurityProfile {
                    profile_type: cri::security_profile::ProfileType::RuntimeDefault as i32,
                    localhost_ref: String::new(),
                }),
                namespace_options: Some(pid_namespace()),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// CONTAINER for pid, as kubelet asks it unless a pod shares its process namespace.
fn pid_namespace() -> cri::NamespaceOption {
    cri::NamespaceOption {
        pid: cri::NamespaceMode::Container as i32,
        ..Default::default()
    }
}

/// The calls of the streams part: ExecSync, and the Exec and PortForward requests that return a
/// streaming URL.
impl Cri {
    /// ExecSync of `cmd` in container `id`; fails unless it exits 0.
    pub(crate) async fn exec_sync(&self, id: &str, cmd: &[&str]) -> Result<(), String> {
        let reply = self
            .runtime
            .clone()
            .exec_sync(cri::ExecSyncRequest {
                container_id: id.to_owned(),
                cmd: cmd.iter().map(|s| (*s).to_owned()).collect(),
                timeout: 10,
            })
            .await
            .map_err(|e| format!("ExecSync {cmd:?} in {id}: {}", e.message()))?
            .into_inner();
        if reply.exit_code != 0 {
            return Err(format!(
                "ExecSync {cmd:?} in {id}: exit code {}",
                reply.exit_code
            ));
        }
        Ok(())
    }

    /// The streaming URL of an Exec of `cmd` in container `id`, without a TTY, with stdout and
    /// stderr, and stdin when asked.
    pub(crate) async fn exec_url(
        &self,
        id: &str,
        cmd: &[&str],
        stdin: bool,
    ) -> Result<String, String> {
        self.runtime
            .clone()
            .exec(cri::ExecRequest {
                container_id: id.to_owned(),
                cmd: cmd.iter().map(|s| (*s).to_owned()).collect(),
                tty: false,
                stdin,
                stdout: true,
                stderr: true,
            })
            .await
            .map(|r| r.into_inner().url)
            .map_err(|e| format!("Exec {cmd:?} in {id}: {}", e.message()))
    }

    /// The streaming URL of a PortForward to `port` of sandbox `id`.
    pub(crate) async fn port_forward_url(&self, id: &str, port: u16) -> Result<String, String> {
        self.runtime
            .clone()
            .port_forward(cri::PortForwardRequest {
                pod_sandbox_id: id.to_owned(),
                port: vec![i32::from(port)],
            })
            .await
            .map(|r| r.into_inner().url)
            .map_err(|e| format!("PortForward {port} of {id}: {}", e.message()))
    }

    /// The pod's IP address, from PodSandboxStatus.
    pub(crate) async fn sandbox_ip(&self, id: &str) -> Result<String, String> {
        let status = self
            .runtime
            .clone()
            .pod_sandbox_status(cri::PodSandboxStatusRequest {
                pod_sandbox_id: id.to_owned(),
                verbose: false,
            })
            .await
            .map_err(|e| format!("PodSandboxStatus {id}: {}", e.message()))?
            .into_inner();
        status
            .status
            .and_then(|s| s.network)
            .map(|n| n.ip)
            .filter(|ip| !ip.is_empty())
            .ok_or_else(|| format!("PodSandboxStatus {id}: no IP address"))
    }
}

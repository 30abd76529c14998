//! A minimal CRI client for crio-lite: what `crictl` does for pods, images and containers,
//! printing JSON. It doubles as a worked example of driving crio-lite over its socket.
//!
//! ```text
//! cri-client [--socket PATH] runp NAME [--namespace NS] [--port HOST:CONTAINER]...
//! cri-client [--socket PATH] stopp ID
//! cri-client [--socket PATH] rmp ID
//! cri-client [--socket PATH] pods
//! cri-client [--socket PATH] inspectp ID
//! cri-client [--socket PATH] pull IMAGE            # crictl pull, images, rmi, imagefsinfo
//! cri-client [--socket PATH] images
//! cri-client [--socket PATH] rmi IMAGE
//! cri-client [--socket PATH] imagefsinfo
//! cri-client [--socket PATH] run POD NAME IMAGE [-- CMD...]   # crictl create + start
//! cri-client [--socket PATH] ps                              # crictl ps -a
//! cri-client [--socket PATH] exec ID [--timeout S] -- CMD...  # crictl exec -s
//! cri-client [--socket PATH] logs ID                         # crictl logs
//! cri-client [--socket PATH] stats ID                        # crictl stats
//! cri-client [--socket PATH] stop ID [--timeout S]
//! cri-client [--socket PATH] rm ID
//! cri-client [--socket PATH] get /metrics        # the HTTP status API on the same socket
//! cri-client scrape 127.0.0.1:9090                # /metrics over TCP, as Prometheus scrapes it
//! ```
//!
//! gRPC runs over HTTP/2 on the unix socket: tonic gets a connector that opens the socket, and the
//! URI it is given is only a placeholder. The status API (`/info`, `/config`, `/containers/ID`,
//! `/metrics`) is HTTP/1.1 on the same socket.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use clap::Parser as _;
use cri_api::v1 as cri;
use cri_api::v1::image_service_client::ImageServiceClient;
use cri_api::v1::runtime_service_client::RuntimeServiceClient;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::UnixStream;
use tonic::transport::{Channel, Endpoint, Uri};

/// Talks CRI to crio-lite over its unix socket and prints JSON.
#[derive(Debug, clap::Parser)]
#[command(name = "cri-client")]
struct Args {
    /// crio-lite's socket.
    #[arg(long, default_value = "/var/run/crio-lite/crio-lite.sock")]
    socket: PathBuf,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// RunPodSandbox: creates a pod sandbox and prints its ID.
    Runp {
        /// The pod's name (its UID is derived from name and namespace).
        name: String,
        /// The pod's Kubernetes namespace.
        #[arg(long, default_value = "default")]
        namespace: String,
        /// A TCP port mapping HOST:CONTAINER; repeat for several.
        #[arg(long = "port", value_name = "HOST:CONTAINER", value_parser = parse_port)]
        ports: Vec<(u16, u16)>,
        /// The pod's log directory: its containers log to DIR/NAME/0.log.
        #[arg(long, value_name = "DIR")]
        log_dir: Option<PathBuf>,
    },
    /// CreateContainer then StartContainer: runs IMAGE in pod POD and prints the container's ID.
    Run {
        /// The sandbox ID or a unique prefix.
        pod: String,
        /// The container's name.
        name: String,
        /// The image (pulled beforehand).
        image: String,
        /// The command, replacing the image's entrypoint; the image's own when empty.
        #[arg(last = true)]
        command: Vec<String>,
    },
    /// ListContainers: every container.
    Ps,
    /// ExecSync: runs a command in a running container, prints its output and exit code.
    Exec {
        /// The container ID or a unique prefix.
        id: String,
        /// Seconds before the command is killed; 0 for none.
        #[arg(long, default_value_t = 10)]
        timeout: i64,
        /// The command.
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// The container's CRI log, as `crictl logs` prints it (the text of each line).
    Logs {
        /// The container ID or a unique prefix.
        id: String,
    },
    /// ContainerStats: CPU, memory and writable layer.
    Stats {
        /// The container ID or a unique prefix.
        id: String,
    },
    /// StopContainer: the stop signal, then SIGKILL after the timeout.
    Stop {
        /// The container ID or a unique prefix.
        id: String,
        /// Seconds between the stop signal and SIGKILL.
        #[arg(long, default_value_t = 10)]
        timeout: i64,
    },
    /// RemoveContainer.
    Rm {
        /// The container ID or a unique prefix.
        id: String,
    },
    /// StopPodSandbox: tears the pod's network down.
    Stopp {
        /// The sandbox ID or a unique prefix.
        id: String,
    },
    /// RemovePodSandbox: removes the pod and its network namespace.
    Rmp {
        /// The sandbox ID or a unique prefix.
        id: String,
    },
    /// ListPodSandbox: every pod sandbox.
    Pods,
    /// PodSandboxStatus (verbose): state, IPs and the daemon's record of the pod.
    Inspectp {
        /// The sandbox ID or a unique prefix.
        id: String,
    },
    /// PullImage: pulls an image and prints its ID.
    Pull {
        /// The image reference (`busybox`, `registry.k8s.io/pause:3.10`, `host:port/app@sha256:…`).
        image: String,
    },
    /// ListImages: every image.
    Images,
    /// RemoveImage: removes an image by reference, ID or ID prefix.
    Rmi {
        /// The image.
        image: String,
    },
    /// ImageFsInfo: what the image store takes on disk.
    Imagefsinfo,
    /// An HTTP GET on the status API: /info, /config, /containers/ID or /metrics.
    Get {
        /// The request path.
        path: String,
    },
    /// GET /metrics over TCP (crio.metrics.enable_metrics), as a Prometheus server scrapes it.
    Scrape {
        /// HOST:PORT (crio.metrics.metrics_host and metrics_port).
        address: String,
    },
}

/// One HTTP/1.1 `GET /metrics` over TCP, answered in Prometheus' text format.
async fn scrape(address: &str) -> anyhow::Result<String> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut stream = tokio::net::TcpStream::connect(address)
        .await
        .with_context(|| format!("cannot connect to {address}"))?;
    let request = format!(
        "GET /metrics HTTP/1.1\r\nHost: {address}\r\nAccept: text/plain\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await?;
    let mut raw = Vec::new();
    stream.take(16 << 20).read_to_end(&mut raw).await?;
    let raw = String::from_utf8_lossy(&raw);
    let Some((head, body)) = raw.split_once("\r\n\r\n") else {
        bail!("{address} answered no HTTP");
    };
    let status = head.lines().next().unwrap_or_default();
    if !status.contains(" 200 ") {
        bail!("GET http://{address}/metrics: {status}");
    }
    Ok(body.trim_end().to_owned())
}

fn parse_port(text: &str) -> Result<(u16, u16), String> {
    let (host, container) = text
        .split_once(':')
        .ok_or_else(|| format!("{text:?} is not HOST:CONTAINER"))?;
    let port = |p: &str| {
        p.parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| format!("{p:?} is not a port (1 to 65535)"))
    };
    Ok((port(host)?, port(container)?))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::process::ExitCode {
    let args = Args::parse();
    match Box::pin(run(args)).await {
        Ok(out) => {
            println!("{out}");
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("cri-client: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> anyhow::Result<String> {
    let socket = args.socket;
    let out = match args.command {
        Command::Get { path } => {
            let (status, body) = crio_lite::status_cmd::get(&socket, &path).await?;
            if !status.is_success() {
                bail!("GET {path}: {status}: {}", body.trim_end());
            }
            return Ok(body.trim_end().to_owned());
        }
        Command::Scrape { address } => return scrape(&address).await,
        Command::Runp {
            name,
            namespace,
            ports,
            log_dir,
        } => {
            let mut request = pod_request(&name, &namespace, &ports);
            if let (Some(config), Some(dir)) = (request.config.as_mut(), log_dir) {
                config.log_directory = dir.display().to_string();
            }
            let response = client(&socket)
                .await?
                .run_pod_sandbox(request)
                .await
                .context("RunPodSandbox")?;
            json!({ "id": response.into_inner().pod_sandbox_id })
        }
        Command::Stopp { id } => {
            let request = cri::StopPodSandboxRequest {
                pod_sandbox_id: id.clone(),
            };
            client(&socket)
                .await?
                .stop_pod_sandbox(request)
                .await
                .context("StopPodSandbox")?;
            json!({ "id": id, "stopped": true })
        }
        Command::Rmp { id } => {
            let request = cri::RemovePodSandboxRequest {
                pod_sandbox_id: id.clone(),
            };
            client(&socket)
                .await?
                .remove_pod_sandbox(request)
                .await
                .context("RemovePodSandbox")?;
            json!({ "id": id, "removed": true })
        }
        command @ (Command::Run { .. }
        | Command::Ps
        | Command::Exec { .. }
        | Command::Logs { .. }
        | Command::Stats { .. }
        | Command::Stop { .. }
        | Command::Rm { .. }) => container_command(&socket, command).await?,
        command @ (Command::Pull { .. }
        | Command::Images
        | Command::Rmi { .. }
        | Command::Imagefsinfo) => image_command(&socket, command).await?,
        Command::Pods => {
            let items = client(&socket)
                .await?
                .list_pod_sandbox(cri::ListPodSandboxRequest { filter: None })
                .await
                .context("ListPodSandbox")?
                .into_inner()
                .items;
            let items: Vec<Value> = items
                .iter()
                .map(|pod| with_state_name(serde_json::to_value(pod), pod.state))
                .collect::<anyhow::Result<_>>()?;
            json!({ "items": items })
        }
        Command::Inspectp { id } => {
            let response = client(&socket)
                .await?
                .pod_sandbox_status(cri::PodSandboxStatusRequest {
                    pod_sandbox_id: id,
                    verbose: true,
                })
                .await
                .context("PodSandboxStatus")?
                .into_inner();
            let status = response.status.unwrap_or_default();
            let state = status.state;
            // The daemon's own record (netns path, attachments) comes as a JSON string.
            let info = response
                .info
                .get("info")
                .and_then(|text| serde_json::from_str::<Value>(text).ok())
                .unwrap_or(Value::Null);
            json!({
                "status": with_state_name(serde_json::to_value(status), state)?,
                "info": info,
            })
        }
    };
    Ok(serde_json::to_string_pretty(&out)?)
}

/// A RuntimeService client on the unix socket.
async fn client(socket: &Path) -> anyhow::Result<RuntimeServiceClient<Channel>> {
    Ok(RuntimeServiceClient::new(connect(socket).await?))
}

/// The ImageService commands: pull, images, rmi, imagefsinfo.
async fn image_command(socket: &Path, command: Command) -> anyhow::Result<Value> {
    let socket = socket.to_owned();
    Ok(match command {
        Command::Pull { image } => {
            let response = images(&socket)
                .await?
                .pull_image(cri::PullImageRequest {
                    image: Some(image_spec(&image)),
                    auth: None,
                    sandbox_config: None,
                })
                .await
                .with_context(|| format!("PullImage {image}"))?
                .into_inner();
            json!({ "image": image, "id": response.image_ref })
        }
        Command::Images => {
            let listed = images(&socket)
                .await?
                .list_images(cri::ListImagesRequest { filter: None })
                .await
                .context("ListImages")?
                .into_inner()
                .images;
            json!({ "images": serde_json::to_value(listed)? })
        }
        Command::Rmi { image } => {
            images(&socket)
                .await?
                .remove_image(cri::RemoveImageRequest {
                    image: Some(image_spec(&image)),
                })
                .await
                .with_context(|| format!("RemoveImage {image}"))?;
            json!({ "image": image, "removed": true })
        }
        Command::Imagefsinfo => {
            let info = images(&socket)
                .await?
                .image_fs_info(cri::ImageFsInfoRequest {})
                .await
                .context("ImageFsInfo")?
                .into_inner();
            serde_json::to_value(info)?
        }
        _ => bail!("not an image command"),
    })
}

/// The container commands: run, ps, exec, logs, stats, stop, rm.
async fn container_command(socket: &Path, command: Command) -> anyhow::Result<Value> {
    let mut rt = client(socket).await?;
    Ok(match command {
        Command::Run {
            pod,
            name,
            image,
            command,
        } => {
            let config = cri::ContainerConfig {
                metadata: Some(cri::ContainerMetadata {
                    name: name.clone(),
                    attempt: 0,
                }),
                image: Some(image_spec(&image)),
                command,
                log_path: format!("{name}/0.log"),
                ..cri::ContainerConfig::default()
            };
            let id = rt
                .create_container(cri::CreateContainerRequest {
                    pod_sandbox_id: pod,
                    config: Some(config),
                    sandbox_config: None,
                })
                .await
                .with_context(|| format!("CreateContainer {name}"))?
                .into_inner()
                .container_id;
            rt.start_container(cri::StartContainerRequest {
                container_id: id.clone(),
            })
            .await
            .with_context(|| format!("StartContainer {name}"))?;
            json!({ "id": id })
        }
        Command::Ps => {
            let containers = rt
                .list_containers(cri::ListContainersRequest { filter: None })
                .await
                .context("ListContainers")?
                .into_inner()
                .containers;
            let items: Vec<Value> = containers
                .iter()
                .map(|c| with_container_state(serde_json::to_value(c), c.state))
                .collect::<anyhow::Result<_>>()?;
            json!({ "containers": items })
        }
        Command::Exec {
            id,
            timeout,
            command,
        } => {
            let out = rt
                .exec_sync(cri::ExecSyncRequest {
                    container_id: id,
                    cmd: command,
                    timeout,
                })
                .await
                .context("ExecSync")?
                .into_inner();
            json!({
                "stdout": String::from_utf8_lossy(&out.stdout),
                "stderr": String::from_utf8_lossy(&out.stderr),
                "exit_code": out.exit_code,
            })
        }
        Command::Logs { id } => logs(&mut rt, id).await?,
        Command::Stats { id } => {
            let stats = rt
                .container_stats(cri::ContainerStatsRequest { container_id: id })
                .await
                .context("ContainerStats")?
                .into_inner()
                .stats;
            serde_json::to_value(stats)?
        }
        Command::Stop { id, timeout } => {
            rt.stop_container(cri::StopContainerRequest {
                container_id: id.clone(),
                timeout,
            })
            .await
            .context("StopContainer")?;
            json!({ "id": id, "stopped": true })
        }
        Command::Rm { id } => {
            rt.remove_container(cri::RemoveContainerRequest {
                container_id: id.clone(),
            })
            .await
            .context("RemoveContainer")?;
            json!({ "id": id, "removed": true })
        }
        _ => bail!("not a container command"),
    })
}

/// The text of the container's CRI log lines (`<time> <stream> <P|F> <text>`), partial lines
/// (P) joined to the next, as `crictl logs` prints them.
async fn logs(rt: &mut RuntimeServiceClient<Channel>, id: String) -> anyhow::Result<Value> {
    let status = rt
        .container_status(cri::ContainerStatusRequest {
            container_id: id,
            verbose: false,
        })
        .await
        .context("ContainerStatus")?
        .into_inner()
        .status
        .unwrap_or_default();
    let text = std::fs::read_to_string(&status.log_path)
        .with_context(|| format!("cannot read the log {}", status.log_path))?;
    let mut lines = Vec::new();
    let mut partial = String::new();
    for line in text.lines() {
        let mut parts = line.splitn(4, ' ');
        let (_, _, tag, body) = (parts.next(), parts.next(), parts.next(), parts.next());
        partial.push_str(body.unwrap_or_default());
        if tag != Some("P") {
            lines.push(std::mem::take(&mut partial));
        }
    }
    Ok(json!({ "log_path": status.log_path, "lines": lines }))
}

/// Replaces the numeric `state` with its CRI name (`CONTAINER_RUNNING`).
fn with_container_state(value: serde_json::Result<Value>, state: i32) -> anyhow::Result<Value> {
    let mut value = value?;
    if let Some(obj) = value.as_object_mut() {
        let name = cri::ContainerState::try_from(state)
            .map_or_else(|_| state.to_string(), |s| s.as_str_name().to_owned());
        obj.insert("state".to_owned(), json!(name));
    }
    Ok(value)
}

async fn images(socket: &Path) -> anyhow::Result<ImageServiceClient<Channel>> {
    Ok(ImageServiceClient::new(connect(socket).await?))
}

fn image_spec(image: &str) -> cri::ImageSpec {
    cri::ImageSpec {
        image: image.to_owned(),
        ..cri::ImageSpec::default()
    }
}

/// A channel to the unix socket. The URI is required by tonic but never resolved.
async fn connect(socket: &Path) -> anyhow::Result<Channel> {
    let socket = socket.to_owned();
    let shown = socket.display().to_string();
    Endpoint::try_from("http://[::]:0")?
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let socket = socket.clone();
            async move { Ok::<_, std::io::Error>(TokioIo::new(UnixStream::connect(socket).await?)) }
        }))
        .await
        .with_context(|| format!("cannot connect to {shown} (is crio-lite running?)"))
}

/// A RunPodSandbox request as kubelet would send for a simple pod.
fn pod_request(name: &str, namespace: &str, ports: &[(u16, u16)]) -> cri::RunPodSandboxRequest {
    cri::RunPodSandboxRequest {
        config: Some(cri::PodSandboxConfig {
            metadata: Some(cri::PodSandboxMetadata {
                name: name.to_owned(),
                uid: format!("{namespace}-{name}"),
                namespace: namespace.to_owned(),
                attempt: 0,
            }),
            hostname: name.to_owned(),
            port_mappings: ports
                .iter()
                .map(|&(host, container)| cri::PortMapping {
                    protocol: cri::Protocol::Tcp.into(),
                    container_port: i32::from(container),
                    host_port: i32::from(host),
                    host_ip: String::new(),
                })
                .collect(),
            labels: [("app".to_owned(), name.to_owned())].into(),
            ..Default::default()
        }),
        runtime_handler: String::new(),
    }
}

/// Replaces the numeric `state` with its CRI name (`SANDBOX_READY`).
fn with_state_name(value: serde_json::Result<Value>, state: i32) -> anyhow::Result<Value> {
    let mut value = value?;
    if let Some(obj) = value.as_object_mut() {
        let name = cri::PodSandboxState::try_from(state)
            .map_or_else(|_| state.to_string(), |s| s.as_str_name().to_owned());
        obj.insert("state".to_owned(), json!(name));
    }
    Ok(value)
}

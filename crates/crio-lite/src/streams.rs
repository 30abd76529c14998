//! The runtime half of CRI streaming (issue #24): cri-streaming's [`StreamRuntime`] over the
//! domain. Exec and attach find the container (it must be running) and hand the client's
//! streams to oci-container; port forward finds the pod's network namespace and connects to
//! the port on its loopback from inside it (node-primitives' `connect_loopback`). Errors come
//! back as the client is told them: [`RuntimeError::NotFound`] for a container or pod that is
//! gone or not running, [`RuntimeError::Io`] for a stream that failed, else
//! [`RuntimeError::Failed`] with the domain's message.
//!
//! It lives outside `domain/` because it speaks cri-streaming's types.

use std::sync::Arc;
use std::time::Duration;

use cri_streaming::runtime::{
    AttachRequest, Duplex, ExecRequest, RuntimeError, StreamRuntime, Streams,
};
use tokio::sync::mpsc;

use crate::domain::{DomainError, Manager, SandboxState};

/// How long each address (127.0.0.1, then ::1) gets to accept a port forward's connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// crio-lite's [`StreamRuntime`]: what the streaming server calls once a client came with a
/// token for an Exec, Attach or PortForward request.
pub(crate) struct DomainStreams {
    manager: Arc<Manager>,
}

impl DomainStreams {
    /// Streams for the containers and pods of `manager`.
    pub(crate) fn new(manager: Arc<Manager>) -> DomainStreams {
        DomainStreams { manager }
    }
}

#[async_trait::async_trait]
impl StreamRuntime for DomainStreams {
    async fn exec(&self, req: ExecRequest, streams: Streams) -> Result<i32, RuntimeError> {
        let (streams, _resizing) = to_oci(streams);
        self.manager
            .containers()
            .await
            .map_err(runtime_error)?
            .exec(&req.container_id, &req.cmd, req.tty, streams)
            .await
            .map_err(runtime_error)
    }

    async fn attach(&self, req: AttachRequest, streams: Streams) -> Result<(), RuntimeError> {
        let (streams, _resizing) = to_oci(streams);
        self.manager
            .containers()
            .await
            .map_err(runtime_error)?
            .attach(&req.container_id, streams)
            .await
            .map_err(runtime_error)
    }

    async fn port_forward(
        &self,
        pod_sandbox_id: &str,
        port: u16,
    ) -> Result<Box<dyn Duplex>, RuntimeError> {
        // recovery done: a sandbox seen now is one the daemon knows the state of
        self.manager.containers().await.map_err(runtime_error)?;
        let sandbox = self.manager.get(pod_sandbox_id).map_err(runtime_error)?;
        if sandbox.state != SandboxState::Ready {
            return Err(RuntimeError::NotFound(format!(
                "sandbox {} is {}: ports are forwarded only into a ready sandbox",
                sandbox.id,
                sandbox.state.as_str()
            )));
        }
        let stream = match sandbox.netns_path {
            Some(netns) => {
                let connected = tokio::task::spawn_blocking(move || {
                    node_primitives::ns::connect_loopback(&netns, port, CONNECT_TIMEOUT)
                })
                .await
                .map_err(|e| RuntimeError::Failed(format!("port forward task failed: {e}")))?;
                connected
                    .map_err(|e| RuntimeError::Failed(format!("sandbox {}: {e}", sandbox.id)))?
            }
            // a pod on the node's network: its loopback is the node's
            None => connect_on_node(&sandbox.id, port).await?,
        };
        let io = |context: &str, source| RuntimeError::Io {
            context: format!("sandbox {}: port {port}: {context}", sandbox.id),
            source,
        };
        stream
            .set_nonblocking(true)
            .map_err(|e| io("cannot make the connection non-blocking", e))?;
        let stream = tokio::net::TcpStream::from_std(stream)
            .map_err(|e| io("cannot register the connection", e))?;
        Ok(Box::new(stream))
    }
}

/// 127.0.0.1, then ::1, in this process's (the node's) network namespace.
async fn connect_on_node(sandbox: &str, port: u16) -> Result<std::net::TcpStream, RuntimeError> {
    let mut errors = Vec::new();
    for addr in [
        std::net::SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, port)),
        std::net::SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, port)),
    ] {
        match tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(addr)).await {
            Ok(Ok(stream)) => {
                return stream.into_std().map_err(|source| RuntimeError::Io {
                    context: format!("sandbox {sandbox}: port {port}"),
                    source,
                });
            }
            Ok(Err(e)) => errors.push(format!("{addr}: {e}")),
            Err(_) => errors.push(format!("{addr}: timed out after {CONNECT_TIMEOUT:?}")),
        }
    }
    Err(RuntimeError::Failed(format!(
        "sandbox {sandbox} (node network): cannot connect to port {port}: {}",
        errors.join("; ")
    )))
}

/// The client's streams as oci-container takes them; sizes are passed on by a task that ends
/// with either side (the returned handle aborts it when the operation ends first).
fn to_oci(streams: Streams) -> (oci_container::Streams, Option<AbortOnDrop>) {
    let Streams {
        stdin,
        stdout,
        stderr,
        resize,
    } = streams;
    let (resize, task) = match resize {
        Some(mut from) => {
            let (tx, rx) = mpsc::channel(4);
            let task = tokio::spawn(async move {
                while let Some(size) = from.recv().await {
                    let size = oci_container::TerminalSize {
                        width: size.width,
                        height: size.height,
                    };
                    if tx.send(size).await.is_err() {
                        break;
                    }
                }
            });
            (Some(rx), Some(AbortOnDrop(task)))
        }
        None => (None, None),
    };
    let streams = oci_container::Streams {
        stdin,
        stdout,
        stderr,
        resize,
    };
    (streams, task)
}

/// Aborts the size-passing task when the operation that needed it ends or is dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The client's view of a domain error.
fn runtime_error(e: DomainError) -> RuntimeError {
    match e {
        DomainError::ContainerNotFound { .. }
        | DomainError::NotFound { .. }
        | DomainError::ContainerState { .. }
        | DomainError::SandboxNotReady { .. } => RuntimeError::NotFound(e.to_string()),
        DomainError::Runtime(source) => match *source {
            e @ (oci_container::Error::NotRunning { .. }
            | oci_container::Error::NotFound { .. }) => RuntimeError::NotFound(e.to_string()),
            oci_container::Error::Stream {
                container,
                what,
                source,
            } => RuntimeError::Io {
                context: format!("container {container}: cannot {what}"),
                source,
            },
            other => RuntimeError::Failed(other.to_string()),
        },
        other => RuntimeError::Failed(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_told_as_the_client_needs() {
        let gone = runtime_error(DomainError::ContainerNotFound { id: "c1".into() });
        assert!(matches!(gone, RuntimeError::NotFound(m) if m.contains("c1")));
        let stopped = runtime_error(DomainError::runtime(oci_container::Error::NotRunning {
            container: "c1".into(),
            state: "stopped".into(),
        }));
        assert!(
            matches!(&stopped, RuntimeError::NotFound(m) if m == "container c1: not running (stopped)"),
            "{stopped}"
        );
        let broken = runtime_error(DomainError::runtime(oci_container::Error::Stream {
            container: "c1".into(),
            what: "write the attached output",
            source: std::io::Error::from(std::io::ErrorKind::BrokenPipe),
        }));
        assert!(
            matches!(&broken, RuntimeError::Io { context, .. }
                if context == "container c1: cannot write the attached output"),
            "{broken}"
        );
        let other = runtime_error(DomainError::Internal("boom".into()));
        assert!(matches!(other, RuntimeError::Failed(m) if m.contains("boom")));
    }

    #[tokio::test]
    async fn sizes_are_passed_on_until_either_side_ends() {
        let (tx, rx) = mpsc::channel(4);
        let (streams, task) = to_oci(Streams {
            stdin: None,
            stdout: None,
            stderr: None,
            resize: Some(rx),
        });
        let mut sizes = streams.resize.unwrap();
        tx.send(cri_streaming::resize::TerminalSize {
            width: 80,
            height: 24,
        })
        .await
        .unwrap();
        assert_eq!(
            sizes.recv().await,
            Some(oci_container::TerminalSize {
                width: 80,
                height: 24
            })
        );
        drop(tx);
        assert_eq!(sizes.recv().await, None);
        drop(task);
    }

    #[test]
    fn no_resize_stream_no_task() {
        let (streams, task) = to_oci(Streams {
            stdin: None,
            stdout: None,
            stderr: None,
            resize: None,
        });
        assert!(streams.resize.is_none() && task.is_none());
    }
}

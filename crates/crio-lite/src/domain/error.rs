//! What an operation of the domain (on a sandbox, a container or an image) can fail with, in
//! the domain's own terms.
//!
//! The CRI adapter turns each variant into a gRPC code, the status API into an
//! HTTP status; nothing here knows either.

use std::io;
use std::path::PathBuf;

use ocicni::cni_types::capabilities::PortMapping;

/// Why an operation on a sandbox, a container or an image failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DomainError {
    /// A request field the daemon cannot accept.
    #[error("{field}: {reason}")]
    InvalidField {
        /// The field, as a path in the request (`config.port_mappings[0].host_port`).
        field: String,
        /// What is wrong with it.
        reason: String,
    },
    /// No sandbox has this ID (or ID prefix).
    #[error("pod sandbox {id:?} not found")]
    NotFound {
        /// The ID asked for.
        id: String,
    },
    /// A sandbox with the same metadata exists and is not ready.
    #[error(
        "pod {pod} exists as sandbox {existing} and {}",
        if *creating {
            "is being created"
        } else {
            "is stopped: remove it, or run the pod with a new attempt number"
        }
    )]
    AlreadyExists {
        /// The pod, as `namespace/name (uid "...", attempt N)`.
        pod: String,
        /// The sandbox that has it.
        existing: String,
        /// Whether that sandbox is still being created (else it is stopped).
        creating: bool,
    },
    /// Another live sandbox maps the same host port.
    #[error(
        "host port {}/{}{} is already mapped by sandbox {holder} (pod {holder_pod})",
        port.host_port,
        port.protocol,
        port.host_ip.map(|ip| format!(" on {ip}")).unwrap_or_default()
    )]
    HostPortInUse {
        /// The mapping asked for.
        port: PortMapping,
        /// The sandbox that holds it.
        holder: String,
        /// That sandbox's pod, as `namespace/name`.
        holder_pod: String,
    },
    /// The daemon is still recovering the sandboxes of its last run.
    #[error("{}", match sandbox {
        Some(id) => format!("sandbox {id} is still being recovered from the last run; retry shortly"),
        None => "crio-lite is still recovering the sandboxes of its last run; retry shortly".to_owned(),
    })]
    Recovering {
        /// The sandbox waited for, if the request named one.
        sandbox: Option<String>,
    },
    /// ocicni refused or failed a network operation.
    #[error("sandbox {sandbox}: {operation} failed: {source}")]
    Network {
        /// The sandbox.
        sandbox: String,
        /// `network setup` or `network teardown`.
        operation: &'static str,
        /// ocicni's error: the network, the plugin and the plugin's message.
        #[source]
        source: ocicni::Error,
    },
    /// The sandbox's network namespace could not be made, configured or removed.
    #[error("sandbox {sandbox}: cannot {action} network namespace {}: {source}", path.display())]
    Namespace {
        /// The sandbox.
        sandbox: String,
        /// `create` or `remove`.
        action: &'static str,
        /// The pin.
        path: PathBuf,
        /// The error from the operating system.
        #[source]
        source: io::Error,
    },
    /// The sandbox's state file could not be written or deleted.
    #[error("sandbox {sandbox}: {source}")]
    State {
        /// The sandbox.
        sandbox: String,
        /// The store's error: it names the file.
        #[source]
        source: crate::Error,
    },
    /// No container has this ID (or ID prefix).
    #[error("container {id:?} not found")]
    ContainerNotFound {
        /// The ID asked for.
        id: String,
    },
    /// The sandbox has a container of this name and attempt already.
    #[error(
        "container name {name:?} (attempt {attempt}) is taken in sandbox {sandbox} by container \
         {existing}: remove it, or create with a new attempt number"
    )]
    ContainerExists {
        /// The name asked for.
        name: String,
        /// The attempt asked for.
        attempt: u32,
        /// The sandbox.
        sandbox: String,
        /// The container that has the name.
        existing: String,
    },
    /// The container is not in the state the operation needs.
    #[error("container {id} is {state}; the operation needs it {wanted}")]
    ContainerState {
        /// The container.
        id: String,
        /// Its state.
        state: &'static str,
        /// The state needed.
        wanted: &'static str,
    },
    /// The sandbox cannot take containers now.
    #[error("sandbox {id} is {state}: containers are created only in a ready sandbox")]
    SandboxNotReady {
        /// The sandbox.
        id: String,
        /// Its state.
        state: &'static str,
    },
    /// The image the request names is not in the store.
    #[error("image {image:?} not found: pull it first ({reason})")]
    ImageNotFound {
        /// The image as the request named it.
        image: String,
        /// The store's words.
        reason: String,
    },
    /// The image store failed (a root file system that cannot be made, a configuration that
    /// cannot be read), or the image cannot be run.
    #[error("image {image:?}: {reason}")]
    Image {
        /// The image as the request named it.
        image: String,
        /// What is wrong.
        reason: String,
        /// The store's error, when it was one.
        #[source]
        source: Option<Box<image_store::Error>>,
    },
    /// The OCI runtime or conmon failed; the error names the container and the program.
    #[error(transparent)]
    Runtime(Box<oci_container::Error>),
    /// A file or directory of a container or sandbox could not be made or removed.
    #[error("{what} {}: {source}", path.display())]
    Io {
        /// What was being done, naming the container or sandbox.
        what: String,
        /// The path.
        path: PathBuf,
        /// The error from the operating system.
        #[source]
        source: io::Error,
    },
    /// Something that should not happen did (a random source that cannot be read, a worker task
    /// that died).
    #[error("{0}")]
    Internal(String),
}

impl DomainError {
    pub(crate) fn image(image: &str, source: image_store::Error) -> Self {
        DomainError::Image {
            image: image.to_owned(),
            reason: source.to_string(),
            source: Some(Box::new(source)),
        }
    }

    pub(crate) fn runtime(source: oci_container::Error) -> Self {
        DomainError::Runtime(Box::new(source))
    }

    pub(crate) fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Self {
        DomainError::InvalidField {
            field: field.into(),
            reason: reason.into(),
        }
    }
}

/// Shorthand for the results of the domain's operations.
pub type DomainResult<T> = std::result::Result<T, DomainError>;

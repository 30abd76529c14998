//! What a sandbox operation can fail with, in the domain's own terms.
//!
//! The CRI adapter turns each variant into a gRPC code, the status API into an
//! HTTP status; nothing here knows either.

use std::io;
use std::path::PathBuf;

use ocicni::cni_types::capabilities::PortMapping;

/// Why a sandbox operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
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
    /// Something that should not happen did (a random source that cannot be read, a worker task
    /// that died).
    #[error("{0}")]
    Internal(String),
}

impl SandboxError {
    pub(crate) fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Self {
        SandboxError::InvalidField {
            field: field.into(),
            reason: reason.into(),
        }
    }
}

/// Shorthand for the results of sandbox operations.
pub type SandboxResult<T> = std::result::Result<T, SandboxError>;

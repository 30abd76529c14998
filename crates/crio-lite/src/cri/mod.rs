//! The CRI adapter: the `runtime.v1` services over the domain core. Requests are checked and
//! turned into domain values here, answers and errors turned back; this is the only place that
//! knows tonic's `Status`.

mod container;
/// Request checks and the CRI's views of a sandbox, public so tools and the fuzz target check
/// requests exactly as the daemon does.
pub mod convert;
mod image;
mod runtime;

pub(crate) use image::ImageApi;
pub(crate) use runtime::RuntimeApi;
pub use runtime::{CRI_API_VERSION, RUNTIME_NAME};

use tonic::Status;

/// Now, in nanoseconds since the epoch: the timestamps of stats and file system answers.
fn now_nanos() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

use crate::domain::DomainError;

/// The most of an error's text an answer carries. Errors quote what others sent (a layer's entry
/// names, a registry's or a plugin's words), and the message travels in an HTTP/2 header: a
/// client's header limit is in the tens of KiB, and past it the client drops the connection.
const MAX_MESSAGE: usize = 4096;

/// `message`, cut at [`MAX_MESSAGE`] bytes (on a character boundary) with what was cut said.
fn capped_message(message: String) -> String {
    if message.len() <= MAX_MESSAGE {
        return message;
    }
    format!(
        "{}... (cut: {} bytes in all)",
        node_primitives::text::cut(&message, MAX_MESSAGE),
        message.len()
    )
}

impl From<DomainError> for Status {
    fn from(error: DomainError) -> Status {
        let message = capped_message(error.to_string());
        match &error {
            DomainError::InvalidField { .. } => Status::invalid_argument(message),
            DomainError::NotFound { .. }
            | DomainError::ContainerNotFound { .. }
            | DomainError::ImageNotFound { .. } => Status::not_found(message),
            DomainError::AlreadyExists { .. } | DomainError::ContainerExists { .. } => {
                Status::already_exists(message)
            }
            DomainError::ContainerState { .. } | DomainError::SandboxNotReady { .. } => {
                Status::failed_precondition(message)
            }
            DomainError::Image { source, .. } => match source.as_deref() {
                Some(e) => image::status_of(e),
                None => Status::failed_precondition(message),
            },
            DomainError::Runtime(e) => match &**e {
                oci_container::Error::NotFound { .. } => Status::not_found(message),
                oci_container::Error::InvalidId { .. }
                | oci_container::Error::InvalidConfig { .. }
                | oci_container::Error::NoCommand { .. }
                | oci_container::Error::UnknownUser { .. }
                | oci_container::Error::InvalidMount { .. }
                | oci_container::Error::InvalidSignal { .. } => Status::invalid_argument(message),
                oci_container::Error::Timeout { .. } => Status::deadline_exceeded(message),
                oci_container::Error::NotRunning { .. } => Status::failed_precondition(message),
                _ => Status::internal(message),
            },
            DomainError::HostPortInUse { .. } => Status::failed_precondition(message),
            DomainError::Recovering { .. } => Status::unavailable(message),
            // The pod's fault, the node's configuration, or the plugins.
            DomainError::Network { source, .. } => match source {
                ocicni::Error::InvalidPod { .. } => Status::invalid_argument(message),
                ocicni::Error::NoNetwork { .. }
                | ocicni::Error::NetworkNotFound { .. }
                | ocicni::Error::NetworkUnusable { .. } => Status::failed_precondition(message),
                _ => Status::internal(message),
            },
            DomainError::Namespace { .. }
            | DomainError::Io { .. }
            | DomainError::State { .. }
            | DomainError::Internal(_) => Status::internal(message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_quoting_a_megabyte_is_cut_to_a_header_a_client_takes() {
        let long = format!("layer entry {}", "é".repeat(1 << 19));
        let status = Status::from(DomainError::invalid("config.name", long));
        assert_eq!(status.code(), tonic::Code::InvalidArgument);
        assert!(
            status.message().len() < MAX_MESSAGE + 64,
            "{}",
            status.message().len()
        );
        assert!(status.message().starts_with("config.name: layer entry é"));
        assert!(
            status.message().ends_with("bytes in all)"),
            "{}",
            &status.message()[4000..]
        );
        let short = Status::from(DomainError::invalid("config.name", "too long"));
        assert_eq!(short.message(), "config.name: too long");
    }
}

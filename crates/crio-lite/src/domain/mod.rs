//! The domain core: sandboxes and containers, their state machines and the managers that run
//! them against ocicni, the namespace pins, the image store, the OCI runtime and the state store. It knows nothing of gRPC or of the CRI's messages; the
//! CRI adapter and the status API translate to and from it.

pub mod annotations;
mod container;
mod containers;
mod entry;
mod error;
mod images;
mod manager;
mod sandbox;
mod settings;

pub(crate) use container::RawLimits;
pub use container::{Container, ContainerState, Exit, Limits, MountSpec};
pub(crate) use containers::Containers;
pub use containers::{ContainerRequest, EXEC_OUTPUT_CAP, PidMode};
pub use error::{DomainError, DomainResult};
pub use images::{DEFAULT_POLICIES, Images, STORAGE_DIR, signature_policy_file};
pub(crate) use manager::Manager;
pub use sandbox::{
    Attachment, DnsSettings, NamespaceMode, NamespaceModes, Sandbox, SandboxName, SandboxState,
};
pub use settings::{ContainerSettings, HandlerSettings, ImageSettings};

/// Now, in nanoseconds since the epoch, as sandboxes and containers record times; 1 for a clock
/// before the epoch, so a time is never the CRI's "unset" 0.
pub(crate) fn now_nanos() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

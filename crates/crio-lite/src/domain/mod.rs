//! The domain core: sandboxes, their state machine and the manager that runs it against ocicni,
//! the namespace pins and the state store. It knows nothing of gRPC or of the CRI's messages; the
//! CRI adapter and the status API translate to and from it.

mod error;
mod images;
mod manager;
mod sandbox;

pub use error::{SandboxError, SandboxResult};
pub use images::{DEFAULT_POLICIES, Images, STORAGE_DIR};
pub(crate) use manager::Manager;
pub use sandbox::{Attachment, DnsSettings, NamespaceModes, Sandbox, SandboxName, SandboxState};

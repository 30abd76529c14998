//! Container crate placeholder docs (rewritten below).

mod command;
mod config;
mod defaults;
mod error;
mod record;
mod runtime;
mod spec;
pub mod user;

pub use config::{
    BindMount, CapabilityChanges, ContainerConfig, NamespacePaths, Propagation, Resources,
};
pub use defaults::{
    ALL_CAPABILITIES, DEFAULT_CAPABILITIES, DEFAULT_MASKED_PATHS, DEFAULT_PATH,
    DEFAULT_READONLY_PATHS,
};
pub use error::{Error, Result, validate_id};
pub use record::{ContainerRecord, ProcessIdentity};
pub use runtime::{
    ContainerState, DEFAULT_CREATE_TIMEOUT, DEFAULT_TIMEOUT, Records, Runtime, Status,
};
pub use spec::{OCI_VERSION, generate, write_bundle};

//! Attach pods to networks through CNI plugins: the API a container runtime calls.
//!
//! Not built yet: this crate will compose `cni-config`, `cni-exec`, `cni-watch` and `cni-lock`.

mod args;
mod builtin;
mod error;
mod networks;
mod ocicni;
mod options;
mod plugin;
mod pod;
mod status;

pub use args::CniArgsPolicy;
pub use builtin::BuiltinNetwork;
pub use error::{Error, Result};
pub use networks::NetworkReport;
pub use ocicni::{
    EVENT_POD_CIDR_CHANGE, EVENT_POD_CIDR_KEY, InitSettings, NOT_READY_REASON, Ocicni,
    OcicniBuilder,
};
pub use options::{CheckPolicy, DEFAULT_CONF_DIR, WatchPolicy};
pub use plugin::CniPlugin;
pub use pod::{AttachmentResult, NetworkSelection, NetworkStatus, PodNetwork, RuntimeConfig};

pub use {cni_config, cni_exec, cni_lock, cni_types, cni_watch};

pub mod netns;

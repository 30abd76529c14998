//! Attach pods to networks through CNI plugins: the API a container runtime calls.
//!
//! Not built yet: this crate will compose `cni-config`, `cni-exec`, `cni-watch` and `cni-lock`.

mod error;
mod plugin;
mod pod;

pub use error::{Error, Result};
pub use plugin::CniPlugin;
pub use pod::{AttachmentResult, NetworkSelection, NetworkStatus, PodNetwork, RuntimeConfig};

pub mod netns;

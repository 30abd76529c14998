//! The Container Network Interface (CNI) specification 1.1.0 as Rust data.
//!
//! This crate models what crosses the boundary between a container runtime and a CNI plugin: network
//! configurations, results of every version plugins emit (0.1.0 through 1.1.0) with conversions between
//! them, the spec's error object, VERSION responses and capability arguments. It does no I/O, spawns no
//! processes and reads no clocks; loading files lives in `cni-config` and running plugins in `cni-exec`.
//!
//! You probably want the `ocicni` crate, which builds on this one.

pub mod capabilities;
pub mod cni_error;
pub mod config;
pub mod error;
pub mod result;
pub mod version;

pub use config::{Capabilities, ConfigError, Dns, Ipam, NetworkConfigList, PluginConfig};
pub use error::{Error, Result};
pub use version::{Version, VersionInfo};

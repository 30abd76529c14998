//! The Container Network Interface (CNI) specification 1.1.0 as Rust data.
//!
//! This crate models what crosses the boundary between a container runtime and a CNI plugin: network
//! configurations, results of every version plugins emit (0.1.0 through 1.1.0) with conversions between
//! them, the spec's error object, VERSION responses and capability arguments. It does no I/O, spawns no
//! processes and reads no clocks; loading files lives in `cni-config` and running plugins in `cni-exec`.
//!
//! You probably want the `ocicni` crate, which builds on this one.
//!
//! # Main types
//!
//! - [`CniResult`]: what ADD returns, in any version from 0.1.0 to 1.1.0, with
//!   [`CniResult::to_version`] converting between them the way libcni does, and refusing (with
//!   [`Error::Convert`] naming the field) whatever the target version cannot express.
//! - [`CniError`]: the error object plugins print, with the spec's [`WellKnownCode`]s.
//! - [`CapabilityArgs`]: the `runtimeConfig` values a runtime passes to plugins that declare
//!   capabilities.
//! - [`Version`] and [`VersionInfo`]: versions, their ordering and the VERSION response.
//!
//! # Example
//!
//! Read what the bridge plugin printed for a 0.4.0 configuration, then hand it to a 1.0.0 plugin and
//! to an old 0.2.0 one:
//!
//! ```
//! use cni_types::{CniResult, Version};
//!
//! # fn main() -> cni_types::Result<()> {
//! let output = br#"{
//!     "cniVersion": "0.4.0",
//!     "interfaces": [
//!         {"name": "cni0", "mac": "6a:0d:0b:3d:54:59"},
//!         {"name": "eth0", "mac": "0a:58:0a:58:00:05", "sandbox": "/var/run/netns/pod1"}
//!     ],
//!     "ips": [
//!         {"version": "4", "interface": 1, "address": "10.88.0.5/16", "gateway": "10.88.0.1"},
//!         {"version": "6", "interface": 1, "address": "fd00:88::5/64", "gateway": "fd00:88::1"}
//!     ],
//!     "routes": [{"dst": "0.0.0.0/0"}, {"dst": "::/0"}],
//!     "dns": {}
//! }"#;
//! let result = CniResult::from_slice(output, Version::V0_4_0)?;
//! let pod_ip = result.first_ipv4().map(|ip| ip.ip());
//! assert_eq!(pod_ip, Some("10.88.0.5".parse().unwrap()));
//!
//! // 1.0.0 drops ips[].version; nothing else changes.
//! let v1 = result.to_version(Version::V1_0_0)?.to_json_value()?;
//! assert_eq!(v1["ips"][0], serde_json::json!(
//!     {"interface": 1, "address": "10.88.0.5/16", "gateway": "10.88.0.1"}
//! ));
//!
//! // 0.2.0 has one address per family and no interfaces.
//! let v02 = result.to_version(Version::V0_2_0)?.to_json_value()?;
//! assert_eq!(v02["ip4"], serde_json::json!(
//!     {"ip": "10.88.0.5/16", "gateway": "10.88.0.1", "routes": [{"dst": "0.0.0.0/0"}]}
//! ));
//! assert_eq!(v02["ip6"]["ip"], "fd00:88::5/64");
//! # Ok(())
//! # }
//! ```

pub mod capabilities;
pub mod cni_error;
pub mod config;
pub mod error;
pub mod go_json;
pub mod result;
pub mod version;

pub use capabilities::CapabilityArgs;
pub use cni_error::{CniError, WellKnownCode};
pub use config::{Capabilities, ConfigError, Dns, Ipam, NetworkConfigList, PluginConfig};
pub use error::{Error, Result};
pub use result::{CniResult, Interface, IpConfig, Route};
pub use version::{Version, VersionInfo};

//! CNI plugins run in-process, byte-compatible with Debian's containernetworking-plugins 1.1.1.
//!
//! You probably want the `ocicni` crate, which builds on this one.
//!
//! A node may mix these built-ins with the Go binaries: they take the same configuration, print
//! the same result and error bytes, and share the same files on disk, so the Go plugin can
//! delete what a built-in added and the other way round, even concurrently.
//!
//! # Main types
//!
//! - [`BuiltinExec`] wraps any [`cni_exec::Exec`] (normally [`cni_exec::ProcessExec`]):
//!   `find_plugin` answers a built-in plugin's name with its pseudo path `builtin:<type>` (as
//!   [`Preference`] says), and `exec_plugin` on such a path runs the plugin in-process. A failed
//!   run is [`cni_exec::Error::Failed`] with the spec's error object on stdout, exactly as a
//!   failing plugin process gives it, so the layers above cannot tell the difference.
//! - [`Preference`]: `prefer-binary` (the default), `prefer-builtin` or `never`.
//! - [`Builtin`]: the plugins built in so far, `host-local`, `loopback`, (IPv4, ADD and DEL)
//!   `bridge` and `portmap`.
//!
//! # What is built in
//!
//! - `host-local` IPAM: ADD, DEL, CHECK as the Go plugin does them (ranges, the legacy
//!   `subnet`/`rangeStart`/`rangeEnd`/`gateway`, `routes`, `dataDir`, `resolvConf`, addresses
//!   asked for through `CNI_ARGS` `IP=`, `args.cni.ips` and `runtimeConfig.ips`, runtime
//!   `ipRanges`), with its files: `<dataDir>/<network>/<ip>` holding `<container id>\r\n<ifname>`,
//!   `last_reserved_ip.<range set index>`, and `lock`, flocked around every change. Besides, GC
//!   (CNI 1.1, `cni.dev/valid-attachments`: leases of other attachments are released) and
//!   STATUS.
//! - `loopback`: `lo` up on ADD (the result lists it with its loopback addresses), down on DEL,
//!   checked on CHECK. The namespace is entered on a thread of its own that ends with the work.
//!
//! - `bridge`, IPv4, ADD and DEL: the bridge made (`bridge`, `mtu`, `promiscMode`), a veth
//!   created from the host with its peer directly in the pod's namespace, enslaved (with
//!   `hairpinMode`), the IPAM plugin run through the same `Exec` (the built-in host-local, or
//!   a binary, as the preference says), addresses and routes in the pod, the gateway on the
//!   bridge and forwarding on (`isGateway`, `isDefaultGateway`, `forceAddress`). The host side
//!   happens in the namespace of the thread that calls `exec_plugin`. `ipMasq`: the
//!   `CNI-<hash>` chain of the nat table, commented `name: "<net>" id: "<cid>"`, as Go makes
//!   it, written with one `iptables-restore --noflush` per ADD or DEL after one
//!   `iptables-save -t nat`. `vlan`, `macspoofchk`, a requested MAC, IPv6 addresses and CHECK
//!   are refused with an error saying they are not built in yet.
//!
//! - `portmap`, chained, ADD, DEL and CHECK for IPv4 and IPv6: `prevResult` passed through,
//!   `runtimeConfig.portMappings` (`hostPort`, `containerPort`, `protocol`, `hostIP`), `snat`,
//!   `markMasqBit`, `externalSetMarkChain`, `conditionsV4`/`conditionsV6`. The nat table gets
//!   Go's chains, rules, comments and jumps: `CNI-HOSTPORT-DNAT` from PREROUTING and OUTPUT
//!   for local destinations, `CNI-HOSTPORT-SETMARK`, `CNI-HOSTPORT-MASQ` first in POSTROUTING,
//!   and the container's `CNI-DN-<hash>` with its hairpin and localhost mark rules and DNATs;
//!   `route_localnet` is turned on for the host interface the route to the container leaves
//!   by; after ADD, conntrack entries of UDP flows to the host ports are deleted (ctnetlink).
//!   One `iptables-save -t nat` and one `iptables-restore --noflush` per operation and
//!   family, in the namespace of the thread that calls `exec_plugin`. As Debian's 1.1.1,
//!   `masqAll` is ignored, and CHECK of an IPv4 container fails where ip6tables works.
//!
//! All speak every version the Go plugins speak (0.1.0 to 1.0.0) and 1.1.0 besides; VERSION
//! says so. The only processes started here are `iptables-save` and `iptables-restore` (and
//! their `ip6tables` twins for `portmap`), killed at the run's deadline (a bridge's binary IPAM
//! plugin is started by the inner `Exec`).
//!
//! # Example
//!
//! Lease an address from a network whose leases live in a temporary directory:
//!
//! ```
//! use std::sync::Arc;
//! use cni_builtin::{BuiltinExec, Preference};
//! use cni_exec::{Exec, ProcessExec};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let data = tempfile::tempdir()?;
//! let exec = BuiltinExec::new(Arc::new(ProcessExec::new()), Preference::PreferBuiltin);
//! let config = serde_json::json!({
//!     "cniVersion": "1.0.0",
//!     "name": "pods",
//!     "ipam": {"type": "host-local", "subnet": "10.88.0.0/24", "dataDir": data.path()},
//! });
//! let env: Vec<(String, String)> = [
//!     ("CNI_COMMAND", "ADD"),
//!     ("CNI_CONTAINERID", "pod1"),
//!     ("CNI_NETNS", "/run/netns/pod1"),
//!     ("CNI_IFNAME", "eth0"),
//!     ("CNI_PATH", "/usr/lib/cni"),
//! ]
//! .map(|(k, v)| (k.to_owned(), v.to_owned()))
//! .into();
//! let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
//! let output = runtime.block_on(async {
//!     let plugin = exec.find_plugin("host-local", &[]).await?;
//!     assert_eq!(plugin.to_str(), Some("builtin:host-local"));
//!     exec.exec_plugin(&plugin, &env, config.to_string().as_bytes()).await
//! })?;
//! let result: serde_json::Value = serde_json::from_slice(&output.stdout)?;
//! assert_eq!(result["ips"][0]["address"], "10.88.0.2/24");
//! assert_eq!(std::fs::read(data.path().join("pods/10.88.0.2"))?, b"pod1\r\neth0");
//! # Ok(())
//! # }
//! ```

mod bridge;
mod error;
mod exec;
mod gojson;
mod host_local;
mod ipmasq;
mod link;
mod loopback;
mod netlink;
mod netns;
mod portmap;
mod result;
mod skel;

pub use error::{Error, Result};
pub use exec::{Builtin, BuiltinExec, PSEUDO_PATH_PREFIX, Preference};

//! Find and run CNI plugins; the only crate of the workspace that spawns processes.
//!
//! You probably want the `ocicni` crate, which builds on this one.
//!
//! The crate has two layers: a process layer that runs a program with bytes in and bytes out, and
//! the CNI operations on top of it, which speak the spec (libcni's `CNIConfig` in Go).
//!
//! # The CNI operations
//!
//! [`Cni`] runs the spec's commands on a network configuration list ([`cni_config::NetworkList`])
//! for one attachment ([`RuntimeConf`]):
//!
//! - [`Cni::add_network_list`]: ADD runs the plugins in order, each getting the previous result as
//!   `prevResult`, and caches the last result. Results are read in the version they declare (the
//!   list's when they declare none) and returned in the list's version; [`CniResult::to_version`](cni_types::CniResult::to_version)
//!   converts them further.
//! - [`Cni::check_network_list`]: CHECK with the cached result as `prevResult`; an error for lists
//!   below 0.4.0, nothing at all with `disableCheck`.
//! - [`Cni::del_network_list`]: DEL in reverse order, with the *cached* configuration, arguments
//!   and (from 0.4.0) result when the cache has them; the entry is removed only after every plugin
//!   succeeded. A DEL for something never added runs the plugins without `prevResult`.
//!   [`Cni::del_cached_attachment`] tears down from the cache alone.
//! - [`Cni::status_network_list`] and [`Cni::gc_network_list`] (spec 1.1): nothing runs for older
//!   lists; GC honours `disableGC`, first DELs the network's cached attachments that are not in the
//!   valid set, then passes the valid set under both [`GC_ATTACHMENT_KEYS`].
//! - [`Cni::plugin_version`] and [`Cni::validate_network_list`] (every plugin and IPAM plugin found,
//!   every plugin supports the list's version; returns the declared capabilities). VERSION answers
//!   are cached per binary (path, device, inode, size, mtime), so validating hundreds of networks on
//!   every configuration reload runs each plugin binary once.
//!
//! What plugins get follows the spec and libcni: on stdin the plugin's own object, keys in their
//! order, with the list's `name` and `cniVersion`, `runtimeConfig` holding only the capability
//! arguments the plugin declares (`capabilities` itself stays), and `prevResult` when chaining. ADD,
//! CHECK and DEL get `CNI_COMMAND`, `CNI_CONTAINERID`, `CNI_NETNS`, `CNI_IFNAME`, `CNI_ARGS`
//! (`k=v;k=v`) and `CNI_PATH` (the plugin directories joined with `:`); VERSION gets `CNI_COMMAND`
//! only; STATUS and GC get `CNI_COMMAND` and `CNI_PATH`.
//!
//! Errors say who failed: [`Error::Plugin`] carries the plugin, command, network, container and the
//! plugin's own error object (code, msg, details); [`Error::PluginExec`] a plugin that died, timed
//! out or failed without one; [`Error::InvalidResult`] output that is not a result, with the tail of
//! the plugin's stderr. [`RuntimeConf`] fields are checked with libcni's rules before anything runs
//! ([`Error::InvalidRuntimeConf`] names the field).
//!
//! # The result cache
//!
//! [`ResultCache`] keeps libcni's layout and JSON, so CRI-O, Podman or containerd and this crate
//! read each other's entries: `<cache dir>/results/<network>-<container id>-<ifname>` holding
//! `kind: "cniCacheV1"`, `containerId` (`containerID` is accepted when reading), `config` (base64 of
//! the exact bytes used), `ifName`, `networkName`, `netns`, `cniArgs` (`[[k, v], ...]`),
//! `capabilityArgs` and `result`. Writes are atomic (temporary file, fsync, rename, fsync of the
//! directory; directory 0700, file 0600). A corrupt or empty entry reads as absent, with a warning
//! naming the file. Names are validated so nothing escapes the results directory.
//!
//! # The process layer
//!
//! At the bottom of the crate, plugins are just programs: bytes in on stdin, variables in the
//! environment, bytes out on stdout, an exit status. Nothing here knows what a CNI result looks like.
//!
//! - [`Exec`] is the seam: find a plugin by name, run it. Code above this layer holds an
//!   `Arc<dyn Exec>`, so it can be tested against a fake.
//! - [`ProcessExec`] is the real thing on `tokio::process`: an empty environment plus the `CNI_*`
//!   variables and `PATH`, a process group and a cgroup per plugin that are killed on timeout or
//!   cancellation,
//!   bounded stdout/stderr, retries while the binary is "text file busy", and an optional wrapper
//!   command (see [`ProcessExec::with_launcher`]).
//! - [`find_plugin_in`] searches plugin directories ([`DEFAULT_PLUGIN_DIRS`] unless configured) for an
//!   executable file.
//! - [`Error::Failed`] keeps a failed plugin's stdout, so the layer above can parse the spec's error
//!   object out of it, and the tail of its stderr for humans.
//!
//! # Testing with a fake plugin
//!
//! [`Exec`] is the seam for logic tests: implement it to answer without processes. For tests that
//! run real processes, the workspace's unpublished `test-support` crate has `cni-fake-plugin`, a
//! configurable plugin binary that records every invocation and fails, hangs, crashes or answers in
//! any result version as its network configuration tells it; its `fake_plugin` module lists the
//! keys and builds the binary on first use. This crate's own tests run it through [`ProcessExec`].
//!
//! # Example
//!
//! ```no_run
//! use std::path::Path;
//! use std::sync::Arc;
//!
//! use cni_exec::{Cni, DEFAULT_CACHE_DIR, ProcessExec, RuntimeConf, default_plugin_dirs};
//! use cni_types::Version;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let cni = Cni::new(
//!     Arc::new(ProcessExec::new()),
//!     default_plugin_dirs(),
//!     DEFAULT_CACHE_DIR.into(),
//! );
//! let net = cni_config::load_file(Path::new("/etc/cni/net.d/10-crio.conflist"))?;
//! let capabilities = cni.validate_network_list(&net).await?;
//! println!("{} supports {capabilities:?}", net.name());
//!
//! let rt = RuntimeConf::new("4f6a0b1c2d", "/run/netns/pod1", "eth0")
//!     .with_arg("IgnoreUnknown", "1")
//!     .with_arg("K8S_POD_NAME", "web-0");
//! let result = cni.add_network_list(&net, &rt).await?;
//! if let Some(ip) = result.ips_on_sandbox_interface("eth0").next() {
//!     println!("pod address {}", ip.address);
//! }
//! // An older consumer wants 0.4.0.
//! let old = result.to_version(Version::V0_4_0)?;
//! println!("{}", old.to_json_value()?);
//!
//! cni.del_network_list(&net, &RuntimeConf::new("4f6a0b1c2d", "", "eth0")).await?;
//! # Ok(())
//! # }
//! ```

mod cache;
mod cgroup;
mod cni;
mod discovery;
mod error;
mod exec;
mod invoke;
mod observe;
mod runtime_conf;
mod version_cache;

pub use cache::{CACHE_KIND_V1, CachedAttachment, DEFAULT_CACHE_DIR, PreparedEntry, ResultCache};
pub use cni::{Cni, GC_ATTACHMENT_KEYS};
pub use discovery::{
    DEFAULT_PLUGIN_DIRS, default_plugin_dirs, find_plugin_in, validate_plugin_name,
};
pub use error::{Error, OutputStream, PluginStatus, Result, STDERR_TAIL_BYTES};
pub use exec::{
    DEFAULT_OUTPUT_LIMIT, DEFAULT_PATH, DEFAULT_TIMEOUT, Exec, PluginOutput, ProcessExec,
};
pub use observe::{ObservedExec, PluginRun};
pub use runtime_conf::{
    GcAttachment, MAX_IF_NAME_LEN, RuntimeConf, validate_container_id, validate_if_name,
    validate_network_name,
};

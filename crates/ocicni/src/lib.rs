//! Attach pods to networks through CNI plugins: the API a container runtime calls.
//!
//! A Rust implementation of cri-o's Go `ocicni`. [`Ocicni`] loads the network configurations of a
//! directory (`/etc/cni/net.d`), keeps them current as files and plugin binaries come and go,
//! picks the default network, and sets up, tears down, checks and garbage-collects pods'
//! attachments by running CNI plugins. Runtimes program against the [`CniPlugin`] trait, so they
//! can test their own logic with a fake.
//!
//! It composes the crates below it, re-exported here: [`cni_config`] (files to network lists),
//! [`cni_exec`] (running plugins, the libcni-compatible result cache), [`cni_builtin`]
//! (`bridge`, `host-local`, `portmap` and `loopback` in-process, chosen per plugin by
//! [`Preference`]), [`cni_watch`] (watching directories), [`cni_lock`] (locks across processes) and [`cni_types`] (the spec as data).
//! [`netns`] pins, removes, enters and inspects network namespaces in-process.
//!
//! What it adds over the Go original:
//!
//! - Kubernetes `K8S_*` CNI_ARGS only with [`CniArgsPolicy::Kubernetes`];
//! - teardown from the cached configuration, also when the network's file is gone and when the
//!   namespace no longer exists; every attachment is tried and every failure reported;
//! - locks across processes (GC shared, then the pod), so two runtimes never DEL one pod at once;
//! - a watcher that follows a deleted and recreated directory and coalesces bursts;
//! - an optional built-in default network ([`BuiltinNetwork`]);
//! - pod status from the cache by default, CHECK only by [`CheckPolicy::Always`];
//! - a failed set-up is rolled back, so no attachment is left half-made;
//! - loopback brought up in-process, without a plugin;
//! - built-in plugins where no binary is installed ([`OcicniBuilder::builtin_plugins`]), and
//!   which implementation each plugin type has reported ([`NetworkReport::implementations`]).
//!
//! # Example
//!
//! ```no_run
//! use ocicni::{CniArgsPolicy, CniPlugin, NetworkSelection, Ocicni, PodNetwork};
//!
//! # async fn run() -> ocicni::Result<()> {
//! let cni = Ocicni::builder()
//!     .conf_dir("/etc/cni/net.d")
//!     .cni_args(CniArgsPolicy::Kubernetes)
//!     .build()
//!     .await?;
//! println!("default network: {:?}", cni.default_network_name());
//!
//! let pod = PodNetwork {
//!     name: "web".into(),
//!     namespace: "default".into(),
//!     id: "0123456789abcdef".into(),
//!     uid: "6a5c2f1e".into(),
//!     netns: "/run/netns/web".into(),
//!     networks: vec![NetworkSelection::new("crio")],
//!     ..PodNetwork::default()
//! };
//! for attachment in cni.setup_pod(&pod).await? {
//!     println!("{} {}: {:?}", attachment.network, attachment.ifname, attachment.result.first_ipv4());
//! }
//! cni.teardown_pod(&pod).await?;
//! cni.shutdown().await;
//! # Ok(())
//! # }
//! ```
//!
//! The `ocicnitool` binary of this crate does the same from a shell.

mod args;
mod builtin;
mod error;
mod facade;
mod implementation;
mod networks;
mod options;
mod plugin;
mod pod;
mod status;

pub use args::{CniArgsPolicy, validate_pod_args};
pub use builtin::BuiltinNetwork;
pub use cni_builtin::{Builtin, Preference};
pub use error::{Error, Result};
pub use facade::{
    EVENT_POD_CIDR_CHANGE, EVENT_POD_CIDR_KEY, InitSettings, NOT_READY_REASON, Ocicni,
    OcicniBuilder,
};
pub use implementation::{Implementation, PluginImplementation};
pub use networks::NetworkReport;
pub use options::{CheckPolicy, DEFAULT_CONF_DIR, DEFAULT_RUN_DIR, PluginObserver, WatchPolicy};
pub use plugin::CniPlugin;
pub use pod::{AttachmentResult, NetworkSelection, NetworkStatus, PodNetwork, RuntimeConfig};

pub use {cni_builtin, cni_config, cni_exec, cni_lock, cni_types, cni_watch};

pub mod duration;
pub mod netns;

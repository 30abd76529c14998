//! crio-lite: a CRI runtime daemon in the spirit of CRI-O, built from the workspace's crates.
//!
//! It serves the Kubernetes CRI `runtime.v1` API (RuntimeService and ImageService) on a unix
//! socket, and CRI-O's HTTP status API (`/info`, `/config`, `/containers/ID`, `/metrics`) on the
//! same socket. For a pod sandbox it pins the pod's namespaces, asks ocicni to attach it to its
//! networks (port mappings, cgroup and annotations included), reports its IPs, tears the network
//! down on stop and unpins on removal; for containers it has image-store make the root file
//! system and oci-container run it on crun or runc under conmon (create, start, stop, remove,
//! ExecSync, stats, update, logs, hooks); images are pulled, listed and removed by image-store.
//!
//! What it does not do itself: networking, images or running containers. Those live in ocicni
//! (behind [`ocicni::CniPlugin`]), image-store and oci-container; crio-lite is the CRI adapter
//! (`cri`), the state machine over them (`domain`), configuration, wiring and the server. The
//! CNI side and namespaces are handed to [`Daemon::start`], so tests run the daemon with fakes and
//! the binary runs it with ocicni.
//!
//! # State
//!
//! Every sandbox and container is a JSON file under `<root>` (`crio.root`), replaced atomically
//! at each state change (see [`domain`] for the state machine). A daemon killed at any moment finds on its
//! next start every sandbox that may own a namespace or an attachment: half-made ones are rolled back,
//! ready ones come back with their IPs, and ocicni collects whatever no ready sandbox owns.
//!
//! # Duplicate requests
//!
//! A RunPodSandbox whose metadata (name, namespace, uid, attempt) matches a ready sandbox returns
//! that sandbox's ID (kubelet retrying a request that timed out gets the pod it asked for); one that
//! matches a sandbox being created or stopped gets `AlreadyExists`.
//!
//! # Example
//!
//! ```no_run
//! use std::sync::Arc;
//! use crio_lite::{Config, Daemon, HostNetns, Metrics};
//!
//! # async fn example() -> anyhow::Result<()> {
//! let config = Config::default();
//! let metrics = Metrics::new();
//! let cni = crio_lite::wiring::build_cni(&config, &metrics).await?;
//! let daemon = Daemon::start_with_metrics(config, cni, Arc::new(HostNetns), metrics).await?;
//! println!("serving on {}", daemon.socket_path().display());
//! daemon.shutdown().await?;
//! # Ok(())
//! # }
//! ```

pub mod cli;
mod cni_metrics;
pub mod config;
pub mod cri;
pub mod domain;
mod error;
pub mod http_api;
mod instance;
mod metrics;
mod netns;
mod server;
mod startup;
pub mod status_cmd;
mod status_output;
mod store;
mod streams;
mod systemd;
mod version;
pub mod wiring;

pub use config::{
    ApiTable, Config, CrioLiteTable, CrioTable, ImageTable, LiteApiTable, LiteImageTable,
    LiteNetworkTable, Loader, MetricsTable, NetworkTable, Overrides, ResolvedRuntime,
    RuntimeHandler, RuntimeTable,
};
pub use cri::{CRI_API_VERSION, RUNTIME_NAME};
pub use error::{Error, Result};
pub use metrics::Metrics;
pub use netns::{HostNetns, NetnsOps};
pub use server::Daemon;
pub use version::VersionInfo;

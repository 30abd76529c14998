//! The crate's error type.

use std::path::PathBuf;

/// Everything that can go wrong attaching, detaching or inspecting a pod's networks.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No network is loaded and no built-in default is enabled.
    #[error(
        "no CNI network configured in {}: the network provider may not have started yet",
        dir.display()
    )]
    NoNetwork {
        /// The configuration directory that holds no usable network.
        dir: PathBuf,
    },
    /// A pod asked for a network that is not loaded, even after a reload.
    #[error("network {name:?} not found in {}", dir.display())]
    NetworkNotFound {
        /// The requested network.
        name: String,
        /// The configuration directory searched.
        dir: PathBuf,
    },
    /// A pod asked for a network whose configuration exists but cannot be used: its file was
    /// rejected, or a plugin it needs is missing or does not support its version.
    #[error("network {name:?} is not usable: {reason}")]
    NetworkUnusable {
        /// The requested network.
        name: String,
        /// Why it cannot be used, naming the file or the plugin at fault.
        reason: String,
    },
    /// The pod description cannot be used as it is.
    #[error("pod {pod}: {field}: {reason}")]
    InvalidPod {
        /// The pod's sandbox ID.
        pod: String,
        /// The field at fault.
        field: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Running a network's plugins for a pod failed.
    #[error("pod {pod}: network {network} ({ifname}): {source}")]
    Network {
        /// The pod's sandbox ID.
        pod: String,
        /// The network.
        network: String,
        /// The interface inside the pod.
        ifname: String,
        /// What the plugins said.
        #[source]
        source: Box<cni_exec::Error>,
    },
    /// Several attachments failed; each error is kept.
    #[error("{}", join(errors))]
    Multiple {
        /// One error per failed attachment.
        errors: Vec<Error>,
    },
    /// The configuration directory could not be read.
    #[error("cannot read CNI configuration directory {}: {reason}", dir.display())]
    ConfDir {
        /// The directory.
        dir: PathBuf,
        /// Why.
        reason: String,
    },
    /// The pod's network namespace could not be used.
    #[error("pod {pod}: {source}")]
    Netns {
        /// The pod's sandbox ID.
        pod: String,
        /// What went wrong entering or changing it.
        #[source]
        source: crate::netns::Error,
    },
    /// The result cache could not be read.
    #[error("result cache: {source}")]
    Cache {
        /// The cache error, naming the file.
        #[source]
        source: Box<cni_exec::Error>,
    },
    /// The GC verb failed for a network.
    #[error("gc of network {network}: {source}")]
    Gc {
        /// The network.
        network: String,
        /// What the plugins said.
        #[source]
        source: Box<cni_exec::Error>,
    },
    /// A network event could not be applied.
    #[error("network event {event}: {reason}")]
    InvalidEvent {
        /// The event's name.
        event: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The configuration watcher could not start.
    #[error("cannot watch the CNI configuration: {source}")]
    Watch {
        /// The watcher's error.
        #[source]
        source: cni_watch::Error,
    },
    /// A lock could not be taken.
    #[error(transparent)]
    Lock(#[from] cni_lock::Error),
}

fn join(errors: &[Error]) -> String {
    let parts: Vec<String> = errors.iter().map(ToString::to_string).collect();
    format!("{} errors: {}", parts.len(), parts.join("; "))
}

impl Error {
    /// Folds a list of errors into one: `None` when empty, the error itself when alone.
    pub fn from_many(mut errors: Vec<Error>) -> Option<Error> {
        match errors.len() {
            0 => None,
            1 => errors.pop(),
            _ => Some(Error::Multiple { errors }),
        }
    }
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

//! The interface a runtime programs against, so it can swap in a fake in its own tests.

use async_trait::async_trait;
use ipnet::IpNet;

use crate::error::Result;
use crate::implementation::PluginImplementation;
use crate::pod::{AttachmentResult, NetworkStatus, PodNetwork};

/// What a container runtime asks of its network side: the Go ocicni `CNIPlugin` interface.
///
/// The `Ocicni` type of this crate is the real implementation; runtimes test their own logic against a fake.
#[async_trait]
pub trait CniPlugin: Send + Sync {
    /// The plugin's name, `"cni"` for the real one.
    fn name(&self) -> &str;

    /// The network pods get when they name none, if one is loaded.
    fn default_network_name(&self) -> Option<String>;

    /// What runs each plugin type of the usable networks, built in or a binary, once per type
    /// (none by default: a fake has no plugins).
    fn plugin_implementations(&self) -> Vec<PluginImplementation> {
        Vec::new()
    }

    /// Attaches the pod to its networks and returns one result per attachment, in order.
    ///
    /// # Errors
    ///
    /// When any attachment fails; the attachments already made are torn down again first.
    async fn setup_pod(&self, pod: &PodNetwork) -> Result<Vec<AttachmentResult>>;

    /// Detaches the pod from its networks (every cached attachment when it names none).
    ///
    /// # Errors
    ///
    /// Every attachment is tried; the error lists each one that failed.
    async fn teardown_pod(&self, pod: &PodNetwork) -> Result<()>;

    /// The pod's attachments and their results, from the cache (or CHECK, by policy).
    ///
    /// # Errors
    ///
    /// When the status cannot be read (CHECK failed, the namespace cannot be entered).
    async fn pod_network_status(&self, pod: &PodNetwork) -> Result<Vec<AttachmentResult>>;

    /// Tears down cached attachments of pods not in `valid_pods`, and runs the GC verb.
    ///
    /// # Errors
    ///
    /// Every stale attachment is tried; the error lists each one that failed.
    async fn gc(&self, valid_pods: &[PodNetwork]) -> Result<()>;

    /// Whether pods can be attached now (the CRI `NetworkReady` condition).
    async fn status(&self) -> NetworkStatus;

    /// Sets or clears the node's pod CIDR (kubelet's `UpdateRuntimeConfig`).
    async fn set_pod_cidr(&self, cidr: Option<IpNet>);

    /// Reloads the configuration now (SIGHUP), without waiting for the watcher.
    ///
    /// # Errors
    ///
    /// When the configuration directory cannot be read at all.
    async fn reload(&self) -> Result<()>;

    /// Stops watching; later calls still work on the last configuration. Safe to call twice.
    async fn shutdown(&self);
}

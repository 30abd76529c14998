//! The namespace operations the daemon needs: ocicni's [`Pinner`] for pods' network namespaces,
//! and a trial of a pod's IPC sysctls; behind a trait so tests can run unprivileged.

use std::io;

use async_trait::async_trait;
pub use ocicni::netns::HostPinner as HostNetns;
use ocicni::netns::Pinner;

/// Pinning network namespaces ([`Pinner`]) and trying IPC sysctls. [`HostNetns`] does both for
/// real; tests pass a fake that creates plain files.
#[async_trait]
pub trait NetnsOps: Pinner {
    /// Asks the kernel whether it takes a pod's IPC sysctls, in order, in an IPC namespace that
    /// goes at once (the pod's own is made with its first container): a key it does not know or
    /// a value it refuses fails RunPodSandbox instead of every container. The provided answer
    /// checks only the form ([`oci_container::check_ipc_sysctl`]), as fakes need.
    ///
    /// # Errors
    ///
    /// When a key is not an IPC sysctl or the kernel refuses it; the error names the key.
    async fn try_ipc_sysctls(&self, sysctls: Vec<(String, String)>) -> io::Result<()> {
        for (key, value) in &sysctls {
            oci_container::check_ipc_sysctl(key, value).map_err(io::Error::other)?;
        }
        Ok(())
    }
}

#[async_trait]
impl NetnsOps for HostNetns {
    async fn try_ipc_sysctls(&self, sysctls: Vec<(String, String)>) -> io::Result<()> {
        tokio::task::spawn_blocking(move || oci_container::try_ipc_sysctls(&sysctls))
            .await
            .map_err(io::Error::other)?
            .map_err(io::Error::other)
    }
}

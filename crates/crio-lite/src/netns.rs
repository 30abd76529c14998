//! The namespace operations the daemon needs, behind a trait so tests can run unprivileged.

use std::io;
use std::path::Path;

use async_trait::async_trait;

/// Pinning and removing sandbox network namespaces.
///
/// [`HostNetns`] does it for real through `ocicni::netns`; tests pass a fake that creates plain
/// files, so the daemon's bookkeeping can be checked without privileges.
#[async_trait]
pub trait NetnsOps: Send + Sync {
    /// Creates a new network namespace pinned at `path`; nothing is left at `path` on error.
    ///
    /// # Errors
    ///
    /// When the namespace cannot be created or mounted (no `CAP_SYS_ADMIN`, `path` exists).
    async fn create_pinned(&self, path: &Path) -> io::Result<()>;

    /// Unpins and removes the namespace at `path`; a missing path is not an error.
    ///
    /// # Errors
    ///
    /// When the unmount or the unlink fails for another reason than "not there".
    async fn remove_pinned(&self, path: &Path) -> io::Result<()>;

    /// True when `path` holds a live network namespace (false for a bare file left by a reboot).
    async fn is_live(&self, path: &Path) -> bool;

    /// Undoes what pinning set up on the pin directory (its self bind mount), once it holds no
    /// pins; nothing mounted is fine.
    ///
    /// # Errors
    ///
    /// When the unmount fails for another reason than "not mounted".
    async fn release_dir(&self, dir: &Path) -> io::Result<()>;

    /// True when `dir` is a mount point already, before this daemon pins anything: someone else
    /// (`ip netns`, another runtime, a run that crashed) made that bind, and
    /// [`NetnsOps::release_dir`] must leave it. The provided answer is false (nothing is ever
    /// mounted, as for fakes).
    async fn is_mount_point(&self, _dir: &Path) -> bool {
        false
    }

    /// Sets network sysctls inside the namespace at `path`, in order.
    ///
    /// # Errors
    ///
    /// When a key is not a network sysctl, or the kernel refuses a value; the error names the key.
    async fn set_sysctls(&self, path: &Path, sysctls: Vec<(String, String)>) -> io::Result<()>;

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

/// The real thing: namespaces created in-process and bind-mounted, as CRI-O's `pinns` does.
#[derive(Debug, Clone, Copy, Default)]
pub struct HostNetns;

#[async_trait]
impl NetnsOps for HostNetns {
    async fn create_pinned(&self, path: &Path) -> io::Result<()> {
        ocicni::netns::create_pinned_async(path)
            .await
            .map_err(io::Error::other)
    }

    async fn remove_pinned(&self, path: &Path) -> io::Result<()> {
        ocicni::netns::remove_pinned_async(path)
            .await
            .map_err(io::Error::other)
    }

    async fn is_mount_point(&self, dir: &Path) -> bool {
        let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_owned());
        tokio::task::spawn_blocking(move || ocicni::netns::is_mount_point(&dir))
            .await
            .ok()
            .and_then(Result::ok)
            // Unknown: assume someone else's, so shutdown never detaches what it cannot vouch for.
            .unwrap_or(true)
    }

    async fn release_dir(&self, dir: &Path) -> io::Result<()> {
        let dir = dir.to_owned();
        tokio::task::spawn_blocking(move || ocicni::netns::release_dir(&dir))
            .await
            .map_err(io::Error::other)?
            .map_err(io::Error::other)
    }

    async fn set_sysctls(&self, path: &Path, sysctls: Vec<(String, String)>) -> io::Result<()> {
        ocicni::netns::set_sysctls_async(path, sysctls)
            .await
            .map_err(io::Error::other)
    }

    async fn try_ipc_sysctls(&self, sysctls: Vec<(String, String)>) -> io::Result<()> {
        tokio::task::spawn_blocking(move || oci_container::try_ipc_sysctls(&sysctls))
            .await
            .map_err(io::Error::other)?
            .map_err(io::Error::other)
    }

    async fn is_live(&self, path: &Path) -> bool {
        let path = path.to_owned();
        // A statfs, an open and an ioctl: cheap, but still blocking.
        tokio::task::spawn_blocking(move || ocicni::netns::is_netns(&path).unwrap_or(false))
            .await
            .unwrap_or(false)
    }
}

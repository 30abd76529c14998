//! A runtime's directory of pinned network namespaces, kept as CRI-O's namespace manager keeps
//! its own: pins made and removed through a [`Pinner`] (fakeable), strays of an earlier run
//! removed, and the directory's bind released at shutdown only when this process made it.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;

/// Pinning and removing network namespaces, behind a trait so that a runtime's bookkeeping can
/// be tested unprivileged with a fake that makes plain files. [`HostPinner`] does it for real.
#[async_trait]
pub trait Pinner: Send + Sync {
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

    /// Undoes what pinning set up on the pin directory (its self bind mount); nothing mounted
    /// is fine.
    ///
    /// # Errors
    ///
    /// When the unmount fails for another reason than "not mounted".
    async fn release_dir(&self, dir: &Path) -> io::Result<()>;

    /// True when `dir` is a mount point already. The provided answer is false (nothing is ever
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
}

/// The real thing: namespaces created in-process and bind-mounted (see the [module
/// docs](super)).
#[derive(Debug, Clone, Copy, Default)]
pub struct HostPinner;

#[async_trait]
impl Pinner for HostPinner {
    async fn create_pinned(&self, path: &Path) -> io::Result<()> {
        super::create_pinned_async(path)
            .await
            .map_err(io::Error::other)
    }

    async fn remove_pinned(&self, path: &Path) -> io::Result<()> {
        super::remove_pinned_async(path)
            .await
            .map_err(io::Error::other)
    }

    async fn is_live(&self, path: &Path) -> bool {
        let path = path.to_owned();
        // A statfs, an open and an ioctl: cheap, but still blocking.
        tokio::task::spawn_blocking(move || super::is_netns(&path).unwrap_or(false))
            .await
            .unwrap_or(false)
    }

    async fn release_dir(&self, dir: &Path) -> io::Result<()> {
        let dir = dir.to_owned();
        tokio::task::spawn_blocking(move || super::release_dir(&dir))
            .await
            .map_err(io::Error::other)?
            .map_err(io::Error::other)
    }

    async fn is_mount_point(&self, dir: &Path) -> bool {
        let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_owned());
        tokio::task::spawn_blocking(move || super::is_mount_point(&dir))
            .await
            .ok()
            .and_then(Result::ok)
            // Unknown: assume someone else's, so shutdown never detaches what it cannot vouch for.
            .unwrap_or(true)
    }

    async fn set_sysctls(&self, path: &Path, sysctls: Vec<(String, String)>) -> io::Result<()> {
        super::set_sysctls_async(path, sysctls)
            .await
            .map_err(io::Error::other)
    }
}

/// The directory a runtime pins its pods' namespaces in, one file per pod named by its ID.
///
/// Whether the directory's bind mount is this process's to release is decided once, by
/// [`PinDir::adopt`], before anything is pinned: it is when the directory is no mount point yet,
/// or when it holds only pins the runtime knows (an earlier run of it made the bind). A bind over
/// an empty directory, or over others' namespaces (the shared `/var/run/netns` that `ip netns`
/// and other runtimes use), is someone else's and stays.
#[derive(Debug)]
pub struct PinDir {
    dir: PathBuf,
    owned: AtomicBool,
}

impl PinDir {
    /// The directory `dir`; nothing is read or made yet.
    pub fn new(dir: impl Into<PathBuf>) -> PinDir {
        PinDir {
            dir: dir.into(),
            owned: AtomicBool::new(false),
        }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where the pin named `name` goes.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Decides, before this process pins anything, whether the directory's bind is its own:
    /// `known` says which names are pins of the runtime's pods.
    pub async fn adopt(&self, pinner: &dyn Pinner, known: impl Fn(&str) -> bool) {
        let mounted = pinner.is_mount_point(&self.dir).await;
        let names = self.names();
        let owned = !mounted || (!names.is_empty() && names.iter().all(|n| known(n)));
        self.owned.store(owned, Ordering::Relaxed);
    }

    fn names(&self) -> Vec<String> {
        std::fs::read_dir(&self.dir)
            .map(|dir| {
                dir.filter_map(std::result::Result::ok)
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Unpins and removes every pin named as `is_pin` says a pin is named that `keep` does not
    /// keep: what a runtime that died between pinning and recording left. Only regular files
    /// (pins are, with a namespace mounted on them): anything else was not made here and is
    /// left alone, with a warning. Failures are logged, and the next ones still tried.
    pub async fn remove_strays(
        &self,
        pinner: &dyn Pinner,
        is_pin: impl Fn(&str) -> bool,
        keep: impl Fn(&str) -> bool,
    ) {
        let Ok(dir) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let stray: Vec<PathBuf> = dir
            .filter_map(std::result::Result::ok)
            .filter(|e| {
                let name = e.file_name();
                let name = name.to_string_lossy();
                is_pin(&name) && !keep(&name)
            })
            .filter(|e| {
                let regular = e.file_type().is_ok_and(|t| t.is_file());
                if !regular {
                    tracing::warn!(path = %e.path().display(), "not a pin (not a regular file); leaving it alone");
                }
                regular
            })
            .map(|e| e.path())
            .collect();
        for path in stray {
            tracing::info!(path = %path.display(), "removing network namespace without a sandbox");
            if let Err(e) = pinner.remove_pinned(&path).await {
                tracing::warn!(path = %path.display(), error = %e, "cannot remove stray network namespace");
            }
        }
    }

    /// At shutdown: the directory's bind goes once no pin is left in it, when this process made
    /// it ([`PinDir::adopt`]). Pins of pods that outlive the process stay, and with them the
    /// mount they need.
    pub async fn release(&self, pinner: &dyn Pinner) {
        if !self.owned.load(Ordering::Relaxed) {
            tracing::debug!(dir = %self.dir.display(), "the pin directory was mounted before this process; leaving it");
            return;
        }
        if !self.names().is_empty() {
            return;
        }
        if let Err(e) = pinner.release_dir(&self.dir).await {
            tracing::warn!(dir = %self.dir.display(), error = %e, "cannot release the namespace pin directory");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Plain files; "mounted" as told.
    struct Files(bool);

    #[async_trait]
    impl Pinner for Files {
        async fn create_pinned(&self, path: &Path) -> io::Result<()> {
            std::fs::write(path, "")
        }
        async fn remove_pinned(&self, path: &Path) -> io::Result<()> {
            std::fs::remove_file(path)
        }
        async fn is_live(&self, path: &Path) -> bool {
            path.exists()
        }
        async fn release_dir(&self, dir: &Path) -> io::Result<()> {
            std::fs::write(dir.join("released"), "")
        }
        async fn is_mount_point(&self, _dir: &Path) -> bool {
            self.0
        }
        async fn set_sysctls(&self, _: &Path, _: Vec<(String, String)>) -> io::Result<()> {
            Ok(())
        }
    }

    #[tokio::test]
    async fn the_bind_is_ours_when_unmounted_or_holding_only_our_pins() {
        let tmp = tempfile::tempdir().unwrap();
        let pins = PinDir::new(tmp.path());
        let ours = |n: &str| n.starts_with("ours");
        for (mounted, files, owned) in [
            (false, &[][..], true),
            (true, &[][..], false),
            (true, &["ours1"][..], true),
            (true, &["ours1", "theirs"][..], false),
        ] {
            for f in files {
                std::fs::write(tmp.path().join(f), "").unwrap();
            }
            pins.adopt(&Files(mounted), ours).await;
            assert_eq!(
                pins.owned.load(Ordering::Relaxed),
                owned,
                "{mounted} {files:?}"
            );
            for f in files {
                std::fs::remove_file(tmp.path().join(f)).unwrap();
            }
        }
    }

    #[tokio::test]
    async fn strays_go_kept_pins_and_non_files_stay_and_release_waits_for_empty() {
        let tmp = tempfile::tempdir().unwrap();
        let pins = PinDir::new(tmp.path());
        let pinner = Files(false);
        pins.adopt(&pinner, |_| false).await;
        for name in ["p-kept", "p-stray"] {
            pinner.create_pinned(&pins.path(name)).await.unwrap();
        }
        std::fs::create_dir(pins.path("p-dir")).unwrap();
        std::fs::write(pins.path("other"), "").unwrap();
        pins.remove_strays(&pinner, |n| n.starts_with("p-"), |n| n == "p-kept")
            .await;
        let mut left = pins.names();
        left.sort();
        assert_eq!(left, ["other", "p-dir", "p-kept"]);
        pins.release(&pinner).await;
        assert!(!pins.path("released").exists(), "not empty yet");
        for name in left {
            let path = pins.path(&name);
            if path.is_dir() {
                std::fs::remove_dir(path).unwrap();
            } else {
                std::fs::remove_file(path).unwrap();
            }
        }
        pins.release(&pinner).await;
        assert!(pins.path("released").exists());
    }
}

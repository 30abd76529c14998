//! Storage drivers: how a container's root file system is made from an image's layers, and the
//! probe that picks one when a store opens.

use std::fmt;
use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::thread::JoinHandle;

use serde::{Deserialize, Serialize};

use crate::error::Error;

/// How containers' root file systems are made, named as CRI-O and containers/storage report
/// them (`storage_driver` in CRI-O's `/info`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StorageDriver {
    /// An overlayfs mount of the image's layers with a writable upper directory per container:
    /// instant and shares the layers' pages.
    Overlay,
    /// A full copy of the layers per container, whiteouts and opaque directories applied: for
    /// nodes where overlayfs cannot be mounted (an overlay root, some nested containers).
    Vfs,
}

impl StorageDriver {
    /// The driver's name: `overlay` or `vfs`.
    pub fn name(self) -> &'static str {
        match self {
            StorageDriver::Overlay => "overlay",
            StorageDriver::Vfs => "vfs",
        }
    }
}

impl fmt::Display for StorageDriver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for StorageDriver {
    type Err = Error;

    /// Parses `overlay` (or containers/storage's older name `overlay2`) and `vfs`.
    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "overlay" | "overlay2" => Ok(StorageDriver::Overlay),
            "vfs" => Ok(StorageDriver::Vfs),
            _ => Err(Error::UnknownStorageDriver { name: s.to_owned() }),
        }
    }
}

/// The driver a store makes root file systems with: known at once when configured, else found
/// by an overlay probe that runs beside the daemon's start.
///
/// The probe's unmount waits for an RCU grace period, 16 ms to almost a second on a busy node
/// (measured here), and nothing needs the answer before the first root file system is made, so
/// a store opened without a configured driver probes on a thread of its own and
/// [`DriverChoice::get`] waits for it only when asked.
#[derive(Debug)]
pub(crate) struct DriverChoice {
    chosen: OnceLock<StorageDriver>,
    probe: Mutex<Option<JoinHandle<StorageDriver>>>,
}

impl DriverChoice {
    /// A driver known without a probe.
    pub(crate) fn known(driver: StorageDriver) -> DriverChoice {
        let chosen = OnceLock::new();
        let _ = chosen.set(driver);
        DriverChoice {
            chosen,
            probe: Mutex::new(None),
        }
    }

    /// A driver to be found by [`DriverChoice::start_probe`].
    pub(crate) fn pending() -> DriverChoice {
        DriverChoice {
            chosen: OnceLock::new(),
            probe: Mutex::new(None),
        }
    }

    /// Starts the probe: overlay if a mount under `dir` works, else vfs (logging why); on a
    /// thread, or inline if none can be started.
    pub(crate) fn start_probe(&self, dir: PathBuf) {
        let decide = move || match probe_overlay(&dir) {
            Ok(()) => StorageDriver::Overlay,
            Err(reason) => {
                tracing::warn!(
                    reason,
                    "overlay cannot be mounted: containers' root file systems will be copies (vfs)"
                );
                StorageDriver::Vfs
            }
        };
        // The closure comes back when no thread could take it.
        let slot = std::sync::Arc::new(Mutex::new(Some(decide)));
        let on_thread = std::sync::Arc::clone(&slot);
        let spawned = std::thread::Builder::new()
            .name("overlay-probe".into())
            .spawn(move || {
                let f = on_thread
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take();
                f.map_or(StorageDriver::Vfs, |f| f())
            });
        if let Ok(handle) = spawned {
            *self.probe.lock().unwrap_or_else(PoisonError::into_inner) = Some(handle);
        } else {
            let f = slot.lock().unwrap_or_else(PoisonError::into_inner).take();
            let _ = self.chosen.set(f.map_or(StorageDriver::Vfs, |f| f()));
        }
    }

    /// The driver, waiting for the probe if it still runs.
    pub(crate) fn get(&self) -> StorageDriver {
        *self.chosen.get_or_init(|| {
            let handle = self
                .probe
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
            match handle.map(JoinHandle::join) {
                Some(Ok(driver)) => driver,
                Some(Err(_)) => {
                    tracing::warn!("the overlay probe failed: containers' root file systems will be copies (vfs)");
                    StorageDriver::Vfs
                }
                None => StorageDriver::Vfs,
            }
        })
    }
}

impl Drop for DriverChoice {
    /// A store closed while its probe runs waits for it: the probe's mount must be gone before
    /// anyone removes the store's directory.
    fn drop(&mut self) {
        let handle = self
            .probe
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(handle) = handle {
            let _ = handle.join();
        }
    }
}

/// The prefix of probe directories under `<root>/containers/`, swept at open.
pub(crate) const PROBE_PREFIX: &str = ".probe-";

/// Mounts a one-file overlay in a fresh directory under `dir` (on the store's file system, where
/// the real ones will be), checks it shows the lower file, and takes it down. `Err` says why
/// overlay cannot be used.
pub(crate) fn probe_overlay(dir: &Path) -> Result<(), String> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let base = dir.join(format!(
        "{PROBE_PREFIX}{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let result = probe_in(&base);
    if let Err(e) = crate::mount::unmount(&base.join("merged")) {
        tracing::warn!(error = %e, "cannot unmount the overlay probe");
    }
    if let Err(e) = crate::blobs::remove_any(&base) {
        tracing::warn!(error = %e, "cannot remove the overlay probe");
    }
    result
}

fn probe_in(base: &Path) -> Result<(), String> {
    let [lower, upper, work, merged] =
        ["lower", "upper", "work", "merged"].map(|name| base.join(name));
    for d in [base, &lower, &upper, &work, &merged] {
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(d)
            .map_err(|e| format!("cannot create {}: {e}", d.display()))?;
    }
    std::fs::write(lower.join("probe"), b"overlay")
        .map_err(|e| format!("cannot write the probe's lower file: {e}"))?;
    crate::mount::mount_overlay(&[lower], &upper, &work, &merged).map_err(|e| match e {
        crate::mount::MountError::Io(e) => format!("mount -t overlay: {e}"),
        crate::mount::MountError::TooLong => "the probe's paths are too long".to_owned(),
    })?;
    match std::fs::read(merged.join("probe")) {
        Ok(bytes) if bytes == b"overlay" => Ok(()),
        Ok(_) => Err("the overlay shows other bytes than its lower file's".to_owned()),
        Err(e) => Err(format!("the overlay does not show its lower file: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_as_containers_storage_spells_them() {
        for driver in [StorageDriver::Overlay, StorageDriver::Vfs] {
            assert_eq!(driver.name().parse::<StorageDriver>().unwrap(), driver);
            assert_eq!(
                serde_json::to_string(&driver).unwrap(),
                format!("\"{driver}\"")
            );
        }
        assert_eq!(
            "overlay2".parse::<StorageDriver>().unwrap(),
            StorageDriver::Overlay
        );
        let err = "btrfs".parse::<StorageDriver>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown storage driver \"btrfs\": expected \"overlay\" or \"vfs\""
        );
    }
}

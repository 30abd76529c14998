//! Storage drivers: how a container's root file system is made from an image's layers, and the
//! probe that picks one when a store opens.

use std::fmt;
use std::os::unix::fs::DirBuilderExt as _;
use std::path::Path;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};

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

//! Containers' root file systems: one directory per container under `<root>/containers/`, made
//! from an image's layers by the store's [`StorageDriver`].
//!
//! ```text
//! <root>/containers/<id>/rootfs.json  the record: container, image, driver, layers, state
//! <root>/containers/<id>/upper/       overlay: the container's writes
//! <root>/containers/<id>/work/        overlay: its work directory
//! <root>/containers/<id>/merged/      overlay: the mount point, the container's root
//! <root>/containers/<id>/rootfs/      vfs: the copy, the container's root
//! ```
//!
//! Crash safety: the record is written (atomically, synced) before anything is made, with the
//! state `creating`; `ready` once the mount or the copy is done; `removing` before a removal
//! touches anything. [`Store::open`](crate::Store::open) finishes what a killed process left:
//! `creating` and `removing` directories are taken down, as are directories without a record;
//! a `ready` overlay whose mount is gone (a reboot) is mounted again. A mount is the
//! container's only when `/proc/self/mountinfo` shows an overlay on its merged directory whose
//! upper directory is the container's: a path alone proves nothing. A directory is deleted only
//! once nothing is mounted at or below it, after it is renamed out of the way, so the container
//! id can be used again at once.

use std::collections::BTreeMap;
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use crate::digest::Digest;
use crate::driver::{PROBE_PREFIX, StorageDriver};
use crate::error::{Error, Result};
use crate::mount::{MountEntry, MountError};
use crate::store::{Inner, Store};
use crate::usage::{Usage, usage};

const RECORD: &str = "rootfs.json";
const RECORD_MAX: u64 = 1 << 20;
const VERSION: u32 = 1;
/// Directories being deleted are renamed to `.removing-<id>-<pid>-<n>` first.
const TRASH_PREFIX: &str = ".removing-";
/// A container's root file system.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Rootfs {
    /// The directory to use as the container's root: the overlay's merged directory, or the copy.
    pub path: PathBuf,
    /// The container it belongs to.
    pub container_id: String,
    /// The image it was made from.
    pub image_id: String,
    /// How it was made.
    pub driver: StorageDriver,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum State {
    Creating,
    Ready,
    Removing,
}

/// What `rootfs.json` holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Record {
    version: u32,
    pub(crate) container_id: String,
    pub(crate) image_id: String,
    pub(crate) driver: StorageDriver,
    /// The image's layers by chain id, bottom first: what the garbage collector must keep.
    pub(crate) layers: Vec<Digest>,
    pub(crate) state: State,
}

/// The paths of one container's directory.
struct Paths {
    dir: PathBuf,
    upper: PathBuf,
    work: PathBuf,
    merged: PathBuf,
    copy: PathBuf,
    empty: PathBuf,
}

/// Refuses a container id that could name anything but one directory under `containers/`:
/// the workspace's one rule ([`node_primitives::id`]): 1 to 128 of `[A-Za-z0-9_.-]` (the cap
/// keeps paths, and so the mount data, short), starting with a letter or digit (so never `.`,
/// `..` or a hidden name). CRI-O's 64-hex ids pass.
pub(crate) fn validate_container_id(id: &str) -> Result<()> {
    match node_primitives::id::check_container_id(id) {
        None => Ok(()),
        Some(problem) => Err(Error::InvalidContainerId {
            id: id.to_owned(),
            reason: problem.reason(),
        }),
    }
}

impl Store {
    /// The driver containers' root file systems are made with, chosen when the store opened.
    pub fn storage_driver(&self) -> StorageDriver {
        self.inner.driver.get()
    }

    /// Makes the root file system of container `container_id` from the image `image_query`
    /// names (as [`Store::get`] finds it): an overlay mount of its layers with a writable upper
    /// directory of its own, or with [`StorageDriver::Vfs`] a copy of them. Blocks (a copy can
    /// take long): call it from a blocking task.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidContainerId`]; [`Error::RootfsExists`] when the container has one;
    /// as [`Store::get`]; [`Error::Mount`] or [`Error::TooManyLayers`] when the overlay cannot
    /// be mounted; [`Error::Io`] when a directory or the copy cannot be made. Nothing of a
    /// failed creation is left.
    pub fn create_rootfs(&self, container_id: &str, image_query: &str) -> Result<Rootfs> {
        validate_container_id(container_id)?;
        let inner = &self.inner;
        let _ops = inner.rootfs_ops();
        let mut record = inner.record_intent(container_id, image_query)?;
        let paths = inner.paths(container_id);
        let made = match record.driver {
            StorageDriver::Overlay => inner.make_overlay(&record, &paths),
            StorageDriver::Vfs => inner.make_copy(&record, &paths),
        };
        let done = made.and_then(|()| {
            record.state = State::Ready;
            write_record(&paths.dir, &record)?;
            inner
                .rootfs_table()
                .insert(container_id.to_owned(), record.clone());
            Ok(())
        });
        if let Err(e) = done {
            if let Err(clean) = inner.take_down(container_id) {
                tracing::warn!(container = container_id, error = %clean,
                    "cannot remove a failed root file system; the next open will");
            }
            return Err(e);
        }
        tracing::info!(container = container_id, image = %record.image_id,
            driver = %record.driver, "root file system ready");
        Ok(inner.rootfs_of(&record))
    }

    /// Removes container `container_id`'s root file system: unmounts it (detaching it when it
    /// is busy), then deletes its directory, upper directory or copy included. Returns whether
    /// there was one; removing one that is gone is not an error.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidContainerId`]; [`Error::StillMounted`] when a mount in it does not go;
    /// [`Error::Io`] when its record cannot be written or its directory renamed.
    pub fn remove_rootfs(&self, container_id: &str) -> Result<bool> {
        validate_container_id(container_id)?;
        let inner = &self.inner;
        let _ops = inner.rootfs_ops();
        let paths = inner.paths(container_id);
        let record = inner.rootfs_table().get(container_id).cloned();
        if let Some(mut record) = record {
            if record.state != State::Removing {
                record.state = State::Removing;
                write_record(&paths.dir, &record)?;
                inner.rootfs_table().insert(container_id.to_owned(), record);
            }
        } else if std::fs::symlink_metadata(&paths.dir).is_err() {
            return Ok(false);
        }
        inner.take_down(container_id)?;
        tracing::info!(container = container_id, "root file system removed");
        Ok(true)
    }

    /// Container `container_id`'s root file system.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidContainerId`]; [`Error::RootfsNotFound`] when it has none (or it is
    /// being made or removed).
    pub fn rootfs(&self, container_id: &str) -> Result<Rootfs> {
        validate_container_id(container_id)?;
        self.inner
            .rootfs_table()
            .get(container_id)
            .filter(|r| r.state == State::Ready)
            .map(|r| self.inner.rootfs_of(r))
            .ok_or_else(|| Error::RootfsNotFound {
                container: container_id.to_owned(),
            })
    }

    /// Every container's root file system, by container id.
    pub fn list_rootfs(&self) -> Vec<Rootfs> {
        self.inner
            .rootfs_table()
            .values()
            .filter(|r| r.state == State::Ready)
            .map(|r| self.inner.rootfs_of(r))
            .collect()
    }

    /// The bytes and inodes container `container_id`'s writable layer takes: its upper and
    /// work directories (overlay) or its copy (vfs). CRI's `ContainerStats` writable layer.
    ///
    /// # Errors
    ///
    /// As [`Store::rootfs`]; [`Error::Io`] when a directory cannot be read.
    pub fn rootfs_disk_usage(&self, container_id: &str) -> Result<Usage> {
        let rootfs = self.rootfs(container_id)?;
        Ok(self
            .inner
            .writable_usage(&rootfs.container_id, rootfs.driver))
    }

    /// The bytes and inodes every container's writable layer takes, together: CRI's container
    /// file systems (`ImageFsInfo`'s `container_filesystems`). [`Store::disk_usage`] counts the
    /// images only. A directory that cannot be read counts nothing.
    pub fn containers_disk_usage(&self) -> Usage {
        let records: Vec<Record> = self.inner.rootfs_table().values().cloned().collect();
        records
            .iter()
            .map(|r| self.inner.writable_usage(&r.container_id, r.driver))
            .fold(Usage::default(), |a, b| a + b)
    }
}

impl Inner {
    pub(crate) fn rootfs_table(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Record>> {
        // Every change is made on disk first, then in the table: a panic leaves it coherent.
        self.rootfs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn rootfs_ops(&self) -> std::sync::MutexGuard<'_, ()> {
        self.rootfs_ops
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn paths(&self, id: &str) -> Paths {
        let dir = self.containers.join(id);
        Paths {
            upper: dir.join("upper"),
            work: dir.join("work"),
            merged: dir.join("merged"),
            copy: dir.join("rootfs"),
            empty: dir.join("empty"),
            dir,
        }
    }

    fn rootfs_of(&self, record: &Record) -> Rootfs {
        let paths = self.paths(&record.container_id);
        Rootfs {
            path: match record.driver {
                StorageDriver::Overlay => paths.merged,
                StorageDriver::Vfs => paths.copy,
            },
            container_id: record.container_id.clone(),
            image_id: record.image_id.clone(),
            driver: record.driver,
        }
    }

    /// Looks the image up and writes the `creating` record, under the table's lock: an image
    /// removal, which checks the table under the same lock, sees the container from then on.
    fn record_intent(&self, id: &str, image_query: &str) -> Result<Record> {
        let mut table = self.rootfs_table();
        if table.contains_key(id) {
            return Err(Error::RootfsExists {
                container: id.to_owned(),
            });
        }
        let image = self.find_image(image_query)?;
        let record = Record {
            version: VERSION,
            container_id: id.to_owned(),
            image_id: image.id.clone(),
            driver: self.driver.get(),
            layers: image.layers.iter().map(|l| l.chain_id.clone()).collect(),
            state: State::Creating,
        };
        let paths = self.paths(id);
        // A directory without a record (a removal that failed half-way) is nobody's.
        self.delete_dir(id, &paths.dir)?;
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&paths.dir)
            .map_err(|e| Error::io("create", &paths.dir, e))?;
        write_record(&paths.dir, &record)?;
        table.insert(id.to_owned(), record.clone());
        Ok(record)
    }

    /// The layer directories of `record`, bottom first, each checked to be there.
    fn lower_dirs(&self, record: &Record) -> Result<Vec<PathBuf>> {
        record
            .layers
            .iter()
            .map(|chain_id| {
                let dir = self.canonical_layers.join(chain_id.hex());
                match std::fs::symlink_metadata(&dir) {
                    Ok(m) if m.is_dir() => Ok(dir),
                    Ok(_) => Err(Error::io(
                        "use as a layer",
                        &dir,
                        std::io::Error::other("not a directory"),
                    )),
                    Err(e) => Err(Error::io("use as a layer", &dir, e)),
                }
            })
            .collect()
    }

    fn make_overlay(&self, record: &Record, paths: &Paths) -> Result<()> {
        let lowers = self.lower_dirs(record)?;
        // The merged root shows the upper directory's owner and mode: the top layer's.
        let top = lowers.last().cloned();
        for dir in [&paths.upper, &paths.work, &paths.merged] {
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(dir)
                .map_err(|e| Error::io("create", dir, e))?;
        }
        let root_meta = match &top {
            Some(top) => std::fs::metadata(top).map_err(|e| Error::io("read", top, e))?,
            None => std::fs::metadata(&paths.dir).map_err(|e| Error::io("read", &paths.dir, e))?,
        };
        std::os::unix::fs::chown(&paths.upper, Some(root_meta.uid()), Some(root_meta.gid()))
            .map_err(|e| Error::io("chown", &paths.upper, e))?;
        let mode = if top.is_some() {
            root_meta.mode() & 0o7777
        } else {
            0o755
        };
        std::fs::set_permissions(&paths.upper, std::fs::Permissions::from_mode(mode))
            .map_err(|e| Error::io("chmod", &paths.upper, e))?;
        self.mount_overlay(record, paths)
    }

    fn mount_overlay(&self, record: &Record, paths: &Paths) -> Result<()> {
        let mut lowers = self.lower_dirs(record)?;
        if lowers.is_empty() {
            // overlayfs needs a lower directory; an image without layers gets an empty one.
            match std::fs::DirBuilder::new().mode(0o755).create(&paths.empty) {
                Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
                    return Err(Error::io("create", &paths.empty, e));
                }
                _ => {}
            }
            lowers.push(paths.empty.clone());
        }
        lowers.reverse();
        crate::mount::mount_overlay(&lowers, &paths.upper, &paths.work, &paths.merged).map_err(
            |e| match e {
                MountError::TooLong => Error::TooManyLayers {
                    container: record.container_id.clone(),
                    layers: record.layers.len(),
                },
                MountError::Io(source) => Error::Mount {
                    container: record.container_id.clone(),
                    target: paths.merged.clone(),
                    source: Arc::new(source),
                },
            },
        )
    }

    fn make_copy(&self, record: &Record, paths: &Paths) -> Result<()> {
        let lowers = self.lower_dirs(record)?;
        std::fs::DirBuilder::new()
            .mode(0o755)
            .create(&paths.copy)
            .map_err(|e| Error::io("create", &paths.copy, e))?;
        crate::copy::copy_layers(&lowers, &paths.copy)
            .map_err(|e| Error::io("copy the image's layers into", &paths.copy, e))?;
        // `ready` must not reach the disk before the copy does.
        let dir =
            std::fs::File::open(&paths.copy).map_err(|e| Error::io("open", &paths.copy, e))?;
        nix::unistd::syncfs(&dir).map_err(|e| Error::io("sync", &paths.copy, e.into()))
    }

    /// Unmounts and deletes container `id`'s directory and forgets it.
    fn take_down(&self, id: &str) -> Result<()> {
        let paths = self.paths(id);
        self.delete_dir(id, &paths.dir)?;
        self.rootfs_table().remove(id);
        Ok(())
    }

    /// Unmounts whatever is mounted at or below `dir` (a container's own: its overlay, or what
    /// a runtime mounted in it), checks nothing is left, renames `dir` out of the way and
    /// deletes it. A missing `dir` is fine.
    fn delete_dir(&self, id: &str, dir: &Path) -> Result<()> {
        if std::fs::symlink_metadata(dir).is_err() {
            return Ok(());
        }
        unmount_below(id, dir)?;
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let trash = self.containers.join(format!(
            "{TRASH_PREFIX}{id}-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::rename(dir, &trash).map_err(|e| Error::io("rename for removal", dir, e))?;
        crate::blobs::sync_dirs(&[&self.containers]);
        crate::blobs::remove_any(&trash)
    }

    fn writable_usage(&self, id: &str, driver: StorageDriver) -> Usage {
        let paths = self.paths(id);
        let dirs = match driver {
            StorageDriver::Overlay => vec![paths.upper, paths.work],
            StorageDriver::Vfs => vec![paths.copy],
        };
        dirs.iter()
            .map(|d| {
                usage(d).unwrap_or_else(|e| {
                    tracing::debug!(dir = %d.display(), error = %e, "cannot measure");
                    Usage::default()
                })
            })
            .fold(Usage::default(), |a, b| a + b)
    }

    /// At open: reads every record, finishes what a killed process left and mounts again the
    /// overlays a reboot took down. Returns how many directories were removed.
    pub(crate) fn recover_rootfs(&self) -> Result<usize> {
        let mounts = read_mountinfo()?;
        let mut removed = 0;
        for entry in crate::blobs::read_dir(&self.containers)? {
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = entry.path();
            let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
            if !is_dir || validate_container_id(&name).is_err() {
                if !(name.starts_with(TRASH_PREFIX) || name.starts_with(PROBE_PREFIX)) {
                    tracing::warn!(path = %path.display(), "removing a stranger among containers");
                }
                unmount_below(&name, &path)?;
                crate::blobs::remove_any(&path)?;
                removed += 1;
                continue;
            }
            let record = match read_record(&path) {
                Ok(r) if r.container_id == name => r,
                Ok(_) | Err(_) => {
                    tracing::warn!(
                        container = name,
                        "no readable record: removing the directory"
                    );
                    self.delete_dir(&name, &path)?;
                    removed += 1;
                    continue;
                }
            };
            self.rootfs_table().insert(name.clone(), record.clone());
            if record.state != State::Ready {
                tracing::info!(container = name, state = ?record.state,
                    "finishing an interrupted root file system");
                self.take_down(&name)?;
                removed += 1;
                continue;
            }
            if record.driver == StorageDriver::Overlay {
                let paths = self.paths(&name);
                let mounted = mounts.iter().any(|m| {
                    m.mount_point == paths.merged && crate::mount::is_overlay_on(m, &paths.upper)
                });
                if !mounted {
                    match self.mount_overlay(&record, &paths) {
                        Ok(()) => {
                            tracing::info!(container = name, "root file system mounted again");
                        }
                        Err(e) => {
                            tracing::warn!(container = name, error = %e,
                                "cannot mount a root file system again");
                        }
                    }
                }
            }
        }
        Ok(removed)
    }

    /// Chain ids the root file systems use: never collected.
    pub(crate) fn rootfs_layers(&self) -> Vec<Digest> {
        self.rootfs_table()
            .values()
            .flat_map(|r| r.layers.iter().cloned())
            .collect()
    }

    /// The containers whose root file systems are made of image `image_id`.
    pub(crate) fn rootfs_users(table: &BTreeMap<String, Record>, image_id: &str) -> Vec<String> {
        table
            .values()
            .filter(|r| r.image_id == image_id)
            .map(|r| r.container_id.clone())
            .collect()
    }
}

fn read_mountinfo() -> Result<Vec<MountEntry>> {
    crate::mount::mountinfo().map_err(|e| Error::io("read", Path::new("/proc/self/mountinfo"), e))
}

/// Unmounts everything at or below `dir`, deepest first, and checks nothing is left.
fn unmount_below(id: &str, dir: &Path) -> Result<()> {
    for point in crate::mount::mounts_at_or_below(&read_mountinfo()?, dir) {
        crate::mount::unmount(&point).map_err(|e| Error::io("unmount", &point, e))?;
    }
    if let Some(left) = crate::mount::mounts_at_or_below(&read_mountinfo()?, dir).first() {
        return Err(Error::StillMounted {
            container: id.to_owned(),
            mount: left.clone(),
        });
    }
    Ok(())
}

fn write_record(dir: &Path, record: &Record) -> Result<()> {
    let path = dir.join(RECORD);
    let bytes = serde_json::to_vec_pretty(record).map_err(|e| Error::CorruptRootfs {
        path: path.clone(),
        reason: e.to_string(),
    })?;
    // Atomic, not synced: a record serves a daemon killed at any line (the page cache outlives
    // it). After a power loss no container runs, and a directory whose record is missing or
    // torn is removed at open, as one whose removal was interrupted.
    safe_file::write_atomic(&path, &bytes, 0o600, safe_file::Durability::Unsynced)
        .map_err(|e| Error::file("write a root file system record", e))
}

fn read_record(dir: &Path) -> Result<Record> {
    let path = dir.join(RECORD);
    let bytes = safe_file::read_regular(&path, RECORD_MAX, safe_file::Symlinks::Refuse)
        .map_err(|e| Error::file("read a root file system record", e))?;
    let record: Record = serde_json::from_slice(&bytes).map_err(|e| Error::CorruptRootfs {
        path: path.clone(),
        reason: e.to_string(),
    })?;
    if record.version != VERSION {
        return Err(Error::CorruptRootfs {
            path,
            reason: format!("version {} is not {VERSION}", record.version),
        });
    }
    Ok(record)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn container_ids_name_one_directory() {
        for good in [
            "a",
            "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "my-pod_ctr.1",
            &"x".repeat(128),
        ] {
            validate_container_id(good).unwrap_or_else(|e| panic!("{good}: {e}"));
        }
        for bad in [
            "",
            ".",
            "..",
            "../x",
            "a/b",
            "/abs",
            ".hidden",
            "-flag",
            "a b",
            "a\0b",
            "é",
            "a\nb",
            &"x".repeat(129),
        ] {
            let err = validate_container_id(bad).unwrap_err();
            assert!(
                matches!(&err, Error::InvalidContainerId { id, .. } if id == bad),
                "{bad:?}: {err}"
            );
            assert!(err.to_string().starts_with("invalid container id"), "{err}");
        }
    }

    #[test]
    fn records_round_trip_and_name_their_state() {
        let record = Record {
            version: VERSION,
            container_id: "c1".into(),
            image_id: "ab".into(),
            driver: StorageDriver::Overlay,
            layers: vec![Digest::of(b"layer")],
            state: State::Creating,
        };
        let dir = tempfile::tempdir().unwrap();
        write_record(dir.path(), &record).unwrap();
        let text = std::fs::read_to_string(dir.path().join(RECORD)).unwrap();
        assert!(
            text.contains("\"creating\"") && text.contains("\"overlay\""),
            "{text}"
        );
        assert_eq!(read_record(dir.path()).unwrap(), record);
        std::fs::write(dir.path().join(RECORD), b"{").unwrap();
        assert!(matches!(
            read_record(dir.path()),
            Err(Error::CorruptRootfs { .. })
        ));
    }
}

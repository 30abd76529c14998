//! The store: its directory, its index, look-ups, removal and disk usage.

use std::collections::{BTreeMap, HashMap};
use std::fs::{DirBuilder, File, OpenOptions};
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use futures_util::future::{BoxFuture, Shared};
use nix::fcntl::{Flock, FlockArg};

use crate::blobs::{Blobs, read_dir, remove_any};
use crate::config::StoreConfig;
use crate::digest::{Digest, is_sha256_hex};
use crate::driver::StorageDriver;
use crate::error::{Error, Result};
use crate::index::{Image, IndexFile};
use crate::reference::Reference;
use crate::rootfs::Record;
use crate::usage::{Usage, usage_except};

/// A pull in progress, which later pulls of the same reference join.
pub(crate) type Inflight = Shared<BoxFuture<'static, Result<Image>>>;

/// An image store on disk: content-addressed blobs, layers unpacked once by chain id, and an
/// index of images. Cheap to clone; clones share everything. One process at a time has a store
/// open: the lock goes when the last clone and every pull it started are gone.
///
/// ```text
/// <root>/store.lock            held (flock) while the store is open
/// <root>/images.json           the index: replaced atomically, names complete images only
/// <root>/blobs/sha256/<hex>    manifests, indexes, configurations, layer blobs; verified
/// <root>/layers/<chain-hex>/   one layer unpacked, in overlayfs form (a lowerdir)
/// <root>/containers/<id>/      a container's root file system (see Store::create_rootfs)
/// ```
#[derive(Clone)]
pub struct Store {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) config: StoreConfig,
    pub(crate) blobs: Blobs,
    pub(crate) layers: PathBuf,
    pub(crate) index: Mutex<IndexFile>,
    /// What pulls in progress stored and have not indexed yet: never collected. No lock is
    /// held across a request to a registry.
    pub(crate) pinned: Mutex<crate::pins::Pinned>,
    pub(crate) inflight: Mutex<HashMap<String, Inflight>>,
    /// The registry clients anonymous pulls share, or why they could not be made: made at the
    /// first pull, not at open (reading and parsing the node's CA certificates and building
    /// the TLS configuration is most of what an open costs otherwise).
    pub(crate) clients:
        std::sync::OnceLock<std::result::Result<crate::pull::RegistryClients, String>>,
    /// How containers' root file systems are made (possibly still being probed).
    pub(crate) driver: crate::driver::DriverChoice,
    /// `<root>/containers`, the root resolved: mountinfo shows resolved paths.
    pub(crate) containers: PathBuf,
    /// `<root>/layers`, the root resolved: the overlay lower directories.
    pub(crate) canonical_layers: PathBuf,
    /// Every container's root file system record, by container id. Taken before `index`.
    pub(crate) rootfs: Mutex<BTreeMap<String, Record>>,
    /// Held for the whole of a root file system's creation or removal.
    pub(crate) rootfs_ops: Mutex<()>,
    _lock: Flock<File>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("root", &self.inner.config.root)
            .finish_non_exhaustive()
    }
}

/// What [`Store::open`] found left over from a killed process and removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Swept {
    /// Temporary and unindexed blob files.
    pub blobs: usize,
    /// Temporary and unindexed layer directories.
    pub layers: usize,
    /// Containers' root file systems half made or half removed, and strangers among them.
    pub rootfs: usize,
}

impl Store {
    /// Opens (creating it if needed) the store at `config.root`, takes its lock, reads its index
    /// and sweeps what a killed pull left: temporary files and directories, and blobs and layers
    /// that no indexed image or container uses. Containers' root file systems that a killed
    /// process left half made or half removed are removed; overlays whose mount is gone (after
    /// a reboot) are mounted again. Then it picks the storage driver: the configured one (overlay
    /// checked with a probe mount), or, when none is configured, overlay if a probe mount works
    /// and vfs (logging why) if not. That probe runs on a thread of its own while the caller goes
    /// on (its unmount can take most of a second on a busy node); the first root file system, or
    /// [`Store::storage_driver`], waits for it.
    ///
    /// # Errors
    ///
    /// [`Error::Locked`] when another process has the store open, [`Error::Io`] when its
    /// directories cannot be made or read, [`Error::CorruptIndex`] when `images.json` is not an
    /// index, [`Error::StorageDriver`] when overlay is asked for and cannot be mounted,
    /// [`Error::StillMounted`] when a half-removed root file system's mount does not go.
    pub fn open(config: StoreConfig) -> Result<Store> {
        Store::open_swept(config).map(|(store, _)| store)
    }

    /// As [`Store::open`], also telling what was swept.
    ///
    /// # Errors
    ///
    /// As [`Store::open`].
    pub fn open_swept(config: StoreConfig) -> Result<(Store, Swept)> {
        let root = config.root.clone();
        let blobs_dir = root.join("blobs/sha256");
        let layers = root.join("layers");
        for dir in [
            &root,
            &root.join("blobs"),
            &blobs_dir,
            &layers,
            &root.join("containers"),
        ] {
            DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| Error::io("create", dir, e))?;
        }
        let lock_path = root.join("store.lock");
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&lock_path)
            .map_err(|e| Error::io("open", &lock_path, e))?;
        let lock = Flock::lock(file, FlockArg::LockExclusiveNonblock).map_err(|(_, errno)| {
            if errno == nix::errno::Errno::EWOULDBLOCK {
                Error::Locked { root: root.clone() }
            } else {
                Error::io("lock", &lock_path, errno.into())
            }
        })?;
        let index = IndexFile::load(&root)?;
        let canonical = std::fs::canonicalize(&root).map_err(|e| Error::io("resolve", &root, e))?;
        let containers = canonical.join("containers");
        // A configured driver is checked now (a start on a node that cannot honour it fails);
        // the probe for an unconfigured one runs after the sweep, beside the rest of the start.
        let configured = configured_driver(&config, &containers)?;
        let driver = match configured {
            Some(driver) => crate::driver::DriverChoice::known(driver),
            None => crate::driver::DriverChoice::pending(),
        };
        let store = Store {
            inner: Arc::new(Inner {
                blobs: Blobs::new(blobs_dir),
                layers,
                index: Mutex::new(index),
                pinned: Mutex::new(crate::pins::Pinned::default()),
                inflight: Mutex::new(HashMap::new()),
                clients: std::sync::OnceLock::new(),
                driver,
                containers,
                canonical_layers: canonical.join("layers"),
                rootfs: Mutex::new(BTreeMap::new()),
                rootfs_ops: Mutex::new(()),
                config,
                _lock: lock,
            }),
        };
        let rootfs = store.inner.recover_rootfs()?;
        let mut swept = store.inner.sweep()?;
        swept.rootfs = rootfs;
        if swept != Swept::default() {
            tracing::info!(
                root = %root.display(),
                blobs = swept.blobs,
                layers = swept.layers,
                rootfs = swept.rootfs,
                "swept what an interrupted pull or removal left"
            );
        }
        if let Some(driver) = configured {
            tracing::info!(root = %root.display(), storage_driver = %driver, "image store open");
        } else {
            tracing::info!(root = %root.display(), "image store open; probing overlay");
            store
                .inner
                .driver
                .start_probe(store.inner.containers.clone());
        }
        Ok((store, swept))
    }

    /// The store's root directory.
    pub fn root(&self) -> &Path {
        &self.inner.config.root
    }

    /// The directory a layer is unpacked in, by chain id: an overlayfs lower directory.
    pub fn layer_dir(&self, chain_id: &Digest) -> PathBuf {
        self.inner.layer_dir(chain_id)
    }

    /// The file holding a blob.
    pub fn blob_path(&self, digest: &Digest) -> PathBuf {
        self.inner.blobs.path(digest)
    }

    /// Every image, in the order they were first pulled.
    pub fn list(&self) -> Vec<Image> {
        self.inner.index().images.clone()
    }

    /// The image a query names: a reference (`busybox`, `docker.io/library/busybox:latest`,
    /// `name@sha256:…`), a digest (`sha256:…` of its configuration, manifest or index), an id
    /// or a unique id prefix.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] when nothing matches, [`Error::Ambiguous`] when an id prefix matches
    /// several images.
    pub fn get(&self, query: &str) -> Result<Image> {
        find(&self.inner.index().images, query).cloned()
    }

    /// Removes what a query names, as CRI-O's RemoveImage does: a reference with a tag
    /// (`busybox`, `registry/app:v1`) removes that name only, and the image goes only with its
    /// last name; an id, an id prefix, a digest or a digest reference (`name@sha256:…`)
    /// removes the image with all its names. When the image goes, so do the blobs and layers
    /// no other image or container uses. Waits for no pull: what pulls in progress stored stays
    /// theirs. An image a container's root file system is made of cannot go; a name of it can,
    /// while another name stays.
    ///
    /// # Errors
    ///
    /// As [`Store::get`]; [`Error::ImageInUse`] naming the containers that use it (CRI's
    /// `FailedPrecondition`); [`Error::Io`] when the index cannot be written (the image stays) or
    /// an unused file cannot be removed (the image is gone; the file is swept at the next open).
    pub async fn remove(&self, query: &str) -> Result<Removed> {
        let removed = {
            let table = self.inner.rootfs_table();
            let mut index = self.inner.index();
            let image = find(&index.images, query)?.clone();
            let mut next = IndexFile {
                version: index.version,
                images: index.images.clone(),
            };
            let name = tag_named(&image, query);
            let removed = match name {
                Some(name) if image.names.len() > 1 => {
                    let kept = next
                        .images
                        .iter_mut()
                        .find(|i| i.id == image.id)
                        .ok_or_else(|| Error::NotFound {
                            query: query.to_owned(),
                        })?;
                    kept.names.retain(|n| *n != name);
                    Removed::Name {
                        name,
                        image: kept.clone(),
                    }
                }
                _ => {
                    let users = Inner::rootfs_users(&table, &image.id);
                    if !users.is_empty() {
                        return Err(Error::ImageInUse {
                            image: image.id,
                            containers: users,
                        });
                    }
                    next.images.retain(|i| i.id != image.id);
                    Removed::Image(image)
                }
            };
            next.save(self.root())?;
            *index = next;
            removed
        };
        match &removed {
            Removed::Name { name, image } => {
                tracing::info!(id = %image.id, name, names = ?image.names, "removed a name of an image");
            }
            Removed::Image(image) => {
                let inner = Arc::clone(&self.inner);
                tokio::task::spawn_blocking(move || inner.collect())
                    .await
                    .map_err(|e| Error::Interrupted {
                        image: image.id.clone(),
                        reason: e.to_string(),
                    })??;
                tracing::info!(id = %image.id, names = ?image.names, "removed image");
            }
        }
        Ok(removed)
    }

    /// The bytes and inodes the store's images take on disk: the index, blobs and layers (CRI's
    /// `ImageFsInfo` image file system). Containers' writable layers are not counted here but
    /// by [`Store::containers_disk_usage`].
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when a directory cannot be read.
    pub fn disk_usage(&self) -> Result<Usage> {
        let root = self.root();
        usage_except(root, &["containers"]).map_err(|e| Error::io("measure", root, e))
    }
}

impl Inner {
    pub(crate) fn index(&self) -> MutexGuard<'_, IndexFile> {
        // A panic while holding the lock leaves the in-memory index as it was before that
        // change: every change is computed on a copy and installed only once saved.
        self.index
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn layer_dir(&self, chain_id: &Digest) -> PathBuf {
        self.layers.join(chain_id.hex())
    }

    /// The image a query names, as [`Store::get`] finds it.
    pub(crate) fn find_image(&self, query: &str) -> Result<Image> {
        find(&self.index().images, query).cloned()
    }

    /// Removes temporary files and directories, then whatever no image uses.
    fn sweep(&self) -> Result<Swept> {
        let blobs = self.blobs.sweep()?;
        let mut layers = 0;
        for entry in read_dir(&self.layers)? {
            let is_layer = entry.file_name().to_str().is_some_and(is_sha256_hex)
                && entry.file_type().is_ok_and(|t| t.is_dir());
            if !is_layer {
                remove_any(&entry.path())?;
                layers += 1;
            }
        }
        let collected = self.collect()?;
        Ok(Swept {
            blobs: blobs + collected.blobs,
            layers: layers + collected.layers,
            rootfs: 0,
        })
    }

    /// After a failed pull (its pins released): removes what it stored but never indexed.
    pub(crate) fn collect_after_failure(&self) {
        if let Err(e) = self.collect() {
            tracing::warn!(error = %e, "cannot remove what a failed pull left");
        }
    }

    /// Removes the blobs and layer directories no indexed image, root file system or pull in
    /// progress uses. Decides and unlinks (a layer directory: renames it aside) holding the
    /// pins, so a pull that pins a blob or layer after this looked finds it gone, never half
    /// gone; the directories renamed aside are removed after. Temporary files and directories
    /// are pulls' in progress: [`Store::open`] sweeps those a killed process left.
    pub(crate) fn collect(&self) -> Result<Swept> {
        static TRASH: AtomicU64 = AtomicU64::new(0);
        let mut swept = Swept::default();
        let mut trash = Vec::new();
        {
            let pinned = self.pinned();
            let (blobs, mut layers) = self.index().referenced();
            layers.extend(self.rootfs_layers());
            for digest in self.blobs.list()? {
                if !blobs.contains(&digest) && !pinned.has_blob(&digest) {
                    self.blobs.remove(&digest)?;
                    swept.blobs += 1;
                }
            }
            for entry in read_dir(&self.layers)? {
                let Some(chain_id) = entry.file_name().to_str().and_then(Digest::from_hex) else {
                    continue;
                };
                if layers.contains(&chain_id) || pinned.has_layer(&chain_id) {
                    continue;
                }
                let aside = self.layers.join(format!(
                    ".trash-{}-{}-{}",
                    chain_id.hex(),
                    std::process::id(),
                    TRASH.fetch_add(1, Ordering::Relaxed)
                ));
                std::fs::rename(entry.path(), &aside)
                    .map_err(|e| Error::io("rename aside", &entry.path(), e))?;
                trash.push(aside);
                swept.layers += 1;
            }
        }
        for dir in &trash {
            remove_any(dir)?;
        }
        if swept != Swept::default() {
            crate::blobs::sync_dirs(&[self.blobs.dir(), &self.layers]);
        }
        Ok(swept)
    }
}

/// The configured driver, checked (overlay must mount), or `None` when none is configured.
fn configured_driver(config: &StoreConfig, containers: &Path) -> Result<Option<StorageDriver>> {
    match config.storage_driver {
        Some(StorageDriver::Vfs) => Ok(Some(StorageDriver::Vfs)),
        Some(StorageDriver::Overlay) => crate::driver::probe_overlay(containers)
            .map(|()| Some(StorageDriver::Overlay))
            .map_err(|reason| Error::StorageDriver {
                root: config.root.clone(),
                driver: StorageDriver::Overlay,
                reason,
            }),
        None => Ok(None),
    }
}

/// The name `query` removes from `image` when it is a reference with a tag and no digest that
/// names it; `None` when the query names the image as a whole (id, digest, digest reference).
fn tag_named(image: &Image, query: &str) -> Option<String> {
    let hex = query.strip_prefix("sha256:").unwrap_or(query);
    if is_sha256_hex(hex) {
        return None;
    }
    let reference = Reference::parse(query).ok()?;
    if reference.digest().is_some() {
        return None;
    }
    let name = reference.to_string();
    image.names.contains(&name).then_some(name)
}

/// What [`Store::remove`] removed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Removed {
    /// One name of an image; the image stays, with its other names (as it is now).
    Name {
        /// The name removed, normalised: `docker.io/library/busybox:latest`.
        name: String,
        /// The image, without that name.
        image: Image,
    },
    /// An image with all its names (as it was).
    Image(Image),
}

impl Removed {
    /// The image, as it is (a name removed) or was (removed).
    pub fn image(&self) -> &Image {
        match self {
            Removed::Name { image, .. } | Removed::Image(image) => image,
        }
    }

    /// Whether the image itself went.
    pub fn image_gone(&self) -> bool {
        matches!(self, Removed::Image(_))
    }
}

/// The image `query` names among `images`.
fn find<'a>(images: &'a [Image], query: &str) -> Result<&'a Image> {
    let not_found = || Error::NotFound {
        query: query.to_owned(),
    };
    let hex = query.strip_prefix("sha256:").unwrap_or(query);
    if is_sha256_hex(hex) {
        return images
            .iter()
            .find(|i| {
                i.id == hex
                    || i.manifest_digest.hex() == hex
                    || i.index_digest.as_ref().is_some_and(|d| d.hex() == hex)
            })
            .ok_or_else(not_found);
    }
    if let Ok(reference) = Reference::parse(query)
        && let Some(image) = images.iter().find(|i| i.named(&reference))
    {
        return Ok(image);
    }
    let is_prefix = !hex.is_empty() && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if is_prefix {
        let matches: Vec<&Image> = images.iter().filter(|i| i.id.starts_with(hex)).collect();
        return match matches.as_slice() {
            [one] => Ok(one),
            [] => Err(not_found()),
            many => Err(Error::Ambiguous {
                query: query.to_owned(),
                matches: many.len(),
            }),
        };
    }
    Err(not_found())
}

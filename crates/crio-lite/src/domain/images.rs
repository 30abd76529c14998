//! The node's images: the image store under `<crio.root>/storage`, with the configuration's
//! credentials and insecure registries. Pulling, storing, unpacking and reading the node's
//! policy, registries and credentials files are image-store's; this picks CRI-O's defaults.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use image_store::{Auth, Image, NodeFiles, Progress, PullOptions, Removed, Store, Usage};

use super::settings::ImageSettings;
use crate::error::{Error, Result};

/// The image store's directory under `crio.root`.
pub const STORAGE_DIR: &str = "storage";

/// Where the signature policy is looked for when `crio.image.signature_policy` is empty; with
/// none there, pulls are refused naming the first.
pub const DEFAULT_POLICIES: [&str; 2] =
    ["/etc/crio-lite/policy.json", "/etc/containers/policy.json"];

/// The node's images. The store is shared by clones.
#[derive(Debug, Clone)]
pub struct Images {
    store: Arc<Mutex<Option<Store>>>,
    root: PathBuf,
    files: Arc<NodeFiles>,
    progress: Option<PullProgress>,
}

/// The observer every pull is given (the daemon's metrics).
#[derive(Clone)]
struct PullProgress(Arc<dyn Progress>);

impl std::fmt::Debug for PullProgress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Progress")
    }
}

/// The signature policy file pulls use, given `crio.image.signature_policy` (empty: the first
/// of [`DEFAULT_POLICIES`] that exists), read and checked: what `check-config` warns of, and
/// every pull is refused with, when there is none or it is not a policy.
///
/// # Errors
///
/// [`image_store::Error::NoPolicy`] naming the file to create: the configured one, else the
/// first default; [`image_store::Error::InvalidPolicy`] naming the file and what is wrong.
pub fn signature_policy_file(configured: &Path) -> image_store::Result<PathBuf> {
    let configured = Some(configured.to_owned()).filter(|p| !p.as_os_str().is_empty());
    NodeFiles::new(configured, &DEFAULT_POLICIES, None, None).checked_policy()
}

impl Images {
    /// Opens the store `settings` name (sweeping what a killed pull left there).
    ///
    /// # Errors
    ///
    /// [`Error::Images`] when the store cannot be opened (another process has it, its index is
    /// corrupt, a directory cannot be made).
    pub fn open(settings: ImageSettings) -> Result<Images> {
        let ImageSettings {
            store: store_config,
            signature_policy,
            registries_conf,
            auth_file,
        } = settings;
        let root = store_config.root.clone();
        let (store, swept) =
            Store::open_swept(store_config).map_err(|e| Error::Images(Box::new(e)))?;
        if swept.blobs + swept.layers + swept.rootfs > 0 {
            tracing::info!(
                blobs = swept.blobs,
                layers = swept.layers,
                root_file_systems = swept.rootfs,
                "removed what interrupted pulls left in the image store"
            );
        }
        let files = NodeFiles::new(
            signature_policy,
            &DEFAULT_POLICIES,
            registries_conf,
            auth_file,
        );
        // Read now so a broken file is said at start; pulls read it again when it changes.
        if let Err(e) = files.options() {
            tracing::error!(error = %e, "pulls fail until this is fixed");
        }
        Ok(Images {
            store: Arc::new(Mutex::new(Some(store))),
            root,
            files: Arc::new(files),
            progress: None,
        })
    }

    /// Every pull from now on tells `progress` how it goes (the daemon gives its metrics'
    /// [`Metrics::image_progress`](crate::Metrics::image_progress)).
    #[must_use]
    pub fn with_progress(mut self, progress: Arc<dyn Progress>) -> Images {
        self.progress = Some(PullProgress(progress));
        self
    }

    /// The store's directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn store(&self) -> image_store::Result<Store> {
        self.store
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
            .ok_or_else(|| image_store::Error::Locked {
                root: self.root.clone(),
            })
    }

    /// Lets go of the store: calls after this fail; the store's lock goes with the last pull
    /// still running. For a daemon abandoned as if killed.
    pub(crate) fn close(&self) {
        self.store
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
    }

    /// How containers' root file systems are made: `overlay` or `vfs`.
    pub fn storage_driver(&self) -> Option<&'static str> {
        self.store().ok().map(|s| s.storage_driver().name())
    }

    /// The bytes and inodes containers' writable layers take.
    ///
    /// # Errors
    ///
    /// When the store is closed.
    pub fn containers_disk_usage(&self) -> image_store::Result<Usage> {
        Ok(self.store()?.containers_disk_usage())
    }

    /// The signature policy in force, if any.
    pub fn signature_policy(&self) -> Option<PathBuf> {
        self.files.policy_path()
    }

    /// Pulls `reference` with `auth`, or when the request brings none, with the credentials the
    /// global auth file (read at each pull, so edits apply at once) has for it; under the
    /// signature policy and registries.conf, read again when they change.
    ///
    /// # Errors
    ///
    /// What [`Store::pull_with`] fails with; [`image_store::Error::AuthFile`],
    /// [`image_store::Error::InvalidPolicy`] or [`image_store::Error::InvalidRegistries`] when
    /// one of the node's files cannot be used.
    pub async fn pull(&self, reference: &str, auth: Option<Auth>) -> image_store::Result<Image> {
        let store = self.store()?;
        // Refused before image-store's pull, which logs its own failures.
        let (options, auth) = self
            .prepare(reference, auth)
            .inspect_err(|e| image_store::log_failed_pull(reference, e))?;
        store.pull_with(reference, &auth, &options).await
    }

    /// The options and credentials of a pull of `reference`.
    fn prepare(
        &self,
        reference: &str,
        auth: Option<Auth>,
    ) -> image_store::Result<(PullOptions, Auth)> {
        let options = match &self.progress {
            Some(progress) => self.files.options()?.with_progress(Arc::clone(&progress.0)),
            None => self.files.options()?,
        };
        let auth = match auth {
            Some(auth) => auth,
            None => self.files.credentials(reference)?,
        };
        Ok((options, auth))
    }

    /// Every image.
    ///
    /// # Errors
    ///
    /// When the store is closed.
    pub fn list(&self) -> image_store::Result<Vec<Image>> {
        Ok(self.store()?.list())
    }

    /// The image a reference, digest, id or id prefix names.
    ///
    /// # Errors
    ///
    /// As [`Store::get`].
    pub fn get(&self, query: &str) -> image_store::Result<Image> {
        self.store()?.get(query)
    }

    /// The image's configuration.
    ///
    /// # Errors
    ///
    /// As [`Store::config`].
    pub fn config(&self, image: &Image) -> image_store::Result<image_store::ImageConfiguration> {
        self.store()?.config(image)
    }

    /// Removes what a query names: a tag that name only (the image goes with its last name),
    /// an id or digest the image.
    ///
    /// # Errors
    ///
    /// As [`Store::remove`].
    pub async fn remove(&self, query: &str) -> image_store::Result<Removed> {
        self.store()?.remove(query).await
    }

    /// The bytes and inodes the store takes.
    ///
    /// # Errors
    ///
    /// As [`Store::disk_usage`].
    pub fn disk_usage(&self) -> image_store::Result<Usage> {
        self.store()?.disk_usage()
    }

    /// Makes container `id`'s root file system from `image` (an id). Blocks: a vfs copy takes
    /// long; call it from a blocking task.
    ///
    /// # Errors
    ///
    /// As [`Store::create_rootfs`].
    pub fn create_rootfs(&self, id: &str, image: &str) -> image_store::Result<image_store::Rootfs> {
        self.store()?.create_rootfs(id, image)
    }

    /// Removes container `id`'s root file system; true when there was one. Blocks.
    ///
    /// # Errors
    ///
    /// As [`Store::remove_rootfs`].
    pub fn remove_rootfs(&self, id: &str) -> image_store::Result<bool> {
        self.store()?.remove_rootfs(id)
    }

    /// The containers that have a root file system.
    ///
    /// # Errors
    ///
    /// When the store is closed.
    pub fn rootfs_owners(&self) -> image_store::Result<Vec<String>> {
        Ok(self
            .store()?
            .list_rootfs()
            .into_iter()
            .map(|r| r.container_id)
            .collect())
    }

    /// The bytes and inodes container `id`'s writable layer takes. Walks a directory: blocks.
    ///
    /// # Errors
    ///
    /// As [`Store::rootfs_disk_usage`].
    pub fn rootfs_disk_usage(&self, id: &str) -> image_store::Result<Usage> {
        self.store()?.rootfs_disk_usage(id)
    }
}

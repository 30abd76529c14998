//! The node's images: the image store under `<crio.root>/storage`, with the configuration's
//! credentials and insecure registries. Pulling, storing and unpacking are image-store's; this
//! only decides which credentials a pull uses.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use image_store::{Auth, AuthFile, Image, Reference, Store, StoreConfig, Usage};

use crate::config::Config;
use crate::error::{Error, Result};

/// The image store's directory under `crio.root`.
pub const STORAGE_DIR: &str = "storage";

/// The node's images. The store is shared by clones; [`Images::close`] lets go of it.
#[derive(Debug, Clone)]
pub struct Images {
    store: Arc<Mutex<Option<Store>>>,
    root: PathBuf,
    auth_file: Option<PathBuf>,
}

impl Images {
    /// Opens the store at `<crio.root>/storage` (sweeping what a killed pull left there).
    ///
    /// # Errors
    ///
    /// [`Error::Images`] when the store cannot be opened (another process has it, its index is
    /// corrupt, a directory cannot be made).
    pub fn open(config: &Config) -> Result<Images> {
        let root = config.crio.root.join(STORAGE_DIR);
        let mut store_config = StoreConfig::new(&root);
        store_config
            .insecure_registries
            .clone_from(&config.crio.image.insecure_registries);
        let (store, swept) =
            Store::open_swept(store_config).map_err(|e| Error::Images(Box::new(e)))?;
        if swept.blobs + swept.layers > 0 {
            tracing::info!(
                blobs = swept.blobs,
                layers = swept.layers,
                "removed what interrupted pulls left in the image store"
            );
        }
        let auth_file = Some(config.crio.image.global_auth_file.clone())
            .filter(|path| !path.as_os_str().is_empty());
        Ok(Images {
            store: Arc::new(Mutex::new(Some(store))),
            root,
            auth_file,
        })
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

    /// Pulls `reference` with `auth`, or when the request brings none, with the credentials the
    /// global auth file (read at each pull, so edits apply at once) has for it.
    ///
    /// # Errors
    ///
    /// What [`Store::pull`] fails with; [`image_store::Error::AuthFile`] when the auth file
    /// cannot be used.
    pub async fn pull(&self, reference: &str, auth: Option<Auth>) -> image_store::Result<Image> {
        let store = self.store()?;
        let auth = match auth {
            Some(auth) => auth,
            None => self.file_auth(reference)?,
        };
        store.pull(reference, &auth).await
    }

    fn file_auth(&self, reference: &str) -> image_store::Result<Auth> {
        let Some(path) = &self.auth_file else {
            return Ok(Auth::Anonymous);
        };
        let parsed = Reference::parse(reference)?;
        // CRI-O pulls anonymously while the file is not there (yet).
        if std::fs::symlink_metadata(path).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound)
        {
            return Ok(Auth::Anonymous);
        }
        let file = AuthFile::from_file(path)?;
        Ok(file.lookup(&parsed).cloned().unwrap_or_default())
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

    /// Removes the image a query names.
    ///
    /// # Errors
    ///
    /// As [`Store::remove`].
    pub async fn remove(&self, query: &str) -> image_store::Result<Image> {
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
}

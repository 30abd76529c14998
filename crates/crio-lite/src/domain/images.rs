//! The node's images: the image store under `<crio.root>/storage`, with the configuration's
//! credentials and insecure registries. Pulling, storing and unpacking are image-store's; this
//! only decides which credentials a pull uses.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use image_store::{
    Auth, AuthFile, Image, Policy, Progress, PullOptions, Reference, Registries, Removed, Store,
    Usage,
};

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
    auth_file: Option<PathBuf>,
    trust: Arc<Trust>,
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

/// The policy and registries files, read again when they change.
#[derive(Debug)]
struct Trust {
    /// The configured policy; `None` to look in [`DEFAULT_POLICIES`].
    policy: Option<PathBuf>,
    /// The registries.conf file; `None` for none.
    registries: Option<PathBuf>,
    loaded: Mutex<Option<(Vec<Stamp>, PullOptions)>>,
}

/// What tells a file changed: its identity, size and modification time (`None`: not there).
type Stamp = Option<(u64, u64, u64, i64, i64)>;

fn stamp(path: &Path) -> Stamp {
    use std::os::unix::fs::MetadataExt as _;
    let meta = std::fs::metadata(path).ok()?;
    Some((
        meta.dev(),
        meta.ino(),
        meta.size(),
        meta.mtime(),
        meta.mtime_nsec(),
    ))
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
    let configured = Some(configured).filter(|p| !p.as_os_str().is_empty());
    let path = existing_policy(policy_in_force(configured).as_deref().or(configured))?;
    Policy::from_file(&path)?;
    Ok(path)
}

/// The policy file in force: the configured one, else the first default that exists.
fn policy_in_force(configured: Option<&Path>) -> Option<PathBuf> {
    match configured {
        Some(path) => Some(path.to_owned()),
        None => DEFAULT_POLICIES
            .iter()
            .map(PathBuf::from)
            .find(|path| path.exists()),
    }
}

/// `policy` when it exists. No policy file refuses every pull, as CRI-O (containers/image)
/// refuses: accepting every image is the operator's choice, written down, not the absence of
/// one.
fn existing_policy(policy: Option<&Path>) -> image_store::Result<PathBuf> {
    match policy {
        Some(path) if path.exists() => Ok(path.to_owned()),
        missing => Err(image_store::Error::NoPolicy {
            path: missing.map_or_else(|| PathBuf::from(DEFAULT_POLICIES[0]), Path::to_owned),
        }),
    }
}

impl Trust {
    /// The policy file in force: the configured one, else the first default that exists.
    fn policy_path(&self) -> Option<PathBuf> {
        policy_in_force(self.policy.as_deref())
    }

    fn drop_in_dir(&self) -> Option<PathBuf> {
        self.registries.as_ref().map(|path| {
            let mut dir = path.clone().into_os_string();
            dir.push(".d");
            PathBuf::from(dir)
        })
    }

    /// Every file whose change means reading again.
    fn stamps(&self, policy: Option<&Path>) -> Vec<Stamp> {
        let mut paths: Vec<PathBuf> = policy.into_iter().map(Path::to_owned).collect();
        paths.extend(self.registries.clone());
        if let Some(dir) = self.drop_in_dir() {
            if let Ok(entries) = std::fs::read_dir(&dir) {
                let mut files: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
                files.sort();
                paths.extend(files);
            }
            paths.push(dir);
        }
        let mut stamps: Vec<Stamp> = paths.iter().map(|p| stamp(p)).collect();
        // Which policy is in force matters too (a default that appeared).
        stamps.push(Some((u64::from(policy.is_some()), 0, 0, 0, 0)));
        stamps
    }

    /// The pull options for the files as they are now; read again only when they changed.
    fn options(&self) -> image_store::Result<PullOptions> {
        let policy = self.policy_path();
        let stamps = self.stamps(policy.as_deref());
        let mut loaded = self
            .loaded
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((seen, options)) = loaded.as_ref()
            && *seen == stamps
        {
            return Ok(options.clone());
        }
        let path = existing_policy(policy.as_deref())?;
        let mut options = PullOptions::new().with_policy(Policy::from_file(&path)?);
        tracing::info!(policy = %path.display(), "signature policy read");
        if let Some(path) = self.registries.as_ref().filter(|p| p.exists()) {
            options = options.with_registries(Registries::load(path, self.drop_in_dir())?);
            tracing::info!(registries = %path.display(), "registries configuration read");
        }
        *loaded = Some((stamps, options.clone()));
        Ok(options)
    }
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
        let trust = Trust {
            policy: signature_policy,
            registries: registries_conf,
            loaded: Mutex::new(None),
        };
        // Read now so a broken file is said at start; pulls read it again when it changes.
        if let Err(e) = trust.options() {
            tracing::error!(error = %e, "pulls fail until this is fixed");
        }
        Ok(Images {
            store: Arc::new(Mutex::new(Some(store))),
            root,
            auth_file,
            trust: Arc::new(trust),
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
        self.trust.policy_path()
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
            Some(progress) => self.trust.options()?.with_progress(Arc::clone(&progress.0)),
            None => self.trust.options()?,
        };
        let auth = match auth {
            Some(auth) => auth,
            None => self.file_auth(reference)?,
        };
        Ok((options, auth))
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

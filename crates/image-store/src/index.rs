//! The store's index of images, `<root>/images.json`: what a reader may see. It is replaced
//! atomically and durably, and only after every blob and layer it names is in place, so an image
//! listed is an image complete.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::digest::Digest;
use crate::error::{Error, Result};
use crate::platform::Platform;
use crate::reference::Reference;

/// The index file's largest size read.
const INDEX_MAX: u64 = 256 << 20;
const VERSION: u32 = 1;

/// An image in the store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Image {
    /// The image id: the configuration digest's hex digits, as Docker, CRI-O and crictl show it.
    pub id: String,
    /// The references (with tags) it was pulled as, normalised: `docker.io/library/busybox:latest`.
    pub names: Vec<String>,
    /// `name@digest` for each repository it was pulled from, the digest being what the reference
    /// resolved to (the index's, for a multi-platform image).
    pub repo_digests: Vec<String>,
    /// The digest of the platform manifest.
    pub manifest_digest: Digest,
    /// The digest of the image index the manifest was chosen from, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index_digest: Option<Digest>,
    /// The digest of the image configuration.
    pub config_digest: Digest,
    /// The platform of the manifest.
    pub platform: Platform,
    /// The layers, bottom first.
    pub layers: Vec<Layer>,
    /// The bytes the unpacked layers take on disk (shared layers counted in full).
    pub size: u64,
    /// When it was pulled, in seconds since the Unix epoch (a later pull that changes nothing
    /// in the index leaves it).
    pub pulled_at: u64,
}

/// One layer of an image.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layer {
    /// The (compressed) blob's digest.
    pub digest: Digest,
    /// The blob's media type.
    pub media_type: String,
    /// The blob's size.
    pub compressed_size: u64,
    /// The uncompressed tar's digest.
    pub diff_id: Digest,
    /// The chain id: names the directory `<root>/layers/<hex>` it is unpacked in.
    pub chain_id: Digest,
    /// The bytes its directory takes on disk.
    pub size: u64,
}

impl Image {
    /// The blobs it holds on to: manifest, index, configuration, layers.
    pub(crate) fn blobs(&self) -> impl Iterator<Item = &Digest> {
        [&self.manifest_digest, &self.config_digest]
            .into_iter()
            .chain(&self.index_digest)
            .chain(self.layers.iter().map(|l| &l.digest))
    }

    /// Whether `reference` names this image: one of its names, or a repo digest (by tag and
    /// digest, the digest decides).
    pub(crate) fn named(&self, reference: &Reference) -> bool {
        match reference.digest() {
            Some(digest) => {
                let pinned = format!("{}@{digest}", reference.name());
                self.repo_digests.contains(&pinned)
            }
            None => self.names.contains(&reference.to_string()),
        }
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct IndexFile {
    pub(crate) version: u32,
    pub(crate) images: Vec<Image>,
}

impl IndexFile {
    pub(crate) fn path(root: &Path) -> PathBuf {
        root.join("images.json")
    }

    /// Reads the index; none yet is an empty one.
    pub(crate) fn load(root: &Path) -> Result<IndexFile> {
        let path = IndexFile::path(root);
        let bytes = match safe_file::read_regular(&path, INDEX_MAX, safe_file::Symlinks::Refuse) {
            Ok(bytes) => bytes,
            Err(e) if e.is_not_found() => return Ok(IndexFile::default()),
            Err(e) => return Err(Error::file("read the image index", e)),
        };
        let index: IndexFile = serde_json::from_slice(&bytes).map_err(|e| Error::CorruptIndex {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        if index.version != VERSION {
            return Err(Error::CorruptIndex {
                path,
                reason: format!("version {} is not {VERSION}", index.version),
            });
        }
        Ok(index)
    }

    /// Replaces the index file (temp, fsync, rename, directory fsync).
    pub(crate) fn save(&self, root: &Path) -> Result<()> {
        let file = IndexFile {
            version: VERSION,
            images: self.images.clone(),
        };
        let bytes = serde_json::to_vec_pretty(&file).map_err(|e| Error::CorruptIndex {
            path: IndexFile::path(root),
            reason: e.to_string(),
        })?;
        safe_file::write_atomic(
            &IndexFile::path(root),
            &bytes,
            0o600,
            safe_file::Durability::Synced,
        )
        .map_err(|e| Error::file("write the image index", e))
    }

    /// Every blob and chain id an image of the index uses.
    pub(crate) fn referenced(&self) -> (BTreeSet<Digest>, BTreeSet<Digest>) {
        let mut blobs = BTreeSet::new();
        let mut layers = BTreeSet::new();
        for image in &self.images {
            blobs.extend(image.blobs().cloned());
            layers.extend(image.layers.iter().map(|l| l.chain_id.clone()));
        }
        (blobs, layers)
    }

    /// Adds a pulled image, or merges its names into the image with the same id (the same
    /// configuration pulled under another name). A name moves to the new image: a tag names
    /// one image.
    pub(crate) fn add(&mut self, image: Image) -> Image {
        for other in &mut self.images {
            if other.id != image.id {
                other.names.retain(|n| !image.names.contains(n));
            }
        }
        if let Some(existing) = self.images.iter_mut().find(|i| i.id == image.id) {
            for name in image.names {
                if !existing.names.contains(&name) {
                    existing.names.push(name);
                }
            }
            for d in image.repo_digests {
                if !existing.repo_digests.contains(&d) {
                    existing.repo_digests.push(d);
                }
            }
            existing.pulled_at = image.pulled_at;
            existing.clone()
        } else {
            // An image that lost its last name to this one stays, reachable by id and digest,
            // as Docker's dangling images do.
            self.images.push(image.clone());
            image
        }
    }
}

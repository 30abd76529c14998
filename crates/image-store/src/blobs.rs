//! Content-addressed blobs: `<root>/blobs/sha256/<hex>`, each written to a temporary file,
//! verified (size and digest), synced and renamed into place, so a blob file that exists is
//! always whole and verified.

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use safe_file::{AtomicFile, Durability, Symlinks};

use crate::digest::{Digest, Hasher, is_sha256_hex};
use crate::error::{Error, Result};

/// The largest manifest, index or configuration read back into memory.
pub(crate) const DOCUMENT_MAX: u64 = 4 << 20;

#[derive(Debug)]
pub(crate) struct Blobs {
    dir: PathBuf,
}

impl Blobs {
    pub(crate) fn new(dir: PathBuf) -> Blobs {
        Blobs { dir }
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    pub(crate) fn path(&self, digest: &Digest) -> PathBuf {
        self.dir.join(digest.hex())
    }

    /// Whether the blob is stored (a regular file; only verified blobs are ever renamed in).
    pub(crate) fn has(&self, digest: &Digest) -> bool {
        fs::symlink_metadata(self.path(digest)).is_ok_and(|m| m.is_file())
    }

    /// Reads a stored document blob (manifest, index, configuration).
    pub(crate) fn read(&self, digest: &Digest) -> Result<Vec<u8>> {
        safe_file::read_regular(&self.path(digest), DOCUMENT_MAX, Symlinks::Refuse)
            .map_err(|e| Error::file("read a blob", e))
    }

    /// Stores bytes already in memory and already checked against `digest`, for `image`.
    pub(crate) fn put(&self, image: &str, digest: &Digest, bytes: &[u8]) -> Result<()> {
        if self.has(digest) {
            return Ok(());
        }
        safe_file::write_atomic(&self.path(digest), bytes, 0o644, Durability::Synced)
            .map_err(|e| blob_error(image, digest, "store", e.into_io()))
    }

    /// Starts writing blob `digest` of `image`, which its descriptor says is `size` bytes long.
    pub(crate) fn writer(&self, image: &str, digest: &Digest, size: u64) -> Result<BlobWriter> {
        let file = AtomicFile::create(self.path(digest), 0o644)
            .map_err(|e| blob_error(image, digest, "create", e.into_io()))?;
        Ok(BlobWriter {
            file,
            hasher: Hasher::new(),
            written: 0,
            image: image.to_owned(),
            digest: digest.clone(),
            size,
        })
    }

    /// Removes temporary files a killed writer left, and anything that is not a blob.
    pub(crate) fn sweep(&self) -> Result<usize> {
        let mut removed = 0;
        for entry in read_dir(&self.dir)? {
            let name = entry.file_name();
            let keep = name.to_str().is_some_and(is_sha256_hex)
                && entry.file_type().is_ok_and(|t| t.is_file());
            if !keep {
                remove_any(&entry.path())?;
                removed += 1;
            }
        }
        Ok(removed)
    }

    /// The digests of the stored blobs.
    pub(crate) fn list(&self) -> Result<Vec<Digest>> {
        Ok(read_dir(&self.dir)?
            .filter_map(|e| Digest::from_hex(e.file_name().to_str()?))
            .collect())
    }

    /// Removes a blob; a missing one is fine.
    pub(crate) fn remove(&self, digest: &Digest) -> Result<()> {
        let path = self.path(digest);
        match fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(Error::io("remove a blob", &path, e))
            }
            _ => Ok(()),
        }
    }
}

/// A blob being downloaded: every chunk hashed and counted as it is written; the file is
/// renamed into place only if the size and digest match.
#[derive(Debug)]
pub(crate) struct BlobWriter {
    file: AtomicFile,
    hasher: Hasher,
    written: u64,
    image: String,
    digest: Digest,
    size: u64,
}

impl BlobWriter {
    /// Writes the next chunk; refuses the blob as soon as it is longer than declared.
    pub(crate) fn write(&mut self, chunk: &[u8]) -> Result<()> {
        self.written += chunk.len() as u64;
        if self.written > self.size {
            return Err(Error::SizeMismatch {
                image: self.image.clone(),
                digest: self.digest.to_string(),
                expected: self.size,
                actual: format!("more than {}", self.size),
            });
        }
        self.hasher.update(chunk);
        self.file
            .write_all(chunk)
            .map_err(|e| blob_error(&self.image, &self.digest, "write", e))
    }

    /// How many bytes were written so far.
    pub(crate) fn written(&self) -> u64 {
        self.written
    }

    /// The digest of what was written so far.
    pub(crate) fn digest_so_far(&self) -> Digest {
        self.hasher.clone().finish()
    }

    /// Checks size and digest, then syncs and renames the blob into place (blocking: run it
    /// off the async threads).
    #[cfg(test)]
    pub(crate) fn finish(self) -> Result<()> {
        self.verify()?;
        self.commit()
    }

    /// Checks that what was written is the whole blob: its size and digest.
    pub(crate) fn verify(&self) -> Result<()> {
        if self.written != self.size {
            return Err(Error::SizeMismatch {
                image: self.image.clone(),
                digest: self.digest.to_string(),
                expected: self.size,
                actual: self.written.to_string(),
            });
        }
        let actual = self.digest_so_far();
        if actual != self.digest {
            return Err(Error::DigestMismatch {
                image: self.image.clone(),
                expected: self.digest.to_string(),
                actual: actual.to_string(),
            });
        }
        Ok(())
    }

    /// Syncs and renames a blob [`BlobWriter::verify`] accepted into place (blocking).
    pub(crate) fn commit(self) -> Result<()> {
        self.file
            .commit(&[], Durability::Synced)
            .map_err(|e| blob_error(&self.image, &self.digest, "store", e.into_io()))
    }
}

fn blob_error(image: &str, digest: &Digest, op: &'static str, source: std::io::Error) -> Error {
    Error::Blob {
        image: image.to_owned(),
        blob: digest.to_string(),
        op,
        source: std::sync::Arc::new(source),
    }
}

pub(crate) fn read_dir(dir: &Path) -> Result<impl Iterator<Item = fs::DirEntry>> {
    Ok(fs::read_dir(dir)
        .map_err(|e| Error::io("list", dir, e))?
        .filter_map(std::result::Result::ok))
}

/// Syncs directories whose entries changed, best effort: a removal that is lost to a power
/// failure is redone by the next open's sweep.
pub(crate) fn sync_dirs(dirs: &[&Path]) {
    for dir in dirs {
        if let Err(e) = safe_file::sync_dir(dir) {
            tracing::warn!(error = %e, "cannot sync a store directory");
        }
    }
}

/// Removes a file, a symbolic link or a whole tree (never following links).
pub(crate) fn remove_any(path: &Path) -> Result<()> {
    let result = match fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => fs::remove_dir_all(path),
        Ok(_) => fs::remove_file(path),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    };
    result.map_err(|e| Error::io("remove", path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blobs() -> (tempfile::TempDir, Blobs) {
        let dir = tempfile::tempdir().unwrap();
        let blobs = Blobs::new(dir.path().to_owned());
        (dir, blobs)
    }

    #[test]
    fn a_verified_blob_lands_under_its_hex() {
        let (_dir, blobs) = blobs();
        let d = Digest::of(b"hello");
        let mut w = blobs.writer("img", &d, 5).unwrap();
        w.write(b"hel").unwrap();
        w.write(b"lo").unwrap();
        w.finish().unwrap();
        assert_eq!(fs::read(blobs.path(&d)).unwrap(), b"hello");
        assert_eq!(blobs.list().unwrap(), vec![d]);
    }

    #[test]
    fn wrong_bytes_or_sizes_leave_nothing() {
        let (_dir, blobs) = blobs();
        let d = Digest::of(b"hello");
        let mut w = blobs.writer("img", &d, 5).unwrap();
        w.write(b"HELLO").unwrap();
        assert!(matches!(w.finish(), Err(Error::DigestMismatch { .. })));

        let mut w = blobs.writer("img", &d, 4).unwrap();
        assert!(matches!(w.write(b"hello"), Err(Error::SizeMismatch { .. })));
        drop(w);

        let mut w = blobs.writer("img", &d, 6).unwrap();
        w.write(b"hello").unwrap();
        let err = w.finish().unwrap_err();
        assert!(matches!(err, Error::SizeMismatch { .. }), "{err}");
        assert_eq!(fs::read_dir(blobs.dir()).unwrap().count(), 0);
    }

    #[test]
    fn sweep_removes_temporaries_and_strangers() {
        let (_dir, blobs) = blobs();
        let d = Digest::of(b"x");
        blobs.put("img", &d, b"x").unwrap();
        fs::write(
            blobs.dir().join(format!(".{}.tmp-1-2", d.hex())),
            b"partial",
        )
        .unwrap();
        fs::create_dir(blobs.dir().join("junk")).unwrap();
        assert_eq!(blobs.sweep().unwrap(), 2);
        assert_eq!(blobs.list().unwrap(), vec![d]);
    }
}

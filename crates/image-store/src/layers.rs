//! Layer directories: a layer unpacked into a temporary directory next to its place (from its
//! bytes as they download, or from its stored blob), its diff id checked and its size measured,
//! then renamed to `layers/<chain id>` by the caller once the blob it came from is verified and
//! stored too. A failure, or a drop before the rename, removes the directory.
//!
//! Nothing here syncs: the pull syncs the file system once, after every layer is in place and
//! before the index names them (see `Puller::run`). A layer directory no indexed image names
//! is swept at the next open, so one whose files a power loss took is never used.

use std::io::Read;
use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use crate::error::{Error, LayerProblem, Result};
use crate::index::Layer;
use crate::store::Inner;

/// A layer unpacked and checked in its temporary directory, not yet in place. Dropping it
/// removes the directory.
#[derive(Debug)]
pub(crate) struct Unpacked {
    temp: PathBuf,
    dest: PathBuf,
    /// Bytes on disk, as [`Layer::size`] records them.
    pub(crate) size: u64,
    placed: bool,
}

impl Unpacked {
    /// Renames the directory into place; if another pull placed the same layer first, that one
    /// stays and this one goes. Blocking.
    pub(crate) fn place(mut self) -> Result<()> {
        match std::fs::rename(&self.temp, &self.dest) {
            Ok(()) => {
                self.placed = true;
                Ok(())
            }
            Err(_) if self.dest.is_dir() => Ok(()),
            Err(e) => Err(Error::io("rename into place", &self.dest, e)),
        }
    }
}

impl Drop for Unpacked {
    fn drop(&mut self) {
        if !self.placed
            && let Err(e) = crate::blobs::remove_any(&self.temp)
        {
            tracing::warn!(error = %e, "cannot remove an unpacked layer's temporary directory");
        }
    }
}

/// Unpacks the layer whose blob `blob` reads (its bytes as they download, or its stored file)
/// into a new temporary directory next to its place and checks its diff id. Blocking.
pub(crate) fn unpack(
    inner: &Inner,
    image: &str,
    layer: &Layer,
    blob: impl Read,
    cancel: &AtomicBool,
) -> Result<Unpacked> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let started = Instant::now();
    let temp = inner.layers.join(format!(
        ".tmp-{}-{}-{}",
        layer.chain_id.hex(),
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::DirBuilder::new()
        .mode(0o755)
        .create(&temp)
        .map_err(|e| Error::Layer {
            image: image.to_owned(),
            layer: layer.digest.to_string(),
            entry: None,
            problem: LayerProblem::Io(e.to_string()),
        })?;
    let mut unpacked = Unpacked {
        dest: inner.layer_dir(&layer.chain_id),
        temp,
        size: 0,
        placed: false,
    };
    unpack_checked(inner, image, layer, blob, &unpacked.temp, cancel)?;
    unpacked.size = crate::usage::usage(&unpacked.temp)
        .map(|u| u.bytes)
        .map_err(|e| Error::io("measure", &unpacked.temp, e))?;
    tracing::debug!(
        image,
        layer = %layer.digest,
        chain_id = %layer.chain_id,
        seconds = started.elapsed().as_secs_f64(),
        "layer unpacked"
    );
    Ok(unpacked)
}

/// Unpacks a layer from its stored (verified) blob, as [`unpack`]. Blocking.
pub(crate) fn unpack_stored(
    inner: &Inner,
    image: &str,
    layer: &Layer,
    cancel: &AtomicBool,
) -> Result<Unpacked> {
    let blob_path = inner.blobs.path(&layer.digest);
    let blob = safe_file::open_regular(&blob_path, safe_file::Symlinks::Refuse)
        .map_err(|e| Error::file("open a layer blob", e))?;
    unpack(inner, image, layer, blob, cancel)
}

fn unpack_checked(
    inner: &Inner,
    image: &str,
    layer: &Layer,
    blob: impl Read,
    temp: &Path,
    cancel: &AtomicBool,
) -> Result<()> {
    let layer_error = |entry, problem| Error::Layer {
        image: image.to_owned(),
        layer: layer.digest.to_string(),
        entry,
        problem,
    };
    let diff_id = crate::unpack::unpack(blob, temp, &inner.config.limits, cancel)
        .map_err(|f| layer_error(f.entry, f.problem))?;
    if diff_id != layer.diff_id {
        return Err(layer_error(
            None,
            LayerProblem::DiffId {
                expected: layer.diff_id.to_string(),
                actual: diff_id.to_string(),
            },
        ));
    }
    Ok(())
}

/// Flushes the file system holding the layers (blobs are synced one by one as they are stored):
/// once per pull, before the index names what the pull unpacked. Blocking.
pub(crate) fn sync(inner: &Inner) -> Result<()> {
    let dir =
        std::fs::File::open(&inner.layers).map_err(|e| Error::io("open", &inner.layers, e))?;
    nix::unistd::syncfs(&dir).map_err(|e| Error::io("sync", &inner.layers, e.into()))
}

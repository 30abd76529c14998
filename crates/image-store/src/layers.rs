//! Layer directories: a stored layer blob unpacked into a temporary directory next to its
//! place, its diff id checked, the file system synced, then renamed to `layers/<chain id>`.

use std::os::unix::fs::DirBuilderExt as _;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use crate::error::{Error, LayerProblem, Result};
use crate::index::Layer;
use crate::store::Inner;

/// Unpacks a stored layer blob into a temporary directory next to its place, checks the diff
/// id, syncs the file system and renames it into place. A failure removes the directory.
pub(crate) fn unpack_layer(
    inner: &Inner,
    image: &str,
    layer: &Layer,
    cancel: &AtomicBool,
) -> Result<()> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let started = Instant::now();
    let dest = inner.layer_dir(&layer.chain_id);
    let temp = inner.layers.join(format!(
        ".tmp-{}-{}-{}",
        layer.chain_id.hex(),
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::DirBuilder::new()
        .mode(0o755)
        .create(&temp)
        .map_err(|e| Error::io("create", &temp, e))?;
    let result = unpack_checked(inner, image, layer, &temp, cancel);
    match result.and_then(|()| place(&temp, &dest, &inner.layers)) {
        Ok(()) => {
            tracing::debug!(
                image,
                layer = %layer.digest,
                chain_id = %layer.chain_id,
                seconds = started.elapsed().as_secs_f64(),
                "layer unpacked"
            );
            Ok(())
        }
        Err(e) => {
            if let Err(clean) = crate::blobs::remove_any(&temp) {
                tracing::warn!(error = %clean, "cannot remove a failed layer's directory");
            }
            Err(e)
        }
    }
}

fn unpack_checked(
    inner: &Inner,
    image: &str,
    layer: &Layer,
    temp: &Path,
    cancel: &AtomicBool,
) -> Result<()> {
    let layer_error = |entry, problem| Error::Layer {
        image: image.to_owned(),
        layer: layer.digest.to_string(),
        entry,
        problem,
    };
    let blob_path = inner.blobs.path(&layer.digest);
    let blob = safe_file::open_regular(&blob_path, safe_file::Symlinks::Refuse)
        .map_err(|e| Error::file("open a layer blob", e))?;
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
    let dir = std::fs::File::open(temp).map_err(|e| Error::io("open", temp, e))?;
    nix::unistd::syncfs(&dir).map_err(|e| Error::io("sync", temp, e.into()))?;
    Ok(())
}

/// Renames a finished layer directory into place; if another pull placed the same layer first,
/// that one stays and this one goes.
fn place(temp: &Path, dest: &Path, layers: &Path) -> Result<()> {
    match std::fs::rename(temp, dest) {
        Ok(()) => {
            safe_file::sync_dir(layers).map_err(|e| Error::file("sync", e))?;
            Ok(())
        }
        Err(_) if dest.is_dir() => crate::blobs::remove_any(temp),
        Err(e) => Err(Error::io("rename into place", dest, e)),
    }
}

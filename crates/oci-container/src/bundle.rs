//! A container's bundle made in one step: its spec generated, the hooks of the day injected,
//! `config.json` written.

use std::path::{Path, PathBuf};

use oci_spec::runtime::Spec;

use crate::config::ContainerConfig;
use crate::error::{Error, Result};
use crate::hooks::Hooks;
use crate::spec::{generate, write_bundle};

/// Makes the bundle of the container `config` describes in `bundle` (made if missing): its
/// spec, [`generate`]d with `rootfs` as its root, with the OCI hooks of `hooks_dirs` applied
/// (read now, so a hook added since the last container applies at once; a file refused is
/// logged and the others are used; `has_bind_mounts` is their `hasBindMounts` condition: whether
/// the request asked for bind mounts, the pod's own files aside), written as `config.json`. Returns the spec, which says the
/// process's user and command as the image and the configuration made them.
///
/// # Errors
///
/// [`Error::Io`] naming the bundle when it cannot be made; those of [`generate`] and
/// [`write_bundle`].
pub fn make_bundle(
    config: &ContainerConfig,
    rootfs: &Path,
    bundle: &Path,
    hooks_dirs: &[PathBuf],
    has_bind_mounts: bool,
) -> Result<Spec> {
    let id = config.id.as_str();
    std::fs::create_dir_all(bundle).map_err(|e| Error::io(id, "create directory", bundle, e))?;
    let mut spec = generate(config, rootfs)?;
    let (hooks, problems) = Hooks::load(hooks_dirs);
    for problem in problems {
        tracing::warn!(error = %problem, "OCI hook file refused");
    }
    for file in hooks.apply(&mut spec, &config.annotations, has_bind_mounts) {
        tracing::info!(container = %id, hook = %file.display(), "OCI hook injected");
    }
    write_bundle(id, bundle, &spec)?;
    Ok(spec)
}

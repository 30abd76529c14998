//! Finding a plugin binary in the plugin directories.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Where plugins live when the runtime configures nothing else, searched in this order:
/// the upstream convention `/opt/cni/bin`, then `/usr/lib/cni`, where Debian's packages install them.
pub const DEFAULT_PLUGIN_DIRS: &[&str] = &["/opt/cni/bin", "/usr/lib/cni"];

/// [`DEFAULT_PLUGIN_DIRS`] as owned paths, ready for [`Exec::find_plugin`](crate::Exec::find_plugin).
pub fn default_plugin_dirs() -> Vec<PathBuf> {
    DEFAULT_PLUGIN_DIRS.iter().map(PathBuf::from).collect()
}

/// Checks that `name` is a plain file name, as a plugin `type` must be.
///
/// # Errors
///
/// [`Error::InvalidPluginName`] when the name is empty, `.` or `..`, or contains `/` or NUL: such a
/// name could escape the plugin directories.
pub fn validate_plugin_name(name: &str) -> Result<()> {
    let reason = if name.is_empty() {
        "empty"
    } else if name == "." || name == ".." {
        "not a file name"
    } else if name.contains('/') {
        "contains '/'"
    } else if name.contains('\0') {
        "contains NUL"
    } else {
        return Ok(());
    };
    Err(Error::InvalidPluginName {
        name: name.to_owned(),
        reason,
    })
}

/// Searches `dirs` in order for an executable regular file called `name` and returns its path
/// (`dir/name`, symlinks not resolved).
///
/// Symlinks are followed when checking; directories, non-executable files and entries that cannot be
/// inspected are skipped and reported in the not-found error. This is the blocking core of
/// [`ProcessExec`](crate::ProcessExec)'s `find_plugin`: a few `stat` calls.
///
/// # Errors
///
/// [`Error::InvalidPluginName`] for a name that is not a plain file name, [`Error::PluginNotFound`]
/// (listing every directory searched and every candidate skipped) when no directory has the plugin.
pub fn find_plugin_in(name: &str, dirs: &[PathBuf]) -> Result<PathBuf> {
    validate_plugin_name(name)?;
    let mut skipped = Vec::new();
    for dir in dirs {
        let candidate = dir.join(name);
        match why_not_runnable(&candidate) {
            None => return Ok(candidate),
            Some(Skip::Missing) => {}
            Some(Skip::Because(why)) => skipped.push((candidate, why)),
        }
    }
    Err(Error::PluginNotFound {
        name: name.to_owned(),
        dirs: dirs.to_vec(),
        skipped,
    })
}

enum Skip {
    Missing,
    Because(String),
}

fn why_not_runnable(path: &Path) -> Option<Skip> {
    // `metadata` follows symlinks: a link to a binary counts, a dangling link is missing.
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Some(Skip::Missing),
        Err(e) => return Some(Skip::Because(e.to_string())),
    };
    if meta.is_dir() {
        Some(Skip::Because("is a directory".into()))
    } else if !meta.is_file() {
        Some(Skip::Because("not a regular file".into()))
    } else if meta.permissions().mode() & 0o111 == 0 {
        Some(Skip::Because("not executable".into()))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn good_names_pass() {
        for name in ["bridge", "host-local", ".hidden", "a..b", "x.y"] {
            assert!(validate_plugin_name(name).is_ok(), "{name}");
        }
    }

    #[test]
    fn defaults_are_in_order() {
        assert_eq!(
            default_plugin_dirs(),
            [PathBuf::from("/opt/cni/bin"), PathBuf::from("/usr/lib/cni")]
        );
    }
}

//! Pinning network namespaces to files: node-primitives' pin manager, its errors told in this
//! module's terms.

use std::io;
use std::path::{Path, PathBuf};

use node_primitives::ns::{self, Existing, NsKind, Pins};
use node_primitives::{Error as PinError, PinStep};

use super::error::{Error, Result};

pub(super) fn create_pinned(path: &Path) -> Result<()> {
    let create_err = |source: io::Error| Error::Create {
        path: path.to_owned(),
        source,
    };
    let dir = parent_dir(path).map_err(create_err)?;
    let name = path.file_name().unwrap_or_default();
    // Like `ip netns add`: a fresh, unreadable, empty file is the mount point. An existing file is
    // refused rather than mounted over, so two pods can never share (or stack on) one path.
    // The mount is made in the process's mount namespace (never one of our own), so it is
    // visible to every child and, through the shared directory, to peer namespaces.
    Pins::shared(&dir)
        .pin_new(&[(NsKind::Net, name)], Existing::Refuse, || Ok(()))
        .map_err(|e| match e {
            PinError::Pin {
                step: PinStep::PrepareDir,
                path: dir,
                source,
            } => Error::PrepareDir { dir, source },
            PinError::Pin {
                step: PinStep::Thread,
                source,
                ..
            } => Error::Thread {
                path: path.to_owned(),
                source,
            },
            other => create_err(other.into_io()),
        })?;
    tracing::debug!(path = %path.display(), "created network namespace");
    Ok(())
}

/// The directory holding `path`, made absolute so mount(2) and error messages agree.
fn parent_dir(path: &Path) -> io::Result<PathBuf> {
    if path.file_name().is_none() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the path has no file name",
        ));
    }
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_owned(),
        _ => PathBuf::from("."),
    };
    std::path::absolute(dir)
}

pub(super) fn prepare_dir(dir: &Path) -> Result<()> {
    Pins::shared(dir).prepare().map_err(|e| Error::PrepareDir {
        dir: dir.to_owned(),
        source: e.into_io(),
    })
}

pub(super) fn release_dir(dir: &Path) -> Result<()> {
    Pins::shared(dir).release().map_err(|e| Error::ReleaseDir {
        dir: dir.to_owned(),
        source: e.into_io(),
    })
}

pub(super) fn remove_pinned(path: &Path) -> Result<()> {
    let removed = ns::unpin(path).map_err(|e| Error::Remove {
        path: path.to_owned(),
        source: e.into_io(),
    })?;
    if removed {
        tracing::debug!(path = %path.display(), "removed network namespace");
    }
    Ok(())
}

pub(super) fn is_netns(path: &Path) -> Result<bool> {
    ns::is_namespace(path, NsKind::Net).map_err(|source| Error::Inspect {
        path: path.to_owned(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    #[test]
    fn parent_dir_is_absolute_and_needs_a_file_name() {
        assert_eq!(
            parent_dir(Path::new("/run/crio/netns/abc")).ok(),
            Some(PathBuf::from("/run/crio/netns"))
        );
        let cwd = std::env::current_dir().expect("current dir");
        assert_eq!(parent_dir(Path::new("abc")).ok(), Some(cwd.clone()));
        assert_eq!(parent_dir(Path::new("sub/abc")).ok(), Some(cwd.join("sub")));
        assert!(parent_dir(Path::new("/")).is_err());
        assert!(parent_dir(Path::new("/run/netns/..")).is_err());
    }

    #[test]
    fn removing_a_missing_pin_is_fine() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("never-created");
        assert!(remove_pinned(&path).is_ok());
        assert!(remove_pinned(&dir.path().join("no/such/dir/ns")).is_ok());
    }

    #[test]
    fn plain_files_are_not_namespaces_and_missing_ones_are_not_found() {
        let dir = tempfile::tempdir().expect("temp dir");
        let plain = dir.path().join("stale");
        fs::write(&plain, b"").expect("write file");
        assert!(!is_netns(&plain).expect("plain file"));
        let err = is_netns(&dir.path().join("gone")).expect_err("missing path");
        assert!(err.is_not_found(), "{err}");
        assert!(err.to_string().contains("gone"), "{err}");
    }

    #[test]
    fn our_own_namespace_is_a_netns_and_other_kinds_are_not() {
        // Reading /proc/self/ns needs no privileges.
        assert!(is_netns(Path::new("/proc/self/ns/net")).expect("own netns"));
        assert!(!is_netns(Path::new("/proc/self/ns/uts")).expect("own uts ns"));
    }

    #[test]
    fn a_plain_file_left_behind_is_removed() {
        let dir = tempfile::tempdir().expect("temp dir");
        let stale = dir.path().join("after-reboot");
        fs::write(&stale, b"").expect("write file");
        remove_pinned(&stale).expect("remove stale pin");
        assert!(!stale.exists());
    }
}

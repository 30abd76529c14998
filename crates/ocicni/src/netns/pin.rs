//! Pinning namespaces to files: create, remove, prepare the directory, tell what a path holds.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use nix::errno::Errno;
use nix::mount::{MntFlags, MsFlags, mount, umount2};
use nix::sched::{CloneFlags, unshare};
use nix::sys::statfs::{NSFS_MAGIC, fstatfs, statfs};
use nix::unistd::gettid;

use super::error::{Error, Result};
use super::thread::run_blocking;

/// Serialises [`prepare_dir`] inside the process so two callers cannot both bind the directory onto
/// itself (which would stack two mounts and leak one).
static PREPARE_LOCK: Mutex<()> = Mutex::new(());

const NONE: Option<&str> = None;

/// How many mounts stacked on one pin [`remove_pinned`] peels off before giving up.
const MAX_STACKED_MOUNTS: usize = 16;

pub(super) fn create_pinned(path: &Path) -> Result<()> {
    let create_err = |source: io::Error| Error::Create {
        path: path.to_owned(),
        source,
    };
    let dir = parent_dir(path).map_err(create_err)?;
    prepare_dir(&dir)?;

    // Like `ip netns add`: a fresh, unreadable, empty file is the mount point. An existing file is
    // refused rather than mounted over, so two pods can never share (or stack on) one path.
    OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o000)
        .custom_flags(libc::O_CLOEXEC)
        .open(path)
        .map_err(create_err)?;

    let result = run_blocking(path, || {
        unshare(CloneFlags::CLONE_NEWNET).map_err(|errno| create_err(errno.into()))?;
        let own = PathBuf::from(format!("/proc/self/task/{}/ns/net", gettid()));
        // The mount is made in the process's mount namespace (never one of our own), so it is
        // visible to every child and, through the shared directory, to peer namespaces.
        mount(Some(&own), path, NONE, MsFlags::MS_BIND, NONE)
            .map_err(|errno| create_err(errno.into()))
    });
    if result.is_err() {
        // Best effort: the error being returned is the one that matters.
        let _ = fs::remove_file(path);
    } else {
        tracing::debug!(path = %path.display(), "created network namespace");
    }
    result
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
    let err = |source: io::Error| Error::PrepareDir {
        dir: dir.to_owned(),
        source,
    };
    let _guard = PREPARE_LOCK
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(dir)
        .map_err(err)?;
    let make_shared = || mount(NONE, dir, NONE, MsFlags::MS_SHARED | MsFlags::MS_REC, NONE);
    match make_shared() {
        Ok(()) => Ok(()),
        // EINVAL: not a mount point yet. Bind the directory onto itself (recursively, so pins made
        // before are carried over) and try again.
        Err(Errno::EINVAL) => {
            mount(
                Some(dir),
                dir,
                NONE,
                MsFlags::MS_BIND | MsFlags::MS_REC,
                NONE,
            )
            .map_err(|errno| err(errno.into()))?;
            tracing::debug!(dir = %dir.display(), "bound network namespace directory onto itself");
            make_shared().map_err(|errno| err(errno.into()))
        }
        Err(errno) => Err(err(errno.into())),
    }
}

pub(super) fn release_dir(dir: &Path) -> Result<()> {
    match umount2(dir, MntFlags::MNT_DETACH) {
        // EINVAL: not a mount point (already released or never prepared).
        Ok(()) | Err(Errno::EINVAL | Errno::ENOENT) => Ok(()),
        Err(errno) => Err(Error::ReleaseDir {
            dir: dir.to_owned(),
            source: errno.into(),
        }),
    }
}

pub(super) fn remove_pinned(path: &Path) -> Result<()> {
    let err = |source: io::Error| Error::Remove {
        path: path.to_owned(),
        source,
    };
    // Unmount until nothing is left: someone else (`mount --bind`, an older pin) may have stacked a
    // second mount on the file, and unlink fails with EBUSY while any remains.
    for _ in 0..MAX_STACKED_MOUNTS {
        // NOFOLLOW: a symlink planted where a pin should be must not get whatever it points at
        // unmounted.
        match umount2(path, MntFlags::MNT_DETACH | MntFlags::UMOUNT_NOFOLLOW) {
            Ok(()) => {}
            // EINVAL: nothing mounted there (any more, or a reboot left the bare file).
            Err(Errno::EINVAL | Errno::ENOENT) => break,
            // Without CAP_SYS_ADMIN the kernel says EPERM even when nothing is mounted; a bare file
            // can still be unlinked then.
            Err(Errno::EPERM) if !is_nsfs(path) => break,
            Err(errno) => return Err(err(errno.into())),
        }
    }
    match fs::remove_file(path) {
        Ok(()) => {
            tracing::debug!(path = %path.display(), "removed network namespace");
            Ok(())
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(err(e)),
    }
}

pub(super) fn is_netns(path: &Path) -> Result<bool> {
    let err = |source: io::Error| Error::Inspect {
        path: path.to_owned(),
        source,
    };
    // statfs first: a plain file (an unmounted pin is mode 000) is told apart without opening it.
    let fs = statfs(path).map_err(|errno| err(errno.into()))?;
    if fs.filesystem_type() != NSFS_MAGIC {
        return Ok(false);
    }
    let Some(file) = open_nsfs(path).map_err(err)? else {
        return Ok(false);
    };
    // nsfs holds every kind of namespace; ask which kind this one is.
    match ns_type(&file) {
        Ok(kind) => Ok(kind == libc::CLONE_NEWNET),
        // Kernels before 4.11 cannot tell; nsfs is the best answer they give.
        Err(Errno::ENOTTY) => Ok(true),
        Err(errno) => Err(err(errno.into())),
    }
}

/// Opens `path` read-only and returns it when the descriptor is on nsfs (a namespace of some
/// kind), `None` when it is something else.
///
/// The open never blocks: with `O_NONBLOCK` a FIFO without a writer opens at once instead of
/// waiting forever, which would hold the caller's pod and GC locks with it. The check is on the
/// descriptor, so the path cannot change between the check and the use.
pub(super) fn open_nsfs(path: &Path) -> io::Result<Option<File>> {
    let opened = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY)
        .open(path);
    let file = match opened {
        Ok(file) => file,
        // A socket cannot be opened, and is no namespace either.
        Err(e) if e.raw_os_error() == Some(libc::ENXIO) => return Ok(None),
        Err(e) => return Err(e),
    };
    let fs = fstatfs(&file).map_err(io::Error::from)?;
    Ok((fs.filesystem_type() == NSFS_MAGIC).then_some(file))
}

fn is_nsfs(path: &Path) -> bool {
    statfs(path).is_ok_and(|fs| fs.filesystem_type() == NSFS_MAGIC)
}

/// The `CLONE_NEW*` flag of the namespace behind `file`.
fn ns_type(file: &File) -> nix::Result<libc::c_int> {
    // SAFETY: NS_GET_NSTYPE takes no argument and only reads the descriptor, which `file` keeps open.
    let kind = unsafe { libc::ioctl(file.as_raw_fd(), libc::NS_GET_NSTYPE) };
    Errno::result(kind)
}

#[cfg(test)]
mod tests {
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

//! Overlay mounts and which mounts are ours: the only place this crate mounts or unmounts.
//!
//! The kernel copies mount data into one page (4096 bytes, the NUL included). Absolute layer paths
//! (`<root>/layers/<64 hex digits>`) fill it after about 45 layers, so a longer `lowerdir` is
//! named through file descriptors instead: each layer directory is opened (`O_PATH`) and named
//! `/proc/self/fd/<n>`, about 20 bytes a layer, which the kernel resolves while it mounts.
//! containers/storage gets the same effect with short symbolic links in `<root>/overlay/l/` and a
//! helper process that mounts relative paths from the store's root; containerd chdirs, in a
//! forked child, into the layers' common parent. Descriptors need neither a second process, nor
//! a chdir (the working directory is the whole process's), nor links to keep and collect.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use nix::mount::{MntFlags, MsFlags};
pub(crate) use node_primitives::MountEntry;
pub(crate) use node_primitives::mounts::mounts_at_or_below;

/// The most mount data the kernel takes: one page, its NUL included.
pub(crate) const MOUNT_DATA_MAX: usize = 4095;

/// Why an overlay could not be mounted.
#[derive(Debug)]
pub(crate) enum MountError {
    /// Even with descriptor names the `lowerdir` does not fit in a page.
    TooLong,
    /// The kernel (or opening a layer) said no.
    Io(io::Error),
}

/// Mounts an overlay on `target`: `lowers` top first, then `upper` and `work`.
pub(crate) fn mount_overlay(
    lowers: &[PathBuf],
    upper: &Path,
    work: &Path,
    target: &Path,
) -> Result<(), MountError> {
    let tail = format!(",upperdir={},workdir={}", escape(upper), escape(work));
    let absolute: Vec<String> = lowers.iter().map(|l| escape(l)).collect();
    let data = format!("lowerdir={}{tail}", absolute.join(":"));
    if data.len() <= MOUNT_DATA_MAX {
        return mount(target, &data).map_err(MountError::Io);
    }
    // The descriptors stay open until the mount returns; the overlay then holds the layers.
    let mut fds = Vec::with_capacity(lowers.len());
    for lower in lowers {
        let fd = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(lower)
            .map_err(MountError::Io)?;
        fds.push(fd);
    }
    let data = format!("lowerdir={}{tail}", fd_names(&fds).join(":"));
    if data.len() > MOUNT_DATA_MAX {
        return Err(MountError::TooLong);
    }
    mount(target, &data).map_err(MountError::Io)
}

fn fd_names(fds: &[File]) -> Vec<String> {
    fds.iter()
        .map(|f| format!("/proc/self/fd/{}", f.as_raw_fd()))
        .collect()
}

fn mount(target: &Path, data: &str) -> io::Result<()> {
    nix::mount::mount(
        Some("overlay"),
        target,
        Some("overlay"),
        MsFlags::empty(),
        Some(data),
    )
    .map_err(io::Error::from)
}

/// Backslash-escapes the characters overlayfs' option parser splits on.
fn escape(path: &Path) -> String {
    let mut out = String::new();
    for c in path.to_string_lossy().chars() {
        if matches!(c, ':' | ',' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Unmounts `target`; lazily (detached, gone from the tree now, freed when the last user goes)
/// when it is busy. Not mounted is fine.
pub(crate) fn unmount(target: &Path) -> io::Result<()> {
    match nix::mount::umount2(target, MntFlags::empty()) {
        Ok(()) | Err(nix::errno::Errno::EINVAL | nix::errno::Errno::ENOENT) => Ok(()),
        Err(nix::errno::Errno::EBUSY) => {
            tracing::info!(target = %target.display(), "busy: detaching the mount");
            nix::mount::umount2(target, MntFlags::MNT_DETACH).map_err(io::Error::from)
        }
        Err(e) => Err(e.into()),
    }
}

/// Whether `mount` is an overlay whose upper directory is `upper`.
pub(crate) fn is_overlay_on(mount: &MountEntry, upper: &Path) -> bool {
    mount.fs_type == "overlay" && mount.super_option("upperdir").map(Path::new) == Some(upper)
}

/// The mounts of this process's mount namespace, in mount order.
pub(crate) fn mountinfo() -> io::Result<Vec<MountEntry>> {
    node_primitives::mounts::read_own().map_err(node_primitives::Error::into_io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_overlay_is_ours_by_its_upper_directory() {
        let text = b"22 1 0:21 / /proc rw,nosuid shared:5 - proc proc rw\n\
            49 27 0:40 / /var/lib/a\\040b/merged rw,relatime - overlay overlay \
            rw,lowerdir=/l1:/l2,upperdir=/var/lib/a\\040b/upper,workdir=/w,uuid=on\n";
        let mounts = node_primitives::mounts::parse(text);
        let upper = Path::new("/var/lib/a b/upper");
        assert!(is_overlay_on(&mounts[1], upper));
        assert!(!is_overlay_on(&mounts[1], Path::new("/var/lib/a b/other")));
        assert!(!is_overlay_on(&mounts[0], upper));
    }

    #[test]
    fn option_separators_in_paths_are_escaped() {
        assert_eq!(escape(Path::new("/a:b,c\\d")), "/a\\:b\\,c\\\\d");
        assert_eq!(escape(Path::new("/plain/path")), "/plain/path");
    }
}

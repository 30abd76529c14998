//! The system calls the standard library has no safe wrapper for: whiteouts, devices, FIFOs, extended
//! attributes, and times on symbolic links.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;

use nix::sys::stat::{Mode, SFlag, makedev, mknod};
use nix::sys::time::TimeVal;

/// overlayfs' mark of a directory that hides the lower layers' entries.
pub(crate) const OPAQUE_XATTR: &str = "trusted.overlay.opaque";

/// An overlayfs whiteout: a character device 0/0 (needs `CAP_MKNOD`).
pub(crate) fn whiteout(path: &Path) -> io::Result<()> {
    mknod(path, SFlag::S_IFCHR, Mode::empty(), makedev(0, 0)).map_err(io::Error::from)
}

/// A named pipe with no permissions yet (the caller sets the mode).
pub(crate) fn fifo(path: &Path) -> io::Result<()> {
    mknod(path, SFlag::S_IFIFO, Mode::empty(), 0).map_err(io::Error::from)
}

/// A character (or, with `block`, block) device node with no permissions yet (the caller sets
/// the mode; needs `CAP_MKNOD`).
pub(crate) fn device(path: &Path, block: bool, major: u32, minor: u32) -> io::Result<()> {
    let kind = if block {
        SFlag::S_IFBLK
    } else {
        SFlag::S_IFCHR
    };
    mknod(
        path,
        kind,
        Mode::empty(),
        makedev(major.into(), minor.into()),
    )
    .map_err(io::Error::from)
}

/// Marks `dir` opaque for overlayfs (needs `CAP_SYS_ADMIN`: `trusted.*` is root's namespace).
pub(crate) fn set_opaque(dir: &Path) -> io::Result<()> {
    set_xattr(dir, OPAQUE_XATTR, b"y")
}

/// Sets the extended attribute `name` of `path` (itself, never a link's target) to `value`.
pub(crate) fn set_xattr(path: &Path, name: &str, value: &[u8]) -> io::Result<()> {
    let path = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path has a NUL byte"))?;
    let name = CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "name has a NUL byte"))?;
    // SAFETY: both strings are NUL-terminated and outlive the call; `value` is valid for
    // `value.len()` bytes.
    let rc = unsafe {
        libc::lsetxattr(
            path.as_ptr(),
            name.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Reads an extended attribute of `path` without following a symbolic link; `None` if unset.
pub(crate) fn get_xattr(path: &Path, name: &str) -> io::Result<Option<Vec<u8>>> {
    let path = c_path(path)?;
    let name = CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "name has a NUL byte"))?;
    // Values are at most 64 KiB (XATTR_SIZE_MAX).
    let mut buf = vec![0u8; 64 * 1024];
    // SAFETY: both strings are NUL-terminated and outlive the call; `buf` is writable for
    // `buf.len()` bytes.
    let rc = unsafe {
        libc::lgetxattr(
            path.as_ptr(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    if rc < 0 {
        let e = io::Error::last_os_error();
        return if e.raw_os_error() == Some(libc::ENODATA) {
            Ok(None)
        } else {
            Err(e)
        };
    }
    buf.truncate(rc as usize);
    Ok(Some(buf))
}

/// The names of the extended attributes of `path` (itself, never a link's target).
pub(crate) fn list_xattrs(path: &Path) -> io::Result<Vec<String>> {
    let path = c_path(path)?;
    // A list is at most 64 KiB (XATTR_LIST_MAX).
    let mut buf = vec![0u8; 64 * 1024];
    // SAFETY: `path` is NUL-terminated and outlives the call; `buf` is writable for
    // `buf.len()` bytes.
    let rc = unsafe { libc::llistxattr(path.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        return if e.raw_os_error() == Some(libc::ENOTSUP) {
            Ok(Vec::new())
        } else {
            Err(e)
        };
    }
    buf.truncate(rc as usize);
    Ok(buf
        .split(|&b| b == 0)
        .filter(|n| !n.is_empty())
        .map(|n| String::from_utf8_lossy(n).into_owned())
        .collect())
}

fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path has a NUL byte"))
}

/// Sets the access and modification times of `path` (itself, if it is a symbolic link).
pub(crate) fn set_mtime(path: &Path, mtime: u64) -> io::Result<()> {
    let secs = i64::try_from(mtime).unwrap_or(i64::MAX);
    let t = TimeVal::new(secs, 0);
    nix::sys::stat::lutimes(path, &t, &t).map_err(io::Error::from)
}

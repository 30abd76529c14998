//! Network namespaces, in-process: pin new ones to files, remove them, enter them, and bring up or
//! read interfaces inside them. Nothing here runs an external program (no `ip`, no `nsenter`).
//!
//! A *pinned* namespace is a network namespace bind-mounted onto a file, as `ip netns add` and
//! CRI-O's `pinns` do: the mount keeps the namespace alive with no process in it, and the file's path
//! is what the runtime hands to CNI plugins as `CNI_NETNS`.
//!
//! # Threads
//!
//! `unshare(CLONE_NEWNET)` and `setns` move the calling *thread*. Every function here that needs a
//! namespace does that work on a fresh, short-lived `std::thread` that exits afterwards; no thread that
//! changed namespace is ever reused, and the caller's thread never moves. The blocking functions are
//! therefore correct anywhere, including on a tokio worker, where they block for the length of a few
//! syscalls; the `*_async` variants await the same thread without blocking the executor. (tokio's
//! `spawn_blocking` is deliberately not used: its pool reuses threads.)
//!
//! # The directory holding pins
//!
//! [`create_pinned`] first makes the directory holding the pin a *shared* mount point, binding it onto
//! itself when it is not a mount point yet, exactly as `ip netns add` treats `/run/netns`. With the
//! directory shared, unmounting a pin propagates to every mount namespace that copied it (containers,
//! `ip netns exec`, services with private `/tmp`), so [`remove_pinned`] really frees the namespace instead
//! of leaving copies that keep it alive; and pins made later show up in those namespaces too.
//! The mount is made in the process's own mount namespace, never one created for the purpose, so child
//! processes (plugins) see it. A daemon started inside a private mount namespace (systemd
//! `PrivateMounts=`, `PrivateTmp=` under the directory) shares its pins only with its own children.
//!
//! The directory's self-bind stays after the last pin is removed, as `/run/netns` does. Tests and demos
//! that pin under a temporary directory undo it with [`release_dir`]. A runtime's own directory is
//! kept by [`PinDir`], which releases the bind at shutdown only when its process made it, and
//! removes what a crash left; it pins through a [`Pinner`] ([`HostPinner`], or a test's fake).
//!
//! # Example
//!
//! ```no_run
//! use std::path::Path;
//! use ocicni::netns;
//!
//! # fn main() -> Result<(), netns::Error> {
//! let path = Path::new("/run/crio-lite/netns/pod-1");
//! netns::create_pinned(path)?;
//! netns::bring_up_loopback(path)?;
//! for iface in netns::interfaces(path)? {
//!     println!("{} up={} {:?}", iface.name, iface.up, iface.addresses);
//! }
//! netns::remove_pinned(path)?;
//! # Ok(())
//! # }
//! ```

mod error;
mod link;
mod manager;
mod netlink;
mod pin;
mod sysctl;
mod thread;

use std::path::{Path, PathBuf};

pub use error::{Error, Result};
pub use link::InterfaceInfo;
pub use manager::{HostPinner, PinDir, Pinner};
pub use sysctl::{SysctlError, check_sysctl, set_sysctls, set_sysctls_async, sysctl_path};

use thread::{enter, run_async, run_blocking};

/// Creates a new network namespace and pins it at `path` (a new file; missing parent directories are
/// created). The directory is made a shared mount point first (see the [module docs](self)).
///
/// The new namespace has only `lo`, which is down: call [`bring_up_loopback`] when the pod needs it.
///
/// # Errors
///
/// [`Error::PrepareDir`] when the directory cannot be created or made shared; [`Error::Create`] when
/// `path` already exists (its `source` kind is `AlreadyExists`), or the namespace cannot be created or
/// mounted (no `CAP_SYS_ADMIN`, for instance). On error nothing is left at `path`.
pub fn create_pinned(path: &Path) -> Result<()> {
    pin::create_pinned(path)
}

/// [`create_pinned`] without blocking the async executor.
///
/// # Errors
///
/// As [`create_pinned`]. Dropping the future does not cancel the creation.
pub async fn create_pinned_async(path: impl Into<PathBuf>) -> Result<()> {
    let path = path.into();
    run_async(path.clone(), move || pin::create_pinned(&path)).await
}

/// Unmounts (lazily, `MNT_DETACH`) and removes a pinned namespace. A missing path, or a bare file left
/// after a reboot, is fine: removing twice succeeds.
///
/// The namespace itself goes away once no process, mount or open descriptor refers to it.
///
/// # Errors
///
/// [`Error::Remove`] when the unmount or the unlink fails for another reason than "not there".
pub fn remove_pinned(path: &Path) -> Result<()> {
    pin::remove_pinned(path)
}

/// [`remove_pinned`] without blocking the async executor.
///
/// # Errors
///
/// As [`remove_pinned`].
pub async fn remove_pinned_async(path: impl Into<PathBuf>) -> Result<()> {
    let path = path.into();
    run_async(path.clone(), move || pin::remove_pinned(&path)).await
}

/// Creates `dir` if needed and makes it a shared mount point, binding it onto itself when it is not
/// a mount point, as `ip netns add` does for `/run/netns`. [`create_pinned`] calls this; call it
/// directly to prepare a directory once at start-up. Idempotent within a process.
///
/// # Errors
///
/// [`Error::PrepareDir`] when the directory cannot be created or mounted.
pub fn prepare_dir(dir: &Path) -> Result<()> {
    pin::prepare_dir(dir)
}

/// Detaches the self-bind that [`prepare_dir`] put on `dir`, and with it any pins still mounted under
/// it. Fine when `dir` is not a mount point or is missing.
///
/// Only for directories this program prepared, such as a test's temporary directory: on a directory
/// that is a mount point for another reason (a tmpfs, the system's `/run/netns`) it unmounts that.
///
/// # Errors
///
/// [`Error::ReleaseDir`] when the unmount fails for another reason than "not mounted".
pub fn release_dir(dir: &Path) -> Result<()> {
    pin::release_dir(dir)
}

/// True when `dir` is a mount point of this process's mount namespace (`/proc/self/mountinfo`,
/// its octal escapes decoded; `dir` made absolute but not resolved, so canonicalize it first). A
/// runtime that finds its pin directory mounted already (by `ip netns`, another runtime, or a run
/// of its own that crashed) did not make that bind and should not release it.
///
/// # Errors
///
/// When `/proc/self/mountinfo` cannot be read.
pub fn is_mount_point(dir: &Path) -> std::io::Result<bool> {
    node_primitives::mounts::is_mount_point(dir).map_err(node_primitives::Error::into_io)
}

/// True when something exists at `path`. A bare file left after a reboot exists too; use [`is_netns`]
/// to tell a live namespace from it.
pub fn exists(path: &Path) -> bool {
    path.try_exists().unwrap_or(false)
}

/// True when `path` is a network namespace: a pinned one, or a `/proc/<pid>/ns/net` link. A plain
/// file (an unmounted pin) or another kind of namespace gives `false`.
///
/// Cheap (a `statfs`, an `open` that cannot block, an `fstatfs` and an `ioctl`); it does not enter
/// the namespace. A FIFO, socket or device at `path` gives `false`.
///
/// # Errors
///
/// [`Error::Inspect`] when the path cannot be examined; [`Error::is_not_found`] tells a missing path.
pub fn is_netns(path: &Path) -> Result<bool> {
    pin::is_netns(path)
}

/// Runs `f` on a fresh thread inside the network namespace at `path` and returns its value. The thread
/// exits afterwards. Sockets opened by `f` belong to that namespace and keep working after it returns.
///
/// A panic in `f` resumes in the caller.
///
/// # Errors
///
/// [`Error::Enter`] when the path cannot be opened or joined ([`Error::is_not_found`] when it does not
/// exist); [`Error::NotNetns`] when it is not a network namespace; [`Error::Thread`] when no thread can
/// be started.
pub fn with_netns<R, F>(path: &Path, f: F) -> Result<R>
where
    F: FnOnce() -> R + Send,
    R: Send,
{
    run_blocking(path, || {
        enter(path)?;
        Ok(f())
    })
}

/// [`with_netns`] without blocking the async executor; `f` still runs on its own fresh thread.
///
/// # Errors
///
/// As [`with_netns`].
pub async fn with_netns_async<R, F>(path: impl Into<PathBuf>, f: F) -> Result<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    let path = path.into();
    run_async(path.clone(), move || {
        enter(&path)?;
        Ok(f())
    })
    .await
}

/// Sets `lo` up inside the namespace at `path` (an `RTM_NEWLINK` netlink request, as `ip link set lo
/// up` makes). The kernel then gives it `127.0.0.1/8` and `::1/128`. Idempotent.
///
/// # Errors
///
/// As [`with_netns`], plus [`Error::Loopback`] when the interface cannot be read or changed.
pub fn bring_up_loopback(path: &Path) -> Result<()> {
    run_blocking(path, || loopback_here(path))
}

/// [`bring_up_loopback`] without blocking the async executor.
///
/// # Errors
///
/// As [`bring_up_loopback`].
pub async fn bring_up_loopback_async(path: impl Into<PathBuf>) -> Result<()> {
    let path = path.into();
    run_async(path.clone(), move || loopback_here(&path)).await
}

/// Every interface inside the namespace at `path`, loopback included, ordered by index, with its MAC,
/// MTU, state and addresses (netlink link and address dumps, as `ip addr` reads them).
///
/// # Errors
///
/// As [`with_netns`], plus [`Error::Interfaces`] when the kernel's answer cannot be read.
pub fn interfaces(path: &Path) -> Result<Vec<InterfaceInfo>> {
    run_blocking(path, || interfaces_here(path))
}

/// [`interfaces`] without blocking the async executor.
///
/// # Errors
///
/// As [`interfaces`].
pub async fn interfaces_async(path: impl Into<PathBuf>) -> Result<Vec<InterfaceInfo>> {
    let path = path.into();
    run_async(path.clone(), move || interfaces_here(&path)).await
}

fn loopback_here(path: &Path) -> Result<()> {
    enter(path)?;
    link::bring_up_loopback().map_err(|source| Error::Loopback {
        path: path.to_owned(),
        source,
    })
}

fn interfaces_here(path: &Path) -> Result<Vec<InterfaceInfo>> {
    enter(path)?;
    link::read_interfaces().map_err(|source| Error::Interfaces {
        path: path.to_owned(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_is_a_mount_point() {
        assert!(is_mount_point(Path::new("/")).expect("mountinfo"));
        assert!(!is_mount_point(Path::new("/nonexistent/ocicni-netns-test")).expect("mountinfo"));
    }

    #[test]
    fn entering_a_missing_path_is_not_found_and_names_it() {
        let path = Path::new("/nonexistent/ocicni-netns-test/x");
        let err = with_netns(path, || ()).expect_err("missing namespace");
        assert!(err.is_not_found(), "{err}");
        assert_eq!(
            err.to_string(),
            "cannot enter network namespace /nonexistent/ocicni-netns-test/x: \
             No such file or directory (os error 2)"
        );
    }

    #[test]
    fn entering_a_plain_file_says_it_is_not_a_namespace() {
        let file = tempfile::NamedTempFile::new().expect("temp file");
        let err = interfaces(file.path()).expect_err("plain file");
        // Unprivileged, setns may refuse with EPERM before it looks at the file.
        assert!(
            matches!(err, Error::NotNetns { .. } | Error::Enter { .. }),
            "{err}"
        );
        assert!(!err.is_not_found());
        assert_eq!(err.path(), file.path());
    }

    /// Runs `f` on its own thread; fails the test (instead of hanging it) after `secs`.
    fn within<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(std::time::Duration::from_secs(secs))
            .unwrap_or_else(|_| panic!("did not return within {secs} s (blocked opening a FIFO?)"))
    }

    fn fifo(dir: &Path) -> PathBuf {
        let path = dir.join("not-a-netns");
        let status = std::process::Command::new("mkfifo")
            .arg(&path)
            .status()
            .expect("run mkfifo");
        assert!(status.success(), "mkfifo {}", path.display());
        path
    }

    #[test]
    fn a_fifo_is_refused_at_once_and_named() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = fifo(dir.path());
        let want = format!(
            "cannot enter network namespace {}: not a network namespace",
            path.display()
        );
        let p = path.clone();
        let err = within(10, move || with_netns(&p, || ()).expect_err("a FIFO"));
        assert_eq!(err.to_string(), want);
        assert!(!err.is_not_found());
        let p = path.clone();
        let err = within(10, move || interfaces(&p).expect_err("a FIFO"));
        assert_eq!(err.to_string(), want);
        let p = path.clone();
        let err = within(10, move || bring_up_loopback(&p).expect_err("a FIFO"));
        assert_eq!(err.to_string(), want);
        let p = path.clone();
        assert!(!within(10, move || is_netns(&p).expect("a FIFO can be examined")));
    }

    #[tokio::test]
    async fn a_fifo_is_refused_at_once_by_the_async_variants() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = fifo(dir.path());
        let err = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            bring_up_loopback_async(path.clone()),
        )
        .await
        .expect("returns instead of blocking on the FIFO")
        .expect_err("a FIFO");
        assert_eq!(err.path(), path);
        assert!(matches!(err, Error::NotNetns { .. }), "{err}");
    }

    #[test]
    fn exists_is_false_for_a_missing_path() {
        assert!(!exists(Path::new("/nonexistent/ocicni-netns-test/x")));
        assert!(exists(Path::new("/proc/self/ns/net")));
    }

    #[tokio::test]
    async fn async_variants_report_the_same_errors() {
        let err = interfaces_async("/nonexistent/ocicni-netns-test/y")
            .await
            .expect_err("missing namespace");
        assert!(err.is_not_found(), "{err}");
        let err = with_netns_async("/nonexistent/ocicni-netns-test/y", || 1)
            .await
            .expect_err("missing namespace");
        assert!(
            err.to_string().contains("/nonexistent/ocicni-netns-test/y"),
            "{err}"
        );
    }
}

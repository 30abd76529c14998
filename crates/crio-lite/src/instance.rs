//! One daemon per state directory and per socket.
//!
//! A second daemon started on the same state directory used to run recovery and CNI garbage
//! collection before it found the socket taken, and so tore down the first daemon's sandboxes
//! being created. Both locks are taken before anything is read or changed; a second daemon stops
//! with an error naming the lock and changes nothing.

use std::path::{Path, PathBuf};

use ocicni::cni_lock::{self, FileLock};

use crate::error::{Error, Result};

/// Held for the daemon's life; the kernel drops the locks when the process dies, even by SIGKILL.
#[derive(Debug)]
pub(crate) struct InstanceLocks {
    _locks: Vec<FileLock>,
}

impl InstanceLocks {
    /// Takes `<state_dir>/crio-lite.lock` and `<socket>.lock`, in that order, without waiting.
    pub(crate) fn acquire(state_dir: &Path, socket: &Path) -> Result<InstanceLocks> {
        let mut socket_lock = socket.as_os_str().to_owned();
        socket_lock.push(".lock");
        let locks = [state_dir.join("crio-lite.lock"), PathBuf::from(socket_lock)]
            .into_iter()
            .map(lock)
            .collect::<Result<Vec<_>>>()?;
        Ok(InstanceLocks { _locks: locks })
    }
}

fn lock(path: PathBuf) -> Result<FileLock> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .map_err(|e| Error::io("cannot create directory", parent, e))?;
    }
    FileLock::try_exclusive(&path).map_err(|e| match e {
        cni_lock::Error::Held { path } => Error::AlreadyRunning { lock: path },
        cni_lock::Error::Io { path, source } => Error::io("cannot lock", path, source),
        other => Error::io("cannot lock", path, std::io::Error::other(other)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_instance_is_refused_naming_the_lock() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("run/crio-lite.sock");
        let first = InstanceLocks::acquire(dir.path(), &socket).unwrap();
        let err = InstanceLocks::acquire(dir.path(), &socket).unwrap_err();
        assert!(err.to_string().contains("crio-lite.lock"), "{err}");
        // Another state dir on the same socket is refused too.
        let other = tempfile::tempdir().unwrap();
        let err = InstanceLocks::acquire(other.path(), &socket).unwrap_err();
        assert!(err.to_string().contains("crio-lite.sock.lock"), "{err}");
        drop(first);
        InstanceLocks::acquire(dir.path(), &socket).expect("free again once the first is gone");
    }

    #[test]
    fn a_fifo_at_the_lock_path_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        nix::unistd::mkfifo(
            &dir.path().join("crio-lite.lock"),
            nix::sys::stat::Mode::from_bits_truncate(0o600),
        )
        .unwrap();
        let err = InstanceLocks::acquire(dir.path(), &dir.path().join("s.sock")).unwrap_err();
        assert!(err.to_string().contains("not a regular file"), "{err}");
    }
}

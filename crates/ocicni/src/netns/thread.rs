//! Short-lived threads for namespace work.
//!
//! `setns` and `unshare(CLONE_NEWNET)` change the namespace of the calling *thread*. A thread that did
//! either is never handed back to anyone: it runs one job and exits. That keeps tokio's worker and
//! blocking pools (which reuse threads) in the namespace the process started in.

use std::io;
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::sched::{CloneFlags, setns};

use super::error::{Error, Result};
use node_primitives::ns::open_namespace;

const THREAD_NAME: &str = "netns";

/// Runs `job` on a new thread and blocks until it is done. A panic in `job` resumes in the caller.
pub(super) fn run_blocking<R, F>(path: &Path, job: F) -> Result<R>
where
    F: FnOnce() -> Result<R> + Send,
    R: Send,
{
    std::thread::scope(|scope| {
        let handle = std::thread::Builder::new()
            .name(THREAD_NAME.into())
            .spawn_scoped(scope, job)
            .map_err(|source| Error::Thread {
                path: path.to_owned(),
                source,
            })?;
        match handle.join() {
            Ok(result) => result,
            Err(panic) => panic::resume_unwind(panic),
        }
    })
}

/// Runs `job` on a new thread without blocking the async caller.
///
/// Dropping the future does not stop the thread: the namespace operation runs to completion.
pub(super) async fn run_async<R, F>(path: PathBuf, job: F) -> Result<R>
where
    F: FnOnce() -> Result<R> + Send + 'static,
    R: Send + 'static,
{
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name(THREAD_NAME.into())
        .spawn(move || {
            // The receiver may be gone (the future was dropped); nobody is left to tell then.
            let _ = tx.send(panic::catch_unwind(AssertUnwindSafe(job)));
        })
        .map_err(|source| Error::Thread {
            path: path.clone(),
            source,
        })?;
    match rx.await {
        Ok(Ok(result)) => result,
        Ok(Err(panic)) => panic::resume_unwind(panic),
        Err(_) => Err(Error::Thread {
            path,
            source: io::Error::other("the namespace thread ended without a result"),
        }),
    }
}

/// Moves the calling thread into the network namespace at `path`.
///
/// Only for threads started by [`run_blocking`] or [`run_async`].
pub(super) fn enter(path: &Path) -> Result<()> {
    let file = open_namespace(path)
        .map_err(|source| Error::Enter {
            path: path.to_owned(),
            source,
        })?
        .ok_or_else(|| Error::NotNetns {
            path: path.to_owned(),
        })?;
    match setns(&file, CloneFlags::CLONE_NEWNET) {
        Ok(()) => Ok(()),
        // The kernel says EINVAL when the file is not a namespace of the requested type.
        Err(Errno::EINVAL) => Err(Error::NotNetns {
            path: path.to_owned(),
        }),
        Err(errno) => Err(Error::Enter {
            path: path.to_owned(),
            source: errno.into(),
        }),
    }
}

//! Work inside a network namespace, on a thread of its own that ends with the work.
//!
//! `setns` moves the calling thread only. The thread that enters is never handed back to
//! anyone (not tokio's pools, not the caller): it runs one job and exits, so no thread is ever
//! left, or reused, in a pod's namespace.

use std::io;
use std::path::Path;

use nix::sched::{CloneFlags, setns};

use crate::host_local::go_reason;

/// `NSFS_MAGIC` and `PROC_SUPER_MAGIC`: what Go's `ns.GetNS` accepts.
const NSFS_MAGIC: i64 = 0x6e73_6673;
const PROC_SUPER_MAGIC: i64 = 0x9fa0;

/// Why a namespace could not be entered, as the Go plugins' `pkg/ns` words it.
#[derive(Debug)]
pub(crate) enum NsError {
    /// `NSPathNotExistErr`: the path is gone (DEL treats that as done).
    Missing(String),
    Other(String),
}

impl NsError {
    pub(crate) fn message(self) -> String {
        match self {
            NsError::Missing(m) | NsError::Other(m) => m,
        }
    }
}

/// Runs `job` on a new thread inside the network namespace at `path` and waits for it.
pub(crate) fn with_netns<R, F>(path: &str, job: F) -> Result<R, NsError>
where
    F: FnOnce() -> Result<R, String> + Send,
    R: Send,
{
    let quoted = crate::gojson::quote(path);
    let fs = match rustix::fs::statfs(path) {
        Ok(fs) => fs,
        Err(e) => {
            let message = format!(
                "failed to Statfs {quoted}: {}",
                go_reason(&io::Error::from(e))
            );
            return Err(if e == rustix::io::Errno::NOENT {
                NsError::Missing(message)
            } else {
                NsError::Other(message)
            });
        }
    };
    let magic = fs.f_type;
    if magic != NSFS_MAGIC && magic != PROC_SUPER_MAGIC {
        return Err(NsError::Other(format!(
            "unknown FS magic on {quoted}: {magic:x}"
        )));
    }
    let file = node_primitives::ns::open_namespace(Path::new(path))
        .map_err(|e| NsError::Other(format!("{path}: {}", go_reason(&e))))?
        .ok_or_else(|| NsError::Other(format!("unknown FS magic on {quoted}: {magic:x}")))?;
    std::thread::scope(|scope| {
        let handle = std::thread::Builder::new()
            .name("cni-builtin-netns".into())
            .spawn_scoped(scope, move || {
                setns(&file, CloneFlags::CLONE_NEWNET).map_err(|e| {
                    format!(
                        "error switching to ns {path}: {}",
                        go_reason(&io::Error::from(e))
                    )
                })?;
                // This thread now lives in the pod's namespace; it ends when `job` returns.
                job()
            })
            .map_err(|e| NsError::Other(format!("cannot start a namespace thread: {e}")))?;
        handle
            .join()
            .map_err(|_| NsError::Other("the namespace thread panicked".to_owned()))?
            .map_err(NsError::Other)
    })
}

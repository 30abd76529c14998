//! What the workspace's tests share, so no test tree keeps a copy of its own.
//!
//! - [`netns`]: network namespaces a test creates with `ip netns add` under a unique name, runs
//!   commands in and inspects (links, veths, addresses, iptables rules naming a pod, pids), and
//!   deletes on drop, also when the test panics; `run_in`/`must_in` enter a pinned namespace with
//!   `nsenter`. A privileged test that cannot get one fails; it never skips.
//! - [`process`]: run a program and capture its output, re-run the test binary as a worker, look
//!   for processes by environment, wait for a pid to die.
//! - [`fs`]: sorted file names, result cache entries, executable scripts, mount points.
//! - [`fake_plugin`]: `cni-fake-plugin`, a configurable CNI plugin binary, built on first use.
//! - [`go`]: Go test programs built offline against Debian's Go packages.
//! - [`registry`]: a local OCI registry (Debian's docker-registry on a random port), pushing
//!   images to it over the distribution API, a registry that stalls and a slow link.
//! - [`image`]: test images made offline from Debian's busybox-static: tar layers (whiteouts,
//!   opaque directories, hostile entries), gzip and zstd, configurations, manifests, indexes.
//! - [`http`]: the few lines of HTTP/1.1 the registry helpers speak.
//! - [`raw_h2`]: a raw HTTP/2 client that sends header blocks byte for byte (an `:authority` no
//!   HTTP library would write) and reports the server's answer frame by frame.
//!
//! Names are unique per test: [`unique_name`] puts the pid and a per-process counter in every
//! namespace and temporary directory, so tests running in parallel, in one process or several,
//! never share one, and whatever a failed run leaves behind can be traced to it.
//!
//! This crate is a dev-dependency only and is not published. It depends on no workspace crate, so
//! any crate's tests can use it, the lowest ones included.
//!
//! # Example
//!
//! ```no_run
//! use test_support::netns::NetNs;
//!
//! // Needs root: `ip netns add cxnode-<pid>-<n>`, `lo` up; deleted when `node` drops.
//! let node = NetNs::new("cxnode");
//! node.must(&["ip", "link", "add", "br0", "type", "bridge"]);
//! assert!(node.links().contains(&"br0".to_owned()));
//! assert!(node.veths().is_empty());
//! ```

pub mod fake_plugin;
pub mod fs;
pub mod go;
pub mod http;
pub mod image;
pub mod netns;
pub mod process;
pub mod raw_h2;
pub mod registry;

use std::sync::atomic::{AtomicU32, Ordering};

use tempfile::TempDir;

/// A number no earlier call in this process returned.
pub fn unique() -> u32 {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    COUNTER.fetch_add(1, Ordering::Relaxed)
}

/// `<prefix>-<pid>-<n>`: unique across the processes that run at once, and traceable to the test
/// process that made it.
pub fn unique_name(prefix: &str) -> String {
    format!("{prefix}-{}-{}", std::process::id(), unique())
}

/// A new temporary directory named `<prefix>-<pid>-<n>-<random>`, removed when dropped.
///
/// # Panics
///
/// When the directory cannot be created, failing the test.
pub fn temp_dir(prefix: &str) -> TempDir {
    tempfile::Builder::new()
        .prefix(&format!("{}-", unique_name(prefix)))
        .tempdir()
        .unwrap_or_else(|e| panic!("cannot create a temporary directory {prefix}-*: {e}"))
}

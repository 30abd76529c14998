//! The world of the tests with Debian's real plugins: a "node" namespace the plugins run in
//! (through `ip netns exec`) with a `Cni` and a temporary directory, and pod namespaces they attach
//! (test-support's `NetNs`, named with the pid and a counter, deleted on drop).

use std::sync::Arc;

use cni_exec::{Cni, ProcessExec};
use tempfile::TempDir;
use test_support::netns::NetNs;

/// Where Debian's containernetworking-plugins installs the plugins.
pub(crate) const REAL_PLUGIN_DIR: &str = "/usr/lib/cni";

/// A node namespace with a `Cni` that runs the real plugins inside it, and a temporary directory
/// for the result cache and host-local's leases.
pub(crate) struct Node {
    pub(crate) ns: NetNs,
    pub(crate) dir: TempDir,
    pub(crate) cni: Cni,
}

impl Node {
    pub(crate) fn new() -> Self {
        let ns = NetNs::new("cxnode");
        let dir = tempfile::tempdir().expect("temp dir");
        let exec = ProcessExec::new().with_launcher(ns.launcher());
        let cni = Cni::new(
            Arc::new(exec),
            vec![REAL_PLUGIN_DIR.into()],
            dir.path().join("cache"),
        );
        Self { ns, dir, cni }
    }

    /// host-local's `dataDir` for this test.
    pub(crate) fn ipam_dir(&self) -> String {
        self.dir.path().join("ipam").display().to_string()
    }

    /// The lease files host-local keeps for `network` (files named after addresses).
    pub(crate) fn leases(&self, network: &str) -> Vec<String> {
        test_support::fs::file_names(&self.dir.path().join("ipam").join(network))
            .into_iter()
            .filter(|n| n.starts_with(|c: char| c.is_ascii_digit()))
            .collect()
    }
}

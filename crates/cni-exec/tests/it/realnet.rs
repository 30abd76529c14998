//! Network namespaces for the tests with Debian's real plugins: a "node" namespace the plugins run
//! in (through `ip netns exec`), and pod namespaces they attach. Everything is created here, named
//! with the pid and a counter, and deleted on drop; the machine's own namespace is never touched.

use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use cni_exec::{Cni, ProcessExec};
use tempfile::TempDir;

/// Where Debian's containernetworking-plugins installs the plugins.
pub(crate) const REAL_PLUGIN_DIR: &str = "/usr/lib/cni";

/// A per-process counter for unique names.
pub(crate) fn unique() -> u32 {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    COUNTER.fetch_add(1, Ordering::Relaxed)
}

/// Runs a command and returns its output; panics (failing the test) when it cannot be started.
pub(crate) fn run(args: &[&str]) -> Output {
    Command::new(args[0])
        .args(&args[1..])
        .output()
        .unwrap_or_else(|e| panic!("cannot run {args:?}: {e}"))
}

/// Runs a command that must succeed and returns its stdout.
pub(crate) fn must(args: &[&str]) -> String {
    let out = run(args);
    assert!(
        out.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A network namespace of our own, deleted on drop.
pub(crate) struct NetNs {
    pub(crate) name: String,
}

impl NetNs {
    /// Creates `cx<kind>-<pid>-<n>`; fails the test when it cannot.
    pub(crate) fn new(kind: &str) -> Self {
        let name = format!("cx{kind}-{}-{}", std::process::id(), unique());
        must(&["ip", "netns", "add", &name]);
        must(&["ip", "-n", &name, "link", "set", "lo", "up"]);
        Self { name }
    }

    /// `/run/netns/<name>`, the path plugins get as `CNI_NETNS`.
    pub(crate) fn path(&self) -> String {
        format!("/run/netns/{}", self.name)
    }

    /// Runs `args` inside the namespace.
    pub(crate) fn exec(&self, args: &[&str]) -> Output {
        let mut all = vec!["ip", "netns", "exec", &self.name];
        all.extend_from_slice(args);
        run(&all)
    }

    /// Runs `args` inside the namespace; it must succeed. Returns stdout.
    pub(crate) fn must(&self, args: &[&str]) -> String {
        let out = self.exec(args);
        assert!(
            out.status.success(),
            "{args:?} in {} failed: {}",
            self.name,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "delete", &self.name])
            .status();
    }
}

/// A node namespace with a `Cni` that runs the real plugins inside it, and a temporary directory
/// for the result cache and host-local's leases.
pub(crate) struct Node {
    pub(crate) ns: NetNs,
    pub(crate) dir: TempDir,
    pub(crate) cni: Cni,
}

impl Node {
    pub(crate) fn new() -> Self {
        let ns = NetNs::new("node");
        let dir = tempfile::tempdir().expect("temp dir");
        let exec = ProcessExec::new().with_launcher(["ip", "netns", "exec", ns.name.as_str()]);
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
        let Ok(entries) = std::fs::read_dir(self.dir.path().join("ipam").join(network)) else {
            return Vec::new();
        };
        entries
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(|c: char| c.is_ascii_digit()))
            .collect()
    }

    /// Interface names in the node namespace.
    pub(crate) fn links(&self) -> Vec<String> {
        self.ns
            .must(&["ip", "-br", "link"])
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .map(|n| n.split('@').next().unwrap_or(n).to_owned())
            .collect()
    }
}

/// The IPv4 addresses (CIDR) on `ifname` inside `ns`.
pub(crate) fn addresses(ns: &NetNs, ifname: &str) -> Vec<String> {
    ns.must(&["ip", "-4", "-br", "addr", "show", "dev", ifname])
        .split_whitespace()
        .skip(2)
        .map(str::to_owned)
        .collect()
}

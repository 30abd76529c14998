//! Network namespaces of a test's own, made and inspected with `ip`.
//!
//! A "node" namespace stands in for the host: plugins run in it through [`NetNs::launcher`]
//! (`ip netns exec <name>`), so the bridge they create, the host ends of the veths and every
//! iptables rule live there, and the machine's own namespace is never touched. Pod namespaces are
//! made the same way, or pinned by the code under test.
//!
//! [`NetNs::new`] fails the test when the namespace cannot be created: the tests that call it are
//! `#[ignore = "needs root + netns: cargo xtask test"]`, and once asked for they never skip.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::process::{self, stdout};

/// A network namespace made with `ip netns add`, deleted on drop (also when the test panics).
#[derive(Debug)]
pub struct NetNs {
    name: String,
    /// False for a namespace another process made and deletes.
    owned: bool,
}

impl NetNs {
    /// Creates `<prefix>-<pid>-<n>` (see [`crate::unique_name`]) with `lo` up.
    ///
    /// # Panics
    ///
    /// When the namespace cannot be created (not root, no `ip`), failing the test.
    pub fn new(prefix: &str) -> NetNs {
        let ns = NetNs::bare(prefix);
        process::must("ip", &["-n", &ns.name, "link", "set", "lo", "up"]);
        ns
    }

    /// Creates `<prefix>-<pid>-<n>` as `ip netns add` leaves it: `lo` down, nothing else, as a
    /// runtime that is not under test would hand it over.
    ///
    /// # Panics
    ///
    /// When the namespace cannot be created (not root, no `ip`), failing the test.
    pub fn bare(prefix: &str) -> NetNs {
        let name = crate::unique_name(prefix);
        let add = process::output("ip", &["netns", "add", &name]);
        assert!(
            add.status.success(),
            "cannot create the network namespace {name} (these tests need root: cargo xtask test): {}",
            String::from_utf8_lossy(&add.stderr)
        );
        NetNs { name, owned: true }
    }

    /// The namespace `name` that another process made (a test that re-executes itself as a
    /// worker): usable like one's own, but left in place on drop.
    pub fn adopt(name: impl Into<String>) -> NetNs {
        NetNs {
            name: name.into(),
            owned: false,
        }
    }

    /// The name `ip netns` knows it by.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `/run/netns/<name>`: the namespace file, for `CNI_NETNS`, `nsenter --net=` or entering it
    /// in-process.
    pub fn path(&self) -> PathBuf {
        PathBuf::from("/run/netns").join(&self.name)
    }

    /// `ip netns exec <name>`: the wrapper that runs a plugin (or anything) inside.
    pub fn launcher(&self) -> [String; 4] {
        [
            "ip".to_owned(),
            "netns".to_owned(),
            "exec".to_owned(),
            self.name.clone(),
        ]
    }

    /// Runs `args` inside the namespace and returns what it did, failed or not.
    ///
    /// # Panics
    ///
    /// When `ip` cannot be started.
    pub fn exec(&self, args: &[&str]) -> Output {
        let mut all = vec!["netns", "exec", self.name.as_str()];
        all.extend_from_slice(args);
        process::output("ip", &all)
    }

    /// Runs `args` inside the namespace and returns its stdout.
    ///
    /// # Panics
    ///
    /// When the command fails, with its stderr.
    pub fn must(&self, args: &[&str]) -> String {
        let out = self.exec(args);
        assert!(
            out.status.success(),
            "{args:?} in {} failed ({}): {}",
            self.name,
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        stdout(&out)
    }

    /// The names of every interface in the namespace.
    pub fn links(&self) -> Vec<String> {
        self.must(&["ip", "-br", "link"])
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .map(|n| n.split('@').next().unwrap_or(n).to_owned())
            .collect()
    }

    /// The names of the veth interfaces (the host ends of pods' interfaces, in a node).
    pub fn veths(&self) -> Vec<String> {
        process::must(
            "ip",
            &["-n", &self.name, "-o", "link", "show", "type", "veth"],
        )
        .lines()
        .filter_map(|l| l.split(": ").nth(1))
        .map(|n| n.split('@').next().unwrap_or(n).to_owned())
        .collect()
    }

    /// The IPv4 addresses (CIDR) on `ifname`.
    pub fn addresses(&self, ifname: &str) -> Vec<String> {
        self.must(&["ip", "-4", "-br", "addr", "show", "dev", ifname])
            .split_whitespace()
            .skip(2)
            .map(str::to_owned)
            .collect()
    }

    /// Every iptables rule and chain (IPv4, all tables), as `iptables-save` prints them.
    pub fn iptables(&self) -> String {
        self.must(&["iptables-save"])
    }

    /// The lines of [`NetNs::iptables`] that name any of `words` (a pod's container ID, say): what
    /// a teardown must leave none of.
    pub fn rules_naming<S: AsRef<str>>(&self, words: impl IntoIterator<Item = S>) -> Vec<String> {
        let words: Vec<S> = words.into_iter().collect();
        self.iptables()
            .lines()
            .filter(|line| words.iter().any(|w| line.contains(w.as_ref())))
            .map(str::to_owned)
            .collect()
    }

    /// The pids of the processes running in the namespace.
    pub fn pids(&self) -> Vec<u32> {
        process::must("ip", &["netns", "pids", &self.name])
            .split_whitespace()
            .filter_map(|pid| pid.parse().ok())
            .collect()
    }
}

/// Runs `args` inside the namespace file at `path` (a pin the code under test made, which `ip netns`
/// does not know) with `nsenter --net=<path>`, and returns what it did, failed or not.
///
/// # Panics
///
/// When `nsenter` cannot be started.
pub fn run_in(path: &Path, args: &[&str]) -> Output {
    let net = format!("--net={}", path.display());
    let mut all = vec![net.as_str(), "--"];
    all.extend_from_slice(args);
    process::output("nsenter", &all)
}

/// Runs `args` inside the namespace file at `path` like [`run_in`] and returns its stdout.
///
/// # Panics
///
/// When the command fails, with its stderr.
pub fn must_in(path: &Path, args: &[&str]) -> String {
    let out = run_in(path, args);
    assert!(
        out.status.success(),
        "{args:?} in {} failed ({}): {}",
        path.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout(&out)
}

impl Drop for NetNs {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        match std::process::Command::new("ip")
            .args(["netns", "delete", &self.name])
            .output()
        {
            Ok(out) if out.status.success() => {}
            Ok(out) => eprintln!(
                "cannot delete the network namespace {}: {}",
                self.name,
                String::from_utf8_lossy(&out.stderr)
            ),
            Err(e) => eprintln!("cannot delete the network namespace {}: {e}", self.name),
        }
    }
}

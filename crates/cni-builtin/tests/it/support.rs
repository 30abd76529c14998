//! Running one invocation through the Go binary and through the built-in, and what a lease
//! directory holds.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cni_builtin::{BuiltinExec, Preference};
use cni_exec::{Exec, ProcessExec};
use serde_json::Value;

/// Where Debian's containernetworking-plugins put their binaries.
pub(crate) const GO_DIR: &str = "/usr/lib/cni";

/// What one run printed: whether it succeeded, and its stdout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Run {
    pub(crate) ok: bool,
    pub(crate) stdout: Vec<u8>,
}

impl Run {
    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    /// The error object's code, when it failed.
    pub(crate) fn code(&self) -> Option<u64> {
        if self.ok {
            return None;
        }
        let v: Value = serde_json::from_slice(&self.stdout)
            .unwrap_or_else(|e| panic!("not an error object ({e}): {}", self.text()));
        v["code"].as_u64()
    }

    pub(crate) fn json(&self) -> Value {
        serde_json::from_slice(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }
}

/// The `CNI_*` variables of one invocation.
pub(crate) fn env(
    command: &str,
    id: &str,
    ifname: &str,
    netns: &str,
    args: &str,
) -> Vec<(String, String)> {
    let mut env = vec![
        ("CNI_COMMAND".to_owned(), command.to_owned()),
        ("CNI_CONTAINERID".to_owned(), id.to_owned()),
        ("CNI_NETNS".to_owned(), netns.to_owned()),
        ("CNI_IFNAME".to_owned(), ifname.to_owned()),
        ("CNI_PATH".to_owned(), GO_DIR.to_owned()),
    ];
    if !args.is_empty() {
        env.push(("CNI_ARGS".to_owned(), args.to_owned()));
    }
    env
}

/// A plugin run as a test reads it: its output, and whether it succeeded; a plugin that did not
/// run at all fails the test.
pub(crate) fn outcome(result: cni_exec::Result<cni_exec::PluginOutput>) -> Run {
    match result {
        Ok(out) => Run {
            ok: true,
            stdout: out.stdout,
        },
        Err(cni_exec::Error::Failed { stdout, .. }) => Run { ok: false, stdout },
        Err(other) => panic!("the plugin did not run: {other}"),
    }
}

/// Runs Debian's binary `plugin` as a process.
pub(crate) async fn go(plugin: &str, env: &[(String, String)], stdin: &[u8]) -> Run {
    let path = Path::new(GO_DIR).join(plugin);
    assert!(
        path.is_file(),
        "{} is missing: install Debian's containernetworking-plugins",
        path.display()
    );
    outcome(ProcessExec::new().exec_plugin(&path, env, stdin).await)
}

/// Runs the built-in `plugin` through [`BuiltinExec`], as a runtime would.
pub(crate) async fn builtin(plugin: &str, env: &[(String, String)], stdin: &[u8]) -> Run {
    let exec = BuiltinExec::new(Arc::new(ProcessExec::new()), Preference::PreferBuiltin);
    let path = exec
        .find_plugin(plugin, &[PathBuf::from(GO_DIR)])
        .await
        .expect("a built-in is always found");
    assert_eq!(path, PathBuf::from(format!("builtin:{plugin}")));
    outcome(exec.exec_plugin(&path, env, stdin).await)
}

/// Every file under `dir` (relative name) with its mode and bytes.
pub(crate) fn snapshot(dir: &Path) -> BTreeMap<String, (u32, Vec<u8>)> {
    let mut out = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries {
        let entry = entry.unwrap();
        let meta = entry.metadata().unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        let bytes = if meta.is_file() {
            std::fs::read(entry.path()).unwrap()
        } else {
            Vec::new()
        };
        out.insert(name, (meta.permissions().mode() & 0o7777, bytes));
    }
    out
}

/// The lease files of a network directory (files named after an address).
pub(crate) fn leases(dir: &Path) -> BTreeMap<String, String> {
    snapshot(dir)
        .into_iter()
        .filter(|(name, _)| name.parse::<std::net::IpAddr>().is_ok())
        .map(|(name, (_, bytes))| (name, String::from_utf8(bytes).unwrap()))
        .collect()
}

/// `config` with `ipam.dataDir` set to `dir`.
pub(crate) fn with_data_dir(config: &Value, dir: &Path) -> Vec<u8> {
    let mut config = config.clone();
    config["ipam"]["dataDir"] = Value::String(dir.to_str().unwrap().to_owned());
    serde_json::to_vec(&config).unwrap()
}

/// The nat table of `ns` as `save` (`iptables-save`, `ip6tables-save`) prints it, its comments
/// and counters aside.
pub(crate) fn saved_nat(ns: &test_support::netns::NetNs, save: &str) -> String {
    ns.must(&[save, "-t", "nat"])
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| match l.find(" [") {
            Some(at) if l.starts_with(':') => format!("{} [0:0]", &l[..at]),
            _ => l.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

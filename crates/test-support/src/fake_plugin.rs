//! `cni-fake-plugin`: a configurable CNI plugin binary, the test double for plugin logic.
//!
//! It records every invocation (command, environment, parsed stdin, pid) as one JSON line in a file
//! and behaves as told by a `"fake"` object in its network configuration, so each plugin of a
//! conflist can behave differently. Keys in `<argv0>.fake.json` next to the binary (or link) apply
//! first, which reaches commands whose stdin has no configuration of ours (VERSION); the `CNI_FAKE`
//! environment variable (a JSON object) overrides keys of both.
//!
//! | key | effect |
//! |-----|--------|
//! | `"record": "/path/log.jsonl"` | append `{"command","env","stdin","pid"}` per invocation |
//! | `"result": <json>` | print this on ADD |
//! | `"resultVersion": "0.2.0"` … `"1.1.0"` | print a canned result of that version's shape, with an address derived from `CNI_CONTAINERID` (the default, using the config's `cniVersion`) |
//! | `"passPrevResult": true` | print the `prevResult` from stdin on ADD, as a chained plugin does |
//! | `"fail": {"code": 7, "msg": "...", "details": "..."}` | print that spec error and exit 1 |
//! | `"failOn": ["ADD", "DEL"]` | apply `fail`, `crash`, `garbage`, `hugeBytes`, `hangSecs` and `spawnChild` only to these commands (default: all) |
//! | `"hangSecs": 30` | sleep that long first |
//! | `"crash": "abort"` / `"segv"` / `"exit3-no-json"` | die by SIGABRT, by SIGSEGV, or exit 3 with text on stderr only |
//! | `"garbage": true` | print something that is not JSON, exit 0 |
//! | `"hugeBytes": 5000000` | print that many bytes, exit 0 |
//! | `"spawnChild": true` | start `sleep 1000` (its pid recorded as `childPid`) and hang |
//! | `"stderr": "text"` | write this to stderr |
//! | `"supportedVersions": [...]` | what VERSION reports |
//!
//! Undecodable stdin gets the spec's error code 6 and an unknown `CNI_COMMAND` code 4; the fake
//! never panics.
//!
//! # Finding the binary
//!
//! It is a bin of this package, and `env!("CARGO_BIN_EXE_…")` only names the bins of the package
//! whose tests are compiled. So [`binary`] builds it, once per test process, with the `cargo` that
//! runs the tests: `cargo build --bin cni-fake-plugin --target-dir <target>/test-support`. The
//! target directory of its own means it never waits for the lock the outer `cargo test` holds, and
//! it works alike under `cargo test -p <crate>`, `cargo test --workspace` and `cargo xtask test`.
//! Concurrent test processes are safe: cargo serialises builds in one target directory, and the
//! binary the tests run is a copy named after its contents, moved into place atomically, so a
//! concurrent build re-linking cargo's output never leaves a test without its plugin.
//!
//! `CNI_FAKE_PLUGIN=/path/to/cni-fake-plugin` skips the build and uses that binary.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::Value;

/// The environment variable that names a ready-built fake plugin (no build then).
pub const OVERRIDE_VAR: &str = "CNI_FAKE_PLUGIN";

/// The fake plugin binary; built on the first call in this process (or taken from
/// [`OVERRIDE_VAR`]).
///
/// # Panics
///
/// When it cannot be built, with cargo's output; every later call panics with the same message
/// instead of building again.
pub fn binary() -> &'static Path {
    static BINARY: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match BINARY.get_or_init(locate) {
        Ok(path) => path,
        Err(why) => panic!("{why}"),
    }
}

/// Links the fake plugin into `dir` as `name` (the plugin type a configuration uses) and returns
/// the link's path.
///
/// # Panics
///
/// When the link cannot be made, failing the test.
pub fn install(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    std::os::unix::fs::symlink(binary(), &path)
        .unwrap_or_else(|e| panic!("link the fake plugin as {}: {e}", path.display()));
    path
}

fn locate() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os(OVERRIDE_VAR) {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(format!("{OVERRIDE_VAR}={} names no file", path.display()))
        };
    }
    let built = build()?;
    stable_copy(&built)
}

/// Builds the plugin and returns the executable cargo reports.
fn build() -> Result<PathBuf, String> {
    let target_dir = target_dir().join("test-support");
    // The cargo running the tests sets CARGO; a test binary started by hand falls back to the
    // one that compiled it.
    let cargo = std::env::var_os("CARGO")
        .or_else(|| option_env!("CARGO").map(Into::into))
        .unwrap_or_else(|| "cargo".into());
    let out = Command::new(&cargo)
        .args([
            "build",
            "--offline",
            "--message-format=json-render-diagnostics",
        ])
        .args([
            "--manifest-path",
            concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"),
        ])
        .args(["--package", "test-support", "--bin", "cni-fake-plugin"])
        .arg("--target-dir")
        .arg(&target_dir)
        .output()
        .map_err(|e| {
            format!(
                "cannot run {} to build cni-fake-plugin: {e}",
                cargo.display()
            )
        })?;
    if !out.status.success() {
        return Err(format!(
            "building cni-fake-plugin (target dir {}) failed ({}):\n{}",
            target_dir.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|msg| {
            msg["reason"] == "compiler-artifact" && msg["target"]["name"] == "cni-fake-plugin"
        })
        .find_map(|msg| msg["executable"].as_str().map(PathBuf::from))
        .ok_or_else(|| "cargo built cni-fake-plugin but named no executable".to_owned())
}

/// The workspace's target directory: the test executable runs from `<target>/<profile>/deps/`
/// (`<target>/<triple>/<profile>/deps/` when cross-compiling, which is as good a place).
fn target_dir() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| target_dir_of(&exe))
        .or_else(|| std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from))
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"))
}

fn target_dir_of(test_exe: &Path) -> Option<PathBuf> {
    let deps = test_exe.parent()?;
    if deps.file_name()? != "deps" {
        return None;
    }
    Some(deps.parent()?.parent()?.to_owned())
}

/// A copy of `built` beside it, named after its contents: cargo re-links its output on every
/// build (remove, then link), which a concurrent test process must not see as a missing plugin.
/// The copy is written under a name of this process's and renamed into place, so it is whole or
/// absent, and never changes once there.
fn stable_copy(built: &Path) -> Result<PathBuf, String> {
    let bytes = read_while_relinked(built)?;
    // FNV-1a: stable across runs and platforms, and enough to tell two builds apart.
    let hash = bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    });
    let dir = built.parent().unwrap_or(Path::new("."));
    let stable = dir.join(format!("cni-fake-plugin-{hash:016x}"));
    if stable.is_file() {
        return Ok(stable);
    }
    let partial = dir.join(format!(
        ".cni-fake-plugin-{hash:016x}.{}",
        std::process::id()
    ));
    std::fs::write(&partial, &bytes)
        .and_then(|()| std::fs::set_permissions(&partial, std::fs::Permissions::from_mode(0o755)))
        .and_then(|()| std::fs::rename(&partial, &stable))
        .map_err(|e| format!("copy {} to {}: {e}", built.display(), stable.display()))?;
    Ok(stable)
}

/// Reads `path`, trying again for a moment while it is missing: another process's cargo may be
/// between removing and re-linking it.
fn read_while_relinked(path: &Path) -> Result<Vec<u8>, String> {
    let mut tries = 0;
    loop {
        match std::fs::read(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && tries < 50 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            read => return read.map_err(|e| format!("read {}: {e}", path.display())),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::target_dir_of;

    #[test]
    fn the_target_dir_is_two_above_the_test_executables_deps() {
        let of = |exe: &str| target_dir_of(Path::new(exe));
        assert_eq!(
            of("/w/target/debug/deps/it-0123").as_deref(),
            Some(Path::new("/w/target"))
        );
        assert_eq!(
            of("/w/target/x86_64-unknown-linux-gnu/release/deps/it-0123").as_deref(),
            Some(Path::new("/w/target/x86_64-unknown-linux-gnu"))
        );
        assert_eq!(of("/usr/local/bin/it"), None, "not run by cargo");
    }
}

//! The rig the fault rows drive: wrapper plugins that hold one armed call, misbehaving plugins,
//! and crio-lite processes started beside the node's daemon.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use test_support::fs::write_executable;

use super::Reaper;
use crate::e2e_support::Node;

/// Where Debian's containernetworking-plugins puts the real plugins.
const REAL_PLUGINS: &str = "/usr/lib/cni";

/// The plugins of the built-in network, which get wrappers.
const WRAPPED: [&str; 3] = ["bridge", "host-local", "portmap"];

/// The node's directory of wrapper and misbehaving plugins.
pub(crate) fn plugin_dir(node: &Node) -> PathBuf {
    node.path("plugins")
}

/// Where the wrappers look for arms and leave their markers.
fn fault_dir(node: &Node) -> PathBuf {
    node.path("faults")
}

/// Creates a FIFO at `path`.
pub(crate) fn mkfifo(path: &Path) {
    nix::unistd::mkfifo(path, nix::sys::stat::Mode::from_bits_truncate(0o600))
        .unwrap_or_else(|e| panic!("mkfifo {}: {e}", path.display()));
}

/// Installs the wrapper plugins and the misbehaving ones in the node's plugin directory, and
/// points the daemon at it (before `/usr/lib/cni`), with `timeout` as its plugin timeout. Keep
/// the reaper until the row ends: it kills what the plugins left running.
pub(crate) fn install_plugins(node: &mut Node, timeout: Option<&str>) -> Reaper {
    let plugins = plugin_dir(node);
    let faults = fault_dir(node);
    for dir in [&plugins, &faults, &faults.join("arm")] {
        std::fs::create_dir_all(dir).expect("create a fault directory");
    }
    // Read with a timeout as a sleep that forks nothing, so a killed wrapper leaves no child.
    mkfifo(&faults.join("pause"));
    for plugin in WRAPPED {
        write_executable(&plugins.join(plugin), &wrapper(plugin, &faults));
    }
    for (name, what, body) in super::plugins::MISBEHAVING {
        write_executable(&plugins.join(name), &misbehaving(what, body));
    }
    let mut flags = vec![
        "--cni-plugin-dir".to_owned(),
        plugins.display().to_string(),
        "--cni-plugin-dir".to_owned(),
        REAL_PLUGINS.to_owned(),
    ];
    if let Some(timeout) = timeout {
        flags.extend(["--plugin-timeout".to_owned(), timeout.to_owned()]);
    }
    node.add_flags(flags);
    Reaper::new(&plugins)
}

fn wrapper(plugin: &str, faults: &Path) -> String {
    format!(
        r#"#!/bin/bash
# Fault injection: runs the real {plugin}, except for the one call the test armed, which is held
# before or after the real plugin until the test releases it (or 60 s pass).
real={REAL_PLUGINS}/{plugin}
d='{faults}'
hold() {{
    printf '%s %s %s %s\n' {plugin} "$CNI_COMMAND" "$1" "$CNI_CONTAINERID" >"$d/hit.$$"
    mv -f "$d/hit.$$" "$d/hit"
    for _ in $(seq 1200); do
        [ -e "$d/release" ] && return
        read -r -t 0.05 -u 9 9<>"$d/pause" || :
    done
}}
arm="$d/arm/{plugin}.$CNI_COMMAND"
if [ -e "$arm.before" ] && mv "$arm.before" "$d/fired.$$" 2>/dev/null; then
    hold before
    exec "$real"
fi
if [ -e "$arm.after" ] && mv "$arm.after" "$d/fired.$$" 2>/dev/null; then
    out=$("$real")
    rc=$?
    hold after
    printf '%s\n' "$out"
    exit "$rc"
fi
exec "$real"
"#,
        faults = faults.display()
    )
}

fn misbehaving(what: &str, body: &str) -> String {
    format!(
        r#"#!/bin/bash
# Fault injection: a plugin that {what} on ADD; it answers VERSION and every other command succeeds.
case "$CNI_COMMAND" in
    VERSION)
        echo '{{"cniVersion":"1.0.0","supportedVersions":["0.3.0","0.3.1","0.4.0","1.0.0"]}}'
        exit 0
        ;;
    ADD) ;;
    *) exit 0 ;;
esac
{body}
"#
    )
}

/// Arms the wrapper of `plugin` to hold its next `command` call `when` ("before" or "after" the
/// real plugin runs).
pub(crate) fn arm(node: &Node, plugin: &str, command: &str, when: &str) {
    let faults = fault_dir(node);
    let _ = std::fs::remove_file(faults.join("hit"));
    let _ = std::fs::remove_file(faults.join("release"));
    std::fs::write(
        faults
            .join("arm")
            .join(format!("{plugin}.{command}.{when}")),
        "",
    )
    .expect("arm the wrapper");
}

/// What a held wrapper reports.
#[derive(Debug)]
pub(crate) struct Hit {
    pub(crate) plugin: String,
    pub(crate) command: String,
    pub(crate) when: String,
    pub(crate) container: String,
}

/// Waits until the armed wrapper holds its call.
pub(crate) async fn wait_hit(node: &Node) -> Hit {
    let path = fault_dir(node).join("hit");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(text) = std::fs::read_to_string(&path) {
            let words: Vec<&str> = text.split_whitespace().collect();
            if let [plugin, command, when, container] = words[..] {
                return Hit {
                    plugin: plugin.to_owned(),
                    command: command.to_owned(),
                    when: when.to_owned(),
                    container: container.to_owned(),
                };
            }
        }
        assert!(
            Instant::now() < deadline,
            "the armed plugin was not reached within 30 s:\n{}",
            node.logs()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Lets a held wrapper go on.
pub(crate) fn release(node: &Node) {
    std::fs::write(fault_dir(node).join("release"), "").expect("release the wrapper");
}

/// A crio-lite process started by a test, killed when dropped.
pub(crate) struct Spawned(Option<Child>);

impl Drop for Spawned {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Starts `crio-lite <args>` inside the node namespace, its output piped.
pub(crate) fn spawn_in_node(node: &Node, args: &[String]) -> Spawned {
    let child = Command::new("nsenter")
        .arg(format!("--net={}", node.netns_path().display()))
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_crio-lite"))
        .args(args)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start crio-lite under nsenter");
    Spawned(Some(child))
}

/// Waits up to `secs` for the process to exit and returns its output; fails the test (killing it)
/// when it is still running then.
pub(crate) async fn exits_within(mut spawned: Spawned, secs: u64, what: &str) -> Output {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let child = spawned.0.as_mut().expect("the process is ours");
        if child.try_wait().expect("poll the process").is_some() {
            let child = spawned.0.take().expect("the process is ours");
            return child.wait_with_output().expect("collect the output");
        }
        if Instant::now() >= deadline {
            let mut child = spawned.0.take().expect("the process is ours");
            let _ = child.kill();
            let out = child.wait_with_output().expect("collect the output");
            panic!(
                "{what}: still running after {secs} s (a hang), output:\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The daemon's flags for `node` (its own and the added ones) with `flag`'s value replaced.
pub(crate) fn flags_with(node: &Node, replaced: &[(&str, String)]) -> Vec<String> {
    let mut flags = node.flags();
    flags.extend_from_slice(node.extra_flags());
    for (flag, value) in replaced {
        let at = flags
            .iter()
            .position(|f| f == flag)
            .unwrap_or_else(|| panic!("no {flag} among the node's flags"));
        flags[at + 1].clone_from(value);
    }
    flags
}

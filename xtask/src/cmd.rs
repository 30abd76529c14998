//! Running commands from the workspace root, loudly.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

/// The workspace root (the parent of this crate's directory).
pub(crate) fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// Cargo's target directory: `CARGO_TARGET_DIR` when set (relative to the workspace root, where
/// [`cargo`] runs), else `target/` in the workspace.
pub(crate) fn target_dir() -> PathBuf {
    let root = workspace_root();
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), |dir| root.join(dir))
}

/// A `cargo` command rooted at the workspace, using the same cargo that runs xtask.
pub(crate) fn cargo() -> Command {
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.current_dir(workspace_root());
    cmd
}

/// `cargo metadata --no-deps` of the workspace, parsed.
///
/// # Errors
///
/// When cargo cannot run or prints no JSON.
pub(crate) fn workspace_metadata() -> Result<serde_json::Value> {
    let out = cargo()
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .output()
        .context("cannot run cargo metadata")?;
    if !out.status.success() {
        bail!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    serde_json::from_slice(&out.stdout).context("cargo metadata printed no JSON")
}

/// Runs `cmd`, echoing it first, and fails with the step's name when it fails.
pub(crate) fn run_step(step: &str, cmd: &mut Command) -> Result<()> {
    println!("\n==> {step}: {}", display(cmd));
    let started = std::time::Instant::now();
    let status = cmd
        .status()
        .with_context(|| format!("{step}: cannot start {}", display(cmd)))?;
    // Each step's wall time, so a slow CI run says which step grew.
    println!("<== {step}: {:.1} s", started.elapsed().as_secs_f64());
    if !status.success() {
        bail!("{step} failed ({status})");
    }
    Ok(())
}

/// Whether this process runs as root.
pub(crate) fn is_root() -> bool {
    // /proc/self/status has "Uid: real effective saved fs"; no libc needed.
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .is_some_and(|euid| euid == "0")
    })
}

/// Whether we run under CI (`CI=true`).
pub(crate) fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

fn display(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for arg in cmd.get_args() {
        s.push(' ');
        s.push_str(&arg.to_string_lossy());
    }
    s
}

/// A directory under the system's temporary directory, removed with everything in it when
/// dropped.
pub(crate) struct ScratchDir(PathBuf);

impl ScratchDir {
    /// A new empty directory whose name starts with `xtask-{purpose}-`.
    pub(crate) fn new(purpose: &str) -> Result<Self> {
        static COUNT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = COUNT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("xtask-{purpose}-{}-{n}", std::process::id()));
        if dir.exists() {
            std::fs::remove_dir_all(&dir)
                .with_context(|| format!("cannot empty {}", dir.display()))?;
        }
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        Ok(Self(dir))
    }

    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The first `program` on `PATH`.
pub(crate) fn on_path(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(program))
            .find(|candidate| candidate.is_file())
    })
}

//! `cargo xtask fresh`: the README's test command in a clean clone, as a new machine runs it.
//!
//! A developer's machine keeps what was installed by hand and what earlier builds left in
//! `target/`; CI's and a user's next machine have neither. This clones the committed tree into a
//! temporary directory (with `shared/` beside it, as CI lays it out), and runs `bash .ci/run`
//! there with its own cold target directory, `PROTOC` unset, and a `protoc` first on `PATH` that
//! fails loudly, so any build step that still wanted a protobuf compiler breaks the run.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context as _, Result, bail};

use crate::cmd::{run_step, workspace_root};

pub(crate) const USAGE: &str = "usage: cargo xtask fresh [--keep]

Clones the committed tree (HEAD; uncommitted changes are not in it) into a temporary directory
with shared/ beside it and runs the README's test command there (`bash .ci/run`, that is
`cargo xtask test`) with a cold target directory, PROTOC unset and a PATH whose protoc fails.
Run as root, it installs what the tests need, as CI does.

options:
  --keep   keep the clone (its path is printed) instead of removing it";

/// What a `protoc` on PATH does during the run: fail, naming itself.
const POISONED_PROTOC: &str = "#!/bin/sh\n\
echo \"xtask fresh: protoc was called ($0 $*), but no build step may need a protoc binary\" >&2\n\
exit 127\n";

pub(crate) fn run(args: &[String]) -> Result<()> {
    let mut keep = false;
    for arg in args {
        match arg.as_str() {
            "--keep" => keep = true,
            other => bail!("fresh: unknown option {other:?}\n\n{USAGE}"),
        }
    }
    let root = workspace_root();
    let dirty = git(&root, &["status", "--porcelain"])?;
    if !dirty.trim().is_empty() {
        println!(
            "xtask: warning: the work tree has uncommitted changes; the clone has only what HEAD has"
        );
    }
    let head = git(&root, &["rev-parse", "--short", "HEAD"])?;
    let base = std::env::temp_dir().join(format!("xtask-fresh-{}", std::process::id()));
    let clone = base.join("main");
    std::fs::create_dir_all(&base).with_context(|| format!("cannot create {}", base.display()))?;
    let outcome = run_in(&root, &base, &clone, head.trim());
    if keep {
        println!("xtask: the clone is kept at {}", clone.display());
    } else if let Err(e) = std::fs::remove_dir_all(&base) {
        println!("xtask: cannot remove {}: {e}", base.display());
    }
    outcome
}

fn run_in(root: &Path, base: &Path, clone: &Path, head: &str) -> Result<()> {
    run_step(
        &format!("clone HEAD ({head}) into {}", clone.display()),
        Command::new("git")
            .args(["clone", "--quiet", "--no-hardlinks"])
            .arg(root)
            .arg(clone),
    )?;
    // CI lays a copy of shared/ beside the clone; the tests read the corpus from ../shared.
    let shared = root.join("../shared");
    if shared.is_dir() {
        std::os::unix::fs::symlink(shared.canonicalize().unwrap_or(shared), base.join("shared"))
            .context("cannot link shared/ beside the clone")?;
    } else {
        println!("xtask: warning: no shared/ beside the work tree, so none beside the clone");
    }
    let bin = base.join("bin");
    std::fs::create_dir_all(&bin)?;
    let protoc = bin.join("protoc");
    std::fs::write(&protoc, POISONED_PROTOC)?;
    std::fs::set_permissions(&protoc, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut paths: Vec<PathBuf> = vec![bin];
    paths.extend(std::env::split_paths(&path));
    let started = Instant::now();
    run_step(
        "the README's test command in the clone (bash .ci/run), PROTOC unset, protoc poisoned",
        Command::new("bash")
            .arg(".ci/run")
            .current_dir(clone)
            .env_remove("PROTOC")
            .env_remove("CARGO_TARGET_DIR")
            .env("PATH", std::env::join_paths(paths)?),
    )?;
    println!(
        "\nxtask: fresh: PASS, the clean clone of {head} passed its test command in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn git(root: &Path, args: &[&str]) -> Result<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(root)
        .output()
        .context("cannot run git")?;
    if !out.status.success() {
        bail!(
            "git {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

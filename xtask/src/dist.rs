//! `cargo xtask dist`: the release binaries with their shell completions and manual pages, laid
//! out under `target/dist/` as an installed system has them (`usr/bin`, `usr/share/...`).
//!
//! The tree is a staging root: a package (a later `.deb`) or `cp -r target/dist/usr /` installs
//! it as it is. Completions and pages come from the binaries themselves (`NAME completions SHELL`,
//! `NAME man --out-dir DIR`), so they describe the command line that was built; xtask only runs
//! them, as it runs cargo.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, Result, bail};

use crate::cmd::{cargo, run_step, target_dir};

pub(crate) const USAGE: &str = "usage: cargo xtask dist

Builds the release binaries (crio-lite, ocicnitool) and lays out target/dist/ as a staging root:

  usr/bin/NAME                                      the binaries
  usr/share/bash-completion/completions/NAME        bash completions
  usr/share/zsh/vendor-completions/_NAME            zsh completions
  usr/share/fish/vendor_completions.d/NAME.fish     fish completions
  usr/share/man/man1/NAME.1, NAME-COMMAND.1         manual pages, one per command

target/dist/ is emptied first; what was written is listed at the end. The target directory is
CARGO_TARGET_DIR when set.";

/// The binaries shipped, with the package that builds each.
const BINARIES: &[(&str, &str)] = &[("crio-lite", "crio-lite"), ("ocicnitool", "ocicnitool")];

/// Where each shell looks for the completions a distribution installs, and the file name it
/// expects for a command NAME: prefix, NAME, suffix.
const COMPLETIONS: &[(&str, &str, &str, &str)] = &[
    ("bash", "usr/share/bash-completion/completions", "", ""),
    ("zsh", "usr/share/zsh/vendor-completions", "_", ""),
    ("fish", "usr/share/fish/vendor_completions.d", "", ".fish"),
];

const BIN_DIR: &str = "usr/bin";
const MAN_DIR: &str = "usr/share/man/man1";

pub(crate) fn run(args: &[String]) -> Result<()> {
    if let Some(other) = args.first() {
        bail!("dist: unknown option {other:?}\n\n{USAGE}");
    }
    let mut build = cargo();
    build.args(["build", "--release", "--locked"]);
    for (name, package) in BINARIES {
        build.args(["-p", package, "--bin", name]);
    }
    run_step("build the release binaries", &mut build)?;

    let target = target_dir();
    let root = target.join("dist");
    println!("\n==> lay out {}", root.display());
    if root.exists() {
        std::fs::remove_dir_all(&root)
            .with_context(|| format!("cannot empty {}", root.display()))?;
    }
    for (name, _) in BINARIES {
        stage(&target.join("release").join(name), &root, name)?;
    }

    let files = list(&root)?;
    println!("\n==> {} files in {}", files.len(), root.display());
    for (path, size) in &files {
        println!("    {:>9}  {}", human(*size), path.display());
    }
    Ok(())
}

/// One binary, its completions and its pages, under `root`.
fn stage(built: &Path, root: &Path, name: &str) -> Result<()> {
    let bin = root.join(BIN_DIR).join(name);
    create_parent(&bin)?;
    std::fs::copy(built, &bin)
        .with_context(|| format!("cannot copy {} to {}", built.display(), bin.display()))?;
    // From the staged copy: what is shipped is what describes itself.
    for (shell, dir, prefix, suffix) in COMPLETIONS {
        let script = output(Command::new(&bin).args(["completions", shell]))?;
        let path = root.join(dir).join(format!("{prefix}{name}{suffix}"));
        create_parent(&path)?;
        std::fs::write(&path, script)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    output(
        Command::new(&bin)
            .args(["man", "--out-dir"])
            .arg(root.join(MAN_DIR)),
    )?;
    Ok(())
}

/// Runs `cmd` and returns its stdout; fails with its stderr.
fn output(cmd: &mut Command) -> Result<Vec<u8>> {
    let shown = format!("{cmd:?}");
    let out = cmd
        .output()
        .with_context(|| format!("cannot run {shown}"))?;
    if !out.status.success() {
        bail!(
            "{shown} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim_end()
        );
    }
    Ok(out.stdout)
}

fn create_parent(path: &Path) -> Result<()> {
    let dir = path.parent().unwrap_or(path);
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))
}

/// Every file under `root`, relative to it and sorted, with its size.
fn list(root: &Path) -> Result<Vec<(PathBuf, u64)>> {
    let mut files = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in
            std::fs::read_dir(&dir).with_context(|| format!("cannot list {}", dir.display()))?
        {
            let entry = entry?;
            let meta = entry.metadata()?;
            if meta.is_dir() {
                dirs.push(entry.path());
            } else {
                let path = entry.path();
                let relative = path.strip_prefix(root).unwrap_or(&path).to_path_buf();
                files.push((relative, meta.len()));
            }
        }
    }
    files.sort();
    Ok(files)
}

fn human(bytes: u64) -> String {
    if bytes >= 1 << 20 {
        format!("{:.1} MiB", bytes as f64 / f64::from(1 << 20))
    } else if bytes >= 1 << 10 {
        format!("{:.1} KiB", bytes as f64 / f64::from(1 << 10))
    } else {
        format!("{bytes} B")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completion_files_are_named_as_each_shell_loads_them() {
        let names: Vec<String> = COMPLETIONS
            .iter()
            .map(|(_, dir, prefix, suffix)| format!("{dir}/{prefix}ocicnitool{suffix}"))
            .collect();
        assert_eq!(
            names,
            [
                "usr/share/bash-completion/completions/ocicnitool",
                "usr/share/zsh/vendor-completions/_ocicnitool",
                "usr/share/fish/vendor_completions.d/ocicnitool.fish",
            ]
        );
    }

    #[test]
    fn sizes_read_at_a_glance() {
        assert_eq!(human(512), "512 B");
        assert_eq!(human(2048), "2.0 KiB");
        assert_eq!(human(3 << 20), "3.0 MiB");
    }
}

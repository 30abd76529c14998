//! `cargo xtask dist`: the release binaries with their shell completions, manual pages, systemd
//! unit and default configuration, laid out under `target/dist/` as an installed system has them
//! (`usr/bin`, `usr/share/...`, `etc/...`), and the Debian packages made from that tree.
//!
//! The tree is a staging root: the `.deb` files are built from it (`dist/package.rs`), and
//! `cp -r target/dist/* /` installs it as it is. Completions, pages and the configuration come
//! from the binaries themselves (`NAME completions SHELL`, `NAME man --out-dir DIR`,
//! `crio-lite config --default`), so they describe the program that was built; xtask only runs
//! them, as it runs cargo.

mod check;
mod debian;
mod package;

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, Result, bail};

use crate::cmd::{ScratchDir, cargo, run_step, target_dir, workspace_root};
use crate::packages;

pub(crate) const USAGE: &str = "usage: cargo xtask dist [--check] [--debug]

Builds the release binaries (crio-lite, ocicnitool) and lays out target/dist/ as a staging root:

  usr/bin/NAME                                      the binaries
  usr/share/bash-completion/completions/NAME        bash completions
  usr/share/zsh/vendor-completions/_NAME            zsh completions
  usr/share/fish/vendor_completions.d/NAME.fish     fish completions
  usr/share/man/man1/NAME.1, NAME-COMMAND.1         manual pages, one per command
  usr/lib/systemd/system/crio-lite.service          the systemd unit (Type=notify)
  etc/crio-lite/crio-lite.conf                      `crio-lite config --default`
  etc/crio-lite/crio-lite.conf.d/                   its drop-in directory, empty
  etc/crio-lite/policy.json                         a signature policy accepting every image

Then it builds two Debian packages from that tree with dpkg-deb, in target/deb/:
crio-lite_VERSION_ARCH.deb (the daemon, unit and configuration) and
ocicni-tools_VERSION_ARCH.deb (ocicnitool). Run as root, it installs dpkg-dev and binutils when
missing (dpkg-shlibdeps, strip). Set DEBFULLNAME and DEBEMAIL for the Maintainer field, and
SOURCE_DATE_EPOCH for the time stamps (default: the last commit's).

options:
  --check   then inspect the packages without installing them: dpkg-deb --field, --contents
            and --info (every expected file, its mode, root ownership, conffiles), the binaries
            of an extracted copy (--version; crio-lite accepts the packaged configuration),
            systemd-analyze verify on the unit, and lintian (installed with apt-get when
            missing, as root), whose errors fail the check. Not part of `cargo xtask test`:
            a cold release build takes minutes; the unit tests of this code are.
  --debug   package the debug binaries instead, into target/dist-debug/ and target/deb-debug/:
            the package the VM suite's service test installs (cargo xtask test makes it).

target/dist/ and target/deb/ are emptied first. The target directory is CARGO_TARGET_DIR when set.";

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
const CONTRIB_UNIT: &str = "crates/crio-lite/contrib/systemd/crio-lite.service";

pub(crate) fn run(args: &[String]) -> Result<()> {
    let mut check = false;
    let mut profile = Profile::Release;
    for arg in args {
        match arg.as_str() {
            "--check" => check = true,
            "--debug" => profile = Profile::Debug,
            other => bail!("dist: unknown option {other:?}\n\n{USAGE}"),
        }
    }
    let debs = packages_of(profile)?;
    if check {
        let meta = package::meta()?;
        check::run(&debs, &meta)?;
        println!("\nxtask: the packages passed every check");
    }
    Ok(())
}

/// Which binaries go into the packages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Profile {
    /// `cargo xtask dist`: release binaries, in target/dist/ and target/deb/.
    Release,
    /// The VM suite's: the debug binaries its tests run, in target/dist-debug/ and
    /// target/deb-debug/, so the service test installs the package as a node does without a
    /// release build.
    Debug,
}

/// crio-lite's package built from the debug binaries ([`Profile::Debug`]); its path.
pub(crate) fn debug_daemon_package() -> Result<PathBuf> {
    let debs = packages_of(Profile::Debug)?;
    debs.into_iter()
        .find(|(p, _)| p.name == "crio-lite")
        .map(|(_, deb)| deb)
        .context("no crio-lite package was built")
}

/// Builds the binaries of `profile`, stages them and makes the packages.
fn packages_of(profile: Profile) -> Result<Vec<(&'static debian::Package, PathBuf)>> {
    packages::ensure(packages::DEB_PACKAGES)?;
    let mut build = cargo();
    build.arg("build");
    if profile == Profile::Release {
        build.arg("--release");
    }
    build.arg("--locked");
    for (name, package) in BINARIES {
        build.args(["-p", package, "--bin", name]);
    }
    let (built, stage_dir, deb_dir) = match profile {
        Profile::Release => ("release", "dist", "deb"),
        Profile::Debug => ("debug", "dist-debug", "deb-debug"),
    };
    run_step(&format!("build the {built} binaries"), &mut build)?;

    let target = target_dir();
    let root = target.join(stage_dir);
    println!("\n==> lay out {}", root.display());
    if root.exists() {
        std::fs::remove_dir_all(&root)
            .with_context(|| format!("cannot empty {}", root.display()))?;
    }
    for (name, _) in BINARIES {
        stage(&target.join(built).join(name), &root, name)?;
    }
    stage_daemon_files(&root)?;

    let files = list(&root)?;
    println!("\n==> {} files in {}", files.len(), root.display());
    for (path, size) in &files {
        println!("    {:>9}  {}", human(*size), path.display());
    }

    let meta = package::meta()?;
    let debs = package::build_all(&root, &target.join(deb_dir), &meta)?;
    println!("\n==> Debian packages");
    for (_, deb) in &debs {
        let size = std::fs::metadata(deb).map_or(0, |m| m.len());
        println!("    {:>9}  {}", human(size), deb.display());
    }
    Ok(debs)
}

/// crio-lite's unit, its default configuration with an empty drop-in directory, and the
/// signature policy without which it refuses every pull.
fn stage_daemon_files(root: &Path) -> Result<()> {
    let unit = root.join(debian::UNIT_PATH);
    create_parent(&unit)?;
    let contrib = workspace_root().join(CONTRIB_UNIT);
    std::fs::copy(&contrib, &unit)
        .with_context(|| format!("cannot copy {} to {}", contrib.display(), unit.display()))?;

    let daemon = root.join(BIN_DIR).join("crio-lite");
    let config = root.join(debian::CONFIG_PATH);
    create_parent(&config)?;
    std::fs::write(&config, default_config(&daemon)?)
        .with_context(|| format!("cannot write {}", config.display()))?;
    std::fs::create_dir_all(root.join(debian::CONFIG_DROP_INS))?;
    let policy = root.join(debian::POLICY_PATH);
    std::fs::write(&policy, debian::POLICY)
        .with_context(|| format!("cannot write {}", policy.display()))?;
    // What the package ships must be what the daemon it ships accepts.
    output(
        Command::new(&daemon)
            .args(["config", "--config"])
            .arg(&config)
            .env_remove("RUST_LOG"),
    )
    .context("crio-lite rejects its own default configuration")?;
    Ok(())
}

/// `crio-lite config --default`: the built-in defaults, whatever this machine's /etc holds.
fn default_config(daemon: &Path) -> Result<Vec<u8>> {
    let out = Command::new(daemon)
        .args(["config", "--default"])
        .env_remove("RUST_LOG")
        .output()
        .with_context(|| format!("cannot run {} config --default", daemon.display()))?;
    if out.status.success() {
        return Ok(out.stdout);
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.code() != Some(2) || !stderr.contains("--default") {
        bail!(
            "{} config --default failed ({}): {}",
            daemon.display(),
            out.status,
            stderr.trim_end()
        );
    }
    // A crio-lite from before `config --default`: an empty file as --config gives the same
    // defaults while /etc has no drop-ins. Remove once every branch has --default.
    println!("xtask: this crio-lite has no `config --default`; using `config --config EMPTY`");
    let scratch = ScratchDir::new("empty-config")?;
    let empty = scratch.path().join("empty.conf");
    std::fs::write(&empty, b"")?;
    output(
        Command::new(daemon)
            .args(["config", "--config"])
            .arg(&empty)
            .env_remove("RUST_LOG"),
    )
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

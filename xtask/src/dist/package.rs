//! The `.deb` files, made with Debian's own dpkg-deb from the staging root.
//!
//! Why not cargo-deb: dpkg-deb is part of dpkg, so every Debian machine can already build a
//! package, while cargo-deb is one more crate tree to compile (minutes on two cores) and to keep
//! in step with. What cargo-deb would add is small and is here: stripped binaries, gzipped
//! pages, `md5sums`, `conffiles`, the changelog and copyright files, and Depends from
//! dpkg-shlibdeps (dpkg-dev, installed when missing as the other xtask commands install what
//! they need).
//!
//! Each package gets a root under `target/deb/NAME/` with its files and `DEBIAN/`; the `.deb`
//! files land in `target/deb/`. Time stamps come from `SOURCE_DATE_EPOCH` (else the last
//! commit), so two builds of one commit give the same packages.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, Result, bail};

use super::debian::{self, Meta, Package};
use super::{create_parent, list, output};
use crate::cmd::{ScratchDir, cargo, run_step, workspace_root};

/// The workspace package whose metadata the `.deb` files carry.
const METADATA_FROM: &str = "crio-lite";

/// Version, maintainer, homepage and license from the workspace; architecture from dpkg; the
/// time stamp from `SOURCE_DATE_EPOCH` or the last commit.
pub(crate) fn meta() -> Result<Meta> {
    let json = output(cargo().args(["metadata", "--format-version", "1", "--no-deps"]))?;
    let metadata: serde_json::Value =
        serde_json::from_slice(&json).context("cannot parse cargo metadata")?;
    let package = metadata["packages"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["name"] == METADATA_FROM))
        .with_context(|| format!("cargo metadata lists no package {METADATA_FROM}"))?;
    let text = |key: &str| package[key].as_str().map(str::to_owned);
    let version = text("version").context("no version in cargo metadata")?;
    let repository = text("repository").unwrap_or_default();
    let author = package["authors"][0]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let maintainer = maintainer(
        std::env::var("DEBFULLNAME").ok(),
        std::env::var("DEBEMAIL").ok(),
        &author,
    );
    if !maintainer.contains('<') {
        println!(
            "xtask: warning: the maintainer {maintainer:?} has no e-mail address, which Debian's \
             policy asks for; set DEBEMAIL (and DEBFULLNAME), or give [workspace.package] \
             authors one"
        );
    }
    let architecture =
        String::from_utf8(output(Command::new("dpkg").arg("--print-architecture"))?)?
            .trim()
            .to_owned();
    Ok(Meta {
        version,
        architecture,
        maintainer,
        homepage: text("homepage").unwrap_or(repository),
        license: text("license").unwrap_or_default(),
        epoch: epoch()?,
        first_epoch: git_time(&["log", "--max-parents=0", "--format=%ct"]),
    })
}

/// `DEBFULLNAME <DEBEMAIL>` when set, as Debian's tools do (`DEBEMAIL` alone may hold both),
/// else the workspace's first author.
fn maintainer(full_name: Option<String>, email: Option<String>, author: &str) -> String {
    match (full_name, email) {
        (_, Some(email)) if email.contains('<') => email,
        (Some(name), Some(email)) => format!("{name} <{email}>"),
        (None, Some(email)) => format!("{author} <{email}>"),
        _ => author.to_owned(),
    }
}

fn epoch() -> Result<u64> {
    if let Ok(value) = std::env::var("SOURCE_DATE_EPOCH") {
        return value
            .trim()
            .parse()
            .with_context(|| format!("SOURCE_DATE_EPOCH={value:?} is not a number"));
    }
    Ok(git_time(&["log", "-1", "--format=%ct"]).unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    }))
}

/// The first time stamp git prints with `args` (the earliest of several root commits), if any.
fn git_time(args: &[&str]) -> Option<u64> {
    let out = Command::new("git")
        .args(args)
        .current_dir(workspace_root())
        .output()
        .ok()
        .filter(|out| out.status.success())?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .min()
}

/// Builds every package from the staging root `stage` into `out`, which is emptied first, and
/// returns each package with its `.deb`.
pub(crate) fn build_all(
    stage: &Path,
    out: &Path,
    meta: &Meta,
) -> Result<Vec<(&'static Package, PathBuf)>> {
    let staged: Vec<String> = list(stage)?
        .into_iter()
        .map(|(path, _)| path.to_string_lossy().into_owned())
        .collect();
    let orphans: Vec<&String> = staged
        .iter()
        .filter(|p| debian::owner(p).is_none())
        .collect();
    if !orphans.is_empty() {
        bail!(
            "staged files that no package ships (add them to PACKAGES in \
             xtask/src/dist/debian.rs): {orphans:?}"
        );
    }
    if out.exists() {
        std::fs::remove_dir_all(out).with_context(|| format!("cannot empty {}", out.display()))?;
    }
    let mut debs = Vec::new();
    for package in debian::PACKAGES {
        let files: Vec<&str> = staged
            .iter()
            .filter(|p| debian::owner(p).is_some_and(|o| o.name == package.name))
            .map(String::as_str)
            .collect();
        debs.push((package, build(package, &files, stage, out, meta)?));
    }
    Ok(debs)
}

fn build(
    package: &Package,
    files: &[&str],
    stage: &Path,
    out: &Path,
    meta: &Meta,
) -> Result<PathBuf> {
    let root = out.join(package.name);
    println!("\n==> package {} in {}", package.name, root.display());
    let mut binaries = Vec::new();
    for file in files {
        let from = stage.join(file);
        if file.starts_with("usr/bin/") {
            let to = root.join(file);
            create_parent(&to)?;
            // As dh_strip does for programs: symbols and comments go, the build id stays.
            output(
                Command::new("strip")
                    .args(["--remove-section=.comment", "--remove-section=.note", "-o"])
                    .arg(&to)
                    .arg(&from),
            )?;
            binaries.push(to);
        } else if file.starts_with("usr/share/man/") {
            gzip(&std::fs::read(&from)?, &root.join(format!("{file}.gz")))?;
        } else {
            let to = root.join(file);
            create_parent(&to)?;
            std::fs::copy(&from, &to)
                .with_context(|| format!("cannot copy {} to {}", from.display(), to.display()))?;
        }
    }
    for dir in package.dirs {
        std::fs::create_dir_all(root.join(dir))?;
    }
    let doc = root.join("usr/share/doc").join(package.name);
    write(&doc.join("copyright"), debian::copyright(meta).as_bytes())?;
    gzip(
        debian::changelog(package, meta).as_bytes(),
        &doc.join("changelog.gz"),
    )?;
    normalize_modes(&root, &root)?;

    // Measured before DEBIAN/ exists: it is not installed.
    let installed_kib = installed_kib(&root)?;
    let shlibs = shlibs(&binaries)?;
    let control_dir = root.join("DEBIAN");
    write(
        &control_dir.join("control"),
        debian::control(package, meta, &shlibs, installed_kib).as_bytes(),
    )?;
    let conffiles = debian::conffiles(package);
    if !conffiles.is_empty() {
        write(&control_dir.join("conffiles"), conffiles.as_bytes())?;
    }
    write(&control_dir.join("md5sums"), &md5sums(&root, package)?)?;
    for (name, text) in debian::maintainer_scripts(package) {
        let path = control_dir.join(name);
        write(&path, text.as_bytes())?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
    }
    std::fs::set_permissions(&control_dir, std::fs::Permissions::from_mode(0o755))?;

    let deb = out.join(debian::deb_name(package, meta));
    run_step(
        &format!("dpkg-deb {}", package.name),
        Command::new("dpkg-deb")
            .args(["--root-owner-group", "--build"])
            .arg(&root)
            .arg(&deb)
            .env("SOURCE_DATE_EPOCH", meta.epoch.to_string()),
    )?;
    Ok(deb)
}

fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    create_parent(path)?;
    std::fs::write(path, bytes).with_context(|| format!("cannot write {}", path.display()))
}

/// Writes `bytes` gzipped at `path` without a name or time in the header (`gzip -9n`, as
/// Debian's policy asks for pages and changelogs).
fn gzip(bytes: &[u8], path: &Path) -> Result<()> {
    let plain = path.with_extension("");
    write(&plain, bytes)?;
    output(Command::new("gzip").args(["-9nf"]).arg(&plain))?;
    Ok(())
}

/// Programs 0755, everything else 0644, directories 0755, whatever the umask was.
fn normalize_modes(root: &Path, dir: &Path) -> Result<()> {
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))?;
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            normalize_modes(root, &path)?;
        } else {
            let program = path
                .strip_prefix(root)
                .is_ok_and(|p| p.starts_with("usr/bin"));
            let mode = if program { 0o755 } else { 0o644 };
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))?;
        }
    }
    Ok(())
}

/// The unpacked size as dpkg-gencontrol counts it: each file rounded up to KiB, 1 per directory.
fn installed_kib(dir: &Path) -> Result<u64> {
    let mut kib = 0;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let meta = entry.metadata()?;
        if meta.is_dir() {
            kib += 1 + installed_kib(&entry.path())?;
        } else {
            kib += meta.len().div_ceil(1024);
        }
    }
    Ok(kib)
}

/// dpkg-shlibdeps' Depends for `binaries`: `libc6 (>= 2.34), libgcc-s1 (>= 4.2)` and the like.
fn shlibs(binaries: &[PathBuf]) -> Result<String> {
    if binaries.is_empty() {
        return Ok(String::new());
    }
    // It insists on running in a source tree; an empty debian/control is enough.
    let scratch = ScratchDir::new("shlibdeps")?;
    write(&scratch.path().join("debian/control"), b"")?;
    let mut cmd = Command::new("dpkg-shlibdeps");
    cmd.arg("-O").current_dir(scratch.path());
    for binary in binaries {
        cmd.arg(format!("-e{}", binary.display()));
    }
    let text = String::from_utf8(output(&mut cmd)?)?;
    text.lines()
        .find_map(|l| l.strip_prefix("shlibs:Depends="))
        .map(str::to_owned)
        .with_context(|| format!("dpkg-shlibdeps printed no shlibs:Depends: {text:?}"))
}

/// `DEBIAN/md5sums`: every shipped file but the conffiles (dpkg keeps their sums itself), as
/// `md5sum` prints them, sorted.
fn md5sums(root: &Path, package: &Package) -> Result<Vec<u8>> {
    let mut files: Vec<String> = list(root)?
        .into_iter()
        .map(|(path, _)| path.to_string_lossy().into_owned())
        .filter(|p| !p.starts_with("DEBIAN/") && !package.conffiles.contains(&p.as_str()))
        .collect();
    files.sort();
    output(Command::new("md5sum").args(&files).current_dir(root))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maintainer_as_debian_tools_build_it() {
        let s = |v: &str| Some(v.to_owned());
        let table = [
            (None, None, "ocicni-rs developers"),
            (
                s("Jane Doe"),
                s("jane@example.org"),
                "Jane Doe <jane@example.org>",
            ),
            (
                None,
                s("Jane <jane@example.org>"),
                "Jane <jane@example.org>",
            ),
            (
                None,
                s("ops@example.org"),
                "ocicni-rs developers <ops@example.org>",
            ),
            (s("Jane Doe"), None, "ocicni-rs developers"),
        ];
        for (name, email, want) in table {
            assert_eq!(
                maintainer(name.clone(), email.clone(), "ocicni-rs developers"),
                want,
                "{name:?} {email:?}"
            );
        }
    }

    #[test]
    fn installed_size_counts_kib_and_directories() {
        let scratch = ScratchDir::new("installed-kib").unwrap();
        let dir = scratch.path();
        std::fs::create_dir_all(dir.join("a/b")).unwrap();
        std::fs::write(dir.join("a/one"), [0u8; 1]).unwrap();
        std::fs::write(dir.join("a/b/two"), vec![0u8; 2049]).unwrap();
        std::fs::write(dir.join("empty"), b"").unwrap();
        // a, a/b: 2; one: 1; two: 3; empty: 0
        assert_eq!(installed_kib(dir).unwrap(), 6);
    }
}

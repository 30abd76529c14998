//! `cargo xtask dist --check`: the built `.deb` files as an operator would inspect them, without
//! installing them. dpkg-deb lists their fields, files and conffiles; one extracted copy in a
//! temporary directory runs its binaries (`--version`, the packaged configuration through
//! `crio-lite config`) and has its systemd unit verified by `systemd-analyze verify`; lintian
//! gives Debian's verdict, installed first when missing and running as root.

use std::path::Path;
use std::process::Command;

use anyhow::{Context as _, Result, bail};

use super::debian::{CONFIG_PATH, Meta, POLICY_PATH, Package, UNIT_PATH};
use super::output;
use crate::cmd::{ScratchDir, is_root, on_path};
use crate::packages;

/// What each package must hold for an operator, with its mode: written out here rather than
/// derived from the package table, so a file dropped from the table fails the check.
const EXPECTED: &[(&str, &[(&str, &str)])] = &[
    (
        "crio-lite",
        &[
            ("./usr/bin/crio-lite", "-rwxr-xr-x"),
            ("./usr/lib/systemd/system/crio-lite.service", "-rw-r--r--"),
            ("./etc/crio-lite/crio-lite.conf", "-rw-r--r--"),
            ("./etc/crio-lite/crio-lite.conf.d/", "drwxr-xr-x"),
            ("./etc/crio-lite/policy.json", "-rw-r--r--"),
            ("./usr/share/man/man1/crio-lite.1.gz", "-rw-r--r--"),
            ("./usr/share/man/man1/crio-lite-run.1.gz", "-rw-r--r--"),
            ("./usr/share/man/man1/crio-lite-config.1.gz", "-rw-r--r--"),
            (
                "./usr/share/bash-completion/completions/crio-lite",
                "-rw-r--r--",
            ),
            (
                "./usr/share/zsh/vendor-completions/_crio-lite",
                "-rw-r--r--",
            ),
            (
                "./usr/share/fish/vendor_completions.d/crio-lite.fish",
                "-rw-r--r--",
            ),
            ("./usr/share/doc/crio-lite/copyright", "-rw-r--r--"),
            ("./usr/share/doc/crio-lite/changelog.gz", "-rw-r--r--"),
        ],
    ),
    (
        "ocicni-tools",
        &[
            ("./usr/bin/ocicnitool", "-rwxr-xr-x"),
            ("./usr/share/man/man1/ocicnitool.1.gz", "-rw-r--r--"),
            ("./usr/share/man/man1/ocicnitool-add.1.gz", "-rw-r--r--"),
            (
                "./usr/share/bash-completion/completions/ocicnitool",
                "-rw-r--r--",
            ),
            (
                "./usr/share/zsh/vendor-completions/_ocicnitool",
                "-rw-r--r--",
            ),
            (
                "./usr/share/fish/vendor_completions.d/ocicnitool.fish",
                "-rw-r--r--",
            ),
            ("./usr/share/doc/ocicni-tools/copyright", "-rw-r--r--"),
            ("./usr/share/doc/ocicni-tools/changelog.gz", "-rw-r--r--"),
        ],
    ),
];

pub(crate) fn run(debs: &[(&'static Package, std::path::PathBuf)], meta: &Meta) -> Result<()> {
    for (package, deb) in debs {
        println!("\n==> check {}", deb.display());
        fields(package, deb, meta)?;
        contents(package, deb)?;
        extracted(package, deb, meta)?;
    }
    let paths: Vec<&Path> = debs.iter().map(|(_, deb)| deb.as_path()).collect();
    lintian(&paths)
}

/// `dpkg-deb --field`: name, version, architecture and the run-time dependencies.
fn fields(package: &Package, deb: &Path, meta: &Meta) -> Result<()> {
    let text = String::from_utf8(output(
        Command::new("dpkg-deb").arg("--field").arg(deb).args([
            "Package",
            "Version",
            "Architecture",
            "Depends",
        ]),
    )?)?;
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(": "))
            .unwrap_or_default()
    };
    for (name, want) in [
        ("Package", package.name),
        ("Version", &meta.version),
        ("Architecture", &meta.architecture),
    ] {
        if field(name) != want {
            bail!(
                "{}: {name} is {:?}, not {want:?}",
                deb.display(),
                field(name)
            );
        }
    }
    let depends: Vec<&str> = field("Depends")
        .split(',')
        .map(|d| d.split_whitespace().next().unwrap_or_default())
        .collect();
    for need in package.depends.iter().chain(&["libc6"]) {
        if !depends.contains(need) {
            bail!(
                "{}: Depends {:?} lacks {need}",
                deb.display(),
                field("Depends")
            );
        }
    }
    println!("    fields: {}", text.trim_end().replace('\n', "; "));
    Ok(())
}

/// `dpkg-deb --contents` and `--info conffiles`: the expected files with their modes, every
/// file owned by root, nothing outside /etc and /usr.
fn contents(package: &Package, deb: &Path) -> Result<()> {
    let text = String::from_utf8(output(Command::new("dpkg-deb").arg("--contents").arg(deb))?)?;
    let entries = parse_contents(&text);
    let expected = EXPECTED
        .iter()
        .find(|(name, _)| *name == package.name)
        .map_or(&[][..], |(_, files)| files);
    for (path, mode) in expected {
        match entries.iter().find(|e| e.path == *path) {
            None => bail!("{}: {path} is missing", deb.display()),
            Some(e) if e.mode != *mode => {
                bail!("{}: {path} has mode {}, not {mode}", deb.display(), e.mode)
            }
            Some(_) => {}
        }
    }
    for e in &entries {
        if e.owner != "root/root" {
            bail!("{}: {} is owned by {}", deb.display(), e.path, e.owner);
        }
        if !["./", "./etc/", "./usr/"]
            .iter()
            .any(|top| e.path == *top || e.path.starts_with(top))
        {
            bail!("{}: {} is outside /etc and /usr", deb.display(), e.path);
        }
    }
    let files = entries.iter().filter(|e| !e.path.ends_with('/')).count();
    println!(
        "    contents: {files} files, the {} expected ones with their modes, all root/root",
        expected.len()
    );
    if !package.conffiles.is_empty() {
        let listed = String::from_utf8(output(
            Command::new("dpkg-deb")
                .arg("--info")
                .arg(deb)
                .arg("conffiles"),
        )?)?;
        let want = super::debian::conffiles(package);
        if listed != want {
            bail!("{}: conffiles {listed:?}, not {want:?}", deb.display());
        }
        println!("    conffiles: {}", listed.trim_end());
    }
    Ok(())
}

/// One line of `dpkg-deb --contents` (tar's verbose listing).
struct Entry<'a> {
    mode: &'a str,
    owner: &'a str,
    path: &'a str,
}

fn parse_contents(text: &str) -> Vec<Entry<'_>> {
    text.lines()
        .filter_map(|line| {
            // mode owner size date time path[ -> target]
            let mut rest = line;
            let mut column = || {
                rest = rest.trim_start();
                let end = rest.find(' ').unwrap_or(rest.len());
                let (word, tail) = rest.split_at(end);
                rest = tail;
                word
            };
            let mode = column();
            let owner = column();
            for _ in 0..3 {
                column();
            }
            let path = rest.trim_start();
            let path = path.split(" -> ").next().unwrap_or(path);
            (!path.is_empty()).then_some(Entry { mode, owner, path })
        })
        .collect()
}

/// The package unpacked in a temporary directory (`dpkg-deb --extract`, nothing installed):
/// its binaries run, its configuration is one the daemon accepts, its unit verifies.
fn extracted(package: &Package, deb: &Path, meta: &Meta) -> Result<()> {
    let scratch = ScratchDir::new("deb-check")?;
    let root = scratch.path();
    output(Command::new("dpkg-deb").arg("--extract").arg(deb).arg(root))?;
    for binary in package.binaries {
        let version = String::from_utf8(output(
            Command::new(root.join("usr/bin").join(binary)).arg("--version"),
        )?)?;
        if !version.contains(&meta.version) {
            bail!(
                "{binary} --version says {:?}, not {}",
                version.trim_end(),
                meta.version
            );
        }
        println!("    {binary} --version: {}", version.trim_end());
    }
    if package.conffiles.contains(&CONFIG_PATH) {
        output(
            Command::new(root.join("usr/bin/crio-lite"))
                .args(["config", "--config"])
                .arg(root.join(CONFIG_PATH))
                .env_remove("RUST_LOG"),
        )
        .context("crio-lite rejects the configuration its package ships")?;
        println!("    /{CONFIG_PATH}: accepted by crio-lite config --config");
    }
    if package.conffiles.contains(&POLICY_PATH) {
        // check-config reads the policy and warns (on stderr) when it is missing or broken.
        let checked = Command::new(root.join("usr/bin/crio-lite"))
            .arg("--config")
            .arg(root.join(CONFIG_PATH))
            .arg("--signature-policy")
            .arg(root.join(POLICY_PATH))
            .arg("check-config")
            .env_remove("RUST_LOG")
            .output()
            .context("cannot run crio-lite check-config")?;
        let warned = String::from_utf8_lossy(&checked.stderr);
        if !checked.status.success() || !warned.trim().is_empty() {
            bail!(
                "crio-lite check-config on the shipped policy: {}",
                warned.trim()
            );
        }
        println!("    /{POLICY_PATH}: read by crio-lite check-config, no warning");
    }
    if package.unit.is_some() {
        match verify_unit(root, UNIT_PATH)? {
            Verified::Clean => {
                println!("    systemd-analyze verify /{UNIT_PATH}: clean");
            }
            Verified::Skipped(why) => println!("    systemd-analyze verify: skipped ({why})"),
        }
    }
    Ok(())
}

pub(crate) enum Verified {
    Clean,
    Skipped(&'static str),
}

/// `systemd-analyze verify` of the unit at `unit` (relative to `root`), offline: `root` holds the
/// unit and its programs; the machine's own units (targets the unit orders itself against) are
/// copied beside it and the unit's man pages are looked up in `root`. Anything verify prints is
/// a failure: it reports unknown keys and bad values as warnings with a zero exit status.
pub(crate) fn verify_unit(root: &Path, unit: &str) -> Result<Verified> {
    let Some(analyze) = on_path("systemd-analyze") else {
        return Ok(Verified::Skipped("systemd-analyze is not installed"));
    };
    let Some(system_units) = ["/usr/lib/systemd/system", "/lib/systemd/system"]
        .into_iter()
        .map(Path::new)
        .find(|d| d.join("sysinit.target").exists())
    else {
        return Ok(Verified::Skipped("this machine has no systemd units"));
    };
    let units_dir = root.join("usr/lib/systemd/system");
    std::fs::create_dir_all(&units_dir)?;
    // -n: the unit under test wins over a copy the machine may have.
    let mut copy = Command::new("cp");
    copy.arg("-an").arg(system_units.join(".")).arg(&units_dir);
    output(&mut copy)?;
    for (link, target) in [("bin", "usr/bin"), ("lib", "usr/lib"), ("sbin", "usr/sbin")] {
        if !root.join(link).exists() {
            std::os::unix::fs::symlink(target, root.join(link))?;
        }
    }
    // ExecReload's /bin/kill comes from procps on the node; verify only checks it is executable.
    let kill = root.join("usr/bin/kill");
    if !kill.exists() {
        write_program(&kill, "#!/bin/sh\n")?;
    }
    let out = Command::new(analyze)
        .arg("verify")
        .arg(format!("--root={}", root.display()))
        .arg(root.join(unit))
        .env("MANPATH", root.join("usr/share/man"))
        .output()
        .context("cannot run systemd-analyze verify")?;
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if !out.status.success() || !said.trim().is_empty() {
        bail!(
            "systemd-analyze verify {unit} ({}):\n{}",
            out.status,
            said.trim_end()
        );
    }
    Ok(Verified::Clean)
}

fn write_program(path: &Path, text: &str) -> Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    super::create_parent(path)?;
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))?;
    Ok(())
}

/// lintian on every `.deb`: its tags are printed, an error fails the check. Installed with
/// apt-get when missing and running as root; skipped, saying why, when it cannot be.
fn lintian(debs: &[&Path]) -> Result<()> {
    if on_path("lintian").is_none() {
        if !is_root() {
            println!("\nxtask: lintian is not installed and this is not root: lintian skipped");
            return Ok(());
        }
        if let Err(err) = packages::ensure(packages::LINTIAN_PACKAGES) {
            println!("\nxtask: lintian could not be installed ({err:#}): lintian skipped");
            return Ok(());
        }
    }
    println!("\n==> lintian (every tag, pedantic and informational ones too)");
    let out = Command::new("lintian")
        .args([
            "--fail-on",
            "error",
            "--display-info",
            "--pedantic",
            "--tag-display-limit",
            "0",
        ])
        .args(debs)
        .output()
        .context("cannot run lintian")?;
    let tags = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    for line in tags.lines().chain(stderr.lines()) {
        println!("    {line}");
    }
    let count = |severity: &str| {
        tags.lines()
            .filter(|l| l.starts_with(&format!("{severity}: ")))
            .count()
    };
    println!(
        "    verdict: {} errors, {} warnings, {} info, {} pedantic",
        count("E"),
        count("W"),
        count("I"),
        count("P")
    );
    if !out.status.success() {
        bail!("lintian failed ({}): see its tags above", out.status);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::CONTRIB_UNIT;
    use super::*;
    use crate::cmd::workspace_root;

    fn unit_text() -> String {
        std::fs::read_to_string(workspace_root().join(CONTRIB_UNIT)).unwrap()
    }

    /// A root with the contrib unit, a stand-in daemon and its man page.
    fn unit_root(unit: &str) -> ScratchDir {
        let scratch = ScratchDir::new("unit").unwrap();
        let root = scratch.path();
        let path = root.join(UNIT_PATH);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, unit).unwrap();
        write_program(&root.join("usr/bin/crio-lite"), "#!/bin/sh\n").unwrap();
        let man = root.join("usr/share/man/man1/crio-lite.1");
        std::fs::create_dir_all(man.parent().unwrap()).unwrap();
        std::fs::write(man, ".TH crio-lite 1\n").unwrap();
        scratch
    }

    #[test]
    fn unit_is_type_notify_for_the_packaged_binary() {
        let text = unit_text();
        let service: Vec<&str> = text
            .lines()
            .skip_while(|l| *l != "[Service]")
            .take_while(|l| *l != "[Install]")
            .filter(|l| !l.starts_with('#'))
            .collect();
        for line in [
            "Type=notify",
            "NotifyAccess=main",
            "ExecStart=/usr/bin/crio-lite run",
            "ExecReload=/bin/kill -HUP $MAINPID",
            "Restart=on-failure",
            "KillMode=mixed",
            "WatchdogSec=60s",
        ] {
            assert!(service.contains(&line), "{CONTRIB_UNIT} lacks {line}");
        }
        assert!(text.contains("\n[Install]\nWantedBy=multi-user.target\n"));
    }

    #[test]
    fn unit_passes_systemd_analyze_verify() {
        let scratch = unit_root(&unit_text());
        match verify_unit(scratch.path(), UNIT_PATH).unwrap() {
            Verified::Clean => {}
            Verified::Skipped(why) => eprintln!("systemd-analyze verify not run: {why}"),
        }
    }

    #[test]
    fn verify_reports_what_systemd_would_ignore() {
        let broken = unit_text().replace("Type=notify", "Type=notifyy");
        let scratch = unit_root(&broken);
        match verify_unit(scratch.path(), UNIT_PATH) {
            Err(err) => assert!(format!("{err:#}").contains("notifyy"), "{err:#}"),
            Ok(Verified::Skipped(why)) => eprintln!("systemd-analyze verify not run: {why}"),
            Ok(Verified::Clean) => panic!("a unit with Type=notifyy passed"),
        }
    }

    #[test]
    fn contents_lines_parse() {
        let text = "drwxr-xr-x root/root         0 2026-01-01 00:00 ./\n\
                    -rwxr-xr-x root/root   4825032 2026-01-01 00:00 ./usr/bin/crio-lite\n\
                    lrwxrwxrwx root/root         0 2026-01-01 00:00 ./usr/bin/x -> crio-lite\n";
        let entries = parse_contents(text);
        let paths: Vec<(&str, &str, &str)> =
            entries.iter().map(|e| (e.mode, e.owner, e.path)).collect();
        assert_eq!(
            paths,
            [
                ("drwxr-xr-x", "root/root", "./"),
                ("-rwxr-xr-x", "root/root", "./usr/bin/crio-lite"),
                ("lrwxrwxrwx", "root/root", "./usr/bin/x"),
            ]
        );
    }

    #[test]
    fn every_package_has_expectations() {
        for package in super::super::debian::PACKAGES {
            assert!(
                EXPECTED.iter().any(|(name, _)| *name == package.name),
                "{}",
                package.name
            );
        }
    }
}

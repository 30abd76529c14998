//! What the Debian packages hold and the texts of their control area, as plain data and pure
//! functions: which staged file goes to which package, `DEBIAN/control`, the changelog, the
//! copyright file and the maintainer scripts. `package.rs` writes them; nothing here touches the
//! file system, so the unit tests below cover it without a build.

use std::fmt::Write as _;

/// One binary package.
pub(crate) struct Package {
    pub(crate) name: &'static str,
    /// The binaries it ships; their pages and completions come with them.
    pub(crate) binaries: &'static [&'static str],
    /// Other staged files it owns, by path relative to the staging root (a trailing `/` owns a
    /// whole directory).
    pub(crate) files: &'static [&'static str],
    /// Empty directories it creates (drop-in directories).
    pub(crate) dirs: &'static [&'static str],
    /// Files under `/etc` that dpkg keeps when the administrator changed them.
    pub(crate) conffiles: &'static [&'static str],
    /// Run-time needs beyond the shared libraries (dpkg-shlibdeps finds those).
    pub(crate) depends: &'static [&'static str],
    pub(crate) recommends: &'static [&'static str],
    pub(crate) suggests: &'static [&'static str],
    pub(crate) section: &'static str,
    /// The synopsis: lower-case, no article, no trailing period, as Debian's policy asks.
    pub(crate) synopsis: &'static str,
    /// The extended description, one paragraph per item, wrapped when written.
    pub(crate) description: &'static [&'static str],
    /// The systemd unit the maintainer scripts reload, restart on upgrade and stop on removal.
    pub(crate) unit: Option<&'static str>,
}

pub(crate) const UNIT_PATH: &str = "usr/lib/systemd/system/crio-lite.service";
pub(crate) const CONFIG_PATH: &str = "etc/crio-lite/crio-lite.conf";
pub(crate) const CONFIG_DROP_INS: &str = "etc/crio-lite/crio-lite.conf.d";
/// The signature policy the package ships: without one crio-lite refuses every pull, as CRI-O
/// does. It accepts every image, as Debian's containers-common ships
/// `/etc/containers/policy.json` (not shipped here: that file is containers-common's), so the
/// package pulls out of the box and the choice is a file the operator reads and edits; a
/// conffile, so dpkg keeps the operator's edits across upgrades.
pub(crate) const POLICY_PATH: &str = "etc/crio-lite/policy.json";
/// What [`POLICY_PATH`] holds: image-store's `Policy::ACCEPT_ANYTHING` (xtask depends on no
/// workspace crate; `dist --check` has the shipped crio-lite accept it).
pub(crate) const POLICY: &str = "{\"default\": [{\"type\": \"insecureAcceptAnything\"}]}\n";

/// Two packages: an operator of CRI-O (or anything else on ocicni) wants ocicnitool without a
/// second CRI daemon, and crio-lite runs without ocicnitool.
pub(crate) const PACKAGES: &[Package] = &[
    Package {
        name: "crio-lite",
        binaries: &["crio-lite"],
        files: &[UNIT_PATH, "etc/crio-lite/"],
        dirs: &[CONFIG_DROP_INS],
        conffiles: &[CONFIG_PATH, POLICY_PATH],
        // The built-in default network is bridge + host-local + portmap (ocicni's builtin.rs);
        // bridge's ipMasq and portmap call iptables. crio-lite itself pins namespaces in-process
        // and never runs `ip`, so iproute2 is not a dependency (the tests use it, not the daemon).
        depends: &["containernetworking-plugins", "iptables"],
        recommends: &[],
        suggests: &["ocicni-tools"],
        section: "admin",
        synopsis: "thin CRI runtime for pod sandboxes and their networks",
        description: &[
            "crio-lite serves the Kubernetes Container Runtime Interface (runtime.v1) on a unix \
             socket for pod sandboxes: it pins a network namespace per pod and attaches it to \
             CNI networks through ocicni, as CRI-O does for a pod's network, without running \
             containers. It also serves CRI-O's HTTP status API on the same socket.",
            "The package installs the daemon, a systemd unit (not enabled), the default \
             configuration in /etc/crio-lite/crio-lite.conf with a drop-in directory beside it, \
             a signature policy in /etc/crio-lite/policy.json that accepts every image (edit it \
             to restrict which images may be pulled), manual pages and shell completions.",
        ],
        unit: Some("crio-lite.service"),
    },
    Package {
        name: "ocicni-tools",
        binaries: &["ocicnitool"],
        files: &[],
        dirs: &[],
        conffiles: &[],
        depends: &[],
        // It runs CNI plugins, but often from /opt/cni/bin rather than Debian's.
        recommends: &["containernetworking-plugins"],
        suggests: &[],
        section: "net",
        synopsis: "attach network namespaces to CNI networks from a shell",
        description: &[
            "ocicnitool adds, checks, deletes and garbage-collects a pod's CNI attachments, and \
             lists the configured networks with a verdict per file, as a container runtime does \
             through ocicni. It shares ocicni's per-pod locks with crio-lite, so it is safe to \
             use beside a running runtime.",
        ],
        unit: None,
    },
];

/// What the packages take from the workspace and the build machine.
pub(crate) struct Meta {
    pub(crate) version: String,
    pub(crate) architecture: String,
    pub(crate) maintainer: String,
    pub(crate) homepage: String,
    pub(crate) license: String,
    /// Seconds since the epoch: the changelog's date and the files' time stamps.
    pub(crate) epoch: u64,
    /// When the work began (the first commit), in seconds since the epoch, if known.
    pub(crate) first_epoch: Option<u64>,
}

/// The package that owns `path` (relative to the staging root), if any.
pub(crate) fn owner(path: &str) -> Option<&'static Package> {
    PACKAGES.iter().find(|p| owns(p, path))
}

fn owns(package: &Package, path: &str) -> bool {
    if package.files.iter().any(|f| {
        f.strip_suffix('/').map_or(path == *f, |dir| {
            path.starts_with(dir) && path[dir.len()..].starts_with('/')
        })
    }) {
        return true;
    }
    let name = path.rsplit('/').next().unwrap_or(path);
    // bash: NAME, zsh: _NAME, fish: NAME.fish, pages: NAME.1 and NAME-COMMAND.1
    let stem = name.strip_prefix('_').unwrap_or(name);
    let stem = stem
        .strip_suffix(".fish")
        .or_else(|| stem.strip_suffix(".1"))
        .unwrap_or(stem);
    package.binaries.iter().any(|bin| {
        stem == *bin
            || (path.starts_with("usr/share/man/")
                && stem
                    .strip_prefix(bin)
                    .is_some_and(|rest| rest.starts_with('-')))
    })
}

/// `DEBIAN/control`. `shlibs` is dpkg-shlibdeps' answer (libc6 and friends) and
/// `installed_kib` the unpacked size, both measured by the caller.
pub(crate) fn control(package: &Package, meta: &Meta, shlibs: &str, installed_kib: u64) -> String {
    let mut depends: Vec<&str> = shlibs
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .collect();
    depends.extend(package.depends);
    let mut text = String::new();
    let mut field = |name: &str, value: &str| {
        if !value.is_empty() {
            let _ = writeln!(text, "{name}: {value}");
        }
    };
    field("Package", package.name);
    field("Version", &meta.version);
    field("Architecture", &meta.architecture);
    field("Maintainer", &meta.maintainer);
    field("Installed-Size", &installed_kib.to_string());
    field("Depends", &depends.join(", "));
    field("Recommends", &package.recommends.join(", "));
    field("Suggests", &package.suggests.join(", "));
    field("Section", package.section);
    field("Priority", "optional");
    field("Homepage", &meta.homepage);
    field("Description", package.synopsis);
    for (i, paragraph) in package.description.iter().enumerate() {
        if i > 0 {
            text.push_str(" .\n");
        }
        for line in wrap(paragraph, 78) {
            let _ = writeln!(text, " {line}");
        }
    }
    text
}

/// `DEBIAN/conffiles`: absolute paths, one a line.
pub(crate) fn conffiles(package: &Package) -> String {
    let mut text = String::new();
    for file in package.conffiles {
        let _ = writeln!(text, "/{file}");
    }
    text
}

/// `usr/share/doc/PACKAGE/changelog` (gzipped by the caller). The version has no Debian
/// revision, so the package is native and this file is its Debian changelog: one entry for the
/// build, pointing at the project's own CHANGELOG.md.
pub(crate) fn changelog(package: &Package, meta: &Meta) -> String {
    format!(
        "{name} ({version}) unstable; urgency=medium\n\
         \n\
         \x20 * Built by `cargo xtask dist` from ocicni-rs {version}. The changes are listed in\n\
         \x20   CHANGELOG.md at {homepage}.\n\
         \n\
         \x20-- {maintainer}  {date}\n",
        name = package.name,
        version = meta.version,
        homepage = meta.homepage,
        maintainer = meta.maintainer,
        date = rfc2822(meta.epoch),
    )
}

/// `usr/share/doc/PACKAGE/copyright` in Debian's machine-readable format.
pub(crate) fn copyright(meta: &Meta) -> String {
    let mut text = format!(
        "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n\
         Upstream-Name: ocicni-rs\n\
         Source: {homepage}\n\
         \n\
         Files: *\n\
         Copyright: {years} ocicni-rs developers\n\
         License: {license}\n",
        homepage = meta.homepage,
        years = copyright_years(meta),
        license = meta.license,
    );
    if meta.license == "Apache-2.0" {
        text.push_str(
            " On Debian systems, the full text of the Apache License, Version 2.0 is in\n \
             /usr/share/common-licenses/Apache-2.0.\n",
        );
    }
    text
}

/// `2025-2026`, or `2026` when the work began the year it was built (or that is unknown).
fn copyright_years(meta: &Meta) -> String {
    let year = |epoch: u64| civil_date(epoch / 86_400).0;
    let last = year(meta.epoch);
    match meta.first_epoch.map(year) {
        Some(first) if first < last => format!("{first}-{last}"),
        _ => last.to_string(),
    }
}

/// `DEBIAN/postinst`, `prerm` and `postrm` for a package with a systemd unit, as file name and
/// text. The unit is not enabled: the operator starts the runtime once the node's CNI
/// configuration and kubelet are ready. An upgrade restarts a running daemon, which is safe
/// because sandboxes outlive it.
pub(crate) fn maintainer_scripts(package: &Package) -> Vec<(&'static str, String)> {
    let Some(unit) = package.unit else {
        return Vec::new();
    };
    let reload = "    systemctl --system daemon-reload >/dev/null || true\n";
    vec![
        (
            "postinst",
            format!(
                "#!/bin/sh\nset -e\n\
                 if [ \"$1\" = configure ] && [ -d /run/systemd/system ]; then\n\
                 {reload}\
                 \x20   if [ -n \"$2\" ]; then\n\
                 \x20       deb-systemd-invoke try-restart {unit} >/dev/null || true\n\
                 \x20   fi\n\
                 fi\n"
            ),
        ),
        (
            "prerm",
            format!(
                "#!/bin/sh\nset -e\n\
                 if [ \"$1\" = remove ] && [ -d /run/systemd/system ]; then\n\
                 \x20   deb-systemd-invoke stop {unit} >/dev/null || true\n\
                 fi\n"
            ),
        ),
        (
            "postrm",
            format!(
                "#!/bin/sh\nset -e\n\
                 if [ -d /run/systemd/system ]; then\n\
                 {reload}\
                 fi\n"
            ),
        ),
    ]
}

/// The `.deb` file name Debian's tools expect.
pub(crate) fn deb_name(package: &Package, meta: &Meta) -> String {
    format!(
        "{}_{}_{}.deb",
        package.name, meta.version, meta.architecture
    )
}

/// Greedy word wrap at `width` columns.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// `Thu, 01 Jan 1970 00:00:00 +0000` for a time in seconds since the epoch, in UTC.
pub(crate) fn rfc2822(epoch: u64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let days = epoch / 86_400;
    let secs = epoch % 86_400;
    let (year, month, day) = civil_date(days);
    format!(
        "{}, {day:02} {} {year} {:02}:{:02}:{:02} +0000",
        DAYS[(days % 7) as usize],
        MONTHS[(month - 1) as usize],
        secs / 3600,
        secs / 60 % 60,
        secs % 60,
    )
}

/// The proleptic Gregorian (year, month, day) of a day count since 1970-01-01, counting in
/// 400-year eras that start on March 1st, so the leap day ends each year.
fn civil_date(days: u64) -> (u64, u64, u64) {
    // 1970-01-01 is day 719_468 counted from 0000-03-01.
    let days = days + 719_468;
    let era = days / 146_097;
    let day_of_era = days % 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> Meta {
        Meta {
            version: "0.1.0".into(),
            architecture: "amd64".into(),
            maintainer: "Jane Doe <jane@example.org>".into(),
            homepage: "https://github.com/ocicni-rs/ocicni-rs".into(),
            license: "Apache-2.0".into(),
            epoch: 0,
            first_epoch: None,
        }
    }

    fn package(name: &str) -> &'static Package {
        PACKAGES.iter().find(|p| p.name == name).unwrap()
    }

    #[test]
    fn every_staged_file_has_one_package() {
        let table = [
            ("usr/bin/crio-lite", Some("crio-lite")),
            ("usr/share/man/man1/crio-lite.1", Some("crio-lite")),
            (
                "usr/share/man/man1/crio-lite-status-info.1",
                Some("crio-lite"),
            ),
            (
                "usr/share/bash-completion/completions/crio-lite",
                Some("crio-lite"),
            ),
            (
                "usr/share/zsh/vendor-completions/_crio-lite",
                Some("crio-lite"),
            ),
            (
                "usr/share/fish/vendor_completions.d/crio-lite.fish",
                Some("crio-lite"),
            ),
            (UNIT_PATH, Some("crio-lite")),
            (CONFIG_PATH, Some("crio-lite")),
            (
                "etc/crio-lite/crio-lite.conf.d/10-site.conf",
                Some("crio-lite"),
            ),
            ("usr/bin/ocicnitool", Some("ocicni-tools")),
            ("usr/share/man/man1/ocicnitool-add.1", Some("ocicni-tools")),
            (
                "usr/share/zsh/vendor-completions/_ocicnitool",
                Some("ocicni-tools"),
            ),
            // a new binary or a stray file belongs to nobody: the build stops on it
            ("usr/bin/crio-lite-helper", None),
            ("etc/crio-lite.conf", None),
            ("etc/crio-liteish/x", None),
            ("usr/share/man/man1/ocicnitoolbox.1", None),
        ];
        for (path, want) in table {
            assert_eq!(owner(path).map(|p| p.name), want, "{path}");
        }
    }

    #[test]
    fn control_file_of_crio_lite() {
        let text = control(
            package("crio-lite"),
            &meta(),
            "libc6 (>= 2.34), libgcc-s1 (>= 4.2)",
            5120,
        );
        assert_eq!(
            text,
            "Package: crio-lite
Version: 0.1.0
Architecture: amd64
Maintainer: Jane Doe <jane@example.org>
Installed-Size: 5120
Depends: libc6 (>= 2.34), libgcc-s1 (>= 4.2), containernetworking-plugins, iptables
Suggests: ocicni-tools
Section: admin
Priority: optional
Homepage: https://github.com/ocicni-rs/ocicni-rs
Description: thin CRI runtime for pod sandboxes and their networks
 crio-lite serves the Kubernetes Container Runtime Interface (runtime.v1) on a
 unix socket for pod sandboxes: it pins a network namespace per pod and
 attaches it to CNI networks through ocicni, as CRI-O does for a pod's network,
 without running containers. It also serves CRI-O's HTTP status API on the same
 socket.
 .
 The package installs the daemon, a systemd unit (not enabled), the default
 configuration in /etc/crio-lite/crio-lite.conf with a drop-in directory beside
 it, a signature policy in /etc/crio-lite/policy.json that accepts every image
 (edit it to restrict which images may be pulled), manual pages and shell
 completions.
"
        );
    }

    #[test]
    fn control_file_leaves_out_empty_fields() {
        let text = control(package("ocicni-tools"), &meta(), "", 3000);
        assert!(!text.contains("Depends:"), "{text}");
        assert!(!text.contains("Suggests:"), "{text}");
        assert!(text.contains("Recommends: containernetworking-plugins\n"));
        assert!(text.contains("Section: net\n"));
    }

    #[test]
    fn synopses_follow_debian_policy() {
        for p in PACKAGES {
            let s = p.synopsis;
            assert!(s.len() < 80, "{}: too long", p.name);
            assert!(!s.ends_with('.'), "{}", p.name);
            assert!(!s.starts_with(p.name), "{}: starts with the name", p.name);
            assert!(s.starts_with(|c: char| c.is_lowercase()), "{}", p.name);
            for line in control(p, &meta(), "", 1).lines() {
                assert!(line.len() <= 80, "{line}");
            }
        }
    }

    #[test]
    fn conffiles_are_absolute() {
        assert_eq!(
            conffiles(package("crio-lite")),
            "/etc/crio-lite/crio-lite.conf\n/etc/crio-lite/policy.json\n"
        );
        assert_eq!(conffiles(package("ocicni-tools")), "");
    }

    #[test]
    fn changelog_entry_parses_as_debian_changelog() {
        let text = changelog(package("crio-lite"), &meta());
        let mut lines = text.lines();
        assert_eq!(
            lines.next(),
            Some("crio-lite (0.1.0) unstable; urgency=medium")
        );
        assert_eq!(
            text.lines().last(),
            Some(" -- Jane Doe <jane@example.org>  Thu, 01 Jan 1970 00:00:00 +0000")
        );
        assert!(text.contains("\n  * Built by"), "{text}");
    }

    #[test]
    fn copyright_points_at_the_common_license() {
        let text = copyright(&meta());
        assert!(text.starts_with("Format: https://www.debian.org/doc/packaging-manuals/"));
        assert!(
            text.contains("Copyright: 1970 ocicni-rs developers\n"),
            "{text}"
        );
        assert!(text.contains("License: Apache-2.0\n"));
        let years = Meta {
            first_epoch: Some(951_782_400),
            epoch: 1_709_251_199,
            ..meta()
        };
        assert!(copyright(&years).contains("Copyright: 2000-2024 ocicni-rs developers\n"));
        assert!(text.contains("/usr/share/common-licenses/Apache-2.0"));
    }

    #[test]
    fn only_the_daemon_has_maintainer_scripts() {
        let scripts = maintainer_scripts(package("crio-lite"));
        let names: Vec<&str> = scripts.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["postinst", "prerm", "postrm"]);
        for (_, text) in &scripts {
            assert!(text.starts_with("#!/bin/sh\nset -e\n"));
            // never enables or starts the daemon on a fresh install
            assert!(!text.contains("enable"), "{text}");
            assert!(!text.contains(" start "), "{text}");
        }
        assert!(maintainer_scripts(package("ocicni-tools")).is_empty());
    }

    #[test]
    fn deb_file_name() {
        assert_eq!(
            deb_name(package("ocicni-tools"), &meta()),
            "ocicni-tools_0.1.0_amd64.deb"
        );
    }

    #[test]
    fn dates_in_rfc2822() {
        let table = [
            (0, "Thu, 01 Jan 1970 00:00:00 +0000"),
            (951_782_400, "Tue, 29 Feb 2000 00:00:00 +0000"),
            (1_709_251_199, "Thu, 29 Feb 2024 23:59:59 +0000"),
            (4_107_542_400, "Mon, 01 Mar 2100 00:00:00 +0000"),
        ];
        for (epoch, want) in table {
            assert_eq!(rfc2822(epoch), want, "{epoch}");
        }
    }

    #[test]
    fn wrap_keeps_words_whole() {
        assert_eq!(wrap("aa bb cc", 5), ["aa bb", "cc"]);
        assert_eq!(wrap("", 5), Vec::<String>::new());
    }
}

//! Resolving `user[:group]` against the root file system's `/etc/passwd` and `/etc/group`.
//!
//! The files belong to the image, so they are read as hostile: at most [`MAX_ID_FILE`] bytes, only
//! regular files, and never through a symbolic link (`/etc` itself included), so a link cannot
//! point the lookup at the host's files.

use std::path::{Path, PathBuf};

use safe_file::Symlinks;

use crate::error::{Error, Result};

/// The most read of `/etc/passwd` or `/etc/group`.
pub const MAX_ID_FILE: u64 = 4 << 20;

/// A user as the spec's `process.user` wants it, and the home directory when passwd gave one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResolvedUser {
    /// The user id.
    pub uid: u32,
    /// The primary group id.
    pub gid: u32,
    /// Groups `/etc/group` lists the user in (not the primary group).
    pub additional_gids: Vec<u32>,
    /// The home directory from `/etc/passwd`.
    pub home: Option<String>,
}

struct PasswdEntry {
    name: String,
    uid: u32,
    gid: u32,
    home: String,
}

struct GroupEntry {
    name: String,
    gid: u32,
    members: Vec<String>,
}

/// Resolves `spec` (`uid`, `uid:gid`, `name`, `name:group`, mixed) for the container `id` whose
/// root file system is `rootfs`.
///
/// A numeric uid missing from passwd is fine (gid 0 then, as Docker does); a name that is missing
/// is an error. Missing passwd or group files count as empty.
///
/// # Errors
///
/// [`Error::UnknownUser`] for a name that is not there; [`Error::File`] when a file is a link, not
/// a regular file, too large or unreadable; [`Error::InvalidConfig`] for an empty user.
pub fn resolve(id: &str, rootfs: &Path, spec: &str) -> Result<ResolvedUser> {
    let (user, group) = match spec.split_once(':') {
        Some((u, g)) => (u, Some(g)),
        None => (spec, None),
    };
    if user.is_empty() || group.is_some_and(str::is_empty) {
        return Err(Error::config(
            id,
            format!("user {spec:?}: empty user or group"),
        ));
    }
    let passwd_path = rootfs.join("etc/passwd");
    let passwd = parse_passwd(&read_etc(id, rootfs, "passwd")?);
    let entry = match numeric_id(id, spec, "uid", user)? {
        Some(uid) => passwd.into_iter().find(|e| e.uid == uid).map_or(
            PasswdEntry {
                name: String::new(),
                uid,
                gid: 0,
                home: String::new(),
            },
            |e| e,
        ),
        None => passwd
            .into_iter()
            .find(|e| e.name == user)
            .ok_or_else(|| Error::UnknownUser {
                container: id.to_owned(),
                what: "user",
                name: user.to_owned(),
                file: passwd_path,
            })?,
    };
    let groups = parse_group(&read_etc(id, rootfs, "group")?);
    let gid = match group {
        None => entry.gid,
        Some(g) => match numeric_id(id, spec, "gid", g)? {
            Some(gid) => gid,
            None => {
                groups
                    .iter()
                    .find(|e| e.name == g)
                    .ok_or_else(|| Error::UnknownUser {
                        container: id.to_owned(),
                        what: "group",
                        name: g.to_owned(),
                        file: rootfs.join("etc/group"),
                    })?
                    .gid
            }
        },
    };
    let mut additional_gids: Vec<u32> = if entry.name.is_empty() {
        Vec::new()
    } else {
        groups
            .iter()
            .filter(|g| g.gid != gid && g.members.contains(&entry.name))
            .map(|g| g.gid)
            .collect()
    };
    additional_gids.dedup();
    // A name passwd maps to an id runc cannot take is refused like the number itself.
    check_id_range(id, spec, "uid", entry.uid)?;
    check_id_range(id, spec, "gid", gid)?;
    Ok(ResolvedUser {
        uid: entry.uid,
        gid,
        additional_gids,
        home: (!entry.home.is_empty()).then_some(entry.home),
    })
}

/// The largest uid or gid taken: runc refuses larger ones, and containerd keeps to the same
/// range since CVE-2024-40635.
pub const MAX_ID: u32 = i32::MAX as u32;

/// `part` of the user `spec` as an id when it is all digits (`None` for a name). A number is
/// never looked up as a name: an image's passwd could map "4294967296" to uid 0 while kubelet's
/// runAsNonRoot check saw a non-zero number (CVE-2026-46680).
fn numeric_id(id: &str, spec: &str, what: &str, part: &str) -> Result<Option<u32>> {
    if !part.bytes().all(|b| b.is_ascii_digit()) {
        return Ok(None);
    }
    match part.parse::<u32>() {
        Ok(n) => check_id_range(id, spec, what, n).map(|()| Some(n)),
        Err(_) => Err(Error::config(
            id,
            format!("user {spec:?}: {what} {part} is not an id from 0 to {MAX_ID}"),
        )),
    }
}

fn check_id_range(id: &str, spec: &str, what: &str, n: u32) -> Result<()> {
    if n > MAX_ID {
        return Err(Error::config(
            id,
            format!("user {spec:?}: {what} {n} is not an id from 0 to {MAX_ID}"),
        ));
    }
    Ok(())
}

/// `rootfs/etc/<name>`, or nothing when it does not exist; `/etc` must be a real directory.
fn read_etc(id: &str, rootfs: &Path, name: &str) -> Result<String> {
    let etc = rootfs.join("etc");
    match std::fs::symlink_metadata(&etc) {
        Ok(meta) if meta.file_type().is_symlink() => {
            return Err(Error::file(
                id,
                safe_file::Error::NotRegular {
                    path: etc,
                    kind: safe_file::FileKind::Symlink,
                },
            ));
        }
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(String::new()),
        Err(e) => return Err(Error::io(id, "inspect", etc, e)),
    }
    let path: PathBuf = etc.join(name);
    match safe_file::read_regular(&path, MAX_ID_FILE, Symlinks::Refuse) {
        Ok(bytes) => Ok(String::from_utf8_lossy(&bytes).into_owned()),
        Err(e) if e.is_not_found() => Ok(String::new()),
        Err(e) => Err(Error::file(id, e)),
    }
}

fn parse_passwd(text: &str) -> Vec<PasswdEntry> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|line| {
            let f: Vec<&str> = line.split(':').collect();
            if f.len() < 7 {
                return None;
            }
            Some(PasswdEntry {
                name: f[0].to_owned(),
                uid: f[2].parse().ok()?,
                gid: f[3].parse().ok()?,
                home: f[5].to_owned(),
            })
        })
        .collect()
}

fn parse_group(text: &str) -> Vec<GroupEntry> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|line| {
            let f: Vec<&str> = line.split(':').collect();
            if f.len() < 4 {
                return None;
            }
            Some(GroupEntry {
                name: f[0].to_owned(),
                gid: f[2].parse().ok()?,
                members: f[3]
                    .split(',')
                    .filter(|m| !m.is_empty())
                    .map(str::to_owned)
                    .collect(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const PASSWD: &str = "root:x:0:0:root:/root:/bin/sh\n\
        # a comment\n\
        broken line\n\
        www:x:33:33:www:/var/www:/bin/false\n\
        app:x:1000:1000::/home/app:/bin/sh\n";
    const GROUP: &str = "root:x:0:\nwww:x:33:\napp:x:1000:\naudio:x:29:app,www\nvideo:x:44:app\n";

    fn rootfs() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("etc")).unwrap();
        std::fs::write(dir.path().join("etc/passwd"), PASSWD).unwrap();
        std::fs::write(dir.path().join("etc/group"), GROUP).unwrap();
        dir
    }

    #[test]
    fn resolves_users_and_groups() {
        let root = rootfs();
        // (spec, uid, gid, additional gids, home)
        type Case<'a> = (&'a str, u32, u32, &'a [u32], Option<&'a str>);
        let cases: &[Case<'_>] = &[
            ("0", 0, 0, &[], Some("/root")),
            ("root", 0, 0, &[], Some("/root")),
            ("app", 1000, 1000, &[29, 44], Some("/home/app")),
            ("1000", 1000, 1000, &[29, 44], Some("/home/app")),
            ("app:audio", 1000, 29, &[44], Some("/home/app")),
            ("www:1234", 33, 1234, &[29], Some("/var/www")),
            // a uid passwd does not know: gid 0, no groups, no home
            ("4242", 4242, 0, &[], None),
            ("4242:44", 4242, 44, &[], None),
        ];
        for &(spec, uid, gid, extra, home) in cases {
            let got = resolve("c1", root.path(), spec).unwrap();
            assert_eq!(
                got,
                ResolvedUser {
                    uid,
                    gid,
                    additional_gids: extra.to_vec(),
                    home: home.map(str::to_owned),
                },
                "{spec}"
            );
        }
    }

    #[test]
    fn unknown_names_and_empty_parts_are_errors_naming_the_container() {
        let root = rootfs();
        for (spec, want) in [
            ("nobody", "container c1: user \"nobody\" not found in"),
            (
                "app:nogroup",
                "container c1: group \"nogroup\" not found in",
            ),
            (":0", "container c1: user \":0\": empty user or group"),
            ("0:", "container c1: user \"0:\": empty user or group"),
        ] {
            let err = resolve("c1", root.path(), spec).unwrap_err().to_string();
            assert!(err.starts_with(want), "{spec}: {err}");
        }
    }

    #[test]
    fn a_number_is_an_id_in_runcs_range_never_a_name() {
        // CVE-2024-40635 and CVE-2026-46680 (containerd): a numeric user that is no 32-bit id must
        // not reach a passwd lookup by name, where an image can map it to uid 0. kubelet's
        // runAsNonRoot sees the number and lets it through.
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("etc")).unwrap();
        std::fs::write(
            root.path().join("etc/passwd"),
            "4294967296:x:0:0::/root:/bin/sh\n2147483648:x:0:0::/root:/bin/sh\n\
             big:x:4294967295:0::/:/bin/sh\n",
        )
        .unwrap();
        std::fs::write(root.path().join("etc/group"), "4294967296:x:0:\n").unwrap();
        for (spec, want) in [
            (
                "4294967296",
                "container c1: user \"4294967296\": uid 4294967296 is not",
            ),
            (
                "2147483648",
                "container c1: user \"2147483648\": uid 2147483648 is not",
            ),
            (
                "99999999999999999999",
                "container c1: user \"99999999999999999999\": uid",
            ),
            (
                "1000:4294967296",
                "container c1: user \"1000:4294967296\": gid 4294967296",
            ),
            ("big", "container c1: user \"big\": uid 4294967295 is not"),
        ] {
            let err = resolve("c1", root.path(), spec).unwrap_err().to_string();
            assert!(err.starts_with(want), "{spec}: {err}");
        }
        assert_eq!(
            resolve("c1", root.path(), "2147483647").unwrap().uid,
            2_147_483_647
        );
    }

    #[test]
    fn missing_files_count_as_empty() {
        let root = tempfile::tempdir().unwrap();
        assert_eq!(resolve("c1", root.path(), "7:8").unwrap().gid, 8);
        assert!(matches!(
            resolve("c1", root.path(), "app"),
            Err(Error::UnknownUser { .. })
        ));
    }

    #[test]
    fn never_follows_links_out_of_the_rootfs() {
        // /etc a link to the host's /etc
        let root = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/etc", root.path().join("etc")).unwrap();
        let err = resolve("c1", root.path(), "root").unwrap_err().to_string();
        assert!(err.contains("not a regular file (symbolic link)"), "{err}");
        // /etc/passwd a link
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("etc")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", root.path().join("etc/passwd")).unwrap();
        let err = resolve("c1", root.path(), "root").unwrap_err().to_string();
        assert!(err.contains("etc/passwd"), "{err}");
    }
}

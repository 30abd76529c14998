//! The mount table: `/proc/<pid>/mountinfo` decoded into typed entries, whether a path is a
//! mount point, and detaching every mount stacked at a path.
//!
//! A line of proc_pid_mountinfo(5):
//!
//! ```text
//! 36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
//! (1)(2)(3)   (4)   (5)      (6)      (7)   (8) (9)   (10)         (11)
//! ```
//!
//! The kernel writes a space, tab, newline or backslash in a path (and a comma or `=` in an
//! option) as a `\ooo` octal escape; [`unescape`] undoes every such escape, in every field.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The most of a mount table read: a node with tens of thousands of mounts stays well under it.
pub const MAX_MOUNTINFO: u64 = 64 << 20;

/// This process's mount table.
pub const OWN_MOUNTINFO: &str = "/proc/self/mountinfo";

/// One line of a mount table, its fields decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountEntry {
    /// (1) The mount's id.
    pub mount_id: u64,
    /// (2) Its parent's id (its own for the root of the namespace's tree).
    pub parent_id: u64,
    /// (3) The major device number of the file system.
    pub major: u32,
    /// (3) The minor device number.
    pub minor: u32,
    /// (4) The directory of the file system mounted (`/` unless a bind mount or a cgroup
    /// namespace shows a subtree).
    pub root: PathBuf,
    /// (5) Where it is mounted, relative to the process's root.
    pub mount_point: PathBuf,
    /// (6) The mount's own options: `rw`, `nosuid`...
    pub options: Vec<String>,
    /// (7) The optional fields: `shared:5`, `master:1`, `propagate_from:2`, `unbindable`.
    pub optional: Vec<String>,
    /// (9) The file system type: `ext4`, `overlay`, `cgroup2`.
    pub fs_type: String,
    /// (10) The file system's source (`/dev/sda1`, `overlay`, `none`).
    pub source: String,
    /// (11) The file system's own options: `upperdir=/…`, a v1 cgroup's controllers.
    pub super_options: Vec<String>,
}

impl MountEntry {
    /// Parses one line; `None` when it is not a mount table line.
    pub fn parse(line: &[u8]) -> Option<MountEntry> {
        let fields: Vec<&[u8]> = line.split(|&b| b == b' ').collect();
        // The optional fields end at a lone `-`, at index 6 or later.
        let dash = fields.iter().skip(6).position(|f| *f == b"-")? + 6;
        let number = |field: &[u8]| std::str::from_utf8(field).ok()?.parse::<u64>().ok();
        let (major, minor) = std::str::from_utf8(fields[2]).ok()?.split_once(':')?;
        let text = |field: &[u8]| String::from_utf8_lossy(&unescape(field)).into_owned();
        let list = |field: Option<&&[u8]>| -> Vec<String> {
            match field {
                Some(f) if !f.is_empty() => f.split(|&b| b == b',').map(text).collect(),
                _ => Vec::new(),
            }
        };
        Some(MountEntry {
            mount_id: number(fields[0])?,
            parent_id: number(fields[1])?,
            major: major.parse().ok()?,
            minor: minor.parse().ok()?,
            root: path(fields[3]),
            mount_point: path(fields[4]),
            options: list(fields.get(5)),
            optional: fields[6..dash].iter().map(|f| text(f)).collect(),
            fs_type: text(fields.get(dash + 1)?),
            source: fields.get(dash + 2).map(|f| text(f)).unwrap_or_default(),
            super_options: list(fields.get(dash + 3)),
        })
    }

    /// The value of the super option `key=value`, if present.
    pub fn super_option(&self, key: &str) -> Option<&str> {
        self.super_options
            .iter()
            .find_map(|o| o.strip_prefix(key)?.strip_prefix('='))
    }
}

fn path(field: &[u8]) -> PathBuf {
    PathBuf::from(OsStr::from_bytes(&unescape(field)))
}

/// The entries of a mount table's text, in mount order; lines that are not entries are skipped.
pub fn parse(text: &[u8]) -> Vec<MountEntry> {
    text.split(|&b| b == b'\n')
        .filter_map(MountEntry::parse)
        .collect()
}

/// The mount table at `path` (`/proc/<pid>/mountinfo`), read as a regular file of at most
/// [`MAX_MOUNTINFO`] bytes.
///
/// # Errors
///
/// [`Error::Read`] when it cannot be read, [`Error::NotRegular`] or [`Error::TooLarge`].
pub fn read(path: &Path) -> Result<Vec<MountEntry>> {
    Ok(parse(&crate::read::read_capped(path, MAX_MOUNTINFO)?))
}

/// This process's mount table ([`OWN_MOUNTINFO`]).
///
/// # Errors
///
/// As [`read`].
pub fn read_own() -> Result<Vec<MountEntry>> {
    read(Path::new(OWN_MOUNTINFO))
}

/// Undoes the kernel's `\ooo` octal escapes (`\040` a space, `\134` a backslash). A backslash
/// not followed by three octal digits worth a byte is kept as it is.
pub fn unescape(field: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(field.len());
    let mut i = 0;
    while i < field.len() {
        let byte = (field[i] == b'\\')
            .then(|| field.get(i + 1..i + 4))
            .flatten()
            .filter(|d| d.iter().all(|b| (b'0'..=b'7').contains(b)))
            .and_then(|d| {
                let value = d.iter().fold(0u32, |v, b| v * 8 + u32::from(b - b'0'));
                u8::try_from(value).ok()
            });
        if let Some(byte) = byte {
            out.push(byte);
            i += 4;
        } else {
            out.push(field[i]);
            i += 1;
        }
    }
    out
}

/// Whether something is mounted at `path` in this process's mount namespace. `path` is made
/// absolute (lexically: a symbolic link in it is not resolved, so canonicalize it first if it
/// may hold one) and compared with each mount point, decoded.
///
/// # Errors
///
/// As [`read_own`]; [`Error::Read`] naming `path` when it cannot be made absolute.
pub fn is_mount_point(path: &Path) -> Result<bool> {
    let wanted = std::path::absolute(path).map_err(|source| Error::Read {
        path: path.to_owned(),
        source,
    })?;
    Ok(read_own()?.iter().any(|m| m.mount_point == wanted))
}

/// The mount points at `dir` or below it in `mounts`, deepest (latest) first: the order to
/// unmount them in.
pub fn mounts_at_or_below(mounts: &[MountEntry], dir: &Path) -> Vec<PathBuf> {
    mounts
        .iter()
        .rev()
        .filter(|m| m.mount_point.starts_with(dir))
        .map(|m| m.mount_point.clone())
        .collect()
}

/// How many mounts stacked at one path [`detach_all`] takes off before it gives up.
pub const MAX_STACKED_MOUNTS: usize = 16;

/// Detaches (`MNT_DETACH`: gone from the tree now, freed when the last user goes) every mount
/// stacked at `path`, without following a symbolic link there; nothing mounted is fine.
///
/// # Errors
///
/// The unmount's error for another reason than "not mounted" or "not there".
pub fn detach_all(path: &Path) -> std::io::Result<()> {
    detach_all_unless(path, |_| false)
}

/// [`detach_all`], stopping (as if nothing were mounted) at an error `done` accepts.
pub(crate) fn detach_all_unless(
    path: &Path,
    done: impl Fn(rustix::io::Errno) -> bool,
) -> std::io::Result<()> {
    use rustix::mount::{UnmountFlags, unmount};
    for _ in 0..MAX_STACKED_MOUNTS {
        match unmount(path, UnmountFlags::DETACH | UnmountFlags::NOFOLLOW) {
            Ok(()) => {}
            // EINVAL: nothing (more) mounted there.
            Err(rustix::io::Errno::INVAL | rustix::io::Errno::NOENT) => return Ok(()),
            Err(e) if done(e) => return Ok(()),
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_typed_and_every_field_decoded() {
        let text = b"22 1 0:21 / /proc rw,nosuid shared:5 master:2 - proc proc rw\n\
            49 27 0:40 / /var/lib/a\\040b/merged rw,relatime - overlay overlay \
            rw,lowerdir=/l1:/l2,upperdir=/var/lib/a\\040b/upper,workdir=/w\\054x,uuid=on\n\
            30 25 0:26 /sub\\011tab /sys/fs/cgroup/cpu\\134x rw - cgroup cgroup rw,cpu,cpuacct\n\
            garbage\n\
            1 2 3 4 5 6 7\n";
        let mounts = parse(text);
        assert_eq!(mounts.len(), 3, "{mounts:?}");
        assert_eq!(
            mounts[0],
            MountEntry {
                mount_id: 22,
                parent_id: 1,
                major: 0,
                minor: 21,
                root: "/".into(),
                mount_point: "/proc".into(),
                options: vec!["rw".into(), "nosuid".into()],
                optional: vec!["shared:5".into(), "master:2".into()],
                fs_type: "proc".into(),
                source: "proc".into(),
                super_options: vec!["rw".into()],
            }
        );
        let overlay = &mounts[1];
        assert_eq!(overlay.mount_point, Path::new("/var/lib/a b/merged"));
        assert!(overlay.optional.is_empty());
        assert_eq!(overlay.super_option("upperdir"), Some("/var/lib/a b/upper"));
        assert_eq!(overlay.super_option("workdir"), Some("/w,x"));
        assert_eq!(overlay.super_option("upper"), None);
        assert_eq!(mounts[2].root, Path::new("/sub\ttab"));
        assert_eq!(mounts[2].mount_point, Path::new("/sys/fs/cgroup/cpu\\x"));
        assert_eq!(mounts[2].super_options, ["rw", "cpu", "cpuacct"]);
        assert_eq!(
            mounts_at_or_below(&mounts, Path::new("/var/lib/a b")),
            vec![PathBuf::from("/var/lib/a b/merged")]
        );
        assert!(mounts_at_or_below(&mounts, Path::new("/var/lib/a")).is_empty());
    }

    #[test]
    fn every_octal_escape_is_decoded_and_nothing_else() {
        for (field, want) in [
            (&br"/run/a\040b\134c"[..], &b"/run/a b\\c"[..]),
            (br"\011\012\000\377", b"\t\n\0\xff"),
            (br"\054\075", b",="),
            (br"/x\0", br"/x\0"),
            (br"/x\08", br"/x\08"),
            (br"/x\400", br"/x\400"),
            (br"\\040", b"\\ "),
            (b"", b""),
        ] {
            assert_eq!(
                unescape(field),
                want,
                "{:?}",
                String::from_utf8_lossy(field)
            );
        }
    }

    #[test]
    fn missing_trailing_fields_are_empty() {
        let entry = MountEntry::parse(b"5 1 8:1 / / rw - ext4").unwrap();
        assert_eq!(entry.fs_type, "ext4");
        assert_eq!(entry.source, "");
        assert!(entry.super_options.is_empty());
        assert!(MountEntry::parse(b"5 1 8:1 / / rw").is_none());
        assert!(MountEntry::parse(b"x 1 8:1 / / rw - ext4 a b").is_none());
        assert!(MountEntry::parse(b"5 1 8-1 / / rw - ext4 a b").is_none());
    }

    #[test]
    fn this_process_has_a_root_and_proc_mounted() {
        let mounts = read_own().unwrap();
        assert!(mounts.iter().any(|m| m.mount_point == Path::new("/proc")));
        assert!(is_mount_point(Path::new("/")).unwrap());
        assert!(is_mount_point(Path::new("/proc")).unwrap());
        assert!(!is_mount_point(Path::new("/proc/self")).unwrap());
        assert!(!is_mount_point(Path::new("/nonexistent/x")).unwrap());
    }

    #[test]
    fn detaching_where_nothing_is_mounted_is_fine() {
        let dir = tempfile::tempdir().unwrap();
        for path in [dir.path().to_owned(), dir.path().join("missing")] {
            // Without CAP_SYS_ADMIN the kernel says EPERM before it looks.
            if let Err(e) = detach_all(&path) {
                assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied, "{e}");
            }
        }
    }
}

//! Who makes containers' cgroups, and so what a pod's cgroup parent may be: one place that says
//! which parents a manager can honour and how a container's `linux.cgroupsPath` is written.

use std::path::PathBuf;

/// The longest cgroup parent accepted: a path the kernel takes (`PATH_MAX`).
pub const MAX_CGROUP_PARENT: usize = 4096;

/// How the runtime is told to place a container's cgroup.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum CgroupManager {
    /// The runtime writes the cgroup file system itself: parents are absolute cgroup paths
    /// (`/kubepods/burstable/pod<uid>`), as kubelet's `cgroupfs` driver gives them.
    #[default]
    Cgroupfs,
    /// systemd makes them: parents are slices (`kubepods-burstable-pod<uid>.slice`), as
    /// kubelet's `systemd` driver gives them; a container is the scope `<prefix>-<id>.scope`
    /// the runtime starts through systemd (`--systemd-cgroup`).
    Systemd,
}

/// The cgroup hierarchy a node has, as the file system at `/sys/fs/cgroup` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CgroupVersion {
    /// Only v1 hierarchies.
    V1,
    /// v1 hierarchies with the unified one beside them at `/sys/fs/cgroup/unified`.
    Hybrid,
    /// The unified hierarchy alone.
    V2,
}

impl CgroupVersion {
    /// The node's, from the file system types at `/sys/fs/cgroup` and
    /// `/sys/fs/cgroup/unified`; `None` when no cgroup file system is mounted there.
    pub fn of_node() -> Option<CgroupVersion> {
        Self::at(std::path::Path::new("/sys/fs/cgroup"))
    }

    fn at(root: &std::path::Path) -> Option<CgroupVersion> {
        use nix::sys::statfs::{CGROUP2_SUPER_MAGIC, TMPFS_MAGIC, statfs};
        let kind = statfs(root).ok()?.filesystem_type();
        if kind == CGROUP2_SUPER_MAGIC {
            return Some(CgroupVersion::V2);
        }
        if kind != TMPFS_MAGIC {
            return None;
        }
        let unified = statfs(&root.join("unified")).map(|s| s.filesystem_type());
        Some(if unified == Ok(CGROUP2_SUPER_MAGIC) {
            CgroupVersion::Hybrid
        } else {
            CgroupVersion::V1
        })
    }

    /// `v1`, `hybrid` or `v2`.
    pub fn name(self) -> &'static str {
        match self {
            CgroupVersion::V1 => "v1",
            CgroupVersion::Hybrid => "hybrid",
            CgroupVersion::V2 => "v2",
        }
    }
}

/// Whether systemd is this node's init, as `sd_booted(3)` tells it: `/run/systemd/system` is a
/// directory.
pub fn systemd_is_init() -> bool {
    std::fs::symlink_metadata("/run/systemd/system").is_ok_and(|m| m.is_dir())
}

/// Where a container's conmon runs (CRI-O's `conmon_cgroup`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ConmonCgroup {
    /// Beside the pod's containers, so its memory is charged to the pod: the cgroup
    /// `<parent>/crio-conmon-<id>` (cgroupfs) or the scope `crio-conmon-<id>.scope` in the
    /// pod's slice (systemd).
    #[default]
    Pod,
    /// The scope `crio-conmon-<id>.scope` in this slice (systemd only, `system.slice` say).
    Slice(String),
}

impl ConmonCgroup {
    /// Reads CRI-O's value: `pod` (or empty) or, with systemd, a slice.
    ///
    /// # Errors
    ///
    /// The reason, for the caller to name the key with.
    pub fn parse(value: &str, manager: CgroupManager) -> Result<ConmonCgroup, String> {
        if value.is_empty() || value == "pod" {
            return Ok(ConmonCgroup::Pod);
        }
        match manager {
            CgroupManager::Systemd => {
                check_slice(value)?;
                Ok(ConmonCgroup::Slice(value.to_owned()))
            }
            CgroupManager::Cgroupfs => Err(format!(
                "{value:?}: with the cgroupfs manager conmon runs in its pod's cgroup (\"pod\"); \
                 a slice needs the systemd manager"
            )),
        }
    }

    /// The value as the configuration writes it.
    pub fn as_str(&self) -> &str {
        match self {
            ConmonCgroup::Pod => "pod",
            ConmonCgroup::Slice(slice) => slice,
        }
    }
}

impl CgroupManager {
    /// The name CRI-O and kubelet give it (`cgroupfs`).
    pub fn name(self) -> &'static str {
        match self {
            CgroupManager::Cgroupfs => "cgroupfs",
            CgroupManager::Systemd => "systemd",
        }
    }

    /// The manager named `cgroupfs` or `systemd`.
    pub fn parse(name: &str) -> Option<CgroupManager> {
        match name {
            "cgroupfs" => Some(CgroupManager::Cgroupfs),
            "systemd" => Some(CgroupManager::Systemd),
            _ => None,
        }
    }

    /// CRI-O's default for this node: systemd where systemd is init, else cgroupfs.
    pub fn for_node() -> CgroupManager {
        if systemd_is_init() {
            CgroupManager::Systemd
        } else {
            CgroupManager::Cgroupfs
        }
    }

    /// The parent of pods whose request names none: `/crio-lite` or `system.slice` (CRI-O's
    /// systemd default).
    pub fn default_parent(self) -> &'static str {
        match self {
            CgroupManager::Cgroupfs => "/crio-lite",
            CgroupManager::Systemd => "system.slice",
        }
    }

    /// What the monitor and runtime are told on every `create`: `--systemd-cgroup` with systemd.
    pub fn runtime_flag(self) -> Option<&'static str> {
        match self {
            CgroupManager::Cgroupfs => None,
            CgroupManager::Systemd => Some("--systemd-cgroup"),
        }
    }

    /// Checks a pod's cgroup parent before anything is made for the pod. Empty means the
    /// daemon's own default and is fine.
    ///
    /// For cgroupfs: an absolute path whose components are names (no `.`, `..` or empty
    /// component, no NUL or other control character), at most [`MAX_CGROUP_PARENT`] bytes; a
    /// systemd slice (`kubepods-burstable.slice`) is a parent only the systemd manager can use.
    ///
    /// # Errors
    ///
    /// The reason, for the caller to name the field with.
    pub fn check_parent(self, parent: &str) -> Result<(), String> {
        if parent.is_empty() {
            return Ok(());
        }
        match self {
            CgroupManager::Cgroupfs => check_cgroupfs_parent(parent),
            CgroupManager::Systemd => check_slice(parent),
        }
    }

    /// The `linux.cgroupsPath` of container `id` (named `<prefix>-<id>`) under `parent`, a
    /// parent [`check_parent`](Self::check_parent) accepted and not empty.
    pub fn cgroups_path(self, parent: &str, prefix: &str, id: &str) -> PathBuf {
        match self {
            CgroupManager::Cgroupfs => {
                PathBuf::from(format!("{}/{prefix}-{id}", parent.trim_end_matches('/')))
            }
            // runc's and crun's `slice:prefix:name`: the scope `<prefix>-<name>.scope` in the
            // slice.
            CgroupManager::Systemd => PathBuf::from(format!("{parent}:{prefix}:{id}")),
        }
    }
}

/// The path of the slice `slice` below the cgroup root, as systemd lays slices out: each
/// dash-separated prefix is a slice of its own (`a-b-c.slice` is `a.slice/a-b.slice/a-b-c.slice`),
/// and `-.slice` is the root. `None` for a name that is not a slice
/// ([`CgroupManager::check_parent`] says why).
pub fn slice_path(slice: &str) -> Option<PathBuf> {
    check_slice(slice).ok()?;
    let stem = slice.strip_suffix(".slice")?;
    let mut path = PathBuf::new();
    if stem == "-" {
        return Some(path);
    }
    let mut prefix = String::new();
    for part in stem.split('-') {
        if !prefix.is_empty() {
            prefix.push('-');
        }
        prefix.push_str(part);
        path.push(format!("{prefix}.slice"));
    }
    Some(path)
}

/// A systemd slice name as kubelet's systemd driver and systemd take it: `<name>.slice`, at
/// most 255 bytes, of ASCII letters, digits and `:_.-\\`, the dash-separated parts of its
/// stem not empty; or `-.slice`, the root.
fn check_slice(slice: &str) -> Result<(), String> {
    const MAX_UNIT_NAME: usize = 255;
    if slice.len() > MAX_UNIT_NAME {
        return Err(format!(
            "{} bytes long, more than the {MAX_UNIT_NAME} a systemd unit name may have",
            slice.len()
        ));
    }
    let Some(stem) = slice.strip_suffix(".slice") else {
        let hint = if slice.starts_with('/') {
            " (a cgroup path: this node's cgroup manager is systemd, which takes slices such as \
             kubepods-burstable.slice)"
        } else {
            " (this node's cgroup manager is systemd, which takes slice names ending in .slice)"
        };
        return Err(format!("{slice:?} is not a systemd slice{hint}"));
    };
    if stem == "-" {
        return Ok(());
    }
    if let Some(bad) = stem
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, ':' | '_' | '.' | '-' | '\\')))
    {
        return Err(format!(
            "{slice:?} has {bad:?}, which a systemd unit name may not hold"
        ));
    }
    if stem.is_empty() || stem.split('-').any(str::is_empty) {
        return Err(format!(
            "{slice:?} has an empty part: a slice's dashes separate the names of its parents"
        ));
    }
    Ok(())
}

#[expect(
    clippy::case_sensitive_file_extension_comparisons,
    reason = "systemd unit names end in .slice, lower case"
)]
fn check_cgroupfs_parent(parent: &str) -> Result<(), String> {
    if parent.len() > MAX_CGROUP_PARENT {
        return Err(format!(
            "{} bytes long, more than the {MAX_CGROUP_PARENT} a cgroup path may have",
            parent.len()
        ));
    }
    if parent.chars().any(char::is_control) {
        return Err(format!("{parent:?} has a NUL or another control character"));
    }
    let Some(relative) = parent.strip_prefix('/') else {
        let hint = if parent.ends_with(".slice") {
            " (a systemd slice: this node's cgroup manager is cgroupfs, which takes cgroup paths \
             such as /kubepods/burstable)"
        } else {
            " (this node's cgroup manager is cgroupfs, which takes absolute cgroup paths)"
        };
        return Err(format!("{parent:?} is not an absolute cgroup path{hint}"));
    };
    if relative.is_empty() {
        return Ok(());
    }
    for component in relative.split('/') {
        let what = match component {
            "" => "an empty",
            "." => "a \".\"",
            ".." => "a \"..\"",
            _ => continue,
        };
        return Err(format!(
            "{parent:?} has {what} component: a cgroup parent names a cgroup below the root, \
             nothing else"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cgroupfs_takes_absolute_cgroup_paths_and_nothing_else() {
        let manager = CgroupManager::Cgroupfs;
        for ok in [
            "",
            "/",
            "/kubepods",
            "/kubepods/burstable/pod-1234",
            "/a.b/c_d",
        ] {
            assert_eq!(manager.check_parent(ok), Ok(()), "{ok:?}");
        }
        for (bad, why) in [
            ("kubepods-burstable.slice", "a systemd slice"),
            ("kubepods", "not an absolute cgroup path"),
            ("/kubepods/../../system.slice", "\"..\" component"),
            ("/..", "\"..\" component"),
            ("/kubepods/./x", "\".\" component"),
            ("/kubepods//x", "empty component"),
            ("/kubepods/", "empty component"),
            ("/kube\0pods", "NUL"),
            ("/kube\npods", "control character"),
        ] {
            let err = manager.check_parent(bad).unwrap_err();
            assert!(err.contains(why), "{bad:?}: {err}");
        }
        let long = format!("/{}", "a".repeat(MAX_CGROUP_PARENT));
        assert!(
            manager
                .check_parent(&long)
                .unwrap_err()
                .contains("bytes long")
        );
    }

    #[test]
    fn systemd_takes_slices_and_nothing_else() {
        let manager = CgroupManager::Systemd;
        for ok in [
            "",
            "-.slice",
            "system.slice",
            "kubepods-burstable-pod1234_5678.slice",
            "a:b\\x2d.slice",
        ] {
            assert_eq!(manager.check_parent(ok), Ok(()), "{ok:?}");
        }
        for (bad, why) in [
            ("/kubepods/burstable", "a cgroup path"),
            ("kubepods", "ending in .slice"),
            ("kubepods.service", "ending in .slice"),
            (".slice", "empty part"),
            ("-kubepods.slice", "empty part"),
            ("kubepods--x.slice", "empty part"),
            ("kubepods-.slice", "empty part"),
            ("kube/pods.slice", "'/'"),
            ("kube\npods.slice", "'\\n'"),
            ("kubepods .slice", "' '"),
        ] {
            let err = manager.check_parent(bad).unwrap_err();
            assert!(err.contains(why), "{bad:?}: {err}");
        }
        let long = format!("{}.slice", "a".repeat(250));
        assert!(
            manager
                .check_parent(&long)
                .unwrap_err()
                .contains("bytes long")
        );
    }

    #[test]
    fn slices_nest_by_their_dashes() {
        assert_eq!(slice_path("-.slice"), Some(PathBuf::new()));
        assert_eq!(
            slice_path("system.slice"),
            Some(PathBuf::from("system.slice"))
        );
        assert_eq!(
            slice_path("kubepods-burstable-pod1.slice"),
            Some(PathBuf::from(
                "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice"
            ))
        );
        assert_eq!(slice_path("/kubepods"), None);
        assert_eq!(
            CgroupManager::Systemd.cgroups_path("kubepods.slice", "crio", "abc"),
            PathBuf::from("kubepods.slice:crio:abc")
        );
    }

    #[test]
    fn conmon_goes_to_its_pod_or_with_systemd_a_slice() {
        for manager in [CgroupManager::Cgroupfs, CgroupManager::Systemd] {
            assert_eq!(ConmonCgroup::parse("", manager), Ok(ConmonCgroup::Pod));
            assert_eq!(ConmonCgroup::parse("pod", manager), Ok(ConmonCgroup::Pod));
        }
        assert_eq!(
            ConmonCgroup::parse("system.slice", CgroupManager::Systemd),
            Ok(ConmonCgroup::Slice("system.slice".to_owned()))
        );
        assert!(
            ConmonCgroup::parse("system.slice", CgroupManager::Cgroupfs)
                .unwrap_err()
                .contains("needs the systemd manager")
        );
        assert!(
            ConmonCgroup::parse("/system", CgroupManager::Systemd)
                .unwrap_err()
                .contains("not a systemd slice")
        );
        assert_eq!(
            CgroupManager::parse("systemd").map(CgroupManager::name),
            Some("systemd")
        );
        assert_eq!(CgroupManager::parse("SystemD"), None);
    }

    #[test]
    fn this_node_has_a_cgroup_version() {
        // Every machine these tests run on mounts cgroups (the host is hybrid, the VM v2).
        let version = CgroupVersion::of_node().expect("a cgroup file system at /sys/fs/cgroup");
        assert!(["v1", "hybrid", "v2"].contains(&version.name()));
    }

    #[test]
    fn a_containers_cgroup_is_named_under_its_parent() {
        assert_eq!(
            CgroupManager::Cgroupfs.cgroups_path("/kubepods/pod1", "crio-lite", "abc"),
            PathBuf::from("/kubepods/pod1/crio-lite-abc")
        );
        assert_eq!(
            CgroupManager::Cgroupfs.cgroups_path("/", "crio-lite", "abc"),
            PathBuf::from("/crio-lite-abc")
        );
    }
}

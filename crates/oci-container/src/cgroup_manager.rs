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
}

impl CgroupManager {
    /// The name CRI-O and kubelet give it (`cgroupfs`).
    pub fn name(self) -> &'static str {
        match self {
            CgroupManager::Cgroupfs => "cgroupfs",
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
        }
    }

    /// The `linux.cgroupsPath` of container `id` (named `<prefix>-<id>`) under `parent`, a
    /// parent [`check_parent`](Self::check_parent) accepted and not empty.
    pub fn cgroups_path(self, parent: &str, prefix: &str, id: &str) -> PathBuf {
        match self {
            CgroupManager::Cgroupfs => {
                PathBuf::from(format!("{}/{prefix}-{id}", parent.trim_end_matches('/')))
            }
        }
    }
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

//! Where a process of crio-lite's own goes in the cgroup tree: the pod init's leaf, placed as the
//! cgroupfs driver places a container (`<parent>/<name>` in each hierarchy the mount table
//! shows). A systemd manager would place it through systemd instead; this is the one function
//! it replaces.

use std::path::{Path, PathBuf};
use std::time::Instant;

use safe_file::{Durability, Symlinks};

use node_primitives::MountEntry;

use super::{parse_mounts, under};
use crate::error::{Error, Result};

/// The directories of the cgroup `<parent>/<name>` in every cgroup hierarchy mounted here (each
/// v1 hierarchy and the unified one on a hybrid host, one directory on a pure v2 host), as the
/// mount table `mounts` shows them; a hierarchy mounted twice is named once. `None` when `parent` and
/// `name` do not make a plain absolute cgroup path.
pub(crate) fn cgroupfs_dirs(
    mounts: &[MountEntry],
    parent: &Path,
    name: &str,
) -> Option<Vec<PathBuf>> {
    let path = parent.join(name);
    let plain = path.is_absolute()
        && !name.contains('/')
        && path
            .components()
            .skip(1)
            .all(|c| matches!(c, std::path::Component::Normal(_)));
    let path = path.to_str().filter(|_| plain)?;
    let mut seen = Vec::new();
    let mut dirs = Vec::new();
    for mount in parse_mounts(mounts) {
        // A v1 hierarchy is its options (controllers or name=); the unified one has none.
        if seen.contains(&mount.v1_options) {
            continue;
        }
        if let Some(dir) = under(&mount, path) {
            seen.push(mount.v1_options.clone());
            dirs.push(dir);
        }
    }
    Some(dirs)
}

/// Makes `dir` and its missing parents; in a v1 cpuset hierarchy (`cpuset.cpu_exclusive` beside
/// `cpuset.cpus`: v2 has no such file, and an empty set means its parent's there),
/// copies each level's empty `cpuset.cpus` and `cpuset.mems` from its parent, as runc does: a
/// process cannot join a cpuset without CPUs or memory nodes.
pub(crate) fn make_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let levels: Vec<&Path> = dir.ancestors().collect();
    // From the topmost level that is a cpuset cgroup down to `dir`.
    for pair in levels.windows(2).rev() {
        let (child, parent) = (pair[0], pair[1]);
        if !parent.join("cpuset.cpu_exclusive").exists() {
            continue;
        }
        for file in ["cpuset.cpus", "cpuset.mems"] {
            let Ok(parents) = std::fs::read_to_string(parent.join(file)) else {
                continue;
            };
            let own = std::fs::read_to_string(child.join(file))?;
            if own.trim().is_empty() && !parents.trim().is_empty() {
                std::fs::write(child.join(file), parents.trim())?;
            }
        }
    }
    Ok(())
}

/// The most read of a leaf record.
const MAX_RECORD: u64 = 64 * 1024;

/// Makes the cgroupfs cgroup `<parent>/<name>` of `owner` (a container or pod), called `what` in
/// errors, in every hierarchy mounted here: its directories resolved from the mount table,
/// recorded in `record` first (so a removal after a crash finds them), then made.
pub(crate) fn make_recorded(
    owner: &str,
    what: &str,
    parent: &Path,
    name: &str,
    record: &Path,
) -> Result<Vec<PathBuf>> {
    let table = node_primitives::mounts::read_own().map_err(|e| {
        let mountinfo = Path::new(node_primitives::mounts::OWN_MOUNTINFO);
        Error::io(owner, "read the mount table", mountinfo, e.into_io())
    })?;
    let shown = || format!("{what} {}/{name}", parent.display());
    let dirs = cgroupfs_dirs(&table, parent, name).ok_or_else(|| {
        Error::config(
            owner,
            format!("{} is not a plain absolute cgroup path", shown()),
        )
    })?;
    if dirs.is_empty() {
        return Err(Error::config(
            owner,
            format!("no cgroup file system is mounted for {}", shown()),
        ));
    }
    let bytes = serde_json::to_vec(&dirs).map_err(|e| Error::Corrupt {
        container: owner.to_owned(),
        path: record.to_owned(),
        reason: e.to_string(),
    })?;
    safe_file::write_atomic(record, &bytes, 0o600, Durability::Unsynced)
        .map_err(|e| Error::file(owner, e))?;
    for leaf in &dirs {
        make_dir(leaf).map_err(|e| Error::io(owner, "make the cgroup", leaf, e))?;
    }
    Ok(dirs)
}

/// Removes the cgroup directories `record` names (their processes are gone; a busy one is
/// retried until `deadline`), then the record. No record is fine. `what` says what failed.
pub(crate) fn remove_recorded(
    owner: &str,
    what: &'static str,
    record: &Path,
    deadline: Instant,
) -> Result<()> {
    let dirs: Vec<PathBuf> = match safe_file::read_regular(record, MAX_RECORD, Symlinks::Refuse) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| Error::Corrupt {
            container: owner.to_owned(),
            path: record.to_owned(),
            reason: e.to_string(),
        })?,
        Err(e) if e.is_not_found() => return Ok(()),
        Err(e) => return Err(Error::file(owner, e)),
    };
    for leaf in &dirs {
        remove_dir(leaf, deadline).map_err(|e| Error::io(owner, what, leaf, e))?;
    }
    match std::fs::remove_file(record) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(Error::io(owner, "remove", record, e))
        }
        _ => Ok(()),
    }
}

/// Removes `dir` (the cgroup must hold no process); one that is not there is fine. A cgroup whose
/// last process has just been reaped may still count as busy for a moment: retried until
/// `deadline`.
pub(crate) fn remove_dir(dir: &Path, deadline: Instant) -> std::io::Result<()> {
    loop {
        match std::fs::remove_dir(dir) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e)
                if e.raw_os_error() == Some(libc::EBUSY)
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::table;
    use super::*;

    const HYBRID: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
90 23 0:31 / /mnt/again rw,relatime - cgroup cgroup rw,cpuset
";

    #[test]
    fn the_leaf_is_in_every_hierarchy_once_or_in_the_one_unified() {
        let dirs =
            cgroupfs_dirs(&table(HYBRID), Path::new("/crio-lite"), "crio-p1").expect("plain");
        assert_eq!(
            dirs,
            [
                "/sys/fs/cgroup/cpu,cpuacct/crio-lite/crio-p1",
                "/sys/fs/cgroup/cpuset/crio-lite/crio-p1",
                "/sys/fs/cgroup/systemd/crio-lite/crio-p1",
                "/sys/fs/cgroup/unified/crio-lite/crio-p1",
            ]
            .map(PathBuf::from)
        );
        let v2 = "29 23 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n";
        assert_eq!(
            cgroupfs_dirs(&table(v2), Path::new("/kubepods/pod1"), "crio-p1").expect("plain"),
            [PathBuf::from("/sys/fs/cgroup/kubepods/pod1/crio-p1")]
        );
        for (parent, name) in [
            ("crio-lite", "crio-p1"),
            ("/crio-lite/..", "crio-p1"),
            ("/crio-lite", "../p1"),
            ("/crio-lite", ".."),
        ] {
            assert_eq!(
                cgroupfs_dirs(&table(HYBRID), Path::new(parent), name),
                None,
                "{parent} {name}"
            );
        }
    }
}

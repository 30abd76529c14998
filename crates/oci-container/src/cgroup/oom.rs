//! OOM kills conmon could not see: on cgroup v2 under systemd, the container's scope is removed
//! by systemd as soon as its last process exits, and conmon (2.1) reads the scope's
//! `memory.events` only after it has reaped the container, so a slow conmon finds the file gone
//! and leaves no `oom` file (CRI-O has the same race).
//!
//! The kernel counts an OOM kill in `memory.events` of the victim's cgroup and of every
//! ancestor, and the parent (the pod's slice or cgroup) outlives the container. So at create
//! the parent's `oom_kill` count is written next to the container's record, and when the
//! container has ended by SIGKILL with no `oom` file from conmon, not killed by
//! [`Runtime::stop`](crate::Runtime::stop), a count that has grown since says the kernel killed
//! something under that parent while the container ran. The parent is the pod's: a
//! container killed with SIGKILL by someone else while a sibling in its pod was OOM-killed is
//! the one case reported wrong.

use std::path::{Path, PathBuf};

use safe_file::{Durability, Symlinks};

use super::{process_dirs, read_keyed};

/// Where the parent's count is kept, in the container's directory.
const PARENT_COUNT: &str = "oom-parent";
/// Written before [`Runtime::stop`](crate::Runtime::stop) sends SIGKILL: that exit is ours.
const KILLED: &str = "killed";
/// The exit code of a process ended by SIGKILL.
const SIGKILL_EXIT: i32 = 128 + libc::SIGKILL;

/// The unified cgroup directory above container `id`'s (whose process is `pid`), and its
/// `oom_kill` count; `None` off cgroup v2, for a container in the root cgroup, or when the
/// process is gone.
fn parent_count(id: &str, pid: i32) -> Option<(PathBuf, u64)> {
    let dirs = process_dirs(id, pid).ok()??;
    let parent = above_container(id, &dirs.unified?)?;
    let count = read_keyed(id, &parent.join("memory.events"), "oom_kill").ok()??;
    Some((parent, count))
}

/// The directory above the container's own cgroup, which `own` (its process's) is in or below:
/// the container's is the deepest named after its id (`crio-<id>.scope`, `crio-lite-<id>`),
/// since crun puts the process in a `container` subgroup of the scope it made; without such a
/// name, `own`'s parent.
fn above_container(id: &str, own: &Path) -> Option<PathBuf> {
    let named = own.ancestors().find(|dir| {
        dir.file_name()
            .is_some_and(|n| n.to_string_lossy().contains(id))
    });
    // a process of the root cgroup has none above; the mount point has no memory.events
    named.unwrap_or(own).parent().map(Path::to_owned)
}

/// Records the `oom_kill` count of the cgroup above the container's process `pid` in the
/// container's directory `dir`; nothing on cgroup v1 or when it cannot be read (conmon's file
/// is then the only word).
pub(crate) fn note_parent(id: &str, dir: &Path, pid: i32) {
    let Some((parent, count)) = parent_count(id, pid) else {
        return;
    };
    let text = format!("{}\n{count}\n", parent.display());
    if let Err(e) = safe_file::write_atomic(
        &dir.join(PARENT_COUNT),
        text.as_bytes(),
        0o600,
        Durability::Unsynced,
    ) {
        tracing::debug!(container = id, error = %e, "cannot record the parent cgroup's OOM count");
    }
}

/// Marks that the caller is about to kill the container with SIGKILL itself.
pub(crate) fn note_killed(id: &str, dir: &Path) {
    if let Err(e) = safe_file::write_atomic(&dir.join(KILLED), b"", 0o600, Durability::Unsynced) {
        tracing::debug!(container = id, error = %e, "cannot record the SIGKILL");
    }
}

/// Whether the kernel's OOM killer ended the container, going by the parent's count, for an
/// exit `code` with no `oom` file from conmon.
pub(crate) fn killed_under_parent(id: &str, dir: &Path, code: i32) -> bool {
    if code != SIGKILL_EXIT || dir.join(KILLED).exists() {
        return false;
    }
    let Ok(bytes) = safe_file::read_regular(&dir.join(PARENT_COUNT), 4096, Symlinks::Refuse) else {
        return false;
    };
    let text = String::from_utf8_lossy(&bytes);
    let mut lines = text.lines();
    let (Some(parent), Some(Ok(before))) = (lines.next(), lines.next().map(str::parse::<u64>))
    else {
        return false;
    };
    let events = Path::new(parent).join("memory.events");
    let Ok(Some(now)) = read_keyed(id, &events, "oom_kill") else {
        return false;
    };
    let grew = now > before;
    if grew {
        tracing::info!(
            container = id,
            parent,
            before,
            now,
            "killed by SIGKILL while its parent cgroup counted an OOM kill: reporting OOMKilled"
        );
    }
    grew
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recorded(dir: &Path, parent: &Path, before: u64) {
        std::fs::write(
            dir.join(PARENT_COUNT),
            format!("{}\n{before}\n", parent.display()),
        )
        .unwrap();
    }

    fn events(parent: &Path, oom_kill: u64) {
        std::fs::write(
            parent.join("memory.events"),
            format!("low 0\nhigh 0\nmax 12\noom 1\noom_kill {oom_kill}\noom_group_kill 0\n"),
        )
        .unwrap();
    }

    #[test]
    fn the_parent_is_above_the_cgroup_named_after_the_container() {
        let above = |own: &str| above_container("c1", Path::new(own)).unwrap();
        // crun under systemd: the process in the scope's `container` subgroup
        assert_eq!(
            above("/sys/fs/cgroup/pod.slice/crio-c1.scope/container"),
            Path::new("/sys/fs/cgroup/pod.slice")
        );
        assert_eq!(
            above("/sys/fs/cgroup/pod.slice/crio-c1.scope"),
            Path::new("/sys/fs/cgroup/pod.slice")
        );
        assert_eq!(
            above("/sys/fs/cgroup/kubepods/podx/crio-lite-c1"),
            Path::new("/sys/fs/cgroup/kubepods/podx")
        );
        // not named after it: the process's own cgroup is taken as the container's
        assert_eq!(above("/sys/fs/cgroup/a/b"), Path::new("/sys/fs/cgroup/a"));
    }

    #[test]
    fn a_sigkill_under_a_parent_whose_count_grew_is_an_oom_kill() {
        let dir = tempfile::tempdir().unwrap();
        let parent = tempfile::tempdir().unwrap();
        recorded(dir.path(), parent.path(), 2);
        events(parent.path(), 3);
        assert!(killed_under_parent("c", dir.path(), 137));
        // another exit is not a kill by the OOM killer
        assert!(!killed_under_parent("c", dir.path(), 1));
        assert!(!killed_under_parent("c", dir.path(), 143));
    }

    #[test]
    fn an_unchanged_count_our_own_sigkill_or_no_record_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let parent = tempfile::tempdir().unwrap();
        assert!(!killed_under_parent("c", dir.path(), 137), "no record");
        recorded(dir.path(), parent.path(), 3);
        events(parent.path(), 3);
        assert!(!killed_under_parent("c", dir.path(), 137), "same count");
        events(parent.path(), 4);
        note_killed("c", dir.path());
        assert!(!killed_under_parent("c", dir.path(), 137), "stop's SIGKILL");
    }

    #[test]
    fn a_parent_gone_or_garbage_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let parent = tempfile::tempdir().unwrap();
        recorded(dir.path(), &parent.path().join("gone"), 0);
        assert!(!killed_under_parent("c", dir.path(), 137));
        std::fs::write(dir.path().join(PARENT_COUNT), "x\nnot a number\n").unwrap();
        assert!(!killed_under_parent("c", dir.path(), 137));
        std::fs::write(parent.path().join("memory.events"), "oom_kill lots\n").unwrap();
        recorded(dir.path(), parent.path(), 0);
        assert!(!killed_under_parent("c", dir.path(), 137));
    }
}

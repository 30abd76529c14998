//! A cgroup2 group per plugin run, so that everything a plugin started can be found and killed.
//!
//! A process group is not enough: a plugin's child that calls `setsid(2)` leaves it, and a
//! `killpg` misses it. A cgroup cannot be left without a privilege a plugin's child does not use,
//! so [`ProcessExec`](crate::ProcessExec) makes a child cgroup under the caller's own (on the
//! cgroup2 hierarchy, whether the node is pure v2 or "hybrid" with v2 mounted beside v1), puts
//! the plugin in it between fork and exec, and at the end kills what is left (`cgroup.kill`,
//! Linux 5.14; before it, SIGKILL for each pid listed, the group frozen meanwhile), waits until
//! the kernel says the group is empty and removes it, as container runtimes do with a
//! container's cgroup. No controller is needed: membership alone is what is tracked.
//!
//! Where no cgroup2 hierarchy is mounted, or the caller may not make groups in its own (not root,
//! a read-only `/sys/fs/cgroup`), plugins run as before, reached through their process group
//! only; this is logged once.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read as _, Write as _};
use std::os::fd::{AsRawFd as _, RawFd};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use node_primitives::MountEntry;

/// How long the processes of a killed group get to exit before the group is given up on (left in
/// place, with a warning). SIGKILLed processes exit at once unless stuck in the kernel.
const EMPTY_WAIT: Duration = Duration::from_secs(5);
/// How long the sweep of dead runtimes' groups waits for one group's processes to exit.
const SWEEP_WAIT: Duration = Duration::from_secs(1);
/// Longest pause between two looks at `cgroup.events`.
const MAX_POLL: Duration = Duration::from_millis(20);
/// Prefix of the groups this module makes: `cni-exec-<pid>-<n>`.
const PREFIX: &str = "cni-exec-";

/// The group one plugin run lives in. Dropping it kills the group's processes and removes it in
/// the background (the run's future was dropped); [`PluginCgroup::finish`] does the same and
/// waits.
#[derive(Debug)]
pub(crate) struct PluginCgroup {
    dir: PathBuf,
    /// `cgroup.procs`, open for writing: the child writes "0" to it before exec (a `write(2)`,
    /// async-signal-safe), which moves it into the group.
    procs: File,
    finished: bool,
}

impl PluginCgroup {
    /// A new, empty group under the caller's own, or `None` where there is none to be had
    /// (see the module docs).
    pub(crate) fn create() -> Option<Self> {
        let parent = parent_dir()?;
        static NEXT: AtomicU64 = AtomicU64::new(0);
        // A name left by an earlier process with our pid (it died before removing its group) is
        // skipped, not reused: the group may still be busy.
        for _ in 0..16 {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let dir = parent.join(format!("{PREFIX}{}-{n}", std::process::id()));
            match fs::create_dir(&dir) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    unavailable(&parent, &e);
                    return None;
                }
            }
            return match OpenOptions::new()
                .write(true)
                .open(dir.join("cgroup.procs"))
            {
                Ok(procs) => Some(Self {
                    dir,
                    procs,
                    finished: false,
                }),
                Err(e) => {
                    unavailable(&parent, &e);
                    let _ = fs::remove_dir(&dir);
                    None
                }
            };
        }
        None
    }

    /// The descriptor the child writes "0" to (see [`join`]).
    pub(crate) fn procs_fd(&self) -> RawFd {
        self.procs.as_raw_fd()
    }

    /// Kills whatever is still in the group, waits (bounded) until it is empty and removes it.
    /// Returns how many processes were still there; a plugin that exited normally leaves none.
    pub(crate) async fn finish(mut self) -> usize {
        let dir = self.dir.clone();
        let left = count_procs(&dir);
        if left > 0 {
            kill_all(&dir);
        }
        let deadline = Instant::now() + EMPTY_WAIT;
        let mut pause = Duration::from_millis(1);
        while !is_empty(&dir) && Instant::now() < deadline {
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(MAX_POLL);
            // Without cgroup.kill, children forked between our listing and our signals are
            // found on the next round.
            kill_all(&dir);
        }
        // Only now: a caller dropped during the wait leaves the rest to `Drop`.
        self.finished = true;
        remove(&dir);
        left
    }
}

impl Drop for PluginCgroup {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        kill_all(&self.dir);
        if is_empty(&self.dir) {
            remove(&self.dir);
            return;
        }
        let dir = self.dir.clone();
        // The caller's future was dropped: the processes die now; the (short) wait for them and
        // the removal happen on a thread of their own, not the dropping (async) thread, and not
        // a runtime's blocking pool, which drops queued work when the runtime shuts down.
        let cleanup = move || {
            let deadline = Instant::now() + EMPTY_WAIT;
            let mut pause = Duration::from_millis(1);
            while !is_empty(&dir) && Instant::now() < deadline {
                std::thread::sleep(pause);
                pause = (pause * 2).min(MAX_POLL);
                kill_all(&dir);
            }
            remove(&dir);
        };
        if let Err(e) = std::thread::Builder::new()
            .name("cni-cgroup-rm".into())
            .spawn(cleanup)
        {
            tracing::warn!(cgroup = %self.dir.display(), error = %e, "cannot start removing a plugin's cgroup");
        }
    }
}

/// In the child between fork and exec: moves the calling process into the group whose
/// `cgroup.procs` is open as `procs`.
///
/// # Errors
///
/// The `write(2)` error; the spawn then fails with it.
pub(crate) fn join(procs: RawFd) -> io::Result<()> {
    // SAFETY: a plain write(2) of a static buffer to a descriptor the parent keeps open until the
    // spawn returned; no allocation, no lock: async-signal-safe.
    let written = unsafe { libc::write(procs, b"0".as_ptr().cast(), 1) };
    if written == 1 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The directory of the caller's cgroup on the cgroup2 hierarchy, found once.
fn parent_dir() -> Option<PathBuf> {
    static PARENT: OnceLock<Option<PathBuf>> = OnceLock::new();
    PARENT
        .get_or_init(|| {
            let found = find_parent();
            if let Some(parent) = &found {
                sweep(parent);
            } else {
                tracing::warn!(
                    "no cgroup2 hierarchy found: plugins are reached through their process group only"
                );
            }
            found
        })
        .clone()
}

fn find_parent() -> Option<PathBuf> {
    let mounts = node_primitives::mounts::read_own().ok()?;
    let (root, mount) = cgroup2_mount(&mounts)?;
    let own = fs::read_to_string("/proc/self/cgroup").ok()?;
    let own = own_cgroup(&own)?;
    // A mount of a subtree (a container without a cgroup namespace) shows its root: our own
    // path is below it, and the part below is what lies under the mount point.
    let below = Path::new(own).strip_prefix(root).ok()?;
    Some(mount.join(below))
}

/// Empties and removes the groups that processes no longer running left under `parent`: a
/// runtime killed with SIGKILL runs no destructor (its plugins die with it, by PDEATHSIG, but a
/// child of theirs in a session of its own lives on, and the groups stay). A group named after a
/// pid that lives (another runtime, or ours) is left alone. Runs once, at the first plugin run.
fn sweep(parent: &Path) {
    let Ok(entries) = fs::read_dir(parent) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(PREFIX))
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        let dir = entry.path();
        if !is_empty(&dir) {
            tracing::warn!(cgroup = %dir.display(), "killing what a dead runtime's plugin left running");
            kill_all(&dir);
            let deadline = Instant::now() + SWEEP_WAIT;
            while !is_empty(&dir) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        remove(&dir);
    }
}

/// The root and mount point of the first cgroup2 file system in the mount table.
pub(crate) fn cgroup2_mount(mounts: &[MountEntry]) -> Option<(PathBuf, PathBuf)> {
    mounts
        .iter()
        .find(|m| m.fs_type == "cgroup2")
        .map(|m| (m.root.clone(), m.mount_point.clone()))
}

/// The caller's cgroup2 path from `/proc/self/cgroup` (its `0::` line).
pub(crate) fn own_cgroup(text: &str) -> Option<&str> {
    text.lines().find_map(|line| line.strip_prefix("0::"))
}

/// Says once that plugins are not put in groups of their own, and why.
fn unavailable(parent: &Path, error: &io::Error) {
    static SAID: AtomicBool = AtomicBool::new(false);
    if !SAID.swap(true, Ordering::Relaxed) {
        tracing::warn!(
            cgroup = %parent.display(),
            %error,
            "cannot make cgroups for plugins: a plugin's processes outside its process group \
             (setsid) cannot be killed"
        );
    }
}

/// The pids in the group, from `cgroup.procs`.
fn procs(dir: &Path) -> Vec<i32> {
    let mut text = String::new();
    let _ = File::open(dir.join("cgroup.procs")).and_then(|mut f| f.read_to_string(&mut text));
    text.lines().filter_map(|l| l.trim().parse().ok()).collect()
}

fn count_procs(dir: &Path) -> usize {
    procs(dir).len()
}

/// SIGKILL for everything in the group: `cgroup.kill` where the kernel has it (5.14), which
/// also catches processes forking meanwhile; else each listed pid, the group frozen so nobody
/// forks or exits (freeing its pid for reuse) between the listing and the signal.
fn kill_all(dir: &Path) {
    match write_file(&dir.join("cgroup.kill"), b"1") {
        Ok(()) => return,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => {
            tracing::warn!(cgroup = %dir.display(), error = %e, "cannot kill the plugin's cgroup");
            return;
        }
    }
    kill_listed(dir);
}

/// SIGKILL for each pid in the group's `cgroup.procs`, the group frozen meanwhile: the fallback
/// for kernels before 5.14. One round; a child forked before the freeze is found by the next.
fn kill_listed(dir: &Path) {
    let frozen = write_file(&dir.join("cgroup.freeze"), b"1").is_ok();
    for pid in procs(dir) {
        // ESRCH: gone meanwhile.
        let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
    }
    if frozen {
        // SIGKILLed frozen tasks still die; thawing is for anyone the signal missed.
        let _ = write_file(&dir.join("cgroup.freeze"), b"0");
    }
}

/// Whether `cgroup.events` says nothing lives in the group (or the group is gone).
fn is_empty(dir: &Path) -> bool {
    match fs::read_to_string(dir.join("cgroup.events")) {
        Ok(events) => events.lines().any(|l| l.trim() == "populated 0"),
        Err(e) => e.kind() == io::ErrorKind::NotFound,
    }
}

fn remove(dir: &Path) {
    match fs::remove_dir(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => tracing::warn!(
            cgroup = %dir.display(),
            error = %e,
            "cannot remove a plugin's cgroup: processes in it survived SIGKILL"
        ),
    }
}

fn write_file(path: &Path, data: &[u8]) -> io::Result<()> {
    OpenOptions::new().write(true).open(path)?.write_all(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_cgroup2_mount_on_hybrid_and_pure_v2_nodes() {
        let hybrid = "\
30 24 0:26 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755
31 30 0:27 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
32 30 0:28 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory";
        let found = |text: &str| cgroup2_mount(&node_primitives::mounts::parse(text.as_bytes()));
        assert_eq!(
            found(hybrid),
            Some(("/".into(), "/sys/fs/cgroup/unified".into()))
        );
        let v2 = "35 24 0:30 /kubepods/x /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate";
        assert_eq!(
            found(v2),
            Some(("/kubepods/x".into(), "/sys/fs/cgroup".into()))
        );
        let escaped = "35 24 0:30 / /sys/fs/my\\040cgroup rw - cgroup2 cgroup2 rw";
        assert_eq!(
            found(escaped),
            Some(("/".into(), "/sys/fs/my cgroup".into()))
        );
        assert_eq!(found("31 30 0:27 / /x rw - cgroup cgroup rw"), None);
        assert_eq!(found("garbage"), None);
    }

    /// The path kernels before 5.14 take (no `cgroup.kill`): each listed pid is killed, the group
    /// frozen meanwhile, and the group empties. Here a process forks children in a loop.
    #[test]
    #[ignore = "needs root + netns: cargo xtask test"]
    fn without_cgroup_kill_each_process_is_killed() {
        use std::os::unix::process::CommandExt as _;
        let mut group = PluginCgroup::create().expect("a writable cgroup2 hierarchy");
        let fd = group.procs_fd();
        let mut cmd = std::process::Command::new("sh");
        cmd.args(["-c", "while :; do sleep 1000 & sleep 0.01; done"]);
        // SAFETY: `join` is a single write(2), async-signal-safe; the descriptor is open.
        unsafe {
            cmd.pre_exec(move || join(fd));
        }
        let mut child = cmd.spawn().expect("spawn");
        while count_procs(&group.dir) < 5 {
            std::thread::sleep(Duration::from_millis(10));
        }
        let deadline = Instant::now() + EMPTY_WAIT;
        while !is_empty(&group.dir) {
            assert!(Instant::now() < deadline, "{:?} left", procs(&group.dir));
            kill_listed(&group.dir);
            std::thread::sleep(Duration::from_millis(1));
        }
        child.wait().expect("reaped");
        let dir = group.dir.clone();
        remove(&dir);
        assert!(!dir.exists());
        group.finished = true;
    }

    #[test]
    fn reads_the_unified_line_of_proc_self_cgroup() {
        let text = "4:memory:/x\n0::/system.slice/crio-lite.service\n";
        assert_eq!(own_cgroup(text), Some("/system.slice/crio-lite.service"));
        assert_eq!(own_cgroup("1:name=systemd:/\n"), None);
    }
}

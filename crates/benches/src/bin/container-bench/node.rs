//! The node the bench runs on: a network namespace and a mount namespace of its own (xtask starts
//! it under `unshare --mount` and `nsenter --net`), a cgroup tree of its own, and what is read
//! from them: CPU time per cgroup, resident memory per process.
//!
//! The private mount namespace is what lets everything go at the end: root file systems,
//! snapshots, pinned network namespaces and the tmpfs mounted over `/run/containerd` and
//! `/var/lib/cni` (where containerd 1.6 keeps its shim sockets and go-cni its result cache
//! whatever it is told) exist only in it, and vanish with its last process.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Fails unless this process runs in a network and a mount namespace other than its parent's
/// (xtask's, the machine's): the bench never changes the machine's own. (PID 1's namespaces
/// may not be readable, in a VM whose init is not an ordinary process.)
pub(crate) fn check_private_namespaces() -> Result<(), String> {
    let parent = nix::unistd::getppid();
    for ns in ["net", "mnt"] {
        let ours = std::fs::read_link(format!("/proc/self/ns/{ns}"))
            .map_err(|e| format!("/proc/self/ns/{ns}: {e}"))?;
        let theirs = std::fs::read_link(format!("/proc/{parent}/ns/{ns}"))
            .map_err(|e| format!("/proc/{parent}/ns/{ns}: {e}"))?;
        if ours == theirs {
            return Err(format!(
                "this process shares its parent's {ns} namespace: run it as xtask does, under \
                 `unshare --mount --propagation slave nsenter --net=/run/netns/NODE`"
            ));
        }
    }
    Ok(())
}

/// A tmpfs mounted over `dir` in this (private) mount namespace, unmounted on drop. `dir` is made
/// when missing (xtask removes it afterwards when it made it).
pub(crate) struct Tmpfs(PathBuf);

impl Tmpfs {
    pub(crate) fn mount(dir: &Path) -> Result<Tmpfs, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        nix::mount::mount(
            Some("tmpfs"),
            dir,
            Some("tmpfs"),
            nix::mount::MsFlags::empty(),
            Some("mode=0755"),
        )
        .map_err(|e| format!("mount a tmpfs on {}: {e}", dir.display()))?;
        Ok(Tmpfs(dir.to_owned()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = nix::mount::umount2(&self.0, nix::mount::MntFlags::MNT_DETACH);
    }
}

/// The cgroup hierarchies mounted here: (mount point, file system type, super options).
fn hierarchies() -> Vec<(PathBuf, String, String)> {
    node_primitives::mounts::read_own()
        .unwrap_or_default()
        .into_iter()
        .filter(|m| m.fs_type == "cgroup" || m.fs_type == "cgroup2")
        .map(|m| (m.mount_point, m.fs_type, m.super_options.join(",")))
        .collect()
}

/// The bench's cgroup tree: `/<root>` in every hierarchy. Daemons are put in a CPU-accounting
/// cgroup of their own below it; pods and containers are given cgroup parents below it, so that
/// whatever a failed run leaves can be found and killed.
pub(crate) struct Cgroups {
    root: String,
    /// cgroup v1's `cpuacct` hierarchy, or the v2 one where there is no v1 `cpuacct`.
    cpu_mount: PathBuf,
    v1: bool,
}

impl Cgroups {
    pub(crate) fn new(root: &str) -> Result<Cgroups, String> {
        let all = hierarchies();
        let v1 = all
            .iter()
            .find(|(_, kind, opts)| kind == "cgroup" && opts.split(',').any(|o| o == "cpuacct"));
        let (cpu_mount, v1) = match v1 {
            Some((point, _, _)) => (point.clone(), true),
            None => all
                .iter()
                .find(|(_, kind, _)| kind == "cgroup2")
                .map(|(point, _, _)| (point.clone(), false))
                .ok_or("no cgroup v1 cpuacct hierarchy and no cgroup v2 mounted")?,
        };
        Ok(Cgroups {
            root: root.to_owned(),
            cpu_mount,
            v1,
        })
    }

    /// `/<root>/<sub>`: a cgroup parent for pods, as CRI takes it.
    pub(crate) fn parent(&self, sub: &str) -> String {
        format!("/{}/{sub}", self.root)
    }

    /// A CPU-accounting cgroup `/<root>/<name>`, made.
    pub(crate) fn cpu_group(&self, name: &str) -> Result<CpuGroup, String> {
        let dir = self.cpu_mount.join(&self.root).join(name);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        Ok(CpuGroup { dir, v1: self.v1 })
    }

    /// The processes in cgroup `path` (as CRI names it, `/<root>/...`) of the CPU hierarchy.
    pub(crate) fn procs_of(&self, path: &str) -> Vec<u32> {
        procs(&self.cpu_mount.join(path.trim_start_matches('/')))
    }

    /// Every process left anywhere in the tree, in any hierarchy.
    pub(crate) fn leftover_procs(&self) -> Vec<u32> {
        let mut all = Vec::new();
        for (point, _, _) in hierarchies() {
            for dir in walk(&point.join(&self.root)) {
                all.extend(procs(&dir));
            }
        }
        all.sort_unstable();
        all.dedup();
        all
    }

    /// Kills every process in the tree and removes its cgroups, deepest first, in every
    /// hierarchy; keeps going past failures and says what stayed.
    pub(crate) fn remove_all(&self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let left = self.leftover_procs();
            for pid in &left {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(*pid as i32),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            let mut stayed = Vec::new();
            for (point, _, _) in hierarchies() {
                let mut dirs = walk(&point.join(&self.root));
                dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
                for dir in dirs {
                    if std::fs::remove_dir(&dir).is_err() && dir.exists() {
                        stayed.push(dir);
                    }
                }
            }
            if stayed.is_empty() {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!("cgroups stayed: {stayed:?}"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// `dir` and every directory below it (nothing when it does not exist).
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if dir.is_dir() {
        out.push(dir.to_owned());
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                out.extend(walk(&entry.path()));
            }
        }
    }
    out
}

fn procs(dir: &Path) -> Vec<u32> {
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// A cgroup whose CPU time is read: everything its processes and their descendants ran,
/// including processes that have exited (which a sum over `/proc` would lose once they are
/// reaped by someone else, as daemonized monitors are).
pub(crate) struct CpuGroup {
    dir: PathBuf,
    v1: bool,
}

impl CpuGroup {
    /// Its `cgroup.procs`: writing a pid there moves that process.
    pub(crate) fn procs_file(&self) -> PathBuf {
        self.dir.join("cgroup.procs")
    }

    /// CPU time (user + system) used in this cgroup so far.
    pub(crate) fn usage(&self) -> Duration {
        if self.v1 {
            let text = std::fs::read_to_string(self.dir.join("cpuacct.usage")).unwrap_or_default();
            Duration::from_nanos(text.trim().parse().unwrap_or(0))
        } else {
            let text = std::fs::read_to_string(self.dir.join("cpu.stat")).unwrap_or_default();
            let usec = text
                .lines()
                .find_map(|l| l.strip_prefix("usage_usec "))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            Duration::from_micros(usec)
        }
    }

    /// The processes in it now.
    pub(crate) fn procs(&self) -> Vec<u32> {
        procs(&self.dir)
    }
}

/// Resident and proportional set size of a process, KiB (0 when it is gone).
pub(crate) fn memory_kib(pid: u32) -> (u64, u64) {
    let field = |text: &str, name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
    (field(&status, "VmRSS:"), field(&rollup, "Pss:"))
}

/// The command name of a process.
pub(crate) fn comm(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .unwrap_or_default()
        .trim()
        .to_owned()
}

/// Mount points at or below `dir` in this mount namespace.
pub(crate) fn mounts_below(dir: &Path) -> Vec<PathBuf> {
    node_primitives::mounts::mounts_at_or_below(
        &node_primitives::mounts::read_own().unwrap_or_default(),
        dir,
    )
}

/// Unmounts (lazily, deepest first) everything at or below `dir`.
pub(crate) fn unmount_below(dir: &Path) {
    let mut points = mounts_below(dir);
    points.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    for p in points {
        let _ = nix::mount::umount2(&p, nix::mount::MntFlags::MNT_DETACH);
    }
}

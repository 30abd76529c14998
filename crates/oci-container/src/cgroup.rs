//! A container's resource usage, read from its cgroup on cgroup v1 and v2 (unified) alike.
//!
//! The cgroup is found the way the kernel tells it, not guessed from the container's id: the
//! container process's `/proc/<pid>/cgroup` names its cgroup in each hierarchy, and
//! `/proc/self/mountinfo` says where each hierarchy is mounted (and from which root, under a
//! cgroup namespace or a bind mount). Each controller is read where the process is in it: a v1
//! hierarchy that has it, else the unified one, which also covers hybrid hosts.
//!
//! Every file is read capped and only if it is a regular file; one that is missing (a
//! controller not enabled, a cgroup removed as the container exits) leaves its figure `None`.

use std::path::{Component, Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use node_primitives::MountEntry;
use safe_file::Symlinks;

use crate::error::{Error, Result, validate_id};
use crate::record::ProcessIdentity;
use crate::runtime::{Runtime, Status};

mod leaf;
pub(crate) mod oom;
pub mod systemd;
pub(crate) use leaf::{make_recorded, remove_recorded};
pub(crate) mod place;

/// The most read of one cgroup or `/proc` file (`memory.stat` is a few KiB, a mount table of a
/// busy host some hundreds).
const MAX_FILE: u64 = 1 << 20;
/// Memory limits at or above this are v1's way of saying "none" (`PAGE_COUNTER_MAX` in bytes).
const UNLIMITED: u64 = 1 << 62;

/// A container's resource usage at one moment, as its cgroup reports it; a figure its host
/// does not keep (a controller not enabled for it) is `None`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ContainerStats {
    /// When it was read, in nanoseconds since the Unix epoch.
    pub timestamp_ns: i64,
    /// CPU time used by all its processes, in nanoseconds (v1 `cpuacct.usage`, v2 `cpu.stat`
    /// `usage_usec`).
    pub cpu_usage_ns: Option<u64>,
    /// Memory charged to it, page cache included (v1 `memory.usage_in_bytes`, v2
    /// `memory.current`).
    pub memory_usage_bytes: Option<u64>,
    /// The usage less inactive file pages: what the kubelet evicts on (v1 `total_inactive_file`,
    /// v2 `inactive_file` of `memory.stat`).
    pub memory_working_set_bytes: Option<u64>,
    /// Anonymous memory (v1 `total_rss`, v2 `anon` of `memory.stat`).
    pub memory_rss_bytes: Option<u64>,
    /// The memory limit; `None` when there is none (v1 `memory.limit_in_bytes`, v2
    /// `memory.max`).
    pub memory_limit_bytes: Option<u64>,
    /// Page faults (`pgfault` of `memory.stat`).
    pub page_faults: Option<u64>,
    /// Major page faults (`pgmajfault` of `memory.stat`).
    pub major_page_faults: Option<u64>,
    /// Its processes and threads (`pids.current`).
    pub pids: Option<u64>,
}

impl Runtime {
    /// The resource usage of the running (or paused) container `id`, read from the cgroup its
    /// process is in.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidId`]; [`Error::NotRunning`] when it has no process (not started, or
    /// exited, also while it was being read); [`Error::File`] when a file cannot be read,
    /// [`Error::Corrupt`] when one does not hold what the kernel writes there; and those of
    /// [`Runtime::state`].
    pub async fn stats(&self, id: &str) -> Result<ContainerStats> {
        validate_id(id)?;
        let state = self.state(id).await?;
        let not_running = |state: &str| Error::NotRunning {
            container: id.to_owned(),
            state: state.to_owned(),
        };
        let who = match (&state.status, state.pid) {
            (Status::Running | Status::Paused, Some(pid)) => ProcessIdentity::of(pid),
            _ => None,
        }
        .ok_or_else(|| not_running("it has no process"))?;
        let dirs = process_dirs(id, who.pid)?.ok_or_else(|| not_running("it has no process"))?;
        // Read after the process was named: if it is still that process, the pid was not reused
        // and the cgroup is the container's.
        if !who.is_alive() {
            return Err(not_running("its process exited"));
        }
        read_stats(id, &dirs)
    }
}

/// Where process `pid`'s cgroups are, from its `/proc/<pid>/cgroup` and the mount table;
/// `None` when it has gone.
fn process_dirs(id: &str, pid: i32) -> Result<Option<Dirs>> {
    let Some(membership) = read_text(id, &PathBuf::from(format!("/proc/{pid}/cgroup")))? else {
        return Ok(None);
    };
    let mounts = node_primitives::mounts::read_own().map_err(|e| {
        Error::io(
            id,
            "read the mount table",
            Path::new(node_primitives::mounts::OWN_MOUNTINFO),
            e.into_io(),
        )
    })?;
    Ok(Some(Dirs::resolve(
        &parse_membership(&membership),
        &parse_mounts(&mounts),
    )))
}

/// One line of `/proc/<pid>/cgroup`: `hierarchy:controllers:path`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Membership {
    hierarchy: String,
    controllers: Vec<String>,
    path: String,
}

fn parse_membership(text: &str) -> Vec<Membership> {
    text.lines()
        .filter_map(|line| {
            let mut parts = line.splitn(3, ':');
            let (hierarchy, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            Some(Membership {
                hierarchy: hierarchy.to_owned(),
                controllers: controllers
                    .split(',')
                    .filter(|c| !c.is_empty())
                    .map(str::to_owned)
                    .collect(),
                path: path.to_owned(),
            })
        })
        .collect()
}

/// A cgroup file system in the mount table.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Mount {
    /// The cgroup mounted there (`/` but under a cgroup namespace or a bind mount).
    root: String,
    mountpoint: PathBuf,
    /// The v1 hierarchy's super options (its controllers among them); `None` for v2.
    v1_options: Option<Vec<String>>,
}

/// The cgroup mounts of a mount table.
fn parse_mounts(mounts: &[MountEntry]) -> Vec<Mount> {
    mounts
        .iter()
        .filter_map(|m| {
            let v1_options = match m.fs_type.as_str() {
                "cgroup" => Some(m.super_options.clone()),
                "cgroup2" => None,
                _ => return None,
            };
            Some(Mount {
                root: m.root.to_string_lossy().into_owned(),
                mountpoint: m.mount_point.clone(),
                v1_options,
            })
        })
        .collect()
}

/// A mount table's text, parsed, for tests.
#[cfg(test)]
fn table(text: &str) -> Vec<MountEntry> {
    node_primitives::mounts::parse(text.as_bytes())
}

/// Where a process's controllers are, per hierarchy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Dirs {
    cpuacct: Option<PathBuf>,
    memory: Option<PathBuf>,
    pids: Option<PathBuf>,
    unified: Option<PathBuf>,
}

impl Dirs {
    fn resolve(memberships: &[Membership], mounts: &[Mount]) -> Dirs {
        let v1 = |controller: &str| {
            let m = memberships
                .iter()
                .find(|m| m.controllers.iter().any(|c| c == controller))?;
            mounts
                .iter()
                .filter(|mount| {
                    mount
                        .v1_options
                        .as_ref()
                        .is_some_and(|o| o.iter().any(|c| c == controller))
                })
                .find_map(|mount| under(mount, &m.path))
        };
        let unified = memberships
            .iter()
            .find(|m| m.hierarchy == "0" && m.controllers.is_empty())
            .and_then(|m| {
                mounts
                    .iter()
                    .filter(|mount| mount.v1_options.is_none())
                    .find_map(|mount| under(mount, &m.path))
            });
        Dirs {
            cpuacct: v1("cpuacct"),
            memory: v1("memory"),
            pids: v1("pids"),
            unified,
        }
    }
}

/// The directory of the cgroup `path` in `mount`, if the mount reaches it.
fn under(mount: &Mount, path: &str) -> Option<PathBuf> {
    let root = mount.root.trim_end_matches('/');
    let rest = path.strip_prefix(root)?;
    // `/a/bc` is not under `/a/b`
    if !(rest.is_empty() || rest.starts_with('/')) {
        return None;
    }
    let rest = Path::new(rest.trim_start_matches('/'));
    if rest
        .components()
        .any(|c| !matches!(c, Component::Normal(_)))
    {
        return None;
    }
    Some(mount.mountpoint.join(rest))
}

fn read_stats(id: &str, dirs: &Dirs) -> Result<ContainerStats> {
    let mut stats = ContainerStats {
        timestamp_ns: now_ns(),
        ..ContainerStats::default()
    };
    let unified = dirs.unified.as_deref();

    stats.cpu_usage_ns = match (&dirs.cpuacct, unified) {
        (Some(dir), _) => read_number(id, &dir.join("cpuacct.usage"))?,
        (None, Some(dir)) => {
            let usec = read_keyed(id, &dir.join("cpu.stat"), "usage_usec")?;
            usec.map(|u| u.saturating_mul(1000))
        }
        (None, None) => None,
    };

    read_memory(id, dirs, &mut stats)?;

    stats.pids = match dirs.pids.as_deref().or(unified) {
        Some(dir) => read_number(id, &dir.join("pids.current"))?,
        None => None,
    };
    Ok(stats)
}

fn read_memory(id: &str, dirs: &Dirs, stats: &mut ContainerStats) -> Result<()> {
    let (dir, v1) = match (&dirs.memory, &dirs.unified) {
        (Some(dir), _) => (dir, true),
        (None, Some(dir)) => (dir, false),
        (None, None) => return Ok(()),
    };
    let stat_file = dir.join("memory.stat");
    let stat = read_text(id, &stat_file)?.unwrap_or_default();
    // v1 keeps the hierarchy's totals under `total_` (the plain names leave out child cgroups);
    // v2 has only the plain names, which count the whole subtree
    let first = |keys: &[&str]| -> Result<Option<u64>> {
        for key in keys {
            if let Some(v) = keyed_value(id, &stat_file, &stat, key)? {
                return Ok(Some(v));
            }
        }
        Ok(None)
    };
    let (usage, limit, inactive, rss) = if v1 {
        (
            read_number(id, &dir.join("memory.usage_in_bytes"))?,
            read_number(id, &dir.join("memory.limit_in_bytes"))?.filter(|&l| l < UNLIMITED),
            first(&["total_inactive_file", "inactive_file"])?,
            first(&["total_rss", "rss"])?,
        )
    } else {
        (
            read_number(id, &dir.join("memory.current"))?,
            // `max` is no limit
            read_text(id, &dir.join("memory.max"))?.and_then(|t| t.trim().parse().ok()),
            first(&["inactive_file"])?,
            first(&["anon"])?,
        )
    };
    stats.memory_usage_bytes = usage;
    stats.memory_limit_bytes = limit;
    stats.memory_working_set_bytes = match inactive {
        Some(inactive) => usage.map(|u| u.saturating_sub(inactive)),
        None => usage,
    };
    stats.memory_rss_bytes = rss;
    stats.page_faults = first(&["total_pgfault", "pgfault"])?;
    stats.major_page_faults = first(&["total_pgmajfault", "pgmajfault"])?;
    Ok(())
}

fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// A regular file's text, capped; `None` when it does not exist.
fn read_text(id: &str, path: &Path) -> Result<Option<String>> {
    match safe_file::read_regular(path, MAX_FILE, Symlinks::Refuse) {
        Ok(bytes) => Ok(Some(String::from_utf8_lossy(&bytes).into_owned())),
        // ENODEV: a cgroup file whose cgroup was removed while open
        Err(e) if e.is_not_found() || is_enodev(&e) => Ok(None),
        Err(e) => Err(Error::file(id, e)),
    }
}

fn is_enodev(e: &safe_file::Error) -> bool {
    matches!(e, safe_file::Error::Io { source, .. } if source.raw_os_error() == Some(libc::ENODEV))
}

fn read_number(id: &str, path: &Path) -> Result<Option<u64>> {
    let Some(text) = read_text(id, path)? else {
        return Ok(None);
    };
    text.trim().parse().map(Some).map_err(|_| Error::Corrupt {
        container: id.to_owned(),
        path: path.to_owned(),
        reason: format!("not a number: {:?}", text.trim()),
    })
}

/// The value of `key` in a flat keyed file (`cpu.stat`, `memory.stat`): `key value` lines.
fn read_keyed(id: &str, path: &Path, key: &str) -> Result<Option<u64>> {
    let text = read_text(id, path)?.unwrap_or_default();
    keyed_value(id, path, &text, key)
}

fn keyed_value(id: &str, path: &Path, text: &str, key: &str) -> Result<Option<u64>> {
    let Some(value) = text.lines().find_map(|line| {
        let (k, v) = line.split_once(' ')?;
        (k == key).then_some(v.trim())
    }) else {
        return Ok(None);
    };
    value.parse().map(Some).map_err(|_| Error::Corrupt {
        container: id.to_owned(),
        path: path.to_owned(),
        reason: format!("{key} is not a number: {value:?}"),
    })
}

#[cfg(test)]
mod tests;

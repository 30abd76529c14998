//! Where a runtime's own processes go in the cgroup tree, by the node's cgroup manager: conmon
//! beside its pod (`conmon_cgroup = "pod"`) or in a slice, as CRI-O places it; and, after a
//! crash, the systemd scopes nothing records any more.
//!
//! With cgroupfs, conmon's cgroup `<parent>/crio-conmon-<id>` is made in every hierarchy, its
//! directories recorded in the container's state directory before conmon is moved (so a removal
//! after a crash finds them), and removed with the container. With systemd, conmon gets the
//! scope `crio-conmon-<id>.scope` through D-Bus; systemd removes it once conmon has exited
//! (`CollectMode=inactive-or-failed`), and a removal stops it if it is still there.

use std::path::Path;
use std::time::{Duration, Instant};

use tokio::sync::OnceCell;

use super::systemd::Systemd;
use crate::cgroup_manager::{CgroupManager, ConmonCgroup};
use crate::error::{Error, Result};

/// The record of conmon's cgroupfs directories, in the container's state directory.
const CONMON_CGROUP_RECORD: &str = "conmon.cgroup";
/// How long a removal waits for conmon's cgroup to empty.
const REMOVE_WAIT: Duration = Duration::from_secs(5);

/// The node's cgroup manager, conmon's place, and (with systemd) the bus connection, made on
/// first use and shared by every clone of the runtime.
#[derive(Debug, Default)]
pub(crate) struct Cgroups {
    pub(crate) manager: CgroupManager,
    pub(crate) conmon: ConmonCgroup,
    systemd: OnceCell<Systemd>,
}

/// The name of conmon's cgroup or scope for container `id`.
fn conmon_name(id: &str) -> String {
    format!("crio-conmon-{id}")
}

impl Cgroups {
    pub(crate) fn new(manager: CgroupManager, conmon: ConmonCgroup) -> Cgroups {
        Cgroups {
            manager,
            conmon,
            systemd: OnceCell::new(),
        }
    }

    /// The connection to systemd, made on first use.
    pub(crate) async fn systemd(&self, id: &str) -> Result<&Systemd> {
        self.systemd
            .get_or_try_init(Systemd::connect)
            .await
            .map_err(|e| Error::config(id, e.to_string()))
    }

    /// Moves the running conmon `pid` of container `id` (whose cgroup is `cgroups_path` in the
    /// manager's notation) to its place. `dir` is the container's state directory.
    pub(crate) async fn place_conmon(
        &self,
        id: &str,
        pid: i32,
        cgroups_path: &str,
        dir: &Path,
        owner: &str,
    ) -> Result<()> {
        match self.manager {
            CgroupManager::Systemd => {
                let slice = match &self.conmon {
                    ConmonCgroup::Slice(slice) => slice.as_str(),
                    ConmonCgroup::Pod => cgroups_path
                        .split(':')
                        .next()
                        .filter(|slice| !slice.is_empty())
                        .unwrap_or(CgroupManager::Systemd.default_parent()),
                };
                let unit = format!("{}.scope", conmon_name(id));
                let what = description(owner, "conmon of container", id);
                self.start_scope(id, &unit, slice, pid, &what).await
            }
            CgroupManager::Cgroupfs => {
                let pid = u32::try_from(pid)
                    .map_err(|_| Error::config(id, format!("conmon's pid {pid} is not a pid")))?;
                let parent = Path::new(cgroups_path).parent().unwrap_or(Path::new("/"));
                let record = dir.join(CONMON_CGROUP_RECORD);
                let dirs =
                    super::make_recorded(id, "conmon's cgroup", parent, &conmon_name(id), &record)?;
                for leaf in &dirs {
                    std::fs::write(leaf.join("cgroup.procs"), pid.to_string())
                        .map_err(|e| Error::io(id, "move conmon into", leaf, e))?;
                }
                Ok(())
            }
        }
    }

    /// With systemd, moves the running init `pid` of pod `pod` into the scope `crio-<pod>.scope`
    /// in the pod's slice `parent`; nothing to do with cgroupfs, where the init made its own
    /// leaf. Each of the pod's containers asks: an init already in its scope stays there.
    pub(crate) async fn place_pod_init(
        &self,
        pod: &str,
        pid: i32,
        parent: &str,
        owner: &str,
    ) -> Result<()> {
        if self.manager != CgroupManager::Systemd {
            return Ok(());
        }
        let unit = format!("crio-{pod}.scope");
        let cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
        if cgroup
            .lines()
            .any(|line| line.ends_with(&format!("/{unit}")))
        {
            return Ok(());
        }
        let what = description(owner, "init of pod", pod);
        self.start_scope(pod, &unit, parent, pid, &what).await
    }

    /// Starts the scope `unit` in `slice` around the running process `pid` of `id` (a
    /// container or pod), its description `what`.
    async fn start_scope(
        &self,
        id: &str,
        unit: &str,
        slice: &str,
        pid: i32,
        what: &str,
    ) -> Result<()> {
        let pid = u32::try_from(pid)
            .map_err(|_| Error::config(id, format!("{pid} is not a pid (for {unit})")))?;
        self.systemd(id)
            .await?
            .start_scope(unit, slice, pid, what)
            .await
            .map_err(|e| Error::config(id, e.to_string()))
    }

    /// Removes conmon's cgroup (cgroupfs) or stops its scope if systemd still has it; conmon
    /// has exited or been killed. Nothing there is fine.
    pub(crate) async fn release_conmon(&self, id: &str, dir: &Path) -> Result<()> {
        match self.manager {
            CgroupManager::Systemd => {
                let unit = format!("{}.scope", conmon_name(id));
                self.systemd(id)
                    .await?
                    .stop_unit(&unit)
                    .await
                    .map(drop)
                    .map_err(|e| Error::config(id, e.to_string()))
            }
            CgroupManager::Cgroupfs => super::remove_recorded(
                id,
                "remove conmon's cgroup",
                &dir.join(CONMON_CGROUP_RECORD),
                Instant::now() + REMOVE_WAIT,
            ),
        }
    }

    /// With systemd, stops every scope this runtime started (its description names `owner`)
    /// whose container or pod `known` does not hold, with the container's own scope
    /// `crio-<id>.scope` beside a stray conmon's: what lost records leave running. Scopes of
    /// other runtimes and daemons on the node are left alone. Returns the units stopped; none
    /// with cgroupfs.
    pub(crate) async fn stop_strays(
        &self,
        owner: &str,
        known: &(dyn Fn(&str) -> bool + Sync),
    ) -> Result<Vec<String>> {
        if self.manager != CgroupManager::Systemd {
            return Ok(Vec::new());
        }
        let systemd = self.systemd("-").await?;
        let units = systemd
            .units("crio-*.scope")
            .await
            .map_err(|e| Error::config("-", e.to_string()))?;
        let mut stopped = Vec::new();
        for (unit, text) in units {
            let Some(id) = scope_owner(&unit) else {
                continue;
            };
            if !text.starts_with(&description_prefix(owner)) || known(id) {
                continue;
            }
            let mut strays = vec![unit.clone()];
            if unit.starts_with("crio-conmon-") {
                strays.push(format!("crio-{id}.scope"));
            }
            for stray in strays {
                tracing::warn!(unit = stray, "stopping a scope no container or pod records");
                if systemd
                    .stop_unit(&stray)
                    .await
                    .map_err(|e| Error::config(id, e.to_string()))?
                {
                    stopped.push(stray);
                }
            }
        }
        Ok(stopped)
    }
}

/// A scope's description: who started it (`owner`, the runtime's state directory), then what
/// it holds.
pub(crate) fn description(owner: &str, what: &str, id: &str) -> String {
    format!("{}{what} {id}", description_prefix(owner))
}

/// What every description of `owner`'s scopes starts with.
fn description_prefix(owner: &str) -> String {
    format!("crio-lite {owner}: ")
}

/// The id a `crio-<id>.scope` or `crio-conmon-<id>.scope` is named after.
pub(crate) fn scope_owner(unit: &str) -> Option<&str> {
    let stem = unit.strip_prefix("crio-")?.strip_suffix(".scope")?;
    let id = stem.strip_prefix("conmon-").unwrap_or(stem);
    (!id.is_empty()).then_some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_are_owned_by_the_id_in_their_name() {
        assert_eq!(scope_owner("crio-abc.scope"), Some("abc"));
        assert_eq!(scope_owner("crio-conmon-abc.scope"), Some("abc"));
        assert_eq!(scope_owner("crio-.scope"), None);
        assert_eq!(scope_owner("crio-conmon-.scope"), None);
        assert_eq!(scope_owner("crio-abc.service"), None);
        assert_eq!(scope_owner("session-1.scope"), None);
    }

    #[test]
    fn a_scopes_description_says_whose_it_is() {
        let mine = description("/run/crio-lite/oci/crun", "conmon of container", "abc");
        assert!(mine.starts_with(&description_prefix("/run/crio-lite/oci/crun")));
        // Another daemon's state directory, even one that extends this one's name, is not ours.
        assert!(!mine.starts_with(&description_prefix("/run/crio-lite/oci/cr")));
        assert!(
            !description("/run/crio-lite/oci/crun2", "conmon of container", "abc")
                .starts_with(&description_prefix("/run/crio-lite/oci/crun"))
        );
    }
}

//! Changing a running container in place: `pause`, `resume` and `update` (its cgroup limits).

use std::ffi::OsStr;
use std::sync::atomic::{AtomicU64, Ordering};

use safe_file::Durability;

use crate::config::Resources;
use crate::error::{Error, Result, validate_id};
use crate::runtime::Runtime;
use crate::spec;

impl Runtime {
    /// Freezes every process of the container (`<runtime> pause`); its status becomes
    /// [`Status::Paused`](crate::Status::Paused).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidId`], [`Error::NotFound`], [`Error::Runtime`] with its message (a
    /// container that is not running), [`Error::Timeout`].
    pub async fn pause(&self, id: &str) -> Result<()> {
        validate_id(id)?;
        self.runtime_ok(id, "pause", &["pause", id]).await.map(drop)
    }

    /// Thaws a paused container (`<runtime> resume`).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidId`], [`Error::NotFound`], [`Error::NotPaused`] (the runtimes disagree:
    /// runc refuses, crun says nothing), [`Error::Runtime`] with its message, [`Error::Timeout`].
    pub async fn resume(&self, id: &str) -> Result<()> {
        validate_id(id)?;
        let status = self.state(id).await?.status;
        if status != crate::Status::Paused {
            return Err(Error::NotPaused {
                container: id.to_owned(),
                state: match status {
                    crate::Status::Other(raw) => raw,
                    known => format!("{known:?}").to_lowercase(),
                },
            });
        }
        self.runtime_ok(id, "resume", &["resume", id])
            .await
            .map(drop)
    }

    /// Changes the container's CPU, memory and pids limits to those `resources` sets
    /// (`<runtime> update --resources <file>` with the OCI `LinuxResources` JSON); a limit left
    /// `None` keeps its value. [`Resources::oom_score_adj`] belongs to the process, not its
    /// cgroup, and cannot change after create: it must be `None` here.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidId`]; [`Error::InvalidConfig`] for a limit the spec cannot say (a memory
    /// limit that is not positive) or an `oom_score_adj`; [`Error::NotFound`] when this runtime
    /// did not create the container (it has no state directory) or the runtime does not know it;
    /// [`Error::File`] when the resources file cannot be written; [`Error::Runtime`] with its
    /// message (a memory limit below what the container uses), [`Error::Timeout`].
    pub async fn update(&self, id: &str, resources: &Resources) -> Result<()> {
        validate_id(id)?;
        if resources.oom_score_adj.is_some() {
            return Err(Error::config(
                id,
                "oom_score_adj cannot be updated: it is set when the container is created",
            ));
        }
        let limits = spec::limits(id, resources)?;
        let json = serde_json::to_vec(&limits)
            .map_err(|e| Error::config(id, format!("cannot serialize the resources: {e}")))?;
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = self.container_dir(id);
        if !dir.is_dir() {
            // not one of ours, or removed: say so rather than fail to write a file in it
            return Err(Error::NotFound {
                container: id.to_owned(),
                runtime: self.runtime_path().to_owned(),
            });
        }
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let file = dir.join(format!("update-{}-{n}.json", std::process::id()));
        safe_file::write_atomic(&file, &json, 0o600, Durability::Unsynced)
            .map_err(|e| Error::file(id, e))?;
        let args = [
            OsStr::new("update"),
            OsStr::new("--resources"),
            file.as_os_str(),
            OsStr::new(id),
        ];
        let result = self.runtime_os_ok(id, "update", &args).await.map(drop);
        let _ = std::fs::remove_file(&file);
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_update_json_has_the_limits_and_nothing_else() {
        let r = Resources {
            cpu_shares: Some(512),
            cpu_quota: Some(50_000),
            cpu_period: Some(100_000),
            cpuset_cpus: Some("0-1".into()),
            cpuset_mems: Some("0".into()),
            memory_limit: Some(64 << 20),
            oom_score_adj: None,
            pids_limit: Some(100),
            hugepage_limits: Vec::new(),
            unified: std::collections::BTreeMap::new(),
        };
        let json = serde_json::to_value(spec::limits("c1", &r).unwrap()).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "cpu": {
                    "shares": 512, "quota": 50_000, "period": 100_000, "cpus": "0-1", "mems": "0"
                },
                "memory": {"limit": 67_108_864},
                "pids": {"limit": 100},
            })
        );
        let only_memory = Resources {
            memory_limit: Some(8 << 20),
            ..Resources::default()
        };
        let json = serde_json::to_value(spec::limits("c1", &only_memory).unwrap()).unwrap();
        assert_eq!(json, serde_json::json!({"memory": {"limit": 8_388_608}}));
    }

    #[tokio::test]
    async fn limits_the_spec_cannot_say_are_refused_naming_the_container() {
        let dir = tempfile::tempdir().unwrap();
        let rt = Runtime::new("/nonexistent/runc", "/nonexistent/conmon", dir.path());
        let bad = Resources {
            memory_limit: Some(0),
            ..Resources::default()
        };
        let err = rt.update("c1", &bad).await.unwrap_err().to_string();
        assert_eq!(err, "container c1: memory limit 0 is not positive");
        let oom = Resources {
            oom_score_adj: Some(5),
            ..Resources::default()
        };
        let err = rt.update("c1", &oom).await.unwrap_err().to_string();
        assert!(
            err.starts_with("container c1: oom_score_adj cannot be updated"),
            "{err}"
        );
    }
}

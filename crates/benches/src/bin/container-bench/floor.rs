//! The floor under a CRI container: the same bundle run by bare runc, and by runc under conmon
//! as crio-lite starts it, in the same run, in the same node.
//!
//! The bundle is crio-lite's own: the `config.json` it wrote for a container of the run (same
//! process, namespaces joined, mounts, seccomp profile, capabilities), its root file system
//! copied once to a directory, untimed, and only the cgroup path changed per container. What the
//! floor leaves out is therefore what crio-lite adds around the runtime: the CRI call, the
//! overlay mount of the root file system, the spec generation, state saves, waiting for exits.
//!
//! - **runc**: `runc run -d` (create + start in one process), `runc kill KILL` and the wait until
//!   the process is dead (`/proc` polled every ms), `runc delete`.
//! - **conmon**: what `oci-container` runs for `Runtime::create`: conmon with the same
//!   arguments, which daemonizes and runs `runc create`, reporting the container's pid on its
//!   sync pipe (timed until the report); then `runc start`; `runc kill KILL` and the wait for
//!   conmon's exit file (polled every ms); `runc delete`.
//!
//! The monitor's start is then (conmon + `runc create`) + `runc start` − `runc run -d`: what
//! starting through conmon, as CRI's separate create and start calls must, costs beyond the
//! bare runtime.

use std::os::fd::AsRawFd as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::AsyncReadExt as _;

const RUNC: &str = "/usr/sbin/runc";
const CONMON: &str = "/usr/bin/conmon";
/// How often the floor looks for an exit: 1 ms, so its waits are not what it measures.
const POLL: Duration = Duration::from_millis(1);
/// Any step longer than this is stuck.
const STEP_TIMEOUT: Duration = Duration::from_secs(30);

pub(crate) struct Floor {
    dir: PathBuf,
    template: Value,
    cgroup_parent: String,
    next: AtomicUsize,
}

impl Floor {
    /// From crio-lite's bundle of a created (or running) container: its `config.json`, and its
    /// root file system copied under `dir`.
    pub(crate) fn from_bundle(
        bundle: &Path,
        dir: &Path,
        cgroup_parent: String,
    ) -> Result<Floor, String> {
        let io = |p: &Path, e: std::io::Error| format!("{}: {e}", p.display());
        let config = bundle.join("config.json");
        let text = std::fs::read_to_string(&config).map_err(|e| io(&config, e))?;
        let mut template: Value =
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", config.display()))?;
        let source = PathBuf::from(
            template["root"]["path"]
                .as_str()
                .ok_or("crio-lite's config.json has no root.path")?,
        );
        let rootfs = dir.join("rootfs");
        for sub in ["rootfs", "bundles", "exits", "attach", "persist", "logs"] {
            std::fs::create_dir_all(dir.join(sub)).map_err(|e| io(&dir.join(sub), e))?;
        }
        let copy = std::process::Command::new("cp")
            .arg("-a")
            .arg(source.join("."))
            .arg(&rootfs)
            .output()
            .map_err(|e| format!("cp: {e}"))?;
        if !copy.status.success() {
            return Err(format!(
                "cp -a {} {}: {}",
                source.display(),
                rootfs.display(),
                String::from_utf8_lossy(&copy.stderr)
            ));
        }
        template["root"]["path"] = Value::from(rootfs.display().to_string());
        Ok(Floor {
            dir: dir.to_owned(),
            template,
            cgroup_parent,
            next: AtomicUsize::new(0),
        })
    }

    /// The seccomp profile's presence and the command, to show the bundle is the workload's.
    pub(crate) fn describe(&self) -> Value {
        serde_json::json!({
            "args": self.template["process"]["args"],
            "seccomp": self.template["linux"]["seccomp"].is_object(),
            "namespaces": self.template["linux"]["namespaces"],
        })
    }

    fn runc_root(&self) -> PathBuf {
        self.dir.join("runc")
    }

    /// A new container id and its bundle (untimed): the template with its own cgroup.
    fn bundle(&self, kind: &str) -> Result<(String, PathBuf), String> {
        let id = format!("{kind}-{}", self.next.fetch_add(1, Ordering::Relaxed));
        let bundle = self.dir.join("bundles").join(&id);
        std::fs::create_dir_all(&bundle).map_err(|e| format!("{}: {e}", bundle.display()))?;
        let mut config = self.template.clone();
        config["linux"]["cgroupsPath"] = Value::from(format!("{}/{id}", self.cgroup_parent));
        let file = bundle.join("config.json");
        std::fs::write(&file, config.to_string())
            .map_err(|e| format!("{}: {e}", file.display()))?;
        Ok((id, bundle))
    }

    /// `runc --root <ours> args...`, its failure with runc's words.
    async fn runc(&self, args: &[&str]) -> Result<(), String> {
        let out = tokio::time::timeout(
            STEP_TIMEOUT,
            tokio::process::Command::new(RUNC)
                .arg("--root")
                .arg(self.runc_root())
                .args(args)
                .stdin(Stdio::null())
                .output(),
        )
        .await
        .map_err(|_| format!("runc {} took over {STEP_TIMEOUT:?}", args.join(" ")))?
        .map_err(|e| format!("runc: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "runc {} failed ({}): {}",
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(())
    }

    /// `runc run -d`, `runc kill KILL` + the wait for the process's death, `runc delete`.
    pub(crate) async fn runc_cycle(&self) -> Result<[Duration; 3], String> {
        let (id, bundle) = self.bundle("floor")?;
        let pidfile = bundle.join("pid");
        let log = bundle.join("runc.log");
        let stderr = std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        let t0 = Instant::now();
        // The container inherits runc's stdio: nothing may be a pipe this side waits on.
        let status = tokio::time::timeout(
            STEP_TIMEOUT,
            tokio::process::Command::new(RUNC)
                .arg("--root")
                .arg(self.runc_root())
                .args(["run", "-d", "--pid-file"])
                .arg(&pidfile)
                .arg("--bundle")
                .arg(&bundle)
                .arg(&id)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(stderr)
                .status(),
        )
        .await
        .map_err(|_| format!("runc run {id} took over {STEP_TIMEOUT:?}"))?
        .map_err(|e| format!("runc: {e}"))?;
        if !status.success() {
            return Err(format!(
                "runc run -d {id} failed ({status}): {}",
                std::fs::read_to_string(&log).unwrap_or_default().trim()
            ));
        }
        let t1 = Instant::now();
        let pid = read_pid(&pidfile)?;
        self.runc(&["kill", &id, "KILL"]).await?;
        wait_until(|| is_dead(pid), &id).await?;
        let t2 = Instant::now();
        self.runc(&["delete", &id]).await?;
        let t3 = Instant::now();
        let _ = std::fs::remove_dir_all(&bundle);
        Ok([t1 - t0, t2 - t1, t3 - t2])
    }

    /// conmon + `runc create` (until conmon reports the pid), `runc start`, `runc kill KILL` +
    /// the wait for conmon's exit file, `runc delete`.
    pub(crate) async fn conmon_cycle(&self) -> Result<[Duration; 4], String> {
        let (id, bundle) = self.bundle("conmon")?;
        let persist = self.dir.join("persist").join(&id);
        std::fs::create_dir_all(&persist).map_err(|e| format!("{}: {e}", persist.display()))?;
        let exit_file = self.dir.join("exits").join(&id);
        let log = self.dir.join("logs").join(format!("{id}.log"));
        let t0 = Instant::now();
        let pid = self.start_conmon(&id, &bundle, &persist, &log).await?;
        let t1 = Instant::now();
        self.runc(&["start", &id]).await?;
        let t2 = Instant::now();
        self.runc(&["kill", &id, "KILL"]).await?;
        wait_until(|| exit_file.exists(), &id).await?;
        let t3 = Instant::now();
        self.runc(&["delete", &id]).await?;
        let t4 = Instant::now();
        // Untimed: conmon exits after writing the exit file; then its files go.
        if let Ok(conmon) = read_pid(&persist.join("conmon.pid")) {
            let _ = wait_until(|| is_dead(conmon), &id).await;
        }
        let _ = pid;
        for path in [&bundle, &persist] {
            let _ = std::fs::remove_dir_all(path);
        }
        let _ = std::fs::remove_file(&exit_file);
        let _ = std::fs::remove_file(&log);
        Ok([t1 - t0, t2 - t1, t3 - t2, t4 - t3])
    }

    /// conmon as `oci_container::Runtime::create` starts it; the container's pid from its report.
    async fn start_conmon(
        &self,
        id: &str,
        bundle: &Path,
        persist: &Path,
        log: &Path,
    ) -> Result<i32, String> {
        let (sync_read, sync_write) =
            nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| format!("pipe: {e}"))?;
        let root_arg = format!("--root={}", self.runc_root().display());
        let mut cmd = tokio::process::Command::new(CONMON);
        cmd.args(["--cid", id, "--cuuid", id, "--name", id])
            .arg("--bundle")
            .arg(bundle)
            .args(["--runtime", RUNC, "--runtime-arg", &root_arg])
            .arg("--log-path")
            .arg(log)
            .arg("--exit-dir")
            .arg(self.dir.join("exits"))
            .arg("--conmon-pidfile")
            .arg(persist.join("conmon.pid"))
            .arg("--container-pidfile")
            .arg(persist.join("pidfile"))
            .arg("--persist-dir")
            .arg(persist)
            .arg("--socket-dir-path")
            .arg(self.dir.join("attach"))
            .current_dir(bundle)
            .env_clear()
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
            .env("_OCI_SYNCPIPE", sync_write.as_raw_fd().to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0);
        let fd = sync_write.as_raw_fd();
        // SAFETY: runs in the child between fork and exec, where only async-signal-safe calls
        // are allowed; fcntl(2) is one and nothing here allocates or locks. It hands conmon its
        // sync pipe (as oci-container does) without leaking it into other children.
        unsafe {
            cmd.pre_exec(move || {
                if libc::fcntl(fd, libc::F_SETFD, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start conmon: {e}"))?;
        drop(sync_write);
        let status = tokio::time::timeout(STEP_TIMEOUT, child.wait())
            .await
            .map_err(|_| format!("conmon for {id} did not daemonize"))?
            .map_err(|e| format!("conmon: {e}"))?;
        if !status.success() {
            return Err(format!("conmon for {id} failed ({status})"));
        }
        let mut pipe = tokio::net::unix::pipe::Receiver::from_owned_fd(sync_read)
            .map_err(|e| format!("sync pipe: {e}"))?;
        let mut report = Vec::new();
        let read = async {
            let mut buf = [0u8; 4096];
            loop {
                let n = pipe.read(&mut buf).await?;
                report.extend_from_slice(&buf[..n]);
                if n == 0 || report.contains(&b'\n') {
                    return Ok::<(), std::io::Error>(());
                }
            }
        };
        tokio::time::timeout(STEP_TIMEOUT, read)
            .await
            .map_err(|_| format!("conmon for {id} did not report"))?
            .map_err(|e| format!("sync pipe: {e}"))?;
        let line = String::from_utf8_lossy(&report);
        let v: Value = serde_json::from_str(line.lines().next().unwrap_or(""))
            .map_err(|e| format!("conmon for {id} reported {line:?}: {e}"))?;
        match v["pid"].as_i64().or_else(|| v["data"].as_i64()) {
            Some(pid) if pid > 0 => Ok(pid as i32),
            _ => Err(format!("runc create {id} failed: {line}")),
        }
    }
}

/// The containers runc knows under `root` (`runc list -q`).
pub(crate) fn runc_list(root: &Path) -> Vec<String> {
    let Ok(out) = std::process::Command::new(RUNC)
        .arg("--root")
        .arg(root)
        .args(["list", "-q"])
        .output()
    else {
        return Vec::new();
    };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Force-deletes whatever runc knows under `root` (after a failure).
pub(crate) fn runc_delete_all(root: &Path) {
    for id in runc_list(root) {
        let _ = std::process::Command::new(RUNC)
            .arg("--root")
            .arg(root)
            .args(["delete", "--force", &id])
            .output();
    }
}

fn read_pid(file: &Path) -> Result<i32, String> {
    std::fs::read_to_string(file)
        .map_err(|e| format!("{}: {e}", file.display()))?
        .trim()
        .parse()
        .map_err(|e| format!("{}: {e}", file.display()))
}

/// Dead: gone, or a zombie nobody has reaped yet (runc counts that as stopped too).
fn is_dead(pid: i32) -> bool {
    node_primitives::ProcStat::of(pid).is_none_or(|s| s.has_exited())
}

async fn wait_until(done: impl Fn() -> bool, id: &str) -> Result<(), String> {
    let deadline = Instant::now() + STEP_TIMEOUT;
    while !done() {
        if Instant::now() > deadline {
            return Err(format!("{id} did not exit within {STEP_TIMEOUT:?}"));
        }
        tokio::time::sleep(POLL).await;
    }
    Ok(())
}

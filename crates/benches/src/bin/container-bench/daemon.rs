//! The two CRI daemons, each started privately under the work directory in a CPU-accounting
//! cgroup of its own, so its CPU time is its own and its monitors' (conmon, or containerd's
//! shims), their runtime and plugin processes', exited ones included.
//!
//! - crio-lite: the release binary, a configuration file of the bench's own (runc with its own
//!   root, the local registry insecure, a policy accepting everything, no hooks), as its
//!   container e2e tests configure it.
//! - containerd 1.6 (Debian's) with its built-in CRI plugin: its own root, state, socket and
//!   config.toml; CNI from the same plugins; `restrict_oom_score_adj` (no CAP_SYS_RESOURCE
//!   here); the pause look-alike as `sandbox_image`; the local registry over plain HTTP through
//!   a `hosts.toml` under `registry.config_path`; network namespaces pinned under its state
//!   directory; runc's state under its own root.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::cri::Cri;
use crate::node::CpuGroup;

/// A daemon process, killed on drop if it still runs.
pub(crate) struct Daemon {
    name: &'static str,
    child: Child,
    log: PathBuf,
    pub(crate) socket: PathBuf,
    pub(crate) cpu: CpuGroup,
}

impl Daemon {
    /// Starts `program args` in `cpu`'s cgroup: a shell writes its own pid there, then execs
    /// the daemon, so every process the daemon ever forks is accounted.
    fn spawn(
        name: &'static str,
        program: &Path,
        args: &[String],
        log: PathBuf,
        socket: PathBuf,
        cpu: CpuGroup,
    ) -> Result<Daemon, String> {
        let out = std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        let err = out.try_clone().map_err(|e| e.to_string())?;
        let child = Command::new("/bin/sh")
            .arg("-c")
            .arg("echo $$ > \"$0\" && exec \"$@\"")
            .arg(cpu.procs_file())
            .arg(program)
            .args(args)
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", program.display()))?;
        Ok(Daemon {
            name,
            child,
            log,
            socket,
            cpu,
        })
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Connects once the daemon answers `Status` with its runtime and network ready.
    pub(crate) async fn wait_ready(&mut self) -> Result<Cri, String> {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut last = String::from("no socket yet");
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!(
                    "{} exited at start-up ({status}); its log ends:\n{}",
                    self.name,
                    self.log_tail()
                ));
            }
            if self.socket.exists() {
                match Cri::connect(&self.socket).await {
                    Ok(cri) => match cri.ready().await {
                        Ok(()) => return Ok(cri),
                        Err(e) => last = e,
                    },
                    Err(e) => last = e,
                }
            }
            // Fine-grained: start to ready is measured through this loop.
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        Err(format!(
            "{} not ready within 60 s ({last}); its log ends:\n{}",
            self.name,
            self.log_tail()
        ))
    }

    /// SIGTERM, then up to 20 s for it to exit; SIGKILL after that.
    pub(crate) fn terminate(&mut self) -> Result<(), String> {
        if let Ok(Some(status)) = self.child.try_wait() {
            return Err(format!("{} exited early ({status})", self.name));
        }
        let pid = nix::unistd::Pid::from_raw(self.pid() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            match self.child.try_wait() {
                Ok(Some(_)) => return Ok(()),
                _ => std::thread::sleep(Duration::from_millis(20)),
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        Err(format!("{} did not stop within 20 s of SIGTERM", self.name))
    }

    pub(crate) fn log_path(&self) -> &Path {
        &self.log
    }

    pub(crate) fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A conflist of the real bridge and host-local plugins (each runtime brings up loopback
/// itself), its leases under `ipam`.
pub(crate) fn write_conflist(
    dir: &Path,
    network: &str,
    bridge: &str,
    subnet: &str,
    ipam: &Path,
) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let conf = serde_json::json!({
        "cniVersion": "1.0.0", "name": network,
        "plugins": [
            {"type": "bridge", "bridge": bridge, "isGateway": true, "ipMasq": true,
             "hairpinMode": true,
             "ipam": {"type": "host-local", "dataDir": ipam, "routes": [{"dst": "0.0.0.0/0"}],
                      "ranges": [[{"subnet": subnet}]]}},
        ],
    });
    let file = dir.join(format!("10-{network}.conflist"));
    std::fs::write(&file, conf.to_string()).map_err(|e| format!("{}: {e}", file.display()))
}

/// Where crio-lite keeps everything, under `dir`.
pub(crate) struct CrioLite {
    pub(crate) dir: PathBuf,
}

/// The CNI network crio-lite's pods join.
pub(crate) const CRIO_NETWORK: &str = "ctrbench-crio";
/// containerd's.
pub(crate) const CONTAINERD_NETWORK: &str = "ctrbench-containerd";

impl CrioLite {
    pub(crate) fn runc_root(&self) -> PathBuf {
        self.dir.join("runc")
    }

    /// `<runroot>/containers/<id>`: the bundle crio-lite wrote for container `id`.
    pub(crate) fn bundle(&self, id: &str) -> PathBuf {
        self.dir.join("run/containers").join(id)
    }

    pub(crate) fn start(
        &self,
        binary: &Path,
        registry: &str,
        cpu: CpuGroup,
    ) -> Result<Daemon, String> {
        let d = &self.dir;
        let io = |p: &Path, e: std::io::Error| format!("{}: {e}", p.display());
        for sub in ["state", "run", "cache", "conf.d"] {
            std::fs::create_dir_all(d.join(sub)).map_err(|e| io(&d.join(sub), e))?;
        }
        write_conflist(
            &d.join("net.d"),
            CRIO_NETWORK,
            "ctrb-crio0",
            "10.79.0.0/16",
            &d.join("ipam"),
        )?;
        std::fs::write(
            d.join("policy.json"),
            r#"{"default":[{"type":"insecureAcceptAnything"}]}"#,
        )
        .map_err(|e| io(&d.join("policy.json"), e))?;
        let conf = format!(
            "[crio.runtime]\nlog_level = \"info\"\ndefault_runtime = \"runc\"\nhooks_dir = []\n\
             [crio.runtime.runtimes.runc]\nruntime_path = \"/usr/sbin/runc\"\n\
             runtime_root = \"{}\"\n\
             [crio.image]\ninsecure_registries = [\"{registry}\"]\nsignature_policy = \"{}\"\n",
            self.runc_root().display(),
            d.join("policy.json").display(),
        );
        std::fs::write(d.join("crio-lite.conf"), conf)
            .map_err(|e| io(&d.join("crio-lite.conf"), e))?;
        let path = |sub: &str| d.join(sub).display().to_string();
        let args: Vec<String> = [
            ("--config", path("crio-lite.conf")),
            ("--config-dir", path("conf.d")),
            ("--listen", path("run/crio-lite.sock")),
            ("--root", path("state")),
            ("--runroot", path("run")),
            ("--namespaces-dir", path("run")),
            ("--cni-config-dir", path("net.d")),
            ("--cni-plugin-dir", "/usr/lib/cni".to_owned()),
            ("--cache-dir", path("cache")),
            ("--cni-run-dir", path("run/cni")),
            ("--cni-default-network", CRIO_NETWORK.to_owned()),
        ]
        .into_iter()
        .flat_map(|(flag, value)| [flag.to_owned(), value])
        .chain([
            "--builtin-default-network=false".to_owned(),
            "run".to_owned(),
        ])
        .collect();
        Daemon::spawn(
            "crio-lite",
            binary,
            &args,
            d.join("crio-lite.log"),
            d.join("run/crio-lite.sock"),
            cpu,
        )
    }
}

/// Where the private containerd keeps everything, under `dir`.
pub(crate) struct Containerd {
    pub(crate) dir: PathBuf,
}

impl Containerd {
    pub(crate) fn runc_root(&self) -> PathBuf {
        self.dir.join("runc")
    }

    pub(crate) fn start(
        &self,
        registry: &str,
        pause: &str,
        cpu: CpuGroup,
    ) -> Result<Daemon, String> {
        let d = &self.dir;
        let io = |p: &Path, e: std::io::Error| format!("{}: {e}", p.display());
        let hosts = d.join("certs.d").join(registry);
        std::fs::create_dir_all(&hosts).map_err(|e| io(&hosts, e))?;
        std::fs::write(
            hosts.join("hosts.toml"),
            format!(
                "server = \"http://{registry}\"\n\n[host.\"http://{registry}\"]\n  \
                 capabilities = [\"pull\", \"resolve\"]\n"
            ),
        )
        .map_err(|e| io(&hosts, e))?;
        write_conflist(
            &d.join("net.d"),
            CONTAINERD_NETWORK,
            "ctrb-ctrd0",
            "10.78.0.0/16",
            &d.join("ipam"),
        )?;
        let p = |sub: &str| d.join(sub).display().to_string();
        let config = format!(
            r#"version = 2
root = "{root}"
state = "{state}"
temp = "{tmp}"

[grpc]
  address = "{socket}"
[ttrpc]
  address = "{socket}.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "{opt}"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{pause}"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  disable_apparmor = true
  enable_selinux = false
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"

[plugins."io.containerd.grpc.v1.cri".cni]
  bin_dir = "/usr/lib/cni"
  conf_dir = "{cni}"

[plugins."io.containerd.grpc.v1.cri".containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
  BinaryName = "/usr/sbin/runc"
  Root = "{runc}"
  SystemdCgroup = false

[plugins."io.containerd.grpc.v1.cri".registry]
  config_path = "{certs}"
"#,
            root = p("root"),
            state = p("state"),
            tmp = p("tmp"),
            socket = p("containerd.sock"),
            opt = p("opt"),
            cni = p("net.d"),
            runc = self.runc_root().display(),
            certs = p("certs.d"),
        );
        std::fs::create_dir_all(d.join("tmp")).map_err(|e| io(&d.join("tmp"), e))?;
        std::fs::write(d.join("config.toml"), config).map_err(|e| io(&d.join("config.toml"), e))?;
        Daemon::spawn(
            "containerd",
            Path::new("/usr/bin/containerd"),
            &["--config".to_owned(), p("config.toml")],
            d.join("containerd.log"),
            d.join("containerd.sock"),
            cpu,
        )
    }
}

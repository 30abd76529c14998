//! A private containerd 1.6 for the benchmark: its own root, state and socket under the work
//! directory, the CRI plugin off, the overlayfs snapshotter (its default); stopped, its mounts
//! undone and its directories removed on drop, also when the bench fails half-way.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::measure::{self, Run};

/// The namespace the bench's images live in.
const NAMESPACE: &str = "bench";

pub(crate) struct Containerd {
    child: Child,
    dir: PathBuf,
    socket: PathBuf,
    pidfile: PathBuf,
    log: PathBuf,
}

impl Containerd {
    /// Starts containerd under `dir` and waits until it answers; its pid goes to `pidfile` so
    /// whoever runs the bench can stop it if the bench itself is killed.
    pub(crate) fn start(dir: &Path, pidfile: &Path) -> Result<Containerd, String> {
        let io = |e: std::io::Error| format!("{}: {e}", dir.display());
        std::fs::create_dir_all(dir).map_err(io)?;
        let socket = dir.join("containerd.sock");
        let config = dir.join("config.toml");
        std::fs::write(
            &config,
            format!(
                "version = 2\nroot = \"{}\"\nstate = \"{}\"\n\
                 disabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n\
                 [grpc]\n  address = \"{}\"\n[ttrpc]\n  address = \"{}.ttrpc\"\n\
                 [debug]\n  address = \"\"\n[metrics]\n  address = \"\"\n",
                dir.join("root").display(),
                dir.join("state").display(),
                socket.display(),
                socket.display(),
            ),
        )
        .map_err(io)?;
        let log = dir.join("containerd.log");
        let out = std::fs::File::create(&log).map_err(io)?;
        let child = Command::new("containerd")
            .arg("--config")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(out.try_clone().map_err(io)?)
            .stderr(out)
            .spawn()
            .map_err(|e| format!("cannot start containerd (package containerd): {e}"))?;
        let _ = std::fs::write(pidfile, child.id().to_string());
        let daemon = Containerd {
            child,
            dir: dir.to_owned(),
            socket,
            pidfile: pidfile.to_owned(),
            log,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let up = daemon
                .ctr()
                .arg("version")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if up {
                return Ok(daemon);
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "containerd did not answer in 20 s; its log ends:\n{}",
                    measure::tail(&daemon.log)
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `ctr` on this daemon's socket, in the bench's namespace.
    pub(crate) fn ctr(&self) -> Command {
        let mut cmd = Command::new("ctr");
        cmd.arg("--address")
            .arg(&self.socket)
            .args(["--namespace", NAMESPACE]);
        cmd
    }

    /// `ctr images pull --plain-http REF`: fetches into the content store and unpacks into the
    /// overlayfs snapshotter (ctr unpacks by default). ctr fetches and writes the content through
    /// the daemon; the daemon applies the layers.
    /// Its progress lines and errors go to `log`.
    pub(crate) fn pull(&self, reference: &str, log: &Path) -> Result<Run, String> {
        let mut cmd = self.ctr();
        cmd.args(["images", "pull", "--plain-http", reference]);
        measure::run(&mut cmd, log, false)
    }

    /// The output of a `ctr` command that must succeed.
    pub(crate) fn query(&self, args: &[&str]) -> Result<String, String> {
        let out = self
            .ctr()
            .args(args)
            .output()
            .map_err(|e| format!("ctr {}: {e}", args.join(" ")))?;
        if !out.status.success() {
            return Err(format!(
                "ctr {} failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The snapshots as (key, parent) pairs.
    pub(crate) fn snapshots(&self) -> Result<Vec<(String, String)>, String> {
        let text = self.query(&["snapshots", "ls"])?;
        Ok(text
            .lines()
            .skip(1)
            .filter_map(|l| {
                let mut f = l.split_whitespace();
                let key = f.next()?.to_owned();
                // KEY PARENT KIND: a snapshot without a parent has two fields.
                let rest: Vec<&str> = f.collect();
                let parent = if rest.len() >= 2 { rest[0] } else { "" };
                Some((key, parent.to_owned()))
            })
            .collect())
    }

    /// Removes every snapshot, children before parents, keeping the content: "blobs present,
    /// layers not".
    pub(crate) fn remove_snapshots(&self) -> Result<(), String> {
        loop {
            let all = self.snapshots()?;
            if all.is_empty() {
                return Ok(());
            }
            let leaves: Vec<&str> = all
                .iter()
                .filter(|(key, _)| !all.iter().any(|(_, parent)| parent == key))
                .map(|(key, _)| key.as_str())
                .collect();
            if leaves.is_empty() {
                return Err(format!("snapshots form a cycle: {all:?}"));
            }
            // One at a time: containerd's garbage collector may take a snapshot between the
            // listing and its removal, and "not found" is then what was wanted.
            for leaf in leaves {
                match self.query(&["snapshots", "rm", leaf]) {
                    Err(e) if e.contains("not found") => {}
                    other => {
                        other?;
                    }
                }
            }
        }
    }

    /// Removes the image and collects its content and snapshots at once (`--sync`), then checks
    /// that nothing is left, so the next pull is cold.
    pub(crate) fn remove_all(&self, reference: &str) -> Result<(), String> {
        let images = self.query(&["images", "ls", "-q"])?;
        if images.lines().any(|l| l.trim() == reference) {
            self.query(&["images", "rm", "--sync", reference])?;
        }
        let content = self.query(&["content", "ls", "-q"])?;
        let snapshots = self.snapshots()?;
        if !content.trim().is_empty() || !snapshots.is_empty() {
            return Err(format!(
                "containerd kept {} blobs and {} snapshots after removing the image",
                content.lines().count(),
                snapshots.len()
            ));
        }
        Ok(())
    }
}

impl Drop for Containerd {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        unmount_under(&self.dir);
        let _ = std::fs::remove_file(&self.pidfile);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Unmounts (lazily, deepest first) every mount point under `dir`; a daemon killed while
/// applying a layer leaves its temporary mount.
pub(crate) fn unmount_under(dir: &Path) {
    let Ok(mounts) = node_primitives::mounts::read_own() else {
        return;
    };
    let mut points = node_primitives::mounts::mounts_at_or_below(&mounts, dir);
    points.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    for p in points {
        let _ = nix::mount::umount2(&p, nix::mount::MntFlags::MNT_DETACH);
    }
}

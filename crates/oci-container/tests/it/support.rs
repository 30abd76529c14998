//! A busybox root file system, the runtimes to test, and a guard that removes every container,
//! conmon and directory a test made, also when it fails.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use oci_container::{ContainerConfig, ProcessIdentity, Runtime};
use oci_spec::runtime::Spec;
use tempfile::TempDir;

pub(crate) const CONMON: &str = "/usr/bin/conmon";

/// `(name, binary)` of every runtime the tests run against.
pub(crate) fn runtimes() -> Vec<(&'static str, PathBuf)> {
    let mut out = Vec::new();
    for (name, path) in [("crun", "/usr/bin/crun"), ("runc", "/usr/sbin/runc")] {
        assert!(
            Path::new(path).exists(),
            "{path} is missing (cargo xtask test installs crun, runc and conmon)"
        );
        if name == "crun"
            && let Some(why) = crun_cannot_run_here()
        {
            // crun itself refuses this host: `crun_refuses_hybrid_cgroups_naming_the_reason`
            // asserts that refusal instead, and fails the day crun accepts the host.
            eprintln!("crun refuses this host ({why}): its refusal is tested instead");
            continue;
        }
        out.push((name, PathBuf::from(path)));
    }
    out
}

/// crun 1.8 refuses hybrid cgroup hierarchies whose v2 half has controllers
/// ("cgroups in hybrid mode not supported"), which some container hosts have.
pub(crate) fn crun_cannot_run_here() -> Option<String> {
    let controllers = std::fs::read_to_string("/sys/fs/cgroup/unified/cgroup.controllers").ok()?;
    let controllers = controllers.trim();
    (!controllers.is_empty()).then(|| {
        format!(
            "hybrid cgroups with controllers in the v2 hierarchy ({controllers}), which crun refuses"
        )
    })
}

/// A state directory, a runtime root and a busybox root file system of a test's own; every
/// container left in it is force-deleted and its conmon killed on drop.
pub(crate) struct Fixture {
    pub(crate) dir: TempDir,
    pub(crate) runtime: Runtime,
    pub(crate) rootfs: PathBuf,
}

impl Fixture {
    pub(crate) fn new(runtime: &Path) -> Fixture {
        let dir = test_support::temp_dir("oci-container");
        let rootfs = dir.path().join("rootfs");
        std::fs::create_dir(&rootfs).unwrap();
        let tar = test_support::image::Tar::busybox().build();
        let mut archive = tar::Archive::new(&tar[..]);
        archive.set_preserve_permissions(true);
        archive.unpack(&rootfs).unwrap();
        let rt = Runtime::new(runtime, CONMON, dir.path().join("state"))
            .with_root(dir.path().join("runtime-root"))
            .with_timeouts(Duration::from_secs(20), Duration::from_secs(60));
        Fixture {
            dir,
            runtime: rt,
            rootfs,
        }
    }

    /// Writes the bundle for `config` with `rootfs` and returns its directory.
    pub(crate) fn bundle(&self, config: &ContainerConfig, rootfs: &Path) -> PathBuf {
        let spec = oci_container::generate(config, rootfs).unwrap();
        self.bundle_of(&config.id, &spec)
    }

    /// Writes the bundle of the container `id` whose spec is `spec` and returns its directory.
    pub(crate) fn bundle_of(&self, id: &str, spec: &Spec) -> PathBuf {
        let bundle = self.dir.path().join("bundles").join(id);
        std::fs::create_dir_all(&bundle).unwrap();
        oci_container::write_bundle(id, &bundle, spec).unwrap();
        bundle
    }

    /// Creates, starts, waits for and deletes the container `id` of `bundle`; returns its exit
    /// code and the text of its log's lines, stdout and stderr.
    pub(crate) async fn run_to_end(&self, id: &str, bundle: &Path) -> (i32, Vec<String>) {
        let log = self.log_path(id);
        self.runtime.create(id, bundle, &log).await.unwrap();
        self.runtime.start(id).await.unwrap();
        let code = self
            .runtime
            .wait(id, Duration::from_secs(20))
            .await
            .unwrap();
        self.runtime.delete(id).await.unwrap();
        let lines = cri_lines(&log).into_iter().map(|(_, text)| text).collect();
        (code, lines)
    }

    pub(crate) fn log_path(&self, id: &str) -> PathBuf {
        self.dir.path().join(format!("{id}.log"))
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let Ok(records) = self.runtime.records() else {
            return;
        };
        for rec in records.records {
            let _ = std::process::Command::new(&rec.runtime)
                .arg("--root")
                .arg(&rec.runtime_root)
                .args(["delete", "--force", &rec.id])
                .output();
            if let Some(conmon) = rec.conmon.filter(ProcessIdentity::is_alive) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(conmon.pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
    }
}

/// Asserts every line of a CRI log is `<RFC3339Nano> <stdout|stderr> <F|P> <text>` and returns
/// `(stream, text)` of the full lines.
pub(crate) fn cri_lines(log: &Path) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(log)
        .unwrap_or_else(|e| panic!("cannot read the log {}: {e}", log.display()));
    parse_cri(&text)
}

/// [`cri_lines`] of a log's text.
fn parse_cri(text: &str) -> Vec<(String, String)> {
    text.lines()
        .map(|line| {
            let mut parts = line.splitn(4, ' ');
            let (ts, stream, tag, rest) = (
                parts.next().unwrap_or_default(),
                parts.next().unwrap_or_default(),
                parts.next().unwrap_or_default(),
                parts.next().unwrap_or_default(),
            );
            assert!(is_rfc3339_nano(ts), "timestamp {ts:?} in {line:?}");
            assert!(matches!(stream, "stdout" | "stderr"), "stream in {line:?}");
            assert_eq!(tag, "F", "a short line is a full line: {line:?}");
            (stream.to_owned(), rest.to_owned())
        })
        .collect()
}

/// `2024-01-02T03:04:05.123456789+00:00` or `...Z`: date, `T`, time with fraction, zone.
fn is_rfc3339_nano(ts: &str) -> bool {
    let Some((date, time)) = ts.split_once('T') else {
        return false;
    };
    let date_ok = date.len() == 10
        && date.bytes().enumerate().all(|(i, b)| {
            if i == 4 || i == 7 {
                b == b'-'
            } else {
                b.is_ascii_digit()
            }
        });
    let (clock, zone) = match time.find(['Z', '+', '-']) {
        Some(i) => time.split_at(i),
        None => return false,
    };
    let fraction_ok = clock.split_once('.').is_some_and(|(hms, frac)| {
        hms.len() == 8 && !frac.is_empty() && frac.bytes().all(|b| b.is_ascii_digit())
    });
    date_ok && fraction_ok && (zone == "Z" || zone.len() == 6)
}

/// A config running `args` in the busybox root.
pub(crate) fn config(id: &str, args: &[&str]) -> ContainerConfig {
    ContainerConfig {
        id: id.to_owned(),
        command: args.iter().map(|&a| a.to_owned()).collect(),
        ..ContainerConfig::default()
    }
}

/// Creates and starts the container `config` describes in the fixture's busybox root.
pub(crate) async fn started(fx: &Fixture, config: &ContainerConfig) {
    let bundle = fx.bundle(config, &fx.rootfs);
    fx.runtime
        .create(&config.id, &bundle, &fx.log_path(&config.id))
        .await
        .unwrap();
    fx.runtime.start(&config.id).await.unwrap();
}

/// The file `name` of the cgroup the process `pid` is in, in the v1 hierarchy of `controller`,
/// or in the unified one when `controller` is empty; `None` when there is no such file. A test's
/// own reading, independent of the crate's: `/sys/fs/cgroup/<controller>` for v1 (or the
/// unified mount on a hybrid host), the path from `/proc/<pid>/cgroup`.
pub(crate) fn cgroup_file(pid: i32, controller: &str, name: &str) -> Option<String> {
    let membership = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let path = membership.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let wanted = if controller.is_empty() {
            controllers.is_empty()
        } else {
            controllers.split(',').any(|c| c == controller)
        };
        wanted.then(|| path.trim_start_matches('/').to_owned())
    })?;
    let base = if controller.is_empty() {
        let unified = Path::new("/sys/fs/cgroup/unified");
        if unified.is_dir() {
            unified.to_owned()
        } else {
            PathBuf::from("/sys/fs/cgroup")
        }
    } else {
        // cpu and cpuacct may share a hierarchy mounted as `cpu,cpuacct` with links to it
        Path::new("/sys/fs/cgroup").join(controller)
    };
    std::fs::read_to_string(base.join(path).join(name)).ok()
}

/// Waits for a full CRI log line at `log` whose text satisfies `want`, and returns it.
pub(crate) async fn line_in(log: &Path, want: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        // a line may be half written: only read complete ones
        if let Ok(text) = std::fs::read_to_string(log)
            && let Some(end) = text.rfind('\n')
            && let Some((_, line)) = parse_cri(&text[..=end]).into_iter().find(|(_, l)| want(l))
        {
            return line;
        }
        assert!(
            Instant::now() < deadline,
            "no such line in {}",
            log.display()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

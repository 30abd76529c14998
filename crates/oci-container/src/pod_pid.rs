//! A pod's PID namespace, shared by the containers that ask for it (CRI's `NamespaceMode` POD for
//! pid), without an infra container.
//!
//! A PID namespace cannot be kept by a bind mount alone: once its pid 1 ends no process can enter
//! it, and the orphans of the namespace are reparented to that pid 1, which must reap them. So a
//! pod that shares one gets a *pod init*: a small program (the [`PodInitProgram`] the caller
//! names, which calls [`crate::pod_init::main`]) that is pid 1 of a new PID namespace, reaps,
//! and does nothing else. It runs in a session of its own, is nobody's child but init's, and
//! outlives its caller.
//!
//! ```text
//! <dir>/pid.init   {"pid":…,"start_time":…}: the init, written by the program before it runs
//! <dir>/pid        the init's PID namespace, bind-mounted over an empty file: containers join it
//! <dir>/pid.cgroup ["/sys/fs/cgroup/…/crio-<pod>",…]: the init's cgroup leaf, made before it
//!                  starts and removed after it is gone
//! <dir>/pid.exe    the program, bind-mounted read-only while it starts (it runs from there)
//! ```
//!
//! # Confinement
//!
//! Pid 1 of the namespace is reachable from every container that shares it (`/proc/1/root`,
//! `/proc/1/net`, `/proc/1/mountinfo`, `/proc/1/exe`). So the init is confined before it is
//! recorded (see [`crate::pod_init`]): the pod's network, IPC and UTS namespaces, an empty
//! read-only root in a mount namespace of its own, a cgroup leaf of its own under the pod's
//! parent ([`PodInitConfinement`]), uid and gid 65534, no capabilities, no_new_privs, not
//! dumpable, a seccomp filter. It is started from a read-only bind mount of the program, so its
//! executable cannot be opened for writing through `/proc/1/exe` on any kernel (not only on one
//! that refuses writes to a running executable).
//!
//! # Identity
//!
//! The init is signalled only through a pidfd, and only after these hold for the process the
//! pidfd names: its start time is the recorded one; it is pid 1 of its PID namespace (`NSpid`);
//! that namespace is not the caller's; its command line ends with the pod and the pid file; and,
//! when `<dir>/pid` is a mount, that mount is its namespace. A stale pid file, or one whose pid
//! was reused, is then harmless: the process it names fails the check and is left alone.
//!
//! # Crash safety
//!
//! The invariant: **an init runs only once `<dir>/pid.init` names it, and that file is removed
//! only after the init is gone.** The program writes the file before it lets the init past its
//! start (an init whose parent dies first exits), and [`unpin_pod_pid`] kills, then unmounts,
//! then removes the file. A caller killed at any point finds, on its next call, either nothing, or
//! a pid file naming a live init (pinned or not: [`pin_pod_pid`] pins it again,
//! [`unpin_pod_pid`] kills it), or a dead one (cleaned up).

use std::ffi::OsString;
use std::io::Read as _;
use std::os::fd::AsFd as _;
use std::os::unix::fs::MetadataExt as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::mount::{MsFlags, mount};
use nix::sys::signal::Signal;
use node_primitives::mounts::detach_all;
use node_primitives::ns::{self, Existing, Pins};
use node_primitives::{Error as PinError, PinStep};
use safe_file::Symlinks;

use crate::error::{Error, Result};
use crate::pod_init::Plan;
use crate::record::ProcessIdentity;
use node_primitives::proc::innermost_pid;
use node_primitives::{Pidfd, ProcStat};

/// How long the program may take to start the init, and the init to die once killed.
const START_TIMEOUT: Duration = Duration::from_secs(10);
/// The most read of the pid file and of the program's output.
const MAX_OUTPUT: u64 = 4096;
/// The most read of the cgroup record.
const MAX_RECORD: u64 = 64 * 1024;

/// The program that becomes a pod's init: run as `<path> <args…> <pod> <pid file>`, it must
/// call [`crate::pod_init::main`] with the last two arguments before it starts a thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodInitProgram {
    /// The executable.
    pub path: PathBuf,
    /// Its arguments before the pod and the pid file (crio-lite's: `pod-init`).
    pub args: Vec<OsString>,
}

/// Where a pod's init is confined: the pod's namespaces it joins, and its cgroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodInitConfinement {
    /// The pod's network namespace (its pin); `None` for a pod on the node's network.
    pub network: Option<PathBuf>,
    /// The pod's IPC namespace, as [`pin_pod`](crate::pin_pod) pinned it.
    pub ipc: PathBuf,
    /// The pod's UTS namespace, as [`pin_pod`](crate::pin_pod) pinned it.
    pub uts: PathBuf,
    /// The cgroup (a cgroupfs path, absolute) the pod's containers are placed under; `None`
    /// when the caller places the init itself (with systemd, in a scope it starts around the
    /// init's pid through [`Runtime::place_pod_init`](crate::Runtime::place_pod_init)).
    pub cgroup_parent: Option<PathBuf>,
    /// The init's cgroup below it (CRI-O names its infra container's `crio-<pod>`).
    pub cgroup_name: String,
}

/// The file name of the PID namespace's pin.
const PIN_NAME: &str = "pid";

/// `<dir>/pid`: where [`pin_pod_pid`] pins the pod's PID namespace.
pub fn pod_pid_pin(dir: &Path) -> PathBuf {
    dir.join(PIN_NAME)
}

/// `<dir>/pid.init`: the pod init's identity.
fn pid_file(dir: &Path) -> PathBuf {
    dir.join("pid.init")
}

/// `<dir>/pid.cgroup`: the init's cgroup leaf, a directory per hierarchy.
fn cgroup_file(dir: &Path) -> PathBuf {
    dir.join("pid.cgroup")
}

/// `<dir>/pid.exe`: the program, mounted read-only, that the init is started from.
fn exe_pin(dir: &Path) -> PathBuf {
    dir.join("pid.exe")
}

/// Starts the pod's init with `program`, confined as `confinement` says (see the module docs),
/// and pins its PID namespace at `<dir>/pid` (returned); `dir` is made if missing. An init
/// already recorded there that passes the identity check is kept (pinned again if its pin
/// went): calling it again for the same pod is a no-op.
///
/// # Errors
///
/// [`Error::Spawn`] naming the program when it cannot run; [`Error::Runtime`] with its stderr
/// when it fails (an init that cannot be confined: its stderr names the step); [`Error::Timeout`]
/// when it takes longer than 10 s; [`Error::InvalidConfig`] when the cgroup is not a plain absolute
/// path or no cgroup file system is mounted; [`Error::Io`] or [`Error::Corrupt`] naming the file at fault. What was started is
/// undone.
pub fn pin_pod_pid(
    pod: &str,
    dir: &Path,
    program: &PodInitProgram,
    confinement: &PodInitConfinement,
) -> Result<PathBuf> {
    let pin = pod_pid_pin(dir);
    std::fs::create_dir_all(dir).map_err(|e| Error::io(pod, "create directory", dir, e))?;
    if let Some(init) = recorded_init(pod, dir)? {
        if !init.pinned {
            bind(pod, &init, dir)?;
        }
        return Ok(pin);
    }
    // Whatever a dead init left: its pin, its pid file.
    unpin_pod_pid(pod, dir)?;
    let started =
        start(pod, dir, program, confinement).and_then(|()| match recorded_init(pod, dir)? {
            Some(init) => bind(pod, &init, dir),
            None => Err(Error::Corrupt {
                container: pod.to_owned(),
                path: pid_file(dir),
                reason: "names no running pod init of this pod".to_owned(),
            }),
        });
    if let Err(e) = started {
        let _ = unpin_pod_pid(pod, dir);
        return Err(e);
    }
    Ok(pin)
}

/// Kills the pod's init (after checking it is that init, see the module docs), which kills
/// every process in its PID namespace; then unmounts and removes `<dir>/pid`, removes the init's
/// cgroup leaf, and the pid file. What is not there is fine.
///
/// # Errors
///
/// [`Error::Corrupt`] when the pid file or the cgroup record cannot be parsed (the init cannot
/// be identified, so nothing is removed); [`Error::Timeout`] when the init outlives a SIGKILL by
/// 10 s; [`Error::Io`] naming the path that cannot be unmounted or removed.
pub fn unpin_pod_pid(pod: &str, dir: &Path) -> Result<()> {
    if let Some(init) = recorded_init(pod, dir)? {
        init.kill(pod, dir)?;
    }
    let pin = pod_pid_pin(dir);
    ns::unpin(&pin).map_err(|e| match e {
        PinError::Pin {
            step: PinStep::Remove,
            source,
            ..
        } => Error::io(pod, "remove", &pin, source),
        other => Error::io(pod, "unmount", &pin, other.into_io()),
    })?;
    unmount_all(pod, &exe_pin(dir))?;
    remove_cgroup(pod, dir)?;
    for path in [exe_pin(dir), pid_file(dir)] {
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(Error::io(pod, "remove", &path, e));
            }
            _ => {}
        }
    }
    Ok(())
}

/// The pod init recorded under `dir`, when it runs and passes the identity check: its host pid.
/// For a caller's checks and tests; [`unpin_pod_pid`] does its own.
///
/// # Errors
///
/// [`Error::Corrupt`] when the pid file cannot be parsed.
pub fn pod_init_pid(pod: &str, dir: &Path) -> Result<Option<i32>> {
    Ok(recorded_init(pod, dir)?.map(|init| init.who.pid))
}

/// Every mount stacked at `path` detached; nothing mounted there is fine.
fn unmount_all(pod: &str, path: &Path) -> Result<()> {
    detach_all(path).map_err(|e| Error::io(pod, "unmount", path, e))
}

/// An empty file at `path`, for a bind mount; a crash leaves it for unpin to remove.
fn create_pin(pod: &str, path: &Path) -> Result<()> {
    ns::create_file(path, Existing::Reuse)
        .map(drop)
        .map_err(|e| Error::io(pod, "create pin", path, e))
}

/// The init's cgroup leaf, recorded in `<dir>/pid.cgroup` (so an unpin after a crash finds
/// it), then made.
fn make_cgroup(pod: &str, dir: &Path, confinement: &PodInitConfinement) -> Result<Vec<PathBuf>> {
    let Some(parent) = &confinement.cgroup_parent else {
        return Ok(Vec::new());
    };
    crate::cgroup::make_recorded(
        pod,
        "the pod init's cgroup",
        parent,
        &confinement.cgroup_name,
        &cgroup_file(dir),
    )
}

/// Removes the cgroup leaf `<dir>/pid.cgroup` names (its init is gone), then the record.
fn remove_cgroup(pod: &str, dir: &Path) -> Result<()> {
    crate::cgroup::remove_recorded(
        pod,
        "remove the pod init's cgroup",
        &cgroup_file(dir),
        Instant::now() + START_TIMEOUT,
    )
}

/// The program bind-mounted read-only at `<dir>/pid.exe`: what the init runs from, so
/// `/proc/<init>/exe` opened for writing fails (EROFS) whatever the kernel does about running
/// executables.
fn bind_exe(pod: &str, dir: &Path, program: &Path) -> Result<PathBuf> {
    let exe = exe_pin(dir);
    create_pin(pod, &exe)?;
    mount(
        Some(program),
        exe.as_path(),
        None::<&str>,
        MsFlags::MS_BIND,
        None::<&str>,
    )
    .map_err(|e| Error::io(pod, "bind the pod init's program at", &exe, e.into()))?;
    mount(
        None::<&str>,
        exe.as_path(),
        None::<&str>,
        MsFlags::MS_REMOUNT
            | MsFlags::MS_BIND
            | MsFlags::MS_RDONLY
            | MsFlags::MS_NOSUID
            | MsFlags::MS_NODEV,
        None::<&str>,
    )
    .map_err(|e| Error::io(pod, "make read-only", &exe, e.into()))?;
    Ok(exe)
}

/// Runs the program and checks what it said.
fn start(
    pod: &str,
    dir: &Path,
    program: &PodInitProgram,
    confinement: &PodInitConfinement,
) -> Result<()> {
    // The pin's file first: the mount needs it, and a crash leaves it for unpin to remove.
    create_pin(pod, &pod_pid_pin(dir))?;
    let plan = Plan {
        network: confinement.network.clone(),
        ipc: confinement.ipc.clone(),
        uts: confinement.uts.clone(),
        cgroups: make_cgroup(pod, dir, confinement)?,
    };
    let exe = bind_exe(pod, dir, &program.path)?;
    let ran = run(pod, dir, program, &exe, &plan);
    // The init holds its executable's mount; the node's mount table need not.
    unmount_all(pod, &exe)?;
    ran
}

/// Runs the program from `exe`, the plan on its stdin.
fn run(pod: &str, dir: &Path, program: &PodInitProgram, exe: &Path, plan: &Plan) -> Result<()> {
    let spawn_error = |source| Error::Spawn {
        container: pod.to_owned(),
        program: program.path.clone(),
        source,
    };
    let mut child = Command::new(exe)
        .arg0(&program.path)
        .args(&program.args)
        .arg(pod)
        .arg(pid_file(dir))
        .env_clear()
        .current_dir("/")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(spawn_error)?;
    if let Some(mut stdin) = child.stdin.take() {
        // A few hundred bytes: the pipe takes them whether or not the program reads. A program
        // that died says why on stderr.
        let _ = serde_json::to_writer(&mut stdin, plan);
    }
    let deadline = Instant::now() + START_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().map_err(spawn_error)? {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(Error::Timeout {
                container: pod.to_owned(),
                runtime: program.path.clone(),
                command: "pod init",
                timeout: START_TIMEOUT,
            });
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let capped = |pipe: Option<&mut dyn std::io::Read>| {
        let mut out = Vec::new();
        if let Some(pipe) = pipe {
            let _ = pipe.take(MAX_OUTPUT).read_to_end(&mut out);
        }
        String::from_utf8_lossy(&out).trim().to_owned()
    };
    let stdout = capped(child.stdout.as_mut().map(|p| p as &mut dyn std::io::Read));
    let stderr = capped(child.stderr.as_mut().map(|p| p as &mut dyn std::io::Read));
    if !status.success() {
        return Err(Error::Runtime {
            container: pod.to_owned(),
            runtime: program.path.clone(),
            command: "pod init",
            status: status.to_string(),
            stderr,
        });
    }
    let reported: Option<i32> = stdout.parse().ok();
    let recorded = read_pid_file(pod, dir)?.map(|who| who.pid);
    if reported.is_none() || reported != recorded {
        return Err(Error::Corrupt {
            container: pod.to_owned(),
            path: pid_file(dir),
            reason: format!(
                "names pid {recorded:?}, but {} reported {stdout:?}",
                program.path.display()
            ),
        });
    }
    Ok(())
}

/// The pid file's identity; `None` when there is no file.
fn read_pid_file(pod: &str, dir: &Path) -> Result<Option<ProcessIdentity>> {
    let path = pid_file(dir);
    match safe_file::read_regular(&path, MAX_OUTPUT, Symlinks::Refuse) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| Error::Corrupt {
                container: pod.to_owned(),
                path,
                reason: e.to_string(),
            }),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(Error::file(pod, e)),
    }
}

/// A running pod init that passed the identity check, held by a pidfd.
struct Init {
    who: ProcessIdentity,
    pidfd: Pidfd,
    /// Its PID namespace, open.
    ns: std::fs::File,
    /// `<dir>/pid` is a mount of its namespace.
    pinned: bool,
}

/// The init the pid file names, if it runs and is that pod's init (see the module docs).
fn recorded_init(pod: &str, dir: &Path) -> Result<Option<Init>> {
    let Some(who) = read_pid_file(pod, dir)? else {
        return Ok(None);
    };
    let Ok(pidfd) = Pidfd::open(who.pid) else {
        return Ok(None);
    };
    let proc = PathBuf::from(format!("/proc/{}", who.pid));
    let Ok(ns) = std::fs::File::open(proc.join("ns/pid")) else {
        return Ok(None);
    };
    let (Ok(ns_meta), Ok(own)) = (ns.metadata(), std::fs::metadata("/proc/self/ns/pid")) else {
        return Ok(None);
    };
    let ns_id = (ns_meta.dev(), ns_meta.ino());
    let pin = pod_pid_pin(dir);
    let pin_id = std::fs::metadata(&pin).ok().map(|m| (m.dev(), m.ino()));
    let pinned = pin_id == Some(ns_id);
    let status = node_primitives::proc::status(who.pid).unwrap_or_default();
    let cmdline = node_primitives::proc::cmdline(who.pid, MAX_RECORD).unwrap_or_default();
    let ours = ProcStat::of(who.pid).is_some_and(|s| s.start_time == who.start_time)
        && innermost_pid(&status) == Some(1)
        && ns_id != (own.dev(), own.ino())
        && names(&cmdline, pod, &pid_file(dir))
        && (pinned || !crate::pod::is_mounted(&pin))
        // Still running after the reads: what /proc showed was this process.
        && !pidfd.has_exited();
    Ok(ours.then_some(Init {
        who,
        pidfd,
        ns,
        pinned,
    }))
}

impl Init {
    /// SIGKILL through the pidfd, then wait until the process has ended.
    fn kill(self, pod: &str, dir: &Path) -> Result<()> {
        match self.pidfd.send_signal(Signal::SIGKILL as i32) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
            Err(e) => {
                return Err(Error::io(
                    pod,
                    "kill the pod init named in",
                    pid_file(dir),
                    e,
                ));
            }
        }
        // The pidfd turns readable when the init has ended.
        if !self.pidfd.wait(START_TIMEOUT) && self.who.is_alive() {
            return Err(Error::Timeout {
                container: pod.to_owned(),
                runtime: pid_file(dir),
                command: "kill the pod init",
                timeout: START_TIMEOUT,
            });
        }
        tracing::info!(pod, pid = self.who.pid, "pod init killed");
        Ok(())
    }
}

/// Bind-mounts the init's namespace (through the descriptor opened while the pidfd showed it
/// alive, so never another process's) onto `<dir>/pid`.
fn bind(pod: &str, init: &Init, dir: &Path) -> Result<()> {
    Pins::new(dir)
        .pin_from(init.ns.as_fd(), PIN_NAME, Existing::Reuse)
        .map(drop)
        .map_err(|e| match e {
            PinError::Pin {
                step: PinStep::PrepareDir,
                path,
                source,
            } => Error::io(pod, "create directory", path, source),
            PinError::Pin {
                step: PinStep::CreateFile,
                path,
                source,
            } => Error::io(pod, "create pin", path, source),
            other => Error::io(
                pod,
                "pin the pod's PID namespace at",
                pod_pid_pin(dir),
                other.into_io(),
            ),
        })
}

/// Whether a `/proc/<pid>/cmdline` ends with the arguments [`pin_pod_pid`] appends.
fn names(cmdline: &[u8], pod: &str, pid_file: &Path) -> bool {
    let args: Vec<&[u8]> = cmdline
        .strip_suffix(b"\0")
        .unwrap_or(cmdline)
        .split(|&b| b == 0)
        .collect();
    matches!(
        args.as_slice(),
        [.., last_but_one, last]
            if *last_but_one == pod.as_bytes()
                && *last == pid_file.as_os_str().as_encoded_bytes()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_line_is_the_pods_init_only_with_both_last_arguments() {
        let file = Path::new("/run/pods/p1/pid.init");
        for (cmdline, want) in [
            (
                &b"/usr/bin/crio-lite\0pod-init\0p1\0/run/pods/p1/pid.init\0"[..],
                true,
            ),
            (b"/x\0p1\0/run/pods/p1/pid.init", true),
            (
                b"/usr/bin/crio-lite\0pod-init\0p2\0/run/pods/p1/pid.init\0",
                false,
            ),
            (
                b"/usr/bin/crio-lite\0pod-init\0p1\0/run/pods/p2/pid.init\0",
                false,
            ),
            (b"/run/pods/p1/pid.init\0", false),
            (b"sleep\x003600\0", false),
            (b"", false),
        ] {
            assert_eq!(
                names(cmdline, "p1", file),
                want,
                "{:?}",
                String::from_utf8_lossy(cmdline)
            );
        }
    }

    #[test]
    fn nothing_recorded_is_nothing_to_kill_and_a_bad_pid_file_is_named() {
        let dir = tempfile::tempdir().expect("temp dir");
        assert_eq!(pod_init_pid("p1", dir.path()).expect("no file"), None);
        unpin_pod_pid("p1", dir.path()).expect("nothing to undo");

        // A pid file naming a process that is not a pod init (this test) is left alone.
        let me = ProcessIdentity::of(std::process::id() as i32).expect("own identity");
        std::fs::write(pid_file(dir.path()), serde_json::to_vec(&me).expect("json"))
            .expect("write");
        assert_eq!(pod_init_pid("p1", dir.path()).expect("parsed"), None);
        unpin_pod_pid("p1", dir.path()).expect("a stale record is cleaned up");
        assert!(!pid_file(dir.path()).exists());

        std::fs::write(pid_file(dir.path()), b"{\"pid\": ").expect("write");
        let err = unpin_pod_pid("p1", dir.path()).expect_err("unparsable");
        assert!(err.to_string().contains("pid.init"), "{err}");
    }
}

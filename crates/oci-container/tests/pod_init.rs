//! The pod init end to end: a PID namespace pinned, its init confined (the pod's namespaces and
//! cgroup, an empty root, no privileges), its orphans reaped, its init found and killed by
//! identity, pinned or not.
//!
//! `harness = false`: this binary is also the init program (run again as `<self> pod-init <pod>
//! <pid file>`), which forks and so must start with one thread, as libtest's would not. It speaks
//! enough of libtest's command line to be run with the others: it needs root and runs only when
//! asked for the ignored tests (`CNI_PRIVILEGED_TESTS=1 cargo test -p oci-container --
//! --ignored`), honouring name filters and `--skip`.

use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use oci_container::{
    PodInitConfinement, PodInitProgram, pin_pod, pin_pod_pid, pod_init_pid, pod_pid_pin,
    unpin_pod_pid,
};
use test_support::netns::NetNs;

const NAME: &str = "pod_init_is_confined_pins_reaps_and_dies_by_identity";

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let [_, command, pod, pid_file] = args.as_slice()
        && command == "pod-init"
    {
        oci_container::pod_init::main(pod, Path::new(pid_file));
    }
    println!("\nrunning 1 test");
    if !wanted(&args[1..]) {
        println!("test {NAME} ... ignored, needs root + PID namespaces: cargo xtask test");
        println!("\ntest result: ok. 0 passed; 0 failed; 1 ignored; 0 measured\n");
        return;
    }
    pod_init_is_confined_pins_reaps_and_dies_by_identity();
    println!("test {NAME} ... ok");
    println!("\ntest result: ok. 1 passed; 0 failed; 0 ignored; 0 measured\n");
}

/// Whether libtest's arguments ask for this (ignored) test.
fn wanted(args: &[String]) -> bool {
    let (mut ignored, mut exact, mut filters, mut skips) = (false, false, Vec::new(), Vec::new());
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--ignored" | "--include-ignored" => ignored = true,
            "--exact" => exact = true,
            "--skip" => skips.extend(it.next().cloned()),
            "--test-threads" | "--color" | "--format" | "--logfile" | "-Z" => {
                it.next();
            }
            flag if flag.starts_with('-') => {}
            filter => filters.push(filter.to_owned()),
        }
    }
    let matches = |f: &String| {
        if exact {
            f == NAME
        } else {
            NAME.contains(f.as_str())
        }
    };
    ignored && (filters.is_empty() || filters.iter().any(matches)) && !skips.iter().any(matches)
}

fn pod_init_is_confined_pins_reaps_and_dies_by_identity() {
    let dir = test_support::temp_dir("pod-init");
    let pods = dir.path();
    let _guard = Guard(pods.to_owned());
    let program = PodInitProgram {
        path: std::env::current_exe().expect("the test binary"),
        args: vec!["pod-init".into()],
    };
    let pod_dir = pods.join("p1");
    let netns = NetNs::new("podinit");
    let p1 = confinement(&pod_dir, "p1", Some(&netns));

    // A descriptor of the node's root the caller let through (no close-on-exec), as in
    // CVE-2024-21626: the init must not keep it, or /proc/1/fd/N would lead to the node.
    let leaked = std::fs::File::open("/").expect("open /");
    nix::fcntl::fcntl(
        &leaked,
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::empty()),
    )
    .expect("clear close-on-exec");
    let pin = pin_pod_pid("p1", &pod_dir, &program, &p1).expect("pin the pod's PID namespace");
    drop(leaked);
    assert_eq!(pin, pod_pid_pin(&pod_dir));
    let init = pod_init_pid("p1", &pod_dir)
        .expect("pid file")
        .expect("a running init");
    assert_eq!(ns_id(&format!("/proc/{init}/ns/pid")), ns_id_of(&pin));
    assert_ne!(
        ns_id(&format!("/proc/{init}/ns/pid")),
        ns_id("/proc/self/ns/pid")
    );
    let status = std::fs::read_to_string(format!("/proc/{init}/status")).expect("status");
    assert!(
        status
            .lines()
            .any(|l| l.starts_with("NSpid:") && l.ends_with("\t1")),
        "pid 1 of its namespace: {status}"
    );
    assert_ne!(
        field(&status, "PPid:"),
        std::process::id().to_string(),
        "the init is not its caller's child"
    );
    let leaf = assert_confined(init, &p1);
    assert_eq!(
        pin_pod_pid("p1", &pod_dir, &program, &p1).expect("again"),
        pin,
        "a second call keeps the init"
    );
    assert_eq!(pod_init_pid("p1", &pod_dir).expect("pid file"), Some(init));

    // Orphans of the namespace are the init's, and it reaps them.
    let out = Command::new("nsenter")
        .arg(format!("--pid={}", pin.display()))
        .args(["--", "sh", "-c", "sleep 2 & sleep 2 & exit 0"])
        // Not piped: the sleeps would hold the pipe, and the wait, to their end.
        .stdout(std::process::Stdio::null())
        .status()
        .expect("run nsenter");
    assert!(out.success(), "nsenter: {out}");
    let orphans = children(init);
    assert_eq!(
        orphans.len(),
        2,
        "both sleeps are the init's now: {orphans:?}"
    );
    wait_until("the init reaps its orphans", || children(init).is_empty());

    // The pin gone (a caller killed before it bound it, or run in a mount namespace that went):
    // the pid file still finds the init, which is pinned again, not replaced.
    nix::mount::umount2(&pin, nix::mount::MntFlags::MNT_DETACH).expect("unmount the pin");
    std::fs::remove_file(&pin).expect("remove the pin");
    pin_pod_pid("p1", &pod_dir, &program, &p1).expect("pin again");
    assert_eq!(pod_init_pid("p1", &pod_dir).expect("pid file"), Some(init));
    assert_eq!(ns_id(&format!("/proc/{init}/ns/pid")), ns_id_of(&pin));

    // Unpinned and then stopped: found by its pid file and killed, with what ran in its
    // namespace.
    let sleeper = Command::new("nsenter")
        .arg(format!("--pid={}", pin.display()))
        .args(["--", "sleep", "600"])
        .spawn()
        .expect("a process in the pod's namespace");
    let ns = ns_id_of(&pin);
    wait_until("sleep 600 runs in the pod's namespace", || {
        in_ns(ns).len() == 2
    });
    nix::mount::umount2(&pin, nix::mount::MntFlags::MNT_DETACH).expect("unmount the pin");
    unpin_pod_pid("p1", &pod_dir).expect("kill the init");
    assert!(test_support::process::is_dead(init.unsigned_abs().into()));
    let mut sleeper = sleeper;
    let _ = sleeper.wait();
    assert_eq!(
        in_ns(ns),
        Vec::<u32>::new(),
        "the namespace's processes died with it"
    );
    assert!(
        children(init).is_empty() && !pin.exists() && !pod_dir.join("pid.init").exists(),
        "nothing of the init is left"
    );
    for dir in &leaf {
        assert!(
            !dir.exists(),
            "the init's cgroup {} is removed",
            dir.display()
        );
    }
    unpin_pod_pid("p1", &pod_dir).expect("twice is fine");
    oci_container::unpin_pod("p1", &pod_dir).expect("unpin p1's IPC and UTS namespaces");

    another_pods_init_is_not_p1s(pods, &program, &pod_dir, init);
    a_failing_program_is_named_and_leaves_nothing(pods);
    an_init_that_cannot_be_confined_does_not_run(pods, &program);
}

/// What a test pod's init joins: `netns`, the pod's IPC and UTS pins (made here), and the leaf
/// `crio-<pod>` under a cgroup parent of this test's own.
fn confinement(pod_dir: &Path, pod: &str, netns: Option<&NetNs>) -> PodInitConfinement {
    let pins = pin_pod(pod, pod_dir, pod).expect("pin the pod's IPC and UTS namespaces");
    PodInitConfinement {
        network: netns.map(NetNs::path),
        ipc: pins.ipc,
        uts: pins.uts,
        cgroup_parent: Some(cgroup_parent()),
        cgroup_name: format!("crio-{pod}"),
    }
}

fn cgroup_parent() -> PathBuf {
    PathBuf::from(format!("/oci-container-pod-init-{}", std::process::id()))
}

/// Checks from the host what a container sharing the init's PID namespace could reach through
/// `/proc/1`; returns the init's cgroup directories.
fn assert_confined(init: i32, confinement: &PodInitConfinement) -> Vec<PathBuf> {
    let proc = PathBuf::from(format!("/proc/{init}"));
    let status = std::fs::read_to_string(proc.join("status")).expect("status");
    for (name, want) in [
        ("Uid:", "65534\t65534\t65534\t65534"),
        ("Gid:", "65534\t65534\t65534\t65534"),
        ("Groups:", ""),
        ("CapInh:", "0000000000000000"),
        ("CapPrm:", "0000000000000000"),
        ("CapEff:", "0000000000000000"),
        ("CapBnd:", "0000000000000000"),
        ("CapAmb:", "0000000000000000"),
        ("NoNewPrivs:", "1"),
        // 2: a seccomp filter
        ("Seccomp:", "2"),
    ] {
        assert_eq!(field(&status, name), want, "{name} of the init: {status}");
    }
    assert_eq!(field(&status, "Name:"), "pod-init", "what ps shows");
    // The init closes its start pipe once it has read the go-ahead, which may be a moment
    // after `start` returned on a loaded machine: wait for it, boundedly.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let fds = loop {
        let fds: Vec<_> = std::fs::read_dir(proc.join("fd"))
            .expect("the init's descriptors")
            .collect();
        if fds.is_empty() || std::time::Instant::now() > deadline {
            break fds;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(fds.is_empty(), "no descriptor is left open: {fds:?}");
    // /proc/<pid> of a process that is not dumpable belongs to root, not to its uid.
    let owner = std::fs::metadata(proc.join("status"))
        .expect("status")
        .uid();
    assert_eq!(owner, 0, "the init is not dumpable");
    let root: Vec<_> = std::fs::read_dir(proc.join("root"))
        .expect("the init's root")
        .collect();
    assert!(
        root.is_empty() && !proc.join("root/etc").exists(),
        "the init's root is an empty one of its own: {root:?}"
    );
    let mounts = std::fs::read_to_string(proc.join("mountinfo")).expect("mountinfo");
    assert_eq!(mounts.lines().count(), 1, "one mount, its root: {mounts}");
    assert!(
        mounts.contains(" / ro,nosuid,nodev,noexec") && mounts.contains(" - tmpfs "),
        "a read-only tmpfs: {mounts}"
    );
    for (kind, pin) in [
        ("net", confinement.network.clone().expect("a network")),
        ("ipc", confinement.ipc.clone()),
        ("uts", confinement.uts.clone()),
    ] {
        assert_eq!(
            ns_id_of(&proc.join("ns").join(kind)),
            ns_id_of(&pin),
            "the init is in the pod's {kind} namespace"
        );
    }
    let leaf = cgroup_parent().join(&confinement.cgroup_name);
    let cgroups = std::fs::read_to_string(proc.join("cgroup")).expect("cgroup");
    for line in cgroups.lines() {
        assert!(
            line.ends_with(&format!(":{}", leaf.display())),
            "the init is in its leaf {} in every hierarchy: {cgroups}",
            leaf.display()
        );
    }
    let dirs = cgroup_dirs(&leaf);
    assert!(!dirs.is_empty());
    for dir in &dirs {
        let procs = std::fs::read_to_string(dir.join("cgroup.procs")).expect("cgroup.procs");
        assert_eq!(procs.trim(), init.to_string(), "{}", dir.display());
    }
    // No write through /proc/<pid>/exe: this kernel refuses to open a running executable for
    // writing (ETXTBSY), and the executable is on a read-only mount (EROFS) for kernels that
    // do not.
    let write = std::fs::OpenOptions::new()
        .write(true)
        .open(proc.join("exe"))
        .expect_err("the init's executable opened for writing");
    assert!(
        [Some(libc::ETXTBSY), Some(libc::EROFS)].contains(&write.raw_os_error()),
        "{write}"
    );
    let exe_mount = nix::sys::statvfs::statvfs(&proc.join("exe")).expect("statvfs of the exe");
    assert!(
        exe_mount
            .flags()
            .contains(nix::sys::statvfs::FsFlags::ST_RDONLY),
        "the init runs from a read-only mount: {exe_mount:?}"
    );
    dirs
}

fn an_init_that_cannot_be_confined_does_not_run(pods: &Path, program: &PodInitProgram) {
    let dir = pods.join("p4");
    let mut p4 = confinement(&dir, "p4", None);
    p4.network = Some(pods.join("no-such-netns"));
    let err = pin_pod_pid("p4", &dir, program, &p4).expect_err("a network that is not there");
    assert!(
        err.to_string()
            .contains("could not be confined: cannot join the pod's network namespace")
            && err.to_string().contains("no-such-netns"),
        "the step is named: {err}"
    );
    assert!(!dir.join("pid.init").exists() && !dir.join("pid.cgroup").exists());
    for leaf in cgroup_dirs(&cgroup_parent().join("crio-p4")) {
        assert!(!leaf.exists(), "{} is removed", leaf.display());
    }
    oci_container::unpin_pod("p4", &dir).expect("unpin p4");
}

fn another_pods_init_is_not_p1s(pods: &Path, program: &PodInitProgram, pod_dir: &Path, init: i32) {
    // A second pod's init; unpin_pod ends it too, and its mount.
    let other = pods.join("p2");
    let p2 = confinement(&other, "p2", None);
    pin_pod_pid("p2", &other, program, &p2).expect("pin p2");
    let init2 = pod_init_pid("p2", &other).expect("pid file").expect("init");
    assert_ne!(init2, init);
    // p1's name on p2's init: the command line names another pod, so it is not p1's.
    std::fs::copy(other.join("pid.init"), pod_dir.join("pid.init")).expect("copy");
    assert_eq!(pod_init_pid("p1", pod_dir).expect("pid file"), None);
    unpin_pod_pid("p1", pod_dir).expect("a record of another pod's init is dropped");
    assert!(
        !test_support::process::is_dead(init2.unsigned_abs().into()),
        "p2's init lives"
    );
    oci_container::unpin_pod("p2", &other).expect("unpin p2");
    assert!(test_support::process::is_dead(init2.unsigned_abs().into()));
    assert!(test_support::fs::mounts_at_or_below(pods).is_empty());
}

fn a_failing_program_is_named_and_leaves_nothing(pods: &Path) {
    // A program that fails is reported by name, and leaves nothing.
    let bad = PodInitProgram {
        path: PathBuf::from("/bin/false"),
        args: Vec::new(),
    };
    let p3 = PodInitConfinement {
        network: None,
        ipc: pods.join("p3/ipc"),
        uts: pods.join("p3/uts"),
        cgroup_parent: Some(cgroup_parent()),
        cgroup_name: "crio-p3".to_owned(),
    };
    let err =
        pin_pod_pid("p3", &pods.join("p3"), &bad, &p3).expect_err("/bin/false starts no init");
    assert!(err.to_string().contains("/bin/false"), "{err}");
    assert_eq!(
        test_support::fs::file_names(&pods.join("p3")),
        Vec::<String>::new()
    );
}

/// Kills every init left under the directory, also when the test fails.
struct Guard(PathBuf);

impl Drop for Guard {
    fn drop(&mut self) {
        for pod in ["p1", "p2", "p3", "p4"] {
            let _ = oci_container::unpin_pod(pod, &self.0.join(pod));
        }
        for parent in cgroup_dirs(&cgroup_parent()) {
            let _ = std::fs::remove_dir(parent);
        }
    }
}

/// The directories of the cgroup `path` (absolute) in each cgroup hierarchy mounted here.
fn cgroup_dirs(path: &Path) -> Vec<PathBuf> {
    let below = path.strip_prefix("/").expect("an absolute cgroup path");
    test_support::fs::mounts()
        .into_iter()
        .filter(|m| m.fs_type.starts_with("cgroup"))
        .map(|m| Path::new(&m.point).join(below))
        .collect()
}

fn ns_id(path: &str) -> (u64, u64) {
    ns_id_of(Path::new(path))
}

fn ns_id_of(path: &Path) -> (u64, u64) {
    let meta = std::fs::metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    (meta.dev(), meta.ino())
}

fn field(status: &str, name: &str) -> String {
    status
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .unwrap_or_default()
        .trim()
        .to_owned()
}

/// The pids whose parent is `pid`.
fn children(pid: i32) -> Vec<u32> {
    test_support::fs::file_names(Path::new("/proc"))
        .iter()
        .filter_map(|n| n.parse::<u32>().ok())
        .filter(|child| {
            std::fs::read_to_string(format!("/proc/{child}/status"))
                .is_ok_and(|s| field(&s, "PPid:") == pid.to_string())
        })
        .collect()
}

/// The live processes whose PID namespace is `ns`.
fn in_ns(ns: (u64, u64)) -> Vec<u32> {
    test_support::fs::file_names(Path::new("/proc"))
        .iter()
        .filter_map(|n| n.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::metadata(format!("/proc/{pid}/ns/pid")).is_ok_and(|m| (m.dev(), m.ino()) == ns)
                && !test_support::process::is_dead((*pid).into())
        })
        .collect()
}

fn wait_until(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

//! The pod init end to end: a PID namespace pinned, its orphans reaped, its init found and killed
//! by identity, pinned or not.
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

use oci_container::{PodInitProgram, pin_pod_pid, pod_init_pid, pod_pid_pin, unpin_pod_pid};

const NAME: &str = "pod_init_pins_reaps_and_dies_by_identity";

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
    pod_init_pins_reaps_and_dies_by_identity();
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

fn pod_init_pins_reaps_and_dies_by_identity() {
    let dir = test_support::temp_dir("pod-init");
    let pods = dir.path();
    let _guard = Guard(pods.to_owned());
    let program = PodInitProgram {
        path: std::env::current_exe().expect("the test binary"),
        args: vec!["pod-init".into()],
    };
    let pod_dir = pods.join("p1");

    let pin = pin_pod_pid("p1", &pod_dir, &program).expect("pin the pod's PID namespace");
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
    assert_eq!(
        pin_pod_pid("p1", &pod_dir, &program).expect("again"),
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
    pin_pod_pid("p1", &pod_dir, &program).expect("pin again");
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
    unpin_pod_pid("p1", &pod_dir).expect("twice is fine");

    another_pods_init_is_not_p1s(pods, &program, &pod_dir, init);
    a_failing_program_is_named_and_leaves_nothing(pods);
}

fn another_pods_init_is_not_p1s(pods: &Path, program: &PodInitProgram, pod_dir: &Path, init: i32) {
    // A second pod's init; unpin_pod ends it too, and its mount.
    let other = pods.join("p2");
    pin_pod_pid("p2", &other, program).expect("pin p2");
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
    let err = pin_pod_pid("p3", &pods.join("p3"), &bad).expect_err("/bin/false starts no init");
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
        for pod in ["p1", "p2", "p3"] {
            let _ = oci_container::unpin_pod(pod, &self.0.join(pod));
        }
    }
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

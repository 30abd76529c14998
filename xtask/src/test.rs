//! `cargo xtask test`: everything CI runs.

use anyhow::{Result, bail};

use crate::cmd::{cargo, in_ci, is_root, run_step};
use crate::packages;

pub(crate) const USAGE: &str = "usage: cargo xtask test [--no-privileged]

Everything CI runs, in order: the tidy checks (cargo xtask tidy), rustfmt --check, clippy -D warnings, rustdoc -D warnings, unused
dependencies (cargo-machete, installed into target/tools on first use), every unit,
integration and doc test, the fuzz targets over their seeds, then (as root) the tests that need
root and network namespaces (the fast rows of the fault-injection suite among them), the
real-plugin matrix, and oci-container's privileged tests in the cgroup v2 + systemd VM
(cargo xtask vm; its image is made once, in about 5 minutes, and cached in target/vm/). Missing Debian packages are installed with apt-get when run as root.

options:
  --no-privileged   skip the tests that need root and network namespaces (the run is incomplete)";

pub(crate) fn run(args: &[String]) -> Result<()> {
    let mut privileged = true;
    for arg in args {
        match arg.as_str() {
            "--no-privileged" => privileged = false,
            other => bail!("test: unknown option {other:?}"),
        }
    }
    if privileged && !is_root() {
        if in_ci() {
            bail!(
                "CI=true but not running as root: the privileged tests cannot run, and CI never skips them"
            );
        }
        println!(
            "xtask: not root, so the tests that need root and network namespaces will NOT run"
        );
        privileged = false;
    }
    if privileged {
        let mut wanted = packages::network_and_plugin_packages();
        wanted.extend_from_slice(packages::GO_PEER_PACKAGES);
        wanted.extend_from_slice(packages::IMAGE_PACKAGES);
        wanted.extend_from_slice(packages::CONTAINER_PACKAGES);
        packages::ensure(&wanted)?;
    }

    static_checks()?;
    let seed = proptest_seed();
    println!(
        "\nxtask: property tests use PROPTEST_RNG_SEED={seed}; a failure reproduces with \
         PROPTEST_RNG_SEED={seed} cargo xtask test"
    );
    run_step(
        "tests",
        cargo()
            .args(["test", "--workspace"])
            .env("PROPTEST_RNG_SEED", &seed),
    )?;
    // The fuzz targets' checks over every checked-in seed ran above: the fuzz crate is a member
    // and its tests/seeds.rs one of the workspace's tests (the fast part of `cargo xtask fuzz`).
    if privileged {
        privileged_tests()?;
        vm_tests()?;
    } else {
        println!(
            "\nxtask: privileged tests skipped (--no-privileged or not root); this run is incomplete"
        );
    }
    println!("\nxtask: all test steps passed");
    Ok(())
}

/// rustfmt, clippy and rustdoc over the workspace (the fuzz crate is a member), and unused
/// dependencies. One dependency tree for all of it: the fuzz crate shares the workspace's lock
/// file, features and target directory.
fn static_checks() -> Result<()> {
    crate::tidy::run(&[])?;
    run_step("rustfmt", cargo().args(["fmt", "--all", "--", "--check"]))?;
    // Every feature but libFuzzer's: the fuzz crate is a member, and its targets need nightly's
    // sanitizers (`cargo xtask fuzz`); its library and seed replay are linted here.
    let features = crate::fuzz::lintable_features()?;
    run_step(
        "clippy",
        cargo()
            .args(["clippy", "--workspace", "--all-targets", "--features"])
            .arg(features.join(","))
            .args(["--", "-D", "warnings"]),
    )?;
    run_step(
        "rustdoc",
        cargo()
            .args(["doc", "--workspace", "--no-deps"])
            .env("RUSTDOCFLAGS", "-D warnings"),
    )?;
    // Dependencies nothing uses (the generated CRI code's are listed as ignored in cri-api).
    let machete = crate::tools::cargo_machete()?;
    run_step(
        "unused dependencies (cargo-machete)",
        &mut std::process::Command::new(&machete),
    )
}

/// crio-lite's tests that run in the VM: containers end to end (limits, stats, OOM kill,
/// pause, update, pids limit, a daemon killed and restarted), the sandbox lifecycle on real
/// plugins, the pod init's confinement, the daemon as the shipped unit's systemd service,
/// exec/attach/port forward streams. Focused: the VM starts processes ~45x slower.
const VM_CRIO_LITE_TESTS: &[&str] = &[
    "containers::",
    "e2e::",
    "pod_init_escape::",
    "service::",
    "streams::",
    // Needs runs still in flight when the third succeeds: under emulation they finish
    // together. The crash and restart of containers:: covers a killed daemon there.
    "--skip",
    "e2e::sigkill_during_runs_leaves_each_sandbox_ready_or_gone",
    // Build a Go client: the VM has no Go (the host's privileged step runs them).
    "--skip",
    "streams::exec_over_spdy_with_spdystreams_client",
    "--skip",
    "streams::exec_with_a_terminal_over_spdy_ends_with_the_command",
];

/// The VM suite's passes: oci-container's privileged tests (each on crun and runc), then
/// crio-lite's on crun with the systemd manager (the production node) and on runc with
/// cgroupfs.
/// `deb` is crio-lite's package of the debug binaries, which the service test installs.
fn vm_passes(deb: &std::path::Path) -> Vec<crate::vm::Pass> {
    let ignored = ["--ignored", "--test-threads", "2"].map(str::to_owned);
    let crio_lite = |runtime: &str, manager: &str| crate::vm::Pass {
        label: format!("crio-lite on {runtime} with {manager}"),
        only: vec!["crio-lite".to_owned()],
        env: vec![
            ("CRIO_LITE_TEST_RUNTIME".to_owned(), runtime.to_owned()),
            (
                "CRIO_LITE_TEST_CGROUP_MANAGER".to_owned(),
                manager.to_owned(),
            ),
            ("CRIO_LITE_TEST_DEB".to_owned(), deb.display().to_string()),
        ],
        test_args: ignored
            .iter()
            .cloned()
            .chain(VM_CRIO_LITE_TESTS.iter().map(|t| (*t).to_owned()))
            .collect(),
    };
    vec![
        crate::vm::Pass {
            label: "oci-container on crun and runc".to_owned(),
            only: vec!["oci-container".to_owned()],
            env: Vec::new(),
            test_args: ignored.to_vec(),
        },
        crio_lite("crun", "systemd"),
        crio_lite("runc", "cgroupfs"),
    ]
}

/// The VM suite ([`vm_passes`]) in the VM (`cargo xtask vm`): the binaries the steps before
/// built, run on a cgroup v2 node under systemd.
pub(crate) fn vm_tests() -> Result<()> {
    let deb = crate::dist::debug_daemon_package()?;
    let passes = vm_passes(&deb);
    let labels: Vec<&str> = passes.iter().map(|p| p.label.as_str()).collect();
    println!(
        "\n==> VM suite (cgroup v2 + systemd): {}",
        labels.join("; ")
    );
    let started = std::time::Instant::now();
    let script = crate::vm::test_script(&["--workspace".into(), "--tests".into()], &passes)?;
    let options = crate::vm::Options {
        timeout: std::time::Duration::from_secs(2400),
        ..crate::vm::Options::default()
    };
    let code = crate::vm::run_job(&script, &options)?;
    println!("<== VM suite: {:.1} s", started.elapsed().as_secs_f64());
    if code != 0 {
        bail!("the VM suite failed (exit code {code})");
    }
    Ok(())
}

/// The tests that need root and network namespaces, then the real-plugin matrix.
fn privileged_tests() -> Result<()> {
    // Only the ignored tests: the ones that need root and network namespaces. Each creates and
    // removes its own namespaces, so they may run in parallel.
    run_step(
        "privileged tests (root + network namespaces)",
        cargo()
            .args([
                "test",
                "--workspace",
                "--tests",
                "--",
                "--ignored",
                "--skip",
                "matrix::matrix",
                // The fuzz crate's seed writers are ignored tests too: run by hand, never here
                // (they rewrote checked-in seeds, in HashMap order).
                "--skip",
                "write_cri_seeds",
                "--skip",
                "write_h2_front_seeds",
                "--skip",
                "write_spdy_frames_seeds",
                // Needs systemd as init: the VM suite runs it.
                "--skip",
                "service::",
            ])
            .env("CNI_PRIVILEGED_TESTS", "1"),
    )?;
    // The real-plugin matrix prints its table, so it runs on its own with output shown.
    run_step(
        "real-plugin matrix (ADD/CHECK/DEL x config version x plugin kind)",
        cargo()
            // `--workspace`, not `-p cni-exec`: features unify as in the builds above, so
            // nothing is compiled again for it.
            .args([
                "test",
                "--workspace",
                "--tests",
                "--",
                "--ignored",
                "--exact",
                "matrix::matrix",
                "--nocapture",
            ])
            .env("CNI_PRIVILEGED_TESTS", "1"),
    )
}

/// The seed every property test of this run starts from: the caller's `PROPTEST_RNG_SEED`, or a
/// new one printed up front, so a red run can be replayed exactly.
fn proptest_seed() -> String {
    std::env::var("PROPTEST_RNG_SEED")
        .ok()
        .filter(|s| s.parse::<u64>().is_ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64)
                .to_string()
        })
}

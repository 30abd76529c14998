//! The daemon as the systemd service its unit file (contrib/systemd/crio-lite.service) makes
//! it: started by systemd, READY reached (`systemctl start` of a `Type=notify` unit returns
//! then), pods and containers kept across `systemctl restart`, a clean stop. Needs systemd as
//! init: it runs in the VM (`cargo xtask vm suite`), not in the host's privileged step.
//!
//! The unit and the daemon come from crio-lite's Debian package (`CRIO_LITE_TEST_DEB`: the
//! VM suite builds it from the debug binaries with `cargo xtask dist`'s code), installed with
//! `dpkg -i` as a node installs it (the VM runs on a snapshot: nothing stays). A drop-in under
//! /run/systemd/system gives `ExecStart` the node's flags and `NetworkNamespacePath` the node's
//! namespace; everything else is the packaged unit.

use std::path::{Path, PathBuf};
use std::time::Duration;

use cri_api::v1 as cri;
use test_support::process::output;

use crate::containers::{
    assert_no_container_left, container_config, exec, remove_cgroups, run, setup, status,
};
use crate::e2e_support;

const UNIT_DIR: &str = "/run/systemd/system";
/// Where the package puts the unit and the daemon.
const PACKAGED_UNIT: &str = "/usr/lib/systemd/system/crio-lite.service";
const PACKAGED_DAEMON: &str = "/usr/bin/crio-lite";

/// The packaged unit with the test's drop-in: the package installed on creation; the service
/// stopped, the drop-in removed and the package purged on drop, also when the test fails.
struct Unit {
    name: String,
}

impl Unit {
    /// Installs the package, then the drop-in running the daemon with `flags`.
    fn install(flags: &str, netns: &Path, log: &Path) -> Unit {
        let deb = std::env::var("CRIO_LITE_TEST_DEB").expect(
            "CRIO_LITE_TEST_DEB names crio-lite's .deb (cargo xtask test and vm suite build it)",
        );
        let unit = Unit {
            name: "crio-lite.service".to_owned(),
        };
        let out = output("dpkg", &["-i", &deb]);
        assert!(
            out.status.success(),
            "dpkg -i {deb}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        for packaged in [PACKAGED_UNIT, PACKAGED_DAEMON] {
            assert!(
                Path::new(packaged).is_file(),
                "the package ships {packaged}"
            );
        }
        let dropin = unit.dropin_dir();
        std::fs::create_dir_all(&dropin).expect("the drop-in directory");
        std::fs::write(
            dropin.join("test.conf"),
            format!(
                "[Service]\nExecStart=\nExecStart={PACKAGED_DAEMON} {flags}\nNetworkNamespacePath={}\n\
                 StandardOutput=append:{}\nStandardError=inherit\n",
                netns.display(),
                log.display()
            ),
        )
        .expect("write the drop-in");
        systemctl(&["daemon-reload"]);
        unit
    }

    fn dropin_dir(&self) -> PathBuf {
        Path::new(UNIT_DIR).join(format!("{}.d", self.name))
    }

    fn property(&self, name: &str) -> String {
        let out = output("systemctl", &["show", "--value", "-p", name, &self.name]);
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// The service's main process's cgroup, from the kernel.
    fn main_cgroup(&self) -> String {
        let pid = self.property("MainPID");
        std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default()
    }
}

impl Drop for Unit {
    fn drop(&mut self) {
        let _ = output("systemctl", &["stop", &self.name]);
        let _ = std::fs::remove_dir_all(self.dropin_dir());
        let _ = output("dpkg", &["--purge", "crio-lite"]);
        let _ = output("systemctl", &["daemon-reload"]);
        let _ = output("systemctl", &["reset-failed", &self.name]);
    }
}

fn systemctl(args: &[&str]) {
    let out = output("systemctl", args);
    assert!(
        out.status.success(),
        "systemctl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root + netns + systemd as init: cargo xtask vm suite"]
async fn the_shipped_unit_runs_the_daemon_and_its_containers_survive_a_restart() {
    assert!(
        oci_container::systemd_is_init(),
        "systemd is not init here: this test runs in the VM (cargo xtask vm suite)"
    );
    let mut setup = setup("svc", "svc").await;
    let sleeper = run(
        &mut setup.client,
        &setup.sandbox.clone(),
        container_config(&setup.image, "sleeper", "echo up; exec sleep 3600"),
    )
    .await;
    // From the test's own daemon to the service: the same node, flags and state.
    assert!(
        setup.node.sigterm().await,
        "the test's daemon exits cleanly"
    );
    let flags = setup.node.flags();
    let flags = flags
        .into_iter()
        .chain(setup.node.extra_flags().iter().cloned())
        .chain(std::iter::once("run".to_owned()))
        .collect::<Vec<_>>()
        .join(" ");
    let log = setup.node.path("daemon-service.log");
    let unit = Unit::install(&flags, &setup.node.netns_path(), &log);
    let logs = || std::fs::read_to_string(&log).unwrap_or_default();

    // `start` of a Type=notify unit returns once READY=1 came.
    systemctl(&["start", &unit.name]);
    assert_eq!(unit.property("ActiveState"), "active", "{}", logs());
    assert!(
        unit.main_cgroup().contains(&format!("/{}", unit.name)),
        "the daemon runs in its unit's cgroup: {}",
        unit.main_cgroup()
    );
    let mut client = setup.node.client().await;
    check_still_there(&mut client, &setup.sandbox, &sleeper, &logs).await;
    // One the service made itself: its conmon was started from the unit's cgroup.
    let second = run(
        &mut client,
        &setup.sandbox,
        container_config(&setup.image, "second", "exec sleep 3600"),
    )
    .await;

    let before = unit.property("MainPID");
    systemctl(&["restart", &unit.name]);
    assert_eq!(unit.property("ActiveState"), "active", "{}", logs());
    assert_ne!(unit.property("MainPID"), before, "a new daemon");
    let mut client = setup.node.client().await;
    for container in [&sleeper, &second] {
        check_still_there(&mut client, &setup.sandbox, container, &logs).await;
    }

    e2e_support::stop(&mut client, &setup.sandbox).await;
    e2e_support::remove(&mut client, &setup.sandbox).await;
    drop(client);
    systemctl(&["stop", &unit.name]);
    assert_eq!(
        unit.property("Result"),
        "success",
        "a clean stop: {}",
        logs()
    );
    drop(unit);
    assert_no_container_left(&setup.node);
    setup.node.assert_nothing_leaked(&[setup.sandbox.clone()]);
    remove_cgroups(&setup.node, &[setup.pod]);
}

/// The pod is ready and the container runs and executes commands, under the service.
async fn check_still_there(
    client: &mut crate::containers::Client,
    sandbox: &str,
    container: &str,
    logs: &impl Fn() -> String,
) {
    let pod = client
        .pod_sandbox_status(cri::PodSandboxStatusRequest {
            pod_sandbox_id: sandbox.to_owned(),
            verbose: false,
        })
        .await
        .unwrap_or_else(|e| panic!("PodSandboxStatus: {e}\n{}", logs()))
        .into_inner()
        .status
        .expect("a status");
    assert_eq!(
        pod.state(),
        cri::PodSandboxState::SandboxReady,
        "{}",
        logs()
    );
    let state = status(client, container).await;
    assert_eq!(
        state.state(),
        cri::ContainerState::ContainerRunning,
        "{state:?}"
    );
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        exec(client, container, &["echo", "still here"], 30),
    )
    .await
    .expect("ExecSync within a minute")
    .unwrap_or_else(|e| panic!("ExecSync: {e}\n{}", logs()));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "still here\n");
}

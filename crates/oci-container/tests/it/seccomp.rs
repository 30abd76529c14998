//! Seccomp filters as real runtimes apply them: the default profile, capabilities that unlock
//! calls, and a profile file from the host.

use std::path::Path;

use oci_container::{CapabilityChanges, ContainerConfig, Seccomp};

use crate::support::{Fixture, config, runtimes};

/// How busybox reports EPERM: strerror's words, or mount's own for EPERM.
fn says_eperm(lines: &[String]) -> bool {
    lines
        .iter()
        .any(|l| l.contains("Operation not permitted") || l.contains("mount: permission denied"))
}

fn with(id: &str, args: &[&str], seccomp: Seccomp, add: &[&str]) -> ContainerConfig {
    ContainerConfig {
        seccomp,
        capabilities: CapabilityChanges {
            add: add.iter().map(|&c| c.to_owned()).collect(),
            drop: Vec::new(),
        },
        ..config(id, args)
    }
}

/// The default profile lets a shell run, refuses namespaces and mounts with EPERM, and
/// `CAP_SYS_ADMIN` lifts that refusal; unconfined with `CAP_SYS_ADMIN` both work. A user
/// namespace needs no capability at all, so its refusal is the filter's alone.
#[tokio::test]
#[ignore = "needs root: cargo xtask test"]
async fn the_default_profile_refuses_namespaces_and_mounts_unless_cap_sys_admin() {
    // (name, shell script, seccomp, capabilities added, succeeds)
    type Case = (
        &'static str,
        &'static str,
        Seccomp,
        &'static [&'static str],
        bool,
    );
    let cases: Vec<Case> = vec![
        ("sh", "echo ok", Seccomp::RuntimeDefault, &[], true),
        (
            "netns",
            "unshare -n true",
            Seccomp::RuntimeDefault,
            &[],
            false,
        ),
        (
            "mount",
            "mount -t tmpfs x /tmp",
            Seccomp::RuntimeDefault,
            &[],
            false,
        ),
        (
            "userns",
            "unshare -U true",
            Seccomp::RuntimeDefault,
            &[],
            false,
        ),
        (
            "netns-admin",
            "unshare -n true",
            Seccomp::Unconfined,
            &["SYS_ADMIN"],
            true,
        ),
        (
            "mount-admin",
            "mount -t tmpfs x /tmp",
            Seccomp::Unconfined,
            &["SYS_ADMIN"],
            true,
        ),
        (
            "userns-unconfined",
            "unshare -U true",
            Seccomp::Unconfined,
            &[],
            true,
        ),
        // the capability unlocks the calls in the default profile too
        (
            "mount-default-admin",
            "mount -t tmpfs x /tmp",
            Seccomp::RuntimeDefault,
            &["SYS_ADMIN"],
            true,
        ),
        (
            "netns-default-admin",
            "unshare -n true",
            Seccomp::RuntimeDefault,
            &["SYS_ADMIN"],
            true,
        ),
    ];
    for (name, path) in runtimes() {
        let fx = Fixture::new(&path);
        for (case, script, seccomp, add, succeeds) in &cases {
            let id = test_support::unique_name(&format!("sc-{case}-{name}"));
            let args = ["/bin/busybox", "sh", "-c", script];
            let cfg = with(&id, &args, seccomp.clone(), add);
            let bundle = fx.bundle(&cfg, &fx.rootfs);
            let (code, lines) = fx.run_to_end(&id, &bundle).await;
            if *succeeds {
                assert_eq!(code, 0, "{name} {case}: {lines:?}");
            } else {
                assert_ne!(code, 0, "{name} {case}: {lines:?}");
                assert!(says_eperm(&lines), "{name} {case}: EPERM: {lines:?}");
            }
            if *case == "sh" {
                assert!(lines.contains(&"ok".to_owned()), "{name}: {lines:?}");
            }
        }
    }
}

/// The kernel reports the filter: mode 2 under a profile, 0 unconfined. (A privileged
/// container's lack of filter is a unit test: runc cannot create one on hosts whose bounding set
/// lacks a capability, as some CI sandboxes do.)
#[tokio::test]
#[ignore = "needs root: cargo xtask test"]
async fn the_kernel_reports_the_filter_mode() {
    // (case, seccomp, mode)
    let cases = [
        ("default", Seccomp::RuntimeDefault, "2"),
        ("unconfined", Seccomp::Unconfined, "0"),
    ];
    for (name, path) in runtimes() {
        let fx = Fixture::new(&path);
        for (case, seccomp, mode) in &cases {
            let id = test_support::unique_name(&format!("mode-{case}-{name}"));
            let cfg = ContainerConfig {
                seccomp: seccomp.clone(),
                ..config(
                    &id,
                    &["/bin/busybox", "grep", "^Seccomp:", "/proc/self/status"],
                )
            };
            let bundle = fx.bundle(&cfg, &fx.rootfs);
            let (code, lines) = fx.run_to_end(&id, &bundle).await;
            assert_eq!(code, 0, "{name} {case}: {lines:?}");
            assert_eq!(lines, vec![format!("Seccomp:\t{mode}")], "{name} {case}");
        }
    }
}

/// A profile file from the host that refuses mkdir(2): `mkdir` fails, the rest works.
#[tokio::test]
#[ignore = "needs root: cargo xtask test"]
async fn a_localhost_profile_refuses_what_it_names() {
    let profile = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/seccomp/block-mkdir.json");
    for (name, path) in runtimes() {
        let fx = Fixture::new(&path);
        // (case, script, succeeds)
        let cases = [
            ("mkdir", "mkdir /tmp/x", false),
            ("touch", "touch /tmp/y && ls /tmp/y", true),
        ];
        for (case, script, succeeds) in cases {
            let id = test_support::unique_name(&format!("local-{case}-{name}"));
            let cfg = ContainerConfig {
                seccomp: Seccomp::Localhost(profile.clone()),
                ..config(&id, &["/bin/busybox", "sh", "-c", script])
            };
            let bundle = fx.bundle(&cfg, &fx.rootfs);
            let (code, lines) = fx.run_to_end(&id, &bundle).await;
            if succeeds {
                assert_eq!(code, 0, "{name} {case}: {lines:?}");
            } else {
                assert_ne!(code, 0, "{name} {case}: {lines:?}");
                assert!(says_eperm(&lines), "{name} {case}: {lines:?}");
            }
        }
    }
}

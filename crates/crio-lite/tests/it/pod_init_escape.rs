//! A pod that shares its PID namespace gives its containers nothing of the node's through pid 1,
//! the pod's init (issue #21): not its files through `/proc/1/root` (even with CAP_SYS_PTRACE),
//! not its interfaces through `/proc/1/net`, not its mount table through `/proc/1/mountinfo`,
//! not the daemon's executable through `/proc/1/exe`.

use std::collections::BTreeSet;

use cri_api::v1 as cri;

use crate::containers::{Client, cgroup_parent, container_config, exec, pod_init, run, setup};
use crate::e2e_support;

/// The init confined as CRI-O's pause container is: a container of the pod, CAP_SYS_PTRACE added
/// or not, reads and writes nothing of the node through `/proc/1`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root + netns: cargo xtask test"]
async fn a_container_reaches_nothing_of_the_node_through_the_pods_init() {
    let mut setup = setup("escape", "escape").await;
    let (image, sandbox) = (setup.image.clone(), setup.sandbox.clone());
    // A file of the node's, at a path no other test uses.
    let host = test_support::temp_dir("pod-init-escape");
    let marker = host.path().join("marker");
    std::fs::write(&marker, "the node's\n").expect("write the marker");
    let through_init = format!("/proc/1/root{}", marker.display());

    let client = &mut setup.client;
    let mut tracer = container_config(&image, "tracer", "exec sleep 3601");
    tracer.linux = Some(cri::LinuxContainerConfig {
        security_context: Some(cri::LinuxContainerSecurityContext {
            capabilities: Some(cri::Capability {
                add_capabilities: vec!["SYS_PTRACE".to_owned()],
                ..cri::Capability::default()
            }),
            ..cri::LinuxContainerSecurityContext::default()
        }),
        resources: None,
    });
    let tracer = run(client, &sandbox, tracer).await;
    let plain = run(
        client,
        &sandbox,
        container_config(&image, "plain", "exec sleep 3602"),
    )
    .await;

    let read = shell(client, &tracer, &format!("cat {through_init}")).await;
    assert!(
        read.exit_code != 0 && !String::from_utf8_lossy(&read.stdout).contains("the node's"),
        "the node's file is not readable through /proc/1/root: {}",
        describe(&read)
    );
    let write = shell(client, &tracer, &format!("echo escaped > {through_init}")).await;
    assert_ne!(write.exit_code, 0, "{}", describe(&write));
    let create = shell(
        client,
        &tracer,
        &format!("echo escaped > /proc/1/root{}/new", host.path().display()),
    )
    .await;
    assert_ne!(create.exit_code, 0, "{}", describe(&create));
    assert_eq!(
        std::fs::read_to_string(&marker).expect("the marker"),
        "the node's\n",
        "the node's file is unchanged"
    );
    assert!(!host.path().join("new").exists(), "nothing was created");
    // CAP_DAC_OVERRIDE is a default one, CAP_SYS_PTRACE was added: still no write.
    let exe = shell(client, &tracer, "echo escaped >> /proc/1/exe").await;
    assert_ne!(exe.exit_code, 0, "{}", describe(&exe));

    // Without CAP_SYS_PTRACE: /proc/1/net is the pod's network namespace, not the node's.
    let init_dev = interfaces(client, &plain, "/proc/1/net/dev").await;
    let own_dev = interfaces(client, &plain, "/proc/self/net/dev").await;
    assert_eq!(init_dev, own_dev, "the init's interfaces are the pod's");
    for link in setup.node.ns().links() {
        // `ip -br link` names a veth `name@peer`.
        let link = link.split('@').next().unwrap_or_default().to_owned();
        assert!(
            link == "lo" || !init_dev.contains(&link),
            "the node's {link} is not visible through /proc/1/net: {init_dev:?}"
        );
    }
    let client = &mut setup.client;
    let mounts = shell(client, &plain, "cat /proc/1/mountinfo").await;
    let mounts = String::from_utf8_lossy(&mounts.stdout).into_owned();
    assert!(
        !mounts.contains("/sys/fs/cgroup")
            && !mounts.contains("overlay")
            && !mounts.contains(&setup.node.run_dir().display().to_string()),
        "the node's mounts are not listed through /proc/1/mountinfo: {mounts}"
    );

    // The init is in a cgroup of its own beside the pod's containers, named as CRI-O names the
    // infra container's, and that cgroup goes with the pod.
    let init = pod_init(&setup.node, &sandbox);
    let leaf = init_cgroup(&setup.node, &sandbox);
    let cgroups = std::fs::read_to_string(format!("/proc/{}/cgroup", init.pid)).expect("cgroup");
    assert!(
        cgroups.lines().all(|l| l.ends_with(&format!(":{leaf}"))),
        "the init is in {leaf}: {cgroups}"
    );
    e2e_support::stop(&mut setup.client, &sandbox).await;
    assert!(!init.is_alive(), "the init goes with the pod");
    let left = || -> Vec<String> {
        test_support::fs::mounts()
            .into_iter()
            .filter(|m| m.fs_type.starts_with("cgroup"))
            .map(|m| format!("{}{leaf}", m.point))
            .filter(|dir| std::path::Path::new(dir).exists())
            .collect()
    };
    // systemd collects an emptied scope on its own time: moments, not seconds.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !left().is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(
        left().is_empty(),
        "the init's cgroup is removed: {:?}",
        left()
    );
    setup.finish().await;
}

async fn shell(client: &mut Client, id: &str, script: &str) -> cri::ExecSyncResponse {
    exec(client, id, &["sh", "-c", script], 10)
        .await
        .unwrap_or_else(|e| panic!("ExecSync {script:?}: {e}"))
}

fn describe(out: &cri::ExecSyncResponse) -> String {
    format!(
        "exit {}, stdout {:?}, stderr {:?}",
        out.exit_code,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The interface names a `net/dev` file lists, as the container reads it.
async fn interfaces(client: &mut Client, id: &str, file: &str) -> BTreeSet<String> {
    let out = shell(client, id, &format!("cat {file}")).await;
    assert_eq!(out.exit_code, 0, "cat {file}: {}", describe(&out));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .skip(2)
        .filter_map(|l| Some(l.split_once(':')?.0.trim().to_owned()))
        .collect()
}

/// The pod init's cgroup path: `crio-<pod>` under the pod's parent with cgroupfs, the scope
/// `crio-<pod>.scope` in the pod's slice with systemd.
fn init_cgroup(node: &crate::e2e_support::Node, sandbox: &str) -> String {
    let parent = cgroup_parent(node, "escape");
    match e2e_support::test_cgroup_manager() {
        oci_container::CgroupManager::Systemd => format!(
            "/{}/crio-{sandbox}.scope",
            oci_container::slice_path(&parent)
                .expect("a slice")
                .display()
        ),
        _ => format!("{parent}/crio-{sandbox}"),
    }
}

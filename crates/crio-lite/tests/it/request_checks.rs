//! What a CRI request may ask for (issue #21): what the node cannot honour or the requester may
//! not decide is refused before anything is made, and what reaches a container is what the node
//! allows.

use std::collections::HashMap;
use std::path::Path;

use cri_api::v1 as cri;
use test_support::fs::file_names;
use tonic::Code;

use crate::containers::{self, Setup};
use crate::privileged::{self, ReleaseDir};
use crate::support::{self, FakeCni, Harness, pod};

/// crun's `run.oci.seccomp_bpf_data`: a filter of one instruction, `ret SECCOMP_RET_ALLOW`
/// (BPF_RET|BPF_K = 0x06, k = 0x7fff0000), base64. In place of the default profile it lets
/// everything through.
const ALLOW_ALL_BPF: &str = "BgAAAAAA/38=";

/// Nothing of a refused pod exists: no state file, no pin, no pod directory, no network set
/// up.
fn assert_nothing_made(dir: &Path, cni: &FakeCni) {
    assert_eq!(
        file_names(&dir.join("state/sandboxes")),
        Vec::<String>::new()
    );
    assert_eq!(file_names(&dir.join("run/netns")), Vec::<String>::new());
    assert_eq!(file_names(&dir.join("run/pods")), Vec::<String>::new());
    assert!(
        cni.summary().iter().all(|c| !c.starts_with("setup")),
        "{:?}",
        cni.summary()
    );
}

/// A cgroup parent the node's cgroup manager (cgroupfs) cannot honour used to pass
/// RunPodSandbox and fail every container; a path with `..` named a cgroup outside the pods'.
/// DNS settings and the hostname with a newline added lines to resolv.conf and /etc/hosts.
/// Each is refused before anything is made, naming the field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_requests_the_node_cannot_honour_are_refused_before_anything_is_made() {
    let Harness {
        dir,
        cni,
        daemon,
        mut client,
    } = support::harness().await;
    type Change = fn(&mut cri::PodSandboxConfig);
    let cases: [(Change, &str, &str); 7] = [
        (
            |c| c.linux.get_or_insert_default().cgroup_parent = "kubepods-burstable.slice".into(),
            "config.linux.cgroup_parent",
            "systemd slice",
        ),
        (
            |c| c.linux.get_or_insert_default().cgroup_parent = "/kubepods/../../system".into(),
            "config.linux.cgroup_parent",
            "\"..\" component",
        ),
        (
            |c| c.linux.get_or_insert_default().cgroup_parent = "/kubepods//pod1".into(),
            "config.linux.cgroup_parent",
            "empty component",
        ),
        (
            |c| c.linux.get_or_insert_default().cgroup_parent = "/kubepods/./pod1".into(),
            "config.linux.cgroup_parent",
            "\".\" component",
        ),
        (
            |c| {
                c.dns_config.get_or_insert_default().searches =
                    vec!["svc.local\nnameserver 6.6.6.6".into()];
            },
            "config.dns_config.searches[0]",
            "control character",
        ),
        (
            |c| c.dns_config.get_or_insert_default().options = vec!["ndots:5 rotate".into()],
            "config.dns_config.options[0]",
            "white space",
        ),
        (
            |c| c.hostname = "web\n6.6.6.6 registry.local".into(),
            "config.hostname",
            "control character",
        ),
    ];
    for (change, field, why) in cases {
        let mut request = pod("refused");
        change(request.config.as_mut().unwrap());
        let err = client.run_pod_sandbox(request).await.unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{field}: {err:?}");
        assert!(
            err.message().starts_with(&format!("{field}:")) && err.message().contains(why),
            "{field}: {}",
            err.message()
        );
        assert_nothing_made(dir.path(), &cni);
    }
    daemon.shutdown().await.unwrap();
}

/// IPC sysctls the kernel refuses (a key it does not know, a value out of range) passed
/// RunPodSandbox and failed every container. They are tried on the kernel first: refused naming
/// the key, nothing made; good ones still pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root + netns: cargo xtask test"]
async fn ipc_sysctls_the_kernel_refuses_fail_run_pod_sandbox_and_leave_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let _release = ReleaseDir(dir.path().join("run/netns"));
    let cni = FakeCni::new();
    let daemon = privileged::start(dir.path(), &cni).await;
    let mut client = support::runtime_client(daemon.socket_path()).await;
    let with_sysctl = |name: &str, key: &str, value: &str| {
        let mut request = pod(name);
        let linux = request
            .config
            .as_mut()
            .unwrap()
            .linux
            .get_or_insert_default();
        linux.sysctls = HashMap::from([(key.to_owned(), value.to_owned())]);
        request
    };
    let node_before = std::fs::read_to_string("/proc/sys/kernel/shm_rmid_forced").unwrap();
    for (key, value, why) in [
        ("fs.mqueue.no_such_knob", "1", "No such file"),
        ("kernel.shm_rmid_forced", "5", "Invalid argument"),
        ("kernel.msgmni", "lots", "Invalid argument"),
    ] {
        let err = client
            .run_pod_sandbox(with_sysctl("ipc-bad", key, value))
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{key}: {err:?}");
        assert!(
            err.message().starts_with("config.linux.sysctls:")
                && err.message().contains(key)
                && err.message().contains(why),
            "{key}: {}",
            err.message()
        );
        assert_nothing_made(dir.path(), &cni);
    }
    let id = client
        .run_pod_sandbox(with_sysctl(
            &format!("ipc-ok-{}", std::process::id()),
            "kernel.shm_rmid_forced",
            "1",
        ))
        .await
        .expect("a sysctl the kernel takes")
        .into_inner()
        .pod_sandbox_id;
    assert_eq!(
        std::fs::read_to_string("/proc/sys/kernel/shm_rmid_forced").unwrap(),
        node_before,
        "the node's value is untouched"
    );
    support::stop_and_remove(&mut client, &id).await;
    drop(client);
    daemon.shutdown().await.unwrap();
}

/// The handler the second pod runs on: runc, allowed crun's annotations.
const ALLOWING_HANDLER: &str = "runc-oci";

/// One node, three faults of issue #21:
/// - a privileged container in an unprivileged pod started with every capability;
/// - `run.oci.seccomp_bpf_data` reached config.json, where crun loads it instead of the default
///   seccomp filter (`unshare -U` then worked inside); a handler allowing `run.oci.` passes it;
/// - uid 1000 with supplemental groups [2000] ran with `Groups: 2000`, without its own group,
///   in the container's process and in ExecSync's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root + netns + runc: cargo xtask test"]
async fn a_container_gets_no_privilege_annotation_or_group_the_node_does_not_give() {
    let mut setup = containers::setup_with("reqchk", "checks", Vec::new(), |node| {
        let text = format!(
            "[crio.runtime.runtimes.{ALLOWING_HANDLER}]\nruntime_path = \"{}\"\n\
             runtime_root = \"{}\"\nallowed_annotations = [\"run.oci.\"]\n",
            crate::e2e_support::test_runtime().1,
            node.runtime_root().display()
        );
        std::fs::write(node.path("crio-lite.conf.d/20-allowing.conf"), text)
            .expect("write the handler drop-in");
    })
    .await;
    check_privileged_needs_a_privileged_pod(&mut setup).await;
    check_runtime_annotations_are_dropped(&mut setup).await;
    check_groups(&mut setup).await;
    check_an_allowing_handler_passes_them(&mut setup).await;
    setup.finish().await;
}

async fn check_privileged_needs_a_privileged_pod(setup: &mut Setup) {
    let mut config = containers::container_config(&setup.image, "privileged", "sleep 600");
    config
        .linux
        .get_or_insert_default()
        .security_context
        .get_or_insert_default()
        .privileged = true;
    let err = containers::create(&mut setup.client, &setup.sandbox, config)
        .await
        .expect_err("a privileged container in an unprivileged pod");
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    assert!(
        err.message()
            .starts_with("config.linux.security_context.privileged:"),
        "{}",
        err.message()
    );
    assert!(
        containers::list(&mut setup.client, cri::ContainerFilter::default())
            .await
            .is_empty(),
        "nothing was created"
    );
}

fn annotated(image: &str, name: &str) -> cri::ContainerConfig {
    let mut config = containers::container_config(image, name, "exec sleep 600");
    config.annotations = HashMap::from([
        (
            "run.oci.seccomp_bpf_data".to_owned(),
            ALLOW_ALL_BPF.to_owned(),
        ),
        (
            "io.containers.trace-syscall".to_owned(),
            "of:/tmp/x".to_owned(),
        ),
        ("example.com/keep".to_owned(), "yes".to_owned()),
    ]);
    config.linux.get_or_insert_default().security_context =
        Some(cri::LinuxContainerSecurityContext {
            seccomp: Some(cri::SecurityProfile {
                profile_type: cri::security_profile::ProfileType::RuntimeDefault as i32,
                localhost_ref: String::new(),
            }),
            ..Default::default()
        });
    config
}

/// The annotations of the container's config.json.
fn spec_annotations(setup: &Setup, id: &str) -> serde_json::Value {
    let path = setup
        .node
        .run_dir()
        .join("containers")
        .join(id)
        .join("config.json");
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let spec: serde_json::Value = serde_json::from_str(&text).expect("config.json is JSON");
    spec["annotations"].clone()
}

async fn check_runtime_annotations_are_dropped(setup: &mut Setup) {
    let id = containers::create(
        &mut setup.client,
        &setup.sandbox,
        annotated(&setup.image, "annotated"),
    )
    .await
    .expect("CreateContainer");
    let annotations = spec_annotations(setup, &id);
    assert!(
        annotations.get("run.oci.seccomp_bpf_data").is_none()
            && annotations.get("io.containers.trace-syscall").is_none(),
        "runtime annotations the handler does not allow are not in config.json: {annotations}"
    );
    assert_eq!(annotations["example.com/keep"], "yes", "{annotations}");
    let status = containers::status(&mut setup.client, &id).await;
    assert!(
        !status.annotations.contains_key("run.oci.seccomp_bpf_data"),
        "{:?}",
        status.annotations
    );
    setup
        .client
        .start_container(cri::StartContainerRequest {
            container_id: id.clone(),
        })
        .await
        .expect("StartContainer");
    // The default profile holds: a filter, and no user namespace without CAP_SYS_ADMIN.
    let seccomp = containers::exec(
        &mut setup.client,
        &id,
        &["grep", "^Seccomp:", "/proc/self/status"],
        10,
    )
    .await
    .expect("ExecSync");
    assert_eq!(
        String::from_utf8_lossy(&seccomp.stdout)
            .split_whitespace()
            .collect::<Vec<_>>(),
        ["Seccomp:", "2"]
    );
    let unshare = containers::exec(
        &mut setup.client,
        &id,
        &["busybox", "unshare", "-U", "true"],
        10,
    )
    .await
    .expect("ExecSync");
    assert_ne!(
        unshare.exit_code,
        0,
        "unshare -U must fail under the default seccomp profile: {}",
        String::from_utf8_lossy(&unshare.stderr)
    );
}

/// The numbers of the `Groups:` line of a /proc/<pid>/status text (or of a CRI log line
/// holding one).
fn groups_of(status: &str) -> Vec<u32> {
    status
        .lines()
        .find_map(|l| l.split_once("Groups:").map(|(_, groups)| groups))
        .unwrap_or_else(|| panic!("no Groups line in {status:?}"))
        .split_whitespace()
        .map(|g| g.parse().expect("a gid"))
        .collect()
}

async fn check_groups(setup: &mut Setup) {
    let mut config = containers::container_config(
        &setup.image,
        "groups",
        "grep ^Groups: /proc/self/status; exec sleep 600",
    );
    config.linux.get_or_insert_default().security_context =
        Some(cri::LinuxContainerSecurityContext {
            run_as_user: Some(cri::Int64Value { value: 1000 }),
            run_as_group: Some(cri::Int64Value { value: 1000 }),
            supplemental_groups: vec![2000],
            ..Default::default()
        });
    let id = containers::run(&mut setup.client, &setup.sandbox, config).await;
    let log = setup.node.path(&format!("logs/{}/groups/0.log", setup.pod));
    containers::wait_log(&log, "Groups:").await;
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        groups_of(&text),
        [1000, 2000],
        "the container's process: {text}"
    );
    let exec = containers::exec(&mut setup.client, &id, &["cat", "/proc/self/status"], 10)
        .await
        .expect("ExecSync");
    assert_eq!(
        groups_of(&String::from_utf8_lossy(&exec.stdout)),
        [1000, 2000],
        "ExecSync's process"
    );
    let user = containers::status(&mut setup.client, &id)
        .await
        .user
        .and_then(|u| u.linux)
        .expect("the status reports the user");
    assert_eq!(
        (user.uid, user.gid, user.supplemental_groups),
        (1000, 1000, vec![1000, 2000])
    );
}

async fn check_an_allowing_handler_passes_them(setup: &mut Setup) {
    let name = "allowing";
    let mut request = containers::pod(&setup.node, name);
    ALLOWING_HANDLER.clone_into(&mut request.runtime_handler);
    let sandbox = setup
        .client
        .run_pod_sandbox(request)
        .await
        .expect("RunPodSandbox on the allowing handler")
        .into_inner()
        .pod_sandbox_id;
    let id = containers::create(
        &mut setup.client,
        &sandbox,
        annotated(&setup.image, "annotated"),
    )
    .await
    .expect("CreateContainer");
    let annotations = spec_annotations(setup, &id);
    assert_eq!(
        annotations["run.oci.seccomp_bpf_data"], ALLOW_ALL_BPF,
        "allowed_annotations lets crun's through: {annotations}"
    );
    assert!(
        annotations.get("io.containers.trace-syscall").is_none(),
        "but only those: {annotations}"
    );
    crate::e2e_support::stop(&mut setup.client, &sandbox).await;
    crate::e2e_support::remove(&mut setup.client, &sandbox).await;
    containers::remove_cgroups(&setup.node, &[name]);
}

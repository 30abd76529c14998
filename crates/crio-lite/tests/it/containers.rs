//! Containers end to end: the `crio-lite` binary in a node namespace with the real plugins, runc
//! and conmon, images pulled from a local docker-registry, driven with the calls crictl makes for
//! runp, pull, create, start, ps, exec -s, logs, stats, stop, rm, stopp and rmp.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cri_api::v1 as cri;
use cri_api::v1::runtime_service_client::RuntimeServiceClient;
use test_support::fs::file_names;
use test_support::image::{Compression, ImageBuilder, Layer, Tar};
use test_support::registry::{Registry, Upload};
use tonic::transport::Channel;

use crate::e2e_support::{self, Node};
use crate::support;

pub(crate) type Client = RuntimeServiceClient<Channel>;

/// A node set up for containers, the registry it pulls from, busybox pulled as `image`, and a
/// ready pod `pod` whose sandbox is `sandbox`.
pub(crate) struct Setup {
    pub(crate) node: Node,
    _registry: Registry,
    pub(crate) image: String,
    pub(crate) client: Client,
    pub(crate) sandbox: String,
    pub(crate) pod: &'static str,
}

pub(crate) async fn setup(tag: &str, pod_name: &'static str) -> Setup {
    setup_with(tag, pod_name, Vec::new(), |_| {}).await
}

/// [`setup`], with `extra` layers on top of the image's and `configure` writing to the node's
/// configuration before the daemon starts (drop-ins in `crio-lite.conf.d` after
/// `10-containers.conf`).
pub(crate) async fn setup_with(
    tag: &str,
    pod_name: &'static str,
    extra: Vec<Layer>,
    configure: impl FnOnce(&Node),
) -> Setup {
    let registry = Registry::start();
    // busybox, then a layer of the applets the tests run by name (exec runs no shell).
    let mut applets = Tar::new().dir("bin", 0o755);
    for name in [
        "cat", "echo", "grep", "head", "hostname", "ls", "ps", "readlink", "sleep", "true", "yes",
    ] {
        applets = applets.symlink(&format!("bin/{name}"), "busybox");
    }
    let mut image = ImageBuilder::new()
        .layer(Layer::new(&Tar::busybox().build(), Compression::Gzip))
        .layer(Layer::new(&applets.build(), Compression::Zstd));
    for layer in extra {
        image = image.layer(layer);
    }
    let image = image.build();
    registry.push_image("e2e/busybox", Some("1"), &image, Upload::Monolithic);
    let mut node = Node::new(tag);
    let host = e2e_support::forward_into(&node.netns_path(), registry.host());
    node.use_containers(&host);
    configure(&node);
    node.start().await;
    let reference = format!("{host}/e2e/busybox:1");
    let mut images = support::image_client(&node.socket()).await;
    images
        .pull_image(cri::PullImageRequest {
            image: Some(cri::ImageSpec {
                image: reference.clone(),
                ..cri::ImageSpec::default()
            }),
            auth: None,
            sandbox_config: None,
        })
        .await
        .unwrap_or_else(|e| panic!("pull {reference}: {e}\n{}", node.logs()));
    let mut client = node.client().await;
    let sandbox = client
        .run_pod_sandbox(pod(&node, pod_name))
        .await
        .expect("RunPodSandbox")
        .into_inner()
        .pod_sandbox_id;
    Setup {
        node,
        _registry: registry,
        image: reference,
        client,
        sandbox,
        pod: pod_name,
    }
}

impl Setup {
    /// stopp and rmp, SIGTERM, and nothing of the containers or the pod may be left.
    pub(crate) async fn finish(mut self) {
        e2e_support::stop(&mut self.client, &self.sandbox).await;
        e2e_support::remove(&mut self.client, &self.sandbox).await;
        assert!(
            list(&mut self.client, cri::ContainerFilter::default())
                .await
                .is_empty()
        );
        drop(self.client);
        assert!(
            self.node.sigterm().await,
            "the daemon exits cleanly on SIGTERM"
        );
        assert_no_container_left(&self.node);
        self.node.assert_nothing_leaked(&[self.sandbox]);
        remove_cgroups(&self.node, &[self.pod]);
    }
}

/// A pod whose containers log under `<node>/logs/<name>` and whose cgroups are the test's own.
pub(crate) fn pod(node: &Node, name: &str) -> cri::RunPodSandboxRequest {
    let mut request = e2e_support::pod(name, None);
    if let Some(config) = request.config.as_mut() {
        config.log_directory = node.path(&format!("logs/{name}")).display().to_string();
        config.linux = Some(cri::LinuxPodSandboxConfig {
            cgroup_parent: cgroup_parent(node, name),
            // One of Kubernetes' safe sysctls, of the IPC namespace the pod's containers share.
            sysctls: HashMap::from([("kernel.shm_rmid_forced".to_owned(), "1".to_owned())]),
            ..Default::default()
        });
    }
    request
}

/// The pod's cgroup parent, the test's own: a cgroup path with cgroupfs, a slice with systemd
/// (underscores for the dashes that would nest it in parent slices).
pub(crate) fn cgroup_parent(node: &Node, name: &str) -> String {
    match e2e_support::test_cgroup_manager() {
        oci_container::CgroupManager::Systemd => format!(
            "crio_lite_e2e_{}_{}.slice",
            node.name().replace('-', "_"),
            name.replace('-', "_")
        ),
        _ => format!("/crio-lite-e2e-{}-{name}", node.name()),
    }
}

pub(crate) fn container_config(image: &str, name: &str, script: &str) -> cri::ContainerConfig {
    cri::ContainerConfig {
        metadata: Some(cri::ContainerMetadata {
            name: name.to_owned(),
            attempt: 0,
        }),
        image: Some(cri::ImageSpec {
            image: image.to_owned(),
            ..cri::ImageSpec::default()
        }),
        command: vec!["/bin/sh".to_owned(), "-c".to_owned(), script.to_owned()],
        log_path: format!("{name}/0.log"),
        labels: HashMap::from([("container".to_owned(), name.to_owned())]),
        ..cri::ContainerConfig::default()
    }
}

pub(crate) async fn create(
    client: &mut Client,
    sandbox: &str,
    config: cri::ContainerConfig,
) -> Result<String, tonic::Status> {
    // Boxed: the request's future is large.
    Box::pin(client.create_container(cri::CreateContainerRequest {
        pod_sandbox_id: sandbox.to_owned(),
        config: Some(config),
        sandbox_config: None,
    }))
    .await
    .map(|r| r.into_inner().container_id)
}

pub(crate) async fn run(
    client: &mut Client,
    sandbox: &str,
    config: cri::ContainerConfig,
) -> String {
    let name = config.metadata.clone().unwrap_or_default().name;
    let id = create(client, sandbox, config)
        .await
        .unwrap_or_else(|e| panic!("CreateContainer {name}: {e}"));
    client
        .start_container(cri::StartContainerRequest {
            container_id: id.clone(),
        })
        .await
        .unwrap_or_else(|e| panic!("StartContainer {name}: {e}"));
    id
}

pub(crate) async fn status(client: &mut Client, id: &str) -> cri::ContainerStatus {
    client
        .container_status(cri::ContainerStatusRequest {
            container_id: id.to_owned(),
            verbose: false,
        })
        .await
        .unwrap_or_else(|e| panic!("ContainerStatus {id}: {e}"))
        .into_inner()
        .status
        .expect("a status")
}

pub(crate) async fn wait_exited(
    client: &mut Client,
    id: &str,
    within: Duration,
) -> cri::ContainerStatus {
    let deadline = Instant::now() + within;
    loop {
        let s = status(client, id).await;
        if s.state == cri::ContainerState::ContainerExited as i32 {
            return s;
        }
        assert!(
            Instant::now() < deadline,
            "container {id} still {:?}",
            s.state
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub(crate) async fn exec(
    client: &mut Client,
    id: &str,
    cmd: &[&str],
    timeout: i64,
) -> Result<cri::ExecSyncResponse, tonic::Status> {
    client
        .exec_sync(cri::ExecSyncRequest {
            container_id: id.to_owned(),
            cmd: cmd.iter().map(|&s| s.to_owned()).collect(),
            timeout,
        })
        .await
        .map(tonic::Response::into_inner)
}

pub(crate) async fn list(client: &mut Client, filter: cri::ContainerFilter) -> Vec<cri::Container> {
    client
        .list_containers(cri::ListContainersRequest {
            filter: Some(filter),
        })
        .await
        .expect("ListContainers")
        .into_inner()
        .containers
}

/// The CRI log's lines as `(stream, tag, text)`, each checked to start with an RFC 3339 time.
fn log_lines(path: &Path) -> Vec<(String, String, String)> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("read the log {}: {e}", path.display()));
    text.lines()
        .map(|line| {
            let mut parts = line.splitn(4, ' ');
            let time = parts.next().unwrap_or_default();
            assert!(
                time.len() > 20 && time.as_bytes()[4] == b'-' && time.contains('T'),
                "a CRI log line starts with its time: {line:?}"
            );
            let stream = parts.next().unwrap_or_default().to_owned();
            let tag = parts.next().unwrap_or_default().to_owned();
            (stream, tag, parts.next().unwrap_or_default().to_owned())
        })
        .collect()
}

pub(crate) async fn wait_log(path: &Path, text: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !std::fs::read_to_string(path).is_ok_and(|t| t.contains(text)) {
        assert!(
            Instant::now() < deadline,
            "{} never held {text:?}: {:?}",
            path.display(),
            std::fs::read_to_string(path)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Nothing of the containers is left: runc's state, conmon, root file systems, bundles, state
/// files, mounts under the storage.
pub(crate) fn assert_no_container_left(node: &Node) {
    let leaks = [
        ("runtime containers", node.runtime_containers()),
        ("processes in the node namespace", {
            node.ns().pids().iter().map(ToString::to_string).collect()
        }),
        (
            "root file systems",
            file_names(&node.state_dir().join("storage/containers"))
                .into_iter()
                .filter(|n| !n.starts_with('.'))
                .collect(),
        ),
        ("bundles", file_names(&node.run_dir().join("containers"))),
        ("pod files", file_names(&node.run_dir().join("pods"))),
        (
            "container state files",
            file_names(&node.state_dir().join("containers")),
        ),
        (
            "mounts under the pod directories (namespace pins, /dev/shm)",
            test_support::fs::mounts_at_or_below(&node.run_dir().join("pods"))
                .into_iter()
                .map(|m| m.point)
                .collect(),
        ),
        (
            "mounts under the storage",
            test_support::fs::mounts_at_or_below(&node.state_dir().join("storage"))
                .into_iter()
                .map(|m| m.point)
                .collect(),
        ),
    ];
    e2e_support::assert_none_left(&leaks);
}

pub(crate) fn remove_cgroups(node: &Node, names: &[&str]) {
    if e2e_support::test_cgroup_manager() == oci_container::CgroupManager::Systemd {
        for name in names {
            let _ =
                test_support::process::output("systemctl", &["stop", &cgroup_parent(node, name)]);
        }
        return;
    }
    for controller in file_names(Path::new("/sys/fs/cgroup")) {
        for name in names {
            let dir = PathBuf::from("/sys/fs/cgroup")
                .join(&controller)
                .join(cgroup_parent(node, name).trim_start_matches('/'));
            let _ = std::fs::remove_dir(dir);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root + netns + runc: cargo xtask test"]
async fn a_pod_of_two_containers_talks_over_localhost_execs_logs_and_goes() {
    let mut setup = setup("ctr", "web").await;
    let (image, sandbox) = (setup.image.clone(), setup.sandbox.clone());
    let (node, client) = (&mut setup.node, &mut setup.client);

    let server = run(
        client,
        &sandbox,
        container_config(
            &image,
            "server",
            "mkdir -p /tmp/www && echo hello from the server > /tmp/www/index.html && \
             echo serving && exec httpd -f -p 8080 -h /tmp/www",
        ),
    )
    .await;
    let client_id = run(
        client,
        &sandbox,
        container_config(
            &image,
            "client",
            "trap '' TERM; until wget -q -O- http://127.0.0.1:8080/; do sleep 0.1; done; \
             echo oops >&2; sleep 3600",
        ),
    )
    .await;
    let logs = node.path("logs/web");
    wait_log(&logs.join("client/0.log"), "hello from the server").await;
    // The shell writes `oops` after wget's output: on a slow node, moments later.
    wait_log(&logs.join("client/0.log"), "oops").await;
    let lines = log_lines(&logs.join("client/0.log"));
    assert!(
        lines.contains(&("stdout".into(), "F".into(), "hello from the server".into())),
        "{lines:?}"
    );
    assert!(
        lines.contains(&("stderr".into(), "F".into(), "oops".into())),
        "{lines:?}"
    );
    wait_log(&logs.join("server/0.log"), "serving").await;

    // crictl ps, ps --state, ps --label
    let all = list(client, cri::ContainerFilter::default()).await;
    assert_eq!(all.len(), 2);
    assert!(all.iter().all(|c| c.pod_sandbox_id == sandbox
        && c.state == cri::ContainerState::ContainerRunning as i32
        && c.image_id.starts_with("sha256:")));
    let labelled = list(
        client,
        cri::ContainerFilter {
            label_selector: HashMap::from([("container".to_owned(), "server".to_owned())]),
            ..cri::ContainerFilter::default()
        },
    )
    .await;
    assert_eq!(labelled.len(), 1);
    assert_eq!(labelled[0].id, server);

    check_exec_sync(client, &server).await;
    check_pod_shares(client, &server, &client_id).await;

    check_stats(client, &server).await;

    check_stop_and_remove(client, &sandbox, &image, &client_id, &logs).await;

    // stopp stops the server, rmp removes what is left.
    e2e_support::stop(client, &sandbox).await;
    let server_status = status(client, &server).await;
    assert_eq!(
        server_status.state,
        cri::ContainerState::ContainerExited as i32
    );
    setup.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root + netns + runc: cargo xtask test"]
async fn containers_outlive_a_killed_daemon_and_report_right_after_its_restart() {
    let mut setup = setup("ctrkill", "db").await;
    let (image, sandbox) = (setup.image.clone(), setup.sandbox.clone());
    let client = &mut setup.client;
    let long = run(
        client,
        &sandbox,
        container_config(&image, "long", "echo started; exec sleep 3600"),
    )
    .await;
    let short = run(
        client,
        &sandbox,
        container_config(&image, "short", "sleep 2; echo finished; exit 7"),
    )
    .await;
    let created = create(
        client,
        &sandbox,
        container_config(&image, "idle", "echo never"),
    )
    .await
    .expect("CreateContainer");
    let orphan = create(
        client,
        &sandbox,
        container_config(&image, "orphan", "echo never"),
    )
    .await
    .expect("CreateContainer");
    let pid_before = status_info_pid(client, &long).await;
    let started = run(
        client,
        &sandbox,
        container_config(&image, "started", "exec sleep 3600"),
    )
    .await;

    // The client's connection dies with the daemon; a new one is made after the restart.
    let node = &mut setup.node;
    node.sigkill();
    // As if killed after the runtime started `started` but before the daemon saved that.
    let state_file = node.state_dir().join(format!("containers/{started}.json"));
    let text = std::fs::read_to_string(&state_file).expect("the state file");
    assert!(text.contains("\"state\": \"running\""), "{text}");
    std::fs::write(
        &state_file,
        text.replace("\"state\": \"running\"", "\"state\": \"created\""),
    )
    .expect("rewrite the state file");
    // As if killed while conmon ran `runc create` for `orphan`: the runtime has the container,
    // crio-lite and oci-container no record of it.
    std::fs::remove_file(node.state_dir().join(format!("containers/{orphan}.json")))
        .expect("remove the orphan's state");
    let runtime = e2e_support::test_runtime().0;
    std::fs::remove_dir_all(
        node.run_dir()
            .join(format!("oci/{runtime}/containers/{orphan}")),
    )
    .expect("remove the orphan's runtime record");
    assert!(node.runtime_containers().contains(&orphan));
    // The short one exits while the daemon is down.
    tokio::time::sleep(Duration::from_secs(3)).await;
    node.start().await;
    node.wait_recovered().await;
    setup.client = setup.node.client().await;
    let (node, client) = (&setup.node, &mut setup.client);

    let long_status = status(client, &long).await;
    assert_eq!(
        long_status.state,
        cri::ContainerState::ContainerRunning as i32
    );
    assert_eq!(status_info_pid(client, &long).await, pid_before);
    let out = exec(client, &long, &["echo", "still here"], 10)
        .await
        .expect("ExecSync after the restart");
    assert_eq!(out.stdout, b"still here\n");
    let short_status = wait_exited(client, &short, Duration::from_secs(10)).await;
    assert_eq!(
        (short_status.exit_code, short_status.reason.as_str()),
        (7, "Error")
    );
    let lines = log_lines(&node.path("logs/db/short/0.log"));
    assert!(
        lines.iter().any(|(_, _, text)| text == "finished"),
        "the log written while the daemon was down is there: {lines:?}"
    );
    assert_eq!(
        status(client, &created).await.state,
        cri::ContainerState::ContainerCreated as i32
    );
    assert!(
        !node.runtime_containers().contains(&orphan),
        "a runtime container in our bundle directory without a record is removed"
    );
    assert_eq!(
        status(client, &started).await.state,
        cri::ContainerState::ContainerRunning as i32,
        "the runtime's word wins over a state saved before the start"
    );

    setup.finish().await;
}

/// A pod run with POD for pid: its containers that ask POD share a PID namespace whose pid 1 is
/// the pod's init, one that asks CONTAINER has its own; the init outlives a killed daemon and
/// dies with the pod, leaving no mount.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root + netns + runc: cargo xtask test"]
async fn containers_share_the_pods_pid_namespace_whose_init_goes_with_the_pod() {
    // RunPodSandbox without namespace options asks POD for pid, as crictl's pods do.
    let mut setup = setup("ctrpid", "pidns").await;
    let (image, sandbox) = (setup.image.clone(), setup.sandbox.clone());
    let client = &mut setup.client;
    let first = run(
        client,
        &sandbox,
        container_config(&image, "first", "exec sleep 3601"),
    )
    .await;
    let second = run(
        client,
        &sandbox,
        container_config(&image, "second", "exec sleep 3602"),
    )
    .await;
    let mut own = container_config(&image, "own", "exec sleep 3603");
    own.linux = Some(pid_mode(cri::NamespaceMode::Container));
    let own = run(client, &sandbox, own).await;

    let init = pod_init(&setup.node, &sandbox);
    let client = &mut setup.client;
    let seen = processes(client, &first).await;
    assert!(
        seen.contains("sleep 3602"),
        "first sees second's sleep: {seen}"
    );
    let second_pid1 = pid1(client, &second).await;
    assert!(
        second_pid1.contains("pod-init") && second_pid1.contains(&sandbox),
        "pid 1 is the pod's init, not a container: {second_pid1:?}"
    );
    let alone = processes(client, &own).await;
    assert!(
        !alone.contains("sleep 3601") && !alone.contains("sleep 3602"),
        "a CONTAINER container sees none of the pod's: {alone}"
    );
    assert_eq!(pid1(client, &own).await, "sleep 3603 ");

    // A container cannot share what a CONTAINER pod does not have: refused, naming the field.
    let mut solo = pod(&setup.node, "pidsolo");
    if let Some(linux) = solo.config.as_mut().and_then(|c| c.linux.as_mut()) {
        linux.security_context = Some(cri::LinuxSandboxSecurityContext {
            namespace_options: Some(cri::NamespaceOption {
                pid: cri::NamespaceMode::Container as i32,
                ..cri::NamespaceOption::default()
            }),
            ..cri::LinuxSandboxSecurityContext::default()
        });
    }
    let solo = client
        .run_pod_sandbox(solo)
        .await
        .expect("RunPodSandbox")
        .into_inner()
        .pod_sandbox_id;
    let refused = create(client, &solo, container_config(&image, "asks-pod", "true"))
        .await
        .expect_err("POD in a CONTAINER pod");
    assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{refused}");
    assert!(
        refused.message().contains("namespace_options.pid"),
        "{refused}"
    );
    e2e_support::stop(client, &solo).await;
    e2e_support::remove(client, &solo).await;

    // The daemon killed with the pod running: the init lives on, and the restarted daemon
    // still finds and kills it.
    setup.node.sigkill();
    assert!(init.is_alive(), "the init outlives the daemon");
    setup.node.start().await;
    setup.node.wait_recovered().await;
    setup.client = setup.node.client().await;
    let client = &mut setup.client;
    assert!(processes(client, &first).await.contains("sleep 3602"));
    e2e_support::stop(client, &sandbox).await;
    assert!(!init.is_alive(), "StopPodSandbox ends the pod's init");
    let pod_dir = setup.node.run_dir().join("pods").join(&sandbox);
    assert_eq!(
        test_support::fs::mounts_at_or_below(&pod_dir.join("pid")).len(),
        0,
        "the PID namespace is unpinned at the stop"
    );
    for id in [&first, &second, &own] {
        assert_eq!(
            status(client, id).await.state,
            cri::ContainerState::ContainerExited as i32
        );
    }
    setup.finish().await;
}

/// A container's security context asking `mode` for pid.
fn pid_mode(mode: cri::NamespaceMode) -> cri::LinuxContainerConfig {
    cri::LinuxContainerConfig {
        security_context: Some(cri::LinuxContainerSecurityContext {
            namespace_options: Some(cri::NamespaceOption {
                pid: mode as i32,
                ..cri::NamespaceOption::default()
            }),
            ..cri::LinuxContainerSecurityContext::default()
        }),
        resources: None,
    }
}

/// The command lines of the processes a container sees, one per line.
async fn processes(client: &mut Client, id: &str) -> String {
    let out = exec(
        client,
        id,
        &[
            "sh",
            "-c",
            "for f in /proc/[0-9]*/cmdline; do /bin/busybox tr '\\0' ' ' < $f; echo; done",
        ],
        10,
    )
    .await
    .expect("ExecSync");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The command line of pid 1 in a container, arguments separated by spaces.
async fn pid1(client: &mut Client, id: &str) -> String {
    let out = exec(client, id, &["cat", "/proc/1/cmdline"], 10)
        .await
        .expect("ExecSync");
    String::from_utf8_lossy(&out.stdout).replace('\0', " ")
}

/// A pod's init, as the daemon recorded it (oci-container's process identity: pid and start
/// time), found to run.
pub(crate) fn pod_init(node: &Node, sandbox: &str) -> oci_container::ProcessIdentity {
    let file = node.run_dir().join(format!("pods/{sandbox}/pid.init"));
    let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let init: oci_container::ProcessIdentity =
        serde_json::from_str(&text).expect("the pid file is a process identity");
    assert!(init.is_alive(), "the init the pid file names runs");
    init
}

/// `crictl exec -s`: output, exit codes, a missing command, a timeout that kills the command,
/// the pod's resolv.conf.
async fn check_exec_sync(client: &mut Client, server: &str) {
    let server = server.to_owned();
    // crictl exec -s: output, exit codes, a missing command, a timeout
    let out = exec(client, &server, &["cat", "/etc/hostname"], 10)
        .await
        .expect("ExecSync");
    assert_eq!(
        (out.exit_code, out.stdout.as_slice()),
        (0, &b"web\n"[..]),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = exec(client, &server, &["sh", "-c", "echo err >&2; exit 3"], 10)
        .await
        .expect("ExecSync");
    assert_eq!((out.exit_code, out.stderr.as_slice()), (3, &b"err\n"[..]));
    let out = exec(client, &server, &["no-such-command"], 10)
        .await
        .expect("ExecSync of a missing command answers with its exit code");
    assert_ne!(out.exit_code, 0);
    // runc's words, then crun's.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("\\\"no-such-command\\\": executable file not found")
            || stderr.contains("executable file `no-such-command` not found"),
        "the runtime's reason is in stderr: {:?}",
        String::from_utf8_lossy(&out.stderr)
    );
    let started = Instant::now();
    let slow = exec(client, &server, &["sleep", "30"], 1)
        .await
        .expect_err("an ExecSync past its timeout fails");
    assert_eq!(slow.code(), tonic::Code::DeadlineExceeded, "{slow}");
    assert!(started.elapsed() < Duration::from_secs(10));
    // A killed command the container's pid 1 has not reaped shows as `[sleep]`, without its
    // arguments; a live one as `sleep 30`.
    let ps = exec(client, &server, &["ps", "-o", "stat,args"], 10)
        .await
        .expect("ExecSync ps");
    assert!(
        !String::from_utf8_lossy(&ps.stdout).contains("sleep 30"),
        "the timed-out command was killed: {}",
        String::from_utf8_lossy(&ps.stdout)
    );
    let resolv = exec(client, &server, &["cat", "/etc/resolv.conf"], 10)
        .await
        .expect("ExecSync");
    assert!(String::from_utf8_lossy(&resolv.stdout).contains("nameserver 10.96.0.10"));
}

/// `crictl stats` of one container and of all.
async fn check_stats(client: &mut Client, server: &str) {
    let server = server.to_owned();
    // crictl stats
    let stats = client
        .container_stats(cri::ContainerStatsRequest {
            container_id: server.clone(),
        })
        .await
        .expect("ContainerStats")
        .into_inner()
        .stats
        .expect("stats");
    let memory = stats
        .memory
        .and_then(|m| m.working_set_bytes)
        .map(|v| v.value);
    assert!(memory.is_some_and(|m| m > 0), "{memory:?}");
    let cpu = stats
        .cpu
        .and_then(|c| c.usage_core_nano_seconds)
        .map(|v| v.value);
    assert!(cpu.is_some_and(|c| c > 0), "{cpu:?}");
    let all_stats = client
        .list_container_stats(cri::ListContainerStatsRequest { filter: None })
        .await
        .expect("ListContainerStats")
        .into_inner()
        .stats;
    assert_eq!(all_stats.len(), 2);
    // crictl statsp: the pod's figures are its running containers' sums.
    let pods = client
        .list_pod_sandbox_stats(cri::ListPodSandboxStatsRequest { filter: None })
        .await
        .expect("ListPodSandboxStats")
        .into_inner()
        .stats;
    assert_eq!(pods.len(), 1, "one pod");
    let linux = pods[0].linux.clone().expect("linux stats");
    assert_eq!(
        linux.containers.len(),
        2,
        "both containers in the pod's stats"
    );
    let pod_memory = linux
        .memory
        .and_then(|m| m.working_set_bytes)
        .map(|v| v.value);
    assert!(
        pod_memory.is_some_and(|m| m >= memory.unwrap_or_default()),
        "the pod's memory {pod_memory:?} holds its container's {memory:?}"
    );
    let processes = linux.process.and_then(|p| p.process_count).map(|v| v.value);
    assert!(processes.is_some_and(|n| n >= 2), "{processes:?}");
    let id = pods[0].attributes.as_ref().expect("attributes").id.clone();
    let one = client
        .pod_sandbox_stats(cri::PodSandboxStatsRequest {
            pod_sandbox_id: id.clone(),
        })
        .await
        .expect("PodSandboxStats")
        .into_inner()
        .stats
        .expect("stats");
    assert_eq!(one.attributes.map(|a| a.id), Some(id));
    let unknown = client
        .pod_sandbox_stats(cri::PodSandboxStatsRequest {
            pod_sandbox_id: "0".repeat(64),
        })
        .await
        .expect_err("no such pod");
    assert_eq!(unknown.code(), tonic::Code::NotFound, "{unknown}");
}

/// A container that ignores SIGTERM is killed after the timeout; one that exits at once is
/// Completed; a removed one is gone but its log stays.
async fn check_stop_and_remove(
    client: &mut Client,
    sandbox: &str,
    image: &str,
    client_id: &str,
    logs: &Path,
) {
    let (sandbox, client_id) = (sandbox.to_owned(), client_id.to_owned());
    // The client ignores SIGTERM (its shell traps it): killed after the timeout.
    let started = Instant::now();
    client
        .stop_container(cri::StopContainerRequest {
            container_id: client_id.clone(),
            timeout: 1,
        })
        .await
        .expect("StopContainer");
    assert!(started.elapsed() >= Duration::from_secs(1));
    let stopped = status(client, &client_id).await;
    assert_eq!(stopped.state, cri::ContainerState::ContainerExited as i32);
    assert_eq!((stopped.exit_code, stopped.reason.as_str()), (137, "Error"));
    assert!(stopped.finished_at >= stopped.started_at && stopped.started_at > 0);
    assert!(stopped.log_path.ends_with("client/0.log"));

    // A container that exits at once is Completed with its code.
    let quick = run(client, &sandbox, container_config(image, "quick", "exit 0")).await;
    let done = wait_exited(client, &quick, Duration::from_secs(10)).await;
    assert_eq!((done.exit_code, done.reason.as_str()), (0, "Completed"));

    // crictl rm of a stopped container; the name is free again.
    client
        .remove_container(cri::RemoveContainerRequest {
            container_id: client_id.clone(),
        })
        .await
        .expect("RemoveContainer");
    let gone = client
        .container_status(cri::ContainerStatusRequest {
            container_id: client_id.clone(),
            verbose: false,
        })
        .await
        .expect_err("a removed container has no status");
    assert_eq!(gone.code(), tonic::Code::NotFound);
    assert!(
        logs.join("client/0.log").exists(),
        "the log stays for kubelet"
    );
}

/// The pod's containers share its IPC and UTS namespaces (pinned, no pause container) and its
/// `/dev/shm`; the hostname is the pod's.
async fn check_pod_shares(client: &mut Client, server: &str, client_id: &str) {
    let mut seen = Vec::new();
    for id in [server, client_id] {
        let out = exec(
            client,
            id,
            &[
                "sh",
                "-c",
                "readlink /proc/self/ns/ipc; readlink /proc/self/ns/uts; hostname",
            ],
            10,
        )
        .await
        .expect("ExecSync");
        seen.push(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    assert_eq!(seen[0], seen[1], "both containers see the same namespaces");
    let rmid = exec(
        client,
        server,
        &["cat", "/proc/sys/kernel/shm_rmid_forced"],
        10,
    )
    .await
    .expect("read the pod's IPC sysctl");
    assert_eq!(rmid.stdout, b"1\n", "the pod's IPC sysctl is set");
    assert!(seen[0].ends_with("\nweb\n"), "{}", seen[0]);
    exec(
        client,
        server,
        &["sh", "-c", "echo shared > /dev/shm/note"],
        10,
    )
    .await
    .expect("write to /dev/shm");
    let note = exec(client, client_id, &["cat", "/dev/shm/note"], 10)
        .await
        .expect("read /dev/shm");
    assert_eq!(note.stdout, b"shared\n");
}

async fn status_info_pid(client: &mut Client, id: &str) -> i64 {
    let info = client
        .container_status(cri::ContainerStatusRequest {
            container_id: id.to_owned(),
            verbose: true,
        })
        .await
        .expect("ContainerStatus verbose")
        .into_inner()
        .info;
    let info: serde_json::Value = serde_json::from_str(&info["info"]).expect("the info is JSON");
    info["pid"].as_i64().expect("a pid")
}

async fn a_missing_container_is_not_found_or_done_already(client: &mut Client) {
    let missing_container = client
        .start_container(cri::StartContainerRequest {
            container_id: "deadbeef".to_owned(),
        })
        .await
        .expect_err("no such container");
    assert_eq!(missing_container.code(), tonic::Code::NotFound);
    // Stopping and removing one that is not there is done already (CRI idempotence, critest's
    // "should not return an error if not found").
    client
        .stop_container(cri::StopContainerRequest {
            container_id: "deadbeef".to_owned(),
            timeout: 1,
        })
        .await
        .expect("StopContainer of a missing container is idempotent");
    client
        .remove_container(cri::RemoveContainerRequest {
            container_id: "deadbeef".to_owned(),
        })
        .await
        .expect("RemoveContainer of a missing container is idempotent");
}

/// CreateContainer requests refused, each naming what is at fault: a missing image or sandbox,
/// a relative mount, a log path or a unified key that climbs out, a host path that is no device.
async fn refused_creates(client: &mut Client, sandbox: &str, image: &str) {
    let sandbox = sandbox.to_owned();
    let image = image.to_owned();
    let missing_image = create(
        client,
        &sandbox,
        container_config("127.0.0.1:1/nothing:here", "x", "true"),
    )
    .await
    .expect_err("an image that was never pulled");
    assert_eq!(
        missing_image.code(),
        tonic::Code::NotFound,
        "{missing_image}"
    );
    assert!(missing_image.message().contains("nothing:here"));
    let missing_sandbox = create(client, "f00d", container_config(&image, "x", "true"))
        .await
        .expect_err("a sandbox that does not exist");
    assert_eq!(missing_sandbox.code(), tonic::Code::NotFound);
    let mut bad_mount = container_config(&image, "x", "true");
    bad_mount.mounts = vec![cri::Mount {
        container_path: "relative/path".to_owned(),
        host_path: "/tmp".to_owned(),
        ..cri::Mount::default()
    }];
    let refused = create(client, &sandbox, bad_mount)
        .await
        .expect_err("a mount outside what is allowed");
    assert_eq!(refused.code(), tonic::Code::InvalidArgument);
    assert!(
        refused
            .message()
            .contains("config.mounts[0].container_path"),
        "{refused}"
    );
    // A log path that climbs out of the pod's log directory (CRI-O's CVE-2025-0750 was one).
    let mut climbing_log = container_config(&image, "log", "true");
    "../../../etc/cron.d/x".clone_into(&mut climbing_log.log_path);
    let refused = create(client, &sandbox, climbing_log)
        .await
        .expect_err("a log path outside the pod's log directory");
    assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{refused}");
    assert!(refused.message().contains("config.log_path"), "{refused}");
    // A unified key that is a path, not one file of the container's cgroup.
    let mut climbing_unified = container_config(&image, "unified", "true");
    climbing_unified.linux = Some(cri::LinuxContainerConfig {
        resources: Some(cri::LinuxContainerResources {
            unified: [("../../cgroup.procs".to_owned(), "1".to_owned())].into(),
            ..cri::LinuxContainerResources::default()
        }),
        security_context: None,
    });
    let refused = create(client, &sandbox, climbing_unified)
        .await
        .expect_err("a unified key that is a path");
    assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{refused}");
    assert!(refused.message().contains("unified key"), "{refused}");
    let mut not_a_device = container_config(&image, "dev", "true");
    not_a_device.devices = vec![cri::Device {
        container_path: "/dev/x".to_owned(),
        host_path: "/etc/hostname".to_owned(),
        permissions: "rw".to_owned(),
    }];
    let refused = create(client, &sandbox, not_a_device)
        .await
        .expect_err("a host path that is not a device");
    assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{refused}");
    assert!(
        refused
            .message()
            .contains("/etc/hostname is not a device node"),
        "{refused}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root + netns + runc: cargo xtask test"]
async fn bad_requests_and_an_oom_kill_are_reported_and_the_daemon_keeps_serving() {
    let mut setup = setup("ctrbad", "bad").await;
    let (image, sandbox) = (setup.image.clone(), setup.sandbox.clone());
    let client = &mut setup.client;

    refused_creates(client, &sandbox, &image).await;
    // A host device, under a name of the container's, usable as the permissions say.
    let mut with_device =
        container_config(&image, "devnull", "echo gone > /dev/xnull && ls /dev/xnull");
    with_device.devices = vec![cri::Device {
        container_path: "/dev/xnull".to_owned(),
        host_path: "/dev/null".to_owned(),
        permissions: "rw".to_owned(),
    }];
    let devnull = run(client, &sandbox, with_device).await;
    let done = wait_exited(client, &devnull, Duration::from_secs(10)).await;
    assert_eq!(done.exit_code, 0, "{done:?}");
    a_missing_container_is_not_found_or_done_already(client).await;

    let mut hog = container_config(
        &image,
        "hog",
        "echo start; x=a; while true; do x=$x$x; done",
    );
    hog.linux = Some(cri::LinuxContainerConfig {
        resources: Some(cri::LinuxContainerResources {
            memory_limit_in_bytes: 32 << 20,
            ..cri::LinuxContainerResources::default()
        }),
        security_context: None,
    });
    let hog = run(client, &sandbox, hog).await;
    let killed = wait_exited(client, &hog, Duration::from_secs(60)).await;
    assert_eq!(
        (killed.reason.as_str(), killed.exit_code),
        ("OOMKilled", 137),
        "{killed:?}"
    );
    assert_eq!(
        killed
            .resources
            .and_then(|r| r.linux)
            .map(|l| l.memory_limit_in_bytes),
        Some(32 << 20)
    );

    // The daemon serves on.
    let ok = run(client, &sandbox, container_config(&image, "ok", "exit 0")).await;
    let done = wait_exited(client, &ok, Duration::from_secs(10)).await;
    assert_eq!(done.exit_code, 0);

    setup.finish().await;
}

/// A thousand children run in `storm`; more forks are refused at the pids limit.
async fn check_fork_limit(client: &mut Client, storm: &str) {
    let count = |out: &cri::ExecSyncResponse| -> u32 {
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .unwrap_or(0)
    };
    let procs = exec(
        client,
        storm,
        &["sh", "-c", "ls /proc | grep -c '^[0-9]'"],
        10,
    )
    .await
    .expect("ExecSync in the storm");
    assert!(
        count(&procs) > 1000,
        "a thousand children run: {}",
        count(&procs)
    );
    // More runs into the limit: the shell that forks them is refused and says so.
    let more = exec(
        client,
        storm,
        &[
            "sh",
            "-c",
            "i=0; while [ $i -lt 100 ]; do sleep 600 >/dev/null 2>&1 & i=$((i+1)); done",
        ],
        10,
    )
    .await
    .expect("ExecSync of more forks");
    assert_ne!(more.exit_code, 0);
    assert!(
        String::from_utf8_lossy(&more.stderr).contains("can't fork"),
        "{}",
        String::from_utf8_lossy(&more.stderr)
    );
    let procs = exec(
        client,
        storm,
        &["sh", "-c", "ls /proc | grep -c '^[0-9]'"],
        10,
    )
    .await
    .expect("ExecSync in the storm");
    assert!(
        count(&procs) <= 1024,
        "bounded by the limit: {}",
        count(&procs)
    );
}

/// The daemon's resident memory, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("the daemon runs");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root + netns + runc: cargo xtask test"]
async fn a_log_flood_and_a_fork_storm_stay_in_their_containers() {
    let mut setup = setup("ctrflood", "flood").await;
    let (image, sandbox) = (setup.image.clone(), setup.sandbox.clone());
    let (node, client) = (&mut setup.node, &mut setup.client);
    let rss_before = rss_kib(node.daemon_pid());

    // 100 MB of log lines: conmon writes them, the daemon never holds them.
    let flood = run(
        client,
        &sandbox,
        container_config(
            &image,
            "flood",
            "yes 0123456789012345678901234567890123456789012345678901234567890123456789 \
             | head -c 100000000; echo done",
        ),
    )
    .await;
    // A thousand children, under the pids limit (crio.runtime.pids_limit, 1024).
    let storm = run(
        client,
        &sandbox,
        container_config(
            &image,
            "storm",
            "i=0; while [ $i -lt 1000 ]; do sleep 600 & i=$((i+1)); done; echo forked; wait",
        ),
    )
    .await;
    let flooded = wait_exited(client, &flood, Duration::from_secs(120)).await;
    assert_eq!(
        (flooded.exit_code, flooded.reason.as_str()),
        (0, "Completed")
    );
    let log = std::fs::metadata(node.path("logs/flood/flood/0.log")).expect("the flood's log");
    assert!(
        log.len() > 100_000_000,
        "the whole flood is logged: {} bytes",
        log.len()
    );
    wait_log(&node.path("logs/flood/storm/0.log"), "forked").await;
    let stats = client
        .container_stats(cri::ContainerStatsRequest {
            container_id: storm.clone(),
        })
        .await
        .expect("ContainerStats of the storm")
        .into_inner()
        .stats
        .expect("stats");
    check_fork_limit(client, &storm).await;
    assert!(stats.memory.is_some());
    // The daemon is unaffected: it answers, and holds no more memory than it did.
    let rss_after = rss_kib(node.daemon_pid());
    assert!(
        rss_after < rss_before + 16 * 1024,
        "daemon RSS went from {rss_before} KiB to {rss_after} KiB"
    );
    let started = Instant::now();
    client
        .stop_container(cri::StopContainerRequest {
            container_id: storm.clone(),
            timeout: 0,
        })
        .await
        .expect("StopContainer of the storm");
    assert!(started.elapsed() < Duration::from_secs(20));
    assert_eq!(
        status(client, &storm).await.state,
        cri::ContainerState::ContainerExited as i32
    );

    setup.finish().await;
}

//! The daemon with real network namespaces (and the fake CNI side): pins are namespaces, survive a
//! restart, and are released on removal.

use std::path::PathBuf;
use std::sync::Arc;

use cri_api::v1 as cri;
use crio_lite::{Daemon, HostNetns};
use ocicni::CniPlugin;
use test_support::fs::{file_names, is_mount_point};

use crate::support::{self, FakeCni, run, status};

/// Detaches the netns directory's self-bind (and any pin a failed test left) on drop.
pub(crate) struct ReleaseDir(pub(crate) PathBuf);

impl Drop for ReleaseDir {
    fn drop(&mut self) {
        if let Err(e) = ocicni::netns::release_dir(&self.0) {
            eprintln!("cannot release {}: {e}", self.0.display());
        }
    }
}

/// A daemon with real namespaces (and the fake CNI side) over `dir`, recovered.
pub(crate) async fn start(dir: &std::path::Path, cni: &Arc<FakeCni>) -> Daemon {
    let cni: Arc<dyn CniPlugin> = Arc::clone(cni) as Arc<dyn CniPlugin>;
    let daemon = Daemon::start(support::config(dir), cni, Arc::new(HostNetns))
        .await
        .expect("daemon starts");
    daemon.wait_recovered().await;
    daemon
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root + netns: cargo xtask test"]
async fn real_namespaces_are_pinned_kept_and_released() {
    let dir = tempfile::tempdir().unwrap();
    let netns_dir = dir.path().join("run/netns");
    let _release = ReleaseDir(netns_dir.clone());
    let cni = FakeCni::new();
    let daemon = start(dir.path(), &cni).await;
    let mut client = support::runtime_client(daemon.socket_path()).await;
    let id = run(&mut client, &format!("real-{}", std::process::id())).await;
    let pin = netns_dir.join(&id);
    assert!(
        ocicni::netns::is_netns(&pin).expect("inspect the pin"),
        "{} is a network namespace",
        pin.display()
    );
    drop(client);
    daemon.shutdown().await.unwrap();

    // After a restart the live namespace keeps the sandbox ready.
    let cni = FakeCni::new();
    let daemon = start(dir.path(), &cni).await;
    let mut client = support::runtime_client(daemon.socket_path()).await;
    assert_eq!(
        status(&mut client, &id).await.state,
        cri::PodSandboxState::SandboxReady as i32
    );
    assert!(
        cni.summary().iter().all(|c| !c.starts_with("teardown")),
        "{:?}",
        cni.summary()
    );

    client
        .remove_pod_sandbox(cri::RemovePodSandboxRequest { pod_sandbox_id: id })
        .await
        .unwrap();
    assert!(!pin.exists(), "the pin is gone");
    assert_eq!(file_names(&netns_dir), Vec::<String>::new());
    assert!(
        is_mount_point(&netns_dir.canonicalize().unwrap()),
        "pinning bound the directory onto itself"
    );
    daemon.shutdown().await.unwrap();
    // It used to stay mounted after shutdown; with no pin left the daemon releases it.
    assert!(
        !is_mount_point(&netns_dir.canonicalize().unwrap()),
        "{} is still mounted after shutdown",
        netns_dir.display()
    );
}

/// A network sysctl lands in the pod's namespace, and only there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root + netns: cargo xtask test"]
async fn network_sysctls_land_in_the_pod_namespace_only() {
    let dir = tempfile::tempdir().unwrap();
    let netns_dir = dir.path().join("run/netns");
    let _release = ReleaseDir(netns_dir.clone());
    let cni = FakeCni::new();
    let daemon = start(dir.path(), &cni).await;
    let mut client = support::runtime_client(daemon.socket_path()).await;
    let knob = "/proc/sys/net/ipv4/ip_unprivileged_port_start";
    let host_before = std::fs::read_to_string(knob).unwrap();
    let mut request = support::pod(&format!("sysctl-{}", std::process::id()));
    request
        .config
        .as_mut()
        .unwrap()
        .linux
        .get_or_insert_default()
        .sysctls
        .insert("net.ipv4.ip_unprivileged_port_start".into(), "81".into());
    let id = client
        .run_pod_sandbox(request)
        .await
        .unwrap()
        .into_inner()
        .pod_sandbox_id;
    let in_pod = ocicni::netns::with_netns(&netns_dir.join(&id), || std::fs::read_to_string(knob))
        .unwrap()
        .unwrap();
    assert_eq!(in_pod.trim(), "81");
    assert_eq!(
        std::fs::read_to_string(knob).unwrap(),
        host_before,
        "the node is untouched"
    );

    // One the kernel does not know in a network namespace fails the request and leaves nothing.
    let mut request = support::pod(&format!("sysctl-bad-{}", std::process::id()));
    request
        .config
        .as_mut()
        .unwrap()
        .linux
        .get_or_insert_default()
        .sysctls
        .insert("net.ipv4.no_such_knob".into(), "1".into());
    let err = client.run_pod_sandbox(request).await.unwrap_err();
    assert!(
        err.message().contains("net.ipv4.no_such_knob"),
        "{}",
        err.message()
    );
    assert_eq!(file_names(&netns_dir), vec![id.clone()]);
    support::stop_and_remove(&mut client, &id).await;
    drop(client);
    daemon.shutdown().await.unwrap();
}

/// A pin directory that was a mount point before the daemon started (the shared `/var/run/netns`
/// that `ip netns` binds) is someone else's: shutdown leaves the bind, even once it holds no pin.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root + netns: cargo xtask test"]
async fn a_pin_directory_mounted_before_is_never_released() {
    let dir = tempfile::tempdir().unwrap();
    let netns_dir = dir.path().join("run/netns");
    std::fs::create_dir_all(&netns_dir).unwrap();
    let _release = ReleaseDir(netns_dir.clone());
    // As `ip netns add` leaves it: the directory bound onto itself.
    let bound = std::process::Command::new("mount")
        .args(["--bind", "--make-shared"])
        .arg(&netns_dir)
        .arg(&netns_dir)
        .status()
        .expect("run mount");
    assert!(bound.success(), "mount --bind {}", netns_dir.display());
    assert!(is_mount_point(&netns_dir));

    let cni = FakeCni::new();
    let daemon = start(dir.path(), &cni).await;
    let mut client = support::runtime_client(daemon.socket_path()).await;
    let id = run(&mut client, &format!("shared-{}", std::process::id())).await;
    support::stop_and_remove(&mut client, &id).await;
    drop(client);
    daemon.shutdown().await.unwrap();
    assert!(file_names(&netns_dir).is_empty(), "the pin is gone");
    assert!(
        is_mount_point(&netns_dir),
        "the bind someone else made is still there"
    );
}

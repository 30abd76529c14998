//! The daemon with real network namespaces (and the fake CNI side): pins are namespaces, survive a
//! restart, and are released on removal.

use std::path::PathBuf;
use std::sync::Arc;

use cri_api::v1 as cri;
use crio_lite::{Daemon, HostNetns};
use ocicni::CniPlugin;

use crate::support::{self, FakeCni, files, run, status};

/// Detaches the netns directory's self-bind (and any pin a failed test left) on drop.
struct ReleaseDir(PathBuf);

impl Drop for ReleaseDir {
    fn drop(&mut self) {
        if let Err(e) = ocicni::netns::release_dir(&self.0) {
            eprintln!("cannot release {}: {e}", self.0.display());
        }
    }
}

async fn start(dir: &std::path::Path, cni: &Arc<FakeCni>) -> Daemon {
    let cni: Arc<dyn CniPlugin> = Arc::clone(cni) as Arc<dyn CniPlugin>;
    Daemon::start(support::config(dir), cni, Arc::new(HostNetns))
        .await
        .expect("daemon starts")
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
    assert_eq!(files(&netns_dir), Vec::<String>::new());
    daemon.shutdown().await.unwrap();
}

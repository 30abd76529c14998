//! Fakes for the network side and a harness that runs the daemon on a temporary socket.

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use cri_api::v1 as cri;
use cri_api::v1::image_service_client::ImageServiceClient;
use cri_api::v1::runtime_service_client::RuntimeServiceClient;
use crio_lite::{Config, Daemon, NetnsOps};
use hyper_util::rt::TokioIo;
use ipnet::IpNet;
use ocicni::cni_types::{CniResult, Interface, IpConfig, Version};
use ocicni::netns::Pinner;
use ocicni::{AttachmentResult, CniPlugin, NetworkStatus, PodNetwork};
use tokio::net::UnixStream;
use tonic::transport::{Channel, Endpoint, Uri};

/// The name of the fake's default network.
pub(crate) const NET: &str = "fakenet";

/// What the fake CNI side was asked to do.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Call {
    Setup(PodNetwork),
    Teardown(PodNetwork),
    Gc(Vec<String>),
    SetPodCidr(Option<IpNet>),
    Reload,
    Shutdown,
}

/// A CniPlugin that hands out 10.88.0.N and fd00::N, keeps "leases" per sandbox, and records calls.
#[derive(Debug, Default)]
pub(crate) struct FakeCni {
    calls: Mutex<Vec<Call>>,
    next: AtomicU32,
    leases: Mutex<HashMap<String, Vec<IpAddr>>>,
    not_ready: Mutex<Option<NetworkStatus>>,
    fail_setup: AtomicBool,
    hang_setup: AtomicBool,
    hang_teardown: AtomicBool,
    teardown_delay_ms: AtomicU32,
}

impl FakeCni {
    pub(crate) fn new() -> Arc<FakeCni> {
        Arc::new(FakeCni::default())
    }

    pub(crate) fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }

    /// The sandbox IDs of the setups, teardowns and GCs, as short strings, in order.
    pub(crate) fn summary(&self) -> Vec<String> {
        self.calls()
            .iter()
            .map(|c| match c {
                Call::Setup(p) => format!("setup {}", p.id),
                Call::Teardown(p) => format!("teardown {}", p.id),
                Call::Gc(valid) => format!("gc [{}]", valid.join(",")),
                Call::SetPodCidr(c) => format!("cidr {c:?}"),
                Call::Reload => "reload".to_owned(),
                Call::Shutdown => "shutdown".to_owned(),
            })
            .collect()
    }

    pub(crate) fn leases(&self) -> HashMap<String, Vec<IpAddr>> {
        self.leases.lock().unwrap().clone()
    }

    pub(crate) fn set_not_ready(&self, status: NetworkStatus) {
        *self.not_ready.lock().unwrap() = Some(status);
    }

    pub(crate) fn fail_setups(&self, fail: bool) {
        self.fail_setup.store(fail, Ordering::SeqCst);
    }

    /// Setups attach the pod, then never return (as if the daemon died inside a plugin).
    pub(crate) fn hang_setups(&self) {
        self.hang_setup.store(true, Ordering::SeqCst);
    }

    /// Teardowns take this long (a slow plugin).
    pub(crate) fn slow_teardowns(&self, delay: Duration) {
        self.teardown_delay_ms
            .store(u32::try_from(delay.as_millis()).unwrap(), Ordering::SeqCst);
    }

    /// Teardowns detach the pod, then never return (as if the daemon died inside a plugin).
    pub(crate) fn hang_teardowns(&self) {
        self.hang_teardown.store(true, Ordering::SeqCst);
    }

    fn record(&self, call: Call) {
        self.calls.lock().unwrap().push(call);
    }
}

#[async_trait]
impl CniPlugin for FakeCni {
    fn name(&self) -> &'static str {
        "fake"
    }

    fn default_network_name(&self) -> Option<String> {
        Some(NET.to_owned())
    }

    async fn setup_pod(&self, pod: &PodNetwork) -> ocicni::Result<Vec<AttachmentResult>> {
        self.record(Call::Setup(pod.clone()));
        // Long enough for concurrent requests to overlap.
        tokio::time::sleep(Duration::from_millis(20)).await;
        if self.fail_setup.load(Ordering::SeqCst) {
            return Err(ocicni::Error::NoNetwork {
                dir: PathBuf::from("/fake/net.d"),
            });
        }
        assert!(!pod.netns.is_empty(), "setup without a netns");
        assert!(
            Path::new(&pod.netns).exists(),
            "setup before the netns exists"
        );
        let n = self.next.fetch_add(1, Ordering::SeqCst) + 2;
        let v4: IpNet = format!("10.88.{}.{}/16", n / 256, n % 256).parse().unwrap();
        let v6: IpNet = format!("fd00::{n:x}/64").parse().unwrap();
        let mut result = CniResult::new(Version::V1_0_0).unwrap();
        let mut iface = Interface::new("eth0");
        iface.sandbox.clone_from(&pod.netns);
        result.interfaces.push(iface);
        for address in [v4, v6] {
            let mut ip = IpConfig::new(address);
            ip.interface = Some(0);
            result.ips.push(ip);
        }
        self.leases
            .lock()
            .unwrap()
            .insert(pod.id.clone(), vec![v4.addr(), v6.addr()]);
        if self.hang_setup.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
        Ok(vec![AttachmentResult {
            network: NET.to_owned(),
            ifname: "eth0".to_owned(),
            result,
        }])
    }

    async fn teardown_pod(&self, pod: &PodNetwork) -> ocicni::Result<()> {
        self.record(Call::Teardown(pod.clone()));
        self.leases.lock().unwrap().remove(&pod.id);
        let delay = self.teardown_delay_ms.load(Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(u64::from(delay))).await;
        if self.hang_teardown.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
        Ok(())
    }

    async fn pod_network_status(&self, pod: &PodNetwork) -> ocicni::Result<Vec<AttachmentResult>> {
        Err(ocicni::Error::InvalidPod {
            pod: pod.id.clone(),
            field: "id".to_owned(),
            reason: "the fake keeps no status".to_owned(),
        })
    }

    async fn gc(&self, valid_pods: &[PodNetwork]) -> ocicni::Result<()> {
        let mut valid: Vec<String> = valid_pods.iter().map(|p| p.id.clone()).collect();
        valid.sort();
        self.leases
            .lock()
            .unwrap()
            .retain(|id, _| valid.contains(id));
        self.record(Call::Gc(valid));
        Ok(())
    }

    async fn status(&self) -> NetworkStatus {
        self.not_ready
            .lock()
            .unwrap()
            .clone()
            .unwrap_or_else(NetworkStatus::ready)
    }

    async fn set_pod_cidr(&self, cidr: Option<IpNet>) {
        self.record(Call::SetPodCidr(cidr));
    }

    async fn reload(&self) -> ocicni::Result<()> {
        self.record(Call::Reload);
        Ok(())
    }

    async fn shutdown(&self) {
        self.record(Call::Shutdown);
    }
}

/// Namespaces as plain files: "live" while the file exists.
#[derive(Debug, Default)]
pub(crate) struct FakeNetns;

impl NetnsOps for FakeNetns {}

#[async_trait]
impl Pinner for FakeNetns {
    async fn create_pinned(&self, path: &Path) -> std::io::Result<()> {
        std::fs::create_dir_all(path.parent().unwrap())?;
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .map(drop)
    }

    async fn remove_pinned(&self, path: &Path) -> std::io::Result<()> {
        match std::fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    async fn is_live(&self, path: &Path) -> bool {
        path.exists()
    }

    async fn release_dir(&self, _dir: &Path) -> std::io::Result<()> {
        Ok(())
    }

    /// Appends `key=value` lines to the pin (a plain file here), for tests to read back; refuses
    /// keys the real thing refuses.
    async fn set_sysctls(
        &self,
        path: &Path,
        sysctls: Vec<(String, String)>,
    ) -> std::io::Result<()> {
        use std::io::Write as _;
        let mut pin = std::fs::OpenOptions::new().append(true).open(path)?;
        for (key, value) in sysctls {
            ocicni::netns::check_sysctl(&key, &value).map_err(std::io::Error::other)?;
            writeln!(pin, "{key}={value}")?;
        }
        Ok(())
    }
}

/// A configuration with every path under `dir`.
pub(crate) fn config(dir: &Path) -> Config {
    let mut config = Config::default();
    config.crio.api.listen = dir.join("run/crio-lite.sock");
    config.crio.root = dir.join("state");
    config.crio.runroot = dir.join("run");
    // Pins in <dir>/run/netns, not the machine's /var/run/netns.
    config.crio.runtime.namespaces_dir = dir.join("run");
    config.crio.network.network_dir = dir.join("net.d");
    config.crio_lite.network.cache_dir = dir.join("cache");
    config.crio_lite.network.cni_run_dir = dir.join("run/cni");
    // Not the machine's policy.json and registries.conf: every image accepted, no mirrors.
    let policy = dir.join("policy.json");
    std::fs::create_dir_all(dir).expect("create the test directory");
    std::fs::write(
        &policy,
        r#"{"default": [{"type": "insecureAcceptAnything"}]}"#,
    )
    .expect("write policy.json");
    config.crio.image.signature_policy = policy;
    config.crio_lite.image.registries_conf = dir.join("registries.conf");
    config
}

pub(crate) async fn start(dir: &Path, cni: &Arc<FakeCni>) -> Daemon {
    let cni: Arc<dyn CniPlugin> = Arc::clone(cni) as Arc<dyn CniPlugin>;
    let daemon = Daemon::start(config(dir), cni, Arc::new(FakeNetns))
        .await
        .expect("daemon starts");
    daemon.wait_recovered().await;
    daemon
}

/// A daemon on the fake CNI side in a fresh temporary directory, with a runtime client.
pub(crate) struct Harness {
    /// Holds every path of the daemon; removed on drop, so keep it bound.
    pub(crate) dir: tempfile::TempDir,
    pub(crate) cni: Arc<FakeCni>,
    pub(crate) daemon: Daemon,
    pub(crate) client: RuntimeServiceClient<Channel>,
}

/// Starts a daemon in a new temporary directory with a new `FakeCni` and connects to it.
pub(crate) async fn harness() -> Harness {
    let dir = tempfile::tempdir().unwrap();
    let cni = FakeCni::new();
    let (daemon, client) = start_with_client(dir.path(), &cni).await;
    Harness {
        dir,
        cni,
        daemon,
        client,
    }
}

/// Starts a daemon with every path under `dir` (again, for restarts) and connects to it.
pub(crate) async fn start_with_client(
    dir: &Path,
    cni: &Arc<FakeCni>,
) -> (Daemon, RuntimeServiceClient<Channel>) {
    let daemon = start(dir, cni).await;
    let client = runtime_client(daemon.socket_path()).await;
    (daemon, client)
}

pub(crate) async fn channel(socket: &Path) -> Channel {
    let socket = socket.to_owned();
    Endpoint::try_from("http://[::]:50051")
        .unwrap()
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let socket = socket.clone();
            async move { Ok::<_, std::io::Error>(TokioIo::new(UnixStream::connect(socket).await?)) }
        }))
        .await
        .expect("connects to the socket")
}

pub(crate) async fn runtime_client(socket: &Path) -> RuntimeServiceClient<Channel> {
    RuntimeServiceClient::new(channel(socket).await)
}

pub(crate) async fn image_client(socket: &Path) -> ImageServiceClient<Channel> {
    ImageServiceClient::new(channel(socket).await)
}

/// A RunPodSandbox request for pod `name` in `default`, with a port mapping, a cgroup parent,
/// a label `app=<name>` and an annotation.
/// The host port `pod(name)` maps: one per name, so sandboxes of one test do not clash (crio-lite
/// refuses a host port another sandbox holds).
pub(crate) fn host_port_of(name: &str) -> i32 {
    let hash = name
        .bytes()
        .fold(17u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
    20_000 + i32::try_from(hash % 40_000).unwrap()
}

pub(crate) fn pod(name: &str) -> cri::RunPodSandboxRequest {
    cri::RunPodSandboxRequest {
        config: Some(cri::PodSandboxConfig {
            metadata: Some(cri::PodSandboxMetadata {
                name: name.to_owned(),
                uid: format!("uid-{name}"),
                namespace: "default".to_owned(),
                attempt: 0,
            }),
            hostname: name.to_owned(),
            dns_config: Some(cri::DnsConfig {
                servers: vec!["10.96.0.10".to_owned()],
                searches: vec!["default.svc.cluster.local".to_owned()],
                options: vec!["ndots:5".to_owned()],
            }),
            port_mappings: vec![cri::PortMapping {
                protocol: cri::Protocol::Tcp as i32,
                container_port: 80,
                host_port: host_port_of(name),
                host_ip: String::new(),
            }],
            labels: HashMap::from([("app".to_owned(), name.to_owned())]),
            annotations: HashMap::from([("team".to_owned(), "net".to_owned())]),
            linux: Some(cri::LinuxPodSandboxConfig {
                // kubelet's parents as its cgroupfs and systemd drivers name them.
                cgroup_parent: match crate::e2e_support::test_cgroup_manager() {
                    oci_container::CgroupManager::Systemd => {
                        format!("kubepods-pod{}.slice", name.replace('-', "_"))
                    }
                    _ => format!("/kubepods/pod-{name}"),
                },
                ..Default::default()
            }),
            ..Default::default()
        }),
        runtime_handler: String::new(),
    }
}

/// A StopPodSandbox request for `id`.
pub(crate) fn stop_request(id: &str) -> cri::StopPodSandboxRequest {
    cri::StopPodSandboxRequest {
        pod_sandbox_id: id.to_owned(),
    }
}

/// A RemovePodSandbox request for `id`.
pub(crate) fn remove_request(id: &str) -> cri::RemovePodSandboxRequest {
    cri::RemovePodSandboxRequest {
        pod_sandbox_id: id.to_owned(),
    }
}

/// A PodSandboxStatus request for `id`.
pub(crate) fn status_request(id: &str, verbose: bool) -> cri::PodSandboxStatusRequest {
    cri::PodSandboxStatusRequest {
        pod_sandbox_id: id.to_owned(),
        verbose,
    }
}

pub(crate) async fn run(client: &mut RuntimeServiceClient<Channel>, name: &str) -> String {
    client
        .run_pod_sandbox(pod(name))
        .await
        .expect("RunPodSandbox")
        .into_inner()
        .pod_sandbox_id
}

pub(crate) async fn status(
    client: &mut RuntimeServiceClient<Channel>,
    id: &str,
) -> cri::PodSandboxStatus {
    client
        .pod_sandbox_status(status_request(id, false))
        .await
        .expect("PodSandboxStatus")
        .into_inner()
        .status
        .unwrap()
}

pub(crate) async fn list(
    client: &mut RuntimeServiceClient<Channel>,
    filter: Option<cri::PodSandboxFilter>,
) -> Vec<cri::PodSandbox> {
    client
        .list_pod_sandbox(cri::ListPodSandboxRequest { filter })
        .await
        .expect("ListPodSandbox")
        .into_inner()
        .items
}

/// The IPs a status reports, primary first.
pub(crate) fn ips(status: &cri::PodSandboxStatus) -> Vec<String> {
    let network = status.network.clone().unwrap_or_default();
    std::iter::once(network.ip)
        .chain(network.additional_ips.into_iter().map(|ip| ip.ip))
        .collect()
}

/// Port mappings etc. the fake was given for `NET`.
pub(crate) fn runtime_config_of(pod: &PodNetwork) -> ocicni::RuntimeConfig {
    pod.runtime_config.get(NET).cloned().unwrap_or_default()
}

pub(crate) fn labels(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// StopPodSandbox then RemovePodSandbox, both expected to succeed.
pub(crate) async fn stop_and_remove(client: &mut RuntimeServiceClient<Channel>, id: &str) {
    client
        .stop_pod_sandbox(stop_request(id))
        .await
        .unwrap_or_else(|e| panic!("StopPodSandbox {id}: {e}"));
    client
        .remove_pod_sandbox(remove_request(id))
        .await
        .unwrap_or_else(|e| panic!("RemovePodSandbox {id}: {e}"));
}

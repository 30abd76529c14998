//! The end-to-end harness: a "node" network namespace per test, the real `crio-lite` binary running
//! in it with the real plugins on temporary directories, and the checks that nothing leaked.
//!
//! The daemon runs under `nsenter --net=/run/netns/<node>`, not `ip netns exec`: the latter also
//! gives the process a private mount namespace, so the pins the daemon mounts under its run
//! directory would be invisible here (no `nsenter --net=<pin>` from the test) and would vanish with
//! a killed daemon, which is not what a restarted daemon finds on a real node.

use std::fmt::Write as _;
use std::io::{Read as _, Write as _};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use cri_api::v1 as cri;
use cri_api::v1::runtime_service_client::RuntimeServiceClient;
use ipnet::IpNet;
use test_support::fs::file_names;
use test_support::netns::{self, NetNs};
use test_support::process::{output, stdout};
use tonic::transport::Channel;

use crate::support;

/// The built-in default network: its name, subnet and gateway (the bridge's address on the node).
pub(crate) const NETWORK: &str = "ocicni-default";
pub(crate) const GATEWAY: Ipv4Addr = Ipv4Addr::new(10, 85, 0, 1);

pub(crate) fn subnet() -> IpNet {
    IpNet::new(IpAddr::V4(Ipv4Addr::new(10, 85, 0, 0)), 16).expect("a /16 is a prefix")
}

/// A node: its network namespace, its directories and the daemon running in it. Dropping it kills
/// the daemon, unmounts what is left under the run directory, deletes the namespace and the
/// directories, whether the test passed or not.
pub(crate) struct Node {
    /// Deleted after [`Node`]'s own drop has killed the daemon and removed the pins.
    ns: NetNs,
    dir: tempfile::TempDir,
    daemon: Option<Child>,
    starts: u32,
    killed: Option<u32>,
    extra_flags: Vec<String>,
    /// Environment every later start adds (`NOTIFY_SOCKET`, ...).
    extra_env: Vec<(String, String)>,
}

impl Node {
    /// Creates the node namespace (`lo` up) and the directories. Fails the test when the namespace
    /// cannot be made: these tests never skip.
    pub(crate) fn new(tag: &str) -> Node {
        let dir = test_support::temp_dir("crio-lite-e2e");
        let node = Node {
            ns: NetNs::new(&format!("crle2e-{tag}")),
            dir,
            daemon: None,
            starts: 0,
            killed: None,
            extra_flags: Vec::new(),
            extra_env: Vec::new(),
        };
        for sub in ["state", "run", "net.d", "cache"] {
            std::fs::create_dir_all(node.path(sub)).expect("create a node directory");
        }
        // A configuration file and drop-in directory of the node's own, so the machine's
        // /etc/crio-lite/crio-lite.conf{,.d} are not read. The log level is in the file, not a
        // flag, so a drop-in and SIGHUP can change it.
        // The cgroup manager the tests' pods are made for (their parents are its kind).
        std::fs::write(
            node.path("crio-lite.conf"),
            format!(
                "[crio.runtime]\nlog_level = \"info\"\ncgroup_manager = \"{}\"\n",
                test_cgroup_manager().name()
            ),
        )
        .expect("write the config file");
        std::fs::create_dir_all(node.path("crio-lite.conf.d")).expect("create the drop-in dir");
        node
    }

    /// The node namespace.
    pub(crate) fn ns(&self) -> &NetNs {
        &self.ns
    }

    /// The node namespace's name (`ip netns` knows it by).
    pub(crate) fn name(&self) -> &str {
        self.ns.name()
    }

    /// A path under the node's temporary directory.
    pub(crate) fn path(&self, sub: &str) -> PathBuf {
        self.dir.path().join(sub)
    }

    pub(crate) fn socket(&self) -> PathBuf {
        self.path("run/crio-lite.sock")
    }

    pub(crate) fn run_dir(&self) -> PathBuf {
        self.path("run")
    }

    pub(crate) fn netns_dir(&self) -> PathBuf {
        self.path("run/netns")
    }

    pub(crate) fn cache_dir(&self) -> PathBuf {
        self.path("cache")
    }

    pub(crate) fn state_dir(&self) -> PathBuf {
        self.path("state")
    }

    pub(crate) fn network_dir(&self) -> PathBuf {
        self.path("net.d")
    }

    /// Where the daemon pins a sandbox's namespace.
    pub(crate) fn pin(&self, id: &str) -> PathBuf {
        self.netns_dir().join(id)
    }

    /// The node namespace as `ip netns add` pinned it.
    pub(crate) fn netns_path(&self) -> PathBuf {
        self.ns.path()
    }

    /// The flags that point the binary at this node's socket and directories.
    pub(crate) fn flags(&self) -> Vec<String> {
        let flag = |name: &str, path: PathBuf| [format!("--{name}"), path.display().to_string()];
        [
            flag("config", self.path("crio-lite.conf")),
            flag("config-dir", self.path("crio-lite.conf.d")),
            flag("listen", self.socket()),
            flag("root", self.state_dir()),
            flag("runroot", self.run_dir()),
            // Pins in <node>/run/netns, not the machine's /var/run/netns.
            flag("namespaces-dir", self.run_dir()),
            flag("cni-config-dir", self.network_dir()),
            flag("cache-dir", self.cache_dir()),
            flag("cni-run-dir", self.path("run/cni")),
        ]
        .into_iter()
        .flatten()
        .collect()
    }

    /// Flags every later start passes after [`Node::flags`] (plugin directories, timeouts).
    pub(crate) fn add_flags<I: IntoIterator<Item = String>>(&mut self, flags: I) {
        self.extra_flags.extend(flags);
    }

    /// Sets `name=value` in the environment of every later start.
    pub(crate) fn add_env(&mut self, name: &str, value: &str) {
        self.extra_env.push((name.to_owned(), value.to_owned()));
    }

    /// What [`Node::add_flags`] added.
    pub(crate) fn extra_flags(&self) -> &[String] {
        &self.extra_flags
    }

    /// Starts the daemon inside the node namespace and waits until its socket answers.
    pub(crate) async fn start(&mut self) {
        assert!(self.daemon.is_none(), "the daemon is already running");
        self.starts += 1;
        let log = self.path(&format!("daemon-{}.log", self.starts));
        let log = std::fs::File::create(&log).expect("create the daemon log");
        let mut child = Command::new("nsenter")
            .arg(format!("--net={}", self.netns_path().display()))
            .arg("--")
            .arg(env!("CARGO_BIN_EXE_crio-lite"))
            .args(self.flags())
            .args(&self.extra_flags)
            .arg("run")
            .env_remove("RUST_LOG")
            .envs(self.extra_env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("clone the log file"))
            .stderr(log)
            .spawn()
            .expect("start crio-lite under nsenter");
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                panic!("crio-lite exited at start-up ({status}):\n{}", self.logs());
            }
            if tokio::net::UnixStream::connect(self.socket()).await.is_ok() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "crio-lite did not serve on {} within 20 s:\n{}",
                self.socket().display(),
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.daemon = Some(child);
    }

    /// SIGHUP to the running daemon: it reads its configuration again and reloads the CNI one.
    pub(crate) fn sighup(&self) {
        let child = self.daemon.as_ref().expect("the daemon is running");
        let kill = output("kill", &["-HUP", &child.id().to_string()]);
        assert!(kill.status.success(), "kill -HUP failed");
    }

    /// Waits until the running daemon has logged `text` `times` times in all; fails the test
    /// after 20 s.
    pub(crate) async fn wait_log(&self, text: &str, times: usize) {
        let log = self.path(&format!("daemon-{}.log", self.starts));
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let logged = std::fs::read_to_string(&log).unwrap_or_default();
            if logged.matches(text).count() >= times {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "crio-lite did not log {text:?} {times} time(s) within 20 s:\n{}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// SIGTERM, then waits for the daemon to exit; returns whether it exited successfully.
    pub(crate) async fn sigterm(&mut self) -> bool {
        let mut child = self.daemon.take().expect("the daemon is running");
        let kill = output("kill", &["-TERM", &child.id().to_string()]);
        assert!(kill.status.success(), "kill -TERM failed");
        let deadline = Instant::now() + Duration::from_secs(40);
        loop {
            match child.try_wait() {
                Ok(Some(status)) => return status.success(),
                Ok(None) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!("crio-lite did not exit after SIGTERM:\n{}", self.logs());
                }
            }
        }
    }

    /// The running daemon's pid.
    pub(crate) fn daemon_pid(&self) -> u32 {
        self.daemon.as_ref().expect("the daemon is running").id()
    }

    pub(crate) fn is_running(&self) -> bool {
        self.daemon.is_some()
    }

    /// SIGKILL to the daemon, reaped at once. Plugins it was running carry on (cni-exec puts each
    /// in a process group of its own), as after a crash.
    pub(crate) fn sigkill(&mut self) {
        let mut child = self.daemon.take().expect("the daemon is running");
        child.kill().expect("SIGKILL the daemon");
        let _ = child.wait();
        self.killed = Some(child.id());
    }

    /// Waits until no process is left in the node namespace (plugins a killed daemon left running).
    pub(crate) async fn wait_for_orphans(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let pids = self.ns.pids();
            if pids.is_empty() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "processes still in {} after 30 s: {pids:?}",
                self.name()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until the running daemon's log says recovery finished (it runs in the background
    /// after a start); fails the test after 60 s.
    pub(crate) async fn wait_recovered(&self) {
        let log = self.path(&format!("daemon-{}.log", self.starts));
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if text.contains("sandboxes recovered") {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "crio-lite did not finish recovery within 60 s:\n{}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Everything the daemon logged, every start.
    pub(crate) fn logs(&self) -> String {
        let mut all = String::new();
        for n in 1..=self.starts {
            let log =
                std::fs::read_to_string(self.path(&format!("daemon-{n}.log"))).unwrap_or_default();
            let _ = writeln!(all, "--- daemon start {n} ---\n{log}");
        }
        all
    }

    pub(crate) async fn client(&self) -> RuntimeServiceClient<Channel> {
        support::runtime_client(&self.socket()).await
    }

    /// Runs a program inside a pod's pinned namespace.
    pub(crate) fn in_pod(&self, id: &str, program: &str, args: &[&str]) -> Output {
        let mut all = vec![program];
        all.extend_from_slice(args);
        netns::run_in(&self.pin(id), &all)
    }

    /// Whether one ping from pod `from` reaches `to`.
    pub(crate) fn ping(&self, from: &str, to: IpAddr) -> Result<(), String> {
        let out = self.in_pod(from, "ping", &["-c", "1", "-W", "2", &to.to_string()]);
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "ping from {from} to {to}: {}{}",
                stdout(&out),
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }

    /// The veth interfaces in the node namespace (the host ends of pod interfaces).
    pub(crate) fn veths(&self) -> Vec<String> {
        self.ns.veths()
    }

    /// host-local's leases for the default network: files named after an address.
    pub(crate) fn leases(&self) -> Vec<String> {
        file_names(&self.cache_dir().join("networks").join(NETWORK))
            .into_iter()
            .filter(|f| f.parse::<IpAddr>().is_ok())
            .collect()
    }

    /// ocicni's cached results (`<cache dir>/results/*`) and pending entries (`pending/*`).
    pub(crate) fn cache_entries(&self) -> Vec<String> {
        test_support::fs::cache_entries(
            &self.cache_dir().join("results"),
            &self.path("run/cni/pending"),
        )
    }

    /// Mounts under the netns directory (pins); the directory's own self-bind is not one.
    pub(crate) fn pin_mounts(&self) -> Vec<String> {
        let dir = self.netns_dir();
        test_support::fs::mounts_at_or_below(&dir)
            .into_iter()
            .map(|m| m.point)
            .filter(|point| Path::new(point) != dir)
            .collect()
    }

    /// The node's iptables rules (iptables-save), one per line.
    pub(crate) fn iptables(&self) -> String {
        self.ns.iptables()
    }

    /// Rules that belong to one pod: they name a sandbox ID, or carry the `id: "..."` comment the
    /// bridge and portmap plugins put on per-pod rules.
    pub(crate) fn pod_rules(&self, ids: &[String]) -> Vec<String> {
        self.iptables()
            .lines()
            .filter(|l| l.contains("id: \\\"") || ids.iter().any(|id| l.contains(id.as_str())))
            .map(str::to_owned)
            .collect()
    }

    /// Asserts that no pod left anything behind: veths, leases, cache entries (pending ones too),
    /// pod lock files, pins, mounts, state files, iptables rules.
    pub(crate) fn assert_nothing_leaked(&self, ids: &[String]) {
        // The start-up GC takes the GC lock, so its file shows where the daemon's locks are.
        assert!(
            self.path("run/cni/locks/gc.lock").exists(),
            "the daemon keeps its locks somewhere else"
        );
        let leaks = [
            ("veths in the node namespace", self.veths()),
            ("host-local leases", self.leases()),
            ("cache entries", self.cache_entries()),
            (
                "pod lock files",
                file_names(&self.path("run/cni/locks"))
                    .into_iter()
                    .filter(|name| name != "gc.lock")
                    .collect(),
            ),
            ("pins", file_names(&self.netns_dir())),
            ("mounts under the run dir", self.pin_mounts()),
            (
                "sandbox state files",
                file_names(&self.state_dir().join("sandboxes")),
            ),
            ("iptables rules of pods", self.pod_rules(ids)),
        ];
        assert_none_left(&leaks);
    }

    /// Listens on TCP port `port` inside pod `id`; a thread answers the first connection with
    /// `greeting`.
    pub(crate) fn serve_in_pod(&self, id: &str, port: u16, greeting: &'static str) {
        let listener = ocicni::netns::with_netns(&self.pin(id), move || {
            TcpListener::bind(SocketAddr::from((Ipv4Addr::UNSPECIFIED, port)))
        })
        .expect("enter the pod's namespace")
        .expect("listen inside the pod");
        std::thread::spawn(move || {
            if let Ok((mut conn, _)) = listener.accept() {
                let _ = conn.write_all(greeting.as_bytes());
            }
        });
    }

    /// Connects from the node namespace to `addr` and reads until the peer closes.
    pub(crate) fn fetch_from_node(&self, addr: SocketAddr) -> std::io::Result<String> {
        ocicni::netns::with_netns(&self.netns_path(), move || {
            let mut conn = TcpStream::connect_timeout(&addr, Duration::from_secs(3))?;
            conn.set_read_timeout(Some(Duration::from_secs(3)))?;
            let mut text = String::new();
            conn.read_to_string(&mut text)?;
            Ok(text)
        })
        .map_err(std::io::Error::other)?
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Some(mut child) = self.daemon.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if std::thread::panicking() {
            eprintln!("node {}: daemon logs\n{}", self.name(), self.logs());
        }
        self.remove_containers();
        // Plugins of a killed daemon may still run in the node; their namespace goes anyway.
        for pin in file_names(&self.netns_dir()) {
            let path = self.netns_dir().join(&pin);
            if let Err(e) = ocicni::netns::remove_pinned(&path) {
                eprintln!("cannot remove pin {}: {e}", path.display());
            }
        }
        if let Err(e) = ocicni::netns::release_dir(&self.netns_dir()) {
            eprintln!("cannot release {}: {e}", self.netns_dir().display());
        }
        // Then `ns` deletes the namespace and the TempDir removes the directories.
    }
}

/// The OCI runtime the tests' containers run on, name and binary: `CRIO_LITE_TEST_RUNTIME`
/// (`crun` or `runc`), runc when unset, as crun refuses hybrid-cgroup hosts such as CI's. The
/// VM suite (`cargo xtask vm`) runs them on both.
pub(crate) fn test_runtime() -> (&'static str, &'static str) {
    match std::env::var("CRIO_LITE_TEST_RUNTIME").as_deref() {
        Ok("crun") => ("crun", "/usr/bin/crun"),
        Ok("runc") | Err(_) => ("runc", "/usr/sbin/runc"),
        Ok(other) => panic!("CRIO_LITE_TEST_RUNTIME={other:?}: crun or runc"),
    }
}

/// The cgroup manager the tests' daemons use: `CRIO_LITE_TEST_CGROUP_MANAGER` (`systemd` or
/// `cgroupfs`), the node's default (systemd where it is init) when unset.
pub(crate) fn test_cgroup_manager() -> oci_container::CgroupManager {
    match std::env::var("CRIO_LITE_TEST_CGROUP_MANAGER") {
        Ok(name) => oci_container::CgroupManager::parse(&name).unwrap_or_else(|| {
            panic!("CRIO_LITE_TEST_CGROUP_MANAGER={name:?}: systemd or cgroupfs")
        }),
        Err(_) => oci_container::CgroupManager::for_node(),
    }
}

impl Node {
    /// The runtime's state directory for this node's containers (see [`Node::use_containers`]).
    pub(crate) fn runtime_root(&self) -> PathBuf {
        self.path(&format!("run/{}", test_runtime().0))
    }

    /// Configures the node for containers: the test runtime ([`test_runtime`]) with a state
    /// directory of its own, the test cgroup manager, the registry at `registry` pulled over
    /// plain HTTP.
    pub(crate) fn use_containers(&self, registry: &str) {
        let (runtime, path) = test_runtime();
        let text = format!(
            "[crio.runtime]\ndefault_runtime = \"{runtime}\"\ncgroup_manager = \"{}\"\n\
             [crio.runtime.runtimes.{runtime}]\nruntime_path = \"{path}\"\n\
             runtime_root = \"{}\"\n\
             [crio.image]\ninsecure_registries = [\"{registry}\"]\nsignature_policy = \"{}\"\n",
            test_cgroup_manager().name(),
            self.runtime_root().display(),
            self.path("policy.json").display(),
        );
        std::fs::write(
            self.path("policy.json"),
            r#"{"default":[{"type":"insecureAcceptAnything"}]}"#,
        )
        .expect("write the policy");
        std::fs::write(self.path("crio-lite.conf.d/10-containers.conf"), text)
            .expect("write the containers drop-in");
    }

    /// The containers the test runtime knows under this node's root.
    pub(crate) fn runtime_containers(&self) -> Vec<String> {
        let root = self.runtime_root();
        if !root.exists() {
            return Vec::new();
        }
        let out = output(
            test_runtime().1,
            &["--root", &root.display().to_string(), "list", "-q"],
        );
        stdout(&out).lines().map(str::to_owned).collect()
    }

    /// Force-deletes every container of the node, kills what runs in the node namespace (conmon)
    /// and unmounts the root file systems: a failed test leaves nothing running.
    fn remove_containers(&self) {
        let root = self.runtime_root().display().to_string();
        for id in self.runtime_containers() {
            let _ = output(
                test_runtime().1,
                &["--root", &root, "delete", "--force", &id],
            );
        }
        for pid in self.ns.pids() {
            let _ = output("kill", &["-9", &pid.to_string()]);
        }
        let mut mounts: Vec<String> = test_support::fs::mounts_at_or_below(self.dir.path())
            .into_iter()
            .map(|m| m.point)
            .filter(|p| !p.starts_with(&self.netns_dir().display().to_string()))
            .collect();
        mounts.sort_by_key(|p| std::cmp::Reverse(p.len()));
        for point in mounts {
            let _ = output("umount", &["-l", &point]);
        }
    }
}

/// Fails the test naming every kind of leftover that is not empty.
pub(crate) fn assert_none_left(leaks: &[(&str, Vec<String>)]) {
    let found: Vec<String> = leaks
        .iter()
        .filter(|(_, left)| !left.is_empty())
        .map(|(what, left)| format!("{what}: {left:?}"))
        .collect();
    assert!(found.is_empty(), "leaked:\n{}", found.join("\n"));
}

/// A TCP port on 127.0.0.1 inside a network namespace that forwards every connection to
/// `upstream` in the test's own namespace: how a daemon running in a node namespace reaches the
/// registry the test started. The threads end with the test process.
pub(crate) fn forward_into(netns: &Path, upstream: &str) -> String {
    let listener = ocicni::netns::with_netns(netns, || {
        TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
    })
    .expect("enter the node namespace")
    .expect("listen in the node namespace");
    let port = listener.local_addr().expect("local address").port();
    let upstream = upstream.to_owned();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(down) = conn else { continue };
            let Ok(up) = TcpStream::connect(&upstream) else {
                continue;
            };
            let (mut down2, mut up2) = (
                down.try_clone().expect("clone a socket"),
                up.try_clone().expect("clone a socket"),
            );
            let (mut down, mut up) = (down, up);
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut down, &mut up);
                let _ = up.shutdown(std::net::Shutdown::Write);
            });
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut up2, &mut down2);
                let _ = down2.shutdown(std::net::Shutdown::Write);
            });
        }
    });
    format!("127.0.0.1:{port}")
}

/// A RunPodSandbox request for pod `name`, mapping `host_port` to the pod's port 80 when given.
pub(crate) fn pod(name: &str, host_port: Option<u16>) -> cri::RunPodSandboxRequest {
    let mut request = support::pod(name);
    if let Some(config) = request.config.as_mut() {
        config.port_mappings = host_port
            .map(|host| cri::PortMapping {
                protocol: cri::Protocol::Tcp.into(),
                container_port: 80,
                host_port: i32::from(host),
                host_ip: String::new(),
            })
            .into_iter()
            .collect();
    }
    request
}

pub(crate) async fn run(
    client: &mut RuntimeServiceClient<Channel>,
    name: &str,
    host_port: Option<u16>,
) -> String {
    client
        .run_pod_sandbox(pod(name, host_port))
        .await
        .unwrap_or_else(|e| panic!("RunPodSandbox {name}: {e}"))
        .into_inner()
        .pod_sandbox_id
}

/// The pod's primary IP, checked to be a host address in the default network's subnet.
pub(crate) async fn ready_ip(client: &mut RuntimeServiceClient<Channel>, id: &str) -> IpAddr {
    let status = support::status(client, id).await;
    assert_eq!(
        status.state,
        cri::PodSandboxState::SandboxReady as i32,
        "sandbox {id} is ready"
    );
    let ip: IpAddr = support::ips(&status)[0]
        .parse()
        .unwrap_or_else(|_| panic!("sandbox {id} reports an IP: {status:?}"));
    assert!(subnet().contains(&ip), "{ip} is in {}", subnet());
    assert_ne!(ip, IpAddr::V4(GATEWAY), "{ip} is not the gateway");
    ip
}

pub(crate) async fn stop(client: &mut RuntimeServiceClient<Channel>, id: &str) {
    client
        .stop_pod_sandbox(cri::StopPodSandboxRequest {
            pod_sandbox_id: id.to_owned(),
        })
        .await
        .unwrap_or_else(|e| panic!("StopPodSandbox {id}: {e}"));
}

pub(crate) async fn remove(client: &mut RuntimeServiceClient<Channel>, id: &str) {
    client
        .remove_pod_sandbox(cri::RemovePodSandboxRequest {
            pod_sandbox_id: id.to_owned(),
        })
        .await
        .unwrap_or_else(|e| panic!("RemovePodSandbox {id}: {e}"));
}

//! The world of one real-plugin test: a "node" network namespace standing in for the host, temporary
//! configuration, cache, IPAM and pin directories, pods pinned under it, and the questions a person asks
//! afterwards (which veths, leases, cache entries and iptables rules are left).
//!
//! Plugins run inside the node namespace (test-support's `NetNs`) through `ip netns exec`, so the
//! bridge, the veths' host ends and every iptables rule live there; the machine's own namespace is
//! never touched. [`Lab`]'s drop removes the pods' namespaces, the node namespace and the directories,
//! also when the test panics.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use ipnet::Ipv4Net;
use ocicni::cni_exec::ProcessExec;
use ocicni::{CniArgsPolicy, NetworkSelection, Ocicni, PodNetwork, RuntimeConfig, WatchPolicy};
use serde_json::json;
use test_support::netns::NetNs;

/// Where Debian's containernetworking-plugins are installed.
pub(crate) const CNI_BIN: &str = "/usr/lib/cni";

/// The container port pods' servers listen on.
pub(crate) const CONTAINER_PORT: u16 = 8080;

/// Env vars that turn a re-executed copy of this binary into a worker of an existing lab.
pub(crate) const WORKER_ROOT_VAR: &str = "OCICNI_IT_WORKER_ROOT";
pub(crate) const WORKER_NODE_VAR: &str = "OCICNI_IT_WORKER_NODE";
pub(crate) const WORKER_K_VAR: &str = "OCICNI_IT_WORKER_K";

/// Everything one test owns. Drop order: pods' pins, the pin directory's self-bind, the node, the files.
pub(crate) struct Lab {
    /// A short unique tag in every pod ID, so rules and leases can be traced back to this test.
    pub(crate) tag: String,
    /// The node's pod subnet, unique per lab in this process.
    pub(crate) subnet: Ipv4Net,
    /// The node's bridge.
    pub(crate) bridge: String,
    /// The lab's number in this process (picks the subnet and the bridge).
    k: u32,
    /// The node namespace (the namespace file of a worker's parent, which deletes it).
    pub(crate) node: NetNs,
    pub(crate) root: PathBuf,
    tmp: Option<tempfile::TempDir>,
}

impl Lab {
    /// A fresh lab: a new node namespace and empty directories. Fails the test when the namespace
    /// cannot be created.
    pub(crate) fn new() -> Self {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let k = COUNTER.fetch_add(1, Ordering::Relaxed);
        let tmp = test_support::temp_dir("cnitest");
        let root = tmp.path().to_owned();
        for sub in ["conf", "cache", "ipam", "pins"] {
            std::fs::create_dir(root.join(sub)).expect("lab directory");
        }
        let node = NetNs::new("cnitest-node");
        Self::assemble(k, node, root, Some(tmp))
    }

    /// The lab a parent test made, as seen by a worker process it started.
    pub(crate) fn adopt(root: PathBuf, node: String, k: u32) -> Self {
        Self::assemble(k, NetNs::adopt(node), root, None)
    }

    fn assemble(k: u32, node: NetNs, root: PathBuf, tmp: Option<tempfile::TempDir>) -> Self {
        let octet = u8::try_from(200 + (k % 50)).unwrap_or(250);
        Lab {
            tag: format!("ct{}n{k}", std::process::id()),
            subnet: Ipv4Net::new(Ipv4Addr::new(10, octet, 0, 0), 16).expect("subnet"),
            bridge: format!("cnit{k}br"),
            k,
            node,
            root,
            tmp,
        }
    }

    /// The worker environment of this lab, for a re-executed child.
    pub(crate) fn worker_env(&self) -> [(&'static str, String); 3] {
        [
            (WORKER_ROOT_VAR, self.root.display().to_string()),
            (WORKER_NODE_VAR, self.node.name().to_owned()),
            (WORKER_K_VAR, self.k.to_string()),
        ]
    }

    pub(crate) fn conf_dir(&self) -> PathBuf {
        self.root.join("conf")
    }

    pub(crate) fn cache_dir(&self) -> PathBuf {
        self.root.join("cache")
    }

    pub(crate) fn run_dir(&self) -> PathBuf {
        self.root.join("run")
    }

    pub(crate) fn ipam_dir(&self) -> PathBuf {
        self.root.join("ipam")
    }

    pub(crate) fn pins_dir(&self) -> PathBuf {
        self.root.join("pins")
    }

    /// The gateway address host-local gives the bridge: the subnet's first address.
    pub(crate) fn gateway(&self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.subnet.network()) + 1)
    }

    /// Writes `<name>.conflist`: bridge (gateway, hairpin, masquerade when `ip_masq`) with
    /// host-local, then portmap.
    pub(crate) fn write_conflist(&self, name: &str, ip_masq: bool) {
        let list = json!({
            "cniVersion": "1.0.0",
            "name": name,
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": self.bridge,
                    "isGateway": true,
                    "ipMasq": ip_masq,
                    "hairpinMode": true,
                    "ipam": {
                        "type": "host-local",
                        "dataDir": self.ipam_dir(),
                        "routes": [{"dst": "0.0.0.0/0"}],
                        "ranges": [[{"subnet": self.subnet.to_string()}]],
                    },
                },
                {"type": "portmap", "capabilities": {"portMappings": true}},
            ],
        });
        std::fs::write(
            self.conf_dir().join(format!("10-{name}.conflist")),
            serde_json::to_vec_pretty(&list).expect("conflist json"),
        )
        .expect("write conflist");
    }

    /// The builder with this lab's directories, plugins run inside the node, Kubernetes CNI_ARGS.
    pub(crate) fn builder(&self) -> ocicni::OcicniBuilder {
        let exec = ProcessExec::new()
            .with_launcher(self.node.launcher())
            .with_timeout(Duration::from_secs(30));
        Ocicni::builder()
            .conf_dir(self.conf_dir())
            .plugin_dirs([CNI_BIN])
            .cache_dir(self.cache_dir())
            .run_dir(self.run_dir())
            .watch(WatchPolicy::Off)
            .cni_args(CniArgsPolicy::Kubernetes)
            .lock_timeout(Duration::from_secs(60))
            .loopback(true)
            .exec(Arc::new(exec))
    }

    pub(crate) async fn ocicni(&self) -> Ocicni {
        self.builder().build().await.expect("build ocicni")
    }

    /// The ID of pod `i` of this lab.
    pub(crate) fn pod_id(&self, i: usize) -> String {
        format!("{}pod{i:03}", self.tag)
    }

    /// Pins a new namespace for pod `i` and describes the pod; `network` names the network to attach
    /// (default network when `None`); the pod maps host port `hostport_base + i` to [`CONTAINER_PORT`].
    pub(crate) fn pod(&self, i: usize, network: Option<&str>) -> PodNetwork {
        let path = self.pins_dir().join(format!("pod{i:03}"));
        ocicni::netns::create_pinned(&path).expect("pin the pod's network namespace");
        self.describe(i, network, &path)
    }

    /// The description of pod `i` with its namespace at `path` (not created here).
    pub(crate) fn describe(&self, i: usize, network: Option<&str>, path: &Path) -> PodNetwork {
        let mut pod = PodNetwork {
            name: format!("web-{i}"),
            namespace: "cnitest".into(),
            id: self.pod_id(i),
            uid: format!("uid-{}-{i}", self.tag),
            netns: path.display().to_string(),
            ..PodNetwork::default()
        };
        let port = u16::try_from(20000 + i).expect("host port");
        let mapping: ocicni::cni_types::capabilities::PortMapping = serde_json::from_value(
            json!({"hostPort": port, "containerPort": CONTAINER_PORT, "protocol": "tcp"}),
        )
        .expect("port mapping");
        let rt = RuntimeConfig {
            port_mappings: vec![mapping],
            ..RuntimeConfig::default()
        };
        if let Some(net) = network {
            pod.networks.push(NetworkSelection::new(net));
            pod.runtime_config.insert(net.to_owned(), rt);
        }
        pod
    }

    /// Host-local lease files of `network` (allocation bookkeeping files do not count).
    pub(crate) fn leases(&self, network: &str) -> Vec<String> {
        test_support::fs::file_names(&self.ipam_dir().join(network))
            .into_iter()
            .filter(|n| n != "lock" && !n.starts_with("last_reserved_ip"))
            .collect()
    }

    /// Files left in the result cache, and pending entries (as `pending/<name>`).
    pub(crate) fn cache_entries(&self) -> Vec<String> {
        test_support::fs::cache_entries(
            &self.cache_dir().join("results"),
            &self.run_dir().join("pending"),
        )
    }

    /// Panics listing whatever any pod of `ids` left behind on `network`.
    pub(crate) fn assert_nothing_left(&self, network: &str, ids: &BTreeSet<String>) {
        let veths = self.node.veths();
        let rules = self.node.rules_naming(ids);
        let leases = self.leases(network);
        let cache = self.cache_entries();
        // Only the GC lock's file outlives the pods (never created if nothing ran).
        let locks: Vec<String> = test_support::fs::file_names(&self.run_dir().join("locks"))
            .into_iter()
            .filter(|name| name != "gc.lock")
            .collect();
        assert!(
            veths.is_empty()
                && rules.is_empty()
                && leases.is_empty()
                && cache.is_empty()
                && locks.is_empty(),
            "left behind: veths {veths:?}, iptables rules {rules:#?}, leases {leases:?}, \
             cache {cache:?}, lock files {locks:?}"
        );
    }

    /// Waits until no process is working on this lab's pods any more: plugins run in process groups of
    /// their own, so a killed runtime leaves them running to completion.
    pub(crate) fn wait_for_stray_plugins(&self, within: Duration) {
        let needle = format!("CNI_NETNS={}", self.pins_dir().display());
        let deadline = Instant::now() + within;
        loop {
            let busy = processes_with_env(&needle);
            if busy.is_empty() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "plugins still running after {within:?}: {busy:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        if self.tmp.is_none() {
            // A worker's view of its parent's lab: the parent cleans up.
            return;
        }
        let pins = self.pins_dir();
        if let Ok(entries) = std::fs::read_dir(&pins) {
            for entry in entries.flatten() {
                let _ = ocicni::netns::remove_pinned(&entry.path());
            }
        }
        let _ = ocicni::netns::release_dir(&pins);
    }
}

/// PIDs of processes whose environment holds a variable starting with `needle`.
pub(crate) fn processes_with_env(needle: &str) -> Vec<u32> {
    test_support::process::with_env(|var| var.starts_with(needle))
        .into_iter()
        .map(|found| found.pid)
        .collect()
}

/// The first IPv4 address of an attachment's result.
pub(crate) fn ipv4_of(att: &ocicni::AttachmentResult) -> Ipv4Addr {
    att.result
        .ips
        .iter()
        .find_map(|ip| match ip.address.addr() {
            std::net::IpAddr::V4(v4) => Some(v4),
            std::net::IpAddr::V6(_) => None,
        })
        .unwrap_or_else(|| panic!("no IPv4 address in {:?}", att.result))
}

//! portmap against Debian's Go binary: each side gets a "host" namespace of its own (the Go
//! plugin runs there through `ip netns exec`, the built-in on a thread that entered it) with a
//! veth into a pod namespace; the nat tables they leave must be the same, either must tear down
//! what the other set up, and a host port must reach a listener in the pod.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use cni_builtin::{Builtin, BuiltinExec, Preference};
use cni_exec::{Exec, ProcessExec};
use serde_json::{Value, json};
use test_support::netns::NetNs;

use crate::support::{GO_DIR, Run, env};

const HOST_IF: &str = "vpm0";
const HOST_IP: &str = "10.98.0.1";
const POD_IP: &str = "10.98.0.2";

/// A host namespace and a pod namespace joined by a veth, addressed as a bridge would leave
/// them: 10.98.0.1/24 on the host's end, 10.98.0.2/24 on the pod's `eth0`.
struct Side {
    host: NetNs,
    pod: NetNs,
    /// Whether the pod has fd98::2/64 too (the host fd98::1/64).
    dual: bool,
}

impl Side {
    fn new(tag: &str) -> Side {
        let side = Side {
            host: NetNs::new(&format!("cpm{tag}h")),
            pod: NetNs::new(&format!("cpm{tag}p")),
            dual: false,
        };
        let pod = side.pod.name().to_owned();
        side.host.must(&[
            "ip", "link", "add", HOST_IF, "type", "veth", "peer", "name", "eth0", "netns", &pod,
        ]);
        side.host.must(&[
            "ip",
            "addr",
            "add",
            &format!("{HOST_IP}/24"),
            "dev",
            HOST_IF,
        ]);
        side.host.must(&["ip", "link", "set", HOST_IF, "up"]);
        side.pod
            .must(&["ip", "addr", "add", &format!("{POD_IP}/24"), "dev", "eth0"]);
        side.pod.must(&["ip", "link", "set", "eth0", "up"]);
        side.pod
            .must(&["ip", "route", "add", "default", "via", HOST_IP]);
        side
    }

    /// [`Side::new`] with IPv6 addresses besides.
    fn dual(tag: &str) -> Side {
        let mut side = Side::new(tag);
        side.host
            .must(&["ip", "addr", "add", "fd98::1/64", "dev", HOST_IF, "nodad"]);
        side.pod
            .must(&["ip", "addr", "add", "fd98::2/64", "dev", "eth0", "nodad"]);
        side.dual = true;
        side
    }

    fn env_of(&self, id: &str, command: &str) -> Vec<(String, String)> {
        env(command, id, "eth0", self.pod.path().to_str().unwrap(), "")
    }

    /// The config with the prevResult a bridge would have given for this pod.
    fn stdin(&self, config: &Value) -> Vec<u8> {
        let mut config = config.clone();
        let version = config["cniVersion"].as_str().unwrap_or("").to_owned();
        let mut ip = json!({"interface": 0, "address": format!("{POD_IP}/24"), "gateway": HOST_IP});
        let mut ip6 = json!({"interface": 0, "address": "fd98::2/64", "gateway": "fd98::1"});
        if version.starts_with("0.") {
            ip["version"] = json!("4");
            ip6["version"] = json!("6");
        }
        let ips = if self.dual {
            json!([ip, ip6])
        } else {
            json!([ip])
        };
        config["prevResult"] = if version == "0.1.0" || version == "0.2.0" {
            json!({"cniVersion": version, "ip4": {"ip": format!("{POD_IP}/24"), "gateway": HOST_IP}})
        } else {
            json!({
                "cniVersion": version,
                "interfaces": [{"name": "eth0", "sandbox": self.pod.path()}],
                "ips": ips,
                "dns": {},
            })
        };
        serde_json::to_vec(&config).unwrap()
    }

    /// A table of the host namespace as its save tool prints it, comments and counters aside.
    fn table(&self, save: &str) -> String {
        crate::support::saved_nat(&self.host, save)
    }

    fn nat(&self) -> String {
        self.table("iptables-save")
    }

    fn route_localnet(&self) -> String {
        self.host.must(&[
            "cat",
            &format!("/proc/sys/net/ipv4/conf/{HOST_IF}/route_localnet"),
        ])
    }

    async fn go(&self, command: &str, config: &Value) -> Run {
        self.go_as("pmctr1", command, config).await
    }

    async fn go_as(&self, id: &str, command: &str, config: &Value) -> Run {
        let exec = ProcessExec::new().with_launcher(self.host.launcher());
        let plugin = Path::new(GO_DIR).join("portmap");
        crate::support::outcome(
            exec.exec_plugin(&plugin, &self.env_of(id, command), &self.stdin(config))
                .await,
        )
    }

    /// The built-in on a thread of its own inside the host namespace, with a runtime of its
    /// own, so every thread and process it makes is in that namespace too.
    fn ours(&self, command: &str, config: &Value) -> Run {
        self.ours_as("pmctr1", command, config)
    }

    fn ours_as(&self, id: &str, command: &str, config: &Value) -> Run {
        let host = self.host.path();
        let env = self.env_of(id, command);
        let stdin = self.stdin(config);
        in_netns(&host, move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async {
                let exec =
                    BuiltinExec::new(Arc::new(ProcessExec::new()), Preference::PreferBuiltin);
                let plugin = exec
                    .find_plugin("portmap", &[PathBuf::from(GO_DIR)])
                    .await
                    .unwrap();
                assert_eq!(plugin, Builtin::Portmap.pseudo_path());
                crate::support::outcome(exec.exec_plugin(&plugin, &env, &stdin).await)
            })
        })
    }

    async fn run(&self, go: bool, command: &str, config: &Value) -> Run {
        if go {
            self.go(command, config).await
        } else {
            self.ours(command, config)
        }
    }
}

/// Runs `job` on a thread that entered the network namespace at `path`; the thread then ends.
fn in_netns<R: Send + 'static>(path: &Path, job: impl FnOnce() -> R + Send + 'static) -> R {
    let path = path.to_owned();
    std::thread::spawn(move || {
        let ns = std::fs::File::open(&path).unwrap();
        nix::sched::setns(&ns, nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
        job()
    })
    .join()
    .unwrap()
}

/// The portmap plugins of the real-world corpus, each with its list's name and version and the
/// port mappings a runtime passes for the `portMappings` capability.
fn corpus() -> Vec<(String, Value)> {
    let dir =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/testdata/conflists/valid");
    let mut out = Vec::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    for file in files {
        let Ok(list) = serde_json::from_slice::<Value>(&std::fs::read(&file).unwrap()) else {
            continue;
        };
        let Some(plugins) = list["plugins"].as_array() else {
            continue;
        };
        for plugin in plugins.iter().filter(|p| p["type"] == "portmap") {
            let mut config = plugin.clone();
            config["name"] = list["name"].clone();
            config["cniVersion"] = list["cniVersion"].clone();
            config["runtimeConfig"] = json!({"portMappings": [
                {"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}
            ]});
            out.push((
                file.file_name().unwrap().to_string_lossy().into_owned(),
                config,
            ));
        }
    }
    assert!(out.len() >= 10, "the corpus has portmap plugins: {out:?}");
    out
}

/// Two mappings, TCP and UDP, one bound to a host IP, and one more bound to 0.0.0.0.
fn two_mappings(version: &str) -> Value {
    json!({
        "cniVersion": version, "name": "pmtwo", "type": "portmap",
        "capabilities": {"portMappings": true},
        "runtimeConfig": {"portMappings": [
            {"hostPort": 8080, "containerPort": 80, "protocol": "tcp"},
            {"hostPort": 5353, "containerPort": 53, "protocol": "udp", "hostIP": HOST_IP},
            {"hostPort": 8443, "containerPort": 443, "protocol": "tcp", "hostIP": "0.0.0.0"}
        ]}
    })
}

/// The other options: no SNAT, another mark bit, conditions, and an external mark chain.
fn options() -> Vec<(String, Value)> {
    let mut out = Vec::new();
    let mut add = |name: &str, extra: Value| {
        let mut config = two_mappings("1.0.0");
        for (k, v) in extra.as_object().unwrap() {
            config[k] = v.clone();
        }
        out.push((name.to_owned(), config));
    };
    add("two mappings", json!({}));
    add("no snat", json!({"snat": false}));
    add("mark bit 5", json!({"markMasqBit": 5}));
    add(
        "conditions",
        json!({"conditionsV4": ["!", "-s", "192.168.7.0/24", "-m", "addrtype", "--src-type", "LOCAL"]}),
    );
    add(
        "conditions with blanks and an interface",
        json!({"conditionsV4": ["-i", "vpm0", "-m", "comment", "--comment", "from the veth"]}),
    );
    add(
        "external mark chain",
        json!({"externalSetMarkChain": "KUBE-MARK-MASQ"}),
    );
    add(
        "masqAll, which 1.1.1 does not know",
        json!({"masqAll": true}),
    );
    add(
        "no mappings",
        json!({"runtimeConfig": {"portMappings": []}}),
    );
    add(
        "bad port",
        json!({"runtimeConfig": {"portMappings": [{"hostPort": 0, "containerPort": 1, "protocol": "tcp"}]}}),
    );
    add("bad bit", json!({"markMasqBit": 32}));
    add(
        "both marks",
        json!({"markMasqBit": 3, "externalSetMarkChain": "X"}),
    );
    add("bad type", json!({"snat": "yes"}));
    add("bad condition", json!({"conditionsV4": [1]}));
    add("bad bit type", json!({"markMasqBit": 1.5}));
    add(
        "bad mapping type",
        json!({"runtimeConfig": {"portMappings": [{"hostPort": "80", "containerPort": 1}]}}),
    );
    add(
        "mappings not a list",
        json!({"runtimeConfig": {"portMappings": {}}}),
    );
    out
}

fn text(run: &Run, side: &Side) -> String {
    run.text()
        .replace(side.pod.path().to_str().unwrap(), "PODNS")
}

/// ADD, ADD again (nothing doubled), CHECK, DEL and DEL again on both sides: the same output and
/// the same nat table (and route_localnet) after each.
async fn differential(name: &str, config: &Value) {
    differential_on(name, config, Side::new("g"), Side::new("r")).await;
}

async fn differential_on(name: &str, config: &Value, go: Side, ours: Side) {
    if let Some(chain) = config["externalSetMarkChain"].as_str() {
        // As kube-proxy would have made it: a missing one fails both plugins.
        for side in [&go, &ours] {
            side.host.must(&["iptables", "-t", "nat", "-N", chain]);
        }
    }
    for command in ["ADD", "ADD", "CHECK", "DEL", "DEL"] {
        let want = go.go(command, config).await;
        let got = ours.ours(command, config);
        assert_eq!(
            (got.ok, text(&got, &ours)),
            (want.ok, text(&want, &go)),
            "{name}: {command} output (left: built-in, right: Go)"
        );
        assert_eq!(
            ours.nat(),
            go.nat(),
            "{name}: nat table after {command} (left: built-in, right: Go)"
        );
        assert_eq!(
            ours.table("ip6tables-save"),
            go.table("ip6tables-save"),
            "{name}: ip6tables nat after {command}"
        );
        assert_eq!(
            ours.route_localnet(),
            go.route_localnet(),
            "{name}: route_localnet after {command}"
        );
    }
}

#[tokio::test]
#[ignore = "needs root + netns: cargo xtask test"]
async fn portmap_corpus_differential() {
    for (name, config) in corpus() {
        differential(&name, &config).await;
    }
}

#[tokio::test]
#[ignore = "needs root + netns: cargo xtask test"]
async fn portmap_options_differential() {
    for (name, config) in options() {
        differential(&name, &config).await;
    }
    for version in ["0.2.0", "0.3.1", "0.4.0"] {
        differential(&format!("two mappings {version}"), &two_mappings(version)).await;
    }
}

/// Dual stack: the IPv6 address's chain in ip6tables, as the Go plugin makes it.
#[tokio::test]
#[ignore = "needs root + netns: cargo xtask test"]
async fn portmap_dual_stack_differential() {
    let mut config = two_mappings("1.0.0");
    config["runtimeConfig"]["portMappings"]
        .as_array_mut()
        .unwrap()
        .push(
            json!({"hostPort": 9090, "containerPort": 90, "protocol": "tcp", "hostIP": "fd98::1"}),
        );
    let mut conditions = config.clone();
    conditions["conditionsV6"] = json!(["!", "-s", "fd99::/64"]);
    let mut no_snat = config.clone();
    no_snat["snat"] = json!(false);
    for (name, config) in [
        ("dual", config),
        ("dual, conditions", conditions),
        ("dual, no snat", no_snat),
    ] {
        let (go, ours) = (Side::dual("g6"), Side::dual("r6"));
        differential_on(name, &config, go, ours).await;
    }
    // What the IPv6 ADD leaves, on the built-in's side alone.
    let side = Side::dual("t6");
    let add = side.ours("ADD", &two_mappings("1.0.0"));
    assert!(add.ok, "{}", add.text());
    let nat6 = side.table("ip6tables-save");
    for line in [
        "-s fd98::/64 -p tcp -m tcp --dport 8080 -j CNI-HOSTPORT-SETMARK",
        "-p tcp -m tcp --dport 8080 -j DNAT --to-destination [fd98::2]:80",
        "-A OUTPUT -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT",
    ] {
        assert!(nat6.contains(line), "{line} missing from:\n{nat6}");
    }
    assert!(!nat6.contains("127.0.0.1"), "{nat6}");
    assert!(side.ours("DEL", &two_mappings("1.0.0")).ok);
    assert!(!side.table("ip6tables-save").contains("CNI-DN-"));
}

/// A 0.2.0 prevResult (`ip4`, no interfaces) gives the container's address too.
#[tokio::test]
#[ignore = "needs root + netns: cargo xtask test"]
async fn portmap_legacy_prev_result() {
    let side = Side::new("l");
    let add = side.ours("ADD", &two_mappings("0.2.0"));
    assert!(add.ok, "{}", add.text());
    assert_eq!(add.json()["ip4"]["ip"], format!("{POD_IP}/24"));
    let nat = side.nat();
    assert!(nat.contains("--to-destination 10.98.0.2:80"), "{nat}");
}

/// What an ADD leaves is what the DNAT, the mark rules and the jumps say: checked on the
/// built-in's own table, so the differential tests cannot pass with both sides doing nothing.
#[tokio::test]
#[ignore = "needs root + netns: cargo xtask test"]
async fn portmap_rules_in_the_table() {
    let side = Side::new("t");
    let add = side.ours("ADD", &two_mappings("1.0.0"));
    assert!(add.ok, "{}", add.text());
    assert_eq!(add.json()["ips"][0]["address"], format!("{POD_IP}/24"));
    let nat = side.nat();
    for line in [
        "-A PREROUTING -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT",
        "-A OUTPUT -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT",
        "-A POSTROUTING -m comment --comment \"CNI portfwd requiring masquerade\" -j CNI-HOSTPORT-MASQ",
        "-A CNI-HOSTPORT-MASQ -m mark --mark 0x2000/0x2000 -j MASQUERADE",
        "-d 10.98.0.1/32 -p udp -m udp --dport 5353 -j DNAT --to-destination 10.98.0.2:53",
        "-p tcp -m comment --comment \"dnat name: \\\"pmtwo\\\" id: \\\"pmctr1\\\"\" -m multiport --dports 8080,8443 -j CNI-DN-",
    ] {
        assert!(nat.contains(line), "{line} missing from:\n{nat}");
    }
    assert_eq!(side.route_localnet().trim(), "1");
}

/// ADD by one, DEL by the other: the table as the Go plugin's own ADD and DEL leave it.
#[tokio::test]
#[ignore = "needs root + netns: cargo xtask test"]
async fn portmap_interop_both_ways() {
    let config = two_mappings("1.0.0");
    let reference = Side::new("x");
    let before = reference.nat();
    assert!(reference.go("ADD", &config).await.ok);
    let added = reference.nat();
    assert_ne!(added, before, "the Go ADD added rules");
    assert!(reference.go("DEL", &config).await.ok);
    let expected = reference.nat();
    assert!(!expected.contains("CNI-DN-"), "{expected}");
    for go_adds in [true, false] {
        let side = Side::new(if go_adds { "y" } else { "z" });
        let add = side.run(go_adds, "ADD", &config).await;
        assert!(add.ok, "{}", add.text());
        assert_eq!(side.nat(), added, "go adds: {go_adds}: after ADD");
        let del = side.run(!go_adds, "DEL", &config).await;
        assert!(del.ok, "{}", del.text());
        assert_eq!(side.nat(), expected, "go adds: {go_adds}: after DEL");
        // ADD by one side, ADD again by the other: nothing doubled.
        assert!(side.run(go_adds, "ADD", &config).await.ok);
        assert!(side.run(!go_adds, "ADD", &config).await.ok);
        assert_eq!(side.nat(), added, "go adds: {go_adds}: after two ADDs");
    }
}

/// A listener in the pod answers on the host port, from the host's own address and from
/// localhost (SNAT); not before ADD, not after DEL.
#[tokio::test]
#[ignore = "needs root + netns: cargo xtask test"]
async fn portmap_forwards_a_host_port_to_the_pod() {
    let side = Side::new("f");
    let listener = in_netns(&side.pod.path(), || {
        TcpListener::bind("0.0.0.0:80").unwrap()
    });
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let peer = stream
                .peer_addr()
                .map(|a| a.ip().to_string())
                .unwrap_or_default();
            let _ = stream.write_all(format!("hello {peer}").as_bytes());
        }
    });
    let fetch_from = |ns: PathBuf, target: &str| {
        let target: SocketAddr = target.parse().unwrap();
        in_netns(&ns, move || {
            let mut stream = TcpStream::connect_timeout(&target, Duration::from_secs(3))
                .map_err(|e| e.to_string())?;
            stream
                .set_read_timeout(Some(Duration::from_secs(3)))
                .unwrap();
            let mut answer = String::new();
            stream
                .read_to_string(&mut answer)
                .map_err(|e| e.to_string())?;
            Ok::<String, String>(answer)
        })
    };
    let fetch = |target: &str| fetch_from(side.host.path(), target);
    let config = json!({
        "cniVersion": "1.0.0", "name": "pmfwd", "type": "portmap",
        "runtimeConfig": {"portMappings": [{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}]}
    });
    let own = format!("{HOST_IP}:8080");
    assert!(fetch(&own).is_err(), "nothing listens on the host port yet");
    let add = side.ours("ADD", &config);
    assert!(add.ok, "{}", add.text());
    assert_eq!(fetch(&own), Ok(format!("hello {HOST_IP}")));
    // From localhost the source is masqueraded to the host's address on the veth.
    assert_eq!(fetch("127.0.0.1:8080"), Ok(format!("hello {HOST_IP}")));
    // Hairpin: the pod through the host port reaches itself, its source masqueraded too (the
    // host forwards, as a gateway bridge has it).
    side.host
        .must(&["sh", "-c", "echo 1 > /proc/sys/net/ipv4/ip_forward"]);
    assert_eq!(
        fetch_from(side.pod.path(), &own),
        Ok(format!("hello {HOST_IP}"))
    );
    let del = side.ours("DEL", &config);
    assert!(del.ok, "{}", del.text());
    assert!(fetch(&own).is_err(), "the host port is closed again");
}

/// Many ADDs at once into one table: first six by the built-in alone on an empty table (a
/// script that re-declared a shared chain another had just made would flush its jumps), then
/// twelve more, half by each plugin, once the node-wide chains exist (Debian's plugin itself
/// can fail when two of its ADDs race to make them under iptables-nft; see the README). Every
/// container's chain and jumps are there, and DELs at once, half by each, remove them all.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs root + netns: cargo xtask test"]
async fn portmap_concurrent_adds_and_dels() {
    let side = Arc::new(Side::new("c"));
    let config = two_mappings("1.0.0");
    let first: Vec<String> = (0..6).map(|i| format!("first{i}")).collect();
    let more: Vec<String> = (0..12).map(|i| format!("conc{i}")).collect();
    let run_all = |ids: &[String], command: &'static str, mixed: bool| {
        let mut set = tokio::task::JoinSet::new();
        for (i, id) in ids.iter().enumerate() {
            let (side, config, id) = (side.clone(), config.clone(), id.clone());
            set.spawn(async move {
                let out = if mixed && i % 2 == 0 {
                    side.go_as(&id, command, &config).await
                } else {
                    let side2 = side.clone();
                    let id2 = id.clone();
                    tokio::task::spawn_blocking(move || side2.ours_as(&id2, command, &config))
                        .await
                        .unwrap()
                };
                (id, out)
            });
        }
        set
    };
    for (ids, mixed) in [(&first, false), (&more, true)] {
        let mut adds = run_all(ids, "ADD", mixed);
        while let Some(done) = adds.join_next().await {
            let (id, out) = done.unwrap();
            assert!(out.ok, "ADD {id}: {}", out.text());
        }
    }
    let all: Vec<&String> = first.iter().chain(&more).collect();
    let nat = side.nat();
    for id in &all {
        let comment = format!("--comment \"dnat name: \\\"pmtwo\\\" id: \\\"{id}\\\"\"");
        assert_eq!(nat.matches(&comment).count(), 2, "{id}'s two jumps:\n{nat}");
    }
    assert_eq!(
        nat.matches("-j DNAT --to-destination").count(),
        3 * all.len(),
        "{nat}"
    );
    for ids in [&first, &more] {
        let mut dels = run_all(ids, "DEL", true);
        while let Some(done) = dels.join_next().await {
            let (id, out) = done.unwrap();
            assert!(out.ok, "DEL {id}: {}", out.text());
        }
    }
    let nat = side.nat();
    assert!(!nat.contains("CNI-DN-"), "{nat}");
}

/// A UDP flow to the host port that conntrack saw before the ADD (answered by a listener on
/// the host) reaches the pod once the ADD is done: its conntrack entry, which would keep it
/// going to the host, is deleted, as Go deletes it.
#[tokio::test]
#[ignore = "needs root + netns: cargo xtask test"]
async fn portmap_udp_flows_seen_before_add_reach_the_pod() {
    // The Go plugin first, which shows the test's premise holds.
    for go in [true, false] {
        udp_flow_seen_before_add(go).await;
    }
}

async fn udp_flow_seen_before_add(go: bool) {
    use std::net::UdpSocket;

    let side = Side::new(if go { "ug" } else { "ur" });
    let echo = |socket: UdpSocket, who: &'static str| {
        std::thread::spawn(move || {
            let mut buffer = [0u8; 64];
            while let Ok((n, from)) = socket.recv_from(&mut buffer) {
                let mut answer = who.as_bytes().to_vec();
                answer.extend(&buffer[..n]);
                let _ = socket.send_to(&answer, from);
            }
        });
    };
    echo(
        in_netns(&side.pod.path(), || UdpSocket::bind("0.0.0.0:53").unwrap()),
        "pod ",
    );
    echo(
        in_netns(&side.host.path(), || {
            UdpSocket::bind(format!("{HOST_IP}:5353")).unwrap()
        }),
        "host ",
    );
    // One socket, one flow: the same addresses and ports before and after the ADD.
    let client = in_netns(&side.host.path(), || {
        let socket = UdpSocket::bind(format!("{HOST_IP}:40053")).unwrap();
        socket.connect(format!("{HOST_IP}:5353")).unwrap();
        socket
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        socket
    });
    let ask = || {
        client.send(b"ping").unwrap();
        let mut buffer = [0u8; 64];
        client
            .recv(&mut buffer)
            .map(|n| String::from_utf8_lossy(&buffer[..n]).into_owned())
            .map_err(|e| e.to_string())
    };
    // Conntrack follows flows in a namespace once NAT is in use there: another pod's host port.
    let other = json!({
        "cniVersion": "1.0.0", "name": "pmudp", "type": "portmap",
        "runtimeConfig": {"portMappings": [{"hostPort": 9999, "containerPort": 99, "protocol": "tcp"}]}
    });
    assert!(side.ours_as("other", "ADD", &other).ok);
    assert_eq!(ask(), Ok("host ping".to_owned()));
    let config = json!({
        "cniVersion": "1.0.0", "name": "pmudp", "type": "portmap",
        "runtimeConfig": {"portMappings": [{"hostPort": 5353, "containerPort": 53, "protocol": "udp"}]}
    });
    let add = side.run(go, "ADD", &config).await;
    assert!(add.ok, "{}", add.text());
    assert_eq!(ask(), Ok("pod ping".to_owned()), "go: {go}");
    assert!(side.run(go, "DEL", &config).await.ok);
}

//! bridge, differential: the Go binary and the built-in each get a "host" namespace of their
//! own (where the bridge lives; the Go plugin runs there through `ip netns exec`, the built-in on
//! a thread that entered it) and a pod namespace; results must match (veth names and MACs, which
//! are random, aside), and so must the links, addresses and routes they leave.

use std::path::Path;
use std::sync::Arc;

use cni_builtin::{Builtin, BuiltinExec, Preference};
use cni_exec::{Exec, ProcessExec};
use serde_json::{Value, json};
use test_support::netns::NetNs;

use crate::support::{GO_DIR, Run, env};

/// One side: a host namespace, a pod namespace, a lease directory.
struct Side {
    host: NetNs,
    pod: NetNs,
    data: tempfile::TempDir,
}

impl Side {
    fn new(tag: &str) -> Side {
        Side {
            host: NetNs::new(&format!("cbb{tag}h")),
            pod: NetNs::bare(&format!("cbb{tag}p")),
            data: tempfile::tempdir().unwrap(),
        }
    }

    fn stdin(&self, config: &Value) -> Vec<u8> {
        let mut config = config.clone();
        if config["ipam"].is_object() {
            config["ipam"]["dataDir"] = json!(self.data.path());
        }
        serde_json::to_vec(&config).unwrap()
    }

    fn env(&self, command: &str) -> Vec<(String, String)> {
        env(
            command,
            "pod1",
            "eth0",
            self.pod.path().to_str().unwrap(),
            "",
        )
    }

    /// What the host and the pod namespaces hold, with random names and MACs replaced.
    fn state(&self, bridge: &str, veth: Option<&str>) -> Vec<String> {
        let mut out = Vec::new();
        let norm = |s: String| normalize(&s, veth);
        out.push(norm(
            self.host
                .must(&["ip", "-o", "link", "show", "type", "bridge"]),
        ));
        out.push(norm(self.host.must(&["ip", "-o", "-4", "addr", "show"])));
        out.push(norm(
            self.host.must(&["cat", "/proc/sys/net/ipv4/ip_forward"]),
        ));
        out.push(norm(
            self.host
                .must(&["ip", "-o", "link", "show", "master", bridge]),
        ));
        if let Some(veth) = veth {
            let detail = self.host.must(&["ip", "-d", "link", "show", veth]);
            out.push(format!("hairpin on: {}", detail.contains("hairpin on")));
        }
        out.push(norm(self.pod.must(&["ip", "-o", "link", "show"])));
        out.push(norm(self.pod.must(&["ip", "-o", "-4", "addr", "show"])));
        out.push(norm(self.pod.must(&["ip", "route", "show"])));
        out.push(self.nat());
        out
    }

    /// The host's nat table as iptables-save prints it, its comments and counters aside.
    fn nat(&self) -> String {
        crate::support::saved_nat(&self.host, "iptables-save")
    }
}

/// Replaces the veth name, MAC addresses, link indexes and namespace ids, which differ by nature.
fn normalize(text: &str, veth: Option<&str>) -> String {
    let mut words = Vec::new();
    for line in text.lines() {
        let mut line = line.to_owned();
        if let Some(veth) = veth {
            line = line.replace(veth, "VETH");
        }
        let mut out = Vec::new();
        for (i, word) in line.split(' ').enumerate() {
            let is_mac = word.len() == 17
                && word.split(':').count() == 6
                && word
                    .split(':')
                    .all(|p| p.len() == 2 && u8::from_str_radix(p, 16).is_ok());
            let is_index =
                i == 0 && word.ends_with(':') && word[..word.len() - 1].parse::<u32>().is_ok();
            let is_peer = word.contains("@if");
            if is_mac {
                out.push("MAC".to_owned());
            } else if is_index {
                out.push("N:".to_owned());
            } else if is_peer {
                out.push(word.split("@if").next().unwrap_or_default().to_owned() + "@ifN:");
            } else if word.starts_with("link-netns") || word.starts_with("link-netnsid") {
                out.push("NS".to_owned());
            } else {
                out.push(word.to_owned());
            }
        }
        // The word after link-netns(id) is the namespace's name or id.
        let joined = out.join(" ");
        let cleaned: Vec<&str> = joined.split(' ').collect();
        let mut result = Vec::new();
        let mut skip = false;
        for w in cleaned {
            if skip {
                skip = false;
                continue;
            }
            if w == "NS" {
                skip = true;
            }
            result.push(w);
        }
        words.push(result.join(" "));
    }
    words.join("\n")
}

/// Compares two states until they agree, for up to 5 s: carrier and operational state follow
/// link changes asynchronously in the kernel (linkwatch), so a snapshot taken at once may catch
/// one side mid-way. A difference that lasts fails the test.
fn converge(ours: impl Fn() -> Vec<String>, go: impl Fn() -> Vec<String>, what: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let (left, right) = (ours(), go());
        if left == right {
            return;
        }
        if std::time::Instant::now() >= deadline {
            assert_eq!(left, right, "{what}");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

async fn go_run(side: &Side, command: &str, config: &Value) -> Run {
    let exec = ProcessExec::new().with_launcher(side.host.launcher());
    let plugin = Path::new(GO_DIR).join("bridge");
    crate::support::outcome(
        exec.exec_plugin(&plugin, &side.env(command), &side.stdin(config))
            .await,
    )
}

/// Runs the built-in on a thread of its own inside the side's host namespace, with a runtime
/// of its own, so every thread it makes is in that namespace too; the thread then ends.
fn builtin_run(side: &Side, command: &str, config: &Value) -> Run {
    let host = side.host.path();
    let env = side.env(command);
    let stdin = side.stdin(config);
    std::thread::spawn(move || {
        let ns = std::fs::File::open(&host).unwrap();
        nix::sched::setns(&ns, nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let exec = BuiltinExec::new(Arc::new(ProcessExec::new()), Preference::PreferBuiltin);
            crate::support::outcome(
                exec.exec_plugin(&Builtin::Bridge.pseudo_path(), &env, &stdin)
                    .await,
            )
        })
    })
    .join()
    .unwrap()
}

/// The host veth's name in a result.
fn veth_of(run: &Run) -> Option<String> {
    let v: Value = serde_json::from_slice(&run.stdout).ok()?;
    v["interfaces"][1]["name"].as_str().map(str::to_owned)
}

fn normalized_result(run: &Run, side: &Side) -> String {
    let text = run
        .text()
        .replace(side.pod.path().to_str().unwrap(), "PODNS");
    normalize(
        &text.replace(&veth_of(run).unwrap_or_else(|| "-".into()), "VETH"),
        None,
    )
    .lines()
    .map(|l| {
        // "mac": "aa:bb:..."
        if l.trim_start().starts_with("\"mac\"") {
            "        \"mac\": MAC,".to_owned()
        } else {
            l.to_owned()
        }
    })
    .collect::<Vec<_>>()
    .join("\n")
}

async fn differential(name: &str, config: &Value) {
    let bridge = config["bridge"].as_str().unwrap_or("cni0").to_owned();
    let (go, ours) = (Side::new("g"), Side::new("r"));
    let want = go_run(&go, "ADD", config).await;
    let got = builtin_run(&ours, "ADD", config);
    assert_eq!(got.ok, want.ok, "{name}: {} vs {}", got.text(), want.text());
    assert_eq!(
        normalized_result(&got, &ours),
        normalized_result(&want, &go),
        "{name}: results (left: built-in, right: Go)"
    );
    if !want.ok {
        return;
    }
    let (got_veth, want_veth) = (veth_of(&got).unwrap(), veth_of(&want).unwrap());
    assert!(
        got_veth.starts_with("veth") && got_veth.len() == 12,
        "{got_veth}"
    );
    converge(
        || ours.state(&bridge, Some(&got_veth)),
        || go.state(&bridge, Some(&want_veth)),
        &format!("{name}: state after ADD (left: built-in, right: Go)"),
    );
    if config["ipMasq"] == json!(true) {
        let nat = ours.nat();
        let ips = serde_json::from_slice::<Value>(&got.stdout).unwrap()["ips"]
            .as_array()
            .map_or(0, Vec::len);
        assert_eq!(nat.matches("-j MASQUERADE").count(), 1, "{nat}");
        assert_eq!(nat.matches("-A POSTROUTING -s ").count(), ips, "{nat}");
    }
    let want = go_run(&go, "DEL", config).await;
    let got = builtin_run(&ours, "DEL", config);
    assert_eq!((got.ok, got.text()), (want.ok, want.text()), "{name}: DEL");
    converge(
        || ours.state(&bridge, None),
        || go.state(&bridge, None),
        &format!("{name}: state after DEL (left: built-in, right: Go)"),
    );
    assert!(
        !ours.pod.links().iter().any(|l| l.contains("eth0")),
        "eth0 must be gone"
    );
    // Leases released, by the built-in host-local the built-in bridge delegated to.
    let net = config["name"].as_str().unwrap();
    assert!(crate::support::leases(&ours.data.path().join(net)).is_empty());
}

#[tokio::test]
#[ignore = "needs root + netns: cargo xtask test"]
async fn gateway_mtu_hairpin() {
    for version in ["0.3.1", "0.4.0", "1.0.0"] {
        let config = json!({
            "cniVersion": version, "name": "brnet", "type": "bridge", "bridge": "cbr0",
            "isGateway": true, "isDefaultGateway": true, "mtu": 1400, "hairpinMode": true,
            "ipam": {"type": "host-local", "subnet": "10.90.0.0/24",
                "routes": [{"dst": "192.168.50.0/24"}]},
            "dns": {"nameservers": ["10.90.0.1"]}
        });
        differential(&format!("gateway {version}"), &config).await;
    }
}

#[tokio::test]
#[ignore = "needs root + netns: cargo xtask test"]
async fn promiscuous_without_gateway() {
    let config = json!({
        "cniVersion": "1.0.0", "name": "brnet2", "type": "bridge", "bridge": "cbr1",
        "promiscMode": true,
        "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.91.0.0/24", "gateway": "10.91.0.254"}]]}
    });
    differential("promiscuous", &config).await;
}

#[tokio::test]
#[ignore = "needs root + netns: cargo xtask test"]
async fn layer2_only_and_refusals() {
    let l2 = json!({"cniVersion": "1.0.0", "name": "brnet3", "type": "bridge", "bridge": "cbr2"});
    differential("layer 2", &l2).await;
    let both = json!({"cniVersion": "1.0.0", "name": "brnet4", "type": "bridge",
        "hairpinMode": true, "promiscMode": true, "ipam": {"type": "host-local", "subnet": "10.92.0.0/24"}});
    differential("hairpin and promiscuous", &both).await;
    let vlan = json!({"cniVersion": "1.0.0", "name": "brnet5", "type": "bridge", "vlan": 5000});
    differential("vlan out of range", &vlan).await;
    // The IPAM plugin's error object passes through unchanged; a missing one is named.
    let bad_ipam = json!({"cniVersion": "1.0.0", "name": "brnet6", "type": "bridge", "bridge": "cbr6",
        "ipam": {"type": "host-local", "subnet": "10.93.0.1/24"}});
    differential("IPAM error", &bad_ipam).await;
    let no_ipam = json!({"cniVersion": "1.0.0", "name": "brnet7", "type": "bridge", "bridge": "cbr7",
        "ipam": {"type": "no-such-ipam"}});
    differential("IPAM missing", &no_ipam).await;
    // Not differential: the Go plugin would run itself as its IPAM plugin, again and again.
    let own = json!({"cniVersion": "1.0.0", "name": "brnet8", "type": "bridge", "bridge": "cbr8",
        "ipam": {"type": "bridge"}});
    let side = Side::new("s");
    let refused = builtin_run(&side, "ADD", &own);
    assert_eq!(
        refused.json()["msg"],
        "the built-in bridge cannot be an IPAM plugin"
    );
}

#[tokio::test]
#[ignore = "needs root + netns: cargo xtask test"]
async fn masquerade_chain_rules_and_comments_as_go_makes_them() {
    let config = json!({
        "cniVersion": "1.0.0", "name": "masqnet", "type": "bridge", "bridge": "cbr9",
        "isGateway": true, "ipMasq": true,
        "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.94.0.0/24"}], [{"subnet": "10.95.0.0/16"}]]}
    });
    differential("ipMasq, two ranges", &config).await;
}

/// Set up by one implementation, torn down by the other: no CNI chain or jump is left.
#[tokio::test]
#[ignore = "needs root + netns: cargo xtask test"]
async fn masquerade_interop_both_ways_leaves_nothing() {
    let config = json!({
        "cniVersion": "1.0.0", "name": "masqnet2", "type": "bridge", "bridge": "cbr10",
        "isGateway": true, "ipMasq": true,
        "ipam": {"type": "host-local", "subnet": "10.96.0.0/24"}
    });
    let cni_lines = |side: &Side| -> Vec<String> {
        side.nat()
            .lines()
            .filter(|l| l.contains("CNI-"))
            .map(str::to_owned)
            .collect()
    };
    // Go adds, the built-in deletes.
    let side = Side::new("i");
    assert!(go_run(&side, "ADD", &config).await.ok);
    let made = cni_lines(&side);
    assert_eq!(made.len(), 4, "chain, two rules, one jump: {made:#?}");
    let del = builtin_run(&side, "DEL", &config);
    assert!(del.ok, "{}", del.text());
    assert_eq!(cni_lines(&side), Vec::<String>::new());
    // A second DEL finds nothing to remove and is fine.
    assert!(builtin_run(&side, "DEL", &config).ok);
    // The built-in adds, Go deletes.
    let side = Side::new("j");
    let add = builtin_run(&side, "ADD", &config);
    assert!(add.ok, "{}", add.text());
    assert_eq!(cni_lines(&side).len(), 4, "{:#?}", cni_lines(&side));
    let del = go_run(&side, "DEL", &config).await;
    assert!(del.ok, "{}", del.text());
    assert_eq!(cni_lines(&side), Vec::<String>::new());
}

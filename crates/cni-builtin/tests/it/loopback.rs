//! loopback, differential, in network namespaces the tests make: the Go binary in one, the
//! built-in in another, the same result (the namespace path aside) and the same link state.

use serde_json::{Value, json};
use test_support::netns::NetNs;

use crate::support::{Run, builtin, env, go};

/// `lo`'s flags as `ip -o link` prints them, e.g. `<LOOPBACK,UP,LOWER_UP>`.
fn lo_flags(ns: &NetNs) -> String {
    let line = ns.must(&["ip", "-o", "link", "show", "lo"]);
    line.split_whitespace()
        .find(|w| w.starts_with('<'))
        .unwrap_or_default()
        .to_owned()
}

struct Pair {
    go_ns: NetNs,
    rs_ns: NetNs,
}

impl Pair {
    fn new() -> Pair {
        Pair {
            go_ns: NetNs::bare("cbl-go"),
            rs_ns: NetNs::bare("cbl-rs"),
        }
    }

    async fn run(&self, command: &str, config: &Value) -> (Run, Run) {
        let stdin = serde_json::to_vec(config).unwrap();
        let (go_path, rs_path) = (self.go_ns.path(), self.rs_ns.path());
        let (go_path, rs_path) = (go_path.to_str().unwrap(), rs_path.to_str().unwrap());
        let want = go("loopback", &env(command, "c1", "eth0", go_path, ""), &stdin).await;
        let got = builtin("loopback", &env(command, "c1", "eth0", rs_path, ""), &stdin).await;
        // The sandbox path is the only thing that may differ.
        let normal = |r: &Run, path: &str| r.text().replace(path, "NETNS");
        assert_eq!(
            normal(&got, rs_path),
            normal(&want, go_path),
            "{command} {config}: stdout differs (left: built-in, right: Go)"
        );
        assert_eq!(got.ok, want.ok, "{command} {config}");
        assert_eq!(
            lo_flags(&self.rs_ns),
            lo_flags(&self.go_ns),
            "{command} {config}: lo"
        );
        (got, want)
    }
}

#[tokio::test]
#[ignore = "needs root + netns: cargo xtask test"]
async fn up_check_down_in_every_version() {
    for version in ["", "0.1.0", "0.2.0", "0.3.1", "0.4.0", "1.0.0"] {
        let pair = Pair::new();
        assert!(
            !lo_flags(&pair.rs_ns).contains(",UP"),
            "a bare namespace has lo down"
        );
        let config = json!({"cniVersion": version, "name": "lo", "type": "loopback"});
        let (added, _) = pair.run("ADD", &config).await;
        assert!(added.ok, "{version:?}: {}", added.text());
        assert!(
            lo_flags(&pair.rs_ns).contains(",UP"),
            "{version:?}: lo must be up"
        );
        assert!(added.text().contains("127.0.0.1/8"), "{}", added.text());
        if !version.is_empty() && version >= "0.4.0" {
            let (checked, _) = pair.run("CHECK", &config).await;
            assert!(checked.ok, "{}", checked.text());
        }
        let (deleted, _) = pair.run("DEL", &config).await;
        assert!(deleted.ok, "{}", deleted.text());
        assert!(
            !lo_flags(&pair.rs_ns).contains(",UP"),
            "{version:?}: lo must be down"
        );
        if version == "1.0.0" {
            let (checked, _) = pair.run("CHECK", &config).await;
            assert_eq!(checked.json()["msg"], "loopback interface is down");
        }
    }
}

#[tokio::test]
#[ignore = "needs root + netns: cargo xtask test"]
async fn prev_result_is_passed_on() {
    for version in ["0.3.1", "0.4.0", "1.0.0"] {
        let pair = Pair::new();
        let config = json!({
            "cniVersion": version, "name": "lo", "type": "loopback",
            "prevResult": {
                "cniVersion": version,
                "interfaces": [{"name": "eth0", "mac": "0a:58:0a:58:00:05", "sandbox": "/run/netns/p"}],
                "ips": [{"version": "4", "interface": 0, "address": "10.88.0.5/16", "gateway": "10.88.0.1"},
                        {"version": "6", "address": "fd00::0005/64"}],
                "routes": [{"dst": "0.0.0.0/0"}],
                "dns": {"nameservers": ["10.88.0.1"]},
                "extra": true
            }
        });
        let (added, _) = pair.run("ADD", &config).await;
        assert!(added.ok, "{}", added.text());
    }
}

#[tokio::test]
#[ignore = "needs root + netns: cargo xtask test"]
async fn missing_and_wrong_namespaces() {
    let config =
        serde_json::to_vec(&json!({"cniVersion": "1.0.0", "name": "lo", "type": "loopback"}))
            .unwrap();
    for (command, path) in [
        ("DEL", "/run/netns/cni-builtin-missing"),
        ("ADD", "/run/netns/cni-builtin-missing"),
        ("ADD", "/etc/hostname"),
        ("DEL", ""),
    ] {
        let env = env(command, "c1", "eth0", path, "");
        let want = go("loopback", &env, &config).await;
        let got = builtin("loopback", &env, &config).await;
        assert_eq!(
            got,
            want,
            "{command} {path:?}: {} vs {}",
            got.text(),
            want.text()
        );
    }
}

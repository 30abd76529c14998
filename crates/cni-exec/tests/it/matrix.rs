//! ADD, CHECK and DEL through Debian's real plugins across configuration versions, main plugins
//! and IPAM plugins, printed as a table (`--nocapture`); fails if any cell fails.

use std::fmt::Write as _;
use std::time::Instant;

use cni_exec::{Error, RuntimeConf};
use serde_json::{Value, json};
use test_support::netns::NetNs;

use crate::realnet::Node;
use crate::support::network;

const VERSIONS: [&str; 3] = ["0.3.1", "0.4.0", "1.0.0"];
const KINDS: [&str; 4] = ["bridge", "ptp", "macvlan", "ipvlan"];
const IPAMS: [&str; 2] = ["host-local", "static"];
const PARENT: &str = "cxparent0";

struct Cell {
    kind: &'static str,
    ipam: &'static str,
    version: &'static str,
    add: String,
    check: String,
    del: String,
}

impl Cell {
    fn failed(&self) -> bool {
        [&self.add, &self.check, &self.del]
            .iter()
            .any(|v| *v != "ok" && !v.starts_with("n/a"))
    }
}

fn plugin(node: &Node, kind: &str, ipam: &str, index: usize, subnet: &str) -> Value {
    let ipam = match ipam {
        "host-local" => json!({
            "type": "host-local",
            "dataDir": node.ipam_dir(),
            "ranges": [[{"subnet": format!("{subnet}.0/24")}]]
        }),
        // ptp needs a gateway for its host side; the others do not mind one.
        _ => json!({"type": "static", "addresses": [
            {"address": format!("{subnet}.10/24"), "gateway": format!("{subnet}.1")}
        ]}),
    };
    let mut conf = json!({"type": kind, "ipam": ipam});
    match kind {
        "bridge" => {
            conf["bridge"] = json!(format!("cxmx{index}"));
            conf["isGateway"] = json!(true);
        }
        "ptp" => conf["ipMasq"] = json!(true),
        "macvlan" => {
            conf["master"] = json!(PARENT);
            conf["mode"] = json!("bridge");
        }
        _ => conf["master"] = json!(PARENT),
    }
    conf
}

fn verdict(result: Result<(), Error>) -> String {
    match result {
        Ok(()) => "ok".to_owned(),
        Err(Error::CheckNotSupported { .. }) => "n/a: CHECK needs 0.4.0".to_owned(),
        Err(e) => e.to_string(),
    }
}

async fn run_cell(
    node: &Node,
    index: usize,
    kind: &'static str,
    ipam: &'static str,
    version: &'static str,
) -> Cell {
    let pod = NetNs::new("cxmpod");
    let subnet = format!("10.77.{index}");
    let name = format!("matrix-{index}");
    let net = network(
        &name,
        version,
        vec![plugin(node, kind, ipam, index, &subnet)],
    );
    let rt = RuntimeConf::new(
        format!("m{}x{index}", std::process::id()),
        pod.path().display().to_string(),
        "eth0",
    );
    let mut cell = Cell {
        kind,
        ipam,
        version,
        add: String::new(),
        check: "not run".to_owned(),
        del: "not run".to_owned(),
    };
    cell.add = match node.cni.add_network_list(&net, &rt).await {
        Ok(result) => {
            let want = result
                .ips_on_sandbox_interface("eth0")
                .next()
                .map(|ip| ip.address.to_string());
            let have = pod.addresses("eth0");
            match want {
                Some(addr) if have == [addr.clone()] && addr.starts_with(&format!("{subnet}.")) => {
                    "ok".to_owned()
                }
                _ => format!("result {want:?} but eth0 has {have:?}"),
            }
        }
        Err(e) => e.to_string(),
    };
    cell.check = verdict(node.cni.check_network_list(&net, &rt).await);
    cell.del = verdict(node.cni.del_network_list(&net, &rt).await);
    if cell.del == "ok" {
        let leases = node.leases(&name);
        if !leases.is_empty() {
            cell.del = format!("leases left: {leases:?}");
        } else if node.ns.links().iter().any(|l| l.starts_with("veth")) {
            "veth left in the node".clone_into(&mut cell.del);
        }
    }
    cell
}

#[tokio::test]
#[ignore = "needs root + netns: cargo xtask test"]
async fn matrix() {
    let started = Instant::now();
    let node = Node::new();
    // A dummy parent for macvlan/ipvlan; kernels without the dummy module (some CI containers)
    // get one end of a veth pair instead, which serves as a parent just as well.
    let parent_kind = if node
        .ns
        .exec(&["ip", "link", "add", PARENT, "type", "dummy"])
        .status
        .success()
    {
        "dummy"
    } else {
        node.ns.must(&[
            "ip",
            "link",
            "add",
            PARENT,
            "type",
            "veth",
            "peer",
            "name",
            "cxparent1",
        ]);
        node.ns.must(&["ip", "link", "set", "cxparent1", "up"]);
        "veth"
    };
    node.ns.must(&["ip", "link", "set", PARENT, "up"]);
    println!("macvlan/ipvlan parent: {parent_kind} {PARENT}");
    // Some kernels (CI containers among them) are built without ipvlan: those cells say so
    // instead of reporting the plugin's "operation not supported".
    let probe = node.ns.exec(&[
        "ip", "link", "add", "cxprobe0", "link", PARENT, "type", "ipvlan",
    ]);
    let ipvlan_missing = !probe.status.success();
    if !ipvlan_missing {
        node.ns.must(&["ip", "link", "del", "cxprobe0"]);
    }
    let mut cells = Vec::new();
    let mut index = 0;
    for kind in KINDS {
        for ipam in IPAMS {
            for version in VERSIONS {
                index += 1;
                if kind == "ipvlan" && ipvlan_missing {
                    let na = "n/a: kernel has no ipvlan".to_owned();
                    cells.push(Cell {
                        kind,
                        ipam,
                        version,
                        add: na.clone(),
                        check: na.clone(),
                        del: na,
                    });
                    continue;
                }
                cells.push(run_cell(&node, index, kind, ipam, version).await);
            }
        }
    }

    let mut table = String::new();
    let row = |t: &mut String, cols: [&str; 6]| {
        let _ = writeln!(
            t,
            "{:<8} {:<10} {:<6} {:<26} {:<26} {}",
            cols[0], cols[1], cols[2], cols[3], cols[4], cols[5]
        );
    };
    row(&mut table, ["plugin", "ipam", "cni", "ADD", "CHECK", "DEL"]);
    for c in &cells {
        row(
            &mut table,
            [c.kind, c.ipam, c.version, &c.add, &c.check, &c.del],
        );
    }
    let failed = cells.iter().filter(|c| c.failed()).count();
    let _ = writeln!(
        table,
        "{} cells, {failed} failed, {:.1} s",
        cells.len(),
        started.elapsed().as_secs_f64()
    );
    println!("{table}");
    assert_eq!(failed, 0, "failed cells:\n{table}");
}

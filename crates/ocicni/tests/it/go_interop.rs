//! Go's libcni 1.1 (Debian's golang-github-appc-cni-dev) and ocicni on one result cache: each tears
//! down or checks what the other set up, as a Go runtime and crio-lite on one node would.
//!
//! `go-libcni` (tests/go-libcni) calls libcni directly. It runs inside the lab's node namespace,
//! as ocicni's plugins do, so everything the real plugins make lives there.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;

use ocicni::{CheckPolicy, CniArgsPolicy, CniPlugin, NetworkSelection, PodNetwork};
use serde_json::{Value, json};

use crate::real_support::{CNI_BIN, Lab, ipv4_of};

const NEEDS_GO: &str = "needs Debian's golang-go and golang-github-appc-cni-dev: cargo xtask test";

const NET: &str = "gonet";

/// Runs go-libcni inside the lab's node on the lab's cache, with plugins from `plugin_path`, and
/// returns its JSON; fails the test with its output when it fails.
fn go(lab: &Lab, plugin_path: &Path, flags: &[&str], args: &[&str]) -> Value {
    // Built once per test binary, offline, against Debian's packages.
    let program = test_support::go::build(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/go-libcni"),
        Path::new(env!("CARGO_TARGET_TMPDIR")),
        NEEDS_GO,
    );
    let [launcher, launcher_args @ ..] = lab.node.launcher();
    let out = Command::new(launcher)
        .args(launcher_args)
        .arg(program)
        .arg("-cache-dir")
        .arg(lab.cache_dir())
        .arg("-plugin-path")
        .arg(plugin_path)
        .args(flags)
        .args(args)
        .output()
        .expect("run go-libcni");
    assert!(
        out.status.success(),
        "go-libcni {args:?} failed ({}): {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("go-libcni prints JSON")
}

/// The CNI_ARGS a kubelet-driven runtime passes for `pod`, in the order ocicni's
/// [`CniArgsPolicy::Kubernetes`] uses.
fn k8s_args(pod: &PodNetwork) -> Vec<(String, String)> {
    [
        ("IgnoreUnknown", "1"),
        ("K8S_POD_NAMESPACE", pod.namespace.as_str()),
        ("K8S_POD_NAME", pod.name.as_str()),
        ("K8S_POD_INFRA_CONTAINER_ID", pod.id.as_str()),
        ("K8S_POD_UID", pod.uid.as_str()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

/// `K=V;K=V`, as CNI_ARGS travels.
fn encoded(args: &[(String, String)]) -> String {
    args.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(";")
}

/// Capability args with pod `i`'s port mapping, as [`Lab::describe`] makes it.
fn port_mapping_of(i: u16) -> Value {
    json!({"portMappings": [{"hostPort": 20000 + i, "containerPort": 8080, "protocol": "tcp"}]})
}

fn conflist_path(lab: &Lab, name: &str) -> PathBuf {
    lab.conf_dir().join(format!("10-{name}.conflist"))
}

/// A copy of the list in `file` (outside the conf dir) with its first plugin only.
fn bridge_only(lab: &Lab, file: &Path) -> PathBuf {
    let mut list: Value =
        serde_json::from_slice(&std::fs::read(file).expect("read the conflist")).expect("json");
    let plugins = list["plugins"].as_array_mut().expect("plugins");
    plugins.truncate(1);
    let copy = lab.root.join("bridge-only.conflist");
    std::fs::write(&copy, list.to_string()).expect("write the copy");
    copy
}

fn entry_name(network: &str, pod: &PodNetwork) -> String {
    format!("{network}-{}-eth0", pod.id)
}

fn id_set(pod: &PodNetwork) -> std::collections::BTreeSet<String> {
    std::iter::once(pod.id.clone()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root + netns: cargo xtask test"]
async fn go_libcni_tears_down_an_ocicni_pod_from_the_cache_alone() {
    let lab = Lab::new();
    lab.write_conflist(NET, true);
    let cni = lab.ocicni().await;
    let pod = lab.pod(0, Some(NET));
    let added = cni.setup_pod(&pod).await.expect("set-up");
    assert!(lab.subnet.contains(&ipv4_of(&added[0])));
    assert_eq!(lab.node.veths().len(), 1);
    assert_eq!(lab.leases(NET).len(), 1);
    assert_eq!(lab.cache_entries(), [entry_name(NET, &pod)]);

    // libcni reads ocicni's entry, and the real plugins take its result as prevResult. portmap is
    // left out: its CHECK in plugins 1.1.1 wants an IPv6 chain an IPv4-only pod never gets
    // (containernetworking/plugins#819), whoever runs it.
    let file = conflist_path(&lab, NET);
    let check_file = bridge_only(&lab, &file);
    let checked = go(
        &lab,
        Path::new(CNI_BIN),
        &[],
        &[
            "check",
            &check_file.display().to_string(),
            &pod.id,
            &pod.netns,
            "eth0",
        ],
    );
    assert_eq!(checked["plugins"], json!(["bridge"]), "{checked}");
    assert_eq!(checked["cniArgs"], json!(k8s_args(&pod)), "{checked}");
    assert_eq!(checked["capabilityArgs"], port_mapping_of(0), "{checked}");

    std::fs::remove_file(&file).expect("remove the conflist");
    let deleted = go(
        &lab,
        Path::new(CNI_BIN),
        &[],
        &["del-cached", NET, &pod.id, "eth0", &pod.netns],
    );
    assert_eq!(
        deleted["plugins"],
        json!(["bridge", "portmap"]),
        "{deleted}"
    );
    assert_eq!(deleted["cniArgs"], json!(k8s_args(&pod)), "{deleted}");
    assert!(
        lab.node.veths().is_empty(),
        "veth left: {:?}",
        lab.node.veths()
    );
    assert!(
        lab.leases(NET).is_empty(),
        "lease left: {:?}",
        lab.leases(NET)
    );
    assert!(lab.cache_entries().is_empty(), "{:?}", lab.cache_entries());
    let rules = lab.node.rules_naming(id_set(&pod));
    assert!(rules.is_empty(), "iptables rules left: {rules:#?}");

    // Only ocicni's own lock file is left, which its GC sweeps as it does for any pod gone.
    cni.gc(&[]).await.expect("gc");
    lab.assert_nothing_left(NET, &id_set(&pod));
    cni.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root + netns: cargo xtask test"]
async fn ocicni_tears_down_a_go_libcni_pod_from_the_cache_alone() {
    let lab = Lab::new();
    lab.write_conflist(NET, true);
    let pod = lab.pod(0, Some(NET));
    let file = conflist_path(&lab, NET);
    let added = go(
        &lab,
        Path::new(CNI_BIN),
        &["-capability-args", &port_mapping_of(0).to_string()],
        &[
            "add",
            &file.display().to_string(),
            &pod.id,
            &pod.netns,
            "eth0",
            &encoded(&k8s_args(&pod)),
        ],
    );
    let address = added["result"]["ips"][0]["address"]
        .as_str()
        .unwrap_or_else(|| panic!("an address in {added}"))
        .to_owned();
    assert_eq!(lab.node.veths().len(), 1);
    assert_eq!(lab.leases(NET).len(), 1);
    assert_eq!(lab.cache_entries(), [entry_name(NET, &pod)]);
    assert!(
        !lab.node.rules_naming(id_set(&pod)).is_empty(),
        "portmap and masquerade rules"
    );

    std::fs::remove_file(&file).expect("remove the conflist");
    let cni = lab.ocicni().await;
    assert!(cni.default_network_name().is_none(), "no network on disk");
    let status = cni.pod_network_status(&pod).await.expect("status");
    assert_eq!(
        format!("{}/{}", ipv4_of(&status[0]), lab.subnet.prefix_len()),
        address,
        "status is libcni's cached result"
    );

    cni.teardown_pod(&pod)
        .await
        .expect("teardown from the cache");
    lab.assert_nothing_left(NET, &id_set(&pod));
    cni.shutdown().await;
}

/// A plugin that records each call (`COMMAND<TAB>CNI_ARGS<TAB>stdin` on one line) to `record`
/// and answers ADD with `address`.
fn recording_plugin(dir: &Path, record: &Path, address: &str) {
    let script = format!(
        "#!/bin/sh\n\
         input=$(tr -d '\\n')\n\
         printf '%s\\t%s\\t%s\\n' \"$CNI_COMMAND\" \"$CNI_ARGS\" \"$input\" >> '{record}'\n\
         case \"$CNI_COMMAND\" in\n\
         VERSION) echo '{{\"cniVersion\":\"1.0.0\",\"supportedVersions\":[\"0.4.0\",\"1.0.0\"]}}' ;;\n\
         ADD) echo '{{\"cniVersion\":\"1.0.0\",\"ips\":[{{\"address\":\"{address}\"}}]}}' ;;\n\
         esac\n",
        record = record.display(),
    );
    std::fs::create_dir_all(dir).expect("plugin dir");
    test_support::fs::write_executable(&dir.join("argrec"), &script);
}

/// The recorded calls of `command`: their CNI_ARGS and stdin.
fn recorded(record: &Path, command: &str) -> Vec<(String, Value)> {
    std::fs::read_to_string(record)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| {
            let mut fields = line.splitn(3, '\t');
            (fields.next()? == command).then(|| {
                let args = fields.next().unwrap_or_default().to_owned();
                let stdin =
                    serde_json::from_str(fields.next().unwrap_or_default()).unwrap_or(Value::Null);
                (args, stdin)
            })
        })
        .collect()
}

/// A result without an empty `dns` object: Go's 1.0.0 result always writes `"dns": {}`, ocicni
/// writes nothing for no DNS; both mean the same.
fn without_empty_dns(result: &Value) -> Value {
    let mut result = result.clone();
    if let Some(map) = result.as_object_mut()
        && map.get("dns").is_some_and(|d| d == &json!({}))
    {
        map.remove("dns");
    }
    result
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root + netns: cargo xtask test"]
async fn ocicni_check_sends_the_cni_args_go_libcni_add_cached() {
    let lab = Lab::new();
    let net = "gocheck";
    let plugins = lab.root.join("plugins");
    let record = lab.root.join("argrec.log");
    let host = Ipv4Addr::from(u32::from(lab.subnet.network()) + 5);
    let address = format!("{host}/{}", lab.subnet.prefix_len());
    recording_plugin(&plugins, &record, &address);
    let file = conflist_path(&lab, net);
    let list = json!({
        "cniVersion": "1.0.0",
        "name": net,
        "plugins": [{"type": "argrec", "capabilities": {"portMappings": true}}],
    });
    std::fs::write(&file, list.to_string()).expect("write the conflist");
    let pod = lab.pod(0, Some(net));
    let args = encoded(&k8s_args(&pod));
    go(
        &lab,
        &plugins,
        &["-capability-args", &port_mapping_of(0).to_string()],
        &[
            "add",
            &file.display().to_string(),
            &pod.id,
            &pod.netns,
            "eth0",
            &args,
        ],
    );

    // A caller that asks for status knowing only the pod's ID, namespace and network.
    let bare = PodNetwork {
        id: pod.id.clone(),
        netns: pod.netns.clone(),
        networks: vec![NetworkSelection::new(net)],
        ..PodNetwork::default()
    };
    let cni = lab
        .builder()
        .plugin_dirs([&plugins])
        .cni_args(CniArgsPolicy::Plain)
        .check(CheckPolicy::Always)
        .build()
        .await
        .expect("build ocicni");
    let status = cni.pod_network_status(&bare).await.expect("status");
    assert_eq!(
        format!("{}/{}", ipv4_of(&status[0]), lab.subnet.prefix_len()),
        address
    );
    let checks = recorded(&record, "CHECK");
    assert_eq!(checks.len(), 1, "{checks:?}");
    assert_eq!(
        checks[0].0, args,
        "ocicni's CHECK sends what libcni's ADD did"
    );
    assert_eq!(
        checks[0].1["runtimeConfig"],
        port_mapping_of(0),
        "{}",
        checks[0].1
    );

    // libcni's own CHECK, with the same cache, agrees.
    go(
        &lab,
        &plugins,
        &[],
        &[
            "check",
            &file.display().to_string(),
            &pod.id,
            &pod.netns,
            "eth0",
        ],
    );
    let checks = recorded(&record, "CHECK");
    assert_eq!(checks.len(), 2, "{checks:?}");
    assert_eq!(checks[1].0, args);
    assert_eq!(checks[1].1["runtimeConfig"], checks[0].1["runtimeConfig"]);
    assert_eq!(
        without_empty_dns(&checks[1].1["prevResult"]),
        without_empty_dns(&checks[0].1["prevResult"]),
    );

    cni.teardown_pod(&bare).await.expect("teardown");
    let dels = recorded(&record, "DEL");
    assert_eq!(dels.len(), 1, "{dels:?}");
    assert_eq!(dels[0].0, args);
    assert!(lab.cache_entries().is_empty(), "{:?}", lab.cache_entries());
    cni.shutdown().await;
}

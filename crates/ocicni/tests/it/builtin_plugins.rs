//! The built-in plugins wired in: which implementation a plugin type gets by preference, and a
//! pod set up with no plugin binary at all.

use std::path::Path;
use std::time::Duration;

use ocicni::{CniPlugin, Implementation, Ocicni, Preference, WatchPolicy};
use serde_json::json;

use crate::real_support::Lab;

/// A network of one `loopback` plugin: a plugin type that is built in.
fn write_loopback_list(conf: &Path) {
    let list = json!({"cniVersion": "1.0.0", "name": "lo-net", "plugins": [{"type": "loopback"}]});
    std::fs::write(conf.join("10-lo.conflist"), list.to_string()).expect("write conflist");
}

async fn ocicni_over(conf: &Path, plugins: &Path, preference: Option<Preference>) -> Ocicni {
    let tmp = conf.parent().expect("lab root");
    let mut builder = Ocicni::builder()
        .conf_dir(conf)
        .plugin_dirs([plugins])
        .cache_dir(tmp.join("cache"))
        .run_dir(tmp.join("run"))
        .watch(WatchPolicy::Off);
    if let Some(preference) = preference {
        builder = builder.builtin_plugins(preference);
    }
    builder.build().await.expect("build ocicni")
}

#[tokio::test]
async fn the_default_takes_an_installed_binary_and_else_the_builtin() {
    let tmp = tempfile::tempdir().unwrap();
    let (conf, bin) = (tmp.path().join("conf"), tmp.path().join("bin"));
    std::fs::create_dir_all(&conf).unwrap();
    std::fs::create_dir_all(&bin).unwrap();
    write_loopback_list(&conf);

    // No binary: the built-in, and the network is usable.
    let cni = ocicni_over(&conf, &bin, None).await;
    assert_eq!(cni.builtin_plugins(), Preference::PreferBinary);
    assert_eq!(cni.default_network_name().as_deref(), Some("lo-net"));
    let report = &cni.networks()[0];
    assert_eq!(report.verdict, "loaded");
    assert_eq!(report.implementations.len(), 1, "{report:?}");
    assert_eq!(report.implementations[0].plugin, "loopback");
    assert_eq!(
        report.implementations[0].implementation,
        Implementation::Builtin
    );
    assert_eq!(
        report.implementations[0].path,
        Path::new("builtin:loopback")
    );
    cni.shutdown().await;

    // A binary of that name installed: the binary.
    let installed = test_support::fake_plugin::install(&bin, "loopback");
    let cni = ocicni_over(&conf, &bin, None).await;
    let report = &cni.networks()[0];
    assert_eq!(
        report.implementations[0].implementation,
        Implementation::Binary,
        "{report:?}"
    );
    assert_eq!(report.implementations[0].path, installed);
    cni.shutdown().await;

    // prefer-builtin: the built-in although the binary is there.
    let cni = ocicni_over(&conf, &bin, Some(Preference::PreferBuiltin)).await;
    assert_eq!(
        cni.networks()[0].implementations[0].implementation,
        Implementation::Builtin
    );
    cni.shutdown().await;
}

#[tokio::test]
async fn never_leaves_a_network_without_binaries_unusable_naming_the_plugin() {
    let tmp = tempfile::tempdir().unwrap();
    let (conf, bin) = (tmp.path().join("conf"), tmp.path().join("bin"));
    std::fs::create_dir_all(&conf).unwrap();
    std::fs::create_dir_all(&bin).unwrap();
    write_loopback_list(&conf);
    let cni = ocicni_over(&conf, &bin, Some(Preference::Never)).await;
    assert_eq!(cni.default_network_name(), None);
    let report = &cni.networks()[0];
    assert_eq!(report.verdict, "unusable");
    assert!(report.implementations.is_empty());
    let reason = report.reason.as_deref().unwrap_or_default();
    assert!(reason.contains("loopback"), "{reason}");
    cni.shutdown().await;
}

/// Runs `work` on a thread inside the lab's node namespace with a runtime of its own, so the
/// built-in bridge's host side (bridge, host veth) lands in the node, never in the machine's
/// namespace; the thread ends with the work.
fn in_node<T: Send + 'static>(
    lab: &Lab,
    work: impl FnOnce() -> std::pin::Pin<Box<dyn std::future::Future<Output = T>>> + Send + 'static,
) -> T {
    let node = std::fs::File::open(lab.node.path()).expect("open the node namespace");
    std::thread::spawn(move || {
        nix::sched::setns(&node, nix::sched::CloneFlags::CLONE_NEWNET).expect("enter the node");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(work())
    })
    .join()
    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

#[test]
#[ignore = "needs root + netns: cargo xtask test"]
fn a_pod_gets_its_address_from_the_builtin_plugins_with_an_empty_plugin_dir() {
    let lab = Lab::new();
    let empty = lab.root.join("no-plugins");
    std::fs::create_dir(&empty).unwrap();
    let list = json!({
        "cniVersion": "1.0.0",
        "name": "bnet",
        "plugins": [{
            "type": "bridge",
            "bridge": lab.bridge,
            "isGateway": true,
            "ipam": {
                "type": "host-local",
                "dataDir": lab.ipam_dir(),
                "routes": [{"dst": "0.0.0.0/0"}],
                "ranges": [[{"subnet": lab.subnet.to_string()}]],
            },
        }],
    });
    std::fs::write(lab.conf_dir().join("10-bnet.conflist"), list.to_string()).unwrap();
    let pod = lab.pod(0, None);
    let (conf, cache, run) = (lab.conf_dir(), lab.cache_dir(), lab.run_dir());
    let (pod2, empty2) = (pod.clone(), empty.clone());
    let (address, implementations) = in_node(&lab, move || {
        Box::pin(async move {
            let cni = Ocicni::builder()
                .conf_dir(conf)
                .plugin_dirs([empty2])
                .cache_dir(cache)
                .run_dir(run)
                .watch(WatchPolicy::Off)
                .plugin_timeout(Duration::from_secs(30))
                .build()
                .await
                .expect("build ocicni");
            let implementations = cni.networks()[0].implementations.clone();
            let results = cni.setup_pod(&pod2).await.expect("set up with built-ins");
            let address = results[0].result.first_ipv4().map(|ip| ip.address.addr());
            cni.shutdown().await;
            (address, implementations)
        })
    });
    let kinds: Vec<(&str, Implementation)> = implementations
        .iter()
        .map(|p| (p.plugin.as_str(), p.implementation))
        .collect();
    assert_eq!(
        kinds,
        [
            ("bridge", Implementation::Builtin),
            ("host-local", Implementation::Builtin)
        ]
    );
    let Some(std::net::IpAddr::V4(address)) = address else {
        panic!("no IPv4 address: {address:?}");
    };
    assert!(lab.subnet.contains(&address), "{address} in {}", lab.subnet);
    assert_eq!(
        lab.node.veths().len(),
        1,
        "the host veth is in the node namespace"
    );
    let lease = lab.ipam_dir().join("bnet").join(address.to_string());
    assert!(lease.exists(), "lease {}", lease.display());

    let (conf, cache, run) = (lab.conf_dir(), lab.cache_dir(), lab.run_dir());
    in_node(&lab, move || {
        Box::pin(async move {
            let cni = Ocicni::builder()
                .conf_dir(conf)
                .plugin_dirs([empty])
                .cache_dir(cache)
                .run_dir(run)
                .watch(WatchPolicy::Off)
                .build()
                .await
                .expect("build ocicni");
            cni.teardown_pod(&pod)
                .await
                .expect("tear down with built-ins");
            cni.shutdown().await;
        })
    });
    assert!(
        lab.node.veths().is_empty(),
        "veth left: {:?}",
        lab.node.veths()
    );
    assert!(!lease.exists(), "lease left: {}", lease.display());
}

#[test]
#[ignore = "needs root + netns: cargo xtask test"]
fn the_builtin_default_network_needs_no_plugin_binary() {
    let lab = Lab::new();
    let empty = lab.root.join("no-plugins");
    std::fs::create_dir(&empty).unwrap();
    // on the built-in network by its name, with a host port (20001)
    let pod = lab.pod(1, Some("bdefault"));
    let (conf, cache, run, ipam) = (
        lab.conf_dir(),
        lab.cache_dir(),
        lab.run_dir(),
        lab.ipam_dir(),
    );
    let (bridge, subnet) = (lab.bridge.clone(), lab.subnet);
    let (report, address) = in_node(&lab, move || {
        Box::pin(async move {
            let cni = Ocicni::builder()
                .conf_dir(conf)
                .plugin_dirs([empty])
                .cache_dir(cache)
                .run_dir(run)
                .watch(WatchPolicy::Off)
                .builtin_default(Some(ocicni::BuiltinNetwork {
                    name: "bdefault".into(),
                    bridge,
                    subnet: ipnet::IpNet::V4(subnet),
                    ipam_data_dir: Some(ipam),
                    ..ocicni::BuiltinNetwork::default()
                }))
                .build()
                .await
                .expect("build ocicni");
            let report = cni.networks().pop().expect("the built-in network's report");
            let results = cni
                .setup_pod(&pod)
                .await
                .expect("set up on the built-in network");
            let address = results[0].result.first_ipv4().map(|ip| ip.address.addr());
            // The built-in bridge's masquerade, in the node namespace this thread is in.
            let saved = std::process::Command::new("iptables-save")
                .args(["-t", "nat"])
                .output()
                .expect("iptables-save in the node");
            let saved = String::from_utf8_lossy(&saved.stdout).into_owned();
            assert!(saved.contains("-j MASQUERADE"), "{saved}");
            // and portmap's, for the pod's host port
            assert!(
                saved.contains("-A CNI-HOSTPORT-DNAT") && saved.contains("--dport 20001"),
                "{saved}"
            );
            cni.teardown_pod(&pod).await.expect("tear down");
            cni.shutdown().await;
            (report, address)
        })
    });
    assert_eq!(report.verdict, "builtin");
    assert!(report.default);
    assert_eq!(report.plugins, ["bridge", "host-local", "portmap"]);
    assert_eq!(report.reason, None, "nothing missing");
    assert!(
        report
            .implementations
            .iter()
            .all(|p| p.implementation == Implementation::Builtin),
        "{:?}",
        report.implementations
    );
    let Some(std::net::IpAddr::V4(address)) = address else {
        panic!("no IPv4 address: {address:?}");
    };
    assert!(lab.subnet.contains(&address), "{address} in {}", lab.subnet);
    assert!(
        lab.node.veths().is_empty(),
        "veth left: {:?}",
        lab.node.veths()
    );
    // What the pod had (masquerade, host port DNAT) is gone; portmap's node-wide chains and
    // their jumps stay, as the Go plugin leaves them.
    let left: Vec<String> = lab
        .node
        .rules_naming(["CNI-"])
        .into_iter()
        .filter(|r| !r.contains("CNI-HOSTPORT-"))
        .collect();
    assert!(left.is_empty(), "rules left: {left:#?}");
}

//! Namespaces come with `lo` up, show what is made in them, and go on drop, failed test or not.

use std::path::Path;

use test_support::netns::NetNs;

#[test]
#[ignore = "needs root + netns: cargo xtask test"]
fn a_namespace_is_inspected_and_deleted_on_drop() {
    let ns = NetNs::new("tsup");
    assert!(
        ns.name()
            .starts_with(&format!("tsup-{}-", std::process::id()))
    );
    let path = ns.path();
    assert!(path.exists(), "{}", path.display());
    assert_eq!(ns.links(), ["lo"]);
    assert!(
        ns.must(&["ip", "-br", "link", "show", "lo"])
            .contains("UNKNOWN")
    );

    ns.must(&[
        "ip", "link", "add", "v0", "type", "veth", "peer", "name", "v1",
    ]);
    ns.must(&["ip", "addr", "add", "10.99.0.2/24", "dev", "v0"]);
    let mut veths = ns.veths();
    veths.sort();
    assert_eq!(veths, ["v0", "v1"]);
    assert_eq!(ns.addresses("v0"), ["10.99.0.2/24"]);
    assert!(
        !ns.iptables().contains("-A "),
        "no rules in a new namespace"
    );
    ns.must(&[
        "iptables",
        "-A",
        "INPUT",
        "-m",
        "comment",
        "--comment",
        "pod-1",
        "-j",
        "ACCEPT",
    ]);
    assert_eq!(ns.rules_naming(["pod-1", "pod-2"]).len(), 1);
    assert!(ns.rules_naming(["pod-2"]).is_empty());
    assert!(ns.pids().is_empty());
    assert!(!ns.exec(&["false"]).status.success());

    let [program, args @ ..] = ns.launcher();
    let mut all: Vec<&str> = args.iter().map(String::as_str).collect();
    all.extend(["readlink", "/proc/self/ns/net"]);
    let seen = test_support::process::must(&program, &all);
    let inode = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&path).unwrap());
    assert_eq!(seen.trim(), format!("net:[{inode}]"));

    drop(ns);
    assert!(!path.exists(), "deleted on drop");
}

#[test]
#[ignore = "needs root + netns: cargo xtask test"]
fn a_failed_test_still_deletes_its_namespace_and_an_adopted_one_stays() {
    let name = std::panic::catch_unwind(|| {
        let ns = NetNs::new("tsup-panic");
        let name = ns.name().to_owned();
        std::panic::panic_any(name);
    })
    .expect_err("the closure panics")
    .downcast::<String>()
    .expect("the name");
    assert!(
        !Path::new("/run/netns").join(&*name).exists(),
        "{name} deleted"
    );

    let owner = NetNs::new("tsup-owner");
    drop(NetNs::adopt(owner.name()));
    assert!(owner.path().exists(), "an adopted namespace stays");
}

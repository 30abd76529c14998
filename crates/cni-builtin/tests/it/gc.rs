//! GC (CNI 1.1), which the Go 1.1.1 binary does not have: tested on its own.

use serde_json::json;

use crate::support::{builtin, env, go, leases, with_data_dir};

#[tokio::test]
async fn gc_releases_what_is_not_valid() {
    let data = tempfile::tempdir().unwrap();
    let config = json!({"cniVersion": "1.1.0", "name": "gc", "ipam": {"type": "host-local", "subnet": "10.70.0.0/24"}});
    let stdin = with_data_dir(&config, data.path());
    for (id, ifname) in [("a", "eth0"), ("b", "eth0"), ("b", "eth1"), ("c", "eth0")] {
        let out = builtin(
            "host-local",
            &env("ADD", id, ifname, "/run/netns/x", ""),
            &stdin,
        )
        .await;
        assert!(out.ok, "{}", out.text());
        assert_eq!(out.json()["cniVersion"], "1.1.0");
    }
    let dir = data.path().join("gc");
    // A lease in the format of host-local before 0.7: the container id alone.
    std::fs::write(dir.join("10.70.0.99"), "d").unwrap();
    std::fs::write(dir.join("10.70.0.98"), "e").unwrap();
    let mut gc = config.clone();
    gc["cni.dev/valid-attachments"] = json!([
        {"containerID": "a", "ifname": "eth0"},
        {"containerID": "b", "ifname": "eth1"},
        {"containerID": "d", "ifname": "eth0"}
    ]);
    let gc_env = vec![
        ("CNI_COMMAND".to_owned(), "GC".to_owned()),
        ("CNI_PATH".to_owned(), "/usr/lib/cni".to_owned()),
    ];
    let out = builtin("host-local", &gc_env, &with_data_dir(&gc, data.path())).await;
    assert!(out.ok, "{}", out.text());
    assert!(out.stdout.is_empty());
    let left: Vec<String> = leases(&dir).into_values().collect();
    assert_eq!(left, ["a\r\neth0", "b\r\neth1", "d"]);
    assert!(dir.join("lock").exists() && dir.join("last_reserved_ip.0").exists());

    // Before 1.1.0 there is no GC; the Go binary knows no GC at all.
    let mut old = gc.clone();
    old["cniVersion"] = json!("1.0.0");
    let refused = builtin("host-local", &gc_env, &with_data_dir(&old, data.path())).await;
    assert_eq!(refused.code(), Some(1), "{}", refused.text());
    let mut go_env = env("GC", "a", "eth0", "/run/netns/x", "");
    go_env.retain(|(k, _)| k != "CNI_NETNS");
    let go_gc = go("host-local", &go_env, &with_data_dir(&old, data.path())).await;
    assert_eq!(
        go_gc.json(),
        json!({"code": 4, "msg": "unknown CNI_COMMAND: GC"})
    );
    assert_eq!(leases(&dir).len(), 3);
}

#[tokio::test]
async fn version_adds_1_1_0() {
    let env = vec![("CNI_COMMAND".to_owned(), "VERSION".to_owned())];
    let go_answer = go("host-local", &env, b"").await.json();
    let ours = builtin("host-local", &env, b"").await.json();
    let mut expected = go_answer["supportedVersions"].as_array().unwrap().clone();
    expected.push(json!("1.1.0"));
    assert_eq!(ours["supportedVersions"], json!(expected));
}

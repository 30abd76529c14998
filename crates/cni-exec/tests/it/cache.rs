//! The result cache: libcni's layout and JSON in both directions, corrupt entries, atomic writes.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use cni_exec::{CachedAttachment, ResultCache, RuntimeConf};
use cni_types::Version;
use serde_json::{Value, json};

use crate::support::{Fixture, network};

fn testdata(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata/cache")
        .join(name)
}

/// A cache dir whose results directory holds `fixture` under the entry name libcni would use.
fn cache_with(fixture: &str, entry_name: &str) -> (tempfile::TempDir, ResultCache) {
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("results");
    std::fs::create_dir_all(&results).unwrap();
    std::fs::copy(testdata(fixture), results.join(entry_name)).unwrap();
    let cache = ResultCache::new(dir.path());
    (dir, cache)
}

#[tokio::test]
async fn entries_have_exactly_the_shape_libcni_writes() {
    let fx = Fixture::new(&["first"]);
    let net = network("shapenet", "1.0.0", vec![fx.plugin("first", json!({}))]);
    let caps = serde_json::from_value(json!({
        "portMappings": [{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}]
    }))
    .unwrap();
    let rt = RuntimeConf::new("c1", "/run/netns/p1", "eth0")
        .with_arg("K8S_POD_NAME", "web")
        .with_capability_args(caps);
    let result = fx.cni.add_network_list(&net, &rt).await.unwrap();

    let results = fx.cache_dir.path().join("results");
    let path = results.join("shapenet-c1-eth0");
    let text = std::fs::read_to_string(&path).unwrap();
    let entry: Value = serde_json::from_str(&text).unwrap();
    let keys: Vec<&str> = entry
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "kind",
            "containerId",
            "config",
            "ifName",
            "networkName",
            "netns",
            "cniArgs",
            "capabilityArgs",
            "result"
        ]
    );
    assert_eq!(entry["kind"], "cniCacheV1");
    assert_eq!(entry["containerId"], "c1");
    assert_eq!(entry["ifName"], "eth0");
    assert_eq!(entry["networkName"], "shapenet");
    assert_eq!(entry["netns"], "/run/netns/p1");
    assert_eq!(entry["cniArgs"], json!([["K8S_POD_NAME", "web"]]));
    assert_eq!(
        entry["capabilityArgs"],
        json!({"portMappings": [{"containerPort": 80, "hostPort": 8080, "protocol": "tcp"}]})
    );
    let config = base64::engine::general_purpose::STANDARD
        .decode(entry["config"].as_str().unwrap())
        .unwrap();
    assert_eq!(config, &*net.bytes, "the exact bytes, base64 std encoded");
    assert_eq!(entry["result"], result.to_json_value().unwrap());
    // Go marshals the result map with sorted keys.
    let result_keys: Vec<&str> = entry["result"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let mut sorted = result_keys.clone();
    sorted.sort_unstable();
    assert_eq!(result_keys, sorted);

    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&path), 0o600);
    assert_eq!(mode(&results), 0o700);
    let names: Vec<String> = std::fs::read_dir(&results)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["shapenet-c1-eth0"], "no temporary files left");
}

#[test]
fn reads_entries_libcni_wrote() {
    for fixture in ["libcni-entry.json", "containerID-spelling.json"] {
        let (_dir, cache) = cache_with(fixture, "crio-7f3b0c2a9e-eth0");
        let entry = cache
            .get("crio", "7f3b0c2a9e", "eth0")
            .unwrap()
            .unwrap_or_else(|| panic!("{fixture} reads"));
        assert_eq!(entry.container_id, "7f3b0c2a9e", "{fixture}");
        assert_eq!(entry.network, "crio");
        assert_eq!(entry.netns, "/var/run/netns/7f3b0c2a9e");
        assert_eq!(
            entry.config,
            std::fs::read(testdata("libcni-config.conflist")).unwrap()
        );
        assert_eq!(
            entry.cni_args,
            [
                ("IgnoreUnknown".to_owned(), "1".to_owned()),
                ("K8S_POD_NAMESPACE".to_owned(), "default".to_owned()),
                ("K8S_POD_NAME".to_owned(), "web-0".to_owned()),
            ]
        );
        let rt = entry.runtime_conf().unwrap();
        assert_eq!(rt.capability_args.port_mappings[0].host_port, 8080);
        let list = entry.network_list().unwrap();
        assert_eq!(list.plugin_types(), ["bridge", "portmap"]);
        assert_eq!(list.version, Version::V0_4_0);
        let result = entry.cni_result().unwrap().unwrap();
        assert_eq!(result.cni_version(), Version::V0_4_0);
        assert_eq!(
            result.first_ipv4().unwrap().address.to_string(),
            "10.88.0.5/16"
        );
        let listed = cache.list(Some("7f3b0c2a9e")).unwrap();
        assert_eq!(listed, [entry]);
    }
}

#[tokio::test]
async fn cached_result_of_an_older_libcni_entry_converts_to_the_list_version() {
    let (dir, _) = cache_with("libcni-1.1-no-netns.json", "crio-abc-eth0");
    let fx = Fixture::new(&[]);
    let cni = cni_exec::Cni::new(fx.cni.exec().clone(), vec![], dir.path().to_owned());
    let net = network("crio", "1.0.0", vec![json!({"type": "bridge"})]);
    let rt = RuntimeConf::new("abc", "/n", "eth0");
    let result = cni.cached_result(&net, &rt).await.unwrap().unwrap();
    assert_eq!(result.cni_version(), Version::V1_0_0);
    assert_eq!(result.ips[0].address.to_string(), "10.88.0.9/16");
    let all = cni.cached_attachments(None).await.unwrap();
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].netns, "");
    assert!(all[0].cni_args.is_empty());
}

#[test]
fn corrupt_and_empty_entries_read_as_absent() {
    for fixture in ["truncated.json", "empty.json", "wrong-kind.json"] {
        let (_dir, cache) = cache_with(fixture, "crio-abc-eth0");
        assert_eq!(cache.get("crio", "abc", "eth0").unwrap(), None, "{fixture}");
        assert!(cache.list(None).unwrap().is_empty(), "{fixture}");
    }
    let missing = ResultCache::new("/nonexistent/cni-cache");
    assert_eq!(missing.get("crio", "abc", "eth0").unwrap(), None);
    assert!(missing.list(None).unwrap().is_empty());
}

#[test]
fn writes_replace_atomically_and_leave_no_temp_files() {
    let dir = tempfile::tempdir().unwrap();
    let cache = ResultCache::new(dir.path());
    let mut entry = CachedAttachment {
        container_id: "c1".into(),
        network: "net".into(),
        if_name: "eth0".into(),
        netns: String::new(),
        config: b"{}".to_vec(),
        cni_args: Vec::new(),
        capability_args: serde_json::Map::new(),
        result: None,
    };
    for i in 0..50 {
        entry.netns = format!("/run/netns/p{i}");
        cache.put(&entry).unwrap();
        assert_eq!(
            cache.get("net", "c1", "eth0").unwrap().as_ref(),
            Some(&entry)
        );
    }
    let names: Vec<String> = std::fs::read_dir(cache.results_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["net-c1-eth0"]);
    // Without netns, cniArgs, capabilityArgs and result, libcni omits those keys.
    let text = std::fs::read_to_string(cache.results_dir().join("net-c1-eth0")).unwrap();
    assert!(text.contains(r#""netns":"/run/netns/p49""#));
    entry.netns.clear();
    cache.put(&entry).unwrap();
    let text = std::fs::read_to_string(cache.results_dir().join("net-c1-eth0")).unwrap();
    assert_eq!(
        text,
        r#"{"kind":"cniCacheV1","containerId":"c1","config":"e30=","ifName":"eth0","networkName":"net"}"#
    );
    assert!(cache.remove("net", "c1", "eth0").unwrap());
    assert!(!cache.remove("net", "c1", "eth0").unwrap());
}

#[test]
fn names_that_would_escape_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let cache = ResultCache::new(dir.path());
    for (net, id, ifname) in [
        ("../net", "c1", "eth0"),
        ("net", "../../c1", "eth0"),
        ("net", "c1", "../x"),
        ("net", "c1", ".."),
    ] {
        let err = cache.get(net, id, ifname).unwrap_err();
        assert!(
            matches!(err, cni_exec::Error::InvalidRuntimeConf { .. }),
            "{err}"
        );
    }
}

#[test]
fn pending_entries_live_in_the_pending_dir_until_the_complete_one_replaces_them() {
    let dir = tempfile::tempdir().unwrap();
    let pending_dir = dir.path().join("run/pending");
    let cache = ResultCache::new(dir.path().join("cache")).with_pending_dir(&pending_dir);
    assert_eq!(cache.pending_dir(), pending_dir);
    let files = test_support::fs::file_names;
    let entry = |id: &str, result: Option<Value>| CachedAttachment {
        container_id: id.into(),
        network: "net".into(),
        if_name: "eth0".into(),
        netns: format!("/run/netns/{id}"),
        config: b"{}".to_vec(),
        cni_args: Vec::new(),
        capability_args: serde_json::Map::new(),
        result,
    };
    let pending = entry("c1", None);
    cache.put_pending(&pending).unwrap();
    cache.put_pending(&entry("c2", None)).unwrap();
    assert_eq!(files(&pending_dir), ["net-c1-eth0", "net-c2-eth0"]);
    assert!(
        files(&cache.results_dir()).is_empty(),
        "results hold complete entries only"
    );
    assert_eq!(
        cache.get("net", "c1", "eth0").unwrap(),
        Some(pending.clone())
    );

    // The complete entry goes to the results dir and the pending one is gone.
    let done = entry("c1", Some(json!({"cniVersion": "1.0.0"})));
    cache.put(&done).unwrap();
    assert_eq!(files(&pending_dir), ["net-c2-eth0"]);
    assert_eq!(files(&cache.results_dir()), ["net-c1-eth0"]);
    assert_eq!(cache.get("net", "c1", "eth0").unwrap(), Some(done.clone()));

    // A pending entry left beside a complete one (a crash between the two steps) loses to it.
    cache.put_pending(&pending).unwrap();
    let listed = cache.list(None).unwrap();
    assert_eq!(listed, [done.clone(), entry("c2", None)]);
    assert_eq!(cache.list(Some("c2")).unwrap(), [entry("c2", None)]);
    assert_eq!(cache.get("net", "c1", "eth0").unwrap(), Some(done));

    // Removing takes both; temp files of dead writers go from both directories.
    assert!(cache.remove("net", "c1", "eth0").unwrap());
    assert_eq!(cache.get("net", "c1", "eth0").unwrap(), None);
    assert!(cache.remove("net", "c2", "eth0").unwrap());
    assert!(!cache.remove("net", "c2", "eth0").unwrap());
    std::fs::write(pending_dir.join(".net-c3-eth0.tmp-99999999-0"), b"{").unwrap();
    std::fs::write(
        cache.results_dir().join(".net-c3-eth0.tmp-99999999-1"),
        b"{",
    )
    .unwrap();
    assert_eq!(cache.remove_stale_temp_files().unwrap(), 2);
    assert!(files(&pending_dir).is_empty() && files(&cache.results_dir()).is_empty());
}

#[test]
fn a_prepared_entry_is_written_durably_or_removed_when_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let cache = ResultCache::new(dir.path().join("cache")).with_pending_dir(dir.path().join("p"));
    let entry = |id: &str| CachedAttachment {
        container_id: id.into(),
        network: "net".into(),
        if_name: "eth0".into(),
        netns: String::new(),
        config: b"{}".to_vec(),
        cni_args: Vec::new(),
        capability_args: serde_json::Map::new(),
        result: Some(json!({"cniVersion": "1.0.0"})),
    };
    let names = || -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(cache.results_dir())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    cache
        .put_pending(&CachedAttachment {
            result: None,
            ..entry("c1")
        })
        .unwrap();
    let prepared = cache.prepare("net", "c1", "eth0").unwrap();
    assert_eq!(
        prepared.path(),
        cache.entry_path("net", "c1", "eth0").unwrap()
    );
    // The temporary file is there, invisible to readers.
    assert_eq!(names().len(), 1);
    assert!(names()[0].starts_with(".net-c1-eth0.tmp-"));
    assert_eq!(cache.list(None).unwrap().len(), 1, "the pending entry only");

    // A prepared file only takes its own attachment.
    let other = cache.prepare("net", "c2", "eth0").unwrap();
    assert!(cache.put_prepared(other, &entry("c1")).is_err());
    cache.put_prepared(prepared, &entry("c1")).unwrap();
    assert_eq!(
        names(),
        ["net-c1-eth0"],
        "the failed one removed its file too"
    );
    assert_eq!(cache.get("net", "c1", "eth0").unwrap(), Some(entry("c1")));
    assert_eq!(
        cache.list(None).unwrap(),
        [entry("c1")],
        "the pending entry is gone"
    );

    drop(cache.prepare("net", "c3", "eth0").unwrap());
    assert_eq!(names(), ["net-c1-eth0"], "dropped unused, removed");
}

/// libcni's names collide: network "col" with container "x-y" and network "col-x" with container
/// "y" were one file, and a read took whatever entry was there. Both now have their own file, and
/// an entry under a name that is not its own is never returned.
#[test]
fn colliding_libcni_names_are_kept_apart_and_identity_is_checked() {
    let dir = tempfile::tempdir().unwrap();
    let cache = ResultCache::new(dir.path());
    let a = attachment("col", "x-y", "eth0");
    let b = attachment("col-x", "y", "eth0");
    cache.put(&a).unwrap();
    cache.put(&b).unwrap();
    assert_eq!(
        cache.get("col", "x-y", "eth0").unwrap().unwrap().network,
        "col"
    );
    assert_eq!(
        cache.get("col-x", "y", "eth0").unwrap().unwrap().network,
        "col-x"
    );
    assert_eq!(cache.list(None).unwrap().len(), 2);
    // An id without '-' keeps libcni's exact name, so Go runtimes find it.
    assert!(
        cache
            .entry_path("col-x", "y", "eth0")
            .unwrap()
            .ends_with("results/col-x-y-eth0")
    );
    // A file libcni wrote under the colliding name holds b's entry: a read for a gets nothing.
    let results = dir.path().join("results");
    std::fs::remove_file(cache.entry_path("col", "x-y", "eth0").unwrap()).unwrap();
    assert!(results.join("col-x-y-eth0").exists());
    assert_eq!(cache.get("col", "x-y", "eth0").unwrap(), None);
    assert!(
        !cache.remove("col", "x-y", "eth0").unwrap(),
        "b's file is not a's to remove"
    );
    assert!(cache.get("col-x", "y", "eth0").unwrap().is_some());
    // An entry copied under another attachment's name is not listed as that attachment.
    std::fs::copy(results.join("col-x-y-eth0"), results.join("other-z-eth0")).unwrap();
    let listed: Vec<String> = cache
        .list(None)
        .unwrap()
        .into_iter()
        .map(|e| format!("{}/{}/{}", e.network, e.container_id, e.if_name))
        .collect();
    assert_eq!(listed, ["col-x/y/eth0"]);
}

/// A FIFO or a huge file in the results directory is treated as a bad entry, not waited on.
#[test]
fn a_fifo_in_the_cache_is_skipped_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let cache = ResultCache::new(dir.path());
    let results = dir.path().join("results");
    std::fs::create_dir_all(&results).unwrap();
    nix::unistd::mkfifo(
        &results.join("net-c1-eth0"),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = ResultCache::new(dir.path());
    std::thread::spawn(move || {
        let got = reader.get("net", "c1", "eth0").map(|e| e.is_none());
        let listed = reader.list(None).map(|l| l.len());
        let _ = tx.send((got, listed));
    });
    let (got, listed) = rx
        .recv_timeout(std::time::Duration::from_secs(5))
        .expect("reading a FIFO entry must not block");
    assert!(got.unwrap());
    assert_eq!(listed.unwrap(), 0);
    drop(cache);
}

fn attachment(network: &str, container_id: &str, if_name: &str) -> CachedAttachment {
    CachedAttachment {
        container_id: container_id.into(),
        network: network.into(),
        if_name: if_name.into(),
        netns: String::new(),
        config: b"{}".to_vec(),
        cni_args: Vec::new(),
        capability_args: serde_json::Map::new(),
        result: None,
    }
}

/// An attachment whose entry name would be too long can never have been stored: writing it is
/// refused naming the network, reading and removing it find nothing (so its teardown proceeds).
#[test]
fn names_too_long_for_a_file_are_refused_on_write_and_absent_on_read() {
    let dir = tempfile::tempdir().unwrap();
    let cache = ResultCache::new(dir.path());
    // Each part within its own cap (a network name 255 bytes, a container id 128), the three
    // together past a file name's.
    let (network, long_id) = ("n".repeat(200), "c".repeat(100));
    let err = cache
        .put(&attachment(&network, &long_id, "eth0"))
        .unwrap_err();
    let text = err.to_string();
    assert!(text.contains(&format!("\"{network}\"")), "{text}");
    assert!(text.contains("longer than"), "{text}");
    assert!(
        !text.contains(".tmp"),
        "the temporary file is not the user's business: {text}"
    );
    assert_eq!(cache.get(&network, &long_id, "eth0").unwrap(), None);
    assert!(!cache.remove(&network, &long_id, "eth0").unwrap());
}

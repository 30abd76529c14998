//! Loading directories: order, extensions, shadowing, rejection, plugin subdirectories.

use std::path::Path;

use cni_config::{Error, Verdict, load_dir, load_file};

use crate::testdata;

fn file_names(load: &cni_config::DirLoad) -> Vec<String> {
    load.files
        .iter()
        .map(|f| f.path.file_name().unwrap().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn files_are_read_in_byte_order_with_known_extensions_only() {
    let load = load_dir(&testdata("sort-order")).unwrap();
    // "10-a" sorts before "5-b" byte-wise; README.md and *.conf.bak are not candidates.
    assert_eq!(file_names(&load), ["10-a.conflist", "5-b.conf", "7-c.json"]);
    let names: Vec<_> = load
        .networks()
        .iter()
        .map(cni_config::NetworkList::name)
        .collect();
    assert_eq!(names, ["a", "b", "c"]);
    assert_eq!(load.default_network().unwrap().name(), "a");
    assert_eq!(load.get("c").unwrap().plugin_types(), ["ptp"]);
}

#[test]
fn the_first_file_with_a_name_wins_and_rejected_files_claim_nothing() {
    let dir = testdata("shadowing");
    let load = load_dir(&dir).unwrap();
    let verdicts: Vec<_> = load
        .files
        .iter()
        .map(|f| {
            (
                f.path.file_name().unwrap().to_str().unwrap(),
                f.verdict.as_str(),
            )
        })
        .collect();
    assert_eq!(
        verdicts,
        [
            ("05-evil-type.conflist", "rejected"),
            ("10-first.conflist", "loaded"),
            ("20-same-name.conf", "shadowed"),
            ("30-other.conf", "loaded"),
        ]
    );
    let shadowed = &load.files[2];
    assert!(
        matches!(&shadowed.verdict, Verdict::Shadowed { by } if by == &dir.join("10-first.conflist"))
    );
    assert_eq!(
        shadowed.reason().unwrap(),
        format!(
            "network \"net\" is already defined by {}",
            dir.join("10-first.conflist").display()
        )
    );
    assert_eq!(load.get("net").unwrap().plugin_types(), ["bridge"]);
    assert_eq!(load.get("other").unwrap().plugin_types(), ["ipvlan"]);
    // The rejected file still reports the name it tried to use.
    assert_eq!(load.files[0].network.as_deref(), Some("other"));
    let (path, err) = load.rejected().next().unwrap();
    assert_eq!(
        err.to_string(),
        format!(
            "{}: plugins[0].type: must be a plain file name, got \"../evil\"",
            path.display()
        )
    );
}

#[test]
fn plugins_are_appended_from_the_network_subdirectory() {
    let dir = testdata("plugin-subdir");
    let chain = load_file(&dir.join("10-chain.conflist")).unwrap();
    // Inline first, then chain/*.conf sorted; other extensions and nested dirs are skipped.
    assert_eq!(chain.plugin_types(), ["bridge", "portmap", "tuning"]);
    assert_eq!(
        chain.plugin_files,
        [
            dir.join("chain/10-portmap.conf"),
            dir.join("chain/20-tuning.conf")
        ]
    );
    assert!(chain.list.plugins[1].capabilities.enabled("portMappings"));
    // The cached bytes stay the file's own bytes, as libcni keeps them.
    assert_eq!(chain.cache_config, chain.bytes);

    let inlined = load_file(&dir.join("20-inlined.conflist")).unwrap();
    assert_eq!(inlined.plugin_types(), ["bridge"]);
    assert!(inlined.plugin_files.is_empty());

    let from_files = load_file(&dir.join("30-fromfiles.conflist")).unwrap();
    assert_eq!(from_files.plugin_types(), ["loopback"]);

    let load = load_dir(&dir).unwrap();
    assert_eq!(
        file_names(&load),
        [
            "10-chain.conflist",
            "20-inlined.conflist",
            "30-fromfiles.conflist"
        ]
    );
    assert_eq!(load.networks().len(), 3);
}

#[test]
fn a_bad_plugin_file_is_named_in_the_rejection() {
    let dir = testdata("plugin-subdir-bad");
    let err = load_file(&dir.join("10-x.conflist")).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{}: type: must be a plain file name, got \"../evil\"",
            dir.join("x/10-bad.conf").display()
        )
    );
}

#[test]
fn a_missing_directory_is_its_own_error() {
    let dir = Path::new("/nonexistent/cni/net.d");
    let err = load_dir(dir).unwrap_err();
    assert!(matches!(&err, Error::DirNotFound { dir: d } if d == dir));
    assert_eq!(
        err.to_string(),
        "/nonexistent/cni/net.d: configuration directory does not exist"
    );
    // A file is not a directory: reading fails, but not as "missing".
    let err = load_dir(&testdata("unknown-keys.conflist")).unwrap_err();
    assert!(matches!(err, Error::ReadDir { .. }), "{err}");
}

#[test]
fn unreadable_candidates_and_empty_directories() {
    let tmp = tempfile::tempdir().unwrap();
    assert!(load_dir(tmp.path()).unwrap().files.is_empty());
    // A dangling symlink is a candidate that cannot be read: rejected, named, load goes on.
    std::os::unix::fs::symlink(tmp.path().join("gone"), tmp.path().join("00-dangling.conf"))
        .unwrap();
    std::fs::write(
        tmp.path().join("10-ok.conf"),
        r#"{"name":"ok","type":"ptp"}"#,
    )
    .unwrap();
    std::fs::create_dir(tmp.path().join("20-dir.conf")).unwrap();
    let load = load_dir(tmp.path()).unwrap();
    assert_eq!(file_names(&load), ["00-dangling.conf", "10-ok.conf"]);
    let (path, err) = load.rejected().next().unwrap();
    assert!(matches!(err, Error::Read { .. }));
    assert!(
        err.to_string()
            .starts_with(&format!("{}: cannot read: ", path.display()))
    );
    assert_eq!(load.networks().len(), 1);
}

#[test]
fn reports_render_as_json_lines() {
    let load = load_dir(&testdata("shadowing")).unwrap();
    let lines: Vec<_> = load
        .files
        .iter()
        .map(cni_config::FileReport::to_json)
        .collect();
    let dir = testdata("shadowing");
    assert_eq!(
        lines[1],
        serde_json::json!({
            "file": dir.join("10-first.conflist").to_string_lossy(),
            "network": "net",
            "cniVersion": "1.0.0",
            "plugins": ["bridge"],
            "verdict": "loaded",
            "reason": null,
        })
    );
    assert_eq!(lines[2]["verdict"], "shadowed");
    assert_eq!(lines[0]["verdict"], "rejected");
    assert_eq!(lines[0]["network"], "other");
    assert_eq!(lines[0]["cniVersion"], serde_json::Value::Null);
    assert!(
        lines[0]["reason"]
            .as_str()
            .unwrap()
            .contains("plain file name")
    );
}

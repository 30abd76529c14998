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

/// Runs `f` on its own thread and fails the test if it takes longer than `secs`: a file that makes
/// the loader block (a FIFO) must fail the test, not hang it.
fn within<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(std::time::Duration::from_secs(secs))
        .unwrap_or_else(|_| panic!("did not finish within {secs} s (blocked on a file?)"))
}

fn reasons(load: &cni_config::DirLoad) -> Vec<(String, &'static str, String)> {
    load.files
        .iter()
        .map(|f| {
            (
                f.path.file_name().unwrap().to_string_lossy().into_owned(),
                f.verdict.as_str(),
                f.reason().unwrap_or_default(),
            )
        })
        .collect()
}

#[test]
fn only_regular_files_are_read_and_never_without_bound() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_owned();
    let fifo = dir.join("01-fifo.conf");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("run mkfifo");
    assert!(status.success());
    std::os::unix::fs::symlink("/dev/zero", dir.join("02-zero.conf")).unwrap();
    let _socket = std::os::unix::net::UnixListener::bind(dir.join("03-socket.conf")).unwrap();
    // Valid JSON, padded past the cap: it would load if it were read whole.
    let mut big = br#"{"name":"big","type":"ptp"}"#.to_vec();
    big.resize(1024 * 1024 + 1, b' ');
    std::fs::write(dir.join("04-big.conf"), &big).unwrap();
    std::fs::write(dir.join("real.json"), r#"{"name":"ok","type":"ptp"}"#).unwrap();
    std::os::unix::fs::symlink(dir.join("real.json"), dir.join("05-link.conf")).unwrap();
    std::fs::write(dir.join("06-at-cap.conf"), {
        let mut at_cap = br#"{"name":"at-cap","type":"ptp"}"#.to_vec();
        at_cap.resize(1024 * 1024, b' ');
        at_cap
    })
    .unwrap();

    let load = within(20, move || load_dir(&dir).unwrap());
    let path_of = |name: &str| tmp.path().join(name).display().to_string();
    let got = reasons(&load);
    let want = [
        (
            "01-fifo.conf",
            "rejected",
            format!(
                "{}: cannot read: not a regular file (fifo)",
                path_of("01-fifo.conf")
            ),
        ),
        (
            "02-zero.conf",
            "rejected",
            format!(
                "{}: cannot read: not a regular file (character device)",
                path_of("02-zero.conf")
            ),
        ),
        (
            "03-socket.conf",
            "rejected",
            format!(
                "{}: cannot read: not a regular file (socket)",
                path_of("03-socket.conf")
            ),
        ),
        (
            "04-big.conf",
            "rejected",
            format!("{}: cannot read: larger than 1 MiB", path_of("04-big.conf")),
        ),
        ("05-link.conf", "loaded", String::new()),
        ("06-at-cap.conf", "loaded", String::new()),
        (
            "real.json",
            "shadowed",
            format!(
                "network \"ok\" is already defined by {}",
                path_of("05-link.conf")
            ),
        ),
    ];
    let want: Vec<_> = want
        .into_iter()
        .map(|(n, v, r)| (n.to_owned(), v, r))
        .collect();
    assert_eq!(got, want);
    // Nothing was learnt from files that were not read.
    assert!(load.files[..4].iter().all(|f| f.network.is_none()));
}

#[test]
fn load_file_refuses_directories_and_fifos_by_name() {
    let tmp = tempfile::tempdir().unwrap();
    let fifo = tmp.path().join("x.conflist");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("run mkfifo")
            .success()
    );
    let err = within(20, move || load_file(&fifo).unwrap_err().to_string());
    assert_eq!(
        err,
        format!(
            "{}: cannot read: not a regular file (fifo)",
            tmp.path().join("x.conflist").display()
        )
    );
    std::fs::create_dir(tmp.path().join("d.conf")).unwrap();
    std::os::unix::fs::symlink(tmp.path().join("d.conf"), tmp.path().join("l.conf")).unwrap();
    for name in ["d.conf", "l.conf"] {
        let path = tmp.path().join(name);
        assert_eq!(
            load_file(&path).unwrap_err().to_string(),
            format!(
                "{}: cannot read: not a regular file (directory)",
                path.display()
            )
        );
    }
}

#[test]
fn a_fifo_among_plugin_files_is_rejected_by_name() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("10-x.conflist"),
        r#"{"cniVersion":"1.1.0","name":"x","plugins":[{"type":"bridge"}]}"#,
    )
    .unwrap();
    std::fs::create_dir(tmp.path().join("x")).unwrap();
    let fifo = tmp.path().join("x/20-fifo.conf");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("run mkfifo")
            .success()
    );
    let dir = tmp.path().to_owned();
    let load = within(20, move || load_dir(&dir).unwrap());
    let (_, err) = load.rejected().next().expect("the list is rejected");
    assert_eq!(
        err.to_string(),
        format!("{}: cannot read: not a regular file (fifo)", fifo.display())
    );
}

#[test]
fn a_network_name_longer_than_a_file_name_is_rejected_for_its_name() {
    let tmp = tempfile::tempdir().unwrap();
    let name = "n".repeat(256);
    let file = tmp.path().join("10-long.conflist");
    std::fs::write(
        &file,
        format!(r#"{{"cniVersion":"1.1.0","name":"{name}","plugins":[{{"type":"bridge"}}]}}"#),
    )
    .unwrap();
    let load = load_dir(tmp.path()).unwrap();
    let (path, err) = load.rejected().next().expect("rejected");
    assert_eq!(path, file);
    assert_eq!(err.field(), Some("name"));
    let text = err.to_string();
    assert_eq!(
        text,
        format!(
            "{}: name: 256 bytes, longer than a file name can be (255); the network's plugin \
             directory and cache entries are files named after it",
            file.display()
        )
    );
    // At the limit, a missing plugin directory is just missing.
    let name = "n".repeat(255);
    std::fs::write(
        &file,
        format!(r#"{{"cniVersion":"1.1.0","name":"{name}","plugins":[{{"type":"bridge"}}]}}"#),
    )
    .unwrap();
    assert_eq!(load_dir(tmp.path()).unwrap().networks().len(), 1);
}

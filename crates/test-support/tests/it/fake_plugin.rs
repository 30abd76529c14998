//! `fake_plugin::binary()` builds the plugin once and the result runs as a CNI plugin.

use std::io::Write as _;
use std::process::{Command, Stdio};

use serde_json::Value;
use test_support::fake_plugin;

#[test]
fn the_binary_is_built_once_and_answers_version() {
    let first = fake_plugin::binary();
    assert!(first.is_file(), "{}", first.display());
    assert!(std::ptr::eq(first, fake_plugin::binary()), "built once");

    let mut child = Command::new(first)
        .env("CNI_COMMAND", "VERSION")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run the fake plugin");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(br#"{"cniVersion":"0.4.0","fake":{"supportedVersions":["0.4.0"]}}"#)
        .expect("write the config");
    let out = child.wait_with_output().expect("wait for the plugin");
    assert!(out.status.success(), "{out:?}");
    let answer: Value = serde_json::from_slice(&out.stdout).expect("VERSION prints JSON");
    assert_eq!(answer["cniVersion"], "0.4.0");
    assert_eq!(answer["supportedVersions"], serde_json::json!(["0.4.0"]));
}

#[test]
fn install_links_the_plugin_under_a_name() {
    let dir = test_support::temp_dir("tsup-install");
    let path = fake_plugin::install(dir.path(), "bridge");
    assert_eq!(path, dir.path().join("bridge"));
    assert_eq!(
        std::fs::read_link(&path).expect("a link"),
        fake_plugin::binary()
    );
}

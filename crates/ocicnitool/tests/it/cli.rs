//! The `ocicnitool` binary, run as a script would run it.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::path::Path;
use std::process::{Command, Output};

use ipnet::IpNet;
use serde_json::Value;

use crate::real_support::Lab;

const TOOL: &str = env!("CARGO_BIN_EXE_ocicnitool");

fn tool(args: &[&str]) -> Output {
    Command::new(TOOL)
        .args(args)
        .output()
        .expect("run ocicnitool")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A plugin directory with one shell-script plugin that answers VERSION, enough for `list`.
fn version_only_plugin(dir: &Path) {
    test_support::fs::write_executable(
        &dir.join("fakeplug"),
        "#!/bin/sh\necho '{\"cniVersion\":\"1.0.0\",\"supportedVersions\":[\"0.4.0\",\"1.0.0\"]}'\n",
    );
}

#[test]
fn list_json_reports_the_good_file_and_why_the_bad_one_is_rejected() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let (conf, bin, cache) = (
        tmp.path().join("conf"),
        tmp.path().join("bin"),
        tmp.path().join("cache"),
    );
    for d in [&conf, &bin] {
        std::fs::create_dir(d).expect("dir");
    }
    version_only_plugin(&bin);
    std::fs::write(
        conf.join("10-good.conflist"),
        r#"{"cniVersion":"1.0.0","name":"good","plugins":[{"type":"fakeplug"}]}"#,
    )
    .expect("good file");
    std::fs::write(conf.join("20-bad.conflist"), "{ not json").expect("bad file");

    let out = tool(&[
        "list",
        "--json",
        "--conf-dir",
        &conf.display().to_string(),
        "--bin-dir",
        &bin.display().to_string(),
        "--cache-dir",
        &cache.display().to_string(),
        "--run-dir",
        &cache.join("run").display().to_string(),
    ]);
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    let reports: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("JSON on stdout ({e}): {}", text(&out.stdout)));
    let reports = reports.as_array().expect("an array");
    assert_eq!(reports.len(), 2, "{reports:#?}");

    let good = &reports[0];
    assert!(
        good["file"]
            .as_str()
            .is_some_and(|f| f.ends_with("10-good.conflist"))
    );
    assert_eq!(good["network"], "good");
    assert_eq!(good["verdict"], "loaded");
    assert_eq!(good["default"], true);
    assert_eq!(good["plugins"], serde_json::json!(["fakeplug"]));

    let bad = &reports[1];
    assert!(
        bad["file"]
            .as_str()
            .is_some_and(|f| f.ends_with("20-bad.conflist"))
    );
    assert_eq!(bad["verdict"], "rejected");
    assert_eq!(bad["default"], false);
    assert!(
        bad["reason"].as_str().is_some_and(|r| !r.is_empty()),
        "a reason: {bad}"
    );

    let human = tool(&[
        "list",
        "--conf-dir",
        &conf.display().to_string(),
        "--bin-dir",
        &bin.display().to_string(),
        "--cache-dir",
        &cache.display().to_string(),
        "--run-dir",
        &cache.join("run").display().to_string(),
    ]);
    assert!(human.status.success());
    let human = text(&human.stdout);
    assert!(
        human.contains("good\tloaded\t[fakeplug]\tdefault"),
        "{human}"
    );
    assert!(human.contains("20-bad.conflist\t-\trejected"), "{human}");
}

#[test]
fn builtin_plugins_flag_chooses_what_runs_a_plugin_without_a_binary() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let (conf, bin, cache) = (
        tmp.path().join("conf"),
        tmp.path().join("bin"),
        tmp.path().join("cache"),
    );
    for d in [&conf, &bin] {
        std::fs::create_dir(d).expect("dir");
    }
    std::fs::write(
        conf.join("10-lo.conflist"),
        r#"{"cniVersion":"1.0.0","name":"lo","plugins":[{"type":"loopback"}]}"#,
    )
    .expect("conflist");
    let dirs = [
        "--conf-dir".to_owned(),
        conf.display().to_string(),
        "--bin-dir".to_owned(),
        bin.display().to_string(),
        "--cache-dir".to_owned(),
        cache.display().to_string(),
        "--run-dir".to_owned(),
        cache.join("run").display().to_string(),
    ];
    let list = |extra: &[&str]| {
        let mut args: Vec<&str> = vec!["list"];
        args.extend(dirs.iter().map(String::as_str));
        args.extend(extra);
        tool(&args)
    };

    // The default: no binary, so the built-in.
    let out = list(&[]);
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    let human = text(&out.stdout);
    assert!(
        human.contains("lo\tloaded\t[loopback]\tdefault\tbuilt in: loopback"),
        "{human}"
    );
    let out = list(&["--json", "--builtin-plugins", "prefer-builtin"]);
    let reports: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(
        reports[0]["implementations"],
        serde_json::json!([{"plugin": "loopback", "implementation": "builtin", "path": "builtin:loopback"}])
    );

    // never: no binary, no network.
    let out = list(&["--builtin-plugins", "never"]);
    let human = text(&out.stdout);
    assert!(human.contains("lo\tunusable"), "{human}");
    assert!(!human.contains("built in"), "{human}");

    let out = list(&["--builtin-plugins", "sometimes"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("prefer-builtin"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn usage_errors_exit_2_and_failures_exit_1_with_the_reason() {
    let out = tool(&["frobnicate"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("unrecognized subcommand 'frobnicate'"),
        "{}",
        text(&out.stderr)
    );

    let out = tool(&["add", "--id", "abc"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("add needs --netns"));

    let tmp = tempfile::tempdir().expect("temp dir");
    let conf = tmp.path().join("empty");
    std::fs::create_dir(&conf).expect("dir");
    let out = tool(&[
        "add",
        "--id",
        "abc",
        "--netns",
        "/run/netns/does-not-matter",
        "--conf-dir",
        &conf.display().to_string(),
        "--cache-dir",
        &tmp.path().join("cache").display().to_string(),
        "--run-dir",
        &tmp.path().join("run").display().to_string(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.starts_with("ocicnitool: add: no CNI network configured in ")
            && err.contains(&conf.display().to_string()),
        "{err}"
    );
    assert!(out.stdout.is_empty());

    let out = tool(&["--help"]);
    assert!(out.status.success());
    let help = text(&out.stdout);
    assert!(
        help.contains("Usage: ocicnitool [OPTIONS] <COMMAND>") && help.contains("Exit status: 0"),
        "{help}"
    );
}

fn first_ipv4(attachments: &Value) -> Ipv4Addr {
    let address = attachments[0]["result"]["ips"][0]["address"]
        .as_str()
        .unwrap_or_else(|| panic!("an address in {attachments:#}"));
    match address.parse::<IpNet>().expect("an address/prefix") {
        IpNet::V4(net) => net.addr(),
        IpNet::V6(net) => panic!("IPv6 {net}"),
    }
}

#[test]
#[ignore = "needs root + netns: cargo xtask test"]
fn real_plugins_add_status_and_del_through_the_tool() {
    let lab = Lab::new();
    lab.write_conflist("toolnet", true);
    let pod = lab.pod(0, Some("toolnet"));
    let dirs = [
        "--conf-dir".to_owned(),
        lab.conf_dir().display().to_string(),
        "--bin-dir".to_owned(),
        crate::real_support::CNI_BIN.to_owned(),
        "--cache-dir".to_owned(),
        lab.cache_dir().display().to_string(),
        "--run-dir".to_owned(),
        lab.run_dir().display().to_string(),
    ];
    let pod_flags = [
        "--id",
        pod.id.as_str(),
        "--netns",
        pod.netns.as_str(),
        "--name",
        "web",
        "--namespace",
        "cnitest",
        "--uid",
        "u-1",
        "--network",
        "toolnet",
        "--port",
        "20000:8080",
        "--k8s-args",
        "--json",
    ];
    let in_node = |cmd: &str| {
        let out = Command::new("ip")
            .args(["netns", "exec", lab.node.name(), TOOL, cmd])
            .args(&dirs)
            .args(pod_flags)
            .output()
            .expect("run ocicnitool in the node");
        assert!(
            out.status.success(),
            "ocicnitool {cmd}: {}",
            text(&out.stderr)
        );
        serde_json::from_slice::<Value>(&out.stdout)
            .unwrap_or_else(|e| panic!("JSON from {cmd} ({e}): {}", text(&out.stdout)))
    };

    let added = in_node("add");
    assert_eq!(added[0]["network"], "toolnet");
    assert_eq!(added[0]["ifname"], "eth0");
    let addr = first_ipv4(&added);
    assert!(lab.subnet.contains(&addr), "{addr} in {}", lab.subnet);
    assert_eq!(lab.node.veths().len(), 1);
    assert!(
        lab.node.iptables().contains("dport 20000"),
        "the port mapping reached portmap"
    );

    let status = in_node("status");
    assert_eq!(first_ipv4(&status), addr, "status gives the same address");

    let deleted = in_node("del");
    assert_eq!(deleted["deleted"], pod.id.as_str());
    lab.assert_nothing_left("toolnet", &BTreeSet::from([pod.id.clone()]));
}

#[test]
fn durations_nobody_can_wait_for_are_usage_errors_not_panics() {
    for value in ["1e300", "NaN", "inf", "-1", "0", "-0", "1e-300", "soon"] {
        let out = tool(&["list", "--timeout", value]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "--timeout {value}: {err}");
        assert!(!err.contains("panicked"), "--timeout {value}: {err}");
        assert!(
            err.starts_with(&format!(
                "error: invalid value '{value}' for '--timeout <DURATION>': "
            )),
            "--timeout {value}: {err}"
        );
    }
}

#[test]
fn list_on_a_missing_conf_dir_fails_naming_it_once() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let conf = tmp.path().join("no-such-net.d");
    let conf_text = conf.display().to_string();
    for json in [false, true] {
        let mut args = vec![
            "list",
            "--conf-dir",
            &conf_text,
            "--cache-dir",
            tmp.path().to_str().expect("utf-8 temp dir"),
            "--run-dir",
            tmp.path().to_str().expect("utf-8 temp dir"),
        ];
        if json {
            args.push("--json");
        }
        let out = tool(&args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "json={json}: {err}");
        assert!(out.stdout.is_empty(), "json={json}: {}", text(&out.stdout));
        assert_eq!(
            err.trim_end(),
            format!(
                "ocicnitool: list: cannot read CNI configuration directory {conf_text}: does not exist"
            ),
        );
    }
}

#[test]
fn completions_name_every_command_and_flag() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = tool(&["completions", shell]);
        assert!(out.status.success(), "{shell}: {}", text(&out.stderr));
        let script = text(&out.stdout);
        for word in [
            "add",
            "del",
            "check",
            "status",
            "gc",
            "list",
            "completions",
            "conf-dir",
            "bin-dir",
            "timeout",
            "k8s-args",
        ] {
            assert!(script.contains(word), "{shell} completes {word}");
        }
    }
    let bash = text(&tool(&["completions", "bash"]).stdout);
    assert!(
        bash.lines()
            .any(|l| l.trim_start().starts_with("complete -F") && l.ends_with(" ocicnitool")),
        "the script registers itself for ocicnitool: {bash}"
    );
    let out = tool(&["completions", "tcsh"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "an unknown shell is a usage error"
    );
}

#[test]
fn man_prints_a_roff_page_with_every_command_and_flag() {
    let out = tool(&["man"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let page = text(&out.stdout);
    assert!(
        page.lines().any(|l| l.starts_with(".TH ocicnitool 1")),
        "{page}"
    );
    for section in [".SH NAME", ".SH SYNOPSIS", ".SH OPTIONS", ".SH SUBCOMMANDS"] {
        assert!(page.contains(section), "{section} in {page}");
    }
    // roff escapes the dashes of flags.
    for flag in [
        "\\-\\-conf\\-dir",
        "\\-\\-timeout",
        "\\-\\-valid",
        "\\-\\-json",
    ] {
        assert!(page.contains(flag), "{flag} in {page}");
    }
    assert!(page.contains("ocicnitool\\-add(1)"), "{page}");
    assert!(
        !page.contains("ocicnitool\\-man") && !page.contains("ocicnitool\\-help"),
        "no page for the hidden man command or clap's help"
    );

    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path().join("man1");
    let out = tool(&["man", "--out-dir", &dir.display().to_string()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout).lines().count(),
        8,
        "the paths written: {}",
        text(&out.stdout)
    );
    let mut pages: Vec<String> = std::fs::read_dir(&dir)
        .expect("the pages' directory")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    pages.sort();
    assert_eq!(
        pages,
        [
            "ocicnitool-add.1",
            "ocicnitool-check.1",
            "ocicnitool-completions.1",
            "ocicnitool-del.1",
            "ocicnitool-gc.1",
            "ocicnitool-list.1",
            "ocicnitool-status.1",
            "ocicnitool.1",
        ]
    );
    let add = std::fs::read_to_string(dir.join("ocicnitool-add.1")).expect("the add page");
    let title = format!(
        ".TH ocicnitool-add 1  \"ocicnitool {}\"",
        env!("CARGO_PKG_VERSION")
    );
    assert!(add.contains(&title), "{title} in {add}");
    assert!(
        add.contains("\\-\\-netns"),
        "the global flags are on the command's page"
    );
}

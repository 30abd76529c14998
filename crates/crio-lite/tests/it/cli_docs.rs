//! Shell completions and manual pages, generated from the command line that parses.

use std::process::{Command, Output};

fn crio_lite(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_crio-lite"))
        .args(args)
        .output()
        .expect("run crio-lite")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn completions_name_every_command_and_flag() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = crio_lite(&["completions", shell]);
        assert!(out.status.success(), "{shell}: {}", text(&out.stderr));
        let script = text(&out.stdout);
        for word in [
            "run",
            "config",
            "status",
            "containers",
            "version",
            "completions",
            "check-config",
            "cni-config-dir",
            "cni-plugin-dir",
            "listen",
            "plugin-timeout",
            "cni-args-policy",
        ] {
            assert!(script.contains(word), "{shell} completes {word}");
        }
        if matches!(shell, "bash" | "zsh" | "fish") {
            assert!(
                script.contains("kubernetes"),
                "{shell} completes the values of --cni-args-policy"
            );
        }
    }
    let bash = text(&crio_lite(&["completions", "bash"]).stdout);
    assert!(
        bash.lines()
            .any(|l| l.trim_start().starts_with("complete -F") && l.ends_with(" crio-lite")),
        "the script registers itself for crio-lite: {bash}"
    );
    let out = crio_lite(&["completions", "tcsh"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "an unknown shell is a usage error"
    );
    assert!(
        text(&out.stderr).contains("invalid value 'tcsh'"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn man_prints_a_roff_page_with_every_command_and_flag() {
    let out = crio_lite(&["man"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let page = text(&out.stdout);
    let title = format!(
        ".TH crio-lite 1  \"crio-lite {}\"",
        env!("CARGO_PKG_VERSION")
    );
    assert!(page.lines().any(|l| l.starts_with(&title)), "{page}");
    assert!(
        page.contains("crio\\-lite \\- A thin CRI daemon"),
        "the binary's own description: {page}"
    );
    for section in [".SH NAME", ".SH SYNOPSIS", ".SH OPTIONS", ".SH SUBCOMMANDS"] {
        assert!(page.contains(section), "{section} in {page}");
    }
    // roff escapes the dashes of flags.
    for flag in [
        "\\-\\-config",
        "\\-\\-config\\-dir",
        "\\-\\-listen",
        "\\-\\-cni\\-plugin\\-dir",
        "CONTAINER_LISTEN",
        "\\-\\-plugin\\-timeout",
    ] {
        assert!(page.contains(flag), "{flag} in {page}");
    }
    assert!(page.contains("crio\\-lite\\-status(1)"), "{page}");
    assert!(
        !page.contains("crio\\-lite\\-man") && !page.contains("crio\\-lite\\-help"),
        "no page for the hidden man command or clap's help"
    );
}

#[test]
fn man_out_dir_writes_a_page_per_command_and_lists_them() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path().join("man1");
    let out = crio_lite(&["man", "--out-dir", &dir.display().to_string()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mut listed: Vec<String> = text(&out.stdout).lines().map(str::to_owned).collect();
    listed.sort();
    let mut pages: Vec<String> = std::fs::read_dir(&dir)
        .expect("the pages' directory")
        .map(|e| e.expect("entry").path().display().to_string())
        .collect();
    pages.sort();
    assert_eq!(listed, pages, "stdout lists what was written");
    let names: Vec<String> = pages
        .iter()
        .map(|p| p.rsplit('/').next().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        names,
        [
            "crio-lite-check-config.1",
            "crio-lite-completions.1",
            "crio-lite-config.1",
            "crio-lite-run.1",
            "crio-lite-status-config.1",
            "crio-lite-status-containers.1",
            "crio-lite-status-info.1",
            "crio-lite-status-sandboxes.1",
            "crio-lite-status.1",
            "crio-lite-version.1",
            "crio-lite.1",
        ]
    );
    let containers = std::fs::read_to_string(dir.join("crio-lite-status-containers.1"))
        .expect("the status containers page");
    assert!(
        containers.contains(&format!(
            ".TH crio-lite-status-containers 1  \"crio-lite {}\"",
            env!("CARGO_PKG_VERSION")
        )),
        "{containers}"
    );
    assert!(
        containers.contains("\\-\\-socket"),
        "status's --socket is on its commands' pages"
    );
}

#[test]
fn the_daemons_commands_still_parse_after_the_docs_commands() {
    let out = crio_lite(&["version"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).starts_with("Version:"),
        "{}",
        text(&out.stdout)
    );
    let out = crio_lite(&["frobnicate"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("unrecognized subcommand 'frobnicate'"));
}

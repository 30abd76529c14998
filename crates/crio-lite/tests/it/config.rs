//! Configuration: the printout, errors naming the key, and flags over the file.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use clap::Parser as _;
use crio_lite::Config;
use crio_lite::cli::{Cli, Command as Sub};
use ocicni::CniArgsPolicy;

fn testdata(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata")
        .join(name)
}

#[test]
fn the_defaults_printout_parses_back_to_the_defaults() {
    let text = Config::default().to_commented_toml();
    assert_eq!(
        Config::from_toml(&text, "<printout>").unwrap(),
        Config::default()
    );
    for expected in [
        "socket = \"/var/run/crio-lite/crio-lite.sock\"",
        "network_dir = \"/etc/cni/net.d\"",
        "plugin_dirs = [\"/opt/cni/bin\", \"/usr/lib/cni\"]",
        "cache_dir = \"/var/lib/cni\"",
        "cni_run_dir = \"/run/ocicni\"",
        "state_dir = \"/var/lib/crio-lite\"",
        "run_dir = \"/var/run/crio-lite\"",
        "plugin_timeout = \"60s\"",
        "cni_args_policy = \"kubernetes\"",
        "builtin_default_network = true",
        "# default_network = \"\"",
    ] {
        assert!(
            text.lines().any(|l| l == expected),
            "{expected:?} missing in\n{text}"
        );
    }
    // Every key has a comment right above it.
    let lines: Vec<&str> = text.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        if line.contains(" = ") && !line.starts_with('#') {
            assert!(lines[i - 1].starts_with('#'), "no comment above {line:?}");
        }
    }
}

#[test]
fn invalid_files_are_rejected_naming_the_key() {
    let cases = [
        ("unknown-key.toml", "sokcet"),
        ("wrong-type.toml", "plugin_dirs"),
        ("bad-duration.toml", "plugin_timeout"),
        ("bad-policy.toml", "cni_args_policy"),
    ];
    for (file, key) in cases {
        let err = Config::from_file(&testdata(file)).unwrap_err().to_string();
        assert!(err.contains(key), "{file}: {err}");
        assert!(err.contains(file), "the error names the file: {err}");
    }
    let err = Config::from_file(&testdata("missing.toml"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("missing.toml"), "{err}");
}

#[test]
fn flags_override_the_file_and_keep_the_rest() {
    let file = testdata("partial.toml");
    let cli = Cli::try_parse_from([
        "crio-lite".as_ref(),
        "--config".as_ref(),
        file.as_os_str(),
        "--socket".as_ref(),
        "/run/from-flag.sock".as_ref(),
        "--plugin-dir".as_ref(),
        "/a".as_ref(),
        "--plugin-dir".as_ref(),
        "/b".as_ref(),
        "--plugin-timeout".as_ref(),
        "5s".as_ref(),
        "--cni-args-policy".as_ref(),
        "plain".as_ref(),
        "--builtin-default-network".as_ref(),
        "false".as_ref(),
        "run".as_ref(),
    ])
    .unwrap();
    assert_eq!(cli.command, Some(Sub::Run));
    let config = Config::load(cli.config.as_deref(), &cli.overrides).unwrap();
    assert_eq!(
        config.daemon.socket,
        Path::new("/run/from-flag.sock"),
        "flag over file"
    );
    assert_eq!(config.daemon.log_level, "debug", "file over default");
    assert_eq!(
        config.network.network_dir,
        Path::new("/etc/from-file/net.d")
    );
    assert_eq!(config.network.default_network.as_deref(), Some("podnet"));
    assert_eq!(
        config.network.plugin_dirs,
        vec![PathBuf::from("/a"), PathBuf::from("/b")]
    );
    assert_eq!(config.network.plugin_timeout, Duration::from_secs(5));
    assert_eq!(config.network.cni_args_policy, CniArgsPolicy::Plain);
    assert!(!config.network.builtin_default_network);
    assert_eq!(
        config.daemon.state_dir,
        Config::default().daemon.state_dir,
        "default kept"
    );

    assert!(Cli::try_parse_from(["crio-lite", "--plugin-timeout", "soon"]).is_err());
    assert_eq!(
        Cli::try_parse_from(["crio-lite"]).unwrap().command,
        None,
        "run is the default"
    );
}

#[test]
fn config_subcommand_prints_the_effective_configuration() {
    let output = Command::new(env!("CARGO_BIN_EXE_crio-lite"))
        .arg("--config")
        .arg(testdata("partial.toml"))
        .args(["--state-dir", "/srv/state", "config"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let config = Config::from_toml(&String::from_utf8(output.stdout).unwrap(), "stdout").unwrap();
    assert_eq!(config.daemon.state_dir, Path::new("/srv/state"));
    assert_eq!(config.network.plugin_timeout, Duration::from_secs(90));

    let output = Command::new(env!("CARGO_BIN_EXE_crio-lite"))
        .arg("--config")
        .arg(testdata("unknown-key.toml"))
        .arg("config")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("sokcet") && stderr.contains("unknown-key.toml"),
        "{stderr}"
    );

    let output = Command::new(env!("CARGO_BIN_EXE_crio-lite"))
        .arg("version")
        .output()
        .unwrap();
    assert!(output.status.success());
    // As `crio version` prints it: aligned `Key: value` lines.
    let text = String::from_utf8_lossy(&output.stdout);
    let field = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{key}:")))
            .map_or_else(|| panic!("no {key} in\n{text}"), str::trim)
            .to_owned()
    };
    assert_eq!(field("Version"), env!("CARGO_PKG_VERSION"));
    assert!(["clean", "dirty", "unknown"].contains(&field("GitTreeState").as_str()));
    assert!(field("RustVersion").starts_with("rustc "), "{text}");
    assert_eq!(field("CriApiVersion"), "v1");
    let commit = field("GitCommit");
    assert!(
        commit == "unknown"
            || (commit.len() == 40 && commit.bytes().all(|b| b.is_ascii_hexdigit())),
        "{commit}"
    );
}

/// A FIFO given as the config file used to hang the start; it is refused at once, named.
#[test]
fn a_fifo_as_the_config_file_is_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("crio-lite.conf");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let path = fifo.clone();
    std::thread::spawn(move || {
        let _ = tx.send(
            crio_lite::Config::from_file(&path)
                .map(drop)
                .map_err(|e| e.to_string()),
        );
    });
    let err = rx
        .recv_timeout(std::time::Duration::from_secs(5))
        .expect("reading a FIFO config must not block")
        .unwrap_err();
    assert!(err.contains("not a regular file"), "{err}");
    assert!(err.contains("crio-lite.conf"), "{err}");
}

//! Configuration as an operator meets it: the printouts, `check-config`, errors naming file, line
//! and key, and drop-ins, environment and flags over the file.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
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

/// The binary with `args`, in an environment without CRI-O's or crio-lite's variables.
fn crio_lite(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_crio-lite"));
    for (name, _) in std::env::vars() {
        if name.starts_with("CONTAINER_") || name.starts_with("CRIO_LITE_") {
            command.env_remove(name);
        }
    }
    command.args(args).envs(env.iter().copied());
    command.output().expect("run crio-lite")
}

fn stdout(output: &Output) -> String {
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout.clone()).expect("UTF-8 output")
}

fn path_of(name: &str) -> String {
    testdata(name).display().to_string()
}

#[test]
fn config_default_prints_the_defaults_and_reads_back() {
    // The files, variables and flags are ignored, a broken file included.
    let bad = path_of("unknown-key.toml");
    let out = crio_lite(
        &["-c", &bad, "--root", "/srv", "config", "--default"],
        &[("CONTAINER_LISTEN", "/env.sock")],
    );
    let text = stdout(&out);
    assert_eq!(
        Config::from_toml(&text, "stdout").unwrap(),
        Config::default()
    );
    assert_eq!(text, Config::default().to_commented_toml());
    for expected in [
        "[crio]",
        "root = \"/var/lib/crio-lite\"",
        "runroot = \"/var/run/crio-lite\"",
        "[crio.api]",
        "listen = \"/var/run/crio-lite/crio-lite.sock\"",
        "[crio.runtime]",
        "log_level = \"info\"",
        "namespaces_dir = \"/var/run\"",
        "[crio.network]",
        "network_dir = \"/etc/cni/net.d\"",
        "plugin_dirs = [\"/opt/cni/bin\", \"/usr/lib/cni\"]",
        "cni_default_network = \"\"",
        "[crio.metrics]",
        "enable_metrics = false",
        "metrics_host = \"127.0.0.1\"",
        "metrics_port = 9090",
        "metrics_socket = \"\"",
        "[crio_lite.api]",
        "normalize_authority = true",
        "[crio_lite.network]",
        "cache_dir = \"/var/lib/cni\"",
        "cni_run_dir = \"/run/ocicni\"",
        "plugin_timeout = \"60s\"",
        "cni_args_policy = \"kubernetes\"",
        "builtin_default_network = true",
        "builtin_plugins = \"prefer-binary\"",
    ] {
        assert!(
            text.lines().any(|l| l == expected),
            "{expected:?} missing in\n{text}"
        );
    }
    // Every key has a comment right above it, naming its flag and variable.
    let lines: Vec<&str> = text.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        if line.contains(" = ") && !line.starts_with('#') {
            assert!(lines[i - 1].starts_with("# (--"), "no flag above {line:?}");
        }
    }
}

#[test]
fn config_prints_files_drop_ins_environment_and_flags_layered() {
    let out = crio_lite(
        &[
            "--config",
            &path_of("partial.toml"),
            "--config-dir",
            &path_of("drop-ins"),
            "--root",
            "/srv/state",
            "config",
        ],
        &[
            ("CONTAINER_ROOT", "/env/state"),
            ("CONTAINER_CNI_DEFAULT_NETWORK", "envnet"),
        ],
    );
    let config = Config::from_toml(&stdout(&out), "stdout").unwrap();
    let mut expected = Config::default();
    // partial.toml
    expected.crio.network.network_dir = PathBuf::from("/etc/from-file/net.d");
    expected.crio_lite.network.plugin_timeout = Duration::from_secs(90);
    // drop-ins/10-log-level.conf over partial.toml, 20-listen.conf over both
    expected.crio.runtime.log_level = "warn".to_owned();
    expected.crio.api.listen = PathBuf::from("/run/from-drop-in.sock");
    expected.crio.runtime.namespaces_dir = PathBuf::from("/run/from-drop-in");
    // the environment over the files
    expected.crio.network.cni_default_network = "envnet".to_owned();
    // the flag over the environment
    expected.crio.root = PathBuf::from("/srv/state");
    assert_eq!(config, expected);
}

#[test]
fn check_config_accepts_a_good_configuration_and_names_its_files() {
    let out = crio_lite(
        &[
            "check-config",
            "-c",
            &path_of("partial.toml"),
            "-d",
            &path_of("drop-ins"),
        ],
        &[],
    );
    let text = stdout(&out);
    assert!(text.starts_with("configuration ok"), "{text}");
    for file in ["partial.toml", "10-log-level.conf", "20-listen.conf"] {
        assert!(text.contains(file), "{file} in {text}");
    }
    assert!(!text.contains("30-disabled"), "{text}");
}

#[test]
fn check_config_warns_when_the_policy_file_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.json");
    let policy_text = policy.display().to_string();
    let check = || {
        crio_lite(
            &["check-config", "-c", &path_of("partial.toml")],
            // runc and the node's own manager: no warning but the policy's on any node.
            &[
                ("CONTAINER_SIGNATURE_POLICY", &policy_text),
                ("CONTAINER_DEFAULT_RUNTIME", "runc"),
            ],
        )
    };
    let out = check();
    assert!(stdout(&out).starts_with("configuration ok"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with(&format!(
            "warning: no signature policy: {policy_text} does not exist"
        )),
        "{stderr}"
    );
    assert!(stderr.contains("insecureAcceptAnything"), "{stderr}");

    std::fs::write(&policy, "{").unwrap();
    let out = check();
    assert!(stdout(&out).starts_with("configuration ok"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with(&format!("warning: {policy_text}: invalid signature policy")),
        "{stderr}"
    );

    std::fs::write(&policy, image_store::Policy::ACCEPT_ANYTHING).unwrap();
    let out = check();
    assert!(stdout(&out).starts_with("configuration ok"));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "", "no warning");
}

#[test]
fn check_config_lists_every_mistake_with_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("10-typo.conf"),
        "[crio.network]\nnetwork_dir = \"/etc/cni/net.d\"\nplugin_dir = [\"/opt/cni/bin\"]\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("20-type.conf"),
        "[crio.metrics]\nmetrics_port = \"9090\"\n",
    )
    .unwrap();
    let drop_ins = dir.path().display().to_string();
    let out = crio_lite(
        &[
            "check-config",
            "-c",
            &path_of("unknown-key.toml"),
            "-d",
            &drop_ins,
        ],
        &[("CONTAINER_METRICS_PORT", "x")],
    );
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    let expected = [
        format!(
            "{}:2: unknown key crio.api.sokcet; did you mean crio.api.listen?",
            path_of("unknown-key.toml")
        ),
        format!(
            "{drop_ins}/10-typo.conf:3: unknown key crio.network.plugin_dir; did you mean \
             crio.network.plugin_dirs?"
        ),
        format!(
            "{drop_ins}/20-type.conf:2: key crio.metrics.metrics_port must be an integer, not a \
             string"
        ),
        "environment variable CONTAINER_METRICS_PORT: key crio.metrics.metrics_port: \"x\" is not \
         a whole number"
            .to_owned(),
        "crio-lite: 4 mistakes in the configuration".to_owned(),
    ];
    assert_eq!(lines, expected);

    for (file, key) in [
        (
            "wrong-type.toml",
            "crio.network.plugin_dirs must be an array of strings",
        ),
        (
            "bad-duration.toml",
            "crio_lite.network.plugin_timeout: invalid duration",
        ),
        (
            "bad-policy.toml",
            "crio_lite.network.cni_args_policy: unknown variant `docker`",
        ),
    ] {
        let out = crio_lite(&["check-config", "-c", &path_of(file), "-d", ""], &[]);
        assert_eq!(out.status.code(), Some(1), "{file}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&format!("{}:2: key {key}", path_of(file))),
            "{file}: {stderr}"
        );
    }
    let out = crio_lite(&["check-config", "-c", &path_of("missing.toml")], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("missing.toml: cannot read"));
}

#[test]
fn the_daemon_refuses_a_bad_configuration_before_anything_else() {
    let out = crio_lite(
        &["--config", &path_of("unknown-key.toml"), "-d", "", "config"],
        &[],
    );
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("crio-lite: ") && stderr.contains("unknown-key.toml:2: unknown key"),
        "{stderr}"
    );
}

#[test]
fn flags_are_cri_os() {
    let file = testdata("partial.toml");
    let cli = Cli::try_parse_from([
        "crio-lite".as_ref(),
        "--config".as_ref(),
        file.as_os_str(),
        "--config-dir".as_ref(),
        "".as_ref(),
        "--listen".as_ref(),
        "/run/from-flag.sock".as_ref(),
        "-r".as_ref(),
        "/srv/root".as_ref(),
        "-l".as_ref(),
        "error".as_ref(),
        "--cni-plugin-dir".as_ref(),
        "/a,/b".as_ref(),
        "--cni-plugin-dir".as_ref(),
        "/c".as_ref(),
        "--plugin-timeout".as_ref(),
        "5s".as_ref(),
        "--cni-args-policy".as_ref(),
        "plain".as_ref(),
        "--builtin-default-network=false".as_ref(),
        "--enable-metrics".as_ref(),
        "--metrics-port".as_ref(),
        "9191".as_ref(),
        "run".as_ref(),
    ])
    .unwrap();
    assert_eq!(cli.command, Some(Sub::Run));
    let config = cli
        .loader()
        .with_env(std::iter::empty::<(String, String)>())
        .load()
        .unwrap()
        .config;
    assert_eq!(config.crio.api.listen, Path::new("/run/from-flag.sock"));
    assert_eq!(config.crio.root, Path::new("/srv/root"));
    assert_eq!(config.crio.runtime.log_level, "error");
    assert_eq!(
        config.crio.network.network_dir,
        Path::new("/etc/from-file/net.d")
    );
    assert_eq!(config.default_network(), Some("podnet"));
    assert_eq!(
        config.crio.network.plugin_dirs,
        ["/a", "/b", "/c"].map(PathBuf::from)
    );
    assert_eq!(
        config.crio_lite.network.plugin_timeout,
        Duration::from_secs(5)
    );
    assert_eq!(
        config.crio_lite.network.cni_args_policy,
        CniArgsPolicy::Plain
    );
    assert!(!config.crio_lite.network.builtin_default_network);
    assert!(config.crio.metrics.enable_metrics);
    assert_eq!(config.crio.metrics.metrics_port, 9191);
    assert_eq!(
        config.crio.runroot,
        Config::default().crio.runroot,
        "default kept"
    );

    assert!(Cli::try_parse_from(["crio-lite", "--plugin-timeout", "soon"]).is_err());
    assert!(Cli::try_parse_from(["crio-lite", "--metrics-port", "65536"]).is_err());
    assert!(Cli::try_parse_from(["crio-lite", "--cni-args-policy", "docker"]).is_err());
    // The old names are gone (0.x: no compatibility).
    for old in [
        "--socket",
        "--state-dir",
        "--run-dir",
        "--network-dir",
        "--plugin-dir",
    ] {
        assert!(
            Cli::try_parse_from(["crio-lite", old, "/x"]).is_err(),
            "{old}"
        );
    }
    assert_eq!(
        Cli::try_parse_from(["crio-lite"]).unwrap().command,
        None,
        "run is the default"
    );
}

/// `crio-lite version` as `crio version` prints it: aligned `Key: value` lines.
#[test]
fn version_is_reported_as_crio_does() {
    let version = crio_lite(&["version"], &[]);
    let text = stdout(&version);
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

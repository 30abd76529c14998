use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Parser as _;
use ocicni::{CniArgsPolicy, Preference};
use proptest::prelude::*;

use super::*;
use crate::cli::Cli;

/// A main file, drop-ins, variables and flags, and what the loaded configuration must hold.
struct Case {
    name: &'static str,
    main: &'static str,
    drop_ins: &'static [(&'static str, &'static str)],
    env: &'static [(&'static str, &'static str)],
    flags: &'static [&'static str],
    check: fn(&Config),
}

fn load(case: &Case) -> Result<Loaded> {
    let dir = tempfile::tempdir().unwrap();
    let main = dir.path().join("crio-lite.conf");
    std::fs::write(&main, case.main).unwrap();
    let drop_ins = dir.path().join("crio-lite.conf.d");
    std::fs::create_dir(&drop_ins).unwrap();
    for (name, text) in case.drop_ins {
        std::fs::write(drop_ins.join(name), text).unwrap();
    }
    let mut args = vec![
        "crio-lite".to_owned(),
        "-c".to_owned(),
        main.display().to_string(),
    ];
    args.extend(["-d".to_owned(), drop_ins.display().to_string()]);
    args.extend(case.flags.iter().map(|f| (*f).to_owned()));
    let cli = Cli::try_parse_from(args).unwrap_or_else(|e| panic!("{}: {e}", case.name));
    cli.loader().with_env(case.env.iter().copied()).load()
}

#[expect(
    clippy::too_many_lines,
    reason = "a table: one case per layering rule, read top to bottom"
)]
fn layering_cases() -> Vec<Case> {
    vec![
        Case {
            name: "drop-ins apply in lexical order, the last one winning",
            main: "[crio.runtime]\nlog_level = \"error\"\n",
            drop_ins: &[
                ("20-b.conf", "[crio.runtime]\nlog_level = \"warn\"\n"),
                ("10-a.conf", "[crio.runtime]\nlog_level = \"debug\"\n"),
                ("30-c.toml", "[crio.runtime]\nlog_level = \"trace\"\n"),
                (".40-hidden.conf", "[crio.runtime]\nlog_level = \"trace\"\n"),
            ],
            env: &[],
            flags: &[],
            check: |c| assert_eq!(c.crio.runtime.log_level, "warn"),
        },
        Case {
            name: "a drop-in overrides one key of a table, not the table",
            main: "[crio.runtime]\nlog_level = \"error\"\nnamespaces_dir = \"/srv/ns\"\n\
                   [crio.network]\nplugin_dirs = [\"/main\"]\n",
            drop_ins: &[("10-a.conf", "[crio.runtime]\nlog_level = \"debug\"\n")],
            env: &[],
            flags: &[],
            check: |c| {
                assert_eq!(c.crio.runtime.log_level, "debug");
                assert_eq!(c.crio.runtime.namespaces_dir, Path::new("/srv/ns"));
                assert_eq!(c.crio.network.plugin_dirs, [PathBuf::from("/main")]);
                assert_eq!(c.netns_dir(), Path::new("/srv/ns/netns"));
            },
        },
        Case {
            name: "a drop-in's list replaces the file's",
            main: "[crio.network]\nplugin_dirs = [\"/a\", \"/b\"]\n",
            drop_ins: &[("10-a.conf", "crio.network.plugin_dirs = [\"/c\"]\n")],
            env: &[],
            flags: &[],
            check: |c| assert_eq!(c.crio.network.plugin_dirs, [PathBuf::from("/c")]),
        },
        Case {
            name: "the environment overrides the files",
            main: "[crio.api]\nlisten = \"/file.sock\"\n[crio.metrics]\nmetrics_port = 1\n",
            drop_ins: &[("10-a.conf", "[crio.api]\nlisten = \"/drop-in.sock\"\n")],
            env: &[
                ("CONTAINER_LISTEN", "/env.sock"),
                ("CONTAINER_METRICS_PORT", "9191"),
                ("CONTAINER_ENABLE_METRICS", "true"),
                ("CONTAINER_CNI_PLUGIN_DIR", "/p1,/p2"),
                ("CRIO_LITE_PLUGIN_TIMEOUT", "5s"),
                ("CONTAINER_LOG_LEVEL", ""),
                ("CRIO_LITE_BUILTIN_PLUGINS", "never"),
            ],
            flags: &[],
            check: |c| {
                assert_eq!(c.crio_lite.network.builtin_plugins, Preference::Never);
                assert_eq!(c.crio.api.listen, Path::new("/env.sock"));
                assert_eq!(c.crio.metrics.metrics_port, 9191);
                assert!(c.crio.metrics.enable_metrics);
                assert_eq!(
                    c.crio.network.plugin_dirs,
                    [PathBuf::from("/p1"), PathBuf::from("/p2")]
                );
                assert_eq!(c.crio_lite.network.plugin_timeout, Duration::from_secs(5));
                assert_eq!(
                    c.crio.runtime.log_level, "info",
                    "an empty variable is unset"
                );
            },
        },
        Case {
            name: "flags override the environment",
            main: "[crio.api]\nlisten = \"/file.sock\"\n",
            drop_ins: &[],
            env: &[
                ("CONTAINER_LISTEN", "/env.sock"),
                ("CONTAINER_ENABLE_METRICS", "true"),
                ("CONTAINER_CNI_PLUGIN_DIR", "/env"),
            ],
            flags: &[
                "--listen",
                "/flag.sock",
                "--enable-metrics=false",
                "--cni-plugin-dir",
                "/f1",
                "--cni-plugin-dir",
                "/f2",
                "--cni-args-policy",
                "plain",
                "--builtin-default-network=false",
                "--normalize-authority=f",
                "--builtin-plugins",
                "prefer-builtin",
            ],
            check: |c| {
                assert_eq!(c.crio.api.listen, Path::new("/flag.sock"));
                assert!(!c.crio.metrics.enable_metrics);
                assert_eq!(
                    c.crio.network.plugin_dirs,
                    [PathBuf::from("/f1"), PathBuf::from("/f2")]
                );
                assert_eq!(c.crio_lite.network.cni_args_policy, CniArgsPolicy::Plain);
                assert!(!c.crio_lite.network.builtin_default_network);
                assert!(!c.crio_lite.api.normalize_authority);
                assert_eq!(
                    c.crio_lite.network.builtin_plugins,
                    Preference::PreferBuiltin
                );
            },
        },
        Case {
            name: "a bare boolean flag is true",
            main: "",
            drop_ins: &[],
            env: &[("CONTAINER_ENABLE_METRICS", "false")],
            flags: &["--enable-metrics"],
            check: |c| assert!(c.crio.metrics.enable_metrics),
        },
        Case {
            name: "CONTAINER_CONFIG_DIR is not read when -d is given",
            main: "",
            drop_ins: &[],
            env: &[("CONTAINER_CONFIG_DIR", "/nonexistent/crio-lite.conf.d")],
            flags: &[],
            check: |c| assert_eq!(c, &Config::default()),
        },
    ]
}

#[test]
fn layers_apply_in_order() {
    let cases = layering_cases();
    for case in &cases {
        let loaded = load(case).unwrap_or_else(|e| panic!("{}: {e}", case.name));
        (case.check)(&loaded.config);
    }
}

#[test]
fn only_conf_files_are_read_in_lexical_order() {
    let case = Case {
        name: "files",
        main: "",
        drop_ins: &[
            ("b.conf", ""),
            ("a.conf", ""),
            ("10.conf", ""),
            ("c.conf.bak", ""),
            (".d.conf", ""),
        ],
        env: &[],
        flags: &[],
        check: |_| {},
    };
    let loaded = load(&case).unwrap();
    let names: Vec<String> = loaded
        .files
        .iter()
        .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["crio-lite.conf", "10.conf", "a.conf", "b.conf"]);
}

#[test]
fn mistakes_name_the_place_the_key_and_a_fix() {
    // (text, every issue as printed, origin `f`)
    let cases: &[(&str, &[&str])] = &[
        (
            "[crio.api]\nsokcet = \"/x\"\n",
            &["f:2: unknown key crio.api.sokcet; did you mean crio.api.listen?"],
        ),
        (
            "[crio.network]\n\nplugin_dir = [\"/x\"]\n",
            &["f:3: unknown key crio.network.plugin_dir; did you mean crio.network.plugin_dirs?"],
        ),
        (
            "[crio]\nlisten = \"/x\"\n",
            &["f:2: unknown key crio.listen; did you mean crio.api.listen?"],
        ),
        (
            "[crio.netwrok]\nnetwork_dir = \"/x\"\n",
            &["f:1: unknown table crio.netwrok; did you mean crio.network?"],
        ),
        (
            "[crio]\nfrobnicate = 1\n",
            &["f:2: unknown key crio.frobnicate"],
        ),
        (
            "[crio.network]\nplugin_dirs = \"/opt/cni/bin\"\n",
            &["f:2: key crio.network.plugin_dirs must be an array of strings, not a string"],
        ),
        (
            "[crio.metrics]\nenable_metrics = \"yes\"\nmetrics_port = \"9090\"\n",
            &[
                "f:2: key crio.metrics.enable_metrics must be a boolean (true or false), not a \
                 string",
                "f:3: key crio.metrics.metrics_port must be an integer, not a string",
            ],
        ),
        (
            "crio.api = 1\n",
            &["f:1: key crio.api must be a table, not an integer"],
        ),
        (
            "[crio_lite.network]\nplugin_timeout = \"soon\"\n",
            &["f:2: key crio_lite.network.plugin_timeout: invalid duration \"soon\""],
        ),
        (
            "[crio_lite.network]\ncni_args_policy = \"docker\"\n",
            &["f:2: key crio_lite.network.cni_args_policy: unknown variant `docker`"],
        ),
        (
            "[crio_lite.network]\nbuiltin_plugins = \"sometimes\"\n",
            &[
                "f:2: key crio_lite.network.builtin_plugins: invalid built-in plugin preference \
               \"sometimes\": expected prefer-binary, prefer-builtin or never",
            ],
        ),
        (
            "[crio_lite.network]\nbuiltin_plugins = true\n",
            &["f:2: key crio_lite.network.builtin_plugins must be a string"],
        ),
        (
            "[crio.metrics]\nmetrics_port = 65536\n",
            &["f:2: key crio.metrics.metrics_port: invalid value: integer `65536`"],
        ),
        (
            "[crio_lite.network]\nplugin_timeout = \"0s\"\n",
            &["f:2: key crio_lite.network.plugin_timeout: must be longer than zero"],
        ),
        (
            "[crio.network]\nplugin_dirs = []\n",
            &["f:2: key crio.network.plugin_dirs: must name at least one directory"],
        ),
        ("[crio\n", &["f:1: invalid TOML: "]),
    ];
    for (text, expected) in cases {
        let issues = match Config::from_toml(text, "f") {
            Err(Error::Config { issues }) => issues,
            other => panic!("{text:?} gave {other:?}"),
        };
        let printed: Vec<String> = issues.iter().map(ToString::to_string).collect();
        assert_eq!(printed.len(), expected.len(), "{text:?}: {printed:#?}");
        for (issue, want) in printed.iter().zip(*expected) {
            assert!(
                issue.starts_with(want),
                "{text:?}: {issue:?} is not {want:?}…"
            );
        }
    }
}

#[test]
fn mistakes_in_the_environment_and_flags_name_them() {
    let dir = tempfile::tempdir().unwrap();
    let loader = Loader::new(
        Some(PathBuf::new()),
        Some(PathBuf::new()),
        Overrides {
            plugin_timeout: Some(Duration::ZERO),
            ..Overrides::default()
        },
    )
    .with_env([
        ("CONTAINER_METRICS_PORT", "http"),
        ("CONTAINER_ENABLE_METRICS", "maybe"),
    ]);
    let Err(Error::Config { issues }) = loader.load() else {
        panic!("mistakes must fail");
    };
    let printed: Vec<String> = issues.iter().map(ToString::to_string).collect();
    assert_eq!(
        printed,
        [
            "environment variable CONTAINER_ENABLE_METRICS: key crio.metrics.enable_metrics: \
             invalid boolean \"maybe\": use true or false",
            "environment variable CONTAINER_METRICS_PORT: key crio.metrics.metrics_port: \
             \"http\" is not a whole number",
            "flag --plugin-timeout: key crio_lite.network.plugin_timeout: must be longer than zero",
        ]
    );
    let missing = dir.path().join("missing.conf");
    let err = Loader::new(Some(missing), Some(PathBuf::new()), Overrides::default())
        .with_env(std::iter::empty::<(String, String)>())
        .load()
        .unwrap_err()
        .to_string();
    assert!(err.contains("missing.conf: cannot read"), "{err}");
}

#[test]
fn every_file_is_checked_and_every_mistake_reported() {
    let case = Case {
        name: "two bad drop-ins",
        main: "[crio]\nroot = 1\n",
        drop_ins: &[
            ("10-a.conf", "[crio.api]\nlissen = \"/x\"\n"),
            ("20-b.conf", "[x\n"),
        ],
        env: &[],
        flags: &[],
        check: |_| {},
    };
    let err = load(&case).unwrap_err().to_string();
    for part in [
        "crio-lite.conf:2: key crio.root must be a string, not an integer",
        "10-a.conf:2: unknown key crio.api.lissen; did you mean crio.api.listen?",
        "20-b.conf:1: invalid TOML",
    ] {
        assert!(err.contains(part), "{part:?} in {err}");
    }
}

#[test]
fn the_printout_reads_back_the_same() {
    let mut config = Config::default();
    config.crio.network.cni_default_network = "pod \"net\"\\".to_owned();
    config.crio_lite.network.plugin_timeout = Duration::from_millis(250);
    config.crio.metrics.metrics_socket = PathBuf::from("/run/m.sock");
    for config in [Config::default(), config] {
        let text = config.to_commented_toml();
        assert_eq!(
            Config::from_toml(&text, "printout").ok(),
            Some(config),
            "{text}"
        );
    }
}

#[test]
fn keys_are_the_fields_and_their_flags_exist() {
    let mut fields = Vec::new();
    load::paths_of_leaves(
        &toml::Table::try_from(Config::default()).unwrap(),
        "",
        &mut fields,
    );
    let mut listed: Vec<String> = KEYS.iter().map(|k| k.path.to_owned()).collect();
    fields.sort();
    listed.sort();
    assert_eq!(fields, listed, "KEYS lists every field once");
    let command = <Cli as clap::CommandFactory>::command();
    for key in KEYS {
        let long = key.flag.trim_start_matches("--");
        let arg = command.get_arguments().find(|a| a.get_long() == Some(long));
        let arg = arg.unwrap_or_else(|| panic!("no flag {} for {}", key.flag, key.path));
        let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
        assert!(
            help.contains(key.path),
            "{}'s help names {}: {help}",
            key.flag,
            key.path
        );
        assert!(
            help.contains(key.env),
            "{}'s help names {}: {help}",
            key.flag,
            key.env
        );
        // CRI-O's keys have CRI-O's variables; crio-lite's own keys have CRIO_LITE_ ones, unless
        // CRI-O has the flag (not the key), whose variable then works as it does for CRI-O.
        let crio_flag = key.doc.contains(&format!("CRI-O's {} flag", key.flag));
        assert_eq!(
            key.crio || crio_flag,
            key.env.starts_with("CONTAINER_"),
            "{}",
            key.path
        );
    }
}

#[test]
fn changed_keys_are_named() {
    let mut other = Config::default();
    other.crio.runtime.log_level = "debug".to_owned();
    other.crio.network.plugin_dirs.push(PathBuf::from("/x"));
    assert_eq!(
        Config::default().changed_keys(&other),
        ["crio.runtime.log_level", "crio.network.plugin_dirs"]
    );
}

#[test]
fn edit_distance() {
    for (a, b, d) in [
        ("", "", 0),
        ("listen", "listen", 0),
        ("sokcet", "socket", 2),
        ("a", "", 1),
    ] {
        assert_eq!(suggest::distance(a, b), d, "{a} {b}");
    }
}

#[test]
fn durations_round_trip() {
    for (text, millis) in [
        ("500ms", 500),
        ("60s", 60_000),
        ("2m", 120_000),
        ("1h", 3_600_000),
        ("7", 7000),
        // One syntax with ocicnitool's --timeout (ocicni::duration): decimals are fine.
        ("1.5s", 1500),
    ] {
        assert_eq!(
            parse_duration(text),
            Ok(Duration::from_millis(millis)),
            "{text}"
        );
    }
    assert_eq!(format_duration(Duration::from_millis(1500)), "1500ms");
    assert_eq!(format_duration(Duration::from_secs(60)), "60s");
    for bad in ["", "s", "1d", "-1s", "1.5.1s", "99999999999999999999h"] {
        assert!(parse_duration(bad).is_err(), "{bad}");
    }
}

fn path() -> impl Strategy<Value = PathBuf> {
    "/[a-z0-9 ._\"'\\\\#=\\[\\]-]{0,12}".prop_map(PathBuf::from)
}

fn text() -> impl Strategy<Value = String> {
    "[a-z0-9 ._\"'\\\\#=,\\[\\]\u{e9}-]{1,12}".prop_filter("not blank", |s| !s.trim().is_empty())
}

/// What `[crio_lite]` is made of: (authority, log format, journald), (network).
type LiteParts = (
    (bool, LogFormat, bool),
    (PathBuf, PathBuf, u64, bool, bool, Preference),
);

fn lite_parts() -> impl Strategy<Value = LiteParts> {
    (
        (
            any::<bool>(),
            prop_oneof![Just(LogFormat::Text), Just(LogFormat::Json)],
            any::<bool>(),
        ),
        (
            path(),
            path(),
            1..10_000_000u64,
            any::<bool>(),
            any::<bool>(),
            prop_oneof![
                Just(Preference::PreferBinary),
                Just(Preference::PreferBuiltin),
                Just(Preference::Never)
            ],
        ),
    )
}

fn config() -> impl Strategy<Value = Config> {
    let crio = (
        (path(), path(), path(), text(), path(), path()),
        (proptest::collection::vec(path(), 1..4), "[a-z\"-]{0,8}"),
        (
            any::<bool>(),
            text(),
            any::<u16>(),
            prop_oneof![Just(PathBuf::new()), path()],
        ),
        (
            prop_oneof![Just(PathBuf::new()), path()],
            proptest::collection::vec("[a-z0-9.-]{1,10}(:[0-9]{1,5})?", 0..3),
            prop_oneof![Just(PathBuf::new()), path()],
            path(),
            prop_oneof![
                Just(String::new()),
                Just("overlay".to_owned()),
                Just("vfs".to_owned())
            ],
        ),
    );
    let lite = lite_parts();
    (crio, lite).prop_map(|(crio, lite)| {
        let (
            (root, runroot, listen, log_level, namespaces_dir, network_dir),
            network,
            metrics,
            image,
        ) = crio;
        let (
            (normalize_authority, log_format, journald),
            (cache_dir, cni_run_dir, millis, plain, builtin, preference),
        ) = lite;
        Config {
            crio: CrioTable {
                root,
                runroot,
                storage_driver: image.4,
                api: ApiTable {
                    listen,
                    ..ApiTable::default()
                },
                runtime: RuntimeTable {
                    log_level,
                    namespaces_dir,
                    ..RuntimeTable::default()
                },
                image: ImageTable {
                    pull_progress_timeout: Duration::from_millis(millis / 3),
                    global_auth_file: image.0,
                    insecure_registries: image.1,
                    signature_policy: image.2,
                },
                network: NetworkTable {
                    network_dir,
                    plugin_dirs: network.0,
                    cni_default_network: network.1,
                },
                metrics: MetricsTable {
                    enable_metrics: metrics.0,
                    metrics_host: metrics.1,
                    metrics_port: metrics.2,
                    metrics_socket: metrics.3,
                },
            },
            crio_lite: CrioLiteTable {
                runtime: LiteRuntimeTable {
                    log_format,
                    log_journald: journald,
                },
                api: LiteApiTable {
                    normalize_authority,
                },
                network: LiteNetworkTable {
                    cache_dir,
                    cni_run_dir,
                    plugin_timeout: Duration::from_millis(millis),
                    cni_args_policy: if plain {
                        CniArgsPolicy::Plain
                    } else {
                        CniArgsPolicy::Kubernetes
                    },
                    builtin_default_network: builtin,
                    builtin_plugins: preference,
                },
                image: LiteImageTable {
                    registries_conf: image.3,
                    pull_min_rate: millis,
                },
            },
        }
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn any_valid_configuration_prints_and_reads_back(config in config()) {
        prop_assume!(config.validate().is_ok());
        let text = config.to_commented_toml();
        prop_assert_eq!(Config::from_toml(&text, "printout").ok(), Some(config), "{}", text);
    }
}

#[test]
fn runtime_handlers_are_built_in_added_and_replaced_per_key() {
    let text = "[crio.runtime]\ndefault_runtime = \"kata\"\n\
                [crio.runtime.runtimes.kata]\nruntime_path = \"/opt/kata/bin/kata-runtime\"\n\
                [crio.runtime.runtimes.runc]\nruntime_root = \"/run/other-runc\"\n";
    let config = Config::from_toml(text, "<string>").unwrap();
    let handlers = config.runtime_handlers();
    let names: Vec<&str> = handlers.keys().map(String::as_str).collect();
    assert_eq!(names, ["crun", "kata", "runc"]);
    assert_eq!(
        handlers["kata"].runtime_path,
        Path::new("/opt/kata/bin/kata-runtime")
    );
    assert_eq!(handlers["kata"].runtime_root, Path::new("/run/kata"));
    assert_eq!(handlers["kata"].monitor_path, Path::new("/usr/bin/conmon"));
    // A table named like a built-in keeps the built-in's binary, replacing only its root.
    assert_eq!(handlers["runc"].runtime_path, Path::new("/usr/sbin/runc"));
    assert_eq!(handlers["runc"].runtime_root, Path::new("/run/other-runc"));
    assert_eq!(handlers["crun"].runtime_root, Path::new("/run/crun"));
    // The printout reads back the same.
    let printed = config.to_commented_toml();
    assert_eq!(
        Config::from_toml(&printed, "printout").unwrap(),
        config,
        "{printed}"
    );
}

/// Issue #21: a handler's `allowed_annotations` is read from a file, kept per handler, printed,
/// and holds only annotations runtimes interpret.
#[test]
fn allowed_annotations_are_a_handlers_and_printed() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("crio-lite.conf");
    std::fs::write(
        &file,
        "[crio.runtime.runtimes.crun]\nallowed_annotations = [\"run.oci.\", \"io.kubernetes.cri-o.Devices\"]\n",
    )
    .unwrap();
    let config = Config::from_file(&file).unwrap();
    let handlers = config.runtime_handlers();
    assert_eq!(
        handlers["crun"].allowed_annotations,
        ["run.oci.", "io.kubernetes.cri-o.Devices"]
    );
    assert!(
        handlers["runc"].allowed_annotations.is_empty(),
        "none by default"
    );
    assert_eq!(handlers["crun"].runtime_path, Path::new("/usr/bin/crun"));
    let printed = config.to_commented_toml();
    assert!(
        printed.contains(
            "[crio.runtime.runtimes.crun]\nallowed_annotations = [\"run.oci.\", \"io.kubernetes.cri-o.Devices\"]\n"
        ),
        "{printed}"
    );
    assert!(printed.contains("# allowed_annotations ("), "{printed}");
    assert_eq!(Config::from_toml(&printed, "printout").unwrap(), config);

    let err = Config::from_toml(
        "[crio.runtime.runtimes.crun]\nallowed_annotations = [\"app.kubernetes.io/name\"]\n",
        "<string>",
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("crun: allowed_annotations: \"app.kubernetes.io/name\" is not an annotation"),
        "{err}"
    );
}

#[test]
fn runtime_handler_mistakes_name_the_key() {
    for (text, wanted) in [
        (
            "[crio.runtime.runtimes.kata]\nruntime_pth = \"/x\"\n",
            "unknown key crio.runtime.runtimes.kata.runtime_pth",
        ),
        (
            "[crio.runtime]\ndefault_runtime = \"youki\"\n",
            "key crio.runtime.default_runtime: \"youki\" is neither a built-in runtime",
        ),
        (
            "[crio.runtime.runtimes.kata]\nruntime_type = \"vm\"\n",
            "kata: runtime_type \"vm\" is not supported",
        ),
        (
            "[crio.runtime.runtimes.kata]\nruntime_path = \"kata\"\n",
            "kata: kata is not an absolute path",
        ),
        (
            "[crio.runtime.runtimes]\nkata = 3\n",
            "key crio.runtime.runtimes.kata must be a table",
        ),
        (
            "[crio.runtime.runtimes.\"a/b\"]\n",
            "\"a/b\" is not a runtime handler name",
        ),
    ] {
        let err = Config::from_toml(text, "<string>").unwrap_err().to_string();
        assert!(err.contains(wanted), "{text}: {err}");
    }
}

#[test]
fn node_warnings_name_a_manager_that_does_not_fit_and_crun_on_hybrid() {
    use oci_container::CgroupVersion;
    let with = |text: &str| Config::from_toml(text, "<string>").expect("valid configuration");
    let systemd = with("[crio.runtime]\ncgroup_manager = \"systemd\"\n");
    let cgroupfs = with("[crio.runtime]\ncgroup_manager = \"cgroupfs\"\n");
    let warnings = systemd.node_warnings_for(false, Some(CgroupVersion::V2));
    assert!(
        warnings.len() == 1 && warnings[0].contains("systemd is not this node's init"),
        "{warnings:?}"
    );
    assert!(
        systemd
            .node_warnings_for(true, Some(CgroupVersion::V2))
            .is_empty()
    );
    let warnings = cgroupfs.node_warnings_for(true, Some(CgroupVersion::V2));
    assert!(
        warnings.len() == 1 && warnings[0].contains("two managers"),
        "{warnings:?}"
    );
    // crun is the default runtime; on a hybrid node it cannot run, runc can.
    let warnings = cgroupfs.node_warnings_for(false, Some(CgroupVersion::Hybrid));
    assert!(
        warnings.len() == 1 && warnings[0].contains("runc runs here"),
        "{warnings:?}"
    );
    let runc = with("[crio.runtime]\ncgroup_manager = \"cgroupfs\"\ndefault_runtime = \"runc\"\n");
    assert!(
        runc.node_warnings_for(false, Some(CgroupVersion::Hybrid))
            .is_empty()
    );
}

#[test]
fn cgroup_keys_are_checked() {
    for (text, expected) in [
        (
            "[crio.runtime]\ncgroup_manager = \"SystemD\"\n",
            "key crio.runtime.cgroup_manager: \"SystemD\" is neither",
        ),
        (
            "[crio.runtime]\ncgroup_manager = \"cgroupfs\"\nconmon_cgroup = \"system.slice\"\n",
            "needs the systemd manager",
        ),
        (
            "[crio.runtime]\ncgroup_manager = \"systemd\"\nconmon_cgroup = \"/system\"\n",
            "not a systemd slice",
        ),
    ] {
        let err = Config::from_toml(text, "<string>").unwrap_err().to_string();
        assert!(err.contains(expected), "{text}: {err}");
    }
    let config = Config::from_toml(
        "[crio.runtime]\ncgroup_manager = \"systemd\"\nconmon_cgroup = \"system.slice\"\n",
        "<string>",
    )
    .expect("valid");
    assert_eq!(
        config.cgroups(),
        (
            oci_container::CgroupManager::Systemd,
            oci_container::ConmonCgroup::Slice("system.slice".to_owned())
        )
    );
}

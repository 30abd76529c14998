use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use oci_spec::runtime::{Hook, Process, Spec};
use proptest::prelude::*;

use super::*;

fn testdata(dir: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata/hooks")
        .join(dir)
}

fn names<'a>(paths: impl IntoIterator<Item = &'a Path>) -> Vec<String> {
    paths
        .into_iter()
        .map(|p| {
            let dir = p.parent().and_then(Path::file_name).unwrap_or_default();
            format!(
                "{}/{}",
                dir.to_string_lossy(),
                p.file_name().unwrap_or_default().to_string_lossy()
            )
        })
        .collect()
}

fn spec_running(command: &str) -> Spec {
    let mut process = Process::default();
    process.set_args(Some(vec![command.to_owned(), "--flag".to_owned()]));
    let mut spec = Spec::default();
    spec.set_hooks(None).set_process(Some(process));
    spec
}

fn annotations(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|&(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// The second argument of each hook: the fixtures name themselves there.
fn labels(hooks: Option<&Vec<Hook>>) -> Vec<String> {
    hooks
        .into_iter()
        .flatten()
        .map(|h| {
            h.args()
                .as_ref()
                .and_then(|a| a.get(1))
                .cloned()
                .unwrap_or_default()
        })
        .collect()
}

#[test]
fn later_directories_mask_files_of_the_same_name_and_order_is_by_lower_cased_name() {
    let (hooks, errors) = Hooks::load(&[testdata("usr"), testdata("etc")]);
    assert_eq!(
        names(hooks.files()),
        [
            "usr/01-always.json",
            "etc/02-override.json",
            // usr's 03-masked.json is refused if read: masked, it is not even read
            "etc/03-masked.json",
            "usr/10-bind-mounts.json",
            "usr/20-annotations.json",
            "usr/30-commands.json",
            "usr/40-all-conditions.json",
            "usr/a-lower.json",
            "usr/B-upper.json",
        ]
    );
    assert_eq!(hooks.len(), 9);
    // the bad file beside the good ones is reported, naming it; notes.txt is not a hook file
    let errors: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(
        errors,
        [format!(
            "hook {}: version: missing (the 0.1.0 schema is not supported)",
            testdata("usr/50-old-schema.json").display()
        )]
    );

    // alone, usr's own 03-masked.json is read and refused
    let (hooks, errors) = Hooks::load(&[testdata("usr")]);
    assert_eq!(hooks.len(), 8);
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(
        errors[0]
            .to_string()
            .contains("03-masked.json: hook.path: relative/not/read is not absolute"),
        "{}",
        errors[0]
    );
    // a missing directory is no error
    let (hooks, errors) = Hooks::load(&[testdata("no-such-dir"), testdata("etc")]);
    assert_eq!((hooks.len(), errors.len()), (2, 0));
}

#[test]
fn each_when_condition_and_their_conjunction() {
    let (hooks, _) = Hooks::load(&[testdata("usr"), testdata("etc")]);
    let always = [
        "usr/01-always.json",
        "etc/02-override.json",
        "usr/a-lower.json",
        "usr/B-upper.json",
    ];
    // (args[0], annotations, bind mounts, files injected besides the `always` ones)
    type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], bool, &'a [&'a str]);
    let cases: &[Case<'_>] = &[
        ("/bin/app", &[], false, &[]),
        ("/bin/app", &[], true, &["usr/10-bind-mounts.json"]),
        ("/sbin/init", &[], false, &["usr/30-commands.json"]),
        ("/usr/bin/systemd", &[], false, &["usr/30-commands.json"]),
        // patterns are unanchored unless they say so
        ("/usr/bin/systemd-run", &[], false, &[]),
        ("/init/x", &[], false, &[]),
        (
            "/bin/app",
            &[
                ("io.example.gpu", "yes"),
                ("io.kubernetes.pod.namespace", "prod-eu"),
            ],
            false,
            &["usr/20-annotations.json"],
        ),
        // every annotation pair must match some annotation
        ("/bin/app", &[("io.example.gpu", "yes")], false, &[]),
        (
            "/bin/app",
            &[
                ("io.example.gpu", "no"),
                ("io.kubernetes.pod.namespace", "prod"),
            ],
            false,
            &[],
        ),
        (
            "/bin/app",
            &[
                ("xio.example.gpu", "yes"),
                ("io.kubernetes.pod.namespace", "prod"),
            ],
            false,
            &[],
        ),
        // all of always, hasBindMounts, commands and annotations
        (
            "/bin/sh",
            &[("audit", "")],
            true,
            &["usr/10-bind-mounts.json", "usr/40-all-conditions.json"],
        ),
        ("/bin/sh", &[("audit", "")], false, &[]),
        (
            "/bin/bash",
            &[("audit", "")],
            true,
            &["usr/10-bind-mounts.json"],
        ),
        ("/bin/sh", &[], true, &["usr/10-bind-mounts.json"]),
    ];
    for &(command, pairs, binds, extra) in cases {
        let mut spec = spec_running(command);
        let injected = names(hooks.apply(&mut spec, &annotations(pairs), binds));
        let mut want: Vec<&str> = always.to_vec();
        want.extend_from_slice(extra);
        let order = |n: &str| names(hooks.files()).iter().position(|f| f == n);
        want.sort_by_key(|n| order(n));
        assert_eq!(injected, want, "{command} {pairs:?} {binds}");
    }
}

#[test]
fn hooks_go_to_their_stages_in_file_order_after_the_specs_own() {
    let (hooks, _) = Hooks::load(&[testdata("usr"), testdata("etc")]);
    let mut spec = spec_running("/bin/sh");
    let mut own = Hook::default();
    own.set_path("/own".into())
        .set_args(Some(vec!["own".into(), "own".into()]));
    let mut existing = oci_spec::runtime::Hooks::default();
    existing.set_poststop(Some(vec![own]));
    spec.set_hooks(Some(existing));

    hooks.apply(&mut spec, &annotations(&[("audit", "x")]), true);
    let h = spec.hooks().as_ref().unwrap();
    // prestart is injected as createRuntime, as containers/common does
    assert_eq!(
        labels(h.create_runtime().as_ref()),
        ["always", "from-etc", "a", "B"]
    );
    assert_eq!(labels(h.create_container().as_ref()), ["binds"]);
    assert_eq!(labels(h.start_container().as_ref()), Vec::<String>::new());
    assert_eq!(labels(h.poststart().as_ref()), Vec::<String>::new());
    assert_eq!(labels(h.poststop().as_ref()), ["own", "always", "all"]);
    // prestart (deprecated in the runtime spec) stays empty: nothing is written there
    let prestart = h.prestart().clone();
    assert_eq!(prestart, None);
    // the hook as written: path, args, env, timeout
    let always = &h.create_runtime().as_ref().unwrap()[0];
    assert_eq!(always.path(), Path::new("/bin/true"));
    assert_eq!(
        always.env().as_deref(),
        Some(&["HOOK=always".to_owned()][..])
    );
    assert_eq!(always.timeout(), Some(5));

    // a spec without a process matches no `commands` condition
    let mut spec = Spec::default();
    spec.set_process(None).set_hooks(None);
    let injected = names(hooks.apply(&mut spec, &BTreeMap::new(), false));
    assert!(!injected.contains(&"usr/30-commands.json".to_owned()));
}

/// (fixture in testdata/hooks/bad, the error after "hook <path>: ")
const BAD: &[(&str, &str)] = &[
    (
        "always-not-bool.json",
        "when.always: invalid type: string \"yes\", expected a boolean",
    ),
    (
        "bad-annotation-regex.json",
        "when.annotations[\"key\"]: \"[z-a]\" is not a regular expression: error: invalid character class range, the start must be <= the end",
    ),
    (
        "bad-command-regex.json",
        "when.commands[0]: \"(unclosed\" is not a regular expression: error: unclosed group",
    ),
    ("bad-env.json", "hook.env[1]: not NAME=VALUE"),
    (
        "directory-path.json",
        "hook.path: /bin is not an executable regular file",
    ),
    (
        "missing-path.json",
        "hook.path: /no/such/hook: No such file or directory (os error 2)",
    ),
    (
        "no-condition.json",
        "when: no condition (always, annotations, commands or hasBindMounts)",
    ),
    ("no-path.json", "hook.path: missing"),
    ("no-stages.json", "stages: empty"),
    ("no-when.json", "when: missing"),
    (
        "not-executable.json",
        "hook.path: /etc/passwd is not an executable regular file",
    ),
    (
        "not-json.json",
        "not JSON: EOF while parsing a value at line 2 column 0",
    ),
    (
        "old-schema.json",
        "version: missing (the 0.1.0 schema is not supported)",
    ),
    ("relative-path.json", "hook.path: bin/true is not absolute"),
    (
        "stages-not-array.json",
        "stages: invalid type: string \"prestart\", expected a sequence",
    ),
    ("top-level-array.json", "the file: expected an object"),
    (
        "unknown-stage.json",
        "stages[1]: unknown stage \"beforeBreakfast\"",
    ),
    (
        "unknown-version.json",
        "version: \"2.0.0\" is not supported (only \"1.0.0\")",
    ),
    ("zero-timeout.json", "hook.timeout: 0 is not positive"),
];

#[test]
fn refused_files_name_the_file_and_the_field() {
    let (hooks, errors) = Hooks::load(&[testdata("bad")]);
    assert!(hooks.is_empty());
    let got: Vec<String> = errors.iter().map(ToString::to_string).collect();
    let want: Vec<String> = BAD
        .iter()
        .map(|(file, why)| format!("hook {}: {why}", testdata("bad").join(file).display()))
        .collect();
    assert_eq!(got, want);
    assert!(errors.iter().all(|e| e.container() == "-"));
}

#[test]
fn only_regular_files_of_bounded_size_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let good = r#"{"version": "1.0.0", "hook": {"path": "/bin/true"}, "when": {"always": true}, "stages": ["poststop"]}"#;
    std::fs::create_dir(dir.path().join("dir.json")).unwrap();
    nix::unistd::mkfifo(
        &dir.path().join("fifo.json"),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .unwrap();
    let mut big = good.as_bytes().to_vec();
    big.resize(MAX_HOOK_FILE_SIZE as usize + 1, b' ');
    std::fs::write(dir.path().join("big.json"), big).unwrap();
    std::fs::write(dir.path().join("good.json"), good).unwrap();
    std::os::unix::fs::symlink(dir.path().join("good.json"), dir.path().join("link.json")).unwrap();
    let (hooks, errors) = Hooks::load(&[dir.path().to_owned()]);
    // a link to a good file is followed, as configuration directories often hold links
    assert_eq!(
        hooks.files().map(Path::to_owned).collect::<Vec<_>>(),
        [dir.path().join("good.json"), dir.path().join("link.json")]
    );
    let got: Vec<String> = errors.iter().map(ToString::to_string).collect();
    let at = |f: &str| dir.path().join(f).display().to_string();
    assert_eq!(
        got,
        [
            format!("hook {}: larger than 64 KiB", at("big.json")),
            format!("hook {}: not a regular file (directory)", at("dir.json")),
            format!("hook {}: not a regular file (fifo)", at("fifo.json")),
        ]
    );

    // a refused file still masks the one of the same name in an earlier directory
    let later = tempfile::tempdir().unwrap();
    std::fs::write(later.path().join("good.json"), "{").unwrap();
    let (hooks, errors) = Hooks::load(&[dir.path().to_owned(), later.path().to_owned()]);
    assert_eq!(
        hooks.files().map(Path::to_owned).collect::<Vec<_>>(),
        [dir.path().join("link.json")]
    );
    assert!(
        errors
            .iter()
            .any(|e| e.to_string().contains(&at("big.json")))
    );
    assert!(
        errors.iter().any(|e| e.to_string().starts_with(&format!(
            "hook {}: not JSON",
            later.path().join("good.json").display()
        ))),
        "{errors:?}"
    );

    // a path that is not a directory cannot be listed: an error naming it, the others load
    let (hooks, errors) = Hooks::load(&[dir.path().join("good.json"), testdata("etc")]);
    assert_eq!(hooks.len(), 2);
    assert_eq!(errors.len(), 1);
    assert!(
        errors[0].to_string().contains("good.json: cannot list"),
        "{}",
        errors[0]
    );
}

fn when_of(
    always: Option<bool>,
    binds: Option<bool>,
    commands: &[&str],
    pairs: &[(&str, &str)],
) -> When {
    When {
        always,
        annotations: pairs
            .iter()
            .map(|&(k, v)| (Regex::new(k).unwrap(), Regex::new(v).unwrap()))
            .collect(),
        commands: commands.iter().map(|c| Regex::new(c).unwrap()).collect(),
        has_bind_mounts: binds,
    }
}

proptest! {
    /// A `when` holds exactly when each of its conditions, taken alone, holds.
    #[test]
    fn a_when_is_the_conjunction_of_its_conditions(
        always in prop::option::of(any::<bool>()),
        binds_cond in prop::option::of(any::<bool>()),
        commands in prop::collection::vec(prop::sample::select(vec!["^/bin/sh$", "init$", "a", "^$"]), 0..3),
        pairs in prop::collection::vec(
            (prop::sample::select(vec!["^k$", "k", "^x"]), prop::sample::select(vec!["^v$", "", "1"])),
            0..3,
        ),
        command in prop::option::of(prop::sample::select(vec!["/bin/sh", "/sbin/init", "", "/a"])),
        present in prop::collection::btree_map(
            prop::sample::select(vec!["k".to_owned(), "kk".to_owned(), "x1".to_owned()]),
            prop::sample::select(vec!["v".to_owned(), "1".to_owned(), String::new()]),
            0..3,
        ),
        binds in any::<bool>(),
    ) {
        let whole = when_of(always, binds_cond, &commands, &pairs);
        let parts = [
            when_of(always, None, &[], &[]),
            when_of(None, binds_cond, &[], &[]),
            when_of(None, None, &commands, &[]),
            when_of(None, None, &[], &pairs),
        ];
        let each = parts.iter().all(|w| w.matches(command, &present, binds));
        prop_assert_eq!(whole.matches(command, &present, binds), each);
    }

    /// Whatever a hook file holds, loading it answers without panicking.
    #[test]
    fn any_file_loads_or_is_refused_without_panicking(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("h.json"), &bytes).unwrap();
        let (hooks, errors) = Hooks::load(&[dir.path().to_owned()]);
        prop_assert_eq!(hooks.len() + errors.len(), 1);
    }
}

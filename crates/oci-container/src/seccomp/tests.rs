use std::collections::HashSet;
use std::path::Path;

use oci_spec::runtime::{
    Arch, Capabilities, Capability, LinuxSeccomp, LinuxSeccompAction, LinuxSeccompOperator,
    LinuxSyscall,
};
use proptest::prelude::*;

use super::profile::{self, Host};
use super::*;
use crate::defaults::{ALL_CAPABILITIES, DEFAULT_CAPABILITIES};

fn testdata(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata/seccomp")
        .join(name)
}

fn caps(list: &[Capability]) -> Capabilities {
    list.iter().copied().collect()
}

/// An x86_64 host on Linux 5.10, whatever machine runs the tests.
fn amd64() -> Host {
    Host {
        arch: "amd64",
        seccomp_arch: Some(Arch::ScmpArchX86_64),
        kernel: Some((5, 10)),
    }
}

fn rules(profile: &LinuxSeccomp) -> &[LinuxSyscall] {
    profile.syscalls().as_deref().unwrap_or_default()
}

/// Names allowed whatever their arguments.
fn allowed(profile: &LinuxSeccomp) -> HashSet<&str> {
    rules(profile)
        .iter()
        .filter(|r| r.action() == LinuxSeccompAction::ScmpActAllow && r.args().is_none())
        .flat_map(|r| r.names().iter().map(String::as_str))
        .collect()
}

/// Every rule naming `name`.
fn rules_for<'a>(profile: &'a LinuxSeccomp, name: &str) -> Vec<&'a LinuxSyscall> {
    rules(profile)
        .iter()
        .filter(|r| r.names().iter().any(|n| n == name))
        .collect()
}

#[test]
fn the_default_profile_denies_with_eperm_and_allows_ordinary_calls() {
    let profile = default_profile(&caps(DEFAULT_CAPABILITIES));
    assert_eq!(profile.default_action(), LinuxSeccompAction::ScmpActErrno);
    assert_eq!(profile.default_errno_ret(), Some(libc::EPERM as u32));
    let allowed = allowed(&profile);
    for name in [
        "read",
        "write",
        "openat",
        "execve",
        "exit_group",
        "futex",
        "socket",
        "mkdir",
    ] {
        assert!(allowed.contains(name), "{name} is allowed");
    }
    for name in [
        "mount", "unshare", "setns", "ptrace", "reboot", "keyctl", "add_key",
    ] {
        assert!(
            rules_for(&profile, name).is_empty(),
            "{name} is left to the default action"
        );
    }
    // no name is listed twice among the unconditional rules, every name is a syscall name
    let mut seen = HashSet::new();
    for rule in rules(&profile).iter().filter(|r| r.args().is_none()) {
        for name in rule.names() {
            assert!(seen.insert(name.as_str()), "{name} listed twice");
            assert!(
                name.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
                "{name:?}"
            );
        }
    }
}

#[test]
fn capabilities_unlock_their_groups_of_calls() {
    // (capability, calls it unlocks)
    let cases: &[(Capability, &[&str])] = &[
        (
            Capability::SysAdmin,
            &[
                "mount",
                "umount2",
                "setns",
                "unshare",
                "pivot_root",
                "bpf",
                "perf_event_open",
            ],
        ),
        (
            Capability::SysPtrace,
            &["ptrace", "process_vm_readv", "process_vm_writev"],
        ),
        (
            Capability::SysModule,
            &["init_module", "finit_module", "delete_module"],
        ),
        (Capability::SysBoot, &["reboot", "kexec_load"]),
        (
            Capability::SysTime,
            &["settimeofday", "clock_settime", "clock_adjtime"],
        ),
        (Capability::SysChroot, &["chroot"]),
        (
            Capability::SysNice,
            &["mbind", "set_mempolicy", "move_pages"],
        ),
        (Capability::Syslog, &["syslog"]),
        (Capability::Bpf, &["bpf"]),
        (Capability::Perfmon, &["perf_event_open"]),
        (Capability::SysPacct, &["acct"]),
        (Capability::SysRawio, &["iopl", "ioperm"]),
        (Capability::DacReadSearch, &["open_by_handle_at"]),
    ];
    let without = default_profile(&caps(DEFAULT_CAPABILITIES));
    for &(cap, names) in cases {
        let mut with = caps(DEFAULT_CAPABILITIES);
        with.insert(cap);
        let with = default_profile(&with);
        for name in names {
            assert!(allowed(&with).contains(name), "{cap:?} allows {name}");
            assert!(!allowed(&without).contains(name), "{name} needs {cap:?}");
        }
    }
    // CAP_BPF alone does not unlock mount
    assert!(!allowed(&default_profile(&caps(&[Capability::Bpf]))).contains("mount"));
}

#[test]
fn clone_with_namespace_flags_and_clone3_need_cap_sys_admin() {
    let profile = default_profile(&caps(DEFAULT_CAPABILITIES));
    let clone = rules_for(&profile, "clone");
    assert_eq!(clone.len(), 1, "{clone:?}");
    let args = clone[0].args().as_deref().unwrap_or_default();
    assert_eq!(args.len(), 1);
    assert_eq!(
        (args[0].index(), args[0].op(), args[0].value_two()),
        (0, LinuxSeccompOperator::ScmpCmpMaskedEq, Some(0))
    );
    // CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET all in the mask
    for flag in [
        libc::CLONE_NEWNS,
        libc::CLONE_NEWCGROUP,
        libc::CLONE_NEWUTS,
        libc::CLONE_NEWIPC,
        libc::CLONE_NEWUSER,
        libc::CLONE_NEWPID,
        libc::CLONE_NEWNET,
    ] {
        assert_ne!(args[0].value() & flag as u64, 0, "{flag:#x}");
    }
    // thread creation flags stay outside the mask
    for flag in [
        libc::CLONE_VM,
        libc::CLONE_THREAD,
        libc::CLONE_FILES,
        libc::CLONE_SIGHAND,
    ] {
        assert_eq!(args[0].value() & flag as u64, 0, "{flag:#x}");
    }
    let clone3 = rules_for(&profile, "clone3");
    assert_eq!(clone3.len(), 1);
    assert_eq!(
        (clone3[0].action(), clone3[0].errno_ret()),
        (LinuxSeccompAction::ScmpActErrno, Some(libc::ENOSYS as u32))
    );

    let admin = default_profile(&caps(&[Capability::SysAdmin]));
    let allowed = allowed(&admin);
    assert!(allowed.contains("clone") && allowed.contains("clone3"));
    assert!(
        rules_for(&admin, "clone3")
            .iter()
            .all(|r| r.action() == LinuxSeccompAction::ScmpActAllow)
    );
}

#[test]
fn personality_takes_only_harmless_personas() {
    let profile = default_profile(&Capabilities::new());
    let values: HashSet<u64> = rules_for(&profile, "personality")
        .iter()
        .map(|r| {
            let args = r.args().as_deref().unwrap_or_default();
            assert_eq!(args.len(), 1);
            assert_eq!(args[0].op(), LinuxSeccompOperator::ScmpCmpEq);
            args[0].value()
        })
        .collect();
    assert_eq!(
        values,
        HashSet::from([0, 0x0008, 0x0002_0000, 0x0002_0008, 0xffff_ffff])
    );
    const ADDR_NO_RANDOMIZE: u64 = 0x0004_0000;
    assert!(!values.contains(&ADDR_NO_RANDOMIZE));
}

#[test]
fn the_default_profile_names_the_native_architecture_and_its_compat_ones() {
    let archs = default_profile(&Capabilities::new())
        .architectures()
        .clone();
    if cfg!(target_arch = "x86_64") {
        assert_eq!(
            archs,
            Some(vec![
                Arch::ScmpArchX86_64,
                Arch::ScmpArchX86,
                Arch::ScmpArchX32
            ])
        );
    } else if cfg!(target_arch = "aarch64") {
        assert_eq!(archs, Some(vec![Arch::ScmpArchAarch64, Arch::ScmpArchArm]));
    } else {
        assert_eq!(archs, None);
    }
    // and serializes with the spec's names
    let json = serde_json::to_value(default_profile(&Capabilities::new())).unwrap();
    assert_eq!(json["defaultAction"], "SCMP_ACT_ERRNO");
    assert_eq!(json["defaultErrnoRet"], 1);
    if cfg!(target_arch = "x86_64") {
        assert_eq!(
            json["architectures"],
            serde_json::json!(["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"])
        );
    }
}

#[test]
fn privileged_or_unconfined_gets_no_filter() {
    let all = caps(ALL_CAPABILITIES);
    // (choice, privileged, has a filter)
    let cases = [
        (Seccomp::Unconfined, false, false),
        (Seccomp::RuntimeDefault, false, true),
        (
            Seccomp::Localhost(testdata("block-mkdir.json")),
            false,
            true,
        ),
        (Seccomp::Unconfined, true, false),
        (Seccomp::RuntimeDefault, true, false),
        // not even read: a privileged container never looks at its profile
        (
            Seccomp::Localhost(testdata("no-such-file.json")),
            true,
            false,
        ),
    ];
    for (choice, privileged, want) in cases {
        let got = choice.linux_seccomp("c1", &all, privileged).unwrap();
        assert_eq!(got.is_some(), want, "{choice:?} privileged={privileged}");
    }
    assert_eq!(Seccomp::default(), Seccomp::Unconfined);
    assert_eq!(Seccomp::for_empty_profile(true), Seccomp::RuntimeDefault);
    assert_eq!(Seccomp::for_empty_profile(false), Seccomp::Unconfined);
    assert_eq!(
        Seccomp::for_empty_profile(USE_DEFAULT_WHEN_EMPTY),
        Seccomp::RuntimeDefault
    );
}

#[test]
fn a_docker_profile_follows_capabilities_arches_and_kernel() {
    let bytes = std::fs::read(testdata("docker-format.json")).unwrap();
    // (capabilities, kernel, names expected, names left out)
    type Case<'a> = (&'a [Capability], (u64, u64), &'a [&'a str], &'a [&'a str]);
    let cases: &[Case<'_>] = &[
        (
            &[],
            (5, 10),
            &["read", "getpid", "unshare", "arch_prctl", "clone3", "clone"],
            &["mount", "ptrace", "set_tls", "new_call", "old_call"],
        ),
        (
            &[Capability::SysAdmin],
            (5, 10),
            &["mount", "umount2"],
            // ptrace needs both capabilities; unshare's refusal is excluded by SYS_ADMIN
            &["ptrace", "unshare"],
        ),
        (
            &[Capability::SysAdmin, Capability::SysPtrace],
            (5, 10),
            &["mount", "ptrace"],
            &[],
        ),
        (&[], (5, 11), &["new_call"], &["old_call"]),
        (&[], (5, 3), &["old_call"], &["new_call"]),
    ];
    for &(list, kernel, present, absent) in cases {
        let host = Host {
            kernel: Some(kernel),
            ..amd64()
        };
        let profile = profile::convert(&bytes, &caps(list), &host).unwrap();
        let names: HashSet<&str> = rules(&profile)
            .iter()
            .flat_map(|r| r.names().iter().map(String::as_str))
            .collect();
        for name in present {
            assert!(names.contains(name), "{list:?} {kernel:?}: {name} present");
        }
        for name in absent {
            assert!(!names.contains(name), "{list:?} {kernel:?}: {name} absent");
        }
    }

    let profile = profile::convert(&bytes, &Capabilities::new(), &amd64()).unwrap();
    assert_eq!(profile.default_action(), LinuxSeccompAction::ScmpActErrno);
    assert_eq!(profile.default_errno_ret(), Some(1));
    // archMap: the native entry and its sub-architectures
    assert_eq!(
        profile.architectures().as_deref(),
        Some(&[Arch::ScmpArchX86_64, Arch::ScmpArchX86, Arch::ScmpArchX32][..])
    );
    let arm = Host {
        arch: "arm64",
        seccomp_arch: Some(Arch::ScmpArchAarch64),
        kernel: Some((6, 1)),
    };
    let on_arm = profile::convert(&bytes, &Capabilities::new(), &arm).unwrap();
    assert_eq!(
        on_arm.architectures().as_deref(),
        Some(&[Arch::ScmpArchAarch64, Arch::ScmpArchArm][..])
    );
    assert!(!rules_for(&on_arm, "set_tls").is_empty());
    assert!(rules_for(&on_arm, "arch_prctl").is_empty());
    // `errno` by name, `name` as a one-name list, args with valueTwo defaulting to 0
    assert_eq!(
        rules_for(&profile, "clone3")[0].errno_ret(),
        Some(libc::ENOSYS as u32)
    );
    assert_eq!(rules_for(&profile, "getpid")[0].names(), &["getpid"]);
    let clone_args = rules_for(&profile, "clone")[0].args().clone().unwrap();
    assert_eq!(
        (clone_args[0].value(), clone_args[0].value_two()),
        (0x7E02_0000, Some(0))
    );
}

#[test]
fn a_profile_in_the_runtime_spec_form_is_taken_as_it_is() {
    let bytes = std::fs::read(testdata("oci-form.json")).unwrap();
    let want: LinuxSeccomp = serde_json::from_slice(&bytes).unwrap();
    let got = profile::convert(&bytes, &Capabilities::new(), &amd64()).unwrap();
    assert_eq!(got, want);
}

/// (fixture, the error after "seccomp profile <path>: ")
const MALFORMED: &[(&str, &str)] = &[
    (
        "unknown-action.json",
        r#"syscalls[1].action: unknown action "SCMP_ACT_EXPLODE""#,
    ),
    (
        "unknown-default-action.json",
        r#"defaultAction: unknown action "allow""#,
    ),
    (
        "unknown-op.json",
        r#"syscalls[0].args[0].op: unknown operator "SCMP_CMP_ROUGHLY""#,
    ),
    (
        "unknown-arch.json",
        r#"architectures[1]: unknown architecture "SCMP_ARCH_Z80""#,
    ),
    (
        "unknown-archmap-arch.json",
        r#"archMap[0].subArchitectures[0]: unknown architecture "SCMP_ARCH_6502""#,
    ),
    (
        "unknown-includes-arch.json",
        r#"syscalls[0].includes.arches[0]: unknown architecture "vax""#,
    ),
    (
        "unknown-cap.json",
        r#"syscalls[0].excludes.caps[0]: unknown capability "CAP_FLY""#,
    ),
    (
        "unknown-errno.json",
        r#"defaultErrno: unknown errno "EWHATEVER""#,
    ),
    (
        "unknown-flag.json",
        r#"flags[0]: unknown flag "SECCOMP_FILTER_FLAG_FAST""#,
    ),
    (
        "name-and-names.json",
        "syscalls[0]: name and names are both set",
    ),
    ("no-names.json", "syscalls[0].names: no system call named"),
    (
        "bad-syscall-name.json",
        r#"syscalls[0].names[1]: "Read Me" is not a system call name"#,
    ),
    ("missing-action.json", "syscalls[0].action: missing"),
    (
        "architectures-and-archmap.json",
        "archMap: architectures is set too; use one of them",
    ),
    ("missing-default-action.json", "defaultAction: missing"),
    (
        "not-json.json",
        "not JSON: EOF while parsing a value at line 2 column 0",
    ),
    (
        "top-level-array.json",
        "profile: expected an object, found an array",
    ),
    (
        "index-as-string.json",
        "syscalls[0].args[0].index: expected an unsigned integer, found a string",
    ),
    (
        "index-out-of-range.json",
        "syscalls[0].args[0].index: 6 is not an argument index (0 to 5)",
    ),
    (
        "negative-value.json",
        "syscalls[0].args[0].value: expected an unsigned integer, found a negative or fractional number",
    ),
    (
        "bad-min-kernel.json",
        r#"syscalls[0].includes.minKernel: "five" is not a kernel version such as "5.8""#,
    ),
    (
        "errno-too-large.json",
        "defaultErrnoRet: 4294967296 is too large",
    ),
    (
        "listener-path.json",
        "listenerPath: seccomp agents are not supported",
    ),
    (
        "notify-action.json",
        "syscalls[0].action: SCMP_ACT_NOTIFY needs a seccomp agent, which is not supported",
    ),
    (
        "syscalls-not-array.json",
        "syscalls: expected an array, found an object",
    ),
];

#[test]
fn malformed_profiles_name_the_field() {
    for &(name, want) in MALFORMED {
        let path = testdata(name);
        let err = Seccomp::Localhost(path.clone())
            .linux_seccomp("c1", &Capabilities::new(), false)
            .unwrap_err();
        assert!(matches!(err, Error::SeccompProfile { .. }), "{name}: {err}");
        assert_eq!(
            err.to_string(),
            format!("container c1: seccomp profile {}: {want}", path.display()),
            "{name}"
        );
    }
}

#[test]
fn only_a_regular_file_of_bounded_size_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.json");
    std::fs::write(&big, vec![b' '; MAX_PROFILE_SIZE as usize + 1]).unwrap();
    let fifo = dir.path().join("fifo.json");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let link = dir.path().join("link.json");
    std::os::unix::fs::symlink(testdata("block-mkdir.json"), &link).unwrap();
    // (path, expected error, or None when it loads)
    let cases: Vec<(PathBuf, Option<String>)> = vec![
        (
            big.clone(),
            Some(format!(
                "container c1: {}: larger than 1 MiB",
                big.display()
            )),
        ),
        (
            fifo.clone(),
            Some(format!(
                "container c1: {}: not a regular file (fifo)",
                fifo.display()
            )),
        ),
        (
            dir.path().to_owned(),
            Some(format!(
                "container c1: {}: not a regular file (directory)",
                dir.path().display()
            )),
        ),
        (
            PathBuf::from("relative.json"),
            Some("container c1: seccomp profile relative.json is not absolute".to_owned()),
        ),
        // Kubernetes mounts profiles through links
        (link, None),
    ];
    for (path, want) in cases {
        let got = Seccomp::Localhost(path.clone()).linux_seccomp("c1", &Capabilities::new(), false);
        match want {
            Some(want) => assert_eq!(got.unwrap_err().to_string(), want, "{}", path.display()),
            None => assert!(got.unwrap().is_some(), "{}", path.display()),
        }
    }
    let missing = dir.path().join("missing.json");
    let err = Seccomp::Localhost(missing.clone())
        .linux_seccomp("c1", &Capabilities::new(), false)
        .unwrap_err();
    assert!(matches!(err, Error::File { .. }), "{err}");
    assert!(
        err.to_string().contains(&missing.display().to_string()),
        "{err}"
    );
}

#[test]
fn kernel_versions_are_version_and_major_revision() {
    let cases = [
        ("6.1.0-18-amd64", Some((6, 1))),
        ("5.8", Some((5, 8))),
        ("3.12-rc5", Some((3, 12))),
        ("3.12.25-gentoo", Some((3, 12))),
        ("6.18.44-fc-v1147", Some((6, 18))),
        ("4", None),
        ("five.1", None),
        ("5.x", None),
        ("", None),
    ];
    for (release, want) in cases {
        assert_eq!(profile::kernel_version(release), want, "{release:?}");
    }
}

fn arb_action() -> impl Strategy<Value = LinuxSeccompAction> {
    prop_oneof![
        Just(LinuxSeccompAction::ScmpActAllow),
        Just(LinuxSeccompAction::ScmpActErrno),
        Just(LinuxSeccompAction::ScmpActKillProcess),
        Just(LinuxSeccompAction::ScmpActKillThread),
        Just(LinuxSeccompAction::ScmpActTrap),
        Just(LinuxSeccompAction::ScmpActLog),
        Just(LinuxSeccompAction::ScmpActTrace),
    ]
}

fn arb_rule() -> impl Strategy<Value = serde_json::Value> {
    (
        prop::collection::vec("[a-z_][a-z0-9_]{0,15}", 1..4),
        arb_action(),
        prop::option::of(0u32..200),
        prop::collection::vec((0u64..6, any::<u64>(), any::<u64>(), 1u32..8), 0..3),
    )
        .prop_map(|(names, action, errno, args)| {
            let args: Vec<serde_json::Value> = args
                .into_iter()
                .map(|(index, value, value_two, op)| {
                    let op = [
                        "SCMP_CMP_NE",
                        "SCMP_CMP_LT",
                        "SCMP_CMP_LE",
                        "SCMP_CMP_EQ",
                        "SCMP_CMP_GE",
                        "SCMP_CMP_GT",
                        "SCMP_CMP_MASKED_EQ",
                    ][op as usize - 1];
                    serde_json::json!({"index": index, "value": value, "valueTwo": value_two, "op": op})
                })
                .collect();
            let mut rule = serde_json::json!({"names": names, "action": action});
            if let Some(errno) = errno {
                rule["errnoRet"] = errno.into();
            }
            if !args.is_empty() {
                rule["args"] = args.into();
            }
            rule
        })
}

proptest! {
    /// A profile in the spec's own form converts to what the spec's types read from it.
    #[test]
    fn spec_form_profiles_convert_to_themselves(
        action in arb_action(),
        errno in prop::option::of(0u32..4096),
        rules in prop::collection::vec(arb_rule(), 0..6),
    ) {
        let mut json = serde_json::json!({"defaultAction": action, "syscalls": rules});
        if let Some(errno) = errno {
            json["defaultErrnoRet"] = errno.into();
        }
        let bytes = serde_json::to_vec(&json).unwrap();
        let mut want: LinuxSeccomp = serde_json::from_slice(&bytes).unwrap();
        if want.syscalls().as_ref().is_some_and(Vec::is_empty) {
            want.set_syscalls(None);
        }
        let got = profile::convert(&bytes, &Capabilities::new(), &amd64()).unwrap();
        prop_assert_eq!(got, want);
    }

    /// Whatever the bytes, conversion answers without panicking.
    #[test]
    fn any_bytes_convert_or_fail_without_panicking(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = profile::convert(&bytes, &Capabilities::new(), &amd64());
    }

    /// Whatever the shape of the JSON, conversion answers without panicking.
    #[test]
    fn any_json_converts_or_fails_without_panicking(json in arb_json()) {
        let bytes = serde_json::to_vec(&json).unwrap();
        let _ = profile::convert(&bytes, &caps(ALL_CAPABILITIES), &amd64());
    }

    #[test]
    fn kernel_version_reads_any_release(major in 0u64..100_000, minor in 0u64..100_000, rest in "([.-][a-z0-9.-]{0,10})?") {
        prop_assert_eq!(
            profile::kernel_version(&format!("{major}.{minor}{rest}")),
            Some((major, minor))
        );
    }
}

/// JSON built from the profile format's own keys and values, so the walker goes deep.
fn arb_json() -> impl Strategy<Value = serde_json::Value> {
    let keys = prop::sample::select(vec![
        "defaultAction",
        "defaultErrnoRet",
        "defaultErrno",
        "architectures",
        "archMap",
        "architecture",
        "subArchitectures",
        "syscalls",
        "name",
        "names",
        "action",
        "args",
        "index",
        "value",
        "valueTwo",
        "op",
        "errnoRet",
        "errno",
        "includes",
        "excludes",
        "caps",
        "arches",
        "minKernel",
        "flags",
    ]);
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        any::<u64>().prop_map(serde_json::Value::from),
        prop::sample::select(vec![
            "SCMP_ACT_ALLOW",
            "SCMP_ACT_ERRNO",
            "SCMP_CMP_EQ",
            "SCMP_ARCH_X86_64",
            "CAP_SYS_ADMIN",
            "amd64",
            "5.10",
            "EPERM",
            "read",
            "",
        ])
        .prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(4, 64, 8, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
            prop::collection::btree_map(keys.clone(), inner, 0..6).prop_map(|m| {
                serde_json::Value::Object(m.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
            }),
        ]
    })
}

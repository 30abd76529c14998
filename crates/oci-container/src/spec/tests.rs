use std::collections::BTreeMap;

use oci_spec::image::ImageConfiguration;
use oci_spec::runtime::{Capability, LinuxNamespaceType};

use super::*;
use crate::config::NamespacePaths;
use crate::defaults::{DEFAULT_MASKED_PATHS, DEFAULT_READONLY_PATHS};
use crate::seccomp::Seccomp;

fn image(config: serde_json::Value) -> ImageConfiguration {
    serde_json::from_value(serde_json::json!({
        "architecture": "amd64",
        "os": "linux",
        "rootfs": {"type": "layers", "diff_ids": []},
        "config": config,
    }))
    .unwrap()
}

fn rootfs() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("etc")).unwrap();
    std::fs::write(
        dir.path().join("etc/passwd"),
        "root:x:0:0:root:/root:/bin/sh\napp:x:1000:1000::/home/app:/bin/sh\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("etc/group"),
        "root:x:0:\napp:x:1000:\naudio:x:29:app\n",
    )
    .unwrap();
    dir
}

fn config(id: &str) -> ContainerConfig {
    ContainerConfig {
        id: id.to_owned(),
        image: Some(image(serde_json::json!({
            "Entrypoint": ["/entry"],
            "Cmd": ["--serve"],
            "Env": ["PATH=/img/bin", "A=image", "B=image"],
            "WorkingDir": "/srv",
            "User": "app",
        }))),
        ..ContainerConfig::default()
    }
}

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|&s| s.to_owned()).collect()
}

fn process(spec: &Spec) -> &Process {
    spec.process().as_ref().unwrap()
}

#[test]
fn command_and_args_follow_kubernetes() {
    let root = rootfs();
    // (command, args, expected process args)
    let cases: &[(&[&str], &[&str], &[&str])] = &[
        (&[], &[], &["/entry", "--serve"]),
        (&["/bin/sh"], &[], &["/bin/sh"]),
        (&[], &["--once"], &["/entry", "--once"]),
        (&["/bin/sh"], &["-c", "true"], &["/bin/sh", "-c", "true"]),
    ];
    for &(command, args, want) in cases {
        let c = ContainerConfig {
            command: strs(command),
            args: strs(args),
            ..config("c1")
        };
        let spec = generate(&c, root.path()).unwrap();
        assert_eq!(
            process(&spec).args().as_deref(),
            Some(&strs(want)[..]),
            "{command:?} {args:?}"
        );
    }
}

#[test]
fn no_command_anywhere_is_an_error_naming_the_container() {
    let root = rootfs();
    let c = ContainerConfig {
        id: "c1".into(),
        ..ContainerConfig::default()
    };
    let err = generate(&c, root.path()).unwrap_err();
    assert!(matches!(err, Error::NoCommand { .. }));
    assert_eq!(err.container(), "c1");
    assert!(
        err.to_string().starts_with("container c1: no command"),
        "{err}"
    );
}

#[test]
fn environment_merges_by_name_and_fills_path_and_home() {
    let root = rootfs();
    // (extra env, user, expected env)
    type Case<'a> = (&'a [(&'a str, &'a str)], Option<&'a str>, &'a [&'a str]);
    let cases: &[Case<'_>] = &[
        // image env kept, HOME from passwd for the image's user
        (
            &[],
            None,
            &["PATH=/img/bin", "A=image", "B=image", "HOME=/home/app"],
        ),
        // override in place, new ones appended
        (
            &[("B", "mine"), ("C", "x=y"), ("HOME", "/h")],
            None,
            &["PATH=/img/bin", "A=image", "B=mine", "C=x=y", "HOME=/h"],
        ),
        // root by uid: HOME from passwd
        (
            &[],
            Some("0"),
            &["PATH=/img/bin", "A=image", "B=image", "HOME=/root"],
        ),
        // unknown uid: HOME=/
        (
            &[],
            Some("4242"),
            &["PATH=/img/bin", "A=image", "B=image", "HOME=/"],
        ),
    ];
    for &(env, user, want) in cases {
        let c = ContainerConfig {
            env: env
                .iter()
                .map(|&(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
            user: user.map(str::to_owned),
            ..config("c1")
        };
        let spec = generate(&c, root.path()).unwrap();
        assert_eq!(
            process(&spec).env().as_deref(),
            Some(&strs(want)[..]),
            "{env:?}"
        );
    }
    // without an image: the default PATH
    let c = ContainerConfig {
        id: "c1".into(),
        command: strs(&["/bin/true"]),
        ..ContainerConfig::default()
    };
    let spec = generate(&c, root.path()).unwrap();
    assert_eq!(
        process(&spec).env().as_deref(),
        Some(&strs(&[&format!("PATH={DEFAULT_PATH}"), "HOME=/root"])[..])
    );
}

#[test]
fn user_working_dir_and_groups() {
    let root = rootfs();
    // (user, supplemental, uid, gid, additional gids)
    type Case<'a> = (Option<&'a str>, &'a [u32], u32, u32, Option<&'a [u32]>);
    let cases: &[Case<'_>] = &[
        (None, &[], 1000, 1000, Some(&[1000, 29])),
        (Some("0:0"), &[], 0, 0, Some(&[0])),
        (Some("0"), &[7, 7], 0, 0, Some(&[0, 7])),
        (Some("app:root"), &[29, 5], 1000, 0, Some(&[0, 29, 5])),
    ];
    for &(user, extra, uid, gid, gids) in cases {
        let c = ContainerConfig {
            user: user.map(str::to_owned),
            supplemental_groups: extra.to_vec(),
            ..config("c1")
        };
        let spec = generate(&c, root.path()).unwrap();
        let u = process(&spec).user();
        assert_eq!(
            (u.uid(), u.gid(), u.additional_gids().as_deref()),
            (uid, gid, gids),
            "{user:?}"
        );
        assert_eq!(process(&spec).cwd(), Path::new("/srv"));
    }
    let c = ContainerConfig {
        working_dir: Some("relative".into()),
        ..config("c1")
    };
    let err = generate(&c, root.path()).unwrap_err().to_string();
    assert_eq!(
        err,
        "container c1: working directory \"relative\" is not absolute"
    );
}

/// Issue #21: uid 1000 with supplemental groups [2000] ran with `Groups: 2000`, without its
/// primary group, so a file's group-deny bits (`0604`) did not hold it (CVE-2022-2995). The
/// groups are the primary one, then `/etc/group`'s for the user (Merge) or none (Strict), then
/// the requested ones, each once.
#[test]
fn supplementary_groups_hold_the_primary_group_then_the_images_then_the_requested() {
    let root = rootfs();
    // (user, supplemental, strict, groups)
    type Case<'a> = (&'a str, &'a [u32], bool, &'a [u32]);
    let cases: &[Case<'_>] = &[
        ("1000", &[2000], false, &[1000, 29, 2000]),
        ("1000", &[2000], true, &[1000, 2000]),
        ("1000:3000", &[2000, 3000, 29], false, &[3000, 29, 2000]),
        ("1000:3000", &[2000], true, &[3000, 2000]),
        // A uid passwd does not know: gid 0, and no name to look groups up by.
        ("4242", &[2000], false, &[0, 2000]),
        ("app", &[], true, &[1000]),
    ];
    for &(user, extra, strict, groups) in cases {
        let c = ContainerConfig {
            user: Some(user.to_owned()),
            supplemental_groups: extra.to_vec(),
            strict_groups: strict,
            ..config("c1")
        };
        let spec = generate(&c, root.path()).unwrap();
        assert_eq!(
            process(&spec).user().additional_gids().as_deref(),
            Some(groups),
            "{user} {extra:?} strict={strict}"
        );
    }
}

#[test]
fn a_capability_the_node_cannot_grant_is_refused_by_name_and_all_means_what_it_can() {
    // A node whose runtime lacks CAP_SYS_RESOURCE (24), as containers nested in one often do.
    let bounding = !(1u64 << 24);
    let changes = |add: &[&str]| CapabilityChanges {
        add: strs(add),
        drop: Vec::new(),
    };
    let err = capabilities("c1", &changes(&["SYS_RESOURCE"]), false, Some(bounding)).unwrap_err();
    assert!(
        err.to_string()
            .contains("\"SYS_RESOURCE\" is outside this node's bounding set"),
        "{err}"
    );
    for privileged in [false, true] {
        let caps = capabilities("c1", &changes(&["ALL"]), privileged, Some(bounding)).unwrap();
        let bounded = caps.bounding().clone().unwrap();
        assert!(!bounded.contains(&Capability::SysResource), "{privileged}");
        assert!(bounded.contains(&Capability::SysAdmin), "{privileged}");
    }
    // Unknown bounding set: everything, as named.
    let caps = capabilities("c1", &changes(&["SYS_RESOURCE"]), false, None).unwrap();
    assert!(
        caps.bounding()
            .clone()
            .unwrap()
            .contains(&Capability::SysResource)
    );
}

#[test]
fn capabilities_default_add_drop_privileged() {
    let root = rootfs();
    let set = |caps: &[Capability]| caps.iter().copied().collect::<Capabilities>();
    let default = set(DEFAULT_CAPABILITIES);
    let mut with_net_admin = default.clone();
    with_net_admin.insert(Capability::NetAdmin);
    with_net_admin.remove(&Capability::Kill);
    // Privileged: every capability this process's bounding set still holds.
    let bounding = crate::defaults::own_bounding_set().expect("CapBnd");
    let grantable: Capabilities = ALL_CAPABILITIES
        .iter()
        .copied()
        .filter(|c| crate::defaults::cap_number(*c).is_some_and(|n| bounding & (1 << n) != 0))
        .collect();
    // (add, drop, privileged, expected)
    let cases: Vec<(&[&str], &[&str], bool, Capabilities)> = vec![
        (&[], &[], false, default.clone()),
        (&["net_admin"], &["CAP_KILL"], false, with_net_admin),
        (&[], &["ALL"], false, Capabilities::new()),
        (&["NET_RAW"], &["ALL"], false, set(&[Capability::NetRaw])),
        (&["ALL"], &[], false, grantable.clone()),
        (&[], &["ALL"], true, grantable),
    ];
    for (add, drop, privileged, want) in cases {
        let c = ContainerConfig {
            capabilities: CapabilityChanges {
                add: strs(add),
                drop: strs(drop),
            },
            privileged,
            ..config("c1")
        };
        let spec = generate(&c, root.path()).unwrap();
        let caps = process(&spec).capabilities().clone().unwrap();
        assert_eq!(
            caps.bounding().as_ref(),
            Some(&want),
            "{add:?} {drop:?} {privileged}"
        );
        assert_eq!(caps.effective().as_ref(), Some(&want));
        assert_eq!(caps.permitted().as_ref(), Some(&want));
        assert_eq!(caps.inheritable().as_ref(), Some(&Capabilities::new()));
    }
    let c = ContainerConfig {
        capabilities: CapabilityChanges {
            add: strs(&["CAP_FLY"]),
            drop: vec![],
        },
        ..config("c1")
    };
    let err = generate(&c, root.path()).unwrap_err().to_string();
    assert_eq!(err, "container c1: unknown capability \"CAP_FLY\"");
}

#[test]
fn privileged_unmasks_and_makes_sys_writable() {
    let root = rootfs();
    for privileged in [false, true] {
        let c = ContainerConfig {
            privileged,
            masked_paths: strs(&["/proc/extra", "/proc/kcore"]),
            ..config("c1")
        };
        let spec = generate(&c, root.path()).unwrap();
        let linux = spec.linux().as_ref().unwrap();
        let sys = spec
            .mounts()
            .as_ref()
            .unwrap()
            .iter()
            .find(|m| m.destination() == Path::new("/sys"))
            .unwrap();
        let opts = sys.options().as_ref().unwrap();
        let devices = linux
            .resources()
            .as_ref()
            .unwrap()
            .devices()
            .as_ref()
            .unwrap();
        if privileged {
            assert_eq!(linux.masked_paths(), &None);
            assert_eq!(linux.readonly_paths(), &None);
            assert!(opts.contains(&"rw".to_owned()));
            assert_eq!(devices.len(), 1);
            assert!(devices[0].allow());
        } else {
            let masked = linux.masked_paths().as_ref().unwrap();
            assert_eq!(masked.len(), DEFAULT_MASKED_PATHS.len() + 1, "{masked:?}");
            assert!(masked.contains(&"/proc/extra".to_owned()));
            assert_eq!(
                linux.readonly_paths().as_ref().unwrap().len(),
                DEFAULT_READONLY_PATHS.len()
            );
            assert!(opts.contains(&"ro".to_owned()));
            assert!(!devices[0].allow(), "deny all first");
            assert_eq!(devices.len(), 1 + defaults::DEFAULT_DEVICES.len());
        }
    }
}

#[test]
fn mounts_defaults_binds_and_propagation() {
    let root = rootfs();
    let bind = |dest: &str, ro: bool, propagation: Propagation| BindMount {
        source: PathBuf::from("/var/lib/data"),
        destination: dest.to_owned(),
        readonly: ro,
        propagation,
    };
    let c = ContainerConfig {
        mounts: vec![
            bind("/data", true, Propagation::Private),
            bind("/dev/shm", false, Propagation::HostToContainer),
        ],
        ..config("c1")
    };
    let spec = generate(&c, root.path()).unwrap();
    let mounts = spec.mounts().as_ref().unwrap();
    let dests: Vec<&Path> = mounts.iter().map(|m| m.destination().as_path()).collect();
    assert_eq!(
        dests,
        [
            "/proc",
            "/dev",
            "/dev/pts",
            "/dev/mqueue",
            "/sys",
            "/sys/fs/cgroup",
            "/data",
            "/dev/shm"
        ]
        .map(Path::new)
    );
    assert_eq!(
        mounts[6].options().as_deref(),
        Some(&strs(&["rbind", "ro", "rprivate"])[..])
    );
    assert_eq!(
        mounts[7].options().as_deref(),
        Some(&strs(&["rbind", "rw", "rslave"])[..])
    );
    let linux = spec.linux().as_ref().unwrap();
    assert_eq!(linux.rootfs_propagation().as_deref(), Some("rslave"));

    // (source, destination, error)
    let bad: &[(&str, &str, &str)] = &[
        (
            "data",
            "/data",
            "container c1: mount source data is not absolute",
        ),
        (
            "/data",
            "data",
            "container c1: mount destination \"data\" is not an absolute path below /",
        ),
        (
            "/data",
            "/",
            "container c1: mount destination \"/\" is not an absolute path below /",
        ),
    ];
    for &(source, destination, want) in bad {
        let c = ContainerConfig {
            mounts: vec![BindMount {
                source: source.into(),
                destination: destination.into(),
                readonly: false,
                propagation: Propagation::Private,
            }],
            ..config("c1")
        };
        assert_eq!(generate(&c, root.path()).unwrap_err().to_string(), want);
    }
}

#[test]
fn namespaces_joined_or_new_and_hostname() {
    let root = rootfs();
    let c = ContainerConfig {
        namespaces: NamespacePaths {
            network: Some("/run/netns/pod".into()),
            ipc: Some("/proc/42/ns/ipc".into()),
            ..NamespacePaths::default()
        },
        ..config("c1")
    };
    let spec = generate(&c, root.path()).unwrap();
    let ns: Vec<(LinuxNamespaceType, Option<PathBuf>)> = spec
        .linux()
        .as_ref()
        .unwrap()
        .namespaces()
        .as_ref()
        .unwrap()
        .iter()
        .map(|n| (n.typ(), n.path().clone()))
        .collect();
    assert_eq!(
        ns,
        vec![
            (LinuxNamespaceType::Pid, None),
            (LinuxNamespaceType::Network, Some("/run/netns/pod".into())),
            (LinuxNamespaceType::Ipc, Some("/proc/42/ns/ipc".into())),
            (LinuxNamespaceType::Uts, None),
            (LinuxNamespaceType::Mount, None),
        ]
    );
    assert_eq!(spec.hostname().as_deref(), Some("c1"));
    // a joined UTS namespace keeps its hostname
    let c = ContainerConfig {
        namespaces: NamespacePaths {
            uts: Some("/proc/42/ns/uts".into()),
            ..NamespacePaths::default()
        },
        hostname: Some("pod".into()),
        ..config("c1")
    };
    assert_eq!(generate(&c, root.path()).unwrap().hostname(), &None);
}

#[test]
fn resources_sysctls_annotations_rootfs() {
    let root = rootfs();
    let c = ContainerConfig {
        resources: Resources {
            cpu_shares: Some(512),
            cpu_quota: Some(50_000),
            cpu_period: Some(100_000),
            cpuset_cpus: Some("0-1".into()),
            memory_limit: Some(64 << 20),
            oom_score_adj: Some(500),
            pids_limit: Some(100),
            ..Resources::default()
        },
        sysctls: BTreeMap::from([("net.ipv4.ip_forward".to_owned(), "1".to_owned())]),
        annotations: BTreeMap::from([("io.kubernetes.pod.name".to_owned(), "web".to_owned())]),
        readonly_rootfs: true,
        no_new_privileges: true,
        cgroups_path: Some("/kubepods/pod1/c1".into()),
        ..config("c1")
    };
    let spec = generate(&c, root.path()).unwrap();
    let linux = spec.linux().as_ref().unwrap();
    let res = linux.resources().as_ref().unwrap();
    let cpu = res.cpu().as_ref().unwrap();
    assert_eq!(
        (
            cpu.shares(),
            cpu.quota(),
            cpu.period(),
            cpu.cpus().as_deref()
        ),
        (Some(512), Some(50_000), Some(100_000), Some("0-1"))
    );
    assert_eq!(res.memory().as_ref().unwrap().limit(), Some(64 << 20));
    assert_eq!(res.pids().as_ref().unwrap().limit(), 100);
    assert_eq!(process(&spec).oom_score_adj(), Some(500));
    assert_eq!(process(&spec).no_new_privileges(), Some(true));
    assert_eq!(
        linux
            .sysctl()
            .as_ref()
            .unwrap()
            .get("net.ipv4.ip_forward")
            .map(String::as_str),
        Some("1")
    );
    assert_eq!(
        linux.cgroups_path().as_deref(),
        Some(Path::new("/kubepods/pod1/c1"))
    );
    assert_eq!(
        spec.annotations()
            .as_ref()
            .unwrap()
            .get("io.kubernetes.pod.name")
            .map(String::as_str),
        Some("web")
    );
    let r = spec.root().as_ref().unwrap();
    assert_eq!(
        (r.path().as_path(), r.readonly()),
        (root.path(), Some(true))
    );

    // (resources, error)
    let bad = [
        (
            Resources {
                memory_limit: Some(0),
                ..Resources::default()
            },
            "container c1: memory limit 0 is not positive",
        ),
        (
            Resources {
                oom_score_adj: Some(1001),
                ..Resources::default()
            },
            "container c1: oom_score_adj 1001 is outside -1000..=1000",
        ),
    ];
    for (resources, want) in bad {
        let c = ContainerConfig {
            resources,
            ..config("c1")
        };
        assert_eq!(generate(&c, root.path()).unwrap_err().to_string(), want);
    }
}

#[test]
fn bad_ids_and_relative_rootfs_are_refused() {
    let root = rootfs();
    for id in ["", "../x", "-x", "a/b", "a b"] {
        let err = generate(&config(id), root.path()).unwrap_err();
        assert!(matches!(err, Error::InvalidId { .. }), "{id:?}: {err}");
    }
    let err = generate(&config("c1"), Path::new("rootfs"))
        .unwrap_err()
        .to_string();
    assert_eq!(err, "container c1: root file system rootfs is not absolute");
}

#[test]
fn bundle_round_trips_through_config_json() {
    let root = rootfs();
    let bundle = tempfile::tempdir().unwrap();
    let spec = generate(&config("c1"), root.path()).unwrap();
    let path = write_bundle("c1", bundle.path(), &spec).unwrap();
    assert_eq!(path, bundle.path().join("config.json"));
    let back: Spec = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(back, spec);
    assert_eq!(back.version(), OCI_VERSION);
    // a missing bundle directory: the error names the container and the file
    let err = write_bundle("c1", &bundle.path().join("gone"), &spec)
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("container c1: ") && err.contains("gone/config.json"),
        "{err}"
    );
}

#[test]
fn seccomp_follows_the_final_capabilities_and_privilege() {
    let root = rootfs();
    let allows_mount = |spec: &Spec| {
        spec.linux().as_ref().unwrap().seccomp().as_ref().map(|s| {
            s.syscalls()
                .iter()
                .flatten()
                .any(|r| r.names().iter().any(|n| n == "mount"))
        })
    };
    // (seccomp, add, drop, privileged, filter that allows mount(2)?)
    type Case<'a> = (Seccomp, &'a [&'a str], &'a [&'a str], bool, Option<bool>);
    let cases: &[Case<'_>] = &[
        (Seccomp::Unconfined, &[], &[], false, None),
        (Seccomp::RuntimeDefault, &[], &[], false, Some(false)),
        (
            Seccomp::RuntimeDefault,
            &["SYS_ADMIN"],
            &[],
            false,
            Some(true),
        ),
        (Seccomp::RuntimeDefault, &["ALL"], &[], false, Some(true)),
        (
            Seccomp::RuntimeDefault,
            &["ALL"],
            &["CAP_SYS_ADMIN"],
            false,
            Some(false),
        ),
        (Seccomp::RuntimeDefault, &[], &[], true, None),
    ];
    for (seccomp, add, drop, privileged, want) in cases {
        let c = ContainerConfig {
            seccomp: seccomp.clone(),
            capabilities: CapabilityChanges {
                add: strs(add),
                drop: strs(drop),
            },
            privileged: *privileged,
            ..config("c1")
        };
        let spec = generate(&c, root.path()).unwrap();
        assert_eq!(
            allows_mount(&spec),
            *want,
            "{seccomp:?} {add:?} {drop:?} {privileged}"
        );
    }
    // a bad profile fails generate, naming the container and the file
    let c = ContainerConfig {
        seccomp: Seccomp::Localhost(root.path().join("etc/passwd")),
        ..config("c1")
    };
    let err = generate(&c, root.path()).unwrap_err().to_string();
    assert!(
        err.starts_with("container c1: seccomp profile ") && err.contains("etc/passwd: not JSON"),
        "{err}"
    );
}

#[test]
fn every_capability_has_its_kernel_number_once() {
    let mut seen = std::collections::BTreeSet::new();
    for cap in crate::ALL_CAPABILITIES {
        let n = crate::defaults::cap_number(*cap).expect("a number");
        assert!(seen.insert(n), "{cap:?} shares number {n}");
    }
    assert_eq!(seen.len(), crate::ALL_CAPABILITIES.len());
    assert!(crate::defaults::own_bounding_set().is_some());
}

#[test]
fn host_devices_and_hugepages_reach_the_spec_and_bad_ones_are_refused() {
    let root = rootfs();
    let mut c = config("c1");
    c.devices = vec![crate::config::DeviceMapping {
        host_path: "/dev/null".into(),
        container_path: "/dev/xnull".into(),
        permissions: "rw".into(),
    }];
    c.resources.hugepage_limits = vec![("2MB".into(), 4 << 20)];
    let spec = generate(&c, root.path()).unwrap();
    let linux = spec.linux().as_ref().unwrap();
    let xnull = linux
        .devices()
        .as_ref()
        .unwrap()
        .iter()
        .find(|d| d.path() == std::path::Path::new("/dev/xnull"))
        .expect("the device is in the spec");
    assert_eq!((xnull.major(), xnull.minor()), (1, 3));
    let resources = linux.resources().as_ref().unwrap();
    let rule = resources
        .devices()
        .as_ref()
        .unwrap()
        .iter()
        .rev()
        .find(|r| r.major() == Some(1) && r.minor() == Some(3))
        .expect("a cgroup rule for it");
    assert_eq!(rule.access().as_deref(), Some("rw"));
    let huge = resources.hugepage_limits().as_ref().unwrap();
    assert_eq!(
        (huge[0].page_size().as_str(), huge[0].limit()),
        ("2MB", 4 << 20)
    );

    let file = root.path().join("etc/passwd");
    for (mapping, size, wanted) in [
        (
            (file.clone(), "/dev/x", "rw"),
            "2MB",
            "is not a device node",
        ),
        (
            ("/dev/null".into(), "/dev/x", "rwx"),
            "2MB",
            "not made of r, w and m",
        ),
        (("/dev/null".into(), "dev/x", "r"), "2MB", "is not absolute"),
        (("/dev/null".into(), "/dev/x", "r"), "2XB", "is not a size"),
    ] {
        let mut c = config("c1");
        c.devices = vec![crate::config::DeviceMapping {
            host_path: mapping.0,
            container_path: mapping.1.into(),
            permissions: mapping.2.into(),
        }];
        c.resources.hugepage_limits = vec![(size.into(), 1)];
        let err = generate(&c, root.path()).unwrap_err().to_string();
        assert!(
            err.contains(wanted) && err.contains("c1"),
            "{wanted}: {err}"
        );
    }
}

#[test]
fn a_terminal_is_the_process_terminal() {
    let root = rootfs();
    let plain = generate(&config("c1"), root.path()).unwrap();
    assert_eq!(process(&plain).terminal(), Some(false));
    let mut c = config("c1");
    c.stdio = crate::ContainerStdio {
        terminal: true,
        stdin: true,
        stdin_once: true,
    };
    let tty = generate(&c, root.path()).unwrap();
    assert_eq!(process(&tty).terminal(), Some(true));
}

#[test]
fn a_unified_map_reaches_the_spec_and_paths_or_lines_are_refused() {
    let root = rootfs();
    let mut c = config("c1");
    c.resources.unified = [
        ("memory.high".to_owned(), "50331648".to_owned()),
        ("memory.oom.group".to_owned(), "1".to_owned()),
    ]
    .into();
    let spec = generate(&c, root.path()).unwrap();
    let unified = spec
        .linux()
        .as_ref()
        .and_then(|l| l.resources().as_ref())
        .and_then(|r| r.unified().as_ref())
        .expect("the unified map");
    assert_eq!(
        unified.get("memory.high").map(String::as_str),
        Some("50331648")
    );
    assert_eq!(unified.len(), 2);

    for (key, value, wanted) in [
        ("../../../etc/x", "1", "is not a cgroup v2 file name"),
        ("memory", "1", "is not a cgroup v2 file name"),
        ("memory/high", "1", "is not a cgroup v2 file name"),
        (".high", "1", "is not a cgroup v2 file name"),
        ("Memory.High", "1", "is not a cgroup v2 file name"),
        ("memory.high", "1\nmemory.max 1", "is not one line"),
    ] {
        let mut c = config("c1");
        c.resources.unified = [(key.to_owned(), value.to_owned())].into();
        let err = generate(&c, root.path()).unwrap_err().to_string();
        assert!(err.contains(wanted) && err.contains("c1"), "{key}: {err}");
    }
    let mut c = config("c1");
    c.resources.unified = (0..65)
        .map(|i| (format!("x.f{i}"), "1".to_owned()))
        .collect();
    let err = generate(&c, root.path()).unwrap_err().to_string();
    assert!(err.contains("more than 64"), "{err}");
}

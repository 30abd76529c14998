//! Replays every seed of every target through its `check`, on stable Rust: the fast part of the
//! fuzzing that `cargo xtask test` runs. A reproducer saved under `fuzz/seeds/<target>/` keeps
//! failing here until the bug it found is fixed.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use ocicni_fuzz::{EXTRA_SEED_DIRS, TARGETS};

fn fuzz_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every file under `dir`, recursively (libFuzzer reads corpus directories the same way).
fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files_under(&path, out);
        } else if path.is_file() {
            out.push(path);
        }
    }
}

fn replay(target: &str) {
    let check = TARGETS
        .iter()
        .find(|(name, _)| *name == target)
        .map(|(_, check)| *check)
        .expect("a known target");
    let own = fuzz_dir().join("seeds").join(target);
    let mut files = Vec::new();
    files_under(&own, &mut files);
    assert!(!files.is_empty(), "no seeds in {}", own.display());
    let root = fuzz_dir().parent().expect("fuzz/ is in the workspace");
    for (_, dirs) in EXTRA_SEED_DIRS.iter().filter(|(name, _)| *name == target) {
        for dir in *dirs {
            files_under(&root.join(dir), &mut files);
        }
    }
    files.sort();

    let mut failed = Vec::new();
    for file in &files {
        let data = std::fs::read(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        if catch_unwind(AssertUnwindSafe(|| check(&data))).is_err() {
            failed.push(file.display().to_string());
        }
    }
    assert!(
        failed.is_empty(),
        "{target}: {} of {} seeds fail (the panic of each is printed above):\n  {}",
        failed.len(),
        files.len(),
        failed.join("\n  ")
    );
    println!("{target}: {} seeds hold", files.len());
}

macro_rules! seeds {
    ($($target:ident),* $(,)?) => {$(
        #[test]
        fn $target() {
            replay(stringify!($target));
        }
    )*};
}

seeds!(
    conf,
    result,
    cache_entry,
    cni_args,
    cri_request,
    sysctl,
    unpack_layer,
    registry
);

/// Inputs that found a bug not fixed yet, in `fuzz/regressions/<target>/`: kept out of the seeds
/// (and of libFuzzer's corpus) so the replay stays green, and checked to still fail, so a fix is
/// noticed and the input moves to `fuzz/seeds/<target>/` as a regression seed.
#[test]
fn open_findings_still_fail() {
    let mut fixed = Vec::new();
    for (target, check) in TARGETS {
        let mut files = Vec::new();
        files_under(&fuzz_dir().join("regressions").join(target), &mut files);
        for file in files
            .iter()
            .filter(|f| f.extension().is_none_or(|e| e != "md"))
        {
            let data = std::fs::read(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            if catch_unwind(AssertUnwindSafe(|| check(&data))).is_ok() {
                fixed.push(format!("{} -> fuzz/seeds/{target}/", file.display()));
            }
        }
    }
    assert!(
        fixed.is_empty(),
        "these findings hold now (fixed?); move each to its seeds:\n  {}",
        fixed.join("\n  ")
    );
}

#[test]
fn every_target_is_replayed() {
    let replayed = [
        "conf",
        "result",
        "cache_entry",
        "cni_args",
        "cri_request",
        "sysctl",
        "unpack_layer",
        "registry",
    ];
    for (name, _) in TARGETS {
        assert!(replayed.contains(name), "{name} has no seed test");
    }
}

/// The `cri_request` seeds are protobuf; this writes them from readable requests. Run it after
/// changing the requests below: `cargo test --no-default-features -- --ignored write_cri_seeds`.
#[test]
#[ignore = "writes fuzz/seeds/cri_request"]
fn write_cri_seeds() {
    use cri_api::v1 as cri;
    use prost::Message;

    let metadata = |name: &str| cri::PodSandboxMetadata {
        name: name.into(),
        namespace: "default".into(),
        uid: format!("uid-{name}"),
        attempt: 1,
    };
    let linux = |network: i32, sysctls: &[(&str, &str)]| cri::LinuxPodSandboxConfig {
        security_context: Some(cri::LinuxSandboxSecurityContext {
            namespace_options: Some(cri::NamespaceOption {
                network,
                ..cri::NamespaceOption::default()
            }),
            ..cri::LinuxSandboxSecurityContext::default()
        }),
        sysctls: sysctls
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        ..cri::LinuxPodSandboxConfig::default()
    };
    let full = cri::PodSandboxConfig {
        metadata: Some(metadata("web")),
        hostname: "web".into(),
        log_directory: "/var/log/pods/web".into(),
        dns_config: Some(cri::DnsConfig {
            servers: vec!["10.96.0.10".into(), "fd00::10".into()],
            searches: vec!["default.svc.cluster.local".into()],
            options: vec!["ndots:5".into()],
        }),
        port_mappings: vec![
            cri::PortMapping {
                protocol: 0,
                container_port: 80,
                host_port: 8080,
                host_ip: "0.0.0.0".into(),
            },
            cri::PortMapping {
                protocol: 1,
                container_port: 53,
                host_port: 0,
                host_ip: String::new(),
            },
        ],
        labels: [("app".to_owned(), "web".to_owned())].into(),
        annotations: [("note".to_owned(), "x".to_owned())].into(),
        linux: Some(linux(
            0,
            &[
                ("net.ipv4.ip_forward", "1"),
                ("net/ipv4/conf/all/rp_filter", "0"),
            ],
        )),
        ..cri::PodSandboxConfig::default()
    };
    let host_network = cri::PodSandboxConfig {
        metadata: Some(metadata("host")),
        linux: Some(linux(2, &[])),
        ..cri::PodSandboxConfig::default()
    };
    let host_network_sysctl = cri::PodSandboxConfig {
        metadata: Some(metadata("host-sysctl")),
        linux: Some(linux(2, &[("net.ipv4.ip_forward", "1")])),
        ..cri::PodSandboxConfig::default()
    };
    let no_name = cri::PodSandboxConfig {
        metadata: Some(cri::PodSandboxMetadata {
            name: String::new(),
            ..metadata("x")
        }),
        ..cri::PodSandboxConfig::default()
    };
    let seeds = [
        ("full", full),
        ("host-network", host_network),
        ("host-network-sysctl", host_network_sysctl),
        ("no-name", no_name),
    ];
    let dir = fuzz_dir().join("seeds/cri_request");
    std::fs::create_dir_all(&dir).unwrap();
    for (name, config) in seeds {
        let request = cri::RunPodSandboxRequest {
            config: Some(config),
            runtime_handler: String::new(),
        };
        std::fs::write(dir.join(format!("{name}.pb")), request.encode_to_vec()).unwrap();
    }
}

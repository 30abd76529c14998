//! The real-world corpus in ../shared/testdata/conflists, read in place.

use std::fs;
use std::path::{Path, PathBuf};

use cni_config::{Format, Verdict, load_dir, load_file};
use serde_json::Value;

fn corpus(kind: &str) -> PathBuf {
    // crates/cni-config -> workspace root -> its parent, which holds shared/.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/testdata/conflists")
        .join(kind);
    assert!(
        dir.is_dir(),
        "the shared corpus is missing: {} (clone shared/ beside the workspace)",
        dir.display()
    );
    dir
}

fn files(kind: &str) -> Vec<PathBuf> {
    let mut files: Vec<_> = fs::read_dir(corpus(kind))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
}

#[test]
fn every_valid_file_loads() {
    let files = files("valid");
    assert_eq!(files.len(), 40, "SOURCES.md lists 40 valid files");
    for path in files {
        if let Err(e) = load_file(&path) {
            panic!("{e}");
        }
    }
}

#[test]
fn every_invalid_file_is_rejected_with_a_reason_naming_it() {
    let want = [
        (
            "cilium-00-cilium-cni-trailing-comma.conf",
            "invalid JSON: trailing comma at line 4 column 1",
        ),
        (
            "cni-plugins-docs-vrf-trailing-comma.conflist",
            "invalid JSON: trailing comma",
        ),
        (
            "cni-plugins-host-device-readme-2017-missing-type.conf",
            "type: missing",
        ),
        (
            "cni-spec-1.1.0-example-with-comments.conflist",
            "invalid JSON: key must be a string at line 8",
        ),
        (
            "containers-common-broken-truncated.conflist",
            "invalid JSON: EOF while parsing",
        ),
        (
            "containers-common-invalidname.conflist",
            "name: must start with a letter or digit and contain only letters, digits, '_', '.' and '-', got \"bridge@123\"",
        ),
        ("containers-common-noname.conflist", "name: missing"),
        (
            "containers-common-noplugin-empty-plugins.conflist",
            "plugins: must not be empty",
        ),
        ("crio-99-loopback-noname.conf", "name: missing"),
        (
            "libcni-invalid-cniversions-entry.conflist",
            "cniVersions[2]: invalid CNI version \"1.0.f\": each part must be a decimal number",
        ),
    ];
    let files = files("invalid");
    assert_eq!(files.len(), want.len());
    for path in files {
        let name = path.file_name().unwrap().to_str().unwrap();
        let (_, reason) = want
            .iter()
            .find(|(f, _)| *f == name)
            .unwrap_or_else(|| panic!("no expectation for {name}"));
        let err = load_file(&path).expect_err(name).to_string();
        let prefix = format!("{}: ", path.display());
        assert!(err.starts_with(&prefix), "{err}");
        assert!(err[prefix.len()..].starts_with(reason), "{err}");
    }
}

#[test]
fn loading_the_valid_directory_gives_every_file_a_verdict() {
    let load = load_dir(&corpus("valid")).unwrap();
    assert_eq!(load.files.len(), 40);
    assert_eq!(load.rejected().count(), 0);
    let shadowed = load
        .files
        .iter()
        .filter(|f| matches!(f.verdict, Verdict::Shadowed { .. }))
        .count();
    assert_eq!(load.networks().len() + shadowed, 40);
    // Names are unique and the default is the first file in byte order.
    let default = load.default_network().unwrap();
    assert_eq!(default.name(), "antrea");
    assert!(
        default
            .source
            .as_ref()
            .unwrap()
            .ends_with("antrea-10-antrea.conflist")
    );
    let mut names: Vec<_> = load
        .networks()
        .iter()
        .map(cni_config::NetworkList::name)
        .collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), load.networks().len());
}

#[test]
fn loading_the_invalid_directory_rejects_every_file() {
    let load = load_dir(&corpus("invalid")).unwrap();
    assert_eq!(load.files.len(), 10);
    assert!(load.networks().is_empty());
    assert_eq!(load.rejected().count(), 10);
    for (path, err) in load.rejected() {
        assert_eq!(err.path(), Some(path), "{err}");
    }
}

/// Every key of every real file survives: the serialized list (or the promoted plugin) is the
/// file's JSON with the same values in the same order.
#[test]
fn real_files_survive_parse_and_serialize() {
    for path in files("valid") {
        let network = load_file(&path).unwrap();
        let original: Value = serde_json::from_slice(&network.bytes).unwrap();
        let ours = match network.format {
            Format::Conflist => network.list.to_value(),
            Format::Conf => network.list.plugins[0].to_value(),
            _ => unreachable!("only two formats"),
        };
        assert_eq!(
            serde_json::to_string(&ours).unwrap(),
            serde_json::to_string(&original).unwrap(),
            "{}",
            path.display()
        );
        assert_eq!(&*network.bytes, fs::read(&path).unwrap().as_slice());
    }
}

#[test]
fn versions_are_read_as_libcni_reads_them() {
    let cases = [
        ("libcni-cniversions-1.1.0.conflist", "1.1.0"),
        ("flannel-10-flannel-2016.conf", "0.1.0"),
        ("calico-docs-v3.7-host-local-usepodcidr.conf", "0.1.0"),
        ("cni-readme-10-mynet.conf", "0.2.0"),
        ("crio-test-10-crio-1.1.0.conflist", "1.1.0"),
    ];
    for (file, want) in cases {
        let network = load_file(&corpus("valid").join(file)).unwrap();
        assert_eq!(network.version.to_string(), want, "{file}");
    }
    let flags = load_file(&corpus("valid").join("libcni-50-whatever-disablecheck-string.conflist"))
        .unwrap();
    assert!(flags.list.disable_check);
    let gc = load_file(&corpus("valid").join("crio-test-10-crio-1.1.0.conflist")).unwrap();
    assert!(gc.list.disable_gc);
}

#[test]
fn a_promoted_conf_keeps_what_libcni_caches() {
    let path = corpus("valid").join("cni-readme-10-mynet.conf");
    let network = load_file(&path).unwrap();
    assert_eq!(network.format, Format::Conf);
    assert_eq!(network.name(), "mynet");
    assert_eq!(network.list.cni_version.as_deref(), Some("0.2.0"));
    // libcni's ConfListFromConf marshals {cniVersion, name, plugins: [file object]} with Go's
    // encoding/json: sorted keys, compact.
    let cached = std::str::from_utf8(&network.cache_config).unwrap();
    assert_eq!(
        cached,
        r#"{"cniVersion":"0.2.0","name":"mynet","plugins":[{"bridge":"cni0","cniVersion":"0.2.0","ipMasq":true,"ipam":{"routes":[{"dst":"0.0.0.0/0"}],"subnet":"10.22.0.0/16","type":"host-local"},"isGateway":true,"name":"mynet","type":"bridge"}]}"#
    );
    // For a conflist, the cache holds the exact file bytes.
    let list = load_file(&corpus("valid").join("crio-99-loopback.conflist")).unwrap();
    assert_eq!(list.cache_config, list.bytes);
}

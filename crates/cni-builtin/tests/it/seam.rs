//! The seam: which path `find_plugin` gives for each preference, that everything else goes to
//! the inner `Exec`, and that cni-exec's operations run a built-in as they run a binary.

use std::path::PathBuf;
use std::sync::Arc;

use cni_builtin::{Builtin, BuiltinExec, Preference};
use cni_exec::{Cni, Exec, GcAttachment, ProcessExec, RuntimeConf};
use serde_json::json;

use crate::support::{GO_DIR, leases};

fn exec(preference: Preference) -> BuiltinExec {
    BuiltinExec::new(Arc::new(ProcessExec::new()), preference)
}

#[tokio::test]
async fn find_plugin_follows_the_preference() {
    let empty = tempfile::tempdir().unwrap();
    let go_dirs = [PathBuf::from(GO_DIR)];
    let no_dirs = [empty.path().to_owned()];
    let pseudo = Builtin::HostLocal.pseudo_path();
    let binary = PathBuf::from(GO_DIR).join("host-local");
    assert_eq!(
        exec(Preference::PreferBinary)
            .find_plugin("host-local", &go_dirs)
            .await
            .unwrap(),
        binary
    );
    assert_eq!(
        exec(Preference::PreferBinary)
            .find_plugin("host-local", &no_dirs)
            .await
            .unwrap(),
        pseudo
    );
    assert_eq!(
        exec(Preference::PreferBuiltin)
            .find_plugin("host-local", &go_dirs)
            .await
            .unwrap(),
        pseudo
    );
    assert_eq!(
        exec(Preference::Never)
            .find_plugin("host-local", &go_dirs)
            .await
            .unwrap(),
        binary
    );
    let missing = exec(Preference::Never)
        .find_plugin("host-local", &no_dirs)
        .await;
    assert!(
        matches!(missing, Err(cni_exec::Error::PluginNotFound { .. })),
        "{missing:?}"
    );
    // Not built in: the inner Exec answers.
    assert_eq!(
        exec(Preference::PreferBuiltin)
            .find_plugin("tuning", &go_dirs)
            .await
            .unwrap(),
        PathBuf::from(GO_DIR).join("tuning")
    );
    // portmap is, under the same preferences.
    assert_eq!(
        exec(Preference::PreferBuiltin)
            .find_plugin("portmap", &go_dirs)
            .await
            .unwrap(),
        Builtin::Portmap.pseudo_path()
    );
    assert_eq!(
        exec(Preference::PreferBinary)
            .find_plugin("portmap", &go_dirs)
            .await
            .unwrap(),
        PathBuf::from(GO_DIR).join("portmap")
    );
    assert_eq!(
        exec(Preference::Never)
            .find_plugin("portmap", &no_dirs)
            .await
            .map_err(|_| ()),
        Err(())
    );
    assert_eq!(
        Builtin::from_pseudo_path(&PathBuf::from("builtin:loopback")),
        Some(Builtin::Loopback)
    );
    assert_eq!(
        Builtin::from_pseudo_path(&PathBuf::from("builtin:portmap")),
        Some(Builtin::Portmap)
    );
    assert_eq!(
        Builtin::from_pseudo_path(&PathBuf::from("builtin:tuning")),
        None
    );
}

#[tokio::test]
async fn a_binary_path_runs_the_binary() {
    let version = vec![("CNI_COMMAND".to_owned(), "VERSION".to_owned())];
    let ours = exec(Preference::PreferBuiltin);
    let go = ours
        .exec_plugin(&PathBuf::from(GO_DIR).join("host-local"), &version, b"")
        .await
        .unwrap();
    let builtin = ours
        .exec_plugin(&Builtin::HostLocal.pseudo_path(), &version, b"")
        .await
        .unwrap();
    assert!(!String::from_utf8_lossy(&go.stdout).contains("1.1.0"));
    assert!(String::from_utf8_lossy(&builtin.stdout).contains("1.1.0"));
}

#[test]
fn preferences_spell_as_configured() {
    for p in [
        Preference::PreferBinary,
        Preference::PreferBuiltin,
        Preference::Never,
    ] {
        assert_eq!(p.to_string().parse::<Preference>().unwrap(), p);
    }
    assert_eq!(Preference::default(), Preference::PreferBinary);
    let err = "always".parse::<Preference>().unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid built-in plugin preference \"always\": expected prefer-binary, prefer-builtin or never"
    );
}

/// libcni's operations over a built-in: ADD through the result cache, the plugin's error object
/// as `Error::Plugin`, and GC (1.1.0) releasing what is not valid.
#[tokio::test]
async fn cni_operations_run_a_builtin() {
    let data = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let cni = Cni::new(
        Arc::new(exec(Preference::PreferBuiltin)),
        vec![PathBuf::from(GO_DIR)],
        cache.path().to_owned(),
    );
    let list = |name: &str, subnet: &str| {
        let bytes = serde_json::to_vec(&json!({
            "cniVersion": "1.1.0", "name": name,
            "plugins": [{"type": "host-local", "ipam": {"subnet": subnet, "dataDir": data.path()}}]
        }))
        .unwrap();
        cni_config::parse_conflist(&bytes).unwrap()
    };
    let good = list("e2e", "10.80.0.0/24");
    let rt = RuntimeConf::new("pod1", "/run/netns/pod1", "eth0");
    let result = cni.add_network_list(&good, &rt).await.unwrap();
    assert_eq!(
        result.first_ipv4().map(|ip| ip.ip().to_string()),
        Some("10.80.0.2".to_owned())
    );
    let dir = data.path().join("e2e");
    assert_eq!(leases(&dir).len(), 1);

    let bad = list("e2e-bad", "10.80.0.1/24");
    let err = cni
        .add_network_list(&bad, &RuntimeConf::new("pod2", "/run/netns/pod2", "eth0"))
        .await
        .unwrap_err();
    match &err {
        cni_exec::Error::Plugin { error, .. } => {
            assert_eq!(error.code, 999);
            assert!(
                error
                    .msg
                    .starts_with("invalid range set 0: Network has host bits set"),
                "{err}"
            );
        }
        other => panic!("expected the plugin's error object, got {other}"),
    }

    cni.gc_network_list(&good, &[GcAttachment::new("other", "eth0")])
        .await
        .unwrap();
    assert!(leases(&dir).is_empty(), "{:?}", leases(&dir));
}

//! OCI hooks from a hooks directory, injected into a spec and run by a real runtime.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use oci_container::Hooks;

use crate::support::{Fixture, config, runtimes};

/// Writes a hook that saves the state the runtime gives it on stdin into the file named by its
/// first argument, and two hook files: one for containers annotated `io.example.marker=yes`, one
/// for a command no container runs.
fn hooks_dir(dir: &Path) -> std::path::PathBuf {
    let script = dir.join("save-state.sh");
    // runtimes give hooks no PATH: absolute paths only
    std::fs::write(&script, "#!/bin/sh\n/bin/cat > \"$1\"\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let hooks = dir.join("hooks.d");
    std::fs::create_dir(&hooks).unwrap();
    let file = |name: &str, when: serde_json::Value, stage: &str, marker: &str| {
        let json = serde_json::json!({
            "version": "1.0.0",
            "hook": {"path": script, "args": ["save-state", dir.join(marker)], "timeout": 10},
            "when": when,
            "stages": [stage],
        });
        std::fs::write(hooks.join(name), serde_json::to_vec_pretty(&json).unwrap()).unwrap();
    };
    file(
        "10-marker.json",
        serde_json::json!({"annotations": {"^io\\.example\\.marker$": "^yes$"}}),
        "prestart",
        "marker-prestart",
    );
    file(
        "20-create-runtime.json",
        serde_json::json!({"annotations": {"^io\\.example\\.marker$": "^yes$"}}),
        "createRuntime",
        "marker-create-runtime",
    );
    file(
        "30-never.json",
        serde_json::json!({"commands": ["^/no/such/program$"]}),
        "createRuntime",
        "marker-never",
    );
    hooks
}

/// Hooks whose `when` matches run when the runtime creates the container, with its state on
/// stdin; a hook whose `when` does not match does not run.
#[tokio::test]
#[ignore = "needs root: cargo xtask test"]
async fn matching_hooks_run_at_create_and_others_do_not() {
    for (name, path) in runtimes() {
        let fx = Fixture::new(&path);
        let dir = fx.dir.path().join("hook-files");
        std::fs::create_dir(&dir).unwrap();
        let (hooks, errors) = Hooks::load(&[hooks_dir(&dir)]);
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(hooks.len(), 3);

        // (annotated, markers expected)
        let cases = [(true, true), (false, false)];
        for (annotated, runs) in cases {
            let id = test_support::unique_name(&format!("hooks-{annotated}-{name}"));
            let mut cfg = config(&id, &["/bin/busybox", "true"]);
            if annotated {
                cfg.annotations = BTreeMap::from([("io.example.marker".into(), "yes".into())]);
            }
            let mut spec = oci_container::generate(&cfg, &fx.rootfs).unwrap();
            let injected = hooks.apply(&mut spec, &cfg.annotations, !cfg.mounts.is_empty());
            assert_eq!(injected.len(), if runs { 2 } else { 0 }, "{injected:?}");
            let bundle = fx.bundle_of(&id, &spec);

            fx.runtime
                .create(&id, &bundle, &fx.log_path(&id))
                .await
                .unwrap();
            for marker in ["marker-prestart", "marker-create-runtime"] {
                let marker = dir.join(marker);
                if runs {
                    // createRuntime hooks have run once `create` returns
                    let state: serde_json::Value =
                        serde_json::from_slice(&std::fs::read(&marker).unwrap()).unwrap();
                    assert_eq!(state["id"], id.as_str(), "{name}: {}", marker.display());
                    std::fs::remove_file(&marker).unwrap();
                } else {
                    assert!(!marker.exists(), "{name}: {} exists", marker.display());
                }
            }
            fx.runtime.start(&id).await.unwrap();
            assert_eq!(
                fx.runtime
                    .wait(&id, std::time::Duration::from_secs(20))
                    .await
                    .unwrap(),
                0
            );
            fx.runtime.delete(&id).await.unwrap();
            assert!(
                !dir.join("marker-never").exists(),
                "{name}: the unmatched hook ran"
            );
        }
    }
}

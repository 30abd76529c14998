//! What error messages say about plugins that fail in awkward ways: which plugin, which network,
//! and never a raw line break or control character from the plugin's own output.

use cni_exec::{Error, RuntimeConf};
use serde_json::json;

use crate::support::{Fixture, network};

fn rt(container: &str) -> RuntimeConf {
    RuntimeConf::new(container, "/var/run/netns/test", "eth0")
}

/// Fails unless `text` holds no control character (a plugin could forge log lines with them).
fn assert_one_line(text: &str) {
    assert!(
        !text
            .chars()
            .any(|c| c.is_control() || c == '\u{2028}' || c == '\u{2029}'),
        "raw control characters in {text:?}"
    );
}

#[tokio::test]
async fn a_bad_interpreter_is_named_with_the_plugin_path_and_the_network() {
    let fx = Fixture::new(&[]);
    let path = fx.plugins.path().join("badshebang");
    test_support::fs::write_executable(&path, "#!/nonexistent/interp\necho hi\n");
    let net = network("shebangnet", "1.0.0", vec![json!({"type": "badshebang"})]);

    let err = fx.cni.validate_network_list(&net).await.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, Error::Validation { .. }), "{err:?}");
    assert!(!text.contains(r#"network """#), "{text}");
    assert_eq!(
        text,
        format!(
            "network \"shebangnet\" is not usable: plugin \"badshebang\" (VERSION): cannot start \
             plugin {}: its interpreter /nonexistent/interp (from its #! line) does not exist",
            path.display()
        )
    );

    // Run for a pod, the same plugin is named with its network and container.
    let err = fx.cni.add_network_list(&net, &rt("c1")).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "plugin \"badshebang\" (ADD) on network \"shebangnet\", container c1: cannot start \
             plugin {}: its interpreter /nonexistent/interp (from its #! line) does not exist",
            path.display()
        )
    );
}

#[tokio::test]
async fn plugin_output_cannot_start_a_log_line_of_its_own() {
    let fx = Fixture::new(&["fake"]);
    let forged = "line1\nFAKE LOG LINE\r\u{1b}[31mred\u{2028}sep";
    let cases = [
        // Spec error object, with the stderr tail after it.
        json!({"fail": {"code": 11, "msg": forged, "details": forged}, "stderr": forged}),
        // Exit 3 without JSON on stdout: the stderr tail.
        json!({"crash": "exit3-no-json", "stderr": forged}),
        // Exit 0 with garbage: the invalid result and its stderr.
        json!({"garbage": true, "stderr": forged}),
    ];
    for fake in cases {
        let net = network("fakenet", "1.0.0", vec![fx.plugin("fake", fake.clone())]);
        let err = fx.cni.add_network_list(&net, &rt("c1")).await.unwrap_err();
        let text = err.to_string();
        assert_one_line(&text);
        assert!(
            text.contains(r"line1\nFAKE LOG LINE\r\u{1b}[31mred\u{2028}sep"),
            "{fake}: {text}"
        );
    }

    // A plugin that prints a non-JSON error on stdout and exits 1.
    let script = fx.plugins.script(
        "script",
        "printf 'out1\\nFAKE OUT LINE'\nprintf 'err1\\nFAKE ERR LINE' >&2\nexit 1",
    );
    assert!(script.exists());
    let net = network("scriptnet", "1.0.0", vec![json!({"type": "script"})]);
    let text = fx
        .cni
        .add_network_list(&net, &rt("c2"))
        .await
        .unwrap_err()
        .to_string();
    assert_one_line(&text);
    assert!(text.contains(r"stdout: out1\nFAKE OUT LINE"), "{text}");
    assert!(text.contains(r"stderr: err1\nFAKE ERR LINE"), "{text}");
}

//! What error messages say about plugins that fail in awkward ways: which plugin, which network.

use cni_exec::{Error, RuntimeConf};
use serde_json::json;

use crate::support::{Fixture, network};

fn rt(container: &str) -> RuntimeConf {
    RuntimeConf::new(container, "/var/run/netns/test", "eth0")
}

#[tokio::test]
async fn a_bad_interpreter_is_named_with_the_plugin_path_and_the_network() {
    let fx = Fixture::new(&[]);
    let path = fx.plugins.path().join("badshebang");
    std::fs::write(&path, "#!/nonexistent/interp\necho hi\n").unwrap();
    crate::support::set_mode(&path, 0o755);
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

//! host-local, differential: every step runs through `/usr/lib/cni/host-local` and through the
//! built-in, each with a lease directory of its own; stdout must be byte-equal after every step,
//! and so must the two directories (names, modes, bytes).

use serde_json::{Value, json};

use crate::support::{builtin, env, go, snapshot, with_data_dir};

#[derive(Debug, Clone, Copy)]
struct Step {
    command: &'static str,
    id: &'static str,
    ifname: &'static str,
    args: &'static str,
}

const fn add(id: &'static str) -> Step {
    Step {
        command: "ADD",
        id,
        ifname: "eth0",
        args: "",
    }
}

const fn del(id: &'static str) -> Step {
    Step {
        command: "DEL",
        ..add(id)
    }
}

const fn check(id: &'static str) -> Step {
    Step {
        command: "CHECK",
        ..add(id)
    }
}

async fn differential(name: &str, config: &Value, steps: &[Step]) {
    let go_dir = tempfile::tempdir().unwrap();
    let rs_dir = tempfile::tempdir().unwrap();
    let net = config["name"].as_str().unwrap_or_default();
    for (i, step) in steps.iter().enumerate() {
        let env = env(
            step.command,
            step.id,
            step.ifname,
            "/run/netns/none",
            step.args,
        );
        let want = go("host-local", &env, &with_data_dir(config, go_dir.path())).await;
        let got = builtin("host-local", &env, &with_data_dir(config, rs_dir.path())).await;
        assert_eq!(
            got.text(),
            want.text(),
            "{name}, step {i} {step:?}: stdout differs (left: built-in, right: Go)"
        );
        assert_eq!(
            got.ok, want.ok,
            "{name}, step {i} {step:?}: outcome differs"
        );
        assert_eq!(
            snapshot(&rs_dir.path().join(net)),
            snapshot(&go_dir.path().join(net)),
            "{name}, step {i} {step:?}: the lease directories differ (left: built-in, right: Go)"
        );
    }
}

#[tokio::test]
async fn legacy_subnet_in_every_version() {
    for version in ["", "0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0"] {
        let config = json!({
            "cniVersion": version, "name": "legacy", "type": "bridge",
            "ipam": {"type": "host-local", "subnet": "10.10.0.0/24",
                "routes": [{"dst": "0.0.0.0/0"}, {"dst": "192.168.7.0/24", "gw": "10.10.0.9"}]}
        });
        let steps = [
            add("c1"),
            add("c2"),
            check("c1"),
            del("c1"),
            add("c3"),
            del("c2"),
            del("c3"),
        ];
        differential(&format!("legacy {version:?}"), &config, &steps).await;
    }
}

#[tokio::test]
async fn range_sets_dual_stack_and_round_robin() {
    let config = json!({
        "cniVersion": "1.0.0", "name": "dual",
        "ipam": {"type": "host-local",
            "ranges": [
                [{"subnet": "10.20.0.0/29", "gateway": "10.20.0.6"},
                 {"subnet": "10.20.1.0/24", "rangeStart": "10.20.1.100", "rangeEnd": "10.20.1.102"}],
                [{"subnet": "fd00:20::/120", "rangeStart": "fd00:20::10", "rangeEnd": "fd00:20::13"}]
            ],
            "routes": [{"dst": "0.0.0.0/0"}, {"dst": "::/0", "gw": "fd00:20::1"}]}
    });
    let mut steps = Vec::new();
    // Fill the v6 set (four addresses), fail on the fifth, release one, and go round.
    for id in ["a1", "a2", "a3", "a4", "a5"] {
        steps.push(add(id));
    }
    steps.extend([
        del("a2"),
        add("a6"),
        add("a7"),
        del("a1"),
        del("a3"),
        add("a8"),
        check("a8"),
    ]);
    differential("dual stack", &config, &steps).await;
    // Going round a v4 set of two ranges, the gateway in the middle skipped.
    let v4 = json!({
        "cniVersion": "0.4.0", "name": "rr",
        "ipam": {"type": "host-local", "ranges": [[
            {"subnet": "10.21.0.0/29", "gateway": "10.21.0.3"},
            {"subnet": "10.21.1.0/30"}]]}
    });
    let mut steps = Vec::new();
    for id in ["b1", "b2", "b3", "b4", "b5", "b6", "b7", "b8"] {
        steps.push(add(id));
    }
    steps.extend([del("b3"), del("b5"), add("b9"), add("b10"), add("b11")]);
    differential("round robin", &v4, &steps).await;
}

#[tokio::test]
async fn requested_addresses_and_duplicates() {
    // Two addresses asked for in one range set are taken in Go's map order, at random: each
    // configuration here asks for at most one per set.
    let config = json!({
        "cniVersion": "0.4.0", "name": "asked",
        "ipam": {"type": "host-local", "subnet": "10.30.0.0/24"}
    });
    let env_ip = Step {
        args: "IgnoreUnknown=1;K8S_POD_NAME=p;IP=10.30.0.7",
        ..add("r2")
    };
    let steps = [
        add("r1"),
        // The same attachment again: a duplicate.
        add("r1"),
        env_ip,
        Step {
            args: "IP=10.30.0.1",
            ..add("r3")
        },
        Step {
            args: "K8S_POD_NAME=p",
            ..add("r4")
        },
        Step {
            args: "IP=10.99.0.1",
            ..add("r5")
        },
        del("r1"),
        del("r2"),
    ];
    differential("requested", &config, &steps).await;
    let in_args = json!({
        "cniVersion": "0.4.0", "name": "asked",
        "args": {"cni": {"ips": ["10.30.0.40"]}},
        "ipam": {"type": "host-local", "subnet": "10.30.0.0/24"}
    });
    differential(
        "args.cni.ips",
        &in_args,
        &[add("r1"), add("r2"), del("r1"), add("r2")],
    )
    .await;
    let runtime = json!({
        "cniVersion": "1.0.0", "name": "rt",
        "runtimeConfig": {"ips": ["10.31.0.9/24", "fd00:31::9"],
            "ipRanges": [[{"subnet": "fd00:31::/64"}]]},
        "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.31.0.0/24"}]]}
    });
    differential(
        "runtime ips",
        &runtime,
        &[add("t1"), add("t2"), del("t1"), add("t3")],
    )
    .await;
}

#[tokio::test]
async fn resolv_conf_fills_dns() {
    let dir = tempfile::tempdir().unwrap();
    let resolv = dir.path().join("resolv.conf");
    std::fs::write(
        &resolv,
        "# comment\nnameserver 10.0.0.53\nnameserver fd00::53\ndomain example.org\nsearch a.example b.example\noptions ndots:5 edns0\n; also\n",
    )
    .unwrap();
    let config = json!({
        "cniVersion": "1.0.0", "name": "dns",
        "ipam": {"type": "host-local", "subnet": "10.40.0.0/24", "resolvConf": resolv}
    });
    differential("resolvConf", &config, &[add("d1")]).await;
    let missing = json!({
        "cniVersion": "1.0.0", "name": "dns",
        "ipam": {"type": "host-local", "subnet": "10.40.0.0/24", "resolvConf": "/nonexistent/resolv.conf"}
    });
    differential("resolvConf missing", &missing, &[add("d1")]).await;
}

/// Configurations both refuse: the same stdout, so the same code and message.
#[tokio::test]
async fn bad_configs_fail_alike() {
    let ipam = |ipam: Value| json!({"cniVersion": "0.4.0", "name": "bad", "ipam": ipam});
    let cases = [
        json!({"cniVersion": "0.4.0", "name": "bad"}),
        ipam(json!({"type": "host-local"})),
        ipam(json!({"subnet": "10.0.0.0/31"})),
        ipam(json!({"subnet": "10.0.0.1/24"})),
        ipam(json!({"subnet": "nonsense"})),
        ipam(json!({"subnet": "10.0.0.0/24", "rangeStart": "10.0.1.1"})),
        ipam(json!({"subnet": "10.0.0.0/24", "rangeStart": "10.0.0.50", "rangeEnd": "10.0.0.10"})),
        ipam(json!({"subnet": "10.0.0.0/24", "rangeEnd": "10.0.9.1"})),
        ipam(json!({"subnet": "10.0.0.0/24", "gateway": "not-an-ip"})),
        ipam(json!({"ranges": [[]]})),
        ipam(json!({"ranges": [[{"subnet": "10.0.0.0/24"}, {"subnet": "fd00::/64"}]]})),
        ipam(json!({"ranges": [[{"subnet": "10.0.0.0/24"}, {"subnet": "10.0.0.0/25"}]]})),
        ipam(json!({"ranges": [[{"subnet": "10.0.0.0/24"}], [{"subnet": "10.0.0.128/25"}]]})),
        ipam(json!({"ranges": [[{"rangeStart": "10.0.0.1"}]]})),
        json!({"cniVersion": "0.2.0", "name": "bad", "ipam": {"ranges": [[{"subnet": "10.0.0.0/24"}], [{"subnet": "10.1.0.0/24"}]]}}),
        json!({"cniVersion": "0.4.0", "ipam": {"subnet": "10.0.0.0/24"}}),
        json!({"cniVersion": "0.4.0", "name": "bad name", "ipam": {"subnet": "10.0.0.0/24"}}),
        json!({"cniVersion": "0.4.0", "name": "bad", "args": {"cni": {"ips": ["10.0.0.300"]}}, "ipam": {"subnet": "10.0.0.0/24"}}),
        json!({"cniVersion": "0.4.0", "name": "bad", "args": {"cni": {"ips": [""]}}, "ipam": {"subnet": "10.0.0.0/24"}}),
    ];
    for (i, config) in cases.iter().enumerate() {
        differential(&format!("bad config {i}: {config}"), config, &[add("x1")]).await;
    }
}

/// A lease directory that is a file: the same error, naming it.
#[tokio::test]
async fn a_network_dir_that_is_a_file() {
    let data = tempfile::tempdir().unwrap();
    std::fs::write(data.path().join("blocked"), "x").unwrap();
    let config = with_data_dir(
        &json!({"cniVersion": "1.0.0", "name": "blocked", "ipam": {"subnet": "10.0.0.0/24"}}),
        data.path(),
    );
    for command in ["ADD", "DEL", "CHECK"] {
        let env = env(command, "x1", "eth0", "/run/netns/none", "");
        let want = go("host-local", &env, &config).await;
        let got = builtin("host-local", &env, &config).await;
        assert_eq!(got, want, "{command}: {} vs {}", got.text(), want.text());
        assert!(got.text().contains("not a directory"), "{}", got.text());
    }
}

/// An unknown version: the same code and message; the details list the supported versions,
/// where the built-in has 1.1.0 besides.
#[tokio::test]
async fn unknown_versions_are_refused_alike() {
    let data = tempfile::tempdir().unwrap();
    let config = with_data_dir(
        &json!({"cniVersion": "9.9.9", "name": "bad", "ipam": {"subnet": "10.0.0.0/24"}}),
        data.path(),
    );
    let env = env("ADD", "x1", "eth0", "/run/netns/none", "");
    let (want, got) = (
        go("host-local", &env, &config).await.json(),
        builtin("host-local", &env, &config).await.json(),
    );
    assert_eq!((&got["code"], &got["msg"]), (&want["code"], &want["msg"]));
    assert_eq!(
        got["details"].as_str().unwrap(),
        want["details"]
            .as_str()
            .unwrap()
            .replace(r#""1.0.0"]"#, r#""1.0.0" "1.1.0"]"#)
    );
}

/// Where Go's JSON errors are worded in ways not worth copying byte for byte, the code is the
/// same.
#[tokio::test]
async fn type_errors_have_the_same_code() {
    let cases: [&[u8]; 7] = [
        b"{",
        b"[]",
        br#"{"name": 5}"#,
        br#"{"name": "n", "cniVersion": 4}"#,
        br#"{"name": "n", "cniVersion": "0.4.0", "ipam": 5}"#,
        br#"{"name": "n", "cniVersion": "0.4.0", "ipam": {"ranges": {}}}"#,
        br#"{"name": "n", "cniVersion": "0.4.0", "ipam": {"subnet": 10}}"#,
    ];
    let data = tempfile::tempdir().unwrap();
    for stdin in cases {
        let mut stdin = stdin.to_vec();
        if let Ok(mut v) = serde_json::from_slice::<Value>(&stdin)
            && v["ipam"].is_object()
        {
            v["ipam"]["dataDir"] = json!(data.path());
            stdin = serde_json::to_vec(&v).unwrap();
        }
        let env = env("ADD", "x1", "eth0", "/run/netns/none", "");
        let want = go("host-local", &env, &stdin).await;
        let got = builtin("host-local", &env, &stdin).await;
        let input = String::from_utf8_lossy(&stdin);
        assert!(!want.ok && !got.ok, "{input}: both must fail");
        assert_eq!(
            got.code(),
            want.code(),
            "{input}: {} vs {}",
            got.text(),
            want.text()
        );
    }
}

/// The skeleton's checks of the environment.
#[tokio::test]
async fn environment_errors_match() {
    let data = tempfile::tempdir().unwrap();
    let config = with_data_dir(
        &json!({"cniVersion": "0.4.0", "name": "envs", "ipam": {"subnet": "10.50.0.0/24"}}),
        data.path(),
    );
    let mut cases = vec![
        env("ADD", "", "eth0", "/x", ""),
        env("ADD", "-bad", "eth0", "/x", ""),
        env("ADD", "c1", "", "/x", ""),
        env("ADD", "c1", "averyveryverylongname", "/x", ""),
        env("ADD", "c1", "et h0", "/x", ""),
        env("ADD", "c1", "..", "/x", ""),
        env("ADD", "c1", "eth0", "", ""),
        env("ADD", "c1", "eth0", "/x", "IP"),
        env("ADD", "c1", "eth0", "/x", "IgnoreUnknown=maybe"),
        env("ADD", "c1", "eth0", "/x", "IP=nope"),
        env("FROB", "c1", "eth0", "/x", ""),
        env("CHECK", "c9", "eth0", "/x", ""),
    ];
    let mut no_path = env("DEL", "c1", "eth0", "", "");
    no_path.retain(|(k, _)| k != "CNI_PATH");
    cases.push(no_path);
    for env in &cases {
        let want = go("host-local", env, &config).await;
        let got = builtin("host-local", env, &config).await;
        assert_eq!(got, want, "{env:?}: {} vs {}", got.text(), want.text());
    }
    // Without CNI_COMMAND both print nothing on stdout and succeed.
    let none: Vec<(String, String)> = Vec::new();
    assert_eq!(
        builtin("host-local", &none, &config).await,
        go("host-local", &none, &config).await
    );
}

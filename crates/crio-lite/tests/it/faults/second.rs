//! A second crio-lite started while the first one has a sandbox in creation: it must stop with an
//! error naming the lock it could not take, and change nothing; the first one's sandbox finishes.

use std::collections::BTreeMap;
use std::net::IpAddr;

use test_support::fs::file_names;

use super::{
    Row, arm, assert_only, assert_serving, exits_within, finish_clean, flags_with, install_plugins,
    release, run_table, spawn_in_node, stop_and_remove_all, wait_hit, within,
};
use crate::e2e_support::{self, GATEWAY, Node, ready_ip, run};

/// What the second daemon shares with the first, and the lock file its error must name.
struct Second {
    own_socket: bool,
    own_state_dir: bool,
    lock: &'static str,
}

fn rows() -> Vec<Row<Second>> {
    vec![
        Row {
            name: "same state dir and socket",
            fast: true,
            injected: "a second crio-lite with the first one's flags while bridge ADD of a new \
                       sandbox is held",
            asserted: "it exits non-zero naming crio-lite.lock, changes no state file; the first \
                       daemon serves and its sandbox becomes ready, nothing leaks",
            known: None,
            case: Second {
                own_socket: false,
                own_state_dir: false,
                lock: "crio-lite.lock",
            },
        },
        Row {
            name: "same state dir, own socket",
            fast: false,
            injected: "a second crio-lite on the same state dir with a socket of its own",
            asserted: "it exits non-zero naming crio-lite.lock; the first one's sandbox finishes",
            known: None,
            case: Second {
                own_socket: true,
                own_state_dir: false,
                lock: "crio-lite.lock",
            },
        },
        Row {
            name: "same socket, own state dir",
            fast: false,
            injected: "a second crio-lite on the same socket with a state dir of its own",
            asserted: "it exits non-zero naming crio-lite.sock.lock, the socket stays the first \
                       one's; the first one's sandbox finishes",
            known: None,
            case: Second {
                own_socket: false,
                own_state_dir: true,
                lock: "crio-lite.sock.lock",
            },
        },
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root + netns: cargo xtask test"]
async fn second_daemon_changes_nothing() {
    run_table("second", rows(), second_case).await;
}

/// Every state file by name, with its bytes.
fn state_files(node: &Node) -> BTreeMap<String, Vec<u8>> {
    let dir = node.state_dir().join("sandboxes");
    file_names(&dir)
        .into_iter()
        .map(|f| {
            let bytes = std::fs::read(dir.join(&f)).unwrap_or_default();
            (f, bytes)
        })
        .collect()
}

async fn second_case(tag: String, second: Second) {
    let mut node = Node::new(&tag);
    let _reaper = install_plugins(&mut node, None);
    node.start().await;
    let mut client = node.client().await;
    let keep = within(
        30,
        "RunPodSandbox keep",
        run(&mut client, "keep", Some(8081)),
    )
    .await;
    let keep_ip = ready_ip(&mut client, &keep).await;

    arm(&node, "bridge", "ADD", "before");
    let call = {
        let mut client = client.clone();
        tokio::spawn(async move {
            client
                .run_pod_sandbox(e2e_support::pod("new", Some(8082)))
                .await
                .map(|r| r.into_inner().pod_sandbox_id)
        })
    };
    let hit = wait_hit(&node).await;
    let before = state_files(&node);
    let cache_before = node.cache_entries();

    let mut replaced = Vec::new();
    if second.own_socket {
        replaced.push(("--listen", node.path("second.sock").display().to_string()));
    }
    if second.own_state_dir {
        replaced.push(("--root", node.path("second-state").display().to_string()));
    }
    let mut args = flags_with(&node, &replaced);
    args.extend([
        "--log-level".to_owned(),
        "info".to_owned(),
        "run".to_owned(),
    ]);
    let out = exits_within(spawn_in_node(&node, &args), 20, "the second crio-lite").await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "the second daemon must fail: {stderr}"
    );
    assert!(
        stderr.contains("another crio-lite is running") && stderr.contains(second.lock),
        "the second daemon's error names the lock {}: {stderr}",
        second.lock
    );
    assert!(node.socket().exists(), "the first daemon's socket is kept");
    assert_eq!(
        state_files(&node),
        before,
        "the second daemon changed no state file"
    );
    assert_eq!(
        node.cache_entries(),
        cache_before,
        "the second daemon changed no cache entry"
    );
    assert_serving(&mut client).await;

    release(&node);
    let new = within(60, "the held RunPodSandbox", call)
        .await
        .expect("the call's task")
        .expect("the first daemon's sandbox creation finishes");
    assert_eq!(new, hit.container, "the held creation is the new sandbox");
    let new_ip = ready_ip(&mut client, &new).await;
    assert_eq!(ready_ip(&mut client, &keep).await, keep_ip);
    node.ping(&new, IpAddr::V4(GATEWAY))
        .expect("the new sandbox's network works");
    node.ping(&keep, new_ip)
        .expect("the sandboxes reach each other");
    assert_only(
        &node,
        &[(keep.clone(), keep_ip), (new.clone(), new_ip)],
        &[],
        &[],
    );

    let ids = stop_and_remove_all(&mut client).await;
    drop(client);
    finish_clean(&mut node, &ids).await;
}

//! One lease directory, both plugins: what one adds the other deletes, round robin carries on
//! across them, and concurrent ADDs from both never hand out one address twice.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::{Value, json};
use tokio::task::JoinSet;

use crate::support::{Run, builtin, env, go, leases, snapshot, with_data_dir};

fn config(name: &str, subnet: &str) -> Value {
    json!({"cniVersion": "1.0.0", "name": name, "ipam": {"type": "host-local", "subnet": subnet}})
}

async fn run(go_side: bool, command: &str, id: &str, stdin: &[u8]) -> Run {
    let env = env(command, id, "eth0", "/run/netns/none", "");
    if go_side {
        go("host-local", &env, stdin).await
    } else {
        builtin("host-local", &env, stdin).await
    }
}

/// ADD by one side, DEL by the other: no lease left, and the directory as the Go plugin alone
/// leaves it (its lock and last_reserved_ip.0).
#[tokio::test]
async fn one_adds_the_other_deletes() {
    let reference = tempfile::tempdir().unwrap();
    let stdin = with_data_dir(&config("cross", "10.60.0.0/24"), reference.path());
    assert!(run(true, "ADD", "c1", &stdin).await.ok);
    assert!(run(true, "DEL", "c1", &stdin).await.ok);
    let expected = snapshot(&reference.path().join("cross"));
    assert_eq!(
        expected.keys().collect::<Vec<_>>(),
        ["last_reserved_ip.0", "lock"]
    );
    for go_adds in [true, false] {
        let data = tempfile::tempdir().unwrap();
        let stdin = with_data_dir(&config("cross", "10.60.0.0/24"), data.path());
        let added = run(go_adds, "ADD", "c1", &stdin).await;
        assert!(added.ok, "{}", added.text());
        let dir = data.path().join("cross");
        assert_eq!(
            leases(&dir).into_iter().collect::<Vec<_>>(),
            [("10.60.0.2".to_owned(), "c1\r\neth0".to_owned())]
        );
        // The other side checks it, then deletes it.
        assert!(run(!go_adds, "CHECK", "c1", &stdin).await.ok);
        let deleted = run(!go_adds, "DEL", "c1", &stdin).await;
        assert!(deleted.ok, "{}", deleted.text());
        assert_eq!(snapshot(&dir), expected, "go adds: {go_adds}");
        // And DEL again is fine for both.
        assert!(run(go_adds, "DEL", "c1", &stdin).await.ok);
    }
}

/// Alternating plugins continue each other's round robin from last_reserved_ip.
#[tokio::test]
async fn round_robin_carries_across_plugins() {
    let data = tempfile::tempdir().unwrap();
    let stdin = with_data_dir(&config("rr", "10.61.0.0/24"), data.path());
    let mut got = Vec::new();
    for (i, id) in ["c1", "c2", "c3", "c4"].iter().enumerate() {
        let out = run(i % 2 == 0, "ADD", id, &stdin).await;
        got.push(out.json()["ips"][0]["address"].as_str().unwrap().to_owned());
        if i == 1 {
            assert!(run(true, "DEL", "c1", &stdin).await.ok);
        }
    }
    assert_eq!(
        got,
        [
            "10.61.0.2/24",
            "10.61.0.3/24",
            "10.61.0.4/24",
            "10.61.0.5/24"
        ]
    );
}

async fn parallel_adds(dir: &Path, name: &str, subnet: &str, count: usize) -> Vec<(String, Run)> {
    let stdin = with_data_dir(&config(name, subnet), dir);
    let mut set = JoinSet::new();
    for i in 0..count {
        let stdin = stdin.clone();
        set.spawn(async move {
            let id = format!("par{i}");
            let out = run(i % 2 == 0, "ADD", &id, &stdin).await;
            (id, out)
        });
    }
    let mut all = Vec::new();
    while let Some(done) = set.join_next().await {
        all.push(done.unwrap());
    }
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_adds_never_share_an_address() {
    let data = tempfile::tempdir().unwrap();
    let all = parallel_adds(data.path(), "par", "10.62.0.0/27", 20).await;
    let mut addresses = BTreeSet::new();
    for (id, out) in &all {
        assert!(out.ok, "{id}: {}", out.text());
        let address = out.json()["ips"][0]["address"].as_str().unwrap().to_owned();
        assert!(
            addresses.insert(address.clone()),
            "{address} handed out twice"
        );
    }
    let dir = data.path().join("par");
    let leases = leases(&dir);
    assert_eq!(leases.len(), 20);
    for (id, out) in &all {
        let address = out.json()["ips"][0]["address"].as_str().unwrap().to_owned();
        let ip = address.split('/').next().unwrap();
        assert_eq!(leases[ip], format!("{id}\r\neth0"));
    }
    // Each side deletes what the other added, all at once.
    let stdin = with_data_dir(&config("par", "10.62.0.0/27"), data.path());
    let mut set = JoinSet::new();
    for i in 0..20 {
        let stdin = stdin.clone();
        set.spawn(async move { run(i % 2 == 1, "DEL", &format!("par{i}"), &stdin).await });
    }
    while let Some(done) = set.join_next().await {
        let out = done.unwrap();
        assert!(out.ok, "{}", out.text());
    }
    assert!(self::leases(&dir).is_empty(), "{:?}", self::leases(&dir));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_adds_past_exhaustion_fail_cleanly() {
    let data = tempfile::tempdir().unwrap();
    // .2 to .14: 13 addresses for 20 attachments.
    let all = parallel_adds(data.path(), "full", "10.63.0.0/28", 20).await;
    let won: Vec<&Run> = all.iter().map(|(_, r)| r).filter(|r| r.ok).collect();
    let lost: Vec<&Run> = all.iter().map(|(_, r)| r).filter(|r| !r.ok).collect();
    assert_eq!((won.len(), lost.len()), (13, 7));
    for out in lost {
        assert_eq!(
            out.json(),
            json!({"code": 999, "msg": "failed to allocate for range 0: no IP addresses available in range set: 10.63.0.1-10.63.0.14"})
        );
    }
    let distinct: BTreeSet<String> = won
        .iter()
        .map(|r| r.json()["ips"][0]["address"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(distinct.len(), 13);
    assert_eq!(leases(&data.path().join("full")).len(), 13);
}

/// Both plugins wait on the same `lock` file: held by someone else, neither can allocate.
#[tokio::test]
async fn both_wait_for_the_same_flock() {
    use std::sync::Arc;
    use std::time::Duration;

    use cni_builtin::{Builtin, BuiltinExec, Preference};
    use cni_exec::{Exec, ProcessExec};
    use rustix::fs::{FlockOperation, flock};

    let data = tempfile::tempdir().unwrap();
    let stdin = with_data_dir(&config("locked", "10.64.0.0/24"), data.path());
    // Let a first ADD make the directory and its lock file.
    assert!(run(false, "ADD", "first", &stdin).await.ok);
    let lock = std::fs::File::open(data.path().join("locked/lock")).unwrap();
    flock(&lock, FlockOperation::LockExclusive).unwrap();

    let env = env("ADD", "c1", "eth0", "/run/netns/none", "");
    let short = Duration::from_millis(400);
    let ours = BuiltinExec::new(Arc::new(ProcessExec::new()), Preference::PreferBuiltin)
        .with_timeout(short);
    let waited = ours
        .exec_plugin(&Builtin::HostLocal.pseudo_path(), &env, &stdin)
        .await;
    assert!(
        matches!(
            waited,
            Err(cni_exec::Error::Timeout { .. } | cni_exec::Error::Failed { .. })
        ),
        "the built-in must not allocate while the lock is held: {waited:?}"
    );
    let go_waited = ProcessExec::new()
        .with_timeout(short)
        .exec_plugin(
            &Path::new(crate::support::GO_DIR).join("host-local"),
            &env,
            &stdin,
        )
        .await;
    assert!(
        matches!(go_waited, Err(cni_exec::Error::Timeout { .. })),
        "the Go plugin must wait for the lock: {go_waited:?}"
    );
    assert_eq!(leases(&data.path().join("locked")).len(), 1);

    flock(&lock, FlockOperation::Unlock).unwrap();
    let after = run(false, "ADD", "c1", &stdin).await;
    assert!(after.ok, "{}", after.text());
}

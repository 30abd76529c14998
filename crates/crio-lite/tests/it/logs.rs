//! Logs a log pipeline can parse: `--log-format json` writes one JSON object a line, and the
//! records of a sandbox operation carry the sandbox, pod and namespace as fields.

use serde_json::Value;

use crate::e2e_support::{self, Node};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root + netns: cargo xtask test"]
async fn json_lines_carry_the_request_fields() {
    let mut node = Node::new("logs");
    node.add_flags(["--log-format".to_owned(), "json".to_owned()]);
    node.start().await;
    let mut client = node.client().await;
    let id = e2e_support::run(&mut client, "logged", None).await;
    e2e_support::stop(&mut client, &id).await;
    e2e_support::remove(&mut client, &id).await;
    drop(client);
    assert!(node.sigterm().await, "the daemon exits cleanly on SIGTERM");

    let logs = node.logs();
    let records: Vec<Value> = logs
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with("--- daemon start"))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l:?}")))
        .collect();
    let with_message = |message: &str| {
        records
            .iter()
            .find(|r| r["fields"]["message"] == message)
            .unwrap_or_else(|| panic!("no record {message:?} in\n{logs}"))
    };
    for message in [
        "creating sandbox",
        "sandbox ready",
        "sandbox stopped",
        "sandbox removed",
    ] {
        let record = with_message(message);
        let span = &record["span"];
        assert_eq!(span["sandbox"], id.as_str(), "{message}: {record}");
        assert_eq!(span["pod"], "logged", "{message}: {record}");
        assert_eq!(span["namespace"], "default", "{message}: {record}");
        assert!(
            record["level"].is_string() && record["timestamp"].is_string(),
            "{record}"
        );
    }
}

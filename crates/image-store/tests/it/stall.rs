//! A registry that accepts connections and never answers: the pull fails on its timeout,
//! naming the step, and leaves nothing.

use std::time::{Duration, Instant};

use image_store::{Auth, Error, Store};
use test_support::registry::{Endless, Stall};

use crate::support;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_registry_hits_the_timeout() {
    let stall = Stall::start();
    let dir = test_support::temp_dir("img-stall");
    let mut config = support::config(dir.path(), stall.host());
    config.request_timeout = Duration::from_millis(500);
    let store = Store::open(config).unwrap();
    let name = format!("{}/stuck:latest", stall.host());
    let started = Instant::now();
    let err = store.pull(&name, &Auth::Anonymous).await.unwrap_err();
    let took = started.elapsed();
    match &err {
        Error::Timeout { image, op, after } => {
            assert_eq!(image, &name);
            assert_eq!(op, "fetch the manifest");
            assert_eq!(*after, Duration::from_millis(500));
        }
        other => panic!("not a timeout: {other}"),
    }
    assert!(took < Duration::from_secs(5), "gave up after {took:?}");
    assert!(
        err.to_string().contains("did not answer within 0.5s"),
        "{err}"
    );
    support::assert_empty_after_reopen(store, stall.host());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_manifest_is_cut_at_the_cap() {
    let endless = Endless::start();
    let dir = test_support::temp_dir("img-endless");
    let store = Store::open(support::config(dir.path(), endless.host())).unwrap();
    let name = format!("{}/huge:latest", endless.host());
    let started = Instant::now();
    let err = store.pull(&name, &Auth::Anonymous).await.unwrap_err();
    assert!(
        matches!(&err, Error::Registry { image, op, .. } if image == &name && op == "fetch the manifest"),
        "{err}"
    );
    assert!(
        err.to_string().contains("is larger than 4194304 bytes"),
        "{err}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    support::assert_empty_after_reopen(store, endless.host());
}

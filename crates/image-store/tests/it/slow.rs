//! A registry that trickles (a layer at 200 B/s, each chunk in time): a pull from it holds up
//! no removal, listing or pull from another registry, and the progress timeout cancels it,
//! naming the registry and the layer.

use std::time::{Duration, Instant};

use image_store::{Auth, Error, Store};
use test_support::image::{Compression, Image, ImageBuilder, Layer, Tar};
use test_support::registry::{Registry, Throttle, Upload};

use crate::support::{self, has_partial_blob, noise};

/// The rate the slow registry sends at, once the first bytes of each connection went.
const TRICKLE: usize = 200;
/// What each connection to it sends at full speed: manifest, configuration, a layer's start.
const FREE: usize = 8 << 10;

fn small(name: &str) -> Image {
    ImageBuilder::new()
        .layer(Layer::new(
            &Tar::new().file(name, 0o644, name.as_bytes()).build(),
            Compression::Gzip,
        ))
        .build()
}

/// A layer of 64 KiB that does not compress: five minutes at 200 B/s.
fn large() -> Image {
    ImageBuilder::new()
        .layer(Layer::new(
            &Tar::new().file("noise", 0o644, &noise(64 << 10)).build(),
            Compression::Gzip,
        ))
        .build()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root: cargo xtask test"]
async fn a_slow_pull_holds_up_no_removal_listing_or_other_pull() {
    let registry = Registry::start();
    registry.push_image("gone", Some("latest"), &small("gone"), Upload::Monolithic);
    registry.push_image("other", Some("latest"), &small("other"), Upload::Monolithic);
    registry.push_image("slow", Some("latest"), &large(), Upload::Monolithic);
    let slow = Throttle::start_after(registry.host(), FREE, TRICKLE);
    let dir = test_support::temp_dir("img-slow");
    let mut config = support::config(dir.path(), registry.host());
    config.insecure_registries.push(slow.host().to_owned());
    let store = Store::open(config).unwrap();
    let gone = support::reference(registry.host(), "gone", "latest");
    let other = support::reference(registry.host(), "other", "latest");
    store.pull(&gone, &Auth::Anonymous).await.unwrap();

    let slow_name = support::reference(slow.host(), "slow", "latest");
    let slow_pull = tokio::spawn({
        let store = store.clone();
        async move { store.pull(&slow_name, &Auth::Anonymous).await }
    });
    let blobs = dir.path().join("blobs/sha256");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !has_partial_blob(&blobs) {
        assert!(Instant::now() < deadline, "the slow layer never started");
        assert!(!slow_pull.is_finished(), "the slow pull ended early");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // While it trickles: RemoveImage, ListImages and a pull from a healthy registry.
    let promptly = Duration::from_secs(5);
    let removed = tokio::time::timeout(promptly, store.remove(&gone))
        .await
        .expect("removing another image waited for the slow pull")
        .unwrap();
    assert!(removed.image_gone());
    assert!(store.list().iter().all(|i| !i.names.contains(&gone)));
    let pulled = tokio::time::timeout(promptly, store.pull(&other, &Auth::Anonymous))
        .await
        .expect("a pull from a healthy registry waited for the slow pull")
        .unwrap();
    let names: Vec<String> = store.list().into_iter().flat_map(|i| i.names).collect();
    assert_eq!(names, std::slice::from_ref(&other));
    assert!(store.blob_path(&pulled.config_digest).is_file());
    assert!(
        !slow_pull.is_finished(),
        "the slow pull is still going (no progress timeout here)"
    );
    assert!(has_partial_blob(&blobs), "its blob is still being written");
    slow_pull.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root: cargo xtask test"]
async fn a_trickling_registry_is_cancelled_naming_it_and_the_layer() {
    let registry = Registry::start();
    let built = large();
    registry.push_image("slow", Some("latest"), &built, Upload::Monolithic);
    let slow = Throttle::start_after(registry.host(), FREE, TRICKLE);
    let dir = test_support::temp_dir("img-trickle");
    let mut config = support::config(dir.path(), slow.host());
    let window = Duration::from_secs(2);
    config.progress_timeout = Some(window);
    config.min_pull_rate = 1024;
    let store = Store::open(config).unwrap();
    let name = support::reference(slow.host(), "slow", "latest");

    let started = Instant::now();
    let err = tokio::time::timeout(Duration::from_secs(30), store.pull(&name, &Auth::Anonymous))
        .await
        .expect("the trickling pull was not cancelled within 30 s")
        .unwrap_err();
    let took = started.elapsed();
    let layer = &built.layers[0].digest;
    match &err {
        Error::NoProgress {
            image,
            registry,
            op,
            window: w,
            received,
            wanted,
        } => {
            assert_eq!(image, &name);
            assert_eq!(registry, slow.host());
            assert_eq!(op, &format!("fetch blob {layer}"));
            assert_eq!(*w, window);
            assert_eq!(*wanted, 2048);
            assert!(*received < 2048, "{err}");
        }
        other => panic!("not cancelled for want of progress: {other}"),
    }
    let message = err.to_string();
    assert!(
        message.contains(slow.host()) && message.contains(layer.as_str()),
        "{message}"
    );
    assert!(
        took >= window && took < Duration::from_secs(15),
        "cancelled after {took:?}"
    );
    support::assert_empty_after_reopen(store, slow.host());
}

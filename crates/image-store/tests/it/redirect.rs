//! Registries that redirect: in a loop, or a layer's download to a host that stalls. The pull
//! fails promptly (redirects and time are bounded) naming the image and what it fetched, and
//! leaves nothing.

use std::time::{Duration, Instant};

use image_store::{Auth, Error, Store};
use test_support::image::{Compression, ImageBuilder, Layer, Tar};
use test_support::registry::{RedirectBlob, RedirectLoop, Registry, Stall, Upload};

use crate::support;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_loop_fails_promptly_naming_the_image() {
    let looping = RedirectLoop::start();
    let dir = test_support::temp_dir("img-redirect");
    let store = support::open(dir.path(), looping.host());
    let name = format!("{}/round/and-round:latest", looping.host());
    let started = Instant::now();
    let err = store.pull(&name, &Auth::Anonymous).await.unwrap_err();
    let took = started.elapsed();
    match &err {
        Error::Registry { image, op, .. } => {
            assert_eq!(image, &name);
            assert_eq!(op, "fetch the manifest");
        }
        other => panic!("not a registry error: {other}"),
    }
    let text = format!("{err}: {:?}", std::error::Error::source(&err));
    assert!(text.contains(&name), "{text}");
    assert!(text.contains("redirect"), "says it was redirected: {text}");
    assert!(took < Duration::from_secs(5), "gave up after {took:?}");
    // The client follows a bounded number of redirects (and may retry once, after its
    // anonymous token dance).
    assert!(
        looping.answered() <= 50,
        "{} requests answered",
        looping.answered()
    );
    support::assert_empty_after_reopen(store, looping.host());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root: cargo xtask test"]
async fn a_layer_redirected_to_a_host_that_stalls_times_out_naming_the_layer() {
    let registry = Registry::start();
    let built = ImageBuilder::new()
        .layer(Layer::new(&Tar::busybox().build(), Compression::Gzip))
        .layer(Layer::new(
            &Tar::new().file("elsewhere", 0o644, b"on a CDN").build(),
            Compression::Gzip,
        ))
        .build();
    registry.push_image("cdn", Some("latest"), &built, Upload::Monolithic);
    let stall = Stall::start();
    let layer = &built.layers[1].digest;
    let proxy = RedirectBlob::start(registry.host(), layer, stall.host());
    let dir = test_support::temp_dir("img-redirect");
    let mut config = support::config(dir.path(), proxy.host());
    config.insecure_registries.push(stall.host().to_owned());
    config.request_timeout = Duration::from_millis(500);
    let store = Store::open(config).unwrap();
    let name = format!("{}/cdn:latest", proxy.host());
    let started = Instant::now();
    let err = store.pull(&name, &Auth::Anonymous).await.unwrap_err();
    let took = started.elapsed();
    match &err {
        Error::Timeout { image, op, .. } => {
            assert_eq!(image, &name);
            assert_eq!(op, &format!("fetch blob {layer}"));
        }
        other => panic!("not a timeout: {other}"),
    }
    let text = err.to_string();
    assert!(
        text.contains(&name) && text.contains(layer.as_str()),
        "{text}"
    );
    assert!(took < Duration::from_secs(10), "gave up after {took:?}");
    support::assert_empty_after_reopen(store, proxy.host());
}

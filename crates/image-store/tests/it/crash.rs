//! kill -9 in the middle of a pull: the pull runs in a child process (this test binary again),
//! killed once one layer is in place and another blob is half downloaded. Reopening the store
//! shows no image and sweeps every temporary and unindexed file.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use image_store::{Auth, Store};
use test_support::fs::file_names;
use test_support::image::{Compression, ImageBuilder, Layer, Tar};
use test_support::registry::{Registry, Throttle, Upload};

use crate::support::{self, has_partial_blob, noise};

const ROOT_VAR: &str = "IMAGE_STORE_CRASH_ROOT";
const REF_VAR: &str = "IMAGE_STORE_CRASH_REF";
const HOST_VAR: &str = "IMAGE_STORE_CRASH_HOST";
const TEST: &str = "crash::a_pull_killed_mid_way_leaves_no_image_and_is_swept";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root: cargo xtask test"]
async fn a_pull_killed_mid_way_leaves_no_image_and_is_swept() {
    if let Ok(root) = std::env::var(ROOT_VAR) {
        // The worker: pull until killed.
        let host = std::env::var(HOST_VAR).unwrap();
        let reference = std::env::var(REF_VAR).unwrap();
        let store = support::open(Path::new(&root), &host);
        let result = store.pull(&reference, &Auth::Anonymous).await;
        eprintln!("worker: the pull ended before the kill: {result:?}");
        std::process::exit(3);
    }

    let registry = Registry::start();
    let built = ImageBuilder::new()
        .layer(Layer::new(&Tar::busybox().build(), Compression::Gzip))
        .layer(Layer::new(
            &Tar::new().file("noise", 0o644, &noise(32 << 20)).build(),
            Compression::None,
        ))
        .build();
    registry.push_image("big", Some("latest"), &built, Upload::Monolithic);
    let slow = Throttle::start(registry.host(), 2 << 20);

    let dir = test_support::temp_dir("img-crash");
    let blobs = dir.path().join("blobs/sha256");
    let layers = dir.path().join("layers");
    let mut child = test_support::process::rerun_test(TEST)
        .env(ROOT_VAR, dir.path())
        .env(HOST_VAR, slow.host())
        .env(REF_VAR, format!("{}/big:latest", slow.host()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .expect("start the worker");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the worker exited ({status}) before it was killed");
        }
        let placed = file_names(&layers).iter().any(|n| !n.starts_with('.'));
        if placed && has_partial_blob(&blobs) {
            break;
        }
        assert!(Instant::now() < deadline, "the worker never got mid-pull");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert!(has_partial_blob(&blobs), "killed with a blob half written");

    let mut config = support::config(dir.path(), slow.host());
    config.insecure_registries.push(registry.host().to_owned());
    let (store, swept) = Store::open_swept(config).expect("reopen after the kill");
    assert!(store.list().is_empty(), "no image: {:?}", store.list());
    assert!(
        swept.blobs >= 2,
        "the partial blob and the unindexed ones: {swept:?}"
    );
    assert!(swept.layers >= 1, "the unindexed layer: {swept:?}");
    assert_eq!(file_names(&blobs), Vec::<String>::new());
    assert_eq!(file_names(&layers), Vec::<String>::new());

    // The store works after the crash: the pull, at full speed, completes.
    let image = store
        .pull(&format!("{}/big:latest", registry.host()), &Auth::Anonymous)
        .await
        .unwrap();
    assert_eq!(image.layers.len(), 2);
    let noise_file = store.layer_dir(&image.layers[1].chain_id).join("noise");
    assert_eq!(std::fs::metadata(noise_file).unwrap().len(), 32 << 20);
}

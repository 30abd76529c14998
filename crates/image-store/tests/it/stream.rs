//! Layers are unpacked while they download: through a slow link, a layer's files appear in its
//! temporary directory while its blob is still arriving, and the layer is put in place only once
//! the blob is whole and verified.

use std::time::{Duration, Instant};

use image_store::Auth;
use test_support::fs::file_names;
use test_support::image::{Compression, ImageBuilder, Layer, Tar};
use test_support::registry::{Registry, Throttle, Upload};

use crate::support::{self, noise};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root: cargo xtask test"]
async fn a_layer_is_unpacked_while_its_blob_downloads() {
    let registry = Registry::start();
    let built = ImageBuilder::new()
        .layer(Layer::new(
            &Tar::new()
                .file("first", 0o644, b"at the start of the layer")
                .file("noise", 0o644, &noise(2 << 20))
                .build(),
            Compression::Gzip,
        ))
        .build();
    registry.push_image("slow", Some("latest"), &built, Upload::Monolithic);
    let slow = Throttle::start(registry.host(), 1 << 20);
    let dir = test_support::temp_dir("img-stream");
    let store = support::open(dir.path(), slow.host());
    let name = format!("{}/slow:latest", slow.host());
    let pull = tokio::spawn({
        let store = store.clone();
        async move { store.pull(&name, &Auth::Anonymous).await }
    });

    let (blobs, layers) = (dir.path().join("blobs/sha256"), dir.path().join("layers"));
    let layer_hex = built.layers[0]
        .digest
        .trim_start_matches("sha256:")
        .to_owned();
    // The layer's blob being written: its temporary file, with something in it.
    let downloading = || {
        file_names(&blobs).iter().any(|n| {
            n.starts_with(&format!(".{layer_hex}"))
                && std::fs::metadata(blobs.join(n)).is_ok_and(|m| m.len() > 0)
        })
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen_while_downloading = false;
    while !pull.is_finished() && Instant::now() < deadline {
        let unpacking = file_names(&layers)
            .iter()
            .filter(|n| n.starts_with(".tmp-"))
            .any(|n| layers.join(n).join("first").exists());
        let placed = file_names(&layers).iter().any(|n| !n.starts_with('.'));
        assert!(
            !placed || !downloading(),
            "a layer is in place before its blob is whole"
        );
        if unpacking && downloading() {
            seen_while_downloading = true;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let image = pull.await.unwrap().expect("the pull succeeds");
    assert!(
        seen_while_downloading,
        "the layer's first file was unpacked while its blob was still downloading"
    );
    let root = store.layer_dir(&image.layers[0].chain_id);
    assert_eq!(
        std::fs::metadata(root.join("noise")).unwrap().len(),
        2 << 20
    );
    assert_eq!(
        file_names(&layers),
        vec![image.layers[0].chain_id.hex().to_owned()],
        "no temporary directory left"
    );
}

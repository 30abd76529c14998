//! The store's own operations: look-ups, removal with shared layers, disk usage, the lock,
//! the index on disk.

use image_store::{Auth, Error, Store, StoreConfig};
use test_support::fs::file_names;
use test_support::image::{Compression, ImageBuilder, Layer, Tar};
use test_support::registry::{Registry, Upload};

use crate::support::{self, reference};

fn app(name: &str) -> test_support::image::Image {
    ImageBuilder::new()
        .layer(Layer::new(&Tar::busybox().build(), Compression::Gzip))
        .layer(Layer::new(
            &Tar::new().file(name, 0o644, name.as_bytes()).build(),
            Compression::Gzip,
        ))
        .build()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root: cargo xtask test"]
async fn lookups_removal_and_shared_layers() {
    let registry = Registry::start();
    let (one, two) = (app("one"), app("two"));
    registry.push_image("one", Some("latest"), &one, Upload::Monolithic);
    registry.push_image("two", Some("v2"), &two, Upload::Monolithic);
    let dir = test_support::temp_dir("img-store");
    let store = support::open(dir.path(), registry.host());
    let host = registry.host();
    let a = store
        .pull(&format!("{host}/one"), &Auth::Anonymous)
        .await
        .unwrap();
    let b = store
        .pull(&reference(host, "two", "v2"), &Auth::Anonymous)
        .await
        .unwrap();
    assert_eq!(
        a.layers[0].chain_id, b.layers[0].chain_id,
        "busybox is shared"
    );
    assert_eq!(file_names(&dir.path().join("layers")).len(), 3);
    assert_eq!(store.list().len(), 2);

    for query in [
        format!("{host}/one"),
        format!("{host}/one:latest"),
        a.id.clone(),
        a.id[..12].to_owned(),
        format!("sha256:{}", a.id),
        one.manifest_digest.clone(),
        format!("{host}/one@{}", one.manifest_digest),
    ] {
        let found = store.get(&query).unwrap_or_else(|e| panic!("{query}: {e}"));
        assert_eq!(found.id, a.id, "{query}");
    }
    for query in [
        format!("{host}/one:other"),
        format!("{host}/three"),
        "nope".to_owned(),
        format!("{host}/two@{}", one.manifest_digest),
    ] {
        assert!(
            matches!(store.get(&query), Err(Error::NotFound { .. })),
            "{query}"
        );
    }

    // The index survives a reopen.
    drop(store);
    let store = support::open(dir.path(), registry.host());
    assert_eq!(store.list(), vec![a.clone(), b.clone()]);

    let before = store.disk_usage().unwrap();
    let removed = store.remove(&format!("{host}/one")).await.unwrap();
    assert!(removed.image_gone(), "its only name: {removed:?}");
    assert_eq!(removed.image().id, a.id);
    let after = store.disk_usage().unwrap();
    assert!(
        after.bytes < before.bytes && after.inodes < before.inodes,
        "{before:?} -> {after:?}"
    );
    assert!(
        store.layer_dir(&a.layers[0].chain_id).is_dir(),
        "still used by two"
    );
    assert!(!store.layer_dir(&a.layers[1].chain_id).exists());
    assert!(store.blob_path(&a.layers[0].digest).is_file());
    assert!(!store.blob_path(&a.layers[1].digest).exists());
    assert!(!store.blob_path(&a.config_digest).exists());
    assert!(!store.blob_path(&a.manifest_digest).exists());
    assert!(matches!(
        store.remove(&a.id).await,
        Err(Error::NotFound { .. })
    ));

    store.remove(&b.id[..8]).await.unwrap();
    assert!(store.list().is_empty());
    assert_eq!(file_names(&dir.path().join("layers")), Vec::<String>::new());
    assert_eq!(
        file_names(&dir.path().join("blobs/sha256")),
        Vec::<String>::new()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root: cargo xtask test"]
async fn a_tag_moves_to_the_image_pulled_last() {
    let registry = Registry::start();
    let (old, new) = (app("old"), app("new"));
    let dir = test_support::temp_dir("img-store");
    let store = support::open(dir.path(), registry.host());
    let name = reference(registry.host(), "moving", "latest");
    registry.push_image("moving", Some("latest"), &old, Upload::Monolithic);
    let first = store.pull(&name, &Auth::Anonymous).await.unwrap();
    registry.push_image("moving", Some("latest"), &new, Upload::Monolithic);
    let second = store.pull(&name, &Auth::Anonymous).await.unwrap();
    assert_ne!(first.id, second.id);
    assert_eq!(store.get(&name).unwrap().id, second.id);
    let first_now = store.get(&first.id).unwrap();
    assert!(first_now.names.is_empty(), "the old image lost its tag");
    assert_eq!(
        first_now.repo_digests, first.repo_digests,
        "and keeps its digest"
    );
}

#[test]
fn a_second_open_is_refused_while_the_first_holds_the_lock() {
    let dir = test_support::temp_dir("img-store");
    let first = Store::open(StoreConfig::new(dir.path())).unwrap();
    let err = Store::open(StoreConfig::new(dir.path())).unwrap_err();
    assert!(
        matches!(&err, Error::Locked { root } if root == dir.path()),
        "{err}"
    );
    drop(first);
    Store::open(StoreConfig::new(dir.path())).expect("open once the first is gone");
}

#[test]
fn a_corrupt_index_is_named() {
    let dir = test_support::temp_dir("img-store");
    std::fs::write(
        dir.path().join("images.json"),
        b"{\"version\": 1, \"images\": [",
    )
    .unwrap();
    let err = Store::open(StoreConfig::new(dir.path())).unwrap_err();
    assert!(
        matches!(&err, Error::CorruptIndex { path, .. } if path == &dir.path().join("images.json")),
        "{err}"
    );
    assert!(
        err.to_string().contains("images.json: corrupt image index"),
        "{err}"
    );
}

#[test]
fn an_empty_store_lists_nothing_and_finds_nothing() {
    let dir = test_support::temp_dir("img-store");
    let store = Store::open(StoreConfig::new(dir.path())).unwrap();
    assert!(store.list().is_empty());
    assert!(matches!(store.get("busybox"), Err(Error::NotFound { .. })));
    let usage = store.disk_usage().unwrap();
    assert!(
        usage.inodes >= 5,
        "root, blobs, blobs/sha256, layers, store.lock: {usage:?}"
    );
}

const NO_CA_ROOT: &str = "IMAGE_STORE_NO_CA_ROOT";
const NO_CA_TEST: &str =
    "store::a_node_without_ca_certificates_opens_its_store_and_pulls_fail_saying_why";

/// reqwest (also inside oci-client) panics when the node has no CA certificates; the store must
/// open anyway and its pulls fail with a reason. The worker runs with `SSL_CERT_FILE` and
/// `SSL_CERT_DIR` pointing at nothing, which is how such a node looks to the TLS stack.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root: cargo xtask test"]
async fn a_node_without_ca_certificates_opens_its_store_and_pulls_fail_saying_why() {
    if let Ok(root) = std::env::var(NO_CA_ROOT) {
        // The worker.
        let store = Store::open(support::config(std::path::Path::new(&root), "127.0.0.1:9"))
            .expect("the store opens without CA certificates");
        let err = store
            .pull("127.0.0.1:9/app:latest", &Auth::Anonymous)
            .await
            .expect_err("no pull without a registry client");
        println!("pull error: {err}");
        std::process::exit(if err.to_string().contains("CA certificates") {
            0
        } else {
            4
        });
    }
    let dir = test_support::temp_dir("img-no-ca");
    let empty = dir.path().join("no-certs");
    std::fs::create_dir(&empty).unwrap();
    let out = test_support::process::rerun_test(NO_CA_TEST)
        .env(NO_CA_ROOT, dir.path().join("store"))
        .env("SSL_CERT_FILE", empty.join("none.pem"))
        .env("SSL_CERT_DIR", &empty)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run the worker");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(0), "the worker: {text}");
    assert!(
        text.contains("pull error: image 127.0.0.1:9/app:latest: cannot connect"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root: cargo xtask test"]
async fn removing_a_tag_removes_that_name_and_the_image_goes_with_its_last() {
    let registry = Registry::start();
    let built = app("tagged");
    for tag in ["v1", "v2", "v3"] {
        registry.push_image("app", Some(tag), &built, Upload::Monolithic);
    }
    let dir = test_support::temp_dir("img-untag");
    let store = support::open(dir.path(), registry.host());
    let host = registry.host();
    let [v1, v2, v3] = ["v1", "v2", "v3"].map(|tag| reference(host, "app", tag));
    for name in [&v1, &v2, &v3] {
        store.pull(name, &Auth::Anonymous).await.unwrap();
    }
    let image = store.get(&v1).unwrap();
    assert_eq!(image.names, [v1.clone(), v2.clone(), v3.clone()]);

    // One tag: that name goes, the image and every file of it stay.
    let removed = store.remove(&v1).await.unwrap();
    assert!(!removed.image_gone(), "{removed:?}");
    assert_eq!(removed.image().names, [v2.clone(), v3.clone()]);
    assert!(matches!(store.get(&v1), Err(Error::NotFound { .. })));
    assert_eq!(store.get(&v2).unwrap().id, image.id);
    assert!(store.blob_path(&image.config_digest).is_file());
    assert!(
        image
            .layers
            .iter()
            .all(|l| store.layer_dir(&l.chain_id).is_dir())
    );
    // As the index on disk says.
    drop(store);
    let store = support::open(dir.path(), registry.host());
    assert_eq!(store.list()[0].names, [v2.clone(), v3.clone()]);

    // By digest reference: the image with all its names.
    let pinned = format!("{host}/app@{}", built.manifest_digest);
    let removed = store.remove(&pinned).await.unwrap();
    assert!(removed.image_gone(), "{removed:?}");
    assert!(store.list().is_empty());
    assert!(!store.blob_path(&image.config_digest).exists());

    // The last name takes the image with it; so does its id.
    for name in [&v1, &v2] {
        store.pull(name, &Auth::Anonymous).await.unwrap();
    }
    assert!(!store.remove(&v1).await.unwrap().image_gone());
    assert!(
        store.remove(&v2).await.unwrap().image_gone(),
        "its last name"
    );
    assert!(store.list().is_empty());
    for name in [&v1, &v2] {
        store.pull(name, &Auth::Anonymous).await.unwrap();
    }
    let removed = store.remove(&image.id[..12]).await.unwrap();
    assert!(removed.image_gone());
    assert_eq!(removed.image().names, [v1.clone(), v2.clone()]);
    support::assert_empty_after_reopen(store, host);
}

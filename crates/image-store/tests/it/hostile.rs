//! Hostile images from a real registry: each is refused with an error naming the image, the
//! layer and the entry (or blob), nothing escapes the store, and nothing of it stays there.

use std::path::Path;

use image_store::{Auth, Error, LayerProblem};
use serde_json::{Value, json};
use tar::EntryType;
use test_support::image::{Compression, ImageBuilder, Layer, Tar};
use test_support::registry::{Registry, Upload};

use crate::support::{self, reference};

/// An image whose first layer is busybox (so there is something to clean up) and whose second
/// is `hostile`.
fn image_with(hostile: Layer) -> test_support::image::Image {
    ImageBuilder::new()
        .layer(Layer::new(&Tar::busybox().build(), Compression::Gzip))
        .layer(hostile)
        .build()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root: cargo xtask test"]
async fn hostile_layers_are_refused_naming_image_layer_and_entry() {
    let registry = Registry::start();
    let marker = test_support::unique_name("image-store-escape");
    let through_symlink = format!("root/tmp/{marker}");
    let cases: Vec<(&str, Tar, &str, LayerProblem)> = vec![
        (
            "dotdot",
            Tar::new().raw(
                EntryType::Regular,
                format!("../{marker}").as_bytes(),
                b"",
                b"x",
            ),
            "../",
            LayerProblem::DotDot,
        ),
        (
            "absolute",
            Tar::new().raw(
                EntryType::Regular,
                format!("/tmp/{marker}").as_bytes(),
                b"",
                b"x",
            ),
            "/tmp/",
            LayerProblem::Absolute,
        ),
        (
            "symlink-parent",
            Tar::new().symlink("root", "/").raw(
                EntryType::Regular,
                through_symlink.as_bytes(),
                b"",
                b"x",
            ),
            "root/tmp/",
            LayerProblem::SymlinkParent("root".into()),
        ),
        (
            "hardlink-out",
            Tar::new().raw(EntryType::Link, b"etc/passwd2", b"/etc/passwd", b""),
            "etc/passwd2",
            LayerProblem::HardlinkOutside("/etc/passwd".into()),
        ),
        (
            "hardlink-to-symlink-out",
            Tar::new()
                .dir("a/b", 0o755)
                .symlink("a/b/top", "../../etc")
                .hardlink("top", "a/b/top"),
            "top",
            LayerProblem::SymlinkEscapes("../../etc".into()),
        ),
    ];
    for (tag, tar, entry, problem) in cases {
        let built = image_with(Layer::new(&tar.build(), Compression::Gzip));
        registry.push_image("hostile", Some(tag), &built, Upload::Monolithic);
        let dir = test_support::temp_dir("img-hostile");
        let store = support::open(dir.path(), registry.host());
        let name = reference(registry.host(), "hostile", tag);
        let err = store.pull(&name, &Auth::Anonymous).await.unwrap_err();
        let Error::Layer {
            image,
            layer,
            entry: Some(got_entry),
            problem: got,
        } = &err
        else {
            panic!("{tag}: not a layer error: {err}");
        };
        assert_eq!(image, &name, "{tag}");
        assert_eq!(layer, &built.layers[1].digest, "{tag}");
        assert!(got_entry.starts_with(entry), "{tag}: {got_entry}");
        assert_eq!(got, &problem, "{tag}");
        let text = err.to_string();
        for part in [name.as_str(), built.layers[1].digest.as_str(), entry] {
            assert!(text.contains(part), "{tag}: {text:?} names {part}");
        }
        assert!(
            !Path::new("/tmp").join(&marker).exists(),
            "{tag}: nothing escaped"
        );
        assert!(!dir.path().join("layers").join(&marker).exists(), "{tag}");
        support::assert_empty_after_reopen(store, registry.host());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root: cargo xtask test"]
async fn a_decompression_bomb_stops_at_the_cap() {
    let registry = Registry::start();
    let bomb = Layer::zero_bomb("zeros", 256 << 20);
    assert!(
        bomb.blob.len() < 1 << 20,
        "{} bytes compressed",
        bomb.blob.len()
    );
    let built = image_with(bomb);
    registry.push_image("bomb", Some("latest"), &built, Upload::Monolithic);
    let dir = test_support::temp_dir("img-hostile");
    let mut config = support::config(dir.path(), registry.host());
    config.limits.max_layer_bytes = 16 << 20;
    let store = image_store::Store::open(config).unwrap();
    let name = reference(registry.host(), "bomb", "latest");
    let err = store.pull(&name, &Auth::Anonymous).await.unwrap_err();
    match &err {
        Error::Layer {
            image,
            layer,
            entry,
            problem,
        } => {
            assert_eq!(image, &name);
            assert_eq!(layer, &built.layers[1].digest);
            assert_eq!(entry.as_deref(), Some("zeros"));
            assert_eq!(problem, &LayerProblem::TooLarge(16 << 20));
        }
        other => panic!("not a layer error: {other}"),
    }
    support::assert_empty_after_reopen(store, registry.host());
}

fn shrink_layer_size(m: &mut Value) {
    let size = m["layers"][1]["size"].as_u64().unwrap();
    m["layers"][1]["size"] = json!(size - 10);
}

fn grow_layer_size(m: &mut Value) {
    let size = m["layers"][1]["size"].as_u64().unwrap();
    m["layers"][1]["size"] = json!(size + 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root: cargo xtask test"]
async fn a_manifest_that_lies_about_a_size_fails() {
    let registry = Registry::start();
    let layer = || {
        Layer::new(
            &Tar::new().file("f", 0o644, &[1u8; 4096]).build(),
            Compression::Gzip,
        )
    };
    for (tag, edit, says) in [
        ("short", shrink_layer_size as fn(&mut Value), -10i64),
        ("long", grow_layer_size, 10),
    ] {
        let built = ImageBuilder::new()
            .layer(Layer::new(&Tar::busybox().build(), Compression::Gzip))
            .layer(layer())
            .edit_manifest(edit)
            .build();
        registry.push_image("liar", Some(tag), &built, Upload::Monolithic);
        let dir = test_support::temp_dir("img-hostile");
        let store = support::open(dir.path(), registry.host());
        let name = reference(registry.host(), "liar", tag);
        let err = store.pull(&name, &Auth::Anonymous).await.unwrap_err();
        let real = built.layers[1].blob.len() as i64;
        match &err {
            Error::SizeMismatch {
                image,
                digest,
                expected,
                actual,
            } => {
                assert_eq!(image, &name);
                assert_eq!(digest, &built.layers[1].digest);
                assert_eq!(*expected as i64, real + says, "{tag}");
                if says < 0 {
                    assert_eq!(actual, &format!("more than {expected}"));
                } else {
                    assert_eq!(actual, &real.to_string());
                }
            }
            other => panic!("{tag}: not a size mismatch: {other}"),
        }
        support::assert_empty_after_reopen(store, registry.host());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root: cargo xtask test"]
async fn a_blob_that_does_not_match_its_digest_is_never_stored() {
    let registry = Registry::start();
    let built = image_with(Layer::new(
        &Tar::new().file("f", 0o644, b"the real content").build(),
        Compression::None,
    ));
    registry.push_image("tampered", Some("latest"), &built, Upload::Monolithic);
    // Same length, other bytes, served under the good digest.
    let stored = registry.blob_file(&built.layers[1].digest);
    let mut bytes = std::fs::read(&stored).unwrap();
    let at = bytes.windows(4).position(|w| w == b"real").unwrap();
    bytes[at..at + 4].copy_from_slice(b"evil");
    std::fs::write(&stored, &bytes).unwrap();

    let dir = test_support::temp_dir("img-hostile");
    let store = support::open(dir.path(), registry.host());
    let name = reference(registry.host(), "tampered", "latest");
    let err = store.pull(&name, &Auth::Anonymous).await.unwrap_err();
    match &err {
        Error::DigestMismatch {
            image,
            expected,
            actual,
        } => {
            assert_eq!(image, &name);
            assert_eq!(expected, &built.layers[1].digest);
            assert_eq!(actual, &test_support::image::digest(&bytes));
        }
        other => panic!("not a digest mismatch: {other}"),
    }
    assert!(
        !store
            .blob_path(&built.layers[1].digest.parse().unwrap())
            .exists()
    );
    support::assert_empty_after_reopen(store, registry.host());
}

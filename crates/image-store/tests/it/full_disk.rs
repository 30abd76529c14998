//! A full disk: the store on a small tmpfs (mounted in a private mount namespace), images
//! bigger than it: one whose layer blob fills it, one whose unpacked layer does. Each pull fails
//! naming the image and the layer (and the entry, when the unpack ran out of room), nothing of
//! it stays, and the store keeps working: a pull that fits succeeds afterwards.

use std::process::Command;

use image_store::{Auth, Error, LayerProblem};
use test_support::image::{Compression, ImageBuilder, Layer, Tar};
use test_support::registry::{Registry, Upload};

use crate::support::{self, Unmount, in_private_mount_ns, noise, reference};

const TEST: &str =
    "full_disk::a_full_disk_fails_the_pull_naming_image_and_layer_and_leaves_nothing";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root: cargo xtask test"]
async fn a_full_disk_fails_the_pull_naming_image_and_layer_and_leaves_nothing() {
    if !in_private_mount_ns(TEST) {
        return;
    }
    let registry = Registry::start();
    let base = Layer::new(&Tar::busybox().build(), Compression::Gzip);
    // A blob bigger than the disk that unpacks to almost nothing: a small tar followed by
    // 24 MiB of what the archive's end leaves unread (the diff id covers it; nothing is written).
    let mut padded = Tar::new().file("small", 0o644, b"small").build();
    padded.extend_from_slice(&noise(24 << 20));
    // A blob of a few kilobytes that unpacks to a file bigger than the disk.
    let zeros = Layer::zero_bomb("zeros", 24 << 20);
    let cases = [
        ("blob", Layer::new(&padded, Compression::None), None),
        ("unpack", zeros, Some("zeros")),
    ];
    let small = ImageBuilder::new().layer(base.clone()).build();
    registry.push_image("small", Some("latest"), &small, Upload::Monolithic);

    let dir = test_support::temp_dir("img-full");
    let root = dir.path().join("store");
    std::fs::create_dir(&root).unwrap();
    let status = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=16m,mode=0700", "tmpfs"])
        .arg(&root)
        .status()
        .expect("run mount");
    assert!(status.success(), "mount a 16 MiB tmpfs: {status}");
    let _unmount = Unmount(root.clone());
    let no_space = std::io::Error::from_raw_os_error(libc::ENOSPC).to_string();

    for (tag, top, entry) in cases {
        let big = ImageBuilder::new().layer(base.clone()).layer(top).build();
        registry.push_image("big", Some(tag), &big, Upload::Monolithic);
        let store = support::open(&root, registry.host());
        let name = reference(registry.host(), "big", tag);
        let err = store.pull(&name, &Auth::Anonymous).await.unwrap_err();
        let layer = &big.layers[1].digest;
        match (&err, entry) {
            // The unpack ran out of room: the entry is named.
            (
                Error::Layer {
                    image,
                    layer: at,
                    entry: got,
                    problem: LayerProblem::Io(why),
                },
                Some(entry),
            ) => {
                assert_eq!(image, &name);
                assert_eq!(at, layer);
                assert_eq!(got.as_deref(), Some(entry));
                assert!(why.contains(&no_space), "{why}");
            }
            // The blob did.
            (
                Error::Blob {
                    image,
                    blob,
                    op,
                    source,
                },
                None,
            ) => {
                assert_eq!(image, &name);
                assert_eq!(blob, layer);
                assert!(["write", "store"].contains(op), "{op}");
                assert_eq!(source.raw_os_error(), Some(libc::ENOSPC), "{source}");
            }
            (other, _) => panic!("{tag}: not a full-disk error naming the layer: {other}"),
        }
        let text = err.to_string();
        for part in [name.as_str(), layer.as_str(), no_space.as_str()] {
            assert!(text.contains(part), "{tag}: {text:?} names {part}");
        }
        support::assert_empty_after_reopen(store, registry.host());
    }

    // The store keeps working: an image that fits is pulled.
    let store = support::open(&root, registry.host());
    let image = store
        .pull(
            &reference(registry.host(), "small", "latest"),
            &Auth::Anonymous,
        )
        .await
        .expect("a pull that fits succeeds after a full disk");
    assert!(
        store
            .layer_dir(&image.layers[0].chain_id)
            .join("bin/busybox")
            .exists()
    );
}

//! Pulls from the local registry: the unpacked trees are what the images hold.

use std::fs;
use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
use std::path::Path;

use image_store::{Auth, Digest, Platform, Store};
use test_support::image::{
    Compression, ImageBuilder, Index, Layer, Tar, other_platform, this_platform,
};
use test_support::registry::{Registry, Upload};

use crate::support::{self, reference};

/// The `trusted.overlay.opaque` value of `dir`, if any.
pub(crate) fn opaque(dir: &Path) -> Option<Vec<u8>> {
    let out = std::process::Command::new("getfattr")
        .args(["--only-values", "-n", "trusted.overlay.opaque"])
        .arg(dir)
        .output();
    match out {
        Ok(out) if out.status.success() => Some(out.stdout),
        Ok(_) => None,
        Err(_) => xattr(dir, "trusted.overlay.opaque"),
    }
}

/// Reads an xattr with libc when getfattr is not installed.
fn xattr(path: &Path, name: &str) -> Option<Vec<u8>> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt as _;
    let p = CString::new(path.as_os_str().as_bytes()).unwrap();
    let n = CString::new(name).unwrap();
    let mut buf = vec![0u8; 64];
    // SAFETY: NUL-terminated strings and a buffer valid for its length, all outliving the call.
    let rc = unsafe { libc::lgetxattr(p.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    (rc >= 0).then(|| {
        buf.truncate(rc as usize);
        buf
    })
}

fn busybox_image(compression: Compression) -> test_support::image::Image {
    ImageBuilder::new()
        .label("compression", &format!("{compression:?}"))
        .layer(Layer::new(&Tar::busybox().build(), compression))
        .build()
}

fn assert_busybox(store: &Store, chain_id: &Digest) {
    let root = store.layer_dir(chain_id);
    let busybox = fs::metadata(root.join("bin/busybox")).unwrap();
    assert_eq!(busybox.mode() & 0o7777, 0o755);
    assert_eq!(busybox.len(), fs::metadata("/bin/busybox").unwrap().len());
    assert_eq!(
        fs::read_link(root.join("bin/sh")).unwrap(),
        Path::new("busybox")
    );
    assert_eq!(
        fs::read_link(root.join("bin/ls")).unwrap(),
        Path::new("/bin/busybox")
    );
    assert_eq!(
        fs::metadata(root.join("tmp")).unwrap().mode() & 0o7777,
        0o1777
    );
    assert_eq!(
        fs::read_to_string(root.join("etc/passwd")).unwrap(),
        "root:x:0:0:root:/root:/bin/sh\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root: cargo xtask test"]
async fn single_layer_images_in_every_compression() {
    let registry = Registry::start();
    let dir = test_support::temp_dir("img-store");
    let store = support::open(dir.path(), registry.host());
    for (tag, compression, upload) in [
        ("plain", Compression::None, Upload::Monolithic),
        ("gzip", Compression::Gzip, Upload::Chunked(256 * 1024)),
        ("zstd", Compression::Zstd, Upload::Chunked(1 << 20)),
    ] {
        let built = busybox_image(compression);
        registry.push_image("busybox", Some(tag), &built, upload);
        let image = store
            .pull(
                &reference(registry.host(), "busybox", tag),
                &Auth::Anonymous,
            )
            .await
            .unwrap_or_else(|e| panic!("{tag}: {e}"));
        assert_eq!(image.id, built.config_digest.trim_start_matches("sha256:"));
        assert_eq!(image.manifest_digest.to_string(), built.manifest_digest);
        assert_eq!(image.layers.len(), 1);
        assert_eq!(image.layers[0].diff_id.to_string(), built.layers[0].diff_id);
        assert_eq!(
            image.layers[0].chain_id, image.layers[0].diff_id,
            "first chain id is the diff id"
        );
        assert_eq!(
            image.names,
            vec![reference(registry.host(), "busybox", tag)]
        );
        assert_eq!(
            image.repo_digests,
            vec![format!(
                "{}/busybox@{}",
                registry.host(),
                built.manifest_digest
            )]
        );
        assert!(image.size > 0);
        assert!(store.blob_path(&image.layers[0].digest).is_file());
        assert_busybox(&store, &image.layers[0].chain_id);
    }
    // The three share one uncompressed tar, so one layer directory.
    assert_eq!(
        test_support::fs::file_names(&dir.path().join("layers")).len(),
        1
    );
    assert_eq!(store.list().len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root: cargo xtask test"]
async fn multi_layer_images_with_whiteouts_and_opaque_dirs() {
    let registry = Registry::start();
    let base = Tar::busybox()
        .dir("var", 0o755)
        .dir("var/cache", 0o755)
        .file("var/cache/old", 0o644, b"old")
        .file("etc/motd", 0o644, b"hello\n")
        .build();
    let middle = Tar::new()
        .dir("app", 0o755)
        .file_owned("app/run", 0o4750, 1000, 1000, b"#!/bin/sh\necho hi\n")
        .hardlink("app/run2", "app/run")
        .build();
    let top = Tar::new()
        .whiteout("etc/motd")
        .opaque("var/cache")
        .file("var/cache/new", 0o600, b"new")
        .build();
    let built = ImageBuilder::new()
        .layer(Layer::new(&base, Compression::Gzip))
        .layer(Layer::new(&middle, Compression::Zstd))
        .layer(Layer::new(&top, Compression::None))
        .build();
    registry.push_image("app", Some("v1"), &built, Upload::Chunked(64 * 1024));

    let dir = test_support::temp_dir("img-store");
    let store = support::open(dir.path(), registry.host());
    let image = store
        .pull(&reference(registry.host(), "app", "v1"), &Auth::Anonymous)
        .await
        .unwrap();
    assert_eq!(image.layers.len(), 3);
    let chains: Vec<&Digest> = image.layers.iter().map(|l| &l.chain_id).collect();
    assert_eq!(*chains[0], image.layers[0].diff_id);
    assert_eq!(
        *chains[1],
        Digest::chain(Some(chains[0]), &image.layers[1].diff_id)
    );
    assert_eq!(
        *chains[2],
        Digest::chain(Some(chains[1]), &image.layers[2].diff_id)
    );
    assert_busybox(&store, chains[0]);

    let middle_dir = store.layer_dir(chains[1]);
    let run = fs::metadata(middle_dir.join("app/run")).unwrap();
    assert_eq!(run.mode() & 0o7777, 0o4750, "setuid kept");
    assert_eq!((run.uid(), run.gid()), (1000, 1000));
    assert_eq!(
        fs::metadata(middle_dir.join("app/run2")).unwrap().ino(),
        run.ino()
    );
    assert!(
        !middle_dir.join("etc").exists(),
        "a layer holds only its own diff"
    );

    let top_dir = store.layer_dir(chains[2]);
    let motd = fs::symlink_metadata(top_dir.join("etc/motd")).unwrap();
    assert!(
        motd.file_type().is_char_device(),
        "whiteout is a character device"
    );
    assert_eq!(motd.rdev(), 0, "whiteout is 0/0");
    assert!(!top_dir.join("etc/.wh.motd").exists());
    assert_eq!(opaque(&top_dir.join("var/cache")), Some(b"y".to_vec()));
    assert_eq!(opaque(&top_dir.join("etc")), None);
    assert!(!top_dir.join("var/cache/.wh..wh..opq").exists());
    assert_eq!(fs::read(top_dir.join("var/cache/new")).unwrap(), b"new");
    assert!(!top_dir.join("var/cache/old").exists());

    // What a container runtime would mount: the layers as overlayfs lower directories.
    let usage = store.disk_usage().unwrap();
    assert!(
        usage.inodes > 10 && usage.bytes > image.layers[0].compressed_size,
        "{usage:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root: cargo xtask test"]
async fn an_index_resolves_to_this_nodes_platform() {
    let registry = Registry::start();
    let ours = ImageBuilder::new()
        .layer(Layer::new(&Tar::busybox().build(), Compression::Gzip))
        .build();
    let theirs = ImageBuilder::new()
        .platform(other_platform())
        .layer(Layer::new(
            &Tar::new()
                .file("other", 0o644, b"not for this node")
                .build(),
            Compression::Gzip,
        ))
        .build();
    let index = Index::of(&[&theirs, &ours]);
    registry.push_index("multi", "latest", &index, &[&theirs, &ours]);

    let dir = test_support::temp_dir("img-store");
    let store = support::open(dir.path(), registry.host());
    let image = store
        .pull(&format!("{}/multi", registry.host()), &Auth::Anonymous)
        .await
        .unwrap();
    assert_eq!(image.manifest_digest.to_string(), ours.manifest_digest);
    assert_eq!(
        image.index_digest.as_ref().map(ToString::to_string),
        Some(index.digest.clone())
    );
    let (os, arch, _) = this_platform();
    assert_eq!(
        (
            image.platform.os.as_str(),
            image.platform.architecture.as_str()
        ),
        (os, arch)
    );
    assert_eq!(
        image.repo_digests,
        vec![format!("{}/multi@{}", registry.host(), index.digest)],
        "the repo digest is what the tag resolved to: the index"
    );
    assert_busybox(&store, &image.layers[0].chain_id);
    assert_eq!(store.get(&index.digest).unwrap().id, image.id);

    // A store for the other platform picks the other manifest.
    let other_dir = test_support::temp_dir("img-store");
    let mut config = support::config(other_dir.path(), registry.host());
    let (os, arch, variant) = other_platform();
    config.platform = Platform::new(os, arch, variant);
    let other = Store::open(config).unwrap();
    let image = other
        .pull(
            &format!("{}/multi:latest", registry.host()),
            &Auth::Anonymous,
        )
        .await
        .unwrap();
    assert_eq!(image.manifest_digest.to_string(), theirs.manifest_digest);
    assert!(
        other
            .layer_dir(&image.layers[0].chain_id)
            .join("other")
            .is_file()
    );

    // A platform the index does not have is named in the error, with what it has.
    let none_dir = test_support::temp_dir("img-store");
    let mut config = support::config(none_dir.path(), registry.host());
    config.platform = Platform::new("linux", "riscv64", None);
    let none = Store::open(config).unwrap();
    let err = none
        .pull(&format!("{}/multi", registry.host()), &Auth::Anonymous)
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("no manifest for platform linux/riscv64"),
        "{text}"
    );
    assert!(text.contains(&format!("{os}/{arch}")), "{text}");
    support::assert_empty_after_reopen(none, registry.host());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root: cargo xtask test"]
async fn pulls_of_one_reference_join_and_by_digest_need_no_tag() {
    let registry = Registry::start();
    let built = busybox_image(Compression::Gzip);
    registry.push_image("joined", Some("latest"), &built, Upload::Monolithic);
    let dir = test_support::temp_dir("img-store");
    let store = support::open(dir.path(), registry.host());
    let name = reference(registry.host(), "joined", "latest");
    let short = format!("{}/joined", registry.host());
    let (a, b, c) = tokio::join!(
        store.pull(&name, &Auth::Anonymous),
        store.pull(&name, &Auth::Anonymous),
        store.pull(&short, &Auth::Anonymous),
    );
    let (a, b, c) = (a.unwrap(), b.unwrap(), c.unwrap());
    assert_eq!(a, b);
    assert_eq!(a.id, c.id);
    assert_eq!(store.list().len(), 1);
    // The registry served the layer blob once per pull that was not joined: at most once.
    let gets = registry
        .log()
        .matches(&format!("GET /v2/joined/blobs/{}", built.layers[0].digest))
        .count();
    assert!(gets <= 1, "layer fetched {gets} times");

    let pinned = format!("{}/joined@{}", registry.host(), built.manifest_digest);
    let again = store.pull(&pinned, &Auth::Anonymous).await.unwrap();
    assert_eq!(again.id, a.id);
    assert_eq!(store.list().len(), 1, "the same image, one entry");
    assert_eq!(store.get(&pinned).unwrap().id, a.id);

    // A warm pull that changes nothing writes nothing: images.json is the same file.
    let index = dir.path().join("images.json");
    let before = fs::metadata(&index).unwrap();
    let warm = store.pull(&name, &Auth::Anonymous).await.unwrap();
    assert_eq!(warm, store.get(&name).unwrap());
    let after = fs::metadata(&index).unwrap();
    assert_eq!(
        (before.ino(), before.mtime(), before.mtime_nsec()),
        (after.ino(), after.mtime(), after.mtime_nsec()),
        "images.json was not rewritten"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root: cargo xtask test"]
async fn a_registry_not_listed_as_insecure_is_spoken_to_over_https_only() {
    let registry = Registry::start();
    registry.push_image(
        "plain",
        Some("latest"),
        &busybox_image(Compression::Gzip),
        Upload::Monolithic,
    );
    let dir = test_support::temp_dir("img-store");
    let store = Store::open(image_store::StoreConfig::new(dir.path())).unwrap();
    let err = store
        .pull(
            &reference(registry.host(), "plain", "latest"),
            &Auth::Anonymous,
        )
        .await
        .expect_err("a plain HTTP registry does not answer a TLS handshake");
    assert!(matches!(err, image_store::Error::Registry { .. }), "{err}");
    assert!(store.list().is_empty());
}

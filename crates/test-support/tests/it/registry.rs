//! The local registry (ignored unless asked: it needs Debian's docker-registry, which
//! `cargo xtask test` installs as root): it starts, takes pushes both ways, serves them back,
//! and keeps blobs where `blob_file` says. The stalling server never answers.

use std::io::Read as _;
use std::net::TcpStream;
use std::time::Duration;

use test_support::image::{Compression, ImageBuilder, Index, Layer, Tar, digest, media};
use test_support::registry::{Registry, Stall, Upload};

#[test]
#[ignore = "needs root: cargo xtask test"]
fn pushed_images_are_served_back() {
    let registry = Registry::start();
    let image = ImageBuilder::new()
        .layer(Layer::new(&Tar::busybox().build(), Compression::Gzip))
        .layer(Layer::new(
            &Tar::new().file("a", 0o644, b"a").build(),
            Compression::Zstd,
        ))
        .build();
    registry.push_image("chunked", Some("v1"), &image, Upload::Chunked(100_000));
    registry.push_image("mono", Some("v1"), &image, Upload::Monolithic);
    for repo in ["chunked", "mono"] {
        let r = registry.request(
            "GET",
            &format!("/v2/{repo}/manifests/v1"),
            &[("Accept", media::MANIFEST)],
            &[],
        );
        assert_eq!(r.status, 200, "{repo}");
        assert_eq!(r.body, image.manifest, "{repo}");
        for layer in &image.layers {
            let r = registry.request(
                "GET",
                &format!("/v2/{repo}/blobs/{}", layer.digest),
                &[],
                &[],
            );
            assert_eq!(r.status, 200);
            assert_eq!(digest(&r.body), layer.digest, "{repo}");
        }
    }
    assert_eq!(
        std::fs::read(registry.blob_file(&image.layers[1].digest)).unwrap(),
        image.layers[1].blob
    );

    let other = ImageBuilder::new()
        .platform(test_support::image::other_platform())
        .build();
    let index = Index::of(&[&image, &other]);
    registry.push_index("multi", "latest", &index, &[&image, &other]);
    let r = registry.request(
        "GET",
        "/v2/multi/manifests/latest",
        &[("Accept", media::INDEX)],
        &[],
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.body, index.bytes);
}

#[test]
fn the_stalling_server_accepts_and_never_answers() {
    let stall = Stall::start();
    let mut conn = TcpStream::connect(stall.host()).unwrap();
    conn.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut buf = [0u8; 1];
    let err = conn.read(&mut buf).unwrap_err();
    assert!(
        matches!(
            err.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
        "{err}"
    );
}

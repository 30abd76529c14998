//! Test images: digests are what the bytes hash to, layers decompress to their diff ids,
//! indexes list each image's platform, and the bomb is small outside and large inside.

use std::io::Read as _;

use serde_json::Value;
use test_support::image::{
    Compression, ImageBuilder, Index, Layer, Tar, digest, media, other_platform, this_platform,
};

fn gunzip(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(bytes)
        .read_to_end(&mut out)
        .unwrap();
    out
}

#[test]
fn layers_decompress_to_their_diff_ids() {
    let tar = Tar::new().dir("d", 0o755).file("d/f", 0o644, b"x").build();
    for (compression, media_type) in [
        (Compression::None, media::LAYER),
        (Compression::Gzip, media::LAYER_GZIP),
        (Compression::Zstd, media::LAYER_ZSTD),
    ] {
        let layer = Layer::new(&tar, compression);
        assert_eq!(layer.media_type, media_type);
        assert_eq!(layer.digest, digest(&layer.blob));
        assert_eq!(layer.diff_id, digest(&tar));
        let plain = match compression {
            Compression::None => layer.blob.clone(),
            Compression::Gzip => gunzip(&layer.blob),
            Compression::Zstd => zstd::decode_all(&layer.blob[..]).unwrap(),
        };
        assert_eq!(plain, tar, "{compression:?}");
    }
}

#[test]
fn raw_entries_keep_the_names_honest_tools_refuse() {
    let tar = Tar::new()
        .raw(tar::EntryType::Regular, b"../escape", b"", b"x")
        .raw(tar::EntryType::Link, b"passwd", b"/etc/passwd", b"")
        .build();
    let mut archive = tar::Archive::new(&tar[..]);
    let names: Vec<(Vec<u8>, Option<Vec<u8>>)> = archive
        .entries()
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.path_bytes().into_owned(),
                e.link_name_bytes().map(std::borrow::Cow::into_owned),
            )
        })
        .collect();
    assert_eq!(
        names,
        vec![
            (b"../escape".to_vec(), None),
            (b"passwd".to_vec(), Some(b"/etc/passwd".to_vec())),
        ]
    );
}

#[test]
fn manifests_and_configs_name_their_parts() {
    let layer = Layer::new(
        &Tar::new().file("a", 0o644, b"a").build(),
        Compression::Gzip,
    );
    let image = ImageBuilder::new()
        .layer(layer.clone())
        .label("k", "v")
        .build();
    assert_eq!(image.config_digest, digest(&image.config));
    assert_eq!(image.manifest_digest, digest(&image.manifest));
    let manifest: Value = serde_json::from_slice(&image.manifest).unwrap();
    assert_eq!(manifest["config"]["digest"], image.config_digest.as_str());
    assert_eq!(manifest["config"]["size"], image.config.len());
    assert_eq!(manifest["layers"][0]["digest"], layer.digest.as_str());
    assert_eq!(manifest["layers"][0]["size"], layer.blob.len());
    let config: Value = serde_json::from_slice(&image.config).unwrap();
    assert_eq!(config["rootfs"]["diff_ids"][0], layer.diff_id.as_str());
    assert_eq!(config["architecture"], this_platform().1);
    assert_eq!(config["config"]["Labels"]["k"], "v");

    let lie = ImageBuilder::new()
        .layer(layer)
        .edit_manifest(|m| m["layers"][0]["size"] = Value::from(1))
        .build();
    let manifest: Value = serde_json::from_slice(&lie.manifest).unwrap();
    assert_eq!(manifest["layers"][0]["size"], 1);
}

#[test]
fn an_index_lists_each_platform() {
    let ours = ImageBuilder::new().build();
    let theirs = ImageBuilder::new().platform(other_platform()).build();
    let index = Index::of(&[&ours, &theirs]);
    assert_eq!(index.digest, digest(&index.bytes));
    let v: Value = serde_json::from_slice(&index.bytes).unwrap();
    assert_eq!(v["mediaType"], media::INDEX);
    assert_eq!(v["manifests"][0]["digest"], ours.manifest_digest.as_str());
    assert_eq!(
        v["manifests"][0]["platform"]["architecture"],
        this_platform().1
    );
    assert_eq!(
        v["manifests"][1]["platform"]["architecture"],
        other_platform().1
    );
    assert_ne!(this_platform().1, other_platform().1);
}

#[test]
fn the_bomb_is_small_outside_and_large_inside() {
    let bomb = Layer::zero_bomb("zeros", 64 << 20);
    assert!(bomb.blob.len() < 256 << 10, "{} bytes", bomb.blob.len());
    let tar = gunzip(&bomb.blob);
    assert!(tar.len() > 64 << 20);
    assert_eq!(digest(&tar), bomb.diff_id);
}

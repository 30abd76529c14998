//! The benchmark's image, made offline and the same on every run: a busybox layer, then data
//! layers whose files are mostly pseudo-random (incompressible, as a real image's binaries and
//! compressed assets mostly are), half the bytes in a few big files and half in many small ones,
//! every eighth file text; the top layer deletes one file of the first data layer (a whiteout).
//! Layers are gzip, pushed to the registry under `bench/image:v1`.

use serde_json::{Value, json};
use test_support::http;
use test_support::image::{Compression, Image, ImageBuilder, Layer, Tar, media};

/// The repository and tag the image is pushed as.
pub(crate) const REPO: &str = "bench/image";
pub(crate) const TAG: &str = "v1";

/// splitmix64: small, fast and fixed, so the image's bytes (and digests) never change.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `lo..=hi`.
    fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }

    pub(crate) fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let bytes = self.next().to_le_bytes();
            chunk.copy_from_slice(&bytes[..chunk.len()]);
        }
    }
}

/// What a layer holds, for the rates.
#[derive(Default)]
struct Content {
    files: u64,
    bytes: u64,
}

/// File contents: pseudo-random, or (every eighth file) text that compresses about 20-fold.
fn contents(rng: &mut Rng, size: u64, n: u64) -> Vec<u8> {
    let mut data = vec![0u8; size as usize];
    if n % 8 == 7 {
        let line = format!("line {n}: the quick brown fox jumps over the lazy dog\n");
        for (b, l) in data.iter_mut().zip(line.bytes().cycle()) {
            *b = l;
        }
    } else {
        rng.fill(&mut data);
    }
    data
}

/// Data layer `i` of about `bytes`: half in files of 1 to 8 MiB, half in files of 512 bytes to
/// 32 KiB, 64 to a directory.
fn data_layer(i: usize, bytes: u64, content: &mut Content) -> Vec<u8> {
    let mut rng = Rng::new(0x5eed_u64.wrapping_mul(i as u64 + 1));
    let top = format!("data{i}");
    let mut tar = Tar::new()
        .dir(&top, 0o755)
        .dir(&format!("{top}/big"), 0o755)
        .dir(&format!("{top}/small"), 0o755);
    let (mut big, mut n) = (0u64, 0u64);
    while big < bytes / 2 {
        let size = rng.between(1 << 20, 8 << 20).min(bytes / 2 - big).max(1);
        tar = tar.file(
            &format!("{top}/big/{n}.bin"),
            0o644,
            &contents(&mut rng, size, n),
        );
        big += size;
        n += 1;
    }
    let (mut small, mut k) = (0u64, 0u64);
    while small < bytes / 2 {
        if k % 64 == 0 {
            tar = tar.dir(&format!("{top}/small/{}", k / 64), 0o755);
        }
        let size = rng.between(512, 32 << 10);
        let path = format!("{top}/small/{}/{k}.dat", k / 64);
        tar = tar.file(&path, 0o644, &contents(&mut rng, size, n + k));
        small += size;
        k += 1;
    }
    content.files += n + k;
    content.bytes += big + small;
    tar.build()
}

/// Builds the image (`layers` data layers of `layer_mib` MiB each) and pushes it to the registry
/// at `host`; returns what the rates are computed from.
///
/// The registry runs in the bench process that spawned this one (test-support's `Registry` is
/// started there and killed on its drop), so this one speaks the distribution API itself.
pub(crate) fn build_and_push(host: &str, layers: usize, layer_mib: u64) -> Result<Value, String> {
    let mut content = Content::default();
    let busybox = std::fs::metadata("/bin/busybox").map_or(0, |m| m.len());
    content.files += 1;
    content.bytes += busybox;
    let mut builder = ImageBuilder::new()
        .label("org.opencontainers.image.title", "image-bench")
        .layer(Layer::new(&Tar::busybox().build(), Compression::Gzip));
    for i in 0..layers {
        let mut tar = data_layer(i, layer_mib << 20, &mut content);
        if i + 1 == layers {
            // The top layer deletes the first data layer's first big file.
            let whiteout = Tar::new().whiteout("data0/big/0.bin").build();
            // Both archives end in two zero blocks; drop this one's before appending.
            tar.truncate(tar.len() - 1024);
            tar.extend_from_slice(&whiteout);
        }
        builder = builder.layer(Layer::new(&tar, Compression::Gzip));
    }
    let image = builder.build();
    push(host, &image)?;
    let compressed: u64 = image
        .layers
        .iter()
        .map(|l| l.blob.len() as u64)
        .sum::<u64>()
        + image.config.len() as u64
        + image.manifest.len() as u64;
    Ok(json!({
        "reference": format!("{host}/{REPO}:{TAG}"),
        "layers": image.layers.len(),
        "compressed_bytes": compressed,
        "unpacked_file_bytes": content.bytes,
        "files": content.files,
        "manifest_digest": image.manifest_digest,
        "compression": "gzip",
    }))
}

/// Pushes the blobs (monolithic uploads) and the manifest, tagged [`TAG`].
fn push(host: &str, image: &Image) -> Result<(), String> {
    let call = |method: &str, path: &str, kind: &str, body: &[u8], want: u16| {
        let r = http::request(host, method, path, &[("Content-Type", kind)], body)
            .map_err(|e| format!("{method} {path}: {e}"))?;
        if r.status != want {
            return Err(format!(
                "{method} {path}: {} {}",
                r.status,
                String::from_utf8_lossy(&r.body)
            ));
        }
        Ok(r)
    };
    let blobs = std::iter::once(&image.config).chain(image.layers.iter().map(|l| &l.blob));
    for blob in blobs {
        let digest = test_support::image::digest(blob);
        let start = call("POST", &format!("/v2/{REPO}/blobs/uploads/"), "", &[], 202)?;
        let location = start
            .header("location")
            .ok_or("no Location for an upload")?
            .to_owned();
        // The registry may answer with an absolute URL.
        let path = match location.split_once("://") {
            Some((_, rest)) => rest.find('/').map_or("/", |i| &rest[i..]).to_owned(),
            None => location,
        };
        let sep = if path.contains('?') { '&' } else { '?' };
        let put = format!("{path}{sep}digest={digest}");
        call("PUT", &put, "application/octet-stream", blob, 201)?;
    }
    let manifest = format!("/v2/{REPO}/manifests/{TAG}");
    call("PUT", &manifest, media::MANIFEST, &image.manifest, 201)?;
    Ok(())
}

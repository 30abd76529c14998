//! For the fuzz targets in `fuzz/` only (feature `fuzzing`); not an API.

use crate::blobs::DOCUMENT_MAX;
use crate::digest::Digest;
use crate::documents::Documents;
use crate::error::{Error, Result};
use crate::platform::Platform;
use crate::pull::{Kind, kind};

/// What a pull makes of the documents a registry sends: `top` as fetched by tag (a manifest or
/// an index), then, for an index, `manifest` (the entry chosen for `platform`), and the
/// configuration `config`. Returns the layers the pull would fetch. Digests are not checked
/// against the bytes (a fuzzer cannot forge them); sizes are, against the caps the pull reads
/// with: a document past 4 MiB is refused.
///
/// # Errors
///
/// What the pull would fail with.
pub fn registry_documents(
    top: &[u8],
    manifest: &[u8],
    config: &[u8],
    platform: &Platform,
) -> Result<usize> {
    let documents = Documents {
        image: "registry.fuzz/image:latest",
    };
    for (what, bytes) in [("top", top), ("manifest", manifest), ("config", config)] {
        if bytes.len() as u64 > DOCUMENT_MAX {
            return Err(Error::Malformed {
                image: documents.image.to_owned(),
                what: what.to_owned(),
                reason: format!("larger than {DOCUMENT_MAX} bytes"),
            });
        }
    }
    let top_digest = Digest::of(top);
    let (bytes, digest, config) = match kind(top) {
        Kind::Index => {
            let chosen = documents.choose(top, &top_digest, platform)?;
            (manifest, chosen, config)
        }
        Kind::Manifest => (top, top_digest, manifest),
        Kind::Unknown(why) => {
            return Err(Error::Malformed {
                image: documents.image.to_owned(),
                what: format!("manifest {top_digest}"),
                reason: why,
            });
        }
    };
    let manifest = documents.manifest(bytes, &digest)?;
    let (_, plans) = documents.config(&manifest, config)?;
    Ok(plans.len())
}

/// Unpacks one layer blob (gzip, zstd or plain tar) into the existing, empty directory `dest`
/// under `limits`, as a pull does, and returns its diff id. The error
/// names no image and no layer.
///
/// # Errors
///
/// [`Error::Layer`] as a pull's unpack fails.
pub fn unpack_layer(
    blob: impl std::io::Read,
    dest: &std::path::Path,
    limits: &crate::Limits,
) -> Result<Digest> {
    let cancelled = std::sync::atomic::AtomicBool::new(false);
    crate::unpack::unpack(blob, dest, limits, &cancelled).map_err(|f| Error::Layer {
        image: String::new(),
        layer: String::new(),
        entry: f.entry,
        problem: f.problem,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_document_past_the_cap_is_refused_unread() {
        let huge = vec![b' '; usize::try_from(DOCUMENT_MAX).unwrap() + 1];
        let err = registry_documents(&huge, b"", b"", &Platform::this_node()).unwrap_err();
        assert!(err.to_string().contains("larger than"), "{err}");
    }

    #[test]
    fn a_manifest_and_its_config_plan_their_layers() {
        let diff = format!("sha256:{}", "1".repeat(64));
        let manifest = format!(
            r#"{{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",
               "config":{{"mediaType":"application/vnd.oci.image.config.v1+json","size":2,
                          "digest":"sha256:{}"}},
               "layers":[{{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","size":9,
                           "digest":"sha256:{}"}}]}}"#,
            "2".repeat(64),
            "3".repeat(64)
        );
        let config = format!(
            r#"{{"architecture":"amd64","os":"linux","rootfs":{{"type":"layers","diff_ids":["{diff}"]}}}}"#
        );
        let layers = registry_documents(
            manifest.as_bytes(),
            config.as_bytes(),
            b"",
            &Platform::this_node(),
        );
        assert_eq!(layers.unwrap(), 1);
    }
}

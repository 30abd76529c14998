//! What a pull makes of the documents a registry sends: an index (this node's manifest chosen),
//! a manifest (its configuration's descriptor, capped) and a configuration (its diff ids, one
//! per layer, and each layer's plan). Pure: no I/O, so `fuzzing` can feed them anything.

use oci_spec::image::{ImageConfiguration, ImageIndex, ImageManifest};

use crate::blobs::DOCUMENT_MAX;
use crate::digest::Digest;
use crate::error::{Error, LayerProblem, Result};
use crate::index::Layer;
use crate::platform::Platform;
use crate::pull::{DOCKER_MANIFEST, LAYER_TYPES, OCI_MANIFEST};

/// The documents of one image, errors naming it.
pub(crate) struct Documents<'a> {
    pub(crate) image: &'a str,
}

/// A manifest, with what the pull fetches next.
pub(crate) struct Manifest {
    pub(crate) parsed: ImageManifest,
    /// How errors name it: `manifest sha256:…`.
    what: String,
    pub(crate) config_digest: Digest,
    pub(crate) config_size: u64,
}

impl Documents<'_> {
    /// The manifest of platform `wanted` in the index `bytes`.
    pub(crate) fn choose(
        &self,
        bytes: &[u8],
        digest: &Digest,
        wanted: &Platform,
    ) -> Result<Digest> {
        let what = format!("index {digest}");
        let index =
            ImageIndex::from_reader(bytes).map_err(|e| self.malformed(&what, e.to_string()))?;
        let mut available = Vec::new();
        for desc in index.manifests() {
            let Some(p) = desc.platform() else { continue };
            let (os, arch) = (p.os().to_string(), p.architecture().to_string());
            if wanted.matches(&os, &arch, p.variant().as_deref()) {
                let media = desc.media_type().to_string();
                if media != OCI_MANIFEST && media != DOCKER_MANIFEST {
                    return Err(self.malformed(&what, format!("entry of media type {media:?}")));
                }
                return self.digest_of(desc.digest().to_string(), &what);
            }
            available.push(Platform::new(&os, &arch, p.variant().as_deref()).to_string());
        }
        Err(Error::NoMatchingPlatform {
            image: self.image.to_owned(),
            wanted: wanted.to_string(),
            available,
        })
    }

    /// The manifest `bytes`, its configuration's size checked against the cap.
    pub(crate) fn manifest(&self, bytes: &[u8], digest: &Digest) -> Result<Manifest> {
        let what = format!("manifest {digest}");
        let manifest =
            ImageManifest::from_reader(bytes).map_err(|e| self.malformed(&what, e.to_string()))?;
        let config_digest = self.digest_of(manifest.config().digest().to_string(), &what)?;
        let config_size = manifest.config().size();
        if config_size > DOCUMENT_MAX {
            return Err(self.malformed(&what, format!("config of {config_size} bytes")));
        }
        Ok(Manifest {
            parsed: manifest,
            what,
            config_digest,
            config_size,
        })
    }

    /// The configuration `bytes` of `manifest`, and each layer's plan: one diff id per layer.
    pub(crate) fn config(
        &self,
        manifest: &Manifest,
        bytes: &[u8],
    ) -> Result<(ImageConfiguration, Vec<Layer>)> {
        let what = format!("config {}", manifest.config_digest);
        let config = ImageConfiguration::from_reader(bytes)
            .map_err(|e| self.malformed(&what, e.to_string()))?;
        let diff_ids = config
            .rootfs()
            .diff_ids()
            .iter()
            .map(|d| self.digest_of(d.clone(), &what))
            .collect::<Result<Vec<_>>>()?;
        let layers = manifest.parsed.layers();
        if diff_ids.len() != layers.len() {
            return Err(self.malformed(
                &what,
                format!("{} diff ids for {} layers", diff_ids.len(), layers.len()),
            ));
        }
        let plans = self.plan_layers(&manifest.parsed, &diff_ids, &manifest.what)?;
        Ok((config, plans))
    }

    /// Each layer of `manifest` with its chain id, refusing media types that are not layers.
    fn plan_layers(
        &self,
        manifest: &ImageManifest,
        diff_ids: &[Digest],
        what: &str,
    ) -> Result<Vec<Layer>> {
        let mut chain: Option<Digest> = None;
        let mut plans = Vec::new();
        for (desc, diff_id) in manifest.layers().iter().zip(diff_ids) {
            let chain_id = Digest::chain(chain.as_ref(), diff_id);
            let digest = self.digest_of(desc.digest().to_string(), what)?;
            let media_type = desc.media_type().to_string();
            if !LAYER_TYPES.contains(&media_type.as_str()) {
                return Err(Error::Layer {
                    image: self.image.to_owned(),
                    layer: digest.to_string(),
                    entry: None,
                    problem: LayerProblem::MediaType(media_type),
                });
            }
            plans.push(Layer {
                digest,
                media_type,
                compressed_size: desc.size(),
                diff_id: diff_id.clone(),
                chain_id: chain_id.clone(),
                size: 0,
            });
            chain = Some(chain_id);
        }
        Ok(plans)
    }

    fn malformed(&self, what: &str, reason: impl Into<String>) -> Error {
        Error::Malformed {
            image: self.image.to_owned(),
            what: what.to_owned(),
            reason: reason.into(),
        }
    }

    fn digest_of(&self, text: String, what: &str) -> Result<Digest> {
        Digest::parse(&text).map_err(|e| self.malformed(what, e.to_string()))
    }
}

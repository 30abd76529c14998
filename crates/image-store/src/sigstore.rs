//! Sigstore (cosign) signatures with public keys: finding them beside the image, and deciding
//! whether one satisfies a `sigstoreSigned` requirement.
//!
//! cosign stores the signatures of manifest `sha256:<hex>` in the same repository as an OCI
//! manifest tagged `sha256-<hex>.sig`. Each of its layers of media type
//! `application/vnd.dev.cosign.simplesigning.v1+json` is a "simple signing" payload naming the
//! signed manifest digest and identity; its annotation `dev.cosignproject.cosign/signature` is
//! the base64 of an ASN.1 DER ECDSA signature over the payload's bytes.

use base64::Engine as _;
use futures_util::StreamExt as _;
use oci_client::errors::{OciDistributionError, OciErrorCode};
use p256::ecdsa::DerSignature;
use p256::ecdsa::signature::Verifier as _;
use serde::Deserialize;

use crate::digest::Digest;
use crate::error::{Error, Result};
use crate::policy::{SignedIdentity, SigstoreSigned};
use crate::pull::Puller;
use crate::reference::Reference;

/// The media type of a cosign simple-signing payload layer.
pub const SIMPLE_SIGNING_MEDIA_TYPE: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// The layer annotation holding the base64 signature.
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// `critical.type` of a cosign payload.
const SIGNATURE_TYPE: &str = "cosign container image signature";
/// The largest signature manifest or payload read.
const SIGNATURE_MAX: u64 = 256 << 10;
/// The most signatures looked at for one image.
const SIGNATURES_MAX: usize = 64;

/// The tag cosign stores the signatures of `digest` under: `sha256-<hex>.sig`.
pub fn signature_tag(digest: &Digest) -> String {
    format!("sha256-{}.sig", digest.hex())
}

/// A signature as the registry sent it: nothing in it is trusted until [`verify`] says so.
#[derive(Debug, Clone)]
pub(crate) struct Untrusted {
    /// The payload layer's digest, which its bytes have been checked to hash to.
    pub(crate) layer: String,
    pub(crate) payload: Vec<u8>,
    pub(crate) signature: Option<String>,
}

#[derive(Deserialize)]
struct SignatureManifest {
    #[serde(default)]
    layers: Vec<SignatureLayer>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SignatureLayer {
    media_type: String,
    digest: String,
    size: u64,
    #[serde(default)]
    annotations: std::collections::HashMap<String, String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Payload {
    critical: Critical,
    #[serde(default)]
    #[expect(
        dead_code,
        reason = "accepted so serde's unknown-field check passes, never read"
    )]
    optional: Option<serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Critical {
    #[serde(rename = "type")]
    kind: String,
    image: PayloadImage,
    identity: PayloadIdentity,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PayloadImage {
    #[serde(rename = "docker-manifest-digest")]
    digest: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PayloadIdentity {
    #[serde(rename = "docker-reference")]
    reference: String,
}

/// Whether `signature` satisfies `requirement` for `image` (as the user named it) whose
/// top-level manifest (the index, for a multi-platform image) is `manifest`; why not, if not.
pub(crate) fn verify(
    requirement: &SigstoreSigned,
    signature: &Untrusted,
    manifest: &Digest,
    image: &Reference,
) -> std::result::Result<(), String> {
    let Some(encoded) = &signature.signature else {
        return Err(format!("no {SIGNATURE_ANNOTATION} annotation"));
    };
    let der = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .map_err(|e| format!("signature is not base64: {e}"))?;
    let der = DerSignature::from_bytes(&der)
        .map_err(|_| "signature is not a DER ECDSA signature".to_owned())?;
    let mut failures = Vec::new();
    let mut verified = false;
    for key in &requirement.keys {
        match &key.key {
            Ok(k) if k.verify(&signature.payload, &der).is_ok() => {
                verified = true;
                break;
            }
            Ok(_) => failures.push(format!("not signed by {}", key.origin)),
            Err(e) => failures.push(format!("{}: {e}", key.origin)),
        }
    }
    if !verified {
        return Err(format!(
            "cryptographic verification failed: {}",
            failures.join("; ")
        ));
    }
    // Only now is the payload the signer's: parse it.
    let payload: Payload = serde_json::from_slice(&signature.payload)
        .map_err(|e| format!("signed payload is not a cosign payload: {e}"))?;
    let critical = payload.critical;
    if critical.kind != SIGNATURE_TYPE {
        return Err(format!("unknown signature type {:?}", critical.kind));
    }
    let signed = Digest::parse(&critical.image.digest)
        .map_err(|e| format!("signed docker-manifest-digest: {e}"))?;
    if signed != *manifest {
        return Err(format!(
            "signature is for manifest {signed}, the image's is {manifest}"
        ));
    }
    if !identity_matches(&requirement.identity, image, &critical.identity.reference) {
        return Err(format!(
            "signed identity {:?} does not match {image} ({})",
            critical.identity.reference,
            identity_rule(&requirement.identity)
        ));
    }
    Ok(())
}

fn identity_rule(identity: &SignedIdentity) -> String {
    match identity {
        SignedIdentity::MatchRepoDigestOrExact => "matchRepoDigestOrExact".to_owned(),
        SignedIdentity::MatchExact => "matchExact".to_owned(),
        SignedIdentity::MatchRepository => "matchRepository".to_owned(),
        SignedIdentity::ExactReference(r) => format!("exactReference {r}"),
        SignedIdentity::ExactRepository(r) => format!("exactRepository {r}"),
        SignedIdentity::RemapIdentity {
            prefix,
            signed_prefix,
        } => format!("remapIdentity {prefix} -> {signed_prefix}"),
    }
}

/// Whether the identity a signature claims satisfies `rule` for `image`, as containers/image's
/// reference matches decide.
pub(crate) fn identity_matches(rule: &SignedIdentity, image: &Reference, signed: &str) -> bool {
    let Ok((signed, written)) = Reference::parse_written(signed) else {
        return false;
    };
    let exact = |intended: &Reference| !written.name_only && signed == *intended;
    let same_repo = |intended: &Reference| signed.name() == intended.name();
    let repo_digest_or_exact = |intended: &Reference| {
        !written.name_only
            && if intended.tag().is_some() {
                signed == *intended
            } else {
                same_repo(intended)
            }
    };
    match rule {
        SignedIdentity::MatchRepoDigestOrExact => repo_digest_or_exact(image),
        SignedIdentity::MatchExact => exact(image),
        SignedIdentity::MatchRepository => same_repo(image),
        SignedIdentity::ExactReference(r) => Reference::parse(r).is_ok_and(|r| exact(&r)),
        SignedIdentity::ExactRepository(r) => Reference::parse(r).is_ok_and(|r| same_repo(&r)),
        SignedIdentity::RemapIdentity {
            prefix,
            signed_prefix,
        } => {
            let name = image.name();
            let remapped = match name.strip_prefix(prefix.as_str()) {
                Some(rest) if rest.is_empty() || rest.starts_with('/') => {
                    let text = image.to_string();
                    Reference::parse(&format!("{signed_prefix}{}", &text[prefix.len()..]))
                }
                _ => Ok(image.clone()),
            };
            remapped.is_ok_and(|r| repo_digest_or_exact(&r))
        }
    }
}

impl Puller {
    /// The signatures stored beside manifest `digest` in the repository being pulled from;
    /// `None` when there is no signature manifest.
    pub(crate) async fn signatures(&self, digest: &Digest) -> Result<Option<Vec<Untrusted>>> {
        let tag = signature_tag(digest);
        let target = oci_client::Reference::with_tag(
            self.target.registry().to_owned(),
            self.target.repository().to_owned(),
            tag.clone(),
        );
        let op = format!("fetch the signatures ({tag})");
        let fetch = self.get_manifest(
            &target,
            &[crate::pull::OCI_MANIFEST, crate::pull::DOCKER_MANIFEST],
            SIGNATURE_MAX,
        );
        let bytes = match self.timed(&op, fetch).await? {
            Ok(bytes) => bytes,
            Err(e) if not_found(&e) => return Ok(None),
            Err(e) => return Err(self.registry(&op, e)),
        };
        let what = format!("signature manifest {tag}");
        if bytes.len() as u64 > SIGNATURE_MAX {
            return Err(self.malformed(&what, format!("{} bytes is too large", bytes.len())));
        }
        let manifest: SignatureManifest =
            serde_json::from_slice(&bytes).map_err(|e| self.malformed(&what, e.to_string()))?;
        let mut signatures = Vec::new();
        for layer in manifest
            .layers
            .into_iter()
            .filter(|l| l.media_type == SIMPLE_SIGNING_MEDIA_TYPE)
            .take(SIGNATURES_MAX)
        {
            let digest =
                Digest::parse(&layer.digest).map_err(|e| self.malformed(&what, e.to_string()))?;
            if layer.size > SIGNATURE_MAX {
                return Err(self.malformed(&what, format!("payload of {} bytes", layer.size)));
            }
            let payload = self.small_blob(&target, &digest, layer.size).await?;
            signatures.push(Untrusted {
                layer: layer.digest,
                payload,
                signature: layer.annotations.get(SIGNATURE_ANNOTATION).cloned(),
            });
        }
        Ok(Some(signatures))
    }

    /// A blob of at most `size` bytes, in memory, checked against its digest.
    async fn small_blob(
        &self,
        target: &oci_client::Reference,
        digest: &Digest,
        size: u64,
    ) -> Result<Vec<u8>> {
        let op = format!("fetch signature payload {digest}");
        let digest_text = digest.to_string();
        let open = self.client.pull_blob_stream(target, digest_text.as_str());
        let mut stream = self
            .timed(&op, open)
            .await?
            .map_err(|e| self.registry(&op, e))?;
        let mut bytes = Vec::new();
        while let Some(chunk) = self.timed(&op, stream.next()).await? {
            let chunk = chunk.map_err(|e| Error::Malformed {
                image: self.image.clone(),
                what: format!("signature payload {digest}"),
                reason: e.to_string(),
            })?;
            self.received(chunk.len());
            bytes.extend_from_slice(&chunk);
            if bytes.len() as u64 > size {
                break;
            }
        }
        if bytes.len() as u64 != size {
            return Err(Error::SizeMismatch {
                image: self.image.clone(),
                digest: digest.to_string(),
                expected: size,
                actual: bytes.len().to_string(),
            });
        }
        let actual = Digest::of(&bytes);
        if actual != *digest {
            return Err(Error::DigestMismatch {
                image: self.image.clone(),
                expected: digest.to_string(),
                actual: actual.to_string(),
            });
        }
        Ok(bytes)
    }
}

/// Whether the registry said the manifest is not there (rather than failing).
fn not_found(e: &OciDistributionError) -> bool {
    match e {
        OciDistributionError::ImageManifestNotFoundError(_) => true,
        OciDistributionError::ServerError { code, .. } => *code == 404,
        OciDistributionError::RegistryError { envelope, .. } => envelope.errors.iter().any(|e| {
            matches!(
                e.code,
                OciErrorCode::ManifestUnknown | OciErrorCode::NameUnknown
            )
        }),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(text: &str) -> Reference {
        Reference::parse(text).unwrap()
    }

    fn check(cases: &[(SignedIdentity, &str, &str, bool)]) {
        for (rule, image, signed, want) in cases {
            assert_eq!(
                identity_matches(rule, &r(image), signed),
                *want,
                "{rule:?} image {image} signed {signed}"
            );
        }
    }

    #[test]
    fn identities_match_as_containers_image_decides() {
        use SignedIdentity::*;
        let digest = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        let by_digest = format!("quay.io/ns/app@{digest}");
        let cases: Vec<(SignedIdentity, &str, &str, bool)> = vec![
            (
                MatchRepoDigestOrExact,
                "quay.io/ns/app:v1",
                "quay.io/ns/app:v1",
                true,
            ),
            (
                MatchRepoDigestOrExact,
                "quay.io/ns/app:v1",
                "quay.io/ns/app:v2",
                false,
            ),
            (
                MatchRepoDigestOrExact,
                "quay.io/ns/app:v1",
                "quay.io/ns/app",
                false,
            ),
            (
                MatchRepoDigestOrExact,
                &by_digest,
                "quay.io/ns/app:v9",
                true,
            ),
            (
                MatchRepoDigestOrExact,
                &by_digest,
                "quay.io/ns/other:v9",
                false,
            ),
            (MatchRepoDigestOrExact, &by_digest, "quay.io/ns/app", false),
            (
                MatchRepoDigestOrExact,
                "busybox",
                "docker.io/library/busybox:latest",
                true,
            ),
            (MatchRepoDigestOrExact, "busybox", "busybox:latest", true),
            (MatchExact, "quay.io/ns/app:v1", "quay.io/ns/app:v1", true),
            (MatchExact, &by_digest, "quay.io/ns/app:v1", false),
            (MatchRepository, "quay.io/ns/app:v1", "quay.io/ns/app", true),
            (
                MatchRepository,
                "quay.io/ns/app:v1",
                "quay.io/ns/app:v2",
                true,
            ),
            (
                MatchRepository,
                "quay.io/ns/app:v1",
                "quay.io/ns/app2",
                false,
            ),
        ];
        check(&cases);
    }

    #[test]
    fn named_and_remapped_identities_match_as_containers_image_decides() {
        use SignedIdentity::*;
        let remap = RemapIdentity {
            prefix: "mirror.local/vendor".into(),
            signed_prefix: "quay.io/ns".into(),
        };
        let cases: Vec<(SignedIdentity, &str, &str, bool)> = vec![
            (
                ExactReference("quay.io/ns/app:v1".into()),
                "mirror.local/x:y",
                "quay.io/ns/app:v1",
                true,
            ),
            (
                ExactReference("quay.io/ns/app:v1".into()),
                "mirror.local/x:y",
                "quay.io/ns/app:v2",
                false,
            ),
            (
                ExactRepository("quay.io/ns/app".into()),
                "mirror.local/x:y",
                "quay.io/ns/app:v2",
                true,
            ),
            (
                ExactRepository("quay.io/ns/app".into()),
                "mirror.local/x:y",
                "quay.io/ns/other",
                false,
            ),
            (
                remap.clone(),
                "mirror.local/vendor/app:v1",
                "quay.io/ns/app:v1",
                true,
            ),
            (
                remap.clone(),
                "mirror.local/vendor/app:v1",
                "mirror.local/vendor/app:v1",
                false,
            ),
            (
                remap.clone(),
                "mirror.local/vendorx/app:v1",
                "mirror.local/vendorx/app:v1",
                true,
            ),
            (
                MatchRepository,
                "quay.io/ns/app:v1",
                "Not A Reference",
                false,
            ),
        ];
        check(&cases);
    }

    #[test]
    fn the_signature_tag_names_the_digest() {
        let d = Digest::of(b"");
        assert_eq!(
            signature_tag(&d),
            "sha256-e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855.sig"
        );
    }
}

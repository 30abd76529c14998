//! The signature policy: containers-policy.json(5), as containers/image reads it.
//!
//! Parsing is strict as containers/image's is: an unknown field, an unknown requirement type, a
//! duplicated key or an empty requirement list refuses the whole file. Requirements that this
//! crate cannot check (`signedBy` with GPG keys, `signedBaseLayer`, sigstore with Fulcio, PKI or
//! Rekor) load, so that the rest of a policy works, and refuse every pull of the scopes that
//! carry them: never an accept.

use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use p256::ecdsa::VerifyingKey;
use p256::pkcs8::DecodePublicKey as _;
use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, Visitor};

use crate::error::{Error, Result};
use crate::reference::Reference;

/// The largest policy file or key file read.
const FILE_MAX: u64 = 1 << 20;

/// The only transport this crate pulls from.
pub(crate) const DOCKER_TRANSPORT: &str = "docker";

/// A signature policy: requirements by transport and scope, and a default.
///
/// For an image the most specific scope of the `docker` transport applies: the full reference
/// (`quay.io/ns/app:v1`, or `…@sha256:…` for a digest reference), then the repository, its
/// namespaces upward, the registry (`host[:port]`), wildcarded domains (`*.quay.io`, `*.io`),
/// the transport's `""` scope, and last the global `default`. Only that one section applies, and
/// an image passes when every requirement in it does.
#[derive(Debug, Clone)]
pub struct Policy {
    path: PathBuf,
    default: Vec<Requirement>,
    transports: BTreeMap<String, BTreeMap<String, Vec<Requirement>>>,
}

/// One policy requirement.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Requirement {
    /// `insecureAcceptAnything`: accepts any image.
    InsecureAcceptAnything,
    /// `reject`: refuses every image.
    Reject,
    /// `signedBy`: GPG simple signing, which this crate cannot verify: refuses.
    SignedBy,
    /// `signedBaseLayer`, which this crate cannot check: refuses.
    SignedBaseLayer,
    /// `sigstoreSigned`: a sigstore (cosign) signature by one of the keys.
    SigstoreSigned(SigstoreSigned),
}

impl Requirement {
    /// The requirement's `type` in policy.json.
    pub fn type_name(&self) -> &'static str {
        match self {
            Requirement::InsecureAcceptAnything => "insecureAcceptAnything",
            Requirement::Reject => "reject",
            Requirement::SignedBy => "signedBy",
            Requirement::SignedBaseLayer => "signedBaseLayer",
            Requirement::SigstoreSigned(_) => "sigstoreSigned",
        }
    }

    /// Why the requirement refuses without looking at the image, if it does.
    pub(crate) fn refuses_outright(&self) -> Option<String> {
        match self {
            Requirement::InsecureAcceptAnything => None,
            Requirement::Reject => Some("the policy rejects these images".to_owned()),
            Requirement::SignedBy => Some(
                "signedBy (GPG simple signing) is not supported; use sigstoreSigned".to_owned(),
            ),
            Requirement::SignedBaseLayer => Some("signedBaseLayer is not supported".to_owned()),
            Requirement::SigstoreSigned(s) => s.unsupported.map(|what| {
                format!("sigstoreSigned with {what} is not supported; use keyPath or keyData")
            }),
        }
    }
}

/// A `sigstoreSigned` requirement with public keys.
#[derive(Debug, Clone)]
pub struct SigstoreSigned {
    pub(crate) keys: Vec<PublicKey>,
    /// What of the requirement this crate cannot verify (`fulcio`, `pki`, `rekorPublicKey…`).
    pub(crate) unsupported: Option<&'static str>,
    pub(crate) identity: SignedIdentity,
}

impl SigstoreSigned {
    /// What the signature's `docker-reference` must match.
    pub fn signed_identity(&self) -> &SignedIdentity {
        &self.identity
    }
}

/// A public key of a `sigstoreSigned` requirement, or why it cannot be used.
#[derive(Debug, Clone)]
pub(crate) struct PublicKey {
    /// `keyPath /etc/keys/a.pub`, `keyDatas[1]`: where the key came from.
    pub(crate) origin: String,
    pub(crate) key: std::result::Result<VerifyingKey, String>,
}

/// What the identity a signature claims (`critical.identity.docker-reference`) must match.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SignedIdentity {
    /// The default: the same reference when the image is pulled by tag; the same repository
    /// (any tag) when it is pulled by digest.
    MatchRepoDigestOrExact,
    /// Exactly the image's reference.
    MatchExact,
    /// The image's repository, any tag.
    MatchRepository,
    /// Exactly this reference (a tag or digest is required).
    ExactReference(String),
    /// This repository, any tag.
    ExactRepository(String),
    /// The image's reference with `prefix` replaced by `signed_prefix`, then as
    /// [`SignedIdentity::MatchRepoDigestOrExact`].
    RemapIdentity {
        /// The prefix of the image's name that is replaced.
        prefix: String,
        /// What it is replaced with.
        signed_prefix: String,
    },
}

/// The policy section that applies to an image.
#[derive(Debug, Clone, Copy)]
pub struct Rule<'a> {
    /// The transport, or `None` for the global default.
    pub transport: Option<&'a str>,
    /// The scope within the transport (`""` for the transport's default).
    pub scope: &'a str,
    /// The requirements, all of which must pass.
    pub requirements: &'a [Requirement],
}

impl fmt::Display for Rule<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.transport {
            None => f.write_str("default"),
            Some(transport) => write!(f, "transports.{transport}.{:?}", self.scope),
        }
    }
}

impl Policy {
    /// A policy that accepts every image, the one Debian's containers-common and CRI-O's
    /// packages ship as `/etc/containers/policy.json`.
    pub const ACCEPT_ANYTHING: &str = r#"{"default": [{"type": "insecureAcceptAnything"}]}"#;

    /// Reads and parses a policy file. Key files named by `keyPath`/`keyPaths` are read now.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidPolicy`] naming the file: it cannot be read (not a regular file, larger
    /// than 1 MiB), is not valid JSON, has an unknown field, requirement type or identity
    /// type, a duplicated key, an empty requirement list, a `sigstoreSigned` without exactly
    /// one key source, or a key file that cannot be read.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Policy> {
        let path = path.as_ref();
        let bytes = safe_file::read_regular(path, FILE_MAX, safe_file::Symlinks::Follow)
            .map_err(|e| invalid(path, format!("cannot read: {}", e.into_io())))?;
        Policy::parse(&bytes, path)
    }

    /// Parses a policy given as JSON text; errors name the file as `<inline>`.
    ///
    /// # Errors
    ///
    /// As [`Policy::from_file`].
    pub fn from_json(json: &str) -> Result<Policy> {
        Policy::parse(json.as_bytes(), Path::new("<inline>"))
    }

    fn parse(bytes: &[u8], path: &Path) -> Result<Policy> {
        let raw: RawPolicy =
            serde_json::from_slice(bytes).map_err(|e| invalid(path, e.to_string()))?;
        let convert = |list: Vec<RawRequirement>, section: &str| -> Result<Vec<Requirement>> {
            if list.is_empty() {
                return Err(invalid(
                    path,
                    format!("{section}: the list of requirements must not be empty"),
                ));
            }
            list.into_iter()
                .enumerate()
                .map(|(i, r)| {
                    r.convert().map_err(|e| {
                        invalid(path, format!("{section} requirement #{}: {e}", i + 1))
                    })
                })
                .collect()
        };
        let default = convert(raw.default, "default")?;
        let mut transports = BTreeMap::new();
        for (transport, scopes) in raw.transports.unwrap_or_default().0 {
            let mut converted = BTreeMap::new();
            for (scope, list) in scopes.0 {
                if transport == DOCKER_TRANSPORT {
                    validate_docker_scope(&scope)
                        .map_err(|e| invalid(path, format!("transports.docker.{scope:?}: {e}")))?;
                }
                let section = format!("transports.{transport}.{scope:?}");
                converted.insert(scope, convert(list, &section)?);
            }
            transports.insert(transport, converted);
        }
        Ok(Policy {
            path: path.to_owned(),
            default,
            transports,
        })
    }

    /// The file the policy was read from (`<inline>` for [`Policy::from_json`]).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The section that applies to `reference` pulled from a registry: its most specific
    /// `docker` scope, else the transport's `""`, else the global default.
    pub fn rule_for(&self, reference: &Reference) -> Rule<'_> {
        if let Some(scopes) = self.transports.get(DOCKER_TRANSPORT) {
            for scope in docker_scopes(reference) {
                if let Some((scope, requirements)) = scopes.get_key_value(scope.as_str()) {
                    return Rule {
                        transport: Some(DOCKER_TRANSPORT),
                        scope,
                        requirements,
                    };
                }
            }
            if let Some((scope, requirements)) = scopes.get_key_value("") {
                return Rule {
                    transport: Some(DOCKER_TRANSPORT),
                    scope,
                    requirements,
                };
            }
        }
        Rule {
            transport: None,
            scope: "",
            requirements: &self.default,
        }
    }
}

/// The `docker` scopes of a reference, most specific first, as containers/image lists them:
/// the reference itself, the repository and its namespaces up to the registry, then `*.` and
/// each parent domain of the registry host (without its port).
pub(crate) fn docker_scopes(reference: &Reference) -> Vec<String> {
    let name = reference.name();
    let mut scopes = Vec::new();
    scopes.push(match (reference.digest(), reference.tag()) {
        (Some(digest), _) => format!("{name}@{digest}"),
        (None, Some(tag)) => format!("{name}:{tag}"),
        (None, None) => name.clone(),
    });
    let mut current = name.as_str();
    loop {
        scopes.push(current.to_owned());
        match current.rfind('/') {
            Some(i) => current = &current[..i],
            None => break,
        }
    }
    let host = match current.find(':') {
        // A bracketed IPv6 host has colons of its own; it has no parent domains either.
        _ if current.starts_with('[') => "",
        Some(i) => &current[..i],
        None => current,
    };
    let mut rest = host;
    while let Some(i) = rest.find('.') {
        rest = &rest[i + 1..];
        scopes.push(format!("*.{rest}"));
    }
    scopes
}

/// A `docker` scope is a wildcarded domain `*.example.com` or a fully expanded name prefix.
fn validate_docker_scope(scope: &str) -> std::result::Result<(), String> {
    if scope.is_empty() {
        return Ok(());
    }
    if let Some(domain) = scope.strip_prefix("*.") {
        let ok = !domain.is_empty()
            && domain.split('.').all(|c| {
                !c.is_empty() && c.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            });
        return if ok {
            Ok(())
        } else {
            Err("a wildcard scope is \"*.\" and a domain, like \"*.example.com\"".to_owned())
        };
    }
    if scope.contains('*') {
        return Err("a wildcard is allowed only as a leading \"*.\"".to_owned());
    }
    Ok(())
}

fn invalid(path: &Path, reason: String) -> Error {
    Error::InvalidPolicy {
        path: path.to_owned(),
        reason,
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
    default: Vec<RawRequirement>,
    transports: Option<UniqueMap<UniqueMap<Vec<RawRequirement>>>>,
}

#[expect(
    clippy::large_enum_variant,
    reason = "lives only while a file is parsed; boxing a variant would break serde's unknown-field check"
)]
#[derive(Deserialize)]
#[serde(tag = "type", deny_unknown_fields)]
enum RawRequirement {
    #[serde(rename = "insecureAcceptAnything")]
    InsecureAcceptAnything {},
    #[serde(rename = "reject")]
    Reject {},
    #[serde(rename = "signedBy", rename_all = "camelCase")]
    SignedBy {
        key_type: String,
        key_path: Option<String>,
        key_paths: Option<Vec<String>>,
        key_data: Option<String>,
        signed_identity: Option<RawIdentity>,
    },
    #[serde(rename = "signedBaseLayer", rename_all = "camelCase")]
    SignedBaseLayer { base_layer_identity: RawIdentity },
    #[serde(rename = "sigstoreSigned", rename_all = "camelCase")]
    SigstoreSigned {
        key_path: Option<String>,
        key_paths: Option<Vec<String>>,
        key_data: Option<String>,
        key_datas: Option<Vec<String>>,
        fulcio: Option<serde_json::Value>,
        pki: Option<serde_json::Value>,
        rekor_public_key_path: Option<String>,
        rekor_public_key_paths: Option<Vec<String>>,
        rekor_public_key_data: Option<String>,
        rekor_public_key_datas: Option<Vec<String>>,
        signed_identity: Option<RawIdentity>,
    },
}

#[derive(Deserialize)]
#[serde(tag = "type", deny_unknown_fields)]
enum RawIdentity {
    #[serde(rename = "matchExact")]
    MatchExact {},
    #[serde(rename = "matchRepoDigestOrExact")]
    MatchRepoDigestOrExact {},
    #[serde(rename = "matchRepository")]
    MatchRepository {},
    #[serde(rename = "exactReference", rename_all = "camelCase")]
    ExactReference { docker_reference: String },
    #[serde(rename = "exactRepository", rename_all = "camelCase")]
    ExactRepository { docker_repository: String },
    #[serde(rename = "remapIdentity", rename_all = "camelCase")]
    RemapIdentity {
        prefix: String,
        signed_prefix: String,
    },
}

impl RawRequirement {
    fn convert(self) -> std::result::Result<Requirement, String> {
        match self {
            RawRequirement::InsecureAcceptAnything {} => Ok(Requirement::InsecureAcceptAnything),
            RawRequirement::Reject {} => Ok(Requirement::Reject),
            RawRequirement::SignedBy {
                key_type,
                key_path,
                key_paths,
                key_data,
                signed_identity,
            } => {
                if key_type != "GPGKeys" && key_type != "signedByGPGKeys" {
                    return Err(format!("unknown keyType {key_type:?}"));
                }
                let sources = [key_path.is_some(), key_paths.is_some(), key_data.is_some()];
                if sources.iter().filter(|s| **s).count() != 1 {
                    return Err("exactly one of keyPath, keyPaths and keyData is required".into());
                }
                signed_identity.map(RawIdentity::convert).transpose()?;
                Ok(Requirement::SignedBy)
            }
            RawRequirement::SignedBaseLayer {
                base_layer_identity,
            } => {
                base_layer_identity.convert()?;
                Ok(Requirement::SignedBaseLayer)
            }
            RawRequirement::SigstoreSigned {
                key_path,
                key_paths,
                key_data,
                key_datas,
                fulcio,
                pki,
                rekor_public_key_path,
                rekor_public_key_paths,
                rekor_public_key_data,
                rekor_public_key_datas,
                signed_identity,
            } => {
                let sources = [
                    key_path.is_some(),
                    key_paths.is_some(),
                    key_data.is_some(),
                    key_datas.is_some(),
                    fulcio.is_some(),
                    pki.is_some(),
                ];
                if sources.iter().filter(|s| **s).count() != 1 {
                    return Err(
                        "exactly one of keyPath, keyPaths, keyData, keyDatas, fulcio and pki is required"
                            .into(),
                    );
                }
                let rekor = [
                    rekor_public_key_path.is_some(),
                    rekor_public_key_paths.is_some(),
                    rekor_public_key_data.is_some(),
                    rekor_public_key_datas.is_some(),
                ];
                if rekor.iter().filter(|s| **s).count() > 1 {
                    return Err("at most one of the rekorPublicKey fields may be given".into());
                }
                let unsupported = if fulcio.is_some() {
                    Some("fulcio (keyless signing)")
                } else if pki.is_some() {
                    Some("pki (X.509 certificates)")
                } else if rekor.contains(&true) {
                    Some("a Rekor public key (transparency log)")
                } else {
                    None
                };
                let mut keys = Vec::new();
                if let Some(path) = key_path {
                    keys.push(key_from_file(&path)?);
                }
                for path in key_paths.unwrap_or_default() {
                    keys.push(key_from_file(&path)?);
                }
                if let Some(data) = key_data {
                    keys.push(key_from_data("keyData", &data));
                }
                for (i, data) in key_datas.unwrap_or_default().iter().enumerate() {
                    keys.push(key_from_data(&format!("keyDatas[{i}]"), data));
                }
                if unsupported.is_none() && keys.is_empty() {
                    return Err("an empty list of keys".into());
                }
                let identity = match signed_identity {
                    Some(raw) => raw.convert()?,
                    None => SignedIdentity::MatchRepoDigestOrExact,
                };
                Ok(Requirement::SigstoreSigned(SigstoreSigned {
                    keys,
                    unsupported,
                    identity,
                }))
            }
        }
    }
}

impl RawIdentity {
    fn convert(self) -> std::result::Result<SignedIdentity, String> {
        Ok(match self {
            RawIdentity::MatchExact {} => SignedIdentity::MatchExact,
            RawIdentity::MatchRepoDigestOrExact {} => SignedIdentity::MatchRepoDigestOrExact,
            RawIdentity::MatchRepository {} => SignedIdentity::MatchRepository,
            RawIdentity::ExactReference { docker_reference } => {
                let (_, written) = Reference::parse_written(&docker_reference)
                    .map_err(|e| format!("exactReference: {e}"))?;
                if written.name_only {
                    return Err(format!(
                        "exactReference {docker_reference:?} has neither a tag nor a digest"
                    ));
                }
                SignedIdentity::ExactReference(docker_reference)
            }
            RawIdentity::ExactRepository { docker_repository } => {
                Reference::parse(&docker_repository)
                    .map_err(|e| format!("exactRepository: {e}"))?;
                SignedIdentity::ExactRepository(docker_repository)
            }
            RawIdentity::RemapIdentity {
                prefix,
                signed_prefix,
            } => {
                for p in [&prefix, &signed_prefix] {
                    if p.is_empty() || p.contains(['@', '*']) || p.ends_with('/') {
                        return Err(format!("remapIdentity prefix {p:?} is not a name prefix"));
                    }
                }
                SignedIdentity::RemapIdentity {
                    prefix,
                    signed_prefix,
                }
            }
        })
    }
}

fn key_from_file(path: &str) -> std::result::Result<PublicKey, String> {
    let bytes = safe_file::read_regular(Path::new(path), FILE_MAX, safe_file::Symlinks::Follow)
        .map_err(|e| format!("keyPath {path}: cannot read: {}", e.into_io()))?;
    Ok(PublicKey {
        origin: format!("keyPath {path}"),
        key: parse_key(&bytes),
    })
}

fn key_from_data(origin: &str, data: &str) -> PublicKey {
    let key = base64::engine::general_purpose::STANDARD
        .decode(data)
        .map_err(|e| format!("not base64: {e}"))
        .and_then(|pem| parse_key(&pem));
    PublicKey {
        origin: origin.to_owned(),
        key,
    }
}

/// A PEM `PUBLIC KEY` (SubjectPublicKeyInfo) holding an ECDSA P-256 key, as `cosign
/// generate-key-pair` writes them.
fn parse_key(pem: &[u8]) -> std::result::Result<VerifyingKey, String> {
    let text = std::str::from_utf8(pem).map_err(|_| "not a PEM file".to_owned())?;
    VerifyingKey::from_public_key_pem(text.trim())
        .map_err(|e| format!("not an ECDSA P-256 public key in PEM form: {e}"))
}

/// A JSON object whose keys must be unique (containers/image refuses a duplicated key).
#[derive(Default)]
struct UniqueMap<V>(BTreeMap<String, V>);

impl<'de, V: Deserialize<'de>> Deserialize<'de> for UniqueMap<V> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        struct MapVisitor<V>(PhantomData<V>);
        impl<'de, V: Deserialize<'de>> Visitor<'de> for MapVisitor<V> {
            type Value = UniqueMap<V>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<Self::Value, A::Error> {
                let mut out = BTreeMap::new();
                while let Some((key, value)) = map.next_entry::<String, V>()? {
                    if out.contains_key(&key) {
                        return Err(de::Error::custom(format!("duplicate key {key:?}")));
                    }
                    out.insert(key, value);
                }
                Ok(UniqueMap(out))
            }
        }
        deserializer.deserialize_map(MapVisitor(PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(text: &str) -> Reference {
        Reference::parse(text).unwrap()
    }

    #[test]
    fn scopes_run_from_the_reference_up_to_wildcard_domains() {
        let cases: [(&str, &[&str]); 4] = [
            (
                "quay.io/ns/app:v1",
                &[
                    "quay.io/ns/app:v1",
                    "quay.io/ns/app",
                    "quay.io/ns",
                    "quay.io",
                    "*.io",
                ],
            ),
            (
                "registry.example.com:5000/app@sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
                &[
                    "registry.example.com:5000/app@sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
                    "registry.example.com:5000/app",
                    "registry.example.com:5000",
                    "*.example.com",
                    "*.com",
                ],
            ),
            (
                "busybox",
                &[
                    "docker.io/library/busybox:latest",
                    "docker.io/library/busybox",
                    "docker.io/library",
                    "docker.io",
                    "*.io",
                ],
            ),
            (
                "localhost/app",
                &["localhost/app:latest", "localhost/app", "localhost"],
            ),
        ];
        for (input, want) in cases {
            assert_eq!(docker_scopes(&reference(input)), want, "{input}");
        }
    }

    #[test]
    fn the_most_specific_scope_wins() {
        let policy = Policy::from_json(
            r#"{
                "default": [{"type": "reject"}],
                "transports": {
                    "docker": {
                        "": [{"type": "insecureAcceptAnything"}],
                        "*.example.com": [{"type": "insecureAcceptAnything"}],
                        "*.corp.example.com": [{"type": "reject"}],
                        "quay.io": [{"type": "reject"}],
                        "quay.io/ns": [{"type": "insecureAcceptAnything"}],
                        "quay.io/ns/app": [{"type": "reject"}],
                        "quay.io/ns/app:v1": [{"type": "insecureAcceptAnything"}],
                        "docker.io/library/busybox": [{"type": "reject"}]
                    },
                    "atomic": {"": [{"type": "reject"}]}
                }
            }"#,
        )
        .unwrap();
        let cases = [
            (
                "quay.io/ns/app:v1",
                "quay.io/ns/app:v1",
                "insecureAcceptAnything",
            ),
            ("quay.io/ns/app:v2", "quay.io/ns/app", "reject"),
            ("quay.io/ns/other", "quay.io/ns", "insecureAcceptAnything"),
            ("quay.io/ns2/app", "quay.io", "reject"),
            ("quay.io/nsx/app", "quay.io", "reject"),
            ("a.corp.example.com/x", "*.corp.example.com", "reject"),
            (
                "b.example.com:5000/x",
                "*.example.com",
                "insecureAcceptAnything",
            ),
            ("busybox:1", "docker.io/library/busybox", "reject"),
            ("registry.k8s.io/pause", "", "insecureAcceptAnything"),
        ];
        for (input, scope, requirement) in cases {
            let rule = policy.rule_for(&reference(input));
            assert_eq!(rule.transport, Some("docker"), "{input}");
            assert_eq!(rule.scope, scope, "{input}");
            assert_eq!(rule.requirements[0].type_name(), requirement, "{input}");
        }
        let only_default = Policy::from_json(r#"{"default":[{"type":"reject"}]}"#).unwrap();
        let rule = only_default.rule_for(&reference("quay.io/a"));
        assert_eq!(rule.transport, None);
        assert_eq!(rule.to_string(), "default");
        assert_eq!(
            policy.rule_for(&reference("quay.io/ns/x")).to_string(),
            "transports.docker.\"quay.io/ns\""
        );
    }

    #[test]
    fn invalid_policies_say_what_and_where() {
        let cases = [
            ("{}", "missing field `default`"),
            (
                r#"{"default": []}"#,
                "default: the list of requirements must not be empty",
            ),
            (
                r#"{"default": [{"type": "acceptAll"}]}"#,
                "unknown variant `acceptAll`",
            ),
            (
                r#"{"default": [{"type": "reject", "x": 1}]}"#,
                "unknown field `x`",
            ),
            (
                r#"{"default": [{"type": "reject"}], "extra": 1}"#,
                "unknown field `extra`",
            ),
            (
                r#"{"default": [{"type": "reject"}], "transports": {"docker": {"a": [{"type":"reject"}], "a": [{"type":"reject"}]}}}"#,
                "duplicate key \"a\"",
            ),
            (
                r#"{"default": [{"type": "reject"}], "transports": {"docker": {"quay.io": []}}}"#,
                "transports.docker.\"quay.io\": the list of requirements must not be empty",
            ),
            (
                r#"{"default": [{"type": "reject"}], "transports": {"docker": {"*quay.io": [{"type":"reject"}]}}}"#,
                "a wildcard is allowed only as a leading",
            ),
            (
                r#"{"default": [{"type": "sigstoreSigned"}]}"#,
                "default requirement #1: exactly one of keyPath",
            ),
            (
                r#"{"default": [{"type": "sigstoreSigned", "keyPath": "/nonexistent/key.pub"}]}"#,
                "keyPath /nonexistent/key.pub: cannot read",
            ),
            (
                r#"{"default": [{"type": "sigstoreSigned", "keyData": "", "signedIdentity": {"type": "exactReference", "dockerReference": "quay.io/a"}}]}"#,
                "has neither a tag nor a digest",
            ),
            (
                r#"{"default": [{"type": "sigstoreSigned", "keyData": "", "signedIdentity": {"type": "sameRepo"}}]}"#,
                "unknown variant `sameRepo`",
            ),
            (
                r#"{"default": [{"type": "signedBy", "keyType": "X509", "keyPath": "/k"}]}"#,
                "unknown keyType \"X509\"",
            ),
            ("not json", "expected ident"),
        ];
        for (json, want) in cases {
            match Policy::from_json(json) {
                Err(Error::InvalidPolicy { path, reason }) => {
                    assert_eq!(path, Path::new("<inline>"));
                    assert!(reason.contains(want), "{json}: {reason}");
                }
                other => panic!("{json}: {other:?}"),
            }
        }
    }

    #[test]
    fn unverifiable_requirements_load_and_refuse() {
        let policy = Policy::from_json(
            r#"{"default": [
                {"type": "signedBy", "keyType": "GPGKeys", "keyPath": "/k.gpg"},
                {"type": "sigstoreSigned", "fulcio": {"caPath": "/ca"}, "rekorPublicKeyPath": "/r"},
                {"type": "sigstoreSigned", "keyData": "bm90IGEga2V5", "rekorPublicKeyPath": "/r"},
                {"type": "sigstoreSigned", "keyData": "bm90IGEga2V5"},
                {"type": "signedBaseLayer", "baseLayerIdentity": {"type": "matchExact"}},
                {"type": "insecureAcceptAnything"}
            ]}"#,
        )
        .unwrap();
        let rule = policy.rule_for(&reference("quay.io/a"));
        let why: Vec<Option<String>> = rule
            .requirements
            .iter()
            .map(Requirement::refuses_outright)
            .collect();
        assert!(
            why[0]
                .as_deref()
                .unwrap()
                .contains("signedBy (GPG simple signing) is not supported")
        );
        assert!(why[1].as_deref().unwrap().contains("fulcio"));
        assert!(why[2].as_deref().unwrap().contains("Rekor"));
        assert_eq!(
            why[3], None,
            "a bad key refuses only when a signature is checked"
        );
        assert!(why[4].as_deref().unwrap().contains("signedBaseLayer"));
        assert_eq!(why[5], None);
        let Requirement::SigstoreSigned(s) = &rule.requirements[3] else {
            panic!()
        };
        assert_eq!(s.signed_identity(), &SignedIdentity::MatchRepoDigestOrExact);
        assert!(
            s.keys[0]
                .key
                .as_ref()
                .unwrap_err()
                .contains("not an ECDSA P-256 public key")
        );
    }
}

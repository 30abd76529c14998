//! Pulls under a signature policy, against the local registry: cosign-style signatures made
//! here with p256 and pushed beside the images, then accepted or refused with an error naming
//! the policy section and requirement.

use std::path::Path;

use base64::Engine as _;
use image_store::{
    Auth, Error, Policy, PullOptions, SIGNATURE_ANNOTATION, SIMPLE_SIGNING_MEDIA_TYPE, Store,
    signature_tag,
};
use p256::ecdsa::signature::Signer as _;
use p256::ecdsa::{Signature, SigningKey};
use p256::pkcs8::{EncodePublicKey as _, LineEnding};
use serde_json::json;
use test_support::image::{Compression, ImageBuilder, Layer, Tar, media};
use test_support::registry::{Registry, Upload};

use crate::support;

fn key(seed: u8) -> SigningKey {
    SigningKey::from_slice(&[seed; 32]).expect("a P-256 scalar")
}

fn public_pem(key: &SigningKey) -> String {
    key.verifying_key()
        .to_public_key_pem(LineEnding::LF)
        .expect("encode the public key")
}

/// A small image, made distinct by `label`, pushed as `repo:tag`; its manifest digest.
fn push_image(registry: &Registry, repo: &str, tag: &str) -> String {
    let image = ImageBuilder::new()
        .label("test", &format!("{repo}:{tag}"))
        .layer(Layer::new(
            &Tar::new().file("hello", 0o644, repo.as_bytes()).build(),
            Compression::Gzip,
        ))
        .build();
    registry.push_image(repo, Some(tag), &image, Upload::Monolithic);
    image.manifest_digest
}

/// What a signature says and how it is made.
struct Sign<'a> {
    /// The manifest digest the payload names.
    digest: &'a str,
    /// The identity the payload names.
    identity: &'a str,
    key: &'a SigningKey,
    /// Flip a bit of the signature after signing.
    tamper: bool,
}

/// Pushes a cosign signature manifest for `signed_digest` (the tag is derived from it) into
/// `repo`, with one simple-signing layer per `sign`.
fn push_signatures(registry: &Registry, repo: &str, signed_digest: &str, signs: &[Sign<'_>]) {
    let config = b"{}";
    let config_digest = registry.push_blob(repo, config, Upload::Monolithic);
    let mut layers = Vec::new();
    for s in signs {
        let payload = serde_json::to_vec(&json!({
            "critical": {
                "identity": {"docker-reference": s.identity},
                "image": {"docker-manifest-digest": s.digest},
                "type": "cosign container image signature",
            },
            "optional": null,
        }))
        .unwrap();
        let signature: Signature = s.key.sign(&payload);
        let mut der = signature.to_der().as_bytes().to_vec();
        if s.tamper {
            let last = der.len() - 1;
            der[last] ^= 1;
        }
        let digest = registry.push_blob(repo, &payload, Upload::Monolithic);
        layers.push(json!({
            "mediaType": SIMPLE_SIGNING_MEDIA_TYPE,
            "digest": digest,
            "size": payload.len(),
            "annotations": {
                SIGNATURE_ANNOTATION: base64::engine::general_purpose::STANDARD.encode(&der),
            },
        }));
    }
    let manifest = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": media::MANIFEST,
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config_digest, "size": config.len()},
        "layers": layers,
    }))
    .unwrap();
    let digest = image_store::Digest::parse(signed_digest).unwrap();
    registry.push_manifest(repo, &signature_tag(&digest), media::MANIFEST, &manifest);
}

/// A policy that rejects by default and wants `requirement` for `scope`; its file is written
/// to `dir`, with the key as `dir/key.pub`.
fn policy(dir: &Path, scope: &str, requirement: serde_json::Value, key: &SigningKey) -> Policy {
    std::fs::write(dir.join("key.pub"), public_pem(key)).unwrap();
    let text = json!({
        "default": [{"type": "reject"}],
        "transports": {"docker": {scope: [requirement]}},
    });
    let path = dir.join("policy.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&text).unwrap()).unwrap();
    Policy::from_file(&path).expect("load the policy")
}

fn sigstore(dir: &Path) -> serde_json::Value {
    json!({"type": "sigstoreSigned", "keyPath": dir.join("key.pub")})
}

/// The refusal, or a panic naming what came instead.
fn refused(result: image_store::Result<image_store::Image>) -> (String, String, String) {
    match result {
        Err(Error::PolicyRefused { rule, reason, .. }) => {
            let (section, requirement) = rule
                .split_once(" requirement ")
                .unwrap_or_else(|| panic!("{rule:?} names section and requirement"));
            (section.to_owned(), requirement.to_owned(), reason)
        }
        other => panic!("expected a policy refusal, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root: cargo xtask test"]
async fn sigstore_signatures_accept_and_refuse() {
    let registry = Registry::start();
    let host = registry.host().to_owned();
    let dir = test_support::temp_dir("trust");
    let trusted = key(7);
    let stranger = key(9);
    let options = PullOptions::new().with_policy(policy(
        dir.path(),
        &format!("{host}/signed"),
        sigstore(dir.path()),
        &trusted,
    ));
    let name = |repo: &str| format!("{host}/signed/{repo}:v1");

    let other_digest = push_image(&registry, "signed/elsewhere", "v1");
    // (repo, its signatures as (signed digest is the image's, identity suffix, trusted key,
    // tampered), what the refusal says: None when the pull succeeds).
    type Plan = &'static [(bool, &'static str, bool, bool)];
    let cases: [(&str, Option<Plan>, Option<&str>); 7] = [
        ("good", Some(&[(true, ":v1", true, false)]), None),
        (
            "tampered",
            Some(&[(true, ":v1", true, true)]),
            Some("cryptographic verification failed: not signed by keyPath"),
        ),
        (
            "wrongkey",
            Some(&[(true, ":v1", false, false)]),
            Some("cryptographic verification failed: not signed by keyPath"),
        ),
        (
            "wrongdigest",
            Some(&[(false, ":v1", true, false)]),
            Some("signature is for manifest"),
        ),
        ("missing", None, Some("no signature (no tag sha256-")),
        (
            "identity",
            Some(&[(true, ":v2", true, false)]),
            Some("does not match"),
        ),
        // A bad signature beside a good one: the good one is enough.
        (
            "onegood",
            Some(&[(true, ":v1", false, false), (true, ":v1", true, false)]),
            None,
        ),
    ];
    for (repo, plan, refusal) in cases {
        let store_dir = test_support::temp_dir("trust-store");
        let store = Store::open(support::config(store_dir.path(), &host)).unwrap();
        let full_repo = format!("signed/{repo}");
        let digest = push_image(&registry, &full_repo, "v1");
        if let Some(plan) = plan {
            let identities: Vec<String> = plan
                .iter()
                .map(|(_, suffix, _, _)| format!("{host}/{full_repo}{suffix}"))
                .collect();
            let signs: Vec<Sign<'_>> = plan
                .iter()
                .zip(&identities)
                .map(|((own_digest, _, trusted_key, tamper), identity)| Sign {
                    digest: if *own_digest { &digest } else { &other_digest },
                    identity,
                    key: if *trusted_key { &trusted } else { &stranger },
                    tamper: *tamper,
                })
                .collect();
            push_signatures(&registry, &full_repo, &digest, &signs);
        }
        let result = store
            .pull_with(&name(repo), &Auth::Anonymous, &options)
            .await;
        match refusal {
            None => {
                let image = result.unwrap_or_else(|e| panic!("{repo}: {e}"));
                assert_eq!(image.names, [name(repo)], "{repo}");
                assert_eq!(image.manifest_digest.to_string(), digest, "{repo}");
            }
            Some(want) => {
                let (rule, requirement, reason) = refused(result);
                assert_eq!(
                    rule,
                    format!("transports.docker.\"{host}/signed\""),
                    "{repo}"
                );
                assert_eq!(requirement, "#1 sigstoreSigned", "{repo}");
                assert!(reason.contains(want), "{repo}: {reason}");
                // Refused before any blob of the image was fetched.
                support::assert_empty_after_reopen(store, &host);
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root: cargo xtask test"]
async fn cosign_identities_need_match_repository() {
    // cosign signs the repository without a tag: the default identity rule refuses that, and
    // matchRepository accepts it.
    let registry = Registry::start();
    let host = registry.host().to_owned();
    let dir = test_support::temp_dir("trust");
    let trusted = key(7);
    let digest = push_image(&registry, "cosign/app", "v1");
    push_signatures(
        &registry,
        "cosign/app",
        &digest,
        &[Sign {
            digest: &digest,
            identity: &format!("{host}/cosign/app"),
            key: &trusted,
            tamper: false,
        }],
    );
    let reference = format!("{host}/cosign/app:v1");
    let store_dir = test_support::temp_dir("trust-store");
    let store = Store::open(support::config(store_dir.path(), &host)).unwrap();

    let strict =
        PullOptions::new().with_policy(policy(dir.path(), &host, sigstore(dir.path()), &trusted));
    let (_, _, reason) = refused(store.pull_with(&reference, &Auth::Anonymous, &strict).await);
    assert!(reason.contains("matchRepoDigestOrExact"), "{reason}");

    let mut requirement = sigstore(dir.path());
    requirement["signedIdentity"] = json!({"type": "matchRepository"});
    let relaxed = PullOptions::new().with_policy(policy(dir.path(), &host, requirement, &trusted));
    let image = store
        .pull_with(&reference, &Auth::Anonymous, &relaxed)
        .await
        .expect("matchRepository accepts a repository identity");
    assert_eq!(image.names, [reference]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root: cargo xtask test"]
async fn reject_accept_anything_and_unsupported_requirements_name_their_rule() {
    let registry = Registry::start();
    let host = registry.host().to_owned();
    push_image(&registry, "open/app", "v1");
    push_image(&registry, "gpg/app", "v1");
    push_image(&registry, "closed/app", "v1");
    let policy = Policy::from_json(
        &json!({
            "default": [{"type": "reject"}],
            "transports": {"docker": {
                format!("{host}/open"): [{"type": "insecureAcceptAnything"}],
                format!("{host}/gpg"): [
                    {"type": "insecureAcceptAnything"},
                    {"type": "signedBy", "keyType": "GPGKeys", "keyPath": "/etc/pki/key.gpg"},
                ],
                format!("{host}/closed/app"): [{"type": "reject"}],
            }},
        })
        .to_string(),
    )
    .unwrap();
    let options = PullOptions::new().with_policy(policy);
    let store_dir = test_support::temp_dir("trust-store");
    let store = Store::open(support::config(store_dir.path(), &host)).unwrap();

    let image = store
        .pull_with(&format!("{host}/open/app:v1"), &Auth::Anonymous, &options)
        .await
        .expect("insecureAcceptAnything accepts an unsigned image");
    assert_eq!(image.names, [format!("{host}/open/app:v1")]);

    let cases = [
        (
            format!("{host}/closed/app:v1"),
            format!("transports.docker.\"{host}/closed/app\""),
            "#1 reject",
            "rejects",
        ),
        (
            format!("{host}/gpg/app:v1"),
            format!("transports.docker.\"{host}/gpg\""),
            "#2 signedBy",
            "signedBy (GPG simple signing) is not supported",
        ),
        (
            format!("{host}/elsewhere/app:v1"),
            "default".to_owned(),
            "#1 reject",
            "rejects",
        ),
    ];
    for (reference, want_rule, want_requirement, want_reason) in cases {
        let err = store
            .pull_with(&reference, &Auth::Anonymous, &options)
            .await
            .expect_err(&reference);
        let text = err.to_string();
        assert!(text.contains("<inline>"), "names the policy: {text}");
        let (rule, requirement, reason) = refused(Err(err));
        assert_eq!(rule, want_rule, "{reference}");
        assert_eq!(requirement, want_requirement, "{reference}");
        assert!(reason.contains(want_reason), "{reference}: {reason}");
    }
    // Store::pull is unchanged: no policy.
    store
        .pull(&format!("{host}/closed/app:v1"), &Auth::Anonymous)
        .await
        .expect("no policy, no refusal");
}

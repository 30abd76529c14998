//! What a pull is told beyond the store's configuration: the signature policy and the
//! registries configuration, and the policy's verdict on one image.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::digest::Digest;
use crate::error::{Error, Result};
use crate::policy::{Policy, Requirement};
use crate::progress::{Observer, Progress};
use crate::reference::Reference;
use crate::registries::Registries;
use crate::sigstore::{self, Untrusted};

/// Options of [`Store::pull_with`](crate::Store::pull_with): an optional signature policy, the
/// registries configuration and an optional [`Progress`] observer. The default has none of them:
/// [`Store::pull`](crate::Store::pull)'s behaviour. Cheap to clone; a pull joins one in progress
/// for the same reference only when both were given the same policy and registries (the same
/// value or clones of it); the observer does not count.
#[derive(Debug, Clone, Default)]
pub struct PullOptions {
    policy: Option<Arc<Policy>>,
    registries: Arc<Registries>,
    progress: Option<Observer>,
    /// Tells option sets apart for joining pulls; 0 is the default set.
    generation: u64,
}

fn next_generation() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

impl PullOptions {
    /// No policy, no registries configuration: as [`Store::pull`](crate::Store::pull).
    pub fn new() -> PullOptions {
        PullOptions::default()
    }

    /// Every pull must satisfy `policy` (the `docker` transport's most specific scope), checked
    /// once the manifest digest is known and before any layer is downloaded.
    pub fn with_policy(mut self, policy: Policy) -> PullOptions {
        self.policy = Some(Arc::new(policy));
        self.generation = next_generation();
        self
    }

    /// Short names, mirrors, locations, blocked and insecure registries as `registries` says.
    pub fn with_registries(mut self, registries: Registries) -> PullOptions {
        self.registries = Arc::new(registries);
        self.generation = next_generation();
        self
    }

    /// Tells `progress` how each pull goes: layers started, bytes, layers done (or reused) and
    /// the end of the pull. Does not change which pulls join (see [`Progress`]).
    pub fn with_progress(mut self, progress: Arc<dyn Progress>) -> PullOptions {
        self.progress = Some(Observer(progress));
        self
    }

    /// The progress observer, if any.
    pub fn progress(&self) -> Option<&Arc<dyn Progress>> {
        self.progress.as_ref().map(|o| &o.0)
    }

    /// The signature policy, if any.
    pub fn policy(&self) -> Option<&Policy> {
        self.policy.as_deref()
    }

    /// The registries configuration.
    pub fn registries(&self) -> &Registries {
        &self.registries
    }

    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }
}

/// The policy section that applies to one image, owned so that a pull task can keep it.
#[derive(Debug, Clone)]
pub(crate) struct Checks {
    policy: PathBuf,
    rule: String,
    requirements: Vec<Requirement>,
}

impl Checks {
    pub(crate) fn new(policy: &Policy, reference: &Reference) -> Checks {
        let rule = policy.rule_for(reference);
        tracing::debug!(image = %reference, rule = %rule, "signature policy section");
        Checks {
            policy: policy.path().to_owned(),
            rule: rule.to_string(),
            requirements: rule.requirements.to_vec(),
        }
    }

    fn refused(&self, image: &Reference, index: usize, reason: String) -> Error {
        Error::PolicyRefused {
            image: image.to_string(),
            policy: self.policy.clone(),
            rule: format!(
                "{} requirement #{} {}",
                self.rule,
                index + 1,
                self.requirements[index].type_name()
            ),
            reason,
        }
    }

    /// Refuses when a requirement refuses without looking at the image: `reject`, and what
    /// this crate cannot verify.
    pub(crate) fn before_pull(&self, image: &Reference) -> Result<()> {
        for (i, requirement) in self.requirements.iter().enumerate() {
            if let Some(reason) = requirement.refuses_outright() {
                return Err(self.refused(image, i, reason));
            }
        }
        Ok(())
    }

    /// Whether a requirement needs the image's signatures.
    pub(crate) fn wants_signatures(&self) -> bool {
        self.requirements
            .iter()
            .any(|r| matches!(r, Requirement::SigstoreSigned(_)))
    }

    /// Every `sigstoreSigned` requirement must accept at least one of `signatures` (`None`:
    /// there was no signature manifest) for `image`, whose top-level manifest is `digest`.
    pub(crate) fn signatures(
        &self,
        image: &Reference,
        digest: &Digest,
        signatures: Option<&[Untrusted]>,
    ) -> Result<()> {
        for (i, requirement) in self.requirements.iter().enumerate() {
            let Requirement::SigstoreSigned(sigstore_signed) = requirement else {
                continue;
            };
            let tag = sigstore::signature_tag(digest);
            let signatures = match signatures {
                None => {
                    return Err(self.refused(image, i, format!("no signature (no tag {tag})")));
                }
                Some([]) => {
                    return Err(self.refused(
                        image,
                        i,
                        format!("no cosign signature layer in {tag}"),
                    ));
                }
                Some(signatures) => signatures,
            };
            let mut rejections = Vec::new();
            let accepted = signatures.iter().enumerate().any(|(n, s)| {
                match sigstore::verify(sigstore_signed, s, digest, image) {
                    Ok(()) => true,
                    Err(why) => {
                        rejections.push(format!("signature {} ({}): {why}", n + 1, s.layer));
                        false
                    }
                }
            });
            if !accepted {
                return Err(self.refused(image, i, rejections.join("; ")));
            }
        }
        Ok(())
    }
}

//! Pulling: resolve a reference to a manifest (choosing this node's from an index), fetch the
//! configuration and the layers (in parallel, bounded), verify each blob while it streams,
//! unpack each layer into its own directory, then index the image.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use futures_util::{FutureExt as _, StreamExt as _};
use oci_client::client::{ClientConfig, ClientProtocol};
use serde_json::Value;

use crate::auth::Auth;
use crate::blobs::{BlobWriter, DOCUMENT_MAX};
use crate::digest::Digest;
use crate::documents::Documents;
use crate::error::{Attempt, Error, LayerProblem, Result};
use crate::index::{Image, IndexFile, Layer};
use crate::pins::Pins;
use crate::platform::Platform;
use crate::progress::Tracker;
use crate::reference::Reference;
use crate::registries::PullSource;
use crate::store::{Inner, Store};
use crate::trust::{Checks, PullOptions};
use crate::usage::usage;
use crate::watchdog::Watchdog;

pub(crate) const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub(crate) const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
const DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
const ACCEPTED: &[&str] = &[OCI_MANIFEST, OCI_INDEX, DOCKER_MANIFEST, DOCKER_LIST];

/// Layer media types this crate unpacks (compression is told by magic number, not by name).
pub(crate) const LAYER_TYPES: &[&str] = &[
    "application/vnd.oci.image.layer.v1.tar",
    "application/vnd.oci.image.layer.v1.tar+gzip",
    "application/vnd.oci.image.layer.v1.tar+zstd",
    "application/vnd.oci.image.layer.nondistributable.v1.tar",
    "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
    "application/vnd.oci.image.layer.nondistributable.v1.tar+zstd",
    "application/vnd.docker.image.rootfs.diff.tar",
    "application/vnd.docker.image.rootfs.diff.tar.gzip",
    "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip",
];

/// What a store talks to registries with: oci-client (authentication, blobs) and the HTTP
/// client manifests are read with (capped; see `manifest.rs`).
#[derive(Clone)]
pub(crate) struct RegistryClients {
    pub(crate) oci: oci_client::Client,
    pub(crate) http: reqwest::Client,
}

/// Makes the registry clients for `config`, or says why they cannot be made. reqwest (directly,
/// and inside oci-client, whose constructor falls back to a default client) panics rather than
/// fails when the node has no CA certificates (no ca-certificates package, an empty
/// `SSL_CERT_DIR`): that panic is caught here and becomes the reason, so a store still opens on
/// such a node, and only its pulls fail, each saying why.
pub(crate) fn registry_clients(
    config: &crate::StoreConfig,
) -> std::result::Result<RegistryClients, String> {
    let made = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let roots = node_roots();
        let http = crate::manifest::http_client(config, roots);
        http.map(|http| RegistryClients {
            oci: client(config, roots),
            http,
        })
    }));
    let why = |reason: String| {
        format!("cannot make the registry client (does this node have CA certificates?): {reason}")
    };
    match made {
        Ok(Ok(clients)) => Ok(clients),
        Ok(Err(e)) => Err(why(e.to_string())),
        Err(panic) => Err(why(panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_else(|| "it panicked".to_owned()))),
    }
}

/// The node's CA certificates, DER (as `SSL_CERT_FILE`/`SSL_CERT_DIR` or the system's files give
/// them), read once per process, as Go's system pool is: each HTTP client handed them reads no
/// file. Empty when there are none; clients then fall back to their own loading, which fails.
pub(crate) fn node_roots() -> &'static [Vec<u8>] {
    static ROOTS: std::sync::OnceLock<Vec<Vec<u8>>> = std::sync::OnceLock::new();
    ROOTS.get_or_init(|| {
        let found = rustls_native_certs::load_native_certs();
        for error in &found.errors {
            tracing::debug!(%error, "a CA certificate could not be read");
        }
        found.certs.iter().map(|der| der.to_vec()).collect()
    })
}

/// The registry client for a store: HTTPS except for the insecure registries, with its timeouts,
/// trusting `roots` (when there are any). May panic (see [`registry_clients`], the only caller).
fn client(config: &crate::StoreConfig, roots: &[Vec<u8>]) -> oci_client::Client {
    let protocol = if config.insecure_registries.is_empty() {
        ClientProtocol::Https
    } else {
        ClientProtocol::HttpsExcept(config.insecure_registries.clone())
    };
    oci_client::Client::new(ClientConfig {
        protocol,
        // Our own timeouts (per request, per chunk) decide and name the step; the client's
        // read timeout is a backstop for a read nobody is waiting on.
        read_timeout: Some(config.request_timeout * 2),
        connect_timeout: Some(config.connect_timeout),
        tls_certs_only: roots
            .iter()
            .map(|der| oci_client::client::Certificate {
                encoding: oci_client::client::CertificateEncoding::Der,
                data: der.clone(),
            })
            .collect(),
        ..ClientConfig::default()
    })
}

impl Store {
    /// Pulls `reference` (normalised as [`Reference::parse`] does) and returns the image once
    /// every blob is verified, every layer unpacked and the image indexed. A pull of a reference
    /// already being pulled in this process joins it and gets its outcome. The pull goes on in
    /// a task of its own if the caller stops waiting. The same as [`Store::pull_with`] with
    /// [`PullOptions::default`]: no signature policy, no registries configuration.
    ///
    /// Must be called within a Tokio runtime.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidReference`]; [`Error::Registry`] or [`Error::Timeout`] when the registry
    /// refuses, fails or stalls; [`Error::Malformed`] or [`Error::NoMatchingPlatform`] for a
    /// manifest, index or configuration this crate cannot use; [`Error::DigestMismatch`] and
    /// [`Error::SizeMismatch`] for blobs that are not what their descriptors say;
    /// [`Error::Layer`] naming the layer and tar entry that cannot be unpacked (or written: a
    /// full disk); [`Error::Blob`] naming the blob that cannot be downloaded or stored;
    /// [`Error::Io`].
    /// Nothing of a failed pull is visible in the store.
    pub async fn pull(&self, reference: &str, auth: &Auth) -> Result<Image> {
        self.pull_with(reference, auth, &PullOptions::default())
            .await
    }

    /// Pulls what the user typed, as the registries configuration and signature policy of
    /// `options` say:
    ///
    /// 1. a short name completes to its alias or unqualified-search registries
    ///    ([`Registries::candidates`](crate::Registries::candidates)); several candidates (permissive mode) are tried in order;
    /// 2. the policy's section for the image is found; `reject` and requirements this crate
    ///    cannot verify refuse at once;
    /// 3. the image's sources are tried in order, mirrors first ([`Registries::sources`](crate::Registries::sources)); a
    ///    source that fails, times out or sends what its digests deny gives way to the next;
    ///    each is insecure when registries.conf or [`StoreConfig::insecure_registries`] says so;
    /// 4. once the top-level manifest (an index, for a multi-platform image) is fetched and
    ///    its digest known, its sigstore signatures are fetched from the same source and
    ///    checked, before the configuration or any layer is downloaded.
    ///
    /// The image is named by the reference the user asked for (completed), never a mirror's.
    ///
    /// # Errors
    ///
    /// As [`Store::pull`]; [`Error::ShortName`] when a short name is ambiguous;
    /// [`Error::Blocked`] when registries.conf blocks the image; [`Error::PolicyRefused`]
    /// naming the policy section and requirement that refused; [`Error::AllSourcesFailed`]
    /// with every source's error when there were several and all failed.
    ///
    /// [`StoreConfig::insecure_registries`]: crate::StoreConfig::insecure_registries
    pub async fn pull_with(&self, text: &str, auth: &Auth, options: &PullOptions) -> Result<Image> {
        let started = Instant::now();
        let downloaded = Arc::new(AtomicU64::new(0));
        let mut named = text.to_owned();
        let result = self
            .pull_candidates(text, auth, options, &downloaded, &mut named)
            .await;
        if let Some(progress) = options.progress() {
            progress.pull_done(
                &named,
                result.is_ok(),
                downloaded.load(Ordering::Relaxed),
                started.elapsed(),
            );
        }
        if let Err(e) = &result {
            log_failed_pull(&named, e);
        }
        result
    }

    /// The candidates `text` completes to, tried in order; `named` is set to each as it is
    /// tried.
    async fn pull_candidates(
        &self,
        text: &str,
        auth: &Auth,
        options: &PullOptions,
        downloaded: &Arc<AtomicU64>,
        named: &mut String,
    ) -> Result<Image> {
        let candidates = options.registries().candidates(text)?;
        if candidates.len() > 1 {
            tracing::info!(
                name = text,
                candidates = candidates.len(),
                "trying unqualified-search registries"
            );
        }
        let mut attempts = Vec::new();
        let many = candidates.len() > 1;
        for candidate in candidates {
            let from = candidate.to_string();
            named.clone_from(&from);
            match self.pull_one(candidate, auth, options, downloaded).await {
                Ok(image) => return Ok(image),
                Err(e)
                    if many
                        && (e.tries_next_source()
                            || matches!(e, Error::AllSourcesFailed { .. })) =>
                {
                    attempts.push(Attempt { from, error: e });
                }
                Err(e) => return Err(e),
            }
        }
        Err(Error::AllSourcesFailed {
            image: text.to_owned(),
            attempts,
        })
    }

    /// Pulls one fully qualified reference from its sources, joining a pull in progress.
    async fn pull_one(
        &self,
        reference: Reference,
        auth: &Auth,
        options: &PullOptions,
        downloaded: &Arc<AtomicU64>,
    ) -> Result<Image> {
        let checks = options.policy().map(|p| Checks::new(p, &reference));
        if let Some(checks) = &checks {
            checks.before_pull(&reference)?;
        }
        let sources = options.registries().sources(&reference)?;
        // A pull joins only one with the same options and the same credentials: joining one
        // made with other credentials would lend them.
        let mut key = match options.generation() {
            0 => reference.to_string(),
            g => format!("{reference} (options {g})"),
        };
        if let Some(fingerprint) = auth.fingerprint() {
            key = format!("{key} (credentials {fingerprint})");
        }
        let pull = {
            let mut inflight = self
                .inner
                .inflight
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some(pull) = inflight.get(&key) {
                tracing::info!(image = %reference, "joining the pull in progress");
                pull.clone()
            } else {
                let inner = Arc::clone(&self.inner);
                let auth = auth.clone();
                let task_key = key.clone();
                let image = reference.to_string();
                let tracker = Arc::new(Tracker::new(
                    &image,
                    options.progress().cloned(),
                    Arc::clone(downloaded),
                ));
                let task = tokio::spawn(async move {
                    let result =
                        pull_from_sources(&inner, &reference, sources, &auth, checks, &tracker)
                            .await;
                    log_summary(&reference, &tracker, &result);
                    if result.is_err() {
                        inner.collect_after_failure();
                    }
                    inner
                        .inflight
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .remove(&task_key);
                    result
                });
                let pull = async move {
                    task.await.unwrap_or_else(|e| {
                        Err(Error::Interrupted {
                            image,
                            reason: e.to_string(),
                        })
                    })
                }
                .boxed()
                .shared();
                inflight.insert(key, pull.clone());
                pull
            }
        };
        pull.await
    }
}

/// Tries each source in turn; the first that works gives the image.
async fn pull_from_sources(
    inner: &Arc<Inner>,
    reference: &Reference,
    sources: Vec<PullSource>,
    auth: &Auth,
    checks: Option<Checks>,
    tracker: &Arc<Tracker>,
) -> Result<Image> {
    let many = sources.len() > 1;
    let mut attempts = Vec::new();
    for source in sources {
        let client = match inner.client_for(&source, auth) {
            Ok(client) => client,
            Err(e) if many => {
                attempts.push(Attempt {
                    from: source.reference.to_string(),
                    error: e,
                });
                continue;
            }
            Err(e) => return Err(e),
        };
        if many {
            tracing::info!(image = %reference, from = %source.reference, mirror = source.mirror, "trying source");
        }
        let from = source.reference.to_string();
        let puller = Puller::new(
            inner,
            reference.clone(),
            &source.reference,
            auth.clone(),
            (client, source.insecure),
            checks.clone(),
            Arc::clone(tracker),
        );
        match puller.run().await {
            Ok(image) => return Ok(image),
            Err(e) if many && e.tries_next_source() => {
                tracing::warn!(image = %reference, from = %from, error = %e, "source failed, trying the next");
                attempts.push(Attempt { from, error: e });
            }
            Err(e) => return Err(e),
        }
    }
    Err(Error::AllSourcesFailed {
        image: reference.to_string(),
        attempts,
    })
}

/// The most of an error's message a log line carries: it may quote what a registry sent.
pub(crate) const LOGGED_ERROR_MAX: usize = 1024;

/// Logs a failed pull of `image`: a warning when the registry, the image or the node's rules
/// refused, an error when the node is at fault (its disk, its files; [`Error::is_node_fault`]);
/// the message capped at 1 KiB, as it may quote what a registry sent. [`Store::pull_with`]
/// logs its own failures so, once per caller; a caller that refuses a pull before calling it
/// (a missing policy file) logs with this.
pub fn log_failed_pull(image: &str, e: &Error) {
    let error = e.capped(LOGGED_ERROR_MAX);
    if e.is_node_fault() {
        tracing::error!(image, error, "pull failed");
    } else {
        tracing::warn!(image, error, "pull failed");
    }
}

/// The pull's summary line: what it downloaded, how fast, what it reused.
fn log_summary(reference: &Reference, tracker: &Tracker, result: &Result<Image>) {
    let summary = tracker.summary();
    match result {
        Ok(image) => tracing::info!(
            image = %reference,
            id = %image.id,
            layers = image.layers.len(),
            reused = summary.reused,
            bytes = summary.downloaded,
            mb_per_s = summary.mb_per_s,
            seconds = summary.seconds,
            "pulled image"
        ),
        // Why is said at warn or error by each caller (`log_failure`); this is the statistics.
        Err(e) => tracing::info!(
            image = %reference,
            bytes = summary.downloaded,
            mb_per_s = summary.mb_per_s,
            seconds = summary.seconds,
            node_fault = e.is_node_fault(),
            "pull stopped"
        ),
    }
}

impl Inner {
    /// The client for one pull from `source`: the store's shared one for anonymous pulls, a
    /// new one for pulls with credentials (oci-client keeps the first credentials it sees for a
    /// registry and the tokens they bought, so a shared client would lend one pull's
    /// credentials to the next, and keep refusing right ones after wrong ones), and one that
    /// may also speak plain HTTP to `source`'s registry when registries.conf says it is
    /// insecure and the store's configuration does not.
    fn client_for(&self, source: &PullSource, auth: &Auth) -> Result<RegistryClients> {
        let host = source.reference.registry();
        let unusable = |reason: &String| Error::Registry {
            image: source.reference.to_string(),
            op: "connect".to_owned(),
            source: Arc::new(oci_client::errors::OciDistributionError::GenericError(
                Some(reason.clone()),
            )),
        };
        let shared = self
            .clients
            .get_or_init(|| {
                let made = registry_clients(&self.config);
                if let Err(reason) = &made {
                    tracing::warn!("{reason}: pulls fail until it can be made");
                }
                made
            })
            .as_ref()
            .map_err(unusable)?;
        let extra_insecure =
            source.insecure && !self.config.insecure_registries.iter().any(|r| r == host);
        if !extra_insecure && *auth == Auth::Anonymous {
            return Ok(shared.clone());
        }
        let mut config = self.config.clone();
        if extra_insecure {
            config.insecure_registries.push(host.to_owned());
        }
        registry_clients(&config).map_err(|reason| unusable(&reason))
    }
}

pub(crate) struct Puller {
    pub(crate) inner: Arc<Inner>,
    pub(crate) reference: Reference,
    /// Where the image is fetched from: the reference itself, a mirror's or a location's.
    pub(crate) target: oci_client::Reference,
    pub(crate) client: oci_client::Client,
    /// What manifests are read with.
    pub(crate) http: reqwest::Client,
    /// Whether `target`'s registry is spoken to over plain HTTP.
    pub(crate) insecure: bool,
    pub(crate) auth: oci_client::secrets::RegistryAuth,
    /// The reference as errors name it.
    pub(crate) image: String,
    checks: Option<Checks>,
    tracker: Arc<Tracker>,
    /// The progress timeout, for this source.
    watchdog: Watchdog,
    /// What this pull stored and has not indexed yet: never collected meanwhile.
    pins: Pins,
}

impl Puller {
    fn new(
        inner: &Arc<Inner>,
        reference: Reference,
        source: &Reference,
        auth: Auth,
        (clients, source_insecure): (RegistryClients, bool),
        checks: Option<Checks>,
        tracker: Arc<Tracker>,
    ) -> Puller {
        let host = source.registry();
        let insecure = inner.config.insecure_registries.iter().any(|r| r == host);
        Puller {
            insecure: insecure || source_insecure,
            inner: Arc::clone(inner),
            target: source.to_client(),
            image: reference.to_string(),
            reference,
            client: clients.oci,
            http: clients.http,
            auth: auth.to_client(),
            checks,
            tracker,
            watchdog: Watchdog::start(inner.config.progress_timeout, inner.config.min_pull_rate),
            pins: Pins::new(inner),
        }
    }

    async fn run(self) -> Result<Image> {
        let (top, top_digest) = self
            .fetch_document(&self.target, self.reference.digest())
            .await?;
        self.check_signatures(&top_digest).await?;
        let documents = self.documents();
        let (manifest_bytes, manifest_digest, index) = match kind(&top) {
            Kind::Index => {
                let chosen = documents.choose(&top, &top_digest, &self.inner.config.platform)?;
                let target = self.target.clone_with_digest(chosen.to_string());
                let (bytes, digest) = self.fetch_document(&target, Some(&chosen)).await?;
                (bytes, digest, Some((top, top_digest)))
            }
            Kind::Manifest => (top, top_digest, None),
            Kind::Unknown(why) => {
                return Err(self.malformed(&format!("manifest {top_digest}"), why));
            }
        };
        let manifest = documents.manifest(&manifest_bytes, &manifest_digest)?;
        let config_bytes = self
            .config_blob(&manifest.config_digest, manifest.config_size)
            .await?;
        let (config, plans) = documents.config(&manifest, &config_bytes)?;
        let config_digest = manifest.config_digest;

        let layers = self.layers(plans).await?;
        // Once for the whole pull (not per layer): what it unpacked reaches the disk before the
        // index names it. Layers an indexed image already names were synced before that index.
        if layers
            .iter()
            .any(|l| self.known_size(&l.chain_id).is_none())
        {
            let inner = Arc::clone(&self.inner);
            self.blocking(move || crate::layers::sync(&inner)).await?;
        }

        self.pins.blob(&manifest_digest);
        self.inner
            .blobs
            .put(&self.image, &manifest_digest, &manifest_bytes)?;
        let index_digest = match index {
            Some((bytes, digest)) => {
                self.pins.blob(&digest);
                self.inner.blobs.put(&self.image, &digest, &bytes)?;
                Some(digest)
            }
            None => None,
        };
        let platform = Platform::new(
            &config.os().to_string(),
            &config.architecture().to_string(),
            config.variant().as_deref(),
        );
        // A tag names the image; a digest (with or without a tag) only pins it.
        let names = match (self.reference.tag(), self.reference.digest()) {
            (Some(_), None) => vec![self.image.clone()],
            _ => Vec::new(),
        };
        let pinned = index_digest
            .clone()
            .unwrap_or_else(|| manifest_digest.clone());
        let image = Image {
            id: config_digest.hex().to_owned(),
            names,
            repo_digests: vec![self.reference.with_digest(pinned).to_string()],
            manifest_digest,
            index_digest,
            config_digest,
            platform,
            size: layers.iter().map(|l| l.size).sum(),
            layers,
            pulled_at: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        };
        self.commit(image)
    }

    /// The configuration blob's bytes, downloaded unless stored (and pinned either way).
    async fn config_blob(&self, digest: &Digest, size: u64) -> Result<Vec<u8>> {
        self.pins.blob(digest);
        if !self.inner.blobs.has(digest) {
            let writer = self.download(digest, size, None, None).await?;
            self.blocking(move || writer.commit()).await?;
        }
        self.inner.blobs.read(digest)
    }

    /// When the policy wants signatures, fetches those of the top-level manifest `digest`
    /// from the source and checks them: before the configuration or any layer is fetched.
    async fn check_signatures(&self, digest: &Digest) -> Result<()> {
        if let Some(checks) = &self.checks
            && checks.wants_signatures()
        {
            let signatures = self.signatures(digest).await?;
            checks.signatures(&self.reference, digest, signatures.as_deref())?;
            tracing::info!(image = %self.image, digest = %digest, "signature accepted by policy");
        }
        Ok(())
    }

    /// Adds the image to the index and saves it; the in-memory index changes only once saved.
    /// A pull that changes nothing but the time (a warm pull) writes nothing and keeps the
    /// first pull's time.
    fn commit(&self, image: Image) -> Result<Image> {
        let mut index = self.inner.index();
        let mut next = IndexFile {
            version: index.version,
            images: index.images.clone(),
        };
        let image = next.add(image);
        let unchanged = next.images.len() == index.images.len()
            && next.images.iter().zip(&index.images).all(|(new, old)| {
                Image {
                    pulled_at: old.pulled_at,
                    ..new.clone()
                } == *old
            });
        if unchanged && let Some(old) = index.images.iter().find(|i| i.id == image.id) {
            return Ok(old.clone());
        }
        next.save(&self.inner.config.root)?;
        *index = next;
        Ok(image)
    }

    /// Fetches a manifest or index, checks its size and, when pinned, its digest.
    async fn fetch_document(
        &self,
        target: &oci_client::Reference,
        pinned: Option<&Digest>,
    ) -> Result<(Vec<u8>, Digest)> {
        let op = match pinned {
            Some(d) => format!("fetch manifest {d}"),
            None => "fetch the manifest".to_owned(),
        };
        let fetch = self.get_manifest(target, ACCEPTED, DOCUMENT_MAX);
        let bytes = self
            .timed(&op, fetch)
            .await?
            .map_err(|e| self.registry(&op, e))?;
        let digest = Digest::of(&bytes);
        if let Some(pinned) = pinned
            && *pinned != digest
        {
            return Err(Error::DigestMismatch {
                image: self.image.clone(),
                expected: pinned.to_string(),
                actual: digest.to_string(),
            });
        }
        Ok((bytes, digest))
    }

    /// Fetches and unpacks the layers, a bounded number at a time. When one fails the others
    /// stop early, and all have stopped (no unpack still writing) when this returns: what they
    /// left can then be collected.
    async fn layers(&self, plans: Vec<Layer>) -> Result<Vec<Layer>> {
        let to_fetch = plans
            .iter()
            .filter(|l| !self.inner.blobs.has(&l.digest))
            .map(|l| l.compressed_size)
            .sum();
        self.tracker.plan(plans.len(), to_fetch);
        let permits = tokio::sync::Semaphore::new(self.inner.config.parallel_layers.max(1));
        let cancel = Arc::new(AtomicBool::new(false));
        let results = futures_util::future::join_all(plans.into_iter().map(|plan| {
            let (permits, cancel) = (&permits, &cancel);
            async move {
                let result = match permits.acquire().await {
                    Ok(_permit) => self.layer(plan, cancel).await,
                    Err(e) => Err(self.interrupted(e)),
                };
                if result.is_err() {
                    cancel.store(true, Ordering::Relaxed);
                }
                result
            }
        }))
        .await;
        let mut layers = Vec::with_capacity(results.len());
        let mut first_error = None;
        for result in results {
            match result {
                Ok(layer) => layers.push(layer),
                // The layer that failed says why; the ones it stopped only that they stopped.
                Err(e) if first_error.is_none() || is_cancelled(first_error.as_ref()) => {
                    first_error = Some(e);
                }
                Err(_) => {}
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(layers),
        }
    }

    /// Makes sure one layer's blob is stored and its directory unpacked: a layer that is
    /// neither is unpacked while it downloads.
    async fn layer(&self, mut layer: Layer, cancel: &Arc<AtomicBool>) -> Result<Layer> {
        if cancel.load(Ordering::Relaxed) {
            return Err(self.cancelled(&layer.digest));
        }
        self.pins.blob(&layer.digest);
        self.pins.layer(&layer.chain_id);
        let dir = self.inner.layer_dir(&layer.chain_id);
        let stored = self.inner.blobs.has(&layer.digest);
        if !stored {
            self.tracker
                .layer_started(&layer.digest, layer.compressed_size);
        }
        if dir.is_dir() {
            // Unpacked already, for an indexed image or by another pull.
            if !stored {
                let writer = self
                    .download(&layer.digest, layer.compressed_size, Some(cancel), None)
                    .await?;
                self.blocking(move || writer.commit()).await?;
            }
            // A layer unpacked for an indexed image keeps the size measured then: a warm pull
            // does not walk every file again.
            layer.size = match self.known_size(&layer.chain_id) {
                Some(size) => size,
                None => {
                    self.blocking(move || {
                        usage(&dir)
                            .map(|u| u.bytes)
                            .map_err(|e| Error::io("measure", &dir, e))
                    })
                    .await?
                }
            };
            self.tracker.layer_done(&layer.digest, stored);
            return Ok(layer);
        }
        let unpacked = if stored {
            let (inner, image, plan) = (Arc::clone(&self.inner), self.image.clone(), layer.clone());
            let cancel = Arc::clone(cancel);
            self.blocking(move || crate::layers::unpack_stored(&inner, &image, &plan, &cancel))
                .await?
        } else {
            self.fetch_and_unpack(&layer, cancel).await?
        };
        layer.size = unpacked.size;
        self.blocking(move || unpacked.place()).await?;
        self.tracker.layer_done(&layer.digest, stored);
        Ok(layer)
    }

    /// Downloads a layer's blob and unpacks it as its bytes arrive. The directory is handed
    /// back (to be put in place) only once the blob is verified and stored and the diff id
    /// matched; on any failure neither the blob nor the directory is left. Returns once the
    /// unpack has stopped.
    async fn fetch_and_unpack(
        &self,
        layer: &Layer,
        cancel: &Arc<AtomicBool>,
    ) -> Result<crate::layers::Unpacked> {
        let (mut feed, reader) = crate::feed::channel();
        let unpack = {
            let (inner, image, plan) = (Arc::clone(&self.inner), self.image.clone(), layer.clone());
            let cancel = Arc::clone(cancel);
            tokio::task::spawn_blocking(move || {
                crate::layers::unpack(&inner, &image, &plan, reader, &cancel)
            })
        };
        let downloaded = self
            .download(
                &layer.digest,
                layer.compressed_size,
                Some(cancel),
                Some(&mut feed),
            )
            .await;
        if downloaded.is_ok() {
            feed.end().await;
        }
        let unpack_stopped = feed.closed();
        // Without its end, the reader fails: the unpack stops.
        drop(feed);
        let unpacked = unpack.await.map_err(|e| self.interrupted(e))?;
        match (downloaded, unpacked) {
            (Ok(writer), Ok(unpacked)) => {
                self.blocking(move || writer.commit()).await?;
                Ok(unpacked)
            }
            // The download stopped because the unpack did: the unpack says why.
            (Err(_), Err(e)) if unpack_stopped => Err(e),
            (Err(e), _) | (Ok(_), Err(e)) => Err(e),
        }
    }

    /// Runs blocking work off the async threads.
    async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> Result<T> + Send + 'static,
    ) -> Result<T> {
        tokio::task::spawn_blocking(work)
            .await
            .map_err(|e| self.interrupted(e))?
    }

    /// The size an indexed image recorded for the layer with this chain id.
    fn known_size(&self, chain_id: &Digest) -> Option<u64> {
        self.inner
            .index()
            .images
            .iter()
            .flat_map(|image| &image.layers)
            .find(|l| &l.chain_id == chain_id)
            .map(|l| l.size)
    }

    /// Streams a blob into a temporary file, and to `feed` when given, counting and hashing it
    /// as it arrives. `cancel` is given for a layer's blob: its bytes are reported as progress,
    /// and it stops when `cancel` is set (or the feed's reader is gone). Returns the writer once
    /// size and digest are verified, for the caller to commit.
    async fn download(
        &self,
        digest: &Digest,
        size: u64,
        cancel: Option<&AtomicBool>,
        mut feed: Option<&mut crate::feed::Feed>,
    ) -> Result<BlobWriter> {
        let started = Instant::now();
        let op = format!("fetch blob {digest}");
        let digest_text = digest.to_string();
        let open = self
            .client
            .pull_blob_stream(&self.target, digest_text.as_str());
        let mut stream = self
            .timed(&op, open)
            .await?
            .map_err(|e| self.registry(&op, e))?;
        let mut writer = self.inner.blobs.writer(&self.image, digest, size)?;
        loop {
            if cancel.is_some_and(|c| c.load(Ordering::Relaxed)) {
                return Err(self.cancelled(digest));
            }
            match self.timed(&op, stream.next()).await? {
                None => break,
                Some(Ok(chunk)) => {
                    self.received(chunk.len());
                    writer.write(&chunk)?;
                    if cancel.is_some() {
                        self.tracker.bytes(digest, chunk.len() as u64);
                    }
                    if let Some(feed) = feed.as_deref_mut()
                        && !feed.send(chunk).await
                    {
                        return Err(self.cancelled(digest));
                    }
                }
                Some(Err(e)) => {
                    // oci-client checks the digest at the end of the stream too; say which
                    // blob lied rather than relay its stream error.
                    if writer.written() >= size && writer.digest_so_far() != *digest {
                        return Err(Error::DigestMismatch {
                            image: self.image.clone(),
                            expected: digest.to_string(),
                            actual: writer.digest_so_far().to_string(),
                        });
                    }
                    return Err(Error::Blob {
                        image: self.image.clone(),
                        blob: digest.to_string(),
                        op: "download",
                        source: Arc::new(e),
                    });
                }
            }
        }
        writer.verify()?;
        tracing::debug!(
            image = %self.image,
            blob = %digest,
            bytes = size,
            seconds = started.elapsed().as_secs_f64(),
            "blob downloaded"
        );
        Ok(writer)
    }

    /// Runs a request to the registry under the request timeout and the progress timeout.
    pub(crate) async fn timed<T>(&self, op: &str, fut: impl Future<Output = T>) -> Result<T> {
        let after = self.inner.config.request_timeout;
        match self.watchdog.guard(tokio::time::timeout(after, fut)).await {
            Ok(Ok(out)) => Ok(out),
            Ok(Err(_)) => Err(Error::Timeout {
                image: self.image.clone(),
                op: op.to_owned(),
                after,
            }),
            Err(stalled) => Err(Error::NoProgress {
                image: self.image.clone(),
                registry: self.target.resolve_registry().to_owned(),
                op: op.to_owned(),
                window: stalled.window,
                received: stalled.received,
                wanted: stalled.wanted,
            }),
        }
    }

    /// Counts bytes received from the registry, for the progress timeout.
    pub(crate) fn received(&self, bytes: usize) {
        self.watchdog.received(bytes);
    }

    fn interrupted(&self, e: impl fmt::Display) -> Error {
        Error::Interrupted {
            image: self.image.clone(),
            reason: e.to_string(),
        }
    }

    fn cancelled(&self, layer: &Digest) -> Error {
        self.layer_error(layer, None, LayerProblem::Cancelled)
    }

    pub(crate) fn registry(&self, op: &str, e: oci_client::errors::OciDistributionError) -> Error {
        Error::Registry {
            image: self.image.clone(),
            op: op.to_owned(),
            source: Arc::new(e),
        }
    }

    pub(crate) fn malformed(&self, what: &str, reason: impl Into<String>) -> Error {
        Error::Malformed {
            image: self.image.clone(),
            what: what.to_owned(),
            reason: reason.into(),
        }
    }

    /// The registry's documents parsed as this pull names things.
    fn documents(&self) -> Documents<'_> {
        Documents { image: &self.image }
    }

    fn layer_error(&self, layer: &Digest, entry: Option<String>, problem: LayerProblem) -> Error {
        Error::Layer {
            image: self.image.clone(),
            layer: layer.to_string(),
            entry,
            problem,
        }
    }
}

fn is_cancelled(e: Option<&Error>) -> bool {
    e.and_then(Error::layer_problem) == Some(&LayerProblem::Cancelled)
}

pub(crate) enum Kind {
    Index,
    Manifest,
    Unknown(String),
}

/// Whether a document is an index or a manifest, by its media type or, when it has none, by its
/// shape.
pub(crate) fn kind(bytes: &[u8]) -> Kind {
    let value: Value = match serde_json::from_slice(bytes) {
        Ok(v) => v,
        Err(e) => return Kind::Unknown(format!("not JSON: {e}")),
    };
    match value.get("mediaType").and_then(Value::as_str) {
        Some(OCI_INDEX | DOCKER_LIST) => Kind::Index,
        Some(OCI_MANIFEST | DOCKER_MANIFEST) => Kind::Manifest,
        Some(other) => Kind::Unknown(format!("unsupported media type {other:?}")),
        None if value.get("manifests").is_some_and(Value::is_array) => Kind::Index,
        None if value.get("layers").is_some_and(Value::is_array) => Kind::Manifest,
        None => Kind::Unknown("neither a manifest nor an index".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_are_told_apart_by_media_type_or_shape() {
        let cases = [
            (
                r#"{"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[]}"#,
                "index",
            ),
            (
                r#"{"mediaType":"application/vnd.docker.distribution.manifest.list.v2+json"}"#,
                "index",
            ),
            (
                r#"{"mediaType":"application/vnd.oci.image.manifest.v1+json"}"#,
                "manifest",
            ),
            (
                r#"{"mediaType":"application/vnd.docker.distribution.manifest.v2+json"}"#,
                "manifest",
            ),
            (r#"{"schemaVersion":2,"manifests":[]}"#, "index"),
            (r#"{"schemaVersion":2,"layers":[]}"#, "manifest"),
            (
                r#"{"mediaType":"application/vnd.docker.distribution.manifest.v1+prettyjws"}"#,
                "unknown",
            ),
            (r#"{"schemaVersion":2}"#, "unknown"),
            ("not json", "unknown"),
        ];
        for (doc, want) in cases {
            let got = match kind(doc.as_bytes()) {
                Kind::Index => "index",
                Kind::Manifest => "manifest",
                Kind::Unknown(_) => "unknown",
            };
            assert_eq!(got, want, "{doc}");
        }
    }
}

//! The crate's error type.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Everything a pull, an unpack or the store can fail with.
///
/// Errors are `Clone` (their sources are shared) because every caller that joined one pull gets
/// the same outcome. Each variant names what a user needs to act: the image, the blob or layer,
/// the tar entry, the file.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The reference is not an image reference.
    #[error("invalid image reference {reference:?}: {reason}")]
    InvalidReference {
        /// What was given.
        reference: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A digest is not `sha256:` and 64 lower-case hex digits.
    #[error("invalid digest {digest:?}: {reason}")]
    InvalidDigest {
        /// What was given.
        digest: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The registry refused a request or the connection failed.
    #[error("image {image}: cannot {op}: {source}")]
    Registry {
        /// The image being pulled.
        image: String,
        /// What was being done: `fetch the manifest`, `fetch blob sha256:...`.
        op: String,
        /// What the registry client said.
        #[source]
        source: Arc<oci_client::errors::OciDistributionError>,
    },
    /// The registry did not answer, or stopped sending, within the configured time.
    #[error("image {image}: cannot {op}: the registry did not answer within {}s", after.as_secs_f64())]
    Timeout {
        /// The image being pulled.
        image: String,
        /// What was being done.
        op: String,
        /// The timeout that expired.
        after: Duration,
    },
    /// The pull waited on its registry for a whole progress window and received too little
    /// (see [`StoreConfig::progress_timeout`](crate::StoreConfig::progress_timeout)): cancelled.
    #[error(
        "image {image}: cannot {op}: {registry} sent {received} bytes in {}s, fewer than the \
         {wanted} the progress timeout wants: pull cancelled",
        window.as_secs_f64()
    )]
    NoProgress {
        /// The image being pulled.
        image: String,
        /// The registry (`host[:port]`) it was pulled from: a mirror's, when from a mirror.
        registry: String,
        /// What was being done: `fetch blob sha256:...` names the layer.
        op: String,
        /// The progress window.
        window: Duration,
        /// Bytes received in the last window.
        received: u64,
        /// The fewest bytes a window must bring.
        wanted: u64,
    },
    /// The manifest, index or configuration is not one this crate can use.
    #[error("image {image}: {what}: {reason}")]
    Malformed {
        /// The image being pulled.
        image: String,
        /// Which document: `manifest sha256:...`, `config sha256:...`.
        what: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The image index has no manifest for this node's platform.
    #[error("image {image}: no manifest for platform {wanted} (the index has: {})", available.join(", "))]
    NoMatchingPlatform {
        /// The image being pulled.
        image: String,
        /// The platform asked for, `linux/amd64`.
        wanted: String,
        /// The platforms the index lists.
        available: Vec<String>,
    },
    /// A blob's bytes do not hash to the digest that names them.
    #[error("image {image}: blob {expected}: content does not match its digest (got {actual})")]
    DigestMismatch {
        /// The image being pulled.
        image: String,
        /// The digest the manifest names.
        expected: String,
        /// The digest of what the registry sent.
        actual: String,
    },
    /// A blob is not as long as its descriptor says.
    #[error(
        "image {image}: blob {digest}: the manifest says {expected} bytes, the registry sent {actual}"
    )]
    SizeMismatch {
        /// The image being pulled.
        image: String,
        /// The blob.
        digest: String,
        /// The size the descriptor declares.
        expected: u64,
        /// What arrived (at least this many, when the download was stopped early).
        actual: String,
    },
    /// A layer cannot be unpacked: a hostile or broken entry, a cap reached, a diff id that does
    /// not match the image configuration.
    #[error("image {image}: layer {layer}: {}{problem}", entry_text(entry.as_deref()))]
    Layer {
        /// The image being pulled.
        image: String,
        /// The layer's blob digest.
        layer: String,
        /// The tar entry at fault, when there is one.
        entry: Option<String>,
        /// What is wrong.
        problem: LayerProblem,
    },
    /// No image matches the query.
    #[error("image {query:?} not found")]
    NotFound {
        /// The reference, digest or id looked up.
        query: String,
    },
    /// An id prefix matches more than one image.
    #[error("image id prefix {query:?} is ambiguous: {} images match", matches)]
    Ambiguous {
        /// The prefix.
        query: String,
        /// How many images it matches.
        matches: usize,
    },
    /// Another process has the store open.
    #[error("{}: the image store is in use by another process", root.display())]
    Locked {
        /// The store's root directory.
        root: PathBuf,
    },
    /// The store's index file cannot be read.
    #[error("{}: corrupt image index: {reason}", path.display())]
    CorruptIndex {
        /// The index file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A blob cannot be stored: the disk is full, say. The image and the blob (a layer's, the
    /// configuration's or a manifest's digest) are named, and the operating system's error.
    #[error("image {image}: blob {blob}: cannot {op}: {source}")]
    Blob {
        /// The image being pulled.
        image: String,
        /// The blob's digest.
        blob: String,
        /// What was being done: `create`, `write`, `store`.
        op: &'static str,
        /// What the operating system said.
        #[source]
        source: Arc<io::Error>,
    },
    /// A file operation in the store failed.
    #[error("{}: cannot {op}: {source}", path.display())]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: Arc<io::Error>,
    },
    /// A credentials file cannot be read or is not in the containers-auth.json format.
    #[error("{}: {reason}", path.display())]
    AuthFile {
        /// The file.
        path: PathBuf,
        /// What is wrong, naming the entry when one is at fault.
        reason: String,
    },
    /// Credentials given inline (CRI's AuthConfig) cannot be used.
    #[error("invalid credentials: {reason}")]
    InvalidAuth {
        /// What is wrong.
        reason: String,
    },
    /// A container id is not one a root file system may be named by.
    #[error("invalid container id {id:?}: {reason}")]
    InvalidContainerId {
        /// What was given.
        id: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A storage driver name is neither `overlay` nor `vfs`.
    #[error("unknown storage driver {name:?}: expected \"overlay\" or \"vfs\"")]
    UnknownStorageDriver {
        /// What was given.
        name: String,
    },
    /// The storage driver the configuration asks for cannot work on this node.
    #[error("{}: storage driver {driver} cannot be used: {reason}", root.display())]
    StorageDriver {
        /// The store's root directory.
        root: PathBuf,
        /// The driver asked for.
        driver: crate::driver::StorageDriver,
        /// Why the probe mount failed.
        reason: String,
    },
    /// The container already has a root file system.
    #[error("container {container}: a root file system already exists")]
    RootfsExists {
        /// The container id.
        container: String,
    },
    /// The container has no root file system.
    #[error("container {container}: no root file system")]
    RootfsNotFound {
        /// The container id.
        container: String,
    },
    /// The image cannot be removed: containers' root file systems are made of its layers.
    #[error("image {image} is in use by container(s) {}", containers.join(", "))]
    ImageInUse {
        /// The image id.
        image: String,
        /// The containers whose root file systems use it.
        containers: Vec<String>,
    },
    /// The overlay mount of a container's root file system failed.
    #[error("container {container}: cannot mount its root file system on {}: {source}", target.display())]
    Mount {
        /// The container id.
        container: String,
        /// The mount point.
        target: PathBuf,
        /// What the kernel said.
        #[source]
        source: Arc<io::Error>,
    },
    /// The image has more layers than one overlay mount can name, even with short names.
    #[error("container {container}: the image's {layers} layers do not fit in one overlay mount")]
    TooManyLayers {
        /// The container id.
        container: String,
        /// How many layers the image has.
        layers: usize,
    },
    /// A container's root file system record cannot be read.
    #[error("{}: corrupt root file system record: {reason}", path.display())]
    CorruptRootfs {
        /// The record file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A container's root file system cannot be removed: something is still mounted in it.
    #[error("container {container}: {} is still mounted; not removing its root file system", mount.display())]
    StillMounted {
        /// The container id.
        container: String,
        /// The mount that would not go.
        mount: PathBuf,
    },
    /// A signature policy (containers-policy.json) cannot be read, or is not a valid policy.
    #[error("{}: invalid signature policy: {reason}", path.display())]
    InvalidPolicy {
        /// The policy file (or `<inline>` for a policy given as text).
        path: PathBuf,
        /// What is wrong, and where in the file.
        reason: String,
    },
    /// A registries configuration (containers-registries.conf) cannot be read or is not valid.
    #[error("{}: invalid registries configuration: {reason}", path.display())]
    InvalidRegistries {
        /// The file at fault: the main file or a drop-in.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// No signature policy file is there: pulls are refused, as CRI-O refuses them, until the
    /// node's operator says which images may be pulled.
    #[error(
        "no signature policy: {} does not exist, and pulls are refused until it does; a policy \
         that accepts every image is {}",
        path.display(),
        crate::Policy::ACCEPT_ANYTHING
    )]
    NoPolicy {
        /// The file to create.
        path: PathBuf,
    },
    /// The signature policy refused the image, before any layer was downloaded.
    #[error(
        "image {image}: refused by {} {rule}: {reason}",
        policy.display()
    )]
    PolicyRefused {
        /// The image, as the user named it.
        image: String,
        /// The policy file.
        policy: PathBuf,
        /// The policy section that applies and the requirement in it that refused, with its
        /// position: `transports.docker."quay.io/app" requirement #1 reject`.
        rule: String,
        /// Why: `no signature at tag sha256-….sig`, `signature 1: wrong key`, ….
        reason: String,
    },
    /// registries.conf blocks pulls of this image.
    #[error("image {image}: blocked by {} [[registry]] prefix {prefix:?}", path.display())]
    Blocked {
        /// The image, as the user named it.
        image: String,
        /// The registries configuration file that blocks it.
        path: PathBuf,
        /// The `prefix` of the `[[registry]]` table with `blocked = true`.
        prefix: String,
    },
    /// A short name (`busybox`) cannot be completed to one image.
    #[error("short name {name:?}: {reason}")]
    ShortName {
        /// The name as given.
        name: String,
        /// Why: ambiguous search registries in enforcing mode, none configured.
        reason: String,
    },
    /// Every place the image could come from (mirrors, the primary location, search
    /// registries) failed; each failure is kept, in the order they were tried.
    #[error("image {image}: every source failed: {}", attempts_text(attempts))]
    AllSourcesFailed {
        /// The image, as the user named it.
        image: String,
        /// What each source said.
        attempts: Vec<Attempt>,
    },
    /// The task doing a pull panicked or was cancelled with its runtime.
    #[error("image {image}: the pull was interrupted: {reason}")]
    Interrupted {
        /// The image being pulled.
        image: String,
        /// What happened.
        reason: String,
    },
}

/// One failed try at a pull source, in [`Error::AllSourcesFailed`].
#[derive(Debug, Clone)]
pub struct Attempt {
    /// The reference pulled from: a mirror's, the primary location's, a search registry's.
    pub from: String,
    /// Why it failed.
    pub error: Error,
}

fn attempts_text(attempts: &[Attempt]) -> String {
    let parts: Vec<String> = attempts
        .iter()
        .map(|a| format!("[{}: {}]", a.from, a.error))
        .collect();
    parts.join(", ")
}

fn entry_text(entry: Option<&str>) -> String {
    match entry {
        Some(entry) => format!("entry {entry:?}: "),
        None => String::new(),
    }
}

/// How a registry refused a request ([`Error::registry_refusal`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RegistryRefusal {
    /// The repository or the manifest is not there.
    NotFound,
    /// Credentials are missing or not good enough.
    Unauthorized,
    /// Anything else: a server error, a connection that failed.
    Other,
}

/// What is wrong with a layer or one of its tar entries.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LayerProblem {
    /// The entry's path has a `..` component.
    DotDot,
    /// The entry's path is absolute.
    Absolute,
    /// A parent directory of the entry is a symbolic link: writing through it could land anywhere.
    SymlinkParent(String),
    /// A parent of the entry is not a directory.
    ParentNotDir(String),
    /// A symbolic link whose relative target climbs out of the layer.
    SymlinkEscapes(String),
    /// A hard link to something outside the layer or not in it.
    HardlinkOutside(String),
    /// One member's headers (GNU long name or link name, PAX records, sparse map) or a global
    /// PAX header are larger than the cap, in bytes; refused before they are read into memory.
    HeaderTooLarge(u64),
    /// The layer unpacks to more bytes than the cap.
    TooLarge(u64),
    /// The layer has more entries than the cap.
    TooManyEntries(u64),
    /// A whiteout with an empty or special name.
    BadWhiteout,
    /// The layer's media type is not a tar layer.
    MediaType(String),
    /// The uncompressed layer does not hash to the diff id the configuration lists.
    DiffId {
        /// The diff id in the configuration.
        expected: String,
        /// The digest of the uncompressed tar.
        actual: String,
    },
    /// The stream is not a valid (compressed) tar.
    Corrupt(String),
    /// Writing the entry failed; the operating system's message.
    Io(String),
    /// The unpack was stopped because another part of the pull failed.
    Cancelled,
}

impl fmt::Display for LayerProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LayerProblem::DotDot => f.write_str("path has a \"..\" component"),
            LayerProblem::Absolute => f.write_str("path is absolute"),
            LayerProblem::SymlinkParent(p) => {
                write!(
                    f,
                    "parent {p:?} is a symbolic link, refusing to write through it"
                )
            }
            LayerProblem::ParentNotDir(p) => write!(f, "parent {p:?} is not a directory"),
            LayerProblem::SymlinkEscapes(t) => {
                write!(f, "symbolic link target {t:?} points out of the layer")
            }
            LayerProblem::HardlinkOutside(t) => {
                write!(f, "hard link target {t:?} is not a file in this layer")
            }
            LayerProblem::HeaderTooLarge(cap) => write!(
                f,
                "a member's headers (long name or link name, PAX records) are larger than the cap of {cap} bytes"
            ),
            LayerProblem::TooLarge(cap) => write!(f, "unpacks to more than the cap of {cap} bytes"),
            LayerProblem::TooManyEntries(cap) => {
                write!(f, "has more than the cap of {cap} entries")
            }
            LayerProblem::BadWhiteout => f.write_str("whiteout names no file"),
            LayerProblem::MediaType(m) => write!(f, "unsupported layer media type {m:?}"),
            LayerProblem::DiffId { expected, actual } => write!(
                f,
                "uncompressed content is {actual}, the image configuration says {expected}"
            ),
            LayerProblem::Corrupt(why) => write!(f, "not a valid layer: {why}"),
            LayerProblem::Io(e) => write!(f, "cannot write: {e}"),
            LayerProblem::Cancelled => f.write_str("stopped: another part of the pull failed"),
        }
    }
}

impl Error {
    pub(crate) fn io(op: &'static str, path: &Path, source: io::Error) -> Self {
        Error::Io {
            op,
            path: path.to_owned(),
            source: Arc::new(source),
        }
    }

    pub(crate) fn file(op: &'static str, err: safe_file::Error) -> Self {
        let path = err.path().to_owned();
        Error::Io {
            op,
            path,
            source: Arc::new(err.into_io()),
        }
    }

    /// How the registry refused, when this is an [`Error::Registry`] (or every source failed
    /// and the last, the image's own location, refused): callers map a missing image and
    /// missing credentials to codes of their own.
    pub fn registry_refusal(&self) -> Option<RegistryRefusal> {
        use oci_client::errors::{OciDistributionError as O, OciErrorCode as C};
        let source = match self {
            Error::Registry { source, .. } => source,
            // The last source tried is the image's own location.
            Error::AllSourcesFailed { attempts, .. } => {
                return attempts.last().and_then(|a| a.error.registry_refusal());
            }
            _ => return None,
        };
        let by_code = |code: &C| match code {
            C::ManifestUnknown | C::NameUnknown | C::NotFound => Some(RegistryRefusal::NotFound),
            C::Unauthorized | C::Denied => Some(RegistryRefusal::Unauthorized),
            _ => None,
        };
        Some(match source.as_ref() {
            O::ImageManifestNotFoundError(_) | O::ServerError { code: 404, .. } => {
                RegistryRefusal::NotFound
            }
            O::AuthenticationFailure(_)
            | O::UnauthorizedError { .. }
            | O::ServerError {
                code: 401 | 403, ..
            } => RegistryRefusal::Unauthorized,
            O::RegistryError { envelope, .. } => envelope
                .errors
                .iter()
                .find_map(|e| by_code(&e.code))
                .unwrap_or(RegistryRefusal::Other),
            _ => RegistryRefusal::Other,
        })
    }

    /// Whether the node is at fault rather than the registry, the image or the node's rules:
    /// its disk, its files, its store (log it as an error; the others as warnings).
    pub fn is_node_fault(&self) -> bool {
        match self {
            Error::Blob { op, .. } => *op != "download",
            Error::Layer {
                problem: LayerProblem::Io(_),
                ..
            }
            | Error::Io { .. }
            | Error::Locked { .. }
            | Error::CorruptIndex { .. }
            | Error::AuthFile { .. }
            | Error::InvalidPolicy { .. }
            | Error::InvalidRegistries { .. }
            | Error::NoPolicy { .. }
            | Error::StorageDriver { .. }
            | Error::StillMounted { .. }
            | Error::Interrupted { .. } => true,
            Error::AllSourcesFailed { attempts, .. } => {
                attempts.iter().any(|a| a.error.is_node_fault())
            }
            _ => false,
        }
    }

    /// The message, cut to at most `max` bytes (on a character boundary, `…` marking the cut):
    /// an error may quote what a registry sent, which a log line must not carry in full.
    pub fn capped(&self, max: usize) -> String {
        let text = self.to_string();
        if text.len() <= max {
            return text;
        }
        let kept = node_primitives::text::cut(&text, max.saturating_sub('…'.len_utf8()));
        format!("{kept}…")
    }

    /// Whether a pull that failed so should go on with the next source (mirror, primary
    /// location): the source did not answer, refused, or sent what its digests deny. A refusal
    /// by policy, a hostile layer or a local failure stops the pull.
    pub(crate) fn tries_next_source(&self) -> bool {
        matches!(
            self,
            Error::Registry { .. }
                | Error::Timeout { .. }
                | Error::NoProgress { .. }
                | Error::DigestMismatch { .. }
                | Error::SizeMismatch { .. }
        )
    }

    /// The layer problem, when this is a [`Error::Layer`].
    pub fn layer_problem(&self) -> Option<&LayerProblem> {
        match self {
            Error::Layer { problem, .. } => Some(problem),
            _ => None,
        }
    }
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_node_is_at_fault_for_its_disk_and_files_not_for_registries_and_images() {
        let io = || Arc::new(io::Error::from(io::ErrorKind::StorageFull));
        let node = [
            Error::Blob {
                image: "i".into(),
                blob: "b".into(),
                op: "write",
                source: io(),
            },
            Error::io(
                "create",
                Path::new("/x"),
                io::Error::from(io::ErrorKind::PermissionDenied),
            ),
            Error::NoPolicy {
                path: "/etc/containers/policy.json".into(),
            },
        ];
        let elsewhere = [
            Error::Blob {
                image: "i".into(),
                blob: "b".into(),
                op: "download",
                source: io(),
            },
            Error::Timeout {
                image: "i".into(),
                op: "fetch the manifest".into(),
                after: Duration::from_secs(1),
            },
            Error::NotFound { query: "q".into() },
        ];
        assert!(node.iter().all(Error::is_node_fault), "{node:?}");
        assert!(!elsewhere.iter().any(Error::is_node_fault), "{elsewhere:?}");
    }

    #[test]
    fn capped_messages_end_on_a_character_with_a_mark() {
        let err = Error::NotFound {
            query: "é".repeat(100),
        };
        let full = err.to_string();
        assert_eq!(err.capped(full.len()), full);
        for max in [10, 11, 12, 50] {
            let capped = err.capped(max);
            assert!(
                capped.len() <= max && capped.ends_with('…'),
                "{max}: {capped}"
            );
        }
    }

    #[test]
    fn layer_errors_name_image_layer_and_entry() {
        let err = Error::Layer {
            image: "docker.io/library/busybox:latest".into(),
            layer: "sha256:ab".into(),
            entry: Some("../escape".into()),
            problem: LayerProblem::DotDot,
        };
        assert_eq!(
            err.to_string(),
            "image docker.io/library/busybox:latest: layer sha256:ab: entry \"../escape\": \
             path has a \"..\" component"
        );
        let err = Error::Layer {
            image: "i".into(),
            layer: "sha256:ab".into(),
            entry: None,
            problem: LayerProblem::MediaType("text/plain".into()),
        };
        assert_eq!(
            err.to_string(),
            "image i: layer sha256:ab: unsupported layer media type \"text/plain\""
        );
    }
}

//! The result cache, in libcni's layout and format so Go runtimes and this crate share it.
//!
//! `<cache dir>/results/<network>-<container id>-<ifname>` holds one JSON object per attachment:
//!
//! ```json
//! {"kind":"cniCacheV1","containerId":"c1","config":"<base64 of the list bytes>","ifName":"eth0",
//!  "networkName":"crio","netns":"/run/netns/p","cniArgs":[["K8S_POD_NAME","web"]],
//!  "capabilityArgs":{...},"result":{...}}
//! ```
//!
//! Keys are those of libcni's `cachedInfo` (Go marshals `[]byte` as standard base64 and its maps
//! with sorted keys; this crate does the same). Writes go through [`safe_file`]'s atomic write (a
//! temporary file in the same directory, synced and renamed over the entry), so a crash leaves the
//! old entry or the new one.

use std::fs::{self, DirBuilder};
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use cni_types::{CapabilityArgs, CniResult};
use safe_file::{AtomicFile, Durability, Symlinks, TempName};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::runtime_conf::{
    RuntimeConf, validate_container_id, validate_if_name, validate_network_name,
};

/// Where libcni keeps its cache unless told otherwise.
pub const DEFAULT_CACHE_DIR: &str = "/var/lib/cni";

/// The `kind` of every entry libcni writes since v0.8.
pub const CACHE_KIND_V1: &str = "cniCacheV1";

/// One cached attachment: what ADD was run with and what it returned.
///
/// The counterpart of libcni's `NetworkAttachment` plus the cached result.
#[derive(Debug, Clone, PartialEq)]
pub struct CachedAttachment {
    /// The container id.
    pub container_id: String,
    /// The network (configuration list) name.
    pub network: String,
    /// The interface name in the container.
    pub if_name: String,
    /// The network namespace path ADD was given; empty when unknown (libcni before 1.2 did not
    /// store it).
    pub netns: String,
    /// The exact configuration bytes ADD used (a `.conflist`, or libcni's list built from a `.conf`).
    pub config: Vec<u8>,
    /// `CNI_ARGS` pairs.
    pub cni_args: Vec<(String, String)>,
    /// Capability arguments, as raw JSON (Go stores whatever the runtime passed).
    pub capability_args: Map<String, Value>,
    /// The ADD result as raw JSON, in the version it was stored in.
    pub result: Option<Value>,
}

impl CachedAttachment {
    /// The runtime configuration ADD was run with (namespace, arguments, capability arguments).
    ///
    /// # Errors
    ///
    /// [`Error::Types`] when the capability arguments do not decode.
    pub fn runtime_conf(&self) -> Result<RuntimeConf> {
        let capability_args = if self.capability_args.is_empty() {
            CapabilityArgs::default()
        } else {
            let bytes = Value::Object(self.capability_args.clone()).to_string();
            CapabilityArgs::from_slice(bytes.as_bytes()).map_err(|source| Error::Types {
                network: self.network.clone(),
                what: "cached capability arguments",
                source,
            })?
        };
        Ok(RuntimeConf {
            container_id: self.container_id.clone(),
            netns: self.netns.clone(),
            if_name: self.if_name.clone(),
            args: self.cni_args.clone(),
            capability_args,
        })
    }

    /// The network configuration ADD used, parsed from the cached bytes: as a list, or else as a
    /// single plugin configuration (what older tools cached for `.conf` files).
    ///
    /// # Errors
    ///
    /// [`Error::Config`] with the list parser's error when neither parses.
    pub fn network_list(&self) -> Result<cni_config::NetworkList> {
        cni_config::parse_conflist(&self.config)
            .or_else(|list_err| cni_config::parse_conf(&self.config).map_err(|_| list_err))
            .map_err(|source| Error::Config {
                network: self.network.clone(),
                source,
            })
    }

    /// The cached result in the version it was stored in, if there is one.
    ///
    /// # Errors
    ///
    /// [`Error::Types`] when it is not a result of a version this library implements.
    pub fn cni_result(&self) -> Result<Option<CniResult>> {
        let Some(result) = &self.result else {
            return Ok(None);
        };
        CniResult::from_slice_own_version(result.to_string().as_bytes())
            .map(Some)
            .map_err(|source| Error::Types {
                network: self.network.clone(),
                what: "cached result",
                source,
            })
    }
}

/// The JSON of an entry, field for field libcni's `cachedInfo`.
#[derive(Debug, Serialize, Deserialize)]
struct Wire {
    kind: String,
    #[serde(rename = "containerId", alias = "containerID", default)]
    container_id: String,
    #[serde(default)]
    config: Option<String>,
    #[serde(rename = "ifName", default)]
    if_name: String,
    #[serde(rename = "networkName", default)]
    network_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    netns: Option<String>,
    #[serde(rename = "cniArgs", default, skip_serializing_if = "Option::is_none")]
    cni_args: Option<Vec<(String, String)>>,
    #[serde(
        rename = "capabilityArgs",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    capability_args: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    result: Option<Map<String, Value>>,
}

impl Wire {
    fn from_attachment(a: &CachedAttachment) -> Self {
        Wire {
            kind: CACHE_KIND_V1.to_owned(),
            container_id: a.container_id.clone(),
            config: Some(BASE64.encode(&a.config)),
            if_name: a.if_name.clone(),
            network_name: a.network.clone(),
            netns: (!a.netns.is_empty()).then(|| a.netns.clone()),
            cni_args: (!a.cni_args.is_empty()).then(|| a.cni_args.clone()),
            capability_args: (!a.capability_args.is_empty())
                .then(|| sorted_map(&a.capability_args)),
            result: match &a.result {
                Some(Value::Object(map)) if !map.is_empty() => Some(sorted_map(map)),
                _ => None,
            },
        }
    }

    fn into_attachment(self) -> std::result::Result<CachedAttachment, String> {
        if self.kind != CACHE_KIND_V1 {
            return Err(format!("kind is {:?}, not {CACHE_KIND_V1:?}", self.kind));
        }
        let config = match self.config {
            Some(text) => BASE64
                .decode(text.as_bytes())
                .map_err(|e| format!("config is not base64: {e}"))?,
            None => Vec::new(),
        };
        Ok(CachedAttachment {
            container_id: self.container_id,
            network: self.network_name,
            if_name: self.if_name,
            netns: self.netns.unwrap_or_default(),
            config,
            cni_args: self.cni_args.unwrap_or_default(),
            capability_args: self.capability_args.unwrap_or_default(),
            result: self.result.map(Value::Object),
        })
    }
}

/// Go marshals maps with sorted keys; doing the same keeps entries byte-comparable with libcni's.
fn sorted_map(map: &Map<String, Value>) -> Map<String, Value> {
    let mut keys: Vec<&String> = map.keys().collect();
    keys.sort();
    keys.into_iter()
        .map(|k| (k.clone(), sorted(&map[k])))
        .collect()
}

fn sorted(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(sorted_map(map)),
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// The entry JSON libcni would write for `attachment`.
///
/// # Errors
///
/// Never in practice: the value is plain JSON. A serializer failure is reported as
/// [`Error::Cache`] for `path`.
fn encode(attachment: &CachedAttachment, path: &Path) -> Result<Vec<u8>> {
    serde_json::to_vec(&Wire::from_attachment(attachment)).map_err(|e| Error::Cache {
        path: path.to_owned(),
        op: "encode entry",
        source: io::Error::other(e),
    })
}

/// Decodes an entry; `Err` holds why it is unusable.
fn decode(bytes: &[u8]) -> std::result::Result<CachedAttachment, String> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err("empty file".to_owned());
    }
    let wire: Wire = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    wire.into_attachment()
}

/// The result cache under one cache directory (libcni's `CacheDir`, `/var/lib/cni` by default).
///
/// Pending entries (see [`ResultCache::put_pending`]) live with the complete ones unless
/// [`ResultCache::with_pending_dir`] puts them elsewhere.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResultCache {
    dir: PathBuf,
    pending_dir: Option<PathBuf>,
}

impl ResultCache {
    /// A cache rooted at `dir`; entries live in `dir/results`. Nothing is created until a write.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        ResultCache {
            dir: dir.into(),
            pending_dir: None,
        }
    }

    /// Keeps pending entries in `dir` (same file names and format), so that the results
    /// directory only ever holds complete entries, as libcni writes them.
    ///
    /// Meant for a directory in the runtime's run dir (`/run/...`, a tmpfs on any systemd host):
    /// a pending entry only has to survive its process dying, not a reboot, and on tmpfs
    /// writing and removing it costs no disk I/O. Readers ([`ResultCache::get`],
    /// [`ResultCache::list`]) look in both places; a complete entry wins over a pending one.
    pub fn with_pending_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.pending_dir = Some(dir.into());
        self
    }

    /// Where pending entries are written: the pending directory if set, else the results one.
    pub fn pending_dir(&self) -> PathBuf {
        self.pending_dir
            .clone()
            .unwrap_or_else(|| self.results_dir())
    }

    /// The cache directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The directory holding the entries: `<cache dir>/results`.
    pub fn results_dir(&self) -> PathBuf {
        self.dir.join("results")
    }

    /// The file of one attachment: `results/<network>-<container id>-<ifname>`, libcni's name,
    /// whenever that name says whose entry it is.
    ///
    /// libcni's names collide: network `a` with container `b-c` and network `a-b` with container
    /// `c` are both `a-b-c-eth0`. Read from the right, a name is unambiguous as long as the
    /// container id and the interface name hold no `-`, which is the case for every id a
    /// kubelet makes; only when one of them does (or holds a `%`), both are written with `-` as
    /// `%2D` and `%` as `%25`, a name libcni never makes. Readers also check whose entry a file
    /// holds, so a file written by libcni under a colliding name is never taken for another
    /// attachment's.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRuntimeConf`] when a part breaks libcni's rules, so no name escapes the
    /// results directory, or when the name (with its temporary file's suffix) would be longer
    /// than a file name may be.
    pub fn entry_path(&self, network: &str, container_id: &str, if_name: &str) -> Result<PathBuf> {
        validate_network_name(network)?;
        validate_container_id(container_id)?;
        validate_if_name(if_name)?;
        self.lookup_path(network, container_id, if_name)?
            .ok_or_else(|| Error::InvalidRuntimeConf {
                field: "network",
                value: network.to_owned(),
                reason: format!(
                    "its cache entry name with this container id and interface would be longer \
                     than the {MAX_ENTRY_NAME} bytes a cache file name may have"
                ),
            })
    }

    /// [`Self::entry_path`], or `None` when the name is too long to exist: what reads and
    /// removals use, so a teardown of such an attachment finds no entry instead of failing.
    fn lookup_path(
        &self,
        network: &str,
        container_id: &str,
        if_name: &str,
    ) -> Result<Option<PathBuf>> {
        validate_network_name(network)?;
        validate_container_id(container_id)?;
        validate_if_name(if_name)?;
        let name = entry_file_name(network, container_id, if_name);
        Ok((name.len() <= MAX_ENTRY_NAME).then(|| self.results_dir().join(name)))
    }

    /// libcni's own name for an attachment whose container id or interface holds a `-`: where
    /// libcni (and this crate before it escaped such names) put it. Read only with an identity
    /// check.
    fn legacy_path(&self, network: &str, container_id: &str, if_name: &str) -> Option<PathBuf> {
        let legacy = libcni_file_name(network, container_id, if_name);
        (legacy != entry_file_name(network, container_id, if_name)
            && legacy.len() <= MAX_ENTRY_NAME)
            .then(|| self.results_dir().join(legacy))
    }

    /// Reads one entry. A missing entry is `None`; so is a corrupt, empty or unreadable one, with a
    /// warning naming the file (libcni ignores those too, and DEL must still be able to proceed).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRuntimeConf`] for names that break the rules (see [`Self::entry_path`]).
    pub fn get(
        &self,
        network: &str,
        container_id: &str,
        if_name: &str,
    ) -> Result<Option<CachedAttachment>> {
        let Some(path) = self.lookup_path(network, container_id, if_name)? else {
            return Ok(None);
        };
        let id = Identity {
            network,
            container_id,
            if_name,
        };
        let pending = path
            .file_name()
            .and_then(|name| Some(self.pending_dir.as_ref()?.join(name)));
        let legacy = self.legacy_path(network, container_id, if_name);
        Ok([Some(path), legacy, pending]
            .into_iter()
            .flatten()
            .find_map(|candidate| read_entry_of(&candidate, &id)))
    }

    /// Writes an entry atomically: a temporary file in the same directory (mode 0600) is written,
    /// synced and renamed over the entry, then the directory is synced. The directory is created
    /// with mode 0700 when missing. A pending entry of the attachment in the pending directory
    /// is removed once this one is in place.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRuntimeConf`] for names that break the rules, [`Error::Cache`] when the file
    /// system refuses.
    pub fn put(&self, attachment: &CachedAttachment) -> Result<()> {
        let prepared = self.prepare(
            &attachment.network,
            &attachment.container_id,
            &attachment.if_name,
        )?;
        self.put_prepared(prepared, attachment)
    }

    /// Creates the temporary file that [`ResultCache::put_prepared`] will fill for this
    /// attachment, creating the results directory if needed.
    ///
    /// Creating a file can be the slowest step of a write on a busy file system (ext4 without a
    /// journal skips every recently deleted inode to find a free one), and it does not need the
    /// result: ADD prepares its entry while the plugins run.
    ///
    /// # Errors
    ///
    /// As [`ResultCache::put`].
    pub fn prepare(
        &self,
        network: &str,
        container_id: &str,
        if_name: &str,
    ) -> Result<PreparedEntry> {
        let path = self.entry_path(network, container_id, if_name)?;
        create_dir(&self.results_dir())?;
        let file = AtomicFile::create(path, ENTRY_MODE).map_err(file_error)?;
        Ok(PreparedEntry { file })
    }

    /// [`ResultCache::put`] into a file made by [`ResultCache::prepare`] for the same attachment.
    ///
    /// # Errors
    ///
    /// As [`ResultCache::put`]; [`Error::InvalidRuntimeConf`] also when `prepared` was made for
    /// another attachment.
    pub fn put_prepared(
        &self,
        prepared: PreparedEntry,
        attachment: &CachedAttachment,
    ) -> Result<()> {
        let path = self.entry_path(
            &attachment.network,
            &attachment.container_id,
            &attachment.if_name,
        )?;
        if prepared.path() != path {
            return Err(Error::InvalidRuntimeConf {
                field: "network",
                value: attachment.network.clone(),
                reason: format!(
                    "the prepared cache entry is {}, not {}",
                    prepared.path().display(),
                    path.display()
                ),
            });
        }
        let bytes = encode(attachment, &path)?;
        prepared
            .file
            .commit(&bytes, Durability::Synced)
            .map_err(file_error)?;
        self.remove_pending_of(&path)
    }

    /// Removes the pending entry matching the results entry at `path`, if there is a pending dir.
    fn remove_pending_of(&self, path: &Path) -> Result<()> {
        if let (Some(dir), Some(name)) = (&self.pending_dir, path.file_name()) {
            remove_if_present(&dir.join(name))?;
        }
        Ok(())
    }

    /// Writes an entry atomically like [`ResultCache::put`], but without syncing it to disk.
    ///
    /// For the result-less entry ADD writes before running plugins: it lets teardown and GC find
    /// an attachment whose runtime died while the plugins ran. A process dying does not lose page
    /// cache, so that case needs no fsync; after a power loss the namespace and its interfaces are
    /// gone anyway, and a torn entry reads as absent. Written to the
    /// [pending directory](ResultCache::with_pending_dir) when there is one.
    ///
    /// # Errors
    ///
    /// As [`ResultCache::put`].
    pub fn put_pending(&self, attachment: &CachedAttachment) -> Result<()> {
        let path = self.entry_path(
            &attachment.network,
            &attachment.container_id,
            &attachment.if_name,
        )?;
        let bytes = encode(attachment, &path)?;
        let (dir, target) = match (&self.pending_dir, path.file_name()) {
            (Some(pending), Some(name)) => (pending.clone(), pending.join(name)),
            _ => (self.results_dir(), path.clone()),
        };
        create_dir(&dir)?;
        safe_file::write_atomic(&target, &bytes, ENTRY_MODE, Durability::Unsynced)
            .map_err(file_error)
    }

    /// Removes an entry, complete or pending; `Ok(false)` when there was none.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRuntimeConf`] for names that break the rules, [`Error::Cache`] when the file
    /// cannot be removed.
    pub fn remove(&self, network: &str, container_id: &str, if_name: &str) -> Result<bool> {
        let Some(path) = self.lookup_path(network, container_id, if_name)? else {
            return Ok(false);
        };
        let mut removed = remove_if_present(&path)?;
        if let (Some(dir), Some(name)) = (&self.pending_dir, path.file_name()) {
            removed |= remove_if_present(&dir.join(name))?;
        }
        // A file under libcni's colliding name goes only if it is this attachment's.
        let id = Identity {
            network,
            container_id,
            if_name,
        };
        if let Some(legacy) = self.legacy_path(network, container_id, if_name)
            && read_entry_of(&legacy, &id).is_some()
        {
            removed |= remove_if_present(&legacy)?;
        }
        Ok(removed)
    }

    /// Removes the temporary files of writers that died between writing an entry and renaming it
    /// into place (`.<entry>.tmp-<pid>-<n>` whose process no longer runs); returns how many.
    ///
    /// Readers skip such files; this is for GC, so a runtime killed mid-write leaves nothing
    /// behind for good. Files of live processes (this one included) are left alone.
    ///
    /// # Errors
    ///
    /// [`Error::Cache`] when the results directory exists but cannot be listed.
    pub fn remove_stale_temp_files(&self) -> Result<usize> {
        let mut removed = 0;
        for dir in self.dirs() {
            removed += remove_stale_temp_files_in(&dir)?;
        }
        Ok(removed)
    }

    /// The results directory, then the pending directory if there is one.
    fn dirs(&self) -> Vec<PathBuf> {
        let mut dirs = vec![self.results_dir()];
        dirs.extend(self.pending_dir.clone());
        dirs
    }

    /// Every usable entry, sorted by file name, optionally only those of one container; a
    /// pending entry is listed only when its attachment has no complete one.
    ///
    /// Like libcni's `GetCachedAttachments`, entries that do not decode, are of another kind, or
    /// lack an interface or network name are skipped (with a warning); so are entries whose names
    /// break the rules. A missing directory means no entries.
    ///
    /// # Errors
    ///
    /// [`Error::Cache`] when a directory exists but cannot be listed.
    pub fn list(&self, container_id: Option<&str>) -> Result<Vec<CachedAttachment>> {
        let mut found: std::collections::BTreeMap<String, CachedAttachment> =
            std::collections::BTreeMap::new();
        // Pending entries first, so that complete ones replace them.
        for dir in self.dirs().iter().rev() {
            found.extend(list_dir(dir, container_id)?);
        }
        Ok(found.into_values().collect())
    }
}

/// Creates `dir` (mode 0700) and its parents when missing.
fn create_dir(dir: &Path) -> Result<()> {
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|source| Error::Cache {
            path: dir.to_owned(),
            op: "create directory",
            source,
        })
}

/// Removes `path`; `Ok(false)` when it was not there.
fn remove_if_present(path: &Path) -> Result<bool> {
    match fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(source) => Err(Error::Cache {
            path: path.to_owned(),
            op: "remove",
            source,
        }),
    }
}

/// [`ResultCache::remove_stale_temp_files`] for one directory.
fn remove_stale_temp_files_in(dir: &Path) -> Result<usize> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
        Err(source) => {
            return Err(Error::Cache {
                path: dir.to_owned(),
                op: "list",
                source,
            });
        }
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = TempName::parse(&name.to_string_lossy()).map(|t| t.pid) else {
            continue;
        };
        if pid != std::process::id() && !process_exists(pid) {
            match fs::remove_file(entry.path()) {
                Ok(()) => removed += 1,
                Err(e) => tracing::warn!(file = %entry.path().display(), error = %e,
                    "cannot remove a stale cache temp file"),
            }
        }
    }
    Ok(removed)
}

/// The usable entries of one directory by file name (see [`ResultCache::list`]).
fn list_dir(dir: &Path, container_id: Option<&str>) -> Result<Vec<(String, CachedAttachment)>> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(Error::Cache {
                path: dir.to_owned(),
                op: "list",
                source,
            });
        }
    };
    let mut names: Vec<String> = entries
        .filter_map(std::result::Result::ok)
        .filter_map(|e| e.file_name().into_string().ok())
        // Temporary files of an unfinished write start with a dot.
        .filter(|name| !name.starts_with('.'))
        .collect();
    names.sort();
    // A container id is written escaped (or as it is, which is the same when it needs no escape).
    let needle = container_id.map(|id| format!("-{}-", escape_name_part(id)));
    let mut out = Vec::new();
    for name in names {
        if needle.as_ref().is_some_and(|n| !name.contains(n.as_str())) {
            continue;
        }
        let path = dir.join(&name);
        let Some(entry) = read_entry(&path) else {
            continue;
        };
        if container_id.is_some_and(|id| entry.container_id != id) {
            continue;
        }
        let valid = validate_network_name(&entry.network)
            .and_then(|()| validate_container_id(&entry.container_id))
            .and_then(|()| validate_if_name(&entry.if_name));
        if let Err(e) = valid {
            tracing::warn!(file = %path.display(), error = %e, "skipping cache entry");
            continue;
        }
        // The file must be where this crate or libcni would have put the entry it holds;
        // anything else is another attachment's name and is not acted on.
        let own = entry_file_name(&entry.network, &entry.container_id, &entry.if_name);
        let libcni = libcni_file_name(&entry.network, &entry.container_id, &entry.if_name);
        if name != own && name != libcni {
            tracing::warn!(
                file = %path.display(),
                network = entry.network, container = entry.container_id, ifname = entry.if_name,
                "skipping cache entry: the file is named for another attachment"
            );
            continue;
        }
        out.push((name, entry));
    }
    Ok(out)
}

/// Longest entry name: a file name may have 255 bytes, and the temporary file a write goes
/// through ([`safe_file::AtomicFile`]) adds a dot and `.tmp-<pid>-<counter>`.
const MAX_ENTRY_NAME: usize = 255 - 32;

/// See [`ResultCache::entry_path`].
fn entry_file_name(network: &str, container_id: &str, if_name: &str) -> String {
    if [container_id, if_name]
        .iter()
        .any(|part| part.contains(['-', '%']))
    {
        format!(
            "{network}-{}-{}",
            escape_name_part(container_id),
            escape_name_part(if_name)
        )
    } else {
        libcni_file_name(network, container_id, if_name)
    }
}

/// libcni's own name for an entry: `<network>-<container id>-<ifname>`.
fn libcni_file_name(network: &str, container_id: &str, if_name: &str) -> String {
    format!("{network}-{container_id}-{if_name}")
}

fn escape_name_part(part: &str) -> String {
    part.replace('%', "%25").replace('-', "%2D")
}

/// Whose entry a read is for.
struct Identity<'a> {
    network: &'a str,
    container_id: &'a str,
    if_name: &'a str,
}

/// [`read_entry`], and `None` (with a warning) when the file holds another attachment's entry.
fn read_entry_of(path: &Path, id: &Identity<'_>) -> Option<CachedAttachment> {
    let entry = read_entry(path)?;
    if entry.network == id.network
        && entry.container_id == id.container_id
        && entry.if_name == id.if_name
    {
        return Some(entry);
    }
    tracing::warn!(
        file = %path.display(),
        holds = format!("{}/{}/{}", entry.network, entry.container_id, entry.if_name),
        wanted = format!("{}/{}/{}", id.network, id.container_id, id.if_name),
        "cache entry belongs to another attachment; ignoring it"
    );
    None
}

/// The most bytes read from one cache entry: a result and its base64 configuration are a few
/// KiB; anything near this is not an entry.
const MAX_ENTRY_BYTES: u64 = 4 << 20;

fn read_entry(path: &Path) -> Option<CachedAttachment> {
    // Regular files only, bounded: a FIFO or /dev/zero planted in the cache must not hang or
    // exhaust the runtime.
    let bytes = match safe_file::read_regular(path, MAX_ENTRY_BYTES, Symlinks::Follow) {
        Ok(bytes) => bytes,
        Err(e) if e.is_not_found() => return None,
        Err(e) => {
            let e = e.into_io();
            tracing::warn!(file = %path.display(), error = %e, "cannot read cache entry; treating it as absent");
            return None;
        }
    };
    match decode(&bytes) {
        Ok(entry) => Some(entry),
        Err(reason) => {
            tracing::warn!(file = %path.display(), %reason, "corrupt cache entry; treating it as absent");
            None
        }
    }
}

/// Whether a process with this pid exists (signal 0 probes without sending anything).
fn process_exists(pid: u32) -> bool {
    let Ok(raw) = i32::try_from(pid) else {
        return false;
    };
    !matches!(
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(raw), None),
        Err(nix::errno::Errno::ESRCH)
    )
}

/// Entries hold a pod's arguments and results: for root alone, as libcni writes them.
const ENTRY_MODE: u32 = 0o600;

/// A temporary file created ahead of a durable write; see [`ResultCache::prepare`].
///
/// Dropping it unused removes the file.
#[derive(Debug)]
pub struct PreparedEntry {
    file: AtomicFile,
}

impl PreparedEntry {
    /// The entry's path in the results directory.
    pub fn path(&self) -> &Path {
        self.file.target()
    }
}

/// A failed file operation as this crate's error, naming the entry and the step.
fn file_error(e: safe_file::Error) -> Error {
    let path = e.path().to_owned();
    let op = match &e {
        safe_file::Error::Io { op, .. } => op,
        _ => "write",
    };
    Error::Cache {
        path,
        op,
        source: e.into_io(),
    }
}

#[cfg(test)]
mod stale_tests {
    use super::*;

    #[test]
    fn only_temp_files_of_dead_writers_are_removed() {
        let root = tempfile::tempdir().unwrap();
        let cache = ResultCache::new(root.path());
        let dir = cache.results_dir();
        fs::create_dir_all(&dir).unwrap();
        // A pid above the kernel's maximum (4194304) never runs.
        let dead = dir.join(".net-c1-eth0.tmp-99999999-0");
        let ours = dir.join(format!(".net-c2-eth0.tmp-{}-0", std::process::id()));
        let entry = dir.join("net-c3-eth0");
        for path in [&dead, &ours, &entry] {
            fs::write(path, b"{}").unwrap();
        }
        assert_eq!(cache.remove_stale_temp_files().unwrap(), 1);
        assert!(!dead.exists());
        assert!(ours.exists() && entry.exists());
        assert_eq!(
            ResultCache::new(root.path().join("none"))
                .remove_stale_temp_files()
                .unwrap(),
            0
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn attachment() -> CachedAttachment {
        CachedAttachment {
            container_id: "c1".into(),
            network: "net".into(),
            if_name: "eth0".into(),
            netns: "/run/netns/p".into(),
            config: br#"{"name":"net"}"#.to_vec(),
            cni_args: vec![("K".into(), "V".into())],
            capability_args: json!({"z": 1, "a": {"y": 2, "b": 3}})
                .as_object()
                .cloned()
                .unwrap(),
            result: Some(json!({"cniVersion": "1.0.0", "ips": []})),
        }
    }

    #[test]
    fn encodes_like_libcni() {
        let bytes = encode(&attachment(), Path::new("x")).unwrap();
        assert_eq!(
            String::from_utf8(bytes).unwrap(),
            r#"{"kind":"cniCacheV1","containerId":"c1","config":"eyJuYW1lIjoibmV0In0=","ifName":"eth0","networkName":"net","netns":"/run/netns/p","cniArgs":[["K","V"]],"capabilityArgs":{"a":{"b":3,"y":2},"z":1},"result":{"cniVersion":"1.0.0","ips":[]}}"#
        );
    }

    #[test]
    fn decodes_what_it_encodes() {
        let a = attachment();
        let mut back = decode(&encode(&a, Path::new("x")).unwrap()).unwrap();
        back.capability_args = a.capability_args.clone();
        assert_eq!(back, a);
    }

    #[test]
    fn rejects_other_kinds_and_empty_files() {
        assert!(decode(b"").is_err());
        assert!(decode(b"  \n").is_err());
        assert!(decode(br#"{"kind":"other"}"#).is_err());
        assert!(decode(br#"{"kind":"cniCacheV1","config":"%%%"}"#).is_err());
        assert!(decode(br#"{"kind":"cniCacheV1","cniArgs":null,"config":null}"#).is_ok());
    }

    #[test]
    fn entry_names_cannot_escape() {
        let cache = ResultCache::new("/var/lib/cni");
        assert_eq!(
            cache.entry_path("net", "c1", "eth0").unwrap(),
            Path::new("/var/lib/cni/results/net-c1-eth0")
        );
        assert!(cache.entry_path("../x", "c1", "eth0").is_err());
        assert!(cache.entry_path("net", "../../etc", "eth0").is_err());
        assert!(cache.entry_path("net", "c1", "a/b").is_err());
    }
}

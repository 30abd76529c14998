//! Loading one file, and every configuration file of a directory.

use std::ffi::OsStr;
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use cni_types::{PluginConfig, Version};
use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::parse::{Format, NetworkList, decode_list, finish, json_object, parse_conf};
use crate::read::{MAX_CONFIG_BYTES, read_regular_file};

/// The extensions [`load_dir`] reads, as libcni and ocicni do.
pub const EXTENSIONS: &[&str] = &["conf", "conflist", "json"];

/// Go's `filepath.Ext` without the dot: the text after the last `.` of the file name, so
/// `.conf` (a hidden file) has the extension `conf`, as libcni sees it.
fn extension(name: &OsStr) -> Option<&[u8]> {
    let bytes = name.as_bytes();
    bytes
        .iter()
        .rposition(|b| *b == b'.')
        .map(|dot| &bytes[dot + 1..])
}

/// Reads, parses and validates one configuration file.
///
/// A `.conflist` file is a list; any other file is a single plugin configuration promoted to a
/// list. For a `.conflist` whose `loadOnlyInlinedPlugins` is not `true` (spec 1.1), plugin
/// configurations are also read from the directory `<file's directory>/<network name>/`, as libcni
/// 1.2 and later do: every `*.conf` file there (subdirectories skipped), in byte-wise name order,
/// each one plugin object with a required `type`, appended after the inline plugins. A missing
/// subdirectory adds nothing. Such a list may then omit `plugins`. `.conf` files never read a
/// subdirectory (libcni promotes them without one).
///
/// Files are read with [`read_regular_file`]: anything but a regular file (symlinks followed) is
/// refused, and so is a file larger than [`MAX_CONFIG_BYTES`].
///
/// # Errors
///
/// [`Error::Read`] when the file or the plugin subdirectory cannot be read, is not a regular file
/// or is too large, and every error of [`crate::parse_conflist`] and [`crate::parse_conf`],
/// naming `path` (or the plugin file at fault).
pub fn load_file(path: &Path) -> Result<NetworkList> {
    load_bytes(path, &read_file(path)?)
}

/// Reads a configuration or plugin file through the one bounded, regular-files-only reader.
fn read_file(path: &Path) -> Result<Vec<u8>> {
    read_regular_file(path, MAX_CONFIG_BYTES).map_err(|source| Error::Read {
        path: path.to_owned(),
        source,
    })
}

/// [`load_file`] on bytes already read from `path`.
fn load_bytes(path: &Path, bytes: &[u8]) -> Result<NetworkList> {
    let is_list = path
        .file_name()
        .and_then(extension)
        .is_some_and(|ext| ext == b"conflist");
    let network = if is_list {
        load_list(path, bytes)
    } else {
        parse_conf(bytes)
    };
    let mut network = network.map_err(|e| e.in_file(path))?;
    network.source = Some(path.to_owned());
    Ok(network)
}

fn load_list(path: &Path, bytes: &[u8]) -> Result<NetworkList> {
    let (mut list, version) = decode_list(bytes)?;
    let mut plugin_files = Vec::new();
    if !list.load_only_inlined_plugins {
        // The name is validated, so it cannot climb out of the directory.
        let subdir = path
            .parent()
            .unwrap_or_else(|| Path::new("."))
            .join(&list.name);
        for file in plugin_conf_files(&subdir)? {
            list.plugins.push(load_plugin_file(&file)?);
            plugin_files.push(file);
        }
    }
    finish(list, version, Format::Conflist, bytes, None, plugin_files)
}

/// The `*.conf` files of a network's plugin directory, sorted; none when it does not exist.
fn plugin_conf_files(subdir: &Path) -> Result<Vec<PathBuf>> {
    let read_err = |source| Error::Read {
        path: subdir.to_owned(),
        source,
    };
    let entries = match fs::read_dir(subdir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(read_err(e)),
    };
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(read_err)?;
        let path = entry.path();
        if !is_dir(&path) && extension(&entry.file_name()).is_some_and(|e| e == b"conf") {
            files.push(path);
        }
    }
    files.sort_by(|a, b| a.as_os_str().as_bytes().cmp(b.as_os_str().as_bytes()));
    Ok(files)
}

fn load_plugin_file(file: &Path) -> Result<PluginConfig> {
    let bytes = read_file(file)?;
    let map = json_object(&bytes).map_err(|e| e.in_file(file))?;
    PluginConfig::from_map(map).map_err(|e| Error::from(e).in_file(file))
}

/// Directories (also through symlinks) are skipped; anything else gets a verdict.
fn is_dir(path: &Path) -> bool {
    fs::metadata(path).is_ok_and(|m| m.is_dir())
}

/// What became of one file of the directory.
#[derive(Debug)]
#[non_exhaustive]
pub enum Verdict {
    /// The file's network is available.
    Loaded,
    /// The file is valid but an earlier file (in name order) already defined its network.
    Shadowed {
        /// The file whose network won.
        by: PathBuf,
    },
    /// The file cannot be used; the error names the file and the field.
    Rejected(Error),
}

impl Verdict {
    /// `"loaded"`, `"shadowed"` or `"rejected"`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Verdict::Loaded => "loaded",
            Verdict::Shadowed { .. } => "shadowed",
            Verdict::Rejected(_) => "rejected",
        }
    }
}

/// The verdict on one file, with what could be read from it.
#[derive(Debug)]
pub struct FileReport {
    /// The file.
    pub path: PathBuf,
    /// The network name; for a rejected file, the top-level `name` if the JSON has a string there.
    pub network: Option<String>,
    /// The effective version, for files that parsed.
    pub version: Option<Version>,
    /// The plugin types, for files that parsed.
    pub plugin_types: Vec<String>,
    /// What became of the file.
    pub verdict: Verdict,
}

impl FileReport {
    /// Why the file is not in use, for shadowed and rejected files.
    pub fn reason(&self) -> Option<String> {
        match &self.verdict {
            Verdict::Loaded => None,
            Verdict::Shadowed { by } => Some(format!(
                "network {:?} is already defined by {}",
                self.network.as_deref().unwrap_or_default(),
                by.display()
            )),
            Verdict::Rejected(e) => Some(e.to_string()),
        }
    }

    /// The report as one JSON object: `file`, `network`, `cniVersion`, `plugins` (types),
    /// `verdict` and `reason` (null for loaded files).
    pub fn to_json(&self) -> Value {
        json!({
            "file": self.path.to_string_lossy(),
            "network": self.network,
            "cniVersion": self.version.map(|v| v.to_string()),
            "plugins": self.plugin_types,
            "verdict": self.verdict.as_str(),
            "reason": self.reason(),
        })
    }
}

/// The outcome of [`load_dir`]: a verdict for every candidate file, and the loaded networks.
#[derive(Debug)]
pub struct DirLoad {
    /// The directory that was read.
    pub dir: PathBuf,
    /// One report per `.conf`, `.conflist` and `.json` file, in load (byte-wise name) order.
    pub files: Vec<FileReport>,
    networks: Vec<NetworkList>,
}

impl DirLoad {
    /// The loaded networks, in load order; names are unique.
    pub fn networks(&self) -> &[NetworkList] {
        &self.networks
    }

    /// The loaded networks, by value.
    pub fn into_networks(self) -> Vec<NetworkList> {
        self.networks
    }

    /// The default network as ocicni picks it when none is configured: the first one loaded.
    pub fn default_network(&self) -> Option<&NetworkList> {
        self.networks.first()
    }

    /// The loaded network called `name`.
    pub fn get(&self, name: &str) -> Option<&NetworkList> {
        self.networks.iter().find(|n| n.name() == name)
    }

    /// The rejected files and why.
    pub fn rejected(&self) -> impl Iterator<Item = (&Path, &Error)> {
        self.files.iter().filter_map(|f| match &f.verdict {
            Verdict::Rejected(e) => Some((f.path.as_path(), e)),
            _ => None,
        })
    }
}

/// Loads every configuration file directly inside `dir` (no recursion).
///
/// Files whose extension is `.conf`, `.conflist` or `.json` are read in byte-wise name order (so
/// `10-a` comes before `5-b`), each with [`load_file`]. The first file to define a network name
/// wins; later files with that name are [`Verdict::Shadowed`]. A file that cannot be read or
/// parsed is [`Verdict::Rejected`] and the load goes on; every candidate file gets a report.
///
/// # Errors
///
/// Only when the directory itself cannot be listed: [`Error::DirNotFound`] if it does not exist,
/// [`Error::ReadDir`] otherwise.
pub fn load_dir(dir: &Path) -> Result<DirLoad> {
    let read_err = |source: io::Error| {
        if source.kind() == io::ErrorKind::NotFound {
            Error::DirNotFound {
                dir: dir.to_owned(),
            }
        } else {
            Error::ReadDir {
                dir: dir.to_owned(),
                source,
            }
        }
    };
    let mut paths = Vec::new();
    for entry in fs::read_dir(dir).map_err(read_err)? {
        let entry = entry.map_err(read_err)?;
        let name = entry.file_name();
        let wanted =
            extension(&name).is_some_and(|ext| EXTENSIONS.iter().any(|e| e.as_bytes() == ext));
        if wanted && !is_dir(&entry.path()) {
            paths.push(entry.path());
        }
    }
    paths.sort_by(|a, b| a.as_os_str().as_bytes().cmp(b.as_os_str().as_bytes()));

    let mut files = Vec::with_capacity(paths.len());
    let mut networks: Vec<NetworkList> = Vec::new();
    for path in paths {
        // Read once: the name of a rejected file comes from these bytes, not a second read.
        let (loaded, bytes) = match read_file(&path) {
            Ok(bytes) => (load_bytes(&path, &bytes), Some(bytes)),
            Err(error) => (Err(error), None),
        };
        let report = match loaded {
            Ok(network) => {
                let mut report = FileReport {
                    path: path.clone(),
                    network: Some(network.name().to_owned()),
                    version: Some(network.version),
                    plugin_types: network
                        .plugin_types()
                        .into_iter()
                        .map(str::to_owned)
                        .collect(),
                    verdict: Verdict::Loaded,
                };
                match networks.iter().find(|n| n.name() == network.name()) {
                    Some(first) => {
                        let by = first.source.clone().unwrap_or_default();
                        tracing::info!(file = %path.display(), winner = %by.display(), "network configuration shadowed");
                        report.verdict = Verdict::Shadowed { by };
                    }
                    None => networks.push(network),
                }
                report
            }
            Err(error) => {
                tracing::warn!(%error, "network configuration rejected");
                FileReport {
                    network: bytes.as_deref().and_then(peek_name),
                    path,
                    version: None,
                    plugin_types: Vec::new(),
                    verdict: Verdict::Rejected(error),
                }
            }
        };
        files.push(report);
    }
    Ok(DirLoad {
        dir: dir.to_owned(),
        files,
        networks,
    })
}

/// The top-level `name` of a file that failed to load, if its JSON has one.
fn peek_name(bytes: &[u8]) -> Option<String> {
    match json_object(bytes).ok()?.get("name")? {
        Value::String(s) => Some(s.clone()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extension_follows_go_filepath_ext() {
        let cases: [(&str, Option<&str>); 6] = [
            ("10-a.conflist", Some("conflist")),
            ("a.conf", Some("conf")),
            (".conf", Some("conf")),
            ("a.conf.bak", Some("bak")),
            ("noext", None),
            ("trailing.", Some("")),
        ];
        for (name, want) in cases {
            assert_eq!(
                extension(OsStr::new(name)),
                want.map(str::as_bytes),
                "{name}"
            );
        }
    }
}

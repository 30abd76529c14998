//! Turning the bytes of one file into a validated [`NetworkList`].

use std::path::PathBuf;
use std::sync::Arc;

use cni_types::{NetworkConfigList, PluginConfig, Version};
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::validate::{effective_version, validate_network_name, validate_plugin_type};

/// Which of the two file formats a network came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Format {
    /// A network configuration list (`.conflist`).
    Conflist,
    /// A single plugin configuration (`.conf`, `.json`), promoted to a list of one plugin that
    /// keeps the plugin's `name` and `cniVersion`.
    Conf,
}

/// A parsed and validated network: the list, its effective version and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct NetworkList {
    /// The configuration list; for a `.conf`, the promoted list. Plugins read from the network's
    /// subdirectory (see [`crate::load_file`]) are appended after the inline ones.
    pub list: NetworkConfigList,
    /// The version the runtime speaks to this network's plugins (see
    /// [`effective_version`](crate::effective_version)).
    pub version: Version,
    /// The file format.
    pub format: Format,
    /// The exact bytes that were parsed (the whole file).
    pub bytes: Arc<[u8]>,
    /// The bytes libcni keeps as the list's `Bytes` and writes, base64-encoded, as `config` in its
    /// result cache. For a `.conflist` these are [`NetworkList::bytes`]. For a `.conf` libcni builds a
    /// new list `{"cniVersion", "name", "plugins": [<the file's object>]}` and marshals it with
    /// Go's encoding/json (keys sorted, compact, numbers as float64); these are those bytes, so a
    /// cache written from them reads the same in Go tools.
    pub cache_config: Arc<[u8]>,
    /// The file the network was read from, if it came from a file.
    pub source: Option<PathBuf>,
    /// Plugin configuration files read from `<dir>/<network name>/`, in the order appended.
    pub plugin_files: Vec<PathBuf>,
}

impl NetworkList {
    /// The network name.
    pub fn name(&self) -> &str {
        &self.list.name
    }

    /// The `type` of every plugin, in order.
    pub fn plugin_types(&self) -> Vec<&str> {
        self.list.plugin_types().collect()
    }
}

/// Parses and validates a network configuration list (the content of a `.conflist`).
///
/// Plugins are taken from `plugins` only; [`crate::load_file`] also reads the network's plugin
/// subdirectory.
///
/// # Errors
///
/// [`Error::Json`] when the bytes are not JSON; [`Error::Invalid`] naming the field when the
/// object does not decode or breaks a rule: a missing or malformed `name`, a `cniVersion` or
/// `cniVersions` entry that does not parse or is unsupported, a missing or empty `plugins`, or a
/// `type` that is not a plain file name.
pub fn parse_conflist(bytes: &[u8]) -> Result<NetworkList> {
    let (list, version) = decode_list(bytes)?;
    finish(list, version, Format::Conflist, bytes, None, Vec::new())
}

/// Parses and validates a single plugin configuration (the content of a `.conf` or `.json`) and
/// promotes it to a list of one plugin, named after the plugin's `name`, with its `cniVersion`.
///
/// # Errors
///
/// [`Error::Json`] when the bytes are not JSON; [`Error::Invalid`] naming the field for a missing
/// `type`, a missing or malformed `name`, an unparsable or unsupported `cniVersion`, or a `type`
/// that is not a plain file name.
pub fn parse_conf(bytes: &[u8]) -> Result<NetworkList> {
    let map = json_object(bytes)?;
    let looks_like_list = map.contains_key("plugins") && !map.contains_key("type");
    let raw = Value::Object(map.clone());
    let plugin = PluginConfig::from_map(map).map_err(|e| {
        let mut err = Error::from(e);
        if looks_like_list && let Error::Invalid { reason, .. } = &mut err {
            reason.push_str(" (this looks like a configuration list: name the file .conflist)");
        }
        err
    })?;
    let name = plugin
        .name
        .clone()
        .ok_or_else(|| Error::invalid("name", "missing"))?;
    validate_network_name(&name)?;
    let cache = cni_types::go_json::marshal(
        &serde_json::json!({
            "cniVersion": plugin.cni_version.clone().unwrap_or_default(),
            "name": name,
            "plugins": [raw],
        }),
        cni_types::go_json::Escaping::Go122,
    );
    let mut list = NetworkConfigList::new(name);
    list.cni_version.clone_from(&plugin.cni_version);
    list.plugins.push(plugin);
    let version = effective_version(&list)?;
    let mut network = finish(list, version, Format::Conf, bytes, None, Vec::new())?;
    network.cache_config = Arc::from(cache.into_bytes());
    Ok(network)
}

pub(crate) fn json_object(bytes: &[u8]) -> Result<Map<String, Value>> {
    match serde_json::from_slice(bytes) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(other) => Err(Error::invalid(
            "",
            format!("expected a JSON object, got {}", json_kind(&other)),
        )),
        Err(source) => Err(Error::Json { path: None, source }),
    }
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Decodes a list and checks what does not depend on its plugins: name and version.
pub(crate) fn decode_list(bytes: &[u8]) -> Result<(NetworkConfigList, Version)> {
    let map = json_object(bytes)?;
    let list = NetworkConfigList::from_map(map)?;
    validate_network_name(&list.name)?;
    let version = effective_version(&list)?;
    Ok((list, version))
}

/// Checks the plugins (inline ones first, then those from files) and builds the network.
pub(crate) fn finish(
    list: NetworkConfigList,
    version: Version,
    format: Format,
    bytes: &[u8],
    source: Option<PathBuf>,
    plugin_files: Vec<PathBuf>,
) -> Result<NetworkList> {
    if list.plugins.is_empty() {
        let reason = if list.to_map().contains_key("plugins") {
            "must not be empty"
        } else {
            "missing"
        };
        return Err(Error::invalid("plugins", reason));
    }
    let inline = list.plugins.len().saturating_sub(plugin_files.len());
    for (i, plugin) in list.plugins.iter().enumerate() {
        // A plugin from a file is reported against that file, an inline one by its index.
        let (prefix, file) = match (i.checked_sub(inline), format) {
            (Some(j), _) => (String::new(), plugin_files.get(j)),
            (None, Format::Conflist) => (format!("plugins[{i}]."), None),
            (None, Format::Conf) => (String::new(), None),
        };
        let check = || -> Result<()> {
            validate_plugin_type(&format!("{prefix}type"), &plugin.plugin_type)?;
            if let Some(ipam_type) = plugin.ipam.as_ref().and_then(|i| i.ipam_type.as_deref()) {
                validate_plugin_type(&format!("{prefix}ipam.type"), ipam_type)?;
            }
            Ok(())
        };
        check().map_err(|e| match file {
            Some(file) => e.in_file(file),
            None => e,
        })?;
    }
    let bytes: Arc<[u8]> = Arc::from(bytes);
    Ok(NetworkList {
        list,
        version,
        format,
        cache_config: Arc::clone(&bytes),
        bytes,
        source,
        plugin_files,
    })
}

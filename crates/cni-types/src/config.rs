//! Network configurations: a plugin configuration and a network configuration list.
//!
//! The types model the keys the CNI spec gives a meaning to and keep every other key in an `extra`
//! map, because a plugin reads its own keys from the configuration the runtime hands it. Decoding
//! and encoding are lossless for unchanged data: each type remembers the order of the keys it was
//! decoded from and the exact JSON value of every modelled key, so parse-then-serialize gives back
//! the same JSON values in the same order, including quirks such as `"disableCheck": "true"` or
//! `"dns": {}`. A field you change is written in its canonical form at its original position; a key
//! you add is written after the original ones.
//!
//! These types decode JSON that is already parsed (`serde_json::Map`); reading files, choosing the
//! effective version and validating names live in `cni-config`.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// A configuration key that is present but does not decode.
///
/// `field` is a path from the decoded object, such as `plugins[1].ipam.type`; it is empty when the
/// problem is the object itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// Where the problem is, e.g. `disableCheck` or `plugins[0].capabilities.portMappings`.
    pub field: String,
    /// What is wrong, lower-case, e.g. `expected a string, got number`.
    pub reason: String,
}

impl ConfigError {
    fn new(field: impl Into<String>, reason: impl Into<String>) -> Self {
        ConfigError {
            field: field.into(),
            reason: reason.into(),
        }
    }

    /// Puts `prefix` in front of the field path (`prefix.field`, or `prefix[..]` joined as is).
    #[must_use]
    pub fn within(mut self, prefix: &str) -> Self {
        self.field = match (self.field.is_empty(), self.field.starts_with('[')) {
            (true, _) => prefix.to_owned(),
            (false, true) => format!("{prefix}{}", self.field),
            (false, false) => format!("{prefix}.{}", self.field),
        };
        self
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            f.write_str(&self.reason)
        } else {
            write!(f, "{}: {}", self.field, self.reason)
        }
    }
}

impl std::error::Error for ConfigError {}

/// The name of a JSON value's kind, for error messages.
pub(crate) fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

type Decoded<T> = Result<T, ConfigError>;

fn expected(what: &str, value: &Value) -> ConfigError {
    ConfigError::new("", format!("expected {what}, got {}", kind(value)))
}

/// `null` decodes as absent, as Go's encoding/json leaves a string empty for it.
fn opt_string(value: &Value) -> Decoded<Option<String>> {
    match value {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s.clone())),
        other => Err(expected("a string", other)),
    }
}

fn string_list(value: &Value) -> Decoded<Vec<String>> {
    match value {
        Value::Null => Ok(Vec::new()),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, item)| match item {
                Value::String(s) => Ok(s.clone()),
                other => Err(expected("a string", other).within(&format!("[{i}]"))),
            })
            .collect(),
        other => Err(expected("an array of strings", other)),
    }
}

/// A boolean flag; some writers put `"true"`/`"false"` strings, which libcni accepts in any case.
fn flag(value: &Value) -> Decoded<bool> {
    match value {
        Value::Bool(b) => Ok(*b),
        Value::String(s) if s.eq_ignore_ascii_case("true") => Ok(true),
        Value::String(s) if s.eq_ignore_ascii_case("false") => Ok(false),
        Value::String(s) => Err(ConfigError::new(
            "",
            format!("expected true or false, got {s:?}"),
        )),
        other => Err(expected("a boolean", other)),
    }
}

fn object(value: &Value) -> Decoded<Option<&Map<String, Value>>> {
    match value {
        Value::Null => Ok(None),
        Value::Object(map) => Ok(Some(map)),
        other => Err(expected("an object", other)),
    }
}

/// Where the keys of a decoded object were and what the modelled ones held, so unchanged data is
/// written back exactly as it came.
#[derive(Debug, Clone, Default, PartialEq)]
struct Layout {
    order: Vec<String>,
    originals: Map<String, Value>,
}

impl Layout {
    /// Splits `map` into the modelled keys (kept as originals) and the rest.
    fn split(map: Map<String, Value>, modelled: &[&str]) -> (Layout, Map<String, Value>) {
        let mut layout = Layout::default();
        let mut extra = Map::new();
        for (key, value) in map {
            layout.order.push(key.clone());
            if modelled.contains(&key.as_str()) {
                layout.originals.insert(key, value);
            } else {
                extra.insert(key, value);
            }
        }
        (layout, extra)
    }

    /// Decodes a modelled key, or `None` when it is absent.
    fn decode<T>(&self, key: &str, decode: impl Fn(&Value) -> Decoded<T>) -> Decoded<Option<T>> {
        self.originals
            .get(key)
            .map(|v| decode(v).map_err(|e| e.within(key)))
            .transpose()
    }

    /// Writes a modelled key: its original JSON if the field still holds what that JSON decodes
    /// to, otherwise `encode`'s form (nothing when `encode` says the field is at its default).
    fn emit<T: PartialEq>(
        &self,
        out: &mut Map<String, Value>,
        key: &str,
        current: &T,
        decode: impl Fn(&Value) -> Decoded<T>,
        encode: impl Fn(&T) -> Option<Value>,
    ) {
        if let Some(original) = self.originals.get(key)
            && decode(original).is_ok_and(|d| d == *current)
        {
            out.insert(key.to_owned(), original.clone());
        } else if let Some(value) = encode(current) {
            out.insert(key.to_owned(), value);
        }
    }

    /// Builds the output object: keys in their original order, then modelled keys that were not
    /// there, then extra keys that were not there. `emit` writes one key (modelled or extra).
    fn write(
        &self,
        modelled: &[&str],
        extra: &Map<String, Value>,
        mut emit: impl FnMut(&str, &mut Map<String, Value>),
    ) -> Map<String, Value> {
        let mut out = Map::new();
        let keys = self
            .order
            .iter()
            .map(String::as_str)
            .chain(modelled.iter().copied())
            .chain(extra.keys().map(String::as_str));
        for key in keys {
            if !out.contains_key(key) {
                emit(key, &mut out);
            }
        }
        out
    }
}

fn string_value(s: &str) -> Value {
    Value::String(s.to_owned())
}

#[expect(clippy::ref_option, reason = "the encoder shape Layout::emit takes")]
fn opt_string_value(s: &Option<String>) -> Option<Value> {
    s.as_deref().map(string_value)
}

fn list_value(items: &[String]) -> Option<Value> {
    (!items.is_empty()).then(|| Value::Array(items.iter().map(|s| string_value(s)).collect()))
}

#[expect(
    clippy::trivially_copy_pass_by_ref,
    reason = "the encoder shape Layout::emit takes"
)]
fn flag_value(b: &bool) -> Option<Value> {
    b.then_some(Value::Bool(true))
}

/// Implements `Serialize`/`Deserialize` through `to_map`/`from_map`.
macro_rules! serde_via_map {
    ($ty:ty) => {
        impl Serialize for $ty {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                self.to_map().serialize(serializer)
            }
        }

        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let map = Map::deserialize(deserializer)?;
                <$ty>::from_map(map).map_err(serde::de::Error::custom)
            }
        }
    };
}

/// The capabilities a plugin declares (`"capabilities": {"portMappings": true}`), in file order.
///
/// Only capabilities set to `true` make the runtime pass the matching capability argument.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Capabilities(Vec<(String, bool)>);

impl Capabilities {
    /// The declared value of `name`, if declared.
    pub fn get(&self, name: &str) -> Option<bool> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, v)| *v)
    }

    /// Whether `name` is declared and `true`.
    pub fn enabled(&self, name: &str) -> bool {
        self.get(name) == Some(true)
    }

    /// Declares `name`, replacing an earlier value in place.
    pub fn insert(&mut self, name: impl Into<String>, value: bool) {
        let name = name.into();
        match self.0.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = value,
            None => self.0.push((name, value)),
        }
    }

    /// Every declaration in file order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, bool)> {
        self.0.iter().map(|(n, v)| (n.as_str(), *v))
    }

    /// Whether nothing is declared.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn decode(value: &Value) -> Decoded<Self> {
        let mut caps = Capabilities::default();
        if let Some(map) = object(value)? {
            for (name, v) in map {
                match v {
                    Value::Bool(b) => caps.insert(name.clone(), *b),
                    other => return Err(expected("a boolean", other).within(name)),
                }
            }
        }
        Ok(caps)
    }

    fn encode(&self) -> Option<Value> {
        (!self.is_empty()).then(|| {
            Value::Object(
                self.0
                    .iter()
                    .map(|(n, v)| (n.clone(), Value::Bool(*v)))
                    .collect(),
            )
        })
    }
}

impl<S: Into<String>> FromIterator<(S, bool)> for Capabilities {
    fn from_iter<I: IntoIterator<Item = (S, bool)>>(iter: I) -> Self {
        let mut caps = Capabilities::default();
        for (name, value) in iter {
            caps.insert(name, value);
        }
        caps
    }
}

/// The `ipam` section of a plugin configuration: which IPAM plugin to delegate to, plus its keys.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Ipam {
    /// The IPAM plugin's file name (JSON `type`).
    pub ipam_type: Option<String>,
    /// Every other key (`subnet`, `ranges`, `routes`, ...), in file order.
    pub extra: Map<String, Value>,
    layout: Layout,
}

impl Ipam {
    const KEYS: &'static [&'static str] = &["type"];

    /// An `ipam` section naming `ipam_type` and nothing else.
    pub fn new(ipam_type: impl Into<String>) -> Self {
        Ipam {
            ipam_type: Some(ipam_type.into()),
            ..Ipam::default()
        }
    }

    /// Decodes an `ipam` object.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] when `type` is present but not a string.
    pub fn from_map(map: Map<String, Value>) -> Result<Self, ConfigError> {
        let (layout, extra) = Layout::split(map, Self::KEYS);
        Ok(Ipam {
            ipam_type: layout.decode("type", opt_string)?.flatten(),
            extra,
            layout,
        })
    }

    /// The JSON object, keys in their original order.
    pub fn to_map(&self) -> Map<String, Value> {
        self.layout.write(Self::KEYS, &self.extra, |key, out| {
            if key == "type" {
                self.layout
                    .emit(out, key, &self.ipam_type, opt_string, opt_string_value);
            } else if let Some(v) = self.extra.get(key) {
                out.insert(key.to_owned(), v.clone());
            }
        })
    }

    fn decode(value: &Value) -> Decoded<Option<Self>> {
        object(value)?
            .map(|m| Ipam::from_map(m.clone()))
            .transpose()
    }
}

serde_via_map!(Ipam);

/// The `dns` section of a plugin configuration (spec "DNS" type).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Dns {
    /// Name server addresses, in priority order.
    pub nameservers: Vec<String>,
    /// The local domain used for short host name lookups.
    pub domain: Option<String>,
    /// Search domains, in priority order.
    pub search: Vec<String>,
    /// Resolver options.
    pub options: Vec<String>,
    /// Keys the spec does not define, in file order.
    pub extra: Map<String, Value>,
    layout: Layout,
}

impl Dns {
    const KEYS: &'static [&'static str] = &["nameservers", "domain", "search", "options"];

    /// Decodes a `dns` object.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] when a known key has the wrong JSON type.
    pub fn from_map(map: Map<String, Value>) -> Result<Self, ConfigError> {
        let (layout, extra) = Layout::split(map, Self::KEYS);
        Ok(Dns {
            nameservers: layout
                .decode("nameservers", string_list)?
                .unwrap_or_default(),
            domain: layout.decode("domain", opt_string)?.flatten(),
            search: layout.decode("search", string_list)?.unwrap_or_default(),
            options: layout.decode("options", string_list)?.unwrap_or_default(),
            extra,
            layout,
        })
    }

    /// The JSON object, keys in their original order.
    pub fn to_map(&self) -> Map<String, Value> {
        self.layout.write(Self::KEYS, &self.extra, |key, out| {
            let l = &self.layout;
            match key {
                "nameservers" => {
                    l.emit(out, key, &self.nameservers, string_list, |v| list_value(v));
                }
                "domain" => l.emit(out, key, &self.domain, opt_string, opt_string_value),
                "search" => l.emit(out, key, &self.search, string_list, |v| list_value(v)),
                "options" => l.emit(out, key, &self.options, string_list, |v| list_value(v)),
                _ => {
                    if let Some(v) = self.extra.get(key) {
                        out.insert(key.to_owned(), v.clone());
                    }
                }
            }
        })
    }

    fn decode(value: &Value) -> Decoded<Option<Self>> {
        object(value)?.map(|m| Dns::from_map(m.clone())).transpose()
    }
}

serde_via_map!(Dns);

/// One plugin configuration object: an entry of a list's `plugins`, or a whole `.conf` file.
#[derive(Debug, Clone, PartialEq)]
pub struct PluginConfig {
    /// The plugin's file name in the plugin directories (JSON `type`).
    pub plugin_type: String,
    /// A `name` written in the object itself; the runtime sends the list's name regardless.
    pub name: Option<String>,
    /// A `cniVersion` written in the object itself; the runtime sends the list's version regardless.
    pub cni_version: Option<String>,
    /// The capabilities the plugin declares.
    pub capabilities: Capabilities,
    /// The `ipam` section, if any.
    pub ipam: Option<Ipam>,
    /// The `dns` section, if any.
    pub dns: Option<Dns>,
    /// Every key this type does not model, in file order; the plugin reads these.
    pub extra: Map<String, Value>,
    layout: Layout,
}

impl PluginConfig {
    const KEYS: &'static [&'static str] =
        &["type", "name", "cniVersion", "capabilities", "ipam", "dns"];

    /// A configuration for the plugin `plugin_type` with no other keys.
    pub fn new(plugin_type: impl Into<String>) -> Self {
        PluginConfig {
            plugin_type: plugin_type.into(),
            name: None,
            cni_version: None,
            capabilities: Capabilities::default(),
            ipam: None,
            dns: None,
            extra: Map::new(),
            layout: Layout::default(),
        }
    }

    /// Decodes a plugin configuration object.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] when `type` is missing or not a string, or another known key has the wrong
    /// JSON type. An empty `type` decodes; whether it names a usable plugin is for validation.
    pub fn from_map(map: Map<String, Value>) -> Result<Self, ConfigError> {
        let (layout, extra) = Layout::split(map, Self::KEYS);
        let plugin_type = layout
            .decode("type", opt_string)?
            .flatten()
            .ok_or_else(|| ConfigError::new("type", "missing"))?;
        Ok(PluginConfig {
            plugin_type,
            name: layout.decode("name", opt_string)?.flatten(),
            cni_version: layout.decode("cniVersion", opt_string)?.flatten(),
            capabilities: layout
                .decode("capabilities", Capabilities::decode)?
                .unwrap_or_default(),
            ipam: layout.decode("ipam", Ipam::decode)?.flatten(),
            dns: layout.decode("dns", Dns::decode)?.flatten(),
            extra,
            layout,
        })
    }

    /// Decodes a plugin configuration from any JSON value.
    ///
    /// # Errors
    ///
    /// As [`PluginConfig::from_map`], and when `value` is not an object.
    pub fn from_value(value: &Value) -> Result<Self, ConfigError> {
        match value {
            Value::Object(map) => PluginConfig::from_map(map.clone()),
            other => Err(expected("an object", other)),
        }
    }

    /// The JSON object the plugin gets before the runtime adds its keys: every original key in its
    /// original position, changed fields in canonical form, added keys at the end.
    pub fn to_map(&self) -> Map<String, Value> {
        self.layout.write(Self::KEYS, &self.extra, |key, out| {
            let l = &self.layout;
            match key {
                "type" => l.emit(
                    out,
                    key,
                    &self.plugin_type,
                    |v| opt_string(v).map(Option::unwrap_or_default),
                    |t| Some(string_value(t)),
                ),
                "name" => l.emit(out, key, &self.name, opt_string, opt_string_value),
                "cniVersion" => l.emit(out, key, &self.cni_version, opt_string, opt_string_value),
                "capabilities" => l.emit(
                    out,
                    key,
                    &self.capabilities,
                    Capabilities::decode,
                    Capabilities::encode,
                ),
                "ipam" => l.emit(out, key, &self.ipam, Ipam::decode, |i| {
                    i.as_ref().map(|i| Value::Object(i.to_map()))
                }),
                "dns" => l.emit(out, key, &self.dns, Dns::decode, |d| {
                    d.as_ref().map(|d| Value::Object(d.to_map()))
                }),
                _ => {
                    if let Some(v) = self.extra.get(key) {
                        out.insert(key.to_owned(), v.clone());
                    }
                }
            }
        })
    }

    /// [`PluginConfig::to_map`] as a JSON value.
    pub fn to_value(&self) -> Value {
        Value::Object(self.to_map())
    }
}

serde_via_map!(PluginConfig);

/// A network configuration list: a named network and the chain of plugins that builds it.
///
/// `name` is required when decoding; every other key may be missing. Which version applies when
/// `cniVersion` and `cniVersions` disagree, and whether the name is well formed, is decided by
/// `cni-config`, not here.
#[derive(Debug, Clone, PartialEq)]
pub struct NetworkConfigList {
    /// The network name.
    pub name: String,
    /// `cniVersion` as written, if present.
    pub cni_version: Option<String>,
    /// `cniVersions` as written (spec 1.1), empty if absent.
    pub cni_versions: Vec<String>,
    /// `disableCheck`: the runtime must not call CHECK for this network.
    pub disable_check: bool,
    /// `disableGC`: the runtime must not call GC for this network (spec 1.1).
    pub disable_gc: bool,
    /// `loadOnlyInlinedPlugins`: the runtime must not add plugin configurations from other
    /// sources (spec 1.1).
    pub load_only_inlined_plugins: bool,
    /// The plugins, in the order they are run for ADD.
    pub plugins: Vec<PluginConfig>,
    /// Every key this type does not model (for example `args`), in file order.
    pub extra: Map<String, Value>,
    layout: Layout,
}

impl NetworkConfigList {
    const KEYS: &'static [&'static str] = &[
        "cniVersion",
        "cniVersions",
        "name",
        "disableCheck",
        "disableGC",
        "loadOnlyInlinedPlugins",
        "plugins",
    ];

    /// A list named `name` with no plugins and no version.
    pub fn new(name: impl Into<String>) -> Self {
        NetworkConfigList {
            name: name.into(),
            cni_version: None,
            cni_versions: Vec::new(),
            disable_check: false,
            disable_gc: false,
            load_only_inlined_plugins: false,
            plugins: Vec::new(),
            extra: Map::new(),
            layout: Layout::default(),
        }
    }

    /// Decodes a network configuration list object.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] naming the field when `name` is missing or not a string, a flag is neither a
    /// boolean nor `"true"`/`"false"`, `plugins` is not an array of objects, or any plugin fails
    /// [`PluginConfig::from_map`] (the field is then `plugins[i].…`).
    pub fn from_map(map: Map<String, Value>) -> Result<Self, ConfigError> {
        let (layout, extra) = Layout::split(map, Self::KEYS);
        let name = match layout.originals.get("name") {
            None => return Err(ConfigError::new("name", "missing")),
            Some(Value::String(s)) => s.clone(),
            Some(other) => return Err(expected("a string", other).within("name")),
        };
        Ok(NetworkConfigList {
            name,
            cni_version: layout.decode("cniVersion", opt_string)?.flatten(),
            cni_versions: layout
                .decode("cniVersions", string_list)?
                .unwrap_or_default(),
            disable_check: layout.decode("disableCheck", flag)?.unwrap_or(false),
            disable_gc: layout.decode("disableGC", flag)?.unwrap_or(false),
            load_only_inlined_plugins: layout
                .decode("loadOnlyInlinedPlugins", flag)?
                .unwrap_or(false),
            plugins: layout
                .decode("plugins", decode_plugins)?
                .unwrap_or_default(),
            extra,
            layout,
        })
    }

    /// Decodes a network configuration list from any JSON value.
    ///
    /// # Errors
    ///
    /// As [`NetworkConfigList::from_map`], and when `value` is not an object.
    pub fn from_value(value: &Value) -> Result<Self, ConfigError> {
        match value {
            Value::Object(map) => NetworkConfigList::from_map(map.clone()),
            other => Err(expected("an object", other)),
        }
    }

    /// The JSON object, keys in their original order (see the module docs).
    pub fn to_map(&self) -> Map<String, Value> {
        self.layout.write(Self::KEYS, &self.extra, |key, out| {
            let l = &self.layout;
            match key {
                "cniVersion" => l.emit(out, key, &self.cni_version, opt_string, opt_string_value),
                "cniVersions" => {
                    l.emit(out, key, &self.cni_versions, string_list, |v| list_value(v));
                }
                "name" => l.emit(
                    out,
                    key,
                    &self.name,
                    |v| opt_string(v).map(Option::unwrap_or_default),
                    |n| Some(string_value(n)),
                ),
                "disableCheck" => l.emit(out, key, &self.disable_check, flag, flag_value),
                "disableGC" => l.emit(out, key, &self.disable_gc, flag, flag_value),
                "loadOnlyInlinedPlugins" => {
                    l.emit(out, key, &self.load_only_inlined_plugins, flag, flag_value);
                }
                "plugins" => l.emit(out, key, &self.plugins, decode_plugins, |p| {
                    (!p.is_empty())
                        .then(|| Value::Array(p.iter().map(PluginConfig::to_value).collect()))
                }),
                _ => {
                    if let Some(v) = self.extra.get(key) {
                        out.insert(key.to_owned(), v.clone());
                    }
                }
            }
        })
    }

    /// [`NetworkConfigList::to_map`] as a JSON value.
    pub fn to_value(&self) -> Value {
        Value::Object(self.to_map())
    }

    /// The `type` of every plugin, in order.
    pub fn plugin_types(&self) -> impl Iterator<Item = &str> {
        self.plugins.iter().map(|p| p.plugin_type.as_str())
    }
}

serde_via_map!(NetworkConfigList);

fn decode_plugins(value: &Value) -> Decoded<Vec<PluginConfig>> {
    match value {
        Value::Null => Ok(Vec::new()),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                PluginConfig::from_value(item).map_err(|e| e.within(&format!("[{i}]")))
            })
            .collect(),
        other => Err(expected("an array of plugin objects", other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn roundtrip(text: &str) -> String {
        let list: NetworkConfigList = serde_json::from_str(text).unwrap();
        serde_json::to_string(&list).unwrap()
    }

    #[test]
    fn unchanged_lists_serialize_to_the_same_json() {
        let cases = [
            r#"{"plugins":[{"z":1,"type":"bridge","a":[1,2]}],"name":"n","cniVersion":"1.0.0"}"#,
            r#"{"name":"n","disableCheck":"TRUE","disableGC":false,"plugins":[]}"#,
            r#"{"name":"n","plugins":[{"type":"p","dns":{},"ipam":{"x":1,"type":"host-local"}}]}"#,
            r#"{"name":"n","plugins":[{"type":"p","capabilities":{"b":true,"a":false},"name":null}]}"#,
            r#"{"name":"n","cniVersions":null,"cniVersion":null}"#,
        ];
        for text in cases {
            assert_eq!(roundtrip(text), text);
        }
    }

    #[test]
    fn changed_fields_keep_their_position_and_new_ones_go_last() {
        let mut list: NetworkConfigList = serde_json::from_str(
            r#"{"cniVersion":"0.4.0","disableCheck":"true","name":"n","args":{"k":"v"}}"#,
        )
        .unwrap();
        list.cni_version = Some("1.0.0".into());
        list.disable_check = false;
        list.disable_gc = true;
        list.extra.insert("new".into(), json!(1));
        assert_eq!(
            serde_json::to_string(&list).unwrap(),
            r#"{"cniVersion":"1.0.0","name":"n","args":{"k":"v"},"disableGC":true,"new":1}"#
        );
    }

    #[test]
    fn decoding_errors_name_the_field() {
        let cases = [
            (json!({}), "name: missing"),
            (json!({"name": 1}), "name: expected a string, got number"),
            (
                json!({"name": "n", "disableGC": "yes"}),
                "disableGC: expected true or false, got \"yes\"",
            ),
            (
                json!({"name": "n", "cniVersions": ["1.0.0", 2]}),
                "cniVersions[1]: expected a string, got number",
            ),
            (
                json!({"name": "n", "plugins": {}}),
                "plugins: expected an array of plugin objects, got object",
            ),
            (
                json!({"name": "n", "plugins": [{"type": "a"}, {"x": 1}]}),
                "plugins[1].type: missing",
            ),
            (
                json!({"name": "n", "plugins": [{"type": "a", "ipam": {"type": 3}}]}),
                "plugins[0].ipam.type: expected a string, got number",
            ),
            (
                json!({"name": "n", "plugins": [{"type": "a", "capabilities": {"x": "y"}}]}),
                "plugins[0].capabilities.x: expected a boolean, got string",
            ),
            (
                json!({"name": "n", "plugins": [{"type": "a", "dns": {"nameservers": "1.1.1.1"}}]}),
                "plugins[0].dns.nameservers: expected an array of strings, got string",
            ),
            (
                json!({"name": "n", "plugins": [7]}),
                "plugins[0]: expected an object, got number",
            ),
        ];
        for (value, want) in cases {
            let err = NetworkConfigList::from_value(&value).unwrap_err();
            assert_eq!(err.to_string(), want, "{value}");
        }
    }

    #[test]
    fn capabilities_keep_order_and_replace_in_place() {
        let mut caps: Capabilities = [("b", true), ("a", false)].into_iter().collect();
        caps.insert("b", false);
        caps.insert("c", true);
        assert_eq!(
            caps.iter().collect::<Vec<_>>(),
            [("b", false), ("a", false), ("c", true)]
        );
        assert!(caps.enabled("c") && !caps.enabled("a") && !caps.enabled("zz"));
    }
}

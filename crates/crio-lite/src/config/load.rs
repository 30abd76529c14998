//! Files, drop-ins, environment and flags layered into one configuration, every mistake named by
//! where it is (file and line, variable, or flag) and by key.
//!
//! Each file is checked on its own against the keys and types of [`Config::default`] (its TOML
//! form is the schema), then merged key by key over the files before it. That is what makes a
//! drop-in override one key of a table and leave the table's other keys alone.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use toml::de::{DeTable, DeValue};

use super::issue::{ConfigIssue, IssueKind, Origin};
use super::keys::{KEYS, key};
use super::suggest::suggest;
use super::{Config, DEFAULT_CONFIG_DIR, DEFAULT_CONFIG_PATH, Overrides, parse_bool};
use crate::error::{Error, Result};

/// Where the configuration comes from: the main file, the drop-in directory, the environment
/// and the flags, in rising priority.
#[derive(Debug, Clone, Default)]
pub struct Loader {
    config: Option<PathBuf>,
    config_dir: Option<PathBuf>,
    overrides: Overrides,
    /// `None`: the process's environment.
    env: Option<BTreeMap<String, OsString>>,
}

/// A loaded configuration and the files it was read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loaded {
    /// The configuration.
    pub config: Config,
    /// The files read, in the order they were applied.
    pub files: Vec<PathBuf>,
}

impl Loader {
    /// A loader for `--config` (`None`: `CONTAINER_CONFIG`, else [`DEFAULT_CONFIG_PATH`] when it
    /// exists; an empty path: no main file), `--config-dir` (likewise with `CONTAINER_CONFIG_DIR`
    /// and [`DEFAULT_CONFIG_DIR`]) and the other flags. It reads the process's environment.
    pub fn new(config: Option<PathBuf>, config_dir: Option<PathBuf>, overrides: Overrides) -> Self {
        Loader {
            config,
            config_dir,
            overrides,
            env: None,
        }
    }

    /// Reads `vars` instead of the process's environment.
    #[must_use]
    pub fn with_env<I, K, V>(mut self, vars: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<OsString>,
    {
        let vars = vars.into_iter().map(|(k, v)| (k.into(), v.into()));
        self.env = Some(vars.collect());
        self
    }

    fn var(&self, name: &str) -> Option<OsString> {
        match &self.env {
            Some(vars) => vars.get(name).cloned(),
            None => std::env::var_os(name),
        }
        .filter(|value| !value.is_empty())
    }

    /// Reads the files again and layers them, the environment and the flags.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] with every mistake found: files or directories that cannot be read,
    /// invalid TOML, unknown keys, values of the wrong type or unusable, in files, variables or
    /// flags.
    pub fn load(&self) -> Result<Loaded> {
        let mut layers = Layers::default();
        let given = |flag: &Option<PathBuf>, var: &str| {
            flag.clone().or_else(|| self.var(var).map(PathBuf::from))
        };
        match given(&self.config, "CONTAINER_CONFIG") {
            Some(path) if path.as_os_str().is_empty() => {}
            Some(path) => layers.add_file(&path),
            None if Path::new(DEFAULT_CONFIG_PATH).exists() => {
                layers.add_file(Path::new(DEFAULT_CONFIG_PATH));
            }
            None => {}
        }
        match given(&self.config_dir, "CONTAINER_CONFIG_DIR") {
            Some(dir) if dir.as_os_str().is_empty() => {}
            Some(dir) => layers.add_dir(&dir),
            None if Path::new(DEFAULT_CONFIG_DIR).exists() => {
                layers.add_dir(Path::new(DEFAULT_CONFIG_DIR));
            }
            None => {}
        }
        layers.add_env(|name| self.var(name));
        let files = layers.files.clone();
        let config = layers.finish(&self.overrides)?;
        Ok(Loaded { config, files })
    }
}

/// The layers read so far, merged, with where each key was last set.
#[derive(Debug)]
pub(crate) struct Layers {
    schema: toml::Table,
    merged: toml::Table,
    set_by: BTreeMap<String, Origin>,
    issues: Vec<ConfigIssue>,
    files: Vec<PathBuf>,
}

impl Default for Layers {
    fn default() -> Self {
        Layers {
            schema: toml::Table::try_from(Config::default()).unwrap_or_default(),
            merged: toml::Table::new(),
            set_by: BTreeMap::new(),
            issues: Vec::new(),
            files: Vec::new(),
        }
    }
}

impl Layers {
    fn issue(&mut self, origin: Origin, key: Option<String>, kind: IssueKind) {
        self.issues.push(ConfigIssue { origin, key, kind });
    }

    /// Every `*.conf` file of `dir` (not hidden ones), in lexical order of their names.
    fn add_dir(&mut self, dir: &Path) {
        let origin = Origin::file(&dir.display().to_string());
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(e) => return self.issue(origin, None, IssueKind::Unreadable(e.to_string())),
        };
        let mut names = Vec::new();
        for entry in entries {
            match entry {
                Ok(entry) => names.push(entry.file_name()),
                Err(e) => self.issue(origin.clone(), None, IssueKind::Unreadable(e.to_string())),
            }
        }
        names.retain(|name| {
            let name = name.as_encoded_bytes();
            name.ends_with(b".conf") && !name.starts_with(b".")
        });
        names.sort();
        for name in names {
            self.add_file(&dir.join(name));
        }
    }

    pub(crate) fn add_file(&mut self, path: &Path) {
        let origin = Origin::file(&path.display().to_string());
        let bytes =
            ocicni::cni_config::read_regular_file(path, ocicni::cni_config::MAX_CONFIG_BYTES);
        let text = match bytes.map(String::from_utf8) {
            Ok(Ok(text)) => text,
            Ok(Err(_)) => {
                return self.issue(origin, None, IssueKind::Unreadable("not UTF-8".to_owned()));
            }
            Err(e) => return self.issue(origin, None, IssueKind::Unreadable(e.to_string())),
        };
        self.files.push(path.to_owned());
        self.add_text(&text, &origin);
    }

    /// One file's text: checked against the schema, then merged key by key.
    pub(crate) fn add_text(&mut self, text: &str, origin: &Origin) {
        let first = self.issues.len();
        self.check_text(text, origin);
        // By line, as an editor shows them.
        self.issues[first..].sort_by_key(|issue| match issue.origin {
            Origin::File { line, .. } => line,
            _ => None,
        });
    }

    fn check_text(&mut self, text: &str, origin: &Origin) {
        let (doc, errors) = DeTable::parse_recoverable(text);
        if !errors.is_empty() {
            for e in errors {
                let origin = e.span().map_or_else(
                    || origin.clone(),
                    |span| origin.at_line(line(text, span.start)),
                );
                self.issue(
                    origin,
                    None,
                    IssueKind::Syntax(e.message().trim().to_owned()),
                );
            }
            return;
        }
        let mut leaves = Vec::new();
        let schema = self.schema.clone();
        self.walk(doc.get_ref(), &schema, "", text, origin, &mut leaves);
        for (path, origin, value) in leaves {
            self.set(&path, value, origin);
        }
    }

    /// Checks `table` against `schema` (the table at `prefix`), collecting the leaves to set.
    fn walk(
        &mut self,
        table: &DeTable<'_>,
        schema: &toml::Table,
        prefix: &str,
        text: &str,
        origin: &Origin,
        leaves: &mut Vec<(String, Origin, toml::Value)>,
    ) {
        for (name, value) in table {
            let path = join(prefix, name.get_ref());
            let at = origin.at_line(line(text, name.span().start));
            let value = value.get_ref();
            let Some(expected) = schema.get(name.get_ref().as_ref()) else {
                let suggestion = suggest(&self.schema, prefix, name.get_ref());
                let table = value.is_table();
                self.issue(at, Some(path), IssueKind::UnknownKey { table, suggestion });
                continue;
            };
            match (expected, value) {
                // A table of tables named by the user: each checked against one handler's keys.
                (toml::Value::Table(_), DeValue::Table(table)) if path == RUNTIMES => {
                    let handler =
                        toml::Table::try_from(super::RuntimeHandler::default()).unwrap_or_default();
                    for (name, entry) in table {
                        let at = origin.at_line(line(text, name.span().start));
                        let entry_path = join(&path, name.get_ref());
                        match entry.get_ref() {
                            DeValue::Table(entry) => {
                                // A table without keys still declares the handler.
                                if entry.is_empty() {
                                    leaves.push((
                                        join(&entry_path, "runtime_type"),
                                        at,
                                        toml::Value::String(String::new()),
                                    ));
                                }
                                self.walk(entry, &handler, &entry_path, text, origin, leaves);
                            }
                            other => self.issue(
                                at,
                                Some(entry_path),
                                IssueKind::WrongType {
                                    expected: "a table",
                                    found: article(other.type_str()),
                                },
                            ),
                        }
                    }
                }
                (toml::Value::Table(sub), DeValue::Table(table)) => {
                    self.walk(table, sub, &path, text, origin, leaves);
                }
                _ => match to_value(expected, value) {
                    Ok(value) => leaves.push((path, at, value)),
                    Err(Mismatch::Type(found)) => {
                        let expected = type_name(expected);
                        self.issue(at, Some(path), IssueKind::WrongType { expected, found });
                    }
                    Err(Mismatch::Value(why)) => {
                        self.issue(at, Some(path), IssueKind::BadValue(why));
                    }
                },
            }
        }
    }

    /// `CONTAINER_*` (and `CRIO_LITE_*`) variables, each converted to its key's type.
    fn add_env(&mut self, var: impl Fn(&str) -> Option<OsString>) {
        for key in KEYS {
            let Some(raw) = var(key.env) else { continue };
            let origin = Origin::Env(key.env.to_owned());
            let path = Some(key.path.to_owned());
            let Ok(text) = raw.into_string() else {
                self.issue(origin, path, IssueKind::BadValue("not UTF-8".to_owned()));
                continue;
            };
            let value = match lookup(&self.schema, key.path) {
                Some(toml::Value::Integer(_)) => text
                    .trim()
                    .parse()
                    .map(toml::Value::Integer)
                    .map_err(|_| format!("{text:?} is not a whole number")),
                Some(toml::Value::Boolean(_)) => parse_bool(&text).map(toml::Value::Boolean),
                // A list, comma-separated as CRI-O reads its list variables.
                Some(toml::Value::Array(_)) => Ok(toml::Value::Array(
                    text.split(',')
                        .map(str::trim)
                        .filter(|item| !item.is_empty())
                        .map(|item| toml::Value::String(item.to_owned()))
                        .collect(),
                )),
                _ => Ok(toml::Value::String(text)),
            };
            match value {
                Ok(value) => self.set(key.path, value, origin),
                Err(why) => self.issue(origin, path, IssueKind::BadValue(why)),
            }
        }
    }

    /// Sets one key if its value, alone, deserializes (a duration parses, a port fits).
    fn set(&mut self, path: &str, value: toml::Value, origin: Origin) {
        let mut alone = toml::Table::new();
        insert(&mut alone, path, value.clone());
        if let Err(e) = toml::Value::Table(alone).try_into::<Config>() {
            let why = e.message().trim().to_owned();
            return self.issue(origin, Some(path.to_owned()), IssueKind::BadValue(why));
        }
        insert(&mut self.merged, path, value);
        self.set_by.insert(path.to_owned(), origin);
    }

    /// The merged layers with the flags over them, checked as a whole.
    pub(crate) fn finish(mut self, flags: &Overrides) -> Result<Config> {
        let merged = std::mem::take(&mut self.merged);
        let mut config = match toml::Value::Table(merged).try_into::<Config>() {
            Ok(config) => config,
            // Every key was deserialized alone before it was merged; a whole that does not is
            // a bug, reported rather than panicked on.
            Err(e) => {
                let why = e.message().trim().to_owned();
                self.issue(Origin::Default, None, IssueKind::BadValue(why));
                return Err(Error::Config {
                    issues: self.issues,
                });
            }
        };
        for path in flags.apply(&mut config) {
            let flag = key(path).map_or(path, |key| key.flag);
            self.set_by
                .insert(path.to_owned(), Origin::Flag(flag.to_owned()));
        }
        for (path, why) in config.problems() {
            let origin = self.set_by.get(path).cloned().unwrap_or(Origin::Default);
            self.issue(origin, Some(path.to_owned()), IssueKind::BadValue(why));
        }
        if self.issues.is_empty() {
            Ok(config)
        } else {
            Err(Error::Config {
                issues: self.issues,
            })
        }
    }
}

/// The table of runtime handlers, whose keys are names the user picks.
const RUNTIMES: &str = "crio.runtime.runtimes";

/// The line (from 1) of a byte offset.
fn line(text: &str, offset: usize) -> usize {
    let offset = offset.min(text.len());
    text.as_bytes()[..offset].split(|&b| b == b'\n').count()
}

pub(super) fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_owned()
    } else {
        format!("{prefix}.{name}")
    }
}

pub(super) fn lookup<'t>(table: &'t toml::Table, path: &str) -> Option<&'t toml::Value> {
    let (table, name) = match path.rsplit_once('.') {
        Some((parent, name)) => (lookup(table, parent)?.as_table()?, name),
        None => (table, path),
    };
    table.get(name)
}

/// Sets `path` in `table`, creating the tables on the way; `path`'s names hold no dots (they are
/// known keys).
fn insert(table: &mut toml::Table, path: &str, value: toml::Value) {
    match path.split_once('.') {
        None => {
            table.insert(path.to_owned(), value);
        }
        Some((name, rest)) => {
            let sub = table
                .entry(name)
                .or_insert_with(|| toml::Value::Table(toml::Table::new()));
            if let toml::Value::Table(sub) = sub {
                insert(sub, rest, value);
            }
        }
    }
}

/// Why a value cannot be the key's.
enum Mismatch {
    /// Another type, named with an article.
    Type(&'static str),
    /// The right type, out of range.
    Value(String),
}

/// The value as the key's type.
fn to_value(
    expected: &toml::Value,
    value: &DeValue<'_>,
) -> std::result::Result<toml::Value, Mismatch> {
    match (expected, value) {
        (toml::Value::String(_), DeValue::String(s)) => Ok(toml::Value::String(s.to_string())),
        (toml::Value::Boolean(_), DeValue::Boolean(b)) => Ok(toml::Value::Boolean(*b)),
        (toml::Value::Integer(_), DeValue::Integer(i)) => {
            i64::from_str_radix(i.as_str(), i.radix())
                .map(toml::Value::Integer)
                .map_err(|_| Mismatch::Value(format!("{i} is out of range")))
        }
        (toml::Value::Array(_), DeValue::Array(items)) => items
            .iter()
            .map(|item| match item.get_ref() {
                DeValue::String(s) => Ok(toml::Value::String(s.to_string())),
                other => Err(Mismatch::Type(match other.type_str() {
                    "integer" => "an array holding an integer",
                    "float" => "an array holding a float",
                    "boolean" => "an array holding a boolean",
                    "datetime" => "an array holding a datetime",
                    "array" => "an array holding an array",
                    _ => "an array holding a table",
                })),
            })
            .collect::<std::result::Result<Vec<_>, _>>()
            .map(toml::Value::Array),
        _ => Err(Mismatch::Type(article(value.type_str()))),
    }
}

/// The schema value's type as the errors say it.
fn type_name(value: &toml::Value) -> &'static str {
    match value {
        toml::Value::String(_) => "a string",
        toml::Value::Integer(_) => "an integer",
        toml::Value::Float(_) => "a float",
        toml::Value::Boolean(_) => "a boolean (true or false)",
        toml::Value::Datetime(_) => "a datetime",
        toml::Value::Array(_) => "an array of strings",
        toml::Value::Table(_) => "a table",
    }
}

fn article(type_str: &'static str) -> &'static str {
    match type_str {
        "string" => "a string",
        "integer" => "an integer",
        "float" => "a float",
        "boolean" => "a boolean",
        "datetime" => "a datetime",
        "array" => "an array",
        _ => "a table",
    }
}

/// Every leaf key path of `table`.
#[cfg(test)]
pub(super) fn paths_of_leaves(table: &toml::Table, prefix: &str, out: &mut Vec<String>) {
    for (name, value) in table {
        let path = join(prefix, name);
        match value {
            toml::Value::Table(sub) => paths_of_leaves(sub, &path, out),
            _ => out.push(path),
        }
    }
}

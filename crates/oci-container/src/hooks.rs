//! OCI hooks as CRI-O injects them: hook configuration files (oci-hooks(5), schema 1.0.0) in
//! hooks directories, matched against each container's spec.
//!
//! The rules are those of containers/common's `pkg/hooks`, which CRI-O uses:
//!
//! - Only files named `*.json` are read; a file in a later directory masks the file of the same
//!   name in an earlier one (directories are given in increasing precedence). A masking file
//!   that is refused still masks.
//! - Hooks are injected in the order of their file names, compared lower-cased.
//! - A hook is injected when *all* the conditions of its `when` hold: `always` is true;
//!   `hasBindMounts` is true and the caller asked for bind mounts; for every `annotations` pair of
//!   patterns some annotation's key and value match them; some `commands` pattern matches the
//!   process's `args[0]`. So `false` in `always` or `hasBindMounts` never holds. Patterns are
//!   regular expressions, unanchored: `^` and `$` anchor them.
//! - `prestart`, deprecated by the runtime spec, is injected as `createRuntime`, which runs at
//!   the same point in the runtime's namespaces.
//!
//! This crate is stricter than containers/common about the files, which are read once and
//! trusted to run as root: only regular files, at most [`MAX_HOOK_FILE_SIZE`] bytes; the hook's
//! `path` must be absolute and an executable regular file; a `when` needs a condition and
//! `stages` a stage; the deprecated 0.1.0 schema is refused. A refused file is reported and the
//! others still load.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use oci_spec::runtime::{Hook, Spec};
use regex::{Regex, RegexBuilder};
use safe_file::Symlinks;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::error::Error;

/// Where hook packages install their configuration; CRI-O's default `hooks_dir`.
pub const DEFAULT_HOOKS_DIR: &str = "/usr/share/containers/oci/hooks.d";

/// Where an administrator overrides them: pass it after [`DEFAULT_HOOKS_DIR`] to use both.
pub const OVERRIDE_HOOKS_DIR: &str = "/etc/containers/oci/hooks.d";

/// The largest hook configuration file read, in bytes.
pub const MAX_HOOK_FILE_SIZE: u64 = 64 * 1024;

/// Compiled patterns are capped so a hostile pattern cannot take the daemon's memory.
const MAX_REGEX_SIZE: usize = 1 << 20;

/// The hooks of a set of hooks directories, in injection order.
#[derive(Debug, Clone, Default)]
pub struct Hooks {
    hooks: Vec<HookFile>,
}

/// One accepted hook configuration file.
#[derive(Debug, Clone)]
struct HookFile {
    path: PathBuf,
    hook: Hook,
    when: When,
    stages: Vec<Stage>,
}

#[derive(Debug, Clone)]
struct When {
    always: Option<bool>,
    annotations: Vec<(Regex, Regex)>,
    commands: Vec<Regex>,
    has_bind_mounts: Option<bool>,
}

/// Where in the spec's hooks a hook goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    CreateRuntime,
    CreateContainer,
    StartContainer,
    Poststart,
    Poststop,
}

impl Hooks {
    /// Loads the hook configuration files of `dirs`, given in increasing precedence (a file in a
    /// later directory masks the file of the same name in an earlier one). A missing directory
    /// is skipped, as CRI-O does.
    ///
    /// # Errors
    ///
    /// Every refused file is an [`Error::Hook`] naming it and the field at fault; a directory
    /// that cannot be listed is an [`Error::Io`]. The other files still load.
    pub fn load(dirs: &[PathBuf]) -> (Hooks, Vec<Error>) {
        let mut errors = Vec::new();
        // file name -> its path in the directory with the highest precedence
        let mut files: BTreeMap<String, PathBuf> = BTreeMap::new();
        for dir in dirs {
            let entries = match std::fs::read_dir(dir) {
                Ok(entries) => entries,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => {
                    errors.push(Error::io("-", "list", dir, e));
                    continue;
                }
            };
            for entry in entries {
                let entry = match entry {
                    Ok(entry) => entry,
                    Err(e) => {
                        errors.push(Error::io("-", "list", dir, e));
                        break;
                    }
                };
                let path = entry.path();
                // `*.json` only, case-sensitive as in containers/common
                if path.extension().is_none_or(|e| e != "json") {
                    continue;
                }
                match entry.file_name().into_string() {
                    Ok(name) => {
                        files.insert(name, path);
                    }
                    Err(_) => errors.push(hook_error(&path, "the file name is not UTF-8")),
                }
            }
        }
        let mut ordered: Vec<(String, PathBuf)> = files.into_iter().collect();
        // oci-hooks(5): sorted by lower-cased name; the name itself breaks ties.
        ordered.sort_by(|(a, _), (b, _)| a.to_lowercase().cmp(&b.to_lowercase()).then(a.cmp(b)));
        let mut hooks = Vec::new();
        for (_, path) in ordered {
            match read(&path) {
                Ok(hook) => hooks.push(hook),
                Err(reason) => errors.push(hook_error(&path, reason)),
            }
        }
        (Hooks { hooks }, errors)
    }

    /// Appends to `spec`'s hooks, stage by stage and in file order, every hook whose `when`
    /// matches `spec`'s `process.args[0]`, `annotations` and `has_bind_mounts`. Returns the
    /// files whose hooks were injected.
    ///
    /// As CRI-O: `annotations` are the container's and its pod's Kubernetes annotations (not
    /// those the runtime daemon adds to the spec), and `has_bind_mounts` is whether the request
    /// asked for bind mounts (those the daemon adds itself do not count). With a
    /// [`ContainerConfig`](crate::ContainerConfig), that is
    /// `hooks.apply(&mut spec, &config.annotations, !config.mounts.is_empty())` after
    /// [`generate`](crate::generate).
    pub fn apply(
        &self,
        spec: &mut Spec,
        annotations: &BTreeMap<String, String>,
        has_bind_mounts: bool,
    ) -> Vec<&Path> {
        let command = spec
            .process()
            .as_ref()
            .and_then(|p| p.args().as_ref())
            .and_then(|args| args.first())
            .cloned();
        let mut injected = Vec::new();
        for file in &self.hooks {
            if !file
                .when
                .matches(command.as_deref(), annotations, has_bind_mounts)
            {
                continue;
            }
            let hooks = spec.hooks_mut().get_or_insert_with(Default::default);
            for stage in &file.stages {
                let list = match stage {
                    Stage::CreateRuntime => hooks.create_runtime_mut(),
                    Stage::CreateContainer => hooks.create_container_mut(),
                    Stage::StartContainer => hooks.start_container_mut(),
                    Stage::Poststart => hooks.poststart_mut(),
                    Stage::Poststop => hooks.poststop_mut(),
                };
                list.get_or_insert_with(Vec::new).push(file.hook.clone());
            }
            injected.push(file.path.as_path());
        }
        injected
    }

    /// The files whose hooks were loaded, in injection order.
    pub fn files(&self) -> impl Iterator<Item = &Path> {
        self.hooks.iter().map(|h| h.path.as_path())
    }

    /// How many hooks were loaded.
    pub fn len(&self) -> usize {
        self.hooks.len()
    }

    /// Whether no hook was loaded.
    pub fn is_empty(&self) -> bool {
        self.hooks.is_empty()
    }
}

impl When {
    fn matches(
        &self,
        command: Option<&str>,
        annotations: &BTreeMap<String, String>,
        has_bind_mounts: bool,
    ) -> bool {
        // Every condition given must hold (containers/common's 1.0.0 matching); `false` in
        // `always` or `hasBindMounts` is a condition that never holds.
        self.always.is_none_or(|a| a)
            && self.has_bind_mounts.is_none_or(|b| b && has_bind_mounts)
            && self.annotations.iter().all(|(key, value)| {
                annotations
                    .iter()
                    .any(|(k, v)| key.is_match(k) && value.is_match(v))
            })
            && (self.commands.is_empty()
                || command.is_some_and(|c| self.commands.iter().any(|r| r.is_match(c))))
    }
}

/// Reads and checks one file; the error is `field: reason`.
fn read(path: &Path) -> Result<HookFile, String> {
    let bytes = safe_file::read_regular(path, MAX_HOOK_FILE_SIZE, Symlinks::Follow)
        .map_err(|e| e.into_io().to_string())?;
    let root: Value = serde_json::from_slice(&bytes).map_err(|e| format!("not JSON: {e}"))?;
    let root = object(&root, "the file")?;
    match field::<String>(root, "", "version")?.as_deref() {
        Some("1.0.0") => {}
        Some(v) => return Err(format!("version: {v:?} is not supported (only \"1.0.0\")")),
        None => return Err("version: missing (the 0.1.0 schema is not supported)".to_owned()),
    }
    let raw_hook = object(root.get("hook").ok_or("hook: missing")?, "hook")?;
    let hook_path: PathBuf = field(raw_hook, "hook", "path")?.ok_or("hook.path: missing")?;
    check_executable(&hook_path)?;
    let env: Option<Vec<String>> = field(raw_hook, "hook", "env")?;
    if let Some(i) = env.iter().flatten().position(|e| !e.contains('=')) {
        return Err(format!("hook.env[{i}]: not NAME=VALUE"));
    }
    let timeout: Option<i64> = field(raw_hook, "hook", "timeout")?;
    if let Some(t) = timeout.filter(|&t| t <= 0) {
        return Err(format!("hook.timeout: {t} is not positive"));
    }
    let mut hook = Hook::default();
    hook.set_path(hook_path)
        .set_args(field(raw_hook, "hook", "args")?)
        .set_env(env)
        .set_timeout(timeout);

    let raw_when = object(root.get("when").ok_or("when: missing")?, "when")?;
    let mut annotations = Vec::new();
    let raw_annotations: Option<BTreeMap<String, String>> = field(raw_when, "when", "annotations")?;
    for (key, value) in raw_annotations.iter().flatten() {
        annotations.push((
            pattern(&format!("when.annotations[{key:?}] (key)"), key)?,
            pattern(&format!("when.annotations[{key:?}]"), value)?,
        ));
    }
    let mut commands = Vec::new();
    let raw_commands: Option<Vec<String>> = field(raw_when, "when", "commands")?;
    for (i, command) in raw_commands.iter().flatten().enumerate() {
        commands.push(pattern(&format!("when.commands[{i}]"), command)?);
    }
    let when = When {
        always: field(raw_when, "when", "always")?,
        annotations,
        commands,
        has_bind_mounts: field(raw_when, "when", "hasBindMounts")?,
    };
    if when.always.is_none()
        && when.has_bind_mounts.is_none()
        && when.annotations.is_empty()
        && when.commands.is_empty()
    {
        return Err(
            "when: no condition (always, annotations, commands or hasBindMounts)".to_owned(),
        );
    }

    let raw_stages: Vec<String> = field(root, "", "stages")?.ok_or("stages: missing")?;
    if raw_stages.is_empty() {
        return Err("stages: empty".to_owned());
    }
    let mut stages = Vec::new();
    for (i, name) in raw_stages.iter().enumerate() {
        let stage = match name.as_str() {
            "prestart" | "createRuntime" => Stage::CreateRuntime,
            "createContainer" => Stage::CreateContainer,
            "startContainer" => Stage::StartContainer,
            "poststart" => Stage::Poststart,
            "poststop" => Stage::Poststop,
            other => return Err(format!("stages[{i}]: unknown stage {other:?}")),
        };
        // `prestart` and `createRuntime` together would run the hook twice.
        if !stages.contains(&stage) {
            stages.push(stage);
        }
    }
    Ok(HookFile {
        path: path.to_owned(),
        hook,
        when,
        stages,
    })
}

/// The runtime runs the hook as root: it must be an absolute path to an executable file.
fn check_executable(path: &Path) -> Result<(), String> {
    if !path.is_absolute() {
        return Err(format!("hook.path: {} is not absolute", path.display()));
    }
    let meta =
        std::fs::metadata(path).map_err(|e| format!("hook.path: {}: {e}", path.display()))?;
    if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
        return Err(format!(
            "hook.path: {} is not an executable regular file",
            path.display()
        ));
    }
    Ok(())
}

fn pattern(field: &str, text: &str) -> Result<Regex, String> {
    RegexBuilder::new(text)
        .size_limit(MAX_REGEX_SIZE)
        .build()
        .map_err(|e| {
            // regex's syntax errors draw the pattern over several lines; the last says why
            let why = e.to_string();
            let why = why.lines().last().unwrap_or_default().trim().to_owned();
            format!("{field}: {text:?} is not a regular expression: {why}")
        })
}

/// The object `value`, or an error naming `what`.
fn object<'a>(value: &'a Value, what: &str) -> Result<&'a Map<String, Value>, String> {
    value
        .as_object()
        .ok_or_else(|| format!("{what}: expected an object"))
}

/// The field `key` of `map` (found at `at`), `None` when missing or `null` as in Go's decoding.
fn field<T: DeserializeOwned>(
    map: &Map<String, Value>,
    at: &str,
    key: &str,
) -> Result<Option<T>, String> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => T::deserialize(value).map(Some).map_err(|e| {
            if at.is_empty() {
                format!("{key}: {e}")
            } else {
                format!("{at}.{key}: {e}")
            }
        }),
    }
}

fn hook_error(path: &Path, reason: impl Into<String>) -> Error {
    Error::Hook {
        path: path.to_owned(),
        reason: reason.into(),
    }
}

#[cfg(test)]
mod tests;

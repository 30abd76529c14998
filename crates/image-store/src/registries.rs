//! Registry resolution: containers-registries.conf(5) version 2, as containers/image reads it.
//!
//! What is read: `unqualified-search-registries`, `short-name-mode`, `[aliases]`, and
//! `[[registry]]` tables with `prefix`, `location`, `insecure`, `blocked`,
//! `mirror-by-digest-only` and `[[registry.mirror]]` (`location`, `insecure`,
//! `pull-from-mirror`). Drop-in files (`registries.conf.d/*.conf`, in name order) override the
//! main file as containers/image's do. Other keys (`credential-helpers`, …) are ignored with a
//! warning; the version 1 format (`[registries.search]`) is refused rather than ignored, since
//! ignoring its `block` list would pull what it blocks.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::reference::Reference;

/// The largest configuration file read.
const FILE_MAX: u64 = 1 << 20;
/// Top-level keys that are read or knowingly ignored.
const KNOWN_KEYS: &[&str] = &[
    "unqualified-search-registries",
    "short-name-mode",
    "aliases",
    "registry",
    "credential-helpers",
    "additional-layer-store-auth-helper",
];

/// What happens to a short name (`busybox`) that no alias completes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ShortNameMode {
    /// One unqualified-search registry: use it. Several: an error, since a daemon has no
    /// terminal to ask on (CRI-O 1.34 and later enforce; this is also the mode when the files
    /// set none).
    #[default]
    Enforcing,
    /// Try every unqualified-search registry, in order.
    Permissive,
    /// As permissive.
    Disabled,
}

/// Whether a mirror is used for pulls by tag, by digest, or both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum PullFromMirror {
    /// Both (`all`, or unset).
    #[default]
    All,
    /// Only pulls by digest (`digest-only`).
    DigestOnly,
    /// Only pulls by tag (`tag-only`).
    TagOnly,
}

/// A place an image can be pulled from: a mirror or the primary location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullSource {
    /// The reference at that place (`mirror.local/library/busybox:latest`).
    pub reference: Reference,
    /// Plain HTTP (or unverified TLS) allowed.
    pub insecure: bool,
    /// A mirror rather than the primary location.
    pub mirror: bool,
}

/// The registries configuration: how short names complete, and where each image is pulled
/// from. [`Registries::default`] has no rules: short names complete to `docker.io`, every image
/// comes from where its name says, over HTTPS.
#[derive(Debug, Clone, Default)]
pub struct Registries {
    search: Vec<String>,
    search_origin: Option<PathBuf>,
    mode: Option<ShortNameMode>,
    aliases: BTreeMap<String, (String, PathBuf)>,
    /// The `[[registry]]` tables by prefix.
    tables: BTreeMap<String, Registry>,
}

#[derive(Debug, Clone)]
struct Registry {
    prefix: String,
    location: String,
    insecure: bool,
    blocked: bool,
    mirror_by_digest_only: bool,
    mirrors: Vec<Mirror>,
    origin: PathBuf,
}

#[derive(Debug, Clone)]
struct Mirror {
    location: String,
    insecure: bool,
    pull_from: PullFromMirror,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct RawFile {
    unqualified_search_registries: Option<Vec<String>>,
    short_name_mode: Option<String>,
    #[serde(default)]
    aliases: BTreeMap<String, String>,
    #[serde(default)]
    registry: Vec<RawRegistry>,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct RawRegistry {
    #[serde(default)]
    prefix: String,
    #[serde(default)]
    location: String,
    #[serde(default)]
    insecure: bool,
    #[serde(default)]
    blocked: bool,
    #[serde(default)]
    mirror_by_digest_only: bool,
    #[serde(default)]
    pull_from_mirror: String,
    #[serde(default)]
    mirror: Vec<RawMirror>,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct RawMirror {
    #[serde(default)]
    location: String,
    #[serde(default)]
    insecure: bool,
    #[serde(default)]
    pull_from_mirror: String,
}

impl Registries {
    /// Reads one registries.conf.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRegistries`] naming the file: unreadable, not TOML, version 1 format,
    /// a `[[registry]]` with neither `prefix` nor `location`, a location with a URL scheme, a
    /// mirror without a location, an unknown `pull-from-mirror` or `short-name-mode`, a
    /// wildcard prefix that is not `*.domain`, conflicting `insecure` or `blocked` settings for
    /// one location, an alias that is not a short name or whose value is not fully qualified.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Registries> {
        Registries::load(path, None::<&Path>)
    }

    /// Reads `path`, then each `*.conf` file of `drop_in_dir` (when given and present) in name
    /// order, each overriding what came before: a `[[registry]]` replaces the one with the same
    /// prefix, `unqualified-search-registries` and `short-name-mode` replace the earlier value,
    /// aliases are merged (an empty value removes one).
    ///
    /// # Errors
    ///
    /// As [`Registries::from_file`], naming the file at fault; [`Error::InvalidRegistries`]
    /// when the directory cannot be read.
    pub fn load(
        path: impl AsRef<Path>,
        drop_in_dir: Option<impl AsRef<Path>>,
    ) -> Result<Registries> {
        let mut registries = Registries::default();
        registries.merge_file(path.as_ref())?;
        if let Some(dir) = drop_in_dir {
            let dir = dir.as_ref();
            let entries = match std::fs::read_dir(dir) {
                Ok(entries) => entries,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(registries),
                Err(e) => return Err(invalid(dir, format!("cannot read the directory: {e}"))),
            };
            let mut files: Vec<PathBuf> = entries
                .filter_map(std::result::Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "conf") && !p.is_dir())
                .collect();
            files.sort();
            for file in files {
                registries.merge_file(&file)?;
            }
        }
        Ok(registries)
    }

    /// Parses one file's TOML text; errors name `path`. Used for files and for tests.
    ///
    /// # Errors
    ///
    /// As [`Registries::from_file`].
    pub fn from_toml(text: &str, path: impl AsRef<Path>) -> Result<Registries> {
        let mut registries = Registries::default();
        registries.merge(text, path.as_ref())?;
        Ok(registries)
    }

    fn merge_file(&mut self, path: &Path) -> Result<()> {
        let bytes = safe_file::read_regular(path, FILE_MAX, safe_file::Symlinks::Follow)
            .map_err(|e| invalid(path, format!("cannot read: {}", e.into_io())))?;
        let text = String::from_utf8(bytes).map_err(|_| invalid(path, "not UTF-8".into()))?;
        self.merge(&text, path)
    }

    fn merge(&mut self, text: &str, path: &Path) -> Result<()> {
        let table: toml::Table = toml::from_str(text).map_err(|e| invalid(path, e.to_string()))?;
        if table.contains_key("registries") {
            return Err(invalid(
                path,
                "the version 1 format ([registries.search], [registries.block]) is not supported; \
                 use unqualified-search-registries and [[registry]] tables"
                    .into(),
            ));
        }
        for key in table.keys().filter(|k| !KNOWN_KEYS.contains(&k.as_str())) {
            tracing::warn!(file = %path.display(), key = %key, "unknown registries.conf key ignored");
        }
        let raw: RawFile = table
            .try_into()
            .map_err(|e: toml::de::Error| invalid(path, e.to_string()))?;
        let mut registries = Vec::new();
        for r in raw.registry {
            registries.push(convert_registry(r).map_err(|e| invalid(path, e))?);
        }
        check_conflicts(&registries).map_err(|e| invalid(path, e))?;
        if let Some(search) = raw.unqualified_search_registries {
            let mut clean = Vec::new();
            for s in search {
                let s = location(&s).map_err(|e| invalid(path, e))?;
                if s.is_empty() || s.contains('/') || Reference::parse(&format!("{s}/x")).is_err() {
                    return Err(invalid(
                        path,
                        format!("unqualified-search-registries entry {s:?} is not a host[:port]"),
                    ));
                }
                clean.push(s);
            }
            self.search = clean;
            self.search_origin = Some(path.to_owned());
        }
        if let Some(mode) = raw.short_name_mode.filter(|m| !m.is_empty()) {
            self.mode = Some(match mode.as_str() {
                "enforcing" => ShortNameMode::Enforcing,
                "permissive" => ShortNameMode::Permissive,
                "disabled" => ShortNameMode::Disabled,
                other => return Err(invalid(path, format!("unknown short-name-mode {other:?}"))),
            });
        }
        for (name, value) in raw.aliases {
            check_alias(&name, &value).map_err(|e| invalid(path, e))?;
            if value.is_empty() {
                self.aliases.remove(&name);
            } else {
                self.aliases.insert(name, (value, path.to_owned()));
            }
        }
        for mut r in registries {
            path.clone_into(&mut r.origin);
            self.tables.insert(r.prefix.clone(), r);
        }
        Ok(())
    }

    /// The short-name mode in force: the files' last `short-name-mode`, else enforcing.
    pub fn short_name_mode(&self) -> ShortNameMode {
        self.mode.unwrap_or_default()
    }

    /// The unqualified-search registries, in order.
    pub fn unqualified_search_registries(&self) -> &[String] {
        &self.search
    }

    /// The fully qualified references to try for what the user typed, in order. A name with
    /// a registry is itself. A short name is its alias if it has one (tag or digest kept);
    /// else, with no unqualified-search registry configured, `docker.io` as
    /// [`Reference::parse`] completes it (Kubernetes' behaviour); else the search registries
    /// as [`ShortNameMode`] says.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidReference`]; [`Error::ShortName`] when enforcing mode meets several
    /// search registries and no alias.
    pub fn candidates(&self, text: &str) -> Result<Vec<Reference>> {
        let (reference, written) = Reference::parse_written(text)?;
        if !written.short {
            return Ok(vec![reference]);
        }
        let alias_key = written.path.as_str();
        if let Some((value, _)) = self.aliases.get(alias_key) {
            return Ok(vec![Reference::parse(&format!(
                "{value}{}",
                written.suffix
            ))?]);
        }
        let complete = |registry: &String| {
            Reference::parse(&format!("{registry}/{}{}", written.path, written.suffix))
        };
        match (self.search.as_slice(), self.short_name_mode()) {
            ([], _) => Ok(vec![reference]),
            ([one], _) => Ok(vec![complete(one)?]),
            (many, ShortNameMode::Enforcing) => Err(Error::ShortName {
                name: text.to_owned(),
                reason: format!(
                    "ambiguous: no alias, and short-name-mode is enforcing with {} unqualified-search registries ({}) in {}; use a fully qualified name or add an alias",
                    many.len(),
                    many.join(", "),
                    self.search_origin
                        .as_deref()
                        .unwrap_or(Path::new("?"))
                        .display()
                ),
            }),
            (many, _) => many.iter().map(complete).collect(),
        }
    }

    /// Where `reference` can be pulled from, in the order to try: the mirrors of the
    /// `[[registry]]` with the longest matching prefix (those that serve this kind of pull),
    /// then its location; with no matching table, the reference itself. A source is insecure
    /// when its table or mirror says so.
    ///
    /// # Errors
    ///
    /// [`Error::Blocked`] when the matching table has `blocked = true`;
    /// [`Error::InvalidReference`] when a rewritten reference is not valid.
    pub fn sources(&self, reference: &Reference) -> Result<Vec<PullSource>> {
        let text = reference.to_string();
        let Some((registry, matched)) = self.find(&text) else {
            return Ok(vec![PullSource {
                reference: reference.clone(),
                insecure: false,
                mirror: false,
            }]);
        };
        if registry.blocked {
            return Err(Error::Blocked {
                image: text,
                path: registry.origin.clone(),
                prefix: registry.prefix.clone(),
            });
        }
        let by_digest = reference.digest().is_some();
        let rewrite = |location: &str| -> Result<Reference> {
            if location.is_empty() {
                Ok(reference.clone())
            } else {
                Reference::parse(&format!("{location}{}", &text[matched..]))
            }
        };
        let mut sources = Vec::new();
        for mirror in &registry.mirrors {
            let used = if registry.mirror_by_digest_only {
                by_digest
            } else {
                match mirror.pull_from {
                    PullFromMirror::All => true,
                    PullFromMirror::DigestOnly => by_digest,
                    PullFromMirror::TagOnly => !by_digest,
                }
            };
            if used {
                sources.push(PullSource {
                    reference: rewrite(&mirror.location)?,
                    insecure: mirror.insecure,
                    mirror: true,
                });
            }
        }
        sources.push(PullSource {
            reference: rewrite(&registry.location)?,
            insecure: registry.insecure,
            mirror: false,
        });
        Ok(sources)
    }

    /// The table with the longest prefix matching `text`, and where the match ends.
    fn find(&self, text: &str) -> Option<(&Registry, usize)> {
        self.tables
            .values()
            .filter_map(|r| prefix_match(text, &r.prefix).map(|end| (r, end)))
            .max_by_key(|(r, _)| r.prefix.len())
    }
}

/// Where `prefix` matches `text` up to, as containers/image's `refMatchingPrefix`: the prefix
/// followed by the end, `/`, `:` or `@`; `*.domain` matching any subdomain of the host.
pub(crate) fn prefix_match(text: &str, prefix: &str) -> Option<usize> {
    if let Some(domain) = prefix.strip_prefix('*') {
        // `.example.com`, found in the host part and followed by a separator.
        let at = text.find(domain)?;
        if text[..at].contains('/') {
            return None;
        }
        let end = at + domain.len();
        return match text.as_bytes().get(end) {
            None | Some(b':' | b'/' | b'@') => Some(end),
            _ => None,
        };
    }
    let rest = text.strip_prefix(prefix)?;
    match rest.as_bytes().first() {
        None | Some(b':' | b'/' | b'@') => Some(prefix.len()),
        _ => None,
    }
}

fn location(input: &str) -> std::result::Result<String, String> {
    let trimmed = input.trim_end_matches('/');
    if trimmed.starts_with("http://") || trimmed.starts_with("https://") {
        return Err(format!("location {input:?}: URL schemes are not supported"));
    }
    Ok(trimmed.to_owned())
}

fn convert_registry(r: RawRegistry) -> std::result::Result<Registry, String> {
    let location = location(&r.location)?;
    let prefix = if r.prefix.is_empty() {
        if location.is_empty() {
            return Err("a [[registry]] has neither prefix nor location".into());
        }
        location.clone()
    } else {
        let prefix = self::location(&r.prefix)?;
        if !prefix.starts_with("*.") && location.is_empty() {
            return Err(format!(
                "[[registry]] prefix {prefix:?}: location is unset and the prefix is not *.domain"
            ));
        }
        prefix
    };
    if prefix.is_empty() {
        return Err(format!(
            "[[registry]] prefix {:?} names no registry",
            r.prefix
        ));
    }
    if prefix.starts_with("*.") && prefix.contains(['/', '@', ':']) {
        return Err(format!(
            "wildcard prefix {prefix:?} must be *.domain, like *.example.com"
        ));
    }
    if prefix.get(1..).is_some_and(|rest| rest.contains('*'))
        || (prefix.starts_with('*') && !prefix.starts_with("*."))
    {
        return Err(format!(
            "prefix {prefix:?}: a wildcard is allowed only as a leading *."
        ));
    }
    if !r.pull_from_mirror.is_empty() {
        return Err(format!(
            "[[registry]] {prefix:?}: pull-from-mirror belongs in [[registry.mirror]]"
        ));
    }
    let mut mirrors = Vec::new();
    for m in r.mirror {
        let mirror_location = self::location(&m.location)?;
        if mirror_location.is_empty() {
            return Err(format!("[[registry]] {prefix:?}: a mirror has no location"));
        }
        if r.mirror_by_digest_only && !m.pull_from_mirror.is_empty() {
            return Err(format!(
                "[[registry]] {prefix:?}: mirror-by-digest-only and pull-from-mirror (mirror {mirror_location:?}) cannot both be set"
            ));
        }
        let pull_from = match m.pull_from_mirror.as_str() {
            "" | "all" => PullFromMirror::All,
            "digest-only" => PullFromMirror::DigestOnly,
            "tag-only" => PullFromMirror::TagOnly,
            other => {
                return Err(format!(
                    "mirror {mirror_location:?}: unknown pull-from-mirror {other:?}"
                ));
            }
        };
        mirrors.push(Mirror {
            location: mirror_location,
            insecure: m.insecure,
            pull_from,
        });
    }
    Ok(Registry {
        prefix,
        location,
        insecure: r.insecure,
        blocked: r.blocked,
        mirror_by_digest_only: r.mirror_by_digest_only,
        mirrors,
        origin: PathBuf::new(),
    })
}

/// Tables sharing a location must agree on `insecure` and `blocked`.
fn check_conflicts(registries: &[Registry]) -> std::result::Result<(), String> {
    for (i, a) in registries.iter().enumerate() {
        let key_a = if a.location.is_empty() {
            &a.prefix
        } else {
            &a.location
        };
        for b in &registries[i + 1..] {
            let key_b = if b.location.is_empty() {
                &b.prefix
            } else {
                &b.location
            };
            if key_a != key_b {
                continue;
            }
            if a.insecure != b.insecure {
                return Err(format!(
                    "location {key_a:?} is defined twice with conflicting insecure settings"
                ));
            }
            if a.blocked != b.blocked {
                return Err(format!(
                    "location {key_a:?} is defined twice with conflicting blocked settings"
                ));
            }
        }
    }
    Ok(())
}

/// An alias maps a short name without tag or digest to a fully qualified name without either.
fn check_alias(name: &str, value: &str) -> std::result::Result<(), String> {
    let (_, written) =
        Reference::parse_written(name).map_err(|e| format!("alias {name:?}: {e}"))?;
    if !written.short {
        return Err(format!("alias {name:?}: not a short name"));
    }
    if !written.name_only {
        return Err(format!("alias {name:?}: must not have a tag or digest"));
    }
    if value.is_empty() {
        return Ok(());
    }
    let (_, written) = Reference::parse_written(value)
        .map_err(|e| format!("alias {name:?} value {value:?}: {e}"))?;
    if written.short {
        return Err(format!(
            "alias {name:?} value {value:?}: not fully qualified (no registry)"
        ));
    }
    if !written.name_only {
        return Err(format!(
            "alias {name:?} value {value:?}: must not have a tag or digest"
        ));
    }
    Ok(())
}

fn invalid(path: &Path, reason: String) -> Error {
    Error::InvalidRegistries {
        path: path.to_owned(),
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_of_slashes_is_refused_not_panicked_on() {
        // Found by props::registries_like_toml_resolves_any_name_without_panicking.
        for prefix in ["/", "//"] {
            let text = format!("[[registry]]\nprefix = \"{prefix}\"\nlocation = \"a\"\n");
            let err = Registries::from_toml(&text, "/r.conf").expect_err(prefix);
            assert!(err.to_string().contains("names no registry"), "{err}");
        }
    }

    const CONF: &str = r#"
unqualified-search-registries = ["quay.io", "docker.io"]
short-name-mode = "permissive"

[aliases]
"pause" = "registry.k8s.io/pause"
"tools/dig" = "quay.io/net/dig"

[[registry]]
prefix = "example.com/foo"
location = "internal.example.com/bar"
insecure = false

[[registry.mirror]]
location = "mirror-0.local/mirror-for-foo"

[[registry.mirror]]
location = "mirror-1.local/mirrors/foo"
insecure = true

[[registry]]
location = "registry.com"

[[registry.mirror]]
location = "by-digest.local"
pull-from-mirror = "digest-only"

[[registry.mirror]]
location = "by-tag.local"
pull-from-mirror = "tag-only"

[[registry]]
location = "registry.com/blocked"
blocked = true

[[registry]]
prefix = "*.wild.example.com"
insecure = true

[[registry]]
prefix = "digests.io"
location = "digests.io"
mirror-by-digest-only = true

[[registry.mirror]]
location = "digest-mirror.local"

[[registry]]
location = "docker.io/library"

[[registry.mirror]]
location = "127.0.0.1:5000/hub"
insecure = true
"#;

    const DIGEST: &str = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

    fn conf() -> Registries {
        Registries::from_toml(CONF, "/etc/containers/registries.conf").unwrap()
    }

    /// `location` for a secure primary, `location (insecure)`, `mirror location`.
    fn describe(sources: &[PullSource]) -> Vec<String> {
        sources
            .iter()
            .map(|s| {
                let mut text = s.reference.to_string();
                if s.mirror {
                    text = format!("mirror {text}");
                }
                if s.insecure {
                    text.push_str(" (insecure)");
                }
                text
            })
            .collect()
    }

    #[test]
    fn sources_are_mirrors_then_the_location() {
        let registries = conf();
        let by_digest = format!("registry.com/app@{DIGEST}");
        let digests_io = format!("digests.io/app@{DIGEST}");
        let cases: Vec<(&str, Vec<String>)> = vec![
            (
                "example.com/foo/image:latest",
                vec![
                    "mirror mirror-0.local/mirror-for-foo/image:latest".into(),
                    "mirror mirror-1.local/mirrors/foo/image:latest (insecure)".into(),
                    "internal.example.com/bar/image:latest".into(),
                ],
            ),
            (
                "example.com/foobar/image",
                vec!["example.com/foobar/image:latest".into()],
            ),
            (
                "example.com/foo:v1",
                vec![
                    "mirror mirror-0.local/mirror-for-foo:v1".into(),
                    "mirror mirror-1.local/mirrors/foo:v1 (insecure)".into(),
                    "internal.example.com/bar:v1".into(),
                ],
            ),
            (
                "registry.com/app:v1",
                vec![
                    "mirror by-tag.local/app:v1".into(),
                    "registry.com/app:v1".into(),
                ],
            ),
            (
                &by_digest,
                vec![
                    format!("mirror by-digest.local/app@{DIGEST}"),
                    by_digest.clone(),
                ],
            ),
            // As containers/image's refMatchingPrefix: ':' ends a prefix, so "registry.com"
            // matches "registry.com:5000" too and the port is carried into the rewrite.
            (
                "registry.com:5000/app",
                vec![
                    "mirror by-tag.local:5000/app:latest".into(),
                    "registry.com:5000/app:latest".into(),
                ],
            ),
            (
                "registry.company.com/app",
                vec!["registry.company.com/app:latest".into()],
            ),
            (
                "a.wild.example.com/x",
                vec!["a.wild.example.com/x:latest (insecure)".into()],
            ),
            (
                "b.a.wild.example.com:5000/x",
                vec!["b.a.wild.example.com:5000/x:latest (insecure)".into()],
            ),
            (
                "wild.example.com/x",
                vec!["wild.example.com/x:latest".into()],
            ),
            ("digests.io/app:v1", vec!["digests.io/app:v1".into()]),
            (
                &digests_io,
                vec![
                    format!("mirror digest-mirror.local/app@{DIGEST}"),
                    digests_io.clone(),
                ],
            ),
            (
                "busybox",
                vec![
                    "mirror 127.0.0.1:5000/hub/busybox:latest (insecure)".into(),
                    "docker.io/library/busybox:latest".into(),
                ],
            ),
            (
                "docker.io/user/app",
                vec!["docker.io/user/app:latest".into()],
            ),
        ];
        for (input, want) in cases {
            let reference = Reference::parse(input).unwrap();
            let got = registries
                .sources(&reference)
                .unwrap_or_else(|e| panic!("{input}: {e}"));
            assert_eq!(describe(&got), want, "{input}");
        }
        let none = Registries::default();
        let reference = Reference::parse("quay.io/a").unwrap();
        assert_eq!(
            describe(&none.sources(&reference).unwrap()),
            ["quay.io/a:latest"]
        );
    }

    #[test]
    fn blocked_names_the_rule() {
        let registries = conf();
        for input in ["registry.com/blocked", "registry.com/blocked/x:v1"] {
            match registries.sources(&Reference::parse(input).unwrap()) {
                Err(Error::Blocked { path, prefix, .. }) => {
                    assert_eq!(path, Path::new("/etc/containers/registries.conf"));
                    assert_eq!(prefix, "registry.com/blocked");
                }
                other => panic!("{input}: {other:?}"),
            }
        }
        assert!(
            registries
                .sources(&Reference::parse("registry.com/blockedx").unwrap())
                .is_ok()
        );
    }

    #[test]
    fn short_names_resolve_by_alias_then_search_registries() {
        let registries = conf();
        let cases: [(&str, &[&str]); 6] = [
            ("pause", &["registry.k8s.io/pause:latest"]),
            ("pause:3.10", &["registry.k8s.io/pause:3.10"]),
            ("tools/dig:1", &["quay.io/net/dig:1"]),
            (
                "busybox",
                &["quay.io/busybox:latest", "docker.io/library/busybox:latest"],
            ),
            (
                "user/app:v2",
                &["quay.io/user/app:v2", "docker.io/user/app:v2"],
            ),
            ("localhost/app", &["localhost/app:latest"]),
        ];
        for (input, want) in cases {
            let got: Vec<String> = registries
                .candidates(input)
                .unwrap_or_else(|e| panic!("{input}: {e}"))
                .iter()
                .map(ToString::to_string)
                .collect();
            assert_eq!(got, want, "{input}");
        }
        // No configuration: Kubernetes' docker.io.
        let got = Registries::default().candidates("busybox").unwrap();
        assert_eq!(got[0].to_string(), "docker.io/library/busybox:latest");
    }

    #[test]
    fn enforcing_mode_refuses_ambiguous_short_names() {
        let text = "unqualified-search-registries = [\"quay.io\", \"docker.io\"]\n";
        for mode in ["", "short-name-mode = \"enforcing\"\n"] {
            let registries = Registries::from_toml(&format!("{text}{mode}"), "/r.conf").unwrap();
            assert_eq!(registries.short_name_mode(), ShortNameMode::Enforcing);
            match registries.candidates("busybox") {
                Err(Error::ShortName { name, reason }) => {
                    assert_eq!(name, "busybox");
                    assert!(reason.contains("ambiguous"), "{reason}");
                    assert!(reason.contains("quay.io, docker.io"), "{reason}");
                }
                other => panic!("{mode}: {other:?}"),
            }
            // A qualified name is never ambiguous.
            assert_eq!(registries.candidates("quay.io/x").unwrap().len(), 1);
        }
        let one = Registries::from_toml("unqualified-search-registries = [\"quay.io\"]", "/r.conf")
            .unwrap();
        assert_eq!(
            one.candidates("busybox").unwrap()[0].to_string(),
            "quay.io/busybox:latest"
        );
        let disabled =
            Registries::from_toml(&format!("{text}short-name-mode = \"disabled\""), "/r.conf")
                .unwrap();
        assert_eq!(disabled.candidates("busybox").unwrap().len(), 2);
    }

    #[test]
    fn prefixes_match_at_separators_and_wildcards_at_subdomains() {
        let cases = [
            ("example.com/foo/x:latest", "example.com/foo", Some(15)),
            ("example.com/foo:latest", "example.com/foo", Some(15)),
            ("example.com/foo@sha256:x", "example.com/foo", Some(15)),
            ("example.com/foobar:latest", "example.com/foo", None),
            ("example.com", "example.com", Some(11)),
            ("a.example.com/x", "*.example.com", Some(13)),
            ("a.example.com:5000/x", "*.example.com", Some(13)),
            ("example.com/x", "*.example.com", None),
            ("a.example.community/x", "*.example.com", None),
            ("host/a.example.com", "*.example.com", None),
        ];
        for (text, prefix, want) in cases {
            assert_eq!(prefix_match(text, prefix), want, "{text} {prefix}");
        }
    }

    #[test]
    fn invalid_files_say_why() {
        let cases = [
            (
                "[registries.search]\nregistries = [\"quay.io\"]",
                "version 1 format",
            ),
            (
                "[[registry]]\ninsecure = true",
                "neither prefix nor location",
            ),
            (
                "[[registry]]\nlocation = \"https://quay.io\"",
                "URL schemes are not supported",
            ),
            ("[[registry]]\nprefix = \"quay.io\"", "location is unset"),
            ("[[registry]]\nprefix = \"*.quay.io/x\"", "must be *.domain"),
            (
                "[[registry]]\nprefix = \"quay.*.io\"\nlocation = \"q\"",
                "only as a leading",
            ),
            (
                "[[registry]]\nlocation = \"q.io\"\n[[registry.mirror]]\ninsecure = true",
                "a mirror has no location",
            ),
            (
                "[[registry]]\nlocation = \"q.io\"\n[[registry.mirror]]\nlocation = \"m\"\npull-from-mirror = \"sometimes\"",
                "unknown pull-from-mirror",
            ),
            (
                "[[registry]]\nlocation = \"q.io\"\nmirror-by-digest-only = true\n[[registry.mirror]]\nlocation = \"m\"\npull-from-mirror = \"all\"",
                "cannot both be set",
            ),
            (
                "[[registry]]\nlocation = \"q.io\"\npull-from-mirror = \"all\"",
                "belongs in [[registry.mirror]]",
            ),
            (
                "[[registry]]\nlocation = \"q.io\"\nbogus = 1",
                "unknown field `bogus`",
            ),
            (
                "[[registry]]\nprefix = \"a.io\"\nlocation = \"q.io\"\ninsecure = true\n[[registry]]\nprefix = \"b.io\"\nlocation = \"q.io\"",
                "conflicting insecure",
            ),
            ("short-name-mode = \"strict\"", "unknown short-name-mode"),
            (
                "unqualified-search-registries = [\"quay.io/ns\"]",
                "is not a host[:port]",
            ),
            (
                "[aliases]\n\"quay.io/x\" = \"quay.io/x\"",
                "not a short name",
            ),
            ("[aliases]\n\"x:1\" = \"quay.io/x\"", "must not have a tag"),
            ("[aliases]\n\"x\" = \"y/x\"", "not fully qualified"),
            ("[aliases]\n\"x\" = \"quay.io/x:1\"", "must not have a tag"),
            ("not = toml = at all", "expected"),
        ];
        for (text, want) in cases {
            match Registries::from_toml(text, "/r.conf") {
                Err(Error::InvalidRegistries { path, reason }) => {
                    assert_eq!(path, Path::new("/r.conf"));
                    assert!(reason.contains(want), "{text}: {reason}");
                }
                other => panic!("{text}: {other:?}"),
            }
        }
        // Keys for other programs are ignored, not refused.
        assert!(
            Registries::from_toml("credential-helpers = [\"x\"]\nsomething-new = 1", "/r.conf")
                .is_ok()
        );
    }
}

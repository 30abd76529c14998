//! Credentials files in the containers-auth.json(5) format (Podman's `auth.json`, CRI-O's
//! `global_auth_file`, Docker's `config.json` `auths` section).
//!
//! ```json
//! {"auths": {"registry.example.com": {"auth": "dXNlcjpwYXNz"},
//!            "quay.io/team/app": {"auth": "..."}}}
//! ```
//!
//! A key is a registry, optionally with a repository or namespace; the most specific key that
//! covers the image wins. Keys written the old Docker way (`https://index.docker.io/v1/`) count
//! for their host.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde::Deserialize;

use crate::auth::Auth;
use crate::error::{Error, Result};
use crate::reference::Reference;

/// The largest credentials file read.
const AUTH_FILE_MAX: u64 = 1 << 20;

/// Credentials read from a containers-auth.json file.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct AuthFile {
    path: PathBuf,
    /// Normalised key (`host[/path]`) to its credentials.
    entries: BTreeMap<String, Auth>,
}

impl std::fmt::Debug for AuthFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthFile")
            .field("path", &self.path)
            .field("keys", &self.entries.keys().collect::<Vec<_>>())
            .finish()
    }
}

#[derive(Deserialize)]
struct FileJson {
    #[serde(default)]
    auths: BTreeMap<String, EntryJson>,
}

#[derive(Deserialize)]
struct EntryJson {
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
    #[serde(default, rename = "identitytoken")]
    identity_token: Option<String>,
}

impl AuthFile {
    /// Reads the file at `path` (a regular file of at most 1 MiB).
    ///
    /// # Errors
    ///
    /// [`Error::AuthFile`] naming the file when it cannot be read, is not JSON of this format, or
    /// an entry's `auth` is not base64 of `user:password`.
    pub fn from_file(path: &Path) -> Result<AuthFile> {
        let bytes = safe_file::read_regular(path, AUTH_FILE_MAX, safe_file::Symlinks::Follow)
            .map_err(|e| Error::AuthFile {
                path: path.to_owned(),
                reason: e.to_string(),
            })?;
        AuthFile::parse(path, &bytes)
    }

    /// Parses the contents of a file; `path` names it in errors.
    ///
    /// # Errors
    ///
    /// As [`AuthFile::from_file`].
    pub fn parse(path: &Path, bytes: &[u8]) -> Result<AuthFile> {
        let bad = |reason: String| Error::AuthFile {
            path: path.to_owned(),
            reason,
        };
        let json: FileJson =
            serde_json::from_slice(bytes).map_err(|e| bad(format!("not an auth file: {e}")))?;
        let mut entries = BTreeMap::new();
        for (key, entry) in json.auths {
            let auth = entry_auth(&entry).map_err(|reason| bad(format!("{key:?}: {reason}")))?;
            let Some(auth) = auth else { continue };
            entries.insert(normalise_key(&key), auth);
        }
        Ok(AuthFile {
            path: path.to_owned(),
            entries,
        })
    }

    /// The file it was read from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The credentials for `reference`: the entry of its repository, else of the closest
    /// namespace above it, else of its registry; `None` when no key covers it.
    pub fn lookup(&self, reference: &Reference) -> Option<&Auth> {
        let mut key = reference.name();
        loop {
            if let Some(auth) = self.entries.get(&key) {
                return Some(auth);
            }
            let (parent, _) = key.rsplit_once('/')?;
            key = parent.to_owned();
        }
    }
}

/// An entry's credentials; `None` for an entry with none (Docker leaves such entries when a
/// credential helper holds the secret).
fn entry_auth(entry: &EntryJson) -> std::result::Result<Option<Auth>, String> {
    if entry
        .identity_token
        .as_deref()
        .is_some_and(|t| !t.is_empty())
    {
        return Err("identity tokens (OAuth2 refresh tokens) are not supported yet".into());
    }
    if let Some(encoded) = entry.auth.as_deref().filter(|a| !a.is_empty()) {
        return decode_basic(encoded).map(Some);
    }
    match (&entry.username, &entry.password) {
        (Some(username), Some(password)) if !username.is_empty() => Ok(Some(Auth::Basic {
            username: username.clone(),
            password: password.clone(),
        })),
        _ => Ok(None),
    }
}

/// Decodes `auth`: base64 of `user:password`, as Docker writes it and CRI's AuthConfig carries it.
///
/// # Errors
///
/// When it is not base64, not UTF-8, or has no `:`.
pub(crate) fn decode_basic(encoded: &str) -> std::result::Result<Auth, String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .map_err(|e| format!("auth is not base64: {e}"))?;
    let text = String::from_utf8(bytes).map_err(|_| "auth is not UTF-8".to_owned())?;
    let (username, password) = text
        .split_once(':')
        .ok_or_else(|| "auth is not \"user:password\"".to_owned())?;
    if username.is_empty() {
        return Err("auth has an empty user name".into());
    }
    Ok(Auth::Basic {
        username: username.to_owned(),
        password: password.to_owned(),
    })
}

/// `https://index.docker.io/v1/` is `docker.io`; `registry-1.docker.io/x` is `docker.io/x`; a
/// trailing `/` goes.
fn normalise_key(key: &str) -> String {
    let (legacy, rest) = match key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
    {
        Some(rest) => (true, rest),
        None => (false, key),
    };
    // A key with a scheme is Docker's old form: only its host counts.
    let rest = if legacy {
        rest.split('/').next().unwrap_or(rest)
    } else {
        rest.trim_end_matches('/')
    };
    let (host, path) = match rest.split_once('/') {
        Some((host, path)) => (host, Some(path)),
        None => (rest, None),
    };
    let host = match host {
        "index.docker.io" | "registry-1.docker.io" => "docker.io",
        other => other,
    };
    match path {
        Some(path) => format!("{host}/{path}"),
        None => host.to_owned(),
    }
}

impl Auth {
    /// The credentials CRI's AuthConfig `auth` field carries: base64 of `user:password`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidAuth`] when it is not base64 of `user:password`.
    pub fn from_base64_basic(encoded: &str) -> Result<Auth> {
        decode_basic(encoded).map_err(|reason| Error::InvalidAuth { reason })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basic(user: &str, pass: &str) -> Auth {
        Auth::Basic {
            username: user.into(),
            password: pass.into(),
        }
    }

    fn b64(text: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(text)
    }

    fn file(json: &str) -> AuthFile {
        AuthFile::parse(Path::new("/etc/auth.json"), json.as_bytes()).expect("parses")
    }

    #[test]
    fn the_most_specific_key_wins() {
        let json = format!(
            r#"{{"auths": {{
                "quay.io": {{"auth": "{}"}},
                "quay.io/team": {{"auth": "{}"}},
                "quay.io/team/app": {{"auth": "{}"}},
                "https://index.docker.io/v1/": {{"auth": "{}"}},
                "127.0.0.1:5000/": {{"username": "local", "password": "pw"}}
            }}}}"#,
            b64("reg:1"),
            b64("team:2"),
            b64("app:3"),
            b64("hub:4:with:colons"),
        );
        let auths = file(&json);
        let cases = [
            ("quay.io/team/app:v1", Some(basic("app", "3"))),
            ("quay.io/team/other", Some(basic("team", "2"))),
            ("quay.io/teams/app", Some(basic("reg", "1"))),
            ("busybox", Some(basic("hub", "4:with:colons"))),
            ("127.0.0.1:5000/x/y", Some(basic("local", "pw"))),
            ("ghcr.io/a/b", None),
        ];
        for (reference, want) in cases {
            let reference = Reference::parse(reference).expect("reference");
            assert_eq!(auths.lookup(&reference), want.as_ref(), "{reference}");
        }
    }

    #[test]
    fn bad_entries_name_the_file_and_key() {
        for (json, needle) in [
            (
                r#"{"auths": {"r.io": {"auth": "%%%"}}}"#,
                "\"r.io\": auth is not base64",
            ),
            (
                &format!(
                    r#"{{"auths": {{"r.io": {{"auth": "{}"}}}}}}"#,
                    b64("nocolon")
                ),
                "auth is not \"user:password\"",
            ),
            (
                r#"{"auths": {"r.io": {"identitytoken": "tok"}}}"#,
                "identity tokens",
            ),
            ("[1, 2]", "not an auth file"),
        ] {
            let err = AuthFile::parse(Path::new("/etc/auth.json"), json.as_bytes())
                .expect_err(json)
                .to_string();
            assert!(err.starts_with("/etc/auth.json: "), "{err}");
            assert!(err.contains(needle), "{err}");
        }
    }

    #[test]
    fn entries_without_credentials_are_skipped() {
        let auths = file(r#"{"auths": {"r.io": {}}, "credHelpers": {"x.io": "helper"}}"#);
        assert_eq!(
            auths.lookup(&Reference::parse("r.io/a").expect("reference")),
            None
        );
    }

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fifo = dir.path().join("auth.json");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600))
            .expect("mkfifo");
        let err = AuthFile::from_file(&fifo).expect_err("a FIFO is not a file");
        assert!(err.to_string().contains("auth.json"), "{err}");
    }
}

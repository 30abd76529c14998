//! Image references, parsed and normalised as Kubernetes and containers/image do.

use std::fmt;
use std::str::FromStr;

use crate::digest::{Digest, is_sha256_hex};
use crate::error::{Error, Result};

/// The registry of names without one.
pub const DEFAULT_REGISTRY: &str = "docker.io";
/// The tag of references with neither tag nor digest.
pub const DEFAULT_TAG: &str = "latest";
/// The longest name (registry and repository) a reference may have, as distribution allows.
const NAME_MAX: usize = 255;

/// A fully qualified image reference: registry, repository, and a tag, a digest or both.
///
/// [`Reference::parse`] normalises short names the way kubelet, CRI-O and Docker do:
/// `busybox` is `docker.io/library/busybox:latest`, `user/app` is `docker.io/user/app:latest`,
/// `index.docker.io` is `docker.io`. A first component with a `.` or a `:`, or `localhost`, is a
/// registry (`registry.k8s.io/pause:3.10`, `127.0.0.1:5000/app`). Its [`Display`](fmt::Display)
/// is the normalised form, which parses back to the same reference.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Reference {
    registry: String,
    repository: String,
    tag: Option<String>,
    digest: Option<Digest>,
}

impl Reference {
    /// Parses and normalises a reference.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidReference`] saying what is wrong: an empty name, an upper-case repository,
    /// a bad tag or digest, a bare 64-hex-digit string (an image id, not a name), a name longer
    /// than 255 characters.
    pub fn parse(text: &str) -> Result<Reference> {
        Reference::parse_written(text).map(|(reference, _)| reference)
    }

    /// Whether `text` names no registry: `busybox`, `user/app:v1`, as opposed to
    /// `quay.io/app` or `localhost/app`. Short names are the ones registries.conf's aliases and
    /// unqualified-search registries complete; [`Reference::parse`] completes them with
    /// `docker.io`. False for text that is not a reference.
    pub fn is_short_name(text: &str) -> bool {
        Reference::parse_written(text).is_ok_and(|(_, written)| written.short)
    }

    /// Parses and normalises `text`, also telling how it was written.
    pub(crate) fn parse_written(text: &str) -> Result<(Reference, Written)> {
        let invalid = |reason| Error::InvalidReference {
            reference: text.to_owned(),
            reason,
        };
        if text.is_empty() {
            return Err(invalid("empty reference"));
        }
        if is_sha256_hex(text) {
            return Err(invalid(
                "a 64-digit hex string is an image id, not a repository name",
            ));
        }
        let (name_tag, digest) = match text.split_once('@') {
            Some((name_tag, digest)) => (
                name_tag,
                Some(Digest::parse(digest).map_err(|_| invalid("invalid digest"))?),
            ),
            None => (text, None),
        };
        let last_slash = name_tag.rfind('/').map_or(0, |i| i + 1);
        let (name, tag) = match name_tag[last_slash..].rfind(':') {
            Some(i) => {
                let at = last_slash + i;
                (&name_tag[..at], Some(&name_tag[at + 1..]))
            }
            None => (name_tag, None),
        };
        if let Some(tag) = tag
            && !valid_tag(tag)
        {
            return Err(invalid("invalid tag"));
        }
        let (registry, remainder, short) = match split_registry(name) {
            Some((registry, remainder)) => (registry, remainder, false),
            None => (DEFAULT_REGISTRY, name, true),
        };
        if !valid_registry(registry) {
            return Err(invalid("invalid registry host"));
        }
        let registry = if registry == "index.docker.io" {
            DEFAULT_REGISTRY
        } else {
            registry
        };
        if remainder.bytes().any(|b| b.is_ascii_uppercase()) {
            return Err(invalid("repository name must be lower-case"));
        }
        if remainder.is_empty() || !remainder.split('/').all(valid_path_component) {
            return Err(invalid("invalid repository name"));
        }
        let repository = if registry == DEFAULT_REGISTRY && !remainder.contains('/') {
            format!("library/{remainder}")
        } else {
            remainder.to_owned()
        };
        if registry.len() + 1 + repository.len() > NAME_MAX {
            return Err(invalid("name longer than 255 characters"));
        }
        let written = Written {
            short,
            name_only: tag.is_none() && digest.is_none(),
            path: remainder.to_owned(),
            suffix: name_tag[name.len()..].to_owned() + &text[name_tag.len()..],
        };
        let tag = match (tag, &digest) {
            (Some(tag), _) => Some(tag.to_owned()),
            (None, Some(_)) => None,
            (None, None) => Some(DEFAULT_TAG.to_owned()),
        };
        let reference = Reference {
            registry: registry.to_owned(),
            repository,
            tag,
            digest,
        };
        Ok((reference, written))
    }

    /// The registry host, with its port if any: `docker.io`, `127.0.0.1:5000`.
    pub fn registry(&self) -> &str {
        &self.registry
    }

    /// The repository within the registry: `library/busybox`.
    pub fn repository(&self) -> &str {
        &self.repository
    }

    /// The tag, if the reference has one.
    pub fn tag(&self) -> Option<&str> {
        self.tag.as_deref()
    }

    /// The digest, if the reference pins one.
    pub fn digest(&self) -> Option<&Digest> {
        self.digest.as_ref()
    }

    /// Registry and repository: `docker.io/library/busybox`.
    pub fn name(&self) -> String {
        format!("{}/{}", self.registry, self.repository)
    }

    /// The same repository pinned to `digest`, without a tag: `docker.io/library/busybox@sha256:…`,
    /// an image's repo digest.
    pub fn with_digest(&self, digest: Digest) -> Reference {
        Reference {
            registry: self.registry.clone(),
            repository: self.repository.clone(),
            tag: None,
            digest: Some(digest),
        }
    }

    /// The reference as oci-client spells it.
    pub(crate) fn to_client(&self) -> oci_client::Reference {
        match (&self.tag, &self.digest) {
            (_, Some(digest)) => oci_client::Reference::with_digest(
                self.registry.clone(),
                self.repository.clone(),
                digest.to_string(),
            ),
            (Some(tag), None) => oci_client::Reference::with_tag(
                self.registry.clone(),
                self.repository.clone(),
                tag.clone(),
            ),
            (None, None) => oci_client::Reference::with_tag(
                self.registry.clone(),
                self.repository.clone(),
                DEFAULT_TAG.to_owned(),
            ),
        }
    }
}

/// How a reference was written, before [`Reference::parse`] completed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Written {
    /// No registry was given (`busybox`, `user/app`).
    pub(crate) short: bool,
    /// Neither a tag nor a digest was given.
    pub(crate) name_only: bool,
    /// The repository as written, before `library/` was added: `busybox`.
    pub(crate) path: String,
    /// The tag and digest as written, with their `:` and `@`: `:1.36`, `@sha256:…`, or empty.
    pub(crate) suffix: String,
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.registry, self.repository)?;
        if let Some(tag) = &self.tag {
            write!(f, ":{tag}")?;
        }
        if let Some(digest) = &self.digest {
            write!(f, "@{digest}")?;
        }
        Ok(())
    }
}

impl FromStr for Reference {
    type Err = Error;

    fn from_str(s: &str) -> Result<Reference> {
        Reference::parse(s)
    }
}

/// Splits `name` into registry and repository path as Docker's `splitDockerDomain` does;
/// `None` when its first component is not a registry (a short name).
fn split_registry(name: &str) -> Option<(&str, &str)> {
    match name.split_once('/') {
        Some((first, rest))
            if first.contains(['.', ':'])
                || first == "localhost"
                || first.bytes().any(|b| b.is_ascii_uppercase()) =>
        {
            Some((first, rest))
        }
        _ => None,
    }
}

/// `[\w][\w.-]{0,127}`
fn valid_tag(tag: &str) -> bool {
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let bytes = tag.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 128
        && word(bytes[0])
        && bytes[1..]
            .iter()
            .all(|&b| word(b) || b == b'.' || b == b'-')
}

/// `host[:port]`, the host a DNS name, an IPv4 address or a bracketed IPv6 address.
fn valid_registry(registry: &str) -> bool {
    let (host, port) = if let Some(rest) = registry.strip_prefix('[') {
        let Some((v6, after)) = rest.split_once(']') else {
            return false;
        };
        if v6.is_empty() || !v6.bytes().all(|b| b.is_ascii_hexdigit() || b == b':') {
            return false;
        }
        match after {
            "" => return true,
            _ => match after.strip_prefix(':') {
                Some(port) => ("x", Some(port)),
                None => return false,
            },
        }
    } else {
        match registry.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (registry, None),
        }
    };
    if let Some(port) = port
        && (port.is_empty() || port.len() > 5 || !port.bytes().all(|b| b.is_ascii_digit()))
    {
        return false;
    }
    !host.is_empty() && host.split('.').all(valid_host_component)
}

/// `[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]`
fn valid_host_component(c: &str) -> bool {
    let bytes = c.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && bytes
                    .iter()
                    .all(|&b| b.is_ascii_alphanumeric() || b == b'-')
        }
        _ => false,
    }
}

/// `[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*`
fn valid_path_component(c: &str) -> bool {
    let bytes = c.as_bytes();
    let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let (Some(first), Some(last)) = (bytes.first(), bytes.last()) else {
        return false;
    };
    if !alnum(first) || !alnum(last) {
        return false;
    }
    let mut i = 0;
    while i < bytes.len() {
        if alnum(&bytes[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && !alnum(&bytes[i]) {
            i += 1;
        }
        let sep = &c[start..i];
        let ok = matches!(sep, "." | "_" | "__") || sep.bytes().all(|b| b == b'-');
        if !ok {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names_normalise_as_kubernetes_does() {
        let cases = [
            ("busybox", "docker.io/library/busybox:latest"),
            ("busybox:1.36", "docker.io/library/busybox:1.36"),
            ("user/app", "docker.io/user/app:latest"),
            ("docker.io/busybox", "docker.io/library/busybox:latest"),
            (
                "index.docker.io/library/busybox",
                "docker.io/library/busybox:latest",
            ),
            ("registry.k8s.io/pause:3.10", "registry.k8s.io/pause:3.10"),
            ("localhost/app", "localhost/app:latest"),
            ("localhost:5000/a/b/c:v1", "localhost:5000/a/b/c:v1"),
            ("127.0.0.1:35111/img", "127.0.0.1:35111/img:latest"),
            ("[::1]:5000/img", "[::1]:5000/img:latest"),
            ("Example.com/img", "Example.com/img:latest"),
            ("a_b__c-d---e/x", "docker.io/a_b__c-d---e/x:latest"),
            (
                "quay.io/a/b@sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
                "quay.io/a/b@sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            ),
            (
                "b:t@sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
                "docker.io/library/b:t@sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            ),
        ];
        for (input, want) in cases {
            let r = Reference::parse(input).unwrap_or_else(|e| panic!("{input}: {e}"));
            assert_eq!(r.to_string(), want, "{input}");
        }
    }

    #[test]
    fn how_a_reference_was_written_is_kept() {
        let cases = [
            ("busybox", true, true, "busybox", ""),
            ("busybox:1.36", true, false, "busybox", ":1.36"),
            (
                "user/app@sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
                true,
                false,
                "user/app",
                "@sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            ),
            ("docker.io", true, true, "docker.io", ""),
            ("docker.io/busybox", false, true, "busybox", ""),
            ("localhost/app:v1", false, false, "app", ":v1"),
            (
                "quay.io/a/b:t@sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
                false,
                false,
                "a/b",
                ":t@sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            ),
        ];
        for (input, short, name_only, path, suffix) in cases {
            let (_, written) = Reference::parse_written(input).unwrap();
            assert_eq!(
                written,
                Written {
                    short,
                    name_only,
                    path: path.to_owned(),
                    suffix: suffix.to_owned()
                },
                "{input}"
            );
            assert_eq!(Reference::is_short_name(input), short, "{input}");
        }
        assert!(!Reference::is_short_name("Not A Reference"));
    }

    #[test]
    fn parts_are_kept_apart() {
        let r = Reference::parse("localhost:5000/a/b:v1").unwrap();
        assert_eq!(r.registry(), "localhost:5000");
        assert_eq!(r.repository(), "a/b");
        assert_eq!(r.tag(), Some("v1"));
        assert_eq!(r.digest(), None);
        assert_eq!(r.name(), "localhost:5000/a/b");
    }

    #[test]
    fn bad_references_say_why() {
        let cases = [
            ("", "empty reference"),
            ("Busybox", "repository name must be lower-case"),
            (
                "docker.io/Library/busybox",
                "repository name must be lower-case",
            ),
            ("busybox:", "invalid tag"),
            ("busybox:-x", "invalid tag"),
            ("busybox@sha256:abc", "invalid digest"),
            ("a//b", "invalid repository name"),
            ("a/", "invalid repository name"),
            ("-a", "invalid repository name"),
            ("a..b", "invalid repository name"),
            ("bad_host.com:x/y", "invalid registry host"),
            ("bad_host.com/y", "invalid registry host"),
            ("host.com:99999999/y", "invalid registry host"),
            (
                "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
                "a 64-digit hex string is an image id, not a repository name",
            ),
        ];
        for (input, reason) in cases {
            match Reference::parse(input) {
                Err(Error::InvalidReference { reason: got, .. }) => {
                    assert_eq!(got, reason, "{input:?}");
                }
                other => panic!("{input:?}: {other:?}"),
            }
        }
        let long = format!("example.com/{}", "a".repeat(250));
        assert!(Reference::parse(&long).is_err());
    }
}

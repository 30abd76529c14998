//! The rules a configuration must follow beyond decoding: names, plugin types, versions.

use cni_types::NetworkConfigList;
use cni_types::version::{SUPPORTED_VERSIONS, Version, pick_from_cni_versions};

use crate::error::{Error, Result};

/// Whether `name` is a network name the spec allows: an ASCII letter or digit, then any number of
/// ASCII letters, digits, `_`, `.` and `-` (libcni checks `^[a-zA-Z0-9][a-zA-Z0-9_.\-]*$`). libcni
/// holds container ids to the same rule; cni-exec checks them with this function too.
pub fn is_valid_network_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_alphanumeric())
        && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// The longest network name, in bytes: a file name's limit (`NAME_MAX`). The network's plugin
/// directory (`<conf dir>/<name>/`) and its cache entries are files named after it.
const MAX_NETWORK_NAME_BYTES: usize = 255;

/// Checks a network name with [`is_valid_network_name`], and that it is no longer than a file
/// name can be (255 bytes), which the spec does not say but every file named after the network
/// needs.
///
/// # Errors
///
/// [`Error::Invalid`] on field `name` saying what is wrong.
pub fn validate_network_name(name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::invalid("name", "must not be empty"));
    }
    if name.len() > MAX_NETWORK_NAME_BYTES {
        // Said before the read of `<dir>/<name>/` fails with a bare "file name too long".
        return Err(Error::invalid(
            "name",
            format!(
                "{} bytes, longer than a file name can be ({MAX_NETWORK_NAME_BYTES}); the \
                 network's plugin directory and cache entries are files named after it",
                name.len()
            ),
        ));
    }
    if !is_valid_network_name(name) {
        return Err(Error::invalid(
            "name",
            format!(
                "must start with a letter or digit and contain only letters, digits, '_', '.' and '-', got {name:?}"
            ),
        ));
    }
    Ok(())
}

/// Whether `plugin_type` can only name a file directly inside a plugin directory: not empty, not
/// `.` or `..`, and without `/`, `\` or NUL (the spec forbids path separators in `type`).
pub fn is_plain_file_name(plugin_type: &str) -> bool {
    !plugin_type.is_empty()
        && plugin_type != "."
        && plugin_type != ".."
        && !plugin_type.contains(['/', '\\', '\0'])
}

/// Checks that the plugin type at `field` is a plain file name.
pub(crate) fn validate_plugin_type(field: &str, plugin_type: &str) -> Result<()> {
    if is_plain_file_name(plugin_type) {
        Ok(())
    } else {
        Err(Error::invalid(
            field,
            format!("must be a plain file name, got {plugin_type:?}"),
        ))
    }
}

/// The version the runtime speaks to this network's plugins.
///
/// - A `cniVersion` that is present and not empty must parse. Every `cniVersions` entry must parse.
/// - The answer is the highest supported version among `cniVersions` and `cniVersion` (libcni
///   sorts both together and skips versions newer than it implements).
/// - With neither key (or an empty `cniVersion`), the version is 0.1.0, as libcni and the plugins'
///   version decoder assume.
///
/// # Errors
///
/// [`Error::Invalid`] on `cniVersion` or `cniVersions[i]` when an entry does not parse, and when no
/// given version is supported.
pub fn effective_version(list: &NetworkConfigList) -> Result<Version> {
    let mut candidates = Vec::new();
    for (i, text) in list.cni_versions.iter().enumerate() {
        let v: Version = text.parse().map_err(|e: cni_types::Error| {
            Error::invalid(format!("cniVersions[{i}]"), e.to_string())
        })?;
        candidates.push(v);
    }
    let declared = match list.cni_version.as_deref() {
        None | Some("") => None,
        Some(text) => Some(
            text.parse::<Version>()
                .map_err(|e| Error::invalid("cniVersion", e.to_string()))?,
        ),
    };
    let best = pick_from_cni_versions(&list.cni_versions)
        .into_iter()
        .chain(declared.filter(|v| v.is_supported()))
        .max();
    match (best, declared) {
        (Some(v), _) => Ok(v),
        (None, Some(v)) => Err(Error::invalid(
            "cniVersion",
            format!(
                "unsupported CNI version {v} (supported: {})",
                supported_list()
            ),
        )),
        (None, None) if candidates.is_empty() => Ok(Version::V0_1_0),
        (None, None) => Err(Error::invalid(
            "cniVersions",
            format!(
                "no supported CNI version in {:?} (supported: {})",
                list.cni_versions,
                supported_list()
            ),
        )),
    }
}

fn supported_list() -> String {
    SUPPORTED_VERSIONS
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn network_names_follow_the_spec() {
        for good in ["a", "0", "crio", "cni-podman0", "my_net.v2", "A-b_c.d"] {
            assert!(is_valid_network_name(good), "{good}");
        }
        for bad in ["", "-a", "_a", ".a", "a b", "a/b", "bridge@123", "é", "a\n"] {
            assert!(!is_valid_network_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn plugin_types_are_plain_file_names() {
        for good in ["bridge", "host-local", "foo..bar", ".hidden", "win-overlay"] {
            assert!(is_plain_file_name(good), "{good}");
        }
        for bad in [
            "",
            ".",
            "..",
            "../evil",
            "/usr/bin/true",
            "a/b",
            "a\\b",
            "a\0",
        ] {
            assert!(!is_plain_file_name(bad), "{bad:?}");
        }
    }
}

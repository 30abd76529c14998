//! Network sysctls of a pod's namespace (`net.ipv4.ip_unprivileged_port_start` and friends).
//!
//! Only `net.*` keys are namespaced by a network namespace, so only those are accepted. A key is
//! written in dotted form (`net.ipv4.conf.all.forwarding`) or, when a component holds a dot such as
//! a VLAN interface name, in slash form (`net/ipv4/conf/eth0.100/forwarding`), as Kubernetes
//! allows. It becomes a path under `/proc/sys`, so every component is checked: nothing empty, no
//! `.` or `..`, only the characters sysctl names use. The value is written from a thread inside
//! the namespace, where `/proc/sys/net` shows that namespace's settings.

use std::io::Write as _;
use std::path::{Path, PathBuf};

/// Why a sysctl cannot be applied to a network namespace.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SysctlError {
    /// The key is not a network sysctl, or not a well-formed one.
    #[error("sysctl {key:?}: {reason}")]
    InvalidKey {
        /// The key as given.
        key: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The value cannot be written as one.
    #[error("sysctl {key:?}: value {value:?}: {reason}")]
    InvalidValue {
        /// The key.
        key: String,
        /// The value as given.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The kernel refused the write (unknown in a network namespace, value out of range, ...).
    #[error("sysctl {key:?} = {value:?} in {}: {source}", netns.display())]
    Write {
        /// The key.
        key: String,
        /// The value.
        value: String,
        /// The namespace.
        netns: PathBuf,
        /// The kernel's answer.
        #[source]
        source: std::io::Error,
    },
    /// The namespace could not be entered.
    #[error(transparent)]
    Netns(#[from] super::Error),
}

/// The path under `/proc/sys` for a network sysctl key.
///
/// # Errors
///
/// [`SysctlError::InvalidKey`] for anything but a well-formed `net.*` key.
pub fn sysctl_path(key: &str) -> Result<PathBuf, SysctlError> {
    let invalid = |reason: &str| SysctlError::InvalidKey {
        key: key.to_owned(),
        reason: reason.to_owned(),
    };
    if key.len() > 255 {
        return Err(invalid("longer than 255 bytes"));
    }
    let parts: Vec<&str> = if key.contains('/') {
        key.split('/').collect()
    } else {
        key.split('.').collect()
    };
    if parts.first() != Some(&"net") {
        return Err(invalid(
            "only network sysctls (net.*) can be set for a pod sandbox; other namespaced \
             sysctls need namespaces crio-lite does not make",
        ));
    }
    if parts.len() < 2 {
        return Err(invalid("names no setting under net"));
    }
    let mut path = PathBuf::from("net");
    for part in &parts[1..] {
        if part.is_empty() || *part == "." || *part == ".." {
            return Err(invalid("has an empty, '.' or '..' component"));
        }
        if !part
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'@' | b':'))
        {
            return Err(invalid("has a character sysctl names do not use"));
        }
        path.push(part);
    }
    Ok(path)
}

/// Checks a key and its value without applying them.
///
/// # Errors
///
/// As [`sysctl_path`], and [`SysctlError::InvalidValue`] for an empty value, one with control
/// characters, or one over 4 KiB.
pub fn check_sysctl(key: &str, value: &str) -> Result<PathBuf, SysctlError> {
    let path = sysctl_path(key)?;
    let invalid = |reason: &str| SysctlError::InvalidValue {
        key: key.to_owned(),
        value: value.to_owned(),
        reason: reason.to_owned(),
    };
    if value.is_empty() {
        return Err(invalid("empty"));
    }
    if value.len() > 4096 {
        return Err(invalid("longer than 4096 bytes"));
    }
    if value.chars().any(char::is_control) {
        return Err(invalid("has control characters"));
    }
    Ok(path)
}

/// Writes each sysctl inside the network namespace at `netns`, in order, stopping at the first
/// the kernel refuses.
///
/// # Errors
///
/// As [`check_sysctl`] for each pair (checked before anything is written), [`SysctlError::Netns`]
/// when the namespace cannot be entered, [`SysctlError::Write`] naming the key the kernel refused.
pub fn set_sysctls(netns: &Path, sysctls: &[(String, String)]) -> Result<(), SysctlError> {
    let writes = checked(sysctls)?;
    let netns_path = netns.to_owned();
    super::with_netns(netns, move || write_all(&netns_path, writes))?
}

/// [`set_sysctls`] without blocking the async executor: the writes run on the namespace's own
/// short-lived thread, as [`super::with_netns_async`] runs any work.
///
/// # Errors
///
/// As [`set_sysctls`].
pub async fn set_sysctls_async(
    netns: impl Into<PathBuf>,
    sysctls: Vec<(String, String)>,
) -> Result<(), SysctlError> {
    let writes = checked(&sysctls)?;
    let netns = netns.into();
    let netns_path = netns.clone();
    super::with_netns_async(netns, move || write_all(&netns_path, writes)).await?
}

/// Every pair with its path under `/proc/sys`, all checked before anything is written.
fn checked(sysctls: &[(String, String)]) -> Result<Vec<(String, String, PathBuf)>, SysctlError> {
    sysctls
        .iter()
        .map(|(key, value)| Ok((key.clone(), value.clone(), check_sysctl(key, value)?)))
        .collect()
}

/// The writes, in order, from a thread inside the namespace.
fn write_all(netns: &Path, writes: Vec<(String, String, PathBuf)>) -> Result<(), SysctlError> {
    for (key, value, path) in writes {
        std::fs::OpenOptions::new()
            .write(true)
            .open(Path::new("/proc/sys").join(path))
            .and_then(|mut file| file.write_all(value.as_bytes()))
            .map_err(|source| SysctlError::Write {
                key,
                value,
                netns: netns.to_owned(),
                source,
            })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_become_paths_under_net_only() {
        for (key, path) in [
            (
                "net.ipv4.ip_unprivileged_port_start",
                "net/ipv4/ip_unprivileged_port_start",
            ),
            (
                "net/ipv4/conf/eth0.100/forwarding",
                "net/ipv4/conf/eth0.100/forwarding",
            ),
            (
                "net.ipv6.conf.all.disable_ipv6",
                "net/ipv6/conf/all/disable_ipv6",
            ),
        ] {
            assert_eq!(sysctl_path(key).unwrap(), PathBuf::from(path), "{key}");
        }
        for (key, why) in [
            ("kernel.shmmax", "only network sysctls"),
            ("net", "names no setting"),
            ("net..ipv4", "empty"),
            ("net/../../etc/passwd", "'..'"),
            ("net/ipv4/./x", "'.'"),
            ("net.ipv4.a b", "character"),
            ("net/ipv4/x\n", "character"),
        ] {
            let err = sysctl_path(key).unwrap_err().to_string();
            assert!(err.contains(why), "{key}: {err}");
        }
    }

    #[test]
    fn values_are_one_line() {
        assert!(check_sysctl("net.ipv4.ip_forward", "1").is_ok());
        assert!(check_sysctl("net.ipv4.ip_forward", "").is_err());
        assert!(check_sysctl("net.ipv4.ip_forward", "1\nnet.x=2").is_err());
    }
}

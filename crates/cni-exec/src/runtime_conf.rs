//! What the runtime says about one attachment: [`RuntimeConf`], and [`GcAttachment`] for GC.
//!
//! The validation rules are libcni's (`pkg/utils`): they keep plugins from getting nonsense and keep
//! cache file names inside the cache directory.

use cni_types::CapabilityArgs;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The longest interface name Linux accepts (`IFNAMSIZ` minus the NUL).
pub const MAX_IF_NAME_LEN: usize = 15;

/// The arguments of one attachment of a container to a network, besides the configuration.
///
/// The counterpart of libcni's `RuntimeConf`. The fields become `CNI_CONTAINERID`, `CNI_NETNS`,
/// `CNI_IFNAME` and `CNI_ARGS`; the capability arguments go into `runtimeConfig` for the plugins that
/// declare them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RuntimeConf {
    /// The container (pod sandbox) id; see [`validate_container_id`].
    pub container_id: String,
    /// Path of the container's network namespace, e.g. `/run/netns/pod1`. Required for ADD and CHECK;
    /// may be empty for DEL, when the namespace is already gone.
    pub netns: String,
    /// The interface name inside the container, e.g. `eth0`; see [`validate_if_name`].
    pub if_name: String,
    /// `CNI_ARGS` as key/value pairs, in order (`K8S_POD_NAME=x;K8S_POD_NAMESPACE=y`).
    pub args: Vec<(String, String)>,
    /// Capability arguments, passed in `runtimeConfig` to the plugins that declare them.
    pub capability_args: CapabilityArgs,
}

impl RuntimeConf {
    /// A configuration with a container id, a namespace path and an interface name.
    pub fn new(
        container_id: impl Into<String>,
        netns: impl Into<String>,
        if_name: impl Into<String>,
    ) -> Self {
        RuntimeConf {
            container_id: container_id.into(),
            netns: netns.into(),
            if_name: if_name.into(),
            ..RuntimeConf::default()
        }
    }

    /// Adds a `CNI_ARGS` pair.
    #[must_use]
    pub fn with_arg(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.args.push((key.into(), value.into()));
        self
    }

    /// Sets the capability arguments.
    #[must_use]
    pub fn with_capability_args(mut self, args: CapabilityArgs) -> Self {
        self.capability_args = args;
        self
    }

    /// Checks every field; `netns_required` is true for ADD and CHECK.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRuntimeConf`] naming the first field that breaks a rule.
    pub fn validate(&self, netns_required: bool) -> Result<()> {
        validate_container_id(&self.container_id)?;
        validate_if_name(&self.if_name)?;
        if netns_required && self.netns.is_empty() {
            return Err(invalid("netns", "", "required for ADD and CHECK"));
        }
        if self.netns.contains('\0') {
            return Err(invalid("netns", &self.netns, "contains NUL"));
        }
        for (key, value) in &self.args {
            let reason = if key.is_empty() {
                Some("empty key")
            } else if key.contains(['=', ';']) {
                Some("key contains '=' or ';'")
            } else if value.contains(';') {
                Some("value contains ';'")
            } else if key.contains('\0') || value.contains('\0') {
                Some("contains NUL")
            } else {
                None
            };
            if let Some(reason) = reason {
                return Err(invalid("args", &format!("{key}={value}"), reason));
            }
        }
        Ok(())
    }

    /// `CNI_ARGS`: the pairs as `k=v` joined with `;`.
    pub fn cni_args(&self) -> String {
        let pairs: Vec<String> = self.args.iter().map(|(k, v)| format!("{k}={v}")).collect();
        pairs.join(";")
    }
}

/// An attachment that is still in use, as the runtime tells GC (`cni.dev/valid-attachments`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct GcAttachment {
    /// The container id.
    #[serde(rename = "containerID")]
    pub container_id: String,
    /// The interface name.
    #[serde(rename = "ifname")]
    pub if_name: String,
}

impl GcAttachment {
    /// An attachment of `container_id` on `if_name`.
    pub fn new(container_id: impl Into<String>, if_name: impl Into<String>) -> Self {
        GcAttachment {
            container_id: container_id.into(),
            if_name: if_name.into(),
        }
    }
}

fn invalid(field: &'static str, value: &str, reason: impl Into<String>) -> Error {
    Error::InvalidRuntimeConf {
        field,
        value: value.to_owned(),
        reason: reason.into(),
    }
}

/// Checks a container id by the workspace's one rule ([`node_primitives::id`]): libcni's
/// `^[a-zA-Z0-9][a-zA-Z0-9_.\-]*$`, at most 128 bytes (the id names cache files).
///
/// # Errors
///
/// [`Error::InvalidRuntimeConf`] for field `container_id`.
pub fn validate_container_id(id: &str) -> Result<()> {
    match node_primitives::id::check_container_id(id) {
        None => Ok(()),
        Some(node_primitives::IdProblem::Empty) => Err(invalid("container_id", id, "missing")),
        Some(problem) => Err(invalid("container_id", id, problem.reason())),
    }
}

/// Checks a network name as the configuration loader does ([`cni_config::validate_network_name`]):
/// not empty, `^[a-zA-Z0-9][a-zA-Z0-9_.\-]*$` as libcni checks, at most a file name long.
///
/// # Errors
///
/// [`Error::InvalidRuntimeConf`] for field `network`.
pub fn validate_network_name(name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(invalid("network", name, "missing"));
    }
    // One rule for network names, the one the configuration loader applies (characters and
    // length), so a name that loads is a name that runs.
    cni_config::validate_network_name(name).map_err(|e| match e {
        cni_config::Error::Invalid { reason, .. } => invalid("network", name, reason),
        other => invalid("network", name, other.to_string()),
    })
}

/// Checks an interface name as libcni does: not empty, at most 15 bytes, not `.` or `..`, no `/`,
/// `:` or whitespace.
///
/// # Errors
///
/// [`Error::InvalidRuntimeConf`] for field `if_name`.
pub fn validate_if_name(name: &str) -> Result<()> {
    let reason = if name.is_empty() {
        "missing".to_owned()
    } else if name.len() > MAX_IF_NAME_LEN {
        format!("longer than {MAX_IF_NAME_LEN} bytes")
    } else if name == "." || name == ".." {
        "must not be . or ..".to_owned()
    } else if name
        .chars()
        .any(|c| c == '/' || c == ':' || c.is_whitespace())
    {
        "contains '/', ':' or whitespace".to_owned()
    } else if name.contains('\0') {
        "contains NUL".to_owned()
    } else {
        return Ok(());
    };
    Err(invalid("if_name", name, reason))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The executor and the loader hold network names to one rule: a name the loader refuses
    /// (here for its length) is refused before a plugin runs too.
    #[test]
    fn network_names_follow_the_loaders_rule() {
        assert!(validate_network_name("net-1.a_b").is_ok());
        for bad in ["", "-net", "a\\b", "a b", &"n".repeat(256)] {
            assert_eq!(
                validate_network_name(bad).is_ok(),
                cni_config::validate_network_name(bad).is_ok(),
                "{bad:?}"
            );
            assert!(validate_network_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn container_ids_follow_libcni() {
        for good in ["a", "abc123", "A_b.c-d", "0"] {
            assert!(validate_container_id(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "-a",
            "_a",
            ".a",
            "a/b",
            "a b",
            "../x",
            "a\0",
            &"a".repeat(129),
        ] {
            assert!(validate_container_id(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn if_names_follow_libcni() {
        for good in ["eth0", "a", "123456789012345", "net1.100"] {
            assert!(validate_if_name(good).is_ok(), "{good}");
        }
        let cases = [
            ("", "missing"),
            ("1234567890123456", "longer than 15 bytes"),
            (".", "must not be . or .."),
            ("..", "must not be . or .."),
            ("a/b", "contains '/', ':' or whitespace"),
            ("a:b", "contains '/', ':' or whitespace"),
            ("a b", "contains '/', ':' or whitespace"),
            ("a\tb", "contains '/', ':' or whitespace"),
        ];
        for (name, reason) in cases {
            let err = validate_if_name(name).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!("invalid runtime config: if_name {name:?}: {reason}")
            );
        }
    }

    #[test]
    fn runtime_conf_names_the_field() {
        let rt = RuntimeConf::new("c1", "", "eth0");
        assert!(rt.validate(false).is_ok());
        let err = rt.validate(true).unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"invalid runtime config: netns "": required for ADD and CHECK"#
        );
        let err = RuntimeConf::new("c1", "/x", "eth0")
            .with_arg("K=V", "x")
            .validate(true)
            .unwrap_err();
        assert!(
            matches!(err, Error::InvalidRuntimeConf { field: "args", .. }),
            "{err}"
        );
    }

    #[test]
    fn cni_args_are_joined() {
        let rt = RuntimeConf::new("c", "/n", "eth0")
            .with_arg("IgnoreUnknown", "1")
            .with_arg("K8S_POD_NAME", "web");
        assert_eq!(rt.cni_args(), "IgnoreUnknown=1;K8S_POD_NAME=web");
        assert_eq!(RuntimeConf::default().cni_args(), "");
    }

    #[test]
    fn gc_attachment_uses_the_spec_keys() {
        let json = serde_json::to_value(GcAttachment::new("c1", "eth0")).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"containerID": "c1", "ifname": "eth0"})
        );
    }
}

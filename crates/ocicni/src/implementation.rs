//! Which implementation a plugin type has: built in ([`cni_builtin`]) or a binary.

use std::fmt;
use std::path::{Path, PathBuf};

use cni_builtin::Builtin;
use cni_config::NetworkList;
use cni_exec::Exec;
use serde::Serialize;

/// How a plugin runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Implementation {
    /// In-process, by [`cni_builtin`] (its path is `builtin:<type>`).
    Builtin,
    /// A plugin binary from a plugin directory.
    Binary,
}

impl Implementation {
    /// `builtin` or `binary`, as logs, metrics and reports spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Implementation::Builtin => "builtin",
            Implementation::Binary => "binary",
        }
    }
}

impl fmt::Display for Implementation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One plugin type and what runs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PluginImplementation {
    /// The plugin's `type` (`bridge`, `host-local`, ...).
    pub plugin: String,
    /// Built in or a binary.
    pub implementation: Implementation,
    /// The binary, or the built-in's pseudo path `builtin:<type>`.
    pub path: PathBuf,
}

impl PluginImplementation {
    /// What a path that an [`Exec`] found or ran says: a pseudo path `builtin:<type>` is a
    /// built-in, anything else a binary named after its type.
    pub fn from_path(path: &Path) -> PluginImplementation {
        match Builtin::from_pseudo_path(path) {
            Some(builtin) => PluginImplementation {
                plugin: builtin.name().to_owned(),
                implementation: Implementation::Builtin,
                path: path.to_owned(),
            },
            None => PluginImplementation {
                plugin: path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                implementation: Implementation::Binary,
                path: path.to_owned(),
            },
        }
    }
}

/// Every plugin type `net` runs (each plugin and its IPAM plugin, in order, once each), as
/// `exec` finds it now; a type it cannot find is left out (validation says why).
pub(crate) async fn resolve(
    exec: &dyn Exec,
    dirs: &[PathBuf],
    net: &NetworkList,
) -> Vec<PluginImplementation> {
    let mut types: Vec<&str> = Vec::new();
    for plugin in &net.list.plugins {
        let ipam = plugin.ipam.as_ref().and_then(|i| i.ipam_type.as_deref());
        for name in std::iter::once(plugin.plugin_type.as_str()).chain(ipam) {
            if !name.is_empty() && !types.contains(&name) {
                types.push(name);
            }
        }
    }
    let mut out = Vec::with_capacity(types.len());
    for name in types {
        if let Ok(path) = exec.find_plugin(name, dirs).await {
            let mut found = PluginImplementation::from_path(&path);
            name.clone_into(&mut found.plugin);
            out.push(found);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_tell_built_ins_from_binaries() {
        let b = PluginImplementation::from_path(Path::new("builtin:host-local"));
        assert_eq!(
            (b.plugin.as_str(), b.implementation),
            ("host-local", Implementation::Builtin)
        );
        let p = PluginImplementation::from_path(Path::new("/usr/lib/cni/portmap"));
        assert_eq!(
            (p.plugin.as_str(), p.implementation),
            ("portmap", Implementation::Binary)
        );
        // Not a built-in name: a relative binary, never a built-in.
        let odd = PluginImplementation::from_path(Path::new("builtin:nope"));
        assert_eq!(odd.implementation, Implementation::Binary);
    }
}

//! The loaded configuration: which networks are usable and which one is the default.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cni_config::{NetworkList, Verdict};
use cni_exec::Cni;
use serde::Serialize;

use crate::builtin::{BuiltinNetwork, Features};
use crate::implementation::{self, PluginImplementation};

/// What became of one configuration file (or of the built-in network) at the last load.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NetworkReport {
    /// The file, or `None` for the built-in default network.
    pub file: Option<PathBuf>,
    /// The network's name, when the file got far enough to have one.
    pub network: Option<String>,
    /// The plugin types of the list, in order.
    pub plugins: Vec<String>,
    /// `loaded`, `shadowed`, `rejected`, `unusable` (valid, but a plugin is missing or too old)
    /// or `builtin`.
    pub verdict: &'static str,
    /// Why it is not loaded; for the built-in network, what it runs without.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Whether pods without a network choice get this one.
    pub default: bool,
    /// What runs each plugin type of a usable network (its IPAM plugins too), built in or a
    /// binary, as found at this load; empty for a network that is not usable.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub implementations: Vec<PluginImplementation>,
}

/// One load of the configuration directory, validated against the installed plugins.
#[derive(Debug, Clone, Default)]
pub(crate) struct Networks {
    /// Why the directory could not be read at all.
    pub(crate) dir_error: Option<String>,
    /// Usable networks, in file order.
    pub(crate) usable: Vec<Arc<NetworkList>>,
    /// The verdict on every file.
    pub(crate) reports: Vec<NetworkReport>,
    /// The network pods get when they ask for none.
    pub(crate) default: Option<Arc<NetworkList>>,
    /// Capabilities declared by the usable networks' plugins.
    pub(crate) capabilities: BTreeSet<String>,
}

impl Networks {
    pub(crate) fn get(&self, name: &str) -> Option<&Arc<NetworkList>> {
        self.usable
            .iter()
            .find(|n| n.name() == name)
            .or_else(|| self.default.as_ref().filter(|d| d.name() == name))
    }

    /// Why the network called `name` exists but cannot be used: the reason given for its file
    /// (or the built-in network) when that is unusable or rejected. An unusable file, which
    /// parsed, is the better answer than a rejected one with the same name.
    pub(crate) fn unusable_reason(&self, name: &str) -> Option<&str> {
        ["unusable", "rejected"].iter().find_map(|verdict| {
            self.reports
                .iter()
                .find(|r| r.verdict == *verdict && r.network.as_deref() == Some(name))
                .and_then(|r| r.reason.as_deref())
        })
    }
}

/// Why the directory cannot be read, without its path: every error built on it
/// ([`crate::Error::ConfDir`]) names the directory already.
fn dir_error_reason(err: cni_config::Error) -> String {
    match err {
        cni_config::Error::DirNotFound { .. } => "does not exist".to_owned(),
        cni_config::Error::ReadDir { source, .. } => source.to_string(),
        other => other.to_string(),
    }
}

/// The reason to report for a network that failed validation: the problems found, without the
/// "network ... is not usable" that the report (and any error built on it) already says.
fn validation_reason(err: &cni_exec::Error) -> String {
    match err {
        cni_exec::Error::Validation { errors, .. } if !errors.is_empty() => errors
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; "),
        other => other.to_string(),
    }
}

/// Loads `dir` and checks every network against the plugins it needs.
///
/// VERSION answers are cached per plugin binary by `cni-exec`, so a reload after a config change
/// runs no plugin unless a binary changed.
pub(crate) async fn load(
    dir: &Path,
    cni: &Cni,
    default_name: Option<&str>,
    builtin: Option<&BuiltinNetwork>,
) -> Networks {
    let mut out = Networks::default();
    let load = match cni_config::load_dir(dir) {
        Ok(load) => Some(load),
        Err(err) => {
            out.dir_error = Some(dir_error_reason(err));
            None
        }
    };
    // Loaded files own distinct network names; remember which report each one is.
    let mut report_of = HashMap::new();
    for file in load.iter().flat_map(|l| l.files.iter()) {
        if let (Verdict::Loaded, Some(name)) = (&file.verdict, &file.network) {
            report_of.insert(name.clone(), out.reports.len());
        }
        out.reports.push(NetworkReport {
            file: Some(file.path.clone()),
            network: file.network.clone(),
            plugins: file.plugin_types.clone(),
            verdict: file.verdict.as_str(),
            reason: file.reason(),
            default: false,
            implementations: Vec::new(),
        });
    }
    let loaded: Vec<(usize, Arc<NetworkList>)> = load
        .map(cni_config::DirLoad::into_networks)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|net| Some((*report_of.get(net.name())?, Arc::new(net))))
        .collect();
    let checks = loaded.iter().map(|(_, net)| cni.validate_network_list(net));
    let verdicts = futures_util::future::join_all(checks).await;
    for ((index, net), verdict) in loaded.into_iter().zip(verdicts) {
        match verdict {
            Ok(caps) => {
                out.capabilities.extend(caps);
                let found =
                    implementation::resolve(cni.exec().as_ref(), cni.plugin_dirs(), &net).await;
                log_builtins(net.name(), &found);
                out.reports[index].implementations = found;
                out.usable.push(net);
            }
            Err(err) => {
                tracing::warn!(network = net.name(), error = %err, "network is not usable");
                out.reports[index].verdict = "unusable";
                out.reports[index].reason = Some(validation_reason(&err));
            }
        }
    }
    out.default = match default_name {
        Some(name) => out.usable.iter().find(|n| n.name() == name).cloned(),
        None => out.usable.first().cloned(),
    };
    if out.default.is_none()
        && out.usable.is_empty()
        && let Some(builtin) = builtin
    {
        install_builtin(&mut out, cni, builtin, dir).await;
    }
    if let Some(default) = &out.default {
        let name = default.name().to_owned();
        for report in &mut out.reports {
            report.default =
                report.verdict != "shadowed" && report.network.as_deref() == Some(&name);
        }
    }
    out
}

/// Says once per load which plugins of a network run built in, as no binary does.
fn log_builtins(network: &str, found: &[PluginImplementation]) {
    let builtins: Vec<&str> = found
        .iter()
        .filter(|p| p.implementation == implementation::Implementation::Builtin)
        .map(|p| p.plugin.as_str())
        .collect();
    if !builtins.is_empty() {
        tracing::info!(
            network,
            builtin = builtins.join(","),
            "network runs these plugins built in"
        );
    }
}

/// What the built-in network can have on this node: host ports need portmap, a binary or built
/// in (not with `Preference::Never` and no binary).
async fn builtin_features(cni: &Cni) -> Features {
    let portmap = cni.exec().find_plugin("portmap", cni.plugin_dirs()).await;
    Features {
        portmap: portmap.is_ok(),
    }
}

async fn install_builtin(out: &mut Networks, cni: &Cni, builtin: &BuiltinNetwork, dir: &Path) {
    let features = builtin_features(cni).await;
    let bytes = builtin.conflist_with(features);
    let mut plugins = vec!["bridge".into(), "host-local".into()];
    if features.portmap {
        plugins.push("portmap".into());
    }
    let missing: Vec<&str> = [(!features.portmap).then_some("host ports (no portmap plugin)")]
        .into_iter()
        .flatten()
        .collect();
    let mut report = NetworkReport {
        file: None,
        network: Some(builtin.name.clone()),
        plugins,
        verdict: "builtin",
        reason: (!missing.is_empty()).then(|| format!("runs without {}", missing.join(" and "))),
        default: true,
        implementations: Vec::new(),
    };
    if !missing.is_empty() {
        tracing::warn!(
            network = builtin.name,
            "the built-in default network runs without {}: install the containernetworking-plugins \
             package (Debian, Ubuntu) for them",
            missing.join(" and ")
        );
    }
    match cni_config::parse_conflist(&bytes) {
        Ok(net) => match cni.validate_network_list(&net).await {
            Ok(caps) => {
                tracing::info!(
                    network = builtin.name, bridge = builtin.bridge, subnet = %builtin.subnet,
                    "no network configured in {}: using the built-in default network", dir.display()
                );
                out.capabilities.extend(caps);
                report.implementations =
                    implementation::resolve(cni.exec().as_ref(), cni.plugin_dirs(), &net).await;
                log_builtins(&builtin.name, &report.implementations);
                out.default = Some(Arc::new(net));
            }
            Err(err) => {
                // The first thing a new user meets when the plugins are not installed: say it
                // once, with what to do, instead of a silent "no default network".
                tracing::warn!(
                    network = builtin.name, error = %err,
                    "no network configured in {} and the built-in default network cannot be used \
                     (its plugins come from the containernetworking-plugins package on Debian \
                     and Ubuntu): pods cannot get a network", dir.display()
                );
                report.verdict = "unusable";
                report.default = false;
                report.reason = Some(validation_reason(&err));
            }
        },
        Err(err) => {
            report.verdict = "rejected";
            report.default = false;
            report.reason = Some(err.to_string());
        }
    }
    out.reports.push(report);
}

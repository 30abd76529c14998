//! One plugin invocation: the environment and stdin the spec prescribes, running it through
//! [`Exec`], and turning what it printed into a result or a typed error.

use std::path::{Path, PathBuf};

use cni_types::{CapabilityArgs, CniError, CniResult, PluginConfig, Version, VersionInfo};
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::exec::{Exec, PluginOutput};
use crate::runtime_conf::RuntimeConf;

/// A CNI command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Command {
    Add,
    Del,
    Check,
    Version,
    Status,
    Gc,
}

impl Command {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Command::Add => "ADD",
            Command::Del => "DEL",
            Command::Check => "CHECK",
            Command::Version => "VERSION",
            Command::Status => "STATUS",
            Command::Gc => "GC",
        }
    }
}

/// `CNI_PATH`: the plugin directories joined with `:`, so plugins find their IPAM plugins.
pub(crate) fn cni_path(dirs: &[PathBuf]) -> String {
    let parts: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    parts.join(":")
}

/// The environment of one invocation. ADD, DEL and CHECK get all six `CNI_*` variables (empty ones
/// included, as libcni sends them); VERSION gets `CNI_COMMAND` only; STATUS and GC get
/// `CNI_COMMAND` and `CNI_PATH`.
pub(crate) fn env(command: Command, rt: Option<&RuntimeConf>, path: &str) -> Vec<(String, String)> {
    let mut env = vec![("CNI_COMMAND".to_owned(), command.as_str().to_owned())];
    let mut push = |k: &str, v: String| env.push((k.to_owned(), v));
    match command {
        Command::Add | Command::Del | Command::Check => {
            let rt_or_default = rt.cloned().unwrap_or_default();
            push("CNI_CONTAINERID", rt_or_default.container_id.clone());
            push("CNI_NETNS", rt_or_default.netns.clone());
            push("CNI_IFNAME", rt_or_default.if_name.clone());
            push("CNI_ARGS", rt_or_default.cni_args());
            push("CNI_PATH", path.to_owned());
        }
        Command::Status | Command::Gc => push("CNI_PATH", path.to_owned()),
        Command::Version => {}
    }
    env
}

/// The configuration one plugin of a list gets on stdin: its own object with the list's `name`
/// and `cniVersion` injected (replaced in place when the plugin wrote them, otherwise first), then
/// `runtimeConfig` with the capability arguments it declares (when there are any), then
/// `prevResult`, then `extra` keys (GC's attachments). The plugin's own keys keep their order, and
/// `capabilities` stays as written.
pub(crate) fn plugin_stdin(
    network: &str,
    version: Version,
    plugin: &PluginConfig,
    caps: Option<&CapabilityArgs>,
    prev_result: Option<Value>,
    extra: &[(&str, Value)],
) -> Map<String, Value> {
    let own = plugin.to_map();
    let mut out = Map::new();
    let name = Value::String(network.to_owned());
    let cni_version = Value::String(version.to_string());
    if !own.contains_key("cniVersion") {
        out.insert("cniVersion".to_owned(), cni_version.clone());
    }
    if !own.contains_key("name") {
        out.insert("name".to_owned(), name.clone());
    }
    for (key, value) in own {
        let value = match key.as_str() {
            "cniVersion" => cni_version.clone(),
            "name" => name.clone(),
            _ => value,
        };
        out.insert(key, value);
    }
    if let Some(caps) = caps {
        let declared = plugin
            .capabilities
            .iter()
            .filter(|(_, on)| *on)
            .map(|(n, _)| n);
        let runtime_config = caps.runtime_config(declared);
        if !runtime_config.is_empty() {
            out.insert("runtimeConfig".to_owned(), Value::Object(runtime_config));
        }
    }
    if let Some(prev) = prev_result {
        out.insert("prevResult".to_owned(), prev);
    }
    for (key, value) in extra {
        out.insert((*key).to_owned(), value.clone());
    }
    out
}

/// Who is being run, for error messages.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Call<'a> {
    pub(crate) plugin: &'a str,
    pub(crate) command: Command,
    pub(crate) network: &'a str,
    pub(crate) container_id: &'a str,
}

impl Call<'_> {
    /// Runs `path` and returns its output, mapping failures to [`Error::Plugin`] (spec error
    /// object on stdout) or [`Error::PluginExec`] (anything else).
    pub(crate) async fn run(
        &self,
        exec: &dyn Exec,
        path: &Path,
        env: &[(String, String)],
        stdin: &[u8],
    ) -> Result<PluginOutput> {
        exec.exec_plugin(path, env, stdin)
            .await
            .map_err(|e| self.plugin_error(e))
    }

    pub(crate) fn plugin_error(&self, error: Error) -> Error {
        if let Error::Failed {
            stdout,
            stderr_tail,
            ..
        } = &error
            && let Ok(cni) = CniError::from_slice(stdout)
        {
            return Error::Plugin {
                plugin: self.plugin.to_owned(),
                command: self.command.as_str(),
                network: self.network.to_owned(),
                container_id: self.container_id.to_owned(),
                error: Box::new(cni),
                stderr_tail: stderr_tail.clone(),
            };
        }
        Error::PluginExec {
            plugin: self.plugin.to_owned(),
            command: self.command.as_str(),
            network: self.network.to_owned(),
            container_id: self.container_id.to_owned(),
            source: Box::new(error),
        }
    }

    pub(crate) fn not_found(&self, error: Error) -> Error {
        match error {
            // These already name the plugin and say everything.
            e @ (Error::PluginNotFound { .. } | Error::InvalidPluginName { .. }) => e,
            other => self.plugin_error(other),
        }
    }

    pub(crate) fn invalid_result(&self, reason: impl Into<String>, out: &PluginOutput) -> Error {
        Error::InvalidResult {
            plugin: self.plugin.to_owned(),
            command: self.command.as_str(),
            network: self.network.to_owned(),
            reason: reason.into(),
            stderr_tail: out.stderr_tail.clone(),
        }
    }

    /// Reads an ADD result: in the version it declares (the network's when it declares none, as
    /// libcni does), then converted to the network's version.
    pub(crate) fn parse_result(&self, out: &PluginOutput, version: Version) -> Result<CniResult> {
        let bytes = out.stdout.as_slice();
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Err(self.invalid_result("empty output", out));
        }
        let declared = cni_types::result::declared_version(bytes)
            .map_err(|e| self.invalid_result(e.to_string(), out))?;
        let result = CniResult::from_slice(bytes, declared.unwrap_or(version))
            .map_err(|e| self.invalid_result(e.to_string(), out))?;
        if result.cni_version() == version {
            return Ok(result);
        }
        result
            .to_version(version)
            .map_err(|e| self.invalid_result(e.to_string(), out))
    }

    /// Reads a VERSION answer.
    pub(crate) fn parse_version(&self, out: &PluginOutput) -> Result<VersionInfo> {
        VersionInfo::from_slice(&out.stdout).map_err(|e| self.invalid_result(e.to_string(), out))
    }
}

/// Whether a VERSION failure is a plugin from before VERSION existed saying it does not know the
/// command; like libcni, that means it speaks 0.1.0 (and 0.2.0, the same format).
pub(crate) fn is_unknown_version_command(error: &Error) -> bool {
    match error {
        Error::Plugin { error, .. } => error.msg.starts_with("unknown CNI_COMMAND"),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn plugin(v: Value) -> PluginConfig {
        PluginConfig::from_value(&v).unwrap()
    }

    #[test]
    fn stdin_injects_name_and_version_in_place_and_keeps_order() {
        let p = plugin(json!({"type": "bridge", "zeta": 1, "name": "old", "alpha": 2}));
        let out = plugin_stdin("net", Version::V1_0_0, &p, None, None, &[]);
        let keys: Vec<&str> = out.keys().map(String::as_str).collect();
        assert_eq!(keys, ["cniVersion", "type", "zeta", "name", "alpha"]);
        assert_eq!(out["name"], "net");
        assert_eq!(out["cniVersion"], "1.0.0");
    }

    #[test]
    fn runtime_config_holds_only_declared_capabilities() {
        let p = plugin(json!({
            "type": "portmap",
            "capabilities": {"portMappings": true, "bandwidth": false}
        }));
        let caps: CapabilityArgs = serde_json::from_value(json!({
            "portMappings": [{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}],
            "bandwidth": {"ingressRate": 1},
            "mac": "aa:bb:cc:dd:ee:ff"
        }))
        .unwrap();
        let out = plugin_stdin(
            "n",
            Version::V1_0_0,
            &p,
            Some(&caps),
            Some(json!({"x": 1})),
            &[],
        );
        assert_eq!(
            Value::Object(out),
            json!({
                "cniVersion": "1.0.0", "name": "n", "type": "portmap",
                "capabilities": {"portMappings": true, "bandwidth": false},
                "runtimeConfig": {"portMappings": [{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}]},
                "prevResult": {"x": 1}
            })
        );
    }

    #[test]
    fn env_per_command() {
        let rt = RuntimeConf::new("c1", "/run/netns/p", "eth0").with_arg("A", "1");
        let names = |c| {
            env(c, Some(&rt), "/a:/b")
                .into_iter()
                .map(|(k, _)| k)
                .collect::<Vec<_>>()
        };
        assert_eq!(names(Command::Version), ["CNI_COMMAND"]);
        assert_eq!(names(Command::Gc), ["CNI_COMMAND", "CNI_PATH"]);
        assert_eq!(names(Command::Status), ["CNI_COMMAND", "CNI_PATH"]);
        let add = env(Command::Add, Some(&rt), "/a:/b");
        assert!(add.contains(&("CNI_ARGS".to_owned(), "A=1".to_owned())));
        assert!(add.contains(&("CNI_PATH".to_owned(), "/a:/b".to_owned())));
        assert_eq!(
            cni_path(&["/opt/cni/bin".into(), "/usr/lib/cni".into()]),
            "/opt/cni/bin:/usr/lib/cni"
        );
    }

    #[test]
    fn results_are_converted_to_the_network_version() {
        let call = Call {
            plugin: "p",
            command: Command::Add,
            network: "n",
            container_id: "c",
        };
        let out = |s: &str| PluginOutput {
            stdout: s.as_bytes().to_vec(),
            stderr_tail: "diag".into(),
        };
        let r = call
            .parse_result(
                &out(r#"{"cniVersion":"0.4.0","ips":[{"version":"4","address":"10.0.0.2/24"}]}"#),
                Version::V1_0_0,
            )
            .unwrap();
        assert_eq!(r.cni_version(), Version::V1_0_0);
        let no_version = call
            .parse_result(
                &out(r#"{"ips":[{"address":"10.0.0.2/24"}]}"#),
                Version::V1_0_0,
            )
            .unwrap();
        assert_eq!(no_version.ips.len(), 1);
        for bad in ["", "nope", "[]", r#"{"cniVersion":"9.9.9"}"#] {
            let err = call.parse_result(&out(bad), Version::V1_0_0).unwrap_err();
            assert!(
                matches!(&err, Error::InvalidResult { stderr_tail, .. } if stderr_tail == "diag"),
                "{bad}: {err}"
            );
        }
    }
}

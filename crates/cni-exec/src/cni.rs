//! [`Cni`]: the operations of the CNI spec on network configuration lists (libcni's `CNIConfig`).

use std::collections::HashSet;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use cni_config::NetworkList;
use cni_types::{CniResult, PluginConfig, Version, VersionInfo};
use serde_json::{Map, Value};

use crate::cache::{CachedAttachment, ResultCache};
use crate::error::{Error, Result};
use crate::exec::{Exec, PluginOutput};
use crate::invoke::{self, Call, Command};
use crate::runtime_conf::{GcAttachment, RuntimeConf, validate_network_name};
use crate::version_cache::{Fingerprint, VersionCache};

/// The keys GC's configuration carries the valid attachments under: the spec's name, and the one
/// libcni sent before it was corrected; libcni sends both, and so does this crate.
pub const GC_ATTACHMENT_KEYS: [&str; 2] = ["cni.dev/attachments", "cni.dev/valid-attachments"];

/// Runs CNI operations on network configuration lists: the counterpart of libcni's `CNIConfig`.
///
/// Holds the plugin runner, the plugin directories (also passed to plugins as `CNI_PATH`), the
/// [`ResultCache`] and a cache of VERSION answers. Share it (`Arc<Cni>`); every method takes
/// `&self`. Serializing operations on the same container is the caller's job (see `cni-lock`).
pub struct Cni {
    exec: Arc<dyn Exec>,
    plugin_dirs: Vec<PathBuf>,
    env_path: String,
    cache: ResultCache,
    versions: VersionCache,
}

impl std::fmt::Debug for Cni {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cni")
            .field("plugin_dirs", &self.plugin_dirs)
            .field("cache", &self.cache)
            .finish_non_exhaustive()
    }
}

/// One plugin run inside a list operation.
struct Step<'a> {
    command: Command,
    network: &'a str,
    version: Version,
    plugin: &'a PluginConfig,
    rt: Option<&'a RuntimeConf>,
    prev_result: Option<Value>,
    extra: &'a [(&'a str, Value)],
}

impl Cni {
    /// A runner that finds plugins in `plugin_dirs` (in order) and keeps its result cache under
    /// `cache_dir` (libcni's default is [`DEFAULT_CACHE_DIR`](crate::DEFAULT_CACHE_DIR)).
    pub fn new(exec: Arc<dyn Exec>, plugin_dirs: Vec<PathBuf>, cache_dir: PathBuf) -> Self {
        Cni {
            exec,
            env_path: invoke::cni_path(&plugin_dirs),
            plugin_dirs,
            cache: ResultCache::new(cache_dir),
            versions: VersionCache::default(),
        }
    }

    /// Keeps the cache's pending entries in `dir`; see [`ResultCache::with_pending_dir`].
    pub fn with_pending_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cache = self.cache.with_pending_dir(dir);
        self
    }

    /// The plugin directories, in search order.
    pub fn plugin_dirs(&self) -> &[PathBuf] {
        &self.plugin_dirs
    }

    /// The result cache.
    pub fn cache(&self) -> &ResultCache {
        &self.cache
    }

    /// The plugin runner.
    pub fn exec(&self) -> &Arc<dyn Exec> {
        &self.exec
    }

    /// Forgets every cached VERSION answer (they are also dropped one by one when a binary changes).
    pub fn clear_version_cache(&self) {
        self.versions.clear();
    }

    /// ADD: runs the plugins in order, each getting the previous one's result as `prevResult`, then
    /// caches the last result with the configuration bytes and arguments used. Returns that result,
    /// in the network's version (convert it with [`CniResult::to_version`]).
    ///
    /// Before the first plugin runs, a result-less entry is cached (see
    /// [`ResultCache::put_pending`]), so that if this process dies mid-ADD, teardown and GC still
    /// find the attachment. When a plugin fails, the cache is put back as it was; nothing else is
    /// undone: call [`Cni::del_network_list`] to clean up, as the spec advises.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRuntimeConf`] before anything runs; [`Error::PluginNotFound`];
    /// [`Error::Plugin`] for a plugin's error object; [`Error::PluginExec`] for a plugin that died,
    /// timed out or failed without one; [`Error::InvalidResult`] for output that is not a result of
    /// the network's version; [`Error::Cache`] when the result cannot be cached.
    pub async fn add_network_list(&self, net: &NetworkList, rt: &RuntimeConf) -> Result<CniResult> {
        rt.validate(true)?;
        validate_network_name(net.name())?;
        let pending = Self::cache_entry(net, rt, None);
        let previous = self
            .blocking(move |cache| {
                let previous =
                    cache.get(&pending.network, &pending.container_id, &pending.if_name)?;
                cache.put_pending(&pending)?;
                Ok(previous)
            })
            .await?;
        // The final entry's file is created while the plugins run: on a busy file system that is
        // the slow part of the write, and it does not need the result.
        let (prepared, chain) = {
            let (network, container, ifname) = (
                net.name().to_owned(),
                rt.container_id.clone(),
                rt.if_name.clone(),
            );
            let prepare = self.blocking(move |cache| cache.prepare(&network, &container, &ifname));
            tokio::join!(prepare, self.run_add_chain(net, rt))
        };
        let result = match chain {
            Ok(result) => result,
            Err(err) => {
                self.undo_failed_add(net, rt, previous).await;
                return Err(err);
            }
        };
        let entry = Self::cache_entry(net, rt, Some(Self::result_json(net.name(), &result)?));
        let prepared = prepared?;
        self.blocking(move |cache| cache.put_prepared(prepared, &entry))
            .await?;
        Ok(result)
    }

    /// After an ADD chain failed or timed out part-way: a plugin before the failing one (or the
    /// failing one itself, before it gave up) may have made a veth, a lease, iptables rules.
    /// As a runtime would, DEL the list with the same configuration and arguments, then drop the
    /// pending entry; if that DEL fails too, the pending entry stays, so GC owns the attachment
    /// rather than nobody. An attachment that was complete before this ADD is left as it was
    /// (its entry restored), since a DEL would take down what worked.
    async fn undo_failed_add(
        &self,
        net: &NetworkList,
        rt: &RuntimeConf,
        previous: Option<CachedAttachment>,
    ) {
        if let Some(entry) = previous.filter(|e| e.result.is_some()) {
            if let Err(err) = self.blocking(move |cache| cache.put(&entry)).await {
                tracing::warn!(network = net.name(), container = rt.container_id, error = %err,
                    "cannot restore the cache entry after a failed ADD");
            }
            return;
        }
        // del_with removes the pending entry once every plugin's DEL succeeded.
        if let Err(err) = self.del_with(Some(net), net.name(), rt, None).await {
            tracing::warn!(
                network = net.name(), container = rt.container_id, ifname = rt.if_name, error = %err,
                "ADD failed and the DEL undoing it failed too; its pending cache entry stays for GC"
            );
        }
    }

    /// The plugins of an ADD, in order, each getting the previous result.
    async fn run_add_chain(&self, net: &NetworkList, rt: &RuntimeConf) -> Result<CniResult> {
        let mut result: Option<CniResult> = None;
        for plugin in &net.list.plugins {
            let prev_result = result
                .as_ref()
                .map(|r| Self::result_json(net.name(), r))
                .transpose()?;
            let step = Step {
                command: Command::Add,
                network: net.name(),
                version: net.version,
                plugin,
                rt: Some(rt),
                prev_result,
                extra: &[],
            };
            let (out, call) = self.run_step(&step).await?;
            result = Some(call.parse_result(&out, net.version)?);
        }
        match result {
            Some(result) => Ok(result),
            None => CniResult::new(net.version).map_err(|source| Error::Types {
                network: net.name().to_owned(),
                what: "empty result",
                source,
            }),
        }
    }

    /// The cache entry of an attachment of `net` made with `rt`.
    fn cache_entry(net: &NetworkList, rt: &RuntimeConf, result: Option<Value>) -> CachedAttachment {
        let capability_args = match serde_json::to_value(&rt.capability_args) {
            Ok(Value::Object(map)) => map,
            _ => Map::new(),
        };
        CachedAttachment {
            container_id: rt.container_id.clone(),
            network: net.name().to_owned(),
            if_name: rt.if_name.clone(),
            netns: rt.netns.clone(),
            config: net.cache_config.to_vec(),
            cni_args: rt.args.clone(),
            capability_args,
            result,
        }
    }

    /// CHECK: runs the plugins in order, each with the cached ADD result as `prevResult`.
    ///
    /// Does nothing when the list sets `disableCheck`.
    ///
    /// # Errors
    ///
    /// [`Error::CheckNotSupported`] for versions below 0.4.0 (nothing runs);
    /// [`Error::InvalidRuntimeConf`]; [`Error::NoCachedResult`] when there is no usable cached
    /// result; [`Error::Types`] when it cannot be converted to the network's version; then the
    /// plugin errors of [`Cni::add_network_list`].
    pub async fn check_network_list(&self, net: &NetworkList, rt: &RuntimeConf) -> Result<()> {
        if !net.version.supports_check() {
            return Err(Error::CheckNotSupported {
                network: net.name().to_owned(),
                version: net.version,
            });
        }
        if net.list.disable_check {
            return Ok(());
        }
        rt.validate(true)?;
        let no_result = || Error::NoCachedResult {
            network: net.name().to_owned(),
            container_id: rt.container_id.clone(),
            if_name: rt.if_name.clone(),
        };
        let entry = self
            .cached_entry(net.name(), rt)
            .await?
            .ok_or_else(no_result)?;
        let cached = entry.cni_result()?.ok_or_else(no_result)?;
        let prev = Self::convert(net.name(), &cached, net.version)?;
        let prev = Self::result_json(net.name(), &prev)?;
        for plugin in &net.list.plugins {
            let step = Step {
                command: Command::Check,
                network: net.name(),
                version: net.version,
                plugin,
                rt: Some(rt),
                prev_result: Some(prev.clone()),
                extra: &[],
            };
            self.run_step(&step).await?;
        }
        Ok(())
    }

    /// DEL: runs the plugins in reverse order, then removes the cache entry.
    ///
    /// When the cache has an entry for this attachment, the configuration, `CNI_ARGS` and
    /// capability arguments used are the cached ones (the file on disk may have changed since ADD),
    /// and for versions 0.4.0 and later the cached result is passed as `prevResult`, as libcni
    /// does. `rt.netns` is passed as given, as libcni does: empty when the namespace is gone (the
    /// cached path may by now name another pod's namespace). A DEL for an attachment that was never
    /// added still runs the plugins, without `prevResult`, and succeeds if they do. The entry is
    /// removed only after every plugin succeeded, so a failed DEL can be retried.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRuntimeConf`], the plugin errors of [`Cni::add_network_list`] (the first
    /// failing plugin stops the list), [`Error::Cache`] when the entry cannot be removed.
    pub async fn del_network_list(&self, net: &NetworkList, rt: &RuntimeConf) -> Result<()> {
        rt.validate(false)?;
        validate_network_name(net.name())?;
        let entry = self.cached_entry(net.name(), rt).await?;
        self.del_with(Some(net), net.name(), rt, entry).await
    }

    /// DEL from the cache alone, for an attachment whose network configuration file is gone: the
    /// cached configuration, namespace, arguments and result are used.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] when the cached configuration does not parse, then as
    /// [`Cni::del_network_list`].
    pub async fn del_cached_attachment(&self, attachment: &CachedAttachment) -> Result<()> {
        let rt = lossy_runtime_conf(attachment);
        rt.validate(false)?;
        validate_network_name(&attachment.network)?;
        self.del_with(None, &attachment.network, &rt, Some(attachment.clone()))
            .await
    }

    /// The cached ADD result of an attachment, converted to the network's version; `None` when
    /// there is no (usable) entry.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRuntimeConf`] for names that break the rules, [`Error::Types`] when the
    /// cached result is not a valid result or cannot be converted.
    pub async fn cached_result(
        &self,
        net: &NetworkList,
        rt: &RuntimeConf,
    ) -> Result<Option<CniResult>> {
        let Some(entry) = self.cached_entry(net.name(), rt).await? else {
            return Ok(None);
        };
        match entry.cni_result()? {
            Some(result) => Self::convert(net.name(), &result, net.version).map(Some),
            None => Ok(None),
        }
    }

    /// Every cached attachment, optionally of one container only (see [`ResultCache::list`]).
    ///
    /// # Errors
    ///
    /// [`Error::Cache`] when the results directory cannot be listed.
    pub async fn cached_attachments(
        &self,
        container_id: Option<&str>,
    ) -> Result<Vec<CachedAttachment>> {
        let container_id = container_id.map(str::to_owned);
        self.blocking(move |cache| cache.list(container_id.as_deref()))
            .await
    }

    /// The VERSION answer of the plugin called `plugin_type`.
    ///
    /// Answers are cached per binary (path, device, inode, size, mtime): asking again runs nothing
    /// until the binary changes. A plugin from before VERSION existed, which answers "unknown
    /// CNI_COMMAND", is taken to support 0.1.0 and 0.2.0, as libcni does. VERSION gets
    /// `CNI_COMMAND` only and `{"cniVersion": "<newest version>"}` on stdin.
    ///
    /// # Errors
    ///
    /// [`Error::PluginNotFound`]; [`Error::Plugin`] / [`Error::PluginExec`] when VERSION fails;
    /// [`Error::InvalidResult`] when the answer is not a VERSION answer.
    pub async fn plugin_version(&self, plugin_type: &str) -> Result<VersionInfo> {
        let call = Call {
            plugin: plugin_type,
            command: Command::Version,
            network: "",
            container_id: "",
        };
        let path = self
            .exec
            .find_plugin(plugin_type, &self.plugin_dirs)
            .await
            .map_err(|e| call.not_found(e))?;
        let fingerprint = Fingerprint::of(&path);
        if let Some(fp) = fingerprint
            && let Some(info) = self.versions.get(&path, fp)
        {
            return Ok(info);
        }
        let stdin = serde_json::json!({ "cniVersion": Version::LATEST.to_string() }).to_string();
        let env = invoke::env(Command::Version, None, &self.env_path);
        let info = match call.run(&*self.exec, &path, &env, stdin.as_bytes()).await {
            Ok(out) => call.parse_version(&out)?,
            Err(e) if invoke::is_unknown_version_command(&e) => VersionInfo::legacy(),
            Err(e) => return Err(e),
        };
        if let Some(fp) = fingerprint {
            self.versions.insert(&path, fp, info.clone());
        }
        Ok(info)
    }

    /// Checks that a network can be used, as libcni's `ValidateNetworkList` does: every plugin is
    /// found and supports the network's version, and every IPAM plugin named is found. Returns the
    /// capabilities the plugins declare (enabled ones, each once, in plugin order).
    ///
    /// VERSION answers come from the per-binary cache (see [`Cni::plugin_version`]), so validating
    /// many networks on every reload runs each plugin binary once.
    ///
    /// # Errors
    ///
    /// [`Error::Validation`] listing every problem found.
    pub async fn validate_network_list(&self, net: &NetworkList) -> Result<Vec<String>> {
        let mut errors = Vec::new();
        let mut caps: Vec<String> = Vec::new();
        for plugin in &net.list.plugins {
            match self.plugin_version(&plugin.plugin_type).await {
                Ok(info) if info.versions().any(|v| v == net.version) => {}
                Ok(info) => errors.push(Error::UnsupportedVersion {
                    plugin: plugin.plugin_type.clone(),
                    network: net.name().to_owned(),
                    version: net.version,
                    supported: info.supported_versions,
                }),
                Err(e) => errors.push(e),
            }
            if let Some(ipam) = plugin.ipam.as_ref().and_then(|i| i.ipam_type.as_deref())
                && let Err(e) = self.exec.find_plugin(ipam, &self.plugin_dirs).await
            {
                errors.push(e);
            }
            for (name, enabled) in plugin.capabilities.iter() {
                if enabled && !caps.iter().any(|c| c == name) {
                    caps.push(name.to_owned());
                }
            }
        }
        if errors.is_empty() {
            Ok(caps)
        } else {
            Err(Error::Validation {
                network: net.name().to_owned(),
                errors,
            })
        }
    }

    /// STATUS (spec 1.1): asks each plugin in order whether it can serve ADD requests, stopping at
    /// the first that cannot. For networks below 1.1.0 nothing runs and the answer is `Ok`.
    /// STATUS gets `CNI_COMMAND` and `CNI_PATH`.
    ///
    /// # Errors
    ///
    /// [`Error::Plugin`] with the plugin's error (codes 50/51 mean "not available"), and the other
    /// plugin errors of [`Cni::add_network_list`].
    pub async fn status_network_list(&self, net: &NetworkList) -> Result<()> {
        if !net.version.supports_status_and_gc() {
            return Ok(());
        }
        for plugin in &net.list.plugins {
            let step = Step {
                command: Command::Status,
                network: net.name(),
                version: net.version,
                plugin,
                rt: None,
                prev_result: None,
                extra: &[],
            };
            self.run_step(&step).await?;
        }
        Ok(())
    }

    /// GC, as libcni's `GCNetworkList`: first DELs every cached attachment of this network that is
    /// not in `valid` (from its cached configuration, arguments and namespace path), then runs
    /// [`Cni::gc_verb`]. Does nothing when the list sets `disableGC`. Every step is tried even
    /// when an earlier one fails.
    ///
    /// A runtime that tears stale attachments down itself (ocicni does, keeping DELs out of
    /// namespace paths that live pods reuse) calls [`Cni::gc_verb`] alone.
    ///
    /// # Errors
    ///
    /// [`Error::Gc`] listing every failed step; [`Error::Cache`] when the cache cannot be listed.
    pub async fn gc_network_list(&self, net: &NetworkList, valid: &[GcAttachment]) -> Result<()> {
        if net.list.disable_gc {
            return Ok(());
        }
        let keep: HashSet<&GcAttachment> = valid.iter().collect();
        let mut errors = Vec::new();
        for entry in self.cached_attachments(None).await? {
            let id = GcAttachment::new(entry.container_id.clone(), entry.if_name.clone());
            if entry.network != net.name() || keep.contains(&id) {
                continue;
            }
            let rt = lossy_runtime_conf(&entry);
            tracing::debug!(network = net.name(), container = %id.container_id, if_name = %id.if_name, "GC: deleting stale attachment");
            if let Err(e) = self.del_with(Some(net), net.name(), &rt, Some(entry)).await {
                errors.push(e);
            }
        }
        match self.gc_verb(net, valid).await {
            Err(Error::Gc { errors: more, .. }) => errors.extend(more),
            Err(other) => errors.push(other),
            Ok(()) => {}
        }
        Self::gc_outcome(net, errors)
    }

    /// The GC verb alone: for networks of version 1.1.0 and later, runs GC on every plugin with
    /// `valid` under both [`GC_ATTACHMENT_KEYS`] (nothing for older versions or `disableGC`).
    /// Every plugin is asked even when an earlier one fails.
    ///
    /// # Errors
    ///
    /// [`Error::Gc`] listing every plugin that failed.
    pub async fn gc_verb(&self, net: &NetworkList, valid: &[GcAttachment]) -> Result<()> {
        let mut errors = Vec::new();
        if !net.list.disable_gc && net.version.supports_status_and_gc() {
            let list = serde_json::to_value(valid).unwrap_or(Value::Array(Vec::new()));
            let extra = GC_ATTACHMENT_KEYS.map(|k| (k, list.clone()));
            for plugin in &net.list.plugins {
                let step = Step {
                    command: Command::Gc,
                    network: net.name(),
                    version: net.version,
                    plugin,
                    rt: None,
                    prev_result: None,
                    extra: &extra,
                };
                if let Err(e) = self.run_step(&step).await {
                    errors.push(e);
                }
            }
        }
        Self::gc_outcome(net, errors)
    }

    fn gc_outcome(net: &NetworkList, errors: Vec<Error>) -> Result<()> {
        if errors.is_empty() {
            Ok(())
        } else {
            Err(Error::Gc {
                network: net.name().to_owned(),
                errors,
            })
        }
    }

    /// DEL with the cached entry (if any) taking precedence over `fallback` and `rt`.
    async fn del_with(
        &self,
        fallback: Option<&NetworkList>,
        network: &str,
        rt: &RuntimeConf,
        entry: Option<CachedAttachment>,
    ) -> Result<()> {
        let cached_list = match &entry {
            Some(e) if !e.config.is_empty() => match e.network_list() {
                Ok(list) => Some(list),
                Err(err) if fallback.is_some() => {
                    tracing::warn!(network, error = %err, "cached configuration does not parse; using the current one");
                    None
                }
                Err(err) => return Err(err),
            },
            _ => None,
        };
        let Some(net) = cached_list.as_ref().or(fallback) else {
            return Err(Error::NoCachedResult {
                network: network.to_owned(),
                container_id: rt.container_id.clone(),
                if_name: rt.if_name.clone(),
            });
        };
        let mut rt = rt.clone();
        let mut prev_result = None;
        if let Some(entry) = &entry {
            let cached_rt = lossy_runtime_conf(entry);
            if !cached_rt.args.is_empty() {
                rt.args = cached_rt.args;
            }
            rt.capability_args = cached_rt.capability_args;
            if net.version >= Version::V0_4_0 {
                prev_result = match entry
                    .cni_result()
                    .and_then(|r| {
                        r.map(|r| Self::convert(network, &r, net.version))
                            .transpose()
                    })
                    .and_then(|r| r.map(|r| Self::result_json(network, &r)).transpose())
                {
                    Ok(prev) => prev,
                    Err(err) => {
                        tracing::warn!(network, error = %err, "cached result unusable; DEL without prevResult");
                        None
                    }
                };
            }
        }
        for plugin in net.list.plugins.iter().rev() {
            let step = Step {
                command: Command::Del,
                network,
                version: net.version,
                plugin,
                rt: Some(&rt),
                prev_result: prev_result.clone(),
                extra: &[],
            };
            self.run_step(&step).await?;
        }
        let (network, container_id, if_name) = (
            network.to_owned(),
            rt.container_id.clone(),
            rt.if_name.clone(),
        );
        self.blocking(move |cache| cache.remove(&network, &container_id, &if_name))
            .await?;
        Ok(())
    }

    async fn run_step<'a>(&self, step: &Step<'a>) -> Result<(PluginOutput, Call<'a>)> {
        let call = Call {
            plugin: &step.plugin.plugin_type,
            command: step.command,
            network: step.network,
            container_id: step.rt.map_or("", |rt| rt.container_id.as_str()),
        };
        let path = self
            .exec
            .find_plugin(&step.plugin.plugin_type, &self.plugin_dirs)
            .await
            .map_err(|e| call.not_found(e))?;
        let stdin = invoke::plugin_stdin(
            step.network,
            step.version,
            step.plugin,
            step.rt.map(|rt| &rt.capability_args),
            step.prev_result.clone(),
            step.extra,
        );
        let stdin = Value::Object(stdin).to_string();
        let env = invoke::env(step.command, step.rt, &self.env_path);
        let out = call.run(&*self.exec, &path, &env, stdin.as_bytes()).await?;
        Ok((out, call))
    }

    async fn cached_entry(
        &self,
        network: &str,
        rt: &RuntimeConf,
    ) -> Result<Option<CachedAttachment>> {
        let (network, container_id, if_name) = (
            network.to_owned(),
            rt.container_id.clone(),
            rt.if_name.clone(),
        );
        self.blocking(move |cache| cache.get(&network, &container_id, &if_name))
            .await
    }

    fn convert(network: &str, result: &CniResult, version: Version) -> Result<CniResult> {
        if result.cni_version() == version {
            return Ok(result.clone());
        }
        result.to_version(version).map_err(|source| Error::Types {
            network: network.to_owned(),
            what: "cached result",
            source,
        })
    }

    fn result_json(network: &str, result: &CniResult) -> Result<Value> {
        result.to_json_value().map_err(|source| Error::Types {
            network: network.to_owned(),
            what: "result",
            source,
        })
    }

    /// Runs cache file work off the async threads (writes fsync).
    async fn blocking<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(ResultCache) -> Result<T> + Send + 'static,
    {
        let cache = self.cache.clone();
        let dir = cache.results_dir();
        tokio::task::spawn_blocking(move || f(cache))
            .await
            .map_err(|e| Error::Cache {
                path: dir,
                op: "run cache task",
                source: io::Error::other(e),
            })?
    }
}

/// The runtime configuration of a cached attachment; capability arguments that do not decode are
/// dropped with a warning, since teardown must go on.
fn lossy_runtime_conf(entry: &CachedAttachment) -> RuntimeConf {
    entry.runtime_conf().unwrap_or_else(|err| {
        tracing::warn!(network = %entry.network, container = %entry.container_id, error = %err,
            "cached capability arguments unusable; running without them");
        RuntimeConf {
            container_id: entry.container_id.clone(),
            netns: entry.netns.clone(),
            if_name: entry.if_name.clone(),
            args: entry.cni_args.clone(),
            capability_args: cni_types::CapabilityArgs::default(),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send<T: Send>(_: &T) {}

    #[test]
    fn operations_can_be_spawned() {
        // Runtimes spawn these on a multi-threaded executor: the futures must be Send.
        let cni = Cni::new(
            Arc::new(crate::ProcessExec::new()),
            Vec::new(),
            PathBuf::from("/nonexistent"),
        );
        let net = cni_config::parse_conflist(br#"{"name":"n","plugins":[{"type":"x"}]}"#).unwrap();
        let rt = RuntimeConf::default();
        assert_send(&cni.add_network_list(&net, &rt));
        assert_send(&cni.check_network_list(&net, &rt));
        assert_send(&cni.del_network_list(&net, &rt));
        assert_send(&cni.gc_network_list(&net, &[]));
        assert_send(&cni.status_network_list(&net));
        assert_send(&cni.validate_network_list(&net));
        fn assert_sync<T: Send + Sync>() {}
        assert_sync::<Cni>();
    }
}

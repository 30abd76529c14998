//! Garbage collection: cached attachments of pods that are gone, lock files, the GC verb.

use std::collections::{BTreeMap, BTreeSet};

use cni_exec::GcAttachment;
use cni_lock::LockKey;

use super::Ocicni;
use super::teardown::{del_retried, teardown_netns};
use crate::error::{Error, Result};
use crate::pod::PodNetwork;

impl Ocicni {
    /// [`CniPlugin::gc`]: stale cached attachments torn down, then the GC verb per network.
    pub(super) async fn collect_garbage(&self, valid_pods: &[PodNetwork]) -> Result<()> {
        let _gc = self
            .inner
            .locks
            .lock(&LockKey::gc(), self.inner.opts.lock_timeout)
            .await?;
        let valid: BTreeSet<&str> = valid_pods.iter().map(|p| p.id.as_str()).collect();
        self.sweep_files(&valid);
        let cached = self
            .inner
            .cni
            .cached_attachments(None)
            .await
            .map_err(|source| Error::Cache {
                source: Box::new(source),
            })?;
        let nets = self.snapshot();
        let mut errors = Vec::new();
        let mut still_valid: BTreeMap<String, Vec<GcAttachment>> = BTreeMap::new();
        // Namespace paths that live pods use now, by their own cache entries or as the caller
        // gives them: a stale entry naming one of them names a recycled path, not its own
        // namespace, and its DEL must not run in there (it would remove the live pod's eth0).
        let live_paths: BTreeSet<&str> = cached
            .iter()
            .filter(|att| valid.contains(att.container_id.as_str()))
            .map(|att| att.netns.as_str())
            .chain(valid_pods.iter().map(|p| p.netns.as_str()))
            .filter(|path| !path.is_empty())
            .collect();
        let mut stale_dels = Vec::new();
        for att in &cached {
            if valid.contains(att.container_id.as_str()) {
                still_valid
                    .entry(att.network.clone())
                    .or_default()
                    .push(GcAttachment::new(&att.container_id, &att.if_name));
                continue;
            }
            // A network that sets disableGC opts out of GC altogether, stale DELs included (as
            // libcni's GCNetworkList); the cached configuration decides for networks gone from disk.
            let gc_disabled = match nets.get(&att.network) {
                Some(net) => net.list.disable_gc,
                None => att.network_list().is_ok_and(|n| n.list.disable_gc),
            };
            if gc_disabled {
                continue;
            }
            let mut att = att.clone();
            att.netns = if live_paths.contains(att.netns.as_str()) {
                tracing::info!(
                    container = att.container_id,
                    network = att.network,
                    netns = att.netns,
                    "gc: the stale attachment's namespace path now belongs to a live pod; \
                     tearing down without entering it"
                );
                String::new()
            } else {
                teardown_netns(&att.netns)
            };
            stale_dels.push(att);
        }
        for att in stale_dels {
            tracing::info!(
                container = att.container_id,
                network = att.network,
                "gc: tearing down stale attachment"
            );
            let outcome = del_retried(&att.container_id, &att.network, || {
                self.inner.cni.del_cached_attachment(&att)
            })
            .await;
            if let Err(source) = outcome {
                errors.push(Error::Network {
                    pod: att.container_id.clone(),
                    network: att.network.clone(),
                    ifname: att.if_name.clone(),
                    source: Box::new(source),
                });
            }
        }
        let builtin = nets
            .default
            .iter()
            .filter(|d| !nets.usable.iter().any(|u| u.name() == d.name()));
        for net in nets.usable.iter().chain(builtin) {
            let valid = still_valid.get(net.name()).map_or(&[][..], Vec::as_slice);
            if let Err(source) = self.inner.cni.gc_verb(net, valid).await {
                errors.push(Error::Gc {
                    network: net.name().to_owned(),
                    source: Box::new(source),
                });
            }
        }
        Error::from_many(errors).map_or(Ok(()), Err)
    }

    /// Files of writers and pods that are gone: cache temp files of writers that died mid-write,
    /// and lock files kept after a set-up whose teardown never came. Called under the GC lock,
    /// so nobody holds a pod lock meanwhile.
    fn sweep_files(&self, valid: &BTreeSet<&str>) {
        match self.inner.cni.cache().remove_stale_temp_files() {
            Ok(0) => {}
            Ok(n) => tracing::info!(
                files = n,
                "gc: removed cache files of writers that died mid-write"
            ),
            Err(err) => tracing::warn!(error = %err, "gc: cannot sweep the result cache"),
        }
        let valid_lock_files: BTreeSet<String> = valid
            .iter()
            .map(|id| LockKey::container(id).file_name().to_owned())
            .collect();
        match self
            .inner
            .locks
            .sweep(|name| valid_lock_files.contains(name))
        {
            Ok(0) => {}
            Ok(n) => tracing::info!(files = n, "gc: removed lock files of pods that are gone"),
            Err(err) => tracing::warn!(error = %err, "gc: cannot sweep the lock directory"),
        }
    }
}

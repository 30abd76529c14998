//! Teardown: the attachments a pod has, detached from the cache's record of them.

use std::path::Path;
use std::sync::Arc;

use super::setup::assign_ifnames;
use super::{Ocicni, Target};
use crate::error::{Error, Result};
use crate::netns;
use crate::pod::PodNetwork;

/// Runs a DEL, and once more when it fails.
///
/// DEL should succeed when what it removes is already gone, but plugins do not all manage it:
/// Debian 12's bridge plugin, caught by a crash between its IPAM ADD and its masquerade chain,
/// fails its first DEL on the missing chain after releasing the address and deleting the link,
/// and succeeds on the second. DEL is idempotent by the spec, so trying again is always safe.
pub(super) async fn del_retried<E, F, Fut>(
    container: &str,
    network: &str,
    mut del: F,
) -> std::result::Result<(), E>
where
    E: std::fmt::Display,
    F: FnMut() -> Fut,
    Fut: Future<Output = std::result::Result<(), E>>,
{
    match del().await {
        Ok(()) => Ok(()),
        Err(error) => {
            tracing::warn!(container, network, %error, "DEL failed; trying it once more");
            del().await
        }
    }
}

impl Ocicni {
    /// DELs one attachment of `pod` (retried once, see [`del_retried`]).
    pub(super) async fn del_one(
        &self,
        pod: &PodNetwork,
        target: &Target,
        netns: &str,
    ) -> Result<()> {
        del_retried(&pod.id, &target.name, || self.del_once(pod, target, netns)).await
    }

    async fn del_once(&self, pod: &PodNetwork, target: &Target, netns: &str) -> Result<()> {
        let wrap = |source| Error::Network {
            pod: pod.id.clone(),
            network: target.name.clone(),
            ifname: target.ifname.clone(),
            source: Box::new(source),
        };
        // With its network loaded, DEL uses the cached configuration and arguments when there are
        // some; a network whose file is gone can only be torn down from the cache.
        if let Some(net) = &target.network {
            let rt = self.runtime_conf(pod, &target.name, &target.ifname, netns)?;
            return self
                .inner
                .cni
                .del_network_list(net, &rt)
                .await
                .map_err(wrap);
        }
        let cached = self
            .inner
            .cni
            .cache()
            .get(&target.name, &pod.id, &target.ifname)
            .map_err(wrap)?;
        match cached {
            Some(mut att) => {
                att.netns = netns.to_owned();
                self.inner
                    .cni
                    .del_cached_attachment(&att)
                    .await
                    .map_err(wrap)
            }
            None => Ok(()),
        }
    }

    /// The attachments a teardown or status means: the pod's list, or else every cached
    /// attachment of the pod, or else the default network.
    pub(super) async fn existing_targets(&self, pod: &PodNetwork) -> Result<Vec<Target>> {
        if !pod.networks.is_empty() {
            let nets = self.snapshot();
            return Ok(pod
                .networks
                .iter()
                .zip(assign_ifnames(&pod.networks))
                .map(|(sel, ifname)| Target {
                    network: nets.get(&sel.name).cloned(),
                    name: sel.name.clone(),
                    ifname,
                })
                .collect());
        }
        let cached = self
            .inner
            .cni
            .cached_attachments(Some(&pod.id))
            .await
            .map_err(|source| Error::Cache {
                source: Box::new(source),
            })?;
        let nets = self.snapshot();
        if cached.is_empty() {
            return Ok(nets
                .default
                .iter()
                .map(|d| Target {
                    network: Some(Arc::clone(d)),
                    name: d.name().to_owned(),
                    ifname: "eth0".to_owned(),
                })
                .collect());
        }
        Ok(cached
            .into_iter()
            .map(|att| Target {
                network: nets.get(&att.network).cloned(),
                name: att.network,
                ifname: att.if_name,
            })
            .collect())
    }

    /// [`CniPlugin::teardown_pod`]: every attachment tried, newest first, every error returned.
    pub(super) async fn teardown(&self, pod: &PodNetwork) -> Result<()> {
        let _locks = self.lock_pod(&pod.id).await?;
        let netns = teardown_netns(&pod.netns);
        let targets = self.existing_targets(pod).await?;
        let mut errors = Vec::new();
        for target in targets.iter().rev() {
            if let Err(err) = self.del_one(pod, target, &netns).await {
                errors.push(err);
            }
        }
        Error::from_many(errors).map_or(Ok(()), Err)
    }
}

/// The path to hand plugins at teardown: empty when the namespace is already gone, which the
/// spec allows for DEL and plugins handle.
pub(super) fn teardown_netns(path: &str) -> String {
    if path.is_empty() {
        return String::new();
    }
    // A few syscalls on the path, no namespace switch: fine on the executor.
    if netns::is_netns(Path::new(path)).unwrap_or(false) {
        path.to_owned()
    } else {
        String::new()
    }
}

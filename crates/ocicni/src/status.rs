//! Pod network status: from the cache, by CHECK when asked, or from the namespace itself.

use cni_config::NetworkList;
use cni_exec::{CachedAttachment, RuntimeConf};
use cni_types::result::{Interface, IpConfig};
use cni_types::{CapabilityArgs, CniResult, Version};

use crate::Ocicni;
use crate::error::{Error, Result};
use crate::options::CheckPolicy;
use crate::pod::{AttachmentResult, PodNetwork};

/// The status of one attachment of `pod`.
///
/// The cached ADD result answers without running a plugin. With [`CheckPolicy::Always`], CHECK
/// runs first on networks that support it, with the configuration and arguments ADD cached. Without
/// a cached result (another runtime set the pod up, or the cache was wiped), the interface and its
/// addresses are read inside the namespace.
pub(crate) async fn attachment_status(
    ocicni: &Ocicni,
    pod: &PodNetwork,
    network: Option<&NetworkList>,
    name: &str,
    ifname: &str,
) -> Result<AttachmentResult> {
    let wrap = |source| Error::Network {
        pod: pod.id.clone(),
        network: name.to_owned(),
        ifname: ifname.to_owned(),
        source: Box::new(source),
    };
    let cni = ocicni.cni();
    let cached = cni.cache().get(name, &pod.id, ifname).map_err(wrap)?;
    let cached_result = match &cached {
        Some(att) => att.cni_result().map_err(wrap)?,
        None => None,
    };
    if let (Some(result), Some(entry)) = (cached_result, &cached) {
        if ocicni.check_policy() == CheckPolicy::Always {
            let cached_list = cached_network_list(entry, name);
            if let Some(net) = cached_list.as_ref().or(network)
                && net.version.supports_check()
            {
                let rt = check_runtime_conf(ocicni, pod, entry, name, ifname)?;
                cni.check_network_list(net, &rt).await.map_err(wrap)?;
            }
        }
        let result = match network {
            Some(net) if net.version != result.cni_version() => {
                result.to_version(net.version).unwrap_or(result)
            }
            _ => result,
        };
        return Ok(AttachmentResult {
            network: name.to_owned(),
            ifname: ifname.to_owned(),
            result,
        });
    }
    let version = network.map_or(Version::V1_0_0, |n| n.version);
    let result = from_namespace(pod, ifname, version).await?;
    Ok(AttachmentResult {
        network: name.to_owned(),
        ifname: ifname.to_owned(),
        result,
    })
}

/// The network configuration ADD used, from its cache entry: CHECK must ask the plugins that made
/// the attachment, even when the file changed or is gone since. `None` when the entry has no
/// usable configuration (then the file's network is checked, as Go ocicni falls back to it).
fn cached_network_list(entry: &CachedAttachment, name: &str) -> Option<NetworkList> {
    if entry.config.is_empty() {
        return None;
    }
    match entry.network_list() {
        // The cached result is looked up under the list's name: it must be this entry's.
        Ok(list) if list.name() == name => Some(list),
        Ok(list) => {
            tracing::warn!(
                network = name,
                cached_name = list.name(),
                container = entry.container_id,
                "cached configuration names another network; checking with the current one"
            );
            None
        }
        Err(err) => {
            tracing::warn!(network = name, container = entry.container_id, error = %err,
                "cached configuration does not parse; checking with the current one");
            None
        }
    }
}

/// The runtime configuration CHECK runs with: the CNI_ARGS and capability arguments ADD cached,
/// as Go ocicni takes them from libcni's cache (a caller asking for status need not pass the
/// Kubernetes arguments or port mappings again); the caller's namespace path. The caller's
/// arguments are used only when the entry has none, as libcni keeps them when the cache has none.
fn check_runtime_conf(
    ocicni: &Ocicni,
    pod: &PodNetwork,
    entry: &CachedAttachment,
    name: &str,
    ifname: &str,
) -> Result<RuntimeConf> {
    let mut rt = if entry.cni_args.is_empty() {
        ocicni.runtime_conf(pod, name, ifname, &pod.netns)?
    } else {
        let mut rt = RuntimeConf::new(pod.id.clone(), pod.netns.clone(), ifname);
        rt.args.clone_from(&entry.cni_args);
        rt
    };
    rt.capability_args = match entry.runtime_conf() {
        Ok(cached) => cached.capability_args,
        Err(err) => {
            // As DEL from the cache does: the check goes on without them.
            tracing::warn!(network = name, container = entry.container_id, error = %err,
                "cached capability arguments unusable; checking without them");
            CapabilityArgs::default()
        }
    };
    Ok(rt)
}

/// Builds a result from what the kernel says about `ifname` inside the pod's namespace.
async fn from_namespace(pod: &PodNetwork, ifname: &str, version: Version) -> Result<CniResult> {
    let interfaces = crate::netns::interfaces_async(&pod.netns)
        .await
        .map_err(|source| Error::Netns {
            pod: pod.id.clone(),
            source,
        })?;
    let Some(found) = interfaces.into_iter().find(|i| i.name == ifname) else {
        return Err(Error::InvalidPod {
            pod: pod.id.clone(),
            field: "netns".into(),
            reason: format!(
                "no cached result and no interface {ifname} in {}",
                pod.netns
            ),
        });
    };
    let mut result = CniResult::new(version).map_err(|err| Error::InvalidPod {
        pod: pod.id.clone(),
        field: "netns".into(),
        reason: err.to_string(),
    })?;
    let mut iface = Interface::new(ifname);
    iface.mac = found.mac.unwrap_or_default();
    iface.sandbox.clone_from(&pod.netns);
    result.interfaces.push(iface);
    for address in found.addresses {
        let mut ip = IpConfig::new(address);
        ip.interface = Some(0);
        result.ips.push(ip);
    }
    Ok(result)
}

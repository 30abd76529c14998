//! Pod network status: from the cache, by CHECK when asked, or from the namespace itself.

use cni_config::NetworkList;
use cni_types::result::{Interface, IpConfig};
use cni_types::{CniResult, Version};

use crate::Ocicni;
use crate::error::{Error, Result};
use crate::options::CheckPolicy;
use crate::pod::{AttachmentResult, PodNetwork};

/// The status of one attachment of `pod`.
///
/// The cached ADD result answers without running a plugin. With [`CheckPolicy::Always`], CHECK
/// runs first on networks that support it. Without a cached result (another runtime set the pod
/// up, or the cache was wiped), the interface and its addresses are read inside the namespace.
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
    if let Some(result) = cached_result {
        if let Some(net) = network
            && ocicni.check_policy() == CheckPolicy::Always
            && net.version.supports_check()
        {
            let rt = ocicni.runtime_conf(pod, name, ifname, &pod.netns)?;
            cni.check_network_list(net, &rt).await.map_err(wrap)?;
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

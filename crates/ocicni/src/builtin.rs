//! The built-in default network, for nodes whose configuration directory holds none.

use std::path::PathBuf;

use ipnet::IpNet;
use serde_json::json;

/// Settings of the built-in default network: a bridge with host-local addresses, masquerade
/// and portmap.
///
/// Used only when enabled and the configuration directory holds no usable network. On a node
/// without plugin binaries it runs on the built-in plugins (portmap included); only with
/// `builtin_plugins(Preference::Never)` and no portmap binary does it go without host ports,
/// and its [`NetworkReport`](crate::NetworkReport) says so. The Go ocicni
/// declined to have one; runtimes that want pods to come up on a fresh node asked for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuiltinNetwork {
    /// The network's name (`CNI_NETWORK` and the cache file names).
    pub name: String,
    /// The bridge device on the node.
    pub bridge: String,
    /// The subnet pods get addresses from.
    pub subnet: IpNet,
    /// Where host-local keeps its leases; host-local's own default when `None`.
    pub ipam_data_dir: Option<PathBuf>,
    /// Whether pods may reach themselves through a mapped port (bridge `hairpinMode`).
    pub hairpin: bool,
    /// The MTU of the bridge and pod interfaces; the kernel's default when `None`.
    pub mtu: Option<u32>,
}

impl Default for BuiltinNetwork {
    fn default() -> Self {
        BuiltinNetwork {
            name: "ocicni-default".to_owned(),
            bridge: "cni0".to_owned(),
            // CRI-O's own bridge example uses this range; it is private and rarely routed.
            subnet: IpNet::V4(
                ipnet::Ipv4Net::new(std::net::Ipv4Addr::new(10, 85, 0, 0), 16).unwrap_or_default(),
            ),
            ipam_data_dir: None,
            hairpin: true,
            mtu: None,
        }
    }
}

/// What of the built-in network the node's plugins can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Features {
    /// The `portmap` plugin, for host ports (a binary, or built in as the preference allows).
    pub(crate) portmap: bool,
}

impl BuiltinNetwork {
    /// The network configuration list, as the bytes a file would hold.
    pub fn conflist(&self) -> Vec<u8> {
        self.conflist_with(Features { portmap: true })
    }

    /// The list without what `features` leaves out.
    pub(crate) fn conflist_with(&self, features: Features) -> Vec<u8> {
        let mut ipam = json!({
            "type": "host-local",
            "routes": [{"dst": if self.subnet.addr().is_ipv4() { "0.0.0.0/0" } else { "::/0" }}],
            "ranges": [[{"subnet": self.subnet.trunc().to_string()}]],
        });
        if let (Some(dir), Some(obj)) = (&self.ipam_data_dir, ipam.as_object_mut()) {
            obj.insert("dataDir".to_owned(), json!(dir));
        }
        let mut bridge = json!({
            "type": "bridge",
            "bridge": self.bridge,
            "isGateway": true,
            "ipMasq": true,
            "hairpinMode": self.hairpin,
            "ipam": ipam,
        });
        if let (Some(mtu), Some(obj)) = (self.mtu, bridge.as_object_mut()) {
            obj.insert("mtu".to_owned(), json!(mtu));
        }
        let mut plugins = vec![bridge];
        if features.portmap {
            plugins.push(json!({"type": "portmap", "capabilities": {"portMappings": true}}));
        }
        let list = json!({
            "cniVersion": "1.0.0",
            "name": self.name,
            "plugins": plugins,
        });
        serde_json::to_vec_pretty(&list).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_network_is_a_valid_bridge_list() {
        let net = BuiltinNetwork {
            ipam_data_dir: Some("/tmp/leases".into()),
            ..BuiltinNetwork::default()
        };
        let list = cni_config::parse_conflist(&net.conflist()).unwrap();
        assert_eq!(list.name(), "ocicni-default");
        assert_eq!(list.plugin_types(), ["bridge", "portmap"]);
        let bridge = &list.list.plugins[0];
        assert_eq!(
            bridge.ipam.as_ref().and_then(|i| i.ipam_type.as_deref()),
            Some("host-local")
        );
        let text = String::from_utf8(net.conflist()).unwrap();
        assert!(text.contains("\"subnet\": \"10.85.0.0/16\""), "{text}");
        assert!(text.contains("/tmp/leases"), "{text}");
    }

    #[test]
    fn without_portmap_the_list_is_a_masquerading_bridge() {
        let net = BuiltinNetwork::default();
        let bytes = net.conflist_with(Features { portmap: false });
        let list = cni_config::parse_conflist(&bytes).unwrap();
        assert_eq!(list.plugin_types(), ["bridge"]);
        assert_eq!(
            list.list.plugins[0].extra.get("ipMasq"),
            Some(&serde_json::json!(true))
        );
    }
}

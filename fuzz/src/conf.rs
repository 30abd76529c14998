//! `conf`: network configuration files, as `.conf` and as `.conflist`.

use cni_config::{NetworkList, parse_conf, parse_conflist};

/// Parses `data` both ways; whatever parses must parse again, as a list, from the bytes the
/// runtime writes for it: the list re-serialised, and the configuration cached for teardown.
pub fn check(data: &[u8]) {
    for parse in [parse_conf, parse_conflist] {
        if let Ok(network) = parse(data) {
            let bytes = serde_json::to_vec(&network.list).expect("a parsed list serialises");
            let again = parse_conflist(&bytes).unwrap_or_else(|e| {
                panic!(
                    "the list {} re-serialised does not parse: {e}",
                    String::from_utf8_lossy(&bytes)
                )
            });
            same_network(&network, &again, "re-serialised list");

            // What the result cache stores and a later DEL reads back (`CachedAttachment::
            // network_list`: as a list, else as a single plugin).
            let cached = parse_conflist(&network.cache_config)
                .or_else(|_| parse_conf(&network.cache_config))
                .unwrap_or_else(|e| {
                    panic!(
                        "the cached configuration {} does not parse: {e}",
                        String::from_utf8_lossy(&network.cache_config)
                    )
                });
            same_network(&network, &cached, "cached configuration");
        }
    }
}

fn same_network(first: &NetworkList, again: &NetworkList, what: &str) {
    assert_eq!(first.name(), again.name(), "{what}: network name");
    assert_eq!(
        first.plugin_types(),
        again.plugin_types(),
        "{what}: plugin types"
    );
    assert_eq!(first.version, again.version, "{what}: effective version");
}

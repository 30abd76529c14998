//! `cni_args`: the CNI_ARGS a pod's names and extra arguments become.

use std::net::{IpAddr, Ipv4Addr};

use arbitrary::{Arbitrary, Unstructured};
use ocicni::{CniArgsPolicy, PodNetwork, RuntimeConfig, validate_pod_args};

/// What a runtime hands ocicni about a pod that ends up in CNI_ARGS.
#[derive(Debug, Arbitrary)]
pub struct Input {
    /// `CniArgsPolicy::Kubernetes` when set, else `Plain`.
    pub kubernetes: bool,
    /// `K8S_POD_NAME`.
    pub name: String,
    /// `K8S_POD_NAMESPACE`.
    pub namespace: String,
    /// `K8S_POD_INFRA_CONTAINER_ID`.
    pub id: String,
    /// `K8S_POD_UID`.
    pub uid: String,
    /// The caller's extra arguments.
    pub extra_args: Vec<(String, String)>,
    /// Per network: a static IPv4 address (`IP=`) and MAC (`MAC=`).
    pub runtime: Vec<(String, Option<[u8; 4]>, Option<String>)>,
}

/// Builds the pod from `data` and checks [`holds`].
pub fn check(data: &[u8]) {
    if let Ok(input) = Input::arbitrary_take_rest(Unstructured::new(data)) {
        holds(&input);
    }
}

/// `validate_pod_args` refuses the pod exactly when one of the pairs it would pass has an empty
/// key, or a key or value with `;` or `=` (which the `k=v;k=v` encoding cannot carry).
pub fn holds(input: &Input) {
    let policy = if input.kubernetes {
        CniArgsPolicy::Kubernetes
    } else {
        CniArgsPolicy::Plain
    };
    let pod = PodNetwork {
        name: input.name.clone(),
        namespace: input.namespace.clone(),
        id: input.id.clone(),
        uid: input.uid.clone(),
        extra_args: input.extra_args.clone(),
        runtime_config: input
            .runtime
            .iter()
            .map(|(network, ip, mac)| {
                let config = RuntimeConfig {
                    ip: ip.map(|o| IpAddr::V4(Ipv4Addr::from(o))),
                    mac: mac.clone(),
                    ..RuntimeConfig::default()
                };
                (network.clone(), config)
            })
            .collect(),
        ..PodNetwork::default()
    };

    // The model: every pair any of the pod's attachments would carry.
    let mut pairs: Vec<(&str, &str)> = Vec::new();
    if input.kubernetes {
        pairs.extend([
            ("K8S_POD_NAMESPACE", pod.namespace.as_str()),
            ("K8S_POD_NAME", pod.name.as_str()),
            ("K8S_POD_INFRA_CONTAINER_ID", pod.id.as_str()),
            ("K8S_POD_UID", pod.uid.as_str()),
        ]);
    }
    pairs.extend(pod.extra_args.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    // Keyed by network, so a later duplicate replaces an earlier one, as in the pod.
    pairs.extend(
        pod.runtime_config
            .values()
            .filter_map(|rt| Some(("MAC", rt.mac.as_deref()?))),
    );
    let unsafe_text = |s: &str| s.contains([';', '=']);
    let expect_err = pairs
        .iter()
        .any(|(k, v)| k.is_empty() || unsafe_text(k) || unsafe_text(v));

    let got = validate_pod_args(&pod, policy);
    assert_eq!(
        got.is_err(),
        expect_err,
        "validate_pod_args({pod:?}, {policy:?}) = {got:?}"
    );
    if let Err(e) = got {
        assert!(
            e.to_string().contains("CNI_ARGS["),
            "the error names the argument: {e}"
        );
    }
}

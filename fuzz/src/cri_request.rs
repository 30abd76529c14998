//! `cri_request`: a RunPodSandbox request as it arrives over the CRI socket.

use cri_api::v1::RunPodSandboxRequest;
use crio_lite::cri::convert;
use crio_lite::domain::Sandbox;
use prost::Message;

/// Decodes `data` as a protobuf `RunPodSandboxRequest` and validates it as crio-lite does.
pub fn check(data: &[u8]) {
    let Ok(request) = RunPodSandboxRequest::decode(data) else {
        return;
    };
    let Ok(sandbox) = convert::sandbox_from_request(request) else {
        return;
    };
    assert!(!sandbox.name.name.is_empty(), "accepted without a name");
    assert!(
        !sandbox.name.namespace.is_empty(),
        "accepted without a namespace"
    );
    // A network sysctl (set in the pod's network namespace) or an IPC one (its containers').
    for (key, value) in &sandbox.sysctls {
        assert!(
            ocicni::netns::check_sysctl(key, value).is_ok()
                || oci_container::check_ipc_sysctl(key, value).is_ok(),
            "accepted sysctl {key:?}={value:?}"
        );
    }
    for server in &sandbox.dns.servers {
        assert!(
            server.parse::<std::net::IpAddr>().is_ok(),
            "accepted DNS server {server:?}"
        );
    }
    for mapping in &sandbox.port_mappings {
        assert!(mapping.host_port != 0 && mapping.container_port != 0);
    }
    // The state file: what is written is what the next start reads.
    let state = serde_json::to_vec_pretty(&sandbox).expect("a sandbox serialises");
    let read: Sandbox = serde_json::from_slice(&state).unwrap_or_else(|e| {
        panic!(
            "the state file does not read back: {e}\n{}",
            String::from_utf8_lossy(&state)
        )
    });
    assert_eq!(read, sandbox, "the sandbox after its state file");
    // What CRI answers for it.
    let _ = convert::list_entry(&sandbox);
    let _ = convert::status(&sandbox);
}

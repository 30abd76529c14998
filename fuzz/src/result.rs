//! `result`: what plugins print for ADD and what the result cache holds, in every version.

use cni_types::CniResult;
use cni_types::version::SUPPORTED_VERSIONS;

/// Reads `data` as a result of every supported version and of the version it names itself.
pub fn check(data: &[u8]) {
    for &version in SUPPORTED_VERSIONS {
        if let Ok(result) = CniResult::from_slice(data, version) {
            assert_eq!(result.cni_version(), version, "read as {version}");
            holds(&result);
        }
    }
    if let Ok(result) = CniResult::from_slice_own_version(data) {
        holds(&result);
    }
}

/// A result that was read encodes in its own version and reads back equal, and converts to every
/// supported version without panicking; a conversion that succeeds can be encoded too.
fn holds(result: &CniResult) {
    let version = result.cni_version();
    let bytes = result
        .to_vec()
        .unwrap_or_else(|e| panic!("a {version} result that was read does not encode: {e}"));
    let back = CniResult::from_slice(&bytes, version).unwrap_or_else(|e| {
        panic!(
            "a {version} result does not read back from {}: {e}",
            String::from_utf8_lossy(&bytes)
        )
    });
    assert_eq!(&back, result, "{version} result after encode and read");
    for &target in SUPPORTED_VERSIONS {
        if let Ok(converted) = result.to_version(target) {
            assert_eq!(converted.cni_version(), target);
            if let Err(e) = converted.to_vec() {
                panic!("{version} -> {target} converted but does not encode: {e}");
            }
        }
    }
}

//! `registry`: what a registry sends a pull: a manifest or an image index (fetched by tag), the
//! manifest an index entry names, and an image configuration, parsed as image-store's pull
//! parses them (media type or shape, this node's platform from an index, the configuration's
//! size cap, one diff id per layer, layer media types, chain ids). Credentials and the
//! WWW-Authenticate challenge are oci-client's, not image-store's, so not here.
//!
//! Input: the documents separated by NUL bytes (JSON has none): `top \0 second \0 third`. A
//! manifest on top takes the second part as its configuration; an index on top takes the
//! second as the manifest it chose and the third as the configuration.

use image_store::Platform;
use image_store::fuzzing::registry_documents;

/// Feeds the documents to the pull's parsing, for this node's platform and another; it must
/// refuse or plan, never panic, and what it returns must be bounded by what it was given.
pub fn check(data: &[u8]) {
    let mut parts = data.splitn(3, |&b| b == 0);
    let (top, second, third) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    );
    for platform in [
        Platform::this_node(),
        Platform::new("linux", "arm64", Some("v8")),
    ] {
        match registry_documents(top, second, third, &platform) {
            // Each layer is a descriptor of at least a digest's 71 bytes in the input.
            Ok(layers) => assert!(
                layers * 71 <= data.len(),
                "{layers} layers planned from {} bytes",
                data.len()
            ),
            Err(e) => {
                let message = e.to_string();
                // An error may quote the input (escaped), not grow without bound.
                assert!(
                    message.len() <= 8 * data.len() + 4096,
                    "an error of {} bytes from {} bytes of input",
                    message.len(),
                    data.len()
                );
            }
        }
    }
}

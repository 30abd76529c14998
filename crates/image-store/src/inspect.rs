//! Reading what a stored image says of itself: its configuration.

use oci_spec::image::ImageConfiguration;

use crate::error::{Error, Result};
use crate::index::Image;
use crate::store::Store;

impl Store {
    /// The image's configuration (entrypoint, command, environment, user, working directory,
    /// labels, history), read from its stored and verified configuration blob.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when the blob cannot be read, [`Error::Malformed`] when it is not an image
    /// configuration (the blob was verified against its digest when pulled, so this means the
    /// store was changed behind its back).
    pub fn config(&self, image: &Image) -> Result<ImageConfiguration> {
        let bytes = self.inner.blobs.read(&image.config_digest)?;
        serde_json::from_slice(&bytes).map_err(|e| Error::Malformed {
            image: image
                .names
                .first()
                .cloned()
                .unwrap_or_else(|| image.id.clone()),
            what: format!("config {}", image.config_digest),
            reason: e.to_string(),
        })
    }
}

//! Manifests read with a cap. oci-client reads a manifest's whole body into memory before anyone
//! can look at its size, so a hostile registry could send gigabytes for one; here oci-client only
//! authenticates, and the body is read chunk by chunk until the cap.

use oci_client::RegistryOperation;
use oci_client::errors::OciDistributionError;
use oci_client::secrets::RegistryAuth;

use crate::pull::Puller;

/// The most of an error body kept for the message.
const ERROR_BODY_MAX: usize = 4 << 10;

/// The HTTP client manifests are read with: oci-client's timeouts, its redirect limit, trusting
/// `roots` (the node's CA certificates, when there are any).
pub(crate) fn http_client(
    config: &crate::StoreConfig,
    roots: &[Vec<u8>],
) -> reqwest::Result<reqwest::Client> {
    let mut builder = reqwest::Client::builder()
        .connect_timeout(config.connect_timeout)
        .read_timeout(config.request_timeout * 2)
        .redirect(reqwest::redirect::Policy::limited(10));
    if !roots.is_empty() {
        let certs: reqwest::Result<Vec<reqwest::Certificate>> = roots
            .iter()
            .map(|der| reqwest::Certificate::from_der(der))
            .collect();
        builder = builder.tls_certs_only(certs?);
    }
    builder.build()
}

impl Puller {
    /// GETs the manifest (or index) `target` names, sending `accepted` as `Accept`, and reads at
    /// most `cap` bytes of it; a longer one is refused without being read further.
    pub(crate) async fn get_manifest(
        &self,
        target: &oci_client::Reference,
        accepted: &[&str],
        cap: u64,
    ) -> Result<Vec<u8>, OciDistributionError> {
        let token = self
            .client
            .auth(target, &self.auth, RegistryOperation::Pull)
            .await?;
        let scheme = if self.insecure { "http" } else { "https" };
        let url = format!(
            "{scheme}://{}/v2/{}/manifests/{}",
            target.resolve_registry(),
            target.repository(),
            target.digest().or(target.tag()).unwrap_or("latest")
        );
        let mut request = self
            .http
            .get(&url)
            .header(reqwest::header::ACCEPT, accepted.join(", "));
        request = match (&token, &self.auth) {
            (Some(token), _) => request.bearer_auth(token),
            (None, RegistryAuth::Basic(user, password)) => request.basic_auth(user, Some(password)),
            _ => request,
        };
        let mut response = request.send().await?;
        let status = response.status();
        if !status.is_success() {
            let mut message = Vec::new();
            while let Ok(Some(chunk)) = response.chunk().await {
                message.extend_from_slice(&chunk);
                if message.len() >= ERROR_BODY_MAX {
                    message.truncate(ERROR_BODY_MAX);
                    break;
                }
            }
            return Err(OciDistributionError::ServerError {
                code: status.as_u16(),
                url,
                message: String::from_utf8_lossy(&message).into_owned(),
            });
        }
        let too_large = || {
            OciDistributionError::SpecViolationError(format!(
                "the manifest at {url} is larger than {cap} bytes"
            ))
        };
        if response.content_length().is_some_and(|len| len > cap) {
            return Err(too_large());
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await? {
            self.received(chunk.len());
            if (body.len() + chunk.len()) as u64 > cap {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }
}

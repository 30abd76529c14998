//! The server's TLS configuration: CRI-O's `stream_tls_cert`, `stream_tls_key` and
//! `stream_tls_ca` (the client CA; with it, clients must present a certificate it signed).

use std::path::Path;
use std::sync::Arc;

use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{RootCertStore, ServerConfig, crypto};

use crate::{Error, Result};

/// A certificate chain, its key, and optionally the CA client certificates must chain to.
pub struct TlsConfig {
    cert_chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    client_ca: Option<Vec<CertificateDer<'static>>>,
}

impl Clone for TlsConfig {
    fn clone(&self) -> Self {
        TlsConfig {
            cert_chain: self.cert_chain.clone(),
            key: self.key.clone_key(),
            client_ca: self.client_ca.clone(),
        }
    }
}

impl std::fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsConfig")
            .field("certificates", &self.cert_chain.len())
            .field("client_ca", &self.client_ca.as_ref().map(Vec::len))
            .finish_non_exhaustive()
    }
}

impl TlsConfig {
    /// From PEM text: the certificate chain (leaf first), its private key (PKCS#8, PKCS#1 or
    /// SEC1) and the client CA certificates.
    ///
    /// # Errors
    ///
    /// [`Error::Tls`] naming the part that holds no certificate or key, or does not parse.
    pub fn from_pem(cert_chain: &[u8], key: &[u8], client_ca: Option<&[u8]>) -> Result<TlsConfig> {
        Ok(TlsConfig {
            cert_chain: certs(cert_chain, "certificate chain")?,
            key: PrivateKeyDer::from_pem_slice(key)
                .map_err(|e| Error::Tls(format!("private key: {e}")))?,
            client_ca: client_ca.map(|ca| certs(ca, "client ca")).transpose()?,
        })
    }

    /// From PEM files, as CRI-O's configuration names them.
    ///
    /// # Errors
    ///
    /// [`Error::Tls`] naming the file that cannot be read or holds nothing usable.
    pub fn from_files(
        cert_chain: &Path,
        key: &Path,
        client_ca: Option<&Path>,
    ) -> Result<TlsConfig> {
        let read = |path: &Path| {
            std::fs::read(path).map_err(|e| Error::Tls(format!("{}: {e}", path.display())))
        };
        let named = |path: &Path, e: Error| Error::Tls(format!("{}: {e}", path.display()));
        let ca = client_ca.map(|p| read(p).map(|pem| (p, pem))).transpose()?;
        Ok(TlsConfig {
            cert_chain: certs(&read(cert_chain)?, "certificate chain")
                .map_err(|e| named(cert_chain, e))?,
            key: PrivateKeyDer::from_pem_slice(&read(key)?)
                .map_err(|e| Error::Tls(format!("{}: private key: {e}", key.display())))?,
            client_ca: ca
                .map(|(path, pem)| certs(&pem, "client ca").map_err(|e| named(path, e)))
                .transpose()?,
        })
    }

    /// The acceptor the server wraps connections in.
    pub(crate) fn acceptor(&self) -> Result<TlsAcceptor> {
        let provider = Arc::new(crypto::aws_lc_rs::default_provider());
        let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::Tls(format!("protocol versions: {e}")))?;
        let builder = match &self.client_ca {
            None => builder.with_no_client_auth(),
            Some(cas) => {
                let mut roots = RootCertStore::empty();
                for ca in cas {
                    roots
                        .add(ca.clone())
                        .map_err(|e| Error::Tls(format!("client ca: {e}")))?;
                }
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                        .build()
                        .map_err(|e| Error::Tls(format!("client ca: {e}")))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let mut config = builder
            .with_single_cert(self.cert_chain.clone(), self.key.clone_key())
            .map_err(|e| Error::Tls(format!("certificate and key: {e}")))?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(TlsAcceptor::from(Arc::new(config)))
    }
}

fn certs(pem: &[u8], what: &str) -> Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| Error::Tls(format!("{what}: {e}")))?;
    if certs.is_empty() {
        return Err(Error::Tls(format!("{what}: no certificate in it")));
    }
    Ok(certs)
}

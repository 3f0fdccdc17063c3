//! TLS to an https endpoint, through rustls with the ring provider: the system's roots (or the
//! CA file given), and the client's certificate for mutual TLS.

use std::sync::{Arc, Once};

use rustls::{
    ClientConfig, RootCertStore,
    pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject},
};

use crate::Tls;

/// The process's default crypto provider: ring. The HTTP client builds its TLS from the
/// default when it is given none of its own, and has no default of its own with this
/// feature set.
pub fn install_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // Err when another part of the process installed one first: that one serves.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// The roots to trust: the CA given, else the system's.
fn roots(tls: &Tls) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    match &tls.ca {
        Some(pem) => {
            for cert in CertificateDer::pem_slice_iter(pem) {
                let cert = cert.map_err(|e| format!("the CA file: {e}"))?;
                roots
                    .add(cert)
                    .map_err(|e| format!("the CA file's certificate: {e}"))?;
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            for cert in found.certs {
                // A system certificate rustls cannot use is skipped, as every client does.
                let _ = roots.add(cert);
            }
        }
    }
    if roots.is_empty() {
        return Err(match tls.ca {
            Some(_) => "the CA file holds no certificate".into(),
            None => "the system has no CA certificates (install ca-certificates, or set OTEL_EXPORTER_OTLP_CERTIFICATE)".into(),
        });
    }
    Ok(roots)
}

/// The rustls client configuration of `tls`.
pub fn client_config(tls: &Tls) -> Result<ClientConfig, String> {
    let builder =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots(tls)?);
    match &tls.client {
        None => Ok(builder.with_no_client_auth()),
        Some((cert, key)) => {
            let chain = CertificateDer::pem_slice_iter(cert)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("the client certificate: {e}"))?;
            let key =
                PrivateKeyDer::from_pem_slice(key).map_err(|e| format!("the client key: {e}"))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| format!("the client certificate and key: {e}"))
        }
    }
}

/// A TLS failure another try cannot mend: the endpoint's certificate is not trusted (an
/// unknown CA, expired, another name) or it refused ours. A refused connection or a reset is
/// worth retrying; these are not.
pub fn is_refusal(why: &str) -> bool {
    why.contains("invalid peer certificate")
        || why.contains("peer sent no certificates")
        || why.contains("received fatal alert")
}

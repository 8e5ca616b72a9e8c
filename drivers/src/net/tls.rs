//! What the tunnel's TLS connections trust and present: the system's trust store (read when
//! a driver starts) plus operator CA certificates, and a client certificate for mTLS. Both
//! drivers build their clients from these (ureq's `TlsConfig`, rustls' `ClientConfig`).

use std::fmt;
use std::sync::Arc;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// Why a TLS setting cannot be used. The text names the file's role, never a key's bytes.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// A CA bundle holds no certificate or is not PEM.
    #[error(
        "the CA bundle {what} has no PEM certificate (expected -----BEGIN CERTIFICATE----- blocks)"
    )]
    NoCertificate {
        /// Which bundle, e.g. `--ca-bundle /etc/ssl/corp.pem`.
        what: String,
    },
    /// A client certificate or key cannot be read.
    #[error("the client {what}: {reason}")]
    Identity {
        /// Which, e.g. `certificate --control-plane.client-cert /etc/tls/cp.pem`.
        what: String,
        /// What is wrong.
        reason: String,
    },
    /// Neither the system's store nor an extra bundle gave a root.
    #[error("no trusted CA certificate: the system's trust store is empty or unreadable ({reason}) and no --ca-bundle is given")]
    NoRoots {
        /// Why the system's store gave nothing.
        reason: String,
    },
}

/// CA certificates parsed from a PEM bundle; `what` names it in errors.
pub fn parse_ca_bundle(pem: &[u8], what: &str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(pem)
        .filter_map(Result::ok)
        .collect();
    if certs.is_empty() {
        return Err(TlsError::NoCertificate {
            what: what.to_owned(),
        });
    }
    Ok(certs)
}

/// A client certificate chain and its private key, presented when a server asks (mTLS).
#[derive(Clone)]
pub struct Identity {
    chain: Arc<Vec<CertificateDer<'static>>>,
    key: Arc<PrivateKeyDer<'static>>,
    /// The key's PEM block as given (ureq takes a key in PEM form).
    #[cfg_attr(not(feature = "blocking"), allow(dead_code))]
    key_pem: Arc<Vec<u8>>,
}

impl fmt::Debug for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Identity({} certificates, key [redacted])",
            self.chain.len()
        )
    }
}

impl Identity {
    /// From PEM: `cert_pem` the certificate (and its chain), `key_pem` the private key (PKCS#8,
    /// PKCS#1 or SEC1). `cert_what`/`key_what` name them in errors.
    pub fn from_pem(
        cert_pem: &[u8],
        cert_what: &str,
        key_pem: &[u8],
        key_what: &str,
    ) -> Result<Self, TlsError> {
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem)
            .filter_map(Result::ok)
            .collect();
        if chain.is_empty() {
            return Err(TlsError::Identity {
                what: format!("certificate {cert_what}"),
                reason: "no PEM certificate in it".to_owned(),
            });
        }
        let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|_| TlsError::Identity {
            what: format!("key {key_what}"),
            reason: "no PEM private key in it (PKCS#8, PKCS#1 or SEC1)".to_owned(),
        })?;
        #[cfg(any(feature = "blocking", feature = "smol"))]
        check_pair(&chain, &key, cert_what, key_what)?;
        Ok(Identity {
            chain: Arc::new(chain),
            key: Arc::new(key),
            key_pem: Arc::new(key_pem.to_vec()),
        })
    }

    /// The certificate chain.
    #[must_use]
    pub fn chain(&self) -> &[CertificateDer<'static>] {
        &self.chain
    }

    /// The private key.
    #[must_use]
    pub fn key(&self) -> &PrivateKeyDer<'static> {
        &self.key
    }
}

/// Checks that `key` is a key rustls can sign with and the private half of the first
/// certificate's public key (else ureq would panic on the pair at the first connection).
#[cfg(any(feature = "blocking", feature = "smol"))]
fn check_pair(
    chain: &[CertificateDer<'static>],
    key: &PrivateKeyDer<'static>,
    cert_what: &str,
    key_what: &str,
) -> Result<(), TlsError> {
    let provider = rustls::crypto::ring::default_provider();
    let signing = provider
        .key_provider
        .load_private_key(key.clone_key())
        .map_err(|e| TlsError::Identity {
            what: format!("key {key_what}"),
            reason: format!("the key cannot sign: {e}"),
        })?;
    rustls::sign::CertifiedKey::new(chain.to_vec(), signing)
        .keys_match()
        .map_err(|_| TlsError::Identity {
            what: format!("certificate {cert_what}"),
            reason: format!("its public key is not the key in {key_what}"),
        })
}

/// The tunnel's TLS settings: what it trusts and which client certificate each kind of
/// destination gets.
#[derive(Clone, Debug)]
pub struct TunnelTls {
    /// Read the system's trust store when the driver starts (`true` by default); with `false`,
    /// only `extra_roots` are trusted.
    pub system_roots: bool,
    /// CA certificates trusted besides the system's (`--ca-bundle`).
    pub extra_roots: Vec<CertificateDer<'static>>,
    /// Presented to the control plane (and cloudflared's runtime fetch) when it asks.
    pub control_plane_identity: Option<Identity>,
    /// Presented to MCP servers (and Harpoon's targets, which share the forward path) when
    /// they ask.
    pub mcp_identity: Option<Identity>,
    /// A server's own client certificate (`client-cert=`/`client-key=` in its
    /// `--mcp.server-url` entry), by its URL: presented to it instead of `mcp_identity`.
    pub mcp_servers: std::collections::BTreeMap<String, Identity>,
}

impl Default for TunnelTls {
    fn default() -> Self {
        TunnelTls {
            system_roots: true,
            extra_roots: Vec::new(),
            control_plane_identity: None,
            mcp_identity: None,
            mcp_servers: std::collections::BTreeMap::new(),
        }
    }
}

/// The roots a driver trusts, and where they came from (for its start-up log line).
#[cfg(any(feature = "blocking", feature = "smol"))]
#[derive(Clone, Debug)]
pub struct Roots {
    /// Every root.
    pub certs: Arc<Vec<CertificateDer<'static>>>,
    /// How many came from the system's store.
    pub system: usize,
    /// How many came from `extra_roots`.
    pub extra: usize,
    /// Why the system's store gave no certificate, when it gave none.
    pub system_problem: Option<String>,
    /// Whether the bundled Mozilla roots stand in for an empty system store (only when no
    /// extra roots are given: with a CA bundle and an empty store, the bundle alone is
    /// trusted, as a private-PKI container expects).
    pub bundled: bool,
}

#[cfg(any(feature = "blocking", feature = "smol"))]
/// Reads the system's trust store (when asked; `SSL_CERT_FILE`/`SSL_CERT_DIR` are honoured)
/// and adds the extra roots. An empty or unreadable system store is said in
/// [`Roots::system_problem`]; without extra roots the bundled Mozilla roots stand in.
pub fn load_roots(tls: &TunnelTls) -> Result<Roots, TlsError> {
    let mut certs: Vec<CertificateDer<'static>> = Vec::new();
    let (mut system, mut problem) = (0, None);
    if tls.system_roots {
        let found = rustls_native_certs::load_native_certs();
        system = found.certs.len();
        certs.extend(found.certs);
        if system == 0 {
            let why = found
                .errors
                .first()
                .map_or_else(|| "no certificate found".to_owned(), ToString::to_string);
            problem = Some(why);
        }
    }
    let bundled = tls.system_roots && system == 0 && tls.extra_roots.is_empty();
    certs.extend(tls.extra_roots.iter().cloned());
    if certs.is_empty() && !bundled {
        return Err(TlsError::NoRoots {
            reason: problem.unwrap_or_else(|| "it is not read".to_owned()),
        });
    }
    Ok(Roots {
        certs: Arc::new(certs),
        system,
        extra: tls.extra_roots.len(),
        system_problem: problem,
        bundled,
    })
}

#[cfg(feature = "smol")]
/// A rustls root store with `roots` (and the bundled Mozilla roots when they stand in).
#[must_use]
pub fn root_store(roots: &Roots) -> rustls::RootCertStore {
    let mut store = rustls::RootCertStore::empty();
    if roots.bundled {
        store.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    }
    // A system certificate rustls cannot use (an old or odd one) is skipped, not fatal.
    let _ = store.add_parsable_certificates(roots.certs.iter().cloned());
    store
}

#[cfg(feature = "smol")]
/// A rustls client configuration trusting `roots`, presenting `identity` when asked (ring,
/// TLS 1.2 and 1.3, ALPN http/1.1).
pub fn client_config(
    roots: &Roots,
    identity: Option<&Identity>,
) -> Result<Arc<rustls::ClientConfig>, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS set-up: {e}"))?
        .with_root_certificates(root_store(roots));
    let mut config = match identity {
        None => builder.with_no_client_auth(),
        Some(id) => builder
            .with_client_auth_cert(id.chain().to_vec(), id.key().clone_key())
            .map_err(|e| format!("the client certificate and key do not go together: {e}"))?,
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// ureq's TLS settings trusting `roots`, presenting `identity` when asked.
#[cfg(feature = "blocking")]
#[must_use]
pub fn ureq_config(roots: &Roots, identity: Option<&Identity>) -> ureq::tls::TlsConfig {
    use ureq::tls::{Certificate, ClientCert, PrivateKey, RootCerts};
    let root_certs = if roots.bundled {
        RootCerts::WebPki
    } else {
        RootCerts::new_with_certs(
            &roots
                .certs
                .iter()
                .map(|c| Certificate::from_der(c.as_ref()).to_owned())
                .collect::<Vec<_>>(),
        )
    };
    let client_cert = identity.and_then(|id| {
        let key = PrivateKey::from_pem(&id.key_pem).ok()?;
        let chain: Vec<Certificate<'static>> = id
            .chain()
            .iter()
            .map(|c| Certificate::from_der(c.as_ref()).to_owned())
            .collect();
        Some(ClientCert::new_with_certs(&chain, key))
    });
    ureq::tls::TlsConfig::builder()
        .root_certs(root_certs)
        .client_cert(client_cert)
        .build()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn bundles_and_identities_parse_or_say_what_is_wrong() {
        let e = parse_ca_bundle(b"not pem", "--ca-bundle /x.pem").unwrap_err();
        assert_eq!(
            e.to_string(),
            "the CA bundle --ca-bundle /x.pem has no PEM certificate (expected -----BEGIN CERTIFICATE----- blocks)"
        );
        let e = Identity::from_pem(b"", "--c /c.pem", b"", "--k /k.pem").unwrap_err();
        assert!(e.to_string().contains("certificate --c /c.pem"), "{e}");
    }

    #[cfg(any(feature = "blocking", feature = "smol"))]
    #[test]
    fn without_the_system_store_only_the_extra_roots_are_trusted() {
        let tls = TunnelTls {
            system_roots: false,
            ..TunnelTls::default()
        };
        assert!(matches!(load_roots(&tls), Err(TlsError::NoRoots { .. })));
    }
}

//! `private_key_jwt` client authentication (RFC 7523 §2.2, OpenID Connect Core §9): a JWT the
//! client signs with its private key, sent as `client_assertion` with `client_assertion_type`
//! `urn:ietf:params:oauth:client-assertion-type:jwt-bearer`. Its claims: `iss` and `sub` the
//! client id, `aud` the authorization server's issuer, `iat`, `exp` (five minutes on), and a
//! `jti` unique per assertion. ES256 (P-256, SHA-256) is the one algorithm signed here.

use base64::Engine as _;
use p256::ecdsa::signature::Signer as _;
use p256::ecdsa::{Signature, SigningKey};
use p256::pkcs8::DecodePrivateKey as _;

use super::secret::Secret;

/// `client_assertion_type` for a JWT assertion.
pub const JWT_BEARER_ASSERTION_TYPE: &str =
    "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/// How long an assertion is valid.
pub const ASSERTION_LIFETIME_SECS: u64 = 300;

/// A private key an assertion can be signed with.
#[derive(Clone, PartialEq, Eq)]
pub struct AssertionKey {
    /// The PKCS#8 PEM text (a secret).
    pem: Secret,
    algorithm: String,
}

impl std::fmt::Debug for AssertionKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AssertionKey")
            .field("algorithm", &self.algorithm)
            .finish_non_exhaustive()
    }
}

/// Why an assertion cannot be made.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AssertionError {
    /// Only ES256 is signed.
    #[error("the signing algorithm {0:?} is not supported (ES256 is)")]
    Algorithm(String),
    /// The key is not a PKCS#8 PEM P-256 private key.
    #[error("the private key is not a PKCS#8 PEM P-256 key: {0}")]
    Key(String),
}

impl AssertionKey {
    /// A key from its PKCS#8 PEM text, for `algorithm` (`ES256`). Checked at once.
    pub fn new(pem: Secret, algorithm: &str) -> Result<Self, AssertionError> {
        if algorithm != "ES256" {
            return Err(AssertionError::Algorithm(algorithm.to_owned()));
        }
        SigningKey::from_pkcs8_pem(pem.expose()).map_err(|e| AssertionError::Key(e.to_string()))?;
        Ok(AssertionKey {
            pem,
            algorithm: algorithm.to_owned(),
        })
    }

    /// The signed assertion for `client_id` at the issuer `audience`, issued at `now_secs`
    /// (seconds since the Unix epoch), with `jti`.
    pub fn assertion(
        &self,
        client_id: &str,
        audience: &str,
        now_secs: u64,
        jti: &str,
    ) -> Result<Secret, AssertionError> {
        let key = SigningKey::from_pkcs8_pem(self.pem.expose())
            .map_err(|e| AssertionError::Key(e.to_string()))?;
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let header = serde_json::json!({"alg": "ES256", "typ": "JWT"});
        let claims = serde_json::json!({
            "iss": client_id,
            "sub": client_id,
            "aud": audience,
            "iat": now_secs,
            "exp": now_secs + ASSERTION_LIFETIME_SECS,
            "jti": jti,
        });
        let signing_input = format!(
            "{}.{}",
            b64.encode(header.to_string()),
            b64.encode(claims.to_string())
        );
        let signature: Signature = key.sign(signing_input.as_bytes());
        // JWS ES256: the raw 64-byte r || s (RFC 7518 §3.4), not DER.
        let sig = b64.encode(signature.to_bytes());
        Ok(Secret::new(format!("{signing_input}.{sig}")))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use p256::ecdsa::signature::Verifier as _;
    use p256::ecdsa::VerifyingKey;
    use p256::pkcs8::EncodePrivateKey as _;

    fn key() -> (String, VerifyingKey) {
        let signing = SigningKey::from_bytes(&[7u8; 32].into()).unwrap();
        let pem = signing.to_pkcs8_pem(p256::pkcs8::LineEnding::LF).unwrap();
        (pem.to_string(), *signing.verifying_key())
    }

    #[test]
    fn an_es256_assertion_verifies_and_carries_the_claims() {
        let (pem, verifying) = key();
        let k = AssertionKey::new(Secret::new(pem), "ES256").unwrap();
        let jwt = k
            .assertion("client-1", "https://as.example", 1_800_000_000, "j1")
            .unwrap();
        let parts: Vec<&str> = jwt.expose().split('.').collect();
        assert_eq!(parts.len(), 3);
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let claims: serde_json::Value =
            serde_json::from_slice(&b64.decode(parts[1]).unwrap()).unwrap();
        assert_eq!(claims["iss"], "client-1");
        assert_eq!(claims["sub"], "client-1");
        assert_eq!(claims["aud"], "https://as.example");
        assert_eq!(claims["exp"], 1_800_000_000u64 + ASSERTION_LIFETIME_SECS);
        let sig = Signature::from_slice(&b64.decode(parts[2]).unwrap()).unwrap();
        verifying
            .verify(format!("{}.{}", parts[0], parts[1]).as_bytes(), &sig)
            .unwrap();
        assert!(!format!("{k:?}").contains("PRIVATE"));
    }

    #[test]
    fn bad_keys_and_algorithms_are_refused() {
        let (pem, _) = key();
        assert!(matches!(
            AssertionKey::new(Secret::new(pem), "RS256"),
            Err(AssertionError::Algorithm(_))
        ));
        assert!(matches!(
            AssertionKey::new(Secret::new("not a key"), "ES256"),
            Err(AssertionError::Key(_))
        ));
    }
}

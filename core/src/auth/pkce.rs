//! Placeholder (replaced by the h/challenge branch's module at merge).
use base64::Engine as _;
use sha2::Digest as _;

/// A PKCE code verifier (RFC 7636 §4.1).
#[derive(Clone, PartialEq, Eq)]
pub struct PkceVerifier(String);

impl PkceVerifier {
    /// From 32 random bytes.
    pub fn from_random(bytes: [u8; 32]) -> Self {
        PkceVerifier(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
    }
    /// The verifier.
    pub fn as_str(&self) -> &str {
        &self.0
    }
    /// BASE64URL(SHA256(verifier)).
    pub fn challenge(&self) -> String {
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(sha2::Sha256::digest(self.0.as_bytes()))
    }
}

impl std::fmt::Debug for PkceVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PkceVerifier(<redacted>)")
    }
}

/// An OAuth `state` value.
#[derive(Clone, PartialEq, Eq)]
pub struct OAuthState(String);

impl OAuthState {
    /// From 16 random bytes.
    pub fn from_random(bytes: [u8; 16]) -> Self {
        OAuthState(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
    }
    /// The value.
    pub fn as_str(&self) -> &str {
        &self.0
    }
    /// Whether `other` is this state.
    pub fn matches(&self, other: &str) -> bool {
        self.0.len() == other.len()
            && self
                .0
                .bytes()
                .zip(other.bytes())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0
    }
}

impl std::fmt::Debug for OAuthState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OAuthState(<redacted>)")
    }
}

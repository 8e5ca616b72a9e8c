//! # mcpwire-dev
//!
//! Local dev servers, for people trying the tunnel path and for end-to-end tests: a reference
//! MCP server ([`mcp_server`], `mcpwire dev mcp-server`; with `--auth` an OAuth-protected
//! resource with a loopback authorization server of its own, [`auth_server`]) and a local
//! Secure MCP Tunnel control plane ([`control_plane`], `mcpwire dev control-plane`). Both run on blocking std threads over
//! a small HTTP/1.1 server ([`http`]), bind loopback by default, bound every body and queue,
//! and stop cleanly through a handle (`stop()`), so tests can start them in-process on port 0.
//!
//! These are servers, not drivers of the core's client state machines, but they use the core's
//! protocol pieces wherever one exists: JSON-RPC classification and error bodies
//! ([`mcpwire_core::jsonrpc`]), the Streamable HTTP headers and their value encoding
//! ([`mcpwire_core::mcp::headers`]: the server checks received headers against the ones the
//! core would build from the body), `server/discover` ([`mcpwire_core::mcp::discover`]), the
//! legacy versions ([`mcpwire_core::mcp::legacy`]), and the tunnel's wire types
//! ([`mcpwire_core::tunnel::wire`], [`mcpwire_core::tunnel::response_timeout`]).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::fmt;

pub mod auth_server;
pub mod control_plane;
pub mod http;
pub mod mcp_server;

/// A bearer API key. Its value never appears in `Debug`, `Display` or an error.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

/// Why an API key could not be read. Never holds the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiKeyError {
    /// `env:VAR` names a variable that is unset or not Unicode.
    EnvUnset(String),
    /// `file:PATH` could not be read.
    File(String, String),
    /// The key is empty, or holds a character a header cannot carry.
    Invalid(&'static str),
}

impl fmt::Display for ApiKeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ApiKeyError::EnvUnset(var) => {
                write!(f, "the environment variable {var} is not set")
            }
            ApiKeyError::File(path, why) => write!(f, "cannot read the key file {path}: {why}"),
            ApiKeyError::Invalid(why) => write!(f, "the API key is not usable: {why}"),
        }
    }
}

impl std::error::Error for ApiKeyError {}

impl ApiKey {
    /// A key from its text: non-empty visible ASCII (a bearer token's characters).
    pub fn new(key: impl Into<String>) -> Result<ApiKey, ApiKeyError> {
        let key = key.into();
        if key.is_empty() {
            return Err(ApiKeyError::Invalid("it is empty"));
        }
        if !key.bytes().all(|b| (0x21..=0x7e).contains(&b)) {
            return Err(ApiKeyError::Invalid(
                "it holds a space, a control character or a non-ASCII character",
            ));
        }
        Ok(ApiKey(key))
    }

    /// Reads a key given as `env:VAR` (an environment variable), `file:PATH` (a file, one
    /// trailing line break ignored) or, otherwise, the key itself.
    pub fn from_source(source: &str) -> Result<ApiKey, ApiKeyError> {
        if let Some(var) = source.strip_prefix("env:") {
            let value = std::env::var(var)
                .map_err(|_| ApiKeyError::EnvUnset(var.chars().take(128).collect()))?;
            ApiKey::new(value)
        } else if let Some(path) = source.strip_prefix("file:") {
            let text = std::fs::read_to_string(path)
                .map_err(|e| ApiKeyError::File(path.to_owned(), e.kind().to_string()))?;
            let text = text.strip_suffix('\n').unwrap_or(&text);
            let text = text.strip_suffix('\r').unwrap_or(text);
            ApiKey::new(text)
        } else {
            ApiKey::new(source)
        }
    }

    /// The key, for a client that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether an `Authorization` header value is `Bearer <this key>` (compared in constant
    /// time over the key's length).
    pub fn matches_authorization(&self, authorization: Option<&str>) -> bool {
        let Some(value) = authorization else {
            return false;
        };
        let Some((scheme, token)) = value.trim().split_once(' ') else {
            return false;
        };
        if !scheme.eq_ignore_ascii_case("bearer") {
            return false;
        }
        let token = token.trim().as_bytes();
        let key = self.0.as_bytes();
        let mut diff = u8::from(token.len() != key.len());
        for (i, k) in key.iter().enumerate() {
            diff |= k ^ token.get(i).copied().unwrap_or(0);
        }
        diff == 0
    }
}

/// A hard-to-guess identifier for dev use (session ids, request ids, shard tokens): 128 bits
/// from std's randomly keyed SipHash over a counter and the clock. Not for cryptography.
pub fn random_token(prefix: &str) -> String {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let mut parts = [0u64; 2];
    for (i, part) in parts.iter_mut().enumerate() {
        let mut h = RandomState::new().build_hasher();
        h.write_u64(n);
        h.write_u128(nanos);
        h.write_usize(i);
        *part = h.finish();
    }
    format!("{prefix}{:016x}{:016x}", parts[0], parts[1])
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_key_matches_only_its_own_bearer_header() {
        let key = ApiKey::new("sk-dev-123").unwrap();
        assert!(key.matches_authorization(Some("Bearer sk-dev-123")));
        assert!(key.matches_authorization(Some("bearer  sk-dev-123 ")));
        assert!(!key.matches_authorization(Some("Bearer sk-dev-1234")));
        assert!(!key.matches_authorization(Some("Bearer sk-dev-12")));
        assert!(!key.matches_authorization(Some("Basic sk-dev-123")));
        assert!(!key.matches_authorization(Some("sk-dev-123")));
        assert!(!key.matches_authorization(None));
    }

    #[test]
    fn key_sources_read_env_file_and_literal_and_never_show_the_key() {
        std::env::set_var("MCPWIRE_TEST_DEV_KEY_SOURCE", "sk-from-env");
        let k = ApiKey::from_source("env:MCPWIRE_TEST_DEV_KEY_SOURCE").unwrap();
        assert_eq!(k.expose(), "sk-from-env");
        assert!(!format!("{k:?}").contains("sk-from-env"));
        let dir = std::env::temp_dir().join(format!("mcpwire-key-{}", std::process::id()));
        std::fs::write(&dir, "sk-from-file\n").unwrap();
        let k = ApiKey::from_source(&format!("file:{}", dir.display())).unwrap();
        assert_eq!(k.expose(), "sk-from-file");
        let _ = std::fs::remove_file(&dir);
        assert_eq!(
            ApiKey::from_source("sk-literal").unwrap().expose(),
            "sk-literal"
        );
        let err = ApiKey::from_source("env:MCPWIRE_TEST_DEV_KEY_UNSET_XYZ").unwrap_err();
        assert!(err.to_string().contains("MCPWIRE_TEST_DEV_KEY_UNSET_XYZ"));
        assert!(ApiKey::new("has space").is_err());
        assert!(ApiKey::new("").is_err());
    }

    #[test]
    fn random_tokens_differ() {
        let a = random_token("s_");
        let b = random_token("s_");
        assert_ne!(a, b);
        assert!(a.starts_with("s_") && a.len() == 34);
    }
}

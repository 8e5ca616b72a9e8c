//! [`Secret`]: a string that must not end up in logs (an access or refresh token, a client
//! secret, a PKCE code verifier).
//!
//! `Debug` and `Display` print `Secret(<redacted, N bytes>)`, never the value, so a `{:?}` of any
//! struct that holds one (a token set, a client registration, an error) is safe to log. The only
//! way to the text is [`Secret::expose`] (or [`Secret::into_exposed`]), a name that is easy to
//! search for in review. Serde sees the bare string (`#[serde(transparent)]`), so a token store
//! keeps its JSON shape.
//!
//! Dropping a `Secret` overwrites its bytes with zeros first. This is best effort only: the
//! core is `#![forbid(unsafe_code)]` and has no `zeroize` dependency, a `String` that grew may
//! have left copies in memory it freed, and every copy handed out through
//! [`Secret::expose`] is the caller's. It narrows the window; it does not close it.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A string whose value `Debug` and `Display` never show; see the [module docs](self).
///
/// Equality compares the values (it is not constant-time: compare authenticators received from
/// a peer with a constant-time check such as [`OAuthState::matches`](super::OAuthState::matches)).
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// Wraps a value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The value itself. Every call site is a place where the secret leaves the wrapper: send
    /// it (an `Authorization` header, a token request body), never log it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The value itself, taking the wrapper apart (the returned `String` is no longer wiped on
    /// drop).
    pub fn into_exposed(mut self) -> String {
        std::mem::take(&mut self.0)
    }

    /// The length of the value in bytes (what `Debug` shows).
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the value is the empty string.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Self {
        Self(value)
    }
}

impl From<&str> for Secret {
    fn from(value: &str) -> Self {
        Self(value.to_owned())
    }
}

impl fmt::Debug for Secret {
    /// `Secret(<redacted, N bytes>)`: the length only.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secret(<redacted, {} bytes>)", self.0.len())
    }
}

impl fmt::Display for Secret {
    /// The same as `Debug`: `Secret(<redacted, N bytes>)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

impl Drop for Secret {
    /// Overwrites the bytes with zeros before the allocation is freed (best effort; see the
    /// module docs).
    fn drop(&mut self) {
        let mut bytes = std::mem::take(&mut self.0).into_bytes();
        bytes.fill(0);
        // Keeps the optimizer from dropping the writes as dead stores before the free.
        std::hint::black_box(&bytes);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const VALUE: &str = "tok-4f9a2c-very-secret";

    #[derive(Debug, Serialize, Deserialize, PartialEq)]
    struct TokenSet {
        access_token: Secret,
        refresh_token: Option<Secret>,
        scope: String,
    }

    fn token_set() -> TokenSet {
        TokenSet {
            access_token: Secret::new(VALUE),
            refresh_token: Some(Secret::from("refresh-77e1")),
            scope: "files:read".to_owned(),
        }
    }

    #[test]
    fn debug_and_display_show_the_length_not_the_value() {
        let s = Secret::new(VALUE);
        assert_eq!(format!("{s:?}"), "Secret(<redacted, 22 bytes>)");
        assert_eq!(format!("{s}"), "Secret(<redacted, 22 bytes>)");
        assert_eq!(s.to_string(), "Secret(<redacted, 22 bytes>)");
    }

    #[test]
    fn a_struct_holding_secrets_never_formats_them() {
        let t = token_set();
        for text in [
            format!("{t:?}"),
            format!("{t:#?}"),
            format!("{:?}", Some(&t)),
            format!("{:?}", vec![&t.access_token]),
            format!("{:>40}", t.access_token),
            format!("{:<40?}", t.access_token),
        ] {
            assert!(!text.contains(VALUE), "{text}");
            assert!(!text.contains("refresh-77e1"), "{text}");
            assert!(!text.contains("tok-"), "{text}");
        }
        assert!(format!("{t:?}").contains("files:read"));
    }

    #[test]
    fn serde_sees_the_bare_string() {
        let t = token_set();
        let json = serde_json::to_string(&t).unwrap();
        assert_eq!(
            json,
            r#"{"access_token":"tok-4f9a2c-very-secret","refresh_token":"refresh-77e1","scope":"files:read"}"#
        );
        let back: TokenSet = serde_json::from_str(&json).unwrap();
        assert_eq!(back, t);
        let bare: Secret = serde_json::from_str(r#""abc""#).unwrap();
        assert_eq!(bare.expose(), "abc");
    }

    #[test]
    fn expose_and_into_exposed_give_the_value() {
        let s = Secret::new(VALUE);
        assert_eq!(s.expose(), VALUE);
        assert_eq!(s.len(), VALUE.len());
        assert!(!s.is_empty());
        assert!(Secret::default().is_empty());
        assert_eq!(s.clone().into_exposed(), VALUE);
        assert_eq!(s, Secret::from(VALUE.to_owned()));
        assert_ne!(s, Secret::new("other"));
    }
}

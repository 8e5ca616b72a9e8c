//! What a finished authorization leaves behind, and what the token store keeps: the
//! [`Grant`] for one (authorization server `issuer`, `resource`) pair.
//!
//! Everything a restart needs to refresh instead of logging in again is in it: the absolute
//! expiry (seconds since the Unix epoch, not a relative `expires_in`), the refresh token, the
//! client registration, and the authorization server's metadata (so a refresh needs no
//! discovery). Tokens and client secrets are [`Secret`]s: `Debug` never shows them; `serde`
//! writes them, for the token store only.

use serde::{Deserialize, Serialize};

use super::metadata::AuthorizationServerMetadata;
use super::secret::Secret;
use crate::time::{Duration, SystemTime, UNIX_EPOCH};

/// How long before its expiry an access token counts as due for a refresh.
pub const REFRESH_AHEAD: Duration = Duration::from_secs(60);

/// How the client authenticates at the token endpoint (RFC 7591 §2 names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum TokenEndpointAuth {
    /// A public client: `client_id` in the form, no secret.
    None,
    /// HTTP Basic with the form-encoded id and secret (RFC 6749 §2.3.1).
    ClientSecretBasic,
    /// `client_id` and `client_secret` in the form.
    ClientSecretPost,
    /// A JWT signed with the client's private key (RFC 7523); the key stays in the
    /// configuration, never in a grant.
    PrivateKeyJwt,
}

impl TokenEndpointAuth {
    /// The RFC 7591 name.
    pub fn as_str(self) -> &'static str {
        match self {
            TokenEndpointAuth::None => "none",
            TokenEndpointAuth::ClientSecretBasic => "client_secret_basic",
            TokenEndpointAuth::ClientSecretPost => "client_secret_post",
            TokenEndpointAuth::PrivateKeyJwt => "private_key_jwt",
        }
    }

    /// The method an RFC 7591 name stands for, if it is one of ours.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "none" => Some(TokenEndpointAuth::None),
            "client_secret_basic" => Some(TokenEndpointAuth::ClientSecretBasic),
            "client_secret_post" => Some(TokenEndpointAuth::ClientSecretPost),
            "private_key_jwt" => Some(TokenEndpointAuth::PrivateKeyJwt),
            _ => None,
        }
    }
}

/// Where the client's identity came from (client-registration.mdx's three mechanisms).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RegistrationKind {
    /// Given by the user or the host (pre-registration).
    PreRegistered,
    /// A Client ID Metadata Document: the `client_id` is its HTTPS URL (portable across
    /// authorization servers).
    MetadataDocument,
    /// Dynamic Client Registration (RFC 7591) at this issuer.
    Dynamic,
}

/// The client's identity at one authorization server.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClientRegistration {
    /// `client_id`.
    pub client_id: String,
    /// `client_secret`, for confidential clients.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<Secret>,
    /// How it authenticates at the token endpoint.
    pub auth_method: TokenEndpointAuth,
    /// Where it came from.
    pub kind: RegistrationKind,
}

/// The tokens of a grant.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Tokens {
    /// The access token, sent as `Authorization: Bearer` to the resource only.
    pub access_token: Secret,
    /// The refresh token, when the server issued one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<Secret>,
    /// When the access token expires, in seconds since the Unix epoch (absent: unknown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
    /// The scope granted (the token response's `scope`, else the scope requested).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}

impl Tokens {
    /// Whether the access token has expired at `wall`, or will within [`REFRESH_AHEAD`].
    pub fn expires_soon(&self, wall: SystemTime) -> bool {
        let Some(at) = self.expires_at else {
            return false;
        };
        let now = unix_seconds(wall);
        now.saturating_add(REFRESH_AHEAD.as_secs()) >= at
    }

    /// The granted scopes, one by one.
    pub fn scopes(&self) -> impl Iterator<Item = &str> {
        self.scope
            .as_deref()
            .unwrap_or_default()
            .split(' ')
            .filter(|s| !s.is_empty())
    }
}

/// Seconds since the Unix epoch at `wall` (0 before it).
pub fn unix_seconds(wall: SystemTime) -> u64 {
    wall.duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// One authorization: for `resource`, from the authorization server `issuer`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Grant {
    /// The `resource` the tokens were requested for (RFC 8707), as sent.
    pub resource: String,
    /// The authorization server's issuer identifier, as received.
    pub issuer: String,
    /// Its validated metadata.
    pub server_metadata: AuthorizationServerMetadata,
    /// The client's identity there.
    pub client: ClientRegistration,
    /// The tokens.
    pub tokens: Tokens,
    /// The scope last requested (the base of a step-up's union).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_scope: Option<String>,
}

/// The union of two space-separated scope lists, `a`'s order first, without duplicates.
pub fn scope_union(a: Option<&str>, b: Option<&str>) -> Option<String> {
    let mut out: Vec<&str> = Vec::new();
    for s in a
        .into_iter()
        .chain(b)
        .flat_map(|l| l.split(' '))
        .filter(|s| !s.is_empty())
    {
        if !out.contains(&s) {
            out.push(s);
        }
    }
    (!out.is_empty()).then(|| out.join(" "))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn scope_union_keeps_order_and_drops_duplicates() {
        assert_eq!(
            scope_union(Some("a b"), Some("b c")).as_deref(),
            Some("a b c")
        );
        assert_eq!(scope_union(None, Some(" x  y ")).as_deref(), Some("x y"));
        assert_eq!(scope_union(None, None), None);
        assert_eq!(scope_union(Some(""), Some(" ")), None);
    }

    #[test]
    fn expiry_is_absolute_and_checked_ahead() {
        let t = Tokens {
            access_token: Secret::new("a"),
            refresh_token: None,
            expires_at: Some(1_000),
            scope: None,
        };
        let at = |s: u64| UNIX_EPOCH + Duration::from_secs(s);
        assert!(!t.expires_soon(at(900)));
        assert!(t.expires_soon(at(940)));
        assert!(t.expires_soon(at(2_000)));
        let never = Tokens {
            expires_at: None,
            ..t
        };
        assert!(!never.expires_soon(at(u64::MAX / 2)));
    }

    #[test]
    fn a_grant_round_trips_through_json_and_debug_hides_the_tokens() {
        let g = Grant {
            resource: "https://mcp.example.com/mcp".into(),
            issuer: "https://as.example.com".into(),
            server_metadata: AuthorizationServerMetadata::parse(
                br#"{"issuer":"https://as.example.com","token_endpoint":"https://as.example.com/t"}"#,
            )
            .unwrap(),
            client: ClientRegistration {
                client_id: "c".into(),
                client_secret: Some(Secret::new("CLIENT-SECRET")),
                auth_method: TokenEndpointAuth::ClientSecretBasic,
                kind: RegistrationKind::Dynamic,
            },
            tokens: Tokens {
                access_token: Secret::new("ACCESS-TOKEN"),
                refresh_token: Some(Secret::new("REFRESH-TOKEN")),
                expires_at: Some(1_700_000_000),
                scope: Some("a b".into()),
            },
            requested_scope: Some("a".into()),
        };
        let json = serde_json::to_string(&g).unwrap();
        let back: Grant = serde_json::from_str(&json).unwrap();
        assert_eq!(back, g);
        let debug = format!("{g:?}");
        for secret in ["CLIENT-SECRET", "ACCESS-TOKEN", "REFRESH-TOKEN"] {
            assert!(!debug.contains(secret), "{debug}");
        }
    }
}

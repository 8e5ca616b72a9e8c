//! The JSON documents of the authorization flow, read tolerantly where that is safe and strictly
//! where a value decides something:
//! - [`ProtectedResourceMetadata`] (RFC 9728 §2), served by the MCP server;
//! - [`AuthorizationServerMetadata`] (RFC 8414 §2, and OpenID Connect Discovery's provider
//!   metadata, which shares the members used here);
//! - [`TokenResponse`] (RFC 6749 §5.1) and [`OAuthErrorResponse`] (RFC 6749 §5.2);
//! - [`ClientRegistrationResponse`] (RFC 7591 §3.2.1);
//! - [`AuthorizationResponse`], the query of the redirect back to the client (RFC 6749 §4.1.2,
//!   RFC 9207 §2).
//!
//! URLs and identifiers are kept as the raw strings received: issuers are compared as exact
//! strings (RFC 9207 §2.4, RFC 8414 §3.3), and a parsed and re-serialized URL may differ from
//! the original (a root path gains a `/`). Members a type does not name are kept in `other`
//! (or, for the two metadata documents, the whole document in `raw`), so a later reader loses
//! nothing; `null` counts as absent. Documents above [`MAX_DOCUMENT_BYTES`] are refused.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::secret::Secret;

/// The largest document read (metadata, token and registration responses): 256 KiB.
pub const MAX_DOCUMENT_BYTES: usize = 256 * 1024;

/// Which document could not be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DocumentKind {
    /// Protected Resource Metadata (RFC 9728).
    ProtectedResourceMetadata,
    /// Authorization server metadata (RFC 8414 / OpenID Connect Discovery).
    AuthorizationServerMetadata,
    /// A token endpoint's answer.
    TokenResponse,
    /// A registration endpoint's answer.
    RegistrationResponse,
    /// An OAuth error answer.
    ErrorResponse,
    /// The authorization response (the redirect's query).
    AuthorizationResponse,
}

impl std::fmt::Display for DocumentKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DocumentKind::ProtectedResourceMetadata => "protected resource metadata",
            DocumentKind::AuthorizationServerMetadata => "authorization server metadata",
            DocumentKind::TokenResponse => "token response",
            DocumentKind::RegistrationResponse => "client registration response",
            DocumentKind::ErrorResponse => "OAuth error response",
            DocumentKind::AuthorizationResponse => "authorization response",
        })
    }
}

/// A document that cannot be used (the peer's fault).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DocumentError {
    /// Larger than [`MAX_DOCUMENT_BYTES`].
    #[error("the {kind} is {size} bytes, more than the {MAX_DOCUMENT_BYTES} read")]
    TooLarge {
        /// The document.
        kind: DocumentKind,
        /// Its size.
        size: usize,
    },
    /// Not a JSON object.
    #[error("the {kind} is not a JSON object: {detail}")]
    NotAnObject {
        /// The document.
        kind: DocumentKind,
        /// What the JSON parser said, or what was found instead.
        detail: String,
    },
    /// A required member is missing (or `null`).
    #[error("the {kind} has no {member:?}")]
    Missing {
        /// The document.
        kind: DocumentKind,
        /// The member.
        member: &'static str,
    },
    /// A member has the wrong type or an unusable value.
    #[error("the {kind}'s {member:?} is unusable: {detail}")]
    Invalid {
        /// The document.
        kind: DocumentKind,
        /// The member.
        member: &'static str,
        /// What was expected.
        detail: String,
    },
}

/// Reads `bytes` as a JSON object, bounded.
fn object(kind: DocumentKind, bytes: &[u8]) -> Result<Map<String, Value>, DocumentError> {
    if bytes.len() > MAX_DOCUMENT_BYTES {
        return Err(DocumentError::TooLarge {
            kind,
            size: bytes.len(),
        });
    }
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(other) => Err(DocumentError::NotAnObject {
            kind,
            detail: format!("found {}", json_type(&other)),
        }),
        Err(e) => Err(DocumentError::NotAnObject {
            kind,
            detail: e.to_string(),
        }),
    }
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Member reading with the document's kind in every error.
struct Members<'a> {
    kind: DocumentKind,
    map: &'a Map<String, Value>,
}

impl Members<'_> {
    fn get(&self, member: &str) -> Option<&Value> {
        self.map.get(member).filter(|v| !v.is_null())
    }

    fn string(&self, member: &'static str) -> Result<Option<String>, DocumentError> {
        match self.get(member) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(self.invalid(member, format!("a string, not {}", json_type(other)))),
        }
    }

    fn required_string(&self, member: &'static str) -> Result<String, DocumentError> {
        match self.string(member)? {
            Some(s) if !s.is_empty() => Ok(s),
            Some(_) => Err(self.invalid(member, "a non-empty string".into())),
            None => Err(DocumentError::Missing {
                kind: self.kind,
                member,
            }),
        }
    }

    fn strings(&self, member: &'static str) -> Result<Option<Vec<String>>, DocumentError> {
        match self.get(member) {
            None => Ok(None),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| match v {
                    Value::String(s) => Ok(s.clone()),
                    other => Err(self.invalid(
                        member,
                        format!("an array of strings, with {} in it", json_type(other)),
                    )),
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            Some(other) => Err(self.invalid(
                member,
                format!("an array of strings, not {}", json_type(other)),
            )),
        }
    }

    fn flag(&self, member: &'static str) -> Result<bool, DocumentError> {
        match self.get(member) {
            None => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(other) => {
                Err(self.invalid(member, format!("a boolean, not {}", json_type(other))))
            }
        }
    }

    /// A non-negative integer, also accepted as a string of digits (some servers send
    /// `"expires_in": "3600"`).
    fn seconds(&self, member: &'static str) -> Result<Option<u64>, DocumentError> {
        match self.get(member) {
            None => Ok(None),
            Some(Value::Number(n)) => n
                .as_u64()
                .or_else(|| n.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64))
                .map(Some)
                .ok_or_else(|| self.invalid(member, format!("a non-negative number, not {n}"))),
            Some(Value::String(s)) => s
                .trim()
                .parse::<u64>()
                .map(Some)
                .map_err(|_| self.invalid(member, format!("a number of seconds, not {s:?}"))),
            Some(other) => Err(self.invalid(member, format!("a number, not {}", json_type(other)))),
        }
    }

    fn invalid(&self, member: &'static str, detail: String) -> DocumentError {
        DocumentError::Invalid {
            kind: self.kind,
            member,
            detail,
        }
    }

    fn other(&self, named: &[&str]) -> Map<String, Value> {
        self.map
            .iter()
            .filter(|(k, _)| !named.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}

// ---------------------------------------------------------------------------------------------

/// Protected Resource Metadata (RFC 9728 §2), as served by the MCP server.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProtectedResourceMetadata {
    /// `resource`: the resource identifier, as received.
    pub resource: String,
    /// `authorization_servers`: issuer identifiers, as received (may be empty: MCP requires at
    /// least one, which the flow checks).
    pub authorization_servers: Vec<String>,
    /// `scopes_supported`.
    pub scopes_supported: Option<Vec<String>>,
    /// `bearer_methods_supported`.
    pub bearer_methods_supported: Option<Vec<String>>,
    /// `resource_name`.
    pub resource_name: Option<String>,
    /// The whole document as received.
    pub raw: Map<String, Value>,
}

impl ProtectedResourceMetadata {
    /// Reads the document.
    pub fn parse(bytes: &[u8]) -> Result<Self, DocumentError> {
        let map = object(DocumentKind::ProtectedResourceMetadata, bytes)?;
        let m = Members {
            kind: DocumentKind::ProtectedResourceMetadata,
            map: &map,
        };
        Ok(ProtectedResourceMetadata {
            resource: m.required_string("resource")?,
            authorization_servers: m.strings("authorization_servers")?.unwrap_or_default(),
            scopes_supported: m.strings("scopes_supported")?,
            bearer_methods_supported: m.strings("bearer_methods_supported")?,
            resource_name: m.string("resource_name")?,
            raw: map.clone(),
        })
    }
}

/// Authorization server metadata (RFC 8414 §2; OpenID Connect Discovery 1.0 §3 shares these
/// members).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AuthorizationServerMetadata {
    /// `issuer`, as received.
    pub issuer: String,
    /// `authorization_endpoint`.
    pub authorization_endpoint: Option<String>,
    /// `token_endpoint`.
    pub token_endpoint: Option<String>,
    /// `registration_endpoint` (RFC 7591).
    pub registration_endpoint: Option<String>,
    /// `scopes_supported`.
    pub scopes_supported: Option<Vec<String>>,
    /// `response_types_supported`.
    pub response_types_supported: Option<Vec<String>>,
    /// `grant_types_supported` (absent means `authorization_code` and `implicit`, RFC 8414).
    pub grant_types_supported: Option<Vec<String>>,
    /// `token_endpoint_auth_methods_supported` (absent means `client_secret_basic`).
    pub token_endpoint_auth_methods_supported: Option<Vec<String>>,
    /// `code_challenge_methods_supported` (RFC 7636; absent means PKCE is not advertised).
    pub code_challenge_methods_supported: Option<Vec<String>>,
    /// `authorization_response_iss_parameter_supported` (RFC 9207; absent means `false`).
    pub authorization_response_iss_parameter_supported: bool,
    /// `client_id_metadata_document_supported` (Client ID Metadata Documents).
    pub client_id_metadata_document_supported: bool,
    /// The whole document as received.
    pub raw: Map<String, Value>,
}

impl AuthorizationServerMetadata {
    /// Reads the document (the flow then checks its `issuer`).
    pub fn parse(bytes: &[u8]) -> Result<Self, DocumentError> {
        let map = object(DocumentKind::AuthorizationServerMetadata, bytes)?;
        let m = Members {
            kind: DocumentKind::AuthorizationServerMetadata,
            map: &map,
        };
        Ok(AuthorizationServerMetadata {
            issuer: m.required_string("issuer")?,
            authorization_endpoint: m.string("authorization_endpoint")?,
            token_endpoint: m.string("token_endpoint")?,
            registration_endpoint: m.string("registration_endpoint")?,
            scopes_supported: m.strings("scopes_supported")?,
            response_types_supported: m.strings("response_types_supported")?,
            grant_types_supported: m.strings("grant_types_supported")?,
            token_endpoint_auth_methods_supported: m
                .strings("token_endpoint_auth_methods_supported")?,
            code_challenge_methods_supported: m.strings("code_challenge_methods_supported")?,
            authorization_response_iss_parameter_supported: m
                .flag("authorization_response_iss_parameter_supported")?,
            client_id_metadata_document_supported: m
                .flag("client_id_metadata_document_supported")?,
            raw: map.clone(),
        })
    }

    /// Whether the server lists `method` among its token endpoint authentication methods
    /// (absent list: `client_secret_basic` only, RFC 8414 §2).
    pub fn supports_auth_method(&self, method: &str) -> bool {
        match &self.token_endpoint_auth_methods_supported {
            Some(list) => list.iter().any(|m| m == method),
            None => method == "client_secret_basic",
        }
    }

    /// Whether the server lists `grant` among its grant types (absent list:
    /// `authorization_code` and `implicit`, RFC 8414 §2).
    pub fn supports_grant(&self, grant: &str) -> bool {
        match &self.grant_types_supported {
            Some(list) => list.iter().any(|g| g == grant),
            None => grant == "authorization_code" || grant == "implicit",
        }
    }
}

// ---------------------------------------------------------------------------------------------

/// A successful token endpoint answer (RFC 6749 §5.1). The tokens are [`Secret`]s.
#[derive(Clone, Debug, PartialEq)]
pub struct TokenResponse {
    /// `access_token`.
    pub access_token: Secret,
    /// `token_type` (`Bearer`, compared case-insensitively).
    pub token_type: String,
    /// `expires_in`, seconds.
    pub expires_in: Option<u64>,
    /// `refresh_token`.
    pub refresh_token: Option<Secret>,
    /// `scope`: the granted scope, when it differs from the requested one (RFC 6749 §5.1).
    pub scope: Option<String>,
    /// Other members (`id_token`, ...), kept.
    pub other: Map<String, Value>,
}

impl TokenResponse {
    /// Reads the document; `token_type` must be `Bearer` (MCP sends bearer tokens only).
    pub fn parse(bytes: &[u8]) -> Result<Self, DocumentError> {
        let map = object(DocumentKind::TokenResponse, bytes)?;
        let m = Members {
            kind: DocumentKind::TokenResponse,
            map: &map,
        };
        let token_type = m.required_string("token_type")?;
        if !token_type.eq_ignore_ascii_case("bearer") {
            return Err(m.invalid("token_type", format!("\"Bearer\", not {token_type:?}")));
        }
        Ok(TokenResponse {
            access_token: Secret::new(m.required_string("access_token")?),
            token_type,
            expires_in: m.seconds("expires_in")?,
            refresh_token: m.string("refresh_token")?.map(Secret::new),
            scope: m.string("scope")?,
            other: m.other(&[
                "access_token",
                "token_type",
                "expires_in",
                "refresh_token",
                "scope",
            ]),
        })
    }
}

/// An OAuth error answer (RFC 6749 §5.2, RFC 7591 §3.2.2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OAuthErrorResponse {
    /// `error`: the code (`invalid_grant`, `invalid_client`, ...).
    pub error: String,
    /// `error_description`.
    pub error_description: Option<String>,
    /// `error_uri`.
    pub error_uri: Option<String>,
}

impl OAuthErrorResponse {
    /// Reads the document.
    pub fn parse(bytes: &[u8]) -> Result<Self, DocumentError> {
        let map = object(DocumentKind::ErrorResponse, bytes)?;
        let m = Members {
            kind: DocumentKind::ErrorResponse,
            map: &map,
        };
        Ok(OAuthErrorResponse {
            error: m.required_string("error")?,
            error_description: m.string("error_description")?,
            error_uri: m.string("error_uri")?,
        })
    }
}

impl std::fmt::Display for OAuthErrorResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.error)?;
        if let Some(d) = &self.error_description {
            write!(f, ": {d}")?;
        }
        Ok(())
    }
}

/// A registration endpoint's answer (RFC 7591 §3.2.1).
#[derive(Clone, Debug, PartialEq)]
pub struct ClientRegistrationResponse {
    /// `client_id`.
    pub client_id: String,
    /// `client_secret`.
    pub client_secret: Option<Secret>,
    /// `client_secret_expires_at`: seconds since the epoch, 0 for never.
    pub client_secret_expires_at: Option<u64>,
    /// `token_endpoint_auth_method` the server registered.
    pub token_endpoint_auth_method: Option<String>,
    /// Other members (the registered metadata), kept.
    pub other: Map<String, Value>,
}

impl ClientRegistrationResponse {
    /// Reads the document.
    pub fn parse(bytes: &[u8]) -> Result<Self, DocumentError> {
        let map = object(DocumentKind::RegistrationResponse, bytes)?;
        let m = Members {
            kind: DocumentKind::RegistrationResponse,
            map: &map,
        };
        Ok(ClientRegistrationResponse {
            client_id: m.required_string("client_id")?,
            client_secret: m.string("client_secret")?.map(Secret::new),
            client_secret_expires_at: m.seconds("client_secret_expires_at")?,
            token_endpoint_auth_method: m.string("token_endpoint_auth_method")?,
            other: m.other(&[
                "client_id",
                "client_secret",
                "client_secret_expires_at",
                "token_endpoint_auth_method",
            ]),
        })
    }
}

// ---------------------------------------------------------------------------------------------

/// The authorization response: the query of the redirect to the client's `redirect_uri`
/// (RFC 6749 §4.1.2 and §4.1.2.1, RFC 9207 §2). Values are form-decoded; nothing else is
/// normalized.
#[derive(Clone, PartialEq, Eq)]
pub struct AuthorizationResponse {
    /// `code` (absent on an error).
    pub code: Option<Secret>,
    /// `state`.
    pub state: Option<String>,
    /// `iss` (RFC 9207), decoded but otherwise as sent.
    pub iss: Option<String>,
    /// `error`.
    pub error: Option<String>,
    /// `error_description`.
    pub error_description: Option<String>,
    /// `error_uri`.
    pub error_uri: Option<String>,
}

impl std::fmt::Debug for AuthorizationResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthorizationResponse")
            .field("code", &self.code)
            .field("state", &self.state.as_ref().map(|_| "<set>"))
            .field("iss", &self.iss)
            .field("error", &self.error)
            .finish_non_exhaustive()
    }
}

impl AuthorizationResponse {
    /// Reads the redirect's query (without the `?`). A parameter given twice is refused
    /// (RFC 6749 §3.1: parameters MUST NOT be included more than once).
    pub fn from_query(query: &str) -> Result<Self, DocumentError> {
        let mut r = AuthorizationResponse {
            code: None,
            state: None,
            iss: None,
            error: None,
            error_description: None,
            error_uri: None,
        };
        for (name, value) in url::form_urlencoded::parse(query.as_bytes()) {
            let value = value.into_owned();
            let slot: (&'static str, &mut Option<String>) = match name.as_ref() {
                "state" => ("state", &mut r.state),
                "iss" => ("iss", &mut r.iss),
                "error" => ("error", &mut r.error),
                "error_description" => ("error_description", &mut r.error_description),
                "error_uri" => ("error_uri", &mut r.error_uri),
                "code" => {
                    if r.code.is_some() {
                        return Err(twice("code"));
                    }
                    r.code = Some(Secret::new(value));
                    continue;
                }
                _ => continue,
            };
            if slot.1.is_some() {
                return Err(twice(slot.0));
            }
            *slot.1 = Some(value);
        }
        if r.code.is_none() && r.error.is_none() {
            return Err(DocumentError::Missing {
                kind: DocumentKind::AuthorizationResponse,
                member: "code",
            });
        }
        Ok(r)
    }
}

fn twice(member: &'static str) -> DocumentError {
    DocumentError::Invalid {
        kind: DocumentKind::AuthorizationResponse,
        member,
        detail: "given once, not twice (RFC 6749 §3.1)".into(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Found by the `auth_flow` fuzz target: a token that is a substring of another field
    /// (`arer` in `Bearer`). The Debug text may depend on the tokens' lengths only.
    #[test]
    fn token_response_debug_does_not_depend_on_the_tokens() {
        let doc = br#"{"access_token":"arer","expires_in":"3600","refresh_token":"r","scop%":"x ya","token_type":"Bearer"}"#;
        let t = TokenResponse::parse(doc).unwrap();
        let mut other = t.clone();
        other.access_token = Secret::new("xxxx");
        other.refresh_token = Some(Secret::new("y"));
        assert_eq!(format!("{t:?}"), format!("{other:?}"));
        let long = TokenResponse::parse(
            br#"{"access_token":"TOKEN-SECRET-123","token_type":"bearer","refresh_token":"REFRESH-SECRET-456"}"#,
        )
        .unwrap();
        let shown = format!("{long:?}");
        assert!(
            !shown.contains("TOKEN-SECRET-123") && !shown.contains("REFRESH-SECRET-456"),
            "{shown}"
        );
    }

    #[test]
    fn protected_resource_metadata_keeps_raw_strings_and_unknown_members() {
        let doc = br#"{"resource":"https://mcp.example.com","authorization_servers":["https://Auth.example.com"],
            "scopes_supported":["a","b"],"x-extra":1,"resource_name":null}"#;
        let m = ProtectedResourceMetadata::parse(doc).unwrap();
        assert_eq!(m.resource, "https://mcp.example.com");
        assert_eq!(m.authorization_servers, vec!["https://Auth.example.com"]);
        assert_eq!(
            m.scopes_supported.as_deref(),
            Some(&["a".to_owned(), "b".to_owned()][..])
        );
        assert_eq!(m.resource_name, None);
        assert_eq!(m.raw.get("x-extra"), Some(&Value::from(1)));
    }

    #[test]
    fn protected_resource_metadata_errors_name_the_member() {
        let e = ProtectedResourceMetadata::parse(br#"{"authorization_servers":[]}"#).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the protected resource metadata has no \"resource\""
        );
        let e =
            ProtectedResourceMetadata::parse(br#"{"resource":"x","authorization_servers":"y"}"#)
                .unwrap_err();
        assert!(
            matches!(
                e,
                DocumentError::Invalid {
                    member: "authorization_servers",
                    ..
                }
            ),
            "{e}"
        );
        let e = ProtectedResourceMetadata::parse(b"[1]").unwrap_err();
        assert!(e.to_string().contains("found an array"), "{e}");
        let e = ProtectedResourceMetadata::parse(b"{").unwrap_err();
        assert!(matches!(e, DocumentError::NotAnObject { .. }));
        let big = vec![b' '; MAX_DOCUMENT_BYTES + 1];
        assert!(matches!(
            ProtectedResourceMetadata::parse(&big),
            Err(DocumentError::TooLarge { .. })
        ));
    }

    #[test]
    fn authorization_server_metadata_defaults() {
        let m =
            AuthorizationServerMetadata::parse(br#"{"issuer":"https://as.example/t/"}"#).unwrap();
        assert_eq!(m.issuer, "https://as.example/t/");
        assert!(!m.authorization_response_iss_parameter_supported);
        assert!(!m.client_id_metadata_document_supported);
        assert!(m.supports_auth_method("client_secret_basic"));
        assert!(!m.supports_auth_method("none"));
        assert!(m.supports_grant("authorization_code"));
        assert!(!m.supports_grant("client_credentials"));
        let e = AuthorizationServerMetadata::parse(
            br#"{"issuer":"x","authorization_response_iss_parameter_supported":"yes"}"#,
        )
        .unwrap_err();
        assert!(e.to_string().contains("a boolean, not a string"), "{e}");
    }

    #[test]
    fn token_response_hides_tokens_and_reads_expiry_leniently() {
        let t = TokenResponse::parse(
            br#"{"access_token":"AT-123","token_type":"bearer","expires_in":"3600","refresh_token":"RT-9","id_token":"x"}"#,
        )
        .unwrap();
        assert_eq!(t.access_token.expose(), "AT-123");
        assert_eq!(t.expires_in, Some(3600));
        let debug = format!("{t:?}");
        assert!(
            !debug.contains("AT-123") && !debug.contains("RT-9"),
            "{debug}"
        );
        assert!(t.other.contains_key("id_token"));
        let e = TokenResponse::parse(br#"{"access_token":"a","token_type":"mac"}"#).unwrap_err();
        assert!(e.to_string().contains("\"Bearer\""), "{e}");
        let e =
            TokenResponse::parse(br#"{"access_token":"a","token_type":"Bearer","expires_in":-5}"#)
                .unwrap_err();
        assert!(
            matches!(
                e,
                DocumentError::Invalid {
                    member: "expires_in",
                    ..
                }
            ),
            "{e}"
        );
    }

    #[test]
    fn error_and_registration_responses() {
        let e = OAuthErrorResponse::parse(
            br#"{"error":"invalid_grant","error_description":"expired"}"#,
        )
        .unwrap();
        assert_eq!(e.to_string(), "invalid_grant: expired");
        let r = ClientRegistrationResponse::parse(
            br#"{"client_id":"c1","client_secret":"s3cret","redirect_uris":["http://127.0.0.1/cb"]}"#,
        )
        .unwrap();
        assert_eq!(r.client_id, "c1");
        assert!(!format!("{r:?}").contains("s3cret"));
        assert!(r.other.contains_key("redirect_uris"));
    }

    #[test]
    fn authorization_response_from_query() {
        let r =
            AuthorizationResponse::from_query("code=abc&state=s1&iss=https%3A%2F%2Fas.example%2F")
                .unwrap();
        assert_eq!(r.code.as_ref().map(Secret::expose), Some("abc"));
        assert_eq!(r.iss.as_deref(), Some("https://as.example/"));
        assert!(!format!("{r:?}").contains("abc"));
        let r = AuthorizationResponse::from_query("error=access_denied&state=s1").unwrap();
        assert_eq!(r.error.as_deref(), Some("access_denied"));
        assert!(matches!(
            AuthorizationResponse::from_query("state=s1"),
            Err(DocumentError::Missing { member: "code", .. })
        ));
        assert!(matches!(
            AuthorizationResponse::from_query("code=a&code=b"),
            Err(DocumentError::Invalid { member: "code", .. })
        ));
        assert!(matches!(
            AuthorizationResponse::from_query("code=a&iss=x&iss=y"),
            Err(DocumentError::Invalid { member: "iss", .. })
        ));
    }
}

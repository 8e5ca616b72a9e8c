//! `mcpwire dev mcp-server --auth`: the reference server as an OAuth-protected MCP server, with
//! a small OAuth 2.1 authorization server embedded on the same listener, so the whole login
//! flow of `basic/authorization/` runs on one machine.
//!
//! **Where things are.** With the server at `http://ADDR`:
//! - `http://ADDR/mcp`: the MCP endpoint, the protected resource. Its `resource` identifier is
//!   exactly that URL. (With `--auth` the `/` alias of the endpoint is not served.)
//! - [`PRM_PATH`]: its Protected Resource Metadata (RFC 9728), at the path-inserted well-known
//!   URI of `/mcp`, naming one authorization server.
//! - The authorization server's issuer is `http://ADDR/oauth` ([`ISSUER_PATH`]: an issuer with a
//!   path, so a client's path-inserting RFC 8414 discovery is exercised); its metadata is at
//!   [`AS_METADATA_PATH`], its endpoints are [`AUTHORIZE_PATH`], [`TOKEN_PATH`] and
//!   [`REGISTER_PATH`].
//!
//! **The MCP endpoint** answers a request without a bearer token `401` with
//! `WWW-Authenticate: Bearer resource_metadata="…", scope="mcp"`; with an unknown or expired
//! one, the same with `error="invalid_token"`. A token without the scope a request needs gets
//! `403` with `error="insufficient_scope"` and the scope needed: every MCP request needs
//! [`SCOPE_MCP`]; the tool `admin_echo` (listed only with `--auth`) needs [`SCOPE_ADMIN`],
//! which implies [`SCOPE_MCP`].
//!
//! **The authorization server**: dynamic registration (RFC 7591; `redirect_uris` required,
//! each `https` or `http` to a loopback host; `token_endpoint_auth_method` `none` or
//! `client_secret_basic`, the latter the RFC's default, which gets a `client_secret`;
//! `application_type` `native` or `web`); `GET` [`AUTHORIZE_PATH`] checks `client_id`,
//! `redirect_uri` (a registered one, exactly but for the port of a loopback IP address, RFC
//! 8252 §7.3), `response_type=code`, PKCE (`S256` only, and
//! required), `state` (required), `resource` (required, exactly the MCP endpoint's) and
//! `scope` (default `mcp`; each of [`SCOPES_SUPPORTED`]), then either approves at once
//! ([`AuthConfig::auto_approve`]: a `302` to the redirect URI with `code`, `state` and `iss`)
//! or shows a consent page whose "Allow" button POSTs back to [`AUTHORIZE_PATH`] and is answered
//! with that `302` ("Deny": `error=access_denied`). Errors with an unknown client or redirect
//! URI are answered `400` without a redirect; the others are redirected (RFC 6749 §4.1.2.1).
//! The token endpoint serves `authorization_code` (the code once, within a minute, for the same
//! client and `redirect_uri`, with the PKCE `code_verifier` and the same `resource`) and
//! `refresh_token` with rotation (a refresh token is spent by its use; presented again it is
//! `invalid_grant`). Access tokens live [`AuthConfig::token_ttl`] (`expires_in`); a refresh
//! token is issued to clients registered for the `refresh_token` grant. Every error is
//! RFC 6749 §5.2 JSON (`{"error": …, "error_description": …}`).
//!
//! Tokens, codes and client secrets are 256 bits from the OS's random source (`getrandom`),
//! kept in memory only, each table bounded ([`MAX_ENTRIES`]). Counters are in [`AuthStats`]
//! (in the server's `Stats::auth`); [`AuthServer::expire_access_tokens`] is the test hook that
//! makes every access token expired at once.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use mcpwire_core::http::Headers;
use serde_json::{json, Value};

use crate::http::{headers, lock, Request, Respond};

mod authorize;
mod token;

#[cfg(test)]
use authorize::{consent_page, redirect_to};

/// The authorization server's issuer path on the server's origin.
pub const ISSUER_PATH: &str = "/oauth";
/// The RFC 8414 metadata of the issuer `http://ADDR/oauth` (path inserted after the
/// well-known prefix).
pub const AS_METADATA_PATH: &str = "/.well-known/oauth-authorization-server/oauth";
/// The RFC 9728 metadata of the resource `http://ADDR/mcp`.
pub const PRM_PATH: &str = "/.well-known/oauth-protected-resource/mcp";
/// The authorization endpoint (`GET`: the request; `POST`: the consent page's answer).
pub const AUTHORIZE_PATH: &str = "/oauth/authorize";
/// The token endpoint.
pub const TOKEN_PATH: &str = "/oauth/token";
/// The dynamic client registration endpoint.
pub const REGISTER_PATH: &str = "/oauth/register";
/// The scope every MCP request needs.
pub const SCOPE_MCP: &str = "mcp";
/// The scope the `admin_echo` tool needs (it implies [`SCOPE_MCP`]).
pub const SCOPE_ADMIN: &str = "mcp:admin";
/// The scope asking for a refresh token (offered in the metadata; refresh tokens are issued
/// by grant type, see the module docs).
pub const SCOPE_OFFLINE: &str = "offline_access";
/// Every scope the authorization server knows.
pub const SCOPES_SUPPORTED: [&str; 3] = [SCOPE_MCP, SCOPE_ADMIN, SCOPE_OFFLINE];
/// The tool that needs [`SCOPE_ADMIN`].
pub const ADMIN_TOOL: &str = "admin_echo";
/// How long an authorization code can be exchanged.
pub const CODE_LIFETIME: Duration = Duration::from_secs(60);
/// How long a consent page can be answered.
pub const CONSENT_LIFETIME: Duration = Duration::from_secs(600);
/// How long a refresh token lives.
pub const REFRESH_LIFETIME: Duration = Duration::from_secs(30 * 24 * 3600);
/// The most entries of each table (clients, consents, codes, access and refresh tokens); a
/// full table that holds nothing expired answers `503` `temporarily_unavailable`.
pub const MAX_ENTRIES: usize = 10_000;
/// The longest parameter value accepted (`400` past it).
const MAX_PARAM: usize = 4096;

/// The authorization settings of the reference server (`Config::auth`).
#[derive(Clone, Debug)]
pub struct AuthConfig {
    /// Approve every valid authorization request at once (a `302` with the code) instead of
    /// showing the consent page: for tests and automation.
    pub auto_approve: bool,
    /// How long an access token lives (`expires_in`).
    pub token_ttl: Duration,
    /// The host name the authorization server's documents use instead of the listener's
    /// address (same port, same listener): `localhost` puts the issuer and its endpoints on
    /// another host than the protected resource, as a separate authorization server would be
    /// (`--auth-issuer-host`). `None`: the listener's address.
    pub issuer_host: Option<String>,
}

impl Default for AuthConfig {
    fn default() -> Self {
        AuthConfig {
            auto_approve: false,
            token_ttl: Duration::from_secs(3600),
            issuer_host: None,
        }
    }
}

/// Counters of the authorization server and the resource's token checks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuthStats {
    /// Clients registered.
    pub registrations: u64,
    /// Valid authorization requests (`GET` [`AUTHORIZE_PATH`] that passed every check).
    pub authorization_requests: u64,
    /// Consent pages shown.
    pub consent_pages: u64,
    /// Consent pages answered "Deny".
    pub denials: u64,
    /// Authorization codes issued (approved at once or on the consent page).
    pub codes_issued: u64,
    /// Access tokens issued for an authorization code.
    pub tokens_issued: u64,
    /// Access tokens issued for a refresh token.
    pub refreshes: u64,
    /// Token requests answered with an error.
    pub token_errors: u64,
    /// MCP requests refused `401` (no token, or an unknown or expired one).
    pub unauthorized: u64,
    /// MCP requests refused `403` `insufficient_scope`.
    pub insufficient_scope: u64,
    /// The scope of each authorization code issued, in order (the last 64).
    pub granted_scopes: Vec<String>,
}

/// An OAuth error (RFC 6749 §5.2, RFC 7591 §3.2.2): the HTTP status, the code, a description.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OAuthError {
    /// The HTTP status.
    pub status: u16,
    /// `error`.
    pub error: &'static str,
    /// `error_description`.
    pub description: String,
}

impl OAuthError {
    fn new(status: u16, error: &'static str, description: impl Into<String>) -> Self {
        OAuthError {
            status,
            error,
            description: description.into(),
        }
    }

    fn request(description: impl Into<String>) -> Self {
        OAuthError::new(400, "invalid_request", description)
    }

    fn grant(description: impl Into<String>) -> Self {
        OAuthError::new(400, "invalid_grant", description)
    }

    fn not_ready() -> Self {
        OAuthError::new(503, "temporarily_unavailable", "the server is starting")
    }

    fn full() -> Self {
        OAuthError::new(
            503,
            "temporarily_unavailable",
            "the dev authorization server holds as many entries as it keeps",
        )
    }

    /// The JSON body.
    pub fn body(&self) -> String {
        json!({"error": self.error, "error_description": self.description}).to_string()
    }
}

#[derive(Debug)]
struct Client {
    name: Option<String>,
    redirect_uris: Vec<String>,
    /// `Some`: `client_secret_basic`; `None`: a public client (`none`).
    secret: Option<String>,
    refresh: bool,
}

/// A checked authorization request, waiting for consent or turned into a code.
#[derive(Clone, Debug)]
struct Approval {
    client_id: String,
    redirect_uri: String,
    code_challenge: String,
    state: String,
    scope: String,
    expires: Instant,
}

#[derive(Debug)]
struct Token {
    client_id: String,
    scope: String,
    expires: Instant,
}

#[derive(Debug, Default)]
struct State {
    clients: HashMap<String, Client>,
    consents: HashMap<String, Approval>,
    codes: HashMap<String, Approval>,
    access: HashMap<String, Token>,
    refresh: HashMap<String, Token>,
    stats: AuthStats,
}

/// Makes room in a table: drops what expired; an error when it is still full.
fn room<V>(
    table: &mut HashMap<String, V>,
    expires: impl Fn(&V) -> Instant,
) -> Result<(), OAuthError> {
    if table.len() >= MAX_ENTRIES {
        let now = Instant::now();
        table.retain(|_, v| expires(v) > now);
    }
    if table.len() >= MAX_ENTRIES {
        return Err(OAuthError::full());
    }
    Ok(())
}

/// 256 bits from the OS's random source, as `prefix` and 64 hex digits.
fn secure_token(prefix: &str) -> Result<String, OAuthError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| {
        OAuthError::new(
            500,
            "server_error",
            format!("no random bytes from the OS: {e}"),
        )
    })?;
    let mut s = String::with_capacity(prefix.len() + 64);
    s.push_str(prefix);
    for b in bytes {
        s.push_str(&format!("{b:02x}"));
    }
    Ok(s)
}

/// Equality in time that depends only on the lengths.
fn same_secret(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut diff = u8::from(a.len() != b.len());
    for (i, x) in a.iter().enumerate() {
        diff |= x ^ b.get(i).copied().unwrap_or(0);
    }
    diff == 0
}

/// `application/x-www-form-urlencoded` pairs (a query or a form body) as a map, with the
/// names given more than once (RFC 6749 §3.1: parameters are sent at most once).
fn form(text: &[u8]) -> Result<(BTreeMap<String, String>, Vec<String>), OAuthError> {
    let mut map = BTreeMap::new();
    let mut repeated = Vec::new();
    for (k, v) in url::form_urlencoded::parse(text) {
        if v.len() > MAX_PARAM || k.len() > MAX_PARAM {
            return Err(OAuthError::request(format!(
                "a parameter is longer than {MAX_PARAM} bytes"
            )));
        }
        if map.insert(k.to_string(), v.into_owned()).is_some() {
            repeated.push(k.into_owned());
        }
    }
    Ok((map, repeated))
}

/// Whether `requested` is the registered redirect URI `registered`: the same text, or, for
/// `http` to a loopback IP address, the same but for the port, which RFC 8252 §7.3 says an
/// authorization server MUST allow to differ (a native app gets a free port when it asks).
fn redirect_matches(registered: &str, requested: &str) -> bool {
    if registered == requested {
        return true;
    }
    let loopback_ip = |u: &url::Url| {
        u.scheme() == "http"
            && match u.host() {
                Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
                Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
                _ => false,
            }
    };
    match (url::Url::parse(registered), url::Url::parse(requested)) {
        (Ok(mut a), Ok(mut b)) if loopback_ip(&a) && loopback_ip(&b) => {
            let (_, _) = (a.set_port(None), b.set_port(None));
            a == b
        }
        _ => false,
    }
}

/// Whether a redirect URI may be registered: `https`, or `http` to a loopback host (RFC 8252
/// §7.3), absolute, without a fragment.
fn acceptable_redirect_uri(uri: &str) -> bool {
    let Ok(u) = url::Url::parse(uri) else {
        return false;
    };
    if u.fragment().is_some() || u.host_str().is_none_or(str::is_empty) {
        return false;
    }
    match u.scheme() {
        "https" => true,
        "http" => {
            matches!(
                u.host(),
                Some(url::Host::Ipv4(ip)) if ip.is_loopback()
            ) || matches!(u.host(), Some(url::Host::Ipv6(ip)) if ip.is_loopback())
                || u.host_str() == Some("localhost")
        }
        _ => false,
    }
}

/// Whether `c` is a PKCE S256 challenge: 43 base64url characters.
fn is_s256_challenge(c: &str) -> bool {
    c.len() == 43
        && c.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// The scopes of a scope string, each once, in order.
fn scopes(s: &str) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for t in s.split(' ').filter(|t| !t.is_empty()) {
        if !out.contains(&t) {
            out.push(t);
        }
    }
    out
}

/// Whether the scope string `granted` covers `needed` ([`SCOPE_ADMIN`] implies
/// [`SCOPE_MCP`]).
fn covers(granted: &str, needed: &str) -> bool {
    let g = scopes(granted);
    g.contains(&needed) || (needed == SCOPE_MCP && g.contains(&SCOPE_ADMIN))
}

/// The scope the MCP request `method` with `params` needs.
pub fn required_scope(method: &str, params: &Value) -> &'static str {
    let tool = params.get("name").and_then(Value::as_str);
    if method == "tools/call" && tool == Some(ADMIN_TOOL) {
        SCOPE_ADMIN
    } else {
        SCOPE_MCP
    }
}

fn quoted(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

fn html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// What the resource's token check found: the granted scope, or the refusal to send.
pub(crate) enum Refusal {
    /// `401`.
    Unauthorized(Option<&'static str>),
    /// `403` `insufficient_scope` for this scope.
    InsufficientScope(&'static str),
    /// The server's address is not known yet.
    NotReady,
}

/// The authorization server and the resource's token checks (one per `--auth` server).
pub struct AuthServer {
    config: AuthConfig,
    origin: OnceLock<String>,
    state: Mutex<State>,
}

/// Shows the settings and counters, never a token, code or secret.
impl std::fmt::Debug for AuthServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthServer")
            .field("config", &self.config)
            .field("origin", &self.origin.get())
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl AuthServer {
    /// An authorization server with `config`; its origin is set once the server listens.
    pub fn new(config: AuthConfig) -> Self {
        AuthServer {
            config,
            origin: OnceLock::new(),
            state: Mutex::new(State::default()),
        }
    }

    /// Sets the origin (`http://ADDR`) the documents name; the first call wins.
    pub(crate) fn set_origin(&self, origin: String) {
        let _ = self.origin.set(origin);
    }

    fn origin(&self) -> Result<&str, OAuthError> {
        self.origin
            .get()
            .map(String::as_str)
            .ok_or_else(OAuthError::not_ready)
    }

    /// The authorization server's origin: the listener's, or [`AuthConfig::issuer_host`] on
    /// its port.
    fn issuer_origin(&self) -> Option<String> {
        let origin = self.origin.get()?;
        Some(match &self.config.issuer_host {
            None => origin.clone(),
            Some(host) => {
                let port = origin.rsplit(':').next().unwrap_or_default();
                format!("http://{host}:{port}")
            }
        })
    }

    /// The settings.
    pub fn config(&self) -> &AuthConfig {
        &self.config
    }

    /// The issuer, `http://ADDR/oauth` (once listening).
    pub fn issuer(&self) -> Option<String> {
        Some(format!("{}{ISSUER_PATH}", self.issuer_origin()?))
    }

    /// The protected resource, `http://ADDR/mcp` (once listening).
    pub fn resource(&self) -> Option<String> {
        Some(format!("{}/mcp", self.origin.get()?))
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> AuthStats {
        lock(&self.state).stats.clone()
    }

    /// Test hook: every access token issued so far is expired from now on (refresh tokens
    /// stay valid).
    pub fn expire_access_tokens(&self) {
        let now = Instant::now();
        for t in lock(&self.state).access.values_mut() {
            t.expires = now;
        }
    }

    /// Test hook: every grant issued so far is revoked from now on, access and refresh
    /// tokens alike (the next request of a client needs a new sign-in).
    pub fn revoke_all_grants(&self) {
        let mut st = lock(&self.state);
        st.access.clear();
        st.refresh.clear();
    }

    // -----------------------------------------------------------------------------------------
    // The resource
    // -----------------------------------------------------------------------------------------

    /// Checks the request's bearer token: the scope it was granted, or the refusal.
    pub(crate) fn authenticate(&self, h: &Headers) -> Result<String, Refusal> {
        if self.origin.get().is_none() {
            return Err(Refusal::NotReady);
        }
        let mut values = h.get_all("authorization");
        let value = match (values.next(), values.next()) {
            (None, _) => return Err(self.unauthorized(None)),
            (Some(_), Some(_)) => return Err(self.unauthorized(Some("invalid_request"))),
            (Some(v), None) => v,
        };
        let token = value
            .trim()
            .split_once(' ')
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, t)| t.trim());
        let Some(token) = token else {
            return Err(self.unauthorized(Some("invalid_request")));
        };
        let mut state = lock(&self.state);
        match state.access.get(token) {
            Some(t) if t.expires > Instant::now() => Ok(t.scope.clone()),
            _ => {
                state.stats.unauthorized += 1;
                Err(Refusal::Unauthorized(Some("invalid_token")))
            }
        }
    }

    fn unauthorized(&self, error: Option<&'static str>) -> Refusal {
        lock(&self.state).stats.unauthorized += 1;
        Refusal::Unauthorized(error)
    }

    /// Whether `granted` covers `needed`; counts a refusal.
    pub(crate) fn check_scope(&self, granted: &str, needed: &'static str) -> Result<(), Refusal> {
        if covers(granted, needed) {
            return Ok(());
        }
        lock(&self.state).stats.insufficient_scope += 1;
        Err(Refusal::InsufficientScope(needed))
    }

    /// Answers a refusal: `401` or `403` with the `Bearer` challenge, an RFC 6750 error body.
    pub(crate) fn refuse(&self, refusal: Refusal, res: &mut dyn Respond) {
        let origin = match self.origin() {
            Ok(o) => o,
            Err(e) => return send_error(res, &e),
        };
        let metadata = format!("{origin}{PRM_PATH}");
        let (status, challenge, body) = match refusal {
            Refusal::NotReady => return send_error(res, &OAuthError::not_ready()),
            Refusal::Unauthorized(error) => {
                let mut c = format!(
                    "Bearer resource_metadata=\"{}\", scope=\"{SCOPE_MCP}\"",
                    quoted(&metadata)
                );
                let (code, description) = match error {
                    None => ("invalid_token", "this MCP server needs a bearer token"),
                    Some("invalid_token") => {
                        ("invalid_token", "the access token is unknown or expired")
                    }
                    Some(other) => (other, "the Authorization header is not one Bearer token"),
                };
                if error.is_some() {
                    c.push_str(&format!(
                        ", error=\"{code}\", error_description=\"{description}\""
                    ));
                }
                (401, c, OAuthError::new(401, code, description).body())
            }
            Refusal::InsufficientScope(needed) => {
                let description = format!("this request needs the scope {needed}");
                let c = format!(
                    "Bearer error=\"insufficient_scope\", scope=\"{needed}\", resource_metadata=\"{}\", error_description=\"{description}\"",
                    quoted(&metadata)
                );
                (
                    403,
                    c,
                    OAuthError::new(403, "insufficient_scope", description).body(),
                )
            }
        };
        let h = headers(&[
            ("WWW-Authenticate", &challenge),
            ("Content-Type", "application/json"),
        ]);
        let _ = res.send(status, &h, body.as_bytes());
    }

    // -----------------------------------------------------------------------------------------
    // The documents and endpoints
    // -----------------------------------------------------------------------------------------

    /// Serves the metadata documents and the authorization server's endpoints; `false` for any
    /// other path.
    pub(crate) fn handle(&self, req: &Request, res: &mut dyn Respond) -> bool {
        let answer = match req.path.as_str() {
            PRM_PATH => self.get_only(req, |s| s.resource_metadata()),
            AS_METADATA_PATH => self.get_only(req, |s| s.server_metadata()),
            REGISTER_PATH if req.method == "POST" => self.register(req),
            REGISTER_PATH => Err(OAuthError::new(405, "invalid_request", "POST only")),
            TOKEN_PATH if req.method == "POST" => self.token(req),
            TOKEN_PATH => Err(OAuthError::new(405, "invalid_request", "POST only")),
            AUTHORIZE_PATH => {
                self.authorize(req, res);
                return true;
            }
            _ => return false,
        };
        match answer {
            Ok((status, body)) => {
                let h = headers(&[
                    ("Content-Type", "application/json"),
                    ("Cache-Control", "no-store"),
                ]);
                let _ = res.send(status, &h, body.to_string().as_bytes());
            }
            Err(e) => {
                if req.path == TOKEN_PATH {
                    lock(&self.state).stats.token_errors += 1;
                }
                send_error(res, &e);
            }
        }
        true
    }

    fn get_only(
        &self,
        req: &Request,
        document: impl Fn(&Self) -> Result<Value, OAuthError>,
    ) -> Result<(u16, Value), OAuthError> {
        if req.method != "GET" && req.method != "HEAD" {
            return Err(OAuthError::new(405, "invalid_request", "GET only"));
        }
        Ok((200, document(self)?))
    }

    fn resource_metadata(&self) -> Result<Value, OAuthError> {
        let origin = self.origin()?;
        let issuer = self.issuer().ok_or_else(OAuthError::not_ready)?;
        Ok(json!({
            "resource": format!("{origin}/mcp"),
            "authorization_servers": [issuer],
            "scopes_supported": [SCOPE_MCP],
            "bearer_methods_supported": ["header"],
            "resource_name": "mcpwire dev MCP server"
        }))
    }

    fn server_metadata(&self) -> Result<Value, OAuthError> {
        let origin = self.issuer_origin().ok_or_else(OAuthError::not_ready)?;
        Ok(json!({
            "issuer": format!("{origin}{ISSUER_PATH}"),
            "authorization_endpoint": format!("{origin}{AUTHORIZE_PATH}"),
            "token_endpoint": format!("{origin}{TOKEN_PATH}"),
            "registration_endpoint": format!("{origin}{REGISTER_PATH}"),
            "scopes_supported": SCOPES_SUPPORTED,
            "response_types_supported": ["code"],
            "response_modes_supported": ["query"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "token_endpoint_auth_methods_supported": ["none", "client_secret_basic"],
            "code_challenge_methods_supported": ["S256"],
            "authorization_response_iss_parameter_supported": true
        }))
    }

    /// RFC 7591 dynamic registration.
    fn register(&self, req: &Request) -> Result<(u16, Value), OAuthError> {
        let meta = |d: &str| OAuthError::new(400, "invalid_client_metadata", d);
        let body: Value = serde_json::from_slice(&req.body)
            .map_err(|e| meta(&format!("the body is not JSON: {e}")))?;
        let Some(body) = body.as_object() else {
            return Err(meta("the body is not a JSON object"));
        };
        let strings = |name: &str, default: &[&str]| -> Result<Vec<String>, OAuthError> {
            match body.get(name) {
                None | Some(Value::Null) => Ok(default.iter().map(|s| (*s).to_owned()).collect()),
                Some(Value::Array(list)) => list
                    .iter()
                    .map(|v| v.as_str().map(str::to_owned))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| meta(&format!("{name} must be an array of strings"))),
                Some(_) => Err(meta(&format!("{name} must be an array of strings"))),
            }
        };
        let text = |name: &str| -> Result<Option<String>, OAuthError> {
            match body.get(name) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) if s.len() <= MAX_PARAM => Ok(Some(s.clone())),
                Some(_) => Err(meta(&format!("{name} must be a string"))),
            }
        };
        let redirect_uris = strings("redirect_uris", &[])?;
        if redirect_uris.is_empty() {
            return Err(OAuthError::new(
                400,
                "invalid_redirect_uri",
                "redirect_uris is required",
            ));
        }
        if let Some(bad) = redirect_uris
            .iter()
            .find(|u| u.len() > MAX_PARAM || !acceptable_redirect_uri(u))
        {
            return Err(OAuthError::new(
                400,
                "invalid_redirect_uri",
                format!("{bad:?}: a redirect URI is https, or http to a loopback host"),
            ));
        }
        let method =
            text("token_endpoint_auth_method")?.unwrap_or_else(|| "client_secret_basic".to_owned());
        if method != "none" && method != "client_secret_basic" {
            return Err(meta(&format!(
                "token_endpoint_auth_method {method:?}: this server takes none or client_secret_basic"
            )));
        }
        let grant_types = strings("grant_types", &["authorization_code"])?;
        if let Some(g) = grant_types
            .iter()
            .find(|g| *g != "authorization_code" && *g != "refresh_token")
        {
            return Err(meta(&format!("grant type {g:?} is not supported")));
        }
        let response_types = strings("response_types", &["code"])?;
        if response_types.iter().any(|r| r != "code") {
            return Err(meta("response_types: only code"));
        }
        let application_type = text("application_type")?.unwrap_or_else(|| "web".to_owned());
        if application_type != "native" && application_type != "web" {
            return Err(meta("application_type is native or web"));
        }
        let name = text("client_name")?;
        let client_id = secure_token("mcpc_")?;
        let secret = match method.as_str() {
            "client_secret_basic" => Some(secure_token("mcpcs_")?),
            _ => None,
        };
        let mut state = lock(&self.state);
        if state.clients.len() >= MAX_ENTRIES {
            return Err(OAuthError::full());
        }
        state.clients.insert(
            client_id.clone(),
            Client {
                name: name.clone(),
                redirect_uris: redirect_uris.clone(),
                secret: secret.clone(),
                refresh: grant_types.iter().any(|g| g == "refresh_token"),
            },
        );
        state.stats.registrations += 1;
        let issued_at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or_default();
        let mut out = json!({
            "client_id": client_id,
            "client_id_issued_at": issued_at,
            "redirect_uris": redirect_uris,
            "grant_types": grant_types,
            "response_types": response_types,
            "token_endpoint_auth_method": method,
            "application_type": application_type,
        });
        if let Some(name) = name {
            out["client_name"] = json!(name);
        }
        if let Some(secret) = secret {
            out["client_secret"] = json!(secret);
            out["client_secret_expires_at"] = json!(0);
        }
        Ok((201, out))
    }
}

fn send_error(res: &mut dyn Respond, e: &OAuthError) {
    let mut h = headers(&[
        ("Content-Type", "application/json"),
        ("Cache-Control", "no-store"),
    ]);
    if e.status == 401 && e.error == "invalid_client" {
        let _ = h.append("WWW-Authenticate", "Basic realm=\"mcpwire-dev\"");
    }
    let _ = res.send(e.status, &h, e.body().as_bytes());
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_loopback_ip_redirect_may_name_another_port_and_nothing_else_may_differ() {
        let reg = "http://127.0.0.1:4000/callback";
        assert!(redirect_matches(reg, reg));
        assert!(redirect_matches(reg, "http://127.0.0.1:5123/callback"));
        assert!(redirect_matches(reg, "http://127.0.0.1/callback"));
        assert!(redirect_matches("http://[::1]:1/cb", "http://[::1]:2/cb"));
        for other in [
            "http://127.0.0.1:5123/other",
            "http://127.0.0.1:5123/callback?x=1",
            "http://localhost:5123/callback",
            "https://127.0.0.1:5123/callback",
            "http://127.0.0.2.example:4000/callback",
        ] {
            assert!(!redirect_matches(reg, other), "{other}");
        }
        assert!(!redirect_matches(
            "https://app.example:443/cb",
            "https://app.example:8443/cb"
        ));
        assert!(!redirect_matches(
            "http://localhost:1/cb",
            "http://localhost:2/cb"
        ));
    }

    #[test]
    fn redirect_uris_are_https_or_loopback_http() {
        for ok in [
            "http://127.0.0.1:5000/callback",
            "http://[::1]/cb",
            "http://localhost:8/x",
            "https://app.example/cb",
        ] {
            assert!(acceptable_redirect_uri(ok), "{ok}");
        }
        for bad in [
            "http://app.example/cb",
            "http://127.0.0.1/cb#frag",
            "myapp:/cb",
            "/relative",
            "http://localhost.evil.example/cb",
        ] {
            assert!(!acceptable_redirect_uri(bad), "{bad}");
        }
    }

    #[test]
    fn the_admin_scope_implies_the_basic_one() {
        assert!(covers("mcp offline_access", "mcp"));
        assert!(covers("mcp:admin", "mcp"));
        assert!(!covers("mcp offline_access", "mcp:admin"));
        assert!(!covers("offline_access", "mcp"));
        assert_eq!(
            required_scope("tools/call", &json!({"name": ADMIN_TOOL})),
            SCOPE_ADMIN
        );
        assert_eq!(required_scope("tools/list", &json!({})), SCOPE_MCP);
    }

    #[test]
    fn forms_report_repeated_names_and_decode_values() {
        let (m, rep) = form(b"a=1&b=x+y%21&a=2").unwrap();
        assert_eq!(m["b"], "x y!");
        assert_eq!(rep, ["a"]);
        let long = format!("a={}", "x".repeat(MAX_PARAM + 1));
        assert_eq!(form(long.as_bytes()).unwrap_err().error, "invalid_request");
    }

    #[test]
    fn redirects_keep_an_existing_query_and_drop_empty_values() {
        assert_eq!(
            redirect_to("http://127.0.0.1:1/cb", &[("code", "c d"), ("state", "")]),
            "http://127.0.0.1:1/cb?code=c+d"
        );
        assert_eq!(
            redirect_to("https://a.example/cb?x=1", &[("code", "c")]),
            "https://a.example/cb?x=1&code=c"
        );
    }

    #[test]
    fn tokens_are_random_and_secrets_compare_exactly() {
        let a = secure_token("t_").unwrap();
        assert_eq!(a.len(), 66);
        assert_ne!(a, secure_token("t_").unwrap());
        assert!(same_secret("abc", "abc"));
        assert!(!same_secret("abc", "abd"));
        assert!(!same_secret("abc", "abcd"));
        assert!(!same_secret("", "a"));
    }

    #[test]
    fn the_consent_page_escapes_what_the_client_chose() {
        let a = Approval {
            client_id: "c".into(),
            redirect_uri: "http://127.0.0.1/cb?<x>".into(),
            code_challenge: String::new(),
            state: "s".into(),
            scope: "mcp".into(),
            expires: Instant::now(),
        };
        let page = consent_page("<script>", &a, "http://127.0.0.1/mcp", "id");
        assert!(!page.contains("<script>"));
        assert!(page.contains("&lt;script&gt;") && page.contains("&lt;x&gt;"));
        assert!(page.contains("value=\"allow\">Allow</button>"));
    }
}

//! Why an authorization did not end with a token, typed by who is to blame.

use super::metadata::{DocumentError, OAuthErrorResponse};

/// Who has to act on an [`AuthError`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Blame {
    /// The MCP server or the authorization server broke the protocol, or is configured so
    /// that the client cannot proceed safely.
    Peer,
    /// The network failed (try again later).
    Transport,
    /// The user declined, or did not finish in time.
    User,
    /// The client's configuration (a missing client id, a URL the policy refuses).
    Configuration,
    /// The caller used the flow wrongly.
    Caller,
}

/// How a refresh ended when it did not give new tokens (the peers lose logins by confusing
/// these: a rejected refresh is not a network failure).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RefreshFailure {
    /// `invalid_grant`: the refresh token is gone; authorize again.
    GrantGone,
    /// The network, a 5xx, `temporarily_unavailable`: keep the tokens, try later.
    TryLater,
    /// Anything else the server refused with: tell the user why.
    Refused,
}

/// Why an authorization failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// A URL is unusable (not absolute http(s), or refused by the URL policy).
    #[error("{what} {url:?} cannot be used: {reason}")]
    UrlRefused {
        /// What the URL is for.
        what: &'static str,
        /// The URL as received.
        url: String,
        /// Why.
        reason: String,
    },
    /// No Protected Resource Metadata was found (neither the `WWW-Authenticate` URL nor the
    /// well-known URIs answered with one).
    #[error("the server {server} publishes no protected resource metadata (tried {tried})")]
    NoResourceMetadata {
        /// The MCP endpoint.
        server: String,
        /// The URLs tried, with their answers.
        tried: String,
    },
    /// The metadata's `resource` is not this server: nothing is authorized for it.
    #[error(
        "the protected resource metadata is for {resource:?}, not for the server {server}: refusing to authorize"
    )]
    ResourceMismatch {
        /// The metadata's `resource`.
        resource: String,
        /// The MCP endpoint.
        server: String,
    },
    /// The metadata names no authorization server.
    #[error("the protected resource metadata of {server} names no authorization server")]
    NoAuthorizationServer {
        /// The MCP endpoint.
        server: String,
    },
    /// No authorization server metadata was found for the issuer.
    #[error("the authorization server {issuer:?} publishes no metadata (tried {tried})")]
    NoServerMetadata {
        /// The issuer.
        issuer: String,
        /// The URLs tried, with their answers.
        tried: String,
    },
    /// The metadata's `issuer` is not the issuer its URL was built from (RFC 8414 §3.3).
    #[error("the metadata at {url} is for the issuer {found:?}, not {expected:?}: not used")]
    IssuerMismatch {
        /// The issuer the URL was built from.
        expected: String,
        /// The document's `issuer`.
        found: String,
        /// Where it was fetched.
        url: String,
    },
    /// The authorization server does not offer PKCE with S256.
    #[error(
        "the authorization server {issuer:?} does not offer PKCE with S256 (code_challenge_methods_supported: {offered}): refusing to proceed"
    )]
    NoPkce {
        /// The issuer.
        issuer: String,
        /// What it offers.
        offered: String,
    },
    /// A document could not be used.
    #[error("{url}: {error}")]
    Document {
        /// Where it came from.
        url: String,
        /// What is wrong with it.
        error: DocumentError,
    },
    /// An endpoint answered with a status the step cannot use.
    #[error("{what} at {url} answered HTTP {status}{}", detail(.error))]
    Status {
        /// The step.
        what: &'static str,
        /// The URL.
        url: String,
        /// The status.
        status: u16,
        /// The OAuth error in the body, if any.
        error: Option<OAuthErrorResponse>,
    },
    /// A request could not be sent or answered.
    #[error("{what} at {url} failed: {cause}")]
    Transport {
        /// The step.
        what: &'static str,
        /// The URL.
        url: String,
        /// What the driver said.
        cause: String,
    },
    /// There is no way to obtain a client id for this authorization server.
    #[error(
        "cannot register with the authorization server {issuer:?}: it offers neither Client ID Metadata Documents (or none is configured) nor dynamic registration; give a client id (--client-id)"
    )]
    NoRegistration {
        /// The issuer.
        issuer: String,
    },
    /// Pre-registered credentials belong to another authorization server.
    #[error(
        "the configured client id is for the authorization server {configured:?}, but the server now uses {issuer:?}"
    )]
    PreRegisteredElsewhere {
        /// The issuer the credentials are for.
        configured: String,
        /// The issuer in use.
        issuer: String,
    },
    /// The authorization response failed its `iss` check (RFC 9207 §2.4): it is discarded, its
    /// error fields unread.
    #[error("the authorization response's issuer {found:?} is not {expected:?}: discarded (a mix-up attack?)")]
    IssMismatch {
        /// The recorded issuer.
        expected: String,
        /// `iss` as received.
        found: String,
    },
    /// The authorization server advertises `iss` but the response has none.
    #[error("the authorization response has no iss, though {expected:?} advertises it: discarded")]
    IssMissing {
        /// The recorded issuer.
        expected: String,
    },
    /// The authorization server refused or the user declined (`error` in the response).
    #[error("the authorization was not granted: {error}{}", description.as_deref().map(|d| format!(" ({d})")).unwrap_or_default())]
    Denied {
        /// The `error` code.
        error: String,
        /// `error_description`.
        description: Option<String>,
    },
    /// The browser step failed (the user agent could not be started, or gave up).
    #[error("the browser step failed: {cause}")]
    UserAgent {
        /// What the user agent said.
        cause: String,
    },
    /// The authorization was not completed in time.
    #[error("the authorization was not completed within {secs} s")]
    TimedOut {
        /// The time allowed.
        secs: u64,
    },
    /// A refresh did not give new tokens.
    #[error("refreshing the token failed ({kind:?}): {reason}")]
    Refresh {
        /// Which of the three outcomes.
        kind: RefreshFailure,
        /// What happened.
        reason: String,
    },
    /// The server kept refusing (`401`, or `403 insufficient_scope`) after this many
    /// authorizations without a request succeeding: not tried again.
    #[error(
        "the server still refuses after {attempts} authorizations (scope {scope:?}): giving up"
    )]
    AttemptLimit {
        /// Attempts made.
        attempts: u32,
        /// The scope last requested.
        scope: Option<String>,
    },
    /// The client assertion (`private_key_jwt`) could not be signed.
    #[error("cannot sign the client assertion: {0}")]
    ClientAssertion(super::client_assertion::AssertionError),
    /// The flow was used out of order.
    #[error("{0}")]
    Usage(&'static str),
}

fn detail(e: &Option<OAuthErrorResponse>) -> String {
    e.as_ref().map(|e| format!(" ({e})")).unwrap_or_default()
}

impl AuthError {
    /// Who has to act.
    pub fn blame(&self) -> Blame {
        match self {
            AuthError::UrlRefused { .. }
            | AuthError::ClientAssertion(_)
            | AuthError::NoRegistration { .. }
            | AuthError::PreRegisteredElsewhere { .. } => Blame::Configuration,
            AuthError::Transport { .. } => Blame::Transport,
            AuthError::Denied { .. } | AuthError::TimedOut { .. } | AuthError::UserAgent { .. } => {
                Blame::User
            }
            AuthError::Refresh {
                kind: RefreshFailure::TryLater,
                ..
            } => Blame::Transport,
            AuthError::Usage(_) => Blame::Caller,
            _ => Blame::Peer,
        }
    }
}

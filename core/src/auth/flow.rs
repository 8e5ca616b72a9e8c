//! The client side of MCP authorization (`basic/authorization/`) as a step function: from a
//! `401` (or a `403 insufficient_scope`, or a token about to expire) to a [`Grant`].
//!
//! The flow fetches what it needs through its owner, one request at a time
//! ([`FlowOutput::Fetch`], answered with [`Flow::handle_response`],
//! [`Flow::handle_fetch_failed`] or [`Flow::handle_fetch_refused`]), asks for the browser step once
//! ([`FlowOutput::OpenAuthorizationUrl`], answered with [`Flow::handle_redirect`]) and ends
//! with [`FlowOutput::Authorized`] or [`FlowOutput::Failed`]. Randomness (the PKCE verifier,
//! `state`) comes in as [`Entropy`]; time as `now` (the browser step's deadline) and `wall`
//! (token expiry). It reads no clock and sends nothing itself.
//!
//! The steps, in the specification's order:
//! 1. Protected Resource Metadata: the `WWW-Authenticate` `resource_metadata` URL if given,
//!    else the well-known URIs (path-inserted, then root). Its `resource` must name this
//!    server ([`resource_matches`]), else nothing is authorized.
//! 2. The first authorization server it names; its metadata from the RFC 8414 / OpenID
//!    Connect URLs in order; `issuer` must be the exact string the URL was built from; PKCE
//!    S256 must be offered (`code_challenge_methods_supported`).
//! 3. A client identity: pre-registered, else one stored for this issuer, else a Client ID
//!    Metadata Document URL (when the server supports them), else dynamic registration.
//! 4. The authorization request (`response_type=code`, PKCE S256, `state`, `resource`, the
//!    scope) for the browser; the response's `state` and `iss` checked (RFC 9207 §2.4, exact
//!    string comparison) before the code goes anywhere.
//! 5. The token request (`resource` again), authenticated as the registration says.
//!
//! Refresh ([`Flow::refresh`]) sends `resource` too, keeps a refresh token the server did not
//! rotate, and ends in one of three ways (`RefreshFailure`): a gone grant leads to a new
//! authorization, "try later" keeps the tokens. A stored client the server no longer knows
//! (`invalid_client`) is registered again once. Step-up ([`Flow::handle_forbidden`]) asks for
//! the union of the scopes requested and granted before and the challenge's. Until a request
//! succeeds ([`Flow::request_succeeded`]) at most [`FlowConfig::max_authorizations`]
//! authorization requests are made (the first one included), and a `401` right after a
//! refresh goes to a new authorization rather than refreshing again: never a loop.

use std::collections::VecDeque;

use base64::Engine as _;

use super::client_assertion::{AssertionKey, JWT_BEARER_ASSERTION_TYPE};
use super::discovery::{
    authorization_server_metadata_urls, canonical_resource, protected_resource_metadata_urls,
    resource_matches,
};
use super::error::{AuthError, RefreshFailure};
use super::grant::{
    scope_union, unix_seconds, ClientRegistration, Grant, RegistrationKind, TokenEndpointAuth,
    Tokens,
};
use super::metadata::{
    AuthorizationResponse, AuthorizationServerMetadata, ClientRegistrationResponse,
    OAuthErrorResponse, ProtectedResourceMetadata, TokenResponse,
};
use super::pkce::{OAuthState, PkceVerifier};
use super::secret::Secret;
use super::www_authenticate::BearerChallenge;
use crate::http::{Headers, Method, Request};
use crate::net_policy::{CheckedUrl, NetPolicy, UrlPurpose, UrlRejected};
use crate::time::{Duration, Instant, SystemTime};

/// How many redirects a metadata fetch follows, each checked like the first URL.
pub const MAX_REDIRECTS: u8 = 5;

/// Credentials the user or the host gives for one authorization server (pre-registration).
#[derive(Clone, Debug, PartialEq)]
pub struct PreRegistered {
    /// `client_id`.
    pub client_id: String,
    /// `client_secret`, for a confidential client.
    pub client_secret: Option<Secret>,
    /// The issuer the credentials are for; `None`: whichever the server uses.
    pub issuer: Option<String>,
}

/// Machine-to-machine credentials: the client acts on its own behalf with the
/// `client_credentials` grant (RFC 6749 §4.4), no browser step.
#[derive(Clone, Debug, PartialEq)]
pub struct ClientCredentials {
    /// `client_id`.
    pub client_id: String,
    /// How it authenticates.
    pub auth: ClientCredentialsAuth,
}

/// How a [`ClientCredentials`] client authenticates at the token endpoint.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum ClientCredentialsAuth {
    /// A client secret (`client_secret_basic`, or `client_secret_post` where that is all the
    /// server takes).
    Secret(Secret),
    /// A signed JWT (`private_key_jwt`, RFC 7523).
    PrivateKeyJwt(AssertionKey),
}

/// How the client obtains its identity.
#[derive(Clone, Debug, PartialEq)]
pub struct ClientSetup {
    /// Machine-to-machine credentials: when set, the client uses the `client_credentials`
    /// grant instead of the authorization code flow.
    pub client_credentials: Option<ClientCredentials>,
    /// Pre-registered credentials (tried first).
    pub pre_registered: Option<PreRegistered>,
    /// The HTTPS URL of the client's Client ID Metadata Document, used as `client_id` where
    /// the authorization server supports them.
    pub metadata_document_url: Option<String>,
    /// `client_name` for dynamic registration.
    pub client_name: String,
    /// Whether dynamic registration may be used.
    pub dynamic_registration: bool,
}

impl Default for ClientSetup {
    fn default() -> Self {
        ClientSetup {
            client_credentials: None,
            pre_registered: None,
            metadata_document_url: None,
            client_name: "mcpwire".into(),
            dynamic_registration: true,
        }
    }
}

/// What a [`Flow`] is for.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowConfig {
    /// The MCP endpoint the tokens are for.
    pub server_url: String,
    /// Where the browser is sent back (the driver's loopback listener).
    pub redirect_uri: String,
    /// The client identity.
    pub client: ClientSetup,
    /// A scope the user chose, used instead of the scope selection strategy.
    pub scope: Option<String>,
    /// How long the browser step may take.
    pub authorization_timeout: Duration,
    /// Authorization requests allowed (the first one and step-ups) before a request succeeds
    /// again.
    pub max_authorizations: u32,
    /// The URL rules every URL the servers hand the flow is checked against before it is
    /// fetched or shown (https only; no loopback, private, link-local or metadata address;
    /// development mode allows `http` to loopback). The driver checks the addresses a name
    /// resolves to with the same policy ([`FlowConfig::policy`], [`FetchPurpose::url_purpose`]).
    pub policy: NetPolicy,
    /// Refreshes are coordinated with the token store (single-flight across threads and
    /// processes): before a refresh the flow asks its owner to lock the store
    /// ([`FlowOutput::LockStore`]) and goes on with what the store holds
    /// ([`Flow::handle_store_locked`]); the owner keeps the lock until the flow ends
    /// (authorized, failed, or on to a new authorization) and writes the new grant before it
    /// is used. Off by default (nothing to coordinate with).
    pub coordinate_refresh: bool,
    /// The 2025-03-26 revision's discovery, for servers of that revision only: without
    /// Protected Resource Metadata the MCP server's origin is the authorization server, its
    /// RFC 8414 metadata at the root, and without that the default endpoints `/authorize`,
    /// `/token` and `/register`. Later revisions require the metadata; off by default.
    pub legacy_discovery: bool,
}

impl FlowConfig {
    /// The defaults for `server_url`, with the browser sent back to `redirect_uri`: five
    /// minutes for the browser step, three authorization requests, https only.
    pub fn new(server_url: impl Into<String>, redirect_uri: impl Into<String>) -> Self {
        FlowConfig {
            server_url: server_url.into(),
            redirect_uri: redirect_uri.into(),
            client: ClientSetup::default(),
            scope: None,
            authorization_timeout: Duration::from_secs(300),
            max_authorizations: 3,
            policy: NetPolicy::strict(),
            legacy_discovery: false,
            coordinate_refresh: false,
        }
    }
}

/// The randomness one authorization needs, drawn by the driver from a CSPRNG.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Entropy {
    /// For the PKCE code verifier.
    pub verifier: [u8; 32],
    /// For `state`.
    pub state: [u8; 16],
}

impl std::fmt::Debug for Entropy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Entropy(<redacted>)")
    }
}

/// A fetch's id, to answer it with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FetchId(pub u64);

/// What a fetch is for (the driver checks the URL's resolved addresses for every purpose with
/// [`FlowConfig::policy`], and never follows a redirect itself).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FetchPurpose {
    /// Protected Resource Metadata.
    ResourceMetadata,
    /// Authorization server metadata.
    ServerMetadata,
    /// Dynamic client registration.
    Registration,
    /// A token request (code exchange or refresh).
    Token,
}

impl FetchPurpose {
    /// The URL policy's purpose for it.
    pub fn url_purpose(self) -> UrlPurpose {
        match self {
            FetchPurpose::ResourceMetadata => UrlPurpose::ResourceMetadata,
            FetchPurpose::ServerMetadata => UrlPurpose::AuthorizationServer,
            FetchPurpose::Registration | FetchPurpose::Token => UrlPurpose::MetadataEndpoint,
        }
    }
}

/// What the flow asks of its owner, or tells it.
#[derive(Debug)]
#[non_exhaustive]
pub enum FlowOutput {
    /// Send this request and answer with [`Flow::handle_response`] (the whole body),
    /// [`Flow::handle_fetch_failed`], or [`Flow::handle_fetch_refused`] when an address its
    /// host resolved to fails the policy.
    Fetch {
        /// Its id.
        id: FetchId,
        /// The request.
        request: Request,
        /// What it is for.
        purpose: FetchPurpose,
    },
    /// Show this URL to the user (and open it in a browser if asked), then answer with the
    /// query of the redirect to [`FlowConfig::redirect_uri`] ([`Flow::handle_redirect`]).
    OpenAuthorizationUrl {
        /// The authorization URL (validated: https, or http to loopback in development mode).
        url: String,
    },
    /// Lock the token store for this grant (across threads and processes; it may mean waiting
    /// for another process's refresh), read what it holds for it, and answer with
    /// [`Flow::handle_store_locked`]. Keep the lock until the flow's next
    /// [`FlowOutput::Authorized`] (write the grant, then unlock), [`FlowOutput::Failed`] or
    /// [`FlowOutput::RefreshFailed`] (unlock). Only with [`FlowConfig::coordinate_refresh`].
    LockStore {
        /// The grant's issuer.
        issuer: String,
        /// The grant's resource.
        resource: String,
    },
    /// Authorized: use the grant's access token for the resource, and store the grant.
    Authorized(Box<Grant>),
    /// A refresh failed in a way that needs a new authorization, which has started (for the
    /// owner to log).
    RefreshFailed(AuthError),
    /// Failed; the flow is idle again. A [`RefreshFailure::TryLater`] keeps the grant.
    Failed(AuthError),
}

/// Why [`Flow::handle_redirect`] did not accept a redirect (the flow keeps waiting for the
/// right one unless the error says it ended).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum RedirectRejected {
    /// No authorization is waiting for a redirect.
    #[error("no authorization is waiting for a redirect")]
    NotWaiting,
    /// The query is not an authorization response.
    #[error("not an authorization response: {0}")]
    Malformed(String),
    /// `state` is missing or not this authorization's: ignored (the flow keeps waiting).
    #[error("the redirect's state does not match this authorization: ignored")]
    StateMismatch,
    /// The response was valid to read but ends the authorization (see the
    /// [`FlowOutput::Failed`] that follows).
    #[error("the authorization failed: {0}")]
    Ended(AuthError),
}

#[derive(Debug)]
struct InFlight {
    id: FetchId,
    purpose: FetchPurpose,
    url: String,
    redirects: u8,
}

/// What the browser step waits with.
struct Pending {
    verifier: PkceVerifier,
    state: OAuthState,
    deadline: Instant,
}

impl std::fmt::Debug for Pending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pending")
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}

#[derive(Debug)]
enum Stage {
    Idle,
    ResourceMetadata {
        candidates: VecDeque<String>,
        tried: Vec<String>,
    },
    ServerMetadata {
        candidates: VecDeque<String>,
        tried: Vec<String>,
    },
    Registering,
    Authorizing(Pending),
    ExchangingCode,
    Refreshing,
    /// Waiting for the token store's lock before a refresh.
    Locking,
}

/// What one run of the flow has learned so far.
#[derive(Debug, Default)]
struct Run {
    challenge_scope: Option<String>,
    resource: Option<String>,
    resource_metadata: Option<ProtectedResourceMetadata>,
    issuer: Option<String>,
    metadata: Option<AuthorizationServerMetadata>,
    client: Option<ClientRegistration>,
    scope: Option<String>,
    entropy: Option<Entropy>,
    reregistered: bool,
    /// The 2025-03-26 fallback is in use (the server's origin as authorization server).
    legacy: bool,
}

/// The authorization flow for one MCP server (see the module docs).
#[derive(Debug)]
pub struct Flow {
    config: FlowConfig,
    grant: Option<Grant>,
    stage: Stage,
    run: Run,
    inflight: Option<InFlight>,
    out: VecDeque<FlowOutput>,
    next_fetch: u64,
    /// Authorization requests since a request last succeeded.
    authorizations: u32,
    /// The grant was refreshed since a request last succeeded.
    refreshed: bool,
    /// The latest `now` an input brought (the browser step's deadline counts from it).
    now: Option<Instant>,
    /// The latest wall time an input brought (client assertions are dated with it).
    wall: Option<SystemTime>,
    /// The user declined (or did not finish) the last authorization: later refusals fail at
    /// once with it instead of asking again, until [`Flow::allow_again`].
    declined: Option<AuthError>,
    /// [`Flow::allow_again`] came while an authorization was under way: its failure, if it
    /// fails, does not stop the next refusal from asking again.
    again_after: bool,
}

impl Flow {
    /// A flow for `config`'s server, with the grant the token store kept for it (if any).
    pub fn new(config: FlowConfig, stored: Option<Grant>) -> Self {
        Flow {
            config,
            grant: stored,
            stage: Stage::Idle,
            run: Run::default(),
            inflight: None,
            out: VecDeque::new(),
            next_fetch: 0,
            authorizations: 0,
            refreshed: false,
            now: None,
            wall: None,
            declined: None,
            again_after: false,
        }
    }

    /// The current grant (its access token is the one to send).
    pub fn grant(&self) -> Option<&Grant> {
        self.grant.as_ref()
    }

    /// The configuration.
    pub fn config(&self) -> &FlowConfig {
        &self.config
    }

    /// Whether an authorization or a refresh is under way.
    pub fn is_busy(&self) -> bool {
        !matches!(self.stage, Stage::Idle)
    }

    /// The next output, until `None`.
    pub fn poll_output(&mut self) -> Option<FlowOutput> {
        self.out.pop_front()
    }

    /// The browser step's deadline, while it waits.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match &self.stage {
            Stage::Authorizing(p) => Some(p.deadline),
            _ => None,
        }
    }

    /// Time passed: a browser step past its deadline fails.
    pub fn handle_timeout(&mut self, now: Instant) {
        if let Stage::Authorizing(p) = &self.stage {
            if now >= p.deadline {
                let secs = self.config.authorization_timeout.as_secs();
                self.fail(AuthError::TimedOut { secs });
            }
        }
    }

    /// The browser step could not be done (the user agent failed, the user closed it): the
    /// authorization fails with [`AuthError::UserAgent`].
    pub fn handle_user_agent_failed(&mut self, now: Instant, cause: &str) {
        self.now = Some(now);
        if matches!(self.stage, Stage::Authorizing(_)) {
            self.fail(AuthError::UserAgent {
                cause: cause.to_owned(),
            });
        }
    }

    /// The user declined or did not finish the last authorization, so later refusals fail at
    /// once with that error (a person is not asked again and again): from now on a refusal
    /// starts a new authorization again (a host's "log in" button).
    ///
    /// Called while an authorization is still under way (its browser step has not come back
    /// yet: the host learnt of the decline before this flow did), it holds for that
    /// authorization's outcome too.
    pub fn allow_again(&mut self) {
        self.declined = None;
        self.authorizations = 0;
        self.again_after = !matches!(self.stage, Stage::Idle);
    }

    /// A request to the resource succeeded: the step-up count starts again.
    pub fn request_succeeded(&mut self) {
        self.authorizations = 0;
        self.refreshed = false;
    }

    /// The server answered `401` (with `WWW-Authenticate`'s `Bearer` challenge, if any):
    /// refreshes when a refresh token is at hand (and the grant was not just refreshed), else
    /// authorizes from the start (the resource metadata is fetched again: the server may have
    /// moved to another authorization server). Fails with [`AuthError::AttemptLimit`] once
    /// [`FlowConfig::max_authorizations`] were made without a request succeeding.
    pub fn handle_unauthorized(
        &mut self,
        now: Instant,
        wall: SystemTime,
        challenge: Option<&BearerChallenge>,
        entropy: Entropy,
    ) -> Result<(), AuthError> {
        self.wall = Some(wall);
        self.now = Some(now);
        if self.is_busy() {
            return Err(AuthError::Usage("an authorization is already under way"));
        }
        if let Some(e) = &self.declined {
            return Err(e.clone());
        }
        let refresh = !self.refreshed
            && self
                .grant
                .as_ref()
                .is_some_and(|g| g.tokens.refresh_token.is_some());
        if !refresh && self.authorizations >= self.config.max_authorizations {
            return Err(AuthError::AttemptLimit {
                attempts: self.authorizations,
                scope: self.grant.as_ref().and_then(|g| g.requested_scope.clone()),
            });
        }
        self.run = Run {
            challenge_scope: challenge.and_then(|c| c.scope.clone()),
            entropy: Some(entropy),
            ..Run::default()
        };
        if refresh {
            return self.start_refresh();
        }
        self.start_discovery(challenge.and_then(|c| c.resource_metadata.clone()));
        Ok(())
    }

    /// The server answered `403`: with `error="insufficient_scope"` a step-up authorization
    /// starts (`Ok(true)`), for the union of the scope requested before and the challenge's;
    /// any other `403` is not for authorization to mend (`Ok(false)`). Once
    /// [`FlowConfig::max_authorizations`] were made without a request succeeding it fails with
    /// [`AuthError::AttemptLimit`].
    pub fn handle_forbidden(
        &mut self,
        now: Instant,
        wall: SystemTime,
        challenge: Option<&BearerChallenge>,
        entropy: Entropy,
    ) -> Result<bool, AuthError> {
        self.wall = Some(wall);
        self.now = Some(now);
        let Some(challenge) =
            challenge.filter(|c| c.error.as_deref() == Some("insufficient_scope"))
        else {
            return Ok(false);
        };
        if self.is_busy() {
            return Err(AuthError::Usage("an authorization is already under way"));
        }
        let before = self
            .grant
            .as_ref()
            .and_then(|g| scope_union(g.requested_scope.as_deref(), g.tokens.scope.as_deref()));
        let scope = scope_union(before.as_deref(), challenge.scope.as_deref());
        if self.authorizations >= self.config.max_authorizations {
            return Err(AuthError::AttemptLimit {
                attempts: self.authorizations,
                scope,
            });
        }
        self.run = Run {
            challenge_scope: scope,
            entropy: Some(entropy),
            ..Run::default()
        };
        // What the grant knows (issuer, metadata, client) is reused; without one, discovery.
        match self.grant.clone() {
            Some(g) => {
                self.run.resource = Some(g.resource);
                self.run.issuer = Some(g.issuer);
                self.run.metadata = Some(g.server_metadata);
                self.run.client = Some(g.client);
                self.obtain();
            }
            None => self.start_discovery(challenge.resource_metadata.clone()),
        }
        Ok(true)
    }

    /// Refreshes the grant's access token (before it expires: see
    /// [`Tokens::expires_soon`]).
    pub fn refresh(
        &mut self,
        now: Instant,
        wall: SystemTime,
        entropy: Entropy,
    ) -> Result<(), AuthError> {
        self.wall = Some(wall);
        self.now = Some(now);
        if self.is_busy() {
            return Err(AuthError::Usage("an authorization is already under way"));
        }
        if self
            .grant
            .as_ref()
            .is_none_or(|g| g.tokens.refresh_token.is_none())
        {
            return Err(AuthError::Usage(
                "there is no refresh token to refresh with",
            ));
        }
        self.run = Run {
            entropy: Some(entropy),
            ..Run::default()
        };
        self.start_refresh()
    }

    /// The answer to a [`FlowOutput::Fetch`]: its status, headers and whole body.
    pub fn handle_response(
        &mut self,
        now: Instant,
        wall: SystemTime,
        id: FetchId,
        status: u16,
        headers: &Headers,
        body: &[u8],
    ) {
        self.now = Some(now);
        self.wall = Some(wall);
        let Some(f) = self.inflight.take_if(|f| f.id == id) else {
            return; // late or unknown: ignored
        };
        if (300..400).contains(&status) && status != 304 {
            if let Some(location) = headers.get("location") {
                self.redirected(f, location);
                return;
            }
        }
        match f.purpose {
            FetchPurpose::ResourceMetadata => self.on_resource_metadata(&f.url, status, body),
            FetchPurpose::ServerMetadata => self.on_server_metadata(&f.url, status, body),
            FetchPurpose::Registration => self.on_registration(&f.url, status, body),
            FetchPurpose::Token => self.on_token(now, wall, &f.url, status, body),
        }
    }

    /// A [`FlowOutput::Fetch`] could not be sent or answered (`cause` for a person).
    pub fn handle_fetch_failed(&mut self, now: Instant, id: FetchId, cause: &str) {
        self.now = Some(now);
        let Some(f) = self.inflight.take_if(|f| f.id == id) else {
            return;
        };
        let what = purpose_name(f.purpose);
        let error = AuthError::Transport {
            what,
            url: f.url,
            cause: cause.to_owned(),
        };
        self.fetch_failed(error);
    }

    /// A [`FlowOutput::Fetch`] was not sent because an address its host resolved to is
    /// refused by [`FlowConfig::policy`] (the driver's [`NetPolicy::check_resolved`], or any
    /// check of the policy it made before connecting): the flow fails with
    /// [`AuthError::UrlRefused`], whose reason is `rejected`'s message (it names the address
    /// and its range). During a refresh it is a refresh to try later, as for a failed fetch.
    pub fn handle_fetch_refused(&mut self, now: Instant, id: FetchId, rejected: &UrlRejected) {
        self.now = Some(now);
        let Some(f) = self.inflight.take_if(|f| f.id == id) else {
            return;
        };
        let error = AuthError::UrlRefused {
            what: purpose_name(f.purpose),
            url: f.url,
            reason: rejected.to_string(),
        };
        self.fetch_failed(error);
    }

    /// The in-flight fetch ended without an answer, with `error`.
    fn fetch_failed(&mut self, error: AuthError) {
        if matches!(self.stage, Stage::Refreshing) {
            self.fail(AuthError::Refresh {
                kind: RefreshFailure::TryLater,
                reason: error.to_string(),
            });
        } else {
            self.fail(error);
        }
    }

    /// The browser came back to the redirect URI with `query` (without the `?`). A wrong
    /// `state` is ignored (the flow keeps waiting); otherwise the response is checked (`iss`)
    /// and the code exchanged, or the flow fails.
    pub fn handle_redirect(
        &mut self,
        now: Instant,
        wall: SystemTime,
        query: &str,
    ) -> Result<(), RedirectRejected> {
        self.wall = Some(wall);
        self.now = Some(now);
        let Stage::Authorizing(pending) = &self.stage else {
            return Err(RedirectRejected::NotWaiting);
        };
        let response = AuthorizationResponse::from_query(query)
            .map_err(|e| RedirectRejected::Malformed(e.to_string()))?;
        if !response
            .state
            .as_deref()
            .is_some_and(|s| pending.state.matches(s))
        {
            return Err(RedirectRejected::StateMismatch);
        }
        let verifier = pending.verifier.clone();
        if let Err(e) = self.check_iss(response.iss.as_deref()) {
            self.fail(e.clone());
            return Err(RedirectRejected::Ended(e));
        }
        if let Some(error) = response.error {
            let e = AuthError::Denied {
                error,
                description: response.error_description,
            };
            self.fail(e.clone());
            return Err(RedirectRejected::Ended(e));
        }
        let Some(code) = response.code else {
            let e = AuthError::Usage("the authorization response has no code");
            self.fail(e.clone());
            return Err(RedirectRejected::Ended(e));
        };
        self.exchange_code(&code, &verifier);
        Ok(())
    }

    // -----------------------------------------------------------------------------------
    // Steps.

    fn start_discovery(&mut self, from_header: Option<String>) {
        let mut candidates = VecDeque::new();
        if let Some(url) = from_header {
            candidates.push_back(url);
        }
        match protected_resource_metadata_urls(&self.config.server_url) {
            Ok(urls) => candidates.extend(urls),
            Err(e) => {
                return self.fail(AuthError::UrlRefused {
                    what: "the server URL",
                    url: e.url,
                    reason: e.reason,
                })
            }
        }
        self.stage = Stage::ResourceMetadata {
            candidates,
            tried: Vec::new(),
        };
        self.next_resource_metadata();
    }

    fn next_resource_metadata(&mut self) {
        let Stage::ResourceMetadata { candidates, tried } = &mut self.stage else {
            return;
        };
        match candidates.pop_front() {
            Some(url) => self.fetch_get(FetchPurpose::ResourceMetadata, url),
            None if self.config.legacy_discovery => match origin(&self.config.server_url) {
                Some(issuer) => {
                    self.run.legacy = true;
                    let url = format!("{issuer}/.well-known/oauth-authorization-server");
                    self.run.issuer = Some(issuer);
                    self.stage = Stage::ServerMetadata {
                        candidates: VecDeque::from([url]),
                        tried: Vec::new(),
                    };
                    self.next_server_metadata();
                }
                None => self.fail(AuthError::UrlRefused {
                    what: "the server URL",
                    url: self.config.server_url.clone(),
                    reason: "not an absolute http(s) URL".into(),
                }),
            },
            None => {
                let tried = tried.join(", ");
                let server = self.config.server_url.clone();
                self.fail(AuthError::NoResourceMetadata { server, tried });
            }
        }
    }

    /// A metadata candidate's answer: the document when it is one; otherwise the next
    /// candidate is tried (a missing document, 4xx) or the attempt ends (a failing server,
    /// 5xx; an unreadable document).
    fn metadata_answer<T>(
        &mut self,
        what: &'static str,
        url: &str,
        status: u16,
        body: &[u8],
        parse: fn(&[u8]) -> Result<T, super::metadata::DocumentError>,
    ) -> Option<T> {
        if status != 200 {
            if let Stage::ResourceMetadata { tried, .. } | Stage::ServerMetadata { tried, .. } =
                &mut self.stage
            {
                tried.push(format!("{url} ({status})"));
            }
            if (400..500).contains(&status) {
                match self.stage {
                    Stage::ResourceMetadata { .. } => self.next_resource_metadata(),
                    _ => self.next_server_metadata(),
                }
            } else {
                self.fail(AuthError::Status {
                    what,
                    url: url.to_owned(),
                    status,
                    error: None,
                });
            }
            return None;
        }
        match parse(body) {
            Ok(m) => Some(m),
            Err(error) => {
                self.fail(AuthError::Document {
                    url: url.to_owned(),
                    error,
                });
                None
            }
        }
    }

    fn on_resource_metadata(&mut self, url: &str, status: u16, body: &[u8]) {
        let what = "the protected resource metadata";
        let Some(prm) =
            self.metadata_answer(what, url, status, body, ProtectedResourceMetadata::parse)
        else {
            return;
        };
        if !resource_matches(&prm.resource, &self.config.server_url) {
            return self.fail(AuthError::ResourceMismatch {
                resource: prm.resource,
                server: self.config.server_url.clone(),
            });
        }
        let Some(issuer) = prm.authorization_servers.first().cloned() else {
            return self.fail(AuthError::NoAuthorizationServer {
                server: self.config.server_url.clone(),
            });
        };
        self.run.resource = Some(prm.resource.clone());
        self.run.resource_metadata = Some(prm);
        self.start_server_metadata(issuer);
    }

    fn start_server_metadata(&mut self, issuer: String) {
        let urls = match authorization_server_metadata_urls(&issuer) {
            Ok(urls) => urls,
            Err(e) => {
                return self.fail(AuthError::UrlRefused {
                    what: "the authorization server",
                    url: e.url,
                    reason: e.reason,
                })
            }
        };
        self.run.issuer = Some(issuer);
        self.stage = Stage::ServerMetadata {
            candidates: urls.into(),
            tried: Vec::new(),
        };
        self.next_server_metadata();
    }

    fn next_server_metadata(&mut self) {
        let Stage::ServerMetadata { candidates, tried } = &mut self.stage else {
            return;
        };
        match candidates.pop_front() {
            Some(url) => self.fetch_get(FetchPurpose::ServerMetadata, url),
            None if self.run.legacy => {
                // 2025-03-26 "Fallbacks for Servers without Metadata Discovery".
                let issuer = self.run.issuer.clone().unwrap_or_default();
                let doc = serde_json::json!({
                    "issuer": issuer,
                    "authorization_endpoint": format!("{issuer}/authorize"),
                    "token_endpoint": format!("{issuer}/token"),
                    "registration_endpoint": format!("{issuer}/register"),
                    "code_challenge_methods_supported": ["S256"],
                });
                match AuthorizationServerMetadata::parse(doc.to_string().as_bytes()) {
                    Ok(m) => {
                        self.run.metadata = Some(m);
                        self.register();
                    }
                    Err(e) => self.fail(AuthError::Document {
                        url: issuer,
                        error: e,
                    }),
                }
            }
            None => {
                let tried = tried.join(", ");
                let issuer = self.run.issuer.clone().unwrap_or_default();
                self.fail(AuthError::NoServerMetadata { issuer, tried });
            }
        }
    }

    fn on_server_metadata(&mut self, url: &str, status: u16, body: &[u8]) {
        let what = "the authorization server metadata";
        let Some(metadata) =
            self.metadata_answer(what, url, status, body, AuthorizationServerMetadata::parse)
        else {
            return;
        };
        let expected = self.run.issuer.clone().unwrap_or_default();
        // RFC 8414 §3.3: identical, as strings.
        if metadata.issuer != expected {
            return self.fail(AuthError::IssuerMismatch {
                expected,
                found: metadata.issuer,
                url: url.to_owned(),
            });
        }
        let s256 = metadata
            .code_challenge_methods_supported
            .as_ref()
            .is_some_and(|m| m.iter().any(|m| m == "S256"));
        if !s256 && self.config.client.client_credentials.is_none() {
            let offered = match &metadata.code_challenge_methods_supported {
                Some(m) => format!("{m:?}"),
                None => "absent".into(),
            };
            return self.fail(AuthError::NoPkce {
                issuer: expected,
                offered,
            });
        }
        for (member, value) in [
            ("authorization_endpoint", &metadata.authorization_endpoint),
            ("token_endpoint", &metadata.token_endpoint),
        ] {
            if value.is_none() {
                return self.fail(AuthError::Document {
                    url: url.to_owned(),
                    error: super::metadata::DocumentError::Missing {
                        kind: super::metadata::DocumentKind::AuthorizationServerMetadata,
                        member,
                    },
                });
            }
        }
        // A grant from another authorization server is not used (nor its client, unless
        // that is a portable metadata document URL).
        if self.grant.as_ref().is_some_and(|g| g.issuer != expected) {
            self.grant = None;
        }
        self.run.metadata = Some(metadata);
        self.register();
    }

    fn register(&mut self) {
        let issuer = self.run.issuer.clone().unwrap_or_default();
        let Some(metadata) = self.run.metadata.clone() else {
            return self.fail(AuthError::Usage("registration before metadata"));
        };
        if let Some(cc) = self.config.client.client_credentials.clone() {
            let (client_secret, auth_method) = match cc.auth {
                ClientCredentialsAuth::Secret(secret) => {
                    (Some(secret), choose_auth_method(&metadata, true))
                }
                ClientCredentialsAuth::PrivateKeyJwt(_) => (None, TokenEndpointAuth::PrivateKeyJwt),
            };
            self.run.client = Some(ClientRegistration {
                client_id: cc.client_id,
                client_secret,
                auth_method,
                kind: RegistrationKind::PreRegistered,
            });
            return self.obtain();
        }
        if let Some(pre) = self.config.client.pre_registered.clone() {
            if let Some(configured) = pre.issuer.filter(|i| *i != issuer) {
                return self.fail(AuthError::PreRegisteredElsewhere { configured, issuer });
            }
            let auth_method = choose_auth_method(&metadata, pre.client_secret.is_some());
            self.run.client = Some(ClientRegistration {
                client_id: pre.client_id,
                client_secret: pre.client_secret,
                auth_method,
                kind: RegistrationKind::PreRegistered,
            });
            return self.obtain();
        }
        if !self.run.reregistered {
            if let Some(g) = self.grant.as_ref().filter(|g| g.issuer == issuer) {
                self.run.client = Some(g.client.clone());
                return self.authorize();
            }
        }
        if let Some(url) = self.config.client.metadata_document_url.clone() {
            if metadata.client_id_metadata_document_supported {
                self.run.client = Some(ClientRegistration {
                    client_id: url,
                    client_secret: None,
                    auth_method: TokenEndpointAuth::None,
                    kind: RegistrationKind::MetadataDocument,
                });
                return self.authorize();
            }
        }
        match (
            &metadata.registration_endpoint,
            self.config.client.dynamic_registration,
        ) {
            (Some(endpoint), true) => {
                let body = self.registration_body(&metadata);
                self.stage = Stage::Registering;
                self.fetch_json(FetchPurpose::Registration, endpoint.clone(), body);
            }
            _ => self.fail(AuthError::NoRegistration { issuer }),
        }
    }

    /// RFC 7591 §2 client metadata: a native public client where the server allows one.
    fn registration_body(&self, metadata: &AuthorizationServerMetadata) -> Vec<u8> {
        let method = if metadata.supports_auth_method("none") {
            "none"
        } else if metadata.supports_auth_method("client_secret_basic") {
            "client_secret_basic"
        } else if metadata.supports_auth_method("client_secret_post") {
            "client_secret_post"
        } else {
            "none"
        };
        let body = serde_json::json!({
            "client_name": self.config.client.client_name,
            "redirect_uris": [self.config.redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": method,
            "application_type": "native",
        });
        body.to_string().into_bytes()
    }

    fn on_registration(&mut self, url: &str, status: u16, body: &[u8]) {
        if !(200..300).contains(&status) {
            return self.fail(AuthError::Status {
                what: "client registration",
                url: url.to_owned(),
                status,
                error: OAuthErrorResponse::parse(body).ok(),
            });
        }
        let r = match ClientRegistrationResponse::parse(body) {
            Ok(r) => r,
            Err(error) => {
                return self.fail(AuthError::Document {
                    url: url.to_owned(),
                    error,
                })
            }
        };
        let Some(metadata) = &self.run.metadata else {
            return self.fail(AuthError::Usage("registration before metadata"));
        };
        let auth_method = r
            .token_endpoint_auth_method
            .as_deref()
            .and_then(TokenEndpointAuth::from_name)
            .unwrap_or_else(|| choose_auth_method(metadata, r.client_secret.is_some()));
        self.run.client = Some(ClientRegistration {
            client_id: r.client_id,
            client_secret: r.client_secret,
            auth_method,
            kind: RegistrationKind::Dynamic,
        });
        self.authorize();
    }

    /// The scope to request: the user's, else the challenge's, else the resource's
    /// `scopes_supported`, else none; `offline_access` added when the authorization server
    /// offers it (for a refresh token).
    fn select_scope(&self) -> Option<String> {
        let base = self
            .config
            .scope
            .clone()
            .or_else(|| self.run.challenge_scope.clone())
            .or_else(|| {
                self.run
                    .resource_metadata
                    .as_ref()
                    .and_then(|m| m.scopes_supported.as_ref())
                    .filter(|s| !s.is_empty())
                    .map(|s| s.join(" "))
            });
        let offline = self
            .run
            .metadata
            .as_ref()
            .and_then(|m| m.scopes_supported.as_ref())
            .is_some_and(|s| s.iter().any(|s| s == "offline_access"));
        match base {
            Some(b) if offline => scope_union(Some(&b), Some("offline_access")),
            other => other,
        }
    }

    /// Tokens for the client: the `client_credentials` grant when configured, else the
    /// authorization code flow.
    fn obtain(&mut self) {
        if self.config.client.client_credentials.is_none() {
            return self.authorize();
        }
        let resource = match self.resource() {
            Ok(r) => r,
            Err(e) => return self.fail(e),
        };
        let scope = self.select_scope();
        self.authorizations += 1;
        let mut form = url::form_urlencoded::Serializer::new(String::new());
        form.append_pair("grant_type", "client_credentials")
            .append_pair("resource", &resource);
        if let Some(scope) = &scope {
            form.append_pair("scope", scope);
        }
        self.run.scope = scope;
        self.run.resource = Some(resource);
        self.stage = Stage::ExchangingCode;
        self.token_request(form);
    }

    fn authorize(&mut self) {
        let (Some(metadata), Some(client), Some(entropy)) =
            (&self.run.metadata, &self.run.client, self.run.entropy)
        else {
            return self.fail(AuthError::Usage("authorization before metadata and client"));
        };
        let Some(endpoint) = metadata.authorization_endpoint.clone() else {
            return self.fail(AuthError::Usage("no authorization endpoint"));
        };
        if let Err(e) = self.check_url(
            "the authorization endpoint",
            &endpoint,
            UrlPurpose::AuthorizationUrl,
        ) {
            return self.fail(e);
        }
        let resource = match self.resource() {
            Ok(r) => r,
            Err(e) => return self.fail(e),
        };
        let scope = self.select_scope();
        let verifier = PkceVerifier::from_random(entropy.verifier);
        let state = OAuthState::from_random(entropy.state);
        let mut query = url::form_urlencoded::Serializer::new(String::new());
        query
            .append_pair("response_type", "code")
            .append_pair("client_id", &client.client_id)
            .append_pair("redirect_uri", &self.config.redirect_uri)
            .append_pair("code_challenge", &verifier.challenge())
            .append_pair("code_challenge_method", "S256")
            .append_pair("state", state.expose())
            .append_pair("resource", &resource);
        if let Some(scope) = &scope {
            query.append_pair("scope", scope);
        }
        self.authorizations += 1;
        let sep = if endpoint.contains('?') { '&' } else { '?' };
        let url = format!("{endpoint}{sep}{}", query.finish());
        self.run.scope = scope;
        self.run.resource = Some(resource);
        let Some(now) = self.now else {
            return self.fail(AuthError::Usage("authorization before any input"));
        };
        self.stage = Stage::Authorizing(Pending {
            verifier,
            state,
            deadline: now + self.config.authorization_timeout,
        });
        self.out.push_back(FlowOutput::OpenAuthorizationUrl { url });
    }

    /// RFC 9207 §2.4 as the MCP specification's table gives it; exact string comparison.
    fn check_iss(&self, iss: Option<&str>) -> Result<(), AuthError> {
        let expected = self.run.issuer.clone().unwrap_or_default();
        let advertised = self
            .run
            .metadata
            .as_ref()
            .is_some_and(|m| m.authorization_response_iss_parameter_supported);
        match iss {
            Some(found) if found != expected => Err(AuthError::IssMismatch {
                expected,
                found: found.to_owned(),
            }),
            None if advertised => Err(AuthError::IssMissing { expected }),
            _ => Ok(()),
        }
    }

    fn exchange_code(&mut self, code: &Secret, verifier: &PkceVerifier) {
        let mut form = url::form_urlencoded::Serializer::new(String::new());
        form.append_pair("grant_type", "authorization_code")
            .append_pair("code", code.expose())
            .append_pair("redirect_uri", &self.config.redirect_uri)
            .append_pair("code_verifier", verifier.expose())
            .append_pair("resource", self.run.resource.as_deref().unwrap_or_default());
        self.stage = Stage::ExchangingCode;
        self.token_request(form);
    }

    fn start_refresh(&mut self) -> Result<(), AuthError> {
        if self.config.coordinate_refresh {
            let Some(g) = &self.grant else {
                return Err(AuthError::Usage("there is no grant to refresh"));
            };
            self.stage = Stage::Locking;
            self.out.push_back(FlowOutput::LockStore {
                issuer: g.issuer.clone(),
                resource: g.resource.clone(),
            });
            return Ok(());
        }
        self.send_refresh()
    }

    /// The token store is locked ([`FlowOutput::LockStore`]) and holds `stored` for this
    /// grant. A grant another thread or process stored since (its tokens differ from ours) is
    /// taken: its access token as is while it is fresh, else its refresh token (the one the
    /// server now knows) is used for the refresh.
    pub fn handle_store_locked(&mut self, now: Instant, wall: SystemTime, stored: Option<Grant>) {
        self.now = Some(now);
        self.wall = Some(wall);
        if !matches!(self.stage, Stage::Locking) {
            return;
        }
        let ours = self.grant.as_ref();
        let newer = stored.filter(|s| {
            ours.is_some_and(|g| {
                s.issuer == g.issuer
                    && s.resource == g.resource
                    && (s.tokens.access_token != g.tokens.access_token
                        || s.tokens.refresh_token != g.tokens.refresh_token)
            })
        });
        if let Some(s) = newer {
            let fresh = !s.tokens.expires_soon(wall);
            self.grant = Some(s.clone());
            if fresh {
                self.refreshed = true;
                self.stage = Stage::Idle;
                self.again_after = false;
                self.out.push_back(FlowOutput::Authorized(Box::new(s)));
                return;
            }
            if s.tokens.refresh_token.is_none() {
                // Nothing to refresh with: authorize from the start (the store is unlocked).
                self.out
                    .push_back(FlowOutput::RefreshFailed(AuthError::Refresh {
                        kind: RefreshFailure::GrantGone,
                        reason: "the stored grant has no refresh token".into(),
                    }));
                self.stage = Stage::Idle;
                self.again_after = false;
                return self.start_discovery(None);
            }
        }
        if let Err(e) = self.send_refresh() {
            self.fail(e);
        }
    }

    fn send_refresh(&mut self) -> Result<(), AuthError> {
        let Some(g) = self.grant.clone() else {
            return Err(AuthError::Usage("there is no grant to refresh"));
        };
        let Some(refresh) = &g.tokens.refresh_token else {
            return Err(AuthError::Usage(
                "there is no refresh token to refresh with",
            ));
        };
        self.run.resource = Some(g.resource.clone());
        self.run.issuer = Some(g.issuer.clone());
        self.run.metadata = Some(g.server_metadata.clone());
        self.run.client = Some(g.client.clone());
        self.run.scope = g.requested_scope.clone();
        let mut form = url::form_urlencoded::Serializer::new(String::new());
        form.append_pair("grant_type", "refresh_token")
            .append_pair("refresh_token", refresh.expose())
            .append_pair("resource", &g.resource);
        self.stage = Stage::Refreshing;
        self.token_request(form);
        Ok(())
    }

    /// A token endpoint POST with the client's authentication.
    fn token_request(&mut self, mut form: url::form_urlencoded::Serializer<'_, String>) {
        let (Some(metadata), Some(client)) = (&self.run.metadata, &self.run.client) else {
            return self.fail(AuthError::Usage(
                "a token request before metadata and client",
            ));
        };
        let Some(endpoint) = metadata.token_endpoint.clone() else {
            return self.fail(AuthError::Usage("no token endpoint"));
        };
        let mut headers = Headers::new();
        let _ = headers.set("content-type", "application/x-www-form-urlencoded");
        let _ = headers.set("accept", "application/json");
        match (client.auth_method, &client.client_secret) {
            (TokenEndpointAuth::ClientSecretBasic, Some(secret)) => {
                // RFC 6749 §2.3.1: each part form-encoded, then Basic.
                let enc = |s: &str| {
                    url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>()
                };
                let pair = format!("{}:{}", enc(&client.client_id), enc(secret.expose()));
                let b64 = base64::engine::general_purpose::STANDARD.encode(pair);
                let _ = headers.set("authorization", format!("Basic {b64}"));
            }
            (TokenEndpointAuth::ClientSecretPost, Some(secret)) => {
                form.append_pair("client_id", &client.client_id)
                    .append_pair("client_secret", secret.expose());
            }
            (TokenEndpointAuth::PrivateKeyJwt, _) => {
                let key = match &self.config.client.client_credentials {
                    Some(ClientCredentials {
                        auth: ClientCredentialsAuth::PrivateKeyJwt(key),
                        ..
                    }) => key,
                    _ => return self.fail(AuthError::Usage("private_key_jwt without a key")),
                };
                let issuer = self.run.issuer.clone().unwrap_or_default();
                let now = self.wall.map(unix_seconds).unwrap_or(0);
                let jti = format!("{}-{}", self.next_fetch, {
                    let e = self.run.entropy.map(|e| e.state).unwrap_or_default();
                    e.iter().map(|b| format!("{b:02x}")).collect::<String>()
                });
                match key.assertion(&client.client_id, &issuer, now, &jti) {
                    Ok(assertion) => {
                        form.append_pair("client_id", &client.client_id)
                            .append_pair("client_assertion_type", JWT_BEARER_ASSERTION_TYPE)
                            .append_pair("client_assertion", assertion.expose());
                    }
                    Err(e) => return self.fail(AuthError::ClientAssertion(e)),
                }
            }
            _ => {
                form.append_pair("client_id", &client.client_id);
            }
        }
        let body = form.finish().into_bytes();
        self.fetch(FetchPurpose::Token, Method::Post, endpoint, headers, body);
    }

    fn on_token(&mut self, now: Instant, wall: SystemTime, url: &str, status: u16, body: &[u8]) {
        let refreshing = matches!(self.stage, Stage::Refreshing);
        if status != 200 {
            let error = OAuthErrorResponse::parse(body).ok();
            let code = error.as_ref().map(|e| e.error.as_str());
            let as_status = AuthError::Status {
                what: "the token endpoint",
                url: url.to_owned(),
                status,
                error: error.clone(),
            };
            // A client the server no longer knows is registered once more (not a
            // pre-registered one: that is the user's to fix).
            let dynamic = self
                .run
                .client
                .as_ref()
                .is_some_and(|c| c.kind == RegistrationKind::Dynamic);
            if code == Some("invalid_client") && dynamic && !self.run.reregistered {
                self.run.reregistered = true;
                self.run.client = None;
                if let Some(g) = &mut self.grant {
                    g.tokens.refresh_token = None;
                }
                return self.register();
            }
            if !refreshing {
                return self.fail(as_status);
            }
            let kind = match code {
                Some("invalid_grant") => RefreshFailure::GrantGone,
                Some("temporarily_unavailable") => RefreshFailure::TryLater,
                _ if status >= 500 || status == 429 => RefreshFailure::TryLater,
                _ => RefreshFailure::Refused,
            };
            let e = AuthError::Refresh {
                kind,
                reason: as_status.to_string(),
            };
            if kind == RefreshFailure::GrantGone {
                // The refresh token is spent: authorize from the start (the stored client and
                // metadata are kept for it).
                if let Some(g) = &mut self.grant {
                    g.tokens.refresh_token = None;
                }
                self.out.push_back(FlowOutput::RefreshFailed(e));
                self.stage = Stage::Idle;
                self.again_after = false;
                self.start_discovery(None);
                return;
            }
            return self.fail(e);
        }
        let t = match TokenResponse::parse(body) {
            Ok(t) => t,
            Err(error) => {
                let e = AuthError::Document {
                    url: url.to_owned(),
                    error,
                };
                return self.fail(if refreshing {
                    AuthError::Refresh {
                        kind: RefreshFailure::Refused,
                        reason: e.to_string(),
                    }
                } else {
                    e
                });
            }
        };
        let _ = now;
        let (Some(issuer), Some(metadata), Some(client), Some(resource)) = (
            self.run.issuer.clone(),
            self.run.metadata.clone(),
            self.run.client.clone(),
            self.run.resource.clone(),
        ) else {
            return self.fail(AuthError::Usage("tokens before metadata and client"));
        };
        // A refresh token the server did not rotate stays (RFC 6749 §6).
        let refresh_token = t.refresh_token.or_else(|| {
            refreshing
                .then(|| {
                    self.grant
                        .as_ref()
                        .and_then(|g| g.tokens.refresh_token.clone())
                })
                .flatten()
        });
        let grant = Grant {
            resource,
            issuer,
            server_metadata: metadata,
            client,
            tokens: Tokens {
                access_token: t.access_token,
                refresh_token,
                expires_at: t.expires_in.map(|s| unix_seconds(wall).saturating_add(s)),
                scope: t.scope.or_else(|| self.run.scope.clone()),
            },
            requested_scope: self.run.scope.clone(),
        };
        self.refreshed |= refreshing;
        self.grant = Some(grant.clone());
        self.stage = Stage::Idle;
        self.again_after = false;
        self.out.push_back(FlowOutput::Authorized(Box::new(grant)));
    }

    // -----------------------------------------------------------------------------------
    // Plumbing.

    /// The `resource` parameter: the metadata's (it names this server), else the server's
    /// canonical URI.
    fn resource(&self) -> Result<String, AuthError> {
        if let Some(r) = &self.run.resource {
            return Ok(r.clone());
        }
        canonical_resource(&self.config.server_url).map_err(|e| AuthError::UrlRefused {
            what: "the server URL",
            url: e.url,
            reason: e.reason,
        })
    }

    /// `url` against the policy, for `purpose`.
    fn check_url(
        &self,
        what: &'static str,
        url: &str,
        purpose: UrlPurpose,
    ) -> Result<CheckedUrl, AuthError> {
        self.config
            .policy
            .check_url(url, purpose)
            .map_err(|e| AuthError::UrlRefused {
                what,
                url: url.to_owned(),
                reason: e.to_string(),
            })
    }

    fn fetch_get(&mut self, purpose: FetchPurpose, url: String) {
        let mut headers = Headers::new();
        let _ = headers.set("accept", "application/json");
        self.fetch(purpose, Method::Get, url, headers, Vec::new());
    }

    fn fetch_json(&mut self, purpose: FetchPurpose, url: String, body: Vec<u8>) {
        let mut headers = Headers::new();
        let _ = headers.set("content-type", "application/json");
        let _ = headers.set("accept", "application/json");
        self.fetch(purpose, Method::Post, url, headers, body);
    }

    fn fetch(
        &mut self,
        purpose: FetchPurpose,
        method: Method,
        url: String,
        headers: Headers,
        body: Vec<u8>,
    ) {
        self.fetch_hop(purpose, method, url, headers, body, 0);
    }

    fn fetch_hop(
        &mut self,
        purpose: FetchPurpose,
        method: Method,
        url: String,
        headers: Headers,
        body: Vec<u8>,
        redirects: u8,
    ) {
        if let Err(e) = self.check_url(purpose_name(purpose), &url, purpose.url_purpose()) {
            return self.fail(e);
        }
        let id = FetchId(self.next_fetch);
        self.next_fetch += 1;
        self.inflight = Some(InFlight {
            id,
            purpose,
            url: url.clone(),
            redirects,
        });
        self.out.push_back(FlowOutput::Fetch {
            id,
            request: Request {
                method,
                url,
                headers,
                body,
            },
            purpose,
        });
    }

    /// A redirect: metadata fetches follow it (each hop checked, at most
    /// [`MAX_REDIRECTS`]); POSTs do not.
    fn redirected(&mut self, f: InFlight, location: &str) {
        let what = purpose_name(f.purpose);
        let follow = matches!(
            f.purpose,
            FetchPurpose::ResourceMetadata | FetchPurpose::ServerMetadata
        );
        if !follow || f.redirects >= MAX_REDIRECTS {
            return self.fail(AuthError::Transport {
                what,
                url: f.url,
                cause: format!("redirected to {location:?}, which is not followed"),
            });
        }
        let purpose = f.purpose.url_purpose();
        let checked = self.check_url(what, &f.url, purpose).and_then(|from| {
            self.config
                .policy
                .check_redirect(&from, location, purpose)
                .map_err(|e| AuthError::UrlRefused {
                    what,
                    url: location.to_owned(),
                    reason: e.to_string(),
                })
        });
        let next = match checked {
            Ok(u) => u.url().to_string(),
            Err(e) => return self.fail(e),
        };
        let mut headers = Headers::new();
        let _ = headers.set("accept", "application/json");
        self.fetch_hop(
            f.purpose,
            Method::Get,
            next,
            headers,
            Vec::new(),
            f.redirects + 1,
        );
    }

    fn fail(&mut self, error: AuthError) {
        let again = std::mem::take(&mut self.again_after);
        if error.blame() == super::error::Blame::User && !again {
            self.declined = Some(error.clone());
        }
        self.stage = Stage::Idle;
        self.inflight = None;
        self.out.push_back(FlowOutput::Failed(error));
    }
}

/// `scheme://host[:port]` of an http(s) URL, as the `url` crate writes it.
fn origin(u: &str) -> Option<String> {
    let u = url::Url::parse(u).ok()?;
    let host = u.host_str()?;
    Some(match u.port() {
        Some(p) => format!("{}://{host}:{p}", u.scheme()),
        None => format!("{}://{host}", u.scheme()),
    })
}

fn purpose_name(p: FetchPurpose) -> &'static str {
    match p {
        FetchPurpose::ResourceMetadata => "the protected resource metadata",
        FetchPurpose::ServerMetadata => "the authorization server metadata",
        FetchPurpose::Registration => "client registration",
        FetchPurpose::Token => "the token endpoint",
    }
}

/// The token endpoint authentication for a client with (or without) a secret, from what the
/// server lists: `client_secret_basic` first (RFC 6749 §2.3.1 requires servers to support
/// it), then `client_secret_post`; `none` without a secret.
fn choose_auth_method(
    metadata: &AuthorizationServerMetadata,
    has_secret: bool,
) -> TokenEndpointAuth {
    if !has_secret {
        return TokenEndpointAuth::None;
    }
    if metadata.supports_auth_method("client_secret_basic") {
        TokenEndpointAuth::ClientSecretBasic
    } else if metadata.supports_auth_method("client_secret_post") {
        TokenEndpointAuth::ClientSecretPost
    } else {
        TokenEndpointAuth::ClientSecretBasic
    }
}

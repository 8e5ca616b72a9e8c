//! Authorization on an HTTP client ([`AuthConfig`]): the client owns an [`auth::Flow`]. A
//! request the server refuses for want of authorization (`401`, or `403` with
//! `insufficient_scope`) is parked, not failed; the flow runs (its fetches go out as
//! [`Output::Http`] on streams of their own, to the URLs the flow chose, without the host's
//! extra headers: they are for the MCP server's origin only); the browser step is an
//! [`Event::AuthorizationUrl`], answered with [`Client::handle_authorization_redirect`]; once
//! authorized ([`Event::Authorized`], with the [`Grant`] to store) every parked request is
//! sent again with the new `Authorization: Bearer` header, or fails with the flow's error.
//!
//! The access token is sent only with requests to the configured MCP URL (the resource it was
//! issued for), never with the flow's own fetches, and a host `Authorization` header is
//! replaced by it.
//!
//! The flow's randomness (PKCE verifier, `state`) is drawn from [`AuthConfig::seed`] with
//! SHA-256 (a counter per draw): the driver fills the seed from a CSPRNG.

use sha2::Digest as _;

use super::streams::{Owner, StreamId};
use super::{Client, Event, Output, UsageError};
use crate::auth::{
    self, AuthError, BearerChallenge, Entropy, FetchId, Flow, FlowConfig, FlowOutput, Grant,
    RedirectRejected,
};
use crate::http::{Headers, ResponseHead};
use crate::mcp::request::RequestHandle;
use crate::net_policy::{FetchGuard, UrlRejected};
use crate::time::{Instant, SystemTime};

/// Authorization for an HTTP client (`ClientConfig::authorization`).
#[derive(Clone, PartialEq)]
pub struct AuthConfig {
    /// The flow's configuration (its `server_url` should be the client's URL).
    pub flow: FlowConfig,
    /// The grant the token store kept for this server, if any.
    pub grant: Option<Grant>,
    /// Secret random bytes from a CSPRNG: the PKCE verifiers and `state` values are drawn
    /// from it.
    pub seed: [u8; 32],
    /// The wall time at some instant (the driver's clocks when it made the client): with it
    /// (and the wall times response heads bring) the client tells a token about to expire,
    /// and refreshes it before an operation rather than after a `401`. `None`: only on a
    /// `401`.
    pub clock: Option<(Instant, SystemTime)>,
}

impl std::fmt::Debug for AuthConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthConfig")
            .field("flow", &self.flow)
            .field("grant", &self.grant)
            .finish_non_exhaustive()
    }
}

/// The client's authorization state.
pub(super) struct AuthState {
    pub(super) flow: Flow,
    seed: [u8; 32],
    draws: u64,
    /// The latest known (instant, wall time) pair.
    clock: Option<(Instant, SystemTime)>,
}

impl AuthState {
    pub(super) fn new(config: AuthConfig) -> Self {
        AuthState {
            flow: Flow::new(config.flow, config.grant),
            seed: config.seed,
            draws: 0,
            clock: config.clock,
        }
    }

    /// The next PKCE verifier and `state` material.
    fn entropy(&mut self) -> Entropy {
        self.draws += 1;
        let draw = |label: &[u8], n: u64| {
            let mut h = sha2::Sha256::new();
            h.update(self.seed);
            h.update(label);
            h.update(n.to_be_bytes());
            let out: [u8; 32] = h.finalize().into();
            out
        };
        let verifier = draw(b"mcpwire auth verifier", self.draws);
        let s = draw(b"mcpwire auth state", self.draws);
        let mut state = [0u8; 16];
        state.copy_from_slice(&s[..16]);
        Entropy { verifier, state }
    }
}

/// The cache's authorization context for a grant: results a server marked `private` are
/// reused only under the same access token (client guide, "Caching and refresh"). A digest,
/// never the token.
pub(super) fn token_context(grant: &Grant) -> crate::mcp::cache::AuthContext {
    let digest: [u8; 32] =
        sha2::Sha256::digest(grant.tokens.access_token.expose().as_bytes()).into();
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    crate::mcp::cache::AuthContext::new(format!("oauth:{hex}"))
}

impl AuthState {
    /// The wall time at `now`, from the latest known pair.
    fn wall_at(&self, now: Instant) -> Option<SystemTime> {
        let (at, wall) = self.clock?;
        Some(match now.checked_duration_since(at) {
            Some(d) => wall + d,
            None => wall,
        })
    }
}

impl Client {
    /// A response head brought the wall time `wall` at `now`.
    pub(super) fn auth_clock(&mut self, now: Instant, wall: SystemTime) {
        if let Some(a) = self.auth.as_mut() {
            a.clock = Some((now, wall));
        }
    }

    /// Before an operation: a token that expires within [`auth::REFRESH_AHEAD`] is refreshed
    /// first (the operation's requests wait for it if the server refuses the old one).
    pub(super) fn auth_refresh_ahead(&mut self, now: Instant) {
        let Some(a) = self.auth.as_mut() else {
            return;
        };
        let Some(wall) = a.wall_at(now) else {
            return;
        };
        let due = a
            .flow
            .grant()
            .is_some_and(|g| g.tokens.refresh_token.is_some() && g.tokens.expires_soon(wall));
        if due && !a.flow.is_busy() {
            let entropy = a.entropy();
            // A refresh that cannot start leaves it to the 401. The old token is still
            // valid meanwhile (the window is before its expiry).
            if a.flow.refresh(now, wall, entropy).is_ok() {
                self.pump_auth(now);
            }
        }
    }

    /// The `Authorization` value for requests to the MCP server, when authorized.
    pub(super) fn bearer_header(&self) -> Option<String> {
        let grant = self.auth.as_ref()?.flow.grant()?;
        Some(format!("Bearer {}", grant.tokens.access_token.expose()))
    }

    /// A request's response ended with an error status: `true` when authorization takes it
    /// (the request is parked and the flow runs), `false` for the usual error handling.
    pub(super) fn auth_takes(
        &mut self,
        now: Instant,
        req: RequestHandle,
        head: Option<&ResponseHead>,
        wall: SystemTime,
        status: u16,
        sent_authorization: Option<&str>,
    ) -> bool {
        if self.auth.is_none() || !matches!(status, 401 | 403) {
            return false;
        }
        // Refused with a token older than the one held now (a refresh finished meanwhile):
        // sent again with the current one, no new authorization.
        let current = self.bearer_header();
        if status == 401 && current.is_some() && current.as_deref() != sent_authorization {
            if !self.park(req, status) {
                return false;
            }
            self.requests.resume_parked(now, &mut self.ids);
            return true;
        }
        let challenge = head.and_then(|h| {
            BearerChallenge::from_headers(h.headers.get_all(auth::WWW_AUTHENTICATE))
                .ok()
                .flatten()
        });
        if status == 403
            && !challenge
                .as_ref()
                .is_some_and(BearerChallenge::is_insufficient_scope)
        {
            return false;
        }
        if !self.park(req, status) {
            return false;
        }
        let Some(state) = self.auth.as_mut() else {
            return false;
        };
        if state.flow.is_busy() {
            // An authorization is under way: this request waits for it too.
            return true;
        }
        let entropy = state.entropy();
        let started = if status == 401 {
            state
                .flow
                .handle_unauthorized(now, wall, challenge.as_ref(), entropy)
                .map(|()| true)
        } else {
            state
                .flow
                .handle_forbidden(now, wall, challenge.as_ref(), entropy)
        };
        match started {
            Ok(true) => {}
            Ok(false) => {
                // Not insufficient scope after all: nothing to authorize.
                let e = AuthError::Usage("the server refused the request (403)");
                self.requests.fail_parked(&e);
            }
            Err(e) => {
                self.requests.fail_parked(&e);
                self.event(Event::AuthorizationFailed { error: e });
            }
        }
        true
    }

    /// Parks `req`'s request until authorization ends; `false` when it is not in flight.
    fn park(&mut self, req: RequestHandle, status: u16) -> bool {
        if self
            .requests
            .handle_stream_unauthorized(req, status)
            .is_err()
        {
            return false;
        }
        self.streams.by_req.remove(&req);
        true
    }

    /// A request's response head arrived with a 2xx status: the flow's attempt count starts
    /// again.
    pub(super) fn auth_request_succeeded(&mut self) {
        if let Some(a) = self.auth.as_mut() {
            a.flow.request_succeeded();
        }
    }

    /// The flow's fetch on `stream` ended with `status`, `headers` and `body` (`wall` from
    /// its head).
    pub(super) fn auth_fetch_done(
        &mut self,
        now: Instant,
        fetch: FetchId,
        wall: SystemTime,
        status: u16,
        headers: &Headers,
        body: &[u8],
    ) {
        if let Some(a) = self.auth.as_mut() {
            a.flow
                .handle_response(now, wall, fetch, status, headers, body);
        }
    }

    /// The flow's fetch failed without an answer.
    pub(super) fn auth_fetch_failed(&mut self, now: Instant, fetch: FetchId, cause: &str) {
        if let Some(a) = self.auth.as_mut() {
            a.flow.handle_fetch_failed(now, fetch, cause);
        }
    }

    /// Drains the flow's outputs; `true` when there were any.
    pub(super) fn pump_auth(&mut self, now: Instant) -> bool {
        let mut progressed = false;
        loop {
            let Some(out) = self.auth.as_mut().and_then(|a| a.flow.poll_output()) else {
                return progressed;
            };
            progressed = true;
            match out {
                FlowOutput::Fetch {
                    id,
                    request,
                    purpose,
                } => {
                    let owner = Owner::Auth(id, purpose);
                    let stream = self.streams.open(owner, request.headers.clone());
                    self.outputs.push_back(Output::Http { stream, request });
                }
                FlowOutput::OpenAuthorizationUrl { url } => {
                    self.event(Event::AuthorizationUrl { url });
                }
                FlowOutput::LockStore { issuer, resource } => {
                    self.event(Event::AuthorizationStoreLock { issuer, resource });
                }
                FlowOutput::Authorized(grant) => {
                    self.config.auth_context = token_context(&grant);
                    self.event(Event::Authorized { grant });
                    self.requests.resume_parked(now, &mut self.ids);
                }
                FlowOutput::RefreshFailed(error) => {
                    self.event(Event::AuthorizationProgress { error });
                }
                FlowOutput::Failed(error) => {
                    self.requests.fail_parked(&error);
                    self.event(Event::AuthorizationFailed { error });
                }
            }
        }
    }

    /// Whether `stream` is one of the authorization flow's fetches, and if so the rules its
    /// destination is held to: [`FlowConfig::policy`] and the [`UrlPurpose`] of the fetch
    /// ([`auth::FetchPurpose::url_purpose`]). `None` for every other stream (the requests to
    /// the configured MCP URL, which the user chose, are not subject to the policy), and for a
    /// stream that has ended.
    ///
    /// The driver asks when it performs the [`Output::Http`] of `stream`, before it feeds any
    /// input for it. For a guarded stream it must check the request's URL with
    /// [`FetchGuard::check_url`] and send the request to the checked form, resolve a host
    /// name once, keep the addresses [`FetchGuard::connect_addrs`] lets through and connect
    /// only to one of those (never to the name again: the DNS rebinding defence), keep such
    /// a connection out of any pool it shares with unguarded requests, and follow no
    /// redirect (the flow does, hop by hop). When the policy refuses the URL or every
    /// address, it answers with [`Client::handle_fetch_refused`] and connects to nothing.
    ///
    /// [`FlowConfig::policy`]: crate::auth::FlowConfig::policy
    /// [`UrlPurpose`]: crate::net_policy::UrlPurpose
    pub fn fetch_guard(&self, stream: StreamId) -> Option<FetchGuard> {
        let Owner::Auth(_, purpose) = self.streams.map.get(&stream)?.owner else {
            return None;
        };
        let policy = self.auth.as_ref()?.flow.config().policy;
        Some(FetchGuard {
            policy,
            purpose: purpose.url_purpose(),
        })
    }

    /// HTTP: `stream` was not sent because the [`NetPolicy`](crate::net_policy::NetPolicy)
    /// of its [`fetch_guard`](Client::fetch_guard) refused its URL or every address its host
    /// resolved to. The authorization fails with an [`AuthError::UrlRefused`] that carries
    /// `rejected`'s message (the address and its range), and so do the requests waiting for
    /// it. On a stream without a guard it is [`Client::handle_transport_failed`].
    pub fn handle_fetch_refused(
        &mut self,
        now: Instant,
        stream: StreamId,
        rejected: &UrlRejected,
    ) -> Result<(), UsageError> {
        if !self.live_stream("handle_fetch_refused", stream)? {
            return Ok(());
        }
        let fetch = match self.streams.map.get(&stream).map(|s| s.owner) {
            Some(Owner::Auth(fetch, _)) => fetch,
            _ => return self.handle_transport_failed(now, stream),
        };
        self.streams.map.remove(&stream);
        if let Some(a) = self.auth.as_mut() {
            a.flow.handle_fetch_refused(now, fetch, rejected);
        }
        self.pump(now);
        Ok(())
    }

    /// The browser came back to the redirect URI with `query` (everything after `?`; see
    /// [`auth::Flow::handle_redirect`]). A wrong `state` is ignored and the client keeps
    /// waiting.
    pub fn handle_authorization_redirect(
        &mut self,
        now: Instant,
        wall: SystemTime,
        query: &str,
    ) -> Result<(), RedirectRejected> {
        let Some(a) = self.auth.as_mut() else {
            return Err(RedirectRejected::NotWaiting);
        };
        let r = a.flow.handle_redirect(now, wall, query);
        self.pump(now);
        r
    }

    /// The token store is locked for a refresh ([`Event::AuthorizationStoreLock`]) and holds
    /// `stored` for the grant (see [`auth::Flow::handle_store_locked`]).
    pub fn handle_store_locked(&mut self, now: Instant, wall: SystemTime, stored: Option<Grant>) {
        if let Some(a) = self.auth.as_mut() {
            a.flow.handle_store_locked(now, wall, stored);
        }
        self.pump(now);
    }

    /// The browser step could not be done (`cause` for a person): the authorization fails
    /// and the requests waiting for it fail with it.
    pub fn handle_authorization_failed(&mut self, now: Instant, cause: &str) {
        if let Some(a) = self.auth.as_mut() {
            a.flow.handle_user_agent_failed(now, cause);
        }
        self.pump(now);
    }

    /// After the user declined (or did not finish) an authorization, requests the server
    /// refuses fail at once with that error; this lets the next one start a new authorization
    /// (a host's "log in again").
    pub fn allow_authorization_again(&mut self) {
        if let Some(a) = self.auth.as_mut() {
            a.flow.allow_again();
        }
    }

    /// The current grant (what the token store should hold), when authorized.
    pub fn grant(&self) -> Option<&Grant> {
        self.auth.as_ref()?.flow.grant()
    }

    /// The authorization flow's next deadline (the browser step's).
    pub(super) fn auth_timeout(&self) -> Option<Instant> {
        self.auth.as_ref()?.flow.poll_timeout()
    }

    /// Time passed for the authorization flow.
    pub(super) fn auth_handle_timeout(&mut self, now: Instant) {
        if let Some(a) = self.auth.as_mut() {
            a.flow.handle_timeout(now);
        }
    }
}

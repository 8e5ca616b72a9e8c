//! A host of many MCP servers at once, on a driver: [`blocking::Host`](blocking) (plain methods,
//! feature `blocking`) or `smol::Host` (feature `smol`: the same methods, the waiting ones as
//! `async fn`s; `cargo doc --features smol` documents it).
//!
//! In the MCP spec's words, the *host* is the application that coordinates several *clients*,
//! one per server. This module's `Host` is that: it holds one [`McpClient`](crate::mcp) per
//! server, keyed by the [`ServerId`] the host chose (a config file's key, never the server's
//! self-reported `serverInfo.name`). Not to be confused with [`mcp::Host`](crate::mcp::Host),
//! the trait of one client's hooks (elicitation answers, progress, notifications): here those
//! hooks are [`Hooks`], told which server they are about.
//!
//! What a `Host` does:
//!
//! - **connects many servers at once** ([`connect_all`](blocking::Host::connect_all)): each on
//!   its own thread (blocking) or task (smol), each within its own connect timeout
//!   ([`HostOptions::connect_timeout`]: started, `server/discover` answered, tools listed), so
//!   one slow or dead server never holds up the others; a failure is reported per server
//!   ([`HostError::Connect`] names it, with a typed [`FailureKind`]);
//! - **connects and disconnects while running** ([`add`](blocking::Host::add),
//!   [`connect`](blocking::Host::connect), [`disconnect`](blocking::Host::disconnect),
//!   [`remove`](blocking::Host::remove));
//! - **lists each server's tools** ([`tools`](blocking::Host::tools), every page) through that
//!   server's client, whose cache honours `ttlMs` and drops the list on `list_changed`;
//! - **calls a tool on a server** by (server id, tool name) ([`call_tool`](blocking::Host::call_tool)),
//!   with the full typed [`CallToolResult`](crate::mcp::CallToolResult): two servers that both
//!   define a tool of one name are never confused;
//! - **reports what changed** ([`poll_event`](blocking::Host::poll_event),
//!   [`wait_event`](blocking::Host::wait_event)): a server's state, and
//!   [`RegistryEvent::ToolsChanged`] when a server announces `notifications/tools/list_changed`
//!   (on its stdio or legacy stream, or, for a modern server that announces it, over a
//!   `subscriptions/listen` the host opens), so that a catalog can list that server again;
//! - **keeps each server's credentials apart**: OAuth per HTTP server
//!   ([`HostOptions::authorization`], refined by the spec's `oauth` block), grants kept in a
//!   token store partition of that server's own ([`ServerTokens`]), never loaded for another.
//!
//! The state of every server (spec, trust, connection state, era, `server/discover` summary,
//! tool count, credentials) is the core's [`Registry`]: the driver feeds it what the clients
//! saw and it decides (a deadline passed, an answer came too late). [`servers`](blocking::Host::servers)
//! gives a snapshot, in id order.
//!
//! ```no_run
//! # #[cfg(feature = "blocking")] {
//! use std::collections::BTreeMap;
//! use mcpwire::host::{blocking::Host, HostOptions, ServerId, ServerSpec, TransportSpec, Trust};
//!
//! let spec = |id: &str, url: &str| ServerSpec {
//!     id: ServerId::new(id).unwrap(),
//!     transport: TransportSpec::Http { url: url.into(), headers: BTreeMap::new() },
//!     oauth: None,
//!     trust: Trust::Untrusted,
//!     disabled: false,
//! };
//! let host = Host::new(HostOptions::default());
//! for (id, outcome) in host.connect_all([
//!     spec("docs", "http://127.0.0.1:8931/mcp"),
//!     spec("tickets", "http://127.0.0.1:8932/mcp"),
//! ]) {
//!     match outcome {
//!         Ok(()) => println!("{id}: {} tools", host.tools(&id)?.len()),
//!         Err(e) => println!("{e}"), // names the server and why
//!     }
//! }
//! let docs = ServerId::new("docs").unwrap();
//! let answer = host.call_tool(&docs, "echo", serde_json::json!({"text": "hi"}))?;
//! println!("{}", answer.text());
//! # }
//! # Ok::<(), mcpwire::host::HostError>(())
//! ```

// Without a driver feature only the shared types build.
#![cfg_attr(not(any(feature = "blocking", feature = "smol")), allow(dead_code))]

#[cfg(feature = "blocking")]
#[cfg_attr(docsrs, doc(cfg(feature = "blocking")))]
pub mod blocking;
#[cfg(any(feature = "blocking", feature = "smol"))]
mod shared;
#[cfg(feature = "smol")]
#[cfg_attr(docsrs, doc(cfg(feature = "smol")))]
pub mod smol;
mod tokens;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use mcpwire_core::mcp::{ElicitAnswer, Event, InputAnswer, InputRequestEvent, OpId};

use crate::mcp::{ClientOptions, UserAgent, UserAgentError};

pub use mcpwire_core::backoff::Backoff;
pub use mcpwire_core::host::registry::{
    Attempt, ConnectFailure, ConnectionState, Credentials, FailureKind, GrantIdentity,
    ReconnectPolicy, ReconnectState, Registry, RegistryEvent, Server, ServerSummary, Stage,
    StateKind, ToolsState,
};
pub use mcpwire_core::host::{OAuthSpec, ServerId, ServerSpec, TransportSpec, Trust};
pub use tokens::{FileTokens, MemoryTokens, ServerTokens};

/// How a [`Host`](blocking::Host) connects its servers. [`HostOptions::default`] is a sensible
/// start.
#[derive(Clone)]
pub struct HostOptions {
    /// What every server's client starts from (client info, request timeout, capabilities,
    /// cache, ...). Per server the host adds the spec's HTTP headers, its own authorization
    /// (this template's [`ClientOptions::authorization`] is not used) and the era the server's
    /// last connection learned.
    pub client: ClientOptions,
    /// How long a server may take to become ready (its process started or its URL checked,
    /// `server/discover` answered, its tools listed) before it counts as failed
    /// ([`FailureKind::TimedOut`]). Default 30 s.
    pub connect_timeout: Duration,
    /// OAuth for HTTP servers that ask for it (a `401`). `None` (the default): such a server
    /// fails to connect ([`FailureKind::Authorization`]).
    pub authorization: Option<HostAuthorization>,
    /// Open a `subscriptions/listen` for `notifications/tools/list_changed` on each modern
    /// server that announces the capability (default `true`). Legacy servers send the
    /// notification on their own stream, which is always read.
    pub watch_tool_changes: bool,
    /// The host's hooks, for every server (default: input requests declined, the rest
    /// ignored).
    pub hooks: Option<Arc<dyn Hooks>>,
    /// Reconnect a failed server by itself, with backoff ([`ReconnectPolicy`]: which failures
    /// retry, how long between attempts). `None` (the default): a failed server stays failed
    /// until [`connect`](blocking::Host::connect) is called again.
    pub reconnect: Option<ReconnectPolicy>,
}

impl Default for HostOptions {
    fn default() -> Self {
        HostOptions {
            client: ClientOptions::default(),
            connect_timeout: Duration::from_secs(30),
            authorization: None,
            watch_tool_changes: true,
            hooks: None,
            reconnect: None,
        }
    }
}

impl fmt::Debug for HostOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostOptions")
            .field("client", &self.client)
            .field("connect_timeout", &self.connect_timeout)
            .field("authorization", &self.authorization)
            .field("watch_tool_changes", &self.watch_tool_changes)
            .field("hooks", &self.hooks.is_some())
            .field("reconnect", &self.reconnect)
            .finish()
    }
}

impl HostOptions {
    /// Reconnects failed servers by themselves, as `policy` says.
    pub fn with_reconnect(mut self, policy: ReconnectPolicy) -> Self {
        self.reconnect = Some(policy);
        self
    }

    /// Sets the connect timeout of every server.
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Authorizes HTTP servers with OAuth when they ask.
    pub fn with_authorization(mut self, authorization: HostAuthorization) -> Self {
        self.authorization = Some(authorization);
        self
    }

    /// Sets the host's hooks.
    pub fn with_hooks(mut self, hooks: Arc<dyn Hooks>) -> Self {
        self.hooks = Some(hooks);
        self
    }

    /// Sets the template of every server's client options.
    pub fn with_client(mut self, client: ClientOptions) -> Self {
        self.client = client;
        self
    }
}

/// The browser step of the host's servers, told which server signs in (a gateway shows the
/// sign-in link to whoever asked that server something). Every [`UserAgent`] is one, the same
/// for every server.
pub trait HostUserAgent: Send + Sync {
    /// Server `server` needs the person to authorize at `url`; the answer is the query the
    /// authorization server sent to `redirect_uri` (as [`UserAgent::authorize`]).
    fn authorize_server(
        &self,
        server: &ServerId,
        url: &str,
        redirect_uri: &str,
    ) -> Result<String, UserAgentError>;
}

impl<T: UserAgent + ?Sized> HostUserAgent for T {
    fn authorize_server(
        &self,
        _server: &ServerId,
        url: &str,
        redirect_uri: &str,
    ) -> Result<String, UserAgentError> {
        self.authorize(url, redirect_uri)
    }
}

/// OAuth for the host's HTTP servers: one browser step for all, a token store partition per
/// server. A server whose spec sets an `Authorization` header is not authorized this way; the
/// spec's `oauth` block gives the pre-registered client id, the callback port and the scopes.
#[derive(Clone)]
pub struct HostAuthorization {
    /// The browser step.
    pub user_agent: Arc<dyn HostUserAgent>,
    /// Where each server's grants are kept, apart from every other server's.
    pub tokens: Arc<dyn ServerTokens>,
    /// `client_name` for dynamic registration.
    pub client_name: String,
    /// Development mode: `http` to loopback addresses is allowed for the servers' URLs.
    pub allow_http_loopback: bool,
    /// How long the browser step may take.
    pub timeout: Duration,
}

impl HostAuthorization {
    /// OAuth with `user_agent`, grants in `tokens`; `client_name` `mcpwire`, https only, five
    /// minutes for the browser step.
    pub fn new(user_agent: Arc<dyn HostUserAgent>, tokens: Arc<dyn ServerTokens>) -> Self {
        HostAuthorization {
            user_agent,
            tokens,
            client_name: "mcpwire".into(),
            allow_http_loopback: false,
            timeout: Duration::from_secs(300),
        }
    }
}

impl fmt::Debug for HostAuthorization {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostAuthorization")
            .field("client_name", &self.client_name)
            .field("allow_http_loopback", &self.allow_http_loopback)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// The host's side of every server's conversation ([`mcp::Host`](crate::mcp::Host) of one
/// client, told which server). Hooks run on the client's thread or task while its calls run,
/// one at a time per server, possibly at once for two servers. Every method has a default:
/// input requests are declined, everything else is ignored.
pub trait Hooks: Send + Sync {
    /// `server` needs input to continue `op` (an elicitation); see
    /// [`mcp::Host::on_input_request`](crate::mcp::Host::on_input_request).
    fn on_input_request(
        &self,
        server: &ServerId,
        op: OpId,
        request: &InputRequestEvent,
    ) -> InputAnswer {
        let _ = (server, op, request);
        InputAnswer::Elicitation(ElicitAnswer::Decline)
    }

    /// A progress notification of `server` for `op`.
    fn on_progress(
        &self,
        server: &ServerId,
        op: OpId,
        progress: f64,
        total: Option<f64>,
        message: Option<&str>,
    ) {
        let _ = (server, op, progress, total, message);
    }

    /// A notification from `server`.
    fn on_notification(&self, server: &ServerId, op: Option<OpId>, method: &str, message: &str) {
        let _ = (server, op, method, message);
    }

    /// Every event of `server`'s client core (for logs).
    fn on_event(&self, server: &ServerId, event: &Event) {
        let _ = (server, event);
    }
}

/// Why a host operation failed. Every variant about a server names it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HostError {
    /// The host has no server of this id.
    #[error("no server {0:?} in this host")]
    UnknownServer(ServerId),
    /// A server of this id is in the host already.
    #[error("a server {0:?} is in this host already")]
    Duplicate(ServerId),
    /// The server's config entry is disabled.
    #[error("server {0:?} is disabled in its config")]
    Disabled(ServerId),
    /// The server is not connected (disconnected, connecting, or failed: then `failure` says
    /// why).
    #[error("server {server:?} is {state}, not ready{}", failure.as_ref().map(|f| format!(": {f}")).unwrap_or_default())]
    NotReady {
        /// The server.
        server: ServerId,
        /// Its state.
        state: StateKind,
        /// Why it failed, when it did.
        failure: Option<ConnectFailure>,
    },
    /// The server could not be connected (or its connection was lost).
    #[error("server {server:?}: {failure}")]
    Connect {
        /// The server.
        server: ServerId,
        /// The step, the kind of failure, and the details.
        failure: ConnectFailure,
        /// The client's error, when one caused it (not for a timeout).
        #[source]
        source: Option<Arc<crate::mcp::Error>>,
    },
    /// A request to a ready server failed (`what`: `tools/list`, `tools/call NAME`, ...).
    #[error("server {server:?}: {what}: {source}")]
    Request {
        /// The server.
        server: ServerId,
        /// The request.
        what: String,
        /// The client's error.
        #[source]
        source: Box<crate::mcp::Error>,
    },
    /// The host was closed.
    #[error("the host is closed")]
    Closed,
}

impl HostError {
    /// The server the error is about, if any.
    pub fn server(&self) -> Option<&ServerId> {
        match self {
            HostError::UnknownServer(s) | HostError::Duplicate(s) | HostError::Disabled(s) => {
                Some(s)
            }
            HostError::NotReady { server, .. }
            | HostError::Connect { server, .. }
            | HostError::Request { server, .. } => Some(server),
            HostError::Closed => None,
        }
    }

    /// The client's error behind it, if any (its [`blame`](crate::mcp::Error::blame),
    /// [`server_error`](crate::mcp::Error::server_error), ...).
    pub fn client_error(&self) -> Option<&crate::mcp::Error> {
        match self {
            HostError::Connect { source, .. } => source.as_deref(),
            HostError::Request { source, .. } => Some(source.as_ref()),
            _ => None,
        }
    }
}

/// What `connect_all` reports for each server, in id order.
pub type ConnectReport = Vec<(ServerId, Result<(), HostError>)>;

//! The MCP server core: one sans-IO [`Server`] that serves both eras on one endpoint, over
//! newline-delimited stdio or Streamable HTTP, in the step-function shape of the client
//! (`ARCHITECTURE.md`).
//!
//! **Eras, per message** (`basic/versioning.mdx`, backward compatibility): a request whose
//! `params._meta["io.modelcontextprotocol/protocolVersion"]` is present is served as
//! `2026-07-28` (self-contained: `_meta` validated, the `Mcp-*` HTTP headers checked against
//! the body, `server/discover`, `subscriptions/listen`, MRTR `input_required` with a sealed
//! `requestState`); `initialize` opens a `2025-11-25` session (HTTP: `Mcp-Session-Id`, with
//! an id derived from [`ServerSecrets::session_seed`]; stdio: the connection), and requests
//! without modern `_meta` are served in it (`ping`, `logging/setLevel`, the GET stream,
//! server-to-client requests, `DELETE`). [`ServerConfig::eras`] turns either off.
//!
//! **Driving it.** A driver feeds bytes and requests with the current instant, drains
//! [`Server::poll_output`] and sleeps until [`Server::poll_timeout`]:
//!
//! ```
//! use mcpwire_core::mcp::server::{Application, Output, Server, ServerConfig, ServerSecrets};
//! use mcpwire_core::mcp::{Implementation, Tool};
//! use mcpwire_core::mcp::server::{CallContext, Reply, RequestContext};
//! use mcpwire_core::jsonrpc::ErrorObject;
//! use mcpwire_core::time::Instant;
//!
//! struct Echo;
//! impl Application for Echo {
//!     fn list_tools(&mut self, _: &RequestContext) -> Result<Vec<Tool>, ErrorObject> {
//!         let mut tool = Tool::default();
//!         tool.name = "echo".into();
//!         tool.input_schema.insert("type".into(), "object".into());
//!         Ok(vec![tool])
//!     }
//!     fn call_tool(&mut self, _: &mut CallContext, _: &str, args: &serde_json::Map<String, serde_json::Value>) -> Reply {
//!         Reply::tool_text(args.get("text").and_then(|t| t.as_str()).unwrap_or(""))
//!     }
//! }
//!
//! let secrets = ServerSecrets::from_entropy([7; 64]); // a driver draws these
//! let mut server = Server::new(ServerConfig::new(Implementation::new("echo", "1.0"), secrets))?;
//! let now = Instant::now();
//! server.handle_stdio_bytes(now, br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}
//! "#);
//! server.serve_with(&mut Echo, now);
//! let Some(Output::Stdio(line)) = server.poll_output() else { panic!("no answer") };
//! assert!(String::from_utf8(line)?.contains(r#""text":"hi""#));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! **Streamable HTTP, as answered.** Every request: a path other than [`ServerConfig::http_path`]
//! is `404`; a `Host` or `Origin` outside [`OriginPolicy`] `403` (DNS rebinding; loopback by
//! default); after [`Server::shutdown`] `503`; a method other than GET/POST/DELETE `405`. A POST:
//! a body over [`Limits::max_body_bytes`] `413`, a `Content-Type` that is not JSON `415`, an
//! `Accept` with neither JSON nor SSE `406`, bytes that are not one JSON-RPC message `400`
//! (`-32700`/`-32600`, batches included); a notification or a client's response `202`. A
//! `2026-07-28` request is checked in this order, each a `400` unless noted: `_meta` version
//! (`-32602`), `MCP-Protocol-Version` present and equal (`-32020`), the version supported
//! (`-32022` with `data.supported` and `data.requested`), `clientCapabilities` (`-32602`),
//! `Mcp-Method`/`Mcp-Name` (`-32020`), a removed, unknown or unadvertised method (`404`,
//! `-32601`), then for `tools/call` the `Mcp-Param-*` headers (`-32020`). A legacy request needs
//! its session (`400` without `Mcp-Session-Id`, `404` for an unknown or ended one, `400` for an
//! unknown `MCP-Protocol-Version`); its JSON-RPC errors are `200`. An answer is JSON unless
//! something precedes the result (progress, a log message, a server-to-client request, a
//! stream close): then `text/event-stream`, with a priming event and event ids in a legacy
//! session (SEP-1699), resumed by GET with `Last-Event-ID`. GET opens a legacy session's
//! stream (one at a time: `409`; `405` without a session on a server that speaks
//! `2026-07-28`); DELETE ends the session (`204`). Too many requests in flight: `429` per
//! session, `503` for the server, `-32000` either way, on stdio the same error as a line.
//!
//! **The application** either implements [`Application`] and lets [`Server::serve_with`]
//! drain the events through it, or takes the events itself ([`Server::poll_event`]) and answers
//! with [`Server::respond`] when it can (a gateway answers `tools/call` after its upstream
//! did). A [`Reply::Pending`] from the trait means the same.
//!
//! **Listens** (`subscriptions/listen`) are the core's streams, with one question for the
//! application: a listen that asks for resource URIs (`resourceSubscriptions`, on a server
//! that serves resources) arrives as [`Call::Listen`], and [`Application::accept_resource_subscriptions`]
//! (or a [`Server::respond`] with [`Reply::resource_subscriptions`]) says which URIs it
//! honours. The acknowledgment, the first message of the stream as the spec requires, waits
//! for that answer and lists only the accepted URIs; [`Server::resource_updated`] then reaches
//! the stream for those only. An error answer is the listen's JSON-RPC error. A listen without
//! URIs is acknowledged at once.
//!
//! The files: `engine/` (the state machine: its state, streams, transports, messages and the
//! application's side), `config.rs` (configuration, limits), `application.rs` (the trait, replies,
//! contexts), `dispatch.rs` (method routing, capability checks), `modern.rs` (`_meta`, header
//! checks, `server/discover`, `subscriptions/listen`), `legacy.rs` (`initialize`, sessions,
//! server-to-client requests), `request_state.rs` (sealing `requestState`), `http.rs`
//! (Streamable HTTP exchanges), `stdio.rs` (line framing), `pagination.rs` (cursors),
//! `sse.rs` (event encoding and replay).

mod application;
mod config;
mod dispatch;
mod engine;
mod http;
mod legacy;
mod modern;
mod pagination;
pub mod request_state;
mod sse;
mod stdio;

use std::fmt;

use crate::http::Headers;
use crate::jsonrpc::ErrorObject;
use crate::mcp::cache::ListKind;
use crate::mcp::meta::{JsonObject, LoggingLevel};
use crate::mcp::results::Tool;
use crate::time::Instant;

pub use application::{
    Application, CallContext, CompleteRequest, Completion, CompletionReference, InputRequest,
    Notice, Reply, RequestContext, TransportKind,
};
pub use config::{
    CacheHint, CacheHints, Eras, Limits, OriginPolicy, PageSizes, ServerConfig, ServerSecrets,
    Timeouts, WallClock,
};
pub use dispatch::resource_not_found;

/// The protocol versions of the legacy era the server negotiates in `initialize`, newest first.
pub const LEGACY_VERSIONS: &[&str] = crate::mcp::KNOWN_LEGACY_VERSIONS;

/// The server's handle of one HTTP exchange (one request and its response), numbered in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ExchangeId(pub(crate) u64);

impl ExchangeId {
    /// The number (handles are numbered from 0 in the order issued; a driver may key its own
    /// maps by it).
    pub fn raw(self) -> u64 {
        self.0
    }

    /// The handle numbered `n` (one never issued is refused by the server's calls with a
    /// [`UsageError`]).
    pub fn from_raw(n: u64) -> Self {
        ExchangeId(n)
    }
}

impl fmt::Display for ExchangeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "exchange {}", self.0)
    }
}

/// The server's handle of one JSON-RPC request it serves (not the client's JSON-RPC id, which
/// clients may reuse across sessions), numbered in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestId(pub(crate) u64);

impl RequestId {
    /// The number (handles are numbered from 0 in the order issued; a driver may key its own
    /// maps by it).
    pub fn raw(self) -> u64 {
        self.0
    }

    /// The handle numbered `n` (one never issued is refused by the server's calls with a
    /// [`UsageError`]).
    pub fn from_raw(n: u64) -> Self {
        RequestId(n)
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "request {}", self.0)
    }
}

/// A legacy session's id, as `Mcp-Session-Id` carries it (the stdio connection's session has
/// the id `stdio`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SessionId(pub(crate) String);

impl SessionId {
    /// The id as sent on the wire.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// An HTTP method as the driver received it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum HttpMethod {
    /// `GET`: the legacy era's server-to-client stream, or a resumption (`Last-Event-ID`).
    Get,
    /// `POST`: one JSON-RPC message.
    Post,
    /// `DELETE`: ends a legacy session.
    Delete,
    /// Anything else (`405`).
    Other(String),
}

impl HttpMethod {
    /// Reads a method token (case-sensitive, as HTTP methods are).
    pub fn from_token(token: &str) -> Self {
        match token {
            "GET" => HttpMethod::Get,
            "POST" => HttpMethod::Post,
            "DELETE" => HttpMethod::Delete,
            other => HttpMethod::Other(other.to_owned()),
        }
    }

    /// The token.
    pub fn as_str(&self) -> &str {
        match self {
            HttpMethod::Get => "GET",
            HttpMethod::Post => "POST",
            HttpMethod::Delete => "DELETE",
            HttpMethod::Other(other) => other,
        }
    }
}

/// One HTTP request, read whole by the driver (at most [`Limits::max_body_bytes`] + 1 bytes of
/// body: one more tells the core it was too long).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpRequest {
    /// The method.
    pub method: HttpMethod,
    /// The request target's path (a query is ignored).
    pub path: String,
    /// The headers.
    pub headers: Headers,
    /// The body.
    pub body: Vec<u8>,
}

/// What a driver does for one HTTP exchange.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HttpOutput {
    /// The whole response; the exchange is over.
    Response {
        /// The status.
        status: u16,
        /// The headers (with `Content-Type` when there is a body).
        headers: Headers,
        /// The body.
        body: Vec<u8>,
    },
    /// A `text/event-stream` response starts; [`HttpOutput::StreamEvent`]s follow.
    StreamStart {
        /// The status (200).
        status: u16,
        /// The headers.
        headers: Headers,
    },
    /// One SSE event, encoded (`id:`, `event:`, `data:` lines and the blank line).
    StreamEvent(Vec<u8>),
    /// The stream ends; the exchange is over (close the response body).
    StreamEnd,
}

/// What the server asks its driver to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    /// Write one line to stdout: a JSON-RPC message and its `\n`.
    Stdio(Vec<u8>),
    /// Act on an HTTP exchange.
    Http(ExchangeId, HttpOutput),
}

/// What a request asks the application for, read and checked by the core.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Call {
    /// `tools/list` (answer with every tool: the core paginates).
    ListTools,
    /// `tools/call`.
    CallTool {
        /// `params.name`.
        name: String,
        /// `params.arguments` (`{}` when absent).
        arguments: JsonObject,
    },
    /// `resources/list`.
    ListResources,
    /// `resources/templates/list`.
    ListResourceTemplates,
    /// `resources/read`.
    ReadResource {
        /// `params.uri`.
        uri: String,
    },
    /// `resources/subscribe` (legacy era).
    Subscribe {
        /// `params.uri`.
        uri: String,
    },
    /// `resources/unsubscribe` (legacy era).
    Unsubscribe {
        /// `params.uri`.
        uri: String,
    },
    /// `prompts/list`.
    ListPrompts,
    /// `prompts/get`.
    GetPrompt {
        /// `params.name`.
        name: String,
        /// `params.arguments` (`{}` when absent).
        arguments: JsonObject,
    },
    /// `completion/complete`.
    Complete(CompleteRequest),
    /// `subscriptions/listen` (`2026-07-28`) asking for `notifications/resources/updated` of
    /// these URIs (`notifications.resourceSubscriptions`, on a server that serves resources):
    /// which of them the application honours. Answer with [`Reply::resource_subscriptions`]
    /// (URIs it was not asked for are ignored) or with an error, which the client gets as the
    /// listen's JSON-RPC error. Only then does the core send the acknowledgment (the accepted
    /// URIs and the list-changed kinds asked for) and open the stream; until then nothing goes
    /// out for the listen (progress and log messages for it are dropped), and a cancel or a
    /// closed connection ends it with [`ServerEvent::Cancelled`]. Once open, the stream is the
    /// core's: [`Server::resource_updated`] reaches it for the accepted URIs only. A listen
    /// without URIs is acknowledged at once and never reaches the application.
    Listen {
        /// The URIs asked for, in the client's order.
        uris: Vec<String>,
    },
    /// Any other method.
    Other {
        /// The method.
        method: String,
        /// `params` (`{}` when absent).
        params: JsonObject,
    },
}

/// One request for the application: what is asked and its context.
#[derive(Clone, Debug)]
pub struct Incoming {
    /// What is asked.
    pub call: Call,
    /// Who asks, in which era, with which capabilities, and (MRTR) the previous round.
    pub context: RequestContext,
}

impl Incoming {
    /// The request's handle.
    pub fn id(&self) -> RequestId {
        self.context.request
    }
}

/// Why a request ended without the application's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CancelReason {
    /// `notifications/cancelled` from the client, with its reason.
    Client(Option<String>),
    /// The HTTP exchange that carried it closed (the client went away) and the request cannot
    /// be resumed.
    ExchangeClosed,
    /// Its session ended.
    SessionClosed,
    /// stdio ended.
    StdioEnded,
    /// A server-to-client request it waited on went unanswered (legacy MRTR).
    InputTimedOut,
    /// The server shut down.
    Shutdown,
}

/// Why a legacy session ended.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SessionEndReason {
    /// The client sent `DELETE`.
    Deleted,
    /// No request for [`Timeouts::session_idle`].
    Idle,
    /// stdio ended.
    StdioEnded,
    /// The server shut down.
    Shutdown,
}

/// What the server tells the application.
// `Request` is the common event and carries its context whole; boxing it would cost an
// allocation per request to save stack space in a queue.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum ServerEvent {
    /// A request to serve; answer with [`Server::respond`] (or let [`Server::serve_with`] do
    /// it through the trait).
    Request(Incoming),
    /// A request ended before its answer; a later [`Server::respond`] to it is dropped.
    Cancelled {
        /// The request.
        request: RequestId,
        /// Why.
        reason: CancelReason,
    },
    /// A legacy session opened (`initialize`).
    SessionOpened {
        /// Its id.
        session: SessionId,
    },
    /// A legacy session ended.
    SessionClosed {
        /// Its id.
        session: SessionId,
        /// Why.
        reason: SessionEndReason,
    },
}

/// The next deadline of the server, and whose it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Timeout {
    /// When.
    pub at: Instant,
    /// Why.
    pub reason: TimeoutReason,
}

/// Whose deadline a [`Timeout`] is.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TimeoutReason {
    /// A server-to-client request of this request's MRTR round waits for its answer.
    ServerRequest(RequestId),
    /// A legacy session's idle deadline.
    SessionIdle(SessionId),
    /// The next keep-alive comment on the long-lived streams.
    KeepAlive,
}

/// A configuration [`Server::new`] refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// Neither era is on.
    #[error("server config: no era is served (turn on Eras::modern or Eras::legacy)")]
    NoEra,
    /// The HTTP path does not start with `/`.
    #[error("server config: the HTTP path {0:?} does not start with '/'")]
    BadPath(String),
    /// A bound is zero.
    #[error("server config: {0} must be more than zero")]
    ZeroLimit(&'static str),
    /// `serverInfo.name` is empty.
    #[error("server config: serverInfo needs a name")]
    NoName,
}

/// A call on the [`Server`] that names something it never issued, or asks what the request
/// cannot have (the caller's bug; the server's state is unchanged except as noted).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UsageError {
    /// No request with this handle was ever issued.
    #[error("server: {0} was never issued")]
    UnknownRequest(RequestId),
    /// No exchange with this handle was ever issued.
    #[error("server: {0} was never issued")]
    UnknownExchange(ExchangeId),
    /// Progress for a request whose client gave no `progressToken` (nothing was sent).
    #[error("server: {0} has no progressToken, so no progress can be sent for it")]
    NoProgressToken(RequestId),
    /// [`Reply::InputRequired`] for a method that cannot ask for input; the client got a
    /// `-32603` error instead.
    #[error("server: {request} ({method}) cannot answer input_required (only tools/call, prompts/get and resources/read can)")]
    InputNotAllowed {
        /// The request.
        request: RequestId,
        /// Its method.
        method: String,
    },
    /// The reply is not what the method answers (a result that is not a JSON object, or for
    /// [`Call::Listen`] one without a `resourceSubscriptions` array of strings); the client got
    /// a `-32603` error instead.
    #[error("server: the reply to {request} is not the result its method answers")]
    BadResult {
        /// The request.
        request: RequestId,
    },
}

/// The sans-IO MCP server (see the module docs).
pub struct Server {
    engine: engine::Engine,
}

impl fmt::Debug for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Server")
            .field("info", &self.engine.config.info.name)
            .field("in_flight", &self.engine.in_flight())
            .field("sessions", &self.engine.open_sessions())
            .finish_non_exhaustive()
    }
}

impl Server {
    /// A server with `config`, serving nothing yet.
    pub fn new(config: ServerConfig) -> Result<Server, ConfigError> {
        config.validate()?;
        Ok(Server {
            engine: engine::Engine::new(config),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &ServerConfig {
        &self.engine.config
    }

    /// The bounds (a driver reads [`Limits::max_body_bytes`] to stop reading a body).
    pub fn limits(&self) -> &Limits {
        &self.engine.config.limits
    }

    // --- stdio -----------------------------------------------------------------------------

    /// Bytes read from stdin, of any size: each whole line is one JSON-RPC message; a line
    /// longer than [`Limits::max_line_bytes`] is answered `-32700` and skipped.
    pub fn handle_stdio_bytes(&mut self, now: Instant, bytes: &[u8]) {
        self.engine.stdio_bytes(now, bytes);
    }

    /// stdin ended: its last line (without newline) is served, then every request still in
    /// flight is cancelled and the stdio session closes. Answers already given are still
    /// in the outputs.
    pub fn handle_stdio_eof(&mut self, now: Instant) {
        self.engine.stdio_eof(now);
    }

    // --- HTTP ------------------------------------------------------------------------------

    /// One HTTP request on the endpoint; its response comes out as [`Output::Http`] with the
    /// returned handle (at once for most, later for a request the application answers later
    /// and for streams).
    pub fn handle_http_request(&mut self, now: Instant, request: HttpRequest) -> ExchangeId {
        self.engine.http_request(now, request)
    }

    /// The client closed the exchange (its connection went away): the requests it carried are
    /// cancelled unless they can still be resumed with `Last-Event-ID`, and no more output
    /// comes for it. A closed or finished exchange is dropped with `Ok`.
    pub fn handle_exchange_closed(
        &mut self,
        now: Instant,
        exchange: ExchangeId,
    ) -> Result<(), UsageError> {
        self.engine.exchange_closed(now, exchange)
    }

    // --- the application ---------------------------------------------------------------------

    /// The next event for the application.
    pub fn poll_event(&mut self) -> Option<ServerEvent> {
        self.engine.poll_event()
    }

    /// The application's answer to `request`. An answer to a request that has ended
    /// (cancelled, its client gone) is dropped with `Ok`; [`Reply::Pending`] changes nothing.
    pub fn respond(
        &mut self,
        now: Instant,
        request: RequestId,
        reply: Reply,
    ) -> Result<(), UsageError> {
        self.engine.respond(now, request, reply, Vec::new())
    }

    /// The application's answer to `request`, after what it sent while serving it (progress,
    /// log messages), in order.
    pub fn respond_with_notices(
        &mut self,
        now: Instant,
        request: RequestId,
        notices: Vec<Notice>,
        reply: Reply,
    ) -> Result<(), UsageError> {
        self.engine.respond(now, request, reply, notices)
    }

    /// Sends `notifications/progress` for `request` before its result.
    pub fn progress(
        &mut self,
        now: Instant,
        request: RequestId,
        progress: f64,
        total: Option<f64>,
        message: Option<&str>,
    ) -> Result<(), UsageError> {
        self.engine.progress(now, request, progress, total, message)
    }

    /// Sends `notifications/message`: for `Some(request)` on that request's stream before its
    /// result (if the client asked for `level` or more); for `None` to every legacy session
    /// whose `logging/setLevel` admits it (its GET stream on HTTP; stdout on stdio).
    pub fn log(
        &mut self,
        now: Instant,
        request: Option<RequestId>,
        level: LoggingLevel,
        logger: Option<&str>,
        data: serde_json::Value,
    ) -> Result<(), UsageError> {
        self.engine.log(now, request, level, logger, data)
    }

    /// Closes `request`'s SSE stream now (SEP-1699 polling); what follows is replayed when the
    /// client reconnects with `Last-Event-ID`.
    pub fn close_stream(&mut self, now: Instant, request: RequestId) -> Result<(), UsageError> {
        self.engine.close_stream(now, request)
    }

    /// A list changed: `notifications/{tools,prompts,resources}/list_changed` to every legacy
    /// session (GET stream, stdout) and every `subscriptions/listen` stream that asked for it.
    /// Returns how many sessions and listen streams were told.
    pub fn list_changed(&mut self, now: Instant, kind: ListKind) -> usize {
        self.engine.list_changed(now, kind)
    }

    /// The resource `uri` changed: `notifications/resources/updated` to the sessions and
    /// listen streams subscribed to it (a listen stream: one whose acknowledgment listed
    /// `uri`, see [`Call::Listen`]). Returns how many were told.
    pub fn resource_updated(&mut self, now: Instant, uri: &str) -> usize {
        self.engine.resource_updated(now, uri)
    }

    /// Ends every open `subscriptions/listen` stream as a server does on its own initiative
    /// (`notifications/cancelled` for it, then its graceful-closure result); the server goes
    /// on serving. Returns how many were ended. A listen the application has not answered yet
    /// ([`Call::Listen`]) is not open and is left alone.
    pub fn end_listens(&mut self, now: Instant) -> usize {
        self.engine.end_listens(now)
    }

    /// For a `tools/call` served through [`Server::poll_event`]: checks the request's
    /// `Mcp-Param-*` headers against `tool`'s `x-mcp-header` annotations (`2026-07-28` HTTP
    /// only; `Ok(true)` elsewhere). On a mismatch the core answers `-32020` and returns
    /// `Ok(false)`: the application must not run the call. [`Server::serve_with`] does this
    /// itself.
    pub fn check_tool_headers(
        &mut self,
        now: Instant,
        request: RequestId,
        tool: Option<&Tool>,
    ) -> Result<bool, UsageError> {
        self.engine.check_tool_headers(now, request, tool)
    }

    /// Drains [`Server::poll_event`] through `app`: each request goes to its trait method and
    /// the reply to [`Server::respond`] (a [`Reply::Pending`] waits for the application's own
    /// call), cancellations and session ends to their hooks.
    pub fn serve_with<A: Application + ?Sized>(&mut self, app: &mut A, now: Instant) {
        dispatch::serve_with(self, app, now);
    }

    // --- outputs -----------------------------------------------------------------------------

    /// The next thing for the driver to do.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.engine.poll_output()
    }

    /// The next deadline, with its reason.
    pub fn poll_timeout(&self) -> Option<Timeout> {
        self.engine.poll_timeout()
    }

    /// Time passed: expired deadlines act (early or repeated calls are harmless).
    pub fn handle_timeout(&mut self, now: Instant) {
        self.engine.handle_timeout(now);
    }

    /// Stops taking work: requests in flight are cancelled (answered `-32603` where an answer
    /// can still go), streams end, sessions close.
    pub fn shutdown(&mut self, now: Instant) {
        self.engine.shutdown(now);
    }

    // --- inspection --------------------------------------------------------------------------

    /// Requests being served (waiting for the application or for the client's input).
    pub fn in_flight(&self) -> usize {
        self.engine.in_flight()
    }

    /// Open legacy sessions.
    pub fn open_sessions(&self) -> usize {
        self.engine.open_sessions()
    }

    /// Open HTTP exchanges (responses not finished).
    pub fn open_exchanges(&self) -> usize {
        self.engine.open_exchanges()
    }
}

/// An error object with `code` and `message`.
#[allow(dead_code)]
pub(crate) fn error_object(code: i64, message: impl Into<String>) -> ErrorObject {
    ErrorObject {
        code,
        message: message.into(),
        data: None,
    }
}

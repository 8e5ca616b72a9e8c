//! `client`: [`Client`], the whole MCP client of one server as a sans-IO state machine.
//!
//! It ties the other `mcp` modules together so that a host asks for operations (discover, list,
//! call, get, read, subscribe) and does not care which era the server speaks:
//!
//! - **Request building** ([`super::meta`], [`super::headers`]): every modern request carries its
//!   own `_meta` (version, the capabilities declared for it, client info, log level, progress
//!   token, trace context); on Streamable HTTP its headers are mirrored from the body, with
//!   `Mcp-Param-*` from the `x-mcp-header` annotations of the latest `tools/list`. Tools whose
//!   annotations break the rules are removed from the listed result, with
//!   [`Event::ToolExcluded`] naming the tool and the reason.
//! - **Eras** ([`super::era`], [`super::legacy`]): HTTP sends the first request in the modern era;
//!   a 400/404/405 whose body is not a recognized modern error means legacy, and the client falls
//!   back to `initialize` and resends the operation. stdio probes with `server/discover` first.
//!   `-32022` picks the highest common version and retries, `-32021` declares the missing
//!   capability when the host supports it and retries, `-32020` refreshes `tools/list` and
//!   retries once. The verdict is kept ([`Client::era`]) and re-probed only when it breaks.
//!   A `server/discover` answered with a result that is no `DiscoverResult` means legacy too.
//!   A legacy HTTP session opens its GET stream ([`ClientConfig::legacy_listen`]) for the
//!   server's own requests, and resumes an SSE stream the server closed after an event id with
//!   a GET carrying `Last-Event-ID`, after the stream's `retry`.
//! - **MRTR** ([`super::mrtr`]): an `input_required` result surfaces [`Event::InputRequested`];
//!   the host answers with [`Client::answer_input`]; the retry goes out with a new id once every
//!   key is answered. Retries are never cached.
//! - **Caching** ([`super::cache`]): discover, lists and reads are served from the cache while
//!   fresh; `list_changed`/`updated` notifications invalidate; a stale entry is served after a
//!   failed refetch only when the cache policy allows it.
//! - **Subscriptions** ([`super::subscription`]) and the **request lifecycle**
//!   ([`super::request`]: timeouts, cancellation, resends).
//!
//! The step-function contract (`DESIGN.md`): inputs through `handle_*(now, ...)`, outputs from
//! [`Client::poll_output`] (drain it after every input), the next deadline from
//! [`Client::poll_timeout`]. HTTP outputs are POSTs on numbered streams ([`StreamId`]); the driver
//! feeds each stream's response head, body bytes and end back. stdio outputs are lines to write;
//! the driver feeds each line the server writes.
//!
//! # Example
//!
//! A driver's loop, with the server's answer written by hand:
//!
//! ```
//! use std::time::{Instant, SystemTime};
//! use mcpwire_core::http::{Headers, ResponseHead};
//! use mcpwire_core::mcp::cache::ListKind;
//! use mcpwire_core::mcp::client::{Client, ClientConfig, Event, Output};
//! use mcpwire_core::mcp::meta::Implementation;
//! use mcpwire_core::mcp::request::Transport;
//!
//! let now = Instant::now();
//! let mut client = Client::new(ClientConfig::new(Transport::Http, Implementation::new("host", "1.0")));
//! let op = client.list(now, ListKind::Tools, None);
//!
//! // The driver POSTs what comes out...
//! let Some(Output::Http { stream, headers, body, .. }) = client.poll_output() else { panic!() };
//! assert_eq!(headers.get("Mcp-Method"), Some("tools/list"));
//! assert!(body.contains("\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\""));
//!
//! // ...and feeds the response back.
//! let mut h = Headers::new();
//! h.append("Content-Type", "application/json").unwrap();
//! client.handle_response_head(now, SystemTime::now(), stream, ResponseHead { status: 200, headers: h }).unwrap();
//! let answer = r#"{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"echo","inputSchema":{"type":"object"}}]}}"#;
//! client.handle_response_data(now, stream, answer.as_bytes()).unwrap();
//! client.handle_response_end(now, stream).unwrap();
//!
//! let mut result = None;
//! while let Some(out) = client.poll_output() {
//!     if let Output::Event(Event::Result { op: o, result: r, .. }) = out {
//!         assert_eq!(o, op);
//!         result = Some(r);
//!     }
//! }
//! assert!(result.unwrap().contains("echo"));
//! ```

use crate::time::{Duration, Instant, SystemTime};
use std::collections::{BTreeMap, VecDeque};
use std::fmt;

use serde_json::value::RawValue;
use serde_json::Value;

use super::cache::{
    AuthContext, CacheConfig, CacheableMethod, FetchTicket, ListKind, Lookup, RequestKey,
    ResultCache,
};
use super::elicitation::ElicitationRequest;
use super::era::{
    self, classify_http_error, classify_probe, declare_required, CapabilityError, Era,
    HttpErrorVerdict, ModernError, ProbeOutcome, ProbeVerdict, VersionError, VersionNegotiation,
};
use super::headers::{self, HeaderBuildError, ToolHeaders};
use super::legacy::{self, LegacyError, LegacySession, SessionStatus};
use super::meta::{
    ClientCapabilities, IdAllocator, Implementation, JsonObject, LoggingLevel, RequestMeta,
};
use super::mrtr::{
    self, InputAnswer, InputCapabilities, InputRequestEvent, InputRequiredResult, MrtrError,
    MrtrRound,
};
use super::request::{
    self, CallOptions, FailReason, IdSource, RequestHandle, Requests, RequestsConfig, ResponseKind,
    Routed, StreamFailure, Transport,
};
use super::subscription::{
    self, Change, SubscriptionFilter, SubscriptionHandle, Subscriptions, SubscriptionsConfig,
};
use super::{LATEST_PROTOCOL_VERSION, LEGACY_PROTOCOL_VERSION};
use crate::backoff;
use crate::http::{Headers, Method, ResponseHead};
use crate::jsonrpc::{self, ErrorObject, Id, Message};
use crate::sse::SseParser;

/// The largest JSON response body (or error body) the client buffers (16 MiB).
pub const DEFAULT_MAX_BODY_BYTES: usize = 16 * 1024 * 1024;

/// How long the stdio `server/discover` probe waits before the server counts as legacy (10 s).
pub const DEFAULT_PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// Legacy HTTP: how long to wait before resuming an SSE stream whose server set no `retry`.
pub const DEFAULT_SSE_RETRY: Duration = Duration::from_secs(1);
/// Legacy HTTP: the longest `retry` honoured (a larger one is cut to this).
pub const MAX_SSE_RETRY: Duration = Duration::from_secs(60);
/// Legacy HTTP: the most times one stream is resumed.
pub const MAX_SSE_RESUMES: u32 = 100;
/// Legacy HTTP: the most resumes in a row that brought no new event before the stream counts
/// as broken.
pub const MAX_STALLED_SSE_RESUMES: u32 = 3;
/// Legacy HTTP: the longest the session's first requests wait for the server to answer
/// `notifications/initialized` and the session's GET stream (see [`ClientConfig::legacy_listen`]).
pub const SESSION_OPEN_WAIT: Duration = Duration::from_secs(2);

/// Legacy-era subscription handles start here, apart from the `subscriptions/listen` ones.
const LEGACY_SUB_BASE: u64 = 1 << 48;

/// How many pages a `-32020` refresh of `tools/list` follows looking for the tool.
const MAX_REFRESH_PAGES: u32 = 16;

// ---------------------------------------------------------------------------------------------
// Configuration and the host's vocabulary.

/// Which era the client speaks.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum ProtocolChoice {
    /// Detect it (HTTP: modern first, fall back on a legacy answer; stdio: probe).
    #[default]
    Auto,
    /// Only the modern era; a legacy answer is an error.
    Modern,
    /// Only the legacy era (`initialize` first).
    Legacy,
}

/// How the client is set up. [`ClientConfig::new`] fills in the defaults.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// Streamable HTTP or stdio.
    pub transport: Transport,
    /// `clientInfo`.
    pub client_info: Implementation,
    /// The capabilities declared on every request (what the host supports and wants to use).
    pub capabilities: ClientCapabilities,
    /// Everything the host could support if a server requires it (`-32021`); by default the
    /// same as [`ClientConfig::capabilities`].
    pub host_capabilities: ClientCapabilities,
    /// The era policy.
    pub protocol: ProtocolChoice,
    /// The modern versions the client speaks, any order (default: [`LATEST_PROTOCOL_VERSION`]).
    pub versions: Vec<String>,
    /// A verdict the host kept from earlier (an [`era::EraCache`] entry): skips detection
    /// until it breaks.
    pub known_era: Option<era::CachedEra>,
    /// The per-request defaults (timeout, resends, backoff).
    pub call_options: CallOptions,
    /// The result cache.
    pub cache: CacheConfig,
    /// The authorization context requests are made in (private cache entries are keyed by it).
    pub auth_context: AuthContext,
    /// The subscription policy (its `transport` and `jitter_seed` are set from this config).
    pub subscriptions: SubscriptionsConfig,
    /// stdio: how long the `server/discover` probe may take.
    pub probe_timeout: Duration,
    /// The MRTR round limit per operation (default 10).
    pub max_mrtr_rounds: u32,
    /// The largest response body buffered.
    pub max_body_bytes: usize,
    /// The seed of every jitter source (drawn by the caller from its own randomness).
    pub jitter_seed: u64,
    /// Streamable HTTP: before calling a tool whose `x-mcp-header` annotations are not known
    /// (no `tools/list` seen since the era was learned or the list changed), fetch `tools/list`
    /// first, so that the call carries its `Mcp-Param-*` headers on the first try and a tool
    /// with invalid annotations is refused without being called (default `true`). Off, such a
    /// call goes out without those headers and relies on the server's `-32020` to refresh.
    pub list_tools_before_call: bool,
    /// Streamable HTTP, legacy era: after `initialize`, open the session's GET stream
    /// (legacy `basic/transports.mdx`, "Listening for Messages from the Server") to receive
    /// the server's requests (such as `elicitation/create`) and notifications that it sends
    /// outside any call's stream. A server without one answers `405`. Default `true`.
    pub legacy_listen: bool,
}

impl ClientConfig {
    /// The defaults for a server on `transport`: automatic era detection, no optional
    /// capability declared, 60 s timeouts, a 10-round MRTR limit.
    pub fn new(transport: Transport, client_info: Implementation) -> Self {
        ClientConfig {
            transport,
            client_info,
            capabilities: ClientCapabilities::none(),
            host_capabilities: ClientCapabilities::none(),
            protocol: ProtocolChoice::Auto,
            versions: vec![LATEST_PROTOCOL_VERSION.to_owned()],
            known_era: None,
            call_options: CallOptions::default(),
            cache: CacheConfig::default(),
            auth_context: AuthContext::new("anonymous"),
            subscriptions: SubscriptionsConfig::new(transport),
            probe_timeout: DEFAULT_PROBE_TIMEOUT,
            max_mrtr_rounds: mrtr::DEFAULT_MAX_ROUNDS,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            jitter_seed: 0,
            list_tools_before_call: true,
            legacy_listen: true,
        }
    }

    /// Declares `capabilities` on every request (and lets `-32021` use them).
    pub fn with_capabilities(mut self, capabilities: ClientCapabilities) -> Self {
        self.host_capabilities = capabilities.clone();
        self.capabilities = capabilities;
        self
    }
}

/// The host's handle for one operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OpId(pub u64);

/// The number of one HTTP exchange the client asked the driver to make.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId(pub u64);

/// What the host asks of the server.
#[derive(Clone, PartialEq)]
#[non_exhaustive]
pub enum Operation {
    /// `server/discover` (in the legacy era: answered from the `initialize` result).
    Discover,
    /// `tools/list`, `prompts/list`, `resources/list` or `resources/templates/list`.
    List {
        /// Which list.
        kind: ListKind,
        /// The page (`None`: the first).
        cursor: Option<String>,
    },
    /// `tools/call`.
    CallTool {
        /// The tool.
        name: String,
        /// Its arguments.
        arguments: JsonObject,
    },
    /// `prompts/get`.
    GetPrompt {
        /// The prompt.
        name: String,
        /// Its arguments.
        arguments: JsonObject,
    },
    /// `resources/read`.
    ReadResource {
        /// The resource.
        uri: String,
    },
    /// `ping` (legacy era only: the modern era has no ping).
    Ping,
}

impl fmt::Debug for Operation {
    /// Names the operation, not its arguments (they may be private).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Operation::List { kind, cursor } => f
                .debug_struct("List")
                .field("kind", kind)
                .field("cursor", &cursor.is_some())
                .finish(),
            Operation::CallTool { name, arguments } => f
                .debug_struct("CallTool")
                .field("name", name)
                .field("arguments", &arguments.len())
                .finish(),
            Operation::GetPrompt { name, arguments } => f
                .debug_struct("GetPrompt")
                .field("name", name)
                .field("arguments", &arguments.len())
                .finish(),
            Operation::ReadResource { uri } => {
                f.debug_struct("ReadResource").field("uri", uri).finish()
            }
            Operation::Discover => f.write_str("Discover"),
            Operation::Ping => f.write_str("Ping"),
        }
    }
}

impl Operation {
    /// The JSON-RPC method.
    pub fn method(&self) -> &'static str {
        match self {
            Operation::Discover => super::discover::METHOD,
            Operation::List { kind, .. } => kind.method(),
            Operation::CallTool { .. } => "tools/call",
            Operation::GetPrompt { .. } => "prompts/get",
            Operation::ReadResource { .. } => "resources/read",
            Operation::Ping => "ping",
        }
    }

    /// `params` without `_meta`.
    fn params(&self) -> JsonObject {
        let mut p = JsonObject::new();
        match self {
            Operation::Discover | Operation::Ping => {}
            Operation::List { cursor, .. } => {
                if let Some(c) = cursor {
                    p.insert("cursor".to_owned(), Value::String(c.clone()));
                }
            }
            Operation::CallTool { name, arguments } | Operation::GetPrompt { name, arguments } => {
                p.insert("name".to_owned(), Value::String(name.clone()));
                p.insert("arguments".to_owned(), Value::Object(arguments.clone()));
            }
            Operation::ReadResource { uri } => {
                p.insert("uri".to_owned(), Value::String(uri.clone()));
            }
        }
        p
    }

    fn cacheable(&self) -> bool {
        CacheableMethod::from_method(self.method()).is_some()
    }

    /// What the Streamable HTTP headers mirror from a request of this operation in `version`
    /// (the fields [`headers::request_headers_for`] reads from the request).
    fn header_fields<'a>(&'a self, version: &'a str) -> headers::RequestFields<'a> {
        let null = headers::Arguments::Value(&Value::Null);
        let (name, tool, arguments) = match self {
            Operation::CallTool { name, arguments } | Operation::GetPrompt { name, arguments } => {
                let name = Some(name.as_str());
                (name, name, headers::Arguments::Object(arguments))
            }
            Operation::ReadResource { uri } => (Some(uri.as_str()), None, null),
            Operation::Discover | Operation::Ping | Operation::List { .. } => (None, None, null),
        };
        headers::RequestFields {
            method: self.method(),
            version: Some(Some(version)),
            name,
            tool,
            arguments,
        }
    }
}

/// How an operation uses the cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum CachePolicy {
    /// Serve a fresh entry without asking the server; store the answer (the default).
    #[default]
    Use,
    /// Ask the server whatever the cache holds; store the answer.
    Refresh,
}

/// Per-operation options.
#[derive(Clone, Debug, Default)]
pub struct OpOptions {
    /// Timeout, resends, idempotency (`None`: [`ClientConfig::call_options`]).
    pub call: Option<CallOptions>,
    /// Ask for progress notifications (a progress token is allocated).
    pub progress: bool,
    /// `io.modelcontextprotocol/logLevel`.
    pub log_level: Option<LoggingLevel>,
    /// W3C `traceparent` and `tracestate`.
    pub trace: Option<(String, Option<String>)>,
    /// The cache policy.
    pub cache: CachePolicy,
}

/// Where a result came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResultSource {
    /// The server answered this operation.
    Server,
    /// A fresh cache entry; nothing was sent.
    Cache,
    /// The refetch failed and the cache policy allowed a stale entry.
    StaleAfterError,
    /// The legacy `initialize` result (a `server/discover` in the legacy era).
    Handshake,
}

/// How the era was learned.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum EraEvidence {
    /// [`ClientConfig::protocol`] pinned it.
    Configured,
    /// [`ClientConfig::known_era`] said so.
    Cached,
    /// The server answered a modern request (a result or a recognized modern error).
    ModernAnswer,
    /// HTTP: the server answered a modern request with this status and no modern error.
    HttpStatus(u16),
    /// stdio: the probe got an error that is not a modern one.
    ProbeError(i64),
    /// stdio: the probe got no answer in time.
    ProbeTimedOut,
    /// The `server/discover` probe was answered with a result that is no `DiscoverResult`
    /// (no `supportedVersions`): a legacy server answering a method it does not know.
    NotADiscoverResult,
}

/// Why an operation is sent again (informational).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RetryReason {
    /// `-32022`: retrying with this version.
    Version(String),
    /// `-32021`: retrying with the missing capabilities declared.
    Capabilities,
    /// `-32020`: `tools/list` was refreshed; retrying with the new headers.
    HeadersRefreshed,
    /// The server is legacy: resending after `initialize`.
    LegacyFallback,
    /// The legacy session expired (404): resending after a new `initialize`.
    SessionExpired,
}

/// Why an operation failed. Split by blame: the server's answer, the transport, the protocol.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum OpError {
    /// The server answered with a JSON-RPC error.
    #[error("the server answered error {}: {}", .0.code, .0.message)]
    Server(ErrorObject),
    /// No answer in time.
    #[error("the request timed out{}", if *max_total { " (maximum total time)" } else { "" })]
    TimedOut {
        /// Whether the request's maximum total time ran out.
        max_total: bool,
    },
    /// The transport failed and the request could not be resent.
    #[error("{0}")]
    Transport(FailReason),
    /// No protocol version in common.
    #[error("{0}")]
    Version(VersionError),
    /// The server requires a capability the host does not support.
    #[error("{0}")]
    Capability(CapabilityError),
    /// `-32020` persisted after `tools/list` was refreshed.
    #[error("the server still rejects the request headers after refreshing tools/list: {message}")]
    HeaderMismatch {
        /// The server's message.
        message: String,
    },
    /// The MRTR exchange failed (round limit, an undeclared input kind, a bad result).
    #[error("{0}")]
    Mrtr(MrtrError),
    /// The legacy handshake failed.
    #[error("the legacy handshake failed: {0}")]
    Legacy(LegacyError),
    /// The operation does not exist in the server's era.
    #[error("{operation} is not available in the {era:?} era")]
    Unsupported {
        /// The method.
        operation: &'static str,
        /// The era.
        era: Era,
    },
    /// The tool was excluded from `tools/list` because its `x-mcp-header` annotations are invalid.
    #[error("tool {tool:?} is excluded: {reason}")]
    ToolExcluded {
        /// The tool.
        tool: String,
        /// Why.
        reason: String,
    },
    /// The request's headers could not be built from its body.
    #[error("the request headers could not be built: {0}")]
    Headers(HeaderBuildError),
    /// The client was pinned to the modern era but the server answered like a legacy-only one:
    /// `400`, `404` or `405` without a recognized modern error, before it ever answered in
    /// kind (what automatic detection takes as legacy evidence).
    #[error(
        "the server answered like a {legacy} (legacy) server (HTTP {status}{}) and the client is pinned to {latest}; try --protocol auto",
        error.as_ref().map(|e| format!(", error {}: {}", e.code, e.message)).unwrap_or_default(),
        legacy = LEGACY_PROTOCOL_VERSION,
        latest = LATEST_PROTOCOL_VERSION,
    )]
    LegacyServer {
        /// The status.
        status: u16,
        /// The JSON-RPC error its body carried, if any (e.g. `-32000` "Server not initialized").
        error: Option<ErrorObject>,
    },
    /// The server's answer could not be used.
    #[error("unusable answer: {0}")]
    Protocol(String),
}

/// Why a call was refused (the caller broke the API contract). The client's state is unchanged.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum UsageError {
    /// The operation is unknown or finished.
    #[error("no active operation with this id")]
    UnknownOp,
    /// The operation is not waiting for input.
    #[error("the operation is not waiting for input")]
    NotAwaitingInput,
    /// The answer was refused (unknown key, wrong kind, or invalid against the schema).
    #[error("{0}")]
    Answer(MrtrError),
    /// The era is not known yet (no longer returned by [`Client::subscribe`], which holds the
    /// subscription and learns the era itself).
    #[error("the server's era is not known yet: run an operation (e.g. discover) first")]
    EraUnknown,
    /// The legacy handshake has not finished yet (run an operation first).
    #[error("the legacy handshake has not finished: run an operation (e.g. discover) first")]
    HandshakePending,
    /// The subscription request was refused.
    #[error("{0}")]
    Subscription(subscription::UsageError),
    /// The request was refused by the request tracker.
    #[error("{0}")]
    Request(request::UsageError),
    /// An HTTP input on a stdio client or the reverse.
    #[error("this input does not belong to the configured transport")]
    WrongTransport,
}

/// A fact for the host. `Debug` shows the sizes of results and notification texts, not the
/// texts (they may be private: a tool's output, a server's log data).
#[derive(Clone, PartialEq)]
#[non_exhaustive]
pub enum Event {
    /// The server's era (and version) is known, or changed.
    EraDetected {
        /// The era.
        era: Era,
        /// The version in use.
        version: String,
        /// How it was learned.
        evidence: EraEvidence,
    },
    /// An operation's result (final).
    Result {
        /// The operation.
        op: OpId,
        /// The JSON text of the `result` member (for `tools/list`, without excluded tools).
        result: String,
        /// `tools/call` with `isError: true`: the tool failed (show it to the model).
        is_error: bool,
        /// Where it came from.
        source: ResultSource,
    },
    /// The server needs input to continue the operation: answer every key with
    /// [`Client::answer_input`].
    InputRequested {
        /// The operation.
        op: OpId,
        /// The round (1 for the first `input_required`).
        round: u32,
        /// What is asked, under the server's keys.
        requests: Vec<InputRequestEvent>,
    },
    /// A progress notification for the operation.
    Progress {
        /// The operation.
        op: OpId,
        /// Progress so far.
        progress: f64,
        /// The total, when known.
        total: Option<f64>,
        /// A message.
        message: Option<String>,
    },
    /// A notification from the server (on an operation's stream, or on stdio).
    Notification {
        /// The operation whose stream carried it.
        op: Option<OpId>,
        /// Its method.
        method: String,
        /// The whole JSON-RPC message text.
        message: String,
    },
    /// A tool was removed from a `tools/list` result: its `x-mcp-header` annotations break the
    /// rules (the other tools stay usable).
    ToolExcluded {
        /// The tool (empty when the entry had no name).
        tool: String,
        /// Why, for a person.
        reason: String,
    },
    /// The operation is being sent again.
    Retrying {
        /// The operation.
        op: OpId,
        /// Why.
        reason: RetryReason,
    },
    /// The host's cancellation took effect (final).
    Cancelled {
        /// The operation.
        op: OpId,
    },
    /// The operation failed (final).
    Failed {
        /// The operation.
        op: OpId,
        /// Why.
        error: OpError,
    },
    /// A subscription event.
    Subscription(subscription::Event),
    /// Something arrived that nothing used.
    Ignored {
        /// Why.
        reason: &'static str,
    },
}

impl fmt::Debug for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Event::EraDetected {
                era,
                version,
                evidence,
            } => f
                .debug_struct("EraDetected")
                .field("era", era)
                .field("version", version)
                .field("evidence", evidence)
                .finish(),
            Event::Result {
                op,
                result,
                is_error,
                source,
            } => f
                .debug_struct("Result")
                .field("op", op)
                .field("result_bytes", &result.len())
                .field("is_error", is_error)
                .field("source", source)
                .finish(),
            Event::InputRequested {
                op,
                round,
                requests,
            } => f
                .debug_struct("InputRequested")
                .field("op", op)
                .field("round", round)
                .field("requests", requests)
                .finish(),
            Event::Progress {
                op,
                progress,
                total,
                message,
            } => f
                .debug_struct("Progress")
                .field("op", op)
                .field("progress", progress)
                .field("total", total)
                .field("message", message)
                .finish(),
            Event::Notification {
                op,
                method,
                message,
            } => f
                .debug_struct("Notification")
                .field("op", op)
                .field("method", method)
                .field("message_bytes", &message.len())
                .finish(),
            Event::ToolExcluded { tool, reason } => f
                .debug_struct("ToolExcluded")
                .field("tool", tool)
                .field("reason", reason)
                .finish(),
            Event::Retrying { op, reason } => f
                .debug_struct("Retrying")
                .field("op", op)
                .field("reason", reason)
                .finish(),
            Event::Cancelled { op } => f.debug_struct("Cancelled").field("op", op).finish(),
            Event::Failed { op, error } => f
                .debug_struct("Failed")
                .field("op", op)
                .field("error", error)
                .finish(),
            Event::Subscription(e) => f.debug_tuple("Subscription").field(e).finish(),
            Event::Ignored { reason } => f.debug_struct("Ignored").field("reason", reason).finish(),
        }
    }
}

/// An output of the client.
#[derive(Clone, PartialEq)]
pub enum Output {
    /// HTTP: send this request on a new stream and feed its response back under `stream`.
    Http {
        /// The stream.
        stream: StreamId,
        /// `POST` (or `DELETE` for ending a legacy session).
        method: Method,
        /// The headers.
        headers: Headers,
        /// The body.
        body: String,
    },
    /// HTTP: close this stream (cancels its request, or releases the connection).
    CloseStream(StreamId),
    /// stdio: write this line (a JSON-RPC message; the driver adds the newline).
    Stdio(String),
    /// Something for the host.
    Event(Event),
}

impl fmt::Debug for Output {
    /// Sizes, not bodies: arguments and results may be private.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Output::Http {
                stream,
                method,
                headers,
                body,
            } => f
                .debug_struct("Http")
                .field("stream", stream)
                .field("method", method)
                .field("headers", headers)
                .field("body_bytes", &body.len())
                .finish(),
            Output::CloseStream(s) => f.debug_tuple("CloseStream").field(s).finish(),
            Output::Stdio(line) => f.debug_struct("Stdio").field("bytes", &line.len()).finish(),
            Output::Event(e) => f.debug_tuple("Event").field(e).finish(),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Internal state.

#[derive(Debug)]
enum EraState {
    /// Not known (HTTP: requests go out modern; stdio: the probe is in flight or due).
    Unknown,
    /// Modern, with the version in use; `confirmed` once the server answered in kind.
    Modern { version: String, confirmed: bool },
    /// Legacy, through this session.
    Legacy,
}

/// What an internal operation is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Internal {
    /// The stdio `server/discover` probe.
    Probe,
    /// The legacy `initialize`.
    Initialize,
    /// A `tools/list` refresh after `-32020` for this operation.
    ToolsRefresh { waiter: OpId, pages: u32 },
    /// The `tools/list` fetched before this operation's first call of a tool whose
    /// annotations are not known ([`ClientConfig::list_tools_before_call`]).
    ToolsPrefetch { waiter: OpId, pages: u32 },
}

#[derive(Debug)]
enum OpState {
    /// Waiting for the era, the handshake or a refresh.
    Queued,
    /// An attempt is with the request tracker.
    Sent { req: RequestHandle },
    /// Waiting for the host's answers.
    AwaitingInput,
}

struct Op {
    operation: Operation,
    options: OpOptions,
    internal: Option<Internal>,
    state: OpState,
    /// The capabilities declared for this operation (grows on `-32021`).
    declared: ClientCapabilities,
    versions: VersionNegotiation,
    header_refresh_used: bool,
    mrtr: Option<MrtrRound>,
    /// The params (with `_meta`) of the last MRTR retry, for resending it.
    retry_params: Option<String>,
    ticket: Option<FetchTicket>,
    progress_token: Option<Id>,
    /// The headers of the attempt with the tracker (HTTP, modern era).
    headers: Option<Headers>,
    /// The era the attempt was built for.
    sent_legacy: bool,
}

enum Body {
    Empty,
    Json(Vec<u8>),
    Sse(Box<SseParser>),
    /// A non-2xx status: the body is kept to read its JSON-RPC error.
    Error(Vec<u8>),
    /// The body grew past the bound: dropped.
    TooLarge,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Owner {
    Request(RequestHandle),
    Listen(SubscriptionHandle),
    /// A legacy session's GET stream for a legacy-era subscription.
    LegacyListen(SubscriptionHandle),
    /// The legacy session's own GET stream ([`ClientConfig::legacy_listen`]).
    LegacySession,
    /// A notification or an answer: the response is drained and dropped.
    Fire,
}

struct Stream {
    owner: Owner,
    sent: Headers,
    /// A request sent in the legacy session (its cancellation is a `notifications/cancelled`
    /// POST, not only the closed stream).
    in_session: bool,
    head: Option<ResponseHead>,
    retry_after: Option<Duration>,
    body: Body,
}

/// A legacy SSE stream that ended (or broke) before it was done, to be resumed with a GET
/// carrying `Last-Event-ID` (legacy `basic/transports.mdx`, "Sending Messages to the Server" 6
/// and "Resumability and Redelivery").
#[derive(Debug)]
struct Resume {
    /// The request waiting for its response, or the session's own stream.
    owner: Owner,
    /// When the GET goes out (`None`: it is out).
    at: Option<Instant>,
    /// The last event id the stream carried.
    last_event_id: String,
    /// Resumes so far.
    count: u32,
    /// Resumes in a row that brought no new event id.
    stalled: u32,
}

/// An id source that hands out `first` before anything from the allocator.
struct Preset<'a> {
    first: Option<Id>,
    rest: &'a mut IdAllocator,
}

impl IdSource for Preset<'_> {
    fn next_id(&mut self) -> Id {
        match self.first.take() {
            Some(id) => id,
            None => self.rest.next_id(),
        }
    }
}

/// The MCP client of one server (see the module docs).
pub struct Client {
    config: ClientConfig,
    ids: IdAllocator,
    era: EraState,
    legacy: LegacySession,
    /// The legacy handshake's operation, while it runs.
    handshake: Option<OpId>,
    requests: Requests,
    subs: Subscriptions,
    cache: ResultCache,
    ops: BTreeMap<OpId, Op>,
    by_req: BTreeMap<RequestHandle, OpId>,
    /// Requests abandoned by the client itself (superseded attempts): their events are dropped.
    superseded: Vec<RequestHandle>,
    streams: BTreeMap<StreamId, Stream>,
    req_stream: BTreeMap<RequestHandle, StreamId>,
    sub_stream: BTreeMap<SubscriptionHandle, StreamId>,
    /// Tool annotations from the latest `tools/list`.
    tools: BTreeMap<String, ToolHeaders>,
    /// Tools excluded from the latest `tools/list`, with the reason.
    excluded: BTreeMap<String, String>,
    /// A `tools/list` was seen (or tried before a call) since the era was learned or the
    /// tool list last changed: a call of a tool not in it is not preceded by another one.
    tools_listed: bool,
    /// Calls whose `tools/list` prefetch failed: they go out anyway at the next pump.
    released: Vec<OpId>,
    /// Requests held until the legacy handshake is done (resends), with their attempt's id:
    /// never written, so a cancellation of that id is not written either.
    held: Vec<(RequestHandle, Id, String)>,
    /// stdio: ids of held requests dropped by the client whose `notifications/cancelled` is
    /// still to come out of the tracker (it is swallowed).
    unsent: Vec<Id>,
    /// Legacy `elicitation/create` requests waiting for the host, per operation: key, the
    /// server's request id, the request.
    legacy_inputs: BTreeMap<OpId, Vec<(String, Id, ElicitationRequest)>>,
    /// Legacy-era subscriptions: the kinds accepted and the GET stream (HTTP).
    legacy_subs: BTreeMap<SubscriptionHandle, (SubscriptionFilter, Option<StreamId>)>,
    next_legacy_sub: u64,
    /// Subscriptions asked for before the era (or the legacy session) was there: they open
    /// in the era learned, or end with [`subscription::EndReason::NotOpened`].
    held_subs: Vec<(SubscriptionHandle, SubscriptionFilter)>,
    /// Ids of legacy requests whose answers are not awaited (dropped quietly).
    fired: Vec<Id>,
    /// How the legacy era was learned, reported when the handshake settles the version.
    legacy_evidence: Option<EraEvidence>,
    /// The response headers of the stream whose message is being routed.
    current_headers: Headers,
    /// Legacy HTTP: the session's GET stream, while it is open.
    session_stream: Option<StreamId>,
    /// Legacy HTTP: SSE streams being resumed with `Last-Event-ID`.
    resumes: Vec<Resume>,
    /// Legacy HTTP: the `notifications/initialized` POST and the session's GET, until the
    /// server answers them (their heads), the session's other requests wait (at most until
    /// the instant beside them): the server then has the client ready and able to hear it
    /// before the first request that may make it ask something.
    opening: (Vec<StreamId>, Option<Instant>),
    next_op: u64,
    next_stream: u64,
    /// The `_meta` member texts that rarely change between requests.
    meta_texts: MetaTexts,
    outputs: VecDeque<Output>,
}

/// JSON texts of `_meta` members kept between requests: the client info (fixed) and the
/// members that change only with the version, the declared capabilities or the log level.
struct MetaTexts {
    info: Option<String>,
    stable: Option<StableMeta>,
}

/// The `_meta` of the last request without its per-request members (progress token, trace
/// context), and what it was written from.
struct StableMeta {
    version: String,
    declared: ClientCapabilities,
    log_level: Option<LoggingLevel>,
    /// The object's text without its closing brace.
    open: String,
}

/// A member value to write.
enum Piece<'a> {
    /// JSON text, written as it is.
    Raw(&'a str),
    /// A string, written escaped.
    Str(&'a str),
    /// A value, serialized.
    Value(Value),
    /// An object, serialized.
    Object(&'a JsonObject),
    /// The request's `_meta` ([`MetaTexts::write_request_meta`]).
    Meta,
}

impl MetaTexts {
    /// Writes the `_meta` of a modern request of `op` in `version` to `out`: what serializing
    /// [`RequestMeta::to_object`] of the request's meta gives (version, declared capabilities,
    /// client info, log level, progress token, trace context). The members that rarely change
    /// come from the kept text; the per-request ones sort after all of them (`progressToken`,
    /// `traceparent` and `tracestate` after the `io.modelcontextprotocol/` keys), so they are
    /// appended to it.
    fn write_request_meta(
        &mut self,
        op: &Op,
        version: &str,
        out: &mut Vec<u8>,
    ) -> Result<(), serde_json::Error> {
        use super::meta::{PROGRESS_TOKEN_KEY, TRACEPARENT_KEY, TRACESTATE_KEY};
        let open = self.stable_open(op, version)?;
        out.extend_from_slice(open.as_bytes());
        // As `to_object`: a member whose value does not serialize is left out.
        if let Some(token) = &op.progress_token {
            if let Ok(v) = serde_json::to_value(token) {
                out.push(b',');
                serde_json::to_writer(&mut *out, PROGRESS_TOKEN_KEY)?;
                out.push(b':');
                serde_json::to_writer(&mut *out, &v)?;
            }
        }
        if let Some((parent, state)) = &op.options.trace {
            for (key, value) in [
                (TRACEPARENT_KEY, Some(parent)),
                (TRACESTATE_KEY, state.as_ref()),
            ] {
                if let Some(value) = value {
                    out.push(b',');
                    serde_json::to_writer(&mut *out, key)?;
                    out.push(b':');
                    serde_json::to_writer(&mut *out, value)?;
                }
            }
        }
        out.push(b'}');
        Ok(())
    }

    /// The kept `_meta` text (without its closing brace) for `op` in `version`, written anew
    /// when the version, the declared capabilities or the log level changed.
    fn stable_open(&mut self, op: &Op, version: &str) -> Result<&str, serde_json::Error> {
        use super::meta::{
            CLIENT_CAPABILITIES_KEY, CLIENT_INFO_KEY, LOG_LEVEL_KEY, PROTOCOL_VERSION_KEY,
        };
        let kept = self.stable.as_ref().is_some_and(|m| {
            m.version == version && m.declared == op.declared && m.log_level == op.options.log_level
        });
        if !kept {
            let capabilities = serde_json::to_string(&op.declared.to_value())?;
            let mut members: Vec<(&str, Piece<'_>)> = Vec::with_capacity(4);
            members.push((PROTOCOL_VERSION_KEY, Piece::Str(version)));
            members.push((CLIENT_CAPABILITIES_KEY, Piece::Raw(&capabilities)));
            if let Some(info) = &self.info {
                members.push((CLIENT_INFO_KEY, Piece::Raw(info)));
            }
            if let Some(level) = op.options.log_level {
                if let Ok(v) = serde_json::to_value(level) {
                    members.push((LOG_LEVEL_KEY, Piece::Value(v)));
                }
            }
            let mut out = Vec::with_capacity(256);
            write_object(members, &mut out, |_| Ok(()))?;
            out.pop(); // the closing brace
            self.stable = Some(StableMeta {
                version: version.to_owned(),
                declared: op.declared.clone(),
                log_level: op.options.log_level,
                open: utf8(out)?,
            });
        }
        Ok(self.stable.as_ref().map_or("{", |m| m.open.as_str()))
    }

    /// [`MetaTexts::write_request_meta`] as a string.
    fn request_meta_text(&mut self, op: &Op, version: &str) -> Result<String, serde_json::Error> {
        let mut out = Vec::with_capacity(256);
        self.write_request_meta(op, version, &mut out)?;
        utf8(out)
    }
}

/// Writes a JSON object of `members` to `out` in the order a [`JsonObject`] keeps its keys
/// (serde_json's map without `preserve_order`, which this workspace does not enable, sorts
/// them), so the text is what serializing the same object gives; `meta` writes
/// [`Piece::Meta`]. Returns where each member's value sits in `out`.
fn write_object(
    mut members: Vec<(&str, Piece<'_>)>,
    out: &mut Vec<u8>,
    mut meta: impl FnMut(&mut Vec<u8>) -> Result<(), serde_json::Error>,
) -> Result<Vec<(String, std::ops::Range<usize>)>, serde_json::Error> {
    members.sort_by(|a, b| a.0.cmp(b.0));
    let mut spans = Vec::with_capacity(members.len());
    out.push(b'{');
    for (i, (key, piece)) in members.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        serde_json::to_writer(&mut *out, key)?;
        out.push(b':');
        let start = out.len();
        match piece {
            Piece::Raw(text) => out.extend_from_slice(text.as_bytes()),
            Piece::Str(s) => serde_json::to_writer(&mut *out, s)?,
            Piece::Value(v) => serde_json::to_writer(&mut *out, &v)?,
            Piece::Object(o) => serde_json::to_writer(&mut *out, o)?,
            Piece::Meta => meta(out)?,
        }
        spans.push((key.to_owned(), start..out.len()));
    }
    out.push(b'}');
    Ok(spans)
}

fn utf8(bytes: Vec<u8>) -> Result<String, serde_json::Error> {
    String::from_utf8(bytes).map_err(<serde_json::Error as serde::ser::Error>::custom)
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("transport", &self.config.transport)
            .field("era", &self.era)
            .field("ops", &self.ops.len())
            .field("streams", &self.streams.len())
            .field("subscriptions", &self.subs.len())
            .finish_non_exhaustive()
    }
}

impl Client {
    /// A client for one server. Nothing is sent until the first operation (stdio with
    /// automatic detection sends its probe then).
    pub fn new(config: ClientConfig) -> Self {
        let transport = config.transport;
        let mut sub_config = config.subscriptions.clone();
        sub_config.transport = transport;
        sub_config.jitter_seed = config.jitter_seed ^ 0x5eed_5eed;
        let mut client = Client {
            ids: IdAllocator::new(),
            era: EraState::Unknown,
            legacy: LegacySession::new(config.client_info.clone(), legacy_capabilities(&config)),
            handshake: None,
            requests: Requests::new(RequestsConfig {
                transport,
                jitter_seed: config.jitter_seed,
            }),
            subs: Subscriptions::new(sub_config),
            cache: ResultCache::new(config.cache),
            ops: BTreeMap::new(),
            by_req: BTreeMap::new(),
            superseded: Vec::new(),
            streams: BTreeMap::new(),
            req_stream: BTreeMap::new(),
            sub_stream: BTreeMap::new(),
            tools: BTreeMap::new(),
            excluded: BTreeMap::new(),
            tools_listed: false,
            released: Vec::new(),
            held: Vec::new(),
            legacy_subs: BTreeMap::new(),
            legacy_inputs: BTreeMap::new(),
            next_legacy_sub: 0,
            held_subs: Vec::new(),
            fired: Vec::new(),
            unsent: Vec::new(),
            legacy_evidence: None,
            current_headers: Headers::new(),
            session_stream: None,
            resumes: Vec::new(),
            opening: (Vec::new(), None),
            next_op: 0,
            next_stream: 0,
            meta_texts: MetaTexts {
                info: serde_json::to_value(&config.client_info)
                    .and_then(|v| serde_json::to_string(&v))
                    .ok(),
                stable: None,
            },
            outputs: VecDeque::new(),
            config,
        };
        let latest = client.latest_version();
        match (&client.config.protocol, client.config.known_era.clone()) {
            (ProtocolChoice::Legacy, _) => {
                client.era = EraState::Legacy;
                client.legacy_evidence = Some(EraEvidence::Configured);
            }
            (ProtocolChoice::Modern, known) => {
                let version = known
                    .and_then(|k| k.protocol_version)
                    .filter(|v| client.config.versions.contains(v))
                    .unwrap_or(latest);
                client.era = EraState::Modern {
                    version: version.clone(),
                    confirmed: false,
                };
                client.event(Event::EraDetected {
                    era: Era::Modern,
                    version,
                    evidence: EraEvidence::Configured,
                });
            }
            (ProtocolChoice::Auto, Some(known)) => match known.era {
                Era::Modern => {
                    let version = known
                        .protocol_version
                        .filter(|v| client.config.versions.contains(v))
                        .unwrap_or(latest);
                    client.era = EraState::Modern {
                        version: version.clone(),
                        confirmed: false,
                    };
                    client.event(Event::EraDetected {
                        era: Era::Modern,
                        version,
                        evidence: EraEvidence::Cached,
                    });
                }
                Era::Legacy => {
                    client.era = EraState::Legacy;
                    client.legacy_evidence = Some(EraEvidence::Cached);
                }
            },
            (ProtocolChoice::Auto, None) => {}
        }
        client
    }

    /// The configuration.
    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// The era and version in use, when known: keep it (e.g. in an [`era::EraCache`]) and give
    /// it back as [`ClientConfig::known_era`] next time.
    pub fn era(&self) -> Option<era::CachedEra> {
        match &self.era {
            EraState::Unknown => None,
            EraState::Modern { version, .. } => Some(era::CachedEra {
                era: Era::Modern,
                protocol_version: Some(version.clone()),
            }),
            EraState::Legacy => Some(era::CachedEra {
                era: Era::Legacy,
                protocol_version: self.legacy.negotiated().map(|n| n.protocol_version.clone()),
            }),
        }
    }

    /// The `x-mcp-header` annotations of `tool` from the latest `tools/list`, if listed.
    pub fn tool_headers(&self, tool: &str) -> Option<&ToolHeaders> {
        self.tools.get(tool)
    }

    /// How many operations have not ended.
    pub fn active_ops(&self) -> usize {
        self.ops.values().filter(|o| o.internal.is_none()).count()
    }

    // -----------------------------------------------------------------------------------------
    // Host operations.

    /// Starts `operation`. Its outcome arrives as [`Event::Result`], [`Event::Failed`] or
    /// [`Event::Cancelled`] (possibly at once, e.g. from the cache).
    pub fn start(&mut self, now: Instant, operation: Operation, options: OpOptions) -> OpId {
        let op_id = OpId(self.next_op);
        self.next_op += 1;
        let progress_token = options.progress.then(|| self.ids.next_id());
        let op = Op {
            declared: self.config.capabilities.clone(),
            versions: VersionNegotiation::new(
                &self
                    .config
                    .versions
                    .iter()
                    .map(String::as_str)
                    .collect::<Vec<_>>(),
            ),
            operation,
            options,
            internal: None,
            state: OpState::Queued,
            header_refresh_used: false,
            mrtr: None,
            retry_params: None,
            ticket: None,
            progress_token,
            headers: None,
            sent_legacy: false,
        };
        self.ops.insert(op_id, op);
        self.dispatch(now, op_id);
        self.pump(now);
        op_id
    }

    /// `server/discover`.
    pub fn discover(&mut self, now: Instant) -> OpId {
        self.start(now, Operation::Discover, OpOptions::default())
    }

    /// A list page.
    pub fn list(&mut self, now: Instant, kind: ListKind, cursor: Option<&str>) -> OpId {
        let operation = Operation::List {
            kind,
            cursor: cursor.map(str::to_owned),
        };
        self.start(now, operation, OpOptions::default())
    }

    /// `tools/call`.
    pub fn call_tool(
        &mut self,
        now: Instant,
        name: &str,
        arguments: JsonObject,
        options: OpOptions,
    ) -> OpId {
        let operation = Operation::CallTool {
            name: name.to_owned(),
            arguments,
        };
        self.start(now, operation, options)
    }

    /// The host cancels `op`. Emits [`Event::Cancelled`] (and the cancellation on the wire).
    pub fn cancel(&mut self, now: Instant, op_id: OpId) -> Result<(), UsageError> {
        let op = self.ops.get(&op_id).ok_or(UsageError::UnknownOp)?;
        if op.internal.is_some() {
            return Err(UsageError::UnknownOp);
        }
        if let OpState::Sent { req } = op.state {
            self.supersede(now, req);
        }
        self.ops.remove(&op_id);
        self.event(Event::Cancelled { op: op_id });
        self.pump(now);
        Ok(())
    }

    /// The host answers the input request `key` of `op`. When every key of the round is
    /// answered, the retry goes out with a new id.
    pub fn answer_input(
        &mut self,
        now: Instant,
        op_id: OpId,
        key: &str,
        answer: InputAnswer,
    ) -> Result<(), UsageError> {
        if let Some(pending) = self.legacy_inputs.get_mut(&op_id) {
            if let Some(i) = pending.iter().position(|(k, _, _)| k == key) {
                let InputAnswer::Elicitation(a) = &answer else {
                    return Err(UsageError::Answer(MrtrError::AnswerKindMismatch {
                        key: key.to_owned(),
                        expected: "an elicitation",
                    }));
                };
                let result = pending[i].2.answer(a).map_err(|source| {
                    UsageError::Answer(MrtrError::Answer {
                        key: key.to_owned(),
                        source,
                    })
                })?;
                let (_, id, _) = pending.remove(i);
                let id = serde_json::to_string(&id).unwrap_or_else(|_| "null".to_owned());
                self.answer_server(format!(
                    "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{result}}}"
                ));
                self.pump(now);
                return Ok(());
            }
        }
        let op = self.ops.get_mut(&op_id).ok_or(UsageError::UnknownOp)?;
        if !matches!(op.state, OpState::AwaitingInput) {
            return Err(UsageError::NotAwaitingInput);
        }
        let round = op.mrtr.as_mut().ok_or(UsageError::NotAwaitingInput)?;
        round.answer(key, answer).map_err(UsageError::Answer)?;
        if round.unanswered().is_empty() {
            self.send_mrtr_retry(now, op_id);
            self.pump(now);
        }
        Ok(())
    }

    /// Subscribes to `filter`'s kinds: a `subscriptions/listen` stream in the modern era; in the
    /// legacy era, the session's GET stream (HTTP) or stdout (stdio) for list changes and
    /// `resources/subscribe` for single resources, with the same events (the kinds the server's
    /// capabilities do not offer are reported as dropped in the acknowledgment).
    ///
    /// With the era not known yet, the subscription is held and the era is learned first, the
    /// way a first operation learns it (a `server/discover` probe; a legacy server then gets
    /// its `initialize` and session): it then opens in that era. A legacy era whose session is
    /// not open yet holds it the same way until the handshake is done. When the era cannot be
    /// learned, it ends with [`subscription::EndReason::NotOpened`].
    pub fn subscribe(
        &mut self,
        now: Instant,
        filter: SubscriptionFilter,
    ) -> Result<SubscriptionHandle, UsageError> {
        let version = match &self.era {
            EraState::Modern { version, .. } => version.clone(),
            EraState::Legacy if self.legacy.negotiated().is_some() => {
                let sub = self.legacy_subscribe(None, filter)?;
                self.pump(now);
                return Ok(sub);
            }
            EraState::Legacy | EraState::Unknown => return self.hold_subscription(now, filter),
        };
        let meta = RequestMeta::new(version, self.config.capabilities.clone())
            .with_client_info(self.config.client_info.clone())
            .to_object();
        let sub = self
            .subs
            .listen(now, filter, meta, &mut self.ids)
            .map_err(UsageError::Subscription)?;
        self.pump(now);
        Ok(sub)
    }

    /// Ends a subscription.
    pub fn unsubscribe(&mut self, now: Instant, sub: SubscriptionHandle) -> Result<(), UsageError> {
        if let Some(i) = self.held_subs.iter().position(|(h, _)| *h == sub) {
            self.held_subs.remove(i);
            self.event(Event::Subscription(subscription::Event::Ended {
                sub,
                reason: subscription::EndReason::ClosedByHost,
            }));
            return Ok(());
        }
        if self.legacy_unsubscribe(sub) {
            return Ok(());
        }
        self.subs
            .close(now, sub)
            .map_err(UsageError::Subscription)?;
        self.pump(now);
        Ok(())
    }

    // -----------------------------------------------------------------------------------------
    // Outputs.

    /// The next output, or `None` when there is nothing to do until the next input or timeout.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.outputs.pop_front()
    }

    /// The next instant [`Client::handle_timeout`] must be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let a = self.requests.poll_timeout().map(|t| t.at);
        let b = self.subs.poll_timeout().map(|t| t.at);
        let c = self.resumes.iter().filter_map(|r| r.at).min();
        [a, b, c, self.opening.1].into_iter().flatten().min()
    }

    // -----------------------------------------------------------------------------------------
    // Inputs.

    /// Time passed. Calling it early or twice is harmless.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.requests.handle_timeout(now, &mut self.ids);
        self.subs.handle_timeout(now, &mut self.ids);
        self.fire_resumes(now);
        if self.opening.1.is_some_and(|until| until <= now) {
            self.session_opened(now);
        }
        self.pump(now);
    }

    /// HTTP: the head of `stream`'s response arrived (`wall` reads `Retry-After` dates).
    pub fn handle_response_head(
        &mut self,
        now: Instant,
        wall: SystemTime,
        stream: StreamId,
        head: ResponseHead,
    ) -> Result<(), UsageError> {
        if self.config.transport != Transport::Http {
            return Err(UsageError::WrongTransport);
        }
        let max = self.config.max_body_bytes;
        self.opening_answered(now, stream);
        let Some(s) = self.streams.get_mut(&stream) else {
            return Ok(()); // closed by us meanwhile
        };
        let content_type = head
            .headers
            .get("content-type")
            .unwrap_or("")
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        s.body = if !(200..300).contains(&head.status) {
            Body::Error(Vec::new())
        } else if content_type == "text/event-stream" {
            Body::Sse(Box::new(SseParser::with_max_event_size(max)))
        } else if head.status == 202 || head.status == 204 {
            Body::Empty
        } else {
            Body::Json(Vec::new())
        };
        s.retry_after = backoff::retry_after_from_headers(
            &head.headers,
            wall,
            self.config.call_options.backoff.max,
        );
        s.head = Some(head);
        self.pump(now);
        Ok(())
    }

    /// HTTP: bytes of `stream`'s response body.
    pub fn handle_response_data(
        &mut self,
        now: Instant,
        stream: StreamId,
        data: &[u8],
    ) -> Result<(), UsageError> {
        if self.config.transport != Transport::Http {
            return Err(UsageError::WrongTransport);
        }
        let max = self.config.max_body_bytes;
        let mut messages = Vec::new();
        let mut too_large = false;
        let Some(s) = self.streams.get_mut(&stream) else {
            return Ok(());
        };
        match &mut s.body {
            Body::Json(buf) | Body::Error(buf) => {
                if buf.len().saturating_add(data.len()) > max {
                    too_large = true;
                } else {
                    buf.extend_from_slice(data);
                }
            }
            Body::Sse(parser) => {
                parser.push(data);
                drain_sse(parser, &mut messages);
            }
            Body::Empty | Body::TooLarge => {}
        }
        let owner = s.owner;
        if too_large {
            s.body = Body::TooLarge;
            self.outputs.push_back(Output::CloseStream(stream));
            self.stream_failed(now, stream, None);
        }
        if let Some(h) = self.streams.get(&stream).and_then(|s| s.head.as_ref()) {
            self.current_headers = h.headers.clone();
        }
        for m in messages {
            self.route_stream_message(now, owner, &m);
        }
        self.pump(now);
        Ok(())
    }

    /// HTTP: `stream`'s response ended (the body is complete).
    pub fn handle_response_end(
        &mut self,
        now: Instant,
        stream: StreamId,
    ) -> Result<(), UsageError> {
        if self.config.transport != Transport::Http {
            return Err(UsageError::WrongTransport);
        }
        let Some(mut s) = self.streams.remove(&stream) else {
            return Ok(());
        };
        let status = s.head.as_ref().map_or(0, |h| h.status);
        if let Some(h) = &s.head {
            self.current_headers = h.headers.clone();
        }
        match std::mem::replace(&mut s.body, Body::Empty) {
            Body::Json(buf) => {
                let text = String::from_utf8_lossy(&buf);
                let text = text.trim_start_matches('\u{feff}');
                if !text.trim().is_empty() {
                    self.route_stream_message(now, s.owner, text);
                }
                self.owner_end(now, s.owner);
            }
            Body::Sse(mut parser) => {
                let mut messages = Vec::new();
                if let Ok(Some(ev)) = parser.finish() {
                    if is_message_event(&ev.event) && !ev.data.is_empty() {
                        messages.push(ev.data);
                    }
                }
                for m in messages {
                    self.route_stream_message(now, s.owner, &m);
                }
                let last = parser.last_event_id().map(str::to_owned);
                if !self.schedule_resume(now, s.owner, last, parser.retry()) {
                    self.owner_end(now, s.owner);
                }
            }
            Body::Empty => {
                if s.head.is_none() {
                    // The stream ended before any head: a transport failure.
                    self.owner_failed(now, s.owner, None, None);
                } else {
                    self.owner_end(now, s.owner);
                }
            }
            Body::Error(buf) => self.http_error(now, &s, status, &buf),
            Body::TooLarge => {}
        }
        self.pump(now);
        Ok(())
    }

    /// HTTP: `stream` failed without a complete response (connect error, reset, read error).
    pub fn handle_transport_failed(
        &mut self,
        now: Instant,
        stream: StreamId,
    ) -> Result<(), UsageError> {
        if self.config.transport != Transport::Http {
            return Err(UsageError::WrongTransport);
        }
        self.stream_failed(now, stream, None);
        self.pump(now);
        Ok(())
    }

    /// stdio: one line the server wrote.
    pub fn handle_stdio_line(&mut self, now: Instant, line: &str) -> Result<(), UsageError> {
        if self.config.transport != Transport::Stdio {
            return Err(UsageError::WrongTransport);
        }
        let line = line.trim_end_matches(['\r', '\n']);
        if line.trim().is_empty() {
            return Ok(());
        }
        match Message::parse(line) {
            Err(_) => self.event(Event::Ignored {
                reason: "a stdio line that is not a JSON-RPC message",
            }),
            Ok(Message::Request { id, method, params }) => {
                // stdio has no per-request stream: the oldest operation in flight asked.
                let op = self.oldest_in_flight();
                self.server_request(now, op, &id, &method, params.map(|p| p.get()));
            }
            Ok(parsed) => {
                if self.requests.channel_message(now, line, parsed) == Routed::NotMine
                    && self.subs.handle_channel_message(now, line) == Routed::NotMine
                {
                    self.current_headers = Headers::new();
                    self.unrouted(line);
                }
            }
        }
        self.pump(now);
        Ok(())
    }

    /// stdio: the server's process exited (or its pipes closed).
    pub fn handle_stdio_closed(&mut self, now: Instant) -> Result<(), UsageError> {
        if self.config.transport != Transport::Stdio {
            return Err(UsageError::WrongTransport);
        }
        self.requests.handle_channel_closed(now);
        self.subs.handle_channel_closed(now);
        if matches!(self.era, EraState::Legacy) {
            // A new process has no session.
            self.legacy = LegacySession::new(
                self.config.client_info.clone(),
                legacy_capabilities(&self.config),
            );
        }
        self.pump(now);
        Ok(())
    }

    /// stdio: the server's process is running again (restarted by the driver).
    pub fn handle_stdio_open(&mut self, now: Instant) -> Result<(), UsageError> {
        if self.config.transport != Transport::Stdio {
            return Err(UsageError::WrongTransport);
        }
        self.requests.handle_channel_open(now);
        self.subs.handle_channel_open(now);
        if matches!(self.era, EraState::Legacy) && self.handshake.is_none() {
            self.start_handshake(now);
        }
        self.pump(now);
        Ok(())
    }

    // -----------------------------------------------------------------------------------------
    // Dispatching operations.

    fn latest_version(&self) -> String {
        self.config
            .versions
            .iter()
            .max()
            .cloned()
            .unwrap_or_else(|| LATEST_PROTOCOL_VERSION.to_owned())
    }

    /// Sends `op` if the era allows it now; otherwise leaves it queued (and starts what it
    /// waits for).
    fn dispatch(&mut self, now: Instant, op_id: OpId) {
        if self.serve_fresh(now, op_id)
            || self.list_tools_first(now, op_id)
            || self.learn_era_first(now, op_id)
        {
            return;
        }
        match &self.era {
            EraState::Unknown => match self.config.transport {
                Transport::Http => {
                    let version = self.latest_version();
                    self.send_modern(now, op_id, &version);
                }
                Transport::Stdio => {
                    if !self
                        .ops
                        .values()
                        .any(|o| o.internal == Some(Internal::Probe))
                    {
                        self.start_probe(now);
                    }
                }
            },
            EraState::Modern { version, .. } => {
                let version = version.clone();
                self.send_modern(now, op_id, &version);
            }
            EraState::Legacy => {
                if self.legacy.phase() == legacy::Phase::Ready {
                    self.send_legacy(now, op_id);
                } else if self.handshake.is_none() {
                    self.start_handshake(now);
                }
            }
        }
    }

    /// A call of a tool whose `x-mcp-header` annotations are not known, on Streamable HTTP
    /// outside the legacy era, waits for a `tools/list` (its pages followed until the tool is
    /// found): the call then carries its `Mcp-Param-*` headers on the first try, and a tool
    /// excluded for invalid annotations is refused without being called
    /// (`basic/transports/streamable-http.mdx`, "Custom Headers from Tool Parameters").
    /// Once a listing was seen, an unlisted tool is called without one.
    fn list_tools_first(&mut self, now: Instant, op_id: OpId) -> bool {
        if !self.config.list_tools_before_call
            || self.config.transport != Transport::Http
            || self.tools_listed
            || matches!(self.era, EraState::Legacy)
        {
            return false;
        }
        let Some(op) = self.ops.get(&op_id) else {
            return false;
        };
        let Operation::CallTool { name, .. } = &op.operation else {
            return false;
        };
        if op.internal.is_some()
            || op.retry_params.is_some()
            || self.tools.contains_key(name)
            || self.excluded.contains_key(name)
        {
            return false;
        }
        let operation = Operation::List {
            kind: ListKind::Tools,
            cursor: None,
        };
        let internal = Internal::ToolsPrefetch {
            waiter: op_id,
            pages: 1,
        };
        self.start_internal(now, operation, internal);
        true
    }

    /// `ping` exists only in the legacy era. With the era unknown on Streamable HTTP (where
    /// operations otherwise go out in the modern era, which has no ping), the era is learned
    /// first with a `server/discover` probe and the ping waits for its verdict: sent in the
    /// legacy session, or refused as [`OpError::Unsupported`] by a modern server. (stdio
    /// probes before anything anyway.)
    fn learn_era_first(&mut self, now: Instant, op_id: OpId) -> bool {
        if self.config.transport != Transport::Http || !matches!(self.era, EraState::Unknown) {
            return false;
        }
        let Some(op) = self.ops.get(&op_id) else {
            return false;
        };
        if op.internal.is_some() || op.operation != Operation::Ping {
            return false;
        }
        if !self
            .ops
            .values()
            .any(|o| o.internal == Some(Internal::Probe))
        {
            self.start_probe(now);
        }
        true
    }

    /// Holds a subscription until the era is learned (see [`Client::subscribe`]) and starts
    /// learning it: the probe when the era is unknown, the handshake in the legacy era.
    fn hold_subscription(
        &mut self,
        now: Instant,
        filter: SubscriptionFilter,
    ) -> Result<SubscriptionHandle, UsageError> {
        if filter.is_empty() {
            return Err(UsageError::Subscription(
                subscription::UsageError::EmptyFilter,
            ));
        }
        let sub = self.subs.reserve();
        self.held_subs.push((sub, filter));
        match self.era {
            EraState::Unknown => {
                if !self
                    .ops
                    .values()
                    .any(|o| o.internal == Some(Internal::Probe))
                {
                    self.start_probe(now);
                }
            }
            EraState::Legacy => {
                if self.handshake.is_none() && self.legacy.phase() != legacy::Phase::Ready {
                    self.start_handshake(now);
                }
            }
            EraState::Modern { .. } => {}
        }
        self.pump(now);
        Ok(sub)
    }

    /// Opens the held subscriptions once their era is there (modern; legacy with its session).
    fn open_held_subs(&mut self, now: Instant) {
        if self.held_subs.is_empty() {
            return;
        }
        let version = match &self.era {
            EraState::Modern { version, .. } => Some(version.clone()),
            EraState::Legacy if self.legacy.negotiated().is_some() => None,
            _ => return,
        };
        for (sub, filter) in std::mem::take(&mut self.held_subs) {
            let opened = match &version {
                Some(version) => {
                    let meta = RequestMeta::new(version.clone(), self.config.capabilities.clone())
                        .with_client_info(self.config.client_info.clone())
                        .to_object();
                    self.subs
                        .listen_as(now, sub, filter, meta, &mut self.ids)
                        .map_err(UsageError::Subscription)
                }
                None => self.legacy_subscribe(Some(sub), filter).map(|_| ()),
            };
            if let Err(e) = opened {
                self.event(Event::Subscription(subscription::Event::Ended {
                    sub,
                    reason: subscription::EndReason::NotOpened(e.to_string()),
                }));
            }
        }
    }

    /// Sends every queued host operation (after the era became known or the session ready).
    fn dispatch_queued(&mut self, now: Instant) {
        self.open_held_subs(now);
        let queued: Vec<OpId> = self
            .ops
            .iter()
            .filter(|(_, o)| o.internal.is_none() && matches!(o.state, OpState::Queued))
            .map(|(&id, _)| id)
            .collect();
        for op_id in queued {
            if matches!(self.era, EraState::Legacy) && self.legacy.phase() != legacy::Phase::Ready {
                return;
            }
            self.dispatch(now, op_id);
        }
    }

    #[cfg(test)]
    fn meta_for(&self, op: &Op, version: &str) -> RequestMeta {
        let mut meta = RequestMeta::new(version, op.declared.clone())
            .with_client_info(self.config.client_info.clone());
        if let Some(level) = op.options.log_level {
            meta = meta.with_log_level(level);
        }
        if let Some(token) = &op.progress_token {
            meta = meta.with_progress_token(token.clone());
        }
        if let Some((parent, state)) = &op.options.trace {
            meta = meta.with_trace_context(parent.clone(), state.clone());
        }
        meta
    }

    /// Sends `op` in the modern era with `version`.
    fn send_modern(&mut self, now: Instant, op_id: OpId, version: &str) {
        let Some(op) = self.ops.get(&op_id) else {
            return;
        };
        if op.operation == Operation::Ping {
            self.fail(
                op_id,
                OpError::Unsupported {
                    operation: "ping",
                    era: Era::Modern,
                },
            );
            return;
        }
        let method = op.operation.method();
        // A tool excluded from the listing is not called.
        if let Operation::CallTool { name, .. } = &op.operation {
            if let Some(reason) = self.excluded.get(name) {
                let error = OpError::ToolExcluded {
                    tool: name.clone(),
                    reason: reason.clone(),
                };
                self.fail(op_id, error);
                return;
            }
        }
        let eligible = mrtr::input_required_allowed(method);
        let (params, members) = match &op.retry_params {
            Some(retry) => {
                let meta = match self.meta_texts.request_meta_text(op, version) {
                    Ok(m) => m,
                    Err(e) => return self.fail(op_id, OpError::Protocol(e.to_string())),
                };
                match mrtr::splice_meta(retry, &meta) {
                    Ok(p) => (Err(p), None),
                    Err(e) => {
                        self.fail(op_id, OpError::Mrtr(e));
                        return;
                    }
                }
            }
            // Each member written once, from the operation itself (no copy of the arguments).
            None => match fresh_params(&mut self.meta_texts, op, version, eligible) {
                Ok((text, members)) => (Ok(text), members),
                Err(e) => {
                    self.fail(op_id, OpError::Protocol(e.to_string()));
                    return;
                }
            },
        };
        let id = self.ids.next_id();
        // MRTR: the round tracker starts with the original request.
        let mut mrtr_round = None;
        if let Some(members) = members {
            let round = MrtrRound::from_members(
                id.clone(),
                method,
                members,
                InputCapabilities::from(&op.declared),
            );
            mrtr_round = Some(round.with_max_rounds(self.config.max_mrtr_rounds));
        }
        let (params, fresh_version) = match params {
            Ok(text) => (text, Some(version)),
            Err(text) => match checked_params(text) {
                Ok(text) => (text, None),
                Err(e) => return self.fail(op_id, e),
            },
        };
        self.start_attempt(
            now,
            op_id,
            method,
            params,
            fresh_version,
            id,
            false,
            mrtr_round,
        );
    }

    /// Sends `op` in the legacy session.
    fn send_legacy(&mut self, now: Instant, op_id: OpId) {
        let Some(op) = self.ops.get(&op_id) else {
            return;
        };
        if op.operation == Operation::Discover {
            // The legacy era has no server/discover: its answer is the initialize result.
            let result = self.legacy_discover_result();
            self.ops.remove(&op_id);
            self.event(Event::Result {
                op: op_id,
                result,
                is_error: false,
                source: ResultSource::Handshake,
            });
            return;
        }
        let method = op.operation.method();
        let mut params = op.operation.params();
        if let Some(token) = &op.progress_token {
            let mut meta = JsonObject::new();
            if let Ok(v) = serde_json::to_value(token) {
                meta.insert(super::meta::PROGRESS_TOKEN_KEY.to_owned(), v);
            }
            params.insert("_meta".to_owned(), Value::Object(meta));
        }
        let params = Value::Object(params).to_string();
        let id = self.ids.next_id();
        self.start_attempt(now, op_id, method, params, None, id, true, None);
    }

    /// The shape of a `DiscoverResult` built from the legacy `initialize` result.
    fn legacy_discover_result(&self) -> String {
        let mut m = JsonObject::new();
        if let Some(n) = self.legacy.negotiated() {
            m.insert(
                "supportedVersions".to_owned(),
                Value::Array(vec![Value::String(n.protocol_version.clone())]),
            );
            m.insert(
                "capabilities".to_owned(),
                serde_json::to_value(&n.capabilities).unwrap_or(Value::Object(JsonObject::new())),
            );
            if let Some(info) = &n.server_info {
                if let Ok(v) = serde_json::to_value(info) {
                    m.insert("serverInfo".to_owned(), v);
                }
            }
            if let Some(i) = &n.instructions {
                m.insert("instructions".to_owned(), Value::String(i.clone()));
            }
        }
        Value::Object(m).to_string()
    }

    /// Hands one attempt of `op` to the request tracker under `id`. `fresh_version` is the
    /// protocol version in the `_meta` of params built from the operation itself
    /// ([`fresh_params`]): the headers are then read from the operation instead of the params
    /// text.
    #[allow(clippy::too_many_arguments)]
    fn start_attempt(
        &mut self,
        now: Instant,
        op_id: OpId,
        method: &'static str,
        params: String,
        fresh_version: Option<&str>,
        id: Id,
        legacy: bool,
        mrtr_round: Option<MrtrRound>,
    ) {
        let Some(op) = self.ops.get(&op_id) else {
            return;
        };
        // Headers, mirrored from the body (modern HTTP only; legacy ones come from the session).
        let mut headers = None;
        if self.config.transport == Transport::Http && !legacy {
            let tool = match &op.operation {
                Operation::CallTool { name, .. } => self.tools.get(name),
                _ => None,
            };
            let built = match fresh_version {
                Some(version) => {
                    headers::headers_for_fields(&op.operation.header_fields(version), tool)
                }
                None => {
                    let body = jsonrpc_request_value(&id, method, &params);
                    headers::request_headers_for(&body, tool)
                }
            };
            match built {
                Ok(h) => headers = Some(h),
                Err(e) => {
                    self.fail(op_id, OpError::Headers(e));
                    return;
                }
            }
        }
        // A cache ticket for every attempt whose params are cacheable (never an MRTR retry);
        // the params of other methods are not read.
        let ticket = CacheableMethod::from_method(method)
            .and_then(|_| serde_json::from_str::<Value>(&params).ok())
            .and_then(|p| RequestKey::from_request(method, Some(&p)).ok())
            .map(|k| self.cache.begin_fetch(k));
        let options = op
            .options
            .call
            .clone()
            .unwrap_or_else(|| self.config.call_options.clone());
        let options = match op.internal {
            Some(Internal::Probe) => CallOptions {
                timeout: self.config.probe_timeout,
                max_resends: 0,
                ..options
            },
            _ => options,
        };
        // The params carry this token in `_meta` (`meta_for`, `send_legacy`).
        let progress_token = op.progress_token.clone();
        let mut ids = Preset {
            first: Some(id),
            rest: &mut self.ids,
        };
        match self
            .requests
            .start_raw(now, method, Some(params), progress_token, options, &mut ids)
        {
            Ok(req) => {
                self.by_req.insert(req, op_id);
                if let Some(op) = self.ops.get_mut(&op_id) {
                    op.state = OpState::Sent { req };
                    op.headers = headers;
                    op.ticket = ticket;
                    op.sent_legacy = legacy;
                    if mrtr_round.is_some() {
                        op.mrtr = mrtr_round;
                    }
                }
            }
            Err(e) => self.fail(op_id, OpError::Protocol(e.to_string())),
        }
    }

    fn start_internal(&mut self, now: Instant, operation: Operation, internal: Internal) -> OpId {
        let op_id = OpId(self.next_op);
        self.next_op += 1;
        let op = Op {
            declared: self.config.capabilities.clone(),
            versions: VersionNegotiation::new(&[]),
            operation,
            options: OpOptions::default(),
            internal: Some(internal),
            state: OpState::Queued,
            header_refresh_used: true,
            mrtr: None,
            retry_params: None,
            ticket: None,
            progress_token: None,
            headers: None,
            sent_legacy: false,
        };
        self.ops.insert(op_id, op);
        match internal {
            Internal::Probe => {
                let version = self.latest_version();
                self.send_modern(now, op_id, &version);
            }
            Internal::ToolsRefresh { .. } | Internal::ToolsPrefetch { .. } => {
                let version = match &self.era {
                    EraState::Modern { version, .. } => version.clone(),
                    _ => self.latest_version(),
                };
                self.send_modern(now, op_id, &version);
            }
            Internal::Initialize => {}
        }
        op_id
    }

    fn start_probe(&mut self, now: Instant) {
        self.start_internal(now, Operation::Discover, Internal::Probe);
    }

    /// Starts (or restarts) the legacy `initialize` handshake.
    fn start_handshake(&mut self, now: Instant) {
        let op_id = self.start_internal(now, Operation::Ping, Internal::Initialize);
        self.handshake = Some(op_id);
        let id = self.ids.next_id();
        let outgoing = self.legacy.initialize(id.clone());
        let params = serde_json::from_str::<Value>(&outgoing.body)
            .ok()
            .and_then(|v| v.get("params").map(Value::to_string))
            .unwrap_or_else(|| "{}".to_owned());
        let mut ids = Preset {
            first: Some(id),
            rest: &mut self.ids,
        };
        let options = CallOptions {
            max_resends: 0,
            ..self.config.call_options.clone()
        };
        match self
            .requests
            .start(now, legacy::INITIALIZE, Some(&params), options, &mut ids)
        {
            Ok(req) => {
                self.by_req.insert(req, op_id);
                if let Some(op) = self.ops.get_mut(&op_id) {
                    op.state = OpState::Sent { req };
                    op.headers = Some(outgoing.headers);
                    op.sent_legacy = true;
                }
            }
            Err(e) => {
                self.ops.remove(&op_id);
                self.handshake = None;
                self.fail_queued(&OpError::Protocol(e.to_string()));
            }
        }
    }

    /// Builds and sends the MRTR retry of `op` (every key answered).
    fn send_mrtr_retry(&mut self, now: Instant, op_id: OpId) {
        let version = match &self.era {
            EraState::Modern { version, .. } => version.clone(),
            _ => self.latest_version(),
        };
        let Some(op) = self.ops.get(&op_id) else {
            return;
        };
        let meta = match self.meta_texts.request_meta_text(op, &version) {
            Ok(m) => m,
            Err(e) => return self.fail(op_id, OpError::Protocol(e.to_string())),
        };
        let id = self.ids.next_id();
        let Some(op) = self.ops.get_mut(&op_id) else {
            return;
        };
        let method = op.operation.method();
        let built = match op.mrtr.as_mut() {
            Some(round) => round.build_retry(id.clone(), Some(&meta)),
            None => return,
        };
        match built {
            Ok(retry) => {
                let params = retry.params_json().to_owned();
                op.retry_params = Some(params.clone());
                match checked_params(params) {
                    Ok(text) => self.start_attempt(now, op_id, method, text, None, id, false, None),
                    Err(e) => self.fail(op_id, e),
                }
            }
            Err(e) => self.fail(op_id, OpError::Mrtr(e)),
        }
    }

    /// Drops `req` (the client's own decision: fallback, restart, host cancel): cancels it on
    /// the wire; its events are not reported.
    fn supersede(&mut self, now: Instant, req: RequestHandle) {
        self.forget_held(req);
        if self.requests.cancel(now, req, None).is_ok() {
            self.superseded.push(req);
            if self.superseded.len() > 1024 {
                self.superseded.remove(0);
            }
        }
        self.by_req.remove(&req);
    }

    /// `req` is dropped while held (never written): the tracker's cancellation of its id must
    /// not reach the wire.
    fn forget_held(&mut self, req: RequestHandle) {
        let transport = self.config.transport;
        let unsent = &mut self.unsent;
        self.held.retain(|(r, id, _)| {
            if *r != req {
                return true;
            }
            if transport == Transport::Stdio {
                unsent.push(id.clone());
            }
            false
        });
    }

    /// Sends `op` again from the start of its current round (after a fix).
    fn restart(&mut self, now: Instant, op_id: OpId, reason: RetryReason) {
        let host_op = self.ops.get(&op_id).is_some_and(|o| o.internal.is_none());
        if let Some(op) = self.ops.get_mut(&op_id) {
            op.state = OpState::Queued;
        }
        if host_op {
            self.event(Event::Retrying { op: op_id, reason });
        }
        self.dispatch(now, op_id);
    }

    fn fail(&mut self, op_id: OpId, error: OpError) {
        let Some(op) = self.ops.remove(&op_id) else {
            return;
        };
        if let OpState::Sent { req } = op.state {
            self.by_req.remove(&req);
        }
        match op.internal {
            None => self.event(Event::Failed { op: op_id, error }),
            Some(Internal::ToolsRefresh { waiter, .. }) => {
                let message = match error {
                    OpError::Server(e) => e.message,
                    other => other.to_string(),
                };
                self.fail(waiter, OpError::HeaderMismatch { message });
            }
            Some(Internal::ToolsPrefetch { waiter, .. }) => {
                // Nothing learned: the call goes out without the listing (at the next pump).
                self.tools_listed = true;
                self.released.push(waiter);
            }
            Some(Internal::Probe | Internal::Initialize) => {}
        }
    }

    fn fail_queued(&mut self, error: &OpError) {
        for (sub, _) in std::mem::take(&mut self.held_subs) {
            self.event(Event::Subscription(subscription::Event::Ended {
                sub,
                reason: subscription::EndReason::NotOpened(error.to_string()),
            }));
        }
        let queued: Vec<OpId> = self
            .ops
            .iter()
            .filter(|(_, o)| o.internal.is_none() && matches!(o.state, OpState::Queued))
            .map(|(&id, _)| id)
            .collect();
        for op_id in queued {
            self.fail(op_id, error.clone());
        }
    }

    fn event(&mut self, e: Event) {
        if let Event::Result { op, .. } | Event::Failed { op, .. } | Event::Cancelled { op } = &e {
            self.legacy_inputs.remove(op);
        }
        self.outputs.push_back(Output::Event(e));
    }

    fn set_era(&mut self, era: EraState, evidence: EraEvidence) {
        let (e, version) = match &era {
            EraState::Modern { version, .. } => (Era::Modern, version.clone()),
            EraState::Legacy => (Era::Legacy, LEGACY_PROTOCOL_VERSION.to_owned()),
            EraState::Unknown => {
                self.era = era;
                return;
            }
        };
        let changed = !matches!(
            (&self.era, &era),
            (EraState::Modern { version: a, .. }, EraState::Modern { version: b, .. }) if a == b
        ) && !matches!((&self.era, &era), (EraState::Legacy, EraState::Legacy));
        if changed && !matches!(self.era, EraState::Unknown) {
            // What was learned in another era or version does not carry over.
            self.cache.clear();
            self.tools.clear();
            self.excluded.clear();
            self.tools_listed = false;
        }
        self.era = era;
        if changed && e == Era::Modern {
            self.event(Event::EraDetected {
                era: e,
                version,
                evidence,
            });
        } else if changed {
            // The legacy version is reported once the handshake settles it.
            self.legacy_evidence = Some(evidence);
        }
    }

    /// A host operation whose fresh cache entry answers it: reported, and no request is made.
    fn serve_fresh(&mut self, now: Instant, op_id: OpId) -> bool {
        let Some(op) = self.ops.get(&op_id) else {
            return false;
        };
        if op.internal.is_some()
            || op.options.cache != CachePolicy::Use
            || op.retry_params.is_some()
            || !op.operation.cacheable()
            || (matches!(self.era, EraState::Legacy) && op.operation == Operation::Discover)
        {
            return false;
        }
        let Ok(key) = cache_key(&op.operation) else {
            return false;
        };
        let Lookup::Fresh(hit) = self.cache.lookup(now, &key, &self.config.auth_context) else {
            return false;
        };
        self.ops.remove(&op_id);
        self.event(Event::Result {
            op: op_id,
            result: hit.result_json().to_owned(),
            is_error: false,
            source: ResultSource::Cache,
        });
        true
    }

    /// Ends the client: cancels every operation and subscription, and ends a legacy HTTP
    /// session with `DELETE` (`2025-11-25` transports: "clients that no longer need a
    /// particular session SHOULD send an HTTP DELETE").
    pub fn shutdown(&mut self, now: Instant) {
        let ops: Vec<OpId> = self.ops.keys().copied().collect();
        for op_id in ops {
            if let Some(op) = self.ops.remove(&op_id) {
                if let OpState::Sent { req } = op.state {
                    self.supersede(now, req);
                }
                if op.internal.is_none() {
                    self.event(Event::Cancelled { op: op_id });
                }
            }
        }
        // Every subscription, not only those with an HTTP stream (stdio has none; one may be
        // waiting to reconnect).
        let subs = self.subs.handles();
        for sub in subs {
            let _ = self.subs.close(now, sub);
        }
        let legacy_subs: Vec<SubscriptionHandle> = self.legacy_subs.keys().copied().collect();
        for sub in legacy_subs {
            self.legacy_unsubscribe(sub);
        }
        self.resumes.clear();
        self.opening = (Vec::new(), None);
        if let Some(session) = self.session_stream.take() {
            self.streams.remove(&session);
            self.outputs.push_back(Output::CloseStream(session));
        }
        self.pump(now);
        if self.config.transport == Transport::Http
            && matches!(self.era, EraState::Legacy)
            && self.legacy.has_session()
        {
            if let Ok(headers) = self.legacy.session_headers() {
                let stream = self.new_stream(Owner::Fire, headers.clone());
                self.outputs.push_back(Output::Http {
                    stream,
                    method: Method::Delete,
                    headers,
                    body: String::new(),
                });
            }
        }
        self.handshake = None;
        self.legacy = LegacySession::new(
            self.config.client_info.clone(),
            legacy_capabilities(&self.config),
        );
    }

    // -----------------------------------------------------------------------------------------
    // Moving outputs of the parts to the driver.

    fn pump(&mut self, now: Instant) {
        loop {
            let mut progressed = false;
            while let Some(o) = self.requests.poll_output() {
                progressed = true;
                self.on_request_output(now, o);
            }
            while let Some(o) = self.subs.poll_output() {
                progressed = true;
                self.on_subscription_output(o);
            }
            for waiter in std::mem::take(&mut self.released) {
                if self
                    .ops
                    .get(&waiter)
                    .is_some_and(|o| matches!(o.state, OpState::Queued))
                {
                    progressed = true;
                    self.dispatch(now, waiter);
                }
            }
            if !progressed {
                break;
            }
        }
    }

    fn new_stream(&mut self, owner: Owner, sent: Headers) -> StreamId {
        let stream = StreamId(self.next_stream);
        self.next_stream += 1;
        self.streams.insert(
            stream,
            Stream {
                owner,
                sent,
                in_session: false,
                head: None,
                retry_after: None,
                body: Body::Empty,
            },
        );
        stream
    }

    fn transmit_request(&mut self, req: RequestHandle, body: String) {
        if self.config.transport == Transport::Stdio {
            self.outputs.push_back(Output::Stdio(body));
            return;
        }
        let op_id = self.by_req.get(&req).copied();
        let op = op_id.and_then(|id| self.ops.get(&id));
        let in_session = op.is_some_and(|op| op.sent_legacy) && op_id != self.handshake;
        let headers = match op {
            Some(op) if in_session => self
                .legacy
                .session_headers()
                .unwrap_or_else(|_| op.headers.clone().unwrap_or_default()),
            Some(op) => op.headers.clone().unwrap_or_default(),
            None => Headers::new(),
        };
        let stream = self.new_stream(Owner::Request(req), headers.clone());
        if let Some(s) = self.streams.get_mut(&stream) {
            s.in_session = in_session;
        }
        if let Some(old) = self.req_stream.insert(req, stream) {
            self.streams.remove(&old);
        }
        self.outputs.push_back(Output::Http {
            stream,
            method: Method::Post,
            headers,
            body,
        });
    }

    fn on_request_output(&mut self, now: Instant, output: request::Output) {
        match output {
            request::Output::Send { req, id, body, .. } => {
                let op_id = self.by_req.get(&req).copied();
                let waits_for_session = op_id
                    .and_then(|id| self.ops.get(&id))
                    .is_some_and(|op| op.sent_legacy)
                    && op_id != self.handshake
                    && (self.legacy.phase() != legacy::Phase::Ready || self.opening.1.is_some());
                if waits_for_session {
                    self.held.push((req, id, body));
                    if self.handshake.is_none() {
                        self.start_handshake(now);
                    }
                } else {
                    self.transmit_request(req, body);
                }
            }
            request::Output::CloseStream { req, id } => {
                // A held attempt that timed out is never sent.
                self.held.retain(|(r, i, _)| !(*r == req && *i == id));
                if let Some(stream) = self.req_stream.remove(&req) {
                    self.streams.remove(&stream);
                    self.outputs.push_back(Output::CloseStream(stream));
                }
            }
            request::Output::CancelNotice { req, body, .. } => {
                // Legacy `basic/transports.mdx`: closing the stream is not a cancellation in a
                // 2025-11-25 session; say it with `notifications/cancelled` in the session.
                let in_session = self
                    .req_stream
                    .get(&req)
                    .and_then(|s| self.streams.get(s))
                    .is_some_and(|s| s.in_session);
                if in_session {
                    if let Ok(headers) = self.legacy.session_headers() {
                        let stream = self.new_stream(Owner::Fire, headers.clone());
                        self.outputs.push_back(Output::Http {
                            stream,
                            method: Method::Post,
                            headers,
                            body,
                        });
                    }
                }
            }
            request::Output::Notify { body } => {
                // A cancellation (timeout, or the client's own drop) of an attempt that was
                // held, never written: the server never saw the id, so nothing is written.
                if let Some(id) = cancelled_request_id(&body) {
                    if let Some(i) = self.unsent.iter().position(|u| *u == id) {
                        self.unsent.swap_remove(i);
                        return;
                    }
                    let before = self.held.len();
                    self.held.retain(|(_, i, _)| *i != id);
                    if self.held.len() != before {
                        return;
                    }
                }
                self.outputs.push_back(Output::Stdio(body));
            }
            request::Output::Event(e) => self.on_request_event(now, e),
        }
    }

    fn on_subscription_output(&mut self, output: subscription::Output) {
        match output {
            subscription::Output::Send { sub, body, .. } => {
                if self.config.transport == Transport::Stdio {
                    self.outputs.push_back(Output::Stdio(body));
                    return;
                }
                let headers = headers::request_headers(&body, None).unwrap_or_default();
                let stream = self.new_stream(Owner::Listen(sub), headers.clone());
                if let Some(old) = self.sub_stream.insert(sub, stream) {
                    self.streams.remove(&old);
                }
                self.outputs.push_back(Output::Http {
                    stream,
                    method: Method::Post,
                    headers,
                    body,
                });
            }
            subscription::Output::CloseStream { sub, .. } => {
                if let Some(stream) = self.sub_stream.remove(&sub) {
                    self.streams.remove(&stream);
                    self.outputs.push_back(Output::CloseStream(stream));
                }
            }
            subscription::Output::Notify { body } => self.outputs.push_back(Output::Stdio(body)),
            subscription::Output::Event(e) => {
                match &e {
                    subscription::Event::Changed { change, .. } => self.apply_change(change),
                    subscription::Event::Refetch { targets, .. } => {
                        for t in targets {
                            self.apply_refetch(t);
                        }
                    }
                    subscription::Event::Ended { sub, .. } => {
                        if let Some(stream) = self.sub_stream.remove(sub) {
                            self.streams.remove(&stream);
                        }
                    }
                    _ => {}
                }
                self.event(Event::Subscription(e));
            }
        }
    }

    fn apply_change(&mut self, change: &Change) {
        match change {
            Change::ToolsListChanged => {
                self.cache.invalidate_list(ListKind::Tools);
                self.tools_listed = false;
            }
            Change::PromptsListChanged => {
                self.cache.invalidate_list(ListKind::Prompts);
            }
            Change::ResourcesListChanged => {
                self.cache.invalidate_list(ListKind::Resources);
                self.cache.invalidate_list(ListKind::ResourceTemplates);
            }
            Change::ResourceUpdated { uri } => {
                self.cache.invalidate_resource(uri);
            }
        }
    }

    fn apply_refetch(&mut self, target: &subscription::RefetchTarget) {
        use subscription::RefetchTarget as T;
        match target {
            T::ToolsList => {
                self.cache.invalidate_list(ListKind::Tools);
                self.tools_listed = false;
            }
            T::PromptsList => {
                self.cache.invalidate_list(ListKind::Prompts);
            }
            T::ResourcesList => {
                self.cache.invalidate_list(ListKind::Resources);
            }
            T::ResourceTemplatesList => {
                self.cache.invalidate_list(ListKind::ResourceTemplates);
            }
            T::Resource { uri } => {
                self.cache.invalidate_resource(uri);
            }
        }
    }

    fn on_request_event(&mut self, now: Instant, e: request::Event) {
        use request::Event as R;
        let req = match &e {
            R::Response { req, .. }
            | R::TimedOut { req, .. }
            | R::Cancelled { req, .. }
            | R::Failed { req, .. }
            | R::Resending { req, .. }
            | R::Progress { req, .. }
            | R::Notification { req, .. }
            | R::LateResponseIgnored { req, .. } => Some(*req),
            R::Ignored { req, .. } => *req,
        };
        if req.is_some_and(|r| self.superseded.contains(&r)) {
            if let R::Response { req, .. } = e {
                self.requests.take_result_span(req);
            }
            return;
        }
        let op_id = req.and_then(|r| self.by_req.get(&r).copied());
        match e {
            R::Response {
                req, kind, message, ..
            } => {
                self.by_req.remove(&req);
                // The tracker noted where the result sits in the message it parsed.
                let result = self
                    .requests
                    .take_result_span(req)
                    .and_then(|span| message.get(span));
                if let Some(op_id) = op_id {
                    self.on_response(now, op_id, kind, &message, result);
                }
            }
            R::TimedOut { req, max_total, .. } => {
                self.by_req.remove(&req);
                if let Some(op_id) = op_id {
                    self.on_lost(now, op_id, OpError::TimedOut { max_total }, true);
                }
            }
            R::Failed { req, reason } => {
                self.by_req.remove(&req);
                if let Some(op_id) = op_id {
                    self.on_lost(now, op_id, OpError::Transport(reason), false);
                }
            }
            R::Cancelled { req, .. } => {
                self.by_req.remove(&req);
            }
            R::Progress {
                progress,
                total,
                message,
                ..
            } => {
                if let Some(op) = op_id {
                    self.event(Event::Progress {
                        op,
                        progress,
                        total,
                        message,
                    });
                }
            }
            R::Notification {
                method, message, ..
            } => self.notification(op_id, method, message),
            R::LateResponseIgnored { .. } => self.event(Event::Ignored {
                reason: "a response to a cancelled or superseded request",
            }),
            R::Ignored { reason, .. } => self.event(Event::Ignored { reason }),
            _ => {}
        }
    }

    /// A notification not tied to a subscription: applied to the cache, shown to the host.
    fn notification(&mut self, op: Option<OpId>, method: String, message: String) {
        let params = serde_json::from_str::<Value>(&message)
            .ok()
            .and_then(|mut v| v.get_mut("params").map(Value::take));
        let _ = self.cache.on_notification(&method, params.as_ref());
        if method == "notifications/tools/list_changed" {
            self.tools_listed = false;
        }
        self.legacy_change(&method, params.as_ref());
        self.event(Event::Notification {
            op,
            method,
            message,
        });
    }

    /// An attempt ended without a response.
    fn on_lost(&mut self, now: Instant, op_id: OpId, error: OpError, timed_out: bool) {
        let Some(op) = self.ops.get(&op_id) else {
            return;
        };
        match op.internal {
            Some(Internal::Probe) => {
                self.ops.remove(&op_id);
                if timed_out {
                    self.probe_verdict(now, ProbeVerdict::Legacy(era::LegacyEvidence::TimedOut));
                } else {
                    // The transport failed: nothing learned; the waiting operations fail.
                    self.fail_queued(&error);
                }
                return;
            }
            Some(Internal::Initialize) => {
                self.ops.remove(&op_id);
                self.handshake = None;
                self.fail_held(now, &error);
                self.fail_queued(&error);
                return;
            }
            _ => {}
        }
        // A failed refetch may be answered with a stale entry, when the policy allows it; not
        // an MRTR retry: that read depended on the host's answers, which no entry reflects.
        if op.internal.is_none() && op.operation.cacheable() && op.retry_params.is_none() {
            if let Ok(key) = cache_key(&op.operation) {
                let auth = self.config.auth_context.clone();
                if let Some(hit) = self.cache.serve_stale_on_error(now, &key, &auth) {
                    self.ops.remove(&op_id);
                    self.event(Event::Result {
                        op: op_id,
                        result: hit.result_json().to_owned(),
                        is_error: false,
                        source: ResultSource::StaleAfterError,
                    });
                    return;
                }
            }
        }
        self.fail(op_id, error);
    }

    fn fail_held(&mut self, now: Instant, error: &OpError) {
        let held: Vec<RequestHandle> = self.held.iter().map(|(r, _, _)| *r).collect();
        for req in held {
            let op_id = self.by_req.get(&req).copied();
            // Ends the attempt in the tracker too (its timer), with nothing written.
            self.supersede(now, req);
            if let Some(op_id) = op_id {
                if let Some(op) = self.ops.get_mut(&op_id) {
                    op.state = OpState::Queued;
                }
                self.fail(op_id, error.clone());
            }
        }
        self.held.clear();
    }

    fn mark_modern_confirmed(&mut self) {
        match &mut self.era {
            EraState::Modern { confirmed, .. } => *confirmed = true,
            EraState::Unknown => {
                let version = self.latest_version();
                self.set_era(
                    EraState::Modern {
                        version,
                        confirmed: true,
                    },
                    EraEvidence::ModernAnswer,
                );
            }
            EraState::Legacy => {}
        }
    }

    /// The final response of an attempt of `op`; `result` is the text of its `result` member,
    /// when the caller knows it (otherwise it is read from `message` when needed).
    fn on_response(
        &mut self,
        now: Instant,
        op_id: OpId,
        kind: ResponseKind,
        message: &str,
        result: Option<&str>,
    ) {
        let Some(op) = self.ops.get(&op_id) else {
            return;
        };
        match op.internal {
            Some(Internal::Initialize) => return self.on_initialize_response(now, op_id, message),
            Some(Internal::Probe) => return self.on_probe_response(now, op_id, message),
            _ => {}
        }
        let sent_legacy = op.sent_legacy;
        match kind {
            ResponseKind::Complete
                if !sent_legacy && self.discover_answered_by_legacy(op_id, message) =>
            {
                self.fall_back(now, op_id, EraEvidence::NotADiscoverResult);
            }
            ResponseKind::Complete | ResponseKind::ToolError => {
                if !sent_legacy {
                    self.mark_modern_confirmed();
                }
                let is_error = kind == ResponseKind::ToolError;
                self.on_complete(now, op_id, message, result, is_error);
            }
            ResponseKind::InputRequired => {
                self.mark_modern_confirmed();
                self.on_input_required(now, op_id, message, result);
            }
            ResponseKind::Error(error) => self.on_error_response(now, op_id, error),
        }
    }

    /// HTTP, era still being detected: `server/discover` was answered with a result that is no
    /// `DiscoverResult` (see [`classify_probe`]), which a legacy server does for a method it
    /// does not know. The server is then legacy, as after a `4xx` without a modern error.
    fn discover_answered_by_legacy(&self, op_id: OpId, message: &str) -> bool {
        let detecting = matches!(self.config.protocol, ProtocolChoice::Auto)
            && matches!(self.era, EraState::Unknown);
        let is_discover = self
            .ops
            .get(&op_id)
            .is_some_and(|op| op.internal.is_none() && matches!(op.operation, Operation::Discover));
        if !(detecting && is_discover) {
            return false;
        }
        let Ok(m) = Message::parse(message) else {
            return false;
        };
        matches!(
            ProbeOutcome::from_message(&m).map(classify_probe),
            Some(ProbeVerdict::Legacy(
                era::LegacyEvidence::NotADiscoverResult
            ))
        )
    }

    fn on_probe_response(&mut self, now: Instant, op_id: OpId, message: &str) {
        let ticket = op_ticket(&mut self.ops, op_id);
        self.ops.remove(&op_id);
        let verdict = match Message::parse(message) {
            Ok(m) => match ProbeOutcome::from_message(&m) {
                Some(outcome) => classify_probe(outcome),
                None => return,
            },
            Err(_) => return,
        };
        if let (ProbeVerdict::Modern(_), Some(ticket), Some(result)) =
            (&verdict, ticket, result_text(message))
        {
            // The probe was a server/discover: its answer serves a host discover.
            let auth = self.config.auth_context.clone();
            let _ = self.cache.insert(now, ticket, &auth, &result);
        }
        self.probe_verdict(now, verdict);
    }

    fn on_complete(
        &mut self,
        now: Instant,
        op_id: OpId,
        message: &str,
        result: Option<&str>,
        is_error: bool,
    ) {
        let Some(mut result) = result.map(str::to_owned).or_else(|| result_text(message)) else {
            return self.fail(op_id, OpError::Protocol("no result member".to_owned()));
        };
        let Some(mut op) = self.ops.remove(&op_id) else {
            return;
        };
        if let Some(round) = op.mrtr.as_mut() {
            round.finish();
        }
        if let Operation::List {
            kind: ListKind::Tools,
            cursor,
        } = &op.operation
        {
            result = self.apply_tools_page(&result, cursor.is_none());
        }
        if let Some(ticket) = op.ticket.take() {
            let auth = self.config.auth_context.clone();
            let _ = self.cache.insert(now, ticket, &auth, &result);
        }
        match op.internal {
            Some(Internal::ToolsRefresh { waiter, pages }) => {
                return self.after_refresh(now, waiter, pages, &result, false);
            }
            Some(Internal::ToolsPrefetch { waiter, pages }) => {
                return self.after_refresh(now, waiter, pages, &result, true);
            }
            _ => {}
        }
        self.event(Event::Result {
            op: op_id,
            result,
            is_error,
            source: ResultSource::Server,
        });
    }

    fn on_input_required(
        &mut self,
        now: Instant,
        op_id: OpId,
        message: &str,
        result: Option<&str>,
    ) {
        let parsed = result
            .map(str::to_owned)
            .or_else(|| result_text(message))
            .ok_or_else(|| "no result member".to_owned())
            .and_then(|r| InputRequiredResult::parse(&r).map_err(|e| e.to_string()));
        let result = match parsed {
            Ok(r) => r,
            Err(e) => return self.fail(op_id, OpError::Protocol(e)),
        };
        let Some(op) = self.ops.get_mut(&op_id) else {
            return;
        };
        op.ticket = None;
        let Some(round) = op.mrtr.as_mut() else {
            return self.fail(
                op_id,
                OpError::Protocol("input_required for a request without MRTR".to_owned()),
            );
        };
        match round.handle_input_required(result) {
            Ok(requests) => {
                let round_no = round.rounds();
                op.state = OpState::AwaitingInput;
                if requests.is_empty() {
                    // Only requestState: retry at once.
                    self.send_mrtr_retry(now, op_id);
                } else {
                    self.event(Event::InputRequested {
                        op: op_id,
                        round: round_no,
                        requests,
                    });
                }
            }
            Err(e) => self.fail(op_id, OpError::Mrtr(e)),
        }
    }

    /// Updates the tool-header table from a `tools/list` page and returns the result without
    /// the excluded tools.
    fn apply_tools_page(&mut self, result: &str, first_page: bool) -> String {
        let Ok(Value::Object(mut obj)) = serde_json::from_str::<Value>(result) else {
            return result.to_owned();
        };
        let Some(Value::Array(tools)) = obj.remove("tools") else {
            return result.to_owned();
        };
        if first_page {
            self.tools.clear();
            self.excluded.clear();
            self.tools_listed = true;
        }
        let (valid, rejected) = headers::partition_tools(tools);
        for e in rejected {
            let reason = e.to_string();
            self.tools.remove(&e.tool);
            self.excluded.insert(e.tool.clone(), reason.clone());
            self.event(Event::ToolExcluded {
                tool: e.tool,
                reason,
            });
        }
        let mut kept = Vec::with_capacity(valid.len());
        for (tool, headers) in valid {
            self.excluded.remove(headers.tool_name());
            self.tools.insert(headers.tool_name().to_owned(), headers);
            kept.push(tool);
        }
        obj.insert("tools".to_owned(), Value::Array(kept));
        Value::Object(obj).to_string()
    }

    /// A `-32020` refresh page (or a page fetched before the call, `prefetch`) arrived:
    /// follow the next page while the tool is missing, then send the waiting call (again).
    fn after_refresh(
        &mut self,
        now: Instant,
        waiter: OpId,
        pages: u32,
        result: &str,
        prefetch: bool,
    ) {
        let tool = match self.ops.get(&waiter).map(|o| &o.operation) {
            Some(Operation::CallTool { name, .. }) => name.clone(),
            _ => return,
        };
        let next_cursor = serde_json::from_str::<Value>(result).ok().and_then(|v| {
            v.get("nextCursor")
                .and_then(Value::as_str)
                .map(str::to_owned)
        });
        if !self.tools.contains_key(&tool) && !self.excluded.contains_key(&tool) {
            if let Some(cursor) = next_cursor.filter(|_| pages < MAX_REFRESH_PAGES) {
                let operation = Operation::List {
                    kind: ListKind::Tools,
                    cursor: Some(cursor),
                };
                let pages = pages + 1;
                let internal = if prefetch {
                    Internal::ToolsPrefetch { waiter, pages }
                } else {
                    Internal::ToolsRefresh { waiter, pages }
                };
                self.start_internal(now, operation, internal);
                return;
            }
        }
        if prefetch {
            self.dispatch(now, waiter);
        } else {
            self.restart(now, waiter, RetryReason::HeadersRefreshed);
        }
    }

    fn on_error_response(&mut self, now: Instant, op_id: OpId, error: ErrorObject) {
        let Some(op) = self.ops.get_mut(&op_id) else {
            return;
        };
        if !op.sent_legacy {
            if let Some(modern) = ModernError::from_error(&error) {
                return self.on_modern_error(now, op_id, modern, error);
            }
        }
        if let Some(round) = op.mrtr.as_mut() {
            round.finish();
        }
        if let Some(ticket) = op.ticket.take() {
            self.cache.on_error_response(ticket.key(), error.code);
        }
        self.fail(op_id, OpError::Server(error));
    }

    fn on_modern_error(
        &mut self,
        now: Instant,
        op_id: OpId,
        modern: ModernError,
        error: ErrorObject,
    ) {
        self.mark_modern_confirmed();
        let current = match &self.era {
            EraState::Modern { version, .. } => version.clone(),
            _ => self.latest_version(),
        };
        let protocol = self.config.protocol.clone();
        let Some(op) = self.ops.get_mut(&op_id) else {
            return;
        };
        // The original request of a fresh round is rebuilt; an MRTR retry resends its params.
        if op.retry_params.is_none() {
            op.mrtr = None;
        }
        match modern {
            ModernError::UnsupportedProtocolVersion {
                supported,
                requested,
            } => {
                let requested = requested.unwrap_or(current);
                match op.versions.on_unsupported(&supported, &requested) {
                    Ok(choice) => {
                        let version = choice.version.clone();
                        self.set_era(
                            EraState::Modern {
                                version: version.clone(),
                                confirmed: true,
                            },
                            EraEvidence::ModernAnswer,
                        );
                        self.restart(now, op_id, RetryReason::Version(version));
                    }
                    Err(e) => {
                        let legacy_listed = supported
                            .iter()
                            .any(|v| legacy::KNOWN_LEGACY_VERSIONS.contains(&v.as_str()));
                        if matches!(e, VersionError::NoCommonVersion { .. })
                            && legacy_listed
                            && protocol == ProtocolChoice::Auto
                        {
                            self.fall_back(now, op_id, EraEvidence::ModernAnswer);
                        } else {
                            self.fail(op_id, OpError::Version(e));
                        }
                    }
                }
            }
            ModernError::MissingRequiredClientCapability { required } => {
                match declare_required(&op.declared, &self.config.host_capabilities, &required) {
                    Ok(declared) => {
                        // An MRTR retry goes out again with its inputResponses and
                        // requestState (only `_meta` is rebuilt); its round checks later
                        // input kinds against the larger declaration.
                        if let Some(round) = op.mrtr.as_mut() {
                            round.set_capabilities(InputCapabilities::from(&declared));
                        }
                        op.declared = declared;
                        self.restart(now, op_id, RetryReason::Capabilities);
                    }
                    Err(e) => self.fail(op_id, OpError::Capability(e)),
                }
            }
            ModernError::HeaderMismatch { message } => {
                let is_call = matches!(op.operation, Operation::CallTool { .. });
                if is_call && !op.header_refresh_used {
                    op.header_refresh_used = true;
                    op.state = OpState::Queued;
                    self.cache.invalidate_list(ListKind::Tools);
                    let operation = Operation::List {
                        kind: ListKind::Tools,
                        cursor: None,
                    };
                    let internal = Internal::ToolsRefresh {
                        waiter: op_id,
                        pages: 1,
                    };
                    self.start_internal(now, operation, internal);
                } else if op.internal.is_some() {
                    self.fail(op_id, OpError::Server(error));
                } else {
                    self.fail(op_id, OpError::HeaderMismatch { message });
                }
            }
        }
    }

    /// The server is legacy: `op` goes out again after `initialize`.
    fn fall_back(&mut self, now: Instant, op_id: OpId, evidence: EraEvidence) {
        let Some(op) = self.ops.get_mut(&op_id) else {
            return;
        };
        let req = match op.state {
            OpState::Sent { req } => Some(req),
            _ => None,
        };
        op.state = OpState::Queued;
        op.mrtr = None;
        op.retry_params = None;
        let internal = op.internal;
        if let Some(req) = req {
            self.supersede(now, req);
        }
        if internal.is_some() {
            self.ops.remove(&op_id);
            if let Some(
                Internal::ToolsRefresh { waiter, .. } | Internal::ToolsPrefetch { waiter, .. },
            ) = internal
            {
                if let Some(w) = self.ops.get_mut(&waiter) {
                    w.state = OpState::Queued;
                }
            }
        } else {
            self.event(Event::Retrying {
                op: op_id,
                reason: RetryReason::LegacyFallback,
            });
        }
        if !matches!(self.era, EraState::Legacy) {
            self.set_era(EraState::Legacy, evidence);
        }
        if self.legacy.phase() == legacy::Phase::Ready {
            // The session is already up (this answer came after the handshake).
            self.dispatch_queued(now);
        } else if self.handshake.is_none() {
            self.start_handshake(now);
        }
    }

    fn modern(&mut self, version: String) {
        self.set_era(
            EraState::Modern {
                version,
                confirmed: true,
            },
            EraEvidence::ModernAnswer,
        );
    }

    fn probe_verdict(&mut self, now: Instant, verdict: ProbeVerdict) {
        let ours: Vec<&str> = self.config.versions.iter().map(String::as_str).collect();
        let latest = self.latest_version();
        let supported = match verdict {
            ProbeVerdict::Modern(result) => result.supported_versions,
            ProbeVerdict::ModernError(ModernError::UnsupportedProtocolVersion {
                supported,
                ..
            }) => supported,
            ProbeVerdict::ModernMalformed(_) | ProbeVerdict::ModernError(_) => {
                self.modern(latest);
                return self.dispatch_queued(now);
            }
            ProbeVerdict::Legacy(evidence) => {
                let evidence = match evidence {
                    era::LegacyEvidence::Error { code, .. } => EraEvidence::ProbeError(code),
                    era::LegacyEvidence::NotADiscoverResult => EraEvidence::NotADiscoverResult,
                    era::LegacyEvidence::TimedOut => EraEvidence::ProbeTimedOut,
                };
                return self.go_legacy(now, evidence);
            }
        };
        match era::negotiate_version(&ours, &supported, &latest) {
            Ok(choice) => {
                self.modern(choice.version);
                self.dispatch_queued(now);
            }
            Err(e) => {
                let legacy_listed = supported
                    .iter()
                    .any(|v| legacy::KNOWN_LEGACY_VERSIONS.contains(&v.as_str()));
                if legacy_listed {
                    return self.go_legacy(now, EraEvidence::ModernAnswer);
                }
                self.modern(latest);
                self.fail_queued(&OpError::Version(e));
            }
        }
    }

    fn go_legacy(&mut self, now: Instant, evidence: EraEvidence) {
        self.set_era(EraState::Legacy, evidence);
        if self.handshake.is_none() {
            self.start_handshake(now);
        }
    }

    fn on_initialize_response(&mut self, now: Instant, op_id: OpId, message: &str) {
        self.ops.remove(&op_id);
        self.handshake = None;
        let headers = std::mem::take(&mut self.current_headers);
        match self.legacy.handle_initialize_response(&headers, message) {
            Ok(initialized) => {
                match self.config.transport {
                    Transport::Stdio => self.outputs.push_back(Output::Stdio(initialized.body)),
                    Transport::Http => {
                        let stream = self.new_stream(Owner::Fire, initialized.headers.clone());
                        self.outputs.push_back(Output::Http {
                            stream,
                            method: Method::Post,
                            headers: initialized.headers,
                            body: initialized.body,
                        });
                        self.opening = (vec![stream], now.checked_add(SESSION_OPEN_WAIT));
                    }
                }
                let version = self
                    .legacy
                    .negotiated()
                    .map(|n| n.protocol_version.clone())
                    .unwrap_or_else(|| LEGACY_PROTOCOL_VERSION.to_owned());
                if let Some(evidence) = self.legacy_evidence.take() {
                    self.event(Event::EraDetected {
                        era: Era::Legacy,
                        version,
                        evidence,
                    });
                }
                if let Some(stream) = self.open_session_stream() {
                    self.opening.0.push(stream);
                }
                if self.opening.1.is_none() {
                    self.session_opened(now);
                }
            }
            Err(e) => {
                // A kept legacy verdict that no longer holds (the server was upgraded): probe
                // again in the modern era (`basic/versioning.mdx`: "re-probing if the cached
                // assumption later fails").
                if self.config.protocol == ProtocolChoice::Auto
                    && self.legacy_evidence == Some(EraEvidence::Cached)
                {
                    self.legacy_evidence = None;
                    self.era = EraState::Unknown;
                    let held: Vec<RequestHandle> = self.held.iter().map(|(r, _, _)| *r).collect();
                    for req in held {
                        let op_id = self.by_req.get(&req).copied();
                        // Ends the held attempt in the tracker, with nothing written.
                        self.supersede(now, req);
                        if let Some(op) = op_id.and_then(|id| self.ops.get_mut(&id)) {
                            op.state = OpState::Queued;
                        }
                    }
                    self.held.clear();
                    let queued: Vec<OpId> = self
                        .ops
                        .iter()
                        .filter(|(_, o)| o.internal.is_none() && matches!(o.state, OpState::Queued))
                        .map(|(&id, _)| id)
                        .collect();
                    for op_id in queued {
                        self.dispatch(now, op_id);
                    }
                    return;
                }
                let error = OpError::Legacy(e);
                self.fail_held(now, &error);
                self.fail_queued(&error);
            }
        }
    }

    // -----------------------------------------------------------------------------------------
    // Legacy-era subscriptions: list changes arrive on the session's GET stream (HTTP) or on
    // stdout (stdio); single resources are subscribed with `resources/subscribe`.

    fn legacy_subscribe(
        &mut self,
        handle: Option<SubscriptionHandle>,
        filter: SubscriptionFilter,
    ) -> Result<SubscriptionHandle, UsageError> {
        if filter.is_empty() {
            return Err(UsageError::Subscription(
                subscription::UsageError::EmptyFilter,
            ));
        }
        let caps = match self.legacy.negotiated() {
            Some(n) => n.capabilities.clone(),
            None => return Err(UsageError::HandshakePending),
        };
        let list = |c: Option<&super::discover::ListCapability>| {
            c.is_some_and(|c| c.list_changed == Some(true))
        };
        let supported = SubscriptionFilter {
            tools_list_changed: list(caps.tools.as_ref()),
            prompts_list_changed: list(caps.prompts.as_ref()),
            resources_list_changed: caps
                .resources
                .as_ref()
                .is_some_and(|r| r.list_changed == Some(true)),
            resource_subscriptions: if caps
                .resources
                .as_ref()
                .is_some_and(|r| r.subscribe == Some(true))
            {
                filter.resource_subscriptions.clone()
            } else {
                Vec::new()
            },
        };
        let accepted = filter.intersection(&supported);
        let dropped = filter.difference(&accepted);
        let sub = handle.unwrap_or_else(|| {
            self.next_legacy_sub += 1;
            SubscriptionHandle(LEGACY_SUB_BASE + self.next_legacy_sub - 1)
        });
        let mut stream = None;
        let lists = accepted.tools_list_changed
            || accepted.prompts_list_changed
            || accepted.resources_list_changed;
        if self.config.transport == Transport::Http
            && (lists || !accepted.resource_subscriptions.is_empty())
        {
            // Legacy `basic/transports.mdx`, "Listening for Messages from the Server". The
            // session's own stream carries the notifications when it is open (a server may
            // allow one GET stream per session).
            if let Some(session) = self.session_stream {
                stream = Some(session);
            } else if let Ok(mut headers) = self.legacy.session_headers() {
                let _ = headers.set("Accept", "text/event-stream");
                headers.remove("Content-Type");
                let s = self.new_stream(Owner::LegacyListen(sub), headers.clone());
                self.outputs.push_back(Output::Http {
                    stream: s,
                    method: Method::Get,
                    headers,
                    body: String::new(),
                });
                stream = Some(s);
            }
        }
        for uri in &accepted.resource_subscriptions {
            self.fire_request("resources/subscribe", uri);
        }
        self.event(Event::Subscription(subscription::Event::Acknowledged {
            sub,
            id: Id::Number(0),
            accepted: accepted.clone(),
            dropped,
            unrequested: SubscriptionFilter::default(),
        }));
        self.legacy_subs.insert(sub, (accepted, stream));
        Ok(sub)
    }

    /// Sends a legacy request whose answer is not awaited (`resources/(un)subscribe`).
    fn fire_request(&mut self, method: &str, uri: &str) {
        let id = self.ids.next_id();
        let mut params = JsonObject::new();
        params.insert("uri".to_owned(), Value::String(uri.to_owned()));
        let Ok(out) = self.legacy.request(&id, method, Value::Object(params)) else {
            return;
        };
        if self.fired.len() >= 256 {
            self.fired.remove(0);
        }
        self.fired.push(id);
        match self.config.transport {
            Transport::Stdio => self.outputs.push_back(Output::Stdio(out.body)),
            Transport::Http => {
                let stream = self.new_stream(Owner::Fire, out.headers.clone());
                self.outputs.push_back(Output::Http {
                    stream,
                    method: Method::Post,
                    headers: out.headers,
                    body: out.body,
                });
            }
        }
    }

    fn legacy_unsubscribe(&mut self, sub: SubscriptionHandle) -> bool {
        let Some((accepted, stream)) = self.legacy_subs.remove(&sub) else {
            return false;
        };
        if let Some(s) = stream.filter(|s| Some(*s) != self.session_stream) {
            self.streams.remove(&s);
            self.outputs.push_back(Output::CloseStream(s));
        }
        for uri in &accepted.resource_subscriptions {
            self.fire_request("resources/unsubscribe", uri);
        }
        self.event(Event::Subscription(subscription::Event::Ended {
            sub,
            reason: subscription::EndReason::ClosedByHost,
        }));
        true
    }

    /// A legacy GET stream ended or failed: the subscription ends (the host may subscribe again).
    fn legacy_stream_gone(&mut self, sub: SubscriptionHandle, status: Option<u16>) {
        if self.legacy_subs.remove(&sub).is_some() {
            let reason = match status {
                Some(s) => subscription::EndReason::HttpStatus(s),
                None => subscription::EndReason::ServerCompleted,
            };
            self.event(Event::Subscription(subscription::Event::Ended {
                sub,
                reason,
            }));
        }
    }

    /// Reports a change notification to the legacy subscriptions that asked for it.
    fn legacy_change(&mut self, method: &str, params: Option<&Value>) {
        if self.legacy_subs.is_empty() {
            return;
        }
        let change = match method {
            "notifications/tools/list_changed" => Change::ToolsListChanged,
            "notifications/prompts/list_changed" => Change::PromptsListChanged,
            "notifications/resources/list_changed" => Change::ResourcesListChanged,
            "notifications/resources/updated" => {
                match params.and_then(|p| p.get("uri")).and_then(Value::as_str) {
                    Some(uri) => Change::ResourceUpdated {
                        uri: uri.to_owned(),
                    },
                    None => return,
                }
            }
            _ => return,
        };
        let subs: Vec<SubscriptionHandle> = self
            .legacy_subs
            .iter()
            .filter(|(_, (f, _))| match &change {
                Change::ToolsListChanged => f.tools_list_changed,
                Change::PromptsListChanged => f.prompts_list_changed,
                Change::ResourcesListChanged => f.resources_list_changed,
                Change::ResourceUpdated { uri } => f.resource_subscriptions.contains(uri),
            })
            .map(|(&h, _)| h)
            .collect();
        for sub in subs {
            self.event(Event::Subscription(subscription::Event::Changed {
                sub,
                change: change.clone(),
            }));
        }
    }

    // -----------------------------------------------------------------------------------------
    // Streams.

    fn route_stream_message(&mut self, now: Instant, owner: Owner, text: &str) {
        let parsed = match Message::parse(text) {
            Ok(Message::Request { id, method, params }) => {
                let op = match owner {
                    Owner::Request(req) => self.by_req.get(&req).copied(),
                    // A request on the session's stream belongs to no call; like on stdio, the
                    // oldest operation in flight is the one it is asked for.
                    Owner::LegacySession => self.oldest_in_flight(),
                    _ => None,
                };
                return self.server_request(now, op, &id, &method, params.map(|p| p.get()));
            }
            parsed => parsed,
        };
        match owner {
            Owner::Request(req) => {
                let _ = self.requests.stream_message(now, req, text, || parsed);
            }
            Owner::Listen(sub) => {
                let _ = self.subs.handle_stream_message(now, sub, text);
            }
            Owner::LegacyListen(_) | Owner::LegacySession => {
                // A server may deliver a call's response or progress on a GET stream (legacy
                // "Resumability and Redelivery"): matched by id or token, as on stdio.
                if self.requests.handle_channel_message(now, text) == Routed::Consumed {
                    return;
                }
                if let Ok(Message::Notification { method, .. }) = Message::parse(text) {
                    self.notification(None, method, text.to_owned());
                }
            }
            Owner::Fire => {}
        }
    }

    /// The oldest operation of the host that is waiting for its response.
    fn oldest_in_flight(&self) -> Option<OpId> {
        self.ops
            .iter()
            .find(|(_, o)| o.internal.is_none() && matches!(o.state, OpState::Sent { .. }))
            .map(|(&id, _)| id)
    }

    fn owner_end(&mut self, now: Instant, owner: Owner) {
        match owner {
            Owner::Request(req) => {
                self.req_stream.remove(&req);
                let _ = self.requests.handle_stream_end(now, req);
            }
            Owner::Listen(sub) => {
                self.sub_stream.remove(&sub);
                let _ = self.subs.handle_stream_end(now, sub);
            }
            Owner::LegacyListen(sub) => self.legacy_stream_gone(sub, None),
            Owner::LegacySession => self.set_session_stream(None, None),
            Owner::Fire => {}
        }
    }

    fn owner_failed(
        &mut self,
        now: Instant,
        owner: Owner,
        status: Option<u16>,
        retry_after: Option<Duration>,
    ) {
        let failure = StreamFailure {
            status,
            retry_after,
        };
        self.resumes.retain(|r| r.owner != owner);
        match owner {
            Owner::Request(req) => {
                self.req_stream.remove(&req);
                let _ = self.requests.handle_stream_failed(now, req, failure);
            }
            Owner::Listen(sub) => {
                self.sub_stream.remove(&sub);
                let _ = self.subs.handle_stream_failed(now, sub, failure);
            }
            Owner::LegacyListen(sub) => self.legacy_stream_gone(sub, status),
            Owner::LegacySession => self.set_session_stream(None, status),
            Owner::Fire => {}
        }
    }

    fn stream_failed(&mut self, now: Instant, stream: StreamId, status: Option<u16>) {
        self.opening_answered(now, stream);
        if let Some(s) = self.streams.remove(&stream) {
            // A broken legacy SSE stream is resumed like one the server closed ("Disconnection
            // MAY occur at any time").
            if let (None, Body::Sse(parser)) = (status, &s.body) {
                let last = parser.last_event_id().map(str::to_owned);
                if self.schedule_resume(now, s.owner, last, parser.retry()) {
                    return;
                }
            }
            self.owner_failed(now, s.owner, status, s.retry_after);
        }
    }

    /// Legacy HTTP: `owner`'s SSE stream ended before it was done; when it carried an event id,
    /// a GET with `Last-Event-ID` resumes it after the server's `retry` (or
    /// [`DEFAULT_SSE_RETRY`]). `false` when it is not resumed (another era, no event id, the
    /// request already answered, or the resume budget spent).
    fn schedule_resume(
        &mut self,
        now: Instant,
        owner: Owner,
        last_event_id: Option<String>,
        retry_ms: Option<u64>,
    ) -> bool {
        let waiting = match owner {
            Owner::Request(req) => {
                self.by_req.contains_key(&req) && self.requests.current_id(req).is_some()
            }
            Owner::LegacySession => true,
            _ => false,
        };
        let resumable = waiting
            && self.config.transport == Transport::Http
            && matches!(self.era, EraState::Legacy)
            && self.legacy.phase() == legacy::Phase::Ready;
        let position = self.resumes.iter().position(|r| r.owner == owner);
        let (Some(last), true) = (last_event_id, resumable) else {
            if let Some(i) = position {
                self.resumes.swap_remove(i);
            }
            return false;
        };
        let i = position.unwrap_or_else(|| {
            self.resumes.push(Resume {
                owner,
                at: None,
                last_event_id: String::new(),
                count: 0,
                stalled: 0,
            });
            self.resumes.len() - 1
        });
        let Some(r) = self.resumes.get_mut(i) else {
            return false;
        };
        let stalled = if r.last_event_id == last {
            r.stalled + 1
        } else {
            0
        };
        if r.count >= MAX_SSE_RESUMES || stalled >= MAX_STALLED_SSE_RESUMES {
            self.resumes.swap_remove(i);
            return false;
        }
        let delay = retry_ms.map_or(DEFAULT_SSE_RETRY, Duration::from_millis);
        r.count += 1;
        r.stalled = stalled;
        r.last_event_id = last;
        r.at = Some(now.checked_add(delay.min(MAX_SSE_RETRY)).unwrap_or(now));
        true
    }

    /// Sends the resume GETs that are due.
    fn fire_resumes(&mut self, now: Instant) {
        let due: Vec<(Owner, String)> = self
            .resumes
            .iter_mut()
            .filter(|r| r.at.is_some_and(|at| at <= now))
            .map(|r| {
                r.at = None;
                (r.owner, r.last_event_id.clone())
            })
            .collect();
        for (owner, last) in due {
            let still_wanted = match owner {
                Owner::Request(req) => {
                    self.by_req.contains_key(&req) && self.requests.current_id(req).is_some()
                }
                Owner::LegacySession => matches!(self.era, EraState::Legacy),
                _ => false,
            };
            let headers = match self.legacy.session_headers() {
                Ok(h) if still_wanted => h,
                _ => {
                    self.resumes.retain(|r| r.owner != owner);
                    continue;
                }
            };
            let stream = self.open_get(owner, headers, Some(&last));
            match owner {
                Owner::Request(req) => {
                    self.req_stream.insert(req, stream);
                }
                Owner::LegacySession => self.set_session_stream(Some(stream), None),
                _ => {}
            }
        }
    }

    /// A GET on the legacy session (`Accept: text/event-stream`, `Last-Event-ID` when resuming).
    fn open_get(
        &mut self,
        owner: Owner,
        mut headers: Headers,
        last_event_id: Option<&str>,
    ) -> StreamId {
        let _ = headers.set("Accept", "text/event-stream");
        headers.remove("Content-Type");
        if let Some(id) = last_event_id {
            let _ = headers.set("Last-Event-ID", id);
        }
        let stream = self.new_stream(owner, headers.clone());
        self.outputs.push_back(Output::Http {
            stream,
            method: Method::Get,
            headers,
            body: String::new(),
        });
        stream
    }

    /// Legacy HTTP: the session's GET stream is now `stream` (or gone); legacy subscriptions
    /// riding on it follow it, or end with it.
    fn set_session_stream(&mut self, stream: Option<StreamId>, status: Option<u16>) {
        let old = std::mem::replace(&mut self.session_stream, stream);
        let Some(old) = old else {
            return;
        };
        match stream {
            Some(new) => {
                for (_, s) in self.legacy_subs.values_mut() {
                    if *s == Some(old) {
                        *s = Some(new);
                    }
                }
            }
            None => {
                let riding: Vec<SubscriptionHandle> = self
                    .legacy_subs
                    .iter()
                    .filter(|(_, (_, s))| *s == Some(old))
                    .map(|(&h, _)| h)
                    .collect();
                for sub in riding {
                    self.legacy_stream_gone(sub, status);
                }
            }
        }
    }

    /// Legacy HTTP: opens the session's GET stream (closing an older one).
    fn open_session_stream(&mut self) -> Option<StreamId> {
        if self.config.transport != Transport::Http || !self.config.legacy_listen {
            return None;
        }
        if let Some(old) = self.session_stream {
            self.streams.remove(&old);
            self.outputs.push_back(Output::CloseStream(old));
            self.set_session_stream(None, None);
        }
        self.resumes.retain(|r| r.owner != Owner::LegacySession);
        let headers = self.legacy.session_headers().ok()?;
        let stream = self.open_get(Owner::LegacySession, headers, None);
        self.session_stream = Some(stream);
        Some(stream)
    }

    /// Legacy HTTP: the server answered (or failed) `stream`; when it was the last of the
    /// session's opening exchanges, the session's requests go out.
    fn opening_answered(&mut self, now: Instant, stream: StreamId) {
        if self.opening.1.is_none() {
            return;
        }
        self.opening.0.retain(|s| *s != stream);
        if self.opening.0.is_empty() {
            self.session_opened(now);
        }
    }

    /// The legacy session is open: the requests held for it go out, then the queued operations.
    fn session_opened(&mut self, now: Instant) {
        self.opening = (Vec::new(), None);
        if self.legacy.phase() != legacy::Phase::Ready {
            return;
        }
        for (req, _, body) in std::mem::take(&mut self.held) {
            self.transmit_request(req, body);
        }
        self.dispatch_queued(now);
    }

    /// A non-2xx answer on `s`.
    fn http_error(&mut self, now: Instant, s: &Stream, status: u16, body: &[u8]) {
        let Owner::Request(req) = s.owner else {
            // A listen request refused for good with a JSON-RPC error body (e.g. 404 `-32601`
            // from a server without `subscriptions/listen`): that error is the answer, so the
            // subscription ends as rejected with the server's code and message. A status that
            // reconnects keeps doing so.
            if let Owner::Listen(sub) = s.owner {
                if !subscription::reconnects_after(Some(status)) && is_jsonrpc_error(body) {
                    let text = String::from_utf8_lossy(body);
                    let text = text.trim_start_matches('\u{feff}');
                    let _ = self.subs.handle_stream_message(now, sub, text);
                }
            }
            return self.owner_failed(now, s.owner, Some(status), s.retry_after);
        };
        let Some(op_id) = self.by_req.get(&req).copied() else {
            return;
        };
        let Some(op) = self.ops.get(&op_id) else {
            return;
        };
        let is_handshake = Some(op_id) == self.handshake;
        if op.sent_legacy {
            if status == 404 && !is_handshake {
                let expired = self.legacy.handle_status(404, &s.sent);
                if expired != SessionStatus::Unaffected {
                    self.supersede(now, req);
                    if expired == SessionStatus::Expired && self.handshake.is_none() {
                        self.start_handshake(now);
                    }
                    return self.restart(now, op_id, RetryReason::SessionExpired);
                }
            }
            return self.feed_or_fail(now, req, s, status, body);
        }
        match classify_http_error(status, body) {
            Some(HttpErrorVerdict::Legacy) => {
                let jsonrpc_error = is_jsonrpc_error(body);
                let may_fall_back = self.config.protocol == ProtocolChoice::Auto
                    && match &self.era {
                        EraState::Unknown => true,
                        EraState::Modern { confirmed, .. } => !*confirmed || !jsonrpc_error,
                        // A modern request sent before another one's answer made the server
                        // legacy: it goes out again in the legacy session too.
                        EraState::Legacy => true,
                    };
                if may_fall_back {
                    self.fall_back(now, op_id, EraEvidence::HttpStatus(status));
                } else if self.config.protocol == ProtocolChoice::Modern
                    && (!jsonrpc_error
                        || matches!(
                            self.era,
                            EraState::Modern {
                                confirmed: false,
                                ..
                            }
                        ))
                {
                    // Pinned to modern, with the evidence automatic detection would have taken
                    // as legacy (a JSON-RPC error counts only before any modern answer).
                    self.supersede(now, req);
                    if let Some(op) = self.ops.get_mut(&op_id) {
                        op.state = OpState::Queued;
                    }
                    let error = jsonrpc_error_object(body);
                    self.fail(op_id, OpError::LegacyServer { status, error });
                } else {
                    self.feed_or_fail(now, req, s, status, body);
                }
            }
            _ => self.feed_or_fail(now, req, s, status, body),
        }
    }

    /// A JSON-RPC error body is the request's answer; anything else is an HTTP failure.
    fn feed_or_fail(
        &mut self,
        now: Instant,
        req: RequestHandle,
        s: &Stream,
        status: u16,
        body: &[u8],
    ) {
        if is_jsonrpc_error(body) {
            let text = String::from_utf8_lossy(body);
            let text = text.trim_start_matches('\u{feff}');
            let _ = self.requests.handle_stream_message(now, req, text);
            self.req_stream.remove(&req);
            let _ = self.requests.handle_stream_end(now, req);
        } else {
            self.owner_failed(now, Owner::Request(req), Some(status), s.retry_after);
        }
    }

    /// A request from the server (legacy era; the modern era has none outside MRTR): `ping`
    /// is answered, anything else gets "method not found".
    fn server_request(
        &mut self,
        _now: Instant,
        op: Option<OpId>,
        id: &Id,
        method: &str,
        params: Option<&str>,
    ) {
        if method == super::elicitation::METHOD && matches!(self.era, EraState::Legacy) {
            if let Some(op) = op {
                if self.legacy_elicitation(op, id, params.unwrap_or("{}")) {
                    return;
                }
            }
        }
        let body = if method == "ping" {
            let id = serde_json::to_string(id).unwrap_or_else(|_| "null".to_owned());
            format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{}}}}")
        } else {
            self.event(Event::Ignored {
                reason: "a server request this client does not serve (answered: method not found)",
            });
            let error = ErrorObject {
                code: jsonrpc::code::METHOD_NOT_FOUND,
                message: format!("Method not found: {}", clip(method)),
                data: None,
            };
            jsonrpc::error_response(Some(id), &error)
        };
        self.answer_server(body);
    }

    /// A legacy `elicitation/create` for `op`: surfaced like an MRTR input request, answered by
    /// [`Client::answer_input`] with a response to the server's request. `false` when it cannot
    /// be served (undeclared mode or malformed: the caller answers "method not found").
    fn legacy_elicitation(&mut self, op: OpId, id: &Id, params: &str) -> bool {
        let Ok(request) = ElicitationRequest::parse(params) else {
            return false;
        };
        let declared = match &request {
            ElicitationRequest::Form(_) => self.config.capabilities.supports_elicitation_form(),
            ElicitationRequest::Url(_) => self.config.capabilities.supports_elicitation_url(),
        };
        if !declared || !self.ops.contains_key(&op) {
            return false;
        }
        let key = format!("legacy:{}", serde_json::to_string(id).unwrap_or_default());
        let pending = self.legacy_inputs.entry(op).or_default();
        pending.push((key.clone(), id.clone(), request.clone()));
        let round = u32::try_from(pending.len()).unwrap_or(u32::MAX);
        self.event(Event::InputRequested {
            op,
            round,
            requests: vec![InputRequestEvent {
                key,
                request: mrtr::InputRequest::Elicitation(request),
            }],
        });
        true
    }

    /// Sends the client's answer to a server request.
    fn answer_server(&mut self, body: String) {
        match self.config.transport {
            Transport::Stdio => self.outputs.push_back(Output::Stdio(body)),
            Transport::Http => {
                let headers = match &self.era {
                    EraState::Legacy => self.legacy.session_headers().unwrap_or_default(),
                    _ => {
                        let mut h = Headers::new();
                        let _ = h.append("Accept", headers::ACCEPT);
                        let _ = h.append("Content-Type", headers::CONTENT_TYPE);
                        h
                    }
                };
                let stream = self.new_stream(Owner::Fire, headers.clone());
                self.outputs.push_back(Output::Http {
                    stream,
                    method: Method::Post,
                    headers,
                    body,
                });
            }
        }
    }

    /// stdio: a message no request or subscription claimed.
    fn unrouted(&mut self, line: &str) {
        match Message::parse(line) {
            Ok(Message::Response { id, .. } | Message::Error { id: Some(id), .. })
                if self.fired.contains(&id) => {}
            Ok(Message::Notification { method, .. }) => {
                self.notification(None, method, line.to_owned());
            }
            _ => self.event(Event::Ignored {
                reason: "a message for no known request or subscription",
            }),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Helpers.

/// The capabilities `initialize` declares. Legacy servers ask with server-to-client requests;
/// this client serves `elicitation/create` (through [`Event::InputRequested`]) and answers
/// sampling and roots requests with "method not found", so it declares elicitation (as
/// configured) and extensions only: declaring more would promise what it does not do.
fn legacy_capabilities(config: &ClientConfig) -> ClientCapabilities {
    ClientCapabilities {
        elicitation: config.capabilities.elicitation.clone(),
        extensions: config.capabilities.extensions.clone(),
        ..ClientCapabilities::none()
    }
}

fn cache_key(operation: &Operation) -> Result<RequestKey, super::cache::CacheError> {
    let params = Value::Object(operation.params());
    RequestKey::from_request(operation.method(), Some(&params))
}

fn op_ticket(ops: &mut BTreeMap<OpId, Op>, op_id: OpId) -> Option<FetchTicket> {
    ops.get_mut(&op_id).and_then(|o| o.ticket.take())
}

/// The `params` of a fresh modern request of `op` in `version` (its operation's members and
/// `_meta`), as JSON text, with its members (key, value text) when `members` is set (for the
/// MRTR round); every value is written once, borrowed from the operation.
#[allow(clippy::type_complexity)]
fn fresh_params(
    texts: &mut MetaTexts,
    op: &Op,
    version: &str,
    members: bool,
) -> Result<(String, Option<Vec<(String, Box<str>)>>), serde_json::Error> {
    let mut pieces: Vec<(&str, Piece<'_>)> = Vec::with_capacity(3);
    match &op.operation {
        Operation::Discover | Operation::Ping => {}
        Operation::List { cursor, .. } => {
            if let Some(c) = cursor {
                pieces.push(("cursor", Piece::Str(c)));
            }
        }
        Operation::CallTool { name, arguments } | Operation::GetPrompt { name, arguments } => {
            pieces.push(("name", Piece::Str(name)));
            pieces.push(("arguments", Piece::Object(arguments)));
        }
        Operation::ReadResource { uri } => pieces.push(("uri", Piece::Str(uri))),
    }
    pieces.push(("_meta", Piece::Meta));
    let mut out = Vec::with_capacity(512);
    let spans = write_object(pieces, &mut out, |out| {
        texts.write_request_meta(op, version, out)
    })?;
    let text = utf8(out)?;
    let members = if members {
        let mut m = Vec::with_capacity(spans.len());
        for (key, span) in spans {
            let value = text
                .get(span)
                .ok_or_else(|| <serde_json::Error as serde::ser::Error>::custom("member span"))?;
            m.push((key, Box::from(value)));
        }
        Some(m)
    } else {
        None
    };
    Ok((text, members))
}

/// Params text the client built (an MRTR retry), checked to be a JSON object; the tracker's
/// error when it is not.
fn checked_params(text: String) -> Result<String, OpError> {
    match serde_json::from_str::<&RawValue>(&text) {
        Ok(raw) if raw.get().starts_with('{') => Ok(text),
        _ => Err(OpError::Protocol(
            request::UsageError::ParamsNotObject.to_string(),
        )),
    }
}

/// The JSON text of a response's `result`.
fn result_text(message: &str) -> Option<String> {
    match Message::parse(message) {
        Ok(Message::Response { result, .. }) => Some(result.get().to_owned()),
        _ => None,
    }
}

/// The `requestId` of a `notifications/cancelled` text.
fn cancelled_request_id(body: &str) -> Option<Id> {
    let v: Value = serde_json::from_str(body).ok()?;
    serde_json::from_value(v.get("params")?.get("requestId")?.clone()).ok()
}

/// The error object of a JSON-RPC error body.
fn jsonrpc_error_object(body: &[u8]) -> Option<ErrorObject> {
    let text = std::str::from_utf8(body)
        .ok()?
        .trim_start_matches('\u{feff}');
    match Message::parse(text) {
        Ok(Message::Error { error, .. }) => Some(error),
        _ => None,
    }
}

fn is_jsonrpc_error(body: &[u8]) -> bool {
    std::str::from_utf8(body)
        .ok()
        .map(|t| t.trim_start_matches('\u{feff}'))
        .is_some_and(|t| matches!(Message::parse(t), Ok(Message::Error { .. })))
}

fn is_message_event(event: &str) -> bool {
    event.is_empty() || event == "message"
}

/// Drains complete SSE events into JSON-RPC message texts (`message` events with data; the
/// empty priming event and other event types are skipped).
fn drain_sse(parser: &mut SseParser, out: &mut Vec<String>) {
    loop {
        match parser.next_event() {
            Ok(Some(ev)) => {
                if is_message_event(&ev.event) && !ev.data.trim().is_empty() {
                    out.push(ev.data);
                }
            }
            Ok(None) => break,
            Err(_) => continue,
        }
    }
}

/// The value of a request `{"jsonrpc":"2.0","id":…,"method":…,"params":…}` for the header
/// builder.
fn jsonrpc_request_value(id: &Id, method: &str, params: &str) -> Value {
    let mut m = JsonObject::new();
    m.insert(
        "jsonrpc".to_owned(),
        Value::String(jsonrpc::VERSION.to_owned()),
    );
    m.insert(
        "id".to_owned(),
        serde_json::to_value(id).unwrap_or(Value::Null),
    );
    m.insert("method".to_owned(), Value::String(method.to_owned()));
    m.insert(
        "params".to_owned(),
        serde_json::from_str(params).unwrap_or(Value::Null),
    );
    Value::Object(m)
}

fn clip(s: &str) -> String {
    s.chars().take(128).collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn client() -> Client {
        let info = Implementation::new("c", "1").with_title("The \"C\"");
        Client::new(ClientConfig::new(Transport::Stdio, info))
    }

    /// An operation asking for progress, a log level and trace context.
    fn traced_op(operation: Operation) -> Op {
        let options = OpOptions {
            progress: true,
            log_level: Some(LoggingLevel::Debug),
            trace: Some(("00-aa-bb-01".to_owned(), Some("x=\u{e9}".to_owned()))),
            ..OpOptions::default()
        };
        let mut op = op_with(operation, options, ClientCapabilities::none().with_roots());
        op.progress_token = Some(Id::from(41));
        op
    }

    fn op_with(operation: Operation, options: OpOptions, declared: ClientCapabilities) -> Op {
        Op {
            operation,
            options,
            internal: None,
            state: OpState::Queued,
            declared,
            versions: VersionNegotiation::new(&[]),
            header_refresh_used: false,
            mrtr: None,
            retry_params: None,
            ticket: None,
            progress_token: None,
            headers: None,
            sent_legacy: false,
        }
    }

    /// The `_meta` text written from kept member texts is, byte for byte, the serialized
    /// `RequestMeta::to_object` of the same request, whatever optional members it carries and
    /// however the declared capabilities change between requests.
    #[test]
    fn request_meta_text_is_the_serialized_meta_object() {
        let mut client = client();
        let rich = ClientCapabilities::none()
            .with_elicitation_form()
            .with_sampling();
        let traced = OpOptions {
            progress: true,
            log_level: Some(LoggingLevel::Warning),
            trace: Some(("00-abc-def-01".to_owned(), Some("k=v".to_owned()))),
            ..OpOptions::default()
        };
        let half_traced = OpOptions {
            trace: Some(("00-abc-def-01".to_owned(), None)),
            ..OpOptions::default()
        };
        let cases = [
            (OpOptions::default(), ClientCapabilities::none(), None),
            (traced, rich.clone(), Some(Id::from(9))),
            (half_traced, rich, Some(Id::from("tok"))),
            (OpOptions::default(), ClientCapabilities::none(), None),
        ];
        for (options, declared, token) in cases {
            let mut op = op_with(Operation::Discover, options, declared);
            op.progress_token = token;
            for version in [LATEST_PROTOCOL_VERSION, "2099-01-01"] {
                let expected = Value::Object(client.meta_for(&op, version).to_object()).to_string();
                let text = client.meta_texts.request_meta_text(&op, version).unwrap();
                assert_eq!(text, expected);
            }
        }
    }

    fn operations() -> Vec<Operation> {
        let mut arguments = JsonObject::new();
        arguments.insert("text".to_owned(), Value::String("h\u{e9}\"llo".to_owned()));
        arguments.insert(
            "n".to_owned(),
            serde_json::json!({"b": [1, 2.5], "a": null}),
        );
        vec![
            Operation::Discover,
            Operation::List {
                kind: ListKind::Tools,
                cursor: None,
            },
            Operation::List {
                kind: ListKind::Resources,
                cursor: Some("c\n1".to_owned()),
            },
            Operation::CallTool {
                name: "echo".to_owned(),
                arguments: arguments.clone(),
            },
            Operation::GetPrompt {
                name: "p".to_owned(),
                arguments,
            },
            Operation::ReadResource {
                uri: "file:///a".to_owned(),
            },
        ]
    }

    /// The params a fresh modern request carries are, byte for byte, the params object with
    /// its `_meta` serialized whole (key order included), and its members are that text's.
    #[test]
    fn fresh_params_are_the_serialized_params_object() {
        let mut client = client();
        for operation in operations() {
            let op = traced_op(operation);
            let mut whole = op.operation.params();
            let meta = client.meta_for(&op, LATEST_PROTOCOL_VERSION).to_object();
            whole.insert("_meta".to_owned(), Value::Object(meta));
            let expected = Value::Object(whole).to_string();
            let (text, members) =
                fresh_params(&mut client.meta_texts, &op, LATEST_PROTOCOL_VERSION, true).unwrap();
            assert_eq!(text, expected, "{op:?}", op = op.operation);
            let read: Vec<(String, String)> = mrtr::raw_members(&expected)
                .unwrap()
                .into_iter()
                .map(|(k, v)| (k, v.get().to_owned()))
                .collect();
            let members: Vec<(String, String)> = members
                .unwrap()
                .into_iter()
                .map(|(k, v)| (k, v.into_string()))
                .collect();
            assert_eq!(members, read);
        }
    }

    /// The headers read from an operation's fields are those read from the request it sends.
    #[test]
    fn header_fields_give_the_headers_of_the_request_value() {
        let mut client = client();
        for operation in operations() {
            let op = traced_op(operation);
            let (text, _) =
                fresh_params(&mut client.meta_texts, &op, LATEST_PROTOCOL_VERSION, false).unwrap();
            let body = jsonrpc_request_value(&Id::from(3), op.operation.method(), &text);
            let op = op.operation;
            assert_eq!(
                headers::headers_for_fields(&op.header_fields(LATEST_PROTOCOL_VERSION), None),
                headers::request_headers_for(&body, None),
                "{op:?}"
            );
        }
        // `Mcp-Param-*` from a tool's annotations, nested ones and unencodable arguments too.
        let schema = serde_json::json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "target": {"type": "object", "properties": {
                "zone": {"type": "integer", "x-mcp-header": "Zone"}}}}});
        let tool = headers::tool_headers("echo", &schema).unwrap();
        let mut arguments = JsonObject::new();
        arguments.insert("region".to_owned(), Value::String("eu".to_owned()));
        let op = Operation::CallTool {
            name: "echo".to_owned(),
            arguments,
        };
        let fields = op.header_fields(LATEST_PROTOCOL_VERSION);
        let h = headers::headers_for_fields(&fields, Some(&tool)).unwrap();
        assert_eq!(h.get("Mcp-Param-Region"), Some("eu"));
        for arguments in [
            serde_json::json!({"region": "eu", "target": {"zone": 3}}),
            serde_json::json!({"region": null, "target": 5}),
            serde_json::json!({"target": {"zone": 1.5}}),
            serde_json::json!({"target": {"zone": [1]}, "region": "\u{e9}"}),
            serde_json::json!({}),
        ] {
            let Value::Object(arguments) = arguments else {
                unreachable!()
            };
            for name in ["echo", "other"] {
                let op = traced_op(Operation::CallTool {
                    name: name.to_owned(),
                    arguments: arguments.clone(),
                });
                let (text, _) =
                    fresh_params(&mut client.meta_texts, &op, LATEST_PROTOCOL_VERSION, false)
                        .unwrap();
                let body = jsonrpc_request_value(&Id::from(3), op.operation.method(), &text);
                let op = op.operation;
                let fields = op.header_fields(LATEST_PROTOCOL_VERSION);
                assert_eq!(
                    headers::headers_for_fields(&fields, Some(&tool)),
                    headers::request_headers_for(&body, Some(&tool)),
                    "{arguments:?}"
                );
            }
        }
    }
}

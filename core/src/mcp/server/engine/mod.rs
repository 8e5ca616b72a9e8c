//! The server's state machine: exchanges, requests, sessions and streams, and every protocol
//! decision between an input and its outputs (see the module docs of `mcp::server`). The
//! state and small pieces are here; the rest by concern in `streams`, `transport`,
//! `messages` and `app`.

mod app;
mod messages;
mod streams;
mod transport;

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde_json::{json, Map, Value};

use crate::http::Headers;
use crate::jsonrpc::{self, code, ErrorObject, Id, Message, MessageError};
use crate::mcp::cache::ListKind;
use crate::mcp::era::Era;
use crate::mcp::headers::{PROTOCOL_VERSION_HEADER, PROTOCOL_VERSION_META_KEY, SESSION_ID_HEADER};
use crate::mcp::meta::{
    ClientCapabilities, Implementation, JsonObject, LoggingLevel, PROGRESS_TOKEN_KEY,
    SERVER_INFO_KEY, SUBSCRIPTION_ID_KEY,
};
use crate::mcp::mrtr::input_required_allowed;
use crate::mcp::results::Tool;
use crate::mcp::KNOWN_LEGACY_VERSIONS;
use crate::stdio_lines::{LineFramer, Piece};
use crate::time::{Duration, Instant, UNIX_EPOCH};

use super::config::CacheHint;
use super::legacy::{self, STDIO_SESSION};
use super::modern::{self, ListenFilter, ModernMeta, Refusal, MODERN_VERSION};
use super::request_state::{self, Binding, MAX_STATE_BYTES};
use super::{
    error_object, Call, CancelReason, CompleteRequest, CompletionReference, ExchangeId, HttpMethod,
    HttpOutput, HttpRequest, Incoming, InputRequest, Notice, Output, Reply, RequestContext,
    RequestId, ServerConfig, ServerEvent, SessionEndReason, SessionId, Timeout, TimeoutReason,
    TransportKind, UsageError,
};
use super::{http, pagination, sse, stdio};

/// The JSON-RPC code of server errors outside the spec's named ones (session missing,
/// too many requests): `-32000`, as the SDKs use.
const SERVER_ERROR: i64 = -32000;
/// The JSON-RPC code the SDKs use for an unknown session (`404`).
const SESSION_NOT_FOUND: i64 = -32001;

/// Where a request's messages go.
#[derive(Debug, Clone)]
enum Channel {
    Stdio,
    Http {
        exchange: ExchangeId,
        /// The SSE stream, once one started.
        stream: Option<u64>,
        /// The client accepts `text/event-stream`.
        sse_ok: bool,
        /// The client accepts `application/json` (one that takes only SSE gets its answer as
        /// a stream of one event).
        json_ok: bool,
    },
}

/// A legacy MRTR round waiting for the client's answers.
#[derive(Debug)]
struct Waiting {
    /// Outgoing request id → input key.
    pending: BTreeMap<i128, String>,
    /// Answers so far, by key.
    answers: JsonObject,
    state: Option<String>,
    deadline: Instant,
}

#[derive(Debug)]
struct Req {
    jsonrpc_id: Id,
    method: String,
    era: Era,
    session: Option<String>,
    channel: Channel,
    call: Call,
    context: RequestContext,
    /// The list offset asked (`cursor`).
    offset: usize,
    /// A `subscriptions/listen` stream, once acknowledged (the filter it honours).
    listen: Option<ListenFilter>,
    /// A `subscriptions/listen` waiting for the application to accept its resource URIs
    /// ([`Call::Listen`]): the filter asked, before the acknowledgment.
    pending_listen: Option<ListenFilter>,
    waiting: Option<Waiting>,
    /// The application holds the request (an event went out, no answer yet).
    with_app: bool,
}

#[derive(Debug)]
struct Session {
    version: String,
    capabilities: ClientCapabilities,
    client_info: Option<Implementation>,
    initialized: bool,
    log_level: Option<LoggingLevel>,
    subscriptions: BTreeSet<String>,
    /// The stream of session-wide messages (the GET stream), once there is one.
    get_stream: Option<u64>,
    last_seen: Instant,
    http: bool,
    /// Outgoing (server-to-client) request id → the request it serves.
    outgoing: BTreeMap<i128, RequestId>,
}

#[derive(Debug)]
struct Stream {
    session: Option<String>,
    /// The live connection, when there is one.
    exchange: Option<ExchangeId>,
    /// A POST stream's request (`None`: the session's GET stream).
    request: Option<RequestId>,
    next_seq: u64,
    /// The highest sequence number written to a live connection.
    delivered: u64,
    /// Events kept for `Last-Event-ID` (resumable streams only).
    backlog: VecDeque<(u64, Vec<u8>)>,
    resumable: bool,
    /// The final response is in the backlog / was sent.
    finished: bool,
}

#[derive(Debug, Default)]
struct ExchangeState {
    request: Option<RequestId>,
    stream: Option<u64>,
}

pub(super) struct Engine {
    pub(super) config: ServerConfig,
    first_seen: Option<Instant>,
    next_exchange: u64,
    next_request: u64,
    next_session: u64,
    next_stream: u64,
    next_outgoing: i128,
    exchanges: BTreeMap<ExchangeId, ExchangeState>,
    requests: BTreeMap<RequestId, Req>,
    sessions: BTreeMap<String, Session>,
    streams: BTreeMap<u64, Stream>,
    framer: LineFramer,
    events: VecDeque<ServerEvent>,
    outputs: VecDeque<Output>,
    shut: bool,
    /// When the next keep-alive comment goes out, while long-lived streams are open.
    keep_alive_at: Option<Instant>,
}

/// What a new request is, before it is admitted.
struct NewRequest {
    id: Id,
    method: String,
    params: JsonObject,
    era: Era,
    session: Option<String>,
    channel: Channel,
    headers: Option<Headers>,
    meta: Option<ModernMeta>,
}

/// How an early answer is sent.
enum Early {
    /// A JSON-RPC response of `status` on the request's channel.
    Answer(u16, Value),
    /// A refusal.
    Refuse(Refusal),
}

fn response_text(id: &Id, result: &Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string()
}

/// A number as JSON: an integral value as an integer (`3`, not `3.0`), else the float; a
/// non-finite one (which JSON has not) as `0`.
fn number(x: f64) -> Value {
    if x.is_finite() && x.fract() == 0.0 && x.abs() < 9.0e15 {
        json!(x as i64)
    } else {
        serde_json::Number::from_f64(x).map_or(json!(0), Value::Number)
    }
}

fn notification_text(method: &str, params: Value) -> String {
    json!({"jsonrpc": "2.0", "method": method, "params": params}).to_string()
}

/// The HTTP status of an error answered to a request of `era` (the spec pins some: `-32601` is
/// `404` in `2026-07-28`; header, capability and version errors are `400`).
fn status_of(era: Era, code: i64) -> u16 {
    match (era, code) {
        (Era::Modern, code::METHOD_NOT_FOUND) => 404,
        (
            Era::Modern,
            code::HEADER_MISMATCH
            | code::MISSING_REQUIRED_CLIENT_CAPABILITY
            | code::UNSUPPORTED_PROTOCOL_VERSION
            | code::PARSE_ERROR
            | code::INVALID_REQUEST,
        ) => 400,
        _ => 200,
    }
}

fn list_key(call: &Call) -> Option<(&'static str, ListKind)> {
    match call {
        Call::ListTools => Some(("tools", ListKind::Tools)),
        Call::ListPrompts => Some(("prompts", ListKind::Prompts)),
        Call::ListResources => Some(("resources", ListKind::Resources)),
        Call::ListResourceTemplates => Some(("resourceTemplates", ListKind::ResourceTemplates)),
        _ => None,
    }
}

fn progress_token(meta: &JsonObject) -> Option<Id> {
    match meta.get(PROGRESS_TOKEN_KEY)? {
        v @ (Value::String(_) | Value::Number(_)) => serde_json::from_value(v.clone()).ok(),
        _ => None,
    }
}

fn string_param(params: &JsonObject, key: &str, method: &str) -> Result<String, String> {
    params
        .get(key)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| format!("Invalid params: {method} needs a string params.{key}"))
}

fn object_param(params: &JsonObject, key: &str) -> Result<JsonObject, String> {
    match params.get(key) {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(m)) => Ok(m.clone()),
        Some(_) => Err(format!("Invalid params: {key} must be an object")),
    }
}

fn read_complete(params: &JsonObject) -> Result<CompleteRequest, String> {
    let bad = |m: &str| format!("Invalid params: completion/complete {m}");
    let reference = params
        .get("ref")
        .and_then(Value::as_object)
        .ok_or_else(|| bad("needs a ref object"))?;
    let reference = match reference.get("type").and_then(Value::as_str) {
        Some("ref/prompt") => CompletionReference::Prompt(
            reference
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| bad("ref/prompt needs a string name"))?
                .to_owned(),
        ),
        Some("ref/resource") => CompletionReference::Resource(
            reference
                .get("uri")
                .and_then(Value::as_str)
                .ok_or_else(|| bad("ref/resource needs a string uri"))?
                .to_owned(),
        ),
        _ => return Err(bad("ref.type must be ref/prompt or ref/resource")),
    };
    let argument = params
        .get("argument")
        .and_then(Value::as_object)
        .ok_or_else(|| bad("needs an argument object"))?;
    let name = argument
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("argument needs a string name"))?;
    let value = argument
        .get("value")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("argument needs a string value"))?;
    let context_arguments = match params.get("context").and_then(|c| c.get("arguments")) {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(_) => return Err(bad("context.arguments must be an object")),
    };
    Ok(CompleteRequest {
        reference,
        argument: name.to_owned(),
        value: value.to_owned(),
        context_arguments,
    })
}

/// Reads what a request asks the application, or `None` for the methods the core serves.
fn read_call(method: &str, params: &JsonObject) -> Result<Call, String> {
    Ok(match method {
        "tools/list" => Call::ListTools,
        "tools/call" => Call::CallTool {
            name: string_param(params, "name", method)?,
            arguments: object_param(params, "arguments")?,
        },
        "resources/list" => Call::ListResources,
        "resources/templates/list" => Call::ListResourceTemplates,
        "resources/read" => Call::ReadResource {
            uri: string_param(params, "uri", method)?,
        },
        "resources/subscribe" => Call::Subscribe {
            uri: string_param(params, "uri", method)?,
        },
        "resources/unsubscribe" => Call::Unsubscribe {
            uri: string_param(params, "uri", method)?,
        },
        "prompts/list" => Call::ListPrompts,
        "prompts/get" => Call::GetPrompt {
            name: string_param(params, "name", method)?,
            arguments: object_param(params, "arguments")?,
        },
        "completion/complete" => Call::Complete(read_complete(params)?),
        other => Call::Other {
            method: other.to_owned(),
            params: params.clone(),
        },
    })
}

/// The `requestState` binding of a call: its method, name and arguments, and the HTTP
/// `Authorization` it came with.
fn binding_of(call: &Call, method: &str, headers: Option<&Headers>) -> Binding {
    let binding = binding_of_call(call, method);
    match headers.and_then(|h| h.get("Authorization")) {
        Some(credentials) => binding.with_principal(credentials.trim()),
        None => binding,
    }
}

fn binding_of_call(call: &Call, method: &str) -> Binding {
    match call {
        Call::CallTool { name, arguments } | Call::GetPrompt { name, arguments } => {
            Binding::new(method, name, Some(&Value::Object(arguments.clone())))
        }
        Call::ReadResource { uri } => Binding::new(method, uri, None),
        _ => Binding::new(method, "", None),
    }
}

impl Engine {
    pub(super) fn new(config: ServerConfig) -> Self {
        let max_line = config.limits.max_line_bytes;
        Engine {
            config,
            first_seen: None,
            next_exchange: 0,
            next_request: 0,
            next_session: 0,
            next_stream: 0,
            next_outgoing: 0,
            exchanges: BTreeMap::new(),
            requests: BTreeMap::new(),
            sessions: BTreeMap::new(),
            streams: BTreeMap::new(),
            framer: LineFramer::new(max_line),
            events: VecDeque::new(),
            outputs: VecDeque::new(),
            shut: false,
            keep_alive_at: None,
        }
    }

    pub(super) fn in_flight(&self) -> usize {
        self.requests
            .values()
            .filter(|r| r.listen.is_none())
            .count()
    }

    pub(super) fn open_sessions(&self) -> usize {
        self.sessions.len()
    }

    pub(super) fn open_exchanges(&self) -> usize {
        self.exchanges.len()
    }

    // -----------------------------------------------------------------------------------------
    // Small pieces
    // -----------------------------------------------------------------------------------------

    fn seen(&mut self, now: Instant) {
        self.first_seen.get_or_insert(now);
    }

    /// Unix seconds at `now`, from the driver's clock reading (or from the first instant seen).
    fn unix_now(&self, now: Instant) -> u64 {
        match self.config.wall_clock {
            Some(w) => {
                let wall = if now >= w.instant {
                    w.wall.checked_add(now.duration_since(w.instant))
                } else {
                    w.wall.checked_sub(w.instant.duration_since(now))
                };
                wall.and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                    .map_or(0, |d| d.as_secs())
            }
            None => self
                .first_seen
                .map_or(0, |first| now.saturating_duration_since(first).as_secs()),
        }
    }

    fn supported_versions(&self) -> Vec<String> {
        let mut v = Vec::new();
        if self.config.eras.modern {
            v.push(MODERN_VERSION.to_owned());
        }
        if self.config.eras.legacy {
            v.extend(KNOWN_LEGACY_VERSIONS.iter().map(|s| (*s).to_owned()));
        }
        v
    }

    fn capabilities(&self, era: Era) -> Value {
        let c = &self.config;
        let mut m = Map::new();
        let changes = |mut v: Value| {
            if c.list_changed {
                if let Some(o) = v.as_object_mut() {
                    o.insert("listChanged".into(), Value::Bool(true));
                }
            }
            v
        };
        if c.tools {
            m.insert("tools".into(), changes(json!({})));
        }
        if c.prompts {
            m.insert("prompts".into(), changes(json!({})));
        }
        if c.resources {
            m.insert("resources".into(), changes(json!({"subscribe": true})));
        }
        if c.logging {
            m.insert("logging".into(), json!({}));
        }
        if c.completions {
            m.insert("completions".into(), json!({}));
        }
        let _ = era;
        Value::Object(m)
    }

    fn server_info(&self) -> Value {
        serde_json::to_value(&self.config.info).unwrap_or(Value::Null)
    }

    /// Adds what every modern result carries: `resultType`, `_meta.serverInfo`, and the cache
    /// hints of a cacheable one.
    fn decorate_modern(&self, result: &mut Value, hint: Option<&CacheHint>) {
        let info = self.server_info();
        let Some(m) = result.as_object_mut() else {
            return;
        };
        m.entry("resultType").or_insert_with(|| json!("complete"));
        if let Some(hint) = hint {
            m.entry("ttlMs").or_insert_with(|| json!(hint.ttl_ms));
            m.entry("cacheScope")
                .or_insert_with(|| json!(hint.scope.as_str()));
        }
        let meta = m.entry("_meta").or_insert_with(|| json!({}));
        if let Some(meta) = meta.as_object_mut() {
            meta.entry(SERVER_INFO_KEY).or_insert(info);
        }
    }

    fn hint_for(&self, call: &Call) -> Option<&CacheHint> {
        let h = &self.config.cache;
        Some(match call {
            Call::ListTools => &h.tools,
            Call::ListPrompts => &h.prompts,
            Call::ListResources => &h.resources,
            Call::ListResourceTemplates => &h.resource_templates,
            Call::ReadResource { .. } => &h.read,
            _ => return None,
        })
    }

    fn push_http(&mut self, x: ExchangeId, out: HttpOutput) {
        let ends = matches!(out, HttpOutput::Response { .. } | HttpOutput::StreamEnd);
        self.outputs.push_back(Output::Http(x, out));
        if ends {
            self.exchanges.remove(&x);
        }
    }

    fn push_output(&mut self, out: Output) {
        if let Output::Http(x, HttpOutput::Response { .. } | HttpOutput::StreamEnd) = &out {
            self.exchanges.remove(x);
        }
        self.outputs.push_back(out);
    }

    fn stdio_line(&mut self, text: String) {
        self.outputs.push_back(Output::Stdio(stdio::line(text)));
    }

    // -----------------------------------------------------------------------------------------
    // Outputs and time
    // -----------------------------------------------------------------------------------------

    pub(super) fn poll_output(&mut self) -> Option<Output> {
        self.outputs.pop_front()
    }

    pub(super) fn poll_timeout(&self) -> Option<Timeout> {
        let mut best: Option<Timeout> = None;
        let mut consider = |at: Instant, reason: TimeoutReason| {
            if best.as_ref().is_none_or(|b| at < b.at) {
                best = Some(Timeout { at, reason });
            }
        };
        for (rid, r) in &self.requests {
            if let Some(w) = &r.waiting {
                consider(w.deadline, TimeoutReason::ServerRequest(*rid));
            }
        }
        if let Some(at) = self.keep_alive_at {
            consider(at, TimeoutReason::KeepAlive);
        }
        if let Some(idle) = self.config.timeouts.session_idle {
            for (id, s) in &self.sessions {
                if s.http {
                    consider(
                        s.last_seen + idle,
                        TimeoutReason::SessionIdle(SessionId(id.clone())),
                    );
                }
            }
        }
        best
    }

    pub(super) fn handle_timeout(&mut self, now: Instant) {
        self.seen(now);
        if self.keep_alive_at.is_some_and(|at| at <= now) {
            let live = self.long_lived();
            for x in &live {
                self.outputs
                    .push_back(Output::Http(*x, HttpOutput::StreamEvent(b":\n\n".to_vec())));
            }
            self.keep_alive_at = match (live.is_empty(), self.config.timeouts.keep_alive) {
                (false, Some(every)) => Some(now + every),
                _ => None,
            };
        }
        let expired: Vec<RequestId> = self
            .requests
            .iter()
            .filter(|(_, r)| r.waiting.as_ref().is_some_and(|w| w.deadline <= now))
            .map(|(k, _)| *k)
            .collect();
        let secs = self.config.timeouts.server_request.as_secs();
        for rid in expired {
            let e = error_object(
                code::INTERNAL_ERROR,
                format!("Internal error: the client did not answer the server's input request within {secs} s"),
            );
            self.finish_error(rid, 200, &e);
            self.events.push_back(ServerEvent::Cancelled {
                request: rid,
                reason: CancelReason::InputTimedOut,
            });
        }
        if let Some(idle) = self.config.timeouts.session_idle {
            let busy: BTreeSet<String> = self
                .requests
                .values()
                .filter_map(|r| r.session.clone())
                .collect();
            let idle_sessions: Vec<String> = self
                .sessions
                .iter()
                .filter(|(k, s)| s.http && s.last_seen + idle <= now && !busy.contains(*k))
                .map(|(k, _)| k.clone())
                .collect();
            for s in idle_sessions {
                self.close_session(&s, SessionEndReason::Idle);
            }
        }
    }

    /// Acknowledges the listen `rid` with `filter` (what the server honours) and opens its
    /// stream: the acknowledgment is the first message for it (`subscriptions.mdx`,
    /// "Acknowledgment": nothing on the subscription may precede it), and from here the stream
    /// is the core's.
    fn open_listen(&mut self, now: Instant, rid: RequestId, filter: ListenFilter) {
        let Some(req) = self.requests.get_mut(&rid) else {
            return;
        };
        let ack = notification_text(
            "notifications/subscriptions/acknowledged",
            json!({"_meta": {SUBSCRIPTION_ID_KEY: req.jsonrpc_id}, "notifications": filter.to_value()}),
        );
        req.listen = Some(filter);
        req.pending_listen = None;
        req.with_app = false;
        let http = matches!(req.channel, Channel::Http { .. });
        self.send_for(rid, ack);
        if http {
            self.arm_keep_alive(now);
        }
    }

    /// Ends the listen stream of `rid` as the server does on its own initiative: the teardown
    /// is announced (`basic/patterns/cancellation.mdx`: a server MUST send
    /// `notifications/cancelled` for a listen stream it ends), then the listen request gets its
    /// graceful result (`subscriptions.mdx`, "Graceful Closure").
    fn end_listen(&mut self, rid: RequestId, reason: &str) {
        let Some(req) = self.requests.get(&rid) else {
            return;
        };
        let id = req.jsonrpc_id.clone();
        let cancelled = notification_text(
            "notifications/cancelled",
            json!({"_meta": {SUBSCRIPTION_ID_KEY: id}, "requestId": id, "reason": reason}),
        );
        self.send_for(rid, cancelled);
        let result = json!({"resultType": "complete", "_meta": {SUBSCRIPTION_ID_KEY: id}});
        let text = response_text(&id, &result);
        self.finish(rid, 200, text, &[]);
    }

    /// Ends every open listen stream gracefully; how many there were.
    pub(super) fn end_listens(&mut self, now: Instant) -> usize {
        self.seen(now);
        let listens: Vec<RequestId> = self
            .requests
            .iter()
            .filter(|(_, r)| r.listen.is_some())
            .map(|(k, _)| *k)
            .collect();
        for rid in &listens {
            self.end_listen(*rid, "the server ended the subscription");
        }
        listens.len()
    }

    pub(super) fn shutdown(&mut self, now: Instant) {
        self.seen(now);
        self.shut = true;
        let all: Vec<RequestId> = self.requests.keys().copied().collect();
        for rid in all {
            let Some(req) = self.requests.get(&rid) else {
                continue;
            };
            if req.listen.is_some() {
                self.end_listen(rid, "the server is shutting down");
            } else {
                let e = error_object(
                    code::INTERNAL_ERROR,
                    "Internal error: the server is shutting down",
                );
                self.finish_error(rid, 503, &e);
                self.events.push_back(ServerEvent::Cancelled {
                    request: rid,
                    reason: CancelReason::Shutdown,
                });
            }
        }
        let sessions: Vec<String> = self.sessions.keys().cloned().collect();
        for s in sessions {
            self.close_session(&s, SessionEndReason::Shutdown);
        }
        let streams: Vec<u64> = self.streams.keys().copied().collect();
        for sid in streams {
            self.stream_end_connection(sid);
        }
        self.streams.clear();
        let _ = Duration::ZERO;
    }
}

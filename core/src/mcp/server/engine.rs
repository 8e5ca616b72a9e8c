//! The server's state machine: exchanges, requests, sessions and streams, and every protocol
//! decision between an input and its outputs (see the module docs of `mcp::server`).

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
    /// A `subscriptions/listen` stream.
    listen: Option<ListenFilter>,
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
        if c.tools {
            m.insert("tools".into(), json!({"listChanged": true}));
        }
        if c.prompts {
            m.insert("prompts".into(), json!({"listChanged": true}));
        }
        if c.resources {
            m.insert(
                "resources".into(),
                json!({"subscribe": true, "listChanged": true}),
            );
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
    // Streams
    // -----------------------------------------------------------------------------------------

    fn session_primes(&self, session: Option<&str>) -> bool {
        session
            .and_then(|s| self.sessions.get(s))
            .is_some_and(|s| s.version.as_str() >= "2025-11-25")
    }

    /// Starts an SSE response on `x` for `request` (or the session's GET stream).
    fn open_stream(
        &mut self,
        x: ExchangeId,
        session: Option<String>,
        request: Option<RequestId>,
    ) -> u64 {
        let sid = self.next_stream;
        self.next_stream += 1;
        let resumable = session.is_some() && session.as_deref() != Some(STDIO_SESSION);
        let prime = resumable && self.session_primes(session.as_deref());
        self.push_http(
            x,
            HttpOutput::StreamStart {
                status: 200,
                headers: http::stream_headers(session.as_deref()),
            },
        );
        if let Some(e) = self.exchanges.get_mut(&x) {
            e.stream = Some(sid);
        }
        let mut stream = Stream {
            session,
            exchange: Some(x),
            request,
            next_seq: 1,
            delivered: 0,
            backlog: VecDeque::new(),
            resumable,
            finished: false,
        };
        if prime {
            let retry = self.config.timeouts.sse_retry.map(|d| d.as_millis());
            self.outputs.push_back(Output::Http(
                x,
                HttpOutput::StreamEvent(sse::priming(&sse::event_id(sid, 0), retry)),
            ));
        }
        stream.delivered = 0;
        self.streams.insert(sid, stream);
        self.bound_streams();
        sid
    }

    /// Drops the oldest detached finished streams beyond the bound.
    fn bound_streams(&mut self) {
        let max = self.config.limits.max_streams;
        while self.streams.len() > max {
            let victim = self
                .streams
                .iter()
                .find(|(_, s)| s.exchange.is_none() && (s.finished || s.request.is_none()))
                .map(|(k, _)| *k);
            match victim {
                Some(k) => {
                    self.streams.remove(&k);
                    for s in self.sessions.values_mut() {
                        if s.get_stream == Some(k) {
                            s.get_stream = None;
                        }
                    }
                }
                None => break,
            }
        }
    }

    /// Writes one message on stream `sid` (kept for replay when resumable).
    fn stream_send(&mut self, sid: u64, text: &str) {
        let max = self.config.limits.max_sse_backlog;
        let Some(s) = self.streams.get_mut(&sid) else {
            return;
        };
        let seq = s.next_seq;
        s.next_seq += 1;
        let id = s.resumable.then(|| sse::event_id(sid, seq));
        let bytes = sse::event(id.as_deref(), text);
        if s.resumable {
            s.backlog.push_back((seq, bytes.clone()));
            while s.backlog.len() > max {
                s.backlog.pop_front();
            }
        }
        if let Some(x) = s.exchange {
            s.delivered = seq;
            self.outputs
                .push_back(Output::Http(x, HttpOutput::StreamEvent(bytes)));
        }
    }

    /// Ends stream `sid`'s live connection (if any).
    fn stream_end_connection(&mut self, sid: u64) {
        if let Some(x) = self.streams.get_mut(&sid).and_then(|s| s.exchange.take()) {
            self.push_http(x, HttpOutput::StreamEnd);
        }
    }

    // -----------------------------------------------------------------------------------------
    // Sending for a request
    // -----------------------------------------------------------------------------------------

    /// Sends a message related to `rid` before its response; `false` when it cannot go (the
    /// client takes no SSE, or nothing is attached).
    fn send_for(&mut self, rid: RequestId, text: String) -> bool {
        let Some(req) = self.requests.get(&rid) else {
            return false;
        };
        match req.channel.clone() {
            Channel::Stdio => {
                self.stdio_line(text);
                true
            }
            Channel::Http {
                stream: Some(sid), ..
            } => {
                self.stream_send(sid, &text);
                true
            }
            Channel::Http {
                exchange,
                stream: None,
                sse_ok,
            } => {
                if !sse_ok || !self.exchanges.contains_key(&exchange) {
                    return false;
                }
                let session = req.session.clone().filter(|_| req.era == Era::Legacy);
                let sid = self.open_stream(exchange, session, Some(rid));
                if let Some(req) = self.requests.get_mut(&rid) {
                    req.channel = Channel::Http {
                        exchange,
                        stream: Some(sid),
                        sse_ok,
                    };
                }
                self.stream_send(sid, &text);
                true
            }
        }
    }

    /// Sends a message to a legacy session as a whole (its GET stream, or stdout).
    fn session_send(&mut self, session: &str, text: String) {
        let Some(s) = self.sessions.get(session) else {
            return;
        };
        if !s.http {
            self.stdio_line(text);
            return;
        }
        let sid = match s.get_stream {
            Some(sid) if self.streams.contains_key(&sid) => sid,
            _ => {
                let sid = self.next_stream;
                self.next_stream += 1;
                self.streams.insert(
                    sid,
                    Stream {
                        session: Some(session.to_owned()),
                        exchange: None,
                        request: None,
                        next_seq: 1,
                        delivered: 0,
                        backlog: VecDeque::new(),
                        resumable: true,
                        finished: false,
                    },
                );
                if let Some(s) = self.sessions.get_mut(session) {
                    s.get_stream = Some(sid);
                }
                self.bound_streams();
                sid
            }
        };
        self.stream_send(sid, &text);
    }

    /// Answers `rid` with `text` (its response) and forgets it.
    fn finish(&mut self, rid: RequestId, status: u16, text: String, extra: &[(&str, &str)]) {
        let Some(req) = self.requests.remove(&rid) else {
            return;
        };
        if let (Some(session), Some(w)) = (&req.session, &req.waiting) {
            if let Some(s) = self.sessions.get_mut(session) {
                for oid in w.pending.keys() {
                    s.outgoing.remove(oid);
                }
            }
        }
        match req.channel {
            Channel::Stdio => self.stdio_line(text),
            Channel::Http {
                exchange,
                stream: None,
                ..
            } => {
                if self.exchanges.contains_key(&exchange) {
                    let mut headers = http::header_list(&[("Content-Type", "application/json")]);
                    for (n, v) in extra {
                        let _ = headers.append(*n, *v);
                    }
                    self.push_http(
                        exchange,
                        HttpOutput::Response {
                            status,
                            headers,
                            body: text.into_bytes(),
                        },
                    );
                }
            }
            Channel::Http {
                stream: Some(sid), ..
            } => {
                self.stream_send(sid, &text);
                let attached = match self.streams.get_mut(&sid) {
                    Some(s) => {
                        s.finished = true;
                        s.request = None;
                        s.exchange.is_some() || !s.resumable
                    }
                    None => false,
                };
                if attached {
                    self.stream_end_connection(sid);
                    self.streams.remove(&sid);
                }
            }
        }
    }

    fn finish_error(&mut self, rid: RequestId, status: u16, error: &ErrorObject) {
        let Some(req) = self.requests.get(&rid) else {
            return;
        };
        let text = jsonrpc::error_response(Some(&req.jsonrpc_id), error);
        self.finish(rid, status, text, &[]);
    }

    /// An answer sent before a request is admitted (no `RequestId`).
    fn early(&mut self, channel: &Channel, id: Option<&Id>, era: Era, early: Early) {
        let (status, text) = match early {
            Early::Answer(status, result) => {
                let id = id.cloned().unwrap_or(Id::Number(0));
                (status, response_text(&id, &result))
            }
            Early::Refuse(r) => (r.status, jsonrpc::error_response(id, &r.error)),
        };
        let _ = era;
        match channel {
            Channel::Stdio => self.stdio_line(text),
            Channel::Http { exchange, .. } => {
                if self.exchanges.contains_key(exchange) {
                    self.push_http(
                        *exchange,
                        HttpOutput::Response {
                            status,
                            headers: http::header_list(&[("Content-Type", "application/json")]),
                            body: text.into_bytes(),
                        },
                    );
                }
            }
        }
    }

    // -----------------------------------------------------------------------------------------
    // stdio
    // -----------------------------------------------------------------------------------------

    pub(super) fn stdio_bytes(&mut self, now: Instant, bytes: &[u8]) {
        self.seen(now);
        let mut lines: Vec<Option<Vec<u8>>> = Vec::new();
        self.framer.push(bytes, |piece| match piece {
            Piece::Line(l) => lines.push(Some(l.to_vec())),
            Piece::Overlong(_) => {}
            Piece::OverlongEnd => lines.push(None),
        });
        for line in lines {
            match line {
                Some(l) => self.stdio_line_in(now, &l),
                None => {
                    let e = stdio::overlong(self.config.limits.max_line_bytes);
                    self.stdio_line(jsonrpc::error_response(None, &e));
                }
            }
        }
    }

    pub(super) fn stdio_eof(&mut self, now: Instant) {
        self.seen(now);
        let mut lines: Vec<Option<Vec<u8>>> = Vec::new();
        self.framer.finish(|piece| match piece {
            Piece::Line(l) => lines.push(Some(l.to_vec())),
            Piece::Overlong(_) => {}
            Piece::OverlongEnd => lines.push(None),
        });
        for line in lines {
            match line {
                Some(l) => self.stdio_line_in(now, &l),
                None => {
                    let e = stdio::overlong(self.config.limits.max_line_bytes);
                    self.stdio_line(jsonrpc::error_response(None, &e));
                }
            }
        }
        let stdio: Vec<RequestId> = self
            .requests
            .iter()
            .filter(|(_, r)| matches!(r.channel, Channel::Stdio))
            .map(|(k, _)| *k)
            .collect();
        for rid in stdio {
            self.drop_request(rid, Some(CancelReason::StdioEnded));
        }
        if self.sessions.contains_key(STDIO_SESSION) {
            self.close_session(STDIO_SESSION, SessionEndReason::StdioEnded);
        }
    }

    fn stdio_line_in(&mut self, now: Instant, line: &[u8]) {
        let Ok(text) = std::str::from_utf8(line) else {
            let e = error_object(code::PARSE_ERROR, "Parse error: the line is not UTF-8");
            self.stdio_line(jsonrpc::error_response(None, &e));
            return;
        };
        let text = text.trim();
        if text.is_empty() {
            return;
        }
        self.message_in(now, text, Channel::Stdio, None);
    }

    // -----------------------------------------------------------------------------------------
    // HTTP
    // -----------------------------------------------------------------------------------------

    pub(super) fn http_request(&mut self, now: Instant, req: HttpRequest) -> ExchangeId {
        self.seen(now);
        let x = ExchangeId(self.next_exchange);
        self.next_exchange += 1;
        self.exchanges.insert(x, ExchangeState::default());
        let path = req.path.split(['?', '#']).next().unwrap_or("");
        if path != self.config.http_path {
            let e = error_object(
                SERVER_ERROR,
                format!("Not Found: the MCP endpoint is {}", self.config.http_path),
            );
            let out = http::error_response(x, 404, None, &e, &[]);
            self.push_output(out);
            return x;
        }
        if let Err(why) = http::check_host_origin(&self.config.origin_policy, &req.headers) {
            let e = error_object(SERVER_ERROR, format!("Forbidden: {why}"));
            let out = http::error_response(x, 403, None, &e, &[]);
            self.push_output(out);
            return x;
        }
        if self.shut {
            let e = error_object(
                SERVER_ERROR,
                "Service Unavailable: the server is shutting down",
            );
            let out = http::error_response(x, 503, None, &e, &[]);
            self.push_output(out);
            return x;
        }
        match req.method {
            HttpMethod::Post => self.post(now, x, req),
            HttpMethod::Get => self.get(now, x, &req.headers),
            HttpMethod::Delete => self.delete(x, &req.headers),
            HttpMethod::Other(_) => {
                let allow = if self.config.eras.legacy {
                    "GET, POST, DELETE"
                } else {
                    "POST"
                };
                let out = http::status_only(x, 405, &[("Allow", allow)]);
                self.push_output(out);
            }
        }
        x
    }

    fn refuse_http(&mut self, x: ExchangeId, status: u16, code: i64, message: impl Into<String>) {
        let e = error_object(code, message);
        let out = http::error_response(x, status, None, &e, &[]);
        self.push_output(out);
    }

    fn post(&mut self, now: Instant, x: ExchangeId, req: HttpRequest) {
        if req.body.len() > self.config.limits.max_body_bytes {
            return self.refuse_http(
                x,
                413,
                code::INVALID_REQUEST,
                format!(
                    "Payload Too Large: the body is limited to {} bytes",
                    self.config.limits.max_body_bytes
                ),
            );
        }
        if !http::is_json_content(&req.headers) {
            return self.refuse_http(
                x,
                415,
                code::INVALID_REQUEST,
                "Unsupported Media Type: the body must be application/json",
            );
        }
        let (json_ok, sse_ok) = http::accepts(&req.headers);
        if !json_ok && !sse_ok {
            return self.refuse_http(
                x,
                406,
                code::INVALID_REQUEST,
                "Not Acceptable: Accept must list application/json and text/event-stream",
            );
        }
        let Ok(text) = std::str::from_utf8(&req.body) else {
            return self.refuse_http(
                x,
                400,
                code::PARSE_ERROR,
                "Parse error: the body is not UTF-8",
            );
        };
        let channel = Channel::Http {
            exchange: x,
            stream: None,
            sse_ok,
        };
        self.message_in(now, text, channel, Some(req.headers));
    }

    fn http_session<'a>(&self, headers: &'a Headers) -> Result<Option<&'a str>, (u16, String)> {
        let mut all = headers.get_all(SESSION_ID_HEADER);
        let first = all.next();
        if all.next().is_some() {
            return Err((
                400,
                "Bad Request: Mcp-Session-Id is sent more than once".into(),
            ));
        }
        Ok(first.map(str::trim))
    }

    fn get(&mut self, now: Instant, x: ExchangeId, headers: &Headers) {
        if !self.config.eras.legacy {
            let out = http::status_only(x, 405, &[("Allow", "POST")]);
            return self.push_output(out);
        }
        let session = match self.http_session(headers) {
            Ok(s) => s.map(str::to_owned),
            Err((status, m)) => return self.refuse_http(x, status, SERVER_ERROR, m),
        };
        let Some(session) = session else {
            if self.config.eras.modern {
                let out = http::status_only(x, 405, &[("Allow", "POST, DELETE")]);
                return self.push_output(out);
            }
            return self.refuse_http(
                x,
                400,
                SERVER_ERROR,
                "Bad Request: GET needs an Mcp-Session-Id header (send initialize first)",
            );
        };
        if !self.sessions.get(&session).is_some_and(|s| s.http) {
            return self.refuse_http(x, 404, SESSION_NOT_FOUND, "Session not found");
        }
        if !http::accepts(headers).1 {
            return self.refuse_http(
                x,
                406,
                code::INVALID_REQUEST,
                "Not Acceptable: a GET stream needs Accept: text/event-stream",
            );
        }
        if let Some(s) = self.sessions.get_mut(&session) {
            s.last_seen = now;
        }
        // A resumption: the stream the last event belonged to, from the event after it.
        if let Some(last) = headers.get("Last-Event-ID") {
            if let Some((sid, seq)) = sse::parse_event_id(last) {
                let ours = self
                    .streams
                    .get(&sid)
                    .is_some_and(|s| s.session.as_deref() == Some(session.as_str()) && s.resumable);
                if ours {
                    return self.resume(x, sid, seq);
                }
            }
        }
        let current = self.sessions.get(&session).and_then(|s| s.get_stream);
        if let Some(sid) = current {
            if self.streams.get(&sid).is_some_and(|s| s.exchange.is_some()) {
                return self.refuse_http(
                    x,
                    409,
                    SERVER_ERROR,
                    "Conflict: this session already has a GET stream open",
                );
            }
            if self.streams.contains_key(&sid) {
                let from = self.streams.get(&sid).map_or(0, |s| s.delivered);
                return self.resume(x, sid, from);
            }
        }
        let sid = self.open_stream(x, Some(session.clone()), None);
        if let Some(s) = self.sessions.get_mut(&session) {
            s.get_stream = Some(sid);
        }
        self.arm_keep_alive(now);
    }

    fn arm_keep_alive(&mut self, now: Instant) {
        if let (None, Some(every)) = (self.keep_alive_at, self.config.timeouts.keep_alive) {
            self.keep_alive_at = Some(now + every);
        }
    }

    /// The live connections of long-lived streams: listen streams and GET streams.
    fn long_lived(&self) -> Vec<ExchangeId> {
        let mut out: Vec<ExchangeId> = self
            .streams
            .values()
            .filter(|s| {
                s.exchange.is_some()
                    && s.request
                        .is_none_or(|r| self.requests.get(&r).is_some_and(|r| r.listen.is_some()))
            })
            .filter_map(|s| s.exchange)
            .collect();
        out.sort();
        out
    }

    /// Attaches `x` to stream `sid` and replays what came after event `after`.
    fn resume(&mut self, x: ExchangeId, sid: u64, after: u64) {
        let session = self.streams.get(&sid).and_then(|s| s.session.clone());
        if let Some(old) = self.streams.get(&sid).and_then(|s| s.exchange) {
            // A second connection to the same stream replaces the first.
            self.push_http(old, HttpOutput::StreamEnd);
        }
        self.push_http(
            x,
            HttpOutput::StreamStart {
                status: 200,
                headers: http::stream_headers(session.as_deref()),
            },
        );
        if let Some(e) = self.exchanges.get_mut(&x) {
            e.stream = Some(sid);
        }
        let Some(s) = self.streams.get_mut(&sid) else {
            return;
        };
        s.exchange = Some(x);
        let replay: Vec<(u64, Vec<u8>)> = s
            .backlog
            .iter()
            .filter(|(seq, _)| *seq > after)
            .cloned()
            .collect();
        for (seq, bytes) in replay {
            s.delivered = s.delivered.max(seq);
            self.outputs
                .push_back(Output::Http(x, HttpOutput::StreamEvent(bytes)));
        }
        let finished = s.finished;
        let request = s.request;
        if let Some(rid) = request {
            if let Some(e) = self.exchanges.get_mut(&x) {
                e.request = Some(rid);
            }
            if let Some(Req {
                channel: Channel::Http { exchange, .. },
                ..
            }) = self.requests.get_mut(&rid)
            {
                *exchange = x;
            }
        }
        if finished {
            self.stream_end_connection(sid);
            self.streams.remove(&sid);
        }
    }

    fn delete(&mut self, x: ExchangeId, headers: &Headers) {
        if !self.config.eras.legacy {
            let out = http::status_only(x, 405, &[("Allow", "POST")]);
            return self.push_output(out);
        }
        let session = match self.http_session(headers) {
            Ok(Some(s)) => s.to_owned(),
            Ok(None) => {
                return self.refuse_http(
                    x,
                    400,
                    SERVER_ERROR,
                    "Bad Request: DELETE needs an Mcp-Session-Id header",
                )
            }
            Err((status, m)) => return self.refuse_http(x, status, SERVER_ERROR, m),
        };
        if !self.sessions.get(&session).is_some_and(|s| s.http) {
            return self.refuse_http(x, 404, SESSION_NOT_FOUND, "Session not found");
        }
        self.close_session(&session, SessionEndReason::Deleted);
        let out = http::status_only(x, 204, &[]);
        self.push_output(out);
    }

    pub(super) fn exchange_closed(
        &mut self,
        now: Instant,
        x: ExchangeId,
    ) -> Result<(), UsageError> {
        self.seen(now);
        if x.0 >= self.next_exchange {
            return Err(UsageError::UnknownExchange(x));
        }
        let Some(state) = self.exchanges.remove(&x) else {
            return Ok(());
        };
        if let Some(sid) = state.stream {
            let (resumable, request) = match self.streams.get_mut(&sid) {
                Some(s) if s.exchange == Some(x) => {
                    s.exchange = None;
                    (s.resumable, s.request)
                }
                _ => return Ok(()),
            };
            if !resumable {
                self.streams.remove(&sid);
                if let Some(rid) = request {
                    self.drop_request(rid, Some(CancelReason::ExchangeClosed));
                }
            }
            return Ok(());
        }
        if let Some(rid) = state.request {
            let same = matches!(
                self.requests.get(&rid).map(|r| &r.channel),
                Some(Channel::Http { exchange, .. }) if *exchange == x
            );
            if same {
                self.drop_request(rid, Some(CancelReason::ExchangeClosed));
            }
        }
        Ok(())
    }

    /// Forgets a request without answering it; tells the application when it held it (a
    /// listen stream is the core's own).
    fn drop_request(&mut self, rid: RequestId, reason: Option<CancelReason>) {
        let Some(req) = self.requests.remove(&rid) else {
            return;
        };
        if let (Some(session), Some(w)) = (&req.session, &req.waiting) {
            if let Some(s) = self.sessions.get_mut(session) {
                for oid in w.pending.keys() {
                    s.outgoing.remove(oid);
                }
            }
        }
        if let Channel::Http {
            exchange, stream, ..
        } = req.channel
        {
            match stream {
                Some(sid) => {
                    self.stream_end_connection(sid);
                    self.streams.remove(&sid);
                }
                None => {
                    if self.exchanges.contains_key(&exchange) {
                        self.push_http(
                            exchange,
                            HttpOutput::Response {
                                status: 204,
                                headers: Headers::new(),
                                body: Vec::new(),
                            },
                        );
                    }
                }
            }
        }
        if req.listen.is_none() {
            if let Some(reason) = reason {
                self.events.push_back(ServerEvent::Cancelled {
                    request: rid,
                    reason,
                });
            }
        }
    }

    fn close_session(&mut self, session: &str, reason: SessionEndReason) {
        let Some(s) = self.sessions.remove(session) else {
            return;
        };
        let _ = s;
        let reqs: Vec<RequestId> = self
            .requests
            .iter()
            .filter(|(_, r)| r.session.as_deref() == Some(session))
            .map(|(k, _)| *k)
            .collect();
        let cancel = match reason {
            SessionEndReason::StdioEnded => CancelReason::StdioEnded,
            SessionEndReason::Shutdown => CancelReason::Shutdown,
            _ => CancelReason::SessionClosed,
        };
        for rid in reqs {
            self.drop_request(rid, Some(cancel.clone()));
        }
        let streams: Vec<u64> = self
            .streams
            .iter()
            .filter(|(_, st)| st.session.as_deref() == Some(session))
            .map(|(k, _)| *k)
            .collect();
        for sid in streams {
            self.stream_end_connection(sid);
            self.streams.remove(&sid);
        }
        self.events.push_back(ServerEvent::SessionClosed {
            session: SessionId(session.to_owned()),
            reason,
        });
    }

    // -----------------------------------------------------------------------------------------
    // Messages (both transports)
    // -----------------------------------------------------------------------------------------

    fn message_in(&mut self, now: Instant, text: &str, channel: Channel, headers: Option<Headers>) {
        let http = headers.is_some();
        let message = match Message::parse(text) {
            Ok(m) => m,
            Err(e) => {
                let c = match e {
                    MessageError::Json(_) => code::PARSE_ERROR,
                    _ => code::INVALID_REQUEST,
                };
                let (c, m) = if text.trim_start().starts_with('[') {
                    (
                        code::INVALID_REQUEST,
                        "Invalid Request: batches are not supported; send one message".to_owned(),
                    )
                } else {
                    (c, format!("Invalid message: {e}"))
                };
                return self.early(
                    &channel,
                    None,
                    Era::Modern,
                    Early::Refuse(Refusal::new(400, c, m)),
                );
            }
        };
        // The session the HTTP request names, checked later per era.
        let session_header = match headers.as_ref().map(|h| self.http_session(h)) {
            None => None,
            Some(Ok(s)) => s.map(str::to_owned),
            Some(Err((status, m))) => {
                return self.early(
                    &channel,
                    None,
                    Era::Legacy,
                    Early::Refuse(Refusal::new(status, SERVER_ERROR, m)),
                )
            }
        };
        match message {
            Message::Response { id, result } => {
                let value: Value = serde_json::from_str(result.get()).unwrap_or(Value::Null);
                self.client_answer(now, &channel, session_header.as_deref(), id, value);
            }
            Message::Error { id, error } => match id {
                Some(id) => {
                    let value = json!({"error": error});
                    self.client_answer(now, &channel, session_header.as_deref(), id, value);
                }
                None => self.accepted(&channel),
            },
            Message::Notification { method, params } => {
                let params = match params.map(|p| serde_json::from_str::<Value>(p.get())) {
                    None => Map::new(),
                    Some(Ok(Value::Object(m))) => m,
                    Some(_) => Map::new(),
                };
                self.notification_in(now, &channel, session_header.as_deref(), &method, &params);
            }
            Message::Request { id, method, params } => {
                let params = match params.map(|p| serde_json::from_str::<Value>(p.get())) {
                    None => Map::new(),
                    Some(Ok(Value::Object(m))) => m,
                    Some(_) => {
                        return self.early(
                            &channel,
                            Some(&id),
                            Era::Modern,
                            Early::Refuse(Refusal::new(
                                400,
                                code::INVALID_PARAMS,
                                "Invalid params: params must be an object",
                            )),
                        )
                    }
                };
                if self.shut {
                    return self.early(
                        &channel,
                        Some(&id),
                        Era::Modern,
                        Early::Refuse(Refusal::new(
                            503,
                            SERVER_ERROR,
                            "The server is shutting down",
                        )),
                    );
                }
                self.request_in(
                    now,
                    channel,
                    headers,
                    session_header,
                    id,
                    method,
                    params,
                    http,
                );
            }
        }
    }

    /// `202` on HTTP; nothing on stdio.
    fn accepted(&mut self, channel: &Channel) {
        if let Channel::Http { exchange, .. } = channel {
            if self.exchanges.contains_key(exchange) {
                let out = http::status_only(*exchange, 202, &[]);
                self.push_output(out);
            }
        }
    }

    /// The legacy session a message on `channel` belongs to: stdio's, or the HTTP header's
    /// when it names an HTTP session.
    fn legacy_session_of(&self, channel: &Channel, header: Option<&str>) -> Option<String> {
        match channel {
            Channel::Stdio => self
                .sessions
                .contains_key(STDIO_SESSION)
                .then(|| STDIO_SESSION.to_owned()),
            Channel::Http { .. } => header
                .filter(|s| self.sessions.get(*s).is_some_and(|s| s.http))
                .map(str::to_owned),
        }
    }

    /// A client's answer to one of the server's requests (legacy MRTR).
    fn client_answer(
        &mut self,
        now: Instant,
        channel: &Channel,
        header: Option<&str>,
        id: Id,
        value: Value,
    ) {
        let session = self.legacy_session_of(channel, header);
        let Some(session) = session else {
            if let (Channel::Http { .. }, Some(_)) = (channel, header) {
                return self.early(
                    channel,
                    None,
                    Era::Legacy,
                    Early::Refuse(Refusal::new(404, SESSION_NOT_FOUND, "Session not found")),
                );
            }
            if matches!(channel, Channel::Http { .. }) {
                return self.early(
                    channel,
                    None,
                    Era::Modern,
                    Early::Refuse(Refusal::new(
                        400,
                        code::INVALID_REQUEST,
                        "Invalid Request: a client must not send JSON-RPC responses here",
                    )),
                );
            }
            return;
        };
        self.accepted(channel);
        let Id::Number(oid) = id else {
            return;
        };
        let rid = match self.sessions.get_mut(&session) {
            Some(s) => {
                s.last_seen = now;
                match s.outgoing.remove(&oid) {
                    Some(rid) => rid,
                    None => return,
                }
            }
            None => return,
        };
        let Some(req) = self.requests.get_mut(&rid) else {
            return;
        };
        let Some(w) = req.waiting.as_mut() else {
            return;
        };
        if let Some(key) = w.pending.remove(&oid) {
            w.answers.insert(key, value);
        }
        if w.pending.is_empty() {
            if let Some(w) = req.waiting.take() {
                req.context.input_responses = Some(w.answers);
                req.context.state = w.state;
                req.context.round += 1;
                req.with_app = true;
                let incoming = Incoming {
                    call: req.call.clone(),
                    context: req.context.clone(),
                };
                self.events.push_back(ServerEvent::Request(incoming));
            }
        }
    }

    fn notification_in(
        &mut self,
        now: Instant,
        channel: &Channel,
        header: Option<&str>,
        method: &str,
        params: &JsonObject,
    ) {
        let modern = params
            .get("_meta")
            .and_then(|m| m.get(PROTOCOL_VERSION_META_KEY))
            .is_some();
        let session = self.legacy_session_of(channel, header);
        if !modern && session.is_none() {
            if let (Channel::Http { .. }, Some(_)) = (channel, header) {
                return self.early(
                    channel,
                    None,
                    Era::Legacy,
                    Early::Refuse(Refusal::new(404, SESSION_NOT_FOUND, "Session not found")),
                );
            }
        }
        self.accepted(channel);
        if let Some(s) = session.as_ref().and_then(|s| self.sessions.get_mut(s)) {
            s.last_seen = now;
            if method == "notifications/initialized" {
                s.initialized = true;
            }
        }
        if method == "notifications/cancelled" {
            let target = params
                .get("requestId")
                .and_then(|v| serde_json::from_value::<Id>(v.clone()).ok());
            let reason = params
                .get("reason")
                .and_then(Value::as_str)
                .map(str::to_owned);
            let Some(target) = target else {
                return;
            };
            let found = self
                .requests
                .iter()
                .find(|(_, r)| {
                    r.jsonrpc_id == target
                        && match (&r.channel, channel) {
                            (Channel::Stdio, Channel::Stdio) => true,
                            (Channel::Http { .. }, Channel::Http { .. }) => {
                                session.is_some() && r.session == session
                            }
                            _ => false,
                        }
                })
                .map(|(k, _)| *k);
            if let Some(rid) = found {
                self.drop_request(rid, Some(CancelReason::Client(reason)));
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn request_in(
        &mut self,
        now: Instant,
        channel: Channel,
        headers: Option<Headers>,
        session_header: Option<String>,
        id: Id,
        method: String,
        params: JsonObject,
        http: bool,
    ) {
        let meta_version = params
            .get("_meta")
            .and_then(|m| m.get(PROTOCOL_VERSION_META_KEY))
            .is_some();
        let has_meta = params.contains_key("_meta");
        let eras = self.config.eras;
        let stdio_session =
            matches!(channel, Channel::Stdio) && self.sessions.contains_key(STDIO_SESSION);
        let modern_only = modern::MODERN_ONLY.contains(&method.as_str());
        // A legacy-only server reads everything as the legacy era, as a server of that era
        // would (a modern request without a session: `400`; `server/discover`: unknown).
        let legacy = eras.legacy
            && (!eras.modern || !meta_version)
            && (method == "initialize"
                || (http && session_header.is_some())
                || stdio_session
                || !eras.modern
                || (!http && method == "ping"));
        if legacy {
            self.legacy_request(now, channel, headers, session_header, id, method, params);
        } else if !meta_version && !has_meta && eras.legacy && http && !modern_only {
            // Neither era's shape: no `_meta` and no session.
            let r = Refusal::new(
                400,
                SERVER_ERROR,
                format!(
                    "Bad Request: no Mcp-Session-Id (send initialize first), and no _meta[\"{PROTOCOL_VERSION_META_KEY}\"] for 2026-07-28"
                ),
            );
            self.early(&channel, Some(&id), Era::Legacy, Early::Refuse(r));
        } else {
            self.modern_request(now, channel, headers, id, method, params);
        }
    }

    fn modern_request(
        &mut self,
        now: Instant,
        channel: Channel,
        headers: Option<Headers>,
        id: Id,
        method: String,
        params: JsonObject,
    ) {
        if method == "initialize" && !self.config.eras.legacy {
            let requested = params
                .get("protocolVersion")
                .cloned()
                .unwrap_or(Value::Null);
            let r = modern::unsupported_version(&self.supported_versions(), &requested);
            return self.early(&channel, Some(&id), Era::Modern, Early::Refuse(r));
        }
        let supported = self.supported_versions();
        let meta = match modern::check_meta(
            &params,
            headers.as_ref(),
            self.config.eras.modern,
            &supported,
        ) {
            Ok(m) => m,
            Err(r) => return self.early(&channel, Some(&id), Era::Modern, Early::Refuse(r)),
        };
        if let Some(h) = &headers {
            if let Err(r) = modern::check_standard_headers(h, &method, &params) {
                return self.early(&channel, Some(&id), Era::Modern, Early::Refuse(r));
            }
        }
        let nr = NewRequest {
            id,
            method,
            params,
            era: Era::Modern,
            session: None,
            channel,
            headers,
            meta: Some(meta),
        };
        self.admit(now, nr);
    }

    #[allow(clippy::too_many_arguments)]
    fn legacy_request(
        &mut self,
        now: Instant,
        channel: Channel,
        headers: Option<Headers>,
        session_header: Option<String>,
        id: Id,
        method: String,
        params: JsonObject,
    ) {
        if method == "initialize" {
            return self.initialize(now, channel, headers.is_some(), id, &params);
        }
        let session = match &channel {
            Channel::Stdio => self
                .sessions
                .contains_key(STDIO_SESSION)
                .then(|| STDIO_SESSION.to_owned()),
            Channel::Http { .. } => {
                let Some(sid) = session_header else {
                    let r = Refusal::new(
                        400,
                        SERVER_ERROR,
                        "Bad Request: no valid session ID provided (send initialize first)",
                    );
                    return self.early(&channel, Some(&id), Era::Legacy, Early::Refuse(r));
                };
                if !self.sessions.get(&sid).is_some_and(|s| s.http) {
                    let r = Refusal::new(404, SESSION_NOT_FOUND, "Session not found");
                    return self.early(&channel, Some(&id), Era::Legacy, Early::Refuse(r));
                }
                if let Some(v) = headers
                    .as_ref()
                    .and_then(|h| h.get(PROTOCOL_VERSION_HEADER))
                {
                    if !KNOWN_LEGACY_VERSIONS.contains(&v.trim()) {
                        let r = Refusal::new(
                            400,
                            SERVER_ERROR,
                            format!(
                                "Bad Request: unsupported {PROTOCOL_VERSION_HEADER}: {}",
                                v.trim()
                            ),
                        );
                        return self.early(&channel, Some(&id), Era::Legacy, Early::Refuse(r));
                    }
                }
                Some(sid)
            }
        };
        if let Some(s) = session.as_ref().and_then(|s| self.sessions.get_mut(s)) {
            s.last_seen = now;
        }
        if session.is_none() && method != "ping" && !modern::MODERN_ONLY.contains(&method.as_str())
        {
            // stdio before initialize (a modern-only method is unknown instead, below).
            let r = Refusal::new(
                200,
                code::INVALID_REQUEST,
                "Invalid Request: send initialize first (or _meta for 2026-07-28)",
            );
            return self.early(&channel, Some(&id), Era::Legacy, Early::Refuse(r));
        }
        let nr = NewRequest {
            id,
            method,
            params,
            era: Era::Legacy,
            session,
            channel,
            headers,
            meta: None,
        };
        self.admit(now, nr);
    }

    fn initialize(
        &mut self,
        now: Instant,
        channel: Channel,
        http: bool,
        id: Id,
        params: &JsonObject,
    ) {
        let init = match legacy::read_initialize(params) {
            Ok(i) => i,
            Err(r) => return self.early(&channel, Some(&id), Era::Legacy, Early::Refuse(r)),
        };
        let session = if http {
            let http_sessions = self.sessions.values().filter(|s| s.http).count();
            if http_sessions >= self.config.limits.max_sessions {
                let r = Refusal::new(
                    503,
                    SERVER_ERROR,
                    format!(
                        "Service Unavailable: {} sessions are open, the most this server keeps",
                        self.config.limits.max_sessions
                    ),
                );
                return self.early(&channel, Some(&id), Era::Legacy, Early::Refuse(r));
            }
            let n = self.next_session;
            self.next_session += 1;
            legacy::session_id(&self.config.secrets.session_seed, n)
        } else {
            if self.sessions.contains_key(STDIO_SESSION) {
                // A new initialize on stdio starts the session over.
                self.close_session(STDIO_SESSION, SessionEndReason::StdioEnded);
            }
            STDIO_SESSION.to_owned()
        };
        self.sessions.insert(
            session.clone(),
            Session {
                version: init.version.clone(),
                capabilities: init.capabilities,
                client_info: init.client_info,
                initialized: false,
                log_level: None,
                subscriptions: BTreeSet::new(),
                get_stream: None,
                last_seen: now,
                http,
                outgoing: BTreeMap::new(),
            },
        );
        self.events.push_back(ServerEvent::SessionOpened {
            session: SessionId(session.clone()),
        });
        let result = legacy::initialize_result(
            &init.version,
            self.capabilities(Era::Legacy),
            &self.config.info,
            self.config.instructions.as_deref(),
        );
        let text = response_text(&id, &result);
        match channel {
            Channel::Stdio => self.stdio_line(text),
            Channel::Http { exchange, .. } => {
                let mut headers = http::header_list(&[("Content-Type", "application/json")]);
                let _ = headers.append(SESSION_ID_HEADER, session.as_str());
                self.push_http(
                    exchange,
                    HttpOutput::Response {
                        status: 200,
                        headers,
                        body: text.into_bytes(),
                    },
                );
            }
        }
    }

    /// Bounds, routing of the methods the core serves, and the application's requests.
    fn admit(&mut self, now: Instant, nr: NewRequest) {
        let era = nr.era;
        let refuse = |s: &mut Self, status: u16, code: i64, m: String| {
            s.early(
                &nr.channel,
                Some(&nr.id),
                era,
                Early::Refuse(Refusal::new(status, code, m)),
            );
        };
        // A request id in use on the same connection.
        let duplicate = self.requests.values().any(|r| {
            r.jsonrpc_id == nr.id
                && match (&r.channel, &nr.channel) {
                    (Channel::Stdio, Channel::Stdio) => true,
                    (Channel::Http { .. }, Channel::Http { .. }) => {
                        nr.session.is_some() && r.session == nr.session
                    }
                    _ => false,
                }
        });
        if duplicate {
            return refuse(
                self,
                400,
                code::INVALID_REQUEST,
                format!("Invalid Request: request id {} is already in use", nr.id),
            );
        }
        let limits = &self.config.limits;
        let same_connection = self
            .requests
            .values()
            .filter(|r| match (&r.channel, &nr.channel) {
                (Channel::Stdio, Channel::Stdio) => true,
                (Channel::Http { .. }, Channel::Http { .. }) => {
                    nr.session.is_some() && r.session == nr.session
                }
                _ => false,
            })
            .count();
        let total = self.requests.len();
        if same_connection >= limits.max_in_flight_per_connection || total >= limits.max_in_flight {
            let (status, max) = if total >= limits.max_in_flight {
                (503, limits.max_in_flight)
            } else {
                (429, limits.max_in_flight_per_connection)
            };
            return refuse(
                self,
                status,
                SERVER_ERROR,
                format!("Too many requests in flight: at most {max} at once; retry when one is answered"),
            );
        }
        let method = nr.method.clone();
        let c = &self.config;
        let gated = match method.as_str() {
            "tools/list" | "tools/call" => !c.tools,
            "prompts/list" | "prompts/get" => !c.prompts,
            "resources/list" | "resources/templates/list" | "resources/read" => !c.resources,
            "resources/subscribe" | "resources/unsubscribe" => !c.resources || era == Era::Modern,
            "completion/complete" => !c.completions,
            "logging/setLevel" => !c.logging || era == Era::Modern,
            "ping" => era == Era::Modern,
            "initialize" => era == Era::Modern,
            "server/discover" | "subscriptions/listen" => era == Era::Legacy,
            _ => false,
        };
        if gated || (era == Era::Modern && modern::REMOVED.contains(&method.as_str())) {
            return refuse(
                self,
                status_of(era, code::METHOD_NOT_FOUND),
                code::METHOD_NOT_FOUND,
                format!("Method not found: {method}"),
            );
        }
        match method.as_str() {
            "ping" => {
                return self.early(
                    &nr.channel,
                    Some(&nr.id),
                    era,
                    Early::Answer(200, json!({})),
                );
            }
            "server/discover" => {
                let mut result = json!({
                    "supportedVersions": self.supported_versions(),
                    "capabilities": self.capabilities(Era::Modern),
                });
                if let (Some(text), Some(m)) =
                    (self.config.instructions.clone(), result.as_object_mut())
                {
                    m.insert("instructions".into(), Value::String(text));
                }
                let hint = self.config.cache.discover.clone();
                self.decorate_modern(&mut result, Some(&hint));
                return self.early(&nr.channel, Some(&nr.id), era, Early::Answer(200, result));
            }
            "logging/setLevel" => {
                let level = nr
                    .params
                    .get("level")
                    .and_then(|l| serde_json::from_value::<LoggingLevel>(l.clone()).ok());
                let Some(level) = level else {
                    return refuse(
                        self,
                        200,
                        code::INVALID_PARAMS,
                        "Invalid params: level must be one of debug, info, notice, warning, error, critical, alert, emergency".into(),
                    );
                };
                if let Some(s) = nr.session.as_ref().and_then(|s| self.sessions.get_mut(s)) {
                    s.log_level = Some(level);
                }
                return self.early(
                    &nr.channel,
                    Some(&nr.id),
                    era,
                    Early::Answer(200, json!({})),
                );
            }
            _ => {}
        }
        let call = if method == "subscriptions/listen" {
            Call::Other {
                method: method.clone(),
                params: Map::new(),
            }
        } else {
            match read_call(&method, &nr.params) {
                Ok(call) => call,
                Err(m) => {
                    let status = if era == Era::Modern { 400 } else { 200 };
                    return refuse(self, status, code::INVALID_PARAMS, m);
                }
            }
        };
        let offset = if list_key(&call).is_some() {
            match pagination::read_cursor(nr.params.get("cursor")) {
                Ok(o) => o,
                Err(m) => {
                    let status = if era == Era::Modern { 400 } else { 200 };
                    return refuse(self, status, code::INVALID_PARAMS, m.to_owned());
                }
            }
        } else {
            0
        };
        // MRTR retry members (modern, eligible methods).
        let (input_responses, state) = if era == Era::Modern && input_required_allowed(&method) {
            let (responses, token) = match modern::read_retry(&nr.params) {
                Ok(r) => r,
                Err(r) => return self.early(&nr.channel, Some(&nr.id), era, Early::Refuse(r)),
            };
            let state = match token {
                None => None,
                Some(token) => {
                    let binding = binding_of(&call, &method, nr.headers.as_ref());
                    let unix = self.unix_now(now);
                    match request_state::open(
                        &self.config.secrets.request_state_key,
                        &binding,
                        &token,
                        unix,
                    ) {
                        Ok(s) => Some(s),
                        Err(e) => {
                            return refuse(
                                self,
                                400,
                                code::INVALID_PARAMS,
                                format!("Invalid params: {e}"),
                            );
                        }
                    }
                }
            };
            (responses, state)
        } else {
            (None, None)
        };
        let rid = RequestId(self.next_request);
        self.next_request += 1;
        let (capabilities, client_info, log_level, meta, version) = match (&nr.meta, &nr.session) {
            (Some(m), _) => (
                m.capabilities.clone(),
                m.client_info.clone(),
                m.log_level,
                m.meta.clone(),
                MODERN_VERSION.to_owned(),
            ),
            (None, Some(s)) => match self.sessions.get(s) {
                Some(s) => (
                    s.capabilities.clone(),
                    s.client_info.clone(),
                    s.log_level,
                    nr.params
                        .get("_meta")
                        .and_then(Value::as_object)
                        .cloned()
                        .unwrap_or_default(),
                    s.version.clone(),
                ),
                None => Default::default(),
            },
            (None, None) => (
                ClientCapabilities::default(),
                None,
                None,
                Map::new(),
                KNOWN_LEGACY_VERSIONS[0].to_owned(),
            ),
        };
        let context = RequestContext {
            request: rid,
            method: method.clone(),
            era,
            protocol_version: version,
            client_capabilities: capabilities,
            client_info,
            session: nr.session.clone().map(SessionId),
            transport: match nr.channel {
                Channel::Stdio => TransportKind::Stdio,
                Channel::Http { .. } => TransportKind::Http,
            },
            headers: nr.headers.clone(),
            progress_token: progress_token(&meta),
            log_level,
            meta,
            input_responses,
            state,
            round: 0,
        };
        if let Channel::Http { exchange, .. } = &nr.channel {
            if let Some(e) = self.exchanges.get_mut(exchange) {
                e.request = Some(rid);
            }
        }
        if method == "subscriptions/listen" {
            let c = &self.config;
            let filter = match ListenFilter::read(&nr.params, (c.tools, c.prompts, c.resources)) {
                Ok(f) => f,
                Err(r) => return self.early(&nr.channel, Some(&nr.id), era, Early::Refuse(r)),
            };
            if let Channel::Http { sse_ok: false, .. } = nr.channel {
                let r = Refusal::new(
                    406,
                    code::INVALID_REQUEST,
                    "Not Acceptable: subscriptions/listen answers with text/event-stream",
                );
                return self.early(&nr.channel, Some(&nr.id), era, Early::Refuse(r));
            }
            let listens = self
                .requests
                .values()
                .filter(|r| r.listen.is_some())
                .count();
            if listens >= self.config.limits.max_streams {
                let r = Refusal::new(
                    503,
                    SERVER_ERROR,
                    format!("Too many subscriptions: at most {listens} streams at once"),
                );
                return self.early(&nr.channel, Some(&nr.id), era, Early::Refuse(r));
            }
            let ack = notification_text(
                "notifications/subscriptions/acknowledged",
                json!({"_meta": {SUBSCRIPTION_ID_KEY: nr.id}, "notifications": filter.to_value()}),
            );
            self.requests.insert(
                rid,
                Req {
                    jsonrpc_id: nr.id,
                    method,
                    era,
                    session: None,
                    channel: nr.channel,
                    call,
                    context,
                    offset: 0,
                    listen: Some(filter),
                    waiting: None,
                    with_app: false,
                },
            );
            self.send_for(rid, ack);
            if matches!(
                self.requests.get(&rid).map(|r| &r.channel),
                Some(Channel::Http { .. })
            ) {
                self.arm_keep_alive(now);
            }
            return;
        }
        self.requests.insert(
            rid,
            Req {
                jsonrpc_id: nr.id,
                method,
                era,
                session: nr.session,
                channel: nr.channel,
                call: call.clone(),
                context: context.clone(),
                offset,
                listen: None,
                waiting: None,
                with_app: true,
            },
        );
        self.events
            .push_back(ServerEvent::Request(Incoming { call, context }));
    }

    // -----------------------------------------------------------------------------------------
    // The application's side
    // -----------------------------------------------------------------------------------------

    pub(super) fn poll_event(&mut self) -> Option<ServerEvent> {
        self.events.pop_front()
    }

    /// The request `rid` if the application holds it; `Err` if never issued, `Ok(None)` if it
    /// ended.
    fn held(&self, rid: RequestId) -> Result<Option<&Req>, UsageError> {
        if rid.0 >= self.next_request {
            return Err(UsageError::UnknownRequest(rid));
        }
        Ok(self.requests.get(&rid).filter(|r| r.with_app))
    }

    fn notice(&mut self, rid: RequestId, notice: Notice) -> Result<(), UsageError> {
        let Some(req) = self.held(rid)? else {
            return Ok(());
        };
        match notice {
            Notice::Progress {
                progress,
                total,
                message,
            } => {
                let Some(token) = req.context.progress_token.clone() else {
                    return Err(UsageError::NoProgressToken(rid));
                };
                let mut params = json!({"progressToken": token, "progress": number(progress)});
                if let Some(m) = params.as_object_mut() {
                    if let Some(total) = total {
                        m.insert("total".into(), number(total));
                    }
                    if let Some(message) = message {
                        m.insert("message".into(), Value::String(message));
                    }
                }
                self.send_for(rid, notification_text("notifications/progress", params));
            }
            Notice::Log {
                level,
                logger,
                data,
            } => {
                let admitted = match (req.era, req.context.log_level) {
                    (Era::Modern, None) => false,
                    (Era::Legacy, None) => true,
                    (_, Some(min)) => level >= min,
                };
                let admitted = match (&req.session, req.era) {
                    (Some(s), Era::Legacy) => self
                        .sessions
                        .get(s)
                        .and_then(|s| s.log_level)
                        .is_none_or(|min| level >= min),
                    _ => admitted,
                };
                if admitted && self.config.logging {
                    let mut params = json!({"level": level, "data": data});
                    if let (Some(logger), Some(m)) = (logger, params.as_object_mut()) {
                        m.insert("logger".into(), Value::String(logger));
                    }
                    self.send_for(rid, notification_text("notifications/message", params));
                }
            }
            Notice::CloseStream => self.close_stream_of(rid),
        }
        Ok(())
    }

    /// Closes a request's SSE connection (starting the stream first, so the client has an
    /// event id to resume from); only resumable (legacy HTTP) streams.
    fn close_stream_of(&mut self, rid: RequestId) {
        let Some(req) = self.requests.get(&rid) else {
            return;
        };
        let resumable =
            req.era == Era::Legacy && req.session.as_deref().is_some_and(|s| s != STDIO_SESSION);
        if !resumable {
            return;
        }
        let (exchange, stream, sse_ok) = match req.channel {
            Channel::Http {
                exchange,
                stream,
                sse_ok,
            } => (exchange, stream, sse_ok),
            Channel::Stdio => return,
        };
        let sid = match stream {
            Some(sid) => sid,
            None => {
                if !sse_ok || !self.exchanges.contains_key(&exchange) {
                    return;
                }
                let session = req.session.clone();
                let sid = self.open_stream(exchange, session, Some(rid));
                if let Some(req) = self.requests.get_mut(&rid) {
                    req.channel = Channel::Http {
                        exchange,
                        stream: Some(sid),
                        sse_ok,
                    };
                }
                sid
            }
        };
        self.stream_end_connection(sid);
    }

    pub(super) fn progress(
        &mut self,
        now: Instant,
        rid: RequestId,
        progress: f64,
        total: Option<f64>,
        message: Option<&str>,
    ) -> Result<(), UsageError> {
        self.seen(now);
        self.notice(
            rid,
            Notice::Progress {
                progress,
                total,
                message: message.map(str::to_owned),
            },
        )
    }

    pub(super) fn log(
        &mut self,
        now: Instant,
        rid: Option<RequestId>,
        level: LoggingLevel,
        logger: Option<&str>,
        data: Value,
    ) -> Result<(), UsageError> {
        self.seen(now);
        if let Some(rid) = rid {
            return self.notice(
                rid,
                Notice::Log {
                    level,
                    logger: logger.map(str::to_owned),
                    data,
                },
            );
        }
        if !self.config.logging {
            return Ok(());
        }
        let mut params = json!({"level": level, "data": data});
        if let (Some(logger), Some(m)) = (logger, params.as_object_mut()) {
            m.insert("logger".into(), Value::String(logger.to_owned()));
        }
        let text = notification_text("notifications/message", params);
        let targets: Vec<String> = self
            .sessions
            .iter()
            .filter(|(_, s)| s.log_level.is_none_or(|min| level >= min))
            .map(|(k, _)| k.clone())
            .collect();
        for s in targets {
            self.session_send(&s, text.clone());
        }
        Ok(())
    }

    pub(super) fn close_stream(&mut self, now: Instant, rid: RequestId) -> Result<(), UsageError> {
        self.seen(now);
        self.notice(rid, Notice::CloseStream)
    }

    pub(super) fn respond(
        &mut self,
        now: Instant,
        rid: RequestId,
        reply: Reply,
        notices: Vec<Notice>,
    ) -> Result<(), UsageError> {
        self.seen(now);
        if self.held(rid)?.is_none() {
            return Ok(());
        }
        let mut result = Ok(());
        for n in notices {
            if let Err(e) = self.notice(rid, n) {
                // A progress without token is the application's slip; the reply still goes.
                if result.is_ok() {
                    result = Err(e);
                }
            }
        }
        let Some(req) = self.requests.get(&rid) else {
            return result;
        };
        let era = req.era;
        match reply {
            Reply::Pending => {}
            Reply::Error(e) => {
                let status = status_of(era, e.code);
                self.finish_error(rid, status, &e);
            }
            Reply::Result(mut value) => {
                if !value.is_object() {
                    let e = error_object(
                        code::INTERNAL_ERROR,
                        "Internal error: the server's result is not a JSON object",
                    );
                    self.finish_error(rid, 200, &e);
                    return Err(UsageError::BadResult { request: rid });
                }
                if let Some((key, _)) = list_key(&req.call) {
                    pagination::paginate(&mut value, key, req.offset, self.config.limits.page_size);
                }
                match &req.call {
                    Call::Subscribe { uri } => {
                        if let Some(s) = req.session.clone().and_then(|s| self.sessions.get_mut(&s))
                        {
                            s.subscriptions.insert(uri.clone());
                        }
                    }
                    Call::Unsubscribe { uri } => {
                        if let Some(s) = req.session.clone().and_then(|s| self.sessions.get_mut(&s))
                        {
                            s.subscriptions.remove(uri);
                        }
                    }
                    _ => {}
                }
                if era == Era::Modern {
                    let hint = self.hint_for(&req.call).cloned();
                    self.decorate_modern(&mut value, hint.as_ref());
                }
                let text = response_text(&req.jsonrpc_id, &value);
                self.finish(rid, 200, text, &[]);
            }
            Reply::InputRequired { inputs, state } => {
                self.input_required(now, rid, inputs, state)?;
            }
        }
        result
    }

    fn input_required(
        &mut self,
        now: Instant,
        rid: RequestId,
        inputs: Vec<(String, InputRequest)>,
        state: Option<String>,
    ) -> Result<(), UsageError> {
        let Some(req) = self.requests.get(&rid) else {
            return Ok(());
        };
        let era = req.era;
        if !input_required_allowed(&req.method) {
            let method = req.method.clone();
            let e = error_object(
                code::INTERNAL_ERROR,
                format!("Internal error: the server asked for input on {method}, which cannot ask"),
            );
            self.finish_error(rid, 200, &e);
            return Err(UsageError::InputNotAllowed {
                request: rid,
                method,
            });
        }
        // Every input needs a capability the client declared.
        let declared = req.context.client_capabilities.to_value();
        let mut missing = Map::new();
        for (_, input) in &inputs {
            if let Some(Value::Object(need)) = input.required_capability() {
                for (cap, sub) in need {
                    let have = declared.get(&cap);
                    let ok = match (have, &sub) {
                        (None, _) => false,
                        (Some(have), Value::Object(sub)) if cap == "elicitation" => {
                            // `elicitation: {}` declares form mode only.
                            sub.keys().all(|mode| {
                                have.get(mode).is_some()
                                    || (mode == "form"
                                        && have.get("url").is_none()
                                        && have.get("form").is_none())
                            })
                        }
                        (Some(_), _) => true,
                    };
                    if !ok {
                        let entry = missing.entry(cap).or_insert_with(|| json!({}));
                        if let (Some(e), Value::Object(sub)) = (entry.as_object_mut(), sub) {
                            e.extend(sub);
                        }
                    }
                }
            }
        }
        if !missing.is_empty() {
            let names: Vec<&str> = missing.keys().map(String::as_str).collect();
            let e = ErrorObject {
                code: code::MISSING_REQUIRED_CLIENT_CAPABILITY,
                message: format!(
                    "Missing required client capability: this request needs {}",
                    names.join(", ")
                ),
                data: Some(json!({"requiredCapabilities": missing})),
            };
            self.finish_error(rid, status_of(era, e.code), &e);
            return Ok(());
        }
        if inputs.is_empty() {
            let e = error_object(
                code::INTERNAL_ERROR,
                "Internal error: input_required with no inputs",
            );
            self.finish_error(rid, 200, &e);
            return Ok(());
        }
        match era {
            Era::Modern => {
                let mut requests = Map::new();
                for (key, input) in inputs {
                    requests.insert(key, json!({"method": input.method, "params": input.params}));
                }
                let mut result = json!({"resultType": "input_required", "inputRequests": requests});
                if let Some(state) = state {
                    if state.len() > MAX_STATE_BYTES {
                        let e = error_object(
                            code::INTERNAL_ERROR,
                            format!("Internal error: the server's requestState is over {MAX_STATE_BYTES} bytes"),
                        );
                        self.finish_error(rid, 200, &e);
                        return Ok(());
                    }
                    let binding = binding_of(&req.call, &req.method, req.context.headers.as_ref());
                    let expiry = self
                        .unix_now(now)
                        .saturating_add(self.config.timeouts.request_state_ttl.as_secs().max(1));
                    let sealed = request_state::seal(
                        &self.config.secrets.request_state_key,
                        &binding,
                        &state,
                        expiry,
                    );
                    if let Some(m) = result.as_object_mut() {
                        m.insert("requestState".into(), Value::String(sealed));
                    }
                }
                self.decorate_modern(&mut result, None);
                let text = response_text(&req.jsonrpc_id, &result);
                self.finish(rid, 200, text, &[]);
            }
            Era::Legacy => self.ask_legacy(now, rid, inputs, state),
        }
        Ok(())
    }

    /// Legacy MRTR: each input becomes a server-to-client request on the request's stream.
    fn ask_legacy(
        &mut self,
        now: Instant,
        rid: RequestId,
        inputs: Vec<(String, InputRequest)>,
        state: Option<String>,
    ) {
        let Some(req) = self.requests.get(&rid) else {
            return;
        };
        let fail = |s: &mut Self, m: String| {
            let e = error_object(code::INTERNAL_ERROR, m);
            s.finish_error(rid, 200, &e);
        };
        if req.context.round >= self.config.limits.max_input_rounds {
            let max = self.config.limits.max_input_rounds;
            return fail(
                self,
                format!("Internal error: the server asked for input more than {max} times"),
            );
        }
        if let Channel::Http { sse_ok: false, .. } = req.channel {
            return fail(
                self,
                "Internal error: this request needs input from the client, which takes a text/event-stream response (Accept)".into(),
            );
        }
        let Some(session) = req.session.clone() else {
            return fail(self, "Internal error: input needs a session".into());
        };
        let pending_now = self.sessions.get(&session).map_or(0, |s| s.outgoing.len());
        if pending_now + inputs.len() > self.config.limits.max_pending_server_requests {
            let max = self.config.limits.max_pending_server_requests;
            return fail(
                self,
                format!("Internal error: more than {max} requests to the client would be pending"),
            );
        }
        let mut pending = BTreeMap::new();
        let mut texts = Vec::new();
        for (key, input) in inputs {
            let oid = self.next_outgoing;
            self.next_outgoing += 1;
            let params = Value::Object(input.params);
            texts.push(jsonrpc::request_text(
                &Id::Number(oid),
                &input.method,
                Some(&params),
            ));
            pending.insert(oid, key);
            if let Some(s) = self.sessions.get_mut(&session) {
                s.outgoing.insert(oid, rid);
            }
        }
        let deadline = now + self.config.timeouts.server_request;
        if let Some(req) = self.requests.get_mut(&rid) {
            req.with_app = false;
            req.waiting = Some(Waiting {
                pending,
                answers: Map::new(),
                state,
                deadline,
            });
        }
        for text in texts {
            self.send_for(rid, text);
        }
    }

    pub(super) fn check_tool_headers(
        &mut self,
        now: Instant,
        rid: RequestId,
        tool: Option<&Tool>,
    ) -> Result<bool, UsageError> {
        self.seen(now);
        let Some(req) = self.held(rid)? else {
            return Ok(true);
        };
        let (Era::Modern, Some(headers), Call::CallTool { arguments, .. }, Some(tool)) =
            (req.era, &req.context.headers, &req.call, tool)
        else {
            return Ok(true);
        };
        match modern::check_param_headers(headers, tool, arguments) {
            Ok(()) => Ok(true),
            Err(r) => {
                self.finish_error(rid, r.status, &r.error);
                Ok(false)
            }
        }
    }

    pub(super) fn list_changed(&mut self, now: Instant, kind: ListKind) {
        self.seen(now);
        let (method, enabled) = match kind {
            ListKind::Tools => ("notifications/tools/list_changed", self.config.tools),
            ListKind::Prompts => ("notifications/prompts/list_changed", self.config.prompts),
            ListKind::Resources | ListKind::ResourceTemplates => (
                "notifications/resources/list_changed",
                self.config.resources,
            ),
        };
        if !enabled {
            return;
        }
        let sessions: Vec<String> = self.sessions.keys().cloned().collect();
        for s in sessions {
            self.session_send(&s, notification_text(method, json!({})));
        }
        let listens: Vec<(RequestId, Id)> = self
            .requests
            .iter()
            .filter(|(_, r)| {
                r.listen.as_ref().is_some_and(|f| match kind {
                    ListKind::Tools => f.tools,
                    ListKind::Prompts => f.prompts,
                    _ => f.resources,
                })
            })
            .map(|(k, r)| (*k, r.jsonrpc_id.clone()))
            .collect();
        for (rid, id) in listens {
            let text = notification_text(method, json!({"_meta": {SUBSCRIPTION_ID_KEY: id}}));
            self.send_for(rid, text);
        }
    }

    pub(super) fn resource_updated(&mut self, now: Instant, uri: &str) {
        self.seen(now);
        if !self.config.resources {
            return;
        }
        let sessions: Vec<String> = self
            .sessions
            .iter()
            .filter(|(_, s)| s.subscriptions.contains(uri))
            .map(|(k, _)| k.clone())
            .collect();
        for s in sessions {
            self.session_send(
                &s,
                notification_text("notifications/resources/updated", json!({"uri": uri})),
            );
        }
        let listens: Vec<(RequestId, Id)> = self
            .requests
            .iter()
            .filter(|(_, r)| {
                r.listen
                    .as_ref()
                    .is_some_and(|f| f.uris.iter().any(|u| u == uri))
            })
            .map(|(k, r)| (*k, r.jsonrpc_id.clone()))
            .collect();
        for (rid, id) in listens {
            let text = notification_text(
                "notifications/resources/updated",
                json!({"_meta": {SUBSCRIPTION_ID_KEY: id}, "uri": uri}),
            );
            self.send_for(rid, text);
        }
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

    pub(super) fn shutdown(&mut self, now: Instant) {
        self.seen(now);
        self.shut = true;
        let all: Vec<RequestId> = self.requests.keys().copied().collect();
        for rid in all {
            let Some(req) = self.requests.get(&rid) else {
                continue;
            };
            if req.listen.is_some() {
                let id = req.jsonrpc_id.clone();
                let result = json!({"resultType": "complete", "_meta": {SUBSCRIPTION_ID_KEY: id}});
                let text = response_text(&id, &result);
                self.finish(rid, 200, text, &[]);
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

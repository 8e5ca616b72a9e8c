//! Sending: an operation dispatched in its era (queued while the era, the handshake or a
//! `tools/list` is awaited), a modern request built with its `_meta` and mirrored headers, a
//! legacy one in the session, the MRTR retry, and the tracker's outputs moved to the driver.
//! The `_meta` member texts that rarely change are kept between requests ([`MetaTexts`]).

use serde_json::value::RawValue;
use serde_json::Value;

use super::error::{IncompatibleError, LocalError};
use super::operation::{Internal, Op, OpState};
use super::streams::Owner;
use super::{Client, EraState, Event, OpError, OpId, OpOptions, Operation, Output, ResultSource};
use crate::http::{Headers, Method};
use crate::jsonrpc::{self, Id};
use crate::mcp::cache::{CacheableMethod, RequestKey};
use crate::mcp::era::{Era, VersionNegotiation};
use crate::mcp::headers;
use crate::mcp::meta::{ClientCapabilities, IdAllocator, JsonObject, LoggingLevel};
use crate::mcp::mrtr::{self, InputCapabilities, MrtrRound};
use crate::mcp::request::{self, CallOptions, IdSource, RequestHandle, Transport};
use crate::time::Instant;

/// An id source that hands out `first` before anything from the allocator.
pub(super) struct Preset<'a> {
    pub(super) first: Option<Id>,
    pub(super) rest: &'a mut IdAllocator,
}

impl IdSource for Preset<'_> {
    fn next_id(&mut self) -> Id {
        match self.first.take() {
            Some(id) => id,
            None => self.rest.next_id(),
        }
    }
}

/// JSON texts of `_meta` members kept between requests: the client info (fixed) and the
/// members that change only with the version, the declared capabilities or the log level.
pub(super) struct MetaTexts {
    pub(super) info: Option<String>,
    pub(super) stable: Option<StableMeta>,
}

/// The `_meta` of the last request without its per-request members (progress token, trace
/// context), and what it was written from.
pub(super) struct StableMeta {
    version: String,
    declared: ClientCapabilities,
    log_level: Option<LoggingLevel>,
    /// The object's text without its closing brace.
    open: String,
}

/// A member value to write.
pub(super) enum Piece<'a> {
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
    pub(super) fn new(client_info: &crate::mcp::meta::Implementation) -> Self {
        MetaTexts {
            info: serde_json::to_value(client_info)
                .and_then(|v| serde_json::to_string(&v))
                .ok(),
            stable: None,
        }
    }

    /// Writes the `_meta` of a modern request of `op` in `version` to `out`: what serializing
    /// [`RequestMeta::to_object`](crate::mcp::meta::RequestMeta::to_object) of the request's meta gives (version, declared capabilities,
    /// client info, log level, progress token, trace context). The members that rarely change
    /// come from the kept text; the per-request ones sort after all of them (`progressToken`,
    /// `traceparent` and `tracestate` after the `io.modelcontextprotocol/` keys), so they are
    /// appended to it.
    pub(super) fn write_request_meta(
        &mut self,
        op: &Op,
        version: &str,
        out: &mut Vec<u8>,
    ) -> Result<(), serde_json::Error> {
        use crate::mcp::meta::{PROGRESS_TOKEN_KEY, TRACEPARENT_KEY, TRACESTATE_KEY};
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
    pub(super) fn stable_open(
        &mut self,
        op: &Op,
        version: &str,
    ) -> Result<&str, serde_json::Error> {
        use crate::mcp::meta::{
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
    pub(super) fn request_meta_text(
        &mut self,
        op: &Op,
        version: &str,
    ) -> Result<String, serde_json::Error> {
        let mut out = Vec::with_capacity(256);
        self.write_request_meta(op, version, &mut out)?;
        utf8(out)
    }
}

/// Writes a JSON object of `members` to `out` in the order a [`JsonObject`] keeps its keys
/// (serde_json's map without `preserve_order`, which this workspace does not enable, sorts
/// them), so the text is what serializing the same object gives; `meta` writes
/// [`Piece::Meta`]. Returns where each member's value sits in `out`.
pub(super) fn write_object(
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

pub(super) fn utf8(bytes: Vec<u8>) -> Result<String, serde_json::Error> {
    String::from_utf8(bytes).map_err(<serde_json::Error as serde::ser::Error>::custom)
}

/// The `params` of a fresh modern request of `op` in `version` (its operation's members and
/// `_meta`), as JSON text, with its members (key, value text) when `members` is set (for the
/// MRTR round); every value is written once, borrowed from the operation.
#[allow(clippy::type_complexity)]
pub(super) fn fresh_params(
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
pub(super) fn checked_params(text: String) -> Result<String, OpError> {
    match serde_json::from_str::<&RawValue>(&text) {
        Ok(raw) if raw.get().starts_with('{') => Ok(text),
        _ => Err(LocalError::Request(request::UsageError::ParamsNotObject).into()),
    }
}

/// The `requestId` of a `notifications/cancelled` text.
pub(super) fn cancelled_request_id(body: &str) -> Option<Id> {
    let v: Value = serde_json::from_str(body).ok()?;
    serde_json::from_value(v.get("params")?.get("requestId")?.clone()).ok()
}

/// The value of a request `{"jsonrpc":"2.0","id":…,"method":…,"params":…}` for the header
/// builder.
pub(super) fn jsonrpc_request_value(id: &Id, method: &str, params: &str) -> Value {
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

impl Client {
    /// Sends `op` if the era allows it now; otherwise leaves it queued (and starts what it
    /// waits for).
    pub(super) fn dispatch(&mut self, now: Instant, op_id: OpId) {
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
                if self.session.ready() {
                    self.send_legacy(now, op_id);
                } else if self.session.handshake.is_none() {
                    self.start_handshake(now);
                }
            }
        }
    }

    /// Sends every queued host operation (after the era became known or the session ready).
    pub(super) fn dispatch_queued(&mut self, now: Instant) {
        self.open_held_subs(now);
        let queued = self.queued_ops();
        for op_id in queued {
            if matches!(self.era, EraState::Legacy) && !self.session.ready() {
                return;
            }
            self.dispatch(now, op_id);
        }
    }

    #[cfg(test)]
    pub(super) fn meta_for(&self, op: &Op, version: &str) -> crate::mcp::meta::RequestMeta {
        let mut meta = crate::mcp::meta::RequestMeta::new(version, op.declared.clone())
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
    pub(super) fn send_modern(&mut self, now: Instant, op_id: OpId, version: &str) {
        let Some(op) = self.ops.get(&op_id) else {
            return;
        };
        if op.operation == Operation::Ping {
            self.fail(
                op_id,
                IncompatibleError::Unsupported {
                    operation: "ping",
                    era: Era::Modern,
                }
                .into(),
            );
            return;
        }
        let method = op.operation.method();
        // A tool excluded from the listing is not called.
        if let Operation::CallTool { name, .. } = &op.operation {
            if let Some(reason) = self.tools.excluded.get(name) {
                let error = IncompatibleError::ToolExcluded {
                    tool: name.clone(),
                    reason: reason.clone(),
                };
                self.fail(op_id, error.into());
                return;
            }
        }
        let eligible = mrtr::input_required_allowed(method);
        let (params, members) = match &op.retry_params {
            Some(retry) => {
                let meta = match self.meta_texts.request_meta_text(op, version) {
                    Ok(m) => m,
                    Err(e) => return self.fail(op_id, LocalError::Serialize(e.to_string()).into()),
                };
                match mrtr::splice_meta(retry, &meta) {
                    Ok(p) => (Err(p), None),
                    Err(e) => {
                        self.fail(op_id, LocalError::Mrtr(e).into());
                        return;
                    }
                }
            }
            // Each member written once, from the operation itself (no copy of the arguments).
            None => match fresh_params(&mut self.meta_texts, op, version, eligible) {
                Ok((text, members)) => (Ok(text), members),
                Err(e) => {
                    self.fail(op_id, LocalError::Serialize(e.to_string()).into());
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
    pub(super) fn send_legacy(&mut self, now: Instant, op_id: OpId) {
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
                meta.insert(crate::mcp::meta::PROGRESS_TOKEN_KEY.to_owned(), v);
            }
            params.insert("_meta".to_owned(), Value::Object(meta));
        }
        let params = Value::Object(params).to_string();
        let id = self.ids.next_id();
        self.start_attempt(now, op_id, method, params, None, id, true, None);
    }

    /// Hands one attempt of `op` to the request tracker under `id`. `fresh_version` is the
    /// protocol version in the `_meta` of params built from the operation itself
    /// ([`fresh_params`]): the headers are then read from the operation instead of the params
    /// text.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn start_attempt(
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
                Operation::CallTool { name, .. } => self.tools.headers.get(name),
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
                    self.fail(op_id, LocalError::Headers(e).into());
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
            Err(e) => self.fail(op_id, LocalError::Request(e).into()),
        }
    }

    pub(super) fn start_internal(
        &mut self,
        now: Instant,
        operation: Operation,
        internal: Internal,
    ) -> OpId {
        let op_id = OpId(self.next_op);
        self.next_op += 1;
        let op = Op::new(
            operation,
            OpOptions::default(),
            self.config.capabilities.clone(),
            VersionNegotiation::new(&[]),
            Some(internal),
        );
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

    /// Builds and sends the MRTR retry of `op` (every key answered).
    pub(super) fn send_mrtr_retry(&mut self, now: Instant, op_id: OpId) {
        let version = match &self.era {
            EraState::Modern { version, .. } => version.clone(),
            _ => self.latest_version(),
        };
        let Some(op) = self.ops.get(&op_id) else {
            return;
        };
        let meta = match self.meta_texts.request_meta_text(op, &version) {
            Ok(m) => m,
            Err(e) => return self.fail(op_id, LocalError::Serialize(e.to_string()).into()),
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
            Err(e) => self.fail(op_id, LocalError::Mrtr(e).into()),
        }
    }

    pub(super) fn transmit_request(&mut self, req: RequestHandle, body: String) {
        if self.config.transport == Transport::Stdio {
            self.outputs.push_back(Output::Stdio(body));
            return;
        }
        let op_id = self.by_req.get(&req).copied();
        let op = op_id.and_then(|id| self.ops.get(&id));
        let in_session = op.is_some_and(|op| op.sent_legacy) && op_id != self.session.handshake;
        let headers = match op {
            Some(op) if in_session => self
                .session
                .state
                .session_headers()
                .unwrap_or_else(|_| op.headers.clone().unwrap_or_default()),
            Some(op) => op.headers.clone().unwrap_or_default(),
            None => Headers::new(),
        };
        let stream = self.streams.open(Owner::Request(req), headers.clone());
        if let Some(s) = self.streams.map.get_mut(&stream) {
            s.in_session = in_session;
        }
        if let Some(old) = self.streams.by_req.insert(req, stream) {
            self.streams.map.remove(&old);
        }
        self.push_http(stream, Method::Post, headers, body);
    }

    pub(super) fn on_request_output(&mut self, now: Instant, output: request::Output) {
        match output {
            request::Output::Send { req, id, body, .. } => {
                let op_id = self.by_req.get(&req).copied();
                let waits_for_session = op_id
                    .and_then(|id| self.ops.get(&id))
                    .is_some_and(|op| op.sent_legacy)
                    && op_id != self.session.handshake
                    && (!self.session.ready() || self.session.opening.1.is_some());
                if waits_for_session {
                    self.session.held.push((req, id, body));
                    if self.session.handshake.is_none() {
                        self.start_handshake(now);
                    }
                } else {
                    self.transmit_request(req, body);
                }
            }
            request::Output::CloseStream { req, id } => {
                // A held attempt that timed out is never sent.
                self.session
                    .held
                    .retain(|(r, i, _)| !(*r == req && *i == id));
                if let Some(stream) = self.streams.by_req.remove(&req) {
                    self.streams.map.remove(&stream);
                    self.outputs.push_back(Output::CloseStream(stream));
                }
            }
            request::Output::CancelNotice { req, body, .. } => {
                // Legacy `basic/transports.mdx`: closing the stream is not a cancellation in a
                // 2025-11-25 session; say it with `notifications/cancelled` in the session.
                let in_session = self
                    .streams
                    .by_req
                    .get(&req)
                    .and_then(|s| self.streams.map.get(s))
                    .is_some_and(|s| s.in_session);
                if in_session {
                    if let Ok(headers) = self.session.state.session_headers() {
                        self.http(Owner::Fire, Method::Post, headers, body);
                    }
                }
            }
            request::Output::Notify { body } => {
                // A cancellation (timeout, or the client's own drop) of an attempt that was
                // held, never written: the server never saw the id, so nothing is written.
                if let Some(id) = cancelled_request_id(&body) {
                    if self.session.swallow_cancel(&id) {
                        return;
                    }
                }
                self.outputs.push_back(Output::Stdio(body));
            }
            request::Output::Event(e) => self.on_request_event(now, e),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::mcp::cache::ListKind;
    use crate::mcp::client::ClientConfig;
    use crate::mcp::meta::Implementation;
    use crate::mcp::LATEST_PROTOCOL_VERSION;

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
        Op::new(
            operation,
            options,
            declared,
            VersionNegotiation::new(&[]),
            None,
        )
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

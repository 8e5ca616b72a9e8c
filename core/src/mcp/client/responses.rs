//! Responses: the request tracker's events classified (a result, a tool error,
//! `input_required`, a JSON-RPC error, the modern errors the client fixes and retries), HTTP
//! error statuses (legacy evidence, an expired legacy session, a JSON-RPC error body), and what
//! each one does to its operation.

use serde_json::Value;

use super::error::{IncompatibleError, ProtocolError, TransportError};
use super::operation::{cache_key, Internal, OpState};
use super::streams::{is_jsonrpc_error, jsonrpc_error_object, Owner, Stream};
use super::{
    Client, EraEvidence, EraState, Event, OpError, OpId, Operation, ProtocolChoice, ResultSource,
    RetryReason,
};
use crate::jsonrpc::{ErrorObject, Message};
use crate::mcp::cache::ListKind;
use crate::mcp::era::{
    self, classify_http_error, declare_required, HttpErrorVerdict, ModernError, ProbeVerdict,
    VersionError,
};
use crate::mcp::legacy::{self, SessionStatus};
use crate::mcp::mrtr::{InputCapabilities, InputRequiredResult};
use crate::mcp::request::{self, RequestHandle, ResponseKind};
use crate::mcp::subscription;
use crate::time::Instant;

/// The JSON text of a response's `result`.
pub(super) fn result_text(message: &str) -> Option<String> {
    match Message::parse(message) {
        Ok(Message::Response { result, .. }) => Some(result.get().to_owned()),
        _ => None,
    }
}

impl Client {
    pub(super) fn on_request_event(&mut self, now: Instant, e: request::Event) {
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
                    self.on_lost(
                        now,
                        op_id,
                        TransportError::TimedOut { max_total }.into(),
                        true,
                    );
                }
            }
            R::Failed { req, reason } => {
                self.by_req.remove(&req);
                if let Some(op_id) = op_id {
                    self.on_lost(now, op_id, TransportError::Failed(reason).into(), false);
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
    pub(super) fn notification(&mut self, op: Option<OpId>, method: String, message: String) {
        let params = serde_json::from_str::<Value>(&message)
            .ok()
            .and_then(|mut v| v.get_mut("params").map(Value::take));
        let _ = self.cache.on_notification(&method, params.as_ref());
        if method == "notifications/tools/list_changed" {
            self.tools.listed = false;
        }
        self.legacy_change(&method, params.as_ref());
        self.event(Event::Notification {
            op,
            method,
            message,
        });
    }

    /// An attempt ended without a response.
    pub(super) fn on_lost(&mut self, now: Instant, op_id: OpId, error: OpError, timed_out: bool) {
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
                self.session.handshake = None;
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

    /// The final response of an attempt of `op`; `result` is the text of its `result` member,
    /// when the caller knows it (otherwise it is read from `message` when needed).
    pub(super) fn on_response(
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

    pub(super) fn on_complete(
        &mut self,
        now: Instant,
        op_id: OpId,
        message: &str,
        result: Option<&str>,
        is_error: bool,
    ) {
        let Some(mut result) = result.map(str::to_owned).or_else(|| result_text(message)) else {
            let method = self.method_of(op_id);
            return self.fail(op_id, ProtocolError::NoResult { method }.into());
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

    pub(super) fn on_input_required(
        &mut self,
        now: Instant,
        op_id: OpId,
        message: &str,
        result: Option<&str>,
    ) {
        let method = self.method_of(op_id);
        let parsed = match result.map(str::to_owned).or_else(|| result_text(message)) {
            None => Err(ProtocolError::NoResult { method }),
            Some(r) => InputRequiredResult::parse(&r)
                .map_err(|error| ProtocolError::InputRequired { method, error }),
        };
        let result = match parsed {
            Ok(r) => r,
            Err(e) => return self.fail(op_id, e.into()),
        };
        let Some(op) = self.ops.get_mut(&op_id) else {
            return;
        };
        op.ticket = None;
        let Some(round) = op.mrtr.as_mut() else {
            return self.fail(
                op_id,
                ProtocolError::InputRequiredWithoutMrtr { method }.into(),
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
            Err(e) => self.fail(op_id, ProtocolError::Mrtr(e).into()),
        }
    }

    pub(super) fn on_error_response(&mut self, now: Instant, op_id: OpId, error: ErrorObject) {
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

    pub(super) fn on_modern_error(
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
                            self.fail(op_id, IncompatibleError::Version(e).into());
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
                    Err(e) => self.fail(op_id, IncompatibleError::Capability(e).into()),
                }
            }
            ModernError::HeaderMismatch { message } => {
                let is_call = matches!(op.operation, Operation::CallTool { .. });
                if is_call && !op.header_refresh_used {
                    op.header_refresh_used = true;
                    op.state = OpState::Queued;
                    self.cache.invalidate_list(ListKind::Tools);
                    self.list_tools_for(now, op_id, false);
                } else if op.internal.is_some() {
                    self.fail(op_id, OpError::Server(error));
                } else {
                    self.fail(op_id, IncompatibleError::HeaderMismatch { message }.into());
                }
            }
        }
    }

    /// stdio: a message no request or subscription claimed.
    pub(super) fn unrouted(&mut self, line: &str) {
        match Message::parse(line) {
            Ok(Message::Response { id, .. } | Message::Error { id: Some(id), .. })
                if self.session.fired.contains(&id) => {}
            Ok(Message::Notification { method, .. }) => {
                self.notification(None, method, line.to_owned());
            }
            _ => self.event(Event::Ignored {
                reason: "a message for no known request or subscription",
            }),
        }
    }

    /// A non-2xx answer on `s`.
    pub(super) fn http_error(&mut self, now: Instant, s: &Stream, status: u16, body: &[u8]) {
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
        let is_handshake = Some(op_id) == self.session.handshake;
        if op.sent_legacy {
            if status == 404 && !is_handshake {
                let expired = self.session.state.handle_status(404, &s.sent);
                if expired != SessionStatus::Unaffected {
                    self.supersede(now, req);
                    if expired == SessionStatus::Expired && self.session.handshake.is_none() {
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
                    self.fail(
                        op_id,
                        IncompatibleError::LegacyServer { status, error }.into(),
                    );
                } else {
                    self.feed_or_fail(now, req, s, status, body);
                }
            }
            _ => self.feed_or_fail(now, req, s, status, body),
        }
    }

    /// A JSON-RPC error body is the request's answer; anything else is an HTTP failure.
    pub(super) fn feed_or_fail(
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
            self.streams.by_req.remove(&req);
            let _ = self.requests.handle_stream_end(now, req);
        } else {
            self.owner_failed(now, Owner::Request(req), Some(status), s.retry_after);
        }
    }
}

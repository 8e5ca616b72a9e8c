//! The application's side: events, notices (progress, logs, stream closes), replies and
//! MRTR (`input_required` sealed in `2026-07-28`, server-to-client requests in the legacy era),
//! tool header checks, list and resource change fan-out.

use super::*;

impl Engine {
    // -----------------------------------------------------------------------------------------
    // The application's side
    // -----------------------------------------------------------------------------------------

    pub(in crate::mcp::server) fn poll_event(&mut self) -> Option<ServerEvent> {
        self.events.pop_front()
    }

    /// The request `rid` if the application holds it; `Err` if never issued, `Ok(None)` if it
    /// ended.
    pub(super) fn held(&self, rid: RequestId) -> Result<Option<&Req>, UsageError> {
        if rid.0 >= self.next_request {
            return Err(UsageError::UnknownRequest(rid));
        }
        Ok(self.requests.get(&rid).filter(|r| r.with_app))
    }

    pub(super) fn notice(&mut self, rid: RequestId, notice: Notice) -> Result<(), UsageError> {
        let Some(req) = self.held(rid)? else {
            return Ok(());
        };
        if req.pending_listen.is_some() {
            // Nothing goes out for a listen before its acknowledgment.
            return Ok(());
        }
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
    pub(super) fn close_stream_of(&mut self, rid: RequestId) {
        let Some(req) = self.requests.get(&rid) else {
            return;
        };
        let resumable =
            req.era == Era::Legacy && req.session.as_deref().is_some_and(|s| s != STDIO_SESSION);
        if !resumable {
            return;
        }
        let (exchange, stream, sse_ok, json_ok) = match req.channel {
            Channel::Http {
                exchange,
                stream,
                sse_ok,
                json_ok,
            } => (exchange, stream, sse_ok, json_ok),
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
                        json_ok,
                    };
                }
                sid
            }
        };
        self.stream_end_connection(sid);
    }

    pub(in crate::mcp::server) fn progress(
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

    pub(in crate::mcp::server) fn log(
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

    pub(in crate::mcp::server) fn close_stream(
        &mut self,
        now: Instant,
        rid: RequestId,
    ) -> Result<(), UsageError> {
        self.seen(now);
        self.notice(rid, Notice::CloseStream)
    }

    pub(in crate::mcp::server) fn respond(
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
        if req.pending_listen.is_some() {
            return self.answer_listen(now, rid, reply).and(result);
        }
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
                if let Some((key, kind)) = list_key(&req.call) {
                    let size = self.config.limits.page_size_of(kind);
                    pagination::paginate(&mut value, key, req.offset, size);
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

    /// The application's answer to a [`Call::Listen`]: the acknowledgment with the URIs it
    /// accepted (of those asked, in the client's order) and the stream opened, or its error as
    /// the listen's answer.
    fn answer_listen(
        &mut self,
        now: Instant,
        rid: RequestId,
        reply: Reply,
    ) -> Result<(), UsageError> {
        let Some(req) = self.requests.get(&rid) else {
            return Ok(());
        };
        let era = req.era;
        match reply {
            Reply::Pending => Ok(()),
            Reply::Error(e) => {
                self.finish_error(rid, status_of(era, e.code), &e);
                Ok(())
            }
            // A listen cannot ask: `input_required` answers `-32603` and says why.
            Reply::InputRequired { inputs, state } => self.input_required(now, rid, inputs, state),
            Reply::Result(value) => {
                let accepted: Option<BTreeSet<&str>> = value
                    .get("resourceSubscriptions")
                    .and_then(Value::as_array)
                    .and_then(|uris| uris.iter().map(Value::as_str).collect());
                let Some(accepted) = accepted else {
                    let e = error_object(
                        code::INTERNAL_ERROR,
                        "Internal error: the server's answer to subscriptions/listen has no resourceSubscriptions array of strings",
                    );
                    self.finish_error(rid, 200, &e);
                    return Err(UsageError::BadResult { request: rid });
                };
                let Some(mut filter) = self
                    .requests
                    .get_mut(&rid)
                    .and_then(|r| r.pending_listen.take())
                else {
                    return Ok(());
                };
                filter.uris.retain(|u| accepted.contains(u.as_str()));
                self.open_listen(now, rid, filter);
                Ok(())
            }
        }
    }

    pub(super) fn input_required(
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
    pub(super) fn ask_legacy(
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

    pub(in crate::mcp::server) fn check_tool_headers(
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

    pub(in crate::mcp::server) fn list_changed(&mut self, now: Instant, kind: ListKind) -> usize {
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
            return 0;
        }
        let sessions: Vec<String> = self.sessions.keys().cloned().collect();
        let mut told = sessions.len();
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
        told += listens.len();
        for (rid, id) in listens {
            let text = notification_text(method, json!({"_meta": {SUBSCRIPTION_ID_KEY: id}}));
            self.send_for(rid, text);
        }
        told
    }

    pub(in crate::mcp::server) fn resource_updated(&mut self, now: Instant, uri: &str) -> usize {
        self.seen(now);
        if !self.config.resources {
            return 0;
        }
        let sessions: Vec<String> = self
            .sessions
            .iter()
            .filter(|(_, s)| s.subscriptions.contains(uri))
            .map(|(k, _)| k.clone())
            .collect();
        let mut told = sessions.len();
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
        told += listens.len();
        for (rid, id) in listens {
            let text = notification_text(
                "notifications/resources/updated",
                json!({"_meta": {SUBSCRIPTION_ID_KEY: id}, "uri": uri}),
            );
            self.send_for(rid, text);
        }
        told
    }
}

//! The transports' inputs: stdio bytes and end, HTTP requests (POST, GET streams and
//! `Last-Event-ID` resumption, DELETE), closed exchanges, dropped requests and ended sessions.

use super::*;

impl Engine {
    // -----------------------------------------------------------------------------------------
    // stdio
    // -----------------------------------------------------------------------------------------

    pub(in crate::mcp::server) fn stdio_bytes(&mut self, now: Instant, bytes: &[u8]) {
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

    pub(in crate::mcp::server) fn stdio_eof(&mut self, now: Instant) {
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

    pub(super) fn stdio_line_in(&mut self, now: Instant, line: &[u8]) {
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

    pub(in crate::mcp::server) fn http_request(
        &mut self,
        now: Instant,
        req: HttpRequest,
    ) -> ExchangeId {
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

    pub(super) fn refuse_http(
        &mut self,
        x: ExchangeId,
        status: u16,
        code: i64,
        message: impl Into<String>,
    ) {
        let e = error_object(code, message);
        let out = http::error_response(x, status, None, &e, &[]);
        self.push_output(out);
    }

    pub(super) fn post(&mut self, now: Instant, x: ExchangeId, req: HttpRequest) {
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
            json_ok,
        };
        self.message_in(now, text, channel, Some(req.headers));
    }

    pub(super) fn http_session<'a>(
        &self,
        headers: &'a Headers,
    ) -> Result<Option<&'a str>, (u16, String)> {
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

    pub(super) fn get(&mut self, now: Instant, x: ExchangeId, headers: &Headers) {
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

    pub(super) fn arm_keep_alive(&mut self, now: Instant) {
        if let (None, Some(every)) = (self.keep_alive_at, self.config.timeouts.keep_alive) {
            self.keep_alive_at = Some(now + every);
        }
    }

    /// The live connections of long-lived streams: listen streams and GET streams.
    pub(super) fn long_lived(&self) -> Vec<ExchangeId> {
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
    pub(super) fn resume(&mut self, x: ExchangeId, sid: u64, after: u64) {
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

    pub(super) fn delete(&mut self, x: ExchangeId, headers: &Headers) {
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

    pub(in crate::mcp::server) fn exchange_closed(
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
    pub(super) fn drop_request(&mut self, rid: RequestId, reason: Option<CancelReason>) {
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

    pub(super) fn close_session(&mut self, session: &str, reason: SessionEndReason) {
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
}

//! One JSON-RPC message, either transport: the era it is read in, client answers and
//! notifications, the modern and legacy checks, `initialize`, and admission (bounds, routing,
//! the methods the core answers itself, MRTR retry members, listen streams).

use super::*;

impl Engine {
    // -----------------------------------------------------------------------------------------
    // Messages (both transports)
    // -----------------------------------------------------------------------------------------

    pub(super) fn message_in(
        &mut self,
        now: Instant,
        text: &str,
        channel: Channel,
        headers: Option<Headers>,
    ) {
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
    pub(super) fn accepted(&mut self, channel: &Channel) {
        if let Channel::Http { exchange, .. } = channel {
            if self.exchanges.contains_key(exchange) {
                let out = http::status_only(*exchange, 202, &[]);
                self.push_output(out);
            }
        }
    }

    /// The legacy session a message on `channel` belongs to: stdio's, or the HTTP header's
    /// when it names an HTTP session.
    pub(super) fn legacy_session_of(
        &self,
        channel: &Channel,
        header: Option<&str>,
    ) -> Option<String> {
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
    pub(super) fn client_answer(
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

    pub(super) fn notification_in(
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
    pub(super) fn request_in(
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
        // An HTTP request whose `MCP-Protocol-Version` names this era is a modern request,
        // `_meta` or not: without it, it is malformed (`-32602`, as the spec requires), not
        // a legacy request lacking its session.
        let modern_header = headers
            .as_ref()
            .and_then(|h| h.get(PROTOCOL_VERSION_HEADER))
            .is_some_and(|v| v.trim() == MODERN_VERSION);
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
        } else if !meta_version
            && !has_meta
            && eras.legacy
            && http
            && !modern_only
            && !modern_header
        {
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

    pub(super) fn modern_request(
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
    pub(super) fn legacy_request(
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

    pub(super) fn initialize(
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
    pub(super) fn admit(&mut self, now: Instant, nr: NewRequest) {
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
        // Listen streams are bounded by `max_streams`, not as requests in flight.
        let same_connection = self
            .requests
            .values()
            .filter(|r| r.listen.is_none())
            .filter(|r| match (&r.channel, &nr.channel) {
                (Channel::Stdio, Channel::Stdio) => true,
                (Channel::Http { .. }, Channel::Http { .. }) => {
                    nr.session.is_some() && r.session == nr.session
                }
                _ => false,
            })
            .count();
        let total = self.in_flight();
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
            "server/discover" => era == Era::Legacy,
            // Nothing to listen for: no list changes and no resources to subscribe to.
            "subscriptions/listen" => era == Era::Legacy || !(c.list_changed || c.resources),
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
            // Read with its filter below.
            Call::Listen { uris: Vec::new() }
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
            exchange: match nr.channel {
                Channel::Stdio => None,
                Channel::Http { exchange, .. } => Some(exchange),
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
            let honour = (
                c.tools && c.list_changed,
                c.prompts && c.list_changed,
                c.resources && c.list_changed,
                c.resources,
            );
            let filter = match ListenFilter::read(&nr.params, honour) {
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
            // Those waiting for the application count: each becomes a stream.
            let listens = self
                .requests
                .values()
                .filter(|r| r.listen.is_some() || r.pending_listen.is_some())
                .count();
            if listens >= self.config.limits.max_streams {
                let r = Refusal::new(
                    503,
                    SERVER_ERROR,
                    format!("Too many subscriptions: at most {listens} streams at once"),
                );
                return self.early(&nr.channel, Some(&nr.id), era, Early::Refuse(r));
            }
            // Resource URIs: the application says which it honours, and the acknowledgment
            // waits for it. None: acknowledged at once.
            let (call, pending, open) = if filter.uris.is_empty() {
                (call, None, Some(filter))
            } else {
                let uris = filter.uris.clone();
                (Call::Listen { uris }, Some(filter), None)
            };
            let with_app = pending.is_some();
            let incoming = with_app.then(|| Incoming {
                call: call.clone(),
                context: context.clone(),
            });
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
                    listen: None,
                    pending_listen: pending,
                    waiting: None,
                    with_app,
                },
            );
            if let Some(incoming) = incoming {
                self.events.push_back(ServerEvent::Request(incoming));
            } else if let Some(filter) = open {
                self.open_listen(now, rid, filter);
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
                pending_listen: None,
                waiting: None,
                with_app: true,
            },
        );
        self.events
            .push_back(ServerEvent::Request(Incoming { call, context }));
    }
}

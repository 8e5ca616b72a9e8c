//! The legacy (`2025-11-25`) session: everything the client keeps only in that era, and its
//! mechanics. The `initialize` handshake and `notifications/initialized`; the requests held
//! until the session is open; on Streamable HTTP the `Mcp-Session-Id`, the session's GET stream
//! (legacy `basic/transports.mdx`, "Listening for Messages from the Server"), SSE streams
//! resumed with `Last-Event-ID`, and the `DELETE` that ends the session; legacy subscriptions
//! (list changes on the GET stream or stdout, `resources/subscribe`); and the server's own
//! requests (`ping`, `elicitation/create`).

use std::collections::BTreeMap;

use serde_json::Value;

use super::error::LocalError;
use super::operation::{Internal, OpState};
use super::send::Preset;
use super::streams::{Owner, StreamId};
use super::{
    Client, ClientConfig, EraEvidence, EraState, Event, OpError, OpId, Operation, Output,
    ProtocolChoice, UsageError, DEFAULT_SSE_RETRY, MAX_SSE_RESUMES, MAX_SSE_RETRY,
    MAX_STALLED_SSE_RESUMES, SESSION_OPEN_WAIT,
};
use crate::http::{Headers, Method};
use crate::jsonrpc::{self, ErrorObject, Id};
use crate::mcp::elicitation::ElicitationRequest;
use crate::mcp::era::Era;
use crate::mcp::headers;
use crate::mcp::legacy::{self, LegacySession};
use crate::mcp::meta::{ClientCapabilities, JsonObject};
use crate::mcp::mrtr::{self, InputAnswer, InputRequestEvent, MrtrError};
use crate::mcp::request::{CallOptions, IdSource, RequestHandle, Transport};
use crate::mcp::subscription::{self, Change, SubscriptionFilter, SubscriptionHandle};
use crate::mcp::LEGACY_PROTOCOL_VERSION;
use crate::time::{Duration, Instant};

/// Legacy-era subscription handles start here, apart from the `subscriptions/listen` ones.
pub(super) const LEGACY_SUB_BASE: u64 = 1 << 48;

/// The legacy era's state. Empty (and unused) in the modern era.
pub(super) struct Session {
    /// The handshake's outcome and the session id.
    pub(super) state: LegacySession,
    /// The legacy handshake's operation, while it runs.
    pub(super) handshake: Option<OpId>,
    /// How the legacy era was learned, reported when the handshake settles the version.
    pub(super) evidence: Option<EraEvidence>,
    /// Requests held until the legacy handshake is done (resends), with their attempt's id:
    /// never written, so a cancellation of that id is not written either.
    pub(super) held: Vec<(RequestHandle, Id, String)>,
    /// stdio: ids of held requests dropped by the client whose `notifications/cancelled` is
    /// still to come out of the tracker (it is swallowed).
    pub(super) unsent: Vec<Id>,
    /// Ids of legacy requests whose answers are not awaited (dropped quietly).
    pub(super) fired: Vec<Id>,
    /// Legacy `elicitation/create` requests waiting for the host, per operation: key, the
    /// server's request id, the request.
    pub(super) inputs: BTreeMap<OpId, Vec<(String, Id, ElicitationRequest)>>,
    /// Legacy-era subscriptions: the kinds accepted and the GET stream (HTTP).
    pub(super) subs: BTreeMap<SubscriptionHandle, (SubscriptionFilter, Option<StreamId>)>,
    pub(super) next_sub: u64,
    /// HTTP: the session's GET stream, while it is open.
    pub(super) stream: Option<StreamId>,
    /// HTTP: SSE streams being resumed with `Last-Event-ID`.
    pub(super) resumes: Vec<Resume>,
    /// HTTP: the `notifications/initialized` POST and the session's GET, until the server
    /// answers them (their heads), the session's other requests wait (at most until the
    /// instant beside them): the server then has the client ready and able to hear it before
    /// the first request that may make it ask something.
    pub(super) opening: (Vec<StreamId>, Option<Instant>),
}

impl Session {
    pub(super) fn new(config: &ClientConfig) -> Self {
        Session {
            state: new_state(config),
            handshake: None,
            evidence: None,
            held: Vec::new(),
            unsent: Vec::new(),
            fired: Vec::new(),
            inputs: BTreeMap::new(),
            subs: BTreeMap::new(),
            next_sub: 0,
            stream: None,
            resumes: Vec::new(),
            opening: (Vec::new(), None),
        }
    }

    /// Whether the handshake is done (requests can be sent in the session).
    pub(super) fn ready(&self) -> bool {
        self.state.phase() == legacy::Phase::Ready
    }

    /// When the next resume GET is due.
    pub(super) fn next_resume(&self) -> Option<Instant> {
        self.resumes.iter().filter_map(|r| r.at).min()
    }

    /// A `notifications/cancelled` for `id` comes out of the tracker: `true` when the request
    /// was held and never written (the cancellation is swallowed: the server never saw the id).
    pub(super) fn swallow_cancel(&mut self, id: &Id) -> bool {
        if let Some(i) = self.unsent.iter().position(|u| u == id) {
            self.unsent.swap_remove(i);
            return true;
        }
        let before = self.held.len();
        self.held.retain(|(_, i, _)| i != id);
        self.held.len() != before
    }

    /// The handle of a new legacy subscription.
    fn new_sub(&mut self) -> SubscriptionHandle {
        self.next_sub += 1;
        SubscriptionHandle(LEGACY_SUB_BASE + self.next_sub - 1)
    }

    /// Whether `sub` is a legacy subscription handle this session handed out (it may have
    /// ended since).
    pub(super) fn issued(&self, sub: SubscriptionHandle) -> bool {
        sub.0
            .checked_sub(LEGACY_SUB_BASE)
            .is_some_and(|n| n < self.next_sub)
    }

    /// The legacy subscriptions a change notification is for.
    fn subs_for(&self, change: &Change) -> Vec<SubscriptionHandle> {
        self.subs
            .iter()
            .filter(|(_, (f, _))| match change {
                Change::ToolsListChanged => f.tools_list_changed,
                Change::PromptsListChanged => f.prompts_list_changed,
                Change::ResourcesListChanged => f.resources_list_changed,
                Change::ResourceUpdated { uri } => f.resource_subscriptions.contains(uri),
            })
            .map(|(&h, _)| h)
            .collect()
    }

    /// Remembers the id of a request whose answer is not awaited.
    fn fire(&mut self, id: Id) {
        if self.fired.len() >= 256 {
            self.fired.remove(0);
        }
        self.fired.push(id);
    }
}

/// A session state for a new handshake.
pub(super) fn new_state(config: &ClientConfig) -> LegacySession {
    LegacySession::new(config.client_info.clone(), legacy_capabilities(config))
}

/// A legacy SSE stream that ended (or broke) before it was done, to be resumed with a GET
/// carrying `Last-Event-ID` (legacy `basic/transports.mdx`, "Sending Messages to the Server" 6
/// and "Resumability and Redelivery").
#[derive(Debug)]
pub(super) struct Resume {
    /// The request waiting for its response, or the session's own stream.
    pub(super) owner: Owner,
    /// When the GET goes out (`None`: it is out).
    pub(super) at: Option<Instant>,
    /// The last event id the stream carried.
    pub(super) last_event_id: String,
    /// Resumes so far.
    pub(super) count: u32,
    /// Resumes in a row that brought no new event id.
    pub(super) stalled: u32,
}

/// The capabilities `initialize` declares. Legacy servers ask with server-to-client requests;
/// this client serves `elicitation/create` (through [`Event::InputRequested`]) and answers
/// sampling and roots requests with "method not found", so it declares elicitation (as
/// configured) and extensions only: declaring more would promise what it does not do.
pub(super) fn legacy_capabilities(config: &ClientConfig) -> ClientCapabilities {
    ClientCapabilities {
        elicitation: config.capabilities.elicitation.clone(),
        extensions: config.capabilities.extensions.clone(),
        ..ClientCapabilities::none()
    }
}

pub(super) fn clip(s: &str) -> String {
    s.chars().take(128).collect()
}

impl Client {
    /// The host answers a legacy `elicitation/create` (`key` names it): the answer goes to the
    /// server. `false` when `key` is not one of `op_id`'s legacy input requests.
    pub(super) fn answer_legacy_input(
        &mut self,
        op_id: OpId,
        key: &str,
        answer: &InputAnswer,
    ) -> Result<bool, UsageError> {
        let Some(pending) = self.session.inputs.get_mut(&op_id) else {
            return Ok(false);
        };
        let Some(i) = pending.iter().position(|(k, _, _)| k == key) else {
            return Ok(false);
        };
        let InputAnswer::Elicitation(a) = answer else {
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
        Ok(true)
    }

    /// The session's timers: resume GETs that are due, and the end of the wait for the
    /// session's opening exchanges.
    pub(super) fn session_timeout(&mut self, now: Instant) {
        self.fire_resumes(now);
        if self.session.opening.1.is_some_and(|until| until <= now) {
            self.session_opened(now);
        }
    }

    /// Shutdown: ends the legacy subscriptions, the resumes and the session's GET stream.
    pub(super) fn close_session_streams(&mut self) {
        let legacy_subs: Vec<SubscriptionHandle> = self.session.subs.keys().copied().collect();
        for sub in legacy_subs {
            self.legacy_unsubscribe(sub);
        }
        self.session.resumes.clear();
        self.session.opening = (Vec::new(), None);
        if let Some(session) = self.session.stream.take() {
            self.streams.map.remove(&session);
            self.outputs.push_back(Output::CloseStream(session));
        }
    }

    /// Shutdown: a legacy HTTP session ends with `DELETE` (`2025-11-25` transports: "clients
    /// that no longer need a particular session SHOULD send an HTTP DELETE"); the next
    /// operation starts a new handshake.
    pub(super) fn end_session(&mut self) {
        if self.config.transport == Transport::Http
            && matches!(self.era, EraState::Legacy)
            && self.session.state.has_session()
        {
            if let Ok(headers) = self.session.state.session_headers() {
                self.http(Owner::Fire, Method::Delete, headers, String::new());
            }
        }
        self.session.handshake = None;
        self.session.state = new_state(&self.config);
    }

    /// The shape of a `DiscoverResult` built from the legacy `initialize` result.
    pub(super) fn legacy_discover_result(&self) -> String {
        let mut m = JsonObject::new();
        if let Some(n) = self.session.state.negotiated() {
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

    /// Starts (or restarts) the legacy `initialize` handshake.
    pub(super) fn start_handshake(&mut self, now: Instant) {
        let op_id = self.start_internal(now, Operation::Ping, Internal::Initialize);
        self.session.handshake = Some(op_id);
        let id = self.ids.next_id();
        let outgoing = self.session.state.initialize(id.clone());
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
                self.session.handshake = None;
                self.fail_queued(&LocalError::Request(e).into());
            }
        }
    }

    /// `req` is dropped while held (never written): the tracker's cancellation of its id must
    /// not reach the wire.
    pub(super) fn forget_held(&mut self, req: RequestHandle) {
        let transport = self.config.transport;
        let unsent = &mut self.session.unsent;
        self.session.held.retain(|(r, id, _)| {
            if *r != req {
                return true;
            }
            if transport == Transport::Stdio {
                unsent.push(id.clone());
            }
            false
        });
    }

    pub(super) fn fail_held(&mut self, now: Instant, error: &OpError) {
        let held: Vec<RequestHandle> = self.session.held.iter().map(|(r, _, _)| *r).collect();
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
        self.session.held.clear();
    }

    pub(super) fn on_initialize_response(&mut self, now: Instant, op_id: OpId, message: &str) {
        self.ops.remove(&op_id);
        self.session.handshake = None;
        let headers = std::mem::take(&mut self.streams.current_headers);
        match self
            .session
            .state
            .handle_initialize_response(&headers, message)
        {
            Ok(initialized) => {
                match self.config.transport {
                    Transport::Stdio => self.outputs.push_back(Output::Stdio(initialized.body)),
                    Transport::Http => {
                        let stream = self.http(
                            Owner::Fire,
                            Method::Post,
                            initialized.headers,
                            initialized.body,
                        );
                        self.session.opening = (vec![stream], now.checked_add(SESSION_OPEN_WAIT));
                    }
                }
                let version = self
                    .session
                    .state
                    .negotiated()
                    .map(|n| n.protocol_version.clone())
                    .unwrap_or_else(|| LEGACY_PROTOCOL_VERSION.to_owned());
                if let Some(evidence) = self.session.evidence.take() {
                    self.event(Event::EraDetected {
                        era: Era::Legacy,
                        version,
                        evidence,
                    });
                }
                if let Some(stream) = self.open_session_stream() {
                    self.session.opening.0.push(stream);
                }
                if self.session.opening.1.is_none() {
                    self.session_opened(now);
                }
            }
            Err(e) => {
                // A kept legacy verdict that no longer holds (the server was upgraded): probe
                // again in the modern era (`basic/versioning.mdx`: "re-probing if the cached
                // assumption later fails").
                if self.config.protocol == ProtocolChoice::Auto
                    && self.session.evidence == Some(EraEvidence::Cached)
                {
                    self.session.evidence = None;
                    self.era = EraState::Unknown;
                    let held: Vec<RequestHandle> =
                        self.session.held.iter().map(|(r, _, _)| *r).collect();
                    for req in held {
                        let op_id = self.by_req.get(&req).copied();
                        // Ends the held attempt in the tracker, with nothing written.
                        self.supersede(now, req);
                        if let Some(op) = op_id.and_then(|id| self.ops.get_mut(&id)) {
                            op.state = OpState::Queued;
                        }
                    }
                    self.session.held.clear();
                    let queued = self.queued_ops();
                    for op_id in queued {
                        self.dispatch(now, op_id);
                    }
                    return;
                }
                let error = OpError::handshake(e);
                self.fail_held(now, &error);
                self.fail_queued(&error);
            }
        }
    }

    pub(super) fn legacy_subscribe(
        &mut self,
        handle: Option<SubscriptionHandle>,
        filter: SubscriptionFilter,
    ) -> Result<SubscriptionHandle, UsageError> {
        if filter.is_empty() {
            return Err(UsageError::Subscription(
                subscription::UsageError::EmptyFilter,
            ));
        }
        let caps = match self.session.state.negotiated() {
            Some(n) => n.capabilities.clone(),
            None => return Err(UsageError::HandshakePending),
        };
        let list = |c: Option<&crate::mcp::discover::ListCapability>| {
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
        let sub = handle.unwrap_or_else(|| self.session.new_sub());
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
            if let Some(session) = self.session.stream {
                stream = Some(session);
            } else if let Ok(mut headers) = self.session.state.session_headers() {
                let _ = headers.set("Accept", "text/event-stream");
                headers.remove("Content-Type");
                let s = self.http(
                    Owner::LegacyListen(sub),
                    Method::Get,
                    headers,
                    String::new(),
                );
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
        self.session.subs.insert(sub, (accepted, stream));
        Ok(sub)
    }

    /// Sends a legacy request whose answer is not awaited (`resources/(un)subscribe`).
    pub(super) fn fire_request(&mut self, method: &str, uri: &str) {
        let id = self.ids.next_id();
        let mut params = JsonObject::new();
        params.insert("uri".to_owned(), Value::String(uri.to_owned()));
        let Ok(out) = self
            .session
            .state
            .request(&id, method, Value::Object(params))
        else {
            return;
        };
        self.session.fire(id);
        match self.config.transport {
            Transport::Stdio => self.outputs.push_back(Output::Stdio(out.body)),
            Transport::Http => {
                self.http(Owner::Fire, Method::Post, out.headers, out.body);
            }
        }
    }

    pub(super) fn legacy_unsubscribe(&mut self, sub: SubscriptionHandle) -> bool {
        let Some((accepted, stream)) = self.session.subs.remove(&sub) else {
            return false;
        };
        if let Some(s) = stream.filter(|s| Some(*s) != self.session.stream) {
            self.streams.map.remove(&s);
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
    pub(super) fn legacy_stream_gone(&mut self, sub: SubscriptionHandle, status: Option<u16>) {
        if self.session.subs.remove(&sub).is_some() {
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
    pub(super) fn legacy_change(&mut self, method: &str, params: Option<&Value>) {
        if self.session.subs.is_empty() {
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
        let subs = self.session.subs_for(&change);
        for sub in subs {
            self.event(Event::Subscription(subscription::Event::Changed {
                sub,
                change: change.clone(),
            }));
        }
    }

    /// Legacy HTTP: `owner`'s SSE stream ended before it was done; when it carried an event id,
    /// a GET with `Last-Event-ID` resumes it after the server's `retry` (or
    /// [`DEFAULT_SSE_RETRY`]). `false` when it is not resumed (another era, no event id, the
    /// request already answered, or the resume budget spent).
    pub(super) fn schedule_resume(
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
            && self.session.ready();
        let position = self.session.resumes.iter().position(|r| r.owner == owner);
        let (Some(last), true) = (last_event_id, resumable) else {
            if let Some(i) = position {
                self.session.resumes.swap_remove(i);
            }
            return false;
        };
        let i = position.unwrap_or_else(|| {
            self.session.resumes.push(Resume {
                owner,
                at: None,
                last_event_id: String::new(),
                count: 0,
                stalled: 0,
            });
            self.session.resumes.len() - 1
        });
        let Some(r) = self.session.resumes.get_mut(i) else {
            return false;
        };
        let stalled = if r.last_event_id == last {
            r.stalled + 1
        } else {
            0
        };
        if r.count >= MAX_SSE_RESUMES || stalled >= MAX_STALLED_SSE_RESUMES {
            self.session.resumes.swap_remove(i);
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
    pub(super) fn fire_resumes(&mut self, now: Instant) {
        let due: Vec<(Owner, String)> = self
            .session
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
            let headers = match self.session.state.session_headers() {
                Ok(h) if still_wanted => h,
                _ => {
                    self.session.resumes.retain(|r| r.owner != owner);
                    continue;
                }
            };
            let stream = self.open_get(owner, headers, Some(&last));
            match owner {
                Owner::Request(req) => {
                    self.streams.by_req.insert(req, stream);
                }
                Owner::LegacySession => self.set_session_stream(Some(stream), None),
                _ => {}
            }
        }
    }

    /// A GET on the legacy session (`Accept: text/event-stream`, `Last-Event-ID` when resuming).
    pub(super) fn open_get(
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
        self.http(owner, Method::Get, headers, String::new())
    }

    /// Legacy HTTP: the session's GET stream is now `stream` (or gone); legacy subscriptions
    /// riding on it follow it, or end with it.
    pub(super) fn set_session_stream(&mut self, stream: Option<StreamId>, status: Option<u16>) {
        let old = std::mem::replace(&mut self.session.stream, stream);
        let Some(old) = old else {
            return;
        };
        match stream {
            Some(new) => {
                for (_, s) in self.session.subs.values_mut() {
                    if *s == Some(old) {
                        *s = Some(new);
                    }
                }
            }
            None => {
                let riding: Vec<SubscriptionHandle> = self
                    .session
                    .subs
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
    pub(super) fn open_session_stream(&mut self) -> Option<StreamId> {
        if self.config.transport != Transport::Http || !self.config.legacy_listen {
            return None;
        }
        if let Some(old) = self.session.stream {
            self.streams.map.remove(&old);
            self.outputs.push_back(Output::CloseStream(old));
            self.set_session_stream(None, None);
        }
        self.session
            .resumes
            .retain(|r| r.owner != Owner::LegacySession);
        let headers = self.session.state.session_headers().ok()?;
        let stream = self.open_get(Owner::LegacySession, headers, None);
        self.session.stream = Some(stream);
        Some(stream)
    }

    /// Legacy HTTP: the server answered (or failed) `stream`; when it was the last of the
    /// session's opening exchanges, the session's requests go out.
    pub(super) fn opening_answered(&mut self, now: Instant, stream: StreamId) {
        if self.session.opening.1.is_none() {
            return;
        }
        self.session.opening.0.retain(|s| *s != stream);
        if self.session.opening.0.is_empty() {
            self.session_opened(now);
        }
    }

    /// The legacy session is open: the requests held for it go out, then the queued operations.
    pub(super) fn session_opened(&mut self, now: Instant) {
        self.session.opening = (Vec::new(), None);
        if !self.session.ready() {
            return;
        }
        for (req, _, body) in std::mem::take(&mut self.session.held) {
            self.transmit_request(req, body);
        }
        self.dispatch_queued(now);
    }

    /// A request from the server (legacy era; the modern era has none outside MRTR): `ping`
    /// is answered, anything else gets "method not found".
    pub(super) fn server_request(
        &mut self,
        _now: Instant,
        op: Option<OpId>,
        id: &Id,
        method: &str,
        params: Option<&str>,
    ) {
        if method == crate::mcp::elicitation::METHOD && matches!(self.era, EraState::Legacy) {
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
    pub(super) fn legacy_elicitation(&mut self, op: OpId, id: &Id, params: &str) -> bool {
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
        let pending = self.session.inputs.entry(op).or_default();
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
    pub(super) fn answer_server(&mut self, body: String) {
        match self.config.transport {
            Transport::Stdio => self.outputs.push_back(Output::Stdio(body)),
            Transport::Http => {
                let headers = match &self.era {
                    EraState::Legacy => self.session.state.session_headers().unwrap_or_default(),
                    _ => {
                        let mut h = Headers::new();
                        let _ = h.append("Accept", headers::ACCEPT);
                        let _ = h.append("Content-Type", headers::CONTENT_TYPE);
                        h
                    }
                };
                self.http(Owner::Fire, Method::Post, headers, body);
            }
        }
    }
}

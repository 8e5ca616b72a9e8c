//! `client`: the folder of [`Client`], the whole MCP client of one server as a sans-IO state
//! machine (its behaviour, the late-input convention and an example are on [`Client`]). The
//! module is private: `mcp` re-exports what it exports.
//!
//! # Where things are
//!
//! Each part of the client keeps its own state beside the logic that uses it:
//! - `config`: [`ClientConfig`] and its defaults;
//! - `operation`: [`Operation`], [`OpId`] and the record of an operation while it runs;
//! - `event`, `error`: what comes out ([`Output`], [`Event`]) and why an operation failed
//!   ([`OpError`]) or a call was refused ([`UsageError`]);
//! - `send`: dispatching an operation in its era, building modern and legacy requests (`_meta`
//!   texts, mirrored headers), the MRTR retry;
//! - `responses`: classifying answers (result, tool error, `input_required`, JSON-RPC and
//!   modern errors, HTTP error statuses) and what each does to its operation;
//! - `detection`: era detection, version negotiation and the fallback to the legacy era;
//! - `session`: the legacy session (handshake, held requests, the GET stream, resumes,
//!   `DELETE`, legacy subscriptions and the server's requests);
//! - `streams`: the HTTP streams, their bodies and where their messages go;
//! - `tools`: the tool catalog (`tools/list` before a call, the `-32020` refresh, exclusions);
//! - `subscriptions`: `subscriptions/listen` and subscriptions held until the era is known;
//! - `timers`: the next deadline and its reason ([`Timeout`]).

mod auth;
mod config;
mod detection;
mod error;
mod event;
mod operation;
mod responses;
mod send;
mod session;
mod streams;
mod subscriptions;
mod timers;
mod tools;

pub use auth::AuthConfig;
pub use config::{
    ClientConfig, ProtocolChoice, DEFAULT_MAX_BODY_BYTES, DEFAULT_PROBE_TIMEOUT, DEFAULT_SSE_RETRY,
    MAX_SSE_RESUMES, MAX_SSE_RETRY, MAX_STALLED_SSE_RESUMES, SESSION_OPEN_WAIT,
};
pub use error::{
    IncompatibleError, LocalError, OpError, ProtocolError, TransportError, UsageError,
};
pub use event::{EraEvidence, Event, Output, RetryReason};
pub use operation::{CachePolicy, OpId, OpOptions, Operation, ResultSource};
pub use streams::StreamId;
pub use timers::{Timeout, TimeoutReason};

use std::collections::{BTreeMap, VecDeque};
use std::fmt;

use super::cache::{ListKind, ResultCache};
use super::era::{self, Era, VersionNegotiation};
use super::headers::ToolHeaders;
use super::meta::{IdAllocator, JsonObject, RequestMeta};
use super::mrtr::InputAnswer;
use super::request::{IdSource, RequestHandle, Requests, RequestsConfig, Routed, Transport};
use super::subscription::{self, SubscriptionFilter, SubscriptionHandle, Subscriptions};
use crate::http::{Headers, ResponseHead};
use crate::jsonrpc::Message;
use crate::stdio_lines::{LineFramer, Piece};
use crate::time::{Instant, SystemTime};

use detection::EraState;
use operation::{Op, OpState};
use send::MetaTexts;
use session::Session;
use streams::HttpStreams;
use tools::ToolCatalog;

/// The MCP client of one server, as a sans-IO state machine.
///
/// It ties the other `mcp` modules together so that a host asks for operations (discover, list,
/// call, get, read, subscribe) and does not care which era the server speaks:
///
/// - **Request building** ([`super::meta`], [`super::headers`]): every modern request carries its
///   own `_meta` (version, the capabilities declared for it, client info, log level, progress
///   token, trace context); on Streamable HTTP its headers are mirrored from the body, with
///   `Mcp-Param-*` from the `x-mcp-header` annotations of the latest `tools/list`. Tools whose
///   annotations break the rules are removed from the listed result, with
///   [`Event::ToolExcluded`] naming the tool and the reason.
/// - **Eras** ([`super::era`], [`super::legacy`]): HTTP sends the first request in the modern era;
///   a 400/404/405 whose body is not a recognized modern error means legacy, and the client falls
///   back to `initialize` and resends the operation. stdio probes with `server/discover` first.
///   `-32022` picks the highest common version and retries, `-32021` declares the missing
///   capability when the host supports it and retries, `-32020` refreshes `tools/list` and
///   retries once. The verdict is kept ([`Client::era`]) and re-probed only when it breaks.
///   A `server/discover` answered with a result that is no `DiscoverResult` means legacy too.
///   A legacy HTTP session opens its GET stream ([`ClientConfig::legacy_listen`]) for the
///   server's own requests, and resumes an SSE stream the server closed after an event id with
///   a GET carrying `Last-Event-ID`, after the stream's `retry`.
/// - **MRTR** ([`super::mrtr`]): an `input_required` result surfaces [`Event::InputRequested`];
///   the host answers with [`Client::answer_input`]; the retry goes out with a new id once every
///   key is answered. Retries are never cached.
/// - **Caching** ([`super::cache`]): discover, lists and reads are served from the cache while
///   fresh; `list_changed`/`updated` notifications invalidate; a stale entry is served after a
///   failed refetch only when the cache policy allows it.
/// - **Subscriptions** ([`super::subscription`]) and the **request lifecycle**
///   ([`super::request`]: timeouts, cancellation, resends).
///
/// The step-function contract (ARCHITECTURE.md, "The step-function contract"): inputs through `handle_*(now, ...)`, outputs from
/// [`Client::poll_output`] (drain it after every input), the next deadline from
/// [`Client::poll_timeout`]. HTTP outputs are POSTs on numbered streams ([`StreamId`]); the driver
/// feeds each stream's response head, body bytes and end back. Each [`Output::Http`] is the
/// whole request ([`crate::http::Request`]: the URL and the host's extra headers come from
/// [`ClientConfig`]). stdio outputs are lines to write; the driver feeds the bytes the server
/// writes ([`Client::handle_stdio_bytes`]: the client cuts the lines).
///
/// # Late inputs
///
/// An input that names a handle this client issued but whose operation has since ended (an
/// operation that finished, was cancelled or timed out; a stream the client closed or that was
/// answered; a subscription that ended) is a race the caller cannot avoid: it is dropped,
/// nothing comes out, and the call returns `Ok(())`. An input that names a handle the client
/// never issued (streams, operations and subscriptions are numbered in order, so a number at or
/// past the next one), or one of the other transport, is the caller's mistake: the call returns
/// a [`UsageError`] naming it ([`UsageError::UnknownStream`], [`UsageError::UnknownOp`],
/// [`UsageError::WrongTransport`]). What the server says about a request that ended (a late
/// response) is the server's doing, reported as [`Event::Ignored`].
///
/// # Example
///
/// A driver's loop, with the server's answer written by hand:
///
/// ```
/// use std::time::{Instant, SystemTime};
/// use mcpwire_core::http::{Headers, ResponseHead};
/// use mcpwire_core::mcp::{Client, ClientConfig, Event, Implementation, ListKind, Output, Transport};
///
/// let now = Instant::now();
/// let config = ClientConfig::new(Transport::Http, Implementation::new("host", "1.0"))
///     .with_url("http://127.0.0.1:3000/mcp");
/// let mut client = Client::new(config);
/// let op = client.list(now, ListKind::Tools, None);
///
/// // The driver sends the request that comes out...
/// let Some(Output::Http { stream, request }) = client.poll_output() else { panic!() };
/// assert_eq!(request.url, "http://127.0.0.1:3000/mcp");
/// assert_eq!(request.headers.get("Mcp-Method"), Some("tools/list"));
/// let body = std::str::from_utf8(&request.body).unwrap();
/// assert!(body.contains("\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\""));
///
/// // ...and feeds the response back.
/// let mut h = Headers::new();
/// h.append("Content-Type", "application/json").unwrap();
/// client.handle_response_head(now, SystemTime::now(), stream, ResponseHead { status: 200, headers: h }).unwrap();
/// let answer = r#"{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"echo","inputSchema":{"type":"object"}}]}}"#;
/// client.handle_response_data(now, stream, answer.as_bytes()).unwrap();
/// client.handle_response_end(now, stream).unwrap();
///
/// let mut result = None;
/// while let Some(out) = client.poll_output() {
///     if let Output::Event(Event::Result { op: o, result: r, .. }) = out {
///         assert_eq!(o, op);
///         result = Some(r);
///     }
/// }
/// assert!(result.unwrap().contains("echo"));
/// ```
///
/// # Example: a stdio server, by hand
///
/// The contract's corners on stdio, spelled out:
///
/// - Start with the child running: no [`Client::handle_stdio_open`] is needed (it is for a
///   child the driver restarted after [`Client::handle_stdio_closed`]).
/// - Every [`Output::Stdio`] is one line to write to the child's stdin, with a newline added.
///   Feed what its stdout gives to [`Client::handle_stdio_bytes`], cut anywhere.
/// - With the era unknown, the first operation is preceded by a `server/discover` probe; the
///   operation's own request goes out once the probe is answered (or timed out: a legacy
///   server then gets `initialize`).
/// - [`Client::poll_timeout`] is the only clock the client needs: call
///   [`Client::handle_timeout`] at that instant. `None` means nothing is waiting for time (no
///   request in flight, no reconnect due): wait for input only.
/// - [`Client::shutdown`] cancels what is in flight: drain the outputs it leaves (on stdio a
///   `notifications/cancelled` line per request in flight) and write them before closing the
///   child's stdin.
///
/// ```
/// use std::time::Instant;
/// use mcpwire_core::mcp::{Client, ClientConfig, Event, Implementation, JsonObject, OpOptions};
/// use mcpwire_core::mcp::{Output, Transport};
/// use serde_json::{json, Value};
///
/// /// Drains the outputs: the lines to write, and the events.
/// fn drain(client: &mut Client) -> (Vec<Value>, Vec<Event>) {
///     let (mut lines, mut events) = (Vec::new(), Vec::new());
///     while let Some(out) = client.poll_output() {
///         match out {
///             Output::Stdio(line) => lines.push(serde_json::from_str(&line).unwrap()),
///             Output::Event(e) => events.push(e),
///             _ => unreachable!("HTTP outputs never come on stdio"),
///         }
///     }
///     (lines, events)
/// }
///
/// let now = Instant::now();
/// let mut client = Client::new(ClientConfig::new(Transport::Stdio, Implementation::new("host", "1.0")));
/// let mut arguments = JsonObject::new();
/// arguments.insert("text".into(), json!("hi"));
/// let op = client.call_tool(now, "echo", arguments, OpOptions::default());
///
/// // The era is not known: the probe goes first, and its timer is armed.
/// let (lines, _) = drain(&mut client);
/// assert_eq!(lines.len(), 1);
/// assert_eq!(lines[0]["method"], "server/discover");
/// assert!(client.poll_timeout().is_some());
///
/// // The server answers the probe (one line, here cut in two reads)...
/// let discover = json!({"jsonrpc": "2.0", "id": lines[0]["id"], "result": {
///     "supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
///     "serverInfo": {"name": "srv", "version": "1"}}});
/// let text = format!("{discover}\n");
/// let (a, b) = text.split_at(10);
/// client.handle_stdio_bytes(now, a.as_bytes()).unwrap();
/// client.handle_stdio_bytes(now, b.as_bytes()).unwrap();
///
/// // ...so the call goes out in the modern era, with its own `_meta`.
/// let (lines, _) = drain(&mut client);
/// assert_eq!(lines[0]["method"], "tools/call");
/// assert_eq!(lines[0]["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"], "2026-07-28");
///
/// let answer = json!({"jsonrpc": "2.0", "id": lines[0]["id"], "result": {
///     "content": [{"type": "text", "text": "hi"}]}});
/// client.handle_stdio_bytes(now, format!("{answer}\n").as_bytes()).unwrap();
/// let (_, events) = drain(&mut client);
/// assert!(events.iter().any(|e| matches!(e, Event::Result { op: o, is_error: false, .. } if *o == op)));
///
/// // Nothing is in flight: no deadline to wait for.
/// assert!(client.poll_timeout().is_none());
///
/// // A call in flight at shutdown is cancelled on the wire, then reported.
/// let late = client.call_tool(now, "slow", JsonObject::new(), OpOptions::default());
/// drain(&mut client);
/// client.shutdown(now);
/// let (lines, events) = drain(&mut client);
/// assert_eq!(lines[0]["method"], "notifications/cancelled");
/// assert!(events.iter().any(|e| matches!(e, Event::Cancelled { op } if *op == late)));
/// ```
pub struct Client {
    config: ClientConfig,
    ids: IdAllocator,
    era: EraState,
    /// Everything only the legacy era has: the handshake, the session and its streams.
    session: Session,
    requests: Requests,
    subs: Subscriptions,
    cache: ResultCache,
    ops: BTreeMap<OpId, Op>,
    by_req: BTreeMap<RequestHandle, OpId>,
    /// Requests abandoned by the client itself (superseded attempts): their events are dropped.
    superseded: Vec<RequestHandle>,
    /// HTTP: the exchanges the driver was asked to make.
    streams: HttpStreams,
    /// The tools' `x-mcp-header` annotations and exclusions from the latest `tools/list`.
    tools: ToolCatalog,
    /// Subscriptions asked for before the era (or the legacy session) was there: they open
    /// in the era learned, or end with [`subscription::EndReason::NotOpened`].
    held_subs: Vec<(SubscriptionHandle, SubscriptionFilter)>,
    next_op: u64,
    /// The `_meta` member texts that rarely change between requests.
    meta_texts: MetaTexts,
    /// stdio: the server's stdout cut into lines.
    stdio_lines: LineFramer,
    outputs: VecDeque<Output>,
    /// HTTP with [`ClientConfig::authorization`]: the authorization flow and its token.
    auth: Option<auth::AuthState>,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("transport", &self.config.transport)
            .field("era", &self.era)
            .field("ops", &self.ops.len())
            .field("streams", &self.streams.map.len())
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
            session: Session::new(&config),
            requests: Requests::new(RequestsConfig {
                transport,
                jitter_seed: config.jitter_seed,
            }),
            subs: Subscriptions::new(sub_config),
            cache: ResultCache::new(config.cache),
            ops: BTreeMap::new(),
            by_req: BTreeMap::new(),
            superseded: Vec::new(),
            streams: HttpStreams::default(),
            tools: ToolCatalog::default(),
            held_subs: Vec::new(),
            next_op: 0,
            meta_texts: MetaTexts::new(&config.client_info),
            stdio_lines: LineFramer::default(),
            outputs: VecDeque::new(),
            auth: config
                .authorization
                .clone()
                .filter(|_| transport == Transport::Http)
                .map(auth::AuthState::new),
            config,
        };
        if let Some(grant) = client.auth.as_ref().and_then(|a| a.flow.grant()) {
            client.config.auth_context = auth::token_context(grant);
        }
        let latest = client.latest_version();
        match (&client.config.protocol, client.config.known_era.clone()) {
            (ProtocolChoice::Legacy, _) => {
                client.era = EraState::Legacy;
                client.session.evidence = Some(EraEvidence::Configured);
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
                    client.session.evidence = Some(EraEvidence::Cached);
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
                protocol_version: self
                    .session
                    .state
                    .negotiated()
                    .map(|n| n.protocol_version.clone()),
            }),
        }
    }

    /// The `x-mcp-header` annotations of `tool` from the latest `tools/list`, if listed.
    pub fn tool_headers(&self, tool: &str) -> Option<&ToolHeaders> {
        self.tools.headers.get(tool)
    }

    /// How many operations have not ended.
    pub fn active_ops(&self) -> usize {
        self.ops.values().filter(|o| o.internal.is_none()).count()
    }

    /// Starts `operation`. Its outcome arrives as [`Event::Result`], [`Event::Failed`] or
    /// [`Event::Cancelled`] (possibly at once, e.g. from the cache).
    pub fn start(&mut self, now: Instant, operation: Operation, options: OpOptions) -> OpId {
        self.auth_refresh_ahead(now);
        let op_id = OpId(self.next_op);
        self.next_op += 1;
        let progress_token = options.progress.then(|| self.ids.next_id());
        let versions: Vec<&str> = self.config.versions.iter().map(String::as_str).collect();
        let mut op = Op::new(
            operation,
            options,
            self.config.capabilities.clone(),
            VersionNegotiation::new(&versions),
            None,
        );
        op.progress_token = progress_token;
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
    /// An operation that has ended already is left as it is (see "Late inputs" above).
    pub fn cancel(&mut self, now: Instant, op_id: OpId) -> Result<(), UsageError> {
        let Some(op) = self.ops.get(&op_id) else {
            return self.ended_op(op_id);
        };
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
        if self.answer_legacy_input(op_id, key, &answer)? {
            self.pump(now);
            return Ok(());
        }
        let Some(op) = self.ops.get_mut(&op_id) else {
            return self.ended_op(op_id);
        };
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

    /// [`Client::answer_input`] on the host's behalf, where a refused answer ends the
    /// operation: it is cancelled ([`Event::Cancelled`], and the cancellation on the wire) and
    /// the refusal is returned, for the driver to report as the operation's outcome. A driver
    /// that asks the host once per request uses this: nobody is left to answer again.
    pub fn answer_input_or_cancel(
        &mut self,
        now: Instant,
        op_id: OpId,
        key: &str,
        answer: InputAnswer,
    ) -> Result<(), UsageError> {
        let answered = self.answer_input(now, op_id, key, answer);
        if answered.is_err() {
            // An operation this client never issued has nothing to cancel.
            let _ = self.cancel(now, op_id);
        }
        answered
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
            EraState::Legacy if self.session.state.negotiated().is_some() => {
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
        match self.subs.close(now, sub) {
            Ok(()) => {}
            // It ended already (late): nothing to do.
            Err(subscription::UsageError::UnknownHandle)
                if self.subs.issued(sub) || self.session.issued(sub) => {}
            Err(e) => return Err(UsageError::Subscription(e)),
        }
        self.pump(now);
        Ok(())
    }

    /// A call names `op_id`, which is not running: `Ok` when it ended (a late input),
    /// [`UsageError::UnknownOp`] when this client never issued it.
    fn ended_op(&self, op_id: OpId) -> Result<(), UsageError> {
        if op_id.0 < self.next_op {
            Ok(())
        } else {
            Err(UsageError::UnknownOp)
        }
    }

    /// An HTTP input names `stream`: `Ok(true)` when it is open, `Ok(false)` when it ended
    /// (closed by the client or already answered: the input is dropped), an error naming the
    /// input when the client never issued it.
    fn live_stream(&self, input: &'static str, stream: StreamId) -> Result<bool, UsageError> {
        if self.config.transport != Transport::Http {
            return Err(UsageError::WrongTransport { input });
        }
        if !self.streams.issued(stream) {
            return Err(UsageError::UnknownStream { input, stream });
        }
        Ok(self.streams.map.contains_key(&stream))
    }

    /// The next output, or `None` when there is nothing to do until the next input or timeout.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.outputs.pop_front()
    }

    /// The next instant [`Client::handle_timeout`] must be called, and why (the earliest
    /// deadline of the request tracker, the subscriptions and the legacy session).
    pub fn poll_timeout(&self) -> Option<Timeout> {
        self.next_timeout()
    }

    /// Time passed. Calling it early or twice is harmless.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.requests.handle_timeout(now, &mut self.ids);
        self.subs.handle_timeout(now, &mut self.ids);
        self.session_timeout(now);
        self.auth_handle_timeout(now);
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
        if !self.live_stream("handle_response_head", stream)? {
            return Ok(());
        }
        self.on_response_head(now, wall, stream, head);
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
        if !self.live_stream("handle_response_data", stream)? {
            return Ok(());
        }
        self.on_response_data(now, stream, data);
        self.pump(now);
        Ok(())
    }

    /// HTTP: `stream`'s response ended (the body is complete).
    pub fn handle_response_end(
        &mut self,
        now: Instant,
        stream: StreamId,
    ) -> Result<(), UsageError> {
        if !self.live_stream("handle_response_end", stream)? {
            return Ok(());
        }
        self.on_response_end(now, stream);
        self.pump(now);
        Ok(())
    }

    /// HTTP: `stream` failed without a complete response (connect error, reset, read error).
    pub fn handle_transport_failed(
        &mut self,
        now: Instant,
        stream: StreamId,
    ) -> Result<(), UsageError> {
        if !self.live_stream("handle_transport_failed", stream)? {
            return Ok(());
        }
        self.stream_failed(now, stream, None);
        self.pump(now);
        Ok(())
    }

    /// stdio: bytes the server wrote to its stdout, cut anywhere. The client cuts them into
    /// lines itself (a line split across reads is joined; a line longer than
    /// [`MAX_STDIO_LINE`](crate::stdio_lines::MAX_STDIO_LINE) is skipped whole; bytes that are
    /// not UTF-8 are replaced, which makes the line no JSON-RPC) and takes each line as
    /// [`Client::handle_stdio_line`] does. A last line without its newline is taken by
    /// [`Client::handle_stdio_closed`].
    pub fn handle_stdio_bytes(&mut self, now: Instant, bytes: &[u8]) -> Result<(), UsageError> {
        if self.config.transport != Transport::Stdio {
            return Err(UsageError::WrongTransport {
                input: "handle_stdio_bytes",
            });
        }
        // Taken out while its lines are handled (which needs the whole client); no copy.
        let mut lines = std::mem::take(&mut self.stdio_lines);
        lines.push(bytes, |piece| {
            if let Piece::Line(line) = piece {
                self.stdio_line(now, &String::from_utf8_lossy(line));
            }
        });
        self.stdio_lines = lines;
        Ok(())
    }

    /// stdio: one line the server wrote (without its newline; a trailing `\r` or `\n` is
    /// dropped). [`Client::handle_stdio_bytes`] cuts the lines from what is read.
    pub fn handle_stdio_line(&mut self, now: Instant, line: &str) -> Result<(), UsageError> {
        if self.config.transport != Transport::Stdio {
            return Err(UsageError::WrongTransport {
                input: "handle_stdio_line",
            });
        }
        self.stdio_line(now, line);
        Ok(())
    }

    fn stdio_line(&mut self, now: Instant, line: &str) {
        let line = line.trim_end_matches(['\r', '\n']);
        if line.trim().is_empty() {
            return;
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
                    self.streams.current_headers = Headers::new();
                    self.unrouted(line);
                }
            }
        }
        self.pump(now);
    }

    /// stdio: the server's process exited (or its pipes closed). A last line it wrote without
    /// a newline ([`Client::handle_stdio_bytes`]) is taken first.
    pub fn handle_stdio_closed(&mut self, now: Instant) -> Result<(), UsageError> {
        if self.config.transport != Transport::Stdio {
            return Err(UsageError::WrongTransport {
                input: "handle_stdio_closed",
            });
        }
        let mut lines = std::mem::take(&mut self.stdio_lines);
        lines.finish(|piece| {
            if let Piece::Line(line) = piece {
                self.stdio_line(now, &String::from_utf8_lossy(line));
            }
        });
        self.stdio_lines = lines;
        self.requests.handle_channel_closed(now);
        self.subs.handle_channel_closed(now);
        if matches!(self.era, EraState::Legacy) {
            // A new process has no session.
            self.session.state = session::new_state(&self.config);
        }
        self.pump(now);
        Ok(())
    }

    /// stdio: the server's process is running again (restarted by the driver).
    pub fn handle_stdio_open(&mut self, now: Instant) -> Result<(), UsageError> {
        if self.config.transport != Transport::Stdio {
            return Err(UsageError::WrongTransport {
                input: "handle_stdio_open",
            });
        }
        // A new process: nothing of the old one's stdout is part of its lines.
        self.stdio_lines = LineFramer::default();
        self.requests.handle_channel_open(now);
        self.subs.handle_channel_open(now);
        if matches!(self.era, EraState::Legacy) && self.session.handshake.is_none() {
            self.start_handshake(now);
        }
        self.pump(now);
        Ok(())
    }

    fn event(&mut self, e: Event) {
        if let Event::Result { op, .. } | Event::Failed { op, .. } | Event::Cancelled { op } = &e {
            self.session.inputs.remove(op);
        }
        self.outputs.push_back(Output::Event(e));
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
        self.close_session_streams();
        self.pump(now);
        self.end_session();
    }

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
            if self.pump_auth(now) {
                progressed = true;
            }
            for waiter in std::mem::take(&mut self.tools.released) {
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
}

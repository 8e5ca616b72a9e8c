//! [`Engine`]: the whole Secure MCP Tunnel client as one sans-IO state machine.
//!
//! The engine decides everything the tunnel protocol asks of a client; a driver only moves bytes
//! and reads the clock. It follows the step-function contract (ARCHITECTURE.md, "The step-function contract"):
//!
//! - inputs go in through `handle_*(now, ...)`: poll responses (with the instant their headers
//!   arrived), forward outcomes (response heads, body chunks, framed messages, failures), response
//!   POST outcomes, and timers (`handle_timeout`);
//! - outputs come out of [`Engine::poll_output`]: a poll to send, a forward to perform, a response
//!   POST to send, a cancellation, or an [`Event`] for the host's log; drain it after every input;
//! - [`Engine::poll_timeout`] names the next deadline and why.
//!
//! The rules it holds (`protocol.md`):
//! - at most one poll in flight; `limit` = min(free in-flight slots, 25); no poll while every slot
//!   is taken; every command of a response is processed, even beyond `limit`;
//! - one receipt instant per poll response, taken by the driver before the body is decoded;
//!   `deadline = receipt + response_timeout`, never derived from `created_at`;
//! - an expired command is dropped without a forward and without a response; a deadline that
//!   passes during the forward cancels it; one that passes during delivery cancels the POST; a late
//!   error is never synthesized;
//! - zero or more `jsonrpc_notify` posts, then exactly one terminal post per command, in order
//!   (one POST in flight per command), each echoing `request_id`/`channel` in the body and the shard
//!   token only in `X-Tunnel-Shard-Token`;
//! - retries: polls on transport errors, 429 and 5xx; terminal POSTs on transport errors, 408, 429,
//!   502, 503 and 504 with the exact same request; notification POSTs only on 429 or a failure
//!   before the request was written, and after one fails, later notifications of that command are
//!   skipped while the terminal is still delivered; `Retry-After` is a minimum delay; a `404` POST
//!   ends the command without replay; `401`/`403` surface an operator-action state and back off at
//!   the longest delay instead of spinning.

mod api;
pub(crate) mod config;

use crate::time::{Duration, Instant, SystemTime};
use std::collections::{BTreeMap, VecDeque};
use std::fmt;

use serde_json::value::RawValue;

pub use self::api::{
    CommandId, Event, Forward, ForwardKind, Health, NotReady, Output, PollId, PostId, Readiness,
    Stage, Timeout, TimeoutReason, UsageError,
};
use self::config::encode_component;
pub(crate) use self::config::{common_headers, tunnel_base_url};
pub use self::config::{
    is_reserved_control_plane_header, metadata_request, Config, ConfigError, Secret,
};
use super::failure::{self, FailureSource, TransportErrorKind, TunnelFailure};
use super::forward_headers::{self, ToolCatalog};
use super::headers::filter_response_headers;
use super::server_info::ServerInfo;
use super::wire::{self, CommandKind, DecodeError, PolledCommand, RespType, ResponsePayload};
use crate::backoff::{self, Jitter};
use crate::http::{self, Headers, Method, ResponseHead};
use crate::jsonrpc::{Id, Message};
use crate::sse::SseParser;

/// The most commands a poll may ask for (`limit` is 1 through 25).
pub const MAX_POLL_LIMIT: usize = 25;

/// The longest wait between polls, whatever the backoff or `Retry-After` say.
pub const MAX_POLL_DELAY: Duration = Duration::from_secs(3600);

/// What the control plane's answer to one response POST (`POST /v1/tunnels/{tunnel_id}/response`)
/// means for that attempt; the engine and a driver's delivery counters both read it from here.
///
/// `protocol.md`, "Errors, retries, and concurrency": "A response POST can return `404` when the
/// request has already been fulfilled or is no longer pending. Treat that command as terminal and
/// do not replay the MCP operation." Any other non-`2xx` answer (the `openapi.json` answers of
/// that endpoint: `400`, `401`, `413`, `429`, `503`) is a failed attempt, retried or not by the
/// same section's rules for terminal and notification POSTs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PostAnswer {
    /// `2xx`: the response was taken.
    Accepted,
    /// `404`: the command is already fulfilled or no longer pending; it ends without replay.
    AlreadyFulfilled,
    /// Any other status: the attempt failed.
    Failed,
}

impl PostAnswer {
    /// Classifies the HTTP status of a response POST's answer.
    pub fn of(status: u16) -> Self {
        match status {
            200..=299 => PostAnswer::Accepted,
            404 => PostAnswer::AlreadyFulfilled,
            _ => PostAnswer::Failed,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Internal state.

/// What reply a forward expects.
#[derive(Clone, Debug, PartialEq)]
enum Expect {
    /// A JSON-RPC response with this id (`None`: the payload's id could not be read, so any
    /// response is the reply, and a synthesized failure carries `id: null`).
    Reply(Option<Id>),
    /// An acknowledgement only (a notification, or a payload with no request id).
    Ack,
    /// A session termination.
    SessionClosed,
}

/// How a forward's HTTP response body is being read.
enum Body {
    /// No head yet (or a framed transport such as stdio).
    Pending,
    /// A JSON (or other, non-SSE) body, buffered up to the bound.
    Buffered(Vec<u8>),
    /// An SSE stream.
    Sse(Box<SseParser>),
}

struct ForwardState {
    head: Option<ResponseHead>,
    body: Body,
    /// When the connection TTL ends the forward (set when its head arrives).
    ttl_at: Option<Instant>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PostKind {
    Notify,
    Terminal,
}

struct PendingPost {
    kind: PostKind,
    resp_type: RespType,
    resp_code: u16,
    request: http::Request,
    attempts: u32,
    /// A retry waits until then.
    not_before: Option<Instant>,
}

struct PostInFlight {
    id: PostId,
    post: PendingPost,
}

struct Command {
    request_id: String,
    shard_token: Option<String>,
    channel: String,
    deadline: Option<Instant>,
    /// When the poll response that carried it arrived (its deadline's anchor).
    received_at: Instant,
    /// Its `created_at`, when it is an RFC 3339 UTC time (for latency reports only: never its
    /// deadline).
    created_at: Option<SystemTime>,
    expect: Expect,
    /// Present while queued for a forward: what to send.
    to_forward: Option<Forward>,
    /// Present while the forward runs.
    forward: Option<ForwardState>,
    /// Posts waiting their turn, in order.
    posts: VecDeque<PendingPost>,
    /// The POST in flight, if any.
    post_in_flight: Option<PostInFlight>,
    /// A notification delivery failed: skip later ones.
    notifications_failed: bool,
    /// The terminal response is queued or delivered.
    terminal_queued: bool,
    /// A `tools/list` request: `Some(true)` for a later page (it has a cursor).
    tools_list: Option<bool>,
}

enum PollState {
    /// The next poll may go out at this instant.
    Due(Instant),
    /// A poll is in flight.
    InFlight(PollId),
}

/// The Secure MCP Tunnel client state machine. See the module documentation.
pub struct Engine {
    config: Config,
    common_headers: Headers,
    poll_url: String,
    response_url: String,
    jitter: Jitter,
    poll: PollState,
    stopped: bool,
    next_id: u64,
    commands: BTreeMap<CommandId, Command>,
    forward_queue: VecDeque<CommandId>,
    forwards_in_flight: usize,
    posts: BTreeMap<PostId, CommandId>,
    outputs: VecDeque<Output>,
    last_successful_poll: Option<Instant>,
    consecutive_poll_failures: u32,
    operator_action: Option<u16>,
    recent_forwards: VecDeque<bool>,
    /// Per channel, the `x-mcp-header` annotations of the last `tools/list` forwarded on it.
    tools: BTreeMap<String, ToolCatalog>,
}

impl fmt::Debug for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Engine")
            .field("tunnel_id", &self.config.tunnel_id)
            .field("commands", &self.commands.len())
            .field("outputs", &self.outputs.len())
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// A new engine; the first poll is due at `now`.
    pub fn new(config: Config, now: Instant) -> Result<Self, ConfigError> {
        if config.max_in_flight == 0 {
            return Err(ConfigError::Invalid("max_in_flight must be at least 1"));
        }
        if config.max_concurrent_forwards == 0 {
            return Err(ConfigError::Invalid(
                "max_concurrent_forwards must be at least 1",
            ));
        }
        if config.max_post_attempts == 0 {
            return Err(ConfigError::Invalid("max_post_attempts must be at least 1"));
        }
        if config.tunnel_id.is_empty() {
            return Err(ConfigError::Invalid("tunnel_id must not be empty"));
        }
        if config.poll_wait.is_zero() {
            return Err(ConfigError::Invalid("poll_wait must be at least 1 ms"));
        }
        let common = common_headers(&config)?;
        let base = tunnel_base_url(&config);
        let mut query = String::new();
        if let Some(channels) = &config.poll_channels {
            let mut sorted: Vec<&String> = channels.iter().collect();
            sorted.sort();
            sorted.dedup();
            for c in sorted {
                query.push_str(&format!("channel={}&", encode_component(c)));
            }
        }
        let poll_url = format!("{base}/poll?{query}");
        Ok(Engine {
            jitter: Jitter::new(config.jitter_seed),
            common_headers: common,
            response_url: format!("{base}/response"),
            poll_url,
            config,
            poll: PollState::Due(now),
            stopped: false,
            next_id: 1,
            commands: BTreeMap::new(),
            forward_queue: VecDeque::new(),
            forwards_in_flight: 0,
            posts: BTreeMap::new(),
            outputs: VecDeque::new(),
            last_successful_poll: None,
            consecutive_poll_failures: 0,
            operator_action: None,
            recent_forwards: VecDeque::new(),
            tools: BTreeMap::new(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Changes the `X-Tunnel-MCP-Server-Info` declaration (channels enabled or disabled at run
    /// time). Requests built from now on carry the new value; a POST already built keeps its
    /// exact headers across retries.
    pub fn set_server_info(&mut self, info: Option<ServerInfo>) -> Result<(), ConfigError> {
        let mut headers = self.common_headers.clone();
        headers.remove("X-Tunnel-MCP-Server-Info");
        if let Some(i) = &info {
            headers.append("X-Tunnel-MCP-Server-Info", i.header_value())?;
        }
        self.common_headers = headers;
        self.config.server_info = info;
        Ok(())
    }

    fn next(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    // -----------------------------------------------------------------------------------------
    // Outputs.

    /// The next output, or `None` when there is nothing to do until the next input or timeout.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.outputs.pop_front()
    }

    /// The next instant [`Engine::handle_timeout`] must be called, and why.
    pub fn poll_timeout(&self) -> Option<Timeout> {
        let mut best: Option<Timeout> = None;
        let mut consider = |at: Instant, reason: TimeoutReason| {
            if best.as_ref().is_none_or(|b| at < b.at) {
                best = Some(Timeout { at, reason });
            }
        };
        if let PollState::Due(at) = self.poll {
            if !self.stopped && self.free_slots() > 0 {
                consider(at, TimeoutReason::Poll);
            }
        }
        for (&cmd, c) in &self.commands {
            if let Some(d) = c.deadline {
                consider(d, TimeoutReason::Deadline { cmd });
            }
            if c.post_in_flight.is_none() {
                if let Some(at) = c.posts.front().and_then(|p| p.not_before) {
                    consider(at, TimeoutReason::PostRetry { cmd });
                }
            }
            if let Some(at) = c.forward.as_ref().and_then(|f| f.ttl_at) {
                consider(at, TimeoutReason::ConnectionTtl { cmd });
            }
        }
        best
    }

    /// The engine's state for health checks.
    pub fn health(&self) -> Health {
        Health {
            last_successful_poll: self.last_successful_poll,
            consecutive_poll_failures: self.consecutive_poll_failures,
            in_flight: self.commands.len(),
            queued_forwards: self.forward_queue.len(),
            forwards_in_flight: self.forwards_in_flight,
            posts_in_flight: self.posts.len(),
            readiness: self.readiness(),
        }
    }

    fn readiness(&self) -> Readiness {
        if let Some(status) = self.operator_action {
            return Readiness::NotReady(NotReady::OperatorAction { status });
        }
        if self.consecutive_poll_failures > 0 && self.last_successful_poll.is_none()
            || self.consecutive_poll_failures >= 3
        {
            return Readiness::NotReady(NotReady::PollFailing {
                consecutive_failures: self.consecutive_poll_failures,
            });
        }
        if self.last_successful_poll.is_none() {
            return Readiness::NotReady(NotReady::NoSuccessfulPoll);
        }
        if !self.recent_forwards.is_empty() && self.recent_forwards.iter().all(|ok| !ok) {
            return Readiness::NotReady(NotReady::ForwardsFailing {
                recent_failures: self.recent_forwards.len(),
            });
        }
        Readiness::Ready
    }

    /// Stops polling; commands already admitted are finished. See [`Engine::is_idle`]. A poll
    /// in flight is not cancelled here: its report (or [`Engine::handle_poll_failed`] once the
    /// caller abandoned it) ends it, and no other poll follows. `now` is taken as by every
    /// machine's `shutdown`; stopping starts no timer and emits nothing by itself.
    pub fn shutdown(&mut self, _now: Instant) {
        self.stopped = true;
    }

    /// The poll in flight, if any (a caller abandoning it at shutdown reports it failed).
    pub fn poll_in_flight(&self) -> Option<PollId> {
        match self.poll {
            PollState::InFlight(id) => Some(id),
            PollState::Due(_) => None,
        }
    }

    /// Whether this engine issued `handle` (handles of every kind come from one sequence).
    fn issued(&self, handle: u64) -> bool {
        handle < self.next_id
    }

    /// Whether nothing is in flight (no poll, no command).
    pub fn is_idle(&self) -> bool {
        self.commands.is_empty() && !matches!(self.poll, PollState::InFlight(_))
    }

    fn free_slots(&self) -> usize {
        self.config
            .max_in_flight
            .saturating_sub(self.commands.len())
    }

    /// Emits whatever is due at `now`: the next poll, queued forwards, queued posts.
    fn drive(&mut self, now: Instant) {
        self.expire(now);
        self.start_forwards(now);
        let cmds: Vec<CommandId> = self.commands.keys().copied().collect();
        for cmd in cmds {
            self.start_next_post(now, cmd);
        }
        if let PollState::Due(at) = self.poll {
            let free = self.free_slots();
            if !self.stopped && at <= now && free > 0 {
                let id = PollId(self.next());
                let limit = free.min(MAX_POLL_LIMIT);
                let url = format!(
                    "{}limit={}&timeout_ms={}",
                    self.poll_url,
                    limit,
                    self.config.poll_wait.as_millis().max(1)
                );
                let request = http::Request {
                    method: Method::Get,
                    url,
                    headers: self.common_headers.clone(),
                    body: Vec::new(),
                };
                self.poll = PollState::InFlight(id);
                self.outputs.push_back(Output::Poll { id, request });
            }
        }
    }

    // -----------------------------------------------------------------------------------------
    // Polls.

    /// A poll's response arrived and its body was read. `received_at` is the instant its headers
    /// arrived, taken before the body was read or decoded: it anchors every command's deadline.
    /// `now` is the instant of this call (after the body was read): a command whose deadline is
    /// already behind it is dropped. `wall` is the wall clock (for `Retry-After` HTTP-dates).
    pub fn handle_poll_response(
        &mut self,
        now: Instant,
        received_at: Instant,
        wall: SystemTime,
        id: PollId,
        head: &ResponseHead,
        body: &[u8],
    ) -> Result<(), UsageError> {
        if !self.take_poll(id)? {
            return Ok(());
        }
        self.expire(now);
        match head.status {
            204 => self.poll_succeeded(received_at, 0),
            200 => match wire::decode_poll_body(body) {
                Ok(items) => {
                    self.poll_succeeded(received_at, items.len());
                    for item in items {
                        self.admit(now, received_at, wall, item);
                    }
                }
                Err(e) => {
                    self.outputs
                        .push_back(Output::Event(Event::MalformedCommand {
                            request_id: None,
                            reason: e.to_string(),
                        }));
                    self.poll_failed(now, Some(200), None, None);
                }
            },
            status => {
                let code = wire::ApiErrorResponse::parse(body).and_then(|e| e.error.code);
                let retry_after = self.retry_after(head, wall);
                self.poll_failed(now, Some(status), code, retry_after);
            }
        }
        self.drive(now);
        Ok(())
    }

    /// A poll failed before a response arrived (connect, TLS, reset, timeout...).
    pub fn handle_poll_failed(&mut self, now: Instant, id: PollId) -> Result<(), UsageError> {
        if !self.take_poll(id)? {
            return Ok(());
        }
        self.expire(now);
        self.poll_failed(now, None, None, None);
        self.drive(now);
        Ok(())
    }

    /// `Ok(true)` for the poll in flight, `Ok(false)` for a late report (a poll that already
    /// ended: drop the input), `Err` for a handle never issued.
    fn take_poll(&mut self, id: PollId) -> Result<bool, UsageError> {
        match self.poll {
            PollState::InFlight(current) if current == id => Ok(true),
            _ if self.issued(id.0) => Ok(false),
            _ => Err(UsageError::UnknownHandle("poll")),
        }
    }

    /// A `Retry-After` value of a `429`/`503` response (others don't carry one for us).
    fn retry_after(&self, head: &ResponseHead, wall: SystemTime) -> Option<Duration> {
        if !matches!(head.status, 429 | 503) {
            return None;
        }
        backoff::retry_after_from_headers(&head.headers, wall, self.config.retry_after_cap)
    }

    fn poll_succeeded(&mut self, now: Instant, commands: usize) {
        self.last_successful_poll = Some(now);
        self.consecutive_poll_failures = 0;
        self.operator_action = None;
        self.poll = PollState::Due(now);
        self.outputs
            .push_back(Output::Event(Event::Polled { commands }));
    }

    fn poll_failed(
        &mut self,
        now: Instant,
        status: Option<u16>,
        code: Option<String>,
        retry_after: Option<Duration>,
    ) {
        self.consecutive_poll_failures = self.consecutive_poll_failures.saturating_add(1);
        let operator = matches!(status, Some(s) if (400..500).contains(&s) && s != 408 && s != 429);
        // Operator action: no tight loop, the longest backoff (with jitter).
        let attempt = if operator {
            u32::MAX
        } else {
            self.consecutive_poll_failures
        };
        let delay = backoff::retry_delay(
            &self.config.poll_backoff,
            attempt,
            self.jitter.next_u64(),
            retry_after,
        );
        if let (true, Some(s)) = (operator, status) {
            self.operator_action = Some(s);
            self.outputs
                .push_back(Output::Event(Event::OperatorActionRequired {
                    status: s,
                    code: code.clone(),
                }));
        }
        self.outputs.push_back(Output::Event(Event::PollFailed {
            status,
            code,
            retry_in: delay,
        }));
        let delay = delay.min(MAX_POLL_DELAY);
        // `Instant + Duration` panics on overflow: fall back to the largest representable wait.
        let at = now
            .checked_add(delay)
            .or_else(|| now.checked_add(Duration::from_secs(1)))
            .unwrap_or(now);
        self.poll = PollState::Due(at);
    }

    /// Admits one decoded poll item. `received_at` anchors its deadline; `now` judges expiry.
    fn admit(
        &mut self,
        now: Instant,
        received_at: Instant,
        wall: SystemTime,
        item: Result<PolledCommand, DecodeError>,
    ) {
        let (cmd, malformed) = match item {
            Ok(cmd) => (cmd, None),
            Err(DecodeError::Command(m)) => {
                let wire::MalformedCommand {
                    request_id,
                    shard_token,
                    channel,
                    response_timeout,
                    kind,
                    reason,
                } = *m;
                self.outputs
                    .push_back(Output::Event(Event::MalformedCommand {
                        request_id: Some(request_id.clone()),
                        reason,
                    }));
                let cmd = PolledCommand {
                    request_id,
                    shard_token,
                    channel,
                    created_at: None,
                    response_timeout,
                    headers: Headers::new(),
                    // A payload that could not be read is answered as a request with an unknown id.
                    kind: kind.unwrap_or(CommandKind::Unknown(String::new())),
                };
                (
                    cmd,
                    Some(TunnelFailure::before_response(
                        FailureSource::ClientInternal,
                        None,
                    )),
                )
            }
            Err(e) => {
                self.outputs
                    .push_back(Output::Event(Event::MalformedCommand {
                        request_id: None,
                        reason: e.to_string(),
                    }));
                return;
            }
        };
        if malformed.is_none() {
            if let CommandKind::Unknown(command_type) = &cmd.kind {
                self.outputs
                    .push_back(Output::Event(Event::UnknownCommandType {
                        request_id: cmd.request_id,
                        command_type: command_type.clone(),
                    }));
                return;
            }
        }
        let deadline = cmd
            .response_timeout
            .duration()
            .and_then(|d| received_at.checked_add(d));
        if deadline.is_some_and(|d| d <= now) {
            self.outputs.push_back(Output::Event(Event::Expired {
                request_id: cmd.request_id,
                stage: Stage::BeforeForward,
            }));
            return;
        }
        let id = CommandId(self.next());
        let tools_list = match &cmd.kind {
            CommandKind::JsonRpc(payload) => {
                forward_headers::tools_list_continuation(payload.get())
            }
            _ => None,
        };
        let (expect, kind) = match cmd.kind {
            CommandKind::JsonRpc(payload) => {
                let (expect, method, rpc_id) = match Message::parse(payload.get()) {
                    Ok(Message::Request { id, method, .. }) => {
                        (Expect::Reply(Some(id.clone())), Some(method), Some(id))
                    }
                    Ok(Message::Notification { method, .. }) => (Expect::Ack, Some(method), None),
                    // A response or error sent by the caller (answering a server request):
                    // forwarded verbatim, acknowledged.
                    Ok(Message::Response { .. } | Message::Error { .. }) => {
                        (Expect::Ack, None, None)
                    }
                    // Not JSON-RPC the engine can read (an id it cannot represent, no version...):
                    // forwarded verbatim; whatever JSON-RPC reply comes back is posted.
                    Err(_) => (Expect::Reply(None), None, None),
                };
                (
                    expect,
                    ForwardKind::JsonRpc {
                        payload,
                        method,
                        id: rpc_id,
                    },
                )
            }
            CommandKind::SessionTermination => {
                (Expect::SessionClosed, ForwardKind::SessionTermination)
            }
            // Only a malformed command whose payload could not be read gets here.
            CommandKind::Unknown(_) => (Expect::Reply(None), ForwardKind::SessionTermination),
        };
        let mut c = Command::new(
            cmd.request_id,
            cmd.shard_token,
            cmd.channel,
            deadline,
            expect,
            received_at,
        );
        c.tools_list = tools_list;
        c.created_at = cmd.created_at.as_deref().and_then(created_at);
        if let Some(age) = c.created_at.and_then(|t| wall.duration_since(t).ok()) {
            self.outputs.push_back(Output::Event(Event::CommandAge {
                request_id: c.request_id.clone(),
                age,
            }));
        }
        let unserved = !self.config.channels.contains(&c.channel);
        if malformed.is_some() || unserved {
            if unserved && malformed.is_none() {
                let command_type = match &kind {
                    ForwardKind::JsonRpc { .. } => "jsonrpc",
                    ForwardKind::SessionTermination => "session_termination",
                };
                self.outputs
                    .push_back(Output::Event(Event::UnsupportedChannel {
                        request_id: c.request_id.clone(),
                        channel: c.channel.chars().take(64).collect(),
                        command_type,
                    }));
            }
            // Answer it by its kind without contacting MCP: the caller is not left waiting.
            c.to_forward = None;
            self.commands.insert(id, c);
            self.fail_command(
                id,
                malformed.unwrap_or_else(|| {
                    TunnelFailure::before_response(FailureSource::ClientInternal, None)
                }),
            );
            return;
        }
        c.to_forward = Some(Forward {
            cmd: id,
            channel: c.channel.clone(),
            request_id: c.request_id.clone(),
            headers: cmd.headers,
            deadline,
            kind,
        });
        self.commands.insert(id, c);
        self.forward_queue.push_back(id);
    }

    fn start_forwards(&mut self, now: Instant) {
        while self.forwards_in_flight < self.config.max_concurrent_forwards {
            let Some(id) = self.forward_queue.pop_front() else {
                break;
            };
            let Some(c) = self.commands.get_mut(&id) else {
                continue;
            };
            let Some(mut fwd) = c.to_forward.take() else {
                continue;
            };
            if c.deadline.is_some_and(|d| d <= now) {
                let request_id = c.request_id.clone();
                self.commands.remove(&id);
                self.outputs.push_back(Output::Event(Event::Expired {
                    request_id,
                    stage: Stage::BeforeForward,
                }));
                continue;
            }
            c.forward = Some(ForwardState {
                head: None,
                body: Body::Pending,
                ttl_at: None,
            });
            let payload = match &fwd.kind {
                ForwardKind::JsonRpc { payload, .. } => Some(payload.get()),
                ForwardKind::SessionTermination => None,
            };
            fwd.headers = forward_headers::forward_headers(
                &fwd.headers,
                payload,
                self.tools.get(&fwd.channel),
            );
            self.forwards_in_flight += 1;
            self.outputs.push_back(Output::Forward(fwd));
        }
    }

    // -----------------------------------------------------------------------------------------
    // Forward outcomes.

    /// The command whose forward runs; `Ok(None)` for a late report (the forward already ended:
    /// drop the input); `Err` for a command never issued, or one whose forward has not started.
    fn forwarding(&mut self, cmd: CommandId) -> Result<Option<&mut Command>, UsageError> {
        let issued = self.issued(cmd.0);
        match self.commands.get_mut(&cmd) {
            Some(c) if c.forward.is_some() => Ok(Some(c)),
            Some(c) if c.to_forward.is_some() => Err(UsageError::OutOfOrder(
                "a forward outcome before the forward was emitted",
            )),
            _ if issued => Ok(None),
            _ => Err(UsageError::UnknownHandle("forward")),
        }
    }

    /// The MCP server's HTTP response head arrived.
    pub fn handle_forward_head(
        &mut self,
        now: Instant,
        cmd: CommandId,
        head: ResponseHead,
    ) -> Result<(), UsageError> {
        self.expire(now);
        let max = self.config.max_response_body;
        let ttl = self.config.connection_max_ttl;
        let Some(c) = self.forwarding(cmd)? else {
            return Ok(());
        };
        let Some(state) = c.forward.as_mut() else {
            return Ok(());
        };
        if state.head.is_some() {
            return Err(UsageError::OutOfOrder("a second response head"));
        }
        let is_sse = head
            .headers
            .get("Content-Type")
            .and_then(|ct| ct.split(';').next())
            .is_some_and(|mt| mt.trim().eq_ignore_ascii_case("text/event-stream"));
        state.body = if is_sse && (200..300).contains(&head.status) {
            Body::Sse(Box::new(SseParser::with_max_event_size(max)))
        } else {
            Body::Buffered(Vec::new())
        };
        if head.status < 400 && matches!(c.expect, Expect::Reply(_)) {
            // A TTL too large for the clock is no bound (as a `response_timeout` is).
            state.ttl_at = ttl.and_then(|t| now.checked_add(t));
        }
        state.head = Some(head);
        self.drive(now);
        Ok(())
    }

    /// A chunk of the MCP server's response body.
    pub fn handle_forward_body(
        &mut self,
        now: Instant,
        cmd: CommandId,
        chunk: &[u8],
    ) -> Result<(), UsageError> {
        self.expire(now);
        let max = self.config.max_response_body;
        let Some(c) = self.forwarding(cmd)? else {
            return Ok(());
        };
        let Some(state) = c.forward.as_mut() else {
            return Ok(());
        };
        let mut messages = Vec::new();
        let mut failure = None;
        match &mut state.body {
            Body::Pending => {
                return Err(UsageError::OutOfOrder(
                    "body bytes before the response head",
                ))
            }
            Body::Buffered(buf) => {
                if buf.len().saturating_add(chunk.len()) > max {
                    failure = Some(TunnelFailure::protocol(
                        TransportErrorKind::ResponseBodyTooLarge,
                    ));
                } else {
                    buf.extend_from_slice(chunk);
                }
            }
            Body::Sse(parser) => {
                parser.push(chunk);
                loop {
                    match parser.next_event() {
                        Ok(Some(ev)) => messages.push(ev.data),
                        Ok(None) => break,
                        Err(_) => {
                            failure = Some(TunnelFailure::protocol(
                                TransportErrorKind::ResponseBodyTooLarge,
                            ));
                            break;
                        }
                    }
                }
            }
        }
        for data in messages {
            if data.is_empty() {
                continue; // a priming event carries no message
            }
            self.forward_message(cmd, &data);
            if self.commands.get(&cmd).is_none_or(|c| c.forward.is_none()) {
                // The terminal response arrived; the rest of the stream is not needed.
                self.outputs.push_back(Output::CancelForward { cmd });
                self.drive(now);
                return Ok(());
            }
        }
        if let Some(f) = failure {
            self.outputs.push_back(Output::CancelForward { cmd });
            self.fail_command(cmd, f);
        }
        self.drive(now);
        Ok(())
    }

    /// The MCP server's response body ended.
    pub fn handle_forward_end(&mut self, now: Instant, cmd: CommandId) -> Result<(), UsageError> {
        self.expire(now);
        let Some(c) = self.forwarding(cmd)? else {
            return Ok(());
        };
        let Some(state) = c.forward.take() else {
            return Ok(());
        };
        let Some(head) = state.head else {
            c.forward = Some(state);
            return Err(UsageError::OutOfOrder(
                "end of body before the response head",
            ));
        };
        c.forward = Some(ForwardState {
            head: Some(head.clone()),
            body: Body::Pending,
            ttl_at: state.ttl_at,
        });
        let expect = c.expect.clone();
        let resp_headers = filter_response_headers(&head.headers);
        let status = head.status;
        let http_failure =
            || TunnelFailure::target_http(status, Some(TransportErrorKind::HttpStatus));
        match (expect, state.body) {
            (Expect::SessionClosed, _) => {
                let code = if (200..300).contains(&status) {
                    204
                } else {
                    status
                };
                self.finish_forward(
                    cmd,
                    true,
                    RespType::SessionTerminationResponse,
                    code,
                    None,
                    resp_headers,
                );
            }
            // A notification has no result: acknowledge it with the target's own status and
            // headers, even an error status (nothing is synthesized, so nothing is hidden).
            (Expect::Ack, _) => {
                let ok = status < 400;
                self.finish_forward(cmd, ok, RespType::NotifyAck, status, None, resp_headers);
            }
            (Expect::Reply(_), Body::Buffered(buf)) => match reply_from_body(&buf) {
                Reply::Message(raw) => {
                    self.finish_forward(
                        cmd,
                        true,
                        RespType::JsonrpcResponse,
                        status,
                        Some(raw),
                        resp_headers,
                    );
                }
                Reply::Empty | Reply::NotJson | Reply::NotJsonRpc if status >= 400 => {
                    self.fail_command(cmd, http_failure());
                }
                Reply::Empty => {
                    self.fail_command(
                        cmd,
                        TunnelFailure::protocol(TransportErrorKind::ResponseBodyMissing),
                    );
                }
                Reply::NotJson => {
                    self.fail_command(
                        cmd,
                        TunnelFailure::protocol(TransportErrorKind::MalformedJson),
                    );
                }
                Reply::NotJsonRpc => {
                    self.fail_command(
                        cmd,
                        TunnelFailure::protocol(TransportErrorKind::NonProtocolResponse),
                    );
                }
            },
            (Expect::Reply(_), Body::Sse(_)) => {
                // The stream ended without the response to our request.
                self.fail_command(
                    cmd,
                    TunnelFailure::protocol(TransportErrorKind::UnexpectedEof),
                );
            }
            (Expect::Reply(_), Body::Pending) => {
                self.fail_command(
                    cmd,
                    TunnelFailure::protocol(TransportErrorKind::ResponseBodyMissing),
                );
            }
        }
        self.drive(now);
        Ok(())
    }

    /// One JSON-RPC message from a framed transport (stdio): a notification or server request
    /// becomes a `jsonrpc_notify`; the response to the forwarded request is the terminal.
    pub fn handle_forward_message(
        &mut self,
        now: Instant,
        cmd: CommandId,
        json: &str,
    ) -> Result<(), UsageError> {
        self.expire(now);
        if self.forwarding(cmd)?.is_none() {
            return Ok(());
        }
        self.forward_message(cmd, json);
        self.drive(now);
        Ok(())
    }

    /// A framed transport wrote the forwarded notification (or closed the session): acknowledge
    /// it (`notify_ack` 202, or `session_termination_response` 204). A request expects a
    /// response, not an acknowledgement: that is refused with [`UsageError::OutOfOrder`].
    pub fn handle_forward_acknowledged(
        &mut self,
        now: Instant,
        cmd: CommandId,
    ) -> Result<(), UsageError> {
        self.expire(now);
        let Some(c) = self.forwarding(cmd)? else {
            return Ok(());
        };
        let (resp_type, code) = match c.expect {
            Expect::Ack => (RespType::NotifyAck, 202),
            Expect::SessionClosed => (RespType::SessionTerminationResponse, 204),
            Expect::Reply(_) => {
                return Err(UsageError::OutOfOrder(
                    "a request expects a response, not an acknowledgement",
                ))
            }
        };
        self.finish_forward(cmd, true, resp_type, code, None, BTreeMap::new());
        self.drive(now);
        Ok(())
    }

    /// The forward failed before a usable reply: a synthesized failure is posted.
    pub fn handle_forward_failed(
        &mut self,
        now: Instant,
        cmd: CommandId,
        failure: TunnelFailure,
    ) -> Result<(), UsageError> {
        self.expire(now);
        if self.forwarding(cmd)?.is_none() {
            return Ok(());
        }
        self.fail_command(cmd, failure);
        self.drive(now);
        Ok(())
    }

    fn forward_message(&mut self, cmd: CommandId, json: &str) {
        let Some(c) = self.commands.get(&cmd) else {
            return;
        };
        let head = c.forward.as_ref().and_then(|f| f.head.as_ref());
        let status = head.map_or(200, |h| h.status);
        // Each message posted carries one JSON-RPC message, even when it came from an SSE stream.
        let resp_headers = head.map_or_else(json_content_type, |h| {
            let mut kept = filter_response_headers(&h.headers);
            if kept.contains_key("Content-Type") {
                kept.insert(
                    "Content-Type".to_owned(),
                    vec!["application/json".to_owned()],
                );
            }
            kept
        });
        let skip_notify = c.notifications_failed || c.terminal_queued;
        let terminal = match (&c.expect, Message::parse(json)) {
            (Expect::Reply(None), Ok(Message::Response { .. } | Message::Error { .. })) => true,
            (Expect::Reply(Some(want)), Ok(Message::Response { id, .. })) => *want == id,
            (Expect::Reply(Some(want)), Ok(Message::Error { id, .. })) => {
                id.as_ref().is_none_or(|id| id == want)
            }
            (_, Ok(_)) => false,
            (_, Err(_)) => {
                let request_id = c.request_id.clone();
                self.outputs.push_back(Output::Event(Event::Discarded {
                    request_id,
                    reason: "a message from the MCP server that is not JSON-RPC",
                }));
                return;
            }
        };
        // `Message::parse` accepted it, so it is a JSON object.
        let Ok(raw) = RawValue::from_string(json.to_owned()) else {
            return;
        };
        if terminal {
            self.finish_forward(
                cmd,
                true,
                RespType::JsonrpcResponse,
                status,
                Some(raw),
                resp_headers,
            );
        } else if !skip_notify {
            let post = self.build_post(
                cmd,
                PostKind::Notify,
                RespType::JsonrpcNotify,
                200,
                Some(raw),
                resp_headers,
            );
            if let (Some(post), Some(c)) = (post, self.commands.get_mut(&cmd)) {
                c.posts.push_back(post);
            }
        }
    }

    /// Ends a command with a synthesized failure, answered by its kind: a request gets a
    /// `-32603` with `tunnel_failure` provenance (`id: null` when its id is unknown), a
    /// notification a `notify_ack`, a session termination a `session_termination_response`, all
    /// with `resp_code` 502.
    fn fail_command(&mut self, cmd: CommandId, failure: TunnelFailure) {
        let Some(c) = self.commands.get(&cmd) else {
            return;
        };
        let code = failure::SYNTHESIZED_RESP_CODE;
        match c.expect.clone() {
            Expect::Reply(id) => {
                let s = failure::synthesize(id.as_ref(), &failure);
                self.finish_forward(
                    cmd,
                    false,
                    RespType::JsonrpcResponse,
                    s.resp_code,
                    Some(s.resp_json),
                    json_content_type(),
                );
            }
            Expect::Ack => {
                self.finish_forward(cmd, false, RespType::NotifyAck, code, None, BTreeMap::new())
            }
            Expect::SessionClosed => {
                self.finish_forward(
                    cmd,
                    false,
                    RespType::SessionTerminationResponse,
                    code,
                    None,
                    BTreeMap::new(),
                );
            }
        }
    }

    /// Ends the forward and queues the terminal response.
    #[allow(clippy::too_many_arguments)]
    fn finish_forward(
        &mut self,
        cmd: CommandId,
        ok: bool,
        resp_type: RespType,
        resp_code: u16,
        resp_json: Option<Box<RawValue>>,
        resp_headers: BTreeMap<String, Vec<String>>,
    ) {
        let Some(c) = self.commands.get_mut(&cmd) else {
            return;
        };
        let tools_list = c
            .tools_list
            .map(|cont| (cont, c.channel.clone(), c.request_id.clone()));
        if c.forward.take().is_some() {
            self.forwards_in_flight = self.forwards_in_flight.saturating_sub(1);
            self.record_forward(ok);
        }
        if let (
            true,
            RespType::JsonrpcResponse,
            Some((continuation, channel, request_id)),
            Some(json),
        ) = (ok, resp_type, tools_list, resp_json.as_ref())
        {
            let rejected = self
                .tools
                .entry(channel.clone())
                .or_default()
                .observe_tools_list(continuation, json.get());
            for e in rejected {
                self.outputs.push_back(Output::Event(Event::ToolRejected {
                    request_id: request_id.clone(),
                    channel: channel.clone(),
                    tool: e.tool,
                    reason: e.reason.to_string(),
                }));
            }
        }
        let Some(post) = self.build_post(
            cmd,
            PostKind::Terminal,
            resp_type,
            resp_code,
            resp_json,
            resp_headers,
        ) else {
            return;
        };
        if let Some(c) = self.commands.get_mut(&cmd) {
            c.terminal_queued = true;
            c.posts.push_back(post);
        }
    }

    fn build_post(
        &self,
        cmd: CommandId,
        kind: PostKind,
        resp_type: RespType,
        resp_code: u16,
        resp_json: Option<Box<RawValue>>,
        resp_headers: BTreeMap<String, Vec<String>>,
    ) -> Option<PendingPost> {
        let c = self.commands.get(&cmd)?;
        let payload = ResponsePayload {
            request_id: c.request_id.clone(),
            channel: c.channel.clone(),
            resp_json,
            resp_headers,
            resp_code,
            resp_type,
        };
        let request = self.post_request(c, &payload)?;
        Some(PendingPost {
            kind,
            resp_type,
            resp_code,
            request,
            attempts: 0,
            not_before: None,
        })
    }

    fn post_request(&self, c: &Command, payload: &ResponsePayload) -> Option<http::Request> {
        let mut headers = self.common_headers.clone();
        headers.append("Content-Type", "application/json").ok()?;
        if let Some(token) = &c.shard_token {
            // An opaque token with CR/LF cannot be sent as a header; post without it rather than
            // inject a header (the control plane answers 404 or 400 and the command ends).
            let _ = headers.append("X-Tunnel-Shard-Token", token.clone());
        }
        Some(http::Request {
            method: Method::Post,
            url: self.response_url.clone(),
            headers,
            body: payload.to_json(),
        })
    }

    // -----------------------------------------------------------------------------------------
    // Posts.

    fn start_next_post(&mut self, now: Instant, cmd: CommandId) {
        let Some(c) = self.commands.get_mut(&cmd) else {
            return;
        };
        if c.post_in_flight.is_some() {
            return;
        }
        // Skip notifications after one failed.
        while c.notifications_failed && c.posts.front().is_some_and(|p| p.kind == PostKind::Notify)
        {
            c.posts.pop_front();
        }
        let due = c
            .posts
            .front()
            .is_some_and(|p| p.not_before.is_none_or(|t| t <= now));
        if !due {
            return;
        }
        let Some(mut post) = c.posts.pop_front() else {
            return;
        };
        post.attempts += 1;
        post.not_before = None;
        let id = PostId(self.next_id);
        self.next_id += 1;
        let request = post.request.clone();
        let deadline = c.deadline;
        c.post_in_flight = Some(PostInFlight { id, post });
        self.posts.insert(id, cmd);
        self.outputs.push_back(Output::Post {
            id,
            cmd,
            request,
            deadline,
        });
    }

    /// The POST in flight; `Ok(None)` for a late report (the attempt already ended or was
    /// cancelled: drop the input); `Err` for a handle never issued.
    fn take_post(&mut self, id: PostId) -> Result<Option<(CommandId, PendingPost)>, UsageError> {
        let Some(cmd) = self.posts.remove(&id) else {
            return if self.issued(id.0) {
                Ok(None)
            } else {
                Err(UsageError::UnknownHandle("post"))
            };
        };
        Ok(self
            .commands
            .get_mut(&cmd)
            .and_then(|c| c.post_in_flight.take())
            .map(|p| (cmd, p.post)))
    }

    /// A response POST was answered. `wall` is the wall clock (for `Retry-After` HTTP-dates).
    pub fn handle_post_response(
        &mut self,
        now: Instant,
        wall: SystemTime,
        id: PostId,
        head: &ResponseHead,
    ) -> Result<(), UsageError> {
        self.expire(now);
        let Some((cmd, post)) = self.take_post(id)? else {
            return Ok(());
        };
        let status = head.status;
        match PostAnswer::of(status) {
            PostAnswer::Accepted => self.post_delivered(now, wall, cmd, &post),
            PostAnswer::AlreadyFulfilled => self.end_command(
                cmd,
                Some(Event::AlreadyFulfilled {
                    request_id: self.request_id(cmd),
                }),
            ),
            PostAnswer::Failed => {
                if matches!(status, 401 | 403) {
                    self.operator_action = Some(status);
                    self.outputs
                        .push_back(Output::Event(Event::OperatorActionRequired {
                            status,
                            code: None,
                        }));
                }
                let retryable = match post.kind {
                    PostKind::Terminal => matches!(status, 408 | 429 | 502 | 503 | 504),
                    PostKind::Notify => status == 429,
                };
                let retry_after = self.retry_after(head, wall);
                self.post_retry_or_fail(now, cmd, post, retryable, Some(status), retry_after);
            }
        }
        self.drive(now);
        Ok(())
    }

    /// A response POST failed without a response. `written` says whether the request may have
    /// reached the control plane (a notification is then not replayed: it could enqueue twice).
    pub fn handle_post_failed(
        &mut self,
        now: Instant,
        id: PostId,
        written: bool,
    ) -> Result<(), UsageError> {
        self.expire(now);
        let Some((cmd, post)) = self.take_post(id)? else {
            return Ok(());
        };
        let retryable = match post.kind {
            PostKind::Terminal => true,
            PostKind::Notify => !written,
        };
        self.post_retry_or_fail(now, cmd, post, retryable, None, None);
        self.drive(now);
        Ok(())
    }

    fn request_id(&self, cmd: CommandId) -> String {
        self.commands
            .get(&cmd)
            .map(|c| c.request_id.clone())
            .unwrap_or_default()
    }

    fn post_delivered(
        &mut self,
        now: Instant,
        wall: SystemTime,
        cmd: CommandId,
        post: &PendingPost,
    ) {
        if post.kind == PostKind::Terminal {
            let c = self.commands.get(&cmd);
            let since_receipt = c
                .map(|c| now.saturating_duration_since(c.received_at))
                .unwrap_or_default();
            let since_created = c
                .and_then(|c| c.created_at)
                .and_then(|t| wall.duration_since(t).ok());
            let event = Event::Completed {
                request_id: self.request_id(cmd),
                resp_type: post.resp_type,
                resp_code: post.resp_code,
                since_receipt,
                since_created,
            };
            self.end_command(cmd, Some(event));
        }
    }

    fn post_retry_or_fail(
        &mut self,
        now: Instant,
        cmd: CommandId,
        mut post: PendingPost,
        retryable: bool,
        status: Option<u16>,
        retry_after: Option<Duration>,
    ) {
        let Some(c) = self.commands.get(&cmd) else {
            return;
        };
        let deadline = c.deadline;
        let next = if retryable && post.attempts < self.config.max_post_attempts {
            backoff::next_attempt(
                &self.config.post_backoff,
                now,
                post.attempts,
                self.jitter.next_u64(),
                retry_after,
                deadline,
            )
        } else {
            None
        };
        match (next, post.kind) {
            (Some(at), _) => {
                post.not_before = Some(at);
                if let Some(c) = self.commands.get_mut(&cmd) {
                    c.posts.push_front(post);
                }
            }
            (None, PostKind::Notify) => {
                let request_id = self.request_id(cmd);
                if let Some(c) = self.commands.get_mut(&cmd) {
                    c.notifications_failed = true;
                }
                self.outputs
                    .push_back(Output::Event(Event::NotificationDropped {
                        request_id,
                        status,
                    }));
            }
            (None, PostKind::Terminal) => {
                let event = Event::DeliveryFailed {
                    request_id: self.request_id(cmd),
                    status,
                };
                self.end_command(cmd, Some(event));
            }
        }
    }

    /// Removes a command, canceling whatever of it still runs.
    fn end_command(&mut self, cmd: CommandId, event: Option<Event>) {
        let Some(c) = self.commands.remove(&cmd) else {
            return;
        };
        if c.forward.is_some() {
            self.forwards_in_flight = self.forwards_in_flight.saturating_sub(1);
            self.outputs.push_back(Output::CancelForward { cmd });
        }
        if c.to_forward.is_some() {
            self.forward_queue.retain(|q| *q != cmd);
        }
        if let Some(p) = c.post_in_flight {
            self.posts.remove(&p.id);
            self.outputs.push_back(Output::CancelPost { id: p.id });
        }
        if let Some(e) = event {
            self.outputs.push_back(Output::Event(e));
        }
    }

    // -----------------------------------------------------------------------------------------
    // Time.

    /// Time passed: expire commands whose deadline passed, start due retries and polls.
    /// Calling it early or twice is harmless.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.drive(now);
    }

    /// Drops every command whose deadline is at or before `now`: cancels its forward or POST,
    /// posts nothing (a late error is never synthesized). Runs before every input is applied
    /// and before anything is emitted, so no output is ever built for an expired command.
    fn expire(&mut self, now: Instant) {
        let expired: Vec<CommandId> = self
            .commands
            .iter()
            .filter(|(_, c)| c.deadline.is_some_and(|d| d <= now))
            .map(|(&id, _)| id)
            .collect();
        for cmd in expired {
            let Some(c) = self.commands.get(&cmd) else {
                continue;
            };
            let stage = if c.to_forward.is_some() {
                Stage::BeforeForward
            } else if c.forward.is_some() {
                Stage::DuringForward
            } else {
                Stage::DuringDelivery
            };
            let event = Event::Expired {
                request_id: c.request_id.clone(),
                stage,
            };
            if stage == Stage::DuringForward {
                // The MCP server did not answer in time: that counts against readiness.
                self.record_forward(false);
            }
            self.end_command(cmd, Some(event));
        }
        // Forwards past their connection TTL: cancelled, answered with a timeout failure (the
        // command's own deadline, checked above, has not passed: an answer is still wanted).
        let over_ttl: Vec<(CommandId, String)> = self
            .commands
            .iter()
            .filter(|(_, c)| {
                c.forward
                    .as_ref()
                    .and_then(|f| f.ttl_at)
                    .is_some_and(|at| at <= now)
            })
            .map(|(&id, c)| (id, c.request_id.clone()))
            .collect();
        for (cmd, request_id) in over_ttl {
            self.outputs
                .push_back(Output::Event(Event::ConnectionTtlReached { request_id }));
            self.outputs.push_back(Output::CancelForward { cmd });
            // A response that streamed for the whole TTL is not a failing server: the forward
            // ends here without counting against readiness.
            if let Some(c) = self.commands.get_mut(&cmd) {
                if c.forward.take().is_some() {
                    self.forwards_in_flight = self.forwards_in_flight.saturating_sub(1);
                }
            }
            self.fail_command(cmd, TunnelFailure::timed_out_after_response());
        }
    }

    fn record_forward(&mut self, ok: bool) {
        self.recent_forwards.push_back(ok);
        while self.recent_forwards.len() > self.config.readiness_window.max(1) {
            self.recent_forwards.pop_front();
        }
    }
}

impl Command {
    fn new(
        request_id: String,
        shard_token: Option<String>,
        channel: String,
        deadline: Option<Instant>,
        expect: Expect,
        received_at: Instant,
    ) -> Self {
        Command {
            request_id,
            shard_token,
            channel,
            deadline,
            expect,
            received_at,
            created_at: None,
            to_forward: None,
            forward: None,
            posts: VecDeque::new(),
            post_in_flight: None,
            notifications_failed: false,
            terminal_queued: false,
            tools_list: None,
        }
    }
}

/// A command's `created_at` (RFC 3339 in UTC, `Z`, as the contract's examples): the enqueue
/// instant, for latency reports. Another form is not read (no age is reported).
fn created_at(text: &str) -> Option<SystemTime> {
    crate::time::from_std(humantime::parse_rfc3339(text.trim()).ok()?)
}

fn json_content_type() -> BTreeMap<String, Vec<String>> {
    BTreeMap::from([(
        "Content-Type".to_owned(),
        vec!["application/json".to_owned()],
    )])
}

/// What a buffered reply body holds.
enum Reply {
    /// A JSON-RPC response or error, preserved as received.
    Message(Box<RawValue>),
    /// No bytes (or only whitespace).
    Empty,
    /// Not JSON.
    NotJson,
    /// JSON, but not a JSON-RPC response or error.
    NotJsonRpc,
}

fn reply_from_body(body: &[u8]) -> Reply {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Reply::Empty;
    }
    let Ok(text) = std::str::from_utf8(body) else {
        return Reply::NotJson;
    };
    let Ok(raw) = serde_json::from_str::<&RawValue>(text) else {
        return Reply::NotJson;
    };
    match Message::parse(raw.get()) {
        Ok(Message::Response { .. } | Message::Error { .. }) => Reply::Message(raw.to_owned()),
        _ => Reply::NotJsonRpc,
    }
}

//! Harpoon's MCP server: the [`Harpoon`] machine serving the `harpoon` channel in-process, on
//! the MCP server core ([`crate::mcp::server`]) over one in-memory connection.
//!
//! **The connection.** tunnel-service's client speaks to Harpoon as to a stdio server: each
//! command's JSON-RPC payload is one frame on one connection. A `2026-07-28` request is
//! self-contained; `initialize` opens a `2025-11-25` session on the connection, and later
//! legacy requests are served in it. Requests are served **one at a time**, in the order they
//! came (notifications, `notifications/cancelled` among them, reach the connection at once).
//! The connection's state (its legacy session) is dropped, and a fresh connection started:
//! - when it is [`HarpoonConfig::connection_max_age`] old (ten minutes by default): a call in
//!   flight is cancelled (its outbound request with it) and answered `transport_closed`;
//! - when a command's deadline passes while it is served: its outbound request is cancelled,
//!   and nothing is answered (the tunnel engine drops the command), so no late answer can reach
//!   the next request.
//!
//! **Tools.** `list_targets` and `get_oauth_target_audience` are answered from the registry
//! ([`super::tools`]); `call_target` ([`super::call`]) becomes an outbound HTTP request, the
//! only I/O, which the driver performs: [`HarpoonOutput::Fetch`] with the request and its
//! deadline (the call's `timeout_ms` and the command's deadline, whichever is first), reported
//! back with [`Harpoon::handle_fetch_head`], [`Harpoon::handle_fetch_body`] and
//! [`Harpoon::handle_fetch_end`], or [`Harpoon::handle_fetch_failed`]. The driver never follows
//! a redirect: a redirect comes back here and [`super::call::next_hop`] decides (another
//! registered URL within the count, or a refusal). A body over `max_response_bytes` is an
//! error, not a truncation: the fetch is cancelled ([`HarpoonOutput::CancelFetch`]) as soon as
//! it is over. The answer is rewritten ([`super::rewrite`]) before it leaves.
//!
//! **What it reports** ([`HarpoonEvent`]): one [`CallRecord`] per `call_target` (label, status,
//! outcome, latency, size: what metrics count), the classes of headers dropped, and connection
//! resets. Never a URL, a header value or a body.

use std::collections::VecDeque;
use std::fmt;

use serde_json::{json, Map, Value};

use super::call::{self, CallError, CallOutcome, CallRequest, Hop};
use super::headers::{filter_request_headers, DroppedClass};
use super::rewrite::{rewrite_body, rewrite_header};
use super::tools;
use super::Registry;
use crate::http::{self, Headers, ResponseHead};
use crate::jsonrpc::{code, Message};
use crate::mcp::meta::Implementation;
use crate::mcp::server::{
    Call, Output as ServerOutput, Reply, RequestId, Server, ServerConfig, ServerEvent,
    ServerSecrets,
};
use crate::time::{Duration, Instant};
use crate::tunnel::engine::{CommandId, UsageError};
use crate::tunnel::failure::{FailureSource, TransportErrorKind, TunnelFailure};

/// The default [`HarpoonConfig::connection_max_age`]: ten minutes.
pub const CONNECTION_MAX_AGE: Duration = Duration::from_secs(600);

/// The label metrics use for a call naming no registered target (labels are folded so that
/// callers cannot grow the metric's label set); the Go tunnel-client's spelling, which no
/// valid label can take (labels start with a letter or digit).
pub const UNKNOWN_LABEL: &str = "__unknown__";

/// The largest JSON-RPC frame the connection reads (a `call_target` body rides in it).
const MAX_FRAME_BYTES: usize = 16 * 1024 * 1024;

/// How Harpoon is set up.
#[derive(Clone)]
pub struct HarpoonConfig {
    /// The registered targets (the channel is served only while there is one).
    pub registry: Registry,
    /// The cap on a call's `max_response_bytes` (`--harpoon.max-response-bytes`).
    pub max_response_cap: u64,
    /// A call's `max_redirects` default and cap (`--harpoon.max-redirects`, at most
    /// [`call::MAX_REDIRECTS`]).
    pub max_redirects: u32,
    /// How long one connection (and its legacy session) lives.
    pub connection_max_age: Duration,
    /// The `User-Agent` of outbound requests.
    pub user_agent: String,
    /// 64 random bytes for the server core's secrets (the driver draws them).
    pub entropy: [u8; 64],
}

impl HarpoonConfig {
    /// The defaults for `registry`: a 100 KiB response cap, ten-minute connections, our
    /// `User-Agent`.
    pub fn new(registry: Registry, entropy: [u8; 64]) -> Self {
        HarpoonConfig {
            registry,
            max_response_cap: call::DEFAULT_MAX_RESPONSE_BYTES,
            max_redirects: call::DEFAULT_MAX_REDIRECTS,
            connection_max_age: CONNECTION_MAX_AGE,
            user_agent: concat!("mcpwire-harpoon/", env!("CARGO_PKG_VERSION")).to_owned(),
            entropy,
        }
    }
}

impl fmt::Debug for HarpoonConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HarpoonConfig")
            .field("targets", &self.registry.len())
            .field("max_response_cap", &self.max_response_cap)
            .field("max_redirects", &self.max_redirects)
            .field("connection_max_age", &self.connection_max_age)
            .field("user_agent", &self.user_agent)
            .finish_non_exhaustive()
    }
}

/// How one `call_target` ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallResult {
    /// The target answered (any status) within the limits.
    Answered,
    /// The arguments were refused before anything was sent.
    Refused,
    /// A redirect led off the allowlist, past the count, or nowhere.
    RedirectRefused,
    /// The answer's body was over `max_response_bytes`.
    TooLarge,
    /// No answer within `timeout_ms`.
    TimedOut,
    /// The request failed (name resolution, connection, TLS, a closed connection).
    Failed,
    /// The call was cancelled (the command's deadline, the connection's age, the caller).
    Cancelled,
}

impl CallResult {
    /// The outcome as metrics and logs name it: the Go tunnel-client's `harpoon_call_total`
    /// outcomes (`success`, `invalid_input`, `request_error`, `response_too_large`) where they
    /// say the same, and `redirect_refused`, `timeout` and `cancelled` where ours say more.
    pub fn as_str(self) -> &'static str {
        match self {
            CallResult::Answered => "success",
            CallResult::Refused => "invalid_input",
            CallResult::RedirectRefused => "redirect_refused",
            CallResult::TooLarge => "response_too_large",
            CallResult::TimedOut => "timeout",
            CallResult::Failed => "request_error",
            CallResult::Cancelled => "cancelled",
        }
    }
}

/// One finished `call_target`, for metrics and logs (never a URL, a header value or a body).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallRecord {
    /// The target's label, or [`UNKNOWN_LABEL`] when the call named none that is registered.
    pub label: String,
    /// The last HTTP status received, if any.
    pub status: Option<u16>,
    /// How it ended.
    pub result: CallResult,
    /// From the call's start to its end.
    pub latency: Duration,
    /// The bytes of the answer's body received (before any rewrite).
    pub response_bytes: u64,
    /// How many redirects were followed.
    pub redirects: u32,
}

impl CallRecord {
    /// The status class metrics use: `2xx` ... `5xx`, or `none`.
    pub fn status_class(&self) -> &'static str {
        match self.status {
            Some(100..=199) => "1xx",
            Some(200..=299) => "2xx",
            Some(300..=399) => "3xx",
            Some(400..=499) => "4xx",
            Some(500..=599) => "5xx",
            Some(_) | None => "none",
        }
    }
}

/// Why the connection was replaced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResetReason {
    /// It reached [`HarpoonConfig::connection_max_age`].
    MaxAge,
    /// A command's deadline passed while it was served.
    Deadline,
}

/// A fact Harpoon reports.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum HarpoonEvent {
    /// A `call_target` ended.
    Call(CallRecord),
    /// Headers of a call were dropped, by class (never by value).
    HeadersDropped {
        /// The target's label.
        label: String,
        /// One entry per dropped header.
        classes: Vec<DroppedClass>,
    },
    /// The connection was replaced (its legacy session ended).
    ConnectionReset {
        /// Why.
        reason: ResetReason,
    },
}

/// What Harpoon asks of the tunnel and its driver.
#[derive(Debug)]
pub enum HarpoonOutput {
    /// Send this request (never following a redirect), within `deadline`; report with
    /// [`Harpoon::handle_fetch_head`], [`Harpoon::handle_fetch_body`] and
    /// [`Harpoon::handle_fetch_end`], or [`Harpoon::handle_fetch_failed`].
    Fetch {
        /// The command the call serves.
        cmd: CommandId,
        /// The request.
        request: http::Request,
        /// When it must be done.
        deadline: Option<Instant>,
    },
    /// Stop the command's outbound request; report nothing more for it.
    CancelFetch {
        /// The command.
        cmd: CommandId,
    },
    /// A JSON-RPC message for the command before its answer (a notification).
    Message {
        /// The command.
        cmd: CommandId,
        /// The message.
        json: String,
    },
    /// The command's answer: its JSON-RPC response.
    Reply {
        /// The command.
        cmd: CommandId,
        /// The response.
        json: String,
    },
    /// The command's notification (or response) was taken: acknowledge it.
    Acknowledged {
        /// The command.
        cmd: CommandId,
    },
    /// The command cannot be answered by Harpoon: post this failure.
    Failed {
        /// The command.
        cmd: CommandId,
        /// The failure.
        failure: TunnelFailure,
    },
    /// A fact for the log and metrics.
    Event(HarpoonEvent),
}

/// A command waiting for its turn.
struct Queued {
    cmd: CommandId,
    line: Vec<u8>,
    deadline: Option<Instant>,
}

/// One outbound request of a call (a redirect makes the next one).
struct Fetch {
    request: RequestId,
    call: CallRequest,
    url: String,
    method: http::Method,
    body: Vec<u8>,
    followed: u32,
    started: Instant,
    /// When `timeout_ms` runs out (for the whole call, its redirects included).
    timeout_at: Option<Instant>,
    /// A redirect left the first URL's origin: credentials are not sent on.
    cross_origin: bool,
    deadline: Option<Instant>,
    head: Option<ResponseHead>,
    received: Vec<u8>,
}

/// The request being served.
struct Busy {
    cmd: CommandId,
    /// The command's deadline (an outbound request never outlives it).
    deadline: Option<Instant>,
    fetch: Option<Fetch>,
}

/// Harpoon: the `harpoon` channel's MCP server. See the module documentation.
pub struct Harpoon {
    registry: Registry,
    max_response_cap: u64,
    max_redirects: u32,
    max_age: Duration,
    user_agent: String,
    server_config: ServerConfig,
    server: Server,
    opened: Instant,
    queue: VecDeque<Queued>,
    busy: Option<Busy>,
    outputs: VecDeque<HarpoonOutput>,
}

impl fmt::Debug for Harpoon {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Harpoon")
            .field("targets", &self.registry.len())
            .field("queued", &self.queue.len())
            .field("busy", &self.busy.as_ref().map(|b| b.cmd))
            .finish_non_exhaustive()
    }
}

/// Why Harpoon could not be set up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("harpoon's MCP server cannot be set up: {0}")]
pub struct HarpoonSetupError(String);

impl Harpoon {
    /// Harpoon for `config`, its first connection opened at `now`.
    ///
    /// # Errors
    /// When the server core refuses the configuration (it cannot: the settings are fixed).
    pub fn new(config: HarpoonConfig, now: Instant) -> Result<Harpoon, HarpoonSetupError> {
        let mut server_config = ServerConfig::new(
            Implementation::new("mcpwire-harpoon", env!("CARGO_PKG_VERSION")),
            ServerSecrets::from_entropy(config.entropy),
        );
        server_config.instructions = Some(
            "Harpoon: call the HTTP endpoints this tunnel client registered (list_targets shows \
             them by label), from inside the customer's network."
                .to_owned(),
        );
        server_config.logging = false;
        server_config.list_changed = false;
        server_config.limits.max_line_bytes = MAX_FRAME_BYTES;
        let server =
            Server::new(server_config.clone()).map_err(|e| HarpoonSetupError(e.to_string()))?;
        Ok(Harpoon {
            registry: config.registry,
            max_response_cap: config.max_response_cap.max(1),
            max_redirects: config.max_redirects.min(call::MAX_REDIRECTS),
            max_age: config.connection_max_age,
            user_agent: config.user_agent,
            server_config,
            server,
            opened: now,
            queue: VecDeque::new(),
            busy: None,
            outputs: VecDeque::new(),
        })
    }

    /// The registered targets.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Whether the channel is served: at least one target is registered.
    pub fn is_enabled(&self) -> bool {
        !self.registry.is_empty()
    }

    /// The next output.
    pub fn poll_output(&mut self) -> Option<HarpoonOutput> {
        self.outputs.pop_front()
    }

    /// The next instant [`Harpoon::handle_timeout`] is due: the connection's end of life, the
    /// call's `timeout_ms`, or a deadline of the server core.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let age = self.opened.checked_add(self.max_age);
        let server = self.server.poll_timeout().map(|t| t.at);
        let call = self
            .busy
            .as_ref()
            .and_then(|b| b.fetch.as_ref())
            .and_then(|f| f.timeout_at);
        [age, server, call].into_iter().flatten().min()
    }

    /// Whether nothing is served or waiting.
    pub fn is_idle(&self) -> bool {
        self.busy.is_none() && self.queue.is_empty()
    }

    // --- commands ------------------------------------------------------------------------------

    /// A command's JSON-RPC payload for the channel, and the command's deadline. A request
    /// waits for its turn; a notification or a client's response is given to the connection at
    /// once and acknowledged.
    pub fn handle_command(
        &mut self,
        now: Instant,
        cmd: CommandId,
        payload: &str,
        deadline: Option<Instant>,
    ) {
        let line = frame(payload);
        let expects_reply = !matches!(
            Message::parse(payload),
            Ok(Message::Notification { .. } | Message::Response { .. } | Message::Error { .. })
        );
        if expects_reply {
            self.queue.push_back(Queued {
                cmd,
                line,
                deadline,
            });
        } else {
            self.server.handle_stdio_bytes(now, &line);
            self.outputs.push_back(HarpoonOutput::Acknowledged { cmd });
            self.serve(now);
        }
        self.next(now);
    }

    /// The command's deadline passed (the engine dropped it): a queued one is forgotten; the
    /// one being served has its outbound request cancelled and the connection is replaced.
    pub fn cancel(&mut self, now: Instant, cmd: CommandId) {
        self.queue.retain(|q| q.cmd != cmd);
        if self.busy.as_ref().is_some_and(|b| b.cmd == cmd) {
            if let Some(b) = self.busy.take() {
                if let Some(f) = b.fetch {
                    self.outputs.push_back(HarpoonOutput::CancelFetch { cmd });
                    self.record(&f, CallResult::Cancelled, now);
                }
            }
            self.reset(now, ResetReason::Deadline);
            self.next(now);
        }
    }

    /// Time passed: the server core's deadlines, and the connection's age.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.server.handle_timeout(now);
        self.serve(now);
        // The call's own timeout_ms, whatever the driver's HTTP client does.
        let expired = self
            .busy
            .as_ref()
            .and_then(|b| b.fetch.as_ref().map(|f| (b.cmd, f)))
            .filter(|(_, f)| f.timeout_at.is_some_and(|t| now >= t))
            .map(|(cmd, f)| (cmd, f.call.timeout.as_millis()));
        if let Some((cmd, timeout_ms)) = expired {
            self.outputs.push_back(HarpoonOutput::CancelFetch { cmd });
            let message = format!("no answer within timeout_ms ({timeout_ms} ms)");
            self.fail_call(now, CallResult::TimedOut, &message);
        }
        if self
            .opened
            .checked_add(self.max_age)
            .is_some_and(|end| now >= end)
        {
            if let Some(b) = self.busy.take() {
                if let Some(f) = b.fetch {
                    self.outputs
                        .push_back(HarpoonOutput::CancelFetch { cmd: b.cmd });
                    self.record(&f, CallResult::Cancelled, now);
                }
                self.outputs.push_back(HarpoonOutput::Failed {
                    cmd: b.cmd,
                    failure: TunnelFailure::before_response(
                        FailureSource::TransportClosed,
                        Some(TransportErrorKind::ConnectionAborted),
                    ),
                });
            }
            self.reset(now, ResetReason::MaxAge);
        }
        self.next(now);
    }

    // --- the outbound request --------------------------------------------------------------------

    fn fetching(&mut self, cmd: CommandId) -> Result<Option<&mut Fetch>, UsageError> {
        match self.busy.as_mut() {
            Some(b) if b.cmd == cmd => Ok(b.fetch.as_mut()),
            // A report for a command no longer served is late.
            _ => Ok(None),
        }
    }

    /// The outbound request's response head arrived.
    ///
    /// # Errors
    /// [`UsageError::OutOfOrder`] for a second head.
    pub fn handle_fetch_head(
        &mut self,
        _now: Instant,
        cmd: CommandId,
        head: ResponseHead,
    ) -> Result<(), UsageError> {
        let Some(f) = self.fetching(cmd)? else {
            return Ok(());
        };
        if f.head.is_some() {
            return Err(UsageError::OutOfOrder(
                "a second response head for one fetch",
            ));
        }
        f.head = Some(head);
        Ok(())
    }

    /// A piece of the outbound response's body. Past `max_response_bytes` the fetch is
    /// cancelled and the call answered with an error.
    ///
    /// # Errors
    /// [`UsageError::OutOfOrder`] for body bytes before the head.
    pub fn handle_fetch_body(
        &mut self,
        now: Instant,
        cmd: CommandId,
        chunk: &[u8],
    ) -> Result<(), UsageError> {
        let Some(f) = self.fetching(cmd)? else {
            return Ok(());
        };
        if f.head.is_none() {
            return Err(UsageError::OutOfOrder(
                "body bytes before the response head",
            ));
        }
        f.received.extend_from_slice(chunk);
        let limit = f.call.max_response_bytes;
        if u64::try_from(f.received.len()).unwrap_or(u64::MAX) > limit {
            self.outputs.push_back(HarpoonOutput::CancelFetch { cmd });
            let message = format!(
                "the answer's body is larger than max_response_bytes ({limit} bytes); nothing of it is returned"
            );
            self.fail_call(now, CallResult::TooLarge, &message);
        }
        Ok(())
    }

    /// The outbound response's body ended: a redirect is followed or refused, any other answer
    /// is rewritten and returned.
    pub fn handle_fetch_end(&mut self, now: Instant, cmd: CommandId) -> Result<(), UsageError> {
        enum Next {
            Follow(String),
            Answer,
            Refuse(call::RedirectRefused),
        }
        let (head, next) = {
            let Some(b) = self.busy.as_ref().filter(|b| b.cmd == cmd) else {
                return Ok(());
            };
            let Some(f) = b.fetch.as_ref() else {
                return Ok(());
            };
            let Some(head) = f.head.clone() else {
                return Err(UsageError::OutOfOrder(
                    "a body end before the response head",
                ));
            };
            let next = if matches!(head.status, 301 | 302 | 303 | 307 | 308) {
                let location = head.headers.get("location");
                match call::next_hop(&self.registry, &f.call, &f.url, location, f.followed) {
                    Hop::Follow(target) => Next::Follow(target.url().to_owned()),
                    Hop::Return => Next::Answer,
                    Hop::Refuse(why) => Next::Refuse(why),
                }
            } else {
                Next::Answer
            };
            (head, next)
        };
        match next {
            Next::Answer => self.answer_call(now, head),
            Next::Refuse(why) => self.fail_call(now, CallResult::RedirectRefused, &why.to_string()),
            Next::Follow(url) => {
                let Some(f) = self.busy.as_mut().and_then(|b| b.fetch.as_mut()) else {
                    return Ok(());
                };
                if !same_origin_urls(&f.url, &url) {
                    f.cross_origin = true;
                }
                f.url = url;
                f.followed += 1;
                // As Go's client does: 301, 302 and 303 of anything but a GET become a bodiless
                // GET; 307 and 308 repeat the request.
                if matches!(head.status, 301..=303) && f.method != http::Method::Get {
                    f.method = http::Method::Get;
                    f.body.clear();
                }
                f.head = None;
                f.received.clear();
                if let Some((request, deadline)) = self.outbound() {
                    self.outputs.push_back(HarpoonOutput::Fetch {
                        cmd,
                        request,
                        deadline,
                    });
                }
            }
        }
        Ok(())
    }

    /// The outbound request failed before its answer was whole.
    pub fn handle_fetch_failed(
        &mut self,
        now: Instant,
        cmd: CommandId,
        failure: TunnelFailure,
    ) -> Result<(), UsageError> {
        let Some(f) = self.fetching(cmd)? else {
            return Ok(());
        };
        let timeout_ms = f.call.timeout.as_millis();
        let (result, message) = match (failure.source(), failure.transport_error_kind()) {
            (FailureSource::Timeout, _) | (_, Some(TransportErrorKind::Timeout)) => (
                CallResult::TimedOut,
                format!("no answer within timeout_ms ({timeout_ms} ms)"),
            ),
            (FailureSource::Dns, _) => (
                CallResult::Failed,
                "the target's host name did not resolve".to_owned(),
            ),
            (FailureSource::Connect, _) => (
                CallResult::Failed,
                "the connection to the target was refused or could not be made".to_owned(),
            ),
            (FailureSource::Tls, _) => (
                CallResult::Failed,
                "the TLS handshake with the target failed (is its certificate trusted?)".to_owned(),
            ),
            (FailureSource::TransportClosed, _) => (
                CallResult::Failed,
                "the connection to the target closed before the answer was whole".to_owned(),
            ),
            (FailureSource::ClientInternal, _) => (
                CallResult::Failed,
                "the tunnel client could not start the request (too busy)".to_owned(),
            ),
            _ => (
                CallResult::Failed,
                "the request to the target failed".to_owned(),
            ),
        };
        self.fail_call(now, result, &message);
        Ok(())
    }

    // --- inside ---------------------------------------------------------------------------------

    /// The request of the busy call's current hop, and its deadline.
    fn outbound(&self) -> Option<(http::Request, Option<Instant>)> {
        let f = self.busy.as_ref()?.fetch.as_ref()?;
        let filtered = filter_request_headers(&f.call.headers, &self.user_agent);
        let mut headers = Headers::new();
        // As Go's client does, credentials are not sent on to another origin.
        let kept = filtered
            .kept
            .iter()
            .filter(|(name, _)| !(f.cross_origin && name.eq_ignore_ascii_case("authorization")));
        for (name, value) in kept {
            // The filter kept only tokens and clean values: nothing here can be refused.
            let _ = headers.append(name.as_str(), value.as_str());
        }
        Some((
            http::Request {
                method: f.method,
                url: f.url.clone(),
                headers,
                body: f.body.clone(),
            },
            f.deadline,
        ))
    }

    /// Starts `call_target` for `request`.
    fn start_call(&mut self, now: Instant, request: RequestId, args: Map<String, Value>) {
        let args = Value::Object(args);
        let call = match CallRequest::from_arguments(
            &args,
            &self.registry,
            self.max_response_cap,
            self.max_redirects,
        ) {
            Ok(call) => call,
            Err(e) => {
                let label = match &e {
                    CallError::UnknownTarget { label } => label.clone(),
                    _ => args
                        .get("label")
                        .and_then(Value::as_str)
                        .map(|l| l.chars().take(64).collect())
                        .unwrap_or_default(),
                };
                let folded = self.fold(&label);
                self.outputs
                    .push_back(HarpoonOutput::Event(HarpoonEvent::Call(CallRecord {
                        label: folded,
                        status: None,
                        result: CallResult::Refused,
                        latency: Duration::ZERO,
                        response_bytes: 0,
                        redirects: 0,
                    })));
                let _ = self.server.respond(
                    now,
                    request,
                    Reply::Result(call::error_result(&label, &e.to_string())),
                );
                return;
            }
        };
        let Some(target) = self.registry.get(&call.label) else {
            return; // from_arguments checked it
        };
        let url = target.url().to_owned();
        let filtered = filter_request_headers(&call.headers, &self.user_agent);
        if !filtered.dropped.is_empty() {
            self.outputs
                .push_back(HarpoonOutput::Event(HarpoonEvent::HeadersDropped {
                    label: call.label.clone(),
                    classes: filtered.dropped,
                }));
        }
        let own = now.checked_add(call.timeout);
        let method = match call.method {
            call::Method::Get => http::Method::Get,
            call::Method::Post => http::Method::Post,
            call::Method::Put => http::Method::Put,
        };
        let body = call
            .body
            .clone()
            .map(String::into_bytes)
            .unwrap_or_default();
        let Some(busy) = self.busy.as_mut() else {
            return;
        };
        let cmd = busy.cmd;
        let deadline = match (own, busy.deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        busy.fetch = Some(Fetch {
            request,
            call,
            url,
            method,
            body,
            followed: 0,
            started: now,
            timeout_at: own,
            cross_origin: false,
            deadline,
            head: None,
            received: Vec::new(),
        });
        if let Some((request, deadline)) = self.outbound() {
            self.outputs.push_back(HarpoonOutput::Fetch {
                cmd,
                request,
                deadline,
            });
        }
    }

    /// The busy call's answer: the target's response, rewritten.
    fn answer_call(&mut self, now: Instant, head: ResponseHead) {
        // Identity was asked for: an encoded body could not be checked for registered URLs.
        // Every value, every comma-separated coding (repeated lines form one list).
        if let Some(encoding) = head
            .headers
            .get_all("content-encoding")
            .flat_map(|v| v.split(','))
            .map(str::trim)
            .find(|e| !e.is_empty() && !e.eq_ignore_ascii_case("identity"))
        {
            let message = format!(
                "the answer is encoded (Content-Encoding: {}) although identity was asked for; \
                 Harpoon returns only bodies it can rewrite",
                encoding.chars().take(40).collect::<String>()
            );
            return self.fail_call(now, CallResult::Failed, &message);
        }
        let Some(f) = self.busy.as_mut().and_then(|b| b.fetch.take()) else {
            return;
        };
        self.record(&f, CallResult::Answered, now);
        let headers: Vec<(String, String)> = head
            .headers
            .iter()
            .map(|(name, value)| {
                let value =
                    rewrite_header(&self.registry, name, value).unwrap_or_else(|| value.to_owned());
                (name.to_owned(), value)
            })
            .collect();
        let content_type = head.headers.get("content-type");
        let body = rewrite_body(&self.registry, content_type, &f.received).unwrap_or(f.received);
        let outcome = CallOutcome {
            status: head.status,
            headers,
            body,
        };
        let _ = self
            .server
            .respond(now, f.request, Reply::Result(outcome.to_result()));
        self.serve(now);
        // The call is answered: the next queued request is served now, not at the next input.
        self.next(now);
    }

    /// The busy call fails with `message` (an `isError` result naming the label).
    fn fail_call(&mut self, now: Instant, result: CallResult, message: &str) {
        let Some(f) = self.busy.as_mut().and_then(|b| b.fetch.take()) else {
            return;
        };
        self.record(&f, result, now);
        let _ = self.server.respond(
            now,
            f.request,
            Reply::Result(call::error_result(&f.call.label, message)),
        );
        self.serve(now);
        self.next(now);
    }

    fn record(&mut self, f: &Fetch, result: CallResult, now: Instant) {
        let record = CallRecord {
            label: self.fold(&f.call.label),
            status: f.head.as_ref().map(|h| h.status),
            result,
            latency: now.saturating_duration_since(f.started),
            response_bytes: u64::try_from(f.received.len()).unwrap_or(u64::MAX),
            redirects: f.followed,
        };
        self.outputs
            .push_back(HarpoonOutput::Event(HarpoonEvent::Call(record)));
    }

    /// A label as metrics carry it: registered, or [`UNKNOWN_LABEL`].
    fn fold(&self, label: &str) -> String {
        if self.registry.get(label).is_some() {
            label.to_owned()
        } else {
            UNKNOWN_LABEL.to_owned()
        }
    }

    /// A fresh connection (the old one's session and requests are dropped without answers).
    fn reset(&mut self, now: Instant, reason: ResetReason) {
        if let Ok(server) = Server::new(self.server_config.clone()) {
            self.server = server;
        }
        self.opened = now;
        self.outputs
            .push_back(HarpoonOutput::Event(HarpoonEvent::ConnectionReset {
                reason,
            }));
    }

    /// Serves the next queued request when none is being served.
    fn next(&mut self, now: Instant) {
        // Bounded: each round takes one queued command.
        while self.busy.is_none() {
            let Some(q) = self.queue.pop_front() else {
                return;
            };
            self.busy = Some(Busy {
                cmd: q.cmd,
                deadline: q.deadline,
                fetch: None,
            });
            self.server.handle_stdio_bytes(now, &q.line);
            self.serve(now);
        }
    }

    /// Drains the server core: requests for the tools, lines for the command.
    fn serve(&mut self, now: Instant) {
        // Bounded: every round consumes an event or an output the core already holds.
        loop {
            let mut progressed = false;
            while let Some(event) = self.server.poll_event() {
                progressed = true;
                self.event(now, event);
            }
            while let Some(out) = self.server.poll_output() {
                progressed = true;
                if let ServerOutput::Stdio(line) = out {
                    self.line(line);
                }
            }
            if !progressed {
                break;
            }
        }
        // A request the core took without answering it and without a call in flight (it was
        // cancelled by the caller): answer the command rather than leave it waiting.
        if self.busy.as_ref().is_some_and(|b| b.fetch.is_none()) && self.server.in_flight() == 0 {
            if let Some(b) = self.busy.take() {
                self.outputs.push_back(HarpoonOutput::Failed {
                    cmd: b.cmd,
                    failure: TunnelFailure::before_response(FailureSource::ClientInternal, None),
                });
            }
        }
    }

    fn event(&mut self, now: Instant, event: ServerEvent) {
        match event {
            ServerEvent::Request(incoming) => {
                let request = incoming.id();
                let reply = match incoming.call {
                    Call::ListTools => Reply::Result(
                        json!({"tools": tools::definitions(self.max_response_cap, self.max_redirects)}),
                    ),
                    Call::CallTool { name, arguments } => match name.as_str() {
                        "call_target" => {
                            if self.busy.as_ref().is_some_and(|b| b.fetch.is_none()) {
                                self.start_call(now, request, arguments);
                            } else {
                                let _ = self.server.respond(
                                    now,
                                    request,
                                    Reply::error(code::INTERNAL_ERROR, "harpoon is busy"),
                                );
                            }
                            return;
                        }
                        "list_targets" => {
                            tool_reply(tools::list_targets(&self.registry, &Value::Object(arguments)))
                        }
                        "get_oauth_target_audience" => tool_reply(tools::oauth_target_audience(
                            &self.registry,
                            &Value::Object(arguments),
                        )),
                        other => Reply::error(
                            code::INVALID_PARAMS,
                            format!(
                                "unknown tool: {} (harpoon's tools: list_targets, call_target, get_oauth_target_audience)",
                                other.chars().take(64).collect::<String>()
                            ),
                        ),
                    },
                    _ => Reply::error(code::METHOD_NOT_FOUND, "harpoon serves tools only"),
                };
                let _ = self.server.respond(now, request, reply);
            }
            ServerEvent::Cancelled { request, .. } => {
                let cancelled = self
                    .busy
                    .as_ref()
                    .and_then(|b| b.fetch.as_ref().map(|f| (b.cmd, f.request)));
                if let Some((cmd, r)) = cancelled {
                    if r == request {
                        if let Some(f) = self.busy.as_mut().and_then(|b| b.fetch.take()) {
                            self.outputs.push_back(HarpoonOutput::CancelFetch { cmd });
                            self.record(&f, CallResult::Cancelled, now);
                        }
                    }
                }
            }
            ServerEvent::SessionOpened { .. } | ServerEvent::SessionClosed { .. } => {}
        }
    }

    /// A line the connection wrote: the busy command's answer, or a message before it.
    fn line(&mut self, mut line: Vec<u8>) {
        while line.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
            line.pop();
        }
        let Ok(json) = String::from_utf8(line) else {
            return;
        };
        let Some(cmd) = self.busy.as_ref().map(|b| b.cmd) else {
            return; // nothing is waiting for it (a session-wide notification)
        };
        match Message::parse(&json) {
            Ok(Message::Response { .. } | Message::Error { .. }) | Err(_) => {
                self.busy = None;
                self.outputs.push_back(HarpoonOutput::Reply { cmd, json });
            }
            Ok(_) => self.outputs.push_back(HarpoonOutput::Message { cmd, json }),
        }
    }
}

/// A tool answered from the registry: its result, or an `isError` result.
fn tool_reply(result: Result<Value, CallError>) -> Reply {
    match result {
        Ok(v) => Reply::Result(v),
        Err(e) => Reply::Result(json!({
            "content": [{"type": "text", "text": e.to_string()}],
            "isError": true,
        })),
    }
}

/// The payload as one line: JSON may hold line breaks between tokens, never inside strings.
fn frame(payload: &str) -> Vec<u8> {
    let mut line = if payload.contains(['\n', '\r']) {
        match serde_json::from_str::<Value>(payload) {
            Ok(v) => v.to_string(),
            Err(_) => payload.replace(['\n', '\r'], " "),
        }
    } else {
        payload.to_owned()
    }
    .into_bytes();
    line.push(b'\n');
    line
}

/// Whether two absolute URLs have one origin (scheme, host and port); unparsable ones do not.
pub(crate) fn same_origin_urls(a: &str, b: &str) -> bool {
    match (url::Url::parse(a), url::Url::parse(b)) {
        (Ok(a), Ok(b)) => crate::net_policy::same_origin(&a, &b),
        _ => false,
    }
}

//! The engine's vocabulary: its handles, the forwards and outputs it emits, the facts it
//! reports, its timeouts and health, and why it refuses an input.

use std::fmt;

use serde_json::value::RawValue;

use super::super::wire::RespType;
use crate::http::{self, Headers, Method};
use crate::jsonrpc::Id;
use crate::time::{Duration, Instant};

/// The engine's handle for one admitted command (unique for the engine's lifetime).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CommandId(pub u64);

/// The engine's handle for one poll request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PollId(pub u64);

/// The engine's handle for one response POST attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PostId(pub u64);

/// What a forward asks the driver to do.
#[derive(Clone)]
pub enum ForwardKind {
    /// Send this raw JSON-RPC payload (request or notification) to the channel's MCP server.
    JsonRpc {
        /// The payload, exactly as polled.
        payload: Box<RawValue>,
        /// The JSON-RPC method, when the payload has one.
        method: Option<String>,
        /// The request id, `None` for a notification (the reply is an acknowledgement).
        id: Option<Id>,
    },
    /// Close the Streamable HTTP session named by the `Mcp-Session-Id` header (`DELETE`).
    SessionTermination,
}

impl fmt::Debug for ForwardKind {
    /// Shows the payload's size only: its arguments may be private to the user.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ForwardKind::JsonRpc {
                payload,
                method,
                id,
            } => f
                .debug_struct("JsonRpc")
                .field("payload_bytes", &payload.get().len())
                .field("method", method)
                .field("id", id)
                .finish(),
            ForwardKind::SessionTermination => f.write_str("SessionTermination"),
        }
    }
}

impl PartialEq for ForwardKind {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (
                ForwardKind::JsonRpc {
                    payload: a,
                    method: ma,
                    id: ia,
                },
                ForwardKind::JsonRpc {
                    payload: b,
                    method: mb,
                    id: ib,
                },
            ) => a.get() == b.get() && ma == mb && ia == ib,
            (ForwardKind::SessionTermination, ForwardKind::SessionTermination) => true,
            _ => false,
        }
    }
}

/// One forward for the driver to perform.
#[derive(Clone, Debug, PartialEq)]
pub struct Forward {
    /// The command's handle: report every outcome with it.
    pub cmd: CommandId,
    /// The logical channel (picks the MCP server).
    pub channel: String,
    /// The command's opaque request id, for logs.
    pub request_id: String,
    /// The final headers of the HTTP request to a Streamable HTTP MCP server, built by
    /// [`forward_headers`](crate::tunnel::forward_headers::forward_headers) from the command's headers, the body and the
    /// channel's last `tools/list`: send exactly these (a stdio forward ignores them).
    pub headers: Headers,
    /// When the whole command must be done; the driver applies it to connect, write and read.
    pub deadline: Option<Instant>,
    /// What to send.
    pub kind: ForwardKind,
}

impl Forward {
    /// The HTTP request that performs this forward on the Streamable HTTP MCP server at `url`:
    /// a JSON-RPC payload is `POST`ed as the body, a session termination is a bodiless
    /// `DELETE`; the headers are [`Forward::headers`], exactly.
    pub fn into_http_request(self, url: String) -> http::Request {
        let (method, body) = match self.kind {
            ForwardKind::JsonRpc { payload, .. } => {
                (Method::Post, payload.get().as_bytes().to_vec())
            }
            ForwardKind::SessionTermination => (Method::Delete, Vec::new()),
        };
        http::Request {
            method,
            url,
            headers: self.headers,
            body,
        }
    }
}

/// An output of the engine.
#[derive(Debug)]
pub enum Output {
    /// Send this poll request; report back with [`Engine::handle_poll_response`](super::Engine::handle_poll_response) or
    /// [`Engine::handle_poll_failed`](super::Engine::handle_poll_failed).
    Poll {
        /// The poll's handle.
        id: PollId,
        /// The `GET` request.
        request: http::Request,
    },
    /// Perform this forward; report back with the `handle_forward_*` inputs.
    Forward(Forward),
    /// Stop the command's MCP work and report nothing more for it: its deadline passed (close
    /// that connection, or retire the stdio id), or the engine has what it needs (the terminal
    /// response arrived on an SSE stream, or the body outgrew its bound: close the stream).
    CancelForward {
        /// The command.
        cmd: CommandId,
    },
    /// Send this response POST; report back with [`Engine::handle_post_response`](super::Engine::handle_post_response) or
    /// [`Engine::handle_post_failed`](super::Engine::handle_post_failed).
    Post {
        /// The attempt's handle.
        id: PostId,
        /// The command it belongs to.
        cmd: CommandId,
        /// The `POST` request (the same bytes on every attempt).
        request: http::Request,
        /// Do not let the attempt run past this instant.
        deadline: Option<Instant>,
    },
    /// Abort this POST (the command's deadline passed). Report nothing more for it.
    CancelPost {
        /// The attempt.
        id: PostId,
    },
    /// A fact for the host's log or metrics.
    Event(Event),
}

/// Where a command was when its deadline passed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Before its forward started (already expired on receipt, or while queued).
    BeforeForward,
    /// While the MCP server was working on it.
    DuringForward,
    /// While its responses were being delivered to the control plane.
    DuringDelivery,
}

/// A fact the engine reports. Never carries payloads, header values or secrets.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Event {
    /// A poll completed (`200` or `204`).
    Polled {
        /// How many commands it carried.
        commands: usize,
    },
    /// A poll failed; the next one waits `retry_in`.
    PollFailed {
        /// The HTTP status, `None` for a transport failure.
        status: Option<u16>,
        /// The control plane's error code, when its body named one.
        code: Option<String>,
        /// The delay before the next poll.
        retry_in: Duration,
    },
    /// The control plane refuses the credentials or the tunnel (`401`/`403`, or another `4xx`
    /// on poll): an operator must act. Polling continues at the longest backoff.
    OperatorActionRequired {
        /// The HTTP status.
        status: u16,
        /// The control plane's error code, when its body named one.
        code: Option<String>,
    },
    /// A command of an unknown `command_type` was skipped (logged, not answered).
    UnknownCommandType {
        /// The opaque request id.
        request_id: String,
        /// The unsupported discriminator (at most 64 characters).
        command_type: String,
    },
    /// A polled item could not be decoded.
    MalformedCommand {
        /// The request id, when it could be read (then the command is answered with a failure).
        request_id: Option<String>,
        /// What was wrong.
        reason: String,
    },
    /// A command's deadline passed: it was dropped and no response was or will be posted.
    Expired {
        /// The opaque request id.
        request_id: String,
        /// Where it was.
        stage: Stage,
    },
    /// A command's terminal response was delivered.
    Completed {
        /// The opaque request id.
        request_id: String,
        /// The terminal `resp_type`.
        resp_type: RespType,
        /// The terminal `resp_code`.
        resp_code: u16,
        /// From the arrival of the poll response that carried it to its terminal POST's answer
        /// (the Go client's `poll_to_response` latency).
        since_receipt: Duration,
        /// From its `created_at` to its terminal POST's answer, by the wall clock (the Go
        /// client's `enqueue_to_response` latency); `None` when `created_at` is absent, not an
        /// RFC 3339 UTC time, or ahead of the clock.
        since_created: Option<Duration>,
    },
    /// A response POST answered `404`: the command is already fulfilled or no longer pending.
    AlreadyFulfilled {
        /// The opaque request id.
        request_id: String,
    },
    /// A notification could not be delivered; later notifications of the command are skipped.
    NotificationDropped {
        /// The opaque request id.
        request_id: String,
        /// The HTTP status, `None` for a transport failure.
        status: Option<u16>,
    },
    /// The terminal response could not be delivered (attempts exhausted, a non-retryable status,
    /// or the next attempt would pass the deadline).
    DeliveryFailed {
        /// The opaque request id.
        request_id: String,
        /// The last HTTP status, `None` for a transport failure.
        status: Option<u16>,
    },
    /// A tool of a forwarded `tools/list` result has invalid `x-mcp-header` annotations: calls
    /// to it are forwarded without `Mcp-Param-*` headers (the result itself is posted as is).
    ToolRejected {
        /// The opaque request id of the `tools/list` command.
        request_id: String,
        /// The channel.
        channel: String,
        /// The tool's name.
        tool: String,
        /// What is wrong with its annotations (never an argument value).
        reason: String,
    },
    /// A command was admitted `age` after the control plane enqueued it (its `created_at`, by
    /// the wall clock at the poll's answer): the Go client's `commands_age_seconds`.
    CommandAge {
        /// The opaque request id.
        request_id: String,
        /// How long it waited in the control plane's queue.
        age: Duration,
    },
    /// A command named a channel this client does not serve: it was answered with a
    /// `client_internal` failure without contacting an MCP server.
    UnsupportedChannel {
        /// The opaque request id.
        request_id: String,
        /// The channel it named (its first 64 characters).
        channel: String,
        /// `jsonrpc`, `session_termination` or `unknown` (the Go client's label values).
        command_type: &'static str,
    },
    /// A forward's response took longer than the connection TTL after its head arrived: the
    /// forward was cancelled and a `timeout` failure posted as the terminal response.
    ConnectionTtlReached {
        /// The opaque request id.
        request_id: String,
    },
    /// Something the MCP server sent was not used (not JSON-RPC, or an SSE event that is not a
    /// JSON-RPC message).
    Discarded {
        /// The opaque request id.
        request_id: String,
        /// Why.
        reason: &'static str,
    },
}

/// Why [`Engine::poll_timeout`](super::Engine::poll_timeout) wants to be woken.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TimeoutReason {
    /// The next poll is due (after a backoff).
    Poll,
    /// A command's deadline.
    Deadline {
        /// The command.
        cmd: CommandId,
    },
    /// A response POST retry is due.
    PostRetry {
        /// The command.
        cmd: CommandId,
    },
    /// A forward's connection TTL ([`Config::connection_max_ttl`](super::Config::connection_max_ttl)).
    ConnectionTtl {
        /// The command.
        cmd: CommandId,
    },
}

/// The next instant the engine needs [`Engine::handle_timeout`](super::Engine::handle_timeout), and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Timeout {
    /// When.
    pub at: Instant,
    /// Why.
    pub reason: TimeoutReason,
}

/// Why the client is not ready.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum NotReady {
    /// No poll has succeeded yet.
    NoSuccessfulPoll,
    /// The control plane refuses the client (`401`/`403` or another `4xx`): operator action.
    OperatorAction {
        /// The HTTP status.
        status: u16,
    },
    /// The last polls failed.
    PollFailing {
        /// How many in a row.
        consecutive_failures: u32,
    },
    /// Every recent forward failed (the MCP server is unreachable or broken).
    ForwardsFailing {
        /// How many recent forwards failed.
        recent_failures: usize,
    },
    /// The managed `cloudflared` companion is not ready (never set by the engine; see
    /// [`crate::tunnel::cloudflare::combine_readiness`]).
    Companion {
        /// Where the companion stands.
        state: crate::tunnel::cloudflare::CompanionState,
    },
}

/// The readiness verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Readiness {
    /// Polling works and recent forwards are not all failing.
    Ready,
    /// Not ready, and why.
    NotReady(NotReady),
}

/// The engine's state, for health endpoints and metrics.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Health {
    /// When the last poll succeeded (its receipt instant).
    pub last_successful_poll: Option<Instant>,
    /// Failed polls since the last success.
    pub consecutive_poll_failures: u32,
    /// Commands admitted and not finished.
    pub in_flight: usize,
    /// Commands waiting for a forward slot.
    pub queued_forwards: usize,
    /// Forwards running.
    pub forwards_in_flight: usize,
    /// Response POSTs in flight.
    pub posts_in_flight: usize,
    /// The readiness verdict.
    pub readiness: Readiness,
}

/// Why a `handle_*` input was refused: the caller broke the API contract.
///
/// A *late* input (naming a handle this engine issued whose operation has since ended: finished,
/// cancelled, timed out) is not an error: it is dropped and the call returns `Ok(())` (see the
/// [module documentation](crate::tunnel#late-inputs)).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UsageError {
    /// The handle was never issued by this machine (a caller's bug, not a race).
    #[error("no {0} with this handle was ever issued")]
    UnknownHandle(&'static str),
    /// The input does not fit the handle's state (e.g. body bytes before a response head).
    #[error("out-of-order input: {0}")]
    OutOfOrder(&'static str),
}

//! The shared stdio binding: one child process's newline-delimited JSON-RPC frames, shared by
//! every command routed to a stdio-backed channel (`protocol.md`, "Response timeout"; MCP
//! `basic/transports/stdio`).
//!
//! [`StdioBinding`] is sans-IO and one part of [`super::Tunnel`], which owns it: the tunnel hands
//! it commands ([`StdioBinding::handle_command`]), the bytes the child writes to stdout
//! ([`StdioBinding::handle_stdout`]), deadlines ([`StdioBinding::handle_deadline`]) and the
//! child's exit ([`StdioBinding::handle_child_exit`]), and drains [`StdioOutput`]s after every
//! call: lines for the child's stdin, messages and terminal answers for commands, and facts for
//! the log. Commands are named by the engine's [`CommandId`].
//!
//! Every input takes `now`, as every machine's does; the binding keeps no deadline of its own
//! (the engine owns each command's deadline and reports it with
//! [`StdioBinding::handle_deadline`]), so it has no `poll_timeout`. An input naming a command the
//! binding does not hold (finished, or never routed here) is dropped.
//!
//! The rules it holds:
//!
//! - **One request lifecycle at a time.** stdio has one channel and no per-request stream, so a
//!   server notification can only be attributed while a single request is outstanding. Commands
//!   are written in arrival order; a request holds later commands until its lifecycle ends. A
//!   notification (or a caller's response to a server request) has no lifecycle: it is written
//!   and acknowledged ([`StdioOutput::NotificationSent`]) at once, even while a request is active
//!   (so `notifications/cancelled` reaches the server in time), except while `initialize` is
//!   active: nothing may precede the initialize result.
//! - **The lifecycle ends with the response carrying the active id** (a result or an error).
//!   Server requests and notifications seen during it are [`StdioOutput::Message`]s for the active
//!   command. A server *request* that happens to use the active id is not the response: ids of the
//!   two directions are separate.
//! - **A non-`initialize` deadline retires the id** and keeps the pipes: the command gets no
//!   output (the engine already dropped it), the binding admits the next command, and a later
//!   response for that id is [`DiscardReason::LateResponse`], never mistaken for the next command.
//!   While a retired response is outstanding, server requests and notifications cannot be
//!   attributed and are [`DiscardReason::Ambiguous`]; a response for the active id is still
//!   delivered by id. The binding does not send `notifications/cancelled` for a retired id: a
//!   server honouring it would never answer, and the id would stay retired for the child's life.
//! - **A retired id cannot be reused** while its response is outstanding: a request with that id
//!   is answered [`StdioFailure::RetiredIdInUse`] when its turn comes, because its response could
//!   not be told apart from the late one. The late response (or the child's exit) frees the id.
//!   More than [`StdioConfig::max_retired`] unanswered retired ids fail closed (restart).
//! - **An `initialize` deadline fails closed**: initialization can be neither cancelled nor
//!   replayed, so every other waiting or active command gets [`StdioFailure::Restarted`], then
//!   [`StdioOutput::Restart`] asks the driver to restart the child. Commands arriving until the
//!   driver reports the old child's exit wait for the replacement.
//! - **Opt-in initialized guard** ([`StdioConfig::send_initialized_notification`],
//!   `--mcp.stdio-send-initialized-notification`): after a successful (result, not error)
//!   response to `initialize`, the binding writes [`INITIALIZED_NOTIFICATION`] before admitting
//!   anything else; the caller's own `notifications/initialized`, when it follows, is acknowledged
//!   without writing a duplicate. Disabled by default: payloads are forwarded verbatim.
//! - **Framing.** Each payload is written on one line: whitespace outside strings is removed (a
//!   pretty-printed payload cannot break newline framing) and every other byte is kept, strings
//!   byte for byte. Stdout is split on `\n` in any chunking by the same framer as the MCP
//!   client's ([`crate::stdio_lines::LineFramer`]); a trailing `\r` is dropped; blank
//!   lines are ignored; a line that is not UTF-8 JSON-RPC is [`DiscardReason::Malformed`]. A frame
//!   longer than [`StdioConfig::max_frame_bytes`] is not buffered: it is scanned in passing for its
//!   top-level `id`, then discarded; if it was the active command's response, that command fails
//!   with [`StdioFailure::FrameTooLarge`], and if it was a retired id's, the id is freed.
//! - **Child exit** answers every active and queued command with
//!   [`StdioFailure::TransportClosed`] and forgets every retired id (a fresh child has none).
//!
//! Exactly-once: every command accepted by [`StdioBinding::handle_command`] gets exactly one
//! terminal output ([`StdioOutput::Response`], [`StdioOutput::NotificationSent`] or
//! [`StdioOutput::Failed`]) unless its deadline was reported first, in which case it gets none.

use std::collections::{BTreeSet, VecDeque};
use std::fmt;

use crate::jsonrpc::{Id, Message, MessageError};
use crate::stdio_lines::{LineFramer, Piece, MAX_STDIO_LINE};
use crate::time::Instant;
use crate::tunnel::engine::{CommandId, ForwardKind};
use crate::tunnel::failure::{FailureSource, TransportErrorKind, TunnelFailure};

/// The notification the initialized guard writes (without its line end).
pub const INITIALIZED_NOTIFICATION: &str =
    r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

/// The method of the MCP initialization request.
const INITIALIZE: &str = "initialize";
/// The method of the notification that completes initialization.
const INITIALIZED: &str = "notifications/initialized";

/// How a [`StdioBinding`] behaves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StdioConfig {
    /// The initialized guard (`--mcp.stdio-send-initialized-notification`); default `false`.
    pub send_initialized_notification: bool,
    /// The most commands that may wait behind the active request; default 256.
    pub max_queued: usize,
    /// The longest stdout frame accepted, in bytes without its `\n`; default 16 MiB.
    pub max_frame_bytes: usize,
    /// The most retired ids awaiting their late response; one more deadline fails closed
    /// (restart). Default 64.
    pub max_retired: usize,
}

impl Default for StdioConfig {
    fn default() -> Self {
        StdioConfig {
            send_initialized_notification: false,
            max_queued: 256,
            max_frame_bytes: MAX_STDIO_LINE,
            max_retired: 64,
        }
    }
}

/// Why [`StdioBinding::handle_command`] refused a command. The command was not admitted: the
/// caller answers it (see [`StdioError::to_tunnel_failure`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StdioError {
    /// Too many commands are already waiting for the child.
    #[error("stdio binding queue is full ({max} commands already waiting)")]
    QueueFull {
        /// The configured bound.
        max: usize,
    },
    /// The command is already queued or active on this binding.
    #[error("command {0:?} is already queued or active on this stdio binding")]
    DuplicateCommand(CommandId),
    /// The payload is not a JSON-RPC message, so it cannot be written to a stdio MCP server.
    #[error("payload cannot be written to a stdio MCP server: {0}")]
    InvalidPayload(MessageError),
}

impl StdioError {
    /// The synthesized-failure provenance for a refused command: a local refusal, before any
    /// contact with the server.
    pub fn to_tunnel_failure(&self) -> TunnelFailure {
        TunnelFailure::before_response(FailureSource::ClientInternal, None)
    }
}

/// The answer to a `session_termination` routed to a stdio channel: stdio has no Streamable
/// HTTP session to close, so the command is refused locally (`client_internal`, before any
/// contact with the child), and the engine answers it with a `session_termination_response`
/// of status 502. The child keeps serving.
pub fn session_termination_failure() -> TunnelFailure {
    TunnelFailure::before_response(FailureSource::ClientInternal, None)
}

/// Why an admitted command cannot be served.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StdioFailure {
    /// The child exited or its pipes closed before the command was answered.
    #[error("stdio MCP server exited or its pipes closed")]
    TransportClosed,
    /// The child is being restarted because an `initialize` deadline passed (fail-closed).
    #[error("stdio MCP server is restarting after an initialize deadline")]
    Restarted,
    /// The request reuses an id whose timed-out request is still unanswered.
    #[error("request id is retired: a timed-out request with this id is still unanswered")]
    RetiredIdInUse,
    /// The response to the request was longer than the frame limit.
    #[error("stdio response exceeded the frame size limit")]
    FrameTooLarge,
}

impl StdioFailure {
    /// The synthesized-failure provenance for this failure.
    pub fn to_tunnel_failure(self) -> TunnelFailure {
        match self {
            StdioFailure::TransportClosed => TunnelFailure::before_response(
                FailureSource::TransportClosed,
                Some(TransportErrorKind::ClosedPipe),
            ),
            StdioFailure::Restarted => TunnelFailure::before_response(
                FailureSource::TransportClosed,
                Some(TransportErrorKind::ConnectionAborted),
            ),
            StdioFailure::RetiredIdInUse => {
                TunnelFailure::before_response(FailureSource::ClientInternal, None)
            }
            StdioFailure::FrameTooLarge => {
                TunnelFailure::protocol(TransportErrorKind::ResponseBodyTooLarge)
            }
        }
    }
}

/// Why a frame from the child's stdout was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DiscardReason {
    /// Not UTF-8, not JSON, or not a JSON-RPC message.
    Malformed,
    /// Longer than [`StdioConfig::max_frame_bytes`].
    FrameTooLarge,
    /// The response to a request whose deadline passed (its id was retired; now freed).
    LateResponse,
    /// A response for an id that is neither active nor retired.
    UnmatchedResponse,
    /// An error response with a `null` id: it cannot be attributed on a shared channel.
    NullIdError,
    /// A server request or notification while a retired response is outstanding.
    Ambiguous,
    /// A server request or notification while no request lifecycle is active.
    NoActiveRequest,
}

/// Something the driver must do or may log. Drain with [`StdioBinding::poll_output`].
#[derive(Clone, PartialEq, Eq)]
pub enum StdioOutput {
    /// Write these bytes (one frame and its `\n`) to the child's stdin.
    Write(Vec<u8>),
    /// A server request or notification during `cmd`'s request lifecycle.
    Message {
        /// The command.
        cmd: CommandId,
        /// The message, as the child wrote it.
        json: String,
    },
    /// The terminal response (result or error) to `cmd`'s request.
    Response {
        /// The command.
        cmd: CommandId,
        /// The response, as the child wrote it.
        json: String,
    },
    /// `cmd` has no response to wait for (a notification, or the caller's response to a server
    /// request) and was written, or absorbed by the initialized guard.
    NotificationSent {
        /// The command.
        cmd: CommandId,
    },
    /// `cmd` cannot be served.
    Failed {
        /// The command.
        cmd: CommandId,
        /// Why.
        reason: StdioFailure,
    },
    /// Fail closed: kill and restart the child, then report its exit with
    /// [`StdioBinding::handle_child_exit`]. Every other command already got its `Failed`.
    Restart,
    /// A frame from stdout was dropped; for the log (never carries the payload).
    Discarded {
        /// Why.
        reason: DiscardReason,
        /// The frame's id, when it had a readable one.
        id: Option<Id>,
    },
}

impl fmt::Debug for StdioOutput {
    /// Shows sizes, never payloads (they may carry credentials).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StdioOutput::Write(bytes) => {
                f.debug_struct("Write").field("len", &bytes.len()).finish()
            }
            StdioOutput::Message { cmd, json } => f
                .debug_struct("Message")
                .field("cmd", cmd)
                .field("len", &json.len())
                .finish(),
            StdioOutput::Response { cmd, json } => f
                .debug_struct("Response")
                .field("cmd", cmd)
                .field("len", &json.len())
                .finish(),
            StdioOutput::NotificationSent { cmd } => f
                .debug_struct("NotificationSent")
                .field("cmd", cmd)
                .finish(),
            StdioOutput::Failed { cmd, reason } => f
                .debug_struct("Failed")
                .field("cmd", cmd)
                .field("reason", reason)
                .finish(),
            StdioOutput::Restart => f.write_str("Restart"),
            StdioOutput::Discarded { reason, id } => f
                .debug_struct("Discarded")
                .field("reason", reason)
                .field("id", id)
                .finish(),
        }
    }
}

/// What a command waits for once written.
#[derive(Clone)]
enum Kind {
    /// A request: its lifecycle ends with the response carrying `id`.
    Request { id: Id, initialize: bool },
    /// A notification or a caller's response: written and acknowledged.
    Oneway { initialized: bool },
}

/// A command not yet written.
struct Queued {
    cmd: CommandId,
    /// The compacted payload and its `\n`.
    line: Vec<u8>,
    kind: Kind,
}

/// The request whose lifecycle is open.
struct Active {
    cmd: CommandId,
    id: Id,
    initialize: bool,
}

/// The stdio binding of one child process. See the [module documentation](self).
pub struct StdioBinding {
    config: StdioConfig,
    queue: VecDeque<Queued>,
    active: Option<Active>,
    retired: BTreeSet<Id>,
    /// The guard wrote `notifications/initialized` and the caller's own has not come yet.
    initialized_written: bool,
    /// `Restart` was emitted and the old child's exit has not been reported.
    awaiting_exit: bool,
    /// The child's stdout, cut into frames (lines of up to `max_frame_bytes`), as the MCP
    /// client cuts it ([`crate::stdio_lines`]).
    lines: LineFramer,
    /// The current stdout frame is oversized: scanned in passing, not kept.
    oversized: Option<FrameScan>,
    outputs: VecDeque<StdioOutput>,
}

impl fmt::Debug for StdioBinding {
    /// Shows counts and state, never payloads.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StdioBinding")
            .field("queued", &self.queue.len())
            .field("active", &self.active.as_ref().map(|a| a.cmd))
            .field("retired", &self.retired.len())
            .field("awaiting_exit", &self.awaiting_exit)
            .field("buffered", &self.lines.buffered())
            .field("outputs", &self.outputs.len())
            .finish()
    }
}

impl StdioBinding {
    /// A binding for a freshly started child.
    pub fn new(config: StdioConfig) -> Self {
        StdioBinding {
            lines: LineFramer::new(config.max_frame_bytes),
            config,
            queue: VecDeque::new(),
            active: None,
            retired: BTreeSet::new(),
            initialized_written: false,
            awaiting_exit: false,
            oversized: None,
            outputs: VecDeque::new(),
        }
    }

    /// Queues a command's raw JSON-RPC payload (a request, a notification, or a response to a
    /// server request). It is written when its turn comes: one request lifecycle at a time.
    ///
    /// On `Err` the command was not admitted and the binding produces nothing for it: the caller
    /// must answer it itself (a command is never lost).
    pub fn handle_command(
        &mut self,
        _now: Instant,
        cmd: CommandId,
        payload: &str,
    ) -> Result<(), StdioError> {
        if self.knows(cmd) {
            return Err(StdioError::DuplicateCommand(cmd));
        }
        let kind = match Message::parse(payload) {
            Ok(Message::Request { id, method, .. }) => Kind::Request {
                initialize: method == INITIALIZE,
                id,
            },
            Ok(Message::Notification { method, .. }) => Kind::Oneway {
                initialized: method == INITIALIZED,
            },
            Ok(Message::Response { .. } | Message::Error { .. }) => {
                Kind::Oneway { initialized: false }
            }
            Err(e) => return Err(StdioError::InvalidPayload(e)),
        };
        let mut line = compact(payload).into_bytes();
        line.push(b'\n');
        self.queue.push_back(Queued { cmd, line, kind });
        self.pump();
        if self.queue.len() > self.config.max_queued {
            // Pumping only takes from the front; the new command is still waiting at the back.
            if self.queue.back().is_some_and(|q| q.cmd == cmd) {
                self.queue.pop_back();
            }
            return Err(StdioError::QueueFull {
                max: self.config.max_queued,
            });
        }
        Ok(())
    }

    /// Admits a forward routed to this child: a JSON-RPC payload goes to
    /// [`StdioBinding::handle_command`]; a session termination is refused (stdio has no
    /// Streamable HTTP session, see [`session_termination_failure`]).
    ///
    /// On `Err` the command was not admitted: the caller answers it with this failure.
    pub fn handle_forward(
        &mut self,
        now: Instant,
        cmd: CommandId,
        kind: &ForwardKind,
    ) -> Result<(), TunnelFailure> {
        match kind {
            ForwardKind::JsonRpc { payload, .. } => self
                .handle_command(now, cmd, payload.get())
                .map_err(|e| e.to_tunnel_failure()),
            ForwardKind::SessionTermination => Err(session_termination_failure()),
        }
    }

    /// Bytes read from the child's stdout, split anywhere.
    pub fn handle_stdout(&mut self, _now: Instant, bytes: &[u8]) {
        if self.awaiting_exit {
            // The old child is being replaced; nothing it says is attributable.
            return;
        }
        // Taken out while its frames are handled (which needs the whole binding); no copy.
        let mut lines = std::mem::take(&mut self.lines);
        lines.push(bytes, |piece| self.frame_piece(piece));
        self.lines = lines;
    }

    /// The command's deadline passed (the engine already dropped it; it gets no output).
    ///
    /// A queued command is removed. The active request's id is retired and the next command
    /// admitted; for `initialize`, or past [`StdioConfig::max_retired`], the binding fails closed
    /// with [`StdioOutput::Restart`]. An unknown or finished cmd is ignored.
    pub fn handle_deadline(&mut self, _now: Instant, cmd: CommandId) {
        if let Some(pos) = self.queue.iter().position(|q| q.cmd == cmd) {
            self.queue.remove(pos);
            self.pump();
            return;
        }
        let Some(active) = self.active.take_if(|a| a.cmd == cmd) else {
            return;
        };
        if active.initialize || self.retired.len() >= self.config.max_retired {
            self.fail_closed();
        } else {
            self.retired.insert(active.id);
            self.pump();
        }
    }

    /// The child exited or its pipes closed.
    ///
    /// Normally every active and queued command gets [`StdioFailure::TransportClosed`] (after a
    /// final unterminated stdout frame is read) and the binding starts over for a new child.
    /// After [`StdioOutput::Restart`], this call instead reports that the old child is gone:
    /// commands that waited for the replacement are then written, so call it once the
    /// replacement can take them.
    pub fn handle_child_exit(&mut self, _now: Instant) {
        if self.awaiting_exit {
            self.awaiting_exit = false;
            self.reset_child_state();
            self.pump();
            return;
        }
        // A final frame without its newline is read too.
        let mut lines = std::mem::take(&mut self.lines);
        lines.finish(|piece| self.frame_piece(piece));
        self.lines = lines;
        if let Some(active) = self.active.take() {
            self.fail(active.cmd, StdioFailure::TransportClosed);
        }
        while let Some(q) = self.queue.pop_front() {
            self.fail(q.cmd, StdioFailure::TransportClosed);
        }
        self.reset_child_state();
    }

    /// The next output, if any.
    pub fn poll_output(&mut self) -> Option<StdioOutput> {
        self.outputs.pop_front()
    }

    /// No request is active, nothing waits, and no restart is pending (retired ids may still be
    /// outstanding).
    pub fn is_idle(&self) -> bool {
        self.active.is_none() && self.queue.is_empty() && !self.awaiting_exit
    }

    /// How many commands wait behind the active request.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// How many retired ids still await their late response.
    pub fn retired(&self) -> usize {
        self.retired.len()
    }

    fn knows(&self, cmd: CommandId) -> bool {
        self.active.as_ref().is_some_and(|a| a.cmd == cmd)
            || self.queue.iter().any(|q| q.cmd == cmd)
    }

    fn fail(&mut self, cmd: CommandId, reason: StdioFailure) {
        self.outputs.push_back(StdioOutput::Failed { cmd, reason });
    }

    fn reset_child_state(&mut self) {
        self.retired.clear();
        self.initialized_written = false;
        self.lines = LineFramer::new(self.config.max_frame_bytes);
        self.oversized = None;
    }

    /// Fails every other command, asks for a restart, and holds later commands until the old
    /// child's exit is reported.
    fn fail_closed(&mut self) {
        if let Some(active) = self.active.take() {
            self.fail(active.cmd, StdioFailure::Restarted);
        }
        while let Some(q) = self.queue.pop_front() {
            self.fail(q.cmd, StdioFailure::Restarted);
        }
        self.outputs.push_back(StdioOutput::Restart);
        self.reset_child_state();
        self.awaiting_exit = true;
    }

    /// Writes queued commands while the head may go: a request only when none is active, a
    /// one-way message unless `initialize` is active.
    fn pump(&mut self) {
        while !self.awaiting_exit {
            let blocked = match (self.queue.front(), &self.active) {
                (None, _) => break,
                (Some(_), None) => false,
                (Some(q), Some(active)) => match q.kind {
                    Kind::Request { .. } => true,
                    Kind::Oneway { .. } => active.initialize,
                },
            };
            if blocked {
                break;
            }
            let Some(q) = self.queue.pop_front() else {
                break;
            };
            self.start(q);
        }
    }

    fn start(&mut self, q: Queued) {
        match q.kind {
            Kind::Request { id, initialize } => {
                if self.retired.contains(&id) {
                    self.fail(q.cmd, StdioFailure::RetiredIdInUse);
                    return;
                }
                if initialize {
                    self.initialized_written = false;
                }
                self.outputs.push_back(StdioOutput::Write(q.line));
                self.active = Some(Active {
                    cmd: q.cmd,
                    id,
                    initialize,
                });
            }
            Kind::Oneway { initialized } => {
                if initialized && self.initialized_written {
                    // The guard already wrote it: acknowledge without a duplicate.
                    self.initialized_written = false;
                } else {
                    self.outputs.push_back(StdioOutput::Write(q.line));
                }
                self.outputs
                    .push_back(StdioOutput::NotificationSent { cmd: q.cmd });
            }
        }
    }

    /// One complete stdout frame (the line buffer, or the oversized scan).
    /// What the framer found in the child's stdout: a whole frame, or a piece or the end of an
    /// oversized one.
    fn frame_piece(&mut self, piece: Piece<'_>) {
        match piece {
            Piece::Line(raw) => self.finish_frame(raw),
            Piece::Overlong(bytes) => self
                .oversized
                .get_or_insert_with(FrameScan::default)
                .feed(bytes),
            Piece::OverlongEnd => {
                let scan = self.oversized.take().unwrap_or_default();
                self.oversized_frame(scan);
            }
        }
    }

    fn finish_frame(&mut self, raw: &[u8]) {
        let Ok(text) = std::str::from_utf8(raw) else {
            self.discard(DiscardReason::Malformed, None);
            return;
        };
        // Also drops the `\r` of a CRLF line end.
        let text = text.trim_ascii();
        if text.is_empty() {
            return;
        }
        let inbound = match Message::parse(text) {
            Ok(Message::Request { id, .. }) => Inbound::ServerMessage(Some(id)),
            Ok(Message::Notification { .. }) => Inbound::ServerMessage(None),
            Ok(Message::Response { id, .. }) => Inbound::Reply {
                id: Some(id),
                success: true,
            },
            Ok(Message::Error { id, .. }) => Inbound::Reply { id, success: false },
            Err(_) => {
                self.discard(DiscardReason::Malformed, None);
                return;
            }
        };
        let json = text.to_owned();
        match inbound {
            Inbound::Reply { id: None, .. } => self.discard(DiscardReason::NullIdError, None),
            Inbound::Reply {
                id: Some(id),
                success,
            } => {
                if let Some(active) = self.active.take_if(|a| a.id == id) {
                    self.outputs.push_back(StdioOutput::Response {
                        cmd: active.cmd,
                        json,
                    });
                    if success && active.initialize && self.config.send_initialized_notification {
                        let mut line = INITIALIZED_NOTIFICATION.as_bytes().to_vec();
                        line.push(b'\n');
                        self.outputs.push_back(StdioOutput::Write(line));
                        self.initialized_written = true;
                    }
                    self.pump();
                } else if self.retired.remove(&id) {
                    self.discard(DiscardReason::LateResponse, Some(id));
                } else {
                    self.discard(DiscardReason::UnmatchedResponse, Some(id));
                }
            }
            Inbound::ServerMessage(id) => {
                if !self.retired.is_empty() {
                    self.discard(DiscardReason::Ambiguous, id);
                } else if let Some(active) = &self.active {
                    let cmd = active.cmd;
                    self.outputs.push_back(StdioOutput::Message { cmd, json });
                } else {
                    self.discard(DiscardReason::NoActiveRequest, id);
                }
            }
        }
    }

    fn oversized_frame(&mut self, scan: FrameScan) {
        let (id, is_reply) = scan.finish();
        self.discard(DiscardReason::FrameTooLarge, id.clone());
        let Some(id) = id.filter(|_| is_reply) else {
            return;
        };
        if let Some(active) = self.active.take_if(|a| a.id == id) {
            self.fail(active.cmd, StdioFailure::FrameTooLarge);
            self.pump();
        } else {
            self.retired.remove(&id);
        }
    }

    fn discard(&mut self, reason: DiscardReason, id: Option<Id>) {
        self.outputs
            .push_back(StdioOutput::Discarded { reason, id });
    }
}

/// A stdout frame, classified.
enum Inbound {
    /// A response or error, with its id (`None` for `id: null`).
    Reply { id: Option<Id>, success: bool },
    /// A server request (with its id) or notification.
    ServerMessage(Option<Id>),
}

/// Removes whitespace outside JSON strings; every other character, and every string, is kept
/// as is. Valid JSON has no raw line break inside a string, so the result is one line.
fn compact(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    let mut in_string = false;
    let mut escaped = false;
    for ch in json.chars() {
        if in_string {
            if escaped {
                escaped = false;
            } else if ch == '\\' {
                escaped = true;
            } else if ch == '"' {
                in_string = false;
            }
            out.push(ch);
        } else {
            match ch {
                ' ' | '\t' | '\n' | '\r' => {}
                '"' => {
                    in_string = true;
                    out.push(ch);
                }
                _ => out.push(ch),
            }
        }
    }
    out
}

/// The longest member name the scan keeps (longer names are none of the ones it looks for).
const MAX_SCAN_KEY: usize = 16;
/// The longest `id` value text the scan keeps.
const MAX_SCAN_ID: usize = 256;

/// Which top-level member a value belongs to.
#[derive(Clone, Copy, PartialEq, Eq, Default)]
enum Member {
    #[default]
    Other,
    Id,
}

/// A bounded-memory scan of an oversized frame for its top-level `id` and whether it is a
/// response (has `result` or `error`, no `method`). It tracks strings, escapes and nesting, and
/// keeps only a short member name and a short `id` text.
#[derive(Default)]
struct FrameScan {
    depth: u32,
    in_string: bool,
    escaped: bool,
    /// At depth 1, the next string is a member name.
    want_key: bool,
    /// The member name being read.
    key: Option<Vec<u8>>,
    /// The member whose value is being read.
    member: Member,
    /// Between `:` and the next `,` or `}` at depth 1.
    in_value: bool,
    id_text: Vec<u8>,
    id_overflow: bool,
    id: Option<Id>,
    has_method: bool,
    has_outcome: bool,
    /// The top-level value ended (or is not an object).
    done: bool,
}

impl FrameScan {
    fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if self.done {
                return;
            }
            self.byte(b);
        }
    }

    fn capture(&mut self, b: u8) {
        if self.depth == 1 && self.in_value && self.member == Member::Id {
            if self.id_text.len() < MAX_SCAN_ID {
                self.id_text.push(b);
            } else {
                self.id_overflow = true;
            }
        }
    }

    fn byte(&mut self, b: u8) {
        if self.in_string {
            let closing = b == b'"' && !self.escaped;
            if let Some(key) = &mut self.key {
                if !closing && key.len() < MAX_SCAN_KEY {
                    key.push(b);
                }
            }
            self.capture(b);
            if self.escaped {
                self.escaped = false;
            } else if b == b'\\' {
                self.escaped = true;
            } else if b == b'"' {
                self.in_string = false;
                if let Some(key) = self.key.take() {
                    self.member = match key.as_slice() {
                        b"id" => Member::Id,
                        b"method" => {
                            self.has_method = true;
                            Member::Other
                        }
                        b"result" | b"error" => {
                            self.has_outcome = true;
                            Member::Other
                        }
                        _ => Member::Other,
                    };
                }
            }
            return;
        }
        match b {
            b'"' => {
                self.in_string = true;
                if self.depth == 1 && self.want_key {
                    self.want_key = false;
                    self.key = Some(Vec::new());
                } else {
                    self.capture(b);
                }
            }
            b'{' | b'[' => {
                self.depth = self.depth.saturating_add(1);
                if self.depth == 1 {
                    if b == b'{' {
                        self.want_key = true;
                    } else {
                        self.done = true;
                    }
                }
            }
            b'}' | b']' => {
                if self.depth == 1 {
                    self.end_value();
                    self.done = true;
                }
                self.depth = self.depth.saturating_sub(1);
            }
            b',' if self.depth == 1 => {
                self.end_value();
                self.want_key = true;
            }
            b':' if self.depth == 1 => self.in_value = true,
            b' ' | b'\t' | b'\r' => {}
            _ => self.capture(b),
        }
    }

    fn end_value(&mut self) {
        if self.member == Member::Id && !self.id_overflow && !self.id_text.is_empty() {
            self.id = serde_json::from_slice::<Id>(&self.id_text).ok();
        }
        self.member = Member::Other;
        self.in_value = false;
        self.id_text.clear();
        self.id_overflow = false;
    }

    /// The frame's top-level id, and whether the frame is a response.
    fn finish(self) -> (Option<Id>, bool) {
        (self.id, self.has_outcome && !self.has_method)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn now() -> Instant {
        Instant::now()
    }

    fn binding() -> StdioBinding {
        StdioBinding::new(StdioConfig::default())
    }

    fn guarded() -> StdioBinding {
        StdioBinding::new(StdioConfig {
            send_initialized_notification: true,
            ..StdioConfig::default()
        })
    }

    fn with(config: StdioConfig) -> StdioBinding {
        StdioBinding::new(config)
    }

    fn drain(b: &mut StdioBinding) -> Vec<StdioOutput> {
        std::iter::from_fn(|| b.poll_output()).collect()
    }

    fn req(id: i64, method: &str) -> String {
        format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}"}}"#)
    }

    fn notif(method: &str) -> String {
        format!(r#"{{"jsonrpc":"2.0","method":"{method}"}}"#)
    }

    fn ok(id: i64) -> String {
        format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#)
    }

    fn err(id: i64) -> String {
        format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32601,"message":"no"}}}}"#)
    }

    const PROGRESS: &str = r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}"#;

    fn write(json: &str) -> StdioOutput {
        StdioOutput::Write(format!("{json}\n").into_bytes())
    }

    fn feed(b: &mut StdioBinding, json: &str) {
        b.handle_stdout(now(), format!("{json}\n").as_bytes());
    }

    fn response(n: u64, json: &str) -> StdioOutput {
        StdioOutput::Response {
            cmd: CommandId(n),
            json: json.to_owned(),
        }
    }

    fn message(n: u64, json: &str) -> StdioOutput {
        StdioOutput::Message {
            cmd: CommandId(n),
            json: json.to_owned(),
        }
    }

    fn failed(n: u64, reason: StdioFailure) -> StdioOutput {
        StdioOutput::Failed {
            cmd: CommandId(n),
            reason,
        }
    }

    fn sent(n: u64) -> StdioOutput {
        StdioOutput::NotificationSent { cmd: CommandId(n) }
    }

    fn discarded(reason: DiscardReason, id: Option<i64>) -> StdioOutput {
        StdioOutput::Discarded {
            reason,
            id: id.map(Id::from),
        }
    }

    #[test]
    fn request_is_written_as_one_line_and_waits_for_its_response() {
        let mut b = binding();
        b.handle_command(now(), CommandId(1), &req(1, "tools/list"))
            .unwrap();
        assert_eq!(drain(&mut b), [write(&req(1, "tools/list"))]);
        assert!(!b.is_idle());
    }

    #[test]
    fn payload_whitespace_outside_strings_is_removed_and_strings_are_byte_identical() {
        let pretty = "{\n  \"jsonrpc\" : \"2.0\",\r\n\t\"id\": \"a b\",\n  \"method\": \"tools/call\",\n  \"params\": { \"text\": \"one\\ntwo \\\" three \\\\\", \"u\": \"\u{e9} \\u00e9 \u{1F600}\", \"sp\": \"  two  spaces \" , \"n\": [ 1 , 2.5e3 , true , null ] }\n}\n";
        let expected = "{\"jsonrpc\":\"2.0\",\"id\":\"a b\",\"method\":\"tools/call\",\"params\":{\"text\":\"one\\ntwo \\\" three \\\\\",\"u\":\"\u{e9} \\u00e9 \u{1F600}\",\"sp\":\"  two  spaces \",\"n\":[1,2.5e3,true,null]}}";
        let mut b = binding();
        b.handle_command(now(), CommandId(1), pretty).unwrap();
        let out = drain(&mut b);
        assert_eq!(out, [write(expected)]);
        let StdioOutput::Write(bytes) = &out[0] else {
            unreachable!()
        };
        assert_eq!(bytes.iter().filter(|&&c| c == b'\n').count(), 1);
        for s in [
            "\"one\\ntwo \\\" three \\\\\"",
            "\"\u{e9} \\u00e9 \u{1F600}\"",
            "\"  two  spaces \"",
        ] {
            assert!(expected.contains(s), "string {s} changed");
        }
        let a: serde_json::Value = serde_json::from_str(pretty).unwrap();
        let c: serde_json::Value = serde_json::from_str(expected).unwrap();
        assert_eq!(a, c);
    }

    #[test]
    fn compaction_tracks_escaped_backslash_before_a_closing_quote() {
        assert_eq!(
            compact(r#"{ "k" : "x\\" , "j" : " \" } " }"#),
            r#"{"k":"x\\","j":" \" } "}"#
        );
    }

    #[test]
    fn response_with_the_active_id_ends_the_lifecycle() {
        let mut b = binding();
        b.handle_command(now(), CommandId(1), &req(7, "tools/list"))
            .unwrap();
        b.handle_command(now(), CommandId(2), &req(8, "tools/list"))
            .unwrap();
        assert_eq!(drain(&mut b), [write(&req(7, "tools/list"))]);
        feed(&mut b, &ok(7));
        assert_eq!(
            drain(&mut b),
            [response(1, &ok(7)), write(&req(8, "tools/list"))]
        );
        feed(&mut b, &err(8));
        assert_eq!(drain(&mut b), [response(2, &err(8))]);
        assert!(b.is_idle());
    }

    #[test]
    fn server_messages_during_a_request_are_messages_for_that_token() {
        let mut b = binding();
        b.handle_command(now(), CommandId(1), &req(1, "tools/call"))
            .unwrap();
        drain(&mut b);
        feed(&mut b, PROGRESS);
        // A server request that happens to use the active id is not the response.
        let server_req = req(1, "sampling/createMessage");
        feed(&mut b, &server_req);
        assert_eq!(
            drain(&mut b),
            [message(1, PROGRESS), message(1, &server_req)]
        );
        feed(&mut b, &ok(1));
        assert_eq!(drain(&mut b), [response(1, &ok(1))]);
    }

    #[test]
    fn notification_is_written_and_acknowledged() {
        let mut b = binding();
        b.handle_command(
            now(),
            CommandId(1),
            &notif("notifications/roots/list_changed"),
        )
        .unwrap();
        assert_eq!(
            drain(&mut b),
            [write(&notif("notifications/roots/list_changed")), sent(1)]
        );
        assert!(b.is_idle());
    }

    #[test]
    fn notification_is_not_held_behind_an_active_request() {
        let mut b = binding();
        b.handle_command(now(), CommandId(1), &req(1, "tools/call"))
            .unwrap();
        drain(&mut b);
        let cancel =
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#;
        b.handle_command(now(), CommandId(2), cancel).unwrap();
        assert_eq!(drain(&mut b), [write(cancel), sent(2)]);
    }

    #[test]
    fn commands_are_written_in_arrival_order() {
        let mut b = binding();
        b.handle_command(now(), CommandId(1), &req(1, "a")).unwrap();
        b.handle_command(now(), CommandId(2), &req(2, "b")).unwrap();
        b.handle_command(now(), CommandId(3), &notif("n")).unwrap();
        assert_eq!(drain(&mut b), [write(&req(1, "a"))]);
        feed(&mut b, &ok(1));
        assert_eq!(
            drain(&mut b),
            [
                response(1, &ok(1)),
                write(&req(2, "b")),
                write(&notif("n")),
                sent(3)
            ]
        );
    }

    #[test]
    fn nothing_is_written_while_initialize_is_active() {
        let mut b = binding();
        b.handle_command(now(), CommandId(1), &req(0, "initialize"))
            .unwrap();
        b.handle_command(now(), CommandId(2), &notif("notifications/initialized"))
            .unwrap();
        assert_eq!(drain(&mut b), [write(&req(0, "initialize"))]);
        feed(&mut b, &ok(0));
        assert_eq!(
            drain(&mut b),
            [
                response(1, &ok(0)),
                write(&notif("notifications/initialized")),
                sent(2)
            ]
        );
    }

    #[test]
    fn deadline_retires_id_and_next_command_is_served() {
        let mut b = binding();
        b.handle_command(now(), CommandId(1), &req(1, "tools/call"))
            .unwrap();
        b.handle_command(now(), CommandId(2), &req(2, "tools/list"))
            .unwrap();
        assert_eq!(drain(&mut b), [write(&req(1, "tools/call"))]);
        b.handle_deadline(now(), CommandId(1));
        assert_eq!(drain(&mut b), [write(&req(2, "tools/list"))]);
        assert_eq!(b.retired(), 1);
        feed(&mut b, &ok(2));
        assert_eq!(drain(&mut b), [response(2, &ok(2))]);
        feed(&mut b, &ok(1));
        assert_eq!(
            drain(&mut b),
            [discarded(DiscardReason::LateResponse, Some(1))]
        );
        assert_eq!(b.retired(), 0);
        assert!(b.is_idle());
    }

    #[test]
    fn late_response_is_not_mistaken_for_the_active_request() {
        let mut b = binding();
        b.handle_command(now(), CommandId(1), &req(1, "tools/call"))
            .unwrap();
        b.handle_deadline(now(), CommandId(1));
        b.handle_command(now(), CommandId(2), &req(2, "tools/list"))
            .unwrap();
        drain(&mut b);
        // The late response arrives while request 2 is active: it is not 2's answer.
        feed(&mut b, &ok(1));
        assert_eq!(
            drain(&mut b),
            [discarded(DiscardReason::LateResponse, Some(1))]
        );
        assert!(!b.is_idle());
    }

    #[test]
    fn response_for_active_id_is_delivered_while_a_retired_id_is_outstanding() {
        let mut b = binding();
        b.handle_command(now(), CommandId(1), &req(1, "tools/call"))
            .unwrap();
        b.handle_deadline(now(), CommandId(1));
        b.handle_command(now(), CommandId(2), &req(2, "tools/list"))
            .unwrap();
        drain(&mut b);
        feed(&mut b, &ok(2));
        assert_eq!(drain(&mut b), [response(2, &ok(2))]);
        assert_eq!(b.retired(), 1);
    }

    #[test]
    fn server_messages_are_ambiguous_while_a_retired_response_is_outstanding() {
        let mut b = binding();
        b.handle_command(now(), CommandId(1), &req(1, "tools/call"))
            .unwrap();
        b.handle_deadline(now(), CommandId(1));
        b.handle_command(now(), CommandId(2), &req(2, "tools/call"))
            .unwrap();
        drain(&mut b);
        feed(&mut b, PROGRESS);
        feed(&mut b, &req(40, "roots/list"));
        assert_eq!(
            drain(&mut b),
            [
                discarded(DiscardReason::Ambiguous, None),
                discarded(DiscardReason::Ambiguous, Some(40))
            ]
        );
        // Once the late response is in, messages are attributable again.
        feed(&mut b, &ok(1));
        feed(&mut b, PROGRESS);
        assert_eq!(
            drain(&mut b),
            [
                discarded(DiscardReason::LateResponse, Some(1)),
                message(2, PROGRESS)
            ]
        );
    }

    #[test]
    fn command_reusing_an_outstanding_retired_id_fails_with_retired_id_in_use() {
        let mut b = binding();
        b.handle_command(now(), CommandId(1), &req(5, "tools/call"))
            .unwrap();
        b.handle_deadline(now(), CommandId(1));
        drain(&mut b);
        b.handle_command(now(), CommandId(2), &req(5, "tools/call"))
            .unwrap();
        assert_eq!(drain(&mut b), [failed(2, StdioFailure::RetiredIdInUse)]);
        // The string id "5" is a different id.
        let string_id = r#"{"jsonrpc":"2.0","id":"5","method":"tools/call"}"#;
        b.handle_command(now(), CommandId(3), string_id).unwrap();
        assert_eq!(drain(&mut b), [write(string_id)]);
    }

    #[test]
    fn retired_id_is_free_again_after_its_late_response() {
        let mut b = binding();
        b.handle_command(now(), CommandId(1), &req(5, "tools/call"))
            .unwrap();
        b.handle_deadline(now(), CommandId(1));
        feed(&mut b, &ok(5));
        drain(&mut b);
        b.handle_command(now(), CommandId(2), &req(5, "tools/call"))
            .unwrap();
        assert_eq!(drain(&mut b), [write(&req(5, "tools/call"))]);
        feed(&mut b, &ok(5));
        assert_eq!(drain(&mut b), [response(2, &ok(5))]);
    }

    #[test]
    fn initialize_deadline_fails_closed() {
        let mut b = binding();
        b.handle_command(now(), CommandId(1), &req(0, "initialize"))
            .unwrap();
        b.handle_command(now(), CommandId(2), &req(1, "tools/list"))
            .unwrap();
        b.handle_command(now(), CommandId(3), &notif("notifications/initialized"))
            .unwrap();
        drain(&mut b);
        b.handle_deadline(now(), CommandId(1));
        assert_eq!(
            drain(&mut b),
            [
                failed(2, StdioFailure::Restarted),
                failed(3, StdioFailure::Restarted),
                StdioOutput::Restart
            ]
        );
        assert_eq!(b.retired(), 0, "initialize is never retired");
    }

    #[test]
    fn commands_after_restart_wait_for_the_replacement_child() {
        let mut b = binding();
        b.handle_command(now(), CommandId(1), &req(0, "initialize"))
            .unwrap();
        b.handle_deadline(now(), CommandId(1));
        drain(&mut b);
        b.handle_command(now(), CommandId(2), &req(0, "initialize"))
            .unwrap();
        assert!(!b.is_idle());
        // The old child's output is not attributable to anything.
        feed(&mut b, &ok(0));
        assert_eq!(drain(&mut b), []);
        b.handle_child_exit(now());
        assert_eq!(drain(&mut b), [write(&req(0, "initialize"))]);
        feed(&mut b, &ok(0));
        assert_eq!(drain(&mut b), [response(2, &ok(0))]);
    }

    #[test]
    fn queued_command_deadline_removes_it_without_output() {
        let mut b = binding();
        b.handle_command(now(), CommandId(1), &req(1, "a")).unwrap();
        b.handle_command(now(), CommandId(2), &req(2, "b")).unwrap();
        drain(&mut b);
        b.handle_deadline(now(), CommandId(2));
        assert_eq!(drain(&mut b), []);
        assert_eq!(b.queued(), 0);
        feed(&mut b, &ok(1));
        assert_eq!(drain(&mut b), [response(1, &ok(1))]);
    }

    #[test]
    fn queued_initialize_deadline_does_not_restart() {
        let mut b = binding();
        b.handle_command(now(), CommandId(1), &req(1, "a")).unwrap();
        b.handle_command(now(), CommandId(2), &req(0, "initialize"))
            .unwrap();
        drain(&mut b);
        b.handle_deadline(now(), CommandId(2));
        assert_eq!(drain(&mut b), []);
        assert!(!b.awaiting_exit);
    }

    #[test]
    fn deadline_after_the_terminal_output_is_ignored() {
        let mut b = binding();
        b.handle_command(now(), CommandId(1), &req(1, "a")).unwrap();
        feed(&mut b, &ok(1));
        drain(&mut b);
        b.handle_deadline(now(), CommandId(1));
        assert_eq!(drain(&mut b), []);
        assert_eq!(b.retired(), 0);
    }

    #[test]
    fn too_many_retired_ids_fail_closed() {
        let mut b = with(StdioConfig {
            max_retired: 1,
            ..StdioConfig::default()
        });
        b.handle_command(now(), CommandId(1), &req(1, "a")).unwrap();
        b.handle_deadline(now(), CommandId(1));
        b.handle_command(now(), CommandId(2), &req(2, "a")).unwrap();
        b.handle_command(now(), CommandId(3), &req(3, "a")).unwrap();
        drain(&mut b);
        b.handle_deadline(now(), CommandId(2));
        assert_eq!(
            drain(&mut b),
            [failed(3, StdioFailure::Restarted), StdioOutput::Restart]
        );
    }

    #[test]
    fn guard_writes_initialized_after_successful_initialize_before_the_next_command() {
        let mut b = guarded();
        b.handle_command(now(), CommandId(1), &req(0, "initialize"))
            .unwrap();
        b.handle_command(now(), CommandId(2), &req(1, "tools/list"))
            .unwrap();
        drain(&mut b);
        feed(&mut b, &ok(0));
        assert_eq!(
            drain(&mut b),
            [
                response(1, &ok(0)),
                write(INITIALIZED_NOTIFICATION),
                write(&req(1, "tools/list"))
            ]
        );
    }

    #[test]
    fn guard_acknowledges_the_callers_initialized_without_a_duplicate() {
        let mut b = guarded();
        b.handle_command(now(), CommandId(1), &req(0, "initialize"))
            .unwrap();
        feed(&mut b, &ok(0));
        drain(&mut b);
        b.handle_command(now(), CommandId(2), &notif("notifications/initialized"))
            .unwrap();
        assert_eq!(drain(&mut b), [sent(2)]);
        // Only the one the guard stood in for is absorbed.
        b.handle_command(now(), CommandId(3), &notif("notifications/initialized"))
            .unwrap();
        assert_eq!(
            drain(&mut b),
            [write(&notif("notifications/initialized")), sent(3)]
        );
    }

    #[test]
    fn guard_does_not_write_after_an_initialize_error() {
        let mut b = guarded();
        b.handle_command(now(), CommandId(1), &req(0, "initialize"))
            .unwrap();
        drain(&mut b);
        feed(&mut b, &err(0));
        assert_eq!(drain(&mut b), [response(1, &err(0))]);
        b.handle_command(now(), CommandId(2), &notif("notifications/initialized"))
            .unwrap();
        assert_eq!(
            drain(&mut b),
            [write(&notif("notifications/initialized")), sent(2)]
        );
    }

    #[test]
    fn guard_disabled_by_default_forwards_verbatim() {
        assert!(!StdioConfig::default().send_initialized_notification);
        let mut b = binding();
        b.handle_command(now(), CommandId(1), &req(0, "initialize"))
            .unwrap();
        drain(&mut b);
        feed(&mut b, &ok(0));
        assert_eq!(drain(&mut b), [response(1, &ok(0))]);
        b.handle_command(now(), CommandId(2), &notif("notifications/initialized"))
            .unwrap();
        assert_eq!(
            drain(&mut b),
            [write(&notif("notifications/initialized")), sent(2)]
        );
    }

    #[test]
    fn child_exit_answers_every_queued_command() {
        let mut b = binding();
        b.handle_command(now(), CommandId(9), &req(9, "a")).unwrap();
        b.handle_deadline(now(), CommandId(9));
        b.handle_command(now(), CommandId(1), &req(1, "a")).unwrap();
        b.handle_command(now(), CommandId(2), &req(2, "b")).unwrap();
        b.handle_command(now(), CommandId(3), &notif("n")).unwrap();
        drain(&mut b);
        b.handle_child_exit(now());
        assert_eq!(
            drain(&mut b),
            [
                failed(1, StdioFailure::TransportClosed),
                failed(2, StdioFailure::TransportClosed),
                failed(3, StdioFailure::TransportClosed)
            ]
        );
        assert!(b.is_idle());
        assert_eq!(b.retired(), 0, "a fresh child has no retired ids");
        b.handle_command(now(), CommandId(4), &req(9, "a")).unwrap();
        assert_eq!(drain(&mut b), [write(&req(9, "a"))]);
    }

    #[test]
    fn unterminated_last_frame_is_read_at_exit() {
        let mut b = binding();
        b.handle_command(now(), CommandId(1), &req(1, "a")).unwrap();
        drain(&mut b);
        b.handle_stdout(now(), ok(1).as_bytes());
        assert_eq!(drain(&mut b), []);
        b.handle_child_exit(now());
        assert_eq!(drain(&mut b), [response(1, &ok(1))]);
    }

    #[test]
    fn queue_bound_refuses_with_queue_full_and_keeps_nothing() {
        let mut b = with(StdioConfig {
            max_queued: 2,
            ..StdioConfig::default()
        });
        b.handle_command(now(), CommandId(1), &req(1, "a")).unwrap();
        b.handle_command(now(), CommandId(2), &req(2, "a")).unwrap();
        b.handle_command(now(), CommandId(3), &req(3, "a")).unwrap();
        assert_eq!(
            b.handle_command(now(), CommandId(4), &req(4, "a")),
            Err(StdioError::QueueFull { max: 2 })
        );
        assert_eq!(b.queued(), 2);
        drain(&mut b);
        b.handle_child_exit(now());
        let tokens: Vec<u64> = drain(&mut b)
            .into_iter()
            .filter_map(|o| match o {
                StdioOutput::Failed { cmd, .. } => Some(cmd.0),
                _ => None,
            })
            .collect();
        assert_eq!(tokens, [1, 2, 3]);
    }

    #[test]
    fn queue_bound_counts_only_waiting_commands() {
        let mut b = with(StdioConfig {
            max_queued: 0,
            ..StdioConfig::default()
        });
        b.handle_command(now(), CommandId(1), &req(1, "a")).unwrap();
        assert_eq!(drain(&mut b), [write(&req(1, "a"))]);
        assert!(matches!(
            b.handle_command(now(), CommandId(2), &req(2, "a")),
            Err(StdioError::QueueFull { .. })
        ));
    }

    #[test]
    fn frame_split_across_chunks_is_one_message() {
        let mut b = binding();
        b.handle_command(now(), CommandId(1), &req(1, "a")).unwrap();
        drain(&mut b);
        let bytes = format!("{PROGRESS}\r\n{}\r\n", ok(1)).into_bytes();
        for byte in bytes.chunks(1) {
            b.handle_stdout(now(), byte);
        }
        assert_eq!(drain(&mut b), [message(1, PROGRESS), response(1, &ok(1))]);
    }

    #[test]
    fn two_frames_in_one_chunk_are_two_messages() {
        let mut b = binding();
        b.handle_command(now(), CommandId(1), &req(1, "a")).unwrap();
        drain(&mut b);
        b.handle_stdout(now(), format!("{PROGRESS}\n{}\n", ok(1)).as_bytes());
        assert_eq!(drain(&mut b), [message(1, PROGRESS), response(1, &ok(1))]);
    }

    #[test]
    fn crlf_line_ends_and_blank_lines_are_tolerated() {
        let mut b = binding();
        b.handle_command(now(), CommandId(1), &req(1, "a")).unwrap();
        drain(&mut b);
        b.handle_stdout(now(), b"\r\n   \n\n");
        b.handle_stdout(now(), format!("{}\r\n", ok(1)).as_bytes());
        assert_eq!(drain(&mut b), [response(1, &ok(1))]);
    }

    fn small_frames() -> StdioBinding {
        with(StdioConfig {
            max_frame_bytes: 64,
            ..StdioConfig::default()
        })
    }

    fn big(prefix: &str, suffix: &str) -> String {
        format!("{prefix}{}{suffix}", "x".repeat(10_000))
    }

    #[test]
    fn oversized_frame_is_discarded_without_buffering_it() {
        let mut b = small_frames();
        b.handle_command(now(), CommandId(1), &req(1, "a")).unwrap();
        drain(&mut b);
        let frame = big(
            r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"data":""#,
            "\"}}\n",
        );
        for chunk in frame.as_bytes().chunks(100) {
            b.handle_stdout(now(), chunk);
            assert!(b.lines.buffered() <= 64, "buffered {}", b.lines.buffered());
        }
        assert_eq!(
            drain(&mut b),
            [discarded(DiscardReason::FrameTooLarge, None)]
        );
        // The lifecycle goes on.
        feed(&mut b, &ok(1));
        assert_eq!(drain(&mut b), [response(1, &ok(1))]);
    }

    #[test]
    fn frame_of_exactly_max_bytes_is_accepted() {
        let json = ok(1);
        let mut b = with(StdioConfig {
            max_frame_bytes: json.len(),
            ..StdioConfig::default()
        });
        b.handle_command(now(), CommandId(1), &req(1, "a")).unwrap();
        drain(&mut b);
        feed(&mut b, &json);
        assert_eq!(drain(&mut b), [response(1, &json)]);

        let mut b = with(StdioConfig {
            max_frame_bytes: json.len() - 1,
            ..StdioConfig::default()
        });
        b.handle_command(now(), CommandId(1), &req(1, "a")).unwrap();
        drain(&mut b);
        feed(&mut b, &json);
        assert_eq!(
            drain(&mut b),
            [
                discarded(DiscardReason::FrameTooLarge, Some(1)),
                failed(1, StdioFailure::FrameTooLarge)
            ]
        );
    }

    #[test]
    fn oversized_response_for_the_active_id_fails_the_command() {
        let mut b = small_frames();
        b.handle_command(now(), CommandId(1), &req(1, "a")).unwrap();
        b.handle_command(now(), CommandId(2), &req(2, "b")).unwrap();
        drain(&mut b);
        feed(
            &mut b,
            &big(r#"{"jsonrpc":"2.0","id":1,"result":{"big":""#, "\"}}"),
        );
        assert_eq!(
            drain(&mut b),
            [
                discarded(DiscardReason::FrameTooLarge, Some(1)),
                failed(1, StdioFailure::FrameTooLarge),
                write(&req(2, "b"))
            ]
        );
    }

    #[test]
    fn oversized_frame_scan_reads_only_the_top_level_id() {
        let mut b = small_frames();
        b.handle_command(now(), CommandId(1), &req(1, "a")).unwrap();
        drain(&mut b);
        // A nested "id" and an id key inside a string come first; the top-level id is last.
        feed(
            &mut b,
            &big(
                r#"{"jsonrpc":"2.0","result":{"id":2,"s":"\"id\":3,","big":""#,
                r#""}, "id" : 1 }"#,
            ),
        );
        assert_eq!(
            drain(&mut b),
            [
                discarded(DiscardReason::FrameTooLarge, Some(1)),
                failed(1, StdioFailure::FrameTooLarge)
            ]
        );
    }

    #[test]
    fn oversized_server_request_with_the_active_id_is_not_the_response() {
        let mut b = small_frames();
        b.handle_command(now(), CommandId(1), &req(1, "a")).unwrap();
        drain(&mut b);
        feed(
            &mut b,
            &big(
                r#"{"jsonrpc":"2.0","id":1,"method":"sampling/createMessage","params":{"p":""#,
                "\"}}",
            ),
        );
        assert_eq!(
            drain(&mut b),
            [discarded(DiscardReason::FrameTooLarge, Some(1))]
        );
        assert!(!b.is_idle());
    }

    #[test]
    fn oversized_late_response_frees_the_retired_id() {
        let mut b = small_frames();
        b.handle_command(now(), CommandId(1), &req(1, "a")).unwrap();
        b.handle_deadline(now(), CommandId(1));
        drain(&mut b);
        feed(
            &mut b,
            &big(r#"{"jsonrpc":"2.0","id":1,"result":{"big":""#, "\"}}"),
        );
        assert_eq!(
            drain(&mut b),
            [discarded(DiscardReason::FrameTooLarge, Some(1))]
        );
        assert_eq!(b.retired(), 0);
    }

    #[test]
    fn oversized_frame_scan_reads_string_ids_with_escapes() {
        let mut scan = FrameScan::default();
        scan.feed(br#"{"error":{"code":1,"message":"m"},"id":"a\"b"}"#);
        assert_eq!(scan.finish(), (Some(Id::from("a\"b")), true));
        let mut scan = FrameScan::default();
        scan.feed(br#"{"id":{"x":1},"result":1}"#);
        assert_eq!(scan.finish(), (None, true));
        let mut scan = FrameScan::default();
        scan.feed(br#"[{"id":1,"result":1}]"#);
        assert_eq!(scan.finish(), (None, false));
    }

    #[test]
    fn malformed_and_non_utf8_lines_are_discarded() {
        let mut b = binding();
        b.handle_command(now(), CommandId(1), &req(1, "a")).unwrap();
        drain(&mut b);
        b.handle_stdout(now(), b"\xff\xfe{}\n");
        b.handle_stdout(now(), b"server starting...\n");
        b.handle_stdout(now(), b"{\"id\":1,\"result\":{}}\n");
        assert_eq!(
            drain(&mut b),
            [
                discarded(DiscardReason::Malformed, None),
                discarded(DiscardReason::Malformed, None),
                discarded(DiscardReason::Malformed, None)
            ]
        );
        assert!(!b.is_idle());
    }

    #[test]
    fn null_id_error_is_discarded_as_unattributable() {
        let mut b = binding();
        b.handle_command(now(), CommandId(1), &req(1, "a")).unwrap();
        drain(&mut b);
        feed(
            &mut b,
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#,
        );
        assert_eq!(drain(&mut b), [discarded(DiscardReason::NullIdError, None)]);
        assert!(!b.is_idle());
    }

    #[test]
    fn unmatched_response_is_discarded() {
        let mut b = binding();
        b.handle_command(now(), CommandId(1), &req(1, "a")).unwrap();
        drain(&mut b);
        feed(&mut b, &ok(9));
        assert_eq!(
            drain(&mut b),
            [discarded(DiscardReason::UnmatchedResponse, Some(9))]
        );
    }

    #[test]
    fn server_message_without_an_active_request_is_discarded() {
        let mut b = binding();
        feed(&mut b, PROGRESS);
        assert_eq!(
            drain(&mut b),
            [discarded(DiscardReason::NoActiveRequest, None)]
        );
    }

    #[test]
    fn invalid_payload_is_refused() {
        let mut b = binding();
        for bad in ["not json", r#"{"id":1,"method":"x"}"#, "[1]", ""] {
            assert!(matches!(
                b.handle_command(now(), CommandId(1), bad),
                Err(StdioError::InvalidPayload(_))
            ));
        }
        assert_eq!(drain(&mut b), []);
        assert!(b.is_idle());
    }

    #[test]
    fn duplicate_token_is_refused() {
        let mut b = binding();
        b.handle_command(now(), CommandId(1), &req(1, "a")).unwrap();
        b.handle_command(now(), CommandId(2), &req(2, "a")).unwrap();
        assert_eq!(
            b.handle_command(now(), CommandId(1), &req(3, "a")),
            Err(StdioError::DuplicateCommand(CommandId(1)))
        );
        assert_eq!(
            b.handle_command(now(), CommandId(2), &req(3, "a")),
            Err(StdioError::DuplicateCommand(CommandId(2)))
        );
        assert_eq!(b.queued(), 1);
    }

    #[test]
    fn caller_response_payload_is_written_and_acknowledged() {
        let mut b = binding();
        let answer = r#"{"jsonrpc":"2.0","id":"s1","result":{}}"#;
        b.handle_command(now(), CommandId(1), answer).unwrap();
        assert_eq!(drain(&mut b), [write(answer), sent(1)]);
    }

    #[test]
    fn stdio_failures_map_to_bounded_tunnel_failures() {
        let closed = StdioFailure::TransportClosed.to_tunnel_failure();
        assert_eq!(closed.source(), FailureSource::TransportClosed);
        assert_eq!(
            closed.transport_error_kind(),
            Some(TransportErrorKind::ClosedPipe)
        );
        assert!(!closed.upstream_response_received());
        let restarted = StdioFailure::Restarted.to_tunnel_failure();
        assert_eq!(restarted.source(), FailureSource::TransportClosed);
        assert!(!restarted.upstream_response_received());
        let retired = StdioFailure::RetiredIdInUse.to_tunnel_failure();
        assert_eq!(retired.source(), FailureSource::ClientInternal);
        let too_large = StdioFailure::FrameTooLarge.to_tunnel_failure();
        assert_eq!(too_large.source(), FailureSource::Protocol);
        assert!(too_large.upstream_response_received());
        assert_eq!(
            too_large.transport_error_kind(),
            Some(TransportErrorKind::ResponseBodyTooLarge)
        );
        let refused = StdioError::QueueFull { max: 1 }.to_tunnel_failure();
        assert_eq!(refused.source(), FailureSource::ClientInternal);
        assert!(!refused.upstream_response_received());
    }

    #[test]
    fn debug_output_never_contains_payloads() {
        let mut b = binding();
        let secret = "sk-live-secret-123";
        let payload = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"key":"{secret}"}}}}"#
        );
        b.handle_command(now(), CommandId(1), &payload).unwrap();
        b.handle_command(
            now(),
            CommandId(2),
            &payload.replace("\"id\":1", "\"id\":2"),
        )
        .unwrap();
        let reply = format!(r#"{{"jsonrpc":"2.0","id":1,"result":{{"key":"{secret}"}}}}"#);
        feed(&mut b, &reply);
        let out = drain(&mut b);
        assert!(out
            .iter()
            .any(|o| matches!(o, StdioOutput::Response { .. })));
        assert!(!format!("{out:?} {b:?}").contains(secret));
    }

    /// One line per output, with the payloads: the wire as the driver sees it.
    fn transcript(out: &[StdioOutput]) -> String {
        let mut s = String::new();
        for o in out {
            let line = match o {
                StdioOutput::Write(bytes) => {
                    format!("stdin <- {}", String::from_utf8_lossy(bytes).trim_end())
                }
                StdioOutput::Message {
                    cmd: CommandId(token),
                    json,
                } => format!("message {token}: {json}"),
                StdioOutput::Response {
                    cmd: CommandId(token),
                    json,
                } => format!("response {token}: {json}"),
                StdioOutput::NotificationSent {
                    cmd: CommandId(token),
                } => format!("sent {token}"),
                StdioOutput::Failed {
                    cmd: CommandId(token),
                    reason,
                } => format!("failed {token}: {reason:?}"),
                StdioOutput::Restart => "restart".to_owned(),
                StdioOutput::Discarded { reason, id } => format!("discarded {reason:?} {id:?}"),
            };
            s.push_str(&line);
            s.push('\n');
        }
        s
    }

    #[test]
    fn wire_transcript_of_a_guarded_session_with_a_timeout() {
        let mut b = guarded();
        let mut out = Vec::new();
        b.handle_command(now(), CommandId(1),
            "{\n  \"jsonrpc\": \"2.0\",\n  \"id\": 0,\n  \"method\": \"initialize\",\n  \"params\": {\"protocolVersion\": \"2025-11-25\", \"capabilities\": {}, \"clientInfo\": {\"name\": \"c\", \"version\": \"1\"}}\n}",
        )
        .unwrap();
        out.extend(drain(&mut b));
        b.handle_stdout(now(), b"{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{},\"serverInfo\":{\"name\":\"s\",\"version\":\"1\"}}}\r\n");
        out.extend(drain(&mut b));
        b.handle_command(now(), CommandId(2), &notif("notifications/initialized"))
            .unwrap();
        b.handle_command(now(), CommandId(3),
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","arguments":{}}}"#,
        )
        .unwrap();
        b.handle_command(now(), CommandId(4), &req(2, "tools/list"))
            .unwrap();
        out.extend(drain(&mut b));
        b.handle_deadline(now(), CommandId(3));
        out.extend(drain(&mut b));
        feed(&mut b, PROGRESS);
        feed(
            &mut b,
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"late"}]}}"#,
        );
        feed(&mut b, PROGRESS);
        feed(&mut b, r#"{"jsonrpc":"2.0","id":2,"result":{"tools":[]}}"#);
        out.extend(drain(&mut b));
        b.handle_child_exit(now());
        out.extend(drain(&mut b));
        insta::assert_snapshot!(transcript(&out));
    }

    /// One step of a generated run.
    #[derive(Debug, Clone)]
    enum Op {
        Request { id: i64, initialize: bool },
        Notify { initialized: bool },
        Deadline(usize),
        Reply { id: i64, error: bool },
        ServerNotification,
        ServerRequest(i64),
        NullIdError,
        Garbage,
        Big { id: i64, reply: bool },
        Exit,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (0..4i64, prop::bool::weighted(0.2))
                .prop_map(|(id, initialize)| Op::Request { id, initialize }),
            1 => any::<bool>().prop_map(|initialized| Op::Notify { initialized }),
            2 => any::<usize>().prop_map(Op::Deadline),
            3 => (0..4i64, any::<bool>()).prop_map(|(id, error)| Op::Reply { id, error }),
            1 => Just(Op::ServerNotification),
            1 => (0..4i64).prop_map(Op::ServerRequest),
            1 => Just(Op::NullIdError),
            1 => Just(Op::Garbage),
            1 => (0..4i64, any::<bool>()).prop_map(|(id, reply)| Op::Big { id, reply }),
            1 => Just(Op::Exit),
        ]
    }

    /// What the run knows about one admitted command.
    #[derive(Debug, Default)]
    struct Record {
        request_id: Option<Id>,
        terminals: u32,
        deadline_first: bool,
    }

    /// Checks one batch of outputs against the records: no output after a terminal or a handled
    /// deadline, at most one terminal, and a response carries its own request's id.
    fn check(
        records: &mut BTreeMap<CommandId, Record>,
        out: &[StdioOutput],
    ) -> Result<(), TestCaseError> {
        for o in out {
            let token = match o {
                StdioOutput::Write(bytes) => {
                    prop_assert_eq!(bytes.last(), Some(&b'\n'));
                    prop_assert_eq!(bytes.iter().filter(|&&c| c == b'\n').count(), 1);
                    continue;
                }
                StdioOutput::Restart | StdioOutput::Discarded { .. } => continue,
                StdioOutput::Message { cmd: token, .. }
                | StdioOutput::Response { cmd: token, .. }
                | StdioOutput::NotificationSent { cmd: token }
                | StdioOutput::Failed { cmd: token, .. } => *token,
            };
            let Some(r) = records.get_mut(&token) else {
                return Err(TestCaseError::fail(format!(
                    "output for unknown token {token:?}"
                )));
            };
            prop_assert!(!r.deadline_first, "output after deadline for {:?}", token);
            prop_assert_eq!(r.terminals, 0, "output after terminal for {:?}", token);
            match o {
                StdioOutput::Response { json, .. } => {
                    let id = Message::parse(json).ok().and_then(|m| m.id().cloned());
                    prop_assert!(r.request_id.is_some());
                    prop_assert_eq!(
                        &id,
                        &r.request_id,
                        "response delivered to the wrong command"
                    );
                    r.terminals += 1;
                }
                StdioOutput::NotificationSent { .. } => {
                    prop_assert!(r.request_id.is_none());
                    r.terminals += 1;
                }
                StdioOutput::Failed { .. } => r.terminals += 1,
                _ => prop_assert!(r.request_id.is_some(), "message for a notification"),
            }
        }
        Ok(())
    }

    fn child_line(op: &Op) -> Option<String> {
        Some(match op {
            Op::Reply { id, error: false } => ok(*id),
            Op::Reply { id, error: true } => err(*id),
            Op::ServerNotification => PROGRESS.to_owned(),
            Op::ServerRequest(id) => req(*id, "roots/list"),
            Op::NullIdError => {
                r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"p"}}"#.to_owned()
            }
            Op::Garbage => "garbage".to_owned(),
            Op::Big { id, reply: true } => big(
                &format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"b":""#),
                "\"}}",
            ),
            Op::Big { id, reply: false } => big(
                &format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"m","params":{{"b":""#),
                "\"}}",
            ),
            _ => return None,
        })
    }

    proptest! {
        #[test]
        fn every_admitted_command_gets_exactly_one_terminal_unless_its_deadline_came_first(
            ops in prop::collection::vec(op(), 0..60),
            split in 0usize..40,
            guard in any::<bool>(),
            max_queued in 0usize..4,
            max_retired in 0usize..3,
        ) {
            let mut b = with(StdioConfig {
                send_initialized_notification: guard,
                max_queued,
                max_frame_bytes: 200,
                max_retired,
            });
            let mut records: BTreeMap<CommandId, Record> = BTreeMap::new();
            let mut next = 0u64;
            for op in &ops {
                match op {
                    Op::Request { id, initialize } => {
                        next += 1;
                        let method = if *initialize { "initialize" } else { "tools/call" };
                        if b.handle_command(now(), CommandId(next), &req(*id, method)).is_ok() {
                            records.insert(CommandId(next), Record { request_id: Some(Id::from(*id)), ..Record::default() });
                        }
                    }
                    Op::Notify { initialized } => {
                        next += 1;
                        let method = if *initialized { "notifications/initialized" } else { "notifications/cancelled" };
                        if b.handle_command(now(), CommandId(next), &notif(method)).is_ok() {
                            records.insert(CommandId(next), Record::default());
                        }
                    }
                    Op::Deadline(i) => {
                        let keys: Vec<CommandId> = records.keys().copied().collect();
                        if !keys.is_empty() {
                            let token = keys[i % keys.len()];
                            b.handle_deadline(now(), token);
                            if let Some(r) = records.get_mut(&token) {
                                if r.terminals == 0 {
                                    r.deadline_first = true;
                                }
                            }
                        }
                    }
                    Op::Exit => b.handle_child_exit(now()),
                    other => {
                        if let Some(line) = child_line(other) {
                            let bytes = format!("{line}\n").into_bytes();
                            let (a, c) = bytes.split_at(split.min(bytes.len()));
                            b.handle_stdout(now(), a);
                            b.handle_stdout(now(), c);
                        }
                    }
                }
                let out = drain(&mut b);
                check(&mut records, &out)?;
            }
            // The first exit may only end a pending restart; the second fails the rest.
            b.handle_child_exit(now());
            b.handle_child_exit(now());
            let out = drain(&mut b);
            check(&mut records, &out)?;
            for (token, r) in &records {
                prop_assert!(
                    r.deadline_first || r.terminals == 1,
                    "token {:?} ended with {} terminals", token, r.terminals
                );
            }
            prop_assert!(b.is_idle());
        }
    }
}

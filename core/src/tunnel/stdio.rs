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

    /// [`StdioOutput::Restart`] was emitted and the old child's exit has not been reported yet
    /// ([`StdioBinding::handle_child_exit`]): commands wait for the replacement, and the old
    /// child's stdout is ignored.
    pub fn awaiting_exit(&self) -> bool {
        self.awaiting_exit
    }

    /// Bytes held of a stdout frame whose newline has not come yet: at most
    /// [`StdioConfig::max_frame_bytes`] (an oversized frame is scanned in passing, not kept).
    pub fn buffered(&self) -> usize {
        self.lines.buffered()
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
mod tests {
    //! What only the binding's private parts show: payload compaction and the oversized frame's
    //! id scan. The binding's behaviour is tested through its public API in
    //! `core/tests/stdio_binding.rs`.
    use super::*;

    #[test]
    fn compaction_tracks_escaped_backslash_before_a_closing_quote() {
        assert_eq!(
            compact(r#"{ "k" : "x\\" , "j" : " \" } " }"#),
            r#"{"k":"x\\","j":" \" } "}"#
        );
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
}

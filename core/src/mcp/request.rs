//! `request`: the lifecycle of outgoing requests: timeouts, progress, cancellation, resends, and
//! how a response is classified.
//!
//! Sources: `basic/patterns/cancellation.mdx` ("Transport-Specific Cancellation", "Timeouts",
//! "Behavior Requirements"), `basic/patterns/progress.mdx`, `basic/transports/streamable-http.mdx`
//! ("Cancellation": closing the response stream cancels), `basic/transports/stdio.mdx`
//! ("Cancellation", "Unexpected Termination"), and the client guide's "Failure handling".
//!
//! [`Requests`] tracks every request the client has in flight, as a sans-IO state machine:
//!
//! - [`Requests::start`] takes a method, its `params` (already carrying `_meta`) and
//!   [`CallOptions`], and emits [`Output::Send`] with a fresh id from the caller's [`IdSource`].
//! - Every attempt has a deadline: `timeout` (default 60 s) after it was sent. With
//!   `reset_on_progress`, a `notifications/progress` for the request's `progressToken` whose
//!   `progress` increased pushes the deadline to `now + timeout`; no deadline ever passes
//!   `max_total` after the first send ("implementations SHOULD always enforce a maximum timeout,
//!   regardless of progress notifications").
//! - Cancelling (by the host, or because the deadline passed) is [`Output::CloseStream`] on
//!   Streamable HTTP (preceded by [`Output::CancelNotice`], the `notifications/cancelled` a
//!   legacy-era session POSTs as well) and [`Output::Notify`] with `notifications/cancelled`
//!   (the request id and a reason) on stdio. The id is retired: a response that arrives for it later is reported as
//!   [`Event::LateResponseIgnored`] and otherwise dropped.
//! - A broken stream (an HTTP response stream that ended without the final response, a transport
//!   failure, a retryable status, or a stdio server that exited) loses the request: nothing is
//!   resumable. It is resent, as a new request with a NEW id, only when resending cannot repeat
//!   a side effect: the read-only methods of [`is_read_only`], or any request the host marked
//!   [`CallOptions::idempotent`] (a `tools/call` of a tool the host knows to be idempotent; tool
//!   annotations are hints and are not trusted here). Resends are limited in number and wait a
//!   jittered exponential backoff ([`crate::backoff`]) that never runs past `max_total`.
//! - [`classify_response`] sorts a response into [`ResponseKind`]: a complete result, a tool
//!   result with `isError: true` (a successful response: the tool failed, the protocol did not),
//!   an `input_required` result (for [`crate::mcp::mrtr`]), or a JSON-RPC error.
//!
//! Every started request ends with exactly one final event: [`Event::Response`],
//! [`Event::TimedOut`], [`Event::Cancelled`] or [`Event::Failed`].

use crate::time::{Duration, Instant};
use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::ops::Range;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::backoff::{self, Backoff, Jitter};
use crate::jsonrpc::{ErrorObject, Id, Message, MessageError, VERSION};

/// Default time an attempt may take before it is cancelled (60 s).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// Default cap on a request's whole life, resends and progress resets included (10 min).
pub const DEFAULT_MAX_TOTAL: Duration = Duration::from_secs(600);

/// Default number of resends after broken streams (3).
pub const DEFAULT_MAX_RESENDS: u32 = 3;

/// How many retired ids (cancelled, timed out, superseded) are remembered to recognize a late
/// response.
const RETIRED_CAPACITY: usize = 256;

/// How many times an allocator may hand out an id already in use before the request fails.
const ID_ATTEMPTS: usize = 8;

/// The reason sent in `notifications/cancelled` when the host gives none.
pub const DEFAULT_CANCEL_REASON: &str = "Cancelled by the client";

// ---------------------------------------------------------------------------------------------
// Ids and shared wire helpers.

/// Where new JSON-RPC request ids come from: the client's allocator, shared by every module so
/// that no id is reused while outstanding. A closure `FnMut() -> Id` is one.
pub trait IdSource {
    /// A fresh id, not used by any outstanding request.
    fn next_id(&mut self) -> Id;
}

impl<F: FnMut() -> Id> IdSource for F {
    fn next_id(&mut self) -> Id {
        self()
    }
}

/// The client's own allocator as an id source. Its counter only moves forward, and `Requests`
/// and `Subscriptions` track which of their ids are outstanding themselves (and skip any id still
/// in use), so the id is released at once: nothing accumulates for the client's lifetime.
impl IdSource for crate::mcp::meta::IdAllocator {
    fn next_id(&mut self) -> Id {
        let id = self.allocate();
        self.release(&id);
        id
    }
}

/// Draws an id from `ids` that `in_use` does not claim, trying `ID_ATTEMPTS` times; `None`
/// when the source keeps offering ids in use. Shared by [`Requests`] and the subscriptions.
pub(crate) fn draw_fresh_id(ids: &mut dyn IdSource, in_use: impl Fn(&Id) -> bool) -> Option<Id> {
    (0..ID_ATTEMPTS)
        .map(|_| ids.next_id())
        .find(|id| !in_use(id))
}

/// A bounded memory of ids that are no longer live (cancelled, timed out, superseded) and who
/// held them, so a late response for one is recognized and the id is not handed out again while
/// remembered. The oldest are forgotten first; retiring an id twice keeps its first owner.
#[derive(Clone, Debug)]
pub(crate) struct RetiredIds<H> {
    /// The ids and their owners in the order they were retired (the oldest first).
    ids: VecDeque<(Id, H)>,
    /// The same ids with their owners, for lookups that do not scan the whole memory.
    owners: BTreeMap<Id, H>,
    capacity: usize,
}

impl<H: Copy + PartialEq> RetiredIds<H> {
    pub(crate) fn new(capacity: usize) -> Self {
        RetiredIds {
            ids: VecDeque::new(),
            owners: BTreeMap::new(),
            capacity,
        }
    }

    pub(crate) fn retire(&mut self, id: Id, owner: H) {
        if self.owners.contains_key(&id) {
            return;
        }
        if self.ids.len() >= self.capacity {
            if let Some((oldest, _)) = self.ids.pop_front() {
                self.owners.remove(&oldest);
            }
        }
        self.ids.push_back((id.clone(), owner));
        self.owners.insert(id, owner);
    }

    /// Who held `id`, if it is remembered.
    pub(crate) fn owner(&self, id: &Id) -> Option<H> {
        self.owners.get(id).copied()
    }

    /// Whether `owner` held any remembered id.
    pub(crate) fn held_by(&self, owner: H) -> bool {
        // Newest first: the usual question is about a request that just ended.
        self.ids.iter().rev().any(|(_, h)| *h == owner)
    }
}

/// The JSON-RPC transport a request travels on; it decides how a cancellation is signalled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// Streamable HTTP: one response stream per request; closing it cancels the request.
    Http,
    /// stdio (or another shared channel): cancellation is a `notifications/cancelled` message.
    Stdio,
}

/// The text of a `notifications/cancelled` for `request_id` with `reason`
/// (`basic/patterns/cancellation.mdx`, "Cancellation Flow").
pub fn cancelled_notification(request_id: &Id, reason: Option<&str>) -> String {
    #[derive(Serialize)]
    struct Params<'a> {
        #[serde(rename = "requestId")]
        request_id: &'a Id,
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<&'a str>,
    }
    #[derive(Serialize)]
    struct Out<'a> {
        jsonrpc: &'static str,
        method: &'static str,
        params: Params<'a>,
    }
    // Strings and ids always serialize.
    serde_json::to_string(&Out {
        jsonrpc: VERSION,
        method: "notifications/cancelled",
        params: Params { request_id, reason },
    })
    .unwrap_or_default()
}

/// The JSON text of a request (see [`crate::jsonrpc::request_text`]).
#[cfg(test)]
pub(crate) fn request_text(id: &Id, method: &str, params: Option<&RawValue>) -> String {
    crate::jsonrpc::request_text(id, method, params)
}

/// Whether resending `method` after a broken stream cannot repeat a side effect: `tools/list`,
/// `prompts/list`, `resources/list`, `resources/templates/list`, `resources/read`, `prompts/get`
/// and `server/discover`. `tools/call` is not: only the host can vouch that a tool is
/// idempotent ([`CallOptions::idempotent`]).
pub fn is_read_only(method: &str) -> bool {
    matches!(
        method,
        "tools/list"
            | "prompts/list"
            | "resources/list"
            | "resources/templates/list"
            | "resources/read"
            | "prompts/get"
            | "server/discover"
    )
}

// ---------------------------------------------------------------------------------------------
// Classification.

/// What a response says, once the JSON-RPC layer is peeled off.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum ResponseKind {
    /// A complete result (`resultType` `"complete"`, or absent as from an older server).
    Complete,
    /// A complete `tools/call` result with `isError: true`: the tool ran and failed. A successful
    /// response, to be shown to the model; not a protocol error.
    ToolError,
    /// `resultType: "input_required"`: the server needs input before it can finish (MRTR).
    InputRequired,
    /// A JSON-RPC error response.
    Error(ErrorObject),
}

/// A classified response.
#[derive(Clone, Debug, PartialEq)]
pub struct Classified {
    /// The id it answers; `None` for an error with `"id": null` (a request the server could not
    /// read).
    pub id: Option<Id>,
    /// What it says.
    pub kind: ResponseKind,
}

/// Why a text is not a response this client can use.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ClassifyError {
    /// Not a JSON-RPC message at all.
    #[error("not a JSON-RPC message: {0}")]
    NotJsonRpc(#[from] MessageError),
    /// A request or a notification, where a response was expected.
    #[error("expected a response, got a {0}")]
    NotAResponse(&'static str),
    /// The `result` member is not a JSON object.
    #[error("the result is not a JSON object")]
    ResultNotObject,
    /// `resultType` is present but not a string.
    #[error("resultType is not a string")]
    ResultTypeNotString,
    /// `resultType` names a type this client does not know, which the client must treat as
    /// invalid (`basic/index.mdx`).
    #[error("unknown resultType {0:?}")]
    UnknownResultType(String),
    /// `input_required` for a method that may not carry it (`basic/patterns/mrtr.mdx`: only
    /// `tools/call`, `prompts/get` and `resources/read`; "Servers MUST NOT return it for anything
    /// else"). The server is at fault.
    #[error("input_required is not allowed for {0}")]
    InputRequiredNotAllowed(String),
}

#[derive(Deserialize)]
struct ResultHead<'a> {
    #[serde(rename = "resultType", default, borrow)]
    result_type: Option<&'a RawValue>,
    #[serde(rename = "isError", default, borrow)]
    is_error: Option<&'a RawValue>,
}

/// Classifies a result object's text (the `result` member of a response).
///
/// `resultType` absent or `"complete"` is complete, and then `isError: true` makes it a
/// [`ResponseKind::ToolError`]; `"input_required"` is [`ResponseKind::InputRequired`]; any other
/// `resultType` is an error ([`ClassifyError::UnknownResultType`]).
pub fn classify_result(result: &str) -> Result<ResponseKind, ClassifyError> {
    if !result.trim_start().starts_with('{') {
        return Err(ClassifyError::ResultNotObject);
    }
    let head: ResultHead<'_> =
        serde_json::from_str(result).map_err(|_| ClassifyError::ResultNotObject)?;
    kind_of(
        head.result_type.map(RawValue::get),
        head.is_error.map(RawValue::get),
    )
}

/// [`classify_result`] of a result the JSON parser already read whole (so it is valid JSON):
/// its top-level members are skimmed for `resultType` and `isError` without decoding the rest;
/// what the skim does not settle (an escaped or repeated key) goes to [`classify_result`].
fn classify_checked(result: &RawValue) -> Result<ResponseKind, ClassifyError> {
    match skim_head(result.get()) {
        Some((result_type, is_error)) => kind_of(result_type, is_error),
        None => classify_result(result.get()),
    }
}

/// The raw texts of a result's `resultType` and `isError` (each `None` when absent or `null`,
/// as serde reads an optional member); `None` when `text` is not a JSON object or a key is
/// escaped or one of the two is repeated. `text` must be valid JSON.
fn skim_head(text: &str) -> Option<(Option<&str>, Option<&str>)> {
    let b = text.as_bytes();
    let mut i = skip_ws(b, 0);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    i += 1;
    let mut head: (Skimmed<'_>, Skimmed<'_>) = (None, None);
    i = skip_ws(b, i);
    if b.get(i) == Some(&b'}') {
        return Some(flat(head));
    }
    loop {
        if b.get(i) != Some(&b'"') {
            return None;
        }
        let key_start = i + 1;
        let key_end = key_start
            + b.get(key_start..)?
                .iter()
                .position(|&c| c == b'"' || c == b'\\')?;
        if b.get(key_end) != Some(&b'"') {
            return None; // an escaped key: serde compares it unescaped
        }
        let key = b.get(key_start..key_end)?;
        i = skip_ws(b, key_end + 1);
        if b.get(i) != Some(&b':') {
            return None;
        }
        let value_start = skip_ws(b, i + 1);
        i = skip_value(b, value_start)?;
        let value = text.get(value_start..i)?;
        let value = (value != "null").then_some(value);
        let slot = match key {
            b"resultType" => Some(&mut head.0),
            b"isError" => Some(&mut head.1),
            _ => None,
        };
        if let Some(slot) = slot {
            if slot.is_some() {
                return None; // repeated: serde refuses it
            }
            *slot = Some(value);
        }
        i = skip_ws(b, i);
        match b.get(i)? {
            b',' => i = skip_ws(b, i + 1),
            b'}' => return Some(flat(head)),
            _ => return None,
        }
    }
}

/// A skimmed member: absent (`None`), `null` (`Some(None)`) or its text.
type Skimmed<'a> = Option<Option<&'a str>>;

fn flat<'a>(head: (Skimmed<'a>, Skimmed<'a>)) -> (Option<&'a str>, Option<&'a str>) {
    (head.0.flatten(), head.1.flatten())
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while b
        .get(i)
        .is_some_and(|c| matches!(c, b' ' | b'\t' | b'\n' | b'\r'))
    {
        i += 1;
    }
    i
}

/// The end of the string starting at `i` (its opening quote).
fn skip_string(b: &[u8], i: usize) -> Option<usize> {
    let mut j = i + 1;
    loop {
        j += b.get(j..)?.iter().position(|&c| c == b'"' || c == b'\\')?;
        if b.get(j) == Some(&b'"') {
            return Some(j + 1);
        }
        j += 2; // an escape: its next byte is never a closing quote
    }
}

/// The end of the JSON value starting at `i` (valid JSON).
fn skip_value(b: &[u8], i: usize) -> Option<usize> {
    match b.get(i)? {
        b'"' => skip_string(b, i),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut j = i;
            loop {
                match b.get(j)? {
                    b'"' => {
                        j = skip_string(b, j)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth = depth.checked_sub(1)?;
                        if depth == 0 {
                            return Some(j + 1);
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
        }
        _ => {
            let mut j = i;
            while b
                .get(j)
                .is_some_and(|c| !matches!(c, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'))
            {
                j += 1;
            }
            Some(j)
        }
    }
}

/// What a result is, from its `resultType` and `isError` texts.
fn kind_of(
    result_type: Option<&str>,
    is_error: Option<&str>,
) -> Result<ResponseKind, ClassifyError> {
    let result_type = match result_type {
        None => None,
        // The known types, written without escapes, need no decoding.
        Some("\"complete\"") => Some(std::borrow::Cow::Borrowed("complete")),
        Some("\"input_required\"") => Some(std::borrow::Cow::Borrowed("input_required")),
        Some(raw) => Some(std::borrow::Cow::Owned(
            serde_json::from_str::<String>(raw).map_err(|_| ClassifyError::ResultTypeNotString)?,
        )),
    };
    match result_type.as_deref() {
        None | Some("complete") => {
            if is_error == Some("true") {
                Ok(ResponseKind::ToolError)
            } else {
                Ok(ResponseKind::Complete)
            }
        }
        Some("input_required") => Ok(ResponseKind::InputRequired),
        Some(other) => Err(ClassifyError::UnknownResultType(other.to_owned())),
    }
}

/// Classifies the text of one JSON-RPC message that should be a response: result, tool error
/// result, `input_required`, or JSON-RPC error.
pub fn classify_response(message: &str) -> Result<Classified, ClassifyError> {
    classify_message(Message::parse(message)?)
}

/// [`classify_response`] of a parsed message.
fn classify_message(message: Message<'_>) -> Result<Classified, ClassifyError> {
    match message {
        Message::Response { id, result } => Ok(Classified {
            id: Some(id),
            kind: classify_checked(result)?,
        }),
        Message::Error { id, error } => Ok(Classified {
            id,
            kind: ResponseKind::Error(error),
        }),
        Message::Request { .. } => Err(ClassifyError::NotAResponse("request")),
        Message::Notification { .. } => Err(ClassifyError::NotAResponse("notification")),
    }
}

// ---------------------------------------------------------------------------------------------
// Public state-machine types.

/// Per-request options.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallOptions {
    /// How long one attempt may go without its response (default 60 s). Must be positive.
    pub timeout: Duration,
    /// Whether a progress notification whose `progress` increased restarts the timeout clock.
    pub reset_on_progress: bool,
    /// The hard cap on the whole request, counted from its first send, whatever progress or
    /// resends happen (default 10 min).
    pub max_total: Duration,
    /// How many times a broken stream may be resent (default 3; 0 = never).
    pub max_resends: u32,
    /// The backoff between resends (jittered by [`RequestsConfig::jitter_seed`]).
    pub backoff: Backoff,
    /// The host vouches that repeating this request has no side effect (for `tools/call`: the
    /// tool is idempotent). Read-only methods ([`is_read_only`]) are resendable without it.
    pub idempotent: bool,
    /// Whether a resendable request whose attempt timed out is cancelled and resent (with a new
    /// id, within the same limits) instead of ending in [`Event::TimedOut`]. Default `false`.
    pub resend_on_timeout: bool,
}

impl Default for CallOptions {
    fn default() -> Self {
        Self {
            timeout: DEFAULT_TIMEOUT,
            reset_on_progress: false,
            max_total: DEFAULT_MAX_TOTAL,
            max_resends: DEFAULT_MAX_RESENDS,
            backoff: Backoff::default(),
            idempotent: false,
            resend_on_timeout: false,
        }
    }
}

/// The tracker's configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestsConfig {
    /// How cancellation is signalled.
    pub transport: Transport,
    /// The seed of the jitter source (the caller draws it from its own randomness).
    pub jitter_seed: u64,
}

/// The tracker's handle for one request, stable across its resends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestHandle(pub u64);

/// How an HTTP attempt failed, as the driver saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct StreamFailure {
    /// The HTTP status, `None` for a transport failure (connect, reset, read error).
    pub status: Option<u16>,
    /// A parsed and capped `Retry-After`, added to the backoff before a resend.
    pub retry_after: Option<Duration>,
}

/// An output of [`Requests`].
#[derive(Clone, PartialEq)]
pub enum Output {
    /// Send this request. HTTP: POST it and feed what its response carries to
    /// [`Requests::handle_stream_message`] / [`Requests::handle_stream_end`] /
    /// [`Requests::handle_stream_failed`]. stdio: write it as one line and feed what the server
    /// writes to [`Requests::handle_channel_message`].
    Send {
        /// The request.
        req: RequestHandle,
        /// The attempt's id (new for every attempt).
        id: Id,
        /// The method (for `Mcp-Method` and friends).
        method: String,
        /// The JSON-RPC request text.
        body: String,
        /// 1 for the first send, 2 for the first resend, ...
        attempt: u32,
    },
    /// HTTP: close this attempt's response stream; it cancels the request if it is still
    /// running, or releases the connection after the final response.
    CloseStream {
        /// The request.
        req: RequestHandle,
        /// The attempt's id.
        id: Id,
    },
    /// stdio: write this notification (`notifications/cancelled`).
    Notify {
        /// The notification's JSON text.
        body: String,
    },
    /// HTTP: the attempt `id` was cancelled (its [`Output::CloseStream`] follows). In
    /// `2026-07-28` closing the stream is the cancellation and this needs nothing more; in a
    /// `2025-11-25` session it does not cancel ("Disconnection SHOULD NOT be interpreted as the
    /// client cancelling its request. To cancel, the client SHOULD explicitly send an MCP
    /// `CancelledNotification`", legacy `basic/transports.mdx`), so `body` is POSTed too.
    CancelNotice {
        /// The request.
        req: RequestHandle,
        /// The attempt's id.
        id: Id,
        /// The `notifications/cancelled` text for `id`.
        body: String,
    },
    /// Something for the host.
    Event(Event),
}

impl fmt::Debug for Output {
    /// Shows sizes, not bodies: arguments may be private to the user.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Output::Send {
                req,
                id,
                method,
                body,
                attempt,
            } => f
                .debug_struct("Send")
                .field("req", req)
                .field("id", id)
                .field("method", method)
                .field("body_bytes", &body.len())
                .field("attempt", attempt)
                .finish(),
            Output::CloseStream { req, id } => f
                .debug_struct("CloseStream")
                .field("req", req)
                .field("id", id)
                .finish(),
            Output::Notify { body } => f
                .debug_struct("Notify")
                .field("body_bytes", &body.len())
                .finish(),
            Output::CancelNotice { req, id, body } => f
                .debug_struct("CancelNotice")
                .field("req", req)
                .field("id", id)
                .field("body_bytes", &body.len())
                .finish(),
            Output::Event(e) => f.debug_tuple("Event").field(e).finish(),
        }
    }
}

/// Why a request failed without a response.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FailReason {
    /// The stream broke and the request may have side effects, so it is not resent.
    #[error(
        "{} and {method} is not resent automatically (it may have side effects)",
        broke(*last_status)
    )]
    NotResendable {
        /// The method.
        method: String,
        /// The HTTP status of the last attempt's answer, when it was a status without a
        /// JSON-RPC body (`503`, `429`, ...) rather than a broken connection.
        last_status: Option<u16>,
    },
    /// The stream broke and the resend limit is used up (or is 0).
    #[error(
        "{}{}",
        broke(*last_status),
        if *resends == 0 { " before the answer (this request is not resent)".to_owned() }
        else { format!(" and all {resends} resends are used up") }
    )]
    ResendsExhausted {
        /// How many resends were made.
        resends: u32,
        /// As for [`FailReason::NotResendable`].
        last_status: Option<u16>,
    },
    /// The stream broke and the next resend would start after the request's maximum total time.
    #[error("{} and a resend would pass the request's maximum total time", broke(*last_status))]
    MaxTotalReached {
        /// As for [`FailReason::NotResendable`].
        last_status: Option<u16>,
    },
    /// The server answered with an HTTP status that no resend can fix. The message names the
    /// status and, for the ones a user can act on, what to do: a redirect (`3xx`, never followed)
    /// or a request too large (`413`, `431`).
    #[error("the server answered HTTP {status}{hint}", status = .0, hint = status_hint(*.0))]
    HttpStatus(u16),
    /// The final response could not be used.
    #[error("unusable response: {0}")]
    Protocol(ClassifyError),
    /// The id allocator kept handing out ids already in use.
    #[error("the id allocator returned ids that are already in use")]
    IdInUse,
    /// The server refused the request's credentials (`401`, or `403 insufficient_scope`) and
    /// authorizing did not mend it.
    #[error("the server answered HTTP {status}, and authorization failed: {error}")]
    Unauthorized {
        /// The status.
        status: u16,
        /// Why the authorization failed.
        error: Box<crate::auth::AuthError>,
    },
}

impl FailReason {
    /// The HTTP status of the answer that ended the request, when there was one: the status
    /// itself for [`FailReason::HttpStatus`], the last attempt's for a broken stream.
    pub fn http_status(&self) -> Option<u16> {
        match self {
            FailReason::HttpStatus(s) => Some(*s),
            FailReason::NotResendable { last_status, .. }
            | FailReason::ResendsExhausted { last_status, .. }
            | FailReason::MaxTotalReached { last_status } => *last_status,
            FailReason::Unauthorized { status, .. } => Some(*status),
            FailReason::Protocol(_) | FailReason::IdInUse => None,
        }
    }
}

/// How a broken stream is told: by the status that broke it, when there was one.
fn broke(last_status: Option<u16>) -> String {
    match last_status {
        None => "the stream broke".to_owned(),
        Some(status) => match crate::http::status_text(status) {
            "" => format!("the server answered HTTP {status}"),
            text => format!("the server answered HTTP {status} ({text})"),
        },
    }
}

/// What [`FailReason::HttpStatus`] adds to its status: the reason phrase, and for a request
/// the server found too large, which part.
fn status_hint(status: u16) -> String {
    let hint = match status {
        301 | 302 | 303 | 307 | 308 => {
            ": redirects are not followed, so the request and its credentials go only to the \
             configured URL; connect to the new address if you trust it"
        }
        413 => ": the request is larger than the server accepts",
        431 => {
            ": the request headers are larger than the server accepts \
             (Mcp-Param-* headers, the bearer token and extra headers all count)"
        }
        _ => "",
    };
    match crate::http::status_text(status) {
        "" => hint.to_owned(),
        text => format!(" ({text}){hint}"),
    }
}

/// A fact for the host. Never carries arguments or results except [`Event::Response`]'s message
/// and [`Event::Notification`]'s, which the host asked for.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Event {
    /// The final response (final event).
    Response {
        /// The request.
        req: RequestHandle,
        /// The id it answered.
        id: Id,
        /// What it says.
        kind: ResponseKind,
        /// The whole JSON-RPC message text, for the typed decoding.
        message: String,
    },
    /// The request was cancelled because its deadline passed (final event).
    TimedOut {
        /// The request.
        req: RequestHandle,
        /// The attempt's id.
        id: Id,
        /// Whether it was the `max_total` cap, rather than the per-attempt timeout.
        max_total: bool,
    },
    /// The host's cancellation took effect (final event).
    Cancelled {
        /// The request.
        req: RequestHandle,
        /// The id of the attempt that was in flight, `None` when waiting to resend.
        id: Option<Id>,
    },
    /// The request failed without a response (final event).
    Failed {
        /// The request.
        req: RequestHandle,
        /// Why.
        reason: FailReason,
    },
    /// An attempt was lost and the request will be resent with a new id.
    Resending {
        /// The request.
        req: RequestHandle,
        /// The lost attempt's id (retired).
        lost_id: Id,
        /// The number the next attempt will have.
        next_attempt: u32,
        /// When it will be sent (on stdio, not before the channel is open again).
        at: Instant,
    },
    /// A progress notification for the request whose `progress` increased.
    Progress {
        /// The request.
        req: RequestHandle,
        /// The progress so far.
        progress: f64,
        /// The total, when known.
        total: Option<f64>,
        /// A human-readable message.
        message: Option<String>,
    },
    /// Another notification on the request's HTTP response stream (e.g. `notifications/message`).
    Notification {
        /// The request.
        req: RequestHandle,
        /// Its method.
        method: String,
        /// The whole JSON-RPC message text.
        message: String,
    },
    /// A response arrived for an id that was cancelled, timed out or superseded; dropped
    /// (`cancellation.mdx`: "The client SHOULD ignore any response to the cancelled request").
    LateResponseIgnored {
        /// The request it belonged to.
        req: RequestHandle,
        /// The retired id.
        id: Id,
    },
    /// A message was not used.
    Ignored {
        /// The request whose stream carried it, when known.
        req: Option<RequestHandle>,
        /// Why.
        reason: &'static str,
    },
}

/// Why [`Requests::poll_timeout`] wants to be woken.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TimeoutReason {
    /// An attempt's deadline.
    Deadline {
        /// The request.
        req: RequestHandle,
    },
    /// A resend is due.
    Resend {
        /// The request.
        req: RequestHandle,
    },
}

/// The next instant [`Requests::handle_timeout`] must be called, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Timeout {
    /// When.
    pub at: Instant,
    /// Why.
    pub reason: TimeoutReason,
}

/// Whether [`Requests::handle_channel_message`] used a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Routed {
    /// It belonged to a tracked request (possibly a retired one, then it was dropped).
    Consumed,
    /// It is not about any tracked request; give it to another part of the client.
    NotMine,
}

/// Why a call was refused (the caller broke the API contract).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UsageError {
    /// The handle is unknown or its request has ended (a late report for a cancelled request is
    /// harmless: ignore this error for it).
    #[error("no active request with this handle (unknown or ended)")]
    UnknownHandle,
    /// The method name is empty.
    #[error("the method name is empty")]
    EmptyMethod,
    /// `params` is not a JSON object.
    #[error("params must be a JSON object")]
    ParamsNotObject,
    /// An option is out of range.
    #[error("invalid call options: {0}")]
    InvalidOptions(&'static str),
    /// The id allocator handed out ids already in use.
    #[error("the id allocator returned ids that are already in use")]
    IdInUse,
    /// A stream input arrived on the stdio transport, or a channel input on HTTP.
    #[error("this input does not belong to the configured transport")]
    WrongTransport,
}

// ---------------------------------------------------------------------------------------------
// Internal state.

#[derive(Debug)]
enum Phase {
    /// An attempt is in flight.
    InFlight {
        id: Id,
        deadline: Instant,
        /// Whether `deadline` is the `max_total` cap.
        capped: bool,
    },
    /// Waiting to resend.
    Waiting { at: Instant },
    /// HTTP: refused for want of authorization (`401`, `403 insufficient_scope`) before the
    /// server acted on it; sent again by [`Requests::resume_parked`] once authorized, failed by
    /// [`Requests::fail_parked`], or at the request's maximum total time.
    Parked,
}

#[derive(Debug)]
struct Tracked {
    method: String,
    /// The params' JSON text (an object).
    params: Option<String>,
    options: CallOptions,
    progress_token: Option<Id>,
    last_progress: Option<f64>,
    first_sent: Instant,
    attempt: u32,
    phase: Phase,
    /// The HTTP status of the last attempt that failed with one (no JSON-RPC body).
    last_status: Option<u16>,
    /// Attempts sent again after authorization (not counted as resends).
    auth_resends: u32,
}

impl Tracked {
    fn cap(&self) -> Instant {
        crate::backoff::saturating_add(self.first_sent, self.options.max_total)
    }

    fn resendable(&self) -> bool {
        is_read_only(&self.method) || self.options.idempotent
    }

    /// The deadline of an attempt (re)started at `now`, and whether it is the cap.
    fn deadline_from(&self, now: Instant) -> (Instant, bool) {
        let cap = self.cap();
        match now.checked_add(self.options.timeout) {
            Some(d) if d < cap => (d, false),
            _ => (cap, true),
        }
    }
}

#[derive(Deserialize)]
struct ParamsMeta {
    #[serde(rename = "_meta", default)]
    meta: Option<MetaToken>,
}

#[derive(Deserialize)]
struct MetaToken {
    #[serde(rename = "progressToken", default)]
    progress_token: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct ProgressParams {
    #[serde(rename = "progressToken")]
    progress_token: Id,
    progress: f64,
    #[serde(default)]
    total: Option<f64>,
    #[serde(default)]
    message: Option<String>,
}

/// The text of a request whose `params` is the JSON text `params`: what [`crate::jsonrpc::request_text`] gives
/// for them as a raw value, written without reading them.
fn request_body(id: &Id, method: &str, params: Option<&str>) -> String {
    let mut out = Vec::with_capacity(48 + method.len() + params.map_or(0, str::len));
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    // Ids and strings always serialize.
    let _ = serde_json::to_writer(&mut out, id);
    out.extend_from_slice(br#","method":"#);
    let _ = serde_json::to_writer(&mut out, method);
    if let Some(params) = params {
        out.extend_from_slice(br#","params":"#);
        out.extend_from_slice(params.as_bytes());
    }
    out.push(b'}');
    String::from_utf8(out).unwrap_or_default()
}

/// How many result spans of responses not yet taken by the client are remembered (a host using
/// [`Requests`] alone never takes them).
const MAX_RESULT_SPANS: usize = 8;

/// Where `part`, a slice of `whole` (a value borrowed from its text by the parser), sits in it.
fn span_in(whole: &str, part: &str) -> Option<Range<usize>> {
    let start = (part.as_ptr() as usize).checked_sub(whole.as_ptr() as usize)?;
    let span = start..start.checked_add(part.len())?;
    whole
        .get(span.clone())
        .is_some_and(|s| std::ptr::eq(s.as_ptr(), part.as_ptr()))
        .then_some(span)
}

/// The checks of [`Requests::start`] that come before its params'.
fn check_start(method: &str, options: &CallOptions) -> Result<(), UsageError> {
    if method.is_empty() {
        return Err(UsageError::EmptyMethod);
    }
    if options.timeout.is_zero() {
        return Err(UsageError::InvalidOptions("timeout must be positive"));
    }
    if options.max_total.is_zero() {
        return Err(UsageError::InvalidOptions("max_total must be positive"));
    }
    Ok(())
}

/// Reads `_meta.progressToken` from a request's params (a string or an integer), if any.
fn progress_token_of(params: &RawValue) -> Option<Id> {
    let p: ParamsMeta = serde_json::from_str(params.get()).ok()?;
    let token = p.meta?.progress_token?;
    serde_json::from_value::<Id>(token).ok()
}

/// The tracker of a client's outgoing requests (see the module docs).
#[derive(Debug)]
pub struct Requests {
    config: RequestsConfig,
    jitter: Jitter,
    next_handle: u64,
    active: BTreeMap<RequestHandle, Tracked>,
    retired: RetiredIds<RequestHandle>,
    outputs: VecDeque<Output>,
    /// stdio: whether the channel to the server is open (resends wait for it).
    channel_open: bool,
    /// Where the `result` member sits in the message of each recent [`Event::Response`]
    /// (the newest last, at most [`MAX_RESULT_SPANS`]), so that the client takes the result
    /// without reading the message again ([`Requests::take_result_span`]).
    result_spans: VecDeque<(RequestHandle, Range<usize>)>,
}

impl Requests {
    /// A tracker with nothing in flight.
    pub fn new(config: RequestsConfig) -> Self {
        Self {
            jitter: Jitter::new(config.jitter_seed),
            config,
            next_handle: 0,
            active: BTreeMap::new(),
            retired: RetiredIds::new(RETIRED_CAPACITY),
            outputs: VecDeque::new(),
            channel_open: true,
            result_spans: VecDeque::new(),
        }
    }

    /// Where the `result` member of `req`'s [`Event::Response`] message sits in that message
    /// (`message[span]` is its text), if it is still remembered; forgotten once taken.
    pub(crate) fn take_result_span(&mut self, req: RequestHandle) -> Option<Range<usize>> {
        let at = self.result_spans.iter().rposition(|(r, _)| *r == req)?;
        self.result_spans.remove(at).map(|(_, span)| span)
    }

    /// The configuration.
    pub fn config(&self) -> &RequestsConfig {
        &self.config
    }

    /// How many requests have not ended.
    pub fn in_flight(&self) -> usize {
        self.active.len()
    }

    /// The id of the attempt in flight for `req`, if one is.
    pub fn current_id(&self, req: RequestHandle) -> Option<&Id> {
        match &self.active.get(&req)?.phase {
            Phase::InFlight { id, .. } => Some(id),
            Phase::Waiting { .. } | Phase::Parked => None,
        }
    }

    /// Starts a request: `params` is the JSON object text (with `_meta`, and a
    /// `_meta.progressToken` if the host wants progress), or `None`. Emits [`Output::Send`].
    pub fn start(
        &mut self,
        now: Instant,
        method: &str,
        params: Option<&str>,
        options: CallOptions,
        ids: &mut dyn IdSource,
    ) -> Result<RequestHandle, UsageError> {
        check_start(method, &options)?;
        let params = match params {
            None => None,
            Some(text) => {
                if !text.trim_start().starts_with('{') {
                    return Err(UsageError::ParamsNotObject);
                }
                let raw: Box<RawValue> =
                    serde_json::from_str(text).map_err(|_| UsageError::ParamsNotObject)?;
                Some(raw)
            }
        };
        let progress_token = params.as_deref().and_then(progress_token_of);
        let params = params.map(|raw| Box::<str>::from(raw).into_string());
        self.start_checked(now, method, params, progress_token, options, ids)
    }

    /// [`Requests::start`] for params the caller wrote itself as a JSON object (valid JSON by
    /// construction, so it is not read again): `progress_token` is the `_meta.progressToken`
    /// those params carry.
    pub(crate) fn start_raw(
        &mut self,
        now: Instant,
        method: &str,
        params: Option<String>,
        progress_token: Option<Id>,
        options: CallOptions,
        ids: &mut dyn IdSource,
    ) -> Result<RequestHandle, UsageError> {
        check_start(method, &options)?;
        if params
            .as_deref()
            .is_some_and(|p| !p.trim_start().starts_with('{'))
        {
            return Err(UsageError::ParamsNotObject);
        }
        self.start_checked(now, method, params, progress_token, options, ids)
    }

    fn start_checked(
        &mut self,
        now: Instant,
        method: &str,
        params: Option<String>,
        progress_token: Option<Id>,
        options: CallOptions,
        ids: &mut dyn IdSource,
    ) -> Result<RequestHandle, UsageError> {
        let id = self.fresh_id(ids).ok_or(UsageError::IdInUse)?;
        let req = RequestHandle(self.next_handle);
        self.next_handle += 1;
        let mut tracked = Tracked {
            method: method.to_owned(),
            params,
            options,
            progress_token,
            last_progress: None,
            first_sent: now,
            attempt: 0,
            phase: Phase::Waiting { at: now },
            last_status: None,
            auth_resends: 0,
        };
        self.send_attempt(now, req, &mut tracked, id);
        self.active.insert(req, tracked);
        Ok(req)
    }

    /// The host cancels `req` with an optional reason (sent on stdio). Emits the cancellation
    /// output and [`Event::Cancelled`].
    pub fn cancel(
        &mut self,
        _now: Instant,
        req: RequestHandle,
        reason: Option<&str>,
    ) -> Result<(), UsageError> {
        let tracked = self.active.remove(&req).ok_or(UsageError::UnknownHandle)?;
        let id = match tracked.phase {
            Phase::InFlight { id, .. } => {
                self.cancel_attempt(req, &id, reason.unwrap_or(DEFAULT_CANCEL_REASON));
                Some(id)
            }
            Phase::Waiting { .. } | Phase::Parked => None,
        };
        self.event(Event::Cancelled { req, id });
        Ok(())
    }

    // -----------------------------------------------------------------------------------------
    // Outputs.

    /// The next output, or `None` when there is nothing to do until the next input or timeout.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.outputs.pop_front()
    }

    /// The next instant [`Requests::handle_timeout`] must be called, and why.
    pub fn poll_timeout(&self) -> Option<Timeout> {
        let mut best: Option<Timeout> = None;
        for (&req, t) in &self.active {
            let (at, reason) = match t.phase {
                Phase::InFlight { deadline, .. } => (deadline, TimeoutReason::Deadline { req }),
                Phase::Waiting { at } => {
                    if self.config.transport == Transport::Stdio && !self.channel_open {
                        continue;
                    }
                    (at, TimeoutReason::Resend { req })
                }
                Phase::Parked => (t.cap(), TimeoutReason::Deadline { req }),
            };
            if best.as_ref().is_none_or(|b| at < b.at) {
                best = Some(Timeout { at, reason });
            }
        }
        best
    }

    // -----------------------------------------------------------------------------------------
    // Inputs.

    /// Time passed: cancel attempts whose deadline passed, send due resends (with ids from
    /// `ids`). Calling it early or twice is harmless.
    pub fn handle_timeout(&mut self, now: Instant, ids: &mut dyn IdSource) {
        let handles: Vec<RequestHandle> = self.active.keys().copied().collect();
        for req in handles {
            let Some(mut t) = self.active.remove(&req) else {
                continue;
            };
            let keep = match &t.phase {
                Phase::InFlight {
                    id,
                    deadline,
                    capped,
                } if *deadline <= now => {
                    let (id, capped) = (id.clone(), *capped);
                    let secs = t.options.timeout.as_secs();
                    let reason = if capped {
                        "Request exceeded its maximum total time".to_owned()
                    } else {
                        format!("Request timed out after {secs} s")
                    };
                    self.cancel_attempt(req, &id, &reason);
                    if t.options.resend_on_timeout && t.resendable() && !capped {
                        self.lost(now, req, &mut t, id, None)
                    } else {
                        self.event(Event::TimedOut {
                            req,
                            id,
                            max_total: capped,
                        });
                        false
                    }
                }
                Phase::Waiting { at }
                    if *at <= now
                        && (self.config.transport == Transport::Http || self.channel_open) =>
                {
                    if now >= t.cap() {
                        self.event(Event::Failed {
                            req,
                            reason: FailReason::MaxTotalReached {
                                last_status: t.last_status,
                            },
                        });
                        false
                    } else {
                        match self.fresh_id(ids) {
                            Some(id) => {
                                self.send_attempt(now, req, &mut t, id);
                                true
                            }
                            None => {
                                self.event(Event::Failed {
                                    req,
                                    reason: FailReason::IdInUse,
                                });
                                false
                            }
                        }
                    }
                }
                Phase::Parked if now >= t.cap() => {
                    self.event(Event::Failed {
                        req,
                        reason: FailReason::MaxTotalReached {
                            last_status: t.last_status,
                        },
                    });
                    false
                }
                _ => true,
            };
            if keep {
                self.active.insert(req, t);
            }
        }
    }

    /// HTTP: `req`'s attempt was refused for want of authorization (`401`, or `403` with
    /// `insufficient_scope`): the server did not act on it, so it is sent again, whatever its
    /// method, once [`Requests::resume_parked`] is called (a resend that does not count
    /// against [`CallOptions::max_resends`]). `status` is kept for the error if it fails.
    pub fn handle_stream_unauthorized(
        &mut self,
        req: RequestHandle,
        status: u16,
    ) -> Result<(), UsageError> {
        if self.config.transport != Transport::Http {
            return Err(UsageError::WrongTransport);
        }
        let Some(t) = self.active.get_mut(&req) else {
            if self.retired.held_by(req) {
                return Ok(());
            }
            return Err(UsageError::UnknownHandle);
        };
        let Phase::InFlight { id, .. } = &t.phase else {
            return Ok(());
        };
        let id = id.clone();
        t.last_status = Some(status);
        t.auth_resends += 1;
        t.phase = Phase::Parked;
        self.retire(id, req);
        Ok(())
    }

    /// Whether any request waits for authorization.
    pub fn has_parked(&self) -> bool {
        self.active
            .values()
            .any(|t| matches!(t.phase, Phase::Parked))
    }

    /// The requests waiting for authorization.
    fn parked(&self) -> Vec<RequestHandle> {
        self.active
            .iter()
            .filter(|(_, t)| matches!(t.phase, Phase::Parked))
            .map(|(r, _)| *r)
            .collect()
    }

    /// Authorization succeeded: every parked request is sent again (with new ids from `ids`).
    pub fn resume_parked(&mut self, now: Instant, ids: &mut dyn IdSource) {
        for req in self.parked() {
            let Some(mut t) = self.active.remove(&req) else {
                continue;
            };
            match self.fresh_id(ids) {
                Some(id) => {
                    self.send_attempt(now, req, &mut t, id);
                    self.active.insert(req, t);
                }
                None => self.event(Event::Failed {
                    req,
                    reason: FailReason::IdInUse,
                }),
            }
        }
    }

    /// Authorization failed: every parked request fails with `error`.
    pub fn fail_parked(&mut self, error: &crate::auth::AuthError) {
        for req in self.parked() {
            if let Some(t) = self.active.remove(&req) {
                self.event(Event::Failed {
                    req,
                    reason: FailReason::Unauthorized {
                        status: t.last_status.unwrap_or(401),
                        error: Box::new(error.clone()),
                    },
                });
            }
        }
    }

    /// HTTP: one JSON-RPC message from `req`'s response stream (a JSON body, or one SSE event's
    /// data).
    pub fn handle_stream_message(
        &mut self,
        now: Instant,
        req: RequestHandle,
        message: &str,
    ) -> Result<(), UsageError> {
        self.stream_message(now, req, message, || Message::parse(message))
    }

    /// [`Requests::handle_stream_message`] with the message parsed by the caller (`parse` gives
    /// it when it is needed).
    pub(crate) fn stream_message<'m>(
        &mut self,
        now: Instant,
        req: RequestHandle,
        message: &'m str,
        parse: impl FnOnce() -> Result<Message<'m>, MessageError>,
    ) -> Result<(), UsageError> {
        if self.config.transport != Transport::Http {
            return Err(UsageError::WrongTransport);
        }
        if !self.active.contains_key(&req) {
            if self.retired.held_by(req) {
                // The stream of a cancelled or ended request: drop quietly, but name responses.
                if let Ok(Message::Response { id, .. } | Message::Error { id: Some(id), .. }) =
                    parse()
                {
                    // Late only if the id was this request's own; anything else is just ignored.
                    if self.is_retired(&id) == Some(req) {
                        self.event(Event::LateResponseIgnored { req, id });
                    } else {
                        self.event(Event::Ignored {
                            req: Some(req),
                            reason: "a response for another id on this request's stream",
                        });
                    }
                }
                return Ok(());
            }
            return Err(UsageError::UnknownHandle);
        }
        let parsed = match parse() {
            Ok(m) => m,
            Err(_) => {
                self.event(Event::Ignored {
                    req: Some(req),
                    reason: "not a JSON-RPC message",
                });
                return Ok(());
            }
        };
        match parsed {
            Message::Response { ref id, .. }
            | Message::Error {
                id: Some(ref id), ..
            } => {
                if self.current_id(req) == Some(id) {
                    let id = id.clone();
                    self.finish_with_response(req, id, message, parsed);
                } else if self.is_retired(id) == Some(req) {
                    self.event(Event::LateResponseIgnored {
                        req,
                        id: id.clone(),
                    });
                } else {
                    self.event(Event::Ignored {
                        req: Some(req),
                        reason: "a response for another id on this request's stream",
                    });
                }
            }
            Message::Error { id: None, error } => {
                // The server could not read the request: that is this request's answer.
                if let Some(id) = self.current_id(req).cloned() {
                    self.finish(
                        req,
                        Event::Response {
                            req,
                            id,
                            kind: ResponseKind::Error(error),
                            message: message.to_owned(),
                        },
                    );
                }
            }
            Message::Notification { method, params } => {
                if method == "notifications/progress" {
                    self.progress(now, req, params);
                } else {
                    self.event(Event::Notification {
                        req,
                        method,
                        message: message.to_owned(),
                    });
                }
            }
            Message::Request { .. } => self.event(Event::Ignored {
                req: Some(req),
                reason: "a server request on a response stream (not allowed in 2026-07-28)",
            }),
        }
        Ok(())
    }

    /// HTTP: `req`'s response stream ended. Before the final response, that is a broken stream.
    pub fn handle_stream_end(
        &mut self,
        now: Instant,
        req: RequestHandle,
    ) -> Result<(), UsageError> {
        self.handle_stream_failed(now, req, StreamFailure::default())
    }

    /// HTTP: `req`'s attempt failed: a transport failure (`status: None`) or a status without a
    /// JSON-RPC body. `None`, 408, 429, 500, 502, 503 and 504 are a broken stream (resent when
    /// allowed, after `retry_after` plus backoff); other statuses end the request.
    pub fn handle_stream_failed(
        &mut self,
        now: Instant,
        req: RequestHandle,
        failure: StreamFailure,
    ) -> Result<(), UsageError> {
        if self.config.transport != Transport::Http {
            return Err(UsageError::WrongTransport);
        }
        let Some(mut t) = self.active.remove(&req) else {
            if self.retired.held_by(req) {
                return Ok(());
            }
            return Err(UsageError::UnknownHandle);
        };
        let Phase::InFlight { id, .. } = &t.phase else {
            // Waiting to resend: the old attempt is already counted as lost.
            self.active.insert(req, t);
            return Ok(());
        };
        let id = id.clone();
        if failure.status.is_some() {
            t.last_status = failure.status;
        }
        let keep = match failure.status {
            None | Some(408 | 429 | 500 | 502 | 503 | 504) => {
                self.lost(now, req, &mut t, id, failure.retry_after)
            }
            Some(status) => {
                self.retire(id, req);
                self.event(Event::Failed {
                    req,
                    reason: FailReason::HttpStatus(status),
                });
                false
            }
        };
        if keep {
            self.active.insert(req, t);
        }
        Ok(())
    }

    /// stdio: one message the server wrote. Responses to tracked ids and progress for tracked
    /// tokens are used; a response to a retired id is dropped as late; the rest is
    /// [`Routed::NotMine`].
    pub fn handle_channel_message(&mut self, now: Instant, message: &str) -> Routed {
        let Ok(parsed) = Message::parse(message) else {
            return Routed::NotMine;
        };
        self.channel_message(now, message, parsed)
    }

    /// [`Requests::handle_channel_message`] with `message` already parsed by the caller.
    pub(crate) fn channel_message(
        &mut self,
        now: Instant,
        message: &str,
        parsed: Message<'_>,
    ) -> Routed {
        match parsed {
            Message::Response { ref id, .. }
            | Message::Error {
                id: Some(ref id), ..
            } => {
                if let Some(req) = self.owner_of(id) {
                    let id = id.clone();
                    self.finish_with_response(req, id, message, parsed);
                    Routed::Consumed
                } else if let Some(req) = self.is_retired(id) {
                    self.event(Event::LateResponseIgnored {
                        req,
                        id: id.clone(),
                    });
                    Routed::Consumed
                } else {
                    Routed::NotMine
                }
            }
            Message::Notification { method, params } if method == "notifications/progress" => {
                let token = params
                    .and_then(|p| serde_json::from_str::<ProgressParams>(p.get()).ok())
                    .map(|p| p.progress_token);
                let owner = token.and_then(|tok| {
                    self.active
                        .iter()
                        .find(|(_, t)| {
                            matches!(t.phase, Phase::InFlight { .. })
                                && t.progress_token.as_ref() == Some(&tok)
                        })
                        .map(|(&r, _)| r)
                });
                match owner {
                    Some(req) => {
                        self.progress(now, req, params);
                        Routed::Consumed
                    }
                    None => Routed::NotMine,
                }
            }
            _ => Routed::NotMine,
        }
    }

    /// stdio: the channel closed (the server exited). Every attempt in flight is lost; resendable
    /// requests wait for [`Requests::handle_channel_open`] and their backoff.
    pub fn handle_channel_closed(&mut self, now: Instant) {
        self.channel_open = false;
        let handles: Vec<RequestHandle> = self.active.keys().copied().collect();
        for req in handles {
            let Some(mut t) = self.active.remove(&req) else {
                continue;
            };
            let keep = match &t.phase {
                Phase::InFlight { id, .. } => {
                    let id = id.clone();
                    self.lost(now, req, &mut t, id, None)
                }
                Phase::Waiting { .. } | Phase::Parked => true,
            };
            if keep {
                self.active.insert(req, t);
            }
        }
    }

    /// stdio: the channel is open again (the server was restarted); due resends show up in
    /// [`Requests::poll_timeout`].
    pub fn handle_channel_open(&mut self, _now: Instant) {
        self.channel_open = true;
    }

    // -----------------------------------------------------------------------------------------
    // Internals.

    fn event(&mut self, e: Event) {
        self.outputs.push_back(Output::Event(e));
    }

    fn owner_of(&self, id: &Id) -> Option<RequestHandle> {
        self.active
            .iter()
            .find(|(_, t)| matches!(&t.phase, Phase::InFlight { id: cur, .. } if cur == id))
            .map(|(&r, _)| r)
    }

    fn is_retired(&self, id: &Id) -> Option<RequestHandle> {
        self.retired.owner(id)
    }

    fn retire(&mut self, id: Id, req: RequestHandle) {
        self.retired.retire(id, req);
    }

    /// An id from `ids` that no tracked or retired attempt uses.
    fn fresh_id(&self, ids: &mut dyn IdSource) -> Option<Id> {
        draw_fresh_id(ids, |id| {
            self.owner_of(id).is_some() || self.is_retired(id).is_some()
        })
    }

    fn send_attempt(&mut self, now: Instant, req: RequestHandle, t: &mut Tracked, id: Id) {
        t.attempt += 1;
        t.last_progress = None;
        let (deadline, capped) = t.deadline_from(now);
        let body = request_body(&id, &t.method, t.params.as_deref());
        self.outputs.push_back(Output::Send {
            req,
            id: id.clone(),
            method: t.method.clone(),
            body,
            attempt: t.attempt,
        });
        t.phase = Phase::InFlight {
            id,
            deadline,
            capped,
        };
    }

    /// Signals the cancellation of the attempt `id` and retires it.
    fn cancel_attempt(&mut self, req: RequestHandle, id: &Id, reason: &str) {
        let body = cancelled_notification(id, Some(reason));
        match self.config.transport {
            Transport::Http => {
                self.outputs.push_back(Output::CancelNotice {
                    req,
                    id: id.clone(),
                    body,
                });
                self.outputs.push_back(Output::CloseStream {
                    req,
                    id: id.clone(),
                });
            }
            Transport::Stdio => self.outputs.push_back(Output::Notify { body }),
        }
        self.retire(id.clone(), req);
    }

    /// The attempt `id` is lost: schedule a resend if allowed (returns `true`: keep tracking),
    /// or fail the request (returns `false`).
    fn lost(
        &mut self,
        now: Instant,
        req: RequestHandle,
        t: &mut Tracked,
        id: Id,
        retry_after: Option<Duration>,
    ) -> bool {
        if self.is_retired(&id).is_none() {
            self.retire(id.clone(), req);
        }
        let resends = t.attempt.saturating_sub(1).saturating_sub(t.auth_resends);
        let reason = if !t.resendable() {
            Some(FailReason::NotResendable {
                method: t.method.clone(),
                last_status: t.last_status,
            })
        } else if resends >= t.options.max_resends {
            Some(FailReason::ResendsExhausted {
                resends,
                last_status: t.last_status,
            })
        } else {
            None
        };
        if let Some(reason) = reason {
            self.event(Event::Failed { req, reason });
            return false;
        }
        let at = backoff::next_attempt(
            &t.options.backoff,
            now,
            resends + 1,
            self.jitter.next_u64(),
            retry_after,
            Some(t.cap()),
        );
        match at {
            Some(at) if at < t.cap() => {
                t.phase = Phase::Waiting { at };
                self.event(Event::Resending {
                    req,
                    lost_id: id,
                    next_attempt: t.attempt + 1,
                    at,
                });
                true
            }
            _ => {
                self.event(Event::Failed {
                    req,
                    reason: FailReason::MaxTotalReached {
                        last_status: t.last_status,
                    },
                });
                false
            }
        }
    }

    fn finish(&mut self, req: RequestHandle, event: Event) {
        if let Some(t) = self.active.remove(&req) {
            if let Phase::InFlight { id, .. } = t.phase {
                if self.config.transport == Transport::Http {
                    self.outputs.push_back(Output::CloseStream {
                        req,
                        id: id.clone(),
                    });
                }
                self.retire(id, req);
            }
        }
        self.event(event);
    }

    /// `message` (parsed as `parsed`) is `req`'s final response.
    fn finish_with_response(
        &mut self,
        req: RequestHandle,
        id: Id,
        message: &str,
        parsed: Message<'_>,
    ) {
        let method = self
            .active
            .get(&req)
            .map(|t| t.method.clone())
            .unwrap_or_default();
        if let Message::Response { result, .. } = &parsed {
            if let Some(span) = span_in(message, result.get()) {
                if self.result_spans.len() >= MAX_RESULT_SPANS {
                    self.result_spans.pop_front();
                }
                self.result_spans.push_back((req, span));
            }
        }
        let event = match classify_message(parsed) {
            Ok(c)
                if c.kind == ResponseKind::InputRequired
                    && !crate::mcp::mrtr::input_required_allowed(&method) =>
            {
                Event::Failed {
                    req,
                    reason: FailReason::Protocol(ClassifyError::InputRequiredNotAllowed(method)),
                }
            }
            Ok(c) => Event::Response {
                req,
                id,
                kind: c.kind,
                message: message.to_owned(),
            },
            Err(e) => Event::Failed {
                req,
                reason: FailReason::Protocol(e),
            },
        };
        self.finish(req, event);
    }

    fn progress(&mut self, now: Instant, req: RequestHandle, params: Option<&RawValue>) {
        let Some(p) = params.and_then(|p| serde_json::from_str::<ProgressParams>(p.get()).ok())
        else {
            self.event(Event::Ignored {
                req: Some(req),
                reason: "malformed progress notification",
            });
            return;
        };
        let Some(t) = self.active.get_mut(&req) else {
            return;
        };
        if t.progress_token.as_ref() != Some(&p.progress_token) {
            self.event(Event::Ignored {
                req: Some(req),
                reason: "progress for a token this request did not send",
            });
            return;
        }
        if !p.progress.is_finite() || t.last_progress.is_some_and(|last| p.progress <= last) {
            self.event(Event::Ignored {
                req: Some(req),
                reason: "progress did not increase",
            });
            return;
        }
        t.last_progress = Some(p.progress);
        if t.options.reset_on_progress {
            let (new_deadline, new_capped) = t.deadline_from(now);
            if let Phase::InFlight {
                deadline, capped, ..
            } = &mut t.phase
            {
                if new_deadline > *deadline {
                    *deadline = new_deadline;
                    *capped = new_capped;
                }
            }
        }
        self.event(Event::Progress {
            req,
            progress: p.progress,
            total: p.total,
            message: p.message,
        });
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// `server/tools.mdx` via the schema's `CallToolResult.isError`: a tool's own failure comes
    /// back inside a successful response.
    #[test]
    fn is_error_true_is_a_tool_result_not_a_protocol_error() {
        let text = include_str!(
            "../../../fixtures/mcp/examples/CallToolResult-invalid-tool-input-error.json"
        );
        assert_eq!(classify_result(text), Ok(ResponseKind::ToolError));
        let message = format!(r#"{{"jsonrpc":"2.0","id":3,"result":{text}}}"#);
        assert_eq!(
            classify_response(&message),
            Ok(Classified {
                id: Some(Id::Number(3)),
                kind: ResponseKind::ToolError
            })
        );
    }

    /// `CallToolResult.isError`: "If not set, this is assumed to be false".
    #[test]
    fn is_error_false_or_absent_is_a_complete_result() {
        let text = include_str!(
            "../../../fixtures/mcp/examples/CallToolResultResponse-call-tool-result-response.json"
        );
        assert_eq!(
            classify_response(text).unwrap().kind,
            ResponseKind::Complete
        );
        assert_eq!(
            classify_result(r#"{"resultType":"complete","content":[]}"#),
            Ok(ResponseKind::Complete)
        );
        // Only JSON `true` marks a tool error.
        assert_eq!(
            classify_result(r#"{"content":[],"isError":"true"}"#),
            Ok(ResponseKind::Complete)
        );
    }

    /// `basic/index.mdx`: "The client MUST treat an absent resultType as complete".
    #[test]
    fn absent_result_type_is_complete() {
        assert_eq!(
            classify_result(r#"{"tools":[]}"#),
            Ok(ResponseKind::Complete)
        );
        assert_eq!(
            classify_result(r#"{"content":[],"isError":true}"#),
            Ok(ResponseKind::ToolError)
        );
    }

    /// `basic/patterns/mrtr.mdx`: `resultType: "input_required"`.
    #[test]
    fn input_required_result_is_classified_as_input_required() {
        let text = include_str!(
            "../../../fixtures/mcp/examples/InputRequiredResult-request-state-only.json"
        );
        assert_eq!(classify_result(text), Ok(ResponseKind::InputRequired));
        // input_required wins over a stray isError.
        assert_eq!(
            classify_result(r#"{"resultType":"input_required","isError":true}"#),
            Ok(ResponseKind::InputRequired)
        );
    }

    /// `basic/index.mdx`: "A resultType the client does not recognise MUST be considered invalid".
    #[test]
    fn unknown_result_type_is_invalid() {
        assert_eq!(
            classify_result(r#"{"resultType":"partial"}"#),
            Err(ClassifyError::UnknownResultType("partial".into()))
        );
        assert_eq!(
            classify_result(r#"{"resultType":7}"#),
            Err(ClassifyError::ResultTypeNotString)
        );
        assert_eq!(classify_result("[1]"), Err(ClassifyError::ResultNotObject));
    }

    /// The schema's `JSONRPCErrorResponse`: an error is a protocol error, kept apart from tool
    /// errors.
    #[test]
    fn json_rpc_error_is_classified_as_error() {
        let text =
            include_str!("../../../fixtures/mcp/examples/HeaderMismatchError-header-mismatch.json");
        let c = classify_response(text).unwrap();
        assert_eq!(c.id, Some(Id::Number(1)));
        assert!(matches!(c.kind, ResponseKind::Error(ref e) if e.code == -32020));
        // `id: null` errors are accepted (digest section 2).
        let c = classify_response(
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#,
        )
        .unwrap();
        assert_eq!(c.id, None);
    }

    /// A notification or request is not a response.
    #[test]
    fn a_notification_is_not_a_response() {
        assert_eq!(
            classify_response(r#"{"jsonrpc":"2.0","method":"notifications/progress"}"#),
            Err(ClassifyError::NotAResponse("notification"))
        );
        assert!(matches!(
            classify_response("not json"),
            Err(ClassifyError::NotJsonRpc(_))
        ));
    }

    /// Client guide, "Failure handling": "automatically retry only read-only calls".
    #[test]
    fn only_read_only_methods_are_resendable_by_default() {
        for m in [
            "tools/list",
            "prompts/list",
            "resources/list",
            "resources/templates/list",
            "resources/read",
            "prompts/get",
            "server/discover",
        ] {
            assert!(is_read_only(m), "{m}");
        }
        for m in [
            "tools/call",
            "completion/complete",
            "subscriptions/listen",
            "",
        ] {
            assert!(!is_read_only(m), "{m}");
        }
    }

    /// `basic/patterns/cancellation.mdx`, "Cancellation Flow": the request id and a reason.
    #[test]
    fn cancelled_notification_carries_the_request_id_and_reason() {
        let text = include_str!(
            "../../../fixtures/mcp/examples/CancelledNotification-user-requested-cancellation.json"
        );
        let expected: serde_json::Value = serde_json::from_str(text).unwrap();
        let ours: serde_json::Value = serde_json::from_str(&cancelled_notification(
            &Id::from("123"),
            Some("User requested cancellation"),
        ))
        .unwrap();
        assert_eq!(ours, expected);
        assert_eq!(
            cancelled_notification(&Id::Number(4), None),
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":4}}"#
        );
    }

    /// `basic/patterns/progress.mdx`: "Progress tokens MUST be a string or integer value".
    #[test]
    fn progress_token_is_read_from_params_meta() {
        let raw: Box<RawValue> =
            serde_json::from_str(r#"{"_meta":{"progressToken":"abc123"}}"#).unwrap();
        assert_eq!(progress_token_of(&raw), Some(Id::from("abc123")));
        let raw: Box<RawValue> = serde_json::from_str(r#"{"_meta":{"progressToken":9}}"#).unwrap();
        assert_eq!(progress_token_of(&raw), Some(Id::Number(9)));
        let raw: Box<RawValue> =
            serde_json::from_str(r#"{"_meta":{"progressToken":1.5}}"#).unwrap();
        assert_eq!(progress_token_of(&raw), None);
        let raw: Box<RawValue> = serde_json::from_str(r#"{"name":"x"}"#).unwrap();
        assert_eq!(progress_token_of(&raw), None);
    }

    /// Internal: a retired id is remembered with its first owner until `capacity` newer ids
    /// pushed it out; the lookup index forgets it with the order.
    #[test]
    fn retired_ids_keep_the_first_owner_and_forget_the_oldest() {
        let mut r = RetiredIds::new(2);
        r.retire(Id::from(1), 'a');
        r.retire(Id::from(1), 'b');
        assert_eq!(r.owner(&Id::from(1)), Some('a'));
        r.retire(Id::from("x"), 'c');
        r.retire(Id::from(3), 'd');
        assert_eq!(r.owner(&Id::from(1)), None);
        assert!(!r.held_by('a'));
        assert_eq!(r.owner(&Id::from("x")), Some('c'));
        assert_eq!(r.owner(&Id::from(3)), Some('d'));
        r.retire(Id::from(1), 'e');
        assert_eq!(r.owner(&Id::from(1)), Some('e'));
        assert_eq!(r.owner(&Id::from("x")), None);
    }

    /// Internal: a span is only given for a slice of the text itself.
    #[test]
    fn result_span_is_found_only_inside_the_message() {
        let message = r#"{"jsonrpc":"2.0","id":1,"result":{"a":1}}"#;
        let Ok(Message::Response { result, .. }) = Message::parse(message) else {
            panic!("a response")
        };
        let span = span_in(message, result.get()).unwrap();
        assert_eq!(&message[span], r#"{"a":1}"#);
        let elsewhere = String::from(r#"{"a":1}"#);
        assert_eq!(span_in(message, &elsewhere), None);
    }

    /// Internal: a request written around its params text is what serializing it gives.
    #[test]
    fn request_body_is_the_serialized_request() {
        let params: Box<RawValue> =
            serde_json::from_str(r#"{"name":"\u00e9\"","arguments":{"a":[1.50,null]}}"#).unwrap();
        for id in [
            Id::from(7),
            Id::from("r-\u{1}\"x"),
            Id::Number(i128::from(u64::MAX) + 1),
        ] {
            for method in ["tools/call", "odd\"method\n"] {
                assert_eq!(
                    request_body(&id, method, Some(params.get())),
                    request_text(&id, method, Some(&params))
                );
                assert_eq!(
                    request_body(&id, method, None),
                    request_text(&id, method, None)
                );
            }
        }
    }

    /// Internal: the skim of a checked result classifies exactly as `classify_result` does,
    /// for these hand-picked shapes (nulls, repeats, escaped keys, nesting, whitespace).
    #[test]
    fn skimmed_classification_matches_the_full_read_on_edge_shapes() {
        for text in [
            r#"{}"#,
            r#" { } "#,
            r#"{"resultType":null,"isError":true}"#,
            r#"{"resultType":"complete","resultType":"complete"}"#,
            r#"{"isError":true,"isError":false}"#,
            r#"{"result\u0054ype":"later"}"#,
            r#"{"a":{"resultType":"later"},"b":["}",{"isError":1}],"isError" : true }"#,
            r#"{"resultType":"input_required","requestState":"x\"}"}"#,
            r#"{"resultType":7}"#,
            r#"{"resultType":"\u0063omplete","isError":  true}"#,
            "{\n  \"isError\": true,\n  \"x\": [1, 2.5e3, -0]\n}",
            r#"{"resultType":"later"}"#,
            r#"{"isError":"true"}"#,
        ] {
            let raw: &RawValue = serde_json::from_str(text).unwrap();
            assert_eq!(classify_checked(raw), classify_result(raw.get()), "{text}");
        }
    }

    mod skim_props {
        use super::*;
        use proptest::prelude::*;
        use serde_json::Value;

        fn value() -> impl Strategy<Value = Value> {
            let leaf = prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::Bool),
                any::<i64>().prop_map(Value::from),
                (-1e6f64..1e6).prop_map(Value::from),
                "[a-z\"\\\\{}\\[\\],: \u{e9}]{0,6}".prop_map(Value::String),
                prop_oneof![Just("complete"), Just("input_required"), Just("later")]
                    .prop_map(|s| Value::String(s.to_owned())),
            ];
            leaf.prop_recursive(3, 24, 4, |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                    prop::collection::btree_map("[a-zT]{1,4}", inner, 0..4)
                        .prop_map(|m| Value::Object(m.into_iter().collect())),
                ]
            })
        }

        fn key() -> impl Strategy<Value = String> {
            prop_oneof![
                Just("resultType".to_owned()),
                Just("isError".to_owned()),
                Just("result\\u0054ype".to_owned()),
                "[a-z]{1,6}",
            ]
        }

        proptest! {
            /// The skim classifies every valid result object as the full read does.
            #[test]
            fn skimmed_classification_matches_the_full_read(
                members in prop::collection::vec((key(), value(), 0usize..3, any::<bool>()), 0..6),
            ) {
                let ws = ["", " ", "\n\t "];
                let body: Vec<String> = members
                    .iter()
                    .map(|(k, v, w, pretty)| {
                        let v = if *pretty {
                            serde_json::to_string_pretty(v).unwrap()
                        } else {
                            v.to_string()
                        };
                        let w = ws[*w];
                        format!("{w}\"{k}\"{w}:{w}{v}{w}")
                    })
                    .collect();
                let text = format!("{{{}}}", body.join(","));
                let raw: &RawValue = serde_json::from_str(&text).unwrap();
                prop_assert_eq!(classify_checked(raw), classify_result(raw.get()), "{}", text);
            }
        }
    }
}

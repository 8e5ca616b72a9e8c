//! The tunnel's JSON shapes (`openapi.json`): the poll envelope and its commands, the response
//! envelope with its four `resp_type`s, the `{"status":"ok"}` acknowledgement and the API error
//! body.
//!
//! Decoding is tolerant where the contract asks for it: unknown members are ignored, `channel`
//! defaults to `main`, an unknown `command_type` decodes to [`CommandKind::Unknown`] (never
//! reinterpreted as JSON-RPC), and a malformed `response_timeout` fails open. Each command of an
//! envelope decodes on its own, so one malformed command never hides the others. The JSON-RPC
//! payload is kept as the exact text received ([`RawValue`]): ids and members are untouched.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::response_timeout::ResponseTimeout;
use crate::http::{HeaderError, Headers};

/// The channel a command belongs to when it names none.
pub const DEFAULT_CHANNEL: &str = "main";

/// Why a poll body or one of its commands could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The body is not a JSON object with a `commands` array.
    #[error("poll response is not a JSON object with a \"commands\" array: {0}")]
    Envelope(String),
    /// A command is not an object, or lacks a string `request_id`.
    #[error("polled command {index} has no usable request_id: {reason}")]
    NoRequestId {
        /// The command's position in the envelope.
        index: usize,
        /// What was wrong.
        reason: String,
    },
    /// A command with a request id is malformed in another member. It carries what could be
    /// read, so the command can be answered by its kind, or dropped when already expired.
    #[error("polled command {:?} is malformed: {}", .0.request_id, .0.reason)]
    Command(Box<MalformedCommand>),
}

/// What could be read of a malformed command (see [`DecodeError::Command`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MalformedCommand {
    /// The opaque request id, so the failure can be correlated and answered.
    pub request_id: String,
    /// The shard token, when it could be read (needed to answer the command).
    pub shard_token: Option<String>,
    /// The channel, when it could be read (`main` otherwise).
    pub channel: String,
    /// The command's `response_timeout`, read like any command's.
    pub response_timeout: ResponseTimeout,
    /// The kind, when it could be read: a `jsonrpc` command whose payload is usable (so the
    /// answer can carry its id), or a `session_termination`; `None` when the payload is not.
    pub kind: Option<CommandKind>,
    /// What was wrong: a fixed text naming the member, never a value from the input.
    pub reason: String,
}

/// The `command_type` discriminator and what it carries.
#[derive(Clone)]
pub enum CommandKind {
    /// `jsonrpc`: the raw JSON-RPC request or notification, exactly as received.
    JsonRpc(Box<RawValue>),
    /// `session_termination`: close the session named by the `Mcp-Session-Id` header.
    SessionTermination,
    /// A command type this client does not know: logged and skipped, never answered.
    Unknown(String),
}

impl PartialEq for CommandKind {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (CommandKind::JsonRpc(a), CommandKind::JsonRpc(b)) => a.get() == b.get(),
            (CommandKind::SessionTermination, CommandKind::SessionTermination) => true,
            (CommandKind::Unknown(a), CommandKind::Unknown(b)) => a == b,
            _ => false,
        }
    }
}

impl Eq for CommandKind {}

impl fmt::Debug for CommandKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // The payload may carry arguments a user considers private; show its size only.
            CommandKind::JsonRpc(raw) => write!(f, "JsonRpc({} bytes)", raw.get().len()),
            CommandKind::SessionTermination => f.write_str("SessionTermination"),
            CommandKind::Unknown(t) => write!(f, "Unknown({t:?})"),
        }
    }
}

/// One command from a poll response.
#[derive(Clone, Debug, PartialEq)]
pub struct PolledCommand {
    /// Opaque correlation id, echoed as `request_id` in every response body.
    pub request_id: String,
    /// Opaque routing token, echoed only in the `X-Tunnel-Shard-Token` header.
    pub shard_token: Option<String>,
    /// The logical MCP channel (`main` when absent, `null` or empty).
    pub channel: String,
    /// The RFC 3339 enqueue time; informational only (never used for deadlines).
    pub created_at: Option<String>,
    /// The command's relative lifetime.
    pub response_timeout: ResponseTimeout,
    /// Headers to apply to the MCP request.
    pub headers: Headers,
    /// What to do.
    pub kind: CommandKind,
}

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    commands: Vec<&'a RawValue>,
}

/// A command's members, each kept as raw JSON so each is judged on its own.
#[derive(Deserialize)]
struct RawCommand<'a> {
    #[serde(default, borrow)]
    request_id: Option<&'a RawValue>,
    #[serde(default, borrow)]
    shard_token: Option<&'a RawValue>,
    #[serde(default, borrow)]
    channel: Option<&'a RawValue>,
    #[serde(default, borrow)]
    created_at: Option<&'a RawValue>,
    #[serde(default, borrow)]
    response_timeout: Option<&'a RawValue>,
    #[serde(default, borrow)]
    headers: Option<&'a RawValue>,
    #[serde(default, borrow)]
    command_type: Option<&'a RawValue>,
    #[serde(default, borrow)]
    jsonrpc: Option<&'a RawValue>,
}

/// The channel of a command: `main` when absent, `null` or empty.
fn channel_or_main(channel: Option<&str>) -> String {
    match channel {
        Some(c) if !c.is_empty() => c.to_owned(),
        _ => DEFAULT_CHANNEL.to_owned(),
    }
}

/// A member that must be a string when present: `Ok(None)` when absent or `null`.
fn text(raw: Option<&RawValue>) -> Result<Option<String>, ()> {
    match raw {
        None => Ok(None),
        Some(r) => serde_json::from_str::<Option<String>>(r.get()).map_err(|_| ()),
    }
}

/// Describes a JSON error without quoting the input (serde's messages can quote values).
fn describe(e: &serde_json::Error) -> String {
    match e.classify() {
        serde_json::error::Category::Syntax => {
            format!("not valid JSON (line {}, column {})", e.line(), e.column())
        }
        serde_json::error::Category::Eof => "truncated JSON".to_owned(),
        serde_json::error::Category::Io | serde_json::error::Category::Data => {
            "not an object with a \"commands\" array".to_owned()
        }
    }
}

/// Decodes a `200` poll body into its commands, one result per command, in order.
///
/// `Err` for the whole body only when it is not `{"commands": [...]}`.
pub fn decode_poll_body(
    body: &[u8],
) -> Result<Vec<Result<PolledCommand, DecodeError>>, DecodeError> {
    // serde reads a struct from a JSON array too; the contract's envelope is an object only.
    if body.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(DecodeError::Envelope("not a JSON object".to_owned()));
    }
    let env: Envelope<'_> =
        serde_json::from_slice(body).map_err(|e| DecodeError::Envelope(describe(&e)))?;
    Ok(env
        .commands
        .iter()
        .enumerate()
        .map(|(i, raw)| decode_command(i, raw))
        .collect())
}

fn decode_command(index: usize, raw: &RawValue) -> Result<PolledCommand, DecodeError> {
    let no_id = |reason: &str| DecodeError::NoRequestId {
        index,
        reason: reason.to_owned(),
    };
    if !raw.get().starts_with('{') {
        return Err(no_id("a command must be a JSON object"));
    }
    let cmd: RawCommand<'_> = serde_json::from_str(raw.get())
        .map_err(|_| no_id("a command must be a JSON object without repeated members"))?;
    let request_id = match text(cmd.request_id) {
        Ok(Some(id)) => id,
        Ok(None) => return Err(no_id("a command needs a \"request_id\"")),
        Err(()) => return Err(no_id("\"request_id\" must be a string")),
    };
    let response_timeout = ResponseTimeout::from_json(cmd.response_timeout);
    let channel = text(cmd.channel);
    let shard_token = text(cmd.shard_token);
    // Dispatch on the discriminator first: an unknown type is skipped whatever else it holds.
    let command_type = match text(cmd.command_type) {
        Ok(t) => t.unwrap_or_else(|| "jsonrpc".to_owned()),
        Err(()) => "(not a string)".to_owned(),
    };
    let known = matches!(command_type.as_str(), "jsonrpc" | "session_termination");
    if !known {
        return Ok(PolledCommand {
            request_id,
            shard_token: shard_token.ok().flatten(),
            channel: channel_or_main(channel.ok().flatten().as_deref()),
            created_at: text(cmd.created_at).ok().flatten(),
            response_timeout,
            headers: Headers::new(),
            kind: CommandKind::Unknown(command_type.chars().take(64).collect()),
        });
    }
    let payload = match (command_type.as_str(), cmd.jsonrpc) {
        ("jsonrpc", Some(p)) if p.get().starts_with('{') => Ok(Some(p.to_owned())),
        ("jsonrpc", Some(_)) => Err("\"jsonrpc\" must be a JSON object"),
        ("jsonrpc", None) => Err("a jsonrpc command needs a \"jsonrpc\" member"),
        _ => Ok(None),
    };
    let kind_read = match &payload {
        Ok(Some(p)) => Some(CommandKind::JsonRpc(p.clone())),
        Ok(None) => Some(CommandKind::SessionTermination),
        Err(_) => None,
    };
    let malformed = |reason: &str| {
        DecodeError::Command(Box::new(MalformedCommand {
            request_id: request_id.clone(),
            shard_token: shard_token.clone().ok().flatten(),
            channel: channel_or_main(channel.clone().ok().flatten().as_deref()),
            response_timeout,
            kind: kind_read.clone(),
            reason: reason.to_owned(),
        }))
    };
    let headers = match cmd.headers {
        None => Headers::new(),
        Some(raw) => match serde_json::from_str::<Option<BTreeMap<String, Vec<String>>>>(raw.get())
        {
            Ok(map) => Headers::from_multimap(map.iter().flatten())
                .map_err(|e: HeaderError| malformed(&e.to_string()))?,
            Err(_) => {
                return Err(malformed(
                    "\"headers\" must map header names to arrays of strings",
                ))
            }
        },
    };
    if shard_token.is_err() {
        return Err(malformed("\"shard_token\" must be a string"));
    }
    if channel.is_err() {
        return Err(malformed("\"channel\" must be a string"));
    }
    let kind = match payload {
        Ok(Some(p)) => CommandKind::JsonRpc(p),
        Ok(None) => CommandKind::SessionTermination,
        Err(reason) => return Err(malformed(reason)),
    };
    Ok(PolledCommand {
        request_id,
        shard_token: shard_token.ok().flatten(),
        channel: channel_or_main(channel.ok().flatten().as_deref()),
        // Informational only: a wrong type is ignored, never grounds to reject the command.
        created_at: text(cmd.created_at).ok().flatten(),
        response_timeout,
        headers,
        kind,
    })
}

/// The `resp_type` discriminator of a response envelope.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RespType {
    /// Terminal JSON-RPC result or error.
    JsonrpcResponse,
    /// Intermediate JSON-RPC notification; does not complete the command.
    JsonrpcNotify,
    /// Terminal acknowledgement of a JSON-RPC notification (no `resp_json`).
    NotifyAck,
    /// Terminal acknowledgement of a closed MCP session (no `resp_json`).
    SessionTerminationResponse,
}

impl RespType {
    /// Whether this response completes its command.
    pub fn is_terminal(self) -> bool {
        !matches!(self, RespType::JsonrpcNotify)
    }

    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            RespType::JsonrpcResponse => "jsonrpc_response",
            RespType::JsonrpcNotify => "jsonrpc_notify",
            RespType::NotifyAck => "notify_ack",
            RespType::SessionTerminationResponse => "session_termination_response",
        }
    }
}

/// The body of `POST /v1/tunnels/{tunnel_id}/response`. Never carries the shard token.
///
/// It decodes too (for a control plane, such as `mcpwire dev control-plane`), with the
/// contract's defaults: `channel` `main`, `resp_headers` empty and `resp_type`
/// `jsonrpc_response` when absent; unknown members are ignored. `resp_json` is kept as the exact
/// text received.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ResponsePayload {
    /// The polled command's request id.
    pub request_id: String,
    /// The polled command's channel.
    #[serde(default = "main_channel")]
    pub channel: String,
    /// The JSON-RPC payload; omitted for acknowledgements.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resp_json: Option<Box<RawValue>>,
    /// Upstream response headers after the allowlist.
    #[serde(default)]
    pub resp_headers: BTreeMap<String, Vec<String>>,
    /// HTTP-style status of the MCP interaction.
    pub resp_code: u16,
    /// The payload discriminator.
    #[serde(default = "jsonrpc_response")]
    pub resp_type: RespType,
}

fn main_channel() -> String {
    DEFAULT_CHANNEL.to_owned()
}

fn jsonrpc_response() -> RespType {
    RespType::JsonrpcResponse
}

impl ResponsePayload {
    /// The compact JSON body.
    pub fn to_json(&self) -> Vec<u8> {
        // A struct of strings, integers, string maps and raw JSON always serializes.
        serde_json::to_vec(self).unwrap_or_default()
    }
}

/// `{"status": "ok"}`, the control plane's acknowledgement of a response POST.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct ResponseAck {
    /// Always `ok` today.
    #[serde(default = "ok")]
    pub status: String,
}

fn ok() -> String {
    "ok".to_owned()
}

/// The control plane's error body: `{"error": {...}}`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct ApiErrorResponse {
    /// The error details.
    pub error: ApiErrorBody,
}

/// The control plane's error details.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct ApiErrorBody {
    /// A human-readable message.
    #[serde(default)]
    pub message: String,
    /// The error category, e.g. `invalid_request_error`.
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    /// The related request parameter.
    #[serde(default)]
    pub param: Option<String>,
    /// A stable tunnel-service code, e.g. `invalid_tunnel_id_format`.
    #[serde(default)]
    pub code: Option<String>,
}

impl ApiErrorResponse {
    /// Reads an error body; `None` when the bytes are not one.
    pub fn parse(body: &[u8]) -> Option<Self> {
        serde_json::from_slice(body).ok()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod object_only_tests {
    use super::*;

    #[test]
    fn an_envelope_written_as_an_array_is_rejected() {
        // serde would read `{commands}` from `[[...]]`; the contract's envelope is an object.
        assert!(matches!(
            decode_poll_body(b"[[ 3e9 ]]"),
            Err(DecodeError::Envelope(_))
        ));
        assert!(matches!(
            decode_poll_body(b" [[]]"),
            Err(DecodeError::Envelope(_))
        ));
        assert!(decode_poll_body(b" {\"commands\":[]}").unwrap().is_empty());
    }

    #[test]
    fn a_command_written_as_an_array_has_no_request_id() {
        let out = decode_poll_body(br#"{"commands":[["r1","s1"]]}"#).unwrap();
        assert!(matches!(
            out[0],
            Err(DecodeError::NoRequestId { index: 0, .. })
        ));
    }

    #[test]
    fn a_response_payload_decodes_with_the_contract_defaults() {
        let p: ResponsePayload =
            serde_json::from_str(r#"{"request_id":"r1","resp_code":204,"extra":1}"#).unwrap();
        assert_eq!(p.channel, DEFAULT_CHANNEL);
        assert!(p.resp_json.is_none() && p.resp_headers.is_empty());
        assert_eq!(p.resp_type, RespType::JsonrpcResponse);
        let body = br#"{"request_id":"r2","channel":"side","resp_json":{"id": 1 ,"b":[]},"resp_code":200,"resp_type":"jsonrpc_notify"}"#;
        let p: ResponsePayload = serde_json::from_slice(body).unwrap();
        assert_eq!(
            p.resp_json.as_deref().map(RawValue::get),
            Some(r#"{"id": 1 ,"b":[]}"#)
        );
        assert_eq!(p.resp_type, RespType::JsonrpcNotify);
        assert!(serde_json::from_str::<ResponsePayload>(r#"{"request_id":"r3"}"#).is_err());
    }

    #[test]
    fn envelope_errors_never_quote_the_body() {
        let err = decode_poll_body(br#"{"commands":"sk-secret"}"#).unwrap_err();
        assert!(!err.to_string().contains("sk-secret"), "{err}");
    }
}

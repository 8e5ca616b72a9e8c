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
    /// A command with a request id is malformed in another member.
    #[error("polled command {request_id:?} is malformed: {reason}")]
    Command {
        /// The opaque request id, so the failure can be correlated and answered.
        request_id: String,
        /// The shard token, when it could be read (needed to answer the command).
        shard_token: Option<String>,
        /// The channel, when it could be read (`main` otherwise).
        channel: String,
        /// What was wrong (names the member, never echoes header values).
        reason: String,
    },
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

#[derive(Deserialize)]
struct RawCommand<'a> {
    request_id: String,
    #[serde(default)]
    shard_token: Option<String>,
    #[serde(default)]
    channel: Option<String>,
    #[serde(default)]
    created_at: Option<String>,
    #[serde(default, borrow)]
    response_timeout: Option<&'a RawValue>,
    #[serde(default)]
    headers: Option<BTreeMap<String, Vec<String>>>,
    #[serde(default)]
    command_type: Option<String>,
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

/// The correlation members alone, read leniently from a command that failed to decode.
#[derive(Deserialize)]
struct Correlation {
    request_id: String,
    #[serde(default)]
    shard_token: Option<serde_json::Value>,
    #[serde(default)]
    channel: Option<serde_json::Value>,
}

impl Correlation {
    fn error(self, reason: String) -> DecodeError {
        let text = |v: Option<serde_json::Value>| match v {
            Some(serde_json::Value::String(s)) => Some(s),
            _ => None,
        };
        DecodeError::Command {
            request_id: self.request_id,
            shard_token: text(self.shard_token),
            channel: channel_or_main(text(self.channel).as_deref()),
            reason,
        }
    }
}

/// Decodes a `200` poll body into its commands, one result per command, in order.
///
/// `Err` for the whole body only when it is not `{"commands": [...]}`.
pub fn decode_poll_body(
    body: &[u8],
) -> Result<Vec<Result<PolledCommand, DecodeError>>, DecodeError> {
    let env: Envelope<'_> =
        serde_json::from_slice(body).map_err(|e| DecodeError::Envelope(e.to_string()))?;
    Ok(env
        .commands
        .iter()
        .enumerate()
        .map(|(i, raw)| decode_command(i, raw))
        .collect())
}

fn decode_command(index: usize, raw: &RawValue) -> Result<PolledCommand, DecodeError> {
    let cmd: RawCommand<'_> = match serde_json::from_str(raw.get()) {
        Ok(c) => c,
        Err(e) => {
            return Err(match serde_json::from_str::<Correlation>(raw.get()) {
                Ok(c) => c.error(e.to_string()),
                Err(_) => DecodeError::NoRequestId {
                    index,
                    reason: e.to_string(),
                },
            })
        }
    };
    let bad = |reason: String| DecodeError::Command {
        request_id: cmd.request_id.clone(),
        shard_token: cmd.shard_token.clone(),
        channel: channel_or_main(cmd.channel.as_deref()),
        reason,
    };
    let headers = match &cmd.headers {
        Some(map) => Headers::from_multimap(map).map_err(|e: HeaderError| bad(e.to_string()))?,
        None => Headers::new(),
    };
    let kind = match cmd.command_type.as_deref().unwrap_or("jsonrpc") {
        "jsonrpc" => match cmd.jsonrpc {
            Some(p) if p.get().starts_with('{') => CommandKind::JsonRpc(p.to_owned()),
            Some(_) => return Err(bad("\"jsonrpc\" must be a JSON object".into())),
            None => return Err(bad("a jsonrpc command needs a \"jsonrpc\" member".into())),
        },
        "session_termination" => CommandKind::SessionTermination,
        other => CommandKind::Unknown(other.chars().take(64).collect()),
    };
    Ok(PolledCommand {
        channel: channel_or_main(cmd.channel.as_deref()),
        request_id: cmd.request_id,
        shard_token: cmd.shard_token,
        created_at: cmd.created_at,
        response_timeout: ResponseTimeout::from_json(cmd.response_timeout),
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
#[derive(Clone, Debug, Serialize)]
pub struct ResponsePayload {
    /// The polled command's request id.
    pub request_id: String,
    /// The polled command's channel.
    pub channel: String,
    /// The JSON-RPC payload; omitted for acknowledgements.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resp_json: Option<Box<RawValue>>,
    /// Upstream response headers after the allowlist.
    pub resp_headers: BTreeMap<String, Vec<String>>,
    /// HTTP-style status of the MCP interaction.
    pub resp_code: u16,
    /// The payload discriminator.
    pub resp_type: RespType,
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

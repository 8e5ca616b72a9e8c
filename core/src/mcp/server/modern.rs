//! The `2026-07-28` era's checks: a request's `_meta` (`basic/index.mdx`, "Request metadata"),
//! the `Mcp-*` HTTP headers against the body (`basic/transports/streamable-http.mdx`, "Request
//! Metadata"), and the `subscriptions/listen` filter (`basic/patterns/subscriptions.mdx`).

use serde_json::{json, Map, Value};

use crate::http::Headers;
use crate::jsonrpc::{code, ErrorObject};
use crate::mcp::headers::{
    decode_param_value, request_headers_for, tool_headers, METHOD_HEADER, NAME_HEADER,
    PROTOCOL_VERSION_HEADER, PROTOCOL_VERSION_META_KEY,
};
use crate::mcp::meta::{
    ClientCapabilities, Implementation, JsonObject, LoggingLevel, CLIENT_CAPABILITIES_KEY,
    CLIENT_INFO_KEY, LOG_LEVEL_KEY,
};
use crate::mcp::results::Tool;

use super::error_object;

/// The protocol version of the modern era.
pub(super) const MODERN_VERSION: &str = "2026-07-28";

/// Methods only the modern era has: a request of one of them without `_meta` is read as a
/// malformed modern request (`-32602`), not as a legacy one without a session.
pub(super) const MODERN_ONLY: [&str; 2] = ["server/discover", "subscriptions/listen"];

/// Methods of the legacy era the modern era removed (`404`, `-32601` there).
pub(super) const REMOVED: [&str; 5] = [
    "initialize",
    "ping",
    "logging/setLevel",
    "resources/subscribe",
    "resources/unsubscribe",
];

/// A checked modern `_meta`.
#[derive(Debug, Clone)]
pub(super) struct ModernMeta {
    pub(super) capabilities: ClientCapabilities,
    pub(super) client_info: Option<Implementation>,
    pub(super) log_level: Option<LoggingLevel>,
    pub(super) meta: JsonObject,
}

/// A rejection: the HTTP status (on HTTP) and the JSON-RPC error.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Refusal {
    pub(super) status: u16,
    pub(super) error: ErrorObject,
}

impl Refusal {
    pub(super) fn new(status: u16, code: i64, message: impl Into<String>) -> Self {
        Refusal {
            status,
            error: error_object(code, message),
        }
    }
}

pub(super) fn mismatch(message: impl std::fmt::Display) -> Refusal {
    Refusal::new(
        400,
        code::HEADER_MISMATCH,
        format!("Header mismatch: {message}"),
    )
}

fn malformed(message: impl Into<String>) -> Refusal {
    Refusal::new(400, code::INVALID_PARAMS, message)
}

/// The one value of header `name`, trimmed of optional whitespace (RFC 9110 section 5.5);
/// sent twice is a mismatch.
pub(super) fn single<'h>(h: &'h Headers, name: &'h str) -> Result<Option<&'h str>, Refusal> {
    let mut all = h.get_all(name);
    match (all.next(), all.next()) {
        (_, Some(_)) => Err(mismatch(format_args!(
            "header {name} is sent more than once"
        ))),
        (v, None) => Ok(v.map(|v| v.trim_matches([' ', '\t']))),
    }
}

/// The versions a `-32022` names and `server/discover` lists.
pub(super) fn unsupported_version(supported: &[String], requested: &Value) -> Refusal {
    Refusal {
        status: 400,
        error: ErrorObject {
            code: code::UNSUPPORTED_PROTOCOL_VERSION,
            message: format!(
                "Unsupported protocol version: this server speaks {}",
                supported.join(", ")
            ),
            data: Some(json!({"supported": supported, "requested": requested})),
        },
    }
}

/// Checks a modern request's `_meta`, in this order: a string protocol version; on HTTP the
/// `MCP-Protocol-Version` header present and equal; the version supported; a
/// `clientCapabilities` object; `clientInfo`, when present, an `Implementation`; `logLevel`,
/// when present, a level.
pub(super) fn check_meta(
    params: &JsonObject,
    headers: Option<&Headers>,
    modern_on: bool,
    supported: &[String],
) -> Result<ModernMeta, Refusal> {
    let meta = match params.get("_meta") {
        Some(Value::Object(m)) => Some(m),
        None => None,
        Some(_) => return Err(malformed("Invalid params: _meta must be an object")),
    };
    let version = meta
        .and_then(|m| m.get(PROTOCOL_VERSION_META_KEY))
        .and_then(Value::as_str)
        .ok_or_else(|| {
            malformed(format!(
                "Invalid params: _meta[\"{PROTOCOL_VERSION_META_KEY}\"] is required and must be a string"
            ))
        })?;
    if let Some(h) = headers {
        match single(h, PROTOCOL_VERSION_HEADER)? {
            None => {
                return Err(mismatch(format_args!(
                    "required header {PROTOCOL_VERSION_HEADER} is missing"
                )))
            }
            Some(v) if v != version => {
                return Err(mismatch(format_args!(
                    "{PROTOCOL_VERSION_HEADER} header value does not match _meta[\"{PROTOCOL_VERSION_META_KEY}\"]"
                )))
            }
            Some(_) => {}
        }
    }
    if version != MODERN_VERSION || !modern_on {
        return Err(unsupported_version(supported, &json!(version)));
    }
    let meta = meta.cloned().unwrap_or_default();
    let capabilities = meta
        .get(CLIENT_CAPABILITIES_KEY)
        .filter(|c| c.is_object())
        .and_then(|c| serde_json::from_value::<ClientCapabilities>(c.clone()).ok())
        .ok_or_else(|| {
            malformed(format!(
                "Invalid params: _meta[\"{CLIENT_CAPABILITIES_KEY}\"] is required and must be a ClientCapabilities object"
            ))
        })?;
    let client_info = match meta.get(CLIENT_INFO_KEY) {
        None => None,
        Some(v) => Some(
            serde_json::from_value::<Implementation>(v.clone()).map_err(|_| {
                malformed(format!(
                    "Invalid params: _meta[\"{CLIENT_INFO_KEY}\"] must be an Implementation (name and version)"
                ))
            })?,
        ),
    };
    let log_level = match meta.get(LOG_LEVEL_KEY) {
        None => None,
        Some(v) => Some(
            serde_json::from_value::<LoggingLevel>(v.clone()).map_err(|_| {
                malformed(format!(
                    "Invalid params: _meta[\"{LOG_LEVEL_KEY}\"] must be a logging level (debug .. emergency)"
                ))
            })?,
        ),
    };
    Ok(ModernMeta {
        capabilities,
        client_info,
        log_level,
        meta,
    })
}

/// Checks `Mcp-Method` and `Mcp-Name` against the body (values compared after decoding;
/// header names are case-insensitive, values case-sensitive).
pub(super) fn check_standard_headers(
    h: &Headers,
    method: &str,
    params: &JsonObject,
) -> Result<(), Refusal> {
    match single(h, METHOD_HEADER)? {
        None => {
            return Err(mismatch(format_args!(
                "required header {METHOD_HEADER} is missing"
            )))
        }
        Some(v) if v != method => {
            return Err(mismatch(format_args!(
                "{METHOD_HEADER} header value does not match the body's method"
            )))
        }
        Some(_) => {}
    }
    let message = json!({"jsonrpc": "2.0", "id": 0, "method": method, "params": params});
    let expected = request_headers_for(&message, None)
        .map_err(|e| malformed(format!("Invalid params: {e}")))?;
    if let Some(want) = expected.get(NAME_HEADER) {
        let got = single(h, NAME_HEADER)?
            .ok_or_else(|| mismatch(format_args!("required header {NAME_HEADER} is missing")))?;
        let got = decode_param_value(got)
            .map_err(|e| mismatch(format_args!("{NAME_HEADER} header value is malformed: {e}")))?;
        if decode_param_value(want).ok().as_deref() != Some(got.as_str()) {
            return Err(mismatch(format_args!(
                "{NAME_HEADER} header value does not match the body"
            )));
        }
    }
    Ok(())
}

/// Checks the `Mcp-Param-*` headers of a `tools/call` of `tool` against its arguments. A tool
/// whose annotations are invalid mirrors nothing (its own server's fault; clients leave it out).
pub(super) fn check_param_headers(
    h: &Headers,
    tool: &Tool,
    arguments: &JsonObject,
) -> Result<(), Refusal> {
    let Ok(annotations) = tool_headers(&tool.name, &Value::Object(tool.input_schema.clone()))
    else {
        return Ok(());
    };
    if annotations.is_empty() {
        return Ok(());
    }
    let arguments = Value::Object(arguments.clone());
    let message = json!({"jsonrpc": "2.0", "id": 0, "method": "tools/call",
        "params": {"name": tool.name, "arguments": arguments}});
    let expected = request_headers_for(&message, Some(&annotations))
        .map_err(|e| malformed(format!("Invalid params: {e}")))?;
    for param in annotations.params() {
        let name = param.header_name();
        let got = single(h, &name)?;
        match (expected.get(&name), got) {
            (None, None) => {}
            (Some(_), None) => {
                return Err(mismatch(format_args!(
                    "header {name} is missing but the body has a value for it"
                )))
            }
            (None, Some(_)) => {
                return Err(mismatch(format_args!(
                    "header {name} is present but the body has no value for it"
                )))
            }
            (Some(want), Some(got)) => {
                let got = decode_param_value(got)
                    .map_err(|e| mismatch(format_args!("{name} header value is malformed: {e}")))?;
                let want = decode_param_value(want).unwrap_or_default();
                let numeric_equal = param
                    .extract(&arguments)
                    .and_then(Value::as_f64)
                    .zip(got.parse::<f64>().ok())
                    .is_some_and(|(a, b)| a == b);
                if got != want && !numeric_equal {
                    return Err(mismatch(format_args!(
                        "{name} header value does not match the body"
                    )));
                }
            }
        }
    }
    Ok(())
}

/// What a `subscriptions/listen` asked for, reduced to what the server honours.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct ListenFilter {
    pub(super) tools: bool,
    pub(super) prompts: bool,
    pub(super) resources: bool,
    pub(super) uris: Vec<String>,
}

impl ListenFilter {
    /// Reads `params.notifications`; `honour` = what the server can deliver: (tools list,
    /// prompts list, resources list, resource updates).
    pub(super) fn read(
        params: &JsonObject,
        honour: (bool, bool, bool, bool),
    ) -> Result<ListenFilter, Refusal> {
        let bad = |m: &str| malformed(format!("Invalid params: notifications.{m}"));
        let n = match params.get("notifications") {
            None | Some(Value::Null) => return Ok(ListenFilter::default()),
            Some(Value::Object(n)) => n,
            Some(_) => return Err(malformed("Invalid params: notifications must be an object")),
        };
        let flag = |key: &str| match n.get(key) {
            None | Some(Value::Null) => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err(bad(&format!("{key} must be a boolean"))),
        };
        let uris = match n.get("resourceSubscriptions") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) => a
                .iter()
                .map(|u| u.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| bad("resourceSubscriptions must be an array of strings"))?,
            Some(_) => return Err(bad("resourceSubscriptions must be an array of strings")),
        };
        Ok(ListenFilter {
            tools: flag("toolsListChanged")? && honour.0,
            prompts: flag("promptsListChanged")? && honour.1,
            resources: flag("resourcesListChanged")? && honour.2,
            uris: if honour.3 { uris } else { Vec::new() },
        })
    }

    /// The acknowledged filter, as `notifications` of the acknowledgment.
    pub(super) fn to_value(&self) -> Value {
        let mut m = Map::new();
        if self.tools {
            m.insert("toolsListChanged".into(), Value::Bool(true));
        }
        if self.prompts {
            m.insert("promptsListChanged".into(), Value::Bool(true));
        }
        if self.resources {
            m.insert("resourcesListChanged".into(), Value::Bool(true));
        }
        if !self.uris.is_empty() {
            m.insert("resourceSubscriptions".into(), json!(self.uris));
        }
        Value::Object(m)
    }
}

/// Reads MRTR retry members: `inputResponses` (an object of objects) and `requestState` (a
/// string); `-32602` for any other shape.
pub(super) fn read_retry(
    params: &JsonObject,
) -> Result<(Option<JsonObject>, Option<String>), Refusal> {
    let responses = match params.get("inputResponses") {
        None => None,
        Some(Value::Object(m)) => {
            if let Some((key, _)) = m.iter().find(|(_, v)| !v.is_object()) {
                return Err(malformed(format!(
                    "Invalid params: inputResponses[{key:?}] must be an object (the result of the input request)"
                )));
            }
            Some(m.clone())
        }
        Some(_) => {
            return Err(malformed(
                "Invalid params: inputResponses must be an object",
            ))
        }
    };
    let state = match params.get("requestState") {
        None => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(malformed("Invalid params: requestState must be a string")),
    };
    Ok((responses, state))
}

//! Harpoon's tools as the MCP server lists them ([`definitions`]), and the two answered from
//! the registry alone: `list_targets` ([`list_targets`]: never a URL) and
//! `get_oauth_target_audience` ([`oauth_target_audience`]). `call_target` is [`super::call`].

use serde_json::{json, Map, Value};

use super::call::{bad, CallError, Method, TIMEOUT_MS};
use super::targets::Registry;

/// The methods a call may use.
const METHODS: [Method; 3] = [Method::Get, Method::Post, Method::Put];

/// The `tools` of a `tools/list` answer.
#[must_use]
pub fn definitions(max_response_cap: u64, max_redirects_cap: u32) -> Value {
    let (lo, hi, timeout) = TIMEOUT_MS;
    json!([
        {
            "name": "list_targets",
            "title": "List Harpoon targets",
            "description": "The endpoints this tunnel client may call for you, by label: description, category, source, tags and allowed methods (never their URLs). Filter by category, source or tags.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "category": {"type": "string", "description": "oauth or custom"},
                    "source": {"type": "string", "description": "config or oauth_discovery"},
                    "tags": {"type": "array", "items": {"type": "string"}, "description": "targets carrying all of these"}
                },
                "additionalProperties": false
            },
            "annotations": {"readOnlyHint": true, "openWorldHint": false}
        },
        {
            "name": "call_target",
            "title": "Call a Harpoon target",
            "description": "Sends one HTTP request to exactly the registered URL of a target, from inside the customer's network, and returns the status, headers and body (base64).",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "label": {"type": "string"},
                    "method": {"type": "string", "enum": ["GET", "POST", "PUT"], "default": "GET"},
                    "headers": {"type": "object", "additionalProperties": {"type": "string"}},
                    "body": {"type": "string"},
                    "timeout_ms": {"type": "integer", "minimum": lo, "maximum": hi, "default": timeout},
                    "max_response_bytes": {"type": "integer", "minimum": 1, "maximum": max_response_cap},
                    "follow_redirects": {"type": "boolean", "default": true},
                    "max_redirects": {"type": "integer", "minimum": 0, "maximum": max_redirects_cap, "default": max_redirects_cap}
                },
                "required": ["label"],
                "additionalProperties": false
            },
            "annotations": {"readOnlyHint": false, "destructiveHint": false, "openWorldHint": true}
        },
        {
            "name": "get_oauth_target_audience",
            "title": "A token endpoint's audience",
            "description": "For a target that is an authorization server's token endpoint: its exact registered URL, the audience a private_key_jwt client assertion needs.",
            "inputSchema": {
                "type": "object",
                "properties": {"label": {"type": "string"}},
                "required": ["label"],
                "additionalProperties": false
            },
            "annotations": {"readOnlyHint": true, "openWorldHint": false}
        }
    ])
}

fn text_result(structured: &Value) -> Value {
    json!({
        "content": [{"type": "text", "text": structured.to_string()}],
        "structuredContent": structured,
        "isError": false,
    })
}

fn string_arg<'a>(
    args: &'a Map<String, Value>,
    name: &'static str,
) -> Result<Option<&'a str>, CallError> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(bad(name, "must be a string")),
    }
}

/// `list_targets`: the targets matching every filter given, in registration order.
///
/// # Errors
/// [`CallError`] for a filter of the wrong type or an argument it does not take.
pub fn list_targets(registry: &Registry, args: &Value) -> Result<Value, CallError> {
    let empty = Map::new();
    let args = match args {
        Value::Null => &empty,
        Value::Object(m) => m,
        _ => return Err(bad("arguments", "must be an object")),
    };
    if let Some(k) = args
        .keys()
        .find(|k| !["category", "source", "tags"].contains(&k.as_str()))
    {
        return Err(CallError::UnknownArgument(k.chars().take(64).collect()));
    }
    let category = string_arg(args, "category")?.map(str::to_ascii_lowercase);
    let source = string_arg(args, "source")?.map(str::to_ascii_lowercase);
    let tags: Vec<String> = match args.get("tags") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|t| {
                t.as_str()
                    .map(|t| t.trim().to_ascii_lowercase())
                    .ok_or_else(|| bad("tags", "must be an array of strings"))
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(bad("tags", "must be an array of strings")),
    };
    let methods: Vec<&str> = METHODS.iter().map(|m| m.as_str()).collect();
    let targets: Vec<Value> = registry
        .iter()
        .filter(|t| category.as_deref().is_none_or(|c| c == t.category()))
        .filter(|t| source.as_deref().is_none_or(|s| s == t.source().as_str()))
        .filter(|t| tags.iter().all(|want| t.tags().contains(want)))
        .map(|t| {
            json!({
                "label": t.label(),
                "description": t.description(),
                "category": t.category(),
                "source": t.source().as_str(),
                "tags": t.tags(),
                "methods": methods,
            })
        })
        .collect();
    Ok(text_result(&json!({ "targets": targets })))
}

/// `get_oauth_target_audience`: a token endpoint target's exact registered URL.
///
/// # Errors
/// [`CallError::NoLabel`] or [`CallError::UnknownTarget`]; [`CallError::Argument`] when the
/// target is not a token endpoint, or its URL carries userinfo or a fragment (no audience can).
pub fn oauth_target_audience(registry: &Registry, args: &Value) -> Result<Value, CallError> {
    let label = args
        .get("label")
        .and_then(Value::as_str)
        .ok_or(CallError::NoLabel)?;
    let target = registry
        .get(label)
        .ok_or_else(|| CallError::UnknownTarget {
            label: label.chars().take(64).collect(),
        })?;
    let refuse = |problem: &str| bad("label", format!("names '{}', {problem}", target.label()));
    if !target.is_token_endpoint() {
        return Err(refuse(
            "which is not a token endpoint (tagged token-endpoint)",
        ));
    }
    let url = url::Url::parse(target.url()).map_err(|_| refuse("whose URL does not parse"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(refuse("whose URL is not http(s)"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(refuse(
            "whose URL carries userinfo, which an audience may not",
        ));
    }
    if url.fragment().is_some() {
        return Err(refuse(
            "whose URL has a fragment, which an audience may not",
        ));
    }
    Ok(text_result(&json!({
        "label": target.label(),
        "audience": target.url(),
    })))
}

//! One `call_target`: its arguments checked into a [`CallRequest`], the redirect policy
//! ([`next_hop`]), and the tool result a finished call becomes ([`CallOutcome::to_result`]).
//!
//! Arguments: `label` (a registered target), `method` (`GET`, `POST` or `PUT`), `headers` (an
//! object of strings; filtered by [`super::headers`]), `body` (a string), `timeout_ms` (100 to
//! 120,000, default 30,000), `max_response_bytes` (default 100 KiB, at most the configured
//! cap), `follow_redirects` (default true) and `max_redirects` (default 5, at most
//! [`MAX_REDIRECTS`]). The request goes to exactly the target's URL: the caller gives no path
//! and no query.

use std::time::Duration;

use base64::Engine as _;
use serde_json::{json, Map, Value};
use thiserror::Error;

use super::targets::{Registry, Target};

/// `timeout_ms`'s bounds and default.
pub const TIMEOUT_MS: (u64, u64, u64) = (100, 120_000, 30_000);
/// `max_response_bytes`'s default: 100 KiB.
pub const DEFAULT_MAX_RESPONSE_BYTES: u64 = 100 * 1024;
/// `max_redirects`'s default and cap (`--harpoon.max-redirects`'s default, the Go client's).
pub const DEFAULT_MAX_REDIRECTS: u32 = 5;
/// The most `--harpoon.max-redirects` may allow.
pub const MAX_REDIRECTS: u32 = 20;

/// A call's method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// `GET`.
    Get,
    /// `POST`.
    Post,
    /// `PUT`.
    Put,
}

impl Method {
    /// The method as sent.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
            Method::Put => "PUT",
        }
    }
}

/// A checked `call_target` request.
#[derive(Clone, PartialEq, Eq)]
pub struct CallRequest {
    /// The target's label.
    pub label: String,
    /// The method.
    pub method: Method,
    /// The caller's headers, as given (filter them with
    /// [`super::headers::filter_request_headers`] before sending).
    pub headers: Vec<(String, String)>,
    /// The body, if any.
    pub body: Option<String>,
    /// How long the whole call may take, redirects included.
    pub timeout: Duration,
    /// The largest response body accepted; a larger one is an error, not a truncation.
    pub max_response_bytes: u64,
    /// Whether a redirect to a registered URL is followed.
    pub follow_redirects: bool,
    /// How many redirects are followed at most.
    pub max_redirects: u32,
}

/// Header values and bodies may carry secrets: `Debug` shows neither.
impl std::fmt::Debug for CallRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallRequest")
            .field("label", &self.label)
            .field("method", &self.method)
            .field("headers", &self.headers.len())
            .field("body", &self.body.as_ref().map(String::len))
            .field("timeout", &self.timeout)
            .field("max_response_bytes", &self.max_response_bytes)
            .field("follow_redirects", &self.follow_redirects)
            .field("max_redirects", &self.max_redirects)
            .finish()
    }
}

/// Why a call was refused before anything was sent: the caller's mistake, said so that it can
/// correct it. Never quotes a URL, a header value or a body.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CallError {
    /// The arguments are not an object, or `label` is missing.
    #[error(
        "the arguments must be an object with at least \"label\" (a target's label from list_targets)"
    )]
    NoLabel,
    /// No target has this label.
    #[error("no harpoon target is labelled '{label}' (list_targets shows the labels; the tunnel's harpoon.targets[].label entries define them)")]
    UnknownTarget {
        /// The label asked for.
        label: String,
    },
    /// An argument has the wrong type or is out of range.
    #[error("the argument \"{argument}\" {problem}")]
    Argument {
        /// The argument's name.
        argument: &'static str,
        /// What is wrong with it.
        problem: String,
    },
    /// An argument call_target does not take.
    #[error("call_target takes no \"{0}\" (its arguments: label, method, headers, body, timeout_ms, max_response_bytes, follow_redirects, max_redirects)")]
    UnknownArgument(String),
}

pub(super) fn bad(argument: &'static str, problem: impl Into<String>) -> CallError {
    CallError::Argument {
        argument,
        problem: problem.into(),
    }
}

fn int(
    args: &Map<String, Value>,
    name: &'static str,
    min: u64,
    max: u64,
    default: u64,
) -> Result<u64, CallError> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => match v.as_u64() {
            Some(n) if (min..=max).contains(&n) => Ok(n),
            _ => Err(bad(
                name,
                format!("must be a whole number from {min} to {max}"),
            )),
        },
    }
}

impl CallRequest {
    /// Checks `call_target`'s arguments against the registry; `max_response_cap` is the
    /// configured `--harpoon.max-response-bytes`, `max_redirects_cap` `--harpoon.max-redirects`
    /// (a call's `max_redirects` defaults to it and may not exceed it, as in the Go client).
    ///
    /// # Errors
    /// [`CallError`] naming the argument.
    pub fn from_arguments(
        args: &Value,
        registry: &Registry,
        max_response_cap: u64,
        max_redirects_cap: u32,
    ) -> Result<CallRequest, CallError> {
        let args = args.as_object().ok_or(CallError::NoLabel)?;
        const KNOWN: [&str; 8] = [
            "label",
            "method",
            "headers",
            "body",
            "timeout_ms",
            "max_response_bytes",
            "follow_redirects",
            "max_redirects",
        ];
        if let Some(unknown) = args.keys().find(|k| !KNOWN.contains(&k.as_str())) {
            return Err(CallError::UnknownArgument(
                unknown.chars().take(64).collect(),
            ));
        }
        let label = args
            .get("label")
            .and_then(Value::as_str)
            .ok_or(CallError::NoLabel)?;
        if registry.get(label).is_none() {
            return Err(CallError::UnknownTarget {
                label: label.chars().take(64).collect(),
            });
        }
        let method = match args.get("method") {
            None | Some(Value::Null) => Method::Get,
            Some(Value::String(m)) => match m.to_ascii_uppercase().as_str() {
                "GET" => Method::Get,
                "POST" => Method::Post,
                "PUT" => Method::Put,
                _ => return Err(bad("method", "must be GET, POST or PUT")),
            },
            Some(_) => return Err(bad("method", "must be GET, POST or PUT")),
        };
        let headers = match args.get("headers") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Object(h)) => h
                .iter()
                .map(|(k, v)| match v {
                    Value::String(s) => Ok((k.clone(), s.clone())),
                    _ => Err(bad("headers", "must map each name to a string")),
                })
                .collect::<Result<_, _>>()?,
            Some(_) => {
                return Err(bad(
                    "headers",
                    "must be an object of header names to strings",
                ))
            }
        };
        let body = match args.get("body") {
            None | Some(Value::Null) => None,
            Some(Value::String(b)) => Some(b.clone()),
            Some(_) => return Err(bad("body", "must be a string")),
        };
        if body.is_some() && method == Method::Get {
            return Err(bad("body", "is for POST and PUT, not GET"));
        }
        let (lo, hi, default) = TIMEOUT_MS;
        let timeout = Duration::from_millis(int(args, "timeout_ms", lo, hi, default)?);
        let cap = max_response_cap.max(1);
        let max_response_bytes = int(
            args,
            "max_response_bytes",
            1,
            cap,
            DEFAULT_MAX_RESPONSE_BYTES.min(cap),
        )?;
        let follow_redirects = match args.get("follow_redirects") {
            None | Some(Value::Null) => true,
            Some(Value::Bool(b)) => *b,
            Some(_) => return Err(bad("follow_redirects", "must be true or false")),
        };
        let redirects_cap = max_redirects_cap.min(MAX_REDIRECTS);
        let max_redirects = int(
            args,
            "max_redirects",
            0,
            u64::from(redirects_cap),
            u64::from(redirects_cap),
        )?;
        Ok(CallRequest {
            label: label.to_owned(),
            method,
            headers,
            body,
            timeout,
            max_response_bytes,
            follow_redirects,
            max_redirects: u32::try_from(max_redirects).unwrap_or(redirects_cap),
        })
    }
}

/// What to do with a redirect answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hop<'a> {
    /// Follow it: the next request goes to this registered target.
    Follow(&'a Target),
    /// Do not follow: hand the redirect itself back as the result (redirects are off).
    Return,
    /// Refuse the call: the redirect leads off the allowlist, or past the count.
    Refuse(RedirectRefused),
}

/// Why a redirect was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum RedirectRefused {
    /// No `Location`, or one that does not resolve.
    #[error("the target answered a redirect without a usable Location")]
    NoLocation,
    /// The `Location` is not a registered URL.
    #[error("the target redirected to a URL that is not a registered harpoon target")]
    NotRegistered,
    /// `max_redirects` were followed already.
    #[error("the target redirected more than max_redirects times")]
    TooMany,
}

/// The redirect policy: the answer to the request for `current` (a registered URL) was a
/// redirect to `location`, after `followed` redirects. A relative `location` is resolved
/// against `current`.
#[must_use]
pub fn next_hop<'a>(
    registry: &'a Registry,
    request: &CallRequest,
    current: &str,
    location: Option<&str>,
    followed: u32,
) -> Hop<'a> {
    if !request.follow_redirects {
        return Hop::Return;
    }
    let Some(location) = location.map(str::trim).filter(|l| !l.is_empty()) else {
        return Hop::Refuse(RedirectRefused::NoLocation);
    };
    if followed >= request.max_redirects {
        return Hop::Refuse(RedirectRefused::TooMany);
    }
    // A `.` or `..` segment is refused as written, before resolving could remove it (as a
    // registered URL may have none).
    let path = location.split(['?', '#']).next().unwrap_or_default();
    if path.split(['/', '\\']).any(super::targets::is_dot_segment) {
        return Hop::Refuse(RedirectRefused::NotRegistered);
    }
    // As written first (a registered URL is compared as written), then resolved.
    if let Some(t) = registry.find_url(location).next() {
        return Hop::Follow(t);
    }
    let Ok(resolved) = url::Url::parse(current).and_then(|base| base.join(location)) else {
        return Hop::Refuse(RedirectRefused::NoLocation);
    };
    match registry.find_url(resolved.as_str()).next() {
        Some(t) => Hop::Follow(t),
        None => Hop::Refuse(RedirectRefused::NotRegistered),
    }
}

/// A finished call's answer (its body within the limit, already rewritten).
#[derive(Clone, PartialEq, Eq)]
pub struct CallOutcome {
    /// The HTTP status.
    pub status: u16,
    /// The response headers (already rewritten).
    pub headers: Vec<(String, String)>,
    /// The body (already rewritten).
    pub body: Vec<u8>,
}

impl std::fmt::Debug for CallOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallOutcome")
            .field("status", &self.status)
            .field("headers", &self.headers.len())
            .field("body", &self.body.len())
            .finish()
    }
}

impl CallOutcome {
    /// The `tools/call` result: `status_code`, `headers` (repeated names joined with `, `),
    /// `body_base64` and `body_size_bytes`, as `structuredContent` and as its JSON text.
    #[must_use]
    pub fn to_result(&self) -> Value {
        let mut headers = Map::new();
        for (name, value) in &self.headers {
            let name = name.to_ascii_lowercase();
            match headers.get_mut(&name) {
                Some(Value::String(v)) => {
                    v.push_str(", ");
                    v.push_str(value);
                }
                _ => {
                    headers.insert(name, Value::from(value.as_str()));
                }
            }
        }
        let structured = json!({
            "status_code": self.status,
            "headers": headers,
            "body_base64": base64::engine::general_purpose::STANDARD.encode(&self.body),
            "body_size_bytes": self.body.len(),
        });
        json!({
            "content": [{"type": "text", "text": structured.to_string()}],
            "structuredContent": structured,
            "isError": false,
        })
    }
}

/// A failed call as a tool result (`isError`), naming the label (never the URL).
#[must_use]
pub fn error_result(label: &str, message: &str) -> Value {
    let text = format!("harpoon target '{label}': {message}");
    json!({
        "content": [{"type": "text", "text": text}],
        "structuredContent": {"error": message, "label": label},
        "isError": true,
    })
}

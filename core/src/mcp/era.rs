//! Which era a server speaks, and what to do about a modern rejection
//! (`basic/versioning.mdx`, "Backward Compatibility with Initialization-Based Versions").
//!
//! - **Modern** servers (`2026-07-28` and later) take per-request `_meta`; **legacy** servers
//!   (`2025-11-25` and earlier) need the `initialize` handshake ([`super::legacy`]).
//! - HTTP (`basic/transports/streamable-http.mdx`, "Backward Compatibility"): the client sends a
//!   modern request; on `400 Bad Request` it reads the body ([`classify_http_400`]). A
//!   recognized modern error ([`ModernError`]) means modern: correct the request and retry, never
//!   fall back. An empty or unrecognized body (`"Server not initialized"`, `"Missing session
//!   ID"`, HTML, anything else) means legacy.
//! - stdio (`basic/transports/stdio.mdx`, "Backward Compatibility"): the client probes with
//!   `server/discover` ([`classify_probe`]). A `DiscoverResult` or a recognized modern error
//!   means modern; any other error, or no answer in time, means legacy. The fallback is never
//!   keyed to one error code. A result without `supportedVersions` is no `DiscoverResult` at
//!   all: a legacy server that answers any method it does not know with an empty result (the
//!   compatibility matrix of `basic/versioning.mdx` warns that a legacy server may process an
//!   era-ambiguous method under legacy semantics), so it means legacy too.
//! - The verdict belongs to the server (the process on stdio, the origin on HTTP): [`EraCache`]
//!   keeps it until the caller [`invalidates`](EraCache::invalidate) it because the assumption
//!   broke.
//!
//! Recognized modern errors, and what the client does with each:
//! - `-32022` UnsupportedProtocolVersion with `data.supported` (an array of strings): pick the
//!   highest common version ([`negotiate_version`], [`VersionNegotiation`]) and retry; none in
//!   common is a [`VersionError`] naming both lists;
//! - `-32021` MissingRequiredClientCapability with `data.requiredCapabilities` (an object):
//!   declare what is missing if the host supports it ([`declare_required`]) and retry, else a
//!   [`CapabilityError`];
//! - `-32020` HeaderMismatch: refresh `tools/list` and retry once with the new headers (the
//!   client's job; this module only recognizes it).
//!
//! A `-32022` without a usable `data.supported`, or a `-32021` without an object
//! `data.requiredCapabilities`, cannot be acted on and is not counted as recognized.

use std::collections::BTreeMap;

use serde_json::value::RawValue;
use serde_json::Value;

use super::discover::{DiscoverError, DiscoverResult};
use super::meta::{ClientCapabilities, JsonObject};
use super::LATEST_PROTOCOL_VERSION;
use crate::jsonrpc::{code, ErrorObject, Message};

/// The two eras of MCP.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Era {
    /// `2026-07-28` and later: per-request `_meta`, no handshake.
    Modern,
    /// `2025-11-25` and earlier: the `initialize` handshake.
    Legacy,
}

/// The era a protocol version belongs to: date-shaped versions (`YYYY-MM-DD`) before
/// `2026-07-28` are legacy, the others modern; `None` for a version that is not date-shaped.
pub fn era_of_version(version: &str) -> Option<Era> {
    let b = version.as_bytes();
    let date_shaped = b.len() == 10
        && b.iter().enumerate().all(|(i, c)| {
            if i == 4 || i == 7 {
                *c == b'-'
            } else {
                c.is_ascii_digit()
            }
        });
    if !date_shaped {
        None
    } else if version < LATEST_PROTOCOL_VERSION {
        Some(Era::Legacy)
    } else {
        Some(Era::Modern)
    }
}

/// A JSON-RPC error that only a modern server sends, with the data needed to act on it.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum ModernError {
    /// `-32022`: the requested version is not supported.
    UnsupportedProtocolVersion {
        /// `data.supported`.
        supported: Vec<String>,
        /// `data.requested`, when given.
        requested: Option<String>,
    },
    /// `-32021`: a capability the request needs was not declared.
    MissingRequiredClientCapability {
        /// `data.requiredCapabilities`, as sent.
        required: JsonObject,
    },
    /// `-32020`: headers missing, malformed or different from the body.
    HeaderMismatch {
        /// The server's message (names the header, typically).
        message: String,
    },
}

impl ModernError {
    /// Recognizes a modern error in a JSON-RPC error object; `None` for anything else.
    pub fn from_error(error: &ErrorObject) -> Option<Self> {
        let data = error.data.as_ref().and_then(Value::as_object);
        match error.code {
            code::UNSUPPORTED_PROTOCOL_VERSION => {
                let supported = data?.get("supported")?.as_array()?;
                let supported = supported
                    .iter()
                    .map(|v| v.as_str().map(str::to_owned))
                    .collect::<Option<Vec<_>>>()?;
                let requested = data
                    .and_then(|d| d.get("requested"))
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                Some(ModernError::UnsupportedProtocolVersion {
                    supported,
                    requested,
                })
            }
            code::MISSING_REQUIRED_CLIENT_CAPABILITY => {
                let required = data?.get("requiredCapabilities")?.as_object()?.clone();
                Some(ModernError::MissingRequiredClientCapability { required })
            }
            code::HEADER_MISMATCH => Some(ModernError::HeaderMismatch {
                message: error.message.chars().take(512).collect(),
            }),
            _ => None,
        }
    }

    /// The JSON-RPC error code.
    pub fn code(&self) -> i64 {
        match self {
            ModernError::UnsupportedProtocolVersion { .. } => code::UNSUPPORTED_PROTOCOL_VERSION,
            ModernError::MissingRequiredClientCapability { .. } => {
                code::MISSING_REQUIRED_CLIENT_CAPABILITY
            }
            ModernError::HeaderMismatch { .. } => code::HEADER_MISMATCH,
        }
    }
}

/// What a `400 Bad Request` to a modern request says about the server.
#[derive(Clone, Debug, PartialEq)]
pub enum Http400Verdict {
    /// A recognized modern error: the server is modern; correct the request and retry.
    Modern(ModernError),
    /// Empty or unrecognized body: the server is legacy; fall back to `initialize`.
    Legacy,
}

/// Classifies the body of a `400 Bad Request` answering a modern request
/// (`basic/transports/streamable-http.mdx`, "Backward Compatibility"). Never fails: whatever is
/// not a recognized modern JSON-RPC error response (not UTF-8, not JSON, not an error
/// response, another code, missing data) is [`Http400Verdict::Legacy`].
pub fn classify_http_400(body: &[u8]) -> Http400Verdict {
    let Ok(text) = std::str::from_utf8(body) else {
        return Http400Verdict::Legacy;
    };
    let text = text.trim_start_matches('\u{feff}');
    match Message::parse(text) {
        Ok(Message::Error { error, .. }) => match ModernError::from_error(&error) {
            Some(m) => Http400Verdict::Modern(m),
            None => Http400Verdict::Legacy,
        },
        _ => Http400Verdict::Legacy,
    }
}

/// What an HTTP error status answering a modern request says about the server's era.
#[derive(Clone, Debug, PartialEq)]
pub enum HttpErrorVerdict {
    /// A recognized modern error: the server is modern; correct the request and retry.
    Modern(ModernError),
    /// `404` with a JSON-RPC `-32601` body: a modern server that does not implement the method.
    MethodNotFound,
    /// `400`, `404` or `405` without a recognized modern body: the server is legacy.
    Legacy,
}

/// Classifies an HTTP error answering a modern request (`basic/transports/streamable-http.mdx`,
/// "Backward Compatibility": "If it fails with HTTP status code `400 Bad Request`, `404 Not
/// Found`, or `405 Method Not Allowed` **and** the response body is not a recognized modern
/// JSON-RPC error", fall back; and a modern server answers an unknown method "with `404 Not
/// Found` and a JSON-RPC error with code `-32601`"). `None` for statuses that say nothing about
/// the era (401, 403, 5xx...), which the caller handles as such.
pub fn classify_http_error(status: u16, body: &[u8]) -> Option<HttpErrorVerdict> {
    if !matches!(status, 400 | 404 | 405) {
        return None;
    }
    if let Http400Verdict::Modern(e) = classify_http_400(body) {
        return Some(HttpErrorVerdict::Modern(e));
    }
    if status == 404 {
        let text = std::str::from_utf8(body)
            .unwrap_or("")
            .trim_start_matches('\u{feff}');
        if let Ok(Message::Error { error, .. }) = Message::parse(text) {
            if error.code == crate::jsonrpc::code::METHOD_NOT_FOUND {
                return Some(HttpErrorVerdict::MethodNotFound);
            }
        }
    }
    Some(HttpErrorVerdict::Legacy)
}

/// How the stdio `server/discover` probe ended.
#[derive(Clone, Copy, Debug)]
pub enum ProbeOutcome<'a> {
    /// A result response (the raw `result` member).
    Result(&'a RawValue),
    /// An error response.
    Error(&'a ErrorObject),
    /// No response within the probe's timeout.
    TimedOut,
}

impl<'a> ProbeOutcome<'a> {
    /// The outcome a response message gives; `None` for a request or a notification.
    pub fn from_message(message: &'a Message<'a>) -> Option<Self> {
        match message {
            Message::Response { result, .. } => Some(ProbeOutcome::Result(result)),
            Message::Error { error, .. } => Some(ProbeOutcome::Error(error)),
            _ => None,
        }
    }
}

/// Why the probe says legacy.
#[derive(Clone, Debug, PartialEq)]
pub enum LegacyEvidence {
    /// An error that is not a recognized modern error (any code: `-32601`, `-32602`, ...).
    Error {
        /// Its code.
        code: i64,
        /// Its message (at most 512 characters).
        message: String,
    },
    /// No answer in time.
    TimedOut,
    /// A result that is not a `DiscoverResult`: it has no `supportedVersions` (a legacy server
    /// answering a method it does not know with an empty result).
    NotADiscoverResult,
}

/// What the stdio probe says about the server.
#[derive(Clone, Debug, PartialEq)]
pub enum ProbeVerdict {
    /// A `DiscoverResult`: modern; pick a version from `supportedVersions`.
    Modern(Box<DiscoverResult>),
    /// A result that names `supportedVersions` but is otherwise not a valid `DiscoverResult`:
    /// the server is treated as modern (negotiating inline); the error says what was wrong,
    /// for the host's log.
    ModernMalformed(DiscoverError),
    /// A recognized modern error: modern; act on it (e.g. retry with a supported version).
    ModernError(ModernError),
    /// Legacy: fall back to `initialize`.
    Legacy(LegacyEvidence),
}

impl ProbeVerdict {
    /// The era the verdict means.
    pub fn era(&self) -> Era {
        match self {
            ProbeVerdict::Legacy(_) => Era::Legacy,
            _ => Era::Modern,
        }
    }
}

/// Classifies the outcome of the stdio `server/discover` probe
/// (`basic/transports/stdio.mdx`, "Backward Compatibility").
pub fn classify_probe(outcome: ProbeOutcome<'_>) -> ProbeVerdict {
    match outcome {
        ProbeOutcome::Result(raw) => match DiscoverResult::from_raw(raw) {
            Ok(r) => ProbeVerdict::Modern(Box::new(r)),
            Err(DiscoverError::Missing("supportedVersions") | DiscoverError::NotAnObject) => {
                ProbeVerdict::Legacy(LegacyEvidence::NotADiscoverResult)
            }
            Err(e) => ProbeVerdict::ModernMalformed(e),
        },
        ProbeOutcome::Error(error) => match ModernError::from_error(error) {
            Some(m) => ProbeVerdict::ModernError(m),
            None => ProbeVerdict::Legacy(LegacyEvidence::Error {
                code: error.code,
                message: error.message.chars().take(512).collect(),
            }),
        },
        ProbeOutcome::TimedOut => ProbeVerdict::Legacy(LegacyEvidence::TimedOut),
    }
}

/// The version to retry with after `-32022`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VersionChoice {
    /// The chosen version.
    pub version: String,
    /// Its era: [`Era::Legacy`] means "speak it through `initialize`", not in `_meta`.
    pub era: Option<Era>,
    /// Whether it is the version the rejected request already carried. The client still
    /// retries once (the server may have been mid-upgrade or behind a mixed load balancer).
    pub same_as_requested: bool,
}

/// Why no version can be agreed on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum VersionError {
    /// Nothing in common.
    #[error("no protocol version in common: the client speaks {ours:?}, the server supports {supported:?} (requested {requested:?})")]
    NoCommonVersion {
        /// The client's versions.
        ours: Vec<String>,
        /// The server's `data.supported`.
        supported: Vec<String>,
        /// The version that was rejected.
        requested: String,
    },
    /// The server rejected the same version again after the one retry it gets, or the retry
    /// budget is spent.
    #[error("the server keeps rejecting protocol version {requested:?} although it lists {supported:?} as supported")]
    StillRejected {
        /// The version rejected again.
        requested: String,
        /// The server's `data.supported`.
        supported: Vec<String>,
    },
}

/// The highest version both sides speak, for a retry after `-32022` (`basic/versioning.mdx`,
/// "Protocol Version Negotiation"). Versions are dates (`YYYY-MM-DD`), so their string order is
/// their age; the highest common one is chosen whatever the order of either list.
pub fn negotiate_version(
    ours: &[&str],
    supported: &[String],
    requested: &str,
) -> Result<VersionChoice, VersionError> {
    let best = ours
        .iter()
        .filter(|v| supported.iter().any(|s| s == *v))
        .max()
        .copied();
    match best {
        Some(v) => Ok(VersionChoice {
            version: v.to_owned(),
            era: era_of_version(v),
            same_as_requested: v == requested,
        }),
        None => Err(VersionError::NoCommonVersion {
            ours: ours.iter().map(|v| (*v).to_owned()).collect(),
            supported: supported.to_vec(),
            requested: requested.to_owned(),
        }),
    }
}

/// Version negotiation for one request: each `-32022` gives the version to retry with, at
/// most `max_retries` times, and at most once with the version just rejected.
#[derive(Clone, Debug)]
pub struct VersionNegotiation {
    ours: Vec<String>,
    retries_left: u32,
    same_version_retry_used: bool,
}

impl VersionNegotiation {
    /// Retries allowed by [`VersionNegotiation::new`].
    pub const DEFAULT_MAX_RETRIES: u32 = 3;

    /// A negotiation over the client's versions.
    pub fn new(ours: &[&str]) -> Self {
        Self::with_max_retries(ours, Self::DEFAULT_MAX_RETRIES)
    }

    /// A negotiation with a retry budget.
    pub fn with_max_retries(ours: &[&str], max_retries: u32) -> Self {
        VersionNegotiation {
            ours: ours.iter().map(|v| (*v).to_owned()).collect(),
            retries_left: max_retries,
            same_version_retry_used: false,
        }
    }

    /// The version to retry with after `-32022` rejected `requested`.
    pub fn on_unsupported(
        &mut self,
        supported: &[String],
        requested: &str,
    ) -> Result<VersionChoice, VersionError> {
        let ours: Vec<&str> = self.ours.iter().map(String::as_str).collect();
        let choice = negotiate_version(&ours, supported, requested)?;
        let still = || VersionError::StillRejected {
            requested: requested.to_owned(),
            supported: supported.to_vec(),
        };
        if self.retries_left == 0 || (choice.same_as_requested && self.same_version_retry_used) {
            return Err(still());
        }
        self.retries_left -= 1;
        if choice.same_as_requested {
            self.same_version_retry_used = true;
        }
        Ok(choice)
    }
}

/// Why a `-32021` cannot be satisfied.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum CapabilityError {
    /// The host does not support (part of) what the server requires.
    #[error("the server requires client capabilities the host does not support: {missing}")]
    HostLacks {
        /// The required capabilities the host lacks, as JSON.
        missing: Value,
    },
    /// The request already declared everything the server names: a retry would be rejected
    /// the same way.
    #[error("the server requires client capabilities that were already declared: {required}")]
    AlreadyDeclared {
        /// `data.requiredCapabilities`.
        required: Value,
    },
    /// The merged declaration is not a valid `ClientCapabilities`.
    #[error("the required client capabilities do not form a valid declaration: {0}")]
    Invalid(String),
}

/// `elicitation: {}` means form mode (`schema.json` `ClientCapabilities`): makes that explicit
/// so coverage is compared mode by mode.
fn normalize(mut caps: Value) -> Value {
    if let Some(e) = caps.get_mut("elicitation").and_then(Value::as_object_mut) {
        if !e.contains_key("form") && !e.contains_key("url") {
            e.insert("form".to_owned(), Value::Object(JsonObject::new()));
        }
    }
    caps
}

/// The part of `need` that `have` does not cover (`None`: fully covered). Objects are covered
/// member by member; an empty object is covered by any object; other values by equal values.
fn uncovered(have: Option<&Value>, need: &Value) -> Option<Value> {
    match (have, need) {
        (None, _) => Some(need.clone()),
        (Some(Value::Object(h)), Value::Object(n)) => {
            let missing: JsonObject = n
                .iter()
                .filter_map(|(k, nv)| uncovered(h.get(k), nv).map(|m| (k.clone(), m)))
                .collect();
            (!missing.is_empty()).then_some(Value::Object(missing))
        }
        (Some(h), n) => (h != n).then(|| n.clone()),
    }
}

/// What of `have` answers `need`: for a non-empty object `need`, member by member; otherwise
/// `have` whole (the host's full settings for that capability).
fn project(have: &Value, need: &Value) -> Value {
    match (have, need) {
        (Value::Object(h), Value::Object(n)) if !n.is_empty() => Value::Object(
            n.iter()
                .filter_map(|(k, nv)| h.get(k).map(|hv| (k.clone(), project(hv, nv))))
                .collect(),
        ),
        _ => have.clone(),
    }
}

/// Merges `add` into `base`, objects member by member.
fn merge(base: &mut Value, add: Value) {
    match (base, add) {
        (Value::Object(b), Value::Object(a)) => {
            for (k, v) in a {
                match b.get_mut(&k) {
                    Some(existing) => merge(existing, v),
                    None => {
                        b.insert(k, v);
                    }
                }
            }
        }
        (b, a) => *b = a,
    }
}

/// The required capabilities (`data.requiredCapabilities` of a `-32021`) that `declared` does
/// not cover, as JSON; `None` when it covers them all.
pub fn missing_capabilities(declared: &ClientCapabilities, required: &JsonObject) -> Option<Value> {
    let need = normalize(Value::Object(required.clone()));
    uncovered(Some(&normalize(declared.to_value())), &need)
}

/// The declaration to retry with after `-32021`: `declared` plus the host's own settings for
/// each required capability (`basic/index.mdx`, "Per-request protocol fields": declare only
/// what the host actually supports). Errors when the host lacks part of it, or when
/// everything required was already declared (retrying would loop).
pub fn declare_required(
    declared: &ClientCapabilities,
    host: &ClientCapabilities,
    required: &JsonObject,
) -> Result<ClientCapabilities, CapabilityError> {
    let need = normalize(Value::Object(required.clone()));
    let mut ours = normalize(declared.to_value());
    if uncovered(Some(&ours), &need).is_none() {
        return Err(CapabilityError::AlreadyDeclared {
            required: Value::Object(required.clone()),
        });
    }
    // What is declared is supported, whatever the host's list says.
    let mut host = normalize(host.to_value());
    merge(&mut host, ours.clone());
    if let Some(missing) = uncovered(Some(&host), &need) {
        return Err(CapabilityError::HostLacks { missing });
    }
    merge(&mut ours, project(&host, &need));
    serde_json::from_value(ours).map_err(|e| CapabilityError::Invalid(e.to_string()))
}

/// A cached era verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CachedEra {
    /// The era.
    pub era: Era,
    /// The protocol version agreed with the server, when known.
    pub protocol_version: Option<String>,
}

/// Era verdicts by server identity ([`http_server_key`], [`stdio_server_key`]): kept for the
/// lifetime of the server and re-probed only when the cached assumption fails
/// (`basic/versioning.mdx`: "re-probing if the cached assumption later fails").
#[derive(Clone, Debug, Default)]
pub struct EraCache {
    entries: BTreeMap<String, CachedEra>,
}

impl EraCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// The verdict for `key`, if any.
    pub fn get(&self, key: &str) -> Option<&CachedEra> {
        self.entries.get(key)
    }

    /// Records (or replaces) the verdict for `key`.
    pub fn record(&mut self, key: impl Into<String>, verdict: CachedEra) {
        self.entries.insert(key.into(), verdict);
    }

    /// Forgets the verdict for `key` (the assumption broke: probe again); returns it.
    pub fn invalidate(&mut self, key: &str) -> Option<CachedEra> {
        self.entries.remove(key)
    }

    /// How many servers have a verdict.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no server has a verdict.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// The cache key of an HTTP server: the origin of its URL (`scheme://host[:port]`, scheme and
/// host lower-cased, default ports `80`/`443` dropped, user info, path, query and fragment
/// dropped). `None` when `url` has no `scheme://host`.
pub fn http_server_key(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    if scheme.is_empty()
        || !scheme
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
    {
        return None;
    }
    let scheme = scheme.to_ascii_lowercase();
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, hp)| hp);
    let (host, port) = if let Some(after) = host_port.strip_prefix('[') {
        let (h, tail) = after.split_once(']')?;
        (format!("[{h}]"), tail.strip_prefix(':'))
    } else {
        match host_port.rsplit_once(':') {
            Some((h, p)) => (h.to_owned(), Some(p)),
            None => (host_port.to_owned(), None),
        }
    };
    if host.is_empty() || host == "[]" {
        return None;
    }
    let host = host.to_ascii_lowercase();
    let port = port.filter(|p| {
        !p.is_empty() && !matches!((scheme.as_str(), *p), ("http", "80") | ("https", "443"))
    });
    Some(match port {
        Some(p) => format!("{scheme}://{host}:{p}"),
        None => format!("{scheme}://{host}"),
    })
}

/// The cache key of a stdio server: its command line as a JSON array (unambiguous whatever
/// the arguments hold).
pub fn stdio_server_key(program: &str, args: &[&str]) -> String {
    let mut all = Vec::with_capacity(args.len() + 1);
    all.push(program);
    all.extend_from_slice(args);
    serde_json::to_string(&all).unwrap_or_default()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    const UNSUPPORTED: &str = include_str!(
        "../../../fixtures/mcp/examples/UnsupportedProtocolVersionError/unsupported-version.json"
    );
    const MISSING_CAP: &str = include_str!(
        "../../../fixtures/mcp/examples/MissingRequiredClientCapabilityError/missing-elicitation-capability.json"
    );
    const HEADER_MISMATCH: &str =
        include_str!("../../../fixtures/mcp/examples/HeaderMismatchError/header-mismatch.json");
    const DISCOVER_RESPONSE: &str = include_str!(
        "../../../fixtures/mcp/examples/DiscoverResultResponse/discover-result-response.json"
    );

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    /// basic/transports/streamable-http.mdx, "Backward Compatibility"; examples/
    /// UnsupportedProtocolVersionError, MissingRequiredClientCapabilityError, HeaderMismatchError.
    #[test]
    fn http_400_with_a_recognized_modern_error_means_modern() {
        assert_eq!(
            classify_http_400(UNSUPPORTED.as_bytes()),
            Http400Verdict::Modern(ModernError::UnsupportedProtocolVersion {
                supported: strings(&["2026-07-28", "2025-11-25"]),
                requested: Some("1900-01-01".into()),
            })
        );
        assert_eq!(
            classify_http_400(MISSING_CAP.as_bytes()),
            Http400Verdict::Modern(ModernError::MissingRequiredClientCapability {
                required: json!({"elicitation": {}}).as_object().unwrap().clone(),
            })
        );
        let Http400Verdict::Modern(m) = classify_http_400(HEADER_MISMATCH.as_bytes()) else {
            panic!("header mismatch is modern")
        };
        assert_eq!(m.code(), -32020);
    }

    /// basic/transports/streamable-http.mdx, "Backward Compatibility": an empty or
    /// unrecognized body means legacy.
    #[test]
    fn http_400_with_an_empty_or_unrecognized_body_means_legacy() {
        for body in [
            &b""[..],
            b"Bad Request: Server not initialized",
            b"Bad Request: Missing session ID",
            b"<html><body>400</body></html>",
            b"\xff\xfe",
            br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Bad Request: Server not initialized"}}"#,
            br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Missing session ID"}}"#,
            br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"Invalid params"}}"#,
            br#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
        ] {
            assert_eq!(classify_http_400(body), Http400Verdict::Legacy, "{body:?}");
        }
    }

    /// Module rule: a modern code without the data needed to act on it is not recognized.
    #[test]
    fn modern_codes_without_their_data_are_not_recognized() {
        for body in [
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"x","data":{"supported":"2026-07-28"}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32021,"message":"x","data":{}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32021,"message":"x","data":{"requiredCapabilities":[]}}}"#,
        ] {
            assert_eq!(
                classify_http_400(body.as_bytes()),
                Http400Verdict::Legacy,
                "{body}"
            );
        }
    }

    /// basic/transports/stdio.mdx, "Backward Compatibility": a DiscoverResult means modern.
    #[test]
    fn probe_with_a_discover_result_means_modern() {
        let msg = Message::parse(DISCOVER_RESPONSE).unwrap();
        let verdict = classify_probe(ProbeOutcome::from_message(&msg).unwrap());
        assert_eq!(verdict.era(), Era::Modern);
        let ProbeVerdict::Modern(r) = verdict else {
            panic!("expected a result")
        };
        assert!(r.supports_version("2026-07-28"));
    }

    /// basic/transports/stdio.mdx, "Backward Compatibility": a recognized modern error means
    /// modern; do not fall back.
    #[test]
    fn probe_with_a_recognized_modern_error_means_modern() {
        let msg = Message::parse(UNSUPPORTED).unwrap();
        let verdict = classify_probe(ProbeOutcome::from_message(&msg).unwrap());
        assert!(matches!(
            verdict,
            ProbeVerdict::ModernError(ModernError::UnsupportedProtocolVersion { .. })
        ));
        assert_eq!(verdict.era(), Era::Modern);
    }

    /// basic/transports/stdio.mdx, "Backward Compatibility": any other error or a timeout
    /// means legacy; the fallback is not keyed to one code.
    #[test]
    fn probe_with_any_other_error_or_a_timeout_means_legacy() {
        for code in [-32601, -32602, -32600, -32000, -32603, 1] {
            let e = ErrorObject {
                code,
                message: "Method not found".into(),
                data: None,
            };
            let v = classify_probe(ProbeOutcome::Error(&e));
            assert_eq!(v.era(), Era::Legacy, "{code}");
            assert_eq!(
                v,
                ProbeVerdict::Legacy(LegacyEvidence::Error {
                    code,
                    message: "Method not found".into()
                })
            );
        }
        assert_eq!(
            classify_probe(ProbeOutcome::TimedOut),
            ProbeVerdict::Legacy(LegacyEvidence::TimedOut)
        );
    }

    /// server/discover.mdx: a result naming `supportedVersions` is a modern answer, even when
    /// something else in it is malformed.
    #[test]
    fn probe_with_a_malformed_result_stays_modern_and_says_why() {
        let raw = RawValue::from_string(r#"{"supportedVersions":["2026-07-28"]}"#.into()).unwrap();
        let v = classify_probe(ProbeOutcome::Result(&raw));
        assert_eq!(
            v,
            ProbeVerdict::ModernMalformed(DiscoverError::Missing("capabilities"))
        );
        assert_eq!(v.era(), Era::Modern);
    }

    /// basic/versioning.mdx, compatibility matrix: a legacy server may process an era-ambiguous
    /// method under legacy semantics; an empty result (no `supportedVersions`) is no
    /// `DiscoverResult`, so the server is legacy.
    #[test]
    fn probe_answered_with_a_result_without_supported_versions_means_legacy() {
        for text in [r#"{}"#, r#"{"capabilities":{}}"#, r#"[]"#] {
            let raw = RawValue::from_string(text.into()).unwrap();
            let v = classify_probe(ProbeOutcome::Result(&raw));
            assert_eq!(
                v,
                ProbeVerdict::Legacy(LegacyEvidence::NotADiscoverResult),
                "{text}"
            );
            assert_eq!(v.era(), Era::Legacy);
        }
    }

    /// basic/versioning.mdx, "Protocol Version Negotiation": the highest common version.
    #[test]
    fn negotiation_picks_the_highest_common_version() {
        let c = negotiate_version(
            &["2025-11-25", "2026-07-28", "2025-06-18"],
            &strings(&["2025-06-18", "2026-07-28", "2025-11-25"]),
            "2027-01-01",
        )
        .unwrap();
        assert_eq!(c.version, "2026-07-28");
        assert_eq!(c.era, Some(Era::Modern));
        assert!(!c.same_as_requested);
        let legacy = negotiate_version(
            &["2026-07-28", "2025-11-25"],
            &strings(&["2025-11-25"]),
            "2026-07-28",
        )
        .unwrap();
        assert_eq!(legacy.version, "2025-11-25");
        assert_eq!(legacy.era, Some(Era::Legacy), "speak it through initialize");
    }

    /// basic/versioning.mdx: "surface an error ... if no compatible version exists".
    #[test]
    fn no_common_version_is_an_error_naming_both_lists() {
        let e = negotiate_version(&["2026-07-28"], &strings(&["2030-01-01"]), "2026-07-28")
            .unwrap_err();
        assert_eq!(
            e,
            VersionError::NoCommonVersion {
                ours: strings(&["2026-07-28"]),
                supported: strings(&["2030-01-01"]),
                requested: "2026-07-28".into()
            }
        );
        let text = e.to_string();
        assert!(text.contains("2026-07-28") && text.contains("2030-01-01"));
        assert!(negotiate_version(&["2026-07-28"], &[], "2026-07-28").is_err());
    }

    /// Issue 3, "-32022": retry at least once even when the same version was requested, and
    /// not forever.
    #[test]
    fn the_same_version_is_retried_once_then_refused() {
        let mut n = VersionNegotiation::new(&["2026-07-28"]);
        let supported = strings(&["2026-07-28"]);
        let c = n.on_unsupported(&supported, "2026-07-28").unwrap();
        assert!(c.same_as_requested);
        assert_eq!(c.version, "2026-07-28");
        assert!(matches!(
            n.on_unsupported(&supported, "2026-07-28"),
            Err(VersionError::StillRejected { .. })
        ));
    }

    /// Client notes §17.5: the spec sets no cap on version retries; ours is bounded.
    #[test]
    fn version_retries_are_bounded() {
        let mut n = VersionNegotiation::with_max_retries(&["2026-07-28", "2025-11-25"], 1);
        let c = n
            .on_unsupported(&strings(&["2025-11-25"]), "2026-07-28")
            .unwrap();
        assert_eq!(c.version, "2025-11-25");
        assert!(matches!(
            n.on_unsupported(&strings(&["2026-07-28"]), "2025-11-25"),
            Err(VersionError::StillRejected { .. })
        ));
    }

    fn required_from(fixture: &str) -> JsonObject {
        let Http400Verdict::Modern(ModernError::MissingRequiredClientCapability { required }) =
            classify_http_400(fixture.as_bytes())
        else {
            panic!("not -32021")
        };
        required
    }

    /// basic/index.mdx, "Per-request protocol fields": -32021 lists the missing capabilities;
    /// the client declares them when the host supports them.
    #[test]
    fn missing_capability_is_declared_when_the_host_supports_it() {
        let required = required_from(MISSING_CAP);
        let declared = ClientCapabilities::none();
        assert_eq!(
            missing_capabilities(&declared, &required),
            Some(json!({"elicitation": {"form": {}}}))
        );
        let host = ClientCapabilities::none()
            .with_elicitation_form()
            .with_elicitation_url()
            .with_sampling();
        let retry = declare_required(&declared, &host, &required).unwrap();
        assert_eq!(retry.to_value(), json!({"elicitation": {"form": {}}}));
        assert_eq!(missing_capabilities(&retry, &required), None);
    }

    /// basic/index.mdx: a capability the host lacks is not declared; a typed error says which.
    #[test]
    fn missing_capability_the_host_lacks_is_a_typed_error() {
        let required = required_from(MISSING_CAP);
        let url_only = ClientCapabilities::none().with_elicitation_url();
        assert_eq!(
            declare_required(&ClientCapabilities::none(), &url_only, &required),
            Err(CapabilityError::HostLacks {
                missing: json!({"elicitation": {"form": {}}})
            })
        );
        let ext = json!({"extensions": {"io.modelcontextprotocol/ui": {}}});
        let e = declare_required(
            &ClientCapabilities::none(),
            &ClientCapabilities::none().with_sampling(),
            ext.as_object().unwrap(),
        )
        .unwrap_err();
        assert_eq!(e, CapabilityError::HostLacks { missing: ext });
    }

    /// basic/index.mdx: a -32021 naming a declared capability and an undeclared one the host
    /// supports declares the second; the declared one counts as supported even when the host's
    /// list of extra capabilities leaves it out.
    #[test]
    fn a_declared_capability_counts_as_supported() {
        let declared = ClientCapabilities::none().with_elicitation_form();
        let host = ClientCapabilities::none().with_sampling();
        let need = json!({"elicitation": {"form": {}}, "sampling": {}});
        let retry = declare_required(&declared, &host, need.as_object().unwrap()).unwrap();
        assert_eq!(
            retry.to_value(),
            json!({"elicitation": {"form": {}}, "sampling": {}})
        );
    }

    /// Module rule: a -32021 naming only what was already declared is not retried.
    #[test]
    fn missing_capability_already_declared_is_not_retried() {
        let required = required_from(MISSING_CAP);
        let declared = ClientCapabilities::none().with_elicitation_form();
        assert!(matches!(
            declare_required(&declared, &declared, &required),
            Err(CapabilityError::AlreadyDeclared { .. })
        ));
    }

    /// basic/versioning.mdx, "Extension Negotiation": one required extension is declared with
    /// the host's settings, the host's other extensions are not.
    #[test]
    fn required_extension_is_declared_with_the_hosts_settings_only() {
        let mut settings = JsonObject::new();
        settings.insert("mimeTypes".into(), json!(["text/html;profile=mcp-app"]));
        let host = ClientCapabilities::none()
            .with_extension("io.modelcontextprotocol/ui", settings)
            .unwrap()
            .with_extension("com.example/other", JsonObject::new())
            .unwrap();
        let declared = ClientCapabilities::none().with_elicitation_form();
        let required = json!({"extensions": {"io.modelcontextprotocol/ui": {}}});
        let retry = declare_required(&declared, &host, required.as_object().unwrap()).unwrap();
        assert_eq!(
            retry.to_value(),
            json!({
                "elicitation": {"form": {}},
                "extensions": {"io.modelcontextprotocol/ui": {"mimeTypes": ["text/html;profile=mcp-app"]}}
            })
        );
    }

    /// basic/versioning.mdx: "Clients SHOULD cache the result for the lifetime of the server
    /// process (stdio) or origin (HTTP) ... re-probing if the cached assumption later fails".
    #[test]
    fn era_verdict_is_cached_per_server_until_invalidated() {
        let mut cache = EraCache::new();
        let a = http_server_key("https://Example.COM:443/mcp?x=1").unwrap();
        let b = http_server_key("https://example.com/other").unwrap();
        assert_eq!(a, b);
        cache.record(
            a.clone(),
            CachedEra {
                era: Era::Legacy,
                protocol_version: Some("2025-11-25".into()),
            },
        );
        assert_eq!(cache.get(&b).unwrap().era, Era::Legacy);
        let other = http_server_key("https://example.com:8443/mcp").unwrap();
        assert!(cache.get(&other).is_none(), "another origin");
        assert!(cache.invalidate(&a).is_some());
        assert!(cache.get(&a).is_none());
        assert!(cache.is_empty());
    }

    /// basic/versioning.mdx: the HTTP key is the origin.
    #[test]
    fn http_server_key_is_the_origin() {
        assert_eq!(
            http_server_key("http://user:pw@LocalHost:80/mcp#f").as_deref(),
            Some("http://localhost")
        );
        assert_eq!(
            http_server_key("http://[::1]:8080/mcp").as_deref(),
            Some("http://[::1]:8080")
        );
        assert_eq!(
            http_server_key("HTTPS://h:8443").as_deref(),
            Some("https://h:8443")
        );
        assert_eq!(http_server_key("no-scheme"), None);
        assert_eq!(http_server_key("http:///path"), None);
        assert_eq!(http_server_key("http://[::1"), None);
    }

    /// basic/versioning.mdx: the stdio key is the process (its command line), unambiguous.
    #[test]
    fn stdio_server_key_is_the_command_line_unambiguously() {
        assert_ne!(
            stdio_server_key("npx", &["a b"]),
            stdio_server_key("npx", &["a", "b"])
        );
        assert_eq!(
            stdio_server_key("uvx", &["mcp-server"]),
            r#"["uvx","mcp-server"]"#
        );
    }

    /// basic/versioning.mdx, "Terminology": modern from 2026-07-28, legacy before.
    #[test]
    fn versions_before_2026_07_28_are_legacy() {
        assert_eq!(era_of_version("2026-07-28"), Some(Era::Modern));
        assert_eq!(era_of_version("2027-01-01"), Some(Era::Modern));
        assert_eq!(era_of_version("2025-11-25"), Some(Era::Legacy));
        assert_eq!(era_of_version("2024-11-05"), Some(Era::Legacy));
        assert_eq!(era_of_version("draft"), None);
        assert_eq!(era_of_version("2026-7-28"), None);
    }
}

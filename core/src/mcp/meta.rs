//! The per-request `_meta` of MCP `2026-07-28`, the client's identity and capabilities, and
//! request ids.
//!
//! `2026-07-28` has no `initialize` handshake: every request stands on its own and carries, in
//! `params._meta` (`basic/index.mdx`, "`_meta`", "Per-request protocol fields"):
//! - `io.modelcontextprotocol/protocolVersion` (required),
//! - `io.modelcontextprotocol/clientCapabilities` (required; `{}` declares no optional
//!   capability; declared on every request, servers never infer it from earlier ones),
//! - `io.modelcontextprotocol/clientInfo` (recommended on every request),
//! - `io.modelcontextprotocol/logLevel` (optional; without it the server sends no log messages),
//! - `progressToken` (optional) and the W3C trace context keys `traceparent`, `tracestate`,
//!   `baggage` (optional; the one exception to the prefix rule).
//!
//! [`build_request`] writes that object into a request's params. Keys the caller already put in
//! `params._meta` are kept; for every key [`RequestMeta`] sets, [`RequestMeta`] wins, so the
//! version and capabilities on the wire are always the ones the client negotiated (and the
//! `MCP-Protocol-Version` header mirrored from the body agrees with them). Caller keys must follow
//! the spec's key syntax ([`validate_meta_key`]).
//!
//! [`IdAllocator`] hands out request ids: integers, never `null`, never equal to an id still
//! outstanding (`basic/index.mdx`, "Requests"), and a fresh one for every resend and every MRTR
//! retry (`basic/patterns/mrtr.mdx`; changelog item 9).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::jsonrpc::Id;

/// `_meta` key of the request's protocol version (required).
pub const PROTOCOL_VERSION_KEY: &str = "io.modelcontextprotocol/protocolVersion";
/// `_meta` key of the client's capabilities for this request (required).
pub const CLIENT_CAPABILITIES_KEY: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` key of the client's self-reported identity (recommended).
pub const CLIENT_INFO_KEY: &str = "io.modelcontextprotocol/clientInfo";
/// `_meta` key of the minimum log level the server may emit for this request (optional).
pub const LOG_LEVEL_KEY: &str = "io.modelcontextprotocol/logLevel";
/// `_meta` key of a result's self-reported server identity.
pub const SERVER_INFO_KEY: &str = "io.modelcontextprotocol/serverInfo";
/// `_meta` key tying a notification to its `subscriptions/listen` request.
pub const SUBSCRIPTION_ID_KEY: &str = "io.modelcontextprotocol/subscriptionId";
/// `_meta` key opting a request into progress notifications.
pub const PROGRESS_TOKEN_KEY: &str = "progressToken";
/// `_meta` key of the W3C Trace Context `traceparent`.
pub const TRACEPARENT_KEY: &str = "traceparent";
/// `_meta` key of the W3C Trace Context `tracestate`.
pub const TRACESTATE_KEY: &str = "tracestate";
/// `_meta` key of the W3C Baggage.
pub const BAGGAGE_KEY: &str = "baggage";

/// A JSON object, as the schema's `JSONObject`.
pub type JsonObject = Map<String, Value>;

/// A progress token: a string or an integer, the same shape as a request id.
pub type ProgressToken = Id;

/// An icon of an [`Implementation`] (schema `Icon`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Icon {
    /// The icon's URI (`http(s):` or `data:`).
    pub src: String,
    /// A MIME type overriding the source's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Sizes such as `"48x48"` or `"any"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sizes: Option<Vec<String>>,
    /// `"light"` or `"dark"`; kept as sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub theme: Option<String>,
    /// Members this version of the schema does not name, kept as sent.
    #[serde(flatten)]
    pub other: JsonObject,
}

/// The name and version of an MCP implementation (schema `Implementation`): the client's
/// `clientInfo`, a server's `serverInfo`. Self-reported, for display and logs only.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Implementation {
    /// Programmatic name.
    pub name: String,
    /// The implementation's version.
    pub version: String,
    /// Human-readable display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What the implementation does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The implementation's website.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub website_url: Option<String>,
    /// Icons for a user interface.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icons: Option<Vec<Icon>>,
    /// Members this version of the schema does not name, kept as sent.
    #[serde(flatten)]
    pub other: JsonObject,
}

impl Implementation {
    /// An implementation with only the two required members.
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        Implementation {
            name: name.into(),
            version: version.into(),
            title: None,
            description: None,
            website_url: None,
            icons: None,
            other: JsonObject::new(),
        }
    }

    /// Sets the display title.
    pub fn with_title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }
}

/// The client's `elicitation` capability: which modes it supports.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ElicitationCapability {
    /// Form mode (structured data following a schema).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub form: Option<JsonObject>,
    /// URL mode (an out-of-band interaction).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<JsonObject>,
    /// Members this version of the schema does not name, kept as sent.
    #[serde(flatten)]
    pub other: JsonObject,
}

impl ElicitationCapability {
    /// Whether form mode is declared: `form` present, or neither mode named (`elicitation: {}`
    /// means form only, for compatibility with older revisions).
    pub fn form(&self) -> bool {
        self.form.is_some() || self.url.is_none()
    }

    /// Whether URL mode is declared.
    pub fn url(&self) -> bool {
        self.url.is_some()
    }
}

/// The client's `sampling` capability (deprecated by SEP-2577, still in the schema).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SamplingCapability {
    /// Context inclusion through `includeContext`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<JsonObject>,
    /// Tool use through `tools` and `toolChoice`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<JsonObject>,
    /// Members this version of the schema does not name, kept as sent.
    #[serde(flatten)]
    pub other: JsonObject,
}

/// What a client supports (schema `ClientCapabilities`); every absent member is omitted on the
/// wire, so the default value serializes as `{}` ("no optional capabilities").
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ClientCapabilities {
    /// Experimental, non-standard capabilities.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub experimental: Option<BTreeMap<String, JsonObject>>,
    /// Roots (deprecated). The legacy era's `listChanged` fits in the object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roots: Option<JsonObject>,
    /// Sampling (deprecated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling: Option<SamplingCapability>,
    /// Elicitation, by mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elicitation: Option<ElicitationCapability>,
    /// Extensions, keyed by extension identifier (a `_meta`-style key with a mandatory prefix).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extensions: Option<BTreeMap<String, JsonObject>>,
    /// Capabilities this version of the schema does not name (the set is open), kept as sent.
    #[serde(flatten)]
    pub other: JsonObject,
}

impl ClientCapabilities {
    /// No optional capability (`{}`).
    pub fn none() -> Self {
        Self::default()
    }

    /// Declares elicitation form mode.
    pub fn with_elicitation_form(mut self) -> Self {
        self.elicitation
            .get_or_insert_with(Default::default)
            .form
            .get_or_insert_with(JsonObject::new);
        self
    }

    /// Declares elicitation URL mode.
    pub fn with_elicitation_url(mut self) -> Self {
        self.elicitation
            .get_or_insert_with(Default::default)
            .url
            .get_or_insert_with(JsonObject::new);
        self
    }

    /// Declares sampling (deprecated feature).
    pub fn with_sampling(mut self) -> Self {
        self.sampling.get_or_insert_with(Default::default);
        self
    }

    /// Declares roots (deprecated feature).
    pub fn with_roots(mut self) -> Self {
        self.roots.get_or_insert_with(JsonObject::new);
        self
    }

    /// Declares an extension with its settings object (`{}` for none). The identifier must be
    /// a valid `_meta` key with a prefix (`basic/versioning.mdx`, "Extension Negotiation").
    pub fn with_extension(
        mut self,
        id: impl Into<String>,
        settings: JsonObject,
    ) -> Result<Self, MetaKeyError> {
        let id = id.into();
        validate_meta_key(&id, true)?;
        self.extensions
            .get_or_insert_with(BTreeMap::new)
            .insert(id, settings);
        Ok(self)
    }

    /// Whether elicitation form mode is declared (see [`ElicitationCapability::form`]).
    pub fn supports_elicitation_form(&self) -> bool {
        self.elicitation.as_ref().is_some_and(|e| e.form())
    }

    /// Whether elicitation URL mode is declared.
    pub fn supports_elicitation_url(&self) -> bool {
        self.elicitation.as_ref().is_some_and(|e| e.url())
    }

    /// The capabilities as a JSON value.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or_else(|_| Value::Object(JsonObject::new()))
    }
}

/// A log level (schema `LoggingLevel`, RFC 5424 severities).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LoggingLevel {
    /// Debug-level messages.
    Debug,
    /// Informational messages.
    Info,
    /// Normal but significant conditions.
    Notice,
    /// Warning conditions.
    Warning,
    /// Error conditions.
    Error,
    /// Critical conditions.
    Critical,
    /// Action must be taken immediately.
    Alert,
    /// The system is unusable.
    Emergency,
}

/// The metadata a client attaches to one request: written into `params._meta` by
/// [`build_request`].
#[derive(Clone, Debug, PartialEq)]
pub struct RequestMeta {
    /// `io.modelcontextprotocol/protocolVersion`.
    pub protocol_version: String,
    /// `io.modelcontextprotocol/clientCapabilities`: what the host supports for this request.
    pub client_capabilities: ClientCapabilities,
    /// `io.modelcontextprotocol/clientInfo`; `None` only when configured not to send it.
    pub client_info: Option<Implementation>,
    /// `io.modelcontextprotocol/logLevel`; `None` asks for no log messages.
    pub log_level: Option<LoggingLevel>,
    /// `progressToken`.
    pub progress_token: Option<ProgressToken>,
    /// W3C `traceparent`.
    pub traceparent: Option<String>,
    /// W3C `tracestate`.
    pub tracestate: Option<String>,
    /// W3C `baggage`.
    pub baggage: Option<String>,
}

impl RequestMeta {
    /// The required members only: the version and the capabilities.
    pub fn new(
        protocol_version: impl Into<String>,
        client_capabilities: ClientCapabilities,
    ) -> Self {
        RequestMeta {
            protocol_version: protocol_version.into(),
            client_capabilities,
            client_info: None,
            log_level: None,
            progress_token: None,
            traceparent: None,
            tracestate: None,
            baggage: None,
        }
    }

    /// Sets `clientInfo`.
    pub fn with_client_info(mut self, info: Implementation) -> Self {
        self.client_info = Some(info);
        self
    }

    /// Sets `logLevel`.
    pub fn with_log_level(mut self, level: LoggingLevel) -> Self {
        self.log_level = Some(level);
        self
    }

    /// Sets `progressToken`.
    pub fn with_progress_token(mut self, token: ProgressToken) -> Self {
        self.progress_token = Some(token);
        self
    }

    /// Sets the W3C trace context (`traceparent`, and `tracestate` when given).
    pub fn with_trace_context(
        mut self,
        traceparent: impl Into<String>,
        tracestate: Option<String>,
    ) -> Self {
        self.traceparent = Some(traceparent.into());
        self.tracestate = tracestate;
        self
    }

    /// The `_meta` members this value sets, by their spec key names.
    pub fn to_object(&self) -> JsonObject {
        let mut m = JsonObject::new();
        m.insert(
            PROTOCOL_VERSION_KEY.to_owned(),
            Value::String(self.protocol_version.clone()),
        );
        m.insert(
            CLIENT_CAPABILITIES_KEY.to_owned(),
            self.client_capabilities.to_value(),
        );
        if let Some(info) = &self.client_info {
            if let Ok(v) = serde_json::to_value(info) {
                m.insert(CLIENT_INFO_KEY.to_owned(), v);
            }
        }
        if let Some(level) = self.log_level {
            if let Ok(v) = serde_json::to_value(level) {
                m.insert(LOG_LEVEL_KEY.to_owned(), v);
            }
        }
        if let Some(token) = &self.progress_token {
            if let Ok(v) = serde_json::to_value(token) {
                m.insert(PROGRESS_TOKEN_KEY.to_owned(), v);
            }
        }
        for (key, value) in [
            (TRACEPARENT_KEY, &self.traceparent),
            (TRACESTATE_KEY, &self.tracestate),
            (BAGGAGE_KEY, &self.baggage),
        ] {
            if let Some(v) = value {
                m.insert(key.to_owned(), Value::String(v.clone()));
            }
        }
        m
    }
}

/// Why a `_meta` key (or an extension identifier) is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MetaKeyError {
    /// A label of the prefix breaks the label rules.
    #[error("_meta key {key:?}: prefix label {label:?} must start with a letter, end with a letter or digit, and hold only letters, digits and hyphens")]
    BadPrefixLabel {
        /// The key (at most 128 characters of it).
        key: String,
        /// The offending label.
        label: String,
    },
    /// The name breaks the name rules.
    #[error("_meta key {key:?}: the name must begin and end with a letter or digit and hold only letters, digits, '-', '_' and '.'")]
    BadName {
        /// The key (at most 128 characters of it).
        key: String,
    },
    /// A prefix is mandatory here (extension identifiers).
    #[error("extension identifier {key:?} needs a prefix such as \"com.example/\"")]
    PrefixRequired {
        /// The key (at most 128 characters of it).
        key: String,
    },
}

fn clip(key: &str) -> String {
    key.chars().take(128).collect()
}

fn label_ok(label: &str) -> bool {
    let b = label.as_bytes();
    match (b.first(), b.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphabetic()
                && last.is_ascii_alphanumeric()
                && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
        }
        _ => false,
    }
}

/// Checks a `_meta` key against the syntax of `basic/index.mdx` ("`_meta`", "Key name
/// format"): an optional prefix of dot-separated labels followed by `/`, then a name that, unless
/// empty, begins and ends with an alphanumeric and holds only alphanumerics, `-`, `_`, `.`.
/// With `require_prefix`, a key without a prefix is refused (extension identifiers).
pub fn validate_meta_key(key: &str, require_prefix: bool) -> Result<(), MetaKeyError> {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    match prefix {
        Some(p) => {
            for label in p.split('.') {
                if !label_ok(label) {
                    return Err(MetaKeyError::BadPrefixLabel {
                        key: clip(key),
                        label: clip(label),
                    });
                }
            }
        }
        None if require_prefix => return Err(MetaKeyError::PrefixRequired { key: clip(key) }),
        None => {}
    }
    let nb = name.as_bytes();
    let name_ok = match (nb.first(), nb.last()) {
        (None, _) | (_, None) => true,
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && nb
                    .iter()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        }
    };
    if name_ok {
        Ok(())
    } else {
        Err(MetaKeyError::BadName { key: clip(key) })
    }
}

/// Whether a key's prefix is reserved for MCP: its second label is `modelcontextprotocol` or
/// `mcp` (`io.modelcontextprotocol/`, `dev.mcp/`; not `com.example.mcp/`).
pub fn is_reserved_prefix(key: &str) -> bool {
    key.split_once('/')
        .and_then(|(prefix, _)| prefix.split('.').nth(1))
        .is_some_and(|second| second == "modelcontextprotocol" || second == "mcp")
}

/// Why a request could not be built (a caller error: nothing is sent).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// The method name is empty.
    #[error("a request needs a method name")]
    EmptyMethod,
    /// `params` is neither an object nor `null` (MCP params are always an object).
    #[error("params of {method:?} must be a JSON object")]
    ParamsNotObject {
        /// The method.
        method: String,
    },
    /// `params._meta` given by the caller is not an object.
    #[error("params._meta of {method:?} must be a JSON object")]
    MetaNotObject {
        /// The method.
        method: String,
    },
    /// A key the caller put in `params._meta` breaks the key syntax.
    #[error("params._meta of {method:?}: {source}")]
    MetaKey {
        /// The method.
        method: String,
        /// What is wrong with the key.
        #[source]
        source: MetaKeyError,
    },
}

/// Merges `meta` into `params._meta` (caller keys kept, [`RequestMeta`]'s keys win) and returns
/// `params`. `null` params count as `{}`.
pub fn params_with_meta(
    method: &str,
    params: Value,
    meta: &RequestMeta,
) -> Result<JsonObject, BuildError> {
    let mut params = match params {
        Value::Null => JsonObject::new(),
        Value::Object(m) => m,
        _ => {
            return Err(BuildError::ParamsNotObject {
                method: method.to_owned(),
            })
        }
    };
    let mut merged = match params.remove("_meta") {
        None | Some(Value::Null) => JsonObject::new(),
        Some(Value::Object(m)) => m,
        Some(_) => {
            return Err(BuildError::MetaNotObject {
                method: method.to_owned(),
            })
        }
    };
    for key in merged.keys() {
        validate_meta_key(key, false).map_err(|source| BuildError::MetaKey {
            method: method.to_owned(),
            source,
        })?;
    }
    merged.extend(meta.to_object());
    params.insert("_meta".to_owned(), Value::Object(merged));
    Ok(params)
}

/// The JSON text of a `2026-07-28` request: `{"jsonrpc":"2.0","id":…,"method":…,"params":…}`
/// with `meta` merged into `params._meta` (see [`params_with_meta`]).
pub fn build_request(
    id: &Id,
    method: &str,
    params: Value,
    meta: &RequestMeta,
) -> Result<String, BuildError> {
    if method.is_empty() {
        return Err(BuildError::EmptyMethod);
    }
    let params = params_with_meta(method, params, meta)?;
    Ok(request_text(id, method, Some(&params)))
}

/// The JSON text of a request (see [`crate::jsonrpc::request_text`]).
pub(crate) fn request_text(id: &Id, method: &str, params: Option<&JsonObject>) -> String {
    crate::jsonrpc::request_text(id, method, params)
}

/// Hands out request ids: positive integers counting up from the first, never equal to an id
/// still outstanding, and a fresh one for every retry or resend.
///
/// An id is outstanding from [`allocate`](Self::allocate) until [`release`](Self::release)
/// (the response arrived, or the request was abandoned). After `i64::MAX` the count wraps to 1
/// and skips ids still outstanding, so even then no outstanding id is handed out twice.
#[derive(Clone, Debug)]
pub struct IdAllocator {
    next: i64,
    outstanding: BTreeSet<i64>,
}

impl Default for IdAllocator {
    fn default() -> Self {
        Self::new()
    }
}

impl IdAllocator {
    /// Ids from 1.
    pub fn new() -> Self {
        Self::starting_at(1)
    }

    /// Ids from `first` (values below 1 start at 1).
    pub fn starting_at(first: i64) -> Self {
        IdAllocator {
            next: first.max(1),
            outstanding: BTreeSet::new(),
        }
    }

    /// A new id, outstanding until released.
    pub fn allocate(&mut self) -> Id {
        loop {
            let candidate = self.next;
            self.next = if candidate == i64::MAX {
                1
            } else {
                candidate + 1
            };
            if self.outstanding.insert(candidate) {
                return Id::from(candidate);
            }
        }
    }

    /// Ends `id`'s outstanding period; returns whether it was outstanding.
    pub fn release(&mut self, id: &Id) -> bool {
        match id {
            Id::Number(n) => i64::try_from(*n).is_ok_and(|n| self.outstanding.remove(&n)),
            Id::String(_) => false,
        }
    }

    /// The id for a retry or resend of the request sent as `previous`: `previous` is released
    /// and a new id allocated (never the same one).
    pub fn retry(&mut self, previous: &Id) -> Id {
        let fresh = self.allocate();
        self.release(previous);
        fresh
    }

    /// Whether `id` is outstanding.
    pub fn is_outstanding(&self, id: &Id) -> bool {
        match id {
            Id::Number(n) => i64::try_from(*n).is_ok_and(|n| self.outstanding.contains(&n)),
            Id::String(_) => false,
        }
    }

    /// How many ids are outstanding.
    pub fn outstanding(&self) -> usize {
        self.outstanding.len()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    const CALL_TOOL_REQUEST: &str =
        include_str!("../../../fixtures/mcp/examples/CallToolRequest/call-tool-request.json");

    fn example_meta() -> RequestMeta {
        RequestMeta::new("2026-07-28", ClientCapabilities::none())
            .with_client_info(Implementation::new("ExampleClient", "1.0.0"))
    }

    /// basic/index.mdx, "Per-request protocol fields"; examples/CallToolRequest.
    #[test]
    fn request_meta_uses_the_spec_key_names_and_reproduces_the_spec_example() {
        let text = build_request(
            &Id::from("call-tool-example"),
            "tools/call",
            json!({"name": "get_weather", "arguments": {"location": "New York"}}),
            &example_meta(),
        )
        .unwrap();
        let ours: Value = serde_json::from_str(&text).unwrap();
        let spec: Value = serde_json::from_str(CALL_TOOL_REQUEST).unwrap();
        assert_eq!(ours, spec);
    }

    /// basic/index.mdx, "Per-request protocol fields": protocolVersion and clientCapabilities
    /// are required on every request, clientInfo is not.
    #[test]
    fn required_meta_fields_are_present_even_without_client_info() {
        let meta = RequestMeta::new("2026-07-28", ClientCapabilities::none());
        let text = build_request(&Id::from(3), "tools/list", Value::Null, &meta).unwrap();
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            v["params"]["_meta"],
            json!({PROTOCOL_VERSION_KEY: "2026-07-28", CLIENT_CAPABILITIES_KEY: {}})
        );
        assert_eq!(v["jsonrpc"], "2.0");
        assert_eq!(v["id"], 3);
    }

    /// basic/index.mdx, "Reserved keys" and "OpenTelemetry trace context".
    #[test]
    fn optional_meta_fields_use_their_reserved_keys() {
        let meta = example_meta()
            .with_log_level(LoggingLevel::Warning)
            .with_progress_token(Id::from("p-1"))
            .with_trace_context(
                "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01",
                Some("vendor=1".to_owned()),
            );
        let m = meta.to_object();
        assert_eq!(m[LOG_LEVEL_KEY], "warning");
        assert_eq!(m["progressToken"], "p-1");
        assert_eq!(
            m["traceparent"],
            "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01"
        );
        assert_eq!(m["tracestate"], "vendor=1");
        assert!(!m.contains_key("baggage"));
        assert_eq!(m.len(), 7);
    }

    /// basic/index.mdx, "`_meta`": caller keys survive; the negotiated version and the declared
    /// capabilities are the ones written.
    #[test]
    fn caller_meta_keys_are_kept_and_the_clients_own_keys_win() {
        let params = json!({
            "name": "t",
            "_meta": {
                "com.example/trace": "x",
                PROTOCOL_VERSION_KEY: "1900-01-01",
                CLIENT_CAPABILITIES_KEY: {"sampling": {}},
                "progressToken": 9
            }
        });
        let text = build_request(&Id::from(1), "tools/call", params, &example_meta()).unwrap();
        let v: Value = serde_json::from_str(&text).unwrap();
        let m = &v["params"]["_meta"];
        assert_eq!(m["com.example/trace"], "x");
        assert_eq!(m[PROTOCOL_VERSION_KEY], "2026-07-28");
        assert_eq!(m[CLIENT_CAPABILITIES_KEY], json!({}));
        assert_eq!(m["progressToken"], 9, "kept: RequestMeta sets no token");
        assert_eq!(v["params"]["name"], "t");
    }

    /// basic/index.mdx, "Requests": params is an object.
    #[test]
    fn params_that_are_not_an_object_are_refused() {
        let meta = example_meta();
        assert_eq!(
            build_request(&Id::from(1), "tools/list", json!([1]), &meta),
            Err(BuildError::ParamsNotObject {
                method: "tools/list".into()
            })
        );
        assert_eq!(
            build_request(&Id::from(1), "tools/list", json!({"_meta": 5}), &meta),
            Err(BuildError::MetaNotObject {
                method: "tools/list".into()
            })
        );
        assert_eq!(
            build_request(&Id::from(1), "", Value::Null, &meta),
            Err(BuildError::EmptyMethod)
        );
    }

    /// basic/index.mdx, "Key name format".
    #[test]
    fn meta_keys_follow_the_key_name_format() {
        for ok in [
            "progressToken",
            "traceparent",
            "",
            "io.modelcontextprotocol/protocolVersion",
            "com.example/a.b-c_d",
            "com.example/",
            "x/y",
        ] {
            assert_eq!(validate_meta_key(ok, false), Ok(()), "{ok}");
        }
        for bad in [
            "-x",
            "x-",
            "a b",
            "1com.example/x",
            "com..example/x",
            "com.example-/x",
            "/x",
            "com.example/x/y",
            "com.example/_x",
        ] {
            assert!(validate_meta_key(bad, false).is_err(), "{bad}");
        }
        assert!(matches!(
            validate_meta_key("tasks", true),
            Err(MetaKeyError::PrefixRequired { .. })
        ));
        let text = build_request(
            &Id::from(1),
            "tools/list",
            json!({"_meta": {"bad key": 1}}),
            &example_meta(),
        );
        assert!(matches!(text, Err(BuildError::MetaKey { .. })));
    }

    /// basic/index.mdx, "Prefix": reserved when the second label is modelcontextprotocol or mcp.
    #[test]
    fn reserved_prefixes_are_those_whose_second_label_is_modelcontextprotocol_or_mcp() {
        for reserved in [
            "io.modelcontextprotocol/x",
            "dev.mcp/x",
            "org.modelcontextprotocol.api/x",
            "com.mcp.tools/x",
        ] {
            assert!(is_reserved_prefix(reserved), "{reserved}");
        }
        for free in ["com.example.mcp/x", "mcp/x", "progressToken"] {
            assert!(!is_reserved_prefix(free), "{free}");
        }
    }

    /// basic/versioning.mdx, "Extension Negotiation": identifiers need a prefix.
    #[test]
    fn extension_identifiers_need_a_prefix() {
        assert!(ClientCapabilities::none()
            .with_extension("ui", JsonObject::new())
            .is_err());
        let caps = ClientCapabilities::none()
            .with_extension("io.modelcontextprotocol/ui", JsonObject::new())
            .unwrap();
        assert_eq!(
            caps.to_value(),
            json!({"extensions": {"io.modelcontextprotocol/ui": {}}})
        );
    }

    /// schema.json `ClientCapabilities`: absent members are omitted, `{}` means none.
    #[test]
    fn absent_capabilities_are_omitted_on_the_wire() {
        assert_eq!(
            serde_json::to_string(&ClientCapabilities::none()).unwrap(),
            "{}"
        );
        let caps = ClientCapabilities::none()
            .with_elicitation_form()
            .with_elicitation_url();
        assert_eq!(
            caps.to_value(),
            json!({"elicitation": {"form": {}, "url": {}}})
        );
        assert_eq!(
            serde_json::to_value(Implementation::new("c", "1").with_title("C")).unwrap(),
            json!({"name": "c", "version": "1", "title": "C"})
        );
    }

    /// examples/ClientCapabilities: every spec example parses and re-serializes unchanged.
    #[test]
    fn client_capabilities_examples_round_trip() {
        for text in [
            include_str!("../../../fixtures/mcp/examples/ClientCapabilities/elicitation-form-and-url-mode-support.json"),
            include_str!("../../../fixtures/mcp/examples/ClientCapabilities/elicitation-form-only-implicit.json"),
            include_str!("../../../fixtures/mcp/examples/ClientCapabilities/extensions-ui-mime-types.json"),
            include_str!("../../../fixtures/mcp/examples/ClientCapabilities/roots-minimum-baseline-support.json"),
            include_str!("../../../fixtures/mcp/examples/ClientCapabilities/sampling-context-inclusion-support-deprecated.json"),
            include_str!("../../../fixtures/mcp/examples/ClientCapabilities/sampling-minimum-baseline-support.json"),
            include_str!("../../../fixtures/mcp/examples/ClientCapabilities/sampling-tool-use-support.json"),
        ] {
            let spec: Value = serde_json::from_str(text).unwrap();
            let caps: ClientCapabilities = serde_json::from_value(spec.clone()).unwrap();
            assert_eq!(caps.to_value(), spec);
        }
    }

    /// examples/ClientCapabilities/elicitation-form-only-implicit.json: `{}` means form only.
    #[test]
    fn empty_elicitation_object_means_form_mode_only() {
        let caps: ClientCapabilities = serde_json::from_str(include_str!(
            "../../../fixtures/mcp/examples/ClientCapabilities/elicitation-form-only-implicit.json"
        ))
        .unwrap();
        assert!(caps.supports_elicitation_form());
        assert!(!caps.supports_elicitation_url());
        let url_only = ClientCapabilities::none().with_elicitation_url();
        assert!(!url_only.supports_elicitation_form());
        assert!(url_only.supports_elicitation_url());
        assert!(!ClientCapabilities::none().supports_elicitation_form());
    }

    /// basic/index.mdx, "Requests": ids never null, never equal to an outstanding one.
    #[test]
    fn a_retry_gets_a_new_id_and_releases_the_old_one() {
        let mut ids = IdAllocator::new();
        let first = ids.allocate();
        assert_eq!(first, Id::from(1));
        let again = ids.retry(&first);
        assert_ne!(again, first);
        assert!(!ids.is_outstanding(&first));
        assert!(ids.is_outstanding(&again));
        assert!(ids.release(&again));
        assert!(!ids.release(&again), "released twice");
        assert!(!ids.release(&Id::from("x")));
        assert_eq!(ids.outstanding(), 0);
    }

    /// basic/index.mdx, "Requests": after the counter wraps, outstanding ids are skipped.
    #[test]
    fn allocation_wraps_around_without_reusing_outstanding_ids() {
        let mut ids = IdAllocator::new();
        let one = ids.allocate();
        let two = ids.allocate();
        ids.next = i64::MAX;
        assert_eq!(ids.allocate(), Id::from(i64::MAX));
        ids.release(&one);
        // 1 is free again, 2 is still outstanding.
        assert_eq!(ids.allocate(), Id::from(1));
        let next = ids.allocate();
        assert_ne!(next, two);
        assert_eq!(next, Id::from(3));
    }

    #[derive(Debug, Clone)]
    enum Op {
        Allocate,
        Release(usize),
        Retry(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            Just(Op::Allocate),
            any::<usize>().prop_map(Op::Release),
            any::<usize>().prop_map(Op::Retry),
        ]
    }

    proptest! {
        /// basic/index.mdx, "Requests"; basic/patterns/mrtr.mdx: across any sequence of
        /// allocations, releases and retries, no id is handed out twice while outstanding (and,
        /// before the counter wraps, never twice at all).
        #[test]
        fn ids_are_unique_across_any_sequence_of_retries(
            start in prop_oneof![Just(1i64), Just(i64::MAX - 3)],
            ops in proptest::collection::vec(op(), 0..200),
        ) {
            let mut ids = IdAllocator::starting_at(start);
            let mut live: Vec<Id> = Vec::new();
            let mut ever: Vec<Id> = Vec::new();
            for op in ops {
                let fresh = match op {
                    Op::Allocate => Some(ids.allocate()),
                    Op::Release(i) if !live.is_empty() => {
                        let id = live.remove(i % live.len());
                        prop_assert!(ids.release(&id));
                        None
                    }
                    Op::Retry(i) if !live.is_empty() => {
                        let old = live.remove(i % live.len());
                        let new = ids.retry(&old);
                        prop_assert_ne!(&new, &old);
                        Some(new)
                    }
                    _ => None,
                };
                if let Some(id) = fresh {
                    prop_assert!(!live.contains(&id), "reused outstanding id {}", id);
                    if start == 1 {
                        prop_assert!(!ever.contains(&id), "reused id {}", id);
                    }
                    live.push(id.clone());
                    ever.push(id);
                }
                prop_assert_eq!(ids.outstanding(), live.len());
            }
        }
    }
}

//! `server/discover` (`server/discover.mdx`): the request, and its typed result.
//!
//! The request carries nothing but the standard `_meta` ([`discover_request`]). The result
//! ([`DiscoverResult`]) names the protocol versions the server supports, its capabilities, its
//! identity (in `_meta["io.modelcontextprotocol/serverInfo"]`), optional instructions, and the
//! caching hints `ttlMs` / `cacheScope` (`server/utilities/caching.mdx`).
//!
//! Reading is tolerant where that is safe and strict where the value matters:
//! - `supportedVersions` and `capabilities` are required: without them there is nothing to
//!   act on, so their absence (or a wrong type) is a [`DiscoverError`] naming the member;
//! - an absent `resultType` means `"complete"` (servers of earlier versions omit it,
//!   `basic/index.mdx`); any other value than `"complete"` is refused;
//! - absent `ttlMs` / `cacheScope` are kept as absent (the cache treats them as "stale at once");
//! - members this schema does not name are kept verbatim in [`DiscoverResult::other`], so an
//!   older shape such as a top-level `serverInfo` (still sent by some servers and by the
//!   conformance mocks) survives, and [`DiscoverResult::server_info`] falls back to it;
//! - `null` for an optional member counts as absent.
//!
//! [`DiscoverResult::to_value`] writes the result back; reading that again gives an equal value.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::meta::{request_text, Implementation, JsonObject, RequestMeta, SERVER_INFO_KEY};
use crate::jsonrpc::Id;

/// The method name.
pub const METHOD: &str = "server/discover";

/// The JSON text of a `server/discover` request: params hold only `_meta`.
pub fn discover_request(id: &Id, meta: &RequestMeta) -> String {
    let mut params = JsonObject::new();
    params.insert("_meta".to_owned(), Value::Object(meta.to_object()));
    request_text(id, METHOD, Some(&params))
}

/// A list capability (`prompts`, `tools`): whether list-changed notifications are sent.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListCapability {
    /// Whether the server notifies list changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub list_changed: Option<bool>,
    /// Members this version of the schema does not name, kept as sent.
    #[serde(flatten)]
    pub other: JsonObject,
}

/// The `resources` capability.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourcesCapability {
    /// Whether single resources can be subscribed to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscribe: Option<bool>,
    /// Whether the server notifies list changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub list_changed: Option<bool>,
    /// Members this version of the schema does not name, kept as sent.
    #[serde(flatten)]
    pub other: JsonObject,
}

/// What a server supports (schema `ServerCapabilities`); an open set.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerCapabilities {
    /// Experimental, non-standard capabilities.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub experimental: Option<BTreeMap<String, JsonObject>>,
    /// Log messages (deprecated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logging: Option<JsonObject>,
    /// Argument completion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completions: Option<JsonObject>,
    /// Prompts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompts: Option<ListCapability>,
    /// Resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourcesCapability>,
    /// Tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<ListCapability>,
    /// Extensions, keyed by identifier (e.g. `io.modelcontextprotocol/tasks`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extensions: Option<BTreeMap<String, JsonObject>>,
    /// Capabilities this version of the schema does not name, kept as sent.
    #[serde(flatten)]
    pub other: JsonObject,
}

/// `cacheScope` as the server sent it: who may reuse a cached result. Unknown values are kept
/// so a result re-serializes as received; [`crate::mcp::cache::CacheScope`] is the scope the
/// cache acts on (see the `From` conversion: anything but `public` is private).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum CacheScopeHint {
    /// No user-specific data: shareable across authorization contexts.
    Public,
    /// Reusable only within the same authorization context.
    Private,
    /// A value this schema does not define, kept as sent (treat like `Private`).
    Other(String),
}

impl CacheScopeHint {
    /// The wire spelling.
    pub fn as_str(&self) -> &str {
        match self {
            CacheScopeHint::Public => "public",
            CacheScopeHint::Private => "private",
            CacheScopeHint::Other(s) => s,
        }
    }

    /// Reads the wire spelling.
    pub fn from_wire(s: &str) -> Self {
        match s {
            "public" => CacheScopeHint::Public,
            "private" => CacheScopeHint::Private,
            other => CacheScopeHint::Other(other.to_owned()),
        }
    }
}

/// The result of `server/discover`.
#[derive(Clone, Debug, PartialEq)]
pub struct DiscoverResult {
    /// `supportedVersions`: the protocol versions the server supports.
    pub supported_versions: Vec<String>,
    /// `capabilities`.
    pub capabilities: ServerCapabilities,
    /// `instructions`, natural-language guidance for a model.
    pub instructions: Option<String>,
    /// `ttlMs` as sent (an integral number; see [`DiscoverResult::ttl`]).
    pub ttl_ms: Option<i64>,
    /// `cacheScope` as sent.
    pub cache_scope: Option<CacheScopeHint>,
    /// The result's `_meta`, verbatim.
    pub meta: Option<JsonObject>,
    /// Every other member, verbatim (an older top-level `serverInfo` lands here).
    pub other: JsonObject,
}

/// Why a `server/discover` result could not be read (the server broke the protocol).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DiscoverError {
    /// The text is not JSON.
    #[error("server/discover result is not JSON: {0}")]
    NotJson(String),
    /// The result is not a JSON object.
    #[error("server/discover result is not a JSON object")]
    NotAnObject,
    /// A required member is absent.
    #[error("server/discover result has no {0:?} member")]
    Missing(&'static str),
    /// A member has the wrong type.
    #[error("server/discover result member {field:?} is not {expected}")]
    WrongType {
        /// The member.
        field: &'static str,
        /// What it should be.
        expected: &'static str,
    },
    /// `resultType` is something else than `"complete"`.
    #[error("server/discover result has resultType {0:?}, expected \"complete\"")]
    ResultType(String),
}

fn wrong(field: &'static str, expected: &'static str) -> DiscoverError {
    DiscoverError::WrongType { field, expected }
}

/// Removes `key`, counting `null` as absent.
fn take(m: &mut JsonObject, key: &str) -> Option<Value> {
    m.remove(key).filter(|v| !v.is_null())
}

fn integral(v: &Value) -> Option<i64> {
    if let Some(i) = v.as_i64() {
        return Some(i);
    }
    if v.as_u64().is_some() {
        return Some(i64::MAX);
    }
    // A float that is a whole number (`3600000.0`); saturating conversion is intended.
    v.as_f64()
        .filter(|f| f.is_finite() && f.fract() == 0.0)
        .map(|f| f as i64)
}

impl DiscoverResult {
    /// Reads the result from its JSON text (the `result` member of the response).
    pub fn parse(json: &str) -> Result<Self, DiscoverError> {
        let v: Value =
            serde_json::from_str(json).map_err(|e| DiscoverError::NotJson(e.to_string()))?;
        Self::from_value(v)
    }

    /// Reads the result from a raw `result` member (as [`crate::jsonrpc::Message`] gives it).
    pub fn from_raw(raw: &RawValue) -> Result<Self, DiscoverError> {
        Self::parse(raw.get())
    }

    /// Reads the result from a JSON value.
    pub fn from_value(v: Value) -> Result<Self, DiscoverError> {
        let Value::Object(mut m) = v else {
            return Err(DiscoverError::NotAnObject);
        };
        match take(&mut m, "resultType") {
            None => {}
            Some(Value::String(s)) if s == "complete" => {}
            Some(Value::String(s)) => {
                return Err(DiscoverError::ResultType(s.chars().take(64).collect()))
            }
            Some(_) => return Err(wrong("resultType", "a string")),
        }
        let supported_versions = match m.remove("supportedVersions") {
            None => return Err(DiscoverError::Missing("supportedVersions")),
            Some(v) => serde_json::from_value::<Vec<String>>(v)
                .map_err(|_| wrong("supportedVersions", "an array of strings"))?,
        };
        let capabilities = match m.remove("capabilities") {
            None => return Err(DiscoverError::Missing("capabilities")),
            Some(v @ Value::Object(_)) => serde_json::from_value::<ServerCapabilities>(v)
                .map_err(|_| wrong("capabilities", "a valid ServerCapabilities object"))?,
            Some(_) => return Err(wrong("capabilities", "an object")),
        };
        let instructions = match take(&mut m, "instructions") {
            None => None,
            Some(Value::String(s)) => Some(s),
            Some(_) => return Err(wrong("instructions", "a string")),
        };
        let ttl_ms = match take(&mut m, "ttlMs") {
            None => None,
            Some(v) => Some(integral(&v).ok_or(wrong("ttlMs", "an integer"))?),
        };
        let cache_scope = match take(&mut m, "cacheScope") {
            None => None,
            Some(Value::String(s)) => Some(CacheScopeHint::from_wire(&s)),
            Some(_) => return Err(wrong("cacheScope", "a string")),
        };
        let meta = match take(&mut m, "_meta") {
            None => None,
            Some(Value::Object(o)) => Some(o),
            Some(_) => return Err(wrong("_meta", "an object")),
        };
        Ok(DiscoverResult {
            supported_versions,
            capabilities,
            instructions,
            ttl_ms,
            cache_scope,
            meta,
            other: m,
        })
    }

    /// The server's self-reported identity: `_meta["io.modelcontextprotocol/serverInfo"]`, else
    /// an older top-level `serverInfo`; `None` if neither is a valid `Implementation`. For
    /// display and logs only (`server/discover.mdx`: never for behaviour or security).
    pub fn server_info(&self) -> Option<Implementation> {
        let from_meta = self.meta.as_ref().and_then(|m| m.get(SERVER_INFO_KEY));
        from_meta
            .and_then(|v| serde_json::from_value(v.clone()).ok())
            .or_else(|| {
                self.other
                    .get("serverInfo")
                    .and_then(|v| serde_json::from_value(v.clone()).ok())
            })
    }

    /// How long the result stays fresh after receipt: `ttlMs` read by the cache's one rule
    /// ([`crate::mcp::cache::ttl_from_hint`]: absent or negative is 0). The value can be huge:
    /// add it to an `Instant` with [`crate::backoff::saturating_add`], never with `+`.
    pub fn ttl(&self) -> Duration {
        crate::mcp::cache::ttl_from_hint(self.ttl_ms.map(serde_json::Value::from).as_ref())
    }

    /// Whether `version` is in `supportedVersions`.
    pub fn supports_version(&self, version: &str) -> bool {
        self.supported_versions.iter().any(|v| v == version)
    }

    /// The result as JSON (`resultType` written as `"complete"`).
    pub fn to_value(&self) -> Value {
        let mut m = self.other.clone();
        m.insert("resultType".to_owned(), Value::from("complete"));
        m.insert(
            "supportedVersions".to_owned(),
            Value::from(self.supported_versions.clone()),
        );
        m.insert(
            "capabilities".to_owned(),
            serde_json::to_value(&self.capabilities).unwrap_or_else(|_| Value::Object(Map::new())),
        );
        if let Some(i) = &self.instructions {
            m.insert("instructions".to_owned(), Value::from(i.clone()));
        }
        if let Some(t) = self.ttl_ms {
            m.insert("ttlMs".to_owned(), Value::from(t));
        }
        if let Some(s) = &self.cache_scope {
            m.insert("cacheScope".to_owned(), Value::from(s.as_str()));
        }
        if let Some(meta) = &self.meta {
            m.insert("_meta".to_owned(), Value::Object(meta.clone()));
        }
        Value::Object(m)
    }
}

impl From<&CacheScopeHint> for crate::mcp::cache::CacheScope {
    /// Only `public` is shared; `private` and unknown values stay in their authorization context.
    fn from(hint: &CacheScopeHint) -> Self {
        match hint {
            CacheScopeHint::Public => crate::mcp::cache::CacheScope::Public,
            CacheScopeHint::Private | CacheScopeHint::Other(_) => {
                crate::mcp::cache::CacheScope::Private
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::jsonrpc::Message;
    use crate::mcp::meta::ClientCapabilities;
    use serde_json::json;

    const RESULT: &str = include_str!(
        "../../../fixtures/mcp/examples/DiscoverResult/server-capabilities-discovery.json"
    );
    const RESPONSE: &str = include_str!(
        "../../../fixtures/mcp/examples/DiscoverResultResponse/discover-result-response.json"
    );
    const REQUEST: &str =
        include_str!("../../../fixtures/mcp/examples/DiscoverRequest/server-discover-request.json");

    fn example_meta() -> RequestMeta {
        RequestMeta::new("2026-07-28", ClientCapabilities::none())
            .with_client_info(Implementation::new("ExampleClient", "1.0.0"))
    }

    /// server/discover.mdx, "Request": params carry only `_meta`; examples/DiscoverRequest.
    #[test]
    fn discover_request_reproduces_the_spec_example() {
        let text = discover_request(&Id::from("discover-1"), &example_meta());
        let ours: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(ours, serde_json::from_str::<Value>(REQUEST).unwrap());
    }

    /// server/discover.mdx, "Request": the exact bytes the client sends.
    #[test]
    fn discover_request_body_snapshot() {
        insta::assert_snapshot!(discover_request(&Id::from(1), &example_meta()));
    }

    /// server/discover.mdx, "Response"; examples/DiscoverResult.
    #[test]
    fn discover_result_reads_the_spec_example() {
        let r = DiscoverResult::parse(RESULT).unwrap();
        assert_eq!(r.supported_versions, vec!["2026-07-28".to_owned()]);
        assert!(r.capabilities.tools.is_some());
        assert!(r.capabilities.resources.is_some());
        assert!(r.capabilities.prompts.is_none());
        assert_eq!(r.ttl(), Duration::from_millis(3_600_000));
        assert_eq!(r.cache_scope, Some(CacheScopeHint::Public));
        assert!(r
            .instructions
            .as_deref()
            .unwrap()
            .starts_with("This server"));
        assert_eq!(
            r.server_info(),
            Some(Implementation::new("ExampleServer", "1.0.0"))
        );
        assert!(r.supports_version("2026-07-28"));
        assert!(!r.supports_version("2025-11-25"));
    }

    /// examples/DiscoverResultResponse: the result inside a JSON-RPC response.
    #[test]
    fn discover_result_reads_from_the_spec_response() {
        let Message::Response { id, result } = Message::parse(RESPONSE).unwrap() else {
            panic!("not a response")
        };
        assert_eq!(id, Id::from("discover-1"));
        let r = DiscoverResult::from_raw(result).unwrap();
        assert_eq!(r.instructions, None);
        assert_eq!(r.supported_versions, vec!["2026-07-28".to_owned()]);
    }

    /// server/discover.mdx, "Response": writing the result back gives the spec's JSON.
    #[test]
    fn discover_result_round_trips_the_spec_example() {
        let spec: Value = serde_json::from_str(RESULT).unwrap();
        let r = DiscoverResult::from_value(spec.clone()).unwrap();
        assert_eq!(r.to_value(), spec);
        assert_eq!(DiscoverResult::from_value(r.to_value()).unwrap(), r);
    }

    /// client notes §6: older servers send a top-level `serverInfo`; it is kept and used.
    #[test]
    fn top_level_server_info_of_the_older_shape_is_tolerated() {
        let old = json!({
            "supportedVersions": ["2026-07-28"],
            "capabilities": {"tools": {"listChanged": true}, "vendor": {"x": 1}},
            "serverInfo": {"name": "mock", "version": "0.1"},
            "protocolVersion": "2026-07-28",
            "ttlMs": 0,
            "cacheScope": "public"
        });
        let r = DiscoverResult::from_value(old.clone()).unwrap();
        assert_eq!(r.server_info(), Some(Implementation::new("mock", "0.1")));
        assert!(r.other.contains_key("protocolVersion"));
        assert_eq!(r.capabilities.other["vendor"], json!({"x": 1}));
        let mut expected = old;
        expected["resultType"] = json!("complete");
        assert_eq!(r.to_value(), expected);
    }

    /// basic/index.mdx, "Result": an absent resultType means "complete"; others are invalid.
    #[test]
    fn absent_result_type_means_complete_and_others_are_refused() {
        let base = json!({"supportedVersions": [], "capabilities": {}});
        assert!(DiscoverResult::from_value(base.clone()).is_ok());
        let mut other = base;
        other["resultType"] = json!("input_required");
        assert_eq!(
            DiscoverResult::from_value(other),
            Err(DiscoverError::ResultType("input_required".into()))
        );
    }

    /// schema.json `DiscoverResult.required`: supportedVersions and capabilities are needed.
    #[test]
    fn missing_supported_versions_or_capabilities_is_a_typed_error() {
        let e = DiscoverResult::from_value(json!({"capabilities": {}})).unwrap_err();
        assert_eq!(e, DiscoverError::Missing("supportedVersions"));
        assert!(e.to_string().contains("supportedVersions"));
        assert_eq!(
            DiscoverResult::from_value(json!({"supportedVersions": ["x"]})),
            Err(DiscoverError::Missing("capabilities"))
        );
        assert_eq!(
            DiscoverResult::from_value(json!({"supportedVersions": [1], "capabilities": {}})),
            Err(DiscoverError::WrongType {
                field: "supportedVersions",
                expected: "an array of strings"
            })
        );
        assert_eq!(
            DiscoverResult::from_value(json!({"supportedVersions": [], "capabilities": []})),
            Err(DiscoverError::WrongType {
                field: "capabilities",
                expected: "an object"
            })
        );
        assert_eq!(DiscoverResult::parse("[]"), Err(DiscoverError::NotAnObject));
        assert!(matches!(
            DiscoverResult::parse("{"),
            Err(DiscoverError::NotJson(_))
        ));
    }

    /// server/utilities/caching.mdx: absent or negative ttlMs is stale at once.
    #[test]
    fn absent_or_negative_ttl_means_zero() {
        let mut v = json!({"supportedVersions": [], "capabilities": {}});
        assert_eq!(
            DiscoverResult::from_value(v.clone()).unwrap().ttl(),
            Duration::ZERO
        );
        v["ttlMs"] = json!(-5);
        let r = DiscoverResult::from_value(v.clone()).unwrap();
        assert_eq!(r.ttl(), Duration::ZERO);
        assert_eq!(r.ttl_ms, Some(-5));
        v["ttlMs"] = json!(1500.0);
        assert_eq!(
            DiscoverResult::from_value(v.clone()).unwrap().ttl(),
            Duration::from_millis(1500)
        );
        v["ttlMs"] = json!(1.5);
        assert_eq!(
            DiscoverResult::from_value(v.clone()),
            Err(DiscoverError::WrongType {
                field: "ttlMs",
                expected: "an integer"
            })
        );
        v["ttlMs"] = json!(null);
        v["cacheScope"] = json!("shared");
        let r = DiscoverResult::from_value(v).unwrap();
        assert_eq!(r.cache_scope, Some(CacheScopeHint::Other("shared".into())));
        assert_eq!(r.ttl_ms, None);
    }
}

#[cfg(test)]
mod scope_conversion_tests {
    use super::CacheScopeHint;
    use crate::mcp::cache::CacheScope;

    /// The caching-hints spec (SEP-2549, digest §10): only `public` results are shared across
    /// authorization contexts; an unknown scope is treated as `private`.
    #[test]
    fn only_public_hint_is_a_shared_scope() {
        assert_eq!(
            CacheScope::from(&CacheScopeHint::Public),
            CacheScope::Public
        );
        assert_eq!(
            CacheScope::from(&CacheScopeHint::Private),
            CacheScope::Private
        );
        assert_eq!(
            CacheScope::from(&CacheScopeHint::from_wire("team")),
            CacheScope::Private
        );
    }
}

//! `cache`: a bounded, sans-IO cache for results that carry `ttlMs` / `cacheScope`
//! (`server/utilities/caching.mdx`, SEP-2549).
//!
//! The cacheable operations are `server/discover`, `tools/list`, `prompts/list`,
//! `resources/list`, `resources/templates/list` and `resources/read` ("Cacheable Results").
//! One [`ResultCache`] belongs to one server (one process on stdio, one origin on HTTP) and one
//! negotiated protocol version: nothing in a key names the server, so a host that talks to several
//! servers keeps one cache per server, and calls [`ResultCache::clear`] when the era or version
//! changes.
//!
//! # What an entry holds
//!
//! The raw JSON text of the `result` member, as an `Arc<str>`, with the receipt [`Instant`] (an
//! argument, never read from a clock), the TTL and the scope. Raw text rather than a
//! `serde_json::Value`: it is what the server sent, byte for byte (a host can hand it to any
//! typed decoder it likes); its size in bytes is exact, which makes the byte bound honest; and it
//! is several times smaller in memory than a `Value` tree. Lookups hand out a cheap clone
//! ([`CachedResult`], an `Arc` inside).
//!
//! # Freshness ("Time-to-Live (TTL) Field", "Freshness Calculation")
//!
//! An entry received at `t_received` with TTL `ttl` is **fresh** while
//! `now < t_received + ttl`, computed as `now.saturating_duration_since(t_received) < ttl`, so no
//! TTL, however large, overflows. `ttlMs` is read by [`ttl_from_hint`]:
//! - a non-negative integer is that many milliseconds; the schema sets `minimum: 0` and no upper
//!   bound, and gives no special value besides `0` (immediately stale); a number with a zero
//!   fractional part (`60000.0`) is an integer in JSON Schema and is read as one, and a value
//!   beyond `u64` saturates;
//! - absent, `null`, negative, fractional or not a number: `0`, immediately stale.
//!
//! A host may cap every TTL with [`CacheConfig::max_ttl`] (the spec calls the TTL a hint).
//! An entry can also be **invalidated** (a `list_changed` or `resources/updated`
//! notification): it stays stored, so that it can still serve a failed refetch if the host allows
//! it, but it is stale from then on. Once stale, an entry stays stale at every later instant.
//!
//! # The TTL is not a polling interval ("Freshness Calculation")
//!
//! "Clients SHOULD NOT treat TTL as a polling interval." This cache has no timer, no deadline and
//! no `poll_*` function: expiry is evaluated lazily, when [`ResultCache::lookup`] is called with
//! the current instant, and an expired entry is not removed when it expires (only by eviction,
//! invalidation by cursor error, or [`ResultCache::clear`]). A host refetches when it needs the
//! data and the lookup says [`Lookup::Stale`] or [`Lookup::Miss`].
//!
//! # Keys ("Cache Key", "Cache Scope Field")
//!
//! A [`RequestKey`] is the method plus the parameters that affect the result: `uri` for
//! `resources/read`, `cursor` for a list page (absent and `""` are different pages, per
//! `pagination.mdx`), and, to honour "MUST NOT serve a cached response for a request whose
//! method or parameters differ", any other parameter except `_meta`, in a canonical form (sorted
//! keys). A request carrying `inputResponses` or `requestState` (an MRTR retry) gets no key at
//! all ([`CacheError::MrtrRetry`]), and a result with `resultType: "input_required"` is never
//! stored.
//!
//! Every lookup and insert also names an [`AuthContext`]: an opaque string the host derives from
//! the credentials (a hash of the token, or the subject), never the token itself. An entry whose
//! `cacheScope` is `"private"`, or absent, or anything other than `"public"` (the spec gives no
//! default; SEP-2549 says there is "no safe default", so the narrower scope is taken) is stored
//! under that context and is only ever returned to a lookup from the same context. A `"public"`
//! entry is shared by every context. When both a public entry and the caller's private entry
//! exist for one request key, the one received last wins (a tie goes to the private one).
//!
//! # Invalidation ("Interaction with Notifications", "Interaction with Pagination")
//!
//! - `notifications/tools/list_changed`, `notifications/prompts/list_changed`: every page of that
//!   list, in every context, becomes stale at once ([`ResultCache::invalidate_list`]).
//! - `notifications/resources/list_changed`: the same for `resources/list` **and**
//!   `resources/templates/list` (the spec does not say whether templates are covered; the
//!   conservative reading invalidates both).
//! - `notifications/resources/updated {uri}`: every `resources/read` entry for that exact URI.
//! - An invalid-cursor error (`-32602` to a list request that carried a cursor): every page of
//!   that list is **discarded** ([`ResultCache::discard_list`]), as the spec says.
//!
//! A notification can overtake the response to a request that was already in flight, and that
//! response may describe the world from before the change. So a fetch starts with
//! [`ResultCache::begin_fetch`], which hands out a [`FetchTicket`] recording an epoch per list
//! kind (and one for all resource reads); if an invalidation of that kind happened in between,
//! [`ResultCache::insert`] stores the result already stale ([`Stored::invalidated_in_flight`]).
//! For reads the epoch is shared by all URIs: an update of any resource while a read is in flight
//! makes that read's result stale. This costs at most one extra refetch and keeps the bookkeeping
//! bounded.
//!
//! # Stale-if-error ("Freshness Calculation": "Clients MAY serve stale responses")
//!
//! Only when the host allows it: [`CacheConfig::stale_if_error`] is the cache's policy (default
//! [`StaleIfError::Never`]), [`ResultCache::serve_stale_on_error`] applies it and
//! [`ResultCache::serve_stale_on_error_with`] takes a policy for one call.
//!
//! # Size bound and eviction
//!
//! The cache holds at most [`CacheConfig::max_entries`] entries and
//! [`CacheConfig::max_bytes`] bytes (an entry's size is the length of its result text plus the
//! lengths of its key strings and authorization context). When an insert goes over either bound,
//! the **least recently used** entries are evicted first; "use" is an insert or a lookup,
//! fallback or stale-on-error call that returned the entry, ordered by an internal counter (not by
//! time). An entry that alone exceeds `max_bytes` is refused ([`CacheError::TooLarge`]).

use crate::time::{Duration, Instant};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;

use crate::jsonrpc::code;

/// The key of a method's request parameters that carry MRTR answers (`basic/patterns/mrtr.mdx`).
const INPUT_RESPONSES: &str = "inputResponses";
/// The key of a method's request parameters that carry the opaque MRTR state.
const REQUEST_STATE: &str = "requestState";

/// A list operation whose pages can be cached.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ListKind {
    /// `tools/list`.
    Tools,
    /// `prompts/list`.
    Prompts,
    /// `resources/list`.
    Resources,
    /// `resources/templates/list`.
    ResourceTemplates,
}

impl ListKind {
    /// The JSON-RPC method of this list.
    pub fn method(self) -> &'static str {
        match self {
            ListKind::Tools => "tools/list",
            ListKind::Prompts => "prompts/list",
            ListKind::Resources => "resources/list",
            ListKind::ResourceTemplates => "resources/templates/list",
        }
    }
}

/// A method whose `resultType: "complete"` result carries caching hints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CacheableMethod {
    /// `server/discover`.
    Discover,
    /// One of the four list methods.
    List(ListKind),
    /// `resources/read`.
    ReadResource,
}

impl CacheableMethod {
    /// The method named `method`, if its results are cacheable.
    pub fn from_method(method: &str) -> Option<Self> {
        Some(match method {
            "server/discover" => CacheableMethod::Discover,
            "tools/list" => CacheableMethod::List(ListKind::Tools),
            "prompts/list" => CacheableMethod::List(ListKind::Prompts),
            "resources/list" => CacheableMethod::List(ListKind::Resources),
            "resources/templates/list" => CacheableMethod::List(ListKind::ResourceTemplates),
            "resources/read" => CacheableMethod::ReadResource,
            _ => return None,
        })
    }

    /// The JSON-RPC method name.
    pub fn method(self) -> &'static str {
        match self {
            CacheableMethod::Discover => "server/discover",
            CacheableMethod::List(kind) => kind.method(),
            CacheableMethod::ReadResource => "resources/read",
        }
    }

    /// Index into the per-kind invalidation epochs.
    fn epoch_slot(self) -> usize {
        match self {
            CacheableMethod::Discover => 0,
            CacheableMethod::List(ListKind::Tools) => 1,
            CacheableMethod::List(ListKind::Prompts) => 2,
            CacheableMethod::List(ListKind::Resources) => 3,
            CacheableMethod::List(ListKind::ResourceTemplates) => 4,
            CacheableMethod::ReadResource => 5,
        }
    }
}

/// How many invalidation epochs are kept (one per [`CacheableMethod`] value).
const EPOCH_SLOTS: usize = 6;

/// Why a request or result cannot be cached, or a notification could not be applied.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CacheError {
    /// The method's results carry no caching hints (`caching.mdx`, "Cacheable Results").
    #[error("results of `{method}` are not cacheable")]
    UncacheableMethod {
        /// The method asked for.
        method: String,
    },
    /// The request carries `inputResponses` or `requestState`: an MRTR retry, whose result
    /// "MUST NOT be cached" (`caching.mdx`, "Cache Key").
    #[error("a request carrying inputResponses or requestState (an MRTR retry) is never cached")]
    MrtrRetry,
    /// The request's `params` is present but not a JSON object.
    #[error("request params must be a JSON object")]
    ParamsNotObject,
    /// A parameter that is part of the key is missing or has the wrong type.
    #[error("request parameter `{name}` {problem}")]
    BadParam {
        /// The parameter (`uri` or `cursor`).
        name: &'static str,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// The result is an interim `input_required` result, which is "not cacheable"
    /// (`caching.mdx`, "Cacheable Results").
    #[error("an input_required result is not cacheable")]
    InputRequired,
    /// The result's `resultType` is not one this client knows, so it is invalid
    /// (`basic/index.mdx`) and is not stored.
    #[error("unrecognized resultType {result_type:?}; the result is not cached")]
    UnknownResultType {
        /// The value received (at most 64 characters of it).
        result_type: String,
    },
    /// The result text is not a JSON object, or its `resultType` is not a string.
    #[error("the result is not a valid JSON object: {reason}")]
    InvalidResult {
        /// The decoder's message.
        reason: String,
    },
    /// The entry alone is larger than the cache's byte bound.
    #[error("the entry needs {bytes} bytes, more than the cache's bound of {limit}")]
    TooLarge {
        /// The entry's size.
        bytes: usize,
        /// [`CacheConfig::max_bytes`] (or `0` entries allowed).
        limit: usize,
    },
    /// A `notifications/resources/updated` without a string `params.uri`.
    #[error("notifications/resources/updated without a string params.uri")]
    UpdatedWithoutUri,
}

/// The authorization context a lookup or insert is made in: an opaque string chosen by the host,
/// such as a hash of the access token or the token's subject, never the token itself.
///
/// Two requests share `"private"` entries exactly when their contexts are equal. A host without
/// authorization (stdio, say) uses one fixed value. `Debug` does not print the value.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AuthContext(Arc<str>);

impl AuthContext {
    /// A context named by `id`.
    pub fn new(id: impl Into<Arc<str>>) -> Self {
        AuthContext(id.into())
    }

    /// The opaque identifier.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for AuthContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AuthContext(<{} bytes>)", self.0.len())
    }
}

/// The method plus the parameters that affect the result (`caching.mdx`, "Cache Key").
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestKey {
    method: CacheableMethod,
    /// `uri` (reads) or `cursor` (list pages); `None` for discover and a first page.
    param: Option<String>,
    /// Every other parameter except `_meta`, as canonical JSON; `None` when there are none.
    extra: Option<String>,
}

impl RequestKey {
    /// The key of `server/discover`.
    pub fn discover() -> Self {
        RequestKey {
            method: CacheableMethod::Discover,
            param: None,
            extra: None,
        }
    }

    /// The key of one page of a list: `cursor` is `None` for the first page (`Some("")` is a
    /// different, valid cursor).
    pub fn list_page(kind: ListKind, cursor: Option<&str>) -> Self {
        RequestKey {
            method: CacheableMethod::List(kind),
            param: cursor.map(str::to_owned),
            extra: None,
        }
    }

    /// The key of `resources/read` for `uri` (compared byte for byte, never normalized).
    pub fn read_resource(uri: &str) -> Self {
        RequestKey {
            method: CacheableMethod::ReadResource,
            param: Some(uri.to_owned()),
            extra: None,
        }
    }

    /// The key of the request `method` with `params`, as sent.
    ///
    /// Refuses methods whose results are not cacheable, MRTR retries (`inputResponses` or
    /// `requestState` present, even `null`), a `resources/read` without a string `uri`, and a
    /// non-string `cursor` (`null` counts as absent). `_meta` is not part of the key; any other
    /// unexpected parameter is, in canonical form.
    pub fn from_request(method: &str, params: Option<&Value>) -> Result<Self, CacheError> {
        let cacheable =
            CacheableMethod::from_method(method).ok_or_else(|| CacheError::UncacheableMethod {
                method: method.chars().take(64).collect(),
            })?;
        let empty = serde_json::Map::new();
        let params = match params {
            None | Some(Value::Null) => &empty,
            Some(Value::Object(map)) => map,
            Some(_) => return Err(CacheError::ParamsNotObject),
        };
        if params.contains_key(INPUT_RESPONSES) || params.contains_key(REQUEST_STATE) {
            return Err(CacheError::MrtrRetry);
        }
        let key_param = match cacheable {
            CacheableMethod::Discover => None,
            CacheableMethod::List(_) => Some("cursor"),
            CacheableMethod::ReadResource => Some("uri"),
        };
        let param = match key_param {
            None => None,
            Some(name) => match params.get(name) {
                Some(Value::String(s)) => Some(s.clone()),
                None | Some(Value::Null) if name == "cursor" => None,
                None | Some(Value::Null) => {
                    return Err(CacheError::BadParam {
                        name: "uri",
                        problem: "is missing",
                    })
                }
                Some(_) => {
                    return Err(CacheError::BadParam {
                        name: if name == "uri" { "uri" } else { "cursor" },
                        problem: "is not a string",
                    })
                }
            },
        };
        let mut rest: Vec<(&String, &Value)> = params
            .iter()
            .filter(|(k, _)| k.as_str() != "_meta" && Some(k.as_str()) != key_param)
            .collect();
        let extra = if rest.is_empty() {
            None
        } else {
            rest.sort_by(|a, b| a.0.cmp(b.0));
            let mut out = String::new();
            out.push('{');
            for (i, (k, v)) in rest.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical_str(&mut out, k);
                out.push(':');
                write_canonical(&mut out, v);
            }
            out.push('}');
            Some(out)
        };
        Ok(RequestKey {
            method: cacheable,
            param,
            extra,
        })
    }

    /// The method.
    pub fn method(&self) -> CacheableMethod {
        self.method
    }

    /// The list page's cursor, if this is a list key with one.
    pub fn cursor(&self) -> Option<&str> {
        match self.method {
            CacheableMethod::List(_) => self.param.as_deref(),
            _ => None,
        }
    }

    /// The resource URI, if this is a `resources/read` key.
    pub fn uri(&self) -> Option<&str> {
        match self.method {
            CacheableMethod::ReadResource => self.param.as_deref(),
            _ => None,
        }
    }

    /// Bytes this key accounts for in the size bound.
    fn byte_len(&self) -> usize {
        self.method.method().len()
            + self.param.as_ref().map_or(0, String::len)
            + self.extra.as_ref().map_or(0, String::len)
    }
}

/// Writes `v` as JSON with object keys sorted, so equal values give equal text.
pub(crate) fn write_canonical(out: &mut String, v: &Value) {
    match v {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical_str(out, k);
                out.push(':');
                write_canonical(out, v);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(out, item);
            }
            out.push(']');
        }
        Value::String(s) => write_canonical_str(out, s),
        other => out.push_str(&other.to_string()),
    }
}

/// Writes a JSON string literal.
fn write_canonical_str(out: &mut String, s: &str) {
    out.push_str(&Value::String(s.to_owned()).to_string());
}

/// The `cacheScope` an entry is stored under.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CacheScope {
    /// `"public"`: shared across authorization contexts.
    Public,
    /// `"private"`, and also an absent or unrecognized scope: only the same context.
    Private,
}

/// The caching hints of one result, as this client reads them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheHints {
    /// The TTL (see [`ttl_from_hint`]).
    pub ttl: Duration,
    /// The scope (absent or unknown values read as [`CacheScope::Private`]).
    pub scope: CacheScope,
    /// Whether the server sent exactly `"public"` or `"private"`.
    pub scope_recognized: bool,
}

/// Reads `ttlMs`: a non-negative integer (also written with a zero fraction) is that many
/// milliseconds, saturating at `u64::MAX`; absent, `null`, negative, fractional and non-numeric
/// values are `0`, immediately stale (`caching.mdx`, "Time-to-Live (TTL) Field").
pub fn ttl_from_hint(ttl_ms: Option<&Value>) -> Duration {
    let Some(Value::Number(n)) = ttl_ms else {
        return Duration::ZERO;
    };
    if let Some(ms) = n.as_u64() {
        return Duration::from_millis(ms);
    }
    if n.is_i64() {
        return Duration::ZERO;
    }
    match n.as_f64() {
        // `as` saturates at u64::MAX for values beyond it.
        Some(f) if f.is_finite() && f > 0.0 && f.fract() == 0.0 => Duration::from_millis(f as u64),
        _ => Duration::ZERO,
    }
}

/// Reads `cacheScope` (`"public"` / `"private"`; anything else is treated as private).
pub fn scope_from_hint(scope: Option<&Value>) -> (CacheScope, bool) {
    match scope {
        Some(Value::String(s)) if s == "public" => (CacheScope::Public, true),
        Some(Value::String(s)) if s == "private" => (CacheScope::Private, true),
        _ => (CacheScope::Private, false),
    }
}

/// The fields of a result the cache looks at; everything else is ignored.
#[derive(Deserialize)]
struct HintFields {
    #[serde(rename = "resultType")]
    result_type: Option<Value>,
    #[serde(rename = "ttlMs")]
    ttl_ms: Option<Value>,
    #[serde(rename = "cacheScope")]
    cache_scope: Option<Value>,
}

/// Reads the caching hints of the JSON text of a `result` member, refusing results that must not
/// be cached: `resultType` other than absent or `"complete"`, or text that is not a JSON object.
pub fn parse_hints(result_json: &str) -> Result<CacheHints, CacheError> {
    if !result_json.trim_start().starts_with('{') {
        return Err(CacheError::InvalidResult {
            reason: "not a JSON object".to_owned(),
        });
    }
    let fields: HintFields =
        serde_json::from_str(result_json).map_err(|e| CacheError::InvalidResult {
            reason: e.to_string(),
        })?;
    match fields.result_type {
        None => {}
        Some(Value::String(s)) if s == "complete" => {}
        Some(Value::String(s)) if s == "input_required" => return Err(CacheError::InputRequired),
        Some(Value::String(s)) => {
            return Err(CacheError::UnknownResultType {
                result_type: s.chars().take(64).collect(),
            })
        }
        Some(_) => {
            return Err(CacheError::InvalidResult {
                reason: "resultType is not a string".to_owned(),
            })
        }
    }
    let (scope, scope_recognized) = scope_from_hint(fields.cache_scope.as_ref());
    Ok(CacheHints {
        ttl: ttl_from_hint(fields.ttl_ms.as_ref()),
        scope,
        scope_recognized,
    })
}

/// When a stale entry may stand in for a refetch that failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum StaleIfError {
    /// Never (the default): a failed refetch is reported as a failure.
    #[default]
    Never,
    /// Always, however old the entry.
    Always,
    /// Only when the entry was received at most this long ago.
    MaxAge(Duration),
}

/// Bounds and policies of a [`ResultCache`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheConfig {
    /// The most entries kept (default 1024). `0` stores nothing.
    pub max_entries: usize,
    /// The most bytes kept (default 16 MiB), counted as described in the module docs.
    pub max_bytes: usize,
    /// An upper bound applied to every server TTL (default `None`: the server's value).
    pub max_ttl: Option<Duration>,
    /// The cache's stale-if-error policy (default [`StaleIfError::Never`]).
    pub stale_if_error: StaleIfError,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            max_entries: 1024,
            max_bytes: 16 * 1024 * 1024,
            max_ttl: None,
            stale_if_error: StaleIfError::Never,
        }
    }
}

/// A cached result, as handed out by a lookup (cheap to clone).
#[derive(Clone, PartialEq, Eq)]
pub struct CachedResult {
    result: Arc<str>,
    received_at: Instant,
    ttl: Duration,
    scope: CacheScope,
    invalidated: bool,
}

impl std::fmt::Debug for CachedResult {
    /// Shows the result's size, not its text: a private resource may be in it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachedResult")
            .field("result_bytes", &self.result.len())
            .field("received_at", &self.received_at)
            .field("ttl", &self.ttl)
            .field("scope", &self.scope)
            .field("invalidated", &self.invalidated)
            .finish()
    }
}

impl CachedResult {
    /// The JSON text of the `result` member, exactly as inserted.
    pub fn result_json(&self) -> &str {
        &self.result
    }

    /// When the result was received (as given to [`ResultCache::insert`]).
    pub fn received_at(&self) -> Instant {
        self.received_at
    }

    /// The TTL the entry was stored with (after [`CacheConfig::max_ttl`]).
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// The scope the entry was stored under.
    pub fn scope(&self) -> CacheScope {
        self.scope
    }

    /// Whether a notification or an in-flight invalidation made the entry stale early.
    pub fn invalidated(&self) -> bool {
        self.invalidated
    }

    /// Whether the entry is fresh at `now`: not invalidated and
    /// `now < received_at + ttl` (`caching.mdx`, "Freshness Calculation").
    pub fn is_fresh_at(&self, now: Instant) -> bool {
        !self.invalidated && now.saturating_duration_since(self.received_at) < self.ttl
    }
}

/// The answer of [`ResultCache::lookup`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// A fresh entry: use it, no request needed.
    Fresh(CachedResult),
    /// A stale entry: refetch; it may stand in only per [`ResultCache::serve_stale_on_error`].
    Stale(CachedResult),
    /// Nothing cached for this key in this context.
    Miss,
}

/// Proof that a fetch for a key started, taken before the request is sent
/// ([`ResultCache::begin_fetch`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchTicket {
    key: RequestKey,
    epoch: u64,
}

impl FetchTicket {
    /// The request key the fetch is for.
    pub fn key(&self) -> &RequestKey {
        &self.key
    }
}

/// What [`ResultCache::insert`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stored {
    /// The hints read from the result (the TTL before [`CacheConfig::max_ttl`]).
    pub hints: CacheHints,
    /// An invalidation of this kind arrived while the request was in flight, so the entry was
    /// stored already stale.
    pub invalidated_in_flight: bool,
    /// How many entries were evicted to make room.
    pub evicted: usize,
}

/// Where an entry lives: its request key, and the context for private entries. Ordered so the
/// entries sit in a `BTreeMap`: a `HashMap`'s default hasher draws random keys, which the core
/// does not do.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct SlotKey {
    key: RequestKey,
    /// `None` for public entries.
    auth: Option<AuthContext>,
}

#[derive(Debug)]
struct Entry {
    value: CachedResult,
    bytes: usize,
    last_use: u64,
}

/// A bounded cache of cacheable MCP results, keyed by request and authorization context.
/// See the module documentation for every rule it follows.
#[derive(Debug)]
pub struct ResultCache {
    config: CacheConfig,
    entries: BTreeMap<SlotKey, Entry>,
    /// Entries by last use, oldest first.
    lru: BTreeMap<u64, SlotKey>,
    use_counter: u64,
    bytes: usize,
    epochs: [u64; EPOCH_SLOTS],
}

impl Default for ResultCache {
    fn default() -> Self {
        ResultCache::new(CacheConfig::default())
    }
}

impl ResultCache {
    /// An empty cache with `config`.
    pub fn new(config: CacheConfig) -> Self {
        ResultCache {
            config,
            entries: BTreeMap::new(),
            lru: BTreeMap::new(),
            use_counter: 0,
            bytes: 0,
            epochs: [0; EPOCH_SLOTS],
        }
    }

    /// The configuration.
    pub fn config(&self) -> &CacheConfig {
        &self.config
    }

    /// How many entries are stored.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The bytes stored, as counted against [`CacheConfig::max_bytes`].
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Starts a fetch of `key`: take the ticket before sending the request and give it back to
    /// [`ResultCache::insert`] with the result.
    pub fn begin_fetch(&self, key: RequestKey) -> FetchTicket {
        let epoch = self.epoch_of(key.method);
        FetchTicket { key, epoch }
    }

    /// The entry for `key` visible from `auth` at `now`: the caller's private entry or the public
    /// one (the later received if both exist). Marks it used.
    pub fn lookup(&mut self, now: Instant, key: &RequestKey, auth: &AuthContext) -> Lookup {
        match self.visible(key, auth) {
            None => Lookup::Miss,
            Some(slot) => {
                let value = self.touch(&slot);
                match value {
                    Some(v) if v.is_fresh_at(now) => Lookup::Fresh(v),
                    Some(v) => Lookup::Stale(v),
                    None => Lookup::Miss,
                }
            }
        }
    }

    /// After a refetch of `key` failed: the entry visible from `auth`, if the cache's
    /// [`CacheConfig::stale_if_error`] policy allows serving it at `now`.
    pub fn serve_stale_on_error(
        &mut self,
        now: Instant,
        key: &RequestKey,
        auth: &AuthContext,
    ) -> Option<CachedResult> {
        let policy = self.config.stale_if_error;
        self.serve_stale_on_error_with(now, key, auth, policy)
    }

    /// As [`ResultCache::serve_stale_on_error`], with `policy` instead of the cache's.
    pub fn serve_stale_on_error_with(
        &mut self,
        now: Instant,
        key: &RequestKey,
        auth: &AuthContext,
        policy: StaleIfError,
    ) -> Option<CachedResult> {
        let slot = self.visible(key, auth)?;
        let allowed = match policy {
            StaleIfError::Never => false,
            StaleIfError::Always => true,
            StaleIfError::MaxAge(max) => self
                .entries
                .get(&slot)
                .is_some_and(|e| now.saturating_duration_since(e.value.received_at) <= max),
        };
        if allowed {
            self.touch(&slot)
        } else {
            None
        }
    }

    /// Stores `result_json` (the JSON text of the `result` member) received at `received_at` for
    /// the fetch `ticket`, made in authorization context `auth`.
    ///
    /// Refuses `input_required` and unrecognized result types, non-objects, and entries larger
    /// than the byte bound (an oversized answer still removes the entries it supersedes: the
    /// public one and the caller's private one for that key); evicts least recently used entries
    /// to stay within the bounds.
    pub fn insert(
        &mut self,
        received_at: Instant,
        ticket: FetchTicket,
        auth: &AuthContext,
        result_json: &str,
    ) -> Result<Stored, CacheError> {
        let hints = parse_hints(result_json)?;
        let key = ticket.key;
        let bytes = result_json.len()
            + key.byte_len()
            + match hints.scope {
                CacheScope::Public => 0,
                CacheScope::Private => auth.as_str().len(),
            };
        if self.config.max_entries == 0 || bytes > self.config.max_bytes {
            // The newer answer cannot be kept, but it supersedes what this context had.
            for auth in [None, Some(auth.clone())] {
                self.remove_slot(&SlotKey {
                    key: key.clone(),
                    auth,
                });
            }
            return Err(CacheError::TooLarge {
                bytes,
                limit: if self.config.max_entries == 0 {
                    0
                } else {
                    self.config.max_bytes
                },
            });
        }
        let invalidated_in_flight = ticket.epoch != self.epoch_of(key.method);
        let ttl = match self.config.max_ttl {
            Some(max) => hints.ttl.min(max),
            None => hints.ttl,
        };
        // The newest answer for this key from this context replaces the other slot's entry.
        let public = SlotKey {
            key: key.clone(),
            auth: None,
        };
        let private = SlotKey {
            key,
            auth: Some(auth.clone()),
        };
        let (slot, other) = match hints.scope {
            CacheScope::Public => (public, private),
            CacheScope::Private => (private, public),
        };
        self.remove_slot(&other);
        self.remove_slot(&slot);
        let last_use = self.next_use();
        self.lru.insert(last_use, slot.clone());
        self.bytes = self.bytes.saturating_add(bytes);
        self.entries.insert(
            slot,
            Entry {
                value: CachedResult {
                    result: Arc::from(result_json),
                    received_at,
                    ttl,
                    scope: hints.scope,
                    invalidated: invalidated_in_flight,
                },
                bytes,
                last_use,
            },
        );
        let mut evicted = 0;
        while self.entries.len() > self.config.max_entries || self.bytes > self.config.max_bytes {
            let Some((_, oldest)) = self.lru.pop_first() else {
                break;
            };
            if let Some(entry) = self.entries.remove(&oldest) {
                self.bytes = self.bytes.saturating_sub(entry.bytes);
                evicted += 1;
            }
        }
        Ok(Stored {
            hints,
            invalidated_in_flight,
            evicted,
        })
    }

    /// Makes every page of `kind`, in every context, stale at once (a `list_changed`
    /// notification). Returns how many entries were invalidated.
    pub fn invalidate_list(&mut self, kind: ListKind) -> usize {
        let method = CacheableMethod::List(kind);
        self.bump(method);
        self.invalidate_where(|k| k.method == method)
    }

    /// Makes every `resources/read` entry for `uri`, in every context, stale at once (a
    /// `notifications/resources/updated`). Returns how many entries were invalidated.
    pub fn invalidate_resource(&mut self, uri: &str) -> usize {
        self.bump(CacheableMethod::ReadResource);
        self.invalidate_where(|k| {
            k.method == CacheableMethod::ReadResource && k.param.as_deref() == Some(uri)
        })
    }

    /// Removes every page of `kind` in every context (an invalid cursor). Returns how many
    /// entries were removed.
    pub fn discard_list(&mut self, kind: ListKind) -> usize {
        let method = CacheableMethod::List(kind);
        self.bump(method);
        let doomed: Vec<SlotKey> = self
            .entries
            .keys()
            .filter(|s| s.key.method == method)
            .cloned()
            .collect();
        let n = doomed.len();
        for slot in &doomed {
            self.remove_slot(slot);
        }
        n
    }

    /// Applies a server notification: the three `list_changed` notifications and
    /// `notifications/resources/updated`; any other method changes nothing. Returns how many
    /// entries were invalidated.
    pub fn on_notification(
        &mut self,
        method: &str,
        params: Option<&Value>,
    ) -> Result<usize, CacheError> {
        Ok(match method {
            "notifications/tools/list_changed" => self.invalidate_list(ListKind::Tools),
            "notifications/prompts/list_changed" => self.invalidate_list(ListKind::Prompts),
            "notifications/resources/list_changed" => {
                self.invalidate_list(ListKind::Resources)
                    + self.invalidate_list(ListKind::ResourceTemplates)
            }
            "notifications/resources/updated" => {
                let uri = params
                    .and_then(|p| p.get("uri"))
                    .and_then(Value::as_str)
                    .ok_or(CacheError::UpdatedWithoutUri)?;
                self.invalidate_resource(uri)
            }
            _ => 0,
        })
    }

    /// Applies a JSON-RPC error answering the request for `key`: `-32602` (Invalid params) to a
    /// list request that carried a cursor means the cursor is invalid, so every page of that list
    /// is discarded (`caching.mdx`, "Interaction with Pagination"; `pagination.mdx`). Returns
    /// how many entries were removed.
    pub fn on_error_response(&mut self, key: &RequestKey, error_code: i64) -> usize {
        match (key.method, &key.param) {
            (CacheableMethod::List(kind), Some(_)) if error_code == code::INVALID_PARAMS => {
                self.discard_list(kind)
            }
            _ => 0,
        }
    }

    /// Removes everything (for a new server, era or protocol version) and makes every fetch in
    /// flight store its result stale.
    pub fn clear(&mut self) {
        self.entries.clear();
        self.lru.clear();
        self.bytes = 0;
        for e in &mut self.epochs {
            *e = e.wrapping_add(1);
        }
    }

    fn epoch_of(&self, method: CacheableMethod) -> u64 {
        self.epochs.get(method.epoch_slot()).copied().unwrap_or(0)
    }

    fn bump(&mut self, method: CacheableMethod) {
        if let Some(e) = self.epochs.get_mut(method.epoch_slot()) {
            *e = e.wrapping_add(1);
        }
    }

    fn next_use(&mut self) -> u64 {
        self.use_counter = self.use_counter.wrapping_add(1);
        self.use_counter
    }

    /// The slot a lookup from `auth` sees for `key`: the later received of the caller's private
    /// entry and the public one.
    fn visible(&self, key: &RequestKey, auth: &AuthContext) -> Option<SlotKey> {
        let private = SlotKey {
            key: key.clone(),
            auth: Some(auth.clone()),
        };
        let public = SlotKey {
            key: key.clone(),
            auth: None,
        };
        match (self.entries.get(&private), self.entries.get(&public)) {
            (Some(p), Some(q)) if q.value.received_at > p.value.received_at => Some(public),
            (Some(_), _) => Some(private),
            (None, Some(_)) => Some(public),
            (None, None) => None,
        }
    }

    /// Marks `slot` used and returns its value.
    fn touch(&mut self, slot: &SlotKey) -> Option<CachedResult> {
        let tick = self.next_use();
        let entry = self.entries.get_mut(slot)?;
        self.lru.remove(&entry.last_use);
        entry.last_use = tick;
        self.lru.insert(tick, slot.clone());
        Some(entry.value.clone())
    }

    fn remove_slot(&mut self, slot: &SlotKey) {
        if let Some(entry) = self.entries.remove(slot) {
            self.lru.remove(&entry.last_use);
            self.bytes = self.bytes.saturating_sub(entry.bytes);
        }
    }

    fn invalidate_where(&mut self, pred: impl Fn(&RequestKey) -> bool) -> usize {
        let mut n = 0;
        for (slot, entry) in &mut self.entries {
            if pred(&slot.key) && !entry.value.invalidated {
                entry.value.invalidated = true;
                n += 1;
            }
        }
        n
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    const INPUT_REQUIRED: &str = include_str!(
        "../../../fixtures/mcp/examples/InputRequiredResult/input-required-result-with-request-state-only.json"
    );
    const READ_REQUEST: &str = include_str!(
        "../../../fixtures/mcp/examples/ReadResourceRequest/read-resource-request.json"
    );
    const LIST_TOOLS_REQUEST: &str =
        include_str!("../../../fixtures/mcp/examples/ListToolsRequest/list-tools-request.json");

    fn request(text: &str) -> (String, Value) {
        let v: Value = serde_json::from_str(text).unwrap();
        (
            v["method"].as_str().unwrap().to_owned(),
            v["params"].clone(),
        )
    }

    /// caching.mdx, "Cache Key": requests carrying `inputResponses` MUST NOT be cached.
    #[test]
    fn key_builder_refuses_mrtr_retry_with_input_responses() {
        let params = json!({"uri": "file:///a", "inputResponses": {"k": {"action": "accept"}}});
        assert_eq!(
            RequestKey::from_request("resources/read", Some(&params)),
            Err(CacheError::MrtrRetry)
        );
    }

    /// caching.mdx, "Cache Key": requests carrying `requestState` MUST NOT be cached.
    #[test]
    fn key_builder_refuses_mrtr_retry_with_request_state_only() {
        let params = json!({"uri": "file:///a", "requestState": "abc"});
        assert_eq!(
            RequestKey::from_request("resources/read", Some(&params)),
            Err(CacheError::MrtrRetry)
        );
    }

    /// caching.mdx, "Cacheable Results": only six methods carry caching hints.
    #[test]
    fn key_builder_refuses_methods_without_caching_hints() {
        for m in [
            "tools/call",
            "prompts/get",
            "completion/complete",
            "subscriptions/listen",
        ] {
            assert!(matches!(
                RequestKey::from_request(m, None),
                Err(CacheError::UncacheableMethod { .. })
            ));
        }
        for m in [
            "server/discover",
            "tools/list",
            "prompts/list",
            "resources/list",
            "resources/templates/list",
        ] {
            assert_eq!(
                RequestKey::from_request(m, None).unwrap().method().method(),
                m
            );
        }
    }

    /// caching.mdx, "Cache Key": the `uri` of `resources/read` is part of the key; `_meta` is not.
    #[test]
    fn cache_key_is_method_plus_uri_for_resources_read_ignoring_meta() {
        let (method, params) = request(READ_REQUEST);
        let key = RequestKey::from_request(&method, Some(&params)).unwrap();
        assert_eq!(
            key,
            RequestKey::read_resource("file:///project/src/main.rs")
        );
        assert_eq!(key.uri(), Some("file:///project/src/main.rs"));
        assert_ne!(key, RequestKey::read_resource("file:///project/src/lib.rs"));
        let (method, params) = request(LIST_TOOLS_REQUEST);
        let key = RequestKey::from_request(&method, Some(&params)).unwrap();
        assert_eq!(key, RequestKey::list_page(ListKind::Tools, None));
    }

    /// pagination.mdx: "an empty string is a valid cursor"; caching.mdx, "Cache Key": the
    /// cursor is part of the key, so no cursor and `""` are different pages.
    #[test]
    fn cache_key_includes_cursor_and_empty_cursor_is_not_the_first_page() {
        let first = RequestKey::from_request("tools/list", Some(&json!({}))).unwrap();
        let null = RequestKey::from_request("tools/list", Some(&json!({"cursor": null}))).unwrap();
        let empty = RequestKey::from_request("tools/list", Some(&json!({"cursor": ""}))).unwrap();
        let two = RequestKey::from_request("tools/list", Some(&json!({"cursor": "p2"}))).unwrap();
        assert_eq!(first, null);
        assert_ne!(first, empty);
        assert_ne!(empty, two);
        assert_eq!(two.cursor(), Some("p2"));
        assert_ne!(two, RequestKey::list_page(ListKind::Prompts, Some("p2")));
    }

    /// caching.mdx, "Cache Key": "MUST NOT serve a cached response for a request whose method
    /// or parameters differ", so unknown parameters join the key (in canonical form).
    #[test]
    fn cache_key_keeps_other_params_in_canonical_form() {
        let a = json!({"x": {"b": 1, "a": [true, "s"]}, "_meta": {"m": 1}});
        let b = json!({"_meta": {"m": 2}, "x": {"a": [true, "s"], "b": 1}});
        let c = json!({"x": {"a": [true, "s"], "b": 2}});
        let ka = RequestKey::from_request("tools/list", Some(&a)).unwrap();
        let kb = RequestKey::from_request("tools/list", Some(&b)).unwrap();
        let kc = RequestKey::from_request("tools/list", Some(&c)).unwrap();
        assert_eq!(ka, kb);
        assert_ne!(ka, kc);
        assert_ne!(ka, RequestKey::list_page(ListKind::Tools, None));
    }

    /// schema.json `ReadResourceRequestParams.required = [uri]`: a read without a string uri
    /// gets a typed error, as does a non-string cursor or non-object params.
    #[test]
    fn malformed_key_params_are_typed_errors() {
        assert!(matches!(
            RequestKey::from_request("resources/read", Some(&json!({}))),
            Err(CacheError::BadParam { name: "uri", .. })
        ));
        assert!(matches!(
            RequestKey::from_request("resources/read", Some(&json!({"uri": 7}))),
            Err(CacheError::BadParam { name: "uri", .. })
        ));
        assert!(matches!(
            RequestKey::from_request("tools/list", Some(&json!({"cursor": 3}))),
            Err(CacheError::BadParam { name: "cursor", .. })
        ));
        assert_eq!(
            RequestKey::from_request("tools/list", Some(&json!([1]))),
            Err(CacheError::ParamsNotObject)
        );
    }

    /// caching.mdx, "Time-to-Live (TTL) Field": absent → 0, negative → 0; schema.json:
    /// `ttlMs` is an integer with `minimum: 0` and no maximum.
    #[test]
    fn ttl_absent_negative_fractional_or_not_a_number_is_zero() {
        assert_eq!(ttl_from_hint(None), Duration::ZERO);
        assert_eq!(ttl_from_hint(Some(&json!(null))), Duration::ZERO);
        assert_eq!(ttl_from_hint(Some(&json!(-1))), Duration::ZERO);
        assert_eq!(ttl_from_hint(Some(&json!(-1.0))), Duration::ZERO);
        assert_eq!(ttl_from_hint(Some(&json!(1.5))), Duration::ZERO);
        assert_eq!(ttl_from_hint(Some(&json!("60000"))), Duration::ZERO);
        assert_eq!(ttl_from_hint(Some(&json!(true))), Duration::ZERO);
        assert_eq!(ttl_from_hint(Some(&json!(0))), Duration::ZERO);
    }

    /// schema.json: `ttlMs` is a JSON Schema integer (a zero fraction counts) with no upper
    /// bound; values beyond u64 saturate instead of wrapping.
    #[test]
    fn ttl_integer_is_milliseconds_and_huge_values_saturate() {
        assert_eq!(
            ttl_from_hint(Some(&json!(60000))),
            Duration::from_millis(60000)
        );
        assert_eq!(
            ttl_from_hint(Some(&json!(60000.0))),
            Duration::from_millis(60000)
        );
        assert_eq!(
            ttl_from_hint(Some(&json!(u64::MAX))),
            Duration::from_millis(u64::MAX)
        );
        assert_eq!(
            ttl_from_hint(Some(&json!(1e30))),
            Duration::from_millis(u64::MAX)
        );
    }

    /// caching.mdx, "Cache Scope Field"; SEP-2549 gives "no safe default" for an absent scope,
    /// so an absent or unknown scope is treated as private.
    #[test]
    fn absent_or_unknown_scope_is_treated_as_private() {
        assert_eq!(
            scope_from_hint(Some(&json!("public"))),
            (CacheScope::Public, true)
        );
        assert_eq!(
            scope_from_hint(Some(&json!("private"))),
            (CacheScope::Private, true)
        );
        assert_eq!(scope_from_hint(None), (CacheScope::Private, false));
        assert_eq!(
            scope_from_hint(Some(&json!("PUBLIC"))),
            (CacheScope::Private, false)
        );
        assert_eq!(
            scope_from_hint(Some(&json!("shared"))),
            (CacheScope::Private, false)
        );
    }

    /// caching.mdx, "Cacheable Results": interim `input_required` results "are not cacheable".
    #[test]
    fn input_required_result_is_not_cacheable() {
        assert_eq!(parse_hints(INPUT_REQUIRED), Err(CacheError::InputRequired));
    }

    /// basic/index.mdx: an unrecognized `resultType` is invalid, so it is not stored; an absent
    /// one means `complete` (older servers).
    #[test]
    fn unknown_result_type_is_refused_and_absent_means_complete() {
        assert!(matches!(
            parse_hints(r#"{"resultType":"task","ttlMs":5}"#),
            Err(CacheError::UnknownResultType { .. })
        ));
        let hints = parse_hints(r#"{"tools":[],"ttlMs":5,"cacheScope":"public"}"#).unwrap();
        assert_eq!(hints.ttl, Duration::from_millis(5));
        assert_eq!(hints.scope, CacheScope::Public);
    }

    /// A result must be a JSON object (schema.json `Result`); anything else is a typed error.
    #[test]
    fn non_object_result_is_a_typed_error() {
        for bad in ["[1,2,3]", "\"x\"", "{", "", "{\"ttlMs\":1,\"ttlMs\":2}"] {
            assert!(
                matches!(parse_hints(bad), Err(CacheError::InvalidResult { .. })),
                "{bad:?}"
            );
        }
    }

    /// Preamble rule: secrets never appear in Debug output; the auth context may be derived
    /// from a token, so its value is not printed.
    #[test]
    fn auth_context_debug_does_not_show_the_value() {
        let ctx = AuthContext::new("sha256:token-derived-value");
        let shown = format!("{ctx:?}");
        assert!(!shown.contains("token-derived-value"), "{shown}");
    }

    /// resources.mdx: `notifications/resources/updated` carries `params.uri`; without it the
    /// notification is a typed error, and other notifications change nothing.
    #[test]
    fn resources_updated_without_uri_is_a_typed_error() {
        let mut cache = ResultCache::default();
        assert_eq!(
            cache.on_notification("notifications/resources/updated", Some(&json!({}))),
            Err(CacheError::UpdatedWithoutUri)
        );
        assert_eq!(cache.on_notification("notifications/progress", None), Ok(0));
    }
}

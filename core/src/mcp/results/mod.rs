//! Typed results of the requests a client makes: `tools/list` and `tools/call`, `prompts/list`
//! and `prompts/get`, `resources/list`, `resources/templates/list` and `resources/read`, with
//! the spec's names (`schema.json` of `2026-07-28`, which also reads the `2025-11-25` era's
//! results).
//!
//! Each result type reads the JSON text of a response's `result` member (what the client's
//! `Event::Result` carries) with `from_json` ([`FromResult`]), keeps that JSON reachable
//! ([`FromResult::raw`]) and writes its typed members back ([`FromResult::to_value`]).
//!
//! **What is refused** (a [`ResultError`], the server's fault, naming the member at fault such
//! as `content[2].text`): text that is not JSON, a result that is not an object, a required
//! member that is absent (`content` of `tools/call`, `tools` of `tools/list`, an item's `name`,
//! a tool's `inputSchema`, ...), a named member of the wrong JSON type, and a `resultType` other
//! than `"complete"` (`basic/index.mdx`: an unrecognized value MUST be considered invalid; an
//! `input_required` result is the MRTR machinery's, `crate::mcp::mrtr`).
//!
//! **What is accepted** (both eras): an absent `resultType` (a `2025-11-25` server's; it means
//! `"complete"`), absent `ttlMs` / `cacheScope` (required in `2026-07-28` list and read results,
//! absent from the older era's), `null` for an optional member (read as absent), a content
//! block of a `type` this schema does not define ([`ContentBlock::Unknown`]), values outside
//! the schema's enumerations and ranges (a `Role` or `cacheScope` kept as sent, a `priority`
//! above 1, an `inputSchema` without `"type": "object"`), and members the schema does not name
//! (kept in each type's `other`, so a legacy tool's `execution` survives).
//!
//! **Writing back** ([`FromResult::to_value`]) gives the typed members as the `2026-07-28`
//! schema has them: `resultType: "complete"` always, `isError` / `required` only when true,
//! empty lists and absent optional members left out, then every member of `other`. Reading
//! that again gives an equal value (equality compares the typed members and `other`, not
//! [`FromResult::raw`]).
//!
//! **Pages** of a list result are appended with [`PaginatedResult::extend`], following
//! [`PaginatedResult::next_cursor`] until it is `None`.
//!
//! ```
//! use mcpwire_core::mcp::{CallToolResult, ContentBlock, ListToolsResult};
//!
//! let page = ListToolsResult::from_json(
//!     r#"{"tools": [{"name": "echo", "inputSchema": {"type": "object"}}], "nextCursor": "2"}"#,
//! )?;
//! assert_eq!(page.tools[0].name, "echo");
//! assert_eq!(page.next_cursor(), Some("2"));
//!
//! let result = CallToolResult::from_json(
//!     r#"{"resultType": "complete", "content": [{"type": "text", "text": "no such city"}],
//!         "isError": true}"#,
//! )?;
//! assert!(matches!(result.content[0], ContentBlock::Text(_)));
//! let error = result.into_result().unwrap_err();
//! assert_eq!(error.to_string(), "the tool reported an error: no such city");
//! # Ok::<(), mcpwire_core::mcp::ResultError>(())
//! ```

use std::fmt;

use serde_json::Value;

use crate::mcp::discover::CacheScopeHint;

use wire::{integer, string, At, Bad, Obj, Out, Read};

/// `Serialize` and `Deserialize` through [`Value`]: writing is the type's `to_value`, reading
/// its reader (a result's errors are [`ResultError`]s; an item's name the member at fault).
macro_rules! serde_via_value {
    (item $ty:ident) => {
        serde_via_value!(@impl $ty, |v: serde_json::Value| $ty::read(
            &v,
            &$crate::mcp::results::wire::At::ROOT
        )
        .map_err(|bad| bad.to_string()));
    };
    (result $ty:ident) => {
        serde_via_value!(@impl $ty, |v: serde_json::Value| $ty::from_value(v));
    };
    (@impl $ty:ident, $read:expr) => {
        impl serde::Serialize for $ty {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                serde::Serialize::serialize(&self.to_value(), s)
            }
        }

        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let v = <serde_json::Value as serde::Deserialize>::deserialize(d)?;
                ($read)(v).map_err(serde::de::Error::custom)
            }
        }
    };
}

/// What every top-level result type has: its readers ([`FromResult`] and the same as inherent
/// methods), `raw`, `to_value`, equality and `Debug` over the typed members and `other`
/// (never `raw`), and serde. The type provides `fn read(&mut Obj) -> Read<Self>` (with
/// `raw: Value::Null`) and `fn write(&self, &mut Out)` for its typed members.
macro_rules! result_impls {
    ($ty:ident, $method:literal, $($field:ident),+ $(,)?) => {
        impl $ty {
            #[doc = concat!(
                "Reads a `", $method, "` result from its JSON text: the `result` member of the ",
                "response, as the client's `Event::Result` carries it."
            )]
            pub fn from_json(text: &str) -> Result<Self, $crate::mcp::results::ResultError> {
                <Self as $crate::mcp::results::FromResult>::from_json(text)
            }

            #[doc = concat!(
                "Reads a `", $method, "` result from a JSON value (which becomes [`",
                stringify!($ty), "::raw`])."
            )]
            pub fn from_value(
                value: serde_json::Value,
            ) -> Result<Self, $crate::mcp::results::ResultError> {
                <Self as $crate::mcp::results::FromResult>::from_value(value)
            }

            /// The result's JSON as it was read (see [`FromResult::raw`](crate::mcp::results::FromResult::raw)).
            pub fn raw(&self) -> &serde_json::Value {
                &self.raw
            }

            /// The result's JSON as it was read, taken out.
            pub fn into_raw(self) -> serde_json::Value {
                self.raw
            }

            /// The typed members (and `other`) written as JSON (see [`FromResult::to_value`](crate::mcp::results::FromResult::to_value)).
            pub fn to_value(&self) -> serde_json::Value {
                let mut out = $crate::mcp::results::wire::Out::new(&self.other);
                out.put("resultType", $crate::mcp::results::COMPLETE);
                self.write(&mut out);
                out.done()
            }
        }

        impl $crate::mcp::results::FromResult for $ty {
            const METHOD: &'static str = $method;

            fn from_value(
                value: serde_json::Value,
            ) -> Result<Self, $crate::mcp::results::ResultError> {
                match $crate::mcp::results::read_result(&value, $ty::read) {
                    Ok(mut r) => {
                        r.raw = value;
                        Ok(r)
                    }
                    Err(bad) => Err($crate::mcp::results::ResultError::new($method, bad)),
                }
            }

            fn raw(&self) -> &serde_json::Value {
                &self.raw
            }

            fn to_value(&self) -> serde_json::Value {
                $ty::to_value(self)
            }
        }

        impl PartialEq for $ty {
            /// Compares the typed members and `other`, not `raw`.
            fn eq(&self, o: &Self) -> bool {
                $(self.$field == o.$field &&)+ self.other == o.other
            }
        }

        impl std::fmt::Debug for $ty {
            /// The typed members and `other` (not `raw`, which holds the same again).
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($ty))
                    $(.field(stringify!($field), &self.$field))+
                    .field("other", &self.other)
                    .finish_non_exhaustive()
            }
        }

        serde_via_value!(result $ty);
    };
}

/// A paginated list result (`tools/list`, `prompts/list`, `resources/list`,
/// `resources/templates/list`): its typed members, readers and [`PaginatedResult`].
macro_rules! list_result {
    (
        $(#[$doc:meta])*
        $ty:ident, $method:literal, $field:ident: $item:ident = $key:literal
    ) => {
        $(#[$doc])*
        #[derive(Clone)]
        pub struct $ty {
            #[doc = concat!(
                "`", $key, "`: this page's items (every page's, after [`", stringify!($ty),
                "::extend`])."
            )]
            pub $field: Vec<$item>,
            /// `nextCursor`: the position after this page, for the next request's `cursor`;
            /// `None` on the last page. Opaque: kept as sent.
            pub next_cursor: Option<String>,
            /// `ttlMs` as sent: how long the result may be cached (`2026-07-28`; see
            #[doc = concat!("[`", stringify!($ty), "::ttl`]).")]
            pub ttl_ms: Option<i64>,
            /// `cacheScope` as sent (`2026-07-28`).
            pub cache_scope: Option<$crate::mcp::discover::CacheScopeHint>,
            /// `_meta`, verbatim (the server's identity is under
            /// `io.modelcontextprotocol/serverInfo`).
            pub meta: Option<$crate::mcp::meta::JsonObject>,
            /// Members this schema does not name, kept as sent.
            pub other: $crate::mcp::meta::JsonObject,
            raw: serde_json::Value,
        }

        impl $ty {
            fn read(o: &mut $crate::mcp::results::wire::Obj<'_, '_>)
                -> $crate::mcp::results::wire::Read<Self>
            {
                Ok($ty {
                    $field: o.req_list($key, $item::read)?,
                    next_cursor: o.opt_string("nextCursor")?,
                    ttl_ms: $crate::mcp::results::read_ttl(o)?,
                    cache_scope: $crate::mcp::results::read_cache_scope(o)?,
                    meta: o.meta()?,
                    other: o.rest(),
                    raw: serde_json::Value::Null,
                })
            }

            fn write(&self, out: &mut $crate::mcp::results::wire::Out) {
                out.list($key, &self.$field, $item::to_value);
                out.opt_str("nextCursor", &self.next_cursor);
                $crate::mcp::results::write_cache_hints(out, self.ttl_ms, &self.cache_scope);
                out.meta(&self.meta);
            }

            /// The cursor of the next page, `None` on the last one.
            pub fn next_cursor(&self) -> Option<&str> {
                self.next_cursor.as_deref()
            }

            #[doc = concat!(
                "Appends the next page (the answer to a `", $method, "` with this page's ",
                "cursor): its items follow these, its cursor replaces this one. The merged ",
                "list is cacheable for the shorter `ttlMs` (absent if either page has none) ",
                "and only as widely as both pages allow (`public` only if both are; absent if ",
                "either is). `_meta` and `other` stay this page's; [`", stringify!($ty),
                "::raw`] becomes the pages' JSON merged the same way."
            )]
            pub fn extend(&mut self, next: Self) {
                let ttl_ms = $crate::mcp::results::merge_ttl(self.ttl_ms, next.ttl_ms);
                let cache_scope =
                    $crate::mcp::results::merge_scope(&self.cache_scope, &next.cache_scope);
                self.next_cursor = next.next_cursor;
                self.ttl_ms = ttl_ms;
                self.cache_scope = cache_scope;
                $crate::mcp::results::merge_raw(
                    &mut self.raw,
                    next.raw,
                    $key,
                    &self.next_cursor,
                    self.ttl_ms,
                    &self.cache_scope,
                );
                self.$field.extend(next.$field);
            }

            /// How long the result stays fresh after receipt: `ttlMs` read by the cache's
            /// rule (absent or negative is zero).
            pub fn ttl(&self) -> std::time::Duration {
                $crate::mcp::results::ttl_of(self.ttl_ms)
            }
        }

        result_impls!($ty, $method, $field, next_cursor, ttl_ms, cache_scope, meta);

        impl $crate::mcp::results::PaginatedResult for $ty {
            type Item = $item;

            fn items(&self) -> &[$item] {
                &self.$field
            }

            fn into_items(self) -> Vec<$item> {
                self.$field
            }

            fn next_cursor(&self) -> Option<&str> {
                $ty::next_cursor(self)
            }

            fn extend(&mut self, next: Self) {
                $ty::extend(self, next)
            }
        }
    };
}

mod content;
mod prompts;
mod resources;
mod tools;
mod wire;

#[cfg(test)]
mod tests;

pub use content::{
    Annotations, AudioContent, BinaryContent, ContentBlock, EmbeddedResource, ImageContent,
    ResourceBody, ResourceContents, ResourceLink, Role, TextContent,
};
pub use prompts::{GetPromptResult, ListPromptsResult, Prompt, PromptArgument, PromptMessage};
pub use resources::{
    ListResourceTemplatesResult, ListResourcesResult, ReadResourceResult, Resource,
    ResourceTemplate,
};
pub use tools::{CallToolResult, ListToolsResult, Tool, ToolAnnotations, ToolError};

/// The one `resultType` these results have.
const COMPLETE: &str = "complete";

/// A result of one request method, read from JSON.
pub trait FromResult: Sized {
    /// The request method whose result this is (`"tools/call"`).
    const METHOD: &'static str;

    /// Reads the result from a JSON value, which is kept as [`FromResult::raw`].
    fn from_value(value: Value) -> Result<Self, ResultError>;

    /// Reads the result from its JSON text: the `result` member of the response (what the
    /// client's `Event::Result` carries).
    fn from_json(text: &str) -> Result<Self, ResultError> {
        let value: Value = serde_json::from_str(text).map_err(|e| ResultError {
            method: Self::METHOD,
            path: String::new(),
            kind: ResultErrorKind::NotJson(e.to_string()),
        })?;
        Self::from_value(value)
    }

    /// The result's JSON as it was read, members this schema does not name included (for a
    /// list after [`PaginatedResult::extend`], the pages' JSON merged). Changing the typed
    /// members does not change it.
    fn raw(&self) -> &Value;

    /// The typed members written as JSON, then every member of `other` (see the module docs
    /// for the normal form). Reading it again gives an equal value.
    fn to_value(&self) -> Value;
}

/// A list result that comes in pages: follow [`PaginatedResult::next_cursor`] and
/// [`PaginatedResult::extend`] the first page with each next one. A server may return the same
/// cursor again: a caller following cursors bounds the number of pages.
pub trait PaginatedResult: FromResult {
    /// What the list holds.
    type Item;

    /// The items (of every page appended so far).
    fn items(&self) -> &[Self::Item];

    /// The items, taken out.
    fn into_items(self) -> Vec<Self::Item>;

    /// The cursor of the next page, `None` on the last one.
    fn next_cursor(&self) -> Option<&str>;

    /// Appends the next page (see each type's `extend`).
    fn extend(&mut self, next: Self);
}

/// Why a server's result could not be read: the server broke the protocol (its answer is not
/// the schema's result for that method). `Display` names the method and the member at fault:
/// `the server's tools/call result is not valid: content[2].text is a number, expected a
/// string`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResultError {
    method: &'static str,
    path: String,
    kind: ResultErrorKind,
}

/// What is wrong with a result (see [`ResultError`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ResultErrorKind {
    /// The text is not JSON (serde_json's message, with line and column).
    NotJson(String),
    /// A required member is absent.
    Missing,
    /// A member (or the result) has the wrong JSON type.
    WrongType {
        /// What it should be (`"a string"`).
        expected: &'static str,
        /// What it is (`"a number"`, `"null"`).
        found: &'static str,
    },
    /// An object has neither of two members, one of which it needs (a resource's `text` or
    /// `blob`).
    NeitherOf(&'static str, &'static str),
    /// `resultType` is not `"complete"` (its value, at most 64 characters).
    NotComplete(String),
}

impl ResultError {
    fn new(method: &'static str, bad: Bad) -> Self {
        ResultError {
            method,
            path: bad.path,
            kind: bad.kind,
        }
    }

    /// The request method whose result it was (`"tools/call"`).
    pub fn method(&self) -> &'static str {
        self.method
    }

    /// Where in the result: `content[2].text`; empty for the result itself.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// What is wrong.
    pub fn kind(&self) -> &ResultErrorKind {
        &self.kind
    }
}

/// Says what is wrong where; `whole` names the value itself (empty path).
fn describe(
    f: &mut fmt::Formatter<'_>,
    whole: &str,
    path: &str,
    kind: &ResultErrorKind,
) -> fmt::Result {
    let here = if path.is_empty() { whole } else { path };
    match kind {
        ResultErrorKind::NotJson(e) => write!(f, "not JSON ({e})"),
        ResultErrorKind::Missing => write!(f, "{here} is required but absent"),
        ResultErrorKind::WrongType { expected, found } => {
            write!(f, "{here} is {found}, expected {expected}")
        }
        ResultErrorKind::NeitherOf(a, b) => write!(f, "{here} has neither {a} nor {b}"),
        ResultErrorKind::NotComplete(t) => {
            write!(f, "{here} is {t:?}, expected \"complete\" (or absent)")
        }
    }
}

impl fmt::Display for ResultError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the server's {} result is not valid: ", self.method)?;
        describe(f, "the result", &self.path, &self.kind)
    }
}

impl std::error::Error for ResultError {}

impl fmt::Display for Bad {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        describe(f, "the value", &self.path, &self.kind)
    }
}

/// Reads a top-level result: an object whose `resultType` is absent or `"complete"`, the rest
/// by `f`.
fn read_result<'v, T>(value: &'v Value, f: impl FnOnce(&mut Obj<'v, '_>) -> Read<T>) -> Read<T> {
    let mut o = Obj::new(value, &At::ROOT)?;
    o.optional("resultType", |v, at| match v {
        Value::String(s) if s == COMPLETE => Ok(()),
        Value::String(s) => Err(at.bad(ResultErrorKind::NotComplete(s.chars().take(64).collect()))),
        other => Err(at.wrong("a string", other)),
    })?;
    f(&mut o)
}

/// Reads `ttlMs`.
fn read_ttl(o: &mut Obj<'_, '_>) -> Read<Option<i64>> {
    o.optional("ttlMs", integer)
}

/// Reads `cacheScope` (a value this schema does not define is kept as sent).
fn read_cache_scope(o: &mut Obj<'_, '_>) -> Read<Option<CacheScopeHint>> {
    o.optional("cacheScope", |v, at| {
        string(v, at).map(|s| CacheScopeHint::from_wire(&s))
    })
}

/// Writes `ttlMs` and `cacheScope` when there are some.
fn write_cache_hints(out: &mut Out, ttl_ms: Option<i64>, scope: &Option<CacheScopeHint>) {
    out.opt("ttlMs", ttl_ms);
    out.opt("cacheScope", scope.as_ref().map(CacheScopeHint::as_str));
}

/// `ttlMs` as a duration, by the cache's rule.
fn ttl_of(ttl_ms: Option<i64>) -> std::time::Duration {
    crate::mcp::cache::ttl_from_hint(ttl_ms.map(Value::from).as_ref())
}

/// The `ttlMs` of two pages merged: the shorter; absent if either is.
fn merge_ttl(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    Some(a?.min(b?))
}

/// The `cacheScope` of two pages merged: the same if they agree, else `private`; absent if
/// either is.
fn merge_scope(a: &Option<CacheScopeHint>, b: &Option<CacheScopeHint>) -> Option<CacheScopeHint> {
    match (a, b) {
        (Some(a), Some(b)) if a == b => Some(a.clone()),
        (Some(_), Some(_)) => Some(CacheScopeHint::Private),
        _ => None,
    }
}

/// Merges the next page's JSON into this one's: the items under `key` appended, the cursor
/// and cache hints set to the merged ones (removed when absent).
fn merge_raw(
    raw: &mut Value,
    next: Value,
    key: &str,
    cursor: &Option<String>,
    ttl_ms: Option<i64>,
    scope: &Option<CacheScopeHint>,
) {
    let (Value::Object(m), Value::Object(mut n)) = (raw, next) else {
        return;
    };
    if let (Some(Value::Array(items)), Some(Value::Array(more))) = (m.get_mut(key), n.remove(key)) {
        items.extend(more);
    }
    let mut set = |k: &str, v: Option<Value>| match v {
        Some(v) => {
            m.insert(k.to_owned(), v);
        }
        None => {
            m.remove(k);
        }
    };
    set("nextCursor", cursor.clone().map(Value::from));
    set("ttlMs", ttl_ms.map(Value::from));
    set(
        "cacheScope",
        scope.as_ref().map(|s| Value::from(s.as_str())),
    );
}

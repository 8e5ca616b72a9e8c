//! The Streamable HTTP request headers of a `2026-07-28` message, derived mechanically from its
//! JSON-RPC body (`basic/transports/streamable-http.mdx`, "Request Metadata").
//!
//! The MCP client and the tunnel (which forwards raw JSON-RPC to HTTP servers) both build their
//! headers here, so the two always agree:
//!
//! | Header                 | From the body                                             | On              |
//! |------------------------|-----------------------------------------------------------|-----------------|
//! | `Accept`               | always `application/json, text/event-stream`              | every message   |
//! | `Content-Type`         | always `application/json`                                 | every message   |
//! | `MCP-Protocol-Version` | `params._meta["io.modelcontextprotocol/protocolVersion"]` | when present    |
//! | `Mcp-Method`           | `method`                                                  | every message   |
//! | `Mcp-Name`             | `params.name` / `params.uri`                              | see [`name_field`] |
//! | `Mcp-Param-{Name}`     | `params.arguments` at each `x-mcp-header` property path   | `tools/call`    |
//!
//! `Mcp-Name` and `Mcp-Param-*` values go through [`encode_str`] / [`encode_param_value`]: a
//! value that is not plain visible ASCII (or that looks like the sentinel itself) is sent as
//! `=?base64?{standard Base64 of its UTF-8}?=`.
//!
//! Which parameters are mirrored comes from the tool's `inputSchema`: [`tool_headers`] walks it
//! for `x-mcp-header` annotations and refuses the whole tool when one breaks the rules of
//! "Schema Extension"; [`partition_tools`] applies that to a `tools/list` result so that the
//! invalid tools can be left out with a warning while the others stay usable.
//!
//! Error messages name the tool, the annotation and the offending schema location, never an
//! argument value: mirrored arguments may be credentials.

use std::borrow::Cow;

use serde_json::{Map, Value};

use crate::http::{HeaderError, Headers};

/// The `Accept` value of every POST: both response forms a server may choose.
pub const ACCEPT: &str = "application/json, text/event-stream";
/// The `Content-Type` value of every POST.
pub const CONTENT_TYPE: &str = "application/json";
/// The header mirroring `_meta["io.modelcontextprotocol/protocolVersion"]`.
pub const PROTOCOL_VERSION_HEADER: &str = "MCP-Protocol-Version";
/// The session header of a `2025-11-25` era session (the legacy spec spells it
/// `MCP-Session-Id`; names are case-insensitive).
pub const SESSION_ID_HEADER: &str = "Mcp-Session-Id";
/// The header mirroring `method`.
pub const METHOD_HEADER: &str = "Mcp-Method";
/// The header mirroring `params.name` or `params.uri`.
pub const NAME_HEADER: &str = "Mcp-Name";
/// The prefix of a header mirroring an `x-mcp-header` parameter: `Mcp-Param-{Name}`.
pub const PARAM_HEADER_PREFIX: &str = "Mcp-Param-";
/// The `_meta` key whose value `MCP-Protocol-Version` mirrors.
pub const PROTOCOL_VERSION_META_KEY: &str = "io.modelcontextprotocol/protocolVersion";
/// The schema keyword that designates a parameter to mirror.
pub const X_MCP_HEADER: &str = "x-mcp-header";
/// The opening marker of a Base64-encoded header value (case-sensitive).
pub const BASE64_PREFIX: &str = "=?base64?";
/// The closing marker of a Base64-encoded header value (case-sensitive).
pub const BASE64_SUFFIX: &str = "?=";
/// The largest integer magnitude an `x-mcp-header` parameter may carry: 2^53 − 1, the
/// IEEE 754 double-precision safe range.
pub const MAX_SAFE_INTEGER: i64 = (1 << 53) - 1;

// ---------------------------------------------------------------------------------------------
// Value encoding
// ---------------------------------------------------------------------------------------------

/// Why a received `Mcp-Name` / `Mcp-Param-*` value could not be decoded. The value itself is
/// never repeated: it may be a credential.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// A plain (unencoded) value holds a byte outside 0x20–0x7E or starts or ends with a space.
    #[error("header value holds a character a client must have Base64-encoded")]
    InvalidCharacter,
    /// The value carries the `=?base64?…?=` markers but what is between them is not canonical
    /// standard Base64 with padding.
    #[error("header value has the =?base64?...?= form but is not valid padded standard Base64")]
    InvalidBase64,
    /// The Base64 payload decodes to bytes that are not UTF-8.
    #[error("Base64 header value does not decode to UTF-8 text")]
    NotUtf8,
}

/// Whether `s` starts with `=?base64?` and ends with `?=` (the two may overlap, as in
/// `=?base64?=`): such a value must be encoded even when it is plain ASCII.
pub fn looks_like_sentinel(s: &str) -> bool {
    s.starts_with(BASE64_PREFIX) && s.ends_with(BASE64_SUFFIX)
}

/// Whether `s` can be sent as-is: empty, or only 0x20–0x7E with no leading or trailing space,
/// and not sentinel-shaped. Tabs and every other control character need encoding.
pub fn is_plain_header_value(s: &str) -> bool {
    let bytes = s.as_bytes();
    let (Some(&first), Some(&last)) = (bytes.first(), bytes.last()) else {
        return true;
    };
    bytes.iter().all(|b| (0x20..=0x7e).contains(b))
        && first != b' '
        && last != b' '
        && !looks_like_sentinel(s)
}

/// Encodes a text value for `Mcp-Name` or `Mcp-Param-*`: as-is when
/// [`is_plain_header_value`], otherwise `=?base64?{Base64 of the UTF-8}?=`.
pub fn encode_str(s: &str) -> String {
    if is_plain_header_value(s) {
        s.to_owned()
    } else {
        format!(
            "{BASE64_PREFIX}{}{BASE64_SUFFIX}",
            base64_encode(s.as_bytes())
        )
    }
}

/// Why an argument value has no header form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unencodable {
    Object,
    Array,
    Fraction,
    OutOfRange,
}

impl Unencodable {
    fn describe(self) -> &'static str {
        match self {
            Unencodable::Object => "an object",
            Unencodable::Array => "an array",
            Unencodable::Fraction => "a number with a fractional part (or not finite)",
            Unencodable::OutOfRange => "an integer outside the safe range ±(2^53 − 1)",
        }
    }
}

/// `Ok(None)` for `null` (the header is omitted), the header text for a string, integer or
/// boolean, an error for anything else.
fn encode_argument(value: &Value) -> Result<Option<String>, Unencodable> {
    match value {
        Value::Null => Ok(None),
        Value::Bool(b) => Ok(Some(if *b { "true" } else { "false" }.to_owned())),
        Value::String(s) => Ok(Some(encode_str(s))),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                if i.unsigned_abs() <= MAX_SAFE_INTEGER.unsigned_abs() {
                    Ok(Some(i.to_string()))
                } else {
                    Err(Unencodable::OutOfRange)
                }
            } else if n.is_u64() {
                // Above i64::MAX, so far above 2^53.
                Err(Unencodable::OutOfRange)
            } else {
                let f = n.as_f64().unwrap_or(f64::NAN);
                if !f.is_finite() || f.fract() != 0.0 {
                    Err(Unencodable::Fraction)
                } else if f.abs() > MAX_SAFE_INTEGER as f64 {
                    Err(Unencodable::OutOfRange)
                } else {
                    // JSON Schema counts `42.0` as an integer; it is sent as `42` (servers
                    // compare integers numerically). In range, so the cast is exact.
                    Ok(Some((f as i64).to_string()))
                }
            }
        }
        Value::Array(_) => Err(Unencodable::Array),
        Value::Object(_) => Err(Unencodable::Object),
    }
}

/// The header value of an `x-mcp-header` argument ("Value Encoding"): a string per
/// [`encode_str`], an integer in decimal (an integral float such as `42.0` as `42`), a boolean
/// as `true` / `false`. `None` when the value has no header form: `null` (the header is then
/// omitted), objects, arrays, numbers with a fractional part and integers beyond ±(2^53 − 1).
pub fn encode_param_value(value: &Value) -> Option<String> {
    encode_argument(value).ok().flatten()
}

/// The server's view: the text a received `Mcp-Name` / `Mcp-Param-*` value stands for. A
/// sentinel-shaped value is Base64-decoded (markers are case-sensitive); any other value must be
/// plain per [`is_plain_header_value`]. For every string `s`, `decode_param_value(&encode_str(s))`
/// is `Ok(s)`.
pub fn decode_param_value(value: &str) -> Result<String, DecodeError> {
    if looks_like_sentinel(value) {
        let inner = value
            .strip_prefix(BASE64_PREFIX)
            .and_then(|rest| rest.strip_suffix(BASE64_SUFFIX))
            .ok_or(DecodeError::InvalidBase64)?;
        let bytes = base64_decode(inner).ok_or(DecodeError::InvalidBase64)?;
        String::from_utf8(bytes).map_err(|_| DecodeError::NotUtf8)
    } else if is_plain_header_value(value) {
        Ok(value.to_owned())
    } else {
        Err(DecodeError::InvalidCharacter)
    }
}

/// The RFC 4648 section 4 alphabet (standard, not URL-safe), as the spec's examples use.
const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard Base64 with `=` padding.
fn base64_encode(input: &[u8]) -> String {
    let mut out = String::with_capacity(input.len().div_ceil(3) * 4);
    let sextet = |n: u32, shift: u32| char::from(B64[((n >> shift) & 0x3f) as usize]);
    for chunk in input.chunks(3) {
        let b = |i: usize| u32::from(chunk.get(i).copied().unwrap_or(0));
        let n = (b(0) << 16) | (b(1) << 8) | b(2);
        out.push(sextet(n, 18));
        out.push(sextet(n, 12));
        out.push(if chunk.len() > 1 { sextet(n, 6) } else { '=' });
        out.push(if chunk.len() > 2 { sextet(n, 0) } else { '=' });
    }
    out
}

/// Strict standard Base64: length a multiple of 4, `=` only as the last one or two characters,
/// unused trailing bits zero (so every byte string has exactly one accepted encoding).
fn base64_decode(input: &str) -> Option<Vec<u8>> {
    fn sextet(c: u8) -> Option<u32> {
        B64.iter().position(|&a| a == c).map(|p| p as u32)
    }
    let bytes = input.as_bytes();
    if bytes.len() % 4 != 0 {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    let quads = bytes.len() / 4;
    for (q, quad) in bytes.chunks(4).enumerate() {
        let last = q + 1 == quads;
        let pad = quad.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 || (pad > 0 && !last) {
            return None;
        }
        let mut n = 0u32;
        for &c in quad.iter().take(4 - pad) {
            n = (n << 6) | sextet(c)?;
        }
        n <<= 6 * pad as u32;
        let got = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        let keep = 3 - pad;
        // Bits that the padding hides must be zero.
        if got.iter().skip(keep).any(|&b| b != 0) {
            return None;
        }
        out.extend(got.iter().take(keep));
    }
    Some(out)
}

// ---------------------------------------------------------------------------------------------
// x-mcp-header schema walk
// ---------------------------------------------------------------------------------------------

/// One `x-mcp-header` annotation of a tool: which argument is mirrored, and under which name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamHeader {
    name: String,
    path: Vec<String>,
}

impl ParamHeader {
    /// The annotation's value, spelled as the schema spells it (`Region`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The full header name, `Mcp-Param-{name}`.
    pub fn header_name(&self) -> String {
        format!("{PARAM_HEADER_PREFIX}{}", self.name)
    }

    /// The chain of `properties` keys from the schema root to the annotated property
    /// (`["region"]`, or `["target", "region"]` for a nested object property).
    pub fn path(&self) -> &[String] {
        &self.path
    }

    /// The argument at [`Self::path`] in a `tools/call`'s `arguments`, if there is one.
    pub fn extract<'a>(&self, arguments: &'a Value) -> Option<&'a Value> {
        self.path
            .iter()
            .try_fold(arguments, |node, key| node.as_object()?.get(key))
    }
}

/// The valid `x-mcp-header` annotations of one tool's `inputSchema`, ordered by property path.
/// Empty when the tool mirrors nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolHeaders {
    tool: String,
    params: Vec<ParamHeader>,
}

impl ToolHeaders {
    /// The tool these annotations belong to.
    pub fn tool_name(&self) -> &str {
        &self.tool
    }

    /// The annotations, ordered by property path.
    pub fn params(&self) -> &[ParamHeader] {
        &self.params
    }

    /// Whether the tool mirrors no parameter.
    pub fn is_empty(&self) -> bool {
        self.params.is_empty()
    }
}

/// Why a tool definition is rejected (and so left out of the listed tools). Locations are
/// JSON Pointers into the tool's `inputSchema`, written as URI fragments (`#/properties/a`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ToolHeaderReason {
    /// An entry of a `tools/list` result's `tools` is not an object with a string `name`.
    #[error("tools[{index}] is not a tool object with a string `name`")]
    NotATool {
        /// Its position in the `tools` array.
        index: usize,
    },
    /// The annotation's value is not a JSON string.
    #[error("x-mcp-header at {location} is not a string")]
    NotAString {
        /// Where the annotation sits.
        location: String,
    },
    /// The annotation's value is the empty string.
    #[error("x-mcp-header at {location} is empty")]
    Empty {
        /// Where the annotation sits.
        location: String,
    },
    /// The annotation's value is not an RFC 9110 token (`1*tchar`): it holds a space, a colon,
    /// a control character, a non-ASCII character or another separator.
    #[error("x-mcp-header {name:?} at {location} is not an HTTP token (1*tchar)")]
    NotAToken {
        /// The annotation's value (at most 64 characters of it).
        name: String,
        /// Where the annotation sits.
        location: String,
    },
    /// The annotation is not on a property reachable from the root through `properties` keys
    /// alone: it is on the root itself, or behind `items`, `oneOf`/`anyOf`/`allOf`/`not`,
    /// `if`/`then`/`else`, `$defs` (the target of a `$ref`), `additionalProperties`, ...
    #[error(
        "x-mcp-header at {location} is not on a property statically reachable from the \
         schema root through `properties` alone"
    )]
    NotStaticallyReachable {
        /// Where the annotation sits.
        location: String,
    },
    /// The annotated property's `type` (or its `anyOf`/`oneOf` branch types) is not `string`,
    /// `integer` or `boolean` (optionally together with `null`).
    #[error(
        "x-mcp-header {name:?} at {location} is on a property of type {found}; only string, \
         integer and boolean are allowed"
    )]
    DisallowedType {
        /// The annotation's value.
        name: String,
        /// Where the annotation sits.
        location: String,
        /// The property's `type` (or its `anyOf`/`oneOf`), as compact JSON (at most 64
        /// characters of it).
        found: String,
    },
    /// The annotated property declares no `type`, so it is not known to be a primitive.
    #[error(
        "x-mcp-header {name:?} at {location} is on a property without a `type`; it must be \
         string, integer or boolean"
    )]
    MissingType {
        /// The annotation's value.
        name: String,
        /// Where the annotation sits.
        location: String,
    },
    /// Two annotations have the same value, compared case-insensitively.
    #[error(
        "x-mcp-header {name:?} at {location} duplicates {first_name:?} at {first_location} \
         (compared case-insensitively)"
    )]
    Duplicate {
        /// The repeated annotation's value.
        name: String,
        /// Where the repeated annotation sits.
        location: String,
        /// The value of the annotation it repeats.
        first_name: String,
        /// Where that annotation sits.
        first_location: String,
    },
}

/// A tool definition rejected for its `x-mcp-header` annotations ("Schema Extension": the
/// client excludes it from `tools/list` and warns, naming the tool and the reason).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("tool {tool:?} is excluded: {reason}")]
#[non_exhaustive]
pub struct ToolHeaderError {
    /// The tool's name (empty when the entry has none).
    pub tool: String,
    /// What is wrong.
    pub reason: ToolHeaderReason,
}

/// Keywords whose values are instance data, not schemas: whatever they hold is not an
/// annotation.
const DATA_KEYWORDS: [&str; 4] = ["const", "enum", "default", "examples"];

/// Keywords whose values map names to schemas: their keys are names, not keywords.
const SCHEMA_MAP_KEYWORDS: [&str; 5] = [
    "$defs",
    "definitions",
    "patternProperties",
    "dependentSchemas",
    "properties",
];

/// Caps a string for an error message.
fn clip(s: &str) -> String {
    s.chars().take(64).collect()
}

/// Appends `/` and one JSON Pointer reference token (RFC 6901 escaping) to `pointer`.
fn pointer_push(pointer: &mut String, token: &str) {
    pointer.push('/');
    for c in token.chars() {
        match c {
            '~' => pointer.push_str("~0"),
            '/' => pointer.push_str("~1"),
            c => pointer.push(c),
        }
    }
}

/// Whether `name` is an RFC 9110 token.
fn is_token(name: &str) -> bool {
    crate::http::validate_name(name).is_ok()
}

/// Whether a `type` value names only string/integer/boolean, optionally with `null`, and at
/// least one of the three.
fn primitive_type(declared: &Value) -> bool {
    const ALLOWED: [&str; 3] = ["string", "integer", "boolean"];
    match declared {
        Value::String(t) => ALLOWED.contains(&t.as_str()),
        Value::Array(types) => {
            let names: Option<Vec<&str>> = types.iter().map(Value::as_str).collect();
            names.is_some_and(|names| {
                names.iter().all(|t| *t == "null" || ALLOWED.contains(t))
                    && names.iter().any(|t| ALLOWED.contains(t))
            })
        }
        _ => false,
    }
}

/// The `type` check of an annotated property: `Ok` for string/integer/boolean, a type array of
/// those with optional `"null"`, or, with no `type` at all, an `anyOf`/`oneOf` whose every
/// branch is `{"type": ...}` of those or `null` (how generators write a nullable primitive,
/// e.g. pydantic's `str | None`). `Err(None)` when no type is declared anywhere.
fn check_type(schema: &Map<String, Value>) -> Result<(), Option<String>> {
    if let Some(declared) = schema.get("type") {
        return if primitive_type(declared) {
            Ok(())
        } else {
            Err(Some(clip(&declared.to_string())))
        };
    }
    let Some(branches) = ["anyOf", "oneOf"].iter().find_map(|k| schema.get(*k)) else {
        return Err(None);
    };
    let types: Option<Vec<&Value>> = branches
        .as_array()
        .map(|bs| bs.iter().map(|b| b.get("type")).collect::<Option<Vec<_>>>())
        .unwrap_or_default();
    let merged: Vec<Value> = types
        .unwrap_or_default()
        .into_iter()
        .flat_map(|t| match t {
            Value::Array(ts) => ts.clone(),
            other => vec![other.clone()],
        })
        .collect();
    let merged = Value::Array(merged);
    if primitive_type(&merged) {
        Ok(())
    } else {
        Err(Some(clip(&branches.to_string())))
    }
}

/// Checks one annotation found at `location`; `path` is its property chain when the location
/// is statically reachable (the root itself has the empty chain, which is not a property).
fn check_annotation(
    schema: &Map<String, Value>,
    annotation: &Value,
    path: Option<&[String]>,
    location: &str,
) -> Result<ParamHeader, ToolHeaderReason> {
    let location = location.to_owned();
    let Some(name) = annotation.as_str() else {
        return Err(ToolHeaderReason::NotAString { location });
    };
    if name.is_empty() {
        return Err(ToolHeaderReason::Empty { location });
    }
    if !is_token(name) {
        return Err(ToolHeaderReason::NotAToken {
            name: clip(name),
            location,
        });
    }
    let path = match path {
        Some(p) if !p.is_empty() => p.to_vec(),
        _ => return Err(ToolHeaderReason::NotStaticallyReachable { location }),
    };
    match check_type(schema) {
        Ok(()) => Ok(ParamHeader {
            name: name.to_owned(),
            path,
        }),
        Err(None) => Err(ToolHeaderReason::MissingType {
            name: name.to_owned(),
            location,
        }),
        Err(Some(found)) => Err(ToolHeaderReason::DisallowedType {
            name: name.to_owned(),
            location,
            found,
        }),
    }
}

/// One step of the walk's breadcrumb trail: a JSON Pointer token and the step before it.
struct Crumb<'a> {
    parent: Option<usize>,
    token: Cow<'a, str>,
}

/// The tokens from the root to `at`, in order.
fn trail<'a>(crumbs: &'a [Crumb<'_>], at: Option<usize>) -> Vec<&'a str> {
    let mut tokens = Vec::new();
    let mut next = at;
    while let Some(crumb) = next.and_then(|i| crumbs.get(i)) {
        tokens.push(crumb.token.as_ref());
        next = crumb.parent;
    }
    tokens.reverse();
    tokens
}

/// Records a step and returns its index.
fn step<'a>(
    crumbs: &mut Vec<Crumb<'a>>,
    parent: Option<usize>,
    token: Cow<'a, str>,
) -> Option<usize> {
    crumbs.push(Crumb { parent, token });
    Some(crumbs.len() - 1)
}

/// `#/a/b` for the tokens `a`, `b` (RFC 6901 escaping, written as a URI fragment).
fn fragment(tokens: &[&str]) -> String {
    let mut out = String::from("#");
    for t in tokens {
        pointer_push(&mut out, t);
    }
    out
}

/// Walks `schema` for `x-mcp-header` annotations, in time and memory linear in its size and
/// without recursion, so no depth of nesting can exhaust the stack.
fn walk(schema: &Value) -> Result<Vec<(ParamHeader, String)>, ToolHeaderReason> {
    let mut crumbs: Vec<Crumb<'_>> = Vec::new();
    // (node, whether it is the root or a property reached through `properties` alone, crumb)
    let mut stack: Vec<(&Value, bool, Option<usize>)> = vec![(schema, true, None)];
    let mut found: Vec<(ParamHeader, String)> = Vec::new();
    while let Some((node, reachable, at)) = stack.pop() {
        match node {
            Value::Object(map) => {
                if let Some(annotation) = map.get(X_MCP_HEADER) {
                    let tokens = trail(&crumbs, at);
                    let mut with_key = tokens.clone();
                    with_key.push(X_MCP_HEADER);
                    let location = fragment(&with_key);
                    // On a reachable node the tokens alternate `properties`, name, ...
                    let path: Option<Vec<String>> = reachable.then(|| {
                        tokens
                            .iter()
                            .skip(1)
                            .step_by(2)
                            .map(|t| (*t).to_owned())
                            .collect()
                    });
                    let param = check_annotation(map, annotation, path.as_deref(), &location)?;
                    found.push((param, location));
                }
                for (key, value) in map {
                    if key == X_MCP_HEADER || DATA_KEYWORDS.contains(&key.as_str()) {
                        continue;
                    }
                    let here = step(&mut crumbs, at, Cow::Borrowed(key.as_str()));
                    match value {
                        Value::Object(named) if SCHEMA_MAP_KEYWORDS.contains(&key.as_str()) => {
                            let keeps_reach = reachable && key == "properties";
                            for (name, sub) in named {
                                let there = step(&mut crumbs, here, Cow::Borrowed(name.as_str()));
                                stack.push((sub, keeps_reach, there));
                            }
                        }
                        _ => stack.push((value, false, here)),
                    }
                }
            }
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    let here = step(&mut crumbs, at, Cow::Owned(i.to_string()));
                    stack.push((item, false, here));
                }
            }
            _ => {}
        }
    }
    found.sort_by(|a, b| a.0.path.cmp(&b.0.path));
    Ok(found)
}

/// The `x-mcp-header` annotations of a tool (`basic/transports/streamable-http.mdx`, "Schema
/// Extension"; `server/tools.mdx`, "x-mcp-header"). Any annotation that breaks a rule makes the
/// whole tool invalid: a non-string, empty or non-token value, a value repeated ignoring case,
/// a property whose `type` is not string/integer/boolean (a type array of those plus `"null"`
/// is accepted, and so is an untyped property whose `anyOf`/`oneOf` branches are typed that
/// way; a property with no type at all is not), or a location that is not a property
/// reached from the root through `properties` keys alone. `$ref` is never followed, so an
/// annotation in `$defs` is refused like any other unreachable one. Values of `const`, `enum`,
/// `default` and `examples` are data and are not searched.
pub fn tool_headers(tool_name: &str, input_schema: &Value) -> Result<ToolHeaders, ToolHeaderError> {
    let fail = |reason| ToolHeaderError {
        tool: tool_name.to_owned(),
        reason,
    };
    let found = walk(input_schema).map_err(fail)?;
    for (k, (param, location)) in found.iter().enumerate() {
        let earlier = found
            .iter()
            .take(k)
            .find(|(p, _)| p.name.eq_ignore_ascii_case(&param.name));
        if let Some((first, first_location)) = earlier {
            return Err(fail(ToolHeaderReason::Duplicate {
                name: param.name.clone(),
                location: location.clone(),
                first_name: first.name.clone(),
                first_location: first_location.clone(),
            }));
        }
    }
    Ok(ToolHeaders {
        tool: tool_name.to_owned(),
        params: found.into_iter().map(|(p, _)| p).collect(),
    })
}

/// Splits a `tools/list` result's `tools` into the usable tools (each with its annotations) and
/// the rejected ones, in order. A tool without `inputSchema` mirrors nothing; an entry that is
/// not an object with a string `name` is rejected as [`ToolHeaderReason::NotATool`].
pub fn partition_tools(tools: Vec<Value>) -> (Vec<(Value, ToolHeaders)>, Vec<ToolHeaderError>) {
    let mut valid = Vec::new();
    let mut rejected = Vec::new();
    for (index, tool) in tools.into_iter().enumerate() {
        let Some(name) = tool.get("name").and_then(Value::as_str) else {
            rejected.push(ToolHeaderError {
                tool: String::new(),
                reason: ToolHeaderReason::NotATool { index },
            });
            continue;
        };
        let schema = tool.get("inputSchema").unwrap_or(&Value::Null);
        match tool_headers(name, schema) {
            Ok(headers) => valid.push((tool, headers)),
            Err(e) => rejected.push(e),
        }
    }
    (valid, rejected)
}

// ---------------------------------------------------------------------------------------------
// Request headers
// ---------------------------------------------------------------------------------------------

/// Why headers could not be built for a message. Argument values are never repeated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HeaderBuildError {
    /// The body is not JSON.
    #[error("the body is not JSON (syntax error at line {line}, column {column})")]
    InvalidJson {
        /// 1-based line of the error.
        line: usize,
        /// 1-based column of the error.
        column: usize,
    },
    /// The body is not a JSON object (a batch, or a scalar): one message per POST.
    #[error("the body is not a single JSON-RPC message object")]
    NotAnObject,
    /// The body has no string `method`: it is a response or not JSON-RPC; a client sends
    /// only requests and notifications.
    #[error("the body is not a JSON-RPC request or notification: it has no string `method`")]
    NoMethod,
    /// The method is not plain visible ASCII, so it cannot be mirrored in `Mcp-Method`.
    #[error("the method {0:?} cannot be sent in Mcp-Method: it is not plain visible ASCII")]
    UnrepresentableMethod(String),
    /// `_meta["io.modelcontextprotocol/protocolVersion"]` is present but not a plain
    /// visible-ASCII string.
    #[error(
        "_meta[\"io.modelcontextprotocol/protocolVersion\"] is not a plain visible-ASCII string"
    )]
    InvalidProtocolVersion,
    /// A method that needs `Mcp-Name` lacks the string field it is taken from.
    #[error("{method} needs a string params.{field} to mirror into Mcp-Name")]
    MissingName {
        /// The method.
        method: String,
        /// `name` or `uri`.
        field: &'static str,
    },
    /// Tool annotations were passed for a message that is not a `tools/call`.
    #[error(
        "x-mcp-header annotations were given for a {method} message; only tools/call uses them"
    )]
    ToolHeadersNotApplicable {
        /// The message's method.
        method: String,
    },
    /// The annotations passed belong to another tool than the one called.
    #[error("x-mcp-header annotations of tool {expected:?} were given for a call to {called:?}")]
    WrongTool {
        /// The tool the annotations belong to.
        expected: String,
        /// The tool named in `params.name`.
        called: String,
    },
    /// An annotated argument holds a value that has no header form.
    #[error(
        "argument for Mcp-Param-{header} of tool {tool:?} is {found}; an x-mcp-header \
         parameter must be a string, an integer within ±(2^53 − 1) or a boolean"
    )]
    UnencodableArgument {
        /// The tool called.
        tool: String,
        /// The annotation's value (the header is `Mcp-Param-{header}`).
        header: String,
        /// What the value is (its type, never its content).
        found: &'static str,
    },
    /// The header map refused a header (not expected after the checks above).
    #[error(transparent)]
    Header(#[from] HeaderError),
}

/// The body field `Mcp-Name` mirrors for `method` ("Standard Request Headers"): `name` for
/// `tools/call` and `prompts/get`, `uri` for `resources/read`, none for every other method.
pub fn name_field(method: &str) -> Option<&'static str> {
    match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        _ => None,
    }
}

/// The headers of a POST carrying `body`, one JSON-RPC request or notification (see
/// [`request_headers_for`]).
pub fn request_headers(
    body: &str,
    tool_headers: Option<&ToolHeaders>,
) -> Result<Headers, HeaderBuildError> {
    let message: Value = serde_json::from_str(body).map_err(|e| HeaderBuildError::InvalidJson {
        line: e.line(),
        column: e.column(),
    })?;
    request_headers_for(&message, tool_headers)
}

/// The headers of a POST carrying `message` (`basic/transports/streamable-http.mdx`,
/// "Request Metadata"), in this order:
///
/// - `Accept: application/json, text/event-stream` and `Content-Type: application/json`;
/// - `MCP-Protocol-Version`, equal to `params._meta["io.modelcontextprotocol/protocolVersion"]`,
///   only when the body carries one (a legacy-era body does not: its caller adds the
///   negotiated version itself);
/// - `Mcp-Method: {method}`, for requests and notifications alike (the spec leaves notification
///   headers undefined; mirroring the method is harmless and what SEP-2243 required);
/// - `Mcp-Name`, encoded, for the methods of [`name_field`];
/// - for a `tools/call` given the tool's `tool_headers`, one `Mcp-Param-{Name}` per annotation
///   whose argument is present and not `null`, encoded by [`encode_param_value`]. Without
///   `tool_headers` (the schema was never seen) no `Mcp-Param-*` header is sent.
pub fn request_headers_for(
    message: &Value,
    tool_headers: Option<&ToolHeaders>,
) -> Result<Headers, HeaderBuildError> {
    let message = message.as_object().ok_or(HeaderBuildError::NotAnObject)?;
    let method = message
        .get("method")
        .and_then(Value::as_str)
        .ok_or(HeaderBuildError::NoMethod)?;
    let params = message.get("params");
    let member = |key: &str| params.and_then(|p| p.get(key));
    let fields = RequestFields {
        method,
        version: member("_meta")
            .and_then(|m| m.get(PROTOCOL_VERSION_META_KEY))
            .map(Value::as_str),
        name: name_field(method).and_then(|f| member(f).and_then(Value::as_str)),
        tool: member("name").and_then(Value::as_str),
        arguments: Arguments::Value(member("arguments").unwrap_or(&Value::Null)),
    };
    headers_for_fields(&fields, tool_headers)
}

/// What [`request_headers_for`] reads from a request, for a caller that holds the request in
/// pieces rather than as one `Value` (the client, building its own requests).
pub(crate) struct RequestFields<'a> {
    /// `method`.
    pub(crate) method: &'a str,
    /// `params._meta["io.modelcontextprotocol/protocolVersion"]`, when present (and whether it
    /// is a string).
    pub(crate) version: Option<Option<&'a str>>,
    /// `params[name_field(method)]`, when it is a string.
    pub(crate) name: Option<&'a str>,
    /// `params.name`, when it is a string.
    pub(crate) tool: Option<&'a str>,
    /// `params.arguments`.
    pub(crate) arguments: Arguments<'a>,
}

/// A request's `params.arguments`.
pub(crate) enum Arguments<'a> {
    /// As a value (`null` when absent).
    Value(&'a Value),
    /// An object the caller holds on its own.
    Object(&'a Map<String, Value>),
}

impl Arguments<'_> {
    /// The argument `param` mirrors, encoded (`Ok(None)`: absent or `null`, no header).
    fn encoded(&self, param: &ParamHeader) -> Result<Option<String>, Unencodable> {
        match self {
            Arguments::Value(v) => param.extract(v).map_or(Ok(None), encode_argument),
            Arguments::Object(map) => match param.path.split_first() {
                // The whole arguments object.
                None => Err(Unencodable::Object),
                Some((first, rest)) => rest
                    .iter()
                    .try_fold(map.get(first), |node, key| {
                        Some(node?.as_object()?.get(key))
                    })
                    .flatten()
                    .map_or(Ok(None), encode_argument),
            },
        }
    }
}

/// [`request_headers_for`] of a request read into its fields.
pub(crate) fn headers_for_fields(
    fields: &RequestFields<'_>,
    tool_headers: Option<&ToolHeaders>,
) -> Result<Headers, HeaderBuildError> {
    let method = fields.method;
    if method.is_empty() || !is_plain_header_value(method) {
        return Err(HeaderBuildError::UnrepresentableMethod(clip(method)));
    }

    let mut headers = Headers::new();
    headers.append("Accept", ACCEPT)?;
    headers.append("Content-Type", CONTENT_TYPE)?;

    if let Some(version) = fields.version {
        match version {
            Some(v) if !v.is_empty() && is_plain_header_value(v) => {
                headers.append(PROTOCOL_VERSION_HEADER, v)?;
            }
            _ => return Err(HeaderBuildError::InvalidProtocolVersion),
        }
    }

    headers.append(METHOD_HEADER, method)?;

    if let Some(field) = name_field(method) {
        let name = fields.name.ok_or_else(|| HeaderBuildError::MissingName {
            method: method.to_owned(),
            field,
        })?;
        headers.append(NAME_HEADER, encode_str(name))?;
    }

    if let Some(tool) = tool_headers {
        if method != "tools/call" {
            return Err(HeaderBuildError::ToolHeadersNotApplicable {
                method: method.to_owned(),
            });
        }
        let called = fields.tool.unwrap_or_default();
        if called != tool.tool {
            return Err(HeaderBuildError::WrongTool {
                expected: clip(&tool.tool),
                called: clip(called),
            });
        }
        for param in &tool.params {
            match fields.arguments.encoded(param) {
                Ok(Some(text)) => headers.append(param.header_name(), text)?,
                Ok(None) => {}
                Err(why) => {
                    return Err(HeaderBuildError::UnencodableArgument {
                        tool: clip(&tool.tool),
                        header: param.name.clone(),
                        found: why.describe(),
                    })
                }
            }
        }
    }
    Ok(headers)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn enc(v: Value) -> Option<String> {
        encode_param_value(&v)
    }

    fn reason(tool: &str, schema: Value) -> ToolHeaderReason {
        let e = tool_headers(tool, &schema).unwrap_err();
        assert_eq!(e.tool, tool);
        e.reason
    }

    /// A tool schema with one property `p`: `extra` plus `"x-mcp-header": header`.
    fn one(header: &str, extra: Value) -> Value {
        let mut p = extra;
        p[X_MCP_HEADER] = json!(header);
        json!({"type": "object", "properties": {"p": p}})
    }

    fn pairs(h: &Headers) -> Vec<(String, String)> {
        h.iter()
            .map(|(n, v)| (n.to_owned(), v.to_owned()))
            .collect()
    }

    // --- Value Encoding -----------------------------------------------------------------

    /// streamable-http.mdx, "Value Encoding": `"us-west1"` → `us-west1`.
    #[test]
    fn plain_ascii_string_is_sent_as_is() {
        assert_eq!(enc(json!("us-west1")).unwrap(), "us-west1");
        assert_eq!(enc(json!("SELECT * FROM t")).unwrap(), "SELECT * FROM t");
    }

    /// streamable-http.mdx, "Value Encoding": integers in decimal (`42`, `-7`).
    #[test]
    fn integer_is_sent_as_decimal() {
        assert_eq!(enc(json!(42)).unwrap(), "42");
        assert_eq!(enc(json!(-7)).unwrap(), "-7");
        assert_eq!(enc(json!(0)).unwrap(), "0");
    }

    /// streamable-http.mdx, "Value Encoding": an integral JSON number such as `42.0` is an
    /// integer (JSON Schema) and servers compare numerically, so it is sent as `42`.
    #[test]
    fn integral_float_is_sent_as_its_integer() {
        assert_eq!(enc(json!(42.0)).unwrap(), "42");
        assert_eq!(enc(json!(-0.0)).unwrap(), "0");
    }

    /// tools.mdx, "x-mcp-header": integers must lie within ±(2^53 − 1).
    #[test]
    fn integer_outside_safe_range_has_no_header_form() {
        assert_eq!(enc(json!(MAX_SAFE_INTEGER)).unwrap(), "9007199254740991");
        assert_eq!(enc(json!(-MAX_SAFE_INTEGER)).unwrap(), "-9007199254740991");
        assert_eq!(enc(json!(MAX_SAFE_INTEGER + 1)), None);
        assert_eq!(enc(json!(-MAX_SAFE_INTEGER - 1)), None);
        assert_eq!(enc(json!(u64::MAX)), None);
        assert_eq!(enc(json!(1e300)), None);
    }

    /// streamable-http.mdx, "Value Encoding": booleans as lowercase `true` / `false`.
    #[test]
    fn boolean_is_sent_as_lowercase_true_or_false() {
        assert_eq!(enc(json!(true)).unwrap(), "true");
        assert_eq!(enc(json!(false)).unwrap(), "false");
    }

    /// streamable-http.mdx, "Value Encoding" table: `"Hello, 世界"` → Base64.
    #[test]
    fn non_ascii_string_is_base64_encoded() {
        assert_eq!(
            enc(json!("Hello, 世界")).unwrap(),
            "=?base64?SGVsbG8sIOS4lueVjA==?="
        );
    }

    /// streamable-http.mdx, "Value Encoding" table: `" padded "` → Base64; a single leading or
    /// trailing space is enough.
    #[test]
    fn leading_or_trailing_whitespace_is_base64_encoded() {
        assert_eq!(enc(json!(" padded ")).unwrap(), "=?base64?IHBhZGRlZCA=?=");
        assert_eq!(enc(json!(" us-west1")).unwrap(), "=?base64?IHVzLXdlc3Qx?=");
        assert_eq!(enc(json!("us-west1 ")).unwrap(), "=?base64?dXMtd2VzdDEg?=");
        assert_eq!(enc(json!(" ")).unwrap(), "=?base64?IA==?=");
    }

    /// streamable-http.mdx, "Value Encoding": a space inside the value is visible ASCII.
    #[test]
    fn internal_space_is_sent_as_is() {
        assert_eq!(enc(json!("us west 1")).unwrap(), "us west 1");
    }

    /// streamable-http.mdx, "Value Encoding" table: `"line1\nline2"` → Base64; every control
    /// character, tab included, needs encoding.
    #[test]
    fn control_characters_and_tabs_are_base64_encoded() {
        assert_eq!(
            enc(json!("line1\nline2")).unwrap(),
            "=?base64?bGluZTEKbGluZTI=?="
        );
        assert_eq!(
            enc(json!("line1\r\nline2")).unwrap(),
            "=?base64?bGluZTENCmxpbmUy?="
        );
        assert_eq!(enc(json!("\tindented")).unwrap(), "=?base64?CWluZGVudGVk?=");
        assert_eq!(enc(json!("a\tb")).unwrap(), "=?base64?YQli?=");
        assert_eq!(enc(json!("a\u{7f}")).unwrap(), "=?base64?YX8=?=");
        assert_eq!(enc(json!("\0")).unwrap(), "=?base64?AA==?=");
    }

    /// streamable-http.mdx, "Value Encoding": a plain value matching the sentinel pattern is
    /// encoded too (table row `"=?base64?literal?="`), including the overlapping `=?base64?=`.
    #[test]
    fn sentinel_looking_value_is_base64_encoded() {
        assert_eq!(
            enc(json!("=?base64?literal?=")).unwrap(),
            "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="
        );
        assert!(enc(json!("=?base64?=")).unwrap().starts_with(BASE64_PREFIX));
        assert_eq!(
            decode_param_value(&enc(json!("=?base64?=")).unwrap()).unwrap(),
            "=?base64?="
        );
        // Only both markers together make the pattern.
        assert_eq!(enc(json!("=?base64?abc")).unwrap(), "=?base64?abc");
        assert_eq!(enc(json!("abc?=")).unwrap(), "abc?=");
    }

    /// streamable-http.mdx, "Value Encoding": the markers are case-sensitive, so an uppercase
    /// look-alike is an ordinary plain value both ways.
    #[test]
    fn sentinel_markers_are_case_sensitive() {
        assert_eq!(enc(json!("=?BASE64?YQ==?=")).unwrap(), "=?BASE64?YQ==?=");
        assert_eq!(
            decode_param_value("=?BASE64?YQ==?=").unwrap(),
            "=?BASE64?YQ==?="
        );
        assert_eq!(decode_param_value("=?base64?YQ==?=").unwrap(), "a");
    }

    /// streamable-http.mdx, "Server Behavior for Custom Headers" (conformance
    /// `http-custom-headers`, `Mcp-Param-EmptyVal:`): an empty string is an empty value.
    #[test]
    fn empty_string_is_sent_as_empty_value() {
        assert_eq!(enc(json!("")).unwrap(), "");
        assert_eq!(decode_param_value("").unwrap(), "");
    }

    /// streamable-http.mdx, "Server Behavior for Custom Headers": `null` is omitted; objects,
    /// arrays and fractions have no header form.
    #[test]
    fn null_object_array_and_fraction_have_no_header_form() {
        assert_eq!(encode_argument(&json!(null)), Ok(None));
        assert_eq!(enc(json!({"a": 1})), None);
        assert_eq!(enc(json!([1])), None);
        assert_eq!(enc(json!(2.5)), None);
    }

    /// streamable-http.mdx, "Value Encoding": Base64 is the standard alphabet (`+`, `/`) with
    /// `=` padding, as in the table's `PT9iYXNlNjQ/bGl0ZXJhbD89`.
    #[test]
    fn base64_is_standard_alphabet_with_padding() {
        for (raw, b64) in [
            (&b""[..], ""),
            (b"f", "Zg=="),
            (b"fo", "Zm8="),
            (b"foo", "Zm9v"),
            (b"foob", "Zm9vYg=="),
            (b"\xfb\xff", "+/8="),
        ] {
            assert_eq!(base64_encode(raw), b64);
            assert_eq!(base64_decode(b64).unwrap(), raw);
        }
    }

    /// streamable-http.mdx, "Server Validation": a server rejects header values it cannot
    /// decode; the decoder is strict, so each text has one Base64 form.
    #[test]
    fn decoder_rejects_malformed_base64_and_raw_control_characters() {
        for bad in [
            "=?base64?Zg?=",       // no padding
            "=?base64?Zh==?=",     // non-zero hidden bits
            "=?base64?Z===?=",     // three pad characters
            "=?base64?Zg==Zg==?=", // padding in the middle
            "=?base64?Zm9v-_==?=", // URL-safe alphabet
            "=?base64?=",          // markers overlap
        ] {
            assert_eq!(
                decode_param_value(bad),
                Err(DecodeError::InvalidBase64),
                "{bad}"
            );
        }
        assert_eq!(
            decode_param_value("=?base64?/w==?="),
            Err(DecodeError::NotUtf8)
        );
        for bad in ["a\tb", "a\r\nb", " a", "a ", "é"] {
            assert_eq!(
                decode_param_value(bad),
                Err(DecodeError::InvalidCharacter),
                "{bad:?}"
            );
        }
    }

    // --- Schema Extension -----------------------------------------------------------------

    /// streamable-http.mdx, "Schema Extension" (and its `execute_sql` example): annotations on
    /// top-level string, integer and boolean properties are kept, with their spelling.
    #[test]
    fn top_level_string_integer_boolean_properties_are_annotated() {
        let schema = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "priority": {"type": "integer", "x-mcp-header": "Priority"},
            "verbose": {"type": "boolean", "x-mcp-header": "verbose"},
            "query": {"type": "string"}
        }});
        let h = tool_headers("t", &schema).unwrap();
        assert_eq!(h.tool_name(), "t");
        let got: Vec<(&str, &[String])> = h.params().iter().map(|p| (p.name(), p.path())).collect();
        assert_eq!(
            got,
            vec![
                ("Priority", &["priority".to_owned()][..]),
                ("Region", &["region".to_owned()][..]),
                ("verbose", &["verbose".to_owned()][..]),
            ]
        );
        assert_eq!(h.params()[1].header_name(), "Mcp-Param-Region");
    }

    /// streamable-http.mdx, "Schema Extension": a tool without annotations mirrors nothing.
    #[test]
    fn tool_without_annotations_mirrors_nothing() {
        let h = tool_headers("t", &json!({"type": "object"})).unwrap();
        assert!(h.is_empty());
        assert!(tool_headers("t", &Value::Null).unwrap().is_empty());
    }

    /// streamable-http.mdx, "Schema Extension": nested object properties are permitted when
    /// every step is a `properties` key; extraction reads that exact path.
    #[test]
    fn nested_properties_chain_is_statically_reachable() {
        let schema = json!({"type": "object", "properties": {"target": {"type": "object",
            "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}}}});
        let h = tool_headers("t", &schema).unwrap();
        let p = &h.params()[0];
        assert_eq!(p.path(), ["target".to_owned(), "region".to_owned()]);
        assert_eq!(
            p.extract(&json!({"target": {"region": "eu"}, "region": "no"})),
            Some(&json!("eu"))
        );
        assert_eq!(p.extract(&json!({"target": "eu"})), None);
        assert_eq!(p.extract(&json!({"region": "eu"})), None);
    }

    /// streamable-http.mdx, "Schema Extension": an x-mcp-header value must not be empty.
    #[test]
    fn header_name_must_not_be_empty() {
        let r = reason("invalid_empty_header", one("", json!({"type": "string"})));
        assert_eq!(
            r,
            ToolHeaderReason::Empty {
                location: "#/properties/p/x-mcp-header".into()
            }
        );
    }

    /// streamable-http.mdx, "Schema Extension": the value must be `1*tchar` and hold no control
    /// character (conformance `http-invalid-tool-headers` names).
    #[test]
    fn header_name_must_be_a_token() {
        for bad in [
            "My Region",
            "Region:Primary",
            "Région",
            "Region\t1",
            "a\r\nb",
            "(x)",
        ] {
            let r = reason("t", one(bad, json!({"type": "string"})));
            assert!(
                matches!(r, ToolHeaderReason::NotAToken { .. }),
                "{bad:?}: {r}"
            );
        }
        for good in ["Region", "x-Trace_id.v2", "!#$%&'*+-.^_`|~0"] {
            assert!(
                tool_headers("t", &one(good, json!({"type": "string"}))).is_ok(),
                "{good}"
            );
        }
    }

    /// streamable-http.mdx, "Schema Extension": the annotation value is a header name, so a
    /// string.
    #[test]
    fn header_name_must_be_a_string() {
        let schema =
            json!({"type": "object", "properties": {"p": {"type": "string", "x-mcp-header": 7}}});
        assert!(matches!(
            reason("t", schema),
            ToolHeaderReason::NotAString { .. }
        ));
    }

    /// streamable-http.mdx, "Schema Extension": values must be case-insensitively unique
    /// (conformance `invalid_duplicate_same_case` / `invalid_duplicate_diff_case`).
    #[test]
    fn header_names_must_be_unique_ignoring_case() {
        for (a, b) in [("Region", "Region"), ("MyField", "myfield")] {
            let schema = json!({"type": "object", "properties": {
                "a": {"type": "string", "x-mcp-header": a},
                "b": {"type": "string", "x-mcp-header": b}}});
            let r = reason("dup", schema);
            assert_eq!(
                r,
                ToolHeaderReason::Duplicate {
                    name: b.into(),
                    location: "#/properties/b/x-mcp-header".into(),
                    first_name: a.into(),
                    first_location: "#/properties/a/x-mcp-header".into(),
                }
            );
        }
    }

    /// tools.mdx, "x-mcp-header": only string, integer and boolean; `number` is not permitted,
    /// nor object, array or null (conformance `invalid_object_header` / `_array_` / `_null_`).
    #[test]
    fn number_object_array_and_null_types_are_rejected() {
        for t in ["number", "object", "array", "null"] {
            let r = reason("t", one("X", json!({"type": t})));
            assert_eq!(
                r,
                ToolHeaderReason::DisallowedType {
                    name: "X".into(),
                    location: "#/properties/p/x-mcp-header".into(),
                    found: format!("\"{t}\""),
                }
            );
        }
        for t in [
            json!(["string", "number"]),
            json!(["null"]),
            json!([]),
            json!(3),
        ] {
            assert!(matches!(
                reason("t", one("X", json!({"type": t}))),
                ToolHeaderReason::DisallowedType { .. }
            ));
        }
    }

    /// tools.mdx, "x-mcp-header" (primitive types; `null` values are omitted per "Server
    /// Behavior for Custom Headers"): a type array of allowed primitives plus `"null"` is a
    /// nullable primitive and is accepted.
    #[test]
    fn nullable_primitive_type_array_is_accepted() {
        for t in [
            json!(["string", "null"]),
            json!(["integer"]),
            json!(["null", "boolean"]),
        ] {
            assert!(tool_headers("t", &one("X", json!({"type": t}))).is_ok());
        }
    }

    /// tools.mdx, "x-mcp-header": the property must be known to be a primitive, so one without
    /// `type` is rejected.
    #[test]
    fn property_without_type_is_rejected() {
        let r = reason("t", one("X", json!({"enum": ["a", "b"]})));
        assert!(matches!(r, ToolHeaderReason::MissingType { .. }), "{r}");
    }

    /// tools.mdx, "x-mcp-header" (primitive types): a nullable primitive written as
    /// `anyOf`/`oneOf` of `{"type": ...}` branches on the annotated property itself (pydantic's
    /// `str | None`) is a primitive; any other branch makes it not one.
    #[test]
    fn nullable_primitive_written_as_any_of_is_accepted() {
        let nullable = json!({"anyOf": [{"type": "string"}, {"type": "null"}], "default": null});
        assert!(tool_headers("t", &one("X", nullable)).is_ok());
        assert!(tool_headers("t", &one("X", json!({"oneOf": [{"type": "integer"}]}))).is_ok());
        for bad in [
            json!({"anyOf": [{"type": "number"}, {"type": "null"}]}),
            json!({"anyOf": [{"type": "string"}, {"minLength": 1}]}),
            json!({"anyOf": [{"type": "null"}]}),
            json!({"anyOf": "string"}),
        ] {
            let r = reason("t", one("X", bad.clone()));
            assert!(
                matches!(r, ToolHeaderReason::DisallowedType { .. }),
                "{bad}: {r}"
            );
        }
    }

    /// streamable-http.mdx, "Schema Extension": the chain must not pass through `items`, other
    /// array keywords, composition, conditional keywords, `$ref` targets or any keyword other
    /// than `properties`.
    #[test]
    fn annotation_off_the_properties_chain_invalidates_the_tool() {
        let leaf = json!({"type": "string", "x-mcp-header": "X"});
        let cases = [
            (json!({"items": leaf}), "/properties/p/items/x-mcp-header"),
            (
                json!({"prefixItems": [leaf]}),
                "/properties/p/prefixItems/0/x-mcp-header",
            ),
            (
                json!({"oneOf": [leaf]}),
                "/properties/p/oneOf/0/x-mcp-header",
            ),
            (
                json!({"anyOf": [leaf]}),
                "/properties/p/anyOf/0/x-mcp-header",
            ),
            (
                json!({"allOf": [leaf]}),
                "/properties/p/allOf/0/x-mcp-header",
            ),
            (json!({"not": leaf}), "/properties/p/not/x-mcp-header"),
            (json!({"if": leaf}), "/properties/p/if/x-mcp-header"),
            (json!({"then": leaf}), "/properties/p/then/x-mcp-header"),
            (json!({"else": leaf}), "/properties/p/else/x-mcp-header"),
            (
                json!({"additionalProperties": leaf}),
                "/properties/p/additionalProperties/x-mcp-header",
            ),
            (
                json!({"patternProperties": {"^a": leaf}}),
                "/properties/p/patternProperties/^a/x-mcp-header",
            ),
            (
                json!({"properties": {"q": {"items": {"properties": {"r": leaf}}}}}),
                "/properties/p/properties/q/items/properties/r/x-mcp-header",
            ),
        ];
        for (inner, pointer) in cases {
            let schema = json!({"type": "object", "properties": {"p": inner}});
            assert_eq!(
                reason("t", schema),
                ToolHeaderReason::NotStaticallyReachable {
                    location: format!("#{pointer}")
                }
            );
        }
    }

    /// streamable-http.mdx, "Schema Extension" (and conformance `json-schema-ref-no-deref`):
    /// `$ref` is never followed; an annotation in `$defs` is unreachable.
    #[test]
    fn annotation_behind_ref_invalidates_the_tool() {
        let schema = json!({"type": "object",
            "properties": {"p": {"$ref": "#/$defs/r"}},
            "$defs": {"r": {"type": "string", "x-mcp-header": "X"}}});
        assert_eq!(
            reason("t", schema),
            ToolHeaderReason::NotStaticallyReachable {
                location: "#/$defs/r/x-mcp-header".into()
            }
        );
        let remote = json!({"type": "object", "properties": {"profile": {"$ref": "http://localhost:1/canary.json"}}});
        assert!(tool_headers("t", &remote).unwrap().is_empty());
    }

    /// streamable-http.mdx, "Schema Extension": the root is not a property (and is an object).
    #[test]
    fn annotation_on_the_root_invalidates_the_tool() {
        let schema = json!({"type": "object", "x-mcp-header": "X"});
        assert_eq!(
            reason("t", schema),
            ToolHeaderReason::NotStaticallyReachable {
                location: "#/x-mcp-header".into()
            }
        );
    }

    /// streamable-http.mdx, "Schema Extension": inside `properties` the keys are property names,
    /// so a property *named* `x-mcp-header` is not an annotation; pointer tokens are escaped.
    #[test]
    fn property_named_x_mcp_header_is_not_an_annotation() {
        let schema = json!({"type": "object", "properties": {
            "x-mcp-header": {"type": "object"},
            "a/b~c": {"type": "string", "x-mcp-header": "AB"}}});
        let h = tool_headers("t", &schema).unwrap();
        assert_eq!(h.params().len(), 1);
        assert_eq!(h.params()[0].path(), ["a/b~c".to_owned()]);
        let bad = json!({"type": "object", "properties": {"a/b~c": {"type": "number", "x-mcp-header": "AB"}}});
        let ToolHeaderReason::DisallowedType { location, .. } = reason("t", bad) else {
            panic!("wrong reason")
        };
        assert_eq!(location, "#/properties/a~1b~0c/x-mcp-header");
    }

    /// JSON Schema 2020-12: `const`, `enum`, `default` and `examples` hold instance data, not
    /// schemas, so an `x-mcp-header` key inside them is data, not a misplaced annotation.
    #[test]
    fn instance_data_keywords_are_not_searched() {
        let schema = json!({"type": "object", "properties": {"p": {"type": "object",
            "default": {"x-mcp-header": "X"}, "examples": [{"x-mcp-header": "Y"}],
            "const": {"x-mcp-header": "Z"}, "enum": [{"x-mcp-header": "W"}]}}});
        assert!(tool_headers("t", &schema).unwrap().is_empty());
    }

    /// tools.mdx, "x-mcp-header": the warning names the tool and the reason.
    #[test]
    fn rejection_message_names_tool_and_reason() {
        let e = tool_headers("execute_sql", &one("Region", json!({"type": "number"}))).unwrap_err();
        assert_eq!(
            e.to_string(),
            "tool \"execute_sql\" is excluded: x-mcp-header \"Region\" at \
             #/properties/p/x-mcp-header is on a property of type \"number\"; only string, \
             integer and boolean are allowed"
        );
    }

    /// tools.mdx, "x-mcp-header": a malformed tool is excluded, the others stay usable, in
    /// their order.
    #[test]
    fn partition_keeps_valid_tools_and_rejects_invalid_ones() {
        let tools = vec![
            json!({"name": "a", "inputSchema": {"type": "object"}}),
            json!({"name": "bad", "inputSchema": one("", json!({"type": "string"}))}),
            json!({"inputSchema": {}}),
            json!({"name": "b", "inputSchema": one("R", json!({"type": "string"}))}),
            json!({"name": "c"}),
        ];
        let (ok, bad) = partition_tools(tools);
        let names: Vec<&str> = ok.iter().map(|(_, h)| h.tool_name()).collect();
        assert_eq!(names, ["a", "b", "c"]);
        assert_eq!(ok[1].0["name"], "b");
        assert_eq!(ok[1].1.params()[0].name(), "R");
        assert_eq!(bad.len(), 2);
        assert_eq!(bad[0].tool, "bad");
        assert_eq!(bad[1].reason, ToolHeaderReason::NotATool { index: 2 });
    }

    // --- Request headers ------------------------------------------------------------------

    fn call(args: Value) -> Value {
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"},
            "name": "t", "arguments": args}})
    }

    fn t_headers() -> ToolHeaders {
        tool_headers(
            "t",
            &json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "n": {"type": ["integer", "null"], "x-mcp-header": "N"}}}),
        )
        .unwrap()
    }

    /// streamable-http.mdx, "Sending Messages": `Accept` lists both `application/json` and
    /// `text/event-stream`; the body is `application/json`.
    #[test]
    fn every_message_accepts_json_and_event_stream_and_is_json() {
        for body in [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#,
        ] {
            let h = request_headers(body, None).unwrap();
            assert_eq!(h.get("accept"), Some("application/json, text/event-stream"));
            assert_eq!(h.get("content-type"), Some("application/json"));
        }
    }

    /// streamable-http.mdx, "Protocol Version Header": the header equals `_meta`'s
    /// `io.modelcontextprotocol/protocolVersion`.
    #[test]
    fn protocol_version_header_equals_meta() {
        let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01"}}}"#;
        let h = request_headers(body, None).unwrap();
        assert_eq!(h.get("MCP-Protocol-Version"), Some("2099-01-01"));
    }

    /// streamable-http.mdx, "Protocol Version Header": mirrored only from the body; a
    /// legacy-era body has no `_meta` version, so none is invented here.
    #[test]
    fn body_without_meta_version_gets_no_protocol_version_header() {
        for body in [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"progressToken":1}}}"#,
        ] {
            assert!(!request_headers(body, None)
                .unwrap()
                .contains("mcp-protocol-version"));
        }
        for bad in [json!(2026), json!(""), json!("2026-07-28\r\nX: y")] {
            let msg = json!({"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion": bad}}});
            assert_eq!(
                request_headers_for(&msg, None),
                Err(HeaderBuildError::InvalidProtocolVersion)
            );
        }
    }

    /// streamable-http.mdx, "Standard Request Headers": `Mcp-Method` mirrors `method` on all
    /// requests (and, harmlessly, on notifications).
    #[test]
    fn mcp_method_mirrors_method() {
        for m in [
            "tools/list",
            "server/discover",
            "notifications/cancelled",
            "x/custom-1",
        ] {
            let h = request_headers_for(&json!({"jsonrpc":"2.0","method": m}), None).unwrap();
            assert_eq!(h.get("mcp-method"), Some(m));
            assert!(!h.contains("mcp-name"));
        }
        let bad = json!({"jsonrpc":"2.0","id":1,"method":"a\nb"});
        assert!(matches!(
            request_headers_for(&bad, None),
            Err(HeaderBuildError::UnrepresentableMethod(_))
        ));
    }

    /// streamable-http.mdx, "Standard Request Headers": `Mcp-Name` is `params.name` for
    /// `tools/call` and `prompts/get`, `params.uri` for `resources/read`, and absent elsewhere.
    #[test]
    fn mcp_name_only_for_tools_call_prompts_get_resources_read() {
        assert_eq!(name_field("tools/call"), Some("name"));
        assert_eq!(name_field("prompts/get"), Some("name"));
        assert_eq!(name_field("resources/read"), Some("uri"));
        for m in [
            "tools/list",
            "completion/complete",
            "subscriptions/listen",
            "server/discover",
        ] {
            assert_eq!(name_field(m), None, "{m}");
            let msg = json!({"jsonrpc":"2.0","id":1,"method": m,"params":{"name":"n","uri":"u"}});
            assert!(!request_headers_for(&msg, None)
                .unwrap()
                .contains("Mcp-Name"));
        }
        let read = json!({"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"name":"n","uri":"file:///a%20b.txt"}});
        assert_eq!(
            request_headers_for(&read, None).unwrap().get("Mcp-Name"),
            Some("file:///a%20b.txt")
        );
    }

    /// streamable-http.mdx, "Value Encoding": the same encoding applies to `Mcp-Name`.
    #[test]
    fn mcp_name_uses_value_encoding() {
        let msg = json!({"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"résumé"}});
        let h = request_headers_for(&msg, None).unwrap();
        assert_eq!(h.get("Mcp-Name"), Some("=?base64?csOpc3Vtw6k=?="));
    }

    /// streamable-http.mdx, "Standard Request Headers": `Mcp-Name` is required on those
    /// methods, so a body without the string field is refused.
    #[test]
    fn missing_name_is_an_error() {
        for (m, params) in [
            ("tools/call", json!({})),
            ("prompts/get", json!({"name": 3})),
            ("resources/read", json!({"name": "x"})),
        ] {
            let msg = json!({"jsonrpc":"2.0","id":1,"method": m,"params": params});
            assert!(
                matches!(
                    request_headers_for(&msg, None),
                    Err(HeaderBuildError::MissingName { .. })
                ),
                "{m}"
            );
        }
    }

    /// streamable-http.mdx, "Client Behavior": one `Mcp-Param-{Name}` per annotation, from the
    /// argument at its path, spelled as annotated, after the standard headers.
    #[test]
    fn param_headers_mirror_annotated_arguments() {
        let h = request_headers_for(
            &call(json!({"region": "us-west1", "n": 42})),
            Some(&t_headers()),
        )
        .unwrap();
        assert_eq!(
            pairs(&h),
            [
                ("Accept", ACCEPT),
                ("Content-Type", CONTENT_TYPE),
                ("MCP-Protocol-Version", "2026-07-28"),
                ("Mcp-Method", "tools/call"),
                ("Mcp-Name", "t"),
                ("Mcp-Param-N", "42"),
                ("Mcp-Param-Region", "us-west1"),
            ]
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
        );
    }

    /// streamable-http.mdx, "Server Behavior for Custom Headers": a `null` or absent argument
    /// (or absent `arguments`) omits the header.
    #[test]
    fn null_or_absent_argument_omits_the_header() {
        let th = t_headers();
        for args in [json!({"region": "x", "n": null}), json!({"region": "x"})] {
            let h = request_headers_for(&call(args), Some(&th)).unwrap();
            assert!(!h.contains("Mcp-Param-N"));
            assert_eq!(h.get("Mcp-Param-Region"), Some("x"));
        }
        let mut msg = call(json!({}));
        msg["params"].as_object_mut().unwrap().remove("arguments");
        let h = request_headers_for(&msg, Some(&th)).unwrap();
        assert!(!h.iter().any(|(n, _)| n.starts_with(PARAM_HEADER_PREFIX)));
    }

    /// SEP-2243 via the digest, section 13: without the tool's schema, no `Mcp-Param-*`.
    #[test]
    fn without_tool_headers_no_param_header_is_sent() {
        let h = request_headers_for(&call(json!({"region": "x"})), None).unwrap();
        assert!(!h.contains("Mcp-Param-Region"));
    }

    /// streamable-http.mdx, "Client Behavior": the annotations must be those of the tool
    /// called, and only a `tools/call` uses them.
    #[test]
    fn tool_headers_of_another_tool_or_method_are_refused() {
        let other = tool_headers("other", &json!({})).unwrap();
        assert_eq!(
            request_headers_for(&call(json!({})), Some(&other)),
            Err(HeaderBuildError::WrongTool {
                expected: "other".into(),
                called: "t".into()
            })
        );
        let list = json!({"jsonrpc":"2.0","id":1,"method":"tools/list"});
        assert!(matches!(
            request_headers_for(&list, Some(&t_headers())),
            Err(HeaderBuildError::ToolHeadersNotApplicable { .. })
        ));
    }

    /// tools.mdx, "x-mcp-header": an argument without a header form is refused with an error
    /// naming tool and header but never the value (it may be a secret).
    #[test]
    fn unencodable_argument_is_refused_without_echoing_the_value() {
        let th = t_headers();
        for (args, found) in [
            (json!({"region": {"secret": "hunter2"}}), "an object"),
            (json!({"region": ["hunter2"]}), "an array"),
            (
                json!({"n": 1.5}),
                "a number with a fractional part (or not finite)",
            ),
            (
                json!({"n": 9_007_199_254_740_992_i64}),
                "an integer outside the safe range ±(2^53 − 1)",
            ),
        ] {
            let e = request_headers_for(&call(args), Some(&th)).unwrap_err();
            let HeaderBuildError::UnencodableArgument { tool, found: f, .. } = &e else {
                panic!("{e}")
            };
            assert_eq!((tool.as_str(), *f), ("t", found));
            assert!(!e.to_string().contains("hunter2"));
        }
    }

    /// streamable-http.mdx, "Sending Messages": one request or notification per POST; the
    /// client sends no responses and no batches.
    #[test]
    fn responses_batches_and_non_json_are_refused() {
        assert_eq!(
            request_headers(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#, None),
            Err(HeaderBuildError::NoMethod)
        );
        assert_eq!(
            request_headers(r#"[{"jsonrpc":"2.0","id":1,"method":"a"}]"#, None),
            Err(HeaderBuildError::NotAnObject)
        );
        assert!(matches!(
            request_headers("{\"secret\": hunter2", None),
            Err(HeaderBuildError::InvalidJson { line: 1, .. })
        ));
        let e = request_headers("{\"secret\": hunter2", None).unwrap_err();
        assert!(!e.to_string().contains("hunter2"));
    }
}

//! `x-mcp-header` schema walk, request headers and header value encoding on arbitrary input.
//!
//! Invariants checked on every run:
//! - the schema walk never panics; every accepted annotation is a non-empty RFC 9110 token,
//!   unique ignoring case, on a non-empty `properties` path, and `Mcp-Param-{name}` is a valid
//!   header name;
//! - `partition_tools` keeps or rejects each tool exactly once;
//! - headers built for a `tools/call` with arbitrary arguments always start with the standard
//!   ones, and every `Mcp-Name` / `Mcp-Param-*` value decodes back to the body's value;
//! - any string round-trips through `encode_str` / `decode_param_value`, its encoding is plain
//!   visible ASCII with no leading or trailing space, and a sentinel-shaped string is never
//!   sent as-is (checked on every run with the input wrapped as one);
//! - decoding arbitrary text never panics, and accepts a non-sentinel value only unchanged.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use mcpwire_core::http::{validate_name, validate_value};
use mcpwire_core::mcp::headers::{
    decode_param_value, encode_param_value, encode_str, looks_like_sentinel, partition_tools,
    request_headers_for, tool_headers, BASE64_PREFIX, BASE64_SUFFIX,
};
use serde_json::{json, Value};

/// One annotation placed into a generated schema: the keyword chain leading to it, the
/// property's type and the annotation's value.
#[derive(Arbitrary, Debug)]
struct Placed<'a> {
    steps: Vec<(u8, u8)>,
    ty: u8,
    name: &'a str,
    known_name: Option<u8>,
}

#[derive(Arbitrary, Debug)]
struct Input<'a> {
    placed: Vec<Placed<'a>>,
    schema: &'a [u8],
    arguments: &'a [u8],
    tool: &'a str,
    text: &'a str,
    received: &'a str,
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

const TYPES: [&str; 7] = [
    "string", "integer", "boolean", "number", "object", "array", "null",
];
const NAMES: [&str; 6] = ["Region", "region", "A", "My Region", "", "Région"];
const PROPS: [&str; 3] = ["a", "b", "x-mcp-header"];

/// The child of `node` under `key`, created as an empty object when missing or not an object.
fn child<'v>(node: &'v mut Value, key: &str) -> &'v mut Value {
    if !node.is_object() {
        *node = json!({});
    }
    let slot = &mut node[key];
    if !slot.is_object() {
        *slot = json!({});
    }
    slot
}

/// Builds a schema from placed annotations; returns it and whether some annotation sits off
/// the `properties` chain (which must make the tool invalid).
fn build(placed: &[Placed<'_>]) -> (Value, bool) {
    let mut root = json!({"type": "object"});
    let mut off_chain = false;
    for p in placed.iter().take(8) {
        let mut node = &mut root;
        let mut reachable = !p.steps.is_empty();
        for &(kw, prop) in p.steps.iter().take(6) {
            let prop = PROPS[usize::from(prop) % PROPS.len()];
            node = match kw % 7 {
                0 => child(child(node, "properties"), prop),
                1 => {
                    reachable = false;
                    child(node, "items")
                }
                2 => {
                    reachable = false;
                    let list = &mut node["oneOf"];
                    if !list.is_array() {
                        *list = json!([{}]);
                    }
                    &mut list[0]
                }
                3 => {
                    reachable = false;
                    child(child(node, "$defs"), prop)
                }
                4 => {
                    reachable = false;
                    child(node, "additionalProperties")
                }
                5 => {
                    reachable = false;
                    child(node, "not")
                }
                _ => {
                    reachable = false;
                    child(node, "if")
                }
            };
        }
        if !node.is_object() {
            *node = json!({});
        }
        node["type"] = json!(TYPES[usize::from(p.ty) % TYPES.len()]);
        let name = match p.known_name {
            Some(i) => NAMES[usize::from(i) % NAMES.len()],
            None => p.name,
        };
        node["x-mcp-header"] = json!(name);
        off_chain |= !reachable;
    }
    (root, off_chain)
}

fn plain_ascii(v: &str) -> bool {
    v.bytes().all(|b| (0x20..=0x7e).contains(&b)) && !v.starts_with(' ') && !v.ends_with(' ')
}

fuzz_target!(|input: Input<'_>| {
    // Value encoding.
    let encoded = encode_str(input.text);
    assert_eq!(decode_param_value(&encoded).as_deref(), Ok(input.text));
    assert!(plain_ascii(&encoded), "{:?} -> {encoded:?}", input.text);
    assert!(validate_value("Mcp-Param-X", &encoded).is_ok());
    if looks_like_sentinel(input.text) {
        assert_ne!(encoded, input.text);
    }
    // The same text wrapped as a sentinel, on every run: a random input almost never is one,
    // and a value that looks like `=?base64?...?=` must never be sent as-is.
    let wrapped = format!("{BASE64_PREFIX}{}{BASE64_SUFFIX}", input.text);
    let wrapped_encoded = encode_str(&wrapped);
    assert_ne!(wrapped_encoded, wrapped);
    assert_eq!(
        decode_param_value(&wrapped_encoded).as_deref(),
        Ok(wrapped.as_str())
    );
    if let Ok(decoded) = decode_param_value(input.received) {
        if !looks_like_sentinel(input.received) {
            assert_eq!(decoded, input.received);
        }
    }

    // Generated schemas: an annotation off the `properties` chain always invalidates the tool.
    let (generated, off_chain) = build(&input.placed);
    let verdict = tool_headers("generated", &generated);
    if off_chain {
        assert!(verdict.is_err(), "{generated}");
    }
    if let Ok(tool) = &verdict {
        for p in tool.params() {
            assert!(!p.name().is_empty() && p.name().bytes().all(is_tchar));
        }
    }

    // Schema walk on arbitrary JSON (the generated schema when the bytes are not JSON).
    let schema = serde_json::from_slice::<Value>(input.schema).unwrap_or(generated);
    let tool = match tool_headers(input.tool, &schema) {
        Ok(tool) => tool,
        Err(e) => {
            assert_eq!(e.tool, input.tool);
            assert!(!e.to_string().is_empty());
            let (kept, rejected) =
                partition_tools(vec![json!({"name": input.tool, "inputSchema": schema})]);
            assert!(kept.is_empty() && rejected.len() == 1);
            return;
        }
    };
    assert_eq!(tool.tool_name(), input.tool);
    for (i, p) in tool.params().iter().enumerate() {
        assert!(
            !p.name().is_empty() && p.name().bytes().all(is_tchar),
            "{:?}",
            p.name()
        );
        assert!(validate_name(&p.header_name()).is_ok());
        assert!(!p.path().is_empty());
        for q in tool.params().iter().skip(i + 1) {
            assert!(!p.name().eq_ignore_ascii_case(q.name()));
        }
    }
    let (kept, rejected) = partition_tools(vec![
        json!({"name": input.tool, "inputSchema": schema.clone()}),
    ]);
    assert!(kept.len() == 1 && rejected.is_empty());

    // Request headers for a call with arbitrary arguments.
    // Arbitrary JSON arguments, or else `text` at every annotated path.
    let arguments = serde_json::from_slice::<Value>(input.arguments).unwrap_or_else(|_| {
        let mut args = json!({});
        for p in tool.params() {
            let mut node = &mut args;
            for key in p.path() {
                node = child(node, key);
            }
            *node = json!(input.text);
        }
        args
    });
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"},
        "name": input.tool, "arguments": arguments}});
    let Ok(headers) = request_headers_for(&body, Some(&tool)) else {
        return;
    };
    assert_eq!(headers.get("Mcp-Method"), Some("tools/call"));
    assert_eq!(headers.get("MCP-Protocol-Version"), Some("2026-07-28"));
    let name = headers.get("Mcp-Name").map(decode_param_value);
    assert_eq!(name, Some(Ok(input.tool.to_owned())));
    for p in tool.params() {
        let sent = headers.get(&p.header_name());
        match p.extract(&arguments) {
            None | Some(Value::Null) => assert!(sent.is_none()),
            Some(value) => {
                let sent = sent.map(decode_param_value);
                let expected = match value {
                    Value::String(s) => s.clone(),
                    other => encode_param_value(other).unwrap_or_default(),
                };
                assert_eq!(sent, Some(Ok(expected)));
            }
        }
    }
    for (n, v) in headers.iter() {
        assert!(validate_name(n).is_ok());
        assert!(plain_ascii(v) || v.is_empty(), "{n}: {v:?}");
    }
});

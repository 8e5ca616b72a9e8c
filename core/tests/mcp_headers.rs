//! Streamable HTTP request headers built from the specification's own example bodies
//! (`fixtures/mcp/examples/`, copied from `shared/spec/mcp-2026-07-28/`), snapshots of the
//! headers per operation, and property tests of the value encoding.
#![allow(clippy::unwrap_used)]

use mcpwire_core::http::{validate_value, Headers};
use mcpwire_core::mcp::headers::{
    decode_param_value, encode_param_value, encode_str, looks_like_sentinel, partition_tools,
    request_headers, request_headers_for, tool_headers, HeaderBuildError, MAX_SAFE_INTEGER,
};
use proptest::prelude::*;
use serde_json::{json, Value};

const CALL_TOOL: &str =
    include_str!("../../fixtures/mcp/examples/CallToolRequest/call-tool-request.json");
const GET_PROMPT: &str =
    include_str!("../../fixtures/mcp/examples/GetPromptRequest/get-prompt-request.json");
const READ_RESOURCE: &str =
    include_str!("../../fixtures/mcp/examples/ReadResourceRequest/read-resource-request.json");
const LIST_TOOLS: &str =
    include_str!("../../fixtures/mcp/examples/ListToolsRequest/list-tools-request.json");
const DISCOVER: &str =
    include_str!("../../fixtures/mcp/examples/DiscoverRequest/server-discover-request.json");
const LISTEN: &str = include_str!(
    "../../fixtures/mcp/examples/SubscriptionsListenRequest/listen-for-list-changes.json"
);
const CANCELLED: &str = include_str!(
    "../../fixtures/mcp/examples/CancelledNotification/user-requested-cancellation.json"
);
const EXECUTE_SQL_TOOL: &str =
    include_str!("../../fixtures/mcp/examples/pages/tools-execute-sql-tool.json");
const EXECUTE_SQL_CALL: &str =
    include_str!("../../fixtures/mcp/examples/pages/streamable-http-execute-sql-request.json");

/// Headers as an HTTP request would show them, one per line.
fn render(h: &Headers) -> String {
    h.iter().map(|(n, v)| format!("{n}: {v}\n")).collect()
}

/// streamable-http.mdx, "Standard Request Headers", `tools/call` example (spec example body).
#[test]
fn tools_call_headers_mirror_method_and_name() {
    let h = request_headers(CALL_TOOL, None).unwrap();
    insta::assert_snapshot!("tools_call", render(&h));
    assert_eq!(h.get("Mcp-Name"), Some("get_weather"));
}

/// streamable-http.mdx, "Schema Extension", "Resulting HTTP request": the `execute_sql` tool
/// with `x-mcp-header: "Region"` called with `region: "us-west1"` adds
/// `Mcp-Param-Region: us-west1`, and nothing for the unannotated `query`.
#[test]
fn tools_call_with_x_mcp_header_adds_mcp_param_header() {
    let tool: Value = serde_json::from_str(EXECUTE_SQL_TOOL).unwrap();
    let th = tool_headers("execute_sql", &tool["inputSchema"]).unwrap();
    let h = request_headers(EXECUTE_SQL_CALL, Some(&th)).unwrap();
    insta::assert_snapshot!("tools_call_execute_sql", render(&h));
    assert_eq!(h.get("Mcp-Param-Region"), Some("us-west1"));
    assert!(!h
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case("Mcp-Param-Query")));
}

/// streamable-http.mdx, "Standard Request Headers": `prompts/get` carries `Mcp-Name` =
/// `params.name` (spec example body).
#[test]
fn prompts_get_headers_mirror_the_prompt_name() {
    let h = request_headers(GET_PROMPT, None).unwrap();
    insta::assert_snapshot!("prompts_get", render(&h));
    assert_eq!(h.get("Mcp-Name"), Some("code_review"));
}

/// streamable-http.mdx, "Standard Request Headers", `resources/read` example: `Mcp-Name` =
/// `params.uri`.
#[test]
fn resources_read_headers_mirror_the_uri() {
    let h = request_headers(READ_RESOURCE, None).unwrap();
    insta::assert_snapshot!("resources_read", render(&h));
    assert_eq!(h.get("Mcp-Name"), Some("file:///project/src/main.rs"));
}

/// streamable-http.mdx, "Standard Request Headers": other requests carry `Mcp-Method` but
/// no `Mcp-Name`.
#[test]
fn list_discover_and_listen_headers_have_method_but_no_name() {
    for (name, body) in [
        ("tools_list", LIST_TOOLS),
        ("server_discover", DISCOVER),
        ("subscriptions_listen", LISTEN),
    ] {
        let h = request_headers(body, None).unwrap();
        insta::assert_snapshot!(name, render(&h));
        assert!(!h.contains("Mcp-Name"));
        assert_eq!(h.get("MCP-Protocol-Version"), Some("2026-07-28"));
    }
}

/// streamable-http.mdx, "Sending Messages" and digest section 17 item 2: notification headers
/// are not defined by this revision; the spec's `notifications/cancelled` has no `_meta`, so it
/// gets `Mcp-Method` and no `MCP-Protocol-Version` (its sender adds the version it speaks).
#[test]
fn notification_headers_have_method_and_no_version_of_their_own() {
    let h = request_headers(CANCELLED, None).unwrap();
    insta::assert_snapshot!("notifications_cancelled", render(&h));
}

/// The conformance suite's `http-custom-headers` scenario (digest section 16), with a tool
/// schema written here: every value-encoding row of streamable-http.mdx, "Value Encoding",
/// and the omitted `null`.
#[test]
fn custom_header_values_are_encoded_per_the_value_encoding_table() {
    let prop = |t: &str, h: &str| json!({"type": t, "x-mcp-header": h});
    let schema = json!({"type": "object", "properties": {
        "region": prop("string", "Region"),
        "priority": prop("integer", "Priority"),
        "verbose": {"type": ["boolean", "null"], "x-mcp-header": "Verbose"},
        "debug": prop("boolean", "Debug"),
        "empty_val": prop("string", "EmptyVal"),
        "method_val": prop("string", "Method"),
        "float_val": {"type": "number"},
        "non_ascii_val": prop("string", "NonAscii"),
        "whitespace_val": prop("string", "Whitespace"),
        "leading_space_val": prop("string", "LeadingSpace"),
        "trailing_space_val": prop("string", "TrailingSpace"),
        "internal_space_val": prop("string", "InternalSpace"),
        "control_char_val": prop("string", "ControlChar"),
        "crlf_val": prop("string", "CrLf"),
        "tab_val": prop("string", "Tab"),
        "query": {"type": "string"}
    }});
    let th = tool_headers("test_custom_headers", &schema).unwrap();
    let call = |args: Value| {
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"},
            "name": "test_custom_headers", "arguments": args}})
    };
    let full = call(json!({
        "region": "us-west1", "priority": 42, "verbose": false, "debug": true,
        "empty_val": "", "method_val": "test-method", "float_val": 3.5,
        "non_ascii_val": "Hello, 世界", "whitespace_val": " padded ",
        "leading_space_val": " us-west1", "trailing_space_val": "us-west1 ",
        "internal_space_val": "us west 1", "control_char_val": "line1\nline2",
        "crlf_val": "line1\r\nline2", "tab_val": "\tindented", "query": "SELECT * FROM users"
    }));
    let h = request_headers_for(&full, Some(&th)).unwrap();
    insta::assert_snapshot!("tools_call_custom_headers", render(&h));
    assert_eq!(h.get("Mcp-Param-EmptyVal"), Some(""));
    assert_eq!(h.get("Mcp-Method"), Some("tools/call"));
    assert_eq!(h.get("Mcp-Param-Method"), Some("test-method"));

    let null =
        call(json!({"region": "us-east1", "priority": 1, "verbose": null, "query": "SELECT 1"}));
    let h = request_headers_for(&null, Some(&th)).unwrap();
    assert!(!h.contains("Mcp-Param-Verbose"));
    assert_eq!(h.get("Mcp-Param-Priority"), Some("1"));
}

/// tools.mdx, "x-mcp-header", and the conformance suite's `http-invalid-tool-headers`
/// scenario (digest section 16): the ten invalid tools are excluded, each with its reason;
/// `valid_tool` stays.
#[test]
fn invalid_x_mcp_header_tools_are_excluded_and_valid_one_kept() {
    let one = |name: &str, prop: Value| json!({"name": name, "inputSchema": {"type": "object", "properties": {"p": prop}}});
    let two = |name: &str, a: &str, b: &str| {
        json!({"name": name, "inputSchema": {"type": "object", "properties": {
            "a": {"type": "string", "x-mcp-header": a},
            "b": {"type": "string", "x-mcp-header": b}}}})
    };
    let tools = vec![
        one(
            "valid_tool",
            json!({"type": "string", "x-mcp-header": "Region"}),
        ),
        one(
            "invalid_empty_header",
            json!({"type": "string", "x-mcp-header": ""}),
        ),
        one(
            "invalid_object_header",
            json!({"type": "object", "x-mcp-header": "O"}),
        ),
        one(
            "invalid_array_header",
            json!({"type": "array", "x-mcp-header": "A"}),
        ),
        one(
            "invalid_null_header",
            json!({"type": "null", "x-mcp-header": "N"}),
        ),
        two("invalid_duplicate_same_case", "Region", "Region"),
        two("invalid_duplicate_diff_case", "MyField", "myfield"),
        one(
            "invalid_space_in_name",
            json!({"type": "string", "x-mcp-header": "My Region"}),
        ),
        one(
            "invalid_colon_in_name",
            json!({"type": "string", "x-mcp-header": "Region:Primary"}),
        ),
        one(
            "invalid_non_ascii_name",
            json!({"type": "string", "x-mcp-header": "Région"}),
        ),
        one(
            "invalid_control_char_name",
            json!({"type": "string", "x-mcp-header": "Region\t1"}),
        ),
    ];
    let (valid, rejected) = partition_tools(tools);
    assert_eq!(valid.len(), 1);
    assert_eq!(valid[0].0["name"], "valid_tool");
    assert_eq!(valid[0].1.params()[0].header_name(), "Mcp-Param-Region");
    let messages: String = rejected.iter().map(|e| format!("{e}\n")).collect();
    insta::assert_snapshot!("invalid_tools_rejected", messages);
    assert_eq!(rejected.len(), 10);
}

/// tools.mdx, "x-mcp-header": the walk never panics on odd schemas, and what it accepts is
/// usable (here: boolean schemas, non-object roots, huge nesting).
#[test]
fn schema_walk_tolerates_any_json() {
    for schema in [
        json!(true),
        json!([{"x-mcp-header": "X"}]),
        json!("x"),
        json!(null),
    ] {
        let _ = tool_headers("t", &schema);
    }
    assert!(tool_headers("t", &json!([{"x-mcp-header": "X"}])).is_err());
    // A schema nested far deeper than any stack-recursive walk would survive.
    let mut deep = json!({"type": "string", "x-mcp-header": "Deep"});
    for _ in 0..100_000 {
        // (`json!` would serialize `deep` recursively; move it in instead.)
        let mut outer = json!({"type": "object", "properties": {"p": null}});
        outer["properties"]["p"] = deep;
        deep = outer;
    }
    let th = tool_headers("t", &deep).unwrap();
    assert_eq!(th.params()[0].path().len(), 100_000);
    // Dropping a deeply nested `Value` recurses inside serde_json: take it apart level by level.
    while let Some(inner) = deep.pointer_mut("/properties/p").map(Value::take) {
        deep = inner;
    }
}

/// streamable-http.mdx, "Sending Messages": only requests and notifications get headers.
#[test]
fn a_response_body_is_not_given_request_headers() {
    let body = r#"{"jsonrpc":"2.0","id":1,"result":{}}"#;
    assert_eq!(request_headers(body, None), Err(HeaderBuildError::NoMethod));
}

fn is_valid_header_value(v: &str) -> bool {
    validate_value("Mcp-Param-X", v).is_ok()
        && v.bytes().all(|b| (0x20..=0x7e).contains(&b))
        && !v.starts_with(' ')
        && !v.ends_with(' ')
}

/// Strings likely to hit the interesting cases: sentinel look-alikes, whitespace at the
/// edges, controls, non-ASCII.
fn tricky_string() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[ -~]{0,24}",
        "=\\?base64\\?[A-Za-z0-9+/=? ]{0,12}\\?=",
        "[ \t]{0,2}[a-z\u{e9}\u{4e16}\r\n\0]{0,6}[ \t]{0,2}",
    ]
}

proptest! {
    /// streamable-http.mdx, "Value Encoding": decoding an encoded string gives it back, so the
    /// encoding is unambiguous (a raw sentinel look-alike is always encoded).
    #[test]
    fn encoded_string_decodes_to_itself(s in tricky_string()) {
        let e = encode_str(&s);
        prop_assert_eq!(decode_param_value(&e).unwrap(), s.clone());
        if looks_like_sentinel(&s) {
            prop_assert_ne!(&e, &s);
        }
        if e == s {
            prop_assert!(!looks_like_sentinel(&e));
        }
    }

    /// streamable-http.mdx, "Value Encoding": two different strings never share an encoding.
    #[test]
    fn encoding_is_injective(a in tricky_string(), b in tricky_string()) {
        prop_assume!(a != b);
        prop_assert_ne!(encode_str(&a), encode_str(&b));
    }

    /// streamable-http.mdx, "Value Encoding": an encoded value is always a safe header value:
    /// visible ASCII and inner spaces only, no CR/LF/NUL, no leading or trailing space.
    #[test]
    fn encoded_value_is_always_a_valid_header_value(s in tricky_string()) {
        let e = encode_str(&s);
        prop_assert!(is_valid_header_value(&e), "{:?} -> {:?}", s, e);
        let mut h = Headers::new();
        prop_assert!(h.append("Mcp-Param-X", e).is_ok());
    }

    /// streamable-http.mdx, "Value Encoding": integers within ±(2^53 − 1) are decimal and
    /// round-trip; beyond that they have no header form.
    #[test]
    fn integer_encoding_round_trips(i in any::<i64>()) {
        match encode_param_value(&json!(i)) {
            Some(e) => {
                prop_assert!(i.unsigned_abs() <= MAX_SAFE_INTEGER.unsigned_abs());
                prop_assert_eq!(decode_param_value(&e).unwrap().parse::<i64>().unwrap(), i);
            }
            None => prop_assert!(i.unsigned_abs() > MAX_SAFE_INTEGER.unsigned_abs()),
        }
    }

    /// streamable-http.mdx, "Value Encoding": booleans round-trip as `true` / `false`.
    #[test]
    fn boolean_encoding_round_trips(b in any::<bool>()) {
        let e = encode_param_value(&json!(b)).unwrap();
        prop_assert_eq!(decode_param_value(&e).unwrap().parse::<bool>().unwrap(), b);
    }

    /// streamable-http.mdx, "Server Validation": what a server decodes from `Mcp-Name` and
    /// `Mcp-Param-*` equals the body value, for any tool name and argument.
    #[test]
    fn server_decodes_headers_to_the_body_values(name in tricky_string(), arg in tricky_string()) {
        let schema = json!({"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": "A"}}});
        let th = tool_headers(&name, &schema).unwrap();
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": name, "arguments": {"a": arg}}});
        let h = request_headers(&body.to_string(), Some(&th)).unwrap();
        prop_assert_eq!(decode_param_value(h.get("Mcp-Name").unwrap()).unwrap(), name);
        prop_assert_eq!(decode_param_value(h.get("Mcp-Param-A").unwrap()).unwrap(), arg);
    }

    /// streamable-http.mdx, "Schema Extension": an annotation is accepted exactly when it is a
    /// non-empty RFC 9110 token.
    #[test]
    fn annotation_accepted_iff_token(name in prop_oneof![any::<String>(), "[!-~]{0,8}"]) {
        let schema = json!({"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": name}}});
        let token = !name.is_empty()
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
        prop_assert_eq!(tool_headers("t", &schema).is_ok(), token);
    }
}

//! insta snapshots of the server core's wire output: the HTTP responses (status, headers, body
//! or SSE events) and stdio lines of one request of each kind, in both eras.

mod server_support;

use mcpwire_core::mcp::server::HttpMethod;
use serde_json::{json, Value};
use server_support::*;

/// An exchange as text: status, headers in order, then the body or each SSE event verbatim.
fn wire(a: &Answer) -> Value {
    let headers: Vec<String> = a
        .headers
        .iter()
        .map(|(n, v)| {
            // Session ids are derived from the fixed test seed, but shown as a placeholder so
            // a change of derivation does not hide in the snapshots.
            if n.eq_ignore_ascii_case("Mcp-Session-Id") {
                format!("{n}: <session>")
            } else {
                format!("{n}: {v}")
            }
        })
        .collect();
    let body = if a.streamed {
        Value::Array(
            a.events
                .iter()
                .map(|e| json!(String::from_utf8_lossy(e)))
                .collect(),
        )
    } else {
        json!(String::from_utf8_lossy(&a.body))
    };
    json!({"status": a.status, "headers": headers, "body": body, "ended": a.ended})
}

#[test]
fn modern_http_wire() {
    let mut h = Harness::new();
    let mut snap = serde_json::Map::new();
    snap.insert(
        "discover".into(),
        wire(&h.modern(json!(1), "server/discover", json!({}), &[])),
    );
    snap.insert(
        "tools_call".into(),
        wire(&h.modern(
            json!(2),
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "hi"}}),
            &[],
        )),
    );
    let mut m = meta();
    m["progressToken"] = json!("t");
    snap.insert(
        "progress_sse".into(),
        wire(&h.modern(
            json!(3),
            "tools/call",
            json!({"name": "progress", "arguments": {}, "_meta": m}),
            &[],
        )),
    );
    snap.insert(
        "input_required".into(),
        wire(&h.modern(
            json!(4),
            "tools/call",
            json!({"name": "ask", "arguments": {}, "_meta": meta_with(json!({"elicitation": {}}))}),
            &[],
        )),
    );
    let mut v = meta();
    v["io.modelcontextprotocol/protocolVersion"] = json!("v999");
    snap.insert(
        "unsupported_version".into(),
        wire(&h.modern(json!(5), "server/discover", json!({"_meta": v}), &[])),
    );
    snap.insert(
        "header_mismatch".into(),
        wire(&h.modern(
            json!(6),
            "tools/list",
            json!({}),
            &[("Mcp-Method", "prompts/list")],
        )),
    );
    snap.insert(
        "missing_capability".into(),
        wire(&h.modern(
            json!(7),
            "tools/call",
            json!({"name": "sample", "arguments": {}}),
            &[],
        )),
    );
    snap.insert(
        "method_not_found".into(),
        wire(&h.modern(json!(8), "ping", json!({}), &[])),
    );
    let listen = body(
        json!(9),
        "subscriptions/listen",
        with_meta(
            json!({"notifications": {"toolsListChanged": true, "promptsListChanged": false}}),
        ),
    );
    snap.insert(
        "listen".into(),
        wire(
            &h.http(request(
                HttpMethod::Post,
                modern_headers(&listen),
                listen.to_string().as_bytes(),
            ))
            .1,
        ),
    );
    // A listen asking for resource URIs, one of which the application does not honour.
    h.app.refused_uris = vec!["test://secret".into()];
    let resources = body(
        json!(10),
        "subscriptions/listen",
        with_meta(
            json!({"notifications": {"resourcesListChanged": true, "resourceSubscriptions": ["test://greeting", "test://secret"]}}),
        ),
    );
    snap.insert(
        "listen_resources".into(),
        wire(
            &h.http(request(
                HttpMethod::Post,
                modern_headers(&resources),
                resources.to_string().as_bytes(),
            ))
            .1,
        ),
    );
    let mut evil = base_headers();
    let _ = evil.set("Origin", "http://evil.example.com");
    snap.insert("forbidden_origin".into(), wire(&h.post(&listen, evil)));
    insta::assert_json_snapshot!("server_modern_http", snap);
}

#[test]
fn legacy_http_wire() {
    let mut h = Harness::new();
    let mut snap = serde_json::Map::new();
    let init = h.post(
        &body(
            json!(0),
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}}}),
        ),
        base_headers(),
    );
    snap.insert("initialize".into(), wire(&init));
    let sid = init.header("Mcp-Session-Id").unwrap_or_default().to_owned();
    snap.insert(
        "ask_on_stream".into(),
        wire(&h.legacy(
            &sid,
            body(
                json!(1),
                "tools/call",
                json!({"name": "ask", "arguments": {}}),
            ),
        )),
    );
    snap.insert(
        "no_session".into(),
        wire(&h.post(&body(json!(2), "tools/list", json!({})), base_headers())),
    );
    snap.insert(
        "unknown_session".into(),
        wire(&h.legacy("mcp-gone", body(json!(3), "tools/list", json!({})))),
    );
    let mut g = base_headers();
    let _ = g.append("Mcp-Session-Id", sid.as_str());
    snap.insert(
        "get_stream".into(),
        wire(&h.http(request(HttpMethod::Get, g.clone(), b"")).1),
    );
    snap.insert(
        "delete".into(),
        wire(&h.http(request(HttpMethod::Delete, g, b"")).1),
    );
    insta::assert_json_snapshot!("server_legacy_http", snap);
}

#[test]
fn stdio_wire() {
    let mut h = Harness::new();
    let mut lines = Vec::new();
    let mut feed = |h: &mut Harness, m: Value| {
        for l in h.stdio_json(&m) {
            lines.push(l.to_string());
        }
    };
    feed(
        &mut h,
        body(
            json!(0),
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {}}),
        ),
    );
    feed(&mut h, body(json!(1), "ping", json!({})));
    feed(&mut h, body(json!(2), "tools/list", with_meta(json!({}))));
    feed(
        &mut h,
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call"}),
    );
    for l in h.stdio(b"{broken\n") {
        lines.push(l.to_string());
    }
    insta::assert_json_snapshot!("server_stdio", lines);
}

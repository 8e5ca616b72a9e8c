//! insta snapshots of every request `mcp::Client` emits, per operation: the HTTP method, the
//! headers and the JSON body (`basic/transports/streamable-http.mdx`, "Request Metadata";
//! `basic/index.mdx`, "Per-request protocol fields"; legacy `basic/lifecycle.mdx`). A change to
//! what goes on the wire shows up as a snapshot diff to review.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Instant, SystemTime};

use mcpwire_core::http::{Headers, ResponseHead};
use mcpwire_core::mcp::{
    Client, ClientCapabilities, ClientConfig, ElicitAnswer, Implementation, InputAnswer, ListKind,
    LoggingLevel, OpOptions, Operation, Output, ProtocolChoice, StreamId, SubscriptionFilter,
    Transport,
};
use serde_json::{json, Map, Value};

fn config(transport: Transport) -> ClientConfig {
    let mut c = ClientConfig::new(transport, Implementation::new("mcpwire", "0.1.0"))
        .with_capabilities(ClientCapabilities::none().with_elicitation_form());
    c.protocol = ProtocolChoice::Modern;
    c
}

/// Every wire output of the client so far, as JSON: HTTP requests and stdio lines.
fn wire(c: &mut Client) -> Vec<Value> {
    let mut out = Vec::new();
    while let Some(o) = c.poll_output() {
        match o {
            Output::Http { request, .. } => {
                let (method, headers) = (request.method, request.headers);
                let body = String::from_utf8(request.body).unwrap();
                let hs: Vec<Value> = headers.iter().map(|(k, v)| json!([k, v])).collect();
                out.push(json!({
                    "http": method.as_str(),
                    "headers": hs,
                    "body": if body.is_empty() { Value::Null } else { serde_json::from_str::<Value>(&body).unwrap() },
                }));
            }
            Output::Stdio(line) => {
                out.push(json!({"stdio": serde_json::from_str::<Value>(&line).unwrap()}))
            }
            Output::CloseStream(s) => out.push(json!({"close": s.0})),
            Output::Event(_) => {}
        }
    }
    out
}

fn last_stream(c: &mut Client) -> (StreamId, Value, Vec<Value>) {
    let mut found = None;
    let mut all = Vec::new();
    while let Some(o) = c.poll_output() {
        if let Output::Http { stream, request } = &o {
            let (method, headers) = (&request.method, &request.headers);
            let body = std::str::from_utf8(&request.body).unwrap();
            let hs: Vec<Value> = headers.iter().map(|(k, v)| json!([k, v])).collect();
            let b: Value = serde_json::from_str(body).unwrap_or(Value::Null);
            all.push(json!({"http": method.as_str(), "headers": hs, "body": b.clone()}));
            found = Some((*stream, b));
        }
    }
    let (s, b) = found.unwrap();
    (s, b, all)
}

fn reply(c: &mut Client, now: Instant, stream: StreamId, headers: &[(&str, &str)], body: &Value) {
    let mut h = Headers::new();
    h.append("content-type", "application/json").unwrap();
    for (k, v) in headers {
        h.append(*k, *v).unwrap();
    }
    c.handle_response_head(
        now,
        SystemTime::UNIX_EPOCH,
        stream,
        ResponseHead {
            status: 200,
            headers: h,
        },
    )
    .unwrap();
    c.handle_response_data(now, stream, body.to_string().as_bytes())
        .unwrap();
    c.handle_response_end(now, stream).unwrap();
}

fn obj(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap()
}

#[test]
fn http_requests_per_operation() {
    let now = Instant::now();
    let mut c = Client::new(config(Transport::Http));
    let mut snap = serde_json::Map::new();
    let ops: Vec<(&str, Operation)> = vec![
        ("discover", Operation::Discover),
        (
            "tools_list",
            Operation::List {
                kind: ListKind::Tools,
                cursor: None,
            },
        ),
        (
            "tools_list_page_2",
            Operation::List {
                kind: ListKind::Tools,
                cursor: Some("c2".into()),
            },
        ),
        (
            "prompts_list",
            Operation::List {
                kind: ListKind::Prompts,
                cursor: None,
            },
        ),
        (
            "resources_list",
            Operation::List {
                kind: ListKind::Resources,
                cursor: None,
            },
        ),
        (
            "resources_templates_list",
            Operation::List {
                kind: ListKind::ResourceTemplates,
                cursor: None,
            },
        ),
        (
            "resources_read",
            Operation::ReadResource {
                uri: "file:///tmp/ü.txt".into(),
            },
        ),
        (
            "prompts_get",
            Operation::GetPrompt {
                name: "greet".into(),
                arguments: obj(json!({"who": "ada"})),
            },
        ),
    ];
    for (name, op) in ops {
        c.start(now, op, OpOptions::default());
        snap.insert(name.to_owned(), Value::Array(wire(&mut c)));
    }
    insta::assert_json_snapshot!("http_requests_per_operation", snap);
}

#[test]
fn http_tool_calls_with_headers_progress_trace_and_mrtr_retry() {
    let now = Instant::now();
    let mut c = Client::new(config(Transport::Http));
    c.list(now, ListKind::Tools, None);
    let (s, body, _) = last_stream(&mut c);
    let tools = json!({"jsonrpc": "2.0", "id": body["id"], "result": {"tools": [{"name": "query",
        "inputSchema": {"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "dry": {"type": "boolean", "x-mcp-header": "Dry-Run"},
            "n": {"type": "integer", "x-mcp-header": "Limit"},
            "q": {"type": "string"}}}}]}});
    reply(&mut c, now, s, &[], &tools);
    let _ = wire(&mut c);
    let mut snap = serde_json::Map::new();
    let options = OpOptions {
        progress: true,
        log_level: Some(LoggingLevel::Info),
        trace: Some((
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".into(),
            Some("k=v".into()),
        )),
        ..OpOptions::default()
    };
    c.call_tool(
        now,
        "query",
        obj(json!({"region": " Zürich", "dry": true, "n": 5, "q": "SELECT 1"})),
        options,
    );
    let (s, body, all) = last_stream(&mut c);
    snap.insert("tools_call_with_param_headers".into(), Value::Array(all));
    let ir = json!({"jsonrpc": "2.0", "id": body["id"], "result": {"resultType": "input_required",
        "inputRequests": {"confirm": {"method": "elicitation/create", "params": {"mode": "form", "message": "Go?",
            "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}}}},
        "requestState": "opaque-é-state"}});
    reply(&mut c, now, s, &[], &ir);
    let _ = wire(&mut c);
    c.answer_input(
        now,
        mcpwire_core::mcp::OpId(1),
        "confirm",
        InputAnswer::Elicitation(ElicitAnswer::Accept(obj(json!({"ok": true})))),
    )
    .unwrap();
    snap.insert("tools_call_mrtr_retry".into(), Value::Array(wire(&mut c)));
    let sub = SubscriptionFilter {
        tools_list_changed: true,
        resource_subscriptions: vec!["file:///a".into()],
        ..SubscriptionFilter::default()
    };
    c.subscribe(now, sub).unwrap();
    snap.insert("subscriptions_listen".into(), Value::Array(wire(&mut c)));
    insta::assert_json_snapshot!("http_tool_calls", snap);
}

#[test]
fn legacy_http_handshake_requests_and_session_end() {
    let now = Instant::now();
    let mut cfg = config(Transport::Http);
    cfg.protocol = ProtocolChoice::Legacy;
    let mut c = Client::new(cfg);
    let mut snap = serde_json::Map::new();
    c.list(now, ListKind::Tools, None);
    let (s, body, all) = last_stream(&mut c);
    snap.insert("initialize".into(), Value::Array(all));
    let init = json!({"jsonrpc": "2.0", "id": body["id"], "result": {"protocolVersion": "2025-11-25",
        "capabilities": {"tools": {}}, "serverInfo": {"name": "s", "version": "1"}}});
    reply(&mut c, now, s, &[("mcp-session-id", "sess-1")], &init);
    snap.insert(
        "initialized_and_the_session_get".into(),
        Value::Array(wire(&mut c)),
    );
    // The server answers both (202, then the GET's SSE head): the held request goes out.
    for (stream, status, content_type) in [
        (StreamId(s.0 + 1), 202, "application/json"),
        (StreamId(s.0 + 2), 200, "text/event-stream"),
    ] {
        let mut h = Headers::new();
        h.append("content-type", content_type).unwrap();
        c.handle_response_head(
            now,
            SystemTime::UNIX_EPOCH,
            stream,
            ResponseHead { status, headers: h },
        )
        .unwrap();
    }
    snap.insert(
        "tools_list_once_the_session_is_open".into(),
        Value::Array(wire(&mut c)),
    );
    c.shutdown(now);
    snap.insert("shutdown".into(), Value::Array(wire(&mut c)));
    insta::assert_json_snapshot!("legacy_http", snap);
}

#[test]
fn stdio_lines_probe_and_cancel() {
    let now = Instant::now();
    let mut cfg = config(Transport::Stdio);
    cfg.protocol = ProtocolChoice::Auto;
    let mut c = Client::new(cfg);
    let mut snap = serde_json::Map::new();
    let op = c.call_tool(
        now,
        "echo",
        obj(json!({"text": "hi"})),
        OpOptions::default(),
    );
    snap.insert("probe".into(), Value::Array(wire(&mut c)));
    c.handle_stdio_line(now, r#"{"jsonrpc":"2.0","id":1,"result":{"supportedVersions":["2026-07-28"],"capabilities":{}}}"#)
        .unwrap();
    snap.insert("call_after_probe".into(), Value::Array(wire(&mut c)));
    c.cancel(now, op).unwrap();
    snap.insert("cancel".into(), Value::Array(wire(&mut c)));
    insta::assert_json_snapshot!("stdio", snap);
}

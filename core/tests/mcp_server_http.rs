//! The server core over Streamable HTTP in the `2026-07-28` era: `_meta`, the `Mcp-*` header
//! checks, `server/discover`, errors and their statuses, MRTR with a sealed `requestState`,
//! SSE answers, `subscriptions/listen`, pagination, DNS-rebinding checks and bounds. Each test
//! drives the engine with synthetic requests and reads the wire output.

mod server_support;

use mcpwire_core::jsonrpc::ErrorObject;
use mcpwire_core::mcp::server::{
    Call, CancelReason, Eras, ExchangeId, HttpMethod, InputRequest, Reply, ServerEvent, UsageError,
};
use mcpwire_core::mcp::{ListKind, LoggingLevel};
use mcpwire_core::time::Duration;
use serde_json::{json, Value};
use server_support::*;

#[test]
fn discover_lists_versions_capabilities_cache_hints_and_server_info() {
    let mut h = Harness::new();
    let a = h.modern(json!(1), "server/discover", json!({}), &[]);
    assert_eq!(a.status, Some(200));
    assert_eq!(a.header("Content-Type"), Some("application/json"));
    let r = &a.json()["result"];
    assert_eq!(r["supportedVersions"][0], "2026-07-28");
    assert!(r["supportedVersions"]
        .as_array()
        .is_some_and(|v| v.contains(&json!("2025-11-25"))));
    assert_eq!(r["capabilities"]["tools"]["listChanged"], true);
    assert_eq!(r["capabilities"]["prompts"]["listChanged"], true);
    assert_eq!(r["capabilities"]["resources"]["subscribe"], true);
    assert_eq!(r["ttlMs"], 0);
    assert_eq!(r["cacheScope"], "public");
    assert_eq!(r["resultType"], "complete");
    assert_eq!(
        r["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "fixture"
    );
    assert_eq!(a.json()["id"], 1);
}

#[test]
fn meta_must_carry_version_and_capabilities_with_400_and_the_request_id() {
    let mut h = Harness::new();
    let cases = [
        (101, json!({})),
        (
            102,
            json!({"_meta": {"io.modelcontextprotocol/clientCapabilities": {}}}),
        ),
        (
            104,
            json!({"_meta": {"io.modelcontextprotocol/protocolVersion": MODERN}}),
        ),
        (
            106,
            json!({"_meta": {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": []}}),
        ),
        (107, json!({"_meta": "x"})),
    ];
    for (id, params) in cases {
        let message = body(json!(id), "server/discover", params);
        let mut headers = modern_headers(&message);
        let _ = headers.set("MCP-Protocol-Version", MODERN);
        let a = h.post(&message, headers);
        assert_eq!(a.status, Some(400), "case {id}");
        assert_eq!(code(&a.json()), -32602, "case {id}: {}", a.json());
        assert_eq!(a.json()["id"], id, "errors carry the request id");
    }
    // The same for a method both eras have: the header names this era, so a body without
    // `_meta` is a malformed modern request (-32602), not a legacy one lacking a session.
    for (id, params) in [(109, json!({})), (110, json!({"cursor": "x"}))] {
        let message = body(json!(id), "tools/list", params);
        let mut headers = modern_headers(&message);
        let _ = headers.set("MCP-Protocol-Version", MODERN);
        let a = h.post(&message, headers);
        assert_eq!(
            (a.status, code(&a.json())),
            (Some(400), -32602),
            "case {id}: {}",
            a.json()
        );
    }
    // clientInfo is a SHOULD: without it the request is served.
    let params = json!({"_meta": {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}});
    let a = h.modern(json!(105), "server/discover", params, &[]);
    assert_eq!(a.status, Some(200), "{}", a.json());
    // A logLevel that is not a level is refused.
    let mut m = meta();
    m["io.modelcontextprotocol/logLevel"] = json!("loud");
    let a = h.modern(json!(108), "tools/list", json!({"_meta": m}), &[]);
    assert_eq!((a.status, code(&a.json())), (Some(400), -32602));
}

#[test]
fn protocol_version_header_mismatch_is_32020_and_an_unknown_version_32022() {
    let mut h = Harness::new();
    let a = h.modern(
        json!(1),
        "tools/list",
        json!({}),
        &[("MCP-Protocol-Version", "2025-11-25")],
    );
    assert_eq!((a.status, code(&a.json())), (Some(400), -32020));
    // Header absent.
    let message = body(json!(2), "tools/list", with_meta(json!({})));
    let mut headers = modern_headers(&message);
    headers.remove("MCP-Protocol-Version");
    let a = h.post(&message, headers);
    assert_eq!((a.status, code(&a.json())), (Some(400), -32020));
    // Both say v999: unsupported, with the supported list and the requested echo.
    let mut m = meta();
    m["io.modelcontextprotocol/protocolVersion"] = json!("v999.0.0");
    let a = h.modern(
        json!(301),
        "server/discover",
        json!({"_meta": m.clone()}),
        &[],
    );
    assert_eq!((a.status, code(&a.json())), (Some(400), -32022));
    let data = &a.json()["error"]["data"];
    assert_eq!(data["requested"], "v999.0.0");
    assert!(data["supported"]
        .as_array()
        .is_some_and(|s| s.contains(&json!(MODERN))));
    // Body v999 but header 2026-07-28: the mismatch is found first.
    let a = h.modern(
        json!(302),
        "server/discover",
        json!({"_meta": m}),
        &[("MCP-Protocol-Version", MODERN)],
    );
    assert_eq!((a.status, code(&a.json())), (Some(400), -32020));
}

#[test]
fn mcp_method_and_mcp_name_headers_must_match_the_body() {
    let mut h = Harness::new();
    let reject = [
        (
            "tools/list",
            json!({}),
            vec![("Mcp-Method", "prompts/list")],
        ),
        ("tools/list", json!({}), vec![("Mcp-Method", "TOOLS/LIST")]),
        (
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "x"}}),
            vec![("Mcp-Name", "wrong_tool_name")],
        ),
    ];
    for (method, params, extra) in reject {
        let a = h.modern(json!(9), method, params, &extra);
        assert_eq!(
            (a.status, code(&a.json())),
            (Some(400), -32020),
            "{method} {extra:?}"
        );
    }
    for missing in ["Mcp-Method", "Mcp-Name"] {
        let message = body(
            json!(3),
            "tools/call",
            with_meta(json!({"name": "echo", "arguments": {"text": "x"}})),
        );
        let mut headers = modern_headers(&message);
        headers.remove(missing);
        let a = h.post(&message, headers);
        assert_eq!(
            (a.status, code(&a.json())),
            (Some(400), -32020),
            "without {missing}"
        );
    }
    // Header names are case-insensitive; optional whitespace around a value is not part of it.
    let message = body(json!(4), "tools/list", with_meta(json!({})));
    let mut headers = modern_headers(&message);
    headers.remove("Mcp-Method");
    let _ = headers.append("mcp-method", "tools/list");
    assert_eq!(h.post(&message, headers).status, Some(200));
    let a = h.modern(
        json!(5),
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "x"}}),
        &[("Mcp-Name", "  echo  ")],
    );
    assert_eq!(a.status, Some(200), "{}", a.json());
}

#[test]
fn mcp_param_headers_are_checked_against_x_mcp_header_arguments() {
    let mut h = Harness::new();
    let call = |h: &mut Harness, region: &str, header: Option<&str>| {
        let message = body(
            json!(7),
            "tools/call",
            with_meta(json!({"name": "tenant", "arguments": {"region": region}})),
        );
        let mut headers = modern_headers(&message);
        if let Some(v) = header {
            let _ = headers.set("Mcp-Param-Region", v);
        }
        h.post(&message, headers)
    };
    let ok =
        |a: &Answer| a.status == Some(200) && a.json()["result"]["content"][0]["text"].is_string();
    assert!(ok(&call(&mut h, "eu", Some("eu"))));
    assert!(
        ok(&call(&mut h, "Hello", Some("=?base64?SGVsbG8=?="))),
        "valid Base64 decodes"
    );
    assert!(
        ok(&call(&mut h, "SGVsbG8=", Some("SGVsbG8="))),
        "no prefix: a literal"
    );
    assert!(
        ok(&call(
            &mut h,
            "=?base64?SGVsbG8=",
            Some("=?base64?SGVsbG8=")
        )),
        "no suffix: a literal"
    );
    for bad in ["us", "=?base64?SGVsbG8?=", "=?base64?SGVs!!!bG8=?="] {
        let a = call(&mut h, "Hello", Some(bad));
        assert_eq!((a.status, code(&a.json())), (Some(400), -32020), "{bad}");
    }
    let a = call(&mut h, "eu", None);
    assert_eq!(
        (a.status, code(&a.json())),
        (Some(400), -32020),
        "value in the body, no header"
    );
    assert!(
        h.app
            .calls
            .iter()
            .all(|(_, args, _, _)| args.get("region") != Some(&json!("us"))),
        "a refused call never reaches the application"
    );
}

#[test]
fn removed_and_unknown_methods_are_404_method_not_found() {
    let mut h = Harness::new();
    for method in [
        "initialize",
        "ping",
        "logging/setLevel",
        "resources/subscribe",
        "resources/unsubscribe",
        "unknown/method",
    ] {
        let a = h.modern(json!(500), method, json!({}), &[]);
        assert_eq!((a.status, code(&a.json())), (Some(404), -32601), "{method}");
        assert_eq!(a.json()["id"], 500);
    }
    // A capability the server does not advertise has no methods.
    let mut c = config();
    c.prompts = false;
    let mut h = Harness::with(c);
    let a = h.modern(json!(1), "prompts/list", json!({}), &[]);
    assert_eq!((a.status, code(&a.json())), (Some(404), -32601));
    let d = h.modern(json!(2), "server/discover", json!({}), &[]);
    assert!(d.json()["result"]["capabilities"].get("prompts").is_none());
}

#[test]
fn an_input_needing_an_undeclared_capability_is_32021_naming_it() {
    let mut h = Harness::new();
    let a = h.modern(
        json!(401),
        "tools/call",
        json!({"name": "sample", "arguments": {}}),
        &[],
    );
    assert_eq!(
        (a.status, code(&a.json())),
        (Some(400), -32021),
        "{}",
        a.json()
    );
    assert_eq!(
        a.json()["error"]["data"]["requiredCapabilities"],
        json!({"sampling": {}})
    );
    // Declared: the input is asked.
    let a = h.modern(
        json!(402),
        "tools/call",
        json!({"name": "sample", "arguments": {}, "_meta": meta_with(json!({"sampling": {}}))}),
        &[],
    );
    assert_eq!(a.json()["result"]["resultType"], "input_required");
    // `elicitation: {}` declares form mode.
    let a = h.modern(
        json!(403),
        "tools/call",
        json!({"name": "ask", "arguments": {}, "_meta": meta_with(json!({"elicitation": {}}))}),
        &[],
    );
    assert_eq!(
        a.json()["result"]["resultType"],
        "input_required",
        "{}",
        a.json()
    );
    let a = h.modern(json!(404), "tools/call", json!({"name": "ask", "arguments": {}, "_meta": meta_with(json!({"elicitation": {"url": {}}}))}), &[]);
    assert_eq!(
        code(&a.json()),
        -32021,
        "url mode only does not cover a form"
    );
}

fn ask(h: &mut Harness, extra: Value) -> Value {
    let mut params = json!({"name": "ask", "arguments": {"lang": "en"}, "_meta": meta_with(json!({"elicitation": {}}))});
    if let (Some(p), Some(e)) = (params.as_object_mut(), extra.as_object()) {
        p.extend(e.clone());
    }
    h.modern(json!(11), "tools/call", params, &[]).json()
}

#[test]
fn mrtr_round_trips_a_sealed_request_state() {
    let mut h = Harness::new();
    let first = ask(&mut h, json!({}));
    let r = &first["result"];
    assert_eq!(r["resultType"], "input_required");
    assert_eq!(
        r["inputRequests"]["user_name"]["method"],
        "elicitation/create"
    );
    assert_eq!(r["inputRequests"]["user_name"]["params"]["mode"], "form");
    let state = r["requestState"].as_str().unwrap_or_default().to_owned();
    assert!(
        state.starts_with("v1.") && !state.contains("round-1"),
        "sealed, not the application's text"
    );
    let answer = json!({"user_name": {"action": "accept", "content": {"name": "Alice"}}, "extra_key": {"x": 1}});
    let second = ask(
        &mut h,
        json!({"inputResponses": answer, "requestState": state}),
    );
    assert_eq!(second["result"]["resultType"], "complete", "{second}");
    assert_eq!(
        second["result"]["content"][0]["text"],
        "hello Alice state=round-1"
    );
    // Tampered, foreign-argument and expired states are refused.
    let tampered = ask(
        &mut h,
        json!({"inputResponses": answer, "requestState": format!("{state}-TAMPERED")}),
    );
    assert_eq!(code(&tampered), -32602, "{tampered}");
    let mut other = json!({"name": "ask", "arguments": {"lang": "fr"}, "inputResponses": answer, "requestState": state, "_meta": meta_with(json!({"elicitation": {}}))});
    let a = h.modern(json!(12), "tools/call", other.take(), &[]);
    assert_eq!(
        code(&a.json()),
        -32602,
        "a state sealed for other arguments"
    );
    h.now += Duration::from_secs(601);
    let expired = ask(
        &mut h,
        json!({"inputResponses": answer, "requestState": state}),
    );
    assert_eq!(code(&expired), -32602, "{expired}");
    assert!(expired["error"]["message"]
        .as_str()
        .is_some_and(|m| m.contains("expired")));
}

#[test]
fn mrtr_retry_members_are_validated_and_ephemeral_answers_accepted() {
    let mut h = Harness::new();
    for bad in [json!({"user_name": 12345}), Value::Null, json!([1])] {
        let a = ask(&mut h, json!({"inputResponses": bad}));
        assert_eq!(code(&a), -32602, "{a}");
    }
    let a = ask(&mut h, json!({"requestState": 7}));
    assert_eq!(code(&a), -32602);
    // Without requestState (the ephemeral flow) the responses reach the application.
    let a = ask(
        &mut h,
        json!({"inputResponses": {"user_name": {"action": "accept", "content": {"name": "Bo"}}}}),
    );
    assert_eq!(a["result"]["content"][0]["text"], "hello Bo state=-");
    // Wrong keys: the application asks again.
    let a = ask(
        &mut h,
        json!({"inputResponses": {"wrong_key": {"action": "accept"}}}),
    );
    assert_eq!(a["result"]["resultType"], "input_required");
}

#[test]
fn input_required_is_refused_on_methods_that_cannot_ask() {
    let mut h = Harness::new();
    let message = body(json!(1), "tools/list", with_meta(json!({})));
    let x = h.server.handle_http_request(
        h.now,
        request(
            HttpMethod::Post,
            modern_headers(&message),
            message.to_string().as_bytes(),
        ),
    );
    let Some(ServerEvent::Request(incoming)) = h.server.poll_event() else {
        panic!("no request")
    };
    let err = h.server.respond(
        h.now,
        incoming.id(),
        Reply::InputRequired {
            inputs: vec![("k".into(), mcpwire_core::mcp::server::InputRequest::roots())],
            state: None,
        },
    );
    assert!(
        matches!(err, Err(UsageError::InputNotAllowed { .. })),
        "{err:?}"
    );
    let (out, _) = drain(&mut h.server);
    let a = &out
        .iter()
        .find(|(k, _)| *k == x)
        .map(|(_, a)| a.clone())
        .unwrap_or_default();
    assert_eq!(code(&a.json()), -32603);
    assert_ne!(a.json()["result"]["resultType"], "input_required");
}

#[test]
fn progress_streams_as_sse_and_a_plain_answer_is_json() {
    let mut h = Harness::new();
    let mut m = meta();
    m["progressToken"] = json!("p1");
    let a = h.modern(
        json!(3),
        "tools/call",
        json!({"name": "progress", "arguments": {}, "_meta": m}),
        &[],
    );
    assert!(a.streamed && a.ended);
    assert_eq!(a.header("Content-Type"), Some("text/event-stream"));
    assert_eq!(a.header("X-Accel-Buffering"), Some("no"));
    let msgs = a.messages();
    assert_eq!(msgs.len(), 4, "{msgs:?}");
    for (i, n) in msgs[..3].iter().enumerate() {
        assert_eq!(n["method"], "notifications/progress");
        assert_eq!(n["params"]["progressToken"], "p1");
        assert_eq!(n["params"]["progress"], json!(i + 1));
    }
    assert_eq!(msgs[3]["id"], 3);
    assert!(
        a.event_ids().is_empty(),
        "modern streams are not resumable: no event ids"
    );
    // No token: the progress is not sent, and the answer is JSON.
    let a = h.modern(
        json!(4),
        "tools/call",
        json!({"name": "progress", "arguments": {}}),
        &[],
    );
    assert!(!a.streamed);
    assert_eq!(a.json()["result"]["content"][0]["text"], "done");
    // A client that takes no SSE gets JSON even with progress.
    let mut m = meta();
    m["progressToken"] = json!(9);
    let a = h.modern(
        json!(5),
        "tools/call",
        json!({"name": "progress", "arguments": {}, "_meta": m}),
        &[("Accept", "application/json")],
    );
    assert!(!a.streamed);
    assert_eq!(a.json()["id"], 5);
}

#[test]
fn log_messages_follow_the_request_log_level_only() {
    let mut h = Harness::new();
    let a = h.modern(
        json!(1),
        "tools/call",
        json!({"name": "log", "arguments": {}}),
        &[],
    );
    assert!(
        a.messages()
            .iter()
            .all(|m| m["method"] != "notifications/message"),
        "no logLevel, no logs"
    );
    let mut m = meta();
    m["io.modelcontextprotocol/logLevel"] = json!("info");
    let a = h.modern(
        json!(2),
        "tools/call",
        json!({"name": "log", "arguments": {}, "_meta": m}),
        &[],
    );
    let logs: Vec<Value> = a
        .messages()
        .into_iter()
        .filter(|m| m["method"] == "notifications/message")
        .collect();
    assert_eq!(logs.len(), 2, "info and error, not debug: {logs:?}");
    assert_eq!(logs[0]["params"]["level"], "info");
    assert_eq!(logs[1]["params"]["logger"], "fixture");
}

#[test]
fn notifications_get_202_and_client_responses_400() {
    let mut h = Harness::new();
    let n =
        json!({"jsonrpc": "2.0", "method": "notifications/whatever", "params": {"_meta": meta()}});
    assert_eq!(h.post(&n, base_headers()).status, Some(202));
    let r = json!({"jsonrpc": "2.0", "id": 1, "result": {}});
    let a = h.post(&r, base_headers());
    assert_eq!((a.status, code(&a.json())), (Some(400), -32600));
}

#[test]
fn malformed_bodies_get_the_json_rpc_errors_with_400() {
    let mut h = Harness::new();
    for (bytes, want) in [
        (&b"{not json"[..], -32700),
        (
            &b"[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]"[..],
            -32600,
        ),
        (
            &b"{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"x\"}"[..],
            -32600,
        ),
        (
            &b"{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"x\"}"[..],
            -32600,
        ),
        (&b"\xff\xfe"[..], -32700),
    ] {
        let a = h.http(request(HttpMethod::Post, base_headers(), bytes)).1;
        assert_eq!(
            (a.status, code(&a.json())),
            (Some(400), want),
            "{:?}",
            String::from_utf8_lossy(bytes)
        );
    }
    let m = json!({"jsonrpc": "2.0", "id": 8, "method": "tools/list", "params": [1]});
    let a = h.post(&m, base_headers());
    assert_eq!(
        (a.status, code(&a.json()), a.json()["id"].clone()),
        (Some(400), -32602, json!(8))
    );
}

#[test]
fn host_origin_path_method_size_and_media_type_are_checked() {
    let mut h = Harness::new();
    let message = body(json!(1), "server/discover", with_meta(json!({})));
    let send = |h: &mut Harness, edit: &dyn Fn(&mut mcpwire_core::http::Headers)| {
        let mut headers = modern_headers(&message);
        edit(&mut headers);
        h.post(&message, headers).status
    };
    assert_eq!(send(&mut h, &|_| {}), Some(200));
    assert_eq!(
        send(&mut h, &|hd| {
            let _ = hd.set("Host", "evil.example.com");
            let _ = hd.set("Origin", "http://evil.example.com");
        }),
        Some(403)
    );
    assert_eq!(
        send(&mut h, &|hd| {
            let _ = hd.set("Origin", "http://evil.example.com");
        }),
        Some(403)
    );
    assert_eq!(
        send(&mut h, &|hd| {
            let _ = hd.set("Host", "evil.example.com");
        }),
        Some(403)
    );
    assert_eq!(
        send(&mut h, &|hd| {
            let _ = hd.set("Origin", "http://localhost:5173");
        }),
        Some(200)
    );
    assert_eq!(
        send(&mut h, &|hd| {
            let _ = hd.set("Host", "[::1]:3000");
        }),
        Some(200)
    );
    assert_eq!(
        send(&mut h, &|hd| {
            let _ = hd.set("Content-Type", "text/plain");
        }),
        Some(415)
    );
    assert_eq!(
        send(&mut h, &|hd| {
            let _ = hd.set("Accept", "text/html");
        }),
        Some(406)
    );
    let mut other = request(
        HttpMethod::Post,
        modern_headers(&message),
        message.to_string().as_bytes(),
    );
    other.path = "/elsewhere".into();
    assert_eq!(h.http(other).1.status, Some(404));
    let put = request(HttpMethod::Other("PUT".into()), base_headers(), b"");
    let a = h.http(put).1;
    assert_eq!(a.status, Some(405));
    assert!(a.header("Allow").is_some());
    let big = vec![b' '; h.server.limits().max_body_bytes + 1];
    assert_eq!(
        h.http(request(HttpMethod::Post, base_headers(), &big))
            .1
            .status,
        Some(413)
    );
    // GET and DELETE: 405 in a modern-only server, GET without a session in a dual one.
    let mut c = config();
    c.eras = Eras::MODERN;
    let mut m = Harness::with(c);
    assert_eq!(
        m.http(request(HttpMethod::Get, base_headers(), b""))
            .1
            .status,
        Some(405)
    );
    assert_eq!(
        m.http(request(HttpMethod::Delete, base_headers(), b""))
            .1
            .status,
        Some(405)
    );
    assert_eq!(
        h.http(request(HttpMethod::Get, base_headers(), b""))
            .1
            .status,
        Some(405)
    );
}

#[test]
fn listen_acknowledges_first_tags_every_notification_and_honours_the_filter() {
    let mut h = Harness::new();
    let tools = json!({"notifications": {"toolsListChanged": true, "resourceSubscriptions": ["test://greeting"]}});
    let message = body(json!("sub-1"), "subscriptions/listen", with_meta(tools));
    let (x1, a, _) = h.http(request(
        HttpMethod::Post,
        modern_headers(&message),
        message.to_string().as_bytes(),
    ));
    assert!(a.streamed && !a.ended, "the listen stream stays open");
    let ack = a.json();
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "sub-1"
    );
    assert_eq!(ack["params"]["notifications"]["toolsListChanged"], true);
    let prompts = body(
        json!(2),
        "subscriptions/listen",
        with_meta(json!({"notifications": {"promptsListChanged": true}})),
    );
    let (x2, _, _) = h.http(request(
        HttpMethod::Post,
        modern_headers(&prompts),
        prompts.to_string().as_bytes(),
    ));
    h.server.list_changed(h.now, ListKind::Tools);
    h.server.resource_updated(h.now, "test://greeting");
    h.server.resource_updated(h.now, "test://other");
    let (out, _) = drain(&mut h.server);
    let on = |x| {
        out.iter()
            .find(|(k, _)| *k == x)
            .map(|(_, a)| a.clone())
            .unwrap_or_default()
    };
    let got: Vec<Value> = Answer {
        streamed: true,
        ..on(x1)
    }
    .messages();
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(got[0]["method"], "notifications/tools/list_changed");
    assert_eq!(got[1]["method"], "notifications/resources/updated");
    assert_eq!(got[1]["params"]["uri"], "test://greeting");
    assert!(got
        .iter()
        .all(|g| g["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "sub-1"));
    assert!(
        on(x2).events.is_empty(),
        "a prompts-only stream gets no tools notification"
    );
    // The client closes: nothing more goes there; shutdown ends the other with a result.
    assert_eq!(h.server.handle_exchange_closed(h.now, x1), Ok(()));
    h.server.list_changed(h.now, ListKind::Prompts);
    h.server.shutdown(h.now);
    let (out, _) = drain(&mut h.server);
    assert!(out.iter().all(|(k, _)| *k != x1));
    let end = out
        .iter()
        .find(|(k, _)| *k == x2)
        .map(|(_, a)| Answer {
            streamed: true,
            ..a.clone()
        })
        .unwrap_or_default();
    let msgs = end.messages();
    assert_eq!(msgs[0]["method"], "notifications/prompts/list_changed");
    assert_eq!(
        msgs[1]["method"], "notifications/cancelled",
        "the teardown is announced"
    );
    assert_eq!(msgs[1]["params"]["requestId"], 2);
    assert_eq!(
        msgs[2]["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        2
    );
    assert!(end.ended);
}

#[test]
fn lists_are_paginated_with_opaque_cursors_and_carry_cache_hints() {
    let mut h = Harness::new();
    h.app.extra_tools = 241;
    let mut names = Vec::new();
    let mut cursor: Option<Value> = None;
    for _ in 0..10 {
        let params = match &cursor {
            Some(c) => json!({"cursor": c}),
            None => json!({}),
        };
        let r = h.modern(json!(1), "tools/list", params, &[]).json()["result"].clone();
        assert_eq!(r["ttlMs"], 0);
        assert_eq!(r["cacheScope"], "public");
        let page = r["tools"].as_array().cloned().unwrap_or_default();
        assert!(page.len() <= 100);
        names.extend(
            page.iter()
                .map(|t| t["name"].as_str().unwrap_or("").to_owned()),
        );
        cursor = r.get("nextCursor").cloned();
        if cursor.is_none() {
            break;
        }
    }
    assert_eq!(names.len(), 250);
    let a = h.modern(json!(2), "tools/list", json!({"cursor": "bogus"}), &[]);
    assert_eq!(code(&a.json()), -32602);
    for method in ["prompts/list", "resources/list", "resources/templates/list"] {
        let r = h.modern(json!(3), method, json!({}), &[]).json();
        assert!(
            r["result"]["ttlMs"].is_u64() && r["result"]["cacheScope"].is_string(),
            "{method}: {r}"
        );
    }
    let r = h
        .modern(
            json!(4),
            "resources/read",
            json!({"uri": "test://greeting"}),
            &[],
        )
        .json();
    assert_eq!(r["result"]["contents"][0]["text"], "hello");
    assert!(r["result"]["ttlMs"].is_u64());
    let r = h
        .modern(
            json!(5),
            "resources/read",
            json!({"uri": "test://missing"}),
            &[],
        )
        .json();
    assert_eq!(code(&r), -32602, "SEP-2164");
}

#[test]
fn a_client_going_away_cancels_its_request_and_a_late_answer_is_dropped() {
    let mut h = Harness::new();
    let message = body(
        json!(1),
        "tools/call",
        with_meta(json!({"name": "slow", "arguments": {}})),
    );
    let (x, a, _) = h.http(request(
        HttpMethod::Post,
        modern_headers(&message),
        message.to_string().as_bytes(),
    ));
    assert!(a.status.is_none(), "nothing yet");
    assert_eq!(h.server.in_flight(), 1);
    assert_eq!(h.server.handle_exchange_closed(h.now, x), Ok(()));
    assert_eq!(h.server.in_flight(), 0);
    let rid = match h.server.poll_event() {
        Some(ServerEvent::Cancelled {
            request,
            reason: CancelReason::ExchangeClosed,
        }) => request,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        h.server.respond(h.now, rid, Reply::tool_text("late")),
        Ok(())
    );
    assert!(h.server.poll_output().is_none());
    assert_eq!(
        h.server.handle_exchange_closed(h.now, x),
        Ok(()),
        "closing twice is harmless"
    );
}

#[test]
fn handles_never_issued_are_usage_errors() {
    let mut h = Harness::new();
    let message = body(
        json!(1),
        "tools/call",
        with_meta(json!({"name": "slow", "arguments": {}})),
    );
    let (x, _, _) = h.http(request(
        HttpMethod::Post,
        modern_headers(&message),
        message.to_string().as_bytes(),
    ));
    let rid = h.app.calls.len();
    assert_eq!(rid, 1);
    let bogus_x = mcpwire_core::mcp::server::ExchangeId::from_raw(x.raw() + 10);
    assert!(matches!(
        h.server.handle_exchange_closed(h.now, bogus_x),
        Err(UsageError::UnknownExchange(_))
    ));
    let bogus = mcpwire_core::mcp::server::RequestId::from_raw(99);
    assert!(matches!(
        h.server.respond(h.now, bogus, Reply::tool_text("x")),
        Err(UsageError::UnknownRequest(_))
    ));
    assert!(matches!(
        h.server.progress(h.now, bogus, 1.0, None, None),
        Err(UsageError::UnknownRequest(_))
    ));
}

#[test]
fn pending_answers_come_later_and_in_any_order() {
    let mut h = Harness::new();
    let mut xs = Vec::new();
    for id in [1, 2] {
        let message = body(
            json!(id),
            "tools/call",
            with_meta(json!({"name": "slow", "arguments": {}})),
        );
        xs.push(
            h.http(request(
                HttpMethod::Post,
                modern_headers(&message),
                message.to_string().as_bytes(),
            ))
            .0,
        );
    }
    let rids: Vec<_> = (0..2)
        .map(mcpwire_core::mcp::server::RequestId::from_raw)
        .collect();
    assert_eq!(
        h.server.respond(h.now, rids[1], Reply::tool_text("second")),
        Ok(())
    );
    assert_eq!(
        h.server.respond(h.now, rids[0], Reply::tool_text("first")),
        Ok(())
    );
    let (out, _) = drain(&mut h.server);
    assert_eq!(out[0].0, xs[1]);
    assert_eq!(out[0].1.json()["result"]["content"][0]["text"], "second");
    assert_eq!(out[1].1.json()["id"], 1);
}

#[test]
fn completion_prompts_and_resources_reach_the_application() {
    let mut h = Harness::new();
    let r = h.modern(json!(1), "completion/complete", json!({"ref": {"type": "ref/prompt", "name": "greeting"}, "argument": {"name": "name", "value": "al"}}), &[]).json();
    assert_eq!(
        r["result"]["completion"]["values"],
        json!(["alpha", "alps"])
    );
    let r = h
        .modern(
            json!(2),
            "completion/complete",
            json!({"ref": {"type": "ref/x"}, "argument": {"name": "n", "value": ""}}),
            &[],
        )
        .json();
    assert_eq!(code(&r), -32602);
    let r = h
        .modern(
            json!(3),
            "prompts/get",
            json!({"name": "greeting", "arguments": {"name": "Ann"}}),
            &[],
        )
        .json();
    assert_eq!(r["result"]["messages"][0]["content"]["text"], "Hello Ann");
    let message = body(json!(4), "tools/call", with_meta(json!({"arguments": {}})));
    let mut headers = base_headers();
    let _ = headers.append("MCP-Protocol-Version", MODERN);
    let _ = headers.append("Mcp-Method", "tools/call");
    let r = h.post(&message, headers).json();
    assert_eq!(code(&r), -32602, "tools/call without a name");
}

#[test]
fn a_request_state_is_bound_to_the_credentials_it_was_issued_under() {
    let mut h = Harness::new();
    let params =
        json!({"name": "ask", "arguments": {}, "_meta": meta_with(json!({"elicitation": {}}))});
    let first = h
        .modern(
            json!(1),
            "tools/call",
            params.clone(),
            &[("Authorization", "Bearer alice")],
        )
        .json();
    let state = first["result"]["requestState"].clone();
    let mut retry = params;
    retry["inputResponses"] = json!({"user_name": {"action": "accept", "content": {"name": "A"}}});
    retry["requestState"] = state;
    let bob = h
        .modern(
            json!(2),
            "tools/call",
            retry.clone(),
            &[("Authorization", "Bearer bob")],
        )
        .json();
    assert_eq!(code(&bob), -32602, "another principal: {bob}");
    let alice = h
        .modern(
            json!(3),
            "tools/call",
            retry,
            &[("Authorization", "Bearer alice")],
        )
        .json();
    assert_eq!(
        alice["result"]["content"][0]["text"],
        "hello A state=round-1"
    );
}

#[test]
fn progress_from_the_event_api_starts_the_stream_then_the_answer_ends_it() {
    let mut h = Harness::new();
    let mut m = meta();
    m["progressToken"] = json!(5);
    let message = body(
        json!(1),
        "tools/call",
        json!({"name": "slow", "arguments": {}, "_meta": m}),
    );
    let (x, a, _) = h.http(request(
        HttpMethod::Post,
        modern_headers(&message),
        message.to_string().as_bytes(),
    ));
    assert!(a.status.is_none());
    let rid = mcpwire_core::mcp::server::RequestId::from_raw(0);
    assert_eq!(
        h.server.progress(h.now, rid, 0.5, None, Some("half")),
        Ok(())
    );
    assert_eq!(
        h.server.log(
            h.now,
            Some(rid),
            mcpwire_core::mcp::LoggingLevel::Error,
            None,
            json!("e")
        ),
        Ok(()),
        "no logLevel: dropped, not an error"
    );
    let (out, _) = drain(&mut h.server);
    assert_eq!(out.len(), 1);
    let started = &out[0].1;
    assert!(started.streamed && !started.ended);
    assert_eq!(started.messages()[0]["params"]["message"], "half");
    assert_eq!(
        h.server.respond(h.now, rid, Reply::Result(json!(7))),
        Err(UsageError::BadResult { request: rid })
    );
    let (out, _) = drain(&mut h.server);
    let end = Answer {
        streamed: true,
        ..out[0].1.clone()
    };
    assert_eq!((out[0].0, code(&end.json()), end.ended), (x, -32603, true));
    // A request without a token: progress is refused, nothing is sent.
    let message = body(
        json!(2),
        "tools/call",
        with_meta(json!({"name": "slow", "arguments": {}})),
    );
    let _ = h.http(request(
        HttpMethod::Post,
        modern_headers(&message),
        message.to_string().as_bytes(),
    ));
    let rid = mcpwire_core::mcp::server::RequestId::from_raw(1);
    assert_eq!(
        h.server.progress(h.now, rid, 1.0, None, None),
        Err(UsageError::NoProgressToken(rid))
    );
    assert!(h.server.poll_output().is_none());
}

#[test]
fn in_flight_bounds_answer_429_and_503_never_lose_a_reply() {
    let mut c = config();
    c.limits.max_in_flight = 2;
    let mut h = Harness::with(c);
    let slow = |h: &mut Harness, id: i64| {
        h.modern(
            json!(id),
            "tools/call",
            json!({"name": "slow", "arguments": {}}),
            &[],
        )
    };
    assert!(slow(&mut h, 1).status.is_none());
    assert!(slow(&mut h, 2).status.is_none());
    let a = slow(&mut h, 3);
    assert_eq!(
        (a.status, code(&a.json()), a.json()["id"].clone()),
        (Some(503), -32000, json!(3))
    );
    let mut c = config();
    c.limits.max_in_flight_per_connection = 1;
    c.limits.max_sessions = 1;
    let mut h = Harness::with(c);
    let sid = h.initialize(json!({}));
    assert!(h
        .legacy(
            &sid,
            body(
                json!(1),
                "tools/call",
                json!({"name": "slow", "arguments": {}})
            )
        )
        .status
        .is_none());
    let a = h.legacy(
        &sid,
        body(
            json!(2),
            "tools/call",
            json!({"name": "slow", "arguments": {}}),
        ),
    );
    assert_eq!((a.status, code(&a.json())), (Some(429), -32000));
    let a = h.post(
        &body(
            json!(3),
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {}}),
        ),
        base_headers(),
    );
    assert_eq!(
        (a.status, code(&a.json())),
        (Some(503), -32000),
        "the session bound"
    );
}

#[test]
fn shutdown_answers_what_is_in_flight_and_refuses_what_comes_after() {
    let mut h = Harness::new();
    let message = body(
        json!(1),
        "tools/call",
        with_meta(json!({"name": "slow", "arguments": {}})),
    );
    let (x, _, _) = h.http(request(
        HttpMethod::Post,
        modern_headers(&message),
        message.to_string().as_bytes(),
    ));
    h.server.shutdown(h.now);
    let (out, _) = drain(&mut h.server);
    assert_eq!(out[0].0, x);
    assert_eq!(code(&out[0].1.json()), -32603);
    let mut cancelled = false;
    while let Some(e) = h.server.poll_event() {
        cancelled |= matches!(
            e,
            ServerEvent::Cancelled {
                reason: CancelReason::Shutdown,
                ..
            }
        );
    }
    assert!(cancelled);
    assert_eq!(
        h.modern(json!(2), "tools/list", json!({}), &[]).status,
        Some(503)
    );
    assert_eq!(h.server.open_exchanges(), 0);
}

#[test]
fn a_legacy_stream_keeps_a_bounded_backlog() {
    let mut c = config();
    c.limits.max_sse_backlog = 3;
    let mut h = Harness::with(c);
    let sid = h.initialize(json!({}));
    let mut g = base_headers();
    let _ = g.append("Mcp-Session-Id", sid.as_str());
    let (gx, _, _) = h.http(request(HttpMethod::Get, g.clone(), b""));
    assert_eq!(h.server.handle_exchange_closed(h.now, gx), Ok(()));
    for _ in 0..10 {
        h.server.list_changed(h.now, ListKind::Tools);
    }
    let a = h.http(request(HttpMethod::Get, g, b"")).1;
    assert_eq!(a.messages().len(), 3, "the oldest were dropped");
}

#[test]
fn a_client_taking_only_sse_gets_its_answer_as_a_stream_and_listens_do_not_count_as_in_flight() {
    let mut c = config();
    c.limits.max_in_flight = 1;
    let mut h = Harness::with(c);
    let a = h.modern(
        json!(1),
        "tools/list",
        json!({}),
        &[("Accept", "text/event-stream")],
    );
    assert!(a.streamed && a.ended);
    assert_eq!(a.header("Content-Type"), Some("text/event-stream"));
    assert_eq!(a.json()["id"], 1);
    let listen = body(
        json!(2),
        "subscriptions/listen",
        with_meta(json!({"notifications": {"toolsListChanged": true}})),
    );
    let (_, l, _) = h.http(request(
        HttpMethod::Post,
        modern_headers(&listen),
        listen.to_string().as_bytes(),
    ));
    assert!(l.streamed && !l.ended);
    let a = h.modern(
        json!(3),
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "ok"}}),
        &[],
    );
    assert_eq!(
        a.json()["result"]["content"][0]["text"],
        "ok",
        "the open listen does not use the bound"
    );
}

#[test]
fn lists_that_never_change_advertise_no_list_changed_and_listen_honours_only_what_can_come() {
    // Tools only, and they never change: no `listChanged`, and nothing to listen for.
    let mut c = config();
    c.prompts = false;
    c.resources = false;
    c.list_changed = false;
    let mut h = Harness::with(c);
    let a = h.modern(json!(1), "server/discover", json!({}), &[]);
    assert_eq!(
        a.json()["result"]["capabilities"],
        json!({"tools": {}, "completions": {}, "logging": {}})
    );
    let listen = with_meta(json!({"notifications": {"toolsListChanged": true}}));
    let a = h.modern(json!(2), "subscriptions/listen", listen, &[]);
    assert_eq!(
        (a.status, code(&a.json())),
        (Some(404), -32601),
        "{}",
        a.json()
    );
    // Resources that can be subscribed to, lists that never change: a listen honours the
    // resource updates only.
    let mut c = config();
    c.list_changed = false;
    let mut h = Harness::with(c);
    let a = h.modern(json!(3), "server/discover", json!({}), &[]);
    let caps = &a.json()["result"]["capabilities"];
    assert_eq!(caps["resources"], json!({"subscribe": true}));
    assert_eq!(caps["prompts"], json!({}));
    let message = body(
        json!(4),
        "subscriptions/listen",
        with_meta(json!({"notifications": {
            "toolsListChanged": true,
            "resourcesListChanged": true,
            "resourceSubscriptions": ["test://greeting"]
        }})),
    );
    let (_, a, _) = h.http(request(
        HttpMethod::Post,
        modern_headers(&message),
        message.to_string().as_bytes(),
    ));
    assert_eq!(
        a.json()["params"]["notifications"],
        json!({"resourceSubscriptions": ["test://greeting"]})
    );
}

#[test]
fn one_list_can_have_its_own_page_size() {
    let mut c = config();
    c.limits.page_sizes.tools = Some(4);
    let mut h = Harness::with(c);
    h.app.extra_tools = 10;
    let mut pages = Vec::new();
    let mut cursor: Option<Value> = None;
    for _ in 0..20 {
        let params = match &cursor {
            Some(c) => json!({"cursor": c}),
            None => json!({}),
        };
        let r = h.modern(json!(1), "tools/list", params, &[]).json()["result"].clone();
        pages.push(r["tools"].as_array().map_or(0, Vec::len));
        cursor = r.get("nextCursor").cloned();
        if cursor.is_none() {
            break;
        }
    }
    let total: usize = pages.iter().sum();
    assert!(total > 8, "{pages:?}");
    assert!(
        pages[..pages.len() - 1].iter().all(|n| *n == 4),
        "{pages:?}"
    );
    assert!(*pages.last().unwrap_or(&0) <= 4, "{pages:?}");
    // The other lists keep the common size (all of the fixture's prompts on one page).
    let r = h.modern(json!(2), "prompts/list", json!({}), &[]).json();
    assert!(r["result"].get("nextCursor").is_none(), "{r}");
    // A zero size is refused at start, naming it.
    let mut c = config();
    c.limits.page_sizes.resources = Some(0);
    let e = mcpwire_core::mcp::server::Server::new(c)
        .err()
        .map(|e| e.to_string());
    assert!(
        e.as_deref()
            .is_some_and(|e| e.contains("page_sizes.resources")),
        "{e:?}"
    );
}

// --- listens that ask for resource URIs: the application decides ----------------------------

fn listen_message(id: Value, notifications: Value) -> Value {
    body(
        id,
        "subscriptions/listen",
        with_meta(json!({ "notifications": notifications })),
    )
}

/// Posts `message` with conforming headers, without serving it.
fn post_only(h: &mut Harness, message: &Value) -> ExchangeId {
    h.server.handle_http_request(
        h.now,
        request(
            HttpMethod::Post,
            modern_headers(message),
            message.to_string().as_bytes(),
        ),
    )
}

/// What exchange `x` got in `out` (its events read as stream messages).
fn got_on(out: &[(ExchangeId, Answer)], x: ExchangeId) -> Answer {
    out.iter()
        .find(|(k, _)| *k == x)
        .map(|(_, a)| a.clone())
        .unwrap_or_default()
}

fn stream_messages(a: &Answer) -> Vec<Value> {
    Answer {
        streamed: true,
        ..a.clone()
    }
    .messages()
}

/// `subscriptions.mdx`, "Acknowledgment": the ack's `notifications` is the subset the server
/// agreed to honour; the application says which resource URIs, and only those get updates.
#[test]
fn a_listen_acknowledges_only_the_resource_uris_the_application_accepts() {
    let mut h = Harness::new();
    h.app.refused_uris = vec!["test://secret".into()];
    let m = listen_message(
        json!("s1"),
        json!({"toolsListChanged": true, "resourceSubscriptions": ["test://greeting", "test://secret"]}),
    );
    let (x, a, _) = h.http(request(
        HttpMethod::Post,
        modern_headers(&m),
        m.to_string().as_bytes(),
    ));
    assert_eq!(
        h.app.listens,
        [vec![
            "test://greeting".to_owned(),
            "test://secret".to_owned()
        ]],
        "the application is asked with every URI"
    );
    assert!(a.streamed && !a.ended, "the listen stream stays open");
    let msgs = a.messages();
    assert_eq!(msgs.len(), 1, "{msgs:?}");
    assert_eq!(
        msgs[0]["method"],
        "notifications/subscriptions/acknowledged"
    );
    assert_eq!(
        msgs[0]["params"]["notifications"],
        json!({"toolsListChanged": true, "resourceSubscriptions": ["test://greeting"]})
    );
    assert_eq!(h.server.resource_updated(h.now, "test://secret"), 0);
    assert_eq!(h.server.resource_updated(h.now, "test://greeting"), 1);
    let (out, _) = drain(&mut h.server);
    let got = stream_messages(&got_on(&out, x));
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0]["method"], "notifications/resources/updated");
    assert_eq!(got[0]["params"]["uri"], "test://greeting");
    assert_eq!(
        got[0]["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "s1"
    );

    // Every URI refused: the ack names none, the list-changed kinds stay.
    let m = listen_message(
        json!("s2"),
        json!({"promptsListChanged": true, "resourceSubscriptions": ["test://secret"]}),
    );
    let (_, a, _) = h.http(request(
        HttpMethod::Post,
        modern_headers(&m),
        m.to_string().as_bytes(),
    ));
    assert_eq!(
        a.json()["params"]["notifications"],
        json!({"promptsListChanged": true})
    );
    assert_eq!(h.server.resource_updated(h.now, "test://secret"), 0);
}

/// The trait's default honours every URI asked.
#[test]
fn by_default_a_listen_honours_every_uri_asked() {
    let mut server = server();
    let now = now();
    let m = listen_message(
        json!(1),
        json!({"resourceSubscriptions": ["test://a", "test://b"]}),
    );
    let x = server.handle_http_request(
        now,
        request(
            HttpMethod::Post,
            modern_headers(&m),
            m.to_string().as_bytes(),
        ),
    );
    server.serve_with(&mut Bare, now);
    let (out, _) = drain(&mut server);
    let a = got_on(&out, x);
    assert!(a.streamed && !a.ended);
    assert_eq!(
        a.json()["params"]["notifications"],
        json!({"resourceSubscriptions": ["test://a", "test://b"]})
    );
    assert_eq!(server.resource_updated(now, "test://a"), 1);
    assert_eq!(server.resource_updated(now, "test://b"), 1);
}

/// The event API: the listen arrives as `Call::Listen`; nothing goes out for it (not even a
/// progress or log message) before the answer, and the ack is the stream's first message.
#[test]
fn a_listen_with_uris_waits_for_the_application_and_its_ack_comes_first() {
    let mut h = Harness::new();
    let mut params = json!({"notifications": {"toolsListChanged": true, "resourceSubscriptions": ["test://greeting", "test://other"]}});
    params["_meta"] = meta();
    params["_meta"]["progressToken"] = json!("p1");
    params["_meta"]["io.modelcontextprotocol/logLevel"] = json!("debug");
    let m = body(json!(5), "subscriptions/listen", params);
    let x = post_only(&mut h, &m);
    let (out, _) = drain(&mut h.server);
    assert!(
        out.iter().all(|(k, _)| *k != x),
        "nothing goes out before the application answers: {out:?}"
    );
    assert_eq!(h.server.list_changed(h.now, ListKind::Tools), 0);
    assert_eq!(h.server.resource_updated(h.now, "test://other"), 0);
    let Some(ServerEvent::Request(incoming)) = h.server.poll_event() else {
        panic!("the listen reaches the application")
    };
    assert_eq!(
        incoming.call,
        Call::Listen {
            uris: vec!["test://greeting".into(), "test://other".into()]
        }
    );
    assert_eq!(incoming.context.method, "subscriptions/listen");
    assert_eq!(h.server.in_flight(), 1, "the application holds it");
    let rid = incoming.id();
    assert_eq!(
        h.server.progress(h.now, rid, 1.0, None, Some("early")),
        Ok(())
    );
    assert_eq!(
        h.server
            .log(h.now, Some(rid), LoggingLevel::Error, None, json!("early")),
        Ok(())
    );
    assert!(drain(&mut h.server).0.is_empty(), "dropped before the ack");
    assert_eq!(
        h.server.respond(
            h.now,
            rid,
            Reply::resource_subscriptions(["test://other", "test://never-asked"])
        ),
        Ok(())
    );
    assert_eq!(h.server.in_flight(), 0, "the stream is the core's now");
    h.server.list_changed(h.now, ListKind::Tools);
    h.server.resource_updated(h.now, "test://other");
    h.server.resource_updated(h.now, "test://greeting");
    let (out, _) = drain(&mut h.server);
    let a = got_on(&out, x);
    assert_eq!(a.status, Some(200));
    assert!(a.streamed && !a.ended);
    let msgs = a.messages();
    assert_eq!(msgs.len(), 3, "{msgs:?}");
    assert_eq!(
        msgs[0]["method"],
        "notifications/subscriptions/acknowledged"
    );
    assert_eq!(
        msgs[0]["params"]["notifications"],
        json!({"toolsListChanged": true, "resourceSubscriptions": ["test://other"]}),
        "URIs not asked for are ignored"
    );
    assert_eq!(msgs[1]["method"], "notifications/tools/list_changed");
    assert_eq!(msgs[2]["method"], "notifications/resources/updated");
    assert_eq!(msgs[2]["params"]["uri"], "test://other");
    assert!(msgs
        .iter()
        .all(|m| m["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == 5));
    // A second answer changes nothing.
    assert_eq!(
        h.server.respond(
            h.now,
            rid,
            Reply::resource_subscriptions(["test://greeting"])
        ),
        Ok(())
    );
    assert_eq!(h.server.resource_updated(h.now, "test://greeting"), 0);
}

/// An error answer is the listen's JSON-RPC error (with its id, on its exchange); a result of
/// the wrong shape or an `input_required` is a `-32603` and the application's slip.
#[test]
fn an_error_answer_to_a_listen_is_its_jsonrpc_error_and_opens_no_stream() {
    let mut h = Harness::new();
    let uris = json!({"toolsListChanged": true, "resourceSubscriptions": ["test://greeting"]});
    let x = post_only(&mut h, &listen_message(json!(1), uris.clone()));
    let Some(ServerEvent::Request(i)) = h.server.poll_event() else {
        panic!("no listen event")
    };
    let refusal = ErrorObject {
        code: -32602,
        message: "Invalid params: no such resource".into(),
        data: None,
    };
    assert_eq!(
        h.server.respond(h.now, i.id(), Reply::Error(refusal)),
        Ok(())
    );
    let (out, _) = drain(&mut h.server);
    let a = got_on(&out, x);
    assert!(a.ended && !a.streamed, "a plain answer: {a:?}");
    assert_eq!(a.json()["id"], 1);
    assert_eq!(code(&a.json()), -32602);
    assert_eq!(
        a.json()["error"]["message"],
        "Invalid params: no such resource"
    );
    assert_eq!(h.server.in_flight(), 0);
    assert_eq!(
        h.server.list_changed(h.now, ListKind::Tools),
        0,
        "no stream"
    );

    let x = post_only(&mut h, &listen_message(json!(2), uris.clone()));
    let Some(ServerEvent::Request(i)) = h.server.poll_event() else {
        panic!("no listen event")
    };
    assert_eq!(
        h.server
            .respond(h.now, i.id(), Reply::Result(json!({"uris": []}))),
        Err(UsageError::BadResult { request: i.id() })
    );
    let (out, _) = drain(&mut h.server);
    let a = got_on(&out, x);
    assert_eq!(
        (a.json()["id"].clone(), code(&a.json())),
        (json!(2), -32603)
    );

    let x = post_only(&mut h, &listen_message(json!(3), uris));
    let Some(ServerEvent::Request(i)) = h.server.poll_event() else {
        panic!("no listen event")
    };
    let ask = Reply::InputRequired {
        inputs: vec![("r".into(), InputRequest::roots())],
        state: None,
    };
    assert!(matches!(
        h.server.respond(h.now, i.id(), ask),
        Err(UsageError::InputNotAllowed { .. })
    ));
    let (out, _) = drain(&mut h.server);
    let a = got_on(&out, x);
    assert_eq!(
        (a.json()["id"].clone(), code(&a.json())),
        (json!(3), -32603)
    );
    assert_eq!(h.server.in_flight(), 0);
    assert_eq!(h.server.list_changed(h.now, ListKind::Tools), 0);

    // Through the trait: an `Err` from the application.
    h.app.listen_error = Some(ErrorObject {
        code: -32602,
        message: "Invalid params: not for you".into(),
        data: None,
    });
    let a = h.modern(
        json!(4),
        "subscriptions/listen",
        json!({"notifications": {"resourceSubscriptions": ["test://greeting"]}}),
        &[],
    );
    assert!(a.ended);
    assert_eq!(
        (a.json()["id"].clone(), code(&a.json())),
        (json!(4), -32602)
    );
}

/// A listen whose connection closes before the application answers is cancelled like any
/// request: the application is told, a late answer is dropped, nothing stays held; while it
/// waits it counts against `max_streams`, as the stream it would become.
#[test]
fn a_listen_closed_before_the_answer_is_cancelled_and_holds_nothing() {
    let mut c = config();
    c.limits.max_streams = 1;
    let mut h = Harness::with(c);
    let uris = json!({"resourceSubscriptions": ["test://greeting"]});
    let x = post_only(&mut h, &listen_message(json!(1), uris.clone()));
    let Some(ServerEvent::Request(i)) = h.server.poll_event() else {
        panic!("no listen event")
    };
    // Waiting, it takes the one stream there may be.
    let x2 = post_only(&mut h, &listen_message(json!(2), uris.clone()));
    let (out, _) = drain(&mut h.server);
    assert_eq!(got_on(&out, x2).status, Some(503));
    assert_eq!(h.server.handle_exchange_closed(h.now, x), Ok(()));
    match h.server.poll_event() {
        Some(ServerEvent::Cancelled { request, reason }) => {
            assert_eq!(request, i.id());
            assert_eq!(reason, CancelReason::ExchangeClosed);
        }
        other => panic!("expected the cancel, got {other:?}"),
    }
    assert_eq!(h.server.in_flight(), 0);
    assert_eq!(
        h.server.respond(
            h.now,
            i.id(),
            Reply::resource_subscriptions(["test://greeting"])
        ),
        Ok(())
    );
    let (out, _) = drain(&mut h.server);
    assert!(out.is_empty(), "a late answer goes nowhere: {out:?}");
    assert_eq!(h.server.resource_updated(h.now, "test://greeting"), 0);
    // The bound is free again.
    let (x3, a, _) = h.http(request(
        HttpMethod::Post,
        modern_headers(&listen_message(json!(3), uris.clone())),
        listen_message(json!(3), uris).to_string().as_bytes(),
    ));
    assert!(a.streamed && !a.ended, "{a:?}");
    assert_eq!(h.server.resource_updated(h.now, "test://greeting"), 1);
    // Shutdown ends the open one gracefully; a waiting one would get an error.
    h.server.shutdown(h.now);
    let (out, _) = drain(&mut h.server);
    assert!(got_on(&out, x3).ended);
}

/// Shutdown answers a listen the application still holds with an error and tells it.
#[test]
fn shutdown_answers_a_listen_still_with_the_application() {
    let mut h = Harness::new();
    let x = post_only(
        &mut h,
        &listen_message(
            json!(1),
            json!({"resourceSubscriptions": ["test://greeting"]}),
        ),
    );
    let Some(ServerEvent::Request(i)) = h.server.poll_event() else {
        panic!("no listen event")
    };
    assert_eq!(h.server.end_listens(h.now), 0, "not open yet");
    h.server.shutdown(h.now);
    let (out, _) = drain(&mut h.server);
    let a = got_on(&out, x);
    assert_eq!(a.status, Some(503));
    assert_eq!(
        (a.json()["id"].clone(), code(&a.json())),
        (json!(1), -32603)
    );
    assert!(matches!(
        h.server.poll_event(),
        Some(ServerEvent::Cancelled { request, reason: CancelReason::Shutdown }) if request == i.id()
    ));
}

//! The dev servers over real loopback sockets: the reference MCP server (HTTP and stdio) and
//! the local control plane, each started in-process on port 0 and driven with a plain HTTP
//! client (ureq), the way a tunnel client or an MCP client would.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcpwire_core::mcp::era::{classify_http_400, Http400Verdict};
use mcpwire_core::mcp::headers::{partition_tools, request_headers};
use mcpwire_core::mcp::legacy::LegacySession;
use mcpwire_core::mcp::meta::{build_request, RequestMeta};
use mcpwire_core::mcp::mrtr::InputRequiredResult;
use mcpwire_core::mcp::{ClientCapabilities, DiscoverResult, Implementation};
use mcpwire_core::sse::SseParser;
use mcpwire_core::tunnel::wire::{decode_poll_body, CommandKind};
use mcpwire_dev::control_plane::{self, ControlPlane, ControlPlaneHandle, Endpoint, Fault};
use mcpwire_dev::mcp_server::{self, EraMode, McpServer, McpServerHandle, FAIL_CODE, FAIL_MESSAGE};
use mcpwire_dev::ApiKey;
use serde_json::{json, Value};

const KEY: &str = "sk-dev-test-key";
const TUNNEL: &str = "tunnel_test";

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(20)))
        .build()
        .into()
}

struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }

    /// The JSON-RPC messages of an SSE body, parsed with the core's parser.
    fn sse_messages(&self) -> Vec<Value> {
        let mut p = SseParser::new();
        p.push(self.body.as_bytes());
        let mut out = Vec::new();
        while let Some(ev) = p.next_event().unwrap() {
            out.push(serde_json::from_str(&ev.data).unwrap());
        }
        out
    }
}

fn reply(r: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> Reply {
    let mut r = r.unwrap();
    let status = r.status().as_u16();
    let headers = r
        .headers()
        .iter()
        .map(|(n, v)| {
            (
                n.as_str().to_owned(),
                v.to_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let body = r.body_mut().read_to_string().unwrap_or_default();
    Reply {
        status,
        headers,
        body,
    }
}

/// POSTs `body` with `headers`.
fn post(url: &str, headers: &[(&str, &str)], body: &str) -> Reply {
    let mut req = agent().post(url);
    for (n, v) in headers {
        req = req.header(*n, *v);
    }
    reply(req.send(body))
}

fn get(url: &str, headers: &[(&str, &str)]) -> Reply {
    let mut req = agent().get(url);
    for (n, v) in headers {
        req = req.header(*n, *v);
    }
    reply(req.call())
}

fn delete(url: &str, headers: &[(&str, &str)]) -> Reply {
    let mut req = agent().delete(url);
    for (n, v) in headers {
        req = req.header(*n, *v);
    }
    reply(req.call())
}

// ---------------------------------------------------------------------------------------------
// The reference MCP server
// ---------------------------------------------------------------------------------------------

fn mcp(era: EraMode) -> McpServerHandle {
    let config = mcp_server::Config {
        era,
        ..mcp_server::Config::default()
    };
    McpServer::start_http(config, "127.0.0.1:0").unwrap()
}

fn caps() -> ClientCapabilities {
    ClientCapabilities::none().with_elicitation_form()
}

/// A 2026-07-28 request body built by the core, as the MCP client builds it.
fn modern_body(id: i64, method: &str, params: Value, caps: ClientCapabilities) -> String {
    let meta = RequestMeta::new("2026-07-28", caps)
        .with_client_info(Implementation::new("dev-servers-test", "1"));
    build_request(&id.into(), method, params, &meta).unwrap()
}

/// POSTs a body with the headers the core builds for it (`Mcp-Param-*` from `tool`).
fn modern_call(url: &str, body: &str, tool: Option<&Value>) -> Reply {
    let th = tool.map(|t| {
        mcpwire_core::mcp::headers::tool_headers(t["name"].as_str().unwrap(), &t["inputSchema"])
            .unwrap()
    });
    let h = request_headers(body, th.as_ref()).unwrap();
    let pairs: Vec<(String, String)> = h
        .iter()
        .map(|(n, v)| (n.to_owned(), v.to_owned()))
        .collect();
    let refs: Vec<(&str, &str)> = pairs
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    post(url, &refs, body)
}

fn list_tools(url: &str) -> Vec<Value> {
    let r = modern_call(url, &modern_body(1, "tools/list", json!({}), caps()), None);
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()["result"]["tools"].as_array().unwrap().clone()
}

fn tool(url: &str, name: &str) -> Value {
    list_tools(url)
        .into_iter()
        .find(|t| t["name"] == name)
        .unwrap()
}

fn call_body(id: i64, name: &str, args: Value) -> String {
    modern_body(
        id,
        "tools/call",
        json!({"name": name, "arguments": args}),
        caps(),
    )
}

#[test]
fn discover_names_the_supported_versions_and_the_server() {
    let s = mcp(EraMode::Dual);
    let r = modern_call(
        &s.url(),
        &modern_body(1, "server/discover", json!({}), caps()),
        None,
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.header("content-type"), Some("application/json"));
    let result = DiscoverResult::from_value(r.json()["result"].clone()).unwrap();
    assert!(result.supports_version("2026-07-28"));
    assert!(
        result.supports_version("2025-11-25"),
        "dual era lists the legacy version too"
    );
    assert_eq!(result.server_info().unwrap().name, mcp_server::SERVER_NAME);
    assert!(result.capabilities.tools.is_some());

    let m = mcp(EraMode::Modern);
    let r = modern_call(
        &m.url(),
        &modern_body(1, "server/discover", json!({}), caps()),
        None,
    );
    let result = DiscoverResult::from_value(r.json()["result"].clone()).unwrap();
    assert_eq!(result.supported_versions, ["2026-07-28"]);
}

#[test]
fn tools_list_offers_every_tool_with_valid_header_annotations() {
    let s = mcp(EraMode::Dual);
    let tools = list_tools(&s.url());
    let mut names: Vec<String> = tools
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["ask", "echo", "fail", "headers", "progress", "slow", "tenant"]
    );
    let (valid, rejected) = partition_tools(tools);
    assert!(rejected.is_empty());
    let tenant = valid.iter().find(|(t, _)| t["name"] == "tenant").unwrap();
    assert_eq!(tenant.1.params()[0].header_name(), "Mcp-Param-Region");
}

#[test]
fn echo_returns_its_text_argument() {
    let s = mcp(EraMode::Dual);
    let r = modern_call(
        &s.url(),
        &call_body(7, "echo", json!({"text": "héllo\nworld"})),
        None,
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    assert_eq!(v["id"], 7);
    assert_eq!(v["result"]["resultType"], "complete");
    assert_eq!(v["result"]["content"][0]["text"], "héllo\nworld");
    assert_eq!(
        v["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        mcp_server::SERVER_NAME
    );
}

#[test]
fn progress_streams_its_notifications_over_sse_before_the_result() {
    let s = mcp(EraMode::Dual);
    let meta = RequestMeta::new("2026-07-28", caps()).with_progress_token("tok-1".into());
    let body = build_request(
        &9.into(),
        "tools/call",
        json!({"name": "progress", "arguments": {"steps": 4, "interval_ms": 1}}),
        &meta,
    )
    .unwrap();
    let r = modern_call(&s.url(), &body, None);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    let messages = r.sse_messages();
    assert_eq!(messages.len(), 5, "{messages:?}");
    for (i, m) in messages[..4].iter().enumerate() {
        assert_eq!(m["method"], "notifications/progress");
        assert_eq!(m["params"]["progressToken"], "tok-1");
        assert_eq!(m["params"]["progress"], i as u64 + 1);
        assert_eq!(m["params"]["total"], 4);
    }
    assert_eq!(messages[4]["id"], 9);
    assert_eq!(
        messages[4]["result"]["content"][0]["text"],
        "done after 4 steps"
    );
}

#[test]
fn bad_tool_arguments_are_invalid_params_with_http_200() {
    // A 400 would read as a legacy server to a client's era check; -32602 about arguments
    // comes with 200 (only a malformed request itself gets 400).
    let s = mcp(EraMode::Dual);
    for (tool, args) in [
        ("progress", json!({})),
        ("echo", json!({"text": 5})),
        ("nope", json!({})),
        ("slow", json!({"ms": -1})),
    ] {
        let r = modern_call(&s.url(), &call_body(1, tool, args), None);
        assert_eq!(r.status, 200, "{tool}");
        assert_eq!(r.json()["error"]["code"], -32602, "{tool}");
    }
}

#[test]
fn fail_answers_its_json_rpc_error_exactly() {
    let s = mcp(EraMode::Dual);
    let r = modern_call(&s.url(), &call_body(3, "fail", json!({})), None);
    assert_eq!(r.status, 200);
    let v = r.json();
    assert_eq!(v["id"], 3);
    assert_eq!(v["error"]["code"], FAIL_CODE);
    assert_eq!(v["error"]["message"], FAIL_MESSAGE);
    assert_eq!(v["error"]["data"], mcp_server::fail_data());

    let chosen =
        json!({"code": -32003, "message": "capability", "data": {"x": [null]}, "http_status": 403});
    let r = modern_call(&s.url(), &call_body(4, "fail", chosen), None);
    assert_eq!(r.status, 403);
    assert_eq!(
        r.json()["error"],
        json!({"code": -32003, "message": "capability", "data": {"x": [null]}})
    );

    let raw = json!({"http_status": 500, "raw_body": "<html>oops</html>"});
    let r = modern_call(&s.url(), &call_body(5, "fail", raw), None);
    assert_eq!(r.status, 500);
    assert_eq!(r.body, "<html>oops</html>");
    assert!(r.header("content-type").unwrap().starts_with("text/plain"));
}

#[test]
fn tenant_requires_an_mcp_param_region_header_matching_the_body() {
    let s = mcp(EraMode::Dual);
    let url = s.url();
    let t = tool(&url, "tenant");
    // The core builds Mcp-Param-Region from the annotation: accepted.
    let body = call_body(1, "tenant", json!({"region": "eu-west-1"}));
    let r = modern_call(&url, &body, Some(&t));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.json()["result"]["structuredContent"]["region"],
        "eu-west-1"
    );
    // A value that needs Base64 is decoded before comparing.
    let body = call_body(2, "tenant", json!({"region": " zone ü "}));
    let r = modern_call(&url, &body, Some(&t));
    assert_eq!(r.status, 200, "{}", r.body);

    let base = [
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", "tenant"),
    ];
    let body = call_body(3, "tenant", json!({"region": "eu-west-1"}));
    // Missing.
    let r = post(&url, &base, &body);
    assert_eq!(
        (r.status, r.json()["error"]["code"].clone()),
        (400, json!(-32020)),
        "{}",
        r.body
    );
    assert!(r.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("Mcp-Param-Region"));
    // Different.
    let mut h = base.to_vec();
    h.push(("Mcp-Param-Region", "us-east-1"));
    let r = post(&url, &h, &body);
    assert_eq!(
        (r.status, r.json()["error"]["code"].clone()),
        (400, json!(-32020))
    );
    // Present without a body value.
    let r = post(&url, &h, &call_body(4, "tenant", json!({"region": null})));
    assert_eq!(r.json()["error"]["code"], -32020);
    assert!(s.server().stats().header_mismatches >= 3);
}

#[test]
fn a_header_that_disagrees_with_the_body_is_a_header_mismatch() {
    let s = mcp(EraMode::Dual);
    let url = s.url();
    let body = call_body(1, "echo", json!({"text": "x"}));
    let cases: [(&[(&str, &str)], &str); 5] = [
        (
            &[("Mcp-Method", "tools/call"), ("Mcp-Name", "echo")],
            "MCP-Protocol-Version",
        ),
        (
            &[
                ("MCP-Protocol-Version", "2026-07-29"),
                ("Mcp-Method", "tools/call"),
                ("Mcp-Name", "echo"),
            ],
            "MCP-Protocol-Version",
        ),
        (
            &[("MCP-Protocol-Version", "2026-07-28"), ("Mcp-Name", "echo")],
            "Mcp-Method",
        ),
        (
            &[
                ("MCP-Protocol-Version", "2026-07-28"),
                ("Mcp-Method", "tools/list"),
                ("Mcp-Name", "echo"),
            ],
            "Mcp-Method",
        ),
        (
            &[
                ("MCP-Protocol-Version", "2026-07-28"),
                ("Mcp-Method", "tools/call"),
                ("Mcp-Name", "fail"),
            ],
            "Mcp-Name",
        ),
    ];
    for (headers, named) in cases {
        let r = post(&url, headers, &body);
        assert_eq!(r.status, 400, "{headers:?}");
        let e = &r.json()["error"];
        assert_eq!(e["code"], -32020, "{headers:?}");
        assert!(e["message"].as_str().unwrap().contains(named), "{e}");
        assert_eq!(r.json()["id"], 1);
    }
    // The era check of the core reads these as modern errors (no fallback to initialize).
    let r = post(&url, cases[0].0, &body);
    assert!(matches!(
        classify_http_400(r.body.as_bytes()),
        Http400Verdict::Modern(_)
    ));
}

#[test]
fn an_unsupported_version_is_refused_with_the_supported_list() {
    let s = mcp(EraMode::Dual);
    let body = r#"{"jsonrpc":"2.0","id":"v","method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
    let r = post(
        &s.url(),
        &[
            ("MCP-Protocol-Version", "2099-01-01"),
            ("Mcp-Method", "tools/list"),
        ],
        body,
    );
    assert_eq!(r.status, 400);
    let e = &r.json()["error"];
    assert_eq!(e["code"], -32022);
    assert_eq!(e["data"]["requested"], "2099-01-01");
    // Every version the server accepts: this era's, then each legacy version `initialize`
    // negotiates (the hand-written server listed only the newest legacy one here, though it
    // accepted the others at `initialize`).
    assert_eq!(
        e["data"]["supported"],
        json!([
            "2026-07-28",
            "2025-11-25",
            "2025-06-18",
            "2025-03-26",
            "2024-11-05"
        ])
    );
    assert_eq!(r.json()["id"], "v");
}

#[test]
fn a_request_without_meta_is_invalid_params_and_an_unknown_method_is_404() {
    let s = mcp(EraMode::Dual);
    let r = post(
        &s.url(),
        &[
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/list"),
        ],
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
    );
    assert_eq!(
        (r.status, r.json()["error"]["code"].clone()),
        (400, json!(-32602))
    );
    let r = modern_call(
        &s.url(),
        &modern_body(2, "resources/list", json!({}), caps()),
        None,
    );
    assert_eq!(
        (r.status, r.json()["error"]["code"].clone()),
        (404, json!(-32601))
    );
    let r = post(&s.url(), &[], "{not json");
    assert_eq!(
        (r.status, r.json()["error"]["code"].clone()),
        (400, json!(-32700))
    );
    assert_eq!(r.json()["id"], Value::Null);
}

#[test]
fn get_is_405_and_a_foreign_origin_is_403() {
    let s = mcp(EraMode::Dual);
    let r = get(&s.url(), &[("Accept", "text/event-stream")]);
    assert_eq!(r.status, 405);
    assert!(r.header("allow").unwrap().contains("POST"));
    let body = modern_body(1, "tools/list", json!({}), caps());
    let mut h: Vec<(&str, &str)> = vec![
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/list"),
    ];
    h.push(("Origin", "http://evil.example"));
    assert_eq!(post(&s.url(), &h, &body).status, 403);
    h.pop();
    h.push(("Origin", "http://localhost:5173"));
    assert_eq!(post(&s.url(), &h, &body).status, 200);
}

#[test]
fn ask_completes_a_multi_round_trip_request() {
    let s = mcp(EraMode::Dual);
    let url = s.url();
    let r = modern_call(
        &url,
        &call_body(1, "ask", json!({"question": "Your name?"})),
        None,
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let result = r.json()["result"].clone();
    assert_eq!(result["resultType"], "input_required");
    let parsed = InputRequiredResult::parse(&result.to_string()).unwrap();
    assert_eq!(parsed.input_requests().len(), 1);
    assert_eq!(parsed.input_requests()[0].0, "name");
    assert_eq!(result["inputRequests"]["name"]["params"]["mode"], "form");
    let state = result["requestState"].as_str().unwrap().to_owned();

    // The retry: a new id, the same arguments, the answers and the state echoed.
    let retry = call_body(2, "ask", json!({"question": "Your name?"}));
    let mut v: Value = serde_json::from_str(&retry).unwrap();
    v["params"]["inputResponses"] =
        json!({"name": {"action": "accept", "content": {"name": "Ada"}}});
    v["params"]["requestState"] = json!(state);
    let r = modern_call(&url, &v.to_string(), None);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["result"]["resultType"], "complete");
    assert_eq!(r.json()["result"]["content"][0]["text"], "Hello, Ada!");

    // A tampered state is refused.
    v["params"]["requestState"] = json!("ask/v1/zz");
    let r = modern_call(&url, &v.to_string(), None);
    assert_eq!(r.json()["error"]["code"], -32602);

    // Without the elicitation capability the server must not ask: -32021.
    let body = modern_body(
        3,
        "tools/call",
        json!({"name": "ask"}),
        ClientCapabilities::none(),
    );
    let r = modern_call(&url, &body, None);
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["code"], -32021);
    assert_eq!(
        r.json()["error"]["data"]["requiredCapabilities"]["elicitation"],
        json!({"form": {}})
    );
}

#[test]
fn a_legacy_session_starts_with_initialize_and_ends_with_delete() {
    let s = mcp(EraMode::Dual);
    let url = s.url();
    let mut session = LegacySession::new(
        Implementation::new("legacy-test", "1"),
        ClientCapabilities::none(),
    );
    let init = session.initialize(1.into());
    let pairs: Vec<(String, String)> = init
        .headers
        .iter()
        .map(|(n, v)| (n.into(), v.into()))
        .collect();
    let refs: Vec<(&str, &str)> = pairs
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    let r = post(&url, &refs, &init.body);
    assert_eq!(r.status, 200, "{}", r.body);
    let sid = r.header("mcp-session-id").unwrap().to_owned();
    let mut h = mcpwire_core::http::Headers::new();
    h.append("Mcp-Session-Id", sid.as_str()).unwrap();
    let initialized = session.handle_initialize_response(&h, &r.body).unwrap();
    assert_eq!(session.negotiated().unwrap().protocol_version, "2025-11-25");

    let send = |out: &mcpwire_core::mcp::legacy::Outgoing| {
        let pairs: Vec<(String, String)> = out
            .headers
            .iter()
            .map(|(n, v)| (n.into(), v.into()))
            .collect();
        let refs: Vec<(&str, &str)> = pairs
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect();
        post(&url, &refs, &out.body)
    };
    assert_eq!(send(&initialized).status, 202);
    let list = session
        .request(&2.into(), "tools/list", Value::Null)
        .unwrap();
    let r = send(&list);
    assert_eq!(r.status, 200, "{}", r.body);
    let names: Vec<Value> = r.json()["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].clone())
        .collect();
    assert!(names.contains(&json!("echo")) && !names.contains(&json!("ask")));
    let ping = session.request(&3.into(), "ping", Value::Null).unwrap();
    assert_eq!(send(&ping).json()["result"], json!({}));
    let echo = session
        .request(
            &4.into(),
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "old"}}),
        )
        .unwrap();
    assert_eq!(send(&echo).json()["result"]["content"][0]["text"], "old");
    assert_eq!(s.server().open_sessions(), 1);

    // DELETE ends it; the id is then unknown (404), to requests and to a second DELETE.
    assert_eq!(delete(&url, &[("Mcp-Session-Id", &sid)]).status, 204);
    assert_eq!(s.server().stats().sessions_ended, 1);
    let again = session
        .request(&5.into(), "tools/list", Value::Null)
        .unwrap();
    assert_eq!(send(&again).status, 404);
    assert_eq!(delete(&url, &[("Mcp-Session-Id", &sid)]).status, 404);
    assert_eq!(delete(&url, &[]).status, 400);
    // A request in no session, without modern _meta, is not served.
    let r = post(
        &url,
        &[("Mcp-Session-Id", "mcps_unknown")],
        r#"{"jsonrpc":"2.0","id":6,"method":"tools/list"}"#,
    );
    assert_eq!(r.status, 404);
}

#[test]
fn a_legacy_only_server_answers_a_modern_request_with_a_legacy_400() {
    let s = mcp(EraMode::Legacy);
    let r = modern_call(
        &s.url(),
        &modern_body(1, "server/discover", json!({}), caps()),
        None,
    );
    assert_eq!(r.status, 400);
    assert!(
        matches!(classify_http_400(r.body.as_bytes()), Http400Verdict::Legacy),
        "{}",
        r.body
    );
}

#[test]
fn a_modern_only_server_refuses_initialize_naming_its_version_and_delete_is_405() {
    let s = mcp(EraMode::Modern);
    let r = post(
        &s.url(),
        &[],
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#,
    );
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["code"], -32022);
    assert_eq!(
        r.json()["error"]["data"]["supported"],
        json!(["2026-07-28"])
    );
    assert_eq!(delete(&s.url(), &[("Mcp-Session-Id", "x")]).status, 405);
}

#[test]
fn slow_stops_when_its_client_goes_away() {
    let s = mcp(EraMode::Dual);
    let body = call_body(1, "slow", json!({"ms": 20_000}));
    let h = request_headers(&body, None).unwrap();
    let mut text = format!(
        "POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (n, v) in h.iter() {
        text.push_str(&format!("{n}: {v}\r\n"));
    }
    text.push_str("\r\n");
    text.push_str(&body);
    let mut conn = TcpStream::connect(s.local_addr()).unwrap();
    conn.write_all(text.as_bytes()).unwrap();
    // Wait (bounded) until the call started, then hang up.
    let started = Instant::now();
    while !s.server().stats().tool_calls.contains_key("slow")
        && started.elapsed() < Duration::from_secs(10)
    {
        std::thread::sleep(Duration::from_millis(5));
    }
    drop(conn);
    let gone = Instant::now();
    while s.server().stats().cancelled == 0 && gone.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(s.server().stats().cancelled, 1);
}

#[test]
fn slow_refuses_a_sleep_past_its_bound() {
    let s = mcp(EraMode::Dual);
    let r = modern_call(&s.url(), &call_body(1, "slow", json!({"ms": 60_001})), None);
    assert_eq!(r.json()["error"]["code"], -32602);
    let r = modern_call(&s.url(), &call_body(2, "slow", json!({"ms": 1})), None);
    assert_eq!(r.json()["result"]["content"][0]["text"], "slept 1 ms");
}

#[test]
fn headers_tool_shows_what_arrived_with_authorization_redacted() {
    let s = mcp(EraMode::Dual);
    let body = call_body(1, "headers", json!({}));
    let h = request_headers(&body, None).unwrap();
    let mut pairs: Vec<(String, String)> = h.iter().map(|(n, v)| (n.into(), v.into())).collect();
    pairs.push(("Authorization".into(), "Bearer secret-token".into()));
    pairs.push(("X-Custom".into(), "kept".into()));
    let refs: Vec<(&str, &str)> = pairs
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    let r = post(&s.url(), &refs, &body);
    assert!(!r.body.contains("secret-token"));
    let list = r.json()["result"]["structuredContent"]["headers"].clone();
    let has = |name: &str, value: &str| {
        list.as_array()
            .unwrap()
            .iter()
            .any(|p| p[0].as_str().unwrap().eq_ignore_ascii_case(name) && p[1] == value)
    };
    assert!(
        has("X-Custom", "kept") && has("Authorization", "<redacted>"),
        "{list}"
    );
    assert!(!format!("{:?}", s.server().requests()).contains("secret-token"));
}

#[test]
fn the_server_stops_with_a_call_in_flight() {
    let mut s = mcp(EraMode::Dual);
    let url = s.url();
    let t = std::thread::spawn(move || {
        modern_call(&url, &call_body(1, "slow", json!({"ms": 30_000})), None)
    });
    let started = Instant::now();
    while !s.server().stats().tool_calls.contains_key("slow")
        && started.elapsed() < Duration::from_secs(10)
    {
        std::thread::sleep(Duration::from_millis(5));
    }
    s.stop();
    // stop() joined the call's thread: it saw the stop and ended without an answer.
    assert_eq!(s.server().stats().cancelled, 1);
    // The client got no answer (its connection was closed: ureq's error ends its thread).
    assert!(t.join().map(|r| r.status != 200).unwrap_or(true));
    assert!(
        TcpStream::connect(s.local_addr()).is_err(),
        "no longer listening"
    );
}

// ---------------------------------------------------------------------------------------------
// stdio
// ---------------------------------------------------------------------------------------------

/// An output both the server thread and the test can see.
#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Shared {
    fn lines(&self) -> Vec<Value> {
        let text = String::from_utf8(self.0.lock().unwrap().clone()).unwrap();
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// Waits (bounded) until `n` lines were written.
    fn wait_lines(&self, n: usize) -> Vec<Value> {
        let start = Instant::now();
        while self.lines().len() < n && start.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(5));
        }
        self.lines()
    }
}

/// A stdin fed line by line from the test.
struct Feed(mpsc::Receiver<Vec<u8>>, Vec<u8>);

impl Read for Feed {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.1.is_empty() {
            match self.0.recv() {
                Ok(b) => self.1 = b,
                Err(_) => return Ok(0),
            }
        }
        let n = buf.len().min(self.1.len());
        buf[..n].copy_from_slice(&self.1[..n]);
        self.1.drain(..n);
        Ok(n)
    }
}

fn stdio_server(era: EraMode) -> (mpsc::Sender<Vec<u8>>, Shared, std::thread::JoinHandle<()>) {
    let (tx, rx) = mpsc::channel();
    let out = Shared::default();
    let server = McpServer::new(mcp_server::Config {
        era,
        ..mcp_server::Config::default()
    });
    let out2 = out.clone();
    let t = std::thread::spawn(move || {
        server
            .serve_stdio(BufReader::new(Feed(rx, Vec::new())), out2)
            .unwrap();
    });
    (tx, out, t)
}

fn line(tx: &mpsc::Sender<Vec<u8>>, text: &str) {
    tx.send(format!("{text}\n").into_bytes()).unwrap();
}

#[test]
fn stdio_serves_discover_tools_and_progress_as_lines() {
    let (tx, out, t) = stdio_server(EraMode::Dual);
    line(&tx, &modern_body(1, "server/discover", json!({}), caps()));
    let lines = out.wait_lines(1);
    assert_eq!(lines[0]["id"], 1);
    DiscoverResult::from_value(lines[0]["result"].clone()).unwrap();
    line(&tx, &call_body(2, "echo", json!({"text": "over stdio"})));
    let lines = out.wait_lines(2);
    assert_eq!(lines[1]["result"]["content"][0]["text"], "over stdio");
    let meta = RequestMeta::new("2026-07-28", caps()).with_progress_token(5.into());
    let body = build_request(
        &3.into(),
        "tools/call",
        json!({"name": "progress", "arguments": {"steps": 2, "interval_ms": 0}}),
        &meta,
    )
    .unwrap();
    line(&tx, &body);
    let lines = out.wait_lines(5);
    assert_eq!(lines[2]["method"], "notifications/progress");
    assert_eq!(lines[3]["params"]["progress"], 2);
    assert_eq!(lines[4]["id"], 3);
    // Garbage gets a parse error with a null id; the loop keeps serving.
    line(&tx, "{oops");
    let lines = out.wait_lines(6);
    assert_eq!(lines[5]["error"]["code"], -32700);
    assert_eq!(lines[5]["id"], Value::Null);
    drop(tx);
    t.join().unwrap();
}

#[test]
fn stdio_cancellation_stops_a_call_without_an_answer_while_others_are_served() {
    let (tx, out, t) = stdio_server(EraMode::Dual);
    line(&tx, &call_body(1, "slow", json!({"ms": 20_000})));
    line(&tx, &call_body(2, "echo", json!({"text": "next"})));
    let lines = out.wait_lines(1);
    assert_eq!(lines[0]["id"], 2, "the slow call does not hold up the next");
    line(
        &tx,
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#,
    );
    line(&tx, &call_body(3, "echo", json!({"text": "after"})));
    let lines = out.wait_lines(2);
    assert_eq!(lines[1]["id"], 3);
    drop(tx);
    t.join().unwrap();
    assert!(
        out.lines().iter().all(|l| l["id"] != 1),
        "a cancelled call is never answered"
    );
}

#[test]
fn stdio_legacy_initialize_makes_the_process_legacy() {
    let (tx, out, t) = stdio_server(EraMode::Dual);
    line(&tx, r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#);
    let lines = out.wait_lines(1);
    assert_eq!(
        lines[0]["error"]["code"], -32602,
        "no _meta and no initialize"
    );
    line(
        &tx,
        r#"{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#,
    );
    line(
        &tx,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    );
    let lines = out.wait_lines(2);
    assert_eq!(lines[1]["result"]["protocolVersion"], "2025-06-18");
    line(&tx, r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#);
    let lines = out.wait_lines(3);
    assert_eq!(lines[2]["result"], json!({}));
    drop(tx);
    t.join().unwrap();

    let (tx, out, t) = stdio_server(EraMode::Legacy);
    line(&tx, &modern_body(1, "server/discover", json!({}), caps()));
    let lines = out.wait_lines(1);
    assert_eq!(
        lines[0]["error"]["code"], -32601,
        "a legacy server does not know server/discover"
    );
    drop(tx);
    t.join().unwrap();
}

// ---------------------------------------------------------------------------------------------
// Prompts, resources and subscriptions (Config::resources_and_prompts)
// ---------------------------------------------------------------------------------------------

fn catalog_mcp() -> McpServerHandle {
    McpServer::start_http(
        mcp_server::Config {
            resources_and_prompts: true,
            ..mcp_server::Config::default()
        },
        "127.0.0.1:0",
    )
    .unwrap()
}

#[test]
fn without_resources_and_prompts_their_methods_are_unknown_and_there_is_no_touch_tool() {
    let s = mcp(EraMode::Dual);
    for method in [
        "prompts/list",
        "prompts/get",
        "resources/read",
        "resources/templates/list",
        "subscriptions/listen",
    ] {
        // With the members their Mcp-Name header is built from.
        let params = json!({"name": "greet", "uri": "mcpwire-dev://greeting"});
        let r = modern_call(&s.url(), &modern_body(1, method, params, caps()), None);
        assert_eq!(
            (r.status, r.json()["error"]["code"].clone()),
            (404, json!(-32601)),
            "{method}"
        );
    }
    assert!(list_tools(&s.url()).iter().all(|t| t["name"] != "touch"));
    let r = modern_call(
        &s.url(),
        &modern_body(2, "server/discover", json!({}), caps()),
        None,
    );
    assert_eq!(r.json()["result"]["capabilities"], json!({"tools": {}}));
}

#[test]
fn with_resources_and_prompts_discover_names_them_and_their_change_notifications() {
    let s = catalog_mcp();
    let r = modern_call(
        &s.url(),
        &modern_body(1, "server/discover", json!({}), caps()),
        None,
    );
    assert_eq!(
        r.json()["result"]["capabilities"],
        json!({
            "tools": {"listChanged": true},
            "prompts": {"listChanged": true},
            "resources": {"subscribe": true, "listChanged": true}
        })
    );
    assert!(list_tools(&s.url()).iter().any(|t| t["name"] == "touch"));
}

/// `touch` until it reports `want` deliveries (a subscription is registered, or dropped, by
/// another thread); the last answer.
fn touch_until(url: &str, list: &str, want: u64) -> Value {
    let mut last = Value::Null;
    for _ in 0..500 {
        let r = modern_call(url, &call_body(9, "touch", json!({"list": list})), None);
        last = r.json();
        if last["result"]["structuredContent"]["delivered"] == want {
            return last;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("touch never delivered {want}: {last}");
}

#[test]
fn listen_is_acknowledged_carries_only_the_changes_asked_for_and_ends_with_a_result() {
    let s = catalog_mcp();
    let url = s.url();
    let body = modern_body(
        7,
        "subscriptions/listen",
        json!({"notifications": {
            "toolsListChanged": true,
            "resourceSubscriptions": ["mcpwire-dev://greeting", "file:///elsewhere"]
        }}),
        caps(),
    );
    let stream = std::thread::spawn(move || modern_call(&url, &body, None));
    touch_until(&s.url(), "tools", 1);
    // Not asked for: not delivered.
    touch_until(&s.url(), "prompts", 0);
    let r = modern_call(
        &s.url(),
        &call_body(10, "touch", json!({"uri": "mcpwire-dev://greeting"})),
        None,
    );
    assert_eq!(r.json()["result"]["structuredContent"]["delivered"], 1);
    assert_eq!(s.server().end_subscriptions(), 1);
    let r = stream.join().unwrap();
    assert_eq!(r.status, 200);
    assert!(
        r.header("Content-Type")
            .unwrap()
            .starts_with("text/event-stream"),
        "{:?}",
        r.headers
    );
    let m = r.sse_messages();
    let sid = json!({"io.modelcontextprotocol/subscriptionId": 7});
    assert_eq!(
        m[0],
        json!({
            "jsonrpc": "2.0",
            "method": "notifications/subscriptions/acknowledged",
            "params": {"_meta": sid, "notifications": {
                "toolsListChanged": true,
                "resourceSubscriptions": ["mcpwire-dev://greeting"]
            }}
        })
    );
    assert_eq!(
        m[1],
        json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {"_meta": sid}})
    );
    assert_eq!(
        m[2],
        json!({"jsonrpc": "2.0", "method": "notifications/resources/updated",
               "params": {"_meta": sid, "uri": "mcpwire-dev://greeting"}})
    );
    // The teardown notice a server MUST send for a listen it ends (`cancellation.mdx`), then
    // the graceful closure: a complete result for the listen request, with its id in _meta.
    assert_eq!(m[3]["method"], "notifications/cancelled", "{m:?}");
    assert_eq!(m[3]["params"]["requestId"], 7);
    assert_eq!(m[4]["id"], 7);
    assert_eq!(m[4]["result"]["resultType"], "complete");
    assert_eq!(
        m[4]["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        7
    );
    assert_eq!(m.len(), 5, "{m:?}");
}

#[test]
fn listen_ends_without_an_answer_when_its_client_goes_away() {
    let s = catalog_mcp();
    let body = modern_body(
        3,
        "subscriptions/listen",
        json!({"notifications": {"promptsListChanged": true}}),
        caps(),
    );
    let headers = request_headers(&body, None).unwrap();
    let mut conn = TcpStream::connect(s.local_addr()).unwrap();
    let mut head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n",
        s.local_addr(),
        body.len()
    );
    for (n, v) in headers.iter() {
        head.push_str(&format!("{n}: {v}\r\n"));
    }
    head.push_str("\r\n");
    conn.write_all(head.as_bytes()).unwrap();
    conn.write_all(body.as_bytes()).unwrap();
    touch_until(&s.url(), "prompts", 1);
    drop(conn);
    touch_until(&s.url(), "prompts", 0);
}

#[test]
fn stdio_listen_ends_on_notifications_cancelled_without_an_answer() {
    let (tx, rx) = mpsc::channel();
    let out = Shared::default();
    let server = McpServer::new(mcp_server::Config {
        resources_and_prompts: true,
        ..mcp_server::Config::default()
    });
    let out2 = out.clone();
    let t = std::thread::spawn(move || {
        server
            .serve_stdio(BufReader::new(Feed(rx, Vec::new())), out2)
            .unwrap();
    });
    let mut listen: Value = serde_json::from_str(&modern_body(
        1,
        "subscriptions/listen",
        json!({"notifications": {"resourcesListChanged": true}}),
        caps(),
    ))
    .unwrap();
    listen["id"] = json!("sub-1");
    line(&tx, &listen.to_string());
    let lines = out.wait_lines(1);
    assert_eq!(
        lines[0]["method"],
        "notifications/subscriptions/acknowledged"
    );
    assert_eq!(
        lines[0]["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "sub-1"
    );
    line(&tx, &call_body(2, "touch", json!({"list": "resources"})));
    let lines = out.wait_lines(3);
    let change = lines
        .iter()
        .find(|l| l["method"] == "notifications/resources/list_changed")
        .unwrap();
    assert_eq!(
        change["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "sub-1"
    );
    line(
        &tx,
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"sub-1"}}"#,
    );
    // Touched until the subscription is gone (each answer is one more line).
    let mut n = 3;
    loop {
        line(&tx, &call_body(3, "touch", json!({"list": "resources"})));
        n += 1;
        let lines = out.wait_lines(n);
        let last = lines.last().unwrap();
        if last["result"]["structuredContent"]["delivered"] == 0 {
            break;
        }
        assert!(n < 200, "the subscription never ended: {last}");
    }
    drop(tx);
    t.join().unwrap();
    let lines = out.lines();
    assert!(
        lines.iter().all(|l| l["id"] != "sub-1"),
        "a cancelled subscription gets no answer"
    );
    let changes = lines
        .iter()
        .filter(|l| l["method"] == "notifications/resources/list_changed")
        .count();
    assert_eq!(changes, 1, "nothing after the cancel: {lines:?}");
}

// ---------------------------------------------------------------------------------------------
// The control plane
// ---------------------------------------------------------------------------------------------

fn plane() -> ControlPlaneHandle {
    plane_with(|_| {})
}

fn plane_with(f: impl FnOnce(&mut control_plane::Config)) -> ControlPlaneHandle {
    let mut config = control_plane::Config::new(ApiKey::new(KEY).unwrap());
    config.max_poll_wait = Duration::from_secs(5);
    f(&mut config);
    ControlPlane::start(config, "127.0.0.1:0").unwrap()
}

const AUTH: (&str, &str) = ("Authorization", "Bearer sk-dev-test-key");

fn poll_url(cp: &ControlPlaneHandle, query: &str) -> String {
    format!("{}/v1/tunnels/{TUNNEL}/poll?{query}", cp.base_url())
}

fn response_url(cp: &ControlPlaneHandle) -> String {
    format!("{}/v1/tunnels/{TUNNEL}/response", cp.base_url())
}

/// Polls until a command arrives (bounded).
fn poll_commands(cp: &ControlPlaneHandle) -> Vec<Value> {
    for _ in 0..20 {
        let r = get(&poll_url(cp, "limit=25&timeout_ms=1000"), &[AUTH]);
        if r.status == 200 {
            return r.json()["commands"].as_array().unwrap().clone();
        }
        assert_eq!(r.status, 204, "{}", r.body);
    }
    panic!("no command polled");
}

/// POSTs a response for `cmd`.
fn respond(
    cp: &ControlPlaneHandle,
    cmd: &Value,
    resp_type: &str,
    code: u16,
    json: Option<Value>,
) -> Reply {
    let mut body = json!({
        "request_id": cmd["request_id"],
        "channel": cmd["channel"],
        "resp_headers": {"Content-Type": ["application/json"], "Mcp-Session-Id": ["s-1"]},
        "resp_code": code,
        "resp_type": resp_type,
    });
    if let Some(j) = json {
        body["resp_json"] = j;
    }
    let shard = cmd["shard_token"].as_str().unwrap_or_default().to_owned();
    post(
        &response_url(cp),
        &[AUTH, ("X-Tunnel-Shard-Token", &shard)],
        &body.to_string(),
    )
}

/// Starts an MCP request to the control plane on a thread.
fn mcp_client(
    cp: &ControlPlaneHandle,
    body: &str,
    headers: &[(&str, &str)],
) -> std::thread::JoinHandle<Reply> {
    let url = cp.mcp_url(TUNNEL);
    let body = body.to_owned();
    let headers: Vec<(String, String)> = headers
        .iter()
        .map(|(n, v)| ((*n).into(), (*v).into()))
        .collect();
    std::thread::spawn(move || {
        let refs: Vec<(&str, &str)> = headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect();
        post(&url, &refs, &body)
    })
}

#[test]
fn an_mcp_request_becomes_a_polled_command_and_its_response_comes_back() {
    let cp = plane();
    let body = r#"{"jsonrpc":"2.0","id":"rpc-1","method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#;
    let client = mcp_client(
        &cp,
        body,
        &[
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/list"),
            ("X-Private", "not forwarded"),
        ],
    );
    let r = get(&poll_url(&cp, "limit=25&timeout_ms=5000"), &[AUTH]);
    assert_eq!(r.status, 200, "{}", r.body);
    // The core's decoder reads the envelope.
    let decoded = decode_poll_body(r.body.as_bytes()).unwrap();
    assert_eq!(decoded.len(), 1);
    let cmd = decoded[0].as_ref().unwrap();
    assert_eq!(cmd.channel, "main");
    assert!(cmd.shard_token.is_some());
    assert_eq!(cmd.headers.get("mcp-method"), Some("tools/list"));
    assert_eq!(cmd.headers.get("mcp-protocol-version"), Some("2026-07-28"));
    assert!(!cmd.headers.contains("x-private"));
    let CommandKind::JsonRpc(payload) = &cmd.kind else {
        panic!()
    };
    assert_eq!(
        payload.get(),
        body,
        "the JSON-RPC payload travels byte for byte"
    );
    let raw = r.json()["commands"][0].clone();
    assert!(raw["created_at"].as_str().unwrap().ends_with('Z'));

    let result = json!({"jsonrpc": "2.0", "id": "rpc-1", "result": {"tools": []}});
    let ack = respond(&cp, &raw, "jsonrpc_response", 200, Some(result.clone()));
    assert_eq!((ack.status, ack.json()), (200, json!({"status": "ok"})));
    let answer = client.join().unwrap();
    assert_eq!(answer.status, 200);
    assert_eq!(answer.json(), result);
    assert_eq!(answer.header("mcp-session-id"), Some("s-1"));
    assert_eq!(answer.header("content-type"), Some("application/json"));
    // A second terminal response for the same command: no longer pending.
    assert_eq!(
        respond(&cp, &raw, "jsonrpc_response", 200, Some(result)).status,
        404
    );
}

#[test]
fn notify_posts_become_sse_events_before_the_terminal_response() {
    let cp = plane();
    let client = mcp_client(
        &cp,
        r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"progress"}}"#,
        &[],
    );
    let cmd = poll_commands(&cp).remove(0);
    for i in 1..=2 {
        let note = json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": "t", "progress": i}});
        assert_eq!(
            respond(&cp, &cmd, "jsonrpc_notify", 200, Some(note)).status,
            200
        );
    }
    let done = json!({"jsonrpc": "2.0", "id": 5, "result": {"content": []}});
    assert_eq!(
        respond(&cp, &cmd, "jsonrpc_response", 200, Some(done.clone())).status,
        200
    );
    let answer = client.join().unwrap();
    assert_eq!(answer.header("content-type"), Some("text/event-stream"));
    let messages = answer.sse_messages();
    assert_eq!(messages.len(), 3);
    assert_eq!(messages[0]["params"]["progress"], 1);
    assert_eq!(messages[1]["params"]["progress"], 2);
    assert_eq!(messages[2], done);
}

#[test]
fn an_unknown_request_id_is_404_and_a_wrong_shard_token_is_401() {
    let cp = plane();
    let ghost = json!({"request_id": "req_ghost", "shard_token": "s", "channel": "main"});
    let r = respond(
        &cp,
        &ghost,
        "jsonrpc_response",
        200,
        Some(json!({"jsonrpc":"2.0","id":1,"result":{}})),
    );
    assert_eq!(r.status, 404);
    assert_eq!(r.json()["error"]["code"], "pending_request_not_found");

    let client = mcp_client(&cp, r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#, &[]);
    let mut cmd = poll_commands(&cp).remove(0);
    let real = cmd.clone();
    cmd["shard_token"] = json!("shard_forged");
    let r = respond(
        &cp,
        &cmd,
        "jsonrpc_response",
        200,
        Some(json!({"jsonrpc":"2.0","id":1,"result":{}})),
    );
    assert_eq!(
        (r.status, r.json()["error"]["code"].clone()),
        (401, json!("tunnel_request_mismatch"))
    );
    assert_eq!(
        respond(
            &cp,
            &real,
            "jsonrpc_response",
            200,
            Some(json!({"jsonrpc":"2.0","id":1,"result":{}}))
        )
        .status,
        200
    );
    assert_eq!(client.join().unwrap().status, 200);
    // Every POST was recorded, refused ones too, with the status answered.
    let statuses: Vec<u16> = cp
        .plane()
        .responses(TUNNEL)
        .iter()
        .map(|r| r.status)
        .collect();
    assert_eq!(statuses, [404, 401, 200]);
}

#[test]
fn a_missing_or_wrong_api_key_is_401_on_every_tunnel_endpoint() {
    let cp = plane();
    for auth in [None, Some("Bearer wrong"), Some("Basic sk-dev-test-key")] {
        let h: Vec<(&str, &str)> = auth.map(|a| ("Authorization", a)).into_iter().collect();
        let r = get(&poll_url(&cp, "timeout_ms=1"), &h);
        assert_eq!(r.status, 401);
        assert!(r.json()["error"]["message"].is_string());
        assert!(!r.body.contains(KEY));
        assert_eq!(post(&response_url(&cp), &h, "{}").status, 401);
        assert_eq!(
            get(&format!("{}/v1/tunnels/{TUNNEL}", cp.base_url()), &h).status,
            401
        );
        assert_eq!(
            get(
                &format!("{}/admin/tunnels/{TUNNEL}/responses", cp.base_url()),
                &h
            )
            .status,
            401
        );
    }
    assert_eq!(
        get(&format!("{}/v1/tunnels/{TUNNEL}", cp.base_url()), &[AUTH]).json()["id"],
        TUNNEL
    );
}

#[test]
fn an_injected_429_carries_retry_after_and_the_retry_is_accepted() {
    let cp = plane();
    let client = mcp_client(&cp, r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#, &[]);
    let cmd = poll_commands(&cp).remove(0);
    // Injected over the admin API, as an out-of-process test would.
    let r = post(
        &format!("{}/admin/faults", cp.base_url()),
        &[AUTH],
        r#"{"endpoint":"response","status":429,"retry_after":"2","count":1}"#,
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let result = json!({"jsonrpc": "2.0", "id": 1, "result": {}});
    let first = respond(&cp, &cmd, "jsonrpc_response", 200, Some(result.clone()));
    assert_eq!(first.status, 429);
    assert_eq!(first.header("retry-after"), Some("2"));
    assert_eq!(first.json()["error"]["code"], "rate_limit_exceeded");
    let second = respond(&cp, &cmd, "jsonrpc_response", 200, Some(result.clone()));
    assert_eq!(second.status, 200);
    assert_eq!(client.join().unwrap().json(), result);
    let recorded = cp.plane().responses(TUNNEL);
    assert_eq!(recorded.len(), 2);
    assert_eq!(
        recorded[0].body, recorded[1].body,
        "the same body, both recorded"
    );
    assert_eq!(
        recorded[0].shard_token,
        cmd["shard_token"].as_str().map(str::to_owned)
    );
    // Listed over the admin API too.
    let listed = get(
        &format!("{}/admin/tunnels/{TUNNEL}/responses", cp.base_url()),
        &[AUTH],
    )
    .json();
    assert_eq!(listed["responses"].as_array().unwrap().len(), 2);
    assert_eq!(listed["responses"][0]["status"], 429);
}

#[test]
fn an_injected_503_applies_to_the_next_n_posts_only() {
    let cp = plane();
    cp.plane()
        .inject_fault(Endpoint::Response, Fault::new(503, Some("1"), Some(2)));
    let ghost = json!({"request_id": "r", "shard_token": "s"});
    let statuses: Vec<u16> = (0..3)
        .map(|_| respond(&cp, &ghost, "jsonrpc_response", 200, None).status)
        .collect();
    assert_eq!(statuses, [503, 503, 404]);
}

#[test]
fn polls_can_be_answered_401_until_cleared() {
    let cp = plane();
    cp.plane()
        .inject_fault(Endpoint::Poll, Fault::new(401, None, None));
    for _ in 0..3 {
        assert_eq!(get(&poll_url(&cp, "timeout_ms=1"), &[AUTH]).status, 401);
    }
    assert_eq!(
        delete(&format!("{}/admin/faults", cp.base_url()), &[AUTH]).status,
        200
    );
    assert_eq!(get(&poll_url(&cp, "timeout_ms=1"), &[AUTH]).status, 204);
    let polls = cp.plane().polls(TUNNEL);
    assert_eq!(
        polls.iter().map(|p| p.status).collect::<Vec<_>>(),
        [401, 401, 401, 204]
    );
    assert!(polls
        .iter()
        .all(|p| p.headers.iter().all(|(_, v)| !v.contains(KEY))));
}

#[test]
fn thirty_raw_commands_arrive_in_one_poll() {
    let cp = plane();
    let commands: Vec<Value> = (0..30)
        .map(|i| json!({"request_id": format!("req_{i}"), "shard_token": format!("sh_{i}"), "command_type": "jsonrpc", "jsonrpc": {"jsonrpc": "2.0", "id": i, "method": "ping"}}))
        .collect();
    let r = post(
        &format!("{}/admin/settings", cp.base_url()),
        &[AUTH],
        r#"{"poll_batch":30}"#,
    );
    assert_eq!(r.status, 200);
    let r = post(
        &format!("{}/admin/tunnels/{TUNNEL}/commands", cp.base_url()),
        &[AUTH],
        &json!({"commands": commands}).to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["request_ids"].as_array().unwrap().len(), 30);
    let polled = get(&poll_url(&cp, "limit=25&timeout_ms=1000"), &[AUTH]);
    let decoded = decode_poll_body(polled.body.as_bytes()).unwrap();
    assert_eq!(decoded.len(), 30);
    assert_eq!(cp.plane().polls(TUNNEL)[0].delivered.len(), 30);
    // Each is pending and answerable with its own shard token, in any order.
    let cmd = json!({"request_id": "req_29", "shard_token": "sh_29"});
    assert_eq!(
        respond(
            &cp,
            &cmd,
            "jsonrpc_response",
            200,
            Some(json!({"jsonrpc":"2.0","id":29,"result":{}}))
        )
        .status,
        200
    );
    let (pending, queued) = cp.plane().pending(TUNNEL);
    assert_eq!((pending.len(), queued), (29, 0));
}

#[test]
fn the_response_timeout_header_reaches_the_command_and_an_unanswered_command_expires() {
    let cp = plane_with(|c| c.expiry_grace = Duration::from_millis(20));
    // 2 s: the poll below must take the command before it expires, on a loaded machine too.
    let client = mcp_client(
        &cp,
        r#"{"jsonrpc":"2.0","id":"late","method":"ping"}"#,
        &[("X-Mcpwire-Response-Timeout", "2s")],
    );
    let cmd = poll_commands(&cp).remove(0);
    assert_eq!(cmd["response_timeout"], "2s");
    let answer = client.join().unwrap();
    assert_eq!(answer.status, 504);
    assert_eq!(answer.json()["id"], "late");
    // Dropped: a late response is refused and nothing is pending.
    assert_eq!(
        respond(
            &cp,
            &cmd,
            "jsonrpc_response",
            200,
            Some(json!({"jsonrpc":"2.0","id":"late","result":{}}))
        )
        .status,
        404
    );
    assert!(cp.plane().pending(TUNNEL).0.is_empty());

    // A malformed value is copied verbatim (the client fails open on it).
    let client = mcp_client(
        &cp,
        r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#,
        &[("X-Mcpwire-Response-Timeout", "4.5s")],
    );
    let cmd = poll_commands(&cp).remove(0);
    assert_eq!(cmd["response_timeout"], "4.5s");
    respond(
        &cp,
        &cmd,
        "jsonrpc_response",
        200,
        Some(json!({"jsonrpc":"2.0","id":2,"result":{}})),
    );
    assert_eq!(client.join().unwrap().status, 200);
}

#[test]
fn delete_becomes_a_session_termination_command() {
    let cp = plane();
    let url = cp.mcp_url(TUNNEL);
    let r = delete(&url, &[]);
    assert_eq!(
        (r.status, r.json()["error"]["code"].clone()),
        (400, json!("missing_mcp_session_id"))
    );
    let t = std::thread::spawn(move || delete(&url, &[("Mcp-Session-Id", "sess-9")]));
    let cmd = poll_commands(&cp).remove(0);
    assert_eq!(cmd["command_type"], "session_termination");
    assert!(cmd.get("jsonrpc").is_none());
    assert_eq!(cmd["headers"]["Mcp-Session-Id"], json!(["sess-9"]));
    assert_eq!(
        respond(&cp, &cmd, "session_termination_response", 204, None).status,
        200
    );
    let answer = t.join().unwrap();
    assert_eq!(answer.status, 204);
    assert_eq!(answer.body, "");
}

#[test]
fn a_notification_is_acknowledged_with_202() {
    let cp = plane();
    let client = mcp_client(
        &cp,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        &[],
    );
    let cmd = poll_commands(&cp).remove(0);
    assert_eq!(respond(&cp, &cmd, "notify_ack", 202, None).status, 200);
    let answer = client.join().unwrap();
    assert_eq!((answer.status, answer.body.as_str()), (202, ""));
}

#[test]
fn polls_are_checked_and_filtered_by_channel() {
    let cp = plane();
    assert_eq!(get(&poll_url(&cp, "limit=26"), &[AUTH]).status, 400);
    assert_eq!(get(&poll_url(&cp, "limit=0"), &[AUTH]).status, 400);
    assert_eq!(get(&poll_url(&cp, "timeout_ms=0"), &[AUTH]).status, 400);
    let bad = get(
        &format!("{}/v1/tunnels/bad%2Fid/poll", cp.base_url()),
        &[AUTH],
    );
    assert_eq!(
        (bad.status, bad.json()["error"]["code"].clone()),
        (400, json!("invalid_tunnel_id_format"))
    );
    let r = get(&poll_url(&cp, "timeout_ms=20"), &[AUTH]);
    assert_eq!((r.status, r.body.as_str()), (204, ""));

    cp.plane()
        .enqueue_raw(TUNNEL, vec![json!({"request_id": "a", "channel": "side", "command_type": "jsonrpc", "jsonrpc": {"jsonrpc":"2.0","id":1,"method":"ping"}})])
        .unwrap();
    assert_eq!(
        get(&poll_url(&cp, "channel=main&timeout_ms=20"), &[AUTH]).status,
        204
    );
    let r = get(
        &poll_url(&cp, "channel=main&channel=side&timeout_ms=20"),
        &[AUTH],
    );
    assert_eq!(r.json()["commands"][0]["request_id"], "a");
}

#[test]
fn the_cloudflare_runtime_is_404_unless_configured_and_never_cached() {
    let cp = plane();
    let url = format!("{}/v1/tunnels/{TUNNEL}/cloudflare/runtime", cp.base_url());
    let r = get(&url, &[AUTH]);
    assert_eq!(r.status, 404);
    assert_eq!(r.header("cache-control"), Some("no-store"));
    cp.plane()
        .set_cloudflare_runtime_token(Some(ApiKey::new("cf-runtime-token").unwrap()));
    let r = get(&url, &[AUTH]);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("cache-control"), Some("no-store"));
    assert_eq!(r.json()["runtime_token"], "cf-runtime-token");
    assert!(r.json()["cloudflare_tunnel"]["account_id"].is_string());
    cp.plane()
        .inject_fault(Endpoint::CloudflareRuntime, Fault::new(403, None, Some(1)));
    assert_eq!(get(&url, &[AUTH]).status, 403);
}

#[test]
fn a_malformed_response_body_is_400_and_get_on_the_mcp_endpoint_is_405() {
    let cp = plane();
    let r = post(&response_url(&cp), &[AUTH], "[1,2]");
    assert_eq!(
        (r.status, r.json()["error"]["code"].clone()),
        (400, json!("invalid_json_payload"))
    );
    let r = post(
        &response_url(&cp),
        &[AUTH],
        r#"{"request_id":"x","resp_code":200,"channel":"Bad Channel"}"#,
    );
    assert_eq!(
        (r.status, r.json()["error"]["code"].clone()),
        (400, json!("invalid_channel_format"))
    );
    assert_eq!(get(&cp.mcp_url(TUNNEL), &[]).status, 405);
    let r = post(&cp.mcp_url(TUNNEL), &[], "not json");
    assert_eq!(
        (r.status, r.json()["error"]["code"].clone()),
        (400, json!("invalid_json_payload"))
    );
}

#[test]
fn a_response_body_past_the_bound_is_413() {
    let cp = plane_with(|c| c.max_response_body = 1024);
    let big = format!(
        r#"{{"request_id":"x","resp_code":200,"resp_json":"{}"}}"#,
        "a".repeat(2048)
    );
    let r = post(&response_url(&cp), &[AUTH], &big);
    assert_eq!(
        (r.status, r.json()["error"]["code"].clone()),
        (413, json!("request_body_too_large"))
    );
}

#[test]
fn waiting_for_a_terminal_response_over_the_admin_api() {
    let cp = plane();
    let base = cp.base_url();
    let client = mcp_client(&cp, r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#, &[]);
    let cmd = poll_commands(&cp).remove(0);
    let id = cmd["request_id"].as_str().unwrap().to_owned();
    let waiter = std::thread::spawn(move || {
        get(
            &format!(
                "{base}/admin/tunnels/{TUNNEL}/responses?request_id={id}&terminal=1&wait_ms=5000"
            ),
            &[AUTH],
        )
    });
    respond(
        &cp,
        &cmd,
        "jsonrpc_notify",
        200,
        Some(json!({"jsonrpc":"2.0","method":"notifications/message","params":{}})),
    );
    respond(
        &cp,
        &cmd,
        "jsonrpc_response",
        200,
        Some(json!({"jsonrpc":"2.0","id":1,"result":{}})),
    );
    let listed = waiter.join().unwrap().json();
    let responses = listed["responses"].as_array().unwrap();
    assert_eq!(responses.len(), 1, "{listed}");
    assert_eq!(responses[0]["resp_type"], "jsonrpc_response");
    client.join().unwrap();
}

#[test]
fn stopping_the_control_plane_answers_waiting_polls_and_mcp_requests() {
    let mut cp = plane();
    // The poll waits on another channel, so it cannot take the MCP request's command: both
    // are still waiting when the control plane stops.
    let url = poll_url(&cp, "timeout_ms=20000&channel=elsewhere");
    let poller = std::thread::spawn(move || get(&url, &[AUTH]));
    let client = mcp_client(&cp, r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#, &[]);
    // Let both requests arrive (bounded), then stop.
    let start = Instant::now();
    while cp.plane().pending(TUNNEL).0.is_empty() && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(
        cp.plane().pending(TUNNEL).0.len(),
        1,
        "the MCP request was pending before the stop"
    );
    // The poll (sent first) has had a moment to start waiting.
    std::thread::sleep(Duration::from_millis(100));
    let stopped = Instant::now();
    cp.stop();
    let poll = poller.join().unwrap();
    // Woken by the stop, not by its 20 s wait running out (a bound, not a timing).
    assert!(
        stopped.elapsed() < Duration::from_secs(10),
        "{:?}",
        stopped.elapsed()
    );
    assert_eq!(poll.status, 503, "{}", poll.body);
    assert_eq!(poll.header("retry-after"), Some("1"));
    assert!(poll.body.contains("stopping"), "{}", poll.body);
    let answer = client.join().unwrap();
    assert_eq!(answer.status, 503, "{}", answer.body);
    assert_eq!(answer.header("retry-after"), Some("1"));
    assert!(answer.body.contains("stopping"), "{}", answer.body);
    assert!(cp.plane().pending(TUNNEL).0.is_empty());
}

/// The whole path on loopback: an MCP client → the control plane → a relay loop standing in
/// for a tunnel client → the reference server, and back, with progress as SSE.
#[test]
fn the_control_plane_and_the_reference_server_work_together() {
    let cp = plane();
    let server = mcp(EraMode::Dual);
    let meta = RequestMeta::new("2026-07-28", caps()).with_progress_token("p".into());
    let body = build_request(
        &1.into(),
        "tools/call",
        json!({"name": "progress", "arguments": {"steps": 3, "interval_ms": 1}}),
        &meta,
    )
    .unwrap();
    let h = request_headers(&body, None).unwrap();
    let pairs: Vec<(String, String)> = h.iter().map(|(n, v)| (n.into(), v.into())).collect();
    let refs: Vec<(&str, &str)> = pairs
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    let client = mcp_client(&cp, &body, &refs);

    // The relay: poll, forward with the command's headers, post each SSE message back.
    let cmd = poll_commands(&cp).remove(0);
    let fwd: Vec<(String, String)> = cmd["headers"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(n, vs)| {
            vs.as_array()
                .unwrap()
                .iter()
                .map(move |v| (n.clone(), v.as_str().unwrap().to_owned()))
        })
        .collect();
    let fwd_refs: Vec<(&str, &str)> = fwd.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    let upstream = post(&server.url(), &fwd_refs, &cmd["jsonrpc"].to_string());
    assert_eq!(upstream.status, 200, "{}", upstream.body);
    let messages = upstream.sse_messages();
    for m in &messages {
        let kind = if m.get("id").is_some() {
            "jsonrpc_response"
        } else {
            "jsonrpc_notify"
        };
        assert_eq!(respond(&cp, &cmd, kind, 200, Some(m.clone())).status, 200);
    }
    let answer = client.join().unwrap();
    let relayed = answer.sse_messages();
    assert_eq!(relayed, messages);
    assert_eq!(relayed.len(), 4);
    assert_eq!(
        relayed[3]["result"]["content"][0]["text"],
        "done after 3 steps"
    );
}

// ---------------------------------------------------------------------------------------------
// The binary
// ---------------------------------------------------------------------------------------------

#[test]
fn dev_help_explains_each_server() {
    let bin = env!("CARGO_BIN_EXE_mcpwire");
    let run = |args: &[&str]| {
        let out = std::process::Command::new(bin).args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let dev = run(&["dev", "--help"]);
    assert!(
        dev.contains("mcp-server") && dev.contains("control-plane"),
        "{dev}"
    );
    let server = run(&["dev", "mcp-server", "--help"]);
    for needle in [
        "reference MCP server",
        "2026-07-28",
        "--stdio",
        "--listen",
        "--era",
        "progress",
        "Mcp-Param-Region",
    ] {
        assert!(server.contains(needle), "missing {needle:?} in:\n{server}");
    }
    let plane = run(&["dev", "control-plane", "--help"]);
    for needle in [
        "control plane",
        "/v1/tunnels/{id}/poll",
        "/v1/mcp/{id}",
        "X-Mcpwire-Response-Timeout",
        "/admin/faults",
        "--api-key",
    ] {
        assert!(plane.contains(needle), "missing {needle:?} in:\n{plane}");
    }
}

#[test]
fn dev_servers_refuse_bad_flags_with_one_clear_line() {
    let bin = env!("CARGO_BIN_EXE_mcpwire");
    let out = std::process::Command::new(bin)
        .args([
            "dev",
            "control-plane",
            "--listen",
            "127.0.0.1:0",
            "--api-key",
            "env:MCPWIRE_TEST_SURELY_UNSET_VAR",
        ])
        .env_remove("MCPWIRE_TEST_SURELY_UNSET_VAR")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("--api-key") && err.contains("MCPWIRE_TEST_SURELY_UNSET_VAR"),
        "{err}"
    );
    let out = std::process::Command::new(bin)
        .args(["dev", "mcp-server", "--listen", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8(out.stderr).unwrap().contains("loopback"));
    let out = std::process::Command::new(bin)
        .args(["dev", "mcp-server"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "--listen or --stdio is required"
    );
}

#[test]
fn the_stdio_server_binary_answers_lines_and_exits_at_end_of_input() {
    let bin = env!("CARGO_BIN_EXE_mcpwire");
    let mut child = std::process::Command::new(bin)
        .args(["dev", "mcp-server", "--stdio"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(
        stdin,
        "{}",
        call_body(1, "echo", json!({"text": "from a process"}))
    )
    .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    let v: Value = serde_json::from_str(&first).unwrap();
    assert_eq!(v["result"]["content"][0]["text"], "from a process");
    drop(stdin);
    let status = child.wait().unwrap();
    assert!(status.success());
}

#[test]
fn the_control_plane_binary_prints_its_address_and_serves() {
    let bin = env!("CARGO_BIN_EXE_mcpwire");
    let mut child = std::process::Command::new(bin)
        .args([
            "dev",
            "control-plane",
            "--listen",
            "127.0.0.1:0",
            "--api-key",
            "env:MCPWIRE_DEV_TEST_KEY",
        ])
        .env("MCPWIRE_DEV_TEST_KEY", KEY)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    let base = first
        .strip_prefix("listening on ")
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("{first}"))
        .to_owned();
    let r = get(
        &format!("{base}/v1/tunnels/{TUNNEL}/poll?timeout_ms=1"),
        &[AUTH],
    );
    assert_eq!(r.status, 204);
    child.kill().unwrap();
    let _ = child.wait();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(!err.contains(KEY) && !first.contains(KEY));
}

// ---------------------------------------------------------------------------------------------
// The HTTP layer, over raw sockets
// ---------------------------------------------------------------------------------------------

fn mcp_with_limits(f: impl FnOnce(&mut mcpwire_dev::http::Limits)) -> McpServerHandle {
    let mut config = mcp_server::Config::default();
    f(&mut config.limits);
    McpServer::start_http(config, "127.0.0.1:0").unwrap()
}

/// Writes `bytes` and reads until the server closes (bounded by a read timeout).
fn raw_exchange(addr: std::net::SocketAddr, bytes: &[u8]) -> String {
    let mut conn = TcpStream::connect(addr).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    conn.write_all(bytes).unwrap();
    let mut out = Vec::new();
    let _ = conn.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

fn raw_post(body: &str, extra: &str) -> String {
    let h = request_headers(body, None).unwrap();
    let mut text = format!("POST /mcp HTTP/1.1\r\nHost: x\r\n{extra}");
    for (n, v) in h.iter() {
        text.push_str(&format!("{n}: {v}\r\n"));
    }
    text
}

#[test]
fn keep_alive_serves_pipelined_requests_on_one_connection() {
    let s = mcp(EraMode::Dual);
    let a = call_body(1, "echo", json!({"text": "first"}));
    let b = call_body(2, "echo", json!({"text": "second"}));
    let mut bytes = raw_post(&a, "") + &format!("Content-Length: {}\r\n\r\n{a}", a.len());
    bytes += &(raw_post(&b, "Connection: close\r\n")
        + &format!("Content-Length: {}\r\n\r\n{b}", b.len()));
    let out = raw_exchange(s.local_addr(), bytes.as_bytes());
    assert_eq!(out.matches("HTTP/1.1 200 OK").count(), 2, "{out}");
    let first = out.find("first").unwrap();
    let second = out.find("second").unwrap();
    assert!(first < second, "answered in order");
    assert!(out.contains("Connection: close"));
}

#[test]
fn a_chunked_request_body_is_read_and_expect_100_continue_is_answered() {
    let s = mcp(EraMode::Dual);
    let body = call_body(1, "echo", json!({"text": "chunked"}));
    let (x, y) = body.split_at(10);
    let mut bytes = raw_post(&body, "Transfer-Encoding: chunked\r\nConnection: close\r\n") + "\r\n";
    bytes += &format!(
        "{:x};ext=1\r\n{x}\r\n{:X}\r\n{y}\r\n0\r\nTrailer: t\r\n\r\n",
        x.len(),
        y.len()
    );
    let out = raw_exchange(s.local_addr(), bytes.as_bytes());
    assert!(out.starts_with("HTTP/1.1 200 OK"), "{out}");
    assert!(out.contains("\"text\":\"chunked\""), "{out}");

    // Expect: 100-continue: the interim answer comes before the body is sent.
    let mut conn = TcpStream::connect(s.local_addr()).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let head = raw_post(&body, "Expect: 100-continue\r\nConnection: close\r\n")
        + &format!("Content-Length: {}\r\n\r\n", body.len());
    conn.write_all(head.as_bytes()).unwrap();
    let mut interim = [0u8; 25];
    conn.read_exact(&mut interim).unwrap();
    assert_eq!(&interim, b"HTTP/1.1 100 Continue\r\n\r\n");
    conn.write_all(body.as_bytes()).unwrap();
    let mut rest = String::new();
    let _ = conn.read_to_string(&mut rest);
    assert!(rest.starts_with("HTTP/1.1 200 OK"), "{rest}");
}

#[test]
fn oversized_and_malformed_requests_are_refused_with_their_status() {
    let s = mcp_with_limits(|l| {
        l.max_body = 1024;
        l.max_head = 2048;
    });
    let addr = s.local_addr();
    let big = "x".repeat(2000);
    let out = raw_exchange(
        addr,
        format!(
            "POST /mcp HTTP/1.1\r\nContent-Length: {}\r\n\r\n{big}",
            big.len()
        )
        .as_bytes(),
    );
    assert!(out.starts_with("HTTP/1.1 413"), "{out}");
    let out = raw_exchange(
        addr,
        b"POST /mcp HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n800\r\n",
    );
    assert!(out.starts_with("HTTP/1.1 413"), "{out}");
    let out = raw_exchange(
        addr,
        format!("GET /mcp HTTP/1.1\r\nX-Long: {}\r\n\r\n", "y".repeat(4000)).as_bytes(),
    );
    assert!(out.starts_with("HTTP/1.1 431"), "{out}");
    let out = raw_exchange(addr, b"NOT HTTP AT ALL\r\n\r\n");
    assert!(out.starts_with("HTTP/1.1 400"), "{out}");
    let out = raw_exchange(
        addr,
        b"POST /mcp HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n12345",
    );
    assert!(out.starts_with("HTTP/1.1 400"), "{out}");
    let out = raw_exchange(
        addr,
        b"POST /mcp HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
    );
    assert!(out.starts_with("HTTP/1.1 501"), "{out}");
    let out = raw_exchange(
        addr,
        b"POST /mcp HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    );
    assert!(out.starts_with("HTTP/1.1 400"), "{out}");
    // The server is still serving.
    assert_eq!(get(&s.url(), &[]).status, 405);
}

#[test]
fn connections_past_the_bound_are_answered_503() {
    let s = mcp_with_limits(|l| l.max_connections = 1);
    let idle = TcpStream::connect(s.local_addr()).unwrap();
    // Wait (bounded) until the idle connection is counted: a second one is then refused.
    let start = Instant::now();
    let mut out = String::new();
    while start.elapsed() < Duration::from_secs(10) {
        out = raw_exchange(
            s.local_addr(),
            b"GET /mcp HTTP/1.1\r\nConnection: close\r\n\r\n",
        );
        if out.starts_with("HTTP/1.1 503") {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(out.starts_with("HTTP/1.1 503"), "{out}");
    assert!(out.contains("Retry-After: 1"));
    drop(idle);
}

#[test]
fn echo_adds_the_response_headers_it_is_given_with_connection_nominations() {
    let s = mcp(EraMode::Dual);
    let body = call_body(
        1,
        "echo",
        json!({"text": "h", "response_headers": {
            "X-Extra": "1",
            "Set-Cookie": ["a=1", "b=2"],
            "Connection": "X-Hop",
            "X-Hop": "hop"
        }}),
    );
    let bytes = raw_post(&body, "Connection: close\r\n")
        + &format!("Content-Length: {}\r\n\r\n{body}", body.len());
    let out = raw_exchange(s.local_addr(), bytes.as_bytes());
    let head = out.split("\r\n\r\n").next().unwrap();
    for line in [
        "X-Extra: 1",
        "Set-Cookie: a=1",
        "Set-Cookie: b=2",
        "X-Hop: hop",
        "Connection: X-Hop, close",
    ] {
        assert!(
            head.lines().any(|l| l == line),
            "missing {line:?} in:\n{head}"
        );
    }
    let bad = call_body(
        2,
        "echo",
        json!({"text": "h", "response_headers": {"Bad Name": "x"}}),
    );
    assert_eq!(
        modern_call(&s.url(), &bad, None).json()["error"]["code"],
        -32602
    );
}

#[test]
fn an_http_1_0_client_gets_its_answer_and_the_connection_closes() {
    let s = mcp(EraMode::Dual);
    let out = raw_exchange(s.local_addr(), b"GET /mcp HTTP/1.0\r\n\r\n");
    assert!(out.starts_with("HTTP/1.1 405"), "{out}");
    let out = raw_exchange(s.local_addr(), b"HEAD /mcp HTTP/1.0\r\n\r\n");
    assert!(
        out.starts_with("HTTP/1.1 405") && out.ends_with("\r\n\r\n"),
        "no body for HEAD: {out:?}"
    );
}

/// The stdio server writes a short answer from the thread that made it when stdout has room,
/// and through its writer thread otherwise: with stdout left unread until the pipe is full
/// (and the writer thread blocked), then read, every answer still arrives once, whole, as a
/// line of its own, and the server never stopped reading stdin while it could.
#[test]
fn stdio_answers_stay_whole_lines_when_stdout_fills_up_and_drains() {
    use std::process::{Command, Stdio};
    const N: i64 = 3000;
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcpwire"))
        .args(["dev", "mcp-server", "--stdio"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    // Each answer is a few hundred bytes: 3000 of them are several times a 64 KiB pipe.
    let writer = std::thread::spawn(move || {
        for id in 1..=N {
            let body = call_body(
                id,
                "echo",
                json!({"text": format!("answer-{id:05}-{}", "z".repeat(200))}),
            );
            stdin.write_all(body.as_bytes()).unwrap();
            stdin.write_all(b"\n").unwrap();
        }
        stdin
    });
    // Nobody reads stdout for a while: the pipe fills, the direct writes stop, the writer
    // thread blocks, and the server keeps taking stdin (its backlog is far from its bound).
    std::thread::sleep(Duration::from_millis(800));
    let stdin = writer.join().unwrap();
    let mut seen = std::collections::BTreeSet::new();
    let mut echoed = 0;
    for line in BufReader::new(stdout).lines() {
        let line = line.unwrap();
        let v: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("not one whole JSON line ({e}): {line:.200}"));
        let id = v["id"].as_i64().unwrap();
        match v["result"]["content"][0]["text"].as_str() {
            Some(text) => {
                assert!(
                    text.starts_with(&format!("answer-{id:05}-")),
                    "{id}: {text:.40}"
                );
                echoed += 1;
            }
            // While answers wait for stdout the server's bound on requests in flight (64)
            // refuses the rest, as a whole line too.
            None => assert_eq!(v["error"]["code"], -32000, "{line:.300}"),
        }
        assert!(seen.insert(id), "answer {id} twice");
        if seen.len() == N as usize {
            break;
        }
    }
    assert_eq!(seen.len(), N as usize);
    assert!(echoed >= 64, "only {echoed} answers echoed");
    drop(stdin);
    assert!(child.wait().unwrap().success());
}

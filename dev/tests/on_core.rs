//! The reference server on the core's server engine: what rides on the driver's
//! extension points rather than the protocol — `fail`'s HTTP status and raw body and `echo`'s
//! response headers (`Responder::override_http`), `/` as an alias of `/mcp`, other paths `404`,
//! the request log and counters (the `HttpHook`), and `touch` reporting how many listen
//! streams the core told.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use mcpwire_core::mcp::headers::request_headers;
use mcpwire_core::mcp::meta::{build_request, ClientCapabilities, RequestMeta};
use mcpwire_dev::mcp_server::{Config, McpServer};
use serde_json::{json, Value};

fn call(id: i64, tool: &str, arguments: Value) -> String {
    let meta = RequestMeta::new("2026-07-28", ClientCapabilities::none());
    build_request(
        &id.into(),
        "tools/call",
        json!({"name": tool, "arguments": arguments}),
        &meta,
    )
    .unwrap()
}

/// POSTs `body` to `path` over HTTP/1.0; the status line, the head and the body.
fn post(addr: SocketAddr, path: &str, body: &str) -> (u16, String, String) {
    let mut head = format!("POST {path} HTTP/1.0\r\nHost: localhost\r\n");
    for (name, value) in request_headers(body, None).unwrap().iter() {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body.as_bytes()).unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    let status = head[9..12].parse().unwrap();
    (status, head.to_owned(), body.to_owned())
}

fn core() -> Config {
    Config::default()
}

#[test]
fn fail_and_echo_shape_their_own_http_answers() {
    let mut h = McpServer::start_http(core(), "127.0.0.1:0").unwrap();
    let addr = h.local_addr();
    let (status, _, body) = post(addr, "/mcp", &call(1, "fail", json!({"http_status": 502})));
    assert_eq!(status, 502);
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["error"]["code"], mcpwire_dev::mcp_server::FAIL_CODE);
    assert_eq!(v["error"]["data"], mcpwire_dev::mcp_server::fail_data());
    let (status, head, body) = post(
        addr,
        "/mcp",
        &call(2, "fail", json!({"http_status": 503, "raw_body": "down"})),
    );
    assert_eq!((status, body.as_str()), (503, "down"));
    assert!(head.contains("text/plain"), "{head}");
    let (status, head, _) = post(
        addr,
        "/",
        &call(
            3,
            "echo",
            json!({"text": "h", "response_headers": {"X-Extra": "1", "Connection": "X-Hop", "X-Hop": "hop"}}),
        ),
    );
    assert_eq!(status, 200);
    for line in ["X-Extra: 1", "X-Hop: hop", "Connection: X-Hop, close"] {
        assert!(head.lines().any(|l| l == line), "{line} in {head}");
    }
    let (status, _, _) = post(addr, "/elsewhere", &call(4, "echo", json!({"text": "h"})));
    assert_eq!(status, 404);
    let stats = h.server().stats();
    assert_eq!(stats.tool_calls["fail"], 2);
    assert_eq!(stats.messages, 3);
    let methods: Vec<_> = h
        .server()
        .requests()
        .into_iter()
        .map(|r| (r.http_method, r.method))
        .collect();
    assert_eq!(methods.len(), 3, "{methods:?}");
    assert!(methods
        .iter()
        .all(|(m, rpc)| m == "POST" && rpc.as_deref() == Some("tools/call")));
    h.stop();
}

#[test]
fn touch_says_how_many_subscriptions_it_told() {
    let mut h = McpServer::start_http(
        Config {
            resources_and_prompts: true,
            ..core()
        },
        "127.0.0.1:0",
    )
    .unwrap();
    let (status, _, body) = post(
        h.local_addr(),
        "/mcp",
        &call(1, "touch", json!({"list": "tools"})),
    );
    assert_eq!(status, 200);
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["result"]["structuredContent"]["delivered"], 0);
    assert_eq!(h.server().end_subscriptions(), 0);
    h.stop();
}

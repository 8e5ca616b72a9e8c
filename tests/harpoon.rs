//! Harpoon end to end on 127.0.0.1: the dev control plane addresses the reserved `harpoon`
//! channel (`POST /v1/mcp/{id}?channel=harpoon`), the tunnel client (each driver, configured
//! as `mcpwire tunnel run --harpoon.target ...` configures it) serves Harpoon's MCP server, and
//! loopback HTTP targets record exactly what reaches them. OAuth discovery runs against the
//! dev protected MCP server and its authorization server. Waits are bounded; nothing asserts a
//! duration.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use base64::Engine as _;
use mcpwire_core::mcp::headers::request_headers;
use mcpwire_core::tunnel::server_info::{ServerInfo, HEADER_NAME};
use mcpwire_dev::auth_server::AuthConfig;
use mcpwire_dev::control_plane::{ControlPlaneHandle, RESPONSE_TIMEOUT_HEADER};
use mcpwire_dev::mcp_server::{self, McpServer};
use serde_json::{json, Value};
use support::*;

each_driver!(
    harpoon_answers_initialize_tools_list_and_list_targets_without_urls,
    call_target_reaches_exactly_the_registered_url_with_filtered_headers,
    redirects_are_followed_only_to_registered_urls,
    an_oversized_body_is_refused_and_json_urls_are_rewritten,
    a_deadline_cancels_the_outbound_call_and_the_next_call_is_served,
    timeout_ms_ends_a_hung_call_and_the_next_call_is_served,
    the_server_info_header_declares_harpoon_only_while_it_has_targets,
    harpoon_is_served_alone_on_its_channel,
    oauth_discovery_registers_the_authorization_servers_endpoints,
    oauth_discovery_follows_the_host_switches,
);

// ---------------------------------------------------------------------------------------------
// Recording HTTP targets

/// A request a target received.
#[derive(Clone, Debug)]
struct Seen {
    method: String,
    /// Path and query, as sent.
    target: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Loopback HTTP targets, by path:
/// - `/echo`: `200` `{"ok":true}` with a `Link` to the `echo` target's own URL;
/// - `/meta`: `200` JSON naming the URLs of registered targets, and one public URL;
/// - `/moved-ok`: `302` to the `echo` target's URL; `/moved-off`: `302` to `/secret`;
/// - `/big`: `200` with 300,000 bytes;
/// - `/slow`: no answer; it notes when the client closes the connection.
#[derive(Clone)]
struct Targets {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    closed: Arc<Mutex<Vec<String>>>,
}

impl Targets {
    fn start() -> Targets {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let t = Targets {
            addr: listener.local_addr().unwrap(),
            seen: Arc::default(),
            closed: Arc::default(),
        };
        let me = t.clone();
        thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let me = me.clone();
                thread::spawn(move || me.serve(stream));
            }
        });
        t
    }

    fn base(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base())
    }

    /// The `--harpoon.target` values of every target.
    fn flags(&self) -> Vec<String> {
        [
            ("echo", "/echo?x=1"),
            ("meta", "/meta"),
            ("movedok", "/moved-ok"),
            ("movedoff", "/moved-off"),
            ("big", "/big"),
            ("slow", "/slow"),
        ]
        .iter()
        .map(|(label, path)| {
            format!(
                "label={label},url={},desc=\"The {label} target, for tests\"",
                self.url(path)
            )
        })
        .collect()
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    fn serve(&self, mut stream: TcpStream) {
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        loop {
            let Some(req) = read_request(&mut stream) else {
                return;
            };
            self.seen.lock().unwrap().push(req.clone());
            let path = req.target.split('?').next().unwrap_or_default().to_owned();
            let (status, headers, body): (u16, Vec<(String, String)>, Vec<u8>) = match path.as_str()
            {
                "/echo" => (
                    200,
                    vec![
                        ("Content-Type".into(), "application/json".into()),
                        (
                            "Link".into(),
                            format!("<{}>; rel=\"self\"", self.url("/echo?x=1")),
                        ),
                    ],
                    br#"{"ok":true}"#.to_vec(),
                ),
                "/meta" => (
                    200,
                    vec![("Content-Type".into(), "application/json".into())],
                    json!({
                        "issuer": self.url("/echo?x=1"),
                        "nested": {"list": [self.url("/big"), "keep me"]},
                        "public": "https://public.example/x",
                    })
                    .to_string()
                    .into_bytes(),
                ),
                "/moved-ok" => (
                    302,
                    vec![("Location".into(), self.url("/echo?x=1"))],
                    Vec::new(),
                ),
                "/moved-off" => (
                    302,
                    vec![("Location".into(), self.url("/secret"))],
                    Vec::new(),
                ),
                "/big" => (200, Vec::new(), vec![b'x'; 300_000]),
                "/slow" => {
                    // Wait for the client to go away (at most 20 s), and note it.
                    stream
                        .set_read_timeout(Some(Duration::from_millis(50)))
                        .unwrap();
                    let start = Instant::now();
                    let mut buf = [0u8; 64];
                    while start.elapsed() < Duration::from_secs(20) {
                        match stream.read(&mut buf) {
                            Ok(0) => {
                                self.closed.lock().unwrap().push(path);
                                return;
                            }
                            Ok(_) => {}
                            Err(e)
                                if matches!(
                                    e.kind(),
                                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                                ) => {}
                            Err(_) => {
                                self.closed.lock().unwrap().push(path);
                                return;
                            }
                        }
                    }
                    return;
                }
                _ => (404, Vec::new(), b"no such path".to_vec()),
            };
            let mut head = format!("HTTP/1.1 {status} X\r\nContent-Length: {}\r\n", body.len());
            for (n, v) in headers {
                head.push_str(&format!("{n}: {v}\r\n"));
            }
            head.push_str("\r\n");
            if stream.write_all(head.as_bytes()).is_err() || stream.write_all(&body).is_err() {
                return;
            }
        }
    }
}

/// Reads one HTTP/1.1 request (a `Content-Length` body only); `None` at the end.
fn read_request(stream: &mut TcpStream) -> Option<Seen> {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte) {
            Ok(1) => buf.push(byte[0]),
            _ => return None,
        }
        if buf.len() > 64 * 1024 {
            return None;
        }
    }
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut req = httparse::Request::new(&mut headers);
    req.parse(&buf).ok()?;
    let headers: Vec<(String, String)> = req
        .headers
        .iter()
        .map(|h| {
            (
                h.name.to_owned(),
                String::from_utf8_lossy(h.value).into_owned(),
            )
        })
        .collect();
    let len = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body).ok()?;
    Some(Seen {
        method: req.method?.to_owned(),
        target: req.path?.to_owned(),
        headers,
        body,
    })
}

// ---------------------------------------------------------------------------------------------
// Harpoon's MCP endpoint through the control plane

fn harpoon_url(cp: &ControlPlaneHandle) -> String {
    format!("{}?channel=harpoon", cp.mcp_url(TUNNEL))
}

/// A 2026-07-28 request to the `harpoon` channel, with the headers the core builds for it.
fn harpoon_request(cp: &ControlPlaneHandle, body: &str, extra: &[(&str, &str)]) -> Reply {
    let built = request_headers(body, None).unwrap();
    let pairs: Vec<(String, String)> = built
        .iter()
        .map(|(n, v)| (n.to_owned(), v.to_owned()))
        .collect();
    let mut refs: Vec<(&str, &str)> = pairs
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    refs.extend_from_slice(extra);
    http("POST", &harpoon_url(cp), &refs, Some(body))
}

/// `tools/call` of a Harpoon tool; the JSON-RPC `result`.
fn tool(cp: &ControlPlaneHandle, id: i64, name: &str, args: Value) -> Value {
    let body = modern_text(
        id,
        "tools/call",
        json!({"name": name, "arguments": args}),
        None,
    );
    let r = harpoon_request(cp, &body, &[]);
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    assert_eq!(v["id"], id, "{v}");
    v["result"].clone()
}

fn text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}

fn body_of(result: &Value) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(result["structuredContent"]["body_base64"].as_str().unwrap())
        .unwrap()
}

/// A tunnel serving the reference server on main and Harpoon with `targets`; the server is
/// returned to be kept for the test's length.
fn harpoon_tunnel(
    d: Driver,
    cp: &ControlPlaneHandle,
    targets: &Targets,
) -> (Tunnel, mcp_server::McpServerHandle) {
    let flags = targets.flags();
    let mcp = reference_server();
    let url = mcp.url();
    let t = Tunnel::start(d, cp, move |a| {
        a.server_urls = vec![url];
        a.harpoon_targets = flags;
        a.harpoon_allow_plaintext = Some("true".into());
    });
    (t, mcp)
}

// ---------------------------------------------------------------------------------------------
// Tests

/// Harpoon answers tunnel-service's legacy `initialize` and self-contained 2026-07-28
/// requests; its tools are the three of the contract; `list_targets` never shows a URL.
fn harpoon_answers_initialize_tools_list_and_list_targets_without_urls(d: Driver) {
    let cp = plane();
    let targets = Targets::start();
    let (t, _mcp) = harpoon_tunnel(d, &cp, &targets);
    let init = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "tunnel-service", "version": "1"}}
    })
    .to_string();
    let r = http(
        "POST",
        &harpoon_url(&cp),
        &[
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
        ],
        Some(&init),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    assert_eq!(v["result"]["protocolVersion"], "2025-11-25", "{v}");
    assert!(v["result"]["capabilities"]["tools"].is_object(), "{v}");

    let list = harpoon_request(&cp, &modern_text(2, "tools/list", json!({}), None), &[]);
    assert_eq!(list.status, 200, "{}", list.body);
    let mut names: Vec<String> = list.json()["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["call_target", "get_oauth_target_audience", "list_targets"]
    );

    let result = tool(&cp, 3, "list_targets", json!({}));
    let labels: Vec<&str> = result["structuredContent"]["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["label"].as_str().unwrap())
        .collect();
    assert_eq!(
        labels,
        ["echo", "meta", "movedok", "movedoff", "big", "slow"]
    );
    let all = result.to_string();
    assert!(all.contains("The echo target, for tests"), "{all}");
    assert!(
        !all.contains(&targets.addr.to_string()),
        "a URL leaked: {all}"
    );
    assert!(!all.contains("http://"), "a URL leaked: {all}");
    assert!(targets.seen().is_empty(), "list_targets called a target");
    let log = t.stop();
    assert!(
        log.lines()
            .any(|l| l.contains("channel=harpoon") && l.contains("outcome=completed")),
        "{log}"
    );
}

/// `call_target` GET, POST and PUT go to exactly the registered URL (no path or query from
/// the caller), with the caller's hop-by-hop, `Host`, `Cookie`, `Proxy-*`, forwarding and
/// `Connection`-named headers dropped and our `User-Agent`; the drops are logged by class,
/// never by value; the result carries status, headers (URLs rewritten) and the body.
fn call_target_reaches_exactly_the_registered_url_with_filtered_headers(d: Driver) {
    let cp = plane();
    let targets = Targets::start();
    let (t, _mcp) = harpoon_tunnel(d, &cp, &targets);
    let headers = json!({
        "X-Custom": "kept-value",
        "Cookie": "session=cookie-secret",
        "X-Forwarded-For": "203.0.113.9",
        "Host": "evil.example",
        "Proxy-Authorization": "Basic proxy-secret",
        "Connection": "X-Nominated",
        "X-Nominated": "nominated-secret",
        "User-Agent": "spoofed-agent",
    });
    let result = tool(
        &cp,
        1,
        "call_target",
        json!({"label": "echo", "method": "GET", "headers": headers}),
    );
    assert_ne!(result["isError"], true, "{result}");
    let s = &result["structuredContent"];
    assert_eq!(s["status_code"], 200, "{result}");
    assert_eq!(s["body_size_bytes"], 11, "{result}");
    assert_eq!(body_of(&result), br#"{"ok":true}"#);
    let link = s["headers"].to_string();
    assert!(link.contains("<harpoon://echo>"), "{link}");
    assert!(!link.contains(&targets.addr.to_string()), "{link}");

    for (id, method) in [(2, "POST"), (3, "PUT")] {
        let result = tool(
            &cp,
            id,
            "call_target",
            json!({"label": "echo", "method": method, "body": format!("{method} body"),
                   "headers": {"Content-Type": "text/plain"}}),
        );
        assert_eq!(result["structuredContent"]["status_code"], 200, "{result}");
    }
    let seen = targets.seen();
    assert_eq!(seen.len(), 3, "{seen:?}");
    let methods: Vec<&str> = seen.iter().map(|s| s.method.as_str()).collect();
    assert_eq!(methods, ["GET", "POST", "PUT"]);
    for s in &seen {
        assert_eq!(s.target, "/echo?x=1", "{s:?}");
        assert!(s
            .header("User-Agent")
            .is_some_and(|ua| ua.starts_with("mcpwire-harpoon/")));
        assert_eq!(s.header("Host"), Some(targets.addr.to_string().as_str()));
    }
    let get = &seen[0];
    assert_eq!(get.header("X-Custom"), Some("kept-value"));
    for dropped in [
        "Cookie",
        "X-Forwarded-For",
        "Proxy-Authorization",
        "X-Nominated",
    ] {
        assert_eq!(get.header(dropped), None, "{dropped} reached the target");
    }
    assert_eq!(seen[1].body, b"POST body");
    assert_eq!(seen[2].body, b"PUT body");
    assert_eq!(seen[1].header("Content-Type"), Some("text/plain"));

    let log = t.stop();
    let line = log
        .lines()
        .find(|l| l.contains("harpoon dropped request headers"))
        .unwrap_or_else(|| panic!("no drop line in {log}"));
    for class in [
        "cookie",
        "forwarding",
        "host",
        "proxy",
        "connection_nominated",
    ] {
        assert!(line.contains(class), "{class} missing: {line}");
    }
    assert!(log
        .lines()
        .any(|l| l.contains("harpoon call label=echo status=200 outcome=success")));
    for secret in [
        "cookie-secret",
        "proxy-secret",
        "nominated-secret",
        "203.0.113.9",
        "POST body",
        "/echo?x=1",
    ] {
        assert!(!log.contains(secret), "{secret} reached the log:\n{log}");
    }
}

/// A redirect to another registered URL is followed (the answer is the final one); one to an
/// unregistered URL is refused without calling it; `follow_redirects: false` returns the
/// `3xx` with its `Location` rewritten.
fn redirects_are_followed_only_to_registered_urls(d: Driver) {
    let cp = plane();
    let targets = Targets::start();
    let (t, _mcp) = harpoon_tunnel(d, &cp, &targets);
    let ok = tool(&cp, 1, "call_target", json!({"label": "movedok"}));
    assert_eq!(ok["structuredContent"]["status_code"], 200, "{ok}");
    assert_eq!(body_of(&ok), br#"{"ok":true}"#);
    let off = tool(&cp, 2, "call_target", json!({"label": "movedoff"}));
    assert_eq!(off["isError"], true, "{off}");
    assert!(text(&off).contains("harpoon target 'movedoff'"), "{off}");
    assert!(!off.to_string().contains("/secret"), "{off}");
    let kept = tool(
        &cp,
        3,
        "call_target",
        json!({"label": "movedok", "follow_redirects": false}),
    );
    assert_eq!(kept["structuredContent"]["status_code"], 302, "{kept}");
    assert!(
        kept["structuredContent"]["headers"]
            .to_string()
            .contains("harpoon://echo"),
        "{kept}"
    );
    let paths: Vec<String> = targets.seen().into_iter().map(|s| s.target).collect();
    assert_eq!(paths, ["/moved-ok", "/echo?x=1", "/moved-off", "/moved-ok"]);
    let metrics = t.get("/metrics").1;
    assert!(
        metrics.contains(
            "harpoon_call_total{label=\"movedoff\",status_class=\"3xx\",outcome=\"redirect_refused\"} 1"
        ),
        "{metrics}"
    );
    assert!(
        metrics.contains(
            "harpoon_call_total{label=\"movedok\",status_class=\"2xx\",outcome=\"success\"} 1"
        ),
        "{metrics}"
    );
    assert!(
        metrics.contains("harpoon_call_latency_milliseconds_count{label=\"movedok\""),
        "{metrics}"
    );
    t.stop();
}

/// A body over `max_response_bytes` is an error, never a truncation; every registered URL in
/// a JSON body becomes `harpoon://<label>`, other strings pass unchanged.
fn an_oversized_body_is_refused_and_json_urls_are_rewritten(d: Driver) {
    let cp = plane();
    let targets = Targets::start();
    let (t, _mcp) = harpoon_tunnel(d, &cp, &targets);
    let big = tool(
        &cp,
        1,
        "call_target",
        json!({"label": "big", "max_response_bytes": 1000}),
    );
    assert_eq!(big["isError"], true, "{big}");
    assert!(text(&big).contains("max_response_bytes"), "{big}");
    assert!(
        big["structuredContent"].get("body_base64").is_none(),
        "{big}"
    );
    // Within the default 100 KiB cap it is still too large.
    let big = tool(&cp, 2, "call_target", json!({"label": "big"}));
    assert_eq!(big["isError"], true, "{big}");

    let meta = tool(&cp, 3, "call_target", json!({"label": "meta"}));
    let doc: Value = serde_json::from_slice(&body_of(&meta)).unwrap();
    assert_eq!(
        doc,
        json!({
            "issuer": "harpoon://echo",
            "nested": {"list": ["harpoon://big", "keep me"]},
            "public": "https://public.example/x",
        })
    );
    assert!(!meta.to_string().contains(&targets.addr.to_string()));
    let metrics = t.get("/metrics").1;
    assert!(
        metrics.contains(
            "harpoon_call_total{label=\"big\",status_class=\"2xx\",outcome=\"response_too_large\"} 2"
        ),
        "{metrics}"
    );
    t.stop();
}

/// A command whose deadline passes while Harpoon's outbound call waits cancels that call
/// (the target sees its connection close) and posts nothing; Harpoon serves the next call.
fn a_deadline_cancels_the_outbound_call_and_the_next_call_is_served(d: Driver) {
    let cp = plane();
    let targets = Targets::start();
    let (t, _mcp) = harpoon_tunnel(d, &cp, &targets);
    let body = modern_text(
        1,
        "tools/call",
        json!({"name": "call_target", "arguments": {"label": "slow", "timeout_ms": 60000}}),
        None,
    );
    let r = harpoon_request(&cp, &body, &[(RESPONSE_TIMEOUT_HEADER, "1s")]);
    assert_eq!(r.status, 504, "{}", r.body);
    wait_for("the target to see its connection closed", || {
        (!targets.closed.lock().unwrap().is_empty()).then_some(())
    });
    let next = tool(&cp, 2, "call_target", json!({"label": "echo"}));
    assert_eq!(next["structuredContent"]["status_code"], 200, "{next}");
    let slow_posts = cp
        .plane()
        .responses(TUNNEL)
        .into_iter()
        .filter(|p| p.body.contains("\"id\":1"))
        .count();
    assert_eq!(slow_posts, 0, "a response was posted after the deadline");
    t.stop();
}

/// A target that never answers: the call ends at its `timeout_ms` with an error naming the
/// label, its connection is closed, and Harpoon serves the next call.
fn timeout_ms_ends_a_hung_call_and_the_next_call_is_served(d: Driver) {
    let cp = plane();
    let targets = Targets::start();
    let (t, _mcp) = harpoon_tunnel(d, &cp, &targets);
    let hung = tool(
        &cp,
        1,
        "call_target",
        json!({"label": "slow", "timeout_ms": 300}),
    );
    assert_eq!(hung["isError"], true, "{hung}");
    assert_eq!(
        text(&hung),
        "harpoon target 'slow': no answer within timeout_ms (300 ms)"
    );
    wait_for("the target to see its connection closed", || {
        (!targets.closed.lock().unwrap().is_empty()).then_some(())
    });
    let next = tool(&cp, 2, "call_target", json!({"label": "echo"}));
    assert_eq!(next["structuredContent"]["status_code"], 200, "{next}");
    let metrics = t.get("/metrics").1;
    assert!(
        metrics.contains(
            "harpoon_call_total{label=\"slow\",status_class=\"none\",outcome=\"timeout\"} 1"
        ),
        "{metrics}"
    );
    t.stop();
}

fn declared(cp: &ControlPlaneHandle) -> Vec<String> {
    let polls = cp.plane().polls(TUNNEL);
    let last = polls.last().expect("a poll");
    let value = last
        .headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(HEADER_NAME))
        .map(|(_, v)| v.clone())
        .expect("the server-info header");
    let info = ServerInfo::parse(&value).unwrap();
    info.channels()
        .iter()
        .map(|c| {
            format!(
                "{} stateless={} proc_affinity={}",
                c.name, c.stateless, c.proc_affinity
            )
        })
        .collect()
}

/// `X-Tunnel-MCP-Server-Info` declares `harpoon` (stateless, process affinity) while it has a
/// target; without one it is not declared and a command for it is answered as an unserved
/// channel, without contacting anything.
fn the_server_info_header_declares_harpoon_only_while_it_has_targets(d: Driver) {
    let cp = plane();
    let targets = Targets::start();
    let (t, _mcp) = harpoon_tunnel(d, &cp, &targets);
    wait_for("a poll", || {
        (!cp.plane().polls(TUNNEL).is_empty()).then_some(())
    });
    assert_eq!(
        declared(&cp),
        [
            "main stateless=false proc_affinity=false",
            "harpoon stateless=true proc_affinity=true"
        ]
    );
    t.stop();

    let cp = plane();
    let mcp = reference_server();
    let url = mcp.url();
    let t = Tunnel::start(d, &cp, |a| a.server_urls = vec![url]);
    wait_for("a poll", || {
        (!cp.plane().polls(TUNNEL).is_empty()).then_some(())
    });
    assert_eq!(declared(&cp), ["main stateless=false proc_affinity=false"]);
    let r = harpoon_request(&cp, &modern_text(1, "tools/list", json!({}), None), &[]);
    let v = r.json();
    assert!(v["error"].is_object(), "{}", r.body);
    assert!(r.body.contains("client_internal"), "{}", r.body);
    t.stop();
}

/// `--control-plane.poll-channel harpoon` with targets and no main channel: Harpoon alone.
fn harpoon_is_served_alone_on_its_channel(d: Driver) {
    let cp = plane();
    let targets = Targets::start();
    let flags = targets.flags();
    let t = Tunnel::start(d, &cp, move |a| {
        a.poll_channels = vec!["harpoon".into()];
        a.harpoon_targets = flags;
        a.harpoon_allow_plaintext = Some("true".into());
    });
    let result = tool(&cp, 1, "call_target", json!({"label": "echo"}));
    assert_eq!(result["structuredContent"]["status_code"], 200, "{result}");
    let polls = cp.plane().polls(TUNNEL);
    assert!(
        polls.iter().all(|p| p.query.contains("channel=harpoon")),
        "{:?}",
        polls[0].query
    );
    assert_eq!(declared(&cp), ["harpoon stateless=true proc_affinity=true"]);
    t.stop();
}

/// A protected MCP server (`mcpwire dev mcp-server --auth`, its authorization server on the
/// same listener): with `authorization_servers` on the MCP server's own host, its token,
/// registration and issuer endpoints become targets (never the authorization endpoint),
/// tagged with their role; `get_oauth_target_audience` gives the token endpoint's URL.
fn oauth_discovery_registers_the_authorization_servers_endpoints(d: Driver) {
    let cp = plane();
    let mcp = McpServer::start_http(
        mcp_server::Config {
            auth: Some(AuthConfig::default()),
            ..mcp_server::Config::default()
        },
        "127.0.0.1:0",
    )
    .unwrap();
    let url = mcp.url();
    let t = Tunnel::start(d, &cp, |a| {
        a.server_urls = vec![url];
        a.harpoon_allow_plaintext = Some("true".into());
    });
    let log = t.log();
    let done = log
        .lines()
        .find(|l| l.contains("harpoon oauth discovery done"))
        .unwrap_or_else(|| panic!("no discovery line in {log}"));
    assert!(
        done.contains("authorization_servers=1 registered=3 labels=oauth-token-1,oauth-registration-1,oauth-issuer-1"),
        "{done}"
    );
    let listed = tool(&cp, 1, "list_targets", json!({"source": "oauth_discovery"}));
    let targets = listed["structuredContent"]["targets"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(targets.len(), 3, "{listed}");
    assert!(targets[0]["tags"].to_string().contains("token"), "{listed}");
    assert!(!listed.to_string().contains("authorize"), "{listed}");
    let audience = tool(
        &cp,
        2,
        "get_oauth_target_audience",
        json!({"label": "oauth-token-1"}),
    );
    let issuer = mcp.server().auth().unwrap().issuer().unwrap();
    assert!(
        audience.to_string().contains(&format!("{}/token", issuer)),
        "{audience}"
    );
    // The token endpoint is reachable through Harpoon: a request without a client is the
    // authorization server's own 401 invalid_client.
    let call = tool(
        &cp,
        3,
        "call_target",
        json!({"label": "oauth-token-1", "method": "POST",
               "headers": {"Content-Type": "application/x-www-form-urlencoded"},
               "body": "grant_type=authorization_code&code=nope"}),
    );
    assert_eq!(call["structuredContent"]["status_code"], 401, "{call}");
    let answer: Value = serde_json::from_slice(&body_of(&call)).unwrap();
    assert_eq!(answer["error"], "invalid_client", "{answer}");
    let log = t.stop();
    assert!(!log.contains(&format!("{issuer}/token")), "{log}");
}

/// A named change of the tunnel's settings and the discovery outcome it leads to.
type Case = (
    &'static str,
    fn(&mut mcpwire_cli::tunnel_run::config::RunArgs),
    &'static str,
);

/// With the authorization server on another host (`localhost`) than the MCP server
/// (`127.0.0.1`), its endpoints are registered as loopback by default, not at all with
/// `--harpoon.hosts-include-loopback=false`, and again by a matching suffix or pattern.
fn oauth_discovery_follows_the_host_switches(d: Driver) {
    let mcp = McpServer::start_http(
        mcp_server::Config {
            auth: Some(AuthConfig {
                issuer_host: Some("localhost".into()),
                ..AuthConfig::default()
            }),
            ..mcp_server::Config::default()
        },
        "127.0.0.1:0",
    )
    .unwrap();
    let cases: [Case; 4] = [
        ("loopback by default", |_| {}, "registered=3"),
        (
            "loopback off",
            |a| a.harpoon_include_loopback = Some("false".into()),
            "registered=0",
        ),
        (
            "a suffix",
            |a| {
                a.harpoon_include_loopback = Some("false".into());
                a.harpoon_include_suffixes = vec!["localhost".into()];
            },
            "registered=3",
        ),
        (
            "a pattern",
            |a| {
                a.harpoon_include_loopback = Some("false".into());
                a.harpoon_include_patterns = vec!["LOCAL.*".into()];
            },
            "registered=3",
        ),
    ];
    for (what, change, expect) in cases {
        let cp = plane();
        let url = mcp.url();
        let t = Tunnel::start(d, &cp, |a| {
            a.server_urls = vec![url];
            a.harpoon_allow_plaintext = Some("true".into());
            change(a);
        });
        let log = t.stop();
        let done = log
            .lines()
            .find(|l| l.contains("harpoon oauth discovery done"))
            .unwrap_or_else(|| panic!("{what}: no discovery line in {log}"));
        assert!(done.contains(expect), "{what}: {done}");
    }
}

//! One small application served by both drivers (blocking, smol) over both transports (stdio,
//! Streamable HTTP): `tools/list`, `tools/call`, a call whose progress streams over SSE (sent
//! from another thread through the `Responder`), a legacy session ended with `DELETE`, and a
//! call cancelled when its client goes away. The HTTP side talks raw HTTP/1.1 over loopback
//! sockets, so what is checked is what a client receives.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcpwire::server::{HookAnswer, HttpHook, HttpOptions, HttpOverride, Responder};
use mcpwire_core::http::Headers;
use mcpwire_core::jsonrpc::ErrorObject;
use mcpwire_core::mcp::headers::request_headers_for;
use mcpwire_core::mcp::server::HttpRequest;
use mcpwire_core::mcp::server::{
    Application, CallContext, Reply, RequestContext, RequestId, ServerConfig, SessionId,
};
use mcpwire_core::mcp::{Implementation, ListKind, Tool};
use serde_json::{json, Map, Value};

const MODERN: &str = "2026-07-28";
const LEGACY: &str = "2025-11-25";
/// Every wait in these tests ends by then.
const PATIENCE: Duration = Duration::from_secs(10);

// ---------------------------------------------------------------------------------------------
// The application.

#[derive(Default)]
struct Seen {
    cancelled: Vec<RequestId>,
    sessions_closed: Vec<String>,
    waiting: Vec<RequestId>,
    /// A handle for the test thread (set when the application is made).
    responder: Option<Responder>,
}

struct Demo {
    responder: Responder,
    seen: Arc<Mutex<Seen>>,
}

fn tool(name: &str, properties: Value) -> Tool {
    let mut input_schema = Map::new();
    input_schema.insert("type".into(), json!("object"));
    input_schema.insert("properties".into(), properties);
    Tool {
        name: name.into(),
        description: Some(format!("the {name} tool")),
        input_schema,
        ..Tool::default()
    }
}

impl Application for Demo {
    fn list_tools(&mut self, _: &RequestContext) -> Result<Vec<Tool>, ErrorObject> {
        Ok(vec![
            tool("echo", json!({"text": {"type": "string"}})),
            tool("count", json!({"to": {"type": "integer"}})),
            tool("wait", json!({})),
            tool("change", json!({})),
            tool("override", json!({"raw": {"type": "string"}})),
        ])
    }

    fn call_tool(&mut self, cx: &mut CallContext, name: &str, args: &Map<String, Value>) -> Reply {
        match name {
            "echo" => Reply::tool_text(args.get("text").and_then(Value::as_str).unwrap_or("")),
            // Counts on another thread: progress through the Responder, then the answer.
            "count" => {
                let to = args.get("to").and_then(Value::as_u64).unwrap_or(3);
                let id = cx.request.request;
                let responder = self.responder.clone();
                std::thread::spawn(move || {
                    for i in 1..=to {
                        std::thread::sleep(Duration::from_millis(10));
                        responder
                            .progress(id, i as f64, Some(to as f64), Some(&format!("step {i}")))
                            .unwrap();
                    }
                    responder
                        .respond(id, Reply::tool_text(format!("counted to {to}")))
                        .unwrap();
                });
                Reply::Pending
            }
            // Reports a change from inside the application: the Responder call is applied once
            // this method returns.
            "change" => {
                self.responder.list_changed(ListKind::Tools);
                Reply::tool_text("changed")
            }
            // Its own HTTP answer: a 502 with an extra header, or a raw text body.
            "override" => {
                let mut change = HttpOverride {
                    status: Some(502),
                    ..HttpOverride::default()
                };
                change.headers.append("X-Demo", "overridden").unwrap();
                if let Some(raw) = args.get("raw").and_then(Value::as_str) {
                    change.body = Some(("text/plain".into(), raw.as_bytes().to_vec()));
                }
                if let Some(x) = cx.request.exchange {
                    self.responder.override_http(x, change);
                }
                Reply::error(-1, "overridden")
            }
            // Never answers: only a cancellation ends it.
            "wait" => {
                self.seen.lock().unwrap().waiting.push(cx.request.request);
                Reply::Pending
            }
            other => Reply::invalid_params(format!("Unknown tool: {other}")),
        }
    }

    /// Honours every resource URI but `demo://secret`.
    fn accept_resource_subscriptions(
        &mut self,
        _: &RequestContext,
        uris: &[String],
    ) -> Result<Vec<String>, ErrorObject> {
        Ok(uris
            .iter()
            .filter(|u| *u != "demo://secret")
            .cloned()
            .collect())
    }

    fn cancelled(&mut self, request: RequestId) {
        self.seen.lock().unwrap().cancelled.push(request);
    }

    fn session_closed(&mut self, session: &SessionId) {
        self.seen
            .lock()
            .unwrap()
            .sessions_closed
            .push(session.as_str().to_owned());
    }
}

fn config() -> ServerConfig {
    mcpwire::server::config(Implementation::new("demo", "1.0.0")).unwrap()
}

fn make(seen: &Arc<Mutex<Seen>>) -> impl FnOnce(Responder) -> Demo {
    let seen = seen.clone();
    move |responder| {
        seen.lock().unwrap().responder = Some(responder.clone());
        Demo { responder, seen }
    }
}

fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn modern(id: u64, method: &str, params: Value) -> Value {
    let mut params = params.as_object().cloned().unwrap_or_default();
    let meta = params
        .entry("_meta")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .unwrap();
    meta.insert(
        "io.modelcontextprotocol/protocolVersion".into(),
        json!(MODERN),
    );
    meta.insert(
        "io.modelcontextprotocol/clientCapabilities".into(),
        json!({}),
    );
    meta.insert(
        "io.modelcontextprotocol/clientInfo".into(),
        json!({"name": "test", "version": "1"}),
    );
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

fn legacy(id: u64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

fn initialize(id: u64) -> Value {
    legacy(
        id,
        "initialize",
        json!({"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}),
    )
}

fn text_of(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}

fn tool_names(result: &Value) -> Vec<&str> {
    result["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The drivers, behind one face for the tests.

#[derive(Clone, Copy, Debug)]
enum Driver {
    Blocking,
    Smol,
}

enum Running {
    Blocking(mcpwire::server::blocking::HttpServer),
    Smol(mcpwire::server::smol::HttpServer),
}

impl Running {
    fn start(driver: Driver, seen: &Arc<Mutex<Seen>>) -> Running {
        Running::start_opts(driver, seen, HttpOptions::default())
    }

    fn start_opts(driver: Driver, seen: &Arc<Mutex<Seen>>, options: HttpOptions) -> Running {
        match driver {
            Driver::Blocking => Running::Blocking(
                mcpwire::server::blocking::HttpServer::start_with(config(), options, make(seen))
                    .unwrap(),
            ),
            Driver::Smol => Running::Smol(
                smol::block_on(mcpwire::server::smol::HttpServer::start_with(
                    config(),
                    options,
                    make(seen),
                ))
                .unwrap(),
            ),
        }
    }

    fn addr(&self) -> SocketAddr {
        match self {
            Running::Blocking(s) => s.local_addr(),
            Running::Smol(s) => s.local_addr(),
        }
    }

    fn url(&self) -> String {
        match self {
            Running::Blocking(s) => s.url().to_owned(),
            Running::Smol(s) => s.url().to_owned(),
        }
    }

    fn responder(&self) -> Responder {
        match self {
            Running::Blocking(s) => s.responder(),
            Running::Smol(s) => s.responder(),
        }
    }

    fn stop(&mut self) {
        match self {
            Running::Blocking(s) => s.stop(),
            Running::Smol(s) => smol::block_on(s.stop()),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// A raw HTTP/1.1 client: one request per connection, the response read whole (a chunked body
// to its last chunk).

struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn is_sse(&self) -> bool {
        self.header("content-type")
            .is_some_and(|v| v.starts_with("text/event-stream"))
    }

    /// The JSON-RPC messages of the body: the JSON body itself, or each SSE event's data.
    fn messages(&self) -> Vec<Value> {
        let text = String::from_utf8(self.body.clone()).unwrap();
        if !self.is_sse() {
            return vec![serde_json::from_str(&text).unwrap()];
        }
        let mut out = Vec::new();
        for event in text.split("\n\n") {
            let data: Vec<&str> = event
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(|d| d.strip_prefix(' ').unwrap_or(d))
                .collect();
            if data.is_empty() || data.iter().all(|d| d.is_empty()) {
                continue;
            }
            out.push(serde_json::from_str(&data.join("\n")).unwrap());
        }
        out
    }

    /// The answer to the request (the message with an `id`).
    fn answer(&self) -> Value {
        self.messages()
            .into_iter()
            .find(|m| m.get("id").is_some())
            .unwrap_or_else(|| panic!("no answer in {}", String::from_utf8_lossy(&self.body)))
    }
}

fn send_head(
    addr: SocketAddr,
    method: &str,
    headers: &[(String, String)],
    body: &[u8],
) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut text = format!(
        "{method} /mcp HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (n, v) in headers {
        text.push_str(&format!("{n}: {v}\r\n"));
    }
    text.push_str("\r\n");
    s.write_all(text.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    s
}

fn read_response(s: TcpStream) -> Response {
    let mut r = BufReader::new(s);
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    let status: u16 = line.split(' ').nth(1).unwrap().parse().unwrap();
    let mut headers = Vec::new();
    loop {
        line.clear();
        r.read_line(&mut line).unwrap();
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        let (n, v) = l.split_once(':').unwrap();
        headers.push((n.trim().to_owned(), v.trim().to_owned()));
    }
    let get = |name: &str| {
        headers
            .iter()
            .find(|(n, _): &&(String, String)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    };
    let mut body = Vec::new();
    if get("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        loop {
            line.clear();
            r.read_line(&mut line).unwrap();
            let size = usize::from_str_radix(line.trim(), 16).unwrap();
            if size == 0 {
                break;
            }
            let mut chunk = vec![0u8; size + 2];
            r.read_exact(&mut chunk).unwrap();
            body.extend_from_slice(&chunk[..size]);
        }
    } else if let Some(len) = get("content-length") {
        body.resize(len.parse().unwrap(), 0);
        r.read_exact(&mut body).unwrap();
    } else {
        r.read_to_end(&mut body).unwrap();
    }
    Response {
        status,
        headers,
        body,
    }
}

/// The headers a client sends with `message` (the modern ones from the body), plus `extra`.
fn headers_for(message: &Value, extra: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = request_headers_for(message, None)
        .unwrap()
        .iter()
        .map(|(n, v)| (n.to_owned(), v.to_owned()))
        .collect();
    for (n, v) in extra {
        out.push(((*n).to_owned(), (*v).to_owned()));
    }
    out
}

fn post(addr: SocketAddr, message: &Value, extra: &[(&str, &str)]) -> Response {
    let s = send_head(
        addr,
        "POST",
        &headers_for(message, extra),
        message.to_string().as_bytes(),
    );
    read_response(s)
}

// ---------------------------------------------------------------------------------------------
// HTTP.

fn http_lists_and_calls(driver: Driver) {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let mut server = Running::start(driver, &seen);
    assert!(
        server.url().starts_with("http://127.0.0.1:"),
        "{}",
        server.url()
    );
    assert!(server.url().ends_with("/mcp"));
    let addr = server.addr();

    let list = post(addr, &modern(1, "tools/list", json!({})), &[]);
    assert_eq!(list.status, 200);
    let answer = list.answer();
    assert_eq!(answer["id"], 1);
    assert_eq!(
        tool_names(&answer["result"]),
        ["echo", "count", "wait", "change", "override"]
    );

    let call = post(
        addr,
        &modern(
            2,
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "hello"}}),
        ),
        &[],
    );
    assert_eq!(call.status, 200);
    assert_eq!(text_of(&call.answer()["result"]), "hello");
    server.stop();
}

fn http_progress_streams_over_sse(driver: Driver) {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let mut server = Running::start(driver, &seen);
    let call = post(
        server.addr(),
        &modern(
            7,
            "tools/call",
            json!({"name": "count", "arguments": {"to": 3}, "_meta": {"progressToken": "p1"}}),
        ),
        &[],
    );
    assert_eq!(call.status, 200);
    assert!(
        call.is_sse(),
        "a call with progress streams: {:?}",
        call.headers
    );
    let messages = call.messages();
    let progress: Vec<&Value> = messages
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .collect();
    assert_eq!(progress.len(), 3, "{messages:?}");
    for (i, p) in progress.iter().enumerate() {
        assert_eq!(p["params"]["progressToken"], "p1");
        assert_eq!(p["params"]["progress"], (i + 1) as f64);
        assert_eq!(p["params"]["total"], 3.0);
    }
    // The result comes last, after every progress notification.
    let last = messages.last().unwrap();
    assert_eq!(last["id"], 7);
    assert_eq!(text_of(&last["result"]), "counted to 3");
    server.stop();
}

fn http_legacy_session_and_delete(driver: Driver) {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let mut server = Running::start(driver, &seen);
    let addr = server.addr();
    let accept = ("Accept", "application/json, text/event-stream");
    let init = post(addr, &initialize(1), &[accept]);
    assert_eq!(init.status, 200);
    let session = init
        .header("mcp-session-id")
        .expect("initialize issues a session id")
        .to_owned();
    assert_eq!(init.answer()["result"]["protocolVersion"], LEGACY);
    let with_session = [
        accept,
        ("Mcp-Session-Id", session.as_str()),
        ("MCP-Protocol-Version", LEGACY),
    ];
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(post(addr, &note, &with_session).status, 202);
    let call = post(
        addr,
        &legacy(
            2,
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "in session"}}),
        ),
        &with_session,
    );
    assert_eq!(call.status, 200);
    assert_eq!(text_of(&call.answer()["result"]), "in session");

    let deleted = read_response(send_head(
        addr,
        "DELETE",
        &headers_for(&json!({"method": "x"}), &with_session)
            .into_iter()
            .filter(|(n, _)| !n.eq_ignore_ascii_case("mcp-method"))
            .collect::<Vec<_>>(),
        b"",
    ));
    assert!(
        deleted.status == 200 || deleted.status == 204,
        "DELETE: {}",
        deleted.status
    );
    wait_until("the session's end to reach the application", || {
        seen.lock().unwrap().sessions_closed == [session.clone()]
    });
    // The session is gone: a request in it is refused with 404.
    let after = post(addr, &legacy(3, "tools/list", json!({})), &with_session);
    assert_eq!(after.status, 404);
    server.stop();
}

fn http_disconnect_cancels(driver: Driver) {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let mut server = Running::start(driver, &seen);
    let message = modern(9, "tools/call", json!({"name": "wait", "arguments": {}}));
    let s = send_head(
        server.addr(),
        "POST",
        &headers_for(&message, &[]),
        message.to_string().as_bytes(),
    );
    wait_until("the call to reach the application", || {
        !seen.lock().unwrap().waiting.is_empty()
    });
    let waiting = seen.lock().unwrap().waiting[0];
    drop(s);
    wait_until("the cancellation to reach the application", || {
        seen.lock().unwrap().cancelled == [waiting]
    });
    server.stop();
}

/// Opens a legacy session; its id.
fn open_session(addr: SocketAddr) -> String {
    let init = post(
        addr,
        &initialize(1),
        &[("Accept", "application/json, text/event-stream")],
    );
    assert_eq!(init.status, 200);
    let session = init.header("mcp-session-id").unwrap().to_owned();
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let ready = post(
        addr,
        &note,
        &[
            ("Mcp-Session-Id", session.as_str()),
            ("MCP-Protocol-Version", LEGACY),
        ],
    );
    assert_eq!(ready.status, 202);
    session
}

/// Reads a streamed (chunked) response until `want` is in its body; what came so far.
fn read_stream_until(r: &mut BufReader<TcpStream>, want: &str) -> String {
    let mut body = String::new();
    let mut line = String::new();
    let deadline = Instant::now() + PATIENCE;
    while !body.contains(want) {
        assert!(Instant::now() < deadline, "no {want:?} in {body:?}");
        line.clear();
        if r.read_line(&mut line).unwrap() == 0 {
            break;
        }
        let Ok(size) = usize::from_str_radix(line.trim(), 16) else {
            continue;
        };
        if size == 0 {
            break;
        }
        let mut chunk = vec![0u8; size + 2];
        r.read_exact(&mut chunk).unwrap();
        body.push_str(&String::from_utf8_lossy(&chunk[..size]));
    }
    body
}

/// A legacy session's GET stream stays open and carries what the server reports later: a
/// list change from a `Responder` on another thread, and one from inside the application.
fn http_get_stream_carries_later_notifications(driver: Driver) {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let mut server = Running::start(driver, &seen);
    let addr = server.addr();
    let session = open_session(addr);
    let with_session = [
        ("Accept", "text/event-stream"),
        ("Mcp-Session-Id", session.as_str()),
        ("MCP-Protocol-Version", LEGACY),
    ];
    let get = send_head(
        addr,
        "GET",
        &with_session
            .iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
            .collect::<Vec<_>>(),
        b"",
    );
    let mut r = BufReader::new(get);
    let mut head = String::new();
    r.read_line(&mut head).unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let mut line = String::new();
    let mut sse = false;
    loop {
        line.clear();
        r.read_line(&mut line).unwrap();
        if line.trim().is_empty() {
            break;
        }
        sse |= line
            .to_ascii_lowercase()
            .starts_with("content-type: text/event-stream");
    }
    assert!(sse, "the GET stream is an event stream");
    // A change reported from this thread reaches the open stream.
    let responder = server.responder();
    let deadline = Instant::now() + PATIENCE;
    let mut body = String::new();
    // The stream may be registered a moment after its head is written: report until it shows.
    while !body.contains("notifications/tools/list_changed") {
        assert!(Instant::now() < deadline);
        responder.list_changed(ListKind::Tools);
        r.get_ref()
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let mut chunk = [0u8; 4096];
        match r.read(&mut chunk) {
            Ok(0) => panic!("the GET stream ended: {body}"),
            Ok(n) => body.push_str(&String::from_utf8_lossy(&chunk[..n])),
            Err(_) => {}
        }
    }
    // Drain what the reports above still have in flight, so what follows is new.
    r.get_ref()
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut chunk = [0u8; 4096];
    while let Ok(n) = r.read(&mut chunk) {
        assert!(n > 0, "the GET stream ended");
    }
    r.get_ref().set_read_timeout(Some(PATIENCE)).unwrap();
    // A change reported from inside a tool (the deferred path) reaches it too.
    let before = body.matches("notifications/tools/list_changed").count();
    let call = post(
        addr,
        &legacy(5, "tools/call", json!({"name": "change", "arguments": {}})),
        &[
            ("Accept", "application/json, text/event-stream"),
            ("Mcp-Session-Id", session.as_str()),
            ("MCP-Protocol-Version", LEGACY),
        ],
    );
    assert_eq!(text_of(&call.answer()["result"]), "changed");
    let more = read_stream_until(&mut r, "notifications/tools/list_changed");
    assert!(
        before >= 1 && more.contains("notifications/tools/list_changed"),
        "{more}"
    );
    server.stop();
}

/// A body over the core's bound is cut by the listener and answered by the core (413), and
/// the connection is closed after the answer.
fn http_body_over_the_bound_is_refused(driver: Driver) {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let mut server = Running::start(driver, &seen);
    let big = "x".repeat(4 * 1024 * 1024 + 10);
    let message = modern(
        3,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": big}}),
    );
    let answer = post(server.addr(), &message, &[]);
    assert_eq!(answer.status, 413);
    server.stop();
}

/// Stopping the server with a call in flight cancels it (the application hears it) and
/// returns promptly.
fn http_stop_cancels_what_is_in_flight(driver: Driver) {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let mut server = Running::start(driver, &seen);
    let message = modern(4, "tools/call", json!({"name": "wait", "arguments": {}}));
    let s = send_head(
        server.addr(),
        "POST",
        &headers_for(&message, &[]),
        message.to_string().as_bytes(),
    );
    wait_until("the call to reach the application", || {
        !seen.lock().unwrap().waiting.is_empty()
    });
    let started = Instant::now();
    server.stop();
    assert!(started.elapsed() < Duration::from_secs(5));
    let waiting = seen.lock().unwrap().waiting[0];
    assert_eq!(seen.lock().unwrap().cancelled, [waiting]);
    drop(s);
}

/// The hook answers `/hello` itself and refuses a request without `X-Key` with a `401`; what
/// it lets through reaches the core (and is counted).
struct KeyGate {
    passed: Mutex<u32>,
}

impl HttpHook for KeyGate {
    fn before(&self, request: &mut HttpRequest, _: Option<&str>) -> Option<HookAnswer> {
        let answer = |status: u16, text: &str| {
            let mut headers = Headers::new();
            headers.append("Content-Type", "text/plain").unwrap();
            Some(HookAnswer {
                status,
                headers,
                body: text.as_bytes().to_vec(),
            })
        };
        if request.path == "/hello" {
            return answer(200, "hello from the hook");
        }
        if !request.headers.contains("x-key") {
            return answer(401, "no key");
        }
        *self.passed.lock().unwrap() += 1;
        None
    }
}

fn raw_get(addr: SocketAddr, path: &str) -> Response {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    read_response(s)
}

fn http_hook_answers_in_front_of_the_core(driver: Driver) {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let gate = Arc::new(KeyGate {
        passed: Mutex::new(0),
    });
    let options = HttpOptions {
        hook: Some(gate.clone()),
        ..HttpOptions::default()
    };
    let mut server = Running::start_opts(driver, &seen, options);
    let addr = server.addr();
    let hello = raw_get(addr, "/hello");
    assert_eq!(hello.status, 200);
    assert_eq!(hello.body, b"hello from the hook");
    let list = modern(1, "tools/list", json!({}));
    let refused = post(addr, &list, &[]);
    assert_eq!((refused.status, &refused.body[..]), (401, &b"no key"[..]));
    let ok = post(addr, &list, &[("X-Key", "1")]);
    assert_eq!(ok.status, 200);
    assert_eq!(ok.answer()["id"], 1);
    assert_eq!(*gate.passed.lock().unwrap(), 1);
    server.stop();
}

/// An application's `override_http`: the core's JSON-RPC error goes out with the status and
/// the header asked, or is replaced by a raw body; a plain call is unaffected.
fn http_override_changes_one_response(driver: Driver) {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let mut server = Running::start(driver, &seen);
    let addr = server.addr();
    let call = |id: u64, args: Value| {
        modern(
            id,
            "tools/call",
            json!({"name": "override", "arguments": args}),
        )
    };
    let r = post(addr, &call(1, json!({})), &[]);
    assert_eq!(r.status, 502);
    assert_eq!(r.header("x-demo"), Some("overridden"));
    assert_eq!(r.answer()["error"]["message"], "overridden");
    let r = post(addr, &call(2, json!({"raw": "not json"})), &[]);
    assert_eq!(r.status, 502);
    assert_eq!(r.header("content-type"), Some("text/plain"));
    assert_eq!(r.body, b"not json");
    let echo = modern(
        3,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "plain"}}),
    );
    let r = post(addr, &echo, &[]);
    assert_eq!((r.status, r.header("x-demo")), (200, None));
    server.stop();
}

#[test]
fn blocking_http_hook_answers_in_front_of_the_core() {
    http_hook_answers_in_front_of_the_core(Driver::Blocking);
}
#[test]
fn smol_http_hook_answers_in_front_of_the_core() {
    http_hook_answers_in_front_of_the_core(Driver::Smol);
}
#[test]
fn blocking_http_override_changes_one_response() {
    http_override_changes_one_response(Driver::Blocking);
}
#[test]
fn smol_http_override_changes_one_response() {
    http_override_changes_one_response(Driver::Smol);
}

#[test]
fn blocking_http_get_stream_carries_later_notifications() {
    http_get_stream_carries_later_notifications(Driver::Blocking);
}
#[test]
fn smol_http_get_stream_carries_later_notifications() {
    http_get_stream_carries_later_notifications(Driver::Smol);
}
#[test]
fn blocking_http_body_over_the_bound_is_refused() {
    http_body_over_the_bound_is_refused(Driver::Blocking);
}
#[test]
fn smol_http_body_over_the_bound_is_refused() {
    http_body_over_the_bound_is_refused(Driver::Smol);
}
#[test]
fn blocking_http_stop_cancels_what_is_in_flight() {
    http_stop_cancels_what_is_in_flight(Driver::Blocking);
}
#[test]
fn smol_http_stop_cancels_what_is_in_flight() {
    http_stop_cancels_what_is_in_flight(Driver::Smol);
}
#[test]
fn blocking_http_lists_and_calls() {
    http_lists_and_calls(Driver::Blocking);
}
#[test]
fn smol_http_lists_and_calls() {
    http_lists_and_calls(Driver::Smol);
}
#[test]
fn blocking_http_progress_streams_over_sse() {
    http_progress_streams_over_sse(Driver::Blocking);
}
#[test]
fn smol_http_progress_streams_over_sse() {
    http_progress_streams_over_sse(Driver::Smol);
}
#[test]
fn blocking_http_legacy_session_and_delete() {
    http_legacy_session_and_delete(Driver::Blocking);
}
#[test]
fn smol_http_legacy_session_and_delete() {
    http_legacy_session_and_delete(Driver::Smol);
}
#[test]
fn blocking_http_disconnect_cancels() {
    http_disconnect_cancels(Driver::Blocking);
}
#[test]
fn smol_http_disconnect_cancels() {
    http_disconnect_cancels(Driver::Smol);
}

// ---------------------------------------------------------------------------------------------
// stdio, over in-memory pipes.

/// The read end of a pipe: what the test writes, as the server's stdin.
struct PipeIn {
    rx: mpsc::Receiver<Vec<u8>>,
    pending: Vec<u8>,
    /// How many bytes the server has read.
    taken: Arc<std::sync::atomic::AtomicUsize>,
}

impl Read for PipeIn {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.pending.is_empty() {
            match self.rx.recv() {
                Ok(bytes) => self.pending = bytes,
                Err(_) => return Ok(0), // the test closed stdin
            }
        }
        let n = buf.len().min(self.pending.len());
        buf[..n].copy_from_slice(&self.pending[..n]);
        self.pending.drain(..n);
        self.taken.fetch_add(n, std::sync::atomic::Ordering::SeqCst);
        Ok(n)
    }
}

/// The write end the server's stdout goes to; a write waits while the gate is shut (a client
/// that does not read).
struct PipeOut(mpsc::Sender<Vec<u8>>, Gate);

/// Open (`true`) or shut.
type Gate = Arc<(Mutex<bool>, std::sync::Condvar)>;

fn gate(open: bool) -> Gate {
    Arc::new((Mutex::new(open), std::sync::Condvar::new()))
}

fn open_gate(g: &Gate) {
    *g.0.lock().unwrap() = true;
    g.1.notify_all();
}

impl Write for PipeOut {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut open = self.1 .0.lock().unwrap();
        while !*open {
            open = self.1 .1.wait(open).unwrap();
        }
        drop(open);
        self.0
            .send(buf.to_vec())
            .map_err(|_| io::Error::from(io::ErrorKind::BrokenPipe))?;
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

struct Stdio {
    stdin: Option<mpsc::Sender<Vec<u8>>>,
    taken: Arc<std::sync::atomic::AtomicUsize>,
    gate: Gate,
    stdout: mpsc::Receiver<Vec<u8>>,
    buffered: Vec<u8>,
    thread: Option<std::thread::JoinHandle<Result<(), mcpwire::server::ServeError>>>,
}

impl Stdio {
    fn start(driver: Driver, seen: &Arc<Mutex<Seen>>) -> Stdio {
        Stdio::start_gated(driver, seen, gate(true))
    }

    fn start_gated(driver: Driver, seen: &Arc<Mutex<Seen>>, gate: Gate) -> Stdio {
        Stdio::start_with(driver, seen, gate, config())
    }

    fn start_with(
        driver: Driver,
        seen: &Arc<Mutex<Seen>>,
        gate: Gate,
        config: ServerConfig,
    ) -> Stdio {
        let (in_tx, in_rx) = mpsc::channel();
        let (out_tx, out_rx) = mpsc::channel();
        let taken = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let input = PipeIn {
            rx: in_rx,
            pending: Vec::new(),
            taken: taken.clone(),
        };
        let output = PipeOut(out_tx, gate.clone());
        let make = make(seen);
        let thread = std::thread::spawn(move || match driver {
            Driver::Blocking => {
                mcpwire::server::blocking::serve_stdio_on(config, input, output, make)
            }
            // Small pipes, as serve_stdio has them (Unblock's default reads 8 MiB ahead).
            Driver::Smol => smol::block_on(mcpwire::server::smol::serve_stdio_on(
                config,
                smol::Unblock::with_capacity(64 * 1024, input),
                smol::Unblock::with_capacity(64 * 1024, output),
                make,
            )),
        });
        Stdio {
            stdin: Some(in_tx),
            taken,
            gate,
            stdout: out_rx,
            buffered: Vec::new(),
            thread: Some(thread),
        }
    }

    fn send(&self, message: &Value) {
        let mut line = message.to_string().into_bytes();
        line.push(b'\n');
        self.stdin.as_ref().unwrap().send(line).unwrap();
    }

    /// The next line the server wrote, as JSON.
    fn next(&mut self) -> Value {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(pos) = self.buffered.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.buffered.drain(..=pos).collect();
                return serde_json::from_slice(&line).unwrap();
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let bytes = self
                .stdout
                .recv_timeout(left)
                .expect("the server wrote no line in time");
            self.buffered.extend_from_slice(&bytes);
        }
    }

    /// The next message that answers `id` (notifications before it are returned too).
    fn until_answer(&mut self, id: u64) -> Vec<Value> {
        let mut seen = Vec::new();
        loop {
            let m = self.next();
            let done = m.get("id") == Some(&json!(id)) && m.get("method").is_none();
            seen.push(m);
            if done {
                return seen;
            }
        }
    }

    /// Closes stdin and waits for the server to return.
    fn close(&mut self) {
        self.stdin.take();
        let result = self.thread.take().unwrap().join().unwrap();
        result.unwrap();
    }
}

fn stdio_serves_both_eras(driver: Driver) {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let mut io = Stdio::start(driver, &seen);
    // 2026-07-28: self-contained requests.
    io.send(&modern(1, "tools/list", json!({})));
    let list = io.until_answer(1).pop().unwrap();
    assert_eq!(
        tool_names(&list["result"]),
        ["echo", "count", "wait", "change", "override"]
    );
    io.send(&modern(
        2,
        "tools/call",
        json!({"name": "count", "arguments": {"to": 2}, "_meta": {"progressToken": 5}}),
    ));
    let messages = io.until_answer(2);
    let progress: Vec<&Value> = messages
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .collect();
    assert_eq!(progress.len(), 2, "{messages:?}");
    assert_eq!(progress[1]["params"]["progressToken"], 5);
    assert_eq!(text_of(&messages.last().unwrap()["result"]), "counted to 2");
    // 2025-11-25: a session on the connection.
    io.send(&initialize(3));
    let init = io.until_answer(3).pop().unwrap();
    assert_eq!(init["result"]["protocolVersion"], LEGACY);
    io.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    io.send(&legacy(
        4,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "legacy"}}),
    ));
    assert_eq!(
        text_of(&io.until_answer(4).pop().unwrap()["result"]),
        "legacy"
    );
    io.close();
}

/// A `subscriptions/listen` asking for resource URIs goes through the application's
/// `accept_resource_subscriptions`: the acknowledgment (the first line for the subscription)
/// lists only the accepted URIs, and only those get `notifications/resources/updated`.
fn stdio_listen_acknowledges_the_accepted_uris(driver: Driver) {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let mut config = config();
    config.resources = true;
    let mut io = Stdio::start_with(driver, &seen, gate(true), config);
    io.send(&modern(
        1,
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true, "resourceSubscriptions": ["demo://a", "demo://secret"]}}),
    ));
    let ack = io.next();
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(
        ack["params"],
        json!({"_meta": {"io.modelcontextprotocol/subscriptionId": 1},
               "notifications": {"toolsListChanged": true, "resourceSubscriptions": ["demo://a"]}})
    );
    let responder = seen.lock().unwrap().responder.clone().unwrap();
    assert_eq!(responder.resource_updated("demo://secret"), 0);
    assert_eq!(responder.resource_updated("demo://a"), 1);
    let update = io.next();
    assert_eq!(update["method"], "notifications/resources/updated");
    assert_eq!(update["params"]["uri"], "demo://a");
    assert_eq!(
        update["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        1
    );
    io.close();
}

fn stdio_cancellation(driver: Driver) {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let mut io = Stdio::start(driver, &seen);
    io.send(&initialize(1));
    io.until_answer(1);
    io.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    io.send(&legacy(
        2,
        "tools/call",
        json!({"name": "wait", "arguments": {}}),
    ));
    wait_until("the first call to reach the application", || {
        seen.lock().unwrap().waiting.len() == 1
    });
    io.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2, "reason": "changed my mind"}}));
    let first = seen.lock().unwrap().waiting[0];
    wait_until("notifications/cancelled to reach the application", || {
        seen.lock().unwrap().cancelled == [first]
    });
    // A second call, still waiting when the client goes away (stdin ends).
    io.send(&legacy(
        3,
        "tools/call",
        json!({"name": "wait", "arguments": {}}),
    ));
    wait_until("the second call to reach the application", || {
        seen.lock().unwrap().waiting.len() == 2
    });
    let second = seen.lock().unwrap().waiting[1];
    io.close();
    assert_eq!(seen.lock().unwrap().cancelled, [first, second]);
}

/// A client that does not read its answers stops being read: with stdout stuck, stdin is read
/// only until about 8 MiB of answers wait; once stdout moves, every answer comes.
fn stdio_backpressure(driver: Driver) {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let stuck = gate(false);
    let mut io = Stdio::start_gated(driver, &seen, stuck.clone());
    let text = "y".repeat(1024 * 1024);
    let mut sent = 0;
    for id in 1..=12u64 {
        let m = modern(
            id,
            "tools/call",
            json!({"name": "echo", "arguments": {"text": text}}),
        );
        sent += m.to_string().len() + 1;
        io.send(&m);
    }
    // Let the server read what it will.
    std::thread::sleep(Duration::from_millis(500));
    let taken = io.taken.load(std::sync::atomic::Ordering::SeqCst);
    assert!(
        taken < sent,
        "stdin was read to its end ({taken} of {sent} bytes) while stdout was stuck"
    );
    assert!(
        taken > 4 * 1024 * 1024,
        "stdin was read too little ({taken} bytes)"
    );
    open_gate(&io.gate);
    for id in 1..=12u64 {
        let answer = io.until_answer(id).pop().unwrap();
        assert_eq!(text_of(&answer["result"]).len(), text.len());
    }
    io.close();
}

#[test]
fn blocking_stdio_backpressure() {
    stdio_backpressure(Driver::Blocking);
}
#[test]
fn smol_stdio_backpressure() {
    stdio_backpressure(Driver::Smol);
}
#[test]
fn blocking_stdio_serves_both_eras() {
    stdio_serves_both_eras(Driver::Blocking);
}
#[test]
fn smol_stdio_serves_both_eras() {
    stdio_serves_both_eras(Driver::Smol);
}
#[test]
fn blocking_stdio_listen_acknowledges_the_accepted_uris() {
    stdio_listen_acknowledges_the_accepted_uris(Driver::Blocking);
}
#[test]
fn smol_stdio_listen_acknowledges_the_accepted_uris() {
    stdio_listen_acknowledges_the_accepted_uris(Driver::Smol);
}
#[test]
fn blocking_stdio_cancellation() {
    stdio_cancellation(Driver::Blocking);
}
#[test]
fn smol_stdio_cancellation() {
    stdio_cancellation(Driver::Smol);
}

//! `mcp::server::Server` fed an arbitrary sequence of transport events in both eras: HTTP
//! requests (POST bodies built from well-formed modern and legacy requests, notifications and
//! client responses, or arbitrary bytes; GET with and without `Last-Event-ID`, DELETE, other
//! methods; headers kept, dropped or mangled), exchanges closed, stdio bytes in arbitrary
//! chunks and its end, application answers (results, errors, input_required, pending, late
//! and never-issued handles), progress, logs, stream closes, list changes, time steps and
//! shutdown. An application (a few tools) answers through `serve_with` or the event API.
//!
//! Invariants checked after every step:
//! - no panic, whatever arrives;
//! - every exchange ends at most once (one `Response`, or one `StreamStart` then at most one
//!   `StreamEnd`), and nothing comes for an exchange after its end;
//! - a stdio output is exactly one line;
//! - `handle_*` calls naming handles the server issued never fail;
//! - on stdio, the first message tagged with a subscription id is its acknowledgment (a
//!   listen asking for resource URIs waits for the application's answer, `Call::Listen`);
//! - after `handle_timeout(now)` the next deadline is not in the past.
#![no_main]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use mcpwire_core::http::Headers;
use mcpwire_core::jsonrpc::ErrorObject;
use mcpwire_core::mcp::server::{
    Application, CallContext, ExchangeId, HttpMethod, HttpOutput, HttpRequest, InputRequest,
    Output, Reply, RequestContext, RequestId, Server, ServerConfig, ServerEvent, ServerSecrets,
};
use mcpwire_core::mcp::{Implementation, JsonObject, ListKind, LoggingLevel, Tool};
use serde_json::{json, Value};

#[derive(Arbitrary, Debug)]
enum Body {
    Raw(Vec<u8>),
    Modern {
        method: u8,
        tool: u8,
        caps: u8,
        junk: u8,
    },
    Legacy {
        method: u8,
        tool: u8,
    },
    Initialize {
        version: u8,
        caps: u8,
    },
    Notification {
        kind: u8,
        id: u8,
    },
    Answer {
        id: u8,
        error: bool,
    },
}

#[derive(Arbitrary, Debug)]
enum Step {
    Post {
        body: Body,
        session: bool,
        header_mode: u8,
        accept: u8,
    },
    Get {
        session: bool,
        last_event: Option<(u8, u8)>,
    },
    Delete {
        session: bool,
    },
    Other,
    Close(u8),
    Stdio {
        body: Body,
        cut: u8,
    },
    StdioRaw(Vec<u8>),
    StdioEof,
    Serve,
    Respond {
        request: u8,
        kind: u8,
    },
    Progress(u8),
    Log {
        request: Option<u8>,
        level: u8,
    },
    CloseStream(u8),
    ListChanged(u8),
    Updated,
    Time(u16),
    Shutdown,
}

#[derive(Arbitrary, Debug)]
struct Input {
    legacy_only: bool,
    steps: Vec<Step>,
}

const METHODS: [&str; 12] = [
    "tools/list",
    "tools/call",
    "prompts/get",
    "resources/read",
    "server/discover",
    "subscriptions/listen",
    "ping",
    "logging/setLevel",
    "completion/complete",
    "resources/subscribe",
    "initialize",
    "x/y",
];
const TOOLS: [&str; 5] = ["echo", "ask", "sample", "slow", "reconnect"];

struct App;

impl Application for App {
    fn accept_resource_subscriptions(
        &mut self,
        _: &RequestContext,
        uris: &[String],
    ) -> Result<Vec<String>, ErrorObject> {
        // Refuses one of the URIs the inputs ask for.
        Ok(uris.iter().filter(|u| *u != "u://no").cloned().collect())
    }

    fn list_tools(&mut self, _: &RequestContext) -> Result<Vec<Tool>, ErrorObject> {
        Ok(TOOLS
            .iter()
            .map(|n| {
                let mut t = Tool::default();
                t.name = (*n).into();
                t.input_schema = json!({"type": "object", "properties": {"r": {"type": "string", "x-mcp-header": "R"}}})
                    .as_object()
                    .cloned()
                    .unwrap_or_default();
                t
            })
            .collect())
    }

    fn call_tool(&mut self, cx: &mut CallContext, name: &str, _: &JsonObject) -> Reply {
        cx.progress(1.0, None, None);
        cx.log(LoggingLevel::Info, None, json!("x"));
        match name {
            "ask" if cx.input_responses.is_none() => Reply::InputRequired {
                inputs: vec![(
                    "k".into(),
                    InputRequest::elicit_form("q", json!({"type": "object"})),
                )],
                state: Some("s".into()),
            },
            "sample" if cx.input_responses.is_none() => Reply::InputRequired {
                inputs: vec![
                    ("s".into(), InputRequest::sampling(JsonObject::new())),
                    ("r".into(), InputRequest::roots()),
                ],
                state: None,
            },
            "slow" => Reply::Pending,
            "reconnect" => {
                cx.close_stream();
                Reply::tool_text("r")
            }
            _ => Reply::tool_text("ok"),
        }
    }
}

fn message(body: &Body, session_id: Option<&str>) -> (Vec<u8>, Option<Value>) {
    let meta = |caps: u8| {
        let caps = match caps % 3 {
            0 => json!({}),
            1 => json!({"elicitation": {}}),
            _ => json!({"elicitation": {"form": {}}, "sampling": {}, "roots": {}}),
        };
        json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": caps})
    };
    let params_for = |method: &str, tool: u8| match method {
        "tools/call" => {
            json!({"name": TOOLS[usize::from(tool) % TOOLS.len()], "arguments": {"r": "x"}})
        }
        "prompts/get" => json!({"name": "p"}),
        "resources/read" | "resources/subscribe" => json!({"uri": "u://x"}),
        "logging/setLevel" => json!({"level": "info"}),
        "subscriptions/listen" => {
            json!({"notifications": {"toolsListChanged": true, "resourceSubscriptions": ["u://x", "u://no"]}})
        }
        "completion/complete" => {
            json!({"ref": {"type": "ref/prompt", "name": "p"}, "argument": {"name": "a", "value": "b"}})
        }
        _ => json!({}),
    };
    let _ = session_id;
    let v = match body {
        Body::Raw(bytes) => return (bytes.clone(), None),
        Body::Modern {
            method,
            tool,
            caps,
            junk,
        } => {
            let m = METHODS[usize::from(*method) % METHODS.len()];
            let mut p = params_for(m, *tool);
            p["_meta"] = meta(*caps);
            match junk % 8 {
                1 => p["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("v9"),
                2 => p["inputResponses"] = json!({"k": {"action": "accept"}}),
                3 => p["requestState"] = json!("v1.AAAA"),
                4 => p["cursor"] = json!("zz"),
                _ => {}
            }
            json!({"jsonrpc": "2.0", "id": junk, "method": m, "params": p})
        }
        Body::Legacy { method, tool } => {
            let m = METHODS[usize::from(*method) % METHODS.len()];
            json!({"jsonrpc": "2.0", "id": method, "method": m, "params": params_for(m, *tool)})
        }
        Body::Initialize { version, caps } => {
            let v =
                ["2025-11-25", "2025-06-18", "1999-01-01", "2026-07-28"][usize::from(*version) % 4];
            let caps = if caps % 2 == 0 {
                json!({})
            } else {
                json!({"elicitation": {}, "sampling": {}, "roots": {}})
            };
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": v, "capabilities": caps}})
        }
        Body::Notification { kind, id } => match kind % 3 {
            0 => json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            1 => {
                json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id}})
            }
            _ => json!({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}),
        },
        Body::Answer { id, error } => {
            if *error {
                json!({"jsonrpc": "2.0", "id": id % 8, "error": {"code": -1, "message": "no"}})
            } else {
                json!({"jsonrpc": "2.0", "id": id % 8, "result": {"action": "accept", "content": {}}})
            }
        }
    };
    (v.to_string().into_bytes(), Some(v))
}

#[derive(Default)]
struct Seen {
    /// Exchange → (started stream, ended).
    state: BTreeMap<u64, (bool, bool)>,
    /// stdio subscription ids that had their first message.
    subscriptions: std::collections::BTreeSet<String>,
}

fn drain(server: &mut Server, seen: &mut Seen, session: &mut Option<String>) {
    let mut guard = 0u32;
    while let Some(out) = server.poll_output() {
        guard += 1;
        assert!(guard < 1_000_000, "endless output");
        match out {
            Output::Stdio(line) => {
                assert_eq!(line.last(), Some(&b'\n'));
                assert_eq!(line.iter().filter(|b| **b == b'\n').count(), 1);
                if let Ok(v) = serde_json::from_slice::<Value>(&line) {
                    let sub = &v["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"];
                    if !sub.is_null() && seen.subscriptions.insert(sub.to_string()) {
                        assert_eq!(
                            v["method"], "notifications/subscriptions/acknowledged",
                            "a message for subscription {sub} before its acknowledgment"
                        );
                    }
                }
            }
            Output::Http(x, o) => {
                let e = seen.state.entry(x.raw()).or_default();
                assert!(!e.1, "output after the end of {x}: {o:?}");
                match o {
                    HttpOutput::Response { headers, .. } => {
                        assert!(!e.0, "a response after a stream start");
                        e.1 = true;
                        if let Some(s) = headers.get("Mcp-Session-Id") {
                            *session = Some(s.to_owned());
                        }
                    }
                    HttpOutput::StreamStart { .. } => {
                        assert!(!e.0, "two stream starts");
                        e.0 = true;
                    }
                    HttpOutput::StreamEvent(_) => assert!(e.0, "an event before the start"),
                    HttpOutput::StreamEnd => {
                        assert!(e.0, "an end without a start");
                        e.1 = true;
                    }
                }
            }
        }
    }
}

fuzz_target!(|input: Input| {
    let mut config = ServerConfig::new(
        Implementation::new("fuzz", "1"),
        ServerSecrets::from_entropy([3; 64]),
    );
    config.prompts = true;
    config.resources = true;
    config.completions = true;
    config.limits.max_in_flight_per_connection = 4;
    config.limits.max_sse_backlog = 4;
    config.limits.max_streams = 4;
    if input.legacy_only {
        config.eras = mcpwire_core::mcp::server::Eras::LEGACY;
    }
    let Ok(mut server) = Server::new(config) else {
        return;
    };
    let mut app = App;
    let mut now = Instant::now();
    let mut seen = Seen::default();
    let mut session: Option<String> = None;
    let mut exchanges: Vec<ExchangeId> = Vec::new();
    let mut requests: Vec<RequestId> = Vec::new();
    for step in input.steps.into_iter().take(64) {
        match step {
            Step::Post {
                body,
                session: with_session,
                header_mode,
                accept,
            } => {
                let (bytes, value) = message(&body, session.as_deref());
                let mut h = match (&value, header_mode % 3) {
                    (Some(v), 0) => {
                        mcpwire_core::mcp::headers::request_headers_for(v, None).unwrap_or_default()
                    }
                    _ => Headers::new(),
                };
                let _ = h.set(
                    "Host",
                    if header_mode % 5 == 4 {
                        "evil.example"
                    } else {
                        "localhost:1"
                    },
                );
                match accept % 3 {
                    0 => {}
                    1 => {
                        let _ = h.set("Accept", "application/json");
                    }
                    _ => {
                        let _ = h.set("Accept", "text/event-stream");
                    }
                }
                if with_session {
                    if let Some(s) = &session {
                        let _ = h.append("Mcp-Session-Id", s.as_str());
                    }
                }
                let x = server.handle_http_request(
                    now,
                    HttpRequest {
                        method: HttpMethod::Post,
                        path: "/mcp".into(),
                        headers: h,
                        body: bytes,
                    },
                );
                exchanges.push(x);
            }
            Step::Get {
                session: with_session,
                last_event,
            } => {
                let mut h = Headers::new();
                let _ = h.set("Host", "127.0.0.1");
                if with_session {
                    if let Some(s) = &session {
                        let _ = h.append("Mcp-Session-Id", s.as_str());
                    }
                }
                if let Some((a, b)) = last_event {
                    let _ = h.append("Last-Event-ID", format!("{a}-{b}"));
                }
                exchanges.push(server.handle_http_request(
                    now,
                    HttpRequest {
                        method: HttpMethod::Get,
                        path: "/mcp".into(),
                        headers: h,
                        body: Vec::new(),
                    },
                ));
            }
            Step::Delete {
                session: with_session,
            } => {
                let mut h = Headers::new();
                let _ = h.set("Host", "127.0.0.1");
                if with_session {
                    if let Some(s) = &session {
                        let _ = h.append("Mcp-Session-Id", s.as_str());
                    }
                }
                exchanges.push(server.handle_http_request(
                    now,
                    HttpRequest {
                        method: HttpMethod::Delete,
                        path: "/mcp".into(),
                        headers: h,
                        body: Vec::new(),
                    },
                ));
            }
            Step::Other => {
                let mut h = Headers::new();
                let _ = h.set("Host", "localhost");
                exchanges.push(server.handle_http_request(
                    now,
                    HttpRequest {
                        method: HttpMethod::Other("PUT".into()),
                        path: "/x".into(),
                        headers: h,
                        body: Vec::new(),
                    },
                ));
            }
            Step::Close(i) => {
                if let Some(x) = exchanges.get(usize::from(i) % exchanges.len().max(1)) {
                    assert!(
                        server.handle_exchange_closed(now, *x).is_ok(),
                        "closing an issued exchange"
                    );
                    seen.state.entry(x.raw()).or_default().1 = true;
                }
            }
            Step::Stdio { body, cut } => {
                let (mut bytes, _) = message(&body, None);
                bytes.push(b'\n');
                let at = usize::from(cut) % bytes.len();
                server.handle_stdio_bytes(now, &bytes[..at]);
                server.handle_stdio_bytes(now, &bytes[at..]);
            }
            Step::StdioRaw(bytes) => server.handle_stdio_bytes(now, &bytes),
            Step::StdioEof => server.handle_stdio_eof(now),
            Step::Serve => server.serve_with(&mut app, now),
            Step::Respond { request, kind } => {
                // Through the event API: take one event, or answer an old handle.
                if kind % 2 == 0 {
                    if let Some(ServerEvent::Request(i)) = server.poll_event() {
                        requests.push(i.id());
                    }
                }
                let rid = requests
                    .get(usize::from(request) % requests.len().max(1))
                    .copied()
                    .unwrap_or(RequestId::from_raw(u64::from(request)));
                let reply = match kind % 6 {
                    0 => Reply::tool_text("late"),
                    1 => Reply::Error(ErrorObject {
                        code: -32601,
                        message: "m".into(),
                        data: None,
                    }),
                    2 => Reply::InputRequired {
                        inputs: vec![("k".into(), InputRequest::roots())],
                        state: Some("x".into()),
                    },
                    3 => Reply::Result(json!(5)),
                    4 => Reply::resource_subscriptions(["u://x"]),
                    _ => Reply::Pending,
                };
                let r = server.respond(now, rid, reply);
                if requests.contains(&rid) {
                    assert!(!matches!(
                        r,
                        Err(mcpwire_core::mcp::server::UsageError::UnknownRequest(_))
                    ));
                }
            }
            Step::Progress(i) => {
                if let Some(r) = requests.get(usize::from(i) % requests.len().max(1)) {
                    let _ = server.progress(now, *r, 1.0, Some(2.0), None);
                }
            }
            Step::Log { request, level } => {
                let r = request.and_then(|i| {
                    requests
                        .get(usize::from(i) % requests.len().max(1))
                        .copied()
                });
                let level = [LoggingLevel::Debug, LoggingLevel::Error][usize::from(level) % 2];
                let _ = server.log(now, r, level, Some("f"), json!(1));
            }
            Step::CloseStream(i) => {
                if let Some(r) = requests.get(usize::from(i) % requests.len().max(1)) {
                    let _ = server.close_stream(now, *r);
                }
            }
            Step::ListChanged(k) => {
                let _ = server.list_changed(
                    now,
                    [ListKind::Tools, ListKind::Prompts, ListKind::Resources][usize::from(k) % 3],
                );
            }
            Step::Updated => {
                let _ = server.resource_updated(now, "u://x");
            }
            Step::Time(ms) => {
                now += Duration::from_millis(u64::from(ms) * 1000);
                server.handle_timeout(now);
                if let Some(t) = server.poll_timeout() {
                    assert!(t.at > now, "a deadline in the past after handle_timeout");
                }
            }
            Step::Shutdown => server.shutdown(now),
        }
        drain(&mut server, &mut seen, &mut session);
    }
});

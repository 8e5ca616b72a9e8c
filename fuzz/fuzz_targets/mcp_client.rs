//! `mcp::Client` fed an arbitrary sequence of host operations (discover, lists, calls, reads,
//! pings, cancellations, input answers, subscriptions, shutdown), server answers to the streams
//! it opened (statuses, JSON and SSE bodies built from well-formed responses, modern errors
//! `-32022`/`-32021`/`-32020`, `input_required`, legacy `initialize` results, or arbitrary
//! bytes, cut into arbitrary chunks), transport failures, stdio lines, closes and reopens, and
//! time steps. The first byte picks the transport and the era policy.
//!
//! Invariants checked after every step:
//! - no panic, whatever arrives;
//! - every host operation ends at most once (`Result`, `Failed` or `Cancelled`), and nothing
//!   names it after its end except nothing (no `Progress`, `InputRequested` or `Retrying`);
//! - every request id the client ever puts on the wire is new (no id reused, ever: the
//!   client's allocator only moves forward, and every resend and MRTR retry draws a new one);
//! - after `handle_timeout(now)` the next deadline is not in the past;
//! - late inputs are never errors (the client module docs, "Late inputs"): every input for a
//!   stream the client opened, and every cancellation of an operation it started, is `Ok`
//!   however the stream or the operation ended.
#![no_main]

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant, SystemTime};

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use mcpwire_core::http::{Headers, ResponseHead};
use mcpwire_core::mcp::{
    Client, ClientCapabilities, ClientConfig, ElicitAnswer, Event, Implementation, InputAnswer,
    ListKind, OpId, OpOptions, Operation, Output, ProtocolChoice, StreamId, SubscriptionFilter,
    Transport, UsageError,
};
use serde_json::{json, Map, Value};

#[derive(Arbitrary, Debug)]
enum Body {
    Raw(Vec<u8>),
    Result { shape: u8, ttl: Option<i32> },
    Error { code: u8, null_id: bool },
    InputRequired { key: u8, state: bool },
    Initialize { version: u8 },
    Notification { kind: u8 },
}

#[derive(Arbitrary, Debug)]
enum Step {
    Start {
        op: u8,
        progress: bool,
    },
    Cancel(u8),
    Answer {
        op: u8,
        key: u8,
        accept: bool,
    },
    Subscribe {
        tools: bool,
        uri: bool,
    },
    Unsubscribe(u8),
    Reply {
        stream: u8,
        status: u8,
        sse: bool,
        body: Vec<Body>,
        cuts: Vec<u8>,
    },
    Fail(u8),
    Line(Body),
    StdioClosed,
    StdioOpen,
    Advance(u16),
    Shutdown,
}

#[derive(Arbitrary, Debug)]
struct Input {
    mode: u8,
    steps: Vec<Step>,
}

const STATUS: [u16; 10] = [200, 200, 200, 202, 400, 404, 405, 429, 500, 503];
const KEYS: [&str; 3] = ["a", "b", "__main__:ask"];

fn operation(n: u8) -> Operation {
    let args = |v: Value| v.as_object().cloned().unwrap_or_default();
    match n % 9 {
        0 => Operation::Discover,
        1 => Operation::List {
            kind: ListKind::Tools,
            cursor: None,
        },
        2 => Operation::List {
            kind: ListKind::Prompts,
            cursor: Some("c".into()),
        },
        3 => Operation::CallTool {
            name: "q".into(),
            arguments: args(json!({"region": "eu", "n": 3})),
        },
        4 => Operation::CallTool {
            name: "bad".into(),
            arguments: Map::new(),
        },
        5 => Operation::GetPrompt {
            name: "p".into(),
            arguments: Map::new(),
        },
        6 => Operation::ReadResource {
            uri: "file:///r".into(),
        },
        7 => Operation::List {
            kind: ListKind::ResourceTemplates,
            cursor: None,
        },
        _ => Operation::Ping,
    }
}

fn message(b: &Body, id: &Value) -> Vec<u8> {
    let v = match b {
        Body::Raw(bytes) => return bytes.clone(),
        Body::Result { shape, ttl } => {
            let mut r = match shape % 6 {
                0 => json!({"supportedVersions": ["2026-07-28", "2025-11-25"], "capabilities": {}}),
                1 => json!({"tools": [
                    {"name": "q", "inputSchema": {"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}}},
                    {"name": "bad", "inputSchema": {"type": "object", "properties": {"x": {"type": "number", "x-mcp-header": "X"}}}}
                ], "nextCursor": "c"}),
                2 => {
                    json!({"content": [{"type": "text", "text": "ok"}], "isError": shape % 2 == 0})
                }
                3 => json!({"contents": []}),
                4 => json!({"prompts": [], "resultType": "complete"}),
                _ => json!({}),
            };
            if let Some(t) = ttl {
                r["ttlMs"] = json!(t);
            }
            json!({"jsonrpc": "2.0", "id": id, "result": r})
        }
        Body::Error { code, null_id } => {
            let (code, data) = match code % 6 {
                0 => (
                    -32022,
                    json!({"supported": ["2026-07-28"], "requested": "2099-01-01"}),
                ),
                1 => (-32022, json!({"supported": ["2025-11-25"]})),
                2 => (
                    -32021,
                    json!({"requiredCapabilities": {"elicitation": {"form": {}}}}),
                ),
                3 => (-32020, json!(null)),
                4 => (-32602, json!(null)),
                _ => (-32601, json!(null)),
            };
            let id = if *null_id { Value::Null } else { id.clone() };
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": "m", "data": data}})
        }
        Body::InputRequired { key, state } => {
            let key = KEYS[*key as usize % KEYS.len()];
            let mut r = json!({"resultType": "input_required", "inputRequests": {key: {"method": "elicitation/create",
                "params": {"mode": "form", "message": "?", "requestedSchema": {"type": "object",
                "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}}}}});
            if *state {
                r["requestState"] = json!("s");
            }
            json!({"jsonrpc": "2.0", "id": id, "result": r})
        }
        Body::Initialize { version } => {
            let v = ["2025-11-25", "2025-06-18", "1999-01-01"][*version as usize % 3];
            json!({"jsonrpc": "2.0", "id": id, "result": {"protocolVersion": v, "capabilities": {}, "serverInfo": {"name": "s", "version": "1"}}})
        }
        Body::Notification { kind } => match kind % 5 {
            0 => {
                json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": id, "progress": *kind as i64}})
            }
            1 => json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}),
            2 => {
                json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged", "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": id}, "notifications": {"toolsListChanged": true}}})
            }
            3 => json!({"jsonrpc": "2.0", "id": 7, "method": "ping"}),
            _ => {
                json!({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "file:///r", "_meta": {"io.modelcontextprotocol/subscriptionId": id}}})
            }
        },
    };
    v.to_string().into_bytes()
}

struct World {
    c: Client,
    now: Instant,
    streams: Vec<(StreamId, Value)>,
    lines: Vec<Value>,
    ended: BTreeSet<OpId>,
    started: Vec<OpId>,
    ids: BTreeSet<String>,
    inputs: BTreeMap<OpId, Vec<String>>,
}

impl World {
    fn drain(&mut self) {
        while let Some(o) = self.c.poll_output() {
            match o {
                Output::Http { stream, request } => {
                    let v: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
                    self.note_id(&v);
                    self.streams.push((stream, v["id"].clone()));
                    if self.streams.len() > 64 {
                        self.streams.remove(0);
                    }
                }
                Output::Stdio(line) => {
                    let v: Value = serde_json::from_str(&line).expect("the client writes JSON");
                    self.note_id(&v);
                    self.lines.push(v);
                    if self.lines.len() > 64 {
                        self.lines.remove(0);
                    }
                }
                Output::CloseStream(_) => {}
                Output::Event(e) => self.event(e),
            }
        }
    }

    fn note_id(&mut self, v: &Value) {
        // Requests (with a method and an id) only: responses to server pings echo their id.
        if v.get("method").is_some() {
            if let Some(id) = v.get("id") {
                assert!(self.ids.insert(id.to_string()), "request id {id} reused");
            }
        }
    }

    fn event(&mut self, e: Event) {
        let named = match &e {
            Event::Result { op, .. } | Event::Failed { op, .. } | Event::Cancelled { op } => {
                assert!(self.ended.insert(*op), "{op:?} ended twice: {e:?}");
                self.inputs.remove(op);
                None
            }
            Event::Progress { op, .. } | Event::Retrying { op, .. } => Some(*op),
            Event::InputRequested { op, requests, .. } => {
                self.inputs
                    .insert(*op, requests.iter().map(|r| r.key.clone()).collect());
                Some(*op)
            }
            _ => None,
        };
        if let Some(op) = named {
            assert!(!self.ended.contains(&op), "{e:?} after the end of {op:?}");
        }
    }
}

/// A stdio input is taken on the stdio transport whatever it holds, and refused on HTTP as the
/// wrong transport (nothing else).
fn stdio_input(transport: Transport, r: Result<(), UsageError>) {
    match transport {
        Transport::Stdio => assert!(r.is_ok(), "a stdio input refused: {r:?}"),
        Transport::Http => assert!(
            matches!(r, Err(UsageError::WrongTransport { .. })),
            "a stdio input on HTTP: {r:?}"
        ),
    }
}

fuzz_target!(|input: Input| {
    let transport = if input.mode & 1 == 0 {
        Transport::Http
    } else {
        Transport::Stdio
    };
    let mut config = ClientConfig::new(transport, Implementation::new("fuzz", "0"));
    config.protocol = match (input.mode >> 1) % 3 {
        0 => ProtocolChoice::Auto,
        1 => ProtocolChoice::Modern,
        _ => ProtocolChoice::Legacy,
    };
    config.host_capabilities = ClientCapabilities::none().with_elicitation_form();
    if input.mode & 8 != 0 {
        config.capabilities = config.host_capabilities.clone();
    }
    config.versions = vec!["2026-07-28".into(), "2099-01-01".into()];
    config.max_mrtr_rounds = 3;
    let now = Instant::now();
    let mut w = World {
        c: Client::new(config),
        now,
        streams: Vec::new(),
        lines: Vec::new(),
        ended: BTreeSet::new(),
        started: Vec::new(),
        ids: BTreeSet::new(),
        inputs: BTreeMap::new(),
    };
    w.drain();
    for step in input.steps.into_iter().take(64) {
        match step {
            Step::Start { op, progress } => {
                let options = OpOptions {
                    progress,
                    ..OpOptions::default()
                };
                let id = w.c.start(w.now, operation(op), options);
                w.started.push(id);
            }
            Step::Cancel(i) => {
                if let Some(op) = w.started.get(i as usize % w.started.len().max(1)).copied() {
                    assert_eq!(w.c.cancel(w.now, op), Ok(()), "cancel of {op:?}");
                }
            }
            Step::Answer { op, key, accept } => {
                if let Some(op) = w.started.get(op as usize % w.started.len().max(1)).copied() {
                    let key = w
                        .inputs
                        .get(&op)
                        .and_then(|ks| ks.get(key as usize % ks.len().max(1)).cloned())
                        .unwrap_or_else(|| KEYS[key as usize % KEYS.len()].to_owned());
                    let answer = if accept {
                        let content = json!({"ok": true}).as_object().cloned().unwrap_or_default();
                        ElicitAnswer::Accept(content)
                    } else {
                        ElicitAnswer::Decline
                    };
                    let _ =
                        w.c.answer_input(w.now, op, &key, InputAnswer::Elicitation(answer));
                }
            }
            Step::Subscribe { tools, uri } => {
                let filter = SubscriptionFilter {
                    tools_list_changed: tools,
                    resource_subscriptions: if uri {
                        vec!["file:///r".into()]
                    } else {
                        vec![]
                    },
                    ..SubscriptionFilter::default()
                };
                let _ = w.c.subscribe(w.now, filter);
            }
            Step::Unsubscribe(n) => {
                let _ = w.c.unsubscribe(
                    w.now,
                    mcpwire_core::mcp::SubscriptionHandle(u64::from(n % 4)),
                );
            }
            Step::Reply {
                stream,
                status,
                sse,
                body,
                cuts,
            } => {
                if w.streams.is_empty() {
                    continue;
                }
                let (sid, id) = w.streams[stream as usize % w.streams.len()].clone();
                let status = STATUS[status as usize % STATUS.len()];
                let mut headers = Headers::new();
                let ct = if sse {
                    "text/event-stream"
                } else {
                    "application/json"
                };
                let _ = headers.append("content-type", ct);
                if status == 200 {
                    let _ = headers.append("mcp-session-id", "sess-1");
                }
                if status == 429 {
                    let _ = headers.append("retry-after", "1");
                }
                let mut bytes = Vec::new();
                for b in body.iter().take(4) {
                    let m = message(b, &id);
                    if sse {
                        bytes.extend_from_slice(b"event: message\r\ndata: ");
                        bytes.extend_from_slice(&m);
                        bytes.extend_from_slice(b"\r\n\r\n");
                    } else {
                        bytes.extend_from_slice(&m);
                    }
                }
                let head = ResponseHead { status, headers };
                let res =
                    w.c.handle_response_head(w.now, SystemTime::UNIX_EPOCH, sid, head);
                assert_eq!(res, Ok(()), "head of {sid:?}");
                let mut rest: &[u8] = &bytes;
                for cut in cuts.iter().take(8) {
                    let at = (*cut as usize).min(rest.len());
                    let (a, b) = rest.split_at(at);
                    let res = w.c.handle_response_data(w.now, sid, a);
                    assert_eq!(res, Ok(()), "data of {sid:?}");
                    w.drain();
                    rest = b;
                }
                let res = w.c.handle_response_data(w.now, sid, rest);
                assert_eq!(res, Ok(()), "data of {sid:?}");
                let res = w.c.handle_response_end(w.now, sid);
                assert_eq!(res, Ok(()), "end of {sid:?}");
            }
            Step::Fail(stream) => {
                if !w.streams.is_empty() {
                    let (sid, _) = w.streams[stream as usize % w.streams.len()].clone();
                    let res = w.c.handle_transport_failed(w.now, sid);
                    assert_eq!(res, Ok(()), "failure of {sid:?}");
                }
            }
            Step::Line(b) => {
                let id = w
                    .lines
                    .last()
                    .map(|l| l["id"].clone())
                    .unwrap_or(Value::Null);
                // As a child writes it: the line and its newline, read in two pieces (the
                // client cuts the lines; bytes that are not UTF-8 reach it too).
                let mut bytes = message(&b, &id);
                bytes.push(b'\n');
                let (head, tail) = bytes.split_at(bytes.len() / 2);
                stdio_input(transport, w.c.handle_stdio_bytes(w.now, head));
                stdio_input(transport, w.c.handle_stdio_bytes(w.now, tail));
            }
            Step::StdioClosed => {
                stdio_input(transport, w.c.handle_stdio_closed(w.now));
            }
            Step::StdioOpen => {
                stdio_input(transport, w.c.handle_stdio_open(w.now));
            }
            Step::Advance(ms) => {
                w.now += Duration::from_millis(u64::from(ms) * 16);
                w.c.handle_timeout(w.now);
                w.drain();
                if let Some(next) = w.c.poll_timeout().map(|t| t.at) {
                    assert!(next > w.now, "a deadline in the past after handle_timeout");
                }
            }
            Step::Shutdown => w.c.shutdown(w.now),
        }
        w.drain();
    }
});

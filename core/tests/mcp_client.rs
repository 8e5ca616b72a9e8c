//! Transcript tests of `mcp::Client`, the whole client of one server, driven by the REAL
//! exchanges recorded under `fixtures/mcp/<server>/<transport>/` (PyPI `mcp==2.3.0`, npm
//! `@modelcontextprotocol/server@2.4.0`, `@modelcontextprotocol/server-everything@2026.8.31`).
//!
//! A scripted server answers each request the client emits with the recorded response (its ids
//! rewritten to the ids our client chose, nothing else touched), on a simulated clock. Each
//! test's doc comment names the spec section it holds (`shared/spec/mcp-2026-07-28/`, the legacy
//! `mcp-2025-11-25-legacy/`, the client guide `mcp-client-guide-2026-07-28.txt`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use mcpwire_core::http::{Headers, Method, ResponseHead};
use mcpwire_core::mcp::mrtr::MrtrError;
use mcpwire_core::mcp::{
    CacheConfig, CachePolicy, CachedEra, CallOptions, CapabilityError, Client, ClientCapabilities,
    ClientConfig, ElicitAnswer, Era, EraEvidence, Event, Implementation, IncompatibleError,
    InputAnswer, ListKind, OpError, OpId, OpOptions, Operation, Output, ProtocolChoice,
    ProtocolError, ResultSource, RetryReason, StaleIfError, StreamId, SubscriptionChange,
    SubscriptionEndReason, SubscriptionEvent, SubscriptionFilter, Transport, TransportError,
    VersionError,
};
use serde_json::{json, Map, Value};

// ---------------------------------------------------------------------------------------------
// Fixtures and the scripted server.

fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures/mcp")
}

fn fx(rel: &str) -> Value {
    let path = fixtures_dir().join(rel);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

fn info() -> Implementation {
    Implementation::new("mcpwire-test", "0.1.0")
}

/// HTTP, a tool call sent at once (see [`Harness::http`]).
fn recorded_http_config() -> ClientConfig {
    let mut config = ClientConfig::new(Transport::Http, info());
    config.list_tools_before_call = false;
    config
}

/// What the client sent on one stream.
#[derive(Debug)]
struct Sent {
    stream: StreamId,
    method: Method,
    headers: Headers,
    body: Value,
}

impl Sent {
    fn id(&self) -> Value {
        self.body["id"].clone()
    }
    fn rpc_method(&self) -> &str {
        self.body["method"].as_str().unwrap_or("")
    }
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name)
    }
}

struct Harness {
    c: Client,
    now: Instant,
    events: Vec<Event>,
    sent: Vec<Sent>,
    lines: Vec<Value>,
    closed: Vec<StreamId>,
}

impl Harness {
    fn new(config: ClientConfig) -> Self {
        let mut h = Harness {
            c: Client::new(config),
            now: Instant::now(),
            events: Vec::new(),
            sent: Vec::new(),
            lines: Vec::new(),
            closed: Vec::new(),
        };
        h.drain();
        h
    }

    /// HTTP with the defaults, except that a tool call goes out at once: most recorded
    /// exchanges call a tool without listing first (the listing before a call has its own
    /// tests, with [`Harness::http_default`]).
    fn http() -> Self {
        Self::new(recorded_http_config())
    }

    fn http_default() -> Self {
        Self::new(ClientConfig::new(Transport::Http, info()))
    }

    fn drain(&mut self) {
        while let Some(o) = self.c.poll_output() {
            match o {
                Output::Http { stream, request } => self.sent.push(Sent {
                    stream,
                    method: request.method,
                    headers: request.headers,
                    body: if request.body.is_empty() {
                        Value::Null
                    } else {
                        serde_json::from_slice(&request.body).unwrap()
                    },
                }),
                Output::CloseStream(s) => self.closed.push(s),
                Output::Stdio(line) => self.lines.push(serde_json::from_str(&line).unwrap()),
                Output::Event(e) => self.events.push(e),
            }
        }
    }

    /// The next HTTP request the client sent (in order).
    fn next_sent(&mut self) -> Sent {
        self.drain();
        assert!(
            !self.sent.is_empty(),
            "the client sent nothing; events: {:?}",
            self.events
        );
        self.sent.remove(0)
    }

    fn next_line(&mut self) -> Value {
        self.drain();
        assert!(
            !self.lines.is_empty(),
            "the client wrote nothing; events: {:?}",
            self.events
        );
        self.lines.remove(0)
    }

    fn take_events(&mut self) -> Vec<Event> {
        self.drain();
        std::mem::take(&mut self.events)
    }

    fn advance(&mut self, d: Duration) {
        self.now += d;
        self.c.handle_timeout(self.now);
        self.drain();
    }

    /// Answers `sent` with a raw HTTP response.
    fn reply(&mut self, stream: StreamId, status: u16, headers: &[(&str, &str)], body: &str) {
        let mut h = Headers::new();
        for (k, v) in headers {
            h.append(*k, *v).unwrap();
        }
        self.c
            .handle_response_head(
                self.now,
                SystemTime::now(),
                stream,
                ResponseHead { status, headers: h },
            )
            .unwrap();
        // Split the body in two chunks to exercise incremental parsing.
        let mid = body.len() / 2;
        let mid = (0..=mid)
            .rev()
            .find(|i| body.is_char_boundary(*i))
            .unwrap_or(0);
        self.c
            .handle_response_data(self.now, stream, &body.as_bytes()[..mid])
            .unwrap();
        self.c
            .handle_response_data(self.now, stream, &body.as_bytes()[mid..])
            .unwrap();
        self.c.handle_response_end(self.now, stream).unwrap();
        self.drain();
    }

    /// Answers `sent` with the recorded HTTP response of fixture `rel`, its ids rewritten.
    fn reply_fx(&mut self, sent: &Sent, rel: &str) {
        let f = fx(rel);
        let recorded_id = f["request"]["body"]["id"].clone();
        let resp = &f["response"];
        let status = resp["status"].as_u64().unwrap() as u16;
        let mut headers: Vec<(String, String)> = Vec::new();
        for (k, v) in resp["headers"].as_object().unwrap() {
            if k == "content-length" || k == "transfer-encoding" {
                continue;
            }
            headers.push((k.clone(), v.as_str().unwrap().to_owned()));
        }
        let body = if let Some(events) = resp.get("sse_events").and_then(Value::as_array) {
            let mut text = String::new();
            for ev in events {
                let data = match &ev["data"] {
                    Value::String(s) => s.clone(),
                    v => rewrite_ids(v.clone(), &recorded_id, &sent.id()).to_string(),
                };
                text.push_str(&format!(
                    "event: {}\ndata: {}\n\n",
                    ev["event"].as_str().unwrap_or("message"),
                    data
                ));
            }
            text
        } else {
            match &resp["body"] {
                Value::String(s) => s.clone(),
                Value::Null => String::new(),
                v => rewrite_ids(v.clone(), &recorded_id, &sent.id()).to_string(),
            }
        };
        let hs: Vec<(&str, &str)> = headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        self.reply(sent.stream, status, &hs, &body);
    }

    /// stdio: feeds the recorded lines of fixture `rel` (messages, then the response).
    fn reply_line_fx(&mut self, sent: &Value, rel: &str) {
        let f = fx(rel);
        let recorded_id = f["request"]["body"]["id"].clone();
        let resp = &f["response"];
        if let Some(ms) = resp.get("messages").and_then(Value::as_array) {
            for m in ms {
                let m = rewrite_ids(m.clone(), &recorded_id, &sent["id"]);
                self.c.handle_stdio_line(self.now, &m.to_string()).unwrap();
            }
        }
        if !resp["body"].is_null() {
            let m = rewrite_ids(resp["body"].clone(), &recorded_id, &sent["id"]);
            self.c.handle_stdio_line(self.now, &m.to_string()).unwrap();
        }
        self.drain();
    }
}

/// Replaces the recorded request id by ours wherever a message refers to the request: its `id`,
/// a subscription id, a cancellation's `requestId`.
fn rewrite_ids(mut v: Value, recorded: &Value, ours: &Value) -> Value {
    if v.get("id") == Some(recorded) {
        v["id"] = ours.clone();
    }
    if let Some(meta) = v.pointer_mut("/params/_meta") {
        if meta.get("io.modelcontextprotocol/subscriptionId") == Some(recorded) {
            meta["io.modelcontextprotocol/subscriptionId"] = ours.clone();
        }
    }
    if let Some(p) = v.get_mut("params") {
        if p.get("requestId") == Some(recorded) {
            p["requestId"] = ours.clone();
        }
    }
    v
}

fn result_of(events: &[Event], op: OpId) -> Option<(Value, bool, ResultSource)> {
    events.iter().find_map(|e| match e {
        Event::Result {
            op: o,
            result,
            is_error,
            source,
        } if *o == op => Some((serde_json::from_str(result).unwrap(), *is_error, *source)),
        _ => None,
    })
}

fn failure_of(events: &[Event], op: OpId) -> Option<OpError> {
    events.iter().find_map(|e| match e {
        Event::Failed { op: o, error } if *o == op => Some(error.clone()),
        _ => None,
    })
}

fn obj(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap()
}

fn header_map(h: &Headers) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = h
        .iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), v.to_owned()))
        .collect();
    v.sort();
    v
}

fn recorded_headers(rel: &str) -> Vec<(String, String)> {
    let f = fx(rel);
    let mut v: Vec<(String, String)> = f["request"]["headers"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), v.as_str().unwrap().to_owned()))
        .collect();
    v.sort();
    v
}

// ---------------------------------------------------------------------------------------------
// Request building and era detection on Streamable HTTP.

/// `basic/transports/streamable-http.mdx`, "Standard Request Headers" and "Backward
/// Compatibility" (send a modern request first); `basic/index.mdx` "Per-request protocol
/// fields": the first request is modern, self-contained, its headers mirror its body exactly as
/// the recorded request the real Python server accepted; the answer settles the era.
#[test]
fn http_first_request_is_modern_and_its_headers_equal_the_accepted_ones() {
    let mut h = Harness::http();
    let op = h.c.discover(h.now);
    let s = h.next_sent();
    assert_eq!(s.method, Method::Post);
    assert_eq!(s.rpc_method(), "server/discover");
    let meta = &s.body["params"]["_meta"];
    assert_eq!(
        meta["io.modelcontextprotocol/protocolVersion"],
        "2026-07-28"
    );
    assert_eq!(
        meta["io.modelcontextprotocol/clientInfo"]["name"],
        "mcpwire-test"
    );
    assert_eq!(
        meta["io.modelcontextprotocol/clientCapabilities"],
        json!({})
    );
    assert_eq!(
        header_map(&s.headers),
        recorded_headers("python-sdk/http/01-server-discover.json")
    );
    h.reply_fx(&s, "python-sdk/http/01-server-discover.json");
    let ev = h.take_events();
    assert!(ev.contains(&Event::EraDetected {
        era: Era::Modern,
        version: "2026-07-28".into(),
        evidence: EraEvidence::ModernAnswer
    }));
    let (result, is_error, source) = result_of(&ev, op).unwrap();
    assert_eq!(result["supportedVersions"], json!(["2026-07-28"]));
    assert!(!is_error);
    assert_eq!(source, ResultSource::Server);
    assert_eq!(
        h.c.era(),
        Some(CachedEra {
            era: Era::Modern,
            protocol_version: Some("2026-07-28".into())
        })
    );
}

/// `basic/transports/streamable-http.mdx`, "Custom Headers from Tool Parameters": after
/// `tools/list`, a call carries `Mcp-Param-{Name}` from the tool's `x-mcp-header`; the headers
/// equal the ones the real Python server accepted for the same call.
#[test]
fn tools_call_mirrors_x_mcp_header_arguments_from_the_latest_tools_list() {
    let mut h = Harness::http();
    let list = h.c.list(h.now, ListKind::Tools, None);
    let s = h.next_sent();
    h.reply_fx(&s, "python-sdk/http/02-tools-list.json");
    assert!(result_of(&h.take_events(), list).is_some());
    assert!(h.c.tool_headers("query_region").is_some());
    let args = obj(json!({"region": "us-west1", "query": "SELECT 1"}));
    let call =
        h.c.call_tool(h.now, "query_region", args, OpOptions::default());
    let s = h.next_sent();
    assert_eq!(
        header_map(&s.headers),
        recorded_headers("python-sdk/http/04-tools-call-header-param.json")
    );
    h.reply_fx(&s, "python-sdk/http/04-tools-call-header-param.json");
    let (result, is_error, _) = result_of(&h.take_events(), call).unwrap();
    assert!(!is_error);
    assert!(result["content"].is_array());
}

/// `basic/transports/streamable-http.mdx`, "Custom Headers from Tool Parameters" (client
/// behavior): a tool whose `x-mcp-header` breaks the rules is excluded from the listed tools with
/// a warning naming it and the reason; the other tools stay usable; calling it is refused.
#[test]
fn a_tool_with_an_invalid_x_mcp_header_is_excluded_and_the_others_stay() {
    let mut h = Harness::http();
    let list = h.c.list(h.now, ListKind::Tools, None);
    let s = h.next_sent();
    let body = json!({"jsonrpc": "2.0", "id": s.id(), "result": {"tools": [
        {"name": "good", "inputSchema": {"type": "object", "properties": {"r": {"type": "string", "x-mcp-header": "Region"}}}},
        {"name": "bad", "inputSchema": {"type": "object", "properties": {"r": {"type": "string", "x-mcp-header": "A B"}}}}
    ]}});
    h.reply(
        s.stream,
        200,
        &[("content-type", "application/json")],
        &body.to_string(),
    );
    let ev = h.take_events();
    let excluded: Vec<_> = ev
        .iter()
        .filter_map(|e| match e {
            Event::ToolExcluded { tool, reason } => Some((tool.clone(), reason.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(excluded.len(), 1);
    assert_eq!(excluded[0].0, "bad");
    assert!(excluded[0].1.contains("A B"), "{}", excluded[0].1);
    let (result, _, _) = result_of(&ev, list).unwrap();
    let names: Vec<&str> = result["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["good"]);
    let bad =
        h.c.call_tool(h.now, "bad", obj(json!({"r": "x"})), OpOptions::default());
    let ev = h.take_events();
    assert!(
        matches!(failure_of(&ev, bad), Some(OpError::Incompatible(IncompatibleError::ToolExcluded { ref tool, .. })) if tool == "bad")
    );
    assert!(h.sent.is_empty(), "an excluded tool is not called");
    h.c.call_tool(h.now, "good", obj(json!({"r": "eu"})), OpOptions::default());
    let s = h.next_sent();
    assert_eq!(s.header("Mcp-Param-Region"), Some("eu"));
}

/// `basic/transports/streamable-http.mdx`, "Backward Compatibility": a 400 whose body is not a
/// recognized modern error ("Bad Request: Server not initialized" from server-everything) means
/// legacy: `initialize`, `notifications/initialized`, then the same operation in the session,
/// with `Mcp-Session-Id` and `MCP-Protocol-Version` (legacy `basic/transports.mdx`, "Session
/// Management", "Protocol Version Header").
#[test]
fn http_falls_back_to_initialize_on_a_legacy_400_and_resends_the_operation() {
    let mut h = Harness::http();
    let list = h.c.list(h.now, ListKind::Tools, None);
    let first = h.next_sent();
    h.reply_fx(&first, "server-everything/http/02-modern-tools-list.json");
    let ev = h.take_events();
    assert!(ev.contains(&Event::Retrying {
        op: list,
        reason: RetryReason::LegacyFallback
    }));
    let init = h.next_sent();
    assert_eq!(init.rpc_method(), "initialize");
    assert_eq!(init.body["params"]["protocolVersion"], "2025-11-25");
    assert_eq!(init.header("Mcp-Session-Id"), None);
    assert_ne!(init.id(), first.id(), "a new id for the resend");
    h.reply_fx(&init, "server-everything/http/03-legacy-initialize.json");
    let ev = h.take_events();
    assert!(ev.contains(&Event::EraDetected {
        era: Era::Legacy,
        version: "2025-11-25".into(),
        evidence: EraEvidence::HttpStatus(400)
    }));
    // Legacy "Listening for Messages from the Server": the session's GET stream, answered
    // before the session's requests go out.
    let (sid, listen) = legacy_session_ready(&mut h);
    let recorded = fx("server-everything/http/03-legacy-initialize.json");
    assert_eq!(
        recorded["response"]["headers"]["mcp-session-id"].as_str(),
        Some(sid.as_str())
    );
    assert_eq!(listen.header("MCP-Protocol-Version"), Some("2025-11-25"));
    let again = h.next_sent();
    assert_eq!(again.rpc_method(), "tools/list");
    assert!(
        again.body["params"].get("_meta").is_none(),
        "no modern _meta in the legacy era"
    );
    assert_eq!(again.header("Mcp-Session-Id"), Some(sid.as_str()));
    assert_eq!(again.header("MCP-Protocol-Version"), Some("2025-11-25"));
    h.reply_fx(&again, "server-everything/http/05-legacy-tools-list.json");
    let (result, _, source) = result_of(&h.take_events(), list).unwrap();
    assert_eq!(source, ResultSource::Server);
    assert!(!result["tools"].as_array().unwrap().is_empty());
    // discover in the legacy era is answered from the initialize result, with nothing sent.
    let d = h.c.discover(h.now);
    let (result, _, source) = result_of(&h.take_events(), d).unwrap();
    assert_eq!(source, ResultSource::Handshake);
    assert_eq!(result["supportedVersions"], json!(["2025-11-25"]));
    assert!(h.sent.is_empty());
}

/// `basic/transports/streamable-http.mdx`, "Backward Compatibility": a client pinned to the
/// modern era does not fall back; an empty 400 is a typed "legacy server" error, and a
/// JSON-RPC error body is the request's answer.
#[test]
fn a_client_pinned_to_modern_does_not_fall_back() {
    let mut config = ClientConfig::new(Transport::Http, info());
    config.protocol = ProtocolChoice::Modern;
    let mut h = Harness::new(config);
    let list = h.c.list(h.now, ListKind::Tools, None);
    let first = h.next_sent();
    h.reply(
        first.stream,
        400,
        &[("content-type", "text/plain")],
        "Missing session ID",
    );
    assert_eq!(
        failure_of(&h.take_events(), list),
        Some(OpError::Incompatible(IncompatibleError::LegacyServer {
            status: 400,
            error: None
        }))
    );
    assert!(h.sent.is_empty());
}

/// `basic/transports/streamable-http.mdx`, "Backward Compatibility": pinned to modern, a
/// legacy server's 400 with a JSON-RPC error body (before any modern answer: what automatic
/// detection takes as legacy evidence) is reported as a legacy-looking server, carrying that
/// error, with a hint to detect the era automatically.
#[test]
fn a_client_pinned_to_modern_reports_a_legacy_looking_server_with_its_error_body() {
    let mut config = ClientConfig::new(Transport::Http, info());
    config.protocol = ProtocolChoice::Modern;
    let mut h = Harness::new(config);
    let list = h.c.list(h.now, ListKind::Tools, None);
    let first = h.next_sent();
    h.reply_fx(&first, "server-everything/http/02-modern-tools-list.json");
    let ev = h.take_events();
    // server-everything's body is a JSON-RPC error with id null: legacy evidence, no fallback.
    let e = failure_of(&ev, list).unwrap();
    assert!(
        matches!(&e, OpError::Incompatible(IncompatibleError::LegacyServer { status: 400, error: Some(o) }) if o.code == -32000),
        "{e:?}"
    );
    let text = e.to_string();
    assert!(
        text.contains("answered like a 2025-11-25 (legacy) server")
            && text.contains("-32000")
            && text.contains("--protocol auto"),
        "{text}"
    );
    assert!(h.sent.iter().all(|s| s.rpc_method() != "initialize"));
}

/// `basic/transports/streamable-http.mdx`, "Backward Compatibility": 404 with `-32601` is a
/// modern server without the method; the era stays modern and the error is the answer.
#[test]
fn a_404_method_not_found_is_a_modern_answer_not_a_fallback() {
    let mut h = Harness::http();
    let op = h.c.start(
        h.now,
        Operation::ReadResource {
            uri: "no/such/method".into(),
        },
        OpOptions::default(),
    );
    let s = h.next_sent();
    h.reply_fx(&s, "python-sdk/http/24-method-not-found.json");
    let ev = h.take_events();
    assert!(matches!(failure_of(&ev, op), Some(OpError::Server(e)) if e.code == -32601));
    assert!(h.sent.is_empty(), "no initialize");
}

/// `basic/versioning.mdx`, "Protocol Version Negotiation": `-32022` with `data.supported` picks
/// the highest common version and retries with a new id (the real Python server's answer).
#[test]
fn unsupported_version_retries_with_the_highest_common_version() {
    let mut config = ClientConfig::new(Transport::Http, info());
    config.versions = vec!["2026-07-28".into(), "2099-01-01".into()];
    let mut h = Harness::new(config);
    let op = h.c.list(h.now, ListKind::Tools, None);
    let first = h.next_sent();
    assert_eq!(first.header("MCP-Protocol-Version"), Some("2099-01-01"));
    h.reply_fx(
        &first,
        "python-sdk/http/26-unsupported-protocol-version.json",
    );
    let ev = h.take_events();
    assert!(ev.contains(&Event::Retrying {
        op,
        reason: RetryReason::Version("2026-07-28".into())
    }));
    let retry = h.next_sent();
    assert_ne!(retry.id(), first.id());
    assert_eq!(retry.header("MCP-Protocol-Version"), Some("2026-07-28"));
    assert_eq!(
        retry.body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
        "2026-07-28"
    );
    h.reply_fx(&retry, "python-sdk/http/02-tools-list.json");
    assert!(result_of(&h.take_events(), op).is_some());
    // Later requests use the negotiated version at once.
    h.c.list(h.now, ListKind::Prompts, None);
    assert_eq!(
        h.next_sent().header("MCP-Protocol-Version"),
        Some("2026-07-28")
    );
}

/// `basic/versioning.mdx`: no version in common is a typed error naming both lists.
#[test]
fn unsupported_version_without_a_common_one_names_both_lists() {
    let mut config = ClientConfig::new(Transport::Http, info());
    config.versions = vec!["2099-01-01".into()];
    let mut h = Harness::new(config);
    let op = h.c.list(h.now, ListKind::Tools, None);
    let first = h.next_sent();
    h.reply_fx(
        &first,
        "python-sdk/http/26-unsupported-protocol-version.json",
    );
    match failure_of(&h.take_events(), op) {
        Some(OpError::Incompatible(IncompatibleError::Version(
            VersionError::NoCommonVersion {
                ours, supported, ..
            },
        ))) => {
            assert_eq!(ours, ["2099-01-01"]);
            assert_eq!(supported, ["2026-07-28"]);
        }
        other => panic!("{other:?}"),
    }
}

/// `basic/index.mdx`, "Per-request protocol fields" (`-32021`): the missing capability is
/// declared when the host supports it and the request retried; otherwise a typed error.
#[test]
fn missing_capability_is_declared_when_the_host_supports_it() {
    let mut config = recorded_http_config();
    config.host_capabilities = ClientCapabilities::none().with_elicitation_form();
    let mut h = Harness::new(config);
    let op = h.c.call_tool(
        h.now,
        "confirm_action",
        obj(json!({"target": "prod"})),
        OpOptions::default(),
    );
    let first = h.next_sent();
    assert_eq!(
        first.body["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"],
        json!({})
    );
    h.reply_fx(
        &first,
        "python-sdk/http/10-tools-call-elicit-no-capability.json",
    );
    assert!(h.take_events().contains(&Event::Retrying {
        op,
        reason: RetryReason::Capabilities
    }));
    let retry = h.next_sent();
    assert_ne!(retry.id(), first.id());
    assert_eq!(
        retry.body["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"],
        json!({"elicitation": {"form": {}}})
    );

    let mut h = Harness::http();
    let op = h.c.call_tool(
        h.now,
        "confirm_action",
        obj(json!({"target": "prod"})),
        OpOptions::default(),
    );
    let first = h.next_sent();
    h.reply_fx(
        &first,
        "python-sdk/http/10-tools-call-elicit-no-capability.json",
    );
    assert!(matches!(
        failure_of(&h.take_events(), op),
        Some(OpError::Incompatible(IncompatibleError::Capability(
            CapabilityError::HostLacks { .. }
        )))
    ));
}

/// `basic/transports/streamable-http.mdx`, "Server Validation" (`-32020`): the client refreshes
/// `tools/list` and retries once with the new headers; a second mismatch is a typed error.
#[test]
fn header_mismatch_refreshes_tools_list_and_retries_once() {
    let mut h = Harness::http();
    let args = obj(json!({"region": "us-west1", "query": "SELECT 1"}));
    let op =
        h.c.call_tool(h.now, "query_region", args, OpOptions::default());
    let first = h.next_sent();
    assert_eq!(
        first.header("Mcp-Param-Region"),
        None,
        "the schema was never seen"
    );
    let mismatch = |id: &Value| {
        json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32020, "message": "Header mismatch: Mcp-Param-Region"}})
            .to_string()
    };
    h.reply(
        first.stream,
        400,
        &[("content-type", "application/json")],
        &mismatch(&first.id()),
    );
    let refresh = h.next_sent();
    assert_eq!(refresh.rpc_method(), "tools/list");
    h.reply_fx(&refresh, "python-sdk/http/02-tools-list.json");
    assert!(h.take_events().contains(&Event::Retrying {
        op,
        reason: RetryReason::HeadersRefreshed
    }));
    let retry = h.next_sent();
    assert_eq!(retry.header("Mcp-Param-Region"), Some("us-west1"));
    assert_ne!(retry.id(), first.id());
    h.reply(
        retry.stream,
        400,
        &[("content-type", "application/json")],
        &mismatch(&retry.id()),
    );
    assert!(matches!(
        failure_of(&h.take_events(), op),
        Some(OpError::Incompatible(
            IncompatibleError::HeaderMismatch { .. }
        ))
    ));
    assert!(h.sent.is_empty(), "retried once only");
}

// ---------------------------------------------------------------------------------------------
// MRTR.

/// A legacy-pinned HTTP client without the session's GET stream (for tests of other things).
fn legacy_quiet_config() -> ClientConfig {
    let mut config = ClientConfig::new(Transport::Http, info());
    config.protocol = ProtocolChoice::Legacy;
    config.legacy_listen = false;
    config
}

fn elicit_config() -> ClientConfig {
    recorded_http_config().with_capabilities(ClientCapabilities::none().with_elicitation_form())
}

/// `basic/patterns/mrtr.mdx`, "Client Requirements": an `input_required` result surfaces its
/// input requests; the retry carries a new id, `inputResponses` under the same keys and
/// `requestState` byte-exact — equal to the retry the real Python server accepted.
#[test]
fn mrtr_accept_round_trip_matches_the_accepted_retry() {
    let mut h = Harness::new(elicit_config());
    let op = h.c.call_tool(
        h.now,
        "confirm_action",
        obj(json!({"target": "prod"})),
        OpOptions::default(),
    );
    let first = h.next_sent();
    h.reply_fx(
        &first,
        "python-sdk/http/11-tools-call-elicit-input-required.json",
    );
    let ev = h.take_events();
    let requests = ev
        .iter()
        .find_map(|e| match e {
            Event::InputRequested {
                op: o,
                round,
                requests,
            } if *o == op => Some((*round, requests.clone())),
            _ => None,
        })
        .unwrap();
    assert_eq!(requests.0, 1);
    assert_eq!(requests.1.len(), 1);
    let key = requests.1[0].key.clone();
    assert!(h.sent.is_empty(), "nothing is sent before the host answers");
    h.c.answer_input(
        h.now,
        op,
        &key,
        InputAnswer::Elicitation(ElicitAnswer::Accept(obj(json!({"confirm": true})))),
    )
    .unwrap();
    let retry = h.next_sent();
    assert_ne!(retry.id(), first.id());
    let accepted =
        fx("python-sdk/http/12-tools-call-elicit-retry.json")["request"]["body"]["params"].clone();
    assert_eq!(
        retry.body["params"]["inputResponses"],
        accepted["inputResponses"]
    );
    assert_eq!(
        retry.body["params"]["requestState"],
        accepted["requestState"]
    );
    assert_eq!(retry.body["params"]["arguments"], accepted["arguments"]);
    h.reply_fx(&retry, "python-sdk/http/12-tools-call-elicit-retry.json");
    let (result, is_error, _) = result_of(&h.take_events(), op).unwrap();
    assert!(!is_error);
    assert_eq!(result["structuredContent"]["result"], "confirmed: prod");
}

/// `basic/patterns/mrtr.mdx` and `client/elicitation.mdx` ("decline"): a declined elicitation
/// goes back as `{"action":"decline"}`; the tool's failure is a result with `isError: true`,
/// not a protocol error (`server/tools.mdx`, "Error Handling").
#[test]
fn mrtr_decline_is_sent_and_the_tool_error_is_a_result() {
    let mut h = Harness::new(elicit_config());
    let op = h.c.call_tool(
        h.now,
        "confirm_action",
        obj(json!({"target": "prod"})),
        OpOptions::default(),
    );
    let first = h.next_sent();
    h.reply_fx(
        &first,
        "python-sdk/http/11-tools-call-elicit-input-required.json",
    );
    let key = h
        .take_events()
        .into_iter()
        .find_map(|e| match e {
            Event::InputRequested { requests, .. } => Some(requests[0].key.clone()),
            _ => None,
        })
        .unwrap();
    h.c.answer_input(
        h.now,
        op,
        &key,
        InputAnswer::Elicitation(ElicitAnswer::Decline),
    )
    .unwrap();
    let retry = h.next_sent();
    assert_eq!(
        retry.body["params"]["inputResponses"][&key],
        json!({"action": "decline"})
    );
    h.reply_fx(
        &retry,
        "python-sdk/http/13-tools-call-elicit-retry-declined.json",
    );
    let (_, is_error, _) = result_of(&h.take_events(), op).unwrap();
    assert!(is_error);
}

/// A tool call whose server asked for a confirmation (the recorded Python exchange): the
/// harness, the operation and the input request's key.
fn awaiting_confirmation() -> (Harness, OpId, String) {
    let mut h = Harness::new(elicit_config());
    let op = h.c.call_tool(
        h.now,
        "confirm_action",
        obj(json!({"target": "prod"})),
        OpOptions::default(),
    );
    let first = h.next_sent();
    h.reply_fx(
        &first,
        "python-sdk/http/11-tools-call-elicit-input-required.json",
    );
    let key = h
        .take_events()
        .into_iter()
        .find_map(|e| match e {
            Event::InputRequested { requests, .. } => Some(requests[0].key.clone()),
            _ => None,
        })
        .unwrap();
    (h, op, key)
}

/// `basic/patterns/mrtr.mdx`: an answer that does not fit `requestedSchema` is refused before
/// anything is sent, and the operation keeps waiting for a valid one.
#[test]
fn mrtr_answers_are_validated_before_sending() {
    let (mut h, op, key) = awaiting_confirmation();
    let bad = InputAnswer::Elicitation(ElicitAnswer::Accept(obj(json!({"confirm": "yes"}))));
    assert!(h.c.answer_input(h.now, op, &key, bad).is_err());
    h.drain();
    assert!(h.sent.is_empty());
    let good = InputAnswer::Elicitation(ElicitAnswer::Accept(obj(json!({"confirm": false}))));
    h.c.answer_input(h.now, op, &key, good).unwrap();
    assert_eq!(
        h.next_sent().body["params"]["inputResponses"][&key]["content"]["confirm"],
        false
    );
}

/// `basic/patterns/mrtr.mdx`: a round limit stops a server that keeps asking.
#[test]
fn mrtr_round_limit_is_a_typed_error() {
    let mut config = elicit_config();
    config.max_mrtr_rounds = 1;
    let mut h = Harness::new(config);
    let op = h.c.call_tool(
        h.now,
        "confirm_action",
        obj(json!({"target": "prod"})),
        OpOptions::default(),
    );
    let first = h.next_sent();
    h.reply_fx(
        &first,
        "python-sdk/http/11-tools-call-elicit-input-required.json",
    );
    let key = h
        .take_events()
        .into_iter()
        .find_map(|e| match e {
            Event::InputRequested { requests, .. } => Some(requests[0].key.clone()),
            _ => None,
        })
        .unwrap();
    let yes = InputAnswer::Elicitation(ElicitAnswer::Accept(obj(json!({"confirm": true}))));
    h.c.answer_input(h.now, op, &key, yes).unwrap();
    let retry = h.next_sent();
    // The server asks again.
    h.reply_fx(
        &retry,
        "python-sdk/http/11-tools-call-elicit-input-required.json",
    );
    assert!(matches!(
        failure_of(&h.take_events(), op),
        Some(OpError::Protocol(ProtocolError::Mrtr(
            MrtrError::RoundLimitExceeded { limit: 1 }
        )))
    ));
}

/// `basic/patterns/mrtr.mdx` and `basic/patterns/caching.mdx`: the result of a retry that
/// carried `inputResponses`/`requestState` is never cached.
#[test]
fn an_mrtr_retry_result_is_not_cached() {
    let mut h = Harness::new(elicit_config());
    let read = || Operation::ReadResource {
        uri: "fixture://secret".into(),
    };
    let op = h.c.start(h.now, read(), OpOptions::default());
    let first = h.next_sent();
    let ir = json!({"jsonrpc": "2.0", "id": first.id(), "result": {"resultType": "input_required",
        "inputRequests": {"k": {"method": "elicitation/create", "params": {"message": "ok?", "mode": "form",
        "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}}}},
        "requestState": "s1"}});
    h.reply(
        first.stream,
        200,
        &[("content-type", "application/json")],
        &ir.to_string(),
    );
    h.c.answer_input(
        h.now,
        op,
        "k",
        InputAnswer::Elicitation(ElicitAnswer::Accept(obj(json!({"ok": true})))),
    )
    .unwrap();
    let retry = h.next_sent();
    let done =
        json!({"jsonrpc": "2.0", "id": retry.id(), "result": {"contents": [], "ttlMs": 600000}});
    h.reply(
        retry.stream,
        200,
        &[("content-type", "application/json")],
        &done.to_string(),
    );
    assert!(result_of(&h.take_events(), op).is_some());
    h.c.start(h.now, read(), OpOptions::default());
    let again = h.next_sent();
    assert_eq!(
        again.rpc_method(),
        "resources/read",
        "not served from the cache"
    );
    assert!(
        again.body["params"].get("inputResponses").is_none(),
        "nothing leaks into another request"
    );
    assert!(again.body["params"].get("requestState").is_none());
}

// ---------------------------------------------------------------------------------------------
// Caching.

/// `basic/patterns/caching.mdx`: a result is fresh within `ttlMs` of receipt (a second list
/// sends nothing), stale after; `list_changed` invalidates at once.
#[test]
fn a_list_is_served_from_the_cache_within_ttl_and_refetched_after_list_changed() {
    let mut h = Harness::http();
    let op = h.c.list(h.now, ListKind::Tools, None);
    let s = h.next_sent();
    let body = json!({"jsonrpc": "2.0", "id": s.id(), "result": {"tools": [], "ttlMs": 60000, "cacheScope": "public"}});
    h.reply(
        s.stream,
        200,
        &[("content-type", "application/json")],
        &body.to_string(),
    );
    assert_eq!(
        result_of(&h.take_events(), op).unwrap().2,
        ResultSource::Server
    );
    h.advance(Duration::from_secs(30));
    let op2 = h.c.list(h.now, ListKind::Tools, None);
    assert_eq!(
        result_of(&h.take_events(), op2).unwrap().2,
        ResultSource::Cache
    );
    assert!(h.sent.is_empty(), "nothing sent within ttlMs");
    // A list_changed notification (here on a call's stream) invalidates at once.
    let call = h.c.call_tool(h.now, "x", Map::new(), OpOptions::default());
    let s = h.next_sent();
    let sse = format!(
        "event: message\ndata: {}\n\nevent: message\ndata: {}\n\n",
        json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}),
        json!({"jsonrpc": "2.0", "id": s.id(), "result": {"content": []}})
    );
    h.reply(
        s.stream,
        200,
        &[("content-type", "text/event-stream")],
        &sse,
    );
    let ev = h.take_events();
    assert!(result_of(&ev, call).is_some());
    assert!(ev.iter().any(|e| matches!(e, Event::Notification { method, .. } if method == "notifications/tools/list_changed")));
    h.c.list(h.now, ListKind::Tools, None);
    assert_eq!(h.next_sent().rpc_method(), "tools/list");
    // And past ttlMs without any notification.
    let mut h2 = Harness::http();
    h2.c.list(h2.now, ListKind::Prompts, None);
    let s = h2.next_sent();
    let body = json!({"jsonrpc": "2.0", "id": s.id(), "result": {"prompts": [], "ttlMs": 1000}});
    h2.reply(
        s.stream,
        200,
        &[("content-type", "application/json")],
        &body.to_string(),
    );
    h2.advance(Duration::from_millis(1001));
    h2.c.list(h2.now, ListKind::Prompts, None);
    assert_eq!(h2.next_sent().rpc_method(), "prompts/list");
}

/// `basic/patterns/caching.mdx`, "Interaction with Pagination": `-32602` to a list request with
/// a cursor (the real Python server's answer to a bad cursor is a 200 with the first page; the
/// error here is the spec's) discards every cached page of that list.
#[test]
fn an_invalid_cursor_discards_the_cached_pages() {
    let mut h = Harness::http();
    h.c.list(h.now, ListKind::Tools, None);
    let s = h.next_sent();
    let body = json!({"jsonrpc": "2.0", "id": s.id(), "result": {"tools": [], "ttlMs": 60000, "nextCursor": "c2"}});
    h.reply(
        s.stream,
        200,
        &[("content-type", "application/json")],
        &body.to_string(),
    );
    let op = h.c.list(h.now, ListKind::Tools, Some("c2"));
    let s = h.next_sent();
    assert_eq!(s.body["params"]["cursor"], "c2");
    let err = json!({"jsonrpc": "2.0", "id": s.id(), "error": {"code": -32602, "message": "Invalid cursor"}});
    h.reply(
        s.stream,
        200,
        &[("content-type", "application/json")],
        &err.to_string(),
    );
    assert!(
        matches!(failure_of(&h.take_events(), op), Some(OpError::Server(e)) if e.code == -32602)
    );
    h.c.list(h.now, ListKind::Tools, None);
    assert_eq!(
        h.next_sent().rpc_method(),
        "tools/list",
        "page 1 was discarded too"
    );
}

/// `basic/patterns/caching.mdx` (stale entries) and the client guide's "Failure handling": a
/// stale entry is served after a failed refetch only when the host's policy allows it.
#[test]
fn stale_is_served_after_a_failed_refetch_only_when_allowed() {
    for (policy, expect_stale) in [(StaleIfError::Never, false), (StaleIfError::Always, true)] {
        let mut config = ClientConfig::new(Transport::Http, info());
        config.cache = CacheConfig {
            stale_if_error: policy,
            ..CacheConfig::default()
        };
        config.call_options = CallOptions {
            max_resends: 0,
            ..CallOptions::default()
        };
        let mut h = Harness::new(config);
        h.c.list(h.now, ListKind::Prompts, None);
        let s = h.next_sent();
        let body = json!({"jsonrpc": "2.0", "id": s.id(), "result": {"prompts": [{"name": "p"}], "ttlMs": 10}});
        h.reply(
            s.stream,
            200,
            &[("content-type", "application/json")],
            &body.to_string(),
        );
        h.advance(Duration::from_secs(1));
        let op = h.c.list(h.now, ListKind::Prompts, None);
        let s = h.next_sent();
        h.c.handle_transport_failed(h.now, s.stream).unwrap();
        let ev = h.take_events();
        if expect_stale {
            let (r, _, source) = result_of(&ev, op).unwrap();
            assert_eq!(source, ResultSource::StaleAfterError);
            assert_eq!(r["prompts"][0]["name"], "p");
        } else {
            assert!(failure_of(&ev, op).is_some(), "{ev:?}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Lifecycle: progress, timeouts, cancellation.

/// `basic/patterns/progress.mdx` and `basic/transports/streamable-http.mdx` (SSE response):
/// progress notifications on the call's stream reach the host; the result follows.
#[test]
fn progress_over_sse_reaches_the_host() {
    let mut h = Harness::http();
    let options = OpOptions {
        progress: true,
        ..OpOptions::default()
    };
    let op =
        h.c.call_tool(h.now, "slow_count", obj(json!({"steps": 3})), options);
    let s = h.next_sent();
    let token = s.body["params"]["_meta"]["progressToken"].clone();
    assert!(token.is_string() || token.is_number());
    // The recorded stream uses the token "progress-1": rewrite it to ours.
    let f = fx("python-sdk/http/14-tools-call-progress.json");
    let recorded_id = f["request"]["body"]["id"].clone();
    let mut sse = String::new();
    for ev in f["response"]["sse_events"].as_array().unwrap() {
        let mut data = rewrite_ids(ev["data"].clone(), &recorded_id, &s.id());
        if let Some(p) = data.get_mut("params") {
            if p.get("progressToken").is_some() {
                p["progressToken"] = token.clone();
            }
        }
        sse.push_str(&format!("event: message\r\ndata: {data}\r\n\r\n"));
    }
    h.reply(
        s.stream,
        200,
        &[("content-type", "text/event-stream")],
        &sse,
    );
    let ev = h.take_events();
    let progress: Vec<f64> = ev
        .iter()
        .filter_map(|e| match e {
            Event::Progress {
                op: o, progress, ..
            } if *o == op => Some(*progress),
            _ => None,
        })
        .collect();
    assert_eq!(progress, [1.0, 2.0, 3.0]);
    assert!(result_of(&ev, op).is_some());
}

/// `basic/patterns/cancellation.mdx`, "Timeouts" and "Transport-Specific Cancellation": a
/// request without an answer in time is cancelled (the HTTP stream closed) and reported; a
/// late response is ignored.
#[test]
fn a_timeout_closes_the_stream_and_a_late_response_is_ignored() {
    let mut config = recorded_http_config();
    config.call_options = CallOptions {
        timeout: Duration::from_secs(5),
        ..CallOptions::default()
    };
    let mut h = Harness::new(config);
    let op =
        h.c.call_tool(h.now, "slow", Map::new(), OpOptions::default());
    let s = h.next_sent();
    assert!(h.c.poll_timeout().is_some());
    h.advance(Duration::from_secs(5));
    assert_eq!(h.closed, [s.stream]);
    assert!(matches!(
        failure_of(&h.take_events(), op),
        Some(OpError::Transport(TransportError::TimedOut {
            max_total: false
        }))
    ));
    // The driver may still deliver what was in flight: nothing reaches the host as a result.
    let late = json!({"jsonrpc": "2.0", "id": s.id(), "result": {"content": []}});
    h.reply(
        s.stream,
        200,
        &[("content-type", "application/json")],
        &late.to_string(),
    );
    assert!(result_of(&h.take_events(), op).is_none());
}

/// `basic/patterns/cancellation.mdx`: on stdio the host's cancellation is a
/// `notifications/cancelled` naming the request; on HTTP it is closing the stream.
#[test]
fn cancellation_is_a_notification_on_stdio_and_a_close_on_http() {
    let mut config = ClientConfig::new(Transport::Stdio, info());
    config.protocol = ProtocolChoice::Modern;
    let mut h = Harness::new(config);
    let op =
        h.c.call_tool(h.now, "slow", Map::new(), OpOptions::default());
    let sent = h.next_line();
    h.c.cancel(h.now, op).unwrap();
    let cancel = h.next_line();
    assert_eq!(cancel["method"], "notifications/cancelled");
    assert_eq!(cancel["params"]["requestId"], sent["id"]);
    assert!(h.take_events().contains(&Event::Cancelled { op }));

    let mut h = Harness::http();
    let op =
        h.c.call_tool(h.now, "slow", Map::new(), OpOptions::default());
    let s = h.next_sent();
    h.c.cancel(h.now, op).unwrap();
    h.drain();
    assert_eq!(h.closed, [s.stream]);
}

/// Legacy `basic/transports.mdx`, "Sending Messages to the Server": in a 2025-11-25 session
/// "Disconnection SHOULD NOT be interpreted as the client cancelling its request. To cancel,
/// the client SHOULD explicitly send an MCP `CancelledNotification`": the host's cancellation
/// and a timeout both POST `notifications/cancelled` in the session, then close the stream.
/// (The modern era's cancellation is the close alone: see the test above.)
#[test]
fn a_legacy_http_cancellation_or_timeout_posts_cancelled_in_the_session() {
    let mut config = ClientConfig::new(Transport::Http, info());
    config.protocol = ProtocolChoice::Legacy;
    let mut h = Harness::new(config);
    h.c.discover(h.now);
    let init = h.next_sent();
    h.reply_fx(&init, "python-sdk/http/30-legacy-initialize.json");
    let (session, _) = legacy_session_ready(&mut h);
    h.take_events();

    let op =
        h.c.call_tool(h.now, "slow", Map::new(), OpOptions::default());
    let call = h.next_sent();
    h.c.cancel(h.now, op).unwrap();
    let notice = h.next_sent();
    assert_eq!(notice.method, Method::Post);
    assert_eq!(notice.rpc_method(), "notifications/cancelled");
    assert_eq!(notice.body["params"]["requestId"], call.id());
    assert_eq!(notice.header("Mcp-Session-Id"), Some(session.as_str()));
    assert_eq!(notice.header("MCP-Protocol-Version"), Some("2025-11-25"));
    assert!(h.closed.contains(&call.stream), "{:?}", h.closed);
    assert!(h.take_events().contains(&Event::Cancelled { op }));
    h.reply(notice.stream, 202, &[], "");

    let options = OpOptions {
        call: Some(CallOptions {
            timeout: Duration::from_secs(1),
            ..CallOptions::default()
        }),
        ..OpOptions::default()
    };
    let op = h.c.call_tool(h.now, "slow", Map::new(), options);
    let call = h.next_sent();
    h.advance(Duration::from_secs(1));
    let notice = h.next_sent();
    assert_eq!(notice.rpc_method(), "notifications/cancelled");
    assert_eq!(notice.body["params"]["requestId"], call.id());
    assert_eq!(notice.header("Mcp-Session-Id"), Some(session.as_str()));
    assert!(h.closed.contains(&call.stream), "{:?}", h.closed);
    assert!(matches!(
        failure_of(&h.take_events(), op),
        Some(OpError::Transport(TransportError::TimedOut { .. }))
    ));
    assert!(h.sent.is_empty(), "one notice per cancelled request");
}

/// `basic/transports/streamable-http.mdx` ("the stream broke") and the client guide: a broken
/// stream of a read-only request is resent with a new id; a tool call is not.
#[test]
fn a_broken_stream_resends_reads_but_not_tool_calls() {
    let mut h = Harness::http();
    let op = h.c.list(h.now, ListKind::Tools, None);
    let s = h.next_sent();
    h.c.handle_transport_failed(h.now, s.stream).unwrap();
    h.advance(Duration::from_secs(60));
    let again = h.next_sent();
    assert_eq!(again.rpc_method(), "tools/list");
    assert_ne!(again.id(), s.id());
    h.reply_fx(&again, "python-sdk/http/02-tools-list.json");
    assert!(result_of(&h.take_events(), op).is_some());

    let call = h.c.call_tool(
        h.now,
        "echo",
        obj(json!({"text": "x"})),
        OpOptions::default(),
    );
    let s = h.next_sent();
    h.c.handle_transport_failed(h.now, s.stream).unwrap();
    h.advance(Duration::from_secs(60));
    assert!(matches!(
        failure_of(&h.take_events(), call),
        Some(OpError::Transport(TransportError::Failed(_)))
    ));
    assert!(h.sent.is_empty());
}

// ---------------------------------------------------------------------------------------------
// stdio era detection.

/// `basic/transports/stdio.mdx`, "Backward Compatibility": probe with `server/discover` first;
/// a result means modern (the real Python server), and the queued operation follows.
#[test]
fn stdio_probe_result_means_modern() {
    let mut h = Harness::new(ClientConfig::new(Transport::Stdio, info()));
    let op = h.c.list(h.now, ListKind::Tools, None);
    let probe = h.next_line();
    assert_eq!(probe["method"], "server/discover");
    assert!(h.lines.is_empty(), "nothing else before the probe's answer");
    h.reply_line_fx(&probe, "python-sdk/stdio/01-server-discover.json");
    assert!(h.take_events().iter().any(|e| matches!(
        e,
        Event::EraDetected {
            era: Era::Modern,
            ..
        }
    )));
    let list = h.next_line();
    assert_eq!(list["method"], "tools/list");
    h.reply_line_fx(&list, "python-sdk/stdio/02-tools-list.json");
    assert!(result_of(&h.take_events(), op).is_some());
}

/// `basic/transports/stdio.mdx`, "Backward Compatibility": any other error means legacy
/// (server-everything answers `-32601`): `initialize`, `notifications/initialized`, then the
/// operation.
#[test]
fn stdio_probe_error_means_legacy() {
    let mut h = Harness::new(ClientConfig::new(Transport::Stdio, info()));
    let op = h.c.list(h.now, ListKind::Tools, None);
    let probe = h.next_line();
    h.reply_line_fx(
        &probe,
        "server-everything/stdio/01-modern-server-discover.json",
    );
    let init = h.next_line();
    assert_eq!(init["method"], "initialize");
    h.reply_line_fx(&init, "server-everything/stdio/03-legacy-initialize.json");
    assert!(h.take_events().contains(&Event::EraDetected {
        era: Era::Legacy,
        version: "2025-11-25".into(),
        evidence: EraEvidence::ProbeError(-32601)
    }));
    assert_eq!(h.next_line()["method"], "notifications/initialized");
    let list = h.next_line();
    assert_eq!(list["method"], "tools/list");
    h.reply_line_fx(&list, "server-everything/stdio/05-legacy-tools-list.json");
    assert!(result_of(&h.take_events(), op).is_some());
}

/// `basic/transports/stdio.mdx`, "Backward Compatibility": no answer within a reasonable
/// timeout means legacy.
#[test]
fn stdio_probe_timeout_means_legacy() {
    let mut config = ClientConfig::new(Transport::Stdio, info());
    config.probe_timeout = Duration::from_secs(2);
    let mut h = Harness::new(config);
    h.c.list(h.now, ListKind::Tools, None);
    let probe = h.next_line();
    assert_eq!(probe["method"], "server/discover");
    h.advance(Duration::from_secs(2));
    assert_eq!(h.next_line()["method"], "notifications/cancelled");
    assert_eq!(h.next_line()["method"], "initialize");
}

/// `basic/versioning.mdx` ("re-probing if the cached assumption later fails"): a kept verdict
/// skips detection.
#[test]
fn a_known_era_skips_the_probe() {
    let mut config = ClientConfig::new(Transport::Stdio, info());
    config.known_era = Some(CachedEra {
        era: Era::Modern,
        protocol_version: Some("2026-07-28".into()),
    });
    let mut h = Harness::new(config);
    assert!(h.take_events().iter().any(|e| matches!(
        e,
        Event::EraDetected {
            evidence: EraEvidence::Cached,
            ..
        }
    )));
    h.c.list(h.now, ListKind::Tools, None);
    assert_eq!(h.next_line()["method"], "tools/list");
}

// ---------------------------------------------------------------------------------------------
// Legacy sessions and subscriptions.

/// Legacy `basic/transports.mdx`, "Session Management": a 404 to the current session id ends
/// the session; the client initializes again and resends the request with a new id.
#[test]
fn a_legacy_session_404_reinitializes_and_resends() {
    let mut h = Harness::new(legacy_quiet_config());
    let op = h.c.list(h.now, ListKind::Tools, None);
    let init = h.next_sent();
    h.reply_fx(&init, "python-sdk/http/30-legacy-initialize.json");
    let notif = h.next_sent();
    h.reply(notif.stream, 202, &[], "");
    let list = h.next_sent();
    h.reply(
        list.stream,
        404,
        &[("content-type", "application/json")],
        "",
    );
    assert!(h.take_events().contains(&Event::Retrying {
        op,
        reason: RetryReason::SessionExpired
    }));
    let init2 = h.next_sent();
    assert_eq!(init2.rpc_method(), "initialize");
    assert_eq!(init2.header("Mcp-Session-Id"), None);
    h.reply_fx(&init2, "python-sdk/http/30-legacy-initialize.json");
    let notif2 = h.next_sent();
    h.reply(notif2.stream, 202, &[], "");
    let list2 = h.next_sent();
    assert_eq!(list2.rpc_method(), "tools/list");
    assert_ne!(list2.id(), list.id());
}

/// Legacy `basic/transports.mdx` ("Disconnection SHOULD NOT be interpreted as the client
/// cancelling its request. To cancel, the client SHOULD explicitly send an MCP
/// `CancelledNotification`"): a cancelled or timed-out legacy call closes its stream AND posts
/// `notifications/cancelled` in the session; a call that got its answer posts nothing.
#[test]
fn a_cancelled_or_timed_out_legacy_http_call_is_cancelled_by_notification_in_the_session() {
    let mut config = ClientConfig::new(Transport::Http, info());
    config.protocol = ProtocolChoice::Legacy;
    let mut h = Harness::new(config);
    let op = h.c.call_tool(
        h.now,
        "slow",
        obj(json!({"seconds": 20})),
        OpOptions::default(),
    );
    let init = h.next_sent();
    h.reply_fx(&init, "python-sdk/http/30-legacy-initialize.json");
    legacy_session_ready(&mut h);
    let call = h.next_sent();
    assert_eq!(call.rpc_method(), "tools/call");
    let session = call.header("Mcp-Session-Id").map(str::to_owned);
    assert!(session.is_some());

    h.c.cancel(h.now, op).unwrap();
    let cancelled = h.next_sent();
    assert!(h.closed.contains(&call.stream), "the stream is closed too");
    assert_eq!(cancelled.method, Method::Post);
    assert_eq!(cancelled.rpc_method(), "notifications/cancelled");
    assert_eq!(cancelled.body["params"]["requestId"], call.id());
    assert!(cancelled.body.get("id").is_none(), "a notification");
    assert_eq!(
        cancelled.header("Mcp-Session-Id").map(str::to_owned),
        session
    );
    assert!(cancelled.header("MCP-Protocol-Version").is_some());
    h.reply(cancelled.stream, 202, &[], "");

    // A timeout cancels the same way.
    let options = OpOptions {
        call: Some(CallOptions {
            timeout: Duration::from_secs(1),
            ..CallOptions::default()
        }),
        ..OpOptions::default()
    };
    let op =
        h.c.call_tool(h.now, "slow", obj(json!({"seconds": 20})), options);
    let call = h.next_sent();
    h.advance(Duration::from_secs(2));
    assert!(matches!(
        failure_of(&h.take_events(), op),
        Some(OpError::Transport(TransportError::TimedOut { .. }))
    ));
    let cancelled = h.next_sent();
    assert_eq!(cancelled.rpc_method(), "notifications/cancelled");
    assert_eq!(cancelled.body["params"]["requestId"], call.id());

    // An answered call is not cancelled.
    let op = h.c.call_tool(
        h.now,
        "echo",
        obj(json!({"text": "x"})),
        OpOptions::default(),
    );
    let call = h.next_sent();
    let body = json!({"jsonrpc": "2.0", "id": call.id(),
        "result": {"content": [{"type": "text", "text": "x"}]}});
    h.reply(
        call.stream,
        200,
        &[("content-type", "application/json")],
        &body.to_string(),
    );
    assert!(result_of(&h.take_events(), op).is_some());
    h.drain();
    assert!(h.sent.is_empty(), "{:?}", h.sent.len());
}

/// Legacy `basic/transports.mdx`: a client that no longer needs the session sends DELETE.
#[test]
fn shutdown_ends_a_legacy_http_session_with_delete() {
    let mut config = ClientConfig::new(Transport::Http, info());
    config.protocol = ProtocolChoice::Legacy;
    let mut h = Harness::new(config);
    h.c.discover(h.now);
    let init = h.next_sent();
    h.reply_fx(&init, "python-sdk/http/30-legacy-initialize.json");
    let _initialized = h.next_sent();
    let listen = h.next_sent();
    assert_eq!(listen.method, Method::Get);
    h.c.shutdown(h.now);
    let del = h.next_sent();
    assert_eq!(del.method, Method::Delete);
    assert!(del.header("Mcp-Session-Id").is_some());
    assert!(
        h.closed.contains(&listen.stream),
        "the session's GET stream is closed"
    );
}

/// `basic/patterns/subscriptions.mdx`: listen with only the kinds asked for; notifications are
/// routed by subscription id and invalidate the cache; the real Python server's stream.
#[test]
fn a_subscription_receives_notifications_and_invalidates_the_cache() {
    let mut h = Harness::http();
    assert!(
        h.c.subscribe(h.now, SubscriptionFilter::default()).is_err(),
        "an empty filter"
    );
    let d = h.c.discover(h.now);
    let s = h.next_sent();
    h.reply_fx(&s, "python-sdk/http/01-server-discover.json");
    assert!(result_of(&h.take_events(), d).is_some());
    // A cached resource, then a subscription that reports it updated.
    h.c.start(
        h.now,
        Operation::ReadResource {
            uri: "fixture://readme".into(),
        },
        OpOptions::default(),
    );
    let r = h.next_sent();
    let body = json!({"jsonrpc": "2.0", "id": r.id(), "result": {"contents": [], "ttlMs": 600000}});
    h.reply(
        r.stream,
        200,
        &[("content-type", "application/json")],
        &body.to_string(),
    );
    let filter = SubscriptionFilter {
        tools_list_changed: true,
        resource_subscriptions: vec!["fixture://readme".into()],
        ..SubscriptionFilter::default()
    };
    let sub = h.c.subscribe(h.now, filter).unwrap();
    let listen = h.next_sent();
    assert_eq!(listen.rpc_method(), "subscriptions/listen");
    assert_eq!(listen.header("Mcp-Method"), Some("subscriptions/listen"));
    h.reply_fx(&listen, "python-sdk/http/25-subscriptions-listen.json");
    let ev = h.take_events();
    assert!(ev.iter().any(|e| matches!(e, Event::Subscription(SubscriptionEvent::Acknowledged { sub: s, .. }) if *s == sub)));
    assert!(ev
        .iter()
        .any(|e| matches!(e, Event::Subscription(SubscriptionEvent::Changed { .. }))));
    h.c.start(
        h.now,
        Operation::ReadResource {
            uri: "fixture://readme".into(),
        },
        OpOptions::default(),
    );
    assert_eq!(
        h.next_sent().rpc_method(),
        "resources/read",
        "the update invalidated the entry"
    );
}

/// `basic/transports.mdx` (errors carry a JSON-RPC error body): a server without
/// `subscriptions/listen` answers 404 with `-32601` (FastMCP 4.1.6's exact body below); the
/// subscription ends as rejected with that error, not as a bare status.
#[test]
fn a_listen_refused_with_a_jsonrpc_error_ends_the_subscription_with_that_error() {
    let mut h = Harness::http();
    let d = h.c.discover(h.now);
    let s = h.next_sent();
    h.reply_fx(&s, "python-sdk/http/01-server-discover.json");
    assert!(result_of(&h.take_events(), d).is_some());
    let filter = SubscriptionFilter {
        tools_list_changed: true,
        ..SubscriptionFilter::default()
    };
    let sub = h.c.subscribe(h.now, filter).unwrap();
    let listen = h.next_sent();
    assert_eq!(listen.rpc_method(), "subscriptions/listen");
    let body = json!({"jsonrpc": "2.0", "id": listen.id(), "error": {
        "code": -32601, "message": "Method not found", "data": "subscriptions/listen"}});
    h.reply(
        listen.stream,
        404,
        &[("content-type", "application/json")],
        &body.to_string(),
    );
    let ended: Vec<SubscriptionEndReason> = h
        .take_events()
        .into_iter()
        .filter_map(|e| match e {
            Event::Subscription(SubscriptionEvent::Ended { sub: s, reason }) if s == sub => {
                Some(reason)
            }
            _ => None,
        })
        .collect();
    assert_eq!(ended.len(), 1, "{ended:?}");
    match &ended[0] {
        SubscriptionEndReason::Rejected(e) => {
            assert_eq!(e.code, -32601);
            assert_eq!(e.message, "Method not found");
        }
        other => panic!("expected the server's error, got {other:?}"),
    }
    // A status that reconnects still does, whatever its body says.
    let sub =
        h.c.subscribe(
            h.now,
            SubscriptionFilter {
                tools_list_changed: true,
                ..SubscriptionFilter::default()
            },
        )
        .unwrap();
    let listen = h.next_sent();
    let body = json!({"jsonrpc": "2.0", "id": listen.id(), "error": {
        "code": -32603, "message": "busy"}});
    h.reply(
        listen.stream,
        503,
        &[("content-type", "application/json")],
        &body.to_string(),
    );
    let events = h.take_events();
    assert!(
        !events.iter().any(|e| matches!(e,
            Event::Subscription(SubscriptionEvent::Ended { sub: s, .. }) if *s == sub)),
        "{events:?}"
    );
}

/// `basic/index.mdx`: the modern era has no `ping`; asking for it is a typed error.
#[test]
fn ping_is_a_legacy_only_operation() {
    let mut config = ClientConfig::new(Transport::Http, info());
    config.protocol = ProtocolChoice::Modern;
    let mut h = Harness::new(config);
    let op = h.c.start(h.now, Operation::Ping, OpOptions::default());
    assert!(matches!(
        failure_of(&h.take_events(), op),
        Some(OpError::Incompatible(IncompatibleError::Unsupported {
            operation: "ping",
            era: Era::Modern
        }))
    ));
}

/// Client guide, "Caching": `CachePolicy::Refresh` asks the server whatever the cache holds.
#[test]
fn refresh_policy_bypasses_a_fresh_entry() {
    let mut h = Harness::http();
    h.c.list(h.now, ListKind::Tools, None);
    let s = h.next_sent();
    let body = json!({"jsonrpc": "2.0", "id": s.id(), "result": {"tools": [], "ttlMs": 60000}});
    h.reply(
        s.stream,
        200,
        &[("content-type", "application/json")],
        &body.to_string(),
    );
    let options = OpOptions {
        cache: CachePolicy::Refresh,
        ..OpOptions::default()
    };
    h.c.start(
        h.now,
        Operation::List {
            kind: ListKind::Tools,
            cursor: None,
        },
        options,
    );
    assert_eq!(h.next_sent().rpc_method(), "tools/list");
}

/// Legacy `server/resources.mdx` ("Subscriptions", `resources/subscribe`) and legacy
/// `basic/transports.mdx` ("Listening for Messages from the Server"): in the legacy era the same
/// `subscribe` opens the session's GET stream for list changes and subscribes single resources;
/// kinds the server's capabilities do not offer are reported as dropped; notifications become
/// the same subscription events and invalidate the cache.
#[test]
fn a_legacy_subscription_uses_the_get_stream_and_resources_subscribe() {
    let mut h = Harness::new(legacy_quiet_config());
    h.c.list(h.now, ListKind::Tools, None);
    let init = h.next_sent();
    let result = json!({"jsonrpc": "2.0", "id": init.id(), "result": {"protocolVersion": "2025-11-25",
        "capabilities": {"tools": {"listChanged": true}, "resources": {"subscribe": true}},
        "serverInfo": {"name": "s", "version": "1"}}});
    h.reply(
        init.stream,
        200,
        &[
            ("content-type", "application/json"),
            ("mcp-session-id", "S1"),
        ],
        &result.to_string(),
    );
    let initialized = h.next_sent();
    h.reply(initialized.stream, 202, &[], "");
    let list = h.next_sent();
    let body = json!({"jsonrpc": "2.0", "id": list.id(), "result": {"tools": [], "ttlMs": 600000}});
    h.reply(
        list.stream,
        200,
        &[("content-type", "application/json")],
        &body.to_string(),
    );
    let filter = SubscriptionFilter {
        tools_list_changed: true,
        prompts_list_changed: true,
        resource_subscriptions: vec!["file:///a".into()],
        ..SubscriptionFilter::default()
    };
    let sub = h.c.subscribe(h.now, filter).unwrap();
    let get = h.next_sent();
    assert_eq!(get.method, Method::Get);
    assert_eq!(get.header("Accept"), Some("text/event-stream"));
    assert_eq!(get.header("Mcp-Session-Id"), Some("S1"));
    let subscribe = h.next_sent();
    assert_eq!(subscribe.rpc_method(), "resources/subscribe");
    assert_eq!(subscribe.body["params"]["uri"], "file:///a");
    let ev = h.take_events();
    let (accepted, dropped) = ev
        .iter()
        .find_map(|e| match e {
            Event::Subscription(SubscriptionEvent::Acknowledged {
                sub: s,
                accepted,
                dropped,
                ..
            }) if *s == sub => Some((accepted.clone(), dropped.clone())),
            _ => None,
        })
        .unwrap();
    assert!(accepted.tools_list_changed && accepted.resource_subscriptions == ["file:///a"]);
    assert!(
        dropped.prompts_list_changed,
        "the server does not offer prompts listChanged"
    );
    let sse = format!(
        "event: message\ndata: {}\n\n",
        json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
    );
    let mut hs = Headers::new();
    hs.append("content-type", "text/event-stream").unwrap();
    h.c.handle_response_head(
        h.now,
        SystemTime::now(),
        get.stream,
        ResponseHead {
            status: 200,
            headers: hs,
        },
    )
    .unwrap();
    h.c.handle_response_data(h.now, get.stream, sse.as_bytes())
        .unwrap();
    let ev = h.take_events();
    assert!(ev.iter().any(|e| matches!(e,
        Event::Subscription(SubscriptionEvent::Changed { sub: s, change: SubscriptionChange::ToolsListChanged }) if *s == sub)));
    h.c.list(h.now, ListKind::Tools, None);
    assert_eq!(
        h.next_sent().rpc_method(),
        "tools/list",
        "the change invalidated the cached list"
    );
    h.c.unsubscribe(h.now, sub).unwrap();
    h.drain();
    assert!(h.closed.contains(&get.stream));
    assert!(h
        .sent
        .iter()
        .any(|s| s.rpc_method() == "resources/unsubscribe"));
}

/// Legacy stdio: list changes arrive on stdout without a stream; the subscription reports them.
#[test]
fn a_legacy_stdio_subscription_reports_notifications_from_stdout() {
    let mut config = ClientConfig::new(Transport::Stdio, info());
    config.protocol = ProtocolChoice::Legacy;
    let mut h = Harness::new(config);
    h.c.discover(h.now);
    let init = h.next_line();
    let result = json!({"jsonrpc": "2.0", "id": init["id"], "result": {"protocolVersion": "2025-06-18",
        "capabilities": {"prompts": {"listChanged": true}}, "serverInfo": {"name": "s", "version": "1"}}});
    h.c.handle_stdio_line(h.now, &result.to_string()).unwrap();
    let sub =
        h.c.subscribe(
            h.now,
            SubscriptionFilter {
                prompts_list_changed: true,
                ..Default::default()
            },
        )
        .unwrap();
    h.c.handle_stdio_line(
        h.now,
        r#"{"jsonrpc":"2.0","method":"notifications/prompts/list_changed"}"#,
    )
    .unwrap();
    let ev = h.take_events();
    assert!(ev.iter().any(|e| matches!(e,
        Event::Subscription(SubscriptionEvent::Changed { sub: s, change: SubscriptionChange::PromptsListChanged }) if *s == sub)));
}

/// Legacy `client/elicitation.mdx` (2025-11-25: `elicitation/create` is a server-to-client
/// request on the call's stream, answered by POST in the session): the host sees the same
/// `InputRequested` event as for MRTR, its answer is validated and sent as the response to the
/// server's request, and the call's result follows on its stream.
#[test]
fn a_legacy_elicitation_request_is_answered_through_the_same_api() {
    let mut config = elicit_config();
    config.protocol = ProtocolChoice::Legacy;
    config.legacy_listen = false;
    let mut h = Harness::new(config);
    let call = h.c.call_tool(
        h.now,
        "confirm_action",
        obj(json!({"target": "prod"})),
        OpOptions::default(),
    );
    let init = h.next_sent();
    assert_eq!(
        init.body["params"]["capabilities"],
        json!({"elicitation": {"form": {}}})
    );
    h.reply_fx(&init, "python-sdk/http/30-legacy-initialize.json");
    let initialized = h.next_sent();
    h.reply(initialized.stream, 202, &[], "");
    let s = h.next_sent();
    assert_eq!(s.rpc_method(), "tools/call");
    let ask = json!({"jsonrpc": "2.0", "id": 0, "method": "elicitation/create", "params": {"message": "Sure?",
        "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}}});
    let mut hs = Headers::new();
    hs.append("content-type", "text/event-stream").unwrap();
    h.c.handle_response_head(
        h.now,
        SystemTime::now(),
        s.stream,
        ResponseHead {
            status: 200,
            headers: hs,
        },
    )
    .unwrap();
    h.c.handle_response_data(
        h.now,
        s.stream,
        format!("event: message\ndata: {ask}\n\n").as_bytes(),
    )
    .unwrap();
    let key = h
        .take_events()
        .into_iter()
        .find_map(|e| match e {
            Event::InputRequested { op, requests, .. } if op == call => {
                Some(requests[0].key.clone())
            }
            _ => None,
        })
        .expect("the elicitation is surfaced");
    let bad = InputAnswer::Elicitation(ElicitAnswer::Accept(obj(json!({"ok": "yes"}))));
    assert!(h.c.answer_input(h.now, call, &key, bad).is_err());
    let good = InputAnswer::Elicitation(ElicitAnswer::Accept(obj(json!({"ok": true}))));
    h.c.answer_input(h.now, call, &key, good).unwrap();
    let answer = h.next_sent();
    assert_eq!(
        answer.body,
        json!({"jsonrpc": "2.0", "id": 0, "result": {"action": "accept", "content": {"ok": true}}})
    );
    assert!(answer.header("Mcp-Session-Id").is_some());
    let done = json!({"jsonrpc": "2.0", "id": s.id(), "result": {"content": [{"type": "text", "text": "done"}]}});
    h.c.handle_response_data(
        h.now,
        s.stream,
        format!("event: message\ndata: {done}\n\n").as_bytes(),
    )
    .unwrap();
    h.c.handle_response_end(h.now, s.stream).unwrap();
    assert!(result_of(&h.take_events(), call).is_some());
}

/// `basic/versioning.mdx` ("re-probing if the cached assumption later fails"): a kept legacy
/// verdict whose `initialize` is refused (the server was upgraded) is dropped and the operation
/// goes out in the modern era instead of failing.
#[test]
fn a_kept_legacy_verdict_that_breaks_is_probed_again() {
    let mut config = ClientConfig::new(Transport::Http, info());
    config.known_era = Some(CachedEra {
        era: Era::Legacy,
        protocol_version: Some("2025-11-25".into()),
    });
    let mut h = Harness::new(config);
    let op = h.c.list(h.now, ListKind::Tools, None);
    let init = h.next_sent();
    assert_eq!(init.rpc_method(), "initialize");
    let refused = json!({"jsonrpc": "2.0", "id": init.id(), "error": {"code": -32601, "message": "Method not found"}});
    h.reply(
        init.stream,
        200,
        &[("content-type", "application/json")],
        &refused.to_string(),
    );
    let modern = h.next_sent();
    assert_eq!(modern.rpc_method(), "tools/list");
    assert_eq!(modern.header("MCP-Protocol-Version"), Some("2026-07-28"));
    h.reply_fx(&modern, "python-sdk/http/02-tools-list.json");
    let ev = h.take_events();
    assert!(result_of(&ev, op).is_some());
    assert!(ev.iter().any(|e| matches!(
        e,
        Event::EraDetected {
            era: Era::Modern,
            evidence: EraEvidence::ModernAnswer,
            ..
        }
    )));
}

/// `basic/patterns/mrtr.mdx` and `basic/patterns/caching.mdx`: a read that needed the host's
/// input is not answered from a stale entry when its retry fails (that entry never saw the
/// answers), even when the policy serves stale entries after errors.
#[test]
fn a_failed_mrtr_retry_is_not_answered_from_a_stale_entry() {
    let mut config = elicit_config();
    config.cache = CacheConfig {
        stale_if_error: StaleIfError::Always,
        ..CacheConfig::default()
    };
    config.call_options = CallOptions {
        max_resends: 0,
        ..CallOptions::default()
    };
    let mut h = Harness::new(config);
    let read = || Operation::ReadResource {
        uri: "fixture://r".into(),
    };
    h.c.start(h.now, read(), OpOptions::default());
    let s = h.next_sent();
    let body = json!({"jsonrpc": "2.0", "id": s.id(), "result": {"contents": [{"uri": "fixture://r", "text": "old"}]}});
    h.reply(
        s.stream,
        200,
        &[("content-type", "application/json")],
        &body.to_string(),
    );
    let op = h.c.start(h.now, read(), OpOptions::default());
    let s = h.next_sent();
    let ir = json!({"jsonrpc": "2.0", "id": s.id(), "result": {"resultType": "input_required",
        "inputRequests": {"k": {"method": "elicitation/create", "params": {"message": "ok?", "mode": "form",
        "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}}}}}});
    h.reply(
        s.stream,
        200,
        &[("content-type", "application/json")],
        &ir.to_string(),
    );
    h.c.answer_input(
        h.now,
        op,
        "k",
        InputAnswer::Elicitation(ElicitAnswer::Accept(obj(json!({"ok": true})))),
    )
    .unwrap();
    let retry = h.next_sent();
    h.c.handle_transport_failed(h.now, retry.stream).unwrap();
    let ev = h.take_events();
    assert!(result_of(&ev, op).is_none(), "{ev:?}");
    assert!(matches!(
        failure_of(&ev, op),
        Some(OpError::Transport(TransportError::Failed(_)))
    ));
}

// ---------------------------------------------------------------------------------------------
// Decisions the client makes before sending (so that no driver makes them).

/// `basic/transports/streamable-http.mdx`, "Custom Headers from Tool Parameters": a call of a
/// tool whose `x-mcp-header` annotations were never listed waits for a `tools/list`, then goes
/// out once, already carrying `Mcp-Param-Region` (no `-32020` round trip, no retry event).
#[test]
fn a_call_of_an_unlisted_tool_on_http_lists_tools_first_and_sends_its_param_headers() {
    let mut h = Harness::http_default();
    let args = obj(json!({"region": "us-west1", "query": "SELECT 1"}));
    let call =
        h.c.call_tool(h.now, "query_region", args, OpOptions::default());
    let first = h.next_sent();
    assert_eq!(first.rpc_method(), "tools/list", "the list comes first");
    assert!(h.sent.is_empty(), "the call waits for the list");
    h.reply_fx(&first, "python-sdk/http/02-tools-list.json");
    let s = h.next_sent();
    assert_eq!(s.rpc_method(), "tools/call");
    assert_eq!(
        header_map(&s.headers),
        recorded_headers("python-sdk/http/04-tools-call-header-param.json")
    );
    h.reply_fx(&s, "python-sdk/http/04-tools-call-header-param.json");
    let ev = h.take_events();
    assert!(result_of(&ev, call).is_some());
    assert!(
        !ev.iter().any(|e| matches!(e, Event::Retrying { .. })),
        "{ev:?}"
    );
    // The listing is known now: the next call of a tool goes out at once.
    h.c.call_tool(
        h.now,
        "echo",
        obj(json!({"text": "x"})),
        OpOptions::default(),
    );
    assert_eq!(h.next_sent().rpc_method(), "tools/call");
}

/// Same section: a tool excluded by the listing fetched before its call is refused, never
/// called.
#[test]
fn a_tool_excluded_by_the_list_fetched_before_its_call_is_never_called() {
    let mut h = Harness::http_default();
    let call =
        h.c.call_tool(h.now, "bad", obj(json!({"r": "x"})), OpOptions::default());
    let list = h.next_sent();
    assert_eq!(list.rpc_method(), "tools/list");
    let body = json!({"jsonrpc": "2.0", "id": list.id(), "result": {"tools": [
        {"name": "bad", "inputSchema": {"type": "object", "properties": {"r": {"type": "string", "x-mcp-header": "A B"}}}}
    ]}});
    h.reply(
        list.stream,
        200,
        &[("content-type", "application/json")],
        &body.to_string(),
    );
    let ev = h.take_events();
    assert!(
        matches!(failure_of(&ev, call), Some(OpError::Incompatible(IncompatibleError::ToolExcluded { ref tool, .. })) if tool == "bad"),
        "{ev:?}"
    );
    assert!(h.sent.is_empty(), "an excluded tool is not called");
}

/// A listing that fails teaches nothing: the call goes out anyway (its own answer decides),
/// and no second listing is tried before it.
#[test]
fn a_failed_list_before_a_call_still_sends_the_call() {
    let mut h = Harness::http_default();
    let call = h.c.call_tool(
        h.now,
        "echo",
        obj(json!({"text": "x"})),
        OpOptions::default(),
    );
    let list = h.next_sent();
    assert_eq!(list.rpc_method(), "tools/list");
    let body = json!({"jsonrpc": "2.0", "id": list.id(), "error": {"code": -32601, "message": "Method not found"}});
    h.reply(
        list.stream,
        404,
        &[("content-type", "application/json")],
        &body.to_string(),
    );
    let s = h.next_sent();
    assert_eq!(s.rpc_method(), "tools/call");
    h.reply_fx(&s, "python-sdk/http/03-tools-call-echo.json");
    assert!(result_of(&h.take_events(), call).is_some());
    assert!(h.sent.is_empty());
}

/// Client guide, "Caching"/`notifications/tools/list_changed`: after the list changed, a call
/// of a tool not known lists the tools again first.
#[test]
fn after_tools_list_changed_an_unknown_tool_is_listed_again_before_its_call() {
    let mut h = Harness::http_default();
    let list = h.c.list(h.now, ListKind::Tools, None);
    let s = h.next_sent();
    h.reply_fx(&s, "python-sdk/http/02-tools-list.json");
    assert!(result_of(&h.take_events(), list).is_some());
    // Known listing, unknown tool: no second listing.
    h.c.call_tool(h.now, "hidden", Map::new(), OpOptions::default());
    let s = h.next_sent();
    assert_eq!(s.rpc_method(), "tools/call");
    // A list_changed notification on that call's stream makes the listing stale.
    let note = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
    let answer = json!({"jsonrpc": "2.0", "id": s.id(), "result": {"content": []}});
    h.reply(
        s.stream,
        200,
        &[("content-type", "text/event-stream")],
        &format!("event: message\ndata: {note}\n\nevent: message\ndata: {answer}\n\n"),
    );
    h.take_events();
    h.c.call_tool(h.now, "hidden", Map::new(), OpOptions::default());
    assert_eq!(h.next_sent().rpc_method(), "tools/list");
}

/// `ClientConfig::list_tools_before_call` off: the call goes out at once, without the headers.
#[test]
fn with_list_tools_before_call_off_the_call_goes_out_at_once() {
    let mut config = ClientConfig::new(Transport::Http, info());
    config.list_tools_before_call = false;
    let mut h = Harness::new(config);
    h.c.call_tool(
        h.now,
        "query_region",
        obj(json!({"region": "us-west1"})),
        OpOptions::default(),
    );
    let s = h.next_sent();
    assert_eq!(s.rpc_method(), "tools/call");
    assert_eq!(s.header("Mcp-Param-Region"), None);
}

/// `basic/index.mdx` (the modern era has no `ping`) with "Backward Compatibility": with the
/// era unknown on HTTP, a ping does not go out modern (where it would be refused unsent); the
/// era is learned first with `server/discover`, and a legacy server is pinged in its session.
#[test]
fn ping_with_the_era_unknown_learns_the_era_first_and_pings_a_legacy_server() {
    let mut h = Harness::http_default();
    let ping = h.c.start(h.now, Operation::Ping, OpOptions::default());
    let probe = h.next_sent();
    assert_eq!(probe.rpc_method(), "server/discover");
    assert!(h.sent.is_empty());
    assert!(failure_of(&h.take_events(), ping).is_none(), "not refused");
    h.reply_fx(&probe, "server-everything/http/02-modern-tools-list.json");
    let init = h.next_sent();
    assert_eq!(init.rpc_method(), "initialize");
    h.reply_fx(&init, "server-everything/http/03-legacy-initialize.json");
    legacy_session_ready(&mut h);
    let s = h.next_sent();
    assert_eq!(s.rpc_method(), "ping");
    assert!(s.header("Mcp-Session-Id").is_some());
    let pong = json!({"jsonrpc": "2.0", "id": s.id(), "result": {}});
    h.reply(
        s.stream,
        200,
        &[("content-type", "application/json")],
        &pong.to_string(),
    );
    assert!(result_of(&h.take_events(), ping).is_some());
}

/// `basic/patterns/subscriptions.mdx` with "Backward Compatibility": a subscription asked for
/// with the era unknown on HTTP is held while the era is learned (`server/discover` first),
/// then opens as `subscriptions/listen` on a modern server.
#[test]
fn a_subscription_with_the_era_unknown_learns_the_era_then_listens_on_a_modern_server() {
    let mut h = Harness::http_default();
    let filter = SubscriptionFilter {
        tools_list_changed: true,
        ..SubscriptionFilter::default()
    };
    let sub = h.c.subscribe(h.now, filter).unwrap();
    let probe = h.next_sent();
    assert_eq!(probe.rpc_method(), "server/discover");
    assert!(h.sent.is_empty(), "nothing else before the era is known");
    h.reply_fx(&probe, "python-sdk/http/01-server-discover.json");
    let listen = h.next_sent();
    assert_eq!(listen.rpc_method(), "subscriptions/listen");
    assert_eq!(
        listen.body["params"]["notifications"]["toolsListChanged"],
        true
    );
    h.reply_fx(&listen, "python-sdk/http/25-subscriptions-listen.json");
    let ev = h.take_events();
    assert!(ev.iter().any(|e| matches!(e,
        Event::Subscription(SubscriptionEvent::Acknowledged { sub: s, .. }) if *s == sub)));
}

/// Same rule, a legacy server: the probe's 400 means legacy, the session is opened
/// (`initialize`, `notifications/initialized`) and the subscription opens in it, on the
/// session's GET stream, acknowledged under the handle `subscribe` gave.
#[test]
fn a_subscription_with_the_era_unknown_opens_in_the_legacy_session_of_a_legacy_server() {
    let mut h = Harness::http_default();
    let filter = SubscriptionFilter {
        tools_list_changed: true,
        ..SubscriptionFilter::default()
    };
    let sub = h.c.subscribe(h.now, filter).unwrap();
    let probe = h.next_sent();
    assert_eq!(probe.rpc_method(), "server/discover");
    h.reply_fx(&probe, "server-everything/http/02-modern-tools-list.json");
    let init = h.next_sent();
    assert_eq!(init.rpc_method(), "initialize");
    assert!(
        !h.take_events().iter().any(|e| matches!(
            e,
            Event::Subscription(SubscriptionEvent::Acknowledged { .. })
        )),
        "not before the session"
    );
    h.reply_fx(&init, "server-everything/http/03-legacy-initialize.json");
    legacy_session_ready(&mut h);
    assert!(
        !h.sent
            .iter()
            .any(|s| s.rpc_method() == "subscriptions/listen"),
        "no modern listen in a legacy session"
    );
    let ev = h.take_events();
    let accepted = ev
        .iter()
        .find_map(|e| match e {
            Event::Subscription(SubscriptionEvent::Acknowledged {
                sub: s, accepted, ..
            }) if *s == sub => Some(accepted.clone()),
            _ => None,
        })
        .expect("acknowledged in the legacy era");
    assert!(accepted.tools_list_changed);
}

/// Same rule, a modern server: the probe's answer settles the era, and the ping is refused
/// as a legacy-only operation without being sent.
#[test]
fn ping_with_the_era_unknown_on_a_modern_server_is_refused_after_the_probe() {
    let mut h = Harness::http_default();
    let ping = h.c.start(h.now, Operation::Ping, OpOptions::default());
    let probe = h.next_sent();
    assert_eq!(probe.rpc_method(), "server/discover");
    h.reply_fx(&probe, "python-sdk/http/01-server-discover.json");
    assert!(matches!(
        failure_of(&h.take_events(), ping),
        Some(OpError::Incompatible(IncompatibleError::Unsupported {
            operation: "ping",
            era: Era::Modern
        }))
    ));
    assert!(h.sent.is_empty(), "no ping goes out");
}

/// The listing before a call is the first request on a legacy server: its 400 means legacy,
/// and the call goes out once, in the session (never as a modern `tools/call`).
#[test]
fn a_call_whose_listing_meets_a_legacy_server_goes_out_in_the_legacy_session() {
    let mut h = Harness::http_default();
    let call = h.c.call_tool(
        h.now,
        "echo",
        obj(json!({"message": "hi"})),
        OpOptions::default(),
    );
    let list = h.next_sent();
    assert_eq!(list.rpc_method(), "tools/list");
    h.reply_fx(&list, "server-everything/http/02-modern-tools-list.json");
    let init = h.next_sent();
    assert_eq!(init.rpc_method(), "initialize");
    h.reply_fx(&init, "server-everything/http/03-legacy-initialize.json");
    assert!(h.take_events().contains(&Event::EraDetected {
        era: Era::Legacy,
        version: "2025-11-25".into(),
        evidence: EraEvidence::HttpStatus(400)
    }));
    legacy_session_ready(&mut h);
    let s = h.next_sent();
    assert_eq!(s.rpc_method(), "tools/call");
    assert!(s.header("Mcp-Session-Id").is_some());
    assert!(s.body["params"].get("_meta").is_none(), "a legacy request");
    h.reply_fx(&s, "server-everything/http/06-legacy-tools-call-echo.json");
    assert!(result_of(&h.take_events(), call).is_some());
    assert!(h.sent.is_empty(), "the call went out once");
}

// Legacy HTTP: the session's GET stream, resumption, and era detection by the discover answer.

/// A legacy HTTP client past its handshake with the session's GET stream open.
fn legacy_with_session_stream(config: ClientConfig) -> (Harness, Sent) {
    let mut h = Harness::new(config);
    h.c.discover(h.now);
    let init = h.next_sent();
    h.reply_fx(&init, "python-sdk/http/30-legacy-initialize.json");
    let (_, listen) = legacy_session_ready(&mut h);
    h.take_events();
    (h, listen)
}

fn legacy_elicit_config() -> ClientConfig {
    let mut config = elicit_config();
    config.protocol = ProtocolChoice::Legacy;
    config
}

/// Opens an SSE response on `stream` (head only).
fn sse_head(h: &mut Harness, stream: StreamId) {
    let mut hs = Headers::new();
    hs.append("content-type", "text/event-stream").unwrap();
    h.c.handle_response_head(
        h.now,
        SystemTime::now(),
        stream,
        ResponseHead {
            status: 200,
            headers: hs,
        },
    )
    .unwrap();
}

fn sse_data(h: &mut Harness, stream: StreamId, text: &str) {
    h.c.handle_response_data(h.now, stream, text.as_bytes())
        .unwrap();
    h.drain();
}

/// Legacy `basic/transports.mdx`, "Listening for Messages from the Server": after the handshake
/// the client opens the session's GET stream; a request the server sends there (an
/// `elicitation/create` that belongs to no call's stream, as the TypeScript SDK's server sends
/// it) is surfaced for the call in flight and answered by POST in the session.
#[test]
fn the_legacy_session_stream_carries_server_requests_for_the_call_in_flight() {
    let (mut h, listen) = legacy_with_session_stream(legacy_elicit_config());
    let call =
        h.c.call_tool(h.now, "confirm", Map::new(), OpOptions::default());
    let post = h.next_sent();
    assert_eq!(post.rpc_method(), "tools/call");
    let ask = json!({"jsonrpc": "2.0", "id": 7, "method": "elicitation/create", "params": {"message": "Name?",
        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string", "default": "Ada"}}}}});
    sse_data(
        &mut h,
        listen.stream,
        &format!("event: message\ndata: {ask}\n\n"),
    );
    let (key, form) = h
        .take_events()
        .into_iter()
        .find_map(|e| match e {
            Event::InputRequested { op, requests, .. } if op == call => {
                Some((requests[0].key.clone(), requests[0].request.clone()))
            }
            _ => None,
        })
        .expect("the request on the session stream is surfaced for the call in flight");
    let mcpwire_core::mcp::InputRequest::Elicitation(mcpwire_core::mcp::ElicitationRequest::Form(
        form,
    )) = form
    else {
        panic!("a form");
    };
    let content = form.schema.with_defaults(Map::new());
    h.c.answer_input(
        h.now,
        call,
        &key,
        InputAnswer::Elicitation(ElicitAnswer::Accept(content)),
    )
    .unwrap();
    let answer = h.next_sent();
    assert_eq!(answer.method, Method::Post);
    assert_eq!(
        answer.body,
        json!({"jsonrpc": "2.0", "id": 7, "result": {"action": "accept", "content": {"name": "Ada"}}})
    );
    assert_eq!(
        answer.header("Mcp-Session-Id"),
        listen.header("Mcp-Session-Id")
    );
    let done = json!({"jsonrpc": "2.0", "id": post.id(), "result": {"content": []}});
    h.reply(
        post.stream,
        200,
        &[("content-type", "application/json")],
        &done.to_string(),
    );
    assert!(result_of(&h.take_events(), call).is_some());
}

/// Legacy `basic/transports.mdx`, "Sending Messages to the Server" 6 and "Resumability and
/// Redelivery": a call's SSE stream that the server closes after an event id, before the
/// response, is not a failure; the client waits the `retry` it was given, then resumes with a
/// GET carrying `Last-Event-ID`, and the response arrives there.
#[test]
fn a_legacy_sse_stream_closed_early_is_resumed_with_last_event_id_after_retry() {
    let (mut h, _listen) = legacy_with_session_stream(legacy_elicit_config());
    let call =
        h.c.call_tool(h.now, "slow", Map::new(), OpOptions::default());
    let post = h.next_sent();
    sse_head(&mut h, post.stream);
    sse_data(&mut h, post.stream, "id: ev-2\nretry: 500\ndata: \n\n");
    h.c.handle_response_end(h.now, post.stream).unwrap();
    h.drain();
    assert!(
        failure_of(&h.take_events(), call).is_none(),
        "not a failure"
    );
    assert!(h.sent.is_empty(), "nothing before retry: {:?}", h.sent);
    h.advance(Duration::from_millis(499));
    assert!(h.sent.is_empty(), "nothing before retry: {:?}", h.sent);
    h.advance(Duration::from_millis(1));
    let get = h.next_sent();
    assert_eq!(get.method, Method::Get);
    assert_eq!(get.header("Last-Event-ID"), Some("ev-2"));
    assert_eq!(get.header("Accept"), Some("text/event-stream"));
    assert_eq!(get.header("Mcp-Session-Id"), post.header("Mcp-Session-Id"));
    let done = json!({"jsonrpc": "2.0", "id": post.id(), "result": {"content": [{"type": "text", "text": "ok"}]}});
    sse_head(&mut h, get.stream);
    sse_data(
        &mut h,
        get.stream,
        &format!("id: ev-3\ndata: \n\nevent: message\nid: ev-4\ndata: {done}\n\n"),
    );
    h.c.handle_response_end(h.now, get.stream).unwrap();
    let (result, _, _) = result_of(&h.take_events(), call).expect("the response came on the GET");
    assert_eq!(result["content"][0]["text"], "ok");
    h.advance(Duration::from_secs(5));
    assert!(
        h.sent.is_empty(),
        "no resume after the response: {:?}",
        h.sent
    );
}

/// The same section: without an event id there is nothing to resume from, so a tool call's
/// stream that ends early fails (it is never resent blindly); and a server that keeps closing
/// the stream without a new event is not polled forever.
#[test]
fn a_legacy_stream_without_an_event_id_or_with_no_progress_is_not_resumed() {
    let (mut h, _listen) = legacy_with_session_stream(legacy_elicit_config());
    let call = h.c.call_tool(h.now, "a", Map::new(), OpOptions::default());
    let post = h.next_sent();
    sse_head(&mut h, post.stream);
    sse_data(&mut h, post.stream, "retry: 10\ndata: \n\n");
    h.c.handle_response_end(h.now, post.stream).unwrap();
    assert!(failure_of(&h.take_events(), call).is_some());

    let call = h.c.call_tool(h.now, "b", Map::new(), OpOptions::default());
    let post = h.next_sent();
    sse_head(&mut h, post.stream);
    sse_data(&mut h, post.stream, "id: same\nretry: 10\ndata: \n\n");
    h.c.handle_response_end(h.now, post.stream).unwrap();
    let mut gets = 0;
    for _ in 0..10 {
        h.advance(Duration::from_millis(10));
        let Some(get) = h.sent.pop() else { break };
        assert_eq!(get.header("Last-Event-ID"), Some("same"));
        gets += 1;
        sse_head(&mut h, get.stream);
        sse_data(&mut h, get.stream, "id: same\nretry: 10\ndata: \n\n");
        h.c.handle_response_end(h.now, get.stream).unwrap();
    }
    assert!(
        (1..10).contains(&gets),
        "resumed {gets} times without progress"
    );
    assert!(failure_of(&h.take_events(), call).is_some());
}

/// Legacy subscriptions ride on the session's GET stream (a server may allow only one GET
/// stream per session), and end with it.
#[test]
fn a_legacy_subscription_rides_on_the_session_stream() {
    let mut config = ClientConfig::new(Transport::Http, info());
    config.protocol = ProtocolChoice::Legacy;
    let mut h = Harness::new(config);
    h.c.discover(h.now);
    let init = h.next_sent();
    let result = json!({"jsonrpc": "2.0", "id": init.id(), "result": {"protocolVersion": "2025-11-25",
        "capabilities": {"tools": {"listChanged": true}}, "serverInfo": {"name": "s", "version": "1"}}});
    h.reply(
        init.stream,
        200,
        &[
            ("content-type", "application/json"),
            ("mcp-session-id", "s-1"),
        ],
        &result.to_string(),
    );
    let (session, listen) = legacy_session_ready(&mut h);
    assert_eq!(session, "s-1");
    let sub =
        h.c.subscribe(
            h.now,
            SubscriptionFilter {
                tools_list_changed: true,
                ..Default::default()
            },
        )
        .unwrap();
    h.drain();
    assert!(
        h.sent.iter().all(|s| s.method != Method::Get),
        "no second GET: {:?}",
        h.sent
    );
    h.take_events();
    sse_data(
        &mut h,
        listen.stream,
        "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n",
    );
    assert!(h.take_events().iter().any(|e| matches!(e,
        Event::Subscription(SubscriptionEvent::Changed { sub: s, change: SubscriptionChange::ToolsListChanged }) if *s == sub)));
    h.c.handle_response_end(h.now, listen.stream).unwrap();
    assert!(h.take_events().iter().any(|e| matches!(e,
        Event::Subscription(SubscriptionEvent::Ended { sub: s, .. }) if *s == sub)));
}

/// `basic/versioning.mdx`, compatibility matrix (a legacy server may process an era-ambiguous
/// method under legacy semantics): on HTTP, a `server/discover` answered with a result that is
/// no `DiscoverResult` (here `{}`) means legacy: the client initializes and answers the
/// host's discover from the `initialize` result.
#[test]
fn http_discover_answered_with_an_empty_result_falls_back_to_initialize() {
    let mut h = Harness::http();
    let d = h.c.discover(h.now);
    let first = h.next_sent();
    assert_eq!(first.rpc_method(), "server/discover");
    let empty = json!({"jsonrpc": "2.0", "id": first.id(), "result": {}});
    h.reply(
        first.stream,
        200,
        &[("content-type", "application/json")],
        &empty.to_string(),
    );
    let ev = h.take_events();
    assert!(ev.contains(&Event::Retrying {
        op: d,
        reason: RetryReason::LegacyFallback
    }));
    let init = h.next_sent();
    assert_eq!(init.rpc_method(), "initialize");
    h.reply_fx(&init, "python-sdk/http/30-legacy-initialize.json");
    legacy_session_ready(&mut h);
    let ev = h.take_events();
    assert!(ev.iter().any(|e| matches!(
        e,
        Event::EraDetected {
            era: Era::Legacy,
            evidence: EraEvidence::NotADiscoverResult,
            ..
        }
    )));
    let (result, _, source) = result_of(&ev, d).unwrap();
    assert_eq!(source, ResultSource::Handshake);
    assert!(result.get("capabilities").is_some());

    // Pinned to modern, the same answer is the server's result, not a fallback.
    let mut config = ClientConfig::new(Transport::Http, info());
    config.protocol = ProtocolChoice::Modern;
    let mut h = Harness::new(config);
    let d = h.c.discover(h.now);
    let first = h.next_sent();
    let empty = json!({"jsonrpc": "2.0", "id": first.id(), "result": {}});
    h.reply(
        first.stream,
        200,
        &[("content-type", "application/json")],
        &empty.to_string(),
    );
    assert!(result_of(&h.take_events(), d).is_some());
    h.drain();
    assert!(h.sent.is_empty());
}

/// Legacy "Resumability and Redelivery": a server may redeliver a call's response on a GET
/// stream (the conformance suite's sse-retry server answers the first GET it sees, which can be
/// the session's stream when that GET reaches it after the call). The response is matched by
/// its id and ends the call; the call's own stream closing afterwards resumes nothing.
#[test]
fn a_call_response_on_the_session_stream_ends_the_call() {
    let (mut h, listen) = legacy_with_session_stream(legacy_elicit_config());
    let call =
        h.c.call_tool(h.now, "slow", Map::new(), OpOptions::default());
    let post = h.next_sent();
    sse_head(&mut h, post.stream);
    sse_data(&mut h, post.stream, "id: ev-1\nretry: 500\ndata: \n\n");
    let done = json!({"jsonrpc": "2.0", "id": post.id(), "result": {"content": []}});
    sse_data(
        &mut h,
        listen.stream,
        &format!("id: ev-2\nretry: 500\ndata: \n\nevent: message\nid: ev-3\ndata: {done}\n\n"),
    );
    assert!(result_of(&h.take_events(), call).is_some());
    h.c.handle_response_end(h.now, post.stream).unwrap();
    h.advance(Duration::from_secs(2));
    assert!(h.sent.is_empty(), "nothing to resume: {:?}", h.sent);
    assert!(failure_of(&h.take_events(), call).is_none());
}

/// Legacy HTTP, `initialize` answered with a session id: `notifications/initialized` goes out
/// in that session and is accepted (202), and the session's GET stream (legacy "Listening for
/// Messages from the Server") is opened in it, fresh (no `Last-Event-ID`). The session's requests
/// wait until the server answered both (it can then reach us): nothing else goes out before the
/// GET's answer, which this helper then gives. Returns the session id and the GET.
fn legacy_session_ready(h: &mut Harness) -> (String, Sent) {
    let initialized = h.next_sent();
    assert_eq!(initialized.rpc_method(), "notifications/initialized");
    let session = initialized
        .header("Mcp-Session-Id")
        .expect("notifications/initialized is sent in the session")
        .to_owned();
    h.reply(initialized.stream, 202, &[], "");
    let listen = h.next_sent();
    assert_eq!(listen.method, Method::Get);
    assert_eq!(listen.header("Accept"), Some("text/event-stream"));
    assert_eq!(listen.header("Last-Event-ID"), None);
    assert_eq!(listen.header("Mcp-Session-Id"), Some(session.as_str()));
    h.drain();
    assert!(
        h.sent.is_empty(),
        "nothing before the GET's answer: {:?}",
        h.sent
    );
    sse_head(h, listen.stream);
    (session, listen)
}

// ---------------------------------------------------------------------------------------------
// Transport details the issue lists, each through the whole client.

fn text_result(id: &Value, text: &str) -> String {
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "result": {"content": [{"type": "text", "text": text}]}
    })
    .to_string()
}

/// `basic/transports.mdx` (stdio) and JSON-RPC: answers are matched by id, so a stdio server
/// may answer two requests in either order; each result reaches its own operation.
#[test]
fn stdio_answers_in_reverse_order_reach_their_own_operations() {
    let mut config = ClientConfig::new(Transport::Stdio, info());
    config.protocol = ProtocolChoice::Modern;
    let mut h = Harness::new(config);
    let first = h.c.call_tool(
        h.now,
        "echo",
        obj(json!({"text": "one"})),
        OpOptions::default(),
    );
    let second = h.c.call_tool(
        h.now,
        "echo",
        obj(json!({"text": "two"})),
        OpOptions::default(),
    );
    let sent_first = h.next_line();
    let sent_second = h.next_line();
    assert_ne!(sent_first["id"], sent_second["id"]);
    h.c.handle_stdio_line(h.now, &text_result(&sent_second["id"], "two"))
        .unwrap();
    h.c.handle_stdio_line(h.now, &text_result(&sent_first["id"], "one"))
        .unwrap();
    let events = h.take_events();
    let (one, ..) = result_of(&events, first).expect("the first call's result");
    let (two, ..) = result_of(&events, second).expect("the second call's result");
    assert_eq!(one["content"][0]["text"], "one");
    assert_eq!(two["content"][0]["text"], "two");
}

/// Legacy `transports.mdx`, "Listening for Messages from the Server": "The server **MUST**
/// either return `Content-Type: text/event-stream` in response to this HTTP GET, or else return
/// HTTP 405 Method Not Allowed, indicating that the server does not offer an SSE stream at this
/// endpoint". A 405 to the session's GET is no failure: the session's
/// requests go out and are answered as usual.
#[test]
fn a_legacy_session_get_answered_405_leaves_the_session_working() {
    let mut config = ClientConfig::new(Transport::Http, info());
    config.protocol = ProtocolChoice::Legacy;
    let mut h = Harness::new(config);
    h.c.discover(h.now);
    let init = h.next_sent();
    h.reply_fx(&init, "python-sdk/http/30-legacy-initialize.json");
    let initialized = h.next_sent();
    h.reply(initialized.stream, 202, &[], "");
    let listen = h.next_sent();
    assert_eq!(listen.method, Method::Get);
    h.reply(listen.stream, 405, &[], "");
    h.take_events();

    let op = h.c.list(h.now, ListKind::Tools, None);
    let list = h.next_sent();
    assert_eq!(list.method, Method::Post);
    assert_eq!(list.rpc_method(), "tools/list");
    assert!(list.header("Mcp-Session-Id").is_some());
    let body = json!({"jsonrpc": "2.0", "id": list.id(), "result": {"tools": []}}).to_string();
    h.reply(
        list.stream,
        200,
        &[("content-type", "application/json")],
        &body,
    );
    let events = h.take_events();
    let (result, ..) = result_of(&events, op).expect("tools/list answered");
    assert_eq!(result["tools"], json!([]));
    assert!(failure_of(&events, op).is_none());
}

/// `basic/transports.mdx` (Streamable HTTP) and the SSE format: a response stream may open
/// with an empty-data priming event and carry `: ping` comments (CRLF line ends here) between
/// events; the client skips both and takes the `event: message` frame as the answer.
#[test]
fn sse_priming_event_and_ping_comments_are_skipped_before_the_answer() {
    let mut config = ClientConfig::new(Transport::Http, info());
    config.protocol = ProtocolChoice::Modern;
    config.list_tools_before_call = false;
    let mut h = Harness::new(config);
    let op = h.c.call_tool(
        h.now,
        "echo",
        obj(json!({"text": "hi"})),
        OpOptions::default(),
    );
    let sent = h.next_sent();
    h.take_events();
    let stream = format!(
        "id: p1\r\ndata:\r\n\r\n: ping\r\n\r\n: ping\r\n\r\nevent: message\r\nid: p2\r\ndata: {}\r\n\r\n",
        text_result(&sent.id(), "hi")
    );
    h.reply(
        sent.stream,
        200,
        &[("content-type", "text/event-stream")],
        &stream,
    );
    let events = h.take_events();
    let (result, is_error, _) = result_of(&events, op).expect("the answer after the pings");
    assert_eq!(result["content"][0]["text"], "hi");
    assert!(!is_error);
    assert!(
        !events.iter().any(|e| matches!(e, Event::Ignored { .. })),
        "{events:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// What the driver hands over whole: stdout bytes (the client cuts the lines), the request
// (URL and the host's headers), the host's refused answer.

fn stdio_modern() -> Harness {
    let mut config = ClientConfig::new(Transport::Stdio, info());
    config.protocol = ProtocolChoice::Modern;
    Harness::new(config)
}

/// `basic/transports/stdio.mdx`: "Messages are delimited by newlines". Stdout read in chunks
/// of any size: a line split across reads is joined, several lines in one read are each taken,
/// blank lines are nothing.
#[test]
fn stdio_bytes_are_cut_into_lines_across_reads() {
    let mut h = stdio_modern();
    let first = h.c.call_tool(
        h.now,
        "echo",
        obj(json!({"text": "one"})),
        OpOptions::default(),
    );
    let second = h.c.call_tool(
        h.now,
        "echo",
        obj(json!({"text": "two"})),
        OpOptions::default(),
    );
    let (a, b) = (h.next_line(), h.next_line());
    let text = format!(
        "{}\n\n{}\n",
        text_result(&a["id"], "one"),
        text_result(&b["id"], "two")
    );
    let (x, y) = text.as_bytes().split_at(7);
    h.c.handle_stdio_bytes(h.now, x).unwrap();
    assert!(
        result_of(&h.take_events(), first).is_none(),
        "half a line is no message"
    );
    h.c.handle_stdio_bytes(h.now, y).unwrap();
    let events = h.take_events();
    assert_eq!(
        result_of(&events, first).unwrap().0["content"][0]["text"],
        "one"
    );
    assert_eq!(
        result_of(&events, second).unwrap().0["content"][0]["text"],
        "two"
    );
}

/// A stdout line longer than `MAX_STDIO_LINE` (16 MiB) is skipped whole, wherever the reads cut
/// it, and the next line is taken; a line of exactly the limit is kept.
#[test]
fn an_over_long_stdio_line_is_skipped_whole() {
    use mcpwire_core::stdio_lines::MAX_STDIO_LINE;
    let mut h = stdio_modern();
    let op = h.c.call_tool(
        h.now,
        "echo",
        obj(json!({"text": "one"})),
        OpOptions::default(),
    );
    let sent = h.next_line();
    let answer = text_result(&sent["id"], "one");
    // The answer, padded past the limit with spaces JSON allows.
    let mut long = answer.clone().into_bytes();
    long.resize(MAX_STDIO_LINE + 1, b' ');
    let (x, y) = long.split_at(MAX_STDIO_LINE / 2);
    h.c.handle_stdio_bytes(h.now, x).unwrap();
    h.c.handle_stdio_bytes(h.now, y).unwrap();
    h.c.handle_stdio_bytes(h.now, b"\n").unwrap();
    assert!(
        result_of(&h.take_events(), op).is_none(),
        "the long line was skipped"
    );
    // Exactly the limit is not over it.
    long.truncate(MAX_STDIO_LINE);
    long.push(b'\n');
    h.c.handle_stdio_bytes(h.now, &long).unwrap();
    assert!(result_of(&h.take_events(), op).is_some());
}

/// The last line a server wrote without its newline is taken when its stdout closes.
#[test]
fn a_last_stdio_line_without_a_newline_is_taken_when_stdout_closes() {
    let mut h = stdio_modern();
    let op = h.c.call_tool(
        h.now,
        "echo",
        obj(json!({"text": "one"})),
        OpOptions::default(),
    );
    let sent = h.next_line();
    h.c.handle_stdio_bytes(h.now, text_result(&sent["id"], "one").as_bytes())
        .unwrap();
    assert!(result_of(&h.take_events(), op).is_none());
    h.c.handle_stdio_closed(h.now).unwrap();
    assert!(result_of(&h.take_events(), op).is_some());
}

/// Stdout bytes given to an HTTP client are the caller's mistake, named.
#[test]
fn stdio_bytes_on_http_are_a_usage_error() {
    let mut h = Harness::http();
    assert!(matches!(
        h.c.handle_stdio_bytes(h.now, b"{}\n"),
        Err(mcpwire_core::mcp::UsageError::WrongTransport {
            input: "handle_stdio_bytes"
        })
    ));
}

/// Every request is whole: it goes to the configured URL, and the host's extra headers follow
/// the client's own, except one whose name the client set (the client's header wins).
#[test]
fn every_request_goes_to_the_url_with_the_hosts_headers_after_the_clients() {
    let mut config = recorded_http_config().with_url("http://127.0.0.1:9/mcp");
    config.headers.append("accept", "text/plain").unwrap();
    config.headers.append("Authorization", "Bearer t").unwrap();
    let mut c = Client::new(config);
    c.list(Instant::now(), ListKind::Tools, None);
    let request = std::iter::from_fn(|| c.poll_output())
        .find_map(|o| match o {
            Output::Http { request, .. } => Some(request),
            _ => None,
        })
        .unwrap();
    assert_eq!(request.url, "http://127.0.0.1:9/mcp");
    assert_eq!(request.method, Method::Post);
    assert_eq!(
        request.headers.get_all("accept").collect::<Vec<_>>(),
        ["application/json, text/event-stream"]
    );
    assert_eq!(request.headers.get("authorization"), Some("Bearer t"));
    assert_eq!(request.headers.get("Mcp-Method"), Some("tools/list"));
    let body: Value = serde_json::from_slice(&request.body).unwrap();
    assert_eq!(body["method"], "tools/list");
}

/// A driver answering on the host's behalf: an answer the client refuses ends the operation
/// (it is cancelled, nobody is left to answer again) and the refusal comes back to report.
#[test]
fn a_refused_answer_cancels_the_operation() {
    let (mut h, op, key) = awaiting_confirmation();
    let bad = InputAnswer::Elicitation(ElicitAnswer::Accept(obj(json!({"confirm": "yes"}))));
    assert!(h.c.answer_input_or_cancel(h.now, op, &key, bad).is_err());
    let events = h.take_events();
    assert!(events
        .iter()
        .any(|e| matches!(e, Event::Cancelled { op: o } if *o == op)));
    assert!(h.sent.is_empty(), "no retry goes out");
    assert_eq!(h.c.active_ops(), 0);
}

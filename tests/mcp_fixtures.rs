//! Contract tests for the real MCP exchanges recorded in `fixtures/mcp/<server>/<transport>/`
//! (see `fixtures/mcp/README.md` for how they were captured and from which peers).
//!
//! - every fixture is JSON with the recorded shape, named `<NN>-<what>.json`;
//! - every JSON-RPC message a server sent (JSON body, SSE `data`, stdio line) classifies with
//!   `mcpwire_core::jsonrpc::Message::parse`, and a final response carries the request's id;
//! - every SSE body decodes with `mcpwire_core::sse::SseParser` to the recorded events;
//! - every 2026-07-28 result, error and notification from a modern server validates against
//!   the matching definition of the 2026-07-28 `schema.json`; the ones that do not are listed in
//!   [`KNOWN_NONCONFORMING`] (findings about the real servers, also marked in the README);
//! - every 2026-07-28 request our capture client sent validates too, so client tests can reuse
//!   them as known-good requests;
//! - the era-detection facts the client core relies on hold for the recorded servers.
//!
//! Every file read is in the repository: the schema is the copy in `fixtures/spec/` (see
//! `fixtures/spec/README.md`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use jsonschema::{Draft, Registry, Validator};
use mcpwire_core::jsonrpc::{Id, Message};
use mcpwire_core::sse::SseParser;
use serde_json::{json, Value};

/// The base URI the 2026-07-28 schema is registered under (never fetched).
const SCHEMA_URI: &str = "https://mcpwire.invalid/fixtures/spec/mcp-2026-07-28/schema.json";
/// Where the schema sits inside `fixtures/spec/`.
const SCHEMA_REL: &str = "mcp-2026-07-28/schema.json";
/// The protocol revision whose schema the modern exchanges are checked against.
const LATEST: &str = "2026-07-28";

/// Servers whose modern-era answers are checked against the schema. `server-everything`
/// speaks only the legacy era: its answers to 2026-07-28 requests are era-detection samples.
const MODERN_SERVERS: &[&str] = &["python-sdk", "typescript-sdk"];

/// Fixtures (relative to `fixtures/mcp/`) holding a real server's answer that does NOT
/// validate against the 2026-07-28 schema, or breaks a spec rule this file checks, with why.
/// Each is a finding about that server; the walk fails if one of these starts to conform
/// (the entry is stale) or if any other fixture does not.
const KNOWN_NONCONFORMING: &[(&str, &str)] = &[
    (
        "python-sdk/http/08-tools-list-version-header-mismatch.json",
        "MCP-Protocol-Version: 2025-11-25 with a 2026-07-28 _meta: the server routes by the header \
         to its legacy transport and answers -32600 'Missing session ID' (id null) instead of \
         400 + -32020 HeaderMismatch (transports/streamable-http.mdx, 'Protocol Version Header')",
    ),
    (
        "typescript-sdk/stdio/17-unsupported-protocol-version.json",
        "a tools/list naming protocol version 2099-01-01 on a stdio connection that opened as \
         2026-07-28 is answered as if it were 2026-07-28 instead of with -32022: serveStdio pins \
         the era (and version) per connection, not per request (basic/versioning.mdx; \
         basic/index.mdx, 'Statelessness')",
    ),
];

/// Server messages (fixture, where) that `Message::parse` rejects although the 2026-07-28
/// schema allows them, with why. A finding for mcpwire-core; the walk fails when one of these
/// starts to parse (the entry is stale) or when any other message does not.
/// Messages `Message::parse` is known to reject: none today. (An error response with no `id`
/// member, as server-everything sends for an unknown session, is accepted since the schema's
/// `JSONRPCErrorResponse` requires only `jsonrpc` and `error`.)
const KNOWN_PARSE_REJECTIONS: &[(&str, &str, &str)] = &[];

// ---------------------------------------------------------------------------------------------
// Locating things
// ---------------------------------------------------------------------------------------------

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

fn fixtures_dir() -> PathBuf {
    repo_root().join("fixtures/mcp")
}

/// The vendored spec files (`fixtures/spec/`), laid out as the spec folder they come from.
fn spec_dir() -> PathBuf {
    repo_root().join("fixtures/spec")
}

/// One recorded exchange.
struct Fixture {
    /// Path relative to `fixtures/mcp/`, with `/` separators.
    rel: String,
    doc: Value,
}

impl Fixture {
    fn str_field(&self, key: &str) -> &str {
        self.doc[key]
            .as_str()
            .unwrap_or_else(|| panic!("{}: no string {key:?}", self.rel))
    }
    fn server(&self) -> &str {
        self.str_field("server")
    }
    fn transport(&self) -> &str {
        self.str_field("transport")
    }
    fn era(&self) -> &str {
        self.str_field("era")
    }
    fn what(&self) -> &str {
        self.str_field("what")
    }
    fn request_body(&self) -> &Value {
        &self.doc["request"]["body"]
    }
    fn response(&self) -> &Value {
        &self.doc["response"]
    }
    fn is_modern_server(&self) -> bool {
        MODERN_SERVERS.contains(&self.server())
    }

    /// Every message the server sent in this exchange, in order, with where it came from.
    fn server_messages(&self) -> Vec<(String, Value)> {
        let r = self.response();
        let mut out = Vec::new();
        match self.transport() {
            "http" => {
                if let Some(events) = r.get("sse_events").and_then(Value::as_array) {
                    for (i, ev) in events.iter().enumerate() {
                        // The priming event of a legacy SSE stream has an empty data line.
                        match ev.get("data") {
                            Some(d) if d.is_object() || d.is_array() => {
                                out.push((format!("sse event {i}"), d.clone()))
                            }
                            Some(Value::String(s)) if !s.is_empty() => {
                                out.push((format!("sse event {i} (not JSON)"), json!(s)))
                            }
                            _ => {}
                        }
                    }
                } else if !r["body"].is_null() {
                    out.push(("body".to_owned(), r["body"].clone()));
                }
            }
            "stdio" => {
                if let Some(msgs) = r.get("messages").and_then(Value::as_array) {
                    for (i, m) in msgs.iter().enumerate() {
                        out.push((format!("stdio message {i}"), m.clone()));
                    }
                }
                if !r["body"].is_null() {
                    out.push(("stdio response".to_owned(), r["body"].clone()));
                }
            }
            other => panic!("{}: unknown transport {other:?}", self.rel),
        }
        out
    }
}

fn load_fixtures() -> &'static [Fixture] {
    static ALL: OnceLock<Vec<Fixture>> = OnceLock::new();
    ALL.get_or_init(|| {
        let root = fixtures_dir();
        let mut all = Vec::new();
        for server in sorted_dirs(&root) {
            let name = server.file_name().unwrap().to_str().unwrap().to_owned();
            if name == "capture" || name == "examples" {
                continue;
            }
            for transport in sorted_dirs(&server) {
                let mut files: Vec<PathBuf> = std::fs::read_dir(&transport)
                    .unwrap()
                    .map(|e| e.unwrap().path())
                    .collect();
                files.sort();
                for path in files {
                    let rel = path
                        .strip_prefix(&root)
                        .unwrap()
                        .to_str()
                        .unwrap()
                        .replace('\\', "/");
                    let bytes = std::fs::read(&path).unwrap();
                    let doc: Value = serde_json::from_slice(&bytes)
                        .unwrap_or_else(|e| panic!("{rel} is not JSON: {e}"));
                    all.push(Fixture { rel, doc });
                }
            }
        }
        all
    })
}

fn sorted_dirs(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    v.sort();
    v
}

// ---------------------------------------------------------------------------------------------
// Schema
// ---------------------------------------------------------------------------------------------

struct Schema {
    doc: Value,
    registry: Registry<'static>,
    cache: std::sync::Mutex<BTreeMap<String, &'static Validator>>,
}

fn schema() -> &'static Schema {
    static SCHEMA: OnceLock<Schema> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        let path = spec_dir().join(SCHEMA_REL);
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        let doc: Value = serde_json::from_str(&text).expect("schema.json is JSON");
        let registry = Registry::new()
            .draft(Draft::Draft202012)
            .add(SCHEMA_URI, doc.clone())
            .expect("the schema base URI is valid")
            .prepare()
            .expect("schema.json indexes as a JSON Schema resource");
        Schema {
            doc,
            registry,
            cache: std::sync::Mutex::new(BTreeMap::new()),
        }
    })
}

/// A validator for `#/$defs/<name>` of the 2026-07-28 schema (built once, then reused).
fn def(name: &str) -> &'static Validator {
    let s = schema();
    assert!(
        s.doc["$defs"].get(name).is_some(),
        "schema.json has no $defs/{name}"
    );
    let mut cache = s.cache.lock().unwrap();
    if let Some(v) = cache.get(name) {
        return v;
    }
    let v = jsonschema::options()
        .with_draft(Draft::Draft202012)
        .with_registry(&s.registry)
        .offline()
        .build(&json!({ "$ref": format!("{SCHEMA_URI}#/$defs/{name}") }))
        .unwrap_or_else(|e| panic!("cannot compile a validator for $defs/{name}: {e}"));
    let v: &'static Validator = Box::leak(Box::new(v));
    cache.insert(name.to_owned(), v);
    v
}

/// `Ok` or every validation error, one per line.
fn check(name: &str, instance: &Value) -> Result<(), String> {
    let errors: Vec<String> = def(name)
        .iter_errors(instance)
        .map(|e| format!("{name}: {e} at {}", e.instance_path()))
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("\n"))
    }
}

/// The `$defs` name of the response message answering `method`.
fn response_def(method: &str) -> Option<&'static str> {
    Some(match method {
        "server/discover" => "DiscoverResultResponse",
        "tools/list" => "ListToolsResultResponse",
        "tools/call" => "CallToolResultResponse",
        "prompts/list" => "ListPromptsResultResponse",
        "prompts/get" => "GetPromptResultResponse",
        "resources/list" => "ListResourcesResultResponse",
        "resources/read" => "ReadResourceResultResponse",
        "resources/templates/list" => "ListResourceTemplatesResultResponse",
        "subscriptions/listen" => "SubscriptionsListenResultResponse",
        _ => return None,
    })
}

/// The `$defs` name of the `result` of `method` with the given `resultType`.
fn result_def(method: &str, result_type: Option<&str>) -> Option<&'static str> {
    if result_type == Some("input_required") {
        return matches!(method, "tools/call" | "prompts/get" | "resources/read")
            .then_some("InputRequiredResult");
    }
    Some(match method {
        "server/discover" => "DiscoverResult",
        "tools/list" => "ListToolsResult",
        "tools/call" => "CallToolResult",
        "prompts/list" => "ListPromptsResult",
        "prompts/get" => "GetPromptResult",
        "resources/list" => "ListResourcesResult",
        "resources/read" => "ReadResourceResult",
        "resources/templates/list" => "ListResourceTemplatesResult",
        "subscriptions/listen" => "SubscriptionsListenResult",
        _ => return None,
    })
}

/// The `$defs` name of an error response with `code`.
fn error_def(code: i64) -> &'static str {
    match code {
        -32700 => "ParseError",
        -32600 => "InvalidRequestError",
        -32601 => "MethodNotFoundError",
        -32602 => "InvalidParamsError",
        -32603 => "InternalError",
        -32020 => "HeaderMismatchError",
        -32021 => "MissingRequiredClientCapabilityError",
        -32022 => "UnsupportedProtocolVersionError",
        _ => "JSONRPCErrorResponse",
    }
}

/// The `$defs` name of a server notification.
fn notification_def(method: &str) -> &'static str {
    match method {
        "notifications/progress" => "ProgressNotification",
        "notifications/message" => "LoggingMessageNotification",
        "notifications/subscriptions/acknowledged" => "SubscriptionsAcknowledgedNotification",
        "notifications/tools/list_changed" => "ToolListChangedNotification",
        "notifications/prompts/list_changed" => "PromptListChangedNotification",
        "notifications/resources/list_changed" => "ResourceListChangedNotification",
        "notifications/resources/updated" => "ResourceUpdatedNotification",
        "notifications/cancelled" => "CancelledNotification",
        _ => "JSONRPCNotification",
    }
}

/// The `$defs` name of a client request.
fn request_def(method: &str) -> Option<&'static str> {
    Some(match method {
        "server/discover" => "DiscoverRequest",
        "tools/list" => "ListToolsRequest",
        "tools/call" => "CallToolRequest",
        "prompts/list" => "ListPromptsRequest",
        "prompts/get" => "GetPromptRequest",
        "resources/list" => "ListResourcesRequest",
        "resources/read" => "ReadResourceRequest",
        "resources/templates/list" => "ListResourceTemplatesRequest",
        "subscriptions/listen" => "SubscriptionsListenRequest",
        _ => return None,
    })
}

/// Checks one server message of a modern exchange against the schema.
fn check_server_message(method: &str, msg: &Value) -> Result<(), String> {
    if let Some(m) = msg.get("method").and_then(Value::as_str) {
        return check(notification_def(m), msg);
    }
    if let Some(code) = msg.pointer("/error/code").and_then(Value::as_i64) {
        let name = error_def(code);
        // The JSON-RPC standard errors are defined as error objects; the MCP-defined ones
        // (-32020..-32022) and the generic fallback as whole error responses.
        return if matches!(code, -32700 | -32600 | -32601 | -32602 | -32603) {
            check("JSONRPCErrorResponse", msg).and_then(|()| check(name, &msg["error"]))
        } else {
            check(name, msg)
        };
    }
    if let Some(result) = msg.get("result") {
        let mut errs = Vec::new();
        if let Some(name) = response_def(method) {
            if let Err(e) = check(name, msg) {
                errs.push(e);
            }
        }
        let rt = result.get("resultType").and_then(Value::as_str);
        match result_def(method, rt) {
            Some(name) => {
                if let Err(e) = check(name, result) {
                    errs.push(e);
                }
            }
            None => errs.push(format!(
                "no result definition for {method} with resultType {rt:?}"
            )),
        }
        return if errs.is_empty() {
            Ok(())
        } else {
            Err(errs.join("\n"))
        };
    }
    Err("neither a notification, an error nor a result".to_owned())
}

fn known_nonconforming() -> BTreeMap<&'static str, &'static str> {
    KNOWN_NONCONFORMING.iter().copied().collect()
}

// ---------------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------------

/// Every recorded fixture is JSON with the documented shape, under the directory and file name
/// its contents say, and every expected server/transport pair was captured.
#[test]
fn every_mcp_fixture_parses_with_the_recorded_shape() {
    let all = load_fixtures();
    let mut pairs: BTreeMap<(String, String), usize> = BTreeMap::new();
    for f in all {
        let parts: Vec<&str> = f.rel.split('/').collect();
        assert_eq!(parts.len(), 3, "{}: not <server>/<transport>/<file>", f.rel);
        assert_eq!(parts[0], f.server(), "{}: server field", f.rel);
        assert_eq!(parts[1], f.transport(), "{}: transport field", f.rel);
        let file = parts[2];
        let (nn, rest) = file.split_once('-').expect("NN-what.json");
        assert!(
            nn.len() == 2 && nn.bytes().all(|b| b.is_ascii_digit()),
            "{}: NN prefix",
            f.rel
        );
        assert_eq!(rest, format!("{}.json", f.what()), "{}: what field", f.rel);
        assert!(
            matches!(f.era(), "2026-07-28" | "2025-11-25"),
            "{}: era {}",
            f.rel,
            f.era()
        );
        assert!(f.doc["peer"].is_string(), "{}: peer", f.rel);
        assert!(f.doc["request"].is_object(), "{}: request", f.rel);
        let r = f.response();
        assert!(r.is_object(), "{}: response", f.rel);
        assert!(r.get("body").is_some(), "{}: response.body", f.rel);
        if f.transport() == "http" {
            assert!(r["status"].is_u64(), "{}: response.status", f.rel);
            assert!(r["headers"].is_object(), "{}: response.headers", f.rel);
            assert!(r.get("content_type").is_some(), "{}: content_type", f.rel);
            assert!(
                f.doc["request"]["headers"].is_object(),
                "{}: request.headers",
                f.rel
            );
            let sse = r["content_type"]
                .as_str()
                .is_some_and(|c| c.starts_with("text/event-stream"));
            assert_eq!(sse, r.get("sse_events").is_some(), "{}: sse_events", f.rel);
        } else {
            assert!(r["messages"].is_array(), "{}: response.messages", f.rel);
        }
        *pairs
            .entry((f.server().to_owned(), f.transport().to_owned()))
            .or_default() += 1;
    }
    for server in ["python-sdk", "typescript-sdk", "server-everything"] {
        for transport in ["http", "stdio"] {
            let n = pairs
                .get(&(server.to_owned(), transport.to_owned()))
                .copied()
                .unwrap_or(0);
            assert!(n >= 5, "{server}/{transport}: only {n} fixtures");
        }
    }
}

/// basic/index.mdx, "Messages": everything a server sent is a JSON-RPC response, error or
/// notification that `Message::parse` classifies by its members; a final response carries the
/// id of the request it answers (or `null` for an error about an unreadable request); and on a
/// 2026-07-28 exchange the server sends no request of its own
/// (transports/streamable-http.mdx, "Receiving Messages").
#[test]
fn every_server_message_classifies_with_message_parse() {
    let mut checked = 0usize;
    let mut rejected = 0usize;
    for f in load_fixtures() {
        let request_id = f.request_body().get("id").cloned();
        for (at, msg) in f.server_messages() {
            let text = match &msg {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            let known = KNOWN_PARSE_REJECTIONS
                .iter()
                .any(|(rel, w, _)| *rel == f.rel && *w == at);
            let parsed = match Message::parse(&text) {
                Ok(_) if known => panic!(
                    "{} {at}: listed in KNOWN_PARSE_REJECTIONS but parses now; drop the entry",
                    f.rel
                ),
                Ok(p) => p,
                Err(_) if known => {
                    rejected += 1;
                    continue;
                }
                Err(e) => panic!("{} {at}: Message::parse failed: {e}\n{text}", f.rel),
            };
            let expect = if msg.get("method").is_some() {
                if msg.get("id").is_some() {
                    "request"
                } else {
                    "notification"
                }
            } else if msg.get("error").is_some() {
                "error"
            } else {
                "response"
            };
            let got = match &parsed {
                Message::Request { .. } => "request",
                Message::Notification { .. } => "notification",
                Message::Response { .. } => "response",
                Message::Error { .. } => "error",
            };
            assert_eq!(got, expect, "{} {at}: classified as {got}", f.rel);
            if f.era() == LATEST && f.is_modern_server() {
                assert_ne!(
                    got, "request",
                    "{} {at}: a server request on a 2026-07-28 exchange",
                    f.rel
                );
            }
            // The response that ends the exchange answers the request sent.
            let is_final = at == "body" || at == "stdio response";
            if is_final {
                if let Some(rid) = &request_id {
                    let want: Id = serde_json::from_value(rid.clone()).unwrap();
                    match parsed {
                        Message::Response { id, .. } => assert_eq!(id, want, "{} id", f.rel),
                        Message::Error { id: Some(id), .. } => {
                            assert_eq!(id, want, "{} id", f.rel)
                        }
                        Message::Error { id: None, .. } => {}
                        _ => {}
                    }
                }
            }
            checked += 1;
        }
    }
    assert_eq!(
        rejected,
        KNOWN_PARSE_REJECTIONS.len(),
        "a KNOWN_PARSE_REJECTIONS entry names no recorded message"
    );
    assert!(checked > 100, "only {checked} server messages were checked");
}

/// transports/streamable-http.mdx, "Receiving Messages": every recorded SSE body decodes with
/// mcpwire-core's `SseParser` into the recorded events, in order, with the same data, event
/// type and id (comments, such as keep-alives, dispatch nothing).
#[test]
fn recorded_sse_bodies_decode_with_core_sse_parser() {
    let mut streams = 0;
    for f in load_fixtures() {
        let Some(events) = f.response().get("sse_events").and_then(Value::as_array) else {
            continue;
        };
        let raw = f.response()["body"].as_str().expect("raw SSE body");
        let mut parser = SseParser::new();
        parser.push(raw.as_bytes());
        let mut got = Vec::new();
        while let Some(ev) = parser.next_event().unwrap() {
            got.push(ev);
        }
        let cut = f.response()["closed_by_client"] == json!(true);
        if !cut {
            if let Some(ev) = parser.finish().unwrap() {
                got.push(ev);
            }
        }
        let want: Vec<&Value> = events
            .iter()
            .filter(|e| e.get("comment").is_none() && e.get("unterminated").is_none())
            .collect();
        assert_eq!(got.len(), want.len(), "{}: event count", f.rel);
        for (g, w) in got.iter().zip(want) {
            let data: Value = match &w["data"] {
                Value::String(s) => json!(s),
                other => other.clone(),
            };
            let parsed = serde_json::from_str::<Value>(&g.data).unwrap_or(json!(g.data));
            assert_eq!(parsed, data, "{}: event data", f.rel);
            assert_eq!(
                g.event,
                w.get("event").and_then(Value::as_str).unwrap_or("message"),
                "{}: event type",
                f.rel
            );
            if let Some(id) = w.get("id").and_then(Value::as_str) {
                assert_eq!(g.id.as_deref(), Some(id), "{}: event id", f.rel);
            }
        }
        streams += 1;
    }
    assert!(streams >= 10, "only {streams} SSE streams were recorded");
}

/// schema.json (2026-07-28): every result, error and notification a modern server sent on a
/// 2026-07-28 exchange validates against its definition — results against both the
/// `<Method>ResultResponse` message and the result definition its `resultType` selects.
/// Answers that do not are findings, listed in `KNOWN_NONCONFORMING`.
#[test]
fn modern_server_messages_validate_against_the_2026_07_28_schema() {
    let known = known_nonconforming();
    let mut failures: BTreeMap<String, String> = BTreeMap::new();
    let mut validated = 0usize;
    for f in load_fixtures() {
        if f.era() != LATEST || !f.is_modern_server() {
            continue;
        }
        let body = f.request_body();
        let Some(method) = body.get("method").and_then(Value::as_str) else {
            continue;
        };
        for (at, msg) in f.server_messages() {
            // On stdio the listen capture also carries the answer to the touch_readme call.
            let method = if msg.get("id").is_some() && msg.get("id") != body.get("id") {
                "tools/call"
            } else {
                method
            };
            if let Err(e) = check_server_message(method, &msg) {
                failures
                    .entry(f.rel.clone())
                    .or_default()
                    .push_str(&format!("{at}: {e}\n"));
            }
            validated += 1;
        }
    }
    // Rule checks beyond the schema. transports/streamable-http.mdx, "Server Validation":
    // header/body disagreement is 400 + -32020 on HTTP.
    for f in load_fixtures() {
        if f.transport() == "http"
            && f.is_modern_server()
            && f.doc["note"]
                .as_str()
                .is_some_and(|n| n.contains("expect -32020"))
        {
            let r = f.response();
            let code = r["body"].pointer("/error/code").and_then(Value::as_i64);
            if r["status"] != json!(400) || code != Some(-32020) {
                failures
                    .entry(f.rel.clone())
                    .or_default()
                    .push_str(&format!(
                        "header mismatch answered with status {} and code {code:?}\n",
                        r["status"]
                    ));
            }
        }
        // basic/versioning.mdx: an unknown version is answered with -32022, on every transport.
        if f.is_modern_server() && f.what() == "unsupported-protocol-version" {
            let body = &f.response()["body"];
            if body.pointer("/error/code") != Some(&json!(-32022)) {
                failures.entry(f.rel.clone()).or_default().push_str(
                    "a request naming an unknown protocol version was not answered with -32022\n",
                );
            }
        }
    }
    let unexpected: Vec<String> = failures
        .iter()
        .filter(|(rel, _)| !known.contains_key(rel.as_str()))
        .map(|(rel, e)| format!("{rel}:\n{e}"))
        .collect();
    assert!(
        unexpected.is_empty(),
        "real-server answers that do not conform (add them to KNOWN_NONCONFORMING and the \
         README if they are genuine findings):\n{}",
        unexpected.join("\n")
    );
    let stale: Vec<&&str> = known
        .keys()
        .filter(|rel| !failures.contains_key(**rel))
        .collect();
    assert!(
        stale.is_empty(),
        "KNOWN_NONCONFORMING lists fixtures that conform: {stale:?}"
    );
    assert!(validated > 50, "only {validated} messages were validated");
}

/// basic/index.mdx, "_meta": the 2026-07-28 requests our capture client sent (all but the
/// deliberately malformed ones) validate against their request definitions, so client tests can
/// use them as known-good requests.
#[test]
fn recorded_modern_requests_validate_against_the_2026_07_28_schema() {
    let deliberately_malformed: BTreeSet<&str> = ["missing-client-capabilities-meta"].into();
    let mut n = 0;
    for f in load_fixtures() {
        if f.era() != LATEST || deliberately_malformed.contains(f.what()) {
            continue;
        }
        let body = f.request_body();
        let Some(def_name) = body["method"].as_str().and_then(request_def) else {
            continue;
        };
        check(def_name, body).unwrap_or_else(|e| panic!("{}: {e}", f.rel));
        n += 1;
    }
    assert!(n > 40, "only {n} requests were validated");
}

/// transports/streamable-http.mdx, "Backward Compatibility": a legacy-only server answers a
/// 2026-07-28 request over HTTP with 400 and a body that is NOT a recognized modern error
/// (-32020/-32021/-32022), which is what tells the client to fall back to `initialize`.
#[test]
fn legacy_http_server_answers_modern_requests_with_an_unrecognized_400() {
    let mut n = 0;
    for f in load_fixtures() {
        if f.server() != "server-everything" || f.transport() != "http" || f.era() != LATEST {
            continue;
        }
        let r = f.response();
        assert_eq!(r["status"], json!(400), "{}", f.rel);
        let code = r["body"].pointer("/error/code").and_then(Value::as_i64);
        assert!(
            !matches!(code, Some(-32022..=-32020)),
            "{}: a legacy server must not look modern",
            f.rel
        );
        n += 1;
    }
    assert!(n >= 2);
}

/// transports/stdio.mdx, "Backward Compatibility" and server/discover.mdx, "When to Call": on
/// stdio a legacy-only server answers the `server/discover` probe with an error that is not a
/// recognized modern error, which means legacy.
#[test]
fn legacy_stdio_server_answers_the_discover_probe_with_a_non_modern_error() {
    let f = load_fixtures()
        .iter()
        .find(|f| f.rel == "server-everything/stdio/01-modern-server-discover.json")
        .expect("the stdio probe fixture");
    let code = f.response()["body"]
        .pointer("/error/code")
        .and_then(Value::as_i64);
    assert_eq!(code, Some(-32601), "{}", f.rel);
}

/// basic/versioning.mdx, "Protocol Version Negotiation": over HTTP a modern server rejects an
/// unknown protocol version with 400 and -32022 whose `data.supported` names the versions it
/// speaks (including 2026-07-28).
#[test]
fn modern_http_servers_reject_unknown_versions_with_32022_and_supported_list() {
    let mut n = 0;
    for f in load_fixtures() {
        if f.transport() != "http" || f.what() != "unsupported-protocol-version" {
            continue;
        }
        let r = f.response();
        assert_eq!(r["status"], json!(400), "{}", f.rel);
        assert_eq!(r["body"]["error"]["code"], json!(-32022), "{}", f.rel);
        let supported = r["body"]["error"]["data"]["supported"]
            .as_array()
            .expect("data.supported");
        assert!(supported.contains(&json!(LATEST)), "{}", f.rel);
        n += 1;
    }
    assert_eq!(n, MODERN_SERVERS.len());
}

/// The schema checks above are not vacuous: a recorded modern result with its `resultType`
/// removed, or an error with the wrong code for its definition, fails validation.
#[test]
fn schema_check_rejects_a_result_without_result_type_and_a_miscoded_error() {
    let f = load_fixtures()
        .iter()
        .find(|f| f.rel == "python-sdk/http/02-tools-list.json")
        .expect("tools/list fixture");
    let mut msg = f.response()["body"].clone();
    check_server_message("tools/list", &msg).expect("the recorded answer conforms");
    msg["result"].as_object_mut().unwrap().remove("resultType");
    assert!(check_server_message("tools/list", &msg).is_err());
    let wrong = json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32022, "message": "x"}});
    assert!(
        check_server_message("tools/list", &wrong).is_err(),
        "-32022 without data.supported must not validate"
    );
}

/// Our own reference server (`mcpwire dev mcp-server`) answers modern requests as the
/// 2026-07-28 schema says: `server/discover` and `tools/list` carry their required `ttlMs` and
/// `cacheScope` (rmcp refuses a discover result without them), and an `echo` call validates.
#[test]
fn our_reference_server_answers_modern_requests_as_the_schema_says() {
    use mcpwire::mcp::blocking::McpClient;
    use mcpwire::mcp::{ClientOptions, Operation};
    use mcpwire_core::mcp::OpOptions;
    use mcpwire_dev::mcp_server::{Config, McpServer};

    let server = McpServer::start_http(Config::default(), "127.0.0.1:0").expect("server");
    let client = McpClient::connect_http(&server.url(), ClientOptions::default()).unwrap();
    let answers = [
        // The results as the server sent them.
        (
            "server/discover",
            client
                .run(Operation::Discover, OpOptions::default())
                .unwrap(),
        ),
        ("tools/list", client.list_tools(None).unwrap().raw().clone()),
        (
            "tools/call",
            client
                .call_tool_with("echo", json!({"text": "hi"}), OpOptions::default())
                .unwrap()
                .raw()
                .clone(),
        ),
    ];
    assert_eq!(
        client.era().and_then(|e| e.protocol_version).as_deref(),
        Some(LATEST)
    );
    client.close();
    for (method, result) in answers {
        let msg = json!({"jsonrpc": "2.0", "id": 1, "result": result});
        if let Err(e) = check_server_message(method, &msg) {
            panic!("{method}: {e}\n{result}");
        }
    }
}

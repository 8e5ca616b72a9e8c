//! Adversarial review of `mcp::Client`: each test holds one rule of the spec or of issue 3 that
//! a review found broken (and now fixed) or checked. Bodies are written inline, in the shape of
//! the recorded exchanges under `fixtures/mcp/`, so each test shows its whole exchange.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant, SystemTime};

use mcpwire_core::http::{Headers, ResponseHead};
use mcpwire_core::mcp::{
    request, subscription, CallOptions, Client, ClientCapabilities, ClientConfig, ElicitAnswer,
    Event, Implementation, InputAnswer, ListKind, OpId, OpOptions, Output, ProtocolChoice,
    ResultSource, RetryReason, StreamId, SubscriptionEvent, SubscriptionFilter, SubscriptionHandle,
    TimeoutReason, Transport, UsageError, SESSION_OPEN_WAIT,
};
use serde_json::{json, Map, Value};

fn info() -> Implementation {
    Implementation::new("mcpwire-review", "0.1.0")
}

struct Sent {
    stream: StreamId,
    headers: Headers,
    body: Value,
    raw: String,
}

struct H {
    c: Client,
    now: Instant,
    events: Vec<Event>,
    sent: Vec<Sent>,
    lines: Vec<Value>,
    closed: Vec<StreamId>,
}

impl H {
    fn new(config: ClientConfig) -> Self {
        let mut h = H {
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

    fn drain(&mut self) {
        while let Some(o) = self.c.poll_output() {
            match o {
                Output::Http { stream, request } => {
                    let body = String::from_utf8(request.body).unwrap();
                    self.sent.push(Sent {
                        stream,
                        headers: request.headers,
                        body: serde_json::from_str(&body).unwrap_or(Value::Null),
                        raw: body,
                    })
                }
                Output::CloseStream(s) => self.closed.push(s),
                Output::Stdio(line) => self.lines.push(serde_json::from_str(&line).unwrap()),
                Output::Event(e) => self.events.push(e),
            }
        }
    }

    fn next_sent(&mut self) -> Sent {
        self.drain();
        assert!(!self.sent.is_empty(), "nothing sent; {:?}", self.events);
        self.sent.remove(0)
    }

    fn next_line(&mut self) -> Value {
        self.drain();
        assert!(!self.lines.is_empty(), "nothing written; {:?}", self.events);
        self.lines.remove(0)
    }

    fn take_events(&mut self) -> Vec<Event> {
        self.drain();
        std::mem::take(&mut self.events)
    }

    fn reply(&mut self, stream: StreamId, status: u16, headers: &[(&str, &str)], body: &str) {
        let mut hs = Headers::new();
        for (k, v) in headers {
            hs.append(*k, *v).unwrap();
        }
        let head = ResponseHead {
            status,
            headers: hs,
        };
        self.c
            .handle_response_head(self.now, SystemTime::now(), stream, head)
            .unwrap();
        self.c
            .handle_response_data(self.now, stream, body.as_bytes())
            .unwrap();
        self.c.handle_response_end(self.now, stream).unwrap();
        self.drain();
    }

    fn reply_json(&mut self, sent: &Sent, status: u16, body: Value) {
        let text = body.to_string();
        self.reply(
            sent.stream,
            status,
            &[("content-type", "application/json")],
            &text,
        );
    }

    /// Answers the `initialize` request `init` with a result and the session `sess-1`.
    fn accept_initialize(&mut self, init: &Sent) {
        self.reply(
            init.stream,
            200,
            &[
                ("content-type", "application/json"),
                ("mcp-session-id", "sess-1"),
            ],
            &initialize_result(&init.body["id"]).to_string(),
        );
    }

    fn line(&mut self, v: Value) {
        self.c.handle_stdio_line(self.now, &v.to_string()).unwrap();
        self.drain();
    }
}

fn result_of(events: &[Event], op: OpId) -> Option<(Value, ResultSource)> {
    events.iter().find_map(|e| match e {
        Event::Result {
            op: o,
            result,
            source,
            ..
        } if *o == op => Some((serde_json::from_str(result).unwrap(), *source)),
        _ => None,
    })
}

fn ended(events: &[Event], op: OpId) -> usize {
    events
        .iter()
        .filter(|e| {
            matches!(e, Event::Result { op: o, .. } | Event::Failed { op: o, .. }
                | Event::Cancelled { op: o } if *o == op)
        })
        .count()
}

/// The 400 a legacy TypeScript server (server-everything) gives a request without a session.
fn not_initialized() -> Value {
    json!({"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: Server not initialized"},"id":null})
}

fn initialize_result(id: &Value) -> Value {
    json!({"jsonrpc":"2.0","id":id,"result":{
        "protocolVersion":"2025-11-25","capabilities":{"tools":{}},
        "serverInfo":{"name":"legacy","version":"1"}}})
}

/// An HTTP client that opens no legacy session GET stream (these findings are about the
/// requests; the stream is covered in mcp_client.rs).
fn http_without_session_stream() -> ClientConfig {
    let mut config = ClientConfig::new(Transport::Http, info());
    config.legacy_listen = false;
    config
}

fn tools_result(id: &Value) -> Value {
    json!({"jsonrpc":"2.0","id":id,"result":{"tools":[]}})
}

// ---------------------------------------------------------------------------------------------
// Findings.

/// `basic/transports/streamable-http.mdx`, "Backward Compatibility" (and issue 3, "Eras"): a
/// server is legacy for every request, not just the first one answered. Two operations sent
/// before the era is known both get the legacy 400; the second must be resent in the legacy
/// session after `initialize`, not fail with the server's "not initialized" error.
#[test]
fn every_modern_request_in_flight_at_fallback_is_resent_in_the_legacy_session() {
    let mut h = H::new(http_without_session_stream());
    let a = h.c.list(h.now, ListKind::Tools, None);
    let b = h.c.list(h.now, ListKind::Prompts, None);
    let sa = h.next_sent();
    let sb = h.next_sent();
    assert_eq!(sa.body["method"], "tools/list");
    assert_eq!(sb.body["method"], "prompts/list");
    h.reply_json(&sa, 400, not_initialized());
    let init = h.next_sent();
    assert_eq!(init.body["method"], "initialize");
    // The second request's 400 arrives while the handshake runs.
    h.reply_json(&sb, 400, not_initialized());
    let ev = h.take_events();
    assert_eq!(ended(&ev, b), 0, "b must not end: {ev:?}");
    assert!(ev.contains(&Event::Retrying {
        op: b,
        reason: RetryReason::LegacyFallback
    }));
    h.accept_initialize(&init);
    let initialized = h.next_sent();
    assert_eq!(initialized.body["method"], "notifications/initialized");
    h.reply(initialized.stream, 202, &[], "");
    let mut resent = vec![h.next_sent(), h.next_sent()];
    resent.sort_by_key(|s| s.body["method"].as_str().unwrap().to_owned());
    assert_eq!(resent[0].body["method"], "prompts/list");
    assert_eq!(resent[1].body["method"], "tools/list");
    for s in &resent {
        assert_eq!(s.headers.get("Mcp-Session-Id"), Some("sess-1"));
        assert!(s.body["params"].get("_meta").is_none());
    }
    for s in &resent {
        let r = json!({"jsonrpc":"2.0","id":s.body["id"],"result":{"tools":[],"prompts":[]}});
        h.reply_json(s, 200, r);
    }
    let ev = h.take_events();
    assert!(result_of(&ev, a).is_some());
    assert!(result_of(&ev, b).is_some());
}

/// `basic/patterns/mrtr.mdx`, "Client Requirements" and `basic/index.mdx` (`-32021`: "declare
/// the required capability and retry"): when the server answers an MRTR *retry* with -32021,
/// the retry is sent again with the capability declared, still carrying the host's
/// `inputResponses` and the server's `requestState` byte-exact; the host is not asked again.
#[test]
fn missing_capability_on_an_mrtr_retry_keeps_input_responses_and_request_state() {
    // The call goes out at once (no tools/list first: not the subject here).
    let mut config = ClientConfig {
        list_tools_before_call: false,
        ..ClientConfig::new(Transport::Http, info())
    }
    .with_capabilities(ClientCapabilities::none().with_elicitation_form());
    config.host_capabilities = ClientCapabilities::none()
        .with_elicitation_form()
        .with_elicitation_url();
    let mut h = H::new(config);
    let op = h.c.call_tool(
        h.now,
        "deploy",
        Map::from_iter([("target".to_owned(), json!("prod"))]),
        OpOptions::default(),
    );
    let first = h.next_sent();
    // requestState with escapes and spacing the client must not normalize.
    let state = r#""st\u00e9p-1  \/x""#;
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":{},"result":{{"resultType":"input_required","inputRequests":{{"k1":{{"method":"elicitation/create","params":{{"mode":"form","message":"Sure?","requestedSchema":{{"type":"object","properties":{{"ok":{{"type":"boolean"}}}},"required":["ok"]}}}}}}}},"requestState":{state}}}}}"#,
        first.body["id"]
    );
    h.reply(
        first.stream,
        200,
        &[("content-type", "application/json")],
        &body,
    );
    h.c.answer_input(
        h.now,
        op,
        "k1",
        InputAnswer::Elicitation(ElicitAnswer::Accept(Map::from_iter([(
            "ok".to_owned(),
            json!(true),
        )]))),
    )
    .unwrap();
    h.take_events();
    let retry = h.next_sent();
    assert!(retry.body["params"].get("inputResponses").is_some());
    let missing = json!({"jsonrpc":"2.0","id":retry.body["id"],"error":{"code":-32021,
        "message":"needs url elicitation","data":{"requiredCapabilities":{"elicitation":{"url":{}}}}}});
    h.reply_json(&retry, 400, missing);
    let ev = h.take_events();
    assert!(
        !ev.iter().any(|e| matches!(e, Event::InputRequested { .. })),
        "the host is not asked again: {ev:?}"
    );
    assert_eq!(ended(&ev, op), 0, "{ev:?}");
    h.drain();
    assert!(!h.sent.is_empty(), "the retry goes out again: {ev:?}");
    let again = h.sent.remove(0);
    assert_ne!(again.body["id"], retry.body["id"]);
    assert_eq!(
        again.body["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"]["elicitation"],
        json!({"form": {}, "url": {}})
    );
    assert_eq!(
        again.body["params"]["inputResponses"],
        retry.body["params"]["inputResponses"]
    );
    assert!(
        again.raw.contains(&format!(r#""requestState":{state}"#)),
        "requestState byte-exact: {}",
        again.raw
    );
}

/// As above, when the second 400 arrives after the legacy session is up: the operation is
/// resent in that session, with no second `initialize` (which would replace the session).
#[test]
fn a_modern_request_rejected_after_the_session_is_up_is_resent_without_a_new_handshake() {
    let mut h = H::new(http_without_session_stream());
    let a = h.c.list(h.now, ListKind::Tools, None);
    let b = h.c.list(h.now, ListKind::Prompts, None);
    let sa = h.next_sent();
    let sb = h.next_sent();
    h.reply_json(&sa, 400, not_initialized());
    let init = h.next_sent();
    h.accept_initialize(&init);
    let initialized = h.next_sent();
    assert_eq!(initialized.body["method"], "notifications/initialized");
    h.reply(initialized.stream, 202, &[], "");
    let ra = h.next_sent();
    assert_eq!(ra.body["method"], "tools/list");
    h.reply_json(&ra, 200, tools_result(&ra.body["id"]));
    assert!(result_of(&h.take_events(), a).is_some());
    // Now b's 400 arrives.
    h.reply_json(&sb, 400, not_initialized());
    let ev = h.take_events();
    assert_eq!(ended(&ev, b), 0, "{ev:?}");
    let rb = h.next_sent();
    assert_eq!(rb.body["method"], "prompts/list", "no new initialize");
    assert_eq!(rb.headers.get("Mcp-Session-Id"), Some("sess-1"));
    h.reply_json(
        &rb,
        200,
        json!({"jsonrpc":"2.0","id":rb.body["id"],"result":{"prompts":[]}}),
    );
    assert!(result_of(&h.take_events(), b).is_some());
    assert!(h.sent.is_empty());
}

/// `basic/patterns/mrtr.mdx` ("requestState ... unchanged") and `basic/index.mdx` (`-32022`):
/// a retry answered with -32022 goes out again under the common version, with a new id and
/// the same `inputResponses` and byte-exact `requestState`. (Checked: holds.)
#[test]
fn an_mrtr_retry_restarted_by_unsupported_version_keeps_request_state_byte_exact() {
    // The call goes out at once (no tools/list first: not the subject here).
    let mut config = ClientConfig {
        list_tools_before_call: false,
        ..ClientConfig::new(Transport::Http, info())
    }
    .with_capabilities(ClientCapabilities::none().with_elicitation_form());
    config.versions = vec!["2026-07-28".into(), "2026-12-01".into()];
    let mut h = H::new(config);
    let op =
        h.c.call_tool(h.now, "deploy", Map::new(), OpOptions::default());
    let first = h.next_sent();
    assert_eq!(
        first.body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
        "2026-12-01"
    );
    let state = r#""v1.\u00e9 \/ z""#;
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":{},"result":{{"resultType":"input_required","inputRequests":{{"k":{{"method":"elicitation/create","params":{{"mode":"form","message":"m","requestedSchema":{{"type":"object","properties":{{}}}}}}}}}},"requestState":{state}}}}}"#,
        first.body["id"]
    );
    h.reply(
        first.stream,
        200,
        &[("content-type", "application/json")],
        &body,
    );
    let ev = h.take_events();
    assert_eq!(ended(&ev, op), 0, "{ev:?}");
    h.c.answer_input(
        h.now,
        op,
        "k",
        InputAnswer::Elicitation(ElicitAnswer::Decline),
    )
    .unwrap();
    let retry = h.next_sent();
    assert!(retry.raw.contains(&format!(r#""requestState":{state}"#)));
    let unsupported = json!({"jsonrpc":"2.0","id":retry.body["id"],"error":{"code":-32022,
        "message":"unsupported","data":{"supported":["2026-07-28"],"requested":"2026-12-01"}}});
    h.reply_json(&retry, 400, unsupported);
    let again = h.next_sent();
    assert_ne!(again.body["id"], retry.body["id"]);
    assert_ne!(again.body["id"], first.body["id"]);
    assert_eq!(
        again.body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
        "2026-07-28"
    );
    assert_eq!(
        again.headers.get("MCP-Protocol-Version"),
        Some("2026-07-28")
    );
    assert_eq!(
        again.body["params"]["inputResponses"],
        json!({"k": {"action": "decline"}})
    );
    assert!(again.raw.contains(&format!(r#""requestState":{state}"#)));
    let done =
        json!({"jsonrpc":"2.0","id":again.body["id"],"result":{"content":[],"isError":true}});
    h.reply_json(&again, 200, done);
    let ev = h.take_events();
    assert_eq!(ended(&ev, op), 1);
}

/// Legacy `basic/utilities/cancellation.mdx`: "Cancellation notifications MUST only reference
/// requests that were previously issued". A read resent after a stdio restart waits for the
/// new `initialize`; cancelling it then must not write `notifications/cancelled` for an id the
/// server never saw (nor anything but `initialize` before the handshake is done).
#[test]
fn cancelling_a_held_resend_does_not_cancel_an_id_never_sent() {
    let mut config = ClientConfig::new(Transport::Stdio, info());
    config.protocol = ProtocolChoice::Legacy;
    let mut h = H::new(config);
    let op = h.c.list(h.now, ListKind::Tools, None);
    let init = h.next_line();
    assert_eq!(init["method"], "initialize");
    h.line(initialize_result(&init["id"]));
    assert_eq!(h.next_line()["method"], "notifications/initialized");
    let list = h.next_line();
    assert_eq!(list["method"], "tools/list");
    // The server process dies and is restarted by the driver.
    h.c.handle_stdio_closed(h.now).unwrap();
    h.c.handle_stdio_open(h.now).unwrap();
    // The tracker resends the read after its backoff.
    for _ in 0..20 {
        h.now += Duration::from_millis(500);
        h.c.handle_timeout(h.now);
    }
    h.drain();
    let written: Vec<Value> = std::mem::take(&mut h.lines);
    assert!(
        written.iter().all(|l| l["method"] == "initialize"),
        "only initialize before the handshake: {written:?}"
    );
    h.c.cancel(h.now, op).unwrap();
    h.drain();
    assert!(
        h.lines.is_empty(),
        "nothing written for a request never sent: {:?}",
        h.lines
    );
    assert!(h.take_events().contains(&Event::Cancelled { op }));
}

/// Issue 3, "Request lifecycle" (each operation ends once; a response after it ended is
/// ignored) and legacy `basic/lifecycle.mdx`: a resend held for the new `initialize` that times
/// out while held ends the operation, writes no cancellation for its unsent id, and is not
/// written after the handshake (the host was already told it failed).
#[test]
fn a_held_resend_that_timed_out_is_never_written_after_the_handshake() {
    let mut config = ClientConfig::new(Transport::Stdio, info());
    config.protocol = ProtocolChoice::Legacy;
    let mut h = H::new(config);
    let options = OpOptions {
        call: Some(CallOptions {
            timeout: Duration::from_secs(5),
            ..CallOptions::default()
        }),
        ..OpOptions::default()
    };
    let op = h.c.start(
        h.now,
        mcpwire_core::mcp::Operation::List {
            kind: ListKind::Tools,
            cursor: None,
        },
        options,
    );
    let init = h.next_line();
    h.line(initialize_result(&init["id"]));
    assert_eq!(h.next_line()["method"], "notifications/initialized");
    assert_eq!(h.next_line()["method"], "tools/list");
    h.c.handle_stdio_closed(h.now).unwrap();
    h.c.handle_stdio_open(h.now).unwrap();
    let init2 = h.next_line();
    assert_eq!(init2["method"], "initialize");
    // The resend is held; the slow initialize outlives its 5 s timeout.
    for _ in 0..20 {
        h.now += Duration::from_secs(1);
        h.c.handle_timeout(h.now);
    }
    h.drain();
    assert!(h.lines.is_empty(), "nothing written: {:?}", h.lines);
    let ev = h.take_events();
    assert_eq!(ended(&ev, op), 1, "{ev:?}");
    h.line(initialize_result(&init2["id"]));
    assert_eq!(h.next_line()["method"], "notifications/initialized");
    assert!(
        h.lines.is_empty(),
        "the ended operation is not sent: {:?}",
        h.lines
    );
}

/// Issue 3, "Request building": ids are never reused, across every path a review exercised
/// (fallback, handshake, MRTR, version retry). Checked here on a long mixed HTTP run.
#[test]
fn ids_stay_unique_across_fallback_and_session_expiry() {
    let mut h = H::new(http_without_session_stream());
    let mut seen = std::collections::BTreeSet::new();
    let _ = h.c.list(h.now, ListKind::Tools, None);
    let s = h.next_sent();
    assert!(seen.insert(s.body["id"].to_string()));
    h.reply_json(&s, 400, not_initialized());
    for round in 0..3 {
        let init = h.next_sent();
        assert_eq!(init.body["method"], "initialize");
        assert!(seen.insert(init.body["id"].to_string()));
        let sid = format!("sess-{round}");
        h.reply(
            init.stream,
            200,
            &[
                ("content-type", "application/json"),
                ("mcp-session-id", &sid),
            ],
            &initialize_result(&init.body["id"]).to_string(),
        );
        let initialized = h.next_sent();
        h.reply(initialized.stream, 202, &[], "");
        let l = h.next_sent();
        assert_eq!(l.headers.get("Mcp-Session-Id"), Some(sid.as_str()));
        assert!(seen.insert(l.body["id"].to_string()));
        // The session expires.
        h.reply(l.stream, 404, &[], "");
    }
}

/// The developers' guide: secrets never reach `Debug` output; `Output`'s own contract is "sizes,
/// not bodies: arguments and results may be private". A tool's result and a server's
/// notification are such bodies: `{:?}` of every output shows neither (nor the arguments).
/// Error messages stay readable: they are meant for logs (as `OpError`'s `Display`).
#[test]
fn output_debug_shows_sizes_not_results_or_arguments() {
    let mut config = ClientConfig::new(Transport::Stdio, info());
    config.protocol = ProtocolChoice::Modern;
    let mut c = Client::new(config);
    let now = Instant::now();
    let args = Map::from_iter([("api_key".to_owned(), json!("sk-ARGUMENT-SECRET"))]);
    let op = c.call_tool(now, "t", args, OpOptions::default());
    let mut debug = String::new();
    let mut id = Value::Null;
    let mut ended_ops = Vec::new();
    let mut drain = |c: &mut Client, id: &mut Value, ended_ops: &mut Vec<OpId>| {
        while let Some(o) = c.poll_output() {
            match &o {
                Output::Stdio(line) => {
                    *id = serde_json::from_str::<Value>(line).unwrap()["id"].clone();
                }
                Output::Event(Event::Result { op, .. } | Event::Failed { op, .. }) => {
                    ended_ops.push(*op);
                }
                _ => {}
            }
            debug.push_str(&format!("{o:?}\n"));
        }
    };
    drain(&mut c, &mut id, &mut ended_ops);
    let note = json!({"jsonrpc":"2.0","method":"notifications/message",
        "params":{"level":"info","data":"log sk-NOTE-SECRET"}});
    c.handle_stdio_line(now, &note.to_string()).unwrap();
    let result = json!({"jsonrpc":"2.0","id":id,"result":{"content":[{"type":"text","text":"sk-RESULT-SECRET"}]}});
    c.handle_stdio_line(now, &result.to_string()).unwrap();
    drain(&mut c, &mut id, &mut ended_ops);
    let op2 = c.call_tool(now, "t", Map::new(), OpOptions::default());
    drain(&mut c, &mut id, &mut ended_ops);
    let error = json!({"jsonrpc":"2.0","id":id,"error":{"code":-32603,"message":"db sk-ERROR-SECRET failed"}});
    c.handle_stdio_line(now, &error.to_string()).unwrap();
    drain(&mut c, &mut id, &mut ended_ops);
    assert_eq!(ended_ops, [op, op2], "{debug}");
    for secret in ["sk-ARGUMENT-SECRET", "sk-NOTE-SECRET", "sk-RESULT-SECRET"] {
        assert!(
            !debug.contains(secret),
            "{secret} in Debug output:\n{debug}"
        );
    }
}

/// `Client::shutdown` ("cancels every operation and subscription") with `basic/transports/
/// stdio.mdx` / `subscriptions` (end a listen with `notifications/cancelled` on stdio, by
/// closing on HTTP): every subscription ends, whether it has a stream (HTTP), none (stdio) or
/// waits to reconnect; after shutdown nothing is ever sent again.
#[test]
fn shutdown_ends_every_subscription_on_both_transports() {
    let filter = SubscriptionFilter {
        tools_list_changed: true,
        ..SubscriptionFilter::default()
    };
    // stdio: the listen request has no stream; shutdown must cancel it on the wire.
    let mut config = ClientConfig::new(Transport::Stdio, info());
    config.protocol = ProtocolChoice::Modern;
    let mut h = H::new(config);
    let sub = h.c.subscribe(h.now, filter.clone()).unwrap();
    let listen = h.next_line();
    assert_eq!(listen["method"], "subscriptions/listen");
    h.c.shutdown(h.now);
    h.drain();
    let cancel = h
        .lines
        .iter()
        .find(|l| l["method"] == "notifications/cancelled");
    assert_eq!(
        cancel.map(|c| c["params"]["requestId"].clone()),
        Some(listen["id"].clone()),
        "stdio listen cancelled: {:?}",
        h.lines
    );
    assert!(h.take_events().iter().any(|e| matches!(e,
        Event::Subscription(SubscriptionEvent::Ended { sub: s, .. }) if *s == sub)));

    // HTTP: a subscription waiting to reconnect (its stream broke) must not reconnect.
    let mut config = ClientConfig::new(Transport::Http, info());
    config.protocol = ProtocolChoice::Modern;
    let mut h = H::new(config);
    let _sub = h.c.subscribe(h.now, filter).unwrap();
    let listen = h.next_sent();
    h.c.handle_transport_failed(h.now, listen.stream).unwrap();
    h.drain();
    h.c.shutdown(h.now);
    h.drain();
    h.sent.clear();
    for _ in 0..120 {
        h.now += Duration::from_secs(1);
        h.c.handle_timeout(h.now);
    }
    h.drain();
    assert!(
        h.sent.is_empty(),
        "a listen after shutdown: {:?}",
        h.sent
            .iter()
            .map(|s| s.body["method"].clone())
            .collect::<Vec<_>>()
    );
    assert_eq!(h.c.poll_timeout(), None, "no timer after shutdown");
}

// ---------------------------------------------------------------------------------------------
// The step-function contract (ARCHITECTURE.md).

/// ARCHITECTURE.md, "The step-function contract": `poll_timeout` is the next deadline labelled with
/// its reason. Each part's deadline comes out under its own reason when it is the earliest: a
/// request's, a subscription's acknowledgment, the legacy session's opening wait and a legacy
/// SSE stream's resume.
#[test]
fn poll_timeout_labels_the_deadline_with_the_part_it_is_for() {
    // A request: its deadline.
    let mut config = ClientConfig::new(Transport::Http, info());
    config.protocol = ProtocolChoice::Modern;
    let mut h = H::new(config.clone());
    h.c.list(h.now, ListKind::Tools, None);
    let t = h.c.poll_timeout().unwrap();
    assert_eq!(t.at, h.now + CallOptions::default().timeout);
    assert!(
        matches!(
            t.reason,
            TimeoutReason::Request(request::TimeoutReason::Deadline { .. })
        ),
        "{t:?}"
    );

    // A subscription: its acknowledgment.
    let mut h = H::new(config);
    let filter = SubscriptionFilter {
        tools_list_changed: true,
        ..SubscriptionFilter::default()
    };
    let sub = h.c.subscribe(h.now, filter).unwrap();
    let t = h.c.poll_timeout().unwrap();
    assert_eq!(
        t.reason,
        TimeoutReason::Subscription(subscription::TimeoutReason::Ack { sub })
    );

    // Legacy HTTP: the session's requests wait (at most SESSION_OPEN_WAIT) for the server to
    // answer `notifications/initialized`.
    let mut config = http_without_session_stream();
    config.protocol = ProtocolChoice::Legacy;
    let mut h = H::new(config);
    h.c.list(h.now, ListKind::Tools, None);
    let init = h.next_sent();
    h.accept_initialize(&init);
    let t = h.c.poll_timeout().unwrap();
    assert_eq!(t.reason, TimeoutReason::SessionOpenWait);
    assert_eq!(t.at, h.now + SESSION_OPEN_WAIT);

    // Legacy HTTP: an SSE stream that ended after an event id, before its response, is
    // resumed after the default retry (1 s), before the request's own deadline.
    let initialized = h.next_sent();
    h.reply(initialized.stream, 202, &[], "");
    let list = h.next_sent();
    assert_eq!(list.body["method"], "tools/list");
    let note = json!({"jsonrpc":"2.0","method":"notifications/message",
        "params":{"level":"info","data":"x"}});
    h.reply(
        list.stream,
        200,
        &[("content-type", "text/event-stream")],
        &format!("id: e1\ndata: {note}\n\n"),
    );
    let t = h.c.poll_timeout().unwrap();
    assert_eq!(t.reason, TimeoutReason::SseResume);
    assert_eq!(t.at, h.now + Duration::from_secs(1));
}

/// The late-input convention (client module docs, "Late inputs"): an HTTP input for a stream
/// this client issued whose exchange ended (answered, or closed by the client) is dropped with
/// `Ok` and nothing comes out; one for a stream it never issued is refused, naming the input.
#[test]
fn a_late_stream_input_is_dropped_and_a_never_issued_one_refused() {
    let mut config = ClientConfig::new(Transport::Http, info());
    config.protocol = ProtocolChoice::Modern;
    let mut h = H::new(config);
    let op = h.c.list(h.now, ListKind::Tools, None);
    let sent = h.next_sent();
    h.reply_json(&sent, 200, tools_result(&sent.body["id"]));
    assert!(result_of(&h.take_events(), op).is_some());
    // A stream closed by the client: the cancelled operation's.
    let cancelled = h.c.list(h.now, ListKind::Prompts, None);
    let closed = h.next_sent();
    h.c.cancel(h.now, cancelled).unwrap();
    h.drain();
    assert!(h.closed.contains(&closed.stream));
    h.drain();
    h.events.clear();
    h.sent.clear();
    h.closed.clear();
    let wall = SystemTime::now();
    let head = || ResponseHead {
        status: 200,
        headers: Headers::new(),
    };
    for stream in [sent.stream, closed.stream] {
        assert_eq!(
            h.c.handle_response_head(h.now, wall, stream, head()),
            Ok(())
        );
        assert_eq!(h.c.handle_response_data(h.now, stream, b"{}"), Ok(()));
        assert_eq!(h.c.handle_response_end(h.now, stream), Ok(()));
        assert_eq!(h.c.handle_transport_failed(h.now, stream), Ok(()));
    }
    assert_eq!(h.c.poll_output(), None, "a late input makes no output");

    let never = StreamId(closed.stream.0 + 1);
    let refused = |input| {
        Err(UsageError::UnknownStream {
            input,
            stream: never,
        })
    };
    assert_eq!(
        h.c.handle_response_head(h.now, wall, never, head()),
        refused("handle_response_head")
    );
    assert_eq!(
        h.c.handle_response_data(h.now, never, b"{}"),
        refused("handle_response_data")
    );
    assert_eq!(
        h.c.handle_response_end(h.now, never),
        refused("handle_response_end")
    );
    assert_eq!(
        h.c.handle_transport_failed(h.now, never),
        refused("handle_transport_failed")
    );
    assert_eq!(
        refused("handle_response_end").unwrap_err().to_string(),
        format!(
            "handle_response_end: stream {} was never issued by this client",
            never.0
        )
    );
    assert_eq!(h.c.poll_output(), None);

    // An input of the other transport is refused, naming it.
    let e = h.c.handle_stdio_line(h.now, "{}").unwrap_err();
    assert_eq!(
        e,
        UsageError::WrongTransport {
            input: "handle_stdio_line"
        }
    );
    assert_eq!(
        e.to_string(),
        "this input does not belong to the configured transport"
    );
    let mut stdio = H::new(ClientConfig::new(Transport::Stdio, info()));
    assert_eq!(
        stdio.c.handle_response_end(stdio.now, sent.stream),
        Err(UsageError::WrongTransport {
            input: "handle_response_end"
        })
    );
    stdio.drain();
    assert!(stdio.sent.is_empty() && stdio.lines.is_empty());
}

/// The late-input convention for the host's calls: cancelling or answering an operation that
/// ended, or ending a subscription that ended, is dropped with `Ok` and nothing comes out; an
/// operation or subscription the client never issued is refused.
#[test]
fn a_late_cancel_answer_or_unsubscribe_is_dropped_and_a_never_issued_handle_refused() {
    let mut config = ClientConfig::new(Transport::Stdio, info());
    config.protocol = ProtocolChoice::Modern;
    let mut h = H::new(config);
    let op = h.c.list(h.now, ListKind::Tools, None);
    let line = h.next_line();
    h.line(tools_result(&line["id"]));
    assert!(result_of(&h.take_events(), op).is_some());
    let filter = SubscriptionFilter {
        tools_list_changed: true,
        ..SubscriptionFilter::default()
    };
    let sub = h.c.subscribe(h.now, filter).unwrap();
    h.c.unsubscribe(h.now, sub).unwrap();
    h.drain();
    h.events.clear();
    h.lines.clear();

    assert_eq!(h.c.cancel(h.now, op), Ok(()));
    let answer = InputAnswer::Elicitation(ElicitAnswer::Decline);
    assert_eq!(h.c.answer_input(h.now, op, "k", answer.clone()), Ok(()));
    assert_eq!(h.c.unsubscribe(h.now, sub), Ok(()));
    assert_eq!(h.c.poll_output(), None, "a late call makes no output");

    let never = OpId(op.0 + 100);
    assert_eq!(h.c.cancel(h.now, never), Err(UsageError::UnknownOp));
    assert_eq!(
        h.c.answer_input(h.now, never, "k", answer),
        Err(UsageError::UnknownOp)
    );
    assert_eq!(
        h.c.unsubscribe(h.now, SubscriptionHandle(sub.0 + 100)),
        Err(UsageError::Subscription(
            subscription::UsageError::UnknownHandle
        ))
    );
    assert_eq!(h.c.poll_output(), None);
}

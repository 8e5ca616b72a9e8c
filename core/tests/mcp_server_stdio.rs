//! The server core over newline-delimited stdio: one message per line, answers in any order,
//! `notifications/cancelled`, the line bound, both eras on one connection, legacy MRTR, listen
//! streams tagged by subscription id, and the end of input.

mod server_support;

use mcpwire_core::mcp::server::{CancelReason, Eras, Limits, Reply, RequestId, ServerEvent};
use mcpwire_core::mcp::ListKind;
use serde_json::{json, Value};
use server_support::*;

fn modern_line(id: Value, method: &str, params: Value) -> Value {
    body(id, method, with_meta(params))
}

#[test]
fn each_line_is_a_message_and_each_answer_one_line() {
    let mut h = Harness::new();
    let lines = h.stdio_json(&modern_line(
        json!(1),
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "hi"}}),
    ));
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["id"], 1);
    assert_eq!(lines[0]["result"]["content"][0]["text"], "hi");
    assert_eq!(lines[0]["result"]["resultType"], "complete");
    // A message split across reads, blank lines and CRLF.
    let text = format!(
        "\n\r\n{}\r\n",
        modern_line(json!(2), "server/discover", json!({}))
    );
    let (a, b) = text.split_at(10);
    assert!(h.stdio(a.as_bytes()).is_empty());
    let lines = h.stdio(b.as_bytes());
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["id"], 2);
}

#[test]
fn bad_lines_get_parse_and_request_errors_and_the_next_line_is_served() {
    let mut h = Harness::new();
    let lines =
        h.stdio(b"{nope\n\xff\xfe\n{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"x\"}\n[1]\n");
    let codes: Vec<i64> = lines.iter().map(code).collect();
    assert_eq!(codes, [-32700, -32700, -32600, -32600], "{lines:?}");
    assert!(lines.iter().all(|l| l["id"].is_null()));
    let lines = h.stdio_json(&modern_line(json!(3), "server/discover", json!({})));
    assert_eq!(lines[0]["id"], 3);
}

#[test]
fn a_line_over_the_bound_is_skipped_with_32700() {
    let mut c = config();
    c.limits = Limits {
        max_line_bytes: 64,
        ..Limits::default()
    };
    let mut h = Harness::with(c);
    let mut long = vec![b'x'; 100];
    long.push(b'\n');
    let lines = h.stdio(&long[..40]);
    assert!(lines.is_empty());
    let lines = h.stdio(&long[40..]);
    assert_eq!(lines.len(), 1);
    assert_eq!(code(&lines[0]), -32700);
    assert!(lines[0]["error"]["message"]
        .as_str()
        .is_some_and(|m| m.contains("64")));
    let ping = format!("{}\n", json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}));
    assert!(ping.len() < 64);
    assert_eq!(h.stdio(ping.as_bytes())[0]["result"], json!({}));
}

#[test]
fn answers_go_in_any_order_and_cancelled_requests_get_none() {
    let mut h = Harness::new();
    for id in [1, 2, 3] {
        assert!(h
            .stdio_json(&modern_line(
                json!(id),
                "tools/call",
                json!({"name": "slow", "arguments": {}})
            ))
            .is_empty());
    }
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2, "reason": "bored"}});
    assert!(h.stdio_json(&cancel).is_empty());
    assert_eq!(h.app.cancelled, [RequestId::from_raw(1)]);
    assert_eq!(
        h.server
            .respond(h.now, RequestId::from_raw(2), Reply::tool_text("three")),
        Ok(())
    );
    assert_eq!(
        h.server
            .respond(h.now, RequestId::from_raw(1), Reply::tool_text("late")),
        Ok(()),
        "dropped"
    );
    assert_eq!(
        h.server
            .respond(h.now, RequestId::from_raw(0), Reply::tool_text("one")),
        Ok(())
    );
    let lines = drain(&mut h.server).1;
    let ids: Vec<Value> = lines.iter().map(|l| l["id"].clone()).collect();
    assert_eq!(ids, [json!(3), json!(1)]);
}

#[test]
fn duplicate_ids_and_too_many_requests_are_refused_never_lost() {
    let mut c = config();
    c.limits.max_in_flight_per_connection = 2;
    let mut h = Harness::with(c);
    let slow = |id: i64| {
        modern_line(
            json!(id),
            "tools/call",
            json!({"name": "slow", "arguments": {}}),
        )
    };
    assert!(h.stdio_json(&slow(1)).is_empty());
    let dup = h.stdio_json(&slow(1));
    assert_eq!(code(&dup[0]), -32600);
    assert!(h.stdio_json(&slow(2)).is_empty());
    let over = h.stdio_json(&slow(3));
    assert_eq!((code(&over[0]), over[0]["id"].clone()), (-32000, json!(3)));
    assert_eq!(h.server.in_flight(), 2);
}

#[test]
fn initialize_opens_the_stdio_session_and_legacy_mrtr_asks_on_stdout() {
    let mut h = Harness::new();
    let lines = h.stdio_json(&body(
        json!(0),
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}}}),
    ));
    assert_eq!(lines[0]["result"]["protocolVersion"], "2025-11-25");
    assert!(h
        .stdio_json(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .is_empty());
    let asks = h.stdio_json(&body(
        json!(1),
        "tools/call",
        json!({"name": "ask", "arguments": {}}),
    ));
    assert_eq!(asks.len(), 1);
    assert_eq!(asks[0]["method"], "elicitation/create");
    let done = h.stdio_json(&json!({"jsonrpc": "2.0", "id": asks[0]["id"], "result": {"action": "accept", "content": {"name": "Di"}}}));
    assert_eq!(done[0]["id"], 1);
    assert_eq!(
        done[0]["result"]["content"][0]["text"],
        "hello Di state=round-1"
    );
    // A modern request on the same connection is served statelessly.
    let m = h.stdio_json(&modern_line(json!(2), "tools/list", json!({})));
    assert_eq!(m[0]["result"]["resultType"], "complete");
    // List changes reach the session as lines.
    h.server.list_changed(h.now, ListKind::Tools);
    let lines = drain(&mut h.server).1;
    assert_eq!(
        lines,
        [json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {}})]
    );
}

#[test]
fn listen_over_stdio_tags_notifications_and_ends_on_cancel() {
    let mut h = Harness::new();
    let ack = h.stdio_json(&modern_line(
        json!(9),
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true}}),
    ));
    assert_eq!(ack[0]["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(
        ack[0]["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        9
    );
    h.server.list_changed(h.now, ListKind::Tools);
    let n = drain(&mut h.server).1;
    assert_eq!(
        n[0]["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        9
    );
    let _ = h.stdio_json(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 9}}),
    );
    h.server.list_changed(h.now, ListKind::Tools);
    assert!(drain(&mut h.server).1.is_empty());
}

#[test]
fn end_of_input_serves_the_last_line_then_cancels_the_rest() {
    let mut h = Harness::new();
    let _ = h.stdio_json(&body(
        json!(0),
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}}),
    ));
    let _ = h.stdio_json(&body(
        json!(1),
        "tools/call",
        json!({"name": "slow", "arguments": {}}),
    ));
    h.server.handle_stdio_bytes(
        h.now,
        json!({"jsonrpc": "2.0", "id": 2, "method": "ping"})
            .to_string()
            .as_bytes(),
    );
    h.server.handle_stdio_eof(h.now);
    let lines = drain(&mut h.server).1;
    assert_eq!(lines, [json!({"jsonrpc": "2.0", "id": 2, "result": {}})]);
    let mut events = Vec::new();
    while let Some(e) = h.server.poll_event() {
        events.push(e);
    }
    assert!(events.iter().any(|e| matches!(
        e,
        ServerEvent::Cancelled {
            reason: CancelReason::StdioEnded,
            ..
        }
    )));
    assert!(events
        .iter()
        .any(|e| matches!(e, ServerEvent::SessionClosed { .. })));
    assert_eq!(h.server.in_flight(), 0);
    assert_eq!(h.server.open_sessions(), 0);
}

#[test]
fn a_legacy_only_server_refuses_modern_and_a_modern_only_one_initialize() {
    let mut c = config();
    c.eras = Eras::LEGACY;
    let mut h = Harness::with(c);
    let a = h.stdio_json(&modern_line(json!(1), "tools/list", json!({})));
    assert_eq!(
        code(&a[0]),
        -32600,
        "not initialized, as a legacy server says: {a:?}"
    );
    let a = h.stdio_json(&modern_line(json!(2), "server/discover", json!({})));
    assert_eq!(code(&a[0]), -32601);
    let mut c = config();
    c.eras = Eras::MODERN;
    let mut h = Harness::with(c);
    let a = h.stdio_json(&body(
        json!(1),
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}}),
    ));
    assert_eq!(code(&a[0]), -32022);
    assert_eq!(a[0]["error"]["data"]["supported"], json!(["2026-07-28"]));
}

/// `subscriptions.mdx`, "Acknowledgment", on stdio: the ack names only the resource URIs the
/// application honours, comes before anything for the subscription, and only those URIs get
/// `notifications/resources/updated`.
#[test]
fn a_stdio_listen_acknowledges_only_the_uris_the_application_accepts() {
    let mut h = Harness::new();
    h.app.refused_uris = vec!["test://secret".into()];
    let lines = h.stdio_json(&modern_line(
        json!(4),
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true, "resourceSubscriptions": ["test://secret", "test://greeting"]}}),
    ));
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(
        lines[0]["method"],
        "notifications/subscriptions/acknowledged"
    );
    assert_eq!(
        lines[0]["params"],
        json!({"_meta": {"io.modelcontextprotocol/subscriptionId": 4},
               "notifications": {"toolsListChanged": true, "resourceSubscriptions": ["test://greeting"]}})
    );
    assert_eq!(h.server.resource_updated(h.now, "test://secret"), 0);
    assert_eq!(h.server.resource_updated(h.now, "test://greeting"), 1);
    let lines = drain(&mut h.server).1;
    assert_eq!(
        lines,
        [
            json!({"jsonrpc": "2.0", "method": "notifications/resources/updated",
                "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": 4}, "uri": "test://greeting"}})
        ]
    );
}

/// The event API on stdio: nothing for the listen before the application answers (other
/// subscriptions go on meanwhile), then the ack first; a cancel before the answer tells the
/// application and holds nothing; an error answer is the listen's error line.
#[test]
fn a_stdio_listen_waits_for_the_application_and_a_cancel_or_error_ends_it() {
    let mut h = Harness::new();
    let uris = json!({"notifications": {"toolsListChanged": true, "resourceSubscriptions": ["test://greeting"]}});
    let line = |v: Value| {
        let mut l = v.to_string().into_bytes();
        l.push(b'\n');
        l
    };
    h.server.handle_stdio_bytes(
        h.now,
        &line(modern_line(json!(7), "subscriptions/listen", uris.clone())),
    );
    assert!(
        drain(&mut h.server).1.is_empty(),
        "no ack before the answer"
    );
    let Some(ServerEvent::Request(i)) = h.server.poll_event() else {
        panic!("the listen reaches the application")
    };
    assert_eq!(
        i.call,
        mcpwire_core::mcp::server::Call::Listen {
            uris: vec!["test://greeting".into()]
        }
    );
    // Another subscription, without URIs, is acknowledged at once and is told meanwhile.
    let lines = h.stdio_json(&modern_line(
        json!(8),
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true}}),
    ));
    assert_eq!(
        lines[0]["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        8
    );
    assert_eq!(
        h.server.list_changed(h.now, ListKind::Tools),
        1,
        "only 8 is open"
    );
    let told = drain(&mut h.server).1;
    assert!(told
        .iter()
        .all(|l| l["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == 8));
    assert_eq!(
        h.server.respond(
            h.now,
            i.id(),
            Reply::resource_subscriptions(["test://greeting"])
        ),
        Ok(())
    );
    h.server.list_changed(h.now, ListKind::Tools);
    let lines = drain(&mut h.server).1;
    let for_7: Vec<&Value> = lines
        .iter()
        .filter(|l| l["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == 7)
        .collect();
    assert_eq!(for_7.len(), 2, "{lines:?}");
    assert_eq!(
        for_7[0]["method"],
        "notifications/subscriptions/acknowledged"
    );
    assert_eq!(for_7[1]["method"], "notifications/tools/list_changed");

    // Cancelled before the answer.
    h.server.handle_stdio_bytes(
        h.now,
        &line(modern_line(json!(9), "subscriptions/listen", uris.clone())),
    );
    let Some(ServerEvent::Request(i)) = h.server.poll_event() else {
        panic!("no listen event")
    };
    assert_eq!(h.server.in_flight(), 1);
    h.server.handle_stdio_bytes(
        h.now,
        &line(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 9}})),
    );
    assert!(matches!(
        h.server.poll_event(),
        Some(ServerEvent::Cancelled { request, reason: CancelReason::Client(_) }) if request == i.id()
    ));
    assert_eq!(h.server.in_flight(), 0);
    assert_eq!(
        h.server.respond(
            h.now,
            i.id(),
            Reply::resource_subscriptions(["test://greeting"])
        ),
        Ok(())
    );
    assert!(
        drain(&mut h.server).1.is_empty(),
        "a late answer goes nowhere"
    );
    assert_eq!(
        h.server.resource_updated(h.now, "test://greeting"),
        1,
        "7 only"
    );
    let _ = drain(&mut h.server);

    // An error answer through the trait.
    h.app.listen_error = Some(mcpwire_core::jsonrpc::ErrorObject {
        code: -32602,
        message: "Invalid params: not for you".into(),
        data: None,
    });
    let lines = h.stdio_json(&modern_line(json!(10), "subscriptions/listen", uris));
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["id"], 10);
    assert_eq!(code(&lines[0]), -32602);
    assert_eq!(h.server.in_flight(), 0);
}

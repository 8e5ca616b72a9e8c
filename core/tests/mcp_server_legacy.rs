//! The server core in the `2025-11-25` era over Streamable HTTP: `initialize` and version
//! negotiation, sessions (`Mcp-Session-Id`, `404` after `DELETE`), `ping`, `logging/setLevel`,
//! the GET stream, legacy MRTR as server-to-client requests on the POST's stream, SSE priming
//! and `Last-Event-ID` replay (SEP-1699), resource subscriptions, cancellation, timeouts.

mod server_support;

use mcpwire_core::mcp::server::{CancelReason, HttpMethod, ServerEvent};
use mcpwire_core::mcp::{ListKind, LoggingLevel};
use mcpwire_core::time::Duration;
use serde_json::{json, Value};
use server_support::*;

fn init(h: &mut Harness, version: &str) -> Answer {
    h.post(
        &body(json!(1), "initialize", json!({"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}})),
        base_headers(),
    )
}

#[test]
fn initialize_negotiates_the_version_and_opens_a_session() {
    let mut h = Harness::new();
    let a = init(&mut h, "2025-06-18");
    let r = &a.json()["result"];
    assert_eq!(
        r["protocolVersion"], "2025-06-18",
        "a version the server speaks is kept"
    );
    assert_eq!(r["serverInfo"]["name"], "fixture");
    assert_eq!(r["capabilities"]["logging"], json!({}));
    assert_eq!(r["capabilities"]["completions"], json!({}));
    assert!(
        r.get("resultType").is_none(),
        "legacy results carry no resultType"
    );
    let sid = a.header("Mcp-Session-Id").unwrap_or_default().to_owned();
    assert!(
        sid.len() >= 16 && sid.bytes().all(|b| (0x21..=0x7e).contains(&b)),
        "{sid}"
    );
    let b = init(&mut h, "1999-01-01");
    assert_eq!(
        b.json()["result"]["protocolVersion"],
        "2025-11-25",
        "else the newest"
    );
    assert_ne!(
        b.header("Mcp-Session-Id"),
        Some(sid.as_str()),
        "each initialize a new session"
    );
    assert_eq!(h.server.open_sessions(), 2);
    assert!(matches!(
        h.server.poll_event(),
        None | Some(ServerEvent::SessionOpened { .. })
    ));
    let bad = h.post(
        &body(json!(2), "initialize", json!({"capabilities": {}})),
        base_headers(),
    );
    assert_eq!(code(&bad.json()), -32602);
}

#[test]
fn sessions_are_required_known_and_speak_a_known_version() {
    let mut h = Harness::new();
    let sid = h.initialize(json!({}));
    let a = h.post(&body(json!(1), "tools/list", json!({})), base_headers());
    assert_eq!(a.status, Some(400), "no session, no _meta");
    let a = h.legacy("mcp-unknown", body(json!(1), "tools/list", json!({})));
    assert_eq!(a.status, Some(404));
    let mut hd = base_headers();
    let _ = hd.append("Mcp-Session-Id", sid.as_str());
    let _ = hd.append("MCP-Protocol-Version", "1999-01-01");
    assert_eq!(
        h.post(&body(json!(1), "tools/list", json!({})), hd).status,
        Some(400)
    );
    let a = h.legacy(&sid, body(json!(2), "tools/list", json!({})));
    assert_eq!(a.status, Some(200));
    assert_eq!(a.json()["result"]["tools"][0]["name"], "echo");
    assert!(a.json()["result"].get("ttlMs").is_none());
    let p = h.legacy(&sid, body(json!(3), "ping", json!({})));
    assert_eq!(p.json(), json!({"jsonrpc": "2.0", "id": 3, "result": {}}));
    let u = h.legacy(&sid, body(json!(4), "no/such", json!({})));
    assert_eq!(
        (u.status, code(&u.json())),
        (Some(200), -32601),
        "legacy errors are 200"
    );
    let d = h.legacy(&sid, body(json!(5), "server/discover", json!({})));
    assert_eq!(code(&d.json()), -32601);
}

#[test]
fn delete_ends_the_session_and_later_requests_get_404() {
    let mut h = Harness::new();
    let sid = h.initialize(json!({}));
    let mut hd = base_headers();
    let _ = hd.append("Mcp-Session-Id", sid.as_str());
    let a = h.http(request(HttpMethod::Delete, hd.clone(), b"")).1;
    assert_eq!(a.status, Some(204));
    assert_eq!(
        h.app.closed_sessions,
        std::slice::from_ref(&sid),
        "the application heard of it"
    );
    assert_eq!(
        h.legacy(&sid, body(json!(1), "ping", json!({}))).status,
        Some(404)
    );
    assert_eq!(
        h.http(request(HttpMethod::Delete, hd, b"")).1.status,
        Some(404)
    );
    assert_eq!(
        h.http(request(HttpMethod::Delete, base_headers(), b""))
            .1
            .status,
        Some(400)
    );
}

#[test]
fn set_level_filters_log_messages_of_the_session() {
    let mut h = Harness::new();
    let sid = h.initialize(json!({}));
    let a = h.legacy(
        &sid,
        body(
            json!(1),
            "tools/call",
            json!({"name": "log", "arguments": {}}),
        ),
    );
    let logs = |a: &Answer| {
        a.messages()
            .into_iter()
            .filter(|m| m["method"] == "notifications/message")
            .count()
    };
    assert_eq!(logs(&a), 3, "no level set: every message");
    let s = h.legacy(
        &sid,
        body(json!(2), "logging/setLevel", json!({"level": "error"})),
    );
    assert_eq!(s.json()["result"], json!({}));
    let a = h.legacy(
        &sid,
        body(
            json!(3),
            "tools/call",
            json!({"name": "log", "arguments": {}}),
        ),
    );
    assert_eq!(logs(&a), 1);
    let bad = h.legacy(
        &sid,
        body(json!(4), "logging/setLevel", json!({"level": "loud"})),
    );
    assert_eq!(code(&bad.json()), -32602);
    // Session-wide logs go to the GET stream.
    let mut g = base_headers();
    let _ = g.append("Mcp-Session-Id", sid.as_str());
    let (gx, ga, _) = h.http(request(HttpMethod::Get, g, b""));
    assert!(ga.streamed);
    assert_eq!(
        h.server
            .log(h.now, None, LoggingLevel::Info, None, json!("quiet")),
        Ok(())
    );
    assert_eq!(
        h.server.log(
            h.now,
            None,
            LoggingLevel::Critical,
            Some("core"),
            json!("loud")
        ),
        Ok(())
    );
    let (out, _) = drain(&mut h.server);
    let on_get: Vec<Value> = out
        .iter()
        .filter(|(x, _)| *x == gx)
        .flat_map(|(_, a)| {
            Answer {
                streamed: true,
                ..a.clone()
            }
            .messages()
        })
        .collect();
    assert_eq!(on_get.len(), 1);
    assert_eq!(on_get[0]["params"]["data"], "loud");
}

#[test]
fn the_get_stream_primes_carries_list_changes_and_is_one_per_session() {
    let mut h = Harness::new();
    let sid = h.initialize(json!({}));
    let mut g = base_headers();
    let _ = g.append("Mcp-Session-Id", sid.as_str());
    let (gx, a, _) = h.http(request(HttpMethod::Get, g.clone(), b""));
    assert_eq!(a.status, Some(200));
    assert_eq!(a.header("Content-Type"), Some("text/event-stream"));
    let prime = String::from_utf8_lossy(&a.events[0]).into_owned();
    assert!(
        prime.starts_with("id: ") && prime.contains("retry: 1000") && prime.contains("data: \n"),
        "{prime:?}"
    );
    assert_eq!(
        h.http(request(HttpMethod::Get, g.clone(), b"")).1.status,
        Some(409)
    );
    h.server.list_changed(h.now, ListKind::Tools);
    let (out, _) = drain(&mut h.server);
    let msgs = Answer {
        streamed: true,
        ..out[0].1.clone()
    }
    .messages();
    assert_eq!(
        (out[0].0, msgs[0]["method"].clone()),
        (gx, json!("notifications/tools/list_changed"))
    );
    // Without text/event-stream in Accept: 406. Unknown session: 404.
    let mut nope = g.clone();
    let _ = nope.set("Accept", "application/json");
    assert_eq!(
        h.http(request(HttpMethod::Get, nope, b"")).1.status,
        Some(406)
    );
    let mut other = base_headers();
    let _ = other.append("Mcp-Session-Id", "mcp-nope");
    assert_eq!(
        h.http(request(HttpMethod::Get, other, b"")).1.status,
        Some(404)
    );
    // After the client closes it, changes wait for the next GET.
    assert_eq!(h.server.handle_exchange_closed(h.now, gx), Ok(()));
    h.server.list_changed(h.now, ListKind::Prompts);
    assert!(drain(&mut h.server).0.is_empty());
    let a = h.http(request(HttpMethod::Get, g, b"")).1;
    assert_eq!(
        a.messages()[0]["method"],
        "notifications/prompts/list_changed"
    );
}

#[test]
fn mrtr_becomes_server_requests_on_the_post_stream_then_the_result() {
    let mut h = Harness::new();
    let sid = h.initialize(json!({"elicitation": {}, "sampling": {}, "roots": {}}));
    let (x, a, _) = {
        let mut hd = base_headers();
        let _ = hd.append("Mcp-Session-Id", sid.as_str());
        let m = body(
            json!(7),
            "tools/call",
            json!({"name": "multi", "arguments": {}}),
        );
        h.http(request(HttpMethod::Post, hd, m.to_string().as_bytes()))
    };
    assert!(a.streamed && !a.ended);
    let asks = a.messages();
    let methods: Vec<&str> = asks.iter().filter_map(|m| m["method"].as_str()).collect();
    assert_eq!(
        methods,
        ["elicitation/create", "sampling/createMessage", "roots/list"]
    );
    assert!(a.event_ids().len() >= 4, "priming and one id per event");
    let answers = [
        json!({"action": "accept", "content": {}}),
        json!({"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"}),
        json!({"roots": []}),
    ];
    for (ask, answer) in asks.iter().zip(answers) {
        let r = h.legacy(
            &sid,
            json!({"jsonrpc": "2.0", "id": ask["id"], "result": answer}),
        );
        assert_eq!(r.status, Some(202));
    }
    let (out, _) = drain(&mut h.server);
    assert!(out.is_empty(), "answers served by the Harness already");
    // The third answer re-ran the tool: its result went on the POST's stream.
    let last = h.app.calls.last().cloned().unwrap_or_default();
    assert_eq!(last.2.as_ref().map(|r| r.len()), Some(3), "{last:?}");
    let _ = x;
}

#[test]
fn legacy_mrtr_result_reaches_the_waiting_stream() {
    let mut h = Harness::new();
    let sid = h.initialize(json!({"elicitation": {}}));
    let mut hd = base_headers();
    let _ = hd.append("Mcp-Session-Id", sid.as_str());
    let m = body(
        json!(8),
        "tools/call",
        json!({"name": "ask", "arguments": {}}),
    );
    let x = h.server.handle_http_request(
        h.now,
        request(HttpMethod::Post, hd.clone(), m.to_string().as_bytes()),
    );
    h.server.serve_with(&mut h.app, h.now);
    let (out, _) = drain(&mut h.server);
    let ask = Answer {
        streamed: true,
        ..out[0].1.clone()
    }
    .json();
    assert_eq!(ask["method"], "elicitation/create");
    assert_eq!(
        ask["params"]["requestedSchema"]["required"],
        json!(["name"])
    );
    let reply = json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"name": "Cy"}}});
    let y = h.server.handle_http_request(
        h.now,
        request(HttpMethod::Post, hd, reply.to_string().as_bytes()),
    );
    h.server.serve_with(&mut h.app, h.now);
    let (out, _) = drain(&mut h.server);
    let on = |k| {
        out.iter()
            .find(|(e, _)| *e == k)
            .map(|(_, a)| a.clone())
            .unwrap_or_default()
    };
    assert_eq!(on(y).status, Some(202));
    let fin = Answer {
        streamed: true,
        ..on(x)
    };
    assert_eq!(fin.json()["id"], 8);
    assert_eq!(
        fin.json()["result"]["content"][0]["text"],
        "hello Cy state=round-1",
        "the state kept in memory"
    );
    assert!(fin.ended);
}

#[test]
fn legacy_inputs_need_the_session_capability_and_an_answer_in_time() {
    let mut h = Harness::new();
    let sid = h.initialize(json!({}));
    let a = h.legacy(
        &sid,
        body(
            json!(1),
            "tools/call",
            json!({"name": "ask", "arguments": {}}),
        ),
    );
    assert_eq!(code(&a.json()), -32021, "never a hang: {}", a.json());
    let sid = h.initialize(json!({"elicitation": {}}));
    let a = h.legacy(
        &sid,
        body(
            json!(2),
            "tools/call",
            json!({"name": "ask", "arguments": {}}),
        ),
    );
    assert_eq!(a.json()["method"], "elicitation/create");
    let t = h
        .server
        .poll_timeout()
        .unwrap_or_else(|| panic!("a deadline for the answer"));
    h.now = t.at;
    h.server.handle_timeout(h.now);
    let (out, _) = drain(&mut h.server);
    let fin = Answer {
        streamed: true,
        ..out[0].1.clone()
    };
    assert_eq!(code(&fin.json()), -32603);
    assert!(fin.ended);
    let mut saw = false;
    while let Some(e) = h.server.poll_event() {
        saw |= matches!(
            e,
            ServerEvent::Cancelled {
                reason: CancelReason::InputTimedOut,
                ..
            }
        );
    }
    assert!(saw);
}

#[test]
fn a_closed_stream_resumes_with_last_event_id_and_replays_the_rest() {
    let mut h = Harness::new();
    let sid = h.initialize(json!({}));
    let a = h.legacy(
        &sid,
        body(
            json!(1),
            "tools/call",
            json!({"name": "reconnect", "arguments": {}}),
        ),
    );
    assert!(a.streamed && a.ended, "closed mid-call");
    assert!(
        a.messages().is_empty(),
        "the result was not on the closed connection"
    );
    let last = a.event_ids().last().cloned().unwrap_or_default();
    assert!(!last.is_empty());
    let mut g = base_headers();
    let _ = g.append("Mcp-Session-Id", sid.as_str());
    let _ = g.append("Last-Event-ID", last.as_str());
    let r = h.http(request(HttpMethod::Get, g.clone(), b"")).1;
    assert!(r.streamed && r.ended);
    assert_eq!(r.json()["id"], 1);
    assert_eq!(r.json()["result"]["content"][0]["text"], "after reconnect");
    // Replayed once: the stream is gone after it was delivered.
    let again = h.http(request(HttpMethod::Get, g, b"")).1;
    assert!(again
        .messages()
        .iter()
        .all(|m| m.get("id") != Some(&json!(1))));
}

#[test]
fn resource_updates_go_to_subscribed_sessions_only() {
    let mut h = Harness::new();
    let a = h.initialize(json!({}));
    let b = h.initialize(json!({}));
    let s = h.legacy(
        &a,
        body(
            json!(1),
            "resources/subscribe",
            json!({"uri": "test://greeting"}),
        ),
    );
    assert_eq!(s.json()["result"], json!({}));
    let mut streams = Vec::new();
    for sid in [&a, &b] {
        let mut g = base_headers();
        let _ = g.append("Mcp-Session-Id", sid.as_str());
        streams.push(h.http(request(HttpMethod::Get, g, b"")).0);
    }
    h.server.resource_updated(h.now, "test://greeting");
    let (out, _) = drain(&mut h.server);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].0, streams[0]);
    let n = Answer {
        streamed: true,
        ..out[0].1.clone()
    }
    .json();
    assert_eq!(
        n,
        json!({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "test://greeting"}})
    );
    let u = h.legacy(
        &a,
        body(
            json!(2),
            "resources/unsubscribe",
            json!({"uri": "test://greeting"}),
        ),
    );
    assert_eq!(u.json()["result"], json!({}));
    h.server.resource_updated(h.now, "test://greeting");
    assert!(drain(&mut h.server).0.is_empty());
    let r = h.legacy(
        &a,
        body(json!(3), "resources/read", json!({"uri": "test://nope"})),
    );
    assert_eq!(
        code(&r.json()),
        -32002,
        "the legacy code for a missing resource"
    );
}

#[test]
fn cancelled_notifications_stop_a_request_without_an_answer() {
    let mut h = Harness::new();
    let sid = h.initialize(json!({}));
    let mut hd = base_headers();
    let _ = hd.append("Mcp-Session-Id", sid.as_str());
    let m = body(
        json!(5),
        "tools/call",
        json!({"name": "slow", "arguments": {}}),
    );
    let (x, a, _) = h.http(request(HttpMethod::Post, hd, m.to_string().as_bytes()));
    assert!(a.status.is_none());
    let c = h.legacy(&sid, json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5, "reason": "user"}}));
    assert_eq!(c.status, Some(202));
    assert_eq!(h.app.cancelled.len(), 1);
    assert_eq!(h.server.in_flight(), 0);
    let _ = x;
    // A duplicate id while one is in flight is refused, the first still answered.
    let m = body(
        json!(6),
        "tools/call",
        json!({"name": "slow", "arguments": {}}),
    );
    let _ = h.legacy(&sid, m.clone());
    let dup = h.legacy(&sid, m);
    assert_eq!(code(&dup.json()), -32600);
    assert_eq!(h.server.in_flight(), 1);
}

#[test]
fn idle_sessions_close_when_configured() {
    let mut c = config();
    c.timeouts.session_idle = Some(Duration::from_secs(60));
    let mut h = Harness::with(c);
    let sid = h.initialize(json!({}));
    let t = h
        .server
        .poll_timeout()
        .unwrap_or_else(|| panic!("an idle deadline"));
    assert!(t.at >= h.now + Duration::from_secs(59));
    h.now = t.at;
    h.server.handle_timeout(h.now);
    assert_eq!(h.server.open_sessions(), 0);
    assert_eq!(
        h.legacy(&sid, body(json!(1), "ping", json!({}))).status,
        Some(404)
    );
}

#[test]
fn a_legacy_only_server_answers_modern_requests_as_a_legacy_server_would() {
    let mut c = config();
    c.eras = mcpwire_core::mcp::server::Eras::LEGACY;
    let mut h = Harness::with(c);
    let a = h.modern(json!(1), "server/discover", json!({}), &[]);
    assert_eq!(
        (a.status, code(&a.json())),
        (Some(400), -32000),
        "no session: {}",
        a.json()
    );
    let sid = h.initialize(json!({}));
    let mut hd = base_headers();
    let _ = hd.append("Mcp-Session-Id", sid.as_str());
    let d = h.post(&body(json!(2), "server/discover", with_meta(json!({}))), hd);
    assert_eq!((d.status, code(&d.json())), (Some(200), -32601));
    assert_eq!(
        h.http(request(HttpMethod::Get, base_headers(), b""))
            .1
            .status,
        Some(400),
        "GET without a session"
    );
}

#[test]
fn long_lived_streams_get_keep_alive_comments_while_open() {
    let mut h = Harness::new();
    let sid = h.initialize(json!({}));
    assert!(
        h.server.poll_timeout().is_none(),
        "no stream, no keep-alive"
    );
    let mut g = base_headers();
    let _ = g.append("Mcp-Session-Id", sid.as_str());
    let (gx, _, _) = h.http(request(HttpMethod::Get, g, b""));
    let listen = body(
        json!(7),
        "subscriptions/listen",
        with_meta(json!({"notifications": {"toolsListChanged": true}})),
    );
    let (lx, _, _) = h.http(request(
        HttpMethod::Post,
        modern_headers(&listen),
        listen.to_string().as_bytes(),
    ));
    let t = h
        .server
        .poll_timeout()
        .unwrap_or_else(|| panic!("a keep-alive deadline"));
    assert_eq!(t.at, h.now + Duration::from_secs(15));
    h.now = t.at;
    h.server.handle_timeout(h.now);
    let (out, _) = drain(&mut h.server);
    let got: Vec<_> = out.iter().map(|(x, a)| (*x, a.events.clone())).collect();
    assert_eq!(
        got,
        [(gx, vec![b":\n\n".to_vec()]), (lx, vec![b":\n\n".to_vec()])]
    );
    assert_eq!(h.server.handle_exchange_closed(h.now, gx), Ok(()));
    assert_eq!(h.server.handle_exchange_closed(h.now, lx), Ok(()));
    h.now += Duration::from_secs(15);
    h.server.handle_timeout(h.now);
    assert!(drain(&mut h.server).0.is_empty());
    assert!(
        h.server.poll_timeout().is_none(),
        "nothing open: the keep-alive stops"
    );
}

#[test]
fn sessions_older_than_2025_11_25_get_no_priming_event() {
    let mut h = Harness::new();
    let a = init(&mut h, "2025-03-26");
    let sid = a.header("Mcp-Session-Id").unwrap_or_default().to_owned();
    let mut g = base_headers();
    let _ = g.append("Mcp-Session-Id", sid.as_str());
    let s = h.http(request(HttpMethod::Get, g, b"")).1;
    assert!(
        s.streamed && s.events.is_empty(),
        "SEP-1699 priming is a 2025-11-25 behaviour: {:?}",
        s.events
    );
    let p = h.legacy(
        &sid,
        body(
            json!(1),
            "tools/call",
            json!({"name": "progress", "arguments": {}, "_meta": {"progressToken": 1}}),
        ),
    );
    let first = String::from_utf8_lossy(&p.events[0]).into_owned();
    assert!(first.contains("notifications/progress"), "{first}");
}

//! Properties of the server core: arbitrary input never panics, and every request gets exactly
//! one response (stdio: one line with its id; HTTP: one response or one finished stream per
//! exchange), whatever mix of valid and broken messages, eras and transports comes in.

mod server_support;

use std::collections::BTreeMap;

use mcpwire_core::mcp::server::{HttpMethod, HttpOutput, Output};
use mcpwire_core::mcp::ListKind;
use proptest::prelude::*;
use serde_json::{json, Value};
use server_support::*;

fn method() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "tools/list",
        "tools/call",
        "prompts/list",
        "prompts/get",
        "resources/list",
        "resources/read",
        "resources/templates/list",
        "completion/complete",
        "server/discover",
        "subscriptions/listen",
        "ping",
        "logging/setLevel",
        "initialize",
        "unknown/x",
        "resources/subscribe",
    ])
}

fn tool() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "echo",
        "tenant",
        "ask",
        "multi",
        "sample",
        "progress",
        "log",
        "reconnect",
        "nope",
    ])
}

/// A request of a random method, era shape and params.
fn message(id: i64) -> impl Strategy<Value = Value> {
    (method(), tool(), any::<bool>(), any::<bool>(), any::<u8>()).prop_map(move |(m, t, modern, caps, junk)| {
        let mut params = match m {
            "tools/call" => json!({"name": t, "arguments": {"text": "x", "region": "eu"}}),
            "prompts/get" => json!({"name": "greeting"}),
            "resources/read" | "resources/subscribe" => json!({"uri": "test://greeting"}),
            "completion/complete" => json!({"ref": {"type": "ref/prompt", "name": "g"}, "argument": {"name": "a", "value": ""}}),
            "logging/setLevel" => json!({"level": if junk % 2 == 0 { "info" } else { "bad" }}),
            "initialize" => json!({"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}}}),
            // With URIs the fixture is asked which it honours before the ack.
            "subscriptions/listen" if junk % 2 == 0 => json!({"notifications": {"toolsListChanged": true, "resourceSubscriptions": ["test://greeting"]}}),
            "subscriptions/listen" => json!({"notifications": {"toolsListChanged": true}}),
            _ => json!({}),
        };
        if modern {
            let caps = if caps { json!({"elicitation": {}, "sampling": {}, "roots": {}}) } else { json!({}) };
            params["_meta"] = meta_with(caps);
            if junk % 7 == 0 {
                params["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("v9");
            }
            if junk % 11 == 0 {
                params["inputResponses"] = json!({"user_name": {"action": "accept", "content": {"name": "p"}}});
                params["requestState"] = json!("v1.garbage");
            }
        }
        body(json!(id), m, params)
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]

    #[test]
    fn arbitrary_stdio_bytes_never_panic(chunks in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..200), 0..12)) {
        let mut h = Harness::new();
        for c in &chunks {
            h.server.handle_stdio_bytes(h.now, c);
            h.server.serve_with(&mut h.app, h.now);
        }
        h.server.handle_stdio_eof(h.now);
        while h.server.poll_output().is_some() {}
    }

    #[test]
    fn arbitrary_http_requests_never_panic(
        reqs in prop::collection::vec((0u8..5, prop::collection::vec(any::<u8>(), 0..300), prop::collection::vec(("[A-Za-z-]{1,20}", "[ -~]{0,30}"), 0..6)), 0..10)
    ) {
        let mut h = Harness::new();
        for (m, body, headers) in reqs {
            let method = match m { 0 => HttpMethod::Post, 1 => HttpMethod::Get, 2 => HttpMethod::Delete, 3 => HttpMethod::Other("PATCH".into()), _ => HttpMethod::Post };
            let mut hd = base_headers();
            for (n, v) in headers {
                let _ = hd.append(n, v);
            }
            let x = h.server.handle_http_request(h.now, request(method, hd, &body));
            h.server.serve_with(&mut h.app, h.now);
            let _ = h.server.handle_exchange_closed(h.now, x);
        }
        h.server.shutdown(h.now);
        while h.server.poll_output().is_some() {}
    }

    #[test]
    fn every_stdio_request_gets_exactly_one_response(msgs in prop::collection::vec((0i64..1, any::<bool>()).prop_flat_map(|_| any::<u8>()), 1..20)
        .prop_flat_map(|seeds| {
            let n = seeds.len();
            (Just(seeds), prop::collection::vec(message(0), n))
        }))
    {
        let (seeds, msgs) = msgs;
        let mut h = Harness::new();
        let mut expected = Vec::new();
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        let mut listens = Vec::new();
        let mut acked = std::collections::BTreeSet::new();
        for (i, (mut m, seed)) in msgs.into_iter().zip(seeds).enumerate() {
            let id = i as i64 + 1;
            m["id"] = json!(id);
            if m["method"] == "subscriptions/listen" {
                listens.push(json!(id));
            }
            expected.push(json!(id));
            let mut line = m.to_string().into_bytes();
            line.push(b'\n');
            // Split each line at a seed-chosen point.
            let cut = usize::from(seed) % line.len();
            h.server.handle_stdio_bytes(h.now, &line[..cut]);
            // Changes between the halves and before the answer: none may precede an ack.
            h.server.list_changed(h.now, ListKind::Tools);
            h.server.handle_stdio_bytes(h.now, &line[cut..]);
            h.server.resource_updated(h.now, "test://greeting");
            h.server.serve_with(&mut h.app, h.now);
            h.server.resource_updated(h.now, "test://greeting");
            // Answer inputs the server asked (legacy MRTR) with an accept.
            for _ in 0..4 {
                let lines = drain(&mut h.server).1;
                let mut asked = false;
                for l in lines {
                    // `subscriptions.mdx`: the ack is the first message of its subscription.
                    let sub = &l["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"];
                    if !sub.is_null() && acked.insert(sub.to_string()) {
                        prop_assert_eq!(&l["method"], "notifications/subscriptions/acknowledged", "first for {}", sub);
                    }
                    if l.get("method").is_some() && l.get("id").is_some() {
                        asked = true;
                        let answer = json!({"jsonrpc": "2.0", "id": l["id"], "result": {"action": "accept", "content": {"name": "q"}, "roots": [], "role": "assistant", "content2": {}}});
                        let mut line = answer.to_string().into_bytes();
                        line.push(b'\n');
                        h.server.handle_stdio_bytes(h.now, &line);
                        h.server.serve_with(&mut h.app, h.now);
                    } else if l.get("result").is_some() || l.get("error").is_some() {
                        *counts.entry(l["id"].to_string()).or_default() += 1;
                    }
                }
                if !asked {
                    break;
                }
            }
        }
        // The still-pending ones (slow tools, listens): shutdown answers them.
        h.server.shutdown(h.now);
        for l in drain(&mut h.server).1 {
            if l.get("result").is_some() || l.get("error").is_some() {
                *counts.entry(l["id"].to_string()).or_default() += 1;
            }
        }
        for id in expected {
            prop_assert_eq!(counts.get(&id.to_string()).copied(), Some(1), "request {} in {:?}", id, counts);
        }
    }

    #[test]
    fn every_http_exchange_ends_exactly_once(msgs in prop::collection::vec(message(1), 1..16)) {
        let mut h = Harness::new();
        let mut session: Option<String> = None;
        let mut ends: BTreeMap<u64, usize> = BTreeMap::new();
        let mut started: Vec<u64> = Vec::new();
        for m in msgs {
            let mut hd = if m["params"].get("_meta").is_some() { modern_headers(&m) } else { base_headers() };
            if let Some(s) = &session {
                let _ = hd.append("Mcp-Session-Id", s.as_str());
            }
            let x = h.server.handle_http_request(h.now, request(HttpMethod::Post, hd, m.to_string().as_bytes()));
            started.push(x.raw());
            h.server.serve_with(&mut h.app, h.now);
            while let Some(out) = h.server.poll_output() {
                if let Output::Http(x, o) = out {
                    match o {
                        HttpOutput::Response { headers, .. } => {
                            *ends.entry(x.raw()).or_default() += 1;
                            if let Some(s) = headers.get("Mcp-Session-Id") {
                                session = Some(s.to_owned());
                            }
                        }
                        HttpOutput::StreamEnd => *ends.entry(x.raw()).or_default() += 1,
                        _ => {}
                    }
                }
            }
        }
        h.server.shutdown(h.now);
        while let Some(out) = h.server.poll_output() {
            if let Output::Http(x, HttpOutput::Response { .. } | HttpOutput::StreamEnd) = out {
                *ends.entry(x.raw()).or_default() += 1;
            }
        }
        for x in started {
            prop_assert_eq!(ends.get(&x).copied(), Some(1), "exchange {} in {:?}", x, ends);
        }
        prop_assert_eq!(h.server.open_exchanges(), 0);
    }
}

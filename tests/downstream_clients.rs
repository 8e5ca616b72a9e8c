//! The downstream client harnesses work: `tests/peers/py_mcp_downstream.py` (the Python MCP
//! SDK's `Client`, PyPI `mcp==2.3.0`) and `tests/peers/node/ts_downstream.mjs` (the TypeScript
//! SDK v2 `Client`, npm `@modelcontextprotocol/client@2.4.0`) are the real clients the
//! end-to-end tests of `mcpwire host serve` put in front of the gateway (issue 15). Here each
//! runs its script against servers that exist today, so a broken harness is found before the
//! gateway is there to blame:
//!
//! - the Python and TypeScript SDK peers (`tests/peers/py_mcp_client_peer.py`,
//!   `tests/peers/node/ts_peer.mjs`, stdio), whose `confirm_action` asks a form elicitation in
//!   both eras (MRTR `input_required` on 2026-07-28, `elicitation/create` on 2025-11-25);
//! - `mcpwire dev mcp-server --stdio`, whose `ask` tool asks a form or a URL-mode elicitation
//!   (2026-07-28 only);
//! - the same two peers over Streamable HTTP on 127.0.0.1 (`--url`), each started by the test
//!   on a free port and killed when it ends.
//!
//! What the eras are: the Python client's default (`auto`) probes `server/discover` and speaks
//! 2026-07-28 to a server that has it; the TypeScript client's default is the legacy
//! `initialize` (2025-11-25) unless `versionNegotiation` asks for `auto` or a pin. Both can
//! elicit in both eras once a callback/handler is given (form and URL mode), and declare no
//! elicitation capability without one.
//!
//! Every run is bounded ([`RUN_TIMEOUT`]) and killed if it overstays. The peers come from
//! `scripts/test` (`.venv-peers` with `mcp==2.3.0`, `npm ci` in `tests/peers/node`).
#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/downstream.rs"]
mod downstream;
#[path = "support/node_peers.rs"]
mod node_peers;
mod support;

use downstream::*;

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

#[test]
fn each_client_lists_calls_and_answers_a_form_in_its_era() {
    let steps = json!([
        {"op": "list_tools"},
        {"op": "call", "name": "echo", "arguments": {"text": "through the harness"}},
        {"op": "call", "name": "confirm_action", "arguments": {"target": "prod"}},
    ]);
    for server in [py_peer(), ts_peer()] {
        for client in CLIENTS {
            let lines = run(
                client,
                &server,
                steps.clone(),
                "accept",
                json!({"confirm": true}),
            );
            let at = format!("{client:?} against {}", server[1]);
            assert_eq!(lines.len(), 4, "{at}: {lines:#?}");
            assert_eq!(lines[0]["op"], "connect", "{at}");
            assert_eq!(
                lines[0]["protocol_version"],
                expected_version(client),
                "{at}"
            );
            let names: Vec<&str> = lines[1]["tools"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|t| t["name"].as_str())
                .collect();
            assert!(
                names.contains(&"echo") && names.contains(&"confirm_action"),
                "{at}: {names:?}"
            );
            assert_eq!(text(&lines[2]["result"]), "through the harness", "{at}");
            assert_eq!(lines[2]["elicitations"], json!([]), "{at}");
            assert_eq!(text(&lines[3]["result"]), "confirmed: prod", "{at}");
            let asked = lines[3]["elicitations"].as_array().unwrap();
            assert_eq!(asked.len(), 1, "{at}");
            assert_eq!(asked[0]["message"], "Really act on prod?", "{at}");
            assert_eq!(
                asked[0]["requestedSchema"]["properties"]["confirm"]["type"], "boolean",
                "{at}"
            );
        }
    }
}

#[test]
fn decline_and_cancel_reach_the_server() {
    let steps = json!([{"op": "call", "name": "confirm_action", "arguments": {"target": "prod"}}]);
    for server in [py_peer(), ts_peer()] {
        for client in CLIENTS {
            for answer in ["decline", "cancel"] {
                let lines = run(client, &server, steps.clone(), answer, json!({}));
                let at = format!("{client:?} {answer} against {}", server[1]);
                let call = &lines[1];
                assert_eq!(
                    call["elicitations"].as_array().map(Vec::len),
                    Some(1),
                    "{at}: {call}"
                );
                // The servers word it their own way; none of them confirms.
                let said = text(&call["result"]);
                assert!(
                    call["ok"] == true && !said.starts_with("confirmed"),
                    "{at}: {call}"
                );
                assert!(
                    said.contains(answer)
                        || said.contains("declined")
                        || said.contains("not confirmed"),
                    "{at}: {said}"
                );
            }
        }
    }
}

#[test]
fn without_a_callback_no_elicitation_capability_is_declared() {
    let steps = json!([{"op": "call", "name": "confirm_action", "arguments": {"target": "prod"}}]);
    for server in [py_peer(), ts_peer()] {
        for client in CLIENTS {
            let lines = run(client, &server, steps.clone(), "none", json!({}));
            let at = format!("{client:?} against {}", server[1]);
            let call = &lines[1];
            assert_eq!(call["elicitations"], json!([]), "{at}");
            // -32021 (MissingRequiredClientCapability), or the TypeScript server's legacy
            // shim's tool error naming the missing capability: never a confirmation.
            let refused = call["error"]["code"] == -32021
                || (call["result"]["isError"] == true
                    && text(&call["result"]).contains("capability"));
            assert!(refused, "{at}: {call}");
        }
    }
}

#[test]
fn the_dev_servers_ask_tool_form_and_url_mode() {
    let steps = json!([
        {"op": "call", "name": "ask", "arguments": {}},
        {"op": "call", "name": "ask", "arguments": {"form": "url"}},
        {"op": "search", "query": "anything"},
    ]);
    for client in [
        Downstream::Python("auto"),
        Downstream::TypeScript("2026-07-28"),
    ] {
        let lines = run(
            client,
            &dev_server(),
            steps.clone(),
            "accept",
            json!({"name": "Ada"}),
        );
        assert_eq!(lines[0]["protocol_version"], "2026-07-28", "{client:?}");
        assert_eq!(
            text(&lines[1]["result"]),
            "Hello, Ada!",
            "{client:?}: {}",
            lines[1]
        );
        assert_eq!(
            lines[1]["elicitations"][0]["message"], "What is your name?",
            "{client:?}"
        );
        let url = &lines[2];
        assert_eq!(url["elicitations"][0]["mode"], "url", "{client:?}: {url}");
        assert!(
            url["elicitations"][0]["url"]
                .as_str()
                .unwrap_or_default()
                .contains("/elicit/consent"),
            "{client:?}: {url}"
        );
        assert_eq!(
            text(&url["result"]),
            "Consent recorded: finish on the page.",
            "{client:?}"
        );
        // A server without the gateway's meta-tool: the step still reports, as an error.
        let search = &lines[3];
        assert_eq!(search["op"], "search");
        assert!(
            search["ok"] == false || search["result"]["isError"] == true,
            "{client:?}: {search}"
        );
    }
}

#[test]
fn both_clients_over_streamable_http() {
    let steps = json!([
        {"op": "list_tools"},
        {"op": "call", "name": "confirm_action", "arguments": {"target": "staging"}},
    ]);
    let py = http_peer(vec![
        python().display().to_string(),
        support::peer_script("py_mcp_client_peer.py"),
        "http".into(),
    ]);
    let mut ts_cmd = ts_peer();
    ts_cmd.pop();
    ts_cmd.push("http".into());
    let ts = http_peer(ts_cmd);
    // The TypeScript server's legacy fallback over HTTP is stateless: it cannot elicit, so
    // only the modern era is asked of it here.
    let runs = [
        (&py, Downstream::Python("auto")),
        (&py, Downstream::Python("legacy")),
        (&py, Downstream::TypeScript("legacy")),
        (&py, Downstream::TypeScript("auto")),
        (&ts, Downstream::Python("auto")),
        (&ts, Downstream::TypeScript("2026-07-28")),
    ];
    for (peer, client) in runs {
        let lines = run(
            client,
            std::slice::from_ref(&peer.url),
            steps.clone(),
            "accept",
            json!({"confirm": true}),
        );
        let at = format!("{client:?} against {}", peer.url);
        assert_eq!(
            lines[0]["protocol_version"],
            expected_version(client),
            "{at}"
        );
        assert_eq!(
            text(&lines[2]["result"]),
            "confirmed: staging",
            "{at}: {}",
            lines[2]
        );
        assert_eq!(
            lines[2]["elicitations"][0]["message"], "Really act on staging?",
            "{at}"
        );
    }
}

/// The gateway's approval forms (`mcpwire_core::host::gateway::consent`) as both clients take
/// them: a hand-written 2025-11-25 server (`tests/peers/raw_elicit_server.py`) asks exactly the
/// form the gateway builds, and the answer each client sends back reads, through
/// `ConsentForm::read_answer`, as what the person chose.
#[test]
fn both_clients_take_the_gateways_approval_forms() {
    use mcpwire_core::host::catalog::Catalog;
    use mcpwire_core::host::consent::{ConsentPolicy, Rules};
    use mcpwire_core::host::gateway::consent::decide;
    use mcpwire_core::host::gateway::{
        route_call, Availability, ConsentAnswer, ConsentStep, Routed, Upstreams,
    };
    use mcpwire_core::host::{ServerId, Trust};
    use mcpwire_core::mcp::meta::ClientCapabilities;
    use mcpwire_core::mcp::results::{Tool, ToolAnnotations};

    let id = |s: &str| ServerId::new(s).unwrap();
    let schema = json!({"type": "object"}).as_object().unwrap().clone();
    let mut catalog = Catalog::new();
    catalog.set_server_tools(
        id("github"),
        vec![Tool {
            name: "create_issue".into(),
            description: Some("Create an issue.\nIt is public.".into()),
            input_schema: schema.clone(),
            ..Tool::default()
        }],
    );
    catalog.set_server_tools(
        id("files"),
        vec![Tool {
            name: "read".into(),
            description: Some("Read a file.".into()),
            input_schema: schema,
            annotations: Some(ToolAnnotations {
                read_only_hint: Some(true),
                open_world_hint: Some(false),
                ..ToolAnnotations::default()
            }),
            ..Tool::default()
        }],
    );
    let mut up = Upstreams::new();
    up.insert(id("github"), Trust::Untrusted, Availability::Ready);
    up.insert(id("files"), Trust::Trusted, Availability::Ready);
    let policy = ConsentPolicy::new(Rules::default());
    let caps = ClientCapabilities::none().with_elicitation_form();
    let form_of = |name: &str, args: Value| {
        let Ok(Routed::Call(call)) = route_call(&catalog, &up, name, Some(&args)) else {
            panic!("{name} did not route")
        };
        match decide(&policy, &call, &caps, "/cfg.json") {
            ConsentStep::Ask(form) => form,
            other => panic!("{other:?}"),
        }
    };
    let untrusted = form_of(
        "github__create_issue",
        json!({"title": "Ünïcode ✓", "body": "two\nlines", "labels": ["a", "b"]}),
    );
    let trusted = form_of("files__read", json!({"path": "/etc/hosts"}));
    assert!(trusted.offers_always() && !untrusted.offers_always());
    let dir = std::env::temp_dir();
    let clients = [
        Downstream::Python("legacy"),
        Downstream::TypeScript("legacy"),
    ];
    for (n, (form, elicit, content, expected)) in [
        (
            &untrusted,
            "accept",
            json!({}),
            ConsentAnswer::Accept { always: false },
        ),
        (&untrusted, "decline", json!({}), ConsentAnswer::Decline),
        (&untrusted, "cancel", json!({}), ConsentAnswer::Cancel),
        (
            &trusted,
            "accept",
            json!({"always": true}),
            ConsentAnswer::Accept { always: true },
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let file = dir.join(format!(
            "mcpwire-gateway-form-{}-{n}.json",
            std::process::id()
        ));
        std::fs::write(&file, form.params().to_string()).unwrap();
        let server = vec![
            python().display().to_string(),
            support::peer_script("raw_elicit_server.py"),
            file.display().to_string(),
        ];
        for client in clients {
            let steps = json!([{"op": "call", "name": "gated", "arguments": {}}]);
            let lines = run(client, &server, steps, elicit, content.clone());
            let at = format!("{client:?} {elicit} {content}");
            let shown = &lines[1]["elicitations"][0];
            assert_eq!(shown["message"], form.message(), "{at}");
            assert_eq!(shown["requestedSchema"], form.schema(), "{at}");
            let answer: Value = serde_json::from_str(&text(&lines[1]["result"])).unwrap();
            assert_eq!(form.read_answer(&answer), Ok(expected), "{at}: {answer}");
        }
        let _ = std::fs::remove_file(&file);
    }
}

/// `pause` holds the script until the test writes a line (the gateway's tests kill an upstream
/// there), and list-changed notifications are reported with the step they came in: the
/// TypeScript peer's `touch_tools` sends `notifications/tools/list_changed` on a legacy stdio
/// connection.
#[test]
fn pause_waits_for_the_test_and_notifications_are_reported() {
    use std::io::Write;

    let steps = json!([
        {"op": "call", "name": "touch_tools"},
        {"op": "pause"},
        {"op": "call", "name": "echo", "arguments": {"text": "after the pause"}},
    ]);
    for client in [
        Downstream::Python("legacy"),
        Downstream::TypeScript("legacy"),
    ] {
        let mut cmd = client_command(client);
        let mut child = cmd
            .args(["--steps", &steps.to_string(), "--"])
            .args(ts_peer())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let rx = json_lines(child.stdout.take().unwrap());
        let next = || rx.recv_timeout(RUN_TIMEOUT).unwrap();
        let at = format!("{client:?}");
        assert_eq!(next()["op"], "connect", "{at}");
        let touched = next();
        assert_eq!(
            touched["notifications"],
            json!(["notifications/tools/list_changed"]),
            "{at}: {touched}"
        );
        assert_eq!(next()["op"], "pause", "{at}");
        // Held: nothing more until the test says so.
        assert!(
            rx.recv_timeout(Duration::from_millis(500)).is_err(),
            "{at}: did not pause"
        );
        stdin.write_all(b"go\n").unwrap();
        let after = next();
        assert_eq!(text(&after["result"]), "after the pause", "{at}: {after}");
        drop(stdin);
        let start = Instant::now();
        while child.try_wait().unwrap().is_none() {
            if start.elapsed() > RUN_TIMEOUT {
                let _ = child.kill();
                panic!("{at}: did not end");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

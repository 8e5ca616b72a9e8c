//! End to end on 127.0.0.1: the dev control plane, the tunnel client (each driver, run as
//! `mcpwire tunnel run` runs it) and the dev reference MCP server, over HTTP and as a stdio
//! child. Each test is named after the rule it holds and cites the section of
//! `shared/spec/tunnel/protocol.md` the rule comes from. Waits are bounded; nothing asserts a
//! duration.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeSet;
use std::net::TcpListener;
use std::time::Duration;

use mcpwire_dev::control_plane::{Endpoint, Fault, RESPONSE_TIMEOUT_HEADER};
use mcpwire_dev::mcp_server::{fail_data, FAIL_CODE, FAIL_MESSAGE};
use serde_json::{json, Value};
use support::*;

each_driver!(
    an_http_tool_call_reaches_the_server_and_its_result_returns_to_the_mcp_client,
    a_stdio_tool_call_reaches_the_child_and_its_result_returns_to_the_mcp_client,
    http_progress_notifications_are_relayed_before_the_terminal_response,
    stdio_progress_notifications_are_relayed_before_the_terminal_response,
    session_termination_closes_the_http_session_with_delete,
    session_termination_on_stdio_is_refused_and_the_child_keeps_serving,
    a_0s_response_timeout_is_dropped_without_contacting_mcp_or_posting,
    a_malformed_response_timeout_keeps_the_legacy_no_deadline_behaviour,
    a_deadline_mid_call_cancels_the_http_request_and_posts_nothing,
    a_deadline_mid_call_on_stdio_retires_the_id_and_the_child_serves_the_next_command,
    a_terminal_post_is_retried_after_retry_after_with_the_same_body,
    a_404_on_a_response_post_is_terminal_and_the_mcp_call_is_not_replayed,
    a_401_on_poll_makes_the_client_not_ready_without_a_tight_loop,
    thirty_commands_in_one_poll_are_all_answered,
    commands_complete_out_of_order_under_concurrency,
    an_unreachable_mcp_server_is_a_connect_failure_without_an_upstream_response,
    an_http_500_with_a_non_json_body_is_a_target_http_failure_with_its_status,
    a_target_json_rpc_error_is_preserved_exactly,
    response_headers_are_stripped_to_the_allowlist,
    secrets_never_reach_the_logs,
    a_stop_ends_polling_and_lets_the_in_flight_call_finish,
    a_second_stop_ends_the_client_at_once,
);

fn http_stack(driver: Driver) -> (ControlPlaneHandleAlias, McpHandleAlias, Tunnel) {
    let cp = plane();
    let mcp = reference_server();
    let url = mcp.url();
    let t = Tunnel::start(driver, &cp, |a| a.server_urls = vec![url]);
    (cp, mcp, t)
}

type ControlPlaneHandleAlias = mcpwire_dev::control_plane::ControlPlaneHandle;
type McpHandleAlias = mcpwire_dev::mcp_server::McpServerHandle;

fn stdio_stack(driver: Driver) -> (ControlPlaneHandleAlias, Tunnel) {
    let cp = plane();
    let t = Tunnel::start(driver, &cp, |a| {
        a.commands = vec![stdio_reference_command()]
    });
    (cp, t)
}

fn text_of(post: &Value) -> &str {
    post["resp_json"]["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
}

/// protocol.md "`jsonrpc` commands" and "Posting a response": an MCP client's request reaches
/// the MCP server through the control plane and the tunnel, ids preserved, and the result
/// comes back as the HTTP response.
fn an_http_tool_call_reaches_the_server_and_its_result_returns_to_the_mcp_client(d: Driver) {
    let (cp, mcp, t) = http_stack(d);
    let list = mcp_request(&cp, &modern_text(1, "tools/list", json!({}), None), &[]);
    assert_eq!(list.status, 200, "{}", list.body);
    let tools = list.json()["result"]["tools"].as_array().unwrap().len();
    assert!(tools >= 5, "{}", list.body);
    let body = modern_text(
        3,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "over http"}}),
        None,
    );
    let r = mcp_request(&cp, &body, &[]);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["id"], 3);
    assert_eq!(r.json()["result"]["content"][0]["text"], "over http");
    assert_eq!(mcp.server().stats().tool_calls.get("echo"), Some(&1));
    let log = t.stop();
    assert!(
        log.lines().any(|l| l.contains("method=tools/call")
            && l.contains("outcome=completed")
            && l.contains("channel=main")),
        "{log}"
    );
}

/// protocol.md "`jsonrpc` commands": the same over a stdio child (`mcpwire dev mcp-server
/// --stdio`, started without a shell).
fn a_stdio_tool_call_reaches_the_child_and_its_result_returns_to_the_mcp_client(d: Driver) {
    let (cp, _t) = stdio_stack(d);
    let body = modern_text(
        7,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "over stdio"}}),
        None,
    );
    let r = mcp_request(&cp, &body, &[]);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["id"], 7);
    assert_eq!(r.json()["result"]["content"][0]["text"], "over stdio");
}

fn check_progress(r: &Reply, cp: &ControlPlaneHandleAlias) {
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    let messages = r.sse_messages();
    assert_eq!(messages.len(), 4, "{messages:?}");
    for (i, m) in messages[..3].iter().enumerate() {
        assert_eq!(m["method"], "notifications/progress");
        assert_eq!(m["params"]["progressToken"], "tok-e2e");
        assert_eq!(m["params"]["progress"], i as u64 + 1);
    }
    assert_eq!(messages[3]["id"], 5);
    assert!(messages[3]["result"].is_object());
    // The tunnel posted three jsonrpc_notify, then one jsonrpc_response.
    let types: Vec<String> = cp
        .plane()
        .responses(TUNNEL)
        .iter()
        .map(|p| p.resp_type.clone().unwrap_or_default())
        .collect();
    assert_eq!(
        types,
        [
            "jsonrpc_notify",
            "jsonrpc_notify",
            "jsonrpc_notify",
            "jsonrpc_response"
        ]
    );
}

fn progress_body() -> String {
    modern_text(
        5,
        "tools/call",
        json!({"name": "progress", "arguments": {"steps": 3, "interval_ms": 5}}),
        Some("tok-e2e"),
    )
}

/// protocol.md "Structured MCP errors and synthesized tunnel failures" (zero or more
/// `jsonrpc_notify`, then one terminal `jsonrpc_response`): SSE progress from an HTTP server.
fn http_progress_notifications_are_relayed_before_the_terminal_response(d: Driver) {
    let (cp, _mcp, _t) = http_stack(d);
    let r = mcp_request(&cp, &progress_body(), &[]);
    check_progress(&r, &cp);
}

/// The same rule for progress lines written by a stdio child.
fn stdio_progress_notifications_are_relayed_before_the_terminal_response(d: Driver) {
    let (cp, _t) = stdio_stack(d);
    let r = mcp_request(&cp, &progress_body(), &[]);
    check_progress(&r, &cp);
}

/// protocol.md "`session_termination` commands": DELETE with the `Mcp-Session-Id`, then a
/// `session_termination_response` (204) without `resp_json`.
fn session_termination_closes_the_http_session_with_delete(d: Driver) {
    let (cp, mcp, _t) = http_stack(d);
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "e2e", "version": "1"}}})
    .to_string();
    let r = http(
        "POST",
        &cp.mcp_url(TUNNEL),
        &[
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
        ],
        Some(&init),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let sid = r.header("mcp-session-id").unwrap().to_owned();
    assert_eq!(mcp.server().open_sessions(), 1);
    let del = http(
        "DELETE",
        &cp.mcp_url(TUNNEL),
        &[("Mcp-Session-Id", &sid)],
        None,
    );
    assert_eq!(del.status, 204, "{}", del.body);
    assert_eq!(mcp.server().open_sessions(), 0);
    assert_eq!(mcp.server().stats().sessions_ended, 1);
    let post = cp
        .plane()
        .responses(TUNNEL)
        .into_iter()
        .rfind(|p| p.resp_type.as_deref() == Some("session_termination_response"))
        .unwrap();
    let body: Value = serde_json::from_str(&post.body).unwrap();
    assert_eq!(body["resp_code"], 204);
    assert!(body.get("resp_json").is_none(), "{body}");
}

/// protocol.md "`session_termination` commands" has no meaning on stdio: the command is
/// answered with a failure before the child is touched, and the child keeps serving.
fn session_termination_on_stdio_is_refused_and_the_child_keeps_serving(d: Driver) {
    let (cp, t) = stdio_stack(d);
    enqueue(
        &cp,
        vec![json!({
            "request_id": "req_end", "shard_token": "shard-secret-end",
            "command_type": "session_termination", "channel": "main",
            "created_at": "2026-01-01T00:00:00Z", "headers": {"Mcp-Session-Id": ["s-1"]}
        })],
    );
    let post = terminal(&cp, "req_end");
    assert_eq!(post["resp_type"], "session_termination_response", "{post}");
    assert!(post["resp_code"].as_u64().unwrap() >= 400, "{post}");
    enqueue(
        &cp,
        vec![command(
            "req_after",
            Some("30s"),
            call(2, "echo", json!({"text": "still here"})),
        )],
    );
    let after = terminal(&cp, "req_after");
    assert_eq!(text_of(&after), "still here", "{after}\n{}", t.log());
}

/// protocol.md "Response timeout": a valid zero is immediate expiry; the command is dropped
/// without contacting MCP or posting a response.
fn a_0s_response_timeout_is_dropped_without_contacting_mcp_or_posting(d: Driver) {
    let (cp, mcp, t) = http_stack(d);
    enqueue(
        &cp,
        vec![
            command(
                "req_zero",
                Some("0s"),
                call(1, "echo", json!({"text": "no"})),
            ),
            command(
                "req_next",
                Some("30s"),
                call(2, "echo", json!({"text": "yes"})),
            ),
        ],
    );
    assert_eq!(text_of(&terminal(&cp, "req_next")), "yes");
    assert!(posts_for(&cp, "req_zero").is_empty());
    assert_eq!(mcp.server().stats().tool_calls.get("echo"), Some(&1));
    let log = t.stop();
    assert!(
        log.lines()
            .any(|l| l.contains("request_id=req_zero") && l.contains("outcome=expired")),
        "{log}"
    );
}

/// protocol.md "Response timeout": a malformed value (`4.5s`, a number) keeps the legacy
/// no-deadline behaviour; the command is served.
fn a_malformed_response_timeout_keeps_the_legacy_no_deadline_behaviour(d: Driver) {
    let (cp, _mcp, _t) = http_stack(d);
    let mut numeric = command("req_num", None, call(2, "echo", json!({"text": "num"})));
    numeric["response_timeout"] = json!(30);
    enqueue(
        &cp,
        vec![
            command("req_frac", Some("4.5s"), call(1, "slow", json!({"ms": 50}))),
            numeric,
            command(
                "req_unit",
                Some("30d"),
                call(3, "echo", json!({"text": "unit"})),
            ),
        ],
    );
    assert_eq!(terminal(&cp, "req_frac")["resp_code"], 200);
    assert_eq!(text_of(&terminal(&cp, "req_num")), "num");
    assert_eq!(text_of(&terminal(&cp, "req_unit")), "unit");
}

/// protocol.md "Response timeout": when the deadline passes during MCP work the request is
/// cancelled and its connection closed, and no late response is posted. Through the MCP
/// endpoint, the MCP client gets the control plane's 504.
fn a_deadline_mid_call_cancels_the_http_request_and_posts_nothing(d: Driver) {
    let (cp, mcp, t) = http_stack(d);
    let body = modern_text(
        9,
        "tools/call",
        json!({"name": "slow", "arguments": {"ms": 20000}}),
        None,
    );
    let r = mcp_request(&cp, &body, &[(RESPONSE_TIMEOUT_HEADER, "400ms")]);
    assert_eq!(r.status, 504, "{}", r.body);
    wait_for("the MCP server to see the slow call cancelled", || {
        (mcp.server().stats().cancelled == 1).then_some(())
    });
    // The next command is served, and nothing was ever posted for the slow one.
    enqueue(
        &cp,
        vec![command(
            "req_next",
            Some("30s"),
            call(2, "echo", json!({"text": "next"})),
        )],
    );
    assert_eq!(text_of(&terminal(&cp, "req_next")), "next");
    let all = cp.plane().responses(TUNNEL);
    assert_eq!(all.len(), 1, "{all:?}");
    let log = t.stop();
    assert!(
        log.lines()
            .any(|l| l.contains("outcome=expired") && l.contains("stage=during_forward")),
        "{log}"
    );
}

/// protocol.md "Response timeout", shared stdio exception: the pipes stay open, the timed-out
/// id is retired, and the child serves the next command.
fn a_deadline_mid_call_on_stdio_retires_the_id_and_the_child_serves_the_next_command(d: Driver) {
    let (cp, t) = stdio_stack(d);
    enqueue(
        &cp,
        vec![command(
            "req_slow",
            Some("400ms"),
            call(1, "slow", json!({"ms": 3000})),
        )],
    );
    wait_for("the stdio deadline to pass", || {
        t.log()
            .lines()
            .any(|l| l.contains("request_id=req_slow") && l.contains("outcome=expired"))
            .then_some(())
    });
    enqueue(
        &cp,
        vec![command(
            "req_next",
            Some("30s"),
            call(2, "echo", json!({"text": "next"})),
        )],
    );
    assert_eq!(text_of(&terminal(&cp, "req_next")), "next");
    assert!(posts_for(&cp, "req_slow").is_empty());
    let log = t.stop();
    assert!(!log.contains("restarting stdio server"), "{log}");
}

/// protocol.md "Errors, retries, and concurrency": terminal POSTs are retried on 429/503,
/// honouring `Retry-After`, with the exact body and the same shard token.
fn a_terminal_post_is_retried_after_retry_after_with_the_same_body(d: Driver) {
    let (cp, _mcp, t) = http_stack(d);
    cp.plane()
        .inject_fault(Endpoint::Response, Fault::new(503, Some("1"), Some(1)));
    cp.plane()
        .inject_fault(Endpoint::Response, Fault::new(429, Some("1"), Some(1)));
    enqueue(
        &cp,
        vec![command(
            "req_retry",
            Some("30s"),
            call(1, "echo", json!({"text": "retried"})),
        )],
    );
    assert_eq!(text_of(&terminal(&cp, "req_retry")), "retried");
    let recs: Vec<_> = cp
        .plane()
        .responses(TUNNEL)
        .into_iter()
        .filter(|r| r.request_id.as_deref() == Some("req_retry"))
        .collect();
    let statuses: Vec<u16> = recs.iter().map(|r| r.status).collect();
    assert_eq!(statuses, [503, 429, 200]);
    assert!(recs.iter().all(|r| r.body == recs[0].body));
    assert!(recs
        .iter()
        .all(|r| r.shard_token.as_deref() == Some("shard-secret-req_retry")));
    // The counter is updated by the driver's loop, which may run just after the control plane
    // recorded the final POST: wait (bounded) for it, then check it counted exactly two.
    let metrics = wait_for("the delivery retries to be counted", || {
        let (_, metrics) = t.get("/metrics");
        metrics
            .lines()
            .any(|l| {
                l.starts_with("mcpwire_tunnel_delivery_retries_total ")
                    && !l.ends_with(" 0")
                    && !l.ends_with(" 1")
            })
            .then_some(metrics)
    });
    assert!(
        metrics.contains("mcpwire_tunnel_delivery_retries_total 2"),
        "{metrics}"
    );
}

/// protocol.md "Errors, retries, and concurrency": a 404 on a response POST means the command
/// is no longer pending; it is terminal and the MCP operation is not replayed.
fn a_404_on_a_response_post_is_terminal_and_the_mcp_call_is_not_replayed(d: Driver) {
    let (cp, mcp, _t) = http_stack(d);
    cp.plane()
        .inject_fault(Endpoint::Response, Fault::new(404, None, Some(1)));
    enqueue(
        &cp,
        vec![command(
            "req_gone",
            Some("30s"),
            call(1, "echo", json!({"text": "gone"})),
        )],
    );
    wait_for("the refused POST", || {
        (!posts_for(&cp, "req_gone").is_empty()).then_some(())
    });
    // A later command completes; by then a replay would have shown.
    enqueue(
        &cp,
        vec![command(
            "req_next",
            Some("30s"),
            call(2, "echo", json!({"text": "next"})),
        )],
    );
    terminal(&cp, "req_next");
    let gone = posts_for(&cp, "req_gone");
    assert_eq!(gone.len(), 1, "{gone:?}");
    assert_eq!(gone[0].0, 404);
    assert_eq!(mcp.server().stats().tool_calls.get("echo"), Some(&2));
}

/// protocol.md "Errors, retries, and concurrency": 401/403 need operator action, not a tight
/// retry loop; `/readyz` says not ready while polls fail.
fn a_401_on_poll_makes_the_client_not_ready_without_a_tight_loop(d: Driver) {
    let (cp, _mcp, t) = http_stack(d);
    wait_for("ready", || (t.get("/readyz").0 == 200).then_some(()));
    cp.plane()
        .inject_fault(Endpoint::Poll, Fault::new(401, None, None));
    wait_for("not ready", || (t.get("/readyz").0 == 503).then_some(()));
    let refused = |cp: &ControlPlaneHandleAlias| {
        cp.plane()
            .polls(TUNNEL)
            .iter()
            .filter(|p| p.status == 401)
            .count()
    };
    let before = refused(&cp);
    let started = std::time::Instant::now();
    std::thread::sleep(Duration::from_secs(2));
    let during = refused(&cp) - before;
    // Counted against the time that really passed (a loaded machine oversleeps): at most one
    // refused poll a second, plus the one in flight.
    let allowed = 1 + started.elapsed().as_secs() as usize;
    assert!(
        during <= allowed,
        "{during} polls refused with 401 in {:?}: a tight loop",
        started.elapsed()
    );
    assert_eq!(t.get("/readyz").0, 503);
    assert!(
        t.log().contains("check the API key and tunnel id"),
        "{}",
        t.log()
    );
}

/// protocol.md "Poll loop" and "Errors, retries, and concurrency" (bounded concurrency, one
/// poll loop feeding workers): 30 commands returned by one poll are all answered.
fn thirty_commands_in_one_poll_are_all_answered(d: Driver) {
    let cp = plane();
    cp.plane().set_poll_batch(Some(30));
    let commands: Vec<Value> = (0..30)
        .map(|i| {
            command(
                &format!("req_{i:02}"),
                Some("60s"),
                call(i, "echo", json!({"text": format!("n{i}")})),
            )
        })
        .collect();
    enqueue(&cp, commands);
    let mcp = reference_server();
    let url = mcp.url();
    let _t = Tunnel::start(d, &cp, |a| a.server_urls = vec![url]);
    for i in 0..30 {
        let post = terminal(&cp, &format!("req_{i:02}"));
        assert_eq!(text_of(&post), format!("n{i}"));
        assert_eq!(post["resp_json"]["id"], i);
    }
    let delivered: Vec<usize> = cp
        .plane()
        .polls(TUNNEL)
        .iter()
        .map(|p| p.delivered.len())
        .filter(|n| *n > 0)
        .collect();
    assert_eq!(delivered, [30]);
}

/// protocol.md "Errors, retries, and concurrency": commands may complete in any order;
/// correlation is per command.
fn commands_complete_out_of_order_under_concurrency(d: Driver) {
    let (cp, _mcp, _t) = http_stack(d);
    enqueue(
        &cp,
        vec![
            command("req_slow", Some("30s"), call(1, "slow", json!({"ms": 800}))),
            command(
                "req_fast",
                Some("30s"),
                call(2, "echo", json!({"text": "fast"})),
            ),
        ],
    );
    let fast = terminal_seq(&cp, "req_fast");
    let slow = terminal_seq(&cp, "req_slow");
    assert!(fast < slow, "the fast command waited for the slow one");
    assert_eq!(terminal(&cp, "req_slow")["resp_json"]["id"], 1);
    assert_eq!(terminal(&cp, "req_fast")["resp_json"]["id"], 2);
}

/// protocol.md "Structured MCP errors and synthesized tunnel failures": no target response
/// means a synthesized -32603 whose provenance says `connect` and
/// `upstream_response_received: false`.
fn an_unreachable_mcp_server_is_a_connect_failure_without_an_upstream_response(d: Driver) {
    let cp = plane();
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/mcp", closed.local_addr().unwrap());
    drop(closed);
    let _t = Tunnel::start(d, &cp, |a| a.server_urls = vec![url]);
    enqueue(
        &cp,
        vec![command(
            "req_down",
            Some("30s"),
            call(4, "echo", json!({"text": "x"})),
        )],
    );
    let post = terminal(&cp, "req_down");
    assert_eq!(post["resp_json"]["id"], 4);
    assert_eq!(post["resp_json"]["error"]["code"], -32603);
    let f = failure(&post);
    assert_eq!(f["source"], "connect", "{post}");
    assert_eq!(f["upstream_response_received"], false);
    assert!(f.get("upstream_status").is_none());
}

/// protocol.md "Structured MCP errors and synthesized tunnel failures": an HTTP error without
/// a JSON-RPC body is `target_http` with the target's status in `upstream_status`.
fn an_http_500_with_a_non_json_body_is_a_target_http_failure_with_its_status(d: Driver) {
    let (cp, _mcp, _t) = http_stack(d);
    enqueue(
        &cp,
        vec![command(
            "req_500",
            Some("30s"),
            call(
                6,
                "fail",
                json!({"http_status": 500, "raw_body": "<html>internal error</html>"}),
            ),
        )],
    );
    let post = terminal(&cp, "req_500");
    assert_eq!(post["resp_json"]["id"], 6);
    assert_eq!(post["resp_json"]["error"]["code"], -32603);
    let f = failure(&post);
    assert_eq!(f["source"], "target_http", "{post}");
    assert_eq!(f["upstream_status"], 500);
    assert_eq!(f["upstream_response_received"], true);
    assert!(!post.to_string().contains("internal error"), "{post}");
}

/// protocol.md "Structured MCP errors and synthesized tunnel failures": a valid JSON-RPC
/// error keeps its id, code, message and data exactly, and the target's HTTP status.
fn a_target_json_rpc_error_is_preserved_exactly(d: Driver) {
    let (cp, _mcp, _t) = http_stack(d);
    enqueue(
        &cp,
        vec![
            command("req_fail", Some("30s"), call(8, "fail", json!({}))),
            command(
                "req_cap",
                Some("30s"),
                call(
                    9,
                    "fail",
                    json!({"code": -32003, "message": "capability missing", "data": {"need": ["sampling"]}, "http_status": 400}),
                ),
            ),
        ],
    );
    let post = terminal(&cp, "req_fail");
    assert_eq!(
        post["resp_json"],
        json!({"jsonrpc": "2.0", "id": 8, "error": {"code": FAIL_CODE, "message": FAIL_MESSAGE, "data": fail_data()}})
    );
    assert_eq!(post["resp_code"], 200);
    let cap = terminal(&cp, "req_cap");
    assert_eq!(
        cap["resp_json"]["error"],
        json!({"code": -32003, "message": "capability missing", "data": {"need": ["sampling"]}})
    );
    assert_eq!(cap["resp_json"]["id"], 9);
    assert_eq!(cap["resp_code"], 400);
}

/// protocol.md "Structured MCP errors and synthesized tunnel failures": `resp_headers` keeps
/// only the allowlist, without `Connection` or the headers it nominates.
fn response_headers_are_stripped_to_the_allowlist(d: Driver) {
    let (cp, _mcp, _t) = http_stack(d);
    let extra = json!({
        "X-Internal-Trace": "secret-trace",
        "Set-Cookie": "session=abc",
        "Connection": "Access-Control-Expose-Headers",
        "Access-Control-Expose-Headers": "Mcp-Session-Id",
        "WWW-Authenticate": "Bearer realm=\"e2e\"",
        "Server": "reference"
    });
    enqueue(
        &cp,
        vec![command(
            "req_h",
            Some("30s"),
            call(1, "echo", json!({"text": "h", "response_headers": extra})),
        )],
    );
    let post = terminal(&cp, "req_h");
    let names: BTreeSet<String> = post["resp_headers"]
        .as_object()
        .unwrap()
        .keys()
        .map(|k| k.to_ascii_lowercase())
        .collect();
    let allowed: BTreeSet<String> = [
        "content-type",
        "mcp-session-id",
        "mcp-protocol-version",
        "last-event-id",
        "access-control-expose-headers",
        "www-authenticate",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    assert!(names.is_subset(&allowed), "{names:?}");
    assert!(names.contains("content-type"), "{names:?}");
    assert!(names.contains("www-authenticate"), "{names:?}");
    assert!(
        !names.contains("access-control-expose-headers"),
        "a Connection-nominated header was kept: {names:?}"
    );
    assert!(!post.to_string().contains("secret-trace"));
}

/// protocol.md "Posting a response" (the shard token travels in its header only) and the
/// rule that credentials never reach logs: the API key, shard tokens and a forwarded
/// bearer token appear nowhere in the debug log or on `/metrics`.
fn secrets_never_reach_the_logs(d: Driver) {
    let (cp, _mcp, t) = http_stack(d);
    let mut c = command("req_s", Some("30s"), call(1, "echo", json!({"text": "s"})));
    c["headers"] = json!({"Authorization": ["Bearer user-token-e2e-secret"]});
    enqueue(&cp, vec![c]);
    let post = terminal(&cp, "req_s");
    assert!(post.get("shard_token").is_none(), "{post}");
    // A scrape that counted the command (so it is this run's page, not an empty one).
    let metrics = wait_for("/metrics to count the command", || {
        let (status, page) = t.get("/metrics");
        (status == 200 && page.contains("mcpwire_tunnel_commands_total{outcome=\"completed\"} 1"))
            .then_some(page)
    });
    let log = t.stop();
    assert!(log.contains("request_id=req_s"), "{log}");
    for secret in [KEY, "shard-secret-req_s", "user-token-e2e-secret"] {
        assert!(!log.contains(secret), "{secret} in the log:\n{log}");
        assert!(
            !metrics.contains(secret),
            "{secret} in /metrics:\n{metrics}"
        );
    }
}

/// Shutdown (issue 4, "SIGINT/SIGTERM"): a stop, as SIGTERM, stops polling and lets the
/// command in flight finish and post its result within the grace period, then the client
/// returns.
fn a_stop_ends_polling_and_lets_the_in_flight_call_finish(d: Driver) {
    let cp = plane();
    let mcp = reference_server();
    let url = mcp.url();
    let t = Tunnel::start(d, &cp, |a| {
        a.server_urls = vec![url];
        a.grace = Some("30s".to_owned());
    });
    enqueue(
        &cp,
        vec![command(
            "req_slow",
            Some("30s"),
            call(1, "slow", json!({"ms": 1500})),
        )],
    );
    wait_for("the slow call to reach the MCP server", || {
        mcp.server()
            .stats()
            .tool_calls
            .contains_key("slow")
            .then_some(())
    });
    let log = t.stop();
    assert!(log.contains("polling stopped"), "{log}");
    let posts = posts_for(&cp, "req_slow");
    assert_eq!(posts.len(), 1, "{posts:?}");
    assert_eq!(posts[0].0, 200, "{posts:?}");
    assert_eq!(text_of(&posts[0].1), "slept 1500 ms");
    assert_eq!(mcp.server().stats().cancelled, 0);
}

/// Shutdown: a second stop, as a second SIGTERM, ends the client at once, without waiting for
/// the command in flight or the rest of the grace period (60 s here, twice the longest wait).
fn a_second_stop_ends_the_client_at_once(d: Driver) {
    let cp = plane();
    let mcp = reference_server();
    let url = mcp.url();
    let t = Tunnel::start(d, &cp, |a| {
        a.server_urls = vec![url];
        a.grace = Some("60s".to_owned());
    });
    enqueue(
        &cp,
        vec![command(
            "req_slow",
            Some("120s"),
            call(1, "slow", json!({"ms": 60000})),
        )],
    );
    wait_for("the slow call to reach the MCP server", || {
        mcp.server()
            .stats()
            .tool_calls
            .contains_key("slow")
            .then_some(())
    });
    let log = t.stop_twice();
    assert!(log.contains("second signal: stopping now"), "{log}");
    assert!(posts_for(&cp, "req_slow").is_empty());
}

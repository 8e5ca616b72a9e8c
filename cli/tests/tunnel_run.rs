//! `mcpwire tunnel run` against a fake control plane and fake MCP servers on 127.0.0.1, written
//! in `support/`. Each test is named after the rule it holds, and runs once per driver
//! (`blocking`, and `smol` when that feature is built, as it is under `cargo test`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::process::Command;
use std::thread;
use std::time::Duration;

use serde_json::{json, Value};
use support::*;

/// Not a test: the stdio MCP server, when this binary is started by the tunnel client.
#[test]
fn stdio_server_child() {
    if std::env::var_os(STDIO_ENV).is_some() {
        stdio_server();
        std::process::exit(0);
    }
}

fn http_tunnel(cp: &ControlPlane, mcp: &McpServer) -> Tunnel {
    Tunnel::start(cp, &["--mcp.server-url", &mcp.url()])
}

fn failure(post: &Value) -> &Value {
    &post["resp_json"]["error"]["data"]["tunnel_failure"]
}

#[test]
fn http_tool_call_round_trip_mirrors_headers_and_posts_the_result() {
    each_driver(|| {
        let (cp, mcp) = (ControlPlane::start(), McpServer::start());
        let t = http_tunnel(&cp, &mcp);
        cp.enqueue(vec![command(
            "req_echo",
            Some("30s"),
            call(1, "echo", json!({"text": "hello"})),
        )]);
        let post = cp.terminal("req_echo");
        assert_eq!(post["resp_type"], "jsonrpc_response");
        assert_eq!(post["resp_code"], 200);
        assert_eq!(post["channel"], "main");
        assert_eq!(post["resp_json"]["result"]["content"][0]["text"], "hello");
        assert_eq!(post["resp_json"]["id"], 1);
        assert!(post["resp_headers"].get("X-Internal").is_none(), "{post}");
        assert_eq!(post["resp_headers"]["Mcp-Session-Id"], json!(["sess-1"]));
        // The POST carried the shard token in its header only, and the API key.
        let req = cp.with(|s| s.posts.last().cloned().unwrap());
        assert_eq!(
            req.header("X-Tunnel-Shard-Token"),
            Some("shard-secret-req_echo")
        );
        assert_eq!(
            req.header("Authorization"),
            Some(format!("Bearer {API_KEY}").as_str())
        );
        assert!(!String::from_utf8_lossy(&req.body).contains("shard-secret"));
        // The MCP request: the body verbatim, headers mirrored from it and the command's kept.
        let fwd = mcp.requests().into_iter().next().unwrap();
        assert_eq!(fwd.method, "POST");
        assert_eq!(fwd.header("Mcp-Method"), Some("tools/call"));
        assert_eq!(fwd.header("Mcp-Name"), Some("echo"));
        assert_eq!(fwd.header("MCP-Protocol-Version"), Some("2026-07-28"));
        assert_eq!(fwd.header("Mcp-Session-Id"), Some("sess-1"));
        assert_eq!(fwd.header("Authorization"), Some("Bearer user-token-abc"));
        assert_eq!(
            fwd.header("Accept"),
            Some("application/json, text/event-stream")
        );
        assert_eq!(fwd.json()["params"]["arguments"]["text"], "hello");
        let (code, log) = t.terminate();
        assert_eq!(code, Some(0), "{log}");
        assert!(
            log.lines().any(|l| l.contains("request_id=req_echo")
                && l.contains("channel=main")
                && l.contains("method=tools/call")
                && l.contains("duration_ms=")
                && l.contains("outcome=completed")),
            "{log}"
        );
    });
}

#[test]
fn sse_notifications_are_posted_before_the_terminal_and_notifications_are_acknowledged() {
    each_driver(|| {
        let (cp, mcp) = (ControlPlane::start(), McpServer::start());
        let _t = http_tunnel(&cp, &mcp);
        cp.enqueue(vec![
            command("req_prog", Some("30s"), call(2, "progress", json!({}))),
            command(
                "req_note",
                None,
                json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            ),
        ]);
        cp.terminal("req_prog");
        let posts = cp.posts_for("req_prog");
        assert_eq!(posts.len(), 2, "{posts:?}");
        assert_eq!(posts[0]["resp_type"], "jsonrpc_notify");
        assert_eq!(posts[0]["resp_json"]["method"], "notifications/progress");
        assert_eq!(posts[1]["resp_type"], "jsonrpc_response");
        assert_eq!(
            posts[1]["resp_json"]["result"]["content"][0]["text"],
            "done"
        );
        let ack = cp.terminal("req_note");
        assert_eq!(ack["resp_type"], "notify_ack");
        assert_eq!(ack["resp_code"], 202);
        assert!(ack.get("resp_json").is_none());
    });
}

#[test]
fn session_termination_sends_delete_with_the_session_id() {
    each_driver(|| {
        let (cp, mcp) = (ControlPlane::start(), McpServer::start());
        let _t = http_tunnel(&cp, &mcp);
        cp.enqueue(vec![json!({
            "request_id": "req_end", "shard_token": "shard-secret-end", "command_type": "session_termination",
            "channel": "main", "created_at": "2026-01-01T00:00:00Z", "headers": {"Mcp-Session-Id": ["sess-9"]}
        })]);
        let post = cp.terminal("req_end");
        assert_eq!(post["resp_type"], "session_termination_response");
        assert_eq!(post["resp_code"], 204);
        let del = mcp
            .requests()
            .into_iter()
            .find(|r| r.method == "DELETE")
            .unwrap();
        assert_eq!(del.header("Mcp-Session-Id"), Some("sess-9"));
    });
}

#[test]
fn a_deadline_mid_call_closes_the_mcp_connection_and_posts_nothing() {
    each_driver(|| {
        let (cp, mcp) = (ControlPlane::start(), McpServer::start());
        let t = http_tunnel(&cp, &mcp);
        cp.enqueue(vec![command(
            "req_slow",
            Some("700ms"),
            call(3, "slow", json!({})),
        )]);
        wait_for("the slow call's connection to be closed", || {
            mcp.state.lock().unwrap().slow_closed.then_some(())
        });
        // The client keeps serving, and the expired command never got a response.
        cp.enqueue(vec![command(
            "req_after",
            Some("30s"),
            call(4, "echo", json!({"text": "next"})),
        )]);
        cp.terminal("req_after");
        assert!(cp.posts_for("req_slow").is_empty());
        let log = t.log();
        assert!(
            log.contains("request_id=req_slow") && log.contains("outcome=expired"),
            "{log}"
        );
    });
}

#[test]
fn a_zero_response_timeout_drops_the_command_without_contacting_mcp() {
    each_driver(|| {
        let (cp, mcp) = (ControlPlane::start(), McpServer::start());
        let _t = http_tunnel(&cp, &mcp);
        cp.enqueue(vec![
            command(
                "req_zero",
                Some("0s"),
                call(5, "echo", json!({"text": "x"})),
            ),
            command("req_ok", Some("30s"), call(6, "echo", json!({"text": "y"}))),
        ]);
        cp.terminal("req_ok");
        assert!(cp.posts_for("req_zero").is_empty());
        assert_eq!(mcp.requests().len(), 1);
    });
}

#[test]
fn a_post_answered_503_with_retry_after_is_retried_with_the_same_body() {
    each_driver(|| {
        let (cp, mcp) = (ControlPlane::start(), McpServer::start());
        let t = http_tunnel(&cp, &mcp);
        cp.with(|s| {
            s.post_script
                .insert("req_retry".into(), [(503, Some("1")), (429, None)].into());
        });
        cp.enqueue(vec![command(
            "req_retry",
            Some("30s"),
            call(7, "echo", json!({"text": "r"})),
        )]);
        wait_for("three attempts", || {
            (cp.with(|s| {
                s.posts
                    .iter()
                    .filter(|p| p.json()["request_id"] == "req_retry")
                    .count()
            }) >= 3)
                .then_some(())
        });
        let attempts: Vec<_> = cp.with(|s| {
            s.posts
                .iter()
                .filter(|p| p.json()["request_id"] == "req_retry")
                .cloned()
                .collect()
        });
        assert_eq!(attempts.len(), 3);
        assert!(attempts.windows(2).all(|w| w[0].body == w[1].body));
        assert!(attempts
            .iter()
            .all(|p| p.header("X-Tunnel-Shard-Token") == Some("shard-secret-req_retry")));
        // The third attempt may still be in flight when the server has counted it: wait for
        // its outcome, then check the retries beside it.
        let metrics = wait_for("the completion in /metrics", || {
            let (_, m) = t.get("/metrics");
            m.contains("mcpwire_tunnel_commands_total{outcome=\"completed\"} 1")
                .then_some(m)
        });
        assert!(
            metrics.contains("mcpwire_tunnel_delivery_retries_total 2"),
            "{metrics}"
        );
    });
}

#[test]
fn a_401_poll_makes_the_client_not_ready_without_a_tight_loop() {
    each_driver(|| {
        let (cp, mcp) = (ControlPlane::start(), McpServer::start());
        cp.with(|s| s.poll_status = Some(401));
        let t = http_tunnel(&cp, &mcp);
        wait_for("a refused poll", || {
            cp.with(|s| (!s.polls.is_empty()).then_some(()))
        });
        let first_refused = std::time::Instant::now();
        let (status, body) = wait_for("readyz to say why", || {
            let (s, b) = t.get("/readyz");
            b.contains("401").then_some((s, b))
        });
        assert_eq!(status, 503, "{body}");
        thread::sleep(Duration::from_millis(1500));
        let polls = cp.with(|s| s.polls.len());
        // Counted against the time that really passed since the first refusal (a loaded
        // machine oversleeps): the first poll, then at most one a second.
        let allowed = 1 + first_refused.elapsed().as_secs() as usize;
        assert!(
            polls <= allowed.max(2),
            "{polls} polls in {:?} after a 401: a tight loop",
            first_refused.elapsed()
        );
        assert_eq!(t.get("/healthz").0, 200);
        let log = t.log();
        assert!(
            log.contains("refuses this client") && log.contains("status=401"),
            "{log}"
        );
    });
}

#[test]
fn readiness_follows_successful_polls_and_failing_forwards() {
    each_driver(|| {
        let cp = ControlPlane::start();
        // Nothing listens on this port: every forward fails to connect.
        let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/mcp", dead.local_addr().unwrap());
        drop(dead);
        let t = Tunnel::start(&cp, &["--mcp.server-url", &url]);
        wait_for("ready", || (t.get("/readyz").0 == 200).then_some(()));
        cp.enqueue(vec![command(
            "req_dead",
            Some("30s"),
            call(8, "echo", json!({"text": "z"})),
        )]);
        let post = cp.terminal("req_dead");
        assert_eq!(post["resp_code"], 502);
        assert_eq!(post["resp_json"]["error"]["code"], -32603);
        assert_eq!(post["resp_json"]["id"], 8);
        let f = failure(&post);
        assert_eq!(f["source"], "connect", "{post}");
        assert_eq!(f["transport_error_kind"], "connection_refused");
        assert_eq!(f["upstream_response_received"], false);
        let (status, body) = t.get("/readyz");
        assert_eq!(status, 503, "every forward fails, so not ready: {body}");
        assert!(body.contains("forwards"), "{body}");
    });
}

/// A redirect from the MCP server is not followed by either driver: the forwarded request (its
/// mirrored headers may carry credentials) never reaches the redirect's target, and the command
/// is answered.
#[test]
fn a_redirect_from_the_mcp_server_is_not_followed() {
    each_driver(|| {
        let (cp, mcp, elsewhere) = (
            ControlPlane::start(),
            McpServer::start(),
            McpServer::start(),
        );
        let t = http_tunnel(&cp, &mcp);
        // 302 (a client may resend it as a GET) and 307 (resent as it was).
        for (i, status) in [302, 307].into_iter().enumerate() {
            let id = format!("req_redirect_{status}");
            let args = json!({"to": elsewhere.url(), "status": status});
            cp.enqueue(vec![command(&id, Some("30s"), call(1, "redirect", args))]);
            let post = cp.terminal(&id);
            assert!(
                elsewhere.requests().is_empty(),
                "followed a {status}: {post}"
            );
            assert_eq!(mcp.requests().len(), i + 1, "{post}");
        }
        let (code, log) = t.terminate();
        assert_eq!(code, Some(0), "{log}");
    });
}

#[test]
fn an_http_500_with_a_non_json_body_is_a_target_http_failure() {
    each_driver(|| {
        let (cp, mcp) = (ControlPlane::start(), McpServer::start());
        let _t = http_tunnel(&cp, &mcp);
        cp.enqueue(vec![
            command("req_500", Some("30s"), call(9, "broken", json!({}))),
            command("req_rpc", Some("30s"), call(10, "rpc_error", json!({}))),
        ]);
        let post = cp.terminal("req_500");
        assert_eq!(post["resp_code"], 502);
        let f = failure(&post);
        assert_eq!(f["source"], "target_http", "{post}");
        assert_eq!(f["upstream_status"], 500);
        assert_eq!(f["upstream_response_received"], true);
        assert!(!post.to_string().contains("/srv/app"));
        // A target JSON-RPC error is preserved exactly, with the real status.
        let rpc = cp.terminal("req_rpc");
        assert_eq!(rpc["resp_code"], 400);
        assert_eq!(
            rpc["resp_json"],
            json!({"jsonrpc": "2.0", "id": 10, "error": {"code": -32003, "message": "capability missing", "data": {"x": 1}}})
        );
    });
}

#[test]
fn stdio_round_trip_progress_and_deadline_keep_the_child_serving() {
    each_driver(|| {
        let cp = ControlPlane::start();
        let t = Tunnel::start(&cp, &["--mcp.command", &stdio_command()]);
        cp.enqueue(vec![command(
            "s_echo",
            Some("30s"),
            call(1, "echo", json!({"text": "via stdio"})),
        )]);
        let post = cp.terminal("s_echo");
        assert_eq!(
            post["resp_json"]["result"]["content"][0]["text"],
            "via stdio"
        );
        cp.enqueue(vec![command(
            "s_prog",
            Some("30s"),
            call(2, "progress", json!({})),
        )]);
        cp.terminal("s_prog");
        let posts = cp.posts_for("s_prog");
        assert_eq!(posts[0]["resp_type"], "jsonrpc_notify", "{posts:?}");
        assert_eq!(
            posts[1]["resp_json"]["result"]["content"][0]["text"],
            "stdio done"
        );
        // A deadline retires the id; the next command is served by the same child.
        cp.enqueue(vec![command(
            "s_slow",
            Some("500ms"),
            call(3, "slow", json!({})),
        )]);
        wait_for("the stdio deadline", || {
            t.log().contains("request_id=s_slow").then_some(())
        });
        cp.enqueue(vec![command(
            "s_next",
            Some("30s"),
            call(4, "echo", json!({"text": "still here"})),
        )]);
        let next = cp.terminal("s_next");
        assert_eq!(
            next["resp_json"]["result"]["content"][0]["text"],
            "still here"
        );
        assert!(cp.posts_for("s_slow").is_empty());
        // Session termination is refused for stdio, and the child keeps serving.
        cp.enqueue(vec![json!({
            "request_id": "s_end", "shard_token": "shard-secret-e", "command_type": "session_termination",
            "channel": "main", "created_at": "2026-01-01T00:00:00Z", "headers": {"Mcp-Session-Id": ["x"]}
        })]);
        let end = cp.terminal("s_end");
        assert_eq!(end["resp_type"], "session_termination_response");
        assert_eq!(end["resp_code"], 502);
        cp.enqueue(vec![command(
            "s_last",
            Some("30s"),
            call(5, "echo", json!({"text": "ok"})),
        )]);
        cp.terminal("s_last");
        // The child's stderr reached the log, redacted.
        let log = t.log();
        assert!(log.contains("stdio server stderr"), "{log}");
        assert!(!log.contains(CHILD_SECRET), "{log}");
    });
}

#[test]
fn a_crashed_stdio_child_fails_its_command_with_transport_closed_and_restarts() {
    each_driver(|| {
        let cp = ControlPlane::start();
        let _t = Tunnel::start(&cp, &["--mcp.command", &stdio_command()]);
        cp.enqueue(vec![command(
            "c_crash",
            Some("30s"),
            call(1, "crash", json!({})),
        )]);
        let post = cp.terminal("c_crash");
        let f = failure(&post);
        assert_eq!(f["source"], "transport_closed", "{post}");
        assert_eq!(f["upstream_response_received"], false);
        cp.enqueue(vec![command(
            "c_after",
            Some("30s"),
            call(2, "echo", json!({"text": "reborn"})),
        )]);
        let after = cp.terminal("c_after");
        assert_eq!(after["resp_json"]["result"]["content"][0]["text"], "reborn");
    });
}

#[test]
fn an_initialize_deadline_restarts_the_stdio_child_and_the_next_command_is_served() {
    each_driver(|| {
        let cp = ControlPlane::start();
        let t = Tunnel::start(&cp, &["--mcp.command", &stdio_command()]);
        cp.enqueue(vec![command(
            "i_hang",
            Some("500ms"),
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"hang": true}}),
        )]);
        wait_for("the restart", || {
            t.log().contains("restarting stdio server").then_some(())
        });
        cp.enqueue(vec![command(
            "i_next",
            Some("30s"),
            call(2, "echo", json!({"text": "fresh"})),
        )]);
        let post = cp.terminal("i_next");
        assert_eq!(post["resp_json"]["result"]["content"][0]["text"], "fresh");
        assert!(cp.posts_for("i_hang").is_empty());
        // Two children started: two copies of the child's start-up line.
        let starts = t.log().matches("stdio server up").count();
        assert_eq!(starts, 2, "{}", t.log());
    });
}

#[test]
fn secrets_never_appear_in_the_logs() {
    each_driver(|| {
        let (cp, mcp) = (ControlPlane::start(), McpServer::start());
        let t = Tunnel::start(
            &cp,
            &[
                "--mcp.server-url",
                &mcp.url(),
                "--mcp.command",
                &format!("channel=tools,command={}", stdio_command()),
            ],
        );
        let mut on_tools = command("sec_2", Some("30s"), call(2, "echo", json!({"text": "t"})));
        on_tools["channel"] = json!("tools");
        cp.enqueue(vec![
            command("sec_1", Some("30s"), call(1, "echo", json!({"text": "a"}))),
            on_tools,
        ]);
        cp.terminal("sec_1");
        cp.terminal("sec_2");
        wait_for("the child's stderr", || {
            t.log().contains("stdio server stderr").then_some(())
        });
        let (code, log) = t.terminate();
        if std::env::var_os("MCPWIRE_SHOW_LOG").is_some() {
            println!("{log}");
        }
        assert_eq!(code, Some(0));
        for secret in [
            API_KEY,
            "shard-secret-sec_1",
            "shard-secret-sec_2",
            CHILD_SECRET,
            "user-token-abc",
        ] {
            assert!(
                !log.contains(secret),
                "{secret} leaked into the log:\n{log}"
            );
        }
    });
}

#[test]
fn sigterm_lets_in_flight_commands_finish_then_exits_zero() {
    each_driver(|| {
        let (cp, mcp) = (ControlPlane::start(), McpServer::start());
        let t = http_tunnel(&cp, &mcp);
        // The retried POST keeps the command in flight across the signal.
        cp.with(|s| {
            s.post_script
                .insert("req_inflight".into(), [(503, Some("1"))].into());
        });
        cp.enqueue(vec![command(
            "req_inflight",
            Some("30s"),
            call(1, "echo", json!({"text": "x"})),
        )]);
        wait_for("the first attempt", || {
            (!cp.posts_for("req_inflight").is_empty()).then_some(())
        });
        let (code, log) = t.terminate();
        assert_eq!(code, Some(0), "{log}");
        assert_eq!(cp.posts_for("req_inflight").len(), 2, "{log}");
        assert!(log.contains("outcome=completed"), "{log}");
    });
}

#[test]
fn thirty_commands_in_one_poll_all_complete_out_of_order_under_bounded_concurrency() {
    each_driver(|| {
        let (cp, mcp) = (ControlPlane::start(), McpServer::start());
        let _t = Tunnel::start(
            &cp,
            &[
                "--mcp.server-url",
                &mcp.url(),
                "--mcp.max-concurrent-requests",
                "8",
            ],
        );
        // Earlier commands sleep longer, so later ones finish first.
        let batch = (0..30)
            .map(|i| {
                command(
                    &format!("many_{i}"),
                    Some("30s"),
                    call(100 + i, "sleep", json!({"ms": (30 - i) * 10})),
                )
            })
            .collect();
        cp.enqueue(batch);
        for i in 0..30 {
            let post = cp.terminal(&format!("many_{i}"));
            assert_eq!(post["resp_json"]["id"], 100 + i, "{post}");
            assert_eq!(post["resp_json"]["result"]["slept"], (30 - i) * 10);
        }
        let order: Vec<String> = cp.with(|s| {
            s.posts
                .iter()
                .map(|p| p.json()["request_id"].as_str().unwrap_or("").to_owned())
                .collect()
        });
        let pos = |id: &str| order.iter().position(|r| r == id).unwrap();
        assert!(pos("many_7") < pos("many_0"), "{order:?}");
        let max = mcp.state.lock().unwrap().max_sleeping;
        assert!(
            (2..=8).contains(&max),
            "{max} calls ran at once with a bound of 8"
        );
        // The poll asked for at most 20 (the default in-flight bound) and all 30 were processed.
        let first = cp.with(|s| s.polls[0].target.clone());
        assert!(first.contains("limit=20"), "{first}");
    });
}

#[test]
fn a_404_on_the_response_post_ends_the_command_without_replay() {
    each_driver(|| {
        let (cp, mcp) = (ControlPlane::start(), McpServer::start());
        let t = http_tunnel(&cp, &mcp);
        cp.with(|s| {
            s.post_script
                .insert("req_gone".into(), [(404, None)].into());
        });
        cp.enqueue(vec![command(
            "req_gone",
            Some("30s"),
            call(1, "echo", json!({"text": "g"})),
        )]);
        wait_for("the outcome", || {
            t.log().contains("outcome=already_fulfilled").then_some(())
        });
        assert_eq!(cp.posts_for("req_gone").len(), 1);
        assert_eq!(mcp.requests().len(), 1);
    });
}

fn run_bad(args: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_mcpwire"));
    c.args(["tunnel", "run"]).args(args).env_clear();
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn bad_settings_stop_start_up_with_one_line_naming_the_flag() {
    let base = [
        "--control-plane.tunnel-id",
        "t",
        "--control-plane.api-key",
        "sk-literal-secret",
        "--mcp.server-url",
        "http://127.0.0.1:9/mcp",
    ];
    type Case<'a> = (Vec<&'a str>, Vec<(&'a str, &'a str)>, &'a str);
    let cases: Vec<Case> = vec![
        (
            vec!["--control-plane.max-inflight", "many"],
            vec![],
            "--control-plane.max-inflight",
        ),
        (vec!["--log.format", "xml"], vec![], "text or json"),
        (vec![], vec![("LOG_LEVEL", "loud")], "(from LOG_LEVEL)"),
        (vec!["--mcp.server-url", "ftp://x"], vec![], "http://"),
        (
            vec!["--health.listen-addr", "nowhere"],
            vec![],
            "--health.listen-addr",
        ),
        (vec!["--driver", "async"], vec![], "blocking or smol"),
        (
            vec!["--control-plane.poll-timeout", "forever"],
            vec![],
            "duration",
        ),
    ];
    for (extra, env, needle) in cases {
        let mut args: Vec<&str> = base.to_vec();
        args.extend(extra.iter());
        let (code, err) = run_bad(&args, &env);
        assert_eq!(code, 2, "{extra:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{extra:?}: {err}");
        assert!(err.contains(needle), "{extra:?}: {err}");
        assert!(!err.contains("sk-literal-secret"), "{err}");
    }
    let (code, err) = run_bad(&["--control-plane.tunnel-id", "t"], &[]);
    assert_eq!(code, 2);
    assert!(err.contains("--control-plane.api-key"), "{err}");
}

//! Transcript tests: a scripted control plane and MCP server drive `tunnel::Engine` through whole
//! command lifecycles with simulated time. Each test is named after the rule it holds.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use mcpwire_core::backoff::Backoff;
use mcpwire_core::http::{Headers, Request, ResponseHead};
use mcpwire_core::tunnel::engine::{
    Config, Event, Forward, ForwardKind, Output, PostAnswer, Secret, Stage, TimeoutReason,
};
use mcpwire_core::tunnel::failure::{FailureSource, TransportErrorKind};
use mcpwire_core::tunnel::server_info::{ChannelBinding, ChannelDeclaration, ServerInfo};
use mcpwire_core::tunnel::{CommandId, Engine, NotReady, PollId, PostId, Readiness, TunnelFailure};
use serde_json::{json, Value};

const WALL: Duration = Duration::from_secs(1_800_000_000);

struct Harness {
    engine: Engine,
    now: Instant,
    out: Vec<Output>,
}

fn config() -> Config {
    let mut c = Config::new(
        "https://control.test",
        "tunnel_0123",
        Secret::new("sk-test-key"),
        "instance-1",
    );
    c.client_name = "mcpwire-test".into();
    c.client_version = "0.0.0-test".into();
    c.jitter_seed = 7;
    c.poll_backoff = Backoff {
        initial: Duration::from_millis(100),
        max: Duration::from_secs(10),
        multiplier: 2,
    };
    c.post_backoff = Backoff {
        initial: Duration::from_millis(100),
        max: Duration::from_secs(2),
        multiplier: 2,
    };
    c
}

impl Harness {
    fn new(config: Config) -> Self {
        let now = Instant::now();
        let mut engine = Engine::new(config, now).unwrap();
        engine.handle_timeout(now);
        let mut h = Harness {
            engine,
            now,
            out: Vec::new(),
        };
        h.drain();
        h
    }

    fn wall(&self) -> SystemTime {
        UNIX_EPOCH + WALL
    }

    fn drain(&mut self) {
        while let Some(o) = self.engine.poll_output() {
            self.out.push(o);
        }
    }

    fn advance(&mut self, d: Duration) {
        self.now += d;
        self.engine.handle_timeout(self.now);
        self.drain();
    }

    /// Runs timers until `at` (inclusive), firing each due timeout in turn.
    fn run_until(&mut self, at: Instant) {
        while let Some(t) = self.engine.poll_timeout() {
            if t.at > at {
                break;
            }
            self.now = self.now.max(t.at);
            self.engine.handle_timeout(self.now);
            self.drain();
        }
        self.now = self.now.max(at);
        self.engine.handle_timeout(self.now);
        self.drain();
    }

    fn take_poll(&mut self) -> (PollId, Request) {
        let i = self
            .out
            .iter()
            .position(|o| matches!(o, Output::Poll { .. }))
            .expect("a poll");
        match self.out.remove(i) {
            Output::Poll { id, request } => (id, request),
            _ => unreachable!(),
        }
    }

    fn has_poll(&self) -> bool {
        self.out.iter().any(|o| matches!(o, Output::Poll { .. }))
    }

    fn take_forwards(&mut self) -> Vec<Forward> {
        let mut v = Vec::new();
        self.out.retain(|o| match o {
            Output::Forward(f) => {
                v.push(f.clone());
                false
            }
            _ => true,
        });
        v
    }

    fn take_posts(&mut self) -> Vec<(PostId, CommandId, Request)> {
        let mut v = Vec::new();
        let mut rest = Vec::new();
        for o in self.out.drain(..) {
            match o {
                Output::Post {
                    id, cmd, request, ..
                } => v.push((id, cmd, request)),
                other => rest.push(other),
            }
        }
        self.out = rest;
        v
    }

    fn events(&mut self) -> Vec<Event> {
        let mut v = Vec::new();
        self.out.retain(|o| match o {
            Output::Event(e) => {
                v.push(e.clone());
                false
            }
            _ => true,
        });
        v
    }

    fn cancels(&mut self) -> (Vec<CommandId>, Vec<PostId>) {
        let (mut f, mut p) = (Vec::new(), Vec::new());
        self.out.retain(|o| match o {
            Output::CancelForward { cmd } => {
                f.push(*cmd);
                false
            }
            Output::CancelPost { id } => {
                p.push(*id);
                false
            }
            _ => true,
        });
        (f, p)
    }

    fn deliver_poll(&mut self, id: PollId, status: u16, body: &Value) {
        let head = ResponseHead {
            status,
            headers: Headers::new(),
        };
        let bytes = if status == 204 {
            Vec::new()
        } else {
            serde_json::to_vec(body).unwrap()
        };
        self.engine
            .handle_poll_response(self.now, self.now, self.wall(), id, &head, &bytes)
            .unwrap();
        self.drain();
    }

    fn poll_with(&mut self, commands: Value) {
        let (id, _) = self.take_poll();
        self.deliver_poll(id, 200, &json!({ "commands": commands }));
    }

    fn reply_json(&mut self, cmd: CommandId, status: u16, body: &str) {
        let mut headers = Headers::new();
        headers.append("Content-Type", "application/json").unwrap();
        self.engine
            .handle_forward_head(self.now, cmd, ResponseHead { status, headers })
            .unwrap();
        self.engine
            .handle_forward_body(self.now, cmd, body.as_bytes())
            .unwrap();
        self.engine.handle_forward_end(self.now, cmd).unwrap();
        self.drain();
    }

    /// The forward's response head: `status` with `Content-Type: content_type`.
    fn head(&mut self, cmd: CommandId, status: u16, content_type: &str) {
        let mut headers = Headers::new();
        headers.append("Content-Type", content_type).unwrap();
        self.engine
            .handle_forward_head(self.now, cmd, ResponseHead { status, headers })
            .unwrap();
        self.drain();
    }

    fn post_status(&mut self, id: PostId, status: u16) {
        self.post_status_with(id, status, Headers::new());
    }

    fn post_status_with(&mut self, id: PostId, status: u16, headers: Headers) {
        let wall = self.wall();
        self.engine
            .handle_post_response(self.now, wall, id, &ResponseHead { status, headers })
            .unwrap();
        self.drain();
    }
}

fn cmd_json(request_id: &str, rpc_id: Value, method: &str) -> Value {
    json!({
        "request_id": request_id,
        "shard_token": format!("shard-{request_id}"),
        "command_type": "jsonrpc",
        "channel": "main",
        "created_at": "2026-01-01T00:00:00Z",
        "headers": {"Mcp-Session-Id": ["s-1"]},
        "jsonrpc": {"jsonrpc": "2.0", "id": rpc_id, "method": method, "params": {}}
    })
}

fn with_timeout(mut c: Value, t: &str) -> Value {
    c["response_timeout"] = json!(t);
    c
}

fn body(req: &Request) -> Value {
    serde_json::from_slice(&req.body).unwrap()
}

fn render(req: &Request) -> String {
    let mut s = format!("{} {}\n", req.method.as_str(), req.url);
    for (n, v) in req.headers.iter() {
        s.push_str(&format!("{n}: {v}\n"));
    }
    if !req.body.is_empty() {
        s.push('\n');
        s.push_str(std::str::from_utf8(&req.body).unwrap());
        s.push('\n');
    }
    s
}

// ---------------------------------------------------------------------------------------------

#[test]
fn poll_request_carries_auth_identity_wire_version_and_server_info() {
    let mut c = config();
    c.server_info = Some(
        ServerInfo::new(vec![ChannelDeclaration::for_binding(
            "main",
            ChannelBinding::RemoteHttp,
        )])
        .unwrap(),
    );
    let mut h = Harness::new(c);
    let (_, req) = h.take_poll();
    assert_eq!(req.headers.get("authorization"), Some("Bearer sk-test-key"));
    assert_eq!(
        req.headers.get("X-Tunnel-Client-Wire-Protocol-Version"),
        Some("2026-08-25")
    );
    assert_eq!(
        req.headers.get("X-Tunnel-MCP-Server-Info"),
        Some(r#"{"version":1,"channels":[{"name":"main"}]}"#)
    );
    insta::assert_snapshot!("poll_request", render(&req));
}

#[test]
fn extra_headers_reach_every_control_plane_request_and_reserved_names_are_refused() {
    let mut c = config();
    c.extra_headers = vec![
        ("OpenAI-Organization".into(), Secret::new("org-1")),
        ("X-Corp-Route".into(), Secret::new("blue")),
    ];
    let mut h = Harness::new(c);
    let (id, poll) = h.take_poll();
    assert_eq!(poll.headers.get("OpenAI-Organization"), Some("org-1"));
    assert_eq!(poll.headers.get("x-corp-route"), Some("blue"));
    h.deliver_poll(
        id,
        200,
        &json!({"commands": [cmd_json("a", json!(1), "tools/call")]}),
    );
    let f = h.take_forwards().remove(0);
    // The forward to the MCP server does not carry the control plane's headers.
    assert!(f.headers.get("X-Corp-Route").is_none());
    h.reply_json(f.cmd, 200, r#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
    let (_, _, post) = h.take_posts().remove(0);
    assert_eq!(post.headers.get("X-Corp-Route"), Some("blue"));
    // The Debug form of the configuration never shows a value.
    let mut c = config();
    c.extra_headers = vec![("X-Token".into(), Secret::new("hush-123"))];
    assert!(!format!("{c:?}").contains("hush-123"));
    for reserved in ["Authorization", "x-tunnel-client-instance-id", "Accept"] {
        let mut c = config();
        c.extra_headers = vec![(reserved.into(), Secret::new("x"))];
        assert!(Engine::new(c, Instant::now()).is_err(), "{reserved}");
    }
}

#[test]
fn server_info_changes_reach_new_requests_but_not_retries() {
    let mut h = Harness::new(config());
    let (id, first) = h.take_poll();
    assert!(first.headers.get("X-Tunnel-MCP-Server-Info").is_none());
    h.deliver_poll(
        id,
        200,
        &json!({"commands": [cmd_json("a", json!(1), "tools/call")]}),
    );
    let f = h.take_forwards().remove(0);
    h.reply_json(f.cmd, 200, r#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
    let (p1, _, before) = h.take_posts().remove(0);
    let info = ServerInfo::new(vec![
        ChannelDeclaration::for_binding("main", ChannelBinding::RemoteHttp),
        ChannelDeclaration::for_binding("harpoon", ChannelBinding::InMemoryStateless),
    ])
    .unwrap();
    h.engine.set_server_info(Some(info)).unwrap();
    h.post_status(p1, 502);
    h.run_until(h.now + Duration::from_secs(5));
    let (_, _, retry) = h.take_posts().remove(0);
    assert_eq!(before, retry, "a retry must keep its exact headers");
    // The poll in flight was built before the change; the one after it carries the new value.
    let (in_flight, old) = h.take_poll();
    assert!(old.headers.get("X-Tunnel-MCP-Server-Info").is_none());
    h.deliver_poll(in_flight, 204, &Value::Null);
    let (_, next_poll) = h.take_poll();
    assert_eq!(
        next_poll.headers.get("X-Tunnel-MCP-Server-Info"),
        Some(
            r#"{"version":2,"channels":[{"name":"main"},{"name":"harpoon","stateless":true,"proc_affinity":true}]}"#
        )
    );
}

#[test]
fn poll_subscriptions_are_sorted_repeated_channel_params() {
    let mut c = config();
    c.poll_channels = Some(vec!["main".into(), "harpoon".into(), "beta".into()]);
    let mut h = Harness::new(c);
    let (_, req) = h.take_poll();
    assert_eq!(
        req.url,
        "https://control.test/v1/tunnels/tunnel_0123/poll?channel=beta&channel=harpoon&channel=main&limit=25&timeout_ms=15000"
    );
}

#[test]
fn no_channel_params_without_an_allowlist() {
    let mut h = Harness::new(config());
    let (_, req) = h.take_poll();
    assert!(!req.url.contains("channel="), "{}", req.url);
}

#[test]
fn never_more_than_one_poll_in_flight() {
    let mut h = Harness::new(config());
    let (_id, _) = h.take_poll();
    h.advance(Duration::from_secs(60));
    assert!(
        !h.has_poll(),
        "a second poll went out while one is in flight"
    );
}

#[test]
fn limit_is_free_slots_capped_at_25_and_no_poll_when_full() {
    let mut c = config();
    c.max_in_flight = 3;
    let mut h = Harness::new(c);
    let (id, req) = h.take_poll();
    assert!(req.url.contains("limit=3&"), "{}", req.url);
    h.deliver_poll(
        id,
        200,
        &json!({"commands": [cmd_json("a", json!(1), "tools/list"), cmd_json("b", json!(2), "tools/list")]}),
    );
    let (id, req) = h.take_poll();
    assert!(req.url.contains("limit=1&"), "{}", req.url);
    h.deliver_poll(
        id,
        200,
        &json!({"commands": [cmd_json("c", json!(3), "tools/list")]}),
    );
    assert!(!h.has_poll(), "polled with no free slot");
    // One command finishes: a slot frees and the next poll goes out.
    let fwds = h.take_forwards();
    assert_eq!(fwds.len(), 3);
    h.reply_json(fwds[0].cmd, 200, r#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
    let (post, _, _) = h.take_posts().remove(0);
    h.post_status(post, 200);
    let (_, req) = h.take_poll();
    assert!(req.url.contains("limit=1&"), "{}", req.url);
}

#[test]
fn poll_jsonrpc_forward_notify_then_terminal_over_sse() {
    let mut h = Harness::new(config());
    h.poll_with(json!([with_timeout(
        cmd_json("req_1", json!("rpc-1"), "tools/call"),
        "30s"
    )]));
    let fwd = h.take_forwards().remove(0);
    assert_eq!(fwd.request_id, "req_1");
    assert_eq!(fwd.headers.get("mcp-session-id"), Some("s-1"));
    match &fwd.kind {
        ForwardKind::JsonRpc {
            payload,
            id,
            method,
        } => {
            assert_eq!(
                payload.get(),
                r#"{"id":"rpc-1","jsonrpc":"2.0","method":"tools/call","params":{}}"#
            );
            assert_eq!(method.as_deref(), Some("tools/call"));
            assert!(id.is_some());
        }
        other => panic!("{other:?}"),
    }
    let mut headers = Headers::new();
    headers.append("Content-Type", "text/event-stream").unwrap();
    headers.append("Mcp-Session-Id", "s-1").unwrap();
    headers.append("X-Internal", "secret-upstream").unwrap();
    h.engine
        .handle_forward_head(
            h.now,
            fwd.cmd,
            ResponseHead {
                status: 200,
                headers,
            },
        )
        .unwrap();
    // A priming event, a progress notification split across chunks, then the response.
    let stream = "id: p0\ndata:\n\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":0.5}}\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"rpc-1\",\"result\":{\"content\":[]}}\n\n";
    let (a, b) = stream.split_at(40);
    h.engine
        .handle_forward_body(h.now, fwd.cmd, a.as_bytes())
        .unwrap();
    h.engine
        .handle_forward_body(h.now, fwd.cmd, b.as_bytes())
        .unwrap();
    h.drain();
    // The notification goes first; the terminal waits for it (one POST per command at a time).
    let posts = h.take_posts();
    assert_eq!(posts.len(), 1);
    let notify = &posts[0];
    assert_eq!(
        notify.2.headers.get("X-Tunnel-Shard-Token"),
        Some("shard-req_1")
    );
    let nb = body(&notify.2);
    assert_eq!(nb["resp_type"], "jsonrpc_notify");
    assert_eq!(nb["resp_json"]["method"], "notifications/progress");
    assert!(
        nb.get("shard_token").is_none(),
        "shard token leaked into the body"
    );
    // The rest of the stream is not needed once the terminal response arrived.
    let (cancelled, _) = h.cancels();
    assert_eq!(cancelled, vec![fwd.cmd]);
    h.post_status(notify.0, 200);
    let terminal = h.take_posts().remove(0);
    let tb = body(&terminal.2);
    insta::assert_snapshot!("terminal_response_post", render(&terminal.2));
    assert_eq!(tb["resp_type"], "jsonrpc_response");
    assert_eq!(tb["resp_json"]["id"], "rpc-1");
    // resp_json holds one JSON message, so its Content-Type is JSON, not the stream's.
    assert_eq!(
        tb["resp_headers"],
        json!({"Content-Type": ["application/json"], "Mcp-Session-Id": ["s-1"]})
    );
    h.post_status(terminal.0, 200);
    let events = h.events();
    assert!(events.iter().any(|e| matches!(e, Event::Completed { request_id, resp_code: 200, .. } if request_id == "req_1")));
    assert_eq!(h.engine.health().in_flight, 0);
}

#[test]
fn forwarded_payload_and_target_reply_are_byte_exact() {
    let mut h = Harness::new(config());
    let (id, _) = h.take_poll();
    let payload = r#"{ "params" : {"b":1,"a":[1.50,"\u00e9"]}, "id" : 18446744073709, "method":"tools/call","jsonrpc":"2.0" , "x-extra": null }"#;
    let poll = format!(
        r#"{{"commands":[{{"request_id":"r","shard_token":"s","created_at":"x","future":1,"jsonrpc":{payload}}}]}}"#
    );
    let head = ResponseHead {
        status: 200,
        headers: Headers::new(),
    };
    let wall = h.wall();
    h.engine
        .handle_poll_response(h.now, h.now, wall, id, &head, poll.as_bytes())
        .unwrap();
    h.drain();
    let f = h.take_forwards().remove(0);
    let ForwardKind::JsonRpc { payload: got, .. } = &f.kind else {
        panic!()
    };
    assert_eq!(got.get(), payload, "the forwarded payload was re-encoded");
    let reply = r#"{"result":{"z":1,"a":2.50},"jsonrpc":"2.0","id":18446744073709}"#;
    h.reply_json(f.cmd, 200, reply);
    let (_, _, req) = h.take_posts().remove(0);
    let text = String::from_utf8(req.body).unwrap();
    assert!(text.contains(&format!(r#""resp_json":{reply}"#)), "{text}");
}

#[test]
fn zero_response_timeout_is_dropped_without_forward_or_response() {
    let mut h = Harness::new(config());
    h.poll_with(json!([with_timeout(
        cmd_json("late", json!(1), "tools/list"),
        "0s"
    )]));
    assert!(h.take_forwards().is_empty());
    assert!(h.take_posts().is_empty());
    let events = h.events();
    assert!(events.contains(&Event::Expired {
        request_id: "late".into(),
        stage: Stage::BeforeForward
    }));
}

#[test]
fn invalid_or_null_response_timeout_fails_open_without_deadline() {
    let mut h = Harness::new(config());
    let mut c1 = cmd_json("a", json!(1), "tools/list");
    c1["response_timeout"] = json!(30);
    let mut c2 = cmd_json("b", json!(2), "tools/list");
    c2["response_timeout"] = Value::Null;
    let c3 = with_timeout(cmd_json("c", json!(3), "tools/list"), "1m30s");
    h.poll_with(json!([c1, c2, c3]));
    let fwds = h.take_forwards();
    assert_eq!(fwds.len(), 3);
    assert!(fwds.iter().all(|f| f.deadline.is_none()));
}

#[test]
fn deadline_is_receipt_instant_plus_timeout_not_created_at() {
    let mut h = Harness::new(config());
    let receipt = h.now;
    let mut c = with_timeout(cmd_json("a", json!(1), "tools/list"), "4500ms");
    c["created_at"] = json!("1999-01-01T00:00:00Z");
    h.poll_with(json!([c]));
    let fwd = h.take_forwards().remove(0);
    assert_eq!(fwd.deadline, Some(receipt + Duration::from_millis(4500)));
    assert_eq!(
        h.engine.poll_timeout().map(|t| (t.at, t.reason)),
        Some((
            receipt + Duration::from_millis(4500),
            TimeoutReason::Deadline { cmd: fwd.cmd }
        ))
    );
}

#[test]
fn deadline_during_forward_cancels_it_and_posts_nothing() {
    let mut h = Harness::new(config());
    h.poll_with(json!([with_timeout(
        cmd_json("a", json!(1), "tools/call"),
        "2s"
    )]));
    let fwd = h.take_forwards().remove(0);
    h.advance(Duration::from_secs(2));
    let (cancelled, _) = h.cancels();
    assert_eq!(cancelled, vec![fwd.cmd]);
    assert!(h.events().contains(&Event::Expired {
        request_id: "a".into(),
        stage: Stage::DuringForward
    }));
    // A late reply is dropped (a race, not an error) and never produces a response.
    assert!(h
        .engine
        .handle_forward_head(
            h.now,
            fwd.cmd,
            ResponseHead {
                status: 200,
                headers: Headers::new()
            }
        )
        .is_ok());
    h.drain();
    assert!(h.take_posts().is_empty(), "a late error was synthesized");
}

#[test]
fn deadline_during_delivery_cancels_the_post() {
    let mut h = Harness::new(config());
    h.poll_with(json!([with_timeout(
        cmd_json("a", json!(1), "tools/call"),
        "2s"
    )]));
    let fwd = h.take_forwards().remove(0);
    h.reply_json(fwd.cmd, 200, r#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
    let (post, _, _) = h.take_posts().remove(0);
    h.advance(Duration::from_secs(2));
    let (_, cancelled_posts) = h.cancels();
    assert_eq!(cancelled_posts, vec![post]);
    assert!(h.events().contains(&Event::Expired {
        request_id: "a".into(),
        stage: Stage::DuringDelivery
    }));
    assert!(h.take_posts().is_empty());
}

#[test]
fn expiry_while_queued_for_a_forward_slot_drops_without_forward() {
    let mut c = config();
    c.max_concurrent_forwards = 1;
    let mut h = Harness::new(c);
    h.poll_with(json!([
        cmd_json("first", json!(1), "tools/call"),
        with_timeout(cmd_json("queued", json!(2), "tools/call"), "1s")
    ]));
    let fwds = h.take_forwards();
    assert_eq!(fwds.len(), 1, "concurrency bound not held");
    h.advance(Duration::from_secs(1));
    assert!(h.events().contains(&Event::Expired {
        request_id: "queued".into(),
        stage: Stage::BeforeForward
    }));
    h.reply_json(fwds[0].cmd, 200, r#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
    assert!(
        h.take_forwards().is_empty(),
        "an expired command was forwarded"
    );
}

#[test]
fn thirty_commands_in_a_25_limit_poll_are_all_processed() {
    let mut c = config();
    c.max_in_flight = 64;
    c.max_concurrent_forwards = 8;
    let mut h = Harness::new(c);
    let (first, req) = h.take_poll();
    assert!(req.url.contains("limit=25&"));
    let cmds: Vec<Value> = (0..30)
        .map(|i| cmd_json(&format!("r{i}"), json!(i), "tools/list"))
        .collect();
    h.deliver_poll(first, 200, &json!({ "commands": cmds }));
    let mut answered = std::collections::BTreeSet::new();
    for _ in 0..10 {
        for f in h.take_forwards() {
            let ForwardKind::JsonRpc { id: Some(rpc), .. } = &f.kind else {
                panic!()
            };
            h.reply_json(
                f.cmd,
                200,
                &format!(
                    r#"{{"jsonrpc":"2.0","id":{rpc},"result":{{}}}}"#,
                    rpc = serde_json::to_string(rpc).unwrap()
                ),
            );
        }
        for (post, _, req) in h.take_posts() {
            answered.insert(body(&req)["request_id"].as_str().unwrap().to_owned());
            h.post_status(post, 200);
        }
    }
    assert_eq!(answered.len(), 30);
}

#[test]
fn unknown_command_type_is_logged_and_skipped_not_forwarded() {
    let mut h = Harness::new(config());
    h.poll_with(json!([
        {"request_id": "x", "shard_token": "s", "command_type": "telepathy", "created_at": "2026-01-01T00:00:00Z",
         "jsonrpc": {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}},
        cmd_json("y", json!(2), "tools/list")
    ]));
    let fwds = h.take_forwards();
    assert_eq!(fwds.len(), 1);
    assert_eq!(fwds[0].request_id, "y");
    assert!(h.events().contains(&Event::UnknownCommandType {
        request_id: "x".into(),
        command_type: "telepathy".into()
    }));
    assert!(h.take_posts().is_empty());
}

#[test]
fn valid_target_jsonrpc_error_is_preserved_with_real_status() {
    let mut h = Harness::new(config());
    h.poll_with(json!([cmd_json("a", json!(9), "tools/call")]));
    let fwd = h.take_forwards().remove(0);
    let err = r#"{"jsonrpc":"2.0","id":9,"error":{"code":-32003,"message":"needs capability","data":{"x":[1,2]}}}"#;
    h.reply_json(fwd.cmd, 403, err);
    let (_, _, req) = h.take_posts().remove(0);
    let b = body(&req);
    assert_eq!(b["resp_code"], 403);
    assert_eq!(b["resp_json"], serde_json::from_str::<Value>(err).unwrap());
}

#[test]
fn non_jsonrpc_error_status_synthesizes_target_http_failure() {
    let mut h = Harness::new(config());
    h.poll_with(json!([cmd_json("a", json!(9), "tools/call")]));
    let fwd = h.take_forwards().remove(0);
    h.reply_json(
        fwd.cmd,
        500,
        "<html>oops at https://internal.example/secret</html>",
    );
    let (_, _, req) = h.take_posts().remove(0);
    let b = body(&req);
    assert_eq!(b["resp_code"], 502);
    assert_eq!(b["resp_json"]["id"], 9);
    assert_eq!(b["resp_json"]["error"]["code"], -32603);
    assert_eq!(b["resp_json"]["error"]["message"], "Bad Gateway");
    let tf = &b["resp_json"]["error"]["data"]["tunnel_failure"];
    assert_eq!(tf["source"], "target_http");
    assert_eq!(tf["upstream_status"], 500);
    assert_eq!(tf["upstream_response_received"], true);
    assert!(
        !String::from_utf8_lossy(&req.body).contains("internal.example"),
        "raw body leaked"
    );
}

#[test]
fn malformed_json_reply_synthesizes_protocol_failure() {
    let mut h = Harness::new(config());
    h.poll_with(json!([cmd_json("a", json!(9), "tools/call")]));
    let fwd = h.take_forwards().remove(0);
    h.reply_json(fwd.cmd, 200, "{not json");
    let b = body(&h.take_posts().remove(0).2);
    let tf = &b["resp_json"]["error"]["data"]["tunnel_failure"];
    assert_eq!(tf["source"], "protocol");
    assert_eq!(tf["transport_error_kind"], "malformed_json");
}

#[test]
fn transport_failure_synthesizes_provenance_without_upstream_status() {
    let mut h = Harness::new(config());
    h.poll_with(json!([cmd_json("a", json!("q"), "tools/call")]));
    let fwd = h.take_forwards().remove(0);
    h.engine
        .handle_forward_failed(
            h.now,
            fwd.cmd,
            TunnelFailure::before_response(
                FailureSource::TransportClosed,
                Some(TransportErrorKind::ClosedPipe),
            ),
        )
        .unwrap();
    h.drain();
    let b = body(&h.take_posts().remove(0).2);
    assert_eq!(b["resp_code"], 502);
    let tf = &b["resp_json"]["error"]["data"]["tunnel_failure"];
    assert_eq!(tf["source"], "transport_closed");
    assert_eq!(tf["upstream_response_received"], false);
    assert!(tf.get("upstream_status").is_none());
}

#[test]
fn notification_command_gets_notify_ack() {
    let mut h = Harness::new(config());
    let c = json!({"request_id": "n", "shard_token": "s", "command_type": "jsonrpc", "created_at": "x",
        "jsonrpc": {"jsonrpc": "2.0", "method": "notifications/initialized"}});
    h.poll_with(json!([c]));
    let fwd = h.take_forwards().remove(0);
    h.reply_json(fwd.cmd, 202, "");
    let b = body(&h.take_posts().remove(0).2);
    assert_eq!(b["resp_type"], "notify_ack");
    assert_eq!(b["resp_code"], 202);
    assert!(b.get("resp_json").is_none());
}

#[test]
fn session_termination_posts_204_session_termination_response() {
    let mut h = Harness::new(config());
    let c = json!({"request_id": "t", "shard_token": "s", "command_type": "session_termination",
        "created_at": "x", "headers": {"Mcp-Session-Id": ["sess"]}});
    h.poll_with(json!([c]));
    let fwd = h.take_forwards().remove(0);
    assert_eq!(fwd.kind, ForwardKind::SessionTermination);
    assert_eq!(fwd.headers.get("Mcp-Session-Id"), Some("sess"));
    h.reply_json(fwd.cmd, 200, "");
    let b = body(&h.take_posts().remove(0).2);
    assert_eq!(b["resp_type"], "session_termination_response");
    assert_eq!(b["resp_code"], 204);
    assert!(b.get("resp_json").is_none());
}

#[test]
fn terminal_post_retries_with_the_exact_same_request_and_honors_retry_after() {
    let mut h = Harness::new(config());
    h.poll_with(json!([cmd_json("a", json!(1), "tools/call")]));
    let fwd = h.take_forwards().remove(0);
    h.reply_json(fwd.cmd, 200, r#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
    let (p1, _, first) = h.take_posts().remove(0);
    let mut ra = Headers::new();
    ra.append("Retry-After", "3").unwrap();
    let sent_at = h.now;
    h.post_status_with(p1, 503, ra);
    assert!(h.take_posts().is_empty(), "retried at once");
    let t = h.engine.poll_timeout().unwrap();
    assert!(
        t.at >= sent_at + Duration::from_secs(3),
        "Retry-After is a minimum delay"
    );
    h.advance(Duration::from_millis(2900));
    assert!(h.take_posts().is_empty(), "retried before Retry-After");
    h.run_until(t.at);
    let (p2, _, second) = h.take_posts().remove(0);
    assert_eq!(first, second, "a retry changed the body or headers");
    h.post_status(p2, 200);
    assert!(h
        .events()
        .iter()
        .any(|e| matches!(e, Event::Completed { .. })));
}

#[test]
fn terminal_post_retry_statuses_and_bound() {
    for (status, retried) in [
        (408, true),
        (429, true),
        (502, true),
        (503, true),
        (504, true),
        (500, false),
        (400, false),
        (409, false),
    ] {
        let mut c = config();
        c.max_post_attempts = 3;
        let mut h = Harness::new(c);
        h.poll_with(json!([cmd_json("a", json!(1), "tools/call")]));
        let fwd = h.take_forwards().remove(0);
        h.reply_json(fwd.cmd, 200, r#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
        let mut attempts = 0;
        loop {
            let posts = h.take_posts();
            if posts.is_empty() {
                break;
            }
            attempts += 1;
            h.post_status(posts[0].0, status);
            h.run_until(h.now + Duration::from_secs(30));
        }
        assert_eq!(attempts, if retried { 3 } else { 1 }, "status {status}");
        assert!(h
            .events()
            .iter()
            .any(|e| matches!(e, Event::DeliveryFailed { status: Some(s), .. } if *s == status)));
        assert_eq!(h.engine.health().in_flight, 0);
    }
}

#[test]
fn post_retry_never_waits_past_the_deadline() {
    let mut h = Harness::new(config());
    h.poll_with(json!([with_timeout(
        cmd_json("a", json!(1), "tools/call"),
        "5s"
    )]));
    let fwd = h.take_forwards().remove(0);
    h.reply_json(fwd.cmd, 200, r#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
    let (p, _, _) = h.take_posts().remove(0);
    let mut ra = Headers::new();
    ra.append("Retry-After", "30").unwrap();
    h.post_status_with(p, 429, ra);
    h.run_until(h.now + Duration::from_secs(60));
    assert!(h.take_posts().is_empty(), "retried past the deadline");
    assert!(h
        .events()
        .iter()
        .any(|e| matches!(e, Event::DeliveryFailed { .. })));
}

#[test]
fn response_post_404_is_terminal_without_replay() {
    let mut h = Harness::new(config());
    h.poll_with(json!([cmd_json("a", json!(1), "tools/call")]));
    let fwd = h.take_forwards().remove(0);
    h.reply_json(fwd.cmd, 200, r#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
    let (p, _, _) = h.take_posts().remove(0);
    h.post_status(p, 404);
    h.run_until(h.now + Duration::from_secs(60));
    assert!(h.take_posts().is_empty());
    assert!(
        h.take_forwards().is_empty(),
        "the MCP operation was replayed"
    );
    assert!(h.events().contains(&Event::AlreadyFulfilled {
        request_id: "a".into()
    }));
    assert_eq!(h.engine.health().in_flight, 0);
}

/// `protocol.md`, "Errors, retries, and concurrency": a response POST's `2xx` is taken, its `404`
/// ends the command as already fulfilled, and every other answer is a failed attempt (what the
/// engine retries or gives up on, and what a driver counts before a retry).
#[test]
fn a_response_post_answer_is_taken_on_2xx_fulfilled_on_404_and_failed_otherwise() {
    for status in [200, 201, 202, 204, 299] {
        assert_eq!(PostAnswer::of(status), PostAnswer::Accepted, "{status}");
    }
    assert_eq!(PostAnswer::of(404), PostAnswer::AlreadyFulfilled);
    for status in [
        100, 199, 300, 304, 400, 401, 403, 408, 410, 413, 429, 500, 502, 503, 504,
    ] {
        assert_eq!(PostAnswer::of(status), PostAnswer::Failed, "{status}");
    }
}

#[test]
fn notification_post_failure_skips_later_notifications_but_delivers_terminal() {
    let mut h = Harness::new(config());
    h.poll_with(json!([cmd_json("a", json!(1), "tools/call")]));
    let fwd = h.take_forwards().remove(0);
    let progress = r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}"#;
    h.engine
        .handle_forward_message(h.now, fwd.cmd, progress)
        .unwrap();
    h.engine
        .handle_forward_message(h.now, fwd.cmd, progress)
        .unwrap();
    h.engine
        .handle_forward_message(h.now, fwd.cmd, r#"{"jsonrpc":"2.0","id":1,"result":{}}"#)
        .unwrap();
    h.drain();
    let (p1, _, r1) = h.take_posts().remove(0);
    assert_eq!(body(&r1)["resp_type"], "jsonrpc_notify");
    // Ambiguous failure after the request was written: not replayed.
    h.engine.handle_post_failed(h.now, p1, true).unwrap();
    h.drain();
    let (p2, _, r2) = h.take_posts().remove(0);
    assert_eq!(
        body(&r2)["resp_type"],
        "jsonrpc_response",
        "a later notification was not skipped"
    );
    h.post_status(p2, 200);
    let ev = h.events();
    assert!(ev
        .iter()
        .any(|e| matches!(e, Event::NotificationDropped { .. })));
    assert!(ev.iter().any(|e| matches!(e, Event::Completed { .. })));
}

#[test]
fn notification_post_retries_only_on_429_or_failure_before_write() {
    let mut h = Harness::new(config());
    h.poll_with(json!([cmd_json("a", json!(1), "tools/call")]));
    let fwd = h.take_forwards().remove(0);
    let progress = r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}"#;
    h.engine
        .handle_forward_message(h.now, fwd.cmd, progress)
        .unwrap();
    h.drain();
    let (p1, _, r1) = h.take_posts().remove(0);
    h.engine.handle_post_failed(h.now, p1, false).unwrap();
    h.drain();
    h.run_until(h.now + Duration::from_secs(5));
    let (p2, _, r2) = h.take_posts().remove(0);
    assert_eq!(r1, r2);
    h.post_status(p2, 429);
    h.run_until(h.now + Duration::from_secs(5));
    let (p3, _, _) = h.take_posts().remove(0);
    h.post_status(p3, 503);
    h.run_until(h.now + Duration::from_secs(5));
    assert!(
        h.take_posts().is_empty(),
        "a notification was retried on 503"
    );
    assert!(h.events().iter().any(|e| matches!(
        e,
        Event::NotificationDropped {
            status: Some(503),
            ..
        }
    )));
}

#[test]
fn poll_retries_transport_errors_429_and_5xx_with_growing_backoff() {
    let mut h = Harness::new(config());
    let mut last_gap = Duration::ZERO;
    for (i, status) in [None, Some(429), Some(500), Some(503)]
        .into_iter()
        .enumerate()
    {
        let (id, _) = h.take_poll();
        let start = h.now;
        match status {
            None => h.engine.handle_poll_failed(h.now, id).unwrap(),
            Some(s) => h
                .engine
                .handle_poll_response(
                    h.now,
                    h.now,
                    h.wall(),
                    id,
                    &ResponseHead {
                        status: s,
                        headers: Headers::new(),
                    },
                    b"",
                )
                .unwrap(),
        }
        h.drain();
        assert!(!h.has_poll(), "poll {i} retried without backoff");
        let t = h.engine.poll_timeout().unwrap();
        assert_eq!(t.reason, TimeoutReason::Poll);
        let gap = t.at - start;
        assert!(gap > Duration::ZERO);
        // Equal jitter keeps attempt n+1 in [d, 2d] when attempt n is in [d/2, d]: never shorter.
        assert!(
            gap >= last_gap,
            "poll {i}: backoff did not grow: {gap:?} after {last_gap:?}"
        );
        last_gap = gap;
        h.run_until(t.at);
    }
    assert_eq!(h.engine.health().consecutive_poll_failures, 4);
}

#[test]
fn poll_401_surfaces_operator_action_and_backs_off_without_spinning() {
    let mut h = Harness::new(config());
    for _ in 0..3 {
        let (id, _) = h.take_poll();
        let start = h.now;
        let body = br#"{"error":{"message":"bad key","type":"invalid_request_error","code":"invalid_api_key"}}"#;
        h.engine
            .handle_poll_response(
                h.now,
                h.now,
                h.wall(),
                id,
                &ResponseHead {
                    status: 401,
                    headers: Headers::new(),
                },
                body,
            )
            .unwrap();
        h.drain();
        let ev = h.events();
        assert!(ev.contains(&Event::OperatorActionRequired {
            status: 401,
            code: Some("invalid_api_key".into())
        }));
        assert_eq!(
            h.engine.health().readiness,
            Readiness::NotReady(NotReady::OperatorAction { status: 401 })
        );
        let t = h.engine.poll_timeout().unwrap();
        assert!(
            t.at - start >= Duration::from_secs(5),
            "tight loop after 401: {:?}",
            t.at - start
        );
        h.run_until(t.at);
    }
    // Recovers once the key works again.
    let (id, _) = h.take_poll();
    h.deliver_poll(id, 204, &Value::Null);
    assert_eq!(h.engine.health().readiness, Readiness::Ready);
}

#[test]
fn readiness_is_not_ready_when_every_recent_forward_failed() {
    let mut h = Harness::new(config());
    assert_eq!(
        h.engine.health().readiness,
        Readiness::NotReady(NotReady::NoSuccessfulPoll)
    );
    h.poll_with(json!([
        cmd_json("a", json!(1), "x"),
        cmd_json("b", json!(2), "x")
    ]));
    assert_eq!(h.engine.health().readiness, Readiness::Ready);
    for f in h.take_forwards() {
        h.engine
            .handle_forward_failed(
                h.now,
                f.cmd,
                TunnelFailure::before_response(
                    FailureSource::Connect,
                    Some(TransportErrorKind::ConnectionRefused),
                ),
            )
            .unwrap();
    }
    h.drain();
    assert_eq!(
        h.engine.health().readiness,
        Readiness::NotReady(NotReady::ForwardsFailing { recent_failures: 2 })
    );
    // One success among the recent forwards makes it ready again.
    let (id, _) = h.take_poll();
    h.deliver_poll(
        id,
        200,
        &json!({"commands": [cmd_json("c", json!(3), "x")]}),
    );
    let f = h.take_forwards().remove(0);
    h.reply_json(f.cmd, 200, r#"{"jsonrpc":"2.0","id":3,"result":{}}"#);
    assert_eq!(h.engine.health().readiness, Readiness::Ready);
}

#[test]
fn malformed_command_with_request_id_is_answered_not_lost() {
    let mut h = Harness::new(config());
    h.poll_with(json!([
        {"request_id": "bad", "shard_token": "s-bad", "channel": "main", "command_type": "jsonrpc", "created_at": "x", "jsonrpc": [1, 2]},
        {"no_request_id": true}
    ]));
    assert!(h.take_forwards().is_empty());
    let posts = h.take_posts();
    assert_eq!(posts.len(), 1);
    assert_eq!(
        posts[0].2.headers.get("X-Tunnel-Shard-Token"),
        Some("s-bad")
    );
    let b = body(&posts[0].2);
    assert_eq!(b["request_id"], "bad");
    assert_eq!(
        b["resp_json"]["error"]["data"]["tunnel_failure"]["source"],
        "client_internal"
    );
    let malformed = h
        .events()
        .into_iter()
        .filter(|e| matches!(e, Event::MalformedCommand { .. }))
        .count();
    assert_eq!(malformed, 2);
}

#[test]
fn command_for_an_unserved_channel_gets_a_client_internal_failure() {
    let mut h = Harness::new(config());
    let mut c = cmd_json("a", json!(5), "tools/list");
    c["channel"] = json!("nowhere");
    h.poll_with(json!([c]));
    assert!(h.take_forwards().is_empty());
    let b = body(&h.take_posts().remove(0).2);
    assert_eq!(b["channel"], "nowhere");
    assert_eq!(b["resp_json"]["id"], 5);
    assert_eq!(
        b["resp_json"]["error"]["data"]["tunnel_failure"]["source"],
        "client_internal"
    );
    assert!(h.events().contains(&Event::UnsupportedChannel {
        request_id: "a".into(),
        channel: "nowhere".into(),
        command_type: "jsonrpc",
    }));
}

#[test]
fn channel_defaults_to_main_and_is_echoed() {
    for channel in [None, Some(Value::Null), Some(json!(""))] {
        let mut h = Harness::new(config());
        let mut c = cmd_json("a", json!(1), "tools/list");
        match channel {
            None => {
                c.as_object_mut().unwrap().remove("channel");
            }
            Some(v) => c["channel"] = v,
        }
        h.poll_with(json!([c]));
        let f = h.take_forwards().remove(0);
        assert_eq!(f.channel, "main");
        h.reply_json(f.cmd, 200, r#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
        assert_eq!(body(&h.take_posts().remove(0).2)["channel"], "main");
    }
}

#[test]
fn oversized_reply_body_is_a_response_body_too_large_failure() {
    let mut c = config();
    c.max_response_body = 64;
    let mut h = Harness::new(c);
    h.poll_with(json!([cmd_json("a", json!(1), "tools/call")]));
    let f = h.take_forwards().remove(0);
    let mut headers = Headers::new();
    headers.append("Content-Type", "application/json").unwrap();
    h.engine
        .handle_forward_head(
            h.now,
            f.cmd,
            ResponseHead {
                status: 200,
                headers,
            },
        )
        .unwrap();
    h.engine
        .handle_forward_body(h.now, f.cmd, &[b' '; 100])
        .unwrap();
    h.drain();
    let (cancelled, _) = h.cancels();
    assert_eq!(cancelled, vec![f.cmd]);
    let b = body(&h.take_posts().remove(0).2);
    assert_eq!(
        b["resp_json"]["error"]["data"]["tunnel_failure"]["transport_error_kind"],
        "response_body_too_large"
    );
}

#[test]
fn api_key_never_appears_in_debug_output() {
    let mut h = Harness::new(config());
    let (_, req) = h.take_poll();
    assert!(!format!("{req:?}").contains("sk-test-key"));
    assert!(!format!("{:?}", h.engine.config()).contains("sk-test-key"));
    assert!(!format!("{:?}", h.engine).contains("sk-test-key"));
}

// ---------------------------------------------------------------------------------------------
// Rules found in review: each test failed before its fix.

#[test]
fn forward_result_reported_at_or_after_the_deadline_is_never_posted() {
    // A driver that applies `Forward.deadline` to its own I/O reports a timeout at the deadline.
    let mut h = Harness::new(config());
    h.poll_with(json!([with_timeout(
        cmd_json("a", json!(1), "tools/call"),
        "2s"
    )]));
    let f = h.take_forwards().remove(0);
    h.now += Duration::from_secs(2);
    let timeout =
        TunnelFailure::before_response(FailureSource::Timeout, Some(TransportErrorKind::Timeout));
    assert!(
        h.engine
            .handle_forward_failed(h.now, f.cmd, timeout)
            .is_ok(),
        "a late report is dropped, not refused"
    );
    h.drain();
    assert!(h.take_posts().is_empty(), "a late error was synthesized");
    assert!(h.events().contains(&Event::Expired {
        request_id: "a".into(),
        stage: Stage::DuringForward
    }));
    // A real reply that arrives after the deadline is not posted either.
    h.poll_with(json!([with_timeout(
        cmd_json("b", json!(2), "tools/call"),
        "2s"
    )]));
    let f = h.take_forwards().remove(0);
    h.now += Duration::from_secs(3);
    let mut headers = Headers::new();
    headers.append("Content-Type", "application/json").unwrap();
    assert!(h
        .engine
        .handle_forward_head(
            h.now,
            f.cmd,
            ResponseHead {
                status: 200,
                headers
            }
        )
        .is_ok());
    h.drain();
    assert!(
        h.take_posts().is_empty(),
        "a reply was posted after the deadline"
    );
}

#[test]
fn command_that_expired_while_the_poll_body_was_read_is_dropped() {
    let mut h = Harness::new(config());
    let (id, _) = h.take_poll();
    let received_at = h.now;
    h.now += Duration::from_secs(5); // a slow body download
    let body = serde_json::to_vec(&json!({"commands": [
        with_timeout(cmd_json("a", json!(1), "tools/list"), "1s"),
        with_timeout(cmd_json("b", json!(2), "tools/list"), "10s")
    ]}))
    .unwrap();
    let wall = h.wall();
    let head = ResponseHead {
        status: 200,
        headers: Headers::new(),
    };
    h.engine
        .handle_poll_response(h.now, received_at, wall, id, &head, &body)
        .unwrap();
    h.drain();
    let fwds = h.take_forwards();
    assert_eq!(fwds.len(), 1);
    assert_eq!(fwds[0].request_id, "b");
    assert_eq!(
        fwds[0].deadline,
        Some(received_at + Duration::from_secs(10)),
        "anchored at receipt"
    );
    assert!(h.events().contains(&Event::Expired {
        request_id: "a".into(),
        stage: Stage::BeforeForward
    }));
}

#[test]
fn excessive_retry_after_and_backoff_settings_never_overflow_the_clock() {
    let mut c = config();
    c.retry_after_cap = Duration::MAX;
    c.poll_backoff.max = Duration::MAX;
    let mut h = Harness::new(c);
    let (id, _) = h.take_poll();
    let mut headers = Headers::new();
    headers
        .append("Retry-After", "99999999999999999999999")
        .unwrap();
    let wall = h.wall();
    h.engine
        .handle_poll_response(
            h.now,
            h.now,
            wall,
            id,
            &ResponseHead {
                status: 429,
                headers,
            },
            b"",
        )
        .unwrap();
    let t = h.engine.poll_timeout().unwrap();
    assert!(t.at - h.now <= mcpwire_core::tunnel::engine::MAX_POLL_DELAY);
    h.run_until(t.at);
    let (id, _) = h.take_poll();
    h.engine
        .handle_poll_response(
            h.now,
            h.now,
            wall,
            id,
            &ResponseHead {
                status: 401,
                headers: Headers::new(),
            },
            b"",
        )
        .unwrap();
    assert!(h.engine.poll_timeout().is_some());
}

#[test]
fn malformed_command_that_is_expired_or_of_unknown_type_is_not_answered() {
    let mut h = Harness::new(config());
    h.poll_with(json!([
        {"request_id": "expired", "shard_token": "s", "response_timeout": "0s", "jsonrpc": [1]},
        {"request_id": "future", "shard_token": "s", "command_type": "future_thing",
         "headers": {"X-Bad": "not an array"}},
        {"request_id": "odd-type", "shard_token": "s", "command_type": 7}
    ]));
    assert!(h.take_forwards().is_empty());
    assert!(
        h.take_posts().is_empty(),
        "an expired or unknown command was answered"
    );
    let ev = h.events();
    assert!(ev.contains(&Event::Expired {
        request_id: "expired".into(),
        stage: Stage::BeforeForward
    }));
    assert!(ev.iter().any(
        |e| matches!(e, Event::UnknownCommandType { request_id, .. } if request_id == "future")
    ));
    assert!(ev.iter().any(
        |e| matches!(e, Event::UnknownCommandType { request_id, .. } if request_id == "odd-type")
    ));
}

#[test]
fn malformed_command_is_answered_by_its_kind() {
    let mut h = Harness::new(config());
    h.poll_with(json!([
        // A usable payload, bad headers: answered as the request it is, with its id.
        {"request_id": "req", "shard_token": "s1", "headers": {"X": [1]},
         "jsonrpc": {"jsonrpc": "2.0", "id": 41, "method": "tools/call"}},
        {"request_id": "note", "shard_token": "s2", "headers": {"X": "v"},
         "jsonrpc": {"jsonrpc": "2.0", "method": "notifications/cancelled"}},
        {"request_id": "end", "shard_token": "s3", "command_type": "session_termination", "headers": 5}
    ]));
    assert!(h.take_forwards().is_empty());
    let by_id: std::collections::BTreeMap<String, Value> = h
        .take_posts()
        .into_iter()
        .map(|(_, _, r)| {
            let b = body(&r);
            (b["request_id"].as_str().unwrap().to_owned(), b)
        })
        .collect();
    assert_eq!(by_id["req"]["resp_type"], "jsonrpc_response");
    assert_eq!(by_id["req"]["resp_json"]["id"], 41);
    assert_eq!(by_id["note"]["resp_type"], "notify_ack");
    assert_eq!(by_id["end"]["resp_type"], "session_termination_response");
}

#[test]
fn unused_wrong_typed_created_at_does_not_reject_a_command() {
    let mut h = Harness::new(config());
    h.poll_with(
        json!([{"request_id": "end", "shard_token": "s", "command_type": "session_termination",
        "created_at": 5, "headers": {"Mcp-Session-Id": ["x"]}}]),
    );
    let f = h.take_forwards().remove(0);
    assert_eq!(f.kind, ForwardKind::SessionTermination);
}

#[test]
fn malformed_reasons_never_quote_header_values() {
    let mut h = Harness::new(config());
    h.poll_with(json!([
        {"request_id": "a", "shard_token": "s", "headers": {"Authorization": "Bearer sk-live-SECRET"},
         "jsonrpc": {"jsonrpc": "2.0", "id": 1, "method": "m"}},
        {"request_id": "b", "shard_token": "s", "headers": {"Authorization": ["Bearer sk-live-SECRET\r\nX: y"]},
         "jsonrpc": {"jsonrpc": "2.0", "id": 2, "method": "m"}}
    ]));
    let ev = h.events();
    let shown = format!("{ev:?}");
    assert_eq!(
        ev.iter()
            .filter(|e| matches!(e, Event::MalformedCommand { .. }))
            .count(),
        2
    );
    assert!(!shown.contains("sk-live-SECRET"), "{shown}");
}

#[test]
fn acknowledging_a_request_is_refused_and_a_session_close_is_a_204() {
    let mut h = Harness::new(config());
    h.poll_with(json!([
        cmd_json("req", json!(1), "tools/call"),
        {"request_id": "end", "shard_token": "s", "command_type": "session_termination", "created_at": "x"}
    ]));
    let fwds = h.take_forwards();
    let req = fwds.iter().find(|f| f.request_id == "req").unwrap();
    let end = fwds.iter().find(|f| f.request_id == "end").unwrap();
    assert!(matches!(
        h.engine.handle_forward_acknowledged(h.now, req.cmd),
        Err(mcpwire_core::tunnel::UsageError::OutOfOrder(_))
    ));
    h.engine
        .handle_forward_acknowledged(h.now, end.cmd)
        .unwrap();
    h.drain();
    let posts = h.take_posts();
    assert_eq!(
        posts.len(),
        1,
        "the request's result was replaced by an acknowledgement"
    );
    let b = body(&posts[0].2);
    assert_eq!(b["resp_type"], "session_termination_response");
    assert_eq!(b["resp_code"], 204);
}

#[test]
fn unserved_channel_answers_notifications_and_session_closes_by_their_kind() {
    let mut h = Harness::new(config());
    h.poll_with(json!([
        {"request_id": "note", "shard_token": "s", "channel": "elsewhere", "created_at": "x",
         "jsonrpc": {"jsonrpc": "2.0", "method": "notifications/initialized"}},
        {"request_id": "end", "shard_token": "s", "channel": "elsewhere", "created_at": "x",
         "command_type": "session_termination"}
    ]));
    let types: Vec<Value> = h
        .take_posts()
        .iter()
        .map(|(_, _, r)| body(r)["resp_type"].clone())
        .collect();
    assert_eq!(
        types,
        vec![json!("notify_ack"), json!("session_termination_response")]
    );
}

#[test]
fn readiness_is_not_ready_when_every_recent_forward_timed_out() {
    let mut h = Harness::new(config());
    h.poll_with(json!([
        with_timeout(cmd_json("a", json!(1), "tools/call"), "1s"),
        with_timeout(cmd_json("b", json!(2), "tools/call"), "1s")
    ]));
    assert_eq!(h.take_forwards().len(), 2);
    h.advance(Duration::from_secs(1));
    // The control plane is healthy: answer the poll in flight.
    let (id, _) = h.take_poll();
    h.deliver_poll(id, 204, &Value::Null);
    assert_eq!(
        h.engine.health().readiness,
        Readiness::NotReady(NotReady::ForwardsFailing { recent_failures: 2 })
    );
}

#[test]
fn u64_request_ids_are_kept_exactly() {
    let mut h = Harness::new(config());
    h.poll_with(json!([cmd_json(
        "a",
        json!(18446744073709551615u64),
        "tools/call"
    )]));
    let f = h.take_forwards().remove(0);
    let mut headers = Headers::new();
    headers.append("Content-Type", "text/event-stream").unwrap();
    h.engine
        .handle_forward_head(
            h.now,
            f.cmd,
            ResponseHead {
                status: 200,
                headers,
            },
        )
        .unwrap();
    let sse = "data: {\"jsonrpc\":\"2.0\",\"id\":18446744073709551615,\"result\":{}}\n\n";
    h.engine
        .handle_forward_body(h.now, f.cmd, sse.as_bytes())
        .unwrap();
    h.drain();
    let (_, _, r) = h.take_posts().remove(0);
    let text = String::from_utf8(r.body).unwrap();
    assert!(text.contains(r#""resp_type":"jsonrpc_response""#), "{text}");
    assert!(text.contains(r#""id":18446744073709551615"#), "{text}");
}

#[test]
fn notification_error_status_is_acknowledged_with_the_real_status_and_headers() {
    let mut h = Harness::new(config());
    h.poll_with(
        json!([{"request_id": "n", "shard_token": "s", "created_at": "x",
        "jsonrpc": {"jsonrpc": "2.0", "method": "notifications/initialized"}}]),
    );
    let f = h.take_forwards().remove(0);
    let mut headers = Headers::new();
    headers
        .append(
            "WWW-Authenticate",
            "Bearer resource_metadata=\"https://m.test\"",
        )
        .unwrap();
    h.engine
        .handle_forward_head(
            h.now,
            f.cmd,
            ResponseHead {
                status: 401,
                headers,
            },
        )
        .unwrap();
    h.engine.handle_forward_end(h.now, f.cmd).unwrap();
    h.drain();
    let b = body(&h.take_posts().remove(0).2);
    assert_eq!(b["resp_type"], "notify_ack");
    assert_eq!(b["resp_code"], 401);
    assert_eq!(
        b["resp_headers"]["WWW-Authenticate"][0],
        "Bearer resource_metadata=\"https://m.test\""
    );
}

#[test]
fn outputs_and_events_never_show_payloads_or_keys_in_debug() {
    let mut h = Harness::new(config());
    let (id, req) = h.take_poll();
    let mut c = cmd_json("a", json!(1), "tools/call");
    c["jsonrpc"]["params"] = json!({"password": "hunter2"});
    h.deliver_poll(id, 200, &json!({"commands": [c]}));
    let shown = format!("{:?} {:?}", h.out, req);
    assert!(shown.contains("Forward"), "{shown}");
    assert!(!shown.contains("hunter2"), "{shown}");
    assert!(!shown.contains("sk-test-key"), "{shown}");
}

fn modern(request_id: &str, channel: &str, rpc: Value) -> Value {
    json!({
        "request_id": request_id,
        "shard_token": format!("shard-{request_id}"),
        "command_type": "jsonrpc",
        "channel": channel,
        "created_at": "2026-01-01T00:00:00Z",
        "headers": {"Mcp-Method": ["tools/list"], "Connection": ["X-Hop"], "X-Hop": ["1"]},
        "jsonrpc": rpc
    })
}

#[test]
fn forward_headers_mirror_the_body_and_take_param_headers_from_the_channels_last_tools_list() {
    let mut c = config();
    c.channels = vec!["main".into(), "other".into()];
    let mut h = Harness::new(c);
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28"});
    h.poll_with(json!([modern(
        "list",
        "main",
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}})
    )]));
    let list = h.take_forwards().remove(0);
    assert_eq!(list.headers.get("Mcp-Method"), Some("tools/list"));
    assert!(list.headers.get("X-Hop").is_none());
    h.reply_json(
        list.cmd,
        200,
        &json!({"jsonrpc": "2.0", "id": 1, "result": {"tools": [
            {"name": "weather", "inputSchema": {"type": "object", "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"}}}},
            {"name": "broken", "inputSchema": {"type": "object", "properties": {
                "r": {"type": "array", "x-mcp-header": "R"}}}}]}})
        .to_string(),
    );
    let events = h.events();
    assert!(
        events.iter().any(
            |e| matches!(e, Event::ToolRejected { tool, channel, .. } if tool == "broken" && channel == "main")
        ),
        "{events:?}"
    );
    let (post, _, _) = h.take_posts().remove(0);
    h.post_status(post, 200);
    let call = |channel: &str, id: &str| {
        modern(
            id,
            channel,
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                "name": "weather", "arguments": {"region": "eu-west"}, "_meta": meta}}),
        )
    };
    h.poll_with(json!([call("main", "c1"), call("other", "c2")]));
    let fwds = h.take_forwards();
    let on = |ch: &str| fwds.iter().find(|f| f.channel == ch).unwrap();
    assert_eq!(on("main").headers.get("Mcp-Method"), Some("tools/call"));
    assert_eq!(on("main").headers.get("Mcp-Name"), Some("weather"));
    assert_eq!(on("main").headers.get("Mcp-Param-Region"), Some("eu-west"));
    assert_eq!(
        on("other").headers.get("Mcp-Param-Region"),
        None,
        "annotations are per channel"
    );
    assert_eq!(on("other").headers.get("Mcp-Method"), Some("tools/call"));
}

// ---------------------------------------------------------------------------------------------
// Late inputs (the tunnel module's convention): a handle the engine issued whose operation
// ended is dropped with `Ok(())` and no output; a handle it never issued is `UnknownHandle`.

fn ok_head() -> ResponseHead {
    let mut headers = Headers::new();
    headers.append("Content-Type", "application/json").unwrap();
    ResponseHead {
        status: 200,
        headers,
    }
}

#[test]
fn late_forward_reports_after_the_terminal_are_dropped_without_output() {
    let mut h = Harness::new(config());
    h.poll_with(json!([cmd_json("a", json!(1), "tools/call")]));
    let f = h.take_forwards().remove(0);
    h.reply_json(f.cmd, 200, r#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
    let (post, _, _) = h.take_posts().remove(0);
    h.post_status(post, 200);
    h.out.clear();
    let now = h.now;
    let e = &mut h.engine;
    assert_eq!(e.handle_forward_head(now, f.cmd, ok_head()), Ok(()));
    assert_eq!(e.handle_forward_body(now, f.cmd, b"{}"), Ok(()));
    assert_eq!(e.handle_forward_end(now, f.cmd), Ok(()));
    assert_eq!(e.handle_forward_message(now, f.cmd, "{}"), Ok(()));
    assert_eq!(e.handle_forward_acknowledged(now, f.cmd), Ok(()));
    let failure = TunnelFailure::before_response(FailureSource::Connect, None);
    assert_eq!(e.handle_forward_failed(now, f.cmd, failure), Ok(()));
    assert_eq!(
        e.handle_post_response(now, UNIX_EPOCH, post, &ok_head()),
        Ok(())
    );
    assert_eq!(e.handle_post_failed(now, post, true), Ok(()));
    assert!(e.poll_output().is_none(), "a late input produced output");
}

#[test]
fn a_late_poll_report_is_dropped_without_output() {
    let mut h = Harness::new(config());
    let (id, _) = h.take_poll();
    h.deliver_poll(id, 204, &json!(null));
    h.out.clear();
    let now = h.now;
    assert_eq!(h.engine.handle_poll_failed(now, id), Ok(()));
    let head = ResponseHead {
        status: 200,
        headers: Headers::new(),
    };
    assert_eq!(
        h.engine
            .handle_poll_response(now, now, UNIX_EPOCH, id, &head, b"{\"commands\":[]}"),
        Ok(())
    );
    assert!(
        h.engine.poll_output().is_none(),
        "a late poll report produced output"
    );
}

#[test]
fn handles_never_issued_are_refused_as_unknown() {
    use mcpwire_core::tunnel::UsageError;
    let mut h = Harness::new(config());
    let now = h.now;
    let e = &mut h.engine;
    let never = CommandId(1_000);
    assert_eq!(
        e.handle_forward_head(now, never, ok_head()),
        Err(UsageError::UnknownHandle("forward"))
    );
    assert_eq!(
        e.handle_forward_end(now, never),
        Err(UsageError::UnknownHandle("forward"))
    );
    assert_eq!(
        e.handle_forward_message(now, never, "{}"),
        Err(UsageError::UnknownHandle("forward"))
    );
    assert_eq!(
        e.handle_poll_failed(now, PollId(1_000)),
        Err(UsageError::UnknownHandle("poll"))
    );
    assert_eq!(
        e.handle_post_failed(now, PostId(1_000), false),
        Err(UsageError::UnknownHandle("post"))
    );
    assert!(e.poll_output().is_none());
}

#[test]
fn shutdown_takes_now_and_stops_polling() {
    let mut h = Harness::new(config());
    let (id, _) = h.take_poll();
    h.engine.shutdown(h.now);
    assert_eq!(h.engine.poll_in_flight(), Some(id));
    h.deliver_poll(id, 204, &json!(null));
    h.advance(Duration::from_secs(60));
    assert!(!h.has_poll(), "polled after shutdown");
    assert!(h.engine.is_idle());
}

/// `connection_max_ttl` (`--mcp.connection-max-ttl`): once the head of a JSON-RPC request's
/// response arrives, its body may take at most the TTL; then the forward is cancelled and one
/// terminal `timeout` failure (a response was received) is posted, before the command's own
/// deadline. A notification, a `4xx` and a forward without a head are not bounded by it.
#[test]
fn the_connection_ttl_ends_a_stream_with_a_timeout_failure() {
    let mut c = config();
    c.connection_max_ttl = Some(Duration::from_secs(5));
    let mut h = Harness::new(c);
    h.poll_with(json!([
        with_timeout(cmd_json("long", json!(1), "tools/call"), "60s"),
        cmd_json("no-head", json!(2), "tools/call"),
    ]));
    let fwds = h.take_forwards();
    let (long, no_head) = (fwds[0].cmd, fwds[1].cmd);
    h.head(long, 200, "text/event-stream");
    let t = h.engine.poll_timeout().unwrap();
    assert_eq!(t.reason, TimeoutReason::ConnectionTtl { cmd: long });
    assert_eq!(t.at, h.now + Duration::from_secs(5));
    h.advance(Duration::from_millis(4_999));
    assert!(h.take_posts().is_empty());
    h.advance(Duration::from_millis(1));
    let (cancelled, _) = h.cancels();
    assert_eq!(cancelled, vec![long]);
    assert!(h.events().contains(&Event::ConnectionTtlReached {
        request_id: "long".into()
    }));
    let posts = h.take_posts();
    assert_eq!(posts.len(), 1);
    let b = body(&posts[0].2);
    assert_eq!(b["request_id"], "long");
    assert_eq!(b["resp_type"], "jsonrpc_response");
    assert_eq!(b["resp_code"], 502);
    let failure = &b["resp_json"]["error"]["data"]["tunnel_failure"];
    assert_eq!(failure["source"], "timeout");
    assert_eq!(failure["upstream_response_received"], true);
    assert!(failure.get("upstream_status").is_none());
    // A response that streamed for the whole TTL does not count against readiness.
    assert_eq!(h.engine.health().readiness, Readiness::Ready);
    // The forward that never got a head is not bounded by the TTL.
    h.advance(Duration::from_secs(30));
    assert!(h.cancels().0.is_empty(), "{no_head:?} was cancelled");
    // A TTL too large for the clock is no bound, never a panic.
    let mut c = config();
    c.connection_max_ttl = Some(Duration::MAX);
    let mut h = Harness::new(c);
    h.poll_with(json!([cmd_json("huge", json!(1), "tools/call")]));
    let f = h.take_forwards().remove(0);
    h.head(f.cmd, 200, "text/event-stream");
    // (Before, `now + Duration::MAX` panicked here.) The forward runs on.
    assert_eq!(h.engine.health().forwards_in_flight, 1);
}

/// `Event::Completed` says how long the command took from its poll response's arrival to its
/// terminal POST's answer (the Go client's `poll_to_response` latency).
#[test]
fn completion_reports_the_time_since_the_poll_response_arrived() {
    let mut h = Harness::new(config());
    h.poll_with(json!([cmd_json("a", json!(1), "tools/list")]));
    let fwd = h.take_forwards().remove(0);
    h.now += Duration::from_millis(250);
    h.reply_json(
        fwd.cmd,
        200,
        r#"{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}"#,
    );
    let (post, _, _) = h.take_posts().remove(0);
    h.now += Duration::from_millis(50);
    h.post_status(post, 200);
    let since = h.events().into_iter().find_map(|e| match e {
        Event::Completed { since_receipt, .. } => Some(since_receipt),
        _ => None,
    });
    assert_eq!(since, Some(Duration::from_millis(300)));
}

/// `created_at` (RFC 3339, UTC) gives the command's age at admission (`Event::CommandAge`, the
/// Go client's `commands_age_seconds`) and its enqueue-to-response latency
/// (`Completed::since_created`); one that does not parse gives neither, and never a deadline.
#[test]
fn created_at_gives_the_age_and_the_enqueue_latency_and_nothing_else() {
    let mut h = Harness::new(config());
    let mut c = cmd_json("a", json!(1), "tools/list");
    c["created_at"] = json!("2027-01-15T07:59:57Z");
    let mut bad = cmd_json("b", json!(2), "tools/list");
    bad["created_at"] = json!("yesterday");
    h.poll_with(json!([c, bad]));
    let ages: Vec<(String, Duration)> = h
        .events()
        .into_iter()
        .filter_map(|e| match e {
            Event::CommandAge { request_id, age } => Some((request_id, age)),
            _ => None,
        })
        .collect();
    assert_eq!(ages, [("a".to_owned(), Duration::from_secs(3))]);
    for fwd in h.take_forwards() {
        h.reply_json(
            fwd.cmd,
            200,
            r#"{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}"#,
        );
    }
    for (post, _, _) in h.take_posts() {
        h.post_status(post, 200);
    }
    let mut since: Vec<(String, Option<Duration>)> = h
        .events()
        .into_iter()
        .filter_map(|e| match e {
            Event::Completed {
                request_id,
                since_created,
                ..
            } => Some((request_id, since_created)),
            _ => None,
        })
        .collect();
    since.sort();
    assert_eq!(
        since,
        [
            ("a".to_owned(), Some(Duration::from_secs(3))),
            ("b".to_owned(), None)
        ]
    );
}

//! Property: for any interleaving of forward outcomes, POST outcomes and time the test generates,
//! no command is lost or answered twice. Every command of a poll ends in exactly one of:
//! completed, delivery failed, already fulfilled (404), expired, skipped (unknown type); at most
//! one terminal POST per command is acknowledged; nothing is posted at or after a deadline; and
//! once everything settles nothing is left in flight.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant, UNIX_EPOCH};

use mcpwire_core::http::{Headers, ResponseHead};
use mcpwire_core::tunnel::engine::{Config, Event, Output, Secret};
use mcpwire_core::tunnel::failure::{FailureSource, TransportErrorKind};
use mcpwire_core::tunnel::{CommandId, Engine, PostId, TunnelFailure, UsageError};
use proptest::prelude::*;
use serde_json::{json, Value};

#[derive(Clone, Debug)]
enum Kind {
    Request,
    Notification,
    Termination,
    Unknown,
}

#[derive(Clone, Debug)]
struct Cmd {
    kind: Kind,
    timeout_ms: Option<u64>,
}

#[derive(Clone, Debug)]
enum ForwardOutcome {
    Json(u16),
    ErrorBody(u16),
    Garbage(u16),
    Sse { notes: u8 },
    Failed,
    Hang,
}

#[derive(Clone, Debug)]
enum PostOutcome {
    Status(u16),
    FailedWritten,
    FailedUnwritten,
    Hang,
}

fn cmd_strategy() -> impl Strategy<Value = Cmd> {
    (
        prop_oneof![
            6 => Just(Kind::Request),
            2 => Just(Kind::Notification),
            1 => Just(Kind::Termination),
            1 => Just(Kind::Unknown)
        ],
        proptest::option::of(0u64..20_000),
    )
        .prop_map(|(kind, timeout_ms)| Cmd { kind, timeout_ms })
}

fn forward_strategy() -> impl Strategy<Value = ForwardOutcome> {
    prop_oneof![
        4 => prop_oneof![Just(200u16), Just(202)].prop_map(ForwardOutcome::Json),
        1 => prop_oneof![Just(400u16), Just(500)].prop_map(ForwardOutcome::ErrorBody),
        1 => prop_oneof![Just(200u16), Just(502)].prop_map(ForwardOutcome::Garbage),
        2 => (0u8..4).prop_map(|notes| ForwardOutcome::Sse { notes }),
        1 => Just(ForwardOutcome::Failed),
        1 => Just(ForwardOutcome::Hang),
    ]
}

fn post_strategy() -> impl Strategy<Value = PostOutcome> {
    prop_oneof![
        6 => Just(PostOutcome::Status(200)),
        1 => prop_oneof![Just(404u16), Just(408), Just(429), Just(500), Just(502), Just(503), Just(401)]
            .prop_map(PostOutcome::Status),
        1 => Just(PostOutcome::FailedWritten),
        1 => Just(PostOutcome::FailedUnwritten),
        1 => Just(PostOutcome::Hang),
    ]
}

fn command_json(i: usize, c: &Cmd) -> Value {
    let mut v = match c.kind {
        Kind::Request => json!({"command_type": "jsonrpc",
            "jsonrpc": {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {}}}),
        Kind::Notification => json!({"command_type": "jsonrpc",
            "jsonrpc": {"jsonrpc": "2.0", "method": "notifications/cancelled"}}),
        Kind::Termination => json!({"command_type": "session_termination",
            "headers": {"Mcp-Session-Id": ["s"]}}),
        Kind::Unknown => json!({"command_type": "future_thing"}),
    };
    v["request_id"] = json!(format!("r{i}"));
    v["shard_token"] = json!(format!("s{i}"));
    v["created_at"] = json!("2026-01-01T00:00:00Z");
    if let Some(t) = c.timeout_ms {
        v["response_timeout"] = json!(format!("{t}ms"));
    }
    v
}

/// A report about a handle the engine already let go (its deadline passed) is dropped with
/// `Ok(())` (the late-input convention); every handle here was issued, so any error is a bug.
fn gone(e: UsageError) -> Result<(), UsageError> {
    Err(e)
}

fn run(cmds: Vec<Cmd>, forwards: Vec<ForwardOutcome>, posts: Vec<PostOutcome>, steps: Vec<u16>) {
    let t0 = Instant::now();
    let mut now = t0;
    let wall = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let mut config = Config::new("https://cp.test", "t", Secret::new("k"), "i");
    config.max_concurrent_forwards = 3;
    config.max_in_flight = 64;
    config.jitter_seed = 1;
    let mut e = Engine::new(config, now).unwrap();
    e.handle_timeout(now);

    let mut deadlines: BTreeMap<String, Instant> = BTreeMap::new();
    let mut endings: BTreeMap<String, Vec<&'static str>> = BTreeMap::new();
    let mut acked_terminals: BTreeMap<String, u32> = BTreeMap::new();
    let mut open_forwards: Vec<(CommandId, usize)> = Vec::new();
    let mut open_posts: Vec<(PostId, String, bool)> = Vec::new();
    let mut cancelled_f: BTreeSet<CommandId> = BTreeSet::new();
    let mut cancelled_p: BTreeSet<PostId> = BTreeSet::new();
    let mut polled = false;
    let (mut fi, mut pi) = (0usize, 0usize);

    let mut drain = |e: &mut Engine,
                     now: Instant,
                     open_forwards: &mut Vec<(CommandId, usize)>,
                     open_posts: &mut Vec<(PostId, String, bool)>,
                     cancelled_f: &mut BTreeSet<CommandId>,
                     cancelled_p: &mut BTreeSet<PostId>,
                     endings: &mut BTreeMap<String, Vec<&'static str>>,
                     polled: &mut bool| {
        while let Some(o) = e.poll_output() {
            match o {
                Output::Poll { id, .. } => {
                    if !*polled {
                        *polled = true;
                        let body = json!({"commands": cmds.iter().enumerate().map(|(i, c)| command_json(i, c)).collect::<Vec<_>>()});
                        let bytes = serde_json::to_vec(&body).unwrap();
                        e.handle_poll_response(
                            now,
                            now,
                            wall,
                            id,
                            &ResponseHead {
                                status: 200,
                                headers: Headers::new(),
                            },
                            &bytes,
                        )
                        .unwrap();
                        for (i, c) in cmds.iter().enumerate() {
                            if let Some(t) = c.timeout_ms {
                                deadlines.insert(format!("r{i}"), now + Duration::from_millis(t));
                            }
                        }
                    }
                    // Later polls stay in flight (a long poll that never returns in this test).
                }
                Output::Forward(f) => {
                    let idx: usize = f.request_id[1..].parse().unwrap();
                    if let Some(d) = deadlines.get(&f.request_id) {
                        assert!(now < *d, "forwarded at or after its deadline");
                    }
                    open_forwards.push((f.cmd, idx));
                }
                Output::Post { id, request, .. } => {
                    let b: Value = serde_json::from_slice(&request.body).unwrap();
                    let rid = b["request_id"].as_str().unwrap().to_owned();
                    assert!(b.get("shard_token").is_none());
                    if let Some(d) = deadlines.get(&rid) {
                        assert!(now < *d, "posted at or after its deadline");
                    }
                    let terminal = b["resp_type"] != "jsonrpc_notify";
                    open_posts.push((id, rid, terminal));
                }
                Output::CancelForward { cmd } => {
                    cancelled_f.insert(cmd);
                    open_forwards.retain(|(c, _)| *c != cmd);
                }
                Output::CancelPost { id } => {
                    cancelled_p.insert(id);
                    open_posts.retain(|(p, _, _)| *p != id);
                }
                Output::Event(ev) => {
                    let (rid, what) = match ev {
                        Event::Completed { request_id, .. } => (request_id, "completed"),
                        Event::DeliveryFailed { request_id, .. } => (request_id, "delivery_failed"),
                        Event::AlreadyFulfilled { request_id } => (request_id, "already_fulfilled"),
                        Event::Expired { request_id, .. } => (request_id, "expired"),
                        Event::UnknownCommandType { request_id, .. } => (request_id, "skipped"),
                        _ => continue,
                    };
                    endings.entry(rid).or_default().push(what);
                }
            }
        }
        // The engine's counts agree with what it handed out and has not taken back.
        let h = e.health();
        assert_eq!(h.posts_in_flight, open_posts.len(), "post count drifted");
        assert_eq!(
            h.forwards_in_flight,
            open_forwards.len(),
            "forward count drifted"
        );
    };

    drain(
        &mut e,
        now,
        &mut open_forwards,
        &mut open_posts,
        &mut cancelled_f,
        &mut cancelled_p,
        &mut endings,
        &mut polled,
    );
    for step in steps {
        // Half the steps let time pass *before* outcomes are reported, with no timer call in
        // between: a result may then arrive at or after its deadline, as it can from a driver.
        let late = step % 2 == 0;
        if late {
            now += Duration::from_millis(u64::from(step % 3000));
        }
        // Act on one open forward, one open post, then let time pass.
        if !open_forwards.is_empty() {
            let (cmd, idx) = open_forwards.remove(usize::from(step) % open_forwards.len());
            let outcome = forwards
                .get(fi % forwards.len().max(1))
                .cloned()
                .unwrap_or(ForwardOutcome::Json(200));
            fi += 1;
            let mut h = Headers::new();
            match outcome {
                ForwardOutcome::Json(status) => {
                    h.append("Content-Type", "application/json").unwrap();
                    e.handle_forward_head(now, cmd, ResponseHead { status, headers: h })
                        .or_else(gone)
                        .unwrap();
                    let b = format!(r#"{{"jsonrpc":"2.0","id":{idx},"result":{{}}}}"#);
                    e.handle_forward_body(now, cmd, if status == 202 { b"" } else { b.as_bytes() })
                        .or_else(gone)
                        .unwrap();
                    e.handle_forward_end(now, cmd)
                        .or_else(gone)
                        .or_else(gone)
                        .unwrap();
                }
                ForwardOutcome::ErrorBody(status) => {
                    e.handle_forward_head(now, cmd, ResponseHead { status, headers: h })
                        .or_else(gone)
                        .unwrap();
                    let b = format!(
                        r#"{{"jsonrpc":"2.0","id":{idx},"error":{{"code":-32602,"message":"m"}}}}"#
                    );
                    e.handle_forward_body(now, cmd, b.as_bytes())
                        .or_else(gone)
                        .or_else(gone)
                        .unwrap();
                    e.handle_forward_end(now, cmd)
                        .or_else(gone)
                        .or_else(gone)
                        .unwrap();
                }
                ForwardOutcome::Garbage(status) => {
                    e.handle_forward_head(now, cmd, ResponseHead { status, headers: h })
                        .or_else(gone)
                        .unwrap();
                    e.handle_forward_body(now, cmd, b"<html>")
                        .or_else(gone)
                        .or_else(gone)
                        .unwrap();
                    e.handle_forward_end(now, cmd)
                        .or_else(gone)
                        .or_else(gone)
                        .unwrap();
                }
                ForwardOutcome::Sse { notes } => {
                    h.append("Content-Type", "text/event-stream").unwrap();
                    e.handle_forward_head(
                        now,
                        cmd,
                        ResponseHead {
                            status: 200,
                            headers: h,
                        },
                    )
                    .or_else(gone)
                    .unwrap();
                    for _ in 0..notes {
                        let n = "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n";
                        // The stream may already be finished (cancelled) by an earlier event.
                        let _ = e.handle_forward_body(now, cmd, n.as_bytes());
                    }
                    let fin =
                        format!("data: {{\"jsonrpc\":\"2.0\",\"id\":{idx},\"result\":{{}}}}\n\n");
                    let _ = e.handle_forward_body(now, cmd, fin.as_bytes());
                    let _ = e.handle_forward_end(now, cmd);
                }
                ForwardOutcome::Failed => {
                    e.handle_forward_failed(
                        now,
                        cmd,
                        TunnelFailure::before_response(
                            FailureSource::Connect,
                            Some(TransportErrorKind::ConnectionRefused),
                        ),
                    )
                    .or_else(gone)
                    .unwrap();
                }
                ForwardOutcome::Hang => open_forwards.push((cmd, idx)),
            }
        }
        drain(
            &mut e,
            now,
            &mut open_forwards,
            &mut open_posts,
            &mut cancelled_f,
            &mut cancelled_p,
            &mut endings,
            &mut polled,
        );
        if !open_posts.is_empty() {
            let (id, rid, terminal) = open_posts.remove(usize::from(step / 7) % open_posts.len());
            let outcome = posts
                .get(pi % posts.len().max(1))
                .cloned()
                .unwrap_or(PostOutcome::Status(200));
            pi += 1;
            match outcome {
                PostOutcome::Status(s) => {
                    let head = ResponseHead {
                        status: s,
                        headers: Headers::new(),
                    };
                    match e.handle_post_response(now, wall, id, &head) {
                        Ok(()) if terminal && (200..300).contains(&s) => {
                            *acked_terminals.entry(rid).or_default() += 1;
                        }
                        Ok(()) => {}
                        // The command expired before this report: nothing was delivered.
                        Err(err) => gone(err).unwrap(),
                    }
                }
                PostOutcome::FailedWritten => {
                    e.handle_post_failed(now, id, true).or_else(gone).unwrap()
                }
                PostOutcome::FailedUnwritten => {
                    e.handle_post_failed(now, id, false).or_else(gone).unwrap()
                }
                PostOutcome::Hang => open_posts.push((id, rid, terminal)),
            }
        }
        drain(
            &mut e,
            now,
            &mut open_forwards,
            &mut open_posts,
            &mut cancelled_f,
            &mut cancelled_p,
            &mut endings,
            &mut polled,
        );
        if !late {
            now += Duration::from_millis(u64::from(step % 3000));
        }
        e.handle_timeout(now);
        drain(
            &mut e,
            now,
            &mut open_forwards,
            &mut open_posts,
            &mut cancelled_f,
            &mut cancelled_p,
            &mut endings,
            &mut polled,
        );
    }
    // Settle: every forward hangs, every post succeeds, time runs far past every deadline.
    for _ in 0..200 {
        for (id, rid, terminal) in std::mem::take(&mut open_posts) {
            if terminal {
                *acked_terminals.entry(rid).or_default() += 1;
            }
            e.handle_post_response(
                now,
                wall,
                id,
                &ResponseHead {
                    status: 200,
                    headers: Headers::new(),
                },
            )
            .unwrap();
        }
        for (cmd, _) in std::mem::take(&mut open_forwards) {
            e.handle_forward_failed(
                now,
                cmd,
                TunnelFailure::before_response(
                    FailureSource::Timeout,
                    Some(TransportErrorKind::Timeout),
                ),
            )
            .unwrap();
        }
        drain(
            &mut e,
            now,
            &mut open_forwards,
            &mut open_posts,
            &mut cancelled_f,
            &mut cancelled_p,
            &mut endings,
            &mut polled,
        );
        now += Duration::from_secs(5);
        e.handle_timeout(now);
        drain(
            &mut e,
            now,
            &mut open_forwards,
            &mut open_posts,
            &mut cancelled_f,
            &mut cancelled_p,
            &mut endings,
            &mut polled,
        );
    }
    assert_eq!(
        e.health().in_flight,
        0,
        "commands left in flight: {endings:?}"
    );
    for (i, cmd) in cmds.iter().enumerate() {
        let rid = format!("r{i}");
        let ends = endings.get(&rid).cloned().unwrap_or_default();
        assert_eq!(ends.len(), 1, "command {rid} ({cmd:?}) ended {ends:?}");
        assert!(
            acked_terminals.get(&rid).copied().unwrap_or(0) <= 1,
            "{rid} answered twice"
        );
        if ends[0] == "completed" {
            assert_eq!(acked_terminals.get(&rid).copied(), Some(1));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]
    #[test]
    fn no_command_is_lost_or_answered_twice(
        cmds in proptest::collection::vec(cmd_strategy(), 1..30),
        forwards in proptest::collection::vec(forward_strategy(), 1..40),
        posts in proptest::collection::vec(post_strategy(), 1..40),
        steps in proptest::collection::vec(any::<u16>(), 0..120),
    ) {
        run(cmds, forwards, posts, steps);
    }
}

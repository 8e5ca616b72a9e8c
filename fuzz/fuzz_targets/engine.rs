//! The tunnel engine fed an arbitrary sequence of inputs: poll bodies (structured or raw bytes),
//! forward outcomes, POST outcomes and time. Invariants checked on every output:
//! at most one poll in flight; nothing is forwarded or posted at or after its deadline; every
//! handle the engine emits is unique; POST bodies never carry the shard token; `health()` counts
//! agree with what is outstanding.
#![no_main]

use std::collections::BTreeSet;
use std::time::{Duration, Instant, UNIX_EPOCH};

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use mcpwire_core::http::{Headers, ResponseHead};
use mcpwire_core::tunnel::engine::{CommandId, Config, Output, PollId, PostId, Secret};
use mcpwire_core::tunnel::failure::{FailureSource, TransportErrorKind, TunnelFailure};
use mcpwire_core::tunnel::Engine;

#[derive(Arbitrary, Debug)]
enum CmdKind {
    Request,
    Notification,
    Termination,
    Unknown,
    Malformed,
}

#[derive(Arbitrary, Debug)]
struct Cmd {
    kind: CmdKind,
    id: u8,
    timeout: Option<u16>,
    unit: u8,
    channel: bool,
}

#[derive(Arbitrary, Debug)]
enum Op {
    Poll {
        status: u16,
        commands: Vec<Cmd>,
    },
    PollRaw {
        body: Vec<u8>,
    },
    PollFailed,
    Head {
        which: u8,
        status: u16,
        sse: bool,
    },
    Body {
        which: u8,
        bytes: Vec<u8>,
    },
    End {
        which: u8,
    },
    Message {
        which: u8,
        json: String,
    },
    Acked {
        which: u8,
    },
    Failed {
        which: u8,
    },
    Post {
        which: u8,
        status: u16,
        retry_after: Option<String>,
    },
    PostFailed {
        which: u8,
        written: bool,
    },
    Advance {
        ms: u16,
    },
}

fn command(i: usize, c: &Cmd) -> serde_json::Value {
    use serde_json::json;
    let mut v = match c.kind {
        CmdKind::Request => {
            json!({"command_type": "jsonrpc", "jsonrpc": {"jsonrpc": "2.0", "id": c.id, "method": "m"}})
        }
        CmdKind::Notification => json!({"jsonrpc": {"jsonrpc": "2.0", "method": "n"}}),
        CmdKind::Termination => json!({"command_type": "session_termination"}),
        CmdKind::Unknown => json!({"command_type": "zzz"}),
        CmdKind::Malformed => json!({"command_type": "jsonrpc", "jsonrpc": 5}),
    };
    v["request_id"] = json!(format!("r{i}"));
    v["shard_token"] = json!(format!("s{i}"));
    v["created_at"] = json!("t");
    if c.channel {
        v["channel"] = json!("other");
    }
    if let Some(t) = c.timeout {
        let unit = ["ns", "us", "ms", "s", "m", "h", "x"][usize::from(c.unit % 7)];
        v["response_timeout"] = json!(format!("{t}{unit}"));
    }
    v
}

fuzz_target!(|ops: Vec<Op>| {
    let mut now = Instant::now();
    let wall = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let mut config = Config::new("https://cp.test", "t", Secret::new("k"), "i");
    config.max_in_flight = 8;
    config.max_concurrent_forwards = 2;
    config.max_response_body = 4096;
    let Ok(mut e) = Engine::new(config, now) else {
        return;
    };
    e.handle_timeout(now);

    let mut poll: Option<PollId> = None;
    let mut forwards: Vec<CommandId> = Vec::new();
    let mut posts: Vec<PostId> = Vec::new();
    let mut seen_posts: BTreeSet<PostId> = BTreeSet::new();
    let mut seen_polls: BTreeSet<PollId> = BTreeSet::new();

    let mut drain = |e: &mut Engine,
                     now: Instant,
                     poll: &mut Option<PollId>,
                     forwards: &mut Vec<CommandId>,
                     posts: &mut Vec<PostId>| {
        while let Some(o) = e.poll_output() {
            match o {
                Output::Poll { id, .. } => {
                    assert!(poll.is_none(), "two polls in flight");
                    assert!(seen_polls.insert(id), "poll id reused");
                    *poll = Some(id);
                }
                Output::Forward(f) => {
                    assert!(
                        f.deadline.is_none_or(|d| now < d),
                        "forwarded at or after the deadline"
                    );
                    assert!(
                        !forwards.contains(&f.cmd),
                        "command forwarded twice at once"
                    );
                    forwards.push(f.cmd);
                }
                Output::Post {
                    id,
                    request,
                    deadline,
                    ..
                } => {
                    assert!(
                        deadline.is_none_or(|d| now < d),
                        "posted at or after the deadline"
                    );
                    assert!(seen_posts.insert(id), "post id reused");
                    let body: serde_json::Value =
                        serde_json::from_slice(&request.body).expect("post body is JSON");
                    assert!(body.get("shard_token").is_none(), "shard token in the body");
                    posts.push(id);
                }
                Output::CancelForward { cmd } => forwards.retain(|c| *c != cmd),
                Output::CancelPost { id } => posts.retain(|p| *p != id),
                Output::Event(_) => {}
            }
        }
        let h = e.health();
        // A forward the engine finished by itself (its terminal message arrived) may still be in
        // our list until the engine refuses input for it.
        assert!(
            h.forwards_in_flight <= forwards.len(),
            "forward count disagrees"
        );
        assert_eq!(h.posts_in_flight, posts.len(), "post count disagrees");
    };

    drain(&mut e, now, &mut poll, &mut forwards, &mut posts);
    for op in ops.into_iter().take(256) {
        let pick = |v: &Vec<CommandId>, w: u8| (!v.is_empty()).then(|| v[usize::from(w) % v.len()]);
        match op {
            Op::Poll { status, commands } => {
                if let Some(id) = poll.take() {
                    let body = serde_json::json!({"commands": commands.iter().take(40).enumerate().map(|(i, c)| command(i, c)).collect::<Vec<_>>()});
                    let bytes = serde_json::to_vec(&body).unwrap_or_default();
                    let status = if status % 4 == 0 { status % 600 } else { 200 };
                    let _ = e.handle_poll_response(
                        now,
                        now,
                        wall,
                        id,
                        &ResponseHead {
                            status,
                            headers: Headers::new(),
                        },
                        &bytes,
                    );
                }
            }
            Op::PollRaw { body } => {
                if let Some(id) = poll.take() {
                    let _ = e.handle_poll_response(
                        now,
                        now,
                        wall,
                        id,
                        &ResponseHead {
                            status: 200,
                            headers: Headers::new(),
                        },
                        &body,
                    );
                }
            }
            Op::PollFailed => {
                if let Some(id) = poll.take() {
                    let _ = e.handle_poll_failed(now, id);
                }
            }
            Op::Head { which, status, sse } => {
                if let Some(cmd) = pick(&forwards, which) {
                    let mut h = Headers::new();
                    let _ = h.append(
                        "Content-Type",
                        if sse {
                            "text/event-stream"
                        } else {
                            "application/json"
                        },
                    );
                    let _ = e.handle_forward_head(
                        now,
                        cmd,
                        ResponseHead {
                            status: status % 600,
                            headers: h,
                        },
                    );
                }
            }
            Op::Body { which, bytes } => {
                if let Some(cmd) = pick(&forwards, which) {
                    if let Err(mcpwire_core::tunnel::engine::UsageError::UnknownHandle(_)) =
                        e.handle_forward_body(now, cmd, &bytes)
                    {
                        forwards.retain(|c| *c != cmd);
                    }
                }
            }
            Op::End { which } => {
                if let Some(cmd) = pick(&forwards, which) {
                    if e.handle_forward_end(now, cmd).is_ok() {
                        forwards.retain(|c| *c != cmd);
                    }
                }
            }
            Op::Message { which, json } => {
                if let Some(cmd) = pick(&forwards, which) {
                    if e.handle_forward_message(now, cmd, &json).is_err() {
                        forwards.retain(|c| *c != cmd);
                    }
                }
            }
            Op::Acked { which } => {
                if let Some(cmd) = pick(&forwards, which) {
                    if e.handle_forward_acknowledged(now, cmd).is_ok() {
                        forwards.retain(|c| *c != cmd);
                    }
                }
            }
            Op::Failed { which } => {
                if let Some(cmd) = pick(&forwards, which) {
                    let f = TunnelFailure::before_response(
                        FailureSource::Connect,
                        Some(TransportErrorKind::Dial),
                    );
                    if e.handle_forward_failed(now, cmd, f).is_ok() {
                        forwards.retain(|c| *c != cmd);
                    }
                }
            }
            Op::Post {
                which,
                status,
                retry_after,
            } => {
                if !posts.is_empty() {
                    let id = posts.remove(usize::from(which) % posts.len());
                    let mut h = Headers::new();
                    if let Some(v) = retry_after {
                        let _ = h.append("Retry-After", v);
                    }
                    e.handle_post_response(
                        now,
                        wall,
                        id,
                        &ResponseHead {
                            status: status % 600,
                            headers: h,
                        },
                    )
                    .expect("a known post is accepted");
                }
            }
            Op::PostFailed { which, written } => {
                if !posts.is_empty() {
                    let id = posts.remove(usize::from(which) % posts.len());
                    e.handle_post_failed(now, id, written)
                        .expect("a known post is accepted");
                }
            }
            Op::Advance { ms } => {
                now += Duration::from_millis(u64::from(ms));
                e.handle_timeout(now);
            }
        }
        // Forwards that finished by themselves (terminal message) were announced via CancelForward.
        drain(&mut e, now, &mut poll, &mut forwards, &mut posts);
    }
});

//! The whole tunnel (`tunnel::Tunnel`: the engine, the route table, a stdio binding and its
//! restart supervisor) fed an arbitrary sequence of inputs: poll bodies (structured or raw
//! bytes) for an HTTP, a stdio and an unserved channel, HTTP forward outcomes, stdio child
//! output, exits and failed starts, POST outcomes, shutdown and time. Invariants checked on every
//! output: at most one poll in flight, none after shutdown; nothing is forwarded or posted at or
//! after its deadline; every handle the tunnel emits is unique; POST bodies never carry the shard
//! token; writes go to the running child only; `health()` counts agree with what is outstanding;
//! an input naming an issued handle is never refused as unknown (late inputs are dropped), and
//! one naming a handle never issued always is.
#![no_main]

use std::collections::BTreeSet;
use std::time::{Duration, Instant, UNIX_EPOCH};

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use mcpwire_core::http::{Headers, ResponseHead};
use mcpwire_core::tunnel::engine::Secret;
use mcpwire_core::tunnel::failure::{FailureSource, TransportErrorKind};
use mcpwire_core::tunnel::{
    engine, ChildId, CommandId, Config, Output, PollId, PostId, StdioConfig, Target, TargetKind,
    Tunnel, TunnelFailure, UsageError,
};

#[derive(Arbitrary, Debug)]
enum CmdKind {
    Request,
    Initialize,
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
    /// 0: the HTTP channel, 1: the stdio channel, 2: a channel nobody serves.
    channel: u8,
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
    Failed {
        which: u8,
    },
    NotStarted {
        which: u8,
    },
    /// A response (or error) from the stdio child.
    Reply {
        id: u8,
        error: bool,
    },
    ServerNotification,
    Stdout {
        bytes: Vec<u8>,
    },
    /// The running stdio child exits (a crash, or the end of a kill).
    Exit,
    /// Whether the next stdio starts fail.
    FailSpawns(bool),
    Post {
        which: u8,
        status: u16,
        retry_after: Option<String>,
    },
    PostFailed {
        which: u8,
        written: bool,
    },
    /// An input naming handles never issued.
    Unknown,
    Shutdown,
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
        CmdKind::Initialize => {
            json!({"jsonrpc": {"jsonrpc": "2.0", "id": c.id, "method": "initialize"}})
        }
        CmdKind::Notification => json!({"jsonrpc": {"jsonrpc": "2.0", "method": "n"}}),
        CmdKind::Termination => json!({"command_type": "session_termination"}),
        CmdKind::Unknown => json!({"command_type": "zzz"}),
        CmdKind::Malformed => json!({"command_type": "jsonrpc", "jsonrpc": 5}),
    };
    v["request_id"] = json!(format!("r{i}"));
    v["shard_token"] = json!(format!("s{i}"));
    v["created_at"] = json!("t");
    v["channel"] = json!(["main", "local", "other"][usize::from(c.channel % 3)]);
    if let Some(t) = c.timeout {
        let unit = ["ns", "us", "ms", "s", "m", "h", "x"][usize::from(c.unit % 7)];
        v["response_timeout"] = json!(format!("{t}{unit}"));
    }
    v
}

/// What the driver holds.
#[derive(Default)]
struct Driver {
    now: Option<Instant>,
    poll: Option<PollId>,
    polls: BTreeSet<PollId>,
    forwards: Vec<CommandId>,
    posts: Vec<PostId>,
    seen_posts: BTreeSet<PostId>,
    child: Option<ChildId>,
    children: BTreeSet<ChildId>,
    fail_spawns: bool,
    stopping: bool,
}

/// An input that names an issued handle: never refused as unknown.
fn issued(r: Result<(), UsageError>) {
    assert!(
        !matches!(r, Err(UsageError::UnknownHandle(_))),
        "an issued handle was refused as unknown: {r:?}"
    );
}

impl Driver {
    fn drain(&mut self, t: &mut Tunnel) {
        let now = self.now.unwrap_or_else(Instant::now);
        while let Some(o) = t.poll_output() {
            match o {
                Output::Poll { id, .. } => {
                    assert!(self.poll.is_none(), "two polls in flight");
                    assert!(!self.stopping, "polled after shutdown");
                    assert!(self.polls.insert(id), "poll id reused");
                    self.poll = Some(id);
                }
                Output::CancelPoll { id } => {
                    assert_eq!(self.poll, Some(id), "cancelled a poll not in flight");
                    self.poll = None;
                }
                Output::Forward { cmd, deadline, .. } => {
                    assert!(
                        deadline.is_none_or(|d| now < d),
                        "forwarded at or after the deadline"
                    );
                    assert!(
                        !self.forwards.contains(&cmd),
                        "command forwarded twice at once"
                    );
                    self.forwards.push(cmd);
                }
                Output::CancelForward { cmd } => self.forwards.retain(|c| *c != cmd),
                Output::Post {
                    id, request, limit, ..
                } => {
                    assert!(
                        limit.deadline.is_none_or(|d| now < d),
                        "posted at or after the deadline"
                    );
                    assert!(!limit.remaining(now).is_zero(), "an attempt with no time");
                    assert!(self.seen_posts.insert(id), "post id reused");
                    let body: serde_json::Value =
                        serde_json::from_slice(&request.body).expect("post body is JSON");
                    assert!(body.get("shard_token").is_none(), "shard token in the body");
                    self.posts.push(id);
                }
                Output::CancelPost { id } => self.posts.retain(|p| *p != id),
                Output::Spawn { child, .. } => {
                    assert!(self.child.is_none(), "a second child while one runs");
                    assert!(self.children.insert(child), "child id reused");
                    if self.fail_spawns {
                        issued(t.handle_spawn_failed(now, child));
                    } else {
                        self.child = Some(child);
                        issued(t.handle_spawned(now, child));
                    }
                }
                Output::Write { child, bytes } => {
                    assert_eq!(self.child, Some(child), "a write to a child not running");
                    assert_eq!(bytes.last(), Some(&b'\n'), "a write ends its line");
                }
                Output::Kill { child } => {
                    assert_eq!(self.child, Some(child), "killed a child not running");
                }
                Output::Event(_) => {}
            }
        }
        let h = t.health();
        assert_eq!(h.posts_in_flight, self.posts.len(), "post count disagrees");
        assert!(h.forwards_in_flight <= 2, "more forwards than allowed");
    }
}

fuzz_target!(|ops: Vec<Op>| {
    let mut now = Instant::now();
    let wall = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let mut engine = engine::Config::new("https://cp.test", "t", Secret::new("k"), "i");
    engine.max_in_flight = 8;
    engine.max_concurrent_forwards = 2;
    engine.max_response_body = 4096;
    engine.channels = vec!["main".into(), "local".into()];
    let config = Config {
        engine,
        targets: vec![
            Target {
                channel: "main".into(),
                kind: TargetKind::Http {
                    url: "http://mcp.test/mcp".into(),
                },
            },
            Target {
                channel: "local".into(),
                kind: TargetKind::Stdio {
                    argv: vec!["server".into()],
                },
            },
        ],
        stdio: StdioConfig {
            max_queued: 4,
            max_frame_bytes: 512,
            max_retired: 2,
            ..StdioConfig::default()
        },
        grace: Duration::from_secs(5),
        restart_seed: 3,
        mcp_extra_headers: Vec::new(),
        harpoon: None,
    };
    let Ok(mut t) = Tunnel::new(config, now) else {
        return;
    };
    let mut d = Driver {
        now: Some(now),
        ..Driver::default()
    };
    d.drain(&mut t);
    t.handle_timeout(now);
    d.drain(&mut t);

    for op in ops.into_iter().take(256) {
        let pick = |v: &Vec<CommandId>, w: u8| (!v.is_empty()).then(|| v[usize::from(w) % v.len()]);
        match op {
            Op::Poll { status, commands } => {
                if let Some(id) = d.poll.take() {
                    let body = serde_json::json!({"commands": commands.iter().take(40).enumerate().map(|(i, c)| command(i, c)).collect::<Vec<_>>()});
                    let bytes = serde_json::to_vec(&body).unwrap_or_default();
                    let status = if status % 4 == 0 { status % 600 } else { 200 };
                    let head = ResponseHead {
                        status,
                        headers: Headers::new(),
                    };
                    issued(t.handle_poll_response(now, now, wall, id, &head, &bytes));
                }
            }
            Op::PollRaw { body } => {
                if let Some(id) = d.poll.take() {
                    let head = ResponseHead {
                        status: 200,
                        headers: Headers::new(),
                    };
                    issued(t.handle_poll_response(now, now, wall, id, &head, &body));
                }
            }
            Op::PollFailed => {
                if let Some(id) = d.poll.take() {
                    issued(t.handle_poll_failed(now, id));
                }
            }
            Op::Head { which, status, sse } => {
                if let Some(cmd) = pick(&d.forwards, which) {
                    let mut h = Headers::new();
                    let _ = h.append(
                        "Content-Type",
                        if sse {
                            "text/event-stream"
                        } else {
                            "application/json"
                        },
                    );
                    let head = ResponseHead {
                        status: status % 600,
                        headers: h,
                    };
                    issued(t.handle_forward_head(now, cmd, head));
                }
            }
            Op::Body { which, bytes } => {
                if let Some(cmd) = pick(&d.forwards, which) {
                    issued(t.handle_forward_body(now, cmd, &bytes));
                }
            }
            Op::End { which } => {
                if let Some(cmd) = pick(&d.forwards, which) {
                    let r = t.handle_forward_end(now, cmd);
                    issued(r.clone());
                    if r.is_ok() {
                        d.forwards.retain(|c| *c != cmd);
                    }
                }
            }
            Op::Failed { which } => {
                if let Some(cmd) = pick(&d.forwards, which) {
                    let f = TunnelFailure::before_response(
                        FailureSource::Connect,
                        Some(TransportErrorKind::Dial),
                    );
                    issued(t.handle_forward_failed(now, cmd, f));
                    d.forwards.retain(|c| *c != cmd);
                }
            }
            Op::NotStarted { which } => {
                if let Some(cmd) = pick(&d.forwards, which) {
                    issued(t.handle_forward_not_started(now, cmd));
                    d.forwards.retain(|c| *c != cmd);
                }
            }
            Op::Reply { id, error } => {
                if let Some(child) = d.child {
                    let line = if error {
                        format!(
                            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"error\":{{\"code\":-1,\"message\":\"m\"}}}}\n"
                        )
                    } else {
                        format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{}}}}\n")
                    };
                    issued(t.handle_stdout(now, child, line.as_bytes()));
                }
            }
            Op::ServerNotification => {
                if let Some(child) = d.child {
                    let line = b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n";
                    issued(t.handle_stdout(now, child, line));
                }
            }
            Op::Stdout { bytes } => {
                if let Some(child) = d.child {
                    issued(t.handle_stdout(now, child, &bytes));
                }
            }
            Op::Exit => {
                if let Some(child) = d.child.take() {
                    issued(t.handle_child_exit(now, child));
                    // A report about the exited child is late: dropped.
                    issued(t.handle_stdout(now, child, b"{}\n"));
                }
            }
            Op::FailSpawns(fail) => d.fail_spawns = fail,
            Op::Post {
                which,
                status,
                retry_after,
            } => {
                if !d.posts.is_empty() {
                    let id = d.posts.remove(usize::from(which) % d.posts.len());
                    let mut h = Headers::new();
                    if let Some(v) = retry_after {
                        let _ = h.append("Retry-After", v);
                    }
                    let head = ResponseHead {
                        status: status % 600,
                        headers: h,
                    };
                    t.handle_post_response(now, wall, id, &head)
                        .expect("a known post is accepted");
                    // A second answer is late: dropped.
                    t.handle_post_response(now, wall, id, &head)
                        .expect("a late post answer is dropped");
                }
            }
            Op::PostFailed { which, written } => {
                if !d.posts.is_empty() {
                    let id = d.posts.remove(usize::from(which) % d.posts.len());
                    t.handle_post_failed(now, id, written)
                        .expect("a known post is accepted");
                }
            }
            Op::Unknown => {
                let never = u64::MAX / 2;
                assert!(matches!(
                    t.handle_forward_end(now, CommandId(never)),
                    Err(UsageError::UnknownHandle(_))
                ));
                assert!(matches!(
                    t.handle_post_failed(now, PostId(never), false),
                    Err(UsageError::UnknownHandle(_))
                ));
                assert!(matches!(
                    t.handle_poll_failed(now, PollId(never)),
                    Err(UsageError::UnknownHandle(_))
                ));
                let child = ChildId {
                    channel: 0,
                    generation: never,
                };
                assert!(matches!(
                    t.handle_stdout(now, child, b"x"),
                    Err(UsageError::UnknownHandle(_))
                ));
            }
            Op::Shutdown => {
                t.shutdown(now);
                d.stopping = true;
            }
            Op::Advance { ms } => {
                now += Duration::from_millis(u64::from(ms));
                d.now = Some(now);
                t.handle_timeout(now);
            }
        }
        d.drain(&mut t);
        if d.stopping {
            assert!(t.is_stopping());
        }
    }
});

//! The whole tunnel ([`Tunnel`]: the engine, the route table, the stdio bindings and their
//! restart supervisors) driven the way a driver drives it, with scripted children and a
//! scripted control plane. The Go client's reported failure (a stdio deadline takes the client
//! down) must not happen here: a request that outlives its deadline retires its id; the next
//! command is written and answered; the late response is discarded, never posted.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant, UNIX_EPOCH};

use mcpwire_core::http::{Headers, Method, Request, ResponseHead};
use mcpwire_core::tunnel::engine::{Secret, Stage};
use mcpwire_core::tunnel::failure::FailureSource;
use mcpwire_core::tunnel::{
    engine, ChildId, CommandId, Config, DiscardReason, Event, Output, PollId, PostId, StdioConfig,
    Target, TargetKind, TimeoutReason, Tunnel, UsageError, POLL_GUARD, POST_ATTEMPT_CAP,
};
use serde_json::{json, Value};

/// A driver that performs nothing but records what it was asked to do: spawns succeed unless
/// `fail_spawns`, every POST is answered 200 at once.
struct Sim {
    tunnel: Tunnel,
    now: Instant,
    fail_spawns: bool,
    /// Children spawned and not yet exited, per channel.
    running: Vec<ChildId>,
    spawns: Vec<ChildId>,
    kills: Vec<ChildId>,
    /// Lines written to a child's stdin, with the child.
    written: Vec<(ChildId, String)>,
    polls: Vec<(PollId, Duration)>,
    cancelled_polls: Vec<PollId>,
    forwards: Vec<(CommandId, Request)>,
    cancelled_forwards: Vec<CommandId>,
    posts: Vec<Value>,
    refused: Vec<(String, FailureSource)>,
    events: Vec<engine::Event>,
    discarded: Vec<DiscardReason>,
    restarting: usize,
    exited: usize,
}

fn config(targets: Vec<Target>) -> Config {
    let mut engine = engine::Config::new("https://cp.test", "t", Secret::new("k"), "i");
    engine.channels = targets.iter().map(|t| t.channel.clone()).collect();
    Config {
        engine,
        targets,
        stdio: StdioConfig::default(),
        grace: Duration::from_secs(5),
        restart_seed: 1,
        mcp_extra_headers: Vec::new(),
        harpoon: None,
    }
}

fn stdio(channel: &str) -> Target {
    Target {
        channel: channel.into(),
        kind: TargetKind::Stdio {
            argv: vec!["server".into(), "--flag".into()],
        },
    }
}

fn http(channel: &str, url: &str) -> Target {
    Target {
        channel: channel.into(),
        kind: TargetKind::Http { url: url.into() },
    }
}

impl Sim {
    fn new(config: Config) -> Self {
        Self::with(config, false)
    }

    fn with(config: Config, fail_spawns: bool) -> Self {
        let now = Instant::now();
        let mut s = Sim {
            tunnel: Tunnel::new(config, now).unwrap(),
            now,
            fail_spawns,
            running: Vec::new(),
            spawns: Vec::new(),
            kills: Vec::new(),
            written: Vec::new(),
            polls: Vec::new(),
            cancelled_polls: Vec::new(),
            forwards: Vec::new(),
            cancelled_forwards: Vec::new(),
            posts: Vec::new(),
            refused: Vec::new(),
            events: Vec::new(),
            discarded: Vec::new(),
            restarting: 0,
            exited: 0,
        };
        s.drain();
        s.tunnel.handle_timeout(now);
        s.drain();
        s
    }

    fn drain(&mut self) {
        while let Some(o) = self.tunnel.poll_output() {
            match o {
                Output::Poll { id, timeout, .. } => self.polls.push((id, timeout)),
                Output::CancelPoll { id } => self.cancelled_polls.push(id),
                Output::Forward { cmd, request, .. } => self.forwards.push((cmd, request)),
                Output::CancelForward { cmd } => self.cancelled_forwards.push(cmd),
                Output::Post {
                    id, request, limit, ..
                } => {
                    assert!(limit.cap == POST_ATTEMPT_CAP);
                    self.posts
                        .push(serde_json::from_slice(&request.body).unwrap());
                    self.answer_post(id);
                }
                Output::CancelPost { .. } => {}
                Output::Spawn {
                    child,
                    program,
                    args,
                    ..
                } => {
                    assert_eq!(program, "server");
                    assert_eq!(args, ["--flag"]);
                    self.spawns.push(child);
                    if self.fail_spawns {
                        self.tunnel.handle_spawn_failed(self.now, child).unwrap();
                    } else {
                        self.running.retain(|c| c.channel != child.channel);
                        self.running.push(child);
                        self.tunnel.handle_spawned(self.now, child).unwrap();
                    }
                }
                Output::Write { child, bytes } => {
                    assert!(
                        self.running.contains(&child),
                        "a write to a child not running"
                    );
                    self.written
                        .push((child, String::from_utf8(bytes).unwrap()));
                }
                Output::Kill { child } => self.kills.push(child),
                Output::Event(e) => match e {
                    Event::Engine(e) => self.events.push(e),
                    Event::ForwardRefused {
                        request_id,
                        failure,
                    } => self.refused.push((request_id, failure.source())),
                    Event::StdioDiscarded { reason, .. } => self.discarded.push(reason),
                    Event::StdioRestarting { .. } => self.restarting += 1,
                    Event::StdioExited { .. } => self.exited += 1,
                    _ => {}
                },
            }
        }
    }

    fn answer_post(&mut self, id: PostId) {
        let head = ResponseHead {
            status: 200,
            headers: Headers::new(),
        };
        self.tunnel
            .handle_post_response(self.now, UNIX_EPOCH, id, &head)
            .unwrap();
    }

    fn poll_with(&mut self, commands: Value) {
        let (id, _) = self.polls.pop().expect("a poll is out");
        let head = ResponseHead {
            status: 200,
            headers: Headers::new(),
        };
        let body = serde_json::to_vec(&json!({ "commands": commands })).unwrap();
        self.tunnel
            .handle_poll_response(self.now, self.now, UNIX_EPOCH, id, &head, &body)
            .unwrap();
        self.drain();
    }

    /// Answers the poll out with a `204`.
    fn answer_poll_empty(&mut self) {
        let (id, _) = self.polls.pop().expect("a poll is out");
        let head = ResponseHead {
            status: 204,
            headers: Headers::new(),
        };
        self.tunnel
            .handle_poll_response(self.now, self.now, UNIX_EPOCH, id, &head, b"")
            .unwrap();
        self.drain();
    }

    fn child(&self, channel: usize) -> ChildId {
        *self
            .running
            .iter()
            .find(|c| c.channel == channel)
            .expect("a child runs")
    }

    fn stdout(&mut self, child: ChildId, bytes: &[u8]) {
        self.tunnel.handle_stdout(self.now, child, bytes).unwrap();
        self.drain();
    }

    fn exit(&mut self, child: ChildId) {
        self.running.retain(|c| *c != child);
        self.tunnel.handle_child_exit(self.now, child).unwrap();
        self.drain();
    }

    fn advance(&mut self, d: Duration) {
        self.now += d;
        self.tunnel.handle_timeout(self.now);
        self.drain();
    }

    /// Advances to the next restart the tunnel waits for.
    fn until_restart(&mut self) {
        let t = self.tunnel.poll_timeout().unwrap();
        assert!(
            matches!(t.reason, TimeoutReason::StdioRestart { .. }),
            "{t:?}"
        );
        let d = t.at.saturating_duration_since(self.now);
        self.advance(d);
    }
}

fn call(request_id: &str, id: i64, name: &str, timeout: &str) -> Value {
    json!({"request_id": request_id, "shard_token": format!("s-{request_id}"), "created_at": "x",
           "response_timeout": timeout,
           "jsonrpc": {"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name}}})
}

fn on(mut v: Value, channel: &str) -> Value {
    v["channel"] = json!(channel);
    v
}

#[test]
fn stdio_deadline_retires_the_id_and_the_client_keeps_serving() {
    let mut g = Sim::new(config(vec![stdio("main")]));
    g.poll_with(json!([
        call("slow", 1, "slow", "1s"),
        call("fast", 2, "fast", "30s")
    ]));
    // One lifecycle at a time: only the slow request is on the child's stdin.
    assert_eq!(g.written.len(), 1);
    assert!(g.written[0].1.contains(r#""name":"slow""#));

    // The deadline passes while the child works on it.
    g.advance(Duration::from_secs(1));
    assert!(g.events.contains(&engine::Event::Expired {
        request_id: "slow".into(),
        stage: Stage::DuringForward
    }));
    // The binding retired id 1 and wrote the next command on the same pipes.
    assert_eq!(
        g.written.len(),
        2,
        "the next command was not served after a deadline"
    );
    assert!(g.written[1].1.contains(r#""name":"fast""#));
    // The deadline of a stdio command closes nothing: no HTTP cancellation, no kill.
    assert!(g.cancelled_forwards.is_empty() && g.kills.is_empty());

    // The late response for the retired id arrives first, then the real one.
    let child = g.child(0);
    g.stdout(
        child,
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"late\":true}}\n{\"jsonrpc\":\"2.0\",\"id\":2,",
    );
    g.stdout(child, b"\"result\":{\"ok\":true}}\n");
    assert_eq!(g.discarded, vec![DiscardReason::LateResponse]);
    assert_eq!(g.posts.len(), 1, "{:?}", g.posts);
    assert_eq!(g.posts[0]["request_id"], "fast");
    assert_eq!(
        g.posts[0]["resp_json"],
        json!({"jsonrpc": "2.0", "id": 2, "result": {"ok": true}})
    );
    assert!(g
        .events
        .iter()
        .any(|e| matches!(e, engine::Event::Completed { request_id, .. } if request_id == "fast")));
    assert_eq!(g.tunnel.health().in_flight, 0);
}

#[test]
fn forwards_go_to_their_channels_server_and_an_unserved_route_is_client_internal() {
    let mut cfg = config(vec![stdio("local"), http("main", "http://mcp.test/mcp")]);
    // The engine serves a channel the route table lacks (a configuration the tunnel must not
    // lose a command to).
    cfg.engine.channels.push("ghost".into());
    let mut g = Sim::new(cfg);
    g.poll_with(json!([
        on(call("a", 1, "x", "30s"), "local"),
        on(call("b", 2, "y", "30s"), "main"),
        on(call("c", 3, "z", "30s"), "ghost"),
    ]));
    assert_eq!(g.written.len(), 1);
    assert!(g.written[0].1.contains(r#""name":"x""#));
    assert_eq!(g.forwards.len(), 1);
    let (cmd, req) = &g.forwards[0];
    assert_eq!(req.method, Method::Post);
    assert_eq!(req.url, "http://mcp.test/mcp");
    assert!(String::from_utf8_lossy(&req.body).contains(r#""name":"y""#));
    // The ghost command is answered with a synthesized client_internal failure.
    assert_eq!(g.posts.len(), 1);
    assert_eq!(g.posts[0]["request_id"], "c");
    assert_eq!(
        g.posts[0]["resp_json"]["error"]["data"]["tunnel_failure"]["source"],
        "client_internal"
    );
    // An HTTP forward the driver could not start is answered the same way.
    let cmd = *cmd;
    g.tunnel.handle_forward_not_started(g.now, cmd).unwrap();
    g.drain();
    assert_eq!(g.posts.len(), 2);
    assert_eq!(g.posts[1]["request_id"], "b");
    assert_eq!(
        g.posts[1]["resp_json"]["error"]["data"]["tunnel_failure"]["source"],
        "client_internal"
    );
}

#[test]
fn a_stdio_refusal_is_reported_and_answered_locally() {
    let mut g = Sim::new(config(vec![stdio("main")]));
    g.poll_with(
        json!([{"request_id": "end", "shard_token": "s", "created_at": "x",
                        "command_type": "session_termination",
                        "headers": {"Mcp-Session-Id": ["abc"]}}]),
    );
    assert!(g.written.is_empty());
    assert_eq!(
        g.refused,
        vec![("end".to_owned(), FailureSource::ClientInternal)]
    );
    assert_eq!(g.posts.len(), 1);
    assert_eq!(g.posts[0]["resp_type"], "session_termination_response");
    assert_eq!(g.posts[0]["resp_code"], 502);
}

#[test]
fn an_http_deadline_cancels_that_forward_only() {
    let mut g = Sim::new(config(vec![http("main", "http://mcp.test/mcp")]));
    g.poll_with(json!([call("a", 1, "x", "2s")]));
    let cmd = g.forwards[0].0;
    g.advance(Duration::from_secs(2));
    assert_eq!(g.cancelled_forwards, vec![cmd]);
    assert!(g.posts.is_empty());
}

#[test]
fn a_crashed_child_restarts_with_backoff_and_gets_the_frames_written_meanwhile() {
    let mut g = Sim::new(config(vec![stdio("main")]));
    assert_eq!(g.spawns.len(), 1);
    let first = g.child(0);
    g.poll_with(json!([call("a", 1, "x", "60s")]));
    g.exit(first);
    assert_eq!(g.exited, 1);
    // Its command fails with transport_closed.
    assert_eq!(g.posts.len(), 1);
    assert_eq!(
        g.posts[0]["resp_json"]["error"]["data"]["tunnel_failure"]["source"],
        "transport_closed"
    );
    // A restart is scheduled within the first backoff step.
    let t = g.tunnel.poll_timeout().unwrap();
    assert_eq!(t.reason, TimeoutReason::StdioRestart { channel: 0 });
    assert!(t.at - g.now <= Duration::from_millis(200));
    // A command arriving meanwhile is written to no child: it waits for the next one.
    g.poll_with(json!([call("b", 2, "y", "60s")]));
    let before = g.written.len();
    g.until_restart();
    assert_eq!(g.spawns.len(), 2);
    let second = g.child(0);
    assert!(second.generation > first.generation);
    assert_eq!(g.written.len(), before + 1);
    assert_eq!(g.written.last().unwrap().0, second);
    assert!(g.written.last().unwrap().1.contains(r#""name":"y""#));
    // Output of the old child is late: dropped, not an error.
    g.tunnel.handle_stdout(g.now, first, b"{}\n").unwrap();
    g.tunnel.handle_child_exit(g.now, first).unwrap();
    g.drain();
    assert_eq!(g.exited, 1);
}

#[test]
fn restarts_back_off_while_the_child_keeps_failing_and_start_over_after_a_healthy_run() {
    let mut g = Sim::with(config(vec![stdio("main")]), true);
    let mut delays = Vec::new();
    for _ in 0..10 {
        let t = g.tunnel.poll_timeout().unwrap();
        if let TimeoutReason::StdioRestart { .. } = t.reason {
            delays.push(t.at - g.now);
            g.until_restart();
        } else {
            // The next poll comes first: answer it empty.
            g.answer_poll_empty();
        }
    }
    assert!(delays.len() >= 8, "{delays:?}");
    for (d, ceiling) in delays
        .iter()
        .zip([200u64, 400, 800, 1600, 3200, 6400, 12800, 25600])
    {
        let c = Duration::from_millis(ceiling);
        assert!(*d >= c / 2 && *d <= c, "{d:?} vs {c:?}");
    }
    // A child that then runs 30 s before crashing restarts after the first step again.
    g.fail_spawns = false;
    while g.running.is_empty() {
        let t = g.tunnel.poll_timeout().unwrap();
        let d = t.at.saturating_duration_since(g.now);
        g.advance(d);
        if !g.polls.is_empty() {
            g.answer_poll_empty();
        }
    }
    let child = g.child(0);
    g.now += Duration::from_secs(30);
    g.exit(child);
    let t = g.tunnel.poll_timeout().unwrap();
    assert_eq!(t.reason, TimeoutReason::StdioRestart { channel: 0 });
    assert!(t.at - g.now <= Duration::from_millis(200));
}

#[test]
fn a_failed_start_answers_what_waits_and_drops_its_frames() {
    let mut g = Sim::with(config(vec![stdio("main")]), true);
    assert!(g.running.is_empty());
    g.poll_with(json!([call("a", 1, "x", "60s")]));
    // Written to no child (none runs); the next start fails too: the command is answered.
    g.until_restart();
    assert!(g.written.is_empty());
    assert_eq!(g.posts.len(), 1);
    assert_eq!(
        g.posts[0]["resp_json"]["error"]["data"]["tunnel_failure"]["source"],
        "transport_closed"
    );
    // Once a start succeeds, the dropped frame is not replayed.
    g.fail_spawns = false;
    g.until_restart();
    assert_eq!(g.running.len(), 1);
    assert!(g.written.is_empty());
}

#[test]
fn an_initialize_deadline_kills_the_child_and_its_exit_starts_the_replacement_at_once() {
    let mut g = Sim::new(config(vec![stdio("main")]));
    let first = g.child(0);
    let init = json!({"request_id": "init", "shard_token": "s", "created_at": "x",
        "response_timeout": "1s",
        "jsonrpc": {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}}});
    g.poll_with(json!([init, call("next", 1, "x", "60s")]));
    assert_eq!(g.written.len(), 1);
    g.advance(Duration::from_secs(1));
    assert_eq!(g.restarting, 1);
    assert_eq!(g.kills, vec![first]);
    // The waiting command failed closed with the restart.
    assert_eq!(g.posts.len(), 1);
    assert_eq!(g.posts[0]["request_id"], "next");
    // A command arriving before the old child's exit waits for the replacement.
    g.poll_with(json!([call("later", 2, "y", "60s")]));
    assert_eq!(g.written.len(), 1);
    g.exit(first);
    assert_eq!(g.spawns.len(), 2, "the replacement starts at once");
    assert_eq!(g.exited, 0, "a requested restart is not a crash");
    let second = g.child(0);
    assert_eq!(g.written.len(), 2);
    assert_eq!(g.written[1].0, second);
    assert!(g.written[1].1.contains(r#""name":"y""#));
}

#[test]
fn polls_carry_their_guard_and_shutdown_abandons_the_poll_in_flight() {
    let mut g = Sim::new(config(vec![stdio("main")]));
    let (id, timeout) = *g.polls.last().unwrap();
    assert_eq!(timeout, Duration::from_secs(15) + POLL_GUARD);
    assert!(!g.tunnel.is_stopping());
    g.tunnel.shutdown(g.now);
    g.drain();
    assert_eq!(g.cancelled_polls, vec![id]);
    assert!(g.tunnel.is_stopping());
    assert!(g.tunnel.is_done(g.now), "idle: done at once");
    // The abandoned poll's report is late: dropped.
    g.tunnel.handle_poll_failed(g.now, id).unwrap();
    g.drain();
    assert_eq!(g.polls.len(), 1, "no poll after shutdown");
}

#[test]
fn shutdown_waits_for_admitted_commands_until_the_grace_period_ends() {
    let mut g = Sim::new(config(vec![stdio("main")]));
    g.poll_with(json!([call("a", 1, "x", "60s")]));
    g.tunnel.shutdown(g.now);
    g.drain();
    assert!(!g.tunnel.is_done(g.now));
    let t = g.tunnel.poll_timeout().unwrap();
    assert_eq!(t.reason, TimeoutReason::Grace);
    assert_eq!(t.at - g.now, Duration::from_secs(5));
    assert!(g.tunnel.is_done(t.at));
    // Answered in time: done before the grace period ends.
    let child = g.child(0);
    g.stdout(child, b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n");
    assert!(g.tunnel.is_done(g.now));
}

#[test]
fn late_inputs_are_dropped_and_never_issued_handles_are_refused() {
    let mut g = Sim::new(config(vec![stdio("main")]));
    let child = g.child(0);
    let never = ChildId {
        channel: 0,
        generation: child.generation + 1,
    };
    assert_eq!(
        g.tunnel.handle_stdout(g.now, never, b"x"),
        Err(UsageError::UnknownHandle("stdio child"))
    );
    assert_eq!(
        g.tunnel.handle_child_exit(
            g.now,
            ChildId {
                channel: 7,
                generation: 1
            }
        ),
        Err(UsageError::UnknownHandle("stdio child"))
    );
    // A spawn report for a child already running is late.
    g.tunnel.handle_spawned(g.now, child).unwrap();
    g.tunnel.handle_spawn_failed(g.now, child).unwrap();
    g.drain();
    assert!(g.written.is_empty() && g.posts.is_empty() && g.spawns.len() == 1);
    // Engine handles: never issued is refused, through the tunnel as through the engine.
    assert_eq!(
        g.tunnel.handle_post_failed(g.now, PostId(999), false),
        Err(UsageError::UnknownHandle("post"))
    );
    assert_eq!(
        g.tunnel.handle_forward_end(g.now, CommandId(999)),
        Err(UsageError::UnknownHandle("forward"))
    );
}

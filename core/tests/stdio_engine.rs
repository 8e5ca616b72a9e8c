//! The engine and the shared stdio binding wired together the way a driver wires them, with a
//! scripted child process: the Go client's reported failure (a stdio deadline takes the client
//! down) must not happen here. A request that outlives its deadline retires its id; the next
//! command is written and answered; the late response is discarded, never posted.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant, UNIX_EPOCH};

use mcpwire_core::http::{Headers, Request, ResponseHead};
use mcpwire_core::tunnel::engine::{CommandId, Config, Event, ForwardKind, Output, Secret, Stage};
use mcpwire_core::tunnel::stdio::{DiscardReason, StdioBinding, StdioConfig, StdioOutput};
use mcpwire_core::tunnel::Engine;
use serde_json::{json, Value};

/// A driver's glue: engine outputs go to the binding, binding outputs back to the engine.
struct Glue {
    engine: Engine,
    stdio: StdioBinding,
    now: Instant,
    written: Vec<String>,
    posts: Vec<Value>,
    events: Vec<Event>,
    discarded: Vec<DiscardReason>,
}

impl Glue {
    fn pump(&mut self) {
        loop {
            let mut progressed = false;
            while let Some(o) = self.engine.poll_output() {
                progressed = true;
                match o {
                    Output::Poll { .. } => {}
                    Output::Forward(f) => {
                        let ForwardKind::JsonRpc { payload, .. } = &f.kind else {
                            panic!()
                        };
                        if let Err(e) = self.stdio.handle_command(f.cmd.0, payload.get()) {
                            self.engine
                                .handle_forward_failed(self.now, f.cmd, e.to_tunnel_failure())
                                .unwrap();
                        }
                    }
                    Output::CancelForward { cmd } => self.stdio.handle_deadline(cmd.0),
                    Output::Post { id, request, .. } => {
                        self.posts.push(body(&request));
                        let head = ResponseHead {
                            status: 200,
                            headers: Headers::new(),
                        };
                        self.engine
                            .handle_post_response(self.now, UNIX_EPOCH, id, &head)
                            .unwrap();
                    }
                    Output::CancelPost { .. } => {}
                    Output::Event(e) => self.events.push(e),
                }
            }
            while let Some(o) = self.stdio.poll_output() {
                progressed = true;
                match o {
                    StdioOutput::Write(bytes) => {
                        self.written.push(String::from_utf8(bytes).unwrap())
                    }
                    StdioOutput::Message { token, json }
                    | StdioOutput::Response { token, json } => {
                        self.engine
                            .handle_forward_message(self.now, CommandId(token), &json)
                            .unwrap();
                    }
                    StdioOutput::NotificationSent { token } => {
                        self.engine
                            .handle_forward_acknowledged(self.now, CommandId(token))
                            .unwrap();
                    }
                    StdioOutput::Failed { token, reason } => {
                        self.engine
                            .handle_forward_failed(
                                self.now,
                                CommandId(token),
                                reason.to_tunnel_failure(),
                            )
                            .unwrap();
                    }
                    StdioOutput::Restart => {
                        panic!("a non-initialize deadline must not restart the child")
                    }
                    StdioOutput::Discarded { reason, .. } => self.discarded.push(reason),
                }
            }
            if !progressed {
                break;
            }
        }
    }
}

fn body(r: &Request) -> Value {
    serde_json::from_slice(&r.body).unwrap()
}

#[test]
fn stdio_deadline_retires_the_id_and_the_client_keeps_serving() {
    let now = Instant::now();
    let mut engine = Engine::new(
        Config::new("https://cp.test", "t", Secret::new("k"), "i"),
        now,
    )
    .unwrap();
    engine.handle_timeout(now);
    let poll = loop {
        match engine.poll_output() {
            Some(Output::Poll { id, .. }) => break id,
            Some(_) => continue,
            None => panic!("no poll"),
        }
    };
    let commands = json!({"commands": [
        {"request_id": "slow", "shard_token": "s1", "created_at": "x", "response_timeout": "1s",
         "jsonrpc": {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "slow"}}},
        {"request_id": "fast", "shard_token": "s2", "created_at": "x", "response_timeout": "30s",
         "jsonrpc": {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "fast"}}}
    ]});
    let head = ResponseHead {
        status: 200,
        headers: Headers::new(),
    };
    engine
        .handle_poll_response(
            now,
            now,
            UNIX_EPOCH,
            poll,
            &head,
            &serde_json::to_vec(&commands).unwrap(),
        )
        .unwrap();
    let mut g = Glue {
        engine,
        stdio: StdioBinding::new(StdioConfig::default()),
        now,
        written: Vec::new(),
        posts: Vec::new(),
        events: Vec::new(),
        discarded: Vec::new(),
    };
    g.pump();
    // One lifecycle at a time: only the slow request is on the child's stdin.
    assert_eq!(g.written.len(), 1);
    assert!(g.written[0].contains(r#""name":"slow""#));

    // The deadline passes while the child works on it.
    g.now += Duration::from_secs(1);
    g.engine.handle_timeout(g.now);
    g.pump();
    assert!(g.events.contains(&Event::Expired {
        request_id: "slow".into(),
        stage: Stage::DuringForward
    }));
    // The binding retired id 1 and wrote the next command on the same pipes.
    assert_eq!(
        g.written.len(),
        2,
        "the next command was not served after a deadline"
    );
    assert!(g.written[1].contains(r#""name":"fast""#));

    // The late response for the retired id arrives first, then the real one.
    g.stdio.handle_stdout(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"late\":true}}\n{\"jsonrpc\":\"2.0\",\"id\":2,");
    g.pump();
    g.stdio.handle_stdout(b"\"result\":{\"ok\":true}}\n");
    g.pump();
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
        .any(|e| matches!(e, Event::Completed { request_id, .. } if request_id == "fast")));
    assert_eq!(g.engine.health().in_flight, 0);
}

//! `mcpwire tunnel demo`: the tunnel engine end to end with no outside service.
//!
//! An in-memory driver runs [`mcpwire_core::tunnel::Engine`] against a scripted control plane
//! and a small MCP server, both in this process, on a virtual clock (nothing sleeps). The
//! script covers each lifecycle the protocol names: a JSON reply, an SSE stream with a progress
//! notification before the terminal response, a notification acknowledged, a session
//! termination, a command that expired on receipt, an unknown command type, a target failure
//! turned into a synthesized `-32603` with provenance, a command that outlives its deadline
//! while the server works, and a response POST retried after `503` with `Retry-After`.
//!
//! The loop below is the shape every real driver has: feed an input, drain the outputs, perform
//! them, sleep until [`Engine::poll_timeout`].

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;
use std::time::{Instant, SystemTime};

use mcpwire_core::http::{Headers, Request, ResponseHead};
use mcpwire_core::tunnel::engine::{Config, Event, Forward, ForwardKind, Output, Secret, Stage};
use mcpwire_core::tunnel::server_info::{ChannelBinding, ChannelDeclaration, ServerInfo};
use mcpwire_core::tunnel::{CommandId, Engine, PostId};
use serde_json::{json, Value};

/// What one demo run did, for the summary line and for tests.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Summary {
    /// Commands whose terminal response was delivered.
    pub completed: usize,
    /// Commands dropped because their deadline passed.
    pub expired: usize,
    /// Commands of an unknown type, skipped.
    pub skipped: usize,
    /// Intermediate `jsonrpc_notify` posts delivered.
    pub notifications: usize,
    /// Response POSTs the control plane asked to retry.
    pub retried_posts: usize,
    /// Response bodies posted, in order (`request_id`, compact JSON).
    pub posts: Vec<(String, String)>,
}

/// How the in-process MCP server answers one forward.
enum Reply {
    /// A complete response: status, content type, body.
    Http(u16, &'static str, String),
    /// Never answers (the command's deadline cancels it).
    Hang,
}

/// The in-process MCP server: an `echo` tool, a `broken` tool, a `slow` tool.
fn mcp_server(forward: &Forward) -> Reply {
    let ForwardKind::JsonRpc {
        payload,
        method,
        id,
    } = &forward.kind
    else {
        return Reply::Http(204, "", String::new());
    };
    let id = id
        .as_ref()
        .and_then(|i| serde_json::to_string(i).ok())
        .unwrap_or_else(|| "null".into());
    let request: Value = serde_json::from_str(payload.get()).unwrap_or(Value::Null);
    match method.as_deref() {
        Some("tools/list") => Reply::Http(
            200,
            "application/json",
            format!(
                r#"{{"jsonrpc":"2.0","id":{id},"result":{{"tools":[{{"name":"echo","inputSchema":{{"type":"object"}}}}]}}}}"#
            ),
        ),
        Some("tools/call") => match request["params"]["name"].as_str() {
            Some("echo") => {
                let text = request["params"]["arguments"]["text"]
                    .as_str()
                    .unwrap_or("");
                let result = json!({"jsonrpc": "2.0", "id": Value::Null, "result": {"content": [{"type": "text", "text": text}]}});
                let result = result
                    .to_string()
                    .replace(r#""id":null"#, &format!(r#""id":{id}"#));
                Reply::Http(
                    200,
                    "text/event-stream",
                    format!(
                        ": ping\n\nid: 1\ndata:\n\ndata: {{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{{\"progressToken\":\"p\",\"progress\":0.5}}}}\n\ndata: {result}\n\n"
                    ),
                )
            }
            Some("broken") => Reply::Http(
                500,
                "text/html",
                "<html>Internal error at /srv/app</html>".into(),
            ),
            _ => Reply::Hang,
        },
        Some(m) if m.starts_with("notifications/") => Reply::Http(202, "", String::new()),
        _ => Reply::Hang,
    }
}

fn command(request_id: &str, timeout: Option<&str>, rpc: Value) -> Value {
    let mut c = json!({
        "request_id": request_id,
        "shard_token": format!("shard:{request_id}"),
        "command_type": "jsonrpc",
        "channel": "main",
        "created_at": "2026-11-29T00:00:00Z",
        "headers": {"Mcp-Session-Id": ["demo-session"]},
        "jsonrpc": rpc
    });
    if let Some(t) = timeout {
        c["response_timeout"] = json!(t);
    }
    c
}

/// The control plane's poll script: one batch of commands, then an empty poll.
fn poll_script() -> VecDeque<Option<Value>> {
    let batch = json!({"commands": [
        command("req_list", Some("30s"), json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})),
        command("req_echo", Some("30s"), json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "hello through the tunnel"}, "_meta": {"progressToken": "p"}}})),
        command("req_note", None, json!({"jsonrpc": "2.0", "method": "notifications/initialized"})),
        command("req_broken", Some("30s"), json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": "broken", "arguments": {}}})),
        command("req_slow", Some("2s"), json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
            "params": {"name": "slow", "arguments": {}}})),
        command("req_expired", Some("0s"), json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list"})),
        {"request_id": "req_future", "shard_token": "shard:req_future", "command_type": "future_command",
         "created_at": "2026-11-29T00:00:00Z"},
        {"request_id": "req_end", "shard_token": "shard:req_end", "command_type": "session_termination",
         "channel": "main", "created_at": "2026-11-29T00:00:00Z", "headers": {"Mcp-Session-Id": ["demo-session"]}}
    ]});
    VecDeque::from([Some(batch), None])
}

struct Demo {
    engine: Engine,
    t0: Instant,
    now: Instant,
    out: String,
    summary: Summary,
    polls: VecDeque<Option<Value>>,
    /// Statuses the control plane answers for the next POSTs of a request id (then 200).
    post_script: BTreeMap<String, VecDeque<u16>>,
    post_owner: BTreeMap<PostId, String>,
    hanging: Vec<CommandId>,
}

impl Demo {
    fn line(&mut self, what: &str, text: impl AsRef<str>) {
        let ms = self.now.duration_since(self.t0).as_millis();
        let _ = writeln!(self.out, "t+{ms:<6} {what:<9} {}", text.as_ref());
    }

    fn path(url: &str) -> &str {
        url.find("/v1/").map_or(url, |i| &url[i..])
    }

    fn perform(&mut self, output: Output) {
        match output {
            Output::Poll { id, request } => {
                self.line("poll", format!("GET {}", Self::path(&request.url)));
                let (status, body) = match self.polls.pop_front() {
                    Some(Some(batch)) => (200, serde_json::to_vec(&batch).unwrap_or_default()),
                    Some(None) => (204, Vec::new()),
                    None => {
                        // End of the script: stop polling; the poll stays unanswered.
                        self.engine.shutdown(self.now);
                        self.line("poll", "(script finished: the engine stops polling)");
                        return;
                    }
                };
                let head = ResponseHead {
                    status,
                    headers: Headers::new(),
                };
                let wall = SystemTime::now();
                let _ = self
                    .engine
                    .handle_poll_response(self.now, self.now, wall, id, &head, &body);
            }
            Output::Forward(f) => {
                let what = match &f.kind {
                    ForwardKind::JsonRpc { method, .. } => method.clone().unwrap_or_default(),
                    ForwardKind::SessionTermination => "DELETE session".into(),
                };
                self.line(
                    "forward",
                    format!("{} -> channel {}: {what}", f.request_id, f.channel),
                );
                match mcp_server(&f) {
                    Reply::Hang => {
                        self.line(
                            "mcp",
                            format!("{}: the server is still working...", f.request_id),
                        );
                        self.hanging.push(f.cmd);
                    }
                    Reply::Http(status, content_type, body) => {
                        let mut headers = Headers::new();
                        if !content_type.is_empty() {
                            let _ = headers.append("Content-Type", content_type);
                        }
                        let _ = headers.append("Mcp-Session-Id", "demo-session");
                        let _ = headers.append("X-Upstream-Internal", "dropped by the allowlist");
                        self.line(
                            "mcp",
                            format!("{}: HTTP {status} {content_type}", f.request_id),
                        );
                        let _ = self.engine.handle_forward_head(
                            self.now,
                            f.cmd,
                            ResponseHead { status, headers },
                        );
                        // Feed the body in two chunks, as a network would.
                        let bytes = body.as_bytes();
                        let (a, b) = bytes.split_at(bytes.len() / 2);
                        let _ = self.engine.handle_forward_body(self.now, f.cmd, a);
                        let _ = self.engine.handle_forward_body(self.now, f.cmd, b);
                        let _ = self.engine.handle_forward_end(self.now, f.cmd);
                    }
                }
            }
            Output::Post { id, request, .. } => self.post(id, &request),
            Output::CancelForward { cmd } => {
                self.hanging.retain(|c| *c != cmd);
                self.line(
                    "stop",
                    format!(
                        "forward #{}: the engine needs no more of it (close its stream)",
                        cmd.0
                    ),
                );
            }
            Output::CancelPost { id } => self.line("cancel", format!("post {}", id.0)),
            Output::Event(e) => self.event(e),
        }
    }

    fn post(&mut self, id: PostId, request: &Request) {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let request_id = body["request_id"].as_str().unwrap_or("").to_owned();
        let shard = request.headers.get("X-Tunnel-Shard-Token").unwrap_or("");
        let compact = String::from_utf8_lossy(&request.body).into_owned();
        self.line(
            "post",
            format!(
                "{request_id} [{}] {} (shard token in header: {shard})",
                body["resp_type"].as_str().unwrap_or(""),
                body["resp_code"]
            ),
        );
        self.line("", format!("  {compact}"));
        let status = self
            .post_script
            .get_mut(&request_id)
            .and_then(VecDeque::pop_front)
            .unwrap_or(200);
        let mut headers = Headers::new();
        if status == 503 {
            let _ = headers.append("Retry-After", "1");
            self.summary.retried_posts += 1;
            self.line(
                "control",
                format!("{request_id}: 503 Service Unavailable, Retry-After: 1"),
            );
        } else {
            self.line(
                "control",
                format!("{request_id}: {status} {{\"status\":\"ok\"}}"),
            );
            if body["resp_type"] == "jsonrpc_notify" {
                self.summary.notifications += 1;
            }
            self.summary.posts.push((request_id.clone(), compact));
        }
        self.post_owner.insert(id, request_id);
        let wall = SystemTime::now();
        let _ =
            self.engine
                .handle_post_response(self.now, wall, id, &ResponseHead { status, headers });
    }

    fn event(&mut self, e: Event) {
        match e {
            Event::Polled { commands } => {
                self.line("poll", format!("answered with {commands} command(s)"))
            }
            Event::UnknownCommandType {
                request_id,
                command_type,
            } => {
                self.summary.skipped += 1;
                self.line("skip", format!("{request_id}: unknown command_type {command_type:?}, logged and not answered"));
            }
            Event::Expired { request_id, stage } => {
                self.summary.expired += 1;
                let when = match stage {
                    Stage::BeforeForward => "before its forward",
                    Stage::DuringForward => "while the MCP server worked",
                    Stage::DuringDelivery => "while its response was being delivered",
                };
                self.line(
                    "expired",
                    format!("{request_id}: deadline passed {when}; dropped, no response posted"),
                );
            }
            Event::Completed {
                request_id,
                resp_type,
                resp_code,
                ..
            } => {
                self.summary.completed += 1;
                self.line(
                    "done",
                    format!("{request_id}: {} {resp_code} delivered", resp_type.as_str()),
                );
            }
            other => self.line("event", format!("{other:?}")),
        }
    }

    fn drain(&mut self) {
        while let Some(o) = self.engine.poll_output() {
            self.perform(o);
        }
    }
}

/// Runs the demo; returns the transcript and the summary.
pub fn run() -> Result<(String, Summary), String> {
    let now = Instant::now();
    let mut config = Config::new(
        "https://control-plane.invalid",
        "tunnel_demo",
        Secret::new("demo-key-never-printed"),
        "demo-instance",
    );
    config.server_info = Some(
        ServerInfo::new(vec![ChannelDeclaration::for_binding(
            "main",
            ChannelBinding::RemoteHttp,
        )])
        .map_err(|e| e.to_string())?,
    );
    config.jitter_seed = 42;
    let engine = Engine::new(config, now).map_err(|e| e.to_string())?;
    let mut demo = Demo {
        engine,
        t0: now,
        now,
        out: String::new(),
        summary: Summary::default(),
        polls: poll_script(),
        post_script: BTreeMap::from([("req_list".to_owned(), VecDeque::from([503]))]),
        post_owner: BTreeMap::new(),
        hanging: Vec::new(),
    };
    let _ = writeln!(
        demo.out,
        "mcpwire tunnel demo: the tunnel engine against an in-process control plane and MCP server\n(virtual clock, no network; the API key is never printed)\n"
    );
    demo.engine.handle_timeout(now);
    demo.drain();
    // The driver loop: sleep (virtually) until the next deadline, then let the engine act.
    for _ in 0..1000 {
        if demo.engine.is_idle() || (demo.polls.is_empty() && demo.engine.health().in_flight == 0) {
            break;
        }
        let Some(t) = demo.engine.poll_timeout() else {
            break;
        };
        demo.now = demo.now.max(t.at);
        demo.engine.handle_timeout(demo.now);
        demo.drain();
    }
    let s = &demo.summary;
    let _ = writeln!(
        demo.out,
        "\nsummary: {} commands answered, {} notification(s) forwarded, {} expired, {} skipped, {} POST(s) retried after 503",
        s.completed, s.notifications, s.expired, s.skipped, s.retried_posts
    );
    Ok((demo.out, demo.summary))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn demo_covers_every_lifecycle_and_never_prints_the_key() {
        let (text, s) = run().unwrap();
        assert!(!text.contains("demo-key-never-printed"));
        // list, echo, note, broken, end; slow and expired expire; future is skipped.
        assert_eq!(s.completed, 5, "{text}");
        assert_eq!(s.expired, 2, "{text}");
        assert_eq!(s.skipped, 1);
        assert_eq!(s.notifications, 1);
        assert_eq!(s.retried_posts, 1);
        let body = |id: &str| -> Value {
            let (_, b) = s.posts.iter().rev().find(|(r, _)| r == id).unwrap();
            serde_json::from_str(b).unwrap()
        };
        assert_eq!(
            body("req_echo")["resp_json"]["result"]["content"][0]["text"],
            "hello through the tunnel"
        );
        assert_eq!(
            body("req_broken")["resp_json"]["error"]["data"]["tunnel_failure"]["upstream_status"],
            500
        );
        assert_eq!(body("req_note")["resp_type"], "notify_ack");
        assert_eq!(body("req_end")["resp_code"], 204);
        assert!(!s
            .posts
            .iter()
            .any(|(r, _)| r == "req_slow" || r == "req_expired"));
        assert!(
            !text.contains("X-Upstream-Internal\":"),
            "a non-allowlisted header was posted"
        );
    }
}

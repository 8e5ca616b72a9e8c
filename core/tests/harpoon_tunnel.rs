//! Harpoon inside the whole tunnel ([`Tunnel`] with a [`HarpoonConfig`]): commands polled for
//! the `harpoon` channel are served in-process, `call_target` becomes a forward to exactly the
//! registered URL, its answer comes back rewritten as the posted tool result; the server-info
//! declaration follows the registry; deadlines and the connection's age cancel outbound calls.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant, UNIX_EPOCH};

use base64::Engine as _;
use mcpwire_core::http::{Headers, Method, Request, ResponseHead};
use mcpwire_core::tunnel::engine::{self, Secret, Stage};
use mcpwire_core::tunnel::failure::{FailureSource, TransportErrorKind, TunnelFailure};
use mcpwire_core::tunnel::harpoon::server::{CallResult, HarpoonEvent, ResetReason};
use mcpwire_core::tunnel::harpoon::{HarpoonConfig, Registry, TargetSource, TargetSpec};
use mcpwire_core::tunnel::{
    CommandId, Config, ConfigError, Event, Output, PollId, StdioConfig, Target, TargetKind, Tunnel,
};
use serde_json::{json, Value};

const TOKEN_URL: &str = "https://auth.corp.example/oauth/token";
const API_URL: &str = "https://api.corp.example/v1/things?x=1";
const OTHER_URL: &str = "https://api.corp.example/v2/things";

fn registry() -> Registry {
    let mut r = Registry::new(false);
    for (label, url, desc) in [
        ("token", TOKEN_URL, "the token endpoint"),
        ("api", API_URL, "an internal API"),
        ("api-v2", OTHER_URL, "the next version"),
    ] {
        r.register(TargetSpec {
            label: label.into(),
            url: url.into(),
            description: desc.into(),
            source: TargetSource::Config,
            tags: Vec::new(),
        })
        .unwrap();
    }
    r
}

fn config(registry: Option<Registry>, main: bool) -> Config {
    let mut engine = engine::Config::new("https://cp.test", "t", Secret::new("k"), "i");
    let mut targets = Vec::new();
    if main {
        targets.push(Target {
            channel: "main".into(),
            kind: TargetKind::Http {
                url: "http://127.0.0.1:9/mcp".into(),
            },
        });
        engine.server_info = Some(
            mcpwire_core::tunnel::server_info::ServerInfo::new(vec![
                mcpwire_core::tunnel::server_info::ChannelDeclaration::for_binding(
                    "main",
                    mcpwire_core::tunnel::server_info::ChannelBinding::RemoteHttp,
                ),
            ])
            .unwrap(),
        );
    } else {
        engine.channels = Vec::new();
    }
    Config {
        engine,
        targets,
        stdio: StdioConfig::default(),
        grace: Duration::from_secs(5),
        restart_seed: 1,
        mcp_extra_headers: Vec::new(),
        harpoon: registry.map(|r| HarpoonConfig::new(r, [9; 64])),
    }
}

/// A driver that records what it was asked to do; POSTs are answered 200 at once.
struct Sim {
    tunnel: Tunnel,
    now: Instant,
    polls: Vec<(PollId, Request)>,
    forwards: Vec<(CommandId, Request, Option<Instant>)>,
    cancelled: Vec<CommandId>,
    posts: Vec<Value>,
    events: Vec<engine::Event>,
    harpoon: Vec<HarpoonEvent>,
}

impl Sim {
    fn new(config: Config) -> Sim {
        let now = Instant::now();
        let mut s = Sim {
            tunnel: Tunnel::new(config, now).unwrap(),
            now,
            polls: Vec::new(),
            forwards: Vec::new(),
            cancelled: Vec::new(),
            posts: Vec::new(),
            events: Vec::new(),
            harpoon: Vec::new(),
        };
        s.tunnel.handle_timeout(now);
        s.drain();
        s
    }

    fn drain(&mut self) {
        while let Some(o) = self.tunnel.poll_output() {
            match o {
                Output::Poll { id, request, .. } => self.polls.push((id, request)),
                Output::Forward {
                    cmd,
                    request,
                    deadline,
                } => self.forwards.push((cmd, request, deadline)),
                Output::CancelForward { cmd } => self.cancelled.push(cmd),
                Output::Post { id, request, .. } => {
                    self.posts
                        .push(serde_json::from_slice(&request.body).unwrap());
                    let head = ResponseHead {
                        status: 200,
                        headers: Headers::new(),
                    };
                    self.tunnel
                        .handle_post_response(self.now, UNIX_EPOCH, id, &head)
                        .unwrap();
                }
                Output::Event(Event::Engine(e)) => self.events.push(e),
                Output::Event(Event::Harpoon(e)) => self.harpoon.push(e),
                _ => {}
            }
        }
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

    /// The target answers the latest forward of `cmd` with `status`, `headers` and `body`.
    fn answer(&mut self, cmd: CommandId, status: u16, headers: &[(&str, &str)], body: &[u8]) {
        let mut h = Headers::new();
        for (n, v) in headers {
            h.append(*n, *v).unwrap();
        }
        self.tunnel
            .handle_forward_head(self.now, cmd, ResponseHead { status, headers: h })
            .unwrap();
        self.drain();
        if !body.is_empty() {
            self.tunnel
                .handle_forward_body(self.now, cmd, body)
                .unwrap();
            self.drain();
        }
        self.tunnel.handle_forward_end(self.now, cmd).unwrap();
        self.drain();
    }

    fn advance(&mut self, d: Duration) {
        self.now += d;
        self.tunnel.handle_timeout(self.now);
        self.drain();
    }

    /// The posted response of `request_id`.
    fn post(&self, request_id: &str) -> &Value {
        self.posts
            .iter()
            .find(|p| p["request_id"] == request_id)
            .unwrap_or_else(|| panic!("no post for {request_id}: {:?}", self.posts))
    }
}

fn modern_meta() -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
           "io.modelcontextprotocol/clientCapabilities": {}})
}

fn command(request_id: &str, payload: Value, timeout: &str) -> Value {
    json!({"request_id": request_id, "shard_token": format!("s-{request_id}"),
           "channel": "harpoon", "response_timeout": timeout, "jsonrpc": payload})
}

fn tool_call(request_id: &str, id: i64, tool: &str, args: Value) -> Value {
    command(
        request_id,
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": tool, "arguments": args, "_meta": modern_meta()}}),
        "30s",
    )
}

/// The `structuredContent` of a posted tool result.
fn structured(post: &Value) -> &Value {
    &post["resp_json"]["result"]["structuredContent"]
}

fn decoded_body(post: &Value) -> String {
    let b64 = structured(post)["body_base64"].as_str().unwrap();
    String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap(),
    )
    .unwrap()
}

fn server_info(sim: &Sim) -> Option<String> {
    sim.polls
        .last()
        .and_then(|(_, r)| r.headers.get("X-Tunnel-MCP-Server-Info"))
        .map(str::to_owned)
}

#[test]
fn the_channel_is_declared_exactly_while_harpoon_has_targets() {
    let with = Sim::new(config(Some(registry()), true));
    assert_eq!(
        server_info(&with).as_deref(),
        Some(
            r#"{"version":2,"channels":[{"name":"main"},{"name":"harpoon","stateless":true,"proc_affinity":true}]}"#
        )
    );
    let without = Sim::new(config(Some(Registry::new(false)), true));
    assert_eq!(
        server_info(&without).as_deref(),
        Some(r#"{"version":1,"channels":[{"name":"main"}]}"#)
    );
    let none = Sim::new(config(None, true));
    assert_eq!(server_info(&none), server_info(&without));
    // Harpoon alone: no main channel at all.
    let alone = Sim::new(config(Some(registry()), false));
    assert_eq!(
        server_info(&alone).as_deref(),
        Some(
            r#"{"version":2,"channels":[{"name":"harpoon","stateless":true,"proc_affinity":true}]}"#
        )
    );
    assert_eq!(alone.tunnel.config().channels, ["harpoon"]);
}

#[test]
fn without_targets_a_harpoon_command_is_answered_as_an_unserved_channel() {
    let mut g = Sim::new(config(Some(Registry::new(false)), true));
    g.poll_with(json!([tool_call("r1", 1, "list_targets", json!({}))]));
    assert!(g.forwards.is_empty());
    let post = g.post("r1");
    assert_eq!(post["resp_json"]["error"]["code"], -32603);
    assert_eq!(
        post["resp_json"]["error"]["data"]["tunnel_failure"]["source"],
        "client_internal"
    );
}

#[test]
fn the_name_harpoon_is_reserved() {
    let mut c = config(Some(registry()), true);
    c.targets.push(Target {
        channel: "harpoon".into(),
        kind: TargetKind::Stdio {
            argv: vec!["my-server".into()],
        },
    });
    assert!(matches!(
        Tunnel::new(c, Instant::now()),
        Err(ConfigError::Invalid(m)) if m.contains("reserved")
    ));
}

#[test]
fn initialize_then_tools_list_in_the_legacy_session_and_list_targets_shows_no_url() {
    let mut g = Sim::new(config(Some(registry()), true));
    g.poll_with(json!([
        command(
            "init",
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "tunnel-service", "version": "1"}}}),
            "30s"
        ),
        command(
            "inited",
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            "30s"
        ),
        command(
            "list",
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
            "30s"
        ),
        command(
            "targets",
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": "list_targets", "arguments": {}}}),
            "30s"
        ),
    ]));
    let init = g.post("init");
    assert_eq!(init["resp_type"], "jsonrpc_response");
    assert_eq!(init["resp_json"]["result"]["protocolVersion"], "2025-11-25");
    assert_eq!(
        init["resp_json"]["result"]["serverInfo"]["name"],
        "mcpwire-harpoon"
    );
    assert_eq!(g.post("inited")["resp_type"], "notify_ack");
    let tools: Vec<&str> = g.post("list")["resp_json"]["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        tools,
        ["list_targets", "call_target", "get_oauth_target_audience"]
    );
    let targets = g.post("targets");
    let text = targets.to_string();
    assert!(text.contains(r#"\"label\":\"token\""#) || text.contains("\"label\":\"token\""));
    for url in [TOKEN_URL, API_URL, OTHER_URL, "corp.example"] {
        assert!(!text.contains(url), "{url} in {text}");
    }
    assert!(g.forwards.is_empty(), "nothing went out");
}

#[test]
fn call_target_reaches_exactly_the_registered_url_with_filtered_headers() {
    let mut g = Sim::new(config(Some(registry()), true));
    g.poll_with(json!([tool_call("r1", 7, "call_target", json!({
        "label": "api", "method": "GET",
        "headers": {"Accept": "application/json", "Cookie": "session=secret", "X-Forwarded-For": "10.0.0.1",
                    "Host": "evil.example", "User-Agent": "theirs", "Connection": "x-drop", "X-Drop": "1",
                    "Authorization": "Bearer abc"}
    }))]));
    assert_eq!(g.forwards.len(), 1);
    let (cmd, req, deadline) = g.forwards[0].clone();
    assert_eq!(
        req.url, API_URL,
        "the registered URL, query included, nothing added"
    );
    assert_eq!(req.method, Method::Get);
    assert!(req.body.is_empty());
    let names: Vec<String> = req
        .headers
        .iter()
        .map(|(n, _)| n.to_ascii_lowercase())
        .collect();
    assert_eq!(
        names,
        ["accept", "authorization", "accept-encoding", "user-agent"],
        "{names:?}"
    );
    assert!(req
        .headers
        .get("user-agent")
        .unwrap()
        .starts_with("mcpwire-harpoon/"));
    // timeout_ms defaults to 30 s, which is also the command's deadline here.
    assert_eq!(deadline, Some(g.now + Duration::from_secs(30)));
    let dropped = g
        .harpoon
        .iter()
        .find_map(|e| match e {
            HarpoonEvent::HeadersDropped { label, classes } => Some((label.clone(), classes.len())),
            _ => None,
        })
        .unwrap();
    assert_eq!(dropped, ("api".to_owned(), 6));

    g.answer(
        cmd,
        200,
        &[("Content-Type", "text/plain"), ("X-Trace", "t1")],
        b"hello",
    );
    let post = g.post("r1");
    let s = structured(post);
    assert_eq!(s["status_code"], 200);
    assert_eq!(s["headers"]["x-trace"], "t1");
    assert_eq!(s["body_size_bytes"], 5);
    assert_eq!(decoded_body(post), "hello");
    assert_eq!(post["resp_json"]["result"]["isError"], false);
    assert_eq!(post["resp_json"]["id"], 7);
    let call = g
        .harpoon
        .iter()
        .find_map(|e| match e {
            HarpoonEvent::Call(c) => Some(c.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        (
            call.label.as_str(),
            call.status,
            call.result,
            call.response_bytes
        ),
        ("api", Some(200), CallResult::Answered, 5)
    );
}

#[test]
fn post_and_put_carry_their_body() {
    for (method, expected) in [("POST", Method::Post), ("put", Method::Put)] {
        let mut g = Sim::new(config(Some(registry()), true));
        g.poll_with(json!([tool_call(
            "r1",
            1,
            "call_target",
            json!({
                "label": "token", "method": method, "body": "grant_type=client_credentials",
                "headers": {"Content-Type": "application/x-www-form-urlencoded"}
            })
        )]));
        let (_, req, _) = &g.forwards[0];
        assert_eq!(req.method, expected);
        assert_eq!(req.url, TOKEN_URL);
        assert_eq!(req.body, b"grant_type=client_credentials");
        assert_eq!(
            req.headers.get("content-type"),
            Some("application/x-www-form-urlencoded")
        );
    }
}

/// Requests are served one at a time, in order: the one queued behind a call is served as
/// soon as that call ends (answered, refused or failed), with no other input in between.
#[test]
fn the_next_queued_request_is_served_as_soon_as_a_call_ends() {
    let mut g = Sim::new(config(Some(registry()), true));
    let list = command(
        "r3",
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list",
               "params": {"_meta": modern_meta()}}),
        "30s",
    );
    g.poll_with(json!([
        tool_call("r1", 1, "call_target", json!({"label": "token"})),
        tool_call("r2", 2, "call_target", json!({"label": "token"})),
        list,
    ]));
    assert_eq!(g.forwards.len(), 1, "one outbound call at a time");
    let first = g.forwards[0].0;
    g.answer(first, 200, &[], b"one");
    assert_eq!(decoded_body(g.post("r1")), "one");
    assert_eq!(g.forwards.len(), 2, "the second call starts at once");
    let second = g.forwards[1].0;
    g.tunnel
        .handle_forward_failed(
            g.now,
            second,
            TunnelFailure::before_response(FailureSource::Connect, None),
        )
        .unwrap();
    g.drain();
    assert_eq!(g.post("r2")["resp_json"]["result"]["isError"], true);
    let tools = g.post("r3")["resp_json"]["result"]["tools"]
        .as_array()
        .unwrap();
    assert_eq!(tools.len(), 3);
}

#[test]
fn a_json_answer_has_every_registered_url_rewritten() {
    let mut g = Sim::new(config(Some(registry()), true));
    g.poll_with(json!([tool_call(
        "r1",
        1,
        "call_target",
        json!({"label": "api"})
    )]));
    let cmd = g.forwards[0].0;
    let body = json!({"token_endpoint": TOKEN_URL, "links": [API_URL, "https://public.example/x"],
                      "nested": {"deep": OTHER_URL}});
    g.answer(
        cmd,
        200,
        &[
            ("Content-Type", "application/json"),
            ("Link", &format!("<{OTHER_URL}>; rel=next")),
        ],
        body.to_string().as_bytes(),
    );
    let post = g.post("r1");
    let text = decoded_body(post);
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["token_endpoint"], "harpoon://token");
    assert_eq!(v["links"][0], "harpoon://api");
    assert_eq!(v["links"][1], "https://public.example/x");
    assert_eq!(v["nested"]["deep"], "harpoon://api-v2");
    assert_eq!(
        structured(post)["headers"]["link"],
        "<harpoon://api-v2>; rel=next"
    );
    let all = post.to_string();
    for url in [TOKEN_URL, API_URL, OTHER_URL] {
        assert!(!all.contains(url));
    }
}

#[test]
fn a_redirect_to_a_registered_url_is_followed_and_one_elsewhere_refused() {
    let mut g = Sim::new(config(Some(registry()), true));
    g.poll_with(json!([tool_call(
        "r1",
        1,
        "call_target",
        json!({"label": "api", "method": "POST", "body": "b"})
    )]));
    let cmd = g.forwards[0].0;
    g.answer(cmd, 303, &[("Location", OTHER_URL)], b"");
    assert_eq!(g.forwards.len(), 2);
    let (cmd2, req2, _) = &g.forwards[1];
    assert_eq!(*cmd2, cmd);
    assert_eq!(req2.url, OTHER_URL);
    assert_eq!(req2.method, Method::Get, "303 becomes a bodiless GET");
    assert!(req2.body.is_empty());
    g.answer(
        cmd,
        307,
        &[("Location", "https://attacker.example/steal")],
        b"",
    );
    assert_eq!(g.forwards.len(), 2, "nothing sent off the allowlist");
    let post = g.post("r1");
    assert_eq!(post["resp_json"]["result"]["isError"], true);
    let text = post["resp_json"]["result"]["content"][0]["text"]
        .as_str()
        .unwrap();
    assert!(
        text.contains("'api'") && text.contains("not a registered"),
        "{text}"
    );
    assert!(!text.contains("attacker"));
}

/// Credentials are not sent on to another origin (as Go's client does), and a 301/302/303
/// of a PUT continues as a bodiless GET; a same-origin 307 repeats the request as it was.
#[test]
fn a_redirect_to_another_origin_drops_credentials_and_a_302_of_a_put_becomes_a_get() {
    let mut g = Sim::new(config(Some(registry()), true));
    g.poll_with(json!([tool_call(
        "r1",
        1,
        "call_target",
        json!({"label": "api", "method": "PUT", "body": "b",
               "headers": {"Authorization": "Bearer secret", "X-Kept": "1"}})
    )]));
    let cmd = g.forwards[0].0;
    // Same origin (api.corp.example): everything repeats.
    g.answer(cmd, 307, &[("Location", OTHER_URL)], b"");
    let (_, same, _) = g.forwards[1].clone();
    assert_eq!(same.method, Method::Put);
    assert_eq!(same.body, b"b");
    assert_eq!(same.headers.get("authorization"), Some("Bearer secret"));
    // Another origin (auth.corp.example): a bodiless GET, without Authorization.
    g.answer(cmd, 302, &[("Location", TOKEN_URL)], b"");
    let (_, other, _) = g.forwards[2].clone();
    assert_eq!(other.url, TOKEN_URL);
    assert_eq!(other.method, Method::Get);
    assert!(other.body.is_empty());
    assert_eq!(other.headers.get("authorization"), None);
    assert_eq!(other.headers.get("x-kept"), Some("1"));
    // Back on the first origin, credentials stay off for the rest of the call.
    g.answer(cmd, 302, &[("Location", API_URL)], b"");
    assert_eq!(g.forwards[3].1.headers.get("authorization"), None);
}

/// `timeout_ms` is Harpoon's own timer: with no report from the driver's HTTP client the call
/// ends with the timeout error and its outbound request is cancelled; the next call starts.
#[test]
fn timeout_ms_is_enforced_by_harpoon_whatever_the_driver_reports() {
    let mut g = Sim::new(config(Some(registry()), true));
    g.poll_with(json!([
        tool_call(
            "r1",
            1,
            "call_target",
            json!({"label": "api", "timeout_ms": 500})
        ),
        tool_call("r2", 2, "call_target", json!({"label": "token"})),
    ]));
    let cmd = g.forwards[0].0;
    g.advance(Duration::from_millis(499));
    assert!(g.cancelled.is_empty());
    g.advance(Duration::from_millis(1));
    assert_eq!(g.cancelled, [cmd]);
    let text = g.post("r1")["resp_json"]["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        text,
        "harpoon target 'api': no answer within timeout_ms (500 ms)"
    );
    assert_eq!(g.forwards.len(), 2, "the next call starts");
    assert_eq!(g.forwards[1].1.url, TOKEN_URL);
    let timed_out = g.harpoon.iter().any(|e| {
        matches!(e, HarpoonEvent::Call(c) if c.result == CallResult::TimedOut && c.label == "api")
    });
    assert!(timed_out, "{:?}", g.harpoon);
}

/// Harpoon asks for `Accept-Encoding: identity`; an encoded answer is refused, since its body
/// could not be rewritten.
#[test]
fn an_encoded_answer_is_an_error_not_passed_through() {
    let mut g = Sim::new(config(Some(registry()), true));
    g.poll_with(json!([tool_call(
        "r1",
        1,
        "call_target",
        json!({"label": "token", "headers": {"Accept-Encoding": "gzip"}})
    )]));
    let (cmd, req, _) = g.forwards[0].clone();
    assert_eq!(req.headers.get("accept-encoding"), Some("identity"));
    g.answer(
        cmd,
        200,
        &[
            ("Content-Type", "application/json"),
            ("Content-Encoding", "gzip"),
        ],
        b"\x1f\x8b compressed",
    );
    let result = &g.post("r1")["resp_json"]["result"];
    assert_eq!(result["isError"], true, "{result}");
    assert!(
        result["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("Content-Encoding: gzip"),
        "{result}"
    );
    assert!(result["structuredContent"].get("body_base64").is_none());

    // However it is spelled: a later line, a list, an empty first value.
    for encodings in [
        vec!["", "gzip"],
        vec!["identity", "br"],
        vec!["identity, deflate"],
    ] {
        let mut g = Sim::new(config(Some(registry()), true));
        g.poll_with(json!([tool_call(
            "r1",
            1,
            "call_target",
            json!({"label": "token"})
        )]));
        let cmd = g.forwards[0].0;
        let mut headers = vec![("Content-Type", "application/json")];
        headers.extend(encodings.iter().map(|e| ("Content-Encoding", *e)));
        g.answer(cmd, 200, &headers, b"{}");
        let result = &g.post("r1")["resp_json"]["result"];
        assert_eq!(result["isError"], true, "{encodings:?}: {result}");
    }
}

#[test]
fn redirects_off_returns_the_redirect_itself_rewritten() {
    let mut g = Sim::new(config(Some(registry()), true));
    g.poll_with(json!([tool_call(
        "r1",
        1,
        "call_target",
        json!({"label": "api", "follow_redirects": false})
    )]));
    let cmd = g.forwards[0].0;
    g.answer(cmd, 302, &[("Location", TOKEN_URL)], b"");
    assert_eq!(g.forwards.len(), 1);
    let s = structured(g.post("r1"));
    assert_eq!(s["status_code"], 302);
    assert_eq!(s["headers"]["location"], "harpoon://token");
}

#[test]
fn an_oversized_body_is_an_error_not_a_truncation() {
    let mut g = Sim::new(config(Some(registry()), true));
    g.poll_with(json!([tool_call(
        "r1",
        1,
        "call_target",
        json!({"label": "api", "max_response_bytes": 10})
    )]));
    let cmd = g.forwards[0].0;
    let mut h = Headers::new();
    h.append("Content-Type", "text/plain").unwrap();
    g.tunnel
        .handle_forward_head(
            g.now,
            cmd,
            ResponseHead {
                status: 200,
                headers: h,
            },
        )
        .unwrap();
    g.tunnel
        .handle_forward_body(g.now, cmd, b"0123456789")
        .unwrap();
    g.drain();
    assert!(g.cancelled.is_empty(), "exactly the limit is fine so far");
    g.tunnel.handle_forward_body(g.now, cmd, b"X").unwrap();
    g.drain();
    assert_eq!(g.cancelled, [cmd], "the fetch is stopped at once");
    let post = g.post("r1");
    assert_eq!(post["resp_json"]["result"]["isError"], true);
    assert!(post.to_string().contains("max_response_bytes (10 bytes)"));
    assert!(post["resp_json"]["result"]["structuredContent"]
        .get("body_base64")
        .is_none());
    // A late chunk and end of the cancelled fetch change nothing.
    g.tunnel.handle_forward_body(g.now, cmd, b"late").unwrap();
    g.tunnel.handle_forward_end(g.now, cmd).unwrap();
    g.drain();
    assert_eq!(g.posts.len(), 1);
}

#[test]
fn the_commands_deadline_cancels_the_outbound_call_and_nothing_is_posted() {
    let mut g = Sim::new(config(Some(registry()), true));
    let mut slow = tool_call("slow", 1, "call_target", json!({"label": "api"}));
    slow["response_timeout"] = json!("2s");
    g.poll_with(json!([
        slow,
        tool_call("next", 2, "list_targets", json!({}))
    ]));
    assert_eq!(g.forwards.len(), 1);
    let (cmd, _, deadline) = g.forwards[0].clone();
    assert_eq!(
        deadline,
        Some(g.now + Duration::from_secs(2)),
        "the nearer deadline"
    );
    assert!(
        g.posts.is_empty(),
        "one request at a time: the next one waits"
    );
    g.advance(Duration::from_secs(2));
    assert_eq!(g.cancelled, [cmd]);
    assert!(g.events.contains(&engine::Event::Expired {
        request_id: "slow".into(),
        stage: Stage::DuringForward
    }));
    assert!(g.posts.iter().all(|p| p["request_id"] != "slow"));
    assert!(g.harpoon.contains(&HarpoonEvent::ConnectionReset {
        reason: ResetReason::Deadline
    }));
    // The next request is served on the fresh connection.
    assert_eq!(g.post("next")["resp_json"]["result"]["isError"], false);
    // The late answer of the cancelled fetch is dropped.
    g.answer(cmd, 200, &[], b"late");
    assert_eq!(g.posts.len(), 1);
}

#[test]
fn a_timeout_ms_failure_is_an_error_result_naming_the_label() {
    let mut g = Sim::new(config(Some(registry()), true));
    g.poll_with(json!([tool_call(
        "r1",
        1,
        "call_target",
        json!({"label": "api", "timeout_ms": 500})
    )]));
    let (cmd, _, deadline) = g.forwards[0].clone();
    assert_eq!(deadline, Some(g.now + Duration::from_millis(500)));
    g.tunnel
        .handle_forward_failed(
            g.now,
            cmd,
            TunnelFailure::before_response(
                FailureSource::Timeout,
                Some(TransportErrorKind::Timeout),
            ),
        )
        .unwrap();
    g.drain();
    let post = g.post("r1");
    assert_eq!(post["resp_type"], "jsonrpc_response");
    assert_eq!(post["resp_json"]["result"]["isError"], true);
    let text = post["resp_json"]["result"]["content"][0]["text"]
        .as_str()
        .unwrap();
    assert_eq!(
        text,
        "harpoon target 'api': no answer within timeout_ms (500 ms)"
    );
}

#[test]
fn the_connection_is_dropped_at_its_maximum_age_cancelling_the_call_in_flight() {
    let mut g = Sim::new(config(Some(registry()), true));
    // Keep polls answered so the engine stays alive for ten minutes.
    let mut long = tool_call("long", 1, "call_target", json!({"label": "api"}));
    long["response_timeout"] = json!("20m");
    g.advance(Duration::from_secs(599));
    g.poll_with(json!([long]));
    // The connection opened at the start: it ends a second later, with the call in flight.
    let cmd = g.forwards[0].0;
    g.advance(Duration::from_secs(1));
    assert_eq!(g.cancelled, [cmd]);
    assert!(g.harpoon.contains(&HarpoonEvent::ConnectionReset {
        reason: ResetReason::MaxAge
    }));
    let post = g.post("long");
    assert_eq!(
        post["resp_json"]["error"]["data"]["tunnel_failure"]["source"],
        "transport_closed"
    );
}

#[test]
fn a_legacy_session_does_not_outlive_its_connection() {
    let mut g = Sim::new(config(Some(registry()), true));
    g.poll_with(json!([command(
        "init",
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "ts", "version": "1"}}}),
        "30s"
    ),]));
    assert!(g.post("init")["resp_json"]["result"].is_object());
    g.advance(Duration::from_secs(600));
    g.poll_with(json!([command(
        "after",
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        "30s"
    )]));
    // A legacy request without a session on the new connection is refused by the server core.
    assert!(
        g.post("after")["resp_json"]["error"].is_object(),
        "{}",
        g.post("after")
    );
}

#[test]
fn unknown_labels_and_bad_arguments_are_error_results_with_folded_metrics() {
    let mut g = Sim::new(config(Some(registry()), true));
    g.poll_with(json!([
        tool_call("r1", 1, "call_target", json!({"label": "nope-123"})),
        tool_call(
            "r2",
            2,
            "call_target",
            json!({"label": "api", "method": "DELETE"})
        ),
        tool_call(
            "r3",
            3,
            "call_target",
            json!({"label": "api", "path": "/admin"})
        ),
    ]));
    assert!(g.forwards.is_empty());
    for r in ["r1", "r2", "r3"] {
        assert_eq!(g.post(r)["resp_json"]["result"]["isError"], true, "{r}");
    }
    let labels: Vec<String> = g
        .harpoon
        .iter()
        .filter_map(|e| match e {
            HarpoonEvent::Call(c) => Some(c.label.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(labels, ["__unknown__", "api", "api"]);
}

#[test]
fn session_termination_on_harpoon_is_refused_locally() {
    let mut g = Sim::new(config(Some(registry()), true));
    g.poll_with(
        json!([{"request_id": "del", "shard_token": "s", "channel": "harpoon",
                         "response_timeout": "30s", "command_type": "session_termination",
                         "headers": {"Mcp-Session-Id": ["x"]}}]),
    );
    assert!(g.forwards.is_empty());
    assert_eq!(g.post("del")["resp_type"], "session_termination_response");
}

#[test]
fn get_oauth_target_audience_answers_the_token_endpoints_exact_url() {
    let mut reg = registry();
    reg.register(TargetSpec {
        label: "oauth-token-1".into(),
        url: "https://idp.corp.example/token".into(),
        description: String::new(),
        source: TargetSource::OauthDiscovery {
            role: "token_endpoint".into(),
        },
        tags: Vec::new(),
    })
    .unwrap();
    let mut g = Sim::new(config(Some(reg), true));
    g.poll_with(json!([
        tool_call(
            "r1",
            1,
            "get_oauth_target_audience",
            json!({"label": "oauth-token-1"})
        ),
        tool_call(
            "r2",
            2,
            "get_oauth_target_audience",
            json!({"label": "api"})
        ),
    ]));
    assert_eq!(
        structured(g.post("r1"))["audience"],
        "https://idp.corp.example/token"
    );
    assert_eq!(g.post("r2")["resp_json"]["result"]["isError"], true);
}

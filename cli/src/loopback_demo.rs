//! `mcpwire demo`: the whole tunnel path on loopback, in one process, in a few seconds.
//!
//! It starts the reference MCP server ([`mcpwire_dev::mcp_server`]), the local control plane
//! ([`mcpwire_dev::control_plane`]) and the tunnel client (the [`mcpwire::tunnel::blocking`] driver), each
//! on `127.0.0.1` port 0, then acts as an MCP client of the control plane's MCP endpoint:
//! `tools/list`, a tool call, a call whose progress notifications stream back over SSE, a call
//! whose `response_timeout` expires while the server works (the tunnel closes that MCP request
//! and posts nothing), and a legacy session that is opened and then terminated. Each step
//! prints where its messages went (from the control plane's record of the tunnel's response
//! POSTs) and how long it took; a step that does not behave ends the demo with an error naming
//! it. The API key is drawn at random and never printed.

use std::io::Write;
use std::sync::{mpsc, Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use mcpwire_core::mcp::headers::request_headers;
use mcpwire_core::mcp::legacy::LegacySession;
use mcpwire_core::mcp::meta::{build_request, RequestMeta};
use mcpwire_core::mcp::{ClientCapabilities, Implementation};
use mcpwire_core::sse::SseParser;
use serde_json::{json, Value};

use crate::tunnel_run::config::{self, RunArgs};
use mcpwire::tunnel::blocking;
use mcpwire::tunnel::log::{Level, Logger};
use mcpwire::tunnel::Status;
use mcpwire::tunnel::Stopper;
use mcpwire_dev::control_plane::{self, ControlPlane, RESPONSE_TIMEOUT_HEADER};
use mcpwire_dev::mcp_server::{self, McpServer};
use mcpwire_dev::{random_token, ApiKey};

/// The demo's tunnel id.
pub const TUNNEL_ID: &str = "tunnel_demo";
/// The longest any one step may take before the demo gives up on it.
const STEP_LIMIT: Duration = Duration::from_secs(10);
/// The `response_timeout` of the step that expires.
const SHORT_TIMEOUT: &str = "300ms";

/// Log lines kept in memory (the tunnel client's own log, read back by the demo).
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(PoisonError::into_inner)).into_owned()
    }
}

/// An HTTP answer as the MCP client saw it.
struct Reply {
    status: u16,
    content_type: String,
    session_id: Option<String>,
    body: String,
}

impl Reply {
    fn json(&self) -> Result<Value, String> {
        serde_json::from_str(&self.body)
            .map_err(|e| format!("the answer is not JSON ({e}): {}", clip(&self.body)))
    }

    /// The JSON-RPC messages of an SSE body.
    fn sse_messages(&self) -> Result<Vec<Value>, String> {
        let mut parser = SseParser::new();
        parser.push(self.body.as_bytes());
        let mut out = Vec::new();
        while let Some(event) = parser
            .next_event()
            .map_err(|e| format!("the SSE stream is malformed: {e:?}"))?
        {
            out.push(
                serde_json::from_str(&event.data)
                    .map_err(|e| format!("an SSE event is not JSON ({e})"))?,
            );
        }
        Ok(out)
    }
}

fn clip(s: &str) -> String {
    s.chars().take(200).collect()
}

/// The MCP client's side: plain HTTP to the control plane's MCP endpoint.
struct Client {
    agent: ureq::Agent,
    url: String,
}

impl Client {
    fn send(
        &self,
        method: &str,
        headers: &[(String, String)],
        body: Option<&str>,
    ) -> Result<Reply, String> {
        let mut builder = ureq::http::Request::builder()
            .method(method)
            .uri(self.url.as_str());
        for (n, v) in headers {
            builder = builder.header(n.as_str(), v.as_str());
        }
        let result = match body {
            Some(b) => self.agent.run(
                builder
                    .body(b.as_bytes().to_vec())
                    .map_err(|e| e.to_string())?,
            ),
            None => self.agent.run(builder.body(()).map_err(|e| e.to_string())?),
        };
        let mut response =
            result.map_err(|e| format!("the control plane's MCP endpoint failed: {e}"))?;
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let content_type = header("content-type").unwrap_or_default();
        let session_id = header("mcp-session-id");
        let status = response.status().as_u16();
        let body = response
            .body_mut()
            .with_config()
            .limit(1024 * 1024)
            .read_to_string()
            .unwrap_or_default();
        Ok(Reply {
            status,
            content_type,
            session_id,
            body,
        })
    }

    /// POSTs a 2026-07-28 request with the headers the core builds for it.
    fn modern(&self, body: &str, extra: &[(String, String)]) -> Result<Reply, String> {
        let built = request_headers(body, None).map_err(|e| format!("{e:?}"))?;
        let mut headers: Vec<(String, String)> = built
            .iter()
            .map(|(n, v)| (n.to_owned(), v.to_owned()))
            .collect();
        headers.extend_from_slice(extra);
        self.send("POST", &headers, Some(body))
    }
}

fn modern_body(id: i64, method: &str, params: Value, progress: Option<&str>) -> String {
    let mut meta = RequestMeta::new("2026-07-28", ClientCapabilities::none()).with_client_info(
        Implementation::new("mcpwire-demo", env!("CARGO_PKG_VERSION")),
    );
    if let Some(token) = progress {
        meta = meta.with_progress_token(token.into());
    }
    build_request(&id.into(), method, params, &meta).unwrap_or_default()
}

/// Everything the demo started; stopped on drop.
struct Stack {
    mcp: mcp_server::McpServerHandle,
    cp: control_plane::ControlPlaneHandle,
    stopper: Stopper,
    tunnel: Option<thread::JoinHandle<Result<(), mcpwire::tunnel::Error>>>,
    log: Captured,
    seen: u64,
}

impl Drop for Stack {
    fn drop(&mut self) {
        self.stopper.stop();
        if let Some(t) = self.tunnel.take() {
            let _ = t.join();
        }
        self.cp.stop();
        self.mcp.stop();
    }
}

impl Stack {
    fn start(key: &str) -> Result<Stack, String> {
        let mcp = McpServer::start_http(mcp_server::Config::default(), "127.0.0.1:0")
            .map_err(|e| format!("cannot start the reference MCP server: {e}"))?;
        let api_key = ApiKey::new(key).map_err(|e| e.to_string())?;
        let mut cp_config = control_plane::Config::new(api_key);
        cp_config.max_poll_wait = Duration::from_secs(1);
        cp_config.expiry_grace = Duration::from_millis(300);
        cp_config.mcp_wait = STEP_LIMIT;
        let cp = ControlPlane::start(cp_config, "127.0.0.1:0")
            .map_err(|e| format!("cannot start the local control plane: {e}"))?;
        let args = RunArgs {
            base_url: Some(cp.base_url()),
            tunnel_id: Some(TUNNEL_ID.to_owned()),
            poll_timeout: Some("1s".to_owned()),
            server_urls: vec![mcp.url()],
            health_addr: Some("127.0.0.1:0".to_owned()),
            grace: Some("2s".to_owned()),
            driver: Some("blocking".to_owned()),
            ..RunArgs::default()
        };
        let env = |name: &str| (name == "CONTROL_PLANE_API_KEY").then(|| key.to_owned());
        let no_files = |_: &str| -> std::io::Result<String> {
            Err(std::io::Error::other("the demo reads no files"))
        };
        let run_config =
            config::resolve(&args, &env, &no_files).map_err(|e| format!("tunnel settings: {e}"))?;
        let log = Captured::default();
        let logger = Arc::new(Logger::new(
            Level::Info,
            false,
            vec![key.to_owned()],
            Box::new(log.clone()),
        ));
        let (tx, rx) = mpsc::channel();
        let tunnel = thread::Builder::new()
            .name("tunnel".into())
            .spawn(move || {
                blocking::run(run_config.tunnel, logger, Status::new(), move |stopper| {
                    tx.send(stopper)
                        .map_err(|_| std::io::Error::other("the demo went away"))
                })
            })
            .map_err(|e| format!("cannot start the tunnel client: {e}"))?;
        let stopper = match rx.recv_timeout(STEP_LIMIT) {
            Ok(s) => s,
            Err(_) => {
                let why = match tunnel.join() {
                    Ok(Err(e)) => e.to_string(),
                    _ => "it did not start".to_owned(),
                };
                return Err(format!("the tunnel client did not start: {why}"));
            }
        };
        Ok(Stack {
            mcp,
            cp,
            stopper,
            tunnel: Some(tunnel),
            log,
            seen: 0,
        })
    }

    /// The response POSTs the tunnel made since the last call: `resp_type code` each.
    fn new_posts(&mut self) -> Vec<String> {
        let posts: Vec<_> = self
            .cp
            .plane()
            .responses(TUNNEL_ID)
            .into_iter()
            .filter(|r| r.seq >= self.seen)
            .collect();
        if let Some(last) = posts.last() {
            self.seen = last.seq + 1;
        }
        // Consecutive equal POSTs are shown once with a count.
        let mut shown: Vec<(String, usize)> = Vec::new();
        for r in &posts {
            let code = serde_json::from_str::<Value>(&r.body)
                .ok()
                .and_then(|b| b.get("resp_code").and_then(Value::as_u64))
                .map_or_else(|| "-".to_owned(), |c| c.to_string());
            let mut text = format!("{} {code}", r.resp_type.as_deref().unwrap_or("?"));
            if r.status != 200 {
                text.push_str(&format!(" (refused: {})", r.status));
            }
            match shown.last_mut() {
                Some((last, n)) if *last == text => *n += 1,
                _ => shown.push((text, 1)),
            }
        }
        shown
            .into_iter()
            .map(|(t, n)| if n > 1 { format!("{t} x{n}") } else { t })
            .collect()
    }
}

/// A step's outcome line.
fn report(
    out: &mut dyn Write,
    n: usize,
    what: &str,
    started: Instant,
    result: &str,
    posts: &[String],
) -> Result<(), String> {
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    let mut text = format!("{n}. {what}\n   -> {result} ({ms:.1} ms)\n");
    if posts.is_empty() {
        text.push_str("   tunnel response POSTs: none\n");
    } else {
        text.push_str(&format!("   tunnel response POSTs: {}\n", posts.join(", ")));
    }
    out.write_all(text.as_bytes())
        .map_err(|e| format!("cannot write: {e}"))
}

fn expect(ok: bool, step: &str, detail: impl FnOnce() -> String) -> Result<(), String> {
    if ok {
        Ok(())
    } else {
        Err(format!("step \"{step}\" misbehaved: {}", detail()))
    }
}

/// Waits (bounded by [`STEP_LIMIT`]) until `f` holds.
fn wait_until(mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < STEP_LIMIT {
        if f() {
            return true;
        }
        thread::sleep(Duration::from_millis(10));
    }
    false
}

/// Runs the demo, writing its report to `out`; `Err` names the step that misbehaved.
pub fn run(out: &mut dyn Write) -> Result<(), String> {
    let total = Instant::now();
    let key = random_token("sk-demo-");
    let mut s = Stack::start(&key)?;
    let w = |out: &mut dyn Write, t: String| {
        out.write_all(t.as_bytes())
            .map_err(|e| format!("cannot write: {e}"))
    };
    let mcp_url = s.mcp.url();
    let client = Client {
        agent: ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(STEP_LIMIT))
            .build()
            .into(),
        url: s.cp.mcp_url(TUNNEL_ID),
    };
    w(
        out,
        format!(
            "mcpwire demo: an MCP client -> local control plane -> tunnel client -> MCP server, all on 127.0.0.1 in this process\n\
             \x20 reference MCP server : {mcp_url} (mcpwire dev mcp-server)\n\
             \x20 local control plane  : {} (mcpwire dev control-plane); MCP clients POST to {}\n\
             \x20 tunnel client        : blocking driver, tunnel {TUNNEL_ID}, channel main -> {mcp_url}\n\
             \x20 each MCP request becomes a command the tunnel client polls, forwards to the MCP server,\n\
             \x20 and answers with response POSTs that the control plane returns to the MCP client\n\n",
            s.cp.base_url(),
            client.url
        ),
    )?;

    // 1. tools/list
    let step = "tools/list";
    let t = Instant::now();
    let r = client.modern(&modern_body(1, "tools/list", json!({}), None), &[])?;
    let body = r.json()?;
    let names: Vec<String> = body["result"]["tools"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|t| t["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    expect(
        r.status == 200 && names.iter().any(|n| n == "echo"),
        step,
        || format!("HTTP {} {}", r.status, clip(&r.body)),
    )?;
    let posts = s.new_posts();
    report(
        out,
        1,
        "tools/list",
        t,
        &format!("HTTP 200, {} tools: {}", names.len(), names.join(", ")),
        &posts,
    )?;

    // 2. a tool call
    let step = "tools/call echo";
    let t = Instant::now();
    let r = client.modern(
        &modern_body(
            2,
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "hello through the tunnel"}}),
            None,
        ),
        &[],
    )?;
    let body = r.json()?;
    let text = body["result"]["content"][0]["text"].as_str().unwrap_or("");
    expect(
        r.status == 200 && text == "hello through the tunnel",
        step,
        || format!("HTTP {} {}", r.status, clip(&r.body)),
    )?;
    let posts = s.new_posts();
    report(
        out,
        2,
        "tools/call echo {\"text\": \"hello through the tunnel\"}",
        t,
        &format!("HTTP 200, result text {text:?}"),
        &posts,
    )?;

    // 3. progress over SSE
    let step = "tools/call progress";
    let t = Instant::now();
    let r = client.modern(
        &modern_body(
            3,
            "tools/call",
            json!({"name": "progress", "arguments": {"steps": 3, "interval_ms": 20}}),
            Some("demo-progress"),
        ),
        &[],
    )?;
    let messages = if r.content_type.starts_with("text/event-stream") {
        r.sse_messages()?
    } else {
        Vec::new()
    };
    let progress = messages
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .count();
    let last_ok = messages
        .last()
        .is_some_and(|m| m["id"] == 3 && m.get("result").is_some());
    expect(r.status == 200 && progress == 3 && last_ok, step, || {
        format!(
            "HTTP {} {} with {} messages: {}",
            r.status,
            r.content_type,
            messages.len(),
            clip(&r.body)
        )
    })?;
    let posts = s.new_posts();
    report(
        out,
        3,
        "tools/call progress {\"steps\": 3} with a progressToken",
        t,
        &format!(
            "HTTP 200 text/event-stream: {progress} notifications/progress events, then the result"
        ),
        &posts,
    )?;

    // 4. an expired response_timeout
    let step = "response_timeout expiry";
    let t = Instant::now();
    let cancelled_before = s.mcp.server().stats().cancelled;
    let r = client.modern(
        &modern_body(
            4,
            "tools/call",
            json!({"name": "slow", "arguments": {"ms": 5000}}),
            None,
        ),
        &[(RESPONSE_TIMEOUT_HEADER.to_owned(), SHORT_TIMEOUT.to_owned())],
    )?;
    expect(r.status == 504, step, || {
        format!(
            "expected the control plane's 504, got HTTP {} {}",
            r.status,
            clip(&r.body)
        )
    })?;
    let server = Arc::clone(s.mcp.server());
    let cancelled = wait_until(|| server.stats().cancelled > cancelled_before);
    expect(cancelled, step, || {
        "the MCP server's slow call was not cancelled (the tunnel did not close the request)"
            .to_owned()
    })?;
    let log = s.log.clone();
    let expired = wait_until(|| {
        log.text()
            .lines()
            .any(|l| l.contains("method=tools/call") && l.contains("outcome=expired"))
    });
    expect(expired, step, || {
        format!("the tunnel did not log the expiry:\n{}", log.text())
    })?;
    let posts = s.new_posts();
    expect(posts.is_empty(), step, || {
        format!("the tunnel posted a response after the deadline: {posts:?}")
    })?;
    report(
        out,
        4,
        &format!("tools/call slow {{\"ms\": 5000}} with response_timeout {SHORT_TIMEOUT}"),
        t,
        "the tunnel's deadline passed mid-call: it closed the MCP request (the server saw the call cancelled) \
         and posted nothing; the control plane answered the MCP client HTTP 504",
        &posts,
    )?;

    // 5. a legacy session, opened and terminated
    let step = "session termination";
    let t = Instant::now();
    let mut session = LegacySession::new(
        Implementation::new("mcpwire-demo", env!("CARGO_PKG_VERSION")),
        ClientCapabilities::none(),
    );
    let init = session.initialize(5.into());
    let headers: Vec<(String, String)> = init
        .headers
        .iter()
        .map(|(n, v)| (n.to_owned(), v.to_owned()))
        .collect();
    let r = client.send("POST", &headers, Some(&init.body))?;
    let sid = r.session_id.clone().unwrap_or_default();
    expect(r.status == 200 && !sid.is_empty(), step, || {
        format!(
            "initialize answered HTTP {} without a session id: {}",
            r.status,
            clip(&r.body)
        )
    })?;
    let open = s.mcp.server().open_sessions();
    let r = client.send(
        "DELETE",
        &[("Mcp-Session-Id".to_owned(), sid.clone())],
        None,
    )?;
    let ended = s.mcp.server().stats().sessions_ended;
    expect(
        r.status == 204 && open == 1 && s.mcp.server().open_sessions() == 0 && ended == 1,
        step,
        || {
            format!(
                "DELETE answered HTTP {}; sessions open before {open}, after {}",
                r.status,
                s.mcp.server().open_sessions()
            )
        },
    )?;
    let posts = s.new_posts();
    report(
        out,
        5,
        "initialize (legacy 2025-11-25 session), then DELETE with its Mcp-Session-Id",
        t,
        "initialize HTTP 200 with Mcp-Session-Id; the DELETE became a session_termination command, \
         the tunnel sent DELETE to the MCP server, which ended the session: HTTP 204",
        &posts,
    )?;

    // The tunnel's own log: one line per command outcome, and the key nowhere.
    s.stopper.stop();
    if let Some(t) = s.tunnel.take() {
        match t.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(format!("the tunnel client stopped on an error: {e}")),
            Err(_) => return Err("the tunnel client panicked".to_owned()),
        }
    }
    let log = s.log.text();
    expect(!log.contains(&key), "logs", || {
        "the API key appeared in the tunnel's log".to_owned()
    })?;
    let outcomes: Vec<&str> = log
        .lines()
        .filter(|l| l.contains(" command request_id="))
        .collect();
    w(
        out,
        "\ntunnel client log, one line per command:\n".to_owned(),
    )?;
    for line in &outcomes {
        w(out, format!("  {line}\n"))?;
    }
    w(
        out,
        format!(
            "\nsummary: 5 steps behaved; {} commands through the tunnel in {:.0} ms; the API key never left the process\n",
            outcomes.len(),
            total.elapsed().as_secs_f64() * 1000.0
        ),
    )?;
    Ok(())
}

//! A fake control plane, a fake Streamable HTTP MCP server and a fake stdio MCP server, all on
//! 127.0.0.1 and written here, plus a handle on a running `mcpwire tunnel run`.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::cell::Cell;
use std::collections::{BTreeMap, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// Every wait in these tests gives up after this long (then the test fails).
pub const PATIENCE: Duration = Duration::from_secs(20);

pub const API_KEY: &str = "sk-test-secret-key-0123456789";
pub const TUNNEL: &str = "tun_test";

/// One HTTP request as a test server saw it.
#[derive(Clone, Debug)]
pub struct Req {
    pub method: String,
    pub target: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Req {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
}

fn read_request(stream: &mut BufReader<TcpStream>) -> Option<Req> {
    let mut line = String::new();
    if stream.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_owned();
    let target = parts.next()?.to_owned();
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        stream.read_line(&mut h).ok()?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (n, v) = h.split_once(':')?;
        headers.push((n.trim().to_owned(), v.trim().to_owned()));
    }
    let len = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body).ok()?;
    Some(Req {
        method,
        target,
        headers,
        body,
    })
}

/// Writes a whole response and closes the connection.
pub fn respond(stream: &mut TcpStream, status: u16, headers: &[(&str, &str)], body: &[u8]) {
    let mut head = format!(
        "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (n, v) in headers {
        head.push_str(&format!("{n}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(body);
    let _ = stream.flush();
}

type Handler = Arc<dyn Fn(Req, &mut TcpStream) + Send + Sync>;

/// Serves each connection's one request on its own thread.
pub fn serve(handler: Handler) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { continue };
            let handler = Arc::clone(&handler);
            thread::spawn(move || {
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                if let Some(req) = read_request(&mut reader) {
                    let mut conn = conn;
                    handler(req, &mut conn);
                }
            });
        }
    });
    addr
}

/// Polls `f` until it returns `Some`, for at most [`PATIENCE`].
pub fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < PATIENCE, "timed out waiting for {what}");
        thread::sleep(Duration::from_millis(20));
    }
}

// ---------------------------------------------------------------------------------------------
// Control plane.

#[derive(Default)]
pub struct CpState {
    pub batches: VecDeque<Value>,
    pub polls: Vec<Req>,
    pub posts: Vec<Req>,
    /// Statuses (with an optional Retry-After) for the next POSTs of a request id.
    pub post_script: BTreeMap<String, VecDeque<(u16, Option<&'static str>)>>,
    /// When set, every poll gets this status.
    pub poll_status: Option<u16>,
    /// Requests to `GET /v1/tunnels/{id}/cloudflare/runtime`.
    pub runtime_requests: Vec<Req>,
    /// The answer to the runtime fetch: status and body (`None`: 404).
    pub runtime: Option<(u16, Value)>,
}

#[derive(Clone)]
pub struct ControlPlane {
    pub addr: SocketAddr,
    state: Arc<(Mutex<CpState>, Condvar)>,
}

impl ControlPlane {
    pub fn start() -> ControlPlane {
        let state: Arc<(Mutex<CpState>, Condvar)> = Arc::default();
        let s = Arc::clone(&state);
        let addr = serve(Arc::new(move |req: Req, conn: &mut TcpStream| {
            let (lock, cv) = &*s;
            let path = req.target.split('?').next().unwrap_or("").to_owned();
            if req.method == "GET" && path == format!("/v1/tunnels/{TUNNEL}/poll") {
                let mut st = lock.lock().unwrap();
                st.polls.push(req.clone());
                if let Some(status) = st.poll_status {
                    drop(st);
                    let body = json!({"error": {"code": "invalid_api_key", "message": "no"}});
                    respond(
                        conn,
                        status,
                        &[("Content-Type", "application/json")],
                        body.to_string().as_bytes(),
                    );
                    return;
                }
                let deadline = Instant::now() + Duration::from_millis(300);
                while st.batches.is_empty() && Instant::now() < deadline {
                    st = cv.wait_timeout(st, Duration::from_millis(50)).unwrap().0;
                }
                match st.batches.pop_front() {
                    Some(batch) => {
                        drop(st);
                        let body = json!({ "commands": batch }).to_string();
                        respond(
                            conn,
                            200,
                            &[("Content-Type", "application/json")],
                            body.as_bytes(),
                        );
                    }
                    None => {
                        drop(st);
                        respond(conn, 204, &[], b"");
                    }
                }
            } else if req.method == "POST" && path == format!("/v1/tunnels/{TUNNEL}/response") {
                let rid = req.json()["request_id"].as_str().unwrap_or("").to_owned();
                let mut st = lock.lock().unwrap();
                st.posts.push(req.clone());
                let next = st.post_script.get_mut(&rid).and_then(VecDeque::pop_front);
                drop(st);
                cv.notify_all();
                match next {
                    Some((status, retry_after)) => {
                        let mut h = vec![("Content-Type", "application/json")];
                        if let Some(ra) = retry_after {
                            h.push(("Retry-After", ra));
                        }
                        respond(
                            conn,
                            status,
                            &h,
                            br#"{"error":{"code":"busy","message":"later"}}"#,
                        );
                    }
                    None => respond(
                        conn,
                        200,
                        &[("Content-Type", "application/json")],
                        br#"{"status":"ok"}"#,
                    ),
                }
            } else if req.method == "GET"
                && path == format!("/v1/tunnels/{TUNNEL}/cloudflare/runtime")
            {
                let mut st = lock.lock().unwrap();
                st.runtime_requests.push(req.clone());
                let (status, body) = st.runtime.clone().unwrap_or((404, json!({})));
                drop(st);
                cv.notify_all();
                respond(
                    conn,
                    status,
                    &[
                        ("Content-Type", "application/json"),
                        ("Cache-Control", "no-store"),
                    ],
                    body.to_string().as_bytes(),
                );
            } else {
                respond(conn, 404, &[], b"{}");
            }
        }));
        ControlPlane { addr, state }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn with<T>(&self, f: impl FnOnce(&mut CpState) -> T) -> T {
        let (lock, cv) = &*self.state;
        let out = f(&mut lock.lock().unwrap());
        cv.notify_all();
        out
    }

    pub fn enqueue(&self, commands: Vec<Value>) {
        self.with(|s| s.batches.push_back(Value::Array(commands)));
    }

    /// Bodies of every POST for `request_id`, in order.
    pub fn posts_for(&self, request_id: &str) -> Vec<Value> {
        self.with(|s| {
            s.posts
                .iter()
                .map(Req::json)
                .filter(|b| b["request_id"] == request_id)
                .collect()
        })
    }

    /// Waits for the terminal POST of `request_id` (the last accepted one) and returns it.
    pub fn terminal(&self, request_id: &str) -> Value {
        wait_for(&format!("the terminal response of {request_id}"), || {
            self.posts_for(request_id)
                .into_iter()
                .rev()
                .find(|b| b["resp_type"] != "jsonrpc_notify")
        })
    }
}

/// A `jsonrpc` command.
pub fn command(request_id: &str, timeout: Option<&str>, rpc: Value) -> Value {
    let mut c = json!({
        "request_id": request_id,
        "shard_token": format!("shard-secret-{request_id}"),
        "command_type": "jsonrpc",
        "channel": "main",
        "created_at": "2026-01-01T00:00:00Z",
        "headers": {"Mcp-Session-Id": ["sess-1"], "Authorization": ["Bearer user-token-abc"]},
        "jsonrpc": rpc
    });
    if let Some(t) = timeout {
        c["response_timeout"] = json!(t);
    }
    c
}

pub fn call(id: i64, tool: &str, args: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": tool, "arguments": args,
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}})
}

// ---------------------------------------------------------------------------------------------
// Streamable HTTP MCP server.

#[derive(Default)]
pub struct McpState {
    pub requests: Vec<Req>,
    /// Set when a `slow` call's connection was closed by the client.
    pub slow_closed: bool,
    /// `sleep` calls running now, and the most at once.
    pub sleeping: usize,
    pub max_sleeping: usize,
}

#[derive(Clone)]
pub struct McpServer {
    pub addr: SocketAddr,
    pub state: Arc<Mutex<McpState>>,
}

impl McpServer {
    pub fn start() -> McpServer {
        let state: Arc<Mutex<McpState>> = Arc::default();
        let s = Arc::clone(&state);
        let addr = serve(Arc::new(move |req: Req, conn: &mut TcpStream| {
            s.lock().unwrap().requests.push(req.clone());
            if req.method == "DELETE" {
                respond(conn, 204, &[], b"");
                return;
            }
            let body = req.json();
            let id = body["id"].clone();
            let method = body["method"].as_str().unwrap_or("");
            if method.starts_with("notifications/") {
                respond(conn, 202, &[], b"");
                return;
            }
            let result = |r: Value| json!({"jsonrpc": "2.0", "id": id, "result": r}).to_string();
            let json_ct = [
                ("Content-Type", "application/json"),
                ("Mcp-Session-Id", "sess-1"),
                ("X-Internal", "drop-me"),
            ];
            match (method, body["params"]["name"].as_str()) {
                ("tools/call", Some("echo")) => {
                    let text = body["params"]["arguments"]["text"].clone();
                    respond(
                        conn,
                        200,
                        &json_ct,
                        result(json!({"content": [{"type": "text", "text": text}]})).as_bytes(),
                    );
                }
                ("tools/call", Some("progress")) => {
                    let note = json!({"jsonrpc": "2.0", "method": "notifications/progress",
                        "params": {"progressToken": "p1", "progress": 0.5}});
                    let sse = format!(
                        "data: {note}\n\ndata: {}\n\n",
                        result(json!({"content": [{"type": "text", "text": "done"}]}))
                    );
                    respond(
                        conn,
                        200,
                        &[("Content-Type", "text/event-stream")],
                        sse.as_bytes(),
                    );
                }
                ("tools/call", Some("slow")) => {
                    // Hold the request until the client closes the connection.
                    let _ = conn.set_read_timeout(Some(Duration::from_millis(100)));
                    let start = Instant::now();
                    let mut buf = [0u8; 64];
                    while start.elapsed() < PATIENCE {
                        match conn.read(&mut buf) {
                            Ok(0) => {
                                s.lock().unwrap().slow_closed = true;
                                return;
                            }
                            Ok(_) => {}
                            Err(e)
                                if matches!(
                                    e.kind(),
                                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                                ) => {}
                            Err(_) => {
                                s.lock().unwrap().slow_closed = true;
                                return;
                            }
                        }
                    }
                }
                ("tools/call", Some("sleep")) => {
                    let ms = body["params"]["arguments"]["ms"].as_u64().unwrap_or(0);
                    {
                        let mut st = s.lock().unwrap();
                        st.sleeping += 1;
                        st.max_sleeping = st.max_sleeping.max(st.sleeping);
                    }
                    thread::sleep(Duration::from_millis(ms.min(2000)));
                    s.lock().unwrap().sleeping -= 1;
                    respond(conn, 200, &json_ct, result(json!({"slept": ms})).as_bytes());
                }
                ("tools/call", Some("redirect")) => {
                    let to = body["params"]["arguments"]["to"].as_str().unwrap_or("/");
                    let status = body["params"]["arguments"]["status"]
                        .as_u64()
                        .unwrap_or(307);
                    respond(conn, status as u16, &[("Location", to)], b"");
                }
                ("tools/call", Some("broken")) => {
                    respond(
                        conn,
                        500,
                        &[("Content-Type", "text/html")],
                        b"<html>Internal error at /srv/app</html>",
                    );
                }
                ("tools/call", Some("rpc_error")) => {
                    let e = json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32003, "message": "capability missing", "data": {"x": 1}}});
                    respond(conn, 400, &json_ct, e.to_string().as_bytes());
                }
                _ => respond(conn, 200, &json_ct, result(json!({})).as_bytes()),
            }
        }));
        McpServer { addr, state }
    }

    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// The requests received, less the tunnel's start-up OAuth discovery (Harpoon's
    /// `--harpoon.oauth-discovery`, on by default for an HTTP main channel: its probe and
    /// metadata fetches say so in their `User-Agent`).
    pub fn requests(&self) -> Vec<Req> {
        let ua = mcpwire_core::tunnel::harpoon::discovery::DISCOVERY_USER_AGENT;
        self.state
            .lock()
            .unwrap()
            .requests
            .iter()
            .filter(|r| r.header("User-Agent") != Some(ua))
            .cloned()
            .collect()
    }
}

// ---------------------------------------------------------------------------------------------
// stdio MCP server: this test binary, run again with MCPWIRE_TEST_STDIO_SERVER set.

pub const STDIO_ENV: &str = "MCPWIRE_TEST_STDIO_SERVER";
pub const CHILD_SECRET: &str = "child-token-9876";

/// The `--mcp.command` value that runs [`stdio_server`] (via the `stdio_server_child` test).
pub fn stdio_command() -> String {
    let exe = std::env::current_exe().unwrap();
    format!(
        "'{}' --exact stdio_server_child --nocapture --test-threads 1 --quiet",
        exe.display()
    )
}

/// A newline-delimited JSON-RPC MCP server on stdin/stdout.
pub fn stdio_server() {
    eprintln!("stdio server up; upstream Authorization: Bearer {CHILD_SECRET}");
    let stdin = std::io::stdin();
    let mut out = std::io::stdout();
    let mut write = |v: Value| {
        let _ = out.write_all(format!("{v}\n").as_bytes());
        let _ = out.flush();
    };
    for line in stdin.lock().lines() {
        let Ok(line) = line else { return };
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let Some(id) = msg.get("id").cloned() else {
            continue;
        };
        let name = msg["params"]["name"].as_str().unwrap_or("");
        match (msg["method"].as_str().unwrap_or(""), name) {
            ("tools/call", "slow") => {}
            ("initialize", _) if msg["params"]["hang"] == true => {}
            ("tools/call", "crash") => std::process::exit(3),
            ("tools/call", "progress") => {
                write(json!({"jsonrpc": "2.0", "method": "notifications/progress",
                    "params": {"progressToken": "p", "progress": 1}}));
                write(
                    json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": "stdio done"}]}}),
                );
            }
            ("tools/call", "echo") => {
                let text = msg["params"]["arguments"]["text"].clone();
                write(
                    json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": text}]}}),
                );
            }
            _ => write(json!({"jsonrpc": "2.0", "id": id, "result": {}})),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The tunnel client under test.

/// The drivers built into the binary under test (it always has both).
pub const DRIVERS: &[&str] = &["blocking", "smol"];

thread_local! {
    /// The driver [`Tunnel::start`] asks for.
    static DRIVER: Cell<&'static str> = const { Cell::new("blocking") };
}

/// Runs `body` once per driver in [`DRIVERS`]; [`Tunnel::start`] inside it uses that driver.
pub fn each_driver(body: impl Fn()) {
    for driver in DRIVERS {
        eprintln!("=== driver {driver}");
        DRIVER.with(|d| d.set(driver));
        body();
    }
}

pub struct Tunnel {
    child: Child,
    log: Arc<Mutex<String>>,
    pub health: SocketAddr,
}

impl Tunnel {
    /// Starts `mcpwire tunnel run` against `cp` with `extra` flags; waits for its health
    /// listener and its driver's start line.
    pub fn start(cp: &ControlPlane, extra: &[&str]) -> Tunnel {
        let t = Tunnel::start_listening(cp, extra);
        // The driver asked for is the one running.
        let driver = DRIVER.with(Cell::get);
        wait_for("the driver's start line", || {
            t.log()
                .lines()
                .any(|l| {
                    l.contains("tunnel client started") && l.contains(&format!("driver={driver}"))
                })
                .then_some(())
        });
        t
    }

    /// Starts `mcpwire tunnel run` like [`Tunnel::start`] but waits only for its health
    /// listener (for start-ups that block or fail before the driver starts).
    pub fn start_listening(cp: &ControlPlane, extra: &[&str]) -> Tunnel {
        let mut args: Vec<String> = [
            "tunnel",
            "run",
            "--control-plane.base-url",
            &cp.url(),
            "--control-plane.tunnel-id",
            TUNNEL,
            "--control-plane.api-key",
            "env:TEST_CP_KEY",
            "--control-plane.poll-timeout",
            "1s",
            "--health.listen-addr",
            "127.0.0.1:0",
            "--log.level",
            "debug",
            "--shutdown.grace-period",
            "3s",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        args.extend(["--driver".to_owned(), DRIVER.with(Cell::get).to_owned()]);
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        let mut child = Command::new(env!("CARGO_BIN_EXE_mcpwire"))
            .args(&args)
            .env("TEST_CP_KEY", API_KEY)
            .env(STDIO_ENV, "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let log: Arc<Mutex<String>> = Arc::default();
        // The log lines on standard output (as the Go client's), start-up errors on standard
        // error: both into one log.
        let stdout: Box<dyn std::io::Read + Send> = Box::new(child.stdout.take().unwrap());
        let stderr: Box<dyn std::io::Read + Send> = Box::new(child.stderr.take().unwrap());
        for stream in [stdout, stderr] {
            let l = Arc::clone(&log);
            thread::spawn(move || {
                for line in BufReader::new(stream).lines() {
                    let Ok(line) = line else { return };
                    let mut l = l.lock().unwrap();
                    l.push_str(&line);
                    l.push('\n');
                }
            });
        }
        let health = wait_for("the health listener", || {
            let text = log.lock().unwrap().clone();
            let line = text.lines().find(|l| l.contains("health listener"))?;
            line.split("addr=")
                .nth(1)?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        });
        Tunnel { child, log, health }
    }

    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// GET on the health listener: (status, body).
    pub fn get(&self, path: &str) -> (u16, String) {
        let mut s = TcpStream::connect(self.health).unwrap();
        s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
            .unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        let status = text
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let body = text.split("\r\n\r\n").nth(1).unwrap_or("").to_owned();
        (status, body)
    }

    /// Waits for the client to exit on its own: (exit code, log).
    pub fn wait_exit(mut self) -> (Option<i32>, String) {
        let code = wait_for("the client to exit", || {
            self.child.try_wait().unwrap().map(|s| s.code())
        });
        thread::sleep(Duration::from_millis(50));
        (code, self.log())
    }

    /// Sends SIGTERM and waits for the exit code.
    pub fn terminate(mut self) -> (Option<i32>, String) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let start = Instant::now();
        let code = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status.code();
            }
            assert!(start.elapsed() < PATIENCE, "the client did not stop");
            thread::sleep(Duration::from_millis(20));
        };
        thread::sleep(Duration::from_millis(50));
        (code, self.log())
    }
}

impl Drop for Tunnel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

//! The real stack on 127.0.0.1, in-process: the dev control plane, the tunnel client (a
//! driver run through the library, as `mcpwire tunnel run` runs it) and the dev reference MCP
//! server over HTTP or as a stdio child (`mcpwire dev mcp-server --stdio`).
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{mpsc, Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use mcpwire::tunnel::log::{Level, Logger};
use mcpwire::tunnel::{Status, Stopper};
use mcpwire_cli::tunnel_run::config::{self, RunArgs};
use mcpwire_cli::tunnel_run::health;
use mcpwire_core::mcp::headers::request_headers;
use mcpwire_core::mcp::meta::{build_request, RequestMeta};
use mcpwire_core::mcp::{ClientCapabilities, Implementation};
use mcpwire_core::sse::SseParser;
use mcpwire_dev::control_plane::{self, ControlPlane, ControlPlaneHandle};
use mcpwire_dev::mcp_server::{self, McpServer, McpServerHandle};
use mcpwire_dev::ApiKey;
use serde_json::{json, Value};

/// The tunnel clients' API key (a test greps the logs for it).
pub const KEY: &str = "sk-e2e-never-logged-4f1c9a";
/// The tunnel id.
pub const TUNNEL: &str = "tunnel_e2e";
/// The longest any wait in these tests lasts before it fails.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// Which driver runs the tunnel engine. Each test runs once per built driver (see
/// [`each_driver!`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Driver {
    /// ureq, std threads, `std::process`.
    Blocking,
    /// hyper 1 on smol's sockets, smol tasks, async-process.
    Smol,
}

impl Driver {
    /// The `--driver` value.
    pub fn flag(self) -> &'static str {
        match self {
            Driver::Blocking => "blocking",
            Driver::Smol => "smol",
        }
    }
}

/// `each_driver!(a, b)` makes `a::blocking` and `a::smol` tests calling `a(Driver::...)`.
#[macro_export]
macro_rules! each_driver {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[test]
            fn blocking() {
                super::$name(super::Driver::Blocking)
            }
            #[test]
            fn smol() {
                super::$name(super::Driver::Smol)
            }
        }
    )*};
}

/// Polls `f` until it returns `Some`, for at most [`PATIENCE`].
pub fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < PATIENCE, "timed out waiting for {what}");
        thread::sleep(Duration::from_millis(10));
    }
}

// ---------------------------------------------------------------------------------------------
// The servers.

/// The dev control plane on 127.0.0.1:0 (polls wait at most 1 s, a 500 ms expiry grace).
pub fn plane() -> ControlPlaneHandle {
    plane_with(|_| {})
}

/// [`plane`] with changed settings.
pub fn plane_with(f: impl FnOnce(&mut control_plane::Config)) -> ControlPlaneHandle {
    let mut config = control_plane::Config::new(ApiKey::new(KEY).unwrap());
    config.max_poll_wait = Duration::from_secs(1);
    config.expiry_grace = Duration::from_millis(500);
    config.mcp_wait = PATIENCE;
    f(&mut config);
    ControlPlane::start(config, "127.0.0.1:0").unwrap()
}

/// The dev reference MCP server over HTTP on 127.0.0.1:0.
pub fn reference_server() -> McpServerHandle {
    McpServer::start_http(mcp_server::Config::default(), "127.0.0.1:0").unwrap()
}

/// The `--mcp.command` that runs the reference server on stdio (`mcpwire dev mcp-server
/// --stdio`: these tests are the `mcpwire-cli` crate's, so cargo builds the binary for them).
pub fn stdio_reference_command() -> String {
    format!("'{}' dev mcp-server --stdio", env!("CARGO_BIN_EXE_mcpwire"))
}

// ---------------------------------------------------------------------------------------------
// The tunnel client.

/// Log lines kept in memory.
#[derive(Clone, Default)]
pub struct Captured(Arc<Mutex<Vec<u8>>>);

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
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(PoisonError::into_inner)).into_owned()
    }
}

/// A running tunnel client: its health listener, status and log. Stopped on drop.
pub struct Tunnel {
    stop: Stopper,
    join: Option<thread::JoinHandle<Result<(), mcpwire::tunnel::Error>>>,
    log: Captured,
    pub health: SocketAddr,
}

impl Tunnel {
    /// Starts the tunnel client against `cp` with `driver`, the settings of `mcpwire tunnel
    /// run` (`--control-plane.*` filled in; debug logs; polls of 1 s) changed by `args`.
    pub fn start(
        driver: Driver,
        cp: &ControlPlaneHandle,
        args: impl FnOnce(&mut RunArgs),
    ) -> Tunnel {
        let mut run_args = RunArgs {
            base_url: Some(cp.base_url()),
            tunnel_id: Some(TUNNEL.to_owned()),
            api_key: Some("env:E2E_TUNNEL_KEY".to_owned()),
            poll_timeout: Some("1s".to_owned()),
            health_addr: Some("127.0.0.1:0".to_owned()),
            log_level: Some("debug".to_owned()),
            grace: Some("1s".to_owned()),
            driver: Some(driver.flag().to_owned()),
            ..RunArgs::default()
        };
        args(&mut run_args);
        let env = |name: &str| (name == "E2E_TUNNEL_KEY").then(|| KEY.to_owned());
        let no_files =
            |_: &str| -> std::io::Result<String> { Err(std::io::Error::other("no files here")) };
        let config = config::resolve(&run_args, &env, &no_files).unwrap();
        let log = Captured::default();
        let logger = Arc::new(Logger::new(
            Level::Debug,
            false,
            vec![config.tunnel.engine.api_key.expose().to_owned()],
            Box::new(log.clone()),
        ));
        let listener = TcpListener::bind(config.health_addr).unwrap();
        let health = listener.local_addr().unwrap();
        let status = Status::new();
        health::serve(listener, health::Served::new(Arc::clone(&status), None)).unwrap();
        let (tx, rx) = mpsc::channel();
        let on_start = move |stopper: Stopper| {
            tx.send(stopper)
                .map_err(|_| std::io::Error::other("the test went away"))
        };
        let tunnel = config.tunnel;
        let join = match driver {
            Driver::Blocking => thread::spawn(move || {
                mcpwire::tunnel::blocking::run(tunnel, logger, status, on_start)
            }),
            Driver::Smol => {
                thread::spawn(move || mcpwire::tunnel::smol::run(tunnel, logger, status, on_start))
            }
        };
        let stop = rx
            .recv_timeout(PATIENCE)
            .expect("the tunnel client started");
        let t = Tunnel {
            stop,
            join: Some(join),
            log,
            health,
        };
        // The chosen driver, not another one, runs the engine.
        let started = format!("driver={}", driver.flag());
        wait_for("the driver's start line", || {
            let text = t.log();
            let line = text.lines().find(|l| l.contains("tunnel client started"))?;
            assert!(line.contains(&started), "{line}");
            Some(())
        });
        t
    }

    /// The log so far.
    pub fn log(&self) -> String {
        self.log.text()
    }

    /// GET on the health listener: (status, body).
    pub fn get(&self, path: &str) -> (u16, String) {
        let mut s = TcpStream::connect(self.health).unwrap();
        s.write_all(
            format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
        )
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

    /// Stops it as SIGTERM would, waits for it, and returns its whole log.
    pub fn stop(mut self) -> String {
        self.stop.stop();
        if let Some(j) = self.join.take() {
            j.join().unwrap().unwrap();
        }
        self.log.text()
    }
}

impl Tunnel {
    /// Stops it twice, as a second SIGTERM would; waits (at most [`PATIENCE`]) for it to end
    /// and returns its whole log.
    pub fn stop_twice(mut self) -> String {
        self.stop.stop();
        self.stop.stop();
        let join = self.join.take().expect("running");
        wait_for("the tunnel client to end after a second stop", || {
            join.is_finished().then_some(())
        });
        join.join().unwrap().unwrap();
        self.log.text()
    }
}

impl Drop for Tunnel {
    fn drop(&mut self) {
        if let Some(j) = self.join.take() {
            self.stop.stop();
            self.stop.stop();
            let _ = j.join();
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Commands queued straight into the control plane, and their response POSTs.

/// A `jsonrpc` command on channel `main`.
pub fn command(request_id: &str, timeout: Option<&str>, rpc: Value) -> Value {
    let mut c = json!({
        "request_id": request_id,
        "shard_token": format!("shard-secret-{request_id}"),
        "command_type": "jsonrpc",
        "channel": "main",
        "created_at": "2026-01-01T00:00:00Z",
        "headers": {},
        "jsonrpc": rpc,
    });
    if let Some(t) = timeout {
        c["response_timeout"] = json!(t);
    }
    c
}

/// A 2026-07-28 request (with `_meta`), as an MCP client builds it.
pub fn modern(id: i64, method: &str, params: Value) -> Value {
    serde_json::from_str(&modern_text(id, method, params, None)).unwrap()
}

/// The text of a 2026-07-28 request; `progress` sets `_meta.progressToken`.
pub fn modern_text(id: i64, method: &str, params: Value, progress: Option<&str>) -> String {
    let mut meta = RequestMeta::new("2026-07-28", ClientCapabilities::none())
        .with_client_info(Implementation::new("mcpwire-e2e", "1"));
    if let Some(p) = progress {
        meta = meta.with_progress_token(p.into());
    }
    build_request(&id.into(), method, params, &meta).unwrap()
}

/// A `tools/call` request.
pub fn call(id: i64, tool: &str, args: Value) -> Value {
    modern(id, "tools/call", json!({"name": tool, "arguments": args}))
}

/// Queues commands so one poll can take them all.
pub fn enqueue(cp: &ControlPlaneHandle, commands: Vec<Value>) {
    cp.plane().enqueue_raw(TUNNEL, commands).unwrap();
}

/// Every response POST body for `request_id` (refused ones too), with the status answered.
pub fn posts_for(cp: &ControlPlaneHandle, request_id: &str) -> Vec<(u16, Value)> {
    cp.plane()
        .responses(TUNNEL)
        .into_iter()
        .filter(|r| r.request_id.as_deref() == Some(request_id))
        .map(|r| (r.status, serde_json::from_str(&r.body).unwrap()))
        .collect()
}

/// Waits for the accepted terminal response POST of `request_id`; returns its body.
pub fn terminal(cp: &ControlPlaneHandle, request_id: &str) -> Value {
    let r = cp
        .plane()
        .wait_for_response(TUNNEL, PATIENCE, |r| {
            r.request_id.as_deref() == Some(request_id) && r.is_accepted_terminal()
        })
        .unwrap_or_else(|| panic!("no terminal response for {request_id}"));
    serde_json::from_str(&r.body).unwrap()
}

/// The arrival order (`seq`) of the accepted terminal response of `request_id`.
pub fn terminal_seq(cp: &ControlPlaneHandle, request_id: &str) -> u64 {
    cp.plane()
        .wait_for_response(TUNNEL, PATIENCE, |r| {
            r.request_id.as_deref() == Some(request_id) && r.is_accepted_terminal()
        })
        .unwrap_or_else(|| panic!("no terminal response for {request_id}"))
        .seq
}

/// The `tunnel_failure` provenance of a synthesized failure.
pub fn failure(post: &Value) -> &Value {
    &post["resp_json"]["error"]["data"]["tunnel_failure"]
}

// ---------------------------------------------------------------------------------------------
// An MCP client of the control plane's MCP endpoint.

/// An HTTP answer.
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }

    /// The JSON-RPC messages of an SSE body, parsed with the core's parser.
    pub fn sse_messages(&self) -> Vec<Value> {
        let mut p = SseParser::new();
        p.push(self.body.as_bytes());
        let mut out = Vec::new();
        while let Some(ev) = p.next_event().unwrap() {
            out.push(serde_json::from_str(&ev.data).unwrap());
        }
        out
    }
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(PATIENCE))
        .build()
        .into()
}

/// Sends `method` to `url` with `headers` and `body`.
pub fn http(method: &str, url: &str, headers: &[(&str, &str)], body: Option<&str>) -> Reply {
    let mut b = ureq::http::Request::builder().method(method).uri(url);
    for (n, v) in headers {
        b = b.header(*n, *v);
    }
    let result = match body {
        Some(text) => agent().run(b.body(text.as_bytes().to_vec()).unwrap()),
        None => agent().run(b.body(()).unwrap()),
    };
    let mut r = result.unwrap();
    let status = r.status().as_u16();
    let headers = r
        .headers()
        .iter()
        .map(|(n, v)| {
            (
                n.as_str().to_owned(),
                v.to_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let body = r.body_mut().read_to_string().unwrap_or_default();
    Reply {
        status,
        headers,
        body,
    }
}

/// POSTs a 2026-07-28 request to the control plane's MCP endpoint with the headers the core
/// builds for it, plus `extra`.
pub fn mcp_request(cp: &ControlPlaneHandle, body: &str, extra: &[(&str, &str)]) -> Reply {
    let built = request_headers(body, None).unwrap();
    let pairs: Vec<(String, String)> = built
        .iter()
        .map(|(n, v)| (n.to_owned(), v.to_owned()))
        .collect();
    let mut refs: Vec<(&str, &str)> = pairs
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    refs.extend_from_slice(extra);
    http("POST", &cp.mcp_url(TUNNEL), &refs, Some(body))
}

/// The child's standard output and error, as they arrive, in one text.
pub fn capture(child: &mut std::process::Child) -> Arc<Mutex<String>> {
    let out: Arc<Mutex<String>> = Arc::default();
    let streams: [Box<dyn std::io::Read + Send>; 2] = [
        Box::new(child.stdout.take().unwrap()),
        Box::new(child.stderr.take().unwrap()),
    ];
    for mut s in streams {
        let o = Arc::clone(&out);
        thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = s.read(&mut buf) {
                if n == 0 {
                    return;
                }
                o.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Third-party Python peers

/// The repository root (the parent of this crate).
pub fn repo_root() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// `tests/peers/NAME` as a string argument.
pub fn peer_script(name: &str) -> String {
    repo_root()
        .join("tests/peers")
        .join(name)
        .display()
        .to_string()
}

/// The Python interpreter named by `env_var` (else `<repo>/.venv-peers/bin/python`) that has
/// `package==version` installed, or a failure that says how to set it up (`setup`).
pub fn pinned_python(
    env_var: &str,
    package: &str,
    version: &str,
    setup: &str,
) -> std::path::PathBuf {
    let python = match std::env::var_os(env_var) {
        Some(p) => std::path::PathBuf::from(p),
        None => {
            let local = repo_root().join(".venv-peers/bin/python");
            assert!(local.exists(), "{setup}");
            local
        }
    };
    let out = std::process::Command::new(&python)
        .args([
            "-c",
            &format!("import importlib.metadata as m; print(m.version('{package}'))"),
        ])
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}\n{setup}", python.display()));
    let have = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert_eq!(
        have,
        version,
        "{} has {package} {have:?}, not {version}: {}\n{setup}",
        python.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    python
}

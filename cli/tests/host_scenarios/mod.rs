//! The host scenarios both drivers must pass (`mcpwire::host::blocking::Host` and
//! `mcpwire::host::smol::Host`, behind one [`HostApi`]), against real servers on 127.0.0.1:
//! the reference server in-process over Streamable HTTP, `mcpwire dev mcp-server --stdio` as a
//! child (started through `sh` when it must be slow or check its environment), a closed port
//! (dead) and a listener that never answers (hung).
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use mcpwire::host::{
    ConnectReport, ConnectionState, FailureKind, HostAuthorization, HostError, HostOptions,
    MemoryTokens, RegistryEvent, Server, ServerId, ServerSpec, Stage, StateKind, TransportSpec,
    Trust,
};
use mcpwire::mcp::{CallToolResult, FollowRedirect, TokenStore, Tool};
use mcpwire_dev::auth_server::AuthConfig;
use mcpwire_dev::mcp_server::{self, McpServer, McpServerHandle};
use serde_json::{json, Value};

/// The longest any wait here lasts before the test fails.
const PATIENCE: Duration = Duration::from_secs(30);
/// How long the slow stdio server sleeps before it starts: well beyond what the dead server
/// takes to fail (the client retries a refused connection for about a second).
const SLOW_START: Duration = Duration::from_secs(4);
/// The header each HTTP spec sends, naming its server (the `headers` tool echoes it).
const TAG_HEADER: &str = "x-host-server";

/// The host API both drivers offer, as plain calls (the smol host's through `smol::block_on`).
pub trait HostApi: Clone + Send + Sync + 'static {
    fn new(options: HostOptions) -> Self;
    fn add(&self, spec: ServerSpec) -> Result<(), HostError>;
    fn connect(&self, id: &ServerId) -> Result<(), HostError>;
    fn connect_all(&self, specs: Vec<ServerSpec>) -> ConnectReport;
    fn wait_for(&self, id: &ServerId) -> Result<(), HostError>;
    fn disconnect(&self, id: &ServerId) -> Result<(), HostError>;
    fn remove(&self, id: &ServerId) -> Result<(), HostError>;
    fn servers(&self) -> Vec<Server>;
    fn server(&self, id: &ServerId) -> Option<Server>;
    fn tools(&self, id: &ServerId) -> Result<Vec<Tool>, HostError>;
    fn all_tools(&self) -> Vec<(ServerId, Result<Vec<Tool>, HostError>)>;
    fn call_tool(
        &self,
        id: &ServerId,
        tool: &str,
        args: Value,
    ) -> Result<CallToolResult, HostError>;
    fn poll_event(&self) -> Option<RegistryEvent>;
    fn wait_event(&self, timeout: Duration) -> Option<RegistryEvent>;
    fn close(self);
}

impl HostApi for mcpwire::host::blocking::Host {
    fn new(options: HostOptions) -> Self {
        Self::new(options)
    }
    fn add(&self, spec: ServerSpec) -> Result<(), HostError> {
        self.add(spec)
    }
    fn connect(&self, id: &ServerId) -> Result<(), HostError> {
        self.connect(id)
    }
    fn connect_all(&self, specs: Vec<ServerSpec>) -> ConnectReport {
        self.connect_all(specs)
    }
    fn wait_for(&self, id: &ServerId) -> Result<(), HostError> {
        self.wait_for(id)
    }
    fn disconnect(&self, id: &ServerId) -> Result<(), HostError> {
        self.disconnect(id)
    }
    fn remove(&self, id: &ServerId) -> Result<(), HostError> {
        self.remove(id)
    }
    fn servers(&self) -> Vec<Server> {
        self.servers()
    }
    fn server(&self, id: &ServerId) -> Option<Server> {
        self.server(id)
    }
    fn tools(&self, id: &ServerId) -> Result<Vec<Tool>, HostError> {
        self.tools(id)
    }
    fn all_tools(&self) -> Vec<(ServerId, Result<Vec<Tool>, HostError>)> {
        self.all_tools()
    }
    fn call_tool(
        &self,
        id: &ServerId,
        tool: &str,
        args: Value,
    ) -> Result<CallToolResult, HostError> {
        self.call_tool(id, tool, args)
    }
    fn poll_event(&self) -> Option<RegistryEvent> {
        self.poll_event()
    }
    fn wait_event(&self, timeout: Duration) -> Option<RegistryEvent> {
        self.wait_event(timeout)
    }
    fn close(self) {
        self.close()
    }
}

impl HostApi for mcpwire::host::smol::Host {
    fn new(options: HostOptions) -> Self {
        Self::new(options)
    }
    fn add(&self, spec: ServerSpec) -> Result<(), HostError> {
        self.add(spec)
    }
    fn connect(&self, id: &ServerId) -> Result<(), HostError> {
        self.connect(id)
    }
    fn connect_all(&self, specs: Vec<ServerSpec>) -> ConnectReport {
        smol::block_on(self.connect_all(specs))
    }
    fn wait_for(&self, id: &ServerId) -> Result<(), HostError> {
        smol::block_on(self.wait_for(id))
    }
    fn disconnect(&self, id: &ServerId) -> Result<(), HostError> {
        self.disconnect(id)
    }
    fn remove(&self, id: &ServerId) -> Result<(), HostError> {
        self.remove(id)
    }
    fn servers(&self) -> Vec<Server> {
        self.servers()
    }
    fn server(&self, id: &ServerId) -> Option<Server> {
        self.server(id)
    }
    fn tools(&self, id: &ServerId) -> Result<Vec<Tool>, HostError> {
        smol::block_on(self.tools(id))
    }
    fn all_tools(&self) -> Vec<(ServerId, Result<Vec<Tool>, HostError>)> {
        smol::block_on(self.all_tools())
    }
    fn call_tool(
        &self,
        id: &ServerId,
        tool: &str,
        args: Value,
    ) -> Result<CallToolResult, HostError> {
        smol::block_on(self.call_tool(id, tool, args))
    }
    fn poll_event(&self) -> Option<RegistryEvent> {
        self.poll_event()
    }
    fn wait_event(&self, timeout: Duration) -> Option<RegistryEvent> {
        smol::block_on(self.wait_event(timeout))
    }
    fn close(self) {
        self.close()
    }
}

// ---------------------------------------------------------------------------------------------
// Servers and specs.

fn id(s: &str) -> ServerId {
    ServerId::new(s).unwrap()
}

/// The reference server over HTTP.
fn http_server(config: mcp_server::Config) -> McpServerHandle {
    McpServer::start_http(config, "127.0.0.1:0").unwrap()
}

/// An HTTP spec for `url` that sends `x-host-server: NAME`.
fn http_spec(name: &str, url: &str) -> ServerSpec {
    let mut headers = BTreeMap::new();
    headers.insert(TAG_HEADER.to_owned(), name.to_owned());
    ServerSpec {
        id: id(name),
        transport: TransportSpec::Http {
            url: url.to_owned(),
            headers,
        },
        oauth: None,
        trust: Trust::Untrusted,
        disabled: false,
    }
}

/// The reference server on stdio.
fn stdio_spec(name: &str) -> ServerSpec {
    ServerSpec {
        id: id(name),
        transport: TransportSpec::Stdio {
            command: env!("CARGO_BIN_EXE_mcpwire").to_owned(),
            args: ["dev", "mcp-server", "--stdio"].map(String::from).to_vec(),
            env: BTreeMap::new(),
            cwd: None,
        },
        oauth: None,
        trust: Trust::Trusted,
        disabled: false,
    }
}

/// The reference server on stdio, started [`SLOW_START`] late by `sh`, and only when its
/// environment has `MCPWIRE_HOST_TAG=NAME` and its working directory is `dir` (so a spec whose
/// `env` or `cwd` were not applied never becomes ready).
fn slow_stdio_spec(name: &str, dir: &std::path::Path) -> ServerSpec {
    let script = format!(
        "sleep {}; [ \"$MCPWIRE_HOST_TAG\" = {name} ] || exit 3; [ \"$(pwd -P)\" = \"$1\" ] || exit 4; exec \"$0\" dev mcp-server --stdio",
        SLOW_START.as_secs_f64()
    );
    let mut env = BTreeMap::new();
    env.insert("MCPWIRE_HOST_TAG".to_owned(), name.to_owned());
    ServerSpec {
        id: id(name),
        transport: TransportSpec::Stdio {
            command: "sh".into(),
            args: vec![
                "-c".into(),
                script,
                env!("CARGO_BIN_EXE_mcpwire").into(),
                dir.to_string_lossy().into_owned(),
            ],
            env,
            cwd: Some(dir.to_string_lossy().into_owned()),
        },
        oauth: None,
        trust: Trust::Untrusted,
        disabled: false,
    }
}

/// A URL on a port nothing listens on.
fn dead_url() -> String {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    format!("http://127.0.0.1:{port}/mcp")
}

/// A listener that accepts connections and never answers; its URL.
fn hung_url() -> (String, thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let t = thread::spawn(move || {
        let mut held = Vec::new();
        listener.set_nonblocking(true).unwrap();
        let until = Instant::now() + PATIENCE;
        while Instant::now() < until {
            match listener.accept() {
                Ok((s, _)) => held.push(s),
                Err(_) => thread::sleep(Duration::from_millis(20)),
            }
            if held.len() > 64 {
                break;
            }
        }
    });
    (url, t)
}

/// A directory for the slow server to start in (its canonical path).
fn work_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mcpwire-host-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.canonicalize().unwrap()
}

fn options() -> HostOptions {
    HostOptions::default().with_connect_timeout(PATIENCE)
}

fn state<H: HostApi>(host: &H, name: &str) -> StateKind {
    host.server(&id(name)).unwrap().state().kind()
}

/// The value of header `name` the reference server received, from its `headers` tool.
fn header_seen(result: &CallToolResult, name: &str) -> Option<String> {
    result.structured_content.as_ref()?["headers"]
        .as_array()?
        .iter()
        .find(|h| h[0].as_str().is_some_and(|n| n.eq_ignore_ascii_case(name)))
        .and_then(|h| h[1].as_str().map(str::to_owned))
}

fn events<H: HostApi>(host: &H) -> Vec<RegistryEvent> {
    std::iter::from_fn(|| host.poll_event()).collect()
}

fn tool_calls(srv: &McpServerHandle, tool: &str) -> u64 {
    srv.server()
        .stats()
        .tool_calls
        .get(tool)
        .copied()
        .unwrap_or(0)
}

fn tools_lists(srv: &McpServerHandle) -> usize {
    srv.server()
        .requests()
        .iter()
        .filter(|r| r.method.as_deref() == Some("tools/list"))
        .count()
}

// ---------------------------------------------------------------------------------------------
// The scenarios.

/// Three servers at once (the reference server over HTTP, a slow one on stdio, a dead HTTP
/// one): the HTTP one is ready and answers calls while the slow one still starts, the dead one
/// fails with its id before the slow one is ready, and the slow one gets there too (with the
/// environment variable and working directory of its spec).
pub fn a_dead_and_a_slow_server_hold_up_no_other<H: HostApi>() {
    let alpha_srv = http_server(mcp_server::Config::default());
    let dir = work_dir("slow");
    let host = H::new(options());
    let started = Instant::now();
    for spec in [
        http_spec("alpha", &alpha_srv.url()),
        slow_stdio_spec("gamma", &dir),
        http_spec("dead", &dead_url()),
    ] {
        host.add(spec).unwrap();
    }
    for name in ["alpha", "dead", "gamma"] {
        host.connect(&id(name)).unwrap();
    }
    host.wait_for(&id("alpha")).unwrap();
    let answer = host
        .call_tool(&id("alpha"), "echo", json!({"text": "first"}))
        .unwrap();
    assert_eq!(answer.text(), "first");
    assert_eq!(
        state(&host, "gamma"),
        StateKind::Connecting,
        "alpha was ready and answered only after the slow server ({:?})",
        started.elapsed()
    );
    let e = host.wait_for(&id("dead")).unwrap_err();
    assert_eq!(state(&host, "gamma"), StateKind::Connecting);
    match &e {
        HostError::Connect {
            server, failure, ..
        } => {
            assert_eq!(server, &id("dead"));
            assert_eq!(failure.kind, FailureKind::Unreachable, "{e}");
        }
        other => panic!("not a connect failure: {other}"),
    }
    assert!(e.to_string().contains("\"dead\""), "{e}");
    assert!(e.client_error().is_some());
    host.wait_for(&id("gamma")).unwrap();
    assert!(started.elapsed() >= SLOW_START);
    let states: Vec<(String, StateKind)> = host
        .servers()
        .iter()
        .map(|s| (s.id().to_string(), s.state().kind()))
        .collect();
    assert_eq!(
        states,
        [
            ("alpha".to_owned(), StateKind::Ready),
            ("dead".to_owned(), StateKind::Failed),
            ("gamma".to_owned(), StateKind::Ready)
        ]
    );
    let gamma = host.server(&id("gamma")).unwrap();
    assert!(gamma.tools().count.unwrap() > 0);
    assert!(gamma.era().is_some());
    let info = gamma.summary().unwrap().server_info.as_ref().unwrap();
    assert_eq!(info.name, mcp_server::SERVER_NAME);
    host.close();
}

/// `connect_all` connects at once and reports per server, in id order: a server slower than
/// its connect timeout fails timed out (naming the step it was stuck at) while the others are
/// ready, and the whole takes about the timeout, not the sum of the waits.
pub fn connect_all_reports_each_server_and_times_out_a_hung_one<H: HostApi>() {
    let alpha_srv = http_server(mcp_server::Config::default());
    let (hung, _listener) = hung_url();
    let timeout = Duration::from_millis(800);
    let host = H::new(HostOptions::default().with_connect_timeout(timeout));
    let mut off = stdio_spec("off");
    off.disabled = true;
    let started = Instant::now();
    let report = host.connect_all(vec![
        http_spec("hung", &hung),
        stdio_spec("stdio"),
        http_spec("alpha", &alpha_srv.url()),
        off,
        http_spec("alpha", &dead_url()),
    ]);
    let took = started.elapsed();
    let ids: Vec<&str> = report.iter().map(|(i, _)| i.as_str()).collect();
    assert_eq!(ids, ["alpha", "alpha", "hung", "off", "stdio"]);
    // The second "alpha" is refused; the first one is the one connected.
    let alphas: Vec<_> = report
        .iter()
        .filter(|(i, _)| i.as_str() == "alpha")
        .collect();
    assert!(alphas
        .iter()
        .any(|(_, r)| matches!(r, Err(HostError::Duplicate(d)) if d.as_str() == "alpha")));
    assert!(alphas.iter().any(|(_, r)| r.is_ok()));
    let (_, hung_outcome) = report.iter().find(|(i, _)| i.as_str() == "hung").unwrap();
    match hung_outcome {
        Err(HostError::Connect {
            server,
            failure,
            source,
        }) => {
            assert_eq!(server, &id("hung"));
            assert_eq!(failure.kind, FailureKind::TimedOut { after: timeout });
            assert_eq!(failure.stage, Stage::Discover);
            assert!(source.is_none());
        }
        other => panic!("hung: {other:?}"),
    }
    assert!(matches!(
        report.iter().find(|(i, _)| i.as_str() == "off").unwrap().1,
        Err(HostError::Disabled(_))
    ));
    assert!(report
        .iter()
        .find(|(i, _)| i.as_str() == "stdio")
        .unwrap()
        .1
        .is_ok());
    assert!(took >= timeout, "{took:?}");
    assert!(took < timeout + Duration::from_secs(10), "{took:?}");
    // The timed-out server's client is closed; the others work.
    let e = host
        .call_tool(&id("hung"), "echo", json!({"text": "x"}))
        .unwrap_err();
    assert!(
        matches!(&e, HostError::NotReady { server, state: StateKind::Failed, failure: Some(_) } if server.as_str() == "hung"),
        "{e}"
    );
    assert_eq!(
        host.call_tool(&id("stdio"), "echo", json!({"text": "ok"}))
            .unwrap()
            .text(),
        "ok"
    );
    host.close();
}

/// Two HTTP servers and a stdio one all define `echo` and `headers`: each server's tools are
/// its own, and a call by (server, tool) reaches that server only (its `headers` answer shows
/// the header of its own spec; each HTTP server counts only its own calls).
pub fn calls_are_routed_by_server_and_same_named_tools_kept_apart<H: HostApi>() {
    let alpha_srv = http_server(mcp_server::Config::default());
    let beta_srv = http_server(mcp_server::Config::default());
    let host = H::new(options());
    let report = host.connect_all(vec![
        http_spec("alpha", &alpha_srv.url()),
        http_spec("beta", &beta_srv.url()),
        stdio_spec("gamma"),
    ]);
    assert!(report.iter().all(|(_, r)| r.is_ok()), "{report:?}");
    let names = |name: &str| -> Vec<String> {
        host.tools(&id(name))
            .unwrap()
            .into_iter()
            .map(|t| t.name)
            .collect()
    };
    let (a, b, g) = (names("alpha"), names("beta"), names("gamma"));
    assert!(a.contains(&"echo".to_owned()) && a.contains(&"headers".to_owned()));
    assert_eq!(a, b);
    assert!(g.contains(&"echo".to_owned()));
    // Grouped by server, in id order, each group that server's own list.
    let all = host.all_tools();
    let grouped: Vec<(&str, Vec<String>)> = all
        .iter()
        .map(|(id, tools)| {
            let names = tools.as_ref().unwrap().iter().map(|t| t.name.clone());
            (id.as_str(), names.collect())
        })
        .collect();
    assert_eq!(
        grouped,
        [
            ("alpha", a.clone()),
            ("beta", b.clone()),
            ("gamma", g.clone())
        ]
    );
    for name in ["alpha", "beta"] {
        let r = host.call_tool(&id(name), "headers", json!({})).unwrap();
        assert_eq!(header_seen(&r, TAG_HEADER).as_deref(), Some(name));
    }
    let r = host.call_tool(&id("gamma"), "headers", json!({})).unwrap();
    assert_eq!(header_seen(&r, TAG_HEADER), None, "stdio has no headers");
    for (name, text) in [
        ("alpha", "a1"),
        ("alpha", "a2"),
        ("beta", "b1"),
        ("gamma", "g1"),
    ] {
        let r = host
            .call_tool(&id(name), "echo", json!({"text": text}))
            .unwrap();
        assert_eq!(r.text(), text);
    }
    assert_eq!(tool_calls(&alpha_srv, "echo"), 2);
    assert_eq!(tool_calls(&beta_srv, "echo"), 1);
    // A tool a server does not have is that server's error.
    let e = host
        .call_tool(&id("beta"), "no_such_tool", json!({}))
        .unwrap_err();
    assert!(
        matches!(&e, HostError::Request { server, .. } if server.as_str() == "beta"),
        "{e}"
    );
    assert!(e.to_string().contains("no_such_tool"), "{e}");
    host.close();
}

/// Disconnecting a server while others run: its calls in flight fail at once, new calls are
/// refused naming it, the others go on; connected again, it works and reuses its era.
pub fn disconnect_and_connect_again_while_running<H: HostApi>() {
    let alpha_srv = http_server(mcp_server::Config::default());
    let host = H::new(options());
    let report = host.connect_all(vec![
        http_spec("alpha", &alpha_srv.url()),
        stdio_spec("gamma"),
    ]);
    assert!(report.iter().all(|(_, r)| r.is_ok()), "{report:?}");
    events(&host);
    // A long call on gamma, cut by the disconnect.
    let h = host.clone();
    let slow = thread::spawn(move || h.call_tool(&id("gamma"), "slow", json!({"ms": 20_000})));
    thread::sleep(Duration::from_millis(300));
    let cut = Instant::now();
    host.disconnect(&id("gamma")).unwrap();
    let e = slow.join().unwrap().unwrap_err();
    assert!(
        cut.elapsed() < Duration::from_secs(10),
        "{:?}",
        cut.elapsed()
    );
    assert_eq!(e.server(), Some(&id("gamma")), "{e}");
    assert_eq!(state(&host, "gamma"), StateKind::Disconnected);
    assert!(events(&host).contains(&RegistryEvent::StateChanged {
        server: id("gamma"),
        state: StateKind::Disconnected
    }));
    let e = host
        .call_tool(&id("gamma"), "echo", json!({"text": "x"}))
        .unwrap_err();
    assert!(
        matches!(&e, HostError::NotReady { server, state: StateKind::Disconnected, .. } if server.as_str() == "gamma"),
        "{e}"
    );
    assert_eq!(
        host.call_tool(&id("alpha"), "echo", json!({"text": "still"}))
            .unwrap()
            .text(),
        "still"
    );
    // Again.
    let era = host.server(&id("gamma")).unwrap().era().cloned();
    assert!(era.is_some());
    host.connect(&id("gamma")).unwrap();
    host.wait_for(&id("gamma")).unwrap();
    assert_eq!(host.server(&id("gamma")).unwrap().era().cloned(), era);
    assert_eq!(
        host.call_tool(&id("gamma"), "echo", json!({"text": "back"}))
            .unwrap()
            .text(),
        "back"
    );
    // Removed, it is gone.
    host.remove(&id("alpha")).unwrap();
    assert!(host.server(&id("alpha")).is_none());
    assert!(matches!(
        host.call_tool(&id("alpha"), "echo", json!({"text": "x"})),
        Err(HostError::UnknownServer(_))
    ));
    host.close();
}

/// A server's `list_changed` is reported for that server only and the next listing goes to
/// the server, while without it the listing comes from the client's cache (its `ttlMs`).
pub fn list_changed_is_reported_per_server_and_the_cache_follows<H: HostApi>() {
    let watched = mcp_server::Config {
        tools_list_ttl_ms: Some(60_000),
        resources_and_prompts: true,
        ..mcp_server::Config::default()
    };
    let alpha_srv = http_server(watched.clone());
    let beta_srv = http_server(watched);
    let host = H::new(options());
    let report = host.connect_all(vec![
        http_spec("alpha", &alpha_srv.url()),
        http_spec("beta", &beta_srv.url()),
    ]);
    assert!(report.iter().all(|(_, r)| r.is_ok()), "{report:?}");
    let listed = tools_lists(&alpha_srv);
    assert_eq!(listed, 1, "connecting lists the tools once");
    // Fresh in the cache: not asked again.
    let before = host.tools(&id("alpha")).unwrap();
    assert_eq!(tools_lists(&alpha_srv), 1);
    assert!(before.iter().any(|t| t.name == "touch"));
    events(&host);
    // The host subscribed to the server's tool changes; `touch` announces one. The
    // subscription may still be opening: touch until the change comes.
    let until = Instant::now() + PATIENCE;
    let event = loop {
        host.call_tool(&id("alpha"), "touch", json!({"list": "tools"}))
            .unwrap();
        if let Some(e) = host.wait_event(Duration::from_millis(500)) {
            break e;
        }
        assert!(Instant::now() < until, "no ToolsChanged");
    };
    assert_eq!(
        event,
        RegistryEvent::ToolsChanged {
            server: id("alpha")
        }
    );
    assert!(host.server(&id("alpha")).unwrap().tools().stale);
    assert!(!host.server(&id("beta")).unwrap().tools().stale);
    let after = host.tools(&id("alpha")).unwrap();
    assert_eq!(
        tools_lists(&alpha_srv),
        2,
        "the change dropped the cached list"
    );
    assert_eq!(after.len(), before.len());
    let t = host.server(&id("alpha")).unwrap().tools();
    assert!(!t.stale && t.count == Some(after.len()));
    assert!(
        !events(&host).iter().any(
            |e| matches!(e, RegistryEvent::ToolsChanged { server } if server.as_str() == "beta")
        ),
        "beta changed nothing"
    );
    assert_eq!(tools_lists(&beta_srv), 1);
    host.close();
}

/// OAuth per server: three HTTP servers behind the reference server's authorization server,
/// two of them at one URL: each logs in for itself (the authorization server issues a token
/// per server), its grant is in its own partition only, and no server ever gets another's.
pub fn oauth_grants_are_kept_per_server<H: HostApi>() {
    let auth = mcp_server::Config {
        auth: Some(AuthConfig {
            auto_approve: true,
            ..AuthConfig::default()
        }),
        ..mcp_server::Config::default()
    };
    let one_srv = http_server(auth.clone());
    let two_srv = http_server(auth);
    let tokens = Arc::new(MemoryTokens::new());
    let mut authorization = HostAuthorization::new(Arc::new(FollowRedirect), tokens.clone());
    authorization.allow_http_loopback = true;
    let host = H::new(options().with_authorization(authorization));
    let report = host.connect_all(vec![
        http_spec("one", &one_srv.url()),
        http_spec("again", &one_srv.url()),
        http_spec("two", &two_srv.url()),
    ]);
    assert!(report.iter().all(|(_, r)| r.is_ok()), "{report:?}");
    assert_eq!(one_srv.server().stats().auth.tokens_issued, 2);
    assert_eq!(two_srv.server().stats().auth.tokens_issued, 1);
    let grant = |name: &str, url: &str| tokens.store(&id(name)).load(url);
    let (one, again, two) = (
        grant("one", &one_srv.url()).unwrap(),
        grant("again", &one_srv.url()).unwrap(),
        grant("two", &two_srv.url()).unwrap(),
    );
    assert_ne!(
        one.tokens.access_token.expose(),
        again.tokens.access_token.expose()
    );
    assert!(grant("one", &two_srv.url()).is_none());
    assert!(grant("two", &one_srv.url()).is_none());
    for (name, g) in [("one", &one), ("again", &again), ("two", &two)] {
        let s = host.server(&id(name)).unwrap();
        let seen = s.credentials().grant().unwrap();
        assert_eq!((&seen.issuer, &seen.resource), (&g.issuer, &g.resource));
        assert_eq!(s.credentials().partition(), &id(name));
    }
    for name in ["one", "again", "two"] {
        let r = host
            .call_tool(&id(name), "echo", json!({"text": name}))
            .unwrap();
        assert_eq!(r.text(), name);
    }
    // No token was presented to the wrong server: every refusal was the first request of a
    // server that had no grant yet.
    assert_eq!(one_srv.server().stats().auth.unauthorized, 2);
    assert_eq!(two_srv.server().stats().auth.unauthorized, 1);
    host.close();
}

/// A stdio server that exits at once fails with its id at the step it died in; a command that
/// does not exist fails to start.
pub fn stdio_servers_that_cannot_run_are_reported_with_their_id<H: HostApi>() {
    let host = H::new(options());
    let mut exits = stdio_spec("exits");
    exits.transport = TransportSpec::Stdio {
        command: "sh".into(),
        args: vec!["-c".into(), "echo bye >&2; exit 7".into()],
        env: BTreeMap::new(),
        cwd: None,
    };
    let mut missing = stdio_spec("missing");
    missing.transport = TransportSpec::Stdio {
        command: "/nonexistent/mcpwire-host-test-server".into(),
        args: vec![],
        env: BTreeMap::new(),
        cwd: None,
    };
    let report = host.connect_all(vec![exits, missing, stdio_spec("fine")]);
    let kind = |name: &str| match &report.iter().find(|(i, _)| i.as_str() == name).unwrap().1 {
        Err(HostError::Connect {
            server, failure, ..
        }) => {
            assert_eq!(server.as_str(), name);
            (failure.stage, failure.kind, failure.detail.clone())
        }
        other => panic!("{name}: {other:?}"),
    };
    let (stage, k, detail) = kind("exits");
    assert_eq!(
        (stage, k),
        (Stage::Discover, FailureKind::Exited),
        "{detail}"
    );
    assert!(detail.contains("bye"), "the stderr tail is kept: {detail}");
    let (stage, k, _) = kind("missing");
    assert_eq!((stage, k), (Stage::Start, FailureKind::Spawn));
    assert!(report
        .iter()
        .find(|(i, _)| i.as_str() == "fine")
        .unwrap()
        .1
        .is_ok());
    let ConnectionState::Failed(f) = host.server(&id("exits")).unwrap().state().clone() else {
        panic!("exits is not failed");
    };
    assert_eq!(f.kind, FailureKind::Exited);
    host.close();
}

/// Secrets of a spec (its environment values, header values and a key in its URL's query)
/// show nowhere: not in the host's `Debug`, not in a server's, not in a failure.
pub fn secrets_of_specs_never_show<H: HostApi>() {
    let host = H::new(options());
    let mut spec = http_spec(
        "secret",
        &format!("{}?api_key=sk-never-shown-9012", dead_url()),
    );
    if let TransportSpec::Http { headers, .. } = &mut spec.transport {
        headers.insert("Authorization".into(), "Bearer sk-never-shown-1234".into());
    }
    let mut child = stdio_spec("child");
    if let TransportSpec::Stdio { env, .. } = &mut child.transport {
        env.insert("API_KEY".into(), "sk-never-shown-5678".into());
    }
    let report = host.connect_all(vec![spec, child]);
    let shown = format!(
        "{report:?} {:?} {host_servers:?} {}",
        report
            .iter()
            .map(|(_, r)| r.as_ref().err().map(ToString::to_string))
            .collect::<Vec<_>>(),
        report.len(),
        host_servers = host.servers(),
    );
    assert!(
        shown.contains("API_KEY") && shown.contains("Authorization"),
        "{shown}"
    );
    assert!(!shown.contains("sk-never-shown"), "{shown}");
    host.close();
}

/// With a reconnect policy, a stdio server killed while ready comes back by itself: the call
/// it was killed under fails with the server's id, the server is failed and due again, the
/// host starts it anew after the backoff, and the next call is answered by the new process;
/// the other server is never touched. A server the host disconnects is not brought back.
pub fn a_lost_server_reconnects_by_itself_after_its_backoff<H: HostApi>() {
    use mcpwire::host::{Backoff, ReconnectPolicy};
    let alpha_srv = http_server(mcp_server::Config::default());
    // One directory per driver: both run at once in this process.
    let dir = work_dir(&format!(
        "reconnect-{}",
        std::any::type_name::<H>().replace("::", "-")
    ));
    let starts = dir.join("starts");
    let pid = dir.join("pid");
    let _ = std::fs::remove_file(&starts);
    // Each start appends a line, writes its pid, and becomes the reference server (same pid).
    let script =
        "echo started >> \"$1/starts\"; echo $$ > \"$1/pid\"; exec \"$0\" dev mcp-server --stdio";
    let gamma = ServerSpec {
        id: id("gamma"),
        transport: TransportSpec::Stdio {
            command: "sh".into(),
            args: vec![
                "-c".into(),
                script.into(),
                env!("CARGO_BIN_EXE_mcpwire").into(),
                dir.to_string_lossy().into_owned(),
            ],
            env: BTreeMap::new(),
            cwd: None,
        },
        oauth: None,
        trust: Trust::Trusted,
        disabled: false,
    };
    let policy = ReconnectPolicy {
        backoff: Backoff {
            initial: Duration::from_millis(200),
            max: Duration::from_secs(1),
            multiplier: 2,
        },
        max_failures: None,
    };
    let host = H::new(options().with_reconnect(policy));
    let report = host.connect_all(vec![http_spec("alpha", &alpha_srv.url()), gamma]);
    assert!(report.iter().all(|(_, r)| r.is_ok()), "{report:?}");
    let start_count = || {
        std::fs::read_to_string(&starts)
            .unwrap_or_default()
            .lines()
            .count()
    };
    assert_eq!(start_count(), 1);

    // Killed in the middle of a call.
    let h = host.clone();
    let slow = thread::spawn(move || h.call_tool(&id("gamma"), "slow", json!({"ms": 20_000})));
    thread::sleep(Duration::from_millis(300));
    let child = std::fs::read_to_string(&pid).unwrap();
    let killed = std::process::Command::new("kill")
        .args(["-9", child.trim()])
        .status()
        .unwrap();
    assert!(killed.success());
    let e = slow.join().unwrap().unwrap_err();
    assert_eq!(e.server(), Some(&id("gamma")), "{e}");

    // Back by itself, a new process.
    let until = Instant::now() + PATIENCE;
    while !(start_count() == 2 && state(&host, "gamma") == StateKind::Ready) {
        assert!(
            Instant::now() < until,
            "gamma not back: {:?}, {} starts",
            host.server(&id("gamma")).map(|s| s.state().clone()),
            start_count()
        );
        thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        host.call_tool(&id("gamma"), "echo", json!({"text": "back"}))
            .unwrap()
            .text(),
        "back"
    );
    assert_eq!(state(&host, "alpha"), StateKind::Ready);

    // Disconnected by the host: stays so, past several backoffs.
    host.disconnect(&id("gamma")).unwrap();
    thread::sleep(Duration::from_millis(1500));
    assert_eq!(state(&host, "gamma"), StateKind::Disconnected);
    assert_eq!(start_count(), 2);
    host.close();
}

/// With a reconnect policy, an HTTP server that goes away while ready (its listener stopped:
/// every connection is refused) is failed by the first request that finds it gone: the call
/// fails naming the server, and the server is `Failed` while connected as unreachable, not
/// left "ready" for every later call to find out again. When it listens again on the same
/// address the host connects it anew by itself; the other server is never touched.
pub fn a_lost_http_server_is_failed_and_reconnects_when_it_is_back<H: HostApi>() {
    use mcpwire::host::{Backoff, ReconnectPolicy};
    let alpha_srv = http_server(mcp_server::Config::default());
    let mut beta_srv = http_server(mcp_server::Config::default());
    let beta_addr = beta_srv.local_addr();
    let policy = ReconnectPolicy {
        backoff: Backoff {
            initial: Duration::from_millis(400),
            max: Duration::from_secs(1),
            multiplier: 2,
        },
        max_failures: None,
    };
    let host = H::new(options().with_reconnect(policy));
    let report = host.connect_all(vec![
        http_spec("alpha", &alpha_srv.url()),
        http_spec("beta", &beta_srv.url()),
    ]);
    assert!(report.iter().all(|(_, r)| r.is_ok()), "{report:?}");
    assert_eq!(
        host.call_tool(&id("beta"), "echo", json!({"text": "before"}))
            .unwrap()
            .text(),
        "before"
    );

    // A status the server answers (503, not resent for a tools/call) says it is there: it
    // stays ready.
    let e = host
        .call_tool(
            &id("beta"),
            "fail",
            json!({"http_status": 503, "raw_body": "busy"}),
        )
        .unwrap_err();
    assert_eq!(e.server(), Some(&id("beta")), "{e}");
    assert_eq!(state(&host, "beta"), StateKind::Ready, "after a 503: {e}");

    beta_srv.stop();
    let e = host
        .call_tool(&id("beta"), "echo", json!({"text": "gone"}))
        .unwrap_err();
    assert_eq!(e.server(), Some(&id("beta")), "{e}");
    // Failed at once (the first reconnect is at least 200 ms away), as a lost connection.
    match host.server(&id("beta")).unwrap().state() {
        ConnectionState::Failed(f) => {
            assert_eq!(f.stage, Stage::Running, "{f}");
            assert_eq!(f.kind, FailureKind::Unreachable, "{f}");
        }
        other => panic!("beta not failed after the request that found it gone: {other:?}"),
    }
    assert_eq!(state(&host, "alpha"), StateKind::Ready);

    // Back on the same address: connected again by itself, and answering.
    let _beta_again = McpServer::start_http(mcp_server::Config::default(), beta_addr).unwrap();
    let until = Instant::now() + PATIENCE;
    while state(&host, "beta") != StateKind::Ready {
        assert!(
            Instant::now() < until,
            "beta not back: {:?}",
            host.server(&id("beta")).map(|s| s.state().clone())
        );
        thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        host.call_tool(&id("beta"), "echo", json!({"text": "back"}))
            .unwrap()
            .text(),
        "back"
    );
    assert_eq!(state(&host, "alpha"), StateKind::Ready);
    host.close();
}

//! `mcpwire dev mcp-server`: a reference MCP server with a few tools that exercise the tunnel
//! path, over Streamable HTTP ([`McpServer::start_http`]) or newline-delimited stdio
//! ([`McpServer::serve_stdio`]).
//!
//! **Eras.** By default ([`EraMode::Dual`]) one endpoint answers both eras, as
//! `basic/versioning.mdx` allows a dual-era server to: a request whose
//! `params._meta["io.modelcontextprotocol/protocolVersion"]` is present is served statelessly
//! as `2026-07-28`; `initialize` opens a legacy (`2025-11-25`) session (on HTTP, named by the
//! `Mcp-Session-Id` it returns; on stdio, the process), and requests without modern `_meta`
//! that carry that session id are served in it. [`EraMode::Modern`] refuses `initialize`
//! (`-32022`, naming the supported version) and answers `DELETE` with `405`;
//! [`EraMode::Legacy`] serves only the handshake era (a modern request without a session gets
//! the legacy `400`, and `server/discover` is an unknown method), which is what a client's era
//! detection must fall back on.
//!
//! **Modern requests on HTTP** are checked in this order, each failure a `400` unless noted:
//! body not JSON (`-32700`) or not one request/notification (`-32600`); a notification is
//! accepted with `202`; `_meta` without a string `protocolVersion` (`-32602`);
//! `MCP-Protocol-Version` missing or different from `_meta`'s (`-32020` HeaderMismatch); a
//! version other than `2026-07-28` (`-32022`, `data.supported` and `data.requested`); `_meta`
//! without an object `clientCapabilities` (`-32602`); `Mcp-Method`, `Mcp-Name` and, for a tool
//! with `x-mcp-header` annotations, `Mcp-Param-*` missing, malformed or different from the body
//! (`-32020`; values are Base64-decoded first, and the expected values are the ones
//! [`mcpwire_core::mcp::headers::request_headers_for`] builds from the body); an unknown method
//! (`404`, `-32601`). An `Origin` header that is not a loopback origin gets `403`; `GET` gets
//! `405`.
//!
//! **Tools** (see [`tool_definitions`]): `echo` (returns `text`; over HTTP it adds the
//! `response_headers` given, `Connection` nominations included, to test header filtering), `slow` (sleeps `ms`, at most
//! [`Config::max_slow`]; stops early, answering nothing, when the client goes away or cancels;
//! its `structuredContent` is `{"ms", "overlapping"}`, the most `slow` calls it saw in flight
//! at once, itself included),
//! `progress` (streams `steps` `notifications/progress` over SSE, then the result; needs
//! `_meta.progressToken`), `fail` (answers the JSON-RPC error [`FAIL_CODE`] /
//! [`FAIL_MESSAGE`] / [`fail_data`], or the `code`, `message`, `data` given, with HTTP status
//! `http_status`; with `raw_body` it answers that text as `text/plain` instead),
//! `tenant` (its `region` argument is annotated `x-mcp-header: Region`, so a modern HTTP call
//! must carry a matching `Mcp-Param-Region`), `ask` (MRTR: answers `input_required` with a form
//! elicitation and a `requestState`, and completes on the retry carrying `inputResponses`;
//! modern era only), and `headers` (returns the HTTP request headers it received, the
//! `Authorization` value redacted; empty on stdio). `ask` takes `form`: `name` (the default),
//! `profile` (integer, enum, boolean and number fields with defaults), `login` (a password
//! field) or `url` (a URL-mode elicitation of [`ELICIT_URL_PATH`] on this server, whose fetches
//! are counted); the answers it receives are recorded in [`Stats::elicitation_answers`].
//!
//! **Authorization** ([`Config::auth`], `--auth`, HTTP only): every request to `/mcp` needs a
//! bearer token from the embedded authorization server, a `401` with
//! `WWW-Authenticate: Bearer resource_metadata=…` tells a client where to log in, and the tool
//! `admin_echo` (listed only then) needs the scope `mcp:admin` (`403 insufficient_scope`
//! otherwise); the paths and rules are in [`crate::auth_server`].
//!
//! **Prompts, resources and subscriptions** are served only with
//! [`Config::resources_and_prompts`] (otherwise their methods are unknown, `-32601`): the
//! prompt [`PROMPT_NAME`], the resource [`GREETING_URI`], the template [`GREETING_TEMPLATE`],
//! `subscriptions/listen` (modern era) and the `touch` tool that announces changes to the
//! subscriptions (see the `catalog` module).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io::{self, BufRead, Read, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcpwire_core::http::Headers;
use mcpwire_core::jsonrpc::{self, code, ErrorObject, Id, Message};
use mcpwire_core::mcp::discover::{
    CacheScopeHint, ListCapability, ResourcesCapability, ServerCapabilities,
};
use mcpwire_core::mcp::headers::{
    decode_param_value, request_headers_for, tool_headers, METHOD_HEADER, NAME_HEADER,
    PROTOCOL_VERSION_HEADER, PROTOCOL_VERSION_META_KEY, SESSION_ID_HEADER,
};
use mcpwire_core::mcp::meta::{CLIENT_CAPABILITIES_KEY, PROGRESS_TOKEN_KEY, SERVER_INFO_KEY};
use mcpwire_core::mcp::{
    ClientCapabilities, DiscoverResult, Era, Implementation, ToolHeaders, KNOWN_LEGACY_VERSIONS,
    LATEST_PROTOCOL_VERSION, LEGACY_PROTOCOL_VERSION,
};
use serde_json::{json, Map, Value};

use super::http::{headers, lock, Handler, HttpServer, Limits, Request, Responder, Shutdown};
use crate::auth_server::{self, AuthConfig, AuthServer, AuthStats, ADMIN_TOOL, SCOPE_MCP};
use crate::random_token;

mod ask;
mod catalog;
mod on_core;
mod slow;
mod transport;

pub use ask::{ElicitationAnswer, ASK_FORMS, ELICIT_URL_PATH};
use transport::*;

pub use catalog::{
    GREETING_TEMPLATE, GREETING_TEXT, GREETING_URI, MOTTO_TEXT, MOTTO_URI, PROMPT_NAME,
};

/// The server's name in `serverInfo`.
pub const SERVER_NAME: &str = "mcpwire-dev-mcp-server";
/// The default error code of the `fail` tool (outside JSON-RPC's and MCP's reserved ranges).
pub const FAIL_CODE: i64 = 4217;
/// The default error message of the `fail` tool.
pub const FAIL_MESSAGE: &str = "fail: the reference server failed this call on purpose";
/// The largest number of progress steps the `progress` tool streams.
pub const MAX_PROGRESS_STEPS: u64 = 100;
/// The longest pause between two progress steps.
pub const MAX_PROGRESS_INTERVAL: Duration = Duration::from_secs(10);
/// The longest stdio line read (a longer one is answered `-32700` and skipped).
pub const MAX_STDIO_LINE: usize = 4 * 1024 * 1024;
/// Requests served at once on stdio; more wait for a free slot.
pub const MAX_STDIO_IN_FLIGHT: usize = 64;
/// Requests kept in the request log ([`McpServer::requests`]).
pub const REQUEST_LOG_LEN: usize = 256;

/// The default `data` of the `fail` tool's error: nested, with a `null`, so that exact
/// preservation can be checked.
pub fn fail_data() -> Value {
    json!({"tool": "fail", "detail": {"kept": [1, "two", null, {"three": 3.5}], "empty": {}}})
}

/// Which eras the server answers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EraMode {
    /// Both, on one endpoint: modern requests by their `_meta`, legacy ones after
    /// `initialize`.
    #[default]
    Dual,
    /// `2026-07-28` only.
    Modern,
    /// The legacy `initialize` era only (`2025-11-25`, `2025-06-18`, `2025-03-26`,
    /// `2024-11-05`).
    Legacy,
}

/// What implements the protocol.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Engine {
    /// This crate's own hand-written implementation of both eras (the default while the
    /// rebuild on the core is under way).
    #[default]
    Hand,
    /// The core's sans-IO server ([`mcpwire_core::mcp::server`]) run by the blocking driver
    /// ([`mcpwire::server::blocking`]), the tools an `Application` (issue 15's rebuild).
    Core,
}

/// The server's settings.
#[derive(Clone, Debug)]
pub struct Config {
    /// Which eras are answered.
    pub era: EraMode,
    /// What implements the protocol (default [`Engine::Hand`]).
    pub engine: Engine,
    /// The longest sleep the `slow` tool accepts.
    pub max_slow: Duration,
    /// HTTP bounds.
    pub limits: Limits,
    /// The `ttlMs` put on modern `tools/list` results (default `None`: `ttlMs: 0`, so a client
    /// treats the list as immediately stale). Lets client tests see caching.
    pub tools_list_ttl_ms: Option<u64>,
    /// Also serve the prompt [`PROMPT_NAME`], the resource [`GREETING_URI`], the resource
    /// template [`GREETING_TEMPLATE`], `subscriptions/listen` (2026-07-28) and the `touch` tool
    /// that announces a change to the subscriptions (default `false`: tools only, and those
    /// methods are unknown).
    pub resources_and_prompts: bool,
    /// Require OAuth bearer tokens on the MCP endpoint and serve the metadata and a loopback
    /// authorization server on the same listener (see [`crate::auth_server`]); HTTP only (on
    /// stdio nothing is checked, and `admin_echo` is listed unprotected). Default `None`: no
    /// authorization.
    pub auth: Option<AuthConfig>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            era: EraMode::Dual,
            engine: Engine::Core,
            max_slow: Duration::from_secs(60),
            limits: Limits::default(),
            tools_list_ttl_ms: None,
            resources_and_prompts: false,
            auth: None,
        }
    }
}

/// Counters for tests and people.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// JSON-RPC messages received (requests and notifications).
    pub messages: u64,
    /// Tool calls started, by tool name.
    pub tool_calls: BTreeMap<String, u64>,
    /// Calls stopped because the client went away or cancelled them.
    pub cancelled: u64,
    /// Requests refused with `-32020`.
    pub header_mismatches: u64,
    /// Legacy sessions opened by `initialize`.
    pub sessions_opened: u64,
    /// Legacy sessions ended by `DELETE`.
    pub sessions_ended: u64,
    /// The answers the `ask` tool received, in order.
    pub elicitation_answers: Vec<ElicitationAnswer>,
    /// `GET`s of [`ELICIT_URL_PATH`] (the `ask` tool's URL-mode page).
    pub elicit_url_fetches: u64,
    /// The most `slow` calls ever in flight at once.
    pub slow_peak: u64,
    /// The authorization server's counters (all zero without [`Config::auth`]).
    pub auth: AuthStats,
}

/// One request as the server received it (for assertions): the HTTP method (`STDIO` on stdio),
/// the JSON-RPC method when there was one, and the HTTP headers with `Authorization` redacted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoggedRequest {
    /// `POST`, `DELETE`, ... or `STDIO`.
    pub http_method: String,
    /// The JSON-RPC method, when the body was a request or notification.
    pub method: Option<String>,
    /// The HTTP headers (empty on stdio).
    pub headers: Vec<(String, String)>,
}

#[derive(Debug)]
struct Session {
    protocol_version: String,
}

/// The reference server's state, shared by its HTTP connections and its stdio loop.
#[derive(Debug)]
pub struct McpServer {
    config: Config,
    shutdown: Arc<Shutdown>,
    sessions: Mutex<HashMap<String, Session>>,
    stats: Mutex<Stats>,
    log: Mutex<VecDeque<LoggedRequest>>,
    subscribers: Mutex<catalog::Subscribers>,
    slow: slow::SlowCalls,
    auth: Option<AuthServer>,
    /// [`Engine::Core`]: the calls running on threads, and the open legacy sessions.
    work: on_core::Work,
    core_sessions: std::sync::atomic::AtomicUsize,
    responder: Mutex<Option<mcpwire::server::Responder>>,
}

/// A running HTTP reference server.
#[derive(Debug)]
pub struct McpServerHandle {
    http: Listener,
    server: Arc<McpServer>,
}

#[derive(Debug)]
enum Listener {
    Hand(HttpServer),
    Core(mcpwire::server::blocking::HttpServer),
}

impl McpServerHandle {
    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        match &self.http {
            Listener::Hand(h) => h.local_addr(),
            Listener::Core(h) => h.local_addr(),
        }
    }

    /// The MCP endpoint, `http://ADDR/mcp`.
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.local_addr())
    }

    /// The server state (stats, request log).
    pub fn server(&self) -> &Arc<McpServer> {
        &self.server
    }

    /// Stops the server: in-flight tool calls end without an answer, threads are joined.
    pub fn stop(&mut self) {
        self.server.shutdown.stop();
        match &mut self.http {
            Listener::Hand(h) => h.stop(),
            Listener::Core(h) => h.stop(),
        }
        self.server.work.join_all();
    }
}

/// What one request comes to.
#[derive(Debug)]
enum Answer {
    /// A result object.
    Result(Value),
    /// A JSON-RPC error, with its HTTP status.
    Error(u16, ErrorObject),
    /// A non-JSON-RPC HTTP answer (the `fail` tool's `raw_body`).
    Raw(u16, String),
    /// Nothing: the call was cancelled or the client went away.
    Nothing,
}

fn err(status: u16, code: i64, message: impl Into<String>) -> Answer {
    Answer::Error(
        status,
        ErrorObject {
            code,
            message: message.into(),
            data: None,
        },
    )
}

/// A `-32602` about a call's arguments: HTTP `200`, so that an era check never reads it as
/// a legacy server's `400`.
fn invalid_params(message: impl Into<String>) -> Answer {
    err(200, code::INVALID_PARAMS, message)
}

/// A `-32602` about the request's own shape (`_meta`, `params`): HTTP `400`, as the
/// transport requires for a malformed request.
fn malformed_params(message: impl Into<String>) -> Answer {
    err(400, code::INVALID_PARAMS, message)
}

fn mismatch(message: impl Into<String>) -> Answer {
    err(
        400,
        code::HEADER_MISMATCH,
        format!("Header mismatch: {}", message.into()),
    )
}

/// Where a tool's notifications go, and how it learns that nobody is listening any more.
trait Sink {
    /// Sends a notification; `false` when it could not be delivered.
    fn notify(&mut self, message: &Value) -> bool;
    /// Whether the request was cancelled or its client went away.
    fn cancelled(&self) -> bool;
    /// The HTTP request headers, when there are some.
    fn request_headers(&self) -> Option<&Headers>;
    /// Adds a header to the HTTP response (before it starts); ignored on stdio.
    fn add_response_header(&mut self, name: &str, value: &str) -> bool;
}

/// The modern `_meta` of a request, checked.
struct ModernMeta {
    capabilities: ClientCapabilities,
}

impl McpServer {
    /// A server with `config`, not yet serving.
    pub fn new(config: Config) -> Arc<McpServer> {
        let auth = config.auth.clone().map(AuthServer::new);
        Arc::new(McpServer {
            auth,
            config,
            shutdown: Shutdown::new(),
            sessions: Mutex::new(HashMap::new()),
            stats: Mutex::new(Stats::default()),
            log: Mutex::new(VecDeque::new()),
            subscribers: Mutex::new(catalog::Subscribers::default()),
            slow: slow::SlowCalls::default(),
            work: on_core::Work::default(),
            core_sessions: std::sync::atomic::AtomicUsize::new(0),
            responder: Mutex::new(None),
        })
    }

    /// Starts serving Streamable HTTP on `addr` (port 0 picks one), endpoint `/mcp` (also `/`).
    pub fn start_http(config: Config, addr: impl ToSocketAddrs) -> io::Result<McpServerHandle> {
        let limits = config.limits;
        let server = McpServer::new(config);
        let http = match server.config.engine {
            Engine::Hand => Listener::Hand(HttpServer::start(
                addr,
                server.clone(),
                limits,
                server.shutdown.clone(),
            )?),
            Engine::Core => {
                let listen = addr.to_socket_addrs()?.next().ok_or_else(|| {
                    io::Error::new(io::ErrorKind::InvalidInput, "no address to listen on")
                })?;
                let options = mcpwire::server::HttpOptions {
                    listen,
                    max_head_bytes: limits.max_head,
                    max_connections: limits.max_connections,
                    idle_timeout: limits.idle_timeout,
                    write_timeout: limits.write_timeout,
                    hook: Some(Arc::new(on_core::Front {
                        server: server.clone(),
                    })),
                };
                let app_server = server.clone();
                let http = mcpwire::server::blocking::HttpServer::start_with(
                    on_core::core_config(&server)?,
                    options,
                    move |responder| on_core::DevApp::new(app_server, responder),
                )
                .map_err(io::Error::other)?;
                Listener::Core(http)
            }
        };
        let handle = McpServerHandle { http, server };
        if let Some(auth) = &handle.server.auth {
            auth.set_origin(format!("http://{}", handle.local_addr()));
        }
        Ok(handle)
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> Stats {
        let mut stats = lock(&self.stats).clone();
        stats.slow_peak = self.slow.peak();
        if let Some(auth) = &self.auth {
            stats.auth = auth.stats();
        }
        stats
    }

    /// The authorization server, with [`Config::auth`].
    pub fn auth(&self) -> Option<&AuthServer> {
        self.auth.as_ref()
    }

    /// The last [`REQUEST_LOG_LEN`] requests received, oldest first.
    pub fn requests(&self) -> Vec<LoggedRequest> {
        lock(&self.log).iter().cloned().collect()
    }

    /// The number of open legacy sessions.
    pub fn open_sessions(&self) -> usize {
        match self.config.engine {
            Engine::Hand => lock(&self.sessions).len(),
            Engine::Core => self.core_sessions.load(Ordering::Relaxed),
        }
    }

    fn record(&self, http_method: &str, method: Option<&str>, h: Option<&Headers>) {
        let entry = LoggedRequest {
            http_method: http_method.to_owned(),
            method: method.map(str::to_owned),
            headers: h
                .map(|h| {
                    h.iter()
                        .map(|(n, v)| {
                            let v = if n.eq_ignore_ascii_case("authorization") {
                                "<redacted>"
                            } else {
                                v
                            };
                            (n.to_owned(), v.to_owned())
                        })
                        .collect()
                })
                .unwrap_or_default(),
        };
        let mut log = lock(&self.log);
        if log.len() >= REQUEST_LOG_LEN {
            log.pop_front();
        }
        log.push_back(entry);
    }

    fn supported_versions(&self) -> Vec<String> {
        match self.config.era {
            EraMode::Dual => vec![
                LATEST_PROTOCOL_VERSION.into(),
                LEGACY_PROTOCOL_VERSION.into(),
            ],
            EraMode::Modern => vec![LATEST_PROTOCOL_VERSION.into()],
            EraMode::Legacy => KNOWN_LEGACY_VERSIONS.iter().map(|v| (*v).into()).collect(),
        }
    }

    fn server_info() -> Value {
        serde_json::to_value(Implementation::new(SERVER_NAME, env!("CARGO_PKG_VERSION")))
            .unwrap_or(Value::Null)
    }

    // -----------------------------------------------------------------------------------------
    // Era-independent dispatch
    // -----------------------------------------------------------------------------------------

    /// Checks a modern request's `_meta`: version present, equal to the header (HTTP), supported;
    /// capabilities present.
    fn modern_meta(&self, params: &Value, h: Option<&Headers>) -> Result<ModernMeta, Answer> {
        let meta = params.get("_meta").and_then(Value::as_object);
        let version = meta
            .and_then(|m| m.get(PROTOCOL_VERSION_META_KEY))
            .and_then(Value::as_str)
            .ok_or_else(|| {
                malformed_params(format!(
                    "Invalid params: _meta[\"{PROTOCOL_VERSION_META_KEY}\"] is required and must be a string"
                ))
            })?;
        if let Some(h) = h {
            match single(h, PROTOCOL_VERSION_HEADER)? {
                None => {
                    return Err(mismatch(format!(
                        "required header {PROTOCOL_VERSION_HEADER} is missing"
                    )))
                }
                Some(v) if v != version => {
                    return Err(mismatch(format!(
                        "{PROTOCOL_VERSION_HEADER} header value does not match _meta[\"{PROTOCOL_VERSION_META_KEY}\"]"
                    )))
                }
                _ => {}
            }
        }
        if version != LATEST_PROTOCOL_VERSION || self.config.era == EraMode::Legacy {
            let supported = self.supported_versions();
            return Err(Answer::Error(
                400,
                ErrorObject {
                    code: code::UNSUPPORTED_PROTOCOL_VERSION,
                    message: format!(
                        "Unsupported protocol version: this server speaks {}",
                        supported.join(", ")
                    ),
                    data: Some(json!({"supported": supported, "requested": version})),
                },
            ));
        }
        let capabilities = meta
            .and_then(|m| m.get(CLIENT_CAPABILITIES_KEY))
            .filter(|c| c.is_object())
            .and_then(|c| serde_json::from_value::<ClientCapabilities>(c.clone()).ok())
            .ok_or_else(|| {
                malformed_params(format!(
                    "Invalid params: _meta[\"{CLIENT_CAPABILITIES_KEY}\"] is required and must be a ClientCapabilities object"
                ))
            })?;
        Ok(ModernMeta { capabilities })
    }

    /// Answers one request of `era`.
    fn dispatch(
        &self,
        era: Era,
        id: &Id,
        method: &str,
        params: &Value,
        caps: Option<&ClientCapabilities>,
        sink: &mut dyn Sink,
    ) -> Answer {
        let not_found = |m: &str| {
            let status = if era == Era::Modern { 404 } else { 200 };
            err(
                status,
                code::METHOD_NOT_FOUND,
                format!("Method not found: {m}"),
            )
        };
        let answer = match (era, method) {
            (Era::Modern, "server/discover") => {
                let mut meta = Map::new();
                meta.insert(SERVER_INFO_KEY.to_owned(), McpServer::server_info());
                let result = DiscoverResult {
                    supported_versions: self.supported_versions(),
                    capabilities: self.capabilities(),
                    instructions: Some(self.instructions()),
                    // Both are required members of a modern `DiscoverResult` (schema.json);
                    // 0: a client re-discovers whenever it needs to.
                    ttl_ms: Some(0),
                    cache_scope: Some(CacheScopeHint::Public),
                    meta: Some(meta),
                    other: Map::new(),
                };
                Answer::Result(result.to_value())
            }
            (Era::Legacy, "ping") => Answer::Result(json!({})),
            (_, "tools/list") => {
                let mut result = json!({"tools": self.tools(era)});
                if era == Era::Modern {
                    // Required members of a modern `ListToolsResult` (schema.json); the list
                    // is the same for every caller.
                    result["ttlMs"] = json!(self.config.tools_list_ttl_ms.unwrap_or(0));
                    result["cacheScope"] = json!("public");
                }
                Answer::Result(result)
            }
            (_, "tools/call") => self.call_tool(era, params, caps, sink),
            (_, "prompts/list") if self.config.resources_and_prompts => catalog::list_prompts(era),
            (_, "prompts/get") if self.config.resources_and_prompts => catalog::get_prompt(params),
            (_, "resources/list") if self.config.resources_and_prompts => {
                catalog::list_resources(era, params)
            }
            (_, "resources/templates/list") if self.config.resources_and_prompts => {
                catalog::list_templates(era)
            }
            (_, "resources/read") if self.config.resources_and_prompts => {
                catalog::read_resource(era, params)
            }
            (Era::Modern, "subscriptions/listen") if self.config.resources_and_prompts => {
                self.listen(id, params, sink)
            }
            (_, m) => not_found(m),
        };
        match (era, answer) {
            // Every modern result says what it is and who answered.
            (Era::Modern, Answer::Result(Value::Object(mut m))) => {
                m.entry("resultType").or_insert_with(|| json!("complete"));
                let meta = m.entry("_meta").or_insert_with(|| json!({}));
                if let Some(meta) = meta.as_object_mut() {
                    meta.entry(SERVER_INFO_KEY)
                        .or_insert_with(McpServer::server_info);
                }
                Answer::Result(Value::Object(m))
            }
            (_, a) => a,
        }
    }

    fn call_tool(
        &self,
        era: Era,
        params: &Value,
        caps: Option<&ClientCapabilities>,
        sink: &mut dyn Sink,
    ) -> Answer {
        let Some(name) = params.get("name").and_then(Value::as_str) else {
            return invalid_params("Invalid params: tools/call needs a string params.name");
        };
        let empty = Map::new();
        let args = match params.get("arguments") {
            None | Some(Value::Null) => &empty,
            Some(Value::Object(m)) => m,
            Some(_) => return invalid_params("Invalid params: arguments must be an object"),
        };
        let known = self
            .tools(era)
            .iter()
            .any(|t| t.get("name").and_then(Value::as_str) == Some(name));
        if !known {
            return invalid_params(format!("Unknown tool: {name}"));
        }
        *lock(&self.stats)
            .tool_calls
            .entry(name.to_owned())
            .or_default() += 1;
        match name {
            ADMIN_TOOL => match args.get("text").and_then(Value::as_str) {
                Some(t) => Answer::Result(json!({
                    "content": [{"type": "text", "text": t}],
                    "structuredContent": {"text": t}
                })),
                None => invalid_params("Invalid params: admin_echo needs a string argument text"),
            },
            "echo" => {
                let Some(t) = args.get("text").and_then(Value::as_str) else {
                    return invalid_params("Invalid params: echo needs a string argument text");
                };
                if let Some(extra) = args.get("response_headers") {
                    if let Err(a) = add_response_headers(extra, sink) {
                        return a;
                    }
                }
                Answer::Result(json!({
                    "content": [{"type": "text", "text": t}],
                    "structuredContent": {"text": t}
                }))
            }
            "slow" => {
                let ms = match uint_arg(args, "ms", 1000) {
                    Ok(ms) => ms,
                    Err(a) => return a,
                };
                let max = self.config.max_slow.as_millis() as u64;
                if ms > max {
                    return invalid_params(format!("Invalid params: slow sleeps at most {max} ms"));
                }
                let call = self.slow.start();
                if self.pause(Duration::from_millis(ms), sink) {
                    lock(&self.stats).cancelled += 1;
                    return Answer::Nothing;
                }
                Answer::Result(json!({
                    "content": [{"type": "text", "text": format!("slept {ms} ms")}],
                    "structuredContent": {"ms": ms, "overlapping": call.overlapping()}
                }))
            }
            "progress" => self.progress(params, args, sink),
            "fail" => fail(args),
            "tenant" => match args.get("region").and_then(Value::as_str) {
                Some(region) => Answer::Result(json!({
                    "content": [{"type": "text", "text": format!("region={region}")}],
                    "structuredContent": {"region": region}
                })),
                None => invalid_params("Invalid params: tenant needs a string argument region"),
            },
            "ask" => self.ask(params, args, caps, sink),
            "touch" => self.touch(args),
            "headers" => {
                let list: Vec<Value> = sink
                    .request_headers()
                    .map(|h| {
                        h.iter()
                            .map(|(n, v)| {
                                let v = if n.eq_ignore_ascii_case("authorization") {
                                    "<redacted>"
                                } else {
                                    v
                                };
                                json!([n, v])
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                Answer::Result(json!({
                    "content": [{"type": "text", "text": format!("{} headers", list.len())}],
                    "structuredContent": {"headers": list}
                }))
            }
            _ => invalid_params(format!("Unknown tool: {name}")),
        }
    }

    /// Sleeps `d` in short steps; `true` when the call was cancelled or the server stopped.
    fn pause(&self, d: Duration, sink: &dyn Sink) -> bool {
        let step = Duration::from_millis(20);
        let mut left = d;
        loop {
            if sink.cancelled() {
                return true;
            }
            if left.is_zero() {
                return false;
            }
            let now = left.min(step);
            if self.shutdown.sleep(now) {
                return true;
            }
            left -= now;
        }
    }

    fn progress(&self, params: &Value, args: &Map<String, Value>, sink: &mut dyn Sink) -> Answer {
        let token = params
            .get("_meta")
            .and_then(|m| m.get(PROGRESS_TOKEN_KEY))
            .filter(|t| t.is_string() || t.is_i64() || t.is_u64())
            .cloned();
        let Some(token) = token else {
            return invalid_params(
                "Invalid params: the progress tool needs params._meta.progressToken (a string or an integer)",
            );
        };
        let steps = match uint_arg(args, "steps", 3) {
            Ok(s) if (1..=MAX_PROGRESS_STEPS).contains(&s) => s,
            Ok(_) => {
                return invalid_params(format!(
                    "Invalid params: steps must be from 1 to {MAX_PROGRESS_STEPS}"
                ))
            }
            Err(a) => return a,
        };
        let interval = match uint_arg(args, "interval_ms", 10) {
            Ok(ms) if u128::from(ms) <= MAX_PROGRESS_INTERVAL.as_millis() => {
                Duration::from_millis(ms)
            }
            Ok(_) => {
                return invalid_params(format!(
                    "Invalid params: interval_ms must be at most {}",
                    MAX_PROGRESS_INTERVAL.as_millis()
                ))
            }
            Err(a) => return a,
        };
        for i in 1..=steps {
            let note = json!({
                "jsonrpc": "2.0",
                "method": "notifications/progress",
                "params": {
                    "progressToken": token,
                    "progress": i,
                    "total": steps,
                    "message": format!("step {i} of {steps}")
                }
            });
            if !sink.notify(&note) || (i < steps && self.pause(interval, sink)) {
                lock(&self.stats).cancelled += 1;
                return Answer::Nothing;
            }
        }
        Answer::Result(json!({
            "content": [{"type": "text", "text": format!("done after {steps} steps")}]
        }))
    }

    // -----------------------------------------------------------------------------------------
    // Streamable HTTP
    // -----------------------------------------------------------------------------------------

    /// Serves a POST; `granted` is the bearer token's scope with [`Config::auth`].
    fn post(&self, req: &Request, res: &mut Responder<'_>, granted: Option<&str>) {
        let text = match std::str::from_utf8(&req.body) {
            Ok(t) => t,
            Err(_) => {
                self.record("POST", None, Some(&req.headers));
                return send_answer(
                    res,
                    None,
                    err(400, code::PARSE_ERROR, "Parse error: the body is not UTF-8"),
                    &Headers::new(),
                );
            }
        };
        let message = match Message::parse(text) {
            Ok(m) => m,
            Err(e) => {
                self.record("POST", None, Some(&req.headers));
                let c = match e {
                    jsonrpc::MessageError::Json(_) => code::PARSE_ERROR,
                    _ => code::INVALID_REQUEST,
                };
                return send_answer(
                    res,
                    None,
                    err(400, c, format!("Invalid message: {e}")),
                    &Headers::new(),
                );
            }
        };
        self.record("POST", message.method(), Some(&req.headers));
        lock(&self.stats).messages += 1;
        let (id, method, params) = match message {
            Message::Request { id, method, params } => (Some(id), method, params),
            Message::Notification { method, params } => (None, method, params),
            Message::Response { .. } | Message::Error { .. } => {
                // Legacy clients may post responses in a session; modern ones must not.
                if self.config.era != EraMode::Modern && req.headers.contains(SESSION_ID_HEADER) {
                    return send_status(res, 202);
                }
                return send_answer(
                    res,
                    None,
                    err(
                        400,
                        code::INVALID_REQUEST,
                        "Invalid request: a client must not send JSON-RPC responses",
                    ),
                    &Headers::new(),
                );
            }
        };
        let params: Value = match params.map(|p| serde_json::from_str(p.get())) {
            None => Value::Object(Map::new()),
            Some(Ok(v @ Value::Object(_))) => v,
            Some(_) => {
                return send_answer(
                    res,
                    id.as_ref(),
                    malformed_params("Invalid params: params must be an object"),
                    &Headers::new(),
                )
            }
        };
        if let (Some(auth), Some(granted)) = (&self.auth, granted) {
            let needed = auth_server::required_scope(&method, &params);
            if let Err(refusal) = auth.check_scope(granted, needed) {
                return auth.refuse(refusal, res);
            }
        }
        let modern_meta = params
            .get("_meta")
            .and_then(|m| m.get(PROTOCOL_VERSION_META_KEY))
            .is_some();
        let legacy = match self.config.era {
            EraMode::Legacy => true,
            EraMode::Modern => false,
            EraMode::Dual => {
                method == "initialize" || (!modern_meta && req.headers.contains(SESSION_ID_HEADER))
            }
        };
        if legacy {
            self.legacy_post(req, res, id, &method, &params)
        } else {
            self.modern_post(req, res, id, &method, &params)
        }
    }

    fn modern_post(
        &self,
        req: &Request,
        res: &mut Responder<'_>,
        id: Option<Id>,
        method: &str,
        params: &Value,
    ) {
        let none = Headers::new();
        let Some(id) = id else {
            // No client notification is defined on Streamable HTTP in this revision; accept.
            return send_status(res, 202);
        };
        if method == "initialize" {
            let supported = self.supported_versions();
            let requested = params
                .get("protocolVersion")
                .cloned()
                .unwrap_or(Value::Null);
            return send_answer(
                res,
                Some(&id),
                Answer::Error(
                    400,
                    ErrorObject {
                        code: code::UNSUPPORTED_PROTOCOL_VERSION,
                        message: format!(
                            "Unsupported protocol version: this server does not support initialize; it speaks {}",
                            supported.join(", ")
                        ),
                        data: Some(json!({"supported": supported, "requested": requested})),
                    },
                ),
                &none,
            );
        }
        let meta = match self.modern_meta(params, Some(&req.headers)) {
            Ok(m) => m,
            Err(a) => {
                self.count_mismatch(&a);
                return send_answer(res, Some(&id), a, &none);
            }
        };
        if let Err(a) = check_request_headers(&req.headers, &id, method, params) {
            self.count_mismatch(&a);
            return send_answer(res, Some(&id), a, &none);
        }
        let mut sink = HttpSink::new(res, &req.headers, Headers::new());
        let answer = self.dispatch(
            Era::Modern,
            &id,
            method,
            params,
            Some(&meta.capabilities),
            &mut sink,
        );
        sink.finish(Some(&id), answer);
    }

    fn count_mismatch(&self, a: &Answer) {
        if let Answer::Error(_, e) = a {
            if e.code == code::HEADER_MISMATCH {
                lock(&self.stats).header_mismatches += 1;
            }
        }
    }

    fn legacy_post(
        &self,
        req: &Request,
        res: &mut Responder<'_>,
        id: Option<Id>,
        method: &str,
        params: &Value,
    ) {
        let none = Headers::new();
        if method == "initialize" {
            let Some(id) = id else {
                return send_answer(
                    res,
                    None,
                    err(
                        400,
                        code::INVALID_REQUEST,
                        "Invalid request: initialize must be a request",
                    ),
                    &none,
                );
            };
            let version = match negotiate_legacy(params) {
                Ok(v) => v,
                Err(a) => return send_answer(res, Some(&id), a, &none),
            };
            let sid = random_token("mcps_");
            lock(&self.sessions).insert(
                sid.clone(),
                Session {
                    protocol_version: version.clone(),
                },
            );
            lock(&self.stats).sessions_opened += 1;
            let extra = headers(&[(SESSION_ID_HEADER, &sid)]);
            return send_answer(
                res,
                Some(&id),
                Answer::Result(self.initialize_result(&version)),
                &extra,
            );
        }
        let Some(sid) = req.headers.get(SESSION_ID_HEADER) else {
            return send_answer(
                res,
                None,
                err(
                    400,
                    -32000,
                    "Bad Request: no valid session ID provided (send initialize first)",
                ),
                &none,
            );
        };
        let negotiated = lock(&self.sessions)
            .get(sid)
            .map(|s| s.protocol_version.clone());
        let Some(negotiated) = negotiated else {
            return send_answer(res, None, err(404, -32001, "Session not found"), &none);
        };
        if let Some(v) = req.headers.get(PROTOCOL_VERSION_HEADER) {
            if !KNOWN_LEGACY_VERSIONS.contains(&v) {
                return send_answer(
                    res,
                    None,
                    err(400, -32000, format!("Bad Request: unsupported {PROTOCOL_VERSION_HEADER} (this session speaks {negotiated})")),
                    &none,
                );
            }
        }
        let Some(id) = id else {
            // notifications/initialized, notifications/cancelled, anything else: accepted.
            return send_status(res, 202);
        };
        let mut sink = HttpSink::new(res, &req.headers, Headers::new());
        let answer = self.dispatch(Era::Legacy, &id, method, params, None, &mut sink);
        sink.finish(Some(&id), answer);
    }

    fn delete(&self, req: &Request, res: &mut Responder<'_>) {
        self.record("DELETE", None, Some(&req.headers));
        if self.config.era == EraMode::Modern {
            let _ = res.send(405, &headers(&[("Allow", "POST")]), b"");
            return;
        }
        let Some(sid) = req.headers.get(SESSION_ID_HEADER) else {
            return send_answer(
                res,
                None,
                err(
                    400,
                    -32000,
                    "Bad Request: DELETE needs an Mcp-Session-Id header",
                ),
                &Headers::new(),
            );
        };
        if lock(&self.sessions).remove(sid).is_some() {
            lock(&self.stats).sessions_ended += 1;
            send_status(res, 204);
        } else {
            send_answer(
                res,
                None,
                err(404, -32001, "Session not found"),
                &Headers::new(),
            );
        }
    }

    // -----------------------------------------------------------------------------------------
    // stdio
    // -----------------------------------------------------------------------------------------

    /// Serves newline-delimited JSON-RPC from `input` to `output` until `input` ends (or the
    /// server is stopped). Requests run concurrently (at most [`MAX_STDIO_IN_FLIGHT`]), so a
    /// slow call does not hold up the next; `notifications/cancelled` stops the call it names.
    /// At end of input, calls in flight are cancelled and joined.
    pub fn serve_stdio<R, W>(self: &Arc<Self>, input: R, output: W) -> io::Result<()>
    where
        R: BufRead,
        W: Write + Send + 'static,
    {
        if self.config.engine == Engine::Core {
            let input = on_core::LoggedInput {
                inner: input,
                server: self.clone(),
                partial: Vec::new(),
            };
            let server = self.clone();
            let result = mcpwire::server::blocking::serve_stdio_on(
                on_core::core_config(self)?,
                input,
                output,
                move |responder| on_core::DevApp::new(server, responder),
            );
            self.work.join_all();
            return result.map_err(io::Error::other);
        }
        let out: Arc<Mutex<Box<dyn Write + Send>>> = Arc::new(Mutex::new(Box::new(output)));
        let stdio = Arc::new(StdioState::default());
        let mut threads: Vec<std::thread::JoinHandle<()>> = Vec::new();
        let mut input = input;
        let mut line = Vec::new();
        loop {
            if self.shutdown.is_stopped() {
                break;
            }
            line.clear();
            let n = (&mut input)
                .take(MAX_STDIO_LINE as u64 + 1)
                .read_until(b'\n', &mut line)?;
            if n == 0 {
                break;
            }
            if line.last() != Some(&b'\n') && line.len() > MAX_STDIO_LINE {
                // Skip the rest of the over-long line, in bounded reads.
                let mut rest = Vec::new();
                loop {
                    rest.clear();
                    let m = (&mut input).take(64 * 1024).read_until(b'\n', &mut rest)?;
                    if m == 0 || rest.last() == Some(&b'\n') {
                        break;
                    }
                }
                write_line(
                    &out,
                    &error_value(
                        None,
                        &ErrorObject {
                            code: code::PARSE_ERROR,
                            message: format!(
                                "Parse error: a line is longer than {MAX_STDIO_LINE} bytes"
                            ),
                            data: None,
                        },
                    ),
                );
                continue;
            }
            let text = String::from_utf8_lossy(&line);
            let text = text.trim();
            if text.is_empty() {
                continue;
            }
            threads.retain(|t| !t.is_finished());
            while threads.len() >= MAX_STDIO_IN_FLIGHT {
                if let Some(t) = threads.pop() {
                    let _ = t.join();
                }
                threads.retain(|t| !t.is_finished());
            }
            if let Some(work) = self.stdio_message(text, &stdio, &out) {
                if work.method == "initialize" {
                    // In line: what follows it is read in the era it selects.
                    self.stdio_request(work, &stdio, &out);
                    continue;
                }
                let server = self.clone();
                let out = out.clone();
                let stdio2 = stdio.clone();
                match std::thread::Builder::new()
                    .name("mcpwire-dev-stdio".to_owned())
                    .spawn(move || server.stdio_request(work, &stdio2, &out))
                {
                    Ok(t) => threads.push(t),
                    Err(e) => return Err(e),
                }
            }
        }
        stdio.cancel_all();
        for t in threads {
            let _ = t.join();
        }
        Ok(())
    }

    /// Handles one stdio line: notifications and errors at once; a request comes back as work
    /// for a thread.
    fn stdio_message(
        &self,
        text: &str,
        stdio: &StdioState,
        out: &Arc<Mutex<Box<dyn Write + Send>>>,
    ) -> Option<StdioWork> {
        self.record("STDIO", None, None);
        let message = match Message::parse(text) {
            Ok(m) => m,
            Err(e) => {
                let c = match e {
                    jsonrpc::MessageError::Json(_) => code::PARSE_ERROR,
                    _ => code::INVALID_REQUEST,
                };
                write_line(
                    out,
                    &error_value(
                        None,
                        &ErrorObject {
                            code: c,
                            message: format!("Invalid message: {e}"),
                            data: None,
                        },
                    ),
                );
                return None;
            }
        };
        if let Some(m) = message.method() {
            if let Some(last) = lock(&self.log).back_mut() {
                last.method = Some(m.to_owned());
            }
        }
        lock(&self.stats).messages += 1;
        match message {
            Message::Request { id, method, params } => {
                let params = match params.map(|p| serde_json::from_str::<Value>(p.get())) {
                    None => Value::Object(Map::new()),
                    Some(Ok(v @ Value::Object(_))) => v,
                    Some(_) => {
                        let a = invalid_params("Invalid params: params must be an object");
                        write_answer(out, &id, a);
                        return None;
                    }
                };
                let cancel = stdio.register(&id);
                Some(StdioWork {
                    id,
                    method,
                    params,
                    cancel,
                })
            }
            Message::Notification { method, params } => {
                let params: Value = params
                    .and_then(|p| serde_json::from_str(p.get()).ok())
                    .unwrap_or(Value::Null);
                // notifications/cancelled stops the call it names; others are ignored.
                if method == "notifications/cancelled" {
                    if let Some(id) = params
                        .get("requestId")
                        .and_then(|v| serde_json::from_value::<Id>(v.clone()).ok())
                    {
                        stdio.cancel(&id);
                    }
                }
                None
            }
            Message::Response { .. } | Message::Error { .. } => None,
        }
    }

    fn stdio_request(
        &self,
        work: StdioWork,
        stdio: &StdioState,
        out: &Arc<Mutex<Box<dyn Write + Send>>>,
    ) {
        let StdioWork {
            id,
            method,
            params,
            cancel,
        } = work;
        let modern_meta = params
            .get("_meta")
            .and_then(|m| m.get(PROTOCOL_VERSION_META_KEY))
            .is_some();
        let mut sink = StdioSink {
            out: out.clone(),
            cancel: cancel.clone(),
        };
        let answer = if method == "initialize" {
            if self.config.era == EraMode::Modern {
                let supported = self.supported_versions();
                Answer::Error(
                    400,
                    ErrorObject {
                        code: code::UNSUPPORTED_PROTOCOL_VERSION,
                        message: format!(
                            "Unsupported protocol version: this server does not support initialize; it speaks {}",
                            supported.join(", ")
                        ),
                        data: Some(json!({"supported": supported, "requested": params.get("protocolVersion").cloned().unwrap_or(Value::Null)})),
                    },
                )
            } else {
                match negotiate_legacy(&params) {
                    Ok(v) => {
                        *lock(&stdio.legacy) = Some(v.clone());
                        lock(&self.stats).sessions_opened += 1;
                        Answer::Result(self.initialize_result(&v))
                    }
                    Err(a) => a,
                }
            }
        } else if self.config.era == EraMode::Legacy
            || (!modern_meta && lock(&stdio.legacy).is_some())
        {
            if self.config.era == EraMode::Legacy && method == "server/discover" {
                err(
                    200,
                    code::METHOD_NOT_FOUND,
                    "Method not found: server/discover",
                )
            } else if lock(&stdio.legacy).is_none() {
                err(
                    200,
                    code::INVALID_REQUEST,
                    "Invalid request: the server is not initialized (send initialize first)",
                )
            } else {
                self.dispatch(Era::Legacy, &id, &method, &params, None, &mut sink)
            }
        } else {
            match self.modern_meta(&params, None) {
                Ok(meta) => self.dispatch(
                    Era::Modern,
                    &id,
                    &method,
                    &params,
                    Some(&meta.capabilities),
                    &mut sink,
                ),
                Err(a) => a,
            }
        };
        stdio.unregister(&id);
        if cancel.load(Ordering::Relaxed) {
            // A cancelled request gets no further message.
            return;
        }
        write_answer(out, &id, answer);
    }
}

impl Handler for McpServer {
    fn handle(&self, req: &Request, res: &mut Responder<'_>) {
        if req.path == ELICIT_URL_PATH && req.method == "GET" {
            lock(&self.stats).elicit_url_fetches += 1;
            let _ = res.send(
                200,
                &headers(&[("Content-Type", "text/plain")]),
                b"the ask tool's consent page (a client must never open this by itself)\n",
            );
            return;
        }
        if let Some(auth) = &self.auth {
            if auth.handle(req, res) {
                return;
            }
        }
        // With authorization the resource is `/mcp` exactly, so `/` is not an alias.
        if req.path != "/mcp" && (req.path != "/" || self.auth.is_some()) {
            let _ = res.send(
                404,
                &headers(&[("Content-Type", "text/plain")]),
                b"not found: the MCP endpoint is /mcp\n",
            );
            return;
        }
        if let Some(origin) = req.headers.get("Origin") {
            if !is_loopback_origin(origin) {
                let _ = res.send(
                    403,
                    &headers(&[("Content-Type", "text/plain")]),
                    b"forbidden: Origin is not a loopback origin\n",
                );
                return;
            }
        }
        let granted = match &self.auth {
            None => None,
            Some(auth) => match auth
                .authenticate(&req.headers)
                .and_then(|g| auth.check_scope(&g, SCOPE_MCP).map(|()| g))
            {
                Ok(g) => Some(g),
                Err(refusal) => {
                    // Logged with the JSON-RPC method it would have been, when there is one.
                    let message = std::str::from_utf8(&req.body)
                        .ok()
                        .and_then(|t| Message::parse(t).ok());
                    let method = message.as_ref().and_then(Message::method);
                    self.record(&req.method, method, Some(&req.headers));
                    return auth.refuse(refusal, res);
                }
            },
        };
        match req.method.as_str() {
            "POST" => self.post(req, res, granted.as_deref()),
            "DELETE" => self.delete(req, res),
            _ => {
                self.record(&req.method, None, Some(&req.headers));
                let allow = if self.config.era == EraMode::Modern {
                    "POST"
                } else {
                    "POST, DELETE"
                };
                let _ = res.send(405, &headers(&[("Allow", allow)]), b"");
            }
        }
    }
}

/// Whether an `Origin` is `http(s)://` loopback (`localhost`, `127.0.0.1`, `[::1]`), any port.
fn is_loopback_origin(origin: &str) -> bool {
    let rest = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"));
    let Some(rest) = rest else {
        return false;
    };
    let host = if let Some(v6) = rest.strip_prefix('[') {
        v6.split(']').next().unwrap_or_default()
    } else {
        rest.split(':').next().unwrap_or_default()
    };
    matches!(host, "localhost" | "127.0.0.1" | "::1")
}

/// The legacy version to answer `initialize` with: the client's when known, else the newest.
fn negotiate_legacy(params: &Value) -> Result<String, Answer> {
    let Some(requested) = params.get("protocolVersion").and_then(Value::as_str) else {
        return Err(invalid_params(
            "Invalid params: initialize needs a string params.protocolVersion",
        ));
    };
    Ok(if KNOWN_LEGACY_VERSIONS.contains(&requested) {
        requested.to_owned()
    } else {
        LEGACY_PROTOCOL_VERSION.to_owned()
    })
}

impl McpServer {
    fn initialize_result(&self, version: &str) -> Value {
        let mut capabilities = json!({"tools": {}});
        let mut instructions =
            "mcpwire's reference server (legacy session): tools echo, slow, progress, fail, tenant, headers."
                .to_owned();
        if self.config.resources_and_prompts {
            // No list-changed notifications nor resources/subscribe in a legacy session.
            capabilities["prompts"] = json!({});
            capabilities["resources"] = json!({});
            instructions.push_str(LEGACY_CATALOG_NOTE);
        }
        if self.auth.is_some() {
            instructions.push_str(AUTH_NOTE);
        }
        json!({
            "protocolVersion": version,
            "capabilities": capabilities,
            "serverInfo": McpServer::server_info(),
            "instructions": instructions
        })
    }

    /// The modern capabilities: tools, and with [`Config::resources_and_prompts`] prompts and
    /// resources whose changes `subscriptions/listen` delivers.
    fn capabilities(&self) -> ServerCapabilities {
        if !self.config.resources_and_prompts {
            return ServerCapabilities {
                tools: Some(ListCapability::default()),
                ..ServerCapabilities::default()
            };
        }
        let changes = ListCapability {
            list_changed: Some(true),
            ..ListCapability::default()
        };
        ServerCapabilities {
            tools: Some(changes.clone()),
            prompts: Some(changes),
            resources: Some(ResourcesCapability {
                subscribe: Some(true),
                list_changed: Some(true),
                ..ResourcesCapability::default()
            }),
            ..ServerCapabilities::default()
        }
    }

    fn instructions(&self) -> String {
        let mut s =
            "mcpwire's reference server: tools echo, slow, progress, fail, tenant, ask, headers."
                .to_owned();
        if self.config.resources_and_prompts {
            s.push_str(MODERN_CATALOG_NOTE);
        }
        if self.auth.is_some() {
            s.push_str(AUTH_NOTE);
        }
        s
    }

    /// The tools of `era`: [`tool_definitions`], and `touch` with
    /// [`Config::resources_and_prompts`].
    fn tools(&self, era: Era) -> Vec<Value> {
        let mut tools = tool_definitions(era);
        if self.config.resources_and_prompts {
            tools.push(catalog::touch_definition());
        }
        if self.auth.is_some() {
            tools.push(json!({
                "name": ADMIN_TOOL,
                "description": "Returns its text argument, like echo, but needs the OAuth scope mcp:admin (a token without it gets 403 insufficient_scope).",
                "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
            }));
        }
        tools
    }
}

const LEGACY_CATALOG_NOTE: &str =
    " Also: prompt greet, resource mcpwire-dev://greeting, template mcpwire-dev://greeting/{name}, tool touch.";
const AUTH_NOTE: &str = " Also: tool admin_echo (needs the OAuth scope mcp:admin).";
const MODERN_CATALOG_NOTE: &str = " Also: prompt greet, resource mcpwire-dev://greeting, template mcpwire-dev://greeting/{name}, subscriptions/listen, tool touch.";

/// Checks `Mcp-Method`, `Mcp-Name` and `Mcp-Param-*` against the headers the core builds from
/// the body.
fn check_request_headers(h: &Headers, id: &Id, method: &str, params: &Value) -> Result<(), Answer> {
    let _ = id;
    let tool = if method == "tools/call" {
        params
            .get("name")
            .and_then(Value::as_str)
            .and_then(|name| {
                tool_definitions(Era::Modern)
                    .into_iter()
                    .find(|t| t.get("name").and_then(Value::as_str) == Some(name))
            })
            .and_then(|t| {
                let name = t.get("name").and_then(Value::as_str)?.to_owned();
                tool_headers(&name, t.get("inputSchema")?).ok()
            })
    } else {
        None
    };
    let message = json!({"jsonrpc": "2.0", "id": 0, "method": method, "params": params});
    let expected = request_headers_for(&message, tool.as_ref())
        .map_err(|e| invalid_params(format!("Invalid params: {e}")))?;
    match single(h, METHOD_HEADER)? {
        None => {
            return Err(mismatch(format!(
                "required header {METHOD_HEADER} is missing"
            )))
        }
        Some(v) if v != method => {
            return Err(mismatch(format!(
                "{METHOD_HEADER} header value does not match the body's method"
            )))
        }
        Some(_) => {}
    }
    if let Some(want) = expected.get(NAME_HEADER) {
        let got = single(h, NAME_HEADER)?
            .ok_or_else(|| mismatch(format!("required header {NAME_HEADER} is missing")))?;
        let got = decode_param_value(got)
            .map_err(|e| mismatch(format!("{NAME_HEADER} header value is malformed: {e}")))?;
        if decode_param_value(want).ok().as_deref() != Some(got.as_str()) {
            return Err(mismatch(format!(
                "{NAME_HEADER} header value does not match the body"
            )));
        }
    }
    if let Some(tool) = &tool {
        let arguments = params.get("arguments").cloned().unwrap_or(Value::Null);
        check_param_headers(h, tool, &expected, &arguments)?;
    }
    Ok(())
}

/// The one value of header `name`; sent twice is a mismatch.
fn single<'h>(h: &'h Headers, name: &'h str) -> Result<Option<&'h str>, Answer> {
    let mut all = h.get_all(name);
    match (all.next(), all.next()) {
        (_, Some(_)) => Err(mismatch(format!("header {name} is sent more than once"))),
        (v, None) => Ok(v),
    }
}

fn check_param_headers(
    h: &Headers,
    tool: &ToolHeaders,
    expected: &Headers,
    arguments: &Value,
) -> Result<(), Answer> {
    for param in tool.params() {
        let name = param.header_name();
        let got = single(h, &name)?;
        match (expected.get(&name), got) {
            (None, None) => {}
            (Some(_), None) => {
                return Err(mismatch(format!(
                    "header {name} is missing but the body has a value for it"
                )))
            }
            (None, Some(_)) => {
                return Err(mismatch(format!(
                    "header {name} is present but the body has no value for it"
                )))
            }
            (Some(want), Some(got)) => {
                let got = decode_param_value(got)
                    .map_err(|e| mismatch(format!("{name} header value is malformed: {e}")))?;
                let want = decode_param_value(want).unwrap_or_default();
                let numeric_equal = param
                    .extract(arguments)
                    .and_then(Value::as_f64)
                    .zip(got.parse::<f64>().ok())
                    .is_some_and(|(a, b)| a == b);
                if got != want && !numeric_equal {
                    return Err(mismatch(format!(
                        "{name} header value does not match the body"
                    )));
                }
            }
        }
    }
    Ok(())
}

/// The tools of `era` (`ask` needs MRTR, so only the modern era lists it).
pub fn tool_definitions(era: Era) -> Vec<Value> {
    let mut tools = vec![
        json!({
            "name": "echo",
            "description": "Returns its text argument (over HTTP, with the extra response_headers given).",
            "inputSchema": {"type": "object", "properties": {
                "text": {"type": "string"},
                "response_headers": {"type": "object", "description": "Extra HTTP response headers: name to value or values."}
            }, "required": ["text"]}
        }),
        json!({
            "name": "slow",
            "description": "Sleeps ms milliseconds (bounded), then answers; stops if the client goes away.",
            "inputSchema": {"type": "object", "properties": {"ms": {"type": "integer", "minimum": 0}}}
        }),
        json!({
            "name": "progress",
            "description": "Streams steps notifications/progress over SSE, interval_ms apart, then the result. Needs _meta.progressToken.",
            "inputSchema": {"type": "object", "properties": {
                "steps": {"type": "integer", "minimum": 1, "maximum": MAX_PROGRESS_STEPS},
                "interval_ms": {"type": "integer", "minimum": 0}
            }}
        }),
        json!({
            "name": "fail",
            "description": "Answers a JSON-RPC error (code, message, data), with HTTP status http_status; with raw_body, answers that text as text/plain instead.",
            "inputSchema": {"type": "object", "properties": {
                "code": {"type": "integer"},
                "message": {"type": "string"},
                "data": {},
                "http_status": {"type": "integer", "minimum": 200, "maximum": 599},
                "raw_body": {"type": "string"}
            }}
        }),
        json!({
            "name": "tenant",
            "description": "Returns its region argument, which is mirrored in the Mcp-Param-Region header.",
            "inputSchema": {"type": "object", "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"},
                "query": {"type": "string"}
            }, "required": ["region"]}
        }),
        json!({
            "name": "headers",
            "description": "Returns the HTTP request headers this call arrived with (Authorization redacted).",
            "inputSchema": {"type": "object", "properties": {}}
        }),
    ];
    if era == Era::Modern {
        tools.push(json!({
            "name": "ask",
            "description": "Asks through an elicitation (MRTR), then answers: form name (the default), profile, login (a password) or url (URL mode).",
            "inputSchema": {"type": "object", "properties": {
                "question": {"type": "string"},
                "form": {"type": "string", "enum": ASK_FORMS}
            }}
        }));
    }
    tools
}

/// Applies the `echo` tool's `response_headers`: `{name: value or [values]}`.
fn add_response_headers(extra: &Value, sink: &mut dyn Sink) -> Result<(), Answer> {
    let bad = || {
        invalid_params(
            "Invalid params: response_headers must map header names to strings or arrays of strings that a header can carry",
        )
    };
    let map = extra.as_object().ok_or_else(bad)?;
    for (name, values) in map {
        let values: Vec<&str> = match values {
            Value::String(v) => vec![v.as_str()],
            Value::Array(list) => list
                .iter()
                .map(Value::as_str)
                .collect::<Option<_>>()
                .ok_or_else(bad)?,
            _ => return Err(bad()),
        };
        for v in values {
            if !sink.add_response_header(name, v) {
                return Err(bad());
            }
        }
    }
    Ok(())
}

/// A non-negative integer argument, `default` when absent.
fn uint_arg(args: &Map<String, Value>, name: &str, default: u64) -> Result<u64, Answer> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => v
            .as_u64()
            .or_else(|| {
                v.as_f64()
                    .filter(|f| *f >= 0.0 && f.fract() == 0.0 && *f < 9.0e15)
                    .map(|f| f as u64)
            })
            .ok_or_else(|| {
                invalid_params(format!(
                    "Invalid params: {name} must be a non-negative integer"
                ))
            }),
    }
}

fn fail(args: &Map<String, Value>) -> Answer {
    let status = match args.get("http_status") {
        None | Some(Value::Null) => 200,
        Some(v) => match v.as_u64().filter(|s| (200..=599).contains(s)) {
            Some(s) => s as u16,
            None => {
                return invalid_params(
                    "Invalid params: http_status must be an integer from 200 to 599",
                )
            }
        },
    };
    if let Some(raw) = args.get("raw_body") {
        return match raw.as_str() {
            Some(t) => Answer::Raw(status, t.to_owned()),
            None => invalid_params("Invalid params: raw_body must be a string"),
        };
    }
    let code = match args.get("code") {
        None | Some(Value::Null) => FAIL_CODE,
        Some(v) => match v.as_i64() {
            Some(c) => c,
            None => return invalid_params("Invalid params: code must be an integer"),
        },
    };
    let message = match args.get("message") {
        None | Some(Value::Null) => FAIL_MESSAGE.to_owned(),
        Some(Value::String(m)) => m.clone(),
        Some(_) => return invalid_params("Invalid params: message must be a string"),
    };
    let data = match args.get("data") {
        None => Some(fail_data()),
        Some(d) => Some(d.clone()),
    };
    Answer::Error(
        status,
        ErrorObject {
            code,
            message,
            data,
        },
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use mcpwire_core::mcp::headers::partition_tools;

    #[test]
    fn every_tool_definition_is_valid_for_a_streamable_http_client() {
        for era in [Era::Modern, Era::Legacy] {
            let tools = tool_definitions(era);
            let n = tools.len();
            let (valid, rejected) = partition_tools(tools);
            assert!(rejected.is_empty(), "{rejected:?}");
            assert_eq!(valid.len(), n);
        }
        let modern = tool_definitions(Era::Modern);
        let tenant = modern.iter().find(|t| t["name"] == "tenant").unwrap();
        let th = tool_headers("tenant", &tenant["inputSchema"]).unwrap();
        assert_eq!(th.params()[0].header_name(), "Mcp-Param-Region");
    }

    #[test]
    fn loopback_origins_are_the_only_ones_accepted() {
        for ok in [
            "http://localhost:3000",
            "http://127.0.0.1",
            "https://[::1]:8443",
            "http://localhost",
        ] {
            assert!(is_loopback_origin(ok), "{ok}");
        }
        for bad in [
            "http://evil.example",
            "null",
            "http://localhost.evil.example",
            "file://localhost",
        ] {
            assert!(!is_loopback_origin(bad), "{bad}");
        }
    }

    #[test]
    fn the_fail_tool_keeps_what_it_is_given() {
        let args = json!({"code": -1, "message": "m", "data": null, "http_status": 500});
        match fail(args.as_object().unwrap()) {
            Answer::Error(500, e) => {
                assert_eq!(
                    (e.code, e.message.as_str(), e.data),
                    (-1, "m", Some(Value::Null))
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            fail(json!({"http_status": 99}).as_object().unwrap()),
            Answer::Error(200, e) if e.code == code::INVALID_PARAMS
        ));
    }
}

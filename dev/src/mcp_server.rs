//! `mcpwire dev mcp-server`: a reference MCP server with a few tools that exercise the tunnel
//! path, over Streamable HTTP ([`McpServer::start_http`]) or newline-delimited stdio
//! ([`McpServer::serve_stdio`]).
//!
//! **The protocol is the core's.** The server is an [`mcpwire_core::mcp::server::Application`]
//! served by [`mcpwire_core::mcp::server::Server`] on the blocking driver
//! ([`mcpwire::server::blocking`]): both eras, the `_meta` and `Mcp-*` header checks, MRTR,
//! sessions, `subscriptions/listen` and every error code are the core's (see its module
//! documentation). By default ([`EraMode::Dual`]) one endpoint answers both eras;
//! [`EraMode::Modern`] refuses `initialize` (`-32022`) and answers `DELETE` with `405`;
//! [`EraMode::Legacy`] serves only the handshake era (a modern request without a session gets
//! the legacy `400`, and `server/discover` is an unknown method), which is what a client's era
//! detection must fall back on. What is this server's own rides on the driver's hook (the
//! request log, the URL-mode page, the embedded authorization server, `/` as `/mcp`) and on
//! `Responder::override_http` (`fail`'s status and raw body, `echo`'s response headers).
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

use std::collections::{BTreeMap, VecDeque};
use std::io::{self, BufRead, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcpwire_core::http::Headers;
use mcpwire_core::jsonrpc::{code, ErrorObject};
use mcpwire_core::mcp::{Era, Tool};
use serde_json::{json, Map, Value};

use super::http::{lock, Limits, Shutdown};
use crate::auth_server::{AuthConfig, AuthServer, AuthStats, ADMIN_TOOL};

mod ask;
mod catalog;
mod on_core;
mod slow;

pub use ask::{ElicitationAnswer, ASK_FORMS, ELICIT_URL_PATH};

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

/// The server's settings.
#[derive(Clone, Debug)]
pub struct Config {
    /// Which eras are answered.
    pub era: EraMode,
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

/// The reference server's state, shared by its HTTP connections and its stdio loop.
#[derive(Debug)]
pub struct McpServer {
    config: Config,
    shutdown: Arc<Shutdown>,
    stats: Mutex<Stats>,
    log: Mutex<VecDeque<LoggedRequest>>,
    slow: slow::SlowCalls,
    auth: Option<AuthServer>,
    /// The calls running on threads, and the open legacy sessions.
    work: on_core::Work,
    core_sessions: std::sync::atomic::AtomicUsize,
    responder: Mutex<Option<mcpwire::server::Responder>>,
    /// [`McpServer::tools`] of each era (modern, legacy), built once: the configuration
    /// that decides them is fixed, and every call looks its tool up.
    tool_lists: [Vec<Tool>; 2],
}

/// A running HTTP reference server.
#[derive(Debug)]
pub struct McpServerHandle {
    http: mcpwire::server::blocking::HttpServer,
    server: Arc<McpServer>,
}

impl McpServerHandle {
    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.http.local_addr()
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
        self.http.stop();
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

impl McpServer {
    /// A server with `config`, not yet serving.
    pub fn new(config: Config) -> Arc<McpServer> {
        let auth = config.auth.clone().map(AuthServer::new);
        let parsed = |era| {
            tool_values(&config, auth.is_some(), era)
                .into_iter()
                .filter_map(|t| serde_json::from_value(t).ok())
                .collect()
        };
        let tool_lists = [parsed(Era::Modern), parsed(Era::Legacy)];
        Arc::new(McpServer {
            tool_lists,
            auth,
            config,
            shutdown: Shutdown::new(),
            stats: Mutex::new(Stats::default()),
            log: Mutex::new(VecDeque::new()),
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
        self.core_sessions.load(Ordering::Relaxed)
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
        let input = self.logged(input);
        let server = self.clone();
        let result = mcpwire::server::blocking::serve_stdio_on(
            on_core::core_config(self)?,
            input,
            output,
            move |responder| on_core::DevApp::new(server, responder),
        );
        self.work.join_all();
        result.map_err(io::Error::other)
    }

    /// [`McpServer::serve_stdio`] writing this process's own stdout (what `mcpwire dev
    /// mcp-server --stdio` serves): a short answer goes straight into a stdout pipe with room
    /// for it, from the thread that made it, as `mcpwire::server::blocking::serve_stdio` does.
    pub fn serve_process_stdio<R: BufRead>(self: &Arc<Self>, input: R) -> io::Result<()> {
        let input = self.logged(input);
        let server = self.clone();
        let result = mcpwire::server::blocking::serve_stdio_reading(
            on_core::core_config(self)?,
            input,
            move |responder| on_core::DevApp::new(server, responder),
        );
        self.work.join_all();
        result.map_err(io::Error::other)
    }

    fn logged<R: BufRead>(self: &Arc<Self>, input: R) -> on_core::LoggedInput<R> {
        on_core::LoggedInput {
            inner: input,
            server: self.clone(),
            partial: Vec::new(),
        }
    }
}

impl McpServer {
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
    fn tools(&self, era: Era) -> &[Tool] {
        match era {
            Era::Modern => &self.tool_lists[0],
            Era::Legacy => &self.tool_lists[1],
        }
    }
}

/// The tools of `era` as JSON: [`tool_definitions`], and `touch` with
/// [`Config::resources_and_prompts`], `admin_echo` with authorization.
fn tool_values(config: &Config, auth: bool, era: Era) -> Vec<Value> {
    let mut tools = tool_definitions(era);
    if config.resources_and_prompts {
        tools.push(catalog::touch_definition());
    }
    if auth {
        tools.push(json!({
            "name": ADMIN_TOOL,
            "description": "Returns its text argument, like echo, but needs the OAuth scope mcp:admin (a token without it gets 403 insufficient_scope).",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
        }));
    }
    tools
}

const AUTH_NOTE: &str = " Also: tool admin_echo (needs the OAuth scope mcp:admin).";
const MODERN_CATALOG_NOTE: &str = " Also: prompt greet, resource mcpwire-dev://greeting, template mcpwire-dev://greeting/{name}, subscriptions/listen, tool touch.";

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
    use mcpwire_core::mcp::headers::{partition_tools, tool_headers};

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

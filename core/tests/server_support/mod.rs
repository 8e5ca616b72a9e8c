//! Shared by the `mcp_server_*` tests: a fixture application (the tools, prompts and resources
//! the conformance scenarios name, reduced) and helpers that drive a `Server` with synthetic
//! HTTP requests and stdio lines and read what comes out.
#![allow(dead_code)]

use mcpwire_core::http::Headers;
use mcpwire_core::jsonrpc::ErrorObject;
use mcpwire_core::mcp::headers::request_headers_for;
use mcpwire_core::mcp::server::{
    Application, CallContext, CompleteRequest, Completion, ExchangeId, HttpMethod, HttpOutput,
    HttpRequest, InputRequest, Output, Reply, RequestContext, Server, ServerConfig, ServerSecrets,
};
use mcpwire_core::mcp::{
    Implementation, JsonObject, LoggingLevel, Prompt, Resource, ResourceTemplate, Tool,
};
use mcpwire_core::time::Instant;
use serde_json::{json, Value};

pub const MODERN: &str = "2026-07-28";

pub fn config() -> ServerConfig {
    let mut c = ServerConfig::new(
        Implementation::new("fixture", "1.0"),
        ServerSecrets::from_entropy([42; 64]),
    );
    c.prompts = true;
    c.resources = true;
    c.completions = true;
    c
}

pub fn server() -> Server {
    Server::new(config()).unwrap_or_else(|e| panic!("config: {e}"))
}

pub fn tool(name: &str, schema: Value) -> Tool {
    Tool {
        name: name.into(),
        input_schema: schema.as_object().cloned().unwrap_or_default(),
        ..Tool::default()
    }
}

/// The fixture: tools `echo`, `tenant` (x-mcp-header Region), `ask` (MRTR elicitation, with
/// state), `multi` (elicitation + sampling + roots), `sample` (sampling), `progress`, `log`,
/// `slow` (Pending), `reconnect` (closes its stream); a prompt, a resource and a template.
#[derive(Default)]
pub struct Fixture {
    pub calls: Vec<(String, JsonObject, Option<JsonObject>, Option<String>)>,
    pub cancelled: Vec<mcpwire_core::mcp::server::RequestId>,
    pub extra_tools: usize,
    pub closed_sessions: Vec<String>,
    /// Resource URIs a listen asks for that the fixture does not honour.
    pub refused_uris: Vec<String>,
    /// Every `accept_resource_subscriptions` call: the URIs asked.
    pub listens: Vec<Vec<String>>,
    /// When set, a listen asking for resource URIs is refused with this error.
    pub listen_error: Option<ErrorObject>,
}

/// An application with nothing overridden but the lists: the trait's defaults.
#[derive(Default)]
pub struct Bare;

impl Application for Bare {}

impl Application for Fixture {
    fn list_tools(&mut self, _: &RequestContext) -> Result<Vec<Tool>, ErrorObject> {
        let mut tools = vec![
            tool(
                "echo",
                json!({"type": "object", "properties": {"text": {"type": "string"}}}),
            ),
            tool(
                "tenant",
                json!({"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}}),
            ),
            tool("ask", json!({"type": "object"})),
            tool("multi", json!({"type": "object"})),
            tool("sample", json!({"type": "object"})),
            tool("progress", json!({"type": "object"})),
            tool("log", json!({"type": "object"})),
            tool("slow", json!({"type": "object"})),
            tool("reconnect", json!({"type": "object"})),
        ];
        for i in 0..self.extra_tools {
            tools.push(tool(&format!("extra{i:04}"), json!({"type": "object"})));
        }
        Ok(tools)
    }

    fn call_tool(&mut self, cx: &mut CallContext, name: &str, args: &JsonObject) -> Reply {
        self.calls.push((
            name.to_owned(),
            args.clone(),
            cx.input_responses.clone(),
            cx.state.clone(),
        ));
        match name {
            "echo" | "tenant" => Reply::tool_text(
                args.get("text")
                    .or_else(|| args.get("region"))
                    .and_then(Value::as_str)
                    .unwrap_or(""),
            ),
            "ask" => match cx.input_response("user_name") {
                Some(answer) => Reply::tool_text(format!(
                    "hello {} state={}",
                    answer["content"]["name"].as_str().unwrap_or("?"),
                    cx.state.as_deref().unwrap_or("-")
                )),
                None => Reply::InputRequired {
                    inputs: vec![(
                        "user_name".into(),
                        InputRequest::elicit_form(
                            "Your name?",
                            json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}),
                        ),
                    )],
                    state: Some("round-1".into()),
                },
            },
            "multi" => match &cx.input_responses {
                Some(r) if r.contains_key("e") && r.contains_key("s") && r.contains_key("r") => {
                    Reply::tool_text(format!("all three: {}", r.len()))
                }
                _ => Reply::InputRequired {
                    inputs: vec![
                        ("e".into(), InputRequest::elicit_form("ok?", json!({"type": "object", "properties": {}}))),
                        (
                            "s".into(),
                            InputRequest::sampling(
                                json!({"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}], "maxTokens": 5})
                                    .as_object()
                                    .cloned()
                                    .unwrap_or_default(),
                            ),
                        ),
                        ("r".into(), InputRequest::roots()),
                    ],
                    state: None,
                },
            },
            "sample" => match cx.input_response("s") {
                Some(_) => Reply::tool_text("sampled"),
                None => Reply::InputRequired {
                    inputs: vec![(
                        "s".into(),
                        InputRequest::sampling(
                            json!({"messages": [], "maxTokens": 5}).as_object().cloned().unwrap_or_default(),
                        ),
                    )],
                    state: None,
                },
            },
            "progress" => {
                for i in 1..=3 {
                    cx.progress(f64::from(i), Some(3.0), Some("step"));
                }
                Reply::tool_text("done")
            }
            "log" => {
                cx.log(LoggingLevel::Debug, Some("fixture"), json!("debug line"));
                cx.log(LoggingLevel::Info, Some("fixture"), json!("info line"));
                cx.log(LoggingLevel::Error, Some("fixture"), json!("error line"));
                Reply::tool_text("logged")
            }
            "slow" => Reply::Pending,
            "reconnect" => {
                cx.close_stream();
                Reply::tool_text("after reconnect")
            }
            other => Reply::invalid_params(format!("Unknown tool: {other}")),
        }
    }

    fn list_prompts(&mut self, _: &RequestContext) -> Result<Vec<Prompt>, ErrorObject> {
        Ok(vec![Prompt {
            name: "greeting".into(),
            ..Prompt::default()
        }])
    }

    fn get_prompt(&mut self, _: &mut CallContext, name: &str, args: &JsonObject) -> Reply {
        if name != "greeting" {
            return Reply::invalid_params(format!("Unknown prompt: {name}"));
        }
        let who = args.get("name").and_then(Value::as_str).unwrap_or("you");
        Reply::Result(
            json!({"messages": [{"role": "user", "content": {"type": "text", "text": format!("Hello {who}")}}]}),
        )
    }

    fn list_resources(&mut self, _: &RequestContext) -> Result<Vec<Resource>, ErrorObject> {
        Ok(vec![Resource {
            uri: "test://greeting".into(),
            name: "greeting".into(),
            ..Resource::default()
        }])
    }

    fn list_resource_templates(
        &mut self,
        _: &RequestContext,
    ) -> Result<Vec<ResourceTemplate>, ErrorObject> {
        Ok(vec![ResourceTemplate {
            uri_template: "test://item/{id}".into(),
            name: "item".into(),
            ..ResourceTemplate::default()
        }])
    }

    fn read_resource(&mut self, cx: &mut CallContext, uri: &str) -> Reply {
        if uri == "test://greeting" {
            Reply::Result(json!({"contents": [{"uri": uri, "text": "hello"}]}))
        } else {
            Reply::Error(mcpwire_core::mcp::server::resource_not_found(cx.era, uri))
        }
    }

    fn complete(
        &mut self,
        _: &RequestContext,
        r: &CompleteRequest,
    ) -> Result<Completion, ErrorObject> {
        let values = ["alpha", "beta", "alps"]
            .iter()
            .filter(|v| v.starts_with(&r.value))
            .map(|v| (*v).to_owned())
            .collect();
        Ok(Completion {
            values,
            total: None,
            has_more: false,
        })
    }

    fn accept_resource_subscriptions(
        &mut self,
        _: &RequestContext,
        uris: &[String],
    ) -> Result<Vec<String>, ErrorObject> {
        self.listens.push(uris.to_vec());
        if let Some(e) = &self.listen_error {
            return Err(e.clone());
        }
        Ok(uris
            .iter()
            .filter(|u| !self.refused_uris.contains(u))
            .cloned()
            .collect())
    }

    fn cancelled(&mut self, request: mcpwire_core::mcp::server::RequestId) {
        self.cancelled.push(request);
    }

    fn session_closed(&mut self, session: &mcpwire_core::mcp::server::SessionId) {
        self.closed_sessions.push(session.as_str().to_owned());
    }
}

pub fn now() -> Instant {
    Instant::now()
}

pub fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}
    })
}

pub fn meta_with(caps: Value) -> Value {
    let mut m = meta();
    m["io.modelcontextprotocol/clientCapabilities"] = caps;
    m
}

/// `params` with the modern `_meta` added (unless it has one).
pub fn with_meta(mut params: Value) -> Value {
    if params.get("_meta").is_none() {
        params["_meta"] = meta();
    }
    params
}

pub fn body(id: Value, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// The headers a conforming modern client sends for `message`, plus `Host`.
pub fn modern_headers(message: &Value) -> Headers {
    let mut h = request_headers_for(message, None).unwrap_or_default();
    let _ = h.set("Host", "127.0.0.1:3000");
    h
}

pub fn base_headers() -> Headers {
    let mut h = Headers::new();
    let _ = h.append("Host", "localhost:3000");
    let _ = h.append("Accept", "application/json, text/event-stream");
    let _ = h.append("Content-Type", "application/json");
    h
}

pub fn request(method: HttpMethod, headers: Headers, body: &[u8]) -> HttpRequest {
    HttpRequest {
        method,
        path: "/mcp".into(),
        headers,
        body: body.to_vec(),
    }
}

/// What one exchange came to.
#[derive(Debug, Default, Clone)]
pub struct Answer {
    pub status: Option<u16>,
    pub headers: Headers,
    pub body: Vec<u8>,
    pub streamed: bool,
    pub events: Vec<Vec<u8>>,
    pub ended: bool,
}

impl Answer {
    /// The JSON body (a plain response) or the JSON messages of the SSE events, in order.
    pub fn messages(&self) -> Vec<Value> {
        if !self.streamed {
            return serde_json::from_slice(&self.body)
                .map(|v| vec![v])
                .unwrap_or_default();
        }
        let mut out = Vec::new();
        for e in &self.events {
            let text = String::from_utf8_lossy(e);
            let data: Vec<&str> = text
                .lines()
                .filter_map(|l| l.strip_prefix("data: ").or_else(|| l.strip_prefix("data:")))
                .collect();
            let joined = data.join("\n");
            if let Ok(v) = serde_json::from_str::<Value>(joined.trim()) {
                out.push(v);
            }
        }
        out
    }

    /// The one JSON message (the last on a stream: the response).
    pub fn json(&self) -> Value {
        self.messages().pop().unwrap_or(Value::Null)
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name)
    }

    pub fn event_ids(&self) -> Vec<String> {
        self.events
            .iter()
            .filter_map(|e| {
                String::from_utf8_lossy(e)
                    .lines()
                    .find_map(|l| l.strip_prefix("id: ").map(str::to_owned))
            })
            .collect()
    }
}

/// Drains the outputs: per exchange what came, and the stdio lines.
pub fn drain(server: &mut Server) -> (Vec<(ExchangeId, Answer)>, Vec<Value>) {
    let mut http: Vec<(ExchangeId, Answer)> = Vec::new();
    let mut lines = Vec::new();
    let mut guard = 0;
    while let Some(out) = server.poll_output() {
        guard += 1;
        assert!(guard < 100_000, "output never ends");
        match out {
            Output::Stdio(line) => {
                assert_eq!(line.last(), Some(&b'\n'), "a stdio output is one line");
                assert_eq!(
                    line.iter().filter(|b| **b == b'\n').count(),
                    1,
                    "exactly one newline"
                );
                lines.push(serde_json::from_slice(&line).unwrap_or(Value::Null));
            }
            Output::Http(x, o) => {
                let idx = match http.iter().position(|(k, _)| *k == x) {
                    Some(i) => i,
                    None => {
                        http.push((x, Answer::default()));
                        http.len() - 1
                    }
                };
                let a = &mut http[idx].1;
                match o {
                    HttpOutput::Response {
                        status,
                        headers,
                        body,
                    } => {
                        assert!(a.status.is_none(), "one response per exchange");
                        a.status = Some(status);
                        a.headers = headers;
                        a.body = body;
                        a.ended = true;
                    }
                    HttpOutput::StreamStart { status, headers } => {
                        assert!(a.status.is_none(), "one start per exchange");
                        a.status = Some(status);
                        a.headers = headers;
                        a.streamed = true;
                    }
                    HttpOutput::StreamEvent(e) => {
                        assert!(a.streamed || a.status.is_none(), "events only on streams");
                        a.events.push(e);
                    }
                    HttpOutput::StreamEnd => {
                        assert!(!a.ended, "one end per exchange");
                        a.ended = true;
                    }
                }
            }
        }
    }
    (http, lines)
}

/// A test connection: the server, the fixture and the clock.
pub struct Harness {
    pub server: Server,
    pub app: Fixture,
    pub now: Instant,
}

impl Harness {
    pub fn new() -> Self {
        Harness {
            server: server(),
            app: Fixture::default(),
            now: now(),
        }
    }

    pub fn with(config: ServerConfig) -> Self {
        Harness {
            server: Server::new(config).unwrap_or_else(|e| panic!("config: {e}")),
            app: Fixture::default(),
            now: now(),
        }
    }

    /// Sends an HTTP request, serves it through the fixture, and returns what its exchange
    /// came to (and what other exchanges got meanwhile).
    pub fn http(&mut self, req: HttpRequest) -> (ExchangeId, Answer, Vec<(ExchangeId, Answer)>) {
        let x = self.server.handle_http_request(self.now, req);
        self.server.serve_with(&mut self.app, self.now);
        let (all, _) = drain(&mut self.server);
        let mut mine = Answer::default();
        let mut others = Vec::new();
        for (k, a) in all {
            if k == x {
                mine = a;
            } else {
                others.push((k, a));
            }
        }
        (x, mine, others)
    }

    /// A modern POST with conforming headers; `extra` headers replace them.
    pub fn modern(
        &mut self,
        id: Value,
        method: &str,
        params: Value,
        extra: &[(&str, &str)],
    ) -> Answer {
        let message = body(id, method, with_meta(params));
        let mut h = modern_headers(&message);
        for (n, v) in extra {
            let _ = h.set(*n, *v);
        }
        let text = message.to_string();
        self.http(request(HttpMethod::Post, h, text.as_bytes())).1
    }

    /// A POST of `message` as is, with `headers`.
    pub fn post(&mut self, message: &Value, headers: Headers) -> Answer {
        self.http(request(
            HttpMethod::Post,
            headers,
            message.to_string().as_bytes(),
        ))
        .1
    }

    /// A legacy POST in `session`.
    pub fn legacy(&mut self, session: &str, message: Value) -> Answer {
        let mut h = base_headers();
        let _ = h.append("Mcp-Session-Id", session);
        let _ = h.append("MCP-Protocol-Version", "2025-11-25");
        self.post(&message, h)
    }

    /// `initialize` then `notifications/initialized`; the session id.
    pub fn initialize(&mut self, capabilities: Value) -> String {
        let a = self.post(
            &body(json!(0), "initialize", json!({"protocolVersion": "2025-11-25", "capabilities": capabilities, "clientInfo": {"name": "t", "version": "1"}})),
            base_headers(),
        );
        assert_eq!(a.status, Some(200), "{:?}", a.json());
        let sid = a.header("Mcp-Session-Id").unwrap_or_default().to_owned();
        assert!(!sid.is_empty());
        let n = self.legacy(
            &sid,
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        );
        assert_eq!(n.status, Some(202));
        sid
    }

    /// Feeds stdio bytes, serves them, returns the lines written.
    pub fn stdio(&mut self, bytes: &[u8]) -> Vec<Value> {
        self.server.handle_stdio_bytes(self.now, bytes);
        self.server.serve_with(&mut self.app, self.now);
        drain(&mut self.server).1
    }

    pub fn stdio_json(&mut self, message: &Value) -> Vec<Value> {
        let mut line = message.to_string().into_bytes();
        line.push(b'\n');
        self.stdio(&line)
    }
}

pub fn code(v: &Value) -> i64 {
    v["error"]["code"].as_i64().unwrap_or(0)
}

//! The application side of the server: the [`Application`] trait a server author implements
//! (the core does the protocol around it), the [`Reply`] it gives, the contexts a request is
//! served in, and the inputs (MRTR) it may ask the client for.

use serde_json::{json, Map, Value};

use crate::http::Headers;
use crate::jsonrpc::{code, ErrorObject};
use crate::mcp::era::Era;
use crate::mcp::meta::{
    ClientCapabilities, Implementation, JsonObject, LoggingLevel, ProgressToken,
};
use crate::mcp::results::{Prompt, Resource, ResourceTemplate, Tool};

use super::{ExchangeId, RequestId, SessionId};

/// What an application answers to one request.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    /// The result object (the core adds `resultType`, `_meta.serverInfo` and the cache hints
    /// of a `2026-07-28` result, and paginates a list result it recognises).
    Result(Value),
    /// A JSON-RPC error (for a tool's own failure prefer a result with `isError: true`,
    /// [`Reply::tool_error`]).
    Error(ErrorObject),
    /// The request needs input from the client first (MRTR, answered the `2026-07-28` way;
    /// the core maps it to server-to-client requests in the legacy era). Only `tools/call`,
    /// `prompts/get` and `resources/read` may ask; another method's `InputRequired` becomes a
    /// `-32603` error. `state` is the application's own, returned verified in
    /// [`RequestContext::state`] on the retry (sealed by the core in `2026-07-28`, kept in
    /// memory in the legacy era). A sealed state is authenticated, not encrypted: keep secrets
    /// out of it.
    InputRequired {
        /// The inputs, each under the key its response comes back with.
        inputs: Vec<(String, InputRequest)>,
        /// The application's state for the next round.
        state: Option<String>,
    },
    /// The application answers later with [`super::Server::respond`].
    Pending,
}

impl Reply {
    /// A `tools/call` result with one text content block.
    pub fn tool_text(text: impl Into<String>) -> Reply {
        Reply::Result(json!({"content": [{"type": "text", "text": text.into()}]}))
    }

    /// A `tools/call` result reporting the tool's own failure (`isError: true`), one text block.
    pub fn tool_error(text: impl Into<String>) -> Reply {
        Reply::Result(json!({"content": [{"type": "text", "text": text.into()}], "isError": true}))
    }

    /// A JSON-RPC error of `code` with `message`.
    pub fn error(code: i64, message: impl Into<String>) -> Reply {
        Reply::Error(ErrorObject {
            code,
            message: message.into(),
            data: None,
        })
    }

    /// `-32602` Invalid params.
    pub fn invalid_params(message: impl Into<String>) -> Reply {
        Reply::error(code::INVALID_PARAMS, message)
    }

    /// The answer to [`super::Call::Listen`]: the resource URIs the application honours
    /// (`{"resourceSubscriptions": [...]}`); the acknowledgment lists those of them the
    /// client asked for.
    pub fn resource_subscriptions<I, S>(uris: I) -> Reply
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let uris: Vec<String> = uris.into_iter().map(Into::into).collect();
        Reply::Result(json!({ "resourceSubscriptions": uris }))
    }
}

/// One input an application asks the client for: a server-to-client request, as its method and
/// params go on the wire (an `inputRequests` entry in `2026-07-28`, a request of its own in
/// the legacy era).
#[derive(Clone, Debug, PartialEq)]
pub struct InputRequest {
    /// `elicitation/create`, `sampling/createMessage` or `roots/list`.
    pub method: String,
    /// The params.
    pub params: JsonObject,
}

impl InputRequest {
    /// A form-mode elicitation: `message` and the `requestedSchema`.
    pub fn elicit_form(message: impl Into<String>, requested_schema: Value) -> Self {
        let mut params = Map::new();
        params.insert("mode".into(), json!("form"));
        params.insert("message".into(), Value::String(message.into()));
        params.insert("requestedSchema".into(), requested_schema);
        InputRequest {
            method: "elicitation/create".into(),
            params,
        }
    }

    /// A URL-mode elicitation of `url`, named `elicitation_id`.
    pub fn elicit_url(
        message: impl Into<String>,
        url: impl Into<String>,
        elicitation_id: impl Into<String>,
    ) -> Self {
        let mut params = Map::new();
        params.insert("mode".into(), json!("url"));
        params.insert("message".into(), Value::String(message.into()));
        params.insert("url".into(), Value::String(url.into()));
        params.insert("elicitationId".into(), Value::String(elicitation_id.into()));
        InputRequest {
            method: "elicitation/create".into(),
            params,
        }
    }

    /// A `sampling/createMessage` request with these params (`messages`, `maxTokens`, ...).
    pub fn sampling(params: JsonObject) -> Self {
        InputRequest {
            method: "sampling/createMessage".into(),
            params,
        }
    }

    /// A `roots/list` request.
    pub fn roots() -> Self {
        InputRequest {
            method: "roots/list".into(),
            params: Map::new(),
        }
    }

    /// The client capability this input needs, as the `requiredCapabilities` member of a
    /// `-32021` error names it (`{"elicitation": {"form": {}}}`, `{"sampling": {}}`, ...);
    /// `None` for a method the core does not know (it is sent as is).
    pub fn required_capability(&self) -> Option<Value> {
        super::dispatch::required_capability(self)
    }
}

/// How a request reached the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransportKind {
    /// Newline-delimited stdio.
    Stdio,
    /// Streamable HTTP.
    Http,
}

/// What the core knows about the request an application serves.
#[derive(Clone, Debug)]
pub struct RequestContext {
    /// The core's handle of the request ([`super::Server::respond`] takes it).
    pub request: RequestId,
    /// The JSON-RPC method.
    pub method: String,
    /// The era it is served in.
    pub era: Era,
    /// The protocol version: `_meta`'s (`2026-07-28`) or the session's negotiated one.
    pub protocol_version: String,
    /// The client's capabilities: `_meta`'s, or the ones `initialize` declared.
    pub client_capabilities: ClientCapabilities,
    /// The client's self-reported info, when it gave one.
    pub client_info: Option<Implementation>,
    /// The legacy session, when there is one (HTTP: `Mcp-Session-Id`; stdio: the connection's).
    pub session: Option<SessionId>,
    /// stdio or HTTP.
    pub transport: TransportKind,
    /// The HTTP exchange (the POST) that carries the answer (`None` on stdio). A driver keys
    /// per-response settings by it (`mcpwire::server::Responder::override_http`: the status or
    /// extra headers of the response an application wants for its own reasons).
    pub exchange: Option<ExchangeId>,
    /// The HTTP request headers (`None` on stdio).
    pub headers: Option<Headers>,
    /// `_meta.progressToken`, when the client asked for progress.
    pub progress_token: Option<ProgressToken>,
    /// The log level asked for: `_meta`'s `logLevel` (`2026-07-28`) or the session's
    /// `logging/setLevel` (legacy); `None`: the client asked for no log messages (modern) or
    /// set no level (legacy: the core sends every level then).
    pub log_level: Option<LoggingLevel>,
    /// The request's whole `params._meta` as sent.
    pub meta: JsonObject,
    /// MRTR: the client's responses to the inputs asked in the previous round, by key (each
    /// the input request's result, as `inputResponses` carries it; in the legacy era a client
    /// that answered a server-to-client request with a JSON-RPC error appears as
    /// `{"error": {code, message, data?}}` under its key). Keys the application did not ask
    /// for may be present (clients may send extra ones; ignore them).
    pub input_responses: Option<JsonObject>,
    /// MRTR: the application's `state` of the previous round, verified by the core.
    pub state: Option<String>,
    /// MRTR: how many rounds came before this one (0 on the first call).
    pub round: u32,
}

impl RequestContext {
    /// The client's response to the input asked under `key` in the previous round.
    pub fn input_response(&self, key: &str) -> Option<&Value> {
        self.input_responses.as_ref()?.get(key)
    }
}

/// Something an application sends while it serves a request; the core delivers it before the
/// result (on the request's SSE stream over HTTP, as a line on stdio).
#[derive(Clone, Debug, PartialEq)]
pub enum Notice {
    /// `notifications/progress` (dropped when the request had no `progressToken`).
    Progress {
        /// How far along.
        progress: f64,
        /// Of how much, when known.
        total: Option<f64>,
        /// A human-readable message.
        message: Option<String>,
    },
    /// `notifications/message`, filtered by the request's or session's log level.
    Log {
        /// The severity.
        level: LoggingLevel,
        /// The logger's name.
        logger: Option<String>,
        /// Any JSON value.
        data: Value,
    },
    /// Close the request's SSE stream now (SEP-1699 polling): the client reconnects with
    /// `Last-Event-ID` and gets what follows. Ignored on stdio and for JSON answers.
    CloseStream,
}

/// The context of a request that may take a while (tools, prompts, resource reads): the
/// [`RequestContext`], plus progress and log messages sent before the result.
#[derive(Debug)]
pub struct CallContext {
    /// What the core knows about the request.
    pub request: RequestContext,
    pub(super) notices: Vec<Notice>,
}

impl std::ops::Deref for CallContext {
    type Target = RequestContext;
    fn deref(&self) -> &RequestContext {
        &self.request
    }
}

impl CallContext {
    /// A context for `request` with nothing sent yet.
    pub fn new(request: RequestContext) -> Self {
        CallContext {
            request,
            notices: Vec::new(),
        }
    }

    /// Sends `notifications/progress` (only if the client gave a `progressToken`).
    pub fn progress(&mut self, progress: f64, total: Option<f64>, message: Option<&str>) {
        self.notices.push(Notice::Progress {
            progress,
            total,
            message: message.map(str::to_owned),
        });
    }

    /// Sends `notifications/message` (filtered by the log level the client asked for).
    pub fn log(&mut self, level: LoggingLevel, logger: Option<&str>, data: Value) {
        self.notices.push(Notice::Log {
            level,
            logger: logger.map(str::to_owned),
            data,
        });
    }

    /// Closes the request's SSE stream (SEP-1699); the result goes to the client when it
    /// reconnects with `Last-Event-ID`.
    pub fn close_stream(&mut self) {
        self.notices.push(Notice::CloseStream);
    }

    /// What was sent so far, in order.
    pub fn notices(&self) -> &[Notice] {
        &self.notices
    }

    /// Takes what was sent so far.
    pub fn take_notices(&mut self) -> Vec<Notice> {
        std::mem::take(&mut self.notices)
    }
}

/// What `completion/complete` completes: a prompt's argument or a resource template's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CompletionReference {
    /// `ref/prompt` with the prompt's name.
    Prompt(String),
    /// `ref/resource` with the template's URI.
    Resource(String),
}

/// A `completion/complete` request, read.
#[derive(Clone, Debug, PartialEq)]
pub struct CompleteRequest {
    /// What is completed.
    pub reference: CompletionReference,
    /// The argument's name.
    pub argument: String,
    /// Its value so far.
    pub value: String,
    /// `context.arguments`: values already given for other arguments.
    pub context_arguments: JsonObject,
}

/// The answer to `completion/complete`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Completion {
    /// The values (the core sends at most 100, as the spec bounds them).
    pub values: Vec<String>,
    /// How many there are in all, when known.
    pub total: Option<u64>,
    /// Whether there are more than those sent.
    pub has_more: bool,
}

/// A server author's application: tools, resources and prompts, and their changes. The core
/// does the protocol (eras, transports, `_meta`, headers, pagination, MRTR, sessions) and calls
/// these through [`super::Server::serve_with`]. Every method has a default (empty lists, "not
/// found" errors), so a tools-only server writes `list_tools` and `call_tool`.
pub trait Application {
    /// Every tool (the core paginates).
    fn list_tools(&mut self, cx: &RequestContext) -> Result<Vec<Tool>, ErrorObject> {
        let _ = cx;
        Ok(Vec::new())
    }

    /// The tool `name`, for the `Mcp-Param-*` header checks of a `2026-07-28` HTTP call
    /// (default: found in [`Application::list_tools`]).
    fn tool(&mut self, cx: &RequestContext, name: &str) -> Option<Tool> {
        self.list_tools(cx)
            .ok()?
            .into_iter()
            .find(|tool| tool.name == name)
    }

    /// Calls the tool `name` (default: `-32602` unknown tool).
    fn call_tool(&mut self, cx: &mut CallContext, name: &str, arguments: &JsonObject) -> Reply {
        let _ = (cx, arguments);
        Reply::invalid_params(format!("Unknown tool: {name}"))
    }

    /// Every resource (the core paginates).
    fn list_resources(&mut self, cx: &RequestContext) -> Result<Vec<Resource>, ErrorObject> {
        let _ = cx;
        Ok(Vec::new())
    }

    /// Every resource template (the core paginates).
    fn list_resource_templates(
        &mut self,
        cx: &RequestContext,
    ) -> Result<Vec<ResourceTemplate>, ErrorObject> {
        let _ = cx;
        Ok(Vec::new())
    }

    /// Reads the resource `uri` (default: resource not found, `-32602` in `2026-07-28`,
    /// `-32002` before, with `data.uri`).
    fn read_resource(&mut self, cx: &mut CallContext, uri: &str) -> Reply {
        Reply::Error(super::dispatch::resource_not_found(cx.era, uri))
    }

    /// `resources/subscribe` (legacy era) of `uri`: `Ok` to accept (the default). The core
    /// keeps the subscription and sends `notifications/resources/updated` on
    /// [`super::Server::resource_updated`].
    fn subscribe(&mut self, cx: &RequestContext, uri: &str) -> Result<(), ErrorObject> {
        let _ = (cx, uri);
        Ok(())
    }

    /// `resources/unsubscribe` of `uri` (default: accepted).
    fn unsubscribe(&mut self, cx: &RequestContext, uri: &str) -> Result<(), ErrorObject> {
        let _ = (cx, uri);
        Ok(())
    }

    /// A `subscriptions/listen` (`2026-07-28`) asks for `notifications/resources/updated` of
    /// `uris`: the ones the application honours (default: all of them). The core
    /// acknowledges the listen with those (as the spec has it, the subset the server agreed
    /// to honour) and sends the stream [`super::Server::resource_updated`] of those only; an
    /// `Err` is the listen's JSON-RPC error (no stream opens). URIs returned that were not
    /// asked for are ignored. A listen without URIs does not call this.
    fn accept_resource_subscriptions(
        &mut self,
        cx: &RequestContext,
        uris: &[String],
    ) -> Result<Vec<String>, ErrorObject> {
        let _ = cx;
        Ok(uris.to_vec())
    }

    /// Every prompt (the core paginates).
    fn list_prompts(&mut self, cx: &RequestContext) -> Result<Vec<Prompt>, ErrorObject> {
        let _ = cx;
        Ok(Vec::new())
    }

    /// Gets the prompt `name` with `arguments` (default: `-32602` unknown prompt).
    fn get_prompt(&mut self, cx: &mut CallContext, name: &str, arguments: &JsonObject) -> Reply {
        let _ = (cx, arguments);
        Reply::invalid_params(format!("Unknown prompt: {name}"))
    }

    /// `completion/complete` (default: no values).
    fn complete(
        &mut self,
        cx: &RequestContext,
        request: &CompleteRequest,
    ) -> Result<Completion, ErrorObject> {
        let _ = (cx, request);
        Ok(Completion::default())
    }

    /// A method the core does not serve itself (default: `-32601` method not found).
    fn other(&mut self, cx: &mut CallContext, method: &str, params: &JsonObject) -> Reply {
        let _ = (cx, params);
        Reply::error(
            code::METHOD_NOT_FOUND,
            format!("Method not found: {method}"),
        )
    }

    /// The request was cancelled (by the client, its connection or the session ending) before
    /// it was answered; a later answer to it is dropped.
    fn cancelled(&mut self, request: RequestId) {
        let _ = request;
    }

    /// A legacy session opened (`initialize` answered; default: nothing).
    fn session_opened(&mut self, session: &SessionId) {
        let _ = session;
    }

    /// A legacy session ended (`DELETE`, idle, end of stdio).
    fn session_closed(&mut self, session: &SessionId) {
        let _ = session;
    }
}

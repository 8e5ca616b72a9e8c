//! The reference server on the core: the
//! tools, prompts and resources as an [`Application`] served by
//! [`mcpwire_core::mcp::server::Server`] through the blocking driver's HTTP listener and stdio
//! loop, so the protocol of both eras is the core's. What is the dev server's own and not the
//! protocol's rides on the driver's two extension points: an [`HttpHook`] in front of the core
//! (the request log and counters, the `ask` tool's URL-mode page, the embedded authorization
//! server and the bearer-token `401`/`403` on `/mcp`, `/` as an alias of `/mcp`) and
//! [`Responder::override_http`] for the answers whose HTTP is the point (`fail`'s status and
//! raw body, `echo`'s response headers).
//!
//! Tools that take time (`slow`, `progress`) answer [`Reply::Pending`] and finish on a thread
//! of their own through the [`Responder`]; a cancellation (the client's, its connection gone,
//! the server stopping) raises the call's flag and the thread stops without an answer.

use std::collections::HashMap;
use std::io::{self, Read};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcpwire::server::{HookAnswer, HttpHook, HttpOverride, Responder};
use mcpwire_core::http::Headers;
use mcpwire_core::jsonrpc::{code, ErrorObject, Message};
use mcpwire_core::mcp::server::{
    Application, CallContext, Eras, HttpRequest, InputRequest, Reply, RequestContext, RequestId,
    ServerConfig, SessionId,
};
use mcpwire_core::mcp::{Era, Implementation, ListKind, Prompt, Resource, ResourceTemplate, Tool};
use serde_json::{json, Map, Value};

use super::ask::{ask_request, hex, ASK_STATE_PREFIX};
use super::{
    catalog, fail, lock, uint_arg, Answer, EraMode, McpServer, ELICIT_URL_PATH,
    MAX_PROGRESS_INTERVAL, MAX_PROGRESS_STEPS, SERVER_NAME,
};
use crate::auth_server::{self, ADMIN_TOOL, SCOPE_MCP};
use crate::http::{Captured, Request};

/// The core's configuration for `server` (its eras, bounds, cache hints and catalog).
pub(super) fn core_config(server: &McpServer) -> io::Result<ServerConfig> {
    let info = Implementation::new(SERVER_NAME, env!("CARGO_PKG_VERSION"));
    let mut config = mcpwire::server::config(info).map_err(io::Error::other)?;
    config.eras = match server.config.era {
        EraMode::Dual => Eras::BOTH,
        EraMode::Modern => Eras::MODERN,
        EraMode::Legacy => Eras::LEGACY,
    };
    config.instructions = Some(server.instructions());
    config.cache.tools.ttl_ms = server.config.tools_list_ttl_ms.unwrap_or(0);
    config.limits.max_body_bytes = server.config.limits.max_body;
    config.limits.max_line_bytes = super::MAX_STDIO_LINE;
    // One resource per page of `resources/list`, so clients page through it.
    config.limits.page_sizes.resources = Some(1);
    // The hand-written server checked Origin only (raw-socket tests send any Host).
    config.origin_policy.any_host = true;
    config.logging = false;
    config.prompts = server.config.resources_and_prompts;
    config.resources = server.config.resources_and_prompts;
    // Only `touch` (there with resources and prompts) changes a list.
    config.list_changed = server.config.resources_and_prompts;
    Ok(config)
}

/// The calls running on threads of their own, each with its cancel flag.
#[derive(Debug, Default)]
pub(super) struct Work {
    flags: Mutex<HashMap<RequestId, Arc<AtomicBool>>>,
    threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
}

impl Work {
    fn start(&self, request: RequestId) -> Arc<AtomicBool> {
        let flag = Arc::new(AtomicBool::new(false));
        lock(&self.flags).insert(request, flag.clone());
        flag
    }

    fn done(&self, request: RequestId) {
        lock(&self.flags).remove(&request);
    }

    /// Stops every call still running and joins its thread (the server stopped or stdio
    /// ended: the driver cancelled them already, this makes sure).
    pub(super) fn join_all(&self) {
        for flag in lock(&self.flags).drain().map(|(_, f)| f) {
            flag.store(true, Ordering::Relaxed);
        }
        let threads = std::mem::take(&mut *lock(&self.threads));
        for t in threads {
            let _ = t.join();
        }
    }

    fn cancel(&self, request: RequestId) {
        if let Some(flag) = lock(&self.flags).remove(&request) {
            flag.store(true, Ordering::Relaxed);
        }
    }
}

/// The application.
pub(super) struct DevApp {
    pub(super) server: Arc<McpServer>,
    pub(super) responder: Responder,
}

impl DevApp {
    /// The application of `server`, which keeps a copy of `responder` (for
    /// [`McpServer::end_subscriptions`]).
    pub(super) fn new(server: Arc<McpServer>, responder: Responder) -> Self {
        *lock(&server.responder) = Some(responder.clone());
        DevApp { server, responder }
    }
}

fn to_reply(answer: Answer) -> Reply {
    match answer {
        Answer::Result(v) => Reply::Result(v),
        Answer::Error(_, e) => Reply::Error(e),
        Answer::Raw(_, body) => Reply::Error(ErrorObject {
            code: code::INTERNAL_ERROR,
            message: format!("fail: raw_body has no stdio form ({} bytes)", body.len()),
            data: None,
        }),
    }
}

fn items<T: serde::de::DeserializeOwned>(answer: Answer, member: &str) -> Vec<T> {
    match answer {
        Answer::Result(mut v) => serde_json::from_value(v[member].take()).unwrap_or_default(),
        _ => Vec::new(),
    }
}

impl DevApp {
    /// Sleeps `d` in short steps; `true` when the call was cancelled or the server stopped.
    fn pause(server: &McpServer, d: Duration, flag: &AtomicBool) -> bool {
        let step = Duration::from_millis(20);
        let mut left = d;
        loop {
            if flag.load(Ordering::Relaxed) {
                return true;
            }
            if left.is_zero() {
                return false;
            }
            let now = left.min(step);
            if server.shutdown.sleep(now) {
                return true;
            }
            left -= now;
        }
    }

    /// Runs `work` on a thread of its own; its `Some` answer goes out, `None` (cancelled)
    /// sends nothing.
    fn later(
        &self,
        request: RequestId,
        work: impl FnOnce(&McpServer, &Responder, &AtomicBool) -> Option<Reply> + Send + 'static,
    ) -> Reply {
        let flag = self.server.work.start(request);
        let server = self.server.clone();
        let responder = self.responder.clone();
        let spawned = std::thread::Builder::new()
            .name("mcpwire-dev-call".to_owned())
            .spawn(move || {
                let reply = work(&server, &responder, &flag);
                server.work.done(request);
                match reply {
                    Some(reply) => {
                        let _ = responder.respond(request, reply);
                    }
                    None => lock(&server.stats).cancelled += 1,
                }
            });
        match spawned {
            Ok(t) => {
                let mut threads = lock(&self.server.work.threads);
                threads.retain(|t| !t.is_finished());
                threads.push(t);
                Reply::Pending
            }
            Err(e) => {
                self.server.work.done(request);
                Reply::error(code::INTERNAL_ERROR, format!("cannot start the call: {e}"))
            }
        }
    }

    fn echo(&self, cx: &CallContext, args: &Map<String, Value>) -> Reply {
        let Some(t) = args.get("text").and_then(Value::as_str) else {
            return Reply::invalid_params("Invalid params: echo needs a string argument text");
        };
        if let Some(extra) = args.get("response_headers") {
            let mut headers = Headers::new();
            let bad = || {
                Reply::invalid_params(
                    "Invalid params: response_headers must map header names to strings or arrays of strings that a header can carry",
                )
            };
            let Some(map) = extra.as_object() else {
                return bad();
            };
            for (name, values) in map {
                let values: Option<Vec<&str>> = match values {
                    Value::String(v) => Some(vec![v.as_str()]),
                    Value::Array(list) => list.iter().map(Value::as_str).collect(),
                    _ => None,
                };
                let Some(values) = values else {
                    return bad();
                };
                for v in values {
                    if headers.append(name, v).is_err() {
                        return bad();
                    }
                }
            }
            if let Some(x) = cx.exchange {
                self.responder.override_http(
                    x,
                    HttpOverride {
                        headers,
                        ..HttpOverride::default()
                    },
                );
            }
        }
        Reply::Result(json!({
            "content": [{"type": "text", "text": t}],
            "structuredContent": {"text": t}
        }))
    }

    fn slow(&self, cx: &CallContext, args: &Map<String, Value>) -> Reply {
        let ms = match uint_arg(args, "ms", 1000) {
            Ok(ms) => ms,
            Err(a) => return to_reply(a),
        };
        let max = self.server.config.max_slow.as_millis() as u64;
        if ms > max {
            return Reply::invalid_params(format!("Invalid params: slow sleeps at most {max} ms"));
        }
        self.later(cx.request.request, move |server, _, flag| {
            let call = server.slow.start();
            if DevApp::pause(server, Duration::from_millis(ms), flag) {
                return None;
            }
            Some(Reply::Result(json!({
                "content": [{"type": "text", "text": format!("slept {ms} ms")}],
                "structuredContent": {"ms": ms, "overlapping": call.overlapping()}
            })))
        })
    }

    fn progress(&self, cx: &CallContext, args: &Map<String, Value>) -> Reply {
        if cx.progress_token.is_none() {
            return Reply::invalid_params(
                "Invalid params: the progress tool needs params._meta.progressToken (a string or an integer)",
            );
        }
        let steps = match uint_arg(args, "steps", 3) {
            Ok(s) if (1..=MAX_PROGRESS_STEPS).contains(&s) => s,
            Ok(_) => {
                return Reply::invalid_params(format!(
                    "Invalid params: steps must be from 1 to {MAX_PROGRESS_STEPS}"
                ))
            }
            Err(a) => return to_reply(a),
        };
        let interval = match uint_arg(args, "interval_ms", 10) {
            Ok(ms) if u128::from(ms) <= MAX_PROGRESS_INTERVAL.as_millis() => {
                Duration::from_millis(ms)
            }
            Ok(_) => {
                return Reply::invalid_params(format!(
                    "Invalid params: interval_ms must be at most {}",
                    MAX_PROGRESS_INTERVAL.as_millis()
                ))
            }
            Err(a) => return to_reply(a),
        };
        let request = cx.request.request;
        self.later(request, move |server, responder, flag| {
            for i in 1..=steps {
                let message = format!("step {i} of {steps}");
                if responder
                    .progress(request, i as f64, Some(steps as f64), Some(&message))
                    .is_err()
                    || (i < steps && DevApp::pause(server, interval, flag))
                {
                    return None;
                }
            }
            Some(Reply::tool_text(format!("done after {steps} steps")))
        })
    }

    fn fail(&self, cx: &CallContext, args: &Map<String, Value>) -> Reply {
        let answer = fail(args);
        let Some(x) = cx.exchange else {
            return to_reply(answer);
        };
        match answer {
            Answer::Raw(status, body) => {
                self.responder.override_http(
                    x,
                    HttpOverride {
                        status: Some(status),
                        body: Some(("text/plain; charset=utf-8".into(), body.into_bytes())),
                        ..HttpOverride::default()
                    },
                );
                // The core's error is replaced by the raw body on the wire.
                Reply::error(code::INTERNAL_ERROR, "fail: raw_body")
            }
            Answer::Error(status, e) => {
                self.responder.override_http(
                    x,
                    HttpOverride {
                        status: Some(status),
                        ..HttpOverride::default()
                    },
                );
                Reply::Error(e)
            }
            other => to_reply(other),
        }
    }

    fn ask(&self, cx: &CallContext, args: &Map<String, Value>) -> Reply {
        let form = match args.get("form") {
            None | Some(Value::Null) => "name",
            Some(Value::String(f)) if super::ASK_FORMS.contains(&f.as_str()) => f.as_str(),
            Some(_) => {
                return Reply::invalid_params(format!(
                    "Invalid params: form must be one of {}",
                    super::ASK_FORMS.join(", ")
                ))
            }
        };
        let default_question = match form {
            "profile" => "Tell us about yourself.",
            "login" => "Log in to the demo service.",
            "url" => "Authorize the demo service on its page.",
            _ => "What is your name?",
        };
        let question = match args.get("question") {
            None | Some(Value::Null) => default_question.to_owned(),
            Some(Value::String(q)) => q.clone(),
            Some(_) => return Reply::invalid_params("Invalid params: question must be a string"),
        };
        let state = format!("{ASK_STATE_PREFIX}{form}/{}", hex(question.as_bytes()));
        let answer = cx
            .input_response(form)
            .filter(|_| cx.state.as_deref() == Some(state.as_str()));
        if let Some(answer) = answer {
            let action = answer.get("action").and_then(Value::as_str);
            let content = answer.get("content");
            lock(&self.server.stats)
                .elicitation_answers
                .push(super::ElicitationAnswer {
                    form: form.to_owned(),
                    action: action.unwrap_or("(none)").to_owned(),
                    content: content.cloned(),
                });
            match (form, action) {
                ("name", Some("accept")) => {
                    if let Some(name) = content.and_then(|c| c.get("name")).and_then(Value::as_str)
                    {
                        return Reply::Result(json!({
                            "content": [{"type": "text", "text": format!("Hello, {name}!")}],
                            "structuredContent": {"name": name}
                        }));
                    }
                }
                ("name", Some("decline" | "cancel")) => return Reply::tool_text("No name given."),
                ("url", Some("accept")) => {
                    return Reply::tool_text("Consent recorded: finish on the page.")
                }
                (_, Some("accept")) => {
                    if let Some(c) = content.filter(|c| c.is_object()) {
                        return Reply::Result(json!({
                            "content": [{"type": "text", "text": format!("Received {c}")}],
                            "structuredContent": c
                        }));
                    }
                }
                (_, Some(a @ ("decline" | "cancel"))) => {
                    let word = if a == "decline" {
                        "Declined"
                    } else {
                        "Cancelled"
                    };
                    return Reply::tool_text(format!("{word}."));
                }
                // An unusable answer: ask again, as the MRTR rules suggest.
                _ => {}
            }
        }
        let host = cx
            .headers
            .as_ref()
            .and_then(|h| h.get("Host"))
            .unwrap_or("127.0.0.1");
        let params = match ask_request(form, &question, &format!("http://{host}")) {
            Value::Object(p) => p,
            _ => Map::new(),
        };
        Reply::InputRequired {
            inputs: vec![(
                form.to_owned(),
                InputRequest {
                    method: "elicitation/create".into(),
                    params,
                },
            )],
            state: Some(state),
        }
    }

    /// `touch`: announces the change from a thread of its own, so that the core's count of
    /// who was told comes back (from inside this method it would be applied only after it).
    fn touch(&self, cx: &CallContext, args: &Map<String, Value>) -> Reply {
        let list = args.get("list").and_then(Value::as_str);
        let uri = args.get("uri").and_then(Value::as_str).map(str::to_owned);
        let kind = match (list, &uri) {
            (Some("tools"), None) => Some(ListKind::Tools),
            (Some("prompts"), None) => Some(ListKind::Prompts),
            (Some("resources"), None) => Some(ListKind::Resources),
            (None, Some(u)) if catalog::resource_text(u).is_some() => None,
            (None, Some(u)) => {
                return Reply::invalid_params(format!("Invalid params: no resource {u}"))
            }
            _ => {
                return Reply::invalid_params(
                    "Invalid params: touch takes list (tools, prompts or resources) or uri, one of them",
                )
            }
        };
        self.later(cx.request.request, move |_, responder, _| {
            let delivered = match (kind, uri) {
                (Some(kind), _) => responder.list_changed(kind),
                (None, Some(uri)) => responder.resource_updated(&uri),
                (None, None) => 0,
            };
            Some(Reply::Result(json!({
                "content": [{"type": "text", "text": format!("notified {delivered} subscription(s)")}],
                "structuredContent": {"delivered": delivered}
            })))
        })
    }
}

impl Application for DevApp {
    fn list_tools(&mut self, cx: &RequestContext) -> Result<Vec<Tool>, ErrorObject> {
        Ok(self.server.tools(cx.era).to_vec())
    }

    fn tool(&mut self, cx: &RequestContext, name: &str) -> Option<Tool> {
        self.server
            .tools(cx.era)
            .iter()
            .find(|t| t.name == name)
            .cloned()
    }

    fn call_tool(&mut self, cx: &mut CallContext, name: &str, args: &Map<String, Value>) -> Reply {
        let known = self.server.tools(cx.era).iter().any(|t| t.name == name);
        if !known {
            return Reply::invalid_params(format!("Unknown tool: {name}"));
        }
        *lock(&self.server.stats)
            .tool_calls
            .entry(name.to_owned())
            .or_default() += 1;
        match name {
            ADMIN_TOOL => match args.get("text").and_then(Value::as_str) {
                Some(t) => Reply::Result(json!({
                    "content": [{"type": "text", "text": t}],
                    "structuredContent": {"text": t}
                })),
                None => {
                    Reply::invalid_params("Invalid params: admin_echo needs a string argument text")
                }
            },
            "echo" => self.echo(cx, args),
            "slow" => self.slow(cx, args),
            "progress" => self.progress(cx, args),
            "fail" => self.fail(cx, args),
            "tenant" => match args.get("region").and_then(Value::as_str) {
                Some(region) => Reply::Result(json!({
                    "content": [{"type": "text", "text": format!("region={region}")}],
                    "structuredContent": {"region": region}
                })),
                None => {
                    Reply::invalid_params("Invalid params: tenant needs a string argument region")
                }
            },
            "ask" => self.ask(cx, args),
            "touch" => self.touch(cx, args),
            "headers" => {
                let list: Vec<Value> = cx
                    .headers
                    .as_ref()
                    .map(|h| h.iter().map(|(n, v)| json!([n, redact(n, v)])).collect())
                    .unwrap_or_default();
                Reply::Result(json!({
                    "content": [{"type": "text", "text": format!("{} headers", list.len())}],
                    "structuredContent": {"headers": list}
                }))
            }
            _ => Reply::invalid_params(format!("Unknown tool: {name}")),
        }
    }

    fn list_resources(&mut self, cx: &RequestContext) -> Result<Vec<Resource>, ErrorObject> {
        Ok(items(catalog::list_resources(cx.era), "resources"))
    }

    fn list_resource_templates(
        &mut self,
        cx: &RequestContext,
    ) -> Result<Vec<ResourceTemplate>, ErrorObject> {
        Ok(items(catalog::list_templates(cx.era), "resourceTemplates"))
    }

    /// A listen honours the resources this server has (the others are left out of its
    /// acknowledgment, so a client sees what it will not get).
    fn accept_resource_subscriptions(
        &mut self,
        _: &RequestContext,
        uris: &[String],
    ) -> Result<Vec<String>, ErrorObject> {
        Ok(uris
            .iter()
            .filter(|u| catalog::resource_text(u).is_some())
            .cloned()
            .collect())
    }

    fn read_resource(&mut self, cx: &mut CallContext, uri: &str) -> Reply {
        if catalog::resource_text(uri).is_none() {
            return Reply::Error(mcpwire_core::mcp::server::resource_not_found(cx.era, uri));
        }
        to_reply(catalog::read_resource(Era::Legacy, &json!({"uri": uri})))
    }

    fn list_prompts(&mut self, cx: &RequestContext) -> Result<Vec<Prompt>, ErrorObject> {
        Ok(items(catalog::list_prompts(cx.era), "prompts"))
    }

    fn get_prompt(
        &mut self,
        _: &mut CallContext,
        name: &str,
        arguments: &Map<String, Value>,
    ) -> Reply {
        to_reply(catalog::get_prompt(
            &json!({"name": name, "arguments": arguments}),
        ))
    }

    fn cancelled(&mut self, request: RequestId) {
        self.server.work.cancel(request);
    }

    fn session_opened(&mut self, session: &SessionId) {
        let _ = session;
        let mut stats = lock(&self.server.stats);
        stats.sessions_opened += 1;
        drop(stats);
        self.server.core_sessions.fetch_add(1, Ordering::Relaxed);
    }

    fn session_closed(&mut self, session: &SessionId) {
        if session.as_str() != "stdio" {
            lock(&self.server.stats).sessions_ended += 1;
        }
        let _ = self
            .server
            .core_sessions
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
    }
}

fn redact<'v>(name: &str, value: &'v str) -> &'v str {
    if name.eq_ignore_ascii_case("authorization") {
        "<redacted>"
    } else {
        value
    }
}

/// What the dev server does around the core on HTTP.
pub(super) struct Front {
    pub(super) server: Arc<McpServer>,
}

fn text(status: u16, body: &str) -> Option<HookAnswer> {
    let mut headers = Headers::new();
    let _ = headers.append("Content-Type", "text/plain");
    Some(HookAnswer {
        status,
        headers,
        body: body.as_bytes().to_vec(),
    })
}

fn captured(c: Captured) -> Option<HookAnswer> {
    c.0.map(|(status, headers, body)| HookAnswer {
        status,
        headers,
        body,
    })
}

impl HttpHook for Front {
    fn before(&self, req: &mut HttpRequest, query: Option<&str>) -> Option<HookAnswer> {
        let server = &self.server;
        let method = req.method.as_str().to_owned();
        if req.path == ELICIT_URL_PATH && method == "GET" {
            lock(&server.stats).elicit_url_fetches += 1;
            return text(
                200,
                "the ask tool's consent page (a client must never open this by itself)\n",
            );
        }
        if let Some(auth) = &server.auth {
            let dev_req = Request {
                method: method.clone(),
                path: req.path.clone(),
                query: query.unwrap_or_default().to_owned(),
                headers: req.headers.clone(),
                body: req.body.clone(),
            };
            let mut out = Captured::default();
            if auth.handle(&dev_req, &mut out) {
                return captured(out);
            }
        }
        // With authorization the resource is `/mcp` exactly, so `/` is not an alias.
        if req.path == "/" && server.auth.is_none() {
            req.path = "/mcp".to_owned();
        }
        if req.path != "/mcp" {
            return text(404, "not found: the MCP endpoint is /mcp\n");
        }
        let message = std::str::from_utf8(&req.body)
            .ok()
            .and_then(|t| Message::parse(t).ok());
        server.record(
            &method,
            message.as_ref().and_then(Message::method),
            Some(&req.headers),
        );
        if let Some(auth) = &server.auth {
            let granted = auth
                .authenticate(&req.headers)
                .and_then(|g| auth.check_scope(&g, SCOPE_MCP).map(|()| g));
            let refused = match granted {
                Err(refusal) => Some(refusal),
                Ok(granted) => message.as_ref().and_then(|m| {
                    let (method, params) = match m {
                        Message::Request { method, params, .. }
                        | Message::Notification { method, params } => (method, params),
                        _ => return None,
                    };
                    let params: Value = params
                        .as_ref()
                        .and_then(|p| serde_json::from_str(p.get()).ok())
                        .unwrap_or(Value::Null);
                    let needed = auth_server::required_scope(method, &params);
                    auth.check_scope(&granted, needed).err()
                }),
            };
            if let Some(refusal) = refused {
                let mut out = Captured::default();
                auth.refuse(refusal, &mut out);
                return captured(out);
            }
        }
        if method == "POST" && message.is_some() {
            lock(&server.stats).messages += 1;
        }
        None
    }

    fn answered(&self, status: u16, _: &Headers, body: &[u8]) {
        if status != 400 {
            return;
        }
        let mismatch = serde_json::from_slice::<Value>(body)
            .ok()
            .and_then(|v| v.pointer("/error/code").and_then(Value::as_i64))
            == Some(code::HEADER_MISMATCH);
        if mismatch {
            lock(&self.server.stats).header_mismatches += 1;
        }
    }
}

/// stdin as the core's stdio loop reads it, with each line logged and counted as the
/// hand-written loop did.
pub(super) struct LoggedInput<R> {
    pub(super) inner: R,
    pub(super) server: Arc<McpServer>,
    pub(super) partial: Vec<u8>,
}

impl<R: Read> Read for LoggedInput<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        for &b in &buf[..n] {
            if b != b'\n' {
                // Only the start of a line is needed to log it; the rest is the core's.
                if self.partial.len() < super::MAX_STDIO_LINE {
                    self.partial.push(b);
                }
                continue;
            }
            let line = std::mem::take(&mut self.partial);
            let text = String::from_utf8_lossy(&line);
            let text = text.trim();
            if text.is_empty() {
                continue;
            }
            let message = Message::parse(text).ok();
            self.server
                .record("STDIO", message.as_ref().and_then(Message::method), None);
            if message.is_some() {
                lock(&self.server.stats).messages += 1;
            }
        }
        Ok(n)
    }
}

//! `mcpwire-conformance-server --listen 127.0.0.1:PORT`: the server the official MCP conformance
//! runner (`@modelcontextprotocol/conformance`, `server` mode) tests. It serves, over Streamable
//! HTTP on the server core (`mcpwire_core::mcp::server`) and one of the library's drivers, the
//! tools, resources and prompts the server scenarios name, as the SDKs' conformance "everything"
//! servers do. It prints the endpoint's URL on stdout once it listens and serves until SIGINT or
//! SIGTERM.
//!
//! Everything protocol-shaped (both eras on one endpoint, `_meta` and header checks, sessions,
//! SSE, MRTR and its sealed `requestState`, the legacy era's server-to-client requests,
//! pagination, caching hints, `Host`/`Origin` checks) is the core's: this file is only an
//! [`Application`] with the scenarios' fixtures. A tool that asks the client for input answers
//! [`Reply::InputRequired`] the `2026-07-28` way in both eras (the core sends the legacy era's
//! `elicitation/create` or `sampling/createMessage` itself), and reads the answers from
//! `input_responses` on the next round.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use mcpwire::server::{HttpOptions, Responder};
use mcpwire_core::jsonrpc::ErrorObject;
use mcpwire_core::mcp::discover::CacheScopeHint;
use mcpwire_core::mcp::meta::{JsonObject, LoggingLevel};
use mcpwire_core::mcp::server::{
    Application, CacheHint, CallContext, CompleteRequest, Completion, InputRequest, Reply,
    RequestContext, ServerConfig,
};
use mcpwire_core::mcp::{
    Implementation, ListKind, Prompt, PromptArgument, Resource, ResourceTemplate, Tool,
};
use serde_json::{json, Value};

/// A 1x1 red PNG pixel.
const PNG_BASE64: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A minimal WAV file (a header and two bytes of silence).
const WAV_BASE64: &str = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=";
/// How long the tools that report as they go wait between reports.
const STEP: Duration = Duration::from_millis(50);
/// How long cacheable results may be reused (the scenarios check that hints are present).
const TTL_MS: u64 = 300_000;

/// Which driver runs the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Driver {
    /// std threads (`mcpwire::server::blocking`).
    Blocking,
    /// smol and hyper (`mcpwire::server::smol`).
    Smol,
}

/// Serves until SIGINT or SIGTERM; prints the URL on stdout first.
pub fn run(listen: SocketAddr, driver: Driver) -> ExitCode {
    match serve(listen, driver) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mcpwire-conformance-server: {e}");
            ExitCode::FAILURE
        }
    }
}

fn serve(listen: SocketAddr, driver: Driver) -> Result<(), Box<dyn std::error::Error>> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])?;
    let config = config()?;
    let options = HttpOptions::listen(listen);
    match driver {
        Driver::Blocking => {
            let mut server =
                mcpwire::server::blocking::HttpServer::start_with(config, options, Fixtures::new)?;
            announce(server.url());
            signals.forever().next();
            server.stop();
        }
        Driver::Smol => {
            let mut server = smol::block_on(mcpwire::server::smol::HttpServer::start_with(
                config,
                options,
                Fixtures::new,
            ))?;
            announce(server.url());
            signals.forever().next();
            smol::block_on(server.stop());
        }
    }
    Ok(())
}

fn announce(url: &str) {
    use std::io::Write;
    let mut out = std::io::stdout();
    let _ = writeln!(out, "{url}");
    let _ = out.flush();
}

/// The core's configuration: every feature the scenarios exercise advertised, the lists'
/// caching hints public and a read's private (as the reference server has them).
pub fn config() -> Result<ServerConfig, mcpwire::server::ServeError> {
    let mut config =
        mcpwire::server::config(Implementation::new("mcpwire-conformance-server", "1.0.0"))?;
    config.logging = true;
    config.completions = true;
    config.tools = true;
    config.prompts = true;
    config.resources = true;
    let public = CacheHint {
        ttl_ms: TTL_MS,
        scope: CacheScopeHint::Public,
    };
    config.cache.tools = public.clone();
    config.cache.prompts = public.clone();
    config.cache.resources = public.clone();
    config.cache.resource_templates = public;
    config.cache.read = CacheHint {
        ttl_ms: TTL_MS,
        scope: CacheScopeHint::Private,
    };
    Ok(config)
}

/// An application of the trait's defaults only: what the core answers for what the fixtures do
/// not have.
struct CoreDefaults;

impl Application for CoreDefaults {}

/// The fixtures' data: the tools as `tools/list` lists them and the elicitation forms their
/// tools ask for (JSON, parsed when the server starts, rather than code).
const FIXTURES: &str = include_str!("conformance_fixtures.json");

/// The scenarios' tools, resources and prompts.
pub struct Fixtures {
    responder: Responder,
    tools: Vec<Tool>,
    forms: JsonObject,
}

impl Fixtures {
    /// The fixtures, answering later through `responder`.
    pub fn new(responder: Responder) -> Self {
        let (tools, forms) = fixtures();
        Fixtures {
            responder,
            tools,
            forms,
        }
    }

    /// The elicitation form (`requestedSchema`) tool `name` asks for.
    fn form(&self, name: &str) -> Value {
        self.forms
            .get(name)
            .cloned()
            .unwrap_or_else(|| json!({"type": "object"}))
    }
}

/// The tools and forms of [`FIXTURES`] (a test checks they read whole).
fn fixtures() -> (Vec<Tool>, JsonObject) {
    let mut data = match serde_json::from_str::<Value>(FIXTURES) {
        Ok(Value::Object(o)) => o,
        _ => JsonObject::new(),
    };
    let tools = data
        .remove("tools")
        .and_then(|t| serde_json::from_value(t).ok())
        .unwrap_or_default();
    let forms = match data.remove("forms") {
        Some(Value::Object(o)) => o,
        _ => JsonObject::new(),
    };
    (tools, forms)
}

fn object(v: Value) -> JsonObject {
    match v {
        Value::Object(o) => o,
        _ => JsonObject::new(),
    }
}

fn text(text: impl Into<String>) -> Value {
    json!({"type": "text", "text": text.into()})
}

fn image() -> Value {
    json!({"type": "image", "data": PNG_BASE64, "mimeType": "image/png"})
}

fn contents(blocks: Vec<Value>) -> Reply {
    Reply::Result(json!({ "content": blocks }))
}

/// A form elicitation of one string (or boolean) field, required.
fn ask(message: &str, field: &str, kind: &str) -> InputRequest {
    InputRequest::elicit_form(
        message,
        json!({
            "type": "object",
            "properties": {field: {"type": kind}},
            "required": [field],
        }),
    )
}

fn sampling(prompt: &str, max_tokens: u64) -> InputRequest {
    InputRequest::sampling(object(json!({
        "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
        "maxTokens": max_tokens,
    })))
}

/// `content.{field}` of an accepted elicitation's answer, as text.
fn answered(cx: &RequestContext, key: &str, field: &str) -> Option<String> {
    let content = cx.input_response(key)?.get("content")?;
    Some(match content.get(field)? {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    })
}

/// The text of a sampling answer (`content.text`, or its first block's).
fn sampled(cx: &RequestContext, key: &str) -> Option<String> {
    let content = cx.input_response(key)?.get("content")?;
    let content = match content {
        Value::Array(blocks) => blocks.first()?,
        one => one,
    };
    content.get("text")?.as_str().map(str::to_owned)
}

/// How an elicitation was answered: `action=..., content={...}`.
fn elicitation_outcome(cx: &RequestContext, key: &str) -> Option<String> {
    let answer = cx.input_response(key)?;
    let action = answer.get("action").and_then(Value::as_str).unwrap_or("");
    let content = answer.get("content").cloned().unwrap_or_else(|| json!({}));
    Some(format!("action={action}, content={content}"))
}

fn roots_count(cx: &RequestContext, key: &str) -> Option<usize> {
    Some(
        cx.input_response(key)?
            .get("roots")
            .and_then(Value::as_array)
            .map_or(0, Vec::len),
    )
}

fn input_required(inputs: Vec<(&str, InputRequest)>, state: Option<String>) -> Reply {
    Reply::InputRequired {
        inputs: inputs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
        state,
    }
}

impl Fixtures {
    /// Reports on another thread (the tool answers `Pending`): three progress notifications
    /// (0, 50 and 100 of 100), each after a pause, then the result.
    fn progress_later(&self, cx: &CallContext) -> Reply {
        let request = cx.request.request;
        let token = match &cx.progress_token {
            Some(t) => serde_json::to_value(t).unwrap_or(Value::Null),
            None => Value::Null,
        };
        let responder = self.responder.clone();
        std::thread::spawn(move || {
            for step in [0.0, 50.0, 100.0] {
                // A request without a progressToken has no progress to send; the pauses stay.
                let _ = responder.progress(
                    request,
                    step,
                    Some(100.0),
                    Some(&format!("Completed step {step} of 100")),
                );
                std::thread::sleep(STEP);
            }
            let shown = match token {
                Value::String(s) => s,
                Value::Null => "no progress token".to_owned(),
                other => other.to_string(),
            };
            let _ = responder.respond(request, contents(vec![text(shown)]));
        });
        Reply::Pending
    }

    /// Logs three info messages on another thread, each after a pause, then answers.
    fn log_later(&self, cx: &CallContext) -> Reply {
        let request = cx.request.request;
        let responder = self.responder.clone();
        std::thread::spawn(move || {
            for message in [
                "Tool execution started",
                "Tool processing data",
                "Tool execution completed",
            ] {
                let _ = responder.log(
                    Some(request),
                    LoggingLevel::Info,
                    Some("conformance-server"),
                    json!(message),
                );
                std::thread::sleep(STEP);
            }
            let _ = responder.respond(
                request,
                contents(vec![text("Tool with logging executed successfully")]),
            );
        });
        Reply::Pending
    }

    /// Closes the request's SSE stream, then answers after a pause (SEP-1699): the client gets
    /// the result when it reconnects with `Last-Event-ID`.
    fn reconnect_later(&self, cx: &mut CallContext) -> Reply {
        cx.close_stream();
        let request = cx.request.request;
        let responder = self.responder.clone();
        std::thread::spawn(move || {
            std::thread::sleep(STEP * 2);
            let _ = responder.respond(
                request,
                contents(vec![text(
                    "Reconnection test completed successfully. If you received this, the client properly reconnected after stream closure.",
                )]),
            );
        });
        Reply::Pending
    }

    fn multi_round(cx: &RequestContext) -> Reply {
        let step1 = || {
            input_required(
                vec![("step1", ask("Step 1: What is your name?", "name", "string"))],
                Some("round-1".to_owned()),
            )
        };
        match cx.state.as_deref() {
            Some("round-1") => match answered(cx, "step1", "name") {
                Some(name) => input_required(
                    vec![(
                        "step2",
                        ask("Step 2: What is your favorite color?", "color", "string"),
                    )],
                    Some(format!("round-2:{name}")),
                ),
                None => step1(),
            },
            Some(state) if state.starts_with("round-2:") => {
                let name = &state["round-2:".len()..];
                match answered(cx, "step2", "color") {
                    Some(color) => contents(vec![text(format!(
                        "Multi-round complete for {name} who likes {color}"
                    ))]),
                    None => input_required(
                        vec![(
                            "step2",
                            ask("Step 2: What is your favorite color?", "color", "string"),
                        )],
                        Some(state.to_owned()),
                    ),
                }
            }
            _ => step1(),
        }
    }

    fn multiple_inputs(cx: &RequestContext) -> Reply {
        if cx.state.as_deref() == Some("multiple-inputs") {
            if let (Some(name), Some(roots)) = (
                answered(cx, "user_name", "name"),
                roots_count(cx, "client_roots"),
            ) {
                if cx.input_response("greeting").is_some() {
                    let greeting =
                        sampled(cx, "greeting").unwrap_or_else(|| "Hello there!".to_owned());
                    return contents(vec![text(format!(
                        "Name: {name}; Greeting: {greeting}; Roots: {roots}"
                    ))]);
                }
            }
        }
        input_required(
            vec![
                ("user_name", ask("What is your name?", "name", "string")),
                ("greeting", sampling("Generate a greeting", 50)),
                ("client_roots", InputRequest::roots()),
            ],
            Some("multiple-inputs".to_owned()),
        )
    }

    /// Asks for what the client declared it can give (elicitation, sampling), nothing else.
    fn by_capabilities(cx: &RequestContext) -> Reply {
        if let Some(responses) = &cx.input_responses {
            if !responses.is_empty() {
                let keys: Vec<&str> = responses.keys().map(String::as_str).collect();
                return contents(vec![text(format!(
                    "capabilities-ok: received {}",
                    keys.join(",")
                ))]);
            }
        }
        let caps = &cx.client_capabilities;
        let mut inputs = Vec::new();
        if caps.elicitation.is_some() {
            inputs.push(("elicit_input", ask("Elicitation input", "value", "string")));
        }
        if caps.sampling.is_some() {
            inputs.push(("sample_input", sampling("Sample request", 50)));
        }
        if inputs.is_empty() {
            return contents(vec![text("No supported capabilities declared")]);
        }
        input_required(inputs, Some("capabilities-test".to_owned()))
    }
}

impl Application for Fixtures {
    fn list_tools(&mut self, _: &RequestContext) -> Result<Vec<Tool>, ErrorObject> {
        Ok(self.tools.clone())
    }

    fn call_tool(&mut self, cx: &mut CallContext, name: &str, arguments: &JsonObject) -> Reply {
        let arg = |key: &str| {
            arguments
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned()
        };
        match name {
            "test_simple_text" => {
                contents(vec![text("This is a simple text response for testing.")])
            }
            "test_image_content" => contents(vec![image()]),
            "test_audio_content" => contents(vec![
                json!({"type": "audio", "data": WAV_BASE64, "mimeType": "audio/wav"}),
            ]),
            "test_embedded_resource" => contents(vec![json!({
                "type": "resource",
                "resource": {
                    "uri": "test://embedded-resource",
                    "mimeType": "text/plain",
                    "text": "This is an embedded resource content."
                }
            })]),
            "test_multiple_content_types" => contents(vec![
                text("Multiple content types test:"),
                image(),
                json!({
                    "type": "resource",
                    "resource": {
                        "uri": "test://mixed-content-resource",
                        "mimeType": "application/json",
                        "text": json!({"test": "data", "value": 123}).to_string()
                    }
                }),
            ]),
            "test_tool_with_logging" => self.log_later(cx),
            "test_tool_with_progress" => self.progress_later(cx),
            "test_error_handling" => {
                Reply::tool_error("This tool intentionally returns an error for testing")
            }
            "test_reconnection" => self.reconnect_later(cx),
            "test_sampling" => match sampled(cx, "llm") {
                Some(answer) => contents(vec![text(format!("LLM response: {answer}"))]),
                None => input_required(vec![("llm", sampling(&arg("prompt"), 100))], None),
            },
            "test_elicitation" => match elicitation_outcome(cx, "user") {
                Some(outcome) => contents(vec![text(format!("User response: {outcome}"))]),
                None => input_required(
                    vec![(
                        "user",
                        InputRequest::elicit_form(arg("message"), self.form("test_elicitation")),
                    )],
                    None,
                ),
            },
            "test_elicitation_sep1034_defaults" => match elicitation_outcome(cx, "form") {
                Some(outcome) => contents(vec![text(format!("Elicitation completed: {outcome}"))]),
                None => input_required(
                    vec![(
                        "form",
                        InputRequest::elicit_form(
                            "Please review and update the form fields with defaults",
                            self.form("test_elicitation_sep1034_defaults"),
                        ),
                    )],
                    None,
                ),
            },
            "test_elicitation_sep1330_enums" => match elicitation_outcome(cx, "form") {
                Some(outcome) => contents(vec![text(format!("Elicitation completed: {outcome}"))]),
                None => input_required(
                    vec![(
                        "form",
                        InputRequest::elicit_form(
                            "Please select options from the enum fields",
                            self.form("test_elicitation_sep1330_enums"),
                        ),
                    )],
                    None,
                ),
            },
            "json_schema_2020_12_tool" => contents(vec![text(format!(
                "JSON Schema 2020-12 tool called with: {}",
                Value::Object(arguments.clone())
            ))]),
            // The core refuses a sampling input the client did not declare (-32021); a client
            // that can sample gets its answer used.
            "test_missing_capability" => match sampled(cx, "sample") {
                Some(_) => contents(vec![text("Success")]),
                None => input_required(vec![("sample", sampling("Say hello", 20))], None),
            },
            "test_input_required_result_elicitation" => match answered(cx, "user_name", "name") {
                Some(name) => contents(vec![text(format!("Hello, {name}!"))]),
                None => input_required(
                    vec![("user_name", ask("What is your name?", "name", "string"))],
                    None,
                ),
            },
            "test_input_required_result_sampling" => match sampled(cx, "capital_question") {
                Some(answer) => contents(vec![text(format!("Sampling result: {answer}"))]),
                None => input_required(
                    vec![(
                        "capital_question",
                        sampling("What is the capital of France?", 100),
                    )],
                    None,
                ),
            },
            "test_input_required_result_list_roots" => match roots_count(cx, "client_roots") {
                Some(n) => contents(vec![text(format!("Found {n} root(s)"))]),
                None => input_required(vec![("client_roots", InputRequest::roots())], None),
            },
            "test_input_required_result_request_state" => {
                let confirmed = cx
                    .input_response("confirm")
                    .and_then(|a| a.get("content")?.get("ok")?.as_bool());
                if cx.state.as_deref() == Some("request-state") && confirmed == Some(true) {
                    contents(vec![text("state-ok: requestState validated")])
                } else {
                    input_required(
                        vec![("confirm", ask("Please confirm", "ok", "boolean"))],
                        Some("request-state".to_owned()),
                    )
                }
            }
            "test_input_required_result_multiple_inputs" => Self::multiple_inputs(cx),
            "test_input_required_result_multi_round" => Self::multi_round(cx),
            // The core verifies the sealed state before this runs: a tampered one never
            // reaches here.
            "test_input_required_result_tampered_state" => {
                if cx.state.as_deref() == Some("tamper-test")
                    && cx.input_response("confirm").is_some()
                {
                    contents(vec![text("integrity-ok: state verified")])
                } else {
                    input_required(
                        vec![("confirm", ask("Please confirm", "ok", "boolean"))],
                        Some("tamper-test".to_owned()),
                    )
                }
            }
            "test_input_required_result_capabilities" => Self::by_capabilities(cx),
            "test_streaming_elicitation" => {
                cx.progress(50.0, Some(100.0), Some("halfway"));
                contents(vec![text("Streaming complete")])
            }
            "test_logging_tool" => {
                // Sent only if the request asked for a level (the core filters).
                cx.log(
                    LoggingLevel::Info,
                    Some("conformance-server"),
                    json!("Diagnostic trace logging activated"),
                );
                contents(vec![text("Logging evaluated")])
            }
            // The core checked the Mcp-Param-* headers against the body before this runs.
            "test_custom_headers" => contents(vec![text(format!("region={}", arg("region")))]),
            "test_trigger_tool_change" => {
                self.responder.list_changed(ListKind::Tools);
                contents(vec![text("Mutation triggered")])
            }
            "test_trigger_prompt_change" => {
                self.responder.list_changed(ListKind::Prompts);
                contents(vec![text("Mutation triggered")])
            }
            other => Reply::invalid_params(format!("Unknown tool: {other}")),
        }
    }

    fn list_resources(&mut self, _: &RequestContext) -> Result<Vec<Resource>, ErrorObject> {
        let resource =
            |uri: &str, name: &str, title: &str, description: &str, mime: &str| Resource {
                uri: uri.into(),
                name: name.into(),
                title: Some(title.into()),
                description: Some(description.into()),
                mime_type: Some(mime.into()),
                ..Resource::default()
            };
        Ok(vec![
            resource(
                "test://static-text",
                "static-text",
                "Static Text Resource",
                "A static text resource for testing",
                "text/plain",
            ),
            resource(
                "test://static-binary",
                "static-binary",
                "Static Binary Resource",
                "A static binary resource (image) for testing",
                "image/png",
            ),
            resource(
                "test://watched-resource",
                "watched-resource",
                "Watched Resource",
                "A resource clients may subscribe to",
                "text/plain",
            ),
        ])
    }

    fn list_resource_templates(
        &mut self,
        _: &RequestContext,
    ) -> Result<Vec<ResourceTemplate>, ErrorObject> {
        Ok(vec![ResourceTemplate {
            uri_template: "test://template/{id}/data".into(),
            name: "template".into(),
            title: Some("Resource Template".into()),
            description: Some("A resource template with parameter substitution".into()),
            mime_type: Some("application/json".into()),
            ..ResourceTemplate::default()
        }])
    }

    fn read_resource(&mut self, cx: &mut CallContext, uri: &str) -> Reply {
        let one = |mime: &str, body: (&str, Value)| {
            let mut content = json!({"uri": uri, "mimeType": mime});
            content[body.0] = body.1;
            Reply::Result(json!({ "contents": [content] }))
        };
        match uri {
            "test://static-text" => one(
                "text/plain",
                (
                    "text",
                    json!("This is the content of the static text resource."),
                ),
            ),
            "test://static-binary" => one("image/png", ("blob", json!(PNG_BASE64))),
            "test://watched-resource" => one("text/plain", ("text", json!("Watched resource content"))),
            _ => match uri
                .strip_prefix("test://template/")
                .and_then(|rest| rest.strip_suffix("/data"))
                .filter(|id| !id.is_empty() && !id.contains('/'))
            {
                Some(id) => one(
                    "application/json",
                    (
                        "text",
                        json!(json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")})
                            .to_string()),
                    ),
                ),
                // The core's own answer to an unknown resource (its code differs by era).
                None => CoreDefaults.read_resource(cx, uri),
            },
        }
    }

    fn list_prompts(&mut self, _: &RequestContext) -> Result<Vec<Prompt>, ErrorObject> {
        let prompt = |name: &str, title: &str, description: &str, args: &[(&str, &str)]| Prompt {
            name: name.into(),
            title: Some(title.into()),
            description: Some(description.into()),
            arguments: args
                .iter()
                .map(|(n, d)| PromptArgument {
                    name: (*n).into(),
                    description: Some((*d).into()),
                    required: true,
                    ..PromptArgument::default()
                })
                .collect(),
            ..Prompt::default()
        };
        Ok(vec![
            prompt(
                "test_simple_prompt",
                "Simple Test Prompt",
                "A simple prompt without arguments",
                &[],
            ),
            prompt(
                "test_prompt_with_arguments",
                "Prompt With Arguments",
                "A prompt with required arguments",
                &[
                    ("arg1", "First test argument"),
                    ("arg2", "Second test argument"),
                ],
            ),
            prompt(
                "test_prompt_with_embedded_resource",
                "Prompt With Embedded Resource",
                "A prompt that includes an embedded resource",
                &[("resourceUri", "URI of the resource to embed")],
            ),
            prompt(
                "test_prompt_with_image",
                "Prompt With Image",
                "A prompt that includes image content",
                &[],
            ),
            prompt(
                "test_input_required_result_prompt",
                "Prompt Needing Context",
                "MRTR: a prompt that asks for context by elicitation",
                &[],
            ),
        ])
    }

    fn get_prompt(&mut self, cx: &mut CallContext, name: &str, arguments: &JsonObject) -> Reply {
        let arg = |key: &str| arguments.get(key).and_then(Value::as_str).unwrap_or("");
        let user = |content: Value| json!({"role": "user", "content": content});
        let messages = |m: Vec<Value>| Reply::Result(json!({ "messages": m }));
        match name {
            "test_simple_prompt" => {
                messages(vec![user(text("This is a simple prompt for testing."))])
            }
            "test_prompt_with_arguments" => messages(vec![user(text(format!(
                "Prompt with arguments: arg1='{}', arg2='{}'",
                arg("arg1"),
                arg("arg2")
            )))]),
            "test_prompt_with_embedded_resource" => messages(vec![
                user(json!({
                    "type": "resource",
                    "resource": {
                        "uri": arg("resourceUri"),
                        "mimeType": "text/plain",
                        "text": "Embedded resource content for testing."
                    }
                })),
                user(text("Please process the embedded resource above.")),
            ]),
            "test_prompt_with_image" => messages(vec![
                user(image()),
                user(text("Please analyze the image above.")),
            ]),
            "test_input_required_result_prompt" => match answered(cx, "user_context", "context") {
                Some(context) => {
                    messages(vec![user(text(format!("Prompt with context: {context}")))])
                }
                None => input_required(
                    vec![(
                        "user_context",
                        ask("What context should the prompt use?", "context", "string"),
                    )],
                    None,
                ),
            },
            other => Reply::invalid_params(format!("Unknown prompt: {other}")),
        }
    }

    fn complete(
        &mut self,
        _: &RequestContext,
        _: &CompleteRequest,
    ) -> Result<Completion, ErrorObject> {
        Ok(Completion {
            values: Vec::new(),
            total: Some(0),
            has_more: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fixture_data_reads_whole() {
        let (tools, forms) = fixtures();
        assert_eq!(tools.len(), 28);
        assert!(tools.iter().all(
            |t| t.description.is_some() && t.input_schema.get("type") == Some(&json!("object"))
        ));
        let schema = &tools
            .iter()
            .find(|t| t.name == "json_schema_2020_12_tool")
            .map(|t| Value::Object(t.input_schema.clone()));
        assert_eq!(
            schema
                .as_ref()
                .and_then(|s| s.pointer("/$defs/address/$anchor")),
            Some(&json!("addressDef"))
        );
        for name in [
            "test_elicitation",
            "test_elicitation_sep1034_defaults",
            "test_elicitation_sep1330_enums",
        ] {
            assert!(forms.get(name).is_some_and(Value::is_object), "{name}");
        }
    }
}

//! `mcpwire conformance-client URL`: the client the official MCP conformance runner
//! (`@modelcontextprotocol/conformance`) starts for each client scenario.
//!
//! The runner starts a test server, then runs `--command` with the server's URL appended and the
//! scenario in the environment: `MCP_CONFORMANCE_SCENARIO` (its name) and, for some scenarios,
//! `MCP_CONFORMANCE_CONTEXT` (JSON test data, such as the tool calls to make). The server then
//! checks what the client sent.
//!
//! Everything here goes through the public library API a user would call: the blocking
//! [`McpClient`], [`ClientOptions`] and a [`Host`]. No scenario gets a protocol path of its own;
//! a scenario only picks which ordinary operations to run ([`Plan`]):
//!
//! - most scenarios: learn the server (era detection), list its tools and call each one, with
//!   arguments made from its input schema;
//! - `http-custom-headers`: call the tools the context names, with the context's arguments;
//! - `http-standard-headers`: also list and read every resource, list and get every prompt;
//! - `json-schema-ref-no-deref`, `request-metadata`: list the tools only (the scenario's server
//!   serves nothing else);
//! - `json-schema-2020-12-preservation`: send one tool's listed input schema back to an echo
//!   tool (the scenario checks that no keyword was lost on the way through the client).
//!
//! Authorization (the `auth/*` scenarios) is the library's: [`ClientOptions::authorization`]
//! with the suite's conventions: its servers are `http://localhost` (development mode), its
//! authorization servers approve at once with a redirect ([`FollowRedirect`] reads it), its
//! Client ID Metadata Document URL is the fixed [`CIMD_URL`], pre-registered credentials come
//! in the context (`client_id`, `client_secret`, `issuer`), and the 2025-03-26 discovery
//! fallbacks are on only when the runner says the wire is 2025-03-26.
//!
//! The host accepts every form elicitation with the schema's defaults (SEP-1034, what a person
//! who submits the form as shown would send) and declines URL elicitations, sampling and roots.
//! Each step is logged on stderr; the exit status is 0 when every step succeeded.

use std::process::ExitCode;
use std::sync::Arc;

use mcpwire_core::mcp::{
    ClientCapabilities, ElicitAnswer, ElicitationRequest, Event, Implementation, InputAnswer,
    InputRequest, InputRequestEvent, OpId, ProtocolChoice,
};
use serde_json::{Map, Value};

use mcpwire::mcp::blocking::McpClient;
use mcpwire_core::auth::{AssertionKey, ClientCredentials, ClientCredentialsAuth};

use mcpwire::mcp::{
    Authorization, ClientOptions, Error, FollowRedirect, FromResult, Host, MemoryStore,
    PreRegistered, Secret,
};

/// The environment variable naming the scenario.
pub const SCENARIO_VAR: &str = "MCP_CONFORMANCE_SCENARIO";
/// The environment variable holding the scenario's JSON context.
pub const CONTEXT_VAR: &str = "MCP_CONFORMANCE_CONTEXT";

/// The environment variable with the wire revision the scenario runs at.
pub const PROTOCOL_VAR: &str = "MCP_CONFORMANCE_PROTOCOL_VERSION";
/// The Client ID Metadata Document URL the suite's authorization servers expect
/// (`CIMD_CLIENT_METADATA_URL` in the suite; nothing is served there).
pub const CIMD_URL: &str = "https://conformance-test.local/client-metadata.json";

/// One tool call: the tool's name and its arguments.
pub type ToolCall = (String, Map<String, Value>);

/// What the client does for a scenario.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    /// List the tools only.
    ListTools,
    /// List the tools and call each one with arguments made from its input schema.
    CallEveryTool,
    /// List the tools, then make these calls (name, arguments).
    CallTools(Vec<ToolCall>),
    /// Call every tool, read every resource, get every prompt.
    Everything,
    /// Call the tool `echo` with `{"schema": <the inputSchema of tool `of` as listed>}`: the
    /// scenario checks that the schema comes back with every keyword it listed.
    EchoSchema {
        /// The tool whose schema is sent.
        of: String,
        /// The tool that echoes it.
        echo: String,
    },
}

impl Plan {
    /// The plan for `scenario`, with its context (`MCP_CONFORMANCE_CONTEXT`, parsed).
    pub fn for_scenario(scenario: &str, context: Option<&Value>) -> Result<Plan, String> {
        if let Some(calls) = context.and_then(|c| c.get("toolCalls")) {
            return tool_calls(calls).map(Plan::CallTools);
        }
        Ok(match scenario {
            "json-schema-ref-no-deref" | "request-metadata" => Plan::ListTools,
            "http-standard-headers" => Plan::Everything,
            "json-schema-2020-12-preservation" => Plan::EchoSchema {
                of: "json_schema_2020_12_tool".to_owned(),
                echo: "json_schema_echo".to_owned(),
            },
            _ => Plan::CallEveryTool,
        })
    }
}

/// The context's `toolCalls`: `[{"name": ..., "arguments": {...}}, ...]`.
fn tool_calls(calls: &Value) -> Result<Vec<ToolCall>, String> {
    let list = calls
        .as_array()
        .ok_or("the context's toolCalls is not an array")?;
    list.iter()
        .map(|call| {
            let name = call
                .get("name")
                .and_then(Value::as_str)
                .ok_or("a toolCalls entry has no string name")?;
            let arguments = match call.get("arguments") {
                None | Some(Value::Null) => Map::new(),
                Some(Value::Object(m)) => m.clone(),
                Some(_) => {
                    return Err(format!(
                        "the arguments of toolCalls {name:?} are not an object"
                    ))
                }
            };
            Ok((name.to_owned(), arguments))
        })
        .collect()
}

/// Arguments for a tool from its `inputSchema`: a value for every required property, by type
/// (its `default` when it has one). Optional properties are left out.
pub fn arguments_for(tool: &Value) -> Map<String, Value> {
    let schema = tool.get("inputSchema");
    let properties = schema.and_then(|s| s.get("properties"));
    let required = schema
        .and_then(|s| s.get("required"))
        .and_then(Value::as_array);
    let mut out = Map::new();
    let Some(required) = required else {
        return out;
    };
    for (i, name) in required.iter().filter_map(Value::as_str).enumerate() {
        let prop = properties.and_then(|p| p.get(name));
        if let Some(default) = prop.and_then(|p| p.get("default")) {
            out.insert(name.to_owned(), default.clone());
            continue;
        }
        let ty = prop.and_then(|p| p.get("type")).and_then(Value::as_str);
        let value = match ty {
            Some("number" | "integer") => Value::from(i + 1),
            Some("boolean") => Value::Bool(true),
            Some("object") => Value::Object(Map::new()),
            Some("array") => Value::Array(Vec::new()),
            Some("null") => Value::Null,
            _ => Value::String(format!("value-{}", i + 1)),
        };
        out.insert(name.to_owned(), value);
    }
    out
}

/// The host of the conformance client: form elicitations are accepted with the schema's
/// defaults, everything else is declined.
#[derive(Debug, Default)]
pub struct ConformanceHost;

impl Host for ConformanceHost {
    fn on_input_request(&mut self, _op: OpId, request: &InputRequestEvent) -> InputAnswer {
        let answer = match &request.request {
            InputRequest::Elicitation(ElicitationRequest::Form(form)) => {
                let content = form.schema.with_defaults(Map::new());
                eprintln!(
                    "conformance-client: input request {:?}: accepting the form with its defaults ({} field(s))",
                    request.key,
                    content.len()
                );
                ElicitAnswer::Accept(content)
            }
            _ => {
                eprintln!(
                    "conformance-client: input request {:?}: declined",
                    request.key
                );
                ElicitAnswer::Decline
            }
        };
        InputAnswer::Elicitation(answer)
    }

    fn on_event(&mut self, event: &Event) {
        eprintln!("conformance-client: event {event:?}");
    }
}

/// Runs the scenario named in the environment against `url`.
pub fn run(url: &str) -> ExitCode {
    let scenario = std::env::var(SCENARIO_VAR).unwrap_or_default();
    let context = match std::env::var(CONTEXT_VAR) {
        Ok(text) => match serde_json::from_str::<Value>(&text) {
            Ok(v) => Some(v),
            Err(e) => {
                eprintln!("conformance-client: {CONTEXT_VAR} is not JSON: {e}");
                return ExitCode::FAILURE;
            }
        },
        Err(_) => None,
    };
    let plan = match Plan::for_scenario(&scenario, context.as_ref()) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("conformance-client: scenario {scenario:?}: {e}");
            return ExitCode::FAILURE;
        }
    };
    eprintln!("conformance-client: scenario {scenario:?} against {url}: {plan:?}");
    match run_plan(url, &plan, context.as_ref()) {
        Ok(()) => {
            eprintln!("conformance-client: done");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("conformance-client: {e}");
            ExitCode::FAILURE
        }
    }
}

fn options(context: Option<&Value>) -> ClientOptions {
    let mut options = ClientOptions::default()
        .with_protocol(ProtocolChoice::Auto)
        .with_capabilities(ClientCapabilities::none().with_elicitation_form())
        .with_authorization(authorization(
            &std::env::var(SCENARIO_VAR).unwrap_or_default(),
            context,
            std::env::var(PROTOCOL_VAR).ok().as_deref(),
        ));
    options.client_info = Implementation::new("mcpwire-conformance", env!("CARGO_PKG_VERSION"));
    options
}

/// Authorization as the suite runs it (see the module docs): the client-credentials
/// extension's scenarios (`auth/client-credentials-*`) give a machine client's id with a
/// secret or a private key, pre-registration gives a client id and secret for an issuer.
pub fn authorization(
    scenario: &str,
    context: Option<&Value>,
    protocol: Option<&str>,
) -> Authorization {
    let mut auth = Authorization::new(Arc::new(FollowRedirect), Arc::new(MemoryStore::default()));
    auth.allow_http_loopback = true;
    auth.client.client_name = "mcpwire-conformance".to_owned();
    auth.client.metadata_document_url = Some(CIMD_URL.to_owned());
    let text = |k: &str| context.and_then(|c| c.get(k)).and_then(Value::as_str);
    let machine = scenario.starts_with("auth/client-credentials");
    if let (true, Some(client_id)) = (machine, text("client_id")) {
        let credentials = match (text("private_key_pem"), text("client_secret")) {
            (Some(pem), _) => {
                let algorithm = text("signing_algorithm").unwrap_or("ES256");
                match AssertionKey::new(Secret::from(pem), algorithm) {
                    Ok(key) => Some(ClientCredentialsAuth::PrivateKeyJwt(key)),
                    Err(e) => {
                        eprintln!("conformance-client: the context's private key: {e}");
                        None
                    }
                }
            }
            (None, Some(secret)) => Some(ClientCredentialsAuth::Secret(Secret::from(secret))),
            (None, None) => None,
        };
        auth.client.client_credentials = credentials.map(|auth| ClientCredentials {
            client_id: client_id.to_owned(),
            auth,
        });
    } else if let Some(client_id) = text("client_id") {
        auth.client.pre_registered = Some(PreRegistered {
            client_id: client_id.to_owned(),
            client_secret: text("client_secret").map(Secret::from),
            issuer: text("issuer").map(str::to_owned),
        });
    }
    auth.legacy_discovery = protocol == Some("2025-03-26");
    auth
}

fn run_plan(url: &str, plan: &Plan, context: Option<&Value>) -> Result<(), String> {
    let client = McpClient::connect_http(url, options(context)).map_err(|e| e.to_string())?;
    client.set_host(Box::new(ConformanceHost));
    let discovered = step("discover", client.discover().map(|d| d.to_value()))?;
    if let Some(era) = client.era() {
        eprintln!(
            "conformance-client: era {:?}, version {}",
            era.era,
            era.protocol_version.as_deref().unwrap_or("?")
        );
    }
    let tools = items(step("tools/list", raw(client.list_all_tools()))?, "tools");
    match plan {
        Plan::ListTools => {}
        Plan::CallEveryTool => call_every_tool(&client, &tools)?,
        Plan::EchoSchema { of, echo } => {
            let schema = tools
                .iter()
                .find(|t| t.get("name").and_then(Value::as_str) == Some(of.as_str()))
                .and_then(|t| t.get("inputSchema"))
                .ok_or_else(|| format!("the server lists no tool {of:?} with an inputSchema"))?;
            let mut arguments = Map::new();
            arguments.insert("schema".to_owned(), schema.clone());
            step(
                &format!("tools/call {echo}"),
                raw(client.call_tool(echo, Value::Object(arguments))),
            )?;
        }
        Plan::CallTools(calls) => {
            for (name, arguments) in calls {
                step(
                    &format!("tools/call {name}"),
                    raw(client.call_tool(name, Value::Object(arguments.clone()))),
                )?;
            }
        }
        Plan::Everything => {
            call_every_tool(&client, &tools)?;
            let caps = capabilities(&discovered);
            if caps.is_some_and(|c| c.get("resources").is_some()) {
                let resources = items(
                    step("resources/list", raw(client.list_all_resources()))?,
                    "resources",
                );
                for uri in resources
                    .iter()
                    .filter_map(|r| r.get("uri").and_then(Value::as_str))
                {
                    step(
                        &format!("resources/read {uri}"),
                        raw(client.read_resource(uri)),
                    )?;
                }
            }
            if caps.is_some_and(|c| c.get("prompts").is_some()) {
                let prompts = items(
                    step("prompts/list", raw(client.list_all_prompts()))?,
                    "prompts",
                );
                for name in prompts
                    .iter()
                    .filter_map(|p| p.get("name").and_then(Value::as_str))
                {
                    step(
                        &format!("prompts/get {name}"),
                        raw(client.get_prompt(name, Value::Object(Map::new()))),
                    )?;
                }
            }
        }
    }
    client.close();
    Ok(())
}

/// The server's capabilities, from a `server/discover` or `initialize` result.
fn capabilities(discovered: &Value) -> Option<&Map<String, Value>> {
    discovered.get("capabilities").and_then(Value::as_object)
}

fn call_every_tool(client: &McpClient, tools: &[Value]) -> Result<(), String> {
    for tool in tools {
        let Some(name) = tool.get("name").and_then(Value::as_str) else {
            continue;
        };
        let arguments = arguments_for(tool);
        step(
            &format!("tools/call {name}"),
            raw(client.call_tool(name, Value::Object(arguments))),
        )?;
    }
    Ok(())
}

/// The `member` items of a list result (every page, joined by the client's `list_all_*`).
fn items(result: Value, member: &str) -> Vec<Value> {
    match result {
        Value::Object(mut m) => match m.remove(member) {
            Some(Value::Array(items)) => items,
            _ => Vec::new(),
        },
        _ => Vec::new(),
    }
}

/// A typed result as the JSON the server sent.
fn raw<T: FromResult>(result: Result<T, Error>) -> Result<Value, Error> {
    result.map(|r| r.raw().clone())
}

/// Logs one step's outcome; an error names the step.
fn step(what: &str, outcome: Result<Value, Error>) -> Result<Value, String> {
    match outcome {
        Ok(v) => {
            let text = v.to_string();
            let shown: String = text.chars().take(300).collect();
            eprintln!("conformance-client: {what}: ok {shown}");
            Ok(v)
        }
        Err(e) => Err(format!("{what}: {e}")),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn context_tool_calls_decide_the_plan() {
        let ctx = json!({"name": "x", "toolCalls": [{"name": "t", "arguments": {"a": 1}}]});
        let plan = Plan::for_scenario("http-custom-headers", Some(&ctx)).unwrap();
        let mut args = Map::new();
        args.insert("a".into(), json!(1));
        assert_eq!(plan, Plan::CallTools(vec![("t".into(), args)]));
        let bad = json!({"toolCalls": [{"arguments": {}}]});
        assert!(Plan::for_scenario("x", Some(&bad)).is_err());
    }

    #[test]
    fn list_only_scenarios_call_nothing() {
        assert_eq!(
            Plan::for_scenario("json-schema-ref-no-deref", None).unwrap(),
            Plan::ListTools
        );
        assert_eq!(
            Plan::for_scenario("tools_call", None).unwrap(),
            Plan::CallEveryTool
        );
    }

    #[test]
    fn arguments_cover_required_properties_by_type() {
        let tool = json!({"name": "add", "inputSchema": {"type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "integer"},
                           "s": {"type": "string"}, "d": {"type": "string", "default": "x"},
                           "opt": {"type": "string"}},
            "required": ["a", "b", "s", "d"]}});
        let args = arguments_for(&tool);
        assert!(args["a"].is_number() && args["b"].is_number());
        assert!(args["s"].is_string());
        assert_eq!(args["d"], json!("x"));
        assert!(!args.contains_key("opt"));
        assert!(arguments_for(&json!({"name": "n"})).is_empty());
    }
}

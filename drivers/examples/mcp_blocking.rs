//! The blocking MCP client as a library: connect, discover, list the tools, call `echo`, call
//! `ask` (which asks the host for a name through an elicitation), print the results, close.
//!
//! ```text
//! cargo run -p mcpwire-drivers --example mcp_blocking # its own reference server
//! cargo run -p mcpwire-drivers --example mcp_blocking -- http://127.0.0.1:8931/mcp
//! ```
//!
//! With no URL it starts mcpwire's reference MCP server on a free loopback port for the run.
//! `drivers/tests/examples.rs` compiles this file as a module and runs [`run`].

use std::error::Error;
use std::io::Write;

use mcpwire::mcp::blocking::McpClient;
use mcpwire::mcp::{ClientOptions, Host};
use mcpwire_core::mcp::{
    ClientCapabilities, ElicitAnswer, ElicitationRequest, InputAnswer, InputRequest,
    InputRequestEvent, OpId,
};
use mcpwire_dev::mcp_server::{Config, McpServer};
use serde_json::{json, Value};

/// Answers a form elicitation that requires `name` with this name; declines anything else.
pub struct GiveName(pub String);

impl Host for GiveName {
    fn on_input_request(&mut self, _op: OpId, asked: &InputRequestEvent) -> InputAnswer {
        match &asked.request {
            InputRequest::Elicitation(ElicitationRequest::Form(form))
                if form.schema.required.iter().any(|field| field == "name") =>
            {
                let mut content = serde_json::Map::new();
                content.insert("name".into(), json!(self.0));
                InputAnswer::Elicitation(ElicitAnswer::Accept(content))
            }
            _ => InputAnswer::Elicitation(ElicitAnswer::Decline),
        }
    }
}

/// Talks to the MCP server at `url` and writes what it learns to `out`.
pub fn run(url: &str, out: &mut impl Write) -> Result<(), Box<dyn Error>> {
    // `ask` needs the client to declare form elicitation.
    let options = ClientOptions::default()
        .with_capabilities(ClientCapabilities::none().with_elicitation_form());
    let client = McpClient::connect_http(url, options)?;
    client.set_host(Box::new(GiveName("Ada".into())));

    let discovered = client.discover()?;
    writeln!(out, "versions: {}", discovered["supportedVersions"])?;
    if let Some(era) = client.era() {
        writeln!(out, "era: {:?}", era.era)?;
    }
    let tools = client.list_tools(None)?;
    for tool in tools["tools"].as_array().into_iter().flatten() {
        writeln!(out, "tool: {}", tool["name"].as_str().unwrap_or("?"))?;
    }
    let echoed = client.call_tool("echo", json!({"text": "hi"}))?;
    writeln!(out, "echo: {}", first_text(&echoed))?;
    let question = json!({"question": "Who are you?"});
    let greeted = client.call_tool("ask", question)?;
    writeln!(out, "ask: {}", first_text(&greeted))?;
    client.close();
    Ok(())
}

/// The text of a tool result's first content block.
pub fn first_text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or("")
}

fn main() -> Result<(), Box<dyn Error>> {
    let (url, _server) = match std::env::args().nth(1) {
        Some(url) => (url, None),
        None => {
            let server = McpServer::start_http(Config::default(), "127.0.0.1:0")?;
            (server.url(), Some(server))
        }
    };
    run(&url, &mut std::io::stdout())
}

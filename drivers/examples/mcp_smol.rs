//! The smol MCP client as a library: connect, discover, list the tools, call `echo`, call
//! `ask` (which asks the host for a name through an elicitation), print the results, close.
//!
//! ```text
//! cargo run -p mcpwire --features smol --example mcp_smol     # its own reference server
//! cargo run -p mcpwire --features smol --example mcp_smol -- http://127.0.0.1:8931/mcp
//! ```
//!
//! With no URL it starts mcpwire's reference MCP server on a free loopback port for the run.
//! `drivers/tests/examples.rs` compiles this file as a module and runs [`run`].

use std::error::Error;
use std::io::Write;

use mcpwire::mcp::smol::McpClient;
use mcpwire::mcp::{
    ClientCapabilities, ClientOptions, ElicitAnswer, ElicitationRequest, Host, InputAnswer,
    InputRequest, InputRequestEvent, OpId,
};
use mcpwire_dev::mcp_server::{Config, McpServer};
use serde_json::json;

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
pub async fn run(url: &str, out: &mut impl Write) -> Result<(), Box<dyn Error>> {
    // `ask` needs the client to declare form elicitation.
    let options = ClientOptions::default()
        .with_capabilities(ClientCapabilities::none().with_elicitation_form());
    let client = McpClient::connect_http(url, options)?;
    client.set_host(Box::new(GiveName("Ada".into())));

    let discovered = client.discover().await?;
    let versions = serde_json::to_string(&discovered.supported_versions)?;
    writeln!(out, "versions: {versions}")?;
    if let Some(era) = client.era() {
        writeln!(out, "era: {:?}", era.era)?;
    }
    // Every page of the list, following its cursors.
    let tools = client.list_all_tools().await?;
    for tool in &tools.tools {
        writeln!(out, "tool: {}", tool.name)?;
    }
    // A tool that fails answers `is_error`; `into_result` makes that an error.
    let echoed = client
        .call_tool("echo", json!({"text": "hi"}))
        .await?
        .into_result()?;
    writeln!(out, "echo: {}", echoed.text())?;
    let question = json!({"question": "Who are you?"});
    let greeted = client.call_tool("ask", question).await?;
    writeln!(out, "ask: {}", greeted.text())?;
    client.close().await;
    Ok(())
}

fn main() -> Result<(), Box<dyn Error>> {
    let (url, _server) = match std::env::args().nth(1) {
        Some(url) => (url, None),
        None => {
            let server = McpServer::start_http(Config::default(), "127.0.0.1:0")?;
            (server.url(), Some(server))
        }
    };
    smol::block_on(run(&url, &mut std::io::stdout()))
}

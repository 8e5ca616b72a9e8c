//! Logging in to an MCP server that requires OAuth: the first request meets the server's
//! `401`, the client discovers the authorization server, registers, sends the person to the
//! authorization URL and waits on 127.0.0.1 for the browser to come back; then it lists the
//! tools, calls `echo`, and calls `admin_echo`, which needs one more scope (a step-up: a second
//! authorization for the union of the scopes).
//!
//! ```text
//! # Terminal 1: the reference server, protected, with its own loopback authorization server.
//! cargo run -p mcpwire-cli --bin mcpwire -- dev mcp-server --listen 127.0.0.1:8931 --auth
//! # Terminal 2: open the URL it prints in a browser and press Allow (twice: login, step-up).
//! cargo run -p mcpwire --example mcp_login -- http://127.0.0.1:8931/mcp
//! # Or with no URL: its own server that approves at once, no browser.
//! cargo run -p mcpwire --example mcp_login
//! ```
//!
//! `drivers/tests/examples.rs` compiles this file as a module and runs [`run`].

use std::error::Error;
use std::io::Write;
use std::sync::Arc;

use mcpwire::mcp::blocking::McpClient;
use mcpwire::mcp::{
    Authorization, ClientOptions, FollowRedirect, LoopbackBrowser, MemoryStore, TokenStore,
    UserAgent,
};
use mcpwire_dev::auth_server::AuthConfig;
use mcpwire_dev::mcp_server::{Config, McpServer};
use serde_json::json;

/// Logs in to the server at `url` through `user_agent`, calls its tools, and writes what it
/// learns to `out`.
pub fn run(
    url: &str,
    user_agent: Arc<dyn UserAgent>,
    out: &mut impl Write,
) -> Result<(), Box<dyn Error>> {
    let store = Arc::new(MemoryStore::default());
    let mut auth = Authorization::new(user_agent, store.clone());
    // The dev server is plain http on a loopback address.
    auth.allow_http_loopback = true;
    let client = McpClient::connect_http(url, ClientOptions::default().with_authorization(auth))?;

    let tools = client.list_all_tools()?;
    let names: Vec<&str> = tools.tools.iter().map(|t| t.name.as_str()).collect();
    writeln!(out, "tools: {}", names.join(", "))?;
    let echoed = client.call_tool("echo", json!({"text": "hi"}))?;
    writeln!(out, "echo: {}", echoed.into_result()?.text())?;
    let admin = client.call_tool("admin_echo", json!({"text": "root"}))?;
    writeln!(out, "admin_echo: {}", admin.into_result()?.text())?;

    // What the store keeps for next time (a real host would keep it on disk).
    if let Some(grant) = store.load(url) {
        let mut scopes: Vec<&str> = grant.tokens.scopes().collect();
        scopes.sort_unstable();
        writeln!(out, "granted: {}", scopes.join(" "))?;
    }
    client.close();
    Ok(())
}

fn main() -> Result<(), Box<dyn Error>> {
    match std::env::args().nth(1) {
        Some(url) => run(
            &url,
            Arc::new(LoopbackBrowser::new()),
            &mut std::io::stdout(),
        ),
        None => {
            let config = Config {
                auth: Some(AuthConfig {
                    auto_approve: true,
                    ..AuthConfig::default()
                }),
                ..Config::default()
            };
            let server = McpServer::start_http(config, "127.0.0.1:0")?;
            run(
                &server.url(),
                Arc::new(FollowRedirect),
                &mut std::io::stdout(),
            )
        }
    }
}

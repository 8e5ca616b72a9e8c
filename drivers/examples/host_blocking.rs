//! A host of several MCP servers at once, on the blocking driver: connect them all
//! concurrently (a dead one fails on its own, naming itself, and holds up no other), list each
//! one's tools, call `echo` on each ready one by (server, tool), print the registry, close.
//!
//! ```text
//! cargo run -p mcpwire --example host_blocking      # two reference servers and a dead port
//! cargo run -p mcpwire --example host_blocking -- docs=http://127.0.0.1:8931/mcp notes=http://127.0.0.1:8932/mcp
//! ```
//!
//! `drivers/tests/examples.rs` compiles this file as a module and runs [`run`].

use std::collections::BTreeMap;
use std::error::Error;
use std::io::Write;
use std::time::Duration;

use mcpwire::host::blocking::Host;
use mcpwire::host::{HostError, HostOptions, ServerId, ServerSpec, TransportSpec, Trust};
use mcpwire_dev::mcp_server::{Config, McpServer};
use serde_json::json;

/// An HTTP server spec: the host's id for it and its URL.
pub fn http_spec(id: &str, url: &str) -> Result<ServerSpec, Box<dyn Error>> {
    Ok(ServerSpec {
        id: ServerId::new(id)?,
        transport: TransportSpec::Http {
            url: url.to_owned(),
            headers: BTreeMap::new(),
        },
        oauth: None,
        trust: Trust::Untrusted,
        disabled: false,
    })
}

/// Connects `servers` (id, URL) at once and writes what happens to `out`.
pub fn run(servers: &[(&str, &str)], out: &mut impl Write) -> Result<(), Box<dyn Error>> {
    let options = HostOptions::default().with_connect_timeout(Duration::from_secs(10));
    let host = Host::new(options);
    let specs = servers
        .iter()
        .map(|(id, url)| http_spec(id, url))
        .collect::<Result<Vec<_>, _>>()?;
    // Every server connects on its own thread; the outcomes come in id order.
    for (id, outcome) in host.connect_all(specs) {
        match outcome {
            Ok(()) => {
                let tools = host.tools(&id)?;
                writeln!(out, "{id}: ready, {} tools", tools.len())?;
            }
            Err(HostError::Connect { failure, .. }) => {
                writeln!(out, "{id}: {} ({})", failure.kind.as_str(), failure.stage)?
            }
            Err(other) => writeln!(out, "{id}: {other}")?,
        }
    }
    // A call names its server: two servers' `echo` are never confused.
    for server in host.servers() {
        if server.is_ready() {
            let text = format!("hello from {}", server.id());
            let answer = host.call_tool(server.id(), "echo", json!({ "text": text }))?;
            writeln!(out, "{}/echo: {}", server.id(), answer.text())?;
        }
    }
    let states: Vec<String> = host
        .servers()
        .iter()
        .map(|s| format!("{} {}", s.id(), s.state().kind()))
        .collect();
    writeln!(out, "servers: {}", states.join(", "))?;
    host.close();
    Ok(())
}

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if !args.is_empty() {
        let servers = args
            .iter()
            .map(|a| a.split_once('=').ok_or("arguments are ID=URL"))
            .collect::<Result<Vec<_>, _>>()?;
        return run(&servers, &mut std::io::stdout());
    }
    let docs = McpServer::start_http(Config::default(), "127.0.0.1:0")?;
    let notes = McpServer::start_http(Config::default(), "127.0.0.1:0")?;
    // A port that nothing listens on.
    let dead = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        format!("http://{}/mcp", listener.local_addr()?)
    };
    let servers = [("docs", docs.url()), ("notes", notes.url()), ("dead", dead)];
    let servers: Vec<(&str, &str)> = servers.iter().map(|(i, u)| (*i, u.as_str())).collect();
    run(&servers, &mut std::io::stdout())
}

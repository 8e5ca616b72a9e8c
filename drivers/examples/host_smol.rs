//! A host of several MCP servers at once, on smol: connect them all concurrently (a dead one
//! fails on its own, naming itself, and holds up no other), list each one's tools, call `echo`
//! on every ready one at once by (server, tool), print the registry, close.
//!
//! ```text
//! cargo run -p mcpwire --features smol --example host_smol   # two reference servers and a dead port
//! cargo run -p mcpwire --features smol --example host_smol -- docs=http://127.0.0.1:8931/mcp
//! ```
//!
//! `drivers/tests/examples.rs` compiles this file as a module and runs [`run`].

use std::collections::BTreeMap;
use std::error::Error;
use std::io::Write;
use std::time::Duration;

use mcpwire::host::smol::Host;
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
pub async fn run(servers: &[(&str, &str)], out: &mut impl Write) -> Result<(), Box<dyn Error>> {
    let options = HostOptions::default().with_connect_timeout(Duration::from_secs(10));
    let host = Host::new(options);
    let specs = servers
        .iter()
        .map(|(id, url)| http_spec(id, url))
        .collect::<Result<Vec<_>, _>>()?;
    // Every server connects in its own task; the outcomes come in id order.
    for (id, outcome) in host.connect_all(specs).await {
        match outcome {
            Ok(()) => {
                let tools = host.tools(&id).await?;
                writeln!(out, "{id}: ready, {} tools", tools.len())?;
            }
            Err(HostError::Connect { failure, .. }) => {
                writeln!(out, "{id}: {} ({})", failure.kind.as_str(), failure.stage)?
            }
            Err(other) => writeln!(out, "{id}: {other}")?,
        }
    }
    // The calls to the ready servers run at once; each names its server.
    let ready: Vec<ServerId> = host
        .servers()
        .into_iter()
        .filter(|s| s.is_ready())
        .map(|s| s.id().clone())
        .collect();
    let calls = ready.iter().map(|id| {
        let host = host.clone();
        let id = id.clone();
        smol::spawn(async move {
            let text = format!("hello from {id}");
            let answer = host.call_tool(&id, "echo", json!({ "text": text })).await;
            (id, answer)
        })
    });
    let tasks: Vec<_> = calls.collect();
    for task in tasks {
        let (id, answer) = task.await;
        writeln!(out, "{id}/echo: {}", answer?.text())?;
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
        return smol::block_on(run(&servers, &mut std::io::stdout()));
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
    smol::block_on(run(&servers, &mut std::io::stdout()))
}

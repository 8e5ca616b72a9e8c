//! Eight tool calls at once on one client: the handle is cloned into eight threads, and each
//! clone's `call_tool` runs concurrently with the others on the one connection (one era
//! detection, one `tools/list`). The reference server's `slow` tool sleeps and reports how many
//! `slow` calls it had in flight at once (`structuredContent.overlapping`).
//!
//! ```text
//! cargo run -p mcpwire --example mcp_concurrent # its own reference server
//! cargo run -p mcpwire --example mcp_concurrent -- http://127.0.0.1:8931/mcp
//! ```
//!
//! `drivers/tests/examples.rs` compiles this file as a module and runs [`run`].

use std::error::Error;
use std::io::Write;
use std::thread;

use mcpwire::mcp::blocking::McpClient;
use mcpwire::mcp::ClientOptions;
use mcpwire_dev::mcp_server::{Config, McpServer};
use serde_json::json;

/// How many calls run at once.
pub const CALLS: usize = 8;

/// Calls `slow` [`CALLS`] times at once on one client of `url`; writes the most calls the
/// server saw in flight together.
pub fn run(url: &str, out: &mut impl Write) -> Result<(), Box<dyn Error>> {
    let client = McpClient::connect_http(url, ClientOptions::default())?;
    let calls: Vec<_> = (0..CALLS)
        .map(|_| {
            // A clone is another handle on the same connection.
            let client = client.clone();
            thread::spawn(move || client.call_tool("slow", json!({"ms": 500})))
        })
        .collect();
    let mut overlapping = 0;
    for call in calls {
        let result = call.join().map_err(|_| "a call's thread panicked")??;
        let seen = result
            .structured_content
            .as_ref()
            .and_then(|s| s["overlapping"].as_u64())
            .unwrap_or(0);
        overlapping = overlapping.max(seen);
    }
    writeln!(
        out,
        "{CALLS} calls, at most {overlapping} at once on the server"
    )?;
    client.close();
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
    run(&url, &mut std::io::stdout())
}

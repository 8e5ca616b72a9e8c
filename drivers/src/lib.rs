//! # mcpwire
//!
//! The drivers of [`mcpwire_core`]: they move bytes, spawn processes and read clocks, and make
//! no protocol decisions (those live in the core's state machines). Two runtimes, the same
//! behaviour: `blocking` (the default feature: ureq, bounded std thread pools, `std::process`)
//! and `smol` (hyper 1 on smol's sockets, smol tasks, async-process).
//!
//! - [`mcp`]: an MCP client of one server ([`mcp::blocking::McpClient`] with plain methods,
//!   `mcp::smol::McpClient` with the same methods as `async fn`s), over Streamable HTTP or a
//!   stdio child, in either protocol era;
//! - [`host`]: a host of many MCP servers at once ([`host::blocking::Host`], `host::smol::Host`):
//!   one client per server, keyed by the host's id for it, connected concurrently (a slow or
//!   dead server holds up no other), each server's state, tools and credentials kept apart;
//! - [`tunnel`]: the Secure MCP Tunnel client: poll the control plane, forward each command to
//!   its channel's MCP server, post the responses ([`tunnel::blocking::run`],
//!   `tunnel::smol::run`), from a [`tunnel::TunnelConfig`] built in code.
//!
//! The `mcpwire` command (CLI, `tunnel run` flags, health endpoints, demos) and the dev servers
//! are crates of their own (`mcpwire-cli`, `mcpwire-dev`); this library carries neither.
//!
//! ```no_run
//! # #[cfg(feature = "blocking")] {
//! use mcpwire::mcp::{blocking::McpClient, ClientOptions};
//!
//! let client = McpClient::connect_http("http://127.0.0.1:8931/mcp", ClientOptions::default())?;
//! for tool in client.list_all_tools()?.tools {
//!     println!("{}", tool.name);
//! }
//! let answer = client.call_tool("echo", serde_json::json!({"text": "hi"}))?;
//! println!("{}", answer.text());
//! client.close();
//! # }
//! # Ok::<(), mcpwire::mcp::Error>(())
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![deny(rustdoc::broken_intra_doc_links)]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod host;
pub mod mcp;
#[cfg(any(feature = "blocking", feature = "smol"))]
mod net;
pub mod server;
pub mod tunnel;

/// How long an idle kept-alive connection may wait and still be reused; an older one is closed
/// and a new one opened. It stays under the 5 s after which common servers (Node's `http`,
/// uvicorn) close idle connections: reusing one just as the server closes it loses a request
/// that may not be sent again (a `tools/call`).
#[cfg_attr(not(any(feature = "blocking", feature = "smol")), allow(dead_code))]
pub(crate) const KEEP_ALIVE_REUSE: std::time::Duration = std::time::Duration::from_secs(4);

/// A seed for the core's jitter and for ids that must differ between processes (a tunnel's
/// instance id): std's randomly keyed hasher over the wall clock and the process id. Not for
/// secrets.
pub fn random_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.write_u32(std::process::id());
    h.finish()
}

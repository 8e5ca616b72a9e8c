//! Drivers for mcpwire-core: they move bytes, spawn processes and read clocks, and make no
//! protocol decisions.
//!
//! - [`blocking`] (feature `blocking`, the default): ureq, bounded std thread pools,
//!   `std::process` for stdio MCP servers;
//! - [`smol`] (feature `smol`): hyper 1 on smol's sockets, smol tasks, async-process for stdio
//!   MCP servers;
//! - [`mcp_client`]: an MCP client of one server on a driver ([`mcp_client::blocking::McpClient`],
//!   and `mcp_client::smol::McpClient` with the same methods as `async fn`s);
//! - [`client_cli`]: `mcpwire client`, an MCP client for people and scripts;
//! - [`conformance_client`]: `mcpwire conformance-client`, the client the official MCP
//!   conformance runner starts (hidden from `--help`);
//! - [`tunnel_run`]: `mcpwire tunnel run` (flags, health endpoints, logs) on top of a driver;
//! - [`dev`]: the local dev servers behind `mcpwire dev` (a reference MCP server and a local
//!   tunnel control plane);
//! - [`demo`]: the in-memory driver behind `mcpwire tunnel demo`;
//! - [`loopback_demo`]: `mcpwire demo`, the whole path on loopback sockets in one process.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[cfg(feature = "blocking")]
pub mod blocking;
#[cfg(feature = "blocking")]
pub mod client_cli;
#[cfg(feature = "blocking")]
pub mod conformance_client;
pub mod demo;
pub mod dev;
#[cfg(feature = "blocking")]
pub mod loopback_demo;
pub mod mcp_client;
#[cfg(feature = "smol")]
pub mod smol;
pub mod tunnel_run;

/// How long an idle kept-alive connection may wait and still be reused; an older one is closed
/// and a new one opened. It stays under the 5 s after which common servers (Node's `http`,
/// uvicorn) close idle connections: reusing one just as the server closes it loses a request
/// that may not be sent again (a `tools/call`).
#[cfg_attr(not(any(feature = "blocking", feature = "smol")), allow(dead_code))]
pub(crate) const KEEP_ALIVE_REUSE: std::time::Duration = std::time::Duration::from_secs(4);

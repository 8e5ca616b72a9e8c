//! The smol MCP client driver (`mcp_client::smol::McpClient`) against the reference server on
//! 127.0.0.1: every scenario of `mcp_client_scenarios` (HTTP and stdio, modern and legacy
//! fallback, MRTR, progress, timeouts, cancellation, caching, a crashed child), each method's
//! future run with `smol::block_on`; then what only an async client can do.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod mcp_client_scenarios;

use mcpwire_drivers::mcp_client::smol::McpClient;

/// The smol client, its futures run to completion one call at a time.
#[derive(Debug)]
pub struct Smol(McpClient);

impl_api!(Smol, McpClient, |x| smol::block_on(x));

scenario_tests!(Smol);

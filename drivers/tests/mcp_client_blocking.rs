//! The blocking MCP client driver (`mcp_client::blocking::McpClient`) against the reference
//! server on 127.0.0.1: every scenario of `mcp_client_scenarios` (HTTP and stdio, modern and
//! legacy fallback, MRTR, progress, timeouts, cancellation, caching, a crashed child).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod mcp_client_scenarios;

use mcpwire_drivers::mcp_client::blocking::McpClient;

/// The blocking client, as the scenarios call it.
#[derive(Debug)]
pub struct Blocking(McpClient);

impl_api!(Blocking, McpClient, |x| x);

scenario_tests!(Blocking);

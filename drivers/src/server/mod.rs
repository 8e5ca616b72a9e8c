//! MCP servers: the drivers that run the core's sans-IO server
//! (`mcpwire_core::mcp::server`) over stdio and Streamable HTTP.

#[cfg(feature = "blocking")]
pub mod blocking;
#[cfg(feature = "smol")]
pub mod smol;
#[cfg(any(feature = "blocking", feature = "smol"))]
pub(crate) mod transport;

//! The Secure MCP Tunnel client (`shared/spec/tunnel/protocol.md`, contract `openapi.json`).
//!
//! - [`wire`]: poll and response envelopes, command and response types;
//! - [`response_timeout`]: the per-command lifetime grammar;
//! - [`server_info`]: the `X-Tunnel-MCP-Server-Info` declaration;
//! - [`headers`]: the response-header allowlist;
//! - [`failure`]: synthesized `-32603` failures with `tunnel_failure` provenance;
//! - [`forward_headers`]: the final request headers of a forward to an HTTP MCP server;
//! - [`engine`]: [`Engine`], the whole client's state machine;
//! - [`stdio`]: the shared stdio binding (one child's JSON-RPC frames);
//! - [`cloudflare`]: managed `cloudflared` (runtime fetch, companion argv/env, readiness).

pub mod cloudflare;
pub mod engine;
pub mod failure;
pub mod forward_headers;
pub mod headers;
pub mod response_timeout;
pub mod server_info;
pub mod stdio;
pub mod wire;

pub use engine::Engine;

/// The tunnel wire-contract version this client implements (`X-Tunnel-Client-Wire-Protocol-Version`).
pub const WIRE_PROTOCOL_VERSION: &str = "2026-08-25";

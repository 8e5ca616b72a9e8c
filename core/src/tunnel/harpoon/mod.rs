//! Harpoon: the tunnel client's built-in, allowlisted HTTP client, served as an MCP server on
//! the reserved `harpoon` channel (`shared/spec/tunnel/protocol.md`, "MCP server
//! information"; `openapi.json`'s `oauth_shim_*` error codes). tunnel-service reaches a
//! customer's private endpoints through it, and only those registered here.
//!
//! - [`targets`]: the registered targets (labels, URLs, validation, and the `--harpoon.target`
//!   and `HARPOON_TARGETS` forms);
//! - [`headers`]: what of a call's headers is sent (hop-by-hop, proxy, forwarding and cookie
//!   headers dropped by class; our `User-Agent`);
//! - [`rewrite`]: a target's answer with every registered URL turned into `harpoon://<label>`;
//! - [`call`]: one `call_target`'s arguments, its redirect policy and its result;
//! - [`tools`]: the tool definitions, `list_targets` and `get_oauth_target_audience`;
//! - [`discovery`]: the targets OAuth discovery registers, and the host filter they pass;
//! - [`server`]: [`Harpoon`], the channel's MCP server (one connection, one request at a time,
//!   the outbound requests the driver performs).

pub mod call;
pub mod discovery;
pub mod headers;
pub mod rewrite;
pub mod server;
pub mod targets;
pub mod tools;

pub use server::{Harpoon, HarpoonConfig, HarpoonEvent, HarpoonOutput};
pub use targets::{Registry, Target, TargetError, TargetSource, TargetSpec};

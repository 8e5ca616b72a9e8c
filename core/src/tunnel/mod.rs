//! The Secure MCP Tunnel client (`shared/spec/tunnel/protocol.md`, contract `openapi.json`).
//!
//! What a driver names to run [`Tunnel`] is here, at `mcpwire_core::tunnel::`: its
//! configuration ([`Config`], [`Target`], [`TargetKind`], [`StdioConfig`]; the engine's own is
//! [`engine::Config`]), the handles its inputs take ([`CommandId`], [`PollId`], [`PostId`],
//! [`ChildId`]), what comes out ([`Output`], [`Event`], [`Timeout`], [`AttemptLimit`],
//! [`Health`]), the failures a driver reports ([`TunnelFailure`]), and its errors
//! ([`ConfigError`], [`UsageError`]). Its parts, machines of their own, are here too:
//! [`Engine`], [`StdioBinding`] and [`Supervisor`].
//!
//! The modules are the protocol's concepts, each a namespace for what is named beyond the
//! tunnel's surface:
//!
//! - [`wire`]: poll and response envelopes, command and response types;
//! - [`response_timeout`]: the per-command lifetime grammar;
//! - [`server_info`]: the `X-Tunnel-MCP-Server-Info` declaration;
//! - [`headers`]: the response-header allowlist;
//! - [`failure`]: synthesized `-32603` failures with `tunnel_failure` provenance;
//! - [`forward_headers`]: the final request headers of a forward to an HTTP MCP server;
//! - [`engine`]: [`Engine`], the tunnel protocol's state machine (polls, commands, deadlines,
//!   response POSTs and their retries), its configuration, events and outputs;
//! - [`stdio`]: the shared stdio binding (one child's JSON-RPC frames);
//! - [`supervisor`]: the restart policy of a stdio child (backoff, healthy runs, replacements);
//! - [`cloudflare`]: managed `cloudflared` (runtime fetch, companion argv/env, readiness);
//! - [`harpoon`]: the built-in allowlisted HTTP client on the `harpoon` channel (its targets);
//! - [`config_file`]: the Go tunnel-client's YAML config file, as values by variable;
//! - [`startup_probe`]: the start-up probe of the main MCP server (`--mcp.startup-wait-timeout`).
//!
//! [`Tunnel`], the whole client as one machine (the engine, the route table, a binding and a
//! supervisor per stdio channel; what a driver runs), lives in a private module (`machine`):
//! what it exports is re-exported here.
//!
//! Every machine here follows the step-function contract (ARCHITECTURE.md): inputs through
//! `handle_*(now, ..)`, outputs through `poll_output`, the next deadline with its reason through
//! `poll_timeout` (where the machine has deadlines of its own), `shutdown(now)`.
//!
//! # Late inputs
//!
//! Handles ([`CommandId`], [`PollId`], [`PostId`], [`ChildId`]) are issued in sequence by the
//! machine that names them. An input naming a handle the machine issued but whose operation has
//! since ended (finished, cancelled, timed out) is a race the caller cannot avoid: it is dropped,
//! and the call returns `Ok(())` with no output. An input naming a handle the machine never
//! issued is the caller's misuse: `Err(UsageError::UnknownHandle(..))` ([`UsageError`]). An input
//! that does not fit a live handle's state (body bytes before a response head) is
//! `Err(UsageError::OutOfOrder(..))`. The stdio binding issues no handles (it is given the
//! engine's): it drops an input for a command it does not hold.

pub mod cloudflare;
pub mod config_file;
pub mod engine;
pub mod failure;
pub mod forward_headers;
pub mod harpoon;
pub mod headers;
mod machine;
pub mod response_timeout;
pub mod server_info;
pub mod startup_probe;
pub mod stdio;
pub mod supervisor;
pub mod wire;

pub use engine::{
    CommandId, ConfigError, Engine, Health, NotReady, PollId, PostId, Readiness, UsageError,
};
pub use failure::TunnelFailure;
pub use machine::{
    AttemptLimit, ChildId, Config, Event, Forwarded, Output, Target, TargetKind, Timeout,
    TimeoutReason, Tunnel, HARPOON_CHANNEL, POLL_GUARD, POST_ATTEMPT_CAP,
};
pub use stdio::{DiscardReason, StdioBinding, StdioConfig};
pub use supervisor::Supervisor;

/// The tunnel wire-contract version this client implements (`X-Tunnel-Client-Wire-Protocol-Version`).
pub const WIRE_PROTOCOL_VERSION: &str = "2026-08-25";

//! The modules of the `mcpwire` command (crate `mcpwire-cli`). They are a library only so that
//! the command's own tests can drive them; embed the `mcpwire` crate instead.
//!
//! - [`client`]: `mcpwire client`, an MCP client for people and scripts;
//! - [`tunnel_run`]: `mcpwire tunnel run` (flags and environment compatible with the Go
//!   tunnel-client, the health endpoints, signals) on top of a driver of the `mcpwire` crate;
//! - [`dev`]: `mcpwire dev`, the local dev servers of the `mcpwire-dev` crate as commands;
//! - [`tunnel_demo`]: `mcpwire tunnel demo`, the engine alone on a virtual clock;
//! - [`loopback_demo`]: `mcpwire demo`, the whole tunnel path on loopback sockets in one process;
//! - [`conformance_client`]: `mcpwire conformance-client`, the client the official MCP
//!   conformance runner starts (hidden from `--help`).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod client;
pub mod conformance_client;
pub mod dev;
pub mod loopback_demo;
pub mod tunnel_demo;
pub mod tunnel_run;

//! Drivers for mcpwire-core: they move bytes, spawn processes and read clocks, and make no
//! protocol decisions.
//!
//! Today this crate holds the in-memory driver behind `mcpwire tunnel demo` ([`demo`]) and the
//! local dev servers behind `mcpwire dev` ([`dev`]: a reference MCP server and a local tunnel
//! control plane); the blocking (ureq, std threads, `std::process`) and smol drivers come next.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod demo;
pub mod dev;

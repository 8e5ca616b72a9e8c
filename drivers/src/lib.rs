//! Drivers for mcpwire-core: they move bytes, spawn processes and read clocks, and make no
//! protocol decisions.
//!
//! - [`blocking`] (feature `blocking`, the default): ureq, bounded std thread pools,
//!   `std::process` for stdio MCP servers;
//! - [`tunnel_run`]: `mcpwire tunnel run` (flags, health endpoints, logs) on top of a driver;
//! - [`demo`]: the in-memory driver behind `mcpwire tunnel demo`.
//!
//! The smol driver comes next.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[cfg(feature = "blocking")]
pub mod blocking;
pub mod demo;
pub mod tunnel_run;

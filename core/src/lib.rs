//! # mcpwire-core
//!
//! The sans-IO protocol core of mcpwire. Every decision a Model Context Protocol client and a
//! Secure MCP Tunnel client make lives here, as state machines driven by step functions:
//! inputs go in through `handle_*` with the current [`time::Instant`] passed by the caller,
//! outputs (requests to send, events, the next deadline) come out through `poll_*`. No module
//! reads a clock, draws a random number, touches the network, the file system or a process
//! (`tests/sans_io.rs` checks the source for it; a map is a `BTreeMap`, or a `HashMap` with a
//! fixed hasher, since the default one draws random keys).
//!
//! Modules are named after the protocol concept they model:
//! - [`jsonrpc`]: ids, message shapes, error objects and codes;
//! - [`http`]: request/response values with multi-valued, case-insensitive headers;
//! - [`sse`]: a push parser for `text/event-stream`;
//! - [`stdio_lines`]: newline-delimited framing of a stdio server's stdout, with one line limit;
//! - [`backoff`]: exponential backoff with injected jitter, and `Retry-After`;
//! - [`mcp`]: the MCP client, [`mcp::Client`], with everything a host names to drive it at
//!   `mcp::`, and its pieces as modules (request building, eras, MRTR, caching, subscriptions);
//! - [`auth`]: OAuth for MCP, client side: the authorization flow as a step function
//!   ([`auth::Flow`]), its documents, `WWW-Authenticate` challenges, PKCE, [`auth::Secret`];
//! - [`host`]: the host's side: many servers, their config files, the tool catalog and search,
//!   and the consent policy;
//! - [`net_policy`]: the SSRF rules for the URLs a server hands the client (OAuth metadata,
//!   endpoints, redirects, the authorization URL, icons, `$ref`), on parsed URLs and addresses;
//! - [`time`]: the `Instant`/`SystemTime` types every input takes (`std`'s, or `web-time`'s on
//!   `wasm32-unknown-unknown`);
//! - [`tunnel`]: the Secure MCP Tunnel client: [`tunnel::Tunnel`], the one machine a driver
//!   runs, with everything it names at `tunnel::`, composed of the [`tunnel::Engine`], the
//!   [`tunnel::StdioBinding`] and its restart [`tunnel::Supervisor`]; and the protocol's pieces
//!   as modules (wire types, `response_timeout`, server info, failure provenance).
//!
//! The step-function contract, the late-input and error conventions, and where each protocol
//! concept lives are in the repository's `ARCHITECTURE.md`.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod auth;
pub mod backoff;
pub mod host;
pub mod http;
pub mod jsonrpc;
pub mod mcp;
pub mod net_policy;
pub mod sse;
pub mod stdio_lines;
pub mod time;
pub mod tunnel;

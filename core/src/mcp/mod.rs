//! The Model Context Protocol client (`shared/spec/mcp-2026-07-28/`, with fallback to the
//! `2025-11-25` era), as sans-IO pieces the `mcp::Client` state machine is built from.
//!
//! - [`meta`]: the per-request `_meta` (protocol version, client capabilities and info) and ids;
//! - [`headers`]: Streamable HTTP headers mirrored from the body (`Mcp-Method`, `Mcp-Name`,
//!   `Mcp-Param-*` from `x-mcp-header`), shared with the tunnel;
//! - [`discover`]: `server/discover` and its typed result;
//! - [`era`]: which era a server speaks, and version negotiation;
//! - [`legacy`]: the `2025-11-25` era's `initialize` handshake and session;
//! - [`mrtr`]: multi round-trip requests (`input_required`);
//! - [`elicitation`]: validating a host's answers against `requestedSchema`;
//! - [`cache`]: `ttlMs` / `cacheScope` freshness;
//! - [`subscription`]: the `subscriptions/listen` pattern;
//! - [`request`]: timeouts, cancellation and resends;
//! - [`client`]: [`Client`], the whole client of one server built from the pieces above
//!   (re-exported here with its [`ClientConfig`]).
//!
//! ```
//! use mcpwire_core::mcp::meta::Implementation;
//! use mcpwire_core::mcp::request::Transport;
//! use mcpwire_core::mcp::{Client, ClientConfig};
//!
//! let client = Client::new(ClientConfig::new(Transport::Http, Implementation::new("host", "1.0")));
//! assert_eq!(client.active_ops(), 0);
//! ```

pub mod cache;
pub mod client;
pub mod discover;
pub mod elicitation;
pub mod era;
pub mod headers;
pub mod legacy;
pub mod meta;
pub mod mrtr;
pub mod request;
pub mod results;
pub mod subscription;

pub use client::{Client, ClientConfig};
pub use results::{
    Annotations, AudioContent, BinaryContent, CallToolResult, ContentBlock, EmbeddedResource,
    FromResult, GetPromptResult, ImageContent, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, PaginatedResult, Prompt, PromptArgument, PromptMessage,
    ReadResourceResult, Resource, ResourceBody, ResourceContents, ResourceLink, ResourceTemplate,
    ResultError, ResultErrorKind, Role, TextContent, Tool, ToolAnnotations, ToolError,
};

/// The protocol version of the stateless era this client speaks first.
pub const LATEST_PROTOCOL_VERSION: &str = "2026-07-28";

/// The newest version of the legacy (`initialize`) era this client falls back to.
pub const LEGACY_PROTOCOL_VERSION: &str = "2025-11-25";

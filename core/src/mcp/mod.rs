//! The Model Context Protocol client (`shared/spec/mcp-2026-07-28/`, with fallback to the
//! `2025-11-25` era), as sans-IO pieces the `mcp::Client` state machine is built from.
//!
//! Everything a host names to drive [`Client`] is here, at `mcpwire_core::mcp::`: its
//! configuration ([`ClientConfig`], [`Transport`], [`ProtocolChoice`], [`CallOptions`],
//! [`CacheConfig`], [`SubscriptionsConfig`]), the operations and their handles ([`Operation`],
//! [`OpId`], [`OpOptions`], [`ListKind`], [`StreamId`]), what comes out ([`Output`], [`Event`],
//! [`Timeout`]), the answers a host gives ([`InputAnswer`], [`ElicitAnswer`]), subscriptions
//! ([`SubscriptionFilter`], [`SubscriptionHandle`], [`SubscriptionEvent`],
//! [`SubscriptionChange`], [`SubscriptionEndReason`]), and the errors by blame ([`OpError`] and
//! its groups, [`UsageError`]).
//!
//! The modules are the protocol's concepts, each a namespace of its own for what a server, a
//! tool or a test names beyond the client (a part's own machine, its events and errors, the
//! concept's constants and parsers):
//!
//! - [`meta`]: the per-request `_meta` (protocol version, client capabilities and info) and ids;
//! - [`headers`]: Streamable HTTP headers mirrored from the body (`Mcp-Method`, `Mcp-Name`,
//!   `Mcp-Param-*` from `x-mcp-header`), the session header, shared with the tunnel;
//! - [`discover`]: `server/discover` and its typed result;
//! - [`era`]: which era a server speaks, and version negotiation;
//! - [`legacy`]: the `2025-11-25` era's `initialize` handshake and session ([`legacy::LegacySession`]);
//! - [`mrtr`]: multi round-trip requests (`input_required`);
//! - [`elicitation`]: validating a host's answers against `requestedSchema`;
//! - [`cache`]: `ttlMs` / `cacheScope` freshness ([`cache::ResultCache`]);
//! - [`subscription`]: the `subscriptions/listen` pattern ([`subscription::Subscriptions`]);
//! - [`request`]: timeouts, cancellation and resends ([`request::Requests`]).
//!
//! [`Client`], the whole client of one server, is built from them (its folder, `client/`, is
//! private: everything it exports is re-exported here).
//!
//! ```
//! use mcpwire_core::mcp::{Client, ClientConfig, Implementation, Transport};
//!
//! let client = Client::new(ClientConfig::new(Transport::Http, Implementation::new("host", "1.0")));
//! assert_eq!(client.active_ops(), 0);
//! ```

pub mod cache;
mod client;
pub mod discover;
pub mod elicitation;
pub mod era;
pub mod headers;
pub mod legacy;
pub mod meta;
pub mod mrtr;
pub mod request;
pub mod results;
pub mod server;
pub mod subscription;

pub use cache::{AuthContext, CacheConfig, ListKind, StaleIfError};
pub use client::{
    AuthConfig, CachePolicy, Client, ClientConfig, EraEvidence, Event, IncompatibleError,
    LocalError, OpError, OpId, OpOptions, Operation, Output, ProtocolChoice, ProtocolError,
    ResultSource, RetryReason, StreamId, Timeout, TimeoutReason, TransportError, UsageError,
    DEFAULT_MAX_BODY_BYTES, DEFAULT_PROBE_TIMEOUT, DEFAULT_SSE_RETRY, MAX_SSE_RESUMES,
    MAX_SSE_RETRY, MAX_STALLED_SSE_RESUMES, SESSION_OPEN_WAIT,
};
pub use discover::DiscoverResult;
pub use elicitation::{ElicitAnswer, ElicitationRequest};
pub use era::{CachedEra, CapabilityError, Era, VersionError};
pub use headers::ToolHeaders;
pub use legacy::KNOWN_LEGACY_VERSIONS;
pub use meta::{
    ClientCapabilities, ElicitationCapability, Icon, Implementation, JsonObject, LoggingLevel,
    SamplingCapability,
};
pub use mrtr::{InputAnswer, InputRequest, InputRequestEvent, SamplingRequest};
pub use request::{CallOptions, Transport};
pub use results::{
    Annotations, AudioContent, BinaryContent, CallToolResult, ContentBlock, EmbeddedResource,
    FromResult, GetPromptResult, ImageContent, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, PaginatedResult, Prompt, PromptArgument, PromptMessage,
    ReadResourceResult, Resource, ResourceBody, ResourceContents, ResourceLink, ResourceTemplate,
    ResultError, ResultErrorKind, Role, TextContent, Tool, ToolAnnotations, ToolError,
};
pub use subscription::{
    Change as SubscriptionChange, EndReason as SubscriptionEndReason, Event as SubscriptionEvent,
    SubscriptionFilter, SubscriptionHandle, SubscriptionsConfig,
};

/// The protocol version of the stateless era this client speaks first.
pub const LATEST_PROTOCOL_VERSION: &str = "2026-07-28";

/// The newest version of the legacy (`initialize`) era this client falls back to.
pub const LEGACY_PROTOCOL_VERSION: &str = "2025-11-25";

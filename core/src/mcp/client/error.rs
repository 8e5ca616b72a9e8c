//! Why an operation failed ([`OpError`]) and why a call was refused ([`UsageError`]).

use crate::jsonrpc::ErrorObject;
use crate::mcp::era::{CapabilityError, Era, VersionError};
use crate::mcp::headers::HeaderBuildError;
use crate::mcp::legacy::LegacyError;
use crate::mcp::mrtr::MrtrError;
use crate::mcp::request::{self, FailReason};
use crate::mcp::subscription;
use crate::mcp::{LATEST_PROTOCOL_VERSION, LEGACY_PROTOCOL_VERSION};

use super::StreamId;

/// Why an operation failed. Split by blame: the server's answer, the transport, the protocol.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum OpError {
    /// The server answered with a JSON-RPC error.
    #[error("the server answered error {}: {}", .0.code, .0.message)]
    Server(ErrorObject),
    /// No answer in time.
    #[error("the request timed out{}", if *max_total { " (maximum total time)" } else { "" })]
    TimedOut {
        /// Whether the request's maximum total time ran out.
        max_total: bool,
    },
    /// The transport failed and the request could not be resent.
    #[error("{0}")]
    Transport(FailReason),
    /// No protocol version in common.
    #[error("{0}")]
    Version(VersionError),
    /// The server requires a capability the host does not support.
    #[error("{0}")]
    Capability(CapabilityError),
    /// `-32020` persisted after `tools/list` was refreshed.
    #[error("the server still rejects the request headers after refreshing tools/list: {message}")]
    HeaderMismatch {
        /// The server's message.
        message: String,
    },
    /// The MRTR exchange failed (round limit, an undeclared input kind, a bad result).
    #[error("{0}")]
    Mrtr(MrtrError),
    /// The legacy handshake failed.
    #[error("the legacy handshake failed: {0}")]
    Legacy(LegacyError),
    /// The operation does not exist in the server's era.
    #[error("{operation} is not available in the {era:?} era")]
    Unsupported {
        /// The method.
        operation: &'static str,
        /// The era.
        era: Era,
    },
    /// The tool was excluded from `tools/list` because its `x-mcp-header` annotations are invalid.
    #[error("tool {tool:?} is excluded: {reason}")]
    ToolExcluded {
        /// The tool.
        tool: String,
        /// Why.
        reason: String,
    },
    /// The request's headers could not be built from its body.
    #[error("the request headers could not be built: {0}")]
    Headers(HeaderBuildError),
    /// The client was pinned to the modern era but the server answered like a legacy-only one:
    /// `400`, `404` or `405` without a recognized modern error, before it ever answered in
    /// kind (what automatic detection takes as legacy evidence).
    #[error(
        "the server answered like a {legacy} (legacy) server (HTTP {status}{}) and the client is pinned to {latest}; try --protocol auto",
        error.as_ref().map(|e| format!(", error {}: {}", e.code, e.message)).unwrap_or_default(),
        legacy = LEGACY_PROTOCOL_VERSION,
        latest = LATEST_PROTOCOL_VERSION,
    )]
    LegacyServer {
        /// The status.
        status: u16,
        /// The JSON-RPC error its body carried, if any (e.g. `-32000` "Server not initialized").
        error: Option<ErrorObject>,
    },
    /// The server's answer could not be used.
    #[error("unusable answer: {0}")]
    Protocol(String),
}

/// Why a call was refused (the caller broke the API contract). The client's state is unchanged.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum UsageError {
    /// The operation was never issued to the host (an operation that ended is not an error:
    /// see the module docs, "Late inputs").
    #[error("no active operation with this id")]
    UnknownOp,
    /// The operation is not waiting for input.
    #[error("the operation is not waiting for input")]
    NotAwaitingInput,
    /// The answer was refused (unknown key, wrong kind, or invalid against the schema).
    #[error("{0}")]
    Answer(MrtrError),
    /// The era is not known yet (no longer returned by [`Client::subscribe`](super::Client::subscribe), which holds the
    /// subscription and learns the era itself).
    #[error("the server's era is not known yet: run an operation (e.g. discover) first")]
    EraUnknown,
    /// The legacy handshake has not finished yet (run an operation first).
    #[error("the legacy handshake has not finished: run an operation (e.g. discover) first")]
    HandshakePending,
    /// The subscription request was refused.
    #[error("{0}")]
    Subscription(subscription::UsageError),
    /// The request was refused by the request tracker.
    #[error("{0}")]
    Request(request::UsageError),
    /// An HTTP input names a stream this client never issued (a stream that ended is not an
    /// error: see the module docs, "Late inputs").
    #[error("{input}: stream {} was never issued by this client", stream.0)]
    UnknownStream {
        /// The input (`handle_response_head`, `handle_response_data`, `handle_response_end`,
        /// `handle_transport_failed`).
        input: &'static str,
        /// The stream it named.
        stream: StreamId,
    },
    /// An HTTP input on a stdio client or the reverse.
    #[error("this input does not belong to the configured transport")]
    WrongTransport,
}

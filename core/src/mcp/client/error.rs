//! Why an operation failed ([`OpError`]) and why a call was refused ([`UsageError`]).

use crate::jsonrpc::ErrorObject;
use crate::mcp::era::{CapabilityError, Era, VersionError};
use crate::mcp::headers::HeaderBuildError;
use crate::mcp::legacy::LegacyError;
use crate::mcp::mrtr::{InputRequiredError, MrtrError};
use crate::mcp::request::{self, FailReason};
use crate::mcp::subscription;
use crate::mcp::{LATEST_PROTOCOL_VERSION, LEGACY_PROTOCOL_VERSION};

use super::StreamId;

/// Why an operation failed, grouped by who is to blame (as h11 and rustls split theirs): the
/// server answered with a JSON-RPC error (a legitimate answer, not a fault), the server broke
/// the protocol, the server and this client cannot work together, the transport failed, or
/// this side could not build the request. `Display` is one line for a person.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum OpError {
    /// The server answered with a JSON-RPC error.
    #[error("the server answered error {}: {}", .0.code, .0.message)]
    Server(ErrorObject),
    /// The server broke the protocol: its answer cannot be used.
    #[error("{0}")]
    Protocol(ProtocolError),
    /// The server and this client have no way to work together for this operation.
    #[error("{0}")]
    Incompatible(IncompatibleError),
    /// No answer: the transport failed (and the request could not be resent) or time ran out.
    #[error("{0}")]
    Transport(TransportError),
    /// This side could not build the request: the caller's input or options were refused, or
    /// the client could not write it.
    #[error("{0}")]
    Local(LocalError),
}

/// The server broke the protocol.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolError {
    /// A response without a `result` member.
    #[error("unusable answer: no result member")]
    NoResult {
        /// The method answered.
        method: &'static str,
    },
    /// An `input_required` result that is not a valid `InputRequiredResult`.
    #[error("unusable answer: {error}")]
    InputRequired {
        /// The method answered.
        method: &'static str,
        /// What is wrong with it.
        error: InputRequiredError,
    },
    /// An `input_required` result for a request that cannot get one.
    #[error("unusable answer: input_required for a request without MRTR")]
    InputRequiredWithoutMrtr {
        /// The method answered.
        method: &'static str,
    },
    /// The server's MRTR rounds break the rules: more rounds than the limit, or an input kind
    /// the request did not declare.
    #[error("{0}")]
    Mrtr(MrtrError),
    /// The `initialize` answer cannot be used (malformed, another id, an invalid result or
    /// session id).
    #[error("the legacy handshake failed: {0}")]
    Handshake(LegacyError),
}

/// The server and this client cannot work together for the operation.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum IncompatibleError {
    /// No protocol version in common.
    #[error("{0}")]
    Version(VersionError),
    /// The server requires a capability the host does not support.
    #[error("{0}")]
    Capability(CapabilityError),
    /// The operation does not exist in the server's era.
    #[error("{operation} is not available in the {era:?} era")]
    Unsupported {
        /// The method.
        operation: &'static str,
        /// The era.
        era: Era,
    },
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
    /// The tool was excluded from `tools/list` because its `x-mcp-header` annotations are invalid.
    #[error("tool {tool:?} is excluded: {reason}")]
    ToolExcluded {
        /// The tool.
        tool: String,
        /// Why.
        reason: String,
    },
    /// `-32020` persisted after `tools/list` was refreshed.
    #[error("the server still rejects the request headers after refreshing tools/list: {message}")]
    HeaderMismatch {
        /// The server's message.
        message: String,
    },
    /// The server refused `initialize`, or chose a version this client does not speak.
    #[error("the legacy handshake failed: {0}")]
    Handshake(LegacyError),
}

/// No answer came.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum TransportError {
    /// No answer in time.
    #[error("the request timed out{}", if *max_total { " (maximum total time)" } else { "" })]
    TimedOut {
        /// Whether the request's maximum total time ran out.
        max_total: bool,
    },
    /// The transport failed and the request could not be resent.
    #[error("{0}")]
    Failed(FailReason),
}

/// This side could not build the request.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum LocalError {
    /// The request's headers could not be built from its body (e.g. an argument an
    /// `x-mcp-header` annotation mirrors has no header form).
    #[error("the request headers could not be built: {0}")]
    Headers(HeaderBuildError),
    /// The MRTR retry could not be built.
    #[error("{0}")]
    Mrtr(MrtrError),
    /// The request tracker refused the request (e.g. call options out of range).
    #[error("unusable answer: {0}")]
    Request(request::UsageError),
    /// The client could not write the request's JSON.
    #[error("unusable answer: {0}")]
    Serialize(String),
}

impl From<ProtocolError> for OpError {
    fn from(e: ProtocolError) -> Self {
        OpError::Protocol(e)
    }
}

impl From<IncompatibleError> for OpError {
    fn from(e: IncompatibleError) -> Self {
        OpError::Incompatible(e)
    }
}

impl From<TransportError> for OpError {
    fn from(e: TransportError) -> Self {
        OpError::Transport(e)
    }
}

impl From<LocalError> for OpError {
    fn from(e: LocalError) -> Self {
        OpError::Local(e)
    }
}

impl OpError {
    /// A failed legacy handshake, blamed on the server's answer or on the two sides not
    /// matching.
    pub(super) fn handshake(e: LegacyError) -> Self {
        match e {
            LegacyError::Rejected { .. } | LegacyError::UnsupportedVersion { .. } => {
                IncompatibleError::Handshake(e).into()
            }
            _ => ProtocolError::Handshake(e).into(),
        }
    }
}

/// Why a call was refused (the caller broke the API contract). The client's state is unchanged.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum UsageError {
    /// The operation was never issued to the host (an operation that ended is not an error:
    /// see [`Client`](super::Client), "Late inputs").
    #[error("no active operation with this id")]
    UnknownOp,
    /// The operation is not waiting for input.
    #[error("the operation is not waiting for input")]
    NotAwaitingInput,
    /// The answer was refused (unknown key, wrong kind, or invalid against the schema).
    #[error("{0}")]
    Answer(MrtrError),
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
    /// error: see [`Client`](super::Client), "Late inputs").
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
    WrongTransport {
        /// The input (`handle_response_head`, `handle_stdio_line`, ...).
        input: &'static str,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::mrtr::MrtrError;

    fn server_error(code: i64, message: &str) -> ErrorObject {
        ErrorObject {
            code,
            message: message.to_owned(),
            data: None,
        }
    }

    /// The messages are what the CLI prints (and its tests check): grouping the errors by
    /// blame left every one of them as it was, byte for byte.
    #[test]
    fn op_error_messages_are_unchanged_by_the_grouping() {
        let cases: Vec<(OpError, &str)> = vec![
            (
                OpError::Server(server_error(-32601, "Method not found")),
                "the server answered error -32601: Method not found",
            ),
            (
                TransportError::TimedOut { max_total: false }.into(),
                "the request timed out",
            ),
            (
                TransportError::TimedOut { max_total: true }.into(),
                "the request timed out (maximum total time)",
            ),
            (
                TransportError::Failed(FailReason::ResendsExhausted {
                    resends: 0,
                    last_status: None,
                })
                .into(),
                "the stream broke before the answer (this request is not resent)",
            ),
            (
                IncompatibleError::Unsupported {
                    operation: "ping",
                    era: Era::Modern,
                }
                .into(),
                "ping is not available in the Modern era",
            ),
            (
                IncompatibleError::LegacyServer {
                    status: 400,
                    error: Some(server_error(-32000, "Bad Request: Server not initialized")),
                }
                .into(),
                "the server answered like a 2025-11-25 (legacy) server (HTTP 400, error -32000: \
                 Bad Request: Server not initialized) and the client is pinned to 2026-07-28; \
                 try --protocol auto",
            ),
            (
                IncompatibleError::LegacyServer {
                    status: 405,
                    error: None,
                }
                .into(),
                "the server answered like a 2025-11-25 (legacy) server (HTTP 405) and the client \
                 is pinned to 2026-07-28; try --protocol auto",
            ),
            (
                IncompatibleError::ToolExcluded {
                    tool: "bad".to_owned(),
                    reason: "why".to_owned(),
                }
                .into(),
                "tool \"bad\" is excluded: why",
            ),
            (
                IncompatibleError::HeaderMismatch {
                    message: "still wrong".to_owned(),
                }
                .into(),
                "the server still rejects the request headers after refreshing tools/list: \
                 still wrong",
            ),
            (
                IncompatibleError::Handshake(LegacyError::UnsupportedVersion {
                    offered: "1999-01-01".to_owned(),
                    known: vec!["2025-11-25".to_owned()],
                })
                .into(),
                "the legacy handshake failed: the server chose protocol version \"1999-01-01\"; \
                 this client speaks [\"2025-11-25\"]",
            ),
            (
                ProtocolError::NoResult {
                    method: "tools/list",
                }
                .into(),
                "unusable answer: no result member",
            ),
            (
                ProtocolError::InputRequiredWithoutMrtr {
                    method: "tools/list",
                }
                .into(),
                "unusable answer: input_required for a request without MRTR",
            ),
            (
                ProtocolError::InputRequired {
                    method: "tools/call",
                    error: InputRequiredError::RequestStateNotString,
                }
                .into(),
                "unusable answer: requestState must be a string",
            ),
            (
                ProtocolError::Mrtr(MrtrError::RoundLimitExceeded { limit: 10 }).into(),
                "the server asked for input more than 10 times for one request",
            ),
            (
                ProtocolError::Handshake(LegacyError::InvalidResult("protocolVersion")).into(),
                "the legacy handshake failed: InitializeResult member \"protocolVersion\" is \
                 missing or invalid",
            ),
            (
                LocalError::Headers(HeaderBuildError::NotAnObject).into(),
                "the request headers could not be built: the body is not a single JSON-RPC \
                 message object",
            ),
            (
                LocalError::Request(request::UsageError::ParamsNotObject).into(),
                "unusable answer: params must be a JSON object",
            ),
        ];
        for (error, text) in cases {
            assert_eq!(error.to_string(), text, "{error:?}");
        }
    }

    /// A refused or version-mismatched `initialize` is the two sides not matching; any other
    /// unusable answer is the server breaking the protocol.
    #[test]
    fn a_failed_handshake_is_blamed_by_what_went_wrong() {
        let rejected = LegacyError::Rejected {
            code: -32602,
            message: "no".to_owned(),
            data: None,
        };
        assert!(matches!(
            OpError::handshake(rejected),
            OpError::Incompatible(IncompatibleError::Handshake(_))
        ));
        let malformed = LegacyError::Malformed("x".to_owned());
        assert!(matches!(
            OpError::handshake(malformed),
            OpError::Protocol(ProtocolError::Handshake(_))
        ));
    }
}

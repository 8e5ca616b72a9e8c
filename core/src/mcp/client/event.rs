//! What comes out of the client: [`Output`] (requests for the driver to make) and [`Event`]
//! (facts for the host), with the reasons they carry.

use std::fmt;

use super::{OpError, OpId, StreamId};
use crate::http::Request;
use crate::mcp::era::Era;
use crate::mcp::mrtr::InputRequestEvent;
use crate::mcp::subscription;

use super::operation::ResultSource;

/// How the era was learned.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum EraEvidence {
    /// [`ClientConfig::protocol`](super::ClientConfig::protocol) pinned it.
    Configured,
    /// [`ClientConfig::known_era`](super::ClientConfig::known_era) said so.
    Cached,
    /// The server answered a modern request (a result or a recognized modern error).
    ModernAnswer,
    /// HTTP: the server answered a modern request with this status and no modern error.
    HttpStatus(u16),
    /// stdio: the probe got an error that is not a modern one.
    ProbeError(i64),
    /// stdio: the probe got no answer in time.
    ProbeTimedOut,
    /// The `server/discover` probe was answered with a result that is no `DiscoverResult`
    /// (no `supportedVersions`): a legacy server answering a method it does not know.
    NotADiscoverResult,
}

/// Why an operation is sent again (informational).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RetryReason {
    /// `-32022`: retrying with this version.
    Version(String),
    /// `-32021`: retrying with the missing capabilities declared.
    Capabilities,
    /// `-32020`: `tools/list` was refreshed; retrying with the new headers.
    HeadersRefreshed,
    /// The server is legacy: resending after `initialize`.
    LegacyFallback,
    /// The legacy session expired (404): resending after a new `initialize`.
    SessionExpired,
}

/// A fact for the host. `Debug` shows the sizes of results and notification texts, not the
/// texts (they may be private: a tool's output, a server's log data).
#[derive(Clone, PartialEq)]
#[non_exhaustive]
pub enum Event {
    /// The server's era (and version) is known, or changed.
    EraDetected {
        /// The era.
        era: Era,
        /// The version in use.
        version: String,
        /// How it was learned.
        evidence: EraEvidence,
    },
    /// An operation's result (final).
    Result {
        /// The operation.
        op: OpId,
        /// The JSON text of the `result` member (for `tools/list`, without excluded tools).
        result: String,
        /// `tools/call` with `isError: true`: the tool failed (show it to the model).
        is_error: bool,
        /// Where it came from.
        source: ResultSource,
    },
    /// The server needs input to continue the operation: answer every key with
    /// [`Client::answer_input`](super::Client::answer_input).
    InputRequested {
        /// The operation.
        op: OpId,
        /// The round (1 for the first `input_required`).
        round: u32,
        /// What is asked, under the server's keys.
        requests: Vec<InputRequestEvent>,
    },
    /// A progress notification for the operation.
    Progress {
        /// The operation.
        op: OpId,
        /// Progress so far.
        progress: f64,
        /// The total, when known.
        total: Option<f64>,
        /// A message.
        message: Option<String>,
    },
    /// A notification from the server (on an operation's stream, or on stdio).
    Notification {
        /// The operation whose stream carried it.
        op: Option<OpId>,
        /// Its method.
        method: String,
        /// The whole JSON-RPC message text.
        message: String,
    },
    /// A tool was removed from a `tools/list` result: its `x-mcp-header` annotations break the
    /// rules (the other tools stay usable).
    ToolExcluded {
        /// The tool (empty when the entry had no name).
        tool: String,
        /// Why, for a person.
        reason: String,
    },
    /// The operation is being sent again.
    Retrying {
        /// The operation.
        op: OpId,
        /// Why.
        reason: RetryReason,
    },
    /// The host's cancellation took effect (final).
    Cancelled {
        /// The operation.
        op: OpId,
    },
    /// The operation failed (final).
    Failed {
        /// The operation.
        op: OpId,
        /// Why.
        error: OpError,
    },
    /// A subscription event.
    Subscription(subscription::Event),
    /// Something arrived that nothing used.
    Ignored {
        /// Why.
        reason: &'static str,
    },
    /// Authorization ([`super::AuthConfig`]): show this URL to the user (open it in a browser
    /// when asked), then hand the query of the redirect back to the redirect URI to
    /// [`Client::handle_authorization_redirect`](super::Client::handle_authorization_redirect).
    /// The requests refused for want of it wait.
    AuthorizationUrl {
        /// The authorization URL (https, or http to loopback in development mode).
        url: String,
    },
    /// Authorization, before a refresh (with `FlowConfig::coordinate_refresh`): lock the token
    /// store for this grant, read it, and answer with
    /// [`Client::handle_store_locked`](super::Client::handle_store_locked); unlock after the
    /// next [`Event::Authorized`] (once the grant is written), [`Event::AuthorizationFailed`]
    /// or [`Event::AuthorizationProgress`].
    AuthorizationStoreLock {
        /// The grant's issuer.
        issuer: String,
        /// The grant's resource.
        resource: String,
    },
    /// Authorized: the waiting requests go out again with the new token. Store the grant
    /// (the token store), keyed by its issuer and resource.
    Authorized {
        /// The grant (its tokens never show in `Debug`).
        grant: Box<crate::auth::Grant>,
    },
    /// Authorization: a step did not work out and the flow goes on another way (a refresh
    /// whose grant is gone: a new authorization starts).
    AuthorizationProgress {
        /// What did not work.
        error: crate::auth::AuthError,
    },
    /// Authorization failed: the waiting requests failed with it.
    AuthorizationFailed {
        /// Why.
        error: crate::auth::AuthError,
    },
}

impl fmt::Debug for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Event::EraDetected {
                era,
                version,
                evidence,
            } => f
                .debug_struct("EraDetected")
                .field("era", era)
                .field("version", version)
                .field("evidence", evidence)
                .finish(),
            Event::Result {
                op,
                result,
                is_error,
                source,
            } => f
                .debug_struct("Result")
                .field("op", op)
                .field("result_bytes", &result.len())
                .field("is_error", is_error)
                .field("source", source)
                .finish(),
            Event::InputRequested {
                op,
                round,
                requests,
            } => f
                .debug_struct("InputRequested")
                .field("op", op)
                .field("round", round)
                .field("requests", requests)
                .finish(),
            Event::Progress {
                op,
                progress,
                total,
                message,
            } => f
                .debug_struct("Progress")
                .field("op", op)
                .field("progress", progress)
                .field("total", total)
                .field("message", message)
                .finish(),
            Event::Notification {
                op,
                method,
                message,
            } => f
                .debug_struct("Notification")
                .field("op", op)
                .field("method", method)
                .field("message_bytes", &message.len())
                .finish(),
            Event::ToolExcluded { tool, reason } => f
                .debug_struct("ToolExcluded")
                .field("tool", tool)
                .field("reason", reason)
                .finish(),
            Event::Retrying { op, reason } => f
                .debug_struct("Retrying")
                .field("op", op)
                .field("reason", reason)
                .finish(),
            Event::Cancelled { op } => f.debug_struct("Cancelled").field("op", op).finish(),
            Event::Failed { op, error } => f
                .debug_struct("Failed")
                .field("op", op)
                .field("error", error)
                .finish(),
            Event::Subscription(e) => f.debug_tuple("Subscription").field(e).finish(),
            Event::Ignored { reason } => f.debug_struct("Ignored").field("reason", reason).finish(),
            Event::AuthorizationStoreLock { issuer, resource } => f
                .debug_struct("AuthorizationStoreLock")
                .field("issuer", issuer)
                .field("resource", resource)
                .finish(),
            Event::AuthorizationUrl { url } => f
                .debug_struct("AuthorizationUrl")
                .field("url", url)
                .finish(),
            Event::Authorized { grant } => f
                .debug_struct("Authorized")
                .field("issuer", &grant.issuer)
                .field("resource", &grant.resource)
                .field("scope", &grant.tokens.scope)
                .finish_non_exhaustive(),
            Event::AuthorizationProgress { error } => f
                .debug_struct("AuthorizationProgress")
                .field("error", error)
                .finish(),
            Event::AuthorizationFailed { error } => f
                .debug_struct("AuthorizationFailed")
                .field("error", error)
                .finish(),
        }
    }
}

/// An output of the client.
#[derive(Clone, PartialEq)]
pub enum Output {
    /// HTTP: send this request on a new stream and feed its response back under `stream`.
    ///
    /// Ask [`Client::fetch_guard`](super::Client::fetch_guard) for `stream` before sending:
    /// `Some` for the authorization flow's fetches (to URLs a server chose), which must be
    /// checked, resolved and connected to as it says (the DNS rebinding defence; a refusal
    /// is answered with [`Client::handle_fetch_refused`](super::Client::handle_fetch_refused));
    /// `None` for the requests to the configured MCP URL. No stream's redirect is followed
    /// by the driver.
    Http {
        /// The stream.
        stream: StreamId,
        /// The whole request: `POST` (or `GET` resuming a legacy stream, `DELETE` ending a
        /// legacy session) to [`ClientConfig::url`](super::ClientConfig::url), the client's
        /// headers and then the host's extra ones ([`ClientConfig::headers`](super::ClientConfig::headers))
        /// whose names the client did not set, and the JSON body (empty for none). An
        /// authorization fetch instead goes to the URL the flow chose (`GET` or `POST`), with
        /// the flow's headers only.
        request: Request,
    },
    /// HTTP: close this stream (cancels its request, or releases the connection).
    CloseStream(StreamId),
    /// stdio: write this line (a JSON-RPC message; the driver adds the newline).
    Stdio(String),
    /// Something for the host.
    Event(Event),
}

impl fmt::Debug for Output {
    /// Sizes, not bodies: arguments and results may be private.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Output::Http { stream, request } => f
                .debug_struct("Http")
                .field("stream", stream)
                .field("method", &request.method)
                .field("headers", &request.headers)
                .field("body_bytes", &request.body.len())
                .finish(),
            Output::CloseStream(s) => f.debug_tuple("CloseStream").field(s).finish(),
            Output::Stdio(line) => f.debug_struct("Stdio").field("bytes", &line.len()).finish(),
            Output::Event(e) => f.debug_tuple("Event").field(e).finish(),
        }
    }
}

//! Synthesized tunnel failures: the JSON-RPC `-32603` answer a tunnel client posts when no valid
//! MCP error can be recovered from the target, with bounded provenance at
//! `error.data.tunnel_failure` (`protocol.md`, "Structured MCP errors and synthesized tunnel
//! failures"; schema `x-tunnel-failure-schema` in `openapi.json`).
//!
//! A valid JSON-RPC error from the target is never replaced: it is forwarded as received, with
//! the target's HTTP status. This module is only for the other case.
//!
//! [`TunnelFailure`] holds version-1 provenance and its constructors make the combinations the
//! contract forbids impossible to build:
//!
//! - `upstream_status` exists only with source `target_http` and `upstream_response_received:
//!   true`, and is always an error status in `400..=599`;
//! - source `target_http` always carries `upstream_status`;
//! - source `transport_closed` always has `upstream_response_received: false` and no status.
//!
//! Every field is an enum, a boolean or a status number: there is no free-text field, so a URL,
//! a response body, an exception message, a credential or a token cannot reach the object.
//!
//! There is deliberately no `canceled` source. A command canceled locally (its deadline passed,
//! the client is shutting down) never reaches the wire: the engine drops it without posting
//! anything, and the contract keeps `canceled` as a local-log-only diagnostic.

use serde::ser::{Serialize, SerializeStruct, Serializer};
use serde_json::value::RawValue;

use crate::http::status_text;
use crate::jsonrpc::{code, Id, VERSION};

/// The `version` this module writes in every `tunnel_failure` object.
pub const TUNNEL_FAILURE_VERSION: u32 = 1;

/// The tunnel response status of a synthesized failure (`resp_code`). It is the tunnel's own
/// gateway status, not evidence that the target returned it.
pub const SYNTHESIZED_RESP_CODE: u16 = 502;

/// Where a synthesized failure came from (`tunnel_failure.source`, version 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FailureSource {
    /// `target_http`: the target answered with an HTTP error status and no usable JSON-RPC error.
    TargetHttp,
    /// `dns`: the target's host name could not be resolved.
    Dns,
    /// `tls`: the TLS handshake with the target failed.
    Tls,
    /// `connect`: the connection to the target (or the start of its process) failed.
    Connect,
    /// `transport_closed`: the connection or pipe was already closed, or became unusable,
    /// before any target response.
    TransportClosed,
    /// `timeout`: the target did not answer in time (a transport timeout, not the command's
    /// `response_timeout`, which is never answered).
    Timeout,
    /// `protocol`: what came back is not a usable JSON-RPC reply.
    Protocol,
    /// `client_internal`: the tunnel client itself failed.
    ClientInternal,
}

impl FailureSource {
    /// Every source, in the contract's order.
    pub const ALL: [FailureSource; 8] = [
        FailureSource::TargetHttp,
        FailureSource::Dns,
        FailureSource::Tls,
        FailureSource::Connect,
        FailureSource::TransportClosed,
        FailureSource::Timeout,
        FailureSource::Protocol,
        FailureSource::ClientInternal,
    ];

    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureSource::TargetHttp => "target_http",
            FailureSource::Dns => "dns",
            FailureSource::Tls => "tls",
            FailureSource::Connect => "connect",
            FailureSource::TransportClosed => "transport_closed",
            FailureSource::Timeout => "timeout",
            FailureSource::Protocol => "protocol",
            FailureSource::ClientInternal => "client_internal",
        }
    }

    /// The source with this wire spelling; `None` for an unknown (perhaps future) value, which a
    /// reader treats as an unclassified tunnel failure.
    pub fn from_wire(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }
}

/// A fixed, low-cardinality diagnostic label for a synthesized failure
/// (`tunnel_failure.transport_error_kind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TransportErrorKind {
    /// `closed_pipe`: writing to a closed pipe.
    ClosedPipe,
    /// `connection_aborted`: the connection was aborted locally.
    ConnectionAborted,
    /// `connection_closed`: the connection was closed.
    ConnectionClosed,
    /// `connection_refused`: the target refused the connection.
    ConnectionRefused,
    /// `connection_reset`: the peer reset the connection.
    ConnectionReset,
    /// `dial`: opening the connection failed for another reason.
    Dial,
    /// `dns`: name resolution failed.
    Dns,
    /// `eof`: the stream ended.
    Eof,
    /// `host_unreachable`: no route to the host.
    HostUnreachable,
    /// `http_status`: the target's HTTP status was an error.
    HttpStatus,
    /// `invalid_mcp_error`: the body looked like a JSON-RPC error but is not a valid one.
    InvalidMcpError,
    /// `invalid_protocol_response`: the response breaks the MCP transport rules.
    InvalidProtocolResponse,
    /// `malformed_json`: the body is not JSON.
    MalformedJson,
    /// `network_unreachable`: no route to the network.
    NetworkUnreachable,
    /// `non_protocol_response`: the body is JSON but not a JSON-RPC message.
    NonProtocolResponse,
    /// `response_body_missing`: a body was required and none came.
    ResponseBodyMissing,
    /// `response_body_too_large`: the body exceeded the client's limit.
    ResponseBodyTooLarge,
    /// `response_body_unreadable`: reading the body failed.
    ResponseBodyUnreadable,
    /// `timeout`: an I/O timeout.
    Timeout,
    /// `tls`: a TLS error.
    Tls,
    /// `unexpected_eof`: the stream ended in the middle of a message.
    UnexpectedEof,
    /// `unknown`: none of the above.
    Unknown,
}

impl TransportErrorKind {
    /// Every kind, in the contract's (alphabetical) order.
    pub const ALL: [TransportErrorKind; 22] = [
        TransportErrorKind::ClosedPipe,
        TransportErrorKind::ConnectionAborted,
        TransportErrorKind::ConnectionClosed,
        TransportErrorKind::ConnectionRefused,
        TransportErrorKind::ConnectionReset,
        TransportErrorKind::Dial,
        TransportErrorKind::Dns,
        TransportErrorKind::Eof,
        TransportErrorKind::HostUnreachable,
        TransportErrorKind::HttpStatus,
        TransportErrorKind::InvalidMcpError,
        TransportErrorKind::InvalidProtocolResponse,
        TransportErrorKind::MalformedJson,
        TransportErrorKind::NetworkUnreachable,
        TransportErrorKind::NonProtocolResponse,
        TransportErrorKind::ResponseBodyMissing,
        TransportErrorKind::ResponseBodyTooLarge,
        TransportErrorKind::ResponseBodyUnreadable,
        TransportErrorKind::Timeout,
        TransportErrorKind::Tls,
        TransportErrorKind::UnexpectedEof,
        TransportErrorKind::Unknown,
    ];

    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            TransportErrorKind::ClosedPipe => "closed_pipe",
            TransportErrorKind::ConnectionAborted => "connection_aborted",
            TransportErrorKind::ConnectionClosed => "connection_closed",
            TransportErrorKind::ConnectionRefused => "connection_refused",
            TransportErrorKind::ConnectionReset => "connection_reset",
            TransportErrorKind::Dial => "dial",
            TransportErrorKind::Dns => "dns",
            TransportErrorKind::Eof => "eof",
            TransportErrorKind::HostUnreachable => "host_unreachable",
            TransportErrorKind::HttpStatus => "http_status",
            TransportErrorKind::InvalidMcpError => "invalid_mcp_error",
            TransportErrorKind::InvalidProtocolResponse => "invalid_protocol_response",
            TransportErrorKind::MalformedJson => "malformed_json",
            TransportErrorKind::NetworkUnreachable => "network_unreachable",
            TransportErrorKind::NonProtocolResponse => "non_protocol_response",
            TransportErrorKind::ResponseBodyMissing => "response_body_missing",
            TransportErrorKind::ResponseBodyTooLarge => "response_body_too_large",
            TransportErrorKind::ResponseBodyUnreadable => "response_body_unreadable",
            TransportErrorKind::Timeout => "timeout",
            TransportErrorKind::Tls => "tls",
            TransportErrorKind::UnexpectedEof => "unexpected_eof",
            TransportErrorKind::Unknown => "unknown",
        }
    }

    /// The kind with this wire spelling; `None` for an unknown (perhaps future) value.
    pub fn from_wire(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }
}

/// Bounded provenance of a synthesized failure (`error.data.tunnel_failure`, version 1).
///
/// Built only through [`TunnelFailure::target_http`], [`TunnelFailure::before_response`] and
/// [`TunnelFailure::protocol`], which uphold the contract's rules (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TunnelFailure {
    source: FailureSource,
    transport_error_kind: Option<TransportErrorKind>,
    upstream_response_received: bool,
    upstream_status: Option<u16>,
}

impl TunnelFailure {
    /// An actual target HTTP error response (`400..=599`) from which no valid JSON-RPC error
    /// could be recovered; `kind` is usually [`TransportErrorKind::HttpStatus`].
    ///
    /// `upstream_status` may only hold an error status, so any other status (a `1xx`, `2xx` or
    /// `3xx` that still gave no usable reply, or a number outside HTTP's range) yields a
    /// [`FailureSource::Protocol`] failure instead: a response was received, so
    /// `upstream_response_received` is `true`, and no `upstream_status` is recorded. `kind` is
    /// kept either way.
    pub fn target_http(status: u16, kind: Option<TransportErrorKind>) -> Self {
        let is_error_status = (400..=599).contains(&status);
        TunnelFailure {
            source: if is_error_status {
                FailureSource::TargetHttp
            } else {
                FailureSource::Protocol
            },
            transport_error_kind: kind,
            upstream_response_received: true,
            upstream_status: is_error_status.then_some(status),
        }
    }

    /// A failure before any target response (`dns`, `tls`, `connect`, `transport_closed`,
    /// `timeout`, `client_internal`, or a `protocol` failure that involved no HTTP response,
    /// such as an unusable stdio frame): `upstream_response_received` is `false` and there is no
    /// `upstream_status`.
    ///
    /// [`FailureSource::TargetHttp`] claims a target response by definition, so it cannot
    /// describe a failure before one: passing it here is a caller bug, recorded as
    /// [`FailureSource::ClientInternal`] (with `kind` kept) rather than as invalid provenance.
    pub fn before_response(source: FailureSource, kind: Option<TransportErrorKind>) -> Self {
        let source = match source {
            FailureSource::TargetHttp => FailureSource::ClientInternal,
            other => other,
        };
        TunnelFailure {
            source,
            transport_error_kind: kind,
            upstream_response_received: false,
            upstream_status: None,
        }
    }

    /// A target response was received but is not a usable JSON-RPC reply: source `protocol`,
    /// `upstream_response_received: true`, no `upstream_status`. Typical kinds are
    /// [`TransportErrorKind::MalformedJson`], [`TransportErrorKind::NonProtocolResponse`],
    /// [`TransportErrorKind::InvalidMcpError`], [`TransportErrorKind::ResponseBodyTooLarge`] and
    /// [`TransportErrorKind::ResponseBodyMissing`].
    pub fn protocol(kind: TransportErrorKind) -> Self {
        TunnelFailure {
            source: FailureSource::Protocol,
            transport_error_kind: Some(kind),
            upstream_response_received: true,
            upstream_status: None,
        }
    }

    /// A target response started (its head arrived) but did not finish in time: source
    /// `timeout`, kind `timeout`, `upstream_response_received: true`, no `upstream_status`.
    pub fn timed_out_after_response() -> Self {
        TunnelFailure {
            source: FailureSource::Timeout,
            transport_error_kind: Some(TransportErrorKind::Timeout),
            upstream_response_received: true,
            upstream_status: None,
        }
    }

    /// The failure source.
    pub fn source(&self) -> FailureSource {
        self.source
    }

    /// The diagnostic kind, if one was given.
    pub fn transport_error_kind(&self) -> Option<TransportErrorKind> {
        self.transport_error_kind
    }

    /// Whether an actual target HTTP response was received.
    pub fn upstream_response_received(&self) -> bool {
        self.upstream_response_received
    }

    /// The target's HTTP error status: `Some` exactly for [`FailureSource::TargetHttp`].
    pub fn upstream_status(&self) -> Option<u16> {
        self.upstream_status
    }

    /// The `tunnel_failure` JSON object. Absent optional members are omitted, never `null`.
    pub fn to_json(&self) -> serde_json::Value {
        let mut obj = serde_json::Map::new();
        obj.insert("version".into(), TUNNEL_FAILURE_VERSION.into());
        obj.insert("source".into(), self.source.as_str().into());
        if let Some(kind) = self.transport_error_kind {
            obj.insert("transport_error_kind".into(), kind.as_str().into());
        }
        obj.insert(
            "upstream_response_received".into(),
            self.upstream_response_received.into(),
        );
        if let Some(status) = self.upstream_status {
            obj.insert("upstream_status".into(), status.into());
        }
        serde_json::Value::Object(obj)
    }
}

impl Serialize for TunnelFailure {
    /// Writes the `tunnel_failure` object with its members in the contract's order (`version`,
    /// `source`, `transport_error_kind`, `upstream_response_received`, `upstream_status`).
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let len = 3
            + usize::from(self.transport_error_kind.is_some())
            + usize::from(self.upstream_status.is_some());
        let mut st = s.serialize_struct("TunnelFailure", len)?;
        st.serialize_field("version", &TUNNEL_FAILURE_VERSION)?;
        st.serialize_field("source", self.source.as_str())?;
        if let Some(kind) = self.transport_error_kind {
            st.serialize_field("transport_error_kind", kind.as_str())?;
        }
        st.serialize_field(
            "upstream_response_received",
            &self.upstream_response_received,
        )?;
        if let Some(status) = self.upstream_status {
            st.serialize_field("upstream_status", &status)?;
        }
        st.end()
    }
}

/// A synthesized failure, ready for a `jsonrpc_response` payload.
#[derive(Debug)]
pub struct Synthesized {
    /// The JSON-RPC error response: `-32603`, message [`status_text`] of `resp_code`
    /// (`"Bad Gateway"`), `data.tunnel_failure`, and the forwarded request's id (`null` when
    /// unknown).
    pub resp_json: Box<RawValue>,
    /// The tunnel response status, [`SYNTHESIZED_RESP_CODE`].
    pub resp_code: u16,
}

/// Where a transport error stopped a forward to an HTTP MCP server. The driver knows where its
/// HTTP client failed; [`transport_failure`] decides the provenance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TransportStage {
    /// Resolving the server's name.
    Resolve,
    /// Opening the connection.
    Connect,
    /// The TLS handshake.
    Tls,
    /// Writing the request or waiting for the response head (the connection was open).
    Exchange,
    /// Reading the body after the response head arrived.
    Body,
}

/// The provenance of a transport error at `stage`, refined by the OS error kind when known:
///
/// - resolve: `dns`; TLS: `tls`;
/// - connect: `connect` with `connection_refused`, `host_unreachable`, `network_unreachable` or
///   `dial`, or `timeout` when the connect timed out;
/// - exchange: `transport_closed` (`connection_reset`, `connection_aborted`, `closed_pipe`,
///   `eof`, `connection_closed`), or `timeout`;
/// - body: a response was received, so `protocol` with `response_body_unreadable`.
///
/// Every failure before the body has `upstream_response_received: false`.
pub fn transport_failure(stage: TransportStage, io: Option<std::io::ErrorKind>) -> TunnelFailure {
    use std::io::ErrorKind as K;
    use FailureSource as S;
    use TransportErrorKind as T;
    let before = TunnelFailure::before_response;
    match stage {
        TransportStage::Resolve => before(S::Dns, Some(T::Dns)),
        TransportStage::Tls => before(S::Tls, Some(T::Tls)),
        TransportStage::Connect => match io {
            Some(K::ConnectionRefused) => before(S::Connect, Some(T::ConnectionRefused)),
            Some(K::HostUnreachable) => before(S::Connect, Some(T::HostUnreachable)),
            Some(K::NetworkUnreachable) => before(S::Connect, Some(T::NetworkUnreachable)),
            Some(K::TimedOut | K::WouldBlock) => before(S::Timeout, Some(T::Timeout)),
            _ => before(S::Connect, Some(T::Dial)),
        },
        TransportStage::Exchange => match io {
            Some(K::ConnectionReset) => before(S::TransportClosed, Some(T::ConnectionReset)),
            Some(K::ConnectionAborted) => before(S::TransportClosed, Some(T::ConnectionAborted)),
            Some(K::BrokenPipe) => before(S::TransportClosed, Some(T::ClosedPipe)),
            Some(K::UnexpectedEof) => before(S::TransportClosed, Some(T::Eof)),
            Some(K::TimedOut | K::WouldBlock) => before(S::Timeout, Some(T::Timeout)),
            _ => before(S::TransportClosed, Some(T::ConnectionClosed)),
        },
        TransportStage::Body => TunnelFailure::protocol(T::ResponseBodyUnreadable),
    }
}

/// Builds the synthesized `-32603` error response for the forwarded request `id` (`None` gives
/// `"id": null`) carrying `failure` at `error.data.tunnel_failure`.
pub fn synthesize(id: Option<&Id>, failure: &TunnelFailure) -> Synthesized {
    #[derive(serde::Serialize)]
    struct Data<'a> {
        tunnel_failure: &'a TunnelFailure,
    }
    #[derive(serde::Serialize)]
    struct Error<'a> {
        code: i64,
        message: &'static str,
        data: Data<'a>,
    }
    #[derive(serde::Serialize)]
    struct Response<'a> {
        jsonrpc: &'static str,
        id: Option<&'a Id>,
        error: Error<'a>,
    }
    let resp_code = SYNTHESIZED_RESP_CODE;
    let out = Response {
        jsonrpc: VERSION,
        id,
        error: Error {
            code: code::INTERNAL_ERROR,
            message: status_text(resp_code),
            data: Data {
                tunnel_failure: failure,
            },
        },
    };
    // Strings, integers and booleans under string keys always serialize; the `null` fallback is
    // unreachable and only keeps this function free of panics.
    let resp_json =
        serde_json::value::to_raw_value(&out).unwrap_or_else(|_| RawValue::NULL.to_owned());
    Synthesized {
        resp_json,
        resp_code,
    }
}

#[cfg(test)]
mod transport_failure_tests {
    use super::*;
    use std::io::ErrorKind as K;

    #[test]
    fn a_refused_connect_is_a_connect_failure_without_an_upstream_response() {
        let f = transport_failure(TransportStage::Connect, Some(K::ConnectionRefused));
        assert_eq!(f.source(), FailureSource::Connect);
        assert_eq!(
            f.transport_error_kind(),
            Some(TransportErrorKind::ConnectionRefused)
        );
        assert!(!f.upstream_response_received());
    }

    #[test]
    fn a_reset_before_the_head_is_transport_closed_and_a_body_error_is_protocol() {
        let f = transport_failure(TransportStage::Exchange, Some(K::ConnectionReset));
        assert_eq!(f.source(), FailureSource::TransportClosed);
        assert!(!f.upstream_response_received());
        let f = transport_failure(TransportStage::Body, Some(K::ConnectionReset));
        assert_eq!(f.source(), FailureSource::Protocol);
        assert!(f.upstream_response_received());
    }

    #[test]
    fn timeouts_resolution_and_tls_have_their_own_sources() {
        let t = transport_failure(TransportStage::Exchange, Some(K::TimedOut));
        assert_eq!(t.source(), FailureSource::Timeout);
        let t = transport_failure(TransportStage::Connect, Some(K::TimedOut));
        assert_eq!(t.source(), FailureSource::Timeout);
        assert_eq!(
            transport_failure(TransportStage::Resolve, None).source(),
            FailureSource::Dns
        );
        assert_eq!(
            transport_failure(TransportStage::Tls, None).source(),
            FailureSource::Tls
        );
        assert_eq!(
            transport_failure(TransportStage::Connect, None).transport_error_kind(),
            Some(TransportErrorKind::Dial)
        );
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::jsonrpc::Message;
    use proptest::prelude::*;
    use serde_json::{json, Value};

    /// The contract's `x-known-values` for `source`, copied from `openapi.json`.
    const CONTRACT_SOURCES: [&str; 8] = [
        "target_http",
        "dns",
        "tls",
        "connect",
        "transport_closed",
        "timeout",
        "protocol",
        "client_internal",
    ];

    /// The contract's `x-known-values` for `transport_error_kind`, copied from `openapi.json`.
    const CONTRACT_KINDS: [&str; 22] = [
        "closed_pipe",
        "connection_aborted",
        "connection_closed",
        "connection_refused",
        "connection_reset",
        "dial",
        "dns",
        "eof",
        "host_unreachable",
        "http_status",
        "invalid_mcp_error",
        "invalid_protocol_response",
        "malformed_json",
        "network_unreachable",
        "non_protocol_response",
        "response_body_missing",
        "response_body_too_large",
        "response_body_unreadable",
        "timeout",
        "tls",
        "unexpected_eof",
        "unknown",
    ];

    fn any_kind() -> impl Strategy<Value = Option<TransportErrorKind>> {
        prop_oneof![
            Just(None),
            (0..TransportErrorKind::ALL.len()).prop_map(|i| Some(TransportErrorKind::ALL[i])),
        ]
    }

    fn any_source() -> impl Strategy<Value = FailureSource> {
        (0..FailureSource::ALL.len()).prop_map(|i| FailureSource::ALL[i])
    }

    /// Every way to build a failure, with arbitrary arguments.
    fn any_failure() -> impl Strategy<Value = TunnelFailure> {
        prop_oneof![
            (any::<u16>(), any_kind()).prop_map(|(s, k)| TunnelFailure::target_http(s, k)),
            (any_source(), any_kind()).prop_map(|(s, k)| TunnelFailure::before_response(s, k)),
            (0..TransportErrorKind::ALL.len())
                .prop_map(|i| TunnelFailure::protocol(TransportErrorKind::ALL[i])),
        ]
    }

    fn parse(s: &Synthesized) -> Value {
        serde_json::from_str(s.resp_json.get()).unwrap()
    }

    #[test]
    fn source_names_are_the_contract_known_values() {
        let ours: Vec<&str> = FailureSource::ALL.iter().map(|s| s.as_str()).collect();
        assert_eq!(ours, CONTRACT_SOURCES);
        for s in FailureSource::ALL {
            assert_eq!(FailureSource::from_wire(s.as_str()), Some(s));
        }
        assert_eq!(FailureSource::from_wire("canceled"), None);
        assert_eq!(FailureSource::from_wire("TARGET_HTTP"), None);
    }

    #[test]
    fn transport_error_kind_names_are_the_contract_known_values() {
        let ours: Vec<&str> = TransportErrorKind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(ours, CONTRACT_KINDS);
        for k in TransportErrorKind::ALL {
            assert_eq!(TransportErrorKind::from_wire(k.as_str()), Some(k));
        }
        assert_eq!(TransportErrorKind::from_wire("broken"), None);
    }

    #[test]
    fn there_is_no_canceled_source_because_canceled_commands_are_never_posted() {
        assert!(FailureSource::ALL.iter().all(|s| s.as_str() != "canceled"));
        assert!(TransportErrorKind::ALL
            .iter()
            .all(|k| k.as_str() != "canceled"));
    }

    #[test]
    fn target_http_carries_the_upstream_status_and_a_received_response() {
        for status in [400, 401, 404, 429, 500, 502, 599] {
            let f = TunnelFailure::target_http(status, Some(TransportErrorKind::HttpStatus));
            assert_eq!(f.source(), FailureSource::TargetHttp);
            assert_eq!(f.upstream_status(), Some(status));
            assert!(f.upstream_response_received());
            assert_eq!(
                f.transport_error_kind(),
                Some(TransportErrorKind::HttpStatus)
            );
        }
    }

    #[test]
    fn target_http_status_outside_400_to_599_becomes_protocol_without_status() {
        for status in [0, 100, 101, 200, 204, 302, 399, 600, 999, u16::MAX] {
            let f = TunnelFailure::target_http(status, Some(TransportErrorKind::HttpStatus));
            assert_eq!(f.source(), FailureSource::Protocol, "status {status}");
            assert_eq!(f.upstream_status(), None);
            assert!(f.upstream_response_received());
            assert_eq!(
                f.transport_error_kind(),
                Some(TransportErrorKind::HttpStatus)
            );
        }
    }

    #[test]
    fn before_response_never_claims_a_response_or_a_status() {
        for source in FailureSource::ALL {
            for kind in [None, Some(TransportErrorKind::Unknown)] {
                let f = TunnelFailure::before_response(source, kind);
                assert!(!f.upstream_response_received());
                assert_eq!(f.upstream_status(), None);
                assert_eq!(f.transport_error_kind(), kind);
                if source != FailureSource::TargetHttp {
                    assert_eq!(f.source(), source);
                }
            }
        }
    }

    #[test]
    fn before_response_with_target_http_is_recorded_as_client_internal() {
        let f = TunnelFailure::before_response(
            FailureSource::TargetHttp,
            Some(TransportErrorKind::HttpStatus),
        );
        assert_eq!(f.source(), FailureSource::ClientInternal);
        assert_eq!(
            f.transport_error_kind(),
            Some(TransportErrorKind::HttpStatus)
        );
    }

    #[test]
    fn transport_closed_is_never_received_and_has_no_status() {
        let f = TunnelFailure::before_response(
            FailureSource::TransportClosed,
            Some(TransportErrorKind::ClosedPipe),
        );
        assert_eq!(f.source(), FailureSource::TransportClosed);
        assert!(!f.upstream_response_received());
        assert_eq!(f.upstream_status(), None);
        assert_eq!(
            f.to_json(),
            json!({"version": 1, "source": "transport_closed",
                   "transport_error_kind": "closed_pipe", "upstream_response_received": false})
        );
    }

    #[test]
    fn protocol_failure_received_a_response_but_has_no_status() {
        for kind in TransportErrorKind::ALL {
            let f = TunnelFailure::protocol(kind);
            assert_eq!(f.source(), FailureSource::Protocol);
            assert!(f.upstream_response_received());
            assert_eq!(f.upstream_status(), None);
            assert_eq!(f.transport_error_kind(), Some(kind));
        }
    }

    #[test]
    fn to_json_omits_absent_optional_members() {
        let f = TunnelFailure::before_response(FailureSource::Dns, None);
        assert_eq!(
            f.to_json(),
            json!({"version": 1, "source": "dns", "upstream_response_received": false})
        );
        let f = TunnelFailure::target_http(503, None);
        assert_eq!(
            f.to_json(),
            json!({"version": 1, "source": "target_http",
                   "upstream_response_received": true, "upstream_status": 503})
        );
    }

    #[test]
    fn serialize_and_to_json_agree() {
        let f = TunnelFailure::target_http(404, Some(TransportErrorKind::HttpStatus));
        assert_eq!(serde_json::to_value(f).unwrap(), f.to_json());
        assert_eq!(
            serde_json::to_string(&f).unwrap(),
            r#"{"version":1,"source":"target_http","transport_error_kind":"http_status","upstream_response_received":true,"upstream_status":404}"#
        );
    }

    #[test]
    fn synthesized_failure_is_internal_error_bad_gateway_with_the_request_id() {
        let f = TunnelFailure::before_response(
            FailureSource::Connect,
            Some(TransportErrorKind::ConnectionRefused),
        );
        let s = synthesize(Some(&Id::from("rpc_123")), &f);
        assert_eq!(s.resp_code, SYNTHESIZED_RESP_CODE);
        assert_eq!(s.resp_code, 502);
        let v = parse(&s);
        assert_eq!(v["jsonrpc"], "2.0");
        assert_eq!(v["id"], "rpc_123");
        assert_eq!(v["error"]["code"], code::INTERNAL_ERROR);
        assert_eq!(v["error"]["message"], "Bad Gateway");
        assert_eq!(v["error"]["data"]["tunnel_failure"], f.to_json());
        // It is a JSON-RPC error response for the same id.
        match Message::parse(s.resp_json.get()).unwrap() {
            Message::Error { id, error } => {
                assert_eq!(id, Some(Id::from("rpc_123")));
                assert_eq!(error.code, -32603);
            }
            other => panic!("not an error response: {other:?}"),
        }
    }

    #[test]
    fn synthesized_failure_without_a_request_id_has_a_null_id() {
        let f = TunnelFailure::before_response(FailureSource::ClientInternal, None);
        let v = parse(&synthesize(None, &f));
        assert_eq!(v["id"], Value::Null);
        assert!(v.as_object().unwrap().contains_key("id"));
        let v = parse(&synthesize(Some(&Id::Number(7)), &f));
        assert_eq!(v["id"], 7);
    }

    #[test]
    fn synthesized_message_is_the_status_text_of_the_resp_code() {
        let s = synthesize(None, &TunnelFailure::protocol(TransportErrorKind::Eof));
        assert_eq!(parse(&s)["error"]["message"], status_text(s.resp_code));
    }

    #[test]
    fn synthesized_error_data_holds_only_tunnel_failure() {
        let s = synthesize(Some(&Id::Number(1)), &TunnelFailure::target_http(500, None));
        let v = parse(&s);
        let data = v["error"]["data"].as_object().unwrap();
        assert_eq!(data.keys().collect::<Vec<_>>(), ["tunnel_failure"]);
        let err = v["error"].as_object().unwrap();
        let mut keys: Vec<_> = err.keys().cloned().collect();
        keys.sort();
        assert_eq!(keys, ["code", "data", "message"]);
    }

    proptest! {
        #[test]
        fn upstream_status_exists_only_with_target_http_and_a_received_response(f in any_failure()) {
            if let Some(status) = f.upstream_status() {
                prop_assert_eq!(f.source(), FailureSource::TargetHttp);
                prop_assert!(f.upstream_response_received());
                prop_assert!((400..=599).contains(&status));
            }
        }

        #[test]
        fn target_http_always_has_a_status(f in any_failure()) {
            if f.source() == FailureSource::TargetHttp {
                prop_assert!(f.upstream_status().is_some());
                prop_assert!(f.upstream_response_received());
            }
        }

        #[test]
        fn transport_closed_is_never_received_for_any_construction(f in any_failure()) {
            if f.source() == FailureSource::TransportClosed {
                prop_assert!(!f.upstream_response_received());
                prop_assert_eq!(f.upstream_status(), None);
            }
        }

        #[test]
        fn tunnel_failure_json_has_only_bounded_members(f in any_failure()) {
            let v = f.to_json();
            let obj = v.as_object().unwrap();
            for (k, val) in obj {
                match k.as_str() {
                    "version" => prop_assert_eq!(val, &json!(1)),
                    "source" => prop_assert!(CONTRACT_SOURCES.contains(&val.as_str().unwrap())),
                    "transport_error_kind" => {
                        prop_assert!(CONTRACT_KINDS.contains(&val.as_str().unwrap()))
                    }
                    "upstream_response_received" => prop_assert!(val.is_boolean()),
                    "upstream_status" => prop_assert!(val.is_u64()),
                    other => prop_assert!(false, "unexpected member {}", other),
                }
            }
            for required in ["version", "source", "upstream_response_received"] {
                prop_assert!(obj.contains_key(required));
            }
        }

        #[test]
        fn synthesized_response_round_trips_its_failure(f in any_failure(), n in any::<i64>()) {
            let s = synthesize(Some(&Id::from(n)), &f);
            let v = parse(&s);
            prop_assert_eq!(&v["id"], &json!(n));
            prop_assert_eq!(&v["error"]["data"]["tunnel_failure"], &f.to_json());
            prop_assert_eq!(s.resp_code, 502);
        }
    }

    /// One representative failure per source, as the engine builds them.
    fn per_source() -> [(&'static str, TunnelFailure); 8] {
        use TransportErrorKind as K;
        [
            (
                "target_http",
                TunnelFailure::target_http(503, Some(K::HttpStatus)),
            ),
            (
                "dns",
                TunnelFailure::before_response(FailureSource::Dns, Some(K::Dns)),
            ),
            (
                "tls",
                TunnelFailure::before_response(FailureSource::Tls, Some(K::Tls)),
            ),
            (
                "connect",
                TunnelFailure::before_response(FailureSource::Connect, Some(K::ConnectionRefused)),
            ),
            (
                "transport_closed",
                TunnelFailure::before_response(FailureSource::TransportClosed, Some(K::ClosedPipe)),
            ),
            (
                "timeout",
                TunnelFailure::before_response(FailureSource::Timeout, Some(K::Timeout)),
            ),
            ("protocol", TunnelFailure::protocol(K::MalformedJson)),
            (
                "client_internal",
                TunnelFailure::before_response(FailureSource::ClientInternal, None),
            ),
        ]
    }

    #[test]
    fn synthesized_response_snapshots_one_per_source() {
        let all = per_source();
        assert_eq!(
            all.iter().map(|(_, f)| f.source()).collect::<Vec<_>>(),
            FailureSource::ALL
        );
        for (name, f) in all {
            let s = synthesize(Some(&Id::from("rpc_123")), &f);
            assert_eq!(s.resp_code, 502);
            insta::assert_snapshot!(format!("synthesized_{name}"), s.resp_json.get());
        }
    }

    #[test]
    fn synthesized_response_snapshot_with_null_id() {
        let s = synthesize(
            None,
            &TunnelFailure::before_response(
                FailureSource::TransportClosed,
                Some(TransportErrorKind::ConnectionReset),
            ),
        );
        insta::assert_snapshot!(s.resp_json.get());
    }
}

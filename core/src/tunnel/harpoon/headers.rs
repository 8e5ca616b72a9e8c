//! The headers of a `call_target` request: what the caller gave, less everything that would
//! let it steer the connection, impersonate a proxy hop or a client address, or smuggle a
//! second request. A dropped header is reported by its [`DroppedClass`], never by its value.
//! `User-Agent` is always ours.
//!
//! Dropped, names compared case-insensitively:
//!
//! - hop-by-hop headers (RFC 9110 section 7.6.1): `Connection`, `Keep-Alive`, `TE`,
//!   `Transfer-Encoding`, `Upgrade`, `Trailer`, `Proxy-Connection`, and every header the
//!   request's own `Connection` header nominates;
//! - `Host` and `Content-Length` (the client sets them from the target and the body);
//! - `Cookie`;
//! - `Proxy-*` (`Proxy-Authorization` among them);
//! - forwarding and client-address headers: `Forwarded`, `Via`, `X-Forwarded-*`, `X-Real-IP`,
//!   `X-Client-IP`, `Client-IP`, `True-Client-IP`, `X-Cluster-Client-IP`, `CF-Connecting-IP`,
//!   `Fastly-Client-IP`, `X-Original-Forwarded-For`, `X-ProxyUser-IP`;
//! - `X-Original-Host` and `X-Host` (forwarding, too), and bare `Proxy` (httpoxy);
//! - headers that ask a backend to route or dispatch otherwise: `X-Original-URL`,
//!   `X-Rewrite-URL`, `X-HTTP-Method-Override`, `X-HTTP-Method`, `X-Method-Override` (the
//!   request goes to exactly the registered URL, with GET, POST or PUT);
//! - `Accept-Encoding` (ours is `identity`: the answer is rewritten, so it must be readable),
//!   `Range` and `If-Range` (a partial JSON body could not be rewritten);
//! - `User-Agent` (replaced by ours);
//! - a header whose name is not an HTTP token or whose value holds CR, LF or NUL.

use std::collections::BTreeSet;

/// Why a header was dropped (what is logged and counted; never the value).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DroppedClass {
    /// A hop-by-hop header.
    HopByHop,
    /// Named by the request's `Connection` header.
    ConnectionNominated,
    /// `Host`.
    Host,
    /// `Content-Length`.
    ContentLength,
    /// `Cookie`.
    Cookie,
    /// `Proxy-*`.
    Proxy,
    /// A forwarding or client-address header.
    Forwarding,
    /// `User-Agent` (ours is sent).
    UserAgent,
    /// A URL or method override (`X-Original-URL`, `X-HTTP-Method-Override`, ...).
    Override,
    /// `Accept-Encoding` (ours, `identity`, is sent).
    Encoding,
    /// `Range` or `If-Range`.
    Range,
    /// A name that is not a token, or a value with CR, LF or NUL.
    Invalid,
}

impl DroppedClass {
    /// The class as logs and metrics name it.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            DroppedClass::HopByHop => "hop_by_hop",
            DroppedClass::ConnectionNominated => "connection_nominated",
            DroppedClass::Host => "host",
            DroppedClass::ContentLength => "content_length",
            DroppedClass::Cookie => "cookie",
            DroppedClass::Proxy => "proxy",
            DroppedClass::Forwarding => "forwarding",
            DroppedClass::UserAgent => "user_agent",
            DroppedClass::Override => "override",
            DroppedClass::Encoding => "encoding",
            DroppedClass::Range => "range",
            DroppedClass::Invalid => "invalid",
        }
    }
}

/// The headers to send, and what was dropped.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Filtered {
    /// Sent in this order, names and values as the caller wrote them, then `User-Agent`.
    pub kept: Vec<(String, String)>,
    /// One entry per dropped header (ours, `User-Agent`, is not counted unless the caller
    /// sent one).
    pub dropped: Vec<DroppedClass>,
}

const HOP_BY_HOP: [&str; 7] = [
    "connection",
    "keep-alive",
    "te",
    "transfer-encoding",
    "upgrade",
    "trailer",
    "proxy-connection",
];

const FORWARDING: [&str; 13] = [
    "forwarded",
    "x-original-host",
    "x-host",
    "via",
    "x-real-ip",
    "x-client-ip",
    "client-ip",
    "true-client-ip",
    "x-cluster-client-ip",
    "cf-connecting-ip",
    "fastly-client-ip",
    "x-original-forwarded-for",
    "x-proxyuser-ip",
];

const OVERRIDES: [&str; 5] = [
    "x-original-url",
    "x-rewrite-url",
    "x-http-method-override",
    "x-http-method",
    "x-method-override",
];

/// What happens to a header named `name` (lowercase), `None` when it is kept.
fn class_of(lower: &str, nominated: &BTreeSet<String>) -> Option<DroppedClass> {
    if HOP_BY_HOP.contains(&lower) {
        return Some(DroppedClass::HopByHop);
    }
    if lower == "proxy" || lower.starts_with("proxy-") {
        return Some(DroppedClass::Proxy);
    }
    if OVERRIDES.contains(&lower) {
        return Some(DroppedClass::Override);
    }
    if FORWARDING.contains(&lower) || lower.starts_with("x-forwarded-") {
        return Some(DroppedClass::Forwarding);
    }
    match lower {
        "host" => Some(DroppedClass::Host),
        "content-length" => Some(DroppedClass::ContentLength),
        "cookie" => Some(DroppedClass::Cookie),
        "user-agent" => Some(DroppedClass::UserAgent),
        "accept-encoding" => Some(DroppedClass::Encoding),
        "range" | "if-range" => Some(DroppedClass::Range),
        _ if nominated.contains(lower) => Some(DroppedClass::ConnectionNominated),
        _ => None,
    }
}

/// An HTTP token (RFC 9110 section 5.6.2).
fn is_token(name: &str) -> bool {
    !name.is_empty()
        && name.bytes().all(|c| {
            c.is_ascii_alphanumeric()
                || matches!(
                    c,
                    b'!' | b'#'
                        | b'$'
                        | b'%'
                        | b'&'
                        | b'\''
                        | b'*'
                        | b'+'
                        | b'-'
                        | b'.'
                        | b'^'
                        | b'_'
                        | b'`'
                        | b'|'
                        | b'~'
                )
        })
}

/// Filters a `call_target` request's headers (see the module docs) and adds
/// `Accept-Encoding: identity` and `User-Agent: user_agent`.
#[must_use]
pub fn filter_request_headers(headers: &[(String, String)], user_agent: &str) -> Filtered {
    let nominated: BTreeSet<String> = headers
        .iter()
        .filter(|(name, _)| name.eq_ignore_ascii_case("connection"))
        .flat_map(|(_, value)| value.split(','))
        .map(|token| token.trim().to_ascii_lowercase())
        .filter(|token| !token.is_empty())
        .collect();
    let mut out = Filtered::default();
    for (name, value) in headers {
        if !is_token(name) || value.bytes().any(|c| matches!(c, b'\r' | b'\n' | 0)) {
            out.dropped.push(DroppedClass::Invalid);
            continue;
        }
        match class_of(&name.to_ascii_lowercase(), &nominated) {
            Some(class) => out.dropped.push(class),
            None => out.kept.push((name.clone(), value.clone())),
        }
    }
    out.kept
        .push(("Accept-Encoding".to_owned(), "identity".to_owned()));
    out.kept
        .push(("User-Agent".to_owned(), user_agent.to_owned()));
    out
}

//! `net_policy`: the SSRF rules for every URL a server hands the client.
//!
//! A client fetches URLs that an MCP server chose: the `resource_metadata` of a
//! `WWW-Authenticate` challenge, the `authorization_servers` of the Protected Resource Metadata,
//! the `token_endpoint`, `registration_endpoint` and the rest of the authorization server's
//! metadata, and icons. A malicious server can point any of them at the network the client runs
//! in: a cloud metadata service, a database on localhost, an admin page on `10.0.0.1`, a name
//! that resolves there, or a redirect chain that ends there (MCP security best practices,
//! "Server-Side Request Forgery"). It also hands out the authorization URL the user's browser
//! opens, which can be `javascript:` ("OAuth Authorization URL Validation").
//!
//! This module decides; it performs no I/O. The driver resolves names, connects and follows (or
//! not) redirects, and asks here at each step (see `ARCHITECTURE.md`, "Outbound URLs"):
//!
//! 1. [`NetPolicy::check_url`] parses a URL with the WHATWG parser of the [`url`] crate, the
//!    parser browsers use, so `http://2130706433/`, `http://0177.0.0.1/`, `http://0x7f.1/` and
//!    `http://127.1/` are all the address `127.0.0.1` before any rule looks at them, and
//!    percent-encoded or full-width host names are decoded and IDNA-mapped first. No address
//!    is ever judged by matching text (names are compared label by label, and only to find
//!    `localhost`). It returns a [`CheckedUrl`].
//! 2. When the host is a name ([`CheckedUrl::needs_resolution`]), the driver resolves it and
//!    passes every address to [`NetPolicy::check_resolved`] (or [`NetPolicy::check_addr`]), then
//!    connects to an address that passed, never to the name again: the DNS rebinding defence
//!    (a name that resolved to a public address at check time and to `192.168.1.1` at connect
//!    time).
//! 3. No redirect is followed automatically. For each `Location` the caller chooses to follow,
//!    [`NetPolicy::check_redirect`] resolves it against the previous URL and applies the same
//!    rules, and refuses an `https` to `http` downgrade.
//!
//! # The rules
//!
//! - **Scheme**: `https`. `http` only when the host is loopback and the policy is in
//!   development mode ([`NetPolicy::allow_loopback_http`]; the spec's "explicit opt-out for
//!   development"). Every other scheme is refused by name (`javascript:`, `data:`, `file:`,
//!   `ftp:`, `vbscript:`, ...): an allowlist, not a blocklist.
//! - **No userinfo**: `https://user:pass@host` and `https://good.example@evil.example` (which
//!   goes to `evil.example`) are refused: userinfo hides the real host from a reader and would
//!   send credentials along.
//! - **No control characters or whitespace** anywhere in the string, including the tabs and
//!   newlines that the WHATWG parser would silently drop: they have no place in a URL a server
//!   sends, and they are what shell and header injection payloads look like.
//! - **A host is required.**
//! - **Addresses**: an IP literal host, and every address a name resolves to, is classified by
//!   [`blocked_range`] (the table is in [`addr`]'s docs): loopback, RFC 1918, link-local, CGNAT,
//!   unique-local, multicast, unspecified, broadcast, benchmarking, documentation, IETF
//!   assignments, reserved, the old 6to4 relays, discard-only, Teredo, site-local, IPv6 outside
//!   global unicast, and the cloud metadata services; IPv6 forms that carry an IPv4 address
//!   (IPv4-mapped, IPv4-compatible, NAT64, 6to4) are judged by that IPv4 address.
//! - **Loopback names**: `localhost` and `*.localhost` are loopback without resolving
//!   (RFC 6761), with or without a trailing dot. Any other name may still resolve to loopback,
//!   which step 2 catches.
//!
//! The policy can let two groups through, and nothing else:
//! - [`NetPolicy::allow_loopback_http`] (development mode): loopback addresses and names, over
//!   `http` or `https`. A loopback *name* reached over `http` must then resolve to loopback
//!   addresses only ([`NetPolicy::check_resolved`] enforces it), so `http://localhost` cannot
//!   become cleartext to the Internet through a hostile resolver.
//! - [`NetPolicy::allow_private`]: the private networks ([`BlockedRange::is_private_network`]:
//!   RFC 1918, unique-local IPv6, CGNAT shared space, the NAT64 local-use prefix), for a user who
//!   knowingly targets an internal identity provider. It does not allow `http`, link-local,
//!   site-local, or any metadata service.
//!
//! Some addresses stay refused under every policy: the cloud metadata services (even
//! `fd00:ec2::254`, which is inside the unique-local range `allow_private` opens), `0.0.0.0` and
//! `::` (connecting to them reaches the local host on most systems), and the ranges where no
//! server can live.
//!
//! # The authorization URL
//!
//! The URL of the authorization endpoint with its query ([`UrlPurpose::AuthorizationUrl`]) is
//! never fetched by this client: it is shown to the user and opened in a browser. The spec's
//! "OAuth Authorization URL Validation" asks for exactly the scheme rule above (`https`, or
//! `http` to loopback during local development; `javascript:`, `data:`, `file:`, `vbscript:`
//! and every other scheme refused, by allowlist). Its SSRF section scopes the address ranges to
//! URLs the client *fetches*. So for this purpose:
//! - the scheme, userinfo, control-character and host rules all apply, and loopback stays
//!   development-only (an authorization endpoint on the user's own machine is a local
//!   development setup, or an attack on a local service);
//! - the private networks are **allowed** regardless of [`NetPolicy::allow_private`]: the
//!   request comes from the user's browser, on the user's network, not from the network this
//!   client runs in, and an enterprise identity provider on an intranet address is ordinary;
//! - every other blocked range (link-local, metadata, unspecified, multicast, ...) is still
//!   refused: no browser has a reason to open them;
//! - [`CheckedUrl::needs_resolution`] is `false`: nothing is resolved or connected to.
//!
//! The caller must open [`CheckedUrl::url`]'s serialization (percent-encoded: no spaces, no
//! quotes) with a platform opener that does not go through a shell (the spec's MUST NOT).
//!
//! # Also here
//!
//! - Icons ([`icon`] holds the rules and the driver's duties): [`NetPolicy::check_icon_url`]
//!   (`https` on the server's own origin, or a `data:` image), [`NetPolicy::check_icon_bytes`],
//!   [`sniff_image`], [`MAX_ICON_BYTES`].
//! - [`same_origin`]: scheme, host and port (with defaults), for keeping a user's headers and
//!   tokens on the origin they were meant for.
//! - [`is_network_ref`]: whether a JSON Schema `$ref` points outside its document.

pub mod addr;
pub mod icon;
pub mod proxy;
pub(crate) mod url_check;

use core::net::{IpAddr, SocketAddr};
use std::fmt;

pub use self::addr::{blocked_range, Blocked, BlockedRange, Embedded, Embedding, MetadataService};
/// The CIDR block type of [`Blocked::net`], from the [`ipnet`] crate.
pub use ipnet::IpNet;
/// The parsed URL type of [`CheckedUrl`] and the parse error of [`RejectReason::Unparsable`],
/// from the [`url`] crate, so a caller names them without depending on it.
pub use url::{ParseError, Url};

pub use self::icon::{
    sniff_image, DataIcon, IconRejected, IconSource, ImageKind, MAX_ICON_BYTES, MAX_ICON_URL_LEN,
};

/// The SSRF policy: which special destinations a client may reach. [`Default`] is strict:
/// `https` only, public addresses only.
///
/// See the module docs for what each flag opens and what stays closed under every policy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct NetPolicy {
    /// Development mode: allows loopback destinations (`127.0.0.0/8`, `::1`, `localhost`,
    /// `*.localhost`), and plain `http` to them. Off by default; never for a client deployed on a
    /// server.
    pub allow_loopback_http: bool,
    /// Allows the private networks (RFC 1918, `fc00::/7`, `100.64.0.0/10`, `64:ff9b:1::/48`),
    /// still over `https` only, for a user who knowingly targets an internal identity provider.
    /// Off by default.
    pub allow_private: bool,
    /// Accepts SVG icons. Set it only when the host sanitizes SVG (strips scripts, event
    /// handlers, external references) before it renders one: an SVG can carry executable
    /// content. Off by default.
    pub allow_svg_icons: bool,
}

impl NetPolicy {
    /// The strict policy, the same as [`Default`].
    pub const fn strict() -> Self {
        Self {
            allow_loopback_http: false,
            allow_private: false,
            allow_svg_icons: false,
        }
    }

    /// The strict policy with development mode on: loopback allowed, over `http` too.
    pub const fn development() -> Self {
        Self {
            allow_loopback_http: true,
            ..Self::strict()
        }
    }
}

/// What a URL is for: it names the URL in error messages, and the authorization URL, which is
/// only opened in a browser, follows slightly different rules (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum UrlPurpose {
    /// The Protected Resource Metadata document (`resource_metadata` of a `WWW-Authenticate`
    /// challenge, or the well-known URL derived from the server's).
    ResourceMetadata,
    /// An authorization server: an issuer from `authorization_servers`, or its metadata URL.
    AuthorizationServer,
    /// An endpoint from the authorization server's metadata that the client calls: token,
    /// registration, revocation, JWKS, ...
    MetadataEndpoint,
    /// An icon the client fetches (see [`NetPolicy::check_icon_url`]).
    Icon,
    /// The authorization URL shown to the user and opened in a browser; never fetched by the
    /// client.
    AuthorizationUrl,
    /// A Client ID Metadata Document URL.
    ClientMetadataDocument,
}

impl UrlPurpose {
    /// Whether the client itself connects to URLs of this purpose (every purpose but
    /// [`AuthorizationUrl`](Self::AuthorizationUrl)).
    pub fn is_fetched(self) -> bool {
        !matches!(self, Self::AuthorizationUrl)
    }
}

impl fmt::Display for UrlPurpose {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::ResourceMetadata => "the protected resource metadata URL",
            Self::AuthorizationServer => "an authorization server URL",
            Self::MetadataEndpoint => "an authorization server endpoint (token, registration, ...)",
            Self::Icon => "an icon URL",
            Self::AuthorizationUrl => "the authorization URL to open in the browser",
            Self::ClientMetadataDocument => "a client ID metadata document URL",
        })
    }
}

/// The host of a [`CheckedUrl`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum CheckedHost {
    /// An IP literal (after WHATWG parsing: `http://2130706433/` has the address `127.0.0.1`),
    /// already checked.
    Addr(IpAddr),
    /// A domain name in its ASCII (IDNA) form, lowercase, as the resolver takes it. Its
    /// addresses still need checking ([`NetPolicy::check_resolved`]).
    Name(String),
}

impl fmt::Display for CheckedHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Addr(a) => write!(f, "{a}"),
            Self::Name(n) => f.write_str(n),
        }
    }
}

/// A URL that passed [`NetPolicy::check_url`] or [`NetPolicy::check_redirect`].
///
/// It keeps the parsed [`url::Url`] (send requests to it: its serialization is what was
/// checked) and the string as it was given ([`as_given`](Self::as_given): OAuth compares an
/// issuer as an exact string, never a normalized one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedUrl {
    url: url::Url,
    given: String,
    purpose: UrlPurpose,
    host: CheckedHost,
    port: u16,
}

impl CheckedUrl {
    /// The parsed, normalized URL. Requests go here, never to [`as_given`](Self::as_given): a
    /// different parser could read the original text differently.
    pub fn url(&self) -> &url::Url {
        &self.url
    }

    /// The URL exactly as it was given (for a redirect: the absolute URL the `Location`
    /// resolved to), for exact-string comparisons such as the OAuth `iss` check.
    pub fn as_given(&self) -> &str {
        &self.given
    }

    /// What the URL was checked for.
    pub fn purpose(&self) -> UrlPurpose {
        self.purpose
    }

    /// The host to connect to.
    pub fn host(&self) -> &CheckedHost {
        &self.host
    }

    /// The port to connect to (the scheme's default when the URL names none).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Whether the host is a name whose resolved addresses must each pass
    /// [`NetPolicy::check_resolved`] before the driver connects. `false` for an IP literal (its
    /// address is already checked: [`socket_addr`](Self::socket_addr)) and for the
    /// authorization URL, which the client never connects to.
    pub fn needs_resolution(&self) -> bool {
        matches!(self.host, CheckedHost::Name(_)) && self.purpose.is_fetched()
    }

    /// The address to connect to, when the host is an IP literal.
    pub fn socket_addr(&self) -> Option<SocketAddr> {
        match self.host {
            CheckedHost::Addr(a) => Some(SocketAddr::new(a, self.port)),
            CheckedHost::Name(_) => None,
        }
    }

    /// The parsed URL, by value.
    pub fn into_url(self) -> url::Url {
        self.url
    }
}

/// The rules the destination of one fetch is held to: the [`NetPolicy`] and the
/// [`UrlPurpose`] its URL was checked under. The driver checks the URL again with
/// [`check_url`](Self::check_url), resolves a name, keeps the addresses
/// [`connect_addrs`](Self::connect_addrs) lets through, and connects to one of those, never to
/// the name again (step 2 of the module docs: the DNS rebinding defence).
///
/// `mcp::Client::fetch_guard` gives one for each authorization fetch it asks the driver to
/// make.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FetchGuard {
    /// The policy.
    pub policy: NetPolicy,
    /// What the URL is for.
    pub purpose: UrlPurpose,
}

impl FetchGuard {
    /// [`NetPolicy::check_url`] under this guard's policy and purpose. Send the request to
    /// [`CheckedUrl::url`], the form that was checked.
    pub fn check_url(&self, url: &str) -> Result<CheckedUrl, UrlRejected> {
        self.policy.check_url(url, self.purpose)
    }

    /// The socket addresses the driver may connect to for `url` (a [`CheckedUrl`] from
    /// [`check_url`](Self::check_url)), given the addresses its host `resolved` to.
    ///
    /// - An IP literal host: its own address ([`CheckedUrl::socket_addr`]); `resolved` is not
    ///   looked at (nothing needs resolving).
    /// - A name: each address of `resolved` that passes [`NetPolicy::check_resolved`], in
    ///   order, without duplicates. When none passes, the first refusal (it names the address
    ///   and the range). When `resolved` is empty, an empty list: the name did not resolve,
    ///   which is the driver's error to report.
    pub fn connect_addrs(
        &self,
        url: &CheckedUrl,
        resolved: impl IntoIterator<Item = IpAddr>,
    ) -> Result<Vec<SocketAddr>, UrlRejected> {
        if let Some(addr) = url.socket_addr() {
            return Ok(vec![addr]);
        }
        let mut passed: Vec<SocketAddr> = Vec::new();
        let mut first_refusal = None;
        for addr in resolved {
            match self.policy.check_resolved(url, addr) {
                Ok(a) if !passed.contains(&a) => passed.push(a),
                Ok(_) => {}
                Err(e) => {
                    first_refusal.get_or_insert(e);
                }
            }
        }
        match first_refusal {
            Some(e) if passed.is_empty() => Err(e),
            _ => Ok(passed),
        }
    }
}

/// What a [`UrlRejected`] was about.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Subject {
    /// A URL, as given (truncated, a password in it masked).
    Url(String),
    /// An address passed to [`NetPolicy::check_addr`].
    Addr(IpAddr),
    /// An address the host of a checked URL resolved to.
    Resolved {
        /// The URL (truncated, a password masked).
        url: String,
        /// The address.
        addr: IpAddr,
    },
    /// A redirect.
    Redirect {
        /// The URL that answered with the redirect.
        from: String,
        /// Its `Location`, resolved against `from` when that succeeded.
        to: String,
    },
}

impl fmt::Display for Subject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Url(u) => write!(f, "the URL {u:?}"),
            Self::Addr(a) => write!(f, "the address {a}"),
            Self::Resolved { url, addr } => write!(f, "the address {addr} resolved for {url:?}"),
            Self::Redirect { from, to } => write!(f, "the redirect from {from:?} to {to:?}"),
        }
    }
}

/// Why a URL, address or redirect was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RejectReason {
    /// An ASCII control character or whitespace in the text.
    #[error(
        "it contains a control character or whitespace, which no URL may hold (such text is how \
         shell and header injections look); percent-encode it"
    )]
    ControlOrWhitespace,
    /// Not a valid absolute URL under the WHATWG rules (this includes IPv6 zone identifiers
    /// such as `[fe80::1%25eth0]`, which the WHATWG URL standard does not accept).
    #[error("it is not a valid absolute URL: {0}")]
    Unparsable(url::ParseError),
    /// A scheme other than `https` (and `http`, see [`InsecureHttp`](Self::InsecureHttp)).
    #[error(
        "the scheme {scheme:?} is not allowed: only https, or http to a loopback host in \
         development mode"
    )]
    SchemeNotAllowed {
        /// The scheme, lowercase.
        scheme: String,
    },
    /// Plain `http` to a host that is not loopback, or any `http` outside development mode.
    #[error(
        "plain http is allowed only to a loopback host in development mode \
         (NetPolicy::allow_loopback_http); use https"
    )]
    InsecureHttp,
    /// A user name or password before the host.
    #[error(
        "it carries a user name or password before the host (user@host), which hides the host \
         it really names (https://good.example@evil.example goes to evil.example) and would \
         send credentials along; remove it"
    )]
    Userinfo,
    /// No host.
    #[error("it names no host")]
    NoHost,
    /// The address is in a range the policy refuses.
    #[error("its address {addr} {blocked}; {}", blocked.range.remedy())]
    BlockedAddress {
        /// The address (for an IP literal host: as parsed).
        addr: IpAddr,
        /// The range it is in.
        blocked: Blocked,
    },
    /// The host is a loopback name (`localhost`, `*.localhost`) outside development mode.
    #[error(
        "its host {name:?} is a loopback name (RFC 6761: localhost and *.localhost); {}",
        BlockedRange::Loopback.remedy()
    )]
    LoopbackName {
        /// The name.
        name: String,
    },
    /// A redirect from `https` to `http`.
    #[error("it downgrades https to plain http, which would send the request in the clear")]
    Downgrade,
    /// A name that must resolve to loopback (a loopback name, or any host reached over plain
    /// `http`) resolved elsewhere.
    #[error(
        "the host resolved to {addr}, which is not loopback: a loopback name, and any host \
         reached over plain http, must resolve to loopback addresses only"
    )]
    ResolvedNotLoopback {
        /// The address it resolved to.
        addr: IpAddr,
    },
    /// [`NetPolicy::check_resolved`] was given an address other than the URL's own IP literal
    /// (the caller's bug: connect to [`CheckedUrl::socket_addr`]).
    #[error(
        "the URL's host is the address {expected}, not {addr}: connect to the URL's own address"
    )]
    NotTheUrlsAddress {
        /// The URL's address.
        expected: IpAddr,
        /// The address given.
        addr: IpAddr,
    },
    /// An icon rule.
    #[error("{0}")]
    Icon(IconRejected),
}

impl RejectReason {
    /// The blocked range behind the refusal, if it was one (a loopback name counts as
    /// [`BlockedRange::Loopback`]).
    pub fn blocked_range(&self) -> Option<BlockedRange> {
        match self {
            Self::BlockedAddress { blocked, .. } => Some(blocked.range),
            Self::LoopbackName { .. } => Some(BlockedRange::Loopback),
            _ => None,
        }
    }
}

/// A URL, address or redirect the [`NetPolicy`] refused: what it was for, what it was, and why.
///
/// Its message names all three, for example: `refused the URL "http://169.254.169.254/latest"
/// as the protected resource metadata URL: its address 169.254.169.254 is the cloud instance
/// metadata service (AWS, GCP, Azure, Oracle and others); a metadata service is never allowed:
/// ...`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("refused {subject} as {purpose}: {reason}")]
#[non_exhaustive]
pub struct UrlRejected {
    /// What the URL was for.
    pub purpose: UrlPurpose,
    /// The URL, address or redirect.
    pub subject: Subject,
    /// Why.
    pub reason: RejectReason,
}

impl UrlRejected {
    /// The blocked range behind the refusal, if it was one.
    pub fn blocked_range(&self) -> Option<BlockedRange> {
        self.reason.blocked_range()
    }
}

/// Whether two URLs have the same origin: the same scheme, host and port, a missing port read
/// as the scheme's default (`https://a.example` and `https://a.example:443` are one origin).
///
/// Hosts compare as parsed: `https://a.example` and `https://a.example.` (trailing dot) are
/// different origins, as they are to a browser. URLs without a tuple origin (`data:`, `file:`,
/// ...) are never the same origin as anything, not even themselves. A host's headers and tokens
/// go only to the origin they were set for.
pub fn same_origin(a: &url::Url, b: &url::Url) -> bool {
    let origin = a.origin();
    origin.is_tuple() && origin == b.origin()
}

/// Whether a JSON Schema `$ref` points outside the schema that holds it. The client never
/// dereferences such a reference (the spec's MUST NOT): it reports the schema as having an
/// external reference instead.
///
/// Only a same-document reference is local: the empty string or a fragment (`#`, `#/$defs/x`,
/// `#anchor`). Everything else counts as a network reference:
/// - an absolute URI (`https://...`, `file:`, `urn:...`, `tag:...`): even a `urn:` that an `$id`
///   somewhere might name would need a lookup this client does not do;
/// - a relative reference (`other.json#/x`, `//host/schema`, `/schema`): it resolves against the
///   schema's base URI, which for a schema a server sent is the server's or a network URL.
///
/// The rule is deliberately textual and conservative; it never fetches or parses beyond it.
pub fn is_network_ref(reference: &str) -> bool {
    !(reference.is_empty() || reference.starts_with('#'))
}

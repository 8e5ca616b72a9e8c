//! Targets found through OAuth discovery (`--harpoon.oauth-discovery`): from the main MCP
//! server's Protected Resource Metadata and its authorization servers' metadata, the token,
//! registration, revocation, introspection, JWKS and issuer endpoints become targets labelled
//! `oauth-<role>-<n>` (never the authorization endpoint: the user's browser goes there, not
//! the service). Only endpoints whose host passes the [`HostFilter`] are registered. Fetching
//! the documents is the driver's job: [`MetadataDiscovery`] says which URL to fetch next (the
//! authorization code's well-known URLs, each checked with the URL policy) and reads the
//! answers; [`discovered_targets`] turns the documents into targets.

use core::net::IpAddr;
use std::collections::VecDeque;

use serde_json::Value;

use super::targets::{TargetSource, TargetSpec};
use crate::auth::discovery::{
    authorization_server_metadata_urls, protected_resource_metadata_urls, resource_matches,
};
use crate::auth::metadata::{AuthorizationServerMetadata, ProtectedResourceMetadata};
use crate::auth::www_authenticate::BearerChallenge;
use crate::http::{Headers, Method, Request, ResponseHead};
use crate::net_policy::addr::{blocked_range, BlockedRange};
use crate::net_policy::url_check::is_localhost_name;
use crate::net_policy::{NetPolicy, UrlPurpose};

/// A `--harpoon.hosts-include-regex` pattern that does not compile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid harpoon host pattern {pattern:?}: {reason}")]
pub struct HostPatternError {
    /// The pattern as given.
    pub pattern: String,
    /// What the regular expression parser said.
    pub reason: String,
}

/// Compiles a host pattern for [`HostFilter::patterns`]: a regular expression matched against
/// the whole host name, ignoring case (as the Go tunnel-client does).
///
/// # Errors
/// [`HostPatternError`] when it is not a valid expression (or too large).
pub fn host_pattern(pattern: &str) -> Result<regex_lite::Regex, HostPatternError> {
    regex_lite::RegexBuilder::new(&format!("(?i:{})", pattern.trim()))
        .size_limit(1 << 20)
        .build()
        .map_err(|e| HostPatternError {
            pattern: pattern.chars().take(200).collect(),
            reason: e.to_string(),
        })
}

/// Which hosts an endpoint found by discovery may have.
#[derive(Debug, Clone)]
pub struct HostFilter {
    /// Loopback addresses and `localhost` (`--harpoon.hosts-include-loopback`, on by default).
    pub include_loopback: bool,
    /// Private networks as the URL policy counts them: 10/8, 172.16/12, 192.168/16, fc00::/7,
    /// 100.64/10 and the NAT64 local-use prefix (`--harpoon.hosts-include-private`, on by
    /// default). Link-local addresses and cloud metadata services are never included.
    pub include_private: bool,
    /// Host name suffixes (`--harpoon.hosts-include-suffix`, such as `.corp.example`).
    pub suffixes: Vec<String>,
    /// Host name patterns (`--harpoon.hosts-include-regex`), matched against the whole name.
    pub patterns: Vec<regex_lite::Regex>,
    /// The main MCP server's host: it and its subdomains are included.
    pub mcp_host: String,
}

/// Why an endpoint's host was included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inclusion {
    /// The MCP server's own host, or a subdomain of it.
    McpHost,
    /// A loopback address or `localhost`.
    Loopback,
    /// A private address.
    Private,
    /// A configured suffix.
    Suffix,
    /// A configured pattern.
    Pattern,
}

/// The address classes are the URL policy's ([`crate::net_policy::addr`]).
fn is_loopback(ip: IpAddr) -> bool {
    blocked_range(ip).is_some_and(|b| b.range == BlockedRange::Loopback)
}

/// In a special range that neither loopback nor private-network settings open.
fn never_allowed(ip: IpAddr) -> bool {
    blocked_range(ip)
        .is_some_and(|b| b.range != BlockedRange::Loopback && !b.range.is_private_network())
}

fn is_private(ip: IpAddr) -> bool {
    blocked_range(ip).is_some_and(|b| b.range.is_private_network())
}

impl HostFilter {
    /// Why `host` is included, or `None`. `addrs` are what the host name resolved to (all must
    /// be loopback, or all private, for those classes; ignored for an IP literal). A host with
    /// an address in a range no URL policy opens (link-local, cloud metadata, ...) is never
    /// included, whatever else matches.
    #[must_use]
    pub fn classify(&self, host: &str, addrs: &[IpAddr]) -> Option<Inclusion> {
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .trim_end_matches('.')
            .to_ascii_lowercase();
        if host.is_empty() {
            return None;
        }
        let literal = host.parse::<IpAddr>().ok();
        let addrs: Vec<IpAddr> = literal.map_or_else(|| addrs.to_vec(), |ip| vec![ip]);
        // Whatever includes the host, an address no URL policy allows (link-local, a cloud
        // metadata service, multicast, ...) keeps it out.
        if addrs.iter().any(|&ip| never_allowed(ip)) {
            return None;
        }
        let mcp = self.mcp_host.trim_end_matches('.').to_ascii_lowercase();
        if !mcp.is_empty() && (host == mcp || host.ends_with(&format!(".{mcp}"))) {
            return Some(Inclusion::McpHost);
        }
        let all = |f: fn(IpAddr) -> bool| !addrs.is_empty() && addrs.iter().all(|&ip| f(ip));
        if self.include_loopback
            && (all(is_loopback) || (literal.is_none() && is_localhost_name(&host)))
        {
            return Some(Inclusion::Loopback);
        }
        if self.include_private && all(is_private) {
            return Some(Inclusion::Private);
        }
        if literal.is_none() {
            if self.suffixes.iter().any(|s| {
                let s = s.trim().trim_start_matches('.').to_ascii_lowercase();
                !s.is_empty() && (host == s || host.ends_with(&format!(".{s}")))
            }) {
                return Some(Inclusion::Suffix);
            }
            if self.patterns.iter().any(|p| {
                p.find(&host)
                    .is_some_and(|m| m.start() == 0 && m.end() == host.len())
            }) {
                return Some(Inclusion::Pattern);
            }
        }
        None
    }
}

/// The metadata fields that name an endpoint to register, with their role.
const ENDPOINTS: [(&str, &str); 6] = [
    ("token_endpoint", "token"),
    ("registration_endpoint", "registration"),
    ("revocation_endpoint", "revocation"),
    ("introspection_endpoint", "introspection"),
    ("jwks_uri", "jwks"),
    ("issuer", "issuer"),
];

/// The targets `metadata` (authorization server metadata documents, in the order the PRM's
/// `authorization_servers` named them) give, their hosts checked with `filter`; `resolve`
/// gives a host name's addresses (the driver's lookup; empty when it does not resolve).
pub fn discovered_targets(
    metadata: &[Value],
    filter: &HostFilter,
    mut resolve: impl FnMut(&str) -> Vec<IpAddr>,
) -> Vec<TargetSpec> {
    let mut out: Vec<TargetSpec> = Vec::new();
    let mut counts = [0usize; ENDPOINTS.len()];
    for doc in metadata {
        for (i, (field, role)) in ENDPOINTS.iter().enumerate() {
            let Some(url) = doc.get(*field).and_then(Value::as_str) else {
                continue;
            };
            let Ok(parsed) = url::Url::parse(url) else {
                continue;
            };
            let Some(host) = parsed.host_str() else {
                continue;
            };
            let addrs = if host.parse::<IpAddr>().is_ok() || host.starts_with('[') {
                Vec::new()
            } else {
                resolve(host)
            };
            let Some(why) = filter.classify(host, &addrs) else {
                continue;
            };
            if out.iter().any(|s| {
                s.url == url
                    && matches!(&s.source, TargetSource::OauthDiscovery { role } if role == field)
            }) {
                continue;
            }
            counts[i] += 1;
            out.push(TargetSpec {
                label: format!("oauth-{role}-{}", counts[i]),
                url: url.to_owned(),
                description: format!(
                    "The authorization server's {} (found by OAuth discovery; {})",
                    field.replace('_', " "),
                    match why {
                        Inclusion::McpHost => "the MCP server's host",
                        Inclusion::Loopback => "a loopback host",
                        Inclusion::Private => "a private address",
                        Inclusion::Suffix => "an included host suffix",
                        Inclusion::Pattern => "an included host pattern",
                    }
                ),
                source: TargetSource::OauthDiscovery {
                    role: (*field).to_owned(),
                },
                tags: Vec::new(),
            });
        }
    }
    out
}

/// The largest metadata document read, in bytes.
pub const MAX_DOCUMENT_BYTES: u64 = 1024 * 1024;

/// The most authorization servers of one PRM whose metadata is read.
pub const MAX_AUTHORIZATION_SERVERS: usize = 8;

/// The `Accept` header of every discovery request.
const ACCEPT_JSON: &str = "application/json";

/// The `User-Agent` of every discovery request (so a server's logs tell it from MCP traffic).
pub const DISCOVERY_USER_AGENT: &str =
    concat!("mcpwire-harpoon-discovery/", env!("CARGO_PKG_VERSION"));

/// One request [`MetadataDiscovery`] wants sent.
#[derive(Debug, Clone)]
pub struct DiscoveryFetch {
    /// The request (a `GET` of a document, or the first unauthenticated `POST` to the MCP
    /// server, whose `401` may name the PRM).
    pub request: Request,
    /// What the URL is for: the driver fetches it under the URL policy with this purpose;
    /// `None` for the MCP server itself (the operator's own URL, not a server's choice).
    pub purpose: Option<UrlPurpose>,
}

/// What went wrong on the way (discovery never stops the tunnel: these are logged, and the
/// targets found so far are registered). No message holds a URL other than the MCP server's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DiscoveryProblem {
    /// No PRM at any candidate URL.
    #[error("the MCP server has no protected resource metadata (tried {tried})")]
    NoResourceMetadata {
        /// The statuses or failures seen, in order.
        tried: String,
    },
    /// The PRM's `resource` does not name the MCP server.
    #[error("the protected resource metadata's resource does not name the MCP server {server}")]
    ResourceMismatch {
        /// The MCP server's URL.
        server: String,
    },
    /// The PRM names no authorization server.
    #[error("the protected resource metadata names no authorization server")]
    NoAuthorizationServer,
    /// A document did not parse.
    #[error("{what} #{index} is unreadable: {reason}")]
    Unreadable {
        /// Which document.
        what: &'static str,
        /// Which authorization server (1-based; 0 for the PRM).
        index: usize,
        /// Why.
        reason: String,
    },
    /// No metadata for an authorization server.
    #[error("authorization server #{index} has no metadata (tried {tried})")]
    NoServerMetadata {
        /// Which (1-based, in the PRM's order).
        index: usize,
        /// The statuses or failures seen.
        tried: String,
    },
    /// The metadata's `issuer` is not the identifier it was looked up by (RFC 8414 §3.3).
    #[error("authorization server #{index}'s metadata names another issuer")]
    IssuerMismatch {
        /// Which (1-based).
        index: usize,
    },
    /// The URL policy refused a URL.
    #[error("{what} #{index} is refused by the URL policy: {reason}")]
    Refused {
        /// Which URL.
        what: &'static str,
        /// Which authorization server (1-based; 0 for the PRM).
        index: usize,
        /// Why.
        reason: String,
    },
}

#[derive(Debug)]
enum Stage {
    /// The unauthenticated probe of the MCP server is out.
    Probe,
    /// Trying PRM candidates.
    Resource {
        candidates: VecDeque<String>,
        tried: Vec<String>,
    },
    /// Trying the metadata URLs of authorization server `index` (0-based).
    Server {
        index: usize,
        issuer: String,
        candidates: VecDeque<String>,
        tried: Vec<String>,
    },
    Done,
}

/// The OAuth documents of the main MCP server, fetched one at a time: an unauthenticated
/// `POST` to the server (a `401`'s `resource_metadata` comes first), then its Protected
/// Resource Metadata at the RFC 9728 well-known URLs (its `resource` must name the server),
/// then each authorization server's metadata at the RFC 8414 / OpenID Connect URLs (its
/// `issuer` must be the identifier, exactly). A `4xx` tries the next candidate; anything else
/// ends that document's search with a [`DiscoveryProblem`].
///
/// ```text
/// let mut d = MetadataDiscovery::new(server_url, policy)?;
/// while let Some(fetch) = d.next_fetch() {
///     match send(fetch) { Ok((head, body)) => d.handle_response(&head, &body), Err(e) => d.handle_failed(&e) }
/// }
/// let targets = discovered_targets(d.metadata(), &filter, resolve);
/// ```
#[derive(Debug)]
pub struct MetadataDiscovery {
    server_url: String,
    policy: NetPolicy,
    stage: Stage,
    out: Option<DiscoveryFetch>,
    awaiting: bool,
    issuers: Vec<String>,
    metadata: Vec<Value>,
    problems: Vec<DiscoveryProblem>,
    /// Added to every request to the MCP server's origin (`--mcp.extra-headers`).
    server_headers: Vec<(String, crate::tunnel::engine::Secret)>,
}

impl MetadataDiscovery {
    /// Adds `headers` (the operator's `--mcp.extra-headers`) to every discovery request to the
    /// MCP server's own origin, on any path, as the Go client does; never to another origin
    /// (an authorization server's).
    #[must_use]
    pub fn with_server_headers(
        mut self,
        headers: Vec<(String, crate::tunnel::engine::Secret)>,
    ) -> Self {
        self.server_headers = headers;
        self
    }

    /// Discovery for the MCP server at `server_url`; the documents' URLs are checked with
    /// `policy`.
    ///
    /// # Errors
    /// [`crate::auth::discovery::NotAnOrigin`] when `server_url` is not an absolute http(s) URL.
    pub fn new(
        server_url: &str,
        policy: NetPolicy,
    ) -> Result<Self, crate::auth::discovery::NotAnOrigin> {
        protected_resource_metadata_urls(server_url)?;
        let mut headers = Headers::new();
        let _ = headers.append("Content-Type", "application/json");
        let _ = headers.append("Accept", "application/json, text/event-stream");
        let _ = headers.append("User-Agent", DISCOVERY_USER_AGENT);
        let probe = Request {
            method: Method::Post,
            url: server_url.to_owned(),
            headers,
            body: br#"{"jsonrpc":"2.0","id":0,"method":"ping"}"#.to_vec(),
        };
        Ok(MetadataDiscovery {
            server_url: server_url.to_owned(),
            policy,
            stage: Stage::Probe,
            out: Some(DiscoveryFetch {
                request: probe,
                purpose: None,
            }),
            awaiting: false,
            issuers: Vec::new(),
            metadata: Vec::new(),
            problems: Vec::new(),
            server_headers: Vec::new(),
        })
    }

    /// The next request to send, or `None` when discovery is over (or an answer is awaited).
    pub fn next_fetch(&mut self) -> Option<DiscoveryFetch> {
        if self.awaiting {
            return None;
        }
        let mut f = self.out.take()?;
        self.awaiting = true;
        if super::server::same_origin_urls(&f.request.url, &self.server_url) {
            crate::tunnel::forward_headers::add_extra_headers(
                &mut f.request.headers,
                &self.server_headers,
            );
        }
        Some(f)
    }

    /// Whether discovery is over.
    pub fn is_done(&self) -> bool {
        matches!(self.stage, Stage::Done)
    }

    /// The authorization servers' metadata found, in the PRM's order (for
    /// [`discovered_targets`]).
    pub fn metadata(&self) -> &[Value] {
        &self.metadata
    }

    /// What went wrong on the way.
    pub fn problems(&self) -> &[DiscoveryProblem] {
        &self.problems
    }

    /// The answer to the last fetch (`body` at most [`MAX_DOCUMENT_BYTES`]: the driver stops
    /// reading there).
    pub fn handle_response(&mut self, head: &ResponseHead, body: &[u8]) {
        if !std::mem::take(&mut self.awaiting) {
            return;
        }
        match std::mem::replace(&mut self.stage, Stage::Done) {
            Stage::Probe => {
                let from_header = if head.status == 401 {
                    BearerChallenge::from_headers(head.headers.get_all("www-authenticate"))
                        .ok()
                        .flatten()
                        .and_then(|c| c.resource_metadata)
                } else {
                    None
                };
                let mut candidates = VecDeque::new();
                candidates.extend(from_header);
                if let Ok(urls) = protected_resource_metadata_urls(&self.server_url) {
                    for u in urls {
                        if !candidates.contains(&u) {
                            candidates.push_back(u);
                        }
                    }
                }
                self.stage = Stage::Resource {
                    candidates,
                    tried: Vec::new(),
                };
                self.advance();
            }
            Stage::Resource {
                candidates,
                mut tried,
            } => {
                if head.status != 200 {
                    tried.push(head.status.to_string());
                    if (400..500).contains(&head.status) {
                        self.stage = Stage::Resource { candidates, tried };
                        return self.advance();
                    }
                    self.problems.push(DiscoveryProblem::NoResourceMetadata {
                        tried: tried.join(", "),
                    });
                    return;
                }
                let prm = match ProtectedResourceMetadata::parse(body) {
                    Ok(prm) => prm,
                    Err(e) => {
                        return self.problems.push(DiscoveryProblem::Unreadable {
                            what: "the protected resource metadata",
                            index: 0,
                            reason: e.to_string(),
                        })
                    }
                };
                if !resource_matches(&prm.resource, &self.server_url) {
                    return self.problems.push(DiscoveryProblem::ResourceMismatch {
                        server: self.server_url.clone(),
                    });
                }
                if prm.authorization_servers.is_empty() {
                    return self.problems.push(DiscoveryProblem::NoAuthorizationServer);
                }
                self.issuers = prm
                    .authorization_servers
                    .into_iter()
                    .take(MAX_AUTHORIZATION_SERVERS)
                    .collect();
                self.start_server(0);
            }
            Stage::Server {
                index,
                issuer,
                candidates,
                mut tried,
            } => {
                if head.status != 200 {
                    tried.push(head.status.to_string());
                    if (400..500).contains(&head.status) {
                        self.stage = Stage::Server {
                            index,
                            issuer,
                            candidates,
                            tried,
                        };
                        return self.advance();
                    }
                    self.problems.push(DiscoveryProblem::NoServerMetadata {
                        index: index + 1,
                        tried: tried.join(", "),
                    });
                    return self.start_server(index + 1);
                }
                match AuthorizationServerMetadata::parse(body) {
                    // RFC 8414 §3.3: identical, as strings.
                    Ok(m) if m.issuer == issuer => self.metadata.push(Value::Object(m.raw)),
                    Ok(_) => self
                        .problems
                        .push(DiscoveryProblem::IssuerMismatch { index: index + 1 }),
                    Err(e) => self.problems.push(DiscoveryProblem::Unreadable {
                        what: "authorization server metadata",
                        index: index + 1,
                        reason: e.to_string(),
                    }),
                }
                self.start_server(index + 1);
            }
            Stage::Done => {}
        }
    }

    /// The last fetch failed (`cause`: connection refused, a timeout, the URL policy refused
    /// the address it resolved to, ...).
    pub fn handle_failed(&mut self, cause: &str) {
        if !std::mem::take(&mut self.awaiting) {
            return;
        }
        let cause = format!("failed: {}", cause.chars().take(200).collect::<String>());
        match std::mem::replace(&mut self.stage, Stage::Done) {
            // No answer from the MCP server: the well-known URLs are on it too.
            Stage::Probe => {
                self.problems
                    .push(DiscoveryProblem::NoResourceMetadata { tried: cause });
            }
            Stage::Resource { mut tried, .. } => {
                tried.push(cause);
                self.problems.push(DiscoveryProblem::NoResourceMetadata {
                    tried: tried.join(", "),
                });
            }
            Stage::Server {
                index, mut tried, ..
            } => {
                tried.push(cause);
                self.problems.push(DiscoveryProblem::NoServerMetadata {
                    index: index + 1,
                    tried: tried.join(", "),
                });
                self.start_server(index + 1);
            }
            Stage::Done => {}
        }
    }

    fn start_server(&mut self, index: usize) {
        let Some(issuer) = self.issuers.get(index).cloned() else {
            self.stage = Stage::Done;
            return;
        };
        match authorization_server_metadata_urls(&issuer) {
            Ok(urls) => {
                self.stage = Stage::Server {
                    index,
                    issuer,
                    candidates: urls.into(),
                    tried: Vec::new(),
                };
                self.advance();
            }
            Err(e) => {
                self.problems.push(DiscoveryProblem::Refused {
                    what: "authorization server",
                    index: index + 1,
                    reason: e.reason,
                });
                self.start_server(index + 1);
            }
        }
    }

    /// Queues the next candidate of the current stage (checked with the URL policy), or ends
    /// the stage.
    fn advance(&mut self) {
        loop {
            let (url, purpose, index) = match &mut self.stage {
                Stage::Resource { candidates, tried } => match candidates.pop_front() {
                    Some(u) => (u, UrlPurpose::ResourceMetadata, 0),
                    None => {
                        let tried = tried.join(", ");
                        self.stage = Stage::Done;
                        return self
                            .problems
                            .push(DiscoveryProblem::NoResourceMetadata { tried });
                    }
                },
                Stage::Server {
                    index,
                    candidates,
                    tried,
                    ..
                } => match candidates.pop_front() {
                    Some(u) => (u, UrlPurpose::AuthorizationServer, *index + 1),
                    None => {
                        let (i, tried) = (*index, tried.join(", "));
                        self.problems.push(DiscoveryProblem::NoServerMetadata {
                            index: i + 1,
                            tried,
                        });
                        return self.start_server(i + 1);
                    }
                },
                Stage::Probe | Stage::Done => return,
            };
            match self.policy.check_url(&url, purpose) {
                Ok(checked) => {
                    let mut headers = Headers::new();
                    let _ = headers.append("Accept", ACCEPT_JSON);
                    let _ = headers.append("User-Agent", DISCOVERY_USER_AGENT);
                    self.out = Some(DiscoveryFetch {
                        request: Request {
                            method: Method::Get,
                            url: checked.url().to_string(),
                            headers,
                            body: Vec::new(),
                        },
                        purpose: Some(purpose),
                    });
                    return;
                }
                Err(rejected) => {
                    let what = if index == 0 {
                        "the protected resource metadata URL"
                    } else {
                        "an authorization server metadata URL"
                    };
                    self.problems.push(DiscoveryProblem::Refused {
                        what,
                        index,
                        reason: rejected.reason.to_string(),
                    });
                    if let Stage::Resource { tried, .. } | Stage::Server { tried, .. } =
                        &mut self.stage
                    {
                        tried.push("refused".into());
                    }
                }
            }
        }
    }
}

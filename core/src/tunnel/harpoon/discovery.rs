//! Targets found through OAuth discovery (`--harpoon.oauth-discovery`): from the main MCP
//! server's Protected Resource Metadata and its authorization servers' metadata, the token,
//! registration, revocation, introspection, JWKS and issuer endpoints become targets labelled
//! `oauth-<role>-<n>` (never the authorization endpoint: the user's browser goes there, not
//! the service). Only endpoints whose host passes the [`HostFilter`] are registered. Fetching
//! the documents is the driver's job, with the authorization code's discovery and URL policy.

use core::net::IpAddr;

use serde_json::Value;

use super::targets::{TargetSource, TargetSpec};
use crate::net_policy::addr::{blocked_range, BlockedRange};
use crate::net_policy::url_check::is_localhost_name;

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
    pub patterns: Vec<regex::Regex>,
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

fn is_private(ip: IpAddr) -> bool {
    blocked_range(ip).is_some_and(|b| b.range.is_private_network())
}

impl HostFilter {
    /// Why `host` is included, or `None`. `addrs` are what the host name resolved to (all must
    /// be loopback, or all private, for those classes; ignored for an IP literal).
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
        let mcp = self.mcp_host.trim_end_matches('.').to_ascii_lowercase();
        if !mcp.is_empty() && (host == mcp || host.ends_with(&format!(".{mcp}"))) {
            return Some(Inclusion::McpHost);
        }
        let literal = host.parse::<IpAddr>().ok();
        let addrs: Vec<IpAddr> = literal.map_or_else(|| addrs.to_vec(), |ip| vec![ip]);
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

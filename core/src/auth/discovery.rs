//! Where the metadata documents are looked for, and whether a resource identifier names the
//! server we talk to.
//!
//! - [`protected_resource_metadata_urls`]: RFC 9728 §3.1's well-known URIs for an MCP
//!   endpoint, path-inserted first, then at the root (`authorization-server-discovery.mdx`,
//!   "Protected Resource Metadata Discovery Requirements"); used when the `401` names no
//!   `resource_metadata`.
//! - [`authorization_server_metadata_urls`]: RFC 8414 §3.1 and OpenID Connect Discovery, in the
//!   order the MCP specification gives ("Authorization Server Metadata Discovery").
//! - [`resource_matches`]: whether Protected Resource Metadata's `resource` may be used for the
//!   server's URL.
//!
//! The URLs built here are normalized by the `url` crate (WHATWG); the identifiers they were
//! built from are kept by the caller as received, for the exact comparisons.

use url::Url;

/// The suffix of RFC 9728's well-known URI.
pub const PROTECTED_RESOURCE_SUFFIX: &str = "oauth-protected-resource";
/// The suffix of RFC 8414's well-known URI.
pub const AUTHORIZATION_SERVER_SUFFIX: &str = "oauth-authorization-server";
/// The suffix of OpenID Connect Discovery's well-known URI.
pub const OPENID_CONFIGURATION_SUFFIX: &str = "openid-configuration";

/// A URL the documents cannot be looked for under.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{url:?} is not an absolute http(s) URL with a host: {reason}")]
pub struct NotAnOrigin {
    /// The URL as given.
    pub url: String,
    /// Why.
    pub reason: String,
}

fn parse_http(url: &str) -> Result<Url, NotAnOrigin> {
    let bad = |reason: String| NotAnOrigin {
        url: url.to_owned(),
        reason,
    };
    let parsed = Url::parse(url).map_err(|e| bad(e.to_string()))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(bad(format!("the scheme is {:?}", parsed.scheme())));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(bad("it has no host".into()));
    }
    Ok(parsed)
}

/// `scheme://host[:port]` of a parsed URL (default ports omitted, as the `url` crate keeps
/// them).
fn origin_prefix(u: &Url) -> String {
    let mut s = format!("{}://{}", u.scheme(), u.host_str().unwrap_or_default());
    if let Some(port) = u.port() {
        s.push(':');
        s.push_str(&port.to_string());
    }
    s
}

/// The path without its terminating `/` (RFC 8414 §3.1: "any terminating `/` MUST be removed
/// before inserting"); empty for a root path.
fn trimmed_path(u: &Url) -> &str {
    u.path().trim_end_matches('/')
}

/// The well-known URIs of an MCP endpoint's Protected Resource Metadata, in the order the
/// client tries them: `https://example.com/.well-known/oauth-protected-resource/public/mcp`
/// for `https://example.com/public/mcp`, then `https://example.com/.well-known/oauth-protected-resource`
/// (just the latter for an endpoint at the root). The endpoint's query and fragment are not
/// part of the resource.
pub fn protected_resource_metadata_urls(server_url: &str) -> Result<Vec<String>, NotAnOrigin> {
    let u = parse_http(server_url)?;
    let origin = origin_prefix(&u);
    let path = trimmed_path(&u);
    let root = format!("{origin}/.well-known/{PROTECTED_RESOURCE_SUFFIX}");
    Ok(if path.is_empty() {
        vec![root]
    } else {
        vec![format!("{root}{path}"), root]
    })
}

/// The metadata URLs of an authorization server, in the MCP specification's order:
/// for an issuer with a path (`https://auth.example.com/tenant1`), RFC 8414 with path
/// insertion, OpenID Connect with path insertion, OpenID Connect with the path appended; for
/// one without, RFC 8414 then OpenID Connect.
pub fn authorization_server_metadata_urls(issuer: &str) -> Result<Vec<String>, NotAnOrigin> {
    let u = parse_http(issuer)?;
    if u.query().is_some() || u.fragment().is_some() {
        return Err(NotAnOrigin {
            url: issuer.to_owned(),
            reason: "an issuer has no query or fragment (RFC 8414 §2)".into(),
        });
    }
    let origin = origin_prefix(&u);
    let path = trimmed_path(&u);
    Ok(if path.is_empty() {
        vec![
            format!("{origin}/.well-known/{AUTHORIZATION_SERVER_SUFFIX}"),
            format!("{origin}/.well-known/{OPENID_CONFIGURATION_SUFFIX}"),
        ]
    } else {
        vec![
            format!("{origin}/.well-known/{AUTHORIZATION_SERVER_SUFFIX}{path}"),
            format!("{origin}/.well-known/{OPENID_CONFIGURATION_SUFFIX}{path}"),
            format!("{origin}{path}/.well-known/{OPENID_CONFIGURATION_SUFFIX}"),
        ]
    })
}

/// Whether Protected Resource Metadata whose `resource` is `resource` may be used for the MCP
/// endpoint `server_url`: the same origin (scheme and host compared case-insensitively, as
/// the canonical-URI section asks clients to accept uppercase, default ports elided), and
/// `resource`'s path is the endpoint's path or a parent of it on a segment boundary
/// (`https://mcp.example.com` and `https://mcp.example.com/api` cover
/// `https://mcp.example.com/api/mcp`; `https://mcp.example.com/ap` does not). A `resource`
/// with a query or fragment never matches (RFC 8707 §2).
pub fn resource_matches(resource: &str, server_url: &str) -> bool {
    let (Ok(r), Ok(s)) = (parse_http(resource), parse_http(server_url)) else {
        return false;
    };
    if r.query().is_some() || r.fragment().is_some() {
        return false;
    }
    if r.scheme() != s.scheme()
        || r.host_str() != s.host_str()
        || r.port_or_known_default() != s.port_or_known_default()
    {
        return false;
    }
    let rp = trimmed_path(&r);
    let sp = trimmed_path(&s);
    sp == rp || (sp.starts_with(rp) && sp.as_bytes().get(rp.len()) == Some(&b'/'))
}

/// The canonical URI of an MCP endpoint (RFC 8707 §2, "Canonical Server URI"): the URL
/// without fragment, with a root path written without its `/`. Used as `resource` when the
/// server's metadata names none.
pub fn canonical_resource(server_url: &str) -> Result<String, NotAnOrigin> {
    let mut u = parse_http(server_url)?;
    u.set_fragment(None);
    let s = u.to_string();
    Ok(if u.path() == "/" && u.query().is_none() {
        s.trim_end_matches('/').to_owned()
    } else {
        s
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn protected_resource_urls_path_first_then_root() {
        assert_eq!(
            protected_resource_metadata_urls("https://example.com/public/mcp").unwrap(),
            [
                "https://example.com/.well-known/oauth-protected-resource/public/mcp",
                "https://example.com/.well-known/oauth-protected-resource",
            ]
        );
        assert_eq!(
            protected_resource_metadata_urls("http://127.0.0.1:3000/mcp/?x=1").unwrap(),
            [
                "http://127.0.0.1:3000/.well-known/oauth-protected-resource/mcp",
                "http://127.0.0.1:3000/.well-known/oauth-protected-resource",
            ]
        );
        assert_eq!(
            protected_resource_metadata_urls("https://example.com").unwrap(),
            ["https://example.com/.well-known/oauth-protected-resource"]
        );
        assert!(protected_resource_metadata_urls("mcp.example.com").is_err());
        assert!(protected_resource_metadata_urls("file:///etc/passwd").is_err());
    }

    #[test]
    fn authorization_server_urls_in_the_spec_order() {
        assert_eq!(
            authorization_server_metadata_urls("https://auth.example.com/tenant1").unwrap(),
            [
                "https://auth.example.com/.well-known/oauth-authorization-server/tenant1",
                "https://auth.example.com/.well-known/openid-configuration/tenant1",
                "https://auth.example.com/tenant1/.well-known/openid-configuration",
            ]
        );
        assert_eq!(
            authorization_server_metadata_urls("https://auth.example.com/tenant1/").unwrap()[0],
            "https://auth.example.com/.well-known/oauth-authorization-server/tenant1"
        );
        assert_eq!(
            authorization_server_metadata_urls("https://auth.example.com").unwrap(),
            [
                "https://auth.example.com/.well-known/oauth-authorization-server",
                "https://auth.example.com/.well-known/openid-configuration",
            ]
        );
        assert_eq!(
            authorization_server_metadata_urls("https://auth.example.com:8443/").unwrap()[0],
            "https://auth.example.com:8443/.well-known/oauth-authorization-server"
        );
        assert!(authorization_server_metadata_urls("https://a.example/?q=1").is_err());
    }

    #[test]
    fn resource_matching() {
        let s = "https://mcp.example.com/api/mcp";
        for ok in [
            "https://mcp.example.com",
            "https://mcp.example.com/",
            "https://mcp.example.com/api",
            "https://mcp.example.com/api/mcp",
            "https://mcp.example.com/api/mcp/",
            "HTTPS://MCP.example.com:443/api",
        ] {
            assert!(resource_matches(ok, s), "{ok}");
        }
        for bad in [
            "https://mcp.example.com/ap",
            "https://mcp.example.com/api/mcp/extra",
            "https://other.example.com/api/mcp",
            "http://mcp.example.com/api/mcp",
            "https://mcp.example.com:8443/api/mcp",
            "https://mcp.example.com/api/mcp#frag",
            "https://mcp.example.com/api?x=1",
            "mcp.example.com",
        ] {
            assert!(!resource_matches(bad, s), "{bad}");
        }
    }

    #[test]
    fn canonical_resource_drops_the_root_slash_and_fragment() {
        assert_eq!(
            canonical_resource("https://mcp.example.com/").unwrap(),
            "https://mcp.example.com"
        );
        assert_eq!(
            canonical_resource("https://MCP.example.com/mcp#x").unwrap(),
            "https://mcp.example.com/mcp"
        );
        assert_eq!(
            canonical_resource("http://127.0.0.1:9/mcp").unwrap(),
            "http://127.0.0.1:9/mcp"
        );
    }
}

//! Harpoon's OAuth discovery machine (`tunnel::harpoon::discovery::MetadataDiscovery`): the
//! order of its fetches (the MCP server's `401` challenge first, then the RFC 9728 well-known
//! URLs, then each authorization server's RFC 8414 / OpenID Connect URLs), the checks on the
//! documents (the PRM's `resource` names the server, the metadata's `issuer` is exactly the
//! identifier), the URL policy on every document URL, and that nothing stops it for good: a
//! problem is reported and the next document tried.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use mcpwire_core::http::{Headers, Method, ResponseHead};
use mcpwire_core::net_policy::{NetPolicy, UrlPurpose};
use mcpwire_core::tunnel::harpoon::discovery::{
    DiscoveryProblem, MetadataDiscovery, DISCOVERY_USER_AGENT,
};
use serde_json::json;

const SERVER: &str = "https://mcp.example.com/mcp";

fn policy() -> NetPolicy {
    NetPolicy {
        allow_loopback_http: true,
        allow_private: true,
        ..NetPolicy::strict()
    }
}

fn head(status: u16, headers: &[(&str, &str)]) -> ResponseHead {
    let mut h = Headers::new();
    for (n, v) in headers {
        h.append(*n, *v).unwrap();
    }
    ResponseHead { status, headers: h }
}

/// The next fetch's method, URL and purpose.
fn next(d: &mut MetadataDiscovery) -> Option<(Method, String, Option<UrlPurpose>)> {
    d.next_fetch().map(|f| {
        assert_eq!(
            f.request.headers.get("user-agent"),
            Some(DISCOVERY_USER_AGENT)
        );
        (f.request.method, f.request.url, f.purpose)
    })
}

fn prm(resource: &str, servers: &[&str]) -> Vec<u8> {
    json!({"resource": resource, "authorization_servers": servers})
        .to_string()
        .into_bytes()
}

fn as_metadata(issuer: &str) -> Vec<u8> {
    json!({
        "issuer": issuer,
        "authorization_endpoint": format!("{issuer}/authorize"),
        "token_endpoint": format!("{issuer}/token"),
    })
    .to_string()
    .into_bytes()
}

#[test]
fn the_challenge_then_well_known_urls_then_server_metadata_in_order() {
    let mut d = MetadataDiscovery::new(SERVER, policy()).unwrap();
    let (method, url, purpose) = next(&mut d).unwrap();
    assert_eq!(
        (method, url.as_str(), purpose),
        (Method::Post, SERVER, None)
    );
    assert!(next(&mut d).is_none(), "one fetch at a time");
    d.handle_response(
        &head(
            401,
            &[(
                "WWW-Authenticate",
                r#"Bearer resource_metadata="https://mcp.example.com/prm-from-header""#,
            )],
        ),
        b"",
    );
    let urls: Vec<String> = std::iter::from_fn(|| {
        let (_, url, purpose) = next(&mut d)?;
        assert_eq!(purpose, Some(UrlPurpose::ResourceMetadata));
        d.handle_response(&head(404, &[]), b"");
        Some(url)
    })
    .collect();
    assert_eq!(
        urls,
        [
            "https://mcp.example.com/prm-from-header",
            "https://mcp.example.com/.well-known/oauth-protected-resource/mcp",
            "https://mcp.example.com/.well-known/oauth-protected-resource",
        ]
    );
    assert!(d.is_done());
    assert!(d.metadata().is_empty());
    assert!(matches!(
        d.problems(),
        [DiscoveryProblem::NoResourceMetadata { tried }] if tried == "404, 404, 404"
    ));
}

#[test]
fn each_authorization_server_is_read_and_its_issuer_must_match_exactly() {
    let mut d = MetadataDiscovery::new(SERVER, policy()).unwrap();
    next(&mut d).unwrap();
    d.handle_response(&head(405, &[]), b"");
    let (_, url, _) = next(&mut d).unwrap();
    assert_eq!(
        url,
        "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
    );
    d.handle_response(
        &head(200, &[]),
        &prm(
            "https://mcp.example.com/mcp",
            &[
                "https://idp.example.com/tenant",
                "https://other.example.com",
                "https://broken.example.com",
            ],
        ),
    );
    // Server 1: path-inserted RFC 8414 first; a 404 tries the next form.
    let (_, url, purpose) = next(&mut d).unwrap();
    assert_eq!(purpose, Some(UrlPurpose::AuthorizationServer));
    assert_eq!(
        url,
        "https://idp.example.com/.well-known/oauth-authorization-server/tenant"
    );
    d.handle_response(&head(404, &[]), b"");
    let (_, url, _) = next(&mut d).unwrap();
    assert_eq!(
        url,
        "https://idp.example.com/.well-known/openid-configuration/tenant"
    );
    d.handle_response(
        &head(200, &[]),
        &as_metadata("https://idp.example.com/tenant"),
    );
    // Server 2 names another issuer: refused.
    next(&mut d).unwrap();
    d.handle_response(&head(200, &[]), &as_metadata("https://evil.example.com"));
    // Server 3 fails with a 500: that server is given up, discovery ends.
    next(&mut d).unwrap();
    d.handle_response(&head(500, &[]), b"");
    assert!(next(&mut d).is_none());
    assert!(d.is_done());
    assert_eq!(d.metadata().len(), 1);
    assert_eq!(
        d.metadata()[0]["token_endpoint"],
        "https://idp.example.com/tenant/token"
    );
    assert_eq!(
        d.problems(),
        [
            DiscoveryProblem::IssuerMismatch { index: 2 },
            DiscoveryProblem::NoServerMetadata {
                index: 3,
                tried: "500".into()
            },
        ]
    );
}

#[test]
fn a_prm_for_another_resource_ends_discovery() {
    let mut d = MetadataDiscovery::new(SERVER, policy()).unwrap();
    next(&mut d).unwrap();
    d.handle_response(&head(200, &[]), b"{}");
    next(&mut d).unwrap();
    d.handle_response(
        &head(200, &[]),
        &prm(
            "https://elsewhere.example.com/mcp",
            &["https://idp.example.com"],
        ),
    );
    assert!(next(&mut d).is_none());
    assert!(d.is_done());
    assert!(matches!(
        d.problems(),
        [DiscoveryProblem::ResourceMismatch { .. }]
    ));
}

#[test]
fn the_url_policy_refuses_a_metadata_address_and_discovery_goes_on() {
    let mut d = MetadataDiscovery::new(SERVER, policy()).unwrap();
    next(&mut d).unwrap();
    d.handle_response(
        &head(
            401,
            &[(
                "WWW-Authenticate",
                r#"Bearer resource_metadata="http://169.254.169.254/latest/meta-data""#,
            )],
        ),
        b"",
    );
    let (_, url, _) = next(&mut d).unwrap();
    assert_eq!(
        url,
        "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
    );
    assert!(matches!(
        d.problems(),
        [DiscoveryProblem::Refused { index: 0, .. }]
    ));
}

#[test]
fn a_failed_fetch_is_reported_and_the_next_server_tried() {
    let mut d = MetadataDiscovery::new(SERVER, policy()).unwrap();
    next(&mut d).unwrap();
    d.handle_failed("connection refused");
    assert!(
        d.is_done(),
        "no answer from the MCP server: nothing to read"
    );
    assert!(next(&mut d).is_none());

    let mut d = MetadataDiscovery::new(SERVER, policy()).unwrap();
    next(&mut d).unwrap();
    d.handle_response(&head(401, &[]), b"");
    next(&mut d).unwrap();
    d.handle_response(
        &head(200, &[]),
        &prm(SERVER, &["https://a.example.com", "https://b.example.com"]),
    );
    next(&mut d).unwrap();
    d.handle_failed("timed out");
    let (_, url, _) = next(&mut d).unwrap();
    assert!(url.starts_with("https://b.example.com/"), "{url}");
    d.handle_response(&head(200, &[]), &as_metadata("https://b.example.com"));
    assert!(d.is_done());
    assert_eq!(d.metadata().len(), 1);
    assert!(matches!(
        &d.problems()[0],
        DiscoveryProblem::NoServerMetadata { index: 1, tried } if tried.contains("timed out")
    ));
    // A late answer is ignored.
    d.handle_response(&head(200, &[]), b"{}");
    assert_eq!(d.metadata().len(), 1);
}

#[test]
fn a_server_url_that_is_not_http_is_refused_at_once() {
    assert!(MetadataDiscovery::new("ftp://mcp.example.com/mcp", policy()).is_err());
    assert!(MetadataDiscovery::new("/mcp", policy()).is_err());
}

/// A host with an address no URL policy opens is never included, even when it is the MCP
/// server's own host or matches a suffix.
#[test]
fn a_host_resolving_to_link_local_or_metadata_is_never_included() {
    use mcpwire_core::tunnel::harpoon::discovery::{HostFilter, Inclusion};
    use std::net::IpAddr;
    let filter = HostFilter {
        include_loopback: true,
        include_private: true,
        suffixes: vec!["corp.example".into()],
        patterns: Vec::new(),
        mcp_host: "mcp.example.com".into(),
    };
    let private: IpAddr = "10.0.0.7".parse().unwrap();
    let link_local: IpAddr = "169.254.169.254".parse().unwrap();
    assert_eq!(
        filter.classify("idp.mcp.example.com", &[private]),
        Some(Inclusion::McpHost)
    );
    assert_eq!(filter.classify("idp.mcp.example.com", &[link_local]), None);
    assert_eq!(
        filter.classify("idp.corp.example", &[private, link_local]),
        None
    );
    assert_eq!(filter.classify("169.254.169.254", &[]), None);
    assert_eq!(
        filter.classify("idp.corp.example", &[]),
        Some(Inclusion::Suffix)
    );
}

#[test]
fn the_operators_mcp_headers_go_to_the_mcp_servers_origin_only() {
    use mcpwire_core::tunnel::engine::Secret;
    let mut d = MetadataDiscovery::new(SERVER, policy())
        .unwrap()
        .with_server_headers(vec![("X-Api-Key".to_owned(), Secret::new("k-1"))]);
    // The probe and the server's own well-known URL carry it.
    let probe = d.next_fetch().unwrap();
    assert_eq!(probe.request.headers.get("x-api-key"), Some("k-1"));
    d.handle_response(&head(405, &[]), b"");
    let prm_fetch = d.next_fetch().unwrap();
    assert_eq!(prm_fetch.request.headers.get("x-api-key"), Some("k-1"));
    d.handle_response(
        &head(200, &[]),
        &prm("https://mcp.example.com/mcp", &["https://idp.example.com"]),
    );
    // The authorization server (another origin) never sees it.
    let as_fetch = d.next_fetch().unwrap();
    assert!(as_fetch.request.url.starts_with("https://idp.example.com/"));
    assert_eq!(as_fetch.request.headers.get("x-api-key"), None);
}

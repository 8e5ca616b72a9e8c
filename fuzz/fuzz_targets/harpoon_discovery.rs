//! Fuzzes Harpoon's OAuth discovery: `MetadataDiscovery` fed arbitrary answers (status,
//! `WWW-Authenticate`, body) or failures for every fetch it asks for, then
//! `discovered_targets` over what it kept.
//!
//! Input layout: a list of answers (arbitrary); each is used for the next fetch, and a fetch
//! past the list fails. A body chosen as "document" is built from the fuzzed strings so that
//! PRMs and metadata with the right `resource` and `issuer` are reached.
//!
//! Checked on every run:
//! - it never panics, and it ends: at most a bounded number of fetches, then `is_done`;
//! - one fetch at a time: no second fetch is handed out before the first is answered;
//! - the first fetch is the `POST` to the MCP server itself; every other is a `GET` whose URL
//!   passes the URL policy for its purpose (a metadata-service address is never fetched);
//! - every kept metadata document's `issuer` is one the PRM named;
//! - no discovered target is an authorization endpoint (unless another role has the same URL),
//!   and every label is `oauth-<role>-<n>`.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use mcpwire_core::http::{Headers, Method, ResponseHead};
use mcpwire_core::net_policy::NetPolicy;
use mcpwire_core::tunnel::harpoon::discovery::{
    discovered_targets, HostFilter, MetadataDiscovery, MAX_AUTHORIZATION_SERVERS,
};
use serde_json::{json, Value};

const SERVER: &str = "https://mcp.example.com/mcp";

#[derive(Arbitrary, Debug)]
enum Body {
    Raw(Vec<u8>),
    Prm {
        resource_ok: bool,
        servers: Vec<String>,
    },
    Metadata {
        issuer: String,
        endpoints: Vec<(u8, String)>,
    },
}

#[derive(Arbitrary, Debug)]
enum Answer {
    Failed,
    Response {
        status: u16,
        challenge: Option<String>,
        body: Body,
    },
}

#[derive(Arbitrary, Debug)]
struct Input {
    answers: Vec<Answer>,
    include_loopback: bool,
    include_private: bool,
    suffix: Option<String>,
}

const FIELDS: [&str; 7] = [
    "issuer",
    "authorization_endpoint",
    "token_endpoint",
    "registration_endpoint",
    "revocation_endpoint",
    "introspection_endpoint",
    "jwks_uri",
];

fuzz_target!(|input: Input| {
    let policy = NetPolicy {
        allow_loopback_http: true,
        allow_private: true,
        ..NetPolicy::strict()
    };
    let mut d = MetadataDiscovery::new(SERVER, policy).expect("a valid server URL");
    let mut named: Vec<String> = Vec::new();
    let mut answers = input.answers.into_iter();
    let mut fetches = 0usize;
    while let Some(fetch) = d.next_fetch() {
        assert!(d.next_fetch().is_none(), "one fetch at a time");
        fetches += 1;
        assert!(
            fetches <= 4 + MAX_AUTHORIZATION_SERVERS * 4,
            "discovery does not end"
        );
        match fetch.purpose {
            None => {
                assert_eq!(fetches, 1);
                assert_eq!(fetch.request.method, Method::Post);
                assert_eq!(fetch.request.url, SERVER);
            }
            Some(purpose) => {
                assert_eq!(fetch.request.method, Method::Get);
                assert!(policy.check_url(&fetch.request.url, purpose).is_ok());
            }
        }
        match answers.next() {
            None | Some(Answer::Failed) => d.handle_failed("fuzzed failure"),
            Some(Answer::Response {
                status,
                challenge,
                body,
            }) => {
                let mut headers = Headers::new();
                if let Some(c) = challenge {
                    let _ = headers.append("WWW-Authenticate", c.as_str());
                }
                let bytes = match body {
                    Body::Raw(b) => b,
                    Body::Prm {
                        resource_ok,
                        servers,
                    } => {
                        named.extend(servers.iter().cloned());
                        let resource = if resource_ok {
                            SERVER
                        } else {
                            "https://other.example/mcp"
                        };
                        json!({"resource": resource, "authorization_servers": servers})
                            .to_string()
                            .into_bytes()
                    }
                    Body::Metadata { issuer, endpoints } => {
                        let mut doc = serde_json::Map::new();
                        doc.insert("issuer".into(), Value::from(issuer));
                        for (i, url) in endpoints {
                            let field = FIELDS[usize::from(i) % FIELDS.len()];
                            if field != "issuer" {
                                doc.insert(field.into(), Value::from(url));
                            }
                        }
                        Value::Object(doc).to_string().into_bytes()
                    }
                };
                d.handle_response(
                    &ResponseHead {
                        status: status % 600,
                        headers,
                    },
                    &bytes,
                );
            }
        }
    }
    assert!(d.is_done(), "no fetch left, yet not done");
    for m in d.metadata() {
        let issuer = m["issuer"].as_str().expect("kept metadata has an issuer");
        assert!(
            named.iter().any(|n| n == issuer),
            "issuer {issuer} was not named"
        );
    }
    let filter = HostFilter {
        include_loopback: input.include_loopback,
        include_private: input.include_private,
        suffixes: input.suffix.into_iter().collect(),
        patterns: Vec::new(),
        mcp_host: "mcp.example.com".into(),
    };
    let specs = discovered_targets(d.metadata(), &filter, |_| Vec::new());
    for s in &specs {
        assert!(s.label.starts_with("oauth-"), "{}", s.label);
        let other_role = d.metadata().iter().any(|m| {
            FIELDS
                .iter()
                .filter(|f| **f != "authorization_endpoint")
                .any(|f| m[*f].as_str() == Some(s.url.as_str()))
        });
        let authorization_only = !other_role;
        assert!(
            !authorization_only,
            "an authorization endpoint became a target"
        );
    }
});

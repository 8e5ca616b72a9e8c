//! `mcp::Client` with authorization (`ClientConfig::authorization`): a request refused with
//! `401` waits while the client authorizes (its fetches go out as HTTP outputs, the browser
//! step is an event), then goes out again with `Authorization: Bearer`; a `403
//! insufficient_scope` steps up; a failed authorization fails the waiting requests with it;
//! the token reaches the MCP URL only. A scripted resource server and authorization server
//! answer by URL, on a simulated clock.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant, UNIX_EPOCH};

use mcpwire_core::auth::{AuthError, FlowConfig};
use mcpwire_core::http::{Headers, Method, Request, ResponseHead};
use mcpwire_core::mcp::{
    AuthConfig, Client, ClientConfig, Event, Implementation, OpError, OpOptions, Operation, Output,
    ProtocolChoice, StreamId, Transport, TransportError,
};
use mcpwire_core::net_policy::{CheckedHost, FetchGuard, NetPolicy, UrlPurpose};
use serde_json::{json, Value};

const MCP: &str = "https://mcp.example.com/mcp";
const PRM: &str = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp";
const ISSUER: &str = "https://auth.example.com";

/// What the scripted servers do.
struct Servers {
    /// Tokens the MCP server takes, with the scopes each has.
    tokens: HashMap<String, Vec<String>>,
    /// The scope `tools/call` needs (403 `insufficient_scope` without it).
    call_scope: Option<&'static str>,
    issued: u32,
    /// The AS refuses the code exchange.
    refuse_tokens: bool,
}

struct World {
    c: Client,
    now: Instant,
    s: Servers,
    events: Vec<Event>,
    /// Every request the client emitted: (url, method, authorization header, JSON-RPC method).
    log: Vec<(String, Method, Option<String>, String)>,
    pending: Vec<(StreamId, Request)>,
    /// The scopes of each authorization request.
    authorizations: Vec<Option<String>>,
    /// The URL of every request and its `fetch_guard`, asked when it was emitted.
    guards: Vec<(String, Option<FetchGuard>)>,
    /// A host that "resolves" to `127.0.0.1`: a fetch to it is refused as a driver's resolver
    /// check would refuse it, and never answered.
    rebinding_host: Option<&'static str>,
}

fn rpc_result(id: &Value, result: Value) -> Vec<u8> {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
        .to_string()
        .into_bytes()
}

impl World {
    fn new(protocol: ProtocolChoice, call_scope: Option<&'static str>) -> Self {
        let mut config =
            ClientConfig::new(Transport::Http, Implementation::new("t", "1")).with_url(MCP);
        config.protocol = protocol;
        config.list_tools_before_call = false;
        let flow = FlowConfig::new(MCP, "http://127.0.0.1:40000/callback");
        config.authorization = Some(AuthConfig {
            flow,
            grant: None,
            seed: [3; 32],
            clock: None,
        });
        World {
            c: Client::new(config),
            now: Instant::now(),
            s: Servers {
                tokens: HashMap::new(),
                call_scope,
                issued: 0,
                refuse_tokens: false,
            },
            events: Vec::new(),
            log: Vec::new(),
            pending: Vec::new(),
            authorizations: Vec::new(),
            guards: Vec::new(),
            rebinding_host: None,
        }
    }

    /// Drains the client; answers every HTTP request; answers the browser step.
    fn run(&mut self) {
        for _ in 0..200 {
            while let Some(o) = self.c.poll_output() {
                match o {
                    Output::Http { stream, request } => {
                        let guard = self.c.fetch_guard(stream);
                        self.guards.push((request.url.clone(), guard));
                        self.pending.push((stream, request));
                    }
                    Output::Event(e) => self.events.push(e),
                    _ => {}
                }
            }
            let url = self.events.iter().rev().find_map(|e| match e {
                Event::AuthorizationUrl { url } => Some(url.clone()),
                _ => None,
            });
            if let Some(url) = url {
                self.events
                    .retain(|e| !matches!(e, Event::AuthorizationUrl { .. }));
                let q: HashMap<String, String> =
                    url::form_urlencoded::parse(url.split_once('?').unwrap().1.as_bytes())
                        .map(|(k, v)| (k.into_owned(), v.into_owned()))
                        .collect();
                self.authorizations.push(q.get("scope").cloned());
                let scope = q.get("scope").cloned().unwrap_or_default();
                let query = format!("code={}&state={}", enc(&scope), enc(&q["state"]));
                self.c
                    .handle_authorization_redirect(self.now, UNIX_EPOCH, &query)
                    .unwrap();
                continue;
            }
            if self.pending.is_empty() {
                return;
            }
            let (stream, request) = self.pending.remove(0);
            self.now += Duration::from_millis(5);
            if let Some(guard) = self.c.fetch_guard(stream) {
                let checked = guard.check_url(&request.url).unwrap();
                if let CheckedHost::Name(name) = checked.host() {
                    if Some(name.as_str()) == self.rebinding_host {
                        let resolved = [IpAddr::from([127, 0, 0, 1])];
                        let rejected = guard.connect_addrs(&checked, resolved).unwrap_err();
                        self.c
                            .handle_fetch_refused(self.now, stream, &rejected)
                            .unwrap();
                        continue;
                    }
                }
            }
            let (status, headers, body) = self.answer(&request);
            let mut h = Headers::new();
            for (k, v) in headers {
                h.append(k, v).unwrap();
            }
            self.c
                .handle_response_head(
                    self.now,
                    UNIX_EPOCH,
                    stream,
                    ResponseHead { status, headers: h },
                )
                .unwrap();
            if !body.is_empty() {
                self.c
                    .handle_response_data(self.now, stream, &body)
                    .unwrap();
            }
            self.c.handle_response_end(self.now, stream).unwrap();
        }
        panic!("the exchange does not end");
    }

    fn answer(&mut self, r: &Request) -> (u16, Vec<(&'static str, String)>, Vec<u8>) {
        let json_ct = vec![("content-type", "application/json".to_owned())];
        let url = r.url.split('?').next().unwrap().to_owned();
        let auth = r.headers.get("authorization").map(str::to_owned);
        let body: Value = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
        let rpc = body["method"].as_str().unwrap_or("").to_owned();
        self.log
            .push((url.clone(), r.method, auth.clone(), rpc.clone()));
        match url.as_str() {
            MCP => {
                let token = auth.as_deref().and_then(|a| a.strip_prefix("Bearer "));
                let Some(scopes) = token.and_then(|t| self.s.tokens.get(t)) else {
                    return (
                        401,
                        vec![(
                            "www-authenticate",
                            format!("Bearer resource_metadata=\"{PRM}\", scope=\"read\""),
                        )],
                        br#"{"error":"invalid_token"}"#.to_vec(),
                    );
                };
                if rpc == "tools/call" {
                    if let Some(need) = self.s.call_scope {
                        if !scopes.iter().any(|s| s == need) {
                            return (
                                403,
                                vec![("www-authenticate", format!("Bearer error=\"insufficient_scope\", scope=\"{need}\", resource_metadata=\"{PRM}\""))],
                                Vec::new(),
                            );
                        }
                    }
                    return (
                        200,
                        json_ct,
                        rpc_result(
                            &body["id"],
                            json!({"content": [{"type": "text", "text": "ok"}]}),
                        ),
                    );
                }
                (
                    200,
                    json_ct,
                    rpc_result(
                        &body["id"],
                        json!({
                            "supportedVersions": ["2026-07-28"],
                            "capabilities": {"tools": {}},
                            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "s", "version": "1"}},
                        "ttlMs": 60000,
                        "cacheScope": "private",
                        }),
                    ),
                )
            }
            PRM => (
                200,
                json_ct,
                json!({"resource": MCP, "authorization_servers": [ISSUER]})
                    .to_string()
                    .into_bytes(),
            ),
            "https://auth.example.com/.well-known/oauth-authorization-server" => (
                200,
                json_ct,
                json!({
                    "issuer": ISSUER,
                    "authorization_endpoint": "https://auth.example.com/authorize",
                    "token_endpoint": "https://auth.example.com/token",
                    "registration_endpoint": "https://auth.example.com/register",
                    "code_challenge_methods_supported": ["S256"],
                    "token_endpoint_auth_methods_supported": ["none"],
                })
                .to_string()
                .into_bytes(),
            ),
            "https://auth.example.com/register" => {
                (201, json_ct, br#"{"client_id":"cid"}"#.to_vec())
            }
            "https://auth.example.com/token" => {
                if self.s.refuse_tokens {
                    return (400, json_ct, br#"{"error":"invalid_grant"}"#.to_vec());
                }
                let form: HashMap<String, String> = url::form_urlencoded::parse(&r.body)
                    .map(|(k, v)| (k.into_owned(), v.into_owned()))
                    .collect();
                // The code carries the scope the authorization asked for; a refresh keeps
                // "read".
                let granted = if form["grant_type"] == "refresh_token" {
                    "read"
                } else {
                    form["code"].as_str()
                };
                let scopes: Vec<String> = granted
                    .split(' ')
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect();
                self.s.issued += 1;
                let token = format!("AT-{}", self.s.issued);
                self.s.tokens.insert(token.clone(), scopes.clone());
                (200, json_ct, json!({"access_token": token, "token_type": "Bearer", "expires_in": 600, "scope": scopes.join(" ")}).to_string().into_bytes())
            }
            other => panic!("unexpected request to {other}"),
        }
    }

    fn outcome(&self, op: mcpwire_core::mcp::OpId) -> Result<String, OpError> {
        for e in &self.events {
            match e {
                Event::Result { op: o, result, .. } if *o == op => return Ok(result.clone()),
                Event::Failed { op: o, error } if *o == op => return Err(error.clone()),
                _ => {}
            }
        }
        panic!("no outcome for {op:?}: {:?}", self.events);
    }
}

fn enc(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

#[test]
fn a_401_is_authorized_and_the_same_request_goes_out_again_with_the_token() {
    let mut w = World::new(ProtocolChoice::Modern, None);
    let op = w.c.start(w.now, Operation::Discover, OpOptions::default());
    w.run();
    let result = w.outcome(op).unwrap();
    assert!(result.contains("supportedVersions"), "{result}");
    let urls: Vec<(&str, Option<&str>)> = w
        .log
        .iter()
        .map(|(u, _, a, _)| (u.as_str(), a.as_deref()))
        .collect();
    assert_eq!(
        urls,
        [
            (MCP, None),
            (PRM, None),
            (
                "https://auth.example.com/.well-known/oauth-authorization-server",
                None
            ),
            ("https://auth.example.com/register", None),
            ("https://auth.example.com/token", None),
            (MCP, Some("Bearer AT-1")),
        ]
    );
    assert!(w
        .events
        .iter()
        .any(|e| matches!(e, Event::Authorized { grant } if grant.issuer == ISSUER)));
    assert_eq!(w.c.grant().unwrap().tokens.access_token.expose(), "AT-1");
    // A later request carries the token from the start.
    let op = w.c.start(
        w.now,
        Operation::Discover,
        OpOptions {
            cache: mcpwire_core::mcp::CachePolicy::Refresh,
            ..OpOptions::default()
        },
    );
    w.run();
    w.outcome(op).unwrap();
    assert_eq!(w.log.last().unwrap().2.as_deref(), Some("Bearer AT-1"));
    assert_eq!(w.authorizations.len(), 1);
}

#[test]
fn the_token_never_goes_to_the_authorization_server() {
    let mut w = World::new(ProtocolChoice::Modern, Some("write"));
    let op = w.c.start(w.now, Operation::Discover, OpOptions::default());
    w.run();
    w.outcome(op).unwrap();
    let op = w.c.start(
        w.now,
        Operation::CallTool {
            name: "t".into(),
            arguments: serde_json::Map::new(),
        },
        OpOptions::default(),
    );
    w.run();
    w.outcome(op).unwrap();
    for (url, _, auth, _) in &w.log {
        if url != MCP {
            assert_eq!(auth, &None, "{url} got a token");
        }
    }
}

#[test]
fn a_403_insufficient_scope_steps_up_with_the_union_and_resends() {
    let mut w = World::new(ProtocolChoice::Modern, Some("write"));
    let op = w.c.start(w.now, Operation::Discover, OpOptions::default());
    w.run();
    w.outcome(op).unwrap();
    let op = w.c.start(
        w.now,
        Operation::CallTool {
            name: "t".into(),
            arguments: serde_json::Map::new(),
        },
        OpOptions::default(),
    );
    w.run();
    let result = w.outcome(op).unwrap();
    assert!(result.contains("ok"), "{result}");
    assert_eq!(
        w.authorizations,
        [Some("read".to_owned()), Some("read write".to_owned())]
    );
    let calls: Vec<Option<&str>> = w
        .log
        .iter()
        .filter(|l| l.3 == "tools/call")
        .map(|l| l.2.as_deref())
        .collect();
    assert_eq!(calls, [Some("Bearer AT-1"), Some("Bearer AT-2")]);
}

#[test]
fn a_failed_authorization_fails_the_waiting_request_with_the_reason() {
    let mut w = World::new(ProtocolChoice::Modern, None);
    w.s.refuse_tokens = true;
    let op = w.c.start(w.now, Operation::Discover, OpOptions::default());
    w.run();
    let e = w.outcome(op).unwrap_err();
    let OpError::Transport(TransportError::Failed(reason)) = &e else {
        panic!("{e:?}")
    };
    assert_eq!(reason.http_status(), Some(401));
    assert!(e.to_string().contains("invalid_grant"), "{e}");
    assert!(w.events.iter().any(|e| matches!(
        e,
        Event::AuthorizationFailed {
            error: AuthError::Status { .. }
        }
    )));
}

#[test]
fn without_authorization_configured_a_401_fails_as_before() {
    let config = ClientConfig::new(Transport::Http, Implementation::new("t", "1")).with_url(MCP);
    let mut w = World::new(ProtocolChoice::Modern, None);
    w.c = Client::new(ClientConfig {
        protocol: ProtocolChoice::Modern,
        ..config
    });
    let op = w.c.start(w.now, Operation::Discover, OpOptions::default());
    w.run();
    let e = w.outcome(op).unwrap_err();
    assert!(e.to_string().contains("401"), "{e}");
    assert_eq!(w.log.len(), 1);
}

#[test]
fn auto_detection_authorizes_on_the_probe_and_stays_modern() {
    let mut w = World::new(ProtocolChoice::Auto, None);
    let op = w.c.start(w.now, Operation::Discover, OpOptions::default());
    w.run();
    w.outcome(op).unwrap();
    assert!(
        !w.log.iter().any(|l| l.3 == "initialize"),
        "no legacy fallback: {:?}",
        w.log
    );
}

#[test]
fn a_token_about_to_expire_is_refreshed_before_the_operation() {
    use mcpwire_core::auth::metadata::AuthorizationServerMetadata;
    use mcpwire_core::auth::{
        ClientRegistration, Grant, RegistrationKind, TokenEndpointAuth, Tokens,
    };
    let mut w = World::new(ProtocolChoice::Modern, None);
    let meta = AuthorizationServerMetadata::parse(
        json!({
            "issuer": ISSUER,
            "authorization_endpoint": "https://auth.example.com/authorize",
            "token_endpoint": "https://auth.example.com/token",
            "code_challenge_methods_supported": ["S256"],
        })
        .to_string()
        .as_bytes(),
    )
    .unwrap();
    let wall_now = UNIX_EPOCH + Duration::from_secs(2_000_000_000);
    let grant = Grant {
        resource: MCP.into(),
        issuer: ISSUER.into(),
        server_metadata: meta,
        client: ClientRegistration {
            client_id: "cid".into(),
            client_secret: None,
            auth_method: TokenEndpointAuth::None,
            kind: RegistrationKind::Dynamic,
        },
        tokens: Tokens {
            access_token: "OLD".into(),
            refresh_token: Some("RT".into()),
            // 30 s left: inside the refresh-ahead window.
            expires_at: Some(2_000_000_030),
            scope: Some("read".into()),
        },
        requested_scope: Some("read".into()),
    };
    let mut config =
        ClientConfig::new(Transport::Http, Implementation::new("t", "1")).with_url(MCP);
    config.protocol = ProtocolChoice::Modern;
    config.authorization = Some(AuthConfig {
        flow: FlowConfig::new(MCP, "http://127.0.0.1:40000/callback"),
        grant: Some(grant),
        seed: [3; 32],
        clock: Some((w.now, wall_now)),
    });
    w.c = Client::new(config);
    let op = w.c.start(w.now, Operation::Discover, OpOptions::default());
    w.run();
    w.outcome(op).unwrap();
    // The refresh goes out first, without waiting for a 401; the request sent meanwhile
    // with the old token (refused here) goes again with the new one, no new flow.
    assert_eq!(w.log[0].0, "https://auth.example.com/token", "{:?}", w.log);
    let mcp: Vec<Option<&str>> = w
        .log
        .iter()
        .filter(|l| l.0 == MCP)
        .map(|l| l.2.as_deref())
        .collect();
    assert_eq!(
        mcp,
        [Some("Bearer OLD"), Some("Bearer AT-1")],
        "{:?}",
        w.log
    );
    assert!(w.authorizations.is_empty());
    assert_eq!(w.log.iter().filter(|l| l.0.ends_with("/token")).count(), 1);
}

#[test]
fn every_authorization_fetch_has_a_guard_and_the_mcp_requests_have_none() {
    let mut w = World::new(ProtocolChoice::Modern, None);
    let op = w.c.start(w.now, Operation::Discover, OpOptions::default());
    w.run();
    w.outcome(op).unwrap();
    let guard = |purpose| {
        Some(FetchGuard {
            policy: NetPolicy::strict(),
            purpose,
        })
    };
    let guards: Vec<(&str, Option<FetchGuard>)> =
        w.guards.iter().map(|(u, g)| (u.as_str(), *g)).collect();
    assert_eq!(
        guards,
        [
            (MCP, None),
            (PRM, guard(UrlPurpose::ResourceMetadata)),
            (
                "https://auth.example.com/.well-known/oauth-authorization-server",
                guard(UrlPurpose::AuthorizationServer)
            ),
            (
                "https://auth.example.com/register",
                guard(UrlPurpose::MetadataEndpoint)
            ),
            (
                "https://auth.example.com/token",
                guard(UrlPurpose::MetadataEndpoint)
            ),
            (MCP, None),
        ]
    );
    // Once ended, a stream has no guard (the driver asks before it sends).
    assert_eq!(w.c.fetch_guard(StreamId(1)), None);
}

#[test]
fn a_fetch_whose_host_resolves_to_a_refused_address_fails_the_authorization_naming_it() {
    let mut w = World::new(ProtocolChoice::Modern, None);
    w.rebinding_host = Some("auth.example.com");
    let op = w.c.start(w.now, Operation::Discover, OpOptions::default());
    w.run();
    let e = w.outcome(op).unwrap_err();
    let text = e.to_string();
    assert!(text.contains("127.0.0.1"), "{text}");
    assert!(text.contains("loopback"), "{text}");
    assert!(
        w.events.iter().any(|e| matches!(
            e,
            Event::AuthorizationFailed {
                error: AuthError::UrlRefused { url, .. }
            } if url == "https://auth.example.com/.well-known/oauth-authorization-server"
        )),
        "{:?}",
        w.events
    );
    // Nothing was answered for the refused host, and nothing went further.
    let urls: Vec<&str> = w.log.iter().map(|l| l.0.as_str()).collect();
    assert_eq!(urls, [MCP, PRM]);
}

#[test]
fn a_private_cached_result_is_not_served_under_another_token() {
    let mut w = World::new(ProtocolChoice::Modern, Some("write"));
    let discovers = |w: &World| w.log.iter().filter(|l| l.3 == "server/discover").count();
    let op = w.c.start(w.now, Operation::Discover, OpOptions::default());
    w.run();
    w.outcome(op).unwrap();
    let before = discovers(&w);
    // Same token: the private result is reused.
    let op = w.c.start(w.now, Operation::Discover, OpOptions::default());
    w.run();
    w.outcome(op).unwrap();
    assert_eq!(discovers(&w), before, "served from the cache");
    // A step-up brings another token: the private result is not reused.
    let op = w.c.start(
        w.now,
        Operation::CallTool {
            name: "t".into(),
            arguments: serde_json::Map::new(),
        },
        OpOptions::default(),
    );
    w.run();
    w.outcome(op).unwrap();
    assert_eq!(w.s.issued, 2);
    let op = w.c.start(w.now, Operation::Discover, OpOptions::default());
    w.run();
    w.outcome(op).unwrap();
    assert_eq!(
        discovers(&w),
        before + 1,
        "fetched again under the new token"
    );
    assert_eq!(w.log.last().unwrap().2.as_deref(), Some("Bearer AT-2"));
}

//! Transcript tests of the authorization flow (`mcpwire_core::auth::Flow`) with simulated time:
//! a scripted resource server and authorization server answer each fetch by method and URL,
//! the browser step is answered by reading the authorization URL, and each test checks the
//! requests the flow made and how it ended.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;

use mcpwire_core::auth::metadata::AuthorizationServerMetadata;
use mcpwire_core::auth::pkce::PkceVerifier;
use mcpwire_core::auth::www_authenticate::BearerChallenge;
use mcpwire_core::auth::{
    AuthError, ClientRegistration, Entropy, Flow, FlowConfig, FlowOutput, Grant, PreRegistered,
    RedirectRejected, RefreshFailure, RegistrationKind, Secret, TokenEndpointAuth, Tokens,
};
use mcpwire_core::http::{Headers, Method, Request};
use mcpwire_core::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const SERVER: &str = "https://mcp.example.com/mcp";
const PRM_URL: &str = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp";
const PRM_ROOT: &str = "https://mcp.example.com/.well-known/oauth-protected-resource";
const ISSUER: &str = "https://auth.example.com";
const AS_META: &str = "https://auth.example.com/.well-known/oauth-authorization-server";
const REDIRECT: &str = "http://127.0.0.1:33418/callback";
const ENTROPY: Entropy = Entropy {
    verifier: [7; 32],
    state: [9; 16],
};

fn wall() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_800_000_000)
}

#[derive(Clone)]
struct Answer {
    status: u16,
    headers: Vec<(&'static str, String)>,
    body: String,
}

fn json(body: serde_json::Value) -> Answer {
    Answer {
        status: 200,
        headers: vec![("content-type", "application/json".into())],
        body: body.to_string(),
    }
}

fn status(status: u16, body: &str) -> Answer {
    Answer {
        status,
        headers: vec![],
        body: body.into(),
    }
}

fn redirect(to: &str) -> Answer {
    Answer {
        status: 302,
        headers: vec![("location", to.into())],
        body: String::new(),
    }
}

fn prm(resource: &str, servers: &[&str]) -> Answer {
    json(serde_json::json!({"resource": resource, "authorization_servers": servers}))
}

fn as_meta(extra: serde_json::Value) -> serde_json::Value {
    let mut m = serde_json::json!({
        "issuer": ISSUER,
        "authorization_endpoint": "https://auth.example.com/authorize",
        "token_endpoint": "https://auth.example.com/token",
        "registration_endpoint": "https://auth.example.com/register",
        "code_challenge_methods_supported": ["S256"],
        "response_types_supported": ["code"],
    });
    if let (Some(m), serde_json::Value::Object(extra)) = (m.as_object_mut(), extra) {
        m.extend(extra);
    }
    m
}

fn token(access: &str, refresh: Option<&str>) -> Answer {
    let mut t =
        serde_json::json!({"access_token": access, "token_type": "Bearer", "expires_in": 3600});
    if let Some(r) = refresh {
        t["refresh_token"] = r.into();
    }
    json(t)
}

/// What the browser step answers, from the authorization URL's query.
type Browser = dyn Fn(&HashMap<String, String>) -> String;

/// A scripted world: answers by (method, URL without query), each route used in order (the
/// last one repeats), and everything the flow sent.
struct World {
    routes: HashMap<(Method, String), Vec<Answer>>,
    sent: Vec<Request>,
    /// What the browser step answers: given the authorization URL's query pairs.
    browser: Box<Browser>,
    authorization_urls: Vec<String>,
    now: Instant,
}

impl World {
    fn new() -> Self {
        World {
            routes: HashMap::new(),
            sent: Vec::new(),
            browser: Box::new(|q| {
                format!(
                    "code=the-code&state={}&iss={}",
                    enc(&q["state"]),
                    enc(ISSUER)
                )
            }),
            authorization_urls: Vec::new(),
            now: Instant::now(),
        }
    }

    fn route(mut self, method: Method, url: &str, answers: Vec<Answer>) -> Self {
        self.routes.insert((method, url.to_owned()), answers);
        self
    }

    /// The usual servers: PRM at the path-inserted URL, RFC 8414 metadata, registration and
    /// a token endpoint.
    fn standard(extra_meta: serde_json::Value) -> Self {
        World::new()
            .route(Method::Get, PRM_URL, vec![prm(SERVER, &[ISSUER])])
            .route(Method::Get, AS_META, vec![json(as_meta(extra_meta))])
            .route(
                Method::Post,
                "https://auth.example.com/register",
                vec![json(serde_json::json!({"client_id": "dyn-client"}))],
            )
            .route(
                Method::Post,
                "https://auth.example.com/token",
                vec![token("AT-1", Some("RT-1"))],
            )
    }

    fn browser(mut self, f: impl Fn(&HashMap<String, String>) -> String + 'static) -> Self {
        self.browser = Box::new(f);
        self
    }

    /// Runs the flow's outputs to the end: fetches answered, the browser step answered once
    /// per authorization URL. Returns the final outputs that are not fetches.
    fn drive(&mut self, flow: &mut Flow) -> Vec<FlowOutput> {
        self.drive_with(flow, |_| {})
    }

    /// [`World::drive`], calling `before_redirect` on the flow while each browser step is
    /// under way (before its answer reaches the flow).
    fn drive_with(
        &mut self,
        flow: &mut Flow,
        mut before_redirect: impl FnMut(&mut Flow),
    ) -> Vec<FlowOutput> {
        let mut ends = Vec::new();
        let mut guard = 0;
        while let Some(out) = flow.poll_output() {
            guard += 1;
            assert!(guard < 100, "the flow does not end");
            match out {
                FlowOutput::Fetch { id, request, .. } => {
                    let key = (request.method, strip_query(&request.url));
                    self.sent.push(request);
                    let answers = self
                        .routes
                        .get_mut(&key)
                        .unwrap_or_else(|| panic!("no route for {key:?}"));
                    let a = if answers.len() > 1 {
                        answers.remove(0)
                    } else {
                        answers[0].clone()
                    };
                    let mut headers = Headers::new();
                    for (n, v) in &a.headers {
                        headers.append(*n, v.clone()).unwrap();
                    }
                    self.now += Duration::from_millis(10);
                    flow.handle_response(
                        self.now,
                        wall(),
                        id,
                        a.status,
                        &headers,
                        a.body.as_bytes(),
                    );
                }
                FlowOutput::OpenAuthorizationUrl { url } => {
                    let q = query_map(&url);
                    self.authorization_urls.push(url);
                    let answer = (self.browser)(&q);
                    before_redirect(flow);
                    let r = flow.handle_redirect(self.now, wall(), &answer);
                    if let Err(e) = r {
                        ends.push(FlowOutput::Failed(AuthError::Usage(match e {
                            RedirectRejected::StateMismatch => "state mismatch",
                            RedirectRejected::Malformed(_) => "malformed",
                            RedirectRejected::NotWaiting => "not waiting",
                            _ => "ended",
                        })));
                    }
                }
                other => ends.push(other),
            }
        }
        ends
    }

    fn urls(&self) -> Vec<String> {
        self.sent
            .iter()
            .map(|r| format!("{} {}", r.method.as_str(), strip_query(&r.url)))
            .collect()
    }

    fn form(&self, i: usize) -> HashMap<String, String> {
        url::form_urlencoded::parse(&self.sent[i].body)
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect()
    }
}

fn enc(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

fn strip_query(u: &str) -> String {
    u.split('?').next().unwrap_or(u).to_owned()
}

fn query_map(u: &str) -> HashMap<String, String> {
    let q = u.split_once('?').map(|(_, q)| q).unwrap_or("");
    url::form_urlencoded::parse(q.as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

/// A `Bearer` challenge as a server would send it, read by the real parser.
fn parse_bearer(params: &[(&str, &str)]) -> BearerChallenge {
    let mut header = String::from("Bearer");
    for (i, (k, v)) in params.iter().enumerate() {
        header.push_str(if i == 0 { " " } else { ", " });
        header.push_str(&format!("{k}=\"{v}\""));
    }
    BearerChallenge::from_headers([header.as_str()])
        .unwrap()
        .unwrap_or_else(|| panic!("no Bearer challenge in {header}"))
}

fn challenge(resource_metadata: Option<&str>, scope: Option<&str>) -> BearerChallenge {
    let mut p = vec![("error", "invalid_token")];
    if let Some(r) = resource_metadata {
        p.push(("resource_metadata", r));
    }
    if let Some(s) = scope {
        p.push(("scope", s));
    }
    parse_bearer(&p)
}

fn flow() -> Flow {
    Flow::new(FlowConfig::new(SERVER, REDIRECT), None)
}

fn start(world: &World, flow: &mut Flow, ch: Option<&BearerChallenge>) {
    flow.handle_unauthorized(world.now, wall(), ch, ENTROPY)
        .unwrap();
}

fn authorized(ends: &[FlowOutput]) -> &Grant {
    match ends.last() {
        Some(FlowOutput::Authorized(g)) => g,
        other => panic!("not authorized: {other:?}"),
    }
}

fn failed(ends: &[FlowOutput]) -> &AuthError {
    match ends.last() {
        Some(FlowOutput::Failed(e)) => e,
        other => panic!("did not fail: {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------

#[test]
fn the_whole_flow_from_a_401_to_tokens() {
    let mut w = World::standard(serde_json::json!({}));
    let mut f = flow();
    start(
        &w,
        &mut f,
        Some(&challenge(Some(PRM_URL), Some("files:read"))),
    );
    let ends = w.drive(&mut f);
    let g = authorized(&ends);
    assert_eq!(
        w.urls(),
        [
            format!("GET {PRM_URL}"),
            format!("GET {AS_META}"),
            "POST https://auth.example.com/register".into(),
            "POST https://auth.example.com/token".into(),
        ]
    );
    // Registration: a native public client with our redirect URI.
    let reg: serde_json::Value = serde_json::from_slice(&w.sent[2].body).unwrap();
    assert_eq!(reg["application_type"], "native");
    assert_eq!(reg["redirect_uris"], serde_json::json!([REDIRECT]));
    // Without token_endpoint_auth_methods_supported the server takes client_secret_basic only
    // (RFC 8414 §2).
    assert_eq!(reg["token_endpoint_auth_method"], "client_secret_basic");
    assert_eq!(
        reg["grant_types"],
        serde_json::json!(["authorization_code", "refresh_token"])
    );
    // The authorization request.
    let q = query_map(&w.authorization_urls[0]);
    assert!(w.authorization_urls[0].starts_with("https://auth.example.com/authorize?"));
    assert_eq!(q["response_type"], "code");
    assert_eq!(q["client_id"], "dyn-client");
    assert_eq!(q["redirect_uri"], REDIRECT);
    assert_eq!(q["code_challenge_method"], "S256");
    let verifier = PkceVerifier::from_random(ENTROPY.verifier);
    assert_eq!(q["code_challenge"], verifier.challenge());
    assert_eq!(q["resource"], SERVER);
    assert_eq!(q["scope"], "files:read");
    assert!(!q["state"].is_empty());
    // The token request.
    let t = w.form(3);
    assert_eq!(t["grant_type"], "authorization_code");
    assert_eq!(t["code"], "the-code");
    assert_eq!(t["code_verifier"], verifier.expose());
    assert_eq!(t["redirect_uri"], REDIRECT);
    assert_eq!(t["resource"], SERVER);
    assert_eq!(t["client_id"], "dyn-client");
    assert_eq!(
        w.sent[3].headers.get("content-type"),
        Some("application/x-www-form-urlencoded")
    );
    assert_eq!(w.sent[3].headers.get("authorization"), None);
    // The grant.
    assert_eq!(g.tokens.access_token.expose(), "AT-1");
    assert_eq!(
        g.tokens.refresh_token.as_ref().map(Secret::expose),
        Some("RT-1")
    );
    assert_eq!(g.tokens.expires_at, Some(1_800_000_000 + 3600));
    assert_eq!(g.issuer, ISSUER);
    assert_eq!(g.resource, SERVER);
    assert_eq!(g.client.kind, RegistrationKind::Dynamic);
    assert_eq!(g.requested_scope.as_deref(), Some("files:read"));
    assert!(!f.is_busy());
    assert_eq!(f.grant(), Some(g));
}

#[test]
fn resource_metadata_falls_back_to_the_well_known_uris_in_order() {
    let mut w = World::standard(serde_json::json!({}))
        .route(Method::Get, PRM_URL, vec![status(404, "")])
        .route(
            Method::Get,
            PRM_ROOT,
            vec![prm("https://mcp.example.com", &[ISSUER])],
        );
    let mut f = flow();
    start(&w, &mut f, None);
    let ends = w.drive(&mut f);
    authorized(&ends);
    assert_eq!(
        w.urls()[..3],
        [
            format!("GET {PRM_URL}"),
            format!("GET {PRM_ROOT}"),
            format!("GET {AS_META}")
        ]
    );
    // The metadata's resource is what is requested.
    assert_eq!(
        query_map(&w.authorization_urls[0])["resource"],
        "https://mcp.example.com"
    );
}

#[test]
fn the_header_url_comes_first_then_the_well_known_uris() {
    let mut w = World::standard(serde_json::json!({})).route(
        Method::Get,
        "https://mcp.example.com/custom/prm",
        vec![status(404, "")],
    );
    let mut f = flow();
    start(
        &w,
        &mut f,
        Some(&challenge(Some("https://mcp.example.com/custom/prm"), None)),
    );
    authorized(&w.drive(&mut f));
    assert_eq!(
        w.urls()[..2],
        [
            "GET https://mcp.example.com/custom/prm".to_owned(),
            format!("GET {PRM_URL}")
        ]
    );
}

#[test]
fn no_resource_metadata_anywhere_is_an_error_that_lists_what_was_tried() {
    let mut w = World::new()
        .route(Method::Get, PRM_URL, vec![status(404, "")])
        .route(Method::Get, PRM_ROOT, vec![status(404, "")]);
    let mut f = flow();
    start(&w, &mut f, None);
    let e = failed(&w.drive(&mut f)).clone();
    assert!(matches!(e, AuthError::NoResourceMetadata { .. }), "{e}");
    assert!(e.to_string().contains(PRM_ROOT), "{e}");
}

#[test]
fn a_5xx_on_resource_metadata_ends_the_attempt() {
    let mut w = World::new().route(Method::Get, PRM_URL, vec![status(503, "")]);
    let mut f = flow();
    start(&w, &mut f, None);
    assert!(matches!(
        failed(&w.drive(&mut f)),
        AuthError::Status { status: 503, .. }
    ));
    assert_eq!(w.sent.len(), 1);
}

#[test]
fn a_resource_for_another_server_stops_before_anything_is_authorized() {
    let mut w = World::standard(serde_json::json!({})).route(
        Method::Get,
        PRM_URL,
        vec![prm("https://evil.example.com/mcp", &[ISSUER])],
    );
    let mut f = flow();
    start(&w, &mut f, None);
    assert!(matches!(
        failed(&w.drive(&mut f)),
        AuthError::ResourceMismatch { .. }
    ));
    assert_eq!(
        w.sent.len(),
        1,
        "nothing after the metadata: {:?}",
        w.urls()
    );
    assert!(w.authorization_urls.is_empty());
}

#[test]
fn metadata_without_authorization_servers_is_refused() {
    let mut w = World::new().route(Method::Get, PRM_URL, vec![prm(SERVER, &[])]);
    let mut f = flow();
    start(&w, &mut f, None);
    assert!(matches!(
        failed(&w.drive(&mut f)),
        AuthError::NoAuthorizationServer { .. }
    ));
}

#[test]
fn authorization_server_metadata_in_the_spec_order_for_an_issuer_with_a_path() {
    let issuer = "https://auth.example.com/tenant1";
    let meta = as_meta(serde_json::json!({"issuer": issuer}));
    let mut w = World::standard(serde_json::json!({}))
        .route(Method::Get, PRM_URL, vec![prm(SERVER, &[issuer])])
        .route(
            Method::Get,
            "https://auth.example.com/.well-known/oauth-authorization-server/tenant1",
            vec![status(404, "")],
        )
        .route(
            Method::Get,
            "https://auth.example.com/.well-known/openid-configuration/tenant1",
            vec![status(404, "")],
        )
        .route(
            Method::Get,
            "https://auth.example.com/tenant1/.well-known/openid-configuration",
            vec![json(meta)],
        )
        .browser(move |q| format!("code=c&state={}", enc(&q["state"])));
    let mut f = flow();
    start(&w, &mut f, None);
    let g = authorized(&w.drive(&mut f)).clone();
    assert_eq!(
        w.urls()[1..4],
        [
            "GET https://auth.example.com/.well-known/oauth-authorization-server/tenant1",
            "GET https://auth.example.com/.well-known/openid-configuration/tenant1",
            "GET https://auth.example.com/tenant1/.well-known/openid-configuration",
        ]
    );
    assert_eq!(g.issuer, issuer);
}

#[test]
fn metadata_for_another_issuer_is_not_used() {
    // Exact strings: the issuer plus a slash is another issuer.
    for found in [
        "https://auth.example.com/",
        "https://AUTH.example.com",
        "https://attacker.example",
    ] {
        let mut w = World::standard(serde_json::json!({"issuer": found}));
        let mut f = flow();
        start(&w, &mut f, None);
        let e = failed(&w.drive(&mut f)).clone();
        assert!(
            matches!(&e, AuthError::IssuerMismatch { found: x, .. } if x == found),
            "{e}"
        );
        assert_eq!(w.sent.len(), 2, "{found}: {:?}", w.urls());
    }
}

#[test]
fn no_pkce_s256_no_authorization() {
    for methods in [
        serde_json::json!(null),
        serde_json::json!(["plain"]),
        serde_json::json!([]),
    ] {
        let mut w =
            World::standard(serde_json::json!({"code_challenge_methods_supported": methods}));
        let mut f = flow();
        start(&w, &mut f, None);
        assert!(
            matches!(failed(&w.drive(&mut f)), AuthError::NoPkce { .. }),
            "{methods}"
        );
        assert!(w.authorization_urls.is_empty());
    }
}

// ---------------------------------------------------------------------------------------------
// iss (RFC 9207 §2.4, the specification's table).

fn iss_case(advertised: bool, iss: Option<&'static str>) -> (World, Vec<FlowOutput>) {
    let mut w = World::standard(
        serde_json::json!({"authorization_response_iss_parameter_supported": advertised}),
    )
    .browser(move |q| {
        let mut s = format!("code=c&state={}", enc(&q["state"]));
        if let Some(iss) = iss {
            s.push_str(&format!("&iss={}", enc(iss)));
        }
        s
    });
    let mut f = flow();
    start(&w, &mut f, None);
    let ends = w.drive(&mut f);
    (w, ends)
}

#[test]
fn iss_advertised_and_present_is_compared() {
    let (w, ends) = iss_case(true, Some(ISSUER));
    authorized(&ends);
    assert_eq!(
        w.urls().last().unwrap(),
        "POST https://auth.example.com/token"
    );
}

#[test]
fn iss_advertised_but_missing_is_rejected_before_the_token_endpoint() {
    let (w, ends) = iss_case(true, None);
    assert!(
        ends.iter()
            .any(|o| matches!(o, FlowOutput::Failed(AuthError::IssMissing { .. }))),
        "{ends:?}"
    );
    assert!(!w.urls().iter().any(|u| u.contains("/token")));
}

#[test]
fn iss_not_advertised_but_present_is_still_checked() {
    let (_, ends) = iss_case(false, Some(ISSUER));
    authorized(&ends);
    let (w, ends) = iss_case(false, Some("https://evil.example.com"));
    assert!(
        ends.iter()
            .any(|o| matches!(o, FlowOutput::Failed(AuthError::IssMismatch { .. }))),
        "{ends:?}"
    );
    assert!(!w.urls().iter().any(|u| u.contains("/token")));
}

#[test]
fn iss_not_advertised_and_absent_proceeds() {
    authorized(&iss_case(false, None).1);
}

#[test]
fn iss_is_compared_without_normalization() {
    for iss in [
        "https://auth.example.com/",
        "https://AUTH.EXAMPLE.COM",
        "https://auth.example.com:443",
        "https://auth%2Eexample.com",
    ] {
        let (w, ends) = iss_case(true, Some(iss));
        assert!(
            ends.iter()
                .any(|o| matches!(o, FlowOutput::Failed(AuthError::IssMismatch { .. }))),
            "{iss}: {ends:?}"
        );
        assert!(!w.urls().iter().any(|u| u.contains("/token")), "{iss}");
    }
}

#[test]
fn an_error_response_with_a_wrong_iss_is_discarded_unread() {
    let mut w = World::standard(serde_json::json!({"authorization_response_iss_parameter_supported": true}))
        .browser(|q| format!("error=access_denied&error_description=click+here&state={}&iss=https%3A%2F%2Fevil.example", enc(&q["state"])));
    let mut f = flow();
    start(&w, &mut f, None);
    let ends = w.drive(&mut f);
    assert!(
        ends.iter()
            .any(|o| matches!(o, FlowOutput::Failed(AuthError::IssMismatch { .. }))),
        "{ends:?}"
    );
    assert!(
        !format!("{ends:?}").contains("click"),
        "the error fields are not acted on"
    );
}

#[test]
fn an_error_response_with_the_right_iss_is_reported() {
    let mut w = World::standard(serde_json::json!({})).browser(|q| {
        format!(
            "error=access_denied&error_description=no&state={}",
            enc(&q["state"])
        )
    });
    let mut f = flow();
    start(&w, &mut f, None);
    let ends = w.drive(&mut f);
    assert!(ends.iter().any(|o| matches!(o, FlowOutput::Failed(AuthError::Denied { error, .. }) if error == "access_denied")), "{ends:?}");
}

#[test]
fn a_wrong_state_is_ignored_and_the_flow_keeps_waiting() {
    let mut w = World::standard(serde_json::json!({})).browser(|_| "code=c&state=forged".into());
    let mut f = flow();
    start(&w, &mut f, None);
    w.drive(&mut f);
    assert!(f.is_busy(), "still waiting for the real redirect");
    assert!(f.poll_timeout().is_some());
    let state = query_map(&w.authorization_urls[0])["state"].clone();
    assert_eq!(
        f.handle_redirect(w.now, wall(), "code=c"),
        Err(RedirectRejected::StateMismatch)
    );
    f.handle_redirect(
        w.now,
        wall(),
        &format!("code=c&state={}&iss={}", enc(&state), enc(ISSUER)),
    )
    .unwrap();
    authorized(&w.drive(&mut f));
}

#[test]
fn the_browser_step_times_out() {
    let w = World::standard(serde_json::json!({}));
    let mut f = flow();
    let mut w = w.browser(|_| "code=c&state=wrong".into());
    start(&w, &mut f, None);
    w.drive(&mut f);
    let deadline = f.poll_timeout().unwrap();
    f.handle_timeout(deadline - Duration::from_secs(1));
    assert!(f.is_busy());
    f.handle_timeout(deadline);
    assert!(matches!(
        f.poll_output(),
        Some(FlowOutput::Failed(AuthError::TimedOut { secs: 300 }))
    ));
    assert!(!f.is_busy());
    assert_eq!(
        f.handle_redirect(deadline, wall(), "code=c&state=x"),
        Err(RedirectRejected::NotWaiting)
    );
}

// ---------------------------------------------------------------------------------------------
// Registration.

fn config_with(client: impl FnOnce(&mut FlowConfig)) -> Flow {
    let mut c = FlowConfig::new(SERVER, REDIRECT);
    client(&mut c);
    Flow::new(c, None)
}

#[test]
fn pre_registered_credentials_come_first_and_authenticate_with_basic() {
    let mut w = World::standard(serde_json::json!({"client_id_metadata_document_supported": true}));
    let mut f = config_with(|c| {
        c.client.pre_registered = Some(PreRegistered {
            client_id: "pre id".into(),
            client_secret: Some(Secret::new("s:cret")),
            issuer: None,
        });
        c.client.metadata_document_url = Some("https://app.example/client.json".into());
    });
    start(&w, &mut f, None);
    let g = authorized(&w.drive(&mut f)).clone();
    assert!(!w.urls().iter().any(|u| u.contains("/register")));
    assert_eq!(query_map(&w.authorization_urls[0])["client_id"], "pre id");
    // RFC 6749 §2.3.1: form-encoded parts, then base64.
    let basic = w
        .sent
        .last()
        .unwrap()
        .headers
        .get("authorization")
        .unwrap()
        .to_owned();
    assert_eq!(basic, "Basic cHJlK2lkOnMlM0FjcmV0");
    assert!(!w.form(w.sent.len() - 1).contains_key("client_secret"));
    assert_eq!(g.client.kind, RegistrationKind::PreRegistered);
    assert_eq!(g.client.auth_method, TokenEndpointAuth::ClientSecretBasic);
}

#[test]
fn client_secret_post_when_that_is_all_the_server_takes() {
    let mut w = World::standard(
        serde_json::json!({"token_endpoint_auth_methods_supported": ["client_secret_post"]}),
    );
    let mut f = config_with(|c| {
        c.client.pre_registered = Some(PreRegistered {
            client_id: "pre".into(),
            client_secret: Some(Secret::new("sec")),
            issuer: Some(ISSUER.into()),
        });
    });
    start(&w, &mut f, None);
    authorized(&w.drive(&mut f));
    let t = w.form(w.sent.len() - 1);
    assert_eq!(
        (t["client_id"].as_str(), t["client_secret"].as_str()),
        ("pre", "sec")
    );
    assert_eq!(w.sent.last().unwrap().headers.get("authorization"), None);
}

#[test]
fn pre_registered_for_another_issuer_is_an_error() {
    let mut w = World::standard(serde_json::json!({}));
    let mut f = config_with(|c| {
        c.client.pre_registered = Some(PreRegistered {
            client_id: "pre".into(),
            client_secret: None,
            issuer: Some("https://old-auth.example.com".into()),
        });
    });
    start(&w, &mut f, None);
    assert!(matches!(
        failed(&w.drive(&mut f)),
        AuthError::PreRegisteredElsewhere { .. }
    ));
}

#[test]
fn a_client_id_metadata_document_where_the_server_supports_them() {
    let mut w = World::standard(serde_json::json!({"client_id_metadata_document_supported": true}));
    let mut f = config_with(|c| {
        c.client.metadata_document_url = Some("https://app.example/client.json".into())
    });
    start(&w, &mut f, None);
    let g = authorized(&w.drive(&mut f)).clone();
    assert!(!w.urls().iter().any(|u| u.contains("/register")));
    assert_eq!(
        query_map(&w.authorization_urls[0])["client_id"],
        "https://app.example/client.json"
    );
    assert_eq!(
        w.form(w.sent.len() - 1)["client_id"],
        "https://app.example/client.json"
    );
    assert_eq!(g.client.kind, RegistrationKind::MetadataDocument);
}

#[test]
fn dynamic_registration_when_metadata_documents_are_not_supported() {
    let mut w = World::standard(serde_json::json!({}));
    let mut f = config_with(|c| {
        c.client.metadata_document_url = Some("https://app.example/client.json".into())
    });
    start(&w, &mut f, None);
    authorized(&w.drive(&mut f));
    assert!(w.urls().iter().any(|u| u.contains("/register")));
}

#[test]
fn a_registered_secret_is_used_as_the_server_registered_it() {
    let mut w = World::standard(serde_json::json!({"token_endpoint_auth_methods_supported": ["client_secret_post"]}))
        .route(
            Method::Post,
            "https://auth.example.com/register",
            vec![json(serde_json::json!({"client_id": "c9", "client_secret": "s9", "token_endpoint_auth_method": "client_secret_post"}))],
        );
    let mut f = flow();
    start(&w, &mut f, None);
    authorized(&w.drive(&mut f));
    let reg: serde_json::Value = serde_json::from_slice(&w.sent[2].body).unwrap();
    assert_eq!(reg["token_endpoint_auth_method"], "client_secret_post");
    assert_eq!(w.form(3)["client_secret"], "s9");
}

#[test]
fn no_way_to_register_says_what_to_do() {
    let mut meta = as_meta(serde_json::json!({}));
    meta.as_object_mut()
        .unwrap()
        .remove("registration_endpoint");
    let mut w =
        World::standard(serde_json::json!({})).route(Method::Get, AS_META, vec![json(meta)]);
    let mut f = flow();
    start(&w, &mut f, None);
    let e = failed(&w.drive(&mut f)).clone();
    assert!(matches!(e, AuthError::NoRegistration { .. }));
    assert!(e.to_string().contains("--client-id"), "{e}");
}

#[test]
fn a_failed_registration_reports_the_server_error() {
    let mut w = World::standard(serde_json::json!({})).route(
        Method::Post,
        "https://auth.example.com/register",
        vec![Answer {
            status: 400,
            headers: vec![],
            body: r#"{"error":"invalid_redirect_uri","error_description":"loopback not allowed"}"#
                .into(),
        }],
    );
    let mut f = flow();
    start(&w, &mut f, None);
    let e = failed(&w.drive(&mut f)).to_string();
    assert!(
        e.contains("invalid_redirect_uri: loopback not allowed"),
        "{e}"
    );
}

// ---------------------------------------------------------------------------------------------
// Scopes.

fn scope_requested(
    w: World,
    ch: Option<BearerChallenge>,
    prm_scopes: Option<&[&str]>,
    config_scope: Option<&str>,
) -> Option<String> {
    let mut w = match prm_scopes {
        Some(s) => w.route(
            Method::Get,
            PRM_URL,
            vec![json(serde_json::json!({"resource": SERVER, "authorization_servers": [ISSUER], "scopes_supported": s}))],
        ),
        None => w,
    };
    let mut f = config_with(|c| c.scope = config_scope.map(str::to_owned));
    start(&w, &mut f, ch.as_ref());
    authorized(&w.drive(&mut f));
    query_map(&w.authorization_urls[0]).get("scope").cloned()
}

#[test]
fn scope_from_the_challenge_then_scopes_supported_then_none() {
    let std = || World::standard(serde_json::json!({}));
    assert_eq!(
        scope_requested(
            std(),
            Some(challenge(None, Some("a b"))),
            Some(&["x"]),
            None
        )
        .as_deref(),
        Some("a b")
    );
    assert_eq!(
        scope_requested(std(), Some(challenge(None, None)), Some(&["x", "y"]), None).as_deref(),
        Some("x y")
    );
    assert_eq!(scope_requested(std(), None, None, None), None);
    assert_eq!(
        scope_requested(std(), Some(challenge(None, Some("a"))), None, Some("mine")).as_deref(),
        Some("mine")
    );
}

#[test]
fn offline_access_only_when_offered() {
    let offered = World::standard(serde_json::json!({"scopes_supported": ["a", "offline_access"]}));
    assert_eq!(
        scope_requested(offered, Some(challenge(None, Some("a"))), None, None).as_deref(),
        Some("a offline_access")
    );
    let not = World::standard(serde_json::json!({"scopes_supported": ["a"]}));
    assert_eq!(
        scope_requested(not, Some(challenge(None, Some("a"))), None, None).as_deref(),
        Some("a")
    );
}

// ---------------------------------------------------------------------------------------------
// Step-up.

fn insufficient(scope: &str) -> BearerChallenge {
    parse_bearer(&[
        ("error", "insufficient_scope"),
        ("scope", scope),
        ("resource_metadata", PRM_URL),
    ])
}

#[test]
fn step_up_asks_for_the_union_and_stops_after_the_limit() {
    let mut w = World::standard(serde_json::json!({}));
    let mut f = flow();
    start(&w, &mut f, Some(&challenge(None, Some("read"))));
    authorized(&w.drive(&mut f));
    let before = w.sent.len();
    assert!(f
        .handle_forbidden(w.now, wall(), Some(&insufficient("write")), ENTROPY)
        .unwrap());
    let g = authorized(&w.drive(&mut f)).clone();
    // No discovery again: the grant's server and client are reused.
    assert_eq!(w.urls()[before..], ["POST https://auth.example.com/token"]);
    assert_eq!(query_map(&w.authorization_urls[1])["scope"], "read write");
    assert_eq!(g.requested_scope.as_deref(), Some("read write"));
    // Three authorization requests in all, the first one included (the conformance suite's
    // scope-retry-limit counts them so).
    assert!(f
        .handle_forbidden(w.now, wall(), Some(&insufficient("admin")), ENTROPY)
        .unwrap());
    authorized(&w.drive(&mut f));
    let e = f
        .handle_forbidden(w.now, wall(), Some(&insufficient("admin")), ENTROPY)
        .unwrap_err();
    assert!(
        matches!(e, AuthError::AttemptLimit { attempts: 3, .. }),
        "{e}"
    );
    // A request that succeeds starts the count again.
    f.request_succeeded();
    assert!(f
        .handle_forbidden(w.now, wall(), Some(&insufficient("admin")), ENTROPY)
        .unwrap());
}

#[test]
fn a_403_without_insufficient_scope_is_not_retried() {
    let mut f = flow();
    let w = World::new();
    let other = parse_bearer(&[("error", "invalid_token")]);
    assert!(!f
        .handle_forbidden(w.now, wall(), Some(&other), ENTROPY)
        .unwrap());
    assert!(!f.handle_forbidden(w.now, wall(), None, ENTROPY).unwrap());
    assert!(f.poll_output().is_none());
}

// ---------------------------------------------------------------------------------------------
// Refresh.

fn stored(refresh: Option<&str>, kind: RegistrationKind) -> Grant {
    Grant {
        resource: SERVER.into(),
        issuer: ISSUER.into(),
        server_metadata: AuthorizationServerMetadata::parse(
            as_meta(serde_json::json!({})).to_string().as_bytes(),
        )
        .unwrap(),
        client: ClientRegistration {
            client_id: "stored-client".into(),
            client_secret: None,
            auth_method: TokenEndpointAuth::None,
            kind,
        },
        tokens: Tokens {
            access_token: Secret::new("OLD-AT"),
            refresh_token: refresh.map(Secret::new),
            expires_at: Some(1_800_000_000 - 10),
            scope: Some("read".into()),
        },
        requested_scope: Some("read".into()),
    }
}

fn refresh_with(answer: Answer, kind: RegistrationKind) -> (World, Flow, Vec<FlowOutput>) {
    let mut w = World::standard(serde_json::json!({})).route(
        Method::Post,
        "https://auth.example.com/token",
        vec![answer, token("AT-NEW", Some("RT-NEW"))],
    );
    let mut f = Flow::new(
        FlowConfig::new(SERVER, REDIRECT),
        Some(stored(Some("RT-OLD"), kind)),
    );
    assert!(f.grant().unwrap().tokens.expires_soon(wall()));
    f.refresh(w.now, wall(), ENTROPY).unwrap();
    let ends = w.drive(&mut f);
    (w, f, ends)
}

#[test]
fn refresh_sends_the_resource_and_stores_the_rotated_token() {
    let (w, _, ends) = refresh_with(token("AT-2", Some("RT-2")), RegistrationKind::Dynamic);
    let g = authorized(&ends);
    assert_eq!(w.urls(), ["POST https://auth.example.com/token"]);
    let t = w.form(0);
    assert_eq!(t["grant_type"], "refresh_token");
    assert_eq!(t["refresh_token"], "RT-OLD");
    assert_eq!(t["resource"], SERVER);
    assert_eq!(t["client_id"], "stored-client");
    assert_eq!(g.tokens.access_token.expose(), "AT-2");
    assert_eq!(
        g.tokens.refresh_token.as_ref().map(Secret::expose),
        Some("RT-2")
    );
    assert_eq!(g.tokens.expires_at, Some(1_800_000_000 + 3600));
}

#[test]
fn a_refresh_token_that_was_not_rotated_is_kept() {
    let (_, _, ends) = refresh_with(token("AT-2", None), RegistrationKind::Dynamic);
    assert_eq!(
        authorized(&ends)
            .tokens
            .refresh_token
            .as_ref()
            .map(Secret::expose),
        Some("RT-OLD")
    );
}

#[test]
fn invalid_grant_means_authorize_again() {
    let (w, _, ends) = refresh_with(
        status(400, r#"{"error":"invalid_grant"}"#),
        RegistrationKind::Dynamic,
    );
    assert!(
        matches!(
            &ends[0],
            FlowOutput::RefreshFailed(AuthError::Refresh {
                kind: RefreshFailure::GrantGone,
                ..
            })
        ),
        "{ends:?}"
    );
    let g = authorized(&ends);
    assert_eq!(g.tokens.access_token.expose(), "AT-NEW");
    // Discovery, then the stored client (same issuer) is reused: no registration.
    assert!(w.urls().contains(&format!("GET {PRM_URL}")));
    assert!(!w.urls().iter().any(|u| u.contains("/register")));
    assert_eq!(
        query_map(&w.authorization_urls[0])["client_id"],
        "stored-client"
    );
}

#[test]
fn try_later_keeps_the_tokens() {
    for answer in [
        status(503, ""),
        status(400, r#"{"error":"temporarily_unavailable"}"#),
        status(429, ""),
    ] {
        let (w, f, ends) = refresh_with(answer, RegistrationKind::Dynamic);
        assert!(
            matches!(
                failed(&ends),
                AuthError::Refresh {
                    kind: RefreshFailure::TryLater,
                    ..
                }
            ),
            "{ends:?}"
        );
        assert_eq!(
            f.grant()
                .unwrap()
                .tokens
                .refresh_token
                .as_ref()
                .map(Secret::expose),
            Some("RT-OLD")
        );
        assert_eq!(w.sent.len(), 1);
    }
}

#[test]
fn a_network_failure_during_refresh_is_try_later() {
    let w = World::new();
    let mut f = Flow::new(
        FlowConfig::new(SERVER, REDIRECT),
        Some(stored(Some("RT-OLD"), RegistrationKind::Dynamic)),
    );
    f.refresh(w.now, wall(), ENTROPY).unwrap();
    let Some(FlowOutput::Fetch { id, .. }) = f.poll_output() else {
        panic!()
    };
    f.handle_fetch_failed(w.now, id, "connection refused");
    let Some(FlowOutput::Failed(e)) = f.poll_output() else {
        panic!()
    };
    assert!(
        matches!(
            e,
            AuthError::Refresh {
                kind: RefreshFailure::TryLater,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("connection refused"));
    assert!(f.grant().is_some());
}

#[test]
fn other_refusals_are_refused_with_the_reason() {
    let (_, _, ends) = refresh_with(
        status(
            400,
            r#"{"error":"invalid_scope","error_description":"nope"}"#,
        ),
        RegistrationKind::PreRegistered,
    );
    let e = failed(&ends);
    assert!(
        matches!(
            e,
            AuthError::Refresh {
                kind: RefreshFailure::Refused,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("invalid_scope: nope"), "{e}");
}

#[test]
fn a_dynamic_client_the_server_forgot_is_registered_again_once() {
    let (w, _, ends) = refresh_with(
        status(401, r#"{"error":"invalid_client"}"#),
        RegistrationKind::Dynamic,
    );
    let g = authorized(&ends);
    assert_eq!(g.client.client_id, "dyn-client");
    assert_eq!(
        w.urls(),
        [
            "POST https://auth.example.com/token",
            "POST https://auth.example.com/register",
            "POST https://auth.example.com/token"
        ]
    );
}

#[test]
fn a_401_with_a_refresh_token_refreshes_first() {
    let mut w = World::standard(serde_json::json!({}));
    let mut f = Flow::new(
        FlowConfig::new(SERVER, REDIRECT),
        Some(stored(Some("RT-OLD"), RegistrationKind::Dynamic)),
    );
    start(&w, &mut f, Some(&challenge(Some(PRM_URL), None)));
    authorized(&w.drive(&mut f));
    assert_eq!(w.urls(), ["POST https://auth.example.com/token"]);
    assert!(w.authorization_urls.is_empty());
}

#[test]
fn a_changed_authorization_server_discards_the_old_registration() {
    let new_issuer = "https://new-auth.example.com";
    let mut w = World::new()
        .route(Method::Get, PRM_URL, vec![prm(SERVER, &[new_issuer])])
        .route(
            Method::Get,
            "https://new-auth.example.com/.well-known/oauth-authorization-server",
            vec![json(serde_json::json!({
                "issuer": new_issuer,
                "authorization_endpoint": "https://new-auth.example.com/authorize",
                "token_endpoint": "https://new-auth.example.com/token",
                "registration_endpoint": "https://new-auth.example.com/register",
                "code_challenge_methods_supported": ["S256"],
            }))],
        )
        .route(
            Method::Post,
            "https://new-auth.example.com/register",
            vec![json(serde_json::json!({"client_id": "new-client"}))],
        )
        .route(
            Method::Post,
            "https://new-auth.example.com/token",
            vec![token("AT-B", None)],
        )
        .browser(move |q| format!("code=c&state={}&iss={}", enc(&q["state"]), enc(new_issuer)));
    let mut f = Flow::new(
        FlowConfig::new(SERVER, REDIRECT),
        Some(stored(None, RegistrationKind::Dynamic)),
    );
    start(&w, &mut f, None);
    let ends = w.drive(&mut f);
    let g = authorized(&ends);
    assert_eq!(g.issuer, new_issuer);
    assert_eq!(g.client.client_id, "new-client");
    assert!(w
        .urls()
        .contains(&"POST https://new-auth.example.com/register".to_owned()));
    assert!(!w
        .urls()
        .iter()
        .any(|u| u.contains("https://auth.example.com")));
}

// ---------------------------------------------------------------------------------------------
// URLs and redirects.

#[test]
fn metadata_redirects_are_followed_hop_by_hop_and_checked() {
    let mut w = World::standard(serde_json::json!({}))
        .route(Method::Get, PRM_URL, vec![redirect("/elsewhere/prm")])
        .route(
            Method::Get,
            "https://mcp.example.com/elsewhere/prm",
            vec![prm(SERVER, &[ISSUER])],
        );
    let mut f = flow();
    start(&w, &mut f, None);
    authorized(&w.drive(&mut f));
    assert_eq!(w.urls()[1], "GET https://mcp.example.com/elsewhere/prm");

    let mut w = World::new().route(
        Method::Get,
        PRM_URL,
        vec![redirect("http://169.254.169.254/latest/meta-data")],
    );
    let mut f = flow();
    start(&w, &mut f, None);
    assert!(matches!(
        failed(&w.drive(&mut f)),
        AuthError::UrlRefused { .. }
    ));
    assert_eq!(w.sent.len(), 1);

    let mut w = World::new().route(Method::Get, PRM_URL, vec![redirect(PRM_URL)]);
    let mut f = flow();
    start(&w, &mut f, None);
    assert!(matches!(
        failed(&w.drive(&mut f)),
        AuthError::Transport { .. }
    ));
    assert_eq!(w.sent.len(), 1 + mcpwire_core::auth::MAX_REDIRECTS as usize);
}

#[test]
fn a_token_endpoint_redirect_is_not_followed() {
    let mut w = World::standard(serde_json::json!({})).route(
        Method::Post,
        "https://auth.example.com/token",
        vec![redirect("https://auth.example.com/elsewhere")],
    );
    let mut f = flow();
    start(&w, &mut f, None);
    assert!(matches!(
        failed(&w.drive(&mut f)),
        AuthError::Transport { .. }
    ));
}

#[test]
fn plain_http_only_to_loopback_in_development_mode() {
    let local = "http://127.0.0.1:9000/mcp";
    let mut w = World::new();
    let mut f = Flow::new(FlowConfig::new(local, REDIRECT), None);
    start(&w, &mut f, None);
    assert!(matches!(
        failed(&w.drive(&mut f)),
        AuthError::UrlRefused { .. }
    ));
    assert!(w.sent.is_empty());
    let mut c = FlowConfig::new(local, REDIRECT);
    c.policy = mcpwire_core::net_policy::NetPolicy::development();
    let mut f = Flow::new(c, None);
    start(&w, &mut f, None);
    let Some(FlowOutput::Fetch { request, .. }) = f.poll_output() else {
        panic!()
    };
    assert_eq!(
        request.url,
        "http://127.0.0.1:9000/.well-known/oauth-protected-resource/mcp"
    );
    let _ = &mut w;
}

#[test]
fn a_javascript_authorization_endpoint_is_never_shown() {
    let mut w =
        World::standard(serde_json::json!({"authorization_endpoint": "javascript:alert(1)"}));
    let mut f = flow();
    start(&w, &mut f, None);
    assert!(matches!(
        failed(&w.drive(&mut f)),
        AuthError::UrlRefused { .. }
    ));
    assert!(w.authorization_urls.is_empty());
}

#[test]
fn debug_output_never_shows_a_secret() {
    let mut w = World::standard(serde_json::json!({}));
    let mut f = config_with(|c| {
        c.client.pre_registered = Some(PreRegistered {
            client_id: "pre".into(),
            client_secret: Some(Secret::new("CLIENT-SECRET-XYZ")),
            issuer: None,
        });
    });
    start(&w, &mut f, None);
    let ends = w.drive(&mut f);
    let text = format!("{f:?} {ends:?} {:?}", w.sent);
    for secret in ["CLIENT-SECRET-XYZ", "AT-1", "RT-1", "the-code"] {
        assert!(!text.contains(secret), "{secret} in {text}");
    }
}

#[test]
fn late_and_unknown_answers_are_ignored() {
    let mut f = flow();
    let w = World::new();
    f.handle_response(
        w.now,
        wall(),
        mcpwire_core::auth::FetchId(99),
        200,
        &Headers::new(),
        b"{}",
    );
    f.handle_fetch_failed(w.now, mcpwire_core::auth::FetchId(99), "x");
    assert!(f.poll_output().is_none());
    assert_eq!(
        f.handle_redirect(w.now, wall(), "code=x&state=y"),
        Err(RedirectRejected::NotWaiting)
    );
    assert!(f.refresh(w.now, wall(), ENTROPY).is_err());
}

#[test]
fn repeated_401s_after_fresh_tokens_end_at_the_limit() {
    let mut w = World::standard(serde_json::json!({})).route(
        Method::Post,
        "https://auth.example.com/token",
        vec![token("AT-1", None)],
    );
    let mut f = flow();
    for _ in 0..3 {
        start(&w, &mut f, None);
        authorized(&w.drive(&mut f));
    }
    let e = f
        .handle_unauthorized(w.now, wall(), None, ENTROPY)
        .unwrap_err();
    assert!(
        matches!(e, AuthError::AttemptLimit { attempts: 3, .. }),
        "{e}"
    );
    f.request_succeeded();
    start(&w, &mut f, None);
    authorized(&w.drive(&mut f));
}

#[test]
fn a_401_right_after_a_refresh_authorizes_from_the_start() {
    let mut w = World::standard(serde_json::json!({}));
    let mut f = Flow::new(
        FlowConfig::new(SERVER, REDIRECT),
        Some(stored(Some("RT-OLD"), RegistrationKind::Dynamic)),
    );
    start(&w, &mut f, None);
    authorized(&w.drive(&mut f));
    assert_eq!(w.urls(), ["POST https://auth.example.com/token"]);
    // The refreshed token is refused too: discovery again (the server may have moved).
    start(&w, &mut f, None);
    authorized(&w.drive(&mut f));
    assert_eq!(w.urls()[1], format!("GET {PRM_URL}"));
    assert_eq!(w.authorization_urls.len(), 1);
}

#[test]
fn the_2025_03_26_fallbacks_only_when_asked() {
    let mut legacy = FlowConfig::new(SERVER, REDIRECT);
    legacy.legacy_discovery = true;
    let origin_meta = "https://mcp.example.com/.well-known/oauth-authorization-server";
    let base = || {
        World::new()
            .route(Method::Get, PRM_URL, vec![status(404, "")])
            .route(Method::Get, PRM_ROOT, vec![status(404, "")])
            .route(
                Method::Post,
                "https://mcp.example.com/register",
                vec![json(serde_json::json!({"client_id": "c"}))],
            )
            .route(
                Method::Post,
                "https://mcp.example.com/token",
                vec![token("AT", None)],
            )
            .browser(|q| format!("code=c&state={}", enc(&q["state"])))
    };
    // Metadata at the server's origin.
    let mut w = base().route(
        Method::Get,
        origin_meta,
        vec![json(serde_json::json!({
            "issuer": "https://mcp.example.com",
            "authorization_endpoint": "https://mcp.example.com/oauth/authorize",
            "token_endpoint": "https://mcp.example.com/token",
            "registration_endpoint": "https://mcp.example.com/register",
            "code_challenge_methods_supported": ["S256"],
        }))],
    );
    let mut f = Flow::new(legacy.clone(), None);
    start(&w, &mut f, None);
    assert_eq!(
        authorized(&w.drive(&mut f)).issuer,
        "https://mcp.example.com"
    );
    assert!(w.authorization_urls[0].starts_with("https://mcp.example.com/oauth/authorize?"));
    // No metadata at all: the default endpoints.
    let mut w = base().route(Method::Get, origin_meta, vec![status(404, "")]);
    let mut f = Flow::new(legacy, None);
    start(&w, &mut f, None);
    authorized(&w.drive(&mut f));
    assert!(w.authorization_urls[0].starts_with("https://mcp.example.com/authorize?"));
    assert_eq!(
        w.urls().last().unwrap(),
        "POST https://mcp.example.com/token"
    );
    // Off by default: no metadata is an error.
    let mut w = base();
    let mut f = flow();
    start(&w, &mut f, None);
    assert!(matches!(
        failed(&w.drive(&mut f)),
        AuthError::NoResourceMetadata { .. }
    ));
}

#[test]
fn urls_the_servers_hand_over_are_checked_before_they_are_fetched() {
    // An authorization server on a private address.
    let mut w = World::new().route(
        Method::Get,
        PRM_URL,
        vec![prm(SERVER, &["https://10.0.0.7"])],
    );
    let mut f = flow();
    start(&w, &mut f, None);
    let e = failed(&w.drive(&mut f)).clone();
    assert!(matches!(e, AuthError::UrlRefused { .. }), "{e}");
    assert!(e.to_string().contains("10.0.0.7"), "{e}");
    assert_eq!(w.sent.len(), 1);
    // A token endpoint at the cloud metadata address.
    let mut w =
        World::standard(serde_json::json!({"token_endpoint": "https://169.254.169.254/token"}));
    let mut f = flow();
    start(&w, &mut f, None);
    let e = failed(&w.drive(&mut f)).clone();
    assert!(e.to_string().contains("metadata"), "{e}");
    assert!(!w.urls().iter().any(|u| u.contains("169.254")));
    // A resource_metadata URL with userinfo.
    let mut w = World::new();
    let mut f = flow();
    start(
        &w,
        &mut f,
        Some(&challenge(
            Some("https://mcp.example.com@evil.example/prm"),
            None,
        )),
    );
    assert!(matches!(
        failed(&w.drive(&mut f)),
        AuthError::UrlRefused { .. }
    ));
    assert!(w.sent.is_empty());
}

// ---------------------------------------------------------------------------------------------
// Client credentials (machine to machine).

fn cc_world() -> World {
    World::standard(serde_json::json!({
        "grant_types_supported": ["client_credentials"],
        "token_endpoint_auth_methods_supported": ["client_secret_basic", "private_key_jwt"],
        "code_challenge_methods_supported": null,
    }))
}

#[test]
fn client_credentials_with_a_secret_need_no_browser_and_no_registration() {
    let mut w = cc_world();
    let mut f = config_with(|c| {
        c.client.client_credentials = Some(mcpwire_core::auth::ClientCredentials {
            client_id: "m2m".into(),
            auth: mcpwire_core::auth::ClientCredentialsAuth::Secret(Secret::new("s3")),
        });
    });
    start(&w, &mut f, Some(&challenge(Some(PRM_URL), Some("jobs"))));
    let g = authorized(&w.drive(&mut f)).clone();
    assert!(w.authorization_urls.is_empty());
    assert!(!w.urls().iter().any(|u| u.contains("/register")));
    let t = w.form(w.sent.len() - 1);
    assert_eq!(t["grant_type"], "client_credentials");
    assert_eq!(t["resource"], SERVER);
    assert_eq!(t["scope"], "jobs");
    assert_eq!(
        w.sent.last().unwrap().headers.get("authorization"),
        Some("Basic bTJtOnMz")
    );
    assert_eq!(g.client.client_id, "m2m");
}

#[test]
fn client_credentials_with_a_private_key_send_a_signed_assertion() {
    use p256::pkcs8::EncodePrivateKey as _;
    let signing = p256::ecdsa::SigningKey::from_bytes(&[5u8; 32].into()).unwrap();
    let pem = signing
        .to_pkcs8_pem(p256::pkcs8::LineEnding::LF)
        .unwrap()
        .to_string();
    let key = mcpwire_core::auth::AssertionKey::new(Secret::new(pem), "ES256").unwrap();
    let mut w = cc_world();
    let mut f = config_with(|c| {
        c.client.client_credentials = Some(mcpwire_core::auth::ClientCredentials {
            client_id: "m2m".into(),
            auth: mcpwire_core::auth::ClientCredentialsAuth::PrivateKeyJwt(key),
        });
    });
    start(&w, &mut f, None);
    authorized(&w.drive(&mut f));
    let t = w.form(w.sent.len() - 1);
    assert_eq!(t["grant_type"], "client_credentials");
    assert_eq!(
        t["client_assertion_type"],
        "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
    );
    assert_eq!(w.sent.last().unwrap().headers.get("authorization"), None);
    let parts: Vec<&str> = t["client_assertion"].split('.').collect();
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let claims: serde_json::Value = serde_json::from_slice(&b64.decode(parts[1]).unwrap()).unwrap();
    assert_eq!(claims["iss"], "m2m");
    assert_eq!(claims["sub"], "m2m");
    assert_eq!(claims["aud"], ISSUER);
    assert_eq!(claims["iat"], 1_800_000_000u64);
}

// ---------------------------------------------------------------------------------------------
// Refresh coordinated with the token store (single flight across processes).

fn coordinated(stored_grant: Grant) -> Flow {
    let mut c = FlowConfig::new(SERVER, REDIRECT);
    c.coordinate_refresh = true;
    Flow::new(c, Some(stored_grant))
}

#[test]
fn a_coordinated_refresh_locks_the_store_first_and_uses_what_it_holds() {
    let w = World::new();
    // Nothing newer in the store: our refresh token is used.
    let mut f = coordinated(stored(Some("RT-OLD"), RegistrationKind::Dynamic));
    f.refresh(w.now, wall(), ENTROPY).unwrap();
    let Some(FlowOutput::LockStore { issuer, resource }) = f.poll_output() else {
        panic!("no lock asked for")
    };
    assert_eq!((issuer.as_str(), resource.as_str()), (ISSUER, SERVER));
    assert!(f.poll_output().is_none(), "nothing is sent before the lock");
    f.handle_store_locked(
        w.now,
        wall(),
        Some(stored(Some("RT-OLD"), RegistrationKind::Dynamic)),
    );
    let Some(FlowOutput::Fetch { request, .. }) = f.poll_output() else {
        panic!()
    };
    let form: HashMap<String, String> = url::form_urlencoded::parse(&request.body)
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    assert_eq!(form["refresh_token"], "RT-OLD");
}

#[test]
fn a_grant_another_process_just_refreshed_is_taken_without_a_request() {
    let w = World::new();
    let mut f = coordinated(stored(Some("RT-OLD"), RegistrationKind::Dynamic));
    f.refresh(w.now, wall(), ENTROPY).unwrap();
    assert!(matches!(
        f.poll_output(),
        Some(FlowOutput::LockStore { .. })
    ));
    let mut theirs = stored(Some("RT-NEW"), RegistrationKind::Dynamic);
    theirs.tokens.access_token = Secret::new("AT-THEIRS");
    theirs.tokens.expires_at = Some(1_800_000_000 + 3600);
    f.handle_store_locked(w.now, wall(), Some(theirs));
    let Some(FlowOutput::Authorized(g)) = f.poll_output() else {
        panic!()
    };
    assert_eq!(g.tokens.access_token.expose(), "AT-THEIRS");
    assert!(f.poll_output().is_none(), "no token request");
}

#[test]
fn an_expired_grant_from_another_process_is_refreshed_with_its_refresh_token() {
    let w = World::new();
    let mut f = coordinated(stored(Some("RT-OLD"), RegistrationKind::Dynamic));
    f.refresh(w.now, wall(), ENTROPY).unwrap();
    assert!(matches!(
        f.poll_output(),
        Some(FlowOutput::LockStore { .. })
    ));
    // Rotated by another process (RT-OLD is spent), and expired meanwhile.
    f.handle_store_locked(
        w.now,
        wall(),
        Some(stored(Some("RT-ROTATED"), RegistrationKind::Dynamic)),
    );
    let Some(FlowOutput::Fetch { request, .. }) = f.poll_output() else {
        panic!()
    };
    let form: HashMap<String, String> = url::form_urlencoded::parse(&request.body)
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    assert_eq!(form["refresh_token"], "RT-ROTATED");
}

#[test]
fn after_the_user_declines_refusals_fail_at_once_until_allowed_again() {
    let mut w = World::standard(serde_json::json!({}))
        .browser(|q| format!("error=access_denied&state={}", enc(&q["state"])));
    let mut f = flow();
    start(&w, &mut f, None);
    w.drive(&mut f);
    assert_eq!(w.authorization_urls.len(), 1);
    // The next refused request does not ask the person again.
    let e = f
        .handle_unauthorized(w.now, wall(), None, ENTROPY)
        .unwrap_err();
    assert!(matches!(e, AuthError::Denied { .. }), "{e}");
    assert!(f.poll_output().is_none());
    // The host lets it ask again ("log in" once more).
    f.allow_again();
    let mut w = w.browser(|q| format!("code=c&state={}&iss={}", enc(&q["state"]), enc(ISSUER)));
    start(&w, &mut f, None);
    authorized(&w.drive(&mut f));
}

#[test]
fn allowed_again_while_the_browser_step_is_under_way_holds_for_its_decline() {
    // The host learns of the decline (its own browser step said so) and lets the next call
    // ask again before the flow has heard the decline: that decline is not kept.
    let mut w = World::standard(serde_json::json!({}))
        .browser(|q| format!("error=access_denied&state={}", enc(&q["state"])));
    let mut f = flow();
    start(&w, &mut f, None);
    let ends = w.drive_with(&mut f, Flow::allow_again);
    assert!(
        matches!(failed(&ends), AuthError::Denied { .. }),
        "{ends:?}"
    );
    assert_eq!(w.authorization_urls.len(), 1);
    // The next refusal asks again, and that authorization goes through.
    let mut w = w.browser(|q| format!("code=c&state={}&iss={}", enc(&q["state"]), enc(ISSUER)));
    start(&w, &mut f, None);
    authorized(&w.drive(&mut f));
    assert_eq!(w.authorization_urls.len(), 2);

    // Allowed again before an authorization, not during one: its decline is kept as before.
    let mut w = World::standard(serde_json::json!({}))
        .browser(|q| format!("error=access_denied&state={}", enc(&q["state"])));
    let mut f = flow();
    f.allow_again();
    start(&w, &mut f, None);
    let ends = w.drive(&mut f);
    assert!(
        matches!(failed(&ends), AuthError::Denied { .. }),
        "{ends:?}"
    );
    let e = f
        .handle_unauthorized(w.now, wall(), None, ENTROPY)
        .unwrap_err();
    assert!(matches!(e, AuthError::Denied { .. }), "{e}");
}

//! The reference server with authorization (`mcpwire dev mcp-server --auth`, in-process on
//! 127.0.0.1) against the library's real client: the login (discovery, registration, the
//! authorization with PKCE, the code exchange), a stored token reused by a second client, an
//! expired token refreshed with rotation, a step-up for `admin_echo`, and the consent page
//! answered by the test acting as the browser; both drivers. Then the authorization server's
//! answers to bad input, one by one, over plain HTTP.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use mcpwire::mcp::blocking::McpClient;
use mcpwire::mcp::{
    Authorization, ClientOptions, FollowRedirect, LoopbackBrowser, MemoryStore, TokenStore,
    UserAgent,
};
use mcpwire_core::auth::PkceVerifier;
use mcpwire_core::mcp::headers::request_headers;
use mcpwire_core::mcp::meta::{build_request, RequestMeta};
use mcpwire_core::mcp::{ClientCapabilities, Implementation};
use mcpwire_dev::auth_server::{AuthConfig, AuthStats, AS_METADATA_PATH, PRM_PATH};
use mcpwire_dev::mcp_server::{self, McpServer, McpServerHandle};
use serde_json::{json, Value};

/// The whole test gives up on a browser step after this long.
const PATIENCE: Duration = Duration::from_secs(20);

fn server(auto_approve: bool) -> McpServerHandle {
    let config = mcp_server::Config {
        auth: Some(AuthConfig {
            auto_approve,
            ..AuthConfig::default()
        }),
        ..mcp_server::Config::default()
    };
    McpServer::start_http(config, "127.0.0.1:0").unwrap()
}

fn origin(srv: &McpServerHandle) -> String {
    format!("http://{}", srv.local_addr())
}

fn auth_stats(srv: &McpServerHandle) -> AuthStats {
    srv.server().stats().auth
}

fn authorization(user_agent: Arc<dyn UserAgent>, store: Arc<MemoryStore>) -> Authorization {
    let mut auth = Authorization::new(user_agent, store);
    auth.allow_http_loopback = true;
    auth.timeout = PATIENCE;
    auth
}

fn options(store: &Arc<MemoryStore>) -> ClientOptions {
    ClientOptions::default()
        .with_authorization(authorization(Arc::new(FollowRedirect), store.clone()))
}

fn scope_set(s: &str) -> Vec<&str> {
    let mut v: Vec<&str> = s.split(' ').collect();
    v.sort_unstable();
    v
}

/// Logs in with the blocking client (the first call meets the 401) and checks the calls.
fn login(srv: &McpServerHandle, store: &Arc<MemoryStore>) -> McpClient {
    let client = McpClient::connect_http(&srv.url(), options(store)).unwrap();
    let discover = client.discover().unwrap();
    assert!(discover.supports_version("2026-07-28"));
    let tools = client.list_tools(None).unwrap();
    assert!(tools.tools.iter().any(|t| t.name == "admin_echo"));
    let echo = client.call_tool("echo", json!({"text": "hi"})).unwrap();
    assert_eq!(echo.text(), "hi");
    client
}

#[test]
fn the_first_call_registers_authorizes_and_exchanges_a_code() {
    let srv = server(true);
    let store = Arc::new(MemoryStore::default());
    let _client = login(&srv, &store);
    let s = auth_stats(&srv);
    assert_eq!(s.registrations, 1, "{s:?}");
    assert_eq!(s.authorization_requests, 1, "{s:?}");
    assert_eq!(s.codes_issued, 1, "{s:?}");
    assert_eq!(s.tokens_issued, 1, "{s:?}");
    assert_eq!(s.refreshes, 0, "{s:?}");
    assert_eq!(s.token_errors, 0, "{s:?}");
    assert!(s.unauthorized >= 1, "the first request met the 401: {s:?}");
    // The challenge's scope, and offline_access because the server offers it.
    assert_eq!(scope_set(&s.granted_scopes[0]), ["mcp", "offline_access"]);
    let grant = store.load(&srv.url()).expect("the grant is stored");
    assert_eq!(grant.resource, srv.url());
    assert_eq!(grant.issuer, format!("{}/oauth", origin(&srv)));
    assert!(grant.tokens.refresh_token.is_some());
    // The server's Debug shows counters, never a token.
    let shown = format!("{:?}", srv.server());
    assert!(shown.contains("tokens_issued: 1"), "{shown}");
    assert!(!shown.contains(grant.tokens.access_token.expose()));
    assert!(
        !shown.contains("mcprt_") && !shown.contains("mcpat_"),
        "{shown}"
    );
    assert_eq!(srv.server().stats().tool_calls.get("echo"), Some(&1));
}

#[test]
fn a_second_client_sharing_the_store_reuses_the_token() {
    let srv = server(true);
    let store = Arc::new(MemoryStore::default());
    let first = login(&srv, &store);
    first.close();
    let before = auth_stats(&srv);
    let second = McpClient::connect_http(&srv.url(), options(&store)).unwrap();
    assert_eq!(
        second
            .call_tool("echo", json!({"text": "again"}))
            .unwrap()
            .text(),
        "again"
    );
    let after = auth_stats(&srv);
    assert_eq!(after.registrations, 1, "{after:?}");
    assert_eq!(after.authorization_requests, 1, "{after:?}");
    assert_eq!(after.tokens_issued, 1, "{after:?}");
    assert_eq!(
        after.unauthorized, before.unauthorized,
        "the stored token was sent from the first request on"
    );
}

#[test]
fn an_expired_token_is_refreshed_once_and_the_refresh_token_rotates() {
    let srv = server(true);
    let store = Arc::new(MemoryStore::default());
    let client = login(&srv, &store);
    let old = store.load(&srv.url()).unwrap();
    let old_refresh = old.tokens.refresh_token.clone().unwrap();
    srv.server().auth().unwrap().expire_access_tokens();

    assert_eq!(
        client
            .call_tool("echo", json!({"text": "later"}))
            .unwrap()
            .text(),
        "later"
    );
    let s = auth_stats(&srv);
    assert_eq!(s.refreshes, 1, "{s:?}");
    assert_eq!(s.authorization_requests, 1, "no new authorization: {s:?}");
    assert_eq!(s.tokens_issued, 1, "{s:?}");
    let new = store.load(&srv.url()).unwrap();
    let new_refresh = new.tokens.refresh_token.clone().unwrap();
    assert_ne!(new_refresh.expose(), old_refresh.expose(), "rotated");
    assert_ne!(
        new.tokens.access_token.expose(),
        old.tokens.access_token.expose()
    );

    // The spent refresh token is refused; the old access token is expired.
    let r = post_form(
        &format!("{}/oauth/token", origin(&srv)),
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", old_refresh.expose()),
            ("client_id", &old.client.client_id),
            ("resource", &srv.url()),
        ],
        None,
    );
    assert_eq!(
        (r.status, r.json()["error"].as_str()),
        (400, Some("invalid_grant"))
    );
    let r = mcp_call(
        &srv,
        "echo",
        json!({"text": "x"}),
        Some(old.tokens.access_token.expose()),
    );
    assert_eq!(r.status, 401);
    assert!(r
        .header("www-authenticate")
        .unwrap()
        .contains("error=\"invalid_token\""));
    // The new one works.
    let r = mcp_call(
        &srv,
        "echo",
        json!({"text": "x"}),
        Some(new.tokens.access_token.expose()),
    );
    assert_eq!(r.status, 200, "{}", r.body);
}

#[test]
fn admin_echo_steps_up_to_the_union_of_the_scopes() {
    let srv = server(true);
    let store = Arc::new(MemoryStore::default());
    let client = login(&srv, &store);
    let r = client
        .call_tool("admin_echo", json!({"text": "root"}))
        .unwrap();
    assert_eq!(r.text(), "root");
    let s = auth_stats(&srv);
    assert_eq!(s.insufficient_scope, 1, "{s:?}");
    assert_eq!(s.authorization_requests, 2, "{s:?}");
    assert_eq!(s.tokens_issued, 2, "{s:?}");
    assert_eq!(s.registrations, 1, "the registered client is reused: {s:?}");
    assert_eq!(
        scope_set(&s.granted_scopes[1]),
        ["mcp", "mcp:admin", "offline_access"]
    );
    // With the stepped-up token both tools answer without another authorization.
    assert_eq!(
        client
            .call_tool("echo", json!({"text": "e"}))
            .unwrap()
            .text(),
        "e"
    );
    assert_eq!(
        client
            .call_tool("admin_echo", json!({"text": "a"}))
            .unwrap()
            .text(),
        "a"
    );
    assert_eq!(auth_stats(&srv).authorization_requests, 2);
}

/// The test as the person's browser: opens the URL the client shows, answers the consent page
/// with `decision`, follows the redirect to the client's loopback callback.
fn act_as_browser(url: String, base: &str, decision: &'static str) {
    assert!(
        url.starts_with(&format!("{base}/oauth/authorize?")),
        "{url}"
    );
    let page = get(&url);
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains(">Allow</button>"), "{}", page.body);
    let marker = "name=\"consent\" value=\"";
    let at = page.body.find(marker).expect("the consent id") + marker.len();
    let consent = &page.body[at..at + page.body[at..].find('"').unwrap()];
    let answer = post_form(
        &format!("{base}/oauth/authorize"),
        &[("consent", consent), ("decision", decision)],
        None,
    );
    assert_eq!(answer.status, 302, "{}", answer.body);
    let location = answer.header("location").unwrap().to_owned();
    assert!(location.starts_with("http://127.0.0.1:"), "{location}");
    assert!(location.contains("/callback?"), "{location}");
    assert!(location.contains("iss="), "{location}");
    // The client's loopback listener answers the browser.
    let done = get(&location);
    assert_eq!(done.status, 200, "{}", done.body);
}

fn loopback_browser(tx: mpsc::Sender<String>) -> Arc<dyn UserAgent> {
    Arc::new(
        LoopbackBrowser::new()
            .with_show(move |url| {
                let _ = tx.send(url.to_owned());
            })
            .with_timeout(PATIENCE),
    )
}

#[test]
fn a_person_allows_on_the_consent_page_and_the_loopback_browser_gets_the_code() {
    let srv = server(false);
    let (tx, rx) = mpsc::channel();
    let store = Arc::new(MemoryStore::default());
    let options =
        ClientOptions::default().with_authorization(authorization(loopback_browser(tx), store));
    let browser = {
        let base = origin(&srv);
        std::thread::spawn(move || {
            let url = rx.recv_timeout(PATIENCE).expect("the client shows a URL");
            act_as_browser(url, &base, "allow");
        })
    };
    let client = McpClient::connect_http(&srv.url(), options).unwrap();
    assert_eq!(
        client
            .call_tool("echo", json!({"text": "consented"}))
            .unwrap()
            .text(),
        "consented"
    );
    browser.join().unwrap();
    let s = auth_stats(&srv);
    assert_eq!(
        (s.consent_pages, s.codes_issued, s.tokens_issued),
        (1, 1, 1),
        "{s:?}"
    );
}

#[test]
fn a_person_who_denies_gets_the_call_failed_with_access_denied() {
    let srv = server(false);
    let (tx, rx) = mpsc::channel();
    let store = Arc::new(MemoryStore::default());
    let options =
        ClientOptions::default().with_authorization(authorization(loopback_browser(tx), store));
    let browser = {
        let base = origin(&srv);
        // Every consent page the client opens is denied (until the client is gone).
        std::thread::spawn(move || {
            let mut pages = 0;
            while let Ok(url) = rx.recv_timeout(PATIENCE) {
                act_as_browser(url, &base, "deny");
                pages += 1;
            }
            pages
        })
    };
    let client = McpClient::connect_http(&srv.url(), options).unwrap();
    let e = client.call_tool("echo", json!({"text": "no"})).unwrap_err();
    drop(client);
    let pages = browser.join().unwrap();
    assert!(e.to_string().contains("access_denied"), "{e}");
    let s = auth_stats(&srv);
    // Asked once: the tools/list read for the tool's headers is denied, and the tools/call
    // that follows fails with that refusal instead of asking the person again.
    assert_eq!(pages, 1);
    assert_eq!(s.denials, pages);
    assert_eq!((s.codes_issued, s.tokens_issued), (0, 0), "{s:?}");
    assert!(srv.server().stats().tool_calls.is_empty());
}

#[test]
fn the_smol_client_logs_in_refreshes_and_steps_up() {
    use mcpwire::mcp::smol::McpClient;
    let srv = server(true);
    let store = Arc::new(MemoryStore::default());
    smol::block_on(async {
        let client = McpClient::connect_http(&srv.url(), options(&store)).unwrap();
        let r = client
            .call_tool("echo", json!({"text": "async"}))
            .await
            .unwrap();
        assert_eq!(r.text(), "async");
        srv.server().auth().unwrap().expire_access_tokens();
        let r = client
            .call_tool("echo", json!({"text": "again"}))
            .await
            .unwrap();
        assert_eq!(r.text(), "again");
        let r = client
            .call_tool("admin_echo", json!({"text": "up"}))
            .await
            .unwrap();
        assert_eq!(r.text(), "up");
    });
    let s = auth_stats(&srv);
    assert_eq!(s.registrations, 1, "{s:?}");
    assert_eq!(s.refreshes, 1, "{s:?}");
    assert_eq!(s.authorization_requests, 2, "login and step-up: {s:?}");
    assert_eq!(s.insufficient_scope, 1, "{s:?}");
}

// ---------------------------------------------------------------------------------------------
// The authorization server's answers over plain HTTP
// ---------------------------------------------------------------------------------------------

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .timeout_global(Some(PATIENCE))
        .build()
        .into()
}

struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }

    /// The query parameter `name` of the `Location` a `302` points to.
    fn redirect_param(&self, name: &str) -> Option<String> {
        let location = self.header("location")?;
        let query = location.split_once('?')?.1;
        url::form_urlencoded::parse(query.as_bytes())
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.into_owned())
    }
}

fn reply(r: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> Reply {
    let mut r = r.unwrap();
    let status = r.status().as_u16();
    let headers = r
        .headers()
        .iter()
        .map(|(n, v)| {
            (
                n.as_str().to_owned(),
                v.to_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let body = r.body_mut().read_to_string().unwrap_or_default();
    Reply {
        status,
        headers,
        body,
    }
}

fn get(url: &str) -> Reply {
    reply(agent().get(url).call())
}

fn post_form(url: &str, pairs: &[(&str, &str)], basic: Option<&str>) -> Reply {
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs)
        .finish();
    let mut req = agent()
        .post(url)
        .header("content-type", "application/x-www-form-urlencoded");
    if let Some(b) = basic {
        req = req.header("authorization", b);
    }
    reply(req.send(body.as_str()))
}

fn post_json(url: &str, body: &str) -> Reply {
    reply(
        agent()
            .post(url)
            .header("content-type", "application/json")
            .send(body),
    )
}

/// A 2026-07-28 `tools/call` with the headers the core builds, and the bearer token given.
fn mcp_call(srv: &McpServerHandle, tool: &str, args: Value, token: Option<&str>) -> Reply {
    let meta = RequestMeta::new("2026-07-28", ClientCapabilities::none())
        .with_client_info(Implementation::new("dev-auth-test", "1"));
    let body = build_request(
        &1.into(),
        "tools/call",
        json!({"name": tool, "arguments": args}),
        &meta,
    )
    .unwrap();
    let mut req = agent().post(srv.url());
    for (n, v) in request_headers(&body, None).unwrap().iter() {
        req = req.header(n, v);
    }
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    reply(req.send(body.as_str()))
}

const REDIRECT: &str = "http://127.0.0.1:9/callback";

fn register(srv: &McpServerHandle, extra: Value) -> Value {
    let mut body = json!({
        "redirect_uris": [REDIRECT],
        "grant_types": ["authorization_code", "refresh_token"],
        "application_type": "native",
        "token_endpoint_auth_method": "none"
    });
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    let r = post_json(
        &format!("{}/oauth/register", origin(srv)),
        &body.to_string(),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    r.json()
}

/// `GET /oauth/authorize` with the usual parameters, `changes` applied (`""` removes one).
fn authorize(
    srv: &McpServerHandle,
    client_id: &str,
    challenge: &str,
    changes: &[(&str, &str)],
) -> Reply {
    let resource = srv.url();
    let mut pairs: Vec<(&str, &str)> = vec![
        ("response_type", "code"),
        ("client_id", client_id),
        ("redirect_uri", REDIRECT),
        ("code_challenge", challenge),
        ("code_challenge_method", "S256"),
        ("state", "st4te"),
        ("resource", &resource),
        ("scope", "mcp offline_access"),
    ];
    for (k, v) in changes {
        pairs.retain(|(n, _)| n != k);
        if !v.is_empty() {
            pairs.push((k, v));
        }
    }
    let q = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(&pairs)
        .finish();
    get(&format!("{}/oauth/authorize?{q}", origin(srv)))
}

fn error_of(r: &Reply) -> (u16, String) {
    (
        r.status,
        r.json()["error"].as_str().unwrap_or_default().to_owned(),
    )
}

#[test]
fn the_metadata_documents_name_each_other_exactly() {
    let srv = server(true);
    let base = origin(&srv);
    let prm = get(&format!("{base}{PRM_PATH}")).json();
    assert_eq!(prm["resource"], srv.url());
    assert_eq!(
        prm["authorization_servers"],
        json!([format!("{base}/oauth")])
    );
    let meta = get(&format!("{base}{AS_METADATA_PATH}")).json();
    assert_eq!(meta["issuer"], format!("{base}/oauth"));
    assert_eq!(meta["code_challenge_methods_supported"], json!(["S256"]));
    assert_eq!(meta["authorization_response_iss_parameter_supported"], true);
    assert_eq!(
        meta["token_endpoint_auth_methods_supported"],
        json!(["none", "client_secret_basic"])
    );
    assert_eq!(
        meta["grant_types_supported"],
        json!(["authorization_code", "refresh_token"])
    );
    assert!(meta["scopes_supported"]
        .as_array()
        .unwrap()
        .contains(&json!("offline_access")));
    assert_eq!(
        meta["registration_endpoint"],
        format!("{base}/oauth/register")
    );

    // The MCP endpoint without a token, and `/` is no alias with authorization.
    let r = mcp_call(&srv, "echo", json!({"text": "x"}), None);
    assert_eq!(r.status, 401);
    assert_eq!(
        r.header("www-authenticate").unwrap(),
        format!("Bearer resource_metadata=\"{base}{PRM_PATH}\", scope=\"mcp\"")
    );
    assert_eq!(get(&format!("{base}/")).status, 404);
    assert!(srv.server().stats().tool_calls.is_empty());
}

#[test]
fn registration_refuses_what_it_cannot_serve() {
    let srv = server(true);
    let url = format!("{}/oauth/register", origin(&srv));
    for (body, error) in [
        ("not json", "invalid_client_metadata"),
        ("[]", "invalid_client_metadata"),
        ("{}", "invalid_redirect_uri"),
        (r#"{"redirect_uris": []}"#, "invalid_redirect_uri"),
        (
            r#"{"redirect_uris": ["http://app.example/cb"]}"#,
            "invalid_redirect_uri",
        ),
        (r#"{"redirect_uris": [7]}"#, "invalid_client_metadata"),
        (
            r#"{"redirect_uris": ["http://127.0.0.1/cb"], "token_endpoint_auth_method": "private_key_jwt"}"#,
            "invalid_client_metadata",
        ),
        (
            r#"{"redirect_uris": ["http://127.0.0.1/cb"], "grant_types": ["password"]}"#,
            "invalid_client_metadata",
        ),
        (
            r#"{"redirect_uris": ["http://127.0.0.1/cb"], "application_type": "desktop"}"#,
            "invalid_client_metadata",
        ),
    ] {
        assert_eq!(
            error_of(&post_json(&url, body)),
            (400, error.to_owned()),
            "{body}"
        );
    }
    assert_eq!(get(&url).status, 405);
    // The RFC's default method is client_secret_basic: a secret comes back.
    let c = register(&srv, json!({"token_endpoint_auth_method": null}));
    assert_eq!(c["token_endpoint_auth_method"], "client_secret_basic");
    assert!(c["client_secret"].as_str().unwrap().len() >= 64);
    assert_eq!(c["application_type"], "native");
    assert_eq!(auth_stats(&srv).registrations, 1);
}

#[test]
fn the_authorization_endpoint_checks_every_parameter() {
    let srv = server(true);
    let client = register(&srv, json!({}));
    let id = client["client_id"].as_str().unwrap();
    let verifier = PkceVerifier::from_random([7; 32]);
    let ch = verifier.challenge();
    let issuer = format!("{}/oauth", origin(&srv));

    // Not redirected: an unknown client, a redirect URI that is not the registered one.
    for changes in [
        vec![("client_id", "nobody")],
        vec![("client_id", "")],
        vec![("redirect_uri", "http://127.0.0.1:9/callback/")],
        vec![("redirect_uri", "")],
    ] {
        let r = authorize(&srv, id, &ch, &changes);
        assert_eq!(r.status, 400, "{changes:?}");
        assert!(r.header("location").is_none());
        assert!(matches!(
            r.json()["error"].as_str(),
            Some("invalid_client" | "invalid_request")
        ));
    }
    // Redirected with the error, state and iss.
    for (changes, error) in [
        (
            vec![("response_type", "token")],
            "unsupported_response_type",
        ),
        (vec![("code_challenge_method", "")], "invalid_request"),
        (vec![("code_challenge_method", "plain")], "invalid_request"),
        (vec![("code_challenge", "short")], "invalid_request"),
        (vec![("resource", "")], "invalid_target"),
        (
            vec![("resource", "http://127.0.0.1:1/mcp")],
            "invalid_target",
        ),
        (vec![("scope", "mcp root")], "invalid_scope"),
    ] {
        let r = authorize(&srv, id, &ch, &changes);
        assert_eq!(r.status, 302, "{changes:?}: {}", r.body);
        assert_eq!(
            r.redirect_param("error").as_deref(),
            Some(error),
            "{changes:?}"
        );
        assert_eq!(r.redirect_param("state").as_deref(), Some("st4te"));
        assert_eq!(r.redirect_param("iss").as_deref(), Some(issuer.as_str()));
        assert!(r.redirect_param("code").is_none());
    }
    let r = authorize(&srv, id, &ch, &[("state", "")]);
    assert_eq!(
        r.redirect_param("error").as_deref(),
        Some("invalid_request")
    );
    assert_eq!(auth_stats(&srv).codes_issued, 0);

    // A good request: the code, the state, the issuer.
    let r = authorize(&srv, id, &ch, &[]);
    assert_eq!(r.status, 302);
    assert!(r
        .header("location")
        .unwrap()
        .starts_with(&format!("{REDIRECT}?code=")));
    assert_eq!(r.redirect_param("state").as_deref(), Some("st4te"));
    assert_eq!(r.redirect_param("iss").as_deref(), Some(issuer.as_str()));
    let s = auth_stats(&srv);
    assert_eq!((s.authorization_requests, s.codes_issued), (1, 1));
}

#[test]
fn the_token_endpoint_checks_the_code_the_verifier_and_rotates_refresh_tokens() {
    let srv = server(true);
    let token_url = format!("{}/oauth/token", origin(&srv));
    let resource = srv.url();
    let client = register(&srv, json!({}));
    let id = client["client_id"].as_str().unwrap();
    let verifier = PkceVerifier::from_random([9; 32]);
    let code = || {
        authorize(&srv, id, &verifier.challenge(), &[])
            .redirect_param("code")
            .unwrap()
    };
    let exchange = |code: &str, verifier: &str, redirect: &str, res: &str| {
        post_form(
            &token_url,
            &[
                ("grant_type", "authorization_code"),
                ("code", code),
                ("redirect_uri", redirect),
                ("code_verifier", verifier),
                ("client_id", id),
                ("resource", res),
            ],
            None,
        )
    };
    let other = PkceVerifier::from_random([1; 32]);
    let c = code();
    let r = exchange(&c, other.expose(), REDIRECT, &resource);
    assert_eq!(
        error_of(&r),
        (400, "invalid_grant".into()),
        "wrong verifier"
    );
    let r = exchange(&c, verifier.expose(), REDIRECT, &resource);
    assert_eq!(
        error_of(&r),
        (400, "invalid_grant".into()),
        "a code is used once"
    );
    let r = exchange(
        &code(),
        verifier.expose(),
        "http://127.0.0.1:9/other",
        &resource,
    );
    assert_eq!(error_of(&r), (400, "invalid_grant".into()), "redirect_uri");
    let r = exchange(
        &code(),
        verifier.expose(),
        REDIRECT,
        "http://127.0.0.1:1/mcp",
    );
    assert_eq!(error_of(&r), (400, "invalid_target".into()), "resource");
    let r = exchange(&code(), "not a verifier", REDIRECT, &resource);
    assert_eq!(
        error_of(&r),
        (400, "invalid_grant".into()),
        "malformed verifier"
    );

    let r = exchange(&code(), verifier.expose(), REDIRECT, &resource);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.header("cache-control"), Some("no-store"));
    let t = r.json();
    assert_eq!(t["token_type"], "Bearer");
    assert_eq!(t["expires_in"], 3600);
    assert_eq!(
        scope_set(t["scope"].as_str().unwrap()),
        ["mcp", "offline_access"]
    );
    let access = t["access_token"].as_str().unwrap().to_owned();
    let refresh = t["refresh_token"].as_str().unwrap().to_owned();

    // The token reaches the MCP endpoint; without mcp:admin, admin_echo is 403.
    assert_eq!(
        mcp_call(&srv, "echo", json!({"text": "t"}), Some(&access)).status,
        200
    );
    let r = mcp_call(&srv, "admin_echo", json!({"text": "t"}), Some(&access));
    assert_eq!(r.status, 403);
    let challenge = r.header("www-authenticate").unwrap();
    assert!(
        challenge.starts_with("Bearer error=\"insufficient_scope\", scope=\"mcp:admin\""),
        "{challenge}"
    );
    assert!(challenge.contains(&format!("resource_metadata=\"{}{PRM_PATH}\"", origin(&srv))));
    assert_eq!(srv.server().stats().tool_calls.get("admin_echo"), None);

    // Refresh: a new pair; the old refresh token is spent.
    let refresh_with = |token: &str| {
        post_form(
            &token_url,
            &[
                ("grant_type", "refresh_token"),
                ("refresh_token", token),
                ("client_id", id),
                ("resource", &resource),
            ],
            None,
        )
    };
    let r = refresh_with(&refresh);
    assert_eq!(r.status, 200, "{}", r.body);
    let rotated = r.json()["refresh_token"].as_str().unwrap().to_owned();
    assert_ne!(rotated, refresh);
    assert_eq!(
        error_of(&refresh_with(&refresh)),
        (400, "invalid_grant".into())
    );
    assert_eq!(refresh_with(&rotated).status, 200);

    // Other mistakes, each its RFC 6749 error.
    let bad = |pairs: &[(&str, &str)]| error_of(&post_form(&token_url, pairs, None));
    assert_eq!(
        bad(&[("grant_type", "password"), ("client_id", id)]),
        (400, "unsupported_grant_type".into())
    );
    assert_eq!(bad(&[("client_id", id)]), (400, "invalid_request".into()));
    assert_eq!(
        bad(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", "x"),
            ("resource", &resource)
        ]),
        (401, "invalid_client".into())
    );
    assert_eq!(
        bad(&[
            ("grant_type", "refresh_token"),
            ("client_id", id),
            ("client_id", id),
        ]),
        (400, "invalid_request".into())
    );
    let r = reply(
        agent()
            .post(&token_url)
            .header("content-type", "application/json")
            .send("{}"),
    );
    assert_eq!(error_of(&r), (400, "invalid_request".into()));
    let s = auth_stats(&srv);
    assert_eq!((s.tokens_issued, s.refreshes), (1, 2), "{s:?}");
    assert!(s.token_errors >= 10, "{s:?}");
}

#[test]
fn a_confidential_client_authenticates_with_http_basic() {
    let srv = server(true);
    let token_url = format!("{}/oauth/token", origin(&srv));
    let client = register(
        &srv,
        json!({"token_endpoint_auth_method": "client_secret_basic"}),
    );
    let id = client["client_id"].as_str().unwrap();
    let secret = client["client_secret"].as_str().unwrap();
    let verifier = PkceVerifier::from_random([3; 32]);
    let code = || {
        authorize(&srv, id, &verifier.challenge(), &[])
            .redirect_param("code")
            .unwrap()
    };
    let form = |code: String| {
        vec![
            ("grant_type", "authorization_code".to_owned()),
            ("code", code),
            ("redirect_uri", REDIRECT.to_owned()),
            ("code_verifier", verifier.expose().to_owned()),
            ("resource", srv.url()),
        ]
    };
    let basic = |id: &str, secret: &str| {
        use base64::Engine as _;
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{id}:{secret}"))
        )
    };
    let send = |pairs: Vec<(&str, String)>, auth: Option<&str>| {
        let refs: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (*k, v.as_str())).collect();
        post_form(&token_url, &refs, auth)
    };
    let r = send(form(code()), Some(&basic(id, "wrong")));
    assert_eq!(error_of(&r), (401, "invalid_client".into()));
    assert!(r.header("www-authenticate").unwrap().starts_with("Basic"));
    let r = send(form(code()), Some("Basic !!!"));
    assert_eq!(error_of(&r), (401, "invalid_client".into()));
    let mut public = form(code());
    public.push(("client_id", id.to_owned()));
    assert_eq!(
        error_of(&send(public, None)),
        (401, "invalid_client".into()),
        "no secret"
    );
    let r = send(form(code()), Some(&basic(id, secret)));
    assert_eq!(r.status, 200, "{}", r.body);
}

#[test]
fn bad_tokens_and_odd_bytes_get_typed_answers_and_the_server_stays_up() {
    let srv = server(true);
    let base = origin(&srv);
    let r = mcp_call(&srv, "echo", json!({"text": "x"}), Some("mcpat_forged"));
    assert_eq!(r.status, 401);
    assert!(r
        .header("www-authenticate")
        .unwrap()
        .contains("error=\"invalid_token\""));
    assert_eq!(r.json()["error"], "invalid_token");
    let r = reply(
        agent()
            .post(srv.url())
            .header("authorization", "Basic Zm9vOmJhcg==")
            .send("{}"),
    );
    assert_eq!(r.status, 401);
    // Invalid UTF-8, long values, an unknown consent, wrong methods.
    let r = reply(
        agent()
            .post(format!("{base}/oauth/token"))
            .header("content-type", "application/x-www-form-urlencoded")
            .send(&b"grant_type=%ff%fe&client_id=\xff"[..]),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    let long = "x".repeat(10_000);
    let r = get(&format!("{base}/oauth/authorize?client_id={long}"));
    assert_eq!(error_of(&r), (400, "invalid_request".into()));
    let r = post_form(
        &format!("{base}/oauth/authorize"),
        &[("consent", "nope"), ("decision", "allow")],
        None,
    );
    assert_eq!(error_of(&r), (400, "invalid_request".into()));
    let r = reply(agent().delete(format!("{base}/oauth/authorize")).call());
    assert_eq!(r.status, 405);
    let r = reply(agent().post(format!("{base}{PRM_PATH}")).send(""));
    assert_eq!(r.status, 405);
    // Still serving.
    assert_eq!(get(&format!("{base}{PRM_PATH}")).status, 200);
}

// ---------------------------------------------------------------------------------------------
// The binary
// ---------------------------------------------------------------------------------------------

#[test]
fn the_binary_explains_and_serves_auth_with_its_token_lifetime() {
    use std::io::{BufRead, BufReader};
    let bin = env!("CARGO_BIN_EXE_mcpwire");
    let help = std::process::Command::new(bin)
        .args(["dev", "mcp-server", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    for needle in [
        "--auth",
        "--auth-auto-approve",
        "--auth-token-ttl",
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-authorization-server/oauth",
        "/oauth/register",
        "/oauth/authorize",
        "/oauth/token",
        "admin_echo",
        "mcp:admin",
        "invalid_grant",
    ] {
        assert!(help.contains(needle), "missing {needle:?} in:\n{help}");
    }
    let refused = std::process::Command::new(bin)
        .args(["dev", "mcp-server", "--stdio", "--auth"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2), "--auth is HTTP only");

    let mut child = std::process::Command::new(bin)
        .args([
            "dev",
            "mcp-server",
            "--listen",
            "127.0.0.1:0",
            "--auth",
            "--auth-auto-approve",
            "--auth-token-ttl",
            "7",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let (mut first, mut second) = (String::new(), String::new());
    out.read_line(&mut first).unwrap();
    out.read_line(&mut second).unwrap();
    let url = first
        .trim()
        .strip_prefix("listening on ")
        .unwrap()
        .to_owned();
    let issuer = second
        .trim()
        .strip_prefix("authorization server: ")
        .unwrap()
        .to_owned();
    assert_eq!(issuer, url.replace("/mcp", "/oauth"));

    let store = Arc::new(MemoryStore::default());
    let client = McpClient::connect_http(&url, options(&store)).unwrap();
    let r = client.call_tool("echo", json!({"text": "bin"}));
    let grant = store.load(&url);
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(r.unwrap().text(), "bin");
    let grant = grant.unwrap();
    assert_eq!(grant.issuer, issuer);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let expires = grant.tokens.expires_at.unwrap();
    assert!(
        (now + 5..=now + 8).contains(&expires),
        "expires_in 7: {expires} vs {now}"
    );
}

//! OAuth end to end against an authorization server mcpwire did not write: npm
//! `oidc-provider@9.13.3` (`tests/peers/node/oidc_provider.mjs`: dynamic registration, PKCE,
//! resource indicators, `iss` in the authorization response, refresh token rotation) in front of
//! a protected MCP server on the Python SDK (`mcp==2.3.0`, `tests/peers/py_mcp_auth_server.py`,
//! which checks tokens by introspection), both on 127.0.0.1.
//!
//! One scenario, in order (each step builds on the grant the one before stored):
//! 1. the library client logs in on its first call: the test is the browser ([`Browser`]: it
//!    follows the provider's redirects with its cookies and submits the development login and
//!    consent forms);
//! 2. a second process (`mcpwire client --authorize-with redirect`, which could not get past the
//!    login page) reuses the stored token: no new authorization;
//! 3. once the access token is within a minute of its expiry, the next process refreshes it
//!    before its first request, and the provider rotates the refresh token;
//! 4. two processes starting at once when it is due again: one refresh between them
//!    (the token store's refresh lock), both succeed, and the provider saw no reuse of a rotated
//!    refresh token;
//! 5. a tool needing `mcp:admin` answers `403 insufficient_scope`: the client steps up (a new
//!    authorization through the browser for the union of the scopes) and the call succeeds.
//!
//! It takes about a minute and a half: steps 3 and 4 wait until the token is due for a refresh
//! ([`ACCESS_TOKEN_TTL`] less the client's `REFRESH_AHEAD`).
//!
//! The pinned peers come from `scripts/test` (`.venv-peers`, `npm ci` in `tests/peers/node`);
//! without them the test fails and says how to install them, like the other peer tests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/node_peers.rs"]
mod node_peers;
mod support;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use mcpwire::mcp::blocking::McpClient;
use mcpwire::mcp::{
    Authorization, ClientOptions, FileStore, TokenStore, UserAgent, UserAgentError,
};
use serde_json::{json, Value};

/// The pinned authorization server (tests/peers/node/package.json).
const OIDC_PROVIDER_VERSION: &str = "9.13.3";
/// The pinned Python SDK (scripts/test's PY_MCP_VERSION).
const MCP_VERSION: &str = "2.3.0";
/// The variable naming the Python interpreter that has `mcp` installed.
const PYTHON_ENV: &str = "MCPWIRE_PY_PEER_PYTHON";
/// The access tokens' lifetime at the provider, in seconds. The client refreshes a token
/// within `REFRESH_AHEAD` (60 s) of its expiry before an operation (and on a `401`), and a
/// process that waited on the token store's refresh lock takes the grant another one just
/// stored only while it is not within that window: so the tokens live well beyond 60 s (step 2
/// must not refresh; step 4 must end with one refresh), and steps 3 and 4 each wait until a
/// token is due.
const ACCESS_TOKEN_TTL: u64 = 100;
/// The client's refresh-ahead window (`mcpwire_core::auth::REFRESH_AHEAD`).
const REFRESH_AHEAD_SECS: u64 = mcpwire_core::auth::REFRESH_AHEAD.as_secs();

fn python() -> PathBuf {
    let setup = format!(
        "the Python MCP SDK peer is not set up. From the repository root run\n    \
         python3 -m venv .venv-peers && .venv-peers/bin/pip install mcp=={MCP_VERSION}\n\
         (or set {PYTHON_ENV} to a python that has mcp=={MCP_VERSION}); scripts/test does this itself"
    );
    support::pinned_python(PYTHON_ENV, "mcp", MCP_VERSION, &setup)
}

/// A child process killed on drop.
struct Peer(Child);

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The provider: started on a free port, its issuer read from its first stdout line.
fn start_provider() -> (Peer, String) {
    node_peers::require("oidc-provider", OIDC_PROVIDER_VERSION);
    let mut child = node_peers::command(&[node_peers::file("oidc_provider.mjs"), "0".to_owned()])
        .env("OIDC_ACCESS_TOKEN_TTL", ACCESS_TOKEN_TTL.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start oidc_provider.mjs");
    let mut line = String::new();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    stdout
        .read_line(&mut line)
        .expect("read the provider's issuer");
    // Whatever else it prints is drained (a closed pipe would end it with EPIPE).
    std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
    let ready: Value = serde_json::from_str(&line)
        .unwrap_or_else(|e| panic!("the provider printed {line:?} ({e}), not its issuer"));
    let issuer = ready["issuer"].as_str().unwrap().to_owned();
    (Peer(child), issuer)
}

/// The protected MCP server, on a free port: its `/mcp` URL.
fn start_mcp_server(issuer: &str) -> (Peer, String) {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(python())
        .args([
            support::peer_script("py_mcp_auth_server.py"),
            port.to_string(),
            issuer.to_owned(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start py_mcp_auth_server.py");
    let peer = Peer(child);
    support::wait_for("the Python MCP server to listen", || {
        TcpStream::connect(("127.0.0.1", port)).ok().map(drop)
    });
    (peer, format!("http://127.0.0.1:{port}/mcp"))
}

/// What the provider counted (`GET /__stats`).
fn stats(issuer: &str) -> Value {
    let mut r = ureq::get(&format!("{issuer}/__stats")).call().unwrap();
    serde_json::from_str(&r.body_mut().read_to_string().unwrap()).unwrap()
}

fn count(stats: &Value, key: &str) -> u64 {
    stats[key]
        .as_u64()
        .unwrap_or_else(|| panic!("no {key} in {stats}"))
}

/// The test as the person at the browser: GETs the authorization URL, follows the provider's
/// redirects by hand keeping its cookies, answers the development login form (any login) and
/// the consent form, and returns the query of the redirect to `redirect_uri`. Its cookies last
/// as long as it does, so a second authorization finds the provider's session (no login, only
/// the consent to the new scope).
#[derive(Default)]
struct Browser {
    cookies: Mutex<BTreeMap<String, String>>,
    /// Authorizations asked of it.
    authorizations: AtomicUsize,
    /// The forms it submitted, by their `prompt` (login, consent).
    forms: Mutex<Vec<String>>,
}

/// `scheme://host:port` of `url`.
fn origin(url: &str) -> &str {
    let after = url.find("://").map_or(0, |i| i + 3);
    let end = url[after..].find('/').map_or(url.len(), |i| after + i);
    &url[..end]
}

/// The value of attribute `attr` in the first tag of `html` containing `marker`.
fn attribute<'a>(html: &'a str, marker: &str, attr: &str) -> Option<&'a str> {
    let at = html.find(marker)?;
    let tag_start = html[..at].rfind('<')?;
    let tag_end = at + html[at..].find('>')?;
    let tag = &html[tag_start..tag_end];
    let needle = format!("{attr}=\"");
    let v = tag.find(&needle)? + needle.len();
    Some(&tag[v..v + tag[v..].find('"')?])
}

impl Browser {
    fn cookie_header(&self) -> String {
        let jar = self.cookies.lock().unwrap();
        jar.iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    fn keep_cookies(&self, response: &ureq::http::Response<ureq::Body>) {
        let mut jar = self.cookies.lock().unwrap();
        for h in response.headers().get_all("set-cookie") {
            let Ok(h) = h.to_str() else { continue };
            let pair = h.split(';').next().unwrap_or("");
            let Some((name, value)) = pair.split_once('=') else {
                continue;
            };
            let expired =
                value.is_empty() || h.to_ascii_lowercase().contains("expires=thu, 01 jan 1970");
            if expired {
                jar.remove(name.trim());
            } else {
                jar.insert(name.trim().to_owned(), value.trim().to_owned());
            }
        }
    }

    fn step(&self, url: &str, redirect_uri: &str) -> Result<String, String> {
        let agent = ureq::Agent::config_builder()
            .max_redirects(0)
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(20)))
            .build()
            .new_agent();
        let mut next = Some((url.to_owned(), None::<Vec<(String, String)>>));
        for _ in 0..20 {
            let Some((url, form)) = next.take() else {
                break;
            };
            let cookie = self.cookie_header();
            let mut response = match &form {
                None => agent.get(&url).header("cookie", &cookie).call(),
                Some(f) => agent
                    .post(&url)
                    .header("cookie", &cookie)
                    .send_form(f.iter().map(|(k, v)| (k.as_str(), v.as_str()))),
            }
            .map_err(|e| format!("{url}: {e}"))?;
            self.keep_cookies(&response);
            let status = response.status().as_u16();
            if (300..400).contains(&status) {
                let location = response
                    .headers()
                    .get("location")
                    .and_then(|v| v.to_str().ok())
                    .ok_or_else(|| format!("{url}: HTTP {status} without Location"))?
                    .to_owned();
                if let Some(rest) = location.strip_prefix(redirect_uri) {
                    return Ok(rest.strip_prefix('?').unwrap_or(rest).to_owned());
                }
                let location = if location.starts_with('/') {
                    format!("{}{location}", origin(&url))
                } else {
                    location
                };
                next = Some((location, None));
                continue;
            }
            let body = response.body_mut().read_to_string().unwrap_or_default();
            if status != 200 {
                return Err(format!("{url}: HTTP {status}: {body}"));
            }
            let prompt = attribute(&body, "name=\"prompt\"", "value")
                .ok_or_else(|| format!("{url}: a page without a login or consent form: {body}"))?
                .to_owned();
            let action = attribute(&body, "<form", "action")
                .or_else(|| attribute(&body, "method=\"post\"", "action"))
                .ok_or_else(|| format!("{url}: a form without an action: {body}"))?;
            let action = if action.starts_with('/') {
                format!("{}{action}", origin(&url))
            } else {
                action.to_owned()
            };
            let mut fields = vec![("prompt".to_owned(), prompt.clone())];
            if prompt == "login" {
                fields.push(("login".to_owned(), "alice".to_owned()));
                fields.push(("password".to_owned(), "anything".to_owned()));
            }
            self.forms.lock().unwrap().push(prompt);
            next = Some((action, Some(fields)));
        }
        Err("too many steps without reaching the redirect URI".to_owned())
    }
}

impl UserAgent for Browser {
    fn authorize(&self, url: &str, redirect_uri: &str) -> Result<String, UserAgentError> {
        self.authorizations.fetch_add(1, Ordering::SeqCst);
        self.step(url, redirect_uri).map_err(UserAgentError::Other)
    }
}

/// The library client with `browser` and the token store at `store`.
fn client(url: &str, browser: &Arc<Browser>, store: &Path) -> McpClient {
    let browser: Arc<dyn UserAgent> = browser.clone();
    let mut auth = Authorization::new(browser, Arc::new(FileStore::new(store)));
    auth.allow_http_loopback = true;
    auth.timeout = Duration::from_secs(60);
    McpClient::connect_http(url, ClientOptions::default().with_authorization(auth))
        .expect("connect to the MCP server")
}

/// `mcpwire client --url URL --token-store STORE ... tools list` as a child process, which
/// cannot log in (`--authorize-with redirect` does not get past a login page).
fn cli(url: &str, store: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_mcpwire"));
    c.args(["client", "--url", url, "--token-store"])
        .arg(store)
        .args([
            "--allow-http-loopback",
            "--authorize-with",
            "redirect",
            "tools",
            "list",
        ]);
    c
}

fn assert_lists_tools(out: &Output, what: &str) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("echo") && stdout.contains("admin"),
        "{what}: `mcpwire client tools list` failed ({}):\nstdout: {stdout}\nstderr: {stderr}",
        out.status
    );
}

/// The stored grant's (access token, refresh token, expiry, scope).
fn stored(store: &Path, url: &str) -> (String, String, u64, String) {
    let grant = FileStore::new(store)
        .load(url)
        .expect("a grant in the token store");
    let t = &grant.tokens;
    (
        t.access_token.expose().to_owned(),
        t.refresh_token
            .as_ref()
            .expect("a refresh token (offline_access)")
            .expose()
            .to_owned(),
        t.expires_at.expect("an expiry"),
        t.scope.clone().unwrap_or_default(),
    )
}

/// Sleeps until the token expiring at `expires_at` (Unix seconds) is due for a refresh (within
/// the client's refresh-ahead window, and still valid at the provider).
fn wait_until_refresh_due(expires_at: u64) {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let due = expires_at - REFRESH_AHEAD_SECS + 2;
    if due > now {
        std::thread::sleep(Duration::from_secs(due - now));
    }
}

#[test]
fn oidc_provider_login_reuse_refresh_concurrent_refresh_and_step_up() {
    let (_provider, issuer) = start_provider();
    let (_server, url) = start_mcp_server(&issuer);
    let dir = std::env::temp_dir().join(format!("mcpwire-auth-oidc-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let store = dir.join("tokens.json");
    let browser = Arc::new(Browser::default());

    // 1. The first call logs in: registration, the browser step (login and consent), the code.
    let c = client(&url, &browser, &store);
    let r = c
        .call_tool("echo", json!({"text": "hello"}))
        .expect("echo after logging in");
    assert_eq!(r.text(), "hello");
    c.close();
    assert_eq!(browser.authorizations.load(Ordering::SeqCst), 1);
    assert_eq!(*browser.forms.lock().unwrap(), ["login", "consent"]);
    let s = stats(&issuer);
    assert_eq!(count(&s, "registrations"), 1, "{s}");
    assert_eq!(count(&s, "authorizations"), 1, "{s}");
    assert_eq!(count(&s, "code_grants"), 1, "{s}");
    let (access1, refresh1, expires1, scope1) = stored(&store, &url);
    let scopes: Vec<&str> = scope1.split(' ').collect();
    assert!(
        scopes.contains(&"mcp") && !scopes.contains(&"mcp:admin"),
        "granted {scope1:?}"
    );

    // 2. Another process reuses the stored token: nothing new at the provider.
    let out = cli(&url, &store).output().unwrap();
    assert_lists_tools(&out, "a second process with the stored token");
    let s = stats(&issuer);
    assert_eq!(count(&s, "authorizations"), 1, "a new authorization: {s}");
    assert_eq!(count(&s, "refresh_grants"), 0, "a refresh: {s}");
    assert_eq!(stored(&store, &url).0, access1, "the stored token changed");

    // 3. Due (within a minute of its expiry): the next process refreshes before its first
    // request, the refresh token is rotated.
    wait_until_refresh_due(expires1);
    let out = cli(&url, &store).output().unwrap();
    assert_lists_tools(&out, "a process with an expiring token");
    let s = stats(&issuer);
    assert_eq!(count(&s, "refresh_grants"), 1, "{s}");
    assert_eq!(count(&s, "authorizations"), 1, "{s}");
    let (access2, refresh2, expires2, _) = stored(&store, &url);
    assert_ne!(access2, access1, "no new access token stored");
    assert_ne!(refresh2, refresh1, "the refresh token was not rotated");

    // 4. Two processes at once with a token due for a refresh: one refresh, both logged in.
    wait_until_refresh_due(expires2);
    let a = cli(&url, &store)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let b = cli(&url, &store)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    assert_lists_tools(&a, "the first of two concurrent processes");
    assert_lists_tools(&b, "the second of two concurrent processes");
    let s = stats(&issuer);
    assert_eq!(
        count(&s, "refresh_grants"),
        2,
        "not one refresh for both: {s}"
    );
    assert_eq!(count(&s, "refresh_errors"), 0, "{s}");
    assert_eq!(count(&s, "authorizations"), 1, "{s}");
    let (_, refresh3, _, _) = stored(&store, &url);
    assert_ne!(refresh3, refresh2, "the refresh token was not rotated");

    // 5. `admin` needs mcp:admin: 403 insufficient_scope, a step-up through the browser (its
    // session at the provider still open: consent only), then the call succeeds.
    let c = client(&url, &browser, &store);
    let r = c
        .call_tool("admin", json!({}))
        .expect("admin after stepping up");
    assert!(r.text().starts_with("admin ok"), "{}", r.text());
    let r = c
        .call_tool("echo", json!({"text": "still"}))
        .expect("echo after the step-up");
    assert_eq!(r.text(), "still");
    c.close();
    assert_eq!(browser.authorizations.load(Ordering::SeqCst), 2);
    assert_eq!(
        *browser.forms.lock().unwrap(),
        ["login", "consent", "consent"],
        "the step-up should find the provider's session and ask for consent only"
    );
    let s = stats(&issuer);
    assert_eq!(count(&s, "authorizations"), 2, "{s}");
    assert_eq!(count(&s, "registrations"), 1, "registered again: {s}");
    let (_, _, _, scope) = stored(&store, &url);
    let scopes: Vec<&str> = scope.split(' ').collect();
    assert!(
        scopes.contains(&"mcp") && scopes.contains(&"mcp:admin"),
        "granted {scope:?} after the step-up"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

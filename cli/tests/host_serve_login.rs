//! `mcpwire host serve` when an upstream server needs a sign-in mid-session: its grant is
//! revoked (access and refresh tokens), so the gateway's upstream client runs the
//! authorization flow again, and the downstream client (mcpwire's own, which declares
//! `elicitation.url`) is shown the authorization URL as a URL-mode elicitation: MRTR
//! `input_required` in 2026-07-28, `elicitation/create` (with an `elicitationId`) in
//! 2025-11-25. Accepted and opened, the call goes on and its result comes back to the retry;
//! declined, the call fails with a tool error saying so and the flow is given up (the next call
//! asks again); a client without `elicitation.url` gets a tool error saying how to sign in
//! outside it. The gateway never opens a browser: the test is the person who opens the link
//! (a GET of the URL, then of the redirect to the gateway's loopback callback).
#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcpwire::host::blocking::Host as Hosts;
use mcpwire::host::{
    FileTokens, HostAuthorization, HostOptions, ServerId, ServerSpec, TransportSpec, Trust,
};
use mcpwire::mcp::blocking::McpClient;
use mcpwire::mcp::{
    ClientCapabilities, ClientOptions, ElicitAnswer, ElicitationRequest, FollowRedirect, Host,
    InputAnswer, InputRequest, InputRequestEvent, OpId, ProtocolChoice, StdioCommand,
};
use mcpwire_core::mcp::elicitation::UrlConsent;
use mcpwire_dev::auth_server::AuthConfig;
use mcpwire_dev::mcp_server::{self, McpServer, McpServerHandle};
use serde_json::json;

/// The upstream (the reference server with its own authorization server, approving at
/// once), a data directory holding a grant for it, and the gateway's config.
struct Fixture {
    dir: PathBuf,
    upstream: McpServerHandle,
}

impl Fixture {
    fn new(tag: &str) -> Fixture {
        let dir = std::env::temp_dir().join(format!(
            "mcpwire-host-serve-login-{tag}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let upstream = McpServer::start_http(
            mcp_server::Config {
                auth: Some(AuthConfig {
                    auto_approve: true,
                    ..AuthConfig::default()
                }),
                ..mcp_server::Config::default()
            },
            "127.0.0.1:0",
        )
        .unwrap();
        let config = json!({
            "mcpServers": {"up": {"type": "http", "url": upstream.url(), "trust": "trusted"}},
            "permissions": {"allow": ["mcp__up__echo"]},
        });
        std::fs::write(dir.join("mcp.json"), config.to_string()).unwrap();
        let f = Fixture { dir, upstream };
        f.sign_in_first();
        f
    }

    /// The first sign-in, as `mcpwire host servers` on a terminal does it: the grant is kept
    /// in the data directory's token store, where the gateway finds it.
    fn sign_in_first(&self) {
        let tokens = FileTokens::new(self.dir.join("data/mcpwire/servers"));
        let mut auth = HostAuthorization::new(Arc::new(FollowRedirect), Arc::new(tokens));
        auth.allow_http_loopback = true;
        let host = Hosts::new(HostOptions::default().with_authorization(auth));
        let spec = ServerSpec {
            id: ServerId::new("up").unwrap(),
            transport: TransportSpec::Http {
                url: self.upstream.url(),
                headers: BTreeMap::new(),
            },
            oauth: None,
            trust: Trust::Trusted,
            disabled: false,
        };
        let report = host.connect_all(vec![spec]);
        assert!(report.iter().all(|(_, r)| r.is_ok()), "{report:?}");
        host.close();
        assert_eq!(self.tokens_issued(), 1);
    }

    fn tokens_issued(&self) -> u64 {
        self.upstream.server().stats().auth.tokens_issued
    }

    fn revoke(&self) {
        self.upstream.server().auth().unwrap().revoke_all_grants();
    }

    /// `mcpwire host serve` as the downstream client's stdio child.
    fn gateway(&self, options: ClientOptions) -> McpClient {
        let mut cmd = StdioCommand::new(env!("CARGO_BIN_EXE_mcpwire")).args([
            "host".to_owned(),
            "serve".to_owned(),
            "--config".to_owned(),
            self.dir.join("mcp.json").display().to_string(),
            "--allow-http-loopback".to_owned(),
            "--state-dir".to_owned(),
            self.dir.join("state").display().to_string(),
        ]);
        cmd.env.push((
            "XDG_DATA_HOME".into(),
            self.dir.join("data").display().to_string(),
        ));
        McpClient::connect_stdio_command(&cmd, options).unwrap()
    }
}

/// What the person does with a sign-in link.
#[derive(Clone, Copy)]
enum Person {
    /// Opens it (a GET of the URL, then of the redirect) and says so.
    Opens,
    Declines,
}

/// The downstream client's host: answers URL elicitations as `person` does, and keeps them.
struct Browser {
    person: Arc<Mutex<Person>>,
    seen: Arc<Mutex<Vec<InputRequestEvent>>>,
}

impl Host for Browser {
    fn on_input_request(&mut self, _op: OpId, request: &InputRequestEvent) -> InputAnswer {
        self.seen.lock().unwrap().push(request.clone());
        let InputRequest::Elicitation(ElicitationRequest::Url(u)) = &request.request else {
            return InputAnswer::Elicitation(ElicitAnswer::Decline);
        };
        match *self.person.lock().unwrap() {
            Person::Declines => InputAnswer::Elicitation(ElicitAnswer::Decline),
            Person::Opens => {
                let url = u.url.clone();
                // The browser goes its own way; the answer says the person agreed to open it.
                std::thread::spawn(move || open(&url));
                InputAnswer::Elicitation(ElicitAnswer::AcceptUrl(UrlConsent::granted_for(&u.url)))
            }
        }
    }
}

/// What a browser does with the link: the authorization server redirects to the gateway's
/// loopback callback, which is then fetched.
fn open(url: &str) {
    let agent = ureq::Agent::config_builder()
        .max_redirects(0)
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .new_agent();
    let answer = agent.get(url).call().unwrap();
    assert_eq!(
        answer.status().as_u16(),
        302,
        "the authorization server approves at once"
    );
    let location = answer
        .headers()
        .get("location")
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    assert!(location.starts_with("http://127.0.0.1:"), "{location}");
    let done = agent.get(&location).call().unwrap();
    assert_eq!(done.status().as_u16(), 200);
}

fn options(era: ProtocolChoice, capabilities: ClientCapabilities) -> ClientOptions {
    ClientOptions::default()
        .with_protocol(era)
        .with_capabilities(capabilities)
        .with_request_timeout(Duration::from_secs(60))
}

fn sign_in_mid_session(tag: &str, era: ProtocolChoice) {
    let f = Fixture::new(tag);
    let client = f.gateway(options(
        era,
        ClientCapabilities::none().with_elicitation_url(),
    ));
    let person = Arc::new(Mutex::new(Person::Opens));
    let seen = Arc::new(Mutex::new(Vec::new()));
    client.set_host(Box::new(Browser {
        person: Arc::clone(&person),
        seen: Arc::clone(&seen),
    }));
    // The grant works: no sign-in.
    let r = client
        .call_tool("up__echo", json!({"text": "one"}))
        .unwrap();
    assert_eq!(r.text(), "one");
    assert!(seen.lock().unwrap().is_empty());

    // Revoked: the call asks for a sign-in by link, and once signed in its result comes.
    f.revoke();
    let r = client
        .call_tool("up__echo", json!({"text": "two"}))
        .unwrap();
    assert!(!r.is_error, "{r:?}");
    assert_eq!(r.text(), "two");
    {
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 1, "one sign-in link");
        let InputRequest::Elicitation(ElicitationRequest::Url(u)) = &seen[0].request else {
            panic!("not a URL elicitation: {:?}", seen[0]);
        };
        let authorize = f.upstream.url().replace("/mcp", "/oauth/authorize?");
        assert!(u.url.starts_with(&authorize), "{} vs {authorize}", u.url);
        assert!(u.message.contains("sign in to up"), "{}", u.message);
    }
    assert_eq!(f.tokens_issued(), 2, "a new grant from the second sign-in");
    let r = client
        .call_tool("up__echo", json!({"text": "three"}))
        .unwrap();
    assert_eq!(r.text(), "three");
    assert_eq!(seen.lock().unwrap().len(), 1, "the new grant holds");

    // Declined: a tool error saying so, no new grant; the next call asks again.
    f.revoke();
    *person.lock().unwrap() = Person::Declines;
    let r = client
        .call_tool("up__echo", json!({"text": "four"}))
        .unwrap();
    assert!(r.is_error, "{r:?}");
    assert!(r.text().contains("declined to sign in"), "{}", r.text());
    assert_eq!(seen.lock().unwrap().len(), 2);
    assert_eq!(f.tokens_issued(), 2);
    *person.lock().unwrap() = Person::Opens;
    let r = client
        .call_tool("up__echo", json!({"text": "five"}))
        .unwrap();
    assert_eq!(r.text(), "five", "{r:?}");
    assert_eq!(seen.lock().unwrap().len(), 3);
    assert_eq!(f.tokens_issued(), 3);
    client.close();
}

#[test]
fn a_sign_in_needed_mid_session_is_a_url_elicitation_in_2026_07_28() {
    sign_in_mid_session("modern", ProtocolChoice::Modern);
}

#[test]
fn a_sign_in_needed_mid_session_is_elicitation_create_in_2025_11_25() {
    sign_in_mid_session("legacy", ProtocolChoice::Legacy);
}

#[test]
fn a_client_without_url_elicitation_is_told_how_to_sign_in_outside_it() {
    let f = Fixture::new("no-url");
    let client = f.gateway(options(
        ProtocolChoice::Modern,
        ClientCapabilities::none().with_elicitation_form(),
    ));
    assert_eq!(
        client
            .call_tool("up__echo", json!({"text": "one"}))
            .unwrap()
            .text(),
        "one"
    );
    f.revoke();
    let r = client
        .call_tool("up__echo", json!({"text": "two"}))
        .unwrap();
    assert!(r.is_error, "{r:?}");
    let text = r.text();
    assert!(text.contains("cannot show a sign-in link"), "{text}");
    assert!(text.contains("mcpwire host --config"), "{text}");
    assert_eq!(f.tokens_issued(), 1);
    client.close();
}

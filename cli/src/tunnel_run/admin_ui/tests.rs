#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Mutex};

use mcpwire::tunnel::activity::CommandRecord;
use mcpwire::tunnel::log::{Level, Logger};
use mcpwire::tunnel::Status;
use serde_json::Value;

use super::http::{Request, Response};
use super::overview::Fixed;
use super::{is_loopback_host, AdminUi, Answer, Stream, TOKEN_HEADER};

const KEY: &str = "sk-admin-ui-test-key-0123456789";

struct Sink(Arc<Mutex<Vec<u8>>>);
impl std::io::Write for Sink {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn ui(allow_remote: bool) -> (Arc<AdminUi>, Arc<Status>, Arc<Logger>) {
    ui_with(allow_remote, Vec::new())
}

fn ui_with(
    allow_remote: bool,
    allowed_hosts: Vec<String>,
) -> (Arc<AdminUi>, Arc<Status>, Arc<Logger>) {
    let out = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::new(
        Logger::new(
            Level::Info,
            false,
            vec![KEY.to_owned()],
            Box::new(Sink(out)),
        )
        .keeping_recent(100),
    );
    let status = Status::new();
    let fixed = Fixed {
        summary: serde_json::json!({"tunnel_id": "tunnel_x", "channels": []}),
        ..Fixed::default()
    };
    let ui = AdminUi::new(
        allow_remote,
        allowed_hosts,
        Arc::clone(&status),
        Arc::clone(&log),
        fixed,
    );
    (ui, status, log)
}

fn get(path: &str, host: &str) -> Request {
    let (path, query) = path.split_once('?').unwrap_or((path, ""));
    Request {
        method: "GET".into(),
        path: path.into(),
        query: query.into(),
        headers: vec![("host".into(), host.into())],
        body: Vec::new(),
    }
}

fn full(a: Answer) -> Response {
    match a {
        Answer::Full(r) => r,
        Answer::Events(..) => panic!("an event stream"),
    }
}

fn body(r: &Response) -> String {
    String::from_utf8(r.body.clone()).unwrap()
}

fn token_of(ui: &AdminUi) -> String {
    let page = body(&full(ui.handle(&get("/", "127.0.0.1:8080"), true)));
    let start = page
        .find("name=\"mcpwire-admin-token\" content=\"")
        .unwrap()
        + 36;
    page[start..start + 32].to_owned()
}

fn post(path: &str, origin: Option<&str>, token: Option<&str>, json: &str) -> Request {
    let mut r = get(path, "127.0.0.1:8080");
    r.method = "POST".into();
    if let Some(o) = origin {
        r.headers.push(("origin".into(), o.into()));
    }
    if let Some(t) = token {
        r.headers.push((TOKEN_HEADER.into(), t.into()));
    }
    r.body = json.as_bytes().to_vec();
    r
}

#[test]
fn only_loopback_peers_with_a_loopback_host_are_served_by_default() {
    let (ui, ..) = ui(false);
    let page = full(ui.handle(&get("/", "127.0.0.1:8080"), true));
    assert_eq!(page.status, 200);
    let remote = full(ui.handle(&get("/", "10.0.0.5:8080"), false));
    assert_eq!(remote.status, 403);
    assert!(
        body(&remote).contains("--admin-ui.allow-remote"),
        "{}",
        body(&remote)
    );
    // A DNS-rebinding page reaches loopback under its own name: refused.
    for host in [
        "evil.example:8080",
        "localhost.evil.example",
        "127.0.0.1.nip.io",
        "",
    ] {
        let r = full(ui.handle(&get("/admin/api/overview", host), true));
        assert_eq!(r.status, 403, "{host}");
    }
    // Remote pages when allowed, under an address or a listed name only: a DNS-rebinding
    // page's own name is still refused.
    let (open, ..) = ui_with(true, vec!["Tunnel.Corp".into()]);
    for (host, status) in [
        ("tunnel.corp:8080", 200),
        ("TUNNEL.CORP.", 200),
        ("10.0.0.5:8080", 200),
        ("[fd00::5]:8080", 200),
        ("localhost:8080", 200),
        ("evil.example:8080", 403),
        ("tunnel.corp.evil.example", 403),
    ] {
        assert_eq!(
            full(open.handle(&get("/", host), false)).status,
            status,
            "{host}"
        );
    }
}

#[test]
fn another_sites_request_for_data_or_a_live_view_is_refused() {
    let (ui, ..) = ui(false);
    for (header, value) in [
        ("sec-fetch-site", "cross-site"),
        ("sec-fetch-site", "same-site"),
        ("origin", "http://evil.example"),
        ("origin", "http://localhost:9999"),
    ] {
        for path in ["/admin/api/overview", "/admin/events/logs"] {
            let mut r = get(path, "localhost:8080");
            r.headers.push((header.into(), value.into()));
            match ui.handle(&r, true) {
                Answer::Full(resp) => assert_eq!(resp.status, 403, "{path} {header}: {value}"),
                Answer::Events(..) => panic!("{path} {header}: {value} got a stream"),
            }
        }
    }
    // The page's own requests, and a typed address.
    let mut own = get("/admin/events/logs", "localhost:8080");
    own.headers
        .push(("sec-fetch-site".into(), "same-origin".into()));
    own.headers
        .push(("origin".into(), "http://localhost:8080".into()));
    assert!(matches!(ui.handle(&own, true), Answer::Events(..)));
    let mut typed = get("/", "localhost:8080");
    typed
        .headers
        .push(("sec-fetch-site".into(), "cross-site".into()));
    assert_eq!(
        full(ui.handle(&typed, true)).status,
        200,
        "a link to the page opens it"
    );
}

#[test]
fn loopback_hosts_are_recognised_in_every_form() {
    for ok in [
        "localhost",
        "localhost:8080",
        "LOCALHOST.",
        "admin.localhost:1",
        "127.0.0.1",
        "127.1.2.3:9",
        "[::1]",
        "[::1]:8080",
    ] {
        assert!(is_loopback_host(ok), "{ok}");
    }
    for bad in [
        "",
        "10.0.0.1",
        "[::2]:80",
        "localhost.evil",
        "[::1]x",
        "::1",
        "evil.com:localhost",
    ] {
        assert!(!is_loopback_host(bad), "{bad}");
    }
}

#[test]
fn a_change_needs_the_pages_origin_and_token() {
    let (ui, _, log) = ui(false);
    let token = token_of(&ui);
    let body_json = r#"{"level":"debug"}"#;
    for (origin, token, why) in [
        (None, Some(token.as_str()), "cross-origin"),
        (
            Some("http://evil.example"),
            Some(token.as_str()),
            "cross-origin",
        ),
        (Some("http://127.0.0.1:8080"), None, "token"),
        (
            Some("http://127.0.0.1:8080"),
            Some("0123456789abcdef0123456789abcdef"),
            "token",
        ),
    ] {
        let r = full(ui.handle(
            &post("/admin/api/log-level", origin, token, body_json),
            true,
        ));
        assert_eq!(r.status, 403, "{origin:?} {token:?}");
        assert!(body(&r).contains(why), "{}", body(&r));
        assert_eq!(log.level(), Level::Info);
    }
    let ok = full(ui.handle(
        &post(
            "/admin/api/log-level",
            Some("http://127.0.0.1:8080"),
            Some(&token),
            body_json,
        ),
        true,
    ));
    assert_eq!(ok.status, 200, "{}", body(&ok));
    assert_eq!(log.level(), Level::Debug);
    let bad = full(ui.handle(
        &post(
            "/admin/api/log-level",
            Some("http://127.0.0.1:8080"),
            Some(&token),
            r#"{"level":"loud"}"#,
        ),
        true,
    ));
    assert_eq!(bad.status, 400);
    // A GET cannot change anything.
    let r = full(ui.handle(&get("/admin/api/log-level", "127.0.0.1:8080"), true));
    assert_eq!(r.status, 405);
}

#[test]
fn the_page_has_a_strict_policy_and_no_secret() {
    let (ui, _, log) = ui(false);
    log.log(Level::Warn, "something with the key", &[("key", &KEY)]);
    let page = full(ui.handle(&get("/", "localhost:8080"), true));
    let csp = page
        .headers
        .iter()
        .find(|(k, _)| *k == "Content-Security-Policy")
        .map(|(_, v)| v.as_str())
        .unwrap();
    assert!(
        csp.contains("script-src 'self'") && !csp.contains("unsafe"),
        "{csp}"
    );
    assert!(!body(&page).contains(KEY));
    let logs = body(&full(ui.handle(&get("/admin/api/logs", "localhost"), true)));
    assert!(!logs.contains(KEY), "{logs}");
    assert!(logs.contains("[redacted]"), "{logs}");
}

#[test]
fn the_bundle_is_a_post_with_logs_metrics_and_no_secret() {
    let (ui, status, log) = ui(false);
    let token = token_of(&ui);
    log.log(
        Level::Info,
        "hello",
        &[("authorization", &format!("Bearer {KEY}"))],
    );
    // Text that a post-hoc redaction of the whole JSON would break: escaped quotes after a
    // redacted bearer token, in a line and in a command's method (the caller chooses it).
    log.log(
        Level::Warn,
        "challenge",
        &[("www-authenticate", &"Bearer [redacted]\"x\"")],
    );
    let mut odd = record("r-0", "failed");
    odd.method = "Bearer \"quoted\" method".into();
    status.activity().commands.push(odd);
    status.activity().commands.push(record("r-1", "completed"));
    let r = full(ui.handle(
        &post(
            "/admin/api/bundle",
            Some("http://127.0.0.1:8080"),
            Some(&token),
            "",
        ),
        true,
    ));
    assert_eq!(r.status, 200, "{}", body(&r));
    let text = body(&r);
    assert!(!text.contains(KEY), "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert!(v["metrics"]
        .as_str()
        .unwrap()
        .contains("mcpwire_tunnel_polls_total"));
    assert_eq!(v["recent_commands"][1]["request_id"], "r-1");
    assert!(v["logs"]
        .as_array()
        .unwrap()
        .iter()
        .any(|l| l["msg"] == "hello"));
    assert!(r
        .headers
        .iter()
        .any(|(k, v)| *k == "Content-Disposition" && v.starts_with("attachment;")));
    let refused = full(ui.handle(&post("/admin/api/bundle", None, Some(&token), ""), true));
    assert_eq!(refused.status, 403);
}

fn record(id: &str, outcome: &'static str) -> CommandRecord {
    CommandRecord {
        at_unix_ms: 1,
        request_id: id.into(),
        channel: "main".into(),
        method: "tools/call".into(),
        outcome,
        resp_code: Some(200),
        failure_source: None,
        failure_kind: None,
        duration_ms: 3,
        post_retries: 0,
    }
}

#[test]
fn commands_come_from_the_activity_feed_in_order_and_after_a_number() {
    let (ui, status, _) = ui(false);
    for i in 1..=3 {
        status
            .activity()
            .commands
            .push(record(&format!("r-{i}"), "completed"));
    }
    let v: Value = serde_json::from_str(&body(&full(
        ui.handle(&get("/admin/api/commands?after=1", "localhost"), true),
    )))
    .unwrap();
    let ids: Vec<&str> = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["request_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["r-2", "r-3"]);
    assert_eq!(v["last"], 3);
}

#[test]
fn an_event_stream_sends_each_new_command_and_resumes_only_in_this_process() {
    let (ui, status, _) = ui(false);
    status.activity().commands.push(record("r-1", "completed"));
    status.activity().commands.push(record("r-2", "failed"));
    let answer = ui.handle(&get("/admin/events/commands?after=1", "localhost"), true);
    let Answer::Events(stream, after) = answer else {
        panic!("not a stream")
    };
    assert_eq!((stream, after), (Stream::Commands, 1));
    let mut cursor = after;
    let text = ui.next_events(stream, &mut cursor).unwrap();
    let id = text
        .lines()
        .next()
        .unwrap()
        .strip_prefix("id: ")
        .unwrap()
        .to_owned();
    assert!(id.ends_with("-2"), "{text}");
    assert!(text.contains("\nevent: command\ndata: {"), "{text}");
    assert!(text.contains("\"request_id\":\"r-2\""), "{text}");
    assert!(!text.contains("\"r-1\""), "{text}");
    assert_eq!(cursor, 2);
    // Nothing new: nothing to send.
    assert_eq!(ui.next_events(stream, &mut cursor), None);
    status.activity().commands.push(record("r-3", "completed"));
    assert!(ui
        .next_events(stream, &mut cursor)
        .unwrap()
        .contains("\"r-3\""));

    // The browser's Last-Event-ID resumes after it...
    let resume = |last: &str| {
        let mut r = get("/admin/events/commands", "localhost");
        r.headers.push(("last-event-id".into(), last.into()));
        match ui.handle(&r, true) {
            Answer::Events(_, after) => after,
            Answer::Full(_) => panic!("not a stream"),
        }
    };
    assert_eq!(resume(&id), 2);
    // ...but an id of another process (a restarted client numbers anew) starts over.
    assert_eq!(resume("0badf00d-99999"), 0);
    assert_eq!(resume("99999"), 0);
    let epoch = id.split_once('-').unwrap().0.to_owned();
    let reopened = get(
        &format!("/admin/events/commands?after=3&epoch={epoch}"),
        "localhost",
    );
    assert!(matches!(ui.handle(&reopened, true), Answer::Events(_, 3)));
    let stale = get("/admin/events/commands?after=3&epoch=other", "localhost");
    assert!(matches!(ui.handle(&stale, true), Answer::Events(_, 0)));
}

#[test]
fn a_reader_that_fell_behind_is_told_how_much_it_missed() {
    let (ui, status, _) = ui(false);
    for i in 0..(mcpwire::tunnel::activity::COMMANDS_KEPT + 5) {
        status
            .activity()
            .commands
            .push(record(&format!("r-{i}"), "completed"));
    }
    let mut cursor = 0;
    let text = ui.next_events(Stream::Commands, &mut cursor).unwrap();
    assert!(
        text.starts_with("event: missed\ndata: {\"count\":5}\n\n"),
        "{}",
        &text[..80]
    );
    assert_eq!(cursor, 1005);
}

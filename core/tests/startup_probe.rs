//! The start-up probe of the main MCP server (`tunnel::startup_probe::StartupProbe`):
//! the first attempt at once with the operator's headers, one attempt at a time, the backoff,
//! what is retried and what fails at once, the wait passing, and late reports.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use mcpwire_core::http::Method;
use mcpwire_core::mcp::headers::ACCEPT;
use mcpwire_core::tunnel::engine::Secret;
use mcpwire_core::tunnel::startup_probe::{AttemptFailure, ProbeOutcome, StartupProbe, PROBE_BODY};

const URL: &str = "http://127.0.0.1:3000/mcp";

fn probe(wait_ms: u64) -> (StartupProbe, Instant) {
    let t0 = Instant::now();
    let extra = vec![("Authorization".to_owned(), Secret::new("Bearer s-1"))];
    (
        StartupProbe::new(URL, &extra, Duration::from_millis(wait_ms), t0),
        t0,
    )
}

#[test]
fn the_first_attempt_is_due_at_once_with_the_operators_headers() {
    let (mut p, t0) = probe(1000);
    assert_eq!(
        p.not_ready_reason().as_deref(),
        Some("mcp startup probe pending")
    );
    let r = p.poll_request(t0).unwrap();
    assert_eq!((r.method, r.url.as_str()), (Method::Post, URL));
    assert_eq!(r.headers.get("authorization"), Some("Bearer s-1"));
    assert_eq!(r.headers.get("accept"), Some(ACCEPT));
    assert_eq!(r.body, PROBE_BODY);
    // One at a time.
    assert!(p.poll_request(t0).is_none());
    assert_eq!(p.poll_timeout(), None);
    p.handle_response(t0, 200);
    assert_eq!(
        p.outcome(),
        Some(&ProbeOutcome::Ready {
            status: 200,
            attempts: 1
        })
    );
    assert_eq!(p.not_ready_reason(), None);
}

#[test]
fn refused_connections_are_retried_with_a_doubling_backoff_capped_at_a_second() {
    let (mut p, t0) = probe(60_000);
    let mut now = t0;
    let mut pauses = Vec::new();
    for _ in 0..8 {
        p.poll_request(now).unwrap();
        p.handle_failed(
            now,
            AttemptFailure::Refused,
            "connection refused (127.0.0.1:3000)",
        );
        let next = p.poll_timeout().unwrap();
        pauses.push(next.duration_since(now).as_millis());
        // Nothing is sent before it is due.
        assert!(p.poll_request(now).is_none());
        now = next;
        p.handle_timeout(now);
    }
    assert_eq!(pauses, [50, 100, 200, 400, 800, 1000, 1000, 1000]);
    p.poll_request(now).unwrap();
    p.handle_response(now, 401);
    assert!(matches!(
        p.outcome(),
        Some(ProbeOutcome::Ready {
            status: 401,
            attempts: 9
        })
    ));
}

#[test]
fn the_wait_passing_fails_the_probe_with_the_last_cause() {
    let (mut p, t0) = probe(300);
    let mut now = t0;
    while p.poll_request(now).is_some() {
        p.handle_failed(now, AttemptFailure::NoSocket, "no such socket");
        match p.poll_timeout() {
            Some(at) => {
                now = at;
                p.handle_timeout(now);
            }
            None => break,
        }
    }
    let reason = p.not_ready_reason().unwrap();
    assert_eq!(
        reason,
        "mcp startup wait failed: no answer from http://127.0.0.1:3000/mcp within 300ms: no such socket"
    );
    assert!(now <= t0 + Duration::from_millis(300));
    // Attempts at 0, 50, 150 ms; the next (350 ms) would pass the wait.
    assert_eq!(p.attempts(), 3);
    assert!(!reason.contains("s-1"));
}

#[test]
fn a_404_or_a_tls_failure_fails_at_once_and_5xx_and_timeouts_are_retried() {
    let (mut p, t0) = probe(10_000);
    p.poll_request(t0).unwrap();
    p.handle_response(t0, 404);
    assert!(p
        .not_ready_reason()
        .unwrap()
        .starts_with("mcp probe failed: http://127.0.0.1:3000/mcp answered 404"));

    let (mut p, t0) = probe(10_000);
    p.poll_request(t0).unwrap();
    p.handle_failed(
        t0,
        AttemptFailure::Other,
        "the TLS handshake failed: UnknownIssuer",
    );
    assert_eq!(
        p.not_ready_reason().as_deref(),
        Some("mcp probe failed: the TLS handshake failed: UnknownIssuer")
    );
    assert_eq!(p.poll_timeout(), None);

    let (mut p, t0) = probe(10_000);
    p.poll_request(t0).unwrap();
    p.handle_response(t0, 503);
    assert!(!p.is_done());
    let at = p.poll_timeout().unwrap();
    p.handle_timeout(at);
    p.poll_request(at).unwrap();
    p.handle_failed(at, AttemptFailure::TimedOut, "timed out");
    assert!(!p.is_done());
    assert_eq!(p.last_cause(), Some("timed out"));
}

#[test]
fn late_or_unasked_reports_change_nothing() {
    let (mut p, t0) = probe(1000);
    p.handle_response(t0, 200);
    p.handle_failed(t0, AttemptFailure::Other, "x");
    assert!(!p.is_done());
    p.poll_request(t0).unwrap();
    p.handle_response(t0, 204);
    p.handle_failed(t0, AttemptFailure::Other, "late");
    assert!(matches!(p.outcome(), Some(ProbeOutcome::Ready { .. })));
}

#[test]
fn reasons_never_show_the_urls_credentials_or_query_and_attempts_end_with_the_wait() {
    let t0 = Instant::now();
    let url = "https://user:pw-secret@mcp.example/mcp?token=t-secret";
    let mut p = StartupProbe::new(url, &[], Duration::from_millis(500), t0);
    assert_eq!(p.shown_url(), "https://mcp.example/mcp");
    // An attempt may take the 2 s only while the wait lasts.
    assert_eq!(p.attempt_timeout(t0), Duration::from_millis(500));
    assert_eq!(
        p.attempt_timeout(t0 + Duration::from_millis(400)),
        Duration::from_millis(100)
    );
    p.poll_request(t0).unwrap();
    p.handle_response(t0, 404);
    let reason = p.not_ready_reason().unwrap();
    assert!(!reason.contains("secret"), "{reason}");
    assert!(
        reason.contains("https://mcp.example/mcp answered 404"),
        "{reason}"
    );
    let mut long = StartupProbe::new(url, &[], Duration::from_secs(60), t0);
    assert_eq!(
        long.attempt_timeout(t0),
        mcpwire_core::tunnel::startup_probe::ATTEMPT_TIMEOUT
    );
    // A wait too large for the clock is capped, never a panic.
    let _ = StartupProbe::new(url, &[], Duration::MAX, t0);
    long.poll_request(t0).unwrap();
}

//! Transcript tests for `mcp::request`: a scripted server drives `Requests` through whole
//! request lifecycles with simulated time. Each test is named after the rule it holds and cites
//! the spec section.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashSet;
use std::time::{Duration, Instant};

use mcpwire_core::backoff::Backoff;
use mcpwire_core::jsonrpc::Id;
use mcpwire_core::mcp::request::{
    cancelled_notification, Event, FailReason, Output, RequestHandle, Requests, RequestsConfig,
    ResponseKind, Routed, StreamFailure, TimeoutReason, UsageError,
};
use mcpwire_core::mcp::{CallOptions, Transport};
use proptest::prelude::*;
use serde_json::{json, Value};

const SECS: fn(u64) -> Duration = Duration::from_secs;
const MS: fn(u64) -> Duration = Duration::from_millis;

const TOOL_ERROR: &str =
    include_str!("../../fixtures/mcp/examples/CallToolResult-invalid-tool-input-error.json");
const PROGRESS: &str =
    include_str!("../../fixtures/mcp/examples/ProgressNotification-progress-message.json");
const LIST_TOOLS: &str =
    include_str!("../../fixtures/mcp/examples/ListToolsRequest-list-tools-request.json");

struct Harness {
    reqs: Requests,
    now: Instant,
    next: i64,
    /// Ids repeat with this period (a non-repeating counter unless a test sets it).
    cycle: i64,
}

fn options() -> CallOptions {
    CallOptions {
        backoff: Backoff {
            initial: MS(100),
            max: SECS(5),
            multiplier: 2,
        },
        ..CallOptions::default()
    }
}

/// The `params` of the spec's `tools/list` example.
fn list_params() -> String {
    let v: Value = serde_json::from_str(LIST_TOOLS).unwrap();
    v["params"].to_string()
}

fn call_params(progress_token: Option<&str>) -> String {
    let mut meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}
    });
    if let Some(t) = progress_token {
        meta["progressToken"] = json!(t);
    }
    json!({"_meta": meta, "name": "book_flight", "arguments": {"date": "2025-08-01"}}).to_string()
}

impl Harness {
    fn new(transport: Transport) -> Self {
        Harness {
            reqs: Requests::new(RequestsConfig {
                transport,
                jitter_seed: 5,
            }),
            now: Instant::now(),
            next: 0,
            cycle: i64::MAX,
        }
    }

    fn drain(&mut self) -> Vec<Output> {
        let mut got = Vec::new();
        while let Some(o) = self.reqs.poll_output() {
            got.push(o);
        }
        got
    }

    fn start(&mut self, method: &str, params: &str, opts: CallOptions) -> (RequestHandle, Id) {
        let counter = &mut self.next;
        let mut ids = || {
            *counter += 1;
            Id::from(*counter)
        };
        let req = self
            .reqs
            .start(self.now, method, Some(params), opts, &mut ids)
            .unwrap();
        match self.drain().as_slice() {
            [Output::Send {
                req: r,
                id,
                attempt: 1,
                ..
            }] if *r == req => (req, id.clone()),
            other => panic!("expected one Send, got {other:?}"),
        }
    }

    fn advance(&mut self, d: Duration) -> Vec<Output> {
        self.now += d;
        let counter = &mut self.next;
        let cycle = self.cycle;
        let mut ids = || {
            *counter += 1;
            Id::from(*counter % cycle)
        };
        self.reqs.handle_timeout(self.now, &mut ids);
        self.drain()
    }

    fn stream(&mut self, req: RequestHandle, message: &str) -> Vec<Output> {
        self.reqs
            .handle_stream_message(self.now, req, message)
            .unwrap();
        self.drain()
    }

    fn next_timeout(&self) -> Duration {
        self.reqs.poll_timeout().unwrap().at - self.now
    }
}

fn response(id: &Id, result: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string()
}

fn progress(token: &str, value: f64) -> String {
    let mut v: Value = serde_json::from_str(PROGRESS).unwrap();
    v["params"]["progressToken"] = json!(token);
    v["params"]["progress"] = json!(value);
    v.to_string()
}

fn events(out: &[Output]) -> Vec<Event> {
    out.iter()
        .filter_map(|o| match o {
            Output::Event(e) => Some(e.clone()),
            _ => None,
        })
        .collect()
}

/// `cancellation.mdx`, "Timeouts": "Implementations SHOULD establish timeouts for all sent
/// requests" and cancel on expiry; on HTTP that is closing the response stream. Default 60 s.
#[test]
fn every_request_times_out_after_60_s_by_default_and_closes_its_stream() {
    let mut h = Harness::new(Transport::Http);
    let (req, id) = h.start("tools/list", &list_params(), CallOptions::default());
    assert_eq!(h.next_timeout(), SECS(60));
    assert_eq!(
        h.reqs.poll_timeout().unwrap().reason,
        TimeoutReason::Deadline { req }
    );
    assert_eq!(h.advance(SECS(60) - MS(1)), []);
    let out = h.advance(MS(1));
    assert_eq!(
        out,
        [
            Output::CancelNotice {
                req,
                id: id.clone(),
                body: cancelled_notification(&id, Some("Request timed out after 60 s"))
            },
            Output::CloseStream {
                req,
                id: id.clone()
            },
            Output::Event(Event::TimedOut {
                req,
                id,
                max_total: false
            })
        ]
    );
    assert_eq!(h.reqs.in_flight(), 0);
    assert_eq!(h.reqs.poll_timeout(), None);
}

/// `cancellation.mdx`, "Timeouts": "SDKs and other middleware SHOULD allow these timeouts to be
/// configured on a per-request basis".
#[test]
fn the_timeout_is_configurable_per_call() {
    let mut h = Harness::new(Transport::Http);
    let (_, _) = h.start(
        "tools/list",
        &list_params(),
        CallOptions {
            timeout: SECS(5),
            ..options()
        },
    );
    let (_, _) = h.start("tools/list", &list_params(), options());
    assert_eq!(h.next_timeout(), SECS(5));
    assert_eq!(events(&h.advance(SECS(5))).len(), 1);
    assert_eq!(h.next_timeout(), SECS(55));
}

/// `cancellation.mdx`, "Timeouts" and "Transport-Specific Cancellation": on stdio an expired
/// request is cancelled with `notifications/cancelled` naming its id and a reason.
#[test]
fn a_timeout_on_stdio_sends_cancelled_with_the_id_and_a_reason() {
    let mut h = Harness::new(Transport::Stdio);
    let (req, id) = h.start(
        "tools/call",
        &call_params(None),
        CallOptions {
            timeout: SECS(30),
            ..options()
        },
    );
    let out = h.advance(SECS(30));
    let Output::Notify { body } = &out[0] else {
        panic!("{out:?}");
    };
    insta::assert_snapshot!("request_timeout_cancel_stdio", body);
    let v: Value = serde_json::from_str(body).unwrap();
    assert_eq!(v["params"]["requestId"], json!(1));
    assert!(v["params"]["reason"]
        .as_str()
        .unwrap()
        .contains("timed out"));
    assert_eq!(
        events(&out),
        [Event::TimedOut {
            req,
            id,
            max_total: false
        }]
    );
}

/// `cancellation.mdx`, "Timeouts": "Implementations MAY choose to reset the timeout clock when
/// receiving a progress notification".
#[test]
fn progress_resets_the_timeout_when_asked() {
    let mut h = Harness::new(Transport::Http);
    let (req, _) = h.start(
        "tools/call",
        &call_params(Some("oivaizmir")),
        CallOptions {
            timeout: SECS(10),
            reset_on_progress: true,
            ..options()
        },
    );
    h.now += SECS(8);
    let ev = events(&h.stream(req, PROGRESS));
    assert_eq!(
        ev,
        [Event::Progress {
            req,
            progress: 50.0,
            total: Some(100.0),
            message: Some("Reticulating splines...".into())
        }]
    );
    assert_eq!(h.next_timeout(), SECS(10));
}

/// `cancellation.mdx`, "Timeouts": resetting on progress is opt-in; without it, progress is
/// reported but the clock runs on.
#[test]
fn progress_does_not_reset_the_timeout_unless_asked() {
    let mut h = Harness::new(Transport::Http);
    let (req, _) = h.start(
        "tools/call",
        &call_params(Some("oivaizmir")),
        CallOptions {
            timeout: SECS(10),
            ..options()
        },
    );
    h.now += SECS(8);
    assert_eq!(events(&h.stream(req, PROGRESS)).len(), 1);
    assert_eq!(h.next_timeout(), SECS(2));
}

/// `cancellation.mdx`, "Timeouts": "implementations SHOULD always enforce a maximum timeout,
/// regardless of progress notifications".
#[test]
fn progress_resets_are_capped_by_the_maximum_total() {
    let mut h = Harness::new(Transport::Http);
    let (req, id) = h.start(
        "tools/call",
        &call_params(Some("tok")),
        CallOptions {
            timeout: SECS(10),
            reset_on_progress: true,
            max_total: SECS(25),
            ..options()
        },
    );
    // Progress at 8 s, 16 s and 24 s after the send.
    let start = h.now;
    h.now = start + SECS(8);
    h.stream(req, &progress("tok", 1.0));
    assert_eq!(h.reqs.poll_timeout().unwrap().at, start + SECS(18));
    h.now = start + SECS(16);
    h.stream(req, &progress("tok", 2.0));
    // 16 + 10 = 26 > 25: the cap wins.
    assert_eq!(h.reqs.poll_timeout().unwrap().at, start + SECS(25));
    h.now = start + SECS(24);
    h.stream(req, &progress("tok", 3.0));
    assert_eq!(h.reqs.poll_timeout().unwrap().at, start + SECS(25));
    let out = h.advance(SECS(1));
    assert_eq!(
        events(&out),
        [Event::TimedOut {
            req,
            id,
            max_total: true
        }]
    );
}

/// `progress.mdx`, "The progress value MUST increase with each notification": a repeated or
/// smaller value is ignored and does not keep the request alive.
#[test]
fn progress_that_does_not_increase_does_not_reset_the_timeout() {
    let mut h = Harness::new(Transport::Http);
    let (req, _) = h.start(
        "tools/call",
        &call_params(Some("tok")),
        CallOptions {
            timeout: SECS(10),
            reset_on_progress: true,
            ..options()
        },
    );
    h.now += SECS(5);
    h.stream(req, &progress("tok", 5.0));
    h.now += SECS(5);
    let ev = events(&h.stream(req, &progress("tok", 5.0)));
    assert!(matches!(ev.as_slice(), [Event::Ignored { .. }]));
    assert_eq!(h.next_timeout(), SECS(5));
    // Progress for another token is not this request's.
    let ev = events(&h.stream(req, &progress("other", 9.0)));
    assert!(matches!(ev.as_slice(), [Event::Ignored { .. }]));
}

/// `cancellation.mdx`, "Transport-Specific Cancellation": on Streamable HTTP closing the
/// response stream is the cancellation. The notice before it carries the
/// `notifications/cancelled` that only a legacy-era session sends (legacy `transports.mdx`:
/// "Disconnection SHOULD NOT be interpreted as the client cancelling its request").
#[test]
fn cancel_on_http_closes_the_stream_with_a_notice_for_legacy_sessions() {
    let mut h = Harness::new(Transport::Http);
    let (req, id) = h.start("tools/call", &call_params(None), options());
    h.reqs.cancel(h.now, req, Some("User requested")).unwrap();
    let notice = cancelled_notification(&id, Some("User requested"));
    assert_eq!(
        h.drain(),
        [
            Output::CancelNotice {
                req,
                id: id.clone(),
                body: notice
            },
            Output::CloseStream {
                req,
                id: id.clone()
            },
            Output::Event(Event::Cancelled { req, id: Some(id) })
        ]
    );
}

/// `cancellation.mdx`, "Cancellation Flow" and "Transport-Specific Cancellation" (stdio: "The
/// client MUST send a notifications/cancelled notification referencing the request ID"), then
/// "Behavior Requirements" 5: "The client SHOULD ignore any response to the cancelled request
/// that arrives afterward".
#[test]
fn cancel_on_stdio_sends_cancelled_and_a_late_response_is_ignored() {
    let mut h = Harness::new(Transport::Stdio);
    let (req, id) = h.start("tools/call", &call_params(None), options());
    h.reqs
        .cancel(h.now, req, Some("User requested cancellation"))
        .unwrap();
    let out = h.drain();
    let Output::Notify { body } = &out[0] else {
        panic!("{out:?}");
    };
    insta::assert_snapshot!("request_cancel_stdio", body);
    assert_eq!(
        events(&out),
        [Event::Cancelled {
            req,
            id: Some(id.clone())
        }]
    );
    let late = response(&id, json!({"resultType": "complete", "content": []}));
    assert_eq!(
        h.reqs.handle_channel_message(h.now, &late),
        Routed::Consumed
    );
    assert_eq!(events(&h.drain()), [Event::LateResponseIgnored { req, id }]);
    // Nothing else happens for it, ever.
    assert_eq!(h.advance(SECS(3600)), []);
}

/// `cancellation.mdx`, "Behavior Requirements" 5, on HTTP: a response still in the pipe after
/// the stream was closed is reported as ignored, never as the result.
#[test]
fn a_response_after_cancellation_on_http_is_ignored() {
    let mut h = Harness::new(Transport::Http);
    let (req, id) = h.start("tools/call", &call_params(None), options());
    h.reqs.cancel(h.now, req, None).unwrap();
    h.drain();
    let out = h.stream(req, &response(&id, json!({"content": []})));
    assert_eq!(out, [Output::Event(Event::LateResponseIgnored { req, id })]);
}

/// Digest section 12 ("Broken stream (HTTP): the in-flight request is lost. The client MUST
/// re-issue it as a new request with a new id") and the client guide's "Failure handling":
/// read-only requests are resent after a jittered backoff, with a NEW id.
#[test]
fn a_broken_stream_resends_a_read_only_request_with_a_new_id_after_backoff() {
    let mut h = Harness::new(Transport::Http);
    let (req, id1) = h.start("tools/list", &list_params(), options());
    h.now += SECS(2);
    h.reqs.handle_stream_end(h.now, req).unwrap();
    let ev = events(&h.drain());
    let [Event::Resending {
        req: r,
        lost_id,
        next_attempt: 2,
        at,
    }] = ev.as_slice()
    else {
        panic!("{ev:?}");
    };
    assert_eq!((*r, lost_id), (req, &id1));
    let wait = *at - h.now;
    assert!(wait >= MS(50) && wait <= MS(100), "{wait:?}");
    assert_eq!(
        h.reqs.poll_timeout().unwrap().reason,
        TimeoutReason::Resend { req }
    );
    let out = h.advance(wait);
    let [Output::Send {
        id: id2,
        body,
        attempt: 2,
        method,
        ..
    }] = out.as_slice()
    else {
        panic!("{out:?}");
    };
    assert_ne!(*id2, id1);
    assert_eq!(method, "tools/list");
    insta::assert_snapshot!("request_resend_body", body);
    // Same content, new id.
    let mut sent: Value = serde_json::from_str(body).unwrap();
    let spec: Value = serde_json::from_str(LIST_TOOLS).unwrap();
    assert_eq!(sent["params"], spec["params"]);
    sent["id"] = json!("list-tools-example");
    assert_eq!(sent, spec);
    // The new attempt's response completes the request.
    let out = h.stream(
        req,
        &response(id2, json!({"resultType": "complete", "tools": []})),
    );
    assert!(matches!(
        events(&out).as_slice(),
        [Event::Response { kind: ResponseKind::Complete, id, .. }] if id == id2
    ));
}

/// Client guide, "Failure handling": "automatically retrying a tool with side effects can cause
/// a double execution ... automatically retry only read-only calls".
#[test]
fn a_broken_stream_never_resends_a_tool_call_not_marked_idempotent() {
    let mut h = Harness::new(Transport::Http);
    let (req, _) = h.start("tools/call", &call_params(None), options());
    h.reqs
        .handle_stream_failed(h.now, req, StreamFailure::default())
        .unwrap();
    assert_eq!(
        events(&h.drain()),
        [Event::Failed {
            req,
            reason: FailReason::NotResendable {
                method: "tools/call".into(),
                last_status: None,
            }
        }]
    );
    assert_eq!(h.advance(SECS(60)), []);
}

/// A status without a JSON-RPC body that ends a request (here a 503 on a call not resent)
/// stays in its reason and its message: the person reading it learns the server's answer, not
/// only that "the stream broke".
#[test]
fn a_503_that_ends_a_call_is_named_in_the_reason() {
    let mut h = Harness::new(Transport::Http);
    let (req, _) = h.start("tools/call", &call_params(None), options());
    let failure = StreamFailure {
        status: Some(503),
        retry_after: None,
    };
    h.reqs.handle_stream_failed(h.now, req, failure).unwrap();
    let events = events(&h.drain());
    let [Event::Failed { reason, .. }] = events.as_slice() else {
        panic!("{events:?}");
    };
    assert_eq!(reason.http_status(), Some(503));
    assert_eq!(
        reason.to_string(),
        "the server answered HTTP 503 (Service Unavailable) and tools/call is not resent \
         automatically (it may have side effects)"
    );
}

/// Client guide, "Failure handling": a tool the host knows to be idempotent may be resent.
#[test]
fn a_tool_call_marked_idempotent_is_resent() {
    let mut h = Harness::new(Transport::Http);
    let (req, id1) = h.start(
        "tools/call",
        &call_params(None),
        CallOptions {
            idempotent: true,
            ..options()
        },
    );
    h.reqs.handle_stream_end(h.now, req).unwrap();
    h.drain();
    let out = h.advance(SECS(1));
    assert!(matches!(out.as_slice(), [Output::Send { id, attempt: 2, .. }] if *id != id1));
}

/// Client guide, "Failure handling": "Give retries a count limit".
#[test]
fn resends_stop_at_the_count_limit() {
    let mut h = Harness::new(Transport::Http);
    let (req, _) = h.start(
        "resources/read",
        r#"{"uri":"file:///a"}"#,
        CallOptions {
            max_resends: 2,
            ..options()
        },
    );
    let mut seen = HashSet::new();
    for _ in 0..2 {
        seen.insert(h.reqs.current_id(req).unwrap().clone());
        h.reqs.handle_stream_end(h.now, req).unwrap();
        h.drain();
        h.advance(SECS(1));
    }
    seen.insert(h.reqs.current_id(req).unwrap().clone());
    assert_eq!(seen.len(), 3, "each attempt had its own id");
    h.reqs.handle_stream_end(h.now, req).unwrap();
    assert_eq!(
        events(&h.drain()),
        [Event::Failed {
            req,
            reason: FailReason::ResendsExhausted {
                resends: 2,
                last_status: None
            }
        }]
    );
}

/// `cancellation.mdx`, "Timeouts" (a maximum regardless of everything) and the backoff
/// contract ("no wait may outlast ... the deadline"): a resend that would start after the
/// request's maximum total is not made.
#[test]
fn a_resend_never_starts_after_the_maximum_total() {
    let mut h = Harness::new(Transport::Http);
    let (req, _) = h.start(
        "tools/list",
        &list_params(),
        CallOptions {
            max_total: SECS(10),
            ..options()
        },
    );
    h.now += SECS(9);
    h.reqs
        .handle_stream_failed(
            h.now,
            req,
            StreamFailure {
                status: Some(503),
                retry_after: Some(SECS(5)),
            },
        )
        .unwrap();
    assert_eq!(
        events(&h.drain()),
        [Event::Failed {
            req,
            reason: FailReason::MaxTotalReached {
                last_status: Some(503)
            }
        }]
    );
}

/// `backoff` contract ("a minimum delay in addition to local backoff and jitter"): a 503's
/// `Retry-After` is added to the resend delay; a 404 without a JSON-RPC body ends the request.
#[test]
fn retry_after_is_added_to_the_resend_delay_and_other_statuses_fail() {
    let mut h = Harness::new(Transport::Http);
    let (req, _) = h.start("prompts/get", r#"{"name":"p"}"#, options());
    h.reqs
        .handle_stream_failed(
            h.now,
            req,
            StreamFailure {
                status: Some(503),
                retry_after: Some(SECS(3)),
            },
        )
        .unwrap();
    let ev = events(&h.drain());
    let [Event::Resending { at, .. }] = ev.as_slice() else {
        panic!("{ev:?}");
    };
    assert!(*at - h.now >= SECS(3) + MS(50));
    let (req2, _) = h.start("prompts/list", "{}", options());
    h.reqs
        .handle_stream_failed(
            h.now,
            req2,
            StreamFailure {
                status: Some(404),
                retry_after: None,
            },
        )
        .unwrap();
    assert_eq!(
        events(&h.drain()),
        [Event::Failed {
            req: req2,
            reason: FailReason::HttpStatus(404)
        }]
    );
}

/// `stdio.mdx`, "Unexpected Termination": "any in-flight requests are simply lost and the client
/// can retry them against the fresh process"; read-only ones are resent once the channel is
/// open again, side-effecting ones fail.
#[test]
fn a_stdio_server_exit_resends_read_only_requests_once_the_channel_is_open() {
    let mut h = Harness::new(Transport::Stdio);
    let (list, id1) = h.start("tools/list", &list_params(), options());
    let (call, _) = h.start("tools/call", &call_params(None), options());
    h.reqs.handle_channel_closed(h.now);
    let ev = events(&h.drain());
    assert!(matches!(ev[0], Event::Resending { req, .. } if req == list));
    assert!(
        matches!(ev[1], Event::Failed { req, reason: FailReason::NotResendable { .. } } if req == call)
    );
    // No resend while the channel is down.
    assert_eq!(h.reqs.poll_timeout(), None);
    assert_eq!(h.advance(SECS(5)), []);
    h.reqs.handle_channel_open(h.now);
    let out = h.advance(Duration::ZERO);
    let [Output::Send { req, id, .. }] = out.as_slice() else {
        panic!("{out:?}");
    };
    assert_eq!(*req, list);
    assert_ne!(*id, id1);
    // The answer to the new id completes it; on stdio nothing is closed.
    let msg = response(id, json!({"resultType": "complete", "tools": []}));
    assert_eq!(h.reqs.handle_channel_message(h.now, &msg), Routed::Consumed);
    assert!(matches!(
        h.drain().as_slice(),
        [Output::Event(Event::Response { .. })]
    ));
}

/// Schema `CallToolResult.isError` and the client guide's error table ("Tool execution error
/// (isError: true): Arrives inside a successful response"): it is the request's response, not a
/// failure (spec example).
#[test]
fn an_is_error_tool_result_is_a_response_not_a_failure() {
    let mut h = Harness::new(Transport::Http);
    let (req, id) = h.start("tools/call", &call_params(None), options());
    let result: Value = serde_json::from_str(TOOL_ERROR).unwrap();
    let msg = response(&id, result);
    let out = h.stream(req, &msg);
    assert_eq!(
        out,
        [
            Output::CloseStream {
                req,
                id: id.clone()
            },
            Output::Event(Event::Response {
                req,
                id,
                kind: ResponseKind::ToolError,
                message: msg
            })
        ]
    );
}

/// `basic/index.mdx` (JSON-RPC errors) and `mrtr.mdx`: a JSON-RPC error and an `input_required`
/// result both end this request as responses, classified.
#[test]
fn errors_and_input_required_results_end_the_request_classified() {
    let mut h = Harness::new(Transport::Stdio);
    let (_, id) = h.start("tools/call", &call_params(None), options());
    let err = json!({"jsonrpc":"2.0","id": id,"error":{"code":-32602,"message":"Invalid params"}})
        .to_string();
    assert_eq!(h.reqs.handle_channel_message(h.now, &err), Routed::Consumed);
    assert!(matches!(
        events(&h.drain()).as_slice(),
        [Event::Response { kind: ResponseKind::Error(e), .. }] if e.code == -32602
    ));
    let (_, id) = h.start("prompts/get", r#"{"name":"p"}"#, options());
    let ir = response(
        &id,
        json!({"resultType": "input_required", "requestState": "x"}),
    );
    h.reqs.handle_channel_message(h.now, &ir);
    assert!(matches!(
        events(&h.drain()).as_slice(),
        [Event::Response {
            kind: ResponseKind::InputRequired,
            ..
        }]
    ));
    // An unknown resultType is invalid: the request fails with a protocol error.
    let (req, id) = h.start("prompts/get", r#"{"name":"p"}"#, options());
    h.reqs
        .handle_channel_message(h.now, &response(&id, json!({"resultType": "later"})));
    assert!(matches!(
        events(&h.drain()).as_slice(),
        [Event::Failed { req: r, reason: FailReason::Protocol(_) }] if *r == req
    ));
}

/// Client guide, "Failure handling" ("cancel on timeout and retry with a new ID"), opt-in: the
/// timed-out attempt is cancelled, a resend gets a new id, and the old id's late answer is
/// ignored.
#[test]
fn resend_on_timeout_cancels_then_resends_and_ignores_the_old_answer() {
    let mut h = Harness::new(Transport::Stdio);
    let (req, id1) = h.start(
        "resources/read",
        r#"{"uri":"file:///a"}"#,
        CallOptions {
            timeout: SECS(5),
            resend_on_timeout: true,
            ..options()
        },
    );
    let out = h.advance(SECS(5));
    assert!(matches!(&out[0], Output::Notify { body } if body.contains("\"requestId\":1")));
    assert!(matches!(events(&out).as_slice(), [Event::Resending { .. }]));
    let out = h.advance(SECS(1));
    let [Output::Send { id: id2, .. }] = out.as_slice() else {
        panic!("{out:?}");
    };
    let id2 = id2.clone();
    let late = response(&id1, json!({"contents": []}));
    assert_eq!(
        h.reqs.handle_channel_message(h.now, &late),
        Routed::Consumed
    );
    assert_eq!(
        events(&h.drain()),
        [Event::LateResponseIgnored {
            req,
            id: id1.clone()
        }]
    );
    let ok = response(&id2, json!({"contents": []}));
    h.reqs.handle_channel_message(h.now, &ok);
    assert!(matches!(
        events(&h.drain()).as_slice(),
        [Event::Response { id, .. }] if *id == id2
    ));
}

/// Client guide, "Failure handling": only a request that is safe to repeat is resent after a
/// timeout. A `tools/call` the host did not vouch for (not idempotent) ends in `TimedOut` with
/// its attempt cancelled, and nothing is sent again; the same call marked idempotent is resent.
#[test]
fn resend_on_timeout_never_repeats_a_call_that_is_not_safe_to_repeat() {
    let mut h = Harness::new(Transport::Stdio);
    let (req, id) = h.start(
        "tools/call",
        r#"{"name":"transfer","arguments":{}}"#,
        CallOptions {
            timeout: SECS(5),
            resend_on_timeout: true,
            ..options()
        },
    );
    let out = h.advance(SECS(5));
    assert!(matches!(&out[0], Output::Notify { body } if body.contains("notifications/cancelled")));
    assert_eq!(
        events(&out),
        [Event::TimedOut {
            req,
            id,
            max_total: false
        }]
    );
    let later = h.advance(SECS(60));
    assert!(
        !later.iter().any(|o| matches!(o, Output::Send { .. })),
        "resent: {later:?}"
    );

    let (_, _) = h.start(
        "tools/call",
        r#"{"name":"lookup","arguments":{}}"#,
        CallOptions {
            timeout: SECS(5),
            resend_on_timeout: true,
            idempotent: true,
            ..options()
        },
    );
    let out = h.advance(SECS(5));
    assert!(
        matches!(events(&out).as_slice(), [Event::Resending { .. }]),
        "{out:?}"
    );
}

/// Digest section 2 ("Request IDs MUST NOT repeat among the sender's in-flight requests"): an
/// allocator that hands out an id already in use is caught, not obeyed.
#[test]
fn an_id_already_in_flight_is_never_reused() {
    let mut h = Harness::new(Transport::Stdio);
    let (_, id) = h.start("tools/list", &list_params(), options());
    let mut same = || id.clone();
    assert_eq!(
        h.reqs
            .start(h.now, "tools/list", None, options(), &mut same)
            .unwrap_err(),
        UsageError::IdInUse
    );
}

/// The `Requests` API contract: bad inputs are typed errors.
#[test]
fn bad_start_arguments_are_refused() {
    let mut h = Harness::new(Transport::Http);
    let mut ids = || Id::Number(1);
    assert_eq!(
        h.reqs.start(h.now, "", None, options(), &mut ids),
        Err(UsageError::EmptyMethod)
    );
    assert_eq!(
        h.reqs
            .start(h.now, "tools/list", Some("[1]"), options(), &mut ids),
        Err(UsageError::ParamsNotObject)
    );
    assert_eq!(
        h.reqs
            .start(h.now, "tools/list", Some("{"), options(), &mut ids),
        Err(UsageError::ParamsNotObject)
    );
    assert!(matches!(
        h.reqs.start(
            h.now,
            "tools/list",
            None,
            CallOptions {
                timeout: Duration::ZERO,
                ..options()
            },
            &mut ids
        ),
        Err(UsageError::InvalidOptions(_))
    ));
    assert_eq!(
        h.reqs.handle_channel_message(h.now, "garbage"),
        Routed::NotMine
    );
    assert_eq!(
        h.reqs.handle_stream_end(h.now, RequestHandle(42)),
        Err(UsageError::UnknownHandle)
    );
}

#[derive(Clone, Debug)]
enum Step {
    Start { read_only: bool, idempotent: bool },
    Break(usize),
    Respond(usize),
    Cancel(usize),
    Advance(u64),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (any::<bool>(), any::<bool>()).prop_map(|(read_only, idempotent)| Step::Start {
            read_only,
            idempotent
        }),
        (0usize..8).prop_map(Step::Break),
        (0usize..8).prop_map(Step::Respond),
        (0usize..8).prop_map(Step::Cancel),
        (0u64..20_000).prop_map(Step::Advance),
    ]
}

proptest! {
    /// Digest section 2 and the client guide ("Do not use the same ID as another request that
    /// has not received a response"; "Use a new ID ... for a resend after a failure"): with an id
    /// source that REPEATS (a cycle of 7), across any sequence of starts, breaks, responses,
    /// cancellations and time, no attempt is sent with an id another live request holds, a
    /// resend never reuses its own previous id, and every request ends exactly once.
    #[test]
    fn prop_ids_are_unique_across_any_sequence_of_retries(steps in proptest::collection::vec(step(), 1..60)) {
        let mut h = Harness::new(Transport::Http);
        h.cycle = 7;
        let mut handles: Vec<RequestHandle> = Vec::new();
        // The id each live request's current attempt holds.
        let mut sent: std::collections::HashMap<RequestHandle, Id> = Default::default();
        let mut finals: std::collections::HashMap<RequestHandle, u32> = Default::default();
        let check = |out: &[Output], sent: &mut std::collections::HashMap<RequestHandle, Id>, finals: &mut std::collections::HashMap<RequestHandle, u32>| -> Result<(), TestCaseError> {
            for o in out {
                match o {
                    Output::Send { req, id, .. } => {
                        for (other, held) in sent.iter() {
                            prop_assert!(!(held == id && other != req), "id {id} sent for {req:?} while {other:?} holds it");
                        }
                        let previous = sent.insert(*req, id.clone());
                        prop_assert!(previous.as_ref() != Some(id), "a resend reused its own id {id}");
                    }
                    Output::Event(Event::Response { req, .. } | Event::TimedOut { req, .. }
                        | Event::Cancelled { req, .. } | Event::Failed { req, .. }) => {
                        *finals.entry(*req).or_default() += 1;
                        sent.remove(req);
                    }
                    _ => {}
                }
            }
            Ok(())
        };
        for s in steps {
            let out = match s {
                Step::Start { read_only, idempotent } => {
                    let method = if read_only { "tools/list" } else { "tools/call" };
                    let counter = &mut h.next;
                    let cycle = h.cycle;
                    let mut ids = || { *counter += 1; Id::from(*counter % cycle) };
                    let opts = CallOptions { idempotent, timeout: SECS(10), ..options() };
                    match h.reqs.start(h.now, method, Some("{}"), opts, &mut ids) {
                        Ok(req) => handles.push(req),
                        // Every id the source offers is held by a live request: refused, typed.
                        Err(e) => prop_assert_eq!(e, UsageError::IdInUse),
                    }
                    h.drain()
                }
                Step::Break(i) => {
                    if let Some(&req) = handles.get(i) {
                        let _ = h.reqs.handle_stream_end(h.now, req);
                    }
                    h.drain()
                }
                Step::Respond(i) => {
                    if let Some(&req) = handles.get(i) {
                        if let Some(id) = h.reqs.current_id(req).cloned() {
                            let _ = h.reqs.handle_stream_message(h.now, req, &response(&id, json!({})));
                        }
                    }
                    h.drain()
                }
                Step::Cancel(i) => {
                    if let Some(&req) = handles.get(i) {
                        let _ = h.reqs.cancel(h.now, req, None);
                    }
                    h.drain()
                }
                Step::Advance(ms) => h.advance(MS(ms)),
            };
            check(&out, &mut sent, &mut finals)?;
        }
        // Let everything run out.
        for _ in 0..100 {
            let Some(t) = h.reqs.poll_timeout() else { break };
            let out = h.advance(t.at.saturating_duration_since(h.now));
            check(&out, &mut sent, &mut finals)?;
        }
        prop_assert_eq!(h.reqs.in_flight(), 0);
        for req in &handles {
            prop_assert_eq!(finals.get(req).copied(), Some(1), "request {:?} must end exactly once", req);
        }
    }
}

/// basic/index.mdx, "Request ids": the client's `IdAllocator` serves as the requests' id source,
/// so a resend gets an id no outstanding request holds.
#[test]
fn the_id_allocator_is_an_id_source_with_unique_ids() {
    use mcpwire_core::mcp::meta::IdAllocator;
    use mcpwire_core::mcp::request::IdSource;
    let mut ids = IdAllocator::new();
    let a = ids.next_id();
    let b = ids.next_id();
    assert_ne!(a, b);
    // Used as a source, the allocator keeps nothing: `Requests` tracks its own outstanding ids.
    let mut h = Harness::new(Transport::Http);
    for _ in 0..1000 {
        let req = h
            .reqs
            .start(
                h.now,
                "tools/list",
                Some(&list_params()),
                options(),
                &mut ids,
            )
            .unwrap();
        h.reqs.cancel(h.now, req, None).unwrap();
        h.drain();
    }
    assert_eq!(ids.outstanding(), 0, "ids leaked into the allocator");
    assert_eq!(h.reqs.in_flight(), 0);
}

/// basic/patterns/cancellation.mdx, "Timeouts": a "no limit" maximum total (`Duration::MAX`)
/// means no cap, not an immediate timeout.
#[test]
fn unlimited_max_total_does_not_time_out_at_once() {
    let mut h = Harness::new(Transport::Http);
    let opts = CallOptions {
        max_total: Duration::MAX,
        ..options()
    };
    let _ = h.start("tools/list", &list_params(), opts);
    h.reqs.handle_timeout(h.now, &mut || Id::from(999));
    assert!(h.drain().is_empty(), "timed out at t=0");
    assert_eq!(h.reqs.in_flight(), 1);
}

/// basic/patterns/mrtr.mdx: `input_required` is only for `tools/call`, `prompts/get` and
/// `resources/read`; "Servers MUST NOT return it for anything else" — a server fault, reported
/// as a protocol failure, not handed on as an input request.
#[test]
fn input_required_for_a_list_is_a_protocol_failure() {
    let mut h = Harness::new(Transport::Http);
    let (req, id) = h.start("tools/list", &list_params(), options());
    let body = json!({"jsonrpc": "2.0", "id": id, "result": {"resultType": "input_required",
        "inputRequests": {}, "requestState": "s"}})
    .to_string();
    h.reqs.handle_stream_message(h.now, req, &body).unwrap();
    let out = h.drain();
    assert!(
        out.iter().any(|o| matches!(o, Output::Event(Event::Failed {
            reason: FailReason::Protocol(mcpwire_core::mcp::request::ClassifyError::InputRequiredNotAllowed(m)), ..
        }) if m == "tools/list")),
        "{out:?}"
    );
}

/// basic/patterns/cancellation.mdx ("ignore a response that arrives after cancellation"): a
/// late response is reported for the request's own retired id only; a response naming any other
/// id on an ended request's stream is plainly ignored (found by the mcp_requests fuzz target).
#[test]
fn late_response_is_named_only_for_the_requests_own_id() {
    let mut h = Harness::new(Transport::Http);
    let (req, id) = h.start("tools/list", &list_params(), options());
    h.reqs.cancel(h.now, req, None).unwrap();
    h.drain();
    let foreign = json!({"jsonrpc": "2.0", "id": "not-ours", "result": {}}).to_string();
    h.reqs.handle_stream_message(h.now, req, &foreign).unwrap();
    let out = h.drain();
    assert!(
        !out.iter()
            .any(|o| matches!(o, Output::Event(Event::LateResponseIgnored { .. }))),
        "{out:?}"
    );
    let own = json!({"jsonrpc": "2.0", "id": id, "result": {}}).to_string();
    h.reqs.handle_stream_message(h.now, req, &own).unwrap();
    let out = h.drain();
    assert!(
        out.iter()
            .any(|o| matches!(o, Output::Event(Event::LateResponseIgnored { .. }))),
        "{out:?}"
    );
}

#[test]
fn a_413_or_431_answer_says_what_was_too_large() {
    let text = FailReason::HttpStatus(413).to_string();
    assert_eq!(
        text,
        "the server answered HTTP 413 (Content Too Large): the request is larger than the server accepts"
    );
    let text = FailReason::HttpStatus(431).to_string();
    assert!(text.starts_with("the server answered HTTP 431 (Request Header Fields Too Large): the request headers are larger"), "{text}");
    assert_eq!(
        FailReason::HttpStatus(502).to_string(),
        "the server answered HTTP 502 (Bad Gateway)"
    );
    assert_eq!(
        FailReason::HttpStatus(599).to_string(),
        "the server answered HTTP 599"
    );
}

#[test]
fn a_broken_stream_names_its_resends_or_says_none_was_allowed() {
    assert_eq!(
        FailReason::ResendsExhausted {
            resends: 3,
            last_status: None
        }
        .to_string(),
        "the stream broke and all 3 resends are used up"
    );
    assert_eq!(
        FailReason::ResendsExhausted {
            resends: 0,
            last_status: None
        }
        .to_string(),
        "the stream broke before the answer (this request is not resent)"
    );
}

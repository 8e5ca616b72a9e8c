//! Transcript tests for `mcp::subscription`: a scripted server drives `Subscriptions` through
//! whole `subscriptions/listen` exchanges with simulated time. Each test is named after the rule
//! it holds and cites the spec section.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use mcpwire_core::backoff::Backoff;
use mcpwire_core::jsonrpc::{ErrorObject, Id};
use mcpwire_core::mcp::request::{Routed, StreamFailure};
use mcpwire_core::mcp::subscription::{
    Change, DisconnectCause, EndReason, Event, Output, ProtocolError, RefetchTarget, Subscriptions,
    TimeoutReason,
};
use mcpwire_core::mcp::{SubscriptionFilter, SubscriptionHandle, SubscriptionsConfig, Transport};
use serde_json::{json, Map, Value};

const LISTEN_REQUEST: &str = include_str!(
    "../../fixtures/mcp/examples/SubscriptionsListenRequest-listen-for-list-changes.json"
);
const ACK: &str = include_str!(
    "../../fixtures/mcp/examples/SubscriptionsAcknowledgedNotification-listen-acknowledged.json"
);
const CLOSED: &str = include_str!(
    "../../fixtures/mcp/examples/SubscriptionsListenResultResponse-listen-closed-response.json"
);
const TOOLS_CHANGED: &str =
    include_str!("../../fixtures/mcp/examples/ToolListChangedNotification-tools-list-changed.json");
const PROMPTS_CHANGED: &str = include_str!(
    "../../fixtures/mcp/examples/PromptListChangedNotification-prompts-list-changed.json"
);
const RESOURCE_UPDATED: &str = include_str!(
    "../../fixtures/mcp/examples/ResourceUpdatedNotification-file-resource-updated-notification.json"
);

/// Ids `listen-1`, `listen-2`, ... as in the spec's examples.
struct Ids(u32);

impl Ids {
    fn next(&mut self) -> Id {
        self.0 += 1;
        Id::String(format!("listen-{}", self.0))
    }
}

struct Harness {
    subs: Subscriptions,
    now: Instant,
    ids: Ids,
    out: Vec<Output>,
}

fn backoff() -> Backoff {
    Backoff {
        initial: Duration::from_millis(100),
        max: Duration::from_secs(5),
        multiplier: 2,
    }
}

fn config(transport: Transport) -> SubscriptionsConfig {
    let mut c = SubscriptionsConfig::new(transport);
    c.backoff = backoff();
    c.jitter_seed = 11;
    c.ack_timeout = Duration::from_secs(10);
    c.healthy_after = Duration::from_secs(30);
    c
}

/// The spec example's `_meta`.
fn meta() -> Map<String, Value> {
    let v: Value = serde_json::from_str(LISTEN_REQUEST).unwrap();
    v["params"]["_meta"].as_object().unwrap().clone()
}

/// The spec example's filter: tools list changes and one resource.
fn example_filter() -> SubscriptionFilter {
    SubscriptionFilter {
        tools_list_changed: true,
        resource_subscriptions: vec!["file:///project/config.json".into()],
        ..SubscriptionFilter::default()
    }
}

impl Harness {
    fn new(config: SubscriptionsConfig) -> Self {
        Harness {
            subs: Subscriptions::new(config),
            now: Instant::now(),
            ids: Ids(0),
            out: Vec::new(),
        }
    }

    fn drain(&mut self) -> Vec<Output> {
        let mut got = Vec::new();
        while let Some(o) = self.subs.poll_output() {
            got.push(o);
        }
        self.out.extend(got.clone());
        got
    }

    fn listen(&mut self, filter: SubscriptionFilter) -> (SubscriptionHandle, Id, String) {
        let ids = &mut self.ids;
        let mut next = || ids.next();
        let sub = self
            .subs
            .listen(self.now, filter, meta(), &mut next)
            .unwrap();
        match self.drain().as_slice() {
            [Output::Send { sub: s, id, body }] if *s == sub => (sub, id.clone(), body.clone()),
            other => panic!("expected one Send, got {other:?}"),
        }
    }

    fn advance(&mut self, d: Duration) -> Vec<Output> {
        self.now += d;
        let ids = &mut self.ids;
        let mut next = || ids.next();
        self.subs.handle_timeout(self.now, &mut next);
        self.drain()
    }

    fn stream(&mut self, sub: SubscriptionHandle, message: &str) -> Vec<Output> {
        self.subs
            .handle_stream_message(self.now, sub, message)
            .unwrap();
        self.drain()
    }

    fn channel(&mut self, message: &str) -> (Routed, Vec<Output>) {
        let r = self.subs.handle_channel_message(self.now, message);
        (r, self.drain())
    }
}

/// A spec example message with its subscription id replaced by `id`.
fn with_sid(example: &str, id: &Id) -> String {
    let mut v: Value = serde_json::from_str(example).unwrap();
    let sid = serde_json::to_value(id).unwrap();
    if v.get("id").is_some() {
        v["id"] = sid.clone();
    }
    let meta = if v.get("result").is_some() {
        &mut v["result"]["_meta"]
    } else {
        &mut v["params"]["_meta"]
    };
    meta["io.modelcontextprotocol/subscriptionId"] = sid;
    v.to_string()
}

fn ack_for(id: &Id, notifications: Value) -> String {
    json!({
        "jsonrpc": "2.0",
        "method": "notifications/subscriptions/acknowledged",
        "params": {
            "_meta": {"io.modelcontextprotocol/subscriptionId": id},
            "notifications": notifications
        }
    })
    .to_string()
}

fn events(out: &[Output]) -> Vec<Event> {
    out.iter()
        .filter_map(|o| match o {
            Output::Event(e) => Some(e.clone()),
            _ => None,
        })
        .collect()
}

/// `subscriptions.mdx`, "Opening a Stream" and "Notification Filter": the request carries only
/// the kinds asked for; it is the spec's example byte for byte (as JSON).
#[test]
fn listen_request_carries_only_the_kinds_asked_for() {
    let mut h = Harness::new(config(Transport::Http));
    let (_, id, body) = h.listen(example_filter());
    assert_eq!(id, Id::from("listen-1"));
    let ours: Value = serde_json::from_str(&body).unwrap();
    let spec: Value = serde_json::from_str(LISTEN_REQUEST).unwrap();
    assert_eq!(ours, spec);
    let notifications = ours["params"]["notifications"].as_object().unwrap();
    assert!(!notifications.contains_key("promptsListChanged"));
    assert!(!notifications.contains_key("resourcesListChanged"));
    insta::assert_snapshot!("listen_request_http", body);
}

/// `subscriptions.mdx`, "Notification Filter": a subscription that asks for nothing is a
/// caller error.
#[test]
fn listen_with_an_empty_filter_is_refused() {
    let mut h = Harness::new(config(Transport::Http));
    let mut next = || Id::Number(1);
    let err = h
        .subs
        .listen(h.now, SubscriptionFilter::default(), meta(), &mut next)
        .unwrap_err();
    assert_eq!(
        err,
        mcpwire_core::mcp::subscription::UsageError::EmptyFilter
    );
}

/// `subscriptions.mdx`, "Acknowledgment": the acknowledgment comes first; then notifications
/// are delivered (spec examples).
#[test]
fn acknowledgment_then_routed_notifications_on_http() {
    let mut h = Harness::new(config(Transport::Http));
    let (sub, _id, _) = h.listen(example_filter());
    let ev = events(&h.stream(sub, ACK));
    assert_eq!(
        ev,
        [Event::Acknowledged {
            sub,
            id: Id::from("listen-1"),
            accepted: example_filter(),
            dropped: SubscriptionFilter::default(),
            unrequested: SubscriptionFilter::default(),
        }]
    );
    assert_eq!(h.subs.accepted(sub), Some(&example_filter()));
    assert_eq!(
        events(&h.stream(sub, TOOLS_CHANGED)),
        [Event::Changed {
            sub,
            change: Change::ToolsListChanged
        }]
    );
    // The uri may be a sub-resource of the subscribed one.
    assert_eq!(
        events(&h.stream(sub, RESOURCE_UPDATED)),
        [Event::Changed {
            sub,
            change: Change::ResourceUpdated {
                uri: "file:///project/src/main.rs".into()
            }
        }]
    );
    // No timer while the stream is acknowledged and healthy.
    assert_eq!(h.subs.poll_timeout(), None);
}

/// `subscriptions.mdx`, "Acknowledgment": "MUST send notifications/subscriptions/acknowledged as
/// the first message"; anything else first is a protocol error that ends the subscription.
#[test]
fn a_notification_before_the_acknowledgment_is_a_protocol_error() {
    let mut h = Harness::new(config(Transport::Http));
    let (sub, id, _) = h.listen(example_filter());
    let out = h.stream(sub, TOOLS_CHANGED);
    assert_eq!(
        out,
        [
            Output::CloseStream {
                sub,
                id: id.clone()
            },
            Output::Event(Event::Ended {
                sub,
                reason: EndReason::Protocol(ProtocolError::NotAcknowledgedFirst {
                    id,
                    got: "notifications/tools/list_changed".into()
                })
            })
        ]
    );
    assert!(h.subs.is_empty());
    // No reconnect is scheduled for a protocol violation.
    assert_eq!(h.advance(Duration::from_secs(600)), []);
}

/// `subscriptions.mdx`, "Graceful Closure": a listen result before the acknowledgment is not
/// the acknowledgment either.
#[test]
fn a_result_before_the_acknowledgment_is_a_protocol_error() {
    let mut h = Harness::new(config(Transport::Http));
    let (sub, id, _) = h.listen(example_filter());
    let ev = events(&h.stream(sub, CLOSED));
    assert!(matches!(
        ev.as_slice(),
        [Event::Ended { reason: EndReason::Protocol(ProtocolError::NotAcknowledgedFirst { id: i, got }), .. }]
            if *i == id && got == "a result"
    ));
}

/// `subscriptions.mdx`, "Acknowledgment": "The client SHOULD check the acknowledged filter
/// against what it requested and handle any unsupported types gracefully".
#[test]
fn a_smaller_acknowledged_set_is_tolerated_and_the_dropped_kinds_reported() {
    let mut h = Harness::new(config(Transport::Http));
    let asked = SubscriptionFilter {
        tools_list_changed: true,
        prompts_list_changed: true,
        resource_subscriptions: vec!["file:///a".into(), "file:///b".into()],
        ..SubscriptionFilter::default()
    };
    let (sub, id, _) = h.listen(asked);
    let ack = ack_for(
        &id,
        json!({"toolsListChanged": true, "resourceSubscriptions": ["file:///b"], "resourcesListChanged": true}),
    );
    let ev = events(&h.stream(sub, &ack));
    assert_eq!(
        ev,
        [Event::Acknowledged {
            sub,
            id,
            accepted: SubscriptionFilter {
                tools_list_changed: true,
                resource_subscriptions: vec!["file:///b".into()],
                ..SubscriptionFilter::default()
            },
            dropped: SubscriptionFilter {
                prompts_list_changed: true,
                resource_subscriptions: vec!["file:///a".into()],
                ..SubscriptionFilter::default()
            },
            unrequested: SubscriptionFilter {
                resources_list_changed: true,
                ..SubscriptionFilter::default()
            },
        }]
    );
}

/// `subscriptions.mdx`, "Opening a Stream": "The server MUST NOT send notification types the
/// client has not explicitly requested": such a notification is ignored, not delivered.
#[test]
fn a_notification_kind_not_asked_for_is_ignored() {
    let mut h = Harness::new(config(Transport::Http));
    let (sub, _, _) = h.listen(example_filter());
    h.stream(sub, ACK);
    let ev = events(&h.stream(sub, PROMPTS_CHANGED));
    assert!(matches!(ev.as_slice(), [Event::Ignored { sub: s, .. }] if *s == sub));
    // And request-scoped notifications do not belong on a listen stream.
    let ev = events(&h.stream(
        sub,
        r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}"#,
    ));
    assert!(matches!(ev.as_slice(), [Event::Ignored { .. }]));
}

/// `subscriptions.mdx`, "Multiple Concurrent Subscriptions" and "Acknowledgment" (stdio:
/// "ordering is defined per subscription ID ... messages belonging to other subscriptions MAY
/// be interleaved before it"): notifications are demultiplexed by subscription id.
#[test]
fn concurrent_subscriptions_on_stdio_are_routed_by_subscription_id() {
    let mut h = Harness::new(config(Transport::Stdio));
    let tools = SubscriptionFilter {
        tools_list_changed: true,
        ..SubscriptionFilter::default()
    };
    let prompts = SubscriptionFilter {
        prompts_list_changed: true,
        ..SubscriptionFilter::default()
    };
    let (a, id_a, _) = h.listen(tools.clone());
    let (b, id_b, _) = h.listen(prompts.clone());
    assert_ne!(id_a, id_b);
    // B is acknowledged and notified before A's acknowledgment: fine for A.
    let (r, out) = h.channel(&ack_for(&id_b, json!({"promptsListChanged": true})));
    assert_eq!(r, Routed::Consumed);
    assert!(matches!(events(&out).as_slice(), [Event::Acknowledged { sub, .. }] if *sub == b));
    let (_, out) = h.channel(&with_sid(PROMPTS_CHANGED, &id_b));
    assert_eq!(
        events(&out),
        [Event::Changed {
            sub: b,
            change: Change::PromptsListChanged
        }]
    );
    let (_, out) = h.channel(&ack_for(&id_a, json!({"toolsListChanged": true})));
    assert!(matches!(events(&out).as_slice(), [Event::Acknowledged { sub, .. }] if *sub == a));
    let (_, out) = h.channel(&with_sid(TOOLS_CHANGED, &id_a));
    assert_eq!(
        events(&out),
        [Event::Changed {
            sub: a,
            change: Change::ToolsListChanged
        }]
    );
    // A message without a subscription id, or with an unknown one, is someone else's.
    let (r, out) = h.channel(r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#);
    assert_eq!((r, out.len()), (Routed::NotMine, 0));
    let (r, _) = h.channel(&with_sid(TOOLS_CHANGED, &Id::from("listen-99")));
    assert_eq!(r, Routed::NotMine);
    let (r, _) = h.channel(r#"{"jsonrpc":"2.0","id":"listen-42","result":{}}"#);
    assert_eq!(r, Routed::NotMine);
}

/// `subscriptions.mdx`, "Acknowledgment", on stdio: a notification carrying a subscription's id
/// before that subscription's acknowledgment is a protocol error for it (and only it).
#[test]
fn on_stdio_a_notification_before_its_own_acknowledgment_is_a_protocol_error() {
    let mut h = Harness::new(config(Transport::Stdio));
    let (a, id_a, _) = h.listen(example_filter());
    let (b, id_b, _) = h.listen(example_filter());
    let (r, out) = h.channel(&with_sid(TOOLS_CHANGED, &id_a));
    assert_eq!(r, Routed::Consumed);
    // stdio: the server still thinks A is open, so it is cancelled by id.
    assert!(
        matches!(&out[0], Output::Notify { body } if body.contains("\"requestId\":\"listen-1\""))
    );
    assert!(matches!(
        events(&out).as_slice(),
        [Event::Ended { sub, reason: EndReason::Protocol(_) }] if *sub == a
    ));
    let (_, out) = h.channel(&ack_for(&id_b, json!({"toolsListChanged": true})));
    assert!(matches!(events(&out).as_slice(), [Event::Acknowledged { sub, .. }] if *sub == b));
}

/// `subscriptions.mdx`, "Cancellation": the client cancels by closing the SSE stream on HTTP.
#[test]
fn host_close_on_http_closes_the_stream() {
    let mut h = Harness::new(config(Transport::Http));
    let (sub, id, _) = h.listen(example_filter());
    h.stream(sub, ACK);
    h.subs.close(h.now, sub).unwrap();
    assert_eq!(
        h.drain(),
        [
            Output::CloseStream { sub, id },
            Output::Event(Event::Ended {
                sub,
                reason: EndReason::ClosedByHost
            })
        ]
    );
    // Messages still in the pipe are dropped quietly; the stream's end is no disconnect.
    assert_eq!(h.stream(sub, TOOLS_CHANGED), []);
    h.subs.handle_stream_end(h.now, sub).unwrap();
    assert_eq!(h.drain(), []);
    assert_eq!(h.advance(Duration::from_secs(60)), []);
}

/// `subscriptions.mdx`, "Cancellation": on stdio the client sends `notifications/cancelled`
/// referencing the `subscriptions/listen` request id.
#[test]
fn host_close_on_stdio_sends_cancelled_for_the_listen_id() {
    let mut h = Harness::new(config(Transport::Stdio));
    let (sub, id, _) = h.listen(example_filter());
    h.channel(&ack_for(&id, json!({"toolsListChanged": true})));
    h.subs.close(h.now, sub).unwrap();
    let out = h.drain();
    let Output::Notify { body } = &out[0] else {
        panic!("expected a notification, got {out:?}");
    };
    let v: Value = serde_json::from_str(body).unwrap();
    assert_eq!(v["method"], "notifications/cancelled");
    assert_eq!(v["params"]["requestId"], "listen-1");
    insta::assert_snapshot!("listen_cancel_stdio", body);
    // Stragglers for the closed id are consumed, not handed to others.
    let (r, out) = h.channel(&with_sid(TOOLS_CHANGED, &id));
    assert_eq!((r, out.len()), (Routed::Consumed, 0));
}

/// `subscriptions.mdx`, "Graceful Closure": a successful listen response signals a graceful
/// end; no reconnect follows (spec example).
#[test]
fn a_listen_result_is_a_clean_end_without_reconnect() {
    let mut h = Harness::new(config(Transport::Http));
    let (sub, _, _) = h.listen(example_filter());
    h.stream(sub, ACK);
    let out = h.stream(sub, CLOSED);
    assert_eq!(
        events(&out),
        [Event::Ended {
            sub,
            reason: EndReason::ServerCompleted
        }]
    );
    h.subs.handle_stream_end(h.now, sub).unwrap();
    assert_eq!(h.drain(), []);
    assert_eq!(h.subs.poll_timeout(), None);
    assert_eq!(h.advance(Duration::from_secs(600)), []);
}

/// `cancellation.mdx` ("A server MUST send notifications/cancelled referencing a
/// subscriptions/listen request ID when it tears down that subscription stream") against
/// `subscriptions.mdx` ("Graceful Closure"): open question #3348 (digest 17.1), so a server
/// cancellation is a clean end too.
#[test]
fn a_server_cancellation_of_the_listen_id_is_a_clean_end_too() {
    let mut h = Harness::new(config(Transport::Stdio));
    let (sub, id, _) = h.listen(example_filter());
    h.channel(&ack_for(&id, json!({"toolsListChanged": true})));
    let (r, out) = h.channel(
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"listen-1","reason":"shutting down"}}"#,
    );
    assert_eq!(r, Routed::Consumed);
    assert_eq!(
        events(&out),
        [Event::Ended {
            sub,
            reason: EndReason::ServerCancelled {
                reason: Some("shutting down".into())
            }
        }]
    );
    // stdio: nothing to close, nothing to send.
    assert_eq!(out.len(), 1);
    // A cancellation of some other request is not ours.
    let (r, _) = h.channel(
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"other"}}"#,
    );
    assert_eq!(r, Routed::NotMine);
}

/// The same open question on HTTP: a cancellation on the listen stream ends it cleanly.
#[test]
fn a_server_cancellation_on_the_http_stream_is_a_clean_end() {
    let mut h = Harness::new(config(Transport::Http));
    let (sub, id, _) = h.listen(example_filter());
    h.stream(sub, ACK);
    let out = h.stream(
        sub,
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"listen-1"}}"#,
    );
    assert_eq!(
        out,
        [
            Output::CloseStream { sub, id },
            Output::Event(Event::Ended {
                sub,
                reason: EndReason::ServerCancelled { reason: None }
            })
        ]
    );
}

/// Schema `JSONRPCErrorResponse` to a listen request: the server refused it; that is an answer,
/// not a protocol violation, and nothing is retried.
#[test]
fn an_error_response_to_listen_is_a_rejection_not_a_protocol_error() {
    let mut h = Harness::new(config(Transport::Http));
    let (sub, _, _) = h.listen(example_filter());
    let out = h.stream(
        sub,
        r#"{"jsonrpc":"2.0","id":"listen-1","error":{"code":-32601,"message":"Method not found"}}"#,
    );
    assert!(matches!(
        events(&out).as_slice(),
        [Event::Ended { reason: EndReason::Rejected(e), .. }] if e.code == -32601
    ));
    assert_eq!(h.advance(Duration::from_secs(600)), []);
}

/// `subscriptions.mdx`, "Graceful Closure" ("a transport that closes without it indicates an
/// unexpected disconnect, which the client MAY treat as a trigger to reconnect") and the client
/// guide's "Subscriptions" ("refetch the relevant lists on every reconnect"): the whole cycle.
#[test]
fn an_unexpected_disconnect_reconnects_with_backoff_and_asks_for_a_refetch() {
    let mut h = Harness::new(config(Transport::Http));
    let (sub, id1, _) = h.listen(example_filter());
    h.stream(sub, ACK);
    h.now += Duration::from_secs(5);
    h.subs.handle_stream_end(h.now, sub).unwrap();
    let ev = events(&h.drain());
    let [Event::Disconnected {
        sub: s,
        id,
        cause,
        attempt,
        reconnect_at,
    }] = ev.as_slice()
    else {
        panic!("expected Disconnected, got {ev:?}");
    };
    assert_eq!(
        (*s, id, cause, *attempt),
        (sub, &id1, &DisconnectCause::StreamEnded, 1)
    );
    // The first reconnect waits a jittered share of 100 ms: in [50 ms, 100 ms].
    let wait = *reconnect_at - h.now;
    assert!(
        wait >= Duration::from_millis(50) && wait <= Duration::from_millis(100),
        "{wait:?}"
    );
    assert_eq!(
        h.subs.poll_timeout().map(|t| t.reason),
        Some(TimeoutReason::Reconnect { sub })
    );
    // Nothing happens before the backoff.
    assert_eq!(h.advance(wait - Duration::from_millis(1)), []);
    let out = h.advance(Duration::from_millis(1));
    let [Output::Send {
        sub: s,
        id: id2,
        body,
    }] = out.as_slice()
    else {
        panic!("expected a new listen request, got {out:?}");
    };
    assert_eq!(*s, sub);
    assert_eq!(
        *id2,
        Id::from("listen-2"),
        "a reconnect is a new request with a new id"
    );
    let v: Value = serde_json::from_str(body).unwrap();
    assert_eq!(v["params"]["notifications"]["toolsListChanged"], true);
    // Old stragglers are dropped; the new stream is acknowledged, then the refetch is asked.
    assert_eq!(h.stream(sub, TOOLS_CHANGED), []);
    let ev = events(&h.stream(sub, &with_sid(ACK, id2)));
    assert!(matches!(ev[0], Event::Acknowledged { .. }));
    assert_eq!(
        ev[1],
        Event::Refetch {
            sub,
            targets: vec![
                RefetchTarget::ToolsList,
                RefetchTarget::Resource {
                    uri: "file:///project/config.json".into()
                }
            ]
        }
    );
    assert_eq!(ev.len(), 2);
    // And the subscription is live again under its new id.
    assert_eq!(
        events(&h.stream(sub, &with_sid(TOOLS_CHANGED, id2))),
        [Event::Changed {
            sub,
            change: Change::ToolsListChanged
        }]
    );
}

/// `subscriptions.mdx`, "Acknowledgment": a stream that never acknowledges is given up after
/// `ack_timeout` (closed) and retried like a disconnect.
#[test]
fn a_missing_acknowledgment_times_out_and_reconnects() {
    let mut h = Harness::new(config(Transport::Http));
    let (sub, id, _) = h.listen(example_filter());
    assert_eq!(
        h.subs.poll_timeout().map(|t| (t.at - h.now, t.reason)),
        Some((Duration::from_secs(10), TimeoutReason::Ack { sub }))
    );
    let out = h.advance(Duration::from_secs(10));
    assert_eq!(
        out[0],
        Output::CloseStream {
            sub,
            id: id.clone()
        }
    );
    assert!(matches!(
        &out[1],
        Output::Event(Event::Disconnected {
            cause: DisconnectCause::AckTimeout,
            ..
        })
    ));
    // The late acknowledgment of the abandoned stream changes nothing.
    assert_eq!(h.stream(sub, ACK), []);
    let out = h.advance(Duration::from_secs(1));
    assert!(matches!(out.as_slice(), [Output::Send { id, .. }] if *id == Id::from("listen-2")));
    // No refetch is asked when the subscription had never been acknowledged.
    let ev = events(&h.stream(sub, &with_sid(ACK, &Id::from("listen-2"))));
    assert_eq!(ev.len(), 1);
}

/// Client guide, "Failure handling" ("exponential backoff with jitter"): streams that break
/// soon after their acknowledgment keep growing the backoff; one that stayed up for
/// `healthy_after` starts it over.
#[test]
fn short_lived_streams_keep_growing_the_backoff() {
    let mut h = Harness::new(config(Transport::Http));
    let (sub, _, _) = h.listen(example_filter());
    let mut attempts = Vec::new();
    for _ in 0..4 {
        let id = h.subs.current_id(sub).unwrap().clone();
        h.stream(sub, &with_sid(ACK, &id));
        h.now += Duration::from_secs(1);
        h.subs.handle_stream_end(h.now, sub).unwrap();
        let ev = events(&h.drain());
        let Some(Event::Disconnected {
            attempt,
            reconnect_at,
            ..
        }) = ev.first()
        else {
            panic!("{ev:?}");
        };
        attempts.push((*attempt, *reconnect_at - h.now));
        let t = h.subs.poll_timeout().unwrap();
        h.advance(t.at - h.now);
    }
    assert_eq!(
        attempts.iter().map(|a| a.0).collect::<Vec<_>>(),
        [1, 2, 3, 4]
    );
    // Attempt 4's ceiling is 800 ms: at least 400 ms.
    assert!(attempts[3].1 >= Duration::from_millis(400));
    // A stream that lived past healthy_after resets the count.
    let id = h.subs.current_id(sub).unwrap().clone();
    h.stream(sub, &with_sid(ACK, &id));
    h.now += Duration::from_secs(31);
    h.subs.handle_stream_end(h.now, sub).unwrap();
    let ev = events(&h.drain());
    assert!(matches!(
        ev.as_slice(),
        [Event::Disconnected { attempt: 1, .. }]
    ));
}

/// Client guide, "Failure handling": "Give retries a count limit": with `max_reconnects`, the
/// subscription ends after that many failed reconnects in a row.
#[test]
fn reconnects_stop_after_max_reconnects() {
    let mut c = config(Transport::Http);
    c.max_reconnects = Some(2);
    let mut h = Harness::new(c);
    let (sub, _, _) = h.listen(example_filter());
    for _ in 0..2 {
        h.subs
            .handle_stream_failed(h.now, sub, StreamFailure::default())
            .unwrap();
        let t = h.subs.poll_timeout().unwrap();
        h.advance(t.at - h.now);
    }
    h.subs
        .handle_stream_failed(h.now, sub, StreamFailure::default())
        .unwrap();
    assert_eq!(
        events(&h.drain()),
        [Event::Ended {
            sub,
            reason: EndReason::GaveUp { reconnects: 2 }
        }]
    );
    assert!(h.subs.is_empty());
}

/// `backoff` module contract ("a minimum delay in addition to local backoff and jitter"):
/// `Retry-After` on a 503 listen response is added to the reconnect delay; a 404 ends the
/// subscription instead (no reconnect can fix it).
#[test]
fn retry_after_delays_the_reconnect_and_a_404_ends_the_subscription() {
    let mut h = Harness::new(config(Transport::Http));
    let (sub, _, _) = h.listen(example_filter());
    h.subs
        .handle_stream_failed(
            h.now,
            sub,
            StreamFailure {
                status: Some(503),
                retry_after: Some(Duration::from_secs(7)),
            },
        )
        .unwrap();
    let ev = events(&h.drain());
    let [Event::Disconnected { reconnect_at, .. }] = ev.as_slice() else {
        panic!("{ev:?}");
    };
    assert!(*reconnect_at - h.now >= Duration::from_secs(7) + Duration::from_millis(50));
    let t = h.subs.poll_timeout().unwrap();
    h.advance(t.at - h.now);
    h.subs
        .handle_stream_failed(
            h.now,
            sub,
            StreamFailure {
                status: Some(404),
                retry_after: None,
            },
        )
        .unwrap();
    assert!(matches!(
        events(&h.drain()).as_slice(),
        [Event::Ended {
            reason: EndReason::HttpStatus(404),
            ..
        }]
    ));
}

/// `stdio.mdx`, "Unexpected Termination" and `subscriptions.mdx` ("On stdio, if the connection
/// is terminated and then re-established, the client MUST re-send subscriptions/listen"): after
/// the server exits, every subscription is re-sent once the channel is open again.
#[test]
fn stdio_restart_resends_every_listen_once_the_channel_is_open() {
    let mut h = Harness::new(config(Transport::Stdio));
    let (a, id_a, _) = h.listen(example_filter());
    let (b, _, _) = h.listen(SubscriptionFilter {
        prompts_list_changed: true,
        ..SubscriptionFilter::default()
    });
    h.channel(&ack_for(&id_a, json!({"toolsListChanged": true})));
    h.subs.handle_channel_closed(h.now);
    let ev = events(&h.drain());
    assert_eq!(ev.len(), 2);
    assert!(ev.iter().all(|e| matches!(
        e,
        Event::Disconnected {
            cause: DisconnectCause::ChannelClosed,
            ..
        }
    )));
    // While the channel is down nothing is due, however long it takes.
    assert_eq!(h.subs.poll_timeout(), None);
    assert_eq!(h.advance(Duration::from_secs(60)), []);
    h.subs.handle_channel_open(h.now);
    let out = h.advance(Duration::ZERO);
    let sent: Vec<_> = out
        .iter()
        .filter_map(|o| match o {
            Output::Send { sub, id, .. } => Some((*sub, id.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(sent, [(a, Id::from("listen-3")), (b, Id::from("listen-4"))]);
    // A's refetch comes with its new acknowledgment (it only had tools acknowledged).
    let (_, out) = h.channel(&ack_for(
        &Id::from("listen-3"),
        json!({"toolsListChanged": true}),
    ));
    assert_eq!(
        events(&out)[1],
        Event::Refetch {
            sub: a,
            targets: vec![RefetchTarget::ToolsList]
        }
    );
}

/// The `Subscriptions` API contract: an HTTP input on a stdio machine, or an unknown handle, is
/// a caller error, not a panic.
#[test]
fn inputs_for_the_wrong_transport_or_unknown_handles_are_refused() {
    use mcpwire_core::mcp::subscription::UsageError;
    let mut h = Harness::new(config(Transport::Stdio));
    let (sub, _, _) = h.listen(example_filter());
    assert_eq!(
        h.subs.handle_stream_message(h.now, sub, ACK),
        Err(UsageError::WrongTransport)
    );
    let mut h = Harness::new(config(Transport::Http));
    assert_eq!(
        h.subs.handle_stream_end(h.now, SubscriptionHandle(99)),
        Err(UsageError::UnknownHandle)
    );
    assert_eq!(
        h.subs.close(h.now, SubscriptionHandle(99)),
        Err(UsageError::UnknownHandle)
    );
}

/// basic/patterns/subscriptions.mdx: an unlimited acknowledgement timeout (`Duration::MAX`)
/// waits for the acknowledgement instead of disconnecting at once.
#[test]
fn unlimited_ack_timeout_does_not_disconnect_at_once() {
    let mut c = config(Transport::Http);
    c.ack_timeout = Duration::MAX;
    let mut h = Harness::new(c);
    let _ = h.listen(example_filter());
    let out = h.advance(Duration::from_secs(3600));
    assert!(
        !events(&out)
            .iter()
            .any(|e| matches!(e, Event::Disconnected { .. })),
        "disconnected while waiting for the acknowledgement"
    );
}

/// Why a subscription ended is told to a person as a sentence about the subscription (the CLI
/// prints it as is): the server's own words and numbers are kept, no Rust variant name shows.
#[test]
fn every_end_reason_reads_as_a_sentence_about_the_subscription() {
    let cases = [
        (
            EndReason::ClosedByHost,
            "the subscription was closed by the client",
        ),
        (
            EndReason::ServerCompleted,
            "the server ended the subscription",
        ),
        (
            EndReason::ServerCancelled { reason: None },
            "the server cancelled the subscription",
        ),
        (
            EndReason::ServerCancelled {
                reason: Some("shutting down".into()),
            },
            "the server cancelled the subscription: shutting down",
        ),
        (
            EndReason::Rejected(ErrorObject {
                code: -32601,
                message: "Method not found".into(),
                data: None,
            }),
            "the server refused the subscription: Method not found (JSON-RPC error -32601)",
        ),
        (
            EndReason::HttpStatus(405),
            "the server refused the subscription with HTTP status 405",
        ),
        (
            EndReason::Protocol(ProtocolError::MalformedAck {
                id: Id::from("listen-1"),
                reason: "no notifications".into(),
            }),
            "the server broke the subscription protocol: the acknowledgment of subscription \
             \"listen-1\" is malformed: no notifications",
        ),
        (
            EndReason::NotOpened("cannot reach the server".into()),
            "the subscription could not be opened: cannot reach the server",
        ),
        (
            EndReason::GaveUp { reconnects: 0 },
            "the subscription's stream was lost and no reconnect was made",
        ),
        (
            EndReason::GaveUp { reconnects: 1 },
            "the subscription's stream was lost and the one reconnect failed",
        ),
        (
            EndReason::GaveUp { reconnects: 5 },
            "the subscription's stream was lost and 5 reconnects in a row failed",
        ),
        (
            EndReason::IdInUse,
            "the subscription ended: every request id it was given was in use",
        ),
    ];
    for (reason, sentence) in cases {
        assert_eq!(reason.to_string(), sentence, "{reason:?}");
    }
}

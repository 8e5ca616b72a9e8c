//! The MCP client (both drivers: `mcp_client::blocking` and `mcp_client::smol`) against the
//! reference server npm `@modelcontextprotocol/server-everything@2026.8.31`, directly (no
//! tunnel). It speaks only the legacy era (2025-11-25, on the v1 TypeScript SDK), so these
//! tests hold the client's fallback and its legacy-era features against a server we did not
//! write: Streamable HTTP with a session (`streamableHttp` mode, pinned to 127.0.0.1 by
//! `tests/peers/node/loopback.mjs`) and stdio.
//!
//! Its surface is its own: tools `echo(message)` ("Echo: ..."), `get-sum(a, b)`,
//! `trigger-long-running-operation(duration, steps)` (a progress notification per step),
//! `trigger-elicitation-request` (an `elicitation/create` request to the client; listed only
//! for clients declaring elicitation), `toggle-subscriber-updates` (sends
//! `notifications/resources/updated` for the subscribed resources, now and every 5 s), the
//! prompt `simple-prompt`, the static resources `demo://resource/static/document/*.md`.
//!
//! The packages come from `tests/peers/node/package-lock.json` (`npm ci`; `.ci/run` runs it).
//! Without them the tests fail and say how to install them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;
#[macro_use]
#[allow(unused_macros)]
#[path = "support/mcp_scenarios.rs"]
mod scenarios;
#[path = "support/node_peers.rs"]
mod node_peers;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use mcpwire::mcp::{ClientOptions, Error};
use mcpwire_core::mcp::{
    CallOptions, Era, EraEvidence, Event, IncompatibleError, InputRequest, OpError, OpOptions,
    ProtocolChoice, ResultSource, RetryReason, SubscriptionChange, SubscriptionEvent,
    SubscriptionFilter, TransportError,
};
use scenarios::{
    elicitation, http, names, recorder, stdio, text_of, wait_for_subscription_event,
    wait_for_subscription_event_within, Api, Peer, Seen,
};
use serde_json::{json, Value};

/// The pinned package (tests/peers/node/package.json).
const EVERYTHING_VERSION: &str = "2026.8.31";
/// The only version it speaks.
const LEGACY_VERSION: &str = "2025-11-25";
/// One of its static resources (its docs/ directory).
const README: &str = "demo://resource/static/document/instructions.md";

fn entry() -> String {
    node_peers::require(
        "@modelcontextprotocol/server-everything",
        EVERYTHING_VERSION,
    )
    .join("dist/index.js")
    .display()
    .to_string()
}

/// `node --import loopback.mjs --import everything_spy.mjs` (HTTP) or `node --import
/// everything_spy.mjs` (stdio) in front of the package's own entry point.
fn node_args(preloads: &[&str], mode: &str) -> Vec<String> {
    let mut args = Vec::new();
    for p in preloads {
        args.push("--import".to_owned());
        args.push(format!("file://{}", node_peers::file(p)));
    }
    args.push(entry());
    args.push(mode.to_owned());
    args
}

/// The package's own entry point: `streamableHttp` (port from `PORT`, pinned to 127.0.0.1 by
/// `loopback.mjs`) or `stdio`; `everything_spy.mjs` adds the `spy-stats` tool (what the server
/// received) and changes nothing else.
const PEER: Peer = Peer {
    name: "server-everything (@modelcontextprotocol/server-everything@2026.8.31)",
    http: |port| {
        let mut c = node_peers::command(&node_args(
            &["loopback.mjs", "everything_spy.mjs"],
            "streamableHttp",
        ));
        c.env("PORT", port.to_string());
        c
    },
    stdio: || {
        (
            node_peers::node(),
            node_args(&["everything_spy.mjs"], "stdio"),
        )
    },
};

/// `each_api!(a, b)` makes `a::blocking` and `a::smol` tests calling `a::<Blocking>()` and
/// `a::<Smol>()`.
macro_rules! each_api {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[test]
            fn blocking() {
                super::$name::<crate::scenarios::Blocking>()
            }
            #[test]
            fn smol() {
                super::$name::<crate::scenarios::Smol>()
            }
        }
    )*};
}

each_api!(
    http_auto_falls_back_to_the_legacy_era_and_serves_list_call_read_get,
    stdio_probe_gets_32601_then_initialize_serves_list_call_read_get,
    http_discover_of_a_legacy_server_answers_its_initialize_result,
    http_modern_only_client_does_not_fall_back_from_a_legacy_server,
    http_progress_reaches_the_host_before_the_result,
    stdio_progress_reaches_the_host_before_the_result,
    http_legacy_elicitation_is_answered_by_the_host_accept_and_decline,
    stdio_legacy_elicitation_is_answered_by_the_host_accept_and_decline,
    http_resource_subscription_receives_its_update,
    stdio_resource_subscription_receives_its_update,
    http_cancel_from_another_thread_ends_the_call,
    stdio_cancel_from_another_thread_ends_the_call,
    http_slow_call_times_out_and_the_client_stays_usable,
    stdio_slow_call_times_out_and_the_client_stays_usable,
    http_ping_is_answered_in_the_legacy_era,
);

// ---------------------------------------------------------------------------------------------
// Helpers

/// The era the client learned, with its evidence (the `EraDetected` events).
fn detected(seen: &std::sync::Mutex<Seen>) -> Vec<(Era, String, EraEvidence)> {
    seen.lock()
        .unwrap()
        .events
        .iter()
        .filter_map(|e| match e {
            Event::EraDetected {
                era,
                version,
                evidence,
            } => Some((*era, version.clone(), evidence.clone())),
            _ => None,
        })
        .collect()
}

/// Lists, calls, reads and gets what server-everything serves.
fn serves_list_call_read_get(c: &mut impl Api) {
    let tools = names(&c.list_tools().unwrap(), "tools");
    for t in ["echo", "get-sum", "trigger-long-running-operation"] {
        assert!(tools.contains(&t.to_owned()), "{t} in {tools:?}");
    }
    let r = c
        .call_tool("echo", json!({"message": "from rust"}))
        .unwrap();
    assert_eq!(text_of(&r), "Echo: from rust", "{r}");
    let r = c.call_tool("get-sum", json!({"a": 2, "b": 40})).unwrap();
    assert!(text_of(&r).contains("is 42"), "{r}");
    let prompts = names(&c.list_prompts().unwrap(), "prompts");
    assert!(prompts.contains(&"simple-prompt".to_owned()), "{prompts:?}");
    let p = c.get_prompt("simple-prompt", json!({})).unwrap();
    assert_eq!(
        p["messages"][0]["content"]["text"], "This is a simple prompt without arguments.",
        "{p}"
    );
    let resources = c.list_resources().unwrap();
    let uris: Vec<&str> = resources["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["uri"].as_str())
        .collect();
    assert!(uris.contains(&README), "{uris:?}");
    let read = c.read_resource(README).unwrap();
    assert_eq!(read["contents"][0]["uri"], README, "{read}");
    assert!(
        read["contents"][0]["text"]
            .as_str()
            .is_some_and(|t| !t.is_empty()),
        "{read}"
    );
}

/// What the server received so far (the spy's `spy-stats` tool).
fn spy(c: &mut impl Api) -> Value {
    let r = c.call_tool("spy-stats", json!({})).unwrap();
    serde_json::from_str(text_of(&r)).unwrap_or_else(|e| panic!("{e}: {r}"))
}

/// Polls the spy until the server has seen `n` `notifications/cancelled` for running calls
/// (bounded), and checks that it did.
fn wait_for_cancelled_running(c: &mut impl Api, n: u64) {
    let until = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let s = spy(c);
        if s["cancelledRunning"].as_u64() == Some(n) || std::time::Instant::now() > until {
            assert_eq!(s["cancelledRunning"], n, "{s}");
            assert_eq!(s["notifications"]["notifications/cancelled"], n, "{s}");
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn assert_legacy(c: &impl Api) {
    let era = c.era().unwrap();
    assert_eq!(era.era, Era::Legacy);
    assert_eq!(era.protocol_version.as_deref(), Some(LEGACY_VERSION));
}

// ---------------------------------------------------------------------------------------------
// Era fallback

/// Auto mode sends 2026-07-28 first; the sessionful v1 server answers HTTP 400 without a
/// modern error, so the client falls back: `initialize`, then the same request again.
fn http_auto_falls_back_to_the_legacy_era_and_serves_list_call_read_get<C: Api>() {
    let (mut c, _peer) = http::<C>(&PEER, ClientOptions::default());
    let seen = recorder(&mut c, None);
    serves_list_call_read_get(&mut c);
    assert_legacy(&c);
    let eras = detected(&seen);
    assert!(
        eras.iter().any(|(era, _, evidence)| *era == Era::Legacy
            && matches!(evidence, EraEvidence::HttpStatus(s) if (400..500).contains(s))),
        "{eras:?}"
    );
    let events = seen.lock().unwrap().events.clone();
    let fallbacks = events
        .iter()
        .filter(|e| {
            matches!(
                e,
                Event::Retrying {
                    reason: RetryReason::LegacyFallback,
                    ..
                }
            )
        })
        .count();
    assert_eq!(fallbacks, 1, "one fallback, then the session: {events:?}");
    let s = spy(&mut c);
    assert_eq!(s["requests"]["initialize"], 1, "{s}");
    assert_eq!(s["notifications"]["notifications/initialized"], 1, "{s}");
    c.close();
}

/// stdio: the `server/discover` probe gets -32601 from the v1 server, so the client opens the
/// legacy handshake on the same child.
fn stdio_probe_gets_32601_then_initialize_serves_list_call_read_get<C: Api>() {
    let mut c = stdio::<C>(&PEER, ClientOptions::default());
    let seen = recorder(&mut c, None);
    serves_list_call_read_get(&mut c);
    assert_legacy(&c);
    let eras = detected(&seen);
    assert!(
        eras.iter().any(|(era, _, evidence)| *era == Era::Legacy
            && *evidence == EraEvidence::ProbeError(-32601)),
        "{eras:?}"
    );
    let s = spy(&mut c);
    assert_eq!(s["requests"]["server/discover"], 1, "the probe: {s}");
    assert_eq!(s["requests"]["initialize"], 1, "{s}");
    c.close();
}

/// `discover` of a legacy server is answered from its `initialize` result (its serverInfo and
/// capabilities), without a second request.
fn http_discover_of_a_legacy_server_answers_its_initialize_result<C: Api>() {
    let (mut c, _peer) = http::<C>(&PEER, ClientOptions::default());
    let seen = recorder(&mut c, None);
    let d = c.discover().unwrap();
    assert!(d.to_string().contains("mcp-servers/everything"), "{d}");
    assert!(d.to_string().contains(LEGACY_VERSION), "{d}");
    assert_eq!(d["capabilities"]["resources"]["subscribe"], true, "{d}");
    assert_legacy(&c);
    let sources: Vec<ResultSource> = seen
        .lock()
        .unwrap()
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Result { source, .. } => Some(*source),
            _ => None,
        })
        .collect();
    assert_eq!(sources, [ResultSource::Handshake]);
    c.close();
}

/// A client pinned to 2026-07-28 does not fall back. server-everything's 400 carries a
/// JSON-RPC error (-32000 "Server not initialized"): the legacy evidence automatic detection
/// would take, so it is reported as a legacy-looking server carrying that error; nothing else
/// is sent.
fn http_modern_only_client_does_not_fall_back_from_a_legacy_server<C: Api>() {
    let options = ClientOptions::default().with_protocol(ProtocolChoice::Modern);
    let (mut c, _peer) = http::<C>(&PEER, options);
    let seen = recorder(&mut c, None);
    let e = scenarios::op_error(c.list_tools().unwrap_err());
    assert!(
        matches!(&e, OpError::Incompatible(IncompatibleError::LegacyServer { error: Some(error), .. }) if error.code == -32000),
        "{e:?}"
    );
    assert_ne!(c.era().map(|e| e.era), Some(Era::Legacy));
    let events = seen.lock().unwrap().events.clone();
    assert!(
        !events.iter().any(|e| matches!(e, Event::Retrying { .. })),
        "{events:?}"
    );
    c.close();
}

fn http_ping_is_answered_in_the_legacy_era<C: Api>() {
    let (mut c, _peer) = http::<C>(&PEER, ClientOptions::default());
    c.list_tools().unwrap();
    let pong = c.ping().unwrap();
    assert_eq!(pong, json!({}));
    c.close();
}

// ---------------------------------------------------------------------------------------------
// Progress

fn progress_reaches_the_host(mut c: impl Api) {
    let seen = recorder(&mut c, None);
    let r = c
        .call_tool(
            "trigger-long-running-operation",
            json!({"duration": 0.3, "steps": 3}),
        )
        .unwrap();
    assert!(text_of(&r).contains("Steps: 3"), "{r}");
    let progress = seen.lock().unwrap().progress.clone();
    assert_eq!(progress.len(), 3, "{progress:?}");
    for (i, (_, p, total)) in progress.iter().enumerate() {
        assert_eq!(*p, (i + 1) as f64);
        assert_eq!(*total, Some(3.0));
    }
    c.close();
}

fn http_progress_reaches_the_host_before_the_result<C: Api>() {
    let (c, _peer) = http::<C>(&PEER, ClientOptions::default());
    progress_reaches_the_host(c);
}

fn stdio_progress_reaches_the_host_before_the_result<C: Api>() {
    progress_reaches_the_host(stdio::<C>(&PEER, ClientOptions::default()));
}

// ---------------------------------------------------------------------------------------------
// Legacy elicitation: the server sends `elicitation/create` while the call runs; the client
// asks its host and answers the server's request (HTTP: by POST in the session).

fn legacy_elicitation_accepted_and_declined(mut c: impl Api) {
    // The tool is registered once the server knows the client declares elicitation, which it
    // does on its own time after `notifications/initialized`: list again (bounded) until it is.
    let mut tools = Vec::new();
    for _ in 0..50 {
        tools = names(&c.list_tools().unwrap(), "tools");
        if tools.iter().any(|t| t == "trigger-elicitation-request") {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        tools.contains(&"trigger-elicitation-request".to_owned()),
        "{tools:?}"
    );
    let seen = recorder(&mut c, Some(json!({"name": "Ada Lovelace", "check": true})));
    let r = c
        .call_tool("trigger-elicitation-request", json!({}))
        .unwrap();
    let all = r.to_string();
    assert!(
        all.contains("User provided the requested information"),
        "{r}"
    );
    assert!(all.contains("Name: Ada Lovelace"), "{r}");
    {
        let asked = &seen.lock().unwrap().asked;
        assert_eq!(asked.len(), 1, "{asked:?}");
        assert!(
            matches!(&asked[0].request, InputRequest::Elicitation(_)),
            "{asked:?}"
        );
    }
    recorder(&mut c, None);
    let r = c
        .call_tool("trigger-elicitation-request", json!({}))
        .unwrap();
    assert!(
        r.to_string().contains("User declined"),
        "the host's decline reached the server: {r}"
    );
    c.close();
}

fn http_legacy_elicitation_is_answered_by_the_host_accept_and_decline<C: Api>() {
    let (c, _peer) = http::<C>(&PEER, elicitation());
    legacy_elicitation_accepted_and_declined(c);
}

fn stdio_legacy_elicitation_is_answered_by_the_host_accept_and_decline<C: Api>() {
    legacy_elicitation_accepted_and_declined(stdio::<C>(&PEER, elicitation()));
}

// ---------------------------------------------------------------------------------------------
// resources/subscribe and notifications/resources/updated

fn resource_subscription_receives_its_update(mut c: impl Api) {
    c.list_resources().unwrap(); // the era and the handshake
    let sub = c
        .subscribe(SubscriptionFilter {
            resource_subscriptions: vec![README.to_owned()],
            ..SubscriptionFilter::default()
        })
        .unwrap();
    wait_for_subscription_event(&mut c, |e| {
        matches!(e, SubscriptionEvent::Acknowledged { sub: s, accepted, .. }
            if *s == sub && accepted.resource_subscriptions == [README])
    });
    // The server sends an update for every subscribed resource now and every 5 s after, so an
    // update racing the `resources/subscribe` is followed by another one.
    let r = c.call_tool("toggle-subscriber-updates", json!({})).unwrap();
    assert!(text_of(&r).starts_with("Started"), "{r}");
    wait_for_subscription_event_within(&mut c, 20, Duration::from_secs(12), |e| {
        matches!(e, SubscriptionEvent::Changed { sub: s, change: SubscriptionChange::ResourceUpdated { uri } }
            if *s == sub && uri == README)
    });
    let r = c.call_tool("toggle-subscriber-updates", json!({})).unwrap();
    assert!(text_of(&r).starts_with("Stopped"), "{r}");
    c.close();
}

fn http_resource_subscription_receives_its_update<C: Api>() {
    let (c, _peer) = http::<C>(&PEER, ClientOptions::default());
    resource_subscription_receives_its_update(c);
}

fn stdio_resource_subscription_receives_its_update<C: Api>() {
    resource_subscription_receives_its_update(stdio::<C>(&PEER, ClientOptions::default()));
}

// ---------------------------------------------------------------------------------------------
// Cancellation and timeouts

/// A 20 s operation (a step a second).
fn long_operation() -> Value {
    json!({"duration": 20, "steps": 20})
}

fn cancel_ends_the_call(mut c: impl Api) {
    c.list_tools().unwrap(); // the era is known before the cancelled call
    let canceller = c.canceller();
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    let t = std::thread::spawn(move || {
        for _ in 0..200 {
            if flag.load(Ordering::SeqCst) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
            canceller();
        }
    });
    let e = c
        .call_tool("trigger-long-running-operation", long_operation())
        .unwrap_err();
    stop.store(true, Ordering::SeqCst);
    t.join().unwrap();
    assert!(matches!(e, Error::Cancelled), "{e:?}");
    let r = c
        .call_tool("echo", json!({"message": "after cancel"}))
        .unwrap();
    assert_eq!(text_of(&r), "Echo: after cancel");
    // The server was told (stdio, and the legacy HTTP session: a closed stream is no
    // cancellation there) while the operation still ran.
    wait_for_cancelled_running(&mut c, 1);
    c.close();
}

fn http_cancel_from_another_thread_ends_the_call<C: Api>() {
    let (c, _peer) = http::<C>(&PEER, ClientOptions::default());
    cancel_ends_the_call(c);
}

fn stdio_cancel_from_another_thread_ends_the_call<C: Api>() {
    cancel_ends_the_call(stdio::<C>(&PEER, ClientOptions::default()));
}

fn slow_call_times_out(mut c: impl Api) {
    c.list_tools().unwrap();
    let options = OpOptions {
        call: Some(CallOptions {
            timeout: Duration::from_millis(300),
            ..CallOptions::default()
        }),
        ..OpOptions::default()
    };
    let e = scenarios::op_error(
        c.call_tool_with("trigger-long-running-operation", long_operation(), options)
            .unwrap_err(),
    );
    assert!(
        matches!(e, OpError::Transport(TransportError::TimedOut { .. })),
        "{e:?}"
    );
    let r = c
        .call_tool("echo", json!({"message": "still here"}))
        .unwrap();
    assert_eq!(text_of(&r), "Echo: still here");
    wait_for_cancelled_running(&mut c, 1);
    c.close();
}

fn http_slow_call_times_out_and_the_client_stays_usable<C: Api>() {
    let (c, _peer) = http::<C>(&PEER, ClientOptions::default());
    slow_call_times_out(c);
}

fn stdio_slow_call_times_out_and_the_client_stays_usable<C: Api>() {
    slow_call_times_out(stdio::<C>(&PEER, ClientOptions::default()));
}

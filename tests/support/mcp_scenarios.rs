//! The MCP client scenarios that every third-party peer of `mcp_peers*.rs` runs, on both drivers
//! (`mcp_client::blocking` and `mcp_client::smol`, behind the one [`Api`]).
//!
//! A peer is a small server script of ours on a third-party SDK with the same surface:
//!
//! - tools `echo(text)`, `in_region(region)` (`region` carries `x-mcp-header: Region`),
//!   `confirm_action(target)` (a form elicitation: MRTR `input_required` on 2026-07-28; answers
//!   "confirmed: TARGET", and an `isError` result mentioning "decline" when declined),
//!   `count_slowly(steps)` (a progress notification per step, then "counted STEPS"),
//!   `touch_tools()` (publishes `notifications/tools/list_changed`, answers "touched"),
//!   `slow(seconds)` (sleeps; a cancelled sleep is counted) and `stats()` (JSON:
//!   `{"methods": {METHOD: COUNT}, "versions": [..], "slow": {"started": N, "cancelled": N}}`);
//! - the prompt `greet(name)` and the resource `peer://readme` ("mcpwire client peer resource");
//! - `tools/list` with `ttlMs` 60000.
//!
//! A test file describes how to start its peer ([`Peer`]) and lists the scenarios that peer
//! supports with `peer_tests!(crate::PEER; scenario, ...)`.
#![allow(dead_code)]

use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::wait_for;
use mcpwire::mcp::{ClientOptions, Error, FromResult, Host};
use mcpwire_core::mcp::{
    CachedEra, CallOptions, ClientCapabilities, ElicitAnswer, Era, Event, IncompatibleError,
    InputAnswer, InputRequestEvent, OpError, OpId, OpOptions, Operation, ProtocolChoice,
    ResultSource, RetryReason, SubscriptionChange, SubscriptionEndReason, SubscriptionEvent,
    SubscriptionFilter, SubscriptionHandle, TransportError,
};
use serde_json::{json, Map, Value};

/// A protocol version newer than any server knows (the client lists it first).
pub const FUTURE_VERSION: &str = "2099-01-01";

/// `peer_tests!(crate::PEER; a, b)` makes `a::blocking` and `a::smol` tests calling
/// `scenarios::a::<Blocking>(&crate::PEER)` and `scenarios::a::<Smol>(&crate::PEER)`.
macro_rules! peer_tests {
    ($peer:path; $($name:ident),* $(,)?) => {$(
        mod $name {
            #[test]
            fn blocking() {
                crate::scenarios::$name::<crate::scenarios::Blocking>(&$peer)
            }
            #[test]
            fn smol() {
                crate::scenarios::$name::<crate::scenarios::Smol>(&$peer)
            }
        }
    )*};
}

// ---------------------------------------------------------------------------------------------
// The two drivers behind one API

/// The client API both drivers offer, as plain calls (the smol client's through
/// `smol::block_on`).
pub trait Api: Sized + std::fmt::Debug {
    fn connect_http(url: &str, options: ClientOptions) -> Result<Self, Error>;
    fn connect_stdio(program: &str, args: &[&str], options: ClientOptions) -> Result<Self, Error>;
    fn set_host(&mut self, host: Box<dyn Host + Send>);
    fn canceller(&self) -> Box<dyn Fn() + Send>;
    fn era(&self) -> Option<CachedEra>;
    fn discover(&mut self) -> Result<Value, Error>;
    fn list_tools(&mut self) -> Result<Value, Error>;
    fn list_prompts(&mut self) -> Result<Value, Error>;
    fn list_resources(&mut self) -> Result<Value, Error>;
    fn call_tool(&mut self, name: &str, arguments: Value) -> Result<Value, Error>;
    fn call_tool_with(&mut self, name: &str, args: Value, o: OpOptions) -> Result<Value, Error>;
    fn get_prompt(&mut self, name: &str, arguments: Value) -> Result<Value, Error>;
    fn read_resource(&mut self, uri: &str) -> Result<Value, Error>;
    fn subscribe(&mut self, filter: SubscriptionFilter) -> Result<SubscriptionHandle, Error>;
    fn next_event(&mut self, timeout: Duration) -> Result<Option<SubscriptionEvent>, Error>;
    fn close(self);
    /// `ping` (the legacy era only).
    fn ping(&mut self) -> Result<Value, Error>;
}

/// Defines `$t`, a driver's client (`$m` is its module) as the scenarios call it: `$wait` turns
/// a method's return value into its result, `$finish` a `Pending` operation into its outcome.
/// "The running operation" [`Api::canceller`] cancels is the `tools/call` in flight; events
/// are read from the newest subscription.
macro_rules! impl_api {
    ($t:ident, $m:ident, |$x:ident| $wait:expr, |$p:ident| $finish:expr) => {
        pub struct $t {
            c: mcpwire::mcp::$m::McpClient,
            running: Arc<Mutex<Option<mcpwire::mcp::$m::Canceller>>>,
            subs: Vec<mcpwire::mcp::$m::Subscription>,
        }

        impl std::fmt::Debug for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                self.c.fmt(f)
            }
        }

        impl $t {
            fn new(c: mcpwire::mcp::$m::McpClient) -> Self {
                $t {
                    c,
                    running: Arc::default(),
                    subs: Vec::new(),
                }
            }

            fn call(
                &mut self,
                name: &str,
                arguments: Value,
                options: OpOptions,
            ) -> Result<Value, Error> {
                let operation = Operation::CallTool {
                    name: name.to_owned(),
                    arguments: match arguments {
                        Value::Object(m) => m,
                        other => {
                            // The driver's own check of the arguments.
                            let $x = self.c.call_tool_with(name, other, options);
                            return ($wait).map(|r| FromResult::raw(&r).clone());
                        }
                    },
                };
                let $x = self.c.start(operation, options);
                let $p = $wait?;
                *self.running.lock().unwrap() = Some($p.canceller());
                let outcome = $finish;
                *self.running.lock().unwrap() = None;
                outcome
            }
        }

        impl Api for $t {
            fn connect_http(url: &str, options: ClientOptions) -> Result<Self, Error> {
                mcpwire::mcp::$m::McpClient::connect_http(url, options).map($t::new)
            }
            fn connect_stdio(p: &str, args: &[&str], o: ClientOptions) -> Result<Self, Error> {
                mcpwire::mcp::$m::McpClient::connect_stdio(p, args, o).map($t::new)
            }
            fn set_host(&mut self, host: Box<dyn Host + Send>) {
                self.c.set_host(host)
            }
            fn canceller(&self) -> Box<dyn Fn() + Send> {
                let running = Arc::clone(&self.running);
                Box::new(move || {
                    if let Some(c) = running.lock().unwrap().as_ref() {
                        c.cancel();
                    }
                })
            }
            fn era(&self) -> Option<CachedEra> {
                self.c.era()
            }
            fn discover(&mut self) -> Result<Value, Error> {
                let $x = self.c.discover();
                ($wait).map(|d| d.to_value())
            }
            fn list_tools(&mut self) -> Result<Value, Error> {
                let $x = self.c.list_tools(None);
                ($wait).map(|r| FromResult::raw(&r).clone())
            }
            fn list_prompts(&mut self) -> Result<Value, Error> {
                let $x = self.c.list_prompts(None);
                ($wait).map(|r| FromResult::raw(&r).clone())
            }
            fn list_resources(&mut self) -> Result<Value, Error> {
                let $x = self.c.list_resources(None);
                ($wait).map(|r| FromResult::raw(&r).clone())
            }
            fn call_tool(&mut self, name: &str, arguments: Value) -> Result<Value, Error> {
                let options = OpOptions {
                    progress: true,
                    ..OpOptions::default()
                };
                self.call(name, arguments, options)
            }
            fn call_tool_with(&mut self, n: &str, a: Value, o: OpOptions) -> Result<Value, Error> {
                self.call(n, a, o)
            }
            fn get_prompt(&mut self, name: &str, arguments: Value) -> Result<Value, Error> {
                let $x = self.c.get_prompt(name, arguments);
                ($wait).map(|r| FromResult::raw(&r).clone())
            }
            fn read_resource(&mut self, uri: &str) -> Result<Value, Error> {
                let $x = self.c.read_resource(uri);
                ($wait).map(|r| FromResult::raw(&r).clone())
            }
            fn subscribe(&mut self, f: SubscriptionFilter) -> Result<SubscriptionHandle, Error> {
                let $x = self.c.subscribe(f);
                let sub = $wait?;
                let handle = sub.handle();
                self.subs.push(sub);
                Ok(handle)
            }
            fn next_event(&mut self, t: Duration) -> Result<Option<SubscriptionEvent>, Error> {
                match self.subs.last_mut() {
                    Some(sub) => {
                        let $x = sub.next_timeout(t);
                        $wait
                    }
                    None => Ok(None),
                }
            }
            fn close(self) {
                let $x = self.c.close();
                $wait
            }
            fn ping(&mut self) -> Result<Value, Error> {
                let $x = self.c.ping();
                ($wait).map(|()| Value::Object(Default::default()))
            }
        }
    };
}

impl_api!(Blocking, blocking, |x| x, |p| p.wait());
impl_api!(Smol, smol, |x| smol::block_on(x), |p| smol::block_on(p));

// ---------------------------------------------------------------------------------------------
// The peer

/// How to start one third-party peer.
pub struct Peer {
    /// What the failures call it ("the Python SDK (mcp==2.3.0)").
    pub name: &'static str,
    /// The command serving Streamable HTTP at `http://127.0.0.1:PORT/mcp`.
    pub http: fn(u16) -> Command,
    /// The program and arguments of the stdio server.
    pub stdio: fn() -> (String, Vec<String>),
}

/// A peer on Streamable HTTP; killed on drop.
pub struct HttpPeer {
    child: Child,
    pub url: String,
}

impl HttpPeer {
    pub fn start(peer: &Peer) -> HttpPeer {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = (peer.http)(port)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", peer.name));
        let mut running = HttpPeer {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
        };
        wait_for(&format!("{} to listen", peer.name), || {
            if let Ok(Some(status)) = running.child.try_wait() {
                panic!("{} exited: {status}", peer.name);
            }
            TcpStream::connect(("127.0.0.1", port)).ok().map(drop)
        });
        running
    }
}

impl Drop for HttpPeer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A client of the peer over HTTP; the peer lives as long as the returned handle.
pub fn http<C: Api>(peer: &Peer, options: ClientOptions) -> (C, HttpPeer) {
    let running = HttpPeer::start(peer);
    let c = C::connect_http(&running.url, options).unwrap();
    (c, running)
}

/// A client of the peer as a stdio child.
pub fn stdio<C: Api>(peer: &Peer, options: ClientOptions) -> C {
    let (program, args) = (peer.stdio)();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    C::connect_stdio(&program, &args, options).unwrap()
}

/// What the peer saw so far (its `stats` tool).
pub fn stats(c: &mut impl Api) -> Value {
    let r = c.call_tool("stats", json!({})).unwrap();
    serde_json::from_str(text_of(&r)).unwrap_or_else(|e| panic!("{e}: {r}"))
}

pub fn method_count(stats: &Value, method: &str) -> u64 {
    stats["methods"][method].as_u64().unwrap_or(0)
}

/// Polls the peer until `slow.cancelled` is `n` (bounded).
pub fn wait_for_cancelled(c: &mut impl Api, n: u64) {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let s = stats(c);
        if s["slow"]["cancelled"].as_u64() == Some(n) || Instant::now() > until {
            assert_eq!(s["slow"]["cancelled"], n, "{s}");
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

// ---------------------------------------------------------------------------------------------
// A recording host

#[derive(Default)]
pub struct Seen {
    pub events: Vec<Event>,
    pub progress: Vec<(OpId, f64, Option<f64>)>,
    pub asked: Vec<InputRequestEvent>,
}

pub struct Recorder {
    seen: Arc<Mutex<Seen>>,
    answer: Option<Map<String, Value>>,
}

impl Host for Recorder {
    fn on_input_request(&mut self, _op: OpId, request: &InputRequestEvent) -> InputAnswer {
        self.seen.lock().unwrap().asked.push(request.clone());
        match &self.answer {
            Some(content) => InputAnswer::Elicitation(ElicitAnswer::Accept(content.clone())),
            None => InputAnswer::Elicitation(ElicitAnswer::Decline),
        }
    }
    fn on_progress(&mut self, op: OpId, progress: f64, total: Option<f64>, _m: Option<&str>) {
        let mut seen = self.seen.lock().unwrap();
        seen.progress.push((op, progress, total));
    }
    fn on_event(&mut self, event: &Event) {
        self.seen.lock().unwrap().events.push(event.clone());
    }
}

pub fn recorder(c: &mut impl Api, answer: Option<Value>) -> Arc<Mutex<Seen>> {
    let seen = Arc::new(Mutex::new(Seen::default()));
    c.set_host(Box::new(Recorder {
        seen: Arc::clone(&seen),
        answer: answer.map(|v| v.as_object().unwrap().clone()),
    }));
    seen
}

pub fn text_of(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}

pub fn names(list: &Value, key: &str) -> Vec<String> {
    list[key]
        .as_array()
        .unwrap_or_else(|| panic!("no {key}: {list}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap_or_default().to_owned())
        .collect()
}

pub fn op_error(e: Error) -> OpError {
    match e {
        Error::Op(e) => *e,
        other => panic!("expected a core error, got {other:?}"),
    }
}

pub fn elicitation() -> ClientOptions {
    ClientOptions::default().with_capabilities(ClientCapabilities::none().with_elicitation_form())
}

// ---------------------------------------------------------------------------------------------
// The rules

/// Lists, calls, reads and gets what the peer serves; every answer is the peer's own.
pub fn serves_list_call_read_get(c: &mut impl Api) {
    let tools = names(&c.list_tools().unwrap(), "tools");
    for t in [
        "echo",
        "in_region",
        "confirm_action",
        "count_slowly",
        "slow",
    ] {
        assert!(tools.contains(&t.to_owned()), "{t} in {tools:?}");
    }
    let r = c.call_tool("echo", json!({"text": "from rust"})).unwrap();
    assert_eq!(text_of(&r), "from rust");
    assert_eq!(names(&c.list_prompts().unwrap(), "prompts"), ["greet"]);
    let p = c.get_prompt("greet", json!({"name": "Ada"})).unwrap();
    let text = p["messages"][0]["content"]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("Ada"), "{p}");
    let resources = c.list_resources().unwrap();
    assert_eq!(
        resources["resources"][0]["uri"], "peer://readme",
        "{resources}"
    );
    let read = c.read_resource("peer://readme").unwrap();
    assert_eq!(read["contents"][0]["text"], "mcpwire client peer resource");
}

pub fn http_discover_detects_the_modern_era_and_serves_list_call_read_get<C: Api>(peer: &Peer) {
    let (mut c, _peer) = http::<C>(peer, ClientOptions::default());
    let d = c.discover().unwrap();
    assert!(
        d["supportedVersions"].to_string().contains("2026-07-28"),
        "{d}"
    );
    let era = c.era().unwrap();
    assert_eq!(era.era, Era::Modern);
    assert_eq!(era.protocol_version.as_deref(), Some("2026-07-28"));
    serves_list_call_read_get(&mut c);
    let s = stats(&mut c);
    assert_eq!(method_count(&s, "initialize"), 0, "{s}");
    assert_eq!(s["versions"], json!(["2026-07-28"]), "{s}");
    c.close();
}

pub fn stdio_probe_detects_the_modern_era_and_serves_list_call_read_get<C: Api>(peer: &Peer) {
    let mut c = stdio::<C>(peer, ClientOptions::default());
    serves_list_call_read_get(&mut c);
    assert_eq!(c.era().unwrap().era, Era::Modern);
    let s = stats(&mut c);
    assert_eq!(method_count(&s, "server/discover"), 1, "the probe: {s}");
    assert_eq!(method_count(&s, "initialize"), 0, "{s}");
    c.close();
}

pub fn http_legacy_era_on_the_same_endpoint_is_served_through_initialize<C: Api>(peer: &Peer) {
    let options = ClientOptions::default().with_protocol(ProtocolChoice::Legacy);
    let (mut c, _peer) = http::<C>(peer, options);
    serves_list_call_read_get(&mut c);
    assert_eq!(c.era().unwrap().era, Era::Legacy);
    let s = stats(&mut c);
    assert_eq!(method_count(&s, "initialize"), 1, "{s}");
    assert_eq!(method_count(&s, "server/discover"), 0, "{s}");
    c.close();
}

pub fn stdio_legacy_era_is_served_through_initialize<C: Api>(peer: &Peer) {
    let options = ClientOptions::default().with_protocol(ProtocolChoice::Legacy);
    let mut c = stdio::<C>(peer, options);
    serves_list_call_read_get(&mut c);
    assert_eq!(c.era().unwrap().era, Era::Legacy);
    let s = stats(&mut c);
    assert_eq!(method_count(&s, "initialize"), 1, "{s}");
    c.close();
}

/// The SDK refuses a 2026-07-28 call of `in_region` without a matching `Mcp-Param-Region`
/// (-32020), so an answer means the header was sent and accepted. The client lists the tools
/// before the first call of a tool it does not know, so every call (a value that needs the
/// base64 form included) is accepted on the first try: no -32020 round trip, no retry.
pub fn http_tool_with_x_mcp_header_is_accepted_with_its_mcp_param_header<C: Api>(peer: &Peer) {
    let (mut c, _peer) = http::<C>(peer, ClientOptions::default());
    let seen = recorder(&mut c, None);
    for region in ["eu-west", "Zürich", "ap-south"] {
        let r = c.call_tool("in_region", json!({"region": region})).unwrap();
        assert_eq!(text_of(&r), format!("ran in {region}"), "{r}");
    }
    let events = &seen.lock().unwrap().events;
    assert!(
        !events.iter().any(|e| matches!(e, Event::Retrying { .. })),
        "no call is retried: {events:?}"
    );
}

/// With the listing before a call turned off, the first call goes out without the header: the
/// SDK's -32020 makes the client fetch `tools/list` and retry once; after that (and for a value
/// that needs the base64 form) the first attempt is accepted.
pub fn http_header_mismatch_32020_is_recovered_by_listing_tools_and_retrying_once<C: Api>(
    peer: &Peer,
) {
    let (mut c, _peer) = http::<C>(
        peer,
        ClientOptions::default().with_list_tools_before_call(false),
    );
    let seen = recorder(&mut c, None);
    let r = c
        .call_tool("in_region", json!({"region": "eu-west"}))
        .unwrap();
    assert_eq!(text_of(&r), "ran in eu-west", "{r}");
    c.list_tools().unwrap();
    let r = c
        .call_tool("in_region", json!({"region": "Zürich"}))
        .unwrap();
    assert_eq!(text_of(&r), "ran in Zürich", "{r}");
    let r = c
        .call_tool("in_region", json!({"region": "ap-south"}))
        .unwrap();
    assert_eq!(text_of(&r), "ran in ap-south", "{r}");
    let events = &seen.lock().unwrap().events;
    let refreshed: Vec<OpId> = events
        .iter()
        .filter_map(|e| match e {
            Event::Retrying {
                op,
                reason: RetryReason::HeadersRefreshed,
            } => Some(*op),
            _ => None,
        })
        .collect();
    assert_eq!(
        refreshed.len(),
        1,
        "only the first call is retried: {events:?}"
    );
}

pub fn mrtr_accepted_and_declined(mut c: impl Api) {
    let seen = recorder(&mut c, Some(json!({"confirm": true})));
    let r = c
        .call_tool("confirm_action", json!({"target": "db"}))
        .unwrap();
    assert_eq!(text_of(&r), "confirmed: db", "{r}");
    assert_eq!(seen.lock().unwrap().asked.len(), 1);
    // The default host declines; the SDK's resolver then fails the tool (an `isError` result).
    c.set_host(Box::new(mcpwire::mcp::NoHost));
    let r = c
        .call_tool("confirm_action", json!({"target": "db"}))
        .unwrap();
    assert_eq!(r["isError"], true, "{r}");
    assert!(text_of(&r).contains("decline"), "{r}");
    c.close();
}

pub fn http_mrtr_elicitation_accepted_and_declined<C: Api>(peer: &Peer) {
    let (c, _peer) = http::<C>(peer, elicitation());
    mrtr_accepted_and_declined(c);
}

pub fn stdio_mrtr_elicitation_accepted_and_declined<C: Api>(peer: &Peer) {
    mrtr_accepted_and_declined(stdio::<C>(peer, elicitation()));
}

pub fn progress_reaches_the_host(mut c: impl Api) {
    let seen = recorder(&mut c, None);
    let r = c.call_tool("count_slowly", json!({"steps": 3})).unwrap();
    assert_eq!(text_of(&r), "counted 3");
    let progress = seen.lock().unwrap().progress.clone();
    assert_eq!(progress.len(), 3, "{progress:?}");
    for (i, (_, p, total)) in progress.iter().enumerate() {
        assert_eq!(*p, (i + 1) as f64);
        assert_eq!(*total, Some(3.0));
    }
    c.close();
}

pub fn http_progress_reaches_the_host_before_the_result<C: Api>(peer: &Peer) {
    let (c, _peer) = http::<C>(peer, ClientOptions::default());
    progress_reaches_the_host(c);
}

pub fn stdio_progress_reaches_the_host_before_the_result<C: Api>(peer: &Peer) {
    progress_reaches_the_host(stdio::<C>(peer, ClientOptions::default()));
}

/// `subscriptions/listen` for `tools_list_changed` is acknowledged by the SDK, and a tool that
/// announces a change reaches the subscription.
pub fn subscription_receives_tools_list_changed(mut c: impl Api) {
    let sub = c
        .subscribe(SubscriptionFilter {
            tools_list_changed: true,
            ..SubscriptionFilter::default()
        })
        .unwrap();
    wait_for_subscription_event(&mut c, |e| {
        matches!(e, SubscriptionEvent::Acknowledged { sub: s, accepted, .. }
            if *s == sub && accepted.tools_list_changed)
    });
    assert_eq!(
        text_of(&c.call_tool("touch_tools", json!({})).unwrap()),
        "touched"
    );
    wait_for_subscription_event(&mut c, |e| {
        matches!(e, SubscriptionEvent::Changed { sub: s, change: SubscriptionChange::ToolsListChanged }
            if *s == sub)
    });
    c.close();
}

pub fn http_subscription_receives_tools_list_changed<C: Api>(peer: &Peer) {
    let (c, _peer) = http::<C>(peer, ClientOptions::default());
    subscription_receives_tools_list_changed(c);
}

pub fn stdio_subscription_receives_tools_list_changed<C: Api>(peer: &Peer) {
    subscription_receives_tools_list_changed(stdio::<C>(peer, ClientOptions::default()));
}

/// The peer's `tools/list` carries `ttlMs` 60000: the second list is the cached one and the
/// peer sees one `tools/list` only.
pub fn tools_list_within_its_ttl_sends_nothing(mut c: impl Api) {
    let seen = recorder(&mut c, None);
    let a = c.list_tools().unwrap();
    let b = c.list_tools().unwrap();
    assert_eq!(a, b);
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
    assert_eq!(sources, [ResultSource::Server, ResultSource::Cache]);
    let s = stats(&mut c);
    assert_eq!(method_count(&s, "tools/list"), 1, "{s}");
    c.close();
}

pub fn http_tools_list_within_its_ttl_sends_nothing<C: Api>(peer: &Peer) {
    let (c, _peer) = http::<C>(peer, ClientOptions::default());
    tools_list_within_its_ttl_sends_nothing(c);
}

pub fn stdio_tools_list_within_its_ttl_sends_nothing<C: Api>(peer: &Peer) {
    tools_list_within_its_ttl_sends_nothing(stdio::<C>(peer, ClientOptions::default()));
}

/// The client speaks a newer (fake) version besides 2026-07-28 and tries it first; the SDK
/// answers -32022 with what it supports and the client retries with 2026-07-28.
pub fn http_unsupported_newer_version_is_recovered_from_32022<C: Api>(peer: &Peer) {
    let options = ClientOptions::default().with_versions(&["2026-07-28", FUTURE_VERSION]);
    let (mut c, _peer) = http::<C>(peer, options);
    let seen = recorder(&mut c, None);
    let r = c
        .call_tool("echo", json!({"text": "after -32022"}))
        .unwrap();
    assert_eq!(text_of(&r), "after -32022");
    let events = seen.lock().unwrap().events.clone();
    assert!(
        events.iter().any(|e| matches!(
            e,
            Event::Retrying { reason: RetryReason::Version(v), .. } if v == "2026-07-28"
        )),
        "{events:?}"
    );
    assert_eq!(
        c.era().unwrap().protocol_version.as_deref(),
        Some("2026-07-28")
    );
    c.close();
}

pub fn slow_call_times_out(mut c: impl Api) {
    let options = OpOptions {
        call: Some(CallOptions {
            timeout: Duration::from_millis(300),
            ..CallOptions::default()
        }),
        ..OpOptions::default()
    };
    let e = op_error(
        c.call_tool_with("slow", json!({"seconds": 20}), options)
            .unwrap_err(),
    );
    assert!(
        matches!(e, OpError::Transport(TransportError::TimedOut { .. })),
        "{e:?}"
    );
    let r = c.call_tool("echo", json!({"text": "still here"})).unwrap();
    assert_eq!(text_of(&r), "still here");
    // The peer stopped the abandoned call (HTTP: the stream was closed; stdio: cancelled).
    wait_for_cancelled(&mut c, 1);
    c.close();
}

pub fn http_slow_call_times_out_and_the_client_stays_usable<C: Api>(peer: &Peer) {
    let (c, _peer) = http::<C>(peer, ClientOptions::default());
    slow_call_times_out(c);
}

pub fn stdio_slow_call_times_out_and_the_client_stays_usable<C: Api>(peer: &Peer) {
    slow_call_times_out(stdio::<C>(peer, ClientOptions::default()));
}

/// Cancels the running call from another thread (again and again, bounded, until it lands).
pub fn cancel_ends_the_call(mut c: impl Api) {
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
    let e = c.call_tool("slow", json!({"seconds": 20})).unwrap_err();
    stop.store(true, Ordering::SeqCst);
    t.join().unwrap();
    assert!(matches!(e, Error::Cancelled), "{e:?}");
    let r = c
        .call_tool("echo", json!({"text": "after cancel"}))
        .unwrap();
    assert_eq!(text_of(&r), "after cancel");
    wait_for_cancelled(&mut c, 1);
    c.close();
}

pub fn http_cancel_from_another_thread_ends_the_call<C: Api>(peer: &Peer) {
    let (c, _peer) = http::<C>(peer, ClientOptions::default());
    cancel_ends_the_call(c);
}

pub fn stdio_cancel_from_another_thread_ends_the_call<C: Api>(peer: &Peer) {
    cancel_ends_the_call(stdio::<C>(peer, ClientOptions::default()));
}

// ---------------------------------------------------------------------------------------------
// Capability recovery (-32021), refetch after list_changed, private results, legacy
// subscriptions. Besides the surface above, these use what the peer's `confirm_action` does
// for a 2026-07-28 call that did not declare form elicitation (the SDKs answer `-32021` with
// `requiredCapabilities`) and the resource `peer://whoami` (a result with `ttlMs` and
// `cacheScope: "private"`).

fn retries(events: &[Event], reason: &RetryReason) -> usize {
    events
        .iter()
        .filter(|e| matches!(e, Event::Retrying { reason: r, .. } if r == reason))
        .count()
}

/// The source of the latest result the host saw.
fn last_source(seen: &Arc<Mutex<Seen>>) -> Option<ResultSource> {
    seen.lock()
        .unwrap()
        .events
        .iter()
        .rev()
        .find_map(|e| match e {
            Event::Result { source, .. } => Some(*source),
            _ => None,
        })
}

/// The client declares no elicitation but the host supports form mode: the peer refuses the
/// call with `-32021` naming `elicitation.form`, the client declares it for that call only and
/// retries, and the MRTR exchange that follows is answered by the host.
pub fn capability_required_by_32021_is_declared_and_the_call_retried(mut c: impl Api) {
    let seen = recorder(&mut c, Some(json!({"confirm": true})));
    let r = c
        .call_tool("confirm_action", json!({"target": "db"}))
        .unwrap();
    assert_eq!(text_of(&r), "confirmed: db", "{r}");
    let s = seen.lock().unwrap();
    assert_eq!(
        retries(&s.events, &RetryReason::Capabilities),
        1,
        "{:?}",
        s.events
    );
    assert_eq!(s.asked.len(), 1, "the host answered the elicitation once");
    drop(s);
    c.close();
}

/// A host that does not support what `-32021` names gets an error naming it; the client stays
/// usable.
pub fn capability_the_host_lacks_fails_the_call_naming_it(mut c: impl Api) {
    let e = op_error(
        c.call_tool("confirm_action", json!({"target": "db"}))
            .unwrap_err(),
    );
    match &e {
        OpError::Incompatible(IncompatibleError::Capability(
            mcpwire_core::mcp::CapabilityError::HostLacks { missing },
        )) => {
            assert!(missing.to_string().contains("elicitation"), "{missing}")
        }
        other => panic!("expected the host to lack a capability: {other:?}"),
    }
    assert!(e.to_string().contains("elicitation"), "{e}");
    let r = c.call_tool("echo", json!({"text": "still here"})).unwrap();
    assert_eq!(text_of(&r), "still here");
    c.close();
}

fn form_on_demand() -> ClientOptions {
    ClientOptions::default()
        .with_host_capabilities(ClientCapabilities::none().with_elicitation_form())
}

pub fn http_missing_client_capability_is_declared_after_32021_or_named_when_the_host_lacks_it<
    C: Api,
>(
    peer: &Peer,
) {
    let (c, running) = http::<C>(peer, form_on_demand());
    capability_required_by_32021_is_declared_and_the_call_retried(c);
    let c = C::connect_http(&running.url, ClientOptions::default()).unwrap();
    capability_the_host_lacks_fails_the_call_naming_it(c);
}

pub fn stdio_missing_client_capability_is_declared_after_32021_or_named_when_the_host_lacks_it<
    C: Api,
>(
    peer: &Peer,
) {
    capability_required_by_32021_is_declared_and_the_call_retried(stdio::<C>(
        peer,
        form_on_demand(),
    ));
    capability_the_host_lacks_fails_the_call_naming_it(stdio::<C>(peer, ClientOptions::default()));
}

/// Waits (bounded: 10 events, 10 s for each) for a subscription event that `want` accepts;
/// returns every event read.
pub fn wait_for_subscription_event(
    c: &mut impl Api,
    want: impl Fn(&SubscriptionEvent) -> bool,
) -> Vec<SubscriptionEvent> {
    wait_for_subscription_event_within(c, 10, Duration::from_secs(10), want)
}

/// Waits for a subscription event that `want` accepts, reading at most `events` events and
/// waiting at most `each` for every one; returns every event read, or fails naming them.
pub fn wait_for_subscription_event_within(
    c: &mut impl Api,
    events: usize,
    each: Duration,
    want: impl Fn(&SubscriptionEvent) -> bool,
) -> Vec<SubscriptionEvent> {
    let mut seen = Vec::new();
    for _ in 0..events {
        match c.next_event(each).unwrap() {
            Some(e) => {
                let done = want(&e);
                seen.push(e);
                if done {
                    return seen;
                }
            }
            None => break,
        }
    }
    panic!("the awaited subscription event never came: {seen:?}");
}

/// A cached `tools/list` is dropped when the server says the list changed, and the next list
/// goes to the server. Where the server offers `subscriptions/listen` for tool list changes
/// (`server/discover`: `tools.listChanged`), the host listens and the change comes on that
/// stream; otherwise it comes on the stream of the `tools/call` that changed the list.
pub fn tools_list_is_refetched_after_list_changed(mut c: impl Api) {
    let seen = recorder(&mut c, None);
    let d = c.discover().unwrap();
    let listens = d["capabilities"]["tools"]["listChanged"] == true;
    let sub = listens.then(|| {
        let sub = c
            .subscribe(SubscriptionFilter {
                tools_list_changed: true,
                ..SubscriptionFilter::default()
            })
            .unwrap();
        wait_for_subscription_event(&mut c, |e| {
            matches!(e, SubscriptionEvent::Acknowledged { sub: s, accepted, .. }
                if *s == sub && accepted.tools_list_changed)
        });
        sub
    });
    let first = c.list_tools().unwrap();
    assert_eq!(last_source(&seen), Some(ResultSource::Server));
    c.list_tools().unwrap();
    assert_eq!(last_source(&seen), Some(ResultSource::Cache));
    assert_eq!(
        text_of(&c.call_tool("touch_tools", json!({})).unwrap()),
        "touched"
    );
    match sub {
        Some(sub) => {
            wait_for_subscription_event(&mut c, |e| {
                matches!(e, SubscriptionEvent::Changed { sub: s, change: SubscriptionChange::ToolsListChanged }
                    if *s == sub)
            });
        }
        None => {
            let events = &seen.lock().unwrap().events;
            assert!(
                events
                    .iter()
                    .any(|e| matches!(e, Event::Notification { method, .. }
                    if method == "notifications/tools/list_changed")),
                "the list change came with the call: {events:?}"
            );
        }
    }
    let again = c.list_tools().unwrap();
    assert_eq!(last_source(&seen), Some(ResultSource::Server));
    assert_eq!(names(&first, "tools"), names(&again, "tools"));
    let s = stats(&mut c);
    assert_eq!(method_count(&s, "tools/list"), 2, "{s}");
    c.close();
}

pub fn http_tools_list_is_refetched_after_list_changed<C: Api>(peer: &Peer) {
    let (c, _peer) = http::<C>(peer, ClientOptions::default());
    tools_list_is_refetched_after_list_changed(c);
}

pub fn stdio_tools_list_is_refetched_after_list_changed<C: Api>(peer: &Peer) {
    tools_list_is_refetched_after_list_changed(stdio::<C>(peer, ClientOptions::default()));
}

/// `peer://whoami` comes with `ttlMs` and `cacheScope: "private"`: the result the host gets
/// carries both, and a second read within the TTL is served from the client's cache (the
/// peer sees one `resources/read`).
pub fn private_resource_is_cached_within_the_client(c: &mut impl Api) -> Value {
    let seen = recorder(c, None);
    let a = c.read_resource("peer://whoami").unwrap();
    assert_eq!(a["cacheScope"], "private", "{a}");
    assert!(a["ttlMs"].as_u64().unwrap_or(0) >= 10_000, "{a}");
    assert_eq!(last_source(&seen), Some(ResultSource::Server));
    let b = c.read_resource("peer://whoami").unwrap();
    assert_eq!(last_source(&seen), Some(ResultSource::Cache));
    assert_eq!(a, b);
    let s = stats(c);
    assert_eq!(method_count(&s, "resources/read"), 1, "{s}");
    a
}

/// Over HTTP a second client of the same server (its own authorization context) does not get
/// the first client's private entry: its read reaches the server.
pub fn http_private_resource_is_cached_within_the_client_and_not_shared<C: Api>(peer: &Peer) {
    let (mut c, running) = http::<C>(peer, ClientOptions::default());
    private_resource_is_cached_within_the_client(&mut c);
    let mut other = C::connect_http(&running.url, ClientOptions::default()).unwrap();
    other.read_resource("peer://whoami").unwrap();
    let s = stats(&mut other);
    assert_eq!(method_count(&s, "resources/read"), 2, "{s}");
    other.close();
    c.close();
}

pub fn stdio_private_resource_is_cached_within_the_client<C: Api>(peer: &Peer) {
    let mut c = stdio::<C>(peer, ClientOptions::default());
    private_resource_is_cached_within_the_client(&mut c);
    c.close();
}

/// The legacy era: the subscription is the session's stream (HTTP: a GET; stdio: stdout) and
/// the server's `notifications/tools/list_changed` reaches it.
pub fn legacy_subscription_receives_tools_list_changed(mut c: impl Api) {
    c.list_tools().unwrap(); // the session is up
    assert_eq!(c.era().unwrap().era, Era::Legacy);
    let sub = c
        .subscribe(SubscriptionFilter {
            tools_list_changed: true,
            ..SubscriptionFilter::default()
        })
        .unwrap();
    wait_for_subscription_event(&mut c, |e| {
        matches!(e, SubscriptionEvent::Acknowledged { sub: s, accepted, .. }
            if *s == sub && accepted.tools_list_changed)
    });
    assert_eq!(
        text_of(&c.call_tool("touch_tools", json!({})).unwrap()),
        "touched"
    );
    wait_for_subscription_event(&mut c, |e| {
        matches!(e, SubscriptionEvent::Changed { sub: s, change: SubscriptionChange::ToolsListChanged }
            if *s == sub)
    });
    c.close();
}

pub fn http_legacy_subscription_receives_tools_list_changed<C: Api>(peer: &Peer) {
    let options = ClientOptions::default().with_protocol(ProtocolChoice::Legacy);
    let (c, _peer) = http::<C>(peer, options);
    legacy_subscription_receives_tools_list_changed(c);
}

pub fn stdio_legacy_subscription_receives_tools_list_changed<C: Api>(peer: &Peer) {
    let options = ClientOptions::default().with_protocol(ProtocolChoice::Legacy);
    legacy_subscription_receives_tools_list_changed(stdio::<C>(peer, options));
}

/// A 2026-07-28 server that does not serve `subscriptions/listen` refuses it (`-32601`): the
/// subscription ends with that rejection and the client stays usable.
pub fn subscription_the_server_does_not_serve_ends_with_its_rejection(mut c: impl Api) {
    c.list_tools().unwrap();
    let sub = c
        .subscribe(SubscriptionFilter {
            tools_list_changed: true,
            ..SubscriptionFilter::default()
        })
        .unwrap();
    let events = wait_for_subscription_event(
        &mut c,
        |e| matches!(e, SubscriptionEvent::Ended { sub: s, .. } if *s == sub),
    );
    let ended = events.last().unwrap();
    assert!(
        matches!(ended, SubscriptionEvent::Ended {
            reason: SubscriptionEndReason::Rejected(e), ..
        } if e.code == -32601),
        "{events:?}"
    );
    let r = c.call_tool("echo", json!({"text": "after"})).unwrap();
    assert_eq!(text_of(&r), "after");
    c.close();
}

pub fn http_subscription_the_server_does_not_serve_ends_with_its_rejection<C: Api>(peer: &Peer) {
    let (c, _peer) = http::<C>(peer, ClientOptions::default());
    subscription_the_server_does_not_serve_ends_with_its_rejection(c);
}

pub fn stdio_subscription_the_server_does_not_serve_ends_with_its_rejection<C: Api>(peer: &Peer) {
    subscription_the_server_does_not_serve_ends_with_its_rejection(stdio::<C>(
        peer,
        ClientOptions::default(),
    ));
}

/// A client that speaks only a version the peer does not know gets the peer's `-32022` as an
/// error naming both lists (the peer lists no legacy version, so there is nothing to fall
/// back to).
pub fn http_no_common_version_fails_naming_both_lists<C: Api>(peer: &Peer) {
    let options = ClientOptions::default()
        .with_versions(&[FUTURE_VERSION])
        .with_protocol(ProtocolChoice::Modern);
    let (mut c, _peer) = http::<C>(peer, options);
    let e = op_error(c.call_tool("echo", json!({"text": "x"})).unwrap_err());
    match &e {
        OpError::Incompatible(IncompatibleError::Version(
            mcpwire_core::mcp::VersionError::NoCommonVersion {
                ours, supported, ..
            },
        )) => {
            assert_eq!(ours, &[FUTURE_VERSION.to_owned()]);
            assert!(supported.contains(&"2026-07-28".to_owned()), "{e}");
        }
        other => panic!("expected no common version: {other:?}"),
    }
    let text = e.to_string();
    assert!(
        text.contains(FUTURE_VERSION) && text.contains("2026-07-28"),
        "{text}"
    );
    c.close();
}

/// The legacy era has no MRTR: the peer sends `elicitation/create` to the client while the
/// call runs (HTTP: on the call's stream, answered by a POST in the session; stdio: on
/// stdout), and the host's accept or decline comes back through the same `Host` callback.
pub fn http_legacy_elicitation_request_is_answered_through_the_host<C: Api>(peer: &Peer) {
    let options = elicitation().with_protocol(ProtocolChoice::Legacy);
    let (c, _peer) = http::<C>(peer, options);
    mrtr_accepted_and_declined(c);
}

pub fn stdio_legacy_elicitation_request_is_answered_through_the_host<C: Api>(peer: &Peer) {
    let options = elicitation().with_protocol(ProtocolChoice::Legacy);
    mrtr_accepted_and_declined(stdio::<C>(peer, options));
}

/// Cancellation in the legacy era: `notifications/cancelled` in the session (HTTP: POSTed, and
/// the call's stream closed; stdio: on stdin); the peer stops the call.
pub fn http_legacy_cancel_from_another_thread_ends_the_call<C: Api>(peer: &Peer) {
    let options = ClientOptions::default().with_protocol(ProtocolChoice::Legacy);
    let (c, _peer) = http::<C>(peer, options);
    cancel_ends_the_call(c);
}

pub fn stdio_legacy_cancel_from_another_thread_ends_the_call<C: Api>(peer: &Peer) {
    let options = ClientOptions::default().with_protocol(ProtocolChoice::Legacy);
    cancel_ends_the_call(stdio::<C>(peer, options));
}

/// A timeout in the legacy era cancels the call in the session too: the peer stops it.
pub fn http_legacy_slow_call_times_out_and_the_client_stays_usable<C: Api>(peer: &Peer) {
    let options = ClientOptions::default().with_protocol(ProtocolChoice::Legacy);
    let (c, _peer) = http::<C>(peer, options);
    slow_call_times_out(c);
}

pub fn stdio_legacy_slow_call_times_out_and_the_client_stays_usable<C: Api>(peer: &Peer) {
    let options = ClientOptions::default().with_protocol(ProtocolChoice::Legacy);
    slow_call_times_out(stdio::<C>(peer, options));
}

/// Progress in the legacy era: `notifications/progress` for the call's token, on the call's
/// stream (HTTP) or stdout (stdio), reaches the host before the result.
pub fn http_legacy_progress_reaches_the_host_before_the_result<C: Api>(peer: &Peer) {
    let options = ClientOptions::default().with_protocol(ProtocolChoice::Legacy);
    let (c, _peer) = http::<C>(peer, options);
    progress_reaches_the_host(c);
}

pub fn stdio_legacy_progress_reaches_the_host_before_the_result<C: Api>(peer: &Peer) {
    let options = ClientOptions::default().with_protocol(ProtocolChoice::Legacy);
    progress_reaches_the_host(stdio::<C>(peer, options));
}

/// stdio: a client that also speaks a newer (fake) version ends up on 2026-07-28 with the
/// peer (the `server/discover` probe lists what it supports; a `-32022` would be recovered
/// from), and the call is answered.
pub fn stdio_newer_version_is_negotiated_down_to_the_peers<C: Api>(peer: &Peer) {
    let options = ClientOptions::default().with_versions(&["2026-07-28", FUTURE_VERSION]);
    let mut c = stdio::<C>(peer, options);
    let r = c.call_tool("echo", json!({"text": "negotiated"})).unwrap();
    assert_eq!(text_of(&r), "negotiated");
    assert_eq!(
        c.era().unwrap().protocol_version.as_deref(),
        Some("2026-07-28")
    );
    let s = stats(&mut c);
    assert_eq!(s["versions"], json!(["2026-07-28"]), "{s}");
    c.close();
}

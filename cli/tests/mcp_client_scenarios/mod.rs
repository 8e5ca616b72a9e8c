//! The MCP client scenarios both drivers must pass, against the reference server on
//! 127.0.0.1: in-process over Streamable HTTP, and as a child process (`mcpwire dev mcp-server
//! --stdio`) over stdio, in the modern era and with fallback to the legacy one. Each driver's
//! test file (`mcp_client_blocking.rs`, `mcp_client_smol.rs`) runs every one of them.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcpwire::mcp::{ClientOptions, Error, Host};
use mcpwire_core::jsonrpc::code;
use mcpwire_core::mcp::{
    CachedEra, CallOptions, ClientCapabilities, ElicitAnswer, Era, EraEvidence, Event,
    IncompatibleError, InputAnswer, InputRequestEvent, OpError, OpId, OpOptions, ProtocolChoice,
    RetryReason, SubscriptionEndReason, SubscriptionEvent, SubscriptionFilter, SubscriptionHandle,
    TransportError,
};
use mcpwire_dev::mcp_server::{self, EraMode, McpServer, McpServerHandle, FAIL_CODE};
use serde_json::{json, Map, Value};

/// The names [`impl_api!`] uses.
pub mod types {
    pub use mcpwire::mcp::{ClientOptions, Error, FromResult, Host};
    pub use mcpwire_core::mcp::{
        CachedEra, OpOptions, Operation, SubscriptionEvent, SubscriptionFilter, SubscriptionHandle,
    };
    pub use serde_json::Value;
    pub use std::time::Duration;
}

/// The client API both drivers offer, as plain calls (the smol client's through
/// `smol::block_on`), so that every scenario runs against each driver.
pub trait Api: Sized + std::fmt::Debug {
    fn connect_http(url: &str, options: ClientOptions) -> Result<Self, Error>;
    fn connect_stdio(program: &str, args: &[&str], options: ClientOptions) -> Result<Self, Error>;
    fn set_host(&mut self, host: Box<dyn Host + Send>);
    /// A function that cancels the running operation (from another thread).
    fn canceller(&self) -> Box<dyn Fn() + Send>;
    fn era(&self) -> Option<CachedEra>;
    fn discover(&mut self) -> Result<Value, Error>;
    fn list_tools(&mut self, cursor: Option<&str>) -> Result<Value, Error>;
    fn list_prompts(&mut self, cursor: Option<&str>) -> Result<Value, Error>;
    fn list_resources(&mut self, cursor: Option<&str>) -> Result<Value, Error>;
    fn list_resource_templates(&mut self, cursor: Option<&str>) -> Result<Value, Error>;
    fn call_tool(&mut self, name: &str, arguments: Value) -> Result<Value, Error>;
    fn call_tool_with(
        &mut self,
        name: &str,
        arguments: Value,
        options: OpOptions,
    ) -> Result<Value, Error>;
    fn get_prompt(&mut self, name: &str, arguments: Value) -> Result<Value, Error>;
    fn read_resource(&mut self, uri: &str) -> Result<Value, Error>;
    fn ping(&mut self) -> Result<Value, Error>;
    fn subscribe(&mut self, filter: SubscriptionFilter) -> Result<SubscriptionHandle, Error>;
    fn next_subscription_event(
        &mut self,
        timeout: Duration,
    ) -> Result<Option<SubscriptionEvent>, Error>;
    fn unsubscribe(&mut self, sub: SubscriptionHandle) -> Result<(), Error>;
    fn close(self);
}

/// Defines `$t`, a driver's client as the scenarios call it, and implements [`Api`] for it:
/// `$m` is the driver's module (`mcpwire::mcp::blocking`), `$stdio` its stdio constructor,
/// `$wait` turns a method's return value into its result (nothing for the blocking client,
/// `smol::block_on` for the smol one) and `$finish` a `Pending` operation into its outcome.
/// "The running operation" that [`Api::canceller`] cancels is the `tools/call` in flight.
#[macro_export]
macro_rules! impl_api {
    ($t:ident, $m:path, $stdio:ident, |$x:ident| $wait:expr, |$p:ident| $finish:expr) => {
        pub use self::api_impl::$t;
        mod api_impl {
            use std::sync::{Arc, Mutex};
            use $crate::mcp_client_scenarios::types::*;
            use $m as driver;

            pub struct $t {
                c: driver::McpClient,
                running: Arc<Mutex<Option<driver::Canceller>>>,
                subs: Vec<driver::Subscription>,
            }

            impl std::fmt::Debug for $t {
                fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    self.c.fmt(f)
                }
            }

            impl $t {
                fn new(c: driver::McpClient) -> Self {
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

            impl $crate::mcp_client_scenarios::Api for $t {
                fn connect_http(url: &str, options: ClientOptions) -> Result<Self, Error> {
                    driver::McpClient::connect_http(url, options).map(Self::new)
                }
                fn connect_stdio(
                    program: &str,
                    args: &[&str],
                    options: ClientOptions,
                ) -> Result<Self, Error> {
                    driver::McpClient::$stdio(program, args, options).map(Self::new)
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
                fn list_tools(&mut self, cursor: Option<&str>) -> Result<Value, Error> {
                    let $x = self.c.list_tools(cursor);
                    ($wait).map(|r| FromResult::raw(&r).clone())
                }
                fn list_prompts(&mut self, cursor: Option<&str>) -> Result<Value, Error> {
                    let $x = self.c.list_prompts(cursor);
                    ($wait).map(|r| FromResult::raw(&r).clone())
                }
                fn list_resources(&mut self, cursor: Option<&str>) -> Result<Value, Error> {
                    let $x = self.c.list_resources(cursor);
                    ($wait).map(|r| FromResult::raw(&r).clone())
                }
                fn list_resource_templates(
                    &mut self,
                    cursor: Option<&str>,
                ) -> Result<Value, Error> {
                    let $x = self.c.list_resource_templates(cursor);
                    ($wait).map(|r| FromResult::raw(&r).clone())
                }
                fn call_tool(&mut self, name: &str, arguments: Value) -> Result<Value, Error> {
                    let options = OpOptions {
                        progress: true,
                        ..OpOptions::default()
                    };
                    self.call(name, arguments, options)
                }
                fn call_tool_with(
                    &mut self,
                    name: &str,
                    arguments: Value,
                    options: OpOptions,
                ) -> Result<Value, Error> {
                    self.call(name, arguments, options)
                }
                fn get_prompt(&mut self, name: &str, arguments: Value) -> Result<Value, Error> {
                    let $x = self.c.get_prompt(name, arguments);
                    ($wait).map(|r| FromResult::raw(&r).clone())
                }
                fn read_resource(&mut self, uri: &str) -> Result<Value, Error> {
                    let $x = self.c.read_resource(uri);
                    ($wait).map(|r| FromResult::raw(&r).clone())
                }
                fn ping(&mut self) -> Result<Value, Error> {
                    let $x = self.c.ping();
                    ($wait).map(|()| Value::Object(Default::default()))
                }
                fn subscribe(
                    &mut self,
                    filter: SubscriptionFilter,
                ) -> Result<SubscriptionHandle, Error> {
                    let $x = self.c.subscribe(filter);
                    let sub = $wait?;
                    let handle = sub.handle();
                    self.subs.push(sub);
                    Ok(handle)
                }
                fn next_subscription_event(
                    &mut self,
                    timeout: Duration,
                ) -> Result<Option<SubscriptionEvent>, Error> {
                    // The newest subscription's (the scenarios read one at a time).
                    match self.subs.last_mut() {
                        Some(sub) => {
                            let $x = sub.next_timeout(timeout);
                            $wait
                        }
                        None => Ok(None),
                    }
                }
                fn unsubscribe(&mut self, sub: SubscriptionHandle) -> Result<(), Error> {
                    self.subs.retain(|s| s.handle() != sub);
                    Ok(())
                }
                fn close(self) {
                    let $x = self.c.close();
                    $wait
                }
            }
        }
    };
}

/// One `#[test]` per scenario, run with the client type `$c`.
#[macro_export]
macro_rules! scenario_tests {
    ($c:ty) => {
        $crate::scenario_tests!(@each $c; http_modern_server_lists_and_calls_tools_in_the_modern_era, http_legacy_server_is_detected_and_served_through_a_session_ended_by_delete, http_pinned_modern_client_reports_a_legacy_server_as_an_error, http_tool_with_x_mcp_header_is_called_with_its_mcp_param_header, http_tool_with_x_mcp_header_works_before_any_tools_list, http_mrtr_elicitation_accepted_by_the_host_completes_the_call, http_mrtr_elicitation_declined_by_the_default_host_completes_without_a_name, http_mrtr_answer_that_breaks_the_schema_is_refused_with_the_key, http_progress_notifications_reach_the_host_before_the_result, http_slow_call_times_out_and_the_server_sees_the_client_go_away, http_cancel_from_another_thread_ends_the_call_and_closes_its_exchange, http_per_call_timeout_overrides_the_default, http_tools_list_within_its_ttl_is_served_from_the_cache, http_tools_list_without_ttl_is_fetched_again, http_tool_error_is_the_servers_error_object, http_methods_the_server_lacks_fail_with_method_not_found, http_ping_is_unsupported_in_the_modern_era, http_first_ping_learns_the_era_and_pings_a_legacy_server, http_first_ping_on_a_modern_server_is_unsupported_after_learning_the_era, http_bearer_token_is_sent_on_every_request, http_unreachable_server_names_the_url_and_the_transport_error, http_answer_cut_short_is_a_transport_error_about_the_body, http_request_too_large_for_the_server_is_a_clear_413_or_431, http_request_head_too_large_to_send_names_the_limit, http_redirect_is_not_followed_and_the_token_stays_home, http_connection_close_answer_is_not_reused, http_bad_inputs_are_typed_errors, http_subscription_the_server_lacks_ends_with_its_refusal_instead_of_hanging, stdio_modern_server_is_probed_and_serves_calls, stdio_long_request_lines_arrive_whole_and_in_order, stdio_legacy_server_falls_back_to_initialize, stdio_mrtr_elicitation_round_trip, stdio_slow_call_times_out_and_the_client_stays_usable, stdio_cancel_from_another_thread_ends_the_call_and_the_client_stays_usable, stdio_server_that_never_reads_its_stdin_does_not_stop_the_timeout, stdio_server_that_never_reads_its_stdin_does_not_stop_a_cancel, stdio_crashed_child_is_reported_with_its_exit_status_and_stderr_tail, stdio_missing_program_is_a_spawn_error, stdio_child_is_stopped_when_the_client_is_dropped, pinned_era_event_reaches_a_host_set_after_connecting);
    };
    (@each $c:ty; $($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                $crate::mcp_client_scenarios::$name::<$c>();
            }
        )*
    };
}

pub fn server(era: EraMode) -> McpServerHandle {
    server_with(mcp_server::Config {
        era,
        ..mcp_server::Config::default()
    })
}

pub fn server_with(config: mcp_server::Config) -> McpServerHandle {
    McpServer::start_http(config, "127.0.0.1:0").unwrap()
}

fn stdio<C: Api>(era: &str, options: ClientOptions) -> C {
    C::connect_stdio(
        env!("CARGO_BIN_EXE_mcpwire"),
        &["dev", "mcp-server", "--stdio", "--era", era],
        options,
    )
    .unwrap()
}

/// What a test host saw.
#[derive(Default)]
struct Seen {
    events: Vec<Event>,
    progress: Vec<(OpId, f64, Option<f64>)>,
    asked: Vec<InputRequestEvent>,
}

/// A host that records everything and answers elicitations with `answer`.
struct Recorder {
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
        self.seen
            .lock()
            .unwrap()
            .progress
            .push((op, progress, total));
    }
    fn on_event(&mut self, event: &Event) {
        self.seen.lock().unwrap().events.push(event.clone());
    }
}

fn recorder(client: &mut impl Api, answer: Option<Value>) -> Arc<Mutex<Seen>> {
    let seen = Arc::new(Mutex::new(Seen::default()));
    client.set_host(Box::new(Recorder {
        seen: Arc::clone(&seen),
        answer: answer.map(|v| v.as_object().unwrap().clone()),
    }));
    seen
}

fn tool_names(list: &Value) -> Vec<String> {
    list["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

fn rpc_count(srv: &McpServerHandle, method: &str) -> usize {
    srv.server()
        .requests()
        .iter()
        .filter(|r| r.method.as_deref() == Some(method))
        .count()
}

pub fn text_of(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}

fn op_error(e: Error) -> OpError {
    match e {
        Error::Op(e) => *e,
        other => panic!("expected a core error, got {other:?}"),
    }
}

/// Cancels `client`'s running operation from another thread, again and again until `stop`
/// (bounded): whichever attempt lands while the call runs cancels it.
fn keep_cancelling(
    c: &impl Api,
) -> (
    Arc<std::sync::atomic::AtomicBool>,
    std::thread::JoinHandle<()>,
) {
    let canceller = c.canceller();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    let t = std::thread::spawn(move || {
        for _ in 0..200 {
            if flag.load(std::sync::atomic::Ordering::SeqCst) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
            canceller();
        }
    });
    (stop, t)
}

// ---------------------------------------------------------------------------------------------
// HTTP

pub fn http_modern_server_lists_and_calls_tools_in_the_modern_era<C: Api>() {
    let srv = server(EraMode::Dual);
    let mut c = C::connect_http(&srv.url(), ClientOptions::default()).unwrap();
    let discover = c.discover().unwrap();
    assert!(discover["supportedVersions"]
        .to_string()
        .contains("2026-07-28"));
    let tools = c.list_tools(None).unwrap();
    assert!(tool_names(&tools).contains(&"echo".to_owned()));
    let r = c.call_tool("echo", json!({"text": "hi there"})).unwrap();
    assert_eq!(text_of(&r), "hi there");
    let era = c.era().unwrap();
    assert_eq!(era.era, Era::Modern);
    assert_eq!(era.protocol_version.as_deref(), Some("2026-07-28"));
    assert_eq!(srv.server().stats().sessions_opened, 0, "no initialize");
}

pub fn http_legacy_server_is_detected_and_served_through_a_session_ended_by_delete<C: Api>() {
    let srv = server(EraMode::Legacy);
    let mut c = C::connect_http(&srv.url(), ClientOptions::default()).unwrap();
    let seen = recorder(&mut c, None);
    let tools = c.list_tools(None).unwrap();
    assert!(tool_names(&tools).contains(&"echo".to_owned()));
    let r = c.call_tool("echo", json!({"text": "old"})).unwrap();
    assert_eq!(text_of(&r), "old");
    assert_eq!(c.ping().unwrap(), json!({}));
    assert_eq!(c.era().unwrap().era, Era::Legacy);
    {
        let seen = seen.lock().unwrap();
        assert!(
            seen.events.iter().any(|e| matches!(
                e,
                Event::EraDetected {
                    era: Era::Legacy,
                    evidence: EraEvidence::HttpStatus(_),
                    ..
                }
            )),
            "the fallback is an event: {:?}",
            seen.events
        );
        assert!(seen.events.iter().any(|e| matches!(
            e,
            Event::Retrying {
                reason: RetryReason::LegacyFallback,
                ..
            }
        )));
    }
    assert_eq!(srv.server().stats().sessions_opened, 1);
    c.close();
    assert_eq!(srv.server().stats().sessions_ended, 1, "close sends DELETE");
}

pub fn http_pinned_modern_client_reports_a_legacy_server_as_an_error<C: Api>() {
    let srv = server(EraMode::Legacy);
    let options = ClientOptions::default().with_protocol(ProtocolChoice::Modern);
    let mut c = C::connect_http(&srv.url(), options).unwrap();
    let e = op_error(c.list_tools(None).unwrap_err());
    // The reference server's legacy 400 (with or without a JSON-RPC error body) is the
    // evidence automatic detection would take as legacy: the error says so, with the hint.
    assert!(
        matches!(
            e,
            OpError::Incompatible(IncompatibleError::LegacyServer { status: 400, .. })
        ),
        "{e:?}"
    );
    assert!(
        e.to_string()
            .contains("answered like a 2025-11-25 (legacy) server"),
        "{e}"
    );
    assert!(e.to_string().contains("--protocol auto"), "{e}");
    assert_eq!(srv.server().stats().sessions_opened, 0, "no fallback");
}

pub fn http_tool_with_x_mcp_header_is_called_with_its_mcp_param_header<C: Api>() {
    let srv = server(EraMode::Dual);
    let mut c = C::connect_http(&srv.url(), ClientOptions::default()).unwrap();
    c.list_tools(None).unwrap();
    let r = c.call_tool("tenant", json!({"region": "eu-west"})).unwrap();
    assert_eq!(r["structuredContent"]["region"], "eu-west");
    let requests = srv.server().requests();
    let call = requests
        .iter()
        .rev()
        .find(|r| r.method.as_deref() == Some("tools/call"))
        .unwrap();
    assert!(
        call.headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case("mcp-param-region")),
        "{:?}",
        call.headers
    );
    assert_eq!(srv.server().stats().header_mismatches, 0);
}

pub fn http_tool_with_x_mcp_header_works_before_any_tools_list<C: Api>() {
    let srv = server(EraMode::Dual);
    let mut c = C::connect_http(&srv.url(), ClientOptions::default()).unwrap();
    let r = c.call_tool("tenant", json!({"region": "ap"})).unwrap();
    assert_eq!(r["structuredContent"]["region"], "ap");
    // The core listed the tools first, so the one call carried Mcp-Param-Region at once.
    let stats = srv.server().stats();
    assert_eq!(stats.tool_calls.get("tenant"), Some(&1));
    assert_eq!(stats.header_mismatches, 0, "no -32020 round trip");
    let methods: Vec<Option<String>> = srv
        .server()
        .requests()
        .into_iter()
        .map(|r| r.method)
        .collect();
    assert_eq!(
        methods,
        [Some("tools/list".to_owned()), Some("tools/call".to_owned())]
    );
}

pub fn http_first_ping_learns_the_era_and_pings_a_legacy_server<C: Api>() {
    let srv = server(EraMode::Legacy);
    let mut c = C::connect_http(&srv.url(), ClientOptions::default()).unwrap();
    assert_eq!(c.ping().unwrap(), json!({}));
    assert_eq!(c.era().unwrap().era, Era::Legacy);
    let methods: Vec<Option<String>> = srv
        .server()
        .requests()
        .into_iter()
        .map(|r| r.method)
        .collect();
    // The probe first; the ping once, in the session (notifications/initialized is sent
    // without waiting, so it may be logged on either side of the ping).
    assert_eq!(methods.first(), Some(&Some("server/discover".to_owned())));
    let pings = methods
        .iter()
        .filter(|m| m.as_deref() == Some("ping"))
        .count();
    assert_eq!(pings, 1, "{methods:?}");
    assert_eq!(srv.server().stats().sessions_opened, 1);
}

pub fn http_first_ping_on_a_modern_server_is_unsupported_after_learning_the_era<C: Api>() {
    let srv = server(EraMode::Modern);
    let mut c = C::connect_http(&srv.url(), ClientOptions::default()).unwrap();
    let e = op_error(c.ping().unwrap_err());
    assert!(
        matches!(
            e,
            OpError::Incompatible(IncompatibleError::Unsupported {
                operation: "ping",
                era: Era::Modern
            })
        ),
        "{e:?}"
    );
    let methods: Vec<Option<String>> = srv
        .server()
        .requests()
        .into_iter()
        .map(|r| r.method)
        .collect();
    assert_eq!(
        methods,
        [Some("server/discover".to_owned())],
        "no ping sent"
    );
}

pub fn http_mrtr_elicitation_accepted_by_the_host_completes_the_call<C: Api>() {
    let srv = server(EraMode::Dual);
    let options = ClientOptions::default()
        .with_capabilities(ClientCapabilities::none().with_elicitation_form());
    let mut c = C::connect_http(&srv.url(), options).unwrap();
    let seen = recorder(&mut c, Some(json!({"name": "Ada"})));
    let r = c.call_tool("ask", json!({})).unwrap();
    assert_eq!(text_of(&r), "Hello, Ada!");
    assert_eq!(seen.lock().unwrap().asked.len(), 1);
    assert_eq!(srv.server().stats().tool_calls.get("ask"), Some(&2));
}

pub fn http_mrtr_elicitation_declined_by_the_default_host_completes_without_a_name<C: Api>() {
    let srv = server(EraMode::Dual);
    let options = ClientOptions::default()
        .with_capabilities(ClientCapabilities::none().with_elicitation_form());
    let mut c = C::connect_http(&srv.url(), options).unwrap();
    let r = c.call_tool("ask", json!({})).unwrap();
    assert_eq!(text_of(&r), "No name given.");
}

pub fn http_mrtr_answer_that_breaks_the_schema_is_refused_with_the_key<C: Api>() {
    let srv = server(EraMode::Dual);
    let options = ClientOptions::default()
        .with_capabilities(ClientCapabilities::none().with_elicitation_form());
    let mut c = C::connect_http(&srv.url(), options).unwrap();
    recorder(&mut c, Some(json!({"name": 42})));
    match c.call_tool("ask", json!({})).unwrap_err() {
        Error::InputRefused { key, .. } => assert_eq!(key, "name"),
        other => panic!("{other:?}"),
    }
}

pub fn http_progress_notifications_reach_the_host_before_the_result<C: Api>() {
    let srv = server(EraMode::Dual);
    let mut c = C::connect_http(&srv.url(), ClientOptions::default()).unwrap();
    let seen = recorder(&mut c, None);
    c.call_tool("progress", json!({"steps": 3, "interval_ms": 10}))
        .unwrap();
    let progress = seen.lock().unwrap().progress.clone();
    assert_eq!(progress.len(), 3, "{progress:?}");
    assert!(progress.windows(2).all(|w| w[0].1 < w[1].1));
}

/// A 300 ms timeout for one call only (a whole-client one would also bound the discovery, which
/// a loaded machine can take longer for).
fn short_call() -> OpOptions {
    OpOptions {
        call: Some(CallOptions {
            timeout: Duration::from_millis(300),
            ..CallOptions::default()
        }),
        ..OpOptions::default()
    }
}

pub fn http_slow_call_times_out_and_the_server_sees_the_client_go_away<C: Api>() {
    let srv = server(EraMode::Dual);
    let mut c = C::connect_http(&srv.url(), ClientOptions::default()).unwrap();
    let e = op_error(
        c.call_tool_with("slow", json!({"ms": 20_000}), short_call())
            .unwrap_err(),
    );
    assert!(
        matches!(e, OpError::Transport(TransportError::TimedOut { .. })),
        "{e:?}"
    );
    // The stream was closed: the server stops the call early (bounded wait, no timing claim).
    let until = Instant::now() + Duration::from_secs(10);
    while srv.server().stats().cancelled == 0 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(srv.server().stats().cancelled, 1);
    // The client still works.
    assert_eq!(
        text_of(&c.call_tool("echo", json!({"text": "x"})).unwrap()),
        "x"
    );
}

pub fn http_cancel_from_another_thread_ends_the_call_and_closes_its_exchange<C: Api>() {
    let srv = server(EraMode::Dual);
    let mut c = C::connect_http(&srv.url(), ClientOptions::default()).unwrap();
    let (stop, t) = keep_cancelling(&c);
    let e = c.call_tool("slow", json!({"ms": 20_000})).unwrap_err();
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    t.join().unwrap();
    assert!(matches!(e, Error::Cancelled), "{e:?}");
    let until = Instant::now() + Duration::from_secs(10);
    while srv.server().stats().cancelled == 0 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(srv.server().stats().cancelled, 1);
    assert_eq!(
        text_of(&c.call_tool("echo", json!({"text": "z"})).unwrap()),
        "z"
    );
}

pub fn http_per_call_timeout_overrides_the_default<C: Api>() {
    let srv = server(EraMode::Dual);
    let mut c = C::connect_http(&srv.url(), ClientOptions::default()).unwrap();
    let options = OpOptions {
        call: Some(CallOptions {
            timeout: Duration::from_millis(200),
            ..CallOptions::default()
        }),
        ..OpOptions::default()
    };
    let e = op_error(
        c.call_tool_with("slow", json!({"ms": 20_000}), options)
            .unwrap_err(),
    );
    assert!(
        matches!(e, OpError::Transport(TransportError::TimedOut { .. })),
        "{e:?}"
    );
}

pub fn http_tools_list_within_its_ttl_is_served_from_the_cache<C: Api>() {
    let srv = server_with(mcp_server::Config {
        tools_list_ttl_ms: Some(600_000),
        ..mcp_server::Config::default()
    });
    let mut c = C::connect_http(&srv.url(), ClientOptions::default()).unwrap();
    let a = c.list_tools(None).unwrap();
    let b = c.list_tools(None).unwrap();
    assert_eq!(a, b);
    assert_eq!(rpc_count(&srv, "tools/list"), 1);
}

pub fn http_tools_list_without_ttl_is_fetched_again<C: Api>() {
    let srv = server(EraMode::Dual);
    let mut c = C::connect_http(&srv.url(), ClientOptions::default()).unwrap();
    c.list_tools(None).unwrap();
    c.list_tools(None).unwrap();
    assert_eq!(rpc_count(&srv, "tools/list"), 2);
}

pub fn http_tool_error_is_the_servers_error_object<C: Api>() {
    let srv = server(EraMode::Dual);
    let mut c = C::connect_http(&srv.url(), ClientOptions::default()).unwrap();
    match op_error(c.call_tool("fail", json!({})).unwrap_err()) {
        OpError::Server(e) => assert_eq!(e.code, FAIL_CODE),
        other => panic!("{other:?}"),
    }
}

pub fn http_methods_the_server_lacks_fail_with_method_not_found<C: Api>() {
    let srv = server(EraMode::Dual);
    let mut c = C::connect_http(&srv.url(), ClientOptions::default()).unwrap();
    c.discover().unwrap();
    for result in [
        c.list_prompts(None),
        c.list_resources(None),
        c.list_resource_templates(None),
        c.read_resource("file:///nothing"),
        c.get_prompt("nothing", Value::Null),
    ] {
        match op_error(result.unwrap_err()) {
            OpError::Server(e) => assert_eq!(e.code, code::METHOD_NOT_FOUND),
            other => panic!("{other:?}"),
        }
    }
}

pub fn http_ping_is_unsupported_in_the_modern_era<C: Api>() {
    let srv = server(EraMode::Modern);
    let mut c = C::connect_http(&srv.url(), ClientOptions::default()).unwrap();
    c.discover().unwrap();
    let e = op_error(c.ping().unwrap_err());
    assert!(
        matches!(
            e,
            OpError::Incompatible(IncompatibleError::Unsupported { .. })
        ),
        "{e:?}"
    );
}

pub fn http_bearer_token_is_sent_on_every_request<C: Api>() {
    let srv = server(EraMode::Dual);
    let options = ClientOptions::default().with_bearer_token("tok-123456789");
    let mut c = C::connect_http(&srv.url(), options).unwrap();
    c.list_tools(None).unwrap();
    c.call_tool("echo", json!({"text": "a"})).unwrap();
    let requests = srv.server().requests();
    assert!(requests.len() >= 2);
    for r in &requests {
        assert!(
            r.headers
                .iter()
                .any(|(n, _)| n.eq_ignore_ascii_case("authorization")),
            "{r:?}"
        );
    }
    assert!(!format!("{c:?}").contains("tok-123456789"));
}

pub fn http_unreachable_server_names_the_url_and_the_transport_error<C: Api>() {
    // Bind then drop a listener: the port is closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let mut c = C::connect_http(&url, ClientOptions::default()).unwrap();
    match c.call_tool("echo", json!({"text": "x"})).unwrap_err() {
        Error::Transport { url: u, cause, .. } => {
            assert_eq!(u, url);
            assert!(!cause.is_empty());
        }
        other => panic!("{other:?}"),
    }
}

/// A JSON answer whose body ends before its `Content-Length` (the server closes the connection
/// mid-body) is a transport failure that says so, not a result and not a hang.
/// RFC 9112 section 9.6: a client that receives `Connection: close` "MUST NOT send further
/// requests on that connection". This server answers every request with it and then leaves the
/// connection open without reading: a client that reused it would wait for an answer that never
/// comes. Each request gets a connection of its own, and every call is answered.
pub fn http_connection_close_answer_is_not_reused<C: Api>() {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = Arc::clone(&accepted);
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in listener.incoming().take(8) {
            let Ok(conn) = conn else { return };
            counted.fetch_add(1, Ordering::SeqCst);
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            let mut length = 0;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some((name, value)) = line.split_once(':') {
                    if name.eq_ignore_ascii_case("content-length") {
                        length = value.trim().parse().unwrap_or(0);
                    }
                }
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            let request: Value = serde_json::from_slice(&body).unwrap();
            let answer =
                json!({"jsonrpc": "2.0", "id": request["id"], "result": {"tools": []}}).to_string();
            let mut conn = conn;
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                answer.len()
            );
            conn.write_all(head.as_bytes()).unwrap();
            conn.write_all(answer.as_bytes()).unwrap();
            held.push(conn); // open, and never read again
        }
    });
    let options = ClientOptions::default()
        .with_protocol(ProtocolChoice::Modern)
        .with_request_timeout(Duration::from_secs(5));
    let mut c = C::connect_http(&url, options).unwrap();
    for _ in 0..3 {
        let tools = c.list_tools(None).unwrap();
        // No `ttlMs`: every listing goes to the server.
        assert_eq!(tools["tools"], json!([]));
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 3);
}

/// A server that answers with a redirect: the client does not follow it (a bearer token must
/// not travel to another address), and says so with the status.
pub fn http_redirect_is_not_followed_and_the_token_stays_home<C: Api>() {
    use std::io::{Read, Write};
    let elsewhere = server(EraMode::Modern);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let location = elsewhere.url();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stopped = Arc::clone(&stop);
    let redirector = std::thread::spawn(move || {
        // Every connection (a few at most: one per request the client makes) is redirected.
        listener.set_nonblocking(true).unwrap();
        let until = Instant::now() + Duration::from_secs(10);
        let mut served = 0;
        while served < 4 && Instant::now() < until && !stopped.load(Ordering::SeqCst) {
            let Ok((mut s, _)) = listener.accept() else {
                std::thread::sleep(Duration::from_millis(10));
                continue;
            };
            s.set_nonblocking(false).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            let mut buf = [0u8; 16 * 1024];
            let _ = s.read(&mut buf);
            let answer = format!(
                "HTTP/1.1 307 Temporary Redirect\r\nLocation: {location}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
            let _ = s.write_all(answer.as_bytes());
            served += 1;
        }
    });
    let options = ClientOptions::default()
        .with_protocol(ProtocolChoice::Modern)
        .with_bearer_token("secret-token-123");
    let mut c = C::connect_http(&url, options).unwrap();
    let text = op_error(c.discover().unwrap_err()).to_string();
    assert!(
        text.contains("HTTP 307 (Temporary Redirect): redirects are not followed"),
        "{text}"
    );
    assert!(!text.contains("secret-token-123"), "{text}");
    c.close();
    stop.store(true, Ordering::SeqCst);
    redirector.join().unwrap();
    assert_eq!(
        elsewhere.server().stats().messages,
        0,
        "the redirect was followed"
    );
}

/// A server that refuses a request as too large: its `413` (a body over its limit) or `431`
/// (headers over its limit) reaches the caller as that status with what was too large, and
/// the call is not sent again.
pub fn http_request_too_large_for_the_server_is_a_clear_413_or_431<C: Api>() {
    let srv = server_with(mcp_server::Config {
        era: EraMode::Modern,
        limits: mcpwire_dev::http::Limits {
            max_head: 8 * 1024,
            max_body: 64 * 1024,
            ..Default::default()
        },
        ..mcp_server::Config::default()
    });
    let mut c = C::connect_http(&srv.url(), ClientOptions::default()).unwrap();
    c.discover().unwrap();
    let e = op_error(
        c.call_tool("echo", json!({"text": "x".repeat(100 * 1024)}))
            .unwrap_err(),
    );
    // The reference server's 413 carries a JSON-RPC error saying what the bound is (a bare
    // 413 becomes "HTTP 413 (Content Too Large) ...", core/tests/mcp_request.rs).
    let text = e.to_string();
    assert!(
        matches!(&e, OpError::Server(o) if o.code == -32600),
        "{text}"
    );
    assert!(
        text.contains("Payload Too Large: the body is limited to 65536 bytes"),
        "{text}"
    );
    assert_eq!(
        srv.server().stats().tool_calls.get("echo"),
        None,
        "{:?}",
        srv.server().stats()
    );
    // The client stays usable.
    assert_eq!(
        text_of(&c.call_tool("echo", json!({"text": "ok"})).unwrap()),
        "ok"
    );

    let big = ClientOptions::default().with_header("X-Big", &"y".repeat(16 * 1024));
    let mut c = C::connect_http(&srv.url(), big).unwrap();
    let text = op_error(c.discover().unwrap_err()).to_string();
    assert!(
        text.contains("HTTP 431 (Request Header Fields Too Large)"),
        "{text}"
    );
    assert!(text.contains("request headers are larger"), "{text}");
}

/// A request head larger than the client sends at all (the blocking driver's 64 KiB write
/// buffer; the smol driver sends it and the server answers 431) fails with a message that
/// names the limit, not ureq's "output too small"; nothing reaches the server.
pub fn http_request_head_too_large_to_send_names_the_limit<C: Api>() {
    let srv = server(EraMode::Modern);
    let big = ClientOptions::default().with_header("X-Big", &"y".repeat(100 * 1024));
    let mut c = C::connect_http(&srv.url(), big).unwrap();
    let text = c.discover().unwrap_err().to_string();
    assert!(
        text.contains("HTTP 431") || text.contains("more than this client sends (64 KiB at most)"),
        "{text}"
    );
    assert_eq!(
        srv.server().stats().messages,
        0,
        "{:?}",
        srv.server().stats()
    );
}

pub fn http_answer_cut_short_is_a_transport_error_about_the_body<C: Api>() {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let server = std::thread::spawn(move || {
        // Every connection (a few at most: the client may retry) gets the same cut answer.
        listener.set_nonblocking(false).unwrap();
        for _ in 0..4 {
            let Ok((mut s, _)) = listener.accept() else {
                return;
            };
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut buf = [0u8; 8192];
            let _ = s.read(&mut buf);
            let _ = s.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{\"jsonrpc\":\"2.0\",\"id\":",
            );
            // Dropping the stream closes the connection mid-body.
        }
    });
    // The call goes out at once (no `tools/list` first), so the cut answer is the call's.
    let options = ClientOptions::default()
        .with_request_timeout(Duration::from_secs(10))
        .with_list_tools_before_call(false);
    let mut c = C::connect_http(&url, options).unwrap();
    match c.call_tool("echo", json!({"text": "x"})).unwrap_err() {
        Error::Transport { cause, .. } => {
            assert!(cause.contains("reading the response body"), "{cause}");
        }
        other => panic!("{other:?}"),
    }
    drop(c);
    // Unblock the accept loop if the client gave up before using every connection.
    for _ in 0..4 {
        let _ = std::net::TcpStream::connect(
            url.trim_start_matches("http://").trim_end_matches("/mcp"),
        );
    }
    server.join().unwrap();
}

pub fn http_bad_inputs_are_typed_errors<C: Api>() {
    assert!(matches!(
        C::connect_http("ftp://x/", ClientOptions::default()),
        Err(Error::InvalidUrl { .. })
    ));
    let srv = server(EraMode::Dual);
    let mut c = C::connect_http(&srv.url(), ClientOptions::default()).unwrap();
    assert!(matches!(
        c.call_tool("echo", json!([1])),
        Err(Error::InvalidArguments(_))
    ));
    assert!(srv.server().requests().is_empty());
}

pub fn http_subscription_the_server_lacks_ends_with_its_refusal_instead_of_hanging<C: Api>() {
    // The reference server has no subscriptions/listen (404 with `-32601`): the subscription
    // ends, with the server's error as the reason, within the bounded wait.
    let srv = server(EraMode::Dual);
    let mut c = C::connect_http(&srv.url(), ClientOptions::default()).unwrap();
    let sub = c
        .subscribe(SubscriptionFilter {
            tools_list_changed: true,
            ..SubscriptionFilter::default()
        })
        .unwrap();
    let event = c.next_subscription_event(Duration::from_secs(10)).unwrap();
    assert!(
        matches!(
            event,
            Some(SubscriptionEvent::Ended {
                sub: s,
                reason: SubscriptionEndReason::Rejected(ref e),
            }) if s == sub && e.code == -32601
        ),
        "{event:?}"
    );
    assert_eq!(rpc_count(&srv, "subscriptions/listen"), 1);
}

// ---------------------------------------------------------------------------------------------
// stdio

pub fn stdio_modern_server_is_probed_and_serves_calls<C: Api>() {
    let mut c = stdio::<C>("modern", ClientOptions::default());
    let seen = recorder(&mut c, None);
    let tools = c.list_tools(None).unwrap();
    assert!(tool_names(&tools).contains(&"echo".to_owned()));
    assert_eq!(
        text_of(&c.call_tool("echo", json!({"text": "pipe"})).unwrap()),
        "pipe"
    );
    c.call_tool("progress", json!({"steps": 2, "interval_ms": 5}))
        .unwrap();
    assert_eq!(c.era().unwrap().era, Era::Modern);
    assert_eq!(seen.lock().unwrap().progress.len(), 2);
}

/// Request lines longer than a pipe holds (64 KiB on Linux) and short ones right after them
/// reach the server whole and in order (the smol client writes what the pipe takes at once
/// and the rest while it waits); their echoes come back in many reads of stdout.
pub fn stdio_long_request_lines_arrive_whole_and_in_order<C: Api>() {
    let mut c = stdio::<C>("modern", ClientOptions::default());
    for (i, len) in [300_000, 10, 70_000, 5].into_iter().enumerate() {
        let text: String = (0..len)
            .map(|j| char::from(b'a' + ((i + j) % 26) as u8))
            .collect();
        let answer = c.call_tool("echo", json!({ "text": text })).unwrap();
        assert_eq!(text_of(&answer), text, "call {i}");
    }
}

pub fn stdio_legacy_server_falls_back_to_initialize<C: Api>() {
    let mut c = stdio::<C>("legacy", ClientOptions::default());
    let seen = recorder(&mut c, None);
    assert_eq!(
        text_of(&c.call_tool("echo", json!({"text": "old"})).unwrap()),
        "old"
    );
    assert_eq!(c.ping().unwrap(), json!({}));
    assert_eq!(c.era().unwrap().era, Era::Legacy);
    assert!(seen.lock().unwrap().events.iter().any(|e| matches!(
        e,
        Event::EraDetected {
            era: Era::Legacy,
            evidence: EraEvidence::ProbeError(_),
            ..
        }
    )));
}

pub fn stdio_mrtr_elicitation_round_trip<C: Api>() {
    let options = ClientOptions::default()
        .with_capabilities(ClientCapabilities::none().with_elicitation_form());
    let mut c = stdio::<C>("dual", options);
    recorder(&mut c, Some(json!({"name": "Grace"})));
    assert_eq!(
        text_of(&c.call_tool("ask", json!({})).unwrap()),
        "Hello, Grace!"
    );
}

pub fn stdio_slow_call_times_out_and_the_client_stays_usable<C: Api>() {
    let mut c = stdio::<C>("modern", ClientOptions::default());
    let e = op_error(
        c.call_tool_with("slow", json!({"ms": 20_000}), short_call())
            .unwrap_err(),
    );
    assert!(
        matches!(e, OpError::Transport(TransportError::TimedOut { .. })),
        "{e:?}"
    );
    assert_eq!(
        text_of(&c.call_tool("echo", json!({"text": "y"})).unwrap()),
        "y"
    );
}

pub fn stdio_cancel_from_another_thread_ends_the_call_and_the_client_stays_usable<C: Api>() {
    let mut c = stdio::<C>("modern", ClientOptions::default());
    c.discover().unwrap();
    let (stop, t) = keep_cancelling(&c);
    let e = c.call_tool("slow", json!({"ms": 20_000})).unwrap_err();
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    t.join().unwrap();
    assert!(matches!(e, Error::Cancelled), "{e:?}");
    assert_eq!(
        text_of(&c.call_tool("echo", json!({"text": "w"})).unwrap()),
        "w"
    );
}

/// A server that never reads its stdin: the request (1 MiB, far over a pipe's buffer) cannot be
/// written whole, and the call still ends at its timeout instead of hanging on the write.
pub fn stdio_server_that_never_reads_its_stdin_does_not_stop_the_timeout<C: Api>() {
    let options = ClientOptions::default()
        .with_protocol(ProtocolChoice::Modern)
        .with_request_timeout(Duration::from_millis(300));
    let mut c = C::connect_stdio("sleep", &["30"], options).unwrap();
    let started = Instant::now();
    let e = op_error(
        c.call_tool("echo", json!({"text": "x".repeat(1 << 20)}))
            .unwrap_err(),
    );
    assert!(
        matches!(e, OpError::Transport(TransportError::TimedOut { .. })),
        "{e:?}"
    );
    // Bounded, not timed: a write that blocked would wait for the child's 30 s.
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    c.close();
}

/// The same server, and a cancel from another thread: the write waiting for room in the pipe
/// does not hold it up either.
pub fn stdio_server_that_never_reads_its_stdin_does_not_stop_a_cancel<C: Api>() {
    let options = ClientOptions::default().with_protocol(ProtocolChoice::Modern);
    let mut c = C::connect_stdio("sleep", &["30"], options).unwrap();
    let (stop, t) = keep_cancelling(&c);
    let e = c
        .call_tool("echo", json!({"text": "x".repeat(1 << 20)}))
        .unwrap_err();
    stop.store(true, Ordering::SeqCst);
    t.join().unwrap();
    assert!(matches!(e, Error::Cancelled), "{e:?}");
    c.close();
}

pub fn stdio_crashed_child_is_reported_with_its_exit_status_and_stderr_tail<C: Api>() {
    let mut c = C::connect_stdio(
        "sh",
        &["-c", "echo 'config missing: FOO' >&2; exit 3"],
        ClientOptions::default(),
    )
    .unwrap();
    match c.discover().unwrap_err() {
        Error::ServerExited {
            status,
            stderr_tail,
            ..
        } => {
            assert_eq!(status, "exit status: 3");
            assert_eq!(stderr_tail, vec!["config missing: FOO".to_owned()]);
        }
        other => panic!("{other:?}"),
    }
    // Later calls fail the same way, at once.
    assert!(matches!(
        c.list_tools(None),
        Err(Error::ServerExited { .. })
    ));
}

/// Dropping the client ends its server, even one that ignores the end of its stdin (it would
/// run for ten minutes): the child is gone, not left running or as a zombie.
pub fn stdio_child_is_stopped_when_the_client_is_dropped<C: Api>() {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let pid_file =
        std::env::temp_dir().join(format!("mcpwire-child-{}-{nanos}", std::process::id()));
    let script = format!("echo $$ > '{}'; exec sleep 600", pid_file.display());
    let c = C::connect_stdio("sh", &["-c", &script], ClientOptions::default()).unwrap();
    let until = Instant::now() + Duration::from_secs(10);
    let pid = loop {
        match std::fs::read_to_string(&pid_file) {
            Ok(text) if text.ends_with('\n') => break text.trim().to_owned(),
            _ if Instant::now() >= until => panic!("the child never started"),
            _ => std::thread::sleep(Duration::from_millis(10)),
        }
    };
    let _ = std::fs::remove_file(&pid_file);
    let stat = format!("/proc/{pid}/stat");
    assert!(
        std::path::Path::new(&stat).exists(),
        "the child runs while the client lives"
    );
    drop(c);
    let until = Instant::now() + Duration::from_secs(10);
    // Absent once ended and reaped (a zombie still has its /proc entry).
    while let Ok(text) = std::fs::read_to_string(&stat) {
        assert!(Instant::now() < until, "still there after the drop: {text}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn stdio_missing_program_is_a_spawn_error<C: Api>() {
    let e = C::connect_stdio(
        "/nonexistent/mcpwire-no-such-server",
        &[],
        ClientOptions::default(),
    )
    .unwrap_err();
    assert!(matches!(e, Error::Spawn { .. }), "{e:?}");
}

pub fn pinned_era_event_reaches_a_host_set_after_connecting<C: Api>() {
    let srv = server(EraMode::Modern);
    let options = ClientOptions::default().with_protocol(ProtocolChoice::Modern);
    let mut c = C::connect_http(&srv.url(), options).unwrap();
    let seen = recorder(&mut c, None);
    c.discover().unwrap();
    assert!(seen.lock().unwrap().events.iter().any(|e| matches!(
        e,
        Event::EraDetected {
            era: Era::Modern,
            evidence: EraEvidence::Configured,
            ..
        }
    )));
}

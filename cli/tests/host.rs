//! The host of many servers (`mcpwire::host`) on both drivers: every scenario of
//! `host_scenarios` runs once with `host::blocking::Host` and once with `host::smol::Host`,
//! against real servers on 127.0.0.1 (the reference server over HTTP in-process and on stdio as
//! `mcpwire dev mcp-server --stdio`, a closed port, a listener that never answers).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod host_scenarios;

/// `both!(a, b)` makes `a::blocking` and `a::smol` tests running scenario `a` on each driver.
macro_rules! both {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[test]
            fn blocking() {
                crate::host_scenarios::$name::<mcpwire::host::blocking::Host>()
            }
            #[test]
            fn smol() {
                crate::host_scenarios::$name::<mcpwire::host::smol::Host>()
            }
        }
    )*};
}

both!(
    a_dead_and_a_slow_server_hold_up_no_other,
    connect_all_reports_each_server_and_times_out_a_hung_one,
    calls_are_routed_by_server_and_same_named_tools_kept_apart,
    disconnect_and_connect_again_while_running,
    list_changed_is_reported_per_server_and_the_cache_follows,
    oauth_grants_are_kept_per_server,
    stdio_servers_that_cannot_run_are_reported_with_their_id,
    secrets_of_specs_never_show,
    a_lost_server_reconnects_by_itself_after_its_backoff,
    a_lost_http_server_is_failed_and_reconnects_when_it_is_back,
);

/// What only the blocking host offers: a call started without waiting
/// ([`mcpwire::host::blocking::Host::start_call_tool`]), waited for on another thread, and
/// cancelled before or after it is sent.
mod blocking_only {
    use std::collections::BTreeMap;
    use std::time::{Duration, Instant};

    use mcpwire::host::blocking::Host;
    use mcpwire::host::{HostOptions, ServerId, ServerSpec, TransportSpec, Trust};
    use mcpwire::mcp::{ClientOptions, Error, OpOptions};
    use mcpwire_dev::mcp_server::{self, McpServer};
    use serde_json::json;

    #[test]
    fn a_started_call_is_waited_for_elsewhere_and_cancelled_before_or_after_it_is_sent() {
        let srv = McpServer::start_http(mcp_server::Config::default(), "127.0.0.1:0").unwrap();
        let host = Host::new(
            HostOptions::default().with_client(ClientOptions::default().with_max_in_flight(1)),
        );
        let id = ServerId::new("up").unwrap();
        let spec = ServerSpec {
            id: id.clone(),
            transport: TransportSpec::Http {
                url: srv.url(),
                headers: BTreeMap::new(),
            },
            oauth: None,
            trust: Trust::Trusted,
            disabled: false,
        };
        let report = host.connect_all(vec![spec]);
        assert!(report.iter().all(|(_, r)| r.is_ok()), "{report:?}");
        let stats = || srv.server().stats();

        // Sent at once (the one place was free), answered to a thread that waits for it.
        let echo = host
            .start_call_tool(&id, "echo", json!({"text": "one"}), OpOptions::default())
            .unwrap();
        assert_eq!(echo.server(), &id);
        let answer = std::thread::spawn(move || echo.wait())
            .join()
            .unwrap()
            .unwrap();
        assert_eq!(answer.text(), "one");

        // The place taken by a slow call: the next is kept, not sent, and cancelled so.
        let slow = host
            .start_call_tool(&id, "slow", json!({"ms": 30_000}), OpOptions::default())
            .unwrap();
        let kept = host
            .start_call_tool(&id, "echo", json!({"text": "two"}), OpOptions::default())
            .unwrap();
        kept.canceller().cancel();
        let outcome = kept.wait();
        let cancelled = outcome
            .as_ref()
            .err()
            .and_then(|e| e.client_error())
            .is_some_and(|e| matches!(e, Error::Cancelled));
        assert!(cancelled, "the kept call ended with {outcome:?}");
        assert_eq!(stats().tool_calls.get("echo"), Some(&1), "{:?}", stats());

        // The slow call, cancelled from another thread while one waits for it: the server
        // is told and stops it.
        let until = Instant::now() + Duration::from_secs(10);
        while !stats().tool_calls.contains_key("slow") && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
        let canceller = slow.canceller();
        let waiting = std::thread::spawn(move || slow.wait());
        std::thread::sleep(Duration::from_millis(50));
        canceller.cancel();
        let outcome = waiting.join().unwrap();
        assert!(
            matches!(
                outcome.as_ref().map_err(|e| e.client_error()),
                Err(Some(Error::Cancelled))
            ),
            "the slow call ended with {outcome:?}"
        );
        while stats().cancelled == 0 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(stats().cancelled, 1, "{:?}", stats());

        // A call that could not start waits for its place in `wait`, then runs.
        let slow = host
            .start_call_tool(&id, "slow", json!({"ms": 200}), OpOptions::default())
            .unwrap();
        let later = host
            .start_call_tool(&id, "echo", json!({"text": "three"}), OpOptions::default())
            .unwrap();
        let waiting = std::thread::spawn(move || later.wait());
        assert!(slow.wait().unwrap().structured_content.is_some());
        assert_eq!(waiting.join().unwrap().unwrap().text(), "three");
        host.close();
    }
}

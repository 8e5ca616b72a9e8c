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

//! The blocking MCP client driver (`mcp_client::blocking::McpClient`) against the reference
//! server on 127.0.0.1: every scenario of `mcp_client_scenarios` (HTTP and stdio, modern and
//! legacy fallback, MRTR, progress, timeouts, cancellation, caching, a crashed child).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod mcp_client_scenarios;

// The blocking client, as the scenarios call it.
impl_api!(
    Blocking,
    mcpwire::mcp::blocking,
    connect_stdio,
    |x| x,
    |p| p.wait()
);

scenario_tests!(Blocking);

/// The blocking client with a thread writing the child's stdin and one reading its stdout (the
/// path of platforms without `poll(2)`), through every stdio scenario.
mod pipe_threads {
    crate::impl_api!(
        PipeThreads,
        mcpwire::mcp::blocking,
        connect_stdio_with_pipe_threads,
        |x| x,
        |p| p.wait()
    );

    crate::scenario_tests!(@each PipeThreads;
        stdio_modern_server_is_probed_and_serves_calls,
        stdio_long_request_lines_arrive_whole_and_in_order,
        stdio_legacy_server_falls_back_to_initialize,
        stdio_mrtr_elicitation_round_trip,
        stdio_slow_call_times_out_and_the_client_stays_usable,
        stdio_cancel_from_another_thread_ends_the_call_and_the_client_stays_usable,
        stdio_server_that_never_reads_its_stdin_does_not_stop_the_timeout,
        stdio_crashed_child_is_reported_with_its_exit_status_and_stderr_tail,
        stdio_missing_program_is_a_spawn_error,
        stdio_child_is_stopped_when_the_client_is_dropped,
    );
}

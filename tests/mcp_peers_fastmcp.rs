//! The MCP client (both drivers: `mcp_client::blocking` and `mcp_client::smol`) against a real
//! third-party server framework, directly (no tunnel): FastMCP (PyPI `fastmcp==4.1.6`, on the
//! Python SDK `mcp==2.3.0`), `tests/peers/fastmcp_peer.py`, over Streamable HTTP on 127.0.0.1
//! (the 2026-07-28 era and the legacy one on the same endpoint) and as a stdio child.
//!
//! What FastMCP 4.1.6 does not do, and so what is not run here: it does not serve
//! `subscriptions/listen` (a 2026-07-28 subscription is refused with `-32601`; the list change
//! comes on the stream of the call that made it, and legacy subscriptions get it).
//!
//! The Python interpreter comes from `MCPWIRE_FASTMCP_PYTHON` (`.ci/run` installs fastmcp into
//! `.venv-peers` beside `mcp` and sets it), else from `<repo>/.venv-peers/bin/python`. Without
//! either the tests fail and say how to set it up:
//!
//! ```sh
//! python3 -m venv .venv-peers && .venv-peers/bin/pip install mcp==2.3.0 fastmcp==4.1.6
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;
#[macro_use]
#[path = "support/mcp_scenarios.rs"]
mod scenarios;

use std::path::PathBuf;
use std::process::Command;

use scenarios::Peer;

/// The pinned version of FastMCP.
const FASTMCP_VERSION: &str = "4.1.6";
/// The variable naming the Python interpreter that has `fastmcp` installed.
const PYTHON_ENV: &str = "MCPWIRE_FASTMCP_PYTHON";

/// `tests/peers/fastmcp_peer.py` on FastMCP.
const PEER: Peer = Peer {
    name: "the FastMCP server (fastmcp==4.1.6)",
    http: |port| {
        let mut c = Command::new(python());
        c.args([script(), "http".to_owned(), port.to_string()]);
        c
    },
    stdio: || {
        (
            python().display().to_string(),
            vec![script(), "stdio".to_owned()],
        )
    },
};

peer_tests!(
    crate::PEER;
    http_discover_detects_the_modern_era_and_serves_list_call_read_get,
    stdio_probe_detects_the_modern_era_and_serves_list_call_read_get,
    http_legacy_era_on_the_same_endpoint_is_served_through_initialize,
    stdio_legacy_era_is_served_through_initialize,
    http_tool_with_x_mcp_header_is_accepted_with_its_mcp_param_header,
    http_mrtr_elicitation_accepted_and_declined,
    stdio_mrtr_elicitation_accepted_and_declined,
    http_legacy_elicitation_request_is_answered_through_the_host,
    stdio_legacy_elicitation_request_is_answered_through_the_host,
    http_missing_client_capability_is_declared_after_32021_or_named_when_the_host_lacks_it,
    stdio_missing_client_capability_is_declared_after_32021_or_named_when_the_host_lacks_it,
    http_progress_reaches_the_host_before_the_result,
    stdio_progress_reaches_the_host_before_the_result,
    http_legacy_progress_reaches_the_host_before_the_result,
    stdio_legacy_progress_reaches_the_host_before_the_result,
    http_subscription_the_server_does_not_serve_ends_with_its_rejection,
    stdio_subscription_the_server_does_not_serve_ends_with_its_rejection,
    http_legacy_subscription_receives_tools_list_changed,
    stdio_legacy_subscription_receives_tools_list_changed,
    http_tools_list_within_its_ttl_sends_nothing,
    stdio_tools_list_within_its_ttl_sends_nothing,
    http_tools_list_is_refetched_after_list_changed,
    stdio_tools_list_is_refetched_after_list_changed,
    http_private_resource_is_cached_within_the_client_and_not_shared,
    stdio_private_resource_is_cached_within_the_client,
    http_unsupported_newer_version_is_recovered_from_32022,
    stdio_newer_version_is_negotiated_down_to_the_peers,
    http_no_common_version_fails_naming_both_lists,
    http_slow_call_times_out_and_the_client_stays_usable,
    stdio_slow_call_times_out_and_the_client_stays_usable,
    http_legacy_slow_call_times_out_and_the_client_stays_usable,
    stdio_legacy_slow_call_times_out_and_the_client_stays_usable,
    http_cancel_from_another_thread_ends_the_call,
    stdio_cancel_from_another_thread_ends_the_call,
    http_legacy_cancel_from_another_thread_ends_the_call,
    stdio_legacy_cancel_from_another_thread_ends_the_call,
);

// ---------------------------------------------------------------------------------------------
// The peer

/// The interpreter with the pinned `fastmcp`, or a failure that says how to get one.
fn python() -> PathBuf {
    let setup = format!(
        "the FastMCP peer is not set up. From the repository root run\n    \
         python3 -m venv .venv-peers && .venv-peers/bin/pip install mcp==2.3.0 \
         fastmcp=={FASTMCP_VERSION}\n\
         (or set {PYTHON_ENV} to a python that has fastmcp=={FASTMCP_VERSION}); .ci/run does \
         this itself"
    );
    support::pinned_python(PYTHON_ENV, "fastmcp", FASTMCP_VERSION, &setup)
}

fn script() -> String {
    support::peer_script("fastmcp_peer.py")
}

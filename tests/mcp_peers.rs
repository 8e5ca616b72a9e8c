//! The MCP client (both drivers: `mcp_client::blocking` and `mcp_client::smol`) against a real
//! third-party server, directly (no tunnel): the Python MCP SDK (PyPI `mcp==2.3.0`,
//! `tests/peers/py_mcp_client_peer.py`) over Streamable HTTP on 127.0.0.1 (the 2026-07-28 era
//! and the legacy one on the same endpoint) and as a stdio child.
//!
//! The Python interpreter comes from `MCPWIRE_PY_PEER_PYTHON` (`.ci/run` creates
//! `.venv-peers` and sets it), else from `<repo>/.venv-peers/bin/python`. Without either the
//! tests fail and say how to set it up:
//!
//! ```sh
//! python3 -m venv .venv-peers && .venv-peers/bin/pip install mcp==2.3.0
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;
#[macro_use]
#[path = "support/mcp_scenarios.rs"]
mod scenarios;

use std::path::PathBuf;
use std::process::Command;

use scenarios::Peer;

/// The pinned version of the Python SDK.
const MCP_VERSION: &str = "2.3.0";
/// The variable naming the Python interpreter that has `mcp` installed.
const PYTHON_ENV: &str = "MCPWIRE_PY_PEER_PYTHON";

/// `tests/peers/py_mcp_client_peer.py` on the Python SDK.
const PEER: Peer = Peer {
    name: "the Python SDK server (mcp==2.3.0)",
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
    http_header_mismatch_32020_is_recovered_by_listing_tools_and_retrying_once,
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
    http_subscription_receives_tools_list_changed,
    stdio_subscription_receives_tools_list_changed,
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

/// The interpreter with the pinned `mcp`, or a failure that says how to get one.
fn python() -> PathBuf {
    let setup = format!(
        "the Python MCP SDK peer is not set up. From the repository root run\n    \
         python3 -m venv .venv-peers && .venv-peers/bin/pip install mcp=={MCP_VERSION}\n\
         (or set {PYTHON_ENV} to a python that has mcp=={MCP_VERSION}); .ci/run does this itself"
    );
    support::pinned_python(PYTHON_ENV, "mcp", MCP_VERSION, &setup)
}

fn script() -> String {
    support::peer_script("py_mcp_client_peer.py")
}

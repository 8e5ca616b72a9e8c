//! The MCP client (both drivers: `mcp_client::blocking` and `mcp_client::smol`) against the
//! TypeScript SDK v2 server (npm `@modelcontextprotocol/server@2.4.0`, served over Node's http
//! module by `@modelcontextprotocol/node@2.1.2`), directly (no tunnel):
//! `tests/peers/node/ts_peer.mjs` over Streamable HTTP on 127.0.0.1 (2026-07-28 and the SDK's
//! stateless legacy fallback on the same endpoint) and as a stdio child (`serveStdio`).
//!
//! The packages come from `tests/peers/node/package-lock.json` (`npm ci`; `.ci/run` runs it).
//! Without them the tests fail and say how to install them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;
#[macro_use]
#[path = "support/mcp_scenarios.rs"]
mod scenarios;
#[path = "support/node_peers.rs"]
mod node_peers;

use scenarios::Peer;

/// The pinned packages (tests/peers/node/package.json).
const SERVER_VERSION: &str = "2.4.0";
const NODE_ADAPTER_VERSION: &str = "2.1.2";

fn installed() {
    node_peers::require("@modelcontextprotocol/server", SERVER_VERSION);
    node_peers::require("@modelcontextprotocol/node", NODE_ADAPTER_VERSION);
}

/// `tests/peers/node/ts_peer.mjs` on the TypeScript SDK.
const PEER: Peer = Peer {
    name: "the TypeScript SDK server (@modelcontextprotocol/server@2.4.0)",
    http: |port| {
        installed();
        node_peers::command(&[
            node_peers::file("ts_peer.mjs"),
            "http".to_owned(),
            port.to_string(),
        ])
    },
    stdio: || {
        installed();
        (
            node_peers::node(),
            vec![node_peers::file("ts_peer.mjs"), "stdio".to_owned()],
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
    http_progress_reaches_the_host_before_the_result,
    stdio_progress_reaches_the_host_before_the_result,
    http_subscription_receives_tools_list_changed,
    stdio_subscription_receives_tools_list_changed,
    http_tools_list_within_its_ttl_sends_nothing,
    stdio_tools_list_within_its_ttl_sends_nothing,
    http_unsupported_newer_version_is_recovered_from_32022,
    http_slow_call_times_out_and_the_client_stays_usable,
    stdio_slow_call_times_out_and_the_client_stays_usable,
    http_cancel_from_another_thread_ends_the_call,
    stdio_cancel_from_another_thread_ends_the_call,
    http_missing_client_capability_is_declared_after_32021_or_named_when_the_host_lacks_it,
    stdio_missing_client_capability_is_declared_after_32021_or_named_when_the_host_lacks_it,
    stdio_legacy_elicitation_request_is_answered_through_the_host,
    http_tools_list_is_refetched_after_list_changed,
    stdio_tools_list_is_refetched_after_list_changed,
    http_no_common_version_fails_naming_both_lists,
    stdio_legacy_progress_reaches_the_host_before_the_result,
    stdio_legacy_slow_call_times_out_and_the_client_stays_usable,
    stdio_legacy_cancel_from_another_thread_ends_the_call,
);

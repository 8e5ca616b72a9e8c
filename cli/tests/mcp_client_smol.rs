//! The smol MCP client driver (`mcp_client::smol::McpClient`) against the reference server on
//! 127.0.0.1: every scenario of `mcp_client_scenarios` (HTTP and stdio, modern and legacy
//! fallback, MRTR, progress, timeouts, cancellation, caching, a crashed child), each method's
//! future run with `smol::block_on`; then what only an async client can do.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod mcp_client_scenarios;

use mcpwire::mcp::smol::McpClient;

// The smol client, its futures run to completion one call at a time.
impl_api!(
    Smol,
    mcpwire::mcp::smol,
    connect_stdio,
    |x| smol::block_on(x),
    |p| smol::block_on(p)
);

scenario_tests!(Smol);

// ---------------------------------------------------------------------------------------------
// What only the async client can do.

use std::time::{Duration, Instant};

use mcp_client_scenarios::server;
use mcpwire::mcp::ClientOptions;
use mcpwire_dev::mcp_server::EraMode;
use serde_json::json;
use smol::future::FutureExt as _;

#[test]
fn one_thread_runs_two_clients_and_a_slow_call_does_not_hold_up_the_other() {
    let srv = server(EraMode::Dual);
    smol::block_on(async {
        let a = McpClient::connect_http(&srv.url(), ClientOptions::default()).unwrap();
        let b = McpClient::connect_http(&srv.url(), ClientOptions::default()).unwrap();
        // Whichever finishes first wins the race; the slow call would take 20s.
        let winner = async { ("slow", a.call_tool("slow", json!({"ms": 20_000})).await) }
            .or(async { ("echo", b.call_tool("echo", json!({"text": "b"})).await) })
            .await;
        assert_eq!(winner.0, "echo");
        assert_eq!(winner.1.unwrap().text(), "b");
        // `a`'s call was dropped mid-way; its next call cancels it and works.
        assert_eq!(
            a.call_tool("echo", json!({"text": "a"}))
                .await
                .unwrap()
                .text(),
            "a"
        );
    });
}

#[test]
fn a_dropped_operation_future_is_cancelled_and_its_exchange_closed() {
    let srv = server(EraMode::Dual);
    let c = McpClient::connect_http(&srv.url(), ClientOptions::default()).unwrap();
    smol::block_on(async {
        let dropped = async {
            let _ = c.call_tool("slow", json!({"ms": 20_000})).await;
            false
        }
        .or(async {
            // Long enough for the request to reach the server; not a timing claim.
            while !srv.server().stats().tool_calls.contains_key("slow") {
                smol::Timer::after(Duration::from_millis(10)).await;
            }
            true
        })
        .await;
        assert!(dropped);
        assert_eq!(
            c.call_tool("echo", json!({"text": "z"}))
                .await
                .unwrap()
                .text(),
            "z"
        );
    });
    let until = Instant::now() + Duration::from_secs(10);
    while srv.server().stats().cancelled == 0 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(srv.server().stats().cancelled, 1);
}

#[test]
fn the_client_and_its_operation_futures_can_move_to_another_thread() {
    fn is_send<T: Send>(_: &T) {}
    let srv = server(EraMode::Dual);
    let c = McpClient::connect_http(&srv.url(), ClientOptions::default()).unwrap();
    is_send(&c);
    let call = c.call_tool("echo", json!({"text": "sent"}));
    is_send(&call);
    let result = std::thread::scope(|s| s.spawn(|| smol::block_on(call)).join().unwrap());
    assert_eq!(result.unwrap().text(), "sent");
}

/// Calls over stdio whose futures are dropped at many points (while their long request line
/// waits to be written, while their long answer is being read) leave the client usable: the
/// next long call is answered whole.
#[test]
fn stdio_operation_futures_dropped_at_any_point_leave_the_client_usable() {
    let options = ClientOptions::default().with_request_timeout(Duration::from_secs(20));
    let c = McpClient::connect_stdio(
        env!("CARGO_BIN_EXE_mcpwire"),
        &["dev", "mcp-server", "--stdio", "--era", "modern"],
        options,
    )
    .unwrap();
    let text = "y".repeat(300_000);
    smol::block_on(async {
        c.discover().await.unwrap();
        let mut dropped = 0;
        for polls in [0, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89] {
            let was_dropped = async {
                let _ = c.call_tool("echo", json!({ "text": &text })).await;
                false
            }
            .or(async {
                for _ in 0..polls {
                    smol::future::yield_now().await;
                }
                true
            })
            .await;
            dropped += usize::from(was_dropped);
        }
        // With no yield at all the call cannot have been answered first.
        assert!(dropped > 0);
        let answer = c.call_tool("echo", json!({ "text": &text })).await.unwrap();
        assert_eq!(answer.text(), text);
        assert_eq!(
            c.call_tool("echo", json!({"text": "z"}))
                .await
                .unwrap()
                .text(),
            "z"
        );
    });
}

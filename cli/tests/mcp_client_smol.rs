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

/// Counts the wake-ups a task's waker gets from the thread that polls it while it polls.
struct CountingWaker {
    poller: std::thread::Thread,
    polling: std::sync::atomic::AtomicBool,
    during_poll: std::sync::atomic::AtomicUsize,
}

impl std::task::Wake for CountingWaker {
    fn wake(self: std::sync::Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &std::sync::Arc<Self>) {
        use std::sync::atomic::Ordering;
        if self.polling.load(Ordering::SeqCst) && std::thread::current().id() == self.poller.id() {
            self.during_poll.fetch_add(1, Ordering::SeqCst);
        }
        self.poller.unpark();
    }
}

/// Runs `future` on this thread with a [`CountingWaker`] (parking between polls, bounded by
/// `limit`); its output and the wake-ups it gave itself while polled.
fn run_counting<T>(future: impl std::future::Future<Output = T>, limit: Duration) -> (T, usize) {
    use std::sync::atomic::Ordering;
    use std::task::{Context, Poll};
    let counter = std::sync::Arc::new(CountingWaker {
        poller: std::thread::current(),
        polling: false.into(),
        during_poll: 0.into(),
    });
    let waker = std::task::Waker::from(std::sync::Arc::clone(&counter));
    let mut cx = Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    let deadline = Instant::now() + limit;
    loop {
        counter.polling.store(true, Ordering::SeqCst);
        let poll = future.as_mut().poll(&mut cx);
        counter.polling.store(false, Ordering::SeqCst);
        if let Poll::Ready(out) = poll {
            return (out, counter.during_poll.load(Ordering::SeqCst));
        }
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(!left.is_zero(), "the calls did not end within {limit:?}");
        std::thread::park_timeout(left);
    }
}

#[test]
fn a_call_that_reads_its_own_answer_does_not_wake_its_own_task_again() {
    // The future that waits for its answer itself feeds the answer to the core; were its waker
    // left in the operation's slot, ending the operation would wake its own task from inside
    // its poll, and the executor would poll every future once more for nothing before the
    // next call could sleep (one wasted round per call).
    let srv = server(EraMode::Dual);
    let c = McpClient::connect_http(&srv.url(), ClientOptions::default()).unwrap();
    smol::block_on(c.discover()).unwrap();
    let (texts, self_wakes) = run_counting(
        async {
            let mut texts = Vec::new();
            for i in 0..20 {
                let answer = c.call_tool("echo", json!({ "text": format!("t{i}") }));
                texts.push(answer.await.unwrap().text());
            }
            texts
        },
        Duration::from_secs(30),
    );
    let expected: Vec<String> = (0..20).map(|i| format!("t{i}")).collect();
    assert_eq!(texts, expected);
    assert_eq!(
        self_wakes, 0,
        "wake-ups of the task from inside its own poll"
    );
}

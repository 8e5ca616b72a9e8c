//! One client handle, many operations at once: both drivers, both transports, against the
//! reference server on 127.0.0.1 (in-process over Streamable HTTP; `mcpwire dev mcp-server
//! --stdio` as a child).
//!
//! - 16 `slow` calls started from 16 threads (blocking) or joined on one task (smol) on one
//!   handle overlap: the server's own count of `slow` calls in flight (each answer's
//!   `structuredContent.overlapping`) reaches 16. No wall-clock threshold is asserted.
//! - Cancelling one of several calls in flight ends that one with `Cancelled`; the others
//!   complete.
//! - Progress events reach the host while the call they belong to still runs.
//! - Handles cloned across threads (blocking) and tasks (smol) share one connection: the
//!   server sees one era detection.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcpwire::mcp::{CallToolResult, ClientOptions, Error, Host};
use mcpwire_core::mcp::{OpId, OpOptions, Operation};
use mcpwire_dev::mcp_server::{self, EraMode, McpServer, McpServerHandle};
use serde_json::{json, Map, Value};

/// Calls in flight at once.
const WIDTH: usize = 16;
/// How long each `slow` call sleeps: long enough for all of them to be sent before the first
/// ends (the assertion is on the server's count, not on time).
const SLOW_MS: u64 = 1500;

fn server() -> McpServerHandle {
    McpServer::start_http(
        mcp_server::Config {
            era: EraMode::Dual,
            ..mcp_server::Config::default()
        },
        "127.0.0.1:0",
    )
    .unwrap()
}

fn options() -> ClientOptions {
    ClientOptions {
        max_exchanges: WIDTH,
        ..ClientOptions::default()
    }
}

const STDIO_ARGS: &[&str] = &["dev", "mcp-server", "--stdio", "--era", "modern"];

fn slow_args() -> Value {
    json!({"ms": SLOW_MS})
}

/// The largest `overlapping` among `slow` answers.
fn peak(results: &[CallToolResult]) -> u64 {
    results
        .iter()
        .map(|r| {
            r.structured_content
                .as_ref()
                .and_then(|s| s["overlapping"].as_u64())
                .unwrap_or_else(|| panic!("no overlapping count in {r:?}"))
        })
        .max()
        .unwrap_or(0)
}

fn call_slow(name: &str) -> Operation {
    let mut arguments = Map::new();
    arguments.insert("ms".into(), json!(SLOW_MS));
    Operation::CallTool {
        name: name.to_owned(),
        arguments,
    }
}

/// Records progress notifications (op and progress) as they arrive.
struct ProgressTo(mpsc::Sender<(OpId, f64)>);

impl Host for ProgressTo {
    fn on_progress(&mut self, op: OpId, progress: f64, _total: Option<f64>, _m: Option<&str>) {
        let _ = self.0.send((op, progress));
    }
}

mod blocking {
    use super::*;
    use mcpwire::mcp::blocking::McpClient;

    fn overlap(client: &McpClient) {
        // The era is known first, so that every call goes out at once.
        client.discover().unwrap();
        let threads: Vec<_> = (0..WIDTH)
            .map(|_| {
                let c = client.clone();
                std::thread::spawn(move || c.call_tool("slow", slow_args()).unwrap())
            })
            .collect();
        let results: Vec<CallToolResult> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        assert_eq!(peak(&results), WIDTH as u64, "{results:?}");
    }

    fn cancel_one(client: &McpClient) {
        client.discover().unwrap();
        let pending: Vec<_> = (0..4)
            .map(|_| {
                client
                    .start(call_slow("slow"), OpOptions::default())
                    .unwrap()
            })
            .collect();
        let mut pending = pending.into_iter();
        let victim = pending.next().unwrap();
        let canceller = victim.canceller();
        std::thread::spawn(move || canceller.cancel())
            .join()
            .unwrap();
        assert!(matches!(victim.wait(), Err(Error::Cancelled)));
        for p in pending {
            let r = p.wait().unwrap();
            assert_eq!(r["content"][0]["text"], format!("slept {SLOW_MS} ms"));
        }
        // Still usable.
        let r = client.call_tool("echo", json!({"text": "after"})).unwrap();
        assert_eq!(r.text(), "after");
    }

    fn progress_during_the_call(client: &McpClient) {
        client.discover().unwrap();
        let (tx, rx) = mpsc::channel();
        client.set_host(Box::new(ProgressTo(tx)));
        let o = OpOptions {
            progress: true,
            ..OpOptions::default()
        };
        let mut arguments = Map::new();
        arguments.insert("steps".into(), json!(5));
        arguments.insert("interval_ms".into(), json!(300));
        let call = Operation::CallTool {
            name: "progress".into(),
            arguments,
        };
        let pending = client.start(call, o).unwrap();
        let (op, _) = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(op, pending.id());
        // The first event came while the call still runs: it has four steps to go.
        let pending = match pending.wait_timeout(Duration::ZERO) {
            Err(pending) => pending,
            Ok(outcome) => panic!("the call ended before its progress: {outcome:?}"),
        };
        pending.wait().unwrap();
        assert!(rx.try_iter().count() >= 4);
    }

    #[test]
    fn http_16_calls_on_one_handle_overlap() {
        let srv = server();
        overlap(&McpClient::connect_http(&srv.url(), options()).unwrap());
        // One detection for every clone.
        assert_eq!(srv.server().stats().tool_calls.get("slow"), Some(&16));
    }

    #[test]
    fn stdio_16_calls_on_one_handle_overlap() {
        let c =
            McpClient::connect_stdio(env!("CARGO_BIN_EXE_mcpwire"), STDIO_ARGS, options()).unwrap();
        overlap(&c);
    }

    #[test]
    fn http_cancelling_one_call_leaves_the_others() {
        let srv = server();
        cancel_one(&McpClient::connect_http(&srv.url(), options()).unwrap());
    }

    #[test]
    fn stdio_cancelling_one_call_leaves_the_others() {
        let c =
            McpClient::connect_stdio(env!("CARGO_BIN_EXE_mcpwire"), STDIO_ARGS, options()).unwrap();
        cancel_one(&c);
    }

    #[test]
    fn http_progress_arrives_while_the_call_runs() {
        let srv = server();
        progress_during_the_call(&McpClient::connect_http(&srv.url(), options()).unwrap());
    }

    #[test]
    fn stdio_progress_arrives_while_the_call_runs() {
        let c =
            McpClient::connect_stdio(env!("CARGO_BIN_EXE_mcpwire"), STDIO_ARGS, options()).unwrap();
        progress_during_the_call(&c);
    }

    #[test]
    fn in_flight_limit_makes_the_rest_wait_their_turn() {
        let srv = server();
        let c = McpClient::connect_http(&srv.url(), options().with_max_in_flight(2)).unwrap();
        c.discover().unwrap();
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let c = c.clone();
                std::thread::spawn(move || c.call_tool("slow", slow_args()).unwrap())
            })
            .collect();
        let results: Vec<CallToolResult> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        assert_eq!(peak(&results), 2, "{results:?}");
    }

    #[test]
    fn try_start_sends_when_a_place_is_free_and_hands_the_operation_back_when_none_is() {
        use mcpwire::mcp::blocking::TryStart;
        let srv = server();
        let c = McpClient::connect_http(&srv.url(), options().with_max_in_flight(1)).unwrap();
        c.discover().unwrap();
        let slow = Operation::CallTool {
            name: "slow".to_owned(),
            arguments: json!({"ms": 30_000}).as_object().unwrap().clone(),
        };
        let TryStart::Started(first) = c.try_start(slow, OpOptions::default()).unwrap() else {
            panic!("nothing was in flight, yet the first call did not start");
        };
        let echo = Operation::CallTool {
            name: "echo".to_owned(),
            arguments: json!({"text": "second"}).as_object().unwrap().clone(),
        };
        // The one place is taken: the operation comes back as it was, and nothing is sent.
        let echo = match c.try_start(echo.clone(), OpOptions::default()).unwrap() {
            TryStart::Full(back) => {
                assert_eq!(back, echo);
                back
            }
            TryStart::Started(p) => panic!("started {:?} past the limit of 1", p.id()),
        };
        assert_eq!(srv.server().stats().tool_calls.get("echo"), None);
        assert!(matches!(first.cancel(), Err(Error::Cancelled)));
        // The place is free again: the operation starts, and its answer comes to whoever waits.
        let TryStart::Started(second) = c.try_start(echo, OpOptions::default()).unwrap() else {
            panic!("the place freed by the cancelled call was not reused");
        };
        let answer = std::thread::spawn(move || second.wait())
            .join()
            .unwrap()
            .unwrap();
        assert_eq!(answer["content"][0]["text"], "second", "{answer}");
        c.close();
    }

    fn then_hands_outcomes_over_with_nobody_waiting(c: &McpClient) {
        c.discover().unwrap();
        let call = |name: &str, args: Value| Operation::CallTool {
            name: name.to_owned(),
            arguments: args.as_object().unwrap().clone(),
        };
        let (tx, rx) = mpsc::channel();
        let me = std::thread::current().id();
        for i in 0..3 {
            let tx = tx.clone();
            c.start(
                call("echo", json!({"text": format!("t{i}")})),
                OpOptions::default(),
            )
            .unwrap()
            .then(move |outcome| {
                tx.send((outcome, std::thread::current().id())).unwrap();
            });
        }
        let mut texts = Vec::new();
        for _ in 0..3 {
            let (outcome, on) = rx.recv_timeout(Duration::from_secs(10)).unwrap();
            assert_ne!(on, me, "handed over on the thread that read the answer");
            texts.push(
                outcome.unwrap()["content"][0]["text"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
            );
        }
        texts.sort();
        assert_eq!(texts, ["t0", "t1", "t2"]);
        // A slow call cancelled while nobody waits: its `then` hears it.
        let slow = c
            .start(call("slow", json!({"ms": 30_000})), OpOptions::default())
            .unwrap();
        let canceller = slow.canceller();
        let tx2 = tx.clone();
        slow.then(move |outcome| tx2.send((outcome, std::thread::current().id())).unwrap());
        canceller.cancel();
        let (outcome, _) = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert!(matches!(outcome, Err(Error::Cancelled)), "{outcome:?}");
        // The client closing ends a call nobody waits for, too.
        c.start(call("slow", json!({"ms": 30_000})), OpOptions::default())
            .unwrap()
            .then(move |outcome| tx.send((outcome, std::thread::current().id())).unwrap());
        c.clone().close();
        let (outcome, _) = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert!(outcome.is_err(), "{outcome:?}");
    }

    #[test]
    fn http_then_hands_outcomes_over_with_nobody_waiting() {
        let srv = server();
        then_hands_outcomes_over_with_nobody_waiting(
            &McpClient::connect_http(&srv.url(), options()).unwrap(),
        );
    }

    #[test]
    fn stdio_then_hands_outcomes_over_with_nobody_waiting() {
        then_hands_outcomes_over_with_nobody_waiting(
            &McpClient::connect_stdio(env!("CARGO_BIN_EXE_mcpwire"), STDIO_ARGS, options())
                .unwrap(),
        );
    }

    #[test]
    fn closing_one_handle_closes_the_client_for_all() {
        let srv = server();
        let c = McpClient::connect_http(&srv.url(), options()).unwrap();
        let other = c.clone();
        c.close();
        assert!(matches!(other.discover(), Err(Error::Closed)));
    }

    #[test]
    fn the_client_is_send_and_sync() {
        fn check<T: Send + Sync + Clone + 'static>() {}
        check::<McpClient>();
        check::<mcpwire::mcp::blocking::Canceller>();
        let _ = Arc::new(Mutex::new(()));
    }
}

mod smol_driver {
    use super::*;
    use mcpwire::mcp::smol::McpClient;
    use smol::future::FutureExt as _;

    fn overlap(client: McpClient) {
        smol::block_on(async {
            client.discover().await.unwrap();
            // One task, 16 futures on one handle.
            let calls = (0..WIDTH).map(|_| client.call_tool("slow", slow_args()));
            let results: Vec<CallToolResult> = join_all(calls)
                .await
                .into_iter()
                .map(Result::unwrap)
                .collect();
            assert_eq!(peak(&results), WIDTH as u64, "{results:?}");
            // And from other tasks, through clones.
            let tasks: Vec<_> = (0..WIDTH)
                .map(|_| {
                    let c = client.clone();
                    smol::spawn(async move { c.call_tool("slow", slow_args()).await.unwrap() })
                })
                .collect();
            let results = join_all(tasks).await;
            assert_eq!(peak(&results), WIDTH as u64, "{results:?}");
        });
    }

    /// Every future to completion, polled together (no extra dependency for `join_all`).
    async fn join_all<F: std::future::Future>(
        futures: impl IntoIterator<Item = F>,
    ) -> Vec<F::Output> {
        let mut futures: Vec<_> = futures.into_iter().map(Box::pin).collect();
        let mut outputs: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
        std::future::poll_fn(|cx| {
            let mut pending = false;
            for (f, out) in futures.iter_mut().zip(outputs.iter_mut()) {
                if out.is_none() {
                    match f.as_mut().poll(cx) {
                        std::task::Poll::Ready(v) => *out = Some(v),
                        std::task::Poll::Pending => pending = true,
                    }
                }
            }
            if pending {
                std::task::Poll::Pending
            } else {
                std::task::Poll::Ready(())
            }
        })
        .await;
        outputs.into_iter().map(Option::unwrap).collect()
    }

    fn cancel_one(client: McpClient) {
        smol::block_on(async {
            client.discover().await.unwrap();
            let mut pending = Vec::new();
            for _ in 0..4 {
                pending.push(
                    client
                        .start(call_slow("slow"), OpOptions::default())
                        .await
                        .unwrap(),
                );
            }
            let victim = pending.remove(0);
            let canceller = victim.canceller();
            std::thread::spawn(move || canceller.cancel())
                .join()
                .unwrap();
            assert!(matches!(victim.await, Err(Error::Cancelled)));
            for r in join_all(pending).await {
                assert_eq!(
                    r.unwrap()["content"][0]["text"],
                    format!("slept {SLOW_MS} ms")
                );
            }
            // Two calls in flight; the one that ends first wins and the other's future is
            // dropped, which cancels that call only.
            let slow = client.call_tool("slow", slow_args());
            let echo = client.call_tool("echo", json!({"text": "kept"}));
            let first = async { Some(echo.await) }
                .or(async {
                    let _ = slow.await;
                    None
                })
                .await;
            assert_eq!(first.unwrap().unwrap().text(), "kept");
            let r = client.call_tool("echo", json!({"text": "after"})).await;
            assert_eq!(r.unwrap().text(), "after");
        });
    }

    fn progress_during_the_call(client: McpClient) {
        smol::block_on(async {
            client.discover().await.unwrap();
            let (tx, rx) = mpsc::channel();
            client.set_host(Box::new(ProgressTo(tx)));
            let o = OpOptions {
                progress: true,
                ..OpOptions::default()
            };
            let mut arguments = Map::new();
            arguments.insert("steps".into(), json!(5));
            arguments.insert("interval_ms".into(), json!(300));
            let call = Operation::CallTool {
                name: "progress".into(),
                arguments,
            };
            let pending = client.start(call, o).await.unwrap();
            // Nobody polls `pending` meanwhile: the loop delivers on its own.
            let (op, _) = smol::unblock(move || {
                let first = rx.recv_timeout(Duration::from_secs(10)).unwrap();
                (first, rx)
            })
            .await
            .0;
            assert_eq!(op, pending.id());
            pending.await.unwrap();
        });
    }

    #[test]
    fn http_16_calls_on_one_handle_overlap() {
        let srv = server();
        overlap(McpClient::connect_http(&srv.url(), options()).unwrap());
    }

    #[test]
    fn stdio_16_calls_on_one_handle_overlap() {
        overlap(
            McpClient::connect_stdio(env!("CARGO_BIN_EXE_mcpwire"), STDIO_ARGS, options()).unwrap(),
        );
    }

    #[test]
    fn http_cancelling_one_call_leaves_the_others() {
        let srv = server();
        cancel_one(McpClient::connect_http(&srv.url(), options()).unwrap());
    }

    #[test]
    fn stdio_cancelling_one_call_leaves_the_others() {
        cancel_one(
            McpClient::connect_stdio(env!("CARGO_BIN_EXE_mcpwire"), STDIO_ARGS, options()).unwrap(),
        );
    }

    #[test]
    fn http_progress_arrives_while_the_call_runs() {
        let srv = server();
        progress_during_the_call(McpClient::connect_http(&srv.url(), options()).unwrap());
    }

    #[test]
    fn stdio_progress_arrives_while_the_call_runs() {
        progress_during_the_call(
            McpClient::connect_stdio(env!("CARGO_BIN_EXE_mcpwire"), STDIO_ARGS, options()).unwrap(),
        );
    }

    #[test]
    fn the_client_and_its_futures_are_send() {
        fn check<T: Send + Sync + Clone + 'static>() {}
        check::<McpClient>();
        fn send<T: Send>(_: &T) {}
        let srv = server();
        let c = McpClient::connect_http(&srv.url(), options()).unwrap();
        let f = c.call_tool("echo", json!({"text": "x"}));
        send(&f);
    }
}

//! What an embedder gets back, on both drivers: typed results, pages followed to the end, a
//! tool's own failure, and errors that keep what a person needs (the HTTP status, the server's
//! error object, who is to blame, whether a retry may help).
//!
//! The reference server (`mcpwire dev mcp-server`, in-process on 127.0.0.1) answers the error
//! cases; a small fake on 127.0.0.1 answers what the reference server has no tool for: a paged
//! `tools/list` and a tool that reports `isError`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use mcpwire::mcp::{Blame, ClientOptions, Error};
use mcpwire_dev::mcp_server::{self, McpServer, McpServerHandle, FAIL_CODE};
use serde_json::{json, Value};

fn reference() -> McpServerHandle {
    McpServer::start_http(mcp_server::Config::default(), "127.0.0.1:0").unwrap()
}

/// How the fake pages its `tools/list`.
#[derive(Clone, Copy)]
enum Paging {
    /// Three pages: `p2`, `p3`, then the end.
    Three,
    /// Every page names the same next cursor.
    Loop,
}

/// A Streamable HTTP server of the 2026-07-28 era that knows two methods; it counts the
/// `tools/list` requests. Stops with the test process.
struct Fake {
    url: String,
    lists: Arc<AtomicUsize>,
}

fn fake(paging: Paging) -> Fake {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let lists = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&lists);
    std::thread::spawn(move || {
        for conn in listener.incoming().take(64) {
            let Ok(conn) = conn else { return };
            let counter = Arc::clone(&counter);
            std::thread::spawn(move || serve(conn, paging, &counter));
        }
    });
    Fake { url, lists }
}

/// Answers the requests of one kept-alive connection.
fn serve(conn: TcpStream, paging: Paging, lists: &AtomicUsize) {
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut out = conn;
    for _ in 0..64 {
        let mut length = 0;
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().unwrap();
                }
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        let request: Value = serde_json::from_slice(&body).unwrap();
        let result = match request["method"].as_str() {
            Some("tools/list") => {
                lists.fetch_add(1, Ordering::SeqCst);
                let cursor = request["params"]["cursor"].as_str();
                let (tool, next) = match (paging, cursor) {
                    (Paging::Three, None) => ("one", Some("p2")),
                    (Paging::Three, Some("p2")) => ("two", Some("p3")),
                    (Paging::Three, _) => ("three", None),
                    (Paging::Loop, _) => ("again", Some("again")),
                };
                let mut r = json!({"tools": [{"name": tool, "inputSchema": {"type": "object"}}]});
                if let Some(next) = next {
                    r["nextCursor"] = json!(next);
                }
                r
            }
            Some("tools/call") => json!({
                "content": [{"type": "text", "text": "it broke"}],
                "isError": true
            }),
            _ => json!({}),
        };
        let answer = json!({"jsonrpc": "2.0", "id": request["id"], "result": result}).to_string();
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            answer.len()
        );
        if out.write_all(head.as_bytes()).is_err() || out.write_all(answer.as_bytes()).is_err() {
            return;
        }
    }
}

/// The checks, written once over a driver's calls made blocking.
macro_rules! checks {
    ($m:ident, |$x:ident| $wait:expr) => {
        mod $m {
            use super::*;
            use mcpwire::mcp::$m::McpClient;

            #[test]
            fn list_all_tools_follows_every_cursor_to_the_end() {
                let f = fake(Paging::Three);
                let c = McpClient::connect_http(&f.url, ClientOptions::default()).unwrap();
                let $x = c.list_all_tools();
                let all = $wait.unwrap();
                let names: Vec<&str> = all.tools.iter().map(|t| t.name.as_str()).collect();
                assert_eq!(names, ["one", "two", "three"]);
                assert_eq!(all.next_cursor, None);
                assert_eq!(f.lists.load(Ordering::SeqCst), 3);
                // One page is one page.
                let $x = c.list_tools(None);
                let page = $wait.unwrap();
                assert_eq!(page.next_cursor.as_deref(), Some("p2"));
            }

            #[test]
            fn list_all_stops_on_a_cursor_that_repeats() {
                let f = fake(Paging::Loop);
                let c = McpClient::connect_http(&f.url, ClientOptions::default()).unwrap();
                let $x = c.list_all_tools();
                let e = $wait.unwrap_err();
                assert!(
                    matches!(e, Error::Pages { method: "tools/list", pages: 2, .. }),
                    "{e:?}"
                );
                assert_eq!(e.blame(), Blame::Server);
                assert!(e.to_string().contains("cursor it had sent before"), "{e}");
            }

            #[test]
            fn a_tool_that_fails_is_a_result_and_into_result_makes_it_an_error() {
                let f = fake(Paging::Three);
                let c = McpClient::connect_http(&f.url, ClientOptions::default()).unwrap();
                let $x = c.call_tool("broken", json!({}));
                let r = $wait.unwrap();
                assert!(r.is_error);
                assert_eq!(r.text(), "it broke");
                let e: Error = r.into_result().unwrap_err().into();
                assert!(e.to_string().contains("it broke"), "{e}");
            }

            #[test]
            fn arguments_are_any_serialize() {
                #[derive(serde::Serialize)]
                struct Echo<'a> {
                    text: &'a str,
                }
                let srv = reference();
                let c = McpClient::connect_http(&srv.url(), ClientOptions::default()).unwrap();
                let $x = c.call_tool("echo", Echo { text: "typed" });
                let r = $wait.unwrap();
                assert_eq!(r.text(), "typed");
                assert_eq!(r.structured_content, Some(json!({"text": "typed"})));
                assert!(!r.is_error);
                // The raw JSON stays reachable.
                assert_eq!(r.raw()["content"][0]["text"], "typed");
            }

            #[test]
            fn a_503_with_a_body_keeps_its_status_and_may_be_retried() {
                let srv = reference();
                let c = McpClient::connect_http(&srv.url(), ClientOptions::default()).unwrap();
                let args = json!({"http_status": 503, "raw_body": "overloaded, come back later"});
                let $x = c.call_tool("fail", args);
                let e = $wait.unwrap_err();
                assert_eq!(e.http_status(), Some(503), "{e:?}");
                assert!(e.is_retryable());
                assert_eq!(e.blame(), Blame::Transport);
                assert!(e.to_string().contains("HTTP 503"), "{e}");
                assert!(e.server_error().is_none());
            }

            #[test]
            fn a_servers_error_object_is_reachable_as_sent() {
                let srv = reference();
                let c = McpClient::connect_http(&srv.url(), ClientOptions::default()).unwrap();
                let $x = c.call_tool("fail", json!({}));
                let e = $wait.unwrap_err();
                let object = e.server_error().expect("the server's error object");
                assert_eq!(object.code, FAIL_CODE);
                assert_eq!(object.data, Some(mcp_server::fail_data()));
                assert_eq!(e.http_status(), None);
                assert!(!e.is_retryable());
                assert_eq!(e.blame(), Blame::Server);
            }

            #[test]
            fn a_known_era_skips_detection() {
                let srv = reference();
                let first = McpClient::connect_http(&srv.url(), ClientOptions::default()).unwrap();
                let $x = first.discover();
                $wait.unwrap();
                let era = first.era().unwrap();
                let options = ClientOptions::default().with_known_era(era.clone());
                let again = McpClient::connect_http(&srv.url(), options).unwrap();
                // Known before any request.
                assert_eq!(again.era(), Some(era));
            }
        }
    };
}

checks!(blocking, |x| x);
checks!(smol, |x| ::smol::block_on(x));

//! The `slow` tool's `structuredContent.overlapping` is the server's own count of the `slow`
//! calls in flight beside each call: concurrent calls over HTTP and over stdio report it, and
//! `Stats::slow_peak` keeps the largest.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::mpsc;
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use mcpwire_core::mcp::headers::request_headers;
use mcpwire_core::mcp::meta::{build_request, ClientCapabilities, Implementation, RequestMeta};
use mcpwire_dev::mcp_server::{Config, McpServer};
use serde_json::{json, Value};

/// A `slow` call of `ms` as a 2026-07-28 request body.
fn slow_body(id: i64, ms: u64) -> String {
    let meta = RequestMeta::new("2026-07-28", ClientCapabilities::none())
        .with_client_info(Implementation::new("slow-overlap-test", "1"));
    build_request(
        &id.into(),
        "tools/call",
        json!({"name": "slow", "arguments": {"ms": ms}}),
        &meta,
    )
    .unwrap()
}

/// POSTs `body` over HTTP/1.0 (so the answer ends with the connection) and returns the JSON-RPC
/// response, from a JSON body or the SSE event carrying it.
fn post(addr: std::net::SocketAddr, body: &str) -> Value {
    let mut head = String::from("POST /mcp HTTP/1.0\r\nHost: localhost\r\n");
    for (name, value) in request_headers(body, None).unwrap().iter() {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body.as_bytes()).unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    let (status, body) = answer.split_once("\r\n\r\n").unwrap();
    assert!(
        status.starts_with("HTTP/1.") && status[9..].starts_with("200"),
        "{status}"
    );
    serde_json::from_str(body.trim()).unwrap_or_else(|_| {
        body.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .find(|m| m.get("result").is_some())
            .unwrap()
    })
}

/// `slow` answers later, from a thread of its own, so three calls overlap.
#[test]
fn three_concurrent_calls_over_http_each_report_three_overlapping() {
    let mut handle = McpServer::start_http(Config::default(), "127.0.0.1:0").unwrap();
    let addr = handle.local_addr();
    let start = Arc::new(Barrier::new(3));
    let calls: Vec<_> = (0..3)
        .map(|i| {
            let start = start.clone();
            std::thread::spawn(move || {
                start.wait();
                post(addr, &slow_body(i, 1500))
            })
        })
        .collect();
    for c in calls {
        let answer = c.join().unwrap();
        let result = &answer["result"];
        assert_eq!(result["content"][0]["text"], "slept 1500 ms");
        assert_eq!(
            result["structuredContent"],
            json!({"ms": 1500, "overlapping": 3})
        );
    }
    assert_eq!(handle.server().stats().slow_peak, 3);
    // A call alone afterwards saw only itself.
    let alone = post(addr, &slow_body(9, 1));
    assert_eq!(alone["result"]["structuredContent"]["overlapping"], 1);
    assert_eq!(handle.server().stats().slow_peak, 3);
    handle.stop();
}

/// Bytes fed to `serve_stdio` as its input, from a channel (ends when the sender is dropped).
struct Feed(mpsc::Receiver<Vec<u8>>, Vec<u8>);

impl Read for Feed {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.1.is_empty() {
            match self.0.recv() {
                Ok(bytes) => self.1 = bytes,
                Err(_) => return Ok(0),
            }
        }
        let n = buf.len().min(self.1.len());
        buf[..n].copy_from_slice(&self.1[..n]);
        self.1.drain(..n);
        Ok(n)
    }
}

/// What `serve_stdio` wrote.
#[derive(Clone, Default)]
struct Output(Arc<Mutex<Vec<u8>>>);

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Output {
    /// The JSON lines written so far, once there are `n` (or panics after 30 s).
    fn wait_lines(&self, n: usize) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let text = String::from_utf8(self.0.lock().unwrap().clone()).unwrap();
            let lines: Vec<Value> = text
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            if lines.len() >= n {
                return lines;
            }
            assert!(Instant::now() < deadline, "{} of {n} lines", lines.len());
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

#[test]
fn sixteen_calls_over_stdio_run_at_once() {
    let server = McpServer::new(Config::default());
    let (tx, rx) = mpsc::channel();
    let out = Output::default();
    let (server2, out2) = (server.clone(), out.clone());
    let serving = std::thread::spawn(move || {
        server2
            .serve_stdio(BufReader::new(Feed(rx, Vec::new())), out2)
            .unwrap();
    });
    for i in 0..16 {
        tx.send(format!("{}\n", slow_body(i, 1500)).into_bytes())
            .unwrap();
    }
    let lines = out.wait_lines(16);
    let mut ids: Vec<i64> = Vec::new();
    for line in &lines {
        assert_eq!(
            line["result"]["structuredContent"],
            json!({"ms": 1500, "overlapping": 16}),
            "{line}"
        );
        ids.push(line["id"].as_i64().unwrap());
    }
    ids.sort_unstable();
    assert_eq!(ids, (0..16).collect::<Vec<_>>());
    assert_eq!(server.stats().slow_peak, 16);
    drop(tx);
    serving.join().unwrap();
}

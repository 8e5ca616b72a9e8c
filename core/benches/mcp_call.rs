//! The core's CPU per `tools/call` round trip, with no I/O: what `mcp::Client` spends between
//! the host asking for a call and the host getting its result.
//!
//! - `stdio_tools_call`: a stdio client in the `2026-07-28` era (learned from a
//!   `server/discover` probe answered once before timing, as the real client does). Each
//!   iteration starts `tools/call echo {"text":"bench"}` with progress requested (as the
//!   drivers' `call_tool` does), takes the line written, feeds back the answer the dev server
//!   (`mcpwire dev mcp-server`) gives, with the same id, and drains outputs until the result.
//! - `http_tools_call`: the same call on Streamable HTTP (its `tools/list` prefetch answered
//!   once before timing): the POST comes out with its `Mcp-*` headers; the response head,
//!   the JSON body and its end are fed back.
//!
//! The clock is one `Instant` read before timing (nothing times out). Building the answer
//! line with the request's id is inside the timed loop (a `format!` of about 250 bytes).
//!
//! Run with `cargo bench -p mcpwire-core --bench mcp_call`.

// Bench setup works on fixed, known-good data; a failure there is a broken bench, not bad input.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::hint::black_box;
use std::time::{Duration, Instant, SystemTime};

use criterion::{criterion_group, criterion_main, Criterion};
use mcpwire_core::http::{Headers, ResponseHead};
use mcpwire_core::mcp::{
    Client, ClientConfig, Event, Implementation, JsonObject, OpId, OpOptions, Output, Transport,
};
use serde_json::Value;

/// The dev server's `server/discover` result (modern era).
const DISCOVER_RESULT: &str = r#"{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"mcpwire-dev","version":"0.1.0"}},"cacheScope":"public","capabilities":{"tools":{}},"instructions":"mcpwire's reference server: tools echo, slow, progress, fail, tenant, ask, headers.","resultType":"complete","supportedVersions":["2026-07-28"],"ttlMs":0}"#;

/// The dev server's `tools/list` result, cut to the echo tool.
const TOOLS_LIST_RESULT: &str = r#"{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"mcpwire-dev","version":"0.1.0"}},"cacheScope":"public","resultType":"complete","tools":[{"description":"Echoes its text argument.","inputSchema":{"properties":{"text":{"type":"string"}},"required":["text"],"type":"object"},"name":"echo"}],"ttlMs":0}"#;

/// The dev server's `tools/call echo {"text":"bench"}` result (modern era).
const ECHO_RESULT: &str = r#"{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"mcpwire-dev","version":"0.1.0"}},"content":[{"text":"bench","type":"text"}],"resultType":"complete","structuredContent":{"text":"bench"}}"#;

fn answer(id: &str, result: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{result}}}"#)
}

/// The id of a request text the core wrote (`{"jsonrpc":"2.0","id":N,...`), without parsing it.
fn id_of(request: &str) -> &str {
    let rest = &request[request.find("\"id\":").expect("an id") + 5..];
    &rest[..rest.find(',').expect("members after the id")]
}

fn arguments() -> JsonObject {
    let mut a = JsonObject::new();
    a.insert("text".to_owned(), Value::String("bench".to_owned()));
    a
}

fn options() -> OpOptions {
    OpOptions {
        progress: true,
        ..OpOptions::default()
    }
}

fn info() -> Implementation {
    Implementation::new("mcpwire-bench", "0.1.0")
}

/// Drains outputs; returns the last stdio line or HTTP body and whether `op`'s result came.
fn drain(client: &mut Client, op: OpId) -> (Option<Output>, bool) {
    let mut sent = None;
    let mut done = false;
    while let Some(out) = client.poll_output() {
        match out {
            Output::Stdio(_) | Output::Http { .. } => sent = Some(out),
            Output::Event(Event::Result {
                op: o, is_error, ..
            }) if o == op => {
                assert!(!is_error);
                done = true;
            }
            Output::Event(Event::Failed { error, .. }) => panic!("failed: {error}"),
            _ => {}
        }
    }
    (sent, done)
}

fn stdio_line(out: Option<Output>) -> String {
    match out {
        Some(Output::Stdio(line)) => line,
        other => panic!("expected a stdio line, got {other:?}"),
    }
}

/// A stdio client that learned the modern era from its probe and made one call.
fn stdio_client(now: Instant) -> Client {
    let mut client = Client::new(ClientConfig::new(Transport::Stdio, info()));
    let op = client.call_tool(now, "echo", arguments(), options());
    let probe = stdio_line(drain(&mut client, op).0);
    assert!(probe.contains("server/discover"));
    client
        .handle_stdio_line(now, &answer(id_of(&probe), DISCOVER_RESULT))
        .unwrap();
    let call = stdio_line(drain(&mut client, op).0);
    assert!(call.contains("tools/call"));
    client
        .handle_stdio_line(now, &answer(id_of(&call), ECHO_RESULT))
        .unwrap();
    assert!(drain(&mut client, op).1, "the first call has its result");
    client
}

#[inline(never)]
fn stdio_round_trip(client: &mut Client, now: Instant) {
    let op = client.call_tool(now, "echo", arguments(), options());
    let line = stdio_line(client.poll_output());
    let reply = answer(id_of(&line), ECHO_RESULT);
    client.handle_stdio_line(now, &reply).unwrap();
    let mut done = false;
    while let Some(out) = client.poll_output() {
        if let Output::Event(Event::Result { op: o, result, .. }) = out {
            done = o == op;
            black_box(result);
        }
    }
    assert!(done);
}

fn json_head() -> ResponseHead {
    let mut headers = Headers::new();
    headers.append("Content-Type", "application/json").unwrap();
    ResponseHead {
        status: 200,
        headers,
    }
}

/// Feeds a JSON answer to the request on `out`'s stream.
fn reply_http(client: &mut Client, now: Instant, wall: SystemTime, out: Output, result: &str) {
    let Output::Http { stream, request } = out else {
        panic!("expected an HTTP request, got {out:?}");
    };
    let reply = answer(id_of(&String::from_utf8_lossy(&request.body)), result);
    client
        .handle_response_head(now, wall, stream, json_head())
        .unwrap();
    client
        .handle_response_data(now, stream, reply.as_bytes())
        .unwrap();
    client.handle_response_end(now, stream).unwrap();
}

/// An HTTP client that listed the tools (its prefetch before the first call) and made one call.
fn http_client(now: Instant, wall: SystemTime) -> Client {
    let mut client = Client::new(ClientConfig::new(Transport::Http, info()));
    let op = client.call_tool(now, "echo", arguments(), options());
    let list = drain(&mut client, op).0.unwrap();
    assert!(
        matches!(&list, Output::Http { request, .. } if String::from_utf8_lossy(&request.body).contains("tools/list"))
    );
    reply_http(&mut client, now, wall, list, TOOLS_LIST_RESULT);
    let call = drain(&mut client, op).0.unwrap();
    assert!(
        matches!(&call, Output::Http { request, .. } if String::from_utf8_lossy(&request.body).contains("tools/call"))
    );
    reply_http(&mut client, now, wall, call, ECHO_RESULT);
    assert!(drain(&mut client, op).1, "the first call has its result");
    client
}

#[inline(never)]
fn http_round_trip(client: &mut Client, now: Instant, wall: SystemTime) {
    let op = client.call_tool(now, "echo", arguments(), options());
    let out = client.poll_output().unwrap();
    reply_http(client, now, wall, out, ECHO_RESULT);
    let mut done = false;
    while let Some(out) = client.poll_output() {
        if let Output::Event(Event::Result { op: o, result, .. }) = out {
            done = o == op;
            black_box(result);
        }
    }
    assert!(done);
}

fn mcp_call(c: &mut Criterion) {
    let now = Instant::now();
    let wall = SystemTime::now();
    let mut group = c.benchmark_group("mcp_call");
    let mut stdio = stdio_client(now);
    group.bench_function("stdio_tools_call", |b| {
        b.iter(|| stdio_round_trip(&mut stdio, now))
    });
    let mut http = http_client(now, wall);
    group.bench_function("http_tools_call", |b| {
        b.iter(|| http_round_trip(&mut http, now, wall))
    });
    group.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1))
        .sample_size(30)
}

criterion_group! {
    name = benches;
    config = config();
    targets = mcp_call
}
criterion_main!(benches);

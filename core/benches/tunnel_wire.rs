//! Tunnel wire codec against plain `serde_json::Value` on the same bytes.
//!
//! Target (from the issue): our codec within 1.5x of plain `serde_json` `Value` handling.
//!
//! - `poll_decode`: a 25-command poll envelope (24 `tools/call` commands with arguments,
//!   headers and `response_timeout`, plus one `session_termination`), decoded by
//!   [`decode_poll_body`] and by `serde_json::from_slice::<Value>`.
//! - `response_encode`: the body of `POST /response` carrying a ~2 KiB `tools/list` result.
//!   "in_loop" variants start from the upstream MCP server's bytes, as the engine does, and
//!   build the payload inside the timed loop; "prebuilt" variants only serialize.
//!
//! Run with `cargo bench -p mcpwire-core --bench tunnel_wire`.

// Bench setup works on fixed, known-good data; a failure there is a broken bench, not bad input.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use mcpwire_core::tunnel::wire::{decode_poll_body, RespType, ResponsePayload};
use serde_json::value::RawValue;
use serde_json::{json, Value};

/// A poll body of 24 `tools/call` commands and one `session_termination`.
fn poll_body() -> Vec<u8> {
    let mut commands: Vec<Value> = (0..24)
        .map(|i| {
            json!({
                "request_id": format!("cmd_01J9Z8Q4K7M2N5P8R1T4V7X{i:03}"),
                "shard_token": format!("shard-eu-west-1:{:08x}", 0x5eed_0000_u32 + i),
                "command_type": "jsonrpc",
                "channel": if i % 3 == 0 { "main" } else { "harpoon" },
                "created_at": "2026-08-25T12:13:14.123Z",
                "response_timeout": "30s",
                "headers": {
                    "Mcp-Session-Id": ["session_7f3a9c2e4b1d"],
                    "MCP-Protocol-Version": ["2026-07-28"],
                    "Mcp-Method": ["tools/call"],
                    "Mcp-Name": ["search_issues"],
                    "X-Request-Origin": ["tunnel", "bench"]
                },
                "jsonrpc": {
                    "jsonrpc": "2.0",
                    "id": format!("rpc-{i}"),
                    "method": "tools/call",
                    "params": {
                        "name": "search_issues",
                        "arguments": {
                            "query": "label:bug state:open sort:updated",
                            "repository": "example/mcpwire",
                            "limit": 50,
                            "include_closed": false,
                            "fields": ["title", "labels", "assignees", "updated_at"]
                        },
                        "_meta": { "progressToken": format!("progress-{i}") }
                    }
                }
            })
        })
        .collect();
    commands.push(json!({
        "request_id": "cmd_01J9Z8Q4K7M2N5P8R1T4V7X999",
        "shard_token": "shard-eu-west-1:5eedffff",
        "command_type": "session_termination",
        "channel": "main",
        "created_at": "2026-08-25T12:13:15.000Z",
        "response_timeout": "5s",
        "headers": { "Mcp-Session-Id": ["session_7f3a9c2e4b1d"] }
    }));
    serde_json::to_vec(&json!({ "commands": commands })).unwrap()
}

/// The upstream server's `tools/list` response, about 2 KiB of compact JSON.
fn tools_list_response() -> String {
    let tools: Vec<Value> = [
        ("search_issues", "Search issues and pull requests by query."),
        ("get_issue", "Fetch one issue with its comments."),
        ("create_issue", "Open a new issue in a repository."),
        ("list_repos", "List repositories the caller can read."),
        ("read_file", "Read a file at a given revision."),
        ("add_comment", "Add a comment to an issue or pull request."),
    ]
    .iter()
    .map(|(name, description)| {
        json!({
            "name": name,
            "description": description,
            "inputSchema": {
                "type": "object",
                "properties": {
                    "repository": { "type": "string", "description": "owner/name" },
                    "query": { "type": "string" },
                    "limit": { "type": "integer", "minimum": 1, "maximum": 100 }
                },
                "required": ["repository"]
            },
            "annotations": { "readOnlyHint": true }
        })
    })
    .collect();
    serde_json::to_string(&json!({
        "jsonrpc": "2.0",
        "id": "rpc-7",
        "result": { "tools": tools, "nextCursor": "c2VhcmNoX2lzc3Vlcw" }
    }))
    .unwrap()
}

fn response_headers() -> BTreeMap<String, Vec<String>> {
    BTreeMap::from([
        (
            "content-type".to_owned(),
            vec!["application/json".to_owned()],
        ),
        (
            "mcp-session-id".to_owned(),
            vec!["session_7f3a9c2e4b1d".to_owned()],
        ),
    ])
}

fn payload(resp_json: Box<RawValue>) -> ResponsePayload {
    ResponsePayload {
        request_id: "cmd_01J9Z8Q4K7M2N5P8R1T4V7X007".to_owned(),
        channel: "main".to_owned(),
        resp_json: Some(resp_json),
        resp_headers: response_headers(),
        resp_code: 200,
        resp_type: RespType::JsonrpcResponse,
    }
}

fn value_envelope(resp_json: Value) -> Value {
    json!({
        "request_id": "cmd_01J9Z8Q4K7M2N5P8R1T4V7X007",
        "channel": "main",
        "resp_json": resp_json,
        "resp_headers": {
            "content-type": ["application/json"],
            "mcp-session-id": ["session_7f3a9c2e4b1d"]
        },
        "resp_code": 200,
        "resp_type": "jsonrpc_response"
    })
}

fn poll_decode(c: &mut Criterion) {
    let body = poll_body();
    let decoded = decode_poll_body(&body).unwrap();
    assert_eq!(decoded.len(), 25);
    assert!(decoded.iter().all(Result::is_ok));

    let mut group = c.benchmark_group("poll_decode_25_commands");
    group.throughput(Throughput::Bytes(body.len() as u64));
    group.bench_function("mcpwire_decode_poll_body", |b| {
        b.iter(|| decode_poll_body(black_box(&body)))
    });
    group.bench_function("serde_json_value", |b| {
        b.iter(|| serde_json::from_slice::<Value>(black_box(&body)).unwrap())
    });
    group.finish();
}

fn response_encode(c: &mut Criterion) {
    let upstream = tools_list_response();
    let ours = payload(RawValue::from_string(upstream.clone()).unwrap()).to_json();
    let theirs =
        serde_json::to_vec(&value_envelope(serde_json::from_str(&upstream).unwrap())).unwrap();
    // Same document both ways (key order differs: the Value map sorts its keys).
    assert_eq!(
        serde_json::from_slice::<Value>(&ours).unwrap(),
        serde_json::from_slice::<Value>(&theirs).unwrap()
    );

    let mut group = c.benchmark_group("response_encode_2KiB_tools_list");
    group.throughput(Throughput::Bytes(ours.len() as u64));
    group.bench_function("mcpwire_payload_in_loop", |b| {
        b.iter_batched(
            || upstream.clone(),
            |bytes| payload(RawValue::from_string(bytes).unwrap()).to_json(),
            BatchSize::SmallInput,
        )
    });
    group.bench_function("serde_json_value_in_loop", |b| {
        b.iter_batched(
            || upstream.clone(),
            |bytes| {
                let resp: Value = serde_json::from_str(&bytes).unwrap();
                serde_json::to_vec(&value_envelope(resp)).unwrap()
            },
            BatchSize::SmallInput,
        )
    });
    let prebuilt_payload = payload(RawValue::from_string(upstream.clone()).unwrap());
    group.bench_function("mcpwire_payload_prebuilt", |b| {
        b.iter(|| black_box(&prebuilt_payload).to_json())
    });
    let prebuilt_value = value_envelope(serde_json::from_str(&upstream).unwrap());
    group.bench_function("serde_json_value_prebuilt", |b| {
        b.iter(|| serde_json::to_vec(black_box(&prebuilt_value)).unwrap())
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
    targets = poll_decode, response_encode
}
criterion_main!(benches);

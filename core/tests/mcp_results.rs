//! The typed results (`mcpwire_core::mcp::results`) read every result that real servers sent
//! in the recorded exchanges of `fixtures/mcp/<server>/<transport>/` (both eras: the
//! `2026-07-28` answers of the Python and TypeScript SDKs, and the `2025-11-25` answers of all
//! three servers, `server-everything` included), and through the re-exports at
//! `mcpwire_core::mcp::`.
//!
//! Each recorded request names its method; its response's `result` (a JSON body, the last SSE
//! event carrying the request's id, or a stdio line) is read by that method's type. MRTR
//! `input_required` results are the one refusal expected.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use mcpwire_core::mcp::{
    CallToolResult, ContentBlock, FromResult, GetPromptResult, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, ReadResourceResult,
    ResultError, ResultErrorKind,
};
use serde_json::Value;

const SERVERS: &[&str] = &["python-sdk", "typescript-sdk", "server-everything"];

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures/mcp")
}

/// The `result` the server answered the recorded request with, if it answered with one.
fn recorded_result(fixture: &Value) -> Option<Value> {
    let id = &fixture["request"]["body"]["id"];
    let response = &fixture["response"];
    if let Some(r) = response["body"].get("result") {
        return Some(r.clone());
    }
    response["sse_events"]
        .as_array()?
        .iter()
        .filter_map(|e| e.get("data"))
        .filter(|d| &d["id"] == id)
        .find_map(|d| d.get("result").cloned())
}

/// Reads `result` as `T`: accepted results write back a normal form that reads back equal.
fn read<T: FromResult + PartialEq + std::fmt::Debug>(result: &Value) -> Result<T, ResultError> {
    let r = T::from_json(&result.to_string())?;
    assert_eq!(r.raw(), result);
    assert_eq!(T::from_value(r.to_value()).unwrap(), r);
    Ok(r)
}

/// What was read, by method, for the summary assertions.
#[derive(Default)]
struct Seen {
    read: BTreeMap<String, usize>,
    input_required: usize,
    tools: usize,
    unknown_blocks: usize,
}

fn read_fixture(path: &Path, seen: &mut Seen) {
    let fixture: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let Some(method) = fixture["request"]["body"]["method"].as_str() else {
        return;
    };
    let Some(result) = recorded_result(&fixture) else {
        return;
    };
    let name = path.display();
    let outcome = match method {
        "tools/call" => read::<CallToolResult>(&result).map(|r| {
            seen.unknown_blocks += r
                .content
                .iter()
                .filter(|b| matches!(b, ContentBlock::Unknown(_)))
                .count();
        }),
        "tools/list" => read::<ListToolsResult>(&result).map(|r| seen.tools += r.tools.len()),
        "prompts/list" => read::<ListPromptsResult>(&result).map(drop),
        "prompts/get" => read::<GetPromptResult>(&result).map(drop),
        "resources/list" => read::<ListResourcesResult>(&result).map(drop),
        "resources/templates/list" => read::<ListResourceTemplatesResult>(&result).map(drop),
        "resources/read" => read::<ReadResourceResult>(&result).map(drop),
        _ => return,
    };
    match outcome {
        Ok(()) => *seen.read.entry(method.to_owned()).or_default() += 1,
        Err(e) if result["resultType"] == "input_required" => {
            assert_eq!(
                e.kind(),
                &ResultErrorKind::NotComplete("input_required".into()),
                "{name}"
            );
            assert_eq!(e.path(), "resultType");
            seen.input_required += 1;
        }
        Err(e) => panic!("{name}: {e}"),
    }
}

#[test]
fn every_recorded_result_of_both_eras_reads() {
    let mut seen = Seen::default();
    for server in SERVERS {
        for transport in ["http", "stdio"] {
            let dir = fixtures().join(server).join(transport);
            let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|x| x == "json"))
                .collect();
            files.sort();
            for f in files {
                read_fixture(&f, &mut seen);
            }
        }
    }
    for method in [
        "tools/call",
        "tools/list",
        "prompts/list",
        "prompts/get",
        "resources/list",
        "resources/templates/list",
        "resources/read",
    ] {
        assert!(
            seen.read.get(method).copied().unwrap_or(0) >= 2,
            "{method}: {:?}",
            seen.read
        );
    }
    // The MRTR rounds of both SDKs over both transports.
    assert!(seen.input_required >= 4, "{}", seen.input_required);
    assert!(seen.tools > 10);
    assert_eq!(seen.unknown_blocks, 0);
}

#[test]
fn a_legacy_server_s_tool_list_keeps_its_execution_member() {
    let path = fixtures().join("server-everything/stdio/05-legacy-tools-list.json");
    let fixture: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let tools = read::<ListToolsResult>(&recorded_result(&fixture).unwrap()).unwrap();
    assert_eq!(tools.ttl_ms, None);
    let echo = tools.tools.iter().find(|t| t.name == "echo").unwrap();
    assert_eq!(echo.other["execution"]["taskSupport"], "forbidden");
    assert!(echo.annotations.as_ref().unwrap().is_read_only());
}

#[test]
fn a_modern_call_result_carries_structured_content_and_the_server_s_identity() {
    let path = fixtures().join("python-sdk/http/03-tools-call-echo.json");
    let fixture: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let r = read::<CallToolResult>(&recorded_result(&fixture).unwrap()).unwrap();
    assert_eq!(r.text(), "hello");
    assert_eq!(r.structured_content.as_ref().unwrap()["result"], "hello");
    let info = &r.meta.as_ref().unwrap()["io.modelcontextprotocol/serverInfo"];
    assert_eq!(info["name"], "mcpwire-fixture-py");
}

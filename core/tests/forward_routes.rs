//! How a forward becomes work for its channel's server: the HTTP request for a Streamable HTTP
//! server, or an admission (or a local refusal) by a stdio binding. Both drivers rely on these.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Instant;

use mcpwire_core::http::{Headers, Method};
use mcpwire_core::tunnel::engine::{Forward, ForwardKind};
use mcpwire_core::tunnel::failure::FailureSource;
use mcpwire_core::tunnel::stdio::StdioOutput;
use mcpwire_core::tunnel::{CommandId, StdioBinding, StdioConfig};
use serde_json::value::RawValue;

const PING: &str = r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#;

fn json_rpc(payload: &str) -> ForwardKind {
    ForwardKind::JsonRpc {
        payload: RawValue::from_string(payload.to_owned()).unwrap(),
        method: Some("ping".into()),
        id: None,
    }
}

fn forward(kind: ForwardKind) -> Forward {
    let mut headers = Headers::new();
    headers.append("Mcp-Session-Id", "s-1").unwrap();
    Forward {
        cmd: CommandId(3),
        channel: "main".into(),
        request_id: "req-3".into(),
        headers,
        deadline: Some(Instant::now()),
        kind,
    }
}

#[test]
fn http_forward_posts_the_payload_with_the_forward_headers() {
    let request = forward(json_rpc(PING)).into_http_request("http://127.0.0.1:9/mcp".into());
    assert_eq!(request.method, Method::Post);
    assert_eq!(request.url, "http://127.0.0.1:9/mcp");
    assert_eq!(request.body, PING.as_bytes());
    assert_eq!(request.headers.get("mcp-session-id"), Some("s-1"));
}

#[test]
fn http_session_termination_is_a_bodiless_delete_with_the_forward_headers() {
    let request =
        forward(ForwardKind::SessionTermination).into_http_request("http://127.0.0.1:9/mcp".into());
    assert_eq!(request.method, Method::Delete);
    assert!(request.body.is_empty());
    assert_eq!(request.headers.get("mcp-session-id"), Some("s-1"));
}

#[test]
fn stdio_forward_of_a_payload_is_admitted_and_written_to_the_child() {
    let mut binding = StdioBinding::new(StdioConfig::default());
    binding
        .handle_forward(Instant::now(), CommandId(3), &json_rpc(PING))
        .unwrap();
    let written = std::iter::from_fn(|| binding.poll_output())
        .find_map(|o| match o {
            StdioOutput::Write(bytes) => Some(bytes),
            _ => None,
        })
        .expect("the payload is written");
    assert_eq!(written, format!("{PING}\n").into_bytes());
}

#[test]
fn stdio_session_termination_is_refused_locally_and_writes_nothing() {
    let mut binding = StdioBinding::new(StdioConfig::default());
    let failure = binding
        .handle_forward(
            Instant::now(),
            CommandId(3),
            &ForwardKind::SessionTermination,
        )
        .unwrap_err();
    assert_eq!(failure.source(), FailureSource::ClientInternal);
    assert!(binding.poll_output().is_none());
}

#[test]
fn stdio_forward_of_an_invalid_payload_is_refused_locally() {
    let mut binding = StdioBinding::new(StdioConfig::default());
    let failure = binding
        .handle_forward(
            Instant::now(),
            CommandId(3),
            &json_rpc(r#"{"jsonrpc":"2.0"}"#),
        )
        .unwrap_err();
    assert_eq!(failure.source(), FailureSource::ClientInternal);
    assert!(binding.poll_output().is_none());
}

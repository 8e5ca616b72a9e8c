//! The `mcpwire` binary as a person runs it.
#![allow(clippy::unwrap_used)]

use std::process::Command;

#[test]
fn tunnel_demo_runs_offline_and_reports_every_lifecycle() {
    let out = Command::new(env!("CARGO_BIN_EXE_mcpwire"))
        .args(["tunnel", "demo"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    for needle in [
        "req_echo [jsonrpc_notify]",
        "req_echo: jsonrpc_response 200 delivered",
        "req_note: notify_ack 202 delivered",
        "req_end: session_termination_response 204 delivered",
        "req_expired: deadline passed before its forward",
        "req_slow: deadline passed while the MCP server worked",
        "req_future: unknown command_type",
        "503 Service Unavailable, Retry-After: 1",
        "summary: 5 commands answered",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
    assert!(!text.contains("demo-key-never-printed"));
}

#[test]
fn help_explains_the_commands() {
    let out = Command::new(env!("CARGO_BIN_EXE_mcpwire"))
        .args(["tunnel", "--help"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("demo") && text.contains("in-process control plane"),
        "{text}"
    );
}

#[test]
fn unknown_subcommand_is_a_usage_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_mcpwire"))
        .args(["tunnel", "nope"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn demo_runs_the_whole_path_on_loopback_and_exits_zero() {
    let out = Command::new(env!("CARGO_BIN_EXE_mcpwire"))
        .arg("demo")
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for needle in [
        "1. tools/list",
        "HTTP 200, 7 tools: echo,",
        "result text \"hello through the tunnel\"",
        "3 notifications/progress events, then the result",
        "jsonrpc_notify 200 x3, jsonrpc_response 200",
        "response_timeout 300ms",
        "HTTP 504",
        "session_termination_response 204",
        "method=tools/call",
        "outcome=expired stage=during_forward",
        "method=session_termination",
        "summary: 5 steps behaved; 6 commands through the tunnel",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
    assert!(!text.contains("sk-demo-"), "the key was printed:\n{text}");
}

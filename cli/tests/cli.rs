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

/// `mcpwire-conformance-server` (a test binary, not a subcommand of `mcpwire`) prints its loopback URL, answers a
/// `2026-07-28` request on it with one of its fixtures, and exits 0 on SIGTERM, on both drivers.
#[cfg(unix)]
#[test]
fn conformance_server_serves_its_fixtures_and_stops_on_sigterm() {
    use std::io::{BufRead, BufReader, Read, Write};
    use std::process::Stdio;
    use std::time::{Duration, Instant};

    let help = Command::new(env!("CARGO_BIN_EXE_mcpwire"))
        .arg("--help")
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&help.stdout).contains("conformance-server"));

    for driver in ["blocking", "smol"] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_mcpwire-conformance-server"))
            .args(["--driver", driver])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut url = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut url)
            .unwrap();
        let url = url.trim().to_owned();
        let addr = url
            .strip_prefix("http://")
            .and_then(|rest| rest.strip_suffix("/mcp"))
            .unwrap_or_else(|| panic!("not a loopback /mcp URL: {url}"));
        assert!(addr.starts_with("127.0.0.1:"), "{url}");

        let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"test_simple_text","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        write!(
            s,
            "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: test_simple_text\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut answer = String::new();
        let _ = s.read_to_string(&mut answer);
        assert!(answer.starts_with("HTTP/1.1 200"), "{driver}: {answer}");
        assert!(
            answer.contains("This is a simple text response for testing."),
            "{driver}: {answer}"
        );

        let killed = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
        let deadline = Instant::now() + Duration::from_secs(10);
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("{driver}: conformance-server did not stop on SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(status.success(), "{driver}: {status}");
    }
}

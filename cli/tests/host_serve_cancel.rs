//! `mcpwire host serve` passes a downstream cancellation upstream: a downstream client that
//! gives up on a `tools/call` (`notifications/cancelled`) makes the gateway cancel its own
//! request to the upstream server, which stops the call (the reference server's `slow` tool
//! counts the calls it stopped), in both eras. The gateway answers nothing for the cancelled
//! request, and the next call goes through as before.
#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use mcpwire::mcp::blocking::McpClient;
use mcpwire::mcp::{ClientOptions, Error, OpOptions, Operation, ProtocolChoice, StdioCommand};
use mcpwire_dev::mcp_server::{self, McpServer, McpServerHandle};
use serde_json::json;

struct Fixture {
    dir: PathBuf,
    upstream: McpServerHandle,
}

impl Fixture {
    fn new(tag: &str) -> Fixture {
        let dir = std::env::temp_dir().join(format!(
            "mcpwire-host-serve-cancel-{tag}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let upstream = McpServer::start_http(mcp_server::Config::default(), "127.0.0.1:0").unwrap();
        let config = json!({
            "mcpServers": {"up": {"type": "http", "url": upstream.url(), "trust": "trusted"}},
            "permissions": {"allow": ["mcp__up__echo", "mcp__up__slow"]},
        });
        std::fs::write(dir.join("mcp.json"), config.to_string()).unwrap();
        Fixture { dir, upstream }
    }

    fn gateway(&self, era: ProtocolChoice) -> McpClient {
        let cmd = StdioCommand::new(env!("CARGO_BIN_EXE_mcpwire")).args([
            "host".to_owned(),
            "serve".to_owned(),
            "--config".to_owned(),
            self.dir.join("mcp.json").display().to_string(),
            "--allow-http-loopback".to_owned(),
            "--state-dir".to_owned(),
            self.dir.join("state").display().to_string(),
        ]);
        McpClient::connect_stdio_command(&cmd, ClientOptions::default().with_protocol(era)).unwrap()
    }

    /// Waits up to `within` for `what` of the upstream's counters to hold.
    fn upstream_sees(&self, within: Duration, what: impl Fn(&mcp_server::Stats) -> bool) -> bool {
        let until = Instant::now() + within;
        loop {
            if what(&self.upstream.server().stats()) {
                return true;
            }
            if Instant::now() >= until {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn a_cancelled_call_is_cancelled_upstream(era: ProtocolChoice, tag: &str) {
    let f = Fixture::new(tag);
    let client = f.gateway(era);
    // The gateway connects its upstream in the background: a first call waits for it.
    let echo = client
        .call_tool("up__echo", json!({"text": "before"}))
        .unwrap();
    assert_eq!(echo.text(), "before", "{echo:?}");

    let slow = client
        .start(
            Operation::CallTool {
                name: "up__slow".to_owned(),
                arguments: json!({"ms": 30_000}).as_object().unwrap().clone(),
            },
            OpOptions::default(),
        )
        .unwrap();
    assert!(
        f.upstream_sees(Duration::from_secs(10), |s| s
            .tool_calls
            .get("slow")
            .is_some_and(|n| *n == 1)),
        "the slow call never reached the upstream: {:?}",
        f.upstream.server().stats()
    );
    assert_eq!(f.upstream.server().stats().cancelled, 0);
    let started = Instant::now();
    let outcome = slow.cancel();
    assert!(
        matches!(outcome, Err(Error::Cancelled)),
        "the cancelled call ended with {outcome:?}"
    );
    assert!(
        f.upstream_sees(Duration::from_secs(10), |s| s.cancelled == 1),
        "the upstream call was not cancelled: {:?}",
        f.upstream.server().stats()
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the cancellation took {:?}",
        started.elapsed()
    );

    // The gateway and its upstream go on as before.
    let echo = client
        .call_tool("up__echo", json!({"text": "after"}))
        .unwrap();
    assert_eq!(echo.text(), "after", "{echo:?}");
    assert_eq!(f.upstream.server().stats().tool_calls.get("slow"), Some(&1));
    client.close();
    let _ = std::fs::remove_dir_all(&f.dir);
}

#[test]
fn a_downstream_cancellation_cancels_the_upstream_call_modern() {
    a_cancelled_call_is_cancelled_upstream(ProtocolChoice::Modern, "modern");
}

#[test]
fn a_downstream_cancellation_cancels_the_upstream_call_legacy() {
    a_cancelled_call_is_cancelled_upstream(ProtocolChoice::Legacy, "legacy");
}

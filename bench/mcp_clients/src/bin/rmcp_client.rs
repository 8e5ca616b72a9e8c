//! rmcp, the official Rust SDK, in the benchmark (see the crate docs for the command line).
//!
//! It starts the way rmcp documents a client: `ServiceExt`-style start-up on a Tokio runtime,
//! with `ClientLifecycleMode::Auto` so it probes `server/discover` and speaks 2026-07-28 when
//! the server does (as mcpwire's clients do by default), then `Peer::call_tool`.
//! `RMCP_RUNTIME=multi` (the default: what `#[tokio::main]` builds) or `current` (a
//! single-threaded runtime) picks the Tokio runtime.

use mcpwire_bench_mcp_clients::{arguments, fail, report, Args, Target, Timed, TEXT, TOOL};
use rmcp::model::{CallToolRequestParams, ProtocolVersion};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientLifecycleMode, ClientServiceExt, RoleClient};

async fn run(args: Args, label: &str) {
    let lifecycle = ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: None,
    };
    let client: rmcp::service::RunningService<RoleClient, ()> = match &args.target {
        Target::Http(url) => {
            let transport = StreamableHttpClientTransport::from_uri(url.as_str());
            ().serve_with_lifecycle(transport, lifecycle).await
        }
        Target::Stdio(program, rest) => {
            let mut command = tokio::process::Command::new(program);
            command.args(rest);
            let transport = TokioChildProcess::new(command).unwrap_or_else(|e| fail(e));
            ().serve_with_lifecycle(transport, lifecycle).await
        }
    }
    .unwrap_or_else(|e| fail(e));
    let serde_json::Value::Object(object) = arguments() else {
        fail("the arguments are not an object")
    };
    let call = || async {
        let params = CallToolRequestParams::new(TOOL).with_arguments(object.clone());
        let result = client.call_tool(params).await.unwrap_or_else(|e| fail(e));
        // Checked on rmcp's typed result (what its users read), the same rule as check_result.
        let text = result.content.first().and_then(|c| c.as_text());
        if result.is_error == Some(true) || text.map(|t| t.text.as_str()) != Some(TEXT) {
            fail(format!("unexpected result: {result:?}"));
        }
    };
    for _ in 0..args.warmup {
        call().await;
    }
    let mut timed = Timed::start(args.time_limit);
    while timed.more(args.n) {
        call().await;
        timed.done += 1;
    }
    let version = client
        .peer_info()
        .map_or_else(|| "?".to_owned(), |i| i.protocol_version.to_string());
    report(label, &args, &version, &timed);
    let _ = client.cancel().await;
}

fn main() {
    let args = Args::from_env();
    let (runtime, label) = match std::env::var("RMCP_RUNTIME").as_deref() {
        Ok("current") => (
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build(),
            "rmcp-current",
        ),
        Ok("multi") | Err(_) => (
            tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build(),
            "rmcp",
        ),
        Ok(other) => fail(format!(
            "RMCP_RUNTIME must be multi or current, not {other:?}"
        )),
    };
    runtime
        .unwrap_or_else(|e| fail(e))
        .block_on(run(args, label));
}

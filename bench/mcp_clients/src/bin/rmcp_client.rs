//! rmcp, the official Rust SDK, in the benchmark (see the crate docs for the command line).
//!
//! It starts the way rmcp documents a client: `ServiceExt`-style start-up on a Tokio runtime,
//! with `ClientLifecycleMode::Auto` so it probes `server/discover` and speaks 2026-07-28 when
//! the server does (as mcpwire's clients do by default), then `Peer::call_tool`.
//! `RMCP_RUNTIME=multi` (the default: what `#[tokio::main]` builds) or `current` (a
//! single-threaded runtime) picks the Tokio runtime.
//!
//! Concurrent runs: CONCURRENCY Tokio tasks (`tokio::spawn`), each with a clone of the client's
//! `Peer`, each making calls one after another while the shared [`Window`] hands them out.

use std::sync::Arc;

use mcpwire_bench_mcp_clients::{arguments, fail, report, Args, Target, Timed, Window, TEXT, TOOL};
use rmcp::model::{CallToolRequestParams, JsonObject, ProtocolVersion};
use rmcp::service::Peer;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientLifecycleMode, ClientServiceExt, RoleClient};

async fn call(peer: &Peer<RoleClient>, arguments: &JsonObject) {
    let params = CallToolRequestParams::new(TOOL).with_arguments(arguments.clone());
    let result = peer.call_tool(params).await.unwrap_or_else(|e| fail(e));
    // Checked on rmcp's typed result (what its users read), the same rule as check_result.
    let text = result.content.first().and_then(|c| c.as_text());
    if result.is_error == Some(true) || text.map(|t| t.text.as_str()) != Some(TEXT) {
        fail(format!("unexpected result: {result:?}"));
    }
}

/// `concurrency` tasks on clones of `peer`, making the window's calls.
async fn calls_at_once(
    peer: &Peer<RoleClient>,
    arguments: &JsonObject,
    window: Arc<Window>,
    concurrency: usize,
) {
    let tasks: Vec<_> = (0..concurrency)
        .map(|_| {
            let (peer, arguments, window) = (peer.clone(), arguments.clone(), Arc::clone(&window));
            tokio::spawn(async move {
                while window.claim() {
                    call(&peer, &arguments).await;
                    window.done();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap_or_else(|e| fail(e));
    }
}

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
    let peer = client.peer();
    let mut timed;
    if args.concurrency == 1 {
        for _ in 0..args.warmup {
            call(peer, &object).await;
        }
        timed = Timed::start(args.time_limit);
        while timed.more(args.n) {
            call(peer, &object).await;
            timed.done += 1;
        }
    } else {
        let warmup = Arc::new(Window::untimed(args.warmup));
        calls_at_once(peer, &object, warmup, args.concurrency).await;
        timed = Timed::start(args.time_limit);
        let window = Arc::new(timed.window(args.n));
        calls_at_once(peer, &object, Arc::clone(&window), args.concurrency).await;
        timed.done = window.calls_done();
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

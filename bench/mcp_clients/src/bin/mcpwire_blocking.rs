//! mcpwire's blocking MCP client in the benchmark (see the crate docs for the command line).
//!
//! Concurrent runs: CONCURRENCY threads, each with a clone of the one client handle, each
//! making calls one after another while the shared [`Window`] hands them out.

use std::thread;

use mcpwire::mcp::blocking::McpClient;
use mcpwire::mcp::ClientOptions;
use mcpwire_bench_mcp_clients::{
    arguments, check_result, fail, report, Args, Target, Timed, Window, TOOL,
};
use mcpwire_core::mcp::OpOptions;

fn call(client: &McpClient) {
    // Plain calls, as rmcp and the TypeScript SDK send them: no progress token.
    let result = client
        .call_tool_with(TOOL, arguments(), OpOptions::default())
        .unwrap_or_else(|e| fail(e));
    check_result(result.raw()).unwrap_or_else(|e| fail(e));
}

/// `concurrency` threads on clones of `client`, making the window's calls.
fn calls_at_once(client: &McpClient, window: &Window, concurrency: usize) {
    thread::scope(|scope| {
        for _ in 0..concurrency {
            let client = client.clone();
            scope.spawn(move || {
                while window.claim() {
                    call(&client);
                    window.done();
                }
            });
        }
    });
}

fn main() {
    let args = Args::from_env();
    let mut options = ClientOptions::default();
    // At least as many HTTP exchanges and operations at once as calls in flight (the
    // defaults, 16 and 64, already are at up to 16).
    options.max_exchanges = options.max_exchanges.max(args.concurrency);
    options.max_in_flight = options.max_in_flight.max(args.concurrency);
    let client = match &args.target {
        Target::Http(url) => McpClient::connect_http(url, options),
        Target::Stdio(program, rest) => {
            let rest: Vec<&str> = rest.iter().map(String::as_str).collect();
            McpClient::connect_stdio(program, &rest, options)
        }
    }
    .unwrap_or_else(|e| fail(e));
    let mut timed;
    if args.concurrency == 1 {
        for _ in 0..args.warmup {
            call(&client);
        }
        timed = Timed::start(args.time_limit);
        while timed.more(args.n) {
            call(&client);
            timed.done += 1;
        }
    } else {
        calls_at_once(&client, &Window::untimed(args.warmup), args.concurrency);
        timed = Timed::start(args.time_limit);
        let window = timed.window(args.n);
        calls_at_once(&client, &window, args.concurrency);
        timed.done = window.calls_done();
    }
    let version = client
        .era()
        .and_then(|e| e.protocol_version)
        .unwrap_or_else(|| "?".into());
    report("mcpwire-blocking", &args, &version, &timed);
    client.close();
}

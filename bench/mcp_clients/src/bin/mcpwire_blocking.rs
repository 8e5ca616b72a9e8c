//! mcpwire's blocking MCP client in the benchmark (see the crate docs for the command line).

use mcpwire::mcp::blocking::McpClient;
use mcpwire::mcp::ClientOptions;
use mcpwire_bench_mcp_clients::{arguments, check_result, fail, report, Args, Target, Timed, TOOL};
use mcpwire_core::mcp::OpOptions;

fn call(client: &mut McpClient) {
    // Plain calls, as rmcp and the TypeScript SDK send them: no progress token.
    let result = client
        .call_tool_with(TOOL, arguments(), OpOptions::default())
        .unwrap_or_else(|e| fail(e));
    check_result(&result).unwrap_or_else(|e| fail(e));
}

fn main() {
    let args = Args::from_env();
    let options = ClientOptions::default();
    let client = match &args.target {
        Target::Http(url) => McpClient::connect_http(url, options),
        Target::Stdio(program, rest) => {
            let rest: Vec<&str> = rest.iter().map(String::as_str).collect();
            McpClient::connect_stdio(program, &rest, options)
        }
    }
    .unwrap_or_else(|e| fail(e));
    for _ in 0..args.warmup {
        call(&mut client);
    }
    let mut timed = Timed::start(args.time_limit);
    while timed.more(args.n) {
        call(&mut client);
        timed.done += 1;
    }
    let version = client
        .era()
        .and_then(|e| e.protocol_version)
        .unwrap_or_else(|| "?".into());
    report("mcpwire-blocking", &args, &version, &timed);
    client.close();
}

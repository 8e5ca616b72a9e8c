//! The gateway's added latency (bench/gateway.sh): the same `tools/call echo` made by mcpwire's
//! blocking client straight to an upstream server over stdio, and through
//! `mcpwire host serve` in front of the same server (the gateway, itself over stdio, calling
//! the upstream over stdio), interleaved in rounds so both see the same machine. Every call is
//! timed on its own; the line printed per path gives p50, p90, p99 and the mean, and the last
//! line the gateway's added p50 and p99.
//!
//! ```text
//! gateway_latency "DIRECT COMMAND" "GATEWAY COMMAND" GATEWAY_TOOL N [ROUNDS] [WARMUP]
//! ```
//! Commands are split on whitespace and started without a shell.

use std::time::{Duration, Instant};

use mcpwire::mcp::blocking::McpClient;
use mcpwire::mcp::ClientOptions;
use mcpwire_bench_mcp_clients::{arguments, check_result, fail, TOOL};
use mcpwire_core::mcp::OpOptions;

fn connect(command: &str) -> McpClient {
    let mut words = command.split_whitespace();
    let program = words.next().unwrap_or_else(|| fail("an empty command"));
    let rest: Vec<&str> = words.collect();
    McpClient::connect_stdio(program, &rest, ClientOptions::default()).unwrap_or_else(|e| fail(e))
}

fn call(client: &McpClient, tool: &str) -> Duration {
    let start = Instant::now();
    let result = client
        .call_tool_with(tool, arguments(), OpOptions::default())
        .unwrap_or_else(|e| fail(e));
    let took = start.elapsed();
    check_result(result.raw()).unwrap_or_else(|e| fail(e));
    took
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn summary(name: &str, mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort();
    let mean = samples.iter().sum::<Duration>() / samples.len().max(1) as u32;
    let (p50, p90, p99) = (
        percentile(&samples, 50.0),
        percentile(&samples, 90.0),
        percentile(&samples, 99.0),
    );
    println!(
        "{name:<8} calls={:<6} p50={:>8.1} us  p90={:>8.1} us  p99={:>8.1} us  mean={:>8.1} us",
        samples.len(),
        us(p50),
        us(p90),
        us(p99),
        us(mean)
    );
    (p50, p99)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: gateway_latency \"DIRECT COMMAND\" \"GATEWAY COMMAND\" GATEWAY_TOOL N [ROUNDS] [WARMUP]";
    let [direct_cmd, gateway_cmd, gateway_tool, n, rest @ ..] = args.as_slice() else {
        fail(usage)
    };
    let number = |s: &str| s.parse::<usize>().unwrap_or_else(|_| fail(usage));
    let n = number(n);
    let rounds = rest.first().map_or(5, |s| number(s)).max(1);
    let warmup = rest.get(1).map_or(200, |s| number(s));
    let direct = connect(direct_cmd);
    let gateway = connect(gateway_cmd);
    for _ in 0..warmup {
        call(&direct, TOOL);
        call(&gateway, gateway_tool);
    }
    let per_round = n.div_ceil(rounds);
    let (mut d, mut g) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for _ in 0..rounds {
        for _ in 0..per_round {
            d.push(call(&direct, TOOL));
        }
        for _ in 0..per_round {
            g.push(call(&gateway, gateway_tool));
        }
    }
    let (d50, d99) = summary("direct", d);
    let (g50, g99) = summary("gateway", g);
    println!(
        "added    p50={:>8.1} us  p99={:>8.1} us",
        us(g50) - us(d50),
        us(g99) - us(d99)
    );
    direct.close();
    gateway.close();
}

//! `mcpwire-conformance-server`: the server the official MCP conformance runner's server
//! scenarios test (`tests/conformance/server.sh`): the fixtures they name, on the server core,
//! over Streamable HTTP. Test scaffolding, so a binary of its own: the shipped `mcpwire` does
//! not carry it.
//!
//! ```text
//! mcpwire-conformance-server [--listen 127.0.0.1:0] [--driver blocking|smol]
//! ```
//!
//! Prints its URL on stdout, then serves until SIGINT or SIGTERM.

use std::process::ExitCode;

use clap::Parser;
use mcpwire_cli::conformance_server::{run, Driver};

/// The server the official MCP conformance runner's server scenarios test: the fixtures they
/// name, on the server core, over Streamable HTTP; prints its URL, serves until SIGINT or
/// SIGTERM.
#[derive(Parser, Debug)]
#[command(name = "mcpwire-conformance-server", version)]
struct Args {
    /// The address to listen on.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: std::net::SocketAddr,
    /// The driver that runs it.
    #[arg(long, value_enum, default_value = "blocking")]
    driver: Driver,
}

fn main() -> ExitCode {
    let args = Args::parse();
    run(args.listen, args.driver)
}

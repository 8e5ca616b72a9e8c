//! `mcpwire-dev dev ...`: the `mcpwire dev` subcommands, built into this crate so end-to-end
//! tests can start the reference MCP server as a stdio child (`--mcp.command`) through the same
//! code as `mcpwire dev mcp-server --stdio` (a crate's tests can only name its own binaries).

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use mcpwire_drivers::dev::cli::DevCommand;

/// The `mcpwire dev` commands, for tests.
#[derive(Parser, Debug)]
#[command(name = "mcpwire-dev")]
struct Cli {
    #[command(subcommand)]
    command: Top,
}

#[derive(Subcommand, Debug)]
enum Top {
    /// Local servers (as `mcpwire dev`).
    Dev {
        #[command(subcommand)]
        command: DevCommand,
    },
}

fn main() -> ExitCode {
    let Top::Dev { command } = Cli::parse().command;
    mcpwire_drivers::dev::cli::run(command)
}
